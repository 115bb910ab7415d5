//! An OST's recovery after a restart, as Lustre's target recovery.
//!
//! When an OST starts again, its disk holds every change up to the last
//! commit and nothing after (see [`super::commits`]); its locks are gone.
//! The clients it knew (recorded durably as they connected, removed as they
//! were evicted or disconnected) still hold locks granted by its previous
//! life, and copies of the changes it acknowledged but had not committed.
//! For a window of time ([`super::RecoveryConfig::window`], Lustre's
//! `recovery_time_soft`) the OST takes those back before anything else:
//!
//! 1. a known client reconnects ([`crate::msg::ToOst::Connect`] naming the
//!    OST's previous life) and is told the OST is recovering;
//! 2. it replays its granted locks ([`crate::msg::ToOst::ReplayLock`]):
//!    each is granted again at once, same handle and extent (a lock that
//!    conflicts with one replayed before it is refused, and its holder told
//!    with `LockLost`);
//! 3. it replays the changes it kept, with their transaction numbers
//!    ([`crate::msg::ToOst::ReplayWrite`], `ReplayPunch`), and says it is
//!    done (`ReplayDone`);
//! 4. every other request, from anyone, waits: the OST grants nothing new
//!    while recovering (Lustre queues them likewise). A client it did not
//!    know is told why, once per session
//!    ([`crate::msg::ToClient::Recovering`]: how long at most, how many
//!    clients still to come), so that it can say so and give up after its
//!    own timeout; a known client that came back waits to the end.
//!
//! A replayed lock is taken back only with the proof its grant carried,
//! and a replayed change only with the proof its acknowledgement carried
//! ([`crate::ldlm::proof`]), so no client can take back a lock it never
//! held, nor take another's transaction number or replay a change the OST
//! never acknowledged to it.
//!
//! Recovery ends when every known client is done, or when the window
//! closes. Then the replayed changes are applied in transaction order (a
//! change at or below the last commit is already on disk and skipped, so
//! that a client late to hear of a commit cannot write old bytes over newer
//! ones), the known clients that did not finish are evicted (what they
//! held is lost, and they are told when they come back), and the waiting
//! requests are handled in the order they came.
//!
//! Where lanefs departs from Lustre: Lustre replays requests one at a time
//! in transaction order as they arrive (waiting for the next number),
//! with version checks (VBR) to replay past a gap left by an absent
//! client; lanefs gathers the replays and applies them at the end, in
//! order, skipping gaps. Since a client replays only changes made under
//! locks it held, and locks serialise changes to the same bytes, applying
//! in transaction order gives each byte its last acknowledged value.
//!
//! Bounds: requests that arrive during recovery are kept up to
//! [`DEFERRED_PER_CLIENT_MAX`] per client (a correct client has a bounded
//! number in flight, and the network servers bound connections and
//! requests per connection) and [`DEFERRED_MAX`] in all; a client that
//! sends past its share is evicted rather than let the OST grow, and when
//! the whole queue is full the client holding most of it is (so that one
//! client's flood costs the others nothing: a client within its share is
//! never evicted for another's). Replays are bounded by what clients may
//! keep uncommitted.

use crate::msg::{Payload, ToOst};
use crate::units::{ClientId, Instant, ObjectId, Transno};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Requests kept while recovering, in all.
pub const DEFERRED_MAX: usize = 1 << 16;
/// Requests kept while recovering per client, beyond which it is evicted:
/// far above what a client keeps in flight (its RPCs in flight per OST
/// and its lock requests), and a sixteenth of the whole.
pub const DEFERRED_PER_CLIENT_MAX: usize = 1 << 12;

/// A change a client replayed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Write { object: ObjectId, offset: u64, data: Payload },
    Punch { object: ObjectId, cut: crate::msg::Cut },
}

/// The state of an OST while it recovers (see the module docs).
#[derive(Debug)]
pub struct Recovery {
    deadline: Instant,
    /// Known clients that have not finished replaying.
    pending: BTreeSet<ClientId>,
    /// Known clients that reconnected and are replaying.
    replaying: BTreeSet<ClientId>,
    /// The replayed changes by transaction number.
    changes: BTreeMap<Transno, (ClientId, Change)>,
    /// Requests to handle once recovery is over, in arrival order.
    deferred: VecDeque<(ClientId, ToOst)>,
    /// How many of `deferred` each client sent.
    deferred_by: BTreeMap<ClientId, usize>,
    /// Clients it did not know (or that gave their state up) that were
    /// told their requests wait ([`crate::msg::ToClient::Recovering`]).
    told: BTreeSet<ClientId>,
    /// Known clients that reconnected to replay, done or not: never told
    /// (their state is here; they wait as long as the recovery does).
    came_back: BTreeSet<ClientId>,
}

