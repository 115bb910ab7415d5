//! The OST service: one object storage target's data path and lock
//! namespace, sans-IO.
//!
//! It answers clients' RPCs (enqueue, cancel, write, read, punch, getattr)
//! from an [`ObjectStore`], runs the target's [`LockServer`], and gathers
//! glimpse answers for size requests. Like every lanefs state machine it
//! takes `now` with each input and reports what to send through
//! [`Ost::poll_transmit`].
//!
//! The OST does not check that I/O is covered by a lock (neither does
//! Lustre's): coherence is the clients' duty, enforced by their lock cache.
//! It does refuse all I/O from an evicted client until it reconnects, so a
//! client's stale dirty data cannot land after its locks were taken away.
//!
//! Payloads: a write's [`Payload`] goes to the store as it is (bytes or a
//! phantom), and reads are answered with the kind of payload the store keeps
//! ([`ObjectStore::payload_kind`]): bytes from a `MemStore` or a file store,
//! phantoms from the simulator's `SizeStore`. A store refusing a kind makes
//! the RPC fail with [`IoError::PayloadKind`]. Counters count phantom bytes
//! as bytes, so the simulator's statistics read as a real run's.

use crate::ldlm::server::{LockServer, LockServerConfig};
use crate::msg::{IoError, Payload, PayloadKind, ToClient, ToOst};
use crate::store::{ObjectStore, StoreError};
use crate::units::{ClientId, Duration, Instant, ObjectId, OstIndex, Xid};
use crate::Extent;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use tracing::{debug, warn};

/// Data-path counters of one OST.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstCounters {
    pub write_rpcs: u64,
    pub read_rpcs: u64,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub punches: u64,
    pub getattrs: u64,
    pub glimpses: u64,
    /// I/O refused because its client was evicted.
    pub io_refused: u64,
}

impl std::ops::AddAssign for OstCounters {
    fn add_assign(&mut self, o: Self) {
        self.write_rpcs += o.write_rpcs;
        self.read_rpcs += o.read_rpcs;
        self.bytes_written += o.bytes_written;
        self.bytes_read += o.bytes_read;
        self.punches += o.punches;
        self.getattrs += o.getattrs;
        self.glimpses += o.glimpses;
        self.io_refused += o.io_refused;
    }
}

#[derive(Clone, Debug)]
pub struct OstConfig {
    pub locks: LockServerConfig,
    /// How long a size request waits for glimpse answers before it answers
    /// with what it has.
    pub glimpse_timeout: Duration,
}

impl Default for OstConfig {
    fn default() -> Self {
        OstConfig { locks: LockServerConfig::default(), glimpse_timeout: Duration::from_secs(10) }
    }
}

#[derive(Debug)]
struct PendingGetattr {
    client: ClientId,
    xid: Xid,
    size: u64,
    outstanding: usize,
    deadline: Instant,
}

/// One OST: lock namespace plus object store.
pub struct Ost<S: ObjectStore> {
    index: OstIndex,
    config: OstConfig,
    locks: LockServer,
    store: S,
    counters: OstCounters,
    /// Glimpse xid (chosen here) -> the getattr waiting for it.
    glimpses: BTreeMap<Xid, (u64, ClientId)>,
    getattrs: BTreeMap<u64, PendingGetattr>,
    getattr_next: u64,
    xid_next: u64,
    transmits: VecDeque<(ClientId, ToClient)>,
}

impl<S: ObjectStore> Ost<S> {
    pub fn new(index: OstIndex, config: OstConfig, store: S) -> Self {
        let locks = LockServer::new(config.locks.clone());
        Ost {
            index,
            config,
            locks,
            store,
            counters: OstCounters::default(),
            glimpses: BTreeMap::new(),
            getattrs: BTreeMap::new(),
            getattr_next: 0,
            xid_next: 1,
            transmits: VecDeque::new(),
        }
    }

