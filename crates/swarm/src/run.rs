//! One seed's run: the safety phase (the clients' programs under faults),
//! then the liveness phase (everything healed, every survivor fsyncs and
//! closes, all of it within a bounded number of steps), then the fresh
//! clients' reads of every file, then the oracle.
//!
//! The driver owns the harness, the programs and the fault plan. Between
//! two harness steps it looks for completed operations and loss reports,
//! starts each idle client's next action, and injects the faults and
//! repairs that are due; after every step the harness checks every node's
//! invariants and the driver runs the swarm's own checkers
//! ([`crate::checkers`]). Broken invariants panic; the sweep catches the
//! panic and calls it a crash of the seed.

use crate::adversary::{Adversary, AdversaryCounts};
use crate::checkers;
use crate::faults::{Fault, FaultClass, FaultPlan, Repair};
use crate::history::{FsyncRecord, History, ReadRecord, Scope, Tick};
use crate::mds::{self, MdsWorld};
use crate::options::SwarmOptions;
use crate::oracle::Oracle;
use crate::workload::{self, Action, SCRATCH_SLOTS};
use crate::Outcome;
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::client::{ClientConfig, FileHandle, OpId, OpOutput};
use lanefs_core::harness::{Harness, HarnessConfig};
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ost::{OstConfig, RecoveryConfig};
use lanefs_core::units::{ClientId, Duration, Instant, OstIndex, PAGE_SIZE};
use lanefs_core::Errno;
use lanefs_proto::{Access, CreateMode, MdsRequest, StripeSpec};
use rand::Rng;
use std::collections::BTreeSet;

/// Steps of the safety phase, at most: programs still running then are cut
/// short, and the liveness phase finishes what they started.
pub const SAFETY_STEPS_MAX: u64 = 400_000;
/// Steps the liveness phase may take (healing, the survivors' fsyncs and
/// closes, and the fresh reads together): past it the seed fails liveness.
pub const LIVENESS_STEPS_MAX: u64 = 400_000;
/// Virtual time the liveness phase may take, too: far above a recovery
/// window, a commit interval, a callback timeout and the MDS clients' retry
/// time together, and reached long before the step bound by a cluster that
/// only spins its timers (whose invariant checks would take minutes).
pub const LIVENESS_TIME_MAX: Duration = Duration::from_secs(120);

/// What one seed's run found.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub outcome: Outcome,
    pub faults: crate::faults::FaultCounts,
    pub steps: u64,
    pub trace_hash: u64,
    /// Operations completed, for the summary.
    pub ops: u64,
    /// What the adversary did, if the seed had one.
    pub adversary: Option<AdversaryCounts>,
}

/// What a client's operation in flight was.
#[derive(Clone, Copy, Debug)]
enum Pending {
    /// A write or a truncate: its index in the history.
    Write {
        index: usize,
        action: &'static str,
    },
    Read {
        offset: u64,
        start: Tick,
        fresh: bool,
    },
    Fsync {
        start: Tick,
    },
    Close,
    Stat,
    GroupLock {
        gid: u64,
    },
    GroupUnlock,
}

/// What a client waits for from the MDS (the request's id with it).
#[derive(Clone, Debug)]
enum MdsWait {
    /// The open of a data file, before the action that needs it.
    Open { file: usize },
    /// A namespace action on one of its scratch names.
    Name { path: String, request: MdsRequest },
    /// A listing of `/`, with the data files opened before it was asked for.
    List { known: Vec<usize> },
}

struct Runner {
    client: u32,
    program: Vec<Action>,
    next: usize,
    pending: Option<(OpId, usize, Pending)>,
    mds_wait: Option<(u64, MdsWait)>,
    /// The fresh reader of the liveness phase: its reads are of the final state.
    fresh: bool,
    handles: Vec<Option<FileHandle>>,
    /// The gid of the GROUP lock held through each file's handle.
    group: Vec<Option<u64>>,
    crashed: bool,
    /// Liveness phase: no more program actions; fsync and close what is open.
    closing: bool,
}

