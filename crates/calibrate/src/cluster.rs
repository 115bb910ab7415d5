//! The servers measured: a real lanefs file system (`lanefs up`: the MDS
//! and one OSS with the preset's OSTs, on Unix sockets), run as a child
//! process of calibration with its data in a private directory inside the
//! data directory, so that its CPU time is its own and apart from the
//! client's, which runs in the calibrating process.
//!
//! Its OSTs sync nothing on a lock cancel (`--sync-lock-cancel never`):
//! a cancel's `fdatasync` is the journal commit the preset's
//! `journal_commit_us` already stands for, and counting its kernel time
//! would make a blocking callback look dearer than the lock server's work
//! for it is.

use crate::child::Child;
use crate::cpu;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long the servers have to start (their first objects precreated).
const START_WAIT: Duration = Duration::from_secs(30);
/// What `lanefs up` prints before the MDS's address.
const ADDRESS_PREFIX: &str = "export LANEFS_MDS=";
/// The environment that would point a lanefs command elsewhere than at
/// the cluster calibration starts.
pub const ENVIRONMENT_CLEARED: [&str; 3] = ["LANEFS_MDS", "LANEFS_KEY", "LANEFS_TIMEOUT"];

/// The servers, running. Dropped: stopped, reaped, and their directory
/// removed (the fields drop in order: the process, then its directory).
pub struct Cluster {
    servers: Child,
    mds: String,
    /// Private (0700), inside the data directory: the servers' data, their
    /// sockets, logs and mount points.
    dir: tempfile::TempDir,
    /// Listed until removed, for an interrupt to remove.
    _listed: crate::cleanup::Listed,
}

impl Cluster {
    /// Starts `lanefs_exe up` with `osts` OSTs, its data in a new private
    /// directory in `data_dir`, and waits until it serves.
    pub fn start(lanefs_exe: &Path, data_dir: &Path, osts: u32) -> Result<Cluster, String> {
        let dir = tempfile::Builder::new().prefix("lanefs-calibrate-").tempdir_in(data_dir).map_err(|e| {
            format!(
                "{}: cannot make a directory for the servers ({e}): give --data DIR, a directory you may write",
                data_dir.display()
            )
        })?;
        let _listed = crate::cleanup::list(crate::cleanup::Undo::Remove(dir.path().to_path_buf()));
        let mut command = Command::new(lanefs_exe);
        command
            .arg("up")
            .arg("--osts")
            .arg(osts.to_string())
            .arg("--data")
            .arg(dir.path().join("servers"))
            .args(["--sync-lock-cancel", "never"]);
        for name in ENVIRONMENT_CLEARED {
            command.env_remove(name);
        }
        let what = format!("the servers ({} up)", lanefs_exe.display());
        let mut servers = Child::spawn(command, &what, dir.path().join("servers.log"))?;
        let mds = servers.line_starting(ADDRESS_PREFIX, Instant::now() + START_WAIT).map_err(|e| {
            format!("{e}\n(the servers' sockets are in {}: a path too long for a Unix socket fails them; give a shorter --data)", dir.path().display())
        })?;
        Ok(Cluster { servers, mds, dir, _listed })
    }

    /// The MDS's address, for clients.
    pub fn mds(&self) -> &str {
        &self.mds
    }

    /// The servers' CPU time so far (the MDS's and the OSS's: one process).
    pub fn cpu(&self) -> Result<Duration, String> {
        cpu::of_process(self.servers.pid()).map_err(|e| format!("the servers: {e}{}", self.servers.said()))
    }

    /// A new path in the cluster's private directory.
    pub fn private_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_that_do_not_start_are_an_error_that_says_what_they_said() {
        let data = tempfile::tempdir().unwrap();
        let e = Cluster::start(Path::new("/nonexistent/lanefs"), data.path(), 1).err().unwrap();
        assert!(e.contains("starting the servers (/nonexistent/lanefs up)"), "{e}");
        // A program that says why and exits, as a failing `lanefs up`
        // would: `sh up ...` finds no script named `up`.
        let e = Cluster::start(Path::new("/bin/sh"), data.path(), 1).err().unwrap();
        assert!(e.contains("the servers (/bin/sh up) exited") && e.contains("it said:"), "{e}");
        // Nothing is left behind.
        let left: Vec<_> = std::fs::read_dir(data.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
