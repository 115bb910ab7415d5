//! The lock server of one OST: Lustre's LDLM namespace for extent locks.
//!
//! One resource per object, each with its granted locks (indexed by extent,
//! mode and grant order, see `Granted`) and a FIFO waiting queue. Inputs are
//! `handle_*` calls that carry `now`; outputs are the messages to clients
//! ([`LockServer::poll_transmit`]), the decisions for tracing and scripts
//! ([`LockServer::poll_event`], when recording), and the next callback
//! deadline ([`LockServer::poll_timeout`]).
//!
//! Rules (from `ldlm.md`, i.e. Lustre's `ldlm_extent.c` and LU-6179):
//! * a request compatible with every granted lock and every waiter is granted
//!   at once, expanded by [`super::policy`];
//! * otherwise it waits; every conflicting granted lock that is not a GROUP
//!   lock gets one blocking callback; conflicting waiters are marked, and get
//!   their callback with their completion;
//! * a speculative (lockahead) request never waits: any overlapping conflicting
//!   granted lock or waiter, or any GROUP lock, refuses it, with no callbacks;
//! * a holder that has not cancelled `callback_timeout` after its callback is
//!   evicted: all its locks go, and it is refused until it reconnects;
//! * a cancel reprocesses the waiting queue in order, granting waiters up to
//!   the first that is still blocked (`ldlm_reprocess_queue` and
//!   `ldlm_process_extent_lock`'s rescan): no waiter is overtaken.
//!
//! Where lanefs goes beyond Lustre: after every reprocess, each lock still
//! waiting makes sure that every granted lock blocking it has been called
//! back. Lustre gets the same effect from its work lists; doing it as one
//! rule makes liveness independent of how a grant was expanded.
//!
//! What a peer may send: any request; one that is inverted, off page
//! boundaries, a GROUP lock on less than the whole object or of gid 0 is answered
//! [`EnqueueReply::Invalid`] and leaves no lock behind (`check_request`). A
//! cancel of a lock the client does not hold (unknown, another client's, or
//! gone with an eviction) is ignored with a debug log. A client holds at
//! most [`LOCKS_PER_CLIENT_MAX`] locks, granted and waiting, on one OST:
//! past it a request is answered [`EnqueueReply::TooMany`] (a lockahead
//! request [`EnqueueReply::Refused`], as on a conflict), and a replay is
//! refused, so that one client fills only its own share of the lock table.
//! (Lustre has no such bound: its lock pools ask clients to shrink their
//! LRUs as the server's memory fills; lanefs bounds each client instead.)
//!
//! Invariant ([`LockServer::check_invariants`]): no two overlapping granted
//! locks have incompatible modes; a speculative lock's extent is its request
//! after alignment only; every lock is in exactly one queue, came from a
//! well-formed request, and belongs to a client that is not evicted; no
//! client holds more than [`LOCKS_PER_CLIENT_MAX`].

use super::policy::{self, PolicyLock, PolicyRequest};
use super::proof::{LockKey, LockProof};
use super::stats::LockCounters;
use super::{LockMode, LockRequest};
use crate::extent::{Extent, EOF};
use crate::msg::{EnqueueReply, IoError, ToClient};
use crate::units::{ClientId, Duration, Epoch, Instant, LockHandle, ObjectId, Xid, PAGE_SIZE};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use tracing::{debug, trace};

/// Lustre's `ldlm_enqueue_min`: the floor of the callback timeout.
pub const CALLBACK_TIMEOUT_DEFAULT: Duration = Duration::from_secs(100);

#[derive(Clone, Debug)]
pub struct LockServerConfig {
    /// Time a holder has to cancel after a blocking callback.
    pub callback_timeout: Duration,
    /// Answer an enqueue sent again (same client, same xid: a client that
    /// lost its connection and resends what was unanswered) with the lock
    /// it already made, rather than a second one. Needs an index of live
    /// locks by xid; the simulator, whose messages are never lost, goes
    /// without.
    pub resend: bool,
}

impl Default for LockServerConfig {
    fn default() -> Self {
        LockServerConfig { callback_timeout: CALLBACK_TIMEOUT_DEFAULT, resend: false }
    }
}

/// Lock handles of one life of an OST start at `epoch << HANDLE_EPOCH_SHIFT`,
/// so that a lock replayed from an earlier life (which keeps its handle)
/// never meets a new lock with the same one.
pub const HANDLE_EPOCH_SHIFT: u32 = 40;

/// Locks, granted and waiting, one client may hold on one OST: far above
/// what a client keeps (its LRU, 400 by default, and the locks its
/// operations and lockahead requests in flight hold).
pub const LOCKS_PER_CLIENT_MAX: usize = 1 << 16;

/// A decision of the server, in the order it was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockEvent {
    Granted { client: ClientId, lock: LockHandle, object: ObjectId, mode: LockMode, extent: Extent },
    Waiting { client: ClientId, lock: LockHandle, object: ObjectId, mode: LockMode, extent: Extent },
    BlockingCallback { client: ClientId, lock: LockHandle },
    Refused { client: ClientId, object: ObjectId, extent: Extent },
    Cancelled { client: ClientId, lock: LockHandle },
    Evicted { client: ClientId },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LockState {
    Waiting,
    Granted,
}

#[derive(Clone, Debug)]
struct Lock {
    client: ClientId,
    object: ObjectId,
    request: LockRequest,
    extent: Extent,
    state: LockState,
    /// A conflicting request arrived: the holder must give the lock back.
    callback_pending: bool,
    /// When the holder will be evicted if it has not cancelled (set once the
    /// blocking callback has actually been sent, i.e. the lock is granted).
    callback_deadline: Option<Instant>,
    /// The order in which deadlines were set (callback sent, or deadline
    /// moved by I/O): locks whose deadlines pass at the same instant are
    /// acted on in this order, as Lustre walks its waiting-locks list, to
    /// which a lock is appended when its timer is set or refreshed.
    deadline_seq: u64,
    /// Its place in the resource's grant order, once granted.
    granted_seq: u64,
    /// The enqueue's xid (zero for a replayed lock).
    xid: Xid,
}

