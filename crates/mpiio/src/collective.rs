//! Two-phase collective I/O carried out: the plan of [`crate::plan`] run
//! through a [`Communicator`] against one rank's handle on the file
//! ([`FileAccess`]).
//!
//! A collective write (`MPI_File_write_at_all`) on every rank:
//! 1. all-gathers every rank's `(offset, length)`, and builds the same
//!    [`CollectivePlan`] on every rank (no rank tells another what to do);
//! 2. for each round with data: every rank sends each aggregator the bytes
//!    of its pieces in the stripe that aggregator writes this round (one
//!    all-to-all), and each aggregator lays them into one stripe buffer and
//!    writes it with one system write; a stripe with holes is read first
//!    (read-modify-write), as ROMIO does;
//! 3. with lockahead, each aggregator asks for its next window of stripes
//!    before it writes outside the one it holds (early, at the low-water
//!    mark, as the simulator's aggregators do), so its writes find their
//!    locks granted; a window reaches no further than the current call's
//!    last byte (ROMIO asks for `num_extents` stripes whatever the file's
//!    size; the simulator limits its windows the same way as here).
//!
//! A collective read runs the other way: aggregators read their stripes and
//! the all-to-all carries each rank its pieces.
//!
//! Lock modes of collective writes ([`CbLockMode`], Cray's
//! `cray_cb_write_lock_mode`): 0 the file system's expanding locks; 1 a
//! group lock that every aggregator takes at its first collective write and
//! keeps until close; 2 lockahead: every rank sets lock-no-expand on its
//! handle at open, aggregator 0 takes and drops a whole-file group lock
//! before the first collective write (every cached lock of the file is
//! called back; ROMIO does it at open, the simulator at the first write, as
//! here), and aggregators lock ahead.
//!
//! Departure from ROMIO: `romio_cb_write=automatic` (the default) buffers
//! every collective call, as `enable` does; ROMIO's Lustre driver would
//! write a call whose ranks' ranges do not interleave independently. The
//! simulator plans every collective call the same way, so that a real run
//! and a simulated one can be compared call for call. `disable` writes each
//! rank's request on its own.
//!
//! Every rank keeps the counters of `MPICH_MPIIO_STATS` (the plan is the
//! same everywhere, so rank 0's counts are the job's) and its own phase
//! times for `MPICH_MPIIO_TIMERS`; [`CollectiveFile::close`] gathers them.

use crate::comm::{decode_u64s, encode_u64s, CommError, Communicator};
use crate::hints::{CbLockMode, CbMode, MpiioHints};
use crate::plan::{
    aggregator_count, aggregator_ranks, plan_collective, read_aggregator_count, schedule_call, CollectiveLocks,
    CollectivePlan, Piece,
};
use crate::report::{MpiioStats, MpiioTimers};
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::units::Duration;
use thiserror::Error;

/// The group id of the whole-file group lock taken and dropped at open
/// before lockahead (the simulator's too).
pub const CLEARING_GROUP_ID: u64 = u64::MAX;

/// The group id aggregators share in lock mode 1.
pub const AGGREGATORS_GROUP_ID: u64 = 1;

/// One rank's handle on the file, as two-phase I/O uses it.
pub trait FileAccess {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), String>;
    /// Fill `buf` from `offset`; bytes past the end of the file read as zeros.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String>;
    /// Asynchronous lock requests (`llapi_ladvise`); per-extent results are
    /// not waited for.
    fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String>;
    /// Ask the OSTs not to expand this handle's locks.
    fn no_expand(&mut self) -> Result<(), String>;
    fn group_lock(&mut self, gid: u64) -> Result<(), String>;
    fn group_unlock(&mut self, gid: u64) -> Result<(), String>;
    fn sync(&mut self) -> Result<(), String>;
}

