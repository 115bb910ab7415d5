//! Collective MPI-IO calls: ROMIO's two-phase rounds as lanefs-core's
//! planner lays them out, moved over the simulated network and written
//! through the aggregators' clients (see the parent module).

use super::{Collective, Ev, PhaseSpec, Run, SimError, St, WorkEv};
use crate::world::transfer;
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::client::OpId;
use lanefs_core::ldlm::GroupId;
use lanefs_core::msg::Payload;
use lanefs_core::units::{Duration, Instant};
use lanefs_mpiio::plan::{self as mplan, CollectiveLocks, CollectivePlan, RoundSchedule};
use lanefs_mpiio::report::MpiioStats;
use rand::Rng;
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// One round of a collective call, in the form the loop moves.
///
/// An aggregator buffers one stripe a round, so it has a piece or two (a
/// stripe's worth of transfers) and one extent in most calls: both are
/// kept inline, since there is one of these per aggregator per round.
#[derive(Clone, Debug, Default)]
pub(super) struct AggRound {
    /// File extents the aggregator writes (or reads) this round.
    extents: SmallVec<[(u64, u64); 1]>,
    /// (source or destination rank, bytes).
    pieces: SmallVec<[(u32, u64); 2]>,
    /// Lock requests before its I/O, from the call's schedule.
    lock_ahead: Vec<Advice>,
    /// A write over holes: the stripe's range is read first
    /// (read-modify-write), while the pieces travel.
    read_first: bool,
    /// When the round's pieces are all in (writing).
    pieces_in: Instant,
}

pub(super) struct CollState {
    pub(super) setup: Collective,
    pub(super) calls: u64,
    pub(super) call: u64,
    pub(super) arrived: u32,
    /// `rounds[r]`: the aggregators with work in round `r`, sorted.
    pub(super) rounds: Vec<Vec<(u32, AggRound)>>,
    pub(super) round: usize,
    /// False while the whole-file group lock before the first lockahead
    /// call is being taken and dropped.
    pub(super) started_rounds: bool,
    /// Aggregators (or, reading, deliveries) the round still waits for.
    pub(super) outstanding: u32,
    /// Aggregator -> ops in flight.
    pub(super) agg_ops: Vec<u32>,
    /// The aggregators' lock requests: the real run's schedule.
    pub(super) locks: CollectiveLocks,
    pub(super) round_started: Instant,
    pub(super) stats: MpiioStats,
    pub(super) agg_of_rank: HashMap<u32, u32>,
}

impl CollState {
    pub(super) fn new(setup: Collective, spec: &PhaseSpec, t0: Instant) -> CollState {
        let aggs = setup.aggregators.len();
        let ahead = if spec.write { AheadMode::Write } else { AheadMode::Read };
        let locks = CollectiveLocks::new(setup.lock, ahead, aggs as u32, spec.stripe_size);
        CollState {
            agg_of_rank: setup.aggregators.iter().enumerate().map(|(i, &r)| (r, i as u32)).collect(),
            stats: MpiioStats::new(aggs as u32, spec.stripe_count, spec.stripe_size),
            setup,
            calls: spec.transfers_per_rank(),
            call: 0,
            arrived: 0,
            rounds: Vec::new(),
            round: 0,
            started_rounds: true,
            outstanding: 0,
            agg_ops: vec![0; aggs],
            locks,
            round_started: t0,
        }
    }
}

