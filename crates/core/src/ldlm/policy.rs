//! Lustre's server-side extent expansion policy (`ldlm_extent_policy`).
//!
//! Given a request and the other locks on the resource, compute the extent to
//! grant: the largest extent that contains the request and does not run into
//! conflicting locks, shaped by Lustre's heuristics for busy resources. This is
//! a pure function so that every rule can be tested on its own and so that
//! alternative policies can be tried against the same inputs.
//!
//! Steps, in Lustre's order (HEAD `ldlm_extent.c`):
//! 1. whole-object requests are not changed; `NO_EXPANSION` requests only go
//!    through the alignment fixup;
//! 2. granted step: every conflicting-mode tree that is non-empty stops
//!    downward growth; upward growth stops below the lowest conflicting lock
//!    that starts above the request;
//! 3. waiting step: every conflicting waiter (and every compatible waiter of
//!    the same client) counts; more than 4 stop downward growth; waiters whose
//!    requested extent overlaps the request are ignored (they will ping-pong
//!    whatever is granted); others limit growth on their side;
//! 4. fixup after each step: more than 32 conflicting locks cap a PW request's
//!    growth at 32 MiB; the result is shrunk to the request's alignment.
//!
//! Invariant (asserted): the result always contains the request.

use super::LockMode;
use crate::extent::{Extent, EOF};
use crate::units::{ClientId, PAGE_SIZE};

/// `LDLM_MAX_GROWN_EXTENT`: growth cap for PW requests on busy resources.
pub const GROWN_EXTENT_MAX_BYTES: u64 = 32 * 1024 * 1024 - 1;
/// More conflicting locks than this trigger the 32 MiB cap.
pub const CONFLICTING_FOR_CAP_MIN: usize = 32;
/// More conflicting waiters than this stop downward growth.
pub const CONFLICTING_FOR_NO_DOWNWARD_MIN: usize = 4;

/// The request being granted, as the policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct PolicyRequest {
    pub client: ClientId,
    pub mode: LockMode,
    pub extent: Extent,
    pub no_expand: bool,
}

/// Another lock on the same resource, granted or waiting.
#[derive(Clone, Copy, Debug)]
pub struct PolicyLock {
    pub client: ClientId,
    pub mode: LockMode,
    /// The lock's current extent (granted extent, or the request while waiting).
    pub extent: Extent,
    /// The extent its owner asked for.
    pub req_extent: Extent,
}

/// What the granted step needs of the granted locks: how many are in a
/// mode whose tree conflicts with the request, and the lowest start of those
/// beginning above the request. A lock server with an index of its granted
/// locks computes it without walking them ([`GrantedView::of`] walks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrantedView {
    pub conflicting: usize,
    pub lowest_start_above: Option<u64>,
}

impl GrantedView {
    pub fn of(req: &PolicyRequest, granted: &[PolicyLock]) -> Self {
        let mut view = GrantedView::default();
        for lock in granted.iter().filter(|l| tree_conflicts(l.mode, req.mode)) {
            view.conflicting += 1;
            if lock.extent.start > req.extent.end {
                let lowest = view.lowest_start_above.get_or_insert(lock.extent.start);
                *lowest = (*lowest).min(lock.extent.start);
            }
        }
        view
    }
}

/// The extent to grant for `req`, given the granted locks and the waiting
/// queue (which must not contain `req` itself).
pub fn expand(req: &PolicyRequest, granted: &[PolicyLock], waiting: &[PolicyLock]) -> Extent {
    expand_view(req, GrantedView::of(req, granted), waiting)
}

/// [`expand`] with the granted locks summed up as a [`GrantedView`].
pub fn expand_view(req: &PolicyRequest, granted: GrantedView, waiting: &[PolicyLock]) -> Extent {
    let r = req.extent;
    if r == Extent::WHOLE {
        return r;
    }
    let new = if req.no_expand {
        fixup(req, r, 0)
    } else {
        let (after_granted, conflicting) = granted_step(req, granted);
        let new = fixup(req, after_granted, conflicting);
        let (after_waiting, conflicting) = waiting_step(req, new, waiting);
        fixup(req, after_waiting, conflicting)
    };
    assert!(new.contains(&r), "policy shrank {r} to {new}");
    new
}

