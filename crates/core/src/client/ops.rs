//! Operations in progress on a client and how each one advances.
//!
//! An operation is planned as a list of steps (one per stripe chunk of the
//! byte range, or one per object for whole-file operations) and advanced by
//! [`Client::step_op`] whenever the client gets an input. A step that needs
//! a lock either matches a cached one or enqueues a request and waits; it
//! keeps a reference on the lock only while it copies or fetches bytes.
//!
//! The operations themselves, their states and deadlines are the
//! operations table's (`op_table.rs`); this file plans and steps them,
//! calling on the other parts (lock cache, writeback, RPC book, outbox).

use super::ladvise::LockaheadResult;
use super::locks::{ClientLock, ClientLockState, LocalLock};
use super::op_table::{Op, OpKind, OpState, ReadBuf, Step, Steps};
use super::timeline;
use super::writeback::Written;
use super::{Client, ClientError, Commit, FileHandle, OpId, OpOutput, OpenFile, Rpc};
use crate::extent::{Extent, EOF};
use crate::layout::ObjectChunk;
use crate::ldlm::{EnqueueFlags, LockMode, LockRequest};
use crate::msg::{CacheAdvice, Cut, IoError, Payload, PayloadKind, ToOst};
use crate::units::{Duration, Instant, ObjectKey, PAGE_SIZE};
use std::collections::BTreeMap;

#[path = "ops_replies.rs"]
mod replies;

impl Op {
    pub(super) fn plan(
        files: &BTreeMap<FileHandle, OpenFile>,
        fh: FileHandle,
        kind: OpKind,
        offset: u64,
        len: u64,
    ) -> Result<Op, ClientError> {
        let file = files.get(&fh).ok_or(ClientError::BadFile)?;
        let layout = &file.layout;
        let mut kind = kind;
        if let OpKind::Advise { ranges, hints, .. } = &mut kind {
            *hints = cache_ranges(layout, ranges).map(|(advice, _, _)| advice).collect();
        }
        let whole = |mode: LockMode| Steps::EveryStripe { objects: layout.objects_shared(), mode };
        let io_mode = |write: bool| match (file.group, write) {
            (Some(gid), _) => LockMode::Group(gid),
            (None, true) => LockMode::ProtectedWrite,
            (None, false) => LockMode::ProtectedRead,
        };
        let steps =
            match &kind {
                OpKind::Write { .. } | OpKind::Read { .. } => {
                    if offset.checked_add(len).is_none_or(|end| end > crate::store::OBJECT_BYTES_MAX) {
                        return Err(ClientError::TooLarge { offset, len });
                    }
                    let mode = io_mode(matches!(kind, OpKind::Write { .. }));
                    Steps::List(layout.chunks_iter(offset, len).map(|c| chunk_step(c, offset, mode)).collect())
                }
                OpKind::Truncate { size } => Steps::List(
                    (0..layout.object_count())
                        .map(|s| {
                            let object_size = layout.file_size_to_object_size(s, *size);
                            let start = object_size - object_size % PAGE_SIZE;
                            let extent = Extent::new(start, EOF);
                            Step { key: layout.object(s), stripe: s, extent, buf_offset: 0, mode: io_mode(true) }
                        })
                        .collect(),
                ),
                OpKind::Fallocate { cut } => {
                    let (offset, len) = cut.span();
                    if matches!(cut, Cut::Size(_)) || len == 0 {
                        return Err(ClientError::InvalidCut(*cut));
                    }
                    if offset.checked_add(len).is_none_or(|end| end > crate::store::OBJECT_BYTES_MAX) {
                        return Err(ClientError::TooLarge { offset, len });
                    }
                    Steps::List(
                        layout
                            .object_extents(offset, len)
                            .into_iter()
                            .map(|(stripe, extent)| Step {
                                key: layout.object(stripe),
                                stripe,
                                extent: page_rounded(extent),
                                buf_offset: 0,
                                mode: io_mode(true),
                            })
                            .collect(),
                    )
                }
                OpKind::GroupLock { gid } => {
                    if file.group.is_some() {
                        return Err(ClientError::GroupLockHeld);
                    }
                    whole(LockMode::Group(*gid))
                }
                OpKind::GroupUnlock { gid } => {
                    if file.group != Some(*gid) {
                        return Err(ClientError::NoGroupLock(gid.0));
                    }
                    whole(LockMode::Group(*gid))
                }
                OpKind::Lockahead { ranges, .. } => Steps::List(
                    ranges
                        .iter()
                        .flat_map(|&(mode, start, end)| {
                            layout.object_extents(start, inclusive_len(start, end)).into_iter().map(move |(s, e)| {
                                Step { key: layout.object(s), stripe: s, extent: e, buf_offset: 0, mode }
                            })
                        })
                        .collect(),
                ),
                OpKind::Advise { ranges, .. } => Steps::List(
                    cache_ranges(layout, ranges)
                        .map(|(_, stripe, extent)| Step {
                            key: layout.object(stripe),
                            stripe,
                            extent,
                            buf_offset: 0,
                            mode: LockMode::ProtectedRead, // advice takes no lock
                        })
                        .collect(),
                ),
                OpKind::Close { unlocking: Some(gid) } => whole(LockMode::Group(*gid)),
                OpKind::Fsync { .. } | OpKind::Close { unlocking: None } | OpKind::Stat { .. } => {
                    whole(LockMode::ProtectedRead)
                }
            };
        Ok(Op { fh, kind, steps, index: 0, state: OpState::Ready, holding: None })
    }
}

