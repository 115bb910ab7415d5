//! An OST's objects as sparse files on local disk.
//!
//! Each object is one file, `DIR/objects/<id>`, written with `pwrite` (a
//! payload of page frames, or of a client's shared memory, with one
//! `pwritev` of its pieces: no gathering copy) and read with `pread` at the
//! object offset; holes read as zeros, as the
//! [`ObjectStore`] contract requires, and a punch is a `ftruncate`. Open
//! files are cached so that a stream of 1 MiB writes costs one system call
//! each: at most [`OPEN_FILES_MAX`] per OST, fewer when the OSS has few
//! descriptors (the OSS sizes the cache from its limit, leaving room for
//! its connections: `limits::DescriptorBudget`). If opening an object still
//! fails for want of descriptors (`EMFILE`, `ENFILE`), the store closes
//! every cached file and tries once more before it fails with the error
//! number (which the client sees as `IoError::TooManyFiles`). It keeps
//! bytes: phantom payloads (the simulator's) are refused by the trait's
//! default methods, as the wire never carries them anyway. Directories it
//! makes are 0700 and object files 0600: only the OSS's user reads
//! objects, other than through lanefs.
//!
//! Objects are created only in advance, at the MDS's request (Lustre's
//! precreation, [`FileStore::precreate`]): empty files up to an id, which
//! the store then records in `DIR/LAST_ID` (written to a temporary file,
//! made durable and renamed over the old one, so it is always whole). No
//! I/O creates an object: a read, write, punch or getattr of an id at or
//! below `LAST_ID` whose file is gone fails with
//! [`StoreError::NoSuchObject`], never reads as zeros, and so does any id
//! above `LAST_ID` (never allocated). A directory without `LAST_ID` is a
//! new OST, with no objects.
//!
//! Cache advice (`lfs ladvise -a willread|dontneed`) is `posix_fadvise` on
//! the object's file: `POSIX_FADV_WILLNEED` starts reading the range into
//! the OSS's page cache, `POSIX_FADV_DONTNEED` drops its clean pages (what
//! Lustre's `osd-ldiskfs` does with `invalidate_mapping_pages`: dirty pages
//! stay until written back). On tmpfs the page cache holds the objects
//! themselves, and neither changes anything.
//!
//! A store on tmpfs or ramfs is durable on write
//! ([`ObjectStore::durable_on_write`]): `fdatasync` does nothing there, a
//! killed OSS leaves its written bytes in memory, and a machine crash
//! loses the whole store, committed or not. Its OST commits nothing and
//! its clients keep no replay copies, unless the OSS is told to treat it
//! as a disk ([`MemoryStores::AsDisk`]: tests that stand for a disk, with
//! failing syncs or object files cut back as a crash would).

use crate::faults::StoreFaults;
use lanefs_core::msg::{CacheAdvice, Payload};
use lanefs_core::ost::OstRecord;
use lanefs_core::store::{ObjectStore, StoreError, OBJECT_BYTES_MAX};
use lanefs_core::{Errno, ObjectId};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use lanefs_net::limits::OPEN_FILES_MAX;

/// The most objects one precreate may make: a request further beyond
/// `LAST_ID` means the MDS and the OST disagree about the OST's objects
/// (an OST directory replaced or restored), which an operator must look at.
pub const PRECREATE_OBJECTS_MAX: u64 = 1 << 16;

/// The file in an OST's directory that records its last precreated id.
pub const LAST_ID_FILE: &str = "LAST_ID";

/// How an OSS treats an OST whose directory is in memory (tmpfs, ramfs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryStores {
    /// Durable on write: nothing to commit, nothing kept for replay.
    #[default]
    DurableOnWrite,
    /// As a store on a disk: writes are numbered, committed and kept by
    /// their clients until committed.
    AsDisk,
}

pub struct FileStore {
    dir: PathBuf,
    /// The directory is in memory and treated as such (see the module docs).
    durable_on_write: bool,
    /// Shared with the commit thread's syncs in progress ([`SyncTarget`]).
    open: BTreeMap<ObjectId, Arc<File>>,
    /// Every object up to this id was created (ids start at 1; 0: none).
    last_id: ObjectId,
    open_files_max: usize,
    /// Failures injected on purpose (none unless set).
    faults: StoreFaults,
}

