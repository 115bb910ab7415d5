//! Page frames of shared memory, as a local client's page arena and the
//! OSS that reads its bulk use them: the first write into a page of a
//! `memfd` mapping faults, and the kernel gives the page memory, zeroed,
//! before the copy lands in it; the first read of that page through a
//! second mapping (the OSS's, which hands it to `pwrite`) faults to map it.
//!
//! Each is timed as this thread's CPU time, the first pass over new memory
//! against a second pass over the same, in 1 MiB blocks: the client's
//! copies into the frames, and the OSS's `pwrite`s from them into a new
//! file each pass (so that both pay the same page-cache allocation); the
//! difference per page is the fault's cost. Each is the median of
//! [`ROUNDS`] rounds, each on memory of its own.

use crate::median_f64;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

const BLOCK_BYTES: usize = 1 << 20;
const PAGE_BYTES: u64 = 4096;
pub const ROUNDS: usize = 3;

#[derive(Clone, Debug)]
pub struct Frames {
    /// CPU time of a first write into a page, beyond the copy's.
    pub first_touch_us: f64,
    /// CPU time of a first read of a page through another mapping, beyond
    /// the `pwrite`'s.
    pub first_map_us: f64,
    /// The lowest and the highest of the rounds' figures, each.
    pub first_touch_spread_us: (f64, f64),
    pub first_map_spread_us: (f64, f64),
    /// Pages per round.
    pub pages: u64,
}

pub fn measure(dir: &Path, bytes: u64) -> Result<Frames, String> {
    let scratch = tempfile::Builder::new().prefix("lanefs-calibrate-").tempdir_in(dir).map_err(|e| {
        format!(
            "{}: cannot make a directory to measure in ({e}): give --data DIR on the disk the OSTs would use",
            dir.display()
        )
    })?;
    let bytes = bytes.next_multiple_of(BLOCK_BYTES as u64);
    let pages = bytes / PAGE_BYTES;
    let (mut touch, mut map) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for round in 0..ROUNDS {
        let (t, m) = one_round(&scratch.path().join(format!("frames-{round}")), bytes)?;
        touch.push(t.as_secs_f64() * 1e6 / pages as f64);
        map.push(m.as_secs_f64() * 1e6 / pages as f64);
    }
    let (first_touch_spread_us, first_map_spread_us) = (crate::range_f64(&touch), crate::range_f64(&map));
    Ok(Frames {
        first_touch_us: median_f64(&mut touch).max(0.0),
        first_map_us: median_f64(&mut map).max(0.0),
        first_touch_spread_us,
        first_map_spread_us,
        pages,
    })
}

/// The extra CPU time of the first pass over `bytes` of new shared memory:
/// the client's writes, and the server's reads into files at `path`.
fn one_round(path: &Path, bytes: u64) -> Result<(Duration, Duration), String> {
    let memory = Memfd::new(bytes)?;
    let client = Mapping::new(&memory, bytes, libc::PROT_READ | libc::PROT_WRITE)?;
    let source: Vec<u8> = (0..BLOCK_BYTES).map(|i| (i * 11 + 3) as u8).collect();
    let fill = || {
        let began = crate::cpu::this_thread();
        for at in (0..bytes as usize).step_by(BLOCK_BYTES) {
            // SAFETY: the mapping is `bytes` long and this thread its only
            // user; `at + BLOCK_BYTES <= bytes`.
            unsafe { std::ptr::copy_nonoverlapping(source.as_ptr(), client.ptr.add(at), BLOCK_BYTES) };
        }
        crate::cpu::this_thread().saturating_sub(began)
    };
    let (cold, warm) = (fill(), fill());
    let server = Mapping::new(&memory, bytes, libc::PROT_READ)?;
    let write_out = |name: &str| -> Result<Duration, String> {
        let target = path.with_extension(name);
        let failed = |e: std::io::Error| format!("{}: {e}", target.display());
        let file = File::create(&target).map_err(failed)?;
        let began = crate::cpu::this_thread();
        for at in (0..bytes as usize).step_by(BLOCK_BYTES) {
            // SAFETY: the mapping is `bytes` long and nothing writes it now.
            let block = unsafe { std::slice::from_raw_parts(server.ptr.add(at), BLOCK_BYTES) };
            file.write_all_at(block, at as u64).map_err(failed)?;
        }
        let cpu = crate::cpu::this_thread().saturating_sub(began);
        drop(file);
        std::fs::remove_file(&target).map_err(failed)?;
        Ok(cpu)
    };
    let (mapped_cold, mapped_warm) = (write_out("first")?, write_out("second")?);
    Ok((cold.saturating_sub(warm), mapped_cold.saturating_sub(mapped_warm)))
}

/// A `memfd` of some size, closed on drop.
struct Memfd(OwnedFd);

impl Memfd {
    fn new(bytes: u64) -> Result<Memfd, String> {
        // SAFETY: a valid C string; the call makes a new descriptor.
        let fd = unsafe { libc::memfd_create(c"lanefs-calibrate".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just made and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: a valid descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), bytes as libc::off_t) } != 0 {
            return Err(format!("sizing shared memory to {bytes} bytes: {}", std::io::Error::last_os_error()));
        }
        Ok(Memfd(fd))
    }
}

/// A shared mapping of a [`Memfd`], unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(memory: &Memfd, bytes: u64, protection: libc::c_int) -> Result<Mapping, String> {
        let len = bytes as usize;
        // SAFETY: maps `len` bytes of a descriptor that is at least that
        // long; the result is checked.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, protection, libc::MAP_SHARED, memory.0.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return Err(format!("mapping {bytes} bytes of shared memory: {}", std::io::Error::last_os_error()));
        }
        Ok(Mapping { ptr: ptr.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
