//! A hostile node among the clients: it speaks the OST protocol with
//! messages of its own making, to show that nothing it sends costs the
//! others a byte, a lock or their progress.
//!
//! The adversary is a raw peer of the harness
//! ([`lanefs_core::harness::Harness::send_raw`]): a client id with no
//! `Client` behind it. It has a node's rights, as a compromised mount with
//! a valid key would (lanefs, like Lustre, trusts a node with the data of
//! the files it writes, so it never writes the run's files: that would be
//! its right, and the oracle would rightly see strange bytes), and it sees
//! more than any node could: the driver lets it read the OSTs' lock tables
//! (the handles, objects and extents of everyone's locks) and their
//! commit counters (the transaction numbers about to be handed out). What
//! it cannot see is a proof, which travels only to the client it was given
//! to. Its moves, drawn from a stream of the seed's own:
//!
//! * forged replays: the locks of others (their handles, objects, modes
//!   and extents) with made-up proofs, its own locks widened, changes with
//!   transaction numbers that are others' or nobody's, to the run's
//!   objects, with made-up proofs or proofs of its own changes; both while
//!   an OST recovers (it reconnects naming the OST's last life when the
//!   OST knew it) and outside recovery;
//! * foreign handles: cancels of others' locks, answers to glimpses it was
//!   never sent, acknowledgements of notices it never had, connects that
//!   name lives of the OST it never saw;
//! * floods within its share: bursts of lock requests on an object of its
//!   own (and, while an OST recovers, past the per-client share of the
//!   requests kept for after it: the OST must evict the adversary, and no
//!   one else), lock requests on the run's objects that call the others'
//!   locks back (it answers the callbacks or leaves them to time out, as
//!   the seed draws), reads and size requests of the run's objects (which
//!   glimpse the writers), syncs, writes and truncates of its own object.
//!
//! What it checks, beside what the oracle and the checkers see in the
//! others' results: after every step, every lock an OST holds for the
//! adversary from an earlier life of the OST is one that life granted it
//! ([`Adversary::check`]): a forged replay never took a lock.
//!
//! In the liveness phase it falls silent, and the OSTs evict it as the
//! network servers' idle timeout evicts a silent node (the harness has no
//! pings): everything it held goes, its GROUP locks on its own object too.

use lanefs_core::extent::Extent;
use lanefs_core::harness::Harness;
use lanefs_core::ldlm::proof::{ChangeProof, LockProof};
use lanefs_core::ldlm::server::HANDLE_EPOCH_SHIFT;
use lanefs_core::ldlm::{EnqueueFlags, GroupId, LockMode, LockRequest};
use lanefs_core::msg::{Cut, EnqueueReply, Payload, ToClient, ToOst};
use lanefs_core::ost::recovery::DEFERRED_PER_CLIENT_MAX;
use lanefs_core::units::{ClientId, Epoch, LockHandle, ObjectId, OstIndex, Transno, Xid, PAGE_SIZE};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Lock requests in one flood on the adversary's own object, at most.
pub const FLOOD_MAX: u64 = 64;
/// Locks it holds or asks for on one OST, at most, before it gives some
/// back: the lock server's and the checkers' per-step checks walk pairs of
/// an object's locks, and thousands would make a seed take minutes. (The
/// per-client bound itself, 65,536, is the lock server's unit tests'.)
pub const HOLD_MAX: usize = 48;
/// The byte the adversary writes to its own object (and forges into the
/// run's objects' replays): no workload pattern makes it.
pub const FORGED_BYTE: u8 = 0xee;

/// What the adversary did, for the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdversaryCounts {
    pub sent: u64,
    pub forged_lock_replays: u64,
    pub forged_change_replays: u64,
    pub foreign_cancels: u64,
    pub floods: u64,
    /// Times an OST evicted it.
    pub evicted: u64,
}