impl FileStore {
    /// Use (creating if needed) `dir` for this OST's objects, keeping up to
    /// [`OPEN_FILES_MAX`] files open. Fails if its `LAST_ID` is there but
    /// unreadable.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        Self::with_open_files_max(dir, OPEN_FILES_MAX)
    }

    /// As [`FileStore::open`], keeping up to `open_files_max` files open
    /// (at least one).
    pub fn with_open_files_max(dir: &Path, open_files_max: usize) -> std::io::Result<Self> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir.join("objects"))?;
        let last_id = read_last_id(dir)?;
        let open_files_max = open_files_max.max(1);
        let faults = StoreFaults::default();
        let durable_on_write = in_memory(dir)?;
        Ok(FileStore {
            dir: dir.to_path_buf(),
            durable_on_write,
            open: BTreeMap::new(),
            last_id,
            open_files_max,
            faults,
        })
    }

    /// Treat a directory in memory as `policy` says (see [`MemoryStores`]).
    pub fn with_memory_stores(self, policy: MemoryStores) -> Self {
        let durable_on_write = self.durable_on_write && policy == MemoryStores::DurableOnWrite;
        FileStore { durable_on_write, ..self }
    }

    /// Fail the calls `faults` names, whenever they name them.
    pub fn with_faults(self, faults: StoreFaults) -> Self {
        FileStore { faults, ..self }
    }

    /// The last object id created: every id from 1 up to it was.
    /// The OST's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn last_id(&self) -> ObjectId {
        self.last_id
    }

    fn path(&self, object: ObjectId) -> PathBuf {
        self.dir.join("objects").join(object.0.to_string())
    }

    /// The open file of `object`, which must have been created and not be
    /// gone since.
    fn file(&mut self, object: ObjectId) -> Result<&File, StoreError> {
        if object.0 == 0 || object > self.last_id {
            tracing::warn!(dir = %self.dir.display(), object = object.0, last_id = self.last_id.0, "object never allocated");
            return Err(StoreError::NoSuchObject { object });
        }
        // A file removed behind the store's back stays readable through an
        // open descriptor: it has no link left, so it is gone.
        let unlinked = self.open.get(&object).is_some_and(|file| file.metadata().is_ok_and(|meta| meta.nlink() == 0));
        if unlinked {
            self.open.remove(&object);
        }
        if !self.open.contains_key(&object) {
            let path = self.path(object);
            let file = match self.open_file(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tracing::warn!(path = %path.display(), "object missing: its file is gone");
                    return Err(StoreError::NoSuchObject { object });
                }
                Err(e) => return Err(os_error(e, &format!("opening {}", path.display()))),
            };
            if self.open.len() >= self.open_files_max {
                self.open.pop_first();
            }
            self.open.insert(object, Arc::new(file));
        }
        Ok(self.open.get(&object).expect("just opened"))
    }

    /// Open an object's file; out of descriptors, close the cached ones
    /// and try once more.
    fn open_file(&mut self, path: &Path) -> std::io::Result<File> {
        let open = || OpenOptions::new().read(true).write(true).open(path);
        match open() {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) && !self.open.is_empty() => {
                tracing::warn!(
                    "out of file descriptors opening {} ({e}): closing the {} cached object files and retrying; \
                     raise the OSS's descriptor limit (ulimit -Hn) if this recurs",
                    path.display(),
                    self.open.len()
                );
                self.open.clear();
                open()
            }
            result => result,
        }
    }

    /// Object files held open now.
    pub fn open_files(&self) -> usize {
        self.open.len()
    }

    /// Creates every object from `LAST_ID + 1` up to `last_id`, empty, and
    /// then records `last_id` as `LAST_ID`; returns `LAST_ID` (unchanged if
    /// it was already at or beyond `last_id`).
    pub fn precreate(&mut self, last_id: ObjectId) -> Result<ObjectId, StoreError> {
        if last_id <= self.last_id {
            return Ok(self.last_id);
        }
        let count = last_id.0 - self.last_id.0;
        if count > PRECREATE_OBJECTS_MAX {
            return Err(StoreError::Os {
                errno: Errno::EINVAL,
                detail: format!(
                    "asked to create objects {} to {} ({count}), more than the {PRECREATE_OBJECTS_MAX} one request \
                     may: {} holds LAST_ID {}; if this OST directory was replaced or restored, the MDS's record of \
                     it is ahead of it",
                    self.last_id.0 + 1,
                    last_id.0,
                    self.dir.display(),
                    self.last_id.0
                ),
            });
        }
        for id in self.last_id.0 + 1..=last_id.0 {
            // No truncation: a file an interrupted precreate left is empty.
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(self.path(ObjectId(id)))
                .map_err(io)?;
        }
        sync_dir(&self.dir.join("objects")).map_err(io)?;
        write_last_id(&self.dir, last_id).map_err(io)?;
        self.last_id = last_id;
        Ok(last_id)
    }

    /// What the OST recorded in its last life (`last_rcvd.json` beside its
    /// objects, with the commit point of [`crate::commit_point`]): a new
    /// OST's default if there is none.
    pub fn load_record(&self) -> std::io::Result<OstRecord> {
        let path = self.dir.join("last_rcvd.json");
        let mut record: OstRecord = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::other(format!(
                    "{}: unreadable OST record ({e}); it holds the last commit and the clients to recover",
                    path.display()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => OstRecord::default(),
            Err(e) => return Err(e),
        };
        if let Some(point) = crate::commit_point::read(&self.dir)? {
            record.last_committed = record.last_committed.max(point);
        }
        Ok(record)
    }

    /// Record `record` durably (replaced atomically).
    pub fn save_record(&self, record: &OstRecord) -> std::io::Result<()> {
        write_record(&self.dir, record)
    }

    /// Capacity of the file system holding the objects.
    pub fn space(&self) -> Option<lanefs_proto::wire::OstSpace> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(self.dir.as_os_str().as_bytes()).ok()?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is a NUL-terminated string and `st` a valid
        // out-parameter; statvfs writes only into it.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let unit = st.f_frsize as u64;
        Some(lanefs_proto::wire::OstSpace {
            fsid: st.f_fsid as u64,
            total_bytes: st.f_blocks as u64 * unit,
            free_bytes: st.f_bfree as u64 * unit,
            total_inodes: st.f_files as u64,
            free_inodes: st.f_ffree as u64,
        })
    }

    /// What makes this store's objects durable from another thread (the
    /// OST's commit thread).
    pub fn syncer(&self) -> Syncer {
        Syncer { dir: self.dir.clone(), faults: self.faults.clone() }
    }

    /// What the commit thread needs to sync `object`: its open file, shared
    /// (no new descriptor, so a sync works out of descriptors too) if the
    /// store has it open, else its id, for the commit thread to open.
    pub fn sync_target(&self, object: ObjectId) -> SyncTarget {
        match self.open.get(&object) {
            Some(file) => SyncTarget::Open(object, file.clone()),
            None => SyncTarget::Closed(object),
        }
    }

    /// Make what was written to `object` durable (`fdatasync`); an object
    /// never written has nothing to sync.
    pub fn sync(&mut self, object: ObjectId) -> Result<(), StoreError> {
        let fault = self.faults.sync();
        let file = self.file(object)?;
        if let Some(errno) = fault {
            return Err(injected(errno, "fdatasync"));
        }
        file.sync_data().map_err(io)
    }

    /// Remove an object's file (the MDS's destroy, after an unlink). An
    /// object already gone, or never created, is no error: a destroy may
    /// come again after a lost acknowledgement.
    pub fn destroy(&mut self, object: ObjectId) -> Result<(), StoreError> {
        self.open.remove(&object);
        if object.0 == 0 || object > self.last_id {
            return Ok(());
        }
        match std::fs::remove_file(self.path(object)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(os_error(e, &format!("destroying object {}", object.0))),
        }
    }
}

