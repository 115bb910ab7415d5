//! The simulated machine: lanefs-core's clients and OSTs joined by a model of
//! networks, OSS service threads and disks, on one event queue.
//!
//! What runs here is the real protocol: one [`Client`] per compute node (as a
//! Lustre mount is shared by the ranks of a node) and one [`Ost`] per OST,
//! exchanging the same [`ToOst`]/[`ToClient`] messages the network daemons
//! carry, with phantom payloads (lengths, no bytes). What is modelled is only
//! how long things take:
//!
//! - **Control messages** (enqueue, cancel, callbacks, replies) take the
//!   one-way network latency. They do not queue behind bulk data: Lustre moves
//!   bulk by RDMA, scheduled by the server, so small RPCs are not stuck behind
//!   megabytes on the wire.
//! - **Lock requests** (and every other non-I/O request) then take
//!   `lock_cpu` on one of the OSS's service threads (the earliest free; first
//!   come, first served when all are busy): Lustre serves lock RPCs on a pool
//!   of threads in parallel, the per-resource critical section being short.
//! - **I/O RPCs** queue for one of the OSS's service threads. A thread moves
//!   the bulk (the client node's NIC and the OSS's NIC are FIFO resources, each
//!   at its own bandwidth), then the OST's disk (FIFO, per-RPC overhead plus
//!   bytes at the disk's bandwidth, plus a read-modify-write of every RAID
//!   stripe the write covers only partly), and only then hands the RPC to the
//!   core `Ost`, whose reply goes back with the latency. So a write is
//!   acknowledged when it is on disk, and a lock callback that needs dirty
//!   data flushed waits for the disk, as on Lustre.
//! - **Syncs on lock cancel**: when the OST's policy makes a cancel wait for
//!   its object's data to be durable, the OST's [`Journal`] decides when:
//!   at once if the object's last change is committed, else when the commit
//!   holding it ends (commits take `journal_commit`, one at a time per
//!   OST). With no commit time the world keeps no journal and answers at
//!   once. An OST that syncs each object (lanefs's OSS, `commit_syncs`)
//!   keeps none either: its commit thread takes one sync request after the
//!   other, each `journal_commit` per object it names besides the bytes
//!   the host cache still holds of them, and a commit's commit point.
//! - **MPI messages** between ranks (the collective exchange) use the nodes'
//!   NICs and the MPI latency; ranks on one node copy at the copy bandwidth.
//! - **Costs a description may turn on** (absent, a run is as without):
//!   a node's cores, which copies, the client's CPU work (per RPC, per page,
//!   checksums), MPI's per-message work and, with the servers on the
//!   compute node, their service take turns on; the client's
//!   blocking-callback threads ([`CallbackThreads`]); the lock server's CPU
//!   per callback; OSTs that write into their host's page cache, whose
//!   syncs wait for the disk ([`Ev::Drained`]), at a page cache write rate
//!   of their own, the disk taking the bytes as they come or when a sync
//!   or the OST's own commit writes them back ([`HostCache`]); the faults
//!   of page frames a client writes into, and an OSS reads, for the first
//!   time ([`Frames`]); a rank's CPU time per read or write call; the
//!   wake-up of a thread that sleeps when a message comes for it
//!   ([`Handoffs`]); the OSS's CPU time per page of an I/O RPC, on its
//!   service thread before the disk.
//!
//! Ordering: control messages of one (sender, receiver) pair keep their order
//! (equal latency, and the queue pops equal times in push order). I/O RPCs
//! reach the core `Ost` when their service ends, which may be after later
//! control messages of the same client, as with Lustre's parallel service
//! threads; the client never depends on that order (it cancels a lock only
//! after the writes under it are acknowledged).

use crate::callback_threads::CallbackThreads;
use crate::commit_threads::{CommitThreads, Step};
use crate::config::partial_stripe_bytes;
use crate::cpu_ledger::{CpuLedger, CpuUse};
use crate::frames::Frames;
use crate::handoffs::{Handoffs, Thread};
use crate::host_cache::{Flushed, HostCache};
use crate::journal::Journal;
use crate::model::Model;
use crate::queue::EventQueue;
use lanefs_core::client::{Client, ClientConfig, ClientError, ClientEvent, OpId, OpOutput};
use lanefs_core::msg::{ToClient, ToOst};
use lanefs_core::ost::{Ost, SyncRequest};
use lanefs_core::store::SizeStore;
use lanefs_core::units::{ClientId, Duration, Instant, ObjectId, OstIndex, PAGE_SIZE};
use lanefs_ior::timeseries::TimeSeries;
use std::collections::VecDeque;

/// Something that happens at an instant; `W` is the workload's own kind of
/// event, which the world keeps in order and hands back untouched.
#[derive(Debug)]
pub enum Ev<W> {
    /// A client's message reaches the OSS of `ost`.
    AtOss {
        ost: u32,
        node: u32,
        msg: ToOst,
    },
    /// The OSS has served `msg` (lock CPU or I/O thread); the core OST takes it.
    OstInput {
        ost: u32,
        node: u32,
        msg: ToOst,
        io: bool,
    },
    /// An OST's message reaches a client node.
    AtClient {
        node: u32,
        ost: u32,
        msg: ToClient,
    },
    ClientTimer {
        node: u32,
    },
    OstTimer {
        ost: u32,
    },
    /// An OST's journal has a commit to end or to start.
    JournalTimer {
        ost: u32,
    },
    /// What an OST wrote into the host's page cache before `request` is
    /// on its disk: the sync goes on.
    Drained {
        ost: u32,
        request: Box<SyncRequest>,
    },
    /// An OST's commit thread: its `fdatasync` ended (`woken: false`), or
    /// its wake-up after one did (`true`).
    CommitStep {
        ost: u32,
        woken: bool,
    },
    /// An event of the workload (rank programs, MPI messages).
    Work(W),
}