/// What [`Recovery::finish`] leaves to do.
#[derive(Debug)]
pub struct Outcome {
    /// Known clients that did not finish: to evict.
    pub absent: BTreeSet<ClientId>,
    pub changes: BTreeMap<Transno, (ClientId, Change)>,
    pub deferred: VecDeque<(ClientId, ToOst)>,
}

/// What a replayed change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replayed {
    Kept,
    /// The same transaction number came twice (a confused client).
    Duplicate,
    /// The client is not replaying (unknown, or already done).
    NotReplaying,
    /// Transaction number 0 names no transaction: a change the OST never
    /// acknowledged has nothing to replay.
    NoTransno,
    /// The replay's proof is not the one this OST gave that client with
    /// that number for that change (see [`crate::ldlm::proof`]).
    Unproved,
}

impl Recovery {
    pub fn new(known: BTreeSet<ClientId>, deadline: Instant) -> Recovery {
        Recovery {
            deadline,
            pending: known,
            replaying: BTreeSet::new(),
            changes: BTreeMap::new(),
            deferred: VecDeque::new(),
            deferred_by: BTreeMap::new(),
            told: BTreeSet::new(),
            came_back: BTreeSet::new(),
        }
    }

    /// `client` starts a new session: tell it again when it waits.
    pub fn untell(&mut self, client: ClientId) {
        self.told.remove(&client);
    }

    /// Known clients that have not finished replaying.
    pub fn clients_left(&self) -> usize {
        self.pending.len()
    }

    /// Whether `client`, whose request was just deferred, is to be told
    /// why now: once per recovery, and only a client that has nothing to
    /// replay (a known one is told `Connected { recovering }` instead, and
    /// waits, done replaying or not, as long as the recovery does: what
    /// it holds is only safe here).
    pub fn tell(&mut self, client: ClientId) -> bool {
        !self.pending.contains(&client) && !self.came_back.contains(&client) && self.told.insert(client)
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether `client` is a known client that may replay now.
    pub fn may_replay(&self, client: ClientId) -> bool {
        self.pending.contains(&client)
    }

    /// A known client reconnected to replay.
    pub fn reconnected(&mut self, client: ClientId) {
        debug_assert!(self.pending.contains(&client));
        self.came_back.insert(client);
        self.replaying.insert(client);
    }

    pub fn is_replaying(&self, client: ClientId) -> bool {
        self.replaying.contains(&client)
    }

    pub fn replay(&mut self, client: ClientId, transno: Transno, change: Change) -> Replayed {
        if !self.replaying.contains(&client) {
            return Replayed::NotReplaying;
        }
        if transno.0 == 0 {
            return Replayed::NoTransno;
        }
        match self.changes.entry(transno) {
            std::collections::btree_map::Entry::Occupied(_) => Replayed::Duplicate,
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert((client, change));
                Replayed::Kept
            }
        }
    }

    /// A known client came back holding nothing to replay.
    pub fn gave_up(&mut self, client: ClientId) {
        self.came_back.remove(&client);
        self.replaying.remove(&client);
        self.pending.remove(&client);
    }

    /// `client` replayed all it holds.
    pub fn done(&mut self, client: ClientId) {
        if self.replaying.remove(&client) {
            self.pending.remove(&client);
        }
    }

    /// Who must be evicted (see [`Recovery::forget`]) before a request of
    /// `client` can be kept: `client` itself if it is past its share, the
    /// client holding most of the queue if the whole queue is full, or
    /// nobody.
    pub fn hog(&self, client: ClientId) -> Option<ClientId> {
        if self.deferred_by.get(&client).copied().unwrap_or(0) >= DEFERRED_PER_CLIENT_MAX {
            return Some(client);
        }
        if self.deferred.len() >= DEFERRED_MAX {
            return self.deferred_by.iter().max_by_key(|(c, n)| (**n, **c)).map(|(c, _)| *c);
        }
        None
    }

    /// Keep a request for after recovery (there must be room: see
    /// [`Recovery::hog`]).
    pub fn defer(&mut self, client: ClientId, message: ToOst) {
        assert_eq!(self.hog(client), None, "{client}'s request deferred past a bound");
        *self.deferred_by.entry(client).or_insert(0) += 1;
        self.deferred.push_back((client, message));
    }

    /// Drop what `client` sent (it is being evicted).
    pub fn forget(&mut self, client: ClientId) {
        self.told.remove(&client);
        self.came_back.remove(&client);
        self.deferred.retain(|(c, _)| *c != client);
        self.deferred_by.remove(&client);
        self.changes.retain(|_, (c, _)| *c != client);
        self.replaying.remove(&client);
        self.pending.remove(&client);
    }