#[derive(Debug, Error)]
pub enum CollectiveError {
    #[error(transparent)]
    Comm(#[from] CommError),
    #[error("rank {rank}: {operation} failed: {reason}")]
    Io { rank: u32, operation: &'static str, reason: String },
    #[error("rank {rank}: a collective {direction} of {len} bytes at {offset} ends past the largest offset")]
    TooFar { rank: u32, direction: &'static str, offset: u64, len: u64 },
}

/// The file's striping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Striping {
    pub stripe_size: u64,
    pub stripe_count: u32,
}

/// What [`CollectiveFile::close`] gathers from every rank.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CloseReport {
    pub write_stats: MpiioStats,
    pub read_stats: MpiioStats,
    /// The timers of every rank that wrote as an aggregator.
    pub writers: Vec<MpiioTimers>,
    /// Seconds from the first collective write's start to the last one's
    /// end, on rank 0's clock.
    pub write_elapsed_s: f64,
    /// The hints as open resolved them (for the display).
    pub hints: MpiioHints,
}

/// The aggregators of one direction.
struct Aggregators {
    /// Rank of each aggregator index.
    ranks: Vec<u32>,
    /// This rank's index, if it is one.
    mine: Option<u32>,
    /// Their lock requests (this rank makes those of its own index).
    locks: CollectiveLocks,
}

impl Aggregators {
    fn new(comm: &dyn Communicator, avail: u32, lock: CbLockMode, ahead: AheadMode, stripe_size: u64) -> Aggregators {
        let ranks = aggregator_ranks(avail, comm.size(), comm.ranks_per_node());
        let mine = ranks.iter().position(|&r| r == comm.rank()).map(|i| i as u32);
        Aggregators { ranks, mine, locks: CollectiveLocks::new(lock, ahead, avail, stripe_size) }
    }

    fn avail(&self) -> u32 {
        self.ranks.len() as u32
    }
}

/// One rank's collectively opened file (see the module docs).
pub struct CollectiveFile<C: Communicator, F: FileAccess> {
    comm: C,
    file: F,
    striping: Striping,
    hints: MpiioHints,
    write: Aggregators,
    read: Aggregators,
    /// Lock mode 1: the aggregators' group lock is held.
    group_held: bool,
    write_stats: MpiioStats,
    read_stats: MpiioStats,
    timers: MpiioTimers,
    /// First collective write's start and last one's end (`wtime`).
    write_span: Option<(f64, f64)>,
    /// Whether this rank wrote as an aggregator.
    wrote: bool,
    /// An aggregator's stripe buffer, kept from round to round and call to
    /// call (ROMIO's collective buffer): a fresh one each round would cost
    /// the kernel a page fault per page.
    buffer: Vec<u8>,
}

fn seconds(d: f64) -> Duration {
    Duration::from_ns((d.max(0.0) * 1e9) as u64)
}

fn add(total: &mut Duration, more: Duration) {
    *total = Duration::from_ns(total.as_ns().saturating_add(more.as_ns()));
}

impl<C: Communicator, F: FileAccess> CollectiveFile<C, F> {
    /// Open `file` on every rank of `comm` (collective): decide the
    /// aggregators of both directions from `hints` and the file's
    /// striping, and prepare for lockahead if a direction uses it.
    pub fn open(comm: C, mut file: F, striping: Striping, hints: &MpiioHints) -> Result<Self, CollectiveError> {
        let nodes = comm.size().div_ceil(comm.ranks_per_node());
        let write_avail = aggregator_count(comm.size(), nodes, striping.stripe_count, hints);
        let read_avail = read_aggregator_count(comm.size(), nodes, striping.stripe_count, hints);
        let write =
            Aggregators::new(&comm, write_avail, hints.write_lock_mode(), AheadMode::Write, striping.stripe_size);
        let read = Aggregators::new(&comm, read_avail, hints.read_lock_mode(), AheadMode::Read, striping.stripe_size);
        let rank = comm.rank();
        let io = |operation: &'static str| move |reason: String| CollectiveError::Io { rank, operation, reason };
        if hints.lockahead_at_open() {
            file.no_expand().map_err(io("lock-no-expand"))?;
        }
        let resolved = hints.resolved(striping.stripe_count, striping.stripe_size, write_avail);
        Ok(CollectiveFile {
            comm,
            file,
            striping,
            hints: resolved,
            write_stats: MpiioStats::new(write.avail(), striping.stripe_count, striping.stripe_size),
            read_stats: MpiioStats::new(read.avail(), striping.stripe_count, striping.stripe_size),
            write,
            read,
            group_held: false,
            timers: MpiioTimers::default(),
            write_span: None,
            wrote: false,
            buffer: Vec::new(),
        })
    }

