//! The FUSE operations, each turned into calls of one lanefs client.
//!
//! Namespace operations go to the MDS with the calling process's uid, gid
//! and supplementary groups, which the MDS checks permissions for (as
//! Lustre trusts its client nodes); data goes through the client's lock
//! and page caches. Files are opened with `FOPEN_DIRECT_IO`, so the
//! kernel's page cache never holds their bytes: every `read()` and
//! `write()` reaches lanefs, whose locks keep mounts coherent, and a write
//! that returned in one mount is seen by a read started afterwards in any
//! other. Attributes and entries are not cached by the kernel either (a
//! time to live of zero): sizes come from the OSTs by glimpse each time.
//!
//! An operation on an inode the kernel holds (`getattr`, `setattr`,
//! `open`, `opendir`, `readlink`, `access`, the attributes) names it to
//! the MDS by fid, the inode number, never by the path this mount last
//! saw it at: a name can be moved, and another file linked in its place,
//! by another mount at any moment, and `fchown(fd)` must change the file
//! `fd` holds. Only operations on names (`lookup`, `create`, `unlink`,
//! `rename`, ...) go by path.

use crate::listings::{self, Listings, Page};
use crate::locks::{LockCall, MountLocks};
use crate::nodes::{child_path, Nodes};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyIoctl, ReplyLock, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use lanefs_client::{Client, File, NetError};
use lanefs_core::client::ladvise::Advice;
use lanefs_core::msg::Cut;
use lanefs_proto::{
    Access, Attr, CreateMode, Credentials, Fid, FileKind, MdsReply, MdsRequest, Node, StripeSpec, XattrHow,
};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::warn;

/// Nothing is cached by the kernel: see the module docs.
const TTL: Duration = Duration::ZERO;
/// The largest read and write the kernel sends in one request.
pub const REQUEST_BYTES_MAX: u32 = 1 << 20;
/// Open files a mount keeps at most (each holds a client file handle and
/// a record at the MDS).
pub const OPEN_MAX: usize = 65_536;
/// Open files one uid keeps in one mount at most: a quarter of the
/// table, so that one user's opens cannot leave others none.
pub const OPEN_PER_UID_MAX: usize = OPEN_MAX / 4;

/// One open file: the client's handle, and what `close` must report.
struct Open {
    /// Its inode (the MDS's fid): the path it was opened by may change.
    ino: u64,
    /// Who opened it (whose share of [`OPEN_PER_UID_MAX`] it takes).
    uid: u32,
    file: File,
    append: bool,
    /// Opened for writing (`O_WRONLY`, `O_RDWR`): a group lock needs it.
    writable: bool,
    /// Written since the last flush: the next `close` writes it back and
    /// reports a lost write, as `fsync` does.
    written: Mutex<bool>,
    /// The MDS knows this handle keeps the file open, so a removal from
    /// another mount leaves its objects until the release.
    recorded: bool,
}

/// lanefs as a FUSE file system (see the module docs).
pub struct LanefsFs {
    client: Arc<Client>,
    /// `fcntl` and `flock` locks, granted by the MDS.
    locks: Arc<MountLocks>,
    nodes: Mutex<Nodes>,
    files: Mutex<HashMap<u64, Arc<Open>>>,
    /// How many of `files` there are, in all and per uid: taken before a
    /// handle is kept, given back at its release.
    open_counts: Mutex<OpenCounts>,
    /// Directory listings from `opendir` to `releasedir`, a page each.
    listings: Mutex<Listings>,
    /// Files removed while open here: renamed to a hidden name in their
    /// directory instead (as NFS clients do), and removed by whoever asked,
    /// at their last close.
    orphans: Mutex<HashMap<u64, Orphan>>,
    next_handle: AtomicU64,
    /// Whether the kernel lets a program map a file shared (see
    /// [`LanefsFs::allowing_shared_mmap`]).
    shared_mmap: bool,
}

/// Open files of a mount, in all and per uid, within [`OPEN_MAX`] and
/// [`OPEN_PER_UID_MAX`].
#[derive(Debug, Default)]
struct OpenCounts {
    total: usize,
    per_uid: HashMap<u32, usize>,
}

impl OpenCounts {
    /// One more open file for `uid`: `ENFILE` past the mount's bound,
    /// `EMFILE` past the uid's share.
    fn take(&mut self, uid: u32) -> Result<(), Errno> {
        if self.total >= OPEN_MAX {
            return Err(Errno::ENFILE);
        }
        let count = self.per_uid.entry(uid).or_default();
        if *count >= OPEN_PER_UID_MAX {
            return Err(Errno::EMFILE);
        }
        *count += 1;
        self.total += 1;
        Ok(())
    }

    fn give_back(&mut self, uid: u32) {
        let count = self.per_uid.get_mut(&uid).expect("an open file's uid is counted");
        *count -= 1;
        if *count == 0 {
            self.per_uid.remove(&uid);
        }
        self.total -= 1;
    }
}

struct Orphan {
    hidden: String,
    credentials: Credentials,
}

/// A name an open file removed in this mount keeps until its last close:
/// its fid and 64 random bits, so that no one can tell it in advance and
/// put something of their own there first.
fn hidden_name(ino: u64) -> String {
    let mut random = [0u8; 8];
    // SAFETY: getrandom writes at most `random.len()` bytes into it.
    let filled = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    assert_eq!(
        filled,
        random.len() as isize,
        "getrandom of 8 bytes (the kernel's random pool is always ready after boot)"
    );
    format!(".lanefs-unlinked-{ino:x}-{:016x}", u64::from_ne_bytes(random))
}

impl LanefsFs {
    pub fn new(client: Client) -> LanefsFs {
        let client = Arc::new(client);
        LanefsFs {
            locks: Arc::new(MountLocks::new(client.clone())),
            client,
            nodes: Mutex::new(Nodes::default()),
            files: Mutex::new(HashMap::new()),
            open_counts: Mutex::new(OpenCounts::default()),
            listings: Mutex::new(Listings::default()),
            orphans: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            shared_mmap: false,
        }
    }

    /// Let programs map files shared (`MAP_SHARED`), which a mount refuses
    /// by default (`mmap` fails with `ENODEV`): FUSE refuses every shared
    /// mapping of a direct I/O file, read-only ones too, unless the mount
    /// asks for `FUSE_DIRECT_IO_ALLOW_MMAP`, and then allows them all.
    ///
    /// A shared mapping is coherent among the processes of this mount (they
    /// share the kernel's pages), and its stores reach lanefs, and every
    /// other mount, at `msync`, `munmap` or the kernel's writeback. It is
    /// not kept coherent with another mount's writes, nor another mount's
    /// mapping with its stores: FUSE tells a mount neither of a store to a
    /// mapped page (there is no `page_mkwrite` for it to take a lock in, as
    /// a Lustre client does) nor of the mapping itself. Two mounts that map
    /// one file and both store to it (SQLite's write-ahead log does, in its
    /// `-shm` file) lose stores with no error, so this is for mounts that
    /// alone map the files they write.
    pub fn allowing_shared_mmap(mut self, allow: bool) -> LanefsFs {
        self.shared_mmap = allow;
        self
    }

