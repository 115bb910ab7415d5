//! The network MDS's side of the object lifecycle: its connections to the
//! OSSes (`Role::Mds`), the pools of precreated objects it keeps full, and
//! the destroy queue it drains.
//!
//! lanefs-mds books the pools and the queue in its database (see
//! `lanefs_mds::objects`); this module does the talking, as Lustre's OSP
//! devices do on an MDS. One worker task per OSS address, started when the
//! OSS registers, keeps one connection to it and, whenever it is woken (a
//! create or a removal happened, an OSS registered) or every
//! [`RECHECK_INTERVAL`]:
//! - tops up each of the OSS's OSTs whose pool has fallen below half its
//!   batch: asks for objects up to a full batch (`Precreate`) and records
//!   the OST's answer, its new `LAST_ID`. A batch starts at
//!   [`PRECREATE_BATCH_MIN`] and doubles, up to [`PRECREATE_BATCH_MAX`],
//!   each time a pool was found empty (creates were outrunning it), as
//!   Lustre's precreate count grows;
//! - sends the objects queued for destruction on those OSTs, a bounded
//!   batch at a time (`Destroy`), and forgets them only once the OSS has
//!   answered that they are gone.
//!
//! An OSS that cannot be reached is retried with a backoff (from
//! [`RETRY_MIN`] to [`RETRY_MAX`]), at once when it registers again; its
//! objects to destroy wait in the queue meanwhile. A create that finds a
//! pool empty waits (at most [`OBJECTS_WAIT`]) for the worker to refill it,
//! and fails with an error naming the OST and why if its OSS is down or
//! does not answer.

use lanefs_core::units::{ObjectId, OstIndex};
use lanefs_mds::objects::DESTROY_BATCH_MAX;
use lanefs_mds::opens::OpenFiles;
use lanefs_mds::Mds;
use lanefs_net::auth::ClusterKey;
use lanefs_net::limits::QueueLimits;
use lanefs_net::outbox::Outbox;
use lanefs_net::transport::{connect, Address, BoxStream};
use lanefs_net::writer::spawn_writer;
use lanefs_proto::codec::read_frame;
use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use lanefs_proto::MdsError;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{BufReader, ReadHalf};
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// A pool's first batch (Lustre's `OST_MIN_PRECREATE`).
pub const PRECREATE_BATCH_MIN: u64 = 32;

/// The largest batch (Lustre's default `max_create_count`).
pub const PRECREATE_BATCH_MAX: u64 = 20_000;

/// How long a create waits for an empty pool to be refilled.
pub const OBJECTS_WAIT: Duration = Duration::from_secs(10);

/// How long one call to an OSS (connecting, a precreate, a destroy) may take.
pub const OSS_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The first and the longest wait before trying an unreachable OSS again.
pub const RETRY_MIN: Duration = Duration::from_millis(100);
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// How often a worker looks at its pools and queue without being woken.
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(10);

/// The MDS, shared by the request handlers and the workers; `None` once it
/// has stopped.
pub(crate) type MdsCell = Arc<Mutex<Option<Mds>>>;

/// What the MDS knows of the OSS serving one OST.
#[derive(Clone, Debug, PartialEq, Eq)]
enum OssState {
    /// Registered; no connection tried since.
    Connecting,
    Up,
    /// Unreachable, or its last precreate failed: why.
    Down(String),
}

/// Who holds the registration of an OST index (see `mds_server`: one
/// live OSS per index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// Registered by the MDS's own process (`MdsHandle::register_oss`):
    /// held until it registers the index again.
    Local,
    /// Registered over the MDS connection of this number, held while that
    /// connection lives and its OSS answers.
    Connection(u32),
    /// Its connection ended: any OSS may register the index; clients are
    /// still sent the address meanwhile (the OSS may be restarting there).
    Gone,
}

#[derive(Clone, Debug)]
struct OstEntry {
    address: String,
    state: OssState,
    /// Objects a refill brings the pool up to.
    batch: u64,
    holder: Holder,
}