/// What the world hands back to the workload.
#[derive(Debug)]
pub enum Happening<W> {
    Work(W),
    OpDone { node: u32, op: OpId, result: Result<OpOutput, ClientError> },
}

/// The ranks' bytes per interval, for `--timeseries` (the clients count
/// their lock traffic and OST bytes in their own timelines).
#[derive(Debug, Clone)]
pub struct RankSeries {
    pub interval: Duration,
    /// `rank_write_bytes` and `rank_read_bytes`, by rank.
    pub series: TimeSeries,
}

impl RankSeries {
    /// `rank`'s transfer of `bytes` returned at `now`.
    pub fn note(&mut self, now: Instant, rank: u32, write: bool, bytes: u64) {
        let bin = now.as_ns() / self.interval.as_ns().max(1);
        let name = if write { "rank_write_bytes" } else { "rank_read_bytes" };
        if !self.series.group(name, "bytes", "rank").add(rank, bin, bytes) {
            self.series.truncated = true;
        }
    }
}

pub struct World<W> {
    pub model: Model,
    pub now: Instant,
    queue: EventQueue<Ev<W>>,
    pub clients: Vec<Client>,
    client_timer: Vec<Option<Instant>>,
    pub osts: Vec<Ost<SizeStore>>,
    ost_timer: Vec<Option<Instant>>,
    /// One per OST when commits take time, else none.
    pub journals: Vec<Journal>,
    journal_timer: Vec<Option<Instant>>,
    node_tx_free: Vec<Instant>,
    /// When each node's CPU has finished preparing the RPCs it sent.
    node_cpu_free: Vec<Instant>,
    node_rx_free: Vec<Instant>,
    oss_tx_free: Vec<Instant>,
    oss_rx_free: Vec<Instant>,
    oss_busy: Vec<u32>,
    oss_pending: Vec<VecDeque<(u32, u32, ToOst)>>,
    /// When each disk is free: an OST's own, or its OSS's one disk
    /// ([`Model::disk_of`]).
    disk_free: Vec<Instant>,
    /// Per OSS, when each lock-service thread is next free, earliest first:
    /// the thread taken is the front, and its new free time goes in its
    /// place (at the back when, as usual, every piece of work takes the
    /// same time; elsewhere when callbacks cost other than lock requests or
    /// the work waits for a shared core).
    lock_threads: Vec<VecDeque<Instant>>,
    /// Per node, its client's blocking-callback threads (with
    /// `callback_threads`).
    callback_threads: Vec<CallbackThreads>,
    /// What OSTs writing into the host's page cache leave there until a
    /// sync (with `host_cache_background`).
    host_cache: Option<HostCache>,
    /// With `commit_syncs = "each-object"`: the OSTs' commit threads.
    commit_threads: Option<CommitThreads>,
    /// The clients' frames written and read for the first time (with
    /// `page_first_touch` or `page_first_map`).
    frames: Option<Frames>,
    /// Which threads sleep when a message comes (with `handoff`).
    handoffs: Option<Handoffs>,
    /// What the cores were charged for.
    cpu: CpuLedger,
    done: VecDeque<Happening<W>>,
    /// Events popped so far.
    pub events: u64,
    /// Dirty bytes lost to evictions.
    pub bytes_lost: u64,
    /// Wake-ups of ranks from their sleeps in MPI waits.
    pub mpi_wakeups: u64,
    /// Partial-stripe writes that paid a read-modify-write, and their bytes.
    pub rmw_writes: u64,
    pub rmw_bytes: u64,
    pub series: Option<RankSeries>,
    /// Check each client's and OST's invariants after every input it takes
    /// (`check_invariants`): on in debug builds, and with `lanefs sim
    /// --check` in release builds. A client or an OST that took no input
    /// has not changed, so every part of the world holds its invariants
    /// after every event.
    pub check: bool,
}

/// Time to move `bytes` at `bytes_per_s`, rounded up to a nanosecond.
pub fn transfer(bytes: u64, bytes_per_s: f64) -> Duration {
    Duration((bytes as f64 * 1e9 / bytes_per_s).ceil() as u64)
}

pub(crate) fn plus(a: Duration, b: Duration) -> Duration {
    Duration(a.as_ns().saturating_add(b.as_ns()))
}

fn later(a: Instant, b: Instant) -> Instant {
    a.max(b)
}