/// The object ranges (inclusive) of cache advice on `ranges` of a file
/// laid out as `layout`, in the order the advices were given: Lustre's
/// `lov_io` splits a ladvise I/O into one sub-I/O per stripe it touches.
fn cache_ranges<'a>(
    layout: &'a crate::layout::Layout,
    ranges: &'a [(CacheAdvice, u64, u64)],
) -> impl Iterator<Item = (CacheAdvice, u32, Extent)> + 'a {
    ranges.iter().flat_map(move |&(advice, start, end)| {
        layout.object_extents(start, inclusive_len(start, end)).into_iter().map(move |(s, e)| (advice, s, e))
    })
}

/// `extent` widened to whole pages: what a lock and the page cache cover.
fn page_rounded(extent: Extent) -> Extent {
    let end = if extent.end == EOF { EOF } else { (extent.end / PAGE_SIZE + 1) * PAGE_SIZE - 1 };
    Extent::new(extent.start - extent.start % PAGE_SIZE, end)
}

fn chunk_step(c: ObjectChunk, op_offset: u64, mode: LockMode) -> Step {
    Step {
        key: c.key,
        stripe: c.stripe,
        extent: Extent::from_offset_len(c.object_offset, c.len),
        buf_offset: (c.file_offset - op_offset) as usize,
        mode,
    }
}

enum Acquire {
    Held,
    Wait,
    Fail(ClientError),
}

impl Client {
    /// Advance one operation as far as it goes; true if anything changed.
    pub(super) fn step_op(&mut self, now: Instant, id: OpId) -> bool {
        let mut progressed = false;
        loop {
            let Some(op) = self.ops.get(id) else { return progressed };
            if self.stalled(now, op) {
                return progressed;
            }
            if op.index == op.steps.len() {
                if let OpKind::Close { unlocking: Some(_) } = op.kind {
                    // The GROUP lock is given back: now the close proper.
                    let op = self.ops.get_mut(id).expect("live op");
                    op.kind = OpKind::Close { unlocking: None };
                    if let Steps::EveryStripe { mode, .. } = &mut op.steps {
                        *mode = LockMode::ProtectedRead;
                    }
                    op.index = 0;
                    op.state = OpState::Ready;
                    progressed = true;
                    continue;
                }
                if matches!(&op.kind, OpKind::Lockahead { then, .. } if !then.is_empty()) {
                    // The locks are held: now the cache advice given with them.
                    let op = self.ops.get_mut(id).expect("live op");
                    let OpKind::Lockahead { then, .. } = &mut op.kind else { unreachable!("checked") };
                    let advise = OpKind::Advise { ranges: std::mem::take(then), hints: Vec::new(), failed_ost: None };
                    match Op::plan(&self.files, op.fh, advise, 0, 0) {
                        Ok(next) => {
                            self.ops.insert(id, next);
                            progressed = true;
                            continue;
                        }
                        Err(error) => {
                            self.finish(id, Err(error));
                            return true;
                        }
                    }
                }
                if let OpKind::Fsync { .. } = op.kind {
                    match self.commit_fsync(id) {
                        Ok(Commit::Done) => {}
                        Ok(Commit::Sent) => return true,
                        Ok(Commit::Waiting) => return progressed,
                        Err(error) => {
                            self.release(now, id);
                            self.finish(id, Err(error));
                            return true;
                        }
                    }
                }
                let result = self.complete(id);
                self.finish(id, result);
                return true;
            }
            let advanced = match op.kind {
                OpKind::Write { .. } => self.step_write(now, id),
                OpKind::Read { .. } => self.step_read(now, id),
                OpKind::Fsync { .. } | OpKind::Close { unlocking: None } => self.step_flush(id),
                OpKind::Stat { .. } => self.step_stat(id),
                OpKind::Truncate { size } => self.step_truncate(now, id, size),
                OpKind::Fallocate { cut } => self.step_fallocate(now, id, cut),
                OpKind::GroupLock { .. } | OpKind::Lockahead { .. } => self.step_lock_only(now, id),
                OpKind::GroupUnlock { .. } | OpKind::Close { unlocking: Some(_) } => self.step_group_unlock(id),
                OpKind::Advise { .. } => self.step_advise(id),
            };
            match advanced {
                Ok(true) => progressed = true,
                Ok(false) => return progressed,
                Err(error) => {
                    self.release(now, id);
                    self.finish(id, Err(error));
                    return true;
                }
            }
        }
    }

