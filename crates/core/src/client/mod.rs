//! The client of one node: lock cache, page cache and writeback, sans-IO.
//!
//! Applications (the harness, the network client library, the simulator's
//! ranks) start operations with [`Client::write`] (or
//! [`Client::write_payload`]), [`Client::read`],
//! [`Client::fsync`] and friends, each returning an [`OpId`]; the operation
//! completes later as a [`ClientEvent::OpDone`]. Between the two, the client
//! exchanges messages with OSTs: feed it with [`Client::handle_message`] and
//! [`Client::handle_timeout`], and after every input drain
//! [`Client::poll_transmit`] and [`Client::poll_event`].
//!
//! Coherence rules, each enforced in one place:
//! * bytes are dirtied only under a granted PW or GROUP lock that covers them
//!   (`ops.rs`, asserted in [`Client::check_invariants`]);
//! * a cached page is read only while a granted lock covers it, and pages are
//!   dropped when the last lock covering them is cancelled (`flush.rs`);
//! * a lock is cancelled only after every dirty byte under it has been
//!   written and acknowledged (`flush.rs`), so whoever gets the lock next
//!   reads the latest completed write from the OST.
//!
//! An operation holds at most one lock reference at a time (a write across
//! stripes locks, copies and releases one stripe chunk after the other), so
//! two operations can never deadlock on each other's locks. The price is that
//! a write spanning several stripes is not atomic with respect to another
//! client's overlapping write; POSIX does not require it of Lustre either.
//!
//! Phantom payloads (simulator only, see [`Payload`]): a client holds one
//! kind of payload, fixed by the first non-empty one it caches (a write, or
//! a read reply). A client of phantoms keeps the same books and sends the
//! same RPCs (same offsets, lengths, locks) as a client of bytes, but never
//! allocates a page buffer or copies a byte; its reads complete with
//! [`OpOutput::ReadPhantom`]. A write of the other kind fails with
//! [`ClientError::MixedPayloads`], and a read reply of the other kind fails
//! its read with [`IoError::PayloadKind`] (nothing is cached from it).
//!
//! What a server may send: any [`ToClient`] message, for any OST; a broken
//! or hostile OST must not panic a client. Replies are matched to requests
//! in flight by OST, xid and kind, grants and completions are checked
//! against the lock asked for, and read replies against the length asked
//! for (see `ops_replies.rs`); whatever does not fit is ignored with a debug
//! log, or fails the operation it names. [`ToClient::Failed`] (an OST out of
//! service) is taken as [`Client::handle_unreachable`].

pub mod imports;
pub mod ladvise;
pub mod locks;
pub mod osc_stats;
pub mod pagecache;
pub mod replay;

mod flush;
mod lost_ost;
mod ops;
#[cfg(test)]
mod pagecache_diff_tests;
#[cfg(test)]
mod reference_cache;
mod session;

use crate::errno::Errno;
use crate::layout::Layout;
use crate::ldlm::GroupId;
use crate::msg::{Cut, IoError, Payload, PayloadKind, ToClient, ToOst};
use crate::pages::{PagePool, PageSpan};
use crate::units::{ClientId, Duration, Instant, ObjectKey, OstIndex, Xid};
use ladvise::{Advice, LadviseError, LockaheadResult, Validated};
use locks::{LocalLock, LockCache};
use ops::{Op, OpKind, OpState};
use osc_stats::{ClientStats, OscStats};
use pagecache::PageCache;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Lustre's default bulk RPC size (the classic LNet MTU).
pub const RPC_BYTES_MAX_DEFAULT: u64 = 1 << 20;
/// `OBD_MAX_RIF_DEFAULT`.
pub const RPCS_IN_FLIGHT_MAX_DEFAULT: usize = 8;
/// `max_dirty_mb` of older releases, per OST.
pub const DIRTY_BYTES_MAX_DEFAULT: u64 = 32 << 20;
/// `LDLM_DEFAULT_LRU_SIZE` (100 per CPU) for a 4-CPU client.
pub const LRU_LOCKS_MAX_DEFAULT: usize = 400;
/// Client page cache budget (Lustre's `max_cached_mb`). Lustre defaults to
/// half of RAM; the core does not know the machine, and a small budget keeps
/// many clients on one host (benchmark ranks) from growing without need:
/// with 512 MiB, 8 ranks writing 2 GiB ran 1.5x slower (`bench/fs.py`).
pub const CACHED_BYTES_MAX_DEFAULT: u64 = 64 << 20;
/// `LDLM_DEFAULT_LRU_MAX_AGE` at Lustre HEAD.
pub const LRU_AGE_MAX_DEFAULT: Duration = Duration::from_secs(600);
/// Acknowledged but uncommitted bytes kept per OST for replay (four dirty
/// allowances): past half of it the client asks the OST to commit.
pub const UNSTABLE_BYTES_MAX_DEFAULT: u64 = 4 * DIRTY_BYTES_MAX_DEFAULT;
/// Lock handles an OST named in a completion or a callback while this
/// client did not know them yet (see `Client::on_unknown_lock`), kept at
/// most; past it an unknown handle is given back at once.
pub const UNCLAIMED_LOCKS_MAX: usize = 1024;
/// Objects whose lost bytes no open file could report, kept for the next
/// open of their file (see `Client::record_write_error`), at most.
pub const UNREPORTED_LOSSES_MAX: usize = 4096;

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Largest write or read RPC (`brw_size`, `max_pages_per_rpc`).
    pub rpc_bytes_max: u64,
    /// Write RPCs in flight per OST (`max_rpcs_in_flight`).
    pub rpcs_in_flight_max: usize,
    /// Dirty (and unacknowledged) bytes per OST before writes wait (`max_dirty_mb`).
    pub dirty_bytes_max: u64,
    /// Unused locks kept in the LRU (`lru_size`).
    pub lru_locks_max: usize,
    /// Cached pages beyond this are dropped once clean (`max_cached_mb`).
    pub cached_bytes_max: u64,
    /// Unused locks older than this are cancelled (`lru_max_age`).
    pub lru_age_max: Duration,
    /// How fast a write's bytes are copied into the page cache, in bytes per
    /// second, for a driver that keeps simulated time (the simulator); `None`
    /// for a driver whose caller really copies. With it, a write step holds
    /// its lock for the copy's duration and its pages become dirty (so
    /// flushable) only when the copy is over, as in Lustre, where a write
    /// copies under a referenced lock and a blocking callback waits for it.
    pub copy_bytes_per_s: Option<f64>,
    /// Sessions with the OSTs, resending after a lost connection, and
    /// replay after an OST restarts: the client keeps what the OSTs
    /// acknowledged until they commit it (see [`replay`] and [`imports`]).
    /// Off in the simulator, whose messages are never lost and whose OSTs
    /// never restart.
    pub recovery: bool,
    /// With `recovery`: acknowledged, uncommitted bytes kept per OST before
    /// writes to it wait (Lustre's unstable pages).
    pub unstable_bytes_max: u64,
    /// How long a lock request may wait at its OST behind conflicting
    /// locks before it is withdrawn and the operations that needed it fail
    /// with [`ClientError::LockWaitTimeout`] (`ETIMEDOUT`); `None`: as long
    /// as it takes. A holder of a called-back lock must give it up within
    /// the OST's callback timeout or be evicted, but a GROUP lock takes no
    /// callback and holds until its holder lets go: without a bound, a
    /// write behind it would wait for as long as that. The network client
    /// sets its RPC timeout here; the simulator, whose waits always end,
    /// none. Where lanefs departs: Lustre's clients wait for a group lock
    /// for as long as it is held.
    pub lock_wait_max: Option<Duration>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            rpc_bytes_max: RPC_BYTES_MAX_DEFAULT,
            rpcs_in_flight_max: RPCS_IN_FLIGHT_MAX_DEFAULT,
            dirty_bytes_max: DIRTY_BYTES_MAX_DEFAULT,
            lru_locks_max: LRU_LOCKS_MAX_DEFAULT,
            cached_bytes_max: CACHED_BYTES_MAX_DEFAULT,
            lru_age_max: LRU_AGE_MAX_DEFAULT,
            copy_bytes_per_s: None,
            recovery: false,
            unstable_bytes_max: UNSTABLE_BYTES_MAX_DEFAULT,
            lock_wait_max: None,
        }
    }
}

