//! lanefs in the shell: completion scripts and man pages made from its
//! command definitions, quiet success when the reader of its output goes
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

/// The commands users type, the hand-parsed ones (`ior`, `sim` and its
/// `ior` and `presets`) among them.
const COMMANDS: &[&str] = &[
    "demo",
    "up",
    "mds",
    "oss",
    "key",
    "ior",
    "sim",
    "swarm",
    "mount",
    "umount",
    "getstripe",
    "setstripe",
    "find",
    "osts",
    "pool_new",
    "pool_list",
    "ls",
    "lctl",
    "completions",
    "man",
];

#[test]
fn bash_completions_offer_every_command() {
    let script = ok(&lanefs(&["completions", "bash"]));
    assert!(script.contains("complete -F _lanefs"), "{script}");
    for name in COMMANDS {
        assert!(script.contains(&format!("lanefs__subcmd__{name}")), "{name} missing");
    }
    // `lanefs sim` parses its arguments by hand; its commands complete all the same.
    assert!(script.contains("lanefs__subcmd__sim__subcmd__ior"), "sim ior missing");
    assert!(script.contains("lanefs__subcmd__sim__subcmd__presets"), "sim presets missing");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let script = ok(&lanefs(&["completions", shell]));
        assert!(script.contains("setstripe") && script.contains("presets"), "{shell}: {script}");
    }
    assert!(!lanefs(&["completions", "tcsh"]).status.success());
}

/// What bash offers for a line typed so far (the completion function run
/// as bash runs it on TAB).
fn bash_offers(script: &str, line: &[&str]) -> Vec<String> {
    let words = line.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" ");
    let (cur, prev) = (line[line.len() - 1], line[line.len() - 2]);
    let driver = format!(
        "{script}\nCOMP_WORDS=({words}); COMP_CWORD={}; COMP_LINE='{}'; _lanefs lanefs '{cur}' '{prev}'; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        line.len() - 1,
        line.join(" ")
    );
    let out = Command::new("bash").arg("-c").arg(driver).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect()
}

/// bash completes IOR's options after `lanefs ior`, the shipped clusters
/// after `lanefs sim ior --cluster`, and never offers a rank's process.
#[test]
fn bash_completes_ior_options_and_cluster_names_and_no_hidden_command() {
    let script = ok(&lanefs(&["completions", "bash"]));
    let offered = bash_offers(&script, &["lanefs", "ior", "--block"]);
    assert_eq!(offered, ["--blockSize"], "{offered:?}");
    let offered = bash_offers(&script, &["lanefs", "ior", "--lanefs.lock"]);
    assert_eq!(offered, ["--lanefs.lock-mode"], "{offered:?}");
    let offered = bash_offers(&script, &["lanefs", "sim", "ior", "--cluster", "lap"]);
    assert_eq!(offered, ["laptop"], "{offered:?}");
    let offered = bash_offers(&script, &["lanefs", "io"]);
    assert_eq!(offered, ["ior"], "no ior-rank: {offered:?}");
}

/// `lanefs sim presets NAME` prints that cluster's description, to copy
/// and change; an unknown name is refused with the names there are.
#[test]
fn a_preset_prints_whole_and_an_unknown_one_is_refused() {
    let text = ok(&lanefs(&["sim", "presets", "laptop"]));
    assert!(text.contains("[cluster]") && text.contains("laptop"), "{text}");
    let list = ok(&lanefs(&["sim", "presets"]));
    assert!(list.lines().count() > 1 && list.starts_with(|c: char| c.is_ascii_lowercase()), "{list}");
    let out = lanefs(&["sim", "presets", "nosuch"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("no preset \"nosuch\"") && said.contains("laptop"), "{said}");
}

#[test]
fn man_pages_are_roff_with_a_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    ok(&lanefs(&["man", pages.to_str().unwrap()]));
    let page = |name: &str| std::fs::read_to_string(pages.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let th = |text: &str| text.lines().find(|l| l.starts_with(".TH ")).map(str::to_string);
    let top = page("lanefs.1");
    assert!(th(&top).is_some_and(|l| l.starts_with(".TH lanefs 1")), "{top}");
    assert!(top.contains(".SH SUBCOMMANDS") && top.contains("lanefs\\-sim(1)"), "{top}");
    for name in COMMANDS {
        let text = page(&format!("lanefs-{name}.1"));
        assert!(th(&text).is_some_and(|l| l.starts_with(&format!(".TH lanefs-{name} 1"))), "{name}: {text}");
        assert!(text.contains(".SH NAME\n") && text.contains(".SH SYNOPSIS\n"), "{name}: {text}");
    }
    // Hand-parsed options, as the commands' -h prints them, unfilled.
    let ior = page("lanefs-ior.1");
    assert!(ior.contains(".SH \"IOR OPTIONS\"\n.nf\n") && ior.contains("\\-\\-blockSize=N"), "{ior}");
    let sim_ior = page("lanefs-sim-ior.1");
    assert!(sim_ior.contains("\\-\\-cluster NAME|FILE.toml"), "{sim_ior}");
    assert!(pages.join("lanefs-sim-presets.1").exists() && pages.join("lanefs-key-new.1").exists());
    // A rank's process is started by lanefs ior, not by users: no page.
    assert!(!pages.join("lanefs-ior-rank.1").exists());
    assert!(!pages.join("lanefs-help.1").exists());
    if let Ok(groff) = Command::new("groff").args(["-man", "-ww", "-z"]).arg(pages.join("lanefs-sim.1")).output() {
        assert!(groff.status.success() && groff.stderr.is_empty(), "{}", String::from_utf8_lossy(&groff.stderr));
    }

    // `-`: the first page on stdout, nothing written.
    let here = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs")).args(["man", "-"]).current_dir(here.path()).output().unwrap();
    let text = ok(&out);
    assert_eq!(th(&text), th(&top), "{text}");
    assert_eq!(std::fs::read_dir(here.path()).unwrap().count(), 0);
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
        &["completions", "bash"],
        &["man", "-"],
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

/// A run of a few seconds of wall time in a debug build, which checks every
/// client and OST after each input: half a million 4 KiB writes.
const LONG_SIM: &[&str] = &[
    "sim",
    "ior",
    "--cluster",
    "cray-xc40-24ost",
    "-a",
    "POSIX",
    "-w",
    "-b",
    "256m",
    "-t",
    "4k",
    "-s",
    "1",
    "-N",
    "8",
];

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
        assert!(bytes.ends_with(" of 2.00 GiB"), "{line}");
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
