//! lanefs in the shell: quiet success when the reader of its output goes
//! away (`| head -1`), and progress lines in logs.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

fn lanefs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).output().expect("lanefs runs")
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("UTF-8 on stdout")
}

/// Runs `args` with stdout a pipe nobody reads any more (as `lanefs ... |
/// head -1` once head is done): its exit status and stderr.
fn into_a_closed_pipe(args: &[&str]) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_closed_pipe_ends_quietly_and_successfully() {
    let sim = ["sim", "ior", "--cluster", "laptop", "-a", "MPIIO", "-c", "-w", "-b", "1m", "-t", "1m", "-s", "4"];
    let cases: &[&[&str]] = &[
        &[&sim[..], &["-N", "8"]].concat(),
        &[&sim[..], &["-N", "8", "-O", "summaryFormat=JSON"]].concat(),
        &["help"],
        &["--help"],
        &["sim", "presets"],
        &["sim", "--help"],
        &["ior", "-h"],
        &["swarm", "--seed", "1"],
    ];
    for args in cases {
        let (status, stderr) = into_a_closed_pipe(args);
        assert_eq!(status.code(), Some(0), "lanefs {}: {status}, stderr: {stderr}", args.join(" "));
        assert_eq!(stderr, "", "lanefs {}", args.join(" "));
    }
}

#[test]
fn reading_one_line_and_going_away_ends_quietly() {
    // A report longer than a pipe holds (a few hundred KiB), so that lanefs
    // is still writing when the reader goes.
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["sim", "ior", "--cluster", "laptop", "-a", "POSIX", "-w", "-r", "-b", "1m", "-t", "1m", "-s", "4"])
        .args(["-N", "8", "-i", "1000", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("IOR-"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn errors_are_still_reported_when_stdout_is_closed() {
    // Only the reader's going away is success: other errors are reported.
    let (status, stderr) = into_a_closed_pipe(&["sim", "ior", "--cluster", "no-such-cluster", "-w"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no-such-cluster"), "{stderr}");
}

/// A run of a few seconds of wall time: 2 million 4 KiB writes.
const LONG_SIM: &[&str] =
    &["sim", "ior", "--cluster", "cray-xc40-24ost", "-a", "POSIX", "-w", "-b", "1g", "-t", "4k", "-s", "1", "-N", "8"];

#[test]
fn progress_goes_to_a_log_as_plain_lines() {
    // stderr is a pipe here, as in a log or a batch job's output file.
    let out = lanefs(LONG_SIM);
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("simulating write: ")).collect();
    assert!(!lines.is_empty(), "no progress on stderr: {stderr}");
    for line in &lines {
        let (bytes, simulated) = line["simulating write: ".len()..].split_once(", simulated ").expect(line);
        assert!(bytes.ends_with(" of 8.00 GiB"), "{line}");
        assert!(simulated.ends_with(" s") && simulated[..simulated.len() - 2].parse::<f64>().is_ok(), "{line}");
    }
    // No terminal's control sequences in a log.
    assert!(!stderr.contains('\x1b') && !stderr.contains('\r'), "{stderr:?}");

    let mut quiet = LONG_SIM.to_vec();
    quiet.push("--quiet");
    let out = lanefs(&quiet);
    ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "--quiet shows no progress");
}
