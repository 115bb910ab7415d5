//! Cluster-wide file locks (POSIX record locks and `flock`) as they cross
//! the wire: who holds a lock, the lock, a request and its answer, and the
//! seal that proves a grant (the MDS keeps the locks, `lanefs_mds::flock`;
//! it makes and checks the seals, `lanefs_server::flock_seal`).
//!
//! Two locks conflict when their ranges overlap, their owners differ and
//! one of them is a write lock ([`Flock::conflicts`]).

use crate::Fid;
use serde::{Deserialize, Serialize};

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