impl Lock {
    fn policy_view(&self) -> PolicyLock {
        PolicyLock {
            client: self.client,
            mode: self.request.mode,
            extent: self.extent,
            req_extent: self.request.extent,
        }
    }

    /// Conflict as `ldlm_extent_compat_queue` decides it: modes incompatible,
    /// and extents overlapping (GROUP locks conflict whatever the extent).
    fn conflicts_with(&self, mode: LockMode, extent: &Extent) -> bool {
        if self.request.mode.compatible(mode) {
            return false;
        }
        self.request.mode.is_group() || mode.is_group() || self.extent.overlaps(extent)
    }
}

#[derive(Debug, Default)]
struct Resource {
    granted: Granted,
    waiting: Vec<LockHandle>,
    /// GROUP locks granted or waiting (a lockahead request is refused while
    /// there is one).
    group_locks: usize,
    counters: LockCounters,
}

/// A resource's granted locks by extent, so that the locks a request
/// overlaps are found without walking them all (Lustre keeps interval trees
/// for the same reason): with lockahead an object may carry thousands of
/// granted locks. Grant order is the sequence number in each key; no index
/// keeps it, since only checks and rare walks need every lock in that order.
#[derive(Debug, Default)]
struct Granted {
    seq_next: u64,
    /// `(start, seq) -> (end, lock, mode)`.
    by_start: BTreeMap<(u64, u64), (u64, LockHandle, LockMode)>,
    /// How many granted locks hold each mode, for the modes held (a few:
    /// PR, PW and the GROUP gids in use, so a list beats a tree).
    modes: SmallVec<[(LockMode, usize); 4]>,
    /// How many granted extents span each `end - start`: the widest tells
    /// how far before a query's start an overlapping lock may begin.
    spans: BTreeMap<u64, usize>,
}

impl Granted {
    /// Adds a granted lock; returns its sequence number.
    fn insert(&mut self, handle: LockHandle, extent: Extent, mode: LockMode) -> u64 {
        let seq = self.seq_next;
        self.seq_next += 1;
        self.by_start.insert((extent.start, seq), (extent.end, handle, mode));
        match self.modes.iter_mut().find(|(m, _)| *m == mode) {
            Some((_, n)) => *n += 1,
            None => self.modes.push((mode, 1)),
        }
        *self.spans.entry(extent.end - extent.start).or_default() += 1;
        seq
    }

    fn remove(&mut self, seq: u64, extent: Extent) {
        let (_, _, mode) = self.by_start.remove(&(extent.start, seq)).expect("granted lock indexed");
        let at = self.modes.iter().position(|(m, _)| *m == mode).expect("granted mode counted");
        if self.modes[at].1 > 1 {
            self.modes[at].1 -= 1;
        } else {
            self.modes.swap_remove(at);
        }
        let span = extent.end - extent.start;
        match self.spans.get_mut(&span) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                self.spans.remove(&span);
            }
        }
    }

    fn len(&self) -> usize {
        self.by_start.len()
    }

    /// Every granted lock, in grant order.
    fn in_order(&self) -> SmallVec<[LockHandle; 8]> {
        self.overlapping(&Extent::WHOLE)
    }

    /// The index entry of the granted lock `seq` starting at `start`:
    /// `(end, lock, mode)`.
    fn entry(&self, start: u64, seq: u64) -> Option<(u64, LockHandle, LockMode)> {
        self.by_start.get(&(start, seq)).copied()
    }

    /// The granted locks whose extent overlaps `extent`, in grant order.
    fn overlapping(&self, extent: &Extent) -> SmallVec<[LockHandle; 8]> {
        let mut hits: SmallVec<[(u64, LockHandle); 8]> = self.overlapping_unordered(extent).collect();
        hits.sort_unstable_by_key(|&(seq, _)| seq);
        hits.into_iter().map(|(_, handle)| handle).collect()
    }

    /// `(grant order, handle)` of the locks overlapping `extent`, in no
    /// particular order.
    fn overlapping_unordered(&self, extent: &Extent) -> impl Iterator<Item = (u64, LockHandle)> + '_ {
        let widest = self.spans.last_key_value().map_or(0, |(span, _)| *span);
        let from = extent.start.saturating_sub(widest);
        let extent = *extent;
        self.by_start
            .range((from, 0)..=(extent.end, u64::MAX))
            .filter(move |(_, (end, _, _))| *end >= extent.start)
            .map(|(&(_, seq), &(_, handle, _))| (seq, handle))
    }

    /// What the expansion policy needs of these locks for `req`, from the
    /// indexes (what [`policy::GrantedView::of`] finds by walking them).
    fn view(&self, req: &PolicyRequest) -> policy::GrantedView {
        let conflicts = |mode: LockMode| policy::tree_conflicts(mode, req.mode);
        let conflicting = self.modes.iter().filter(|(m, _)| conflicts(*m)).map(|(_, n)| n).sum();
        let above = self.by_start.range((req.extent.end.saturating_add(1), 0)..);
        let lowest_start_above = match req.extent.end {
            EOF => None,
            _ => above.filter(|(_, (_, _, mode))| conflicts(*mode)).map(|(&(start, _), _)| start).next(),
        };
        policy::GrantedView { conflicting, lowest_start_above }
    }
}

