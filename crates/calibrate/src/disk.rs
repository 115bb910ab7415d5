//! The disk the OSTs would live on: sequential write and read bandwidth in
//! 1 MiB writes (an OST's objects see 1 MiB RPCs), and the latency of one
//! `fdatasync` after a 4 KiB write (what an OST's commit waits for).
//!
//! The write is timed to its `fdatasync`, so that the kernel's page cache
//! does not stand in for the disk; before the read, the file's cached
//! pages are dropped (`posix_fadvise(POSIX_FADV_DONTNEED)`, which needs no
//! root), so that the read comes from the disk. The file is made in a
//! private temporary directory inside the data directory and removed.

use crate::{gib_s, median};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

const CHUNK_BYTES: usize = 1 << 20;
const SYNC_WRITE_BYTES: usize = 4096;

#[derive(Clone, Debug)]
pub struct Disk {
    pub write_gib_s: f64,
    pub read_gib_s: f64,
    /// Median time of a 4 KiB write and its `fdatasync`.
    pub sync: Duration,
    /// Bytes written and read.
    pub bytes: u64,
    /// `fdatasync`s timed.
    pub syncs: usize,
}

pub fn measure(dir: &Path, bytes: u64, syncs: usize) -> Result<Disk, String> {
    let scratch = tempfile::Builder::new().prefix("lanefs-calibrate-").tempdir_in(dir).map_err(|e| {
        format!(
            "{}: cannot make a directory to measure in ({e}): give --data DIR on the disk the OSTs would use",
            dir.display()
        )
    })?;
    let path = scratch.path().join("disk");
    let failed = |what: &str, e: std::io::Error| format!("{}: {what}: {e}", path.display());
    let chunk: Vec<u8> = (0..CHUNK_BYTES).map(|i| (i * 7 + 1) as u8).collect();
    let mut file = File::create(&path).map_err(|e| failed("create", e))?;
    let began = Instant::now();
    let mut written = 0;
    while written < bytes {
        file.write_all(&chunk).map_err(|e| failed("write", e))?;
        written += CHUNK_BYTES as u64;
    }
    file.sync_data().map_err(|e| failed("fdatasync", e))?;
    let write_gib_s = gib_s(written, began.elapsed());
    drop_cached(&file);
    let mut file = File::open(&path).map_err(|e| failed("open", e))?;
    let mut buffer = vec![0u8; CHUNK_BYTES];
    let began = Instant::now();
    let mut read = 0;
    loop {
        let n = file.read(&mut buffer).map_err(|e| failed("read", e))?;
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    let read_gib_s = gib_s(read, began.elapsed());
    if read != written {
        return Err(format!("{}: read {read} bytes back of {written} written", path.display()));
    }
    let mut file = File::create(scratch.path().join("sync")).map_err(|e| failed("create", e))?;
    let mut samples = Vec::with_capacity(syncs);
    for _ in 0..syncs {
        let began = Instant::now();
        file.write_all(&chunk[..SYNC_WRITE_BYTES]).map_err(|e| failed("write", e))?;
        file.sync_data().map_err(|e| failed("fdatasync", e))?;
        samples.push(began.elapsed());
    }
    Ok(Disk { write_gib_s, read_gib_s, sync: median(&mut samples), bytes: written, syncs })
}

/// Drops the file's pages from the page cache (they are clean: it was
/// synced).
fn drop_cached(file: &File) {
    // SAFETY: a valid descriptor; the call only advises the kernel.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}