/// The object lifecycle of one MDS: see the module docs.
pub(crate) struct Lifecycle {
    mds: MdsCell,
    runtime: tokio::runtime::Handle,
    stop: watch::Receiver<bool>,
    /// Bumped when there may be work: a create, a removal.
    work: watch::Sender<u64>,
    /// Bumped when an OSS registers: a worker stops waiting out its backoff.
    registered: watch::Sender<u64>,
    /// Bumped when a pool or an OSS's state changes: waiting creates look again.
    changed: watch::Sender<u64>,
    osts: Mutex<BTreeMap<u32, OstEntry>>,
    workers: Mutex<BTreeMap<String, tokio::task::JoinHandle<()>>>,
    /// The server key the MDS shows the OSSes (on TCP).
    key: Option<ClusterKey>,
    /// Files open on clients: the objects of removed ones are not
    /// destroyed while they are (see `lanefs_mds::opens`).
    pub opens: Arc<Mutex<OpenFiles>>,
    /// No object is destroyed before this: a restarted MDS gives its
    /// clients the recovery grace to tell it of the files they keep open.
    destroy_after: Mutex<Option<tokio::time::Instant>>,
}

fn bump(counter: &watch::Sender<u64>) {
    counter.send_modify(|n| *n = n.wrapping_add(1));
}

impl Lifecycle {
    pub fn new(
        mds: MdsCell,
        runtime: tokio::runtime::Handle,
        stop: watch::Receiver<bool>,
        key: Option<ClusterKey>,
    ) -> Arc<Lifecycle> {
        Arc::new(Lifecycle {
            key,
            mds,
            runtime,
            stop,
            work: watch::channel(0).0,
            registered: watch::channel(0).0,
            changed: watch::channel(0).0,
            osts: Mutex::new(BTreeMap::new()),
            workers: Mutex::new(BTreeMap::new()),
            opens: Arc::new(Mutex::new(OpenFiles::new())),
            destroy_after: Mutex::new(None),
        })
    }

    /// Destroy nothing before `at` (then wake the workers).
    pub fn hold_destroys_until(self: &Arc<Self>, at: tokio::time::Instant) {
        *self.destroy_after.lock().expect("destroy_after lock") = Some(at);
        let me = self.clone();
        self.runtime.spawn(async move {
            tokio::time::sleep_until(at).await;
            me.wake();
        });
    }

    /// Records that `address` serves `osts`, held by `holder`, and makes
    /// sure a worker serves it. The caller has checked that no other live
    /// OSS holds them.
    pub fn register(self: &Arc<Self>, address: &str, osts: &[u32], holder: Holder) {
        {
            let mut map = self.osts.lock().expect("registry lock");
            for &ost in osts {
                let batch = map.get(&ost).map_or(PRECREATE_BATCH_MIN, |entry| entry.batch);
                let entry = OstEntry { address: address.to_string(), state: OssState::Connecting, batch, holder };
                map.insert(ost, entry);
            }
        }
        info!(address, ?osts, "OSS registered");
        let mut workers = self.workers.lock().expect("workers lock");
        let running = workers.get(address).is_some_and(|worker| !worker.is_finished());
        if !running {
            let worker = self.runtime.spawn(run_worker(self.clone(), address.to_string()));
            workers.insert(address.to_string(), worker);
        }
        bump(&self.registered);
        bump(&self.changed);
    }

    /// `(ost, address, holder)` of those of `osts` registered by someone
    /// else than the connection `peer`, and not given up.
    pub fn held(&self, osts: &[u32], peer: u32) -> Vec<(u32, String, Holder)> {
        let map = self.osts.lock().expect("registry lock");
        let held =
            |entry: &&OstEntry| !matches!(entry.holder, Holder::Gone) && entry.holder != Holder::Connection(peer);
        osts.iter()
            .filter_map(|ost| map.get(ost).filter(held).map(|entry| (*ost, entry.address.clone(), entry.holder)))
            .collect()
    }

    /// The connection `peer` ended: the OSTs it registered may be
    /// registered again by any OSS.
    pub fn expire(&self, peer: u32) {
        let mut map = self.osts.lock().expect("registry lock");
        for (ost, entry) in map.iter_mut().filter(|(_, entry)| entry.holder == Holder::Connection(peer)) {
            info!(ost, address = %entry.address, "the OSS's registration ended with its connection");
            entry.holder = Holder::Gone;
        }
    }

    /// `(ost, address)` of every registered OST.
    pub fn addresses(&self) -> Vec<(u32, String)> {
        self.osts.lock().expect("registry lock").iter().map(|(ost, entry)| (*ost, entry.address.clone())).collect()
    }

