//! The disk the OSTs would live on: sequential write and read bandwidth in
//! 1 MiB writes (an OST's objects see 1 MiB RPCs), and the latency of one
//! `fdatasync` after a 4 KiB write (what an OST's commit waits for of each
//! object it syncs), alone and from one thread per OST at once, as the
//! OSTs' commit threads sync; the latency of an OST's commit point (one
//! block written in place in a file whose blocks exist, and its
//! `fdatasync`); and the host's page cache in front of it, as lanefs's
//! OSTs (files) use it.
//!
//! The write is timed to its `fdatasync`s, so that the kernel's page cache
//! does not stand in for the disk. It is made in [`PARTS`], each synced
//! before the next, and each part's two halves are kept apart: the
//! buffered writes' CPU time is the rate one core writes into the page
//! cache (pages allocated as the file grows), the parts' median, and the
//! `fdatasync`s' wall time the rate at which the page cache is written
//! back to the disk, all the bytes over the `fdatasync`s' time together
//! (below the host's background threshold, read from `/proc/sys/vm`, the
//! kernel writes back nothing before it is asked). The two are taken
//! differently on purpose. A part whose writes ran slow met memory the
//! machine's host had not backed yet (a virtual machine's freed pages; see
//! `bench/fidelity.py`), which says nothing of a core's rate, so one such
//! part must not make it. A part whose `fdatasync` ran slow met the disk as
//! it is at times, and every run that writes as much meets it as often:
//! the time a run's bytes take on the disk is their sum over such
//! stretches, so the rate that predicts it is the bytes over the time, not
//! the typical part's. Before the read, the
//! file's cached pages are dropped (`posix_fadvise(POSIX_FADV_DONTNEED)`,
//! which needs no root), so that the read comes from the disk. The file is
//! made in a private temporary directory inside the data directory and
//! removed.

use crate::{gib_s, median, median_f64};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

const CHUNK_BYTES: usize = 1 << 20;
const SYNC_WRITE_BYTES: usize = 4096;
/// Parts the write is made in, each synced before the next.
pub const PARTS: u64 = 4;

#[derive(Clone, Debug)]
pub struct Disk {
    /// The buffered writes and their `fdatasync`, together.
    pub write_gib_s: f64,
    /// The buffered writes' bytes per CPU second: one core writing into
    /// the page cache.
    pub cache_write_gib_s: f64,
    /// The bytes per second of the `fdatasync`s alone: the page cache
    /// written back (all the bytes over the `fdatasync`s' time together).
    pub writeback_gib_s: f64,
    /// The lowest and the highest of the parts' figures, each.
    pub cache_write_spread_gib_s: (f64, f64),
    pub writeback_spread_gib_s: (f64, f64),
    /// The bytes written back per CPU second of the `fdatasync`s (the
    /// kernel's work in the syncing thread), all the parts together, with
    /// the parts' range; `None` if the syncs took no CPU time it could see.
    pub writeback_cpu: Option<(f64, (f64, f64))>,
    /// Dirty bytes the host keeps before writing back on its own, and how
    /// that was found.
    pub background: Background,
    pub read_gib_s: f64,
    /// Median time of a 4 KiB write and its `fdatasync`.
    pub sync: Duration,
    /// The same, with one thread per OST doing it at once, each to a file
    /// of its own: the median of them all.
    pub sync_together: Duration,
    /// The threads of `sync_together`: one per OST.
    pub syncs_threads: u32,
    /// Median time of a commit point: 512 bytes written in place, in a file
    /// whose blocks exist, and its `fdatasync`.
    pub point: Duration,
    /// The median CPU time of the same (this thread's): an `fdatasync`'s
    /// own work, next to nothing written back.
    pub point_cpu: Duration,
    /// Bytes written and read.
    pub bytes: u64,
    /// `fdatasync`s timed.
    pub syncs: usize,
}

/// Bytes of a commit point's write (`lanefs_server`'s commit point slot).
const POINT_BYTES: usize = 512;