impl Runner {
    fn is_idle(&self) -> bool {
        self.crashed || (self.pending.is_none() && self.mds_wait.is_none() && self.next == self.program.len())
    }

    /// Holding a GROUP lock, or taking one: a crash now would leave a lock
    /// nothing ever takes back (see the crate docs; the driver also asks the
    /// nodes, since a released lock's cancel may still be in flight).
    fn in_group_section(&self) -> bool {
        self.group.iter().any(Option::is_some) || matches!(self.pending, Some((_, _, Pending::GroupLock { .. })))
    }
}

pub struct Driver {
    o: SwarmOptions,
    h: Harness,
    mds: MdsWorld,
    osts_of_file: Vec<Vec<u32>>,
    runners: Vec<Runner>,
    plan: FaultPlan,
    history: History,
    lost_seen: usize,
    latency: (Duration, Duration),
    delayed: bool,
    parted: BTreeSet<(u32, u32)>,
    failing_writes: BTreeSet<u32>,
    failing_commits: BTreeSet<u32>,
    ops: u64,
    /// When the liveness phase must be over ([`LIVENESS_TIME_MAX`]).
    liveness_deadline: Instant,
    adversary: Option<Adversary>,
}

impl Driver {
    pub fn new(o: SwarmOptions) -> Driver {
        let rpc = o.rpc_bytes();
        let client = ClientConfig {
            rpc_bytes_max: rpc,
            rpcs_in_flight_max: o.rpcs_in_flight_max,
            dirty_bytes_max: o.dirty_rpcs * rpc,
            unstable_bytes_max: o.unstable_rpcs * rpc,
            cached_bytes_max: o.cache_pages * PAGE_SIZE,
            lru_locks_max: o.lru_locks_max,
            ..ClientConfig::default()
        };
        let ost = OstConfig {
            locks: LockServerConfig {
                callback_timeout: Duration::from_us(o.callback_timeout_us),
                ..LockServerConfig::default()
            },
            sync_lock_cancel: o.sync_lock_cancel,
            ..OstConfig::default()
        };
        let latency = (Duration::from_us(o.latency_min_us), Duration::from_us(o.latency_max_us));
        let config = HarnessConfig {
            clients: o.clients + 1, // the last one reads the final state
            osts: o.osts,
            seed: o.seed,
            latency_min: latency.0,
            latency_max: latency.1,
            client,
            raw_peers: u32::from(o.adversary),
            ost,
            check_invariants: true,
            recovery: Some(RecoveryConfig {
                window: Duration::from_ms(o.recovery_window_ms),
                commit_interval: Duration::from_ms(o.commit_interval_ms),
                commit_bytes: o.commit_bytes(),
            }),
            commit_latency: Duration::from_us(o.commit_latency_us),
        };
        let h = Harness::new(config).expect("drawn options make a valid client configuration");
        let adversary = o.adversary.then(|| Adversary::new(o.seed, h.raw_peer(0), o.osts));
        let mds = MdsWorld::new(o.seed, o.osts, latency);
        // Round robin from the drawn start, as the MDS's allocator lays out
        // a file whose start OST is given (the namespace oracle checks it).
        let osts_of_file =
            o.files.iter().map(|f| (0..f.stripe_count).map(|i| (f.start_ost + i) % o.osts).collect()).collect();
        let files = o.files.len();
        let runners = workload::programs(&o)
            .into_iter()
            .enumerate()
            .map(|(c, program)| Runner {
                client: c as u32,
                program,
                next: 0,
                pending: None,
                mds_wait: None,
                fresh: false,
                handles: vec![None; files],
                group: vec![None; files],
                crashed: false,
                closing: false,
            })
            .collect();
        let plan = FaultPlan::new(o.seed, o.faults.clone());
        Driver {
            h,
            mds,
            osts_of_file,
            runners,
            plan,
            history: History::default(),
            lost_seen: 0,
            latency,
            delayed: false,
            parted: BTreeSet::new(),
            failing_writes: BTreeSet::new(),
            failing_commits: BTreeSet::new(),
            ops: 0,
            liveness_deadline: Instant::ZERO,
            adversary,
            o,
        }
    }

