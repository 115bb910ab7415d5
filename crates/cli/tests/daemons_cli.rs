//! `lanefs up`, `lanefs mds` and `lanefs oss` on data another server is
//! using: each refuses at once, naming the directory and the server in
//! the way, and the running file system is untouched.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn lanefs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lanefs"))
}

struct Up {
    child: Child,
    mds: String,
    _stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn up(dir: &Path) -> Up {
    let mut child = lanefs().args(["up", "--osts", "2", "--data"]).arg(dir).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mds = loop {
        let line = lines.next().expect("lanefs up prints its address").unwrap();
        if let Some(a) = line.strip_prefix("export LANEFS_MDS=") {
            break a.to_string();
        }
    };
    Up { child, mds, _stdout: lines }
}

/// Run `command`, which must end by itself within 20 s.
fn run_briefly(command: &mut Command) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{command:?} kept running: it should have refused at once");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn refused(command: &mut Command, parts: &[&str]) {
    let out = run_briefly(command);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{command:?} should fail");
    for part in parts {
        assert!(err.contains(part), "{command:?}: {err:?} lacks {part:?}");
    }
}

#[test]
fn a_second_server_on_data_in_use_refuses_and_the_first_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let first = up(dir.path());
    let pid = format!("process {}", first.child.id());
    let data = dir.path().display().to_string();
    let other = tempfile::tempdir().unwrap();
    let elsewhere = |name: &str| format!("unix:{}", other.path().join(name).display());
    refused(lanefs().args(["up", "--osts", "2", "--data"]).arg(dir.path()), &[&data, "the MDS", &pid, &first.mds]);
    let ost = dir.path().join("OST0001").display().to_string();
    refused(
        lanefs()
            .args(["oss", "--mds", &first.mds, "--ost", "1", "--listen", &elsewhere("oss.sock"), "--data"])
            .arg(dir.path()),
        &[&ost, "the OSS", &pid],
    );
    refused(
        lanefs().args(["mds", "--osts", "2", "--listen", &elsewhere("mds.sock"), "--data"]).arg(dir.path()),
        &[&data, "the MDS", &pid],
    );
    // The first still serves, on its own sockets.
    let out = run_briefly(lanefs().args(["mkdir", "/still"]).env("LANEFS_MDS", &first.mds));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run_briefly(lanefs().args(["ls", "/"]).env("LANEFS_MDS", &first.mds));
    assert!(String::from_utf8_lossy(&out.stdout).contains("still"));
}

#[test]
fn bad_limits_are_refused_before_any_server_starts() {
    let dir = tempfile::tempdir().unwrap();
    refused(lanefs().args(["up", "--idle-timeout", "0", "--data"]).arg(dir.path()), &["--idle-timeout 0"]);
    refused(
        lanefs().args(["up", "--connections-max", "0", "--data"]).arg(dir.path()),
        &["--connections-max 1 or more"],
    );
    assert!(!dir.path().join("mds.db").exists(), "nothing was started");
}

/// `lanefs oss` started before its MDS waits for it, saying so, and
/// registers once the MDS is up: a file can then be written and read.
#[test]
fn an_oss_started_before_its_mds_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let sock = |name: &str| format!("unix:{}", dir.path().join(name).display());
    let data = |name: &str| dir.path().join(name).display().to_string();
    let mut oss = lanefs()
        .args(["oss", "--mds", &sock("mds.sock"), "--ost", "0,1", "--listen", &sock("oss.sock"), "--data"])
        .arg(data("oss"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = BufReader::new(oss.stderr.take().unwrap()).lines();
    let waiting = said.next().expect("the OSS says it waits").unwrap();
    assert!(waiting.contains("waiting for the MDS at") && waiting.contains(&sock("mds.sock")), "{waiting}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(oss.try_wait().unwrap().is_none(), "the OSS waits for its MDS instead of exiting");
    let mut mds = lanefs()
        .args(["mds", "--osts", "2", "--listen", &sock("mds.sock"), "--data"])
        .arg(data("mds"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(oss.stdout.take().unwrap()).lines();
    let registered = out.next().expect("the OSS says it registered").unwrap();
    assert!(registered.contains("registered with"), "{registered}");
    let written = lanefs()
        .args(["ior", "-a", "LANEFS", "-w", "-r", "-W", "-b", "1m", "-t", "256k", "-N", "2", "--lanefs.stripe-count=2"])
        .env("LANEFS_MDS", sock("mds.sock"))
        .output()
        .unwrap();
    let _ = (mds.kill(), oss.kill(), mds.wait(), oss.wait());
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
}

/// An MDS that never comes: `lanefs oss` gives up after its timeout and
/// says what to do.
#[test]
fn an_oss_whose_mds_never_comes_gives_up_after_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let sock = |name: &str| format!("unix:{}", dir.path().join(name).display());
    let started = Instant::now();
    refused(
        lanefs()
            .args(["oss", "--timeout", "1", "--mds", &sock("mds.sock"), "--ost", "0", "--listen", &sock("oss.sock")])
            .arg("--data")
            .arg(dir.path().join("oss")),
        &["waiting for the MDS", "gave up after 1s", "start the MDS first"],
    );
    assert!(started.elapsed() < Duration::from_secs(10), "gave up after {:?}", started.elapsed());
}
