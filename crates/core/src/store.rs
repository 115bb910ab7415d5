//! Where an OST keeps object bytes: the [`ObjectStore`] trait, an in-memory
//! implementation ([`MemStore`]) and a size-only one for the simulator
//! ([`SizeStore`]).
//!
//! The OST service talks to its objects only through this trait, so the same
//! protocol code serves objects from memory (tests), from sparse files on
//! disk (the network daemons) and from nothing but a table of sizes (the
//! simulator, which writes phantom payloads). Holes and bytes beyond an
//! object's end read as zeros, as in a sparse file.
//!
//! One store keeps one kind of payload ([`ObjectStore::payload_kind`]): its
//! reads answer with that kind, and writes of the other kind fail with
//! [`StoreError::PayloadKind`] (never a panic). Byte stores refuse phantom
//! writes, since they could not read them back; [`SizeStore`] refuses bytes,
//! since it would drop them.

use crate::errno::Errno;
use crate::msg::{CacheAdvice, Cut, Payload, PayloadKind};
use crate::units::ObjectId;
use std::collections::BTreeMap;

/// Object offsets must stay below this (Lustre's maximum object size is
/// smaller still; this bound keeps `offset + len` from overflowing).
pub const OBJECT_BYTES_MAX: u64 = 1 << 60;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("object {object:?}: offset {offset} + length {len} exceeds the maximum object size {OBJECT_BYTES_MAX}")]
    TooLarge { object: ObjectId, offset: u64, len: u64 },
    /// The file system under the store failed; `errno` says how (`ENOSPC`,
    /// `EIO`, `EMFILE`...), `detail` where (a path, the call).
    #[error("object store: {detail}: {errno}")]
    Os { errno: Errno, detail: String },
    #[error(
        "object {object:?}: a store of {kept} refuses {offered} payloads (phantoms need a SizeStore, bytes a byte one)"
    )]
    PayloadKind { object: ObjectId, kept: PayloadKind, offered: PayloadKind },
    /// The object was never created on this OST, or is gone from it
    /// (destroyed, or its file removed behind the store's back): its bytes
    /// cannot be read as zeros, since they are not known to be zeros.
    #[error("object {object:?} does not exist on this OST (never created, destroyed, or its file is gone)")]
    NoSuchObject { object: ObjectId },
}

impl StoreError {
    /// How the failure reads on the wire.
    pub fn io_error(&self) -> crate::msg::IoError {
        use crate::msg::IoError;
        match self {
            StoreError::TooLarge { .. } => IoError::TooLarge,
            StoreError::Os { errno, .. } => IoError::from_errno(*errno),
            StoreError::PayloadKind { .. } => IoError::PayloadKind,
            StoreError::NoSuchObject { .. } => IoError::NoSuchObject,
        }
    }
}

