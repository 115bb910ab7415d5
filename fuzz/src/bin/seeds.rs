//! Writes the seed corpus (`corpus/<target>/`) from real exchanges: the
//! same clients, OSTs and drivers as the targets use, run until nothing
//! moves, with every input of OST 0 and of client 0 recorded as the
//! targets decode them (so that a seed replays in its target as it ran),
//! and hostile sequences written by hand. Run it again whenever a message
//! changes (`cargo afl run --release --bin seeds`).
//!
//! With `--check` it writes nothing: it makes every seed and exits 1,
//! naming them, if any differs from the one in `corpus/` or is missing
//! there (`check.sh` runs it so, for `make test`). Inputs kept in
//! `corpus/` that it does not make are left alone.

use lanefs_core::client::ladvise::Advice;
use lanefs_core::client::{Client, ClientConfig, FileHandle};
use lanefs_core::extent::Extent;
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::proof::{ChangeProof, LockProof};
use lanefs_core::ldlm::stats::LockCounters;
use lanefs_core::ldlm::{EnqueueFlags, GroupId, LockMode, LockRequest};
use lanefs_core::msg::{CacheAdvice, Cut, EnqueueReply, IoError, ObjectAttr, Payload, ToClient, ToOst};
use lanefs_core::ost::OstCounters;
use lanefs_core::{ClientId, Duration, Epoch, Instant, LockHandle, ObjectId, ObjectKey, OstIndex, Transno, Xid};
use lanefs_fuzz::client::{self, client_config, client_setup, real_osts, ClientAction, Start};
use lanefs_fuzz::ost::{config_from_flags, OstAction, OstDriver, RECOVERY_FLAG};
use lanefs_fuzz::{decode_all, encode_all, encode_with_flags, ACTIONS_MAX};
use lanefs_proto::codec::{decode, encode};
use lanefs_proto::wire::SharedBulk;
use lanefs_proto::wire::{
    ClusterInfo, MdsAnswer, MdsCall, MdsRefusal, OstSpace, OstStats, Role, Wire, MAGIC, PROTOCOL_VERSION,
};
use lanefs_proto::{
    fid_name, Access, ComponentSpec, CreateMode, Credentials, Fid, FileKind, MdsReply, MdsRequest, Node, PoolChange,
    PoolName, StripeSpec, XattrHow,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// `--check`: the seeds are compared with the corpus, not written.
static CHECK: OnceLock<bool> = OnceLock::new();

/// With `--check`, the seeds that differ from the corpus's or are missing.
static STALE: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    if *CHECK.get().unwrap_or(&false) {
        if std::fs::read(dir.join(name)).ok().as_deref() != Some(bytes) {
            STALE.lock().expect("not poisoned").push(format!("corpus/{target}/{name}"));
        }
        return;
    }
    std::fs::create_dir_all(&dir).expect("corpus directory");
    std::fs::write(dir.join(name), bytes).expect("seed written");
}

/// Write a seed of `actions` (after `flags`, if any) for `target`, having
/// checked that the target decodes all of them and runs them clean: a seed
/// cut short or crashing would mislead the fuzzer.
fn write_actions<T: Serialize + DeserializeOwned>(target: &str, name: &str, flags: Option<u8>, actions: &[T]) {
    assert!(actions.len() <= ACTIONS_MAX, "{target}/{name}: {} actions, more than the target takes", actions.len());
    let bytes = match flags {
        Some(flags) => encode_with_flags(flags, actions),
        None => encode_all(actions),
    };
    let body = if flags.is_some() { &bytes[1..] } else { &bytes[..] };
    assert_eq!(decode_all::<T>(body).len(), actions.len(), "{target}/{name} does not decode whole");
    let run = match target {
        "ost" => lanefs_fuzz::ost::run,
        "client" => lanefs_fuzz::client::run,
        "mds" => lanefs_fuzz::mds::run,
        other => unreachable!("no action target {other}"),
    };
    run(&bytes);
    println!("{target}/{name}: {} actions, {} bytes", actions.len(), bytes.len());
    write_seed(target, name, &bytes);
}

/// Rounds of [`World::run`], at most.
const ROUNDS_MAX: usize = 10_000;

/// Clients and OSTs exchanging messages; what OST 0 and client 0 take in
/// is recorded as their targets' actions.
struct World {
    clients: Vec<Client>,
    osts: Vec<OstDriver>,
    now: Instant,
    /// OST 0's inputs (client `c` is the OST target's client `c`).
    ost_log: Vec<OstAction>,
    /// Client 0's inputs.
    client_log: Vec<ClientAction>,
    /// The next syncs of OST 0 to fail.
    failing: usize,
}

impl World {
    fn new(clients: Vec<Client>, osts: Vec<OstDriver>) -> World {
        World { clients, osts, now: Instant::ZERO, ost_log: Vec::new(), client_log: Vec::new(), failing: 0 }
    }

