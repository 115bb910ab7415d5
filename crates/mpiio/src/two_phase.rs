//! Two-phase collective I/O as one rank carries it out. [`TwoPhase`] holds
//! a rank's state of a collectively opened file; its operations are
//! `async` over a [`RankIo`]: the rank's communicator and its handle on the
//! file, with data either real bytes or [`Phantom`] lengths.
//!
//! - On real MPI and a real file system ([`crate::CollectiveFile`]) every
//!   operation of the `RankIo` blocks and is done when it returns, so the
//!   futures finish in one poll.
//! - The discrete-event simulator polls each rank's futures as its answers
//!   come in virtual time, with [`Phantom`] data: an exchange waits until
//!   every rank with a part in it has posted it and its messages have
//!   crossed the simulated network, a write until the rank's client has
//!   it. A rank leaves out the exchanges it has no part in
//!   ([`RankIo::skips_empty_exchanges`]), and the ranks share the call's
//!   requests, plan and aggregator list, so that a call costs each rank
//!   its own part, not the job's (75,000 ranks).
//!
//! So the simulator and `mpirun` run the same rounds, the same lock
//! requests at the same points, the same read-modify-write reads, and time
//! Cray's phases with the same clock laps (`MPI_Wtime`, or virtual time).
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
//!    mark), so its writes find their locks granted; a window reaches no
//!    further than the current call's last byte (ROMIO asks for
//!    `num_extents` stripes whatever the file's size).
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
//! called back; ROMIO does it at open), and aggregators lock ahead.
//!
//! Departure from ROMIO: `romio_cb_write=automatic` (the default) buffers
//! every collective call, as `enable` does; ROMIO's Lustre driver would
//! write a call whose ranks' ranges do not interleave independently. The
//! simulator plans every collective call the same way, so that a real run
//! and a simulated one can be compared call for call.
//! `disable` writes each rank's request on its own.
//!
//! Every rank keeps the counters of `MPICH_MPIIO_STATS` (the plan is the
//! same everywhere, so rank 0's counts are the job's) and its own phase
//! times for `MPICH_MPIIO_TIMERS`; [`TwoPhase::close`] gathers them.

use crate::comm::{decode_u64s, encode_u64s, CommError};
use crate::hints::{CbLockMode, CbMode, MpiioHints};
use crate::plan::{
    aggregator_count, aggregator_ranks, plan_collective, read_aggregator_count, schedule_aggregator, AggregatorStep,
    CollectiveLocks, CollectivePlan,
};
use crate::report::{MpiioStats, MpiioTimers};
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::units::Duration;
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;
use thiserror::Error;

/// The group id of the whole-file group lock taken and dropped at open
/// before lockahead (the simulator's too).
pub const CLEARING_GROUP_ID: u64 = u64::MAX;

/// The group id aggregators share in lock mode 1.
pub const AGGREGATORS_GROUP_ID: u64 = 1;

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

/// What [`TwoPhase::close`] gathers from every rank.
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

/// A run of bytes a rank contributes or receives: `[u8]` in the real
/// world, [`Phantom`] in a world that moves no bytes.
pub trait Bytes {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Bytes for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
}

/// An aggregator's stripe buffer, kept from round to round and call to call
/// (ROMIO's collective buffer).
pub trait StripeBuffer: Default {
    type Data: Bytes + ?Sized;
    /// `len` bytes that the caller overwrites in full before it reads any:
    /// a stripe without holes from its pieces, or a read of the file
    /// (which fills past the file's end with zeros). What the buffer held
    /// may remain until then.
    fn refill(&mut self, len: usize);
    fn data(&self) -> &Self::Data;
    fn data_mut(&mut self) -> &mut Self::Data;
}

/// Real bytes. Zeroed only where the buffer grows: clearing it every round
/// would cost a pass over a stripe per round (a fresh allocation, the
/// kernel's page faults), and every byte is overwritten anyway.
#[derive(Debug, Default)]
pub struct StripeBytes {
    /// Every byte the buffer has held: the longest stripe so far.
    bytes: Vec<u8>,
    /// The current stripe's length.
    len: usize,
}

