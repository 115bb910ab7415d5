//! The OST service: one object storage target's data path and lock
//! namespace, sans-IO.
//!
//! It answers clients' RPCs (enqueue, cancel, write, read, punch, getattr,
//! cache advice) from an [`ObjectStore`], runs the target's [`LockServer`],
//! and gathers glimpse answers for size requests. Like every lanefs state machine it
//! takes `now` with each input and reports what to send through
//! [`Ost::poll_transmit`].
//!
//! The OST does not check that I/O is covered by a lock (neither does
//! Lustre's): coherence is the clients' duty, enforced by their lock cache.
//! It does refuse all I/O from an evicted client until it reconnects, so a
//! client's stale dirty data cannot land after its locks were taken away.
//!
//! Payloads: a write's [`Payload`] goes to the store as it is (bytes or a
//! phantom), and reads are answered with the kind of payload the store keeps
//! ([`ObjectStore::payload_kind`]): bytes from a `MemStore` or a file store,
//! phantoms from the simulator's `SizeStore`. A store refusing a kind makes
//! the RPC fail with [`IoError::PayloadKind`]. Counters count phantom bytes
//! as bytes, so the simulator's statistics read as a real run's.
//!
//! Syncs. A client's [`ToOst::Sync`] (Lustre's `OST_SYNC`, sent by
//! `fsync`) is answered once the object's acknowledged writes are durable.
//! And on lock cancel (Lustre's `ofd.*.sync_lock_cancel`, see
//! [`SyncLockCancel`]): an OST whose journal commits asynchronously makes a
//! write lock's data durable before the lock is gone, so that no other
//! client is granted the range while what was written under it could still
//! be lost in a crash. When the policy says a cancel must sync, the OST
//! keeps the lock granted, asks its driver to sync the object
//! ([`Ost::poll_sync`]), and completes the cancel (granting the waiters)
//! only when the driver answers ([`Ost::handle_synced`]). Whether there is
//! anything to commit, and how long that takes, is the driver's: the
//! simulator asks its model of the OST's journal, the network OSS
//! `fdatasync`s the object's file, and the harness, whose stores are in
//! memory, answers at once. Every driver must poll syncs: a sync RPC is
//! answered only through them.
//!
//! What a peer may send. Every request is checked before it touches the
//! store or the lock server, and a malformed one is answered with an error,
//! never a panic: an I/O RPC whose end (`offset + len`, or a punch's size)
//! passes 2^64, or which moves more than [`RPC_BYTES_MAX`] bytes, gets
//! [`IoError::Invalid`]; one whose end passes [`OBJECT_BYTES_MAX`] gets
//! [`IoError::TooLarge`] (`EFBIG`); a lock request that is inverted, off
//! page boundaries or a GROUP lock on less than the whole object gets
//! [`crate::msg::EnqueueReply::Invalid`] (see the lock server); cache
//! advice on an empty or inverted range gets [`IoError::Invalid`] (Lustre's
//! `ofd_ladvise_hdl` answers `-EPROTO`). A replayed
//! write or punch that would be refused so is ignored with a warning. A
//! cancel of a lock the client does not hold, a glimpse answer for an
//! unknown xid or from another client than the one asked are ignored with a
//! debug log. Any object id may be named (an object is created when first
//! written).

pub mod commits;
pub mod notices;
pub mod recovery;

use crate::client::osc_stats::{Histogram, Samples};
use crate::ldlm::proof::{ChangeProof, Changed, LockKey};
use crate::ldlm::server::{LockServer, LockServerConfig};
use crate::msg::{CacheAdvice, Cut, EnqueueReply, IoError, ObjectAttr, Payload, PayloadKind, ToClient, ToOst};
use crate::store::{ObjectStore, StoreError, OBJECT_BYTES_MAX};
use crate::units::{ClientId, Duration, Epoch, Instant, LockHandle, ObjectId, OstIndex, Transno, Xid};
use crate::Extent;
use commits::{Commits, Snapshot};
use notices::{Notice, Notices};
use recovery::{Change, Recovery, Replayed};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use tracing::{debug, warn};

/// The most bytes one read or write RPC moves (Lustre's largest bulk RPC):
/// an OST refuses a longer one as malformed before it allocates anything
/// for it. A wire's bulk maximum must be at least this.
pub const RPC_BYTES_MAX: u64 = 64 << 20;

/// Data-path counters of one OST.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstCounters {
    pub write_rpcs: u64,
    pub read_rpcs: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub punches: u64,
    pub getattrs: u64,
    pub glimpses: u64,
    /// I/O refused because its client was evicted.
    pub io_refused: u64,
    /// Lock cancels that waited for a sync of their object.
    pub cancel_syncs: u64,
    /// Sync RPCs (`OST_SYNC`, from clients' fsync).
    pub syncs: u64,
    /// Bytes per write and read RPC done (`obdfilter.*.stats`).
    pub write_bytes: Samples,
    pub read_bytes: Samples,
    /// Pages per write and read RPC done (`obdfilter.*.brw_stats`'s
    /// "pages per bulk r/w").
    pub write_pages: Histogram,
    pub read_pages: Histogram,
}

impl std::ops::AddAssign for OstCounters {
    fn add_assign(&mut self, o: Self) {
        self.write_rpcs += o.write_rpcs;
        self.read_rpcs += o.read_rpcs;
        self.bytes_written += o.bytes_written;
        self.bytes_read += o.bytes_read;
        self.punches += o.punches;
        self.getattrs += o.getattrs;
        self.glimpses += o.glimpses;
        self.io_refused += o.io_refused;
        self.cancel_syncs += o.cancel_syncs;
        self.syncs += o.syncs;
        self.write_bytes.merge(&o.write_bytes);
        self.read_bytes.merge(&o.read_bytes);
        self.write_pages.merge(&o.write_pages);
        self.read_pages.merge(&o.read_pages);
    }
}

/// Pages an RPC of `len` bytes at `offset` touches.
fn pages_of(offset: u64, len: u64) -> u64 {
    (offset + len).div_ceil(crate::units::PAGE_SIZE).saturating_sub(offset / crate::units::PAGE_SIZE)
}

/// Which lock cancels wait for their object's data to be durable
/// (Lustre's `ofd.*.sync_lock_cancel`, checked in `tgt_blocking_ast` when
/// a lock is cancelled: PW, EX and GROUP extent locks only).
///
/// Lustre's OFD starts with an asynchronous journal (`sync_journal = 0`)
/// and then turns `never` into `always` (`ofd_slc_set` in `ofd_init0`), so
/// `always` is what a Lustre OST does unless told otherwise. The core's
/// default is `never`, which asks nothing of a driver; lanefs's servers
/// (`lanefs up`, `lanefs oss`, embedded clusters) and the simulator's
/// cluster descriptions choose `always`, as Lustre does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncLockCancel {
    /// No cancel waits.
    #[default]
    Never,
    /// Cancels of locks that were called back wait.
    Blocking,
    /// Every cancel of a write or group lock waits.
    Always,
}

