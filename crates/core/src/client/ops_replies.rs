//! The OSTs' replies to an operation's requests: lock grants and refusals,
//! blocking callbacks, and the answers to read, punch and getattr RPCs.
//!
//! What a server may send: anything; a reply is taken only if it answers a
//! request this client sent to that OST and is waiting for, of the kind
//! that request expects (see `Client::take_rpc`), and stray ones are
//! ignored with a debug log. A lock grant must contain the request and
//! name a handle not already in use on that OST, a completion must be for
//! a lock waiting on that OST, and a read reply must hold exactly the bytes
//! asked for. A grant that breaks these rules fails the operations waiting
//! for the lock with [`ClientError::Protocol`] (and the lock is given back
//! if its handle is free to name); a read reply of the wrong length fails
//! its read with [`IoError::BadReply`].

use super::{timeline, OpKind, OpState};
use crate::client::locks::{ClientLockState, LocalLock};
use crate::client::replay::Change;
use crate::client::{Client, ClientError, LossCause, OpId, Rpc};
use crate::extent::Extent;
use crate::ldlm::proof::{ChangeProof, LockProof};
use crate::msg::ToOst;
use crate::msg::{EnqueueReply, IoError, ObjectAttr, Payload};
use crate::units::{Instant, LockHandle, OstIndex, Transno, Xid};
use smallvec::SmallVec;

impl Client {
    pub(in crate::client) fn on_enqueue_reply(&mut self, now: Instant, ost: OstIndex, xid: Xid, reply: EnqueueReply) {
        let Some(l) = self.locks.enqueued(xid).filter(|&l| self.locks.get(l).is_some_and(|lock| lock.key.ost == ost))
        else {
            tracing::debug!(client = self.id.0, %ost, xid = xid.0, "stray enqueue reply ignored");
            return;
        };
        self.locks.take_xid(xid);
        match reply {
            EnqueueReply::Granted { lock, .. } | EnqueueReply::Waiting { lock }
                if self.locks.by_handle(ost, lock).is_some() =>
            {
                // Another lock of ours has that handle: the server is broken.
                self.fail_lock(l, ClientError::Protocol("the OST named a new lock with a handle in use"));
            }
            EnqueueReply::Granted { lock, extent, proof } => {
                self.locks.set_handle(l, lock);
                self.locks.get_mut(l).expect("listed").proof = proof;
                let called_back = self.recovery.claim(ost, lock);
                self.granted(now, l, extent, called_back);
            }
            EnqueueReply::Waiting { lock } => {
                self.locks.set_handle(l, lock);
                self.recovery.claim(ost, lock);
                self.locks.get_mut(l).expect("listed").state = ClientLockState::Waiting;
                if let Some(max) = self.config.lock_wait_max {
                    self.ops.wait_lock_until(now + max, l);
                }
            }
            EnqueueReply::Invalid => {
                // Only a bug on this side can cause it: fail the operations
                // that waited for the lock rather than ask again forever.
                self.fail_lock(l, ClientError::Protocol("the OST refused a malformed lock request"));
            }
            EnqueueReply::Failed => self.fail_lock(l, ClientError::Io { ost, error: IoError::Failed }),
            EnqueueReply::TooMany => self.fail_lock(l, ClientError::Io { ost, error: IoError::TooManyLocks }),
            EnqueueReply::NoSuchObject => self.fail_lock(l, ClientError::Io { ost, error: IoError::NoSuchObject }),
            EnqueueReply::Refused | EnqueueReply::Evicted => {
                let lock = self.locks.remove(l).expect("listed");
                if lock.flags.speculative && reply == EnqueueReply::Refused {
                    self.counters.lockahead_refused += 1;
                }
                // Operations waiting on it find it gone and enqueue again.
            }
        }
        self.give_back_unclaimed(ost);
    }

