//! Fuzz targets for the code that takes input from peers: the frame
//! decoder, the OST, the client's handling of server messages, and the MDS.
//!
//! Each target is a function of one input (`&[u8]`) that must never panic;
//! the binaries in `src/bin` hand them to AFL (`cargo afl fuzz`), and the
//! `seeds` binary writes the seed corpus from real exchanges. Inputs other
//! than the codec's are sequences of [`OstAction`], [`ClientAction`] or
//! `MdsRequest` values, each bincode-encoded as the wire encodes headers
//! (fixed-width little-endian integers, enum tags as `u32`): AFL mutates
//! real messages, and a protocol change shows up as seeds that no longer
//! decode (regenerate them, see `README.md`).
//!
//! What each target checks after every input it feeds:
//! - `codec`: `decode` and `read_frame` answer an error or a message, and a
//!   decoded message encodes and decodes to itself;
//! - `ost`: `Ost::check_invariants`, and every request that expects an
//!   answer gets exactly one (at the end, once syncs and glimpses are done);
//! - `client`: `Client::check_invariants`;
//! - `mds`: `Mds::check_invariants`.

use bincode::Options;
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::client::{Client, ClientConfig, FileHandle};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ldlm::GroupId;
use lanefs_core::msg::{ToClient, ToOst};
use lanefs_core::ost::{Ost, OstConfig, SyncLockCancel};
use lanefs_core::store::MemStore;
use lanefs_core::{ClientId, Duration, Instant, ObjectId, ObjectKey, OstIndex, Xid};
use lanefs_mds::{Mds, MdsConfig, MdsRequest};
use lanefs_net::codec;
use lanefs_net::proto::Wire;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Actions decoded from one input, at most: keeps every run short.
pub const ACTIONS_MAX: usize = 256;

/// Clients of the OST target (`client % CLIENTS`).
pub const CLIENTS: u8 = 4;

/// One step of the OST target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum OstAction {
    Message {
        client: u8,
        message: ToOst,
    },
    /// Time passes (callback and glimpse deadlines).
    Advance {
        ms: u32,
    },
    /// The driver answers the oldest sync the OST asked for.
    Synced,
}

/// One step of the client target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ClientAction {
    /// A message from OST `ost` (any index, served or not).
    Message {
        ost: u8,
        message: ToClient,
    },
    Advance {
        ms: u32,
    },
    /// The application starts another operation.
    Start(Start),
    /// The driver lost its connection to an OST.
    Unreachable {
        ost: u8,
    },
}

/// Operations the client target starts, on its one open file.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Start {
    Write { offset: u32, len: u16 },
    Read { offset: u32, len: u16 },
    Fsync,
    Stat,
    Truncate { size: u32 },
    GroupLock { gid: u8 },
    GroupUnlock { gid: u8 },
    Lockahead { offset: u32, len: u16, asynchronous: bool },
}

/// The encoding of every input: the wire's header encoding, bounded by the
/// input's own length so that no length field makes the decoder allocate.
pub fn options(limit: usize) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(limit as u64)
        .allow_trailing_bytes()
}

/// The values at the front of `data`, up to the first that does not decode.
pub fn decode_all<T: DeserializeOwned>(data: &[u8]) -> Vec<T> {
    let mut rest = data;
    let mut values = Vec::new();
    while !rest.is_empty() && values.len() < ACTIONS_MAX {
        match options(data.len()).deserialize_from(&mut rest) {
            Ok(value) => values.push(value),
            Err(_) => break,
        }
    }
    values
}

/// The input that decodes to `values`.
pub fn encode_all<T: Serialize>(values: &[T]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in values {
        options(usize::MAX).serialize_into(&mut out, value).expect("encodable");
    }
    out
}

// ----- codec --------------------------------------------------------------

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().build().expect("a runtime"))
}

fn round_trip(message: Wire) {
    let mut frame = Vec::new();
    codec::encode(message.clone(), &mut frame).expect("a decoded message encodes");
    let again = codec::decode(frame[4..].to_vec()).expect("an encoded message decodes");
    assert_eq!(again, message, "decode(encode(m)) != m");
}

/// The frame decoder on `data` as one frame body and as a stream.
pub fn codec(data: &[u8]) {
    if let Ok(message) = codec::decode(data.to_vec()) {
        round_trip(message);
    }
    runtime().block_on(async {
        let mut stream = data;
        while let Ok(Some(message)) = codec::read_frame(&mut stream).await {
            round_trip(message);
        }
    });
}

// ----- OST ----------------------------------------------------------------

/// The OST of the OST target; `policy` picks its sync-on-cancel policy.
pub fn new_ost(policy: u8) -> Ost<MemStore> {
    let sync_lock_cancel =
        [SyncLockCancel::Never, SyncLockCancel::Blocking, SyncLockCancel::Always][policy as usize % 3];
    let config = OstConfig {
        locks: LockServerConfig { callback_timeout: Duration::from_ms(50) },
        glimpse_timeout: Duration::from_ms(20),
        sync_lock_cancel,
    };
    Ost::new(OstIndex(0), config, MemStore::new())
}

/// Requests awaiting an answer: `(client, xid)` -> how many.
type Awaited = BTreeMap<(ClientId, Xid), usize>;

