//! The handshake: what a connection does before it is a server's
//! connection, and the bounds on connections doing it.
//!
//! A connection proves itself in two steps: authentication (TLS with a
//! certificate of the cluster's CA on TCP, the kernel's word on its uid on
//! a Unix socket: see [`crate::auth`]), then a `Hello` whose magic, version
//! and role are checked ([`hello`]). Both run in the server's handshake
//! pool (`transport::spawn_accept`), apart from the connections it serves:
//! a connection takes a place under the server's connection cap only once
//! it is through, so that peers that have proved nothing never take the
//! places of those that have.
//!
//! The pool's rules ([`Handshakes`] keeps the books; the values are in
//! [`crate::limits`]):
//! - at most `in_flight_max` handshakes at once. When it is full, the
//!   server takes no new connection (they wait in the kernel's backlog)
//!   until a handshake ends or one has run for `displace_age`; then a new
//!   connection displaces the oldest such handshake of the source that has
//!   the most in flight. Peers that have sent nothing yet go first; then
//!   peers that spoke but are slow, from sources bounded per source; a
//!   node (below) that has spoken is never displaced, only timed out. A
//!   lanefs peer is through in milliseconds, so a burst of them waits its
//!   turn and loses nothing, even on a machine too busy to finish each
//!   within `displace_age`, while peers that send nothing grow old and
//!   make room; of those, the busiest source's go first, so that a source
//!   with few connections keeps them;
//! - at most `per_source_max` from one IP address, or from one local user
//!   on a Unix socket (by its uid, from `SO_PEERCRED`): past it a new
//!   connection from that source is closed at once (before TLS there is
//!   no way to tell it why in words it could read). Nodes on a Unix
//!   socket (the server's own user and root: mounts, a job's ranks) have
//!   no such bound;
//! - each within the handshake timeout, TLS and `Hello` together; a peer
//!   that is too slow is told why where it can be, and closed.
//!
//! Invariants ([`Handshakes::check_invariants`]): the handshakes counted
//! per source add up to those in flight; no source is counted with none,
//! none past `per_source_max`; no more than `in_flight_max` are in flight.
//!
//! Where lanefs departs from Lustre: LNet accepts any connection from its
//! networks and has no handshake to bound; lanefs authenticates every
//! connection, so it bounds the work of doing so.

use crate::auth::{claim_allowed, Peer};
use lanefs_proto::codec::read_frame;
use lanefs_proto::wire::{variant, Role, Wire, MAGIC, PROTOCOL_VERSION};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Where a connection comes from, for the bound per source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A TCP peer, by its address.
    Ip(IpAddr),
    /// A node on a Unix socket: the server's own user or root (a mount,
    /// the ranks of a job): not bounded per source.
    LocalNode,
    /// Another user on a Unix socket, by its uid (from `SO_PEERCRED`).
    LocalUser(u32),
}

impl Source {
    /// Whether the pool bounds this source's handshakes.
    fn bounded(&self) -> bool {
        !matches!(self, Source::LocalNode)
    }
}

/// A handshake in the pool, by the order it came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HandshakeId(pub u64);

/// What the pool does with a new connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Start its handshake; `displaced`, if any, is to be ended at once
    /// (it has already left the books).
    Admitted { id: HandshakeId, displaced: Option<HandshakeId> },
    /// Close it: its source has `per_source_max` handshakes in flight.
    SourceFull,
    /// Close it: the pool is full and no handshake is old enough to be
    /// displaced (a caller that asks [`Handshakes::room_at`] first never
    /// sees this).
    Full,
}

/// One handshake in the pool.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    source: Source,
    began: Instant,
    /// Whether the peer has sent anything yet.
    spoken: bool,
}

impl InFlight {
    /// Whether a newcomer may ever displace it: one that sent nothing, or
    /// one from a source bounded per source (a node that spoke is slow
    /// only because the machine is: it is left to its timeout).
    fn displaceable(&self) -> bool {
        !self.spoken || self.source.bounded()
    }
}

/// The books of a handshake pool: see the module docs.
#[derive(Debug)]
pub struct Handshakes {
    in_flight_max: usize,
    per_source_max: usize,
    /// How long a handshake runs before a newcomer to a full pool may
    /// displace it.
    displace_age: Duration,
    next: u64,
    /// Handshakes in flight, oldest first, with where they come from and
    /// when they began.
    in_flight: BTreeMap<HandshakeId, InFlight>,
    per_source: HashMap<Source, usize>,
}

impl Handshakes {
    pub fn new(in_flight_max: usize, per_source_max: usize, displace_age: Duration) -> Handshakes {
        assert!(in_flight_max > 0 && per_source_max > 0, "a handshake pool needs room for one");
        Handshakes {
            in_flight_max,
            per_source_max,
            displace_age,
            next: 0,
            in_flight: BTreeMap::new(),
            per_source: HashMap::new(),
        }
    }

