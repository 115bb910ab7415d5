//! Cluster-wide file locks: POSIX record locks (`fcntl` `F_SETLK`,
//! `F_SETLKW`, `F_GETLK`) and `flock`, granted by the MDS as Lustre's MDT
//! grants `LDLM_FLOCK` locks, so that they hold between client nodes.
//!
//! [`FlockTable`] is the lock server's state, transport-free like
//! `lanefs_mds::Mds`, and pure data: it lives with the wire types because
//! both sides run it, the MDS to grant locks and a client to keep the
//! record of what it was granted (which it replays after a restart of the
//! MDS). The network MDS calls [`FlockTable::set`] for each request and answers
//! the ones it grants later (a waiter, when the lock that blocked it goes)
//! from what [`FlockTable::unlock_owner`], [`FlockTable::cancel`] and
//! [`FlockTable::release_client`] return.
//!
//! Semantics, as Linux's and Lustre's:
//! - an owner is a client and the kernel's lock owner on it (a process's
//!   files table for `fcntl` locks, an open file description for `flock`,
//!   which is a whole-file lock); an owner's own locks never conflict with
//!   each other: a new lock replaces the owner's locks on its range
//!   (upgrade, downgrade, split), and adjacent or overlapping locks of one
//!   kind merge, so an owner holds at most one lock on any byte;
//! - two locks conflict when their ranges overlap, their owners differ and
//!   one of them is a write lock;
//! - a request is checked against granted locks only (a waiter does not
//!   hold back a new request, as in Linux); waiters are tried again in the
//!   order they came whenever locks go;
//! - a request that would wait for an owner that (through other waiters)
//!   waits for it is refused with `EDEADLK` instead of queued, as Linux's
//!   `posix_locks_deadlock` does, here across client nodes.
//!
//! Where lanefs departs: `flock` and `fcntl` locks of one file conflict
//! with each other, as on Lustre (both are flock locks of the MDT), where a
//! local Linux file system keeps them apart. Locks live in the MDS's
//! memory: a connection that ends, like an eviction, drops its client's;
//! a client that reconnects (after an MDS restart, or a lost connection)
//! asks for its locks again, as Lustre's clients replay theirs, and a
//! restarted MDS grants only such replays during its recovery grace.
//!
//! Bounds: [`LOCKS_MAX`] granted locks and [`WAITERS_MAX`] waiters over
//! all files, and shares of each so that one user, or one client node,
//! cannot take them all from everyone: [`LOCKS_PER_UID_MAX`] and
//! [`WAITERS_PER_UID_MAX`] for the uid a request names (what the process
//! that asked runs as), [`LOCKS_PER_CLIENT_MAX`] and
//! [`WAITERS_PER_CLIENT_MAX`] for the client that sent it (a client node
//! is trusted with the uids it reports, as for namespace calls; its share
//! bounds what a node that lies can take). A request past any of them is
//! refused with `ENOLCK`, naming the bound; an unlock that would split a
//! lock past them too (Linux's `F_UNLCK` also fails with `ENOLCK` when the
//! split finds no room). Where lanefs departs: Linux and Lustre bound file
//! locks only by memory (Lustre by its LDLM pools), not per user.
//!
//! Invariants (checked by [`FlockTable::check_invariants`]): granted locks
//! of different owners that overlap are both read locks; one owner's locks
//! on a file neither overlap nor touch when they are of one kind; every
//! waiter conflicts with a granted lock; the counts match the tables and
//! stay within their bounds.

use crate::Fid;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet, VecDeque};

/// Who holds a lock: a client of the MDS (its connection) and the kernel's
/// lock owner on that client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FlockOwner {
    pub client: u64,
    pub owner: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FlockKind {
    Read,
    Write,
}

/// A granted lock: bytes `start..=end` of a file (`end` = `u64::MAX` is
/// to the end of the file, however far it grows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flock {
    pub owner: FlockOwner,
    /// The process that took it, as its node numbers it (what `F_GETLK`
    /// reports).
    pub pid: u32,
    /// The user it counts against (the MDS's `LOCKS_PER_UID_MAX`).
    pub uid: u32,
    pub kind: FlockKind,
    pub start: u64,
    pub end: u64,
}