impl<W> World<W> {
    pub fn new(model: Model) -> Result<World<W>, ClientError> {
        let nodes = model.nodes as usize;
        let osts = model.ost_count() as usize;
        let oss = model.oss_count as usize;
        let clients = model
            .host_cores()
            .into_iter()
            .enumerate()
            .map(|(n, cores)| Client::new(ClientId(n as u32), ClientConfig { cores, ..model.client.clone() }))
            .collect::<Result<Vec<_>, _>>()?;
        let ost_list =
            (0..osts as u32).map(|o| Ost::new(OstIndex(o), model.ost.clone(), SizeStore::default())).collect();
        Ok(World {
            now: Instant::ZERO,
            queue: EventQueue::new(),
            clients,
            client_timer: vec![None; nodes],
            osts: ost_list,
            ost_timer: vec![None; osts],
            journals: match model.journal_commit.as_ns() {
                _ if model.commit_each_object => Vec::new(),
                0 => Vec::new(),
                _ => (0..osts).map(|_| Journal::new(model.journal_commit)).collect(),
            },
            journal_timer: vec![None; osts],
            node_tx_free: vec![Instant::ZERO; nodes],
            node_cpu_free: vec![Instant::ZERO; nodes],
            node_rx_free: vec![Instant::ZERO; nodes],
            oss_tx_free: vec![Instant::ZERO; oss],
            oss_rx_free: vec![Instant::ZERO; oss],
            oss_busy: vec![0; oss],
            oss_pending: vec![VecDeque::new(); oss],
            disk_free: vec![Instant::ZERO; model.disks()],
            lock_threads: (0..oss).map(|_| (0..model.oss_threads.max(1)).map(|_| Instant::ZERO).collect()).collect(),
            callback_threads: match model.callback_threads {
                Some(threads) => (0..nodes).map(|_| CallbackThreads::new(threads)).collect(),
                None => Vec::new(),
            },
            host_cache: match model.host_cache_background {
                Some(bytes) if model.host_cache => {
                    Some(HostCache::new(model.oss_count, model.osts_per_oss, bytes, model.host_cache_commit))
                }
                _ => None,
            },
            commit_threads: model.commit_each_object.then(|| CommitThreads::new(osts)),
            frames: (model.page_first_touch > Duration::ZERO || model.page_first_map > Duration::ZERO)
                .then(|| Frames::new(nodes, model.client.arena_frames(osts))),
            handoffs: [model.handoff, model.handoff_idle_core, model.handoff_other_busy_core]
                .iter()
                .any(|&cost| cost > Duration::ZERO)
                .then(|| Handoffs::new(nodes, oss, osts)),
            cpu: CpuLedger::default(),
            done: VecDeque::new(),
            events: 0,
            bytes_lost: 0,
            mpi_wakeups: 0,
            rmw_writes: 0,
            rmw_bytes: 0,
            series: None,
            check: cfg!(debug_assertions),
            model,
        })
    }

    pub fn push(&mut self, at: Instant, ev: Ev<W>) {
        self.queue.push(at.max(self.now), ev);
    }

    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    /// The next thing the workload must see, running the world up to it;
    /// `None` when nothing is left to happen.
    pub fn next_happening(&mut self) -> Option<Happening<W>> {
        loop {
            if let Some(h) = self.done.pop_front() {
                return Some(h);
            }
            let (at, ev) = self.queue.pop()?;
            self.now = at;
            self.events += 1;
            if let Some(h) = self.handle(ev) {
                return Some(h);
            }
        }
    }

    fn handle(&mut self, ev: Ev<W>) -> Option<Happening<W>> {
        match ev {
            Ev::AtOss { ost, node, msg } => {
                let _ = self.hand_off(Thread::Net(self.model.oss_of(ost)), self.now);
                let _ = self.hand_off(Thread::Service(ost), self.now);
                self.at_oss(ost, node, msg);
            }
            Ev::OstInput { ost, node, msg, io } => {
                if io {
                    if let (Some(journal), ToOst::Write { object, .. }) = (self.journals.get_mut(ost as usize), &msg) {
                        journal.handle_write(self.now, *object);
                    }
                }
                self.osts[ost as usize].handle_message(self.now, ClientId(node), msg);
                self.pump_ost(ost);
                if io {
                    let oss = self.model.oss_of(ost);
                    self.oss_busy[oss as usize] -= 1;
                    self.start_io(oss);
                }
            }
            Ev::AtClient { node, ost, msg } => {
                if let (ToClient::Blocking { lock }, Some(threads)) =
                    (&msg, self.callback_threads.get_mut(node as usize))
                {
                    if !threads.take(OstIndex(ost), *lock) {
                        threads.wait(ost, msg);
                        return None;
                    }
                }
                let _ = self.hand_off(Thread::Client(node), self.now);
                self.clients[node as usize].handle_message(self.now, OstIndex(ost), msg);
                self.pump_client(node);
            }
            Ev::ClientTimer { node } => {
                if self.client_timer[node as usize] == Some(self.now) {
                    self.client_timer[node as usize] = None;
                    self.clients[node as usize].handle_timeout(self.now);
                    self.pump_client(node);
                }
            }
            Ev::OstTimer { ost } => {
                if self.ost_timer[ost as usize] == Some(self.now) {
                    self.ost_timer[ost as usize] = None;
                    self.osts[ost as usize].handle_timeout(self.now);
                    self.pump_ost(ost);
                }
            }
            Ev::Drained { ost, request } => {
                self.take_sync(ost as usize, *request);
                self.pump_ost(ost);
            }
            Ev::CommitStep { ost, woken } => self.commit_step_ended(ost, woken),
            Ev::JournalTimer { ost } => {
                if self.journal_timer[ost as usize] == Some(self.now) {
                    self.journal_timer[ost as usize] = None;
                    self.journals[ost as usize].handle_timeout(self.now);
                    self.pump_ost(ost);
                }
            }
            Ev::Work(w) => return Some(Happening::Work(w)),
        }
        None
    }