    fn path(&self, ino: INodeNo) -> Result<String, Errno> {
        match self.nodes.lock().expect("nodes").path(ino.0) {
            Some(path) if !path.is_empty() => Ok(path),
            _ => Err(Errno::ENOENT),
        }
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<String, Errno> {
        let name = name.to_str().ok_or(Errno::EINVAL)?;
        Ok(child_path(parent.0, name))
    }

    fn mds(&self, req: &Request, request: MdsRequest) -> Result<MdsReply, Errno> {
        self.client.mds_as(&credentials(req), request).map_err(|e| errno(&e))
    }

    /// A request that opens a file this mount keeps open, recorded open
    /// at the MDS in the same step; and whether it was.
    fn open_at_mds(&self, req: &Request, request: MdsRequest) -> Result<(MdsReply, bool), Errno> {
        self.client.mds_open_as(&credentials(req), request).map_err(|e| errno(&e))
    }

    /// An open [`LanefsFs::open_at_mds`] recorded is given up.
    fn closed_at_mds(&self, fid: Fid, recorded: bool) {
        if recorded {
            if let Err(e) = self.client.mds_closed(fid) {
                warn!(%e, fid = fid.0, "telling the MDS of a close");
            }
        }
    }

    fn open_file(&self, fh: FileHandle) -> Result<Arc<Open>, Errno> {
        self.files.lock().expect("files").get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn new_handle(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// The attributes of inode `ino` (by fid, whatever its names are now),
    /// and for a file its size from the OSTs (through `open`, if the
    /// caller has the file open).
    fn attr(&self, req: &Request, ino: u64, open: Option<&File>) -> Result<FileAttr, Errno> {
        let MdsReply::Attr(attr) = self.mds(req, MdsRequest::StatFid { fid: Fid(ino) }).map_err(stale)? else {
            return Err(Errno::EIO);
        };
        self.sized(attr, open)
    }

    /// Whether the inode `fid` is gone (removed, or replaced by a rename,
    /// from another mount).
    fn is_gone(&self, fid: Fid) -> bool {
        matches!(
            self.client.mds(MdsRequest::StatFid { fid }),
            Err(NetError::Namespace(lanefs_proto::MdsError::NotFound { .. }))
        )
    }

    /// `attr` with its size and space: a file's from the OSTs (the
    /// space its objects hold on their disks, which is what `st_blocks`
    /// counts: a sparse file's holes hold none).
    fn sized(&self, attr: Attr, open: Option<&File>) -> Result<FileAttr, Errno> {
        let (size, space) = match (&attr.layout, open) {
            // A symbolic link's size is its target's length, as lstat says.
            (None, _) => (attr.target.as_ref().map_or(0, |t| t.len() as u64), 0),
            (Some(_), Some(file)) => self.client.size_and_space(file).map_err(|e| errno(&e))?,
            (Some(layout), None) => match self.with_file(attr.fid, layout.clone(), |f| self.client.size_and_space(f)) {
                Ok(sized) => sized,
                // Removed from another mount since its attributes came,
                // and its objects with it: stale, so that the kernel
                // looks the name up again, as it does for NFS.
                Err(error @ NetError::MissingObject { .. }) => {
                    return Err(if self.is_gone(attr.fid) { Errno::ESTALE } else { errno(&error) })
                }
                Err(error) => return Err(errno(&error)),
            },
        };
        Ok(file_attr(&attr, size, space))
    }

    /// The inode at `path` (a lookup, by name), and the kernel learns it.
    /// A file removed from another mount between its attributes and its
    /// size is looked up again: the name may hold another file by now.
    fn entry(&self, req: &Request, path: &str, reply: ReplyEntry) {
        let lookup = || match self.mds(req, MdsRequest::Stat { path: path.to_string() }) {
            Ok(MdsReply::Attr(attr)) => self.sized(attr, None),
            Ok(_) => Err(Errno::EIO),
            Err(e) => Err(e),
        };
        let mut result = lookup();
        for _ in 0..LOOKUPS_AGAIN_MAX {
            if result != Err(Errno::ESTALE) {
                break;
            }
            result = lookup();
        }
        match result {
            Ok(attr) => {
                self.nodes.lock().expect("nodes").learn(attr.ino.0, path);
                reply.entry(&TTL, &attr, Generation(0));
            }
            Err(e) => reply.error(e),
        }
    }

    /// `f` on the file `fid` through a handle of its own, closed after
    /// (the first error of the two is the one returned).
    fn with_file<T>(
        &self,
        fid: Fid,
        layout: lanefs_core::layout::Layout,
        f: impl FnOnce(&File) -> Result<T, NetError>,
    ) -> Result<T, NetError> {
        let info = lanefs_proto::FileInfo { fid, layout };
        let file = self.client.open_file(&lanefs_proto::fid_name(fid), info)?;
        let done = f(&file);
        let closed = self.client.close(file);
        let value = done?;
        closed?;
        Ok(value)
    }

    /// A client handle on `path`'s file, emptied first if `flags` say
    /// `O_TRUNC`.
    fn open_handle(&self, path: &str, info: lanefs_proto::FileInfo, flags: i32) -> Result<File, Errno> {
        let file = self.client.open_file(path, info).map_err(|e| errno(&e))?;
        if flags & libc::O_TRUNC != 0 {
            if let Err(e) = self.client.truncate(&file, 0) {
                let _ = self.client.close(file);
                return Err(errno(&e));
            }
        }
        Ok(file)
    }

    /// Keep `file` open as a new handle for `uid`, if the mount's bounds
    /// allow: `ENFILE` when the mount's table is full, `EMFILE` when the
    /// uid's share of it is.
    fn keep_open(&self, uid: u32, ino: u64, file: File, flags: i32, recorded: bool) -> Result<u64, Errno> {
        if let Err(full) = self.open_counts.lock().expect("open counts").take(uid) {
            warn!(
                uid,
                open = OPEN_MAX,
                per_uid = OPEN_PER_UID_MAX,
                "refusing an open: the mount's open files are at their bound"
            );
            let _ = self.client.close(file);
            self.closed_at_mds(Fid(ino), recorded);
            return Err(full);
        }
        if !recorded {
            warn!(ino, "the MDS did not record an open: a removal elsewhere would end its reads");
        }
        let fh = self.new_handle();
        let append = flags & libc::O_APPEND != 0;
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let open = Open { ino, uid, file, append, writable, written: Mutex::new(false), recorded };
        self.files.lock().expect("files").insert(fh, Arc::new(open));
        Ok(fh)
    }

    /// Closes handle `fh`: its client file, its record at the MDS, and a
    /// removed file's hidden name if it was the last open here.
    fn drop_open(&self, fh: u64) -> Result<(), Errno> {
        let Some(open) = self.files.lock().expect("files").remove(&fh) else {
            return Err(Errno::EBADF);
        };
        self.open_counts.lock().expect("open counts").give_back(open.uid);
        // The kernel releases a handle once every operation on it has been
        // answered, and each lets go of it before answering; so this waits
        // at most for that last moment.
        let mut open = open;
        let open = loop {
            match Arc::try_unwrap(open) {
                Ok(open) => break open,
                Err(shared) => {
                    open = shared;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        };
        let ino = open.ino;
        let closed = self.client.close(open.file);
        if open.recorded {
            if let Err(e) = self.client.mds_closed(Fid(ino)) {
                warn!(%e, ino, "telling the MDS of a close");
            }
        }
        self.remove_orphan_if_closed(ino);
        closed.map_err(|e| {
            warn!(%e, "closing a file after its last close(2)");
            errno(&e)
        })
    }

    /// A file removed while open here is removed for good once no handle
    /// of this mount has it open.
    fn remove_orphan_if_closed(&self, ino: u64) {
        if self.files.lock().expect("files").values().any(|o| o.ino == ino) {
            return;
        }
        let Some(orphan) = self.orphans.lock().expect("orphans").remove(&ino) else { return };
        match self.client.mds_as(&orphan.credentials, MdsRequest::Unlink { path: orphan.hidden.clone() }) {
            Ok(_) => self.nodes.lock().expect("nodes").removed(&orphan.hidden),
            Err(e) => warn!(%e, path = orphan.hidden, "removing a file removed while it was open"),
        }
    }

    /// Every handle of this mount on inode `ino` with writes not yet
    /// flushed is flushed now (a lost write reported here), so that what
    /// comes next (a modification time set) is ordered after them.
    fn settle_writes(&self, ino: u64) -> Result<(), Errno> {
        let opens: Vec<Arc<Open>> =
            self.files.lock().expect("files").values().filter(|o| o.ino == ino).cloned().collect();
        for open in opens {
            let mut written = open.written.lock().expect("written");
            if *written {
                self.client.fsync(&open.file).map_err(|e| errno(&e))?;
                *written = false;
            }
        }
        Ok(())
    }

    fn truncate(
        &self,
        open: Option<&File>,
        ino: u64,
        layout: Option<lanefs_core::layout::Layout>,
        size: u64,
    ) -> Result<(), Errno> {
        match (open, layout) {
            (Some(file), _) => self.client.truncate(file, size).map_err(|e| errno(&e)),
            (None, Some(layout)) => {
                self.with_file(Fid(ino), layout, |file| self.client.truncate(file, size)).map_err(|e| errno(&e))
            }
            (None, None) => Err(Errno::EISDIR),
        }
    }
}

impl LanefsFs {
    /// `LANEFS_IOC_CREATE_STRIPED` on directory `dir` (open as `fh`): the
    /// file it names, created with its striping by the caller, whom the
    /// MDS checks as for any create (`EEXIST` if the name is taken).
    fn create_striped(&self, req: &Request, dir: INodeNo, fh: FileHandle, data: &[u8]) -> Result<(), Errno> {
        if data.len() != CREATE_BYTES {
            return Err(Errno::EINVAL);
        }
        if self.listings.lock().expect("listings").page(fh.0).is_none() {
            return Err(Errno::ENOTDIR);
        }
        let size = u64::from_ne_bytes(data[0..8].try_into().expect("8 bytes"));
        let count = i32::from_ne_bytes(data[8..12].try_into().expect("4 bytes"));
        let offset = i32::from_ne_bytes(data[12..16].try_into().expect("4 bytes"));
        let mode = u32::from_ne_bytes(data[16..20].try_into().expect("4 bytes"));
        let name = &data[24..];
        let name = &name[..name.iter().position(|b| *b == 0).ok_or(Errno::ENAMETOOLONG)?];
        let name = std::str::from_utf8(name).map_err(|_| Errno::EINVAL)?;
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(Errno::EINVAL);
        }
        let stripe = StripeSpec {
            count: (count != 0).then_some(i64::from(count)),
            size: (size != 0).then_some(size),
            start_ost: (offset != -1).then_some(i64::from(offset)),
            ..StripeSpec::default()
        };
        let path = child_path(dir.0, name);
        let request = MdsRequest::Create {
            path,
            stripe,
            mode: CreateMode::Exclusive,
            access: Access::Read,
            permissions: mode & 0o7777,
        };
        self.mds(req, request).map(|_| ())
    }

    /// The page of directory `dir` after `cursor`, its first entry the
    /// listing's `first`.
    fn dir_page(&self, req: &Request, dir: Fid, after: Option<String>, first: u64) -> Result<Page, Errno> {
        let request = MdsRequest::ReaddirFid { fid: dir, cursor: after.clone() };
        let MdsReply::Entries(page) = self.mds(req, request)? else { return Err(Errno::EIO) };
        let last = page.entries.last().map(|e| e.name.clone());
        // A page that says more follow but holds nothing would never end.
        let more = page.more && !page.entries.is_empty();
        let len = page.entries.len() as u64;
        Ok(Page { first, after, entries: Some(Arc::new(page.entries)), len, last, more })
    }
}

impl Filesystem for LanefsFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Large requests: a 1 MiB write or read is one lanefs call (the
        // kernel may grant less; it says so and lanefs works with that).
        let _ = config.set_max_write(REQUEST_BYTES_MAX);
        let _ = config.set_max_readahead(REQUEST_BYTES_MAX);
        // File locks go to lanefs (the MDS grants them), not the kernel's
        // table of this node alone.
        if let Err(missing) = config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS | InitFlags::FUSE_FLOCK_LOCKS) {
            warn!(?missing, "this kernel keeps file locks to this node: they will not hold between mounts");
        }
        // Without this the kernel refuses a shared mapping of a direct I/O
        // file (ENODEV), which is what a mount wants unless told
        // otherwise: such a mapping cannot be kept coherent with other
        // mounts (see `allowing_shared_mmap`). Private mappings are served
        // either way; the kernel drops the file's cached pages at each
        // mmap, so a mapping starts from what lanefs holds then.
        if self.shared_mmap {
            if let Err(missing) = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP) {
                warn!(?missing, "this kernel (before Linux 6.6) refuses shared mappings of lanefs files");
            }
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.child(parent, name) {
            Ok(path) => self.entry(req, &path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.nodes.lock().expect("nodes").forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let open = fh.and_then(|fh| self.open_file(fh).ok());
        match self.attr(req, ino.0, open.as_ref().map(|o| &o.file)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let result = (|| {
            let fid = Fid(ino.0);
            let open = fh.and_then(|fh| self.open_file(fh).ok());
            if mode.is_some() || uid.is_some() || gid.is_some() {
                let request = MdsRequest::SetAttrFid { fid, permissions: mode.map(|m| m & 0o7777), uid, gid };
                self.mds(req, request)?;
            }
            let at = |time: TimeOrNow| -> Result<Option<u64>, Errno> {
                match time {
                    TimeOrNow::Now => Ok(None),
                    TimeOrNow::SpecificTime(t) => {
                        Ok(Some(t.duration_since(UNIX_EPOCH).map_err(|_| Errno::EINVAL)?.as_nanos() as u64))
                    }
                }
            };
            if let Some(atime) = atime {
                self.mds(req, MdsRequest::SetAtimeFid { fid, at: at(atime)? })?;
            }
            if let Some(mtime) = mtime {
                // The time set covers what was written before it: that data
                // is made durable now, and no later close of those handles
                // moves the time again (`cp -p`, `tar -x`, `futimens`).
                self.settle_writes(ino.0)?;
                self.mds(req, MdsRequest::SetMtimeFid { fid, at: at(mtime)? })?;
            }
            if let Some(size) = size {
                // truncate(2): the MDS checks that the caller may write the
                // file, as an open for writing does (ftruncate's descriptor
                // was checked when it was opened).
                let layout = match &open {
                    Some(_) => None,
                    None => match self.mds(req, MdsRequest::OpenFid { fid, access: Access::Write })? {
                        MdsReply::File(info) => Some(info.layout),
                        _ => return Err(Errno::EIO),
                    },
                };
                self.truncate(open.as_ref().map(|o| &o.file), ino.0, layout, size)?;
            }
            self.attr(req, ino.0, open.as_ref().map(|o| &o.file))
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        let result = self.child(parent, name).and_then(|path| {
            self.mds(req, MdsRequest::Mkdir { path: path.clone(), permissions: mode & !umask & 0o7777 })?;
            Ok(path)
        });
        match result {
            Ok(path) => self.entry(req, &path, reply),
            Err(e) => reply.error(e),
        }
    }

    /// `mknod(2)`, `mkfifo` and a Unix socket's `bind`: the inode is kept
    /// by the MDS, and this node's kernel serves what is opened through
    /// it (a pipe joins processes of this mount). A regular file made so
    /// (`mknod` with `S_IFREG`) gets its objects as a `create` does.
    fn mknod(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, rdev: u32, reply: ReplyEntry) {
        let result = self.child(parent, name).and_then(|path| {
            let permissions = mode & !umask & 0o7777;
            match FileKind::of_mode(mode) {
                Some(FileKind::File) => {
                    let request = MdsRequest::Create {
                        path: path.clone(),
                        stripe: StripeSpec::default(),
                        mode: CreateMode::Exclusive,
                        access: Access::Read,
                        permissions,
                    };
                    self.mds(req, request)?;
                }
                Some(kind) if kind.is_special() => {
                    let rdev = if kind.is_device() { dev_of_kernel(rdev) } else { 0 };
                    self.mds(req, MdsRequest::Mknod { path: path.clone(), kind, permissions, rdev })?;
                }
                _ => return Err(Errno::EINVAL),
            }
            Ok(path)
        });
        match result {
            Ok(path) => self.entry(req, &path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(&self, req: &Request, parent: INodeNo, link_name: &OsStr, target: &Path, reply: ReplyEntry) {
        let result = self.child(parent, link_name).and_then(|path| {
            let target = target.to_str().ok_or(Errno::EINVAL)?.to_string();
            self.mds(req, MdsRequest::Symlink { path: path.clone(), target })?;
            Ok(path)
        });
        match result {
            Ok(path) => self.entry(req, &path, reply),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let result = match self.mds(req, MdsRequest::StatFid { fid: Fid(ino.0) }) {
            Ok(MdsReply::Attr(Attr { target: Some(target), .. })) => Ok(target),
            Ok(_) => Err(Errno::EINVAL),
            Err(e) => Err(e),
        };
        match result {
            Ok(target) => reply.data(target.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let result = (|| {
            let to = self.child(newparent, newname)?;
            // The inode the kernel holds, not whatever its old name is now.
            let MdsReply::Attr(attr) = self.mds(req, MdsRequest::LinkFid { fid: Fid(ino.0), to: to.clone() })? else {
                return Err(Errno::EIO);
            };
            Ok((self.sized(attr, None)?, to))
        })();
        match result {
            Ok((attr, to)) => {
                self.nodes.lock().expect("nodes").learn(attr.ino.0, &to);
                reply.entry(&TTL, &attr, Generation(0));
            }
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self.child(parent, name).and_then(|path| {
            let ino = self.nodes.lock().expect("nodes").ino(&path);
            let open_here = ino.is_some_and(|ino| self.files.lock().expect("files").values().any(|o| o.ino == ino));
            match ino {
                Some(ino) if open_here => {
                    // Still open here: it stays readable until its last
                    // close, under a hidden name.
                    // Should that fail, the name goes as any other: the
                    // MDS keeps the objects while the file is open, so
                    // reads and writes here go on, only `fstat` fails.
                    let hidden = child_path(parent.0, &hidden_name(ino));
                    match self.mds(req, MdsRequest::Rename { from: path.clone(), to: hidden.clone() }) {
                        Ok(_) => {
                            self.nodes.lock().expect("nodes").renamed(&path, &hidden);
                            let orphan = Orphan { hidden, credentials: credentials(req) };
                            self.orphans.lock().expect("orphans").insert(ino, orphan);
                        }
                        Err(e) => {
                            warn!(?e, path, hidden, "keeping a removed open file under a hidden name; removing it");
                            self.mds(req, MdsRequest::Unlink { path: path.clone() })?;
                            self.nodes.lock().expect("nodes").removed(&path);
                        }
                    }
                }
                _ => {
                    self.mds(req, MdsRequest::Unlink { path: path.clone() })?;
                    self.nodes.lock().expect("nodes").removed(&path);
                }
            }
            Ok(())
        });
        reply_empty(result, reply)
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = self.child(parent, name).and_then(|path| {
            self.mds(req, MdsRequest::Rmdir { path: path.clone() })?;
            self.nodes.lock().expect("nodes").removed(&path);
            Ok(())
        });
        reply_empty(result, reply)
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let result = (|| {
            let (from, to) = (self.child(parent, name)?, self.child(newparent, newname)?);
            if flags.contains(RenameFlags::RENAME_EXCHANGE) || flags.contains(RenameFlags::RENAME_WHITEOUT) {
                return Err(Errno::EINVAL);
            }
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                // Asked, then done: another mount could create `to` in
                // between (the MDS has no rename that refuses to replace).
                match self.mds(req, MdsRequest::Stat { path: to.clone() }) {
                    Ok(_) => return Err(Errno::EEXIST),
                    Err(e) if e == Errno::ENOENT => {}
                    Err(e) => return Err(e),
                }
            }
            self.mds(req, MdsRequest::Rename { from: from.clone(), to: to.clone() })?;
            self.nodes.lock().expect("nodes").renamed(&from, &to);
            Ok(())
        })();
        reply_empty(result, reply)
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let result = (|| {
            let fid = Fid(ino.0);
            // Recorded open at the MDS in the same step: removed from
            // another mount from then on, the file stays readable here
            // until this handle's release.
            let (reply, recorded) =
                self.open_at_mds(req, MdsRequest::OpenFid { fid, access: access(flags.0) }).map_err(stale)?;
            let MdsReply::File(info) = reply else { return Err(Errno::EIO) };
            let label = self.path(ino).unwrap_or_else(|_| lanefs_proto::fid_name(fid));
            let file = self.open_handle(&label, info, flags.0).inspect_err(|_| self.closed_at_mds(fid, recorded))?;
            self.keep_open(req.uid(), ino.0, file, flags.0, recorded)
        })();
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let result = (|| {
            let path = self.child(parent, name)?;
            let create = if flags & libc::O_EXCL != 0 { CreateMode::Exclusive } else { CreateMode::OpenOrCreate };
            let request = MdsRequest::Create {
                path: path.clone(),
                stripe: StripeSpec::default(),
                mode: create,
                access: access(flags),
                permissions: mode & !umask & 0o7777,
            };
            let (reply, recorded) = self.open_at_mds(req, request)?;
            let MdsReply::File(info) = reply else { return Err(Errno::EIO) };
            let fid = info.fid;
            let file = self.open_handle(&path, info, flags).inspect_err(|_| self.closed_at_mds(fid, recorded))?;
            let fh = self.keep_open(req.uid(), fid.0, file, flags, recorded)?;
            let attr = match self.open_file(FileHandle(fh)).and_then(|open| self.attr(req, fid.0, Some(&open.file))) {
                Ok(attr) => attr,
                Err(e) => {
                    let _ = self.drop_open(fh);
                    return Err(e);
                }
            };
            self.nodes.lock().expect("nodes").learn(attr.ino.0, &path);
            Ok((attr, fh))
        })();
        match result {
            Ok((attr, fh)) => reply.created(&TTL, &attr, Generation(0), FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let result = (|| {
            let open = self.open_file(fh)?;
            // A read ends at the end of the file, as the OSTs know it now.
            self.client.pread_to_end(&open.file, offset, u64::from(size)).map_err(|e| errno(&e))
        })();
        match result {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let result = (|| {
            let open = self.open_file(fh)?;
            // O_APPEND: at the end as the OSTs know it (not atomic against
            // another mount's append, as on Lustre without a lock on it).
            let offset = if open.append { self.client.size(&open.file).map_err(|e| errno(&e))? } else { offset };
            self.client.pwrite(&open.file, offset, data).map_err(|e| errno(&e))?;
            *open.written.lock().expect("written") = true;
            Ok(data.len() as u32)
        })();
        match result {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, req: &Request, ino: INodeNo, fh: FileHandle, lock_owner: LockOwner, reply: ReplyEmpty) {
        // Each close(2): what was written through this handle is made
        // durable, and a lost write is reported to the program here; the
        // file's modification time becomes now. Then the closing owner's
        // file locks go, as POSIX has a close drop them.
        let result = self.open_file(fh).and_then(|open| {
            let mut written = open.written.lock().expect("written");
            if *written {
                self.client.fsync(&open.file).map_err(|e| errno(&e))?;
                *written = false;
                // The bytes are safe: a time the MDS refuses (the file's
                // mode changed since it was opened) does not fail the close,
                // nor does a file removed meanwhile (it has no times left).
                match self.mds(req, MdsRequest::SetMtimeFid { fid: Fid(ino.0), at: None }) {
                    Ok(_) => {}
                    Err(e) if e == Errno::ENOENT => {}
                    Err(e) => {
                        warn!(?e, ino = ino.0, "setting the modification time of a file written through this mount")
                    }
                }
            }
            Ok(())
        });
        self.locks.closed(ino.0, lock_owner.0);
        reply_empty(result, reply)
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // The last close of an open file description drops its `flock`.
        if let Some(owner) = lock_owner {
            self.locks.closed(ino.0, owner.0);
        }
        match self.drop_open(fh.0) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        reply: ReplyLock,
    ) {
        let call = LockCall { ino: ino.0, owner: lock_owner.0, start, end, typ, pid, tid: req.pid(), uid: req.uid() };
        match self.locks.get(call) {
            Ok((start, end, typ, pid)) => reply.locked(start, end, typ, pid),
            Err(e) => reply.error(e),
        }
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let call = LockCall { ino: ino.0, owner: lock_owner.0, start, end, typ, pid, tid: req.pid(), uid: req.uid() };
        self.locks.set(call, sleep, reply);
    }

    fn destroy(&mut self) {
        let orphans: Vec<u64> = self.orphans.lock().expect("orphans").keys().copied().collect();
        for ino in orphans {
            self.remove_orphan_if_closed(ino);
        }
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        let result = self.open_file(fh).and_then(|open| {
            self.client.fsync(&open.file).map_err(|e| errno(&e))?;
            *open.written.lock().expect("written") = false;
            Ok(())
        });
        reply_empty(result, reply)
    }

    /// `fallocate(2)` on the OSTs, as Lustre's client sends it: mode 0 and
    /// `FALLOC_FL_KEEP_SIZE` reserve space (`ENOSPC` now if an OST has
    /// none), `FALLOC_FL_PUNCH_HOLE` frees a range, which then reads as
    /// zeros. The other modes (`ZERO_RANGE`, `COLLAPSE_RANGE`,
    /// `INSERT_RANGE`, `UNSHARE_RANGE`) are `EOPNOTSUPP`, as on Lustre.
    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let result = (|| {
            let open = self.open_file(fh)?;
            let cut = match mode {
                0 => Cut::Reserve { offset, len: length, keep_size: false },
                libc::FALLOC_FL_KEEP_SIZE => Cut::Reserve { offset, len: length, keep_size: true },
                m if m == libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE => Cut::Hole { offset, len: length },
                _ => return Err(Errno::EOPNOTSUPP),
            };
            self.client.fallocate(&open.file, cut).map_err(|e| errno(&e))?;
            // The change is made durable, and the modification time moved
            // (by every mode, as on ext4), at close.
            *open.written.lock().expect("written") = true;
            Ok(())
        })();
        reply_empty(result, reply)
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let result = (|| {
            let dir = Fid(ino.0);
            // The first page now: a directory the caller may not read, or
            // a file, fails the opendir, as on a local file system.
            let page = self.dir_page(req, dir, None, 0)?;
            let fh = self.new_handle();
            let mut listings = self.listings.lock().expect("listings");
            match listings.open(fh, req.uid(), dir) {
                Ok(()) => {}
                Err(full) => {
                    warn!(uid = req.uid(), ?full, "refusing an opendir: the mount's listings are at their bound");
                    return Err(match full {
                        listings::Full::Uid => Errno::EMFILE,
                        listings::Full::Mount => Errno::ENFILE,
                    });
                }
            }
            listings.set_page(fh, page);
            Ok(fh)
        })();
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, req: &Request, ino: INodeNo, fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        // Offsets: `.` is element 0, `..` 1, entry i element i + 2; each
        // element is given the offset of the one after it.
        let mut element = offset;
        while element < 2 {
            let name = if element == 0 { "." } else { ".." };
            if reply.add(INodeNo(ino.0), element + 1, FileType::Directory, name) {
                return reply.ok();
            }
            element += 1;
        }
        loop {
            let index = element - 2;
            let Some((dir, page)) = self.listings.lock().expect("listings").page(fh.0) else {
                return reply.error(Errno::EBADF);
            };
            let wanted = if index < page.first {
                // Read again from before this page (rewinddir, seekdir).
                Some((None, 0))
            } else if index >= page.first + page.len {
                if !page.more {
                    return reply.ok();
                }
                Some((page.last.clone(), page.first + page.len))
            } else if page.entries.is_none() {
                // Not kept (the mount's bound on kept pages): again.
                Some((page.after.clone(), page.first))
            } else {
                None
            };
            let page = match wanted {
                None => page,
                Some((after, first)) => match self.dir_page(req, dir, after, first) {
                    Ok(fetched) => {
                        self.listings.lock().expect("listings").set_page(fh.0, fetched.clone());
                        fetched
                    }
                    Err(e) => return reply.error(e),
                },
            };
            if index < page.first || (index >= page.first + page.len && !page.more) {
                // The directory shrank under a reread: nothing more here.
                return reply.ok();
            }
            let entries = page.entries.as_deref().expect("a page just fetched or kept holds its entries");
            let skip = usize::try_from(index.saturating_sub(page.first)).unwrap_or(usize::MAX);
            for entry in entries.iter().skip(skip) {
                element += 1;
                if reply.add(INodeNo(entry.fid.0), element, file_type(entry.kind), &entry.name) {
                    return reply.ok();
                }
            }
            element = element.max(page.first + page.len + 2);
        }
    }

    fn releasedir(&self, _req: &Request, _ino: INodeNo, fh: FileHandle, _flags: OpenFlags, reply: ReplyEmpty) {
        self.listings.lock().expect("listings").release(fh.0);
        reply.ok();
    }

    /// lanefs's ioctls (`include/lanefs_user.h`): one lock advice, and
    /// group locks, on an open file, taken by this mount's client, which
    /// is the one that writes the file. A group lock needs the file open
    /// for writing (`EBADF`) and a group id other than 0 (`EINVAL`). On a
    /// directory, a file created with a striping (what MPI-IO's striping
    /// hints ask for, through `c/lanefs_mpiio_striping.c`).
    fn ioctl(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: fuser::IoctlFlags,
        cmd: u32,
        in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let result = (|| {
            if cmd == LANEFS_IOC_CREATE_STRIPED {
                return self.create_striped(req, ino, fh, in_data).map(|()| Vec::new());
            }
            let open = self.open_file(fh)?;
            let u32_at = |i: usize| u32::from_ne_bytes(in_data[i..i + 4].try_into().expect("4 bytes"));
            let u64_at = |i: usize| u64::from_ne_bytes(in_data[i..i + 8].try_into().expect("8 bytes"));
            match cmd {
                LANEFS_IOC_GROUP_LOCK | LANEFS_IOC_GROUP_UNLOCK if in_data.len() == 8 => {
                    let gid = u64_at(0);
                    // A group lock holds off every other writer: only a
                    // descriptor open for writing may take one.
                    if cmd == LANEFS_IOC_GROUP_LOCK && !open.writable {
                        warn!(ino = open.ino, "a group lock asked on a file not open for writing: EBADF");
                        return Err(Errno::EBADF);
                    }
                    let done = if cmd == LANEFS_IOC_GROUP_LOCK {
                        self.client.group_lock(&open.file, gid)
                    } else {
                        self.client.group_unlock(&open.file, gid)
                    };
                    done.map_err(|e| errno(&e))?;
                    Ok(Vec::new())
                }
                LANEFS_IOC_LADVISE if in_data.len() == LADVISE_BYTES => {
                    let advice = Advice {
                        advice: u32_at(0),
                        flags: u32_at(4),
                        mode: u32_at(8),
                        start: u64_at(16),
                        end: u64_at(24),
                    };
                    let results = self.client.ladvise(&open.file, &[advice]).map_err(|e| errno(&e))?;
                    let mut out = in_data.to_vec();
                    let code = results.first().map_or(0, |r| r.code());
                    out[12..16].copy_from_slice(&code.to_ne_bytes());
                    Ok(out)
                }
                _ => Err(Errno::ENOTTY),
            }
        })();
        match result {
            Ok(out) => reply.ioctl(0, &out),
            Err(e) => reply.error(e),
        }
    }

    /// `access(2)`: the mode bits the MDS keeps, for the caller's uid,
    /// gid and groups, by the rule the MDS applies to opens.
    fn access(&self, req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        let result = match self.mds(req, MdsRequest::StatFid { fid: Fid(ino.0) }) {
            Ok(MdsReply::Attr(attr)) => Ok(attr),
            Ok(_) => Err(Errno::EIO),
            Err(e) => Err(e),
        };
        match result {
            Ok(attr) if may(&credentials(req), &attr, mask.bits() & 0o7) => reply.ok(),
            Ok(_) => reply.error(Errno::EACCES),
            Err(e) => reply.error(e),
        }
    }

    /// `getxattr`: `lustre.lov` is made from the layout, as Lustre's client
    /// makes it; every other name is the MDS's (see `lanefs_mds::xattr`).
    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let result = (|| {
            let fid = Fid(ino.0);
            let Some(name) = name.to_str() else { return Err(Errno::ENODATA) };
            if name != LOV_XATTR {
                return match self.mds(req, MdsRequest::GetXattr { node: Node::Fid(fid), name: name.to_string() })? {
                    MdsReply::Xattr(value) => Ok(value),
                    _ => Err(Errno::EIO),
                };
            }
            match self.mds(req, MdsRequest::StatFid { fid })? {
                MdsReply::Attr(Attr { layout: Some(layout), fid, .. }) => Ok(lov_user_md(fid.0, &layout)),
                _ => Err(Errno::ENODATA),
            }
        })();
        match result {
            Ok(value) => xattr_reply(&value, size, reply),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let result = (|| {
            let fid = Fid(ino.0);
            let MdsReply::XattrNames(names) = self.mds(req, MdsRequest::ListXattrs { node: Node::Fid(fid) })? else {
                return Err(Errno::EIO);
            };
            let mut list = Vec::new();
            if let MdsReply::Attr(Attr { layout: Some(_), .. }) = self.mds(req, MdsRequest::StatFid { fid })? {
                list.extend_from_slice(LOV_XATTR.as_bytes());
                list.push(0);
            }
            for name in names {
                list.extend_from_slice(name.as_bytes());
                list.push(0);
            }
            Ok(list)
        })();
        match result {
            Ok(names) => xattr_reply(&names, size, reply),
            Err(e) => reply.error(e),
        }
    }

    /// `setxattr`: stored by the MDS, on the inode the kernel holds. Setting
    /// `lustre.lov` on a file is accepted and changes nothing, as Lustre's
    /// client does so that `tar` and `rsync` can restore the attributes
    /// they saved (a layout is fixed at create; `lfs setstripe` makes new
    /// files); anything but a layout there is `EINVAL`.
    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let result = (|| {
            let fid = Fid(ino.0);
            let how = match flags {
                0 => XattrHow::Either,
                libc::XATTR_CREATE => XattrHow::Create,
                libc::XATTR_REPLACE => XattrHow::Replace,
                _ => return Err(Errno::EINVAL),
            };
            let Some(name) = name.to_str() else { return Err(Errno::EOPNOTSUPP) };
            if name == LOV_XATTR {
                return match self.mds(req, MdsRequest::StatFid { fid })? {
                    MdsReply::Attr(Attr { layout: Some(_), .. }) if how != XattrHow::Create && is_lov(value) => Ok(()),
                    MdsReply::Attr(Attr { layout: Some(_), .. }) if how == XattrHow::Create => Err(Errno::EEXIST),
                    MdsReply::Attr(Attr { layout: Some(_), .. }) => Err(Errno::EINVAL),
                    _ => Err(Errno::EOPNOTSUPP),
                };
            }
            let request =
                MdsRequest::SetXattr { node: Node::Fid(fid), name: name.to_string(), value: value.to_vec(), how };
            self.mds(req, request).map(|_| ())
        })();
        reply_empty(result, reply)
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let result = (|| {
            let Some(name) = name.to_str() else { return Err(Errno::ENODATA) };
            if name == LOV_XATTR {
                // A file's layout lives as long as the file.
                return Err(Errno::EOPNOTSUPP);
            }
            let request = MdsRequest::RemoveXattr { node: Node::Fid(Fid(ino.0)), name: name.to_string() };
            self.mds(req, request).map(|_| ())
        })();
        reply_empty(result, reply)
    }

    fn statfs(&self, req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // As `lanefs df` sums it up (`lanefs_client::space`), so the two agree.
        let result = (|| {
            let MdsReply::Statfs(counts) = self.mds(req, MdsRequest::Statfs)? else { return Err(Errno::EIO) };
            let osts = self.client.ost_stats().map_err(|e| errno(&e))?;
            Ok(lanefs_client::space::summary(&counts, &osts))
        })();
        match result {
            Ok(s) => {
                let block = 4096u64;
                let (blocks, free) = (s.total_bytes / block, s.free_bytes / block);
                reply.statfs(blocks, free, free, s.total_inodes, s.free_inodes, 4096, 255, 4096)
            }
            Err(e) => reply.error(e),
        }
    }
}

/// Answer a request that returns nothing but success or an error.
fn reply_empty(result: Result<(), Errno>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// The credentials of the process making `req`: its uid and gid from the
/// kernel, its supplementary groups from `/proc` (as libfuse's
/// `fuse_getgroups` reads them); none if the process is gone.
fn credentials(req: &Request) -> Credentials {
    let groups = std::fs::read_to_string(format!("/proc/{}/status", req.pid()))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Groups:"))?.to_string();
            Some(line["Groups:".len()..].split_whitespace().filter_map(|g| g.parse().ok()).collect::<Vec<u32>>())
        })
        .unwrap_or_default();
    let mut groups = groups;
    groups.truncate(lanefs_proto::GROUPS_MAX);
    Credentials { uid: req.uid(), gid: req.gid(), groups }
}

/// `struct lanefs_ladvise` (`include/lanefs_user.h`): 32 bytes.
const LADVISE_BYTES: usize = 32;

/// Give `advice` to the client of the lanefs mount that serves `file` (an
/// open file under the mount), through `LANEFS_IOC_LADVISE`, as Lustre's
/// `llapi_ladvise` gives it to the kernel's client; the lockahead result
/// code (`LANEFS_LLA_RESULT_*`).
pub fn ladvise_through_mount(file: &std::fs::File, advice: &Advice) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut bytes = [0u8; LADVISE_BYTES];
    bytes[0..4].copy_from_slice(&advice.advice.to_ne_bytes());
    bytes[4..8].copy_from_slice(&advice.flags.to_ne_bytes());
    bytes[8..12].copy_from_slice(&advice.mode.to_ne_bytes());
    bytes[16..24].copy_from_slice(&advice.start.to_ne_bytes());
    bytes[24..32].copy_from_slice(&advice.end.to_ne_bytes());
    // SAFETY: the request's size (encoded in it) is the buffer's, which
    // lives across the call.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), LANEFS_IOC_LADVISE as _, bytes.as_mut_ptr()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u32::from_ne_bytes(bytes[12..16].try_into().expect("4 bytes")))
}
/// `_IOWR('L', 1, struct lanefs_ladvise)`, `_IOW('L', 2, __u64)`,
/// `_IOW('L', 3, __u64)`: direction in bits 30-31 (1 write, 3 both), size
/// in bits 16-29, type in 8-15, number in 0-7.
const LANEFS_IOC_LADVISE: u32 = (3 << 30) | ((LADVISE_BYTES as u32) << 16) | ((b'L' as u32) << 8) | 1;
const LANEFS_IOC_GROUP_LOCK: u32 = (1 << 30) | (8 << 16) | ((b'L' as u32) << 8) | 2;
const LANEFS_IOC_GROUP_UNLOCK: u32 = (1 << 30) | (8 << 16) | ((b'L' as u32) << 8) | 3;
/// `struct lanefs_create` (`include/lanefs_user.h`): 280 bytes.
const CREATE_BYTES: usize = 280;
/// `_IOW('L', 4, struct lanefs_create)`.
const LANEFS_IOC_CREATE_STRIPED: u32 = (1 << 30) | ((CREATE_BYTES as u32) << 16) | ((b'L' as u32) << 8) | 4;

/// The extended attribute that holds a file's layout, as Lustre's does.
const LOV_XATTR: &str = "lustre.lov";
/// `LOV_USER_MAGIC_V1` and `LOV_PATTERN_RAID0` (lustre_user.h).
const LOV_USER_MAGIC_V1: u32 = 0x0BD1_0BD0;
/// `LOV_USER_MAGIC_V3` (with a pool name) and `LOV_USER_MAGIC_COMP_V1`
/// (a composite layout), the other layouts `lustre.lov` may hold.
const LOV_USER_MAGIC_V3: u32 = 0x0BD3_0BD0;
const LOV_USER_MAGIC_COMP_V1: u32 = 0x0BD6_0BD0;
const LOV_PATTERN_RAID0: u32 = 1;
/// `LOV_PATTERN_OVERSTRIPING`: stripes share OSTs.
const LOV_PATTERN_OVERSTRIPING: u32 = 0x200;

/// `LCME_FL_INIT`: a component whose objects exist.
const LCME_FL_INIT: u32 = 0x10;

/// `layout` as Lustre's `lustre.lov` holds it (host-endian, packed): a
/// plain layout as a `struct lov_user_md_v1`, a composite one as a
/// `struct lov_comp_md_v1` whose entries point at one `lov_user_md_v1`
/// per component, so that tools that read `lustre.lov` read it.
fn lov_user_md(fid: u64, layout: &lanefs_core::layout::Layout) -> Vec<u8> {
    if !layout.is_composite() {
        return lov_user_md_v1(fid, layout.stripe_size(), layout.objects(), layout.is_overstriped());
    }
    let components = layout.components();
    const HEADER: usize = 32;
    const ENTRY: usize = 48;
    let blobs: Vec<Vec<u8>> = (0..components.len())
        .map(|i| {
            let c = &components[i];
            lov_user_md_v1(fid, c.stripe_size, layout.component_objects(i), layout.component_is_overstriped(i))
        })
        .collect();
    let size = HEADER + ENTRY * components.len() + blobs.iter().map(Vec::len).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&LOV_USER_MAGIC_COMP_V1.to_ne_bytes());
    out.extend_from_slice(&(size as u32).to_ne_bytes()); // lcm_size
    out.extend_from_slice(&0u32.to_ne_bytes()); // lcm_layout_gen
    out.extend_from_slice(&0u16.to_ne_bytes()); // lcm_flags
    out.extend_from_slice(&(components.len() as u16).to_ne_bytes()); // lcm_entry_count
    out.extend_from_slice(&0u16.to_ne_bytes()); // lcm_mirror_count: one mirror
    out.extend_from_slice(&[0u8; 2]); // lcm_ec_count, padding
    out.extend_from_slice(&[0u8; 12]); // lcm_padding1, lcm_padding2
    let mut offset = HEADER + ENTRY * components.len();
    for (i, (c, blob)) in components.iter().zip(&blobs).enumerate() {
        out.extend_from_slice(&(i as u32 + 1).to_ne_bytes()); // lcme_id
        out.extend_from_slice(&LCME_FL_INIT.to_ne_bytes());
        out.extend_from_slice(&c.start.to_ne_bytes());
        out.extend_from_slice(&c.end.to_ne_bytes()); // LUSTRE_EOF is u64::MAX, as lanefs's
        out.extend_from_slice(&(offset as u32).to_ne_bytes());
        out.extend_from_slice(&(blob.len() as u32).to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes()); // lcme_layout_gen
        out.extend_from_slice(&0u64.to_ne_bytes()); // lcme_time_and_id
        out.extend_from_slice(&[0u8; 4]); // stripe counts of erasure coding, compression
        offset += blob.len();
    }
    for blob in blobs {
        out.extend_from_slice(&blob);
    }
    debug_assert_eq!(out.len(), size);
    out
}

/// One RAID-0 layout as Lustre's `struct lov_user_md_v1`: a 32-byte
/// header, then 24 bytes per object (object id, sequence 0, generation 0,
/// OST index).
fn lov_user_md_v1(fid: u64, stripe_size: u64, objects: &[lanefs_core::units::ObjectKey], overstriped: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 24 * objects.len());
    out.extend_from_slice(&LOV_USER_MAGIC_V1.to_ne_bytes());
    let overstriped = if overstriped { LOV_PATTERN_OVERSTRIPING } else { 0 };
    out.extend_from_slice(&(LOV_PATTERN_RAID0 | overstriped).to_ne_bytes());
    out.extend_from_slice(&fid.to_ne_bytes()); // lmm_oi: the file's fid, sequence 0
    out.extend_from_slice(&0u64.to_ne_bytes());
    out.extend_from_slice(&(stripe_size as u32).to_ne_bytes());
    out.extend_from_slice(&(objects.len() as u16).to_ne_bytes());
    out.extend_from_slice(&0u16.to_ne_bytes()); // lmm_layout_gen: layouts never change
    for key in objects {
        out.extend_from_slice(&key.object.0.to_ne_bytes());
        out.extend_from_slice(&0u64.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(&key.ost.0.to_ne_bytes());
    }
    out
}

/// Whether `value` is a layout as `lustre.lov` holds one: a header with
/// one of Lustre's layout magics, in either byte order.
fn is_lov(value: &[u8]) -> bool {
    let Some(magic) = value.get(..4) else { return false };
    let magic = [
        u32::from_le_bytes(magic.try_into().expect("4 bytes")),
        u32::from_be_bytes(magic.try_into().expect("4 bytes")),
    ];
    value.len() >= 32
        && magic.iter().any(|m| [LOV_USER_MAGIC_V1, LOV_USER_MAGIC_V3, LOV_USER_MAGIC_COMP_V1].contains(m))
}

/// The largest extended attribute value or name list the kernel passes
/// (Linux's `XATTR_SIZE_MAX`); a larger one is `E2BIG`, as on Linux.
const XATTR_BYTES_MAX: usize = 65536;

/// What a request for a `len`-byte value with a buffer of `size` bytes
/// gets: its size when asked with size 0, the value if it fits, `ERANGE`
/// if it does not, and `E2BIG` for a value no buffer can hold (a
/// composite layout of many components as `lustre.lov`).
fn xattr_answer(len: usize, size: u32) -> Result<Option<u32>, Errno> {
    match (len, size) {
        (len, _) if len > XATTR_BYTES_MAX => Err(Errno::E2BIG),
        (len, 0) => Ok(Some(len as u32)),
        (len, size) if len <= size as usize => Ok(None),
        _ => Err(Errno::ERANGE),
    }
}

/// An extended attribute's value, or its size when asked with size 0
/// (see [`xattr_answer`]).
fn xattr_reply(value: &[u8], size: u32, reply: ReplyXattr) {
    match xattr_answer(value.len(), size) {
        Ok(Some(len)) => reply.size(len),
        Ok(None) => reply.data(value),
        Err(e) => reply.error(e),
    }
}

/// Whether `who` has the `want` bits (4 read, 2 write, 1 execute) on
/// `attr`: root has all, but execute only where some execute bit is set
/// (or on a directory); others those of their class (owner, group, other).
fn may(who: &Credentials, attr: &Attr, want: i32) -> bool {
    let want = want as u32;
    if who.uid == 0 {
        return want & 1 == 0 || attr.kind == FileKind::Dir || attr.permissions & 0o111 != 0;
    }
    let class = if who.uid == attr.uid {
        attr.permissions >> 6
    } else if who.gid == attr.gid || who.groups.contains(&attr.gid) {
        attr.permissions >> 3
    } else {
        attr.permissions
    };
    class & want == want
}

fn access(flags: i32) -> Access {
    match flags & libc::O_ACCMODE {
        libc::O_WRONLY => Access::Write,
        libc::O_RDWR => Access::ReadWrite,
        _ => Access::Read,
    }
}

/// The error number for `e`, as the program sees it.
fn errno(e: &NetError) -> Errno {
    Errno::from_i32(e.errno().0)
}

/// How many times a lookup is made again when the file it found was
/// removed from another mount before its size came.
const LOOKUPS_AGAIN_MAX: usize = 3;

/// A request by inode (the kernel's fid) that finds no such inode: it was
/// removed, or replaced by a rename, from another mount. `ESTALE`, as an
/// NFS client answers for a stale handle, so that the kernel looks the
/// name up again (`open` and `stat` retry with `LOOKUP_REVAL`) rather
/// than fail with `ENOENT` a name that holds another file by now.
fn stale(error: Errno) -> Errno {
    if error == Errno::ENOENT {
        Errno::ESTALE
    } else {
        error
    }
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Dir => FileType::Directory,
        FileKind::File => FileType::RegularFile,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::Socket => FileType::Socket,
        FileKind::CharDevice => FileType::CharDevice,
        FileKind::BlockDevice => FileType::BlockDevice,
    }
}

/// A device number as the kernel gives it to FUSE (`new_encode_dev`:
/// minor's low byte, major, minor's high bits) as `makedev` makes it,
/// which the MDS keeps.
fn dev_of_kernel(rdev: u32) -> u64 {
    let major = (rdev & 0xfff00) >> 8;
    let minor = (rdev & 0xff) | ((rdev >> 12) & 0xfff00);
    libc::makedev(major, minor)
}

/// A device number the MDS keeps, as the kernel takes it from FUSE.
fn dev_to_kernel(rdev: u64) -> u32 {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}

fn file_attr(attr: &Attr, size: u64, space: u64) -> FileAttr {
    let time = |ns: u64| UNIX_EPOCH + Duration::from_nanos(ns);
    FileAttr {
        ino: INodeNo(attr.fid.0),
        size,
        blocks: space.div_ceil(512),
        atime: time(attr.atime_ns),
        mtime: time(attr.mtime_ns),
        ctime: time(attr.ctime_ns),
        crtime: time(attr.mtime_ns),
        kind: file_type(attr.kind),
        perm: (attr.permissions & 0o7777) as u16,
        nlink: u32::try_from(attr.nlink).unwrap_or(u32::MAX),
        uid: attr.uid,
        gid: attr.gid,
        rdev: dev_to_kernel(attr.rdev),
        flags: 0,
        blksize: 1 << 20,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attribute_no_buffer_can_hold_is_e2big() {
        assert_eq!(xattr_answer(100, 0), Ok(Some(100)), "size 0 asks for the size");
        assert_eq!(xattr_answer(100, 100), Ok(None));
        assert_eq!(xattr_answer(100, 99), Err(Errno::ERANGE));
        assert_eq!(xattr_answer(XATTR_BYTES_MAX, 0), Ok(Some(XATTR_BYTES_MAX as u32)));
        assert_eq!(xattr_answer(XATTR_BYTES_MAX + 1, 0), Err(Errno::E2BIG));
        assert_eq!(xattr_answer(XATTR_BYTES_MAX + 1, u32::MAX), Err(Errno::E2BIG));
    }

    #[test]
    fn device_numbers_cross_the_kernel_and_back() {
        for (major, minor) in [(1, 3), (8, 1), (259, 70000), (4095, 0xfffff)] {
            let kernel = dev_to_kernel(libc::makedev(major, minor));
            assert_eq!(dev_of_kernel(kernel), libc::makedev(major, minor), "{major}:{minor}");
        }
        // The kernel's encoding of 8:1 (`new_encode_dev`) is 0x801.
        assert_eq!(dev_to_kernel(libc::makedev(8, 1)), 0x801);
    }

    #[test]
    fn one_uid_keeps_at_most_its_share_of_open_files() {
        let mut counts = OpenCounts::default();
        for _ in 0..OPEN_PER_UID_MAX {
            counts.take(1000).unwrap();
        }
        assert_eq!(counts.take(1000), Err(Errno::EMFILE));
        counts.take(0).expect("another uid still opens");
        counts.give_back(1000);
        counts.take(1000).expect("a release frees its uid's room");
        for uid in 1..4 {
            for _ in 0..OPEN_PER_UID_MAX - usize::from(uid == 1) {
                counts.take(2000 + uid).unwrap();
            }
        }
        // 1000's share, 0's one, and three more uids' shares less one.
        assert_eq!(counts.total, OPEN_MAX);
        assert_eq!(counts.take(4242), Err(Errno::ENFILE), "the mount's bound");
    }
}
