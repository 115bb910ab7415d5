//! Where an OST keeps object bytes: the [`ObjectStore`] trait and an
//! in-memory implementation.
//!
//! The OST service talks to its objects only through this trait, so the same
//! protocol code serves objects from memory (tests, the simulator, which only
//! counts bytes) and from sparse files on disk (the network daemons). Holes
//! and bytes beyond an object's end read as zeros, as in a sparse file.

use crate::units::ObjectId;
use std::collections::BTreeMap;

/// Object offsets must stay below this (Lustre's maximum object size is
/// smaller still; this bound keeps `offset + len` from overflowing).
pub const OBJECT_BYTES_MAX: u64 = 1 << 60;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("object {object:?}: offset {offset} + length {len} exceeds the maximum object size {OBJECT_BYTES_MAX}")]
    TooLarge { object: ObjectId, offset: u64, len: u64 },
    #[error("object store I/O error: {0}")]
    Io(String),
}

/// Byte storage for the objects of one OST.
pub trait ObjectStore {
    fn write(&mut self, object: ObjectId, offset: u64, data: &[u8]) -> Result<(), StoreError>;
    /// Exactly `len` bytes; holes and bytes past the end read as zeros.
    fn read(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, StoreError>;
    /// Set the object's size to `size`, dropping or zero-extending.
    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError>;
    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError>;
}

/// Sparse in-memory objects, kept in 64 KiB chunks.
#[derive(Debug, Default)]
pub struct MemStore {
    objects: BTreeMap<ObjectId, MemObject>,
}

const CHUNK_BYTES: u64 = 64 * 1024;

#[derive(Debug, Default)]
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

    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        Ok(self.objects.get(&object).map_or(0, |o| o.size))
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
}
