//! Shared test helpers: an in-memory backend that can corrupt a byte, and runners.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lanefs_ior::{Backend, BackendReport, IorError, IorParams, IorSummary, RankIo};

/// Files in memory. `corrupt_offset` flips one byte of every read that covers it, so
/// both `-W` and `-R` see a bad byte on disk.
#[derive(Default)]
pub struct MemBackend {
    pub files: Arc<Mutex<HashMap<String, Vec<u8>>>>,
    pub corrupt_offset: Option<u64>,
    pub bytes_written: AtomicU64,
    pub fsyncs: AtomicU64,
    pub with_report: bool,
    /// By rank: how many of its first writes each take how long (a slow rank).
    pub slow_writes: Vec<(u64, std::time::Duration)>,
    pub bytes_read: AtomicU64,
}

impl MemBackend {
    pub fn corrupting(offset: u64) -> Self {
        MemBackend { corrupt_offset: Some(offset), ..MemBackend::default() }
    }
}

impl Backend for MemBackend {
    fn name(&self) -> &'static str {
        "MEM"
    }

    fn rank<'a>(&'a self, _rank: u32, _p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        Ok(Box::new(MemRank { backend: self, path: None, rank: _rank, writes: 0 }))
    }

    fn delete(&self, path: &str) -> Result<(), IorError> {
        self.files.lock().unwrap().remove(path);
        Ok(())
    }

    fn report(&self) -> Option<BackendReport> {
        if !self.with_report {
            return None;
        }
        let json = serde_json::json!({"bytesWritten": self.bytes_written.load(Ordering::SeqCst), "ratio": 0.5});
        Some(BackendReport::from_json("mem", json.as_object().unwrap().clone()))
    }
}

struct MemRank<'a> {
    backend: &'a MemBackend,
    path: Option<String>,
    rank: u32,
    writes: u64,
}

impl MemRank<'_> {
    fn path(&self) -> &str {
        self.path.as_deref().expect("no open file")
    }
}

impl RankIo for MemRank<'_> {
    fn create(&mut self, path: &str, _p: &IorParams) -> Result<(), IorError> {
        self.backend.files.lock().unwrap().entry(path.to_string()).or_default();
        self.path = Some(path.to_string());
        Ok(())
    }

    fn open(&mut self, path: &str, _p: &IorParams) -> Result<(), IorError> {
        if !self.backend.files.lock().unwrap().contains_key(path) {
            return Err(IorError::Backend { backend: "MEM", message: format!("open {path}: no such file") });
        }
        self.path = Some(path.to_string());
        Ok(())
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError> {
        if let Some(&(count, pause)) = self.backend.slow_writes.get(self.rank as usize) {
            if self.writes < count {
                std::thread::sleep(pause);
            }
        }
        self.writes += 1;
        let mut files = self.backend.files.lock().unwrap();
        let file = files.get_mut(self.path()).unwrap();
        let end = offset as usize + buf.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[offset as usize..end].copy_from_slice(buf);
        self.backend.bytes_written.fetch_add(buf.len() as u64, Ordering::SeqCst);
        Ok(())
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError> {
        let files = self.backend.files.lock().unwrap();
        let file = &files[self.path()];
        let end = offset as usize + buf.len();
        if file.len() < end {
            return Err(IorError::Backend { backend: "MEM", message: "short read".into() });
        }
        buf.copy_from_slice(&file[offset as usize..end]);
        self.backend.bytes_read.fetch_add(buf.len() as u64, Ordering::SeqCst);
        if let Some(bad) = self.backend.corrupt_offset {
            if (offset..end as u64).contains(&bad) {
                buf[(bad - offset) as usize] ^= 0x5a;
            }
        }
        Ok(())
    }

    fn fsync(&mut self) -> Result<(), IorError> {
        self.backend.fsyncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn close(&mut self) -> Result<(), IorError> {
        self.path = None;
        Ok(())
    }
}

pub fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

/// Parse `line` and run it on `backend`; the summary and the printed report.
pub fn run_line(line: &str, backend: &dyn Backend) -> (IorSummary, String) {
    let params = lanefs_ior::parse_args(&args(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
    let mut out = Vec::new();
    let summary = lanefs_ior::run(&params, backend, &mut out).unwrap_or_else(|e| panic!("{line}: {e}"));
    (summary, String::from_utf8(out).unwrap())
}

/// Start columns of the whitespace-separated tokens of `line`.
pub fn token_starts(line: &str) -> Vec<usize> {
    let bytes = line.as_bytes();
    (0..bytes.len()).filter(|&i| bytes[i] != b' ' && (i == 0 || bytes[i - 1] == b' ')).collect()
}

/// End columns of the whitespace-separated tokens of `line`.
pub fn token_ends(line: &str) -> Vec<usize> {
    let bytes = line.as_bytes();
    (1..=bytes.len()).filter(|&i| bytes[i - 1] != b' ' && (i == bytes.len() || bytes[i] == b' ')).collect()
}

/// The real IOR 4.1 outputs kept as fixtures.
pub fn sample_text() -> &'static str {
    include_str!("../data/ior-4.1-posix-ssf.txt")
}

pub fn sample_json() -> &'static str {
    include_str!("../data/ior-4.1-posix-ssf.json")
}