impl SyncLockCancel {
    /// The values, as Lustre's `lctl set_param` takes them.
    pub const NAMES: [&'static str; 3] = ["never", "blocking", "always"];

    pub fn from_name(name: &str) -> Option<SyncLockCancel> {
        match name {
            "never" => Some(SyncLockCancel::Never),
            "blocking" => Some(SyncLockCancel::Blocking),
            "always" => Some(SyncLockCancel::Always),
            _ => None,
        }
    }

    /// Whether cancelling a granted lock of `mode` that was (or was not)
    /// called back must wait for a sync.
    pub fn applies(self, mode: crate::ldlm::LockMode, called_back: bool) -> bool {
        match self {
            SyncLockCancel::Never => false,
            SyncLockCancel::Blocking => mode.is_write() && called_back,
            SyncLockCancel::Always => mode.is_write(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct OstConfig {
    pub locks: LockServerConfig,
    /// How long a size request waits for glimpse answers before it answers
    /// with what it has.
    pub glimpse_timeout: Duration,
    pub sync_lock_cancel: SyncLockCancel,
    /// Transaction numbers, commits and recovery after a restart (see
    /// [`commits`] and [`recovery`]); `None` keeps none of it: the
    /// simulator's OSTs, whose messages are never lost and which never
    /// restart.
    pub recovery: Option<RecoveryConfig>,
}

impl Default for OstConfig {
    fn default() -> Self {
        OstConfig {
            locks: LockServerConfig::default(),
            glimpse_timeout: Duration::from_secs(10),
            sync_lock_cancel: SyncLockCancel::Never,
            recovery: None,
        }
    }
}

impl OstConfig {
    /// This configuration with recovery on (the network OSS, the fault
    /// swarm): enqueues sent again are recognised, changes are numbered and
    /// committed, and a restarted OST takes its clients' state back.
    pub fn with_recovery(mut self, recovery: RecoveryConfig) -> Self {
        self.locks.resend = true;
        self.recovery = Some(recovery);
        self
    }
}

/// Lustre's `recovery_time_soft` (300 s): how long a restarted OST waits
/// for the clients it knew before it goes on without them.
pub const RECOVERY_WINDOW_DEFAULT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryConfig {
    /// How long a restarted OST waits for its known clients to replay.
    pub window: Duration,
    /// Changes are committed at the latest this long after the first one.
    pub commit_interval: Duration,
    /// A commit begins once this many bytes were written since the last
    /// one began (see [`commits::COMMIT_BYTES_DEFAULT`]).
    pub commit_bytes: u64,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        RecoveryConfig {
            window: RECOVERY_WINDOW_DEFAULT,
            commit_interval: commits::COMMIT_INTERVAL_DEFAULT,
            commit_bytes: commits::COMMIT_BYTES_DEFAULT,
        }
    }
}

/// What an OST keeps on disk beside its objects, across restarts
/// (Lustre's `last_rcvd`): the life that wrote it, the last committed
/// transaction, and the clients a recovery must wait for. The driver
/// writes it durably whenever [`Ost::poll_record`] yields one, and records
/// `last_committed` as part of every commit ([`SyncRequest::commit_to`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstRecord {
    pub epoch: Epoch,
    pub last_committed: Transno,
    pub clients: BTreeSet<ClientId>,
    /// Each client's commit-failure notices it has not acknowledged (see
    /// [`notices`]): the only report of a failed commit must outlive a crash.
    #[serde(default)]
    pub failures: BTreeMap<ClientId, Vec<(ObjectId, IoError)>>,
    /// The key of the proofs the OST's lock grants carry, so that after a
    /// restart it takes back only locks it granted (see
    /// [`crate::ldlm::proof`]). Made by the driver (random) when the OST
    /// is new; the same in every life. Private: whoever reads it can forge
    /// a replay.
    #[serde(default)]
    pub lock_key: LockKey,
}

/// Names one sync the OST is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SyncToken(pub u64);

/// A sync the OST needs before it completes a cancel, answers a client's
/// sync RPC, or to commit what changed: make the data durable, then call
/// [`Ost::handle_synced`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncRequest {
    pub token: SyncToken,
    /// The object a cancel or a sync RPC asked for (`extent` of it); with
    /// recovery on, the object of the first sync RPC a commit is for, if
    /// any (the commit covers `commit`).
    pub object: Option<ObjectId>,
    pub extent: Extent,
    /// With recovery on: every object changed since the last commit began
    /// (a commit makes them all durable, as a journal commit does), and the
    /// transaction number the driver records as committed once they are,
    /// before it answers. Without: empty, and 0.
    pub commit: Vec<ObjectId>,
    pub commit_to: Transno,
}

#[derive(Debug)]
struct PendingGetattr {
    client: ClientId,
    xid: Xid,
    size: u64,
    /// The space the object holds, as the store said at the getattr.
    allocated: u64,
    outstanding: usize,
    deadline: Instant,
}

/// A glimpse sent for a getattr.
#[derive(Clone, Copy, Debug)]
struct Glimpse {
    getattr: u64,
    holder: ClientId,
    object: ObjectId,
    lock: LockHandle,
}

/// What a sync was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncWaiter {
    /// A holder's cancel of its lock.
    Cancel(ClientId, LockHandle),
    /// A client's sync RPC of an object, answered when it is done.
    Reply(ClientId, Xid, ObjectId),
    /// A periodic commit.
    Commit,
}

/// One OST: lock namespace plus object store.
pub struct Ost<S: ObjectStore> {
    index: OstIndex,
    config: OstConfig,
    epoch: Epoch,
    locks: LockServer,
    store: S,
    counters: OstCounters,
    /// Glimpse xid (chosen here) -> the getattr waiting for it.
    glimpses: BTreeMap<Xid, Glimpse>,
    getattrs: BTreeMap<u64, PendingGetattr>,
    getattr_next: u64,
    xid_next: u64,
    transmits: VecDeque<(ClientId, ToClient)>,
    /// What waits for each sync the driver is doing. With recovery on a
    /// sync is a commit, and at most one runs at a time: whatever asks for
    /// one while it runs waits for it (if nothing changed since it began)
    /// or for the next, which `next_commit` gathers (jbd2's running
    /// transaction beside its committing one: many fsyncs, one commit).
    syncing: BTreeMap<SyncToken, Vec<SyncWaiter>>,
    /// With recovery on: what waits for the commit that begins when the
    /// one in flight ends.
    next_commit: Vec<SyncWaiter>,
    /// Syncs asked for and not yet polled by the driver.
    syncs: VecDeque<SyncRequest>,
    sync_next: u64,
    /// With recovery on: transaction numbers and commits.
    commits: Option<Commits>,
    /// The commit each sync in flight does.
    snapshots: BTreeMap<SyncToken, Snapshot>,
    /// With recovery on: the clients a recovery would wait for.
    known: BTreeSet<ClientId>,
    /// `known` changed since the driver last recorded it.
    record_due: bool,
    notices: Notices,
    /// While the OST recovers after a restart.
    recovering: Option<Recovery>,
}

impl<S: ObjectStore> Ost<S> {
    /// A new OST, its first life.
    pub fn new(index: OstIndex, config: OstConfig, store: S) -> Self {
        let commits = config.recovery.map(|r| Commits::new(r.commit_interval, Transno(0)));
        let locks = LockServer::new(config.locks.clone());
        Ost {
            index,
            config,
            epoch: Epoch(0),
            locks,
            store,
            counters: OstCounters::default(),
            glimpses: BTreeMap::new(),
            getattrs: BTreeMap::new(),
            getattr_next: 0,
            xid_next: 1,
            transmits: VecDeque::new(),
            syncing: BTreeMap::new(),
            next_commit: Vec::new(),
            syncs: VecDeque::new(),
            sync_next: 0,
            commits,
            snapshots: BTreeMap::new(),
            known: BTreeSet::new(),
            record_due: false,
            notices: Notices::default(),
            recovering: None,
        }
    }

