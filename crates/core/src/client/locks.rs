//! The client's lock cache: what locks this client holds or is waiting for,
//! per OST object, and which of them may serve a new request.
//!
//! A cached lock serves a request without any RPC when its extent fully
//! contains the request and its mode serves it (PW serves PR), unless it has
//! been called back (Lustre's `lock_matches`). Unused granted locks sit in an
//! LRU bounded by count and age; callbacks, the LRU and group unlock all end
//! in the same cancel path (flush, drop pages, send the cancel), which the
//! client drives.
//!
//! Locks are named here by a client-local [`LocalLock`] id, because the
//! server's handle is unknown until the enqueue reply arrives.
//!
//! A lock's life in the cache: inserted when its enqueue is sent
//! ([`LockCache::insert`]); marked returning when called back or given back
//! ([`LockCache::note_returning`], [`LockCache::begin_cancel`]); taken out
//! when its cancel is sent ([`LockCache::cancelled`]), or when it is lost
//! or refused ([`LockCache::remove`]). Ids are handed out in order and
//! never reused.
//!
//! Invariants ([`LockCache::check_invariants`]):
//! * every lock called back or being cancelled is in the returning set;
//! * the extent index, the handle index and the LRU agree with the locks
//!   (the LRU holds exactly the idle ones, at their last use);
//! * no entry is kept after its cancel: the locks held are exactly those
//!   inserted and not yet taken out, so a lock the OST has forgotten never
//!   serves this client again.