impl Flock {
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start <= end && start <= self.end
    }

    /// Whether two locks may not both be held: their ranges overlap,
    /// their owners differ and one is a write lock.
    pub fn conflicts(&self, other: &Flock) -> bool {
        self.owner != other.owner
            && self.overlaps(other.start, other.end)
            && (self.kind == FlockKind::Write || other.kind == FlockKind::Write)
    }
}

/// What a request asks: a lock (`kind` `Some`) or an unlock (`None`) of
/// `start..=end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlockRequest {
    pub file: Fid,
    pub owner: FlockOwner,
    pub pid: u32,
    /// Who asks: the uid the requesting process runs as (its share of the
    /// locks and waiters is the MDS's `LOCKS_PER_UID_MAX`, `WAITERS_PER_UID_MAX`).
    pub uid: u32,
    pub kind: Option<FlockKind>,
    pub start: u64,
    pub end: u64,
}

/// How a request went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FlockAnswer {
    Granted,
    /// `F_SETLK` on a range another owner holds (`EAGAIN`), or `F_GETLK`'s
    /// answer: the first lock in the way.
    Conflict(Flock),
    /// `F_GETLK`'s answer when nothing is in the way.
    Free,
    /// Waiting would deadlock (`EDEADLK`).
    Deadlock,
    /// The waiter was cancelled (a signal reached the process): `EINTR`.
    Interrupted,
    /// Past the MDS's `LOCKS_MAX`, `WAITERS_MAX` or a share of them (`ENOLCK`);
    /// says which, and what to do.
    NoLocks(String),
}

/// What the MDS gives with each granted lock: the range and grant number
/// it sealed, and the seal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlockSeal {
    pub start: u64,
    pub end: u64,
    /// The grant's number: later grants have larger ones.
    pub grant: u64,
    pub mac: [u8; 32],
}

/// Granted locks over all files, at most.
pub const LOCKS_MAX: usize = 1 << 16;
/// Requests waiting for a lock over all files, at most.
pub const WAITERS_MAX: usize = 4096;
/// Granted locks of one uid, over all clients and files, at most: a
/// sixteenth of [`LOCKS_MAX`], so that one user who takes all of theirs
/// leaves the rest to everyone else.
pub const LOCKS_PER_UID_MAX: usize = LOCKS_MAX / 16;
/// Granted locks of one client (an MDS connection: a mount, a program on
/// the client library), at most: a quarter of [`LOCKS_MAX`].
pub const LOCKS_PER_CLIENT_MAX: usize = LOCKS_MAX / 4;
/// Waiting requests of one uid, over all clients, at most.
pub const WAITERS_PER_UID_MAX: usize = WAITERS_MAX / 16;
/// Waiting requests of one client, at most.
pub const WAITERS_PER_CLIENT_MAX: usize = WAITERS_MAX / 4;

/// A waiting request's name, chosen by the caller (the network MDS uses
/// its connection and the request's id), unique among waiters.
pub type Ticket = (u64, u64);

/// What [`FlockTable::set`] did with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum SetOutcome {
    /// Answered now.
    Done(FlockAnswer),
    /// Queued under its ticket; answered when it is granted or cancelled.
    Queued,
}

#[derive(Debug)]
struct Waiter {
    ticket: Ticket,
    request: FlockRequest,
}

#[derive(Debug, Default)]
struct FileLocks {
    granted: Vec<Flock>,
    waiting: VecDeque<Waiter>,
}

/// How many locks or waiters each uid and each client has: entries only
/// for nonzero counts, so at most as many entries as locks or waiters.
#[derive(Debug, Default, PartialEq, Eq)]
struct Shares {
    by_uid: HashMap<u32, usize>,
    by_client: HashMap<u64, usize>,
}

impl Shares {
    fn add(&mut self, uid: u32, client: u64) {
        *self.by_uid.entry(uid).or_default() += 1;
        *self.by_client.entry(client).or_default() += 1;
    }

    fn remove(&mut self, uid: u32, client: u64) {
        fn down<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: K) {
            let count = map.get_mut(&key).expect("counted");
            *count -= 1;
            if *count == 0 {
                map.remove(&key);
            }
        }
        down(&mut self.by_uid, uid);
        down(&mut self.by_client, client);
    }

    fn of(&self, uid: u32, client: u64) -> (usize, usize) {
        (self.by_uid.get(&uid).copied().unwrap_or(0), self.by_client.get(&client).copied().unwrap_or(0))
    }
}

