//! The swarm's own checks of the cluster, after every step and at the end.
//!
//! Kept apart from the protocol code, as TigerBeetle keeps its checkers
//! apart from its replicas: they read the nodes' state through their public
//! queries and judge it by rules restated here, so a bug in a node's own
//! bookkeeping (which its `check_invariants` trusts) is still caught. The
//! harness also runs every node's `check_invariants` after every step.
//!
//! * After every step: no two granted locks of one OST object that overlap
//!   have incompatible modes, walked pairwise here rather than through the
//!   lock server's extent index.
//! * At the end of the liveness phase: every OST has no lock waiting and
//!   no sync pending, and every surviving client has no operation pending
//!   and no dirty byte.
// A match over lock modes or message kinds names every one, so that a new
// one is placed by hand wherever it matters.
#![deny(clippy::wildcard_enum_match_arm, clippy::match_wildcard_for_single_variants)]

use lanefs_core::harness::Harness;
use lanefs_core::ldlm::LockMode;
use lanefs_core::units::{ClientId, OstIndex};

/// Panics (a crash of the run, exit 127) if two incompatible granted
/// locks overlap on any OST that is up.
pub fn check_granted_locks(h: &Harness, osts: u32) {
    for o in (0..osts).map(OstIndex) {
        if h.is_down(o) {
            continue;
        }
        let locks = h.ost(o).locks();
        if locks.lock_count() < 2 {
            continue;
        }
        let granted: Vec<_> = locks.granted_locks().collect();
        for (i, a) in granted.iter().enumerate() {
            for b in &granted[i + 1..] {
                let (ha, ca, oa, ma, ea) = *a;
                let (hb, cb, ob, mb, eb) = *b;
                // GROUP locks cover whole objects: they meet whatever the extents.
                let meet = ma.is_group() || mb.is_group() || ea.overlaps(&eb);
                if oa == ob && meet && !compatible(ma, mb) {
                    panic!(
                        "{o}: granted locks conflict: {ha:?} of {ca} {} {ea} and {hb:?} of {cb} {} {eb} on object {}",
                        ma.name(),
                        mb.name(),
                        oa.0
                    );
                }
            }
        }
    }
}

/// Lock compatibility as Lustre's `lockmode_compat` has it, with the gid
/// rule of GROUP locks: readers share, a group shares with itself, nothing
/// else shares.
fn compatible(a: LockMode, b: LockMode) -> bool {
    use LockMode::{Group, ProtectedRead, ProtectedWrite};
    // Every pair named, so that a new mode cannot pass unjudged.
    match (a, b) {
        (ProtectedRead, ProtectedRead) => true,
        (Group(x), Group(y)) => x == y,
        (ProtectedRead, ProtectedWrite | Group(_))
        | (ProtectedWrite, ProtectedRead | ProtectedWrite | Group(_))
        | (Group(_), ProtectedRead | ProtectedWrite) => false,
    }
}

/// What is left undone once the liveness phase has finished: `None` if
/// the cluster is idle and clean.
pub fn leftovers(h: &Harness, osts: u32, clients: u32) -> Option<String> {
    for o in (0..osts).map(OstIndex) {
        let ost = h.ost(o);
        if ost.locks().waiting_count() > 0 {
            return Some(format!("{o} still has {} locks waiting", ost.locks().waiting_count()));
        }
        if ost.syncs_pending() > 0 {
            return Some(format!("{o} still waits for {} syncs", ost.syncs_pending()));
        }
        if ost.is_recovering() {
            return Some(format!("{o} is still recovering"));
        }
    }
    for c in (0..clients).map(ClientId) {
        if h.is_crashed(c) {
            continue;
        }
        let client = h.client(c);
        if client.ops_pending() > 0 {
            return Some(format!("{c} still has {} operations pending", client.ops_pending()));
        }
        if client.cache().dirty_bytes() > 0 {
            return Some(format!("{c} still holds {} dirty bytes", client.cache().dirty_bytes()));
        }
    }
    None
}