impl ClientConfig {
    pub fn validate(&self) -> Result<(), ClientError> {
        let page = crate::units::PAGE_SIZE;
        if self.rpc_bytes_max == 0 || !self.rpc_bytes_max.is_multiple_of(page) {
            return Err(ClientError::Config(format!(
                "RPC size {} is not a positive multiple of the {page}-byte page",
                self.rpc_bytes_max
            )));
        }
        if self.rpc_bytes_max > crate::ost::RPC_BYTES_MAX {
            return Err(ClientError::Config(format!(
                "RPC size {} is above the {} bytes an OST takes in one RPC; lower it",
                self.rpc_bytes_max,
                crate::ost::RPC_BYTES_MAX
            )));
        }
        if self.rpcs_in_flight_max == 0 || self.rpcs_in_flight_max > 256 {
            return Err(ClientError::Config(format!(
                "RPCs in flight {} is outside 1..=256 (Lustre's OSC_MAX_RIF_MAX)",
                self.rpcs_in_flight_max
            )));
        }
        if self.dirty_bytes_max < self.rpc_bytes_max {
            return Err(ClientError::Config(format!(
                "dirty limit {} is below one RPC ({}); raise it",
                self.dirty_bytes_max, self.rpc_bytes_max
            )));
        }
        if self.recovery && self.unstable_bytes_max < self.rpc_bytes_max {
            return Err(ClientError::Config(format!(
                "unstable limit {} is below one RPC ({}); raise it",
                self.unstable_bytes_max, self.rpc_bytes_max
            )));
        }
        if let Some(bw) = self.copy_bytes_per_s {
            if !(bw.is_finite() && bw > 0.0) {
                return Err(ClientError::Config(format!(
                    "copy bandwidth {bw} bytes/s is not a positive number; give one or leave it out"
                )));
            }
        }
        Ok(())
    }

    /// How long copying `bytes` into the page cache takes (zero without a
    /// copy bandwidth).
    pub fn copy_time(&self, bytes: u64) -> Duration {
        match self.copy_bytes_per_s {
            Some(bw) => Duration((bytes as f64 * 1e9 / bw).ceil() as u64),
            None => Duration::ZERO,
        }
    }
}

/// A client setting `lctl set_param` may change while the client runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tunable {
    /// `osc.*.max_rpcs_in_flight`.
    RpcsInFlightMax(usize),
    /// `osc.*.max_dirty_mb`.
    DirtyBytesMax(u64),
    /// `llite.*.max_cached_mb`.
    CachedBytesMax(u64),
    /// `ldlm.namespaces.*.lru_size`.
    LruLocksMax(usize),
    /// `ldlm.namespaces.*.lru_max_age`.
    LruAgeMax(Duration),
    /// `osc.*.max_pages_per_rpc`.
    RpcBytesMax(u64),
}

/// A file opened on this client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FileHandle(pub u64);

/// An operation started on this client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct OpId(pub u64);

#[derive(Clone, Debug)]
struct OpenFile {
    layout: Layout,
    /// Lock-no-expand advice set on this open file.
    no_expand: bool,
    /// Group lock held through this open file.
    group: Option<GroupId>,
    /// Bytes written through this file were lost before they reached an
    /// OST (eviction, a lost connection, a failed write RPC): the next
    /// fsync or close reports it, once, as Lustre reports an asynchronous
    /// write error.
    write_error: Option<ClientError>,
}

