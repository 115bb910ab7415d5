//! The phases of one repetition — write, write check, read, remove — run on all ranks.
//!
//! What: each phase runs every rank as a scoped thread with its own [`RankIo`], in step
//! through a barrier, as IOR's MPI tasks (`TestIoSys`):
//! - write: remove the old file (unless `-E`), barrier, then per rank: open timer,
//!   `create`, [`-g` barrier], transfer timer around all transfers (+ `-Y` fsync each,
//!   + `-e` fsync at the end), [`-g` barrier], close timer around `close`, barrier;
//! - write check (`-W`): barrier, reopen, read everything back and compare;
//! - read (`-r`, `-R`): barrier, then the same three timers around `open`, the reads
//!   (compared with `-R`) and `close`, with no closing barrier (IOR has none);
//! - remove: barrier, delete (rank 0 for a shared file, every rank its own with `-F`),
//!   barrier; rank 0's elapsed time is the `remove` row.
//!
//! Why a barrier that can be aborted: a rank that fails (an I/O error, a panic in a
//! backend) would leave the others waiting forever at `std::sync::Barrier`. Here the
//! failing rank aborts the barrier, every rank stops, and the run reports the first
//! failing rank's error.
//!
//! Not here: reduction and printing (`run`, `timing`, `output`).

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use crate::backend::{Backend, RankIo};
use crate::error::IorError;
use crate::offsets::{self, NodeMapping};
use crate::params::{IorParams, PacketType};
use crate::pattern;
use crate::timeseries::RankBins;
use crate::timing::{RankPhase, RankTimes, Stonewalled};
use lanefs_mpiio::comm::{decode_u64s, encode_u64s, CommError, Communicator};

/// Buffers are aligned for `O_DIRECT`.
const BUFFER_ALIGN_BYTES: usize = 4096;

/// What every rank of a phase shares.
pub struct Phase<'a> {
    /// The test.
    pub p: &'a IorParams,
    /// The backend (for delete and mkdir).
    pub backend: &'a dyn Backend,
    /// The run's clock; timestamps are seconds since it.
    pub clock: Clock<'a>,
    /// This repetition's data signature.
    pub signature: u32,
    /// The repetition (seeds `-Z` with a negative `-X`).
    pub rep: u32,
    /// Task placement, for `-C`.
    pub mapping: NodeMapping,
    /// Who runs the ranks.
    pub team: Team<'a>,
    /// The transfers after which each rank stops this phase (IOR's
    /// `stoneWallingWearOutIterations`), by rank; empty: `-O
    /// stoneWallingWearOutIterations` for every rank (0: no limit).
    pub stop_after: &'a [u64],
    /// The ranks' bytes over time, when the run records its time series.
    pub series: Option<&'a RankBins>,
}

impl Phase<'_> {
    fn now_s(&self) -> f64 {
        self.clock.now_s()
    }
}

/// Who runs the ranks of a test.
#[derive(Clone, Copy)]
pub enum Team<'a> {
    /// Every rank a thread of this process.
    Threads,
    /// This process is one rank of a job (under `mpirun`): barriers and
    /// the gathering of results go through the communicator.
    World(&'a (dyn Communicator + Sync)),
}

/// The clock of a run: this process's, or seconds since every rank of a
/// job left one barrier together (IOR synchronises its ranks' `MPI_Wtime`
/// the same way before it times anything).
#[derive(Clone, Copy)]
pub enum Clock<'a> {
    Local(Instant),
    World { comm: &'a (dyn Communicator + Sync), base_s: f64 },
}

impl Clock<'_> {
    pub fn now_s(&self) -> f64 {
        match self {
            Clock::Local(start) => start.elapsed().as_secs_f64(),
            Clock::World { comm, base_s } => comm.wtime() - base_s,
        }
    }
}

/// Why a rank stopped.
enum Stop {
    /// It failed.
    Failed(IorError),
    /// Another rank failed and aborted the barrier.
    Aborted,
    /// Another rank of the job failed and told this one (`rank`, why).
    Elsewhere(u32, IorError),
}

/// What a rank waits at.
trait Barrier {
    fn wait(&self) -> Result<(), Stop>;

    /// Every rank's `mine`, in rank order (a collective: every rank calls it).
    fn allgather(&self, rank: u32, mine: &[u64]) -> Result<Vec<Vec<u64>>, Stop>;
}

