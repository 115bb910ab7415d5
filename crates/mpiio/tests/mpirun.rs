//! Two-phase collective I/O under real `mpirun` (Open MPI, through the
//! `mpi` crate): the `mpi_collective` example writes an IOR-like pattern
//! collectively from 4 processes, each reads another's blocks back
//! collectively and checks every byte; in every lock mode and with several
//! aggregator counts. A rank that dies mid-collective ends the job with an
//! error naming it, never a hang.
//!
//! Built with `--features mpi` (which `make test` turns on where Open MPI's
//! development files are installed); without `mpirun` on the PATH each
//! test says so and passes.
#![cfg(feature = "mpi")]

#[path = "../../../tests/support/mpirun_session.rs"]
mod mpirun_session;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The example, built beside this test.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples").join("mpi_collective")
}

fn mpirun(ranks: u32, args: &[&str]) -> Option<(Output, Duration)> {
    if Command::new("mpirun").arg("--version").output().is_err() {
        eprintln!("skipped: no mpirun (install openmpi-bin)");
        return None;
    }
    let started = Instant::now();
    let output = Command::new("timeout")
        .args(["120", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", &ranks.to_string()])
        .env("OMPI_MCA_orte_tmpdir_base", mpirun_session::base())
        .arg(example())
        .args(args)
        .output()
        .unwrap();
    Some((output, started.elapsed()))
}

#[test]
fn collective_writes_and_reads_under_mpirun_in_every_lock_mode() {
    let dir = tempfile::tempdir().unwrap();
    for hints in [
        "",
        "cb_nodes=1",
        "cray_cb_write_lock_mode=1,cray_cb_nodes_multiplier=2",
        "cray_cb_write_lock_mode=2,romio_lustre_cb_lock_ahead_num_extents=3",
        "romio_lustre_cb_lock_ahead_write=1,romio_lustre_cb_lock_ahead_read=1,cb_nodes=4",
        "romio_cb_write=disable,romio_cb_read=disable",
    ] {
        let file = dir.path().join("shared");
        let Some((out, _)) = mpirun(4, &[file.to_str().unwrap(), hints]) else { return };
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "hints {hints:?}: {stdout}\n{stderr}");
        assert!(stdout.contains("verified: 4 ranks, 1600000 bytes"), "hints {hints:?}: {stdout}");
        assert!(stdout.contains("| MPIIO write access patterns for"), "{stdout}");
        let collective =
            if hints.contains("disable") { "collective writes       = 0" } else { "collective writes       = 40" };
        assert!(stdout.contains(collective), "hints {hints:?}: {stdout}");
        if hints.contains("lock_mode=2") || hints.contains("lock_ahead_write=1") {
            assert!(stdout.contains("lock mode         ="), "lockahead times its lock requests: {stdout}");
        }
    }
}

#[test]
fn a_rank_killed_mid_collective_fails_the_job_without_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shared");
    let Some((out, took)) = mpirun(4, &[file.to_str().unwrap(), "cb_nodes=2", "--die", "2"]) else { return };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the job must fail: {stderr}");
    assert_ne!(out.status.code(), Some(124), "mpirun hung until the timeout: {stderr}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    assert!(stderr.contains("rank 2"), "the dead rank is named: {stderr}");
}
