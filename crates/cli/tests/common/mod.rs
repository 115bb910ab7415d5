//! Servers as processes of their own, for the tests that kill, stop and
//! load them: `lanefs mds` and `lanefs oss` on Unix sockets.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A server process that can be killed, stopped, continued and restarted
/// with the same command line.
pub struct Daemon {
    name: &'static str,
    args: Vec<String>,
    child: Option<Child>,
}

impl Daemon {
    pub fn start(name: &'static str, args: Vec<String>) -> Daemon {
        let mut daemon = Daemon { name, args, child: None };
        daemon.spawn();
        daemon
    }

    fn spawn(&mut self) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(&self.args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap_or_else(|| panic!("the {} says where it serves", self.name)).unwrap();
        assert!(first.starts_with("lanefs: "), "{}: {first}", self.name);
        // Keep reading its stdout so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        self.child = Some(child);
    }

    pub fn pid(&self) -> libc::pid_t {
        self.child.as_ref().expect("running").id() as libc::pid_t
    }

    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on a child of ours, which has not been reaped.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0, "signalling the {}", self.name);
    }

    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let _ = child.wait();
    }

    pub fn restart(&mut self) {
        self.spawn();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: as in `signal`; a stopped process must be continued
            // before SIGKILL is delivered... which SIGKILL does anyway.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// An MDS and an OSS with two OSTs, each a `lanefs` process of its own,
/// on Unix sockets in a temporary directory.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub mds: Daemon,
    pub oss: Daemon,
}

impl Cluster {
    /// Start the MDS, then the OSS with `oss_args` added to its command line.
    pub fn start(oss_args: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).display().to_string();
        let sock = |name: &str| format!("unix:{}", path(name));
        let mds = Daemon::start(
            "MDS",
            vec![
                "mds".into(),
                "--data".into(),
                path("mds"),
                "--osts".into(),
                "2".into(),
                "--listen".into(),
                sock("mds.sock"),
            ],
        );
        let oss = Daemon::start(
            "OSS",
            vec![
                "oss".into(),
                "--mds".into(),
                sock("mds.sock"),
                "--data".into(),
                path("oss"),
                "--ost".into(),
                "0,1".into(),
                "--listen".into(),
                sock("oss.sock"),
            ]
            .into_iter()
            .chain(oss_args.iter().map(|a| a.to_string()))
            .collect(),
        );
        Cluster { dir, mds, oss }
    }

    pub fn mds_address(&self) -> String {
        format!("unix:{}", self.dir.path().join("mds.sock").display())
    }

    /// The OSS's socket file.
    pub fn oss_socket(&self) -> std::path::PathBuf {
        self.dir.path().join("oss.sock")
    }
}

impl Daemon {
    /// A field of the process's `/proc/PID/status` in bytes (`VmHWM`: its
    /// peak resident memory; `VmRSS`: its resident memory now).
    pub fn memory_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).expect("the field is there");
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    }
}
