//! Fencing: one server at a time per OST directory and per MDS database.
//!
//! Two OSSes serving one OST would each run a lock server for its objects,
//! so two clients could hold PW `[0, EOF]` on one object at once and both
//! write; two MDSes on one database would allocate the same objects twice.
//! Lustre prevents this with multiple-mount protection (MMP): a target
//! records on its device that it is in use and refuses a second mount.
//!
//! lanefs takes an exclusive `flock` on a lock file ([`LOCK_FILE_NAME`])
//! in each OST directory and in the MDS data directory, and holds it for as
//! long as it serves them, before it creates, binds or removes any socket
//! or file there. The lock file records the holder's pid, what it is and
//! the address it serves at, so that a second server can say who is in
//! the way ([`FenceError::Busy`]) and stop before touching anything. The
//! kernel drops the lock when its holder exits, however it exits: a
//! crashed server never leaves a stale fence behind.
//!
//! Where lanefs departs from Lustre: MMP writes a sequence number to the
//! device every few seconds and a second mounter waits to see whether it
//! moves, so it fences servers on different hosts sharing a disk. A
//! `flock` fences servers on one host (or on a network file system whose
//! `flock` is honoured across hosts); lanefs keeps an OST's objects on a
//! local file system, where that is all there is to fence.

use crate::address::Address;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The lock file in a fenced directory.
pub const LOCK_FILE_NAME: &str = "lanefs.lock";

#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error(
        "{dir} is in use by {holder}: lanefs serves a directory from one server at a time (as Lustre's \
         multiple-mount protection); stop that server first, or give another directory"
    )]
    Busy { dir: PathBuf, holder: Holder },
    #[error("cannot lock {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

impl From<FenceError> for std::io::Error {
    fn from(e: FenceError) -> std::io::Error {
        let kind = match &e {
            FenceError::Busy { .. } => std::io::ErrorKind::ResourceBusy,
            FenceError::Io { source, .. } => source.kind(),
        };
        std::io::Error::new(kind, e)
    }
}

/// Who holds a fence, as its lock file says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    pub server: Option<String>,
    pub address: Option<String>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.server {
            Some(server) => write!(f, "the {server}")?,
            None => f.write_str("a lanefs server")?,
        }
        if let Some(pid) = self.pid {
            write!(f, " of process {pid}")?;
        }
        match &self.address {
            Some(address) => write!(f, " at {address}"),
            None => Ok(()),
        }
    }
}

impl Holder {
    fn parse(text: &str) -> Holder {
        let mut holder = Holder::default();
        for line in text.lines() {
            match line.split_once('=') {
                Some(("pid", v)) => holder.pid = v.trim().parse().ok(),
                Some(("server", v)) => holder.server = Some(v.trim().to_string()),
                Some(("address", v)) => holder.address = Some(v.trim().to_string()),
                _ => {}
            }
        }
        holder
    }

    fn render(&self) -> String {
        let mut text = String::new();
        if let Some(pid) = self.pid {
            text += &format!("pid={pid}\n");
        }
        if let Some(server) = &self.server {
            text += &format!("server={server}\n");
        }
        if let Some(address) = &self.address {
            text += &format!("address={address}\n");
        }
        text
    }
}

/// A held fence; the directory is this process's until the last clone is
/// dropped.
#[derive(Clone)]
pub struct Fence(Arc<Inner>);

struct Inner {
    dir: PathBuf,
    file: File,
    holder: Mutex<Holder>,
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fence({})", self.0.dir.display())
    }
}

impl Fence {
    /// Fence `dir` (which must exist) for `server` (e.g. "OSS", "MDS"), or
    /// say who holds it. Nothing in `dir` but the lock file is touched.
    pub fn acquire(dir: &Path, server: &str) -> Result<Fence, FenceError> {
        let path = dir.join(LOCK_FILE_NAME);
        let io = |source| FenceError::Io { path: path.clone(), source };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor we own; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let _ = (&file).read_to_string(&mut text);
                return Err(FenceError::Busy { dir: dir.to_path_buf(), holder: Holder::parse(&text) });
            }
            return Err(io(e));
        }
        let holder = Holder { pid: Some(std::process::id()), server: Some(server.to_string()), address: None };
        let fence = Fence(Arc::new(Inner { dir: dir.to_path_buf(), file, holder: Mutex::new(holder) }));
        fence.write_record().map_err(io)?;
        Ok(fence)
    }

    pub fn dir(&self) -> &Path {
        &self.0.dir
    }

    /// Record the address the server is reachable at, for the message a
    /// second server gets.
    pub fn record_address(&self, address: &Address) {
        self.0.holder.lock().expect("fence lock").address = Some(address.to_string());
        if let Err(e) = self.write_record() {
            tracing::warn!("recording the address in {}: {e}", self.0.dir.join(LOCK_FILE_NAME).display());
        }
    }

    fn write_record(&self) -> std::io::Result<()> {
        let text = self.0.holder.lock().expect("fence lock").render();
        let mut file = &self.0.file;
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(text.as_bytes())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Still held: nobody else can be reading a half-written record.
        let _ = self.file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_told_who_holds_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let fence = Fence::acquire(dir.path(), "OSS").unwrap();
        fence.record_address(&Address::Unix("/tmp/x.sock".into()));
        let err = Fence::acquire(dir.path(), "OSS").unwrap_err();
        let text = err.to_string();
        let pid = std::process::id().to_string();
        let dir_name = dir.path().display().to_string();
        for part in [dir_name.as_str(), "the OSS", pid.as_str(), "unix:/tmp/x.sock"] {
            assert!(text.contains(part), "{text:?} lacks {part:?}");
        }
        // A clone keeps it; the last drop lets it go.
        let clone = fence.clone();
        drop(fence);
        assert!(Fence::acquire(dir.path(), "MDS").is_err());
        drop(clone);
        let again = Fence::acquire(dir.path(), "MDS").unwrap();
        assert_eq!(again.dir(), dir.path());
    }

    #[test]
    fn a_missing_directory_is_an_io_error_naming_the_lock_file() {
        let err = Fence::acquire(Path::new("/nonexistent/lanefs"), "MDS").unwrap_err();
        assert!(matches!(err, FenceError::Io { .. }), "{err}");
        assert!(err.to_string().contains(LOCK_FILE_NAME), "{err}");
    }
}