    /// Blocking callbacks that waited for a client's callback thread.
    pub fn callbacks_queued(&self) -> u64 {
        self.callback_threads.iter().map(CallbackThreads::waited).sum()
    }

    /// Send what client `node` has to send, collect its finished operations
    /// and arm its timer. Call after every input to the client.
    pub fn pump_client(&mut self, node: u32) {
        let latency = self.model.latency;
        let n = node as usize;
        while let Some((ost, msg)) = self.clients[n].poll_transmit() {
            let cpu = self.send_cpu(&msg);
            let leave = if self.model.cores.is_some() {
                self.charge(n, self.now, cpu, CpuUse::Messages)
            } else {
                // The node prepares its messages one after another.
                let leave = later(self.now, self.node_cpu_free[n]) + cpu;
                self.node_cpu_free[n] = leave;
                leave
            };
            self.thread_busy(Thread::Client(node), leave);
            if let (ToOst::Cancel { lock }, Some(threads)) = (&msg, self.callback_threads.get_mut(n)) {
                threads.release(ost, *lock);
            }
            self.queue.push(leave + latency, Ev::AtOss { ost: ost.0, node, msg });
        }
        self.pump_callback_threads(node);
        while let Some(event) = self.clients[n].poll_event() {
            match event {
                ClientEvent::OpDone { op, result } => self.done.push_back(Happening::OpDone { node, op, result }),
                ClientEvent::DataLost { bytes, .. } => self.bytes_lost += bytes,
                ClientEvent::OstRecovering { .. } => {}
            }
        }
        if self.check {
            self.clients[n].check_invariants();
        }
        if let Some(t) = self.clients[n].poll_timeout() {
            let t = t.max(self.now);
            if self.client_timer[n].is_none_or(|s| t < s) {
                self.client_timer[n] = Some(t);
                self.queue.push(t, Ev::ClientTimer { node });
            }
        }
    }

    fn pump_ost(&mut self, ost: u32) {
        let latency = self.model.latency;
        let o = ost as usize;
        self.pump_syncs(o);
        while let Some((client, msg)) = self.osts[o].poll_transmit() {
            let sent = match &msg {
                ToClient::Blocking { .. } if self.model.callback_cpu > Duration::ZERO => {
                    self.server_cpu(ost, self.model.callback_cpu)
                }
                _ => self.now,
            };
            // The OSS's network thread writes it out.
            let _ = self.hand_off(Thread::Net(self.model.oss_of(ost)), sent);
            let mut at = sent + latency;
            if let ToClient::ReadReply { result: Ok(data), .. } = &msg {
                // The client checksums the bulk it received before using it.
                let cpu = self.checksum_time(data.len());
                if cpu > Duration::ZERO {
                    at = self.charge(client.0 as usize, at, cpu, CpuUse::Messages);
                }
            }
            self.queue.push(at, Ev::AtClient { node: client.0, ost, msg });
        }
        if self.check {
            self.osts[o].check_invariants();
        }
        if let Some(t) = self.osts[o].poll_timeout() {
            let t = t.max(self.now);
            if self.ost_timer[o].is_none_or(|s| t < s) {
                self.ost_timer[o] = Some(t);
                self.queue.push(t, Ev::OstTimer { ost });
            }
        }
    }

    /// Hand the OST's syncs to its journal (or answer them at once when
    /// commits take no time), give it the syncs the journal has answered,
    /// and arm the journal's timer.
    fn pump_syncs(&mut self, o: usize) {
        let now = self.now;
        loop {
            while let Some(request) = self.osts[o].poll_sync() {
                self.start_sync(o, request);
            }
            let Some(journal) = self.journals.get_mut(o) else { return };
            let mut answered = false;
            while let Some(token) = journal.poll_synced() {
                self.osts[o].handle_synced(now, token, &[]);
                answered = true;
            }
            // An answered commit may start the next one (with recovery, the
            // syncs that came meanwhile share it).
            if !answered {
                break;
            }
        }
        let Some(journal) = self.journals.get_mut(o) else { return };
        #[cfg(debug_assertions)]
        journal.check_invariants();
        if let Some(t) = journal.poll_timeout() {
            let t = t.max(now);
            if self.journal_timer[o].is_none_or(|s| t < s) {
                self.journal_timer[o] = Some(t);
                self.queue.push(t, Ev::JournalTimer { ost: o as u32 });
            }
        }
    }