    /// When the pool can take a new connection: `None` now, else at the
    /// returned time (when its oldest displaceable handshake may be
    /// displaced, or when to look again if none is), or before if a
    /// handshake ends or a peer speaks.
    #[must_use]
    pub fn room_at(&self, now: Instant) -> Option<Instant> {
        if self.in_flight.len() < self.in_flight_max {
            return None;
        }
        match self.in_flight.values().find(|h| h.displaceable()) {
            Some(oldest) => Some(oldest.began + self.displace_age).filter(|at| *at > now),
            None => Some(now + self.displace_age),
        }
    }

    /// The peer of handshake `id` has sent something (a handshake no
    /// longer on the books is let be).
    pub fn spoke(&mut self, id: HandshakeId) {
        if let Some(h) = self.in_flight.get_mut(&id) {
            h.spoken = true;
        }
    }

    /// Handshakes in flight.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// A connection from `source` came in at `now`.
    pub fn admit(&mut self, source: Source, now: Instant) -> Admission {
        let count = self.per_source.get(&source).copied().unwrap_or(0);
        if source.bounded() && count >= self.per_source_max {
            return Admission::SourceFull;
        }
        let mut displaced = None;
        if self.in_flight.len() >= self.in_flight_max {
            match self.displace(now) {
                Some(id) => displaced = Some(id),
                None => return Admission::Full,
            }
        }
        let id = HandshakeId(self.next);
        self.next += 1;
        self.in_flight.insert(id, InFlight { source, began: now, spoken: false });
        *self.per_source.entry(source).or_insert(0) += 1;
        Admission::Admitted { id, displaced }
    }

    /// The handshake `id` ended (through, failed, or displaced). Ending one
    /// that already left the books (a displaced one) does nothing.
    pub fn finish(&mut self, id: HandshakeId) {
        let Some(InFlight { source, .. }) = self.in_flight.remove(&id) else { return };
        let count = self.per_source.get_mut(&source).expect("a source in flight is counted");
        *count -= 1;
        if *count == 0 {
            self.per_source.remove(&source);
        }
    }

    /// Take a handshake that has run for `displace_age` off the books:
    /// of those whose peer sent nothing, else of the others that may be
    /// displaced, the oldest of the source with the most in flight (of
    /// sources with as many, the one whose is oldest); `None` if none has
    /// run that long.
    fn displace(&mut self, now: Instant) -> Option<HandshakeId> {
        let old = |h: &InFlight| h.displaceable() && now.saturating_duration_since(h.began) >= self.displace_age;
        let silent = self.in_flight.values().any(|h| old(h) && !h.spoken);
        let candidate = |h: &InFlight| old(h) && (!silent || !h.spoken);
        let most = self.in_flight.values().filter(|h| candidate(h)).map(|h| self.per_source[&h.source]).max()?;
        let (&id, _) = self
            .in_flight
            .iter()
            .find(|(_, h)| candidate(h) && self.per_source[&h.source] == most)
            .expect("the busiest source has a candidate");
        self.finish(id);
        Some(id)
    }

    pub fn check_invariants(&self) {
        assert!(self.in_flight.len() <= self.in_flight_max, "{} handshakes in flight", self.in_flight.len());
        assert_eq!(self.per_source.values().sum::<usize>(), self.in_flight.len(), "per source: {self:?}");
        for (source, &count) in &self.per_source {
            assert!(count > 0, "{source:?} is counted with no handshake");
            if source.bounded() {
                assert!(count <= self.per_source_max, "{source:?} has {count} handshakes");
            }
            assert_eq!(self.in_flight.values().filter(|h| h.source == *source).count(), count, "{source:?}");
        }
    }
}

