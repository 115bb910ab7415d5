//! `lanefs top` against a running cluster, its output piped (plain text):
//! an IOR load shows as write bandwidth and IOPS on the OSTs, a recording
//! replays as the live run showed it, and bad input is refused with the fix.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lanefs top ARGS` with stdout piped, clients looked for in `run_dir`.
fn top(run_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .arg("top")
        .args(args)
        .env("LANEFS_RUN_DIR", run_dir)
        .env_remove("LANEFS_MDS")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "lanefs top failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The frames of plain output: each frame's lines, its time line first.
fn frames(text: &str) -> Vec<Vec<&str>> {
    let mut frames: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        if line.starts_with("lanefs top ") {
            frames.push(Vec::new());
        }
        frames.last_mut().expect("output starts with a time line").push(line);
    }
    frames
}

/// `(write MiB/s, IOPS)` of each OST row of a frame; `None` for `-`.
fn ost_rates(frame: &[&str]) -> Vec<(Option<f64>, Option<f64>)> {
    frame
        .iter()
        .filter(|l| l.starts_with("lanefs-OST"))
        .map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            (fields[1].parse().ok(), fields[3].parse().ok())
        })
        .collect()
}

#[test]
fn an_ior_load_shows_as_write_bandwidth_and_iops() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let cluster = common::Cluster::start(&[]);
    let mds = cluster.mds_address();
    // Writes over and over (each repetition 2 x 32 MiB) until killed, so
    // that the load spans every interval below.
    let _ior = Killed(
        Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(["ior", "--cluster", &mds, "-a", "LANEFS", "-w", "-b", "32m", "-t", "1m", "-N", "2", "-i", "10000"])
            .args(["-o", "/top-test", "--lanefs.stripe-count=2"])
            .env("LANEFS_RUN_DIR", &run_dir)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Its ranks' clients listen once they are up.
    let deadline = Instant::now() + Duration::from_secs(20);
    while lanefs_client::control::client_sockets(&run_dir).is_empty() {
        assert!(Instant::now() < deadline, "IOR's clients never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = ok(&top(&run_dir, &["--mds", &mds, "-d", "1", "-n", "4"]));
    let frames = frames(&text);
    assert_eq!(frames.len(), 4, "{text}");
    assert!(frames[0][0].contains("first sample: no rates yet"), "{text}");
    assert!(ost_rates(&frames[0]).iter().all(|&rates| rates == (None, None)), "no rates in the first sample: {text}");
    assert_eq!(ost_rates(&frames[1]).len(), 2, "a row per OST: {text}");
    let moving = |frame: &Vec<&str>| {
        ost_rates(frame).iter().any(|&(write, iops)| write.is_some_and(|w| w > 0.0) && iops.is_some_and(|i| i > 0.0))
    };
    assert!(frames[1..3].iter().any(moving), "no OST wrote within two intervals of the first sample:\n{text}");
    assert!(text.lines().any(|l| l.starts_with("ffff")), "IOR's clients have rows: {text}");
}

#[test]
fn a_recording_replays_as_the_live_run_showed_it() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let cluster = common::Cluster::start(&[]);
    let mds = cluster.mds_address();
    let recording = dir.path().join("top.jsonl");
    let record = recording.to_str().unwrap();
    let live = ok(&top(&run_dir, &["--mds", &mds, "-d", "0.3", "-n", "3", "--record", record]));
    assert_eq!(frames(&live).len(), 3, "{live}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&recording).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read_to_string(&recording).unwrap().lines().count(), 4, "a header and 3 samples");
    // A recording is never written over.
    let again = top(&run_dir, &["--mds", &mds, "-n", "1", "--record", record]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("the file exists"), "{again:?}");
    // No cluster needed, and the same text, rates and all.
    drop(cluster);
    assert_eq!(ok(&top(&run_dir, &["--replay", record])), live);
    let two = ok(&top(&run_dir, &["--replay", record, "-n", "2"]));
    assert_eq!(frames(&two).len(), 2);
    assert!(live.starts_with(&two));
    // A damaged line is named.
    let text = std::fs::read_to_string(&recording).unwrap();
    let damaged: Vec<&str> = text.lines().enumerate().map(|(i, l)| if i == 2 { "{\"unix_ms\":" } else { l }).collect();
    std::fs::write(&recording, damaged.join("\n")).unwrap();
    let bad = top(&run_dir, &["--replay", record]);
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && stderr.contains("line 3: not a sample"), "{stderr}");
}

#[test]
fn bad_input_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], expected: &str| {
        let out = top(dir.path(), args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(expected), "{args:?}: {stderr}");
    };
    refused(&["-d", "0"], "give an interval from 0.1 to 3600 seconds");
    refused(&["-d", "1e9"], "give an interval from 0.1 to 3600 seconds");
    refused(&["-d", "soon"], "not a number of seconds");
    refused(&[], "pass --mds ADDR or set LANEFS_MDS");
    refused(&["--replay", "/nonexistent/top.jsonl"], "cannot read the recording /nonexistent/top.jsonl");
    refused(&["--replay", "x", "--record", "y"], "cannot be used with");
}
