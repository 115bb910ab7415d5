//! Where lanefs keeps the files of a running process (control sockets,
//! logs), and how it makes them so that no other user can read them,
//! replace them, or point them somewhere else.
//!
//! Rules, as OpenSSH and tmux keep theirs:
//! - a directory is made owner-only (0700), one level at a time, never
//!   through a symbolic link another user owns;
//! - every directory on the way must be trusted: owned by root or by the
//!   user, and not writable by others unless sticky (`/tmp` is; a
//!   `/tmp/lanefs-1000` another user made first is not, and is refused
//!   with what to do, instead of used);
//! - the directory itself must then be the user's, a real directory, and
//!   writable by it alone (lanefs makes its own 0700);
//! - a file in it is opened with `O_NOFOLLOW` and mode 0600, so a
//!   symbolic link planted at its name is an error, never followed.
//!
//! The servers' own files under their data directories (the OSS's
//! `last_rcvd.json` and client exports, the MDS's `flock_secret` and
//! `mds_clients`) are replaced whole the same way
//! ([`replace_private_file`]).

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where a process's logs go: `$LANEFS_LOG_DIR` if set; else
/// `/var/log/lanefs` for root; else `$XDG_STATE_HOME/lanefs` (by default
/// `~/.local/state/lanefs`, the XDG place for logs); else
/// `/tmp/lanefs-<uid>/log`.
pub fn log_dir() -> PathBuf {
    let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("LANEFS_LOG_DIR") {
        return dir;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/var/log/lanefs");
    }
    if let Some(state) = set("XDG_STATE_HOME") {
        return state.join("lanefs");
    }
    if let Some(home) = set("HOME") {
        return home.join(".local/state/lanefs");
    }
    PathBuf::from(format!("/tmp/lanefs-{uid}/log"))
}

/// Make `dir` (and what is missing above it) a private directory of this
/// process's user, or say why it cannot be trusted (see the module docs).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let dir = if dir.is_absolute() { dir.to_path_buf() } else { std::env::current_dir()?.join(dir) };
    let mut built = PathBuf::new();
    for component in dir.components() {
        built.push(component);
        let meta = match std::fs::symlink_metadata(&built) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match std::fs::DirBuilder::new().mode(0o700).create(&built) {
                    Ok(()) => {}
                    // Made meanwhile: judged below like any other.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(named(&built, e)),
                }
                std::fs::symlink_metadata(&built)?
            }
            Err(e) => return Err(named(&built, e)),
        };
        let owner_trusted = meta.uid() == 0 || meta.uid() == uid;
        let others_write = meta.mode() & 0o022 != 0 && meta.mode() & libc::S_ISVTX == 0;
        if !owner_trusted || (others_write && !meta.file_type().is_symlink()) {
            return Err(untrusted(&built, &meta, "owned by another user, or writable by others"));
        }
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(untrusted(&dir, &meta, &format!("not a directory of uid {uid} that only it may write")));
    }
    Ok(())
}

/// Open `path` in a [`private_dir`] for appending, creating it 0600; a
/// symbolic link at its name is refused (`ELOOP`), never followed.
pub fn append_private_file(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| named(path, e))
}

/// Put `bytes` at `path` whole: written to a new file beside it (0600,
/// made by this call, no link followed), synced if `durable`, then
/// renamed into place (and the directory synced if `durable`). A reader
/// finds the old file or the new one, never part of one.
pub fn replace_private_file(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    use std::io::Write;
    let mut staged = path.as_os_str().to_owned();
    staged.push(".new");
    let staged = PathBuf::from(staged);
    match std::fs::remove_file(&staged) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(named(&staged, e)),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&staged)
        .map_err(|e| named(&staged, e))?;
    file.write_all(bytes)?;
    if durable {
        file.sync_all()?;
    }
    std::fs::rename(&staged, path).map_err(|e| named(path, e))?;
    match (durable, path.parent()) {
        (true, Some(dir)) => File::open(if dir.as_os_str().is_empty() { Path::new(".") } else { dir })?.sync_all(),
        _ => Ok(()),
    }
}

fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn untrusted(path: &Path, meta: &std::fs::Metadata, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} (owner uid {}, mode {:o}) is {why}, so lanefs will not keep its runtime files there: \
             remove it, or set LANEFS_RUN_DIR and LANEFS_LOG_DIR to directories of your own",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_directory_and_file_are_private() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("a/b");
        private_dir(&dir).unwrap();
        for made in [top.path().join("a"), dir.clone()] {
            assert_eq!(std::fs::metadata(&made).unwrap().mode() & 0o777, 0o700, "{}", made.display());
        }
        let log = dir.join("x.log");
        std::io::Write::write_all(&mut append_private_file(&log).unwrap(), b"one\n").unwrap();
        std::io::Write::write_all(&mut append_private_file(&log).unwrap(), b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "one\ntwo\n", "appended, not truncated");
        assert_eq!(std::fs::metadata(&log).unwrap().mode() & 0o777, 0o600);
        private_dir(&dir).expect("an existing private directory is taken as it is");
    }

    #[test]
    fn a_planted_link_is_never_followed() {
        let top = tempfile::tempdir().unwrap();
        let victim = top.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let dir = top.path().join("run");
        private_dir(&dir).unwrap();
        let log = dir.join("x.log");
        std::os::unix::fs::symlink(&victim, &log).unwrap();
        let error = append_private_file(&log).unwrap_err();
        assert!(error.to_string().contains("x.log") && error.to_string().contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A link in place of the directory is refused as well.
        let linked = top.path().join("linked");
        std::os::unix::fs::symlink(&dir, &linked).unwrap();
        assert!(private_dir(&linked).is_err(), "a symbolic link is not a private directory");
    }

    #[test]
    fn a_directory_others_may_write_or_another_user_owns_is_refused() {
        let top = tempfile::tempdir().unwrap();
        let open = top.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let error = private_dir(&open.join("sub")).unwrap_err();
        assert!(error.to_string().contains("writable by others") && error.to_string().contains("LANEFS_RUN_DIR"));
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        private_dir(&open.join("sub")).expect("below a sticky directory, as below /tmp");
        let shared = top.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(private_dir(&shared).unwrap_err().to_string().contains("writable by others"), "group write");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&shared).expect("readable by others, writable by its owner alone");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let theirs = top.path().join("theirs");
            std::fs::create_dir(&theirs).unwrap();
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let error = private_dir(&theirs.join("clients")).unwrap_err();
            assert!(error.to_string().contains("owner uid 65534"), "{error}");
            assert!(!theirs.join("clients").exists(), "nothing made in another user's directory");
        }
    }
}
