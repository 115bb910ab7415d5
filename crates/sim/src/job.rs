//! IOR's ranks as programs on the simulated machine.
//!
//! Independent I/O (`-a POSIX`, or `-a MPIIO` without `-c`, or any `-F` run):
//! every rank opens its file, sets up its lock mode, and makes its transfers
//! one after the other through its node's client: each write waits for the
//! client (a lock, room under the dirty limit, the copy of the transfer into
//! the page cache at the copy bandwidth, made under the lock). `-e` fsyncs,
//! then the rank closes.
//!
//! Collective I/O (`-a MPIIO -c` on a shared file) runs lanefs-mpiio's
//! two-phase I/O, the code `mpirun` runs, on every rank (see
//! [`collective`]): each IOR transfer is one collective call of all ranks,
//! whose all-gather, all-to-alls, lock requests and stripe writes (or
//! reads) take virtual time on the simulated network and clients. The
//! statistics and timers it prints are the ones that code gathers at close.
//!
//! Lock modes: independent runs take `LockMode`; collective runs take the
//! MPI-IO hints' mode (default expanding locks, a group lock held by the
//! aggregators, or lockahead), as lanefs-mpiio carries it out.

mod collective;
mod inode_locks;

use crate::cpu_ledger::CpuUse;
use crate::mds::Mds;
use crate::mpi_waits;
use crate::world::{plus, transfer, Ev, Happening, World};
use collective::CollState;
use inode_locks::InodeLocks;
use lanefs_core::client::ladvise::{Advice, AheadMode, AheadSchedule, IoLockMode as LockMode};
use lanefs_core::client::{ClientError, FileHandle, LadviseOutcome, OpId, OpOutput};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::GroupId;
use lanefs_core::msg::Payload;
use lanefs_core::units::{Duration, Instant, ObjectId, ObjectKey, OstIndex};
use lanefs_mpiio::hints::MpiioHints;
use lanefs_mpiio::{CloseReport, CollectiveError};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap as HashMap;

/// The collective-buffering setup of a file for one phase, from the hints.
#[derive(Clone, Debug)]
pub struct Collective {
    /// Aggregator `i` is rank `aggregators[i]` (as lanefs-mpiio places
    /// them; for the placement display).
    pub aggregators: Vec<u32>,
    /// The file's hints, which the ranks' two-phase code opens it with.
    pub hints: MpiioHints,
}

/// One component of a composite test file: the bytes below `end`
/// (`u64::MAX`: the end of the file) on `count` stripes of `size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimComponent {
    pub end: u64,
    pub count: u32,
    pub size: u64,
}

/// One phase of one repetition.
#[derive(Clone, Debug)]
pub struct PhaseSpec {
    pub write: bool,
    pub transfer: u64,
    pub block: u64,
    pub segments: u64,
    pub file_per_proc: bool,
    pub fsync: bool,
    pub fsync_per_write: bool,
    /// Rank `r` does the I/O of rank `(r + rank_offset) % ranks` (IOR's `-C`).
    pub rank_offset: u32,
    pub lock: LockMode,
    pub collective: Option<Collective>,
    pub stripe_count: u32,
    pub stripe_size: u64,
    /// A composite (PFL) test file's components, in file order; empty for
    /// a plain one (`stripe_count` and `stripe_size` are then the last
    /// component's, which MPI-IO plans with).
    pub components: Vec<SimComponent>,
    /// The file (or, with `-F`, the first of the files) this phase uses.
    pub file_id: u64,
}

impl PhaseSpec {
    fn transfers_per_rank(&self) -> u64 {
        self.segments * (self.block / self.transfer)
    }

    /// IOR's offset of transfer `k` of pretend rank `pr` among `n` ranks.
    fn offset(&self, n: u32, pr: u32, k: u64) -> u64 {
        let per_block = self.block / self.transfer;
        let (segment, j) = (k / per_block, k % per_block);
        if self.file_per_proc {
            j * self.transfer + segment * self.block
        } else {
            j * self.transfer + segment * u64::from(n) * self.block + u64::from(pr) * self.block
        }
    }
}