impl Barrier for PhaseBarrier {
    fn wait(&self) -> Result<(), Stop> {
        PhaseBarrier::wait(self)
    }

    fn allgather(&self, rank: u32, mine: &[u64]) -> Result<Vec<Vec<u64>>, Stop> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)[rank as usize] = mine.to_vec();
        self.wait()?;
        let all = self.slots.lock().unwrap_or_else(PoisonError::into_inner).clone();
        // No rank writes its slot again before every rank has read them all.
        self.wait()?;
        Ok(all)
    }
}

/// The barrier of a job's communicator.
struct CommBarrier<'a>(&'a (dyn Communicator + Sync));

impl Barrier for CommBarrier<'_> {
    fn wait(&self) -> Result<(), Stop> {
        self.0.barrier().map_err(elsewhere)
    }

    fn allgather(&self, _rank: u32, mine: &[u64]) -> Result<Vec<Vec<u64>>, Stop> {
        let all = self.0.allgather_same(&encode_u64s(mine)).map_err(elsewhere)?;
        all.iter()
            .enumerate()
            .map(|(from, bytes)| {
                decode_u64s(from as u32, bytes).map_err(|e| Stop::Failed(IorError::backend("MPI", e.to_string())))
            })
            .collect()
    }
}

fn elsewhere(e: CommError) -> Stop {
    match e {
        CommError::Aborted { rank, reason } => {
            Stop::Elsewhere(rank, IorError::Backend { backend: "MPI", message: reason })
        }
        other => Stop::Failed(IorError::Backend { backend: "MPI", message: other.to_string() }),
    }
}

impl From<IorError> for Stop {
    fn from(error: IorError) -> Self {
        Stop::Failed(error)
    }
}

/// A barrier that a failing rank can abort, with a slot per rank for
/// [`Barrier::allgather`].
struct PhaseBarrier {
    parties: usize,
    state: Mutex<BarrierState>,
    released: Condvar,
    slots: Mutex<Vec<Vec<u64>>>,
}

struct BarrierState {
    arrived: usize,
    generation: u64,
    aborted: bool,
}

impl PhaseBarrier {
    fn new(parties: usize) -> Self {
        PhaseBarrier {
            parties,
            state: Mutex::new(BarrierState { arrived: 0, generation: 0, aborted: false }),
            released: Condvar::new(),
            slots: Mutex::new(vec![Vec::new(); parties]),
        }
    }

    fn wait(&self) -> Result<(), Stop> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.aborted {
            return Err(Stop::Aborted);
        }
        let generation = state.generation;
        state.arrived += 1;
        if state.arrived == self.parties {
            state.arrived = 0;
            state.generation += 1;
            self.released.notify_all();
            return Ok(());
        }
        while state.generation == generation && !state.aborted {
            state = self.released.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        if state.generation == generation {
            return Err(Stop::Aborted);
        }
        Ok(())
    }

    fn abort(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).aborted = true;
        self.released.notify_all();
    }
}

