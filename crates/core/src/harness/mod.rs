//! A deterministic cluster in one process: N clients and M OSTs exchanging
//! messages in virtual time, in the style of quinn-proto's test `Pair`.
//!
//! Every message gets a latency drawn from one seeded RNG; messages on one
//! (sender, receiver) link are delivered in order, as TCP would. Time only
//! moves when [`Harness::step`] delivers the next message or fires the next
//! timer, so a run is a pure function of its seed and its workload, and a
//! failing seed replays exactly. [`Harness::trace_hash`] fingerprints the
//! whole message history for determinism checks.
//!
//! The workload API ([`Harness::write`], [`Harness::read`], ...) starts
//! operations on a client at the current virtual time and returns their
//! [`OpId`]; [`Harness::wait`] drives the cluster until one completes.
//! Faults: [`Harness::crash`] stops a client dead (as SIGKILL would), and the
//! OSTs evict it once its callbacks time out. With
//! [`HarnessConfig::recovery`], the OSTs keep their objects in
//! [`JournalStore`]s and can crash and restart ([`Harness::crash_ost`],
//! [`Harness::restart_ost`]: what was not committed is lost, the clients
//! replay it), connections can drop ([`Harness::drop_connection`]) and
//! links part ([`Harness::partition`], [`Harness::heal`]), and disks can
//! fail ([`Harness::fail_writes`], [`Harness::fail_commits`]); the network
//! can slow down ([`Harness::set_latency`]). The harness
//! plays the drivers' part: it tells a client when its connection to an OST
//! is lost and when a new one is up, as a network driver would.
//!
//! Raw peers ([`HarnessConfig::raw_peers`]): client ids with no [`Client`]
//! behind them, whose messages the driver writes itself
//! ([`Harness::send_raw`]) and whose answers it reads
//! ([`Harness::take_raw_inbox`]): a hostile or broken node speaking the
//! protocol, for the fault swarm's adversary. Their messages travel as any
//! client's (latency, order per link, partitions, OST crashes).

pub mod demo;
pub mod workload;

