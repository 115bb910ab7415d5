//! The OSTs' replies to an operation's requests: lock grants and refusals,
//! blocking callbacks, and the answers to read, punch and getattr RPCs.

use super::{OpKind, OpState};
use crate::client::locks::{ClientLockState, LocalLock};
use crate::client::replay::Change;
use crate::client::{Client, ClientError, LossCause, OpId, Rpc};
use crate::extent::Extent;
use crate::msg::{EnqueueReply, IoError, Payload};
use crate::units::{Instant, LockHandle, OstIndex, Transno, Xid};
use smallvec::SmallVec;

impl Client {
    pub(in crate::client) fn on_enqueue_reply(&mut self, now: Instant, xid: Xid, reply: EnqueueReply) {
        let Some(l) = self.locks.take_xid(xid) else { return };
        let ost = self.locks.get(l).expect("listed").key.ost;
        match reply {
            EnqueueReply::Granted { lock, extent } => {
                self.locks.set_handle(l, lock);
                let called_back = self.unclaimed.remove(&(ost, lock)).unwrap_or(false);
                self.granted(now, l, extent, called_back);
            }
            EnqueueReply::Waiting { lock } => {
                self.locks.set_handle(l, lock);
                self.unclaimed.remove(&(ost, lock));
                self.locks.get_mut(l).expect("listed").state = ClientLockState::Waiting;
            }
            EnqueueReply::Invalid => {
                // Only a bug on this side can cause it: fail the operations
                // that waited for the lock rather than ask again forever.
                self.locks.remove(l);
                let waiters: Vec<OpId> =
                    self.ops.iter().filter(|(_, op)| op.state == OpState::WaitLock(l)).map(|(id, _)| *id).collect();
                for id in waiters {
                    self.finish(id, Err(ClientError::Protocol("the OST refused a malformed lock request")));
                }
            }
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
    ) {
        let Some(l) = self.locks.by_handle(ost, handle) else {
            self.on_unknown_lock(ost, handle, callback_pending);
            return;
        };
        if self.locks.get(l).is_some_and(|lock| !lock.is_pending()) {
            return; // sent again after a reconnect: already granted
        }
        self.granted(now, l, extent, callback_pending);
    }

    /// A lock is granted: every operation waiting on it gets a reference at
    /// once, so that a lock called back before use still serves the
    /// operations that asked for it (and cannot be lost to a livelock).
    fn granted(&mut self, now: Instant, l: LocalLock, extent: Extent, callback_pending: bool) {
        let requested = self.locks.get(l).expect("granted lock listed").requested;
        assert!(extent.contains(&requested), "server granted {extent} for a request of {requested}");
        self.locks.set_extent(l, extent);
        let lock = self.locks.get_mut(l).expect("granted lock listed");
        lock.state = ClientLockState::Granted;
        lock.callback_pending |= callback_pending;
        // The waiting operations take their references first: a lock they
        // use never enters the LRU only to leave it at once.
        let waiters: SmallVec<[OpId; 2]> =
            self.ops.iter().filter(|(_, op)| op.state == OpState::WaitLock(l)).map(|(id, _)| *id).collect();
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
        let Some(Rpc::Read { op, key, offset, .. }) = self.rpcs.remove(&xid) else { return };
        debug_assert_eq!(key.ost, ost);
        let failure = match result {
            Ok(data) if self.check_payload(data.kind(), data.len()).is_err() => {
                tracing::warn!(client = self.id.0, %ost, "read reply of {} payload refused", data.kind());
                Some(IoError::PayloadKind)
            }
            Ok(data) => {
                self.counters.bytes_read += data.len();
                if self.ops.get(&op).is_some_and(|o| o.holding.is_some()) {
                    self.note_payload(data.kind(), data.len());
                    match data {
                        Payload::Bytes(bytes) => self.cache.fill(key, offset, &bytes),
                        Payload::Phantom(len) => self.cache.fill_phantom(key, offset, len),
                        other => self.cache.fill(key, offset, &other.into_bytes().expect("bytes")),
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
    ) {
        let Some(Rpc::Punch { op, key, size, dropped }) = self.rpcs.remove(&xid) else { return };
        match result {
            // A punch is a change an fsync must make durable, as a write is.
            Ok(()) => {
                self.uncommitted.insert(key);
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
            self.replay.keep(ost, transno, Change::Punch { key, size });
        }
        self.rpc_answered(op, result.err());
    }

    pub(in crate::client) fn on_getattr_reply(&mut self, ost: OstIndex, xid: Xid, result: Result<u64, IoError>) {
        let Some(Rpc::Getattr { op, stripe }) = self.rpcs.remove(&xid) else { return };
        let failure = match result {
            Ok(size) => {
                let key = self.ops[&op].steps.at(stripe as usize).key;
                debug_assert_eq!(key.ost, ost);
                let local = self.cache.object_cached_end(key);
                let OpKind::Stat { sizes } = &mut self.ops.get_mut(&op).expect("live op").kind else { unreachable!() };
                sizes[stripe as usize] = size.max(local);
                None
            }
            Err(e) => Some(e),
        };
        self.rpc_answered(op, failure);
    }

    pub(in crate::client) fn on_sync_reply(&mut self, ost: OstIndex, xid: Xid, result: Result<(), IoError>) {
        let (op, key) = match self.rpcs.remove(&xid) {
            Some(Rpc::Sync { op, key }) => (op, key),
            Some(Rpc::Commit { .. }) => {
                // A soft sync: the commit notice (sent before this reply)
                // did the work, and a failure came as a notice too.
                self.replay.commit_answered(ost);
                return;
            }
            _ => return,
        };
        debug_assert_eq!(key.ost, ost);
        match result {
            Ok(()) => self.rpc_answered(op, None),
            // Refused because the OST evicted us: the writes it acknowledged
            // are still there, and we have reconnected; ask again.
            Err(IoError::Evicted) if self.ops.contains_key(&op) => self.send_sync(op, key),
            Err(error) => {
                self.uncommitted.insert(key);
                if let Some(OpKind::Fsync { failed_ost, .. }) = self.ops.get_mut(&op).map(|o| &mut o.kind) {
                    *failed_ost = Some(ost);
                }
                self.rpc_answered(op, Some(error));
            }
        }
    }

    fn rpc_answered(&mut self, op: OpId, failure: Option<IoError>) {
        let Some(op) = self.ops.get_mut(&op) else { return };
        if let OpState::WaitRpcs { outstanding, failed } = &mut op.state {
            *outstanding -= 1;
            if failure.is_some() {
                *failed = failure;
            }
        }
    }
}