    /// Whether recovery is over at `now`.
    pub fn is_over(&self, now: Instant) -> bool {
        self.pending.is_empty() || now >= self.deadline
    }

    pub fn finish(self) -> Outcome {
        Outcome { absent: self.pending, changes: self.changes, deferred: self.deferred }
    }

    pub fn check_invariants(&self) {
        assert!(self.replaying.is_subset(&self.pending), "a client replays that is not awaited");
        assert!(self.deferred.len() <= DEFERRED_MAX, "deferred requests past their bound");
        let mut by = BTreeMap::new();
        for (c, _) in &self.deferred {
            *by.entry(*c).or_insert(0usize) += 1;
        }
        assert_eq!(by, self.deferred_by, "deferred requests miscounted per client");
        assert!(by.values().all(|n| *n <= DEFERRED_PER_CLIENT_MAX), "a client's deferred requests past its share");
        assert!(self.told.is_disjoint(&self.pending), "a known client was told to wait as a new one");
        assert!(self.told.is_disjoint(&self.came_back), "a client that replayed was told to wait as a new one");
        assert!(self.told.len() <= DEFERRED_MAX, "told past the deferred requests' bound");
        for (transno, (client, _)) in &self.changes {
            assert!(transno.0 > 0, "{client} replayed a change without a transaction number");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ClientId = ClientId(1);
    const B: ClientId = ClientId(2);

    fn write(object: u64) -> Change {
        Change::Write { object: ObjectId(object), offset: 0, data: Payload::Bytes(vec![1]) }
    }

    #[test]
    fn recovery_ends_when_every_known_client_is_done_or_at_the_deadline() {
        let mut r = Recovery::new([A, B].into(), Instant(100));
        assert!(!r.is_over(Instant(0)));
        assert_eq!(r.replay(A, Transno(3), write(1)), Replayed::NotReplaying, "not reconnected yet");
        r.reconnected(A);
        assert_eq!(r.replay(A, Transno(3), write(1)), Replayed::Kept);
        assert_eq!(r.replay(A, Transno(3), write(2)), Replayed::Duplicate);
        r.done(A);
        r.check_invariants();
        assert!(!r.is_over(Instant(99)), "B is still awaited");
        assert!(r.is_over(Instant(100)));
        let outcome = r.finish();
        assert_eq!(outcome.absent, BTreeSet::from([B]));
        assert_eq!(outcome.changes.len(), 1);
    }

    /// One client's flood of requests during recovery costs the others
    /// nothing: past its share it is the one to go, and when many fill the
    /// whole queue, the one holding most of it goes, never a client within
    /// its share that asks next.
    #[test]
    fn a_flood_of_deferred_requests_evicts_the_flooder_only() {
        let mut r = Recovery::new([A].into(), Instant(100));
        let client = |c: u32| ClientId(10 + c);
        for _ in 0..DEFERRED_PER_CLIENT_MAX {
            r.defer(B, ToOst::ReplayDone);
        }
        assert_eq!(r.hog(B), Some(B), "past its share");
        assert_eq!(r.hog(A), None, "another is not");
        r.forget(B);
        // Fifteen clients at their share, one just below it.
        let senders = (DEFERRED_MAX / DEFERRED_PER_CLIENT_MAX) as u32;
        for c in 0..senders {
            let n = if c == 3 { DEFERRED_PER_CLIENT_MAX - 1 } else { DEFERRED_PER_CLIENT_MAX };
            for _ in 0..n {
                r.defer(client(c), ToOst::ReplayDone);
            }
        }
        r.check_invariants();
        assert_eq!(r.hog(client(3)), None, "one more for the client below its share");
        r.defer(client(3), ToOst::ReplayDone);
        let hog = r.hog(A).expect("the queue is full");
        assert!(hog != A && hog != client(3), "a client that holds a whole share goes, not {hog}");
        r.forget(hog);
        assert_eq!(r.hog(A), None);
        r.defer(A, ToOst::ReplayDone);
        r.check_invariants();
    }

    #[test]
    fn an_evicted_client_leaves_nothing_behind() {
        let mut r = Recovery::new([A, B].into(), Instant(100));
        r.reconnected(B);
        r.replay(B, Transno(1), write(1));
        r.defer(B, ToOst::ReplayDone);
        r.forget(B);
        r.check_invariants();
        let outcome = r.finish();
        assert!(outcome.changes.is_empty() && outcome.deferred.is_empty());
        assert_eq!(outcome.absent, BTreeSet::from([A]));
    }
}