#[derive(Debug, Default)]
pub struct FlockTable {
    files: HashMap<Fid, FileLocks>,
    granted: usize,
    waiting: usize,
    /// Granted locks by uid and by client.
    granted_shares: Shares,
    /// Waiters by uid and by client.
    waiting_shares: Shares,
}

impl FlockTable {
    pub fn new() -> FlockTable {
        FlockTable::default()
    }

    /// Every granted lock, with its file.
    pub fn granted(&self) -> impl Iterator<Item = (Fid, &Flock)> {
        self.files.iter().flat_map(|(file, locks)| locks.granted.iter().map(move |l| (*file, l)))
    }

    /// `owner`'s granted lock on `file` that holds byte `at`, if any.
    pub fn held(&self, file: Fid, owner: FlockOwner, at: u64) -> Option<Flock> {
        let locks = self.files.get(&file)?;
        locks.granted.iter().find(|l| l.owner == owner && l.overlaps(at, at)).copied()
    }

    /// Granted locks and waiters, over all files.
    pub fn counts(&self) -> (usize, usize) {
        (self.granted, self.waiting)
    }

    /// The first granted lock in the way of `request` (`F_GETLK`).
    pub fn get(&self, request: &FlockRequest) -> FlockAnswer {
        let Some(kind) = request.kind else { return FlockAnswer::Free };
        let wanted = wanted(request, kind);
        match self.files.get(&request.file).and_then(|f| f.granted.iter().find(|l| l.conflicts(&wanted))) {
            Some(l) => FlockAnswer::Conflict(*l),
            None => FlockAnswer::Free,
        }
    }

    /// Lock or unlock. A lock that conflicts is refused (`wait` false),
    /// refused as a deadlock, or queued under `ticket` (`wait` true). Also
    /// returns waiters granted because this request let go of bytes.
    pub fn set(
        &mut self,
        ticket: Ticket,
        request: FlockRequest,
        wait: bool,
    ) -> (SetOutcome, Vec<(Ticket, FlockAnswer)>) {
        if request.start > request.end {
            let reason = format!("the range {}..={} ends before it starts", request.start, request.end);
            return (SetOutcome::Done(FlockAnswer::NoLocks(reason)), Vec::new());
        }
        let Some(kind) = request.kind else {
            if self.splits(&request) {
                if let Err(reason) = self.room_for_one(&request) {
                    return (SetOutcome::Done(FlockAnswer::NoLocks(reason)), Vec::new());
                }
            }
            self.apply(&request);
            let granted = self.grant_waiters(request.file);
            return (SetOutcome::Done(FlockAnswer::Granted), granted);
        };
        let blockers = self.blockers(request.file, &wanted(&request, kind));
        if blockers.is_empty() {
            if let Err(reason) = self.room_for_one(&request) {
                return (SetOutcome::Done(FlockAnswer::NoLocks(reason)), Vec::new());
            }
            self.apply(&request);
            // A downgrade (write to read) may let waiters in.
            let granted = self.grant_waiters(request.file);
            return (SetOutcome::Done(FlockAnswer::Granted), granted);
        }
        if !wait {
            let first = self.get(&request);
            return (SetOutcome::Done(first), Vec::new());
        }
        if self.waits_for(&blockers, request.owner) {
            return (SetOutcome::Done(FlockAnswer::Deadlock), Vec::new());
        }
        if let Err(reason) = self.room_to_wait(&request) {
            return (SetOutcome::Done(FlockAnswer::NoLocks(reason)), Vec::new());
        }
        self.files.entry(request.file).or_default().waiting.push_back(Waiter { ticket, request });
        self.waiting += 1;
        self.waiting_shares.add(request.uid, request.owner.client);
        (SetOutcome::Queued, Vec::new())
    }

