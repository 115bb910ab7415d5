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
fn the_write_timers_reach_the_json_summary_as_the_block_prints_them() {
    let out =
        ior("*:striping_factor=2:striping_unit=65536:cray_cb_write_lock_mode=2", &["-c", "-O", "summaryFormat=JSON"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let writes = json["mpiio_timers"]["writes"].as_array().expect("the timers in the summary");
    assert_eq!(writes.len(), 1, "one collective write phase: {writes:?}");
    let phases: Vec<&str> =
        writes[0]["phases"].as_array().unwrap().iter().map(|p| p["phase"].as_str().unwrap()).collect();
    assert!(phases.contains(&"lock mode") && phases.contains(&"data send"), "{phases:?}");
    // The same numbers as the block on stderr.
    let raw = writes[0]["raw_write_bw_mib"].as_f64().unwrap();
    assert!(stderr.contains(&format!("|   raw write BW (MiB/s)  = {raw:>12.3}")), "{raw}: {stderr}");
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

/// As MPICH: an unknown hint is ignored, with one warning naming it and the
/// closest known hint, by the real run and by the simulator alike.
#[test]
fn an_unknown_hint_is_ignored_with_one_warning() {
    let out = ior("*:cb_node=2:striping_unit=65536", &["-c"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let warning = "lanefs: warning: ignoring unknown MPI-IO hint `cb_node` (did you mean `cb_nodes`?)";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
    let sim = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["sim", "ior", "--cluster", "laptop", "--quiet", "-a", "MPIIO", "-c", "-w", "-N", "4"])
        .args(["--hints", "cb_node=2"])
        .env_remove("MPICH_MPIIO_HINTS")
        .env_remove("LANEFS_MPIIO_HINTS")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&sim);
    assert!(sim.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
}

/// `MPICH_MPIIO_HINTS_DISPLAY=1` prints Cray MPT's environment block once,
/// then each file's hints, in the real run and the simulator alike.
#[test]
fn the_hints_display_shows_the_environment_once_then_the_hints() {
    let hints = "*:striping_factor=2:striping_unit=65536";
    let ior = ["-a", "MPIIO", "-c", "-w", "-r", "-b", "256k", "-t", "64k", "-N", "2", "-i", "2"];
    let run = |command: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(command)
            .args(ior)
            .env("MPICH_MPIIO_HINTS", hints)
            .env("MPICH_MPIIO_HINTS_DISPLAY", "1")
            .env_remove("LANEFS_MPIIO_HINTS")
            .env_remove("LANEFS_MPIIO_HINTS_DISPLAY")
            .output()
            .unwrap()
    };
    let (real, sim) = (run(&["ior"]), run(&["sim", "ior", "--cluster", "laptop"]));
    for out in [real, sim] {
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert_eq!(stderr.matches("PE 0: MPICH MPIIO environment settings:\n").count(), 1, "{stderr}");
        let environment = stderr.find("PE 0: MPICH MPIIO environment settings:").unwrap();
        let first_hints = stderr.find("PE 0: MPIIO hints for testFile:").expect("the file's hints");
        assert!(environment < first_hints, "{stderr}");
        assert!(stderr.contains(&format!("PE 0:   MPICH_MPIIO_HINTS                         = {hints}\n")), "{stderr}");
        assert!(stderr.contains("PE 0:   MPICH_MPIIO_HINTS_DISPLAY                 = 1\n"), "{stderr}");
        assert!(stderr.contains("PE 0:   MPICH_MPIIO_STATS                         = 0\n"), "{stderr}");
    }
}

#[test]
fn a_bad_hint_value_is_refused_by_name() {
    let out = ior("*:cray_cb_write_lock_mode=7", &["-c"]);
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("cray_cb_write_lock_mode"), "{stderr}");
}

/// `MPICH_MPIIO_STATS` and the `lanefs.*` lock figures of one run.
fn stats_and_locks(command: &[&str], hints: &str) -> (String, Vec<String>) {
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(command)
        .env("MPICH_MPIIO_HINTS", hints)
        .env("MPICH_MPIIO_STATS", "1")
        .env("MPICH_MPIIO_AGGREGATOR_PLACEMENT_DISPLAY", "1")
        .env_remove("MPICH_MPIIO_TIMERS")
        .env_remove("LANEFS_MPIIO_HINTS")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{command:?}: {stdout}\n{stderr}");
    let wanted = ["lanefs.lock_enqueues", "lanefs.lockahead_sent", "lanefs.blocking_callbacks", "lanefs.lock_grants"];
    let mut locks: Vec<String> =
        stdout.lines().filter(|l| wanted.iter().any(|w| l.starts_with(w))).map(str::to_string).collect();
    // The placement table's aggregator and rank columns (node names differ:
    // the simulator's nids, this host's name).
    let placement = stderr.lines().map(|l| l.split_whitespace().take(2).collect::<Vec<_>>());
    locks.extend(placement.filter(|w| w.len() == 2 && w.iter().all(|x| x.parse::<u32>().is_ok())).map(|w| w.join(" ")));
    (stderr.lines().filter(|l| l.starts_with('|') || l.starts_with('+')).collect::<Vec<_>>().join("\n"), locks)
}

/// The plan is the simulator's: for one IOR command and hint set, the real
/// run and `lanefs sim ior` (the `laptop` preset: 4 OSTs, 2 ranks a node)
/// print the same `MPICH_MPIIO_STATS` block (aggregators, stripe-sized
/// writes, aggregators active, sizes), place the aggregators on the same
/// ranks and take the same locks.
#[test]
fn the_real_run_plans_and_locks_as_the_simulator() {
    let ior = ["-a", "MPIIO", "-c", "-w", "-b", "1m", "-t", "256k", "-s", "2", "-N", "8", "--tasks-per-node", "2"];
    for hints in [
        "*:striping_factor=4:striping_unit=262144",
        "*:striping_factor=4:striping_unit=262144:cb_nodes=2",
        "*:striping_factor=4:striping_unit=262144:cray_cb_write_lock_mode=2:cray_cb_nodes_multiplier=2",
        "*:striping_factor=2:striping_unit=131072:cray_cb_write_lock_mode=2:romio_lustre_cb_lock_ahead_num_extents=3",
    ] {
        let real: Vec<&str> = ["ior"].into_iter().chain(ior).collect();
        let sim: Vec<&str> = ["sim", "ior", "--cluster", "laptop", "--quiet"].into_iter().chain(ior).collect();
        let (real_stats, real_locks) = stats_and_locks(&real, hints);
        let (sim_stats, sim_locks) = stats_and_locks(&sim, hints);
        assert!(real_stats.contains("| MPIIO write access patterns for testFile"), "{real_stats}");
        assert_eq!(real_stats, sim_stats, "{hints}");
        assert!(real_locks.len() > 4, "lock figures and the placement table: {real_locks:?}");
        assert_eq!(real_locks, sim_locks, "{hints}");
    }
}

/// IOR's `--mpiio.showHints` (`-H`): the hints given, then the file's.
#[test]
fn show_hints_prints_the_hints_given_and_those_in_use() {
    for flag in ["-H", "--mpiio.showHints"] {
        let out = ior("*:striping_factor=2", &["-c", flag]);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.contains("\nhints passed to MPI_File_open() {\n\tstriping_factor = 2\n}\n"), "{stdout}");
        assert!(stdout.contains("\nhints returned from opened file {\n\tcb_buffer_size = "), "{stdout}");
    }
}

/// A script's `api=LANEFS` starts the cluster it needs; an API lanefs ior
/// does not have is refused by name, with the others listed.
#[test]
fn a_scripts_api_is_served_and_an_unknown_one_refused_by_name() {
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), "IOR START\n  api=LANEFS\n  blockSize=64k\n  transferSize=64k\n  RUN\nIOR STOP\n")
        .unwrap();
    let lanefs = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_lanefs")).arg("ior").args(args).output().unwrap();
    let out = lanefs(&["-a", "LANEFS", "-f", script.path().to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("api                 : LANEFS"), "{stdout}");
    let out = lanefs(&["-a", "HDF5", "-w"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success() && stderr.contains("-a HDF5: lanefs ior has POSIX, LANEFS, MPIIO"), "{stderr}");
}