/// Makes objects durable (`fdatasync`) away from the OST's thread, so that
/// the OST serves on while a commit waits for the disk, as Lustre's OST
/// service threads do while the journal commits. Each sync opens the
/// object's file afresh: `fdatasync` flushes the file, whichever
/// descriptor asks, and the OST's cache of open files stays the OST
/// thread's alone.
#[derive(Clone, Debug)]
pub struct Syncer {
    dir: PathBuf,
    faults: StoreFaults,
}

/// An object to sync: open in the store (its file shared), or not.
#[derive(Debug)]
pub enum SyncTarget {
    Open(ObjectId, Arc<File>),
    Closed(ObjectId),
}

impl SyncTarget {
    pub fn object(&self) -> ObjectId {
        match self {
            SyncTarget::Open(object, _) | SyncTarget::Closed(object) => *object,
        }
    }
}

impl Syncer {
    /// `fdatasync` of an object's file. An object whose file is gone
    /// (destroyed since it was written) is `NoSuchObject`. One the store
    /// did not have open is opened here; out of descriptors, that waits for
    /// one ([`SYNC_OPEN_RETRY`], at most [`SYNC_OPEN_TRIES`] times) rather
    /// than fail a commit for want of one.
    pub fn sync(&self, target: SyncTarget) -> Result<(), StoreError> {
        let fault = self.faults.sync();
        let object = match target {
            SyncTarget::Open(_, file) => {
                if let Some(errno) = fault {
                    return Err(injected(errno, "fdatasync"));
                }
                return file.sync_data().map_err(io);
            }
            SyncTarget::Closed(object) => object,
        };
        let path = self.dir.join("objects").join(object.0.to_string());
        let mut tries = 0;
        let file = loop {
            match File::open(&path) {
                Ok(file) => break file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(StoreError::NoSuchObject { object }),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) && tries < SYNC_OPEN_TRIES => {
                    tries += 1;
                    std::thread::sleep(SYNC_OPEN_RETRY);
                }
                Err(e) => return Err(os_error(e, &format!("opening {} to sync it", path.display()))),
            }
        };
        if let Some(errno) = fault {
            return Err(injected(errno, "fdatasync"));
        }
        file.sync_data().map_err(io)
    }
}