    /// The rank of each aggregator of collective writes, by aggregator index.
    pub fn write_aggregators(&self) -> &[u32] {
        &self.write.ranks
    }

    /// The rank of each aggregator of collective reads, by aggregator index.
    pub fn read_aggregators(&self) -> &[u32] {
        &self.read.ranks
    }

    /// The ranks of this file.
    pub fn communicator(&self) -> &C {
        &self.comm
    }

    /// The hints as open resolved them (for `MPICH_MPIIO_HINTS_DISPLAY`).
    pub fn hints(&self) -> &MpiioHints {
        &self.hints
    }

    pub fn file_mut(&mut self) -> &mut F {
        &mut self.file
    }

    fn io_error(&self, operation: &'static str) -> impl Fn(String) -> CollectiveError {
        let rank = self.comm.rank();
        move |reason| CollectiveError::Io { rank, operation, reason }
    }

    /// An error of this rank's own I/O inside a collective: the others are
    /// told (MPI abort), so none waits for it.
    fn fail(&self, e: CollectiveError) -> CollectiveError {
        self.comm.abort(&e.to_string());
        e
    }

    /// `MPI_File_write_at`: this rank alone.
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), CollectiveError> {
        self.file.write_at(offset, data).map_err(self.io_error("write"))?;
        self.write_stats.record_independent(offset, data.len() as u64);
        Ok(())
    }

    /// `MPI_File_read_at`: this rank alone.
    pub fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CollectiveError> {
        self.file.read_at(offset, buf).map_err(self.io_error("read"))?;
        self.read_stats.record_independent(offset, buf.len() as u64);
        Ok(())
    }

    /// Every rank's `(rank, offset, len)` of this call.
    fn gather_requests(
        &self,
        direction: &'static str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<(u32, u64, u64)>, CollectiveError> {
        if offset.checked_add(len).is_none() {
            let e = CollectiveError::TooFar { rank: self.comm.rank(), direction, offset, len };
            return Err(self.fail(e));
        }
        let all = self.comm.allgather_same(&encode_u64s(&[offset, len]))?;
        let mut requests = Vec::with_capacity(all.len());
        for (rank, bytes) in all.iter().enumerate() {
            let rank = rank as u32;
            match decode_u64s(rank, bytes)?[..] {
                [offset, len] if offset.checked_add(len).is_some() => requests.push((rank, offset, len)),
                _ => return Err(CommError::Malformed { rank, got: bytes.len(), expected: 16 }.into()),
            }
        }
        Ok(requests)
    }

