//! The simulator's check mode catches each part of the core client's
//! planted bug: `World::check` runs every client's `check_invariants`
//! after every input, and the part whose rule the bug breaks panics with
//! its own message. Built with the `planted-bugs` feature: `make test`
//! runs it (`cargo test -p lanefs-sim --features planted-bugs --test
//! planted_parts`). Planted bugs are per thread, and the simulator runs
//! on the test's thread.
#![cfg(feature = "planted-bugs")]

use lanefs_core::planted::{plant, Bug};
use lanefs_ior::{parse_args, run, Api};
use lanefs_sim::backend::{SimBackend, SimOptions};
use lanefs_sim::config::ClusterConfig;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Two nodes writing and reading one shared file in interleaved blocks:
/// write RPCs, dirty pages, and locks called back and cancelled.
const SHARED: &str = "-a POSIX -w -r -b 256k -t 64k -s 2 -N 2 --tasks-per-node 1";

fn options() -> SimOptions {
    SimOptions { check: true, ..SimOptions::new(ClusterConfig::load("laptop").expect("preset loads")) }
}

/// Runs the scenario with `bug` planted; the panic's message, if any.
fn run_planted(bug: Option<Bug>) -> Option<String> {
    let args: Vec<String> = SHARED.split_whitespace().map(str::to_string).collect();
    let params = parse_args(&args).expect("valid IOR options");
    let backend = SimBackend::new(Api::Posix, options());
    plant(bug);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut out = Vec::new();
        run(&params, &backend, &mut out).expect("the simulated run succeeds");
    }));
    plant(None);
    let payload = result.err()?;
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".to_string());
    Some(message)
}

fn caught_by(bug: Bug, invariant: &str) {
    let message = run_planted(Some(bug)).unwrap_or_else(|| panic!("{} not caught by the check mode", bug.name()));
    assert!(message.contains(invariant), "{}: caught, but not by {invariant:?}: {message}", bug.name());
}

#[test]
fn the_scenario_passes_with_no_bug_planted() {
    assert_eq!(run_planted(None), None);
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