    /// A sync the OST asked for: it writes back what its objects (a
    /// commit's, every object it covers) left in the host's page cache,
    /// and waits for that before the journal takes it.
    fn start_sync(&mut self, o: usize, request: SyncRequest) {
        let now = self.now;
        if let Some(threads) = self.commit_threads.as_mut() {
            if threads.submit(o, request) {
                self.commit_step(o);
            }
            return;
        }
        if let Some(cache) = self.host_cache.as_mut() {
            let mut flushed = match request.object.is_none() && request.commit.is_empty() {
                true => cache.sync(o as u32, None),
                false => Flushed::default(),
            };
            for &object in request.object.iter().chain(&request.commit) {
                flushed += cache.sync(o as u32, Some(object));
            }
            if self.check {
                cache.check_invariants();
            }
            if flushed.disk > Duration::ZERO {
                let ready = self.writeback_cpu(now, 0, flushed.bytes);
                let d = self.model.disk_of(o as u32);
                self.disk_free[d] = later(ready, self.disk_free[d]) + flushed.disk;
            }
        }
        let d = self.model.disk_of(o as u32);
        if self.model.host_cache && self.disk_free[d] > now {
            // What was written before the sync is still going from the
            // host's page cache to the disk: the sync waits for it.
            self.queue.push(self.disk_free[d], Ev::Drained { ost: o as u32, request: Box::new(request) });
            return;
        }
        self.take_sync(o, request);
    }

    /// Hands a sync to the OST's journal, or answers it at once when
    /// commits take no time.
    fn take_sync(&mut self, o: usize, request: SyncRequest) {
        match self.journals.get_mut(o) {
            // Without recovery every sync names the object asked for; with
            // it, a commit names those it covers.
            Some(journal) => {
                let mut objects = request.commit;
                objects.extend(request.object);
                journal.handle_sync(self.now, &objects, request.token)
            }
            None => self.osts[o].handle_synced(self.now, request.token, &[]),
        }
    }

    /// OST `ost`'s commit thread's `fdatasync` ended: the thread wakes
    /// (on the host's cores, where they are modelled), then takes its next
    /// step.
    fn commit_step_ended(&mut self, ost: u32, woken: bool) {
        let runs = if woken { self.now } else { self.hand_off(Thread::Commit(ost), self.now) };
        if runs > self.now {
            self.queue.push(runs, Ev::CommitStep { ost, woken: true });
            return;
        }
        self.commit_step(ost as usize);
        self.pump_ost(ost);
    }

    /// OST `o`'s commit thread takes its next steps: an `fdatasync` of an
    /// object (what the host's cache still holds of it, at the disk's
    /// rate, and `journal_commit`) or of the commit point
    /// (`commit_point`), each after its CPU on the host (see
    /// [`World::writeback_cpu`]) and the disk's earlier work and ending in
    /// a [`Ev::CommitStep`]; or the answer of a request done.
    fn commit_step(&mut self, o: usize) {
        let (own, bytes) = loop {
            let threads = self.commit_threads.as_mut().expect("commit threads modelled");
            let Some(step) = threads.step(o) else { return };
            if self.check {
                threads.check_invariants();
            }
            match step {
                Step::Sync(object) => {
                    let cache = self.host_cache.as_mut().map_or(Flushed::default(), |c| c.sync(o as u32, Some(object)));
                    break (plus(cache.disk, self.model.journal_commit), cache.bytes);
                }
                Step::Point => break (self.model.commit_point, 0),
                // Then the next request's first step.
                Step::Answer(request) => self.take_sync(o, *request),
            }
        };
        let ready = self.writeback_cpu(self.now, 1, bytes);
        let d = self.model.disk_of(o as u32);
        let end = later(ready, self.disk_free[d]) + own;
        self.disk_free[d] = end;
        self.queue.push(end, Ev::CommitStep { ost: o as u32, woken: false });
    }

    fn at_oss(&mut self, ost: u32, node: u32, msg: ToOst) {
        match msg {
            ToOst::Write { .. } | ToOst::Read { .. } => {
                let oss = self.model.oss_of(ost);
                self.oss_pending[oss as usize].push_back((ost, node, msg));
                self.start_io(oss);
            }
            other => {
                // The earliest free service thread of the OSS takes it.
                let done = self.server_cpu(ost, self.model.lock_cpu);
                self.thread_busy(Thread::Service(ost), done);
                self.queue.push(done, Ev::OstInput { ost, node, msg: other, io: false });
            }
        }
    }

    /// Give waiting I/O RPCs of `oss` to free service threads.
    fn start_io(&mut self, oss: u32) {
        let s = oss as usize;
        while self.oss_busy[s] < self.model.oss_threads {
            let Some((ost, node, msg)) = self.oss_pending[s].pop_front() else { return };
            self.oss_busy[s] += 1;
            let done = match &msg {
                ToOst::Write { object, offset, data, .. } => self.write_time(ost, node, *object, *offset, data.len()),
                ToOst::Read { len, .. } => self.read_time(ost, node, *len),
                _ => unreachable!("only I/O RPCs queue for service threads"),
            };
            self.thread_busy(Thread::Service(ost), done);
            self.queue.push(done, Ev::OstInput { ost, node, msg, io: true });
        }
    }