    /// `MPI_File_write_at_all`: every rank calls it, each with its own
    /// (possibly empty) `data` at `offset`.
    pub fn write_at_all(&mut self, offset: u64, data: &[u8]) -> Result<(), CollectiveError> {
        let comm = &self.comm;
        let entered = comm.wtime();
        let requests = self.gather_requests("write", offset, data.len() as u64)?;
        let gathered = comm.wtime();
        if self.hints.romio_cb_write == CbMode::Disable {
            if !data.is_empty() {
                self.file.write_at(offset, data).map_err(self.io_error("write")).map_err(|e| self.fail(e))?;
            }
            self.write_stats.record_independent(offset, data.len() as u64);
            return Ok(());
        }
        let plan = plan_collective(&requests, self.striping.stripe_size, self.write.avail());
        self.write_stats.record_collective_write(&plan, u64::from(comm.size()));
        if self.write.locks.begin_call(&plan) {
            // Before the first lockahead, aggregator 0 takes and drops a
            // whole-file group lock: every lock cached on the file is
            // called back, so none stands in the way of the lockahead.
            if self.write.mine == Some(0) {
                let cleared =
                    self.file.group_lock(CLEARING_GROUP_ID).and_then(|()| self.file.group_unlock(CLEARING_GROUP_ID));
                cleared
                    .map_err(self.io_error("the whole-file group lock before lockahead"))
                    .map_err(|e| self.fail(e))?;
            }
            comm.barrier()?;
        }
        if self.write.locks.mode() == CbLockMode::Group && self.write.mine.is_some() && !self.group_held {
            self.file
                .group_lock(AGGREGATORS_GROUP_ID)
                .map_err(self.io_error("group lock"))
                .map_err(|e| self.fail(e))?;
            self.group_held = true;
        }
        let planned = comm.wtime();
        let mut t = PhaseClock::new(&self.comm, planned);
        let mine = my_pieces(&plan, comm.rank());
        let schedule = schedule_call(&plan, &mut self.write.locks, true);
        let n = comm.size() as usize;
        let mut buffer = std::mem::take(&mut self.buffer);
        for round in &schedule {
            // Exchange: my pieces of this round to their aggregators, each
            // straight from my buffer into its stripe buffer.
            let mut to = vec![0..0; n];
            for piece in mine.iter().filter(|m| m.round == round.round) {
                let at = (piece.piece.offset - offset) as usize;
                join(&mut to[self.write.ranks[piece.aggregator as usize] as usize], at..at + piece.piece.len as usize);
            }
            let step = self.write.mine.and_then(|a| round.step_of(a));
            buffer.clear();
            let mut from = vec![0..0; n];
            if let Some(step) = step {
                let write = &step.stripe;
                buffer.resize((write.end - write.start) as usize, 0);
                if step.read_first {
                    // Read-modify-write: the bytes no rank sends are the
                    // file's (read before the exchange, as ROMIO does).
                    t.lap(Phase::Exchange);
                    let read = self.file.read_at(write.start, &mut buffer);
                    read.map_err(self.io_error("read-modify-write read")).map_err(|e| self.fail(e))?;
                    t.lap(Phase::FileWrite);
                }
                for piece in plan.pieces_of(write) {
                    let at = (piece.offset - write.start) as usize;
                    join(&mut from[piece.rank as usize], at..at + piece.len as usize);
                }
            }
            t.lap(Phase::Exchange);
            comm.alltoallv(data, &to, &mut buffer, &from)?;
            t.lap(Phase::DataSend);
            let Some(step) = step else { continue };
            let write = &step.stripe;
            t.lap(Phase::Exchange);
            if self.write.locks.uses_lockahead() {
                if !step.lock_ahead.is_empty() {
                    let sent = self.file.lock_ahead(&step.lock_ahead);
                    sent.map_err(self.io_error("lockahead")).map_err(|e| self.fail(e))?;
                }
                t.lap(Phase::LockMode);
            }
            self.file.write_at(write.start, &buffer).map_err(self.io_error("write")).map_err(|e| self.fail(e))?;
            t.lap(Phase::FileWrite);
            self.timers.bytes += write.end - write.start;
            self.wrote = true;
        }
        self.buffer = buffer;
        let left = comm.wtime();
        let timers = &mut self.timers;
        add(&mut timers.wait_for_coll, seconds(gathered - entered));
        add(&mut timers.collective, seconds(planned - gathered));
        add(&mut timers.exchange_write, t.exchange);
        add(&mut timers.data_send, t.data_send);
        add(&mut timers.file_write, t.file_write);
        if self.write.locks.uses_lockahead() {
            add(timers.lock_mode.get_or_insert(Duration::ZERO), t.lock_mode);
        }
        self.write_span = Some((self.write_span.map_or(entered, |(first, _)| first), left));
        Ok(())
    }

