//! `lanefs sim`: presets, IOR runs on a simulated cluster, hints from the
//! environment, Cray-style reports, the time series, and bad input.

use serde_json::Value;
use std::process::{Command, Output};

fn lanefs(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lanefs"));
    cmd.args(args);
    for var in ["LANEFS_MPIIO_HINTS", "MPICH_MPIIO_HINTS", "LANEFS_MPIIO_STATS", "MPICH_MPIIO_STATS"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("lanefs runs")
}

fn ok(out: &Output) -> (String, String) {
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "failed:\n{stdout}\n{stderr}");
    (stdout.into_owned(), stderr.into_owned())
}

fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "should have failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const COLL: &[&str] =
    &["sim", "ior", "--cluster", "laptop", "-a", "MPIIO", "-c", "-w", "-e", "-b", "1m", "-t", "1m", "-s", "4"];

#[test]
fn presets_are_listed() {
    let (stdout, _) = ok(&lanefs(&["sim", "presets"], &[]));
    for name in ["cray-xc40-24ost", "frontier", "laptop"] {
        assert!(stdout.contains(name), "{stdout}");
    }
}

#[test]
fn json_report_with_hints_from_the_environment() {
    let mut args = COLL.to_vec();
    args.extend(["-N", "8", "-O", "summaryFormat=JSON"]);
    let env = [("MPICH_MPIIO_HINTS", "*.h5:cb_nodes=1,testFile:striping_factor=2:cray_cb_write_lock_mode=2")];
    let (stdout, _) = ok(&lanefs(&args, &env));
    let j: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(j["lanefs"]["blocking_callbacks"], 0);
    assert_eq!(j["lanefs"]["lockahead_sent"], 32, "lockahead from the matching pattern: {}", j["lanefs"]);
    assert_eq!(j["sim"]["cluster"], "laptop");
    assert!(j["sim"]["events"].as_u64().unwrap() > 0);
    // The report names the whole invocation, ready to run again.
    let want = format!("lanefs {}", args.join(" "));
    assert_eq!(j["Command line"], want.as_str());
    assert_eq!(
        j["summary"][0]["tPN"].as_u64().or_else(|| j["tests"][0]["Parameters"]["tasksPerNode"].as_u64()),
        Some(2)
    );
    // LANEFS_MPIIO_HINTS wins over MPICH_MPIIO_HINTS.
    let env = [("LANEFS_MPIIO_HINTS", "*:striping_factor=2"), env[0]];
    let (stdout, _) = ok(&lanefs(&args, &env));
    let j: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(j["lanefs"]["lockahead_sent"], 0);
}

/// `--check` is taken and changes nothing in the report. (This binary is a
/// debug build, which checks either way; bench/RESULTS.md compares a
/// release build's run with and without it.)
#[test]
fn a_checked_run_simulates_the_same_run() {
    let mut args = COLL.to_vec();
    args.extend(["-N", "8", "-O", "summaryFormat=JSON", "--seed", "7"]);
    let plain: Value = serde_json::from_str(&ok(&lanefs(&args, &[])).0).unwrap();
    args.push("--check");
    let checked: Value = serde_json::from_str(&ok(&lanefs(&args, &[])).0).unwrap();
    for key in ["events", "simulated_s"] {
        assert!(plain["sim"][key].is_number(), "{key}: {}", plain["sim"]);
        assert_eq!(plain["sim"][key], checked["sim"][key], "{key}");
    }
    assert_eq!(plain["lanefs"], checked["lanefs"]);
    assert_eq!(plain["summary"][0]["bwMeanMIB"], checked["summary"][0]["bwMeanMIB"]);
}

#[test]
fn cray_stats_and_timers_on_stderr() {
    let mut args = COLL.to_vec();
    args.extend(["-N", "8", "--hints", "striping_factor=2:cray_cb_write_lock_mode=2"]);
    let env = [("LANEFS_MPIIO_STATS", "1"), ("MPICH_MPIIO_TIMERS", "1")];
    let (stdout, stderr) = ok(&lanefs(&args, &env));
    assert!(stdout.contains("write "), "IOR's rows on stdout: {stdout}");
    assert!(stderr.contains("| MPIIO write access patterns for testFile"), "{stderr}");
    assert!(stderr.contains("|   collective writes       = 32"), "{stderr}");
    assert!(stderr.contains("| MPIIO write by phases, writers only, for testFile"), "{stderr}");
    assert!(stderr.contains("lock mode"), "lockahead adds the lock mode line: {stderr}");
}

#[test]
fn bad_input_is_named() {
    let e = failed(&lanefs(&["sim", "ior", "--cluster", "nosuch", "-w"], &[]));
    assert!(e.contains("nosuch") && e.contains("laptop"), "{e}");
    let e = failed(&lanefs(&["sim", "ior", "-w"], &[]));
    assert!(e.contains("--cluster is required"), "{e}");
    let mut args = COLL.to_vec();
    args.extend(["--hints", "cray_cb_write_lock_mode=7"]);
    let e = failed(&lanefs(&args, &[]));
    assert!(e.contains("cray_cb_write_lock_mode") && e.contains('7'), "{e}");
    let e = failed(&lanefs(COLL, &[("MPICH_MPIIO_HINTS", "testFile:cb_nodes")]));
    assert!(e.contains("MPICH_MPIIO_HINTS"), "{e}");
    let e = failed(&lanefs(&["sim", "ior", "--cluster", "laptop", "-a", "POSIX", "-w", "--hints", "cb_nodes=2"], &[]));
    assert!(e.contains("need -a MPIIO"), "{e}");
    let e = failed(&lanefs(&["sim", "ior", "--cluster", "laptop", "-w", "--lanefs.lock-mode=fast"], &[]));
    assert!(e.contains("default, noexpand, lockahead or group"), "{e}");
    let e = failed(&lanefs(&["sim", "frobnicate"], &[]));
    assert!(e.contains("lanefs sim ior"), "{e}");
}

#[test]
fn the_real_runs_command_line_runs_simulated_as_it_is() {
    // `lanefs ior -a LANEFS ... --lanefs.osts=4` with `sim ior --cluster`
    // put in front: the laptop preset has 4 OSTs.
    let line = [
        "-a",
        "LANEFS",
        "-w",
        "-b",
        "4m",
        "-t",
        "1m",
        "-N",
        "2",
        "--lanefs.stripe-count=4",
        "-O",
        "summaryFormat=JSON",
    ];
    let mut args = vec!["sim", "ior", "--cluster", "laptop"];
    args.extend(line);
    args.push("--lanefs.osts=4");
    let (stdout, _) = ok(&lanefs(&args, &[]));
    let j: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(j["lanefs"]["ost_bytes_written"], 8u64 << 20, "{}", j["lanefs"]);
    // Another OST count than the description's is refused, saying both.
    args.pop();
    args.push("--lanefs.osts=8");
    let err = failed(&lanefs(&args, &[]));
    assert!(
        err.contains("--lanefs.osts=8") && err.contains("has 4 OSTs") && err.contains("calibrate --osts 8"),
        "{err}"
    );
}
