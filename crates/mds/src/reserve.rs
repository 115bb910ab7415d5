//! The MDS's disk reserve: room kept so that removing files works on a
//! full disk.
//!
//! SQLite needs new pages (WAL frames) to commit any transaction, a delete
//! too, so on a full disk the MDS could not even delete what filled it. It
//! therefore keeps [`RESERVE_BYTES`] of real blocks in a file beside its
//! database (`<database>-reserve`, readable and writable by its owner
//! only). When a transaction that removes things (`Unlink`, `Rmdir`,
//! `Rename`, the acknowledgement of destroyed objects) fails because the
//! disk is full, the MDS deletes the reserve and runs the transaction again
//! in the room it gave back. While the reserve is gone, a transaction that
//! grows the database first tries to make it again, and fails with
//! `ENOSPC` ([`crate::MdsError::NoSpace`]) if there is no room for it: the
//! space freed by removals (the OSTs' objects often live on the same disk)
//! goes to the reserve first.
//!
//! An in-memory MDS has no reserve.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Bytes the reserve holds: far more than a removal's transaction writes.
pub const RESERVE_BYTES: u64 = 4 << 20;

/// Bytes written per call while filling the reserve.
const FILL_CHUNK_BYTES: usize = 64 << 10;

/// The reserve file of one database.
#[derive(Debug)]
pub(crate) struct Reserve {
    path: PathBuf,
    present: bool,
}

impl Reserve {
    /// The reserve of the database at `database`, made now if there is room.
    pub fn open(database: &Path) -> Reserve {
        let mut name = database.as_os_str().to_owned();
        name.push("-reserve");
        let path = PathBuf::from(name);
        let present = std::fs::metadata(&path).is_ok_and(|meta| meta.len() == RESERVE_BYTES);
        let mut reserve = Reserve { path, present };
        if !reserve.ensure() {
            tracing::warn!(path = %reserve.path.display(), "no room for the MDS's disk reserve");
        }
        reserve
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_present(&self) -> bool {
        self.present
    }

    /// Deletes the reserve, giving its blocks to the file system; whether
    /// there was one to give.
    pub fn release(&mut self) -> bool {
        if !self.present {
            return false;
        }
        self.present = false;
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                tracing::warn!(path = %self.path.display(), "the MDS's disk is full: reserve released for removals");
                true
            }
            Err(error) => {
                tracing::error!(path = %self.path.display(), %error, "cannot release the MDS's disk reserve");
                false
            }
        }
    }

    /// Makes the reserve if it is missing and the disk has room for it;
    /// whether it is there now.
    pub fn ensure(&mut self) -> bool {
        if self.present {
            return true;
        }
        let directory = self.path.parent().unwrap_or(Path::new("."));
        if free_bytes(directory).is_some_and(|free| free < RESERVE_BYTES) {
            return false;
        }
        let mut temporary = self.path.as_os_str().to_owned();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        match fill(&temporary).and_then(|()| std::fs::rename(&temporary, &self.path)) {
            Ok(()) => {
                tracing::info!(path = %self.path.display(), bytes = RESERVE_BYTES, "MDS disk reserve in place");
                self.present = true;
            }
            Err(error) => {
                tracing::debug!(path = %self.path.display(), %error, "no room for the MDS's disk reserve yet");
                let _ = std::fs::remove_file(&temporary);
            }
        }
        self.present
    }
}

/// Writes [`RESERVE_BYTES`] of zeros (real blocks, not a hole) to a new
/// owner-only file at `path` and makes them durable.
fn fill(path: &Path) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    let zeros = vec![0u8; FILL_CHUNK_BYTES];
    let mut written = 0u64;
    while written < RESERVE_BYTES {
        let n = (RESERVE_BYTES - written).min(FILL_CHUNK_BYTES as u64) as usize;
        file.write_all(&zeros[..n])?;
        written += n as u64;
    }
    file.sync_all()
}

/// Bytes free on the file system holding `directory` (as the MDS, root or
/// not, can use them: `f_bfree`), `None` if unknown.
fn free_bytes(directory: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(directory.as_os_str().as_bytes()).ok()?;
    // SAFETY: `path` is NUL-terminated and `stat` a valid out-parameter
    // that statvfs only writes into.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(stat.f_bfree as u64 * stat.f_frsize as u64)
}