impl std::ops::AddAssign for AdversaryCounts {
    fn add_assign(&mut self, o: AdversaryCounts) {
        self.sent += o.sent;
        self.forged_lock_replays += o.forged_lock_replays;
        self.forged_change_replays += o.forged_change_replays;
        self.foreign_cancels += o.foreign_cancels;
        self.floods += o.floods;
        self.evicted += o.evicted;
    }
}

/// A lock the OSTs granted the adversary, with what a replay needs.
#[derive(Clone, Copy, Debug)]
struct Granted {
    object: ObjectId,
    request: LockRequest,
    extent: Extent,
    proof: LockProof,
}

/// The adversary's state per OST.
#[derive(Debug, Default)]
struct PerOst {
    /// The life of the OST it last saw; `None` before it first connected.
    epoch: Option<Epoch>,
    /// The OST may know it (it connected and was not told it is evicted).
    connected: bool,
    granted: BTreeMap<LockHandle, Granted>,
    /// Every handle the OST ever granted it, in any life.
    ever_granted: BTreeSet<LockHandle>,
    /// Changes acknowledged to it: (transno, proof).
    changes: Vec<(Transno, ChangeProof)>,
    /// It flooded this OST during this recovery already.
    flooded_recovery: Option<Epoch>,
}

/// The hostile node (see the module docs).
pub struct Adversary {
    peer: ClientId,
    osts: u32,
    rng: ChaCha8Rng,
    /// Harness steps between two moves, on average.
    every: u64,
    next_move: u64,
    answers_callbacks: bool,
    xid_next: u64,
    per_ost: Vec<PerOst>,
    /// Lock requests not yet answered, by OST and xid.
    requests: BTreeMap<(OstIndex, Xid), (ObjectId, LockRequest)>,
    /// Lock requests answered `Waiting`, by OST and handle.
    waiting: BTreeMap<(OstIndex, LockHandle), (ObjectId, LockRequest)>,
    silent: bool,
    pub counts: AdversaryCounts,
}

