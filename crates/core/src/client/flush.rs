//! Giving locks back and writing dirty pages out.
//!
//! Every way a lock ends (a blocking callback, the LRU, a group unlock) goes
//! through [`Client::pump_cancels`]: once the lock has no users, the dirty
//! bytes under it are written back, the writeback is acknowledged, the pages
//! no other lock covers are dropped, and only then is the cancel sent. This
//! ordering is what makes a read anywhere return the latest completed write.
//!
//! [`Client::pump_writeback`] forms write RPCs: contiguous dirty bytes, at
//! most `rpc_bytes_max` each, at most `rpcs_in_flight_max` in flight per OST.
//! It writes, in this order of urgency: extents of locks being cancelled,
//! files being fsynced or closed, OSTs whose dirty limit stops a writer, and
//! objects holding at least one full RPC of dirty data (Lustre's OSC sends
//! full RPCs as soon as it has them).
//!
//! Once an fsync's writes are acknowledged, [`Client::commit_fsync`] asks
//! the OSTs to make them durable.

use super::locks::{ClientLockState, LocalLock};
use super::op_table::{OpKind, OpState};
use super::replay::Change;
use super::timeline;
use super::{Client, ClientError, Commit, LossCause, OpId, Rpc};
use crate::extent::Extent;
use crate::ldlm::proof::ChangeProof;
use crate::msg::{IoError, Payload, ToOst};
use crate::units::{ObjectKey, OstIndex, Transno, Xid};

impl Client {
    /// Cancel the unused locks beyond the LRU's count limit, oldest first.
    pub(super) fn trim_lru(&mut self) -> bool {
        if self.locks.len() <= self.config.lru_locks_max {
            return false; // cannot be over the limit: skip the sort
        }
        let unused = self.locks.unused_by_age();
        let excess = unused.len().saturating_sub(self.config.lru_locks_max);
        for (l, _) in unused.iter().take(excess) {
            self.locks.begin_cancel(*l);
        }
        excess > 0
    }

    /// Finish every cancel whose lock is unused and clean.
    pub(super) fn pump_cancels(&mut self) -> bool {
        let ready: Vec<LocalLock> = self
            .locks
            .returning()
            .filter(|(_, l)| {
                l.users == 0 && (l.state == ClientLockState::Cancelling || (l.is_granted() && l.callback_pending))
            })
            .map(|(id, _)| id)
            .collect();
        let mut progressed = false;
        for l in ready {
            let lock = self.locks.get_mut(l).expect("listed");
            lock.state = ClientLockState::Cancelling;
            let (key, extent) = (lock.key, lock.extent);
            let acked = !self.writeback.cache().has_writeback(key, extent)
                || crate::planted::active(crate::planted::Bug::CancelBeforeAck);
            if self.writeback.cache().has_dirty(key, extent) || !acked {
                continue; // pump_writeback flushes it; we come back on the reply
            }
            let others = self.locks.covering_others(key, extent, l);
            self.writeback.discard(key, extent, &others);
            let lock = self.locks.cancelled(l);
            let handle = lock.handle.expect("a granted lock has a server handle");
            self.counters.cancels += 1;
            self.timeline_note(timeline::TimelineEvent::Cancel);
            self.osc(key.ost).cancels += 1;
            self.send(key.ost, ToOst::Cancel { lock: handle });
            progressed = true;
        }
        progressed
    }

    /// Send write RPCs while there is urgent dirty data and room in flight.
    pub(super) fn pump_writeback(&mut self) -> bool {
        let mut areas = self.writeback.take_scratch();
        self.flush_areas(&mut areas);
        let mut progressed = false;
        for &(key, range) in &areas {
            let ost = key.ost;
            while self.rpcs.in_flight(ost).1 < self.config.rpcs_in_flight_max {
                let Some(run) = self.writeback.next_run(key, range, self.config.rpc_bytes_max) else {
                    if range == Extent::WHOLE {
                        let writing = self.rpcs.writing(key);
                        self.writeback.forget_if_clean(key, writing);
                    }
                    break;
                };
                let xid = self.xid();
                let len = run.data.len();
                self.counters.write_rpcs += 1;
                let pinned = match &run.data {
                    Payload::Pages(span) => Some(crate::pages::PageSpan::clone(span)),
                    Payload::Bytes(_) | Payload::Phantom(_) | Payload::Remote(_) => None,
                };
                self.rpcs.insert(xid, Rpc::Write { key, offset: run.offset, len, orphaned: false, pinned });
                self.note_rpc_sent(ost, true, run.offset, len);
                self.send(ost, ToOst::Write { xid, object: key.object, offset: run.offset, data: run.data });
                progressed = true;
            }
        }
        self.writeback.put_scratch(areas);
        progressed
    }