/// Granted step. Lustre walks one interval tree per mode; a tree's mode
/// conflicts as a whole with the request (GROUP trees hold every gid, and a
/// GROUP request is always whole-object, so it never gets here): any
/// conflicting lock stops downward growth, and upward growth stops below the
/// lowest one starting above the request.
fn granted_step(req: &PolicyRequest, granted: GrantedView) -> (Extent, usize) {
    let mut new = Extent::WHOLE;
    if granted.conflicting > 0 {
        new.start = req.extent.start;
    }
    if let Some(start) = granted.lowest_start_above {
        new.end = start - 1;
    }
    (new, granted.conflicting)
}

/// Mode-level conflict, as between Lustre's per-mode trees: two GROUP modes
/// share a tree and do not conflict at this level whatever their gids.
pub fn tree_conflicts(tree: LockMode, req: LockMode) -> bool {
    !(tree.compatible(req) || (tree.is_group() && req.is_group()))
}

fn waiting_step(req: &PolicyRequest, mut new: Extent, waiting: &[PolicyLock]) -> (Extent, usize) {
    let r = req.extent;
    let mut conflicting = 0;
    for lock in waiting {
        if new == r {
            break;
        }
        if lock.mode.compatible(req.mode) && lock.client != req.client {
            continue;
        }
        conflicting += 1;
        if conflicting > CONFLICTING_FOR_NO_DOWNWARD_MIN {
            new.start = r.start;
        }
        let l = lock.extent;
        if !l.overlaps(&new) || lock.req_extent.overlaps(&r) {
            continue;
        }
        if l.start < r.start && new.start != r.start {
            new.start = if l.end >= r.start { r.start } else { (l.end + 1).min(r.start) };
        }
        if l.end > r.end {
            new.end = if l.start <= r.end {
                lock.req_extent.start.saturating_sub(1).max(r.end)
            } else {
                (l.start - 1).max(r.end)
            };
        }
    }
    (new, conflicting)
}

/// `ldlm_extent_internal_policy_fixup`: the 32 MiB cap, then alignment.
fn fixup(req: &PolicyRequest, mut new: Extent, conflicting: usize) -> Extent {
    let r = req.extent;
    let capped_mode = matches!(req.mode, LockMode::ProtectedWrite);
    // Lustre compares against the unsigned sum; a sum past u64::MAX means the
    // cap cannot bind, which checked_add says directly.
    if let Some(cap) = r.start.checked_add(GROWN_EXTENT_MAX_BYTES) {
        if conflicting > CONFLICTING_FOR_CAP_MIN && capped_mode && r.end < cap {
            new.end = new.end.min(cap);
        }
    }

    if new == Extent::WHOLE {
        return new;
    }
    let mask = alignment(r) - 1;
    // Shrink to the alignment: round start up and end + 1 down. Wrapping
    // arithmetic reproduces Lustre's unsigned C expressions at 0 and EOF.
    new.start = (new.start.wrapping_sub(1) | mask).wrapping_add(1);
    new.end = (new.end.wrapping_add(1) & !mask).wrapping_sub(1);
    debug_assert!(new.start <= r.start && new.end >= r.end);
    new
}

/// The lowest set bit of `start | (end + 1)` if that is page aligned, else
/// `PAGE_SIZE`: the coarsest granularity both request edges sit on.
pub fn alignment(r: Extent) -> u64 {
    let bits = r.start | r.end.wrapping_add(1);
    if bits != 0 && bits.is_multiple_of(PAGE_SIZE) {
        1 << bits.trailing_zeros()
    } else if bits == 0 {
        // [0, EOF]: handled before the caller gets here; any alignment works.
        1 << 63
    } else {
        PAGE_SIZE
    }
}