/// The lock namespace of one OST.
#[derive(Debug)]
pub struct LockServer {
    config: LockServerConfig,
    /// Every lock by handle (hashed: looked up at every request; walks in
    /// handle order sort first).
    locks: FxHashMap<LockHandle, Lock>,
    /// The resources of objects with locks, granted or waiting: a resource
    /// goes when its last lock does (see [`LockServer::prune`]), so that
    /// the table is bounded by the locks, not by every object ever locked.
    resources: FxHashMap<ObjectId, Resource>,
    /// The counters of resources that went, and the refusals of requests
    /// for objects that had no resource (making one for each would let a
    /// peer that names ever new objects grow the table with nothing in it).
    retired: LockCounters,
    evicted: BTreeSet<ClientId>,
    /// Locks, granted and waiting, of each client that holds any.
    per_client: FxHashMap<ClientId, usize>,
    /// Clients told of their bound and not yet back under it (one warning each).
    at_bound: BTreeSet<ClientId>,
    /// Locks with a callback deadline (called back, not yet cancelled).
    called_back: BTreeSet<LockHandle>,
    /// The next [`Lock::deadline_seq`].
    deadline_seq_next: u64,
    /// Live locks by `(client, enqueue xid)`, with `config.resend` only.
    by_xid: FxHashMap<(ClientId, Xid), LockHandle>,
    /// The first handle of this life: a replayed lock names one below it.
    handle_first: u64,
    handle_next: u64,
    /// The key of the proofs its grants carry and its replays must give
    /// back (see [`super::proof`]).
    key: LockKey,
    transmits: VecDeque<(ClientId, ToClient)>,
    events: Option<VecDeque<LockEvent>>,
}

impl LockServer {
    pub fn new(config: LockServerConfig) -> Self {
        Self::with_epoch(config, Epoch(0))
    }

    /// The lock server of life `epoch` of its OST (see [`HANDLE_EPOCH_SHIFT`]).
    pub fn with_epoch(config: LockServerConfig, epoch: Epoch) -> Self {
        LockServer {
            config,
            locks: FxHashMap::default(),
            resources: FxHashMap::default(),
            retired: LockCounters::default(),
            evicted: BTreeSet::new(),
            per_client: FxHashMap::default(),
            at_bound: BTreeSet::new(),
            called_back: BTreeSet::new(),
            deadline_seq_next: 0,
            by_xid: FxHashMap::default(),
            handle_first: (epoch.0 << HANDLE_EPOCH_SHIFT) + 1,
            handle_next: (epoch.0 << HANDLE_EPOCH_SHIFT) + 1,
            key: LockKey::default(),
            transmits: VecDeque::new(),
            events: None,
        }
    }

    /// Prove grants, and check replays, with `key` (the OST's, from its
    /// record; without one, the all-zero key: fine where nobody forges).
    pub fn set_key(&mut self, key: LockKey) {
        self.key = key;
    }

    /// The key of its proofs (the OST proves its acknowledged changes with
    /// it too).
    pub fn key(&self) -> LockKey {
        self.key
    }

    /// The proof of granted lock `handle`, for its holder.
    fn proof_of(&self, handle: LockHandle) -> LockProof {
        let lock = &self.locks[&handle];
        self.key.prove(lock.client, handle, lock.object, lock.request.mode, lock.extent)
    }

    /// Keep every decision for [`LockServer::poll_event`] (scripts, traces).
    pub fn record_events(&mut self) {
        self.events.get_or_insert_with(VecDeque::new);
    }

    pub fn config(&self) -> &LockServerConfig {
        &self.config
    }

    // ----- inputs -------------------------------------------------------

    /// An enqueue RPC from `client`.
    pub fn handle_enqueue(&mut self, now: Instant, client: ClientId, xid: Xid, object: ObjectId, request: LockRequest) {
        if self.evicted.contains(&client) {
            self.refuse(client, xid, object, request.extent, EnqueueReply::Evicted);
            return;
        }
        if let Err(reason) = check_request(&request) {
            debug!(%client, reason, "malformed enqueue refused");
            self.refuse(client, xid, object, request.extent, EnqueueReply::Invalid);
            return;
        }
        if self.config.resend {
            if let Some(&handle) = self.by_xid.get(&(client, xid)) {
                self.answer_again(client, xid, handle);
                return;
            }
        }
        if self.is_at_bound(client) {
            let reply = if request.flags.speculative { EnqueueReply::Refused } else { EnqueueReply::TooMany };
            self.refuse(client, xid, object, request.extent, reply);
            return;
        }
        self.resource(object).counters.note_enqueue(request.flags.speculative);
        let handle = LockHandle(self.handle_next);
        self.handle_next += 1;
        let lock = Lock {
            client,
            object,
            request,
            extent: request.extent,
            state: LockState::Waiting,
            callback_pending: false,
            callback_deadline: None,
            deadline_seq: 0,
            granted_seq: 0,
            xid,
        };
        let blockers = self.blockers(object, &lock);
        self.resource(object).counters.conflicts += blockers.conflicts as u64;
        if request.flags.speculative && (blockers.conflicts > 0 || self.has_group_lock(object)) {
            // A conflict means a lock is there: the resource stays.
            self.refuse(client, xid, object, request.extent, EnqueueReply::Refused);
            return;
        }
        self.insert_lock(handle, lock);
        if self.config.resend {
            self.by_xid.insert((client, xid), handle);
        }
        self.resource(object).group_locks += usize::from(request.mode.is_group());
        let planted = crate::planted::active(crate::planted::Bug::ConflictingGrant) && blockers.conflicts == 1;
        if blockers.conflicts == 0 || blockers.same_group_granted || planted {
            let extent = self.grant(handle);
            let proof = self.proof_of(handle);
            self.transmit(
                client,
                ToClient::Enqueue { xid, reply: EnqueueReply::Granted { lock: handle, extent, proof } },
            );
            return;
        }
        // A GROUP request that must wait goes right after the first waiter
        // of its gid, so that the two are granted together, or else right
        // in front of the first waiting non-GROUP lock, so that it does not
        // wait behind a lock its own group's grant would block; waiters of
        // other gids are passed over (Lustre's `ldlm_extent_compat_queue`
        // scanning the waiting queue). Other requests join the back.
        let queue = &self.resources[&object].waiting;
        let at = match request.mode {
            LockMode::Group(_) => queue.iter().enumerate().find_map(|(i, h)| match self.locks[h].request.mode {
                mode if mode == request.mode => Some(i + 1),
                LockMode::Group(_) => None,
                LockMode::ProtectedRead | LockMode::ProtectedWrite => Some(i),
            }),
            LockMode::ProtectedRead | LockMode::ProtectedWrite => None,
        };
        let queue = &mut self.resource(object).waiting;
        queue.insert(at.unwrap_or(queue.len()), handle);
        self.event(LockEvent::Waiting { client, lock: handle, object, mode: request.mode, extent: request.extent });
        self.transmit(client, ToClient::Enqueue { xid, reply: EnqueueReply::Waiting { lock: handle } });
        // Waiters ahead that conflict are called back once granted. A GROUP
        // request has none ahead of it: it passes over other gids' GROUP
        // waiters (never called back) and stops in front of the first
        // non-GROUP one, as Lustre's scan does.
        if !request.mode.is_group() {
            for waiter in blockers.waiting {
                self.locks.get_mut(&waiter).expect("waiter exists").callback_pending = true;
            }
        }
        for holder in blockers.granted {
            self.send_blocking(now, holder);
        }
    }