    /// Keep every message the harness delivers (a replay's `--trace`).
    pub fn record_trace(&mut self) {
        self.h.record_trace();
    }

    /// The messages delivered so far, if [`Driver::record_trace`] was
    /// called (what a crash's replay shows).
    pub fn trace(&self) -> &[String] {
        self.h.trace()
    }

    /// The whole run; a broken invariant panics out of it.
    pub fn run(&mut self) -> RunReport {
        self.safety_phase();
        let liveness = self.liveness_phase();
        let mut correctness = Oracle::new(&self.history, &self.osts_of_file).check();
        if liveness.is_ok() {
            let mut ns = std::mem::take(&mut self.mds.ns);
            ns.check_final(&mut self.mds, self.o.clients, SCRATCH_SLOTS);
            self.mds.ns = ns;
        }
        if let (Ok(()), Some(finding)) = (&correctness, self.mds.ns.findings.first()) {
            correctness = Err(format!("namespace: {finding}"));
        }
        let outcome = match (correctness, liveness) {
            (Err(e), _) => Outcome::Correctness(e),
            (Ok(()), Err(e)) => Outcome::Liveness(e),
            (Ok(()), Ok(())) => Outcome::Passed,
        };
        RunReport {
            outcome,
            faults: self.history.fault_counts(),
            steps: self.steps(),
            trace_hash: self.h.trace_hash(),
            ops: self.ops,
            adversary: self.adversary.as_ref().map(|a| a.counts),
        }
    }

    /// Steps of the run: the harness's and the MDS world's events.
    fn steps(&self) -> u64 {
        self.h.steps() + self.mds.events
    }

    fn safety_phase(&mut self) {
        loop {
            self.observe();
            if self.runners.iter().all(Runner::is_idle) || self.steps() >= SAFETY_STEPS_MAX {
                return;
            }
            let step = self.steps();
            while let Some(repair) = self.plan.due_repair(step) {
                self.repair(repair);
            }
            if let Some(class) = self.plan.due_fault(step) {
                self.inject(class);
            }
            if !self.step() {
                // Nothing moves: the next repair now, or on to liveness.
                match self.plan.next_repair() {
                    Some(repair) => self.repair(repair),
                    None => return,
                }
            }
        }
    }

    /// Heal everything, let every survivor finish, fsync and close, then
    /// read every file back with a fresh client; all within the bound.
    fn liveness_phase(&mut self) -> Result<(), String> {
        self.heal_all();
        if let Some(a) = self.adversary.as_mut() {
            // Silent from now on, and so evicted by the OSTs, as the network
            // servers' idle timeout evicts a node that says nothing (the
            // harness has no pings), long after its last messages landed:
            // its GROUP locks, which no callback takes back, go with it.
            a.fall_silent();
            let peer = a.peer();
            while self.h.in_flight_from(peer) && self.step() {}
            self.h.evict(peer);
        }
        let budget_end = self.steps() + LIVENESS_STEPS_MAX;
        self.liveness_deadline = self.h.now() + LIVENESS_TIME_MAX;
        for r in &mut self.runners {
            r.program.truncate(r.next);
            r.closing = true;
        }
        self.settle(budget_end, "the survivors' fsyncs and closes")?;
        self.fresh_reads();
        self.settle(budget_end, "the fresh clients' reads")?;
        while self.mds.destroys_busy() {
            if self.steps() >= budget_end || self.h.now() > self.liveness_deadline || !self.step() {
                let left = self.mds.destroys_left();
                return Err(format!("the healed MDS did not destroy the objects of removed files: {left} left queued"));
            }
        }
        // What is still in flight lands (a commit on its disk, the answer
        // to a sync resent after its operation was done).
        while self.h.next_event_at().is_some() {
            if self.steps() >= budget_end || self.h.now() > self.liveness_deadline || !self.step() {
                break;
            }
        }
        match checkers::leftovers(&self.h, self.o.osts, self.o.clients) {
            Some(left) => Err(format!("the healed cluster went idle with work left: {left}")),
            None => Ok(()),
        }
    }

