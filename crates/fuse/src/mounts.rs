//! This host's mounts, as `/proc/self/mountinfo` shows them: which are
//! lanefs's, where a host path falls in lanefs, and unmounting one.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why an unmount did not happen.
#[derive(Debug, thiserror::Error)]
pub enum UnmountError {
    #[error("{0} is not mounted")]
    NotMounted(String),
    #[error("{0} is not a lanefs mount: unmount it with umount")]
    NotLanefs(String),
    #[error(
        "{0} is busy: files or directories in it are open (see `fuser -m {0}`); close them, or unmount with --lazy"
    )]
    Busy(String),
    #[error("unmounting {path}: {error}")]
    Io { path: String, error: io::Error },
}

/// Every lanefs mount of this host: its mount point and its MDS address.
pub fn lanefs_mounts() -> io::Result<Vec<(PathBuf, String)>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut mounts = Vec::new();
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else { continue };
        let (Some(fstype), Some(source), Some(point)) = (fields.get(dash + 1), fields.get(dash + 2), fields.get(4))
        else {
            continue;
        };
        // A mount by root shows the type `fuse`, one by fusermount3 `fuse.lanefs`.
        let fuse = *fstype == "fuse" || *fstype == "fuse.lanefs";
        if let (Some(mds), true) = (unescape(source).strip_prefix("lanefs:").map(str::to_string), fuse) {
            mounts.push((PathBuf::from(unescape(point)), mds));
        }
    }
    Ok(mounts)
}

/// Whether `path` is a mount point (of any file system).
pub fn is_mounted(path: &Path) -> io::Result<bool> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let wanted = path.to_string_lossy();
    // The fifth field is the mount point.
    Ok(info.lines().filter_map(|l| l.split(' ').nth(4)).any(|m| unescape(m) == wanted))
}

/// If `path` (a path of this host, which need not exist yet) is under a
/// lanefs mount: the mount's MDS address and the path within lanefs.
pub fn lanefs_path(path: &Path) -> io::Result<Option<(String, String)>> {
    if !path.is_absolute() {
        return Ok(None);
    }
    // The deepest existing directory decides which mount it is under.
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name() else { return Ok(None) };
        rest.push(name.to_os_string());
        existing.pop();
    }
    let Ok(mut host) = existing.canonicalize() else { return Ok(None) };
    for name in rest.into_iter().rev() {
        host.push(name);
    }
    let mut best: Option<(PathBuf, String)> = None;
    for (point, mds) in lanefs_mounts()? {
        let deeper = best.as_ref().is_none_or(|(p, _)| point.as_os_str().len() > p.as_os_str().len());
        if host.starts_with(&point) && deeper {
            best = Some((point, mds));
        }
    }
    Ok(best.map(|(point, mds)| {
        let inner = host.strip_prefix(&point).expect("under the mount point");
        (mds, format!("/{}", inner.to_string_lossy()))
    }))
}

/// Unmount the lanefs mount at `mountpoint` (detached at once with
/// `lazy`): as root with `umount2`, otherwise with FUSE's `fusermount3`.
pub fn unmount(mountpoint: &Path, lazy: bool) -> Result<(), UnmountError> {
    let shown = mountpoint.display().to_string();
    let io = |error| UnmountError::Io { path: shown.clone(), error };
    if !is_mounted(mountpoint).map_err(io)? {
        return Err(UnmountError::NotMounted(shown));
    }
    if !lanefs_mounts().map_err(io)?.iter().any(|(point, _)| point == mountpoint) {
        return Err(UnmountError::NotLanefs(shown));
    }
    let target = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes())
        .map_err(|_| io(io::Error::from(io::ErrorKind::InvalidInput)))?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: a NUL-terminated path and valid flags; the result is checked.
    if unsafe { libc::umount2(target.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EBUSY) => Err(UnmountError::Busy(shown)),
        Some(libc::EPERM) => {
            // Not root: FUSE's helper unmounts what this user mounted.
            let mut helper = Command::new("fusermount3");
            helper.arg("-u");
            if lazy {
                helper.arg("-z");
            }
            let status = helper.arg(mountpoint).status().map_err(io)?;
            match status.success() {
                true => Ok(()),
                false => Err(io(io::Error::other(format!("fusermount3 -u failed ({status})")))),
            }
        }
        _ => Err(io(error)),
    }
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let code: String = chars.by_ref().take(3).collect();
            match u8::from_str_radix(&code, 8) {
                Ok(byte) => out.push(byte as char),
                Err(_) => {
                    out.push('\\');
                    out.push_str(&code);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(super::unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(super::unescape("/plain"), "/plain");
    }
}