use crate::client::ladvise::Advice;
use crate::client::{Client, ClientConfig, ClientError, ClientEvent, FileHandle, LadviseOutcome, OpId, OpOutput};
use crate::errno::Errno;
use crate::layout::{Layout, LayoutError};
use crate::ldlm::proof::LockKey;
use crate::ldlm::stats::LockCounters;
use crate::ldlm::GroupId;
use crate::msg::IoError;
use crate::msg::{Payload, ToClient, ToOst};
use crate::ost::{Ost, OstConfig, OstCounters, OstRecord, RecoveryConfig, SyncRequest};
use crate::store::JournalStore;
use crate::units::{ClientId, Duration, Epoch, Instant, ObjectId, OstIndex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
pub struct HarnessConfig {
    pub clients: u32,
    pub osts: u32,
    pub seed: u64,
    /// One-way message latency, drawn uniformly from this range.
    pub latency_min: Duration,
    pub latency_max: Duration,
    pub client: ClientConfig,
    /// Client ids after the clients' (`clients..clients + raw_peers`)
    /// with no client behind them (see the module docs).
    pub raw_peers: u32,
    pub ost: OstConfig,
    /// Check every node's invariants after every step (tests).
    pub check_invariants: bool,
    /// Sessions, commits and recovery: clients keep what the OSTs have not
    /// committed and replay it after an OST restarts (`client.recovery`
    /// and `ost.recovery` are set from it, with this window).
    pub recovery: Option<RecoveryConfig>,
    /// How long an OST's commit takes (its `fdatasync`s and record): zero
    /// answers each sync as it is asked; more lets changes, syncs and
    /// notices arrive while a commit runs, as on a disk.
    pub commit_latency: Duration,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            clients: 2,
            osts: 2,
            seed: 0,
            latency_min: Duration::from_us(5),
            latency_max: Duration::from_us(50),
            client: ClientConfig::default(),
            raw_peers: 0,
            ost: OstConfig::default(),
            check_invariants: true,
            recovery: None,
            commit_latency: Duration::ZERO,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Node {
    Client(ClientId),
    Ost(OstIndex),
}

#[derive(Debug)]
enum Message {
    ToOst {
        from: ClientId,
        to: OstIndex,
        message: ToOst,
    },
    ToClient {
        from: OstIndex,
        to: ClientId,
        message: ToClient,
    },
    /// OST `ost`'s disk has done a commit it was asked for in life `epoch`.
    Synced {
        ost: OstIndex,
        epoch: Epoch,
        request: SyncRequest,
    },
}

/// The cluster did not finish its work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    #[error("stalled at {now}: {ops_pending} operations pending, nothing in flight and no timer set")]
    Stalled { now: Instant, ops_pending: usize },
    #[error("still busy after {steps} steps at {now}")]
    StepLimit { now: Instant, steps: u64 },
}

pub struct Harness {
    config: HarnessConfig,
    now: Instant,
    clients: Vec<Client>,
    osts: Vec<Ost<JournalStore>>,
    /// What each OST keeps on disk beside its objects.
    records: Vec<OstRecord>,
    /// OSTs crashed and not yet restarted.
    down: BTreeSet<OstIndex>,
    /// Links that carry nothing.
    parted: BTreeSet<(ClientId, OstIndex)>,
    queue: BTreeMap<(Instant, u64), Message>,
    link_last: BTreeMap<(Node, Node), Instant>,
    rng: ChaCha8Rng,
    sequence: u64,
    completed: BTreeMap<(ClientId, OpId), Result<OpOutput, ClientError>>,
    lost: Vec<(ClientId, OstIndex, u64)>,
    crashed: BTreeSet<ClientId>,
    /// What the OSTs sent the raw peers, not yet taken.
    raw_inbox: Vec<(ClientId, OstIndex, ToClient)>,
    object_next: u64,
    start_ost_next: u32,
    trace_hash: u64,
    trace: Option<Vec<String>>,
    steps: u64,
}

impl Harness {
    pub fn new(mut config: HarnessConfig) -> Result<Self, ClientError> {
        assert!(config.clients > 0 && config.osts > 0, "a harness needs clients and OSTs");
        assert!(config.latency_min <= config.latency_max);
        if let Some(recovery) = config.recovery {
            config.client.recovery = true;
            config.ost = config.ost.clone().with_recovery(recovery);
        }
        let clients =
            (0..config.clients).map(|c| Client::new(ClientId(c), config.client.clone())).collect::<Result<_, _>>()?;
        // Each OST's key for its proofs, drawn from the seed (a real OSS
        // draws it from the system's random source).
        let mut keys = ChaCha8Rng::seed_from_u64(config.seed ^ 0x6c61_6e65_6b65_7973);
        let keys: Vec<LockKey> = (0..config.osts).map(|_| LockKey([keys.gen(), keys.gen()])).collect();
        let osts = (0..config.osts)
            .map(|o| {
                let mut ost = Ost::new(OstIndex(o), config.ost.clone(), JournalStore::new());
                ost.set_lock_key(keys[o as usize]);
                ost
            })
            .collect();
        Ok(Harness {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            records: keys.iter().map(|&lock_key| OstRecord { lock_key, ..OstRecord::default() }).collect(),
            down: BTreeSet::new(),
            parted: BTreeSet::new(),
            config,
            now: Instant::ZERO,
            clients,
            osts,
            queue: BTreeMap::new(),
            link_last: BTreeMap::new(),
            sequence: 0,
            completed: BTreeMap::new(),
            lost: Vec::new(),
            crashed: BTreeSet::new(),
            raw_inbox: Vec::new(),
            object_next: 1,
            start_ost_next: 0,
            trace_hash: FNV_OFFSET,
            trace: None,
            steps: 0,
        })
    }

    /// Keep every delivered message as a line (see [`Harness::trace`]).
    pub fn record_trace(&mut self) {
        self.trace.get_or_insert_with(Vec::new);
    }

    pub fn now(&self) -> Instant {
        self.now
    }
    pub fn seed(&self) -> u64 {
        self.config.seed
    }
    pub fn client(&self, c: ClientId) -> &Client {
        &self.clients[c.0 as usize]
    }
    pub fn ost(&self, o: OstIndex) -> &Ost<JournalStore> {
        &self.osts[o.0 as usize]
    }
    pub fn ost_mut(&mut self, o: OstIndex) -> &mut Ost<JournalStore> {
        &mut self.osts[o.0 as usize]
    }
    /// What OST `o` keeps on disk beside its objects.
    pub fn record(&self, o: OstIndex) -> &OstRecord {
        &self.records[o.0 as usize]
    }
    pub fn is_down(&self, o: OstIndex) -> bool {
        self.down.contains(&o)
    }
    pub fn is_crashed(&self, c: ClientId) -> bool {
        self.crashed.contains(&c)
    }
    pub fn client_count(&self) -> u32 {
        self.clients.len() as u32
    }
    pub fn trace_hash(&self) -> u64 {
        self.trace_hash
    }
    pub fn trace(&self) -> &[String] {
        self.trace.as_deref().unwrap_or(&[])
    }
    pub fn steps(&self) -> u64 {
        self.steps
    }
    /// Dirty bytes lost to evictions: `(client, ost, bytes)`.
    pub fn lost(&self) -> &[(ClientId, OstIndex, u64)] {
        &self.lost
    }

    /// Lock counters summed over all OSTs.
    pub fn lock_counters(&self) -> LockCounters {
        let mut total = LockCounters::default();
        for ost in &self.osts {
            total += ost.locks().counters_total();
        }
        total
    }

    pub fn ost_counters(&self) -> OstCounters {
        let mut total = OstCounters::default();
        for ost in &self.osts {
            total += ost.counters();
        }
        total
    }

    // ----- namespace (the MDS's part, reduced to layouts) -----------------

    /// A new file layout: `stripe_count` fresh objects, round-robin from
    /// `start_ost` (or from the next OST in turn, as the MDS's allocator).
    pub fn create_layout(
        &mut self,
        stripe_size: u64,
        stripe_count: u32,
        start_ost: Option<u32>,
    ) -> Result<Layout, LayoutError> {
        let start = start_ost.unwrap_or(self.start_ost_next % self.config.osts);
        let next = &mut self.object_next;
        let layout = Layout::round_robin(stripe_size, stripe_count, OstIndex(start), self.config.osts, |_| {
            *next += 1;
            ObjectId(*next - 1)
        })?;
        self.start_ost_next = start + 1;
        Ok(layout)
    }

    // ----- workload -------------------------------------------------------

    pub fn open(&mut self, c: ClientId, layout: Layout) -> FileHandle {
        self.clients[c.0 as usize].open(layout)
    }

    pub fn write(&mut self, c: ClientId, fh: FileHandle, offset: u64, data: Vec<u8>) -> OpId {
        self.with_client(c, |cl, now| cl.write(now, fh, offset, data))
    }
    pub fn read(&mut self, c: ClientId, fh: FileHandle, offset: u64, len: u64) -> OpId {
        self.with_client(c, |cl, now| cl.read(now, fh, offset, len))
    }
    pub fn fsync(&mut self, c: ClientId, fh: FileHandle) -> OpId {
        self.with_client(c, |cl, now| cl.fsync(now, fh))
    }
    pub fn close(&mut self, c: ClientId, fh: FileHandle) -> OpId {
        self.with_client(c, |cl, now| cl.close(now, fh))
    }
    pub fn stat(&mut self, c: ClientId, fh: FileHandle) -> OpId {
        self.with_client(c, |cl, now| cl.stat(now, fh))
    }
    pub fn truncate(&mut self, c: ClientId, fh: FileHandle, size: u64) -> OpId {
        self.with_client(c, |cl, now| cl.truncate(now, fh, size))
    }
    pub fn fallocate(&mut self, c: ClientId, fh: FileHandle, cut: crate::msg::Cut) -> OpId {
        self.with_client(c, |cl, now| cl.fallocate(now, fh, cut))
    }
    pub fn group_lock(&mut self, c: ClientId, fh: FileHandle, gid: u64) -> OpId {
        self.with_client(c, |cl, now| cl.group_lock(now, fh, GroupId(gid)))
    }
    pub fn group_unlock(&mut self, c: ClientId, fh: FileHandle, gid: u64) -> OpId {
        self.with_client(c, |cl, now| cl.group_unlock(now, fh, GroupId(gid)))
    }
    pub fn ladvise(&mut self, c: ClientId, fh: FileHandle, advices: &[Advice]) -> Result<LadviseOutcome, ClientError> {
        self.with_client(c, |cl, now| cl.ladvise(now, fh, advices))
    }

    /// Stop a client dead: it neither sends nor receives from now on, and
    /// everything it had not written back is gone with it.
    pub fn crash(&mut self, c: ClientId) {
        if !self.crashed.insert(c) {
            return;
        }
        self.trace_line(format!("{} crash {c}", self.now));
        self.queue.retain(|_, m| !matches!(m, Message::ToOst { from, .. } if *from == c));
    }

    /// OST `o`'s server stops dead (its machine fails): messages to and
    /// from it are lost, and so is every change its disk had not committed.
    /// Its clients see their connections drop.
    pub fn crash_ost(&mut self, o: OstIndex) {
        assert!(self.config.recovery.is_some(), "OSTs crash only in a harness with recovery");
        if !self.down.insert(o) {
            return;
        }
        self.trace_line(format!("{} crash {o}", self.now));
        self.queue.retain(|_, m| match m {
            Message::ToOst { to, .. } => *to != o,
            Message::ToClient { from, .. } => *from != o,
            Message::Synced { ost, .. } => *ost != o, // the commit never happened
        });
        self.osts[o.0 as usize].store_mut().crash();
        for c in self.live_clients() {
            self.with_live_client(c, |cl, now| cl.handle_disconnected(now, o));
        }
    }

    /// OST `o` starts again from its disk (its committed objects and its
    /// record), recovering; its clients connect again.
    pub fn restart_ost(&mut self, o: OstIndex) {
        if !self.down.remove(&o) {
            return;
        }
        self.trace_line(format!("{} restart {o}", self.now));
        let store = std::mem::take(self.osts[o.0 as usize].store_mut());
        let record = self.records[o.0 as usize].clone();
        self.osts[o.0 as usize] = Ost::restart(o, self.config.ost.clone(), store, record, self.now);
        self.collect(Node::Ost(o));
        for c in self.live_clients() {
            if !self.parted.contains(&(c, o)) {
                self.with_live_client(c, |cl, now| cl.handle_reconnected(now, o));
            }
        }
    }

    /// The connection between client `c` and OST `o` breaks (what was in
    /// flight on it is lost) and the client makes a new one at once.
    pub fn drop_connection(&mut self, c: ClientId, o: OstIndex) {
        if self.crashed.contains(&c) || self.down.contains(&o) || self.parted.contains(&(c, o)) {
            return;
        }
        self.trace_line(format!("{} drop {c}-{o}", self.now));
        self.drop_link_messages(c, o);
        self.with_live_client(c, |cl, now| cl.handle_disconnected(now, o));
        self.with_live_client(c, |cl, now| cl.handle_reconnected(now, o));
    }

    /// The link between `c` and `o` carries nothing until [`Harness::heal`]:
    /// the client notices (its pings go unanswered) and waits; the OST's
    /// callbacks to it are lost, so a lock called back meanwhile costs the
    /// client an eviction.
    pub fn partition(&mut self, c: ClientId, o: OstIndex) {
        if self.crashed.contains(&c) || !self.parted.insert((c, o)) {
            return;
        }
        self.trace_line(format!("{} partition {c}-{o}", self.now));
        self.drop_link_messages(c, o);
        self.with_live_client(c, |cl, now| cl.handle_disconnected(now, o));
    }

    pub fn heal(&mut self, c: ClientId, o: OstIndex) {
        if !self.parted.remove(&(c, o)) {
            return;
        }
        self.trace_line(format!("{} heal {c}-{o}", self.now));
        if !self.crashed.contains(&c) && !self.down.contains(&o) {
            self.with_live_client(c, |cl, now| cl.handle_reconnected(now, o));
        }
    }

    /// Messages sent from now on take between `min` and `max` to arrive (a
    /// congested or a quiet network); messages in flight keep their time,
    /// and each link still delivers in order.
    pub fn set_latency(&mut self, min: Duration, max: Duration) {
        assert!(min <= max, "latency range {min:?}..{max:?} is inverted");
        self.trace_line(format!("{} latency {}-{} ns", self.now, min.as_ns(), max.as_ns()));
        self.config.latency_min = min;
        self.config.latency_max = max;
    }

    /// Writes and punches on OST `o`'s disk fail with `errno` (`None`: they work).
    pub fn fail_writes(&mut self, o: OstIndex, errno: Option<Errno>) {
        self.trace_line(format!("{} {o} writes fail with {errno:?}", self.now));
        self.osts[o.0 as usize].store_mut().fail_writes = errno;
    }

    /// Commits on OST `o`'s disk fail with `errno` (`None`: they work).
    pub fn fail_commits(&mut self, o: OstIndex, errno: Option<Errno>) {
        self.trace_line(format!("{} {o} commits fail with {errno:?}", self.now));
        self.osts[o.0 as usize].store_mut().fail_commits = errno;
    }

    /// Raw peer `i`'s client id (see [`HarnessConfig::raw_peers`]).
    pub fn raw_peer(&self, i: u32) -> ClientId {
        assert!(i < self.config.raw_peers, "raw peer {i} of {}", self.config.raw_peers);
        ClientId(self.config.clients + i)
    }

    pub fn is_raw_peer(&self, c: ClientId) -> bool {
        (self.config.clients..self.config.clients + self.config.raw_peers).contains(&c.0)
    }

    /// Raw peer `from` sends `message` to OST `to`, as a client's would
    /// travel (nothing arrives across a partition or at a crashed OST).
    pub fn send_raw(&mut self, from: ClientId, to: OstIndex, message: ToOst) {
        assert!(self.is_raw_peer(from), "{from} is not a raw peer");
        assert!(to.0 < self.config.osts, "no {to}");
        if self.parted.contains(&(from, to)) || self.down.contains(&to) {
            return;
        }
        let at = self.arrival(Node::Client(from), Node::Ost(to));
        self.enqueue(at, Message::ToOst { from, to, message });
    }

    /// Every OST that is up evicts `c`, as the network servers' idle
    /// timeout does a node that has fallen silent (Lustre's ping evictor).
    pub fn evict(&mut self, c: ClientId) {
        self.trace_line(format!("{} evict {c}", self.now));
        let now = self.now;
        let up: Vec<OstIndex> = (0..self.config.osts).map(OstIndex).filter(|o| !self.down.contains(o)).collect();
        for o in up {
            self.osts[o.0 as usize].evict(now, c);
            self.collect(Node::Ost(o));
        }
    }

    /// Whether a message of `c`'s is on its way to an OST.
    pub fn in_flight_from(&self, c: ClientId) -> bool {
        self.queue.values().any(|m| matches!(m, Message::ToOst { from, .. } if *from == c))
    }

    /// What the OSTs sent the raw peers since the last call: (peer, OST,
    /// message), in the order delivered.
    pub fn take_raw_inbox(&mut self) -> Vec<(ClientId, OstIndex, ToClient)> {
        std::mem::take(&mut self.raw_inbox)
    }

    fn live_clients(&self) -> Vec<ClientId> {
        (0..self.config.clients).map(ClientId).filter(|c| !self.crashed.contains(c)).collect()
    }

    fn with_live_client(&mut self, c: ClientId, f: impl FnOnce(&mut Client, Instant)) {
        let now = self.now;
        f(&mut self.clients[c.0 as usize], now);
        self.collect(Node::Client(c));
    }

    fn drop_link_messages(&mut self, c: ClientId, o: OstIndex) {
        self.queue.retain(|_, m| match m {
            Message::ToOst { from, to, .. } => !(*from == c && *to == o),
            Message::ToClient { from, to, .. } => !(*from == o && *to == c),
            Message::Synced { .. } => true,
        });
    }

    fn with_client<T>(&mut self, c: ClientId, f: impl FnOnce(&mut Client, Instant) -> T) -> T {
        assert!(!self.crashed.contains(&c), "workload on crashed client {c}");
        let now = self.now;
        let out = f(&mut self.clients[c.0 as usize], now);
        self.collect(Node::Client(c));
        out
    }

    /// The result of an operation, once it has completed.
    pub fn result(&self, c: ClientId, op: OpId) -> Option<&Result<OpOutput, ClientError>> {
        self.completed.get(&(c, op))
    }

    /// Drive until `op` completes and return its result.
    pub fn wait(&mut self, c: ClientId, op: OpId) -> Result<Result<OpOutput, ClientError>, HarnessError> {
        while !self.completed.contains_key(&(c, op)) {
            if !self.step() {
                return Err(HarnessError::Stalled { now: self.now, ops_pending: self.ops_pending() });
            }
        }
        Ok(self.completed[&(c, op)].clone())
    }

    /// Drive until `op` completes; panics (with the seed) if it fails.
    pub fn wait_ok(&mut self, c: ClientId, op: OpId) -> OpOutput {
        let seed = self.config.seed;
        match self.wait(c, op) {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => panic!("SEED={seed}: {c} op {op:?} failed: {e}"),
            Err(e) => panic!("SEED={seed}: {e}"),
        }
    }

    // ----- driving --------------------------------------------------------

    pub fn ops_pending(&self) -> usize {
        self.clients
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.crashed.contains(&ClientId(*i as u32)))
            .map(|(_, c)| c.ops_pending())
            .sum()
    }

    /// When [`Harness::step`] would act next (its next message, or the
    /// timer it would fire); `None` if it would do nothing. A driver with
    /// nodes of its own (the swarm's MDS) interleaves their events by it.
    pub fn next_event_at(&self) -> Option<Instant> {
        let message_at = self.queue.keys().next().map(|(t, _)| *t);
        match (message_at, self.next_timer()) {
            (Some(m), Some((t, _))) => Some(m.min(t)),
            (Some(m), None) => Some(m),
            (None, Some((t, _))) if self.ops_pending() > 0 => Some(t),
            _ => None,
        }
    }

    /// Move the clock forward to `at` and deliver nothing: for a driver
    /// whose own node acts at `at`, before [`Harness::next_event_at`].
    /// Timers due meanwhile that [`Harness::step`] would not fire (no
    /// operation waits) fire late, at the next step, as they would have.
    pub fn set_clock(&mut self, at: Instant) {
        debug_assert!(self.next_event_at().is_none_or(|next| at <= next), "the clock would pass an event");
        self.now = self.now.max(at);
    }

    /// Destroy `objects` on OST `o`, as the MDS has an OSS do after an
    /// unlink: gone at once and durably. False if the OST is down.
    pub fn destroy_objects(&mut self, o: OstIndex, objects: &[ObjectId]) -> bool {
        if self.down.contains(&o) {
            return false;
        }
        let store = self.osts[o.0 as usize].store_mut();
        for &object in objects {
            store.destroy(object);
        }
        true
    }

    /// Deliver the next message or fire the next timer; false if neither
    /// exists, or if only timers remain and no operation is waiting.
    pub fn step(&mut self) -> bool {
        let message_at = self.queue.keys().next().map(|(t, _)| *t);
        let timer = self.next_timer();
        let fire_timer = match (message_at, timer) {
            (Some(m), Some((t, _))) => t < m,
            (None, Some(_)) => self.ops_pending() > 0,
            (_, None) => false,
        };
        if fire_timer {
            let (t, node) = timer.expect("checked");
            self.now = self.now.max(t);
            self.fire(node);
        } else if message_at.is_some() {
            let ((t, _), message) = self.queue.pop_first().expect("checked");
            self.now = self.now.max(t);
            self.deliver(message);
        } else {
            return false;
        }
        self.steps += 1;
        if self.config.check_invariants {
            self.check_invariants();
        }
        true
    }

    /// Deliver every message and fire every timer due up to `now + by`
    /// (timers fire even with no operation waiting), then set the clock
    /// there: time passing with the cluster left to itself.
    pub fn advance(&mut self, by: Duration) {
        let until = self.now + by;
        loop {
            let message_at = self.queue.keys().next().map(|(t, _)| *t);
            let timer = self.next_timer();
            let next = [message_at, timer.map(|(t, _)| t)].into_iter().flatten().min();
            match next {
                Some(t) if t <= until => {
                    if timer.is_some_and(|(tt, _)| tt == t && message_at.is_none_or(|m| tt < m)) {
                        let (_, node) = timer.expect("checked");
                        self.now = self.now.max(t);
                        self.fire(node);
                    } else {
                        let ((t, _), message) = self.queue.pop_first().expect("checked");
                        self.now = self.now.max(t);
                        self.deliver(message);
                    }
                    self.steps += 1;
                    if self.config.check_invariants {
                        self.check_invariants();
                    }
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
    }

    /// Step until nothing is in flight and no operation waits.
    pub fn drive(&mut self) -> Result<(), HarnessError> {
        self.drive_bounded(u64::MAX)
    }

    /// [`Harness::drive`] with a step budget: a liveness check.
    pub fn drive_bounded(&mut self, steps_max: u64) -> Result<(), HarnessError> {
        let mut steps = 0;
        while self.step() {
            steps += 1;
            if steps >= steps_max {
                return Err(HarnessError::StepLimit { now: self.now, steps });
            }
        }
        match self.ops_pending() {
            0 => Ok(()),
            n => Err(HarnessError::Stalled { now: self.now, ops_pending: n }),
        }
    }

    pub fn check_invariants(&self) {
        for c in &self.clients {
            c.check_invariants();
        }
        for o in &self.osts {
            o.check_invariants();
        }
    }

    fn next_timer(&self) -> Option<(Instant, Node)> {
        let clients = self
            .clients
            .iter()
            .filter(|c| !self.crashed.contains(&c.id()))
            .filter_map(|c| c.poll_timeout().map(|t| (t, Node::Client(c.id()))));
        let osts = self
            .osts
            .iter()
            .filter(|o| !self.down.contains(&o.index()))
            .filter_map(|o| o.poll_timeout().map(|t| (t, Node::Ost(o.index()))));
        clients.chain(osts).min()
    }

    fn fire(&mut self, node: Node) {
        let now = self.now;
        self.trace_line(format!("{now} timer {node:?}"));
        match node {
            Node::Client(c) => self.clients[c.0 as usize].handle_timeout(now),
            Node::Ost(o) => self.osts[o.0 as usize].handle_timeout(now),
        }
        self.collect(node);
    }

    fn deliver(&mut self, message: Message) {
        let now = self.now;
        match message {
            Message::ToOst { from, to, message } => {
                self.trace_line(format!("{now} {from}->{to} {}", summary_to_ost(&message)));
                self.osts[to.0 as usize].handle_message(now, from, message);
                self.collect(Node::Ost(to));
            }
            Message::ToClient { from, to, message } => {
                if self.crashed.contains(&to) {
                    return;
                }
                self.trace_line(format!("{now} {from}->{to} {}", summary_to_client(&message)));
                if self.is_raw_peer(to) {
                    self.raw_inbox.push((to, from, message));
                    return;
                }
                self.clients[to.0 as usize].handle_message(now, from, message);
                self.collect(Node::Client(to));
            }
            Message::Synced { ost, epoch, request } => {
                if self.down.contains(&ost) || self.osts[ost.0 as usize].epoch() != epoch {
                    return;
                }
                self.trace_line(format!("{now} {ost} synced {}", request.token.0));
                self.commit(ost, &request);
                self.collect(Node::Ost(ost));
            }
        }
    }

    /// OST `o`'s disk does the sync `request` (the journal store commits at
    /// once, with the objects whose commit failed; the commit point is on
    /// "disk" before anyone is told), and the OST hears of it.
    fn commit(&mut self, o: OstIndex, request: &SyncRequest) {
        let now = self.now;
        let ost = &mut self.osts[o.0 as usize];
        let objects =
            if request.commit.is_empty() { request.object.into_iter().collect() } else { request.commit.clone() };
        let failures: Vec<(ObjectId, IoError)> = ost
            .store_mut()
            .commit(&objects)
            .into_iter()
            .map(|(object, errno)| (object, IoError::from_errno(errno)))
            .collect();
        let record = &mut self.records[o.0 as usize];
        record.last_committed = record.last_committed.max(request.commit_to);
        ost.handle_synced(now, request.token, &failures);
    }

    /// Move a node's outputs into the network and the result tables.
    fn collect(&mut self, node: Node) {
        match node {
            Node::Client(c) => {
                while let Some((to, message)) = self.clients[c.0 as usize].poll_transmit() {
                    if self.parted.contains(&(c, to)) || self.down.contains(&to) {
                        continue; // nobody there to receive it
                    }
                    let at = self.arrival(node, Node::Ost(to));
                    self.enqueue(at, Message::ToOst { from: c, to, message });
                }
                while let Some(event) = self.clients[c.0 as usize].poll_event() {
                    match event {
                        ClientEvent::OpDone { op, result } => {
                            self.completed.insert((c, op), result);
                        }
                        ClientEvent::DataLost { ost, bytes } => self.lost.push((c, ost, bytes)),
                        // Its requests wait for the recovery: nothing to do.
                        ClientEvent::OstRecovering { .. } => {}
                    }
                }
            }
            Node::Ost(o) => {
                while let Some(request) = self.osts[o.0 as usize].poll_sync() {
                    if self.config.commit_latency == Duration::ZERO {
                        self.commit(o, &request);
                    } else {
                        // Commits end in the order they began: one latency
                        // for all of them.
                        let at = self.now + self.config.commit_latency;
                        let epoch = self.osts[o.0 as usize].epoch();
                        self.enqueue(at, Message::Synced { ost: o, epoch, request });
                    }
                }
                if let Some(record) = self.osts[o.0 as usize].poll_record() {
                    let kept = self.records[o.0 as usize].last_committed;
                    self.records[o.0 as usize] =
                        OstRecord { last_committed: kept.max(record.last_committed), ..record };
                }
                while let Some((to, message)) = self.osts[o.0 as usize].poll_transmit() {
                    if self.parted.contains(&(to, o)) {
                        continue; // lost on a parted link
                    }
                    let at = self.arrival(node, Node::Client(to));
                    self.enqueue(at, Message::ToClient { from: o, to, message });
                }
            }
        }
    }

    fn arrival(&mut self, from: Node, to: Node) -> Instant {
        let (lo, hi) = (self.config.latency_min.as_ns(), self.config.latency_max.as_ns());
        let latency = if lo == hi { lo } else { self.rng.gen_range(lo..=hi) };
        let at = self.now + Duration::from_ns(latency);
        let last = self.link_last.entry((from, to)).or_insert(Instant::ZERO);
        *last = (*last).max(at); // FIFO per link, as one TCP connection
        *last
    }

    fn enqueue(&mut self, at: Instant, message: Message) {
        self.sequence += 1;
        self.queue.insert((at, self.sequence), message);
    }

    /// A line of the driver's own (the fault swarm's MDS events) in the
    /// trace and its hash, so that a replay shows it and a determinism
    /// check covers it.
    pub fn note(&mut self, line: String) {
        self.trace_line(line);
    }

    fn trace_line(&mut self, line: String) {
        for b in line.as_bytes() {
            self.trace_hash = (self.trace_hash ^ *b as u64).wrapping_mul(FNV_PRIME);
        }
        if let Some(t) = self.trace.as_mut() {
            t.push(line);
        }
    }
}

const FNV_OFFSET: u64 = 0xcbf29ce484222325;
const FNV_PRIME: u64 = 0x100000001b3;

/// Messages with their bulk data replaced by a length and checksum (bytes)
/// or a length and the word `phantom`.
fn summary_to_ost(m: &ToOst) -> String {
    match m {
        ToOst::Write { xid, object, offset, data } => {
            let (xid, object, len) = (xid.0, object.0, data.len());
            format!("Write {{ xid: {xid}, object: {object}, offset: {offset}, len: {len}, {} }}", summary(data))
        }
        other => format!("{other:?}"),
    }
}

fn summary_to_client(m: &ToClient) -> String {
    match m {
        ToClient::ReadReply { xid, result: Ok(data) } => {
            format!("ReadReply {{ xid: {}, len: {}, {} }}", xid.0, data.len(), summary(data))
        }
        other => format!("{other:?}"),
    }
}

fn summary(data: &Payload) -> String {
    match data {
        Payload::Bytes(bytes) => format!("sum: {:x}", checksum(bytes)),
        Payload::Phantom(_) => "phantom".to_string(),
        other => format!("sum: {:x}", checksum(&other.clone().into_bytes().expect("bytes"))),
    }
}

fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(FNV_OFFSET, |h, b| (h ^ *b as u64).wrapping_mul(FNV_PRIME))
}