    /// Step until every runner is done, within the budget.
    fn settle(&mut self, budget_end: u64, what: &str) -> Result<(), String> {
        loop {
            self.observe();
            if self.runners.iter().all(Runner::is_idle) {
                return Ok(());
            }
            if self.steps() >= budget_end || self.h.now() > self.liveness_deadline {
                return Err(format!(
                    "{what} did not finish within {LIVENESS_STEPS_MAX} steps and {} s of the liveness phase ({}): {}",
                    LIVENESS_TIME_MAX.as_secs_f64(),
                    self.h.now(),
                    self.waiting()
                ));
            }
            if !self.step() {
                return Err(format!("{what} stalled at {} with nothing in flight: {}", self.h.now(), self.waiting()));
            }
        }
    }

    /// Which clients wait, on what.
    fn waiting(&self) -> String {
        let mut parts = Vec::new();
        for r in self.runners.iter().filter(|r| !r.is_idle()) {
            let what = match &r.pending {
                Some((_, i, p)) => format!("{:?} ({:?})", r.program[*i], p),
                None => "nothing".to_string(),
            };
            parts.push(format!("c{} waits on {what}", r.client));
        }
        parts.join("; ")
    }

    /// One harness step and the swarm's checks after it.
    fn step(&mut self) -> bool {
        if let Some(a) = self.adversary.as_mut() {
            let step = self.h.steps() + self.mds.events;
            a.act(&mut self.h, step);
        }
        if let Some(at) = self.mds.next_event_at() {
            if self.h.next_event_at().is_none_or(|next| at < next) {
                self.h.set_clock(at);
                let now = self.h.now();
                self.mds.step(now, &mut self.h);
                return true;
            }
        }
        if !self.h.step() {
            return false;
        }
        checkers::check_granted_locks(&self.h, self.o.osts);
        if let Some(a) = &self.adversary {
            a.check(&self.h);
        }
        true
    }

    // ----- the clients' programs ---------------------------------------

    /// Loss reports and completions since the last look, then the next
    /// actions of the idle clients.
    fn observe(&mut self) {
        self.history.clock = self.h.now();
        for r in 0..self.runners.len() {
            loop {
                self.observe_losses();
                if !self.poll(r) {
                    break;
                }
                if !self.start_next(r) {
                    break;
                }
            }
        }
        self.observe_losses();
    }

    fn observe_losses(&mut self) {
        while self.lost_seen < self.h.lost().len() {
            let (c, ost, bytes) = self.h.lost()[self.lost_seen];
            self.lost_seen += 1;
            self.history.report(c.0, Scope::Ost(ost.0), format!("{bytes} bytes lost on {ost}"));
        }
    }