    /// A client gives a lock back (granted or still waiting).
    pub fn handle_cancel(&mut self, now: Instant, client: ClientId, handle: LockHandle) {
        match self.locks.get(&handle) {
            Some(lock) if lock.client == client => {}
            _ => {
                // A cancel racing with an eviction, or a confused peer: the
                // lock is already gone, nothing to undo.
                debug!(%client, lock = handle.0, "cancel of unknown lock ignored");
                return;
            }
        }
        let object = self.remove_lock(handle);
        self.resource(object).counters.cancels += 1;
        self.event(LockEvent::Cancelled { client, lock: handle });
        self.reprocess(now, object);
        self.prune(object);
    }

    /// `object` is gone from the store (destroyed): every lock waiting on
    /// it is taken out and its client told ([`ToClient::WaitFailed`]), so
    /// that none is granted on it when the locks ahead go. Granted locks
    /// stay until their holders cancel them. Returns how many went.
    pub fn object_gone(&mut self, object: ObjectId) -> usize {
        let Some(res) = self.resources.get(&object) else { return 0 };
        let waiting = res.waiting.clone();
        for &handle in &waiting {
            let client = self.locks[&handle].client;
            self.remove_lock(handle);
            self.event(LockEvent::Cancelled { client, lock: handle });
            self.transmit(client, ToClient::WaitFailed { lock: handle, error: IoError::NoSuchObject });
        }
        self.prune(object);
        waiting.len()
    }

    /// A client (re)connects; an evicted client is accepted again.
    pub fn handle_connect(&mut self, client: ClientId) {
        self.evicted.remove(&client);
    }

    /// A client came back on a new connection, keeping its locks: send
    /// again what the old connection may have lost. Every granted lock's
    /// completion (a client ignores one for a lock it already holds), and
    /// a blocking callback for each lock called back. The callback
    /// deadlines keep running.
    pub fn resume(&mut self, client: ClientId) {
        let mut mine: Vec<LockHandle> = self
            .locks
            .iter()
            .filter(|(_, l)| l.client == client && l.state == LockState::Granted)
            .map(|(h, _)| *h)
            .collect();
        mine.sort_unstable();
        for handle in mine {
            let lock = &self.locks[&handle];
            let (extent, pending) = (lock.extent, lock.callback_pending);
            let proof = self.proof_of(handle);
            self.transmit(client, ToClient::Completion { lock: handle, extent, callback_pending: false, proof });
            if pending {
                self.transmit(client, ToClient::Blocking { lock: handle });
            }
        }
    }

    /// A lock `client` held before its OST restarted, granted again as it
    /// was (recovery). Refused (false) if the handle is taken or invalid
    /// (0, or not of an earlier life: one of this life's would meet a new
    /// lock given the same handle), or if it conflicts with a lock already
    /// granted (replayed before it): granted locks never conflict.
    pub fn replay(
        &mut self,
        client: ClientId,
        handle: LockHandle,
        object: ObjectId,
        request: LockRequest,
        extent: Extent,
        proof: LockProof,
    ) -> bool {
        let earlier_life = handle.0 > 0 && handle.0 < self.handle_first;
        if !earlier_life
            || !(self.key.proves(proof, client, handle, object, &request, extent)
                || crate::planted::active(crate::planted::Bug::UnprovedReplay))
            || self.locks.contains_key(&handle)
            || check_request(&request).is_err()
            || !extent.contains(&request.extent)
        {
            return false;
        }
        let page_aligned =
            extent.start.is_multiple_of(PAGE_SIZE) && (extent.end == EOF || (extent.end + 1).is_multiple_of(PAGE_SIZE));
        if !page_aligned {
            return false;
        }
        // GROUP locks cover the whole object: every lock that can conflict
        // overlaps the extent.
        let conflicts = self.resources.get(&object).is_some_and(|res| {
            res.granted
                .overlapping_unordered(&extent)
                .any(|(_, h)| self.locks[&h].conflicts_with(request.mode, &extent))
        });
        if conflicts || self.is_at_bound(client) {
            return false;
        }
        let lock = Lock {
            client,
            object,
            request,
            extent,
            state: LockState::Granted,
            callback_pending: false,
            callback_deadline: None,
            deadline_seq: 0,
            granted_seq: 0,
            xid: Xid(0),
        };
        self.insert_lock(handle, lock);
        let res = self.resource(object);
        res.group_locks += usize::from(request.mode.is_group());
        let seq = res.granted.insert(handle, extent, request.mode);
        self.locks.get_mut(&handle).expect("just inserted").granted_seq = seq;
        self.resource(object).counters.grants += 1;
        self.event(LockEvent::Granted { client, lock: handle, object, mode: request.mode, extent });
        true
    }

