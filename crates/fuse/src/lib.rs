//! lanefs mounted as a POSIX file system, through FUSE (`lanefs mount`).
//!
//! A mount is one lanefs client (its own lock cache, page cache and
//! connections: two mounts on one machine are two nodes, and their lock
//! traffic is real) serving the kernel's FUSE requests on several threads
//! ([`fs::LanefsFs`]). Inode numbers are the MDS's fids ([`nodes`]).
//!
//! Where it departs from Lustre (and from POSIX) for now: files are opened
//! with direct I/O, so the kernel caches no file data (coherence without
//! page-cache invalidation); a shared mapping (`MAP_SHARED`, read-only
//! too) is refused (`ENODEV`) unless the mount allows them, and then it is
//! coherent within the mount alone ([`LanefsFs::allowing_shared_mmap`]);
//! a private mapping is filled as it is touched and not kept coherent
//! with other mounts' later writes; a `close(2)` after writes
//! moves the modification time to now (unless a time was set through the
//! file after its last write: `futimens`, `cp -p` and `tar -x` keep theirs),
//! and reads never move the access time (`noatime`); named pipes, sockets
//! and devices are the MDS's inodes and the opening node's kernel's to
//! serve, and the mount is `nodev` (a device in it does not open) and
//! `nosuid`; `close(2)` after a write makes it durable (`fsync`),
//! so that a lost write is reported there; a file removed while open keeps
//! its objects until its last close anywhere (the MDS is told of opens),
//! and in the mount that removed it a hidden name, as NFS clients do; a
//! request for an inode another mount has removed (or replaced by a
//! rename) since this one looked it up is `ESTALE`, as an NFS client
//! answers, so that the kernel looks the name up again (an `open` or
//! `stat` of the name then finds the file there now). File locks are the
//! MDS's ([`locks`]).

pub mod fs;
pub mod listings;
pub mod locks;
pub mod mounts;
pub mod nodes;

pub use fs::{ladvise_through_mount, LanefsFs};
use fuser::{BackgroundSession, Config, MountOption, SessionACL};
use lanefs_client::Client;
use std::path::Path;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountConfig {
    /// Threads serving FUSE requests.
    pub threads: usize,
    /// What `mount` and `df` show as the source (`lanefs:<MDS address>`).
    pub source: String,
    /// Let other users than the one who mounted use the mount (FUSE's
    /// `allow_other`); the MDS then checks each caller's permissions.
    pub allow_other: bool,
    /// Let programs map files shared (refused by default): see
    /// [`LanefsFs::allowing_shared_mmap`].
    pub shared_mmap: bool,
}

impl Default for MountConfig {
    fn default() -> Self {
        MountConfig { threads: 4, source: "lanefs".into(), allow_other: true, shared_mmap: false }
    }
}

fn config(mount: &MountConfig) -> Config {
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(mount.source.clone()),
        MountOption::Subtype("lanefs".into()),
        MountOption::RW,
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    if mount.allow_other {
        config.acl = SessionACL::All;
    }
    config.n_threads = Some(mount.threads.max(1));
    config.clone_fd = true;
    config
}

/// Mount `client`'s file system at `mountpoint` and serve it until it is
/// unmounted.
pub fn mount(client: Client, mountpoint: &Path, mount: &MountConfig) -> std::io::Result<()> {
    let fs = LanefsFs::new(client).allowing_shared_mmap(mount.shared_mmap);
    let session = fuser::Session::new(fs, mountpoint, &config(mount))?.spawn()?;
    // The session ends when the kernel has unmounted the file system
    // (`umount`, `lanefs umount`). Dropping fuser's handle would then
    // unmount the path once more (fuser 0.18's check that the connection
    // still lives is inverted), taking down whatever was mounted there in
    // the meantime: a new mount made at the same path as soon as this one
    // was unmounted. So the handle is never dropped.
    let session = std::mem::ManuallyDrop::new(session);
    // SAFETY: the join handle is read out of the handle once, and the
    // handle is never used or dropped afterwards, so it has one owner.
    let serving = unsafe { std::ptr::read(&session.guard) };
    let ended = serving.join().unwrap_or_else(|_| Err(std::io::Error::other("the mount's serving thread panicked")));
    if ended.is_err() {
        // The kernel's connection still lives (an unmount ends the
        // session without an error): detach the mount this server made.
        let _ = mounts::unmount(mountpoint, true);
    }
    ended
}

/// Mount in the background: unmounted when the session is dropped (or
/// with [`BackgroundSession::umount_and_join`]).
pub fn spawn(client: Client, mountpoint: &Path, mount: &MountConfig) -> std::io::Result<BackgroundSession> {
    fuser::spawn_mount(LanefsFs::new(client).allowing_shared_mmap(mount.shared_mmap), mountpoint, &config(mount))
}