pub fn measure(dir: &Path, bytes: u64, syncs: usize, osts: u32) -> Result<Disk, String> {
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
    let w = write_in_parts(&mut file, &chunk, bytes).map_err(|(what, e)| failed(what, e))?;
    let written = w.bytes;
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
    let sync = appends_synced(&scratch.path().join("sync"), &chunk[..SYNC_WRITE_BYTES], syncs)
        .map(|mut samples| median(&mut samples))?;
    let sync_together = syncs_together(scratch.path(), &chunk[..SYNC_WRITE_BYTES], syncs, osts)?;
    let (point, point_cpu) = points_synced(&scratch.path().join("point"), syncs)?;
    Ok(Disk {
        write_gib_s: w.gib_s,
        cache_write_gib_s: w.rates.cache_write.0,
        writeback_gib_s: w.rates.writeback.0,
        cache_write_spread_gib_s: w.rates.cache_write.1,
        writeback_spread_gib_s: w.rates.writeback.1,
        writeback_cpu: w.rates.writeback_cpu,
        background: Background::read(),
        read_gib_s,
        sync,
        sync_together,
        syncs_threads: osts.max(1),
        point,
        point_cpu,
        bytes: written,
        syncs,
    })
}

/// `syncs` times: `data` appended to the file at `path` (made new) and
/// `fdatasync`ed; each time taken.
fn appends_synced(path: &Path, data: &[u8], syncs: usize) -> Result<Vec<Duration>, String> {
    let failed = |what: &str, e: std::io::Error| format!("{}: {what}: {e}", path.display());
    let mut file = File::create(path).map_err(|e| failed("create", e))?;
    let mut samples = Vec::with_capacity(syncs);
    for _ in 0..syncs {
        let began = Instant::now();
        file.write_all(data).map_err(|e| failed("write", e))?;
        file.sync_data().map_err(|e| failed("fdatasync", e))?;
        samples.push(began.elapsed());
    }
    Ok(samples)
}

/// [`appends_synced`] from `threads` threads at once, each to a file of
/// its own in `dir`: the median of every time taken.
fn syncs_together(dir: &Path, data: &[u8], syncs: usize, threads: u32) -> Result<Duration, String> {
    let mut all = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..threads.max(1))
            .map(|i| scope.spawn(move || appends_synced(&dir.join(format!("sync-{i}")), data, syncs)))
            .collect();
        let mut all = Vec::new();
        for run in runs {
            all.extend(run.join().map_err(|_| "a thread syncing the disk panicked".to_string())??);
        }
        Ok::<_, String>(all)
    })?;
    Ok(median(&mut all))
}

/// `syncs` commit points: [`POINT_BYTES`] written in place, in turn into
/// the two slots of a file whose blocks were written and synced first,
/// each `fdatasync`ed; the median time, and the median of this thread's
/// CPU time for each.
fn points_synced(path: &Path, syncs: usize) -> Result<(Duration, Duration), String> {
    use std::os::unix::fs::FileExt;
    let failed = |what: &str, e: std::io::Error| format!("{}: {what}: {e}", path.display());
    let file = File::create(path).map_err(|e| failed("create", e))?;
    file.write_all_at(&[0; 2 * POINT_BYTES], 0).map_err(|e| failed("write", e))?;
    file.sync_all().map_err(|e| failed("fsync", e))?;
    let (mut samples, mut cpu) = (Vec::with_capacity(syncs), Vec::with_capacity(syncs));
    for i in 0..syncs {
        let (began, cpu_began) = (Instant::now(), crate::cpu::this_thread());
        let slot = (i % 2 * POINT_BYTES) as u64;
        file.write_all_at(&[i as u8; POINT_BYTES], slot).map_err(|e| failed("write", e))?;
        file.sync_data().map_err(|e| failed("fdatasync", e))?;
        samples.push(began.elapsed());
        cpu.push(crate::cpu::this_thread().saturating_sub(cpu_began));
    }
    Ok((median(&mut samples), median(&mut cpu)))
}

/// What [`write_in_parts`] measured: each rate with its parts' range.
struct Written {
    bytes: u64,
    /// The writes and syncs together.
    gib_s: f64,
    rates: Rates,
}

/// One part of the write: its bytes, the CPU time of its buffered writes,
/// and the wall and CPU time of its `fdatasync`.
struct Part {
    bytes: u64,
    cpu: Duration,
    sync: Duration,
    sync_cpu: Duration,
}

/// The page cache's two rates, each with the parts' range (lowest,
/// highest).
#[derive(Debug, PartialEq)]
struct Rates {
    cache_write: (f64, (f64, f64)),
    writeback: (f64, (f64, f64)),
    /// Bytes per CPU second of the `fdatasync`s, as `writeback` (none if
    /// a part's took no CPU time the clock could see).
    writeback_cpu: Option<(f64, (f64, f64))>,
}