/// Run `body` on every rank: each on its own thread with its own I/O
/// handle, or, for a job's team, on this process's one rank, with every
/// rank's results gathered from the others.
fn on_all_ranks<'r, T, F>(team: Team, ranks: &mut [Box<dyn RankIo + 'r>], body: F) -> Result<Vec<T>, IorError>
where
    T: Send + serde::Serialize + serde::de::DeserializeOwned,
    F: Fn(u32, &mut (dyn RankIo + 'r), &dyn Barrier) -> Result<T, Stop> + Sync,
{
    let Team::World(comm) = team else { return on_threads(ranks, body) };
    let [io] = ranks else { panic!("a rank of a job has one I/O handle, not {}", ranks.len()) };
    let rank = comm.rank();
    let outcome = panic::catch_unwind(AssertUnwindSafe(|| body(rank, io.as_mut(), &CommBarrier(comm))))
        .unwrap_or_else(|payload| Err(Stop::Failed(panicked(payload))));
    let mine = match outcome {
        Ok(value) => value,
        Err(Stop::Failed(error)) => {
            // Under MPI this ends the job (MPI_Abort), as IOR's ERR does.
            comm.abort(&format!("rank {rank}: {error}"));
            return Err(IorError::Rank { rank, source: Box::new(error) });
        }
        Err(Stop::Elsewhere(from, error)) => return Err(IorError::Rank { rank: from, source: Box::new(error) }),
        Err(Stop::Aborted) => unreachable!("a job's barrier is never aborted, only failed"),
    };
    let encoded = serde_json::to_vec(&mine).expect("phase results encode");
    let all = comm.allgather(&encoded).map_err(|e| match elsewhere(e) {
        Stop::Elsewhere(from, error) => IorError::Rank { rank: from, source: Box::new(error) },
        Stop::Failed(error) => error,
        Stop::Aborted => unreachable!("no barrier here"),
    })?;
    all.iter()
        .enumerate()
        .map(|(from, bytes)| {
            serde_json::from_slice(bytes).map_err(|e| IorError::Backend {
                backend: "MPI",
                message: format!("rank {from} sent results that do not decode: {e}"),
            })
        })
        .collect()
}

/// [`on_all_ranks`] with every rank a thread of this process.
fn on_threads<'r, T, F>(ranks: &mut [Box<dyn RankIo + 'r>], body: F) -> Result<Vec<T>, IorError>
where
    T: Send,
    F: Fn(u32, &mut (dyn RankIo + 'r), &dyn Barrier) -> Result<T, Stop> + Sync,
{
    let barrier = PhaseBarrier::new(ranks.len());
    let outcomes: Vec<Result<T, Stop>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ranks
            .iter_mut()
            .enumerate()
            .map(|(rank, io)| {
                let (body, barrier) = (&body, &barrier);
                let rank = rank as u32;
                std::thread::Builder::new()
                    .name(format!("ior-rank-{rank}"))
                    .spawn_scoped(scope, move || {
                        let outcome = panic::catch_unwind(AssertUnwindSafe(|| body(rank, io.as_mut(), barrier)))
                            .unwrap_or_else(|payload| Err(Stop::Failed(panicked(payload))));
                        match &outcome {
                            Err(Stop::Failed(error)) => {
                                // Ranks waiting in the backend's own collectives
                                // (MPI-IO's exchanges) are told too.
                                io.abandon(&format!("rank {rank}: {error}"));
                                barrier.abort();
                            }
                            Err(Stop::Aborted) => io.abandon("another rank failed"),
                            _ => {}
                        }
                        outcome
                    })
                    .expect("cannot start a rank thread")
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|payload| Err(Stop::Failed(panicked(payload))))).collect()
    });
    let mut results = Vec::with_capacity(outcomes.len());
    let mut aborted = false;
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(value) => results.push(value),
            Err(Stop::Failed(error)) => return Err(IorError::Rank { rank: rank as u32, source: Box::new(error) }),
            Err(Stop::Aborted) => aborted = true,
            Err(Stop::Elsewhere(from, error)) => return Err(IorError::Rank { rank: from, source: Box::new(error) }),
        }
    }
    assert!(!aborted, "a barrier was aborted but no rank reported a failure");
    Ok(results)
}

fn panicked(payload: Box<dyn std::any::Any + Send>) -> IorError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    IorError::Backend { backend: "IOR", message: format!("rank thread panicked: {message}") }
}

/// A transfer buffer aligned for `O_DIRECT`.
struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let storage = vec![0u8; len + BUFFER_ALIGN_BYTES];
        let start = storage.as_ptr().align_offset(BUFFER_ALIGN_BYTES);
        assert!(start < BUFFER_ALIGN_BYTES, "cannot align a byte buffer");
        AlignedBuf { storage, start, len }
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}

fn transfer_len(p: &IorParams) -> usize {
    usize::try_from(p.transfer_size_bytes).expect("transfer size fits in memory")
}

/// Result of a data check on one rank.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct CheckOutcome {
    /// Mismatching 8-byte words.
    pub errors: u64,
    /// IOR's description of the first mismatching transfer.
    pub report: Option<String>,
}

/// Compares what a rank reads with what `pretend_rank` wrote.
struct Checker {
    expected: AlignedBuf,
    actual: AlignedBuf,
    packet: PacketType,
    pretend_rank: u32,
    signature: u32,
    rank: u32,
    path: String,
    transfers: u64,
    outcome: CheckOutcome,
}