impl Syncer {
    /// The least a commit takes ([`StoreFaults::slow_commits`]; zero unless set).
    pub fn commit_floor(&self) -> std::time::Duration {
        self.faults.commit_floor()
    }

    /// Record `record` durably, as [`FileStore::save_record`] does.
    pub fn save_record(&self, record: &OstRecord) -> std::io::Result<()> {
        write_record(&self.dir, record)
    }

    /// The store's commit point file, for writing.
    pub fn commit_point(&self) -> std::io::Result<crate::commit_point::CommitPoint> {
        crate::commit_point::CommitPoint::open(&self.dir)
    }
}

fn write_record(dir: &Path, record: &OstRecord) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    lanefs_net::runtime_files::replace_private_file(&dir.join("last_rcvd.json"), &bytes, true)
}

/// How long a sync out of descriptors waits before it tries again.
pub const SYNC_OPEN_RETRY: std::time::Duration = std::time::Duration::from_millis(10);
/// How often it tries (one second in all) before the commit fails with `EMFILE`.
pub const SYNC_OPEN_TRIES: u32 = 100;

fn read_last_id(dir: &Path) -> std::io::Result<ObjectId> {
    let path = dir.join(LAST_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse().map(ObjectId).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{} holds {text:?}, not an object id: the OST's record of its objects is damaged; \
                     write the highest id in {}/objects into it",
                    path.display(),
                    dir.display()
                ),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ObjectId(0)),
        Err(e) => Err(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

/// Replaces `dir/LAST_ID` whole: a temporary file, durable, renamed over it.
fn write_last_id(dir: &Path, last_id: ObjectId) -> std::io::Result<()> {
    let temporary = dir.join(format!("{LAST_ID_FILE}.tmp"));
    let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
    writeln!(file, "{}", last_id.0)?;
    file.sync_all()?;
    std::fs::rename(&temporary, dir.join(LAST_ID_FILE))?;
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn bounds(object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
    match offset.checked_add(len) {
        Some(end) if end <= OBJECT_BYTES_MAX => Ok(()),
        _ => Err(StoreError::TooLarge { object, offset, len }),
    }
}

/// A failed call as a store error, keeping its error number (`ENOSPC`,
/// `EIO`, `EMFILE` reach the client by name).
/// A failure [`StoreFaults`] asked for, as the system call would report it.
fn injected(errno: Errno, call: &str) -> StoreError {
    let e = std::io::Error::from_raw_os_error(errno.0);
    StoreError::Os { errno, detail: format!("{call}: {e} (injected)") }
}

fn io(e: std::io::Error) -> StoreError {
    os_error(e, "")
}

fn os_error(e: std::io::Error, what: &str) -> StoreError {
    let errno = Errno(e.raw_os_error().unwrap_or(libc::EIO));
    let detail = if what.is_empty() { e.to_string() } else { format!("{what}: {e}") };
    StoreError::Os { errno, detail }
}

/// Writes `pieces` (pointer, length), one after the other, at `offset` of
/// `file`, in vectored writes of at most `IOV_MAX` pieces; contiguous
/// pieces are merged first.
fn pwritev_all(file: &File, pieces: impl Iterator<Item = (*const u8, usize)>, offset: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    const IOV_MAX: usize = 1024;
    let mut iov: Vec<libc::iovec> = Vec::new();
    for (p, n) in pieces.filter(|&(_, n)| n > 0) {
        match iov.last_mut() {
            Some(last) if (last.iov_base as usize) + last.iov_len == p as usize => last.iov_len += n,
            _ => iov.push(libc::iovec { iov_base: p as *mut libc::c_void, iov_len: n }),
        }
    }
    let (mut at, mut first) = (offset, 0);
    while first < iov.len() {
        let count = (iov.len() - first).min(IOV_MAX);
        // SAFETY: every iovec points at memory the caller keeps readable
        // for this call; the kernel only reads it.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov[first..].as_ptr(), count as i32, at as libc::off_t) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let (mut n, mut moved) = (n as usize, false);
        at += n as u64;
        while n > 0 {
            let v = &mut iov[first];
            if n >= v.iov_len {
                (n, first, moved) = (n - v.iov_len, first + 1, true);
            } else {
                // SAFETY: advancing within the same piece.
                v.iov_base = unsafe { (v.iov_base as *mut u8).add(n) } as *mut libc::c_void;
                v.iov_len -= n;
                (n, moved) = (0, true);
            }
        }
        if !moved {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

/// Whether `dir` is on a file system in memory only (tmpfs, ramfs).
fn in_memory(dir: &Path) -> std::io::Result<bool> {
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the OST's path"))?;
    let mut fs = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: a valid C string, and a buffer statfs fills on success.
    if unsafe { libc::statfs(path.as_ptr(), fs.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statfs succeeded, so it filled the buffer.
    let kind = unsafe { fs.assume_init() }.f_type;
    // RAMFS_MAGIC (linux/magic.h), which the libc crate does not name.
    const RAMFS_MAGIC: libc::c_long = 0x8584_58f6;
    Ok(kind == libc::TMPFS_MAGIC || kind == RAMFS_MAGIC)
}

/// `fallocate(2)` of `len` bytes at `offset` of `file`; `doing` names it
/// in the error.
fn fallocate(file: &std::fs::File, mode: libc::c_int, offset: u64, len: u64, doing: &str) -> Result<(), StoreError> {
    use std::os::fd::AsRawFd;
    // Both fit: `bounds` keeps the range below OBJECT_BYTES_MAX (2^60).
    let (offset, len) = (offset as libc::off_t, len as libc::off_t);
    loop {
        // SAFETY: `file` is open for the call; fallocate reads no memory of ours.
        let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) };
        if rc == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(os_error(error, &format!("fallocate ({doing})")));
        }
    }
}

impl ObjectStore for FileStore {
    fn durable_on_write(&self) -> bool {
        self.durable_on_write
    }

    fn write_payload(&mut self, object: ObjectId, offset: u64, data: &Payload) -> Result<(), StoreError> {
        if let Some(errno) = self.faults.write() {
            return Err(injected(errno, "pwrite"));
        }
        match data {
            Payload::Pages(span) => {
                bounds(object, offset, span.len())?;
                let file = self.file(object)?;
                pwritev_all(file, span.slices().map(|s| (s.as_ptr(), s.len())), offset).map_err(io)
            }
            Payload::Remote(span) => {
                bounds(object, offset, span.len())?;
                let file = self.file(object)?;
                pwritev_all(file, span.pieces(), offset).map_err(io)
            }
            Payload::Bytes(bytes) => self.write(object, offset, bytes),
            Payload::Phantom(_) => {
                let offered = lanefs_core::msg::PayloadKind::Phantom;
                let kept = lanefs_core::msg::PayloadKind::Bytes;
                Err(StoreError::PayloadKind { object, kept, offered })
            }
        }
    }

    fn write(&mut self, object: ObjectId, offset: u64, data: &[u8]) -> Result<(), StoreError> {
        bounds(object, offset, data.len() as u64)?;
        if let Some(errno) = self.faults.write() {
            return Err(injected(errno, "pwrite"));
        }
        self.file(object)?.write_all_at(data, offset).map_err(io)
    }

    fn read(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        bounds(object, offset, len)?;
        let file = self.file(object)?;
        let mut buf = vec![0u8; len as usize];
        let mut done = 0usize;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break, // past the end: zeros
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io(e)),
            }
        }
        Ok(buf)
    }

    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError> {
        bounds(object, size, 0)?;
        self.file(object)?.set_len(size).map_err(io)
    }

    /// `fallocate(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)`: the file
    /// system frees the range's blocks (one that cannot says
    /// `EOPNOTSUPP`, which reaches the program).
    fn punch_hole(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        bounds(object, offset, len)?;
        if let Some(errno) = self.faults.write() {
            return Err(injected(errno, "fallocate"));
        }
        let file = self.file(object)?;
        fallocate(file, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, offset, len, "punching a hole")
    }

    /// `fallocate` mode 0 or `FALLOC_FL_KEEP_SIZE`: the file system
    /// allocates the blocks now (`ENOSPC` if it cannot).
    fn reserve(&mut self, object: ObjectId, offset: u64, len: u64, keep_size: bool) -> Result<(), StoreError> {
        bounds(object, offset, len)?;
        if let Some(errno) = self.faults.write() {
            return Err(injected(errno, "fallocate"));
        }
        let file = self.file(object)?;
        let mode = if keep_size { libc::FALLOC_FL_KEEP_SIZE } else { 0 };
        fallocate(file, mode, offset, len, "reserving space")
    }

    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        self.file(object)?.metadata().map(|m| m.len()).map_err(io)
    }

    /// The object file's blocks (`st_blocks`, in 512-byte units).
    fn allocated(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        self.size_and_allocated(object).map(|(_, allocated)| allocated)
    }

    /// One `fstat` for a getattr's size and blocks.
    fn size_and_allocated(&mut self, object: ObjectId) -> Result<(u64, u64), StoreError> {
        use std::os::unix::fs::MetadataExt;
        self.file(object)?.metadata().map(|m| (m.len(), m.blocks() * 512)).map_err(io)
    }

    /// `posix_fadvise` of the range. `WILLNEED` returns once the reads are
    /// started (Lustre's OST answers once its prefetch has read the pages
    /// in); a range past the file's end costs nothing.
    fn advise(&mut self, object: ObjectId, advice: CacheAdvice, offset: u64, len: u64) -> Result<(), StoreError> {
        use std::os::fd::AsRawFd;
        bounds(object, offset, len)?;
        debug_assert!(len > 0, "a length of 0 is to the end of the file for posix_fadvise");
        let fd = self.file(object)?.as_raw_fd();
        let how = match advice {
            CacheAdvice::WillRead => libc::POSIX_FADV_WILLNEED,
            CacheAdvice::DontNeed => libc::POSIX_FADV_DONTNEED,
        };
        // Both fit: the range ends within OBJECT_BYTES_MAX (2^60).
        let (offset, len) = (offset as libc::off_t, len as libc::off_t);
        // SAFETY: `fd` is the store's open descriptor of the object, alive
        // for the call; posix_fadvise reads no memory of ours.
        let rc = unsafe { libc::posix_fadvise(fd, offset, len, how) };
        if rc != 0 {
            return Err(os_error(std::io::Error::from_raw_os_error(rc), &format!("posix_fadvise({})", advice.name())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_written_with_one_pwritev() {
        use lanefs_core::pages::{PagePool, PageSpan};
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path()).unwrap();
        s.precreate(ObjectId(3)).unwrap();
        let o = ObjectId(3);
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 241) as u8).collect();
        // Heap frames are not contiguous: many pieces, each written in turn.
        let span = PageSpan::copy_from(&PagePool::heap(), 700, &bytes);
        s.write_payload(o, 700, &Payload::Pages(Box::new(span))).unwrap();
        assert_eq!(s.read(o, 700, bytes.len() as u64).unwrap(), bytes);
        assert_eq!(s.size(o).unwrap(), 700 + bytes.len() as u64);
        assert!(matches!(s.write_payload(o, 0, &Payload::Phantom(5)), Err(StoreError::PayloadKind { .. })));
    }

    #[test]
    fn holes_free_blocks_reservations_take_them_and_a_failing_disk_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path()).unwrap();
        s.precreate(ObjectId(1)).unwrap();
        let o = ObjectId(1);
        let mib = 1u64 << 20;
        s.write(o, 0, &vec![9u8; 3 * mib as usize]).unwrap();
        assert!(s.allocated(o).unwrap() >= 3 * mib);
        s.punch_hole(o, mib, mib).unwrap();
        assert_eq!(s.size(o).unwrap(), 3 * mib, "a hole keeps the size");
        assert!(s.allocated(o).unwrap() < 3 * mib, "and frees the blocks");
        assert_eq!(s.read(o, mib, 4).unwrap(), [0; 4]);
        assert_eq!(s.read(o, 2 * mib, 1).unwrap(), [9]);
        s.reserve(o, 3 * mib, mib, true).unwrap();
        assert_eq!(s.size(o).unwrap(), 3 * mib, "KEEP_SIZE");
        s.reserve(o, 3 * mib, mib, false).unwrap();
        assert_eq!(s.size(o).unwrap(), 4 * mib);
        assert_eq!(s.read(o, 2 * mib, 1).unwrap(), [9], "reserving keeps the bytes there");
        let faults = StoreFaults::default();
        faults.fail_writes(Some(Errno::ENOSPC));
        let mut s = s.with_faults(faults);
        for failed in [s.reserve(o, 0, mib, false), s.punch_hole(o, 0, mib)] {
            assert!(matches!(failed, Err(StoreError::Os { errno: Errno::ENOSPC, .. })), "{failed:?}");
        }
    }

    #[test]
    fn the_cache_of_open_files_keeps_to_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::with_open_files_max(dir.path(), 3).unwrap();
        s.precreate(ObjectId(10)).unwrap();
        for i in 1..=10 {
            s.write(ObjectId(i), 0, &[i as u8]).unwrap();
            assert!(s.open_files() <= 3);
        }
        for i in 1..=10 {
            assert_eq!(s.read(ObjectId(i), 0, 1).unwrap(), [i as u8]);
        }
    }

    #[test]
    fn sparse_objects_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path()).unwrap();
        let o = ObjectId(5);
        s.precreate(o).unwrap();
        assert_eq!(s.read(o, 0, 4).unwrap(), vec![0; 4]);
        s.write(o, 1 << 20, b"hello").unwrap();
        assert_eq!(s.size(o).unwrap(), (1 << 20) + 5);
        assert_eq!(s.read(o, (1 << 20) - 1, 7).unwrap(), b"\0hello\0");
        s.punch(o, 2).unwrap();
        assert_eq!(s.size(o).unwrap(), 2);
        // Survives reopening.
        s.write(o, 0, b"ab").unwrap();
        drop(s);
        let mut s = FileStore::open(dir.path()).unwrap();
        assert_eq!(s.read(o, 0, 2).unwrap(), b"ab");
        s.destroy(o).unwrap();
        assert!(matches!(s.size(o), Err(StoreError::NoSuchObject { object }) if object == o));
        s.destroy(o).unwrap();
    }

    fn no_such_object<T: std::fmt::Debug>(result: Result<T, StoreError>) -> ObjectId {
        match result {
            Err(StoreError::NoSuchObject { object }) => object,
            other => panic!("expected NoSuchObject, got {other:?}"),
        }
    }

    #[test]
    fn objects_exist_only_once_precreated_and_last_id_survives() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path()).unwrap();
        assert_eq!(s.last_id(), ObjectId(0));
        assert_eq!(no_such_object(s.write(ObjectId(1), 0, b"x")), ObjectId(1), "no object made by a write");
        assert!(!dir.path().join("objects/1").exists());
        assert_eq!(s.precreate(ObjectId(4)).unwrap(), ObjectId(4));
        assert_eq!(std::fs::read_to_string(dir.path().join(LAST_ID_FILE)).unwrap(), "4\n");
        assert!(!dir.path().join("LAST_ID.tmp").exists());
        for id in 1..=4 {
            assert_eq!(s.size(ObjectId(id)).unwrap(), 0, "object {id} exists, empty");
        }
        assert_eq!(s.precreate(ObjectId(2)).unwrap(), ObjectId(4), "never lowered");
        // Above LAST_ID: refused, and not created.
        assert_eq!(no_such_object(s.read(ObjectId(5), 0, 1)), ObjectId(5));
        assert_eq!(no_such_object(s.punch(ObjectId(5), 10)), ObjectId(5));
        assert!(!dir.path().join("objects/5").exists());
        drop(s);
        let mut s = FileStore::open(dir.path()).unwrap();
        assert_eq!(s.last_id(), ObjectId(4));
        s.write(ObjectId(4), 0, b"kept").unwrap();
        assert!(s.precreate(ObjectId(4 + PRECREATE_OBJECTS_MAX + 1)).unwrap_err().to_string().contains("LAST_ID 4"));
        std::fs::write(dir.path().join(LAST_ID_FILE), "four").unwrap();
        let damaged = FileStore::open(dir.path()).err().expect("a damaged LAST_ID is refused");
        assert!(damaged.to_string().contains("not an object id"), "{damaged}");
    }

    /// An object whose file vanished behind the store's back is an error on
    /// every access, never zeros.
    #[test]
    fn a_vanished_object_is_missing_not_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path()).unwrap();
        s.precreate(ObjectId(2)).unwrap();
        s.write(ObjectId(2), 0, b"data").unwrap();
        // Removed while the store holds it open, then with nothing open.
        std::fs::remove_file(dir.path().join("objects/2")).unwrap();
        assert_eq!(no_such_object(s.read(ObjectId(2), 0, 4)), ObjectId(2));
        let mut s = FileStore::open(dir.path()).unwrap();
        assert_eq!(no_such_object(s.read(ObjectId(2), 0, 4)), ObjectId(2));
        assert_eq!(no_such_object(s.size(ObjectId(2))), ObjectId(2));
        assert_eq!(no_such_object(s.write(ObjectId(2), 0, b"new")), ObjectId(2));
        assert_eq!(no_such_object(s.punch(ObjectId(2), 0)), ObjectId(2));
        assert!(!dir.path().join("objects/2").exists(), "nothing brought it back");
        assert_eq!(s.read(ObjectId(1), 0, 2).unwrap(), [0, 0], "its neighbour is there");
    }
}
