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
//!
//! Syncs. A client's [`ToOst::Sync`] (Lustre's `OST_SYNC`, sent by
//! `fsync`) is answered once the object's acknowledged writes are durable.
//! And on lock cancel (Lustre's `ofd.*.sync_lock_cancel`, see
//! [`SyncLockCancel`]): an OST whose journal commits asynchronously makes a
//! write lock's data durable before the lock is gone, so that no other
//! client is granted the range while what was written under it could still
//! be lost in a crash. When the policy says a cancel must sync, the OST
//! keeps the lock granted, asks its driver to sync the object
//! ([`Ost::poll_sync`]), and completes the cancel (granting the waiters)
//! only when the driver answers ([`Ost::handle_synced`]). Whether there is
//! anything to commit, and how long that takes, is the driver's: the
//! simulator asks its model of the OST's journal, the network OSS
//! `fdatasync`s the object's file, and the harness, whose stores are in
//! memory, answers at once. Every driver must poll syncs: a sync RPC is
//! answered only through them.
//!
//! What a peer may send. Every request is checked before it touches the
//! store or the lock server, and a malformed one is answered with an error,
//! never a panic: an I/O RPC whose end (`offset + len`, or a punch's size)
//! passes 2^64, or which moves more than [`RPC_BYTES_MAX`] bytes, gets
//! [`IoError::Invalid`]; one whose end passes [`OBJECT_BYTES_MAX`] gets
//! [`IoError::TooLarge`] (`EFBIG`); a lock request that is inverted, off
//! page boundaries or a GROUP lock on less than the whole object gets
//! [`crate::msg::EnqueueReply::Invalid`] (see the lock server). A cancel of
//! a lock the client does not hold, a glimpse answer for an unknown xid or
//! from another client than the one asked are ignored with a debug log. Any
//! object id may be named (an object is created when first written).

use crate::ldlm::server::{LockServer, LockServerConfig};
use crate::msg::{IoError, Payload, PayloadKind, ToClient, ToOst};
use crate::store::{ObjectStore, StoreError, OBJECT_BYTES_MAX};
use crate::units::{ClientId, Duration, Instant, LockHandle, ObjectId, OstIndex, Xid};
use crate::Extent;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use tracing::{debug, warn};

/// The most bytes one read or write RPC moves (Lustre's largest bulk RPC):
/// an OST refuses a longer one as malformed before it allocates anything
/// for it. A wire's bulk maximum must be at least this.
pub const RPC_BYTES_MAX: u64 = 64 << 20;

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
    /// Lock cancels that waited for a sync of their object.
    pub cancel_syncs: u64,
    /// Sync RPCs (`OST_SYNC`, from clients' fsync).
    pub syncs: u64,
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
        self.cancel_syncs += o.cancel_syncs;
        self.syncs += o.syncs;
    }
}

/// Which lock cancels wait for their object's data to be durable
/// (Lustre's `ofd.*.sync_lock_cancel`, checked in `tgt_blocking_ast` when
/// a lock is cancelled: PW, EX and GROUP extent locks only).
///
/// Lustre's OFD starts with an asynchronous journal (`sync_journal = 0`)
/// and then turns `never` into `always` (`ofd_slc_set` in `ofd_init0`), so
/// `always` is what a Lustre OST does unless told otherwise. The core's
/// default is `never`, which asks nothing of a driver; lanefs's servers
/// (`lanefs up`, `lanefs oss`, embedded clusters) and the simulator's
/// cluster descriptions choose `always`, as Lustre does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncLockCancel {
    /// No cancel waits.
    #[default]
    Never,
    /// Cancels of locks that were called back wait.
    Blocking,
    /// Every cancel of a write or group lock waits.
    Always,
}