    /// `MPI_File_read_at_all`: every rank calls it, each filling its own
    /// (possibly empty) `buf` from `offset`.
    pub fn read_at_all(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CollectiveError> {
        let comm = &self.comm;
        let requests = self.gather_requests("read", offset, buf.len() as u64)?;
        if self.hints.romio_cb_read == CbMode::Disable {
            if !buf.is_empty() {
                self.file.read_at(offset, buf).map_err(self.io_error("read")).map_err(|e| self.fail(e))?;
            }
            self.read_stats.record_independent(offset, buf.len() as u64);
            return Ok(());
        }
        let plan = plan_collective(&requests, self.striping.stripe_size, self.read.avail());
        self.read_stats.record_collective_read(&plan, u64::from(comm.size()));
        self.read.locks.begin_call(&plan);
        let mine = my_pieces(&plan, comm.rank());
        let schedule = schedule_call(&plan, &mut self.read.locks, false);
        let n = comm.size() as usize;
        let mut buffer = std::mem::take(&mut self.buffer);
        for round in &schedule {
            // Each aggregator reads its stripe, and the exchange carries
            // every rank its pieces straight into its buffer.
            buffer.clear();
            let mut to = vec![0..0; n];
            if let Some(step) = self.read.mine.and_then(|a| round.step_of(a)) {
                let stripe = &step.stripe;
                if !step.lock_ahead.is_empty() {
                    let sent = self.file.lock_ahead(&step.lock_ahead);
                    sent.map_err(self.io_error("lockahead")).map_err(|e| self.fail(e))?;
                }
                buffer.resize((stripe.end - stripe.start) as usize, 0);
                self.file
                    .read_at(stripe.start, &mut buffer)
                    .map_err(self.io_error("read"))
                    .map_err(|e| self.fail(e))?;
                for piece in plan.pieces_of(stripe) {
                    let at = (piece.offset - stripe.start) as usize;
                    join(&mut to[piece.rank as usize], at..at + piece.len as usize);
                }
            }
            let mut from = vec![0..0; n];
            for m in mine.iter().filter(|m| m.round == round.round) {
                let at = (m.piece.offset - offset) as usize;
                join(&mut from[self.read.ranks[m.aggregator as usize] as usize], at..at + m.piece.len as usize);
            }
            comm.alltoallv(&buffer, &to, buf, &from)?;
        }
        self.buffer = buffer;
        Ok(())
    }

    /// `MPI_File_sync`: this rank's writes are durable (collective in MPI;
    /// every rank syncs its own handle, then all meet).
    pub fn sync(&mut self) -> Result<(), CollectiveError> {
        self.file.sync().map_err(self.io_error("sync")).map_err(|e| self.fail(e))?;
        self.comm.barrier()?;
        Ok(())
    }

    /// `MPI_File_close` (collective): the group lock goes, and every rank's
    /// counters and timers are gathered into the report; the handle and the
    /// communicator are given back.
    pub fn close(mut self) -> Result<(CloseReport, F, C), CollectiveError> {
        if self.group_held {
            self.file
                .group_unlock(AGGREGATORS_GROUP_ID)
                .map_err(self.io_error("group unlock"))
                .map_err(|e| self.fail(e))?;
        }
        let comm = &self.comm;
        let independent = [
            self.write_stats.independent_ops,
            self.write_stats.independent_ranks,
            self.read_stats.independent_ops,
            self.read_stats.independent_ranks,
        ];
        let timers = self.timers;
        let mine: Vec<u64> = [
            u64::from(self.wrote),
            timers.wait_for_coll.as_ns(),
            timers.collective.as_ns(),
            timers.exchange_write.as_ns(),
            timers.data_send.as_ns(),
            timers.lock_mode.map_or(u64::MAX, Duration::as_ns),
            timers.file_write.as_ns(),
            timers.bytes,
            self.write_span.map_or(u64::MAX, |(first, _)| first.to_bits()),
            self.write_span.map_or(u64::MAX, |(_, last)| last.to_bits()),
        ]
        .into_iter()
        .chain(independent)
        .collect();
        let all = comm.allgather_same(&encode_u64s(&mine))?;
        let mut report = CloseReport {
            write_stats: self.write_stats.clone(),
            read_stats: self.read_stats.clone(),
            hints: self.hints.clone(),
            ..CloseReport::default()
        };
        report.write_stats.independent_ops = 0;
        report.write_stats.independent_ranks = 0;
        report.read_stats.independent_ops = 0;
        report.read_stats.independent_ranks = 0;
        let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
        for (rank, bytes) in all.iter().enumerate() {
            let v = decode_u64s(rank as u32, bytes)?;
            let [wrote, wait, coll, exch, send, lock, write, bytes, from, to, w_ops, w_ranks, r_ops, r_ranks] = v[..]
            else {
                return Err(CommError::Malformed { rank: rank as u32, got: bytes.len(), expected: 14 * 8 }.into());
            };
            report.write_stats.independent_ops += w_ops;
            report.write_stats.independent_ranks += w_ranks;
            report.read_stats.independent_ops += r_ops;
            report.read_stats.independent_ranks += r_ranks;
            if from != u64::MAX {
                first = first.min(f64::from_bits(from));
                last = last.max(f64::from_bits(to));
            }
            if wrote == 1 {
                report.writers.push(MpiioTimers {
                    wait_for_coll: Duration::from_ns(wait),
                    collective: Duration::from_ns(coll),
                    exchange_write: Duration::from_ns(exch),
                    data_send: Duration::from_ns(send),
                    lock_mode: (lock != u64::MAX).then(|| Duration::from_ns(lock)),
                    file_write: Duration::from_ns(write),
                    other: Duration::ZERO,
                    bytes,
                });
            }
        }
        report.write_elapsed_s = if first.is_finite() { last - first } else { 0.0 };
        for w in &mut report.writers {
            let phases = [w.wait_for_coll, w.collective, w.exchange_write, w.data_send, w.file_write];
            let busy: u64 = phases.iter().chain(w.lock_mode.iter()).map(|d| d.as_ns()).sum();
            w.other = Duration::from_ns(seconds(report.write_elapsed_s).as_ns().saturating_sub(busy));
        }
        Ok((report, self.file, self.comm))
    }
}

/// One of this rank's pieces, with the round and aggregator it goes to.
struct MyPiece {
    round: u64,
    aggregator: u32,
    piece: Piece,
}

/// Adds `next` to the range `part` of an exchange. A rank's request is one
/// range of the file, so what it has in one stripe is one range too, and
/// pieces are joined in offset order: `next` starts where `part` ends.
fn join(part: &mut std::ops::Range<usize>, next: std::ops::Range<usize>) {
    if part.start == part.end {
        *part = next;
    } else {
        assert_eq!(part.end, next.start, "a rank's pieces in one stripe are one range");
        part.end = part.end.max(next.end);
    }
}

/// This rank's pieces in `(round, offset)` order: the order in which it
/// sends them to (or receives them from) each round's aggregators, which
/// lay out each stripe's pieces in offset order too.
fn my_pieces(plan: &CollectivePlan, rank: u32) -> Vec<MyPiece> {
    let avail = u64::from(plan.aggregators());
    let mut mine: Vec<MyPiece> = plan
        .pieces()
        .iter()
        .filter(|p| p.rank == rank)
        .map(|&piece| {
            let stripe = piece.offset / plan.stripe_size();
            let round = (stripe - plan.first_stripe()) / avail;
            MyPiece { round, aggregator: (stripe % avail) as u32, piece }
        })
        .collect();
    mine.sort_by_key(|m| (m.round, m.piece.offset));
    mine
}

#[derive(Clone, Copy)]
enum Phase {
    Exchange,
    DataSend,
    LockMode,
    FileWrite,
}

/// Splits a rank's time in a collective call into Cray's phases.
struct PhaseClock<'a> {
    comm: &'a dyn Communicator,
    last: f64,
    exchange: Duration,
    data_send: Duration,
    lock_mode: Duration,
    file_write: Duration,
}

impl<'a> PhaseClock<'a> {
    fn new(comm: &'a dyn Communicator, now: f64) -> Self {
        PhaseClock {
            comm,
            last: now,
            exchange: Duration::ZERO,
            data_send: Duration::ZERO,
            lock_mode: Duration::ZERO,
            file_write: Duration::ZERO,
        }
    }

    /// The time since the last lap was spent in `phase`.
    fn lap(&mut self, phase: Phase) {
        let now = self.comm.wtime();
        let spent = seconds(now - self.last);
        self.last = now;
        let slot = match phase {
            Phase::Exchange => &mut self.exchange,
            Phase::DataSend => &mut self.data_send,
            Phase::LockMode => &mut self.lock_mode,
            Phase::FileWrite => &mut self.file_write,
        };
        add(slot, spent);
    }
}