use crate::extent::Extent;
use crate::ldlm::proof::LockProof;
use crate::ldlm::{EnqueueFlags, LockMode};
use crate::units::{Instant, LockHandle, ObjectKey, OstIndex, Xid};
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocalLock(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientLockState {
    /// Enqueue sent, no reply yet.
    Enqueuing {
        xid: Xid,
    },
    /// Queued on the server behind conflicting locks.
    Waiting,
    Granted,
    /// Given back: flushing and dropping pages, then the cancel is sent.
    Cancelling,
}

#[derive(Clone, Debug)]
pub struct ClientLock {
    pub key: ObjectKey,
    pub mode: LockMode,
    pub flags: EnqueueFlags,
    /// What was asked for.
    pub requested: Extent,
    /// What the server granted (the request until then). Changed only by
    /// [`LockCache::set_extent`], which keeps the extent index.
    pub extent: Extent,
    pub handle: Option<LockHandle>,
    /// The OST's proof of the grant, replayed with the lock after the OST
    /// restarts (see [`crate::ldlm::proof`]).
    pub proof: LockProof,
    pub state: ClientLockState,
    /// I/O operations currently using the lock (Lustre's reader/writer refs).
    pub users: u32,
    /// The server wants it back: no new matches; cancel once unused.
    pub callback_pending: bool,
    /// When last granted or used; changed only by [`LockCache::touch`].
    pub last_used: Instant,
    /// Whether the LRU lists it (at `last_used`); kept by the cache, so
    /// that a settle that changes nothing costs no search of the LRU.
    pub(super) in_lru: bool,
}

impl ClientLock {
    pub fn is_granted(&self) -> bool {
        self.state == ClientLockState::Granted
    }
    pub fn is_pending(&self) -> bool {
        matches!(self.state, ClientLockState::Enqueuing { .. } | ClientLockState::Waiting)
    }
    /// Granted, used by no operation, not called back and not a group lock:
    /// a lock the LRU may cancel.
    pub fn is_idle(&self) -> bool {
        self.is_granted() && self.users == 0 && !self.callback_pending && !self.mode.is_group()
    }
}

/// One object's locks by extent, so that matching a request or asking what
/// covers a page looks at the locks near it, not at every lock of the object
/// (with lockahead a client may hold thousands per object).
#[derive(Debug, Default)]
struct ExtentIndex {
    /// `(start, lock) -> end`.
    by_start: BTreeMap<(u64, LocalLock), u64>,
    /// How many extents span each `end - start`: the widest tells how far
    /// before a query an overlapping extent may begin.
    spans: BTreeMap<u64, usize>,
}

impl ExtentIndex {
    fn insert(&mut self, id: LocalLock, extent: Extent) {
        self.by_start.insert((extent.start, id), extent.end);
        *self.spans.entry(extent.end - extent.start).or_default() += 1;
    }

    fn remove(&mut self, id: LocalLock, extent: Extent) {
        self.by_start.remove(&(extent.start, id));
        let span = extent.end - extent.start;
        match self.spans.get_mut(&span) {
            Some(n) if *n > 1 => *n -= 1,
            _ => {
                self.spans.remove(&span);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }

    /// The locks whose extent overlaps `extent`, in no particular order.
    fn overlapping(&self, extent: Extent) -> impl Iterator<Item = (LocalLock, Extent)> + '_ {
        let widest = self.spans.last_key_value().map_or(0, |(span, _)| *span);
        let from = extent.start.saturating_sub(widest);
        let candidates = self.by_start.range((from, LocalLock(0))..=(extent.end, LocalLock(u64::MAX)));
        candidates.filter(move |(_, &end)| end >= extent.start).map(|(&(start, id), &end)| (id, Extent { start, end }))
    }
}

#[derive(Debug, Default)]
pub struct LockCache {
    /// Hashed: looked up at every step; walks in id order sort first.
    locks: FxHashMap<LocalLock, ClientLock>,
    /// The locks of each object by extent: matching looks at one object's
    /// locks only, and at those near the request.
    by_key: BTreeMap<ObjectKey, ExtentIndex>,
    /// Enqueues awaiting their reply.
    by_xid: FxHashMap<Xid, LocalLock>,
    /// Locks called back or being cancelled: what the cancel and writeback
    /// pumps look at, instead of every lock.
    returning: BTreeSet<LocalLock>,
    /// Server handles are unique per OST only.
    by_handle: FxHashMap<(OstIndex, LockHandle), LocalLock>,
    /// The LRU: the unused granted locks (see [`ClientLock::is_idle`]), by
    /// when they were last used, so that the oldest is the first entry.
    /// Kept by [`LockCache::settle`], which every change of what `is_idle`
    /// reads goes through (`check_invariants` verifies it).
    idle: BTreeSet<(Instant, LocalLock)>,
    next: u64,
    /// Locks taken out so far (cancelled, lost or refused): with `next`,
    /// how many the cache must hold.
    gone: u64,
}

impl LockCache {
    pub fn insert(&mut self, mut lock: ClientLock) -> LocalLock {
        let id = LocalLock(self.next);
        self.next += 1;
        if let Some(h) = lock.handle {
            self.by_handle.insert((lock.key.ost, h), id);
        }
        if let ClientLockState::Enqueuing { xid } = lock.state {
            self.by_xid.insert(xid, id);
        }
        self.by_key.entry(lock.key).or_default().insert(id, lock.extent);
        lock.in_lru = lock.is_idle();
        if lock.in_lru {
            self.idle.insert((lock.last_used, id));
        }
        self.locks.insert(id, lock);
        id
    }

    pub fn get(&self, id: LocalLock) -> Option<&ClientLock> {
        self.locks.get(&id)
    }

    pub fn get_mut(&mut self, id: LocalLock) -> Option<&mut ClientLock> {
        self.locks.get_mut(&id)
    }

    pub fn by_handle(&self, ost: OstIndex, handle: LockHandle) -> Option<LocalLock> {
        self.by_handle.get(&(ost, handle)).copied()
    }

    /// The lock enqueue `xid` is for, while its reply is awaited.
    pub fn enqueued(&self, xid: Xid) -> Option<LocalLock> {
        self.by_xid.get(&xid).copied()
    }

    /// The lock an enqueue reply is for; the reply comes once, so the entry goes.
    pub fn take_xid(&mut self, xid: Xid) -> Option<LocalLock> {
        self.by_xid.remove(&xid)
    }

    pub fn set_handle(&mut self, id: LocalLock, handle: LockHandle) {
        let lock = self.locks.get_mut(&id).expect("lock exists");
        debug_assert!(lock.handle.is_none());
        lock.handle = Some(handle);
        self.by_handle.insert((lock.key.ost, handle), id);
    }

    /// A lock the OST forgot (it restarted while the lock waited) is asked
    /// for again as enqueue `xid`: it has no handle until the answer.
    pub fn requeue(&mut self, id: LocalLock, xid: Xid) {
        let lock = self.locks.get_mut(&id).expect("lock exists");
        debug_assert!(lock.is_pending(), "only a lock not yet granted is asked for again");
        if let Some(h) = lock.handle.take() {
            self.by_handle.remove(&(lock.key.ost, h));
        }
        if let ClientLockState::Enqueuing { xid: old } = lock.state {
            self.by_xid.remove(&old);
        }
        lock.state = ClientLockState::Enqueuing { xid };
        self.by_xid.insert(xid, id);
    }

    /// Start giving lock `id` back, if it is granted (idempotent): it
    /// serves no new request, and its cancel waits for its users and its
    /// dirty bytes.
    pub fn begin_cancel(&mut self, id: LocalLock) {
        if let Some(lock) = self.locks.get_mut(&id) {
            if lock.is_granted() {
                lock.state = ClientLockState::Cancelling;
                self.note_returning(id);
            }
        }
    }

    /// Lock `id`'s cancel is being sent: it is taken out (returned), and
    /// never serves this client again.
    pub fn cancelled(&mut self, id: LocalLock) -> ClientLock {
        let lock = self.locks.get(&id).expect("a cancelled lock is held");
        assert_eq!(lock.state, ClientLockState::Cancelling, "lock cache: {id:?} cancelled without being given back");
        assert_eq!(lock.users, 0, "lock cache: {id:?} cancelled while in use");
        assert!(lock.handle.is_some(), "lock cache: {id:?} cancelled without a server handle");
        if crate::planted::active(crate::planted::Bug::KeepCancelledLock) {
            let lock = lock.clone();
            self.returning.remove(&id);
            self.gone += 1;
            return lock;
        }
        let lock = self.remove(id).expect("held");
        debug_assert!(!self.returning.contains(&id) && self.by_handle(lock.key.ost, lock.handle.unwrap()).is_none());
        lock
    }

    pub fn remove(&mut self, id: LocalLock) -> Option<ClientLock> {
        let lock = self.locks.remove(&id)?;
        self.gone += 1;
        if let Some(h) = lock.handle {
            self.by_handle.remove(&(lock.key.ost, h));
        }
        if let ClientLockState::Enqueuing { xid } = lock.state {
            self.by_xid.remove(&xid);
        }
        self.returning.remove(&id);
        if lock.in_lru {
            self.idle.remove(&(lock.last_used, id));
        }
        if let Some(index) = self.by_key.get_mut(&lock.key) {
            index.remove(id, lock.extent);
            if index.is_empty() {
                self.by_key.remove(&lock.key);
            }
        }
        Some(lock)
    }

    /// Lock `id` was granted or used at `now` (if it still exists).
    pub fn touch(&mut self, id: LocalLock, now: Instant) {
        if let Some(lock) = self.locks.get_mut(&id) {
            if lock.last_used != now {
                if lock.in_lru {
                    self.idle.remove(&(lock.last_used, id));
                    lock.in_lru = false;
                }
                lock.last_used = now;
            }
            self.settle(id);
        }
    }

    /// Put lock `id` in the LRU or take it out, as [`ClientLock::is_idle`]
    /// now says: call after changing its state, users or callback flag.
    pub fn settle(&mut self, id: LocalLock) {
        if let Some(lock) = self.locks.get_mut(&id) {
            let idle = lock.is_idle();
            if idle == lock.in_lru {
                return;
            }
            lock.in_lru = idle;
            let entry = (lock.last_used, id);
            if idle {
                self.idle.insert(entry);
            } else {
                self.idle.remove(&entry);
            }
        }
    }

    /// The server granted `extent` for lock `id` (its request until then).
    pub fn set_extent(&mut self, id: LocalLock, extent: Extent) {
        let lock = self.locks.get_mut(&id).expect("lock exists");
        let index = self.by_key.get_mut(&lock.key).expect("every lock is indexed");
        index.remove(id, lock.extent);
        index.insert(id, extent);
        lock.extent = extent;
    }

    /// The locks of `key` whose extent overlaps `extent`, in no particular
    /// order (for questions whose answer does not depend on it).
    fn overlapping_unordered(&self, key: ObjectKey, extent: Extent) -> impl Iterator<Item = &ClientLock> {
        let index = self.by_key.get(&key);
        index.into_iter().flat_map(move |index| index.overlapping(extent)).map(|(id, _)| &self.locks[&id])
    }

    /// The extents of the granted (or cancelling) locks of `key` other than
    /// `except` that overlap `extent`: what keeps a page cached when
    /// `except` goes.
    pub fn covering_others(&self, key: ObjectKey, extent: Extent, except: LocalLock) -> Vec<Extent> {
        let held = |l: &ClientLock| matches!(l.state, ClientLockState::Granted | ClientLockState::Cancelling);
        let others = self.by_key.get(&key).into_iter().flat_map(|index| index.overlapping(extent));
        others
            .filter(|(id, _)| *id != except)
            .map(|(id, _)| &self.locks[&id])
            .filter(|l| held(l))
            .map(|l| l.extent)
            .collect()
    }

    /// Record that `id` was called back or is being cancelled (after setting
    /// its `callback_pending` or its `Cancelling` state).
    pub fn note_returning(&mut self, id: LocalLock) {
        debug_assert!(self
            .locks
            .get(&id)
            .is_some_and(|l| l.callback_pending || l.state == ClientLockState::Cancelling));
        self.returning.insert(id);
        self.settle(id);
    }

    /// Locks called back or being cancelled.
    pub fn returning(&self) -> impl Iterator<Item = (LocalLock, &ClientLock)> {
        self.returning.iter().map(|id| (*id, &self.locks[id]))
    }

    /// Panics if an entry outlives its cancel, the `returning` set misses a
    /// lock that belongs in it, or an index disagrees with the locks.
    pub fn check_invariants(&self) {
        let held = self.next - self.gone;
        assert_eq!(
            self.locks.len() as u64,
            held,
            "lock cache: {} entries for {held} locks not yet taken out (an entry kept after its cancel)",
            self.locks.len()
        );
        for (id, l) in &self.locks {
            if l.callback_pending || l.state == ClientLockState::Cancelling {
                assert!(self.returning.contains(id), "lock {id:?} called back but not tracked");
            }
            let indexed = self.by_key.get(&l.key).and_then(|index| index.by_start.get(&(l.extent.start, *id)));
            assert_eq!(indexed, Some(&l.extent.end), "lock {id:?} indexed at another extent");
            let listed = self.idle.contains(&(l.last_used, *id));
            assert_eq!(listed, l.is_idle(), "lock {id:?} in the LRU: {listed}, idle: {}", l.is_idle());
            assert_eq!(listed, l.in_lru, "lock {id:?} in the LRU: {listed}, flagged: {}", l.in_lru);
        }
        for (t, id) in &self.idle {
            assert_eq!(self.locks.get(id).map(|l| l.last_used), Some(*t), "LRU entry {id:?} stale");
        }
        let indexed: usize = self.by_key.values().map(|index| index.by_start.len()).sum();
        assert_eq!(indexed, self.locks.len(), "extent index holds gone locks");
        for (&(ost, handle), id) in &self.by_handle {
            let lock = self.locks.get(id);
            assert!(
                lock.is_some_and(|l| l.key.ost == ost && l.handle == Some(handle)),
                "lock cache: handle {handle:?} of {ost} names {id:?}, which does not hold it"
            );
        }
        for id in &self.returning {
            assert!(self.locks.contains_key(id), "lock cache: returning {id:?} is gone");
        }
    }

    /// Every lock, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (LocalLock, &ClientLock)> {
        let mut ids: Vec<LocalLock> = self.locks.keys().copied().collect();
        ids.sort_unstable();
        ids.into_iter().map(|id| (id, &self.locks[&id]))
    }

    /// Whether any lock satisfies `f` (no order needed).
    pub fn any(&self, f: impl Fn(&ClientLock) -> bool) -> bool {
        self.locks.values().any(f)
    }

    pub fn len(&self) -> usize {
        self.locks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// The oldest (lowest id) lock of `key` overlapping `extent` that
    /// `fits`: found without sorting, so the answer is the same as a walk in
    /// id order.
    fn first_fitting(&self, key: ObjectKey, extent: Extent, fits: impl Fn(&ClientLock) -> bool) -> Option<LocalLock> {
        let index = self.by_key.get(&key)?;
        index.overlapping(extent).map(|(id, _)| id).filter(|id| fits(&self.locks[id])).min()
    }

    /// A granted lock that serves `mode` over all of `extent`, not called back.
    pub fn matching(&self, key: ObjectKey, mode: LockMode, extent: Extent) -> Option<LocalLock> {
        self.first_fitting(key, extent, |l| {
            l.is_granted() && !l.callback_pending && l.mode.serves(mode) && l.extent.contains(&extent)
        })
    }

    /// A lock still being enqueued whose request will serve `mode` over `extent`.
    pub fn pending_covering(&self, key: ObjectKey, mode: LockMode, extent: Extent) -> Option<LocalLock> {
        // A pending lock's extent is its request: the index finds it.
        self.first_fitting(key, extent, |l| l.is_pending() && l.mode.serves(mode) && l.requested.contains(&extent))
    }

    /// Whether a lock of `key` is being enqueued for exactly `extent` in
    /// `mode` (a lockahead request already sent for it).
    pub fn pending_exactly(&self, key: ObjectKey, mode: LockMode, extent: Extent) -> bool {
        self.overlapping_unordered(key, extent).any(|l| l.is_pending() && l.mode == mode && l.requested == extent)
    }

    /// Whether a granted (or cancelling) write lock covers `offset` of `key`.
    pub fn write_covered(&self, key: ObjectKey, offset: u64) -> bool {
        self.overlapping_unordered(key, Extent::new(offset, offset))
            .any(|l| l.mode.is_write() && matches!(l.state, ClientLockState::Granted | ClientLockState::Cancelling))
    }

    /// The furthest end of the granted (or cancelling) write locks of
    /// `key` that cover `offset`; `None` if none does. Lets a check of a
    /// long range skip over each lock's extent at once.
    pub fn write_covered_to(&self, key: ObjectKey, offset: u64) -> Option<u64> {
        self.overlapping_unordered(key, Extent::new(offset, offset))
            .filter(|l| l.mode.is_write() && matches!(l.state, ClientLockState::Granted | ClientLockState::Cancelling))
            .map(|l| l.extent.end)
            .max()
    }

    /// Unused granted locks, oldest first.
    pub fn unused_by_age(&self) -> Vec<(LocalLock, Instant)> {
        self.unused().collect()
    }

    /// Unused granted locks last used at or before `when`, oldest first
    /// (the LRU is in use order, so the walk stops at the first younger one).
    pub fn unused_since(&self, when: Instant) -> Vec<LocalLock> {
        self.unused().take_while(|&(_, t)| t <= when).map(|(id, _)| id).collect()
    }

    /// When the least recently used unused lock was last used.
    pub fn oldest_unused(&self) -> Option<Instant> {
        // `first` descends to one end of the tree; an iterator finds both.
        self.idle.first().map(|&(t, _)| t)
    }

    /// Unused granted locks in LRU order.
    fn unused(&self) -> impl Iterator<Item = (LocalLock, Instant)> + '_ {
        self.idle.iter().map(|&(t, id)| (id, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::ObjectId;

    fn granted_at_zero() -> ClientLock {
        ClientLock {
            key: ObjectKey { ost: OstIndex(0), object: ObjectId(1) },
            mode: LockMode::ProtectedWrite,
            flags: EnqueueFlags::default(),
            requested: Extent::new(0, 4095),
            extent: Extent::new(0, 4095),
            handle: None,
            state: ClientLockState::Granted,
            users: 0,
            callback_pending: false,
            last_used: Instant::ZERO,
            in_lru: false,
            proof: LockProof::default(),
        }
    }

    #[test]
    fn a_lock_used_at_the_instant_it_was_made_enters_the_lru() {
        // A lock starts with `last_used` at time zero: a first use at time
        // zero must still list it, and a second use at the same instant
        // changes nothing.
        let mut cache = LockCache::default();
        let id = cache.insert(granted_at_zero());
        cache.touch(id, Instant::ZERO);
        assert_eq!(cache.oldest_unused(), Some(Instant::ZERO));
        cache.touch(id, Instant::ZERO);
        cache.check_invariants();
        cache.touch(id, Instant(5));
        assert_eq!(cache.oldest_unused(), Some(Instant(5)));
        cache.check_invariants();
    }
}