    pub(in crate::client) fn on_completion(
        &mut self,
        now: Instant,
        ost: OstIndex,
        handle: LockHandle,
        extent: Extent,
        callback_pending: bool,
        proof: LockProof,
    ) {
        let Some(l) = self.locks.by_handle(ost, handle) else {
            // A lock this client does not hold: a grant that overtook the
            // answer to its enqueue, or a lost cancel (see on_unknown_lock).
            self.on_unknown_lock(ost, handle, callback_pending);
            return;
        };
        if self.locks.get(l).is_none_or(|lock| lock.state != ClientLockState::Waiting) {
            // Sent again after a reconnect for a lock already granted, or
            // for one not waiting at all: nothing to do.
            tracing::debug!(client = self.id.0, %ost, lock = handle.0, "completion of no waiting lock ignored");
            return;
        }
        self.locks.get_mut(l).expect("listed").proof = proof;
        self.granted(now, l, extent, callback_pending);
    }

    /// A waiting lock will never be granted (its object is gone): the
    /// operations that waited for it fail with `error`.
    pub(in crate::client) fn on_wait_failed(&mut self, ost: OstIndex, handle: LockHandle, error: IoError) {
        let Some(l) = self.locks.by_handle(ost, handle) else { return };
        if self.locks.get(l).is_some_and(|lock| lock.state == ClientLockState::Waiting) {
            self.fail_lock(l, ClientError::Io { ost, error });
        }
    }

    /// Withdraw the lock requests that have waited at their OSTs for
    /// `lock_wait_max`: each is cancelled there (the OST takes it out of
    /// its queue), and the operations that waited for it fail, naming it.
    pub(in crate::client) fn end_lock_waits(&mut self, now: Instant) {
        let Some(max) = self.config.lock_wait_max else { return };
        while let Some(l) = self.ops.pop_lock_wait_until(now) {
            let Some(lock) = self.locks.get(l).filter(|lock| lock.state == ClientLockState::Waiting) else {
                continue; // granted or gone since
            };
            let (ost, mode) = (lock.key.ost, lock.mode.name());
            let handle = lock.handle.expect("a waiting lock has its handle");
            let waited_s = max.as_ns() / 1_000_000_000;
            tracing::warn!(client = self.id.0, %ost, mode, waited_s, "a lock request waited too long: withdrawn");
            self.send(ost, ToOst::Cancel { lock: handle });
            self.fail_lock(l, ClientError::LockWaitTimeout { ost, mode, waited_s });
        }
    }

    /// Lock `l` cannot be used: it goes, and the operations waiting for it
    /// fail with `error` rather than ask again forever.
    fn fail_lock(&mut self, l: LocalLock, error: ClientError) {
        self.locks.remove(l);
        let waiters: Vec<OpId> =
            self.ops.iter().filter(|(_, op)| op.state == OpState::WaitLock(l)).map(|(id, _)| id).collect();
        for id in waiters {
            self.finish(id, Err(error.clone()));
        }
    }

    /// A lock is granted: every operation waiting on it gets a reference at
    /// once, so that a lock called back before use still serves the
    /// operations that asked for it (and cannot be lost to a livelock).
    fn granted(&mut self, now: Instant, l: LocalLock, extent: Extent, callback_pending: bool) {
        let lock = self.locks.get(l).expect("granted lock listed");
        let (requested, key, handle) = (lock.requested, lock.key, lock.handle.expect("a granted lock has a handle"));
        if !extent.contains(&requested) {
            // A grant that does not cover its request (or is inverted):
            // give it back, and fail whoever waited for it.
            tracing::warn!(client = self.id.0, ost = %key.ost, "the OST granted {extent:?} for a request of {requested}");
            self.fail_lock(l, ClientError::Protocol("the OST granted a lock smaller than its request"));
            self.send(key.ost, ToOst::Cancel { lock: handle });
            return;
        }
        self.locks.set_extent(l, extent);
        self.timeline_note(timeline::TimelineEvent::Grant);
        let lock = self.locks.get_mut(l).expect("granted lock listed");
        lock.state = ClientLockState::Granted;
        lock.callback_pending |= callback_pending;
        // The waiting operations take their references first: a lock they
        // use never enters the LRU only to leave it at once.
        let waiters: SmallVec<[OpId; 2]> =
            self.ops.iter().filter(|(_, op)| op.state == OpState::WaitLock(l)).map(|(id, _)| id).collect();
        for id in waiters {
            self.hold(id, l);
        }
        self.locks.touch(l, now);
        if callback_pending {
            self.locks.note_returning(l);
        }
    }