    /// Withdraw the waiter `ticket` (its process was interrupted). `true`
    /// if it was waiting; it is then answered [`FlockAnswer::Interrupted`]
    /// by the caller.
    pub fn cancel(&mut self, ticket: Ticket) -> bool {
        for (&file, locks) in self.files.iter_mut() {
            if let Some(i) = locks.waiting.iter().position(|w| w.ticket == ticket) {
                let gone = locks.waiting.remove(i).expect("found");
                self.waiting -= 1;
                self.waiting_shares.remove(gone.request.uid, gone.request.owner.client);
                self.forget_if_empty(file);
                return true;
            }
        }
        false
    }

    /// Drop every lock `owner` holds on `file` (a close by that owner);
    /// returns the waiters this lets in.
    pub fn unlock_owner(&mut self, file: Fid, owner: FlockOwner) -> Vec<(Ticket, FlockAnswer)> {
        let request = FlockRequest { file, owner, pid: 0, uid: 0, kind: None, start: 0, end: u64::MAX };
        self.apply(&request);
        self.grant_waiters(file)
    }

    /// Drop every lock and waiter of `client` (gone or evicted). Returns
    /// the waiters this lets in; the client's own waiters are dropped
    /// unanswered (nobody is there to answer).
    pub fn release_client(&mut self, client: u64) -> Vec<(Ticket, FlockAnswer)> {
        let files: Vec<Fid> = self.files.keys().copied().collect();
        let mut granted = Vec::new();
        for file in files {
            let locks = self.files.get_mut(&file).expect("listed");
            for l in locks.granted.iter().filter(|l| l.owner.client == client) {
                self.granted -= 1;
                self.granted_shares.remove(l.uid, client);
            }
            for w in locks.waiting.iter().filter(|w| w.request.owner.client == client) {
                self.waiting -= 1;
                self.waiting_shares.remove(w.request.uid, client);
            }
            locks.granted.retain(|l| l.owner.client != client);
            locks.waiting.retain(|w| w.request.owner.client != client);
            granted.extend(self.grant_waiters(file));
        }
        granted
    }

    /// The owners whose granted locks stand in the way of `wanted`.
    fn blockers(&self, file: Fid, wanted: &Flock) -> Vec<FlockOwner> {
        let Some(locks) = self.files.get(&file) else { return Vec::new() };
        let mut owners: Vec<FlockOwner> =
            locks.granted.iter().filter(|l| l.conflicts(wanted)).map(|l| l.owner).collect();
        owners.sort_by_key(|o| (o.client, o.owner));
        owners.dedup();
        owners
    }

    /// Whether any of `blockers` waits, directly or through other waiters,
    /// for `owner`: the cycle that waiting would close.
    fn waits_for(&self, blockers: &[FlockOwner], owner: FlockOwner) -> bool {
        let mut seen: HashSet<FlockOwner> = HashSet::new();
        let mut todo: Vec<FlockOwner> = blockers.to_vec();
        while let Some(o) = todo.pop() {
            if o == owner {
                return true;
            }
            if !seen.insert(o) {
                continue;
            }
            for locks in self.files.values() {
                for w in locks.waiting.iter().filter(|w| w.request.owner == o) {
                    let wanted = wanted(&w.request, w.request.kind.expect("waiters lock"));
                    todo.extend(locks.granted.iter().filter(|l| l.conflicts(&wanted)).map(|l| l.owner));
                }
            }
        }
        false
    }

    /// Whether granting `request` keeps the table within [`LOCKS_MAX`] and
    /// the shares of its uid and client (one request adds at most two
    /// locks: itself, and the split of the owner's lock it falls inside).
    fn room_for_one(&self, request: &FlockRequest) -> Result<(), String> {
        let (uid, client) = (request.uid, request.owner.client);
        let (of_uid, of_client) = self.granted_shares.of(uid, client);
        if self.granted + 2 > LOCKS_MAX {
            return Err(format!(
                "{LOCKS_MAX} file locks are held already, the most the MDS keeps; try again once some are released"
            ));
        }
        if of_uid + 2 > LOCKS_PER_UID_MAX {
            return Err(format!(
                "uid {uid} holds {of_uid} file locks, the most one user may hold at the MDS \
                 ({LOCKS_PER_UID_MAX}); unlock or close files, or merge adjacent ranges, and try again"
            ));
        }
        if of_client + 2 > LOCKS_PER_CLIENT_MAX {
            return Err(format!(
                "this client holds {of_client} file locks, the most one client may hold at the MDS \
                 ({LOCKS_PER_CLIENT_MAX}); unlock or close files and try again"
            ));
        }
        Ok(())
    }