/// The write rate is the parts' median, so that one part whose memory the
/// host backed on first touch does not make it; the writeback rate is all
/// the bytes over the syncs' time together, the disk's slow stretches
/// included (see the module's comment).
fn rates(parts: &[Part]) -> Rates {
    let mut cache_writes: Vec<f64> = parts.iter().map(|p| gib_s(p.bytes, p.cpu)).collect();
    let writebacks: Vec<f64> = parts.iter().map(|p| gib_s(p.bytes, p.sync)).collect();
    let bytes = parts.iter().map(|p| p.bytes).sum();
    let syncing = parts.iter().map(|p| p.sync).sum();
    let cache_spread = crate::range_f64(&cache_writes);
    let writeback_cpu = match parts.iter().all(|p| p.sync_cpu > Duration::ZERO) {
        true => {
            let per_part: Vec<f64> = parts.iter().map(|p| gib_s(p.bytes, p.sync_cpu)).collect();
            let cpu = parts.iter().map(|p| p.sync_cpu).sum();
            Some((gib_s(bytes, cpu), crate::range_f64(&per_part)))
        }
        false => None,
    };
    Rates {
        cache_write: (median_f64(&mut cache_writes), cache_spread),
        writeback: (gib_s(bytes, syncing), crate::range_f64(&writebacks)),
        writeback_cpu,
    }
}

/// Writes `bytes` of `chunk`s to `file` in [`PARTS`], each written and
/// then synced; see [`rates`].
fn write_in_parts(file: &mut File, chunk: &[u8], bytes: u64) -> Result<Written, (&'static str, std::io::Error)> {
    let part_bytes = (bytes / PARTS).next_multiple_of(CHUNK_BYTES as u64);
    let began = Instant::now();
    let (mut written, mut parts) = (0, Vec::new());
    for _ in 0..PARTS {
        let (part_began, cpu_began) = (written, crate::cpu::this_thread());
        while written < part_began + part_bytes {
            file.write_all(chunk).map_err(|e| ("write", e))?;
            written += chunk.len() as u64;
        }
        let (cached, cpu_cached) = (Instant::now(), crate::cpu::this_thread());
        file.sync_data().map_err(|e| ("fdatasync", e))?;
        parts.push(Part {
            bytes: written - part_began,
            cpu: cpu_cached.saturating_sub(cpu_began),
            sync: cached.elapsed(),
            sync_cpu: crate::cpu::this_thread().saturating_sub(cpu_cached),
        });
    }
    Ok(Written { bytes: written, gib_s: gib_s(written, began.elapsed()), rates: rates(&parts) })
}

/// The dirty bytes past which the host's kernel writes back on its own
/// (`Documentation/admin-guide/sysctl/vm.rst`): `vm.dirty_background_bytes`
/// when set, else `vm.dirty_background_ratio` percent of the memory
/// available for dirty pages, which `MemAvailable` stands in for (the
/// kernel counts free and file-cache pages less a reserve: near it).
#[derive(Clone, Debug, PartialEq)]
pub struct Background {
    pub bytes: u64,
    /// How it was found, for the preset's comment.
    pub how: String,
}

impl Background {
    fn read() -> Background {
        let number = |path: &str| std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse::<u64>().ok());
        Background::from(
            number("/proc/sys/vm/dirty_background_bytes"),
            number("/proc/sys/vm/dirty_background_ratio"),
            std::fs::read_to_string("/proc/meminfo").ok().as_deref().and_then(mem_available),
        )
    }

    fn from(bytes: Option<u64>, ratio: Option<u64>, available: Option<u64>) -> Background {
        match (bytes, ratio, available) {
            (Some(bytes), _, _) if bytes > 0 => {
                Background { bytes, how: format!("vm.dirty_background_bytes = {bytes}") }
            }
            (_, Some(ratio), Some(available)) => Background {
                bytes: available / 100 * ratio,
                how: format!("vm.dirty_background_ratio = {ratio}% of MemAvailable ({} MiB)", available >> 20),
            },
            // Neither readable: as if the kernel wrote back at once.
            _ => Background { bytes: 0, how: "not readable from /proc/sys/vm and /proc/meminfo".into() },
        }
    }
}