fn collect_replies(ost: &mut Ost<MemStore>, awaited: &mut Awaited) {
    while let Some((client, message)) = ost.poll_transmit() {
        let Some(xid) = message.reply_xid() else { continue };
        let waiting = awaited.get_mut(&(client, xid));
        let waiting =
            waiting.unwrap_or_else(|| panic!("{client} answered for xid {} it did not ask: {message:?}", xid.0));
        *waiting -= 1;
        if *waiting == 0 {
            awaited.remove(&(client, xid));
        }
    }
}

/// An OST fed the actions of `data` (its first byte picks the policy).
pub fn ost(data: &[u8]) {
    let Some((&policy, data)) = data.split_first() else { return };
    let mut ost = new_ost(policy);
    let mut now = Instant::ZERO;
    let mut awaited = Awaited::new();
    for action in decode_all::<OstAction>(data) {
        match action {
            OstAction::Message { client, message } => {
                let client = ClientId(u32::from(client % CLIENTS));
                if let Some(xid) = message.reply_xid() {
                    *awaited.entry((client, xid)).or_default() += 1;
                }
                ost.handle_message(now, client, message);
            }
            OstAction::Advance { ms } => {
                now = now + Duration::from_ms(u64::from(ms));
                ost.handle_timeout(now);
            }
            OstAction::Synced => {
                if let Some(request) = ost.poll_sync() {
                    ost.handle_synced(now, request.token);
                }
            }
        }
        ost.check_invariants();
        collect_replies(&mut ost, &mut awaited);
    }
    // Every sync done, every deadline passed: everything is answered.
    for _ in 0..ACTIONS_MAX {
        while let Some(request) = ost.poll_sync() {
            ost.handle_synced(now, request.token);
        }
        now = now + Duration::from_secs(1);
        ost.handle_timeout(now);
        ost.check_invariants();
        collect_replies(&mut ost, &mut awaited);
        if ost.syncs_pending() == 0 && ost.poll_timeout().is_none() {
            break;
        }
    }
    assert!(awaited.is_empty(), "requests never answered: {awaited:?}");
}

// ----- client ---------------------------------------------------------------

/// The client target's client, its open file (striped over OSTs 0 and 1,
/// 64 KiB stripes) and the operations in flight before any input.
pub fn client_setup() -> (Client, FileHandle) {
    let config = ClientConfig {
        rpc_bytes_max: 16 << 10,
        rpcs_in_flight_max: 2,
        dirty_bytes_max: 64 << 10,
        cached_bytes_max: 128 << 10,
        lru_locks_max: 8,
        ..ClientConfig::default()
    };
    let mut client = Client::new(ClientId(1), config).expect("a valid configuration");
    let objects =
        vec![ObjectKey { ost: OstIndex(0), object: ObjectId(1) }, ObjectKey { ost: OstIndex(1), object: ObjectId(2) }];
    let fh = client.open(Layout::new(64 << 10, objects).expect("a valid layout"));
    let now = Instant::ZERO;
    let _ = client.write(now, fh, 10_000, vec![7; 150_000]);
    let _ = client.read(now, fh, 60_000, 80_000);
    let _ = client.stat(now, fh);
    let _ = client.fsync(now, fh);
    (client, fh)
}

/// Start `start` on `client`'s file `fh`.
pub fn start(client: &mut Client, now: Instant, fh: FileHandle, start: Start) {
    let _ = match start {
        Start::Write { offset, len } => client.write(now, fh, u64::from(offset), vec![3; usize::from(len)]),
        Start::Read { offset, len } => client.read(now, fh, u64::from(offset), u64::from(len)),
        Start::Fsync => client.fsync(now, fh),
        Start::Stat => client.stat(now, fh),
        Start::Truncate { size } => client.truncate(now, fh, u64::from(size)),
        Start::GroupLock { gid } => client.group_lock(now, fh, GroupId(u64::from(gid))),
        Start::GroupUnlock { gid } => client.group_unlock(now, fh, GroupId(u64::from(gid))),
        Start::Lockahead { offset, len, asynchronous } => {
            let (start, end) = (u64::from(offset), u64::from(offset) + u64::from(len));
            let advice = Advice::lockahead(AheadMode::Write, start, end, asynchronous);
            let _ = client.ladvise(now, fh, &[advice]);
            return;
        }
    };
}

/// What the client sent and reported since the last drain (discarded).
fn drain(client: &mut Client) {
    while client.poll_transmit().is_some() {}
    while client.poll_event().is_some() {}
}

/// A client with operations in flight fed the actions of `data`.
pub fn client(data: &[u8]) {
    let (mut client, fh) = client_setup();
    drain(&mut client);
    let mut now = Instant::ZERO;
    for action in decode_all::<ClientAction>(data) {
        match action {
            ClientAction::Message { ost, message } => client.handle_message(now, OstIndex(u32::from(ost)), message),
            ClientAction::Advance { ms } => {
                now = now + Duration::from_ms(u64::from(ms));
                client.handle_timeout(now);
            }
            ClientAction::Start(op) => start(&mut client, now, fh, op),
            ClientAction::Unreachable { ost } => client.handle_unreachable(now, OstIndex(u32::from(ost)), "fuzzed"),
        }
        client.check_invariants();
        drain(&mut client);
    }
}

// ----- MDS ----------------------------------------------------------------

/// An MDS of 4 OSTs, in memory, fed the requests of `data`.
pub fn mds(data: &[u8]) {
    let requests = decode_all::<MdsRequest>(data);
    if requests.is_empty() {
        return;
    }
    let mut mds = Mds::open_in_memory(MdsConfig::new(4)).expect("an in-memory MDS");
    for request in requests {
        let _ = mds.handle(request);
        mds.check_invariants();
    }
}
