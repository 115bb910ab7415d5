//! `--timeseries FILE`: one format for real and simulated runs
//! (docs/timeseries.md). A seeded simulation's series is the same, line
//! for line, as the one kept in `tests/golden/` (run with
//! `LANEFS_BLESS=1` to write it anew after a change meant to move it); a
//! real run's series sums to the bytes IOR reports, per rank and per OST,
//! and counts the lock traffic its report counts; bad options are named.

use lanefs_ior::timeseries::TimeSeries;
use std::path::Path;
use std::process::{Command, Output};

fn lanefs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).env_remove("LANEFS_MDS").output().unwrap()
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn failed(out: &Output) -> String {
    assert!(!out.status.success(), "should have failed: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn total(series: &TimeSeries, group: &str) -> u64 {
    series.get(group).unwrap_or_else(|| panic!("no group {group}")).total()
}

/// The simulated run of the golden file: default locking on one shared
/// file, two ranks per node, so the clients' locks ping-pong.
const SIM: &str = "sim ior --cluster laptop --seed 3 --quiet -a POSIX -w -r -e -b 1m -t 256k -s 2 -N 4 \
    --tasks-per-node 2 --lanefs.stripe-count=2 --timeseries-interval 0.0005";

#[test]
fn a_seeded_simulation_writes_the_golden_series() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.jsonl");
    let mut args: Vec<&str> = SIM.split_whitespace().collect();
    args.extend(["--timeseries", path.to_str().unwrap()]);
    ok(&lanefs(&args));
    let text = std::fs::read_to_string(&path).unwrap();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/timeseries-sim.jsonl");
    if std::env::var_os("LANEFS_BLESS").is_some() {
        std::fs::write(&golden, &text).unwrap();
    }
    let want = std::fs::read_to_string(&golden).expect("the golden file (LANEFS_BLESS=1 writes it)");
    assert_eq!(text, want, "the series moved: if meant to, run with LANEFS_BLESS=1 and review the diff");
    // And what it says holds: 4 ranks x 2 MiB written and read.
    let series = TimeSeries::read_file(&path).unwrap();
    assert_eq!(series.source, "simulated");
    assert!(series.bins() > 3, "several bins");
    assert_eq!(total(&series, "rank_write_bytes"), 8 << 20);
    assert_eq!(total(&series, "rank_read_bytes"), 8 << 20);
    assert_eq!(total(&series, "ost_write_bytes"), 8 << 20, "every byte reached an OST");
    assert_eq!(series.get("client_enqueues").unwrap().head.members, 2, "a client per node");
    assert!(total(&series, "client_blocking_callbacks") > 0, "default locking on one file calls locks back");
}

#[test]
fn a_real_run_sums_to_the_bytes_ior_reports() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("real.jsonl");
    let real = "ior -a LANEFS -w -e -b 2m -t 256k -s 2 -N 4 --lanefs.osts=2 --lanefs.stripe-count=2 \
        --lanefs.stripe-size=1m --timeseries-interval 0.01 -O summaryFormat=JSON";
    let mut args: Vec<&str> = real.split_whitespace().collect();
    args.extend(["--timeseries", path.to_str().unwrap()]);
    let out = lanefs(&args);
    let report: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let series = TimeSeries::read_file(&path).unwrap();
    assert_eq!(series.source, "real");
    let written = 4 * 2 * (2u64 << 20);
    assert_eq!(total(&series, "rank_write_bytes"), written);
    for rank in 0..4 {
        let bins = series.bins();
        let mine: u64 = series.get("rank_write_bytes").unwrap().member(rank, bins).iter().sum();
        assert_eq!(mine, 2 * (2 << 20), "rank {rank}'s own bytes");
    }
    let lanefs = &report["lanefs"];
    assert_eq!(total(&series, "ost_write_bytes"), lanefs["ost_bytes_written"].as_u64().unwrap());
    assert_eq!(total(&series, "ost_write_bytes"), written, "-e: every byte on an OST");
    assert_eq!(series.get("ost_write_bytes").unwrap().head.members, 2);
    // The clients counted what the OSTs counted.
    assert_eq!(total(&series, "client_enqueues"), lanefs["lock_enqueues"].as_u64().unwrap());
    assert_eq!(total(&series, "client_blocking_callbacks"), lanefs["blocking_callbacks"].as_u64().unwrap());
}

#[test]
fn bad_options_are_named_with_the_fix() {
    let e = failed(&lanefs(&["sim", "ior", "--cluster", "laptop", "-w", "--timeseries", "bw.csv"]));
    assert!(e.contains("bw.csv") && e.contains("JSON Lines") && e.contains(".jsonl"), "{e}");
    let e = failed(&lanefs(&["sim", "ior", "--cluster", "laptop", "-w", "--timeseries-interval", "0.1"]));
    assert!(e.contains("without --timeseries FILE"), "{e}");
    let e = failed(&lanefs(&["ior", "-w", "--timeseries", "x.jsonl", "--timeseries-interval", "0"]));
    assert!(e.contains("--timeseries-interval 0"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.jsonl");
    let e = failed(&lanefs(&[
        "ior",
        "-a",
        "LANEFS",
        "-w",
        "-N",
        "2",
        "--lanefs.ranks=processes",
        "--timeseries",
        path.to_str().unwrap(),
    ]));
    assert!(e.contains("--lanefs.ranks=processes") && e.contains("mpirun"), "{e}");
}

#[test]
fn plot_draws_real_and_simulated_series_on_one_picture() {
    let dir = tempfile::tempdir().unwrap();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/timeseries-sim.jsonl");
    let golden = golden.to_str().unwrap();
    let svg = dir.path().join("both.svg");
    let png = dir.path().join("locks.png");
    let out = ok(&lanefs(&["plot", golden, golden, "--label", "a", "--label", "b", "-o", svg.to_str().unwrap()]));
    assert!(out.contains("both.svg"), "names what it wrote: {out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    for title in
        ["Bandwidth, all OSTs", "Bandwidth per OST", "Bandwidth per rank", "Lock traffic", "Lock traffic per client"]
    {
        assert!(text.contains(title), "{title} in the picture");
    }
    assert!(text.contains("a: blocking callbacks") && text.contains("b: write"), "each run's lines in the legend");
    ok(&lanefs(&["plot", golden, "--panels", "locks", "-o", png.to_str().unwrap()]));
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let e = failed(&lanefs(&["plot", golden, "-o", "x.gif"]));
    assert!(e.contains("x.gif") && e.contains(".png or .svg"), "{e}");
    let e = failed(&lanefs(&["plot", "/nonexistent.jsonl", "-o", "x.png"]));
    assert!(e.contains("/nonexistent.jsonl"), "{e}");
    let e = failed(&lanefs(&["plot", golden, "--panels", "speed", "-o", "x.png"]));
    assert!(e.contains("speed") && e.contains("bandwidth, osts, ranks, locks or clients"), "{e}");
}