/// What a finished operation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpOutput {
    Written(u64),
    Read(Vec<u8>),
    /// A read of this many bytes by a client of phantom payloads.
    ReadPhantom(u64),
    Synced,
    Closed,
    /// A file's size, and the bytes of space its objects hold.
    Size {
        size: u64,
        allocated: u64,
    },
    Truncated,
    /// A hole punched or space reserved (`fallocate`).
    Allocated,
    GroupLocked,
    GroupUnlocked,
    LockaheadDone,
    /// Synchronous cache advice answered by every OST it went to.
    Advised,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("no such open file handle")]
    BadFile,
    #[error("I/O failed on {ost}: {error}")]
    Io { ost: OstIndex, error: IoError },
    #[error("offset {offset} + length {len} is beyond the largest file offset")]
    TooLarge { offset: u64, len: u64 },
    #[error("file has no group lock {0}; take it with group_lock first")]
    NoGroupLock(u64),
    #[error("a group lock is already held on this file")]
    GroupLockHeld,
    #[error(transparent)]
    Ladvise(#[from] LadviseError),
    #[error("{ost} is unreachable: {reason}")]
    Unreachable { ost: OstIndex, reason: String },
    #[error("data written through this file was lost before it was durable on {ost}: {cause}; write it again")]
    WriteLost { ost: OstIndex, cause: LossCause },
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    #[error("invalid client configuration: {0}")]
    Config(String),
    #[error(
        "waited {waited_s} s for a {mode} lock on {ost}, held off by another client's lock (a GROUP lock \
         holds until its holder releases it); try again later, or raise the client's timeout"
    )]
    LockWaitTimeout { ost: OstIndex, mode: &'static str, waited_s: u64 },
    #[error("this client holds {held} payloads and cannot take {offered} ones; use one client per kind")]
    MixedPayloads { held: PayloadKind, offered: PayloadKind },
    #[error("fallocate of {0:?}: a hole or a reservation of at least one byte (a truncate sets a size)")]
    InvalidCut(Cut),
}

impl ClientError {
    /// The error number a program sees for it (what a POSIX layer returns).
    pub fn errno(&self) -> Errno {
        match self {
            ClientError::BadFile => Errno::EBADF,
            ClientError::Io { error, .. } => error.errno(),
            ClientError::TooLarge { .. } => Errno::EFBIG,
            ClientError::NoGroupLock(_) | ClientError::GroupLockHeld | ClientError::Ladvise(_) => Errno::EINVAL,
            ClientError::Unreachable { .. } => Errno::EIO,
            ClientError::WriteLost { cause, .. } => cause.errno(),
            ClientError::Protocol(_) => Errno::EIO,
            ClientError::Config(_) | ClientError::MixedPayloads { .. } | ClientError::InvalidCut(_) => Errno::EINVAL,
            ClientError::LockWaitTimeout { .. } => Errno::ETIMEDOUT,
        }
    }
}

/// Why bytes a program wrote were lost before they were durable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LossCause {
    #[error("the OST evicted this client")]
    Evicted,
    #[error("{0}")]
    Unreachable(String),
    #[error("the OST failed a write: {0}")]
    WriteFailed(IoError),
    #[error("the OST could not make it durable: {0}")]
    SyncFailed(IoError),
}