    /// Take runner `r`'s operation if it completed; true if the runner is
    /// free to start its next action.
    fn poll(&mut self, r: usize) -> bool {
        let runner = &self.runners[r];
        if runner.crashed {
            return false;
        }
        if let Some((xid, wait)) = runner.mds_wait.clone() {
            return self.poll_mds(r, xid, wait);
        }
        let Some((op, index, pending)) = runner.pending else { return true };
        let c = ClientId(runner.client);
        let Some(result) = self.h.result(c, op).cloned() else { return false };
        self.ops += 1;
        let file = self.runners[r].program[index].file().expect("a data operation");
        self.runners[r].pending = None;
        let client = c.0;
        match (pending, result) {
            (Pending::Write { index, .. }, Ok(_)) => self.history.write_ended(index, true),
            (Pending::Write { index, action }, Err(e)) => {
                self.history.write_ended(index, false);
                self.history.error(client, file, action, e);
            }
            (Pending::Read { offset, start, fresh }, Ok(OpOutput::Read(data))) => {
                let end = self.history.tick();
                self.history.reads.push(ReadRecord { client, file, offset, start, end, data, fresh });
            }
            (Pending::Read { .. }, Ok(other)) => panic!("c{client}: a read answered {other:?}"),
            (Pending::Read { .. }, Err(e)) => {
                self.history.tick();
                self.history.error(client, file, "read", e);
            }
            (Pending::Fsync { start }, result) => {
                let end = self.history.tick();
                let ok = result.is_ok();
                self.history.fsyncs.push(FsyncRecord { client, file, start, end, ok });
                if let Err(e) = result {
                    self.history.report(client, Scope::File(file), format!("fsync failed: {e}"));
                    self.history.error(client, file, "fsync", e);
                }
            }
            (Pending::Close, result) => {
                self.history.tick();
                self.runners[r].handles[file] = None;
                self.runners[r].group[file] = None;
                if let Err(e) = result {
                    self.history.report(client, Scope::File(file), format!("close failed: {e}"));
                    self.history.error(client, file, "close", e);
                }
            }
            (Pending::GroupLock { gid }, result) => {
                self.history.tick();
                match result {
                    Ok(_) => self.runners[r].group[file] = Some(gid),
                    Err(e) => self.history.error(client, file, "group lock", e),
                }
            }
            (Pending::GroupUnlock, result) => {
                self.history.tick();
                self.runners[r].group[file] = None;
                if let Err(e) = result {
                    self.history.error(client, file, "group unlock", e);
                }
            }
            (Pending::Stat, result) => {
                self.history.tick();
                if let Err(e) = result {
                    self.history.error(client, file, "stat", e);
                }
            }
        }
        true
    }

    /// Take runner `r`'s MDS answer if it came; true if the runner is free.
    fn poll_mds(&mut self, r: usize, xid: u64, wait: MdsWait) -> bool {
        let client = self.runners[r].client;
        let Some(answer) = self.mds.answer(client, xid) else { return false };
        self.runners[r].mds_wait = None;
        self.ops += 1;
        match wait {
            MdsWait::Open { file } => {
                let f = &self.o.files[file];
                let wanted = (f.stripe_bytes, f.stripe_count, f.start_ost);
                match self.mds.ns.data_opened(file, &answer.reply, wanted) {
                    Some(layout) => self.runners[r].handles[file] = Some(self.h.open(ClientId(client), layout)),
                    None => self.runners[r].next += 1, // the finding is kept; the action is skipped
                }
            }
            MdsWait::Name { path, request } => self.mds.ns.answered(&path, &request, &answer),
            MdsWait::List { known } => self.mds.ns.listed(client, SCRATCH_SLOTS, &known, &answer.reply),
        }
        true
    }

    /// Send runner `r`'s namespace action to the MDS.
    fn start_name(&mut self, r: usize, action: &Action) -> bool {
        let client = self.runners[r].client;
        let now = self.h.now();
        let (path, request) = match *action {
            Action::NsCreate { slot } => {
                let path = mds::scratch_path(client, slot);
                let request = MdsRequest::Create {
                    path: path.clone(),
                    stripe: StripeSpec::default(),
                    mode: CreateMode::Exclusive,
                    access: Access::ReadWrite,
                    permissions: 0o644,
                };
                (path, request)
            }
            Action::NsUnlink { slot } => {
                let path = mds::scratch_path(client, slot);
                self.mds.ns.unlink_sent(&path);
                (path.clone(), MdsRequest::Unlink { path })
            }
            Action::NsStat { slot } => {
                let path = mds::scratch_path(client, slot);
                (path.clone(), MdsRequest::Stat { path })
            }
            _ => {
                let xid = self.mds.send(now, client, MdsRequest::Readdir { path: "/".into(), cursor: None });
                let known = self.mds.ns.data_files();
                self.runners[r].mds_wait = Some((xid, MdsWait::List { known }));
                return true;
            }
        };
        let xid = self.mds.send(now, client, request.clone());
        self.runners[r].mds_wait = Some((xid, MdsWait::Name { path, request }));
        true
    }