    /// Whether `op` waits for something only a message or the clock brings:
    /// what its step function would find, said without running it. Most
    /// passes of [`Client::run`] meet ops in these states.
    fn stalled(&self, now: Instant, op: &Op) -> bool {
        // A write checks its payload before anything else.
        let payload_ok = |data: &Payload| self.check_payload(data.kind(), data.len()).is_ok();
        match (op.state, &op.kind) {
            (OpState::Copying { until }, OpKind::Write { data }) => {
                now < until && op.holding.is_some() && payload_ok(data)
            }
            // Granting the lock hands the op its reference.
            (OpState::WaitLock(l), kind) if op.holding.is_none() && self.locks.get(l).is_some() => match kind {
                OpKind::Write { data } => payload_ok(data),
                OpKind::Read { .. }
                | OpKind::Truncate { .. }
                | OpKind::Fallocate { .. }
                | OpKind::GroupLock { .. }
                | OpKind::Lockahead { .. } => true,
                OpKind::Fsync { .. }
                | OpKind::Close { .. }
                | OpKind::Stat { .. }
                | OpKind::GroupUnlock { .. }
                | OpKind::Advise { .. } => false,
            },
            (
                OpState::WaitRpcs { outstanding, .. },
                OpKind::Read { .. } | OpKind::Truncate { .. } | OpKind::Fallocate { .. },
            ) => outstanding > 0 && op.holding.is_some(),
            (
                OpState::WaitRpcs { outstanding, .. },
                OpKind::Stat { .. } | OpKind::Fsync { .. } | OpKind::Advise { .. },
            ) => outstanding > 0,
            _ => false,
        }
    }

    fn complete(&mut self, id: OpId) -> Result<OpOutput, ClientError> {
        let op = self.ops.get_mut(id).expect("live op");
        let fh = op.fh;
        Ok(match &mut op.kind {
            OpKind::Write { data } => OpOutput::Written(data.len()),
            OpKind::Read { len, buf } => match (std::mem::replace(buf, ReadBuf::Empty), self.payload_kind) {
                (ReadBuf::Bytes(bytes), _) => OpOutput::Read(bytes),
                (ReadBuf::Phantom, _) | (ReadBuf::Empty, Some(PayloadKind::Phantom)) => OpOutput::ReadPhantom(*len),
                (ReadBuf::Empty, _) => OpOutput::Read(vec![0; *len as usize]),
            },
            OpKind::Fsync { .. } => match self.files.get_mut(&fh).and_then(|f| f.write_error.take()) {
                Some(error) => return Err(error),
                None => OpOutput::Synced,
            },
            OpKind::Close { .. } => match self.files.remove(&fh).and_then(|f| f.write_error) {
                Some(error) => return Err(error),
                None => OpOutput::Closed,
            },
            OpKind::Stat { sizes, allocated, .. } => {
                let layout = &self.files.get(&fh).ok_or(ClientError::BadFile)?.layout;
                OpOutput::Size { size: layout.file_size(sizes), allocated: allocated.iter().sum() }
            }
            OpKind::Truncate { .. } => OpOutput::Truncated,
            OpKind::Fallocate { .. } => OpOutput::Allocated,
            OpKind::GroupLock { gid } => {
                let gid = *gid;
                self.files.get_mut(&fh).ok_or(ClientError::BadFile)?.group = Some(gid);
                OpOutput::GroupLocked
            }
            OpKind::GroupUnlock { .. } => OpOutput::GroupUnlocked,
            OpKind::Lockahead { .. } => OpOutput::LockaheadDone,
            OpKind::Advise { .. } => OpOutput::Advised,
        })
    }

