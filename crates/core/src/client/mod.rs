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

#![deny(clippy::wildcard_enum_match_arm, clippy::match_wildcard_for_single_variants)]

pub mod copy_slots;
pub mod cores;
pub mod imports;
pub mod ladvise;
pub mod locks;
pub mod osc_stats;
pub mod pagecache;
pub mod replay;
pub mod timeline;

mod error;
mod op_table;
mod outbox;
mod recovery;
mod rpc_book;
mod writeback;

mod flush;
mod lost_ost;
mod ops;
#[cfg(test)]
mod pagecache_diff_tests;
#[cfg(test)]
mod reference_cache;
mod session;

pub use error::{ClientError, LossCause};
pub use op_table::{FileHandle, OpId};
pub use outbox::{ClientEvent, OpOutput, OUTBOX_MESSAGES_MAX};
pub use recovery::{UNCLAIMED_LOCKS_MAX, UNREPORTED_LOSSES_MAX};

use crate::layout::Layout;
use crate::ldlm::GroupId;
use crate::msg::{Cut, IoError, Payload, PayloadKind, ToClient, ToOst};
use crate::pages::PagePool;
use crate::units::{ClientId, Duration, Instant, ObjectKey, OstIndex, Xid};
pub use copy_slots::CopyContention;
use copy_slots::CopySlots;
use cores::Cores;
use ladvise::{Advice, LadviseError, LockaheadResult, Validated};
use locks::{LocalLock, LockCache};
use op_table::{Op, OpKind, OpTable};
use osc_stats::{ClientStats, OscStats};
use outbox::Outbox;
use pagecache::PageCache;
use recovery::Recovery;
use rpc_book::{Rpc, RpcBook};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use writeback::Writeback;

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
    /// With `copy_bytes_per_s`: the cores of the client's host
    /// ([`cores::Cores`], shared by the clients given clones of it), which
    /// copies take turns on and the driver charges its other CPU work to;
    /// `None`: every copy runs at once, as on a node with a core for each.
    pub cores: Option<Cores>,
    /// With `copy_bytes_per_s`: how many of the node's processes copy at
    /// full speed at once, into one file and into the page cache as a
    /// whole ([`copy_slots`]); off by default.
    pub copy_contention: CopyContention,
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
            cores: None,
            copy_contention: CopyContention::default(),
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
        let CopyContention { file_writers, node_writers } = self.copy_contention;
        if file_writers == Some(0) || node_writers == Some(0) {
            return Err(ClientError::Config(
                "a bound of 0 processes copying at once would stop every write; give at least 1 or leave it out"
                    .to_string(),
            ));
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

    /// This client's share of one node's allowance (these limits) among
    /// the `clients` that share the node's memory, as the ranks of a node
    /// share its one Lustre client's: dirty, clean cached and uncommitted
    /// bytes divided, in whole pages, each dirty and uncommitted allowance
    /// at least one RPC.
    pub fn share_among(&mut self, clients: u64) {
        let (clients, page) = (clients.max(1), crate::units::PAGE_SIZE);
        let share = |bytes: u64| bytes / clients / page * page;
        self.dirty_bytes_max = share(self.dirty_bytes_max).max(self.rpc_bytes_max);
        self.cached_bytes_max = share(self.cached_bytes_max);
        self.unstable_bytes_max = share(self.unstable_bytes_max).max(self.rpc_bytes_max);
    }

    /// Frames in the page arena of a client of `osts` OSTs: room for its
    /// clean cache and every OST's dirty and uncommitted allowances twice
    /// over (frames pinned by write RPCs in flight and kept for replay are
    /// copied when rewritten, and callers fill frames before the cache
    /// takes them), within bounds. Past it, frames come from the heap.
    pub fn arena_frames(&self, osts: usize) -> u32 {
        let per_ost = self.dirty_bytes_max + if self.recovery { self.unstable_bytes_max } else { 0 };
        let bytes = self.cached_bytes_max.saturating_add(per_ost.saturating_mul(osts.max(1) as u64)).saturating_mul(2);
        (bytes.clamp(64 << 20, 4 << 30) / crate::units::PAGE_SIZE) as u32
    }

    /// When `work` that may start at `ready` ends: on the earliest free of
    /// [`ClientConfig::cores`], else at once on a core of its own.
    fn run_on_cores(&self, ready: Instant, work: Duration) -> Instant {
        match &self.cores {
            Some(cores) => cores.run(ready, work),
            None => ready + work,
        }
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

/// Where an fsync's sync RPCs stand.
enum Commit {
    /// Just sent.
    Sent,
    Waiting,
    /// All answered (or none needed).
    Done,
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

/// One client node, composed of parts that each own their state and keep
/// their own invariants: the operations table, the RPC book, writeback
/// (with the page cache), the lock cache, the outbox and recovery. The
/// client itself keeps what ties them together (open files, counters,
/// the payload kind) and checks the rules that span parts.
pub struct Client {
    id: ClientId,
    config: ClientConfig,
    files: BTreeMap<FileHandle, OpenFile>,
    locks: LockCache,
    /// Operations in progress, with their copy and lock-wait deadlines.
    ops: OpTable,
    /// When copies may begin, among the node's processes (modelled time).
    copies: CopySlots,
    /// RPCs awaiting their replies, and the xids.
    rpcs: RpcBook,
    /// The page cache, its dirty and uncommitted objects.
    writeback: Writeback,
    /// Messages for the OSTs and events for the application.
    outbox: Outbox,
    /// Sessions, copies kept for replay, unclaimed handles, unreported losses.
    recovery: Recovery,
    counters: ClientCounters,
    /// Histograms and counters per OST and per mount (see [`osc_stats`]).
    stats: ClientStats,
    /// The kind of payload this client holds, once it has cached one.
    payload_kind: Option<PayloadKind>,
    file_next: u64,
    /// Its events in time bins, while a run records a time series.
    timeline: Option<Box<timeline::Timeline>>,
}

impl Client {
    pub fn new(id: ClientId, config: ClientConfig) -> Result<Self, ClientError> {
        config.validate()?;
        let recovery = Recovery::new(config.recovery);
        let copies = CopySlots::new(config.copy_contention);
        Ok(Client {
            id,
            config,
            files: BTreeMap::new(),
            locks: LockCache::default(),
            ops: OpTable::default(),
            copies,
            rpcs: RpcBook::default(),
            writeback: Writeback::new(PageCache::new()),
            outbox: Outbox::default(),
            recovery,
            counters: ClientCounters::default(),
            stats: ClientStats::default(),
            payload_kind: None,
            file_next: 1,
            timeline: None,
        })
    }

    /// This client's frames come from `pool` (the heap by default). Set it
    /// before anything is cached.
    pub fn with_page_pool(mut self, pool: PagePool) -> Self {
        self.writeback.set_pool(pool);
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
        self.writeback.cache()
    }
    /// Statistics since [`Client::reset_stats`] (or since the start).
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }
    /// Start the statistics again from zero (writing to a Lustre stats file).
    pub fn reset_stats(&mut self, now: Instant) {
        self.stats = ClientStats { since: now, ..ClientStats::default() };
    }
    /// Count this client's lock traffic and OST bytes in bins of
    /// `interval` from `origin_ns` on (the core's nanoseconds, negative for
    /// a run that began before this client's time zero; see [`timeline`]),
    /// from now on; a timeline already running starts again.
    pub fn start_timeline(&mut self, origin_ns: i128, interval: Duration) {
        self.timeline = Some(Box::new(timeline::Timeline::new(origin_ns, interval)));
    }

    /// The bins counted since [`Client::start_timeline`] or the last take,
    /// by index, and whether events came after the last bin kept; `None`
    /// without a timeline.
    pub fn take_timeline(&mut self, now: Instant) -> Option<(Vec<(u64, timeline::TimelineBin)>, bool)> {
        let t = self.timeline.as_mut()?;
        t.advance(now);
        Some((t.take(), t.truncated()))
    }

    /// The bin filling closes if `now` is past it: on entry to every input.
    fn timeline_at(&mut self, now: Instant) {
        if let Some(t) = self.timeline.as_mut() {
            t.advance(now);
        }
    }

    fn timeline_note(&mut self, event: timeline::TimelineEvent) {
        if let Some(t) = self.timeline.as_mut() {
            t.note(event);
        }
    }

    /// Read and write RPCs in flight to `ost` now.
    pub fn rpcs_in_flight(&self, ost: OstIndex) -> (usize, usize) {
        self.rpcs.in_flight(ost)
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
        self.timeline_at(now);
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
                if self.writeback.cache().cached_pages() as u64 * crate::units::PAGE_SIZE <= bytes {
                    break;
                }
                self.writeback.drop_clean(key, crate::Extent::WHOLE);
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
        self.recovery.replay().total_bytes()
    }
    /// The session with `ost` (Lustre's import), as `osc.*.import` shows it.
    pub fn import(&self, ost: OstIndex) -> imports::Import {
        self.recovery.import(ost)
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
        for key in layout.objects() {
            if let Some(error) = self.recovery.take_unreported(*key) {
                write_error.get_or_insert(error);
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
        self.start(now, fh, OpKind::Read { len, buf: op_table::ReadBuf::Empty }, offset, len)
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
        self.timeline_at(now);
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
        self.timeline_at(now);
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
                let size = self.writeback.cache().object_cached_end(ObjectKey { ost: from, object });
                self.send(from, ToOst::GlimpseReply { xid, size });
            }
            ToClient::Evicted => self.on_evicted(from),
            ToClient::Connected { epoch, recovering } => self.on_connected(from, epoch, recovering),
            ToClient::Committed { transno } => self.on_committed(from, transno),
            ToClient::CommitFailed { object, error, seq } => self.on_commit_failed(from, object, error, seq),
            ToClient::LockLost { lock } => self.on_lock_lost(from, lock),
            ToClient::Disconnected => self.on_disconnected(from),
            ToClient::Recovering { remaining, clients_left } => {
                self.outbox.event(ClientEvent::OstRecovering { ost: from, remaining, clients_left });
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
        self.timeline_at(now);
        let granted: Vec<LocalLock> = self.locks.iter().filter(|(_, l)| l.is_granted()).map(|(id, _)| id).collect();
        for id in granted {
            self.locks.begin_cancel(id);
        }
        self.run(now);
    }

    /// Age the lock LRU.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.timeline_at(now);
        // Those whose last use plus the age limit is now or earlier.
        let aged = now.0.checked_sub(self.config.lru_age_max.as_ns());
        for id in aged.map(|t| self.locks.unused_since(Instant(t))).unwrap_or_default() {
            self.locks.begin_cancel(id);
        }
        self.end_lock_waits(now);
        self.run(now);
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<(OstIndex, ToOst)> {
        self.outbox.pop_transmit()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.outbox.pop_event()
    }

    /// When the oldest unused lock reaches the LRU age limit, or a write's
    /// copy into the page cache ends, whichever comes first.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let lru = self.locks.oldest_unused().map(|t| t + self.config.lru_age_max);
        let lock_wait = self.ops.first_lock_wait_end();
        self.ops.first_copy_end().into_iter().chain(lru).chain(lock_wait).min()
    }

    /// Runs `work` of the driver's on the node's cores from `ready` on, and
    /// returns when it ends: on the earliest free core with
    /// [`ClientConfig::cores`], else at once on a core of its own.
    pub fn run_on_cores(&mut self, ready: Instant, work: Duration) -> Instant {
        self.config.run_on_cores(ready, work)
    }

    /// The node's cores, when the client models them.
    pub fn cores(&self) -> Option<&Cores> {
        self.config.cores.as_ref()
    }

    /// Panics if a coherence invariant is broken: each part's own first,
    /// then the rules that span parts.
    pub fn check_invariants(&self) {
        if let Some(cores) = &self.config.cores {
            cores.check_invariants();
        }
        self.locks.check_invariants();
        self.copies.check_invariants();
        self.rpcs.check_invariants();
        self.writeback.check_invariants();
        if let Some(t) = &self.timeline {
            t.check_invariants();
        }
        self.ops.check_invariants();
        self.outbox.check_invariants();
        self.recovery.check_invariants();
        self.stats.check_invariants();
        self.check_payload_kind();
        self.check_dirty_locked();
        self.check_lock_users();
        for (ost, handle) in self.recovery.unclaimed() {
            assert!(
                self.locks.by_handle(ost, handle).is_none(),
                "{}: handle {handle:?} both held and unclaimed",
                self.id
            );
        }
    }

    /// The pages cached are of the kind of payload the client holds.
    fn check_payload_kind(&self) {
        let cache = self.writeback.cache();
        let (pages, data_pages) = (cache.cached_pages(), cache.data_pages());
        match self.payload_kind {
            None => assert_eq!(pages, 0, "{}: pages cached before any payload", self.id),
            Some(PayloadKind::Bytes) => {
                assert_eq!(data_pages, pages, "{}: phantom pages in a client of bytes", self.id)
            }
            Some(PayloadKind::Phantom) => {
                assert_eq!(data_pages, 0, "{}: page buffers in a client of phantoms", self.id)
            }
        }
    }

    /// Every dirty page lies under a granted (or cancelling) write lock.
    fn check_dirty_locked(&self) {
        let cache = self.writeback.cache();
        for key in cache.keys_with_dirty() {
            for range in cache.dirty_ranges(key) {
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
    }

    /// Each lock's user count is the operations holding it, and a granted
    /// lock covers what was asked.
    fn check_lock_users(&self) {
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
    }

    // ----- internals shared by ops.rs and flush.rs ------------------------

    /// Send `message` to `to`, if the session with it allows (see
    /// [`imports`]): requests that cannot go now stay in the client's tables
    /// and go when the OST answers the connect.
    fn send(&mut self, to: OstIndex, message: ToOst) {
        if self.config.recovery && !self.session_allows(to) {
            return;
        }
        self.outbox.transmit(to, message);
    }

    /// The RPC `xid`, taken out, if it went to `from` and `answers` says the
    /// reply is of its kind; a stray reply (an unknown or answered xid,
    /// another OST's, another kind of RPC's) leaves the books as they are.
    fn take_rpc(&mut self, from: OstIndex, xid: Xid, answers: fn(&Rpc) -> bool) -> Option<Rpc> {
        let rpc = self.rpcs.take(from, xid, answers);
        if rpc.is_none() {
            tracing::debug!(client = self.id.0, ost = %from, xid = xid.0, "stray reply ignored");
        }
        rpc
    }

    fn xid(&mut self) -> Xid {
        self.rpcs.xid()
    }

    fn start(&mut self, now: Instant, fh: FileHandle, kind: OpKind, offset: u64, len: u64) -> OpId {
        self.timeline_at(now);
        let id = self.ops.next_id();
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
            OpKind::GroupLock { .. } | OpKind::GroupUnlock { .. } | OpKind::Advise { .. } => {}
        }
        match Op::plan(&self.files, fh, kind, offset, len) {
            Ok(op) => {
                self.ops.insert(id, op);
                self.run(now);
            }
            Err(error) => self.outbox.event(ClientEvent::OpDone { op: id, result: Err(error) }),
        }
        id
    }

    fn finish(&mut self, id: OpId, result: Result<OpOutput, ClientError>) {
        let op = self.ops.remove(id);
        debug_assert!(op.holding.is_none(), "op finished holding a lock");
        self.outbox.event(ClientEvent::OpDone { op: id, result });
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
        let mut next = self.ops.next_after(None);
        while let Some(id) = next {
            pass.ops_stepped += 1;
            pass.ops_moved |= self.step_op(now, id);
            next = self.ops.next_after(Some(id));
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
        let cached = self.writeback.cache().cached_pages() as u64 * crate::units::PAGE_SIZE;
        let held = cached + self.recovery.replay().total_bytes();
        if held > self.config.cached_bytes_max {
            self.writeback.drop_clean(key, range);
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