    /// `client` is gone for good (it disconnected cleanly, or a recovery
    /// went on without it): its locks go, as in an eviction, but it is not
    /// told and not refused later (it comes back as a new client).
    pub fn forget_client(&mut self, now: Instant, client: ClientId) {
        let mut handles: Vec<LockHandle> =
            self.locks.iter().filter(|(_, l)| l.client == client).map(|(h, _)| *h).collect();
        handles.sort_unstable();
        let mut objects = BTreeSet::new();
        for handle in handles {
            objects.insert(self.remove_lock(handle));
        }
        for object in objects {
            self.reprocess(now, object);
            self.prune(object);
        }
    }

    /// An enqueue came again: answer with the lock it made.
    fn answer_again(&mut self, client: ClientId, xid: Xid, handle: LockHandle) {
        let lock = &self.locks[&handle];
        let (state, extent, pending) = (lock.state, lock.extent, lock.callback_pending);
        match state {
            LockState::Granted => {
                let proof = self.proof_of(handle);
                self.transmit(
                    client,
                    ToClient::Enqueue { xid, reply: EnqueueReply::Granted { lock: handle, extent, proof } },
                );
                if pending {
                    self.transmit(client, ToClient::Blocking { lock: handle });
                }
            }
            LockState::Waiting => {
                self.transmit(client, ToClient::Enqueue { xid, reply: EnqueueReply::Waiting { lock: handle } })
            }
        }
    }

    /// Evict every holder whose callback deadline has passed, in the order
    /// the deadlines were set (Lustre's `waiting_locks_callback` walks its
    /// list of called-back locks from the head, evicting while expired).
    pub fn handle_timeout(&mut self, now: Instant) {
        if crate::planted::active(crate::planted::Bug::NoCallbackTimeout) {
            return;
        }
        let mut late: Vec<(Instant, u64, ClientId)> = self
            .called_back
            .iter()
            .map(|h| &self.locks[h])
            .filter_map(|l| l.callback_deadline.filter(|&d| d <= now).map(|d| (d, l.deadline_seq, l.client)))
            .collect();
        late.sort_unstable();
        let mut done = BTreeSet::new();
        for (_, _, client) in late {
            if done.insert(client) {
                self.evict(now, client);
            }
        }
    }

    /// I/O from `client` under a lock already called back refreshes its
    /// deadline (Lustre's `ldlm_resource_prolong`): a holder busy flushing a
    /// large extent is not evicted for being slow.
    pub fn prolong(&mut self, now: Instant, client: ClientId, object: ObjectId, extent: Extent) {
        let deadline = now + self.config.callback_timeout;
        // Only called-back locks have a deadline: look at them when they
        // are few, at the locks overlapping the I/O otherwise.
        let candidates: Vec<LockHandle> = if self.called_back.len() <= 8 {
            self.called_back.iter().copied().collect()
        } else {
            let Some(res) = self.resources.get(&object) else { return };
            res.granted.overlapping_unordered(&extent).map(|(_, handle)| handle).collect()
        };
        for handle in candidates {
            let lock = self.locks.get_mut(&handle).expect("a called-back or granted lock exists");
            if lock.client != client || lock.object != object || !lock.extent.overlaps(&extent) {
                continue;
            }
            if let Some(d) = lock.callback_deadline.as_mut().filter(|d| **d < deadline) {
                // Moved to the back of the list, as Lustre's refresh does.
                *d = deadline;
                lock.deadline_seq = self.deadline_seq_next;
                self.deadline_seq_next += 1;
            }
        }
    }

    /// Drop every lock of `client`, refuse it until it reconnects.
    pub fn evict(&mut self, now: Instant, client: ClientId) {
        let mut handles: Vec<LockHandle> =
            self.locks.iter().filter(|(_, l)| l.client == client).map(|(h, _)| *h).collect();
        handles.sort_unstable();
        let mut objects = BTreeSet::new();
        for handle in handles {
            objects.insert(self.remove_lock(handle));
        }
        for object in &objects {
            self.resource(*object).counters.evictions += 1;
        }
        self.evicted.insert(client);
        debug!(%client, "evicted");
        self.event(LockEvent::Evicted { client });
        self.transmit(client, ToClient::Evicted);
        for object in objects {
            self.reprocess(now, object);
            self.prune(object);
        }
    }

    // ----- outputs ------------------------------------------------------

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<(ClientId, ToClient)> {
        self.transmits.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<LockEvent> {
        self.events.as_mut()?.pop_front()
    }

    /// The earliest callback deadline, if any lock has been called back.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.called_back.iter().filter_map(|h| self.locks[h].callback_deadline).min()
    }

    // ----- queries ------------------------------------------------------

    pub fn is_evicted(&self, client: ClientId) -> bool {
        self.evicted.contains(&client)
    }

    /// Counters summed over the namespace, since the server started.
    pub fn counters_total(&self) -> LockCounters {
        let mut total = self.retired;
        for res in self.resources.values() {
            total += res.counters;
        }
        total
    }