    /// Bulk from the node to the OSS, then the disk.
    fn write_time(&mut self, ost: u32, node: u32, object: ObjectId, object_offset: u64, len: u64) -> Instant {
        let first_maps = match self.frames.as_mut() {
            Some(frames) => frames.map(node, len.div_ceil(PAGE_SIZE)),
            None => 0,
        };
        let m = &self.model;
        let (n, s, d) = (node as usize, m.oss_of(ost) as usize, m.disk_of(ost));
        let mut bulk_done = if m.write_bulk_shared {
            // The pages are in the client's memory, which the OSS reads.
            self.now
        } else {
            let tx = later(self.now, self.node_tx_free[n]) + transfer(len, m.node_bw);
            self.node_tx_free[n] = tx;
            let rx = later(self.now, self.oss_rx_free[s]) + transfer(len, m.oss_bw);
            self.oss_rx_free[s] = rx;
            later(tx, rx) + m.latency
        };
        let mut overhead = plus(m.rpc_overhead, Duration(m.page_first_map.as_ns().saturating_mul(first_maps)));
        // The service thread's work on the bulk's pages, before the disk.
        let pages = m.rpc_pages_cpu(len);
        if m.servers_on_node {
            // The service's CPU work takes a core of the node first.
            bulk_done = self.charge(0, bulk_done, plus(overhead, pages), CpuUse::Io);
            overhead = Duration::ZERO;
        } else {
            bulk_done = bulk_done + pages;
        }
        let m = &self.model;
        let mut disk = transfer(len, m.ost_write_bw);
        let partial = partial_stripe_bytes(object_offset, len, m.raid_stripe_bytes);
        if partial > 0 {
            self.rmw_writes += 1;
            self.rmw_bytes += partial;
            disk = plus(disk, transfer(partial, m.rmw_read_bw));
        }
        if m.host_cache {
            // The service copies the bytes into the host's page cache and
            // replies; the disk takes them after, in order, at once or when
            // a sync writes them back (see [`HostCache`]).
            let copy = plus(overhead, transfer(len, m.host_cache_write_bw.unwrap_or(m.copy_bw)));
            let copied = if m.servers_on_node { self.charge(0, bulk_done, copy, CpuUse::Io) } else { bulk_done + copy };
            let to_disk = match self.host_cache.as_mut() {
                Some(cache) => cache.write(ost, object, len, disk),
                None => Some(Flushed { bytes: len, disk }),
            };
            if let Some(flushed) = to_disk {
                // The service replies once the bytes are in the cache; what
                // goes to the disk now takes the host's CPU to write back.
                let ready = self.writeback_cpu(copied, 0, flushed.bytes);
                self.disk_free[d] = later(ready, self.disk_free[d]) + flushed.disk;
            }
            return copied;
        }
        let done = later(bulk_done, self.disk_free[d]) + plus(overhead, disk);
        self.disk_free[d] = done;
        done + m.access_latency
    }

    /// The disk, then bulk from the OSS to the node.
    fn read_time(&mut self, ost: u32, node: u32, len: u64) -> Instant {
        let (mut ready, mut overhead, pages) = (self.now, self.model.rpc_overhead, self.model.rpc_pages_cpu(len));
        if self.model.servers_on_node {
            ready = self.charge(0, ready, plus(overhead, pages), CpuUse::Io);
            overhead = Duration::ZERO;
        } else {
            // The service thread's work on the bulk's pages, before the disk.
            ready = ready + pages;
        }
        let m = &self.model;
        let (n, s, d) = (node as usize, m.oss_of(ost) as usize, m.disk_of(ost));
        let disk = later(ready, self.disk_free[d]) + plus(overhead, transfer(len, m.ost_read_bw));
        self.disk_free[d] = disk;
        let disk = disk + m.access_latency;
        let tx = later(disk, self.oss_tx_free[s]) + transfer(len, m.oss_bw);
        self.oss_tx_free[s] = tx;
        let rx = later(disk, self.node_rx_free[n]) + transfer(len, m.node_bw);
        self.node_rx_free[n] = rx;
        later(tx, rx) + m.latency
    }

    /// An MPI message of `bytes` from node `from` to node `to`, leaving at
    /// `start` (not before now: later where it waits for its receiver's
    /// test); returns when it has arrived. Within a node it is a memory copy.
    /// Between nodes of one host (`[compute] hosts = "one"`) no wire
    /// carries it: the receiver copies it out of the sender's memory (Open
    /// MPI's single copy over shared memory, `process_vm_readv`) at the MPI
    /// bandwidth measured on the host, on the host's cores.
    ///
    /// Each end spends `mpi_message_cpu` on the message (LogP's overhead),
    /// on its node's cores where they are modelled; within a node or a
    /// host the copy itself takes a core too.
    pub fn mpi_send(&mut self, from: u32, to: u32, bytes: u64, start: Instant) -> Instant {
        debug_assert!(start >= self.now, "a message leaves in the past");
        let cpu = self.model.mpi_message_cpu;
        let sent = self.node_cpu(from, start, cpu, CpuUse::Mpi);
        if from == to {
            let copied = self.node_cpu(from, sent, transfer(bytes, self.model.copy_bw), CpuUse::Mpi);
            return self.node_cpu(to, copied, cpu, CpuUse::Mpi);
        }
        let m = &self.model;
        if m.one_host {
            let copy = plus(transfer(bytes, m.mpi_bw), cpu);
            return self.node_cpu(to, sent + m.mpi_latency, copy, CpuUse::Mpi);
        }
        let tx = later(sent, self.node_tx_free[from as usize]) + transfer(bytes, m.mpi_bw);
        self.node_tx_free[from as usize] = tx;
        let rx = later(sent, self.node_rx_free[to as usize]) + transfer(bytes, m.mpi_bw);
        self.node_rx_free[to as usize] = rx;
        let arrived = later(tx, rx) + m.mpi_latency;
        self.node_cpu(to, arrived, cpu, CpuUse::Mpi)
    }