/// Read `Hello` and check it, and the role it claims against what the
/// peer's key or uid allows; the error is the reason told to the peer.
pub(crate) async fn hello<R: tokio::io::AsyncRead + Unpin>(r: &mut R, peer: &Peer) -> Result<Role, String> {
    match read_frame(r).await {
        Ok(Some(Wire::Hello { magic, version, role })) => {
            if magic != MAGIC {
                return Err(format!("bad magic {magic:#x}: not a lanefs peer"));
            }
            if version != PROTOCOL_VERSION {
                return Err(format!(
                    "protocol version {version} is not supported; this server speaks version {PROTOCOL_VERSION}: run the same lanefs release on every node"
                ));
            }
            claim_allowed(peer, &role)?;
            Ok(role)
        }
        Ok(Some(other)) => Err(format!("expected Hello first, got {}", variant(&other))),
        Ok(None) => Err("connection closed before Hello".into()),
        Err(e) => Err(format!("bad first frame: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Source {
        Source::Ip(IpAddr::from([10, 0, 0, last]))
    }

    const AGE: Duration = Duration::from_millis(100);

    fn admitted(admission: Admission) -> (HandshakeId, Option<HandshakeId>) {
        match admission {
            Admission::Admitted { id, displaced } => (id, displaced),
            refused => panic!("refused: {refused:?}"),
        }
    }

    #[test]
    fn one_address_takes_at_most_its_share() {
        let now = Instant::now();
        let mut pool = Handshakes::new(8, 3, AGE);
        for _ in 0..3 {
            admitted(pool.admit(ip(1), now));
        }
        assert_eq!(pool.admit(ip(1), now), Admission::SourceFull);
        admitted(pool.admit(ip(2), now));
        pool.check_invariants();
        // Unix sockets: a local user has a share as an address does; the
        // server's own user and root (nodes) none.
        admitted(pool.admit(Source::LocalUser(1000), now));
        admitted(pool.admit(Source::LocalUser(1000), now));
        admitted(pool.admit(Source::LocalUser(1000), now));
        assert_eq!(pool.admit(Source::LocalUser(1000), now), Admission::SourceFull);
        pool.check_invariants();
        let mut pool = Handshakes::new(8, 3, AGE);
        for _ in 0..8 {
            admitted(pool.admit(Source::LocalNode, now));
        }
        pool.check_invariants();
        assert_eq!(pool.room_at(now), Some(now + AGE), "full: room once the oldest may be displaced");
    }

    #[test]
    fn a_full_pool_waits_for_young_handshakes_and_displaces_old_ones() {
        let start = Instant::now();
        let mut pool = Handshakes::new(4, 4, AGE);
        let first = admitted(pool.admit(ip(1), start)).0;
        let flood: Vec<_> = (0..3).map(|_| admitted(pool.admit(ip(9), start)).0).collect();
        // Full of young handshakes: no room (a burst of peers waits).
        assert_eq!(pool.room_at(start), Some(start + AGE));
        assert_eq!(pool.admit(ip(2), start), Admission::Full);
        let later = start + AGE;
        assert_eq!(pool.room_at(later), None);
        // A newcomer displaces the flood's oldest, not the lone peer.
        let (newcomer, displaced) = admitted(pool.admit(ip(2), later));
        assert_eq!(displaced, Some(flood[0]));
        pool.check_invariants();
        // A displaced handshake that ends later is not counted twice.
        pool.finish(flood[0]);
        pool.check_invariants();
        assert_eq!(pool.len(), 4);
        // Sources tie (ip(9) has 2, the others 1 each): the busiest again.
        assert_eq!(admitted(pool.admit(ip(3), later)).1, Some(flood[1]));
        // Of the old ones, every source has one: the oldest of all goes;
        // the young ones (the newcomers) are not displaced.
        assert_eq!(admitted(pool.admit(ip(4), later)).1, Some(first));
        assert_eq!(admitted(pool.admit(ip(5), later)).1, Some(flood[2]));
        assert_eq!(pool.admit(ip(6), later), Admission::Full);
        pool.finish(newcomer);
        assert_eq!(pool.room_at(later), None, "a handshake that ends makes room");
        pool.check_invariants();
        assert_eq!(pool.len(), 3);
    }

    #[test]
    fn silent_peers_go_first_and_a_node_that_spoke_is_never_displaced() {
        let start = Instant::now();
        let mut pool = Handshakes::new(3, 3, AGE);
        let node = admitted(pool.admit(Source::LocalNode, start)).0;
        let user = admitted(pool.admit(Source::LocalUser(1000), start)).0;
        let quiet_node = admitted(pool.admit(Source::LocalNode, start)).0;
        pool.spoke(node);
        pool.spoke(user);
        let later = start + AGE;
        // The one that sent nothing goes first, though its source (nodes:
        // two in flight) ties with none busier and it is not the oldest.
        let (newcomer, gone) = admitted(pool.admit(Source::LocalUser(1001), later));
        assert_eq!(gone, Some(quiet_node));
        pool.spoke(newcomer);
        // Then a bounded source's slow speaker (the oldest of them); the
        // node that spoke stays.
        let much_later = later + AGE;
        assert_eq!(admitted(pool.admit(Source::LocalUser(1002), much_later)).1, Some(user));
        pool.check_invariants();
        // Left: the node that spoke, the user that spoke and a young one:
        // the user goes, the node stays.
        assert_eq!(admitted(pool.admit(Source::LocalUser(1003), much_later)).1, Some(newcomer));
        pool.check_invariants();
        let last = much_later + AGE;
        // A pool of nodes that all spoke has no room until one ends: look
        // again a little later.
        let mut nodes = Handshakes::new(2, 2, AGE);
        for _ in 0..2 {
            let id = admitted(nodes.admit(Source::LocalNode, start)).0;
            nodes.spoke(id);
        }
        assert_eq!(nodes.room_at(last), Some(last + AGE));
        assert_eq!(nodes.admit(Source::LocalNode, last), Admission::Full);
        nodes.check_invariants();
    }
}