/// What one rank did in a phase, in simulated time.
#[derive(Clone, Copy, Debug, Default)]
pub struct RankResult {
    pub open_start: Instant,
    pub open_stop: Instant,
    pub xfer_start: Instant,
    pub xfer_stop: Instant,
    pub close_start: Instant,
    pub close_stop: Instant,
    pub bytes: u64,
    pub transfers: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("rank {rank}: {error}")]
    Client { rank: u32, error: ClientError },
    #[error(
        "the simulation stalled at {at} with {stuck} of {ranks} ranks unfinished (no event left to run); \
         this is a lanefs bug: please report it with the command line"
    )]
    Stalled { at: Instant, stuck: u32, ranks: u32 },
    #[error("{0}")]
    Setup(String),
    #[error("collective MPI-IO, rank {rank}: {error}")]
    Collective { rank: u32, error: CollectiveError },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Idle,
    /// Waiting for the metadata server's answer to open/create.
    Opening,
    /// Waiting for the group lock.
    Grouping,
    /// Waiting for a write/read op or a fsync.
    Op,
    /// Copying the transfer between the user buffer and the page cache
    /// (a read's, and its requests back through a mount).
    Copy,
    /// A write's requests going through the mount to the client.
    Mount,
    /// A write through the mount waiting for the file's inode, which
    /// another rank's write on the node holds.
    Inode,
    /// A write through the mount whose call is returning: it lets go of
    /// the file's inode, then goes on as [`St::Copy`].
    Returning,
    Fsync,
    Ungrouping,
    Closing,
    /// Waiting for the metadata server's answer to close.
    ClosingMds,
    /// In a collective call.
    Coll,
    Done,
}

struct Rank {
    node: u32,
    st: St,
    fh: Option<FileHandle>,
    next: u64,
    r: RankResult,
    /// Ops in flight for this rank.
    ops: u32,
}

/// What a workload event is about.
#[derive(Clone, Copy, Debug)]
pub enum WorkEv {
    /// A rank's local step is over (start skew, MDS round trip, copy).
    Resume { rank: u32 },
    /// The answer to a rank's collective operation is due: its program goes on.
    Answer { rank: u32 },
    /// A rank waiting in MPI wakes from a sleep of `pause` in its wait
    /// number `wait` (see [`crate::mpi_waits`]).
    MpiWake { rank: u32, wait: u32, pause: Duration },
}

/// The job: IOR's ranks on a simulated machine.
pub struct Job {
    pub world: World<WorkEv>,
    pub ranks: u32,
    pub ranks_per_node: u32,
    rng: ChaCha8Rng,
    /// Start skew of each rank at a phase start: uniform in [0, skew).
    pub skew: Duration,
    /// What the last collective phase's close gathered: its MPI-IO
    /// statistics and the aggregators' timers.
    pub last_report: Option<CloseReport>,
    /// Show a progress bar on stderr when a phase runs longer than a second.
    pub progress: bool,
    /// The metadata server the opens go to.
    pub mds: Mds,
}

type OpKey = (u32, u64);

impl Job {
    pub fn new(world: World<WorkEv>, ranks: u32, ranks_per_node: u32, rng: ChaCha8Rng) -> Job {
        let skew = world.model.latency;
        let mds = Mds::new(world.model.mds_create, world.model.mds_open);
        Job { world, ranks, ranks_per_node, rng, skew, last_report: None, progress: false, mds }
    }

    pub fn node_of(&self, rank: u32) -> u32 {
        rank / self.ranks_per_node
    }