#[allow(dead_code)]
const _EOF_IS_MAX: () = assert!(EOF == u64::MAX);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ldlm::GroupId;
    use LockMode::*;

    const MIB: u64 = 1 << 20;

    fn req(client: u32, mode: LockMode, start: u64, end: u64) -> PolicyRequest {
        PolicyRequest { client: ClientId(client), mode, extent: Extent::new(start, end), no_expand: false }
    }

    fn lock(client: u32, mode: LockMode, start: u64, end: u64) -> PolicyLock {
        let e = Extent::new(start, end);
        PolicyLock { client: ClientId(client), mode, extent: e, req_extent: e }
    }

    fn mib(start: u64, end_excl: u64) -> (u64, u64) {
        (start * MIB, end_excl * MIB - 1)
    }

    #[test]
    fn lone_request_grows_to_whole_object() {
        let r = req(1, ProtectedWrite, MIB, 2 * MIB - 1);
        assert_eq!(expand(&r, &[], &[]), Extent::WHOLE);
    }

    #[test]
    fn no_expand_grants_the_request_exactly() {
        let mut r = req(1, ProtectedWrite, MIB, 2 * MIB - 1);
        r.no_expand = true;
        assert_eq!(expand(&r, &[], &[]), r.extent);
    }

    #[test]
    fn granted_conflict_stops_downward_growth_and_caps_upward() {
        let (s, e) = mib(4, 5);
        let r = req(1, ProtectedWrite, s, e);
        let above = lock(2, ProtectedWrite, 8 * MIB, 9 * MIB - 1);
        let below = lock(3, ProtectedWrite, 0, MIB - 1);
        let got = expand(&r, &[above, below], &[]);
        assert_eq!(got, Extent::new(4 * MIB, 8 * MIB - 1));
    }

    #[test]
    fn compatible_granted_locks_never_limit_growth() {
        let r = req(1, ProtectedRead, MIB, 2 * MIB - 1);
        let other_reader = lock(2, ProtectedRead, 4 * MIB, 5 * MIB - 1);
        assert_eq!(expand(&r, &[other_reader], &[]), Extent::WHOLE);
    }

    #[test]
    fn empty_conflicting_tree_below_only_blocks_downward() {
        let r = req(1, ProtectedWrite, 4 * MIB, 5 * MIB - 1);
        let below = lock(2, ProtectedRead, 0, MIB - 1);
        assert_eq!(expand(&r, &[below], &[]), Extent::new(4 * MIB, EOF));
    }

    #[test]
    fn more_than_32_conflicting_locks_cap_growth_at_32_mib() {
        let granted: Vec<_> =
            (0..33).map(|i| lock(2 + i, ProtectedWrite, i as u64 * MIB, (i as u64 + 1) * MIB - 1)).collect();
        let r = req(1, ProtectedWrite, 100 * MIB, 101 * MIB - 1);
        let got = expand(&r, &granted, &[]);
        // Cap: start + 32 MiB - 1, then aligned down to the 1 MiB request alignment.
        assert_eq!(got, Extent::new(100 * MIB, 132 * MIB - 1));
        // Exactly 32 conflicting locks: no cap.
        let got = expand(&r, &granted[..32], &[]);
        assert_eq!(got, Extent::new(100 * MIB, EOF));
    }

    #[test]
    fn the_cap_spares_pr_requests_and_large_requests() {
        let granted: Vec<_> =
            (0..40).map(|i| lock(2 + i, ProtectedWrite, i as u64 * MIB, (i as u64 + 1) * MIB - 1)).collect();
        let r = req(1, ProtectedRead, 100 * MIB, 101 * MIB - 1);
        assert_eq!(expand(&r, &granted, &[]).end, EOF);
        let big = req(1, ProtectedWrite, 100 * MIB, 140 * MIB - 1);
        assert_eq!(expand(&big, &granted, &[]).end, EOF);
    }

    #[test]
    fn more_than_4_conflicting_waiters_stop_downward_growth() {
        let r = req(1, ProtectedWrite, 64 * MIB, 65 * MIB - 1);
        // Waiters far above, none overlapping the request.
        let few: Vec<_> =
            (0..4).map(|i| lock(2 + i, ProtectedWrite, (200 + i as u64) * MIB, (201 + i as u64) * MIB - 1)).collect();
        let got = expand(&r, &[], &few);
        assert_eq!(got, Extent::new(0, 200 * MIB - 1), "4 waiters: downward growth allowed");
        let five: Vec<_> =
            (0..5).map(|i| lock(2 + i, ProtectedWrite, (200 + i as u64) * MIB, (201 + i as u64) * MIB - 1)).collect();
        let got = expand(&r, &[], &five);
        assert_eq!(got, Extent::new(64 * MIB, 200 * MIB - 1), "5 waiters: no downward growth");
    }

    #[test]
    fn waiter_below_limits_downward_growth_to_just_above_it() {
        let r = req(1, ProtectedWrite, 64 * MIB, 65 * MIB - 1);
        let w = lock(2, ProtectedWrite, 8 * MIB, 9 * MIB - 1);
        assert_eq!(expand(&r, &[], &[w]), Extent::new(9 * MIB, EOF));
    }

    #[test]
    fn waiter_overlapping_the_request_is_ignored() {
        let r = req(1, ProtectedWrite, 64 * MIB, 65 * MIB - 1);
        let w = lock(2, ProtectedWrite, 64 * MIB, 66 * MIB - 1);
        assert_eq!(expand(&r, &[], &[w]), Extent::WHOLE);
    }

    #[test]
    fn compatible_waiters_limit_only_their_own_clients_requests() {
        let r = req(1, ProtectedRead, 0, MIB - 1);
        let other = lock(2, ProtectedRead, 8 * MIB, 9 * MIB - 1);
        assert_eq!(expand(&r, &[], &[other]), Extent::WHOLE);
        let same = lock(1, ProtectedRead, 8 * MIB, 9 * MIB - 1);
        assert_eq!(expand(&r, &[], &[same]), Extent::new(0, 8 * MIB - 1));
    }

    #[test]
    fn alignment_fixup_shrinks_to_the_request_granularity() {
        // A 64 KiB-aligned request; conflicting lock starts at 1 MiB + 4 KiB.
        let r = req(1, ProtectedWrite, 128 * 1024, 192 * 1024 - 1);
        let blocker = lock(2, ProtectedWrite, MIB + 4096, MIB + 8191);
        let got = expand(&r, &[blocker], &[]);
        // Upward limit MiB + 4 KiB - 1 is rounded down to a 64 KiB boundary.
        assert_eq!(got, Extent::new(128 * 1024, MIB - 1));
        assert_eq!(alignment(r.extent), 64 * 1024);
        // A request that is not page aligned aligns to pages.
        assert_eq!(alignment(Extent::new(100, 5000)), PAGE_SIZE);
    }

    #[test]
    fn alignment_never_shrinks_below_the_request() {
        let r = req(1, ProtectedWrite, 3 * 4096, 5 * 4096 - 1);
        let blocker = lock(2, ProtectedWrite, 5 * 4096, 6 * 4096 - 1);
        let got = expand(&r, &[blocker], &[]);
        assert_eq!(got, r.extent);
    }

    #[test]
    fn group_requests_are_whole_object_and_untouched() {
        let r = req(1, Group(GroupId(3)), 0, EOF);
        let g = lock(2, ProtectedWrite, 0, MIB - 1);
        assert_eq!(expand(&r, &[g], &[]), Extent::WHOLE);
    }
}

#[cfg(test)]
mod edge_tests {
    use super::*;

    #[test]
    fn the_cap_near_the_top_of_the_object_space_does_not_overflow() {
        let granted: Vec<PolicyLock> = (0..33u64)
            .map(|i| {
                let e = Extent::new(i * 4096, i * 4096 + 4095);
                PolicyLock { client: ClientId(1), mode: LockMode::ProtectedWrite, extent: e, req_extent: e }
            })
            .collect();
        let r = Extent::new(u64::MAX - 8191, u64::MAX - 4096);
        let req = PolicyRequest { client: ClientId(2), mode: LockMode::ProtectedWrite, extent: r, no_expand: false };
        let got = expand(&req, &granted, &[]);
        assert!(got.contains(&r));
    }
}
