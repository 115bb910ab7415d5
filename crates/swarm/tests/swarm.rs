//! The swarm over a short range of seeds (the range `make test` runs), the
//! same seed twice, and seeds that once found bugs, kept as regressions.

use lanefs_swarm::faults::FaultClass;
use lanefs_swarm::{run_seed, sweep, Outcome, Seeds, SweepConfig};

/// Seeds `make test` runs: `SWARM_SEEDS=A-B` for another range.
fn seed_range() -> (u64, u64) {
    match std::env::var("SWARM_SEEDS") {
        Ok(v) => {
            let (a, b) = v.split_once('-').expect("SWARM_SEEDS=A-B");
            (a.parse().expect("a seed"), b.parse::<u64>().expect("a seed") + 1)
        }
        Err(_) => (0, 200),
    }
}

#[test]
fn a_short_range_of_seeds_passes() {
    let (first, end) = seed_range();
    let config = SweepConfig { seeds: Seeds::Range { first, end }, jobs: 2, budget: None, planted: None, only: None };
    let mut failures = Vec::new();
    let summary = sweep(&config, |r| {
        if r.outcome != Outcome::Passed {
            failures.push(format!(
                "{}\n  {} ({}): {}",
                r.options,
                r.outcome.kind(),
                r.outcome.exit_code(),
                r.outcome.message()
            ));
        }
    })
    .unwrap();
    assert_eq!(summary.seeds_run, end - first);
    assert!(failures.is_empty(), "{} seeds failed:\n{}", failures.len(), failures.join("\n"));
    assert!(summary.faults.total() > 0, "the range injected no fault at all");
    for class in [FaultClass::MdsCrash, FaultClass::MdsDrop] {
        assert!(summary.faults.by_class[class as usize] > 0, "the range injected no {}", class.name());
    }
}

#[test]
fn the_same_seed_runs_the_same_way_twice() {
    for seed in [3, 17, 42] {
        let a = run_seed(seed, None);
        let b = run_seed(seed, None);
        assert_eq!(a.trace_hash, b.trace_hash, "seed {seed}");
        assert_eq!((a.steps, a.faults, a.outcome), (b.steps, b.faults, b.outcome), "seed {seed}");
    }
}

/// Seeds that found bugs in the protocol, each fixed in lanefs-core with a
/// scenario test of its own (crates/core/tests): they must keep passing.
/// (They found them before the MDS joined the swarm's world, which drew
/// their schedules anew; the scenario tests are the regressions proper.)
#[test]
fn seeds_that_found_bugs_pass() {
    let found = [
        (123, "a close left its GROUP lock behind"),
        (16, "an OST's new life numbered its notices from 1 and the client dropped them"),
        (106, "a lost commit notice made the writer ask for commits forever"),
        (1478, "a completion overtook the answer to a resent enqueue and was cancelled"),
        (381, "an fsync after a truncate did not sync the punch"),
        (2046, "a failed truncate dropped completed writes silently"),
        (451, "a failed commit's notice was lost in a crash of the OST"),
        (10122, "a GROUP lock that lost a stripe kept the others forever"),
        (16978, "the answer to an fsync's failed sync was lost with its connection"),
        (6494, "an eviction before a truncate's punch landed lost the dirty bytes it dropped without a word"),
    ];
    for (seed, bug) in found {
        let result = run_seed(seed, None);
        assert_eq!(result.outcome, Outcome::Passed, "seed {seed} ({bug}): {}", result.outcome.message());
    }
}