    /// The layout of file `id` (with `-F`, rank files are `id + rank`): stripes
    /// allocated round robin from OST `(id * count) mod osts`, as the MDS does.
    pub fn layout(&self, spec: &PhaseSpec, file: u64) -> Layout {
        let osts = self.world.model.ost_count();
        if !spec.components.is_empty() {
            // Each component's stripes follow the previous one's round the
            // OSTs; object ids apart from every plain file's.
            let total: u64 = spec.components.iter().map(|c| u64::from(c.count)).sum();
            let start = (file * total) % u64::from(osts);
            let mut next = 0u64;
            let parts = spec
                .components
                .iter()
                .map(|c| {
                    let objects = (0..c.count)
                        .map(|_| {
                            let ost = OstIndex(((start + next) % u64::from(osts)) as u32);
                            next += 1;
                            ObjectKey { ost, object: ObjectId((1 << 48) | (file << 12) | next) }
                        })
                        .collect();
                    (c.end, c.size, objects)
                })
                .collect();
            return Layout::composite(parts).expect("components are checked before the run");
        }
        let start = ((file * u64::from(spec.stripe_count)) % u64::from(osts)) as u32;
        let objects = (0..spec.stripe_count)
            .map(|i| ObjectKey { ost: OstIndex((start + i) % osts), object: ObjectId(file) })
            .collect();
        Layout::new(spec.stripe_size, objects).expect("stripe settings are checked before the run")
    }

    fn mds_rtt(&self) -> Duration {
        Duration(2 * self.world.model.latency.as_ns())
    }

    /// Run one phase to its end; every rank's timestamps and counts.
    pub fn run_phase(&mut self, spec: &PhaseSpec) -> Result<Vec<RankResult>, SimError> {
        let t0 = self.world.now;
        let mut ranks: Vec<Rank> = (0..self.ranks)
            .map(|r| Rank { node: self.node_of(r), st: St::Idle, fh: None, next: 0, r: RankResult::default(), ops: 0 })
            .collect();
        for r in 0..self.ranks {
            let skew = if self.skew.as_ns() == 0 { 0 } else { self.rng.gen_range(0..self.skew.as_ns()) };
            self.world.push(t0 + Duration(skew), Ev::Work(WorkEv::Resume { rank: r }));
        }
        let model = &self.world.model;
        let spin = model.mpi_sleep_waits.then(|| mpi_waits::spin(model.mpi_test));
        let mut coll = spec.collective.clone().map(|setup| CollState::new(setup, self.ranks, spin));
        let mut ops: HashMap<OpKey, u32> = HashMap::default();
        let mut done = 0u32;
        let total_bytes = u64::from(self.ranks) * spec.transfers_per_rank() * spec.transfer;
        let mut bar = Bar::new(self.progress, total_bytes, spec.write);
        let shared_layout = (!spec.file_per_proc).then(|| self.layout(spec, spec.file_id));
        let mut run = Run {
            job: self,
            shared_layout,
            spec,
            ranks: &mut ranks,
            ops: &mut ops,
            coll: coll.as_mut(),
            done: &mut done,
            inodes: None,
        };
        let model = &run.job.world.model;
        if spec.write && !spec.file_per_proc && model.mount_request.is_some() && model.mount_serial_writes {
            run.inodes = Some(InodeLocks::new(run.job.world.clients.len() as u32));
        }
        let mut steps = 0u64;
        while *run.done < run.job.ranks {
            steps += 1;
            if steps.is_multiple_of(4096) {
                let w = &run.job.world;
                let moved: u64 = w.osts.iter().map(|o| o.counters()).map(|c| c.bytes_written + c.bytes_read).sum();
                bar.update(moved, w.now);
            }
            let Some(h) = run.job.world.next_happening() else {
                let stuck = run.job.ranks - *run.done;
                return Err(SimError::Stalled { at: run.job.world.now, stuck, ranks: run.job.ranks });
            };
            match h {
                Happening::Work(w) => run.work(w)?,
                Happening::OpDone { node, op, result } => {
                    let rank = run.ops.remove(&(node, op.0)).expect("every op has its rank");
                    let output = result.map_err(|error| SimError::Client { rank, error })?;
                    run.op_done(rank, output)?;
                }
            }
        }
        bar.finish();
        self.last_report = coll.and_then(|c| c.report);
        Ok(ranks.into_iter().map(|r| r.r).collect())
    }
}

