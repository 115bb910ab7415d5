//! Writes the seed corpus (`corpus/<target>/`) from real exchanges: the
//! same clients, OSTs and requests as the targets use, run to completion,
//! with every message recorded as the targets decode it. Run it again
//! whenever a message changes (`cargo run --release --bin seeds`).

use lanefs_core::client::Client;
use lanefs_core::extent::Extent;
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::{EnqueueFlags, GroupId, LockMode, LockRequest};
use lanefs_core::msg::{Payload, ToClient, ToOst};
use lanefs_core::ost::Ost;
use lanefs_core::store::MemStore;
use lanefs_core::{ClientId, Instant, LockHandle, ObjectId, ObjectKey, OstIndex, Xid};
use lanefs_fuzz::{client_setup, encode_all, new_ost, start, ClientAction, OstAction, Start};
use lanefs_mds::{CreateMode, MdsRequest, StripeSpec};
use lanefs_net::codec::encode;
use lanefs_net::proto::{MdsCall, Role, Wire, MAGIC, PROTOCOL_VERSION};
use std::path::Path;

fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus directory");
    std::fs::write(dir.join(name), bytes).expect("seed written");
}

/// Clients and OSTs exchanging messages until nothing moves; `on_ost` and
/// `on_client` see every message delivered.
struct Exchange {
    clients: Vec<Client>,
    osts: Vec<Ost<MemStore>>,
    now: Instant,
}

impl Exchange {
    fn run(&mut self, mut on_ost: impl FnMut(usize, &ToOst, bool), mut on_client: impl FnMut(usize, u32, &ToClient)) {
        for _ in 0..10_000 {
            let mut moved = false;
            for (c, client) in self.clients.iter_mut().enumerate() {
                while let Some((ost, message)) = client.poll_transmit() {
                    moved = true;
                    on_ost(c, &message, false);
                    self.osts[ost.0 as usize].handle_message(self.now, ClientId(c as u32), message);
                }
                while client.poll_event().is_some() {}
            }
            for (o, ost) in self.osts.iter_mut().enumerate() {
                while let Some(request) = ost.poll_sync() {
                    moved = true;
                    on_ost(usize::MAX, &ToOst::Connect, true);
                    ost.handle_synced(self.now, request.token);
                }
                while let Some((to, message)) = ost.poll_transmit() {
                    moved = true;
                    on_client(to.0 as usize, o as u32, &message);
                    self.clients[to.0 as usize].handle_message(self.now, OstIndex(o as u32), message);
                }
            }
            if !moved {
                return;
            }
        }
    }
}

fn two_osts() -> Vec<Ost<MemStore>> {
    vec![new_ost(2), new_ost(2)]
}

/// The client target's own client against two real OSTs: what they answer.
fn client_seeds() {
    let (client, fh) = client_setup();
    let mut exchange = Exchange { clients: vec![client], osts: two_osts(), now: Instant::ZERO };
    let mut actions = Vec::new();
    let record = |actions: &mut Vec<ClientAction>, _: usize, ost: u32, message: &ToClient| {
        actions.push(ClientAction::Message { ost: ost as u8, message: message.clone() })
    };
    exchange.run(|_, _, _| {}, |c, o, m| record(&mut actions, c, o, m));
    write_seed("client", "setup", &encode_all(&actions));
    let more = [
        Start::Write { offset: 0, len: 5000 },
        Start::Read { offset: 0, len: 9000 },
        Start::Truncate { size: 70_000 },
        Start::Stat,
        Start::GroupLock { gid: 3 },
        Start::Write { offset: 100, len: 100 },
        Start::GroupUnlock { gid: 3 },
        Start::Lockahead { offset: 200_000, len: 4096, asynchronous: false },
        Start::Fsync,
    ];
    for op in more {
        actions.push(ClientAction::Start(op.clone()));
        start(&mut exchange.clients[0], exchange.now, fh, op);
        exchange.run(|_, _, _| {}, |c, o, m| record(&mut actions, c, o, m));
    }
    actions.push(ClientAction::Message { ost: 1, message: ToClient::Evicted });
    actions.push(ClientAction::Advance { ms: 700_000 });
    actions.push(ClientAction::Unreachable { ost: 0 });
    write_seed("client", "operations", &encode_all(&actions));
}

