//! A full disk under the MDS: removals still commit (from the reserve),
//! creates fail with `ENOSPC` naming the MDS, and the reserve comes back
//! with the space. Run on a small tmpfs mounted for the test, which takes
//! root; without root the test says so and passes over.

use crate::*;
use lanefs_mds::reserve::RESERVE_BYTES;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` (with the reason printed) where a tmpfs cannot be mounted.
    fn mount(size_bytes: u64) -> Option<Tmpfs> {
        // SAFETY: geteuid has no preconditions and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: mounting a tmpfs to fill needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_bytes},mode=0700"), "tmpfs"])
            .arg(dir.path())
            .status();
        match status {
            Ok(status) if status.success() => Some(Tmpfs { dir }),
            other => {
                eprintln!("skipped: mount -t tmpfs failed ({other:?}); the test needs CAP_SYS_ADMIN");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Writes a file until the disk is full; returns its path.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![7u8; 64 << 10];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                assert_eq!(error.raw_os_error(), Some(libc::ENOSPC), "{error}");
                break;
            }
        }
    }
    path
}

#[test]
fn removals_commit_on_a_full_disk_and_creates_fail_with_enospc() {
    let Some(tmpfs) = Tmpfs::mount(24 << 20) else { return };
    let db = tmpfs.path().join("mds.db");
    let mut mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
    fill_pools(&mut mds);
    let (reserve, present) = mds.reserve_state().unwrap();
    let reserve = reserve.to_path_buf();
    assert!(present);
    let meta = std::fs::metadata(&reserve).unwrap();
    assert_eq!((meta.len(), meta.permissions().mode() & 0o777), (RESERVE_BYTES, 0o600), "owner-only, full size");
    mkdir(&mut mds, "/d");
    for i in 0..20 {
        create(&mut mds, &format!("/d/f{i}"));
    }
    let filler = fill(tmpfs.path());
    // SQLite reuses its WAL's room until it must grow: create until it must.
    let mut made = 0;
    let full = loop {
        match try_create(&mut mds, &format!("/d/new{made}"), &StripeSpec::default(), CreateMode::Exclusive) {
            Ok(_) => made += 1,
            Err(error) => break error,
        }
        assert!(made < 10_000, "the disk never filled");
    };
    assert_eq!(full, MdsError::NoSpace { path: db.display().to_string() });
    assert!(full.to_string().starts_with("no space left on the MDS (ENOSPC): its database"), "{full}");
    assert!(reserve.exists(), "a create does not touch the reserve");
    // Removals go through, on the reserve's room.
    for i in 0..20 {
        mds.unlink(&ROOT, &format!("/d/f{i}")).unwrap();
    }
    assert!(!reserve.exists(), "released for the removals");
    mds.rename(&ROOT, "/d", "/e").unwrap();
    mkdir_fails_while_full(&mut mds, &db);
    // Space comes back: the reserve first, then creates.
    std::fs::remove_file(filler).unwrap();
    create(&mut mds, "/after");
    assert!(mds.reserve_state().unwrap().1 && reserve.exists());
    mds.check_invariants();
    drop(mds);
}

fn mkdir_fails_while_full(mds: &mut Mds, db: &Path) {
    let error = mds.mkdir(&ROOT, "/more", 0o755).unwrap_err();
    assert_eq!(error, MdsError::NoSpace { path: db.display().to_string() }, "no room to make the reserve again");
}