    /// Granted locks: `(handle, client, object, mode, extent)`, in handle order.
    pub fn granted_locks(&self) -> impl Iterator<Item = (LockHandle, ClientId, ObjectId, LockMode, Extent)> + '_ {
        let mut granted: Vec<_> = self
            .locks
            .iter()
            .filter(|(_, l)| l.state == LockState::Granted)
            .map(|(h, l)| (*h, l.client, l.object, l.request.mode, l.extent))
            .collect();
        granted.sort_unstable_by_key(|g| g.0);
        granted.into_iter()
    }

    /// The granted lock `handle` of `client`: `(object, mode, extent,
    /// called back)`; `None` for a lock the server does not hold for that
    /// client, or one still waiting.
    pub fn granted_lock(&self, client: ClientId, handle: LockHandle) -> Option<(ObjectId, LockMode, Extent, bool)> {
        let lock = self.locks.get(&handle)?;
        (lock.client == client && lock.state == LockState::Granted).then_some((
            lock.object,
            lock.request.mode,
            lock.extent,
            lock.callback_pending,
        ))
    }

    pub fn lock_count(&self) -> usize {
        self.locks.len()
    }

    pub fn waiting_count(&self) -> usize {
        self.locks.values().filter(|l| l.state == LockState::Waiting).count()
    }

    /// Whose caches may hold data beyond the object's stored size: walk PW
    /// and GROUP locks from the top of the object down, one per client, and
    /// stop at the first lock that was not requested ahead (with
    /// `NO_EXPANSION`): that one is an active lock covering the top of the
    /// data (Lustre's `ofd_intent_cb` after LU-11670). The requester's own
    /// locks stop the walk but are not returned.
    pub fn glimpse_targets(&self, object: ObjectId, requester: ClientId) -> Vec<(ClientId, LockHandle)> {
        let Some(res) = self.resources.get(&object) else { return Vec::new() };
        // The sort orders every lock (the handle breaks ties), so the walk
        // of the index may be in any order.
        let granted = res.granted.overlapping_unordered(&Extent::WHOLE).map(|(_, h)| (h, &self.locks[&h]));
        let mut writers: Vec<(LockHandle, &Lock)> = granted.filter(|(_, l)| l.request.mode.is_write()).collect();
        writers.sort_by_key(|(h, l)| (std::cmp::Reverse(l.extent.end), std::cmp::Reverse(l.extent.start), *h));
        let mut seen = BTreeSet::new();
        let mut targets = Vec::new();
        for (handle, lock) in writers {
            if lock.client != requester && seen.insert(lock.client) {
                targets.push((lock.client, handle));
            }
            if !lock.request.flags.no_expand {
                break;
            }
        }
        targets
    }

    /// Panics if a protocol invariant is broken.
    pub fn check_invariants(&self) {
        let mut queued = 0;
        for (object, res) in &self.resources {
            assert!(res.granted.len() + res.waiting.len() > 0, "resource of {object:?} left with no lock");
            let granted = res.granted.in_order();
            for (i, a) in granted.iter().enumerate() {
                let la = &self.locks[a];
                assert_eq!(la.state, LockState::Granted);
                let entry = res.granted.entry(la.extent.start, la.granted_seq);
                assert_eq!(entry, Some((la.extent.end, *a, la.request.mode)), "index entry of lock {a:?}");
                assert_eq!(la.object, *object);
                assert!(la.extent.contains(&la.request.extent), "lock {a:?} smaller than its request");
                if la.request.flags.speculative || la.request.flags.no_expand {
                    let aligned = policy::expand(
                        &PolicyRequest {
                            client: la.client,
                            mode: la.request.mode,
                            extent: la.request.extent,
                            no_expand: true,
                        },
                        &[],
                        &[],
                    );
                    assert_eq!(la.extent, aligned, "lock {a:?} requested without expansion was expanded");
                }
                for b in &granted[i + 1..] {
                    let lb = &self.locks[b];
                    assert!(
                        !lb.conflicts_with(la.request.mode, &la.extent),
                        "conflicting granted locks {a:?} {} {} and {b:?} {} {}",
                        la.request.mode,
                        la.extent,
                        lb.request.mode,
                        lb.extent
                    );
                }
            }
            for w in &res.waiting {
                let lw = &self.locks[w];
                assert_eq!(lw.state, LockState::Waiting);
                assert!(!lw.request.flags.speculative, "speculative lock {w:?} waits");
                assert!(lw.callback_deadline.is_none());
            }
            queued += res.granted.len() + res.waiting.len();
            let groups = granted.iter().chain(&res.waiting).filter(|h| self.locks[h].request.mode.is_group()).count();
            assert_eq!(groups, res.group_locks, "group lock count of {object:?}");
        }
        assert_eq!(queued, self.locks.len(), "a lock is in no queue or in two");
        let mut per_client: FxHashMap<ClientId, usize> = FxHashMap::default();
        for lock in self.locks.values() {
            *per_client.entry(lock.client).or_insert(0) += 1;
        }
        assert_eq!(per_client, self.per_client, "locks miscounted per client");
        assert!(per_client.values().all(|n| *n <= LOCKS_PER_CLIENT_MAX), "a client's locks past its bound");
        for client in &self.at_bound {
            assert_eq!(per_client.get(client), Some(&LOCKS_PER_CLIENT_MAX), "{client} warned of a bound it is under");
        }
        for (handle, lock) in &self.locks {
            assert!(handle.0 > 0 && handle.0 < self.handle_next, "lock {handle:?} not from this server's handles");
            assert_eq!(check_request(&lock.request), Ok(()), "lock {handle:?} from a malformed request");
            assert!(!self.evicted.contains(&lock.client), "lock {handle:?} of evicted {}", lock.client);
        }
        let called_back: BTreeSet<LockHandle> =
            self.locks.iter().filter(|(_, l)| l.callback_deadline.is_some()).map(|(h, _)| *h).collect();
        assert_eq!(called_back, self.called_back, "called-back index");
        let mut seqs: Vec<u64> = self.called_back.iter().map(|h| self.locks[h].deadline_seq).collect();
        seqs.sort_unstable();
        seqs.dedup();
        assert_eq!(seqs.len(), self.called_back.len(), "two called-back locks share a deadline order");
        assert!(seqs.last().is_none_or(|&last| last < self.deadline_seq_next), "a deadline order not yet given");
        for (object, res) in &self.resources {
            // The waiters of one gid stand side by side (the GROUP queueing
            // rule inserts each next to the first of its gid).
            let mut closed = BTreeSet::new();
            let mut previous = None;
            for h in &res.waiting {
                let mode = self.locks[h].request.mode;
                if previous != Some(mode) {
                    if let Some(LockMode::Group(gid)) = previous {
                        closed.insert(gid);
                    }
                    if let LockMode::Group(gid) = mode {
                        assert!(!closed.contains(&gid), "waiters of {gid:?} apart on {object:?}");
                    }
                }
                previous = Some(mode);
            }
        }
    }

    // ----- internals ----------------------------------------------------

    fn resource(&mut self, object: ObjectId) -> &mut Resource {
        self.resources.entry(object).or_default()
    }

    /// Drops `object`'s resource if no lock, granted or waiting, is left
    /// in it, keeping its counters in the totals.
    fn prune(&mut self, object: ObjectId) {
        if self.resources.get(&object).is_some_and(|res| res.granted.len() == 0 && res.waiting.is_empty()) {
            let res = self.resources.remove(&object).expect("present");
            self.retired += res.counters;
        }
    }

    fn transmit(&mut self, client: ClientId, message: ToClient) {
        trace!(%client, ?message, "send");
        self.transmits.push_back((client, message));
    }

    fn event(&mut self, event: LockEvent) {
        if let Some(events) = self.events.as_mut() {
            events.push_back(event);
        }
    }

    fn has_group_lock(&self, object: ObjectId) -> bool {
        self.resources.get(&object).is_some_and(|r| r.group_locks > 0)
    }

    fn refuse(&mut self, client: ClientId, xid: Xid, object: ObjectId, extent: Extent, reply: EnqueueReply) {
        match self.resources.get_mut(&object) {
            Some(res) => res.counters.refusals += 1,
            None => self.retired.refusals += 1,
        }
        self.event(LockEvent::Refused { client, object, extent });
        self.transmit(client, ToClient::Enqueue { xid, reply });
    }

    /// What stands in the way of `lock`: conflicting granted locks and
    /// conflicting waiters ahead of it (a new request comes after every
    /// waiter).
    fn blockers(&self, object: ObjectId, lock: &Lock) -> Blockers {
        let mut b = Blockers::default();
        let Some(res) = self.resources.get(&object) else { return b };
        let (mode, extent) = (lock.request.mode, lock.request.extent);
        // GROUP locks cover the whole object, so every lock that can
        // conflict overlaps the extent. Only the holders to call back need
        // grant order (it is the order of the callbacks), so only they are
        // sorted.
        let mut holders: SmallVec<[(u64, LockHandle); 4]> = SmallVec::new();
        for (seq, h) in res.granted.overlapping_unordered(&extent) {
            let other = &self.locks[&h];
            if mode.is_group() && other.request.mode == mode {
                b.same_group_granted = true;
            }
            if other.conflicts_with(mode, &extent) {
                b.conflicts += 1;
                if !other.request.mode.is_group() {
                    holders.push((seq, h));
                }
            }
        }
        holders.sort_unstable_by_key(|&(seq, _)| seq);
        b.granted = holders.into_iter().map(|(_, h)| h).collect();
        for h in &res.waiting {
            let other = &self.locks[h];
            if other.conflicts_with(mode, &extent) {
                b.conflicts += 1;
                if !other.request.mode.is_group() {
                    b.waiting.push(*h);
                }
            }
        }
        b
    }

    /// Whether a granted lock keeps `lock`, the head of the waiting queue
    /// (no waiter is ahead of it), waiting: what [`LockServer::blockers`]
    /// would decide of it, without listing the blockers, and stopping at the
    /// first one (reprocessing asks it after every cancel).
    fn is_blocked(&self, object: ObjectId, lock: &Lock) -> bool {
        let Some(res) = self.resources.get(&object) else { return false };
        let (mode, extent) = (lock.request.mode, lock.request.extent);
        let mut granted = res.granted.overlapping_unordered(&extent).map(|(_, h)| &self.locks[&h]);
        if mode.is_group() {
            // A granted GROUP lock of its gid lets it through, whatever else
            // conflicts: every overlapping lock must be seen first.
            let mut conflicts = false;
            for other in granted {
                if other.request.mode == mode {
                    return false;
                }
                conflicts |= other.conflicts_with(mode, &extent);
            }
            conflicts
        } else {
            granted.any(|other| other.conflicts_with(mode, &extent))
        }
    }

    /// Expand and grant a lock that is in no queue or in the waiting queue.
    fn grant(&mut self, handle: LockHandle) -> Extent {
        let lock = &self.locks[&handle];
        let object = lock.object;
        let flags = lock.request.flags;
        let req = PolicyRequest {
            client: lock.client,
            mode: lock.request.mode,
            extent: lock.request.extent,
            no_expand: flags.no_expand || flags.speculative,
        };
        let extent = if req.no_expand || req.extent == Extent::WHOLE {
            policy::expand(&req, &[], &[]) // the other locks cannot matter
        } else {
            let res = &self.resources[&object];
            let waiting: SmallVec<[PolicyLock; 8]> =
                res.waiting.iter().filter(|h| **h != handle).map(|h| self.locks[h].policy_view()).collect();
            let view = res.granted.view(&req);
            #[cfg(debug_assertions)]
            {
                let granted: Vec<PolicyLock> =
                    res.granted.in_order().iter().map(|h| self.locks[h].policy_view()).collect();
                assert_eq!(view, policy::GrantedView::of(&req, &granted), "granted index disagrees with a walk");
            }
            policy::expand_view(&req, view, &waiting)
        };
        let (client, mode) = (lock.client, lock.request.mode);
        let res = self.resources.entry(object).or_default();
        res.waiting.retain(|h| *h != handle);
        let seq = res.granted.insert(handle, extent, lock.request.mode);
        let lock = self.locks.get_mut(&handle).expect("lock exists");
        lock.extent = extent;
        lock.state = LockState::Granted;
        lock.granted_seq = seq;
        let res = self.resource(object);
        res.counters.grants += 1;
        self.event(LockEvent::Granted { client, lock: handle, object, mode, extent });
        extent
    }

    fn send_blocking(&mut self, now: Instant, handle: LockHandle) {
        let deadline = now + self.config.callback_timeout;
        let lock = self.locks.get_mut(&handle).expect("holder exists");
        debug_assert_eq!(lock.state, LockState::Granted);
        lock.callback_pending = true;
        if lock.callback_deadline.is_some() {
            return; // called back already
        }
        lock.callback_deadline = Some(deadline);
        lock.deadline_seq = self.deadline_seq_next;
        self.deadline_seq_next += 1;
        self.called_back.insert(handle);
        let (client, object) = (lock.client, lock.object);
        self.resource(object).counters.callbacks += 1;
        self.event(LockEvent::BlockingCallback { client, lock: handle });
        self.transmit(client, ToClient::Blocking { lock: handle });
    }

    /// Whether `client` holds its most locks (warned once, until it gives
    /// some back).
    fn is_at_bound(&mut self, client: ClientId) -> bool {
        if self.per_client.get(&client).copied().unwrap_or(0) < LOCKS_PER_CLIENT_MAX {
            return false;
        }
        if self.at_bound.insert(client) {
            tracing::warn!(
                %client,
                "a client holds {LOCKS_PER_CLIENT_MAX} locks on this OST (LOCKS_PER_CLIENT_MAX): its further requests \
                 are refused until it gives some back"
            );
        }
        true
    }

    fn insert_lock(&mut self, handle: LockHandle, lock: Lock) {
        *self.per_client.entry(lock.client).or_insert(0) += 1;
        self.locks.insert(handle, lock);
    }

    fn remove_lock(&mut self, handle: LockHandle) -> ObjectId {
        let lock = self.locks.remove(&handle).expect("lock exists");
        let held = self.per_client.get_mut(&lock.client).expect("counted");
        *held -= 1;
        let left = *held;
        if left == 0 {
            self.per_client.remove(&lock.client);
        }
        if left < LOCKS_PER_CLIENT_MAX {
            self.at_bound.remove(&lock.client);
        }
        if self.config.resend {
            self.by_xid.remove(&(lock.client, lock.xid));
        }
        let res = self.resources.get_mut(&lock.object).expect("resource of a lock exists");
        match lock.state {
            LockState::Granted => res.granted.remove(lock.granted_seq, lock.extent),
            LockState::Waiting => res.waiting.retain(|h| *h != handle),
        }
        res.group_locks -= usize::from(lock.request.mode.is_group());
        self.called_back.remove(&handle);
        lock.object
    }

    /// Grant the waiters in queue order, up to the first one a granted lock
    /// still blocks (every waiter ahead of it is granted): those behind it
    /// wait too, even if nothing blocks them, so that a waiter is never
    /// overtaken (Lustre's `ldlm_reprocess_queue` stops its rescan there).
    /// Then make sure whatever still blocks a waiter has been called back.
    fn reprocess(&mut self, now: Instant, object: ObjectId) {
        // A grant takes the head of the queue off it: the next waiter to
        // look at is always the first.
        while let Some(&handle) = self.resources.get(&object).and_then(|r| r.waiting.first()) {
            if self.is_blocked(object, &self.locks[&handle]) {
                break;
            }
            let extent = self.grant(handle);
            let lock = &self.locks[&handle];
            let (client, pending, group) = (lock.client, lock.callback_pending, lock.request.mode.is_group());
            let proof = self.proof_of(handle);
            self.transmit(client, ToClient::Completion { lock: handle, extent, callback_pending: pending, proof });
            if pending && !group {
                self.locks.get_mut(&handle).expect("lock exists").callback_pending = false;
                self.send_blocking(now, handle);
            }
        }
        self.call_back_blockers(now, object);
    }

    fn call_back_blockers(&mut self, now: Instant, object: ObjectId) {
        let Some(res) = self.resources.get(&object) else { return };
        // The set orders the holders, so the granted locks are walked in no
        // particular order (what `blockers` lists them in does not matter).
        let mut holders = BTreeSet::new();
        for h in &res.waiting {
            let (mode, extent) = (self.locks[h].request.mode, self.locks[h].request.extent);
            holders.extend(res.granted.overlapping_unordered(&extent).map(|(_, g)| g).filter(|g| {
                let other = &self.locks[g];
                other.conflicts_with(mode, &extent) && !other.request.mode.is_group()
            }));
        }
        for holder in holders {
            self.send_blocking(now, holder);
        }
    }
}

/// What a peer may send: `start <= end`, both edges on page boundaries
/// (Lustre's client rounds every request so; the policy relies on it).
fn check_request(request: &LockRequest) -> Result<(), &'static str> {
    let e = request.extent;
    if e.start > e.end {
        return Err("extent start after its end");
    }
    if !e.start.is_multiple_of(PAGE_SIZE) || (e.end != EOF && !(e.end + 1).is_multiple_of(PAGE_SIZE)) {
        return Err("extent not on page boundaries");
    }
    if request.mode.is_group() && e != Extent::WHOLE {
        return Err("GROUP locks cover the whole object");
    }
    if request.mode == LockMode::Group(super::GroupId(0)) {
        // Lustre's `ll_get_grouplock` refuses gid 0 (EINVAL): it is no group.
        return Err("a GROUP lock's gid is not 0");
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Blockers {
    conflicts: usize,
    /// Conflicting granted locks that take callbacks (not GROUP).
    granted: SmallVec<[LockHandle; 4]>,
    /// Conflicting waiters ahead (not GROUP).
    waiting: SmallVec<[LockHandle; 4]>,
    /// A GROUP lock of the requested gid is granted: grant at once.
    same_group_granted: bool,
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
