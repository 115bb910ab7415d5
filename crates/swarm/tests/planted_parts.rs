//! Each part of the core client catches its own planted bug: the swarm's
//! seeds end in a crash whose message names that part's invariant, raised
//! by the part's `check_invariants` (which the harness runs after every
//! step). Built with the `planted-bugs` feature: `make test` runs it
//! (`cargo test -p lanefs-swarm --features planted-bugs --test planted_parts`).
#![cfg(feature = "planted-bugs")]

use lanefs_core::planted::Bug;
use lanefs_swarm::{run_seed, Outcome};

/// Seeds tried per bug before the test gives up on it.
const SEEDS_MAX: u64 = 50;

/// The first seed's outcome that is not a pass, with `bug` planted.
fn first_failure(bug: Bug) -> (u64, Outcome) {
    (0..SEEDS_MAX)
        .map(|seed| (seed, run_seed(seed, Some(bug)).outcome))
        .find(|(_, o)| *o != Outcome::Passed)
        .unwrap_or_else(|| panic!("{} not caught within {SEEDS_MAX} seeds", bug.name()))
}

fn caught_by(bug: Bug, invariant: &str) {
    let (seed, outcome) = first_failure(bug);
    match outcome {
        Outcome::Crash(message) => assert!(
            message.contains(invariant),
            "{} at seed {seed}: caught, but not by the part's invariant ({invariant:?}): {message}",
            bug.name()
        ),
        other => panic!("{} at seed {seed}: {other:?}, not the part's invariant ({invariant:?})", bug.name()),
    }
}

#[test]
fn the_rpc_book_catches_a_miscounted_rpc() {
    caught_by(Bug::MiscountedRpc, "RPC book: write RPCs in flight");
}

#[test]
fn writeback_catches_a_forgotten_dirty_page() {
    caught_by(Bug::ForgetDirty, "not tracked for writeback");
}

#[test]
fn the_lock_cache_catches_an_entry_kept_after_its_cancel() {
    caught_by(Bug::KeepCancelledLock, "an entry kept after its cancel");
}