impl LossCause {
    /// `ENOSPC` for a full OST (as Linux reports a failed writeback), `EIO`
    /// otherwise.
    pub fn errno(&self) -> Errno {
        match self {
            LossCause::WriteFailed(error) | LossCause::SyncFailed(error) => match error.errno() {
                Errno::ENOSPC | Errno::EDQUOT => Errno::ENOSPC,
                _ => Errno::EIO,
            },
            LossCause::Evicted | LossCause::Unreachable(_) => Errno::EIO,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    OpDone {
        op: OpId,
        result: Result<OpOutput, ClientError>,
    },
    /// Dirty data lost: the OST evicted this client, the connection to it
    /// was lost, or it refused a write RPC. The files concerned also fail
    /// their next fsync or close with [`ClientError::WriteLost`].
    DataLost {
        ost: OstIndex,
        bytes: u64,
    },
    /// `ost` restarted and keeps this client's requests until the clients
    /// it knew have replayed: at most `remaining` more, `clients_left` of
    /// them still to come (see [`crate::msg::ToClient::Recovering`]).
    OstRecovering {
        ost: OstIndex,
        remaining: Duration,
        clients_left: u32,
    },
}

/// What this client did, for statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClientCounters {
    pub enqueues: u64,
    pub lockahead_enqueues: u64,
    pub lockahead_refused: u64,
    pub lock_matches: u64,
    pub blocking_callbacks: u64,
    pub cancels: u64,
    pub write_rpcs: u64,
    pub read_rpcs: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub evictions: u64,
    pub bytes_lost: u64,
}

/// An object with bytes written since it was last found clean.
#[derive(Clone, Copy, Debug, Default)]
struct DirtyObject {
    written_bytes: u64,
    /// Where the next whole-object writeback looks first.
    cursor: u64,
}

/// Where an fsync's sync RPCs stand.
enum Commit {
    /// Just sent.
    Sent,
    Waiting,
    /// All answered (or none needed).
    Done,
}

/// An RPC waiting for its reply.
#[derive(Clone, Debug)]
enum Rpc {
    /// `pinned` holds the frames the RPC names until its reply: a driver
    /// that lets the server read them in place (shared memory) relies on it.
    Write {
        key: ObjectKey,
        offset: u64,
        len: u64,
        orphaned: bool,
        pinned: Option<PageSpan>,
    },
    Read {
        op: OpId,
        key: ObjectKey,
        offset: u64,
        len: u64,
    },
    /// `dropped`: dirty bytes past a truncate's size it took out of the
    /// cache, lost if the punch fails.
    Punch {
        op: OpId,
        key: ObjectKey,
        cut: Cut,
        dropped: u64,
    },
    Getattr {
        op: OpId,
        stripe: u32,
        ost: OstIndex,
    },
    /// An fsync's `OST_SYNC` of one object.
    Sync {
        op: OpId,
        key: ObjectKey,
    },
    /// A commit asked because uncommitted bytes pile up (soft sync).
    Commit {
        key: ObjectKey,
    },
    /// Cache advice on `[start, end)` of an object, for an operation
    /// waiting on it, or for none (asynchronous advice).
    Advise {
        op: Option<OpId>,
        key: ObjectKey,
        advice: crate::msg::CacheAdvice,
        start: u64,
        end: u64,
    },
}

impl Rpc {
    /// The OST it was sent to.
    fn ost(&self) -> OstIndex {
        match self {
            Rpc::Write { key, .. }
            | Rpc::Read { key, .. }
            | Rpc::Sync { key, .. }
            | Rpc::Punch { key, .. }
            | Rpc::Commit { key }
            | Rpc::Advise { key, .. } => key.ost,
            Rpc::Getattr { ost, .. } => *ost,
        }
    }
}

/// What one pass of [`Client::run`] moved.
#[derive(Clone, Copy, Debug, Default)]
struct Pass {
    ops_stepped: usize,
    ops_moved: bool,
    trimmed: bool,
    cancelled: bool,
    sent: bool,
}

impl Pass {
    fn moved(&self) -> bool {
        self.ops_moved || self.trimmed || self.cancelled || self.sent
    }
}

pub struct Client {
    id: ClientId,
    config: ClientConfig,
    files: BTreeMap<FileHandle, OpenFile>,
    locks: LockCache,
    cache: PageCache,
    ops: BTreeMap<OpId, Op>,
    /// When each write step copying into the page cache ends: the ops in
    /// `OpState::Copying`, by end.
    copy_ends: BTreeSet<(Instant, OpId)>,
    /// When each lock waiting at its OST is withdrawn (with
    /// `lock_wait_max`). An entry whose lock stopped waiting is dropped
    /// when its time comes; at most one per lock.
    lock_wait_ends: BTreeSet<(Instant, LocalLock)>,
    rpcs: FxHashMap<Xid, Rpc>,
    writes_in_flight: FxHashMap<OstIndex, usize>,
    /// Read RPCs in flight per OST (for `rpc_stats`; reads have no limit).
    reads_in_flight: FxHashMap<OstIndex, usize>,
    /// Bytes written per object since it was last found fully written back:
    /// what the writeback pump looks at, so that it never scans the cache.
    dirty_keys: BTreeMap<ObjectKey, DirtyObject>,
    /// Objects with writes the OSTs acknowledged that no fsync has made
    /// durable yet: what an fsync asks their OSTs to sync (`OST_SYNC`).
    uncommitted: FxHashSet<ObjectKey>,
    transmits: VecDeque<(OstIndex, ToOst)>,
    events: VecDeque<ClientEvent>,
    /// What `pump_writeback` must write, kept between calls (no allocation
    /// per call).
    flush_scratch: Vec<(ObjectKey, crate::Extent)>,
    counters: ClientCounters,
    /// Histograms and counters per OST and per mount (see [`osc_stats`]).
    stats: ClientStats,
    /// The kind of payload this client holds, once it has cached one.
    payload_kind: Option<PayloadKind>,
    /// Sessions with the OSTs (with `config.recovery`).
    imports: imports::Imports,
    /// Acknowledged changes kept until committed (with `config.recovery`).
    replay: replay::ReplayLog,
    /// Handles an OST named in a completion or a callback before the
    /// answer to one of this client's enqueues could say they were its
    /// own: whether each was called back.
    unclaimed: BTreeMap<(OstIndex, crate::units::LockHandle), bool>,
    /// Losses of objects no open file had: the next open of their file
    /// reports them, as Linux reports a writeback error nobody has seen to
    /// the next fsync of the file, whichever descriptor it comes through.
    unreported: BTreeMap<ObjectKey, ClientError>,
    file_next: u64,
    op_next: u64,
    xid_next: u64,
}

impl Client {
    pub fn new(id: ClientId, config: ClientConfig) -> Result<Self, ClientError> {
        config.validate()?;
        Ok(Client {
            id,
            config,
            files: BTreeMap::new(),
            locks: LockCache::default(),
            cache: PageCache::new(),
            ops: BTreeMap::new(),
            copy_ends: BTreeSet::new(),
            lock_wait_ends: BTreeSet::new(),
            rpcs: FxHashMap::default(),
            writes_in_flight: FxHashMap::default(),
            reads_in_flight: FxHashMap::default(),
            dirty_keys: BTreeMap::new(),
            uncommitted: FxHashSet::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            flush_scratch: Vec::new(),
            counters: ClientCounters::default(),
            stats: ClientStats::default(),
            payload_kind: None,
            imports: imports::Imports::default(),
            replay: replay::ReplayLog::default(),
            unclaimed: BTreeMap::new(),
            unreported: BTreeMap::new(),
            file_next: 1,
            op_next: 1,
            xid_next: 1,
        })
    }

    /// This client's frames come from `pool` (the heap by default). Set it
    /// before anything is cached.
    pub fn with_page_pool(mut self, pool: PagePool) -> Self {
        assert_eq!(self.cache.cached_pages(), 0, "page pool changed under cached pages");
        self.cache = PageCache::with_pool(pool);
        self
    }

