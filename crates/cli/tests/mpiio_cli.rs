//! `lanefs ior -a MPIIO` on an embedded cluster: collective writes and
//! reads (`-c`) in every Cray lock mode and with several aggregator counts,
//! verified by IOR's own checks (`-W -R`, each rank reading another's data
//! with `-C`); independent MPI-IO and file per process; Cray's stats and
//! timers blocks; a bad hint refused by name.

use std::process::{Command, Output};

fn ior(hints: &str, extra: &[&str]) -> Output {
    let mut args = vec!["ior", "-a", "MPIIO", "-w", "-r", "-W", "-R", "-C", "-e", "-b", "256k", "-t", "64k", "-s", "2"];
    args.extend_from_slice(&["-N", "4", "--tasks-per-node", "2"]);
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(&args)
        .env("MPICH_MPIIO_HINTS", hints)
        .env("MPICH_MPIIO_STATS", "1")
        .env("MPICH_MPIIO_TIMERS", "1")
        .env_remove("LANEFS_MPIIO_HINTS")
        .output()
        .unwrap()
}

fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn collective_io_runs_verified_in_every_lock_mode() {
    for (hints, aggregators) in [
        ("*:striping_factor=2:striping_unit=65536", 2),
        ("*:striping_factor=2:striping_unit=65536:cb_nodes=1", 1),
        ("*:striping_factor=2:striping_unit=65536:cray_cb_write_lock_mode=1:cray_cb_nodes_multiplier=2", 4),
        ("*:striping_factor=2:striping_unit=65536:cray_cb_write_lock_mode=2", 2),
    ] {
        let out = ior(hints, &["-c"]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{hints}: {stdout}\n{stderr}");
        assert!(stdout.contains("\nwrite ") && stdout.contains("\nread "), "{stdout}");
        // 4 ranks, 2 segments of 4 transfers each: 32 collective calls.
        assert!(stderr.contains("|   collective writes       = 32"), "{hints}: {stderr}");
        assert!(stderr.contains("|   collective reads        = 32"), "{hints}: {stderr}");
        assert!(stderr.contains(&format!("|   aggregators             = {aggregators}\n")), "{hints}: {stderr}");
        assert!(stderr.contains("| MPIIO write by phases, writers only"), "{stderr}");
        let lockahead = stderr.contains("|   lock mode         =");
        assert_eq!(lockahead, hints.contains("lock_mode=2"), "{hints}: {stderr}");
    }
}

#[test]
fn independent_mpiio_and_file_per_process_run_verified() {
    for extra in [&[][..], &["-F"][..]] {
        let out = ior("*:striping_unit=65536", extra);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{extra:?}: {stdout}\n{stderr}");
        assert!(stderr.contains("|   collective writes       = 0"), "{extra:?}: {stderr}");
    }
}

#[test]
fn a_bad_hint_value_is_refused_by_name() {
    let out = ior("*:cray_cb_write_lock_mode=7", &["-c"]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("cray_cb_write_lock_mode"), "{stderr}");
}
