//! lanefs in the shell: progress lines in logs.

use std::process::{Command, Output};

fn lanefs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).output().expect("lanefs runs")
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).expect("UTF-8 on stdout")
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