    pub(in crate::client) fn on_blocking(&mut self, ost: OstIndex, handle: LockHandle) {
        self.counters.blocking_callbacks += 1;
        self.timeline_note(timeline::TimelineEvent::BlockingCallback);
        self.osc(ost).blocking_callbacks += 1;
        match self.locks.by_handle(ost, handle) {
            Some(l) => {
                self.locks.get_mut(l).expect("listed").callback_pending = true;
                self.locks.note_returning(l);
            }
            // Unknown handle: our cancel crossed the callback, or was lost
            // with a connection, or the answer to our enqueue was.
            None => self.on_unknown_lock(ost, handle, true),
        }
    }

    pub(in crate::client) fn on_read_reply(&mut self, ost: OstIndex, xid: Xid, result: Result<Payload, IoError>) {
        let is_read = |rpc: &Rpc| matches!(rpc, Rpc::Read { .. });
        let Some(Rpc::Read { op, key, offset, len }) = self.take_rpc(ost, xid, is_read) else { return };
        let failure = match result {
            Ok(data) if data.len() != len => {
                tracing::warn!(client = self.id.0, %ost, "read reply of {} bytes for {len} asked", data.len());
                Some(IoError::BadReply)
            }
            Ok(data) if self.check_payload(data.kind(), data.len()).is_err() => {
                tracing::warn!(client = self.id.0, %ost, "read reply of {} payload refused", data.kind());
                Some(IoError::PayloadKind)
            }
            Ok(data) => {
                self.counters.bytes_read += data.len();
                self.timeline_note(timeline::TimelineEvent::Read { ost, bytes: data.len() });
                if self.ops.get(op).is_some_and(|o| o.holding.is_some()) {
                    self.note_payload(data.kind(), data.len());
                    match data {
                        Payload::Bytes(bytes) => self.writeback.fill(key, offset, &bytes),
                        Payload::Phantom(len) => self.writeback.fill_phantom(key, offset, len),
                        other @ (Payload::Pages(_) | Payload::Remote(_)) => {
                            self.writeback.fill(key, offset, &other.into_bytes().expect("bytes"))
                        }
                    }
                }
                None
            }
            Err(e) => Some(e),
        };
        self.rpc_answered(op, failure);
    }

    pub(in crate::client) fn on_punch_reply(
        &mut self,
        ost: OstIndex,
        xid: Xid,
        result: Result<(), IoError>,
        transno: Transno,
        proof: ChangeProof,
    ) {
        let is_punch = |rpc: &Rpc| matches!(rpc, Rpc::Punch { .. });
        let Some(Rpc::Punch { op, key, cut, dropped }) = self.take_rpc(ost, xid, is_punch) else { return };
        match result {
            // A punch is a change an fsync must make durable, as a write is.
            Ok(()) => {
                self.writeback.note_uncommitted(key);
            }
            // The dirty bytes the truncate dropped past the new size are
            // neither cut on the OST nor written: lost, and reported so.
            Err(error) if dropped > 0 => {
                self.record_write_error(&[key].into(), ost, &LossCause::WriteFailed(error));
                self.report_loss(ost, dropped);
            }
            Err(_) => {}
        }
        if result.is_ok() && self.config.recovery && transno > Transno(0) {
            self.recovery.replay_mut().keep(ost, transno, Change::Punch { key, cut, proof });
        }
        self.rpc_answered(op, result.err());
    }