    /// Whether `request` may wait: within [`WAITERS_MAX`] and the shares
    /// of its uid and client.
    fn room_to_wait(&self, request: &FlockRequest) -> Result<(), String> {
        let (uid, client) = (request.uid, request.owner.client);
        let (of_uid, of_client) = self.waiting_shares.of(uid, client);
        if self.waiting >= WAITERS_MAX {
            return Err(format!("{WAITERS_MAX} lock requests wait already, the most the MDS keeps"));
        }
        if of_uid >= WAITERS_PER_UID_MAX {
            return Err(format!(
                "uid {uid} has {of_uid} lock requests waiting, the most one user may have at the MDS \
                 ({WAITERS_PER_UID_MAX}); let some be granted or interrupt them"
            ));
        }
        if of_client >= WAITERS_PER_CLIENT_MAX {
            return Err(format!(
                "this client has {of_client} lock requests waiting, the most one client may have at the MDS \
                 ({WAITERS_PER_CLIENT_MAX})"
            ));
        }
        Ok(())
    }

    /// Whether unlocking `request`'s range cuts one of its owner's locks in
    /// two (one lock more).
    fn splits(&self, request: &FlockRequest) -> bool {
        self.files.get(&request.file).is_some_and(|locks| {
            locks.granted.iter().any(|l| l.owner == request.owner && l.start < request.start && l.end > request.end)
        })
    }

    /// Set `request`'s range of its owner's locks to its kind (`None`:
    /// unlocked), splitting and merging the owner's locks around it. A
    /// merged lock counts against the request's uid; the pieces of a split
    /// one against the uid they had.
    fn apply(&mut self, request: &FlockRequest) {
        let locks = self.files.entry(request.file).or_default();
        let (start, end) = (request.start, request.end);
        let (mut gone, mut added) = (Vec::new(), Vec::new());
        let mut kept = Vec::with_capacity(locks.granted.len() + 2);
        for l in locks.granted.drain(..) {
            if l.owner != request.owner || !l.overlaps(start, end) {
                kept.push(l);
                continue;
            }
            gone.push(l);
            if l.start < start {
                added.push(Flock { end: start - 1, ..l });
            }
            if l.end > end {
                added.push(Flock { start: end + 1, ..l });
            }
        }
        kept.extend_from_slice(&added);
        locks.granted = kept;
        if let Some(kind) = request.kind {
            let mut new = wanted(request, kind);
            // Merge with the owner's locks of this kind that touch it.
            let touches = |l: &Flock, new: &Flock| {
                l.owner == new.owner
                    && l.kind == new.kind
                    && l.start <= new.end.saturating_add(1)
                    && new.start <= l.end.saturating_add(1)
            };
            while let Some(i) = locks.granted.iter().position(|l| touches(l, &new)) {
                let l = locks.granted.swap_remove(i);
                new.start = new.start.min(l.start);
                new.end = new.end.max(l.end);
                gone.push(l);
            }
            locks.granted.push(new);
            added.push(new);
        }
        // A piece split off and merged again is in both lists: it nets out
        // (counted in before it is counted out).
        for l in added {
            self.granted += 1;
            self.granted_shares.add(l.uid, l.owner.client);
        }
        for l in gone {
            self.granted -= 1;
            self.granted_shares.remove(l.uid, l.owner.client);
        }
        self.forget_if_empty(request.file);
    }

    /// Grant, in the order they came, the waiters of `file` that nothing
    /// holds back now.
    fn grant_waiters(&mut self, file: Fid) -> Vec<(Ticket, FlockAnswer)> {
        let mut granted = Vec::new();
        while let Some(locks) = self.files.get(&file) {
            let free = locks.waiting.iter().position(|w| {
                let wanted = wanted(&w.request, w.request.kind.expect("waiters lock"));
                !locks.granted.iter().any(|l| l.conflicts(&wanted))
            });
            let Some(i) = free else { break };
            let waiter = self.files.get_mut(&file).expect("present").waiting.remove(i).expect("found");
            self.waiting -= 1;
            self.waiting_shares.remove(waiter.request.uid, waiter.request.owner.client);
            let answer = match self.room_for_one(&waiter.request) {
                Ok(()) => {
                    self.apply(&waiter.request);
                    FlockAnswer::Granted
                }
                Err(reason) => FlockAnswer::NoLocks(reason),
            };
            granted.push((waiter.ticket, answer));
        }
        self.forget_if_empty(file);
        granted
    }