/// Storage for the objects of one OST.
pub trait ObjectStore {
    fn write(&mut self, object: ObjectId, offset: u64, data: &[u8]) -> Result<(), StoreError>;
    /// Exactly `len` bytes; holes and bytes past the end read as zeros.
    fn read(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, StoreError>;
    /// Set the object's size to `size`, dropping or zero-extending.
    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError>;
    /// `[offset, offset + len)` reads as zeros and holds no space (as far
    /// as the store can free it); the size stays.
    fn punch_hole(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError>;
    /// Space for `[offset, offset + len)`, so that writes there will not
    /// find the disk full (`ENOSPC` now if it is); the bytes already there
    /// stay; the object grows to end there at least unless `keep_size`.
    fn reserve(&mut self, object: ObjectId, offset: u64, len: u64, keep_size: bool) -> Result<(), StoreError>;
    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError>;
    /// Bytes of space the object holds (holes hold none, reserved space
    /// does), what `st_blocks` counts; 0 for an object never written.
    fn allocated(&mut self, object: ObjectId) -> Result<u64, StoreError>;

    /// [`ObjectStore::size`] and [`ObjectStore::allocated`] at once (a
    /// getattr's answer): a store that reads both in one call overrides it.
    fn size_and_allocated(&mut self, object: ObjectId) -> Result<(u64, u64), StoreError> {
        Ok((self.size(object)?, self.allocated(object)?))
    }

    /// A change that sends no bytes (see [`Cut`]).
    fn cut(&mut self, object: ObjectId, cut: Cut) -> Result<(), StoreError> {
        match cut {
            Cut::Size(size) => self.punch(object, size),
            Cut::Hole { offset, len } => self.punch_hole(object, offset, len),
            Cut::Reserve { offset, len, keep_size } => self.reserve(object, offset, len, keep_size),
        }
    }

    /// Cache advice on `len` (> 0) bytes of `object` at `offset` (Lustre's
    /// `OST_LADVISE`, `dt_ladvise`): read them into the cache the store
    /// reads through, or drop them from it. A hint: it changes no byte and
    /// no size, and the range may pass the object's end. The default does
    /// nothing, for the stores that keep no cache in front of their bytes:
    /// objects in memory are their own cache, and the simulator models no
    /// OSS page cache (its reads cost disk time however often they come).
    fn advise(&mut self, object: ObjectId, advice: CacheAdvice, offset: u64, len: u64) -> Result<(), StoreError> {
        let _ = (object, advice, offset, len);
        Ok(())
    }

    /// The payloads this store keeps, and answers reads with.
    fn payload_kind(&self) -> PayloadKind {
        PayloadKind::Bytes
    }

    /// Whether a write is as durable as this store can ever make it once
    /// the write returns: a store in memory only (tmpfs, ramfs), where
    /// `fdatasync` does nothing and whatever loses its page cache (a
    /// machine crash) loses the whole store. An OST over such a store
    /// gives its changes no transaction number: there is nothing for a
    /// commit to do, and its clients keep no copies of their writes for
    /// replay (an OSS process that dies leaves its written bytes in the
    /// store). Stores on disks, and every store of the simulator and of the
    /// fault swarm, say no.
    fn durable_on_write(&self) -> bool {
        false
    }

    /// Record a write of `len` bytes without content: only the object's size
    /// changes (to at least `offset + len`). Byte stores refuse it.
    fn write_phantom(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        let _ = (offset, len);
        Err(StoreError::PayloadKind { object, kept: self.payload_kind(), offered: PayloadKind::Phantom })
    }

    /// A read of `len` bytes without content: the checks of
    /// [`ObjectStore::read`], no data. Byte stores refuse it.
    fn read_phantom(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        let _ = (offset, len);
        Err(StoreError::PayloadKind { object, kept: self.payload_kind(), offered: PayloadKind::Phantom })
    }

    /// A write of any payload: bytes in frames are written frame by frame
    /// (a store that can do better, such as one `pwritev`, overrides this).
    fn write_payload(&mut self, object: ObjectId, offset: u64, data: &Payload) -> Result<(), StoreError> {
        match data {
            Payload::Bytes(bytes) => self.write(object, offset, bytes),
            Payload::Phantom(len) => self.write_phantom(object, offset, *len),
            Payload::Pages(span) => {
                let mut at = offset;
                for piece in span.slices() {
                    self.write(object, at, piece)?;
                    at += piece.len() as u64;
                }
                Ok(())
            }
            Payload::Remote(span) => self.write(object, offset, &span.to_vec()),
        }
    }

    /// A read answered with the kind of payload this store keeps.
    fn read_payload(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Payload, StoreError> {
        match self.payload_kind() {
            PayloadKind::Bytes => self.read(object, offset, len).map(Payload::Bytes),
            PayloadKind::Phantom => self.read_phantom(object, offset, len).map(|()| Payload::Phantom(len)),
        }
    }
}

/// Sparse in-memory objects, kept in 64 KiB chunks.
#[derive(Clone, Debug, Default)]
pub struct MemStore {
    objects: BTreeMap<ObjectId, MemObject>,
}

const CHUNK_BYTES: u64 = 64 * 1024;
/// The most chunks one reservation makes in memory (1 GiB).
pub const RESERVE_CHUNKS_MAX: u64 = 1 << 14;

#[derive(Clone, Debug, Default)]
struct MemObject {
    size: u64,
    chunks: BTreeMap<u64, Box<[u8]>>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Bytes held in chunks (allocated, not logical size).
    pub fn bytes_allocated(&self) -> u64 {
        self.objects.values().map(|o| o.chunks.len() as u64 * CHUNK_BYTES).sum()
    }

    /// Remove an object; false if it held nothing.
    pub fn remove(&mut self, object: ObjectId) -> bool {
        self.objects.remove(&object).is_some()
    }
}

fn check_bounds(object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
    match offset.checked_add(len) {
        Some(end) if end <= OBJECT_BYTES_MAX => Ok(()),
        _ => Err(StoreError::TooLarge { object, offset, len }),
    }
}

impl ObjectStore for MemStore {
    fn write(&mut self, object: ObjectId, offset: u64, data: &[u8]) -> Result<(), StoreError> {
        check_bounds(object, offset, data.len() as u64)?;
        let obj = self.objects.entry(object).or_default();
        let mut done = 0usize;
        while done < data.len() {
            let pos = offset + done as u64;
            let (chunk, within) = (pos / CHUNK_BYTES, (pos % CHUNK_BYTES) as usize);
            let n = (CHUNK_BYTES as usize - within).min(data.len() - done);
            let buf = obj.chunks.entry(chunk).or_insert_with(|| vec![0; CHUNK_BYTES as usize].into_boxed_slice());
            buf[within..within + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        obj.size = obj.size.max(offset + data.len() as u64);
        Ok(())
    }

    fn read(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        check_bounds(object, offset, len)?;
        let mut out = vec![0u8; len as usize];
        let Some(obj) = self.objects.get(&object) else { return Ok(out) };
        let end = (offset + len).min(obj.size);
        let mut pos = offset;
        while pos < end {
            let (chunk, within) = (pos / CHUNK_BYTES, (pos % CHUNK_BYTES) as usize);
            let n = ((CHUNK_BYTES - within as u64).min(end - pos)) as usize;
            if let Some(buf) = obj.chunks.get(&chunk) {
                let at = (pos - offset) as usize;
                out[at..at + n].copy_from_slice(&buf[within..within + n]);
            }
            pos += n as u64;
        }
        Ok(out)
    }

    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError> {
        check_bounds(object, size, 0)?;
        let obj = self.objects.entry(object).or_default();
        let first_dropped = size.div_ceil(CHUNK_BYTES);
        obj.chunks.retain(|c, _| *c < first_dropped);
        if !size.is_multiple_of(CHUNK_BYTES) {
            if let Some(buf) = obj.chunks.get_mut(&(size / CHUNK_BYTES)) {
                buf[(size % CHUNK_BYTES) as usize..].fill(0);
            }
        }
        obj.size = size;
        Ok(())
    }

    fn punch_hole(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        check_bounds(object, offset, len)?;
        let Some(obj) = self.objects.get_mut(&object) else { return Ok(()) };
        let end = offset + len;
        // Whole chunks go; the ends of partial ones are zeroed.
        let first_whole = offset.div_ceil(CHUNK_BYTES);
        let past_whole = end / CHUNK_BYTES;
        obj.chunks.retain(|c, _| *c < first_whole || *c >= past_whole);
        for chunk in [offset / CHUNK_BYTES, end.saturating_sub(1) / CHUNK_BYTES] {
            if let Some(buf) = obj.chunks.get_mut(&chunk) {
                let base = chunk * CHUNK_BYTES;
                let from = offset.max(base) - base;
                let to = end.min(base + CHUNK_BYTES) - base;
                if from < to {
                    buf[from as usize..to as usize].fill(0);
                }
            }
        }
        Ok(())
    }

    /// Chunks are made for the range (a reservation holds memory), at most
    /// [`RESERVE_CHUNKS_MAX`] at a time: past that, `ENOSPC`, as a disk
    /// without the room says.
    fn reserve(&mut self, object: ObjectId, offset: u64, len: u64, keep_size: bool) -> Result<(), StoreError> {
        check_bounds(object, offset, len)?;
        if len.div_ceil(CHUNK_BYTES) >= RESERVE_CHUNKS_MAX {
            let detail = format!("reserving {len} bytes of object {} in memory", object.0);
            return Err(StoreError::Os { errno: Errno::ENOSPC, detail });
        }
        let obj = self.objects.entry(object).or_default();
        if len > 0 {
            for chunk in offset / CHUNK_BYTES..=(offset + len - 1) / CHUNK_BYTES {
                obj.chunks.entry(chunk).or_insert_with(|| vec![0; CHUNK_BYTES as usize].into_boxed_slice());
            }
        }
        if !keep_size {
            obj.size = obj.size.max(offset + len);
        }
        Ok(())
    }

    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        Ok(self.objects.get(&object).map_or(0, |o| o.size))
    }

    fn allocated(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        Ok(self.objects.get(&object).map_or(0, |o| o.chunks.len() as u64 * CHUNK_BYTES))
    }
}

/// Objects in memory that keep a journal's promise and no more: a write is
/// visible at once and durable only once a commit covers its object; a
/// crash ([`JournalStore::crash`]) loses every change not committed. The
/// store of the deterministic harness, where OSTs can crash and restart.
///
/// Failures can be injected (the fault swarm's failing disks): writes and
/// punches that fail with an error number, and commits that fail for an
/// object. A failed commit drops the object's uncommitted changes from
/// what is durable while they stay readable until a crash, as Linux marks
/// pages clean after a failed writeback (the object's bytes on disk are
/// then whatever they were).
#[derive(Debug, Default)]
pub struct JournalStore {
    current: MemStore,
    committed: MemStore,
    /// Changes not yet committed, in the order they were made.
    pending: Vec<(ObjectId, JournalChange)>,
    /// Writes and punches fail with this while set.
    pub fail_writes: Option<Errno>,
    /// Commits fail with this while set.
    pub fail_commits: Option<Errno>,
}

#[derive(Debug)]
enum JournalChange {
    Write { offset: u64, data: Vec<u8> },
    Cut(Cut),
}

impl JournalStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Make the changes of `objects` durable; returns the objects whose
    /// commit failed, with the error.
    pub fn commit(&mut self, objects: &[ObjectId]) -> Vec<(ObjectId, Errno)> {
        let failed: Vec<(ObjectId, Errno)> = match self.fail_commits {
            Some(errno) => {
                objects.iter().filter(|o| self.pending.iter().any(|(p, _)| p == *o)).map(|&o| (o, errno)).collect()
            }
            None => Vec::new(),
        };
        let pending = std::mem::take(&mut self.pending);
        for (object, change) in pending {
            if !objects.contains(&object) {
                self.pending.push((object, change));
                continue;
            }
            if failed.iter().any(|(o, _)| *o == object) {
                continue; // lost to the disk, still readable until a crash
            }
            let applied = match change {
                JournalChange::Write { offset, data } => self.committed.write(object, offset, &data),
                JournalChange::Cut(cut) => self.committed.cut(object, cut),
            };
            applied.expect("a change that applied once applies again");
        }
        failed
    }

    /// The machine stops: what was not committed is gone.
    pub fn crash(&mut self) {
        self.current = self.committed.clone();
        self.pending.clear();
    }

    /// Remove an object (the MDS's destroy of a removed file's object):
    /// gone at once and for good, committed or not, as the network OSS's
    /// removal of the object's file is (`FileStore::destroy`).
    pub fn destroy(&mut self, object: ObjectId) {
        self.current.remove(object);
        self.committed.remove(object);
        self.pending.retain(|(o, _)| *o != object);
    }

    /// Bytes of uncommitted changes.
    pub fn uncommitted_bytes(&self) -> u64 {
        self.pending
            .iter()
            .map(|(_, c)| match c {
                JournalChange::Write { data, .. } => data.len() as u64,
                JournalChange::Cut(_) => 0,
            })
            .sum()
    }

    fn injected(&self, object: ObjectId, what: &str) -> Result<(), StoreError> {
        match self.fail_writes {
            Some(errno) => Err(StoreError::Os { errno, detail: format!("{what} object {} (injected)", object.0) }),
            None => Ok(()),
        }
    }
}

impl ObjectStore for JournalStore {
    fn write(&mut self, object: ObjectId, offset: u64, data: &[u8]) -> Result<(), StoreError> {
        self.injected(object, "writing")?;
        self.current.write(object, offset, data)?;
        self.pending.push((object, JournalChange::Write { offset, data: data.to_vec() }));
        Ok(())
    }

    fn read(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        self.current.read(object, offset, len)
    }

    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError> {
        self.injected(object, "truncating")?;
        self.current.punch(object, size)?;
        self.pending.push((object, JournalChange::Cut(Cut::Size(size))));
        Ok(())
    }

    fn punch_hole(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        self.injected(object, "punching a hole in")?;
        self.current.punch_hole(object, offset, len)?;
        self.pending.push((object, JournalChange::Cut(Cut::Hole { offset, len })));
        Ok(())
    }

    fn reserve(&mut self, object: ObjectId, offset: u64, len: u64, keep_size: bool) -> Result<(), StoreError> {
        self.injected(object, "reserving space for")?;
        self.current.reserve(object, offset, len, keep_size)?;
        self.pending.push((object, JournalChange::Cut(Cut::Reserve { offset, len, keep_size })));
        Ok(())
    }

    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        self.current.size(object)
    }

    fn allocated(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        self.current.allocated(object)
    }
}

/// Object sizes and nothing else: the store of the simulator's OSTs, which
/// are written with phantom payloads only.
///
/// Cache advice does nothing here (the trait's default): the simulator
/// models no OSS page cache, so there is nothing to fill or drop.
///
/// Phantom writes grow an object to their end, punches set its size, and
/// phantom reads check bounds and answer with a phantom of the length asked
/// for. Byte writes and byte reads fail with [`StoreError::PayloadKind`]: the
/// bytes could not be kept, and zeros read back would look like data.
#[derive(Debug, Default)]
pub struct SizeStore {
    sizes: BTreeMap<ObjectId, u64>,
}

impl SizeStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Objects ever written or punched, with their sizes, in id order.
    pub fn sizes(&self) -> impl Iterator<Item = (ObjectId, u64)> + '_ {
        self.sizes.iter().map(|(&object, &size)| (object, size))
    }

