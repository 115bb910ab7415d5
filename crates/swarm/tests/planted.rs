//! The swarm catches each of the core's planted bugs within a bounded range
//! of seeds (`cargo test -p lanefs-swarm --features planted-bugs`; the
//! counts are in bench/RESULTS.md, measured with `make planted`).
#![cfg(feature = "planted-bugs")]

use lanefs_core::planted::Bug;
use lanefs_swarm::{run_seed, Outcome};

/// Seeds tried per bug before the test gives up on it.
const SEEDS_MAX: u64 = 400;

/// The first seed that fails with `bug` planted, within the bound.
fn first_catch(bug: Bug) -> Option<(u64, Outcome)> {
    (0..SEEDS_MAX).map(|seed| (seed, run_seed(seed, Some(bug)).outcome)).find(|(_, o)| *o != Outcome::Passed)
}

#[test]
fn every_planted_bug_is_caught() {
    let mut missed = Vec::new();
    for bug in Bug::ALL {
        match first_catch(bug) {
            Some((seed, outcome)) => {
                println!("{:<22} caught at seed {seed}: {} ({})", bug.name(), outcome.kind(), outcome.exit_code())
            }
            None => missed.push(bug.name()),
        }
    }
    assert!(missed.is_empty(), "not caught within {SEEDS_MAX} seeds: {missed:?}");
}

#[test]
fn seeds_pass_again_once_the_bug_is_unplanted() {
    // The switch is per thread and per seed: planting one bug in a seed
    // leaves the next seed clean.
    let caught = first_catch(Bug::ConflictingGrant).expect("caught");
    assert_eq!(run_seed(caught.0, None).outcome, Outcome::Passed);
}