    /// Client `node`'s CPU time for the page frames the write it has just
    /// taken into its cache touched for the first time (zero when they
    /// cost nothing: see [`Frames`]).
    pub fn first_touch(&mut self, node: u32) -> Duration {
        let Some(frames) = self.frames.as_mut() else { return Duration::ZERO };
        // The frames in use: the cache's pages, and those kept until their
        // OST commits them (counted twice while both, as the client's cache
        // budget counts them; its trim then lets such pages go).
        let client = &self.clients[node as usize];
        let in_use = client.cache().cached_pages() as u64 + client.unstable_bytes().div_ceil(PAGE_SIZE);
        let new = frames.touch(node, in_use);
        if self.check {
            frames.check_invariants();
        }
        Duration(self.model.page_first_touch.as_ns().saturating_mul(new))
    }

    /// A message handed to `thread` at `at`: if the thread sleeps, its
    /// wake-up's CPU time on its host's cores (a busy core's cost, or an
    /// idle one's when a core has nothing to run then, or cores are not
    /// modelled). The servers'
    /// threads are charged only on the compute node's host: elsewhere
    /// their per-message costs are what was measured on their own.
    /// Returns when the thread runs: at `at`, or once its wake-up is done.
    fn hand_off(&mut self, thread: Thread, at: Instant) -> Instant {
        let host = match thread {
            Thread::Client(n) => n as usize,
            Thread::Net(_) | Thread::Service(_) | Thread::Commit(_) if self.model.servers_on_node => 0,
            Thread::Net(_) | Thread::Service(_) | Thread::Commit(_) => return at,
        };
        let Some(handoffs) = self.handoffs.as_mut() else { return at };
        if !handoffs.hand(thread, at) {
            return at;
        }
        let cost = self.wake_up_cost(host, at);
        let end = self.charge(host, at, cost, CpuUse::WakeUps);
        let handoffs = self.handoffs.as_mut().expect("hand-offs modelled");
        handoffs.busy(thread, end);
        if self.check {
            handoffs.check_invariants();
        }
        end
    }

    /// Waking a thread of host `host` at `at`: an idle core's cost when a
    /// core has nothing to run then (or cores are not modelled); with
    /// every core busy, the waker's core's cost one time in `cores` and
    /// another busy core's the rest (a woken thread lands on any core
    /// alike), as their mean, which keeps the run deterministic.
    fn wake_up_cost(&self, host: usize, at: Instant) -> Duration {
        let Some(cores) = self.clients[host].cores().filter(|c| !c.idle_at(at)) else {
            return self.model.handoff_idle_core;
        };
        let m = &self.model;
        if m.handoff_other_busy_core == m.handoff {
            return m.handoff;
        }
        let n = u64::from(cores.count().max(1));
        Duration((m.handoff.as_ns() + (n - 1) * m.handoff_other_busy_core.as_ns()) / n)
    }

    /// A rank of node `node` wakes from a sleep at `at` (see
    /// [`crate::mpi_waits`]): its wake-up's CPU time on the node's cores.
    pub fn rank_wake_up(&mut self, node: u32, at: Instant) -> Instant {
        self.mpi_wakeups += 1;
        let cost = self.wake_up_cost(node as usize, at);
        self.node_cpu(node, at, cost, CpuUse::WakeUps)
    }

    /// `thread` runs until `until` at least (with hand-offs modelled).
    fn thread_busy(&mut self, thread: Thread, until: Instant) {
        if let Some(handoffs) = self.handoffs.as_mut() {
            handoffs.busy(thread, until);
        }
    }

    /// Hand-offs that woke a sleeping thread (`None` when not modelled).
    pub fn handoffs(&self) -> Option<u64> {
        self.handoffs.as_ref().map(Handoffs::woke)
    }

    /// The `fdatasync`s the OSTs' commit threads began (0 where commits
    /// are journal commits).
    pub fn commit_fdatasyncs(&self) -> u64 {
        self.commit_threads.as_ref().map_or(0, |threads| threads.syncs)
    }

    /// Page frames the clients wrote into for the first time (`None` where
    /// first touches cost nothing and are not followed).
    pub fn frames_touched(&self) -> Option<u64> {
        self.frames.as_ref().map(Frames::touched)
    }