    pub fn index(&self) -> OstIndex {
        self.index
    }
    pub fn locks(&self) -> &LockServer {
        &self.locks
    }
    pub fn locks_mut(&mut self) -> &mut LockServer {
        &mut self.locks
    }
    pub fn store(&self) -> &S {
        &self.store
    }
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }
    pub fn counters(&self) -> OstCounters {
        self.counters
    }

    pub fn handle_message(&mut self, now: Instant, from: ClientId, message: ToOst) {
        match message {
            ToOst::Connect => self.locks.handle_connect(from),
            ToOst::Enqueue { xid, object, request } => self.locks.handle_enqueue(now, from, xid, object, request),
            ToOst::Cancel { lock } => self.locks.handle_cancel(now, from, lock),
            ToOst::Write { xid, object, offset, data } => {
                let result = self.write(now, from, object, offset, &data);
                self.send(from, ToClient::WriteReply { xid, result });
            }
            ToOst::Read { xid, object, offset, len } => {
                let result = self.read(now, from, object, offset, len);
                self.send(from, ToClient::ReadReply { xid, result });
            }
            ToOst::Punch { xid, object, size } => {
                let result = self.punch(from, object, size);
                self.send(from, ToClient::PunchReply { xid, result });
            }
            ToOst::Getattr { xid, object } => self.getattr(now, from, xid, object),
            ToOst::GlimpseReply { xid, size } => self.glimpse_reply(xid, from, size),
        }
        self.collect_lock_transmits();
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.locks.handle_timeout(now);
        let expired: Vec<u64> = self.getattrs.iter().filter(|(_, g)| g.deadline <= now).map(|(id, _)| *id).collect();
        for id in expired {
            warn!(ost = self.index.0, "glimpse answers missing; replying with the size known");
            self.finish_getattr(id);
        }
        self.collect_lock_transmits();
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<(ClientId, ToClient)> {
        self.transmits.pop_front()
    }

    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let glimpse = self.getattrs.values().map(|g| g.deadline).min();
        match (self.locks.poll_timeout(), glimpse) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn check_invariants(&self) {
        self.locks.check_invariants();
        let outstanding: usize = self.getattrs.values().map(|g| g.outstanding).sum();
        assert_eq!(outstanding, self.glimpses.len(), "glimpse bookkeeping out of step");
    }

    fn send(&mut self, to: ClientId, message: ToClient) {
        self.transmits.push_back((to, message));
    }

    /// Lock decisions go out in the order they were taken, after the reply
    /// that caused them.
    fn collect_lock_transmits(&mut self) {
        while let Some((to, message)) = self.locks.poll_transmit() {
            if matches!(message, ToClient::Evicted) {
                self.forget_glimpses_of(to);
            }
            self.transmits.push_back((to, message));
        }
    }

    fn admit(&mut self, from: ClientId) -> Result<(), IoError> {
        if self.locks.is_evicted(from) {
            self.counters.io_refused += 1;
            return Err(IoError::Evicted);
        }
        Ok(())
    }

    fn write(
        &mut self,
        now: Instant,
        from: ClientId,
        object: ObjectId,
        offset: u64,
        data: &Payload,
    ) -> Result<(), IoError> {
        self.admit(from)?;
        if data.is_empty() {
            return Ok(());
        }
        self.locks.prolong(now, from, object, Extent::from_offset_len(offset, data.len()));
        self.store.write_payload(object, offset, data).map_err(store_error)?;
        self.counters.write_rpcs += 1;
        self.counters.bytes_written += data.len();
        Ok(())
    }

    fn read(
        &mut self,
        now: Instant,
        from: ClientId,
        object: ObjectId,
        offset: u64,
        len: u64,
    ) -> Result<Payload, IoError> {
        self.admit(from)?;
        if len == 0 {
            return Ok(match self.store.payload_kind() {
                PayloadKind::Bytes => Payload::Bytes(Vec::new()),
                PayloadKind::Phantom => Payload::Phantom(0),
            });
        }
        self.locks.prolong(now, from, object, Extent::from_offset_len(offset, len));
        let data = self.store.read_payload(object, offset, len).map_err(store_error)?;
        debug_assert_eq!(data.len(), len, "the store answered a read of {len} bytes with {}", data.len());
        self.counters.read_rpcs += 1;
        self.counters.bytes_read += len;
        Ok(data)
    }

    fn punch(&mut self, from: ClientId, object: ObjectId, size: u64) -> Result<(), IoError> {
        self.admit(from)?;
        self.store.punch(object, size).map_err(store_error)?;
        self.counters.punches += 1;
        Ok(())
    }

    fn getattr(&mut self, now: Instant, from: ClientId, xid: Xid, object: ObjectId) {
        if let Err(e) = self.admit(from) {
            self.send(from, ToClient::GetattrReply { xid, result: Err(e) });
            return;
        }
        self.counters.getattrs += 1;
        let size = match self.store.size(object) {
            Ok(size) => size,
            Err(e) => {
                self.send(from, ToClient::GetattrReply { xid, result: Err(store_error(e)) });
                return;
            }
        };
        let targets = self.locks.glimpse_targets(object, from);
        let id = self.getattr_next;
        self.getattr_next += 1;
        let deadline = now + self.config.glimpse_timeout;
        self.getattrs.insert(id, PendingGetattr { client: from, xid, size, outstanding: targets.len(), deadline });
        for (holder, lock) in targets {
            let gxid = Xid(self.xid_next);
            self.xid_next += 1;
            self.counters.glimpses += 1;
            self.glimpses.insert(gxid, (id, holder));
            self.send(holder, ToClient::Glimpse { xid: gxid, object, lock });
        }
        if self.getattrs[&id].outstanding == 0 {
            self.finish_getattr(id);
        }
    }

    fn glimpse_reply(&mut self, xid: Xid, from: ClientId, size: u64) {
        let Some((id, holder)) = self.glimpses.get(&xid).copied() else {
            debug!(ost = self.index.0, "late glimpse reply ignored");
            return;
        };
        if holder != from {
            warn!(ost = self.index.0, %from, "glimpse reply from the wrong client ignored");
            return;
        }
        self.glimpses.remove(&xid);
        let g = self.getattrs.get_mut(&id).expect("glimpse belongs to a getattr");
        g.size = g.size.max(size);
        g.outstanding -= 1;
        if g.outstanding == 0 {
            self.finish_getattr(id);
        }
    }

    fn forget_glimpses_of(&mut self, client: ClientId) {
        let gone: Vec<Xid> = self.glimpses.iter().filter(|(_, (_, c))| *c == client).map(|(x, _)| *x).collect();
        for xid in gone {
            let (id, _) = self.glimpses.remove(&xid).expect("listed");
            let g = self.getattrs.get_mut(&id).expect("glimpse belongs to a getattr");
            g.outstanding -= 1;
            if g.outstanding == 0 {
                self.finish_getattr(id);
            }
        }
    }

    fn finish_getattr(&mut self, id: u64) {
        let g = self.getattrs.remove(&id).expect("pending getattr");
        self.glimpses.retain(|_, (gid, _)| *gid != id);
        self.send(g.client, ToClient::GetattrReply { xid: g.xid, result: Ok(g.size) });
    }
}

fn store_error(e: StoreError) -> IoError {
    match e {
        StoreError::TooLarge { .. } => IoError::TooLarge,
        StoreError::Io(_) => IoError::Store,
        StoreError::PayloadKind { .. } => IoError::PayloadKind,
    }
}
