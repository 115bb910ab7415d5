//! Virtual time and identifiers shared by every lanefs state machine.
//!
//! lanefs-core never reads a clock: every input carries `now` as an
//! [`Instant`], a count of nanoseconds since an origin chosen by the driver
//! (tokio's clock on a real node, the event queue in the simulator, the
//! harness's virtual clock in tests). Durations are plain nanosecond counts
//! too, so arithmetic is exact and deterministic.
//!
//! Identifiers are newtypes so that an OST index can never be passed where a
//! client id is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in time, in nanoseconds since the driver's origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Instant(pub u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Duration(pub u64);

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub const fn from_ns(ns: u64) -> Self {
        Duration(ns)
    }
    pub const fn from_us(us: u64) -> Self {
        Duration(us * 1_000)
    }
    pub const fn from_ms(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * 1_000_000_000)
    }
    pub const fn as_ns(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub fn as_ns(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// Time elapsed since `earlier`, zero if `earlier` is in the future.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

/// A client node (one mount, one lock namespace view, one page cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientId(pub u32);

/// An object storage target, numbered from 0 as Lustre's OST indices are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct OstIndex(pub u32);

/// An object on one OST (one stripe of one file).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId(pub u64);

/// A lock as named by the lock server that granted it (Lustre's remote handle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LockHandle(pub u64);

/// Request identifier chosen by a client, echoed in the reply (Lustre's xid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Xid(pub u64);

/// A change an OST made to its objects (a write, a punch), numbered in the
/// order the OST made them (Lustre's transaction number, `transno`): a
/// client keeps what it wrote until the OST says the change is committed,
/// and replays it in this order after the OST restarts. 0 means none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Transno(pub u64);

/// How many times an OST has started: lock handles and the recovery
/// protocol tell one life of the OST from the next by it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Epoch(pub u64);

/// One object on one OST: the unit of locking and caching.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    pub ost: OstIndex,
    pub object: ObjectId,
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}
impl fmt::Display for OstIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OST{:04x}", self.0)
    }
}

/// Client page size; locks and cache pages are aligned to it.
pub const PAGE_SIZE: u64 = 4096;
