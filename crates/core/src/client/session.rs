//! The client's side of its sessions with the OSTs: connecting, sending
//! again what a lost connection left unanswered, replaying to an OST that
//! restarted, and the OSTs' notices of commits (the state is the recovery
//! part's, `recovery.rs`, with [`super::imports`] and [`super::replay`];
//! `crate::ost::recovery` is the OST's side).
//!
//! Who does what: the driver owns connections. It tells the client when
//! one is lost ([`Client::handle_disconnected`]) and when a new one is up
//! ([`Client::handle_reconnected`]); if an OST stays away too long it gives
//! up ([`Client::handle_unreachable`]), and only then do operations fail.
//! Until then nothing fails and nothing is dropped: the cache keeps its
//! dirty pages, the locks stay, and requests wait in the client's tables.
//!
//! When the OST answers the connect:
//! * same life of the OST: every request still unanswered goes again, in
//!   the order first sent (enqueues the OST already has are answered with
//!   the lock they made; writes are rewritten under the lock that still
//!   covers them, so a write done twice leaves the same bytes);
//! * a new life, recovering: the client replays its granted locks, then
//!   the changes the OST acknowledged and had not committed, in
//!   transaction order, then says it is done; then it sends its
//!   unanswered requests, which the OST handles after recovery;
//! * the OST cannot take the client's state back: it answers `Evicted`,
//!   and the client discards what it held there and reports the loss.
//!
//! Messages that are not requests (a cancel, a glimpse answer) may be lost
//! with a connection. The OST sends its callbacks and completions again
//! when the client comes back, and the client answers a callback or a
//! completion for a lock it does not hold by cancelling it, so a lost
//! cancel costs a round trip, never a lock held forever.

use super::imports::ImportState;
use super::locks::ClientLockState;
use super::op_table::OpState;
use super::replay::Change;
use super::{Client, LossCause, Rpc};
use crate::ldlm::LockRequest;
use crate::msg::{IoError, Payload, ToOst};
use crate::units::{Epoch, Instant, LockHandle, ObjectId, ObjectKey, OstIndex, Transno, Xid};
use std::collections::BTreeSet;
use tracing::{debug, warn};

impl Client {
    /// Whether a request may go to `to` now; starts the session with an
    /// OST spoken to for the first time.
    pub(super) fn session_allows(&mut self, to: OstIndex) -> bool {
        match self.recovery.import(to).state {
            ImportState::Connected => true,
            ImportState::New => {
                self.connect(to, None);
                false
            }
            ImportState::Connecting { .. } | ImportState::Disconnected | ImportState::Leaving => false,
        }
    }

    /// Whether bytes cached under `ost`'s locks may answer a read now: only
    /// while the session with it is up. A client cut off from an OST cannot
    /// hear its callbacks; the OST evicts it once one goes unanswered for
    /// its callback timeout and grants the bytes to another client, so
    /// what the cache holds may be stale by then, with nothing to say so
    /// until the session is back (the OST then answers `Evicted`, or
    /// sends again the callbacks it had pending, none of whose conflicting
    /// locks it granted meanwhile). Lustre's client reads its cached pages
    /// on through an outage; lanefs's waits, like its requests.
    pub(super) fn may_trust_cache(&self, ost: OstIndex) -> bool {
        !self.config.recovery || self.recovery.import(ost).state == ImportState::Connected
    }

    fn connect(&mut self, to: OstIndex, resume: Option<Epoch>) {
        self.recovery.import_mut(to).state = ImportState::Connecting { resume: resume.is_some() };
        self.outbox.transmit(to, ToOst::Connect { resume });
    }

    /// The driver lost its connection to `ost`: requests wait (nothing
    /// fails) until [`Client::handle_reconnected`] or
    /// [`Client::handle_unreachable`].
    pub fn handle_disconnected(&mut self, now: Instant, ost: OstIndex) {
        self.timeline_at(now);
        if !self.config.recovery {
            return;
        }
        let import = self.recovery.import_mut(ost);
        match import.state {
            ImportState::New => {}
            // Unmounting: nothing more to say to it.
            ImportState::Leaving => import.state = ImportState::New,
            ImportState::Connecting { .. } | ImportState::Connected | ImportState::Disconnected => {
                import.state = ImportState::Disconnected
            }
        }
        self.run(now);
    }