    fn forget_if_empty(&mut self, file: Fid) {
        if self.files.get(&file).is_some_and(|l| l.granted.is_empty() && l.waiting.is_empty()) {
            self.files.remove(&file);
        }
    }

    pub fn check_invariants(&self) {
        let (mut granted, mut waiting) = (0, 0);
        let (mut granted_shares, mut waiting_shares) = (Shares::default(), Shares::default());
        for (file, locks) in &self.files {
            assert!(!locks.granted.is_empty() || !locks.waiting.is_empty(), "{file:?}: an empty entry is kept");
            for (i, a) in locks.granted.iter().enumerate() {
                assert!(a.start <= a.end, "{file:?}: {a:?} ends before it starts");
                for b in &locks.granted[i + 1..] {
                    assert!(!a.conflicts(b), "{file:?}: {a:?} and {b:?} conflict and are both granted");
                    if a.owner == b.owner {
                        assert!(!a.overlaps(b.start, b.end), "{file:?}: one owner's {a:?} and {b:?} overlap");
                        let touch = a.end.checked_add(1) == Some(b.start) || b.end.checked_add(1) == Some(a.start);
                        assert!(!(touch && a.kind == b.kind), "{file:?}: {a:?} and {b:?} touch unmerged");
                    }
                }
            }
            for w in &locks.waiting {
                let wanted = wanted(&w.request, w.request.kind.expect("a waiter asks for a lock"));
                assert!(locks.granted.iter().any(|l| l.conflicts(&wanted)), "{file:?}: {w:?} waits for nothing");
            }
            granted += locks.granted.len();
            waiting += locks.waiting.len();
            locks.granted.iter().for_each(|l| granted_shares.add(l.uid, l.owner.client));
            locks.waiting.iter().for_each(|w| waiting_shares.add(w.request.uid, w.request.owner.client));
        }
        assert_eq!((granted, waiting), (self.granted, self.waiting), "counts");
        assert_eq!(granted_shares, self.granted_shares, "locks by uid and client");
        assert_eq!(waiting_shares, self.waiting_shares, "waiters by uid and client");
        assert!(self.granted <= LOCKS_MAX && self.waiting <= WAITERS_MAX, "bounds");
        assert!(self.granted_shares.by_uid.values().all(|&n| n <= LOCKS_PER_UID_MAX), "locks per uid");
        assert!(self.granted_shares.by_client.values().all(|&n| n <= LOCKS_PER_CLIENT_MAX), "locks per client");
        assert!(self.waiting_shares.by_uid.values().all(|&n| n <= WAITERS_PER_UID_MAX), "waiters per uid");
        assert!(self.waiting_shares.by_client.values().all(|&n| n <= WAITERS_PER_CLIENT_MAX), "waiters per client");
    }
}