impl StripeBuffer for StripeBytes {
    type Data = [u8];
    fn refill(&mut self, len: usize) {
        if self.bytes.len() < len {
            self.bytes.resize(len, 0);
        }
        self.len = len;
    }
    fn data(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }
}

/// Bytes a world does not carry (a model of the machine): only how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phantom(pub usize);

impl Bytes for Phantom {
    fn len(&self) -> usize {
        self.0
    }
}

impl StripeBuffer for Phantom {
    type Data = Phantom;
    fn refill(&mut self, len: usize) {
        self.0 = len;
    }
    fn data(&self) -> &Phantom {
        self
    }
    fn data_mut(&mut self) -> &mut Phantom {
        self
    }
}

/// The data type of a [`RankIo`].
pub type DataOf<I> = <<I as RankIo>::Buffer as StripeBuffer>::Data;

/// Which exchange of a file an all-to-all is: its collective call (counted
/// from open, both directions), its round, and whether it carries a
/// write's pieces to the aggregators or a read's back. MPI matches
/// collectives by order and needs none of it; a world that lets ranks
/// leave out exchanges they have no part in matches by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExchangeId {
    pub call: u64,
    pub round: u64,
    pub writing: bool,
}

/// A range of this rank's buffer that goes to (or comes from) one rank.
pub type Part = (u32, Range<usize>);

/// Every rank's `(rank, offset, len)` of a collective call, shared.
pub type Requests = Rc<Vec<(u32, u64, u64)>>;

/// Decodes an all-gather of every rank's `(offset, len)` as little-endian
/// `u64`s into the call's requests.
pub fn decode_requests(all: &[Vec<u8>]) -> Result<Vec<(u32, u64, u64)>, CommError> {
    let mut requests = Vec::with_capacity(all.len());
    for (rank, bytes) in all.iter().enumerate() {
        let rank = rank as u32;
        let malformed = || CommError::Malformed { rank, got: bytes.len(), expected: 16 };
        let (offset, len) = bytes.split_at_checked(8).ok_or_else(malformed)?;
        let word = |b: &[u8]| b.try_into().map(u64::from_le_bytes).map_err(|_| malformed());
        let (offset, len) = (word(offset)?, word(len)?);
        if offset.checked_add(len).is_none() {
            return Err(malformed());
        }
        requests.push((rank, offset, len));
    }
    Ok(requests)
}