    /// The driver has a new connection to `ost`: take the session up again.
    pub fn handle_reconnected(&mut self, now: Instant, ost: OstIndex) {
        self.timeline_at(now);
        if !self.config.recovery {
            return;
        }
        let import = self.recovery.import(ost);
        match import.state {
            ImportState::New | ImportState::Leaving => {}
            ImportState::Connecting { resume } => self.connect(ost, if resume { import.epoch } else { None }),
            ImportState::Connected | ImportState::Disconnected => self.connect(ost, import.epoch),
        }
        self.run(now);
    }

    /// A clean unmount, after [`Client::release_all`]: tell every OST this
    /// client will not come back with state; done when
    /// [`Client::disconnected_all`] says so.
    pub fn disconnect_all(&mut self) {
        let connected: Vec<OstIndex> = self.recovery.imports().connected().collect();
        for ost in connected {
            self.outbox.transmit(ost, ToOst::Disconnect);
            self.recovery.import_mut(ost).state = ImportState::Leaving;
        }
    }

    /// Whether every OST told of the unmount has recorded it.
    pub fn disconnected_all(&self) -> bool {
        self.recovery.imports().all_left()
    }

    pub(super) fn on_disconnected(&mut self, ost: OstIndex) {
        let import = self.recovery.import_mut(ost);
        if import.state == ImportState::Leaving {
            import.state = ImportState::New;
        }
    }

    pub(super) fn on_connected(&mut self, ost: OstIndex, epoch: Epoch, recovering: bool) {
        if !self.config.recovery {
            return;
        }
        let import = self.recovery.import(ost);
        let ImportState::Connecting { resume } = import.state else {
            debug!(client = self.id.0, %ost, "connect answer out of turn ignored");
            return;
        };
        let same_life = import.epoch == Some(epoch);
        if resume && !same_life && !recovering {
            // A new life that does not wait for us: what we held is gone.
            warn!(client = self.id.0, %ost, "the OST restarted and recovered without this client");
            self.on_evicted(ost);
            return;
        }
        let import = self.recovery.import_mut(ost);
        import.state = ImportState::Connected;
        import.epoch = Some(epoch);
        if !(resume && same_life) {
            // A session the OST starts afresh (its new life, or a fresh
            // connect after it forgot us) numbers its notices from 1 again.
            import.failures_seen = 0;
        }
        if resume && !same_life {
            self.replay_to(ost);
        }
        self.resend(ost);
    }

    /// Replay to `ost`, restarted and recovering: granted locks, then the
    /// uncommitted changes in transaction order, then the end of it. Locks
    /// still being asked for are asked for again (the OST forgot them).
    fn replay_to(&mut self, ost: OstIndex) {
        let mut granted = Vec::new();
        let mut pending = Vec::new();
        for (id, lock) in self.locks.iter().filter(|(_, l)| l.key.ost == ost) {
            match (lock.state, lock.handle) {
                (ClientLockState::Granted | ClientLockState::Cancelling, Some(handle)) => {
                    let request = LockRequest { mode: lock.mode, extent: lock.requested, flags: lock.flags };
                    granted.push(ToOst::ReplayLock {
                        lock: handle,
                        object: lock.key.object,
                        request: Box::new(request),
                        extent: lock.extent,
                        proof: lock.proof,
                    });
                }
                _ => pending.push(id),
            }
        }
        for id in pending {
            let xid = self.xid();
            self.locks.requeue(id, xid);
        }
        self.recovery.replay_mut().new_life(ost);
        let forget = crate::planted::active(crate::planted::Bug::ForgetReplay);
        let changes: Vec<ToOst> = self
            .recovery
            .replay()
            .entries(ost)
            .filter(|_| !forget)
            .map(|(transno, change)| match change {
                Change::Write { key, offset, data, proof } => ToOst::ReplayWrite {
                    transno,
                    object: key.object,
                    offset: *offset,
                    data: data.clone(),
                    proof: *proof,
                },
                Change::Punch { key, cut, proof } => {
                    ToOst::ReplayPunch { transno, object: key.object, cut: *cut, proof: *proof }
                }
            })
            .collect();
        debug!(client = self.id.0, %ost, locks = granted.len(), changes = changes.len(), "replaying");
        for message in granted.into_iter().chain(changes).chain([ToOst::ReplayDone]) {
            self.outbox.transmit(ost, message);
        }
    }

