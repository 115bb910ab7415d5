//! The distributed lock manager for OST objects: extent locks as Lustre's LDLM.
//!
//! * [`LockMode`]: PR, PW and GROUP, and which pairs are compatible.
//! * [`policy`]: the server's expansion policy, a pure function.
//! * [`server`]: the lock server of one OST (granted and waiting queues,
//!   blocking callbacks, speculative requests, eviction, glimpse targets).
//!
//! The client half (matching, LRU, callbacks, lockahead advice) lives in
//! `crate::client::locks`, next to the cache whose pages the locks protect.
//!
//! Behaviour follows `ldlm_extent.c` and the lockahead design (LU-6179); where
//! lanefs differs it says so at the place it does.
// A match over lock modes or message kinds names every one, so that a new
// one is placed by hand wherever it matters.
#![deny(clippy::wildcard_enum_match_arm, clippy::match_wildcard_for_single_variants)]

pub mod policy;
pub mod proof;
pub mod server;
pub mod stats;

use crate::extent::Extent;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifier of a group lock (`LL_IOC_GROUP_LOCK`'s gid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupId(pub u64);

/// Lock modes used on OST objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LockMode {
    /// PR: reads and glimpses; shares with other readers.
    ProtectedRead,
    /// PW: writes; excludes every other PR, PW and GROUP lock it overlaps.
    ProtectedWrite,
    /// GROUP: shared by every holder of the same gid, excludes everything else.
    Group(GroupId),
}

impl LockMode {
    /// Lustre's `lockmode_compat` extended with the gid rule for GROUP.
    pub fn compatible(self, other: LockMode) -> bool {
        use LockMode::*;
        // Every pair of modes named: a new mode must be placed in it.
        match (self, other) {
            (ProtectedRead, ProtectedRead) => true,
            (Group(a), Group(b)) => a == b,
            (ProtectedRead, ProtectedWrite | Group(_))
            | (ProtectedWrite, ProtectedRead | ProtectedWrite | Group(_))
            | (Group(_), ProtectedRead | ProtectedWrite) => false,
        }
    }

    /// Whether a cached lock of mode `self` can serve a request for `wanted`
    /// (a PW lock also serves reads; a GROUP lock serves its gid's I/O).
    pub fn serves(self, wanted: LockMode) -> bool {
        use LockMode::*;
        match (self, wanted) {
            (ProtectedWrite, ProtectedRead | ProtectedWrite) => true,
            (ProtectedRead, ProtectedRead) => true,
            (Group(a), Group(b)) => a == b,
            (ProtectedRead, ProtectedWrite | Group(_))
            | (ProtectedWrite, Group(_))
            | (Group(_), ProtectedRead | ProtectedWrite) => false,
        }
    }

    /// Whether the mode allows dirtying pages (PW and GROUP).
    pub fn is_write(self) -> bool {
        match self {
            LockMode::ProtectedRead => false,
            LockMode::ProtectedWrite | LockMode::Group(_) => true,
        }
    }

    pub fn is_group(self) -> bool {
        match self {
            LockMode::Group(_) => true,
            LockMode::ProtectedRead | LockMode::ProtectedWrite => false,
        }
    }

    /// Lustre's short name: `PR`, `PW`, `GROUP`.
    pub fn name(self) -> &'static str {
        match self {
            LockMode::ProtectedRead => "PR",
            LockMode::ProtectedWrite => "PW",
            LockMode::Group(_) => "GROUP",
        }
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockMode::Group(gid) => write!(f, "GROUP({})", gid.0),
            other @ (LockMode::ProtectedRead | LockMode::ProtectedWrite) => f.write_str(other.name()),
        }
    }
}

/// How a lock request may be treated, beyond its mode and extent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnqueueFlags {
    /// `LDLM_FL_NO_EXPANSION`: grant exactly the (aligned) request.
    pub no_expand: bool,
    /// `LDLM_FL_SPECULATIVE`: a lockahead request; never waits, never
    /// expanded, refused on any conflict, sends no callbacks.
    pub speculative: bool,
}

/// A lock request as the server receives it (object offsets, inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LockRequest {
    pub mode: LockMode,
    pub extent: Extent,
    pub flags: EnqueueFlags,
}

impl LockRequest {
    pub fn new(mode: LockMode, extent: Extent) -> Self {
        LockRequest { mode, extent, flags: EnqueueFlags::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::LockMode::*;
    use super::*;

    #[test]
    fn compatibility_matrix() {
        assert!(ProtectedRead.compatible(ProtectedRead));
        assert!(!ProtectedRead.compatible(ProtectedWrite));
        assert!(!ProtectedWrite.compatible(ProtectedWrite));
        assert!(Group(GroupId(7)).compatible(Group(GroupId(7))));
        assert!(!Group(GroupId(7)).compatible(Group(GroupId(8))));
        assert!(!Group(GroupId(7)).compatible(ProtectedRead));
        assert!(!ProtectedWrite.compatible(Group(GroupId(1))));
    }

    #[test]
    fn pw_serves_reads_but_not_the_reverse() {
        assert!(ProtectedWrite.serves(ProtectedRead));
        assert!(!ProtectedRead.serves(ProtectedWrite));
        assert!(!Group(GroupId(1)).serves(ProtectedWrite));
    }
}