    /// There may be work: pools to top up, objects to destroy.
    pub fn wake(&self) {
        bump(&self.work);
    }

    /// Waits until `ost` has objects to hand out; `Err` says why it will
    /// not have any soon (unregistered, its OSS down, no answer by `deadline`).
    pub async fn wait_for_objects(&self, ost: u32, deadline: tokio::time::Instant) -> Result<(), String> {
        let mut changed = self.changed.subscribe();
        loop {
            changed.borrow_and_update();
            if self.available(ost).await? > 0 {
                return Ok(());
            }
            let entry = self.osts.lock().expect("registry lock").get(&ost).cloned();
            let address = match entry {
                None => {
                    return Err(format!(
                        "no OSS has registered OST{ost:04x}: start the OSS that serves it (lanefs oss --ost {ost})"
                    ))
                }
                Some(OstEntry { address, state: OssState::Down(reason), .. }) => {
                    return Err(format!("its OSS at {address} cannot create objects: {reason}"))
                }
                Some(entry) => entry.address,
            };
            tokio::select! {
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(format!("its OSS at {address} created no objects within {OBJECTS_WAIT:?}"))
                }
            }
        }
    }

    /// Waits until no object queued under `fid` waits to be destroyed (a
    /// migrated file's old objects, queued under its volatile file's
    /// fid); `Err` says why they are not gone by `deadline`.
    pub async fn wait_destroyed(&self, fid: lanefs_proto::Fid, deadline: tokio::time::Instant) -> Result<(), String> {
        let mut changed = self.changed.subscribe();
        self.wake();
        loop {
            changed.borrow_and_update();
            if !self.with_mds(move |mds| mds.destroys_pending(fid)).await? {
                return Ok(());
            }
            let down: Vec<String> = {
                let map = self.osts.lock().expect("registry lock");
                map.values()
                    .filter_map(|entry| match &entry.state {
                        OssState::Down(reason) => Some(format!("{} ({reason})", entry.address)),
                        _ => None,
                    })
                    .collect()
            };
            tokio::select! {
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(deadline) => {
                    let why = match down.is_empty() {
                        true => "the OSSes did not destroy them in time".to_string(),
                        false => format!("OSSes are down: {}", down.join(", ")),
                    };
                    return Err(why);
                }
            }
        }
    }

    /// Waits (at most `timeout`) until every registered OST has objects or
    /// its OSS is known to be down: a new cluster's first creates then need
    /// not wait.
    pub async fn wait_ready(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut changed = self.changed.subscribe();
        loop {
            changed.borrow_and_update();
            let osts: Vec<(u32, OssState)> = {
                let map = self.osts.lock().expect("registry lock");
                map.iter().map(|(ost, entry)| (*ost, entry.state.clone())).collect()
            };
            let mut ready = true;
            for (ost, state) in osts {
                if !matches!(state, OssState::Down(_)) && self.available(ost).await.unwrap_or(0) == 0 {
                    ready = false;
                }
            }
            if ready {
                return;
            }
            tokio::select! {
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Waits for every worker to end (they end when the MDS stops).
    pub async fn join(&self) {
        let workers: Vec<_> = std::mem::take(&mut *self.workers.lock().expect("workers lock")).into_values().collect();
        for worker in workers {
            let _ = worker.await;
        }
    }

    async fn available(&self, ost: u32) -> Result<u64, String> {
        self.with_mds(move |mds| mds.pool(OstIndex(ost))).await.map(|pool| pool.available())
    }

    /// Runs `body` on the MDS, off the runtime's threads (SQLite commits wait
    /// for the disk).
    async fn with_mds<T: Send + 'static>(
        &self,
        body: impl FnOnce(&mut Mds) -> Result<T, MdsError> + Send + 'static,
    ) -> Result<T, String> {
        let mds = self.mds.clone();
        let ran = tokio::task::spawn_blocking(move || {
            match mds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
                Some(mds) => body(mds).map_err(|error| error.to_string()),
                None => Err("the MDS has stopped".to_string()),
            }
        })
        .await;
        ran.unwrap_or_else(|error| Err(format!("MDS task failed: {error}")))
    }

    fn osts_at(&self, address: &str) -> Vec<u32> {
        let map = self.osts.lock().expect("registry lock");
        map.iter().filter(|(_, entry)| entry.address == address).map(|(ost, _)| *ost).collect()
    }

    fn set_state(&self, address: &str, osts: &[u32], state: OssState) {
        let mut map = self.osts.lock().expect("registry lock");
        for ost in osts {
            if let Some(entry) = map.get_mut(ost).filter(|entry| entry.address == address) {
                entry.state = state.clone();
            }
        }
        drop(map);
        bump(&self.changed);
    }

    /// Tops up `ost`'s pool if it is low. An error the OST gives marks it
    /// down; `Err` is for a broken connection.
    async fn top_up(&self, link: &mut OssLink, address: &str, ost: u32) -> Result<(), String> {
        let pool = self.with_mds(move |mds| mds.pool(OstIndex(ost))).await?;
        let Some(batch) = self.osts.lock().expect("registry lock").get(&ost).map(|entry| entry.batch) else {
            return Ok(());
        };
        let available = pool.available();
        if available >= batch / 2 && available > 0 {
            return Ok(());
        }
        let last_id = pool.precreated.0 + (batch - available.min(batch));
        let answer = link.call(|id| Wire::Precreate { id, ost, last_id }).await?;
        match answer {
            Wire::Precreated { ost: answered, result: Ok(created), .. } if answered == ost => {
                let pool = self.with_mds(move |mds| mds.record_precreated(OstIndex(ost), ObjectId(created))).await?;
                debug!(ost, last_id = created, available = pool.available(), "objects precreated");
                if available == 0 {
                    if let Some(entry) = self.osts.lock().expect("registry lock").get_mut(&ost) {
                        entry.batch = (entry.batch * 2).min(PRECREATE_BATCH_MAX);
                    }
                }
                self.set_state(address, &[ost], OssState::Up);
                Ok(())
            }
            Wire::Precreated { result: Err(reason), .. } => {
                warn!(ost, %reason, "precreate failed");
                self.set_state(address, &[ost], OssState::Down(reason));
                Ok(())
            }
            other => Err(format!("unexpected answer to Precreate: {other:?}")),
        }
    }

    /// Destroys what is queued for `ost`, a batch at a time. A destroy the
    /// OSS refuses stays queued for the next round; `Err` is for a broken
    /// connection.
    async fn drain(&self, link: &mut OssLink, ost: u32) -> Result<(), String> {
        let held = *self.destroy_after.lock().expect("destroy_after lock");
        if held.is_some_and(|at| tokio::time::Instant::now() < at) {
            return Ok(());
        }
        loop {
            let opens = self.opens.clone();
            let batch = self
                .with_mds(move |mds| {
                    let opens = opens.lock().expect("opens lock");
                    mds.queued_destroys_except(OstIndex(ost), DESTROY_BATCH_MAX, &|fid| opens.is_open(fid))
                })
                .await?;
            if batch.is_empty() {
                return Ok(());
            }
            let objects: Vec<u64> = batch.iter().map(|object| object.0).collect();
            let count = objects.len();
            match link.call(|id| Wire::Destroy { id, ost, objects }).await? {
                Wire::Destroyed { ost: answered, result: Ok(()), .. } if answered == ost => {
                    self.with_mds(move |mds| mds.record_destroyed(OstIndex(ost), &batch)).await?;
                    debug!(ost, count, "objects destroyed");
                    bump(&self.changed);
                }
                Wire::Destroyed { result: Err(reason), .. } => {
                    warn!(ost, %reason, "destroy failed; the objects stay queued");
                    return Ok(());
                }
                other => return Err(format!("unexpected answer to Destroy: {other:?}")),
            }
        }
    }

    /// One round for the OSS at `address`: connect if need be, top up its
    /// pools, drain its queue. A connection kept from an earlier round
    /// that fails (the OSS closes one idle past its idle timeout) is
    /// replaced once, at once, before the OSS counts as down.
    async fn round(&self, address: &str, link: &mut Option<OssLink>, osts: &[u32]) -> Result<(), String> {
        let kept = link.is_some();
        match self.round_on(address, link, osts).await {
            Err(reason) if kept => {
                debug!(address, %reason, "the kept connection to the OSS failed; connecting again");
                *link = None;
                self.round_on(address, link, osts).await
            }
            done => done,
        }
    }

    async fn round_on(&self, address: &str, link: &mut Option<OssLink>, osts: &[u32]) -> Result<(), String> {
        if link.is_none() {
            *link = Some(OssLink::connect(address, self.key.as_ref()).await?);
            info!(address, "connected to OSS");
            self.set_state(address, osts, OssState::Up);
        }
        let connected = link.as_mut().expect("connected");
        for &ost in osts {
            self.top_up(connected, address, ost).await?;
        }
        for &ost in osts {
            self.drain(connected, ost).await?;
        }
        Ok(())
    }
}