impl Checker {
    fn new(p: &IorParams, rank: u32, pretend_rank: u32, signature: u32, path: &str) -> Self {
        let mut expected = AlignedBuf::new(transfer_len(p));
        let packet = p.data_packet_type;
        pattern::fill(expected.bytes(), packet, pretend_rank, signature);
        let actual = AlignedBuf::new(transfer_len(p));
        Checker {
            expected,
            actual,
            packet,
            pretend_rank,
            signature,
            rank,
            path: path.to_string(),
            transfers: 0,
            outcome: CheckOutcome::default(),
        }
    }

    fn verify(&mut self, file_offset: u64) {
        self.transfers += 1;
        pattern::stamp(self.expected.bytes(), self.packet, file_offset, self.pretend_rank, self.signature);
        let (expected, actual) = (self.expected.as_slice(), self.actual.as_slice());
        let Some(mismatch) = pattern::compare(expected, actual) else { return };
        self.outcome.errors += mismatch.words;
        if self.outcome.report.is_none() {
            self.outcome.report =
                Some(describe(self.rank, &self.path, self.transfers, file_offset, &mismatch, expected, actual));
        }
    }
}

/// IOR's `CompareBuffers` message for a failed transfer.
fn describe(
    rank: u32,
    path: &str,
    transfer: u64,
    file_offset: u64,
    m: &pattern::Mismatch,
    expected: &[u8],
    actual: &[u8],
) -> String {
    let words = expected.len() / pattern::WORD_BYTES;
    let shown = |buf: &[u8]| {
        let end = (m.first + 4).min(words);
        let mut text: String = (m.first..end).map(|i| format!("{:016x} ", pattern::word(buf, i))).collect();
        if end == words {
            text += "[end of buffer]";
        }
        text
    };
    format!(
        "[{rank}] FAILED comparison of buffer containing 8-byte ints:\n\
         [{rank}]   File name = {path}\n\
         [{rank}]   In transfer {transfer}, {} errors between buffer indices {} and {}.\n\
         [{rank}]   File byte offset = {}:\n\
         [{rank}]     Expected: 0x{}\n\
         [{rank}]     Actual:   0x{}\n",
        m.words,
        m.first,
        m.last,
        file_offset + (m.first * pattern::WORD_BYTES) as u64,
        shown(expected),
        shown(actual),
    )
}