    /// The same by kind of thread.
    pub fn handoffs_by_thread(&self) -> Option<[(&'static str, u64); 4]> {
        self.handoffs.as_ref().map(Handoffs::woke_by_kind)
    }

    /// The CPU time run on every host's cores so far (`None` where cores
    /// are not modelled): what the model charged for copies, the clients'
    /// and MPI's work and, on one machine, the servers'.
    pub fn cpu_busy(&self) -> Option<Duration> {
        self.model.cores?;
        let hosts = if self.model.one_host { &self.clients[..1] } else { &self.clients[..] };
        let busy = hosts.iter().filter_map(|c| c.cores()).map(|c| c.busy().as_ns()).sum();
        Some(Duration(busy))
    }

    /// Runs `work` of node `node` from `ready` on: on its cores where they
    /// are modelled, else at once.
    pub fn node_cpu(&mut self, node: u32, ready: Instant, work: Duration, use_: CpuUse) -> Instant {
        if work == Duration::ZERO {
            return ready;
        }
        self.charge(node as usize, ready, work, use_)
    }

    /// Runs `work`, for `use_`, on host `host`'s cores from `ready` on (at
    /// once where cores are not modelled), and notes it in the ledger.
    fn charge(&mut self, host: usize, ready: Instant, work: Duration, use_: CpuUse) -> Instant {
        if self.clients[host].cores().is_some() {
            self.cpu.add(use_, work);
        }
        self.clients[host].run_on_cores(ready, work)
    }

    /// The CPU time run on the hosts' cores by use, the clients' copies
    /// into their caches last (`None` where cores are not modelled).
    pub fn cpu_uses(&self) -> Option<Vec<(&'static str, Duration)>> {
        let total = self.cpu_busy()?;
        self.cpu.check_invariants(total);
        Some(self.cpu.breakdown(total))
    }

    /// The client's CPU time to send `msg`: per RPC, for bulk per page and
    /// the checksum of a write's bytes, and for an enqueue the rest of its
    /// lock's life at the client (its grant taken, the lock given back).
    fn send_cpu(&self, msg: &ToOst) -> Duration {
        let m = &self.model;
        let pages = |len: u64| Duration(m.client_cpu_per_page.as_ns().saturating_mul(len.div_ceil(PAGE_SIZE)));
        match msg {
            ToOst::Write { data, .. } => {
                plus(plus(m.client_cpu_per_rpc, pages(data.len())), self.checksum_time(data.len()))
            }
            ToOst::Read { len, .. } => plus(m.client_cpu_per_rpc, pages(*len)),
            ToOst::Enqueue { .. } => plus(m.client_cpu_per_rpc, m.client_cpu_per_lock),
            _ => m.client_cpu_per_rpc,
        }
    }

    /// A core's time to checksum `bytes` (zero without checksums).
    fn checksum_time(&self, bytes: u64) -> Duration {
        match self.model.checksum_bw {
            Some(bw) => transfer(bytes, bw),
            None => Duration::ZERO,
        }
    }

    /// The CPU of an OST's `syncs` `fdatasync`s (each `sync_cpu`) and of
    /// writing `bytes` back from the host's page cache (at
    /// `writeback_cpu_bw`), run on the host's cores from `ready` where the
    /// servers share them; returns when it ends (`ready` where they do not:
    /// elsewhere the servers' costs are what was measured on their own).
    fn writeback_cpu(&mut self, ready: Instant, syncs: u64, bytes: u64) -> Instant {
        let m = &self.model;
        if !m.servers_on_node {
            return ready;
        }
        let writeback = m.writeback_cpu_bw.map_or(Duration::ZERO, |bw| transfer(bytes, bw));
        let work = plus(Duration(m.sync_cpu.as_ns().saturating_mul(syncs)), writeback);
        if work == Duration::ZERO {
            return ready;
        }
        self.charge(0, ready, work, CpuUse::Syncs)
    }

    /// Runs `work` of the OSS serving `ost` on its earliest free service
    /// thread (and, with the servers on the compute node, a core of that
    /// node); returns when it ends.
    fn server_cpu(&mut self, ost: u32, work: Duration) -> Instant {
        let oss = self.model.oss_of(ost) as usize;
        let free = self.lock_threads[oss].pop_front().expect("an OSS has service threads");
        let start = later(self.now, free);
        let done = if self.model.servers_on_node { self.charge(0, start, work, CpuUse::Locks) } else { start + work };
        // Work of equal length keeps the threads sorted by pushing at the
        // back; work of another length is put in its place.
        let threads = &mut self.lock_threads[oss];
        let at = threads.iter().rposition(|&t| t <= done).map_or(0, |i| i + 1);
        threads.insert(at, done);
        done
    }

    /// Delivers the blocking callbacks node `node`'s freed threads can take,
    /// and frees the threads of locks the client no longer holds (their
    /// cancel left earlier, or they were never granted here).
    fn pump_callback_threads(&mut self, node: u32) {
        let n = node as usize;
        let Some(threads) = self.callback_threads.get_mut(n) else { return };
        let cache = self.clients[n].lock_cache();
        threads.release_where(|ost, lock| cache.by_handle(ost, lock).is_none());
        while let Some((ost, msg)) = threads.next_waiting() {
            self.queue.push(self.now, Ev::AtClient { node, ost, msg });
        }
        if self.check {
            threads.check_invariants();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_stripes() {
        let s = 1 << 20;
        assert_eq!(partial_stripe_bytes(0, s, s), 0);
        assert_eq!(partial_stripe_bytes(0, 4 * s, s), 0);
        assert_eq!(partial_stripe_bytes(0, s / 2, s), s);
        assert_eq!(partial_stripe_bytes(s / 2, s, s), 2 * s);
        assert_eq!(partial_stripe_bytes(s / 2, s / 4, s), s);
        assert_eq!(partial_stripe_bytes(s, 3 * s + 1, s), s);
    }

    #[test]
    fn events_stay_small() {
        // Every pending event sits in the queue's table; the rare big
        // messages (a replayed lock's request) are boxed to keep it so.
        let size = std::mem::size_of::<Ev<u64>>();
        assert!(size <= 80, "an event takes {size} bytes");
    }

    #[test]
    fn transfer_rounds_up() {
        assert_eq!(transfer(1, 1e9), Duration(1));
        assert_eq!(transfer(1 << 30, (1u64 << 30) as f64), Duration(1_000_000_000));
    }
}