    /// Start runner `r`'s next action; true if it completed at once (or was
    /// skipped) and the one after may start.
    fn start_next(&mut self, r: usize) -> bool {
        if self.runners[r].closing && self.runners[r].next == self.runners[r].program.len() {
            self.plan_closing(r);
        }
        let runner = &mut self.runners[r];
        let Some(action) = runner.program.get(runner.next).cloned() else { return false };
        let Some(file) = action.file() else {
            runner.next += 1;
            return self.start_name(r, &action);
        };
        let Some(fh) = runner.handles[file] else {
            // Open it through the MDS first; the action starts once it is.
            let f = &self.o.files[file];
            let request = mds::open_request(file, f.stripe_bytes, f.stripe_count, f.start_ost);
            let xid = self.mds.send(self.h.now(), runner.client, request);
            self.runners[r].mds_wait = Some((xid, MdsWait::Open { file }));
            return true;
        };
        let index = runner.next;
        runner.next += 1;
        let fresh = runner.fresh;
        let c = ClientId(runner.client);
        let (op, pending) = match action {
            Action::Write { offset, len, id, .. } => {
                let index = self.history.write_started(id, c.0, file, offset, len, false);
                let op = self.h.write(c, fh, offset, workload::write_bytes(id, offset, len));
                (op, Pending::Write { index, action: "write" })
            }
            Action::Truncate { size, id, .. } => {
                let bytes = self.o.files[file].bytes;
                let index = self.history.write_started(id, c.0, file, size, bytes.saturating_sub(size), true);
                (self.h.truncate(c, fh, size), Pending::Write { index, action: "truncate" })
            }
            Action::Read { offset, len, .. } => {
                let start = self.history.tick();
                (self.h.read(c, fh, offset, len), Pending::Read { offset, start, fresh })
            }
            Action::Fsync { .. } => {
                let start = self.history.tick();
                (self.h.fsync(c, fh), Pending::Fsync { start })
            }
            Action::Close { .. } => {
                self.history.tick();
                (self.h.close(c, fh), Pending::Close)
            }
            Action::Stat { .. } => {
                self.history.tick();
                (self.h.stat(c, fh), Pending::Stat)
            }
            Action::Lockahead { ranges, .. } => {
                let mut advices = vec![Advice::lock_no_expand(true)];
                advices.extend(ranges.iter().map(|&(s, e)| Advice::lockahead(AheadMode::Write, s, e, true)));
                if let Err(e) = self.h.ladvise(c, fh, &advices) {
                    self.history.tick();
                    self.history.error(c.0, file, "lockahead", e);
                }
                return true;
            }
            Action::GroupLock { gid, .. } => {
                if self.runners[r].group[file].is_some() {
                    return true; // held already (a section cut short)
                }
                self.history.tick();
                (self.h.group_lock(c, fh, gid), Pending::GroupLock { gid })
            }
            Action::GroupUnlock { .. } => {
                let Some(gid) = self.runners[r].group[file] else { return true };
                self.history.tick();
                (self.h.group_unlock(c, fh, gid), Pending::GroupUnlock)
            }
            Action::NsCreate { .. } | Action::NsUnlink { .. } | Action::NsStat { .. } | Action::NsList => {
                unreachable!("namespace actions start in start_name")
            }
        };
        self.runners[r].pending = Some((op, index, pending));
        true
    }

