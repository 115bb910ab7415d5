//! io500's `ior-easy` and `ior-hard` phases, with the command lines io500
//! builds (io500 `src/phase_ior_easy.c`, `phase_ior_hard.c` and their
//! `_write.c`/`_read.c`: `--dataPacketType=timestamp -C -Q 1 -g -G <n> -k -e
//! -o ... -O stoneWallingStatusFile=...`, then `-w -D <s> -O
//! stoneWallingWearOut=1` or `-r -R`, and `-O saveRankPerformanceDetailsCSV=`),
//! at small sizes, on `-a POSIX` and on `-a LANEFS`: each write stores its
//! transfer count, each read (another run, as in io500) reads back exactly
//! that much and checks it, and the reports parse as IOR's.

mod common;

use common::Cluster;
use std::path::Path;
use std::process::Command;

/// The io500 lines for `data` (where files go) and `results` (status and
/// CSV files), on `api`; ranks are threads (`-N 2`).
fn io500_lines(api: &str, data: &str, results: &Path) -> [(String, Vec<String>); 4] {
    let res = results.display();
    let easy = format!(
        "--dataPacketType=timestamp -C -Q 1 -g -G 1234 -k -e -o {data}/ior-easy/ior_file_easy \
         -O stoneWallingStatusFile={res}/ior-easy.stonewall -t 64k -b 4m -F"
    );
    let hard = format!(
        "--dataPacketType=timestamp -C -Q 1 -g -G=5678 -k -e -o {data}/ior-hard/file \
         -O stoneWallingStatusFile={res}/ior-hard.stonewall -t 47008 -b 47008 -s 200"
    );
    let csv = |phase: &str| format!("-O saveRankPerformanceDetailsCSV={res}/{phase}.csv");
    let line = |name: &str, text: String| (name.to_string(), text.split_whitespace().map(str::to_string).collect());
    [
        line(
            "ior-easy-write",
            format!("{easy} -w -D 2 -O stoneWallingWearOut=1 -a {api} {} -N 2", csv("ior-easy-write")),
        ),
        line(
            "ior-hard-write",
            format!("{hard} -w -D 2 -a {api} {} -O stoneWallingWearOut=1 -N 2", csv("ior-hard-write")),
        ),
        line("ior-easy-read", format!("{easy} -r -R -a {api} {} -N 2", csv("ior-easy-read"))),
        line("ior-hard-read", format!("{hard} -r -R -a {api} {} -N 2", csv("ior-hard-read"))),
    ]
}

/// The `aggs(MiB)` column of the summary row of `operation` (IOR's text report).
fn aggregate_mib(report: &str, operation: &str) -> f64 {
    let header = report.lines().position(|l| l.starts_with("Operation ")).expect("a summary");
    let names: Vec<&str> = report.lines().nth(header).unwrap().split_whitespace().collect();
    let row = report.lines().skip(header + 1).find(|l| l.starts_with(operation)).expect("the operation's row");
    let values: Vec<&str> = row.split_whitespace().collect();
    let column = names.iter().position(|n| *n == "aggs(MiB)").unwrap();
    values[column].parse().unwrap()
}

fn run_io500(api: &str, data: &str, env: &[(&str, &str)]) {
    let results = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    for (phase, args) in io500_lines(api, data, results.path()) {
        let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .arg("ior")
            .args(&args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "error")
            .output()
            .unwrap();
        let report = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{api} {phase}: {}\n{report}", String::from_utf8_lossy(&out.stderr));
        assert!(!report.contains("WARNING: incorrect data"), "{api} {phase}: {report}");
        let csv = std::fs::read_to_string(results.path().join(format!("{phase}.csv"))).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "access,rank,runtime-with-openclose,runtime,throughput-withopenclose,throughput");
        assert_eq!(lines.len(), 3, "{api} {phase}: a line per rank: {csv}");
        let kind = if phase.ends_with("write") { "write" } else { "read" };
        assert!(lines[1].starts_with(&format!("{kind},0,")) && lines[2].starts_with(&format!("{kind},1,")), "{csv}");
        if kind == "write" {
            assert!(report.contains("stonewalling pairs accessed min: "), "{api} {phase}: {report}");
            let stored = format!("{}.stonewall", phase.trim_end_matches("-write"));
            let pairs: u64 = std::fs::read_to_string(results.path().join(stored)).unwrap().parse().unwrap();
            assert!(pairs > 0);
            written.push(aggregate_mib(&report, "write"));
        } else {
            // The read moves what the write stored, no more.
            let index = if phase.starts_with("ior-easy") { 0 } else { 1 };
            assert_eq!(aggregate_mib(&report, "read"), written[index], "{api} {phase}: {report}");
        }
    }
}

#[test]
fn io500_ior_easy_and_ior_hard_run_on_posix() {
    let data = tempfile::tempdir().unwrap();
    for dir in ["ior-easy", "ior-hard"] {
        std::fs::create_dir(data.path().join(dir)).unwrap();
    }
    run_io500("POSIX", &data.path().display().to_string(), &[]);
}

#[test]
fn io500_ior_easy_and_ior_hard_run_on_lanefs() {
    let cluster = Cluster::start(&[]);
    let mds = cluster.mds_address();
    for dir in ["/ior-easy", "/ior-hard"] {
        let out =
            Command::new(env!("CARGO_BIN_EXE_lanefs")).args(["mkdir", dir]).env("LANEFS_MDS", &mds).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    run_io500("LANEFS", "", &[("LANEFS_MDS", &mds)]);
}