/// The worker of the OSS at `address`: rounds, woken by work, registrations,
/// the clock; until the MDS stops or the OSS's OSTs are registered elsewhere.
async fn run_worker(life: Arc<Lifecycle>, address: String) {
    let mut work = life.work.subscribe();
    let mut registered = life.registered.subscribe();
    let mut stop = life.stop.clone();
    let mut link: Option<OssLink> = None;
    let mut backoff = RETRY_MIN;
    loop {
        let osts = life.osts_at(&address);
        if osts.is_empty() || *stop.borrow() {
            return;
        }
        work.borrow_and_update();
        registered.borrow_and_update();
        let round = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return,
            round = life.round(&address, &mut link, &osts) => round,
        };
        match round {
            Ok(()) => {
                backoff = RETRY_MIN;
                tokio::select! {
                    _ = stop.wait_for(|stopped| *stopped) => return,
                    _ = work.changed() => {}
                    _ = registered.changed() => {}
                    _ = tokio::time::sleep(RECHECK_INTERVAL) => {}
                }
            }
            Err(reason) => {
                warn!(%address, %reason, "OSS unreachable; retrying in {backoff:?}");
                link = None;
                life.set_state(&address, &osts, OssState::Down(reason));
                tokio::select! {
                    _ = stop.wait_for(|stopped| *stopped) => return,
                    _ = registered.changed() => {}
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(RETRY_MAX);
            }
        }
    }
}