    pub fn id(&self) -> ClientId {
        self.id
    }
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }
    pub fn counters(&self) -> ClientCounters {
        self.counters
    }
    pub fn cache(&self) -> &PageCache {
        &self.cache
    }
    /// Statistics since [`Client::reset_stats`] (or since the start).
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }
    /// Start the statistics again from zero (writing to a Lustre stats file).
    pub fn reset_stats(&mut self, now: Instant) {
        self.stats = ClientStats { since: now, ..ClientStats::default() };
    }
    /// Read and write RPCs in flight to `ost` now.
    pub fn rpcs_in_flight(&self, ost: OstIndex) -> (usize, usize) {
        let count = |map: &FxHashMap<OstIndex, usize>| map.get(&ost).copied().unwrap_or(0);
        (count(&self.reads_in_flight), count(&self.writes_in_flight))
    }
    /// The statistics of `ost`'s OSC.
    fn osc(&mut self, ost: OstIndex) -> &mut OscStats {
        self.stats.osc.entry(ost).or_default()
    }
    /// RPCs of `kind` in flight to `ost`, counted when one is sent (the
    /// in-flight histograms of `rpc_stats`).
    fn note_rpc_sent(&mut self, ost: OstIndex, write: bool, offset: u64, len: u64) {
        let page = crate::units::PAGE_SIZE;
        let pages = (offset + len).div_ceil(page).saturating_sub(offset / page);
        let (reads, writes) = self.rpcs_in_flight(ost);
        let in_flight = if write { writes } else { reads };
        let osc = self.osc(ost);
        let (pages_hist, flight, offsets, bytes) = if write {
            (&mut osc.write_pages, &mut osc.write_in_flight, &mut osc.write_offset, &mut osc.write_bytes)
        } else {
            (&mut osc.read_pages, &mut osc.read_in_flight, &mut osc.read_offset, &mut osc.read_bytes)
        };
        pages_hist.tally_log2(pages);
        flight.tally(in_flight);
        offsets.tally_log2(offset / page + 1);
        bytes.sample(len);
    }

    /// Change one tunable of a running client (`lctl set_param`), keeping
    /// every invariant: the new settings must pass
    /// [`ClientConfig::validate`], and what a lower limit puts over it is
    /// dealt with at once (a lower dirty limit starts writeback, a smaller
    /// LRU or a shorter age cancels locks, a smaller cache drops clean
    /// pages), never left to break [`Client::check_invariants`].
    pub fn set_tunable(&mut self, now: Instant, tunable: Tunable) -> Result<(), ClientError> {
        let mut config = self.config.clone();
        match tunable {
            Tunable::RpcsInFlightMax(n) => config.rpcs_in_flight_max = n,
            Tunable::DirtyBytesMax(bytes) => config.dirty_bytes_max = bytes,
            Tunable::CachedBytesMax(bytes) => config.cached_bytes_max = bytes,
            Tunable::LruLocksMax(n) => config.lru_locks_max = n,
            Tunable::LruAgeMax(age) => config.lru_age_max = age,
            Tunable::RpcBytesMax(bytes) => config.rpc_bytes_max = bytes,
        }
        config.validate()?;
        self.config = config;
        if let Tunable::CachedBytesMax(bytes) = tunable {
            let keys: BTreeSet<ObjectKey> = self.locks.iter().map(|(_, l)| l.key).collect();
            for key in keys {
                if self.cache.cached_pages() as u64 * crate::units::PAGE_SIZE <= bytes {
                    break;
                }
                self.cache.drop_clean(key, crate::Extent::WHOLE);
            }
        }
        // Ages the LRU with the new age, trims it to the new size and
        // writes back what the new dirty limit puts over it.
        self.handle_timeout(now);
        Ok(())
    }
    /// Acknowledged bytes kept for replay until their OSTs commit them
    /// (Lustre's unstable pages).
    pub fn unstable_bytes(&self) -> u64 {
        self.replay.total_bytes()
    }
    /// The session with `ost` (Lustre's import), as `osc.*.import` shows it.
    pub fn import(&self, ost: OstIndex) -> imports::Import {
        self.imports.get(ost)
    }

    pub fn lock_cache(&self) -> &LockCache {
        &self.locks
    }
    pub fn ops_pending(&self) -> usize {
        self.ops.len()
    }
    /// Bytes or phantoms: fixed by the first non-empty payload cached.
    pub fn payload_kind(&self) -> Option<PayloadKind> {
        self.payload_kind
    }

    // ----- application interface ----------------------------------------

    /// Open a file whose layout the caller got from the MDS.
    /// A loss of the file's bytes that no open handle could report yet
    /// (it came after the last close) is reported by this handle's first
    /// fsync or close.
    pub fn open(&mut self, layout: Layout) -> FileHandle {
        let fh = FileHandle(self.file_next);
        self.file_next += 1;
        let mut write_error = None;
        if !self.unreported.is_empty() {
            for key in layout.objects() {
                if let Some(error) = self.unreported.remove(key) {
                    write_error.get_or_insert(error);
                }
            }
        }
        self.stats.llite.opens += 1;
        self.files.insert(fh, OpenFile { layout, no_expand: false, group: None, write_error });
        fh
    }

    /// Gives the open file `fh` another layout: its file was restriped
    /// (`lanefs migrate`) and its old objects are gone. Whether it
    /// changed (an unknown handle changes nothing). Nothing of the old
    /// objects is dirty here: the migration's group lock called back every
    /// lock on them, and this client flushed what they covered.
    pub fn relayout(&mut self, fh: FileHandle, layout: Layout) -> bool {
        match self.files.get_mut(&fh) {
            Some(file) if file.layout != layout => {
                file.layout = layout;
                true
            }
            _ => false,
        }
    }

    pub fn layout(&self, fh: FileHandle) -> Option<&Layout> {
        self.files.get(&fh).map(|f| &f.layout)
    }

    /// Buffered write of `data` at file `offset`: completes once the bytes
    /// are in the page cache under a write lock.
    pub fn write(&mut self, now: Instant, fh: FileHandle, offset: u64, data: Vec<u8>) -> OpId {
        self.write_payload(now, fh, offset, Payload::Bytes(data))
    }

    /// [`Client::write`] of either kind of payload. A phantom is written as
    /// bytes would be (same locks, dirty accounting and write RPCs) without
    /// any data; it fails with [`ClientError::MixedPayloads`] if this client
    /// already holds bytes, and so does a write of bytes after phantoms.
    pub fn write_payload(&mut self, now: Instant, fh: FileHandle, offset: u64, data: Payload) -> OpId {
        let len = data.len();
        self.start(now, fh, OpKind::Write { data }, offset, len)
    }

    /// Read `len` bytes at `offset`; holes read as zeros. A client of
    /// phantom payloads completes it with [`OpOutput::ReadPhantom`].
    pub fn read(&mut self, now: Instant, fh: FileHandle, offset: u64, len: u64) -> OpId {
        self.start(now, fh, OpKind::Read { len, buf: ops::ReadBuf::Empty }, offset, len)
    }

    /// Write back every dirty byte of the file, wait for the OSTs, then ask
    /// the OSTs of the file's objects written since the last fsync to make
    /// those writes durable (`OST_SYNC`) and wait for that too.
    pub fn fsync(&mut self, now: Instant, fh: FileHandle) -> OpId {
        self.start(now, fh, OpKind::Fsync { committing: false, failed_ost: None }, 0, 0)
    }

    /// Flush, then forget the handle (locks stay cached, as on Lustre). A
    /// GROUP lock taken through the handle is released first, as Lustre's
    /// `ll_file_release` releases it: a group lock is never called back, so
    /// one left behind by a closed handle would block every other lock of
    /// the file, this client's own included, for as long as the client lives.
    pub fn close(&mut self, now: Instant, fh: FileHandle) -> OpId {
        let unlocking = self.files.get(&fh).and_then(|f| f.group);
        self.start(now, fh, OpKind::Close { unlocking }, 0, 0)
    }

    /// File size, including other clients' cached writes (glimpse).
    pub fn stat(&mut self, now: Instant, fh: FileHandle) -> OpId {
        self.start(now, fh, OpKind::Stat { sizes: Vec::new(), allocated: Vec::new(), failed_ost: None }, 0, 0)
    }

    /// `fallocate(2)`: a hole punched in the file (`Cut::Hole`), or space
    /// reserved for it (`Cut::Reserve`), at file offsets, under a PW lock on
    /// each object's range, with this client's dirty bytes there written
    /// first and its cached pages there dropped (Lustre's `ll_fallocate`).
    /// A truncate is [`Client::truncate`].
    pub fn fallocate(&mut self, now: Instant, fh: FileHandle, cut: Cut) -> OpId {
        let (offset, len) = cut.span();
        self.start(now, fh, OpKind::Fallocate { cut }, offset, len)
    }

    pub fn truncate(&mut self, now: Instant, fh: FileHandle, size: u64) -> OpId {
        self.start(now, fh, OpKind::Truncate { size }, 0, 0)
    }

    /// Take a GROUP lock on every object of the file (`LL_IOC_GROUP_LOCK`).
    pub fn group_lock(&mut self, now: Instant, fh: FileHandle, gid: GroupId) -> OpId {
        self.start(now, fh, OpKind::GroupLock { gid }, 0, 0)
    }

    /// Flush and release the file's GROUP locks (`LL_IOC_GROUP_UNLOCK`).
    pub fn group_unlock(&mut self, now: Instant, fh: FileHandle, gid: GroupId) -> OpId {
        self.start(now, fh, OpKind::GroupUnlock { gid }, 0, 0)
    }

    /// `llapi_ladvise`: lockahead, lock-no-expand and cache advice on an
    /// open file. Asynchronous lockahead answers at once with one result per
    /// advice, and asynchronous cache advice (`LF_ASYNC`, `lfs ladvise -b`)
    /// is sent without anyone waiting for its answers. With synchronous
    /// advice it returns an operation that completes when the locks are
    /// granted, then when every OST the cache advice went to has answered
    /// (the first error fails it, naming its OST).
    pub fn ladvise(&mut self, now: Instant, fh: FileHandle, advices: &[Advice]) -> Result<LadviseOutcome, ClientError> {
        if advices.is_empty() || advices.len() >= ladvise::ADVICES_PER_CALL_MAX {
            return Err(LadviseError::Count(advices.len()).into());
        }
        let validated: Vec<Validated> = advices.iter().map(Advice::validate).collect::<Result<_, _>>()?;
        if !self.files.contains_key(&fh) {
            return Err(ClientError::BadFile);
        }
        let mut results = Vec::new();
        let mut sync_ranges = Vec::new();
        let mut cache = Vec::new();
        for advice in validated {
            match advice {
                Validated::LockNoExpand { set } => self.files.get_mut(&fh).expect("checked").no_expand = set,
                Validated::Lockahead { mode, start, end, asynchronous: true } => {
                    results.push(self.lockahead_async(now, fh, mode.lock_mode(), start, end));
                }
                Validated::Lockahead { mode, start, end, asynchronous: false } => {
                    sync_ranges.push((mode.lock_mode(), start, end));
                }
                Validated::Cache { advice, start, end, asynchronous: true } => {
                    self.advise_async(fh, advice, start, end);
                }
                Validated::Cache { advice, start, end, asynchronous: false } => cache.push((advice, start, end)),
            }
        }
        self.run(now);
        let kind = match (sync_ranges.is_empty(), cache.is_empty()) {
            (true, true) => return Ok(LadviseOutcome::Results(results)),
            (false, _) => OpKind::Lockahead { ranges: sync_ranges, then: cache },
            (true, false) => OpKind::Advise { ranges: cache, hints: Vec::new(), failed_ost: None },
        };
        let op = self.start(now, fh, kind, 0, 0);
        Ok(LadviseOutcome::Pending { results, op })
    }

    // ----- protocol inputs ----------------------------------------------

    pub fn handle_message(&mut self, now: Instant, from: OstIndex, message: ToClient) {
        match message {
            ToClient::Enqueue { xid, reply } => self.on_enqueue_reply(now, from, xid, reply),
            ToClient::Completion { lock, extent, callback_pending, proof } => {
                self.on_completion(now, from, lock, extent, callback_pending, proof)
            }
            ToClient::Blocking { lock } => self.on_blocking(from, lock),
            ToClient::WaitFailed { lock, error } => self.on_wait_failed(from, lock, error),
            ToClient::WriteReply { xid, result, transno, proof } => {
                self.on_write_reply(from, xid, result, transno, proof)
            }
            ToClient::ReadReply { xid, result } => self.on_read_reply(from, xid, result),
            ToClient::PunchReply { xid, result, transno, proof } => {
                self.on_punch_reply(from, xid, result, transno, proof)
            }
            ToClient::GetattrReply { xid, result } => self.on_getattr_reply(from, xid, result),
            ToClient::SyncReply { xid, result } => self.on_sync_reply(from, xid, result),
            ToClient::AdviseReply { xid, result } => self.on_advise_reply(from, xid, result),
            ToClient::Glimpse { xid, object, .. } => {
                let size = self.cache.object_cached_end(ObjectKey { ost: from, object });
                self.send(from, ToOst::GlimpseReply { xid, size });
            }
            ToClient::Evicted => self.on_evicted(from),
            ToClient::Connected { epoch, recovering } => self.on_connected(from, epoch, recovering),
            ToClient::Committed { transno } => self.on_committed(from, transno),
            ToClient::CommitFailed { object, error, seq } => self.on_commit_failed(from, object, error, seq),
            ToClient::LockLost { lock } => self.on_lock_lost(from, lock),
            ToClient::Disconnected => self.on_disconnected(from),
            ToClient::Recovering { remaining, clients_left } => {
                self.events.push_back(ClientEvent::OstRecovering { ost: from, remaining, clients_left });
            }
            ToClient::Failed => {
                tracing::warn!(client = self.id.0, ost = %from, "the OST is out of service");
                self.handle_unreachable(now, from, &IoError::Failed.to_string());
            }
        }
        self.run(now);
    }

    /// Give back every lock (flushing what they cover), as an unmount does.
    /// Done when [`Client::lock_cache`] is empty.
    pub fn release_all(&mut self, now: Instant) {
        let granted: Vec<LocalLock> = self.locks.iter().filter(|(_, l)| l.is_granted()).map(|(id, _)| id).collect();
        for id in granted {
            self.begin_cancel(id);
        }
        self.run(now);
    }

    /// Age the lock LRU.
    pub fn handle_timeout(&mut self, now: Instant) {
        // Those whose last use plus the age limit is now or earlier.
        let aged = now.0.checked_sub(self.config.lru_age_max.as_ns());
        for id in aged.map(|t| self.locks.unused_since(Instant(t))).unwrap_or_default() {
            self.begin_cancel(id);
        }
        self.end_lock_waits(now);
        self.run(now);
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<(OstIndex, ToOst)> {
        self.transmits.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When the oldest unused lock reaches the LRU age limit, or a write's
    /// copy into the page cache ends, whichever comes first.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let lru = self.locks.oldest_unused().map(|t| t + self.config.lru_age_max);
        let lock_wait = self.lock_wait_ends.first().map(|&(t, _)| t);
        self.copy_ends.first().map(|&(t, _)| t).into_iter().chain(lru).chain(lock_wait).min()
    }

    /// Panics if a coherence invariant is broken.
    pub fn check_invariants(&self) {
        self.cache.check_invariants();
        self.locks.check_invariants();
        self.stats.check_invariants();
        let copying: BTreeSet<(Instant, OpId)> = self
            .ops
            .iter()
            .filter_map(|(&id, op)| match op.state {
                OpState::Copying { until } => Some((until, id)),
                _ => None,
            })
            .collect();
        assert_eq!(copying, self.copy_ends, "{}: copy ends disagree with the copying ops", self.id);
        let (pages, data_pages) = (self.cache.cached_pages(), self.cache.data_pages());
        match self.payload_kind {
            None => assert_eq!(pages, 0, "{}: pages cached before any payload", self.id),
            Some(PayloadKind::Bytes) => {
                assert_eq!(data_pages, pages, "{}: phantom pages in a client of bytes", self.id)
            }
            Some(PayloadKind::Phantom) => {
                assert_eq!(data_pages, 0, "{}: page buffers in a client of phantoms", self.id)
            }
        }
        for key in self.cache.keys_with_dirty() {
            assert!(self.dirty_keys.contains_key(&key), "{}: dirty object {key:?} not tracked for writeback", self.id);
            for range in self.cache.dirty_ranges(key) {
                // Every dirty page's start under a write lock, a lock's
                // extent skipped at once (a per-page walk made this check
                // most of a long run's time).
                let mut page = range.start - range.start % crate::units::PAGE_SIZE;
                while page <= range.end {
                    let Some(end) = self.locks.write_covered_to(key, page) else {
                        panic!("{}: dirty page {page} of {key:?} without a write lock", self.id);
                    };
                    let Some(next) =
                        end.checked_add(1).and_then(|e| e.checked_next_multiple_of(crate::units::PAGE_SIZE))
                    else {
                        break; // covered to the end of the object
                    };
                    page = next.max(page + crate::units::PAGE_SIZE);
                }
            }
        }
        let mut users: BTreeMap<LocalLock, u32> = BTreeMap::new();
        for op in self.ops.values() {
            if let Some(l) = op.holding {
                *users.entry(l).or_default() += 1;
            }
        }
        for (id, lock) in self.locks.iter() {
            assert_eq!(lock.users, users.get(&id).copied().unwrap_or(0), "lock {id:?} user count");
            assert!(lock.extent.contains(&lock.requested) || lock.is_pending(), "lock {id:?} smaller than asked");
        }
        for rpc in self.rpcs.values() {
            if let Rpc::Write { len, pinned: Some(span), .. } = rpc {
                assert_eq!(span.len(), *len, "{}: a write RPC pins other frames than it sent", self.id);
            }
        }
        let writes: usize = self.writes_in_flight.values().sum();
        let listed = self.rpcs.values().filter(|r| matches!(r, Rpc::Write { .. })).count();
        assert_eq!(writes, listed, "write RPC accounting");
        let reads: usize = self.reads_in_flight.values().sum();
        let listed = self.rpcs.values().filter(|r| matches!(r, Rpc::Read { .. })).count();
        assert_eq!(reads, listed, "read RPC accounting");
        self.replay.check_invariants();
        self.imports.check_invariants();
        assert!(self.unclaimed.len() <= UNCLAIMED_LOCKS_MAX, "{}: unclaimed handles past their bound", self.id);
        assert!(self.unreported.len() <= UNREPORTED_LOSSES_MAX, "{}: unreported losses past their bound", self.id);
        for &(ost, handle) in self.unclaimed.keys() {
            assert!(
                self.locks.by_handle(ost, handle).is_none(),
                "{}: handle {handle:?} both held and unclaimed",
                self.id
            );
        }
        if !self.config.recovery {
            assert!(self.replay.is_empty(), "{}: changes kept for replay without recovery", self.id);
        }
    }

    // ----- internals shared by ops.rs and flush.rs ------------------------

    /// Send `message` to `to`, if the session with it allows (see
    /// [`imports`]): requests that cannot go now stay in the client's tables
    /// and go when the OST answers the connect.
    fn send(&mut self, to: OstIndex, message: ToOst) {
        if self.config.recovery && !self.session_allows(to) {
            return;
        }
        self.transmits.push_back((to, message));
    }

    /// The RPC `xid`, taken out, if it went to `from` and `answers` says the
    /// reply is of its kind; a stray reply (an unknown or answered xid,
    /// another OST's, another kind of RPC's) leaves the books as they are.
    fn take_rpc(&mut self, from: OstIndex, xid: Xid, answers: fn(&Rpc) -> bool) -> Option<Rpc> {
        match self.rpcs.get(&xid) {
            Some(rpc) if rpc.ost() == from && answers(rpc) => {
                if matches!(rpc, Rpc::Read { .. }) {
                    *self.reads_in_flight.get_mut(&from).expect("read was counted") -= 1;
                }
                self.rpcs.remove(&xid)
            }
            _ => {
                tracing::debug!(client = self.id.0, ost = %from, xid = xid.0, "stray reply ignored");
                None
            }
        }
    }

    fn xid(&mut self) -> Xid {
        let x = Xid(self.xid_next);
        self.xid_next += 1;
        x
    }

    fn start(&mut self, now: Instant, fh: FileHandle, kind: OpKind, offset: u64, len: u64) -> OpId {
        let id = OpId(self.op_next);
        self.op_next += 1;
        let llite = &mut self.stats.llite;
        match &kind {
            OpKind::Write { .. } => llite.write_bytes.sample(len),
            OpKind::Read { .. } => llite.read_bytes.sample(len),
            OpKind::Fsync { .. } => llite.fsyncs += 1,
            OpKind::Close { .. } => llite.closes += 1,
            OpKind::Stat { .. } => llite.getattrs += 1,
            OpKind::Truncate { .. } => llite.truncates += 1,
            OpKind::Fallocate { .. } => llite.fallocates += 1,
            OpKind::Lockahead { .. } => llite.lockaheads += 1,
            _ => {}
        }
        match Op::plan(&self.files, fh, kind, offset, len) {
            Ok(op) => {
                self.ops.insert(id, op);
                self.run(now);
            }
            Err(error) => self.events.push_back(ClientEvent::OpDone { op: id, result: Err(error) }),
        }
        id
    }

    fn finish(&mut self, id: OpId, result: Result<OpOutput, ClientError>) {
        let op = self.ops.remove(&id).expect("finishing a live op");
        if let OpState::Copying { until } = op.state {
            self.copy_ends.remove(&(until, id));
        }
        debug_assert!(op.holding.is_none(), "op finished holding a lock");
        self.events.push_back(ClientEvent::OpDone { op: id, result });
    }

    /// Bring every operation, cancel and writeback as far as it can go.
    ///
    /// A pass steps every operation, then the LRU trim, the cancel pump and
    /// the writeback pump, and passes repeat while one moves something.
    /// Most passes after one that moved something move nothing, so a pass
    /// is repeated only when the last one may have unblocked something:
    /// - each operation is stepped until it waits, and the pumps that
    ///   follow it cannot end its wait unless a cancel removed a lock (an
    ///   operation may wait for a lock to go: a refused enqueue, a group
    ///   unlock); trimming only marks locks, writeback turns dirty bytes
    ///   into bytes in flight (still counted against the dirty limit, still
    ///   waited for by a flush), and replies arrive as messages;
    /// - an operation may unblock another stepped before it, so moves with
    ///   more than one operation live repeat the pass;
    /// - each pump, run again, finds what it left: trimming is done once the
    ///   locks are few enough, the cancel pump saw the locks after the trim,
    ///   and the writeback pump stops only when nothing is left to send or
    ///   the RPC slots are full.
    ///
    /// Debug builds run the skipped pass anyway and check that it moves
    /// nothing.
    fn run(&mut self, now: Instant) {
        loop {
            let pass = self.pass(now);
            if !pass.moved() {
                break;
            }
            let again = pass.cancelled || (pass.ops_moved && pass.ops_stepped > 1);
            if !again {
                debug_assert!(!self.pass(now).moved(), "a pass after {pass:?} moved something");
                break;
            }
        }
    }

    /// One pass of [`Client::run`].
    fn pass(&mut self, now: Instant) -> Pass {
        let mut pass = Pass::default();
        // The ops live at the start of this pass, in id order (stepping
        // one may finish it, never start another).
        let mut next = self.ops.keys().next().copied();
        while let Some(id) = next {
            pass.ops_stepped += 1;
            pass.ops_moved |= self.step_op(now, id);
            next = self.ops.range(OpId(id.0 + 1)..).next().map(|(&id, _)| id);
        }
        pass.trimmed = self.trim_lru();
        pass.cancelled = self.pump_cancels();
        pass.sent = self.pump_writeback();
        pass
    }

    /// Over the cache budget: drop the clean pages of `range`, which the
    /// caller has just finished with (written back, or read out).
    ///
    /// The budget counts the bytes kept for replay too, as Lustre's
    /// `max_cached_mb` counts unstable pages: a kept page stays in memory
    /// after the cache lets it go, until its OST commits it. A page both
    /// cached and kept counts twice, so while commits are pending the cache
    /// may hold less than its budget.
    fn trim_cache(&mut self, key: ObjectKey, range: crate::Extent) {
        let held = self.cache.cached_pages() as u64 * crate::units::PAGE_SIZE + self.replay.total_bytes();
        if held > self.config.cached_bytes_max {
            self.cache.drop_clean(key, range);
        }
    }

    /// Whether `len` bytes of `kind` may enter this client: not if it holds
    /// the other kind. Empty payloads carry nothing and always may.
    fn check_payload(&self, kind: PayloadKind, len: u64) -> Result<(), ClientError> {
        match self.payload_kind {
            Some(held) if held != kind && len > 0 => Err(ClientError::MixedPayloads { held, offered: kind }),
            _ => Ok(()),
        }
    }

    /// `len` bytes of `kind` were cached: the client holds that kind now.
    fn note_payload(&mut self, kind: PayloadKind, len: u64) {
        debug_assert!(self.check_payload(kind, len).is_ok(), "{kind} payload cached by a client of the other kind");
        if len > 0 {
            self.payload_kind = Some(kind);
        }
    }
}

/// What [`Client::ladvise`] answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LadviseOutcome {
    /// Asynchronous lockahead results, one per lockahead advice, in order
    /// (asynchronous cache advice has none: it is sent, and that is all).
    Results(Vec<LockaheadResult>),
    /// Synchronous lockahead or cache advice: wait for `op`.
    Pending { results: Vec<LockaheadResult>, op: OpId },
}
