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