impl Run<'_> {
    pub(super) fn coll(&mut self) -> &mut CollState {
        self.coll.as_deref_mut().expect("a collective phase")
    }

    /// A rank enters the current collective call.
    pub(super) fn arrive(&mut self, rank: u32) {
        let now = self.now();
        self.ranks[rank as usize].st = St::Coll;
        self.ranks[rank as usize].timers.arrived = now;
        let ranks = self.job.ranks;
        let coll = self.coll();
        coll.arrived += 1;
        if coll.arrived == ranks {
            coll.arrived = 0;
            let cost = allgather_cost(ranks, self.job.world.model.mpi_latency);
            self.job.world.push(now + cost, Ev::Work(WorkEv::CallStart));
        }
    }

    /// All ranks are in and the offsets exchanged: plan the call, start its rounds.
    pub(super) fn call_start(&mut self) -> Result<(), SimError> {
        let now = self.now();
        let spec = self.spec;
        let n = self.job.ranks;
        let gather = allgather_cost(n, self.job.world.model.mpi_latency).as_secs_f64();
        for r in self.ranks.iter_mut() {
            r.timers.wait_for_coll_s += now.saturating_since(r.timers.arrived).as_secs_f64() - gather;
            r.timers.collective_s += gather;
        }
        let coll = self.coll();
        let call = coll.call;
        let requests: Vec<(u32, u64, u64)> =
            (0..n).map(|r| (r, spec.offset(n, (r + spec.rank_offset) % n, call), spec.transfer)).collect();
        let avail = coll.setup.aggregators.len() as u32;
        let plan = mplan::plan_collective(&requests, spec.stripe_size, avail);
        if spec.write {
            coll.stats.record_collective_write(&plan, u64::from(n));
        } else {
            coll.stats.record_collective_read(&plan, u64::from(n));
        }
        coll.round = 0;
        coll.started_rounds = !coll.locks.begin_call(&plan);
        // The call's schedule, the real run's: which stripe each aggregator
        // does in each round and the lock requests it sends first.
        let schedule = mplan::schedule_call(&plan, &mut coll.locks, spec.write);
        coll.rounds = plan_rounds(&plan, schedule);
        if !coll.started_rounds {
            // Aggregator 0 takes and drops a whole-file group lock, which
            // calls back every cached lock on the file.
            coll.outstanding = 1;
            let agg0 = coll.setup.aggregators[0];
            let (node, fh) = (self.ranks[agg0 as usize].node, self.ranks[agg0 as usize].fh.expect("open"));
            let op = self.job.world.clients[node as usize].group_lock(now, fh, GroupId(u64::MAX));
            self.track(agg0, op);
            self.job.world.pump_client(node);
            return Ok(());
        }
        self.begin_round();
        Ok(())
    }

    /// Start the current round, skipping the empty ones after it: the real
    /// run exchanges nothing in a round without data, and no sizes in any
    /// round (both sides know them from the plan), so a round costs only
    /// its data's travel.
    pub(super) fn begin_round(&mut self) {
        let now = self.now();
        let coll = self.coll();
        while coll.round + 1 < coll.rounds.len() && coll.rounds[coll.round].is_empty() {
            coll.round += 1;
        }
        self.job.world.push(now, Ev::Work(WorkEv::RoundStart));
    }

    pub(super) fn round_start(&mut self) -> Result<(), SimError> {
        let now = self.now();
        let write = self.spec.write;
        let coll = self.coll.as_deref_mut().expect("collective");
        coll.round_started = now;
        let round = std::mem::take(&mut coll.rounds[coll.round]);
        coll.outstanding = round.len() as u32;
        let jitter = self.job.world.model.round_jitter.as_ns();
        let mut rmw = Vec::new();
        for (agg, work) in &round {
            // OS noise and uneven exchange completion (zero unless asked for).
            let delay = Duration(if jitter == 0 { 0 } else { self.job.rng.gen_range(0..jitter) });
            if write {
                let agg_rank = coll.setup.aggregators[*agg as usize];
                let agg_node = self.ranks[agg_rank as usize].node;
                let mut ready = now;
                for &(src, bytes) in &work.pieces {
                    let src_node = self.ranks[src as usize].node;
                    let arrived = self.job.world.mpi_send(src_node, agg_node, bytes);
                    self.ranks[src as usize].timers.data_send_s += arrived.saturating_since(now).as_secs_f64();
                    ready = ready.max(arrived);
                }
                if work.read_first {
                    // The stripe's bytes no rank sends are read first, as
                    // the real run does before its exchange; the write
                    // waits for both (`rmw_read_done`).
                    rmw.push((*agg, agg_rank, ready + delay, work.extents[0]));
                } else {
                    self.job.world.push(ready + delay, Ev::Work(WorkEv::AggReady { agg: *agg }));
                }
            } else {
                self.job.world.push(now + delay, Ev::Work(WorkEv::AggReady { agg: *agg }));
            }
        }
        let empty = round.is_empty();
        let coll = self.coll();
        let r = coll.round;
        coll.rounds[r] = round;
        for (agg, rank, pieces_in, (offset, len)) in rmw {
            self.agg_work_mut(agg).pieces_in = pieces_in;
            let (node, fh) = (self.ranks[rank as usize].node, self.ranks[rank as usize].fh.expect("open"));
            self.ranks[rank as usize].op_started = now;
            let op = self.job.world.clients[node as usize].read(now, fh, offset, len);
            self.track(rank, op);
            self.job.world.pump_client(node);
        }
        if empty {
            return self.round_done();
        }
        Ok(())
    }

    /// An aggregator's read-modify-write read is done: it writes once its
    /// pieces are in too.
    pub(super) fn rmw_read_done(&mut self, agg: u32, rank: u32) {
        let now = self.now();
        let r = &mut self.ranks[rank as usize];
        r.timers.file_write_s += now.saturating_since(r.op_started).as_secs_f64();
        let at = self.agg_work(agg).pieces_in.max(now);
        self.job.world.push(at, Ev::Work(WorkEv::AggReady { agg }));
    }

    fn agg_work_mut(&mut self, agg: u32) -> &mut AggRound {
        let coll = self.coll.as_deref_mut().expect("collective");
        let round = &mut coll.rounds[coll.round];
        let at = round.binary_search_by_key(&agg, |e| e.0).expect("the aggregator has work this round");
        &mut round[at].1
    }

    pub(super) fn agg_work(&mut self, agg: u32) -> &AggRound {
        let coll = self.coll.as_deref().expect("collective");
        let round = &coll.rounds[coll.round];
        let at = round.binary_search_by_key(&agg, |e| e.0).expect("the aggregator has work this round");
        &round[at].1
    }

    /// Aggregator `agg` has its round's data (writing) or may read (reading).
    pub(super) fn agg_ready(&mut self, agg: u32) -> Result<(), SimError> {
        let now = self.now();
        let spec = self.spec;
        let extents = self.agg_work(agg).extents.clone();
        let coll = self.coll.as_deref_mut().expect("collective");
        let rank = coll.setup.aggregators[agg as usize];
        let (node, fh) = (self.ranks[rank as usize].node, self.ranks[rank as usize].fh.expect("open"));
        self.ranks[rank as usize].timers.exchange_s += now.saturating_since(coll.round_started).as_secs_f64();
        if coll.locks.uses_lockahead() {
            self.ranks[rank as usize].timers.lock_mode_used = true;
            let advices = std::mem::take(&mut self.agg_work_mut(agg).lock_ahead);
            if !advices.is_empty() {
                self.advise(rank, &advices)?;
            }
        }
        self.coll().agg_ops[agg as usize] = extents.len() as u32;
        self.ranks[rank as usize].op_started = now;
        let client = &mut self.job.world.clients[node as usize];
        let ids: SmallVec<[OpId; 1]> = if spec.write {
            // ROMIO writes the collective buffer's contiguous pieces one
            // after the other, each copied into the page cache under its
            // lock; the rest follow in `agg_op_done`.
            smallvec::smallvec![client.write_payload(now, fh, extents[0].0, Payload::Phantom(extents[0].1))]
        } else {
            extents.iter().map(|&(off, len)| client.read(now, fh, off, len)).collect()
        };
        for op in ids {
            self.track(rank, op);
        }
        self.job.world.pump_client(node);
        Ok(())
    }

    pub(super) fn agg_op_done(&mut self, agg: u32, rank: u32) -> Result<(), SimError> {
        let coll = self.coll();
        coll.agg_ops[agg as usize] -= 1;
        let left = coll.agg_ops[agg as usize];
        let now = self.now();
        if left > 0 && self.spec.write {
            let extents = &self.agg_work(agg).extents;
            let (off, len) = extents[extents.len() - left as usize];
            let (node, fh) = (self.ranks[rank as usize].node, self.ranks[rank as usize].fh.expect("open"));
            let op = self.job.world.clients[node as usize].write_payload(now, fh, off, Payload::Phantom(len));
            self.track(rank, op);
            self.job.world.pump_client(node);
            return Ok(());
        }
        if left > 0 {
            return Ok(());
        }
        let work = self.agg_work(agg).clone();
        let bytes: u64 = work.extents.iter().map(|e| e.1).sum();
        let r = &mut self.ranks[rank as usize];
        r.timers.bytes += bytes;
        if self.spec.write {
            // The client's time includes the copies into the page cache.
            r.timers.file_write_s += now.saturating_since(r.op_started).as_secs_f64();
            self.job.world.push(now, Ev::Work(WorkEv::AggCopied { agg }));
            return Ok(());
        }
        // The client's time plus the copy from the page cache to the aggregator's buffer.
        let copy = transfer(bytes, self.job.world.model.copy_bw);
        r.timers.file_write_s += now.saturating_since(r.op_started).as_secs_f64() + copy.as_secs_f64();
        let at = now + copy;
        // Reading: send the pieces to their ranks.
        let agg_node = self.ranks[rank as usize].node;
        let mut delivered = at;
        for (dst, b) in work.pieces {
            let dst_node = self.ranks[dst as usize].node;
            let arrived = self.job.world.mpi_send(agg_node, dst_node, b).max(at);
            self.ranks[dst as usize].timers.data_send_s += arrived.saturating_since(at).as_secs_f64();
            delivered = delivered.max(arrived);
        }
        self.job.world.push(delivered, Ev::Work(WorkEv::ReadSent { agg }));
        Ok(())
    }

    /// One aggregator's part of the round (or the opening group lock) is over.
    pub(super) fn round_part_done(&mut self) -> Result<(), SimError> {
        let coll = self.coll();
        coll.outstanding -= 1;
        if coll.outstanding > 0 {
            return Ok(());
        }
        if !coll.started_rounds {
            // The whole-file group lock of the first lockahead call is done.
            coll.started_rounds = true;
            self.begin_round();
            return Ok(());
        }
        self.round_done()
    }

    pub(super) fn round_done(&mut self) -> Result<(), SimError> {
        let now = self.now();
        let spec = self.spec;
        let n = self.job.ranks;
        let coll = self.coll();
        coll.round += 1;
        if coll.round < coll.rounds.len() {
            self.begin_round();
            return Ok(());
        }
        // The call is over for every rank.
        coll.call += 1;
        let last = coll.call == coll.calls;
        for rk in self.ranks.iter_mut() {
            rk.r.bytes += spec.transfer;
            rk.r.transfers += 1;
            rk.next += 1;
            rk.timers.arrived = now;
        }
        if !last {
            let cost = allgather_cost(n, self.job.world.model.mpi_latency);
            self.job.world.push(now + cost, Ev::Work(WorkEv::CallStart));
            return Ok(());
        }
        for r in 0..n {
            self.ranks[r as usize].st = St::Idle;
            self.transfers_done(r)?;
        }
        Ok(())
    }
}

/// An allgather or all-to-all of small messages: `ceil(log2 n)` latencies.
fn allgather_cost(n: u32, latency: Duration) -> Duration {
    let steps = u64::from(32 - n.max(1).saturating_sub(1).leading_zeros());
    Duration(steps * latency.as_ns())
}

/// The rounds of one collective call: for each round, the aggregators with
/// work in it (sorted), each with its system writes, its incoming messages
/// and the lock requests the call's `schedule` gives it.
fn plan_rounds(plan: &CollectivePlan, schedule: Vec<RoundSchedule>) -> Vec<Vec<(u32, AggRound)>> {
    let mut rounds: Vec<BTreeMap<u32, AggRound>> = vec![BTreeMap::new(); plan.round_count() as usize];
    for round in schedule {
        for step in round.steps {
            let w = step.stripe;
            let work = rounds[w.round as usize].entry(w.aggregator).or_default();
            work.extents.push((w.start, w.end - w.start));
            work.lock_ahead = step.lock_ahead;
            work.read_first = step.read_first;
        }
    }
    for m in plan.sends() {
        rounds[m.round as usize].entry(m.aggregator).or_default().pieces.push((m.rank, m.bytes));
    }
    rounds.into_iter().map(|r| r.into_iter().collect()).collect()
}