/// One rank's communicator and handle on the file, as two-phase I/O uses
/// them (see the module docs). The operations mirror
/// [`crate::Communicator`] and [`crate::FileAccess`].
// The futures are polled on the thread that made them (once, in the real
// world; by an event loop), so no `Send` bound is wanted.
#[allow(async_fn_in_trait)]
pub trait RankIo {
    type Buffer: StripeBuffer;
    fn rank(&self) -> u32;
    fn size(&self) -> u32;
    /// Ranks on each node, as they were placed. At least 1.
    fn ranks_per_node(&self) -> u32;
    /// Seconds on a clock every rank shares (`MPI_Wtime`).
    fn wtime(&self) -> f64;
    /// This rank cannot go on: end the collective for every rank.
    fn abort(&self, reason: &str);
    /// The plan of a call from every rank's request. Every rank makes the
    /// same one; a world where ranks share memory may make it once.
    fn plan(&mut self, requests: &Requests, stripe_size: u64, avail: u32) -> Rc<CollectivePlan> {
        Rc::new(plan_collective(requests, stripe_size, avail))
    }
    /// The rank of each of `avail` aggregators ([`aggregator_ranks`]); the
    /// same on every rank, so a world may share it.
    fn aggregator_ranks(&mut self, avail: u32) -> Arc<[u32]> {
        aggregator_ranks(avail, self.size(), self.ranks_per_node()).into()
    }
    /// Whether a rank may leave out an exchange it sends and receives
    /// nothing in. MPI's collectives need every rank (false); a world that
    /// matches exchanges by [`ExchangeId`] and knows who takes part in each
    /// from the plan may let a rank go straight to its next one.
    fn skips_empty_exchanges(&self) -> bool {
        false
    }
    async fn barrier(&mut self) -> Result<(), CommError>;
    /// Every rank's `(rank, offset, len)` of a collective call: an
    /// all-gather of this rank's `offset` and `len`.
    async fn gather_requests(&mut self, offset: u64, len: u64) -> Result<Requests, CommError> {
        let all = self.allgather_same(&encode_u64s(&[offset, len])).await?;
        decode_requests(&all).map(Rc::new)
    }
    /// Every rank's `mine` (all of one length), in rank order. Shared: a
    /// world where ranks share memory may hand every rank the same one.
    async fn allgather_same(&mut self, mine: &[u8]) -> Result<Rc<Vec<Vec<u8>>>, CommError>;
    /// [`crate::Communicator::alltoallv`], given only the ranks this one
    /// sends to (`to`) and receives from (`from`), each once, in rank order.
    async fn alltoallv(
        &mut self,
        exchange: ExchangeId,
        send: &DataOf<Self>,
        to: &[Part],
        recv: &mut DataOf<Self>,
        from: &[Part],
    ) -> Result<(), CommError>;
    async fn write_at(&mut self, offset: u64, data: &DataOf<Self>) -> Result<(), String>;
    /// Fill `buf` from `offset`; bytes past the end of the file read as zeros.
    async fn read_at(&mut self, offset: u64, buf: &mut DataOf<Self>) -> Result<(), String>;
    /// Asynchronous lock requests; per-extent results are not waited for.
    async fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String>;
    async fn no_expand(&mut self) -> Result<(), String>;
    async fn group_lock(&mut self, gid: u64) -> Result<(), String>;
    async fn group_unlock(&mut self, gid: u64) -> Result<(), String>;
    async fn sync(&mut self) -> Result<(), String>;
}

/// The aggregators of one direction.
struct Aggregators {
    /// Rank of each aggregator index.
    ranks: Arc<[u32]>,
    /// This rank's index, if it is one.
    mine: Option<u32>,
    /// Their lock requests (this rank makes those of its own index).
    locks: CollectiveLocks,
}

impl Aggregators {
    fn new(rank: u32, ranks: Arc<[u32]>, lock: CbLockMode, ahead: AheadMode, stripe: u64) -> Self {
        let avail = ranks.len() as u32;
        let mine = ranks.iter().position(|&r| r == rank).map(|i| i as u32);
        Aggregators { ranks, mine, locks: CollectiveLocks::new(lock, ahead, avail, stripe) }
    }

    fn avail(&self) -> u32 {
        self.ranks.len() as u32
    }
}

/// One rank's state of a collectively opened file (see the module docs).
pub struct TwoPhase<B: StripeBuffer> {
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
    /// Collective calls so far, both directions ([`ExchangeId::call`]).
    calls: u64,
    buffer: B,
}

fn seconds(d: f64) -> Duration {
    Duration::from_ns((d.max(0.0) * 1e9) as u64)
}

fn add(total: &mut Duration, more: Duration) {
    *total = Duration::from_ns(total.as_ns().saturating_add(more.as_ns()));
}

fn io_error(rank: u32, operation: &'static str) -> impl Fn(String) -> CollectiveError {
    move |reason| CollectiveError::Io { rank, operation, reason }
}

/// An error of this rank's own I/O inside a collective: the others are told
/// (MPI abort), so none waits for it.
fn fail<I: RankIo + ?Sized>(io: &I, e: CollectiveError) -> CollectiveError {
    io.abort(&e.to_string());
    e
}