    #[inline]
    fn current(&self, id: OpId) -> (Step, OpState, Option<LocalLock>) {
        let op = &self.ops[&id];
        (op.steps.at(op.index), op.state, op.holding)
    }

    fn set_state(&mut self, id: OpId, state: OpState) {
        self.ops.get_mut(id).expect("live op").state = state;
    }

    fn next_step(&mut self, now: Instant, id: OpId) {
        self.release(now, id);
        let op = self.ops.get_mut(id).expect("live op");
        op.index += 1;
        op.state = OpState::Ready;
    }

    /// Drop the operation's lock reference; a called-back lock with no users
    /// left is then cancelled by the flush pump.
    pub(super) fn release(&mut self, now: Instant, id: OpId) {
        let op = self.ops.get_mut(id).expect("live op");
        if let Some(l) = op.holding.take() {
            if let Some(lock) = self.locks.get_mut(l) {
                lock.users -= 1;
            }
            self.locks.touch(l, now);
        }
    }

    /// Make sure the operation holds a lock serving its current step.
    fn acquire(&mut self, id: OpId) -> Acquire {
        let (step, state, holding) = self.current(id);
        if holding.is_some() {
            return Acquire::Held;
        }
        if let OpState::WaitLock(l) = state {
            if self.locks.get(l).is_some() {
                return Acquire::Wait; // granting hands the reference over
            }
            self.set_state(id, OpState::Ready); // refused or evicted: start over
        }
        let need = step.extent.page_aligned(PAGE_SIZE);
        if let Some(l) = self.locks.matching(step.key, step.mode, need) {
            self.counters.lock_matches += 1;
            self.hold(id, l);
            return Acquire::Held;
        }
        if let LockMode::Group(gid) = step.mode {
            if !matches!(self.ops[&id].kind, OpKind::GroupLock { .. }) {
                // I/O under a group lock that is gone (eviction): an error,
                // never a silent fallback to ordinary locking.
                return Acquire::Fail(ClientError::NoGroupLock(gid.0));
            }
        }
        let l = match self.locks.pending_covering(step.key, step.mode, need) {
            Some(l) => l,
            None => {
                let no_expand = self.files.get(&self.ops[&id].fh).is_some_and(|f| f.no_expand)
                    || matches!(self.ops[&id].kind, OpKind::Lockahead { .. });
                let flags = EnqueueFlags { no_expand, speculative: false };
                self.enqueue(step.key, step.mode, need, flags)
            }
        };
        self.set_state(id, OpState::WaitLock(l));
        Acquire::Wait
    }

    /// [`Client::acquire`] as a result: `Ok(true)` once the lock is held.
    fn acquired(&mut self, id: OpId) -> Result<bool, ClientError> {
        match self.acquire(id) {
            Acquire::Held => Ok(true),
            Acquire::Wait => Ok(false),
            Acquire::Fail(e) => Err(e),
        }
    }

    fn hold(&mut self, id: OpId, l: LocalLock) {
        let lock = self.locks.get_mut(l).expect("held lock exists");
        lock.users += 1;
        self.locks.settle(l);
        let op = self.ops.get_mut(id).expect("live op");
        op.holding = Some(l);
        op.state = OpState::Ready;
    }

    pub(super) fn enqueue(&mut self, key: ObjectKey, mode: LockMode, extent: Extent, flags: EnqueueFlags) -> LocalLock {
        let xid = self.xid();
        self.counters.enqueues += 1;
        self.osc(key.ost).enqueues += 1;
        if flags.speculative {
            self.counters.lockahead_enqueues += 1;
        }
        self.timeline_note(timeline::TimelineEvent::Enqueue { lockahead: flags.speculative });
        let lock = ClientLock {
            key,
            mode,
            flags,
            requested: extent,
            extent,
            handle: None,
            state: ClientLockState::Enqueuing { xid },
            users: 0,
            callback_pending: false,
            last_used: Instant::ZERO,
            in_lru: false,
            proof: crate::ldlm::proof::LockProof::default(),
        };
        let l = self.locks.insert(lock);
        let request = LockRequest { mode, extent, flags };
        self.send(key.ost, ToOst::Enqueue { xid, object: key.object, request });
        l
    }