/// A progress bar of bytes through the OSTs, shown once a phase has taken a
/// second of wall time (and only when asked for: not in JSON or quiet runs).
/// Where stderr is no terminal (a log file, a batch job's output), a plain
/// line instead, then another every [`Bar::PLAIN_EVERY`].
struct Bar {
    on: bool,
    started: std::time::Instant,
    total: u64,
    base: Option<u64>,
    bar: Option<indicatif::ProgressBar>,
    write: bool,
    /// Wall time into the phase of the next plain line; `None` on a terminal.
    plain_due: Option<std::time::Duration>,
}

impl Bar {
    const PLAIN_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    fn new(on: bool, total: u64, write: bool) -> Bar {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let plain_due = (on && !terminal).then_some(std::time::Duration::from_secs(1));
        Bar { on, started: std::time::Instant::now(), total, base: None, bar: None, write, plain_due }
    }

    fn update(&mut self, moved: u64, now: Instant) {
        if !self.on {
            return;
        }
        let base = *self.base.get_or_insert(moved);
        if let Some(due) = self.plain_due {
            let elapsed = self.started.elapsed();
            if elapsed >= due {
                self.plain_due = Some(elapsed + Self::PLAIN_EVERY);
                let line = format!(
                    "simulating {}: {} of {}, simulated {:.2} s",
                    if self.write { "write" } else { "read" },
                    indicatif::HumanBytes(moved.saturating_sub(base).min(self.total)),
                    indicatif::HumanBytes(self.total),
                    now.as_secs_f64()
                );
                // Progress is no reason to fail a run: a closed stderr only loses it.
                use std::io::Write as _;
                let _ = writeln!(std::io::stderr(), "{line}");
            }
            return;
        }
        if self.bar.is_none() && self.started.elapsed().as_secs_f64() >= 1.0 {
            let bar =
                indicatif::ProgressBar::with_draw_target(Some(self.total), indicatif::ProgressDrawTarget::stderr());
            let style = indicatif::ProgressStyle::with_template(
                "{prefix} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {msg}",
            )
            .expect("a valid template");
            bar.set_style(style);
            bar.set_prefix(if self.write { "simulating write" } else { "simulating read" });
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_position(moved.saturating_sub(base).min(self.total));
            bar.set_message(format!("simulated {now}"));
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

struct Run<'a> {
    job: &'a mut Job,
    /// The shared file's layout, made once (every rank's client holds it).
    shared_layout: Option<Layout>,
    spec: &'a PhaseSpec,
    ranks: &'a mut Vec<Rank>,
    ops: &'a mut HashMap<OpKey, u32>,
    coll: Option<&'a mut CollState>,
    done: &'a mut u32,
    /// Where the ranks of a node write one file through its mount: the
    /// writes, one at a time.
    inodes: Option<InodeLocks>,
}

impl Run<'_> {
    fn now(&self) -> Instant {
        self.job.world.now
    }

    fn resume_at(&mut self, at: Instant, rank: u32) {
        self.job.world.push(at, Ev::Work(WorkEv::Resume { rank }));
    }

    fn track(&mut self, rank: u32, op: OpId) {
        let node = self.ranks[rank as usize].node;
        self.ranks[rank as usize].ops += 1;
        self.ops.insert((node, op.0), rank);
    }

    fn client_err(rank: u32, error: ClientError) -> SimError {
        SimError::Client { rank, error }
    }

    fn pretend(&self, rank: u32) -> u32 {
        (rank + self.spec.rank_offset) % self.job.ranks
    }

    fn work(&mut self, w: WorkEv) -> Result<(), SimError> {
        match w {
            WorkEv::Resume { rank } => self.resume(rank),
            WorkEv::Answer { rank } => match self.answered(rank) {
                true => self.poll_rank(rank),
                false => Ok(()),
            },
            WorkEv::MpiWake { rank, wait, pause } => self.mpi_wake(rank, wait, pause),
        }
    }

    /// A rank's timer or step ended: move its program on.
    fn resume(&mut self, rank: u32) -> Result<(), SimError> {
        let now = self.now();
        let st = self.ranks[rank as usize].st;
        match st {
            St::Idle => {
                self.ranks[rank as usize].r.open_start = now;
                self.ranks[rank as usize].st = St::Opening;
                let latency = self.job.world.model.latency;
                let served = self.job.mds.open(now + latency, self.file_of(rank));
                if self.job.world.check {
                    self.job.mds.check_invariants();
                }
                self.resume_at(served + latency, rank);
            }
            St::Opening => self.opened(rank)?,
            St::Returning => {
                // The write call returned: the next writer through the
                // mount takes the inode.
                self.ranks[rank as usize].st = St::Copy;
                let node = self.ranks[rank as usize].node;
                let inodes = self.inodes.as_mut().expect("only a write that holds the inode returns so");
                let next = inodes.give(node, rank);
                if self.job.world.check {
                    inodes.check_invariants();
                }
                if let Some(next) = next {
                    self.through_mount(next);
                }
                self.resume(rank)?;
            }
            St::Copy if self.spec.write && self.spec.fsync_per_write => {
                // -Y: a fsync after every write call, then the next transfer.
                let (node, fh) = (self.ranks[rank as usize].node, self.ranks[rank as usize].fh.expect("open"));
                let op = self.job.world.clients[node as usize].fsync(now, fh);
                self.track(rank, op);
                self.ranks[rank as usize].st = St::Op;
                self.job.world.pump_client(node);
            }
            St::Copy => {
                self.ranks[rank as usize].st = St::Idle;
                self.next_transfer(rank)?;
            }
            St::Mount => self.submit_transfer(rank)?,
            St::ClosingMds => {
                let r = &mut self.ranks[rank as usize];
                r.r.close_stop = now;
                r.st = St::Done;
                *self.done += 1;
            }
            other => unreachable!("rank {rank} resumed in state {other:?}"),
        }
        Ok(())
    }

    /// The file rank `rank` opens: its own with `-F`, else the one shared.
    fn file_of(&self, rank: u32) -> u64 {
        match self.spec.file_per_proc {
            true => self.spec.file_id + u64::from(self.pretend(rank)),
            false => self.spec.file_id,
        }
    }

    fn opened(&mut self, rank: u32) -> Result<(), SimError> {
        let spec = self.spec;
        let file = self.file_of(rank);
        let layout = match &self.shared_layout {
            Some(l) if !spec.file_per_proc => l.clone(),
            _ => self.job.layout(spec, file),
        };
        let node = self.ranks[rank as usize].node;
        let fh = self.job.world.clients[node as usize].open(layout);
        self.ranks[rank as usize].fh = Some(fh);
        if self.coll.is_some() {
            let r = &mut self.ranks[rank as usize];
            r.r.open_stop = self.job.world.now;
            r.r.xfer_start = r.r.open_stop;
            return self.start_collective(rank);
        }
        match spec.lock {
            LockMode::Default => {}
            LockMode::NoExpand => self.advise(rank, &[Advice::lock_no_expand(true)])?,
            LockMode::Lockahead => {
                self.advise(rank, &[Advice::lock_no_expand(true)])?;
            }
            LockMode::Group if spec.write => return self.group_lock(rank, fh),
            LockMode::Group => {}
        }
        self.job.world.pump_client(node);
        self.open_done(rank)
    }

    fn group_lock(&mut self, rank: u32, fh: FileHandle) -> Result<(), SimError> {
        let (now, node) = (self.now(), self.ranks[rank as usize].node);
        let op = self.job.world.clients[node as usize].group_lock(now, fh, GroupId(1));
        self.track(rank, op);
        self.ranks[rank as usize].st = St::Grouping;
        self.job.world.pump_client(node);
        Ok(())
    }

    fn advise(&mut self, rank: u32, advices: &[Advice]) -> Result<(), SimError> {
        let (now, node) = (self.now(), self.ranks[rank as usize].node);
        let fh = self.ranks[rank as usize].fh.expect("advice on an open file");
        match self.job.world.clients[node as usize].ladvise(now, fh, advices) {
            Ok(LadviseOutcome::Results(_)) => {}
            Ok(LadviseOutcome::Pending { op, .. }) => self.track(rank, op),
            Err(e) => return Err(Run::client_err(rank, e)),
        }
        self.job.world.pump_client(node);
        Ok(())
    }

    fn open_done(&mut self, rank: u32) -> Result<(), SimError> {
        let now = self.now();
        let r = &mut self.ranks[rank as usize];
        r.r.open_stop = now;
        r.r.xfer_start = now;
        r.st = St::Idle;
        self.next_transfer(rank)
    }

    /// Independent I/O: the next transfer, or the end of the transfers.
    fn next_transfer(&mut self, rank: u32) -> Result<(), SimError> {
        let spec = self.spec;
        let n = self.job.ranks;
        let pr = self.pretend(rank);
        let total = spec.transfers_per_rank();
        let r = &self.ranks[rank as usize];
        let (node, k) = (r.node, r.next);
        if k == total {
            return self.transfers_done(rank);
        }
        if spec.write && spec.lock == LockMode::Lockahead {
            // As lanefs's IOR backend does: lock-ahead locks for a window
            // of the rank's next transfers at a time, the window a share of
            // its client's LRU among the node's ranks.
            let client = &self.job.world.clients[node as usize];
            let schedule = AheadSchedule::new(
                total,
                spec.transfer,
                spec.stripe_size,
                spec.stripe_count,
                client.config().lru_locks_max,
                self.job.ranks_per_node,
            );
            let due = schedule.before(k);
            if !due.is_empty() {
                let advices: Vec<Advice> = due
                    .map(|i| {
                        let off = spec.offset(n, pr, i);
                        Advice::lockahead(AheadMode::Write, off, off + spec.transfer - 1, true)
                    })
                    .collect();
                self.advise(rank, &advices)?;
            }
        }
        // A write through a mount goes through it even where its requests
        // cost nothing (`request_us = 0`): the file's inode lock is held
        // for the whole write all the same, and [`St::Returning`] gives it
        // back.
        let mounted = self.inodes.is_some() || self.job.world.model.mount_time(spec.transfer) > Duration::ZERO;
        if spec.write && mounted {
            if let Some(inodes) = self.inodes.as_mut() {
                if !inodes.take(node, rank) {
                    // Another rank's write to the file holds its inode.
                    self.ranks[rank as usize].st = St::Inode;
                    return Ok(());
                }
            }
            self.through_mount(rank);
            return Ok(());
        }
        self.submit_transfer(rank)
    }

    /// Rank `rank`'s write goes through the mount: its requests reach the
    /// client one by one, each after its own time.
    fn through_mount(&mut self, rank: u32) {
        let (now, node) = (self.now(), self.ranks[rank as usize].node);
        let mount = self.job.world.model.mount_time(self.spec.transfer);
        let at = self.job.world.node_cpu(node, now, mount, CpuUse::Mount);
        self.ranks[rank as usize].st = St::Mount;
        self.resume_at(at, rank);
    }

    /// Hands the rank's next transfer to its node's client.
    fn submit_transfer(&mut self, rank: u32) -> Result<(), SimError> {
        let spec = self.spec;
        let (now, pr) = (self.now(), self.pretend(rank));
        let r = &self.ranks[rank as usize];
        let (node, fh, k) = (r.node, r.fh.expect("open"), r.next);
        let off = spec.offset(self.job.ranks, pr, k);
        let client = &mut self.job.world.clients[node as usize];
        let op = if spec.write {
            client.write_payload(now, fh, off, Payload::Phantom(spec.transfer))
        } else {
            client.read(now, fh, off, spec.transfer)
        };
        self.track(rank, op);
        self.ranks[rank as usize].st = St::Op;
        self.job.world.pump_client(node);
        Ok(())
    }

    fn transfers_done(&mut self, rank: u32) -> Result<(), SimError> {
        let (now, node) = (self.now(), self.ranks[rank as usize].node);
        let fh = self.ranks[rank as usize].fh.expect("open");
        if self.spec.write && self.spec.fsync && self.ranks[rank as usize].st != St::Fsync {
            let op = self.job.world.clients[node as usize].fsync(now, fh);
            self.track(rank, op);
            self.ranks[rank as usize].st = St::Fsync;
            self.job.world.pump_client(node);
            return Ok(());
        }
        self.ranks[rank as usize].r.xfer_stop = now;
        self.close(rank)
    }

    fn close(&mut self, rank: u32) -> Result<(), SimError> {
        let (now, node) = (self.now(), self.ranks[rank as usize].node);
        let fh = self.ranks[rank as usize].fh.expect("open");
        let r = &mut self.ranks[rank as usize];
        if r.st != St::Ungrouping && r.st != St::Closing {
            r.r.close_start = now;
        }
        // A collective program lets its own group lock go at its close.
        let grouped = self.spec.write && self.coll.is_none() && self.spec.lock == LockMode::Group;
        let client = &mut self.job.world.clients[node as usize];
        let op = if grouped && self.ranks[rank as usize].st != St::Ungrouping {
            self.ranks[rank as usize].st = St::Ungrouping;
            client.group_unlock(now, fh, GroupId(1))
        } else {
            self.ranks[rank as usize].st = St::Closing;
            client.close(now, fh)
        };
        self.track(rank, op);
        self.job.world.pump_client(node);
        Ok(())
    }

    fn op_done(&mut self, rank: u32, output: OpOutput) -> Result<(), SimError> {
        let now = self.now();
        let r = &mut self.ranks[rank as usize];
        r.ops -= 1;
        match (r.st, output) {
            (St::Grouping, OpOutput::GroupLocked) => self.open_done(rank)?,
            (St::Op, ref out @ (OpOutput::Written(n) | OpOutput::ReadPhantom(n))) => {
                r.r.bytes += n;
                r.r.transfers += 1;
                r.next += 1;
                if let Some(series) = self.job.world.series.as_mut() {
                    series.note(now, rank, matches!(out, OpOutput::Written(_)), n);
                }
                let holds_inode = self.inodes.is_some() && matches!(out, OpOutput::Written(_));
                r.st = if holds_inode { St::Returning } else { St::Copy };
                let node = r.node;
                // A write's copy into the page cache is the client's (under
                // its lock), and its requests through a mount came before;
                // a read's copy out of it is the rank's, and its requests'
                // answers come back through the mount.
                let work = match out {
                    // The faults of the frames it wrote into first, on the
                    // rank's own time.
                    OpOutput::Written(_) => self.job.world.first_touch(node),
                    _ => {
                        let model = &self.job.world.model;
                        Duration(transfer(n, model.copy_bw).as_ns().saturating_add(model.mount_time(n).as_ns()))
                    }
                };
                // The call's own CPU time (handing it to the client and
                // its answer back).
                let work = plus(work, self.job.world.model.client_cpu_per_call);
                let at = self.job.world.node_cpu(node, now, work, CpuUse::Calls);
                self.resume_at(at, rank);
            }
            (St::Op, OpOutput::Synced) => {
                r.st = St::Idle;
                self.next_transfer(rank)?;
            }
            (_, OpOutput::LockaheadDone) => {}
            (St::Coll, output) => self.coll_op_done(rank, output)?,
            (St::Fsync, OpOutput::Synced) => self.transfers_done(rank)?,
            (St::Ungrouping, OpOutput::GroupUnlocked) => self.close(rank)?,
            (St::Closing, OpOutput::Closed) => {
                let r = &mut self.ranks[rank as usize];
                r.st = St::ClosingMds;
                let at = now + self.job.mds_rtt();
                self.resume_at(at, rank);
            }
            (st, output) => unreachable!("rank {rank} in {st:?} got {output:?}"),
        }
        Ok(())
    }
}
