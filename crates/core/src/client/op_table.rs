//! The client's operations table: every operation started and not yet
//! finished, with what each waits for, and the deadlines the operations and
//! their lock requests keep.
//!
//! What it owns: the operations ([`Op`], by [`OpId`]) with their kinds,
//! steps and states; the next operation id; `copy_ends`, when each write
//! step copying into the page cache ends; and `lock_wait_ends`, when each
//! lock request waiting at its OST is withdrawn (with `lock_wait_max`).
//!
//! How operations advance is `ops.rs`'s (it plans and steps them); this
//! part keeps the table and its deadlines in step with each other.
//!
//! Invariants ([`OpTable::check_invariants`]):
//! * `copy_ends` holds exactly the operations in [`OpState::Copying`], each
//!   at the end its state names: a step enters and leaves the copy only
//!   through [`OpTable::start_copy`], [`OpTable::end_copy`] and
//!   [`OpTable::remove`];
//! * every operation id is below the next one handed out, and an
//!   operation's step index is at most its step count;
//! * a lock's wait deadline is dropped when its time comes, whether the lock
//!   still waits then or not (the client checks), so `lock_wait_ends` needs
//!   no tending when a lock is granted or goes.

use super::error::ClientError;
use super::locks::LocalLock;
use crate::extent::Extent;
use crate::ldlm::{GroupId, LockMode};
use crate::msg::{CacheAdvice, Cut, IoError, Payload, PayloadKind};
use crate::units::{Instant, ObjectKey, OstIndex};
use serde::Serialize;
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A file opened on this client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct FileHandle(pub u64);

/// An operation started on this client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct OpId(pub u64);

#[derive(Debug)]
pub(super) enum OpKind {
    Write {
        data: Payload,
    },
    Read {
        len: u64,
        buf: ReadBuf,
    },
    /// Flush, then (`committing`) the sync RPCs; `failed_ost` names the
    /// OST whose sync failed.
    Fsync {
        committing: bool,
        failed_ost: Option<OstIndex>,
    },
    /// Release the file's GROUP lock first (`unlocking`, as Lustre's
    /// `ll_file_release` puts it), then flush and forget the handle.
    Close {
        unlocking: Option<GroupId>,
    },
    /// A glimpse of every object; `failed_ost` names the OST whose getattr
    /// failed.
    Stat {
        sizes: Vec<u64>,
        /// Each object's space, by stripe.
        allocated: Vec<u64>,
        failed_ost: Option<OstIndex>,
    },
    Truncate {
        size: u64,
    },
    /// A hole or a reservation (never a [`Cut::Size`]: that is a
    /// truncate), at file offsets; each step cuts its object's range.
    Fallocate {
        cut: Cut,
    },
    GroupLock {
        gid: GroupId,
    },
    GroupUnlock {
        gid: GroupId,
    },
    /// Synchronous lockahead: `(mode, start, end)` file ranges, inclusive;
    /// `then` the synchronous cache advice given with it, which the
    /// operation goes on to as [`OpKind::Advise`] once the locks are held.
    Lockahead {
        ranges: Vec<(LockMode, u64, u64)>,
        then: Vec<(CacheAdvice, u64, u64)>,
    },
    /// Synchronous cache advice: `(advice, start, end)` file ranges,
    /// inclusive, one step per object range they touch, all sent at once;
    /// `hints[i]` is step `i`'s advice (made with the steps); `failed_ost`
    /// names the OST whose answer was an error.
    Advise {
        ranges: Vec<(CacheAdvice, u64, u64)>,
        hints: Vec<CacheAdvice>,
        failed_ost: Option<OstIndex>,
    },
}

/// Where a read gathers its steps' data. Nothing is allocated before the
/// first step's data is there, and then only for bytes: a read by a client
/// of phantoms never holds a buffer.
#[derive(Debug)]
pub(super) enum ReadBuf {
    Empty,
    Bytes(Vec<u8>),
    Phantom,
}