    fn step_write(&mut self, now: Instant, id: OpId) -> Result<bool, ClientError> {
        let OpKind::Write { data } = &self.ops[&id].kind else { unreachable!() };
        let kind = data.kind();
        self.check_payload(kind, data.len())?; // before locking anything for it
        if !self.acquired(id)? {
            return Ok(false);
        }
        let (step, state, _) = self.current(id);
        let len = step.extent.len();
        match state {
            OpState::Copying { until } if now < until => return Ok(false),
            // The copy is over: its room under the dirty limit was granted
            // when it began.
            OpState::Copying { until } => self.ops.end_copy(id, until),
            OpState::Ready
            | OpState::WaitLock(_)
            | OpState::WaitDirty
            | OpState::WaitRpcs { .. }
            | OpState::WaitFlush => {
                let dirty = self.writeback.cache().dirty_bytes_ost(step.key.ost);
                let unstable = self.recovery.replay().bytes(step.key.ost);
                if (dirty > 0 && dirty + len > self.config.dirty_bytes_max)
                    || (unstable > 0 && unstable >= self.config.unstable_bytes_max)
                {
                    self.set_state(id, OpState::WaitDirty);
                    self.ask_commit_if_due(step.key.ost);
                    return Ok(false);
                }
                let copy = self.config.copy_time(len);
                if copy > Duration::ZERO {
                    // The file's first object names it (where copies contend).
                    let file = match self.config.copy_contention.is_off() {
                        true => step.key,
                        false => self.files.get(&self.ops[&id].fh).map_or(step.key, |f| f.layout.object(0)),
                    };
                    let config = &self.config;
                    let until = self.copies.run(file, now, |start| config.run_on_cores(start, copy));
                    self.ops.start_copy(id, until);
                    return Ok(false);
                }
            }
        }
        let OpKind::Write { data } = &self.ops[&id].kind else { unreachable!() };
        let (key, at) = (step.key, step.extent.start);
        match data {
            Payload::Bytes(data) => {
                let bytes = &data[step.buf_offset..step.buf_offset + len as usize];
                self.writeback.write(key, at, Written::Bytes(bytes))
            }
            Payload::Phantom(_) => self.writeback.write(key, at, Written::Phantom(len)),
            Payload::Pages(span) => {
                let piece = span.sub(step.buf_offset as u64, len);
                self.writeback.write(key, at, Written::Span(&piece))
            }
            Payload::Remote(span) => {
                let bytes = span.to_vec();
                let piece = &bytes[step.buf_offset..step.buf_offset + len as usize];
                self.writeback.write(key, at, Written::Bytes(piece))
            }
        };
        self.note_payload(kind, len);
        self.next_step(now, id);
        Ok(true)
    }

    fn step_read(&mut self, now: Instant, id: OpId) -> Result<bool, ClientError> {
        if !self.acquired(id)? {
            return Ok(false);
        }
        let (step, state, _) = self.current(id);
        match state {
            OpState::WaitRpcs { outstanding: 0, failed: Some(IoError::Evicted) } => {
                self.release(now, id);
                self.set_state(id, OpState::Ready);
                return Ok(true); // locks were dropped; redo the step
            }
            OpState::WaitRpcs { outstanding: 0, failed: Some(error) } => {
                return Err(ClientError::Io { ost: step.key.ost, error })
            }
            OpState::WaitRpcs { outstanding: 0, failed: None } => {}
            OpState::WaitRpcs { .. } => return Ok(false),
            OpState::Ready
            | OpState::WaitLock(_)
            | OpState::WaitDirty
            | OpState::WaitFlush
            | OpState::Copying { .. } => {}
        }
        let len = step.extent.len();
        if !self.may_trust_cache(step.key.ost) {
            // Cut off from the OST: it may have called the lock back and
            // evicted this client since, and granted its bytes to a writer.
            // The read waits for the session to come back, which says.
            return Ok(false);
        }
        if let Some(piece) = self.writeback.cache().read(step.key, step.extent.start, len) {
            let OpKind::Read { len, buf } = &mut self.ops.get_mut(id).expect("live op").kind else { unreachable!() };
            buf.put(step.buf_offset, piece, *len)?;
            self.trim_cache(step.key, step.extent);
            self.next_step(now, id);
            return Ok(true);
        }
        let spans = self.writeback.cache().missing_pages(step.key, step.extent.start, len, self.config.rpc_bytes_max);
        debug_assert!(!spans.is_empty(), "cache miss with nothing to fetch");
        for span in &spans {
            let xid = self.xid();
            self.counters.read_rpcs += 1;
            self.rpcs.insert(xid, Rpc::Read { op: id, key: step.key, offset: span.start, len: span.len() });
            self.note_rpc_sent(step.key.ost, false, span.start, span.len());
            self.send(step.key.ost, ToOst::Read { xid, object: step.key.object, offset: span.start, len: span.len() });
        }
        self.set_state(id, OpState::WaitRpcs { outstanding: spans.len(), failed: None });
        Ok(true)
    }