impl Adversary {
    pub fn new(seed: u64, peer: ClientId, osts: u32) -> Adversary {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6164_7665_7273_6172);
        let every = rng.gen_range(5..=200);
        let answers_callbacks = rng.gen_bool(0.5);
        Adversary {
            peer,
            osts,
            rng,
            every,
            next_move: 0,
            answers_callbacks,
            xid_next: 1 << 32,
            per_ost: (0..osts).map(|_| PerOst::default()).collect(),
            requests: BTreeMap::new(),
            waiting: BTreeMap::new(),
            silent: false,
            counts: AdversaryCounts::default(),
        }
    }

    pub fn peer(&self) -> ClientId {
        self.peer
    }

    /// The object of its own on each OST (far above any the MDS hands out).
    fn own_object(&self) -> ObjectId {
        ObjectId((1 << 40) | u64::from(self.peer.0))
    }

    /// From now on it sends nothing (the liveness phase).
    pub fn fall_silent(&mut self) {
        self.silent = true;
    }

    /// Read what the OSTs sent it, and make a move if one is due.
    pub fn act(&mut self, h: &mut Harness, step: u64) {
        for (_, ost, message) in h.take_raw_inbox() {
            self.hear(h, ost, message);
        }
        if self.silent || step < self.next_move {
            return;
        }
        self.next_move = step + self.rng.gen_range(1..=2 * self.every);
        let o = OstIndex(self.rng.gen_range(0..self.osts));
        if h.is_down(o) {
            return;
        }
        let epoch = h.ost(o).epoch();
        let state = &mut self.per_ost[o.0 as usize];
        if let Some(last) = state.epoch.filter(|e| *e != epoch) {
            // The OST restarted: a known adversary may come back to replay
            // (what the last life granted and acknowledged it, and forgeries).
            state.epoch = Some(epoch);
            if state.connected && h.ost(o).is_recovering() && self.rng.gen_bool(0.7) {
                self.send(h, o, ToOst::Connect { resume: Some(last) });
                self.replay_own(h, o);
                self.replay_attack(h, o);
                if self.rng.gen_bool(0.5) {
                    self.send(h, o, ToOst::ReplayDone);
                }
                return;
            }
            self.forget_ost(o);
        }
        if !self.per_ost[o.0 as usize].connected {
            self.per_ost[o.0 as usize].epoch = Some(epoch);
            self.per_ost[o.0 as usize].connected = true;
            self.send(h, o, ToOst::Connect { resume: None });
            return;
        }
        if h.ost(o).is_recovering()
            && self.per_ost[o.0 as usize].flooded_recovery != Some(epoch)
            && self.rng.gen_bool(0.3)
        {
            self.per_ost[o.0 as usize].flooded_recovery = Some(epoch);
            self.recovery_flood(h, o);
            return;
        }
        match self.rng.gen_range(0..12) {
            0 => self.flood(h, o),
            1 => self.contend(h, o),
            2 => self.foreign_cancel(h, o),
            3 | 4 => self.replay_attack(h, o),
            5 => self.change_own(h, o),
            6 => self.read_others(h, o),
            7 => self.stray_answers(h, o),
            8 => self.give_back(h, o),
            9 => {
                let resume = Some(Epoch(self.rng.gen_range(0..4)));
                self.send(h, o, ToOst::Connect { resume });
            }
            10 => {
                self.send(h, o, ToOst::Disconnect);
                self.forget_ost(o);
            }
            _ => self.group_own(h, o),
        }
    }

    /// Every lock an OST holds for the adversary from an earlier life of
    /// the OST was granted to it in that life: no forged replay took one.
    pub fn check(&self, h: &Harness) {
        for o in (0..self.osts).map(OstIndex) {
            if h.is_down(o) {
                continue;
            }
            let life = h.ost(o).epoch().0;
            for (handle, holder, object, mode, extent) in h.ost(o).locks().granted_locks() {
                if holder != self.peer || handle.0 >> HANDLE_EPOCH_SHIFT == life {
                    continue;
                }
                assert!(
                    self.per_ost[o.0 as usize].ever_granted.contains(&handle),
                    "{o} gave the adversary {} a lock it never granted it: {handle:?} {} {extent} of object {}",
                    self.peer,
                    mode.name(),
                    object.0
                );
            }
        }
    }

    fn forget_ost(&mut self, o: OstIndex) {
        let state = &mut self.per_ost[o.0 as usize];
        state.connected = false;
        state.granted.clear();
        state.changes.clear();
        self.requests.retain(|(ost, _), _| *ost != o);
        self.waiting.retain(|(ost, _), _| *ost != o);
    }

    fn send(&mut self, h: &mut Harness, o: OstIndex, message: ToOst) {
        self.counts.sent += 1;
        h.send_raw(self.peer, o, message);
    }

    fn xid(&mut self) -> Xid {
        self.xid_next += 1;
        Xid(self.xid_next)
    }

    fn enqueue(&mut self, h: &mut Harness, o: OstIndex, object: ObjectId, request: LockRequest) {
        let xid = self.xid();
        self.requests.insert((o, xid), (object, request));
        self.send(h, o, ToOst::Enqueue { xid, object, request });
    }

    /// A page-aligned extent within the first `pages` pages.
    fn extent(&mut self, pages: u64) -> Extent {
        let first = self.rng.gen_range(0..pages);
        let last = self.rng.gen_range(first..pages);
        Extent::new(first * PAGE_SIZE, (last + 1) * PAGE_SIZE - 1)
    }

    fn mode(&mut self) -> LockMode {
        if self.rng.gen_bool(0.5) {
            LockMode::ProtectedWrite
        } else {
            LockMode::ProtectedRead
        }
    }

    fn flags(&mut self) -> EnqueueFlags {
        EnqueueFlags { no_expand: self.rng.gen_bool(0.5), speculative: self.rng.gen_bool(0.3) }
    }

    /// The locks others hold on OST `o` (handle, object, mode, extent).
    fn others_locks(&self, h: &Harness, o: OstIndex) -> Vec<(LockHandle, ObjectId, LockMode, Extent)> {
        let peer = self.peer;
        h.ost(o)
            .locks()
            .granted_locks()
            .filter(|(_, holder, ..)| *holder != peer)
            .map(|(handle, _, object, mode, extent)| (handle, object, mode, extent))
            .collect()
    }

    /// A burst of lock requests on its own object.
    fn flood(&mut self, h: &mut Harness, o: OstIndex) {
        self.counts.floods += 1;
        let object = self.own_object();
        let room = HOLD_MAX.saturating_sub(self.held(o)) as u64;
        if room == 0 {
            self.give_back(h, o);
            return;
        }
        for _ in 0..self.rng.gen_range(1..=FLOOD_MAX.min(room)) {
            let request = LockRequest { mode: self.mode(), extent: self.extent(1024), flags: self.flags() };
            self.enqueue(h, o, object, request);
        }
    }

    /// Locks it holds or has asked for on OST `o`.
    fn held(&self, o: OstIndex) -> usize {
        self.per_ost[o.0 as usize].granted.len()
            + self.requests.keys().filter(|(ost, _)| *ost == o).count()
            + self.waiting.keys().filter(|(ost, _)| *ost == o).count()
    }

    /// While OST `o` recovers: requests kept for after it, within its share
    /// or past it (then the OST must evict it, and no one else).
    fn recovery_flood(&mut self, h: &mut Harness, o: OstIndex) {
        self.counts.floods += 1;
        let object = self.own_object();
        if self.rng.gen_bool(0.5) {
            // Size requests of its own object: kept like any request, and
            // each would be answered, but none makes a lock (thousands of
            // locks on one object would make the per-step checks slow).
            for _ in 0..DEFERRED_PER_CLIENT_MAX + 8 {
                let xid = self.xid();
                self.send(h, o, ToOst::Getattr { xid, object });
            }
        } else {
            let request = LockRequest::new(LockMode::ProtectedRead, Extent::new(0, PAGE_SIZE - 1));
            for _ in 0..HOLD_MAX.saturating_sub(self.held(o)) {
                self.enqueue(h, o, object, request);
            }
        }
    }

    /// A lock request on an object of the run, over bytes others lock.
    fn contend(&mut self, h: &mut Harness, o: OstIndex) {
        let others = self.others_locks(h, o);
        if others.is_empty() || self.held(o) >= HOLD_MAX {
            return;
        }
        let (_, object, _, extent) = others[self.rng.gen_range(0..others.len())];
        let request = LockRequest { mode: self.mode(), extent, flags: self.flags() };
        self.enqueue(h, o, object, request);
    }

    /// Cancels of locks others hold.
    fn foreign_cancel(&mut self, h: &mut Harness, o: OstIndex) {
        for (lock, ..) in self.others_locks(h, o).into_iter().take(8) {
            self.counts.foreign_cancels += 1;
            self.send(h, o, ToOst::Cancel { lock });
        }
        let lock = LockHandle(self.rng.gen());
        self.send(h, o, ToOst::Cancel { lock });
    }

    /// Its own locks and changes, as a client replays them (a lock
    /// sometimes widened: refused).
    fn replay_own(&mut self, h: &mut Harness, o: OstIndex) {
        let granted: Vec<(LockHandle, Granted)> =
            self.per_ost[o.0 as usize].granted.iter().map(|(l, g)| (*l, *g)).collect();
        for (lock, g) in granted {
            let widen = self.rng.gen_bool(0.3);
            let extent = if widen { Extent::new(0, u64::MAX) } else { g.extent };
            self.counts.forged_lock_replays += u64::from(widen);
            self.send(
                h,
                o,
                ToOst::ReplayLock { lock, object: g.object, request: Box::new(g.request), extent, proof: g.proof },
            );
        }
        let object = self.own_object();
        let changes = self.per_ost[o.0 as usize].changes.clone();
        for (transno, proof) in changes {
            // Its own number, its own proof, but not the change it names.
            let data = Payload::Bytes(vec![FORGED_BYTE; PAGE_SIZE as usize]);
            self.send(h, o, ToOst::ReplayWrite { transno, object, offset: 0, data, proof });
        }
    }

    /// Replays of what others hold and wrote, with made-up proofs.
    fn replay_attack(&mut self, h: &mut Harness, o: OstIndex) {
        for (lock, object, mode, extent) in self.others_locks(h, o).into_iter().take(8) {
            self.counts.forged_lock_replays += 1;
            let request = Box::new(LockRequest::new(mode, extent));
            let proof = LockProof(self.rng.gen());
            self.send(h, o, ToOst::ReplayLock { lock, object, request, extent, proof });
        }
        // Changes: the numbers about to be handed out and those just past
        // the last commit (others' uncommitted changes), to the run's
        // objects, with made-up proofs or those of its own changes.
        let committed = h.ost(o).last_committed().0;
        let objects: Vec<ObjectId> = self.others_locks(h, o).iter().map(|l| l.1).collect();
        let own_proofs: Vec<ChangeProof> = self.per_ost[o.0 as usize].changes.iter().map(|c| c.1).collect();
        for _ in 0..self.rng.gen_range(1..=8) {
            let transno = Transno(committed + self.rng.gen_range(1..=32));
            let object = match objects.is_empty() {
                true => ObjectId(self.rng.gen_range(1..64)),
                false => objects[self.rng.gen_range(0..objects.len())],
            };
            let proof = match own_proofs.is_empty() || self.rng.gen_bool(0.5) {
                true => ChangeProof(self.rng.gen()),
                false => own_proofs[self.rng.gen_range(0..own_proofs.len())],
            };
            self.counts.forged_change_replays += 1;
            let message = if self.rng.gen_bool(0.8) {
                let offset = self.rng.gen_range(0..16) * PAGE_SIZE;
                let data = Payload::Bytes(vec![FORGED_BYTE; PAGE_SIZE as usize]);
                ToOst::ReplayWrite { transno, object, offset, data, proof }
            } else {
                let cut = match self.rng.gen_bool(0.5) {
                    true => Cut::Size(0),
                    false => Cut::Hole { offset: 0, len: 16 * PAGE_SIZE },
                };
                ToOst::ReplayPunch { transno, object, cut, proof }
            };
            self.send(h, o, message);
        }
    }

    /// Writes and truncates of its own object, and syncs of it (its
    /// changes' numbers and proofs come back: a replay may name them).
    fn change_own(&mut self, h: &mut Harness, o: OstIndex) {
        let object = self.own_object();
        for _ in 0..self.rng.gen_range(1..=4) {
            let xid = self.xid();
            let message = match self.rng.gen_range(0..5) {
                0 => ToOst::Punch { xid, object, cut: Cut::Size(self.rng.gen_range(0..8) * PAGE_SIZE) },
                4 => {
                    let (offset, len) = (self.rng.gen_range(0..8) * PAGE_SIZE, self.rng.gen_range(1..4) * PAGE_SIZE);
                    let cut = match self.rng.gen_bool(0.5) {
                        true => Cut::Hole { offset, len },
                        false => Cut::Reserve { offset, len, keep_size: self.rng.gen_bool(0.5) },
                    };
                    ToOst::Punch { xid, object, cut }
                }
                1 => ToOst::Sync { xid, object },
                _ => {
                    let offset = self.rng.gen_range(0..8) * PAGE_SIZE;
                    ToOst::Write { xid, object, offset, data: Payload::Bytes(vec![FORGED_BYTE; PAGE_SIZE as usize]) }
                }
            };
            self.send(h, o, message);
        }
    }

    /// Reads and size requests of the run's objects (a size request
    /// glimpses their writers).
    fn read_others(&mut self, h: &mut Harness, o: OstIndex) {
        let others = self.others_locks(h, o);
        if others.is_empty() {
            return;
        }
        let (_, object, _, _) = others[self.rng.gen_range(0..others.len())];
        let xid = self.xid();
        let message = match self.rng.gen_bool(0.5) {
            true => ToOst::Getattr { xid, object },
            false => ToOst::Read { xid, object, offset: self.rng.gen_range(0..16) * PAGE_SIZE, len: PAGE_SIZE },
        };
        self.send(h, o, message);
    }

    /// Answers to glimpses it was never sent, acknowledgements of notices
    /// it never had.
    fn stray_answers(&mut self, h: &mut Harness, o: OstIndex) {
        // Far above any xid an OST gives its glimpses.
        let xid = Xid(self.rng.gen_range(1 << 50..1 << 60));
        self.send(h, o, ToOst::GlimpseReply { xid, size: u64::MAX });
        let seq = self.rng.gen();
        self.send(h, o, ToOst::FailuresSeen { seq });
    }

    /// Some of its locks given back (as a well-behaved client would).
    fn give_back(&mut self, h: &mut Harness, o: OstIndex) {
        let locks: Vec<LockHandle> =
            self.per_ost[o.0 as usize].granted.keys().copied().take(FLOOD_MAX as usize).collect();
        for lock in locks {
            self.per_ost[o.0 as usize].granted.remove(&lock);
            self.send(h, o, ToOst::Cancel { lock });
        }
    }

    /// A GROUP lock on its own object (never on the run's: nothing would
    /// take it back from a node that falls silent, see the crate docs).
    fn group_own(&mut self, h: &mut Harness, o: OstIndex) {
        let gid = GroupId(self.rng.gen_range(1..4));
        let request = LockRequest::new(LockMode::Group(gid), Extent::new(0, u64::MAX));
        let object = self.own_object();
        self.enqueue(h, o, object, request);
    }

    fn evicted(&mut self, o: OstIndex) {
        self.counts.evicted += 1;
        self.forget_ost(o);
    }

    fn hear(&mut self, h: &mut Harness, ost: OstIndex, message: ToClient) {
        match message {
            ToClient::Enqueue { xid, reply } => {
                let request = self.requests.remove(&(ost, xid));
                match (reply, request) {
                    (EnqueueReply::Granted { lock, extent, proof }, Some((object, request))) => {
                        let state = &mut self.per_ost[ost.0 as usize];
                        state.granted.insert(lock, Granted { object, request, extent, proof });
                        state.ever_granted.insert(lock);
                    }
                    (EnqueueReply::Waiting { lock }, Some(request)) => {
                        self.waiting.insert((ost, lock), request);
                    }
                    (EnqueueReply::Evicted, _) => self.evicted(ost),
                    _ => {}
                }
            }
            ToClient::Completion { lock, extent, proof, .. } => {
                if let Some((object, request)) = self.waiting.remove(&(ost, lock)) {
                    let state = &mut self.per_ost[ost.0 as usize];
                    state.granted.insert(lock, Granted { object, request, extent, proof });
                    state.ever_granted.insert(lock);
                }
            }
            ToClient::Blocking { lock } if self.answers_callbacks && !self.silent => {
                self.per_ost[ost.0 as usize].granted.remove(&lock);
                self.send(h, ost, ToOst::Cancel { lock });
            }
            ToClient::WriteReply { result: Ok(()), transno, proof, .. }
            | ToClient::PunchReply { result: Ok(()), transno, proof, .. }
                if transno > Transno(0) =>
            {
                self.per_ost[ost.0 as usize].changes.push((transno, proof));
            }
            ToClient::Committed { transno } => {
                self.per_ost[ost.0 as usize].changes.retain(|(t, _)| *t > transno);
            }
            ToClient::Evicted => self.evicted(ost),
            ToClient::LockLost { lock } => {
                self.per_ost[ost.0 as usize].granted.remove(&lock);
            }
            // It holds no dirty byte of the run's files: an honest size.
            ToClient::Glimpse { xid, .. } if !self.silent => {
                self.send(h, ost, ToOst::GlimpseReply { xid, size: 0 });
            }
            _ => {}
        }
    }
}