/// The lock `request` asks for, as it would be granted.
fn wanted(request: &FlockRequest, kind: FlockKind) -> Flock {
    Flock { owner: request.owner, pid: request.pid, uid: request.uid, kind, start: request.start, end: request.end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const F: Fid = Fid(7);

    fn owner(client: u64, owner: u64) -> FlockOwner {
        FlockOwner { client, owner }
    }

    fn req(o: FlockOwner, kind: Option<FlockKind>, start: u64, end: u64) -> FlockRequest {
        FlockRequest { file: F, owner: o, pid: o.owner as u32, uid: 1000, kind, start, end }
    }

    use FlockKind::{Read, Write};

    #[test]
    fn readers_share_and_a_writer_waits_for_both() {
        let mut t = FlockTable::new();
        let (a, b, c) = (owner(1, 1), owner(2, 1), owner(3, 1));
        assert_eq!(t.set((1, 1), req(a, Some(Read), 0, 99), true).0, SetOutcome::Done(FlockAnswer::Granted));
        assert_eq!(t.set((2, 1), req(b, Some(Read), 50, 149), true).0, SetOutcome::Done(FlockAnswer::Granted));
        let refused = t.set((3, 1), req(c, Some(Write), 90, 90), false).0;
        assert!(matches!(refused, SetOutcome::Done(FlockAnswer::Conflict(l)) if l.owner == a), "{refused:?}");
        assert_eq!(t.set((3, 2), req(c, Some(Write), 90, 90), true).0, SetOutcome::Queued);
        t.check_invariants();
        assert!(t.unlock_owner(F, a).is_empty(), "b still reads byte 90");
        assert_eq!(t.set((2, 2), req(b, None, 0, u64::MAX), false).1, vec![((3, 2), FlockAnswer::Granted)]);
        t.check_invariants();
        assert_eq!(t.counts(), (1, 0));
    }

    #[test]
    fn an_owner_splits_merges_upgrades_and_downgrades_its_own_locks() {
        let mut t = FlockTable::new();
        let a = owner(1, 1);
        t.set((0, 0), req(a, Some(Read), 0, 99), false);
        t.set((0, 0), req(a, Some(Write), 40, 59), false);
        t.check_invariants();
        assert_eq!(t.counts().0, 3, "read 0..=39, write 40..=59, read 60..=99");
        t.set((0, 0), req(a, Some(Read), 40, 59), false);
        t.check_invariants();
        assert_eq!(t.counts().0, 1, "merged back into one read lock");
        t.set((0, 0), req(a, None, 10, 19), false);
        assert_eq!(t.counts().0, 2);
        t.check_invariants();
    }

    #[test]
    fn a_cycle_between_two_clients_is_a_deadlock_not_a_wait() {
        let mut t = FlockTable::new();
        let (a, b) = (owner(1, 9), owner(2, 9));
        t.set((1, 1), req(a, Some(Write), 0, 0), true);
        t.set((2, 1), req(b, Some(Write), 1, 1), true);
        assert_eq!(t.set((1, 2), req(a, Some(Write), 1, 1), true).0, SetOutcome::Queued);
        assert_eq!(t.set((2, 2), req(b, Some(Write), 0, 0), true).0, SetOutcome::Done(FlockAnswer::Deadlock));
        t.check_invariants();
    }

    #[test]
    fn a_client_that_goes_loses_its_locks_and_waiters() {
        let mut t = FlockTable::new();
        let (a, b, c) = (owner(1, 1), owner(2, 1), owner(1, 2));
        t.set((1, 1), req(a, Some(Write), 0, u64::MAX), true);
        assert_eq!(t.set((2, 1), req(b, Some(Write), 5, 5), true).0, SetOutcome::Queued);
        assert_eq!(t.set((1, 2), req(c, Some(Read), 5, 5), true).0, SetOutcome::Queued);
        assert_eq!(t.release_client(1), vec![((2, 1), FlockAnswer::Granted)]);
        t.check_invariants();
        assert_eq!(t.counts(), (1, 0));
        assert!(!t.cancel((2, 1)), "granted, not waiting");
    }

    #[test]
    fn bounds_refuse_with_enolck() {
        let mut t = FlockTable::new();
        // Uids and clients take all of their shares (less the room a split
        // needs), until the table is full.
        let (per_uid, per_client) = (LOCKS_PER_UID_MAX as u64 - 1, LOCKS_PER_CLIENT_MAX as u64 - 4);
        let on = |file: u64| {
            let (uid, client) = ((file / per_uid) as u32, file / per_client);
            FlockRequest { file: Fid(file), uid, ..req(owner(client, 1), Some(Read), 0, 0) }
        };
        for file in 0..LOCKS_MAX as u64 - 1 {
            assert_eq!(t.set((0, 0), on(file), false).0, SetOutcome::Done(FlockAnswer::Granted), "file {file}");
        }
        let refused = t.set((0, 0), FlockRequest { uid: 99_999, ..on(u64::MAX) }, false).0;
        assert!(matches!(refused, SetOutcome::Done(FlockAnswer::NoLocks(ref r)) if r.contains("65536")), "{refused:?}");
        assert_eq!(
            t.set((0, 0), FlockRequest { kind: None, ..on(0) }, false).0,
            SetOutcome::Done(FlockAnswer::Granted)
        );
        assert_eq!(
            t.set((0, 0), FlockRequest { uid: 99_999, ..on(u64::MAX) }, false).0,
            SetOutcome::Done(FlockAnswer::Granted)
        );
        t.check_invariants();
    }

    /// One uid that takes all the locks and waiters it may leaves another
    /// uid, on the same client, free to lock and to wait.
    #[test]
    fn one_uid_fills_only_its_own_share() {
        let mut t = FlockTable::new();
        let (hog, other) = (owner(1, 1), owner(1, 2));
        let of = |o: FlockOwner, uid: u32, file: u64, kind| FlockRequest {
            file: Fid(file),
            uid,
            ..req(o, Some(kind), 0, 0)
        };
        let mut file = 0;
        while t.set((0, 0), of(hog, 1000, file, Write), false).0 == SetOutcome::Done(FlockAnswer::Granted) {
            file += 1;
        }
        assert_eq!(file as usize, LOCKS_PER_UID_MAX - 1, "the share less the room a split needs");
        let refused = t.set((0, 0), of(hog, 1000, file, Write), false).0;
        assert!(
            matches!(refused, SetOutcome::Done(FlockAnswer::NoLocks(ref r)) if r.contains("uid 1000") && r.contains("4096")),
            "{refused:?}"
        );
        assert_eq!(t.set((0, 0), of(other, 1001, file, Read), false).0, SetOutcome::Done(FlockAnswer::Granted));
        // The hog's requests wait for a lock of another client's, up to its share.
        let holder = owner(2, 1);
        assert_eq!(t.set((2, 0), of(holder, 0, u64::MAX, Write), false).0, SetOutcome::Done(FlockAnswer::Granted));
        t.set((0, 0), FlockRequest { kind: None, ..of(hog, 1000, 0, Write) }, false);
        for i in 0..WAITERS_PER_UID_MAX as u64 {
            let waiter = FlockOwner { client: 1, owner: 100 + i };
            assert_eq!(t.set((1, i), of(waiter, 1000, u64::MAX, Write), true).0, SetOutcome::Queued);
        }
        let refused = t.set((1, 9999), of(owner(1, 99), 1000, u64::MAX, Write), true).0;
        assert!(
            matches!(refused, SetOutcome::Done(FlockAnswer::NoLocks(ref r)) if r.contains("waiting")),
            "{refused:?}"
        );
        assert_eq!(t.set((1, 10_000), of(other, 1001, u64::MAX, Write), true).0, SetOutcome::Queued);
        t.check_invariants();
        // An unlock that cuts one of the hog's locks in two needs room for one lock more.
        let ten = FlockRequest { start: 0, end: 9, ..of(hog, 1000, 0, Write) };
        assert_eq!(t.set((0, 0), ten, false).0, SetOutcome::Done(FlockAnswer::Granted));
        let cut = t.set((0, 0), FlockRequest { kind: None, start: 5, end: 5, ..ten }, false).0;
        assert!(matches!(cut, SetOutcome::Done(FlockAnswer::NoLocks(_))), "{cut:?}");
        assert_eq!(t.set((0, 0), FlockRequest { kind: None, ..ten }, false).0, SetOutcome::Done(FlockAnswer::Granted));
        t.check_invariants();
    }

    proptest! {
        /// Any sequence of requests, cancels and departures keeps the
        /// invariants.
        #[test]
        fn any_sequence_keeps_the_invariants(ops in proptest::collection::vec((0u8..6, 0u64..3, 0u64..2, 0u64..16, 0u64..6, any::<bool>()), 1..80)) {
            let mut t = FlockTable::new();
            let mut tickets = 0u64;
            for (op, client, own, start, len, wait) in ops {
                let o = owner(client, own);
                match op {
                    0 | 1 => {
                        tickets += 1;
                        // The uid varies within an owner too (a process that changed its uid).
                        let r = FlockRequest { uid: (len % 2) as u32, ..req(o, Some(if op == 0 { Read } else { Write }), start, start + len) };
                        t.set((client, tickets), r, wait);
                    }
                    2 => { t.set((client, 0), req(o, None, start, start + len), false); }
                    3 => { t.unlock_owner(F, o); }
                    4 => { t.cancel((client, tickets)); }
                    _ => { t.release_client(client); }
                }
                t.check_invariants();
            }
        }
    }
}
