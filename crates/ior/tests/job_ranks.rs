//! IOR run as the ranks of a job (`run_as_rank`, as under `mpirun`): each
//! rank runs with its own handle and its own communicator; here the ranks
//! are threads with `ThreadComm`, the same code `MpiComm` serves under
//! Open MPI. Only rank 0 prints; every rank's timers and check counts are
//! gathered; a failing rank ends the job for all, never a hang.

mod common;

use common::{args, MemBackend};
use lanefs_ior::{run_as_rank, Backend, IorError, IorParams, IorSummary, RankIo};
use lanefs_mpiio::ThreadComm;

fn run_job(line: &str, ranks: u32, backend: &(dyn Backend + Sync)) -> Vec<(Result<IorSummary, IorError>, String)> {
    let params = lanefs_ior::parse_args(&args(line)).unwrap();
    let comms = ThreadComm::world(ranks, 2);
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .iter()
            .map(|comm| {
                let params = &params;
                s.spawn(move || {
                    let mut out = Vec::new();
                    let result = run_as_rank(params, backend, &mut out, comm);
                    (result, String::from_utf8(out).unwrap())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn every_rank_runs_its_own_part_and_rank_0_prints_the_job() {
    let backend = MemBackend::default();
    let results = run_job("-a MEM -w -r -W -R -C -b 64k -t 16k -s 3 -N 4 --tasks-per-node 2 -k", 4, &backend);
    let (first, text) = &results[0];
    let first = first.as_ref().unwrap();
    assert!(text.contains("\nwrite ") && text.contains("\nread "), "{text}");
    assert!(text.contains("tasks               : 4"), "{text}");
    assert_eq!(first.data_errors, 0);
    let write = first.iterations[0].write.unwrap();
    assert_eq!(write.agg_bytes, 4 * 3 * 64 * 1024, "every rank's bytes are counted");
    for (result, text) in &results[1..] {
        assert!(text.is_empty(), "only rank 0 prints: {text}");
        assert_eq!(result.as_ref().unwrap().iterations[0].write.unwrap(), write, "every rank reduces the same");
    }
    let files = backend.files.lock().unwrap();
    assert_eq!(files["testFile"].len(), 4 * 3 * 64 * 1024);
}

#[test]
fn a_corrupt_byte_is_counted_once_for_the_job() {
    let backend = MemBackend::corrupting(70_000);
    let results = run_job("-a MEM -w -r -R -b 64k -t 16k -s 1 -N 4 --tasks-per-node 2", 4, &backend);
    for (result, _) in &results {
        assert!(result.as_ref().unwrap().data_errors > 0);
    }
    assert!(results[0].1.contains("WARNING: incorrect data on read"), "{}", results[0].1);
}

/// Writes fail on rank 2.
struct FailingOnRank2(MemBackend);

impl Backend for FailingOnRank2 {
    fn name(&self) -> &'static str {
        "MEM"
    }
    fn rank<'a>(&'a self, rank: u32, p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        let inner = self.0.rank(rank, p)?;
        Ok(Box::new(Failing { inner, fail: rank == 2 }))
    }
    fn delete(&self, path: &str) -> Result<(), IorError> {
        self.0.delete(path)
    }
}

struct Failing<'a> {
    inner: Box<dyn RankIo + 'a>,
    fail: bool,
}

impl RankIo for Failing<'_> {
    fn create(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        self.inner.create(path, p)
    }
    fn open(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        self.inner.open(path, p)
    }
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError> {
        if self.fail {
            return Err(IorError::Backend { backend: "MEM", message: "ENOSPC: the disk is full".into() });
        }
        self.inner.write_at(offset, buf)
    }
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError> {
        self.inner.read_at(offset, buf)
    }
    fn fsync(&mut self) -> Result<(), IorError> {
        self.inner.fsync()
    }
    fn close(&mut self) -> Result<(), IorError> {
        self.inner.close()
    }
}

#[test]
fn a_failing_rank_ends_the_job_for_every_rank_naming_it() {
    let backend = FailingOnRank2(MemBackend::default());
    let results = run_job("-a MEM -w -b 64k -t 16k -N 4", 4, &backend);
    for (result, _) in &results {
        let e = result.as_ref().expect_err("the job fails").to_string();
        assert!(e.starts_with("rank 2: ") && e.contains("ENOSPC"), "{e}");
    }
}

#[test]
fn n_must_be_the_job_size() {
    let backend = MemBackend::default();
    let results = run_job("-a MEM -w -b 64k -t 16k -N 3", 2, &backend);
    let e = results[0].0.as_ref().err().unwrap().to_string();
    assert!(e.contains("the job has 2 ranks"), "{e}");
}
