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
//! default methods, as the wire never carries them anyway.

use lanefs_core::msg::Payload;
use lanefs_core::store::{ObjectStore, StoreError, OBJECT_BYTES_MAX};
use lanefs_core::{Errno, ObjectId};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Open object files kept per OST at most, however many descriptors the
/// OSS has.
pub const OPEN_FILES_MAX: usize = 256;

pub struct FileStore {
    dir: PathBuf,
    open: BTreeMap<ObjectId, File>,
    open_files_max: usize,
}

impl FileStore {
    /// Use (creating if needed) `dir` for this OST's objects, keeping up to
    /// [`OPEN_FILES_MAX`] files open.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        Self::with_open_files_max(dir, OPEN_FILES_MAX)
    }

    /// As [`FileStore::open`], keeping up to `open_files_max` files open
    /// (at least one).
    pub fn with_open_files_max(dir: &Path, open_files_max: usize) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir.join("objects"))?;
        Ok(FileStore { dir: dir.to_path_buf(), open: BTreeMap::new(), open_files_max: open_files_max.max(1) })
    }

    fn path(&self, object: ObjectId) -> PathBuf {
        self.dir.join("objects").join(object.0.to_string())
    }

    fn file(&mut self, object: ObjectId, create: bool) -> Result<Option<&File>, StoreError> {
        if !self.open.contains_key(&object) {
            let path = self.path(object);
            let file = match self.open_file(&path, create) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
                Err(e) => {
                    let errno = Errno(e.raw_os_error().unwrap_or(libc::EIO));
                    return Err(StoreError::Os { errno, detail: format!("opening {}", path.display()) });
                }
            };
            if self.open.len() >= self.open_files_max {
                self.open.pop_first();
            }
            self.open.insert(object, file);
        }
        Ok(self.open.get(&object))
    }

    /// Open an object's file; out of descriptors, close the cached ones
    /// and try once more.
    fn open_file(&mut self, path: &Path, create: bool) -> std::io::Result<File> {
        let open = || OpenOptions::new().read(true).write(true).create(create).open(path);
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

    /// Capacity of the file system holding the objects.
    pub fn space(&self) -> Option<crate::proto::OstSpace> {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(self.dir.as_os_str().as_bytes()).ok()?;
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `path` is a NUL-terminated string and `st` a valid
        // out-parameter; statvfs writes only into it.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return None;
        }
        let unit = st.f_frsize as u64;
        Some(crate::proto::OstSpace {
            fsid: st.f_fsid as u64,
            total_bytes: st.f_blocks as u64 * unit,
            free_bytes: st.f_bfree as u64 * unit,
            total_inodes: st.f_files as u64,
            free_inodes: st.f_ffree as u64,
        })
    }

    /// Make what was written to `object` durable (`fdatasync`); an object
    /// never written has nothing to sync.
    pub fn sync(&mut self, object: ObjectId) -> Result<(), StoreError> {
        match self.file(object, false)? {
            Some(file) => file.sync_data().map_err(|e| os_error(e, "syncing (fdatasync)", object)),
            None => Ok(()),
        }
    }

    /// Remove an object's file (after an unlink).
    pub fn destroy(&mut self, object: ObjectId) -> Result<(), StoreError> {
        self.open.remove(&object);
        match std::fs::remove_file(self.path(object)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(os_error(e, "destroying", object)),
        }
    }
}

fn bounds(object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
    match offset.checked_add(len) {
        Some(end) if end <= OBJECT_BYTES_MAX => Ok(()),
        _ => Err(StoreError::TooLarge { object, offset, len }),
    }
}

/// The store error for a failed call: its error number, and what was done
/// to which object.
fn os_error(e: std::io::Error, what: &str, object: ObjectId) -> StoreError {
    let errno = Errno(e.raw_os_error().unwrap_or(libc::EIO));
    StoreError::Os { errno, detail: format!("{what} object {}", object.0) }
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

impl ObjectStore for FileStore {
    fn write_payload(&mut self, object: ObjectId, offset: u64, data: &Payload) -> Result<(), StoreError> {
        match data {
            Payload::Pages(span) => {
                bounds(object, offset, span.len())?;
                let file = self.file(object, true)?.expect("created");
                pwritev_all(file, span.slices().map(|s| (s.as_ptr(), s.len())), offset)
                    .map_err(|e| os_error(e, "writing", object))
            }
            Payload::Remote(span) => {
                bounds(object, offset, span.len())?;
                let file = self.file(object, true)?.expect("created");
                pwritev_all(file, span.pieces(), offset).map_err(|e| os_error(e, "writing", object))
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
        let file = self.file(object, true)?.expect("created");
        file.write_all_at(data, offset).map_err(|e| os_error(e, "writing", object))
    }

    fn read(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        bounds(object, offset, len)?;
        let mut buf = vec![0u8; len as usize];
        let Some(file) = self.file(object, false)? else { return Ok(buf) };
        let mut done = 0usize;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break, // past the end: zeros
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(os_error(e, "reading", object)),
            }
        }
        Ok(buf)
    }

    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError> {
        bounds(object, size, 0)?;
        let file = self.file(object, true)?.expect("created");
        file.set_len(size).map_err(|e| os_error(e, "truncating", object))
    }

    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        match self.file(object, false)? {
            Some(f) => f.metadata().map(|m| m.len()).map_err(|e| os_error(e, "reading the size of", object)),
            None => Ok(0),
        }
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
    fn the_cache_of_open_files_keeps_to_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::with_open_files_max(dir.path(), 3).unwrap();
        for i in 0..10 {
            s.write(ObjectId(i), 0, &[i as u8]).unwrap();
            assert!(s.open_files() <= 3);
        }
        for i in 0..10 {
            assert_eq!(s.read(ObjectId(i), 0, 1).unwrap(), [i as u8]);
        }
    }

    #[test]
    fn sparse_objects_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path()).unwrap();
        let o = ObjectId(5);
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
        assert_eq!(s.size(o).unwrap(), 0);
    }
}