/// The MDS's connection to one OSS: one call at a time, each answered by
/// the next frame.
struct OssLink {
    reader: BufReader<ReadHalf<BoxStream>>,
    writer: Arc<Outbox>,
    call_next: u64,
}

impl OssLink {
    async fn connect(address: &str, key: Option<&ClusterKey>) -> Result<OssLink, String> {
        let parsed = Address::parse(address)?;
        let handshake = async {
            let stream = connect(&parsed, key).await.map_err(|error| format!("cannot connect: {error}"))?;
            let (r, w) = tokio::io::split(stream);
            let writer = Outbox::new(QueueLimits::default());
            spawn_writer(w, writer.clone(), None);
            let _ = writer.push(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Mds });
            let mut reader = BufReader::new(r);
            match read_frame(&mut reader).await {
                Ok(Some(Wire::Welcome { .. })) => Ok(OssLink { reader, writer, call_next: 1 }),
                Ok(Some(Wire::Refused { reason })) => Err(format!("refused: {reason}")),
                other => Err(format!("unexpected handshake answer {other:?}")),
            }
        };
        tokio::time::timeout(OSS_CALL_TIMEOUT, handshake)
            .await
            .unwrap_or_else(|_| Err(format!("no handshake within {OSS_CALL_TIMEOUT:?}")))
    }

    /// Sends the message `make` builds with a fresh id and returns the answer
    /// carrying that id.
    async fn call(&mut self, make: impl FnOnce(u64) -> Wire) -> Result<Wire, String> {
        let id = self.call_next;
        self.call_next += 1;
        self.writer.push(make(id)).map_err(|_| "connection closed".to_string())?;
        let answer = tokio::time::timeout(OSS_CALL_TIMEOUT, read_frame(&mut self.reader))
            .await
            .map_err(|_| format!("no answer within {OSS_CALL_TIMEOUT:?}"))?;
        match answer {
            Ok(Some(Wire::Precreated { id: answered, .. } | Wire::Destroyed { id: answered, .. }))
                if answered != id =>
            {
                Err(format!("answer to call {answered} where {id} was due"))
            }
            Ok(Some(Wire::Refused { reason })) => Err(format!("refused: {reason}")),
            Ok(Some(frame)) => Ok(frame),
            Ok(None) => Err("connection closed".to_string()),
            Err(error) => Err(error.to_string()),
        }
    }
}
