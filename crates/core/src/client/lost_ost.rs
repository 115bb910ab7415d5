//! An OST lost to this client: it evicted the client, or the driver could
//! not reach it. Locks and cached pages of that OST go, operations that need
//! it start over or fail, and lost bytes are reported.

use super::locks::LocalLock;
use super::op_table::OpState;
use super::{Client, ClientError, ClientEvent, LossCause, OpId, Rpc};
use crate::msg::ToOst;
use crate::units::{Instant, ObjectKey, OstIndex};
use std::collections::BTreeSet;

impl Client {
    pub(super) fn on_evicted(&mut self, ost: OstIndex) {
        self.counters.evictions += 1;
        self.ops.forget_locks_on(ost);
        let mut truncated_away: Vec<(ObjectKey, u64)> = Vec::new();
        for rpc in self.rpcs.values_mut() {
            match rpc {
                Rpc::Write { key, orphaned, .. } if key.ost == ost => *orphaned = true,
                // Dirty bytes a truncate in flight dropped past the new size
                // were the file's until the OST applies the punch: the
                // eviction took away the lock that hid the older bytes
                // beneath them from the other clients, who may read those
                // now. They are lost as the cached ones are.
                Rpc::Punch { key, dropped, .. } if key.ost == ost && *dropped > 0 => {
                    truncated_away.push((*key, std::mem::take(dropped)));
                }
                Rpc::Write { .. }
                | Rpc::Read { .. }
                | Rpc::Punch { .. }
                | Rpc::Getattr { .. }
                | Rpc::Sync { .. }
                | Rpc::Commit { .. }
                | Rpc::Advise { .. } => {}
            }
        }
        let events_before = self.outbox.events_len();
        for (key, bytes) in truncated_away {
            self.record_write_error(&[key].into(), ost, &LossCause::Evicted);
            self.report_loss(ost, bytes);
        }
        self.forget_ost_data(ost, LossCause::Evicted);
        if self.config.recovery {
            self.drop_replay(ost, &LossCause::Evicted);
            self.recovery.import_mut(ost).state = super::imports::ImportState::Connecting { resume: false };
        }
        if crate::planted::active(crate::planted::Bug::SilentEviction) {
            self.outbox.truncate_events(events_before);
        }
        self.outbox.transmit(ost, ToOst::Connect { resume: None });
    }

    /// The driver lost its connection to `ost` and could not restore it:
    /// every operation that needs that OST fails with
    /// [`ClientError::Unreachable`], its locks and cached pages are dropped
    /// (dirty bytes reported lost), and replies still in flight are ignored.
    /// Later operations try the OST again.
    pub fn handle_unreachable(&mut self, now: Instant, ost: OstIndex, reason: &str) {
        self.timeline_at(now);
        let mut failed: Vec<OpId> = Vec::new();
        let mut unsynced: Vec<ObjectKey> = Vec::new();
        self.rpcs.retain(|rpc| match rpc {
            Rpc::Write { key, .. } => key.ost != ost,
            Rpc::Sync { op, key } => {
                if key.ost == ost {
                    failed.push(*op);
                    unsynced.push(*key);
                }
                key.ost != ost
            }
            Rpc::Read { op, key, .. } => {
                if key.ost == ost {
                    failed.push(*op);
                }
                key.ost != ost
            }
            Rpc::Commit { key } => key.ost != ost,
            Rpc::Advise { op, key, .. } => {
                if key.ost == ost {
                    failed.extend(*op);
                }
                key.ost != ost
            }
            Rpc::Punch { op, .. } | Rpc::Getattr { op, .. } => {
                let touches = self.ops.get(*op).is_some_and(|o| o.steps.iter().any(|s| s.key.ost == ost));
                if touches {
                    failed.push(*op);
                }
                !touches
            }
        });
        for key in unsynced {
            self.writeback.note_uncommitted(key);
        }
        for (id, op) in self.ops.iter() {
            let on_ost = op.steps.get(op.index).is_some_and(|s| s.key.ost == ost);
            let waits_on_all = matches!(op.state, OpState::WaitFlush) && op.steps.iter().any(|s| s.key.ost == ost);
            if on_ost || waits_on_all {
                failed.push(id);
            }
        }
        failed.sort();
        failed.dedup();
        for id in failed {
            if self.ops.contains(id) {
                // Its lock may be on another OST, which keeps it: give the
                // reference back (a lock of `ost` goes below anyway).
                self.release(now, id);
                self.finish(id, Err(ClientError::Unreachable { ost, reason: reason.to_string() }));
            }
        }
        let cause = LossCause::Unreachable(reason.to_string());
        self.forget_ost_data(ost, cause.clone());
        if self.config.recovery {
            self.drop_replay(ost, &cause);
            // The next request starts a fresh session.
            self.recovery.import_mut(ost).state = super::imports::ImportState::New;
        }
        self.run(now);
    }