    /// The liveness phase's end of a program: for each open file, release
    /// its GROUP lock, fsync it, close it.
    fn plan_closing(&mut self, r: usize) {
        let runner = &mut self.runners[r];
        runner.closing = false;
        for file in 0..runner.handles.len() {
            if runner.handles[file].is_none() {
                continue;
            }
            if runner.group[file].is_some() {
                runner.program.push(Action::GroupUnlock { file });
            }
            runner.program.push(Action::Fsync { file });
            runner.program.push(Action::Close { file });
        }
    }

    /// The fresh client opens (through the MDS) and reads every file
    /// whole, all files at once.
    fn fresh_reads(&mut self) {
        let reader = self.o.clients;
        let files = self.o.files.len();
        for file in 0..files {
            self.runners.push(Runner {
                client: reader,
                program: vec![Action::Read { file, offset: 0, len: self.o.files[file].bytes }],
                next: 0,
                pending: None,
                mds_wait: None,
                fresh: true,
                handles: vec![None; files],
                group: vec![None; files],
                crashed: false,
                closing: false,
            });
        }
    }

    // ----- faults ------------------------------------------------------

    fn live_clients(&self) -> Vec<u32> {
        self.runners.iter().filter(|r| !r.crashed).map(|r| r.client).collect()
    }

    /// Whether client `c` has a GROUP lock anywhere: in its lock cache (held,
    /// or asked for), or granted by an OST (its cancel may be in flight).
    fn holds_group_lock(&self, c: u32) -> bool {
        let client = ClientId(c);
        self.h.client(client).lock_cache().iter().any(|(_, l)| l.mode.is_group())
            || (0..self.o.osts).map(OstIndex).filter(|&o| !self.h.is_down(o)).any(|o| {
                self.h.ost(o).locks().granted_locks().any(|(_, holder, _, mode, _)| holder == client && mode.is_group())
            })
    }