    /// What must be written now into `areas`: grouped by OST (in OST order),
    /// most urgent first within each.
    fn flush_areas(&self, areas: &mut Vec<(ObjectKey, Extent)>) {
        for (_, lock) in self.locks.returning() {
            if lock.mode.is_write()
                && lock.users == 0
                && (lock.state == ClientLockState::Cancelling || lock.callback_pending)
            {
                areas.push((lock.key, lock.extent));
            }
        }
        let mut pressed: smallvec::SmallVec<[OstIndex; 4]> = smallvec::SmallVec::new();
        for op in self.ops.values() {
            match op.state {
                // Only objects with dirty bytes have anything to send (every
                // one of them is dirty in writeback, see `Writeback::check_invariants`).
                // A flush waits on every object of its file; a file striped
                // wide has far more objects than a client has dirty ones.
                // (An OST holds one object of a file at most, and the list
                // is sorted by OST below, so either order gives the same.)
                OpState::WaitFlush
                    if self.writeback.dirty_count() < op.steps.len() && self.files.contains_key(&op.fh) =>
                {
                    let layout = &self.files[&op.fh].layout;
                    areas.extend(
                        self.writeback
                            .dirty_keys()
                            .filter(|&key| layout.stripe_of(key).is_some())
                            .map(|key| (key, Extent::WHOLE)),
                    )
                }
                OpState::WaitFlush => areas
                    .extend(op.steps.iter().filter(|s| self.writeback.is_dirty(s.key)).map(|s| (s.key, Extent::WHOLE))),
                OpState::WaitDirty => {
                    let ost = op.steps.at(op.index).key.ost;
                    if !pressed.contains(&ost) {
                        pressed.push(ost);
                    }
                }
                OpState::Ready | OpState::WaitLock(_) | OpState::WaitRpcs { .. } | OpState::Copying { .. } => {}
            }
        }
        self.writeback.urgent_objects(areas, &pressed, self.config.rpc_bytes_max, self.config.dirty_bytes_max);
        areas.sort_by_key(|(key, _)| key.ost); // stable: urgency order kept within an OST
    }

    pub(super) fn on_write_reply(
        &mut self,
        ost: OstIndex,
        xid: Xid,
        result: Result<(), IoError>,
        transno: Transno,
        proof: ChangeProof,
    ) {
        let is_write = |rpc: &Rpc| matches!(rpc, Rpc::Write { .. });
        let Some(Rpc::Write { key, offset, len, orphaned, pinned }) = self.take_rpc(ost, xid, is_write) else {
            return;
        };
        if orphaned {
            return; // counted as lost when the eviction discarded the pages
        }
        match result {
            Ok(()) => {
                self.counters.bytes_written += len;
                self.timeline_note(timeline::TimelineEvent::Written { ost, bytes: len });
                self.writeback.note_uncommitted(key);
                if self.config.recovery && transno > Transno(0) {
                    let data = match pinned {
                        Some(span) => Payload::Pages(Box::new(span)),
                        None => Payload::Phantom(len),
                    };
                    self.recovery.replay_mut().keep(ost, transno, Change::Write { key, offset, data, proof });
                    self.ask_commit_if_due(ost);
                }
                self.writeback.writeback_done(key, offset, len);
                self.trim_cache(key, Extent::from_offset_len(offset, len));
            }
            Err(_) if crate::planted::active(crate::planted::Bug::IgnoreWriteError) => {
                self.writeback.writeback_done(key, offset, len);
            }
            Err(error) => {
                tracing::warn!(client = self.id.0, %ost, %error, "write RPC failed; its bytes are lost");
                let lost = self.writeback.writeback_failed(key, offset, len);
                self.record_write_error(&[key].into(), ost, &LossCause::WriteFailed(error));
                self.report_loss(ost, lost);
            }
        }
        for op in self.ops.values_mut() {
            if op.state == OpState::WaitDirty {
                op.state = OpState::Ready;
            }
        }
    }

    /// An fsync whose writes have all been acknowledged asks the OST of each
    /// of the file's objects written since the last fsync to make them
    /// durable, and waits for the answers. (Lustre sends `OST_SYNC` to every
    /// stripe; an object with nothing to commit is answered at once, so
    /// lanefs spares the round trip.)
    pub(super) fn commit_fsync(&mut self, id: OpId) -> Result<Commit, ClientError> {
        let op = &self.ops[&id];
        let OpKind::Fsync { committing, failed_ost } = op.kind else { unreachable!("an fsync") };
        if committing {
            return match op.state {
                OpState::WaitRpcs { outstanding: 0, failed: None } => Ok(Commit::Done),
                OpState::WaitRpcs { outstanding: 0, failed: Some(error) } => {
                    // The failure reaches the file as a notice too: this
                    // fsync reports it, the next one does not again.
                    let fh = op.fh;
                    if let Some(file) = self.files.get_mut(&fh) {
                        file.write_error = None;
                    }
                    Err(ClientError::Io { ost: failed_ost.expect("a failed sync names its OST"), error })
                }
                OpState::Ready
                | OpState::WaitLock(_)
                | OpState::WaitDirty
                | OpState::WaitRpcs { .. }
                | OpState::WaitFlush
                | OpState::Copying { .. } => Ok(Commit::Waiting),
            };
        }
        // The file's objects: from its layout, or, if a close of the same
        // handle has just forgotten it, from the op's own steps.
        let of_file = |key: ObjectKey| match self.files.get(&op.fh) {
            Some(file) => file.layout.stripe_of(key).is_some(),
            None => op.steps.iter().any(|step| step.key == key),
        };
        let keys = self.writeback.take_uncommitted(of_file);
        let op = self.ops.get_mut(id).expect("live op");
        op.kind = OpKind::Fsync { committing: true, failed_ost: None };
        if keys.is_empty() {
            return Ok(Commit::Done);
        }
        op.state = OpState::WaitRpcs { outstanding: keys.len(), failed: None };
        for key in keys {
            self.send_sync(id, key);
        }
        Ok(Commit::Sent)
    }

    pub(super) fn send_sync(&mut self, op: OpId, key: ObjectKey) {
        let xid = self.xid();
        self.rpcs.insert(xid, Rpc::Sync { op, key });
        self.osc(key.ost).syncs += 1;
        self.send(key.ost, ToOst::Sync { xid, object: key.object });
    }
}