    /// The OST starting again over `store` and what it recorded in its last
    /// life: a new life, recovering (if recovery is on and it knew clients)
    /// until `now` plus the recovery window.
    pub fn restart(index: OstIndex, config: OstConfig, store: S, record: OstRecord, now: Instant) -> Self {
        let mut ost = Ost::new(index, config, store);
        ost.epoch = Epoch(record.epoch.0 + 1);
        ost.locks = LockServer::with_epoch(ost.config.locks.clone(), ost.epoch);
        ost.locks.set_key(record.lock_key);
        if let Some(recovery) = ost.config.recovery {
            ost.commits = Some(Commits::new(recovery.commit_interval, record.last_committed));
            if !record.clients.is_empty() {
                ost.recovering = Some(Recovery::new(record.clients.clone(), now + recovery.window));
            }
            ost.notices = Notices::from_record(&record.failures);
            ost.known = record.clients;
        }
        ost.record_due = true; // the new life's epoch
        ost
    }

    pub fn index(&self) -> OstIndex {
        self.index
    }
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }
    pub fn locks(&self) -> &LockServer {
        &self.locks
    }
    pub fn locks_mut(&mut self) -> &mut LockServer {
        &mut self.locks
    }
    pub fn store(&self) -> &S {
        &self.store
    }
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }
    pub fn counters(&self) -> OstCounters {
        self.counters
    }
    pub fn config(&self) -> &OstConfig {
        &self.config
    }
    /// Change `sync_lock_cancel` while the OST runs (`lctl set_param
    /// obdfilter.*.sync_lock_cancel`): it applies to the next cancel.
    pub fn set_sync_lock_cancel(&mut self, policy: SyncLockCancel) {
        self.config.sync_lock_cancel = policy;
    }
    pub fn is_recovering(&self) -> bool {
        self.recovering.is_some()
    }
    /// The last transaction committed (0 without recovery).
    pub fn last_committed(&self) -> Transno {
        self.commits.as_ref().map_or(Transno(0), Commits::last_committed)
    }
    /// The clients a recovery would wait for.
    pub fn known_clients(&self) -> &BTreeSet<ClientId> {
        &self.known
    }

    pub fn handle_message(&mut self, now: Instant, from: ClientId, message: ToOst) {
        if self.recovering.as_ref().is_some_and(|r| r.is_over(now)) {
            self.finish_recovery(now);
        }
        if self.recovering.is_some() {
            self.while_recovering(now, from, message);
        } else {
            self.serve(now, from, message);
        }
        self.collect_lock_transmits();
    }

    fn serve(&mut self, now: Instant, from: ClientId, message: ToOst) {
        match message {
            ToOst::Connect { resume } => self.connect(now, from, resume),
            ToOst::Disconnect => self.disconnect(now, from),
            // No lock on an object that is gone (a migrated file's old
            // objects): the client fetches the file's layout again rather
            // than cache writes no OST will take.
            ToOst::Enqueue { xid, object, .. } if self.is_gone(object) => {
                self.send(from, ToClient::Enqueue { xid, reply: EnqueueReply::NoSuchObject });
            }
            ToOst::Enqueue { xid, object, request } => self.locks.handle_enqueue(now, from, xid, object, request),
            ToOst::Cancel { lock } => self.cancel(now, from, lock),
            ToOst::Write { xid, object, offset, data } => {
                let (result, transno) = match self.write(now, from, object, offset, &data) {
                    Ok(transno) => (Ok(()), transno),
                    Err(e) => (Err(e), Transno(0)),
                };
                let proof = self.prove_change(from, transno, object, Changed::Write { offset, len: data.len() });
                self.send(from, ToClient::WriteReply { xid, result, transno, proof });
            }
            ToOst::Read { xid, object, offset, len } => {
                let result = self.read(now, from, object, offset, len);
                self.send(from, ToClient::ReadReply { xid, result });
            }
            ToOst::Punch { xid, object, cut } => {
                let (result, transno) = match self.punch(now, from, object, cut) {
                    Ok(transno) => (Ok(()), transno),
                    Err(e) => (Err(e), Transno(0)),
                };
                let proof = self.prove_change(from, transno, object, Changed::Punch { cut });
                self.send(from, ToClient::PunchReply { xid, result, transno, proof });
            }
            ToOst::Getattr { xid, object } => self.getattr(now, from, xid, object),
            ToOst::Sync { xid, object } => match self.admit(from) {
                Ok(()) => {
                    self.counters.syncs += 1;
                    self.ask_sync(now, SyncWaiter::Reply(from, xid, object), Some(object), Extent::WHOLE);
                }
                Err(e) => self.send(from, ToClient::SyncReply { xid, result: Err(e) }),
            },
            ToOst::Advise { xid, object, advice, start, end } => {
                let result = self.advise(from, object, advice, start, end);
                self.send(from, ToClient::AdviseReply { xid, result });
            }
            ToOst::GlimpseReply { xid, size } => self.glimpse_reply(xid, from, size),
            ToOst::FailuresSeen { seq } => self.failures_seen(from, seq),
            ToOst::ReplayLock { lock, object, request, extent, proof }
                if crate::planted::active(crate::planted::Bug::LateReplay) =>
            {
                if !self.locks.replay(from, lock, object, *request, extent, proof) {
                    self.send(from, ToClient::LockLost { lock });
                }
            }
            ToOst::ReplayWrite { object, offset, data, .. }
                if crate::planted::active(crate::planted::Bug::LateReplay) =>
            {
                let _ = self.apply_write(object, offset, &data);
            }
            ToOst::ReplayLock { lock, .. } => {
                debug!(ost = self.index.0, %from, lock = lock.0, "lock replayed outside recovery refused");
                self.send(from, ToClient::LockLost { lock });
            }
            ToOst::ReplayWrite { .. } | ToOst::ReplayPunch { .. } | ToOst::ReplayDone => {
                debug!(ost = self.index.0, %from, "replay outside recovery ignored");
            }
        }
    }

    /// During recovery: known clients replay; everything else waits.
    fn while_recovering(&mut self, now: Instant, from: ClientId, message: ToOst) {
        let malformed = match &message {
            ToOst::ReplayWrite { offset, data, .. } => self.check_io(from, *offset, data.len()).err(),
            ToOst::ReplayPunch { cut, .. } => self.check_cut(from, *cut).err(),
            _ => None,
        };
        if let Some(error) = malformed {
            warn!(ost = self.index.0, %from, %error, "malformed replay ignored");
            return;
        }
        let recovery = self.recovering.as_mut().expect("recovering");
        match message {
            ToOst::Connect { resume: Some(epoch) } if epoch != self.epoch && recovery.may_replay(from) => {
                recovery.reconnected(from);
                self.send(from, ToClient::Connected { epoch: self.epoch, recovering: true });
                self.send_notices(from); // kept in the record across the crash
            }
            ToOst::ReplayLock { lock, object, request, extent, proof } if recovery.is_replaying(from) => {
                if !self.locks.replay(from, lock, object, *request, extent, proof) {
                    warn!(
                        ost = self.index.0,
                        %from,
                        lock = lock.0,
                        "a replayed lock conflicts, is invalid, or is not one this OST granted to that client: refused"
                    );
                    self.send(from, ToClient::LockLost { lock });
                }
            }
            ToOst::ReplayWrite { transno, object, offset, data, proof } if recovery.is_replaying(from) => {
                let changed = Changed::Write { offset, len: data.len() };
                let kept = if self.locks.key().proves_change(proof, from, transno, object, changed)
                    || crate::planted::active(crate::planted::Bug::UnprovedReplay)
                {
                    recovery.replay(from, transno, Change::Write { object, offset, data })
                } else {
                    Replayed::Unproved
                };
                if kept != Replayed::Kept {
                    warn!(ost = self.index.0, %from, transno = transno.0, ?kept, "replayed write ignored");
                }
            }
            ToOst::ReplayPunch { transno, object, cut, proof } if recovery.is_replaying(from) => {
                let kept = if self.locks.key().proves_change(proof, from, transno, object, Changed::Punch { cut })
                    || crate::planted::active(crate::planted::Bug::UnprovedReplay)
                {
                    recovery.replay(from, transno, Change::Punch { object, cut })
                } else {
                    Replayed::Unproved
                };
                if kept != Replayed::Kept {
                    warn!(ost = self.index.0, %from, transno = transno.0, ?kept, "replayed punch ignored");
                }
            }
            ToOst::ReplayDone => {
                recovery.done(from);
                if recovery.is_over(now) {
                    self.finish_recovery(now);
                }
            }
            // A known client that comes back with no state (it gave its
            // state up) has nothing to replay: recovery need not wait for
            // it. Its connect is served after recovery, as a new client's.
            ToOst::Connect { resume: None } if recovery.may_replay(from) => {
                recovery.gave_up(from);
                let kept = self.defer(now, from, ToOst::Connect { resume: None });
                if self.recovering.as_ref().is_some_and(|r| r.is_over(now)) {
                    self.finish_recovery(now);
                } else if kept {
                    self.tell_recovering(now, from);
                }
            }
            ToOst::FailuresSeen { seq } => self.failures_seen(from, seq),
            other => {
                if matches!(other, ToOst::Connect { .. }) {
                    // A client that gave up waiting and tries again is
                    // told again.
                    recovery.untell(from);
                }
                if self.defer(now, from, other) {
                    self.tell_recovering(now, from);
                }
            }
        }
    }

    /// Keep `from`'s request for after the recovery, evicting first the
    /// client past its share of the queue (see [`recovery::Recovery::hog`]);
    /// false if that was `from` (its request is dropped with the rest).
    fn defer(&mut self, now: Instant, from: ClientId, message: ToOst) -> bool {
        let recovery = self.recovering.as_mut().expect("recovering");
        while let Some(hog) = recovery.hog(from) {
            warn!(
                ost = self.index.0,
                client = %hog,
                "too many requests during recovery (recovery::DEFERRED_PER_CLIENT_MAX per client): evicting the client"
            );
            recovery.forget(hog);
            self.locks.evict(now, hog);
            if hog == from {
                return false;
            }
        }
        recovery.defer(from, message);
        true
    }

    /// `from`'s request waits for the recovery: tell it why, the first time.
    fn tell_recovering(&mut self, now: Instant, from: ClientId) {
        let recovery = self.recovering.as_mut().expect("recovering");
        if recovery.tell(from) {
            let remaining = Duration(recovery.deadline().0.saturating_sub(now.0));
            let clients_left = u32::try_from(recovery.clients_left()).unwrap_or(u32::MAX);
            self.send(from, ToClient::Recovering { remaining, clients_left });
        }
    }

    /// Recovery is over: apply the replayed changes in transaction order,
    /// evict the known clients that did not finish, then serve what waited.
    fn finish_recovery(&mut self, now: Instant) {
        let outcome = self.recovering.take().expect("recovering").finish();
        let last_committed = self.last_committed();
        let (replayed, skipped) = (outcome.changes.len(), outcome.changes.range(..=last_committed).count());
        for (transno, (client, change)) in outcome.changes.into_iter().filter(|(t, _)| *t > last_committed) {
            let (object, result) = match change {
                Change::Write { object, offset, data } => (object, self.apply_write(object, offset, &data)),
                Change::Punch { object, cut } => (object, self.store.cut(object, cut).map_err(store_error)),
            };
            // A replay that failed still used its transaction number: later
            // changes number after it (else the client would hold two
            // changes under one number, and replay the older last), and
            // the commit that covers it lets the client drop its copy,
            // whose loss the notice reports.
            if let Some(commits) = self.commits.as_mut() {
                commits.replayed(now, client, object, transno);
            }
            if let Err(error) = result {
                self.notify_failure(now, client, object, error);
            }
        }
        for &client in &outcome.absent {
            debug!(ost = self.index.0, %client, "did not finish recovery: evicted");
            self.locks.evict(now, client);
        }
        tracing::info!(ost = self.index.0, replayed, skipped, evicted = outcome.absent.len(), "recovery over");
        self.collect_lock_transmits();
        for (client, message) in outcome.deferred {
            self.serve(now, client, message);
            self.collect_lock_transmits();
        }
    }

    /// [`ToOst::Connect`] outside recovery.
    fn connect(&mut self, now: Instant, from: ClientId, resume: Option<Epoch>) {
        let knows = self.config.recovery.is_none() || self.known.contains(&from);
        match resume {
            None => {
                // The client holds nothing from before: locks it had here
                // (it gave them up after losing its connection) go.
                self.locks.forget_client(now, from);
                self.notices.forget(from);
                self.locks.handle_connect(from);
                self.know(from);
                self.send(from, ToClient::Connected { epoch: self.epoch, recovering: false });
            }
            Some(epoch) if epoch == self.epoch && knows && !self.locks.is_evicted(from) => {
                self.send(from, ToClient::Connected { epoch: self.epoch, recovering: false });
                self.locks.resume(from);
                let glimpses: Vec<(Xid, Glimpse)> =
                    self.glimpses.iter().filter(|(_, g)| g.holder == from).map(|(x, g)| (*x, *g)).collect();
                for (xid, g) in glimpses {
                    self.send(from, ToClient::Glimpse { xid, object: g.object, lock: g.lock });
                }
                self.send_notices(from);
            }
            Some(epoch) if epoch != self.epoch && crate::planted::active(crate::planted::Bug::LateReplay) => {
                self.locks.handle_connect(from);
                self.know(from);
                self.send(from, ToClient::Connected { epoch: self.epoch, recovering: true });
            }
            // Another life of the OST, or state the OST took away: the
            // client must discard it and connect afresh.
            Some(_) => self.send(from, ToClient::Evicted),
        }
    }

    /// Evict `client` (its driver lost track of it: no connection and no
    /// word for longer than the driver allows, as Lustre's ping evictor).
    /// A recovery no longer waits for it: what it held is gone.
    pub fn evict(&mut self, now: Instant, client: ClientId) {
        self.locks.evict(now, client);
        if let Some(recovery) = self.recovering.as_mut() {
            recovery.forget(client);
            if recovery.is_over(now) {
                self.finish_recovery(now);
            }
        }
        self.collect_lock_transmits();
    }

    fn disconnect(&mut self, now: Instant, from: ClientId) {
        self.locks.forget_client(now, from);
        self.forget_client(from);
        self.send(from, ToClient::Disconnected);
    }

    fn know(&mut self, client: ClientId) {
        if self.config.recovery.is_some() && self.known.insert(client) {
            self.record_due = true;
        }
    }

    /// `client` is gone (evicted, or disconnected): a recovery no longer
    /// waits for it, and it is owed nothing.
    fn forget_client(&mut self, client: ClientId) {
        if self.known.remove(&client) {
            self.record_due = true;
        }
        if let Some(commits) = self.commits.as_mut() {
            commits.forget(client);
        }
        if self.notices.forget(client) {
            self.record_due = true;
        }
        self.forget_glimpses_of(client);
    }

    /// Send again the notices `client` has not acknowledged.
    fn send_notices(&mut self, client: ClientId) {
        let notices: Vec<Notice> = self.notices.unacked(client).collect();
        for n in notices {
            self.send(client, ToClient::CommitFailed { object: n.object, error: n.error, seq: n.seq });
        }
    }

    fn failures_seen(&mut self, client: ClientId, seq: u64) {
        if self.notices.unacked(client).next().is_some_and(|n| n.seq <= seq) {
            self.record_due = true;
        }
        self.notices.ack(client, seq);
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.recovering.as_ref().is_some_and(|r| r.is_over(now)) {
            self.finish_recovery(now);
        }
        self.locks.handle_timeout(now);
        let expired: Vec<u64> = self.getattrs.iter().filter(|(_, g)| g.deadline <= now).map(|(id, _)| *id).collect();
        for id in expired {
            warn!(ost = self.index.0, "glimpse answers missing; replying with the size known");
            self.finish_getattr(id);
        }
        if self.commit_due().is_some_and(|t| t <= now) {
            self.ask_sync(now, SyncWaiter::Commit, None, Extent::WHOLE);
        }
        self.collect_lock_transmits();
    }

    /// The driver has done sync `token`; `failures` are the objects it
    /// could not make durable (empty when all went well). The cancel that
    /// waited for it completes now (a lock evicted meanwhile is gone
    /// already, and its cancel is ignored as any late cancel is), or the
    /// sync RPC is answered; with recovery on, the clients whose changes
    /// the commit covered are told, and those whose writes failed are
    /// sent a notice. Drivers answer syncs in the order they were asked.
    pub fn handle_synced(&mut self, now: Instant, token: SyncToken, failures: &[(ObjectId, IoError)]) {
        let Some(waiters) = self.syncing.remove(&token) else {
            warn!(ost = self.index.0, token = token.0, "sync answered twice, or never asked for");
            return;
        };
        let snapshot = self.snapshots.remove(&token);
        self.synced(now, waiters, snapshot, failures);
        if self.snapshots.is_empty() && !self.next_commit.is_empty() {
            let waiters = std::mem::take(&mut self.next_commit);
            self.begin_commit(now, waiters);
        }
        self.collect_lock_transmits();
    }

    /// A sync is done (by the driver, or at once when there was nothing to
    /// do): tell what the commit `snapshot` covered, then answer each of
    /// `waiters`.
    fn synced(
        &mut self,
        now: Instant,
        waiters: Vec<SyncWaiter>,
        snapshot: Option<Snapshot>,
        failures: &[(ObjectId, IoError)],
    ) {
        let mut told = BTreeSet::new();
        match (snapshot, self.commits.as_mut()) {
            (Some(snapshot), Some(commits)) => {
                let finished = commits.finish(&snapshot, failures);
                let transno = commits.last_committed();
                // Every writer is told, those that asked included: the
                // answer to a sync may be lost with its connection, and
                // the sync sent again finds nothing left to commit.
                for (client, object, error) in finished.failed {
                    self.notify_failure(now, client, object, error);
                }
                for client in finished.committed {
                    told.insert(client);
                    self.send(client, ToClient::Committed { transno });
                }
            }
            _ => {
                // No record of writers: a cancelling client wrote under
                // the lock whose data failed.
                for waiter in &waiters {
                    if let SyncWaiter::Cancel(client, _) = *waiter {
                        for &(object, error) in failures {
                            self.notify_failure(now, client, object, error);
                        }
                    }
                }
            }
        }
        for waiter in waiters {
            match waiter {
                SyncWaiter::Cancel(client, lock) => self.locks.handle_cancel(now, client, lock),
                SyncWaiter::Reply(client, xid, object) => {
                    // Every answer to a sync says where the commit point
                    // is, as every Lustre reply carries `last_committed`:
                    // a client whose commit notice was lost (with a
                    // connection, or in a restart that skipped its replays
                    // of committed changes) lets go of those copies instead
                    // of asking for commits again and again.
                    let transno = self.last_committed();
                    if transno > Transno(0) && told.insert(client) {
                        self.send(client, ToClient::Committed { transno });
                    }
                    let result = match failures.iter().find(|(o, _)| *o == object) {
                        Some(&(_, error)) => Err(error),
                        None => Ok(()),
                    };
                    self.send(client, ToClient::SyncReply { xid, result });
                }
                SyncWaiter::Commit => {}
            }
        }
    }

    /// `client`'s acknowledged writes to `object` may be lost: tell it (a
    /// client that lets its notices pile up is evicted instead).
    fn notify_failure(&mut self, now: Instant, client: ClientId, object: ObjectId, error: IoError) {
        warn!(ost = self.index.0, %client, object = object.0, %error, "writes may be lost: the client is told");
        match self.notices.add(client, object, error) {
            Some(n) => {
                self.record_due = true; // written before the notice is sent
                self.send(client, ToClient::CommitFailed { object, error, seq: n.seq });
            }
            None => self.locks.evict(now, client),
        }
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<(ClientId, ToClient)> {
        self.transmits.pop_front()
    }

    /// The next sync the driver must do, then answer with
    /// [`Ost::handle_synced`]; poll after every input.
    #[must_use]
    pub fn poll_sync(&mut self) -> Option<SyncRequest> {
        self.syncs.pop_front()
    }

    /// What the driver must write durably (see [`OstRecord`]), when it
    /// changed; poll after every input, and write it before sending what
    /// [`Ost::poll_transmit`] yields (a commit-failure notice must not reach
    /// a client, or be lost, before it is on disk).
    #[must_use]
    pub fn poll_record(&mut self) -> Option<OstRecord> {
        if !std::mem::take(&mut self.record_due) || self.config.recovery.is_none() {
            return None;
        }
        Some(OstRecord {
            epoch: self.epoch,
            last_committed: self.last_committed(),
            clients: self.known.clone(),
            failures: self.notices.to_record(),
            lock_key: self.locks.key(),
        })
    }

    /// The commit-failure notices not yet acknowledged, as
    /// [`OstRecord::failures`] keeps them: a driver that writes a record of
    /// its own (a commit point before [`Ost::handle_synced`]) keeps them in it.
    pub fn failures_record(&self) -> BTreeMap<ClientId, Vec<(ObjectId, IoError)>> {
        self.notices.to_record()
    }

    /// See [`OstRecord::lock_key`]: a driver that writes a record of its
    /// own keeps it in it.
    pub fn lock_key(&self) -> LockKey {
        self.locks.key()
    }

    /// Give a new OST its key (see [`OstRecord::lock_key`]), before it
    /// serves anyone; a restarted one takes it from its record.
    pub fn set_lock_key(&mut self, key: LockKey) {
        assert!(self.locks.lock_count() == 0 && self.known.is_empty(), "an OST's key is set before it serves");
        self.locks.set_key(key);
    }

    /// The proof that comes with a change's transaction number (none
    /// without one: nothing to replay).
    fn prove_change(&self, client: ClientId, transno: Transno, object: ObjectId, change: Changed) -> ChangeProof {
        if transno == Transno(0) {
            return ChangeProof::default();
        }
        self.locks.key().prove_change(client, transno, object, change)
    }

    /// Cancels and sync RPCs waiting for a sync.
    pub fn syncs_pending(&self) -> usize {
        self.syncing.values().map(Vec::len).sum::<usize>() + self.next_commit.len()
    }

    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let glimpse = self.getattrs.values().map(|g| g.deadline).min();
        let commit = self.commit_due();
        let recovery = self.recovering.as_ref().map(Recovery::deadline);
        [self.locks.poll_timeout(), glimpse, commit, recovery].into_iter().flatten().min()
    }

    pub fn check_invariants(&self) {
        self.locks.check_invariants();
        assert!(self.syncs.len() <= self.syncing.len(), "a sync asked for without a cancel waiting on it");
        for request in &self.syncs {
            assert!(self.syncing.contains_key(&request.token), "sync {:?} asked for and not awaited", request.token);
        }
        for token in self.snapshots.keys() {
            assert!(self.syncing.contains_key(token), "commit {token:?} with nothing waiting on it");
        }
        assert!(self.snapshots.len() <= 1, "{} commits at once", self.snapshots.len());
        assert!(
            self.next_commit.is_empty() || !self.snapshots.is_empty(),
            "syncs wait for a next commit while none runs"
        );
        let outstanding: usize = self.getattrs.values().map(|g| g.outstanding).sum();
        assert_eq!(outstanding, self.glimpses.len(), "glimpse bookkeeping out of step");
        for (xid, glimpse) in &self.glimpses {
            assert!(self.getattrs.contains_key(&glimpse.getattr), "glimpse {xid:?} of no pending getattr");
            assert!(!self.locks.is_evicted(glimpse.holder), "glimpse {xid:?} awaits evicted {}", glimpse.holder);
            assert!(xid.0 < self.xid_next, "glimpse {xid:?} not from this OST's xids");
        }
        for token in self.syncing.keys() {
            assert!(token.0 < self.sync_next, "sync {token:?} not from this OST's tokens");
        }
        if let Some(commits) = &self.commits {
            commits.check_invariants();
        }
        if let Some(recovery) = &self.recovering {
            recovery.check_invariants();
        }
        self.notices.check_invariants();
        if self.config.recovery.is_none() {
            assert!(self.known.is_empty() && self.snapshots.is_empty() && self.recovering.is_none());
            assert!(self.next_commit.is_empty());
        }
    }

    fn send(&mut self, to: ClientId, message: ToClient) {
        self.transmits.push_back((to, message));
    }

    /// Lock decisions go out in the order they were taken, after the reply
    /// that caused them.
    fn collect_lock_transmits(&mut self) {
        while let Some((to, message)) = self.locks.poll_transmit() {
            if matches!(message, ToClient::Evicted) {
                self.forget_client(to);
                if let Some(recovery) = self.recovering.as_mut() {
                    recovery.forget(to);
                }
            }
            self.transmits.push_back((to, message));
        }
    }

    /// A cancel completes at once, unless the policy says its lock's data
    /// must first be durable: then the lock stays granted (conflicting
    /// requests keep waiting) until the driver answers the sync.
    fn cancel(&mut self, now: Instant, from: ClientId, lock: LockHandle) {
        let sync = match self.locks.granted_lock(from, lock) {
            Some((object, mode, extent, called_back)) if self.config.sync_lock_cancel.applies(mode, called_back) => {
                Some((object, extent))
            }
            _ => None,
        };
        let Some((object, extent)) = sync else {
            self.locks.handle_cancel(now, from, lock);
            return;
        };
        let waiter = SyncWaiter::Cancel(from, lock);
        if self.syncing.values().flatten().chain(&self.next_commit).any(|waiting| *waiting == waiter) {
            debug!(ost = self.index.0, %from, lock = lock.0, "cancel repeated while its sync runs");
            return;
        }
        self.counters.cancel_syncs += 1;
        self.ask_sync(now, waiter, Some(object), extent);
    }

    /// Ask the driver for a sync. With recovery on, it is a commit of every
    /// change so far: one that has nothing to do is done at once, and while
    /// a commit runs the sync waits for it or for the one after it (see
    /// `syncing`).
    fn ask_sync(&mut self, now: Instant, waiter: SyncWaiter, object: Option<ObjectId>, extent: Extent) {
        let Some(commits) = self.commits.as_ref() else {
            self.start_sync(vec![waiter], object, extent, None);
            return;
        };
        let in_flight = self.snapshots.keys().next().copied();
        match in_flight {
            _ if matches!(waiter, SyncWaiter::Reply(..))
                && crate::planted::active(crate::planted::Bug::SyncWithoutCommit) =>
            {
                self.synced(now, vec![waiter], None, &[]);
                self.collect_lock_transmits();
            }
            None if !commits.has_changes() => {
                self.synced(now, vec![waiter], None, &[]);
                self.collect_lock_transmits(); // a cancel completed
            }
            None => self.begin_commit(now, vec![waiter]),
            // Everything changed so far is in the commit that runs.
            Some(token) if !commits.has_changes() => {
                self.syncing.get_mut(&token).expect("a commit in flight is awaited").push(waiter);
            }
            Some(_) if waiter == SyncWaiter::Commit && !self.next_commit.is_empty() => {}
            Some(_) => self.next_commit.push(waiter),
        }
    }

    /// Begin a commit of every change so far, for `waiters`.
    fn begin_commit(&mut self, now: Instant, waiters: Vec<SyncWaiter>) {
        let commits = self.commits.as_mut().expect("commits with recovery on");
        if !commits.has_changes() {
            self.synced(now, waiters, None, &[]);
            return;
        }
        let snapshot = commits.begin();
        let object = waiters.iter().find_map(|w| match *w {
            SyncWaiter::Cancel(..) | SyncWaiter::Commit => None,
            SyncWaiter::Reply(_, _, object) => Some(object),
        });
        self.start_sync(waiters, object, Extent::WHOLE, Some(snapshot));
    }

    fn start_sync(
        &mut self,
        waiters: Vec<SyncWaiter>,
        object: Option<ObjectId>,
        extent: Extent,
        snapshot: Option<Snapshot>,
    ) {
        let token = SyncToken(self.sync_next);
        self.sync_next += 1;
        self.syncing.insert(token, waiters);
        let (commit, commit_to) = match snapshot {
            Some(snapshot) => {
                let objects = snapshot.objects.keys().copied().collect();
                let transno = snapshot.transno;
                self.snapshots.insert(token, snapshot);
                (objects, transno)
            }
            None => (Vec::new(), Transno(0)),
        };
        self.syncs.push_back(SyncRequest { token, object, extent, commit, commit_to });
    }

    /// When the periodic commit is due: not while recovering, nor while a
    /// commit waits to begin anyway.
    fn commit_due(&self) -> Option<Instant> {
        if self.recovering.is_some() || !self.next_commit.is_empty() {
            return None;
        }
        self.commits.as_ref().and_then(Commits::commit_due)
    }

    /// `object` was destroyed in the store (by the MDS's request): the
    /// locks waiting on it fail rather than be granted on an object that
    /// is gone.
    pub fn object_destroyed(&mut self, object: ObjectId) {
        let failed = self.locks.object_gone(object);
        if failed > 0 {
            debug!(ost = %self.index, object = object.0, failed, "locks waiting on a destroyed object failed");
        }
        self.collect_lock_transmits();
    }

    /// Whether `object` is missing from the store (destroyed, or never
    /// created); a store that cannot tell says it is there.
    fn is_gone(&mut self, object: ObjectId) -> bool {
        matches!(self.store.size(object), Err(StoreError::NoSuchObject { .. }))
    }

    fn admit(&mut self, from: ClientId) -> Result<(), IoError> {
        if self.locks.is_evicted(from) {
            self.counters.io_refused += 1;
            return Err(IoError::Evicted);
        }
        Ok(())
    }

    /// A client's write: its transaction number (0 without recovery, or
    /// over a store durable on write: see
    /// [`ObjectStore::durable_on_write`]).
    fn write(
        &mut self,
        now: Instant,
        from: ClientId,
        object: ObjectId,
        offset: u64,
        data: &Payload,
    ) -> Result<Transno, IoError> {
        self.admit(from)?;
        self.check_io(from, offset, data.len())?;
        if data.is_empty() {
            return Ok(Transno(0));
        }
        self.locks.prolong(now, from, object, Extent::from_offset_len(offset, data.len()));
        self.apply_write(object, offset, data)?;
        if self.store.durable_on_write() {
            return Ok(Transno(0));
        }
        let Some(commits) = self.commits.as_mut() else { return Ok(Transno(0)) };
        let transno = commits.record(now, from, object, data.len());
        if commits.bytes_since_begin() >= self.config.recovery.map_or(u64::MAX, |r| r.commit_bytes)
            && self.recovering.is_none()
        {
            self.ask_sync(now, SyncWaiter::Commit, None, Extent::WHOLE);
        }
        Ok(transno)
    }

    fn apply_write(&mut self, object: ObjectId, offset: u64, data: &Payload) -> Result<(), IoError> {
        self.store.write_payload(object, offset, data).map_err(store_error)?;
        self.counters.write_rpcs += 1;
        self.counters.bytes_written += data.len();
        self.counters.write_bytes.sample(data.len());
        self.counters.write_pages.tally_log2(pages_of(offset, data.len()));
        Ok(())
    }

    fn read(
        &mut self,
        now: Instant,
        from: ClientId,
        object: ObjectId,
        offset: u64,
        len: u64,
    ) -> Result<Payload, IoError> {
        self.admit(from)?;
        self.check_io(from, offset, len)?;
        if len == 0 {
            return Ok(match self.store.payload_kind() {
                PayloadKind::Bytes => Payload::Bytes(Vec::new()),
                PayloadKind::Phantom => Payload::Phantom(0),
            });
        }
        self.locks.prolong(now, from, object, Extent::from_offset_len(offset, len));
        let data = self.store.read_payload(object, offset, len).map_err(store_error)?;
        debug_assert_eq!(data.len(), len, "the store answered a read of {len} bytes with {}", data.len());
        self.counters.read_rpcs += 1;
        self.counters.bytes_read += len;
        self.counters.read_bytes.sample(len);
        self.counters.read_pages.tally_log2(pages_of(offset, len));
        Ok(data)
    }

    /// What a peer may ask of the store: `len` bytes at `offset`, at most
    /// [`RPC_BYTES_MAX`] of them, ending within the largest object.
    fn check_io(&self, from: ClientId, offset: u64, len: u64) -> Result<(), IoError> {
        let refused = match offset.checked_add(len) {
            _ if len > RPC_BYTES_MAX => IoError::Invalid,
            None => IoError::Invalid,
            Some(end) if end > OBJECT_BYTES_MAX => IoError::TooLarge,
            Some(_) => return Ok(()),
        };
        debug!(ost = self.index.0, %from, offset, len, %refused, "I/O request refused");
        Err(refused)
    }

    /// A cut's range must fit an object; a hole or a reservation of
    /// nothing is refused, as `fallocate` refuses a length of 0.
    fn check_cut(&self, from: ClientId, cut: Cut) -> Result<(), IoError> {
        let (offset, len) = cut.span();
        if len == 0 && !matches!(cut, Cut::Size(_)) {
            debug!(ost = self.index.0, %from, ?cut, "a cut of no bytes refused");
            return Err(IoError::Invalid);
        }
        match offset.checked_add(len) {
            Some(end) if end <= OBJECT_BYTES_MAX => Ok(()),
            Some(_) => Err(IoError::TooLarge),
            None => Err(IoError::Invalid),
        }
    }

    fn punch(&mut self, now: Instant, from: ClientId, object: ObjectId, cut: Cut) -> Result<Transno, IoError> {
        self.admit(from)?;
        self.check_cut(from, cut)?;
        self.store.cut(object, cut).map_err(store_error)?;
        self.counters.punches += 1;
        if self.store.durable_on_write() {
            return Ok(Transno(0));
        }
        Ok(self.commits.as_mut().map_or(Transno(0), |c| c.record(now, from, object, 0)))
    }

    /// Cache advice on `[start, end)` of `object`, passed to the store
    /// (Lustre's `ofd_ladvise_hdl`). An evicted client is refused as for
    /// I/O. The range is cut at the largest object (a file range to its end
    /// maps to object ranges past it); what is left past the object's end
    /// the store passes over.
    ///
    /// Where lanefs departs from Lustre: Lustre's OST takes a PR lock on
    /// the range before it prefetches (so that clients flush what they
    /// hold dirty there first) and reads the pages in before it answers;
    /// this OST takes no lock (bytes dirty in a client's cache are not
    /// fetched) and answers once the store has started the reads.
    fn advise(
        &mut self,
        from: ClientId,
        object: ObjectId,
        advice: CacheAdvice,
        start: u64,
        end: u64,
    ) -> Result<(), IoError> {
        self.admit(from)?;
        if end <= start {
            debug!(ost = self.index.0, %from, start, end, "advice on an empty range refused");
            return Err(IoError::Invalid);
        }
        let end = end.min(OBJECT_BYTES_MAX);
        if start >= end {
            return Ok(());
        }
        self.store.advise(object, advice, start, end - start).map_err(store_error)
    }

    fn getattr(&mut self, now: Instant, from: ClientId, xid: Xid, object: ObjectId) {
        if let Err(e) = self.admit(from) {
            self.send(from, ToClient::GetattrReply { xid, result: Err(e) });
            return;
        }
        self.counters.getattrs += 1;
        let (size, allocated) = match self.store.size_and_allocated(object) {
            Ok(attr) => attr,
            Err(e) => {
                self.send(from, ToClient::GetattrReply { xid, result: Err(store_error(e)) });
                return;
            }
        };
        let targets = self.locks.glimpse_targets(object, from);
        let id = self.getattr_next;
        self.getattr_next += 1;
        let deadline = now + self.config.glimpse_timeout;
        let pending = PendingGetattr { client: from, xid, size, allocated, outstanding: targets.len(), deadline };
        self.getattrs.insert(id, pending);
        for (holder, lock) in targets {
            let gxid = Xid(self.xid_next);
            self.xid_next += 1;
            self.counters.glimpses += 1;
            self.glimpses.insert(gxid, Glimpse { getattr: id, holder, object, lock });
            self.send(holder, ToClient::Glimpse { xid: gxid, object, lock });
        }
        if self.getattrs[&id].outstanding == 0 {
            self.finish_getattr(id);
        }
    }

    fn glimpse_reply(&mut self, xid: Xid, from: ClientId, size: u64) {
        let Some(glimpse) = self.glimpses.get(&xid).copied() else {
            debug!(ost = self.index.0, "late glimpse reply ignored");
            return;
        };
        if glimpse.holder != from {
            debug!(ost = self.index.0, %from, "glimpse reply from the wrong client ignored");
            return;
        }
        self.glimpses.remove(&xid);
        let g = self.getattrs.get_mut(&glimpse.getattr).expect("glimpse belongs to a getattr");
        g.size = g.size.max(size);
        g.outstanding -= 1;
        if g.outstanding == 0 {
            self.finish_getattr(glimpse.getattr);
        }
    }

    fn forget_glimpses_of(&mut self, client: ClientId) {
        let gone: Vec<Xid> = self.glimpses.iter().filter(|(_, g)| g.holder == client).map(|(x, _)| *x).collect();
        for xid in gone {
            let glimpse = self.glimpses.remove(&xid).expect("listed");
            let g = self.getattrs.get_mut(&glimpse.getattr).expect("glimpse belongs to a getattr");
            g.outstanding -= 1;
            if g.outstanding == 0 {
                self.finish_getattr(glimpse.getattr);
            }
        }
    }

    fn finish_getattr(&mut self, id: u64) {
        let g = self.getattrs.remove(&id).expect("pending getattr");
        self.glimpses.retain(|_, glimpse| glimpse.getattr != id);
        let attr = ObjectAttr { size: g.size, allocated: g.allocated };
        self.send(g.client, ToClient::GetattrReply { xid: g.xid, result: Ok(attr) });
    }
}

fn store_error(e: StoreError) -> IoError {
    e.io_error()
}

#[cfg(test)]
mod tests;
