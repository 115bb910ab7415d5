//! Honest durability on the real file system: when an OST's disk fails a
//! write or an `fdatasync`, or fills up, the program that wrote is told,
//! by the fsync of the file, with the error number its disk gave; an
//! fsync never succeeds over bytes that are not on disk.
//!
//! Failures come from the OSS's store fault injection (`StoreFaults`, as
//! Lustre's `fail_loc`) and, as root, from a small tmpfs that fills.

use lanefs_client::{Client, File, NetError};
use lanefs_core::Errno;
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use lanefs_server::faults::StoreFaults;
use lanefs_server::filestore::MemoryStores;
use std::path::{Path, PathBuf};
use std::process::Command;

fn create(cl: &Client, path: &str) -> File {
    let request = MdsRequest::Create {
        path: path.into(),
        stripe: StripeSpec::default(),
        mode: CreateMode::Exclusive,
        access: Access::ReadWrite,
        permissions: 0o644,
    };
    match cl.mds(request).unwrap() {
        MdsReply::File(info) => cl.open_layout(path, info.layout).unwrap(),
        other => panic!("create answered {other:?}"),
    }
}

fn errno(e: &NetError) -> Option<Errno> {
    match e {
        NetError::Client(e) => Some(e.errno()),
        _ => None,
    }
}

fn faulty_cluster() -> (LocalCluster, StoreFaults) {
    let faults = StoreFaults::default();
    // A failing fdatasync stands for a disk, wherever the temporary
    // directory is.
    let memory_stores = MemoryStores::AsDisk;
    let config = LocalClusterConfig { osts: 1, faults: faults.clone(), memory_stores, ..Default::default() };
    (LocalCluster::start(config).unwrap(), faults)
}

/// An `fdatasync` that fails on the OST fails the fsync of the file whose
/// bytes it was to make durable, with `EIO` named; before, the fsync
/// succeeded and the bytes were gone after a restart. Once the disk is
/// well again, the next fsync makes the file durable.
#[test]
fn a_failed_fdatasync_fails_the_fsync_naming_eio() {
    let (cluster, faults) = faulty_cluster();
    let cl = Client::connect(&cluster.mds_address(), cluster.client_options()).unwrap();
    let f = create(&cl, "/synced");
    cl.pwrite(&f, 0, &[1; 1 << 20]).unwrap();
    cl.fsync(&f).unwrap();
    faults.fail_syncs(Some(Errno::EIO));
    cl.pwrite(&f, 1 << 20, &[2; 1 << 20]).unwrap();
    let e = cl.fsync(&f).expect_err("an fsync whose fdatasync failed");
    assert_eq!(errno(&e), Some(Errno::EIO), "{e}");
    let text = e.to_string();
    assert!(text.contains("EIO") && text.contains("OST0000"), "{text}");
    faults.fail_syncs(None);
    cl.pwrite(&f, 1 << 20, &[3; 1 << 20]).unwrap();
    cl.fsync(&f).unwrap();
    assert_eq!(cl.pread(&f, 0, 2 << 20).unwrap(), [vec![1; 1 << 20], vec![3; 1 << 20]].concat());
}

/// A write the OST's disk refuses fails the file's fsync with that error
/// number (`ENOSPC` here, as Linux reports a failed writeback), named.
#[test]
fn a_failed_write_fails_the_fsync_naming_its_error() {
    let (cluster, faults) = faulty_cluster();
    let cl = Client::connect(&cluster.mds_address(), cluster.client_options()).unwrap();
    let f = create(&cl, "/refused");
    faults.fail_writes(Some(Errno::ENOSPC));
    cl.pwrite(&f, 0, &[1; 1 << 20]).unwrap();
    let e = cl.fsync(&f).expect_err("an fsync whose writes failed");
    assert_eq!(errno(&e), Some(Errno::ENOSPC), "{e}");
    assert!(e.to_string().contains("ENOSPC"), "{e}");
    faults.fail_writes(None);
    let g = create(&cl, "/accepted");
    cl.pwrite(&g, 0, &[2; 1 << 20]).unwrap();
    cl.fsync(&g).unwrap();
}

/// A tmpfs mounted for one test, unmounted when dropped; `None` (saying
/// why) where it cannot be mounted: that takes root.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
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
            Ok(status) if status.success() => Some(Tmpfs(dir)),
            other => {
                eprintln!("skipped: mount -t tmpfs failed ({other:?}); the test needs CAP_SYS_ADMIN");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// An OST on a disk that fills: the fsync of the file that did not fit
/// fails with `ENOSPC` named (never success, never a silent short file);
/// removing it frees the space, and the file system takes writes again.
#[test]
fn a_full_ost_fails_the_fsync_with_enospc_and_rm_frees_it() {
    let Some(disk) = Tmpfs::mount(24 << 20) else { return };
    let data: PathBuf = disk.path().join("fs");
    let config = LocalClusterConfig { osts: 1, data_dir: Some(data), ..Default::default() };
    let cluster = LocalCluster::start(config).unwrap();
    let cl = Client::connect(&cluster.mds_address(), cluster.client_options()).unwrap();
    let f = create(&cl, "/big");
    let chunk = vec![7u8; 1 << 20];
    let mut written = 0u64;
    let failed = loop {
        // Writes are cached; a full disk shows at the latest at the fsync.
        if let Err(e) = cl.pwrite(&f, written, &chunk) {
            break e;
        }
        written += chunk.len() as u64;
        if written.is_multiple_of(8 << 20) {
            if let Err(e) = cl.fsync(&f) {
                break e;
            }
        }
        assert!(written < 64 << 20, "64 MiB went into a 24 MiB disk without an error");
    };
    assert_eq!(errno(&failed), Some(Errno::ENOSPC), "{failed}");
    assert!(failed.to_string().contains("ENOSPC"), "{failed}");
    drop(f);
    cl.mds(MdsRequest::Unlink { path: "/big".into() }).unwrap();
    // The MDS destroys the objects in the background: wait for the space.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let write_after = || -> Result<(), NetError> {
        let request = MdsRequest::Create {
            path: "/after".into(),
            stripe: StripeSpec::default(),
            mode: CreateMode::OpenOrCreate,
            access: Access::ReadWrite,
            permissions: 0o644,
        };
        let MdsReply::File(info) = cl.mds(request)? else { panic!("create answered something else") };
        let g = cl.open_layout("/after", info.layout)?;
        cl.pwrite(&g, 0, &[1; 4 << 20])?;
        cl.fsync(&g)
    };
    while let Err(e) = write_after() {
        assert!(std::time::Instant::now() < deadline, "the space of the removed file did not come back: {e}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `--emulate-commit-ms`: with commits made slow on purpose, a file's fsync
/// (one commit of its OST) takes at least that long; without, it does not.
#[test]
fn slow_commits_make_each_commit_take_at_least_their_floor() {
    let (cluster, faults) = faulty_cluster();
    let cl = Client::connect(&cluster.mds_address(), cluster.client_options()).unwrap();
    let f = create(&cl, "/slow");
    let fsync_takes = |byte: u8| {
        cl.pwrite(&f, 0, &[byte; 4096]).unwrap();
        let started = std::time::Instant::now();
        cl.fsync(&f).unwrap();
        started.elapsed()
    };
    fsync_takes(1);
    faults.slow_commits(std::time::Duration::from_millis(300));
    assert!(fsync_takes(2) >= std::time::Duration::from_millis(300));
    faults.slow_commits(std::time::Duration::ZERO);
    assert!(fsync_takes(3) < std::time::Duration::from_millis(300), "back to the disk's own");
}
