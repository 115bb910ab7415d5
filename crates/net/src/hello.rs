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
//! - at most `in_flight_max` handshakes at once. When it is full, a new
//!   connection displaces the oldest handshake of the source that has the
//!   most in flight: a lanefs peer is through in milliseconds, so the
//!   oldest handshakes of the busiest source are the likeliest to be peers
//!   that send nothing, and a source with few connections keeps them;
//! - at most `per_source_max` from one IP address: past it a new
//!   connection from that address is closed at once (before TLS there is
//!   no way to tell it why in words it could read). Unix sockets have no
//!   such bound: only the server's own user and root may connect there;
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
use crate::codec::read_frame;
use crate::proto::{variant, Role, Wire, MAGIC, PROTOCOL_VERSION};
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

/// Where a connection comes from, for the bound per source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A TCP peer, by its address.
    Ip(IpAddr),
    /// A peer on a Unix socket: the server's own user or root.
    Local,
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
}

/// The books of a handshake pool: see the module docs.
#[derive(Debug)]
pub struct Handshakes {
    in_flight_max: usize,
    per_source_max: usize,
    next: u64,
    /// Handshakes in flight, oldest first.
    in_flight: BTreeMap<HandshakeId, Source>,
    per_source: HashMap<Source, usize>,
}

impl Handshakes {
    pub fn new(in_flight_max: usize, per_source_max: usize) -> Handshakes {
        assert!(in_flight_max > 0 && per_source_max > 0, "a handshake pool needs room for one");
        Handshakes { in_flight_max, per_source_max, next: 0, in_flight: BTreeMap::new(), per_source: HashMap::new() }
    }

    /// Handshakes in flight.
    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// A connection from `source` came in.
    pub fn admit(&mut self, source: Source) -> Admission {
        let count = self.per_source.get(&source).copied().unwrap_or(0);
        if matches!(source, Source::Ip(_)) && count >= self.per_source_max {
            return Admission::SourceFull;
        }
        let displaced = (self.in_flight.len() >= self.in_flight_max).then(|| self.displace());
        let id = HandshakeId(self.next);
        self.next += 1;
        self.in_flight.insert(id, source);
        *self.per_source.entry(source).or_insert(0) += 1;
        Admission::Admitted { id, displaced }
    }

    /// The handshake `id` ended (through, failed, or displaced). Ending one
    /// that already left the books (a displaced one) does nothing.
    pub fn finish(&mut self, id: HandshakeId) {
        let Some(source) = self.in_flight.remove(&id) else { return };
        let count = self.per_source.get_mut(&source).expect("a source in flight is counted");
        *count -= 1;
        if *count == 0 {
            self.per_source.remove(&source);
        }
    }

    /// Take the oldest handshake of the source with the most in flight
    /// (of those with as many, the one whose oldest is oldest) off the books.
    fn displace(&mut self) -> HandshakeId {
        let most = self.per_source.values().copied().max().expect("a full pool has sources");
        let (&id, _) = self
            .in_flight
            .iter()
            .find(|(_, source)| self.per_source[*source] == most)
            .expect("the busiest source has a handshake");
        self.finish(id);
        id
    }

    pub fn check_invariants(&self) {
        assert!(self.in_flight.len() <= self.in_flight_max, "{} handshakes in flight", self.in_flight.len());
        assert_eq!(self.per_source.values().sum::<usize>(), self.in_flight.len(), "per source: {self:?}");
        for (source, &count) in &self.per_source {
            assert!(count > 0, "{source:?} is counted with no handshake");
            if matches!(source, Source::Ip(_)) {
                assert!(count <= self.per_source_max, "{source:?} has {count} handshakes");
            }
            assert_eq!(self.in_flight.values().filter(|s| *s == source).count(), count, "{source:?}");
        }
    }
}

/// Read `Hello` and check it, and the role it claims against what the
/// peer's key or uid allows; the error is the reason told to the peer.
pub(crate) async fn hello<R: tokio::io::AsyncRead + Unpin>(r: &mut R, peer: Peer) -> Result<Role, String> {
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

    fn admitted(admission: Admission) -> (HandshakeId, Option<HandshakeId>) {
        match admission {
            Admission::Admitted { id, displaced } => (id, displaced),
            Admission::SourceFull => panic!("refused"),
        }
    }

    #[test]
    fn one_address_takes_at_most_its_share() {
        let mut pool = Handshakes::new(8, 3);
        for _ in 0..3 {
            admitted(pool.admit(ip(1)));
        }
        assert_eq!(pool.admit(ip(1)), Admission::SourceFull);
        admitted(pool.admit(ip(2)));
        pool.check_invariants();
        // Unix sockets: only the server's own user and root; no share.
        for _ in 0..5 {
            admitted(pool.admit(Source::Local));
        }
        pool.check_invariants();
    }

    #[test]
    fn a_full_pool_displaces_the_oldest_of_the_busiest_source() {
        let mut pool = Handshakes::new(4, 4);
        let first = admitted(pool.admit(ip(1))).0;
        let flood: Vec<_> = (0..3).map(|_| admitted(pool.admit(ip(9))).0).collect();
        // Full: a newcomer displaces the flood's oldest, not the lone peer.
        let (newcomer, displaced) = admitted(pool.admit(ip(2)));
        assert_eq!(displaced, Some(flood[0]));
        pool.check_invariants();
        // A displaced handshake that ends later is not counted twice.
        pool.finish(flood[0]);
        pool.check_invariants();
        assert_eq!(pool.len(), 4);
        // Sources tie (ip(9) has 2, the others 1 each): the busiest again.
        assert_eq!(admitted(pool.admit(ip(3))).1, Some(flood[1]));
        // Now every source has one: the oldest of all goes.
        assert_eq!(admitted(pool.admit(ip(4))).1, Some(first));
        for id in [newcomer, flood[2]] {
            pool.finish(id);
        }
        pool.check_invariants();
        assert_eq!(pool.len(), 2);
    }
}