    /// Waits at the first object, from the current step on, with bytes dirty
    /// or in flight; passes the clean ones in one go (a file striped over
    /// hundreds of OSTs has hundreds of steps, most of them clean).
    fn step_flush(&mut self, id: OpId) -> Result<bool, ClientError> {
        let op = &self.ops[&id];
        let unstable = |s: Step| {
            self.writeback.cache().has_dirty(s.key, Extent::WHOLE)
                || self.writeback.cache().has_writeback(s.key, Extent::WHOLE)
        };
        let clean = if self.writeback.cache().is_stable() {
            op.steps.len() - op.index
        } else {
            (op.index..op.steps.len()).position(|i| unstable(op.steps.at(i))).unwrap_or(op.steps.len() - op.index)
        };
        let op = self.ops.get_mut(id).expect("live op");
        op.index += clean;
        if op.index < op.steps.len() {
            op.state = OpState::WaitFlush;
            return Ok(clean > 0);
        }
        op.state = OpState::Ready;
        Ok(true)
    }

    fn step_stat(&mut self, id: OpId) -> Result<bool, ClientError> {
        let (step, state, _) = self.current(id);
        match state {
            OpState::Ready => {
                // Ask every object at once; the replies fill `sizes`.
                let steps = self.ops[&id].steps.clone();
                let OpKind::Stat { sizes, allocated, .. } = &mut self.ops.get_mut(id).expect("live op").kind else {
                    unreachable!()
                };
                *sizes = vec![0; steps.len()];
                *allocated = vec![0; steps.len()];
                for s in steps.iter() {
                    let xid = self.xid();
                    self.rpcs.insert(xid, Rpc::Getattr { op: id, stripe: s.stripe, ost: s.key.ost });
                    self.osc(s.key.ost).getattrs += 1;
                    self.send(s.key.ost, ToOst::Getattr { xid, object: s.key.object });
                }
                self.set_state(id, OpState::WaitRpcs { outstanding: steps.len(), failed: None });
                Ok(true)
            }
            OpState::WaitRpcs { outstanding: 0, failed: Some(error) } => {
                let OpKind::Stat { failed_ost, .. } = self.ops[&id].kind else { unreachable!("a stat") };
                Err(ClientError::Io { ost: failed_ost.unwrap_or(step.key.ost), error })
            }
            OpState::WaitRpcs { outstanding: 0, failed: None } => {
                let op = self.ops.get_mut(id).expect("live op");
                op.index = op.steps.len();
                Ok(true)
            }
            OpState::WaitLock(_)
            | OpState::WaitDirty
            | OpState::WaitRpcs { .. }
            | OpState::WaitFlush
            | OpState::Copying { .. } => Ok(false),
        }
    }

    /// Where a step that sends one punch stands once its lock is held:
    /// `Some` of what the step returns while the punch is out or answered
    /// (the next step after a success), `None` when it is to be sent.
    fn punch_answered(&mut self, now: Instant, id: OpId) -> Option<Result<bool, ClientError>> {
        let (step, state, _) = self.current(id);
        match state {
            OpState::WaitRpcs { outstanding: 0, failed: None } => {
                self.next_step(now, id);
                Some(Ok(true))
            }
            OpState::WaitRpcs { outstanding: 0, failed: Some(error) } => {
                Some(Err(ClientError::Io { ost: step.key.ost, error }))
            }
            OpState::WaitRpcs { .. } => Some(Ok(false)),
            OpState::Ready
            | OpState::WaitLock(_)
            | OpState::WaitDirty
            | OpState::WaitFlush
            | OpState::Copying { .. } => None,
        }
    }