impl SyncLockCancel {
    /// The values, as Lustre's `lctl set_param` takes them.
    pub const NAMES: [&'static str; 3] = ["never", "blocking", "always"];

    pub fn from_name(name: &str) -> Option<SyncLockCancel> {
        match name {
            "never" => Some(SyncLockCancel::Never),
            "blocking" => Some(SyncLockCancel::Blocking),
            "always" => Some(SyncLockCancel::Always),
            _ => None,
        }
    }

    /// Whether cancelling a granted lock of `mode` that was (or was not)
    /// called back must wait for a sync.
    pub fn applies(self, mode: crate::ldlm::LockMode, called_back: bool) -> bool {
        match self {
            SyncLockCancel::Never => false,
            SyncLockCancel::Blocking => mode.is_write() && called_back,
            SyncLockCancel::Always => mode.is_write(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct OstConfig {
    pub locks: LockServerConfig,
    /// How long a size request waits for glimpse answers before it answers
    /// with what it has.
    pub glimpse_timeout: Duration,
    pub sync_lock_cancel: SyncLockCancel,
}

impl Default for OstConfig {
    fn default() -> Self {
        OstConfig {
            locks: LockServerConfig::default(),
            glimpse_timeout: Duration::from_secs(10),
            sync_lock_cancel: SyncLockCancel::Never,
        }
    }
}

/// Names one sync the OST is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SyncToken(pub u64);

/// A sync the OST needs before it completes a cancel or answers a client's
/// sync RPC: make what was written to `extent` of `object` durable, then
/// call [`Ost::handle_synced`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncRequest {
    pub token: SyncToken,
    pub object: ObjectId,
    pub extent: Extent,
}

#[derive(Debug)]
struct PendingGetattr {
    client: ClientId,
    xid: Xid,
    size: u64,
    outstanding: usize,
    deadline: Instant,
}

/// What a sync was asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncWaiter {
    /// A holder's cancel of its lock.
    Cancel(ClientId, LockHandle),
    /// A client's sync RPC, answered when it is done.
    Reply(ClientId, Xid),
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
    /// What waits for each sync.
    syncing: BTreeMap<SyncToken, SyncWaiter>,
    /// Syncs asked for and not yet polled by the driver.
    syncs: VecDeque<SyncRequest>,
    sync_next: u64,
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
            syncing: BTreeMap::new(),
            syncs: VecDeque::new(),
            sync_next: 0,
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
            ToOst::Cancel { lock } => self.cancel(now, from, lock),
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
            ToOst::Sync { xid, object } => match self.admit(from) {
                Ok(()) => {
                    self.counters.syncs += 1;
                    self.ask_sync(SyncWaiter::Reply(from, xid), object, Extent::WHOLE);
                }
                Err(e) => self.send(from, ToClient::SyncReply { xid, result: Err(e) }),
            },
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

    /// The driver has made the data of sync `token` durable: the cancel
    /// that waited for it completes now (a lock evicted meanwhile is gone
    /// already, and its cancel is ignored as any late cancel is), or the
    /// sync RPC is answered.
    pub fn handle_synced(&mut self, now: Instant, token: SyncToken) {
        match self.syncing.remove(&token) {
            Some(SyncWaiter::Cancel(client, lock)) => {
                self.locks.handle_cancel(now, client, lock);
                self.collect_lock_transmits();
            }
            Some(SyncWaiter::Reply(client, xid)) => self.send(client, ToClient::SyncReply { xid, result: Ok(()) }),
            None => warn!(ost = self.index.0, token = token.0, "sync answered twice, or never asked for"),
        }
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<(ClientId, ToClient)> {
        self.transmits.pop_front()
    }

    /// The next sync the driver must do, then answer with
    /// [`Ost::handle_synced`]; poll after every input.
    #[must_use]
    pub fn poll_sync(&mut self) -> Option<SyncRequest> {
        self.syncs.pop_front()
    }

    /// Cancels and sync RPCs waiting for a sync.
    pub fn syncs_pending(&self) -> usize {
        self.syncing.len()
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
        assert!(self.syncs.len() <= self.syncing.len(), "a sync asked for without a cancel waiting on it");
        for request in &self.syncs {
            assert!(self.syncing.contains_key(&request.token), "sync {:?} asked for and not awaited", request.token);
        }
        let outstanding: usize = self.getattrs.values().map(|g| g.outstanding).sum();
        assert_eq!(outstanding, self.glimpses.len(), "glimpse bookkeeping out of step");
        for (xid, (id, holder)) in &self.glimpses {
            assert!(self.getattrs.contains_key(id), "glimpse {xid:?} of no pending getattr");
            assert!(!self.locks.is_evicted(*holder), "glimpse {xid:?} awaits evicted {holder}");
            assert!(xid.0 < self.xid_next, "glimpse {xid:?} not from this OST's xids");
        }
        for token in self.syncing.keys() {
            assert!(token.0 < self.sync_next, "sync {token:?} not from this OST's tokens");
        }
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

    /// A cancel completes at once, unless the policy says its lock's data
    /// must first be durable: then the lock stays granted (conflicting
    /// requests keep waiting) until the driver answers the sync.
    fn cancel(&mut self, now: Instant, from: ClientId, lock: LockHandle) {
        let sync = match self.locks.granted_lock(from, lock) {
            Some((object, mode, extent, called_back)) if self.config.sync_lock_cancel.applies(mode, called_back) => {
                Some((object, extent))
            }
            _ => None,
        };
        let Some((object, extent)) = sync else {
            self.locks.handle_cancel(now, from, lock);
            return;
        };
        let waiter = SyncWaiter::Cancel(from, lock);
        if self.syncing.values().any(|waiting| *waiting == waiter) {
            debug!(ost = self.index.0, %from, lock = lock.0, "cancel repeated while its sync runs");
            return;
        }
        self.counters.cancel_syncs += 1;
        self.ask_sync(waiter, object, extent);
    }

    fn ask_sync(&mut self, waiter: SyncWaiter, object: ObjectId, extent: Extent) {
        let token = SyncToken(self.sync_next);
        self.sync_next += 1;
        self.syncing.insert(token, waiter);
        self.syncs.push_back(SyncRequest { token, object, extent });
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
        self.check_io(from, offset, data.len())?;
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
        self.check_io(from, offset, len)?;
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

    /// What a peer may ask of the store: `len` bytes at `offset`, at most
    /// [`RPC_BYTES_MAX`] of them, ending within the largest object.
    fn check_io(&self, from: ClientId, offset: u64, len: u64) -> Result<(), IoError> {
        let refused = match offset.checked_add(len) {
            _ if len > RPC_BYTES_MAX => IoError::Invalid,
            None => IoError::Invalid,
            Some(end) if end > OBJECT_BYTES_MAX => IoError::TooLarge,
            Some(_) => return Ok(()),
        };
        debug!(ost = self.index.0, %from, offset, len, %refused, "I/O request refused");
        Err(refused)
    }

    fn punch(&mut self, from: ClientId, object: ObjectId, size: u64) -> Result<(), IoError> {
        self.admit(from)?;
        self.check_io(from, size, 0)?;
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
            debug!(ost = self.index.0, %from, "glimpse reply from the wrong client ignored");
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
        StoreError::Os { errno, .. } => IoError::from_errno(errno),
        StoreError::PayloadKind { .. } => IoError::PayloadKind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ldlm::{LockMode, LockRequest};
    use crate::msg::EnqueueReply;
    use crate::store::MemStore;

    const OBJECT: ObjectId = ObjectId(7);
    const MIB: u64 = 1 << 20;

    fn new_ost(policy: SyncLockCancel) -> Ost<MemStore> {
        let config = OstConfig { sync_lock_cancel: policy, ..OstConfig::default() };
        Ost::new(OstIndex(0), config, MemStore::default())
    }

    fn enqueue(ost: &mut Ost<MemStore>, now: Instant, client: u32, mode: LockMode, extent: Extent) {
        let request = LockRequest::new(mode, extent);
        ost.handle_message(now, ClientId(client), ToOst::Enqueue { xid: Xid(1), object: OBJECT, request });
    }

    fn drain(ost: &mut Ost<MemStore>) -> Vec<(ClientId, ToClient)> {
        std::iter::from_fn(|| ost.poll_transmit()).collect()
    }

    /// The handle of the lock just granted to `client` at once.
    fn granted(messages: &[(ClientId, ToClient)], client: u32) -> LockHandle {
        messages
            .iter()
            .find_map(|(to, m)| match m {
                ToClient::Enqueue { reply: EnqueueReply::Granted { lock, .. }, .. } if *to == ClientId(client) => {
                    Some(*lock)
                }
                _ => None,
            })
            .expect("granted at once")
    }

    fn completed(messages: &[(ClientId, ToClient)], client: u32) -> bool {
        messages.iter().any(|(to, m)| *to == ClientId(client) && matches!(m, ToClient::Completion { .. }))
    }

    /// Client 1 holds a PW lock on the first MiB, written to; client 2 asks
    /// for an overlapping PW lock and waits; client 1 is called back.
    fn contended(policy: SyncLockCancel) -> (Ost<MemStore>, LockHandle) {
        let mut ost = new_ost(policy);
        let t = Instant::ZERO;
        enqueue(&mut ost, t, 1, LockMode::ProtectedWrite, Extent::from_offset_len(0, MIB));
        let held = granted(&drain(&mut ost), 1);
        let data = Payload::Bytes(vec![1; 4096]);
        ost.handle_message(t, ClientId(1), ToOst::Write { xid: Xid(2), object: OBJECT, offset: 0, data });
        enqueue(&mut ost, t, 2, LockMode::ProtectedWrite, Extent::from_offset_len(0, MIB));
        let messages = drain(&mut ost);
        assert!(messages.iter().any(|(to, m)| *to == ClientId(1) && matches!(m, ToClient::Blocking { .. })));
        assert!(!completed(&messages, 2));
        (ost, held)
    }

    #[test]
    fn a_cancel_that_must_sync_keeps_the_lock_until_the_sync_is_answered() {
        let (mut ost, held) = contended(SyncLockCancel::Always);
        let t = Instant::ZERO + Duration::from_ms(1);
        ost.handle_message(t, ClientId(1), ToOst::Cancel { lock: held });
        let request = ost.poll_sync().expect("the cancel asks for a sync");
        assert_eq!(request.object, OBJECT);
        assert!(request.extent.contains(&Extent::from_offset_len(0, MIB)), "{:?}", request.extent);
        assert_eq!(ost.poll_sync(), None);
        assert!(!completed(&drain(&mut ost), 2), "the waiter is granted before the data is durable");
        assert_eq!(ost.locks().granted_lock(ClientId(1), held).map(|g| g.1), Some(LockMode::ProtectedWrite));
        ost.check_invariants();
        // A repeated cancel does not ask again.
        ost.handle_message(t, ClientId(1), ToOst::Cancel { lock: held });
        assert_eq!(ost.poll_sync(), None);
        ost.handle_synced(t + Duration::from_ms(8), request.token);
        assert!(completed(&drain(&mut ost), 2));
        assert_eq!(ost.locks().granted_lock(ClientId(1), held), None);
        assert_eq!(ost.syncs_pending(), 0);
        assert_eq!(ost.counters().cancel_syncs, 1);
        ost.check_invariants();
    }

    #[test]
    fn the_policy_names_the_cancels_that_sync() {
        use LockMode::{ProtectedRead as PR, ProtectedWrite as PW};
        use SyncLockCancel::{Always, Blocking, Never};
        // (policy, lock mode, called back first, whether its cancel syncs)
        let cases = [
            (Never, PW, true, false),
            (Blocking, PW, true, true),
            (Blocking, PW, false, false),
            (Always, PW, false, true),
            (Always, PR, true, false),
        ];
        for (policy, mode, called_back, syncs) in cases {
            let mut ost = new_ost(policy);
            enqueue(&mut ost, Instant::ZERO, 1, mode, Extent::from_offset_len(0, MIB));
            let lock = granted(&drain(&mut ost), 1);
            if called_back {
                enqueue(&mut ost, Instant::ZERO, 2, PW, Extent::from_offset_len(0, MIB));
                drain(&mut ost);
            }
            ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Cancel { lock });
            let case = format!("{policy:?}, {mode}, called back: {called_back}");
            assert_eq!(ost.poll_sync().is_some(), syncs, "{case}");
            let held = ost.locks().granted_lock(ClientId(1), lock).is_some();
            assert_eq!(held, syncs, "{case}: the lock stays granted exactly while its sync runs");
            ost.check_invariants();
        }
    }

    #[test]
    fn an_eviction_during_the_sync_leaves_nothing_behind() {
        let (mut ost, held) = contended(SyncLockCancel::Always);
        ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Cancel { lock: held });
        let request = ost.poll_sync().expect("sync asked for");
        ost.locks_mut().evict(Instant::ZERO, ClientId(1));
        ost.handle_synced(Instant::ZERO, request.token);
        ost.handle_synced(Instant::ZERO, request.token);
        let messages = drain(&mut ost);
        assert!(completed(&messages, 2));
        assert_eq!(ost.syncs_pending(), 0);
        ost.check_invariants();
    }

    #[test]
    fn a_sync_rpc_is_answered_when_the_driver_has_synced() {
        let mut ost = new_ost(SyncLockCancel::Never);
        let data = Payload::Bytes(vec![1; 4096]);
        ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Write { xid: Xid(1), object: OBJECT, offset: 0, data });
        drain(&mut ost);
        ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Sync { xid: Xid(2), object: OBJECT });
        let request = ost.poll_sync().expect("a sync RPC asks the driver");
        assert_eq!((request.object, request.extent), (OBJECT, Extent::WHOLE));
        assert!(drain(&mut ost).is_empty(), "no answer before the driver has synced");
        ost.handle_synced(Instant::ZERO, request.token);
        let replies = drain(&mut ost);
        assert_eq!(replies, [(ClientId(1), ToClient::SyncReply { xid: Xid(2), result: Ok(()) })]);
        assert_eq!(ost.counters().syncs, 1);
        // An evicted client is refused, as for any other I/O.
        ost.locks_mut().evict(Instant::ZERO, ClientId(1));
        drain(&mut ost);
        ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Sync { xid: Xid(3), object: OBJECT });
        assert_eq!(ost.poll_sync(), None);
        let refused = (ClientId(1), ToClient::SyncReply { xid: Xid(3), result: Err(IoError::Evicted) });
        assert!(drain(&mut ost).contains(&refused));
        ost.check_invariants();
    }

    /// I/O whose end passes 2^64 or the largest object, or that moves more
    /// than one RPC may, is answered with an error. Before, a write or read
    /// ending past 2^64 panicked the OST (the extent of its lock prolong
    /// overflowed) and a read of 1 TiB was allocated.
    #[test]
    fn malformed_io_is_answered_with_an_error() {
        use crate::store::OBJECT_BYTES_MAX;
        let (mut ost, _) = contended(SyncLockCancel::Never);
        let bytes = |len: usize| Payload::Bytes(vec![1; len]);
        let write = |offset, data| ToOst::Write { xid: Xid(9), object: OBJECT, offset, data };
        let read = |offset, len| ToOst::Read { xid: Xid(9), object: OBJECT, offset, len };
        let cases = [
            (write(u64::MAX - 10, bytes(4096)), IoError::Invalid),
            (write(u64::MAX, bytes(0)), IoError::TooLarge),
            (write(0, Payload::Phantom(RPC_BYTES_MAX + 1)), IoError::Invalid),
            (write(OBJECT_BYTES_MAX - 1, bytes(2)), IoError::TooLarge),
            (read(u64::MAX - 10, 4096), IoError::Invalid),
            (read(0, 1 << 40), IoError::Invalid),
            (read(OBJECT_BYTES_MAX, 1), IoError::TooLarge),
            (ToOst::Punch { xid: Xid(9), object: OBJECT, size: u64::MAX }, IoError::TooLarge),
        ];
        for (message, error) in cases {
            let case = format!("{message:?}");
            ost.handle_message(Instant::ZERO, ClientId(1), message);
            let replies = drain(&mut ost);
            let result = match &replies[..] {
                [(ClientId(1), ToClient::WriteReply { result, .. } | ToClient::PunchReply { result, .. })] => {
                    result.map(|()| 0)
                }
                [(ClientId(1), ToClient::ReadReply { result, .. })] => result.as_ref().map(|_| 0).map_err(|e| *e),
                other => panic!("{case}: answered {other:?}"),
            };
            assert_eq!(result, Err(error), "{case}");
            ost.check_invariants();
        }
        assert_eq!((ost.counters().bytes_written, ost.counters().bytes_read), (4096, 0));
    }

    #[test]
    fn policy_names_round_trip() {
        for name in SyncLockCancel::NAMES {
            let policy = SyncLockCancel::from_name(name).expect("a policy name");
            assert_eq!(serde_json::to_string(&policy).unwrap(), format!("\"{name}\""));
        }
        assert_eq!(SyncLockCancel::from_name("sometimes"), None);
        assert!(!SyncLockCancel::Always.applies(LockMode::ProtectedRead, true));
        assert!(SyncLockCancel::Always.applies(LockMode::Group(crate::ldlm::GroupId(3)), false));
    }
}