    /// Send again, in the order first sent, every request to `ost` still
    /// unanswered: enqueues, and RPCs. A write orphaned by an eviction is
    /// given up instead.
    fn resend(&mut self, ost: OstIndex) {
        let orphaned: Vec<Xid> = self
            .rpcs
            .iter()
            .filter(|(_, rpc)| matches!(rpc, Rpc::Write { key, orphaned: true, .. } if key.ost == ost))
            .map(|(xid, _)| xid)
            .collect();
        for xid in orphaned {
            self.rpcs.remove_orphan(xid);
        }
        let mut again: Vec<(Xid, ToOst)> = self
            .locks
            .iter()
            .filter(|(_, l)| l.key.ost == ost)
            .filter_map(|(_, l)| match l.state {
                ClientLockState::Enqueuing { xid } => {
                    let request = LockRequest { mode: l.mode, extent: l.requested, flags: l.flags };
                    Some((xid, ToOst::Enqueue { xid, object: l.key.object, request }))
                }
                ClientLockState::Waiting | ClientLockState::Granted | ClientLockState::Cancelling => None,
            })
            .collect();
        for (xid, rpc) in self.rpcs.iter() {
            if let Some(message) = self.request_of(xid, rpc) {
                if rpc.ost() == ost {
                    again.push((xid, message));
                }
            }
        }
        again.sort_by_key(|(xid, _)| *xid);
        if crate::planted::active(crate::planted::Bug::LostResend) {
            if let Some(first) = again.iter().position(|(_, m)| matches!(m, ToOst::Write { .. })) {
                again.remove(first);
            }
        }
        for (_, message) in again {
            self.send(ost, message);
        }
        let seen = self.recovery.import(ost).failures_seen;
        if seen > 0 {
            self.send(ost, ToOst::FailuresSeen { seq: seen });
        }
    }

    /// The request an unanswered RPC sent.
    fn request_of(&self, xid: Xid, rpc: &Rpc) -> Option<ToOst> {
        Some(match rpc {
            Rpc::Write { key, offset, len, pinned, .. } => {
                let data = match pinned {
                    Some(span) => Payload::Pages(Box::new(span.clone())),
                    None => Payload::Phantom(*len),
                };
                ToOst::Write { xid, object: key.object, offset: *offset, data }
            }
            Rpc::Read { key, offset, len, .. } => ToOst::Read { xid, object: key.object, offset: *offset, len: *len },
            Rpc::Punch { key, cut, .. } => ToOst::Punch { xid, object: key.object, cut: *cut },
            Rpc::Getattr { op, stripe, .. } => {
                let key = self.ops.get(*op)?.steps.get(*stripe as usize)?.key;
                ToOst::Getattr { xid, object: key.object }
            }
            Rpc::Sync { key, .. } | Rpc::Commit { key } => ToOst::Sync { xid, object: key.object },
            Rpc::Advise { key, advice, start, end, .. } => {
                ToOst::Advise { xid, object: key.object, advice: *advice, start: *start, end: *end }
            }
        })
    }

    pub(super) fn on_committed(&mut self, ost: OstIndex, transno: Transno) {
        if self.recovery.replay_mut().committed(ost, transno) == 0 {
            return;
        }
        for op in self.ops.values_mut() {
            if op.state == OpState::WaitDirty {
                op.state = OpState::Ready;
            }
        }
    }

    pub(super) fn on_commit_failed(&mut self, ost: OstIndex, object: ObjectId, error: IoError, seq: u64) {
        let kept = self.recovery.replay().has_key(ObjectKey { ost, object });
        let import = self.recovery.import_mut(ost);
        if seq > import.failures_seen && crate::planted::active(crate::planted::Bug::DropCommitFailure) {
            import.failures_seen = seq;
        } else if seq > import.failures_seen && !kept {
            // Nothing kept that a failed commit could have lost: a notice
            // taken before, sent again from the OST's record after a crash
            // (the failed commit's changes leave the copies only with the
            // commit notice that follows this one).
            import.failures_seen = seq;
        } else if seq > import.failures_seen {
            import.failures_seen = seq;
            self.lost_to_failed_commit(ObjectKey { ost, object }, error);
        }
        self.send(ost, ToOst::FailuresSeen { seq });
    }