    /// Sends `cut` of the current step's object and waits for its answer.
    fn send_cut(&mut self, id: OpId, key: ObjectKey, cut: Cut, dropped: u64) {
        let xid = self.xid();
        self.rpcs.insert(xid, Rpc::Punch { op: id, key, cut, dropped });
        self.osc(key.ost).punches += 1;
        self.send(key.ost, ToOst::Punch { xid, object: key.object, cut });
        self.set_state(id, OpState::WaitRpcs { outstanding: 1, failed: None });
    }

    fn step_truncate(&mut self, now: Instant, id: OpId, size: u64) -> Result<bool, ClientError> {
        if !self.acquired(id)? {
            return Ok(false);
        }
        if let Some(done) = self.punch_answered(now, id) {
            return done;
        }
        let (step, _, _) = self.current(id);
        let layout = &self.files.get(&self.ops[&id].fh).ok_or(ClientError::BadFile)?.layout;
        let object_size = layout.file_size_to_object_size(step.stripe, size);
        if self.writeback.cache().has_writeback(step.key, Extent::new(object_size - object_size % PAGE_SIZE, EOF)) {
            return Ok(false); // let writes in flight past the new end land first
        }
        let dropped: u64 = self
            .writeback
            .cache()
            .dirty_ranges(step.key)
            .iter()
            .filter(|r| r.end >= object_size)
            .map(|r| r.end + 1 - r.start.max(object_size))
            .sum();
        self.writeback.truncate(step.key, object_size);
        self.send_cut(id, step.key, Cut::Size(object_size), dropped);
        Ok(true)
    }

    /// One object's part of a hole or a reservation, under its PW lock:
    /// this client's dirty bytes there are written first (the cut is
    /// ordered after them), then its cached pages there dropped (a hole's
    /// bytes read as zeros from the OST), then the cut sent.
    fn step_fallocate(&mut self, now: Instant, id: OpId, file_cut: Cut) -> Result<bool, ClientError> {
        if !self.acquired(id)? {
            return Ok(false);
        }
        if let Some(done) = self.punch_answered(now, id) {
            return done;
        }
        let (step, state, _) = self.current(id);
        if self.writeback.cache().has_dirty(step.key, step.extent)
            || self.writeback.cache().has_writeback(step.key, step.extent)
        {
            // Written back by the flush pump, which serves ops
            // waiting in this state; this step looks again after.
            let moved = state != OpState::WaitFlush;
            self.set_state(id, OpState::WaitFlush);
            return Ok(moved);
        }
        let layout = &self.files.get(&self.ops[&id].fh).ok_or(ClientError::BadFile)?.layout;
        let (offset, len) = file_cut.span();
        let (start, end) = (
            layout.file_size_to_object_size(step.stripe, offset),
            layout.file_size_to_object_size(step.stripe, offset + len),
        );
        let cut = match file_cut {
            Cut::Hole { .. } => Cut::Hole { offset: start, len: end - start },
            Cut::Reserve { keep_size, .. } => Cut::Reserve { offset: start, len: end - start, keep_size },
            Cut::Size(_) => unreachable!("a truncate is planned as one"),
        };
        if matches!(cut, Cut::Hole { .. }) {
            self.writeback.drop_clean(step.key, step.extent);
        }
        self.send_cut(id, step.key, cut, 0);
        Ok(true)
    }

    /// Group lock and synchronous lockahead: get the lock, use it for nothing.
    fn step_lock_only(&mut self, now: Instant, id: OpId) -> Result<bool, ClientError> {
        if !self.acquired(id)? {
            return Ok(false);
        }
        self.next_step(now, id);
        Ok(true)
    }

    /// Synchronous cache advice: one request per object range, all at once
    /// (Lustre's `osc_io_ladvise_start` sends each stripe's and
    /// `osc_io_ladvise_end` waits for them), then every answer.
    fn step_advise(&mut self, id: OpId) -> Result<bool, ClientError> {
        let (step, state, _) = self.current(id);
        match state {
            OpState::Ready => {
                let op = &self.ops[&id];
                let OpKind::Advise { hints, .. } = &op.kind else { unreachable!("an advice") };
                let sends: Vec<(Step, CacheAdvice)> = op.steps.iter().zip(hints.iter().copied()).collect();
                debug_assert_eq!(sends.len(), op.steps.len(), "one advice per step");
                for &(s, advice) in &sends {
                    self.send_advise(Some(id), s.key, advice, s.extent);
                }
                self.set_state(id, OpState::WaitRpcs { outstanding: sends.len(), failed: None });
                Ok(true)
            }
            OpState::WaitRpcs { outstanding: 0, failed: Some(error) } => {
                let OpKind::Advise { failed_ost, .. } = self.ops[&id].kind else { unreachable!("an advice") };
                Err(ClientError::Io { ost: failed_ost.unwrap_or(step.key.ost), error })
            }
            OpState::WaitRpcs { outstanding: 0, failed: None } => {
                let op = self.ops.get_mut(id).expect("live op");
                op.index = op.steps.len();
                Ok(true)
            }
            OpState::WaitLock(_)
            | OpState::WaitDirty
            | OpState::WaitRpcs { .. }
            | OpState::WaitFlush
            | OpState::Copying { .. } => Ok(false),
        }
    }