/// The timed write phase: one [`RankPhase`] per rank, and where the
/// stonewall stopped them (with wear-out).
pub fn write(
    ph: &Phase,
    ranks: &mut [Box<dyn RankIo + '_>],
) -> Result<(Vec<RankPhase>, Option<Stonewalled>), IorError> {
    let p = ph.p;
    on_all_ranks(ph.team, ranks, |rank, io, barrier| {
        let path = offsets::test_file_name(p, rank);
        if let Some(dir) = offsets::unique_dir(p, rank) {
            ph.backend.mkdir(&dir)?;
        }
        if !p.use_existing_test_file && (p.file_per_proc || rank == 0) {
            ph.backend.delete(&path)?;
        }
        let mut buf = AlignedBuf::new(transfer_len(p));
        pattern::fill(buf.bytes(), p.data_packet_type, rank, ph.signature);
        barrier.wait()?;
        let mut times = RankTimes { open_start_s: ph.now_s(), ..RankTimes::default() };
        io.create(&path, p)?;
        times.open_stop_s = ph.now_s();
        if p.intra_test_barriers {
            barrier.wait()?;
        }
        times.xfer_start_s = ph.now_s();
        let moved = transfers(ph, (rank, rank), barrier, offsets::offsets(p, rank), |offset| {
            pattern::stamp(buf.bytes(), p.data_packet_type, offset, rank, ph.signature);
            io.write_at(offset, buf.bytes())?;
            if p.fsync_per_write {
                io.fsync()?;
            }
            if let Some(series) = ph.series {
                series.note(rank, true, p.transfer_size_bytes);
            }
            Ok(())
        })?;
        if p.fsync {
            io.fsync()?;
        }
        times.xfer_stop_s = ph.now_s();
        if p.intra_test_barriers {
            barrier.wait()?;
        }
        times.close_start_s = ph.now_s();
        io.close()?;
        times.close_stop_s = ph.now_s();
        barrier.wait()?;
        Ok((RankPhase { times, bytes: moved.bytes, transfers: moved.transfers }, moved.stonewall))
    })
    .map(unzip_stonewall)
}

/// The ranks' phases and rank 0's view of the stonewall.
fn unzip_stonewall<T>(ranks: Vec<(T, Option<Stonewalled>)>) -> (Vec<T>, Option<Stonewalled>) {
    let stonewall = ranks.first().and_then(|r| r.1);
    (ranks.into_iter().map(|r| r.0).collect(), stonewall)
}

/// What one rank's transfers of a phase moved.
struct Moved {
    bytes: u64,
    transfers: u64,
    stonewall: Option<Stonewalled>,
}

/// The transfers after which the rank that reads `whose` data (its own, or
/// the task's whose data `-C`/`-Z` take it to: IOR takes the reading rank's
/// own count, which differs only without wear-out) stops; 0: no limit.
fn stop_after(ph: &Phase, whose: u32) -> u64 {
    match ph.stop_after {
        [] => ph.p.stonewalling_wear_out_iterations,
        by_rank => by_rank.get(whose as usize).copied().unwrap_or(0),
    }
}

/// One rank's transfers at `offsets`, each done by `each`, stopped as IOR's
/// `WriteOrRead` stops them: after `-D` seconds (rank 0's decision for every
/// rank with `-c`, whose collective calls must match), or after the phase's
/// `stop_after` transfers. With wear-out, the ranks then compare counts and
/// each goes on until it has made as many as the rank that made the most.
fn transfers(
    ph: &Phase,
    (rank, whose): (u32, u32),
    barrier: &dyn Barrier,
    mut offsets: impl Iterator<Item = u64>,
    mut each: impl FnMut(u64) -> Result<(), Stop>,
) -> Result<Moved, Stop> {
    let p = ph.p;
    let deadline_s = f64::from(p.deadline_for_stonewalling_s);
    let stop_after = stop_after(ph, whose);
    let start_s = ph.now_s();
    let mut count = 0u64;
    let mut hit = false;
    while !hit {
        let Some(offset) = offsets.next() else { break };
        each(offset)?;
        count += 1;
        hit = (deadline_s > 0.0 && ph.now_s() - start_s > deadline_s) || (stop_after != 0 && count == stop_after);
        if p.collective && deadline_s > 0.0 {
            hit = barrier.allgather(rank, &[u64::from(hit)])?[0][0] != 0;
        }
    }
    let mut stonewall = None;
    if p.stonewalling_wear_out {
        let all = barrier.allgather(rank, &[count, count * p.transfer_size_bytes])?;
        let time_s = ph.now_s() - start_s;
        let counts = all.iter().map(|r| r.first().copied().unwrap_or(0));
        let bytes = all.iter().map(|r| r.get(1).copied().unwrap_or(0));
        let wall = Stonewalled {
            pairs_min: counts.clone().min().unwrap_or(0),
            pairs_max: counts.max().unwrap_or(0),
            bytes_min: bytes.clone().min().unwrap_or(0),
            bytes_total: bytes.sum(),
            time_s,
            ranks: all.len() as u32,
        };
        while count < wall.pairs_max {
            let Some(offset) = offsets.next() else { break };
            each(offset)?;
            count += 1;
        }
        stonewall = Some(wall);
    }
    Ok(Moved { bytes: count * p.transfer_size_bytes, transfers: count, stonewall })
}

/// The untimed read-back of `-W`, shifted by `-C` as IOR does.
pub fn check_write(ph: &Phase, ranks: &mut [Box<dyn RankIo + '_>]) -> Result<Vec<CheckOutcome>, IorError> {
    let p = ph.p;
    let rank_offset = offsets::write_check_rank_offset(p, ph.mapping);
    on_all_ranks(ph.team, ranks, |rank, io, barrier| {
        barrier.wait()?;
        let pretend = offsets::pretend_rank(rank, rank_offset, p.num_tasks);
        let path = offsets::test_file_name(p, pretend);
        let mut checker = Checker::new(p, rank, pretend, ph.signature, &path);
        io.open(&path, p)?;
        let limit = match stop_after(ph, pretend) {
            0 => usize::MAX,
            count => usize::try_from(count).unwrap_or(usize::MAX),
        };
        for offset in offsets::offsets(p, pretend).take(limit) {
            io.read_at(offset, checker.actual.bytes())?;
            checker.verify(offset);
        }
        io.close()?;
        Ok(checker.outcome)
    })
}

/// What each rank of a read phase read and found.
pub type RanksRead = Vec<(RankPhase, CheckOutcome)>;

/// The timed read phase (checked with `-R`), shifted by `-C`; where the
/// stonewall stopped the ranks (with wear-out).
pub fn read(ph: &Phase, ranks: &mut [Box<dyn RankIo + '_>]) -> Result<(RanksRead, Option<Stonewalled>), IorError> {
    let p = ph.p;
    on_all_ranks(ph.team, ranks, |rank, io, barrier| {
        let pretend = offsets::read_pretend_rank(p, ph.mapping, rank, ph.rep);
        let path = offsets::test_file_name(p, pretend);
        let mut checker = Checker::new(p, rank, pretend, ph.signature, &path);
        barrier.wait()?;
        let mut times = RankTimes { open_start_s: ph.now_s(), ..RankTimes::default() };
        io.open(&path, p)?;
        times.open_stop_s = ph.now_s();
        if p.intra_test_barriers {
            barrier.wait()?;
        }
        times.xfer_start_s = ph.now_s();
        let moved = transfers(ph, (rank, pretend), barrier, offsets::offsets(p, pretend), |offset| {
            io.read_at(offset, checker.actual.bytes())?;
            if let Some(series) = ph.series {
                series.note(rank, false, p.transfer_size_bytes);
            }
            if p.check_read {
                checker.verify(offset);
            }
            Ok(())
        })?;
        times.xfer_stop_s = ph.now_s();
        if p.intra_test_barriers {
            barrier.wait()?;
        }
        times.close_start_s = ph.now_s();
        io.close()?;
        times.close_stop_s = ph.now_s();
        let phase = RankPhase { times, bytes: moved.bytes, transfers: moved.transfers };
        Ok(((phase, checker.outcome), moved.stonewall))
    })
    .map(unzip_stonewall)
}

/// Remove the test file(s); rank 0's elapsed seconds, barriers included.
pub fn remove(ph: &Phase, ranks: &mut [Box<dyn RankIo + '_>]) -> Result<f64, IorError> {
    let p = ph.p;
    let elapsed = on_all_ranks(ph.team, ranks, |rank, _io, barrier| {
        let start_s = ph.now_s();
        barrier.wait()?;
        if p.file_per_proc || rank == 0 {
            ph.backend.delete(&offsets::test_file_name(p, rank))?;
        }
        barrier.wait()?;
        Ok(ph.now_s() - start_s)
    })?;
    Ok(elapsed[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn handles(n: usize) -> Vec<Box<dyn RankIo>> {
        (0..n).map(|_| Box::new(crate::dry_run::NoIo) as Box<dyn RankIo>).collect()
    }

    #[test]
    fn barrier_keeps_ranks_in_step() {
        let passed = AtomicUsize::new(0);
        let mut ranks = handles(4);
        let seen = on_threads(&mut ranks, |_, _, barrier| {
            passed.fetch_add(1, Ordering::SeqCst);
            barrier.wait()?;
            let after_first = passed.load(Ordering::SeqCst);
            barrier.wait()?;
            Ok(after_first)
        })
        .unwrap();
        assert_eq!(seen, vec![4, 4, 4, 4]);
    }

    #[test]
    fn a_failing_rank_stops_the_others() {
        let mut ranks = handles(3);
        let error = on_threads(&mut ranks, |rank, _, barrier| {
            if rank == 1 {
                return Err(Stop::Failed(IorError::Backend { backend: "TEST", message: "boom".into() }));
            }
            barrier.wait()?;
            Ok(())
        })
        .unwrap_err();
        assert_eq!(error.to_string(), "rank 1: TEST: boom");
    }

    #[test]
    fn a_panicking_rank_stops_the_others() {
        let mut ranks = handles(2);
        let error = on_threads(&mut ranks, |rank, _, barrier| {
            if rank == 0 {
                panic!("backend bug");
            }
            barrier.wait()?;
            Ok(())
        })
        .unwrap_err();
        assert!(error.to_string().contains("rank 0: IOR: rank thread panicked: backend bug"), "{error}");
    }

    #[test]
    fn buffers_are_page_aligned() {
        let mut buf = AlignedBuf::new(8192);
        assert_eq!(buf.bytes().as_ptr() as usize % BUFFER_ALIGN_BYTES, 0);
        assert_eq!(buf.bytes().len(), 8192);
    }
}
