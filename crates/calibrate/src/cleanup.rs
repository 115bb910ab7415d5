//! What calibration has running, mounted or written, listed while it
//! lives, so that an interrupt can undo it. On every other way out (a
//! result, an error, a panic) the guards undo it as they drop
//! ([`crate::child::Child`], the mount's, the servers' directory's); an
//! interrupted process runs no destructor, so `lanefs calibrate` calls
//! [`interrupted`] on ^C or SIGTERM, which undoes what is listed, newest
//! first, and exits. A child would die with this process anyway (see
//! [`crate::child`]), but a FUSE mount outlives its daemon, and a
//! directory its process.
//!
//! [`interrupted`] holds the list until the process has exited, so that a
//! guard dropping meanwhile waits instead of racing it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One thing to undo.
#[derive(Debug)]
pub enum Undo {
    /// Kill and reap this child process.
    Stop(u32),
    /// Detach this mount (lazily: its daemon may be gone).
    Unmount(PathBuf),
    /// Remove this directory and everything in it.
    Remove(PathBuf),
}

static LISTED: Mutex<Vec<(u64, Undo)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A listing: dropped, the thing is no longer listed (its guard has
/// undone it, or is about to).
#[derive(Debug)]
pub struct Listed(u64);

/// Lists `undo` until the returned value is dropped.
pub fn list(undo: Undo) -> Listed {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    LISTED.lock().unwrap_or_else(|e| e.into_inner()).push((id, undo));
    Listed(id)
}

impl Drop for Listed {
    fn drop(&mut self) {
        LISTED.lock().unwrap_or_else(|e| e.into_inner()).retain(|(id, _)| *id != self.0);
    }
}

/// Undoes everything listed, newest first, and exits with `code`.
pub fn interrupted(code: i32) -> ! {
    let mut listed = LISTED.lock().unwrap_or_else(|e| e.into_inner());
    while let Some((_, undo)) = listed.pop() {
        run(&undo);
    }
    std::process::exit(code)
}

fn run(undo: &Undo) {
    match undo {
        Undo::Stop(pid) => {
            // SAFETY: plain system calls on a pid of ours; a pid already
            // reaped by its guard fails them harmlessly.
            unsafe {
                libc::kill(*pid as libc::pid_t, libc::SIGKILL);
                libc::waitpid(*pid as libc::pid_t, std::ptr::null_mut(), 0);
            }
        }
        Undo::Unmount(point) => {
            let _ = lanefs_fuse::mounts::unmount(point, true);
        }
        Undo::Remove(dir) => {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_dropped_is_no_longer_listed() {
        let dir = tempfile::tempdir().unwrap();
        let listed = list(Undo::Remove(dir.path().to_path_buf()));
        let id = listed.0;
        let is_listed = || LISTED.lock().unwrap().iter().any(|(i, _)| *i == id);
        assert!(is_listed());
        drop(listed);
        assert!(!is_listed());
    }

    #[test]
    fn undoing_a_directory_removes_it_and_a_child_is_killed_and_reaped() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("servers");
        std::fs::create_dir(&inner).unwrap();
        std::fs::write(inner.join("f"), "x").unwrap();
        run(&Undo::Remove(inner.clone()));
        assert!(!inner.exists());
        let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
        run(&Undo::Stop(child.id()));
        assert!(child.wait().is_err(), "reaped already");
    }
}