    /// Send cache advice on `extent` (inclusive) of `key`'s object, for
    /// operation `op`, or for nobody (`LF_ASYNC`: its answer is only
    /// logged). It is kept until answered, so that a lost connection sends
    /// it again.
    pub(super) fn send_advise(&mut self, op: Option<OpId>, key: ObjectKey, advice: CacheAdvice, extent: Extent) {
        let xid = self.xid();
        let (start, end) = (extent.start, extent.end.saturating_add(1));
        self.rpcs.insert(xid, Rpc::Advise { op, key, advice, start, end });
        self.send(key.ost, ToOst::Advise { xid, object: key.object, advice, start, end });
    }

    /// Asynchronous cache advice on the file's `[start, end]`: sent to
    /// every object it touches, waited for by nobody.
    pub(super) fn advise_async(&mut self, fh: FileHandle, advice: CacheAdvice, start: u64, end: u64) {
        let layout = self.files[&fh].layout.clone();
        for (_, stripe, extent) in cache_ranges(&layout, &[(advice, start, end)]) {
            self.send_advise(None, layout.object(stripe), advice, extent);
        }
    }

    fn step_group_unlock(&mut self, id: OpId) -> Result<bool, ClientError> {
        let (step, _, _) = self.current(id);
        let fh = self.ops[&id].fh;
        if let Some(file) = self.files.get_mut(&fh) {
            file.group = None; // no new I/O under the group lock from now on
        }
        let held: Vec<LocalLock> = self
            .locks
            .iter()
            .filter(|(_, l)| l.key == step.key && l.mode == step.mode && l.state != ClientLockState::Cancelling)
            .map(|(id, _)| id)
            .collect();
        for l in held {
            self.locks.begin_cancel(l);
        }
        let cancelling = self.locks.any(|l| l.key == step.key && l.mode == step.mode);
        if cancelling {
            self.set_state(id, OpState::WaitFlush);
            return Ok(false);
        }
        let op = self.ops.get_mut(id).expect("live op");
        op.index += 1;
        op.state = OpState::Ready;
        Ok(true)
    }

    /// Asynchronous lockahead of one file range: one speculative request
    /// per object it touches, unless a cached lock already covers it.
    pub(super) fn lockahead_async(
        &mut self,
        now: Instant,
        fh: FileHandle,
        mode: LockMode,
        start: u64,
        end: u64,
    ) -> LockaheadResult {
        let _ = now;
        let layout = self.files[&fh].layout.clone();
        let mut result = LockaheadResult::Same;
        for (stripe, extent) in layout.object_extents(start, inclusive_len(start, end)) {
            let key = layout.object(stripe);
            let want = extent.page_aligned(PAGE_SIZE);
            let this = if let Some(l) = self.locks.matching(key, mode, want) {
                if self.locks.get(l).expect("matched").extent == want {
                    LockaheadResult::Same
                } else {
                    LockaheadResult::Different
                }
            } else {
                if !self.locks.pending_exactly(key, mode, want) {
                    self.enqueue(key, mode, want, EnqueueFlags { no_expand: true, speculative: true });
                }
                LockaheadResult::Sent
            };
            result = combine(result, this);
        }
        result
    }
}

/// Length of the inclusive range `[start, end]`, clipped so that
/// `start + len` stays representable (an advice may end at `EOF`).
fn inclusive_len(start: u64, end: u64) -> u64 {
    (end - start).saturating_add(1).min(u64::MAX - start)
}

fn combine(a: LockaheadResult, b: LockaheadResult) -> LockaheadResult {
    use LockaheadResult::*;
    match (a, b) {
        (Sent, _) | (_, Sent) => Sent,
        (Different, _) | (_, Different) => Different,
        _ => Same,
    }
}