    /// Deliver messages and do syncs until nothing moves.
    fn run(&mut self) {
        for _ in 0..ROUNDS_MAX {
            let mut moved = false;
            for (c, client) in self.clients.iter_mut().enumerate() {
                while let Some((ost, message)) = client.poll_transmit() {
                    moved = true;
                    let Some(driver) = self.osts.get_mut(ost.0 as usize) else { continue };
                    if ost.0 == 0 {
                        self.ost_log.push(OstAction::Message { client: c as u8, message: message.clone() });
                    }
                    driver.handle_message(ClientId(c as u32), message);
                }
                while client.poll_event().is_some() {}
            }
            for (o, driver) in self.osts.iter_mut().enumerate() {
                loop {
                    let fail = o == 0 && self.failing > 0;
                    let failure = fail.then_some(IoError::Disk(lanefs_core::errno::Errno::EIO));
                    if !driver.answer_sync(failure) {
                        break;
                    }
                    moved = true;
                    if o == 0 {
                        self.failing -= usize::from(fail);
                        self.ost_log.push(if fail { OstAction::SyncFailed } else { OstAction::Synced });
                    }
                }
                while let Some((to, message)) = driver.ost.poll_transmit() {
                    moved = true;
                    if to.0 == 0 {
                        self.client_log.push(ClientAction::Message { ost: o as u8, message: message.clone() });
                    }
                    self.clients[to.0 as usize].handle_message(self.now, OstIndex(o as u32), message);
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn advance(&mut self, ms: u32) {
        let by = Duration::from_ms(u64::from(ms));
        self.now = self.now + by;
        self.ost_log.push(OstAction::Advance { ms });
        self.client_log.push(ClientAction::Advance { ms });
        for driver in &mut self.osts {
            driver.advance(by);
        }
        for client in &mut self.clients {
            client.handle_timeout(self.now);
        }
        self.run();
    }

    /// Client 0 starts `op` on its file `fh`.
    fn start(&mut self, fh: FileHandle, op: Start) {
        self.client_log.push(ClientAction::Start(op.clone()));
        client::start(&mut self.clients[0], self.now, fh, op);
    }

    /// OST `o` restarts; every client's connection to it breaks and is
    /// made again.
    fn restart(&mut self, o: usize) {
        if o == 0 {
            self.ost_log.push(OstAction::Restart);
        }
        self.osts[o].restart();
        self.client_log.push(ClientAction::Reconnect { ost: o as u8 });
        for client in &mut self.clients {
            client.handle_disconnected(self.now, OstIndex(o as u32));
            client.handle_reconnected(self.now, OstIndex(o as u32));
        }
        self.run();
    }
}

/// The client target's own client against two real OSTs: what they answer.
fn client_seeds(recovery: bool) {
    let flags = if recovery { client::RECOVERY_FLAG } else { 0 };
    let suffix = if recovery { "-recovery" } else { "" };
    let (client, fh) = client_setup(recovery);
    let mut world = World::new(vec![client], real_osts(recovery));
    world.run();
    write_actions("client", &format!("setup{suffix}"), Some(flags), &world.client_log);
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
        world.start(fh, op);
        world.run();
    }
    if recovery {
        // Written and acknowledged, not committed, when OST 0 restarts:
        // the client replays its locks and that write.
        world.start(fh, Start::Write { offset: 0, len: 40_000 });
        world.run();
        world.restart(0);
        world.advance(150);
        // A commit that fails, then a connection lost in the same life.
        world.start(fh, Start::Write { offset: 300, len: 30_000 });
        world.run();
        world.failing = 1;
        world.advance(150);
        world.restart(1);
        world.client_log.push(ClientAction::Reconnect { ost: 0 });
        let (client, now) = (&mut world.clients[0], world.now);
        client.handle_disconnected(now, OstIndex(0));
        client.handle_reconnected(now, OstIndex(0));
        world.run();
    }
    let mut actions = world.client_log;
    actions.push(ClientAction::Message { ost: 1, message: ToClient::Evicted });
    actions.push(ClientAction::Message { ost: 0, message: ToClient::Failed });
    actions.push(ClientAction::Advance { ms: 700_000 });
    actions.push(ClientAction::Unreachable { ost: 0 });
    write_actions("client", &format!("operations{suffix}"), Some(flags), &actions);
}

/// The client target's real OSTs at work: operations, exchanges,
/// connections lost and made again, and messages no OST sends.
fn client_exchange_seed() {
    let exchange = ClientAction::Exchange;
    let actions = vec![
        exchange.clone(),
        ClientAction::Start(Start::Write { offset: 70_000, len: 30_000 }),
        exchange.clone(),
        ClientAction::Reconnect { ost: 0 },
        exchange.clone(),
        ClientAction::Start(Start::Truncate { size: 5000 }),
        ClientAction::Reconnect { ost: 1 },
        exchange.clone(),
        ClientAction::Advance { ms: 150 },
        exchange.clone(),
        ClientAction::Message { ost: 0, message: ToClient::Connected { epoch: Epoch(1), recovering: true } },
        ClientAction::Message { ost: 0, message: ToClient::Committed { transno: Transno(3) } },
        ClientAction::Message {
            ost: 1,
            message: ToClient::CommitFailed { object: ObjectId(2), error: IoError::NoSpace, seq: 1 },
        },
        ClientAction::Message { ost: 1, message: ToClient::LockLost { lock: LockHandle(1) } },
        ClientAction::Message { ost: 0, message: ToClient::Disconnected },
        ClientAction::Message {
            ost: 0,
            message: ToClient::Enqueue {
                xid: Xid(3),
                reply: EnqueueReply::Granted { lock: LockHandle(9), extent: Extent::WHOLE, proof: LockProof(9) },
            },
        },
        exchange.clone(),
        ClientAction::Start(Start::Fsync),
        exchange,
        ClientAction::Unreachable { ost: 1 },
    ];
    write_actions("client", "exchange-recovery", Some(client::RECOVERY_FLAG), &actions);
    write_actions("client", "exchange", Some(0), &actions);
}

/// Two clients sharing a file on OST 0, their messages as the OST target's
/// actions (clients 0 and 1); with recovery, the OST restarts while both
/// hold locks and uncommitted writes, and they replay.
fn ost_exchange_seed(flags: u8, name: &str) {
    let recovery = flags & RECOVERY_FLAG != 0;
    // Small RPCs, so that small writes (and small seeds) make several.
    let config = ClientConfig {
        rpc_bytes_max: 4096,
        dirty_bytes_max: 16 << 10,
        cached_bytes_max: 32 << 10,
        ..client_config(recovery)
    };
    let layout = Layout::new(64 << 10, vec![ObjectKey { ost: OstIndex(0), object: ObjectId(1) }]).expect("layout");
    let mut a = Client::new(ClientId(0), config.clone()).expect("a client");
    let mut b = Client::new(ClientId(1), config).expect("a client");
    let (fa, fb) = (a.open(layout.clone()), b.open(layout));
    let now = Instant::ZERO;
    let _ = a.write(now, fa, 0, vec![1; 9000]);
    let _ = b.write(now, fb, 6000, vec![2; 9000]);
    let _ = a.stat(now, fa);
    let _ = b.read(now, fb, 0, 16_000);
    let _ = a.fsync(now, fa);
    let _ = b.truncate(now, fb, 10_000);
    let _ = a.fallocate(now, fa, Cut::Hole { offset: 4096, len: 4096 });
    let _ = b.ladvise(now, fb, &[Advice::cache(CacheAdvice::WillRead, 0, 16_383, false)]);
    let mut world = World::new(vec![a, b], vec![OstDriver::new(OstIndex(0), config_from_flags(flags))]);
    world.run();
    if recovery {
        world.advance(150);
        let now = world.now;
        let _ = world.clients[0].write(now, fa, 100_000, vec![3; 5000]);
        let _ = world.clients[1].write(now, fb, 200_000, vec![4; 4096]);
        let _ = world.clients[1].truncate(now, fb, 201_000);
        let _ = world.clients[0].fallocate(now, fa, Cut::Reserve { offset: 300_000, len: 8192, keep_size: false });
        world.run();
        world.restart(0);
        world.advance(150);
        let now = world.now;
        let _ = world.clients[0].write(now, fa, 5000, vec![5; 4500]);
        let _ = world.clients[0].fsync(now, fa);
        world.failing = 1;
        world.run();
        // A clean unmount of client 1.
        world.clients[1].release_all(now);
        world.run();
        world.clients[1].disconnect_all();
        world.run();
        world.advance(3000);
    }
    write_actions("ost", name, Some(flags), &world.ost_log);
}

fn message(client: u8, message: ToOst) -> OstAction {
    OstAction::Message { client, message }
}

fn request(mode: LockMode, start: u64, end: u64) -> LockRequest {
    LockRequest { mode, extent: Extent { start, end }, flags: EnqueueFlags::default() }
}

fn enqueue(client: u8, xid: u64, request: LockRequest) -> OstAction {
    message(client, ToOst::Enqueue { xid: Xid(xid), object: ObjectId(1), request })
}

fn write(client: u8, xid: u64, offset: u64, len: usize) -> OstAction {
    message(client, ToOst::Write { xid: Xid(xid), object: ObjectId(1), offset, data: Payload::Bytes(vec![1; len]) })
}

/// Requests a correct client never sends, and a callback timeout; without
/// recovery.
fn ost_hostile_seed() {
    let hostile = vec![
        enqueue(0, 1, request(LockMode::ProtectedWrite, 0, u64::MAX)),
        enqueue(1, 1, request(LockMode::ProtectedRead, 4096, 8191)),
        enqueue(2, 1, request(LockMode::Group(GroupId(1)), 0, u64::MAX)),
        enqueue(3, 2, request(LockMode::ProtectedWrite, 8192, 4095)),
        write(0, 2, u64::MAX - 10, 64),
        message(1, ToOst::Read { xid: Xid(3), object: ObjectId(1), offset: 1 << 59, len: 1 << 40 }),
        message(2, ToOst::Getattr { xid: Xid(4), object: ObjectId(1) }),
        message(0, ToOst::GlimpseReply { xid: Xid(1), size: 77 }),
        message(1, ToOst::Cancel { lock: LockHandle(1) }),
        message(0, ToOst::Sync { xid: Xid(5), object: ObjectId(1) }),
        message(0, ToOst::Punch { xid: Xid(6), object: ObjectId(1), cut: Cut::Size(5000) }),
        message(
            1,
            ToOst::Punch { xid: Xid(7), object: ObjectId(1), cut: Cut::Hole { offset: u64::MAX - 10, len: 64 } },
        ),
        message(
            2,
            ToOst::Punch {
                xid: Xid(8),
                object: ObjectId(1),
                cut: Cut::Reserve { offset: 1 << 62, len: 1 << 62, keep_size: false },
            },
        ),
        message(
            3,
            ToOst::Advise { xid: Xid(9), object: ObjectId(1), advice: CacheAdvice::WillRead, start: 8192, end: 4096 },
        ),
        message(
            0,
            ToOst::Advise { xid: Xid(10), object: ObjectId(7), advice: CacheAdvice::DontNeed, start: 0, end: u64::MAX },
        ),
        OstAction::Advance { ms: 100 },
        OstAction::SyncFailed,
        message(0, ToOst::Connect { resume: None }),
        message(0, ToOst::Cancel { lock: LockHandle(1) }),
        message(1, ToOst::Connect { resume: Some(Epoch(4)) }),
        message(
            1,
            ToOst::ReplayLock {
                lock: LockHandle(2),
                object: ObjectId(1),
                request: Box::new(request(LockMode::ProtectedWrite, 0, 4095)),
                extent: Extent::new(0, 4095),
                proof: LockProof(2),
            },
        ),
        message(
            2,
            ToOst::ReplayWrite {
                transno: Transno(1),
                object: ObjectId(1),
                offset: 0,
                data: Payload::Bytes(vec![2; 10]),
                proof: ChangeProof(1),
            },
        ),
        message(
            2,
            ToOst::ReplayPunch {
                transno: Transno(2),
                object: ObjectId(1),
                cut: Cut::Size(3),
                proof: ChangeProof::default(),
            },
        ),
        message(2, ToOst::ReplayDone),
        message(3, ToOst::FailuresSeen { seq: u64::MAX }),
        OstAction::Restart,
        message(3, ToOst::Disconnect),
        write(3, 7, 0, 100),
        OstAction::Synced,
    ];
    write_actions("ost", "hostile", Some(1), &hostile);
}

/// What OST 0 of the OST target sends when it takes `actions` (after the
/// flags byte `flags`): the proofs and transaction numbers that replays of
/// them must carry.
fn ost_answers(flags: u8, actions: &[OstAction]) -> Vec<(ClientId, ToClient)> {
    let mut driver = OstDriver::new(OstIndex(0), config_from_flags(flags));
    let mut sent = Vec::new();
    for action in actions {
        driver.apply(action.clone());
        sent.extend(std::iter::from_fn(|| driver.ost.poll_transmit()));
    }
    sent
}

/// The lock granted to `client` for its enqueue `xid`, in `answers`.
fn granted(answers: &[(ClientId, ToClient)], client: u8, xid: u64) -> (LockHandle, Extent, LockProof) {
    answers
        .iter()
        .find_map(|(to, message)| match message {
            ToClient::Enqueue { xid: x, reply: EnqueueReply::Granted { lock, extent, proof } }
                if *to == ClientId(client.into()) && *x == Xid(xid) =>
            {
                Some((*lock, *extent, *proof))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("client {client}'s enqueue {xid} not granted: {answers:?}"))
}

/// The transaction number and proof acknowledging `client`'s write or
/// punch `xid`, in `answers`.
fn acknowledged(answers: &[(ClientId, ToClient)], client: u8, xid: u64) -> (Transno, ChangeProof) {
    answers
        .iter()
        .find_map(|(to, message)| match message {
            ToClient::WriteReply { xid: x, result: Ok(()), transno, proof }
            | ToClient::PunchReply { xid: x, result: Ok(()), transno, proof }
                if *to == ClientId(client.into()) && *x == Xid(xid) =>
            {
                Some((*transno, *proof))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("client {client}'s change {xid} not acknowledged: {answers:?}"))
}

/// A recovery that clients abuse: replays from a client the OST does not
/// know, twice, malformed, conflicting, with made-up or stolen proofs; a
/// known client coming back with nothing; requests while recovering; with
/// recovery on. The replays of what the OST did grant and acknowledge
/// carry the proofs it gave (the target's OSTs have a fixed key).
fn ost_hostile_recovery_seed() {
    let punch = |client, xid, cut| message(client, ToOst::Punch { xid: Xid(xid), object: ObjectId(2), cut });
    let replay_write = |client, transno, offset, len, proof| {
        message(
            client,
            ToOst::ReplayWrite { transno, object: ObjectId(1), offset, data: Payload::Bytes(vec![9; len]), proof },
        )
    };
    let replay_lock = |client, lock, extent: Extent, proof| {
        message(
            client,
            ToOst::ReplayLock {
                lock,
                object: ObjectId(1),
                request: Box::new(request(LockMode::ProtectedWrite, extent.start, extent.end)),
                extent,
                proof,
            },
        )
    };
    let before = vec![
        message(0, ToOst::Connect { resume: None }),
        message(1, ToOst::Connect { resume: None }),
        message(2, ToOst::Connect { resume: None }),
        enqueue(0, 1, request(LockMode::ProtectedWrite, 0, 65_535)),
        write(0, 2, 0, 5000),
        OstAction::Advance { ms: 150 },
        OstAction::Synced,
        write(0, 3, 5000, 5000),
        punch(1, 1, Cut::Size(100)),
        message(2, ToOst::Sync { xid: Xid(1), object: ObjectId(1) }),
    ];
    let answers = ost_answers(RECOVERY_FLAG, &before);
    let (lock, extent, lock_proof) = granted(&answers, 0, 1);
    let (committed, committed_proof) = acknowledged(&answers, 0, 2);
    let (written, written_proof) = acknowledged(&answers, 0, 3);
    let (punched, punched_proof) = acknowledged(&answers, 1, 1);
    let after = vec![
        OstAction::Restart,
        message(0, ToOst::Connect { resume: Some(Epoch(0)) }),
        replay_lock(0, lock, extent, lock_proof),
        replay_lock(0, LockHandle(lock.0 + 1), Extent::new(4096, 8191), lock_proof),
        replay_write(0, committed, 0, 5000, committed_proof),
        replay_write(0, written, 5000, 5000, written_proof),
        replay_write(0, written, 5000, 5000, written_proof),
        replay_write(0, Transno(written.0 + 1), u64::MAX - 100, 200, ChangeProof::default()),
        // Client 1's punch, replayed by client 0 with the proof client 1 got.
        message(
            0,
            ToOst::ReplayPunch { transno: punched, object: ObjectId(2), cut: Cut::Size(100), proof: punched_proof },
        ),
        message(
            0,
            ToOst::ReplayPunch {
                transno: Transno(written.0 + 2),
                object: ObjectId(1),
                cut: Cut::Size(1 << 62),
                proof: ChangeProof(u64::MAX),
            },
        ),
        message(3, ToOst::Connect { resume: Some(Epoch(0)) }),
        replay_write(3, Transno(written.0 + 3), 0, 10, written_proof),
        message(1, ToOst::Connect { resume: None }),
        message(2, ToOst::Read { xid: Xid(2), object: ObjectId(1), offset: 0, len: 4096 }),
        message(
            2,
            ToOst::Enqueue { xid: Xid(3), object: ObjectId(1), request: request(LockMode::ProtectedRead, 0, 4095) },
        ),
        message(0, ToOst::FailuresSeen { seq: 1 }),
        message(0, ToOst::ReplayDone),
        message(0, ToOst::ReplayDone),
        OstAction::Advance { ms: 2500 },
        OstAction::Synced,
        OstAction::SyncFailed,
        write(0, 4, 0, 100),
        message(0, ToOst::Sync { xid: Xid(5), object: ObjectId(1) }),
        OstAction::SyncFailed,
        message(0, ToOst::Connect { resume: Some(Epoch(1)) }),
        OstAction::Restart,
        OstAction::Advance { ms: 2500 },
        message(1, ToOst::Disconnect),
    ];
    let actions: Vec<OstAction> = before.into_iter().chain(after).collect();
    write_actions("ost", "hostile-recovery", Some(RECOVERY_FLAG), &actions);
}

fn mds_seeds() {
    let root = Credentials::ROOT;
    let user = Credentials { uid: 1000, gid: 1000, groups: vec![10] };
    let other = Credentials::user(1001, 1001);
    let stripe = |count, size| StripeSpec { count: Some(count), size: Some(size), ..StripeSpec::default() };
    let create = |path: &str, stripe, mode, access, permissions| MdsRequest::Create {
        path: path.into(),
        stripe,
        mode,
        access,
        permissions,
    };
    let requests = vec![
        (root.clone(), MdsRequest::Mkdir { path: "/a".into(), permissions: 0o755 }),
        (root.clone(), MdsRequest::SetStripe { path: "/a".into(), stripe: stripe(2, 1 << 20) }),
        (root.clone(), create("/a/f", StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite, 0o644)),
        (root.clone(), create("/g", stripe(-1, 65536), CreateMode::OpenOrCreate, Access::Write, 0o600)),
        (root.clone(), MdsRequest::Open { path: "/a/f".into(), access: Access::Read }),
        (root.clone(), MdsRequest::Stat { path: "/a".into() }),
        (root.clone(), MdsRequest::Readdir { path: "/".into(), cursor: None }),
        (root.clone(), MdsRequest::Readdir { path: "/".into(), cursor: Some("a".into()) }),
        (root.clone(), MdsRequest::GetStripe { path: "/a/f".into() }),
        (root.clone(), MdsRequest::Rename { from: "/a/f".into(), to: "/g".into() }),
        (root.clone(), MdsRequest::Mkdir { path: "/a/b".into(), permissions: 0o700 }),
        (root.clone(), MdsRequest::Rename { from: "/a".into(), to: "/a/b/c".into() }),
        (root.clone(), MdsRequest::Link { from: "/g".into(), to: "/h".into() }),
        (root.clone(), MdsRequest::Symlink { path: "/s".into(), target: "g".into() }),
        (root.clone(), MdsRequest::SetAtime { path: "/h".into(), at: Some(1) }),
        (root.clone(), MdsRequest::SetMtime { path: "/s".into(), at: None }),
        (root.clone(), MdsRequest::Stat { path: "/s/x".into() }),
        (root.clone(), MdsRequest::Unlink { path: "/g".into() }),
        (root.clone(), MdsRequest::Unlink { path: "/h".into() }),
        (root.clone(), MdsRequest::Rmdir { path: "/a/b".into() }),
        (root, MdsRequest::Statfs),
    ];
    write_actions("mds", "namespace", None, &requests);

    // Users: a home directory given away, a sticky shared directory,
    // files others may not open or remove.
    let root = Credentials::ROOT;
    let set_attr = |path: &str, permissions, uid, gid| MdsRequest::SetAttr { path: path.into(), permissions, uid, gid };
    let requests = vec![
        (root.clone(), MdsRequest::Mkdir { path: "/home".into(), permissions: 0o755 }),
        (root.clone(), MdsRequest::Mkdir { path: "/home/u".into(), permissions: 0o700 }),
        (root.clone(), set_attr("/home/u", None, Some(1000), Some(1000))),
        (root.clone(), MdsRequest::Mkdir { path: "/tmp".into(), permissions: 0o1777 }),
        (user.clone(), create("/home/u/f", StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite, 0o640)),
        (user.clone(), create("/tmp/t", stripe(4, 65536), CreateMode::Exclusive, Access::Write, 0o666)),
        (other.clone(), MdsRequest::Open { path: "/home/u/f".into(), access: Access::Read }),
        (other.clone(), MdsRequest::Unlink { path: "/tmp/t".into() }),
        (other.clone(), MdsRequest::Open { path: "/tmp/t".into(), access: Access::ReadWrite }),
        (other.clone(), set_attr("/tmp/t", Some(0o777), None, None)),
        (user.clone(), set_attr("/home/u/f", Some(0o2755), None, Some(10))),
        (user.clone(), MdsRequest::Readdir { path: "/home/u".into(), cursor: None }),
        (other.clone(), MdsRequest::Readdir { path: "/home/u".into(), cursor: None }),
        (user.clone(), MdsRequest::Rename { from: "/tmp/t".into(), to: "/home/u/t".into() }),
        (other, MdsRequest::Statfs),
        (user, MdsRequest::Unlink { path: "/home/u/f".into() }),
    ];
    write_actions("mds", "users", None, &requests);

    // OST pools: made, filled, used by a directory and a file, listed,
    // refused to a user, emptied and destroyed; a default removed.
    let root = Credentials::ROOT;
    let fast = PoolName::parse("fast").expect("a valid pool name");
    let pool = |change| MdsRequest::ChangePool { pool: fast, change };
    let in_fast = StripeSpec { pool: Some(fast), ..StripeSpec::default() };
    let requests = vec![
        (root.clone(), pool(PoolChange::New)),
        (root.clone(), pool(PoolChange::Add(vec![1, 3]))),
        (root.clone(), MdsRequest::Mkdir { path: "/p".into(), permissions: 0o755 }),
        (root.clone(), MdsRequest::SetStripe { path: "/p".into(), stripe: in_fast.clone() }),
        (root.clone(), create("/p/f", StripeSpec::default(), CreateMode::Exclusive, Access::Write, 0o644)),
        (
            root.clone(),
            create("/q", StripeSpec { count: Some(-1), ..in_fast }, CreateMode::Exclusive, Access::Write, 0o644),
        ),
        (root.clone(), MdsRequest::GetStripe { path: "/p/f".into() }),
        (Credentials::user(1000, 1000), MdsRequest::ListPools { pool: None }),
        (Credentials::user(1000, 1000), pool(PoolChange::Destroy)),
        (root.clone(), MdsRequest::ListPools { pool: Some(fast) }),
        (root.clone(), pool(PoolChange::Remove(vec![1, 3]))),
        (root.clone(), pool(PoolChange::Destroy)),
        (root.clone(), MdsRequest::DeleteStripe { path: "/p".into() }),
        (root, MdsRequest::Statfs),
    ];
    write_actions("mds", "pools", None, &requests);

    mds_layout_seed();

    let odd_caller = Credentials { uid: u32::MAX, gid: 7, groups: vec![0, 1, u32::MAX, 1] };
    let odd = vec![
        (Credentials::ROOT, MdsRequest::Mkdir { path: "//x/./y/".into(), permissions: u32::MAX }),
        (Credentials::ROOT, create("/x/../y", stripe(0, 0), CreateMode::Exclusive, Access::Read, 0o4777)),
        (
            Credentials::ROOT,
            MdsRequest::SetStripe {
                path: "/".into(),
                stripe: StripeSpec {
                    count: Some(i64::MIN),
                    size: Some(u64::MAX),
                    start_ost: Some(-2),
                    ..StripeSpec::default()
                },
            },
        ),
        (Credentials::ROOT, MdsRequest::Rename { from: "/".into(), to: "/z".into() }),
        (odd_caller.clone(), MdsRequest::Statfs),
        (odd_caller, MdsRequest::Mkdir { path: "/q".into(), permissions: 0 }),
        (Credentials::ROOT, MdsRequest::Readdir { path: "/".into(), cursor: Some("\u{10FFFF}".into()) }),
        (Credentials::ROOT, set_attr("/", Some(0), Some(u32::MAX), Some(u32::MAX))),
    ];
    write_actions("mds", "odd-paths", None, &odd);
}

/// Requests made of the MDS target's MDS as they are written down, so
/// that later ones name the fids the MDS gave.
struct MdsLog {
    mds: lanefs_mds::Mds,
    requests: Vec<(Credentials, MdsRequest)>,
}

impl MdsLog {
    fn ask(&mut self, credentials: &Credentials, request: MdsRequest) -> MdsReply {
        self.requests.push((credentials.clone(), request.clone()));
        self.mds.handle(credentials, request)
    }

    /// The fid of the file `request` creates or opens.
    fn file(&mut self, credentials: &Credentials, request: MdsRequest) -> Fid {
        match self.ask(credentials, request) {
            MdsReply::File(info) => info.fid,
            other => panic!("not a file: {other:?}"),
        }
    }
}

/// Layouts of every kind (overstriped, on chosen OSTs, composite), the
/// requests that name a file by fid, extended attributes, special files,
/// and a migration committed and one abandoned.
fn mds_layout_seed() {
    let root = Credentials::ROOT;
    let user = Credentials { uid: 1000, gid: 1000, groups: vec![10] };
    let mut log = MdsLog { mds: lanefs_fuzz::mds::new_mds(), requests: Vec::new() };
    let create = |path: &str, stripe| MdsRequest::Create {
        path: path.into(),
        stripe,
        mode: CreateMode::Exclusive,
        access: Access::ReadWrite,
        permissions: 0o644,
    };
    let plain = |count, size| StripeSpec { count: Some(count), size: Some(size), ..StripeSpec::default() };
    let over = StripeSpec { count: Some(6), overstripe: true, ..StripeSpec::default() };
    let chosen = StripeSpec { osts: Some(vec![3, 1, 3]), start_ost: Some(1), ..StripeSpec::default() };
    let composite = StripeSpec {
        components: Some(vec![
            ComponentSpec { end: 1 << 20, stripe: plain(1, 65536) },
            ComponentSpec { end: 64 << 20, stripe: plain(2, 1 << 20) },
            ComponentSpec { end: u64::MAX, stripe: plain(-1, 4 << 20) },
        ]),
        ..StripeSpec::default()
    };
    let d = match log.ask(&root, MdsRequest::Mkdir { path: "/d".into(), permissions: 0o777 }) {
        MdsReply::Attr(attr) => attr.fid,
        other => panic!("mkdir /d: {other:?}"),
    };
    log.ask(&root, MdsRequest::SetStripe { path: "/d".into(), stripe: composite.clone() });
    let over_fid = log.file(&root, create("/d/over", over));
    log.file(&root, create("/d/chosen", chosen));
    let inherited = log.file(&user, create("/d/pfl", StripeSpec::default()));
    log.ask(&root, MdsRequest::GetStripe { path: "/d/pfl".into() });
    log.ask(&root, MdsRequest::LayoutFid { fid: over_fid });
    log.ask(&root, MdsRequest::StatFid { fid: inherited });
    log.ask(&root, MdsRequest::ReaddirFid { fid: d, cursor: None });
    log.ask(&user, MdsRequest::OpenFid { fid: inherited, access: Access::Read });
    log.ask(&user, MdsRequest::SetAttrFid { fid: inherited, permissions: Some(0o600), uid: None, gid: None });
    log.ask(&user, MdsRequest::SetMtimeFid { fid: inherited, at: Some(1_000_000_000) });
    log.ask(&user, MdsRequest::SetAtimeFid { fid: inherited, at: None });
    log.ask(&root, MdsRequest::LinkFid { fid: over_fid, to: "/d/over-link".into() });
    log.ask(&root, MdsRequest::Stat { path: format!("/.lustre/fid/{}/pfl", fid_name(d)) });
    let attr = |name: &str| name.to_string();
    let pfl = Node::Path("/d/pfl".into());
    log.ask(
        &user,
        MdsRequest::SetXattr { node: pfl.clone(), name: attr("user.a"), value: b"1".to_vec(), how: XattrHow::Create },
    );
    log.ask(
        &user,
        MdsRequest::SetXattr {
            node: Node::Fid(inherited),
            name: attr("user.a"),
            value: vec![2; 64],
            how: XattrHow::Replace,
        },
    );
    log.ask(&user, MdsRequest::GetXattr { node: pfl.clone(), name: attr("user.a") });
    log.ask(&user, MdsRequest::ListXattrs { node: Node::Fid(inherited) });
    log.ask(&user, MdsRequest::RemoveXattr { node: pfl, name: attr("user.a") });
    log.ask(&root, MdsRequest::Mknod { path: "/d/fifo".into(), kind: FileKind::Fifo, permissions: 0o600, rdev: 0 });
    log.ask(
        &root,
        MdsRequest::Mknod { path: "/d/dev".into(), kind: FileKind::CharDevice, permissions: 0o660, rdev: 0x0103 },
    );
    for (path, commit) in [("/d/over", true), ("/d/chosen", false)] {
        let (file, volatile) =
            match log.ask(&root, MdsRequest::MigrateStart { path: path.into(), stripe: Some(plain(2, 1 << 20)) }) {
                MdsReply::Migration { file, volatile } => (file.fid, volatile.fid),
                other => panic!("migrate {path}: {other:?}"),
            };
        let request = match commit {
            true => MdsRequest::MigrateCommit { path: path.into(), fid: file, volatile },
            false => MdsRequest::MigrateAbort { path: path.into(), fid: file, volatile },
        };
        log.ask(&root, request);
    }
    log.ask(&root, MdsRequest::MigrateStart { path: "/d/pfl".into(), stripe: None });
    log.ask(&root, MdsRequest::Unlink { path: "/d/over-link".into() });
    log.ask(&root, MdsRequest::Statfs);
    write_actions("mds", "layouts", None, &log.requests);
}

fn frame(message: Wire) -> Vec<u8> {
    let mut out = Vec::new();
    encode(message, &mut out).expect("encodable");
    out
}

fn codec_seeds() {
    let user = Credentials { uid: 1000, gid: 1000, groups: vec![10, 20] };
    let messages = vec![
        Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client },
        Wire::Hello {
            magic: MAGIC,
            version: PROTOCOL_VERSION,
            role: Role::Oss { address: "unix:/s".into(), osts: vec![0, 1] },
        },
        Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Mds },
        Wire::Welcome { version: PROTOCOL_VERSION, client: 3, callback_timeout_ms: 100_000 },
        Wire::Session { uuid: 0x0123_4567_89ab_cdef },
        Wire::Ping,
        Wire::Pong,
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
        Wire::ToOst { ost: 0, message: ToOst::Connect { resume: Some(Epoch(2)) } },
        Wire::ToOst {
            ost: 0,
            message: ToOst::ReplayLock {
                lock: LockHandle(7),
                object: ObjectId(2),
                request: Box::new(LockRequest::new(LockMode::Group(GroupId(4)), Extent::WHOLE)),
                extent: Extent::WHOLE,
                proof: LockProof(7),
            },
        },
        Wire::ToOst {
            ost: 1,
            message: ToOst::ReplayWrite {
                transno: Transno(9),
                object: ObjectId(2),
                offset: 8192,
                data: Payload::Bytes(vec![8; 70]),
                proof: ChangeProof(9),
            },
        },
        Wire::ToOst {
            ost: 1,
            message: ToOst::ReplayPunch {
                transno: Transno(10),
                object: ObjectId(2),
                cut: Cut::Size(3),
                proof: ChangeProof(10),
            },
        },
        Wire::ToOst { ost: 1, message: ToOst::ReplayDone },
        Wire::ToOst { ost: 1, message: ToOst::FailuresSeen { seq: 2 } },
        Wire::ToOst { ost: 1, message: ToOst::Disconnect },
        Wire::ToClient { ost: 0, message: ToClient::Connected { epoch: Epoch(2), recovering: true } },
        Wire::ToClient {
            ost: 0,
            message: ToClient::WriteReply { xid: Xid(1), result: Ok(()), transno: Transno(9), proof: ChangeProof(9) },
        },
        Wire::ToClient { ost: 0, message: ToClient::Committed { transno: Transno(9) } },
        Wire::ToClient {
            ost: 0,
            message: ToClient::CommitFailed {
                object: ObjectId(2),
                error: IoError::Disk(lanefs_core::errno::Errno::EIO),
                seq: 1,
            },
        },
        Wire::ToClient { ost: 0, message: ToClient::LockLost { lock: LockHandle(7) } },
        Wire::ToClient { ost: 0, message: ToClient::Disconnected },
        Wire::ToClient { ost: 0, message: ToClient::Failed },
        Wire::Mds {
            id: 1,
            call: MdsCall::Namespace { credentials: user.clone(), request: MdsRequest::Stat { path: "/a".into() } },
        },
        Wire::Mds {
            id: 2,
            call: MdsCall::Namespace {
                credentials: user.clone(),
                request: MdsRequest::Readdir { path: "/d".into(), cursor: Some("b".into()) },
            },
        },
        Wire::Mds {
            id: 3,
            call: MdsCall::Namespace {
                credentials: user,
                request: MdsRequest::SetAttr { path: "/f".into(), permissions: Some(0o640), uid: None, gid: Some(10) },
            },
        },
        Wire::Mds { id: 4, call: MdsCall::ClusterInfo },
        Wire::MdsReply {
            id: 4,
            answer: MdsAnswer::ClusterInfo(ClusterInfo { ost_count: 2, osts: vec![(0, "unix:/s".into())] }),
        },
        Wire::MdsReply { id: 1, answer: MdsAnswer::Namespace(MdsReply::Ok) },
        Wire::Precreate { id: 5, ost: 1, last_id: 20_000 },
        Wire::Precreated { id: 5, ost: 1, result: Ok(20_000) },
        Wire::Precreated { id: 6, ost: 1, result: Err("no space".into()) },
        Wire::Destroy { id: 7, ost: 0, objects: vec![3, 4, 5] },
        Wire::Destroyed { id: 7, ost: 0, result: Ok(()) },
        Wire::Destroyed { id: 8, ost: 0, result: Err("EIO".into()) },
        Wire::StatsRequest { id: 9 },
        Wire::StatsReply {
            id: 9,
            osts: vec![OstStats {
                ost: 0,
                locks_granted: 2,
                locks_waiting: 1,
                locks: LockCounters::default(),
                data: OstCounters::default(),
                space: Some(OstSpace {
                    fsid: 1,
                    total_bytes: 1 << 30,
                    free_bytes: 1 << 29,
                    total_inodes: 9,
                    free_inodes: 8,
                }),
                bulk_shared_bytes: 4096,
                sync_lock_cancel: Default::default(),
                rpcs_in_flight: 3,
                exports: 2,
            }],
        },
        Wire::SetParam {
            id: 20,
            ost: 1,
            name: "sync_lock_cancel".into(),
            value: Some("blocking".into()),
            permanent: true,
        },
        Wire::SetParamReply { id: 20, result: Err("needs the server key".into()) },
        Wire::Mds {
            id: 21,
            call: MdsCall::KeepParam { pattern: "osc.*.max_dirty_mb".into(), value: Some("64".into()) },
        },
        Wire::Mds { id: 22, call: MdsCall::KeptParams },
        Wire::MdsReply { id: 22, answer: MdsAnswer::Params(vec![("osc.*.max_dirty_mb".into(), "64".into())]) },
        Wire::MdsReply { id: 10, answer: MdsAnswer::Error(MdsRefusal::ShuttingDown) },
        Wire::AttachArena { arena: 1, frames: 64 },
        Wire::ArenaAttached { arena: 1 },
        Wire::ArenaRefused { arena: 2, reason: "no memfd".into() },
        Wire::WriteShared {
            ost: 0,
            xid: Xid(11),
            object: ObjectId(2),
            offset: 0,
            bulk: SharedBulk { arena: 1, head: 0, len: 8192, runs: vec![(0, 2)] },
        },
        Wire::ToOst { ost: 0, message: ToOst::Connect { resume: None } },
        Wire::ToOst { ost: 0, message: ToOst::Cancel { lock: LockHandle(7) } },
        Wire::ToOst { ost: 0, message: ToOst::Read { xid: Xid(12), object: ObjectId(2), offset: 0, len: 4096 } },
        Wire::ToOst { ost: 0, message: ToOst::Punch { xid: Xid(13), object: ObjectId(2), cut: Cut::Size(100) } },
        Wire::ToOst { ost: 0, message: ToOst::Getattr { xid: Xid(14), object: ObjectId(2) } },
        Wire::ToOst { ost: 0, message: ToOst::Sync { xid: Xid(15), object: ObjectId(2) } },
        Wire::ToOst { ost: 0, message: ToOst::GlimpseReply { xid: Xid(16), size: 5000 } },
        Wire::ToClient {
            ost: 0,
            message: ToClient::Enqueue { xid: Xid(3), reply: EnqueueReply::Waiting { lock: LockHandle(8) } },
        },
        Wire::ToClient { ost: 0, message: ToClient::Enqueue { xid: Xid(4), reply: EnqueueReply::Invalid } },
        Wire::ToClient {
            ost: 0,
            message: ToClient::Completion {
                lock: LockHandle(8),
                extent: Extent::new(0, 4095),
                callback_pending: true,
                proof: LockProof(8),
            },
        },
        Wire::ToClient { ost: 0, message: ToClient::Blocking { lock: LockHandle(8) } },
        Wire::ToClient {
            ost: 0,
            message: ToClient::PunchReply {
                xid: Xid(13),
                result: Err(IoError::NoSpace),
                transno: Transno(0),
                proof: ChangeProof(0),
            },
        },
        Wire::ToClient {
            ost: 0,
            message: ToClient::GetattrReply { xid: Xid(14), result: Ok(ObjectAttr { size: 5000, allocated: 8192 }) },
        },
        Wire::ToClient { ost: 0, message: ToClient::SyncReply { xid: Xid(15), result: Ok(()) } },
        Wire::ToClient {
            ost: 0,
            message: ToClient::Glimpse { xid: Xid(16), object: ObjectId(2), lock: LockHandle(8) },
        },
        Wire::ToClient { ost: 0, message: ToClient::ReadReply { xid: Xid(12), result: Err(IoError::Failed) } },
        Wire::ToClient { ost: 0, message: ToClient::Evicted },
        Wire::ToOst {
            ost: 0,
            message: ToOst::Punch { xid: Xid(17), object: ObjectId(2), cut: Cut::Hole { offset: 4096, len: 8192 } },
        },
        Wire::ToOst {
            ost: 1,
            message: ToOst::ReplayPunch {
                transno: Transno(11),
                object: ObjectId(2),
                cut: Cut::Reserve { offset: 0, len: 1 << 20, keep_size: true },
                proof: ChangeProof(11),
            },
        },
        Wire::ToOst {
            ost: 0,
            message: ToOst::Advise {
                xid: Xid(18),
                object: ObjectId(2),
                advice: CacheAdvice::WillRead,
                start: 0,
                end: 1 << 20,
            },
        },
        Wire::ToClient { ost: 0, message: ToClient::AdviseReply { xid: Xid(18), result: Ok(()) } },
        Wire::ToClient { ost: 0, message: ToClient::WaitFailed { lock: LockHandle(8), error: IoError::NoSuchObject } },
        Wire::ToClient {
            ost: 1,
            message: ToClient::Recovering { remaining: Duration::from_secs(30), clients_left: 2 },
        },
        Wire::Mds { id: 23, call: MdsCall::Opened { fid: Fid(5) } },
        Wire::Mds { id: 24, call: MdsCall::Closed { fid: Fid(5) } },
        Wire::MdsReply { id: 24, answer: MdsAnswer::Opened },
        Wire::Mds { id: 25, call: MdsCall::ReplayDone },
        Wire::Refused { reason: "no".into() },
        Wire::NotANode,
    ];
    let mut stream = Vec::new();
    let count = messages.len();
    for (i, message) in messages.into_iter().enumerate() {
        let bytes = frame(message.clone());
        // A seed that no longer decodes to its message would mislead the
        // fuzzer, as one cut short would the other targets.
        let decoded = decode(bytes[4..].to_vec()).unwrap_or_else(|e| panic!("codec/body-{i} does not decode: {e}"));
        assert_eq!(decoded, message, "codec/body-{i} decodes to another message");
        lanefs_fuzz::codec::run(&bytes[4..]);
        write_seed("codec", &format!("body-{i}"), &bytes[4..]);
        stream.extend_from_slice(&bytes);
    }
    lanefs_fuzz::codec::run(&stream);
    println!("codec: {count} bodies, and a stream of them, {} bytes", stream.len());
    write_seed("codec", "stream", &stream);
}

fn main() {
    let check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--check") => true,
        Some(other) => {
            eprintln!("unknown argument {other:?}: seeds [--check]");
            std::process::exit(2);
        }
    };
    CHECK.set(check).expect("set once");
    codec_seeds();
    ost_exchange_seed(2, "two-clients");
    ost_exchange_seed(RECOVERY_FLAG | 2, "two-clients-recovery");
    ost_exchange_seed(RECOVERY_FLAG, "two-clients-recovery-never");
    ost_hostile_seed();
    ost_hostile_recovery_seed();
    client_seeds(false);
    client_seeds(true);
    client_exchange_seed();
    mds_seeds();
    let stale = STALE.lock().expect("not poisoned");
    if !stale.is_empty() {
        eprintln!("{} seeds differ from what the current messages make:", stale.len());
        for name in stale.iter() {
            eprintln!("  fuzz/{name}");
        }
        eprintln!("write them again (cd fuzz && cargo run --bin seeds) and commit the corpus");
        std::process::exit(1);
    }
}