    /// After an eviction or a lost connection: the locks through that OST
    /// are gone (group locks included), and so is every cached page of it
    /// (dirty bytes reported lost). A file whose GROUP lock lost a stripe
    /// here loses the whole of it: its group locks on the other OSTs are
    /// given back too, since the file no longer holds the group (neither a
    /// group unlock nor a close would name them) and nothing else would ever
    /// take them back (group locks get no callbacks).
    fn forget_ost_data(&mut self, ost: OstIndex, cause: LossCause) {
        let gone: Vec<LocalLock> = self.locks.iter().filter(|(_, l)| l.key.ost == ost).map(|(id, _)| id).collect();
        for id in gone {
            self.locks.remove(id);
        }
        // The OST dropped this client's locks too (or is given up).
        self.recovery.forget_unclaimed(ost);
        let unstable = self.writeback.cache().unstable_objects(ost);
        self.record_write_error(&unstable, ost, &cause);
        let mut orphaned: Vec<(ObjectKey, crate::ldlm::GroupId)> = Vec::new();
        for file in self.files.values_mut() {
            if file.layout.objects().iter().any(|k| k.ost == ost) {
                if let Some(gid) = file.group.take() {
                    orphaned.extend(file.layout.objects().iter().map(|&k| (k, gid)));
                }
            }
        }
        let stranded: Vec<LocalLock> = self
            .locks
            .iter()
            .filter(|(_, l)| orphaned.iter().any(|&(k, gid)| l.key == k && l.mode == crate::ldlm::LockMode::Group(gid)))
            .map(|(id, _)| id)
            .collect();
        for id in stranded {
            self.locks.begin_cancel(id);
        }
        let lost = self.writeback.discard_ost(ost);
        self.report_loss(ost, lost);
    }

    /// Remember, on every open file with an object in `lost`, that bytes
    /// written through it will never reach `ost`; an object no open file
    /// has keeps the loss for the next open of its file (a loss can come
    /// after the close: a commit that fails, an eviction of the copies kept
    /// for replay). Lustre keeps a writeback error in the inode for the
    /// next fsync or close likewise.
    pub(super) fn record_write_error(&mut self, lost: &BTreeSet<ObjectKey>, ost: OstIndex, cause: &LossCause) {
        let planted = crate::planted::active(crate::planted::Bug::SilentEviction) && *cause == LossCause::Evicted;
        if lost.is_empty() || planted {
            return;
        }
        let error = ClientError::WriteLost { ost, cause: cause.clone() };
        let mut told: BTreeSet<ObjectKey> = BTreeSet::new();
        for file in self.files.values_mut() {
            let objects = file.layout.objects();
            if objects.iter().any(|k| lost.contains(k)) {
                told.extend(objects.iter().filter(|k| lost.contains(k)));
                file.write_error.get_or_insert_with(|| error.clone());
            }
        }
        for &key in lost.difference(&told) {
            if !self.recovery.keep_unreported(key, &error) {
                tracing::warn!(client = self.id.0, %ost, "too many unreported losses: this one is not kept for the next open");
            }
        }
    }

    pub(super) fn report_loss(&mut self, ost: OstIndex, bytes: u64) {
        if bytes > 0 {
            self.counters.bytes_lost += bytes;
            self.outbox.event(ClientEvent::DataLost { ost, bytes });
        }
    }
}