    fn inject(&mut self, class: FaultClass) {
        self.history.clock = self.h.now();
        let step = self.steps();
        let osts = self.o.osts;
        let live = self.live_clients();
        let fault = match class {
            FaultClass::Drop => {
                let (client, ost) = (pick(self.plan.rng(), &live), self.plan.rng().gen_range(0..osts));
                let (Some(client), ost) = (client, ost) else { return };
                if self.h.is_down(OstIndex(ost)) || self.parted.contains(&(client, ost)) {
                    return;
                }
                self.h.drop_connection(ClientId(client), OstIndex(ost));
                Fault::Drop { client, ost }
            }
            FaultClass::Delay => {
                if self.delayed {
                    return;
                }
                let rng = self.plan.rng();
                let factor = 2f64.powf(rng.gen_range(1.0..10.0)) as u64; // 2x to 1024x
                let last = rng.gen_range(20..2_000);
                let (min, max) = (self.latency.0 .0 * factor, self.latency.1 .0 * factor);
                self.h.set_latency(Duration(min), Duration(max));
                self.mds.set_latency((Duration(min), Duration(max)));
                self.delayed = true;
                self.plan.schedule(step, last, Repair::CalmNetwork);
                Fault::Delay { latency_min_us: min / 1000, latency_max_us: max / 1000 }
            }
            FaultClass::ClientCrash => {
                let crashed = self.runners.iter().filter(|r| r.crashed).count() as u32;
                if crashed >= self.o.clients / 2 {
                    return;
                }
                let candidates: Vec<u32> = self
                    .runners
                    .iter()
                    .filter(|r| !r.crashed && !r.in_group_section() && !self.holds_group_lock(r.client))
                    .map(|r| r.client)
                    .collect();
                let Some(client) = pick(self.plan.rng(), &candidates) else { return };
                self.h.crash(ClientId(client));
                self.mds.forget_client(client);
                let runner = &mut self.runners[client as usize];
                runner.crashed = true;
                runner.pending = None;
                if let Some((_, MdsWait::Name { path, .. })) = runner.mds_wait.take() {
                    self.mds.ns.abandoned(&path);
                }
                Fault::ClientCrash { client }
            }
            FaultClass::OstCrash => {
                let up: Vec<u32> = (0..osts).filter(|&o| !self.h.is_down(OstIndex(o))).collect();
                let Some(ost) = pick(self.plan.rng(), &up) else { return };
                self.h.crash_ost(OstIndex(ost));
                let down_for = self.plan.rng().gen_range(1..2_000);
                self.plan.schedule(step, down_for, Repair::RestartOst { ost });
                Fault::OstCrash { ost }
            }
            FaultClass::Partition => {
                let Some(client) = pick(self.plan.rng(), &live) else { return };
                let ost = self.plan.rng().gen_range(0..osts);
                if !self.parted.insert((client, ost)) {
                    return;
                }
                self.h.partition(ClientId(client), OstIndex(ost));
                let heal_after = self.plan.rng().gen_range(10..5_000);
                self.plan.schedule(step, heal_after, Repair::Heal { client, ost });
                Fault::Partition { client, ost }
            }
            FaultClass::WriteFailure => {
                let ost = self.plan.rng().gen_range(0..osts);
                if !self.failing_writes.insert(ost) {
                    return;
                }
                let errno = if self.plan.rng().gen_bool(0.5) { Errno::EIO } else { Errno::ENOSPC };
                self.h.fail_writes(OstIndex(ost), Some(errno));
                let last = self.plan.rng().gen_range(10..2_000);
                self.plan.schedule(step, last, Repair::WritesWork { ost });
                Fault::FailWrites { ost, errno }
            }
            FaultClass::CommitFailure => {
                let ost = self.plan.rng().gen_range(0..osts);
                if !self.failing_commits.insert(ost) {
                    return;
                }
                let errno = if self.plan.rng().gen_bool(0.5) { Errno::EIO } else { Errno::ENOSPC };
                self.h.fail_commits(OstIndex(ost), Some(errno));
                let last = self.plan.rng().gen_range(10..2_000);
                self.plan.schedule(step, last, Repair::CommitsWork { ost });
                Fault::FailCommits { ost, errno }
            }
            FaultClass::MdsCrash => {
                if !self.mds.is_up() {
                    return;
                }
                self.mds.crash();
                self.h.note(format!("{} mds crash", self.h.now()));
                let down_for = self.plan.rng().gen_range(1..2_000);
                self.plan.schedule(step, down_for, Repair::RestartMds);
                Fault::MdsCrash
            }
            FaultClass::MdsDrop => {
                let Some(client) = pick(self.plan.rng(), &live) else { return };
                self.mds.drop_link(client);
                self.h.note(format!("{} c{client} mds connection dropped", self.h.now()));
                Fault::MdsDrop { client }
            }
        };
        self.history.fault(fault);
    }

    fn repair(&mut self, repair: Repair) {
        match repair {
            Repair::RestartOst { ost } => self.h.restart_ost(OstIndex(ost)),
            Repair::Heal { client, ost } => {
                self.parted.remove(&(client, ost));
                self.h.heal(ClientId(client), OstIndex(ost));
            }
            Repair::WritesWork { ost } => {
                self.failing_writes.remove(&ost);
                self.h.fail_writes(OstIndex(ost), None);
            }
            Repair::CommitsWork { ost } => {
                self.failing_commits.remove(&ost);
                self.h.fail_commits(OstIndex(ost), None);
            }
            Repair::CalmNetwork => {
                self.delayed = false;
                self.h.set_latency(self.latency.0, self.latency.1);
                self.mds.set_latency(self.latency);
            }
            Repair::RestartMds => {
                self.h.note(format!("{} mds restart", self.h.now()));
                self.mds.restart(self.h.now());
            }
        }
    }

    fn heal_all(&mut self) {
        while let Some(repair) = self.plan.next_repair() {
            self.repair(repair);
        }
        self.plan.clear_repairs();
        self.mds.restart(self.h.now());
    }
}

fn pick(rng: &mut impl Rng, from: &[u32]) -> Option<u32> {
    (!from.is_empty()).then(|| from[rng.gen_range(0..from.len())])
}