    /// Sum of the object sizes (logical bytes, holes included).
    pub fn bytes_total(&self) -> u64 {
        self.sizes.values().sum()
    }

    fn refuse_bytes(object: ObjectId) -> StoreError {
        StoreError::PayloadKind { object, kept: PayloadKind::Phantom, offered: PayloadKind::Bytes }
    }
}

impl ObjectStore for SizeStore {
    fn write(&mut self, object: ObjectId, _offset: u64, _data: &[u8]) -> Result<(), StoreError> {
        Err(Self::refuse_bytes(object))
    }

    fn read(&mut self, object: ObjectId, _offset: u64, _len: u64) -> Result<Vec<u8>, StoreError> {
        Err(Self::refuse_bytes(object))
    }

    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError> {
        check_bounds(object, size, 0)?;
        self.sizes.insert(object, size);
        Ok(())
    }

    /// Sizes only: the hole's bytes were never kept.
    fn punch_hole(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        check_bounds(object, offset, len)
    }

    fn reserve(&mut self, object: ObjectId, offset: u64, len: u64, keep_size: bool) -> Result<(), StoreError> {
        check_bounds(object, offset, len)?;
        let size = self.sizes.entry(object).or_default();
        if !keep_size {
            *size = (*size).max(offset + len);
        }
        Ok(())
    }

    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        Ok(self.sizes.get(&object).copied().unwrap_or(0))
    }

    /// No holes are modelled: an object holds its size.
    fn allocated(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        self.size(object)
    }

    fn payload_kind(&self) -> PayloadKind {
        PayloadKind::Phantom
    }

    fn write_phantom(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        check_bounds(object, offset, len)?;
        let size = self.sizes.entry(object).or_default();
        *size = (*size).max(offset + len);
        Ok(())
    }

    fn read_phantom(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        check_bounds(object, offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_writes_read_back_with_zero_holes() {
        let mut s = MemStore::new();
        let o = ObjectId(1);
        s.write(o, 70_000, b"abc").unwrap();
        assert_eq!(s.size(o).unwrap(), 70_003);
        let r = s.read(o, 69_999, 6).unwrap();
        assert_eq!(r, vec![0, b'a', b'b', b'c', 0, 0]);
        assert_eq!(s.read(ObjectId(9), 0, 3).unwrap(), vec![0, 0, 0]);
    }

    #[test]
    fn a_hole_reads_as_zeros_and_frees_whole_chunks_and_a_reserve_keeps_bytes() {
        let mut s = MemStore::new();
        let o = ObjectId(1);
        let c = CHUNK_BYTES;
        s.write(o, 0, &vec![7u8; 4 * c as usize]).unwrap();
        assert_eq!(s.allocated(o).unwrap(), 4 * c);
        s.punch_hole(o, c / 2, 2 * c).unwrap();
        assert_eq!(s.size(o).unwrap(), 4 * c, "a hole keeps the size");
        assert_eq!(s.allocated(o).unwrap(), 3 * c, "the one whole chunk inside goes");
        let bytes = s.read(o, 0, 4 * c).unwrap();
        assert!(bytes[..(c / 2) as usize].iter().all(|b| *b == 7));
        assert!(bytes[(c / 2) as usize..(c / 2 + 2 * c) as usize].iter().all(|b| *b == 0));
        assert!(bytes[(c / 2 + 2 * c) as usize..].iter().all(|b| *b == 7));
        s.reserve(o, 0, 8 * c, true).unwrap();
        assert_eq!((s.size(o).unwrap(), s.allocated(o).unwrap()), (4 * c, 8 * c), "KEEP_SIZE");
        assert_eq!(s.read(o, 0, 1).unwrap(), [7], "reserving keeps what is there");
        s.reserve(o, 8 * c, 10, false).unwrap();
        assert_eq!(s.size(o).unwrap(), 8 * c + 10, "mode 0 grows the object");
        let refused = s.reserve(ObjectId(9), 0, RESERVE_CHUNKS_MAX * c, false).unwrap_err();
        assert!(matches!(refused, StoreError::Os { errno: Errno::ENOSPC, .. }), "a bounded reservation: {refused}");
        assert_eq!(s.size(ObjectId(9)).unwrap(), 0, "nothing done");
        s.punch_hole(ObjectId(9), 0, 10).unwrap();
        assert_eq!(s.allocated(ObjectId(9)).unwrap(), 0, "a hole in nothing is nothing");
    }

    #[test]
    fn punch_drops_and_zeroes_the_tail() {
        let mut s = MemStore::new();
        let o = ObjectId(1);
        s.write(o, 0, &[7u8; 200_000]).unwrap();
        s.punch(o, 100).unwrap();
        assert_eq!(s.size(o).unwrap(), 100);
        s.punch(o, 300).unwrap();
        let r = s.read(o, 98, 4).unwrap();
        assert_eq!(r, vec![7, 7, 0, 0]);
    }

    #[test]
    fn writes_past_the_maximum_object_size_fail() {
        let mut s = MemStore::new();
        assert!(s.write(ObjectId(1), OBJECT_BYTES_MAX, b"x").is_err());
        assert!(s.read(ObjectId(1), u64::MAX, 2).is_err());
    }

    #[test]
    fn memstore_refuses_phantoms() {
        let mut s = MemStore::new();
        let o = ObjectId(1);
        let refused = |r: Result<_, StoreError>| matches!(r, Err(StoreError::PayloadKind { .. }));
        assert!(refused(s.write_payload(o, 0, &Payload::Phantom(10))));
        assert!(refused(s.read_phantom(o, 0, 10)));
        assert_eq!(s.size(o).unwrap(), 0);
        s.write_payload(o, 1, &Payload::Bytes(vec![5])).unwrap();
        assert_eq!(s.read_payload(o, 0, 3).unwrap(), Payload::Bytes(vec![0, 5, 0]));
    }

    #[test]
    fn a_destroyed_object_is_gone_committed_or_not_and_stays_gone_after_a_crash() {
        let mut s = JournalStore::new();
        let (a, b) = (ObjectId(1), ObjectId(2));
        s.write(a, 0, b"kept").unwrap();
        s.commit(&[a]);
        s.write(a, 4, b"more").unwrap();
        s.write(b, 0, b"other").unwrap();
        s.destroy(a);
        assert_eq!(s.size(a).unwrap(), 0);
        assert_eq!(s.read(a, 0, 8).unwrap(), vec![0; 8]);
        s.commit(&[a, b]);
        s.crash();
        assert_eq!(s.size(a).unwrap(), 0, "a destroy is durable at once");
        assert_eq!(s.read(b, 0, 5).unwrap(), b"other", "other objects are untouched");
    }

    #[test]
    fn a_journal_store_loses_what_was_not_committed() {
        let mut s = JournalStore::new();
        let (a, b) = (ObjectId(1), ObjectId(2));
        s.write(a, 0, b"kept").unwrap();
        s.write(b, 0, b"lost").unwrap();
        assert_eq!(s.commit(&[a]), vec![]);
        s.write(a, 0, b"gone").unwrap();
        assert_eq!(s.read(b, 0, 4).unwrap(), b"lost", "readable before the crash");
        s.crash();
        assert_eq!(s.read(a, 0, 4).unwrap(), b"kept");
        assert_eq!(s.read(b, 0, 4).unwrap(), vec![0; 4]);
        // A failed commit: readable until a crash, then gone.
        s.write(a, 0, b"fail").unwrap();
        s.fail_commits = Some(Errno::EIO);
        assert_eq!(s.commit(&[a]), vec![(a, Errno::EIO)]);
        assert_eq!(s.read(a, 0, 4).unwrap(), b"fail");
        s.fail_commits = None;
        assert_eq!(s.uncommitted_bytes(), 0);
        s.crash();
        assert_eq!(s.read(a, 0, 4).unwrap(), b"kept");
        s.fail_writes = Some(Errno::ENOSPC);
        assert!(matches!(s.write(a, 0, b"x"), Err(StoreError::Os { errno: Errno::ENOSPC, .. })));
    }

    #[test]
    fn sizestore_keeps_sizes_only() {
        let mut s = SizeStore::new();
        let (a, b) = (ObjectId(1), ObjectId(2));
        s.write_payload(a, 1 << 40, &Payload::Phantom(1 << 20)).unwrap();
        s.write_phantom(a, 0, 10).unwrap(); // below the end: the size stays
        assert_eq!(s.size(a).unwrap(), (1 << 40) + (1 << 20));
        assert_eq!(s.read_payload(a, 5, 4096).unwrap(), Payload::Phantom(4096));
        assert_eq!(s.read_payload(b, 0, 7).unwrap(), Payload::Phantom(7)); // holes too
        s.punch(a, 100).unwrap();
        s.write_phantom(b, 0, 1).unwrap();
        assert_eq!(s.sizes().collect::<Vec<_>>(), vec![(a, 100), (b, 1)]);
        assert_eq!(s.bytes_total(), 101);
        let refused = |r: Result<(), StoreError>| matches!(r, Err(StoreError::PayloadKind { .. }));
        assert!(refused(s.write(a, 0, b"x")) && refused(s.read(a, 0, 1).map(drop)));
        assert!(matches!(s.write_phantom(a, OBJECT_BYTES_MAX, 1), Err(StoreError::TooLarge { .. })));
        assert!(matches!(s.read_phantom(a, u64::MAX, 2), Err(StoreError::TooLarge { .. })));
        assert_eq!(s.size(a).unwrap(), 100);
    }
}