/// Below this share of a core's copy rate, the page cache's write rate says
/// that new memory was slow to come by while calibrating, not what a write
/// costs: in a virtual machine whose host takes back the memory the guest
/// frees (free page reporting), each page the kernel takes again faults
/// back to the host first. The writes into the page cache copy the bytes
/// and take new pages, so they run at a third or more of a copy where
/// memory is the guest's; a host taking pages back made it a thirtieth.
pub const NEW_MEMORY_SLOW_SHARE: f64 = 0.125;

/// Whether writes into the page cache at `cache_write_gib_s`, beside a
/// core's copy at `copy_gib_s`, met slow new memory ([`NEW_MEMORY_SLOW_SHARE`]).
pub fn new_memory_slow(cache_write_gib_s: f64, copy_gib_s: f64) -> bool {
    copy_gib_s > 0.0 && cache_write_gib_s < copy_gib_s * NEW_MEMORY_SLOW_SHARE
}

/// What to do about slow new memory, for the summary and the preset.
pub const NEW_MEMORY_SLOW_FIX: &str = "in a VM, the host may be taking back the memory the guest frees \
     (free page reporting): calibrate again with /sys/module/page_reporting/parameters/min_free_ms \
     raised to 60000 and a few GiB written and freed first, as bench/fidelity.py does";

/// `MemAvailable` of `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Drops the file's pages from the page cache (they are clean: it was
/// synced).
fn drop_cached(file: &File) {
    // SAFETY: a valid descriptor; the call only advises the kernel.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_background_threshold_is_the_bytes_when_set_else_the_ratio_of_the_memory_available() {
        assert_eq!(Background::from(Some(1 << 20), Some(10), Some(1 << 30)).bytes, 1 << 20);
        assert_eq!(Background::from(Some(0), Some(10), Some(100 << 20)).bytes, 10 << 20);
        assert_eq!(Background::from(None, None, None).bytes, 0);
        let meminfo = "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(mem_available(meminfo), Some(20_000_000 * 1024));
    }

    #[test]
    fn the_writeback_rate_counts_a_slow_sync_as_a_run_would_and_the_write_rate_skips_a_slow_part() {
        let ms = Duration::from_millis;
        let part = |cpu, sync| Part { bytes: 256 << 20, cpu: ms(cpu), sync: ms(sync), sync_cpu: ms(sync / 10) };
        // Three parts at 2.5 GiB/s into the cache and 0.625 GiB/s back out;
        // one whose writes met unbacked memory and whose sync a slow disk.
        let r = rates(&[part(100, 400), part(100, 400), part(1000, 1000), part(100, 400)]);
        assert!((r.cache_write.0 - 2.5).abs() < 1e-9, "{r:?}");
        assert!((r.cache_write.1 .0 - 0.25).abs() < 1e-9 && (r.cache_write.1 .1 - 2.5).abs() < 1e-9, "{r:?}");
        // 1 GiB over 2.2 s of syncs, not the median part's 0.625 GiB/s.
        assert!((r.writeback.0 - 1.0 / 2.2).abs() < 1e-9, "{r:?}");
        assert!((r.writeback.1 .0 - 0.25).abs() < 1e-9 && (r.writeback.1 .1 - 0.625).abs() < 1e-9, "{r:?}");
        // The syncs' CPU, as their time: 1 GiB over 0.22 s.
        let (cpu_rate, cpu_range) = r.writeback_cpu.expect("the syncs took CPU time");
        assert!((cpu_rate - 1.0 / 0.22).abs() < 1e-9 && (cpu_range.0 - 2.5).abs() < 1e-9, "{r:?}");
        // Parts alike: both rates are theirs.
        let r = rates(&[part(100, 400), part(100, 400)]);
        assert!((r.writeback.0 - 0.625).abs() < 1e-9 && (r.cache_write.0 - 2.5).abs() < 1e-9, "{r:?}");
        // A sync whose CPU time the clock did not see: no rate.
        assert_eq!(rates(&[part(100, 400), part(100, 0)]).writeback_cpu, None);
    }

    #[test]
    fn writes_into_the_page_cache_far_slower_than_a_copy_are_slow_new_memory() {
        // This machine's own figures: memory the guest's, and memory its
        // host had taken back.
        assert!(!new_memory_slow(5.327, 14.152));
        assert!(new_memory_slow(0.409, 13.366));
        assert!(!new_memory_slow(0.409, 0.0), "no copy rate, nothing to say");
    }
}