impl<B: StripeBuffer> TwoPhase<B> {
    /// Open on every rank (collective): decide the aggregators of both
    /// directions from `hints` and the file's striping, and prepare for
    /// lockahead if a direction uses it.
    pub async fn open<I: RankIo<Buffer = B>>(
        io: &mut I,
        striping: Striping,
        hints: &MpiioHints,
    ) -> Result<Self, CollectiveError> {
        let (rank, size) = (io.rank(), io.size());
        let nodes = size.div_ceil(io.ranks_per_node());
        let write_avail = aggregator_count(size, nodes, striping.stripe_count, hints);
        let read_avail = read_aggregator_count(size, nodes, striping.stripe_count, hints);
        let stripe = striping.stripe_size;
        let write_ranks = io.aggregator_ranks(write_avail);
        let write = Aggregators::new(rank, write_ranks, hints.write_lock_mode(), AheadMode::Write, stripe);
        let read_ranks = io.aggregator_ranks(read_avail);
        let read = Aggregators::new(rank, read_ranks, hints.read_lock_mode(), AheadMode::Read, stripe);
        if hints.lockahead_at_open() {
            io.no_expand().await.map_err(io_error(rank, "lock-no-expand"))?;
        }
        let resolved = hints.resolved(striping.stripe_count, striping.stripe_size, write_avail);
        Ok(TwoPhase {
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
            calls: 0,
            buffer: B::default(),
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

    /// The hints as open resolved them (for `MPICH_MPIIO_HINTS_DISPLAY`).
    pub fn hints(&self) -> &MpiioHints {
        &self.hints
    }

    /// Count an independent write (`MPI_File_write_at`) made by this rank.
    pub fn record_independent_write(&mut self, offset: u64, len: u64) {
        self.write_stats.record_independent(offset, len);
    }

    /// Count an independent read (`MPI_File_read_at`) made by this rank.
    pub fn record_independent_read(&mut self, offset: u64, len: u64) {
        self.read_stats.record_independent(offset, len);
    }

    /// Every rank's `(rank, offset, len)` of this call.
    async fn gather_requests<I: RankIo<Buffer = B>>(
        io: &mut I,
        direction: &'static str,
        offset: u64,
        len: u64,
    ) -> Result<Requests, CollectiveError> {
        if offset.checked_add(len).is_none() {
            let e = CollectiveError::TooFar { rank: io.rank(), direction, offset, len };
            return Err(fail(io, e));
        }
        Ok(io.gather_requests(offset, len).await?)
    }

    /// The rounds of a call this rank takes part in: every round with data,
    /// or, where the world lets it leave out empty exchanges, those it
    /// sends or receives in.
    fn my_rounds<I: RankIo<Buffer = B>>(
        io: &I,
        plan: &CollectivePlan,
        pieces: &[MyPiece],
        steps: &[AggregatorStep],
    ) -> Vec<u64> {
        if !io.skips_empty_exchanges() {
            return plan.busy_rounds().collect();
        }
        let mut rounds: Vec<u64> = pieces.iter().map(|p| p.round).chain(steps.iter().map(|s| s.stripe.round)).collect();
        rounds.sort_unstable();
        rounds.dedup();
        rounds
    }

    /// `MPI_File_write_at_all`: every rank calls it, each with its own
    /// (possibly empty) `data` at `offset`.
    pub async fn write_at_all<I: RankIo<Buffer = B>>(
        &mut self,
        io: &mut I,
        offset: u64,
        data: &B::Data,
    ) -> Result<(), CollectiveError> {
        let rank = io.rank();
        let entered = io.wtime();
        let requests = Self::gather_requests(io, "write", offset, data.len() as u64).await?;
        let gathered = io.wtime();
        if self.hints.romio_cb_write == CbMode::Disable {
            if !data.is_empty() {
                io.write_at(offset, data).await.map_err(io_error(rank, "write")).map_err(|e| fail(io, e))?;
            }
            self.write_stats.record_independent(offset, data.len() as u64);
            return Ok(());
        }
        let plan = io.plan(&requests, self.striping.stripe_size, self.write.avail());
        let call = self.calls;
        self.calls += 1;
        if rank == 0 {
            // The plan is the same everywhere: rank 0 counts for the job.
            self.write_stats.record_collective_write(&plan, u64::from(io.size()));
        }
        if self.write.locks.begin_call(&plan) {
            // Before the first lockahead, aggregator 0 takes and drops a
            // whole-file group lock: every lock cached on the file is
            // called back, so none stands in the way of the lockahead.
            if self.write.mine == Some(0) {
                let mut cleared = io.group_lock(CLEARING_GROUP_ID).await;
                if cleared.is_ok() {
                    cleared = io.group_unlock(CLEARING_GROUP_ID).await;
                }
                cleared
                    .map_err(io_error(rank, "the whole-file group lock before lockahead"))
                    .map_err(|e| fail(io, e))?;
            }
            io.barrier().await?;
        }
        if self.write.locks.mode() == CbLockMode::Group && self.write.mine.is_some() && !self.group_held {
            io.group_lock(AGGREGATORS_GROUP_ID).await.map_err(io_error(rank, "group lock")).map_err(|e| fail(io, e))?;
            self.group_held = true;
        }
        let planned = io.wtime();
        let mut t = PhaseClock::new(planned);
        let mine = my_pieces(&plan, offset, data.len() as u64);
        let steps = my_steps(&plan, &mut self.write.locks, true, self.write.mine);
        let rounds = Self::my_rounds(io, &plan, &mine, &steps);
        let (mut pieces, mut steps) = (mine.iter().peekable(), steps.iter().peekable());
        let mut parts = Parts::default();
        let mut buffer = std::mem::take(&mut self.buffer);
        for round in rounds {
            // Exchange: my pieces of this round to their aggregators, each
            // straight from my buffer into its stripe buffer.
            parts.clear();
            while let Some(piece) = pieces.next_if(|p| p.round == round) {
                let at = (piece.offset - offset) as usize;
                parts.send(self.write.ranks[piece.aggregator as usize], at..at + piece.len as usize);
            }
            let step = steps.next_if(|s| s.stripe.round == round);
            buffer.refill(0);
            if let Some(step) = step {
                let write = &step.stripe;
                buffer.refill((write.end - write.start) as usize);
                if step.read_first {
                    // Read-modify-write: the bytes no rank sends are the
                    // file's (read before the exchange, as ROMIO does).
                    t.lap(io.wtime(), Phase::Exchange);
                    let read = io.read_at(write.start, buffer.data_mut()).await;
                    read.map_err(io_error(rank, "read-modify-write read")).map_err(|e| fail(io, e))?;
                    t.lap(io.wtime(), Phase::FileWrite);
                }
                for piece in plan.pieces_of(write) {
                    let at = (piece.offset - write.start) as usize;
                    parts.receive(piece.rank, at..at + piece.len as usize);
                }
            }
            t.lap(io.wtime(), Phase::Exchange);
            parts.sort();
            let exchange = ExchangeId { call, round, writing: true };
            io.alltoallv(exchange, data, &parts.to, buffer.data_mut(), &parts.from).await?;
            t.lap(io.wtime(), Phase::DataSend);
            let Some(step) = step else { continue };
            let write = &step.stripe;
            if self.write.locks.uses_lockahead() {
                if !step.lock_ahead.is_empty() {
                    let sent = io.lock_ahead(&step.lock_ahead).await;
                    sent.map_err(io_error(rank, "lockahead")).map_err(|e| fail(io, e))?;
                }
                t.lap(io.wtime(), Phase::LockMode);
            }
            io.write_at(write.start, buffer.data()).await.map_err(io_error(rank, "write")).map_err(|e| fail(io, e))?;
            t.lap(io.wtime(), Phase::FileWrite);
            self.timers.bytes += write.end - write.start;
            self.wrote = true;
        }
        self.buffer = buffer;
        let left = io.wtime();
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
    pub async fn read_at_all<I: RankIo<Buffer = B>>(
        &mut self,
        io: &mut I,
        offset: u64,
        buf: &mut B::Data,
    ) -> Result<(), CollectiveError> {
        let rank = io.rank();
        let requests = Self::gather_requests(io, "read", offset, buf.len() as u64).await?;
        if self.hints.romio_cb_read == CbMode::Disable {
            if !buf.is_empty() {
                io.read_at(offset, buf).await.map_err(io_error(rank, "read")).map_err(|e| fail(io, e))?;
            }
            self.read_stats.record_independent(offset, buf.len() as u64);
            return Ok(());
        }
        let plan = io.plan(&requests, self.striping.stripe_size, self.read.avail());
        let call = self.calls;
        self.calls += 1;
        if rank == 0 {
            self.read_stats.record_collective_read(&plan, u64::from(io.size()));
        }
        self.read.locks.begin_call(&plan);
        let mine = my_pieces(&plan, offset, buf.len() as u64);
        let steps = my_steps(&plan, &mut self.read.locks, false, self.read.mine);
        let rounds = Self::my_rounds(io, &plan, &mine, &steps);
        let (mut pieces, mut steps) = (mine.iter().peekable(), steps.iter().peekable());
        let mut parts = Parts::default();
        let mut buffer = std::mem::take(&mut self.buffer);
        for round in rounds {
            // Each aggregator reads its stripe, and the exchange carries
            // every rank its pieces straight into its buffer.
            parts.clear();
            buffer.refill(0);
            if let Some(step) = steps.next_if(|s| s.stripe.round == round) {
                let stripe = &step.stripe;
                if !step.lock_ahead.is_empty() {
                    let sent = io.lock_ahead(&step.lock_ahead).await;
                    sent.map_err(io_error(rank, "lockahead")).map_err(|e| fail(io, e))?;
                }
                buffer.refill((stripe.end - stripe.start) as usize);
                let read = io.read_at(stripe.start, buffer.data_mut()).await;
                read.map_err(io_error(rank, "read")).map_err(|e| fail(io, e))?;
                for piece in plan.pieces_of(stripe) {
                    let at = (piece.offset - stripe.start) as usize;
                    parts.send(piece.rank, at..at + piece.len as usize);
                }
            }
            while let Some(piece) = pieces.next_if(|p| p.round == round) {
                let at = (piece.offset - offset) as usize;
                parts.receive(self.read.ranks[piece.aggregator as usize], at..at + piece.len as usize);
            }
            parts.sort();
            let exchange = ExchangeId { call, round, writing: false };
            io.alltoallv(exchange, buffer.data(), &parts.to, buf, &parts.from).await?;
        }
        self.buffer = buffer;
        Ok(())
    }

    /// `MPI_File_sync`: this rank's writes are durable (collective in MPI;
    /// every rank syncs its own handle, then all meet).
    pub async fn sync<I: RankIo<Buffer = B>>(&mut self, io: &mut I) -> Result<(), CollectiveError> {
        io.sync().await.map_err(io_error(io.rank(), "sync")).map_err(|e| fail(io, e))?;
        io.barrier().await?;
        Ok(())
    }

    /// `MPI_File_close` (collective): the group lock goes, and every rank's
    /// counters and timers are gathered into the job's report, which rank 0
    /// gets (`None` on the others, which need not read every rank's).
    pub async fn close<I: RankIo<Buffer = B>>(self, io: &mut I) -> Result<Option<CloseReport>, CollectiveError> {
        if self.group_held {
            io.group_unlock(AGGREGATORS_GROUP_ID)
                .await
                .map_err(io_error(io.rank(), "group unlock"))
                .map_err(|e| fail(io, e))?;
        }
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
        let all = io.allgather_same(&encode_u64s(&mine)).await?;
        if io.rank() != 0 {
            return Ok(None);
        }
        let mut report = CloseReport {
            write_stats: self.write_stats,
            read_stats: self.read_stats,
            hints: self.hints,
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
        Ok(Some(report))
    }
}

/// One of this rank's pieces: the part of its request in one stripe, with
/// the round and aggregator of that stripe.
struct MyPiece {
    round: u64,
    aggregator: u32,
    offset: u64,
    len: u64,
}

/// This rank's pieces of a call, `len` bytes at `offset`, in `(round,
/// offset)` order: the order in which it sends them to (or receives them
/// from) each round's aggregators, which lay out each stripe's pieces in
/// offset order too. They are the plan's pieces of this rank: its request
/// cut at stripe boundaries.
fn my_pieces(plan: &CollectivePlan, offset: u64, len: u64) -> Vec<MyPiece> {
    let (stripe_size, avail) = (plan.stripe_size(), u64::from(plan.aggregators()));
    let end = offset + len;
    let mut mine = Vec::new();
    let mut at = offset;
    while at < end {
        let stripe = at / stripe_size;
        let next = ((stripe + 1) * stripe_size).min(end);
        let round = (stripe - plan.first_stripe()) / avail;
        mine.push(MyPiece { round, aggregator: (stripe % avail) as u32, offset: at, len: next - at });
        at = next;
    }
    mine.sort_by_key(|m| (m.round, m.offset));
    mine
}

/// This rank's steps as aggregator `mine` of a call (none if it is not one).
fn my_steps(
    plan: &CollectivePlan,
    locks: &mut CollectiveLocks,
    writing: bool,
    mine: Option<u32>,
) -> Vec<AggregatorStep> {
    mine.map_or_else(Vec::new, |a| schedule_aggregator(plan, locks, writing, a))
}

/// The parts of one exchange: the ranks this one sends to and receives
/// from, each with its range of this rank's buffer. A rank's request is one
/// range of the file, so it has one piece per stripe, and sends to (or
/// receives from) each rank once a round.
#[derive(Default)]
struct Parts {
    to: Vec<Part>,
    from: Vec<Part>,
}

impl Parts {
    fn clear(&mut self) {
        self.to.clear();
        self.from.clear();
    }

    /// `range` of this rank's buffer goes to `rank`.
    fn send(&mut self, rank: u32, range: Range<usize>) {
        self.to.push((rank, range));
    }

    /// `range` of this rank's buffer comes from `rank`.
    fn receive(&mut self, rank: u32, range: Range<usize>) {
        self.from.push((rank, range));
    }

    /// Both lists in rank order.
    fn sort(&mut self) {
        self.to.sort_unstable_by_key(|p| p.0);
        self.from.sort_unstable_by_key(|p| p.0);
    }
}

#[derive(Clone, Copy)]
enum Phase {
    Exchange,
    DataSend,
    LockMode,
    FileWrite,
}

/// Splits a rank's time in a collective call into Cray's phases.
struct PhaseClock {
    last: f64,
    exchange: Duration,
    data_send: Duration,
    lock_mode: Duration,
    file_write: Duration,
}

impl PhaseClock {
    fn new(now: f64) -> Self {
        PhaseClock {
            last: now,
            exchange: Duration::ZERO,
            data_send: Duration::ZERO,
            lock_mode: Duration::ZERO,
            file_write: Duration::ZERO,
        }
    }

    /// The time from the last lap to `now` was spent in `phase`.
    fn lap(&mut self, now: f64, phase: Phase) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    #[test]
    fn a_stripe_buffer_is_zeroed_only_where_it_grows() {
        let mut b = StripeBytes::default();
        b.refill(8);
        assert_eq!(b.data(), &[0; 8]);
        b.data_mut().fill(7);
        b.refill(4);
        assert_eq!(b.data(), &[7; 4], "a shorter stripe keeps what the caller overwrites");
        b.refill(12);
        assert_eq!(b.data(), &[7, 7, 7, 7, 7, 7, 7, 7, 0, 0, 0, 0], "new bytes are zeros, never uninitialised");
        b.refill(0);
        assert!(b.data().is_empty());
    }

    /// One rank alone, moving no bytes: what it asks of its file.
    #[derive(Default)]
    struct PhantomRank {
        log: Vec<String>,
    }

    impl RankIo for PhantomRank {
        type Buffer = Phantom;
        fn rank(&self) -> u32 {
            0
        }
        fn size(&self) -> u32 {
            1
        }
        fn ranks_per_node(&self) -> u32 {
            1
        }
        fn wtime(&self) -> f64 {
            0.0
        }
        fn abort(&self, reason: &str) {
            panic!("aborted: {reason}");
        }
        async fn barrier(&mut self) -> Result<(), CommError> {
            Ok(())
        }
        async fn allgather_same(&mut self, mine: &[u8]) -> Result<Rc<Vec<Vec<u8>>>, CommError> {
            Ok(Rc::new(vec![mine.to_vec()]))
        }
        async fn alltoallv(
            &mut self,
            _: ExchangeId,
            send: &Phantom,
            to: &[Part],
            recv: &mut Phantom,
            from: &[Part],
        ) -> Result<(), CommError> {
            let (to, from) = (&to[0].1, &from[0].1);
            assert!(to.end <= send.0 && from.end <= recv.0, "{to:?} of {send:?}, {from:?} of {recv:?}");
            self.log.push(format!("exchange {}", to.len()));
            Ok(())
        }
        async fn write_at(&mut self, offset: u64, data: &Phantom) -> Result<(), String> {
            self.log.push(format!("write {offset}+{}", data.0));
            Ok(())
        }
        async fn read_at(&mut self, offset: u64, buf: &mut Phantom) -> Result<(), String> {
            self.log.push(format!("read {offset}+{}", buf.0));
            Ok(())
        }
        async fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String> {
            self.log.push(format!("lockahead {}", advices.len()));
            Ok(())
        }
        async fn no_expand(&mut self) -> Result<(), String> {
            self.log.push("no-expand".into());
            Ok(())
        }
        async fn group_lock(&mut self, gid: u64) -> Result<(), String> {
            self.log.push(format!("group lock {gid}"));
            Ok(())
        }
        async fn group_unlock(&mut self, gid: u64) -> Result<(), String> {
            self.log.push(format!("group unlock {gid}"));
            Ok(())
        }
        async fn sync(&mut self) -> Result<(), String> {
            self.log.push("sync".into());
            Ok(())
        }
    }

    fn now<T>(future: impl Future<Output = T>) -> T {
        match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("a phantom rank alone never waits"),
        }
    }

    #[test]
    fn phantom_data_takes_the_path_real_bytes_take() {
        // Lockahead with one rank, the only aggregator: 2.5 MiB from 512
        // KiB over 1 MiB stripes. The whole-file group lock clears the way,
        // one lockahead request asks for the call's three stripes, and each
        // stripe's data (no holes within it) is exchanged and written.
        let mib = 1usize << 20;
        let hints = MpiioHints::from_pairs(&[("cray_cb_write_lock_mode", "2")]).unwrap();
        let striping = Striping { stripe_size: mib as u64, stripe_count: 2 };
        let mut io = PhantomRank::default();
        let mut file = now(TwoPhase::<Phantom>::open(&mut io, striping, &hints)).unwrap();
        assert_eq!(file.write_aggregators(), &[0]);
        now(file.write_at_all(&mut io, mib as u64 / 2, &Phantom(5 * mib / 2))).unwrap();
        now(file.read_at_all(&mut io, 0, &mut Phantom(mib))).unwrap();
        let report = now(file.close(&mut io)).unwrap().expect("rank 0's report");
        let half = mib / 2;
        let expected = [
            "no-expand".to_string(),
            format!("group lock {CLEARING_GROUP_ID}"),
            format!("group unlock {CLEARING_GROUP_ID}"),
            format!("exchange {half}"),
            "lockahead 3".into(),
            format!("write {half}+{half}"),
            format!("exchange {mib}"),
            format!("write {mib}+{mib}"),
            format!("exchange {mib}"),
            format!("write {}+{mib}", 2 * mib),
            format!("read 0+{mib}"),
            format!("exchange {mib}"),
        ];
        assert_eq!(io.log, expected);
        assert_eq!(report.write_stats.total_bytes, 5 * mib as u64 / 2);
        assert_eq!(report.writers.len(), 1);
        assert_eq!(report.writers[0].bytes, 5 * mib as u64 / 2);
    }
}