/// Two clients sharing a file on one OST, their messages as the OST
/// target's actions (clients 0 and 1).
fn ost_seeds() {
    let layout = Layout::new(64 << 10, vec![ObjectKey { ost: OstIndex(0), object: ObjectId(1) }]).expect("layout");
    let (mut a, _) = client_setup();
    let (mut b, _) = client_setup();
    for client in [&mut a, &mut b] {
        while client.poll_transmit().is_some() {}
    }
    let (fa, fb) = (a.open(layout.clone()), b.open(layout));
    let now = Instant::ZERO;
    let _ = a.write(now, fa, 0, vec![1; 40_000]);
    let _ = b.write(now, fb, 20_000, vec![2; 40_000]);
    let _ = a.stat(now, fa);
    let _ = b.read(now, fb, 0, 60_000);
    let _ = a.fsync(now, fa);
    let _ = b.truncate(now, fb, 10_000);
    let mut exchange = Exchange { clients: vec![a, b], osts: vec![new_ost(2)], now };
    let mut actions = Vec::new();
    exchange.run(
        |c, message, synced| {
            actions.push(match synced {
                true => OstAction::Synced,
                false => OstAction::Message { client: c as u8, message: message.clone() },
            })
        },
        |_, _, _| {},
    );
    let mut seed = vec![2u8];
    seed.extend(encode_all(&actions));
    write_seed("ost", "two-clients", &seed);

    // Requests a correct client never sends, and a callback timeout.
    let request =
        |mode, start, end| LockRequest { mode, extent: Extent { start, end }, flags: EnqueueFlags::default() };
    let enqueue = |client, xid, request| OstAction::Message {
        client,
        message: ToOst::Enqueue { xid: Xid(xid), object: ObjectId(1), request },
    };
    let hostile = vec![
        enqueue(0, 1, request(LockMode::ProtectedWrite, 0, u64::MAX)),
        enqueue(1, 1, request(LockMode::ProtectedRead, 4096, 8191)),
        enqueue(2, 1, request(LockMode::Group(GroupId(1)), 0, u64::MAX)),
        enqueue(3, 2, request(LockMode::ProtectedWrite, 8192, 4095)),
        OstAction::Message {
            client: 0,
            message: ToOst::Write {
                xid: Xid(2),
                object: ObjectId(1),
                offset: u64::MAX - 10,
                data: Payload::Bytes(vec![1; 64]),
            },
        },
        OstAction::Message {
            client: 1,
            message: ToOst::Read { xid: Xid(3), object: ObjectId(1), offset: 1 << 59, len: 1 << 40 },
        },
        OstAction::Message { client: 2, message: ToOst::Getattr { xid: Xid(4), object: ObjectId(1) } },
        OstAction::Message { client: 0, message: ToOst::GlimpseReply { xid: Xid(1), size: 77 } },
        OstAction::Message { client: 1, message: ToOst::Cancel { lock: LockHandle(1) } },
        OstAction::Message { client: 0, message: ToOst::Sync { xid: Xid(5), object: ObjectId(1) } },
        OstAction::Message { client: 0, message: ToOst::Punch { xid: Xid(6), object: ObjectId(1), size: 5000 } },
        OstAction::Advance { ms: 100 },
        OstAction::Synced,
        OstAction::Message { client: 0, message: ToOst::Connect },
        OstAction::Message { client: 0, message: ToOst::Cancel { lock: LockHandle(1) } },
    ];
    let mut seed = vec![1u8];
    seed.extend(encode_all(&hostile));
    write_seed("ost", "hostile", &seed);
}

fn mds_seeds() {
    let stripe = |count, size| StripeSpec { count: Some(count), size: Some(size), start_ost: None };
    let requests = vec![
        MdsRequest::Mkdir { path: "/a".into() },
        MdsRequest::SetStripe { path: "/a".into(), stripe: stripe(2, 1 << 20) },
        MdsRequest::Create { path: "/a/f".into(), stripe: StripeSpec::default(), mode: CreateMode::Exclusive },
        MdsRequest::Create { path: "/g".into(), stripe: stripe(-1, 65536), mode: CreateMode::OpenOrCreate },
        MdsRequest::Open { path: "/a/f".into() },
        MdsRequest::Stat { path: "/a".into() },
        MdsRequest::Readdir { path: "/".into() },
        MdsRequest::GetStripe { path: "/a/f".into() },
        MdsRequest::Rename { from: "/a/f".into(), to: "/g".into() },
        MdsRequest::Mkdir { path: "/a/b".into() },
        MdsRequest::Rename { from: "/a".into(), to: "/a/b/c".into() },
        MdsRequest::Unlink { path: "/g".into() },
        MdsRequest::Rmdir { path: "/a/b".into() },
        MdsRequest::Statfs,
    ];
    write_seed("mds", "namespace", &encode_all(&requests));
    let odd = vec![
        MdsRequest::Mkdir { path: "//x/./y/".into() },
        MdsRequest::Create { path: "/x/../y".into(), stripe: stripe(0, 0), mode: CreateMode::Exclusive },
        MdsRequest::SetStripe {
            path: "/".into(),
            stripe: StripeSpec { count: Some(i64::MIN), size: Some(u64::MAX), start_ost: Some(-2) },
        },
        MdsRequest::Rename { from: "/".into(), to: "/z".into() },
    ];
    write_seed("mds", "odd-paths", &encode_all(&odd));
}

fn frame(message: Wire) -> Vec<u8> {
    let mut out = Vec::new();
    encode(message, &mut out).expect("encodable");
    out
}

fn codec_seeds() {
    let messages = vec![
        Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client },
        Wire::Hello {
            magic: MAGIC,
            version: PROTOCOL_VERSION,
            role: Role::Oss { address: "unix:/s".into(), osts: vec![0, 1] },
        },
        Wire::ToOst {
            ost: 0,
            message: ToOst::Write {
                xid: Xid(1),
                object: ObjectId(2),
                offset: 4096,
                data: Payload::Bytes(vec![5; 100]),
            },
        },
        Wire::ToClient {
            ost: 1,
            message: ToClient::ReadReply { xid: Xid(2), result: Ok(Payload::Bytes(vec![6; 50])) },
        },
        Wire::ToOst {
            ost: 0,
            message: ToOst::Enqueue {
                xid: Xid(3),
                object: ObjectId(2),
                request: LockRequest::new(LockMode::ProtectedWrite, Extent::new(0, 4095)),
            },
        },
        Wire::Mds { id: 1, call: MdsCall::Namespace(MdsRequest::Stat { path: "/a".into() }) },
        Wire::StatsRequest { id: 4 },
        Wire::Refused { reason: "no".into() },
    ];
    let mut stream = Vec::new();
    for (i, message) in messages.into_iter().enumerate() {
        let bytes = frame(message);
        write_seed("codec", &format!("body-{i}"), &bytes[4..]);
        stream.extend_from_slice(&bytes);
    }
    write_seed("codec", "stream", &stream);
}

fn main() {
    codec_seeds();
    ost_seeds();
    client_seeds();
    mds_seeds();
}