impl ReadBuf {
    /// Places one step's data at `at` of a read of `len` bytes.
    pub(super) fn put(&mut self, at: usize, piece: Payload, len: u64) -> Result<(), ClientError> {
        let piece = match piece {
            Payload::Pages(_) | Payload::Remote(_) => Payload::Bytes(piece.into_bytes().expect("bytes")),
            piece @ (Payload::Bytes(_) | Payload::Phantom(_)) => piece,
        };
        match (piece, &mut *self) {
            // A read within one stripe chunk takes the cache's copy as it is.
            (Payload::Bytes(bytes), ReadBuf::Empty) if at == 0 && bytes.len() as u64 == len => {
                *self = ReadBuf::Bytes(bytes);
            }
            (Payload::Bytes(bytes), ReadBuf::Empty) => {
                let mut buf = vec![0; len as usize];
                buf[at..at + bytes.len()].copy_from_slice(&bytes);
                *self = ReadBuf::Bytes(buf);
            }
            (Payload::Bytes(bytes), ReadBuf::Bytes(buf)) => buf[at..at + bytes.len()].copy_from_slice(&bytes),
            (Payload::Phantom(_), ReadBuf::Empty | ReadBuf::Phantom) => *self = ReadBuf::Phantom,
            (piece, held) => {
                let held = if matches!(held, ReadBuf::Phantom) { PayloadKind::Phantom } else { PayloadKind::Bytes };
                return Err(ClientError::MixedPayloads { held, offered: piece.kind() });
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OpState {
    Ready,
    WaitLock(LocalLock),
    /// Writes wait here while the OST's dirty limit is reached.
    WaitDirty,
    WaitRpcs {
        outstanding: usize,
        failed: Option<IoError>,
    },
    /// Fsync, close and group unlock wait here for writeback.
    WaitFlush,
    /// A write step copies its bytes into the page cache under its lock
    /// until then (only with [`super::ClientConfig::copy_bytes_per_s`]).
    Copying {
        until: Instant,
    },
}

/// One unit of work of an operation.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    pub key: ObjectKey,
    pub stripe: u32,
    /// Object bytes the step touches (whole object for whole-file steps).
    pub extent: Extent,
    /// Where the step's bytes sit in the operation's buffer.
    pub buf_offset: usize,
    pub mode: LockMode,
}

/// The steps of an operation: a list, or one whole-object step per object
/// of a file, made when asked for (fsync and close of a file striped over
/// hundreds of OSTs, on thousands of clients, would otherwise build and
/// free hundreds of steps each).
#[derive(Clone, Debug)]
pub(super) enum Steps {
    /// Inline when there is one (a read or write within a stripe unit, the
    /// usual write of a collective buffer or of a stripe-sized transfer).
    List(SmallVec<[Step; 1]>),
    /// Stripe `i` is `objects[i]`, the whole of it, in `mode`.
    EveryStripe { objects: Arc<[ObjectKey]>, mode: LockMode },
}

impl Steps {
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Steps::List(steps) => steps.len(),
            Steps::EveryStripe { objects, .. } => objects.len(),
        }
    }

    #[inline]
    pub fn get(&self, index: usize) -> Option<Step> {
        (index < self.len()).then(|| self.at(index))
    }

    /// The step at `index`; panics past the last one.
    #[inline]
    pub fn at(&self, index: usize) -> Step {
        match self {
            Steps::List(steps) => steps[index],
            Steps::EveryStripe { objects, mode } => Step {
                key: objects[index],
                stripe: index as u32, // a layout has at most STRIPE_COUNT_MAX stripes
                extent: Extent::WHOLE,
                buf_offset: 0,
                mode: *mode,
            },
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Step> + '_ {
        (0..self.len()).map(|i| self.at(i))
    }
}

#[derive(Debug)]
pub(super) struct Op {
    pub fh: FileHandle,
    pub kind: OpKind,
    pub steps: Steps,
    pub index: usize,
    pub state: OpState,
    pub holding: Option<LocalLock>,
}
impl Op {
    /// The OST evicted us: locks there are gone; steps on it start over.
    /// Returns the end of the copy into the page cache this interrupted, if
    /// any (the table's `copy_ends` forgets it).
    #[must_use]
    fn forget_locks_on(&mut self, ost: OstIndex) -> Option<Instant> {
        let step = self.steps.get(self.index)?;
        if step.key.ost != ost {
            return None;
        }
        self.holding = None;
        let interrupted = match self.state {
            OpState::Copying { until } => Some(until),
            OpState::Ready
            | OpState::WaitLock(_)
            | OpState::WaitDirty
            | OpState::WaitRpcs { .. }
            | OpState::WaitFlush => None,
        };
        if matches!(self.state, OpState::WaitLock(_) | OpState::WaitDirty | OpState::Copying { .. }) {
            self.state = OpState::Ready;
        }
        interrupted
    }
}

#[derive(Debug)]
pub(super) struct OpTable {
    ops: BTreeMap<OpId, Op>,
    /// When each write step copying into the page cache ends: the ops in
    /// `OpState::Copying`, by end.
    copy_ends: BTreeSet<(Instant, OpId)>,
    /// When each lock waiting at its OST is withdrawn (with
    /// `lock_wait_max`). An entry whose lock stopped waiting is dropped
    /// when its time comes.
    lock_wait_ends: BTreeSet<(Instant, LocalLock)>,
    op_next: u64,
}

impl Default for OpTable {
    fn default() -> Self {
        OpTable { ops: BTreeMap::new(), copy_ends: BTreeSet::new(), lock_wait_ends: BTreeSet::new(), op_next: 1 }
    }
}

impl OpTable {
    /// A fresh operation id, never handed out before.
    pub(super) fn next_id(&mut self) -> OpId {
        let id = OpId(self.op_next);
        self.op_next += 1;
        id
    }

    /// Operation `id`, just planned, enters the table (or replaces its
    /// earlier plan: a lockahead going on to its cache advice).
    pub(super) fn insert(&mut self, id: OpId, op: Op) {
        assert!(id.0 < self.op_next, "op table: {id:?} was never handed out");
        assert_eq!(op.state, OpState::Ready, "op table: {id:?} enters in another state than ready");
        if let Some(old) = self.ops.insert(id, op) {
            assert!(!matches!(old.state, OpState::Copying { .. }), "op table: {id:?} replaced while copying");
        }
    }

    /// Operation `id`, finished, leaves the table with its copy deadline.
    pub(super) fn remove(&mut self, id: OpId) -> Op {
        let op = self.ops.remove(&id).expect("finishing a live op");
        if let OpState::Copying { until } = op.state {
            let removed = self.copy_ends.remove(&(until, id));
            assert!(removed, "op table: {id:?} copied with no deadline");
        }
        op
    }

    /// Operation `id`'s current step copies into the page cache until `until`.
    pub(super) fn start_copy(&mut self, id: OpId, until: Instant) {
        let op = self.ops.get_mut(&id).expect("live op");
        assert!(!matches!(op.state, OpState::Copying { .. }), "op table: {id:?} copies twice");
        op.state = OpState::Copying { until };
        self.copy_ends.insert((until, id));
    }

    /// Operation `id`'s copy, ending at `until`, is over (its state is the
    /// caller's to set next).
    pub(super) fn end_copy(&mut self, id: OpId, until: Instant) {
        debug_assert_eq!(self.ops[&id].state, OpState::Copying { until }, "op table: {id:?} not copying");
        let removed = self.copy_ends.remove(&(until, id));
        assert!(removed, "op table: {id:?} copied with no deadline");
    }

    /// The OST evicted us: the steps on it start over, their copies
    /// interrupted.
    pub(super) fn forget_locks_on(&mut self, ost: OstIndex) {
        for (&id, op) in self.ops.iter_mut() {
            if let Some(until) = op.forget_locks_on(ost) {
                self.copy_ends.remove(&(until, id));
            }
        }
    }

    /// The first copy to end, if any.
    pub(super) fn first_copy_end(&self) -> Option<Instant> {
        self.copy_ends.first().map(|&(t, _)| t)
    }

    /// Lock `l` waits at its OST until `end` at most.
    pub(super) fn wait_lock_until(&mut self, end: Instant, l: LocalLock) {
        self.lock_wait_ends.insert((end, l));
    }

    /// The first lock wait to end at or before `now`, taken out.
    pub(super) fn pop_lock_wait_until(&mut self, now: Instant) -> Option<LocalLock> {
        let &(end, l) = self.lock_wait_ends.first()?;
        if end > now {
            return None;
        }
        self.lock_wait_ends.pop_first();
        Some(l)
    }

    /// The first lock wait to end, if any.
    pub(super) fn first_lock_wait_end(&self) -> Option<Instant> {
        self.lock_wait_ends.first().map(|&(t, _)| t)
    }

    pub(super) fn get(&self, id: OpId) -> Option<&Op> {
        self.ops.get(&id)
    }

    /// Operation `id`, to step it: its state must not enter or leave
    /// [`OpState::Copying`] but through [`OpTable::start_copy`] and
    /// [`OpTable::end_copy`].
    pub(super) fn get_mut(&mut self, id: OpId) -> Option<&mut Op> {
        self.ops.get_mut(&id)
    }

    pub(super) fn contains(&self, id: OpId) -> bool {
        self.ops.contains_key(&id)
    }

    /// The first live operation after `id` (or the first of all).
    pub(super) fn next_after(&self, id: Option<OpId>) -> Option<OpId> {
        match id {
            None => self.ops.keys().next().copied(),
            Some(id) => self.ops.range(OpId(id.0 + 1)..).next().map(|(&id, _)| id),
        }
    }

    /// Every live operation, in id order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (OpId, &Op)> {
        self.ops.iter().map(|(&id, op)| (id, op))
    }

    /// Every live operation, in id order (see [`OpTable::get_mut`]).
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Op> {
        self.ops.values_mut()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Op> {
        self.ops.values()
    }

    pub(super) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Panics if the deadlines disagree with the operations.
    pub fn check_invariants(&self) {
        let copying: BTreeSet<(Instant, OpId)> = self
            .ops
            .iter()
            .filter_map(|(&id, op)| match op.state {
                OpState::Copying { until } => Some((until, id)),
                OpState::Ready
                | OpState::WaitLock(_)
                | OpState::WaitDirty
                | OpState::WaitRpcs { .. }
                | OpState::WaitFlush => None,
            })
            .collect();
        assert_eq!(copying, self.copy_ends, "op table: copy ends disagree with the copying ops");
        for (id, op) in &self.ops {
            assert!(id.0 < self.op_next, "op table: {id:?} listed but never handed out");
            assert!(op.index <= op.steps.len(), "op table: {id:?} past its last step");
        }
    }
}

impl std::ops::Index<&OpId> for OpTable {
    type Output = Op;

    /// Live operation `id`; panics if it has finished.
    fn index(&self, id: &OpId) -> &Op {
        &self.ops[id]
    }
}