    /// A commit of `key`'s changes failed: what this client kept of them is
    /// lost, and the files they belong to say so.
    pub(super) fn lost_to_failed_commit(&mut self, key: ObjectKey, error: IoError) {
        let bytes = self.recovery.replay().key_bytes(key);
        warn!(client = self.id.0, ost = %key.ost, object = key.object.0, %error, "the OST could not commit writes of this client");
        self.record_write_error(&BTreeSet::from([key]), key.ost, &LossCause::SyncFailed(error));
        self.report_loss(key.ost, bytes);
    }

    /// A replayed lock was refused: this client's state on `ost` cannot be
    /// trusted. It is dropped as after an eviction (the loss reported), and
    /// the session starts afresh.
    pub(super) fn on_lock_lost(&mut self, ost: OstIndex, handle: LockHandle) {
        warn!(client = self.id.0, %ost, lock = handle.0, "a replayed lock was refused: dropping what this OST held");
        if self.locks.by_handle(ost, handle).is_some() {
            self.on_evicted(ost);
        }
    }

    /// A callback or a completion for lock `handle`, which this client does
    /// not hold: its cancel was lost with a connection or crossed the
    /// message (give it back), or the answer to one of its enqueues was
    /// lost and the resent enqueue's answer, naming this very handle, is
    /// still to come (an OST that sees the client come back sends every
    /// lock's completion again before it answers what the client resends).
    /// While an enqueue to that OST awaits its answer the handle is kept
    /// unclaimed; the answers claim their own, and what none claims is given
    /// back once none is awaited ([`Client::give_back_unclaimed`]).
    /// Cancelling at once would make the OST forget the lock its answer
    /// then hands over: a lock the client writes under and nobody can call
    /// back.
    pub(super) fn on_unknown_lock(&mut self, ost: OstIndex, handle: LockHandle, called_back: bool) {
        if !self.config.recovery {
            return;
        }
        let awaited =
            self.locks.iter().any(|(_, l)| l.key.ost == ost && matches!(l.state, ClientLockState::Enqueuing { .. }));
        if awaited && self.recovery.unclaimed_room() {
            self.recovery.keep_unclaimed(ost, handle, called_back);
            return;
        }
        self.recovery.claim(ost, handle);
        self.send(ost, ToOst::Cancel { lock: handle });
    }

    /// Give back the unclaimed handles of `ost` once no enqueue to it
    /// awaits an answer that could claim them.
    pub(super) fn give_back_unclaimed(&mut self, ost: OstIndex) {
        if !self.recovery.has_unclaimed(ost) {
            return;
        }
        if self.locks.iter().any(|(_, l)| l.key.ost == ost && matches!(l.state, ClientLockState::Enqueuing { .. })) {
            return;
        }
        for handle in self.recovery.take_unclaimed(ost) {
            self.send(ost, ToOst::Cancel { lock: handle });
        }
    }

    /// Ask `ost` to commit if the changes kept for it pile up (soft sync).
    pub(super) fn ask_commit_if_due(&mut self, ost: OstIndex) {
        if !self.config.recovery || !self.recovery.replay_mut().wants_commit(ost, self.config.unstable_bytes_max) {
            return;
        }
        let key = self.recovery.replay().any_key(ost).expect("a commit is wanted of changes kept");
        let xid = self.xid();
        self.rpcs.insert(xid, Rpc::Commit { key });
        self.send(ost, ToOst::Sync { xid, object: key.object });
    }

    /// What was kept for replay on `ost` is lost (eviction, or the OST given
    /// up): report it to the files it belongs to.
    pub(super) fn drop_replay(&mut self, ost: OstIndex, cause: &LossCause) {
        let (keys, bytes) = self.recovery.replay_mut().drop_ost(ost);
        self.record_write_error(&keys, ost, cause);
        self.report_loss(ost, bytes);
    }
}