    pub(in crate::client) fn on_getattr_reply(&mut self, ost: OstIndex, xid: Xid, result: Result<ObjectAttr, IoError>) {
        let is_getattr = |rpc: &Rpc| matches!(rpc, Rpc::Getattr { .. });
        let Some(Rpc::Getattr { op, stripe, .. }) = self.take_rpc(ost, xid, is_getattr) else { return };
        let failure = match result {
            Ok(ObjectAttr { size, allocated: space }) => {
                let Some(key) = self.ops.get(op).and_then(|o| o.steps.get(stripe as usize)).map(|s| s.key) else {
                    return;
                };
                let local = self.writeback.cache().object_cached_end(key);
                if let Some(OpKind::Stat { sizes, allocated, .. }) = self.ops.get_mut(op).map(|o| &mut o.kind) {
                    sizes[stripe as usize] = size.max(local);
                    allocated[stripe as usize] = space;
                }
                None
            }
            Err(e) => {
                if let Some(OpKind::Stat { failed_ost, .. }) = self.ops.get_mut(op).map(|o| &mut o.kind) {
                    *failed_ost = Some(ost);
                }
                Some(e)
            }
        };
        self.rpc_answered(op, failure);
    }

    pub(in crate::client) fn on_sync_reply(&mut self, ost: OstIndex, xid: Xid, result: Result<(), IoError>) {
        let is_sync = |rpc: &Rpc| matches!(rpc, Rpc::Sync { .. } | Rpc::Commit { .. });
        let (op, key) = match self.take_rpc(ost, xid, is_sync) {
            Some(Rpc::Sync { op, key }) => (op, key),
            Some(Rpc::Commit { .. }) => {
                // A soft sync: the commit notice (sent before this reply)
                // did the work, and a failure came as a notice too.
                self.recovery.replay_mut().commit_answered(ost);
                return;
            }
            _ => return,
        };
        match result {
            Ok(()) => self.rpc_answered(op, None),
            // Refused because the OST evicted us: the writes it acknowledged
            // are still there, and we have reconnected; ask again.
            Err(IoError::Evicted) if self.ops.contains(op) => self.send_sync(op, key),
            Err(error) => {
                self.writeback.note_uncommitted(key);
                if let Some(OpKind::Fsync { failed_ost, .. }) = self.ops.get_mut(op).map(|o| &mut o.kind) {
                    *failed_ost = Some(ost);
                }
                self.rpc_answered(op, Some(error));
            }
        }
    }

    /// An OST's answer to cache advice: the operation waiting for it counts
    /// it (an error fails it, naming the OST); advice refused because the
    /// OST evicted this client is sent again, as the client has reconnected
    /// by then; asynchronous advice's answer is only logged.
    pub(in crate::client) fn on_advise_reply(&mut self, ost: OstIndex, xid: Xid, result: Result<(), IoError>) {
        let is_advise = |rpc: &Rpc| matches!(rpc, Rpc::Advise { .. });
        let Some(Rpc::Advise { op, key, advice, start, end }) = self.take_rpc(ost, xid, is_advise) else { return };
        let Some(op) = op else {
            if let Err(error) = result {
                tracing::debug!(client = self.id.0, %ost, advice = advice.name(), %error, "asynchronous advice failed");
            }
            return;
        };
        match result {
            Ok(()) => self.rpc_answered(op, None),
            Err(IoError::Evicted) if self.ops.contains(op) => {
                self.send_advise(Some(op), key, advice, Extent::new(start, end - 1));
            }
            Err(error) => {
                if let Some(OpKind::Advise { failed_ost, .. }) = self.ops.get_mut(op).map(|o| &mut o.kind) {
                    *failed_ost = Some(ost);
                }
                self.rpc_answered(op, Some(error));
            }
        }
    }

    fn rpc_answered(&mut self, op: OpId, failure: Option<IoError>) {
        let Some(op) = self.ops.get_mut(op) else { return };
        if let OpState::WaitRpcs { outstanding, failed } = &mut op.state {
            *outstanding -= 1;
            if failure.is_some() {
                *failed = failure;
            }
        }
    }
}
