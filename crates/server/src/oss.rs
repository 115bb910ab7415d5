//! The OSS daemon: serves one or more OSTs over the network.
//!
//! Each OST is lanefs-core's [`Ost`] state machine over a [`FileStore`], run
//! on an OS thread of its own (the OST's service thread): disk I/O never
//! blocks the network runtime, and messages to one OST are handled in the
//! order they arrived. Time comes from the OSS's monotonic clock.
//!
//! A client names itself on every connection it makes (`Session`, with the
//! identity it keeps for life); the OSS knows it by one `ClientId` in every
//! OST's lock namespace across connections and restarts (see
//! [`crate::exports`]). A connection that sends a malformed frame, a wrong
//! protocol version or a message an OSS does not take is told why
//! (`Refused`) and closed; nobody else notices.
//!
//! Durability and recovery: each OST's commits `fdatasync` the objects
//! changed since the last one, on the OST's commit thread so that the OST
//! serves on meanwhile (as Lustre's service threads do while the journal
//! commits), and then the commit thread records the commit point in the
//! OST's `last_rcvd.json` before anyone is told. The OST's thread takes a
//! done commit before its next input, ahead of the requests queued
//! meanwhile (as Lustre's journal commit callback moves the target's last
//! committed transaction without waiting for its service queue); a failed
//! `fdatasync` is reported to the clients that wrote (the core's commit
//! notices), never swallowed. An OSS that starts over existing OST directories starts each
//! OST's next life from its record: recovering, for the recovery window,
//! if it knew clients (see `lanefs_core::ost::recovery`).
//!
//! Objects are the MDS's to create and destroy: it connects with
//! `Role::Mds` and sends `Precreate` (create objects up to an id, in
//! advance, recorded in the OST's `LAST_ID`; see [`FileStore::precreate`])
//! and `Destroy` (remove the objects of removed files), each answered once
//! done on the OST's thread. Those messages are refused on a client's
//! connection, and a `Role::Mds` connection takes nothing else.
//!
//! A local user's connection (a Unix-socket peer that is neither root nor
//! the OSS's own user, see [`lanefs_net::auth`]) is no node's: it may read the
//! OSTs' statistics, and nothing else; its `Session` is taken but names no
//! export, and a message for an OST (I/O, locks, cache advice) closes the
//! connection saying why. Each local user holds at most
//! [`lanefs_net::limits::LOCAL_USER_CONNECTIONS_MAX`] connections.
//!
//! A client on the same host may hand over its page arena (`AttachArena`
//! with the memfd attached, on a Unix socket): its write RPCs then name
//! frames of it (`WriteShared`), which the connection checks against the
//! arena and passes to the OST as a [`lanefs_core::msg::Payload::Remote`],
//! written to the object straight from the client's memory. A descriptor
//! that does not fit the arena closes the connection, like any malformed
//! frame.
//!
//! Bounds (see [`lanefs_net::limits`] for the values): each OST directory is
//! fenced ([`lanefs_net::fence`]) before anything in it is touched; connections
//! are capped from the descriptor limit, which the OSS raises at start; a
//! connection must say `Hello` within the handshake timeout and then send
//! something (a request or a `Ping`) within every idle timeout; its replies
//! wait in a bounded [`Outbox`] (its reader stops while the queue is over
//! its soft limit, and the connection closes past the hard one); and its
//! requests in flight to the OST threads are bounded ([`RequestBudget`]).
//! A read larger than the bulk maximum is answered `IoError::Invalid` by
//! the connection itself: its reply could never be sent.
//!
//! What a peer may send: any frame. The codec checks lengths, the
//! handshake the magic and version, this loop the OST index and shared
//! bulk descriptors (a failure closes the connection with the reason), and
//! the core's [`Ost`] every field of an OST message (a malformed request is
//! answered with an error). Should handling an input panic anyway, the
//! panic is caught on the OST's thread and logged with the OST index and
//! the kind of input; from then on that OST answers every request with
//! `IoError::Failed` ("restart its OSS"), and every connected client is told
//! once (`ToClient::Failed`), so that nothing waits forever on it, while
//! the OSS's other OSTs serve on. Lustre has no such mode: an assertion
//! failure there (LBUG) stops the whole server.

use crate::commit_point::CommitPoint;
use crate::exports::Exports;
use crate::faults::StoreFaults;
use crate::filestore::{FileStore, MemoryStores, SyncTarget, Syncer};
use lanefs_core::ldlm::proof::LockKey;
use lanefs_core::msg::{IoError, Payload, ToClient, ToOst};
use lanefs_core::ost::{Ost, OstConfig, OstRecord, SyncToken};
use lanefs_core::store::{ObjectStore, StoreError};
use lanefs_core::{ClientId, Instant, ObjectId, OstIndex, Transno};
use lanefs_net::auth::ClusterKey;
use lanefs_net::fence::Fence;
use lanefs_net::limits::{
    refusal_reason, DescriptorBudget, QueueLimits, ServerLimits, ServerStats, HANDSHAKES_PER_SOURCE_MAX,
    PING_INTERVAL_DEFAULT,
};
use lanefs_net::outbox::{InFlight, Outbox, RequestBudget};
use lanefs_net::shm::{FdInbox, MappedArena};
use lanefs_net::transport::{spawn_accept, AcceptPolicy, AcceptStats, Accepted, Address, Listener};
use lanefs_net::writer::spawn_writer;
use lanefs_proto::codec::{read_frame, CodecError, BULK_BYTES_MAX};
use lanefs_proto::wire::USER_NOT_A_NODE;
use lanefs_proto::wire::{variant, OstStats, Role, Wire, MAGIC, PROTOCOL_VERSION};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::Duration as StdDuration;
use tokio::io::BufReader;
use tokio::sync::oneshot;
use tracing::{debug, error, info, warn};

#[derive(Clone, Debug)]
pub struct OssConfig {
    /// Each OST keeps its objects in `data_dir/OSTxxxx/`.
    pub data_dir: PathBuf,
    pub osts: Vec<u32>,
    pub ost: OstConfig,
    /// A client with no connection and no word for this long is evicted
    /// from every OST and forgotten (Lustre's ping evictor: 6 ping
    /// intervals of 25 s).
    pub export_timeout: StdDuration,
    /// Connections, timeouts, queues: [`ServerLimits::default`] unless set.
    pub limits: ServerLimits,
    /// Store calls to fail on purpose (see [`crate::faults`]); none by default.
    pub faults: StoreFaults,
    /// How OSTs in memory (tmpfs) commit (see [`MemoryStores`]).
    pub memory_stores: MemoryStores,
}

/// Lustre's `PING_EVICT_TIMEOUT`: six 25 s ping intervals.
pub const EXPORT_TIMEOUT_DEFAULT: StdDuration = StdDuration::from_secs(150);

/// Bytes a connection reads from its socket at a time.
const READ_BUFFER_BYTES: usize = 256 << 10;

enum OstInput {
    /// `in_flight` is the room the request takes in its connection's
    /// budget, given back once the OST has handled it.
    Message {
        client: ClientId,
        message: ToOst,
        in_flight: Option<InFlight>,
    },
    Destroy {
        objects: Vec<ObjectId>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Precreate {
        last_id: ObjectId,
        reply: oneshot::Sender<Result<u64, String>>,
    },
    Evict {
        client: ClientId,
    },
    Stats(oneshot::Sender<OstStats>),
    /// `lctl set_param` (see [`crate::ost_params`]).
    SetParam {
        name: String,
        value: Option<String>,
        permanent: bool,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// From the OST's commit thread: syncs are done (their results wait
    /// in [`CommitThread::take_done`], which the OST's thread reads before
    /// every input, so this only wakes it when it sleeps).
    Synced,
}

/// A client's connections, as the export timeout sees them.
#[derive(Clone, Copy, Debug)]
struct Presence {
    connections: usize,
    last_heard: std::time::Instant,
}

/// How long a stopping server lets its connections close by themselves
/// (telling their peers why) before it aborts them.
pub(crate) const SHUTDOWN_GRACE: StdDuration = StdDuration::from_secs(1);

type Peers = Arc<Mutex<HashMap<u32, Arc<Outbox>>>>;

struct Shared {
    /// Each OST's input queue. Held here alone (its commit thread holds a
    /// weak reference), so that dropping this ends the OST's thread.
    osts: HashMap<u32, Arc<mpsc::Sender<OstInput>>>,
    /// Each OST's requests in flight, over all connections: received and
    /// not yet handled (`rpcs_in_flight` in its statistics).
    in_flight: HashMap<u32, Arc<AtomicU64>>,
    /// Outgoing queue of every connected client, by its identity.
    peers: Peers,
    exports: Arc<Mutex<Exports>>,
    presence: Mutex<HashMap<ClientId, Presence>>,
    export_timeout: StdDuration,
    /// How long the OSTs wait for a callback's answer before they evict
    /// its holder, which every connection is told in its `Welcome`.
    callback_timeout_ms: u64,
    /// Set to true when the OSS stops: every connection closes.
    stop: tokio::sync::watch::Sender<bool>,
    limits: ServerLimits,
    accept: Arc<AcceptStats>,
    /// Connections of each local user (bounded per uid).
    users: Arc<lanefs_net::limits::UserConnections>,
}

/// A running OSS; dropping it does not stop it, [`OssHandle::shutdown`] does.
pub struct OssHandle {
    address: Address,
    accept: tokio::task::JoinHandle<()>,
    evictor: tokio::task::JoinHandle<()>,
    shared: Arc<Shared>,
    ost_threads: Vec<std::thread::JoinHandle<()>>,
}

impl OssHandle {
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Connections served and refused, and bytes queued to clients.
    pub fn stats(&self) -> ServerStats {
        server_stats(&self.shared.accept, &self.shared.peers)
    }

    /// What serves this OSS's metrics.
    pub fn scraper(&self) -> OssScraper {
        OssScraper { shared: Arc::downgrade(&self.shared) }
    }

    /// Stop accepting, close every connection, stop the OST threads. When
    /// this returns the OSS is gone: nobody can connect, no message is
    /// served and no OST touches its disk any more.
    pub async fn shutdown(self) {
        let _ = self.shared.stop.send(true);
        let _ = self.accept.await;
        let _ = self.evictor.await;
        self.shared.peers.lock().expect("peers lock").clear();
        // The connections are gone, so this was the last holder of the OST
        // queues: each OST thread finishes the message in hand and ends.
        drop(self.shared);
        let threads = self.ost_threads;
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}

/// Every OST's statistics, by index, as each OST's thread answers.
async fn ost_stats(shared: &Shared) -> Vec<OstStats> {
    let mut osts = Vec::new();
    let mut indices: Vec<&u32> = shared.osts.keys().collect();
    indices.sort();
    for index in indices {
        let (reply, answer) = oneshot::channel();
        let _ = shared.osts[index].send(OstInput::Stats(reply));
        if let Ok(mut stats) = answer.await {
            stats.rpcs_in_flight = shared.in_flight[index].load(Ordering::Relaxed);
            stats.exports = shared.presence.lock().expect("presence lock").len() as u64;
            osts.push(stats);
        }
    }
    osts
}

/// An OST's statistics as its thread knows them (the OSS fills in its
/// requests in flight and exports: see `ost_stats`).
fn stats_of(ost: &Ost<FileStore>, bulk_shared_bytes: u64) -> OstStats {
    let locks = ost.locks();
    OstStats {
        ost: ost.index().0,
        locks_granted: locks.granted_locks().count() as u64,
        locks_waiting: locks.waiting_count() as u64,
        locks: locks.counters_total(),
        data: ost.counters(),
        space: ost.store().space(),
        bulk_shared_bytes,
        sync_lock_cancel: ost.config().sync_lock_cancel,
        rpcs_in_flight: 0,
        exports: 0,
    }
}

/// Reads a running OSS's statistics for its metrics (see
/// [`crate::metrics`]) without keeping it alive: once the OSS stops, it
/// reads nothing.
#[derive(Clone)]
pub struct OssScraper {
    shared: std::sync::Weak<Shared>,
}

impl OssScraper {
    /// Every OST's statistics, and the OSS's connections; `None` once the
    /// OSS has stopped.
    pub async fn scrape(&self) -> Option<(Vec<OstStats>, ServerStats)> {
        let shared = self.shared.upgrade()?;
        let osts = ost_stats(&shared).await;
        Some((osts, server_stats(&shared.accept, &shared.peers)))
    }
}

pub(crate) fn server_stats(accept: &AcceptStats, peers: &Mutex<HashMap<u32, Arc<Outbox>>>) -> ServerStats {
    let queued_bytes = peers.lock().expect("peers lock").values().map(|o| o.queued_bytes() as u64).sum();
    ServerStats {
        connections: accept.open.load(Ordering::Relaxed),
        handshakes: accept.handshakes.load(Ordering::Relaxed),
        refused: accept.refused.load(Ordering::Relaxed),
        queued_bytes,
    }
}

/// Fence every OST directory (creating it if missing), before anything in
/// it is touched: a second OSS on the same OSTs stops here.
fn fence_osts(config: &OssConfig) -> std::io::Result<Vec<Fence>> {
    let mut fences = Vec::with_capacity(config.osts.len());
    for &index in &config.osts {
        let dir = config.data_dir.join(format!("OST{index:04x}"));
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700).create(&dir)?;
        fences.push(Fence::acquire(&dir, "OSS")?);
    }
    Ok(fences)
}

/// Start serving `config.osts` on `listen` (port 0 picks a free port); on
/// TCP, with the cluster's server key `key`. Fails, touching nothing, if
/// another server holds one of the OSTs.
pub async fn start(listen: &Address, key: Option<&ClusterKey>, config: OssConfig) -> std::io::Result<OssHandle> {
    config.limits.validate().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let descriptors = config.limits.descriptors_or_raise();
    let fences = fence_osts(&config)?;
    let listener = match fences.first() {
        Some(fence) => Listener::bind_fenced(listen, key, fence).await?,
        None => Listener::bind(listen, key).await?,
    };
    let address = listener.local_address()?;
    fences.iter().for_each(|f| f.record_address(&address));
    let budget = DescriptorBudget::oss(descriptors, config.osts.len(), listener.descriptors_per_connection());
    let clock = std::time::Instant::now();
    let peers: Peers = Arc::new(Mutex::new(HashMap::new()));
    let exports = Arc::new(Mutex::new(Exports::open(&config.data_dir)?));
    let mut osts = HashMap::new();
    let mut ost_threads = Vec::new();
    for (&index, fence) in config.osts.iter().zip(fences) {
        let (store, record) = open_store(index, &fence, budget.open_files_per_ost, &config)?;
        let syncer = store.syncer();
        let (tx, rx) = mpsc::channel();
        let tx = Arc::new(tx);
        let input = Arc::downgrade(&tx);
        let now = Instant(clock.elapsed().as_nanos() as u64);
        let mut ost = Ost::restart(OstIndex(index), config.ost.clone(), store, record, now);
        crate::ost_params::load(&mut ost)?;
        if ost.is_recovering() {
            info!(ost = index, clients = ost.known_clients().len(), "recovering: waiting for the clients to replay");
        }
        let commits = CommitThread::start(index, syncer, exports.clone(), ost.last_committed(), input)?;
        let peers = peers.clone();
        // The OST's thread holds its fence (and stops its commit thread
        // before it lets go): the directory is this OSS's for as long as
        // anything may touch it.
        let serve = move || {
            let _fence = fence;
            ost_thread(ost, rx, peers, clock, commits)
        };
        ost_threads.push(std::thread::Builder::new().name(format!("ost{index}")).spawn(serve)?);
        osts.insert(index, tx);
    }
    let connections_max = budget.connections_cap(config.limits.connections_max, "OSS");
    let accept_stats = Arc::new(AcceptStats::default());
    let policy = AcceptPolicy {
        connections_max,
        refusal: refusal_reason("OSS", connections_max, config.limits.connections_max.is_some(), descriptors),
        handshakes_max: budget.handshakes_max,
        handshakes_per_source_max: HANDSHAKES_PER_SOURCE_MAX,
        handshake_timeout: config.limits.handshake_timeout,
        stats: accept_stats.clone(),
    };
    let (stop, _) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        in_flight: osts.keys().map(|&index| (index, Arc::new(AtomicU64::new(0)))).collect(),
        osts,
        peers,
        exports,
        presence: Mutex::new(HashMap::new()),
        export_timeout: config.export_timeout,
        // Rounded down (a client gives up on a silent OSS within half of
        // it), and never to 0, which says the server calls no lock back.
        callback_timeout_ms: match config.ost.locks.callback_timeout.as_ns() {
            0 => 0,
            ns => (ns / 1_000_000).max(1),
        },
        stop,
        limits: config.limits.clone(),
        accept: accept_stats,
        users: Arc::default(),
    });
    let s = shared.clone();
    let accept = spawn_accept(listener, shared.stop.subscribe(), SHUTDOWN_GRACE, policy, move |stream| {
        serve_connection(stream, s.clone())
    });
    let evictor = tokio::spawn(evict_gone_clients(shared.clone()));
    info!(
        %address, osts = ?config.osts, connections_max, open_files_per_ost = budget.open_files_per_ost,
        descriptors, "OSS serving"
    );
    Ok(OssHandle { address, accept, evictor, shared, ost_threads })
}

/// An OST's store in its fenced directory, and its record (with a lock
/// key of its own from its first life on).
fn open_store(
    index: u32,
    fence: &Fence,
    open_files_max: usize,
    config: &OssConfig,
) -> std::io::Result<(FileStore, OstRecord)> {
    let store = FileStore::with_open_files_max(fence.dir(), open_files_max)?
        .with_faults(config.faults.clone())
        .with_memory_stores(config.memory_stores);
    if store.durable_on_write() {
        info!(ost = index, "in memory (tmpfs): writes are durable as made; clients keep no copies for replay");
    }
    let mut record = store.load_record()?;
    if record.lock_key == LockKey::default() {
        // A new OST (or one recorded before its locks carried proofs).
        record.lock_key = random_lock_key()?;
    }
    Ok((store, record))
}

fn ost_thread(
    mut ost: Ost<FileStore>,
    rx: mpsc::Receiver<OstInput>,
    peers: Peers,
    clock: std::time::Instant,
    commits: CommitThread,
) {
    let now = || Instant(clock.elapsed().as_nanos() as u64);
    let index = ost.index().0;
    let mut bulk_shared_bytes = 0u64;
    // Set when handling an input panicked: the OST's state can no longer be
    // trusted, so it serves nothing more and refuses every request.
    let mut failed = false;
    loop {
        let timeout = if failed { None } else { ost.poll_timeout() };
        let wait = match timeout {
            Some(t) => StdDuration::from_nanos(t.0.saturating_sub(now().0)),
            None => StdDuration::from_secs(3600),
        };
        let mut input = match rx.recv_timeout(wait) {
            Ok(input) => Some(input),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // Nothing touches the OST's disk once its thread (which
                // holds the fence) is gone.
                commits.stop();
                return;
            }
        };
        // The handled request's room in its connection's budget, given
        // back once its replies are queued: the reader then sees them.
        let handled = match &mut input {
            Some(OstInput::Message { in_flight, .. }) => in_flight.take(),
            _ => None,
        };
        if failed {
            refuse_input(index, input, &peers);
            continue;
        }
        let kind = input_kind(&input);
        let refusal = match &input {
            Some(OstInput::Message { client, message, .. }) => message.failed_reply().map(|reply| (*client, reply)),
            _ => None,
        };
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            serve_input(&mut ost, input, now, &mut bulk_shared_bytes, &commits)
        }));
        let peers = peers.lock().expect("peers lock");
        // Queued, never waited for: a slow client slows nobody else. What
        // the OST answered before any failure still goes out.
        while let Some((client, message)) = ost.poll_transmit() {
            let queued = peers.get(&client.0).map(|outbox| outbox.push(Wire::ToClient { ost: index, message }));
            if !matches!(queued, Some(Ok(()))) {
                debug!(ost = index, client = client.0, "reply to a closed connection dropped");
            }
        }
        if let Err(panic) = served {
            failed = true;
            error!(
                ost = index,
                input = kind,
                "the OST failed handling a {kind} input ({}): it now refuses every request; restart the OSS",
                panic_message(&panic)
            );
            if let Some((client, reply)) = refusal {
                if let Some(outbox) = peers.get(&client.0) {
                    let _ = outbox.push(Wire::ToClient { ost: index, message: reply });
                }
            }
            // Whatever waits on the OST (a lock, a sync, a glimpse) fails.
            for outbox in peers.values() {
                let _ = outbox.push(Wire::ToClient { ost: index, message: ToClient::Failed });
            }
        }
        drop(handled);
    }
}

/// Handle one input (a message, a timeout when `None`), then do the
/// commits it asked for and write the OST's record if it changed.
fn serve_input(
    ost: &mut Ost<FileStore>,
    input: Option<OstInput>,
    now: impl Fn() -> Instant,
    bulk_shared_bytes: &mut u64,
    commits: &CommitThread,
) {
    let index = ost.index().0;
    // Done syncs first, ahead of the requests queued meanwhile: their
    // clients let go of the pages they keep for replay at once, instead of
    // after every write queued behind the answer (the commit thread
    // recorded the commit point before it said so).
    for (token, failures) in commits.take_done() {
        ost.handle_synced(now(), token, &failures);
    }
    match input {
        Some(OstInput::Message { client, message, .. }) => {
            #[cfg(test)]
            tests::panic_hook(&message);
            if let ToOst::Write { data: Payload::Remote(span), .. } = &message {
                *bulk_shared_bytes += span.len();
            }
            ost.handle_message(now(), client, message);
        }
        Some(OstInput::Destroy { objects, reply }) => {
            let mut result = Ok(());
            for object in objects {
                match ost.store_mut().destroy(object) {
                    Ok(()) => ost.object_destroyed(object),
                    Err(e) => {
                        warn!(ost = index, "destroying object {}: {e}", object.0);
                        result = Err(format!("destroying object {} of OST{index:04x}: {e}", object.0));
                    }
                }
            }
            let _ = reply.send(result);
        }
        Some(OstInput::Precreate { last_id, reply }) => {
            let created = ost.store_mut().precreate(last_id);
            if let Err(e) = &created {
                warn!(ost = index, "precreating objects up to {}: {e}", last_id.0);
            }
            let _ = reply.send(created.map(|id| id.0).map_err(|e| format!("OST{index:04x}: {e}")));
        }
        Some(OstInput::Evict { client }) => ost.evict(now(), client),
        Some(OstInput::Stats(reply)) => {
            let _ = reply.send(stats_of(ost, *bulk_shared_bytes));
        }
        Some(OstInput::SetParam { name, value, permanent, reply }) => {
            let _ = reply.send(crate::ost_params::set(ost, &name, value.as_deref(), permanent));
        }
        // Taken above.
        Some(OstInput::Synced) => {}
        None => ost.handle_timeout(now()),
    }
    while let Some(request) = ost.poll_sync() {
        let objects = if request.commit.is_empty() { request.object.into_iter().collect() } else { request.commit };
        let targets = objects.into_iter().map(|object| ost.store().sync_target(object)).collect();
        // The record as it will stand once this commit is done (the
        // clients as the OST knows them now).
        let record = OstRecord {
            epoch: ost.epoch(),
            last_committed: request.commit_to,
            clients: ost.known_clients().clone(),
            failures: ost.failures_record(),
            lock_key: ost.lock_key(),
        };
        commits.submit(CommitJob::Sync { token: request.token, targets, record });
    }
    // A new life or a change of clients is on disk before the OST says
    // anything more: a client must never hold state of a life the OST
    // could start again under the same number. Rare, so waiting is cheap.
    if let Some(record) = ost.poll_record() {
        let (done, wait) = mpsc::channel();
        commits.submit(CommitJob::Record(record, done));
        let _ = wait.recv();
    }
}

/// An OST out of service answers each request with [`IoError::Failed`],
/// and the MDS's precreates and destroys with an error; statistics
/// requests go unanswered (their callers skip it).
fn refuse_input(index: u32, input: Option<OstInput>, peers: &Peers) {
    let failed = format!("OST{index:04x} is out of service after an internal failure: restart its OSS");
    match input {
        Some(OstInput::Message { client, message, .. }) => {
            debug!(ost = index, client = client.0, kind = message.kind(), "refused: the OST is out of service");
            let Some(reply) = message.failed_reply() else { return };
            if let Some(outbox) = peers.lock().expect("peers lock").get(&client.0) {
                let _ = outbox.push(Wire::ToClient { ost: index, message: reply });
            }
        }
        Some(OstInput::Destroy { reply, .. }) => {
            let _ = reply.send(Err(failed));
        }
        Some(OstInput::Precreate { reply, .. }) => {
            let _ = reply.send(Err(failed));
        }
        Some(OstInput::SetParam { reply, .. }) => {
            let _ = reply.send(Err(failed));
        }
        Some(OstInput::Evict { .. } | OstInput::Stats(_) | OstInput::Synced) | None => {}
    }
}

fn input_kind(input: &Option<OstInput>) -> &'static str {
    match input {
        Some(OstInput::Message { message, .. }) => message.kind(),
        Some(OstInput::Destroy { .. }) => "Destroy",
        Some(OstInput::Precreate { .. }) => "Precreate",
        Some(OstInput::Evict { .. }) => "Evict",
        Some(OstInput::Stats(_)) => "Stats",
        Some(OstInput::SetParam { .. }) => "SetParam",
        Some(OstInput::Synced) => "Synced",
        None => "timeout",
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    match panic.downcast_ref::<&str>() {
        Some(message) => message,
        None => panic.downcast_ref::<String>().map_or("a panic without a message", String::as_str),
    }
}

/// An OST's commit thread: does the syncs the OST asks for (`fdatasync`
/// of every object of a commit, or of the one object a cancel or a sync
/// RPC names), one after the other in the order asked, records the commit
/// point ([`Recorder`]), and
/// only then hands the result back to the OST's thread: in a list the
/// OST's thread takes before its next input, however many requests wait
/// in its queue, with an [`OstInput::Synced`] to wake it; the OST then
/// tells the clients. It also
/// writes the OST's record when the OST's clients or life change (the
/// OST's thread waits for that one), in the same order, so that records
/// never go back: the commit point written is the highest reached, the
/// clients those of the latest job. The
/// OST's thread serves on meanwhile: a lock cancel under
/// `sync_lock_cancel` keeps its lock granted until its sync is answered,
/// and a client's fsync waits for its own, but the writes of everyone else
/// go on. A failed `fdatasync` is reported to the writers, never
/// swallowed. Bound: the syncs queued are the OST's outstanding ones (one
/// per cancel or sync RPC in flight, and one commit), bounded by the
/// requests in flight the connections allow, and so are the results
/// waiting to be taken.
struct CommitThread {
    jobs: Option<mpsc::Sender<CommitJob>>,
    thread: Option<std::thread::JoinHandle<()>>,
    done: Arc<Mutex<Vec<SyncDone>>>,
}

/// A sync's token and the objects that failed it.
type SyncDone = (SyncToken, Vec<(ObjectId, IoError)>);

impl CommitThread {
    fn start(
        index: u32,
        syncer: Syncer,
        exports: Arc<Mutex<Exports>>,
        last_committed: Transno,
        input: Weak<mpsc::Sender<OstInput>>,
    ) -> std::io::Result<CommitThread> {
        let (jobs, rx) = mpsc::channel::<CommitJob>();
        let done = Arc::new(Mutex::new(Vec::new()));
        let results = done.clone();
        // Made at an OST's first start; one that cannot be made (a full
        // disk under an OST of an older release) costs speed, not safety.
        let point = syncer
            .commit_point()
            .map_err(|e| warn!(ost = index, "the commit point file: {e}; every commit writes the whole record"))
            .ok();
        let thread = std::thread::Builder::new().name(format!("ost{index}-commit")).spawn(move || {
            let mut recorder = Recorder { index, syncer, exports, point, whole: None, written: last_committed };
            for job in rx {
                let (token, targets, mut record) = match job {
                    CommitJob::Record(mut record, done) => {
                        recorder.save(&mut record);
                        let _ = done.send(());
                        continue;
                    }
                    CommitJob::Sync { token, targets, record } => (token, targets, record),
                };
                let started = std::time::Instant::now();
                let failures = sync_objects(index, &recorder.syncer, targets);
                if record.last_committed > recorder.written {
                    recorder.save(&mut record);
                }
                // `--emulate-commit-ms`: a commit as slow as a slower disk's.
                let floor = recorder.syncer.commit_floor();
                if let Some(rest) = floor.checked_sub(started.elapsed()) {
                    std::thread::sleep(rest);
                }
                results.lock().expect("commit results lock").push((token, failures));
                // The OST's thread is gone (a shutdown): nobody waits.
                let Some(input) = input.upgrade() else { return };
                if input.send(OstInput::Synced).is_err() {
                    return;
                }
            }
        })?;
        Ok(CommitThread { jobs: Some(jobs), thread: Some(thread), done })
    }

    /// The syncs done since the last call, in the order they ended.
    fn take_done(&self) -> Vec<SyncDone> {
        std::mem::take(&mut *self.done.lock().expect("commit results lock"))
    }

    fn submit(&self, job: CommitJob) {
        if let Some(jobs) = &self.jobs {
            // The thread ends only when `stop` drops the sender.
            let _ = jobs.send(job);
        }
    }

    /// Let the syncs in hand finish, then end the thread.
    fn stop(mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Writes an OST's record for its commit thread: the client table
/// (`Exports`), then the commit point alone ([`crate::commit_point`], one
/// block written in place) when nothing else in the record changed since
/// it was last written whole, else the whole of it (`last_rcvd.json`,
/// replaced atomically).
struct Recorder {
    index: u32,
    syncer: Syncer,
    exports: Arc<Mutex<Exports>>,
    point: Option<CommitPoint>,
    /// The record as last written whole.
    whole: Option<OstRecord>,
    /// The highest commit point written.
    written: Transno,
}

impl Recorder {
    /// Write `record`, its commit point raised to the highest written (a
    /// record never goes back).
    fn save(&mut self, record: &mut OstRecord) {
        let index = self.index;
        record.last_committed = record.last_committed.max(self.written);
        self.written = record.last_committed;
        if let Err(e) = self.exports.lock().expect("exports lock").save_if_changed() {
            warn!(ost = index, "recording the client table: {e}");
        }
        let unchanged = self.whole.as_ref().is_some_and(|whole| {
            (whole.epoch, &whole.clients, &whole.failures) == (record.epoch, &record.clients, &record.failures)
        });
        if let Some(point) = self.point.as_mut().filter(|_| unchanged) {
            match point.save(record.last_committed) {
                Ok(()) => return,
                Err(e) => warn!(ost = index, "recording the OST's commit point: {e}; writing the whole record"),
            }
        }
        // If it cannot be written, the data is synced but the commit point
        // is not recorded: after a crash, clients replay changes that are
        // on disk already.
        match self.syncer.save_record(record) {
            Ok(()) => self.whole = Some(record.clone()),
            Err(e) => warn!(ost = index, "recording the OST's commit point and clients: {e}"),
        }
    }
}

/// What an OST's commit thread is asked to do.
enum CommitJob {
    /// A sync the OST asked for (`lanefs_core::ost::SyncRequest`): make
    /// `targets` durable (every object of a commit, or the one a cancel or
    /// a sync RPC names), then write `record` if its commit point is new.
    Sync { token: SyncToken, targets: Vec<SyncTarget>, record: OstRecord },
    /// The OST's clients or its life changed: write its record, then say
    /// so on the channel.
    Record(OstRecord, mpsc::Sender<()>),
}

/// `fdatasync` every object of a job; the ones that failed, with the error
/// each reports to its writers.
fn sync_objects(index: u32, syncer: &Syncer, targets: Vec<SyncTarget>) -> Vec<(ObjectId, IoError)> {
    let mut failures = Vec::new();
    for target in targets {
        let object = target.object();
        match syncer.sync(target) {
            Ok(()) => {}
            // Destroyed since it was written (an unlink): nothing of it is
            // left to make durable.
            Err(StoreError::NoSuchObject { .. }) => {}
            Err(e) => {
                warn!(ost = index, "syncing object {}: {e}", object.0);
                failures.push((object, e.io_error()));
            }
        }
    }
    failures
}

/// Evict the clients that have been gone longer than the export timeout.
async fn evict_gone_clients(shared: Arc<Shared>) {
    let mut stop = shared.stop.subscribe();
    let period = (shared.export_timeout / 4).max(StdDuration::from_millis(10));
    loop {
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            _ = tokio::time::sleep(period) => {}
        }
        let gone: Vec<ClientId> = {
            let mut presence = shared.presence.lock().expect("presence lock");
            let gone: Vec<ClientId> = presence
                .iter()
                .filter(|(_, p)| p.connections == 0 && p.last_heard.elapsed() >= shared.export_timeout)
                .map(|(c, _)| *c)
                .collect();
            for c in &gone {
                presence.remove(c);
            }
            gone
        };
        for client in gone {
            info!(client = client.0, "client gone longer than the export timeout: evicted");
            for tx in shared.osts.values() {
                let _ = tx.send(OstInput::Evict { client });
            }
            shared.exports.lock().expect("exports lock").remove(client);
        }
    }
}

/// Closes a connection's outbox when its task ends, however it ends (an
/// aborted task included): its queue is freed at once.
pub(crate) struct CloseOnDrop(pub(crate) Arc<Outbox>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close("the connection ended");
    }
}

async fn serve_connection(accepted: Accepted, shared: Arc<Shared>) {
    let (r, w) = tokio::io::split(accepted.stream);
    let mut r = BufReader::with_capacity(READ_BUFFER_BYTES, r);
    let outbox = Outbox::new(shared.limits.queue.clone());
    let _close = CloseOnDrop(outbox.clone());
    spawn_writer(w, outbox.clone(), None);
    let _counted = match shared.users.admit(&accepted.peer) {
        Ok(counted) => counted,
        Err(reason) => return outbox.finish(Some(Wire::Refused { reason })),
    };
    match accepted.role {
        Role::Client => {}
        Role::Mds => return serve_mds(&mut r, &shared, &outbox).await,
        role => {
            let reason = format!("an OSS takes client and MDS connections, not {role:?}");
            outbox.finish(Some(Wire::Refused { reason }));
            return;
        }
    }
    let _ = outbox.push(welcome(&shared));
    let mut stop = shared.stop.subscribe();
    let standing = if accepted.peer.is_administrator() {
        Standing::Administrator
    } else if accepted.peer.is_node() {
        Standing::Node
    } else {
        Standing::User
    };
    let mut session = Session { client: None, arena: None, fds: accepted.fds, standing };
    let served = tokio::select! {
        biased;
        _ = stop.wait_for(|stopped| *stopped) => Err("the OSS is shutting down".to_string()),
        // The writer gave up (and said why, if it matters) or the peer is gone.
        _ = outbox.closed() => Ok(()),
        served = serve_messages(&mut r, &mut session, &shared, &outbox) => served,
    };
    if let Some(client) = session.client {
        let mut peers = shared.peers.lock().expect("peers lock");
        if peers.get(&client.0).is_some_and(|mine| Arc::ptr_eq(mine, &outbox)) {
            peers.remove(&client.0);
        }
        drop(peers);
        let mut presence = shared.presence.lock().expect("presence lock");
        if let Some(p) = presence.get_mut(&client) {
            p.connections = p.connections.saturating_sub(1);
            p.last_heard = std::time::Instant::now();
        }
        debug!(client = client.0, "client disconnected");
    }
    match served {
        Ok(()) => outbox.close("the connection is closed"),
        Err(reason) => {
            warn!(client = ?session.client, "closing connection: {reason}");
            outbox.finish(Some(Wire::Refused { reason }));
        }
    }
}

/// A local user's connection asked for object I/O, which is a node's: it
/// is told so (`Wire::NotANode`, a refusal for good) and closed: the
/// connection's service ends (`Ok`, the refusal already queued).
fn refuse_user(outbox: &Outbox) -> Result<(), String> {
    warn!("closing a local user's connection: {USER_NOT_A_NODE}");
    outbox.finish(Some(Wire::NotANode));
    Ok(())
}

/// One connection's state.
struct Session {
    /// Who the client is, once it has said (`Session`).
    client: Option<ClientId>,
    arena: Option<Arc<MappedArena>>,
    fds: Option<FdInbox>,
    /// What the peer may do (see [`lanefs_net::auth`]).
    standing: Standing,
}

/// What a connection's peer may do at the OSS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Standing {
    /// A local user, not a node: statistics only.
    User,
    /// A node (a client key, a mount): I/O, locks, advice, statistics.
    Node,
    /// A node that may also set the OSTs' parameters: the server key, or
    /// the server's own user or root.
    Administrator,
}

impl Session {
    fn client(&self) -> Result<ClientId, String> {
        self.client.ok_or_else(|| "a client names itself (Session) before its first request".to_string())
    }
}

fn welcome(shared: &Shared) -> Wire {
    Wire::Welcome { version: PROTOCOL_VERSION, client: 0, callback_timeout_ms: shared.callback_timeout_ms }
}

/// The MDS's connection: precreates and destroys, each answered when the
/// OST's thread has done it. Anything else closes the connection.
async fn serve_mds<R: tokio::io::AsyncRead + Unpin>(r: &mut R, shared: &Shared, outbox: &Outbox) {
    let _ = outbox.push(welcome(shared));
    info!("MDS connected");
    let mut stop = shared.stop.subscribe();
    let served = tokio::select! {
        biased;
        _ = stop.wait_for(|stopped| *stopped) => Err("the OSS is shutting down".to_string()),
        _ = outbox.closed() => Ok(()),
        served = serve_mds_messages(r, shared, outbox) => served,
    };
    match served {
        Ok(()) => outbox.close("the connection is closed"),
        Err(reason) => {
            warn!("closing the MDS's connection: {reason}");
            outbox.finish(Some(Wire::Refused { reason }));
        }
    }
}

async fn serve_mds_messages<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    shared: &Shared,
    outbox: &Outbox,
) -> Result<(), String> {
    loop {
        let Some(frame) = read_within(r, shared.limits.idle_timeout).await? else { return Ok(()) };
        match frame {
            Wire::Ping => {
                let _ = outbox.push(Wire::Pong);
            }
            Wire::Precreate { id, ost, last_id } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let (reply, answer) = oneshot::channel();
                let _ = sender.send(OstInput::Precreate { last_id: ObjectId(last_id), reply });
                let result = answer.await.unwrap_or_else(|_| Err(format!("OST{ost:04x} has stopped")));
                let _ = outbox.push(Wire::Precreated { id, ost, result });
            }
            Wire::Destroy { id, ost, objects } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let batch_max = lanefs_mds::objects::DESTROY_BATCH_MAX;
                if objects.len() > batch_max {
                    return Err(format!("a Destroy of {} objects: at most {batch_max} go in one", objects.len()));
                }
                let (reply, answer) = oneshot::channel();
                let objects = objects.into_iter().map(ObjectId).collect();
                let _ = sender.send(OstInput::Destroy { objects, reply });
                let result = answer.await.unwrap_or_else(|_| Err(format!("OST{ost:04x} has stopped")));
                let _ = outbox.push(Wire::Destroyed { id, ost, result });
            }
            other => return Err(format!("the MDS's connection does not take {} messages", variant(&other))),
        }
    }
}

/// The next frame, which must come within `idle` (the idle timeout);
/// `Ok(None)` when the peer closed the connection.
pub(crate) async fn read_within<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    idle: StdDuration,
) -> Result<Option<Wire>, String> {
    match tokio::time::timeout(idle, read_frame(r)).await {
        Err(_) => Err(format!(
            "nothing received for {idle:?} (idle timeout; a lanefs client pings every {PING_INTERVAL_DEFAULT:?} \
             unless told otherwise)"
        )),
        Ok(Ok(frame)) => Ok(frame),
        Ok(Err(CodecError::Io(e))) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(None),
        Ok(Err(e)) => Err(e.to_string()),
    }
}

/// The bytes a request holds in flight: a write's data, or the reply a
/// read asks for.
fn request_bytes(message: &ToOst) -> u64 {
    match message {
        ToOst::Write { data, .. } => data.len(),
        ToOst::Read { len, .. } => *len,
        _ => 0,
    }
}

async fn serve_messages<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    session: &mut Session,
    shared: &Shared,
    outbox: &Arc<Outbox>,
) -> Result<(), String> {
    let limits = &shared.limits;
    let budget = RequestBudget::new(limits.requests_in_flight_max, limits.request_bytes_in_flight_max);
    loop {
        // A client that does not read its replies is not read either.
        outbox.below_soft().await;
        let Some(frame) = read_within(r, limits.idle_timeout).await? else { return Ok(()) };
        if let Some(client) = session.client {
            if let Some(p) = shared.presence.lock().expect("presence lock").get_mut(&client) {
                p.last_heard = std::time::Instant::now();
            }
        }
        match frame {
            Wire::Ping => {
                let _ = outbox.push(Wire::Pong);
            }
            // A user's client names itself like any other, but is no
            // node: it gets no export (nor a place in the exports table).
            Wire::Session { .. } if session.standing == Standing::User => {}
            Wire::ToOst { .. } | Wire::WriteShared { .. } if session.standing == Standing::User => {
                return refuse_user(outbox);
            }
            Wire::AttachArena { arena, .. } if session.standing == Standing::User => {
                let _ = outbox.push(Wire::ArenaRefused { arena, reason: USER_NOT_A_NODE.to_string() });
            }
            Wire::Session { uuid } => {
                if session.client.is_some() {
                    return Err("a connection names its client once".into());
                }
                let client = shared.exports.lock().expect("exports lock").id_of(uuid)?;
                session.client = Some(client);
                // A new connection of a client takes its session over from
                // an old one that lingers (its replies go here from now on).
                shared.peers.lock().expect("peers lock").insert(client.0, outbox.clone());
                let mut presence = shared.presence.lock().expect("presence lock");
                let p = presence
                    .entry(client)
                    .or_insert(Presence { connections: 0, last_heard: std::time::Instant::now() });
                p.connections += 1;
                p.last_heard = std::time::Instant::now();
                debug!(client = client.0, "client connected");
            }
            Wire::ToOst { ost, message: ToOst::Read { xid, len, .. } } if len > u64::from(BULK_BYTES_MAX) => {
                debug!(client = ?session.client, len, "a read larger than the bulk maximum refused");
                let reply = ToClient::ReadReply { xid, result: Err(IoError::Invalid) };
                let _ = outbox.push(Wire::ToClient { ost, message: reply });
            }
            Wire::ToOst { ost, message } => {
                let client = session.client()?;
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let in_flight = budget.acquire(request_bytes(&message)).await.counted(&shared.in_flight[&ost]);
                let _ = sender.send(OstInput::Message { client, message, in_flight: Some(in_flight) });
            }
            Wire::WriteShared { ost, xid, object, offset, bulk } => {
                let client = session.client()?;
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let mapped = session.arena.as_ref().ok_or("a shared-memory write before any arena was attached")?;
                let data = mapped.resolve(&bulk, u64::from(BULK_BYTES_MAX))?;
                let message = ToOst::Write { xid, object, offset, data: Payload::Remote(Box::new(data)) };
                // Its bytes stay in the client's memory: only the message counts.
                let in_flight = budget.acquire(0).await.counted(&shared.in_flight[&ost]);
                let _ = sender.send(OstInput::Message { client, message, in_flight: Some(in_flight) });
            }
            Wire::AttachArena { arena: id, frames } => {
                let fd = session.fds.as_ref().and_then(FdInbox::take_latest);
                let attached = match fd {
                    None => Err("no file descriptor came with it (shared memory needs a Unix socket)".to_string()),
                    Some(fd) => MappedArena::attach(fd, id, frames),
                };
                match attached {
                    Ok(mapped) => {
                        debug!(arena = id, frames, "page arena attached");
                        session.arena = Some(mapped);
                        let _ = outbox.push(Wire::ArenaAttached { arena: id });
                    }
                    Err(reason) => {
                        warn!("page arena refused: {reason}");
                        let _ = outbox.push(Wire::ArenaRefused { arena: id, reason });
                    }
                }
            }
            Wire::Destroy { .. } | Wire::Precreate { .. } => {
                return Err(format!(
                    "only the MDS may create or destroy objects: {} refused on a client's connection",
                    variant(&frame)
                ))
            }
            Wire::StatsRequest { id } => {
                let osts = ost_stats(shared).await;
                let _ = outbox.push(Wire::StatsReply { id, osts });
            }
            Wire::SetParam { id, ost, name, value, permanent } => {
                let result = match shared.osts.get(&ost) {
                    _ if session.standing != Standing::Administrator => {
                        Err("setting an OST's parameters needs the cluster's server key (server.pem), or the \
                         server's own user or root on a Unix socket"
                            .to_string())
                    }
                    None => Err(format!("this OSS does not serve OST{ost:04x}")),
                    Some(tx) => {
                        let (reply, answer) = oneshot::channel();
                        let _ = tx.send(OstInput::SetParam { name, value, permanent, reply });
                        answer.await.unwrap_or_else(|_| Err(format!("OST{ost:04x} is stopping")))
                    }
                };
                let _ = outbox.push(Wire::SetParamReply { id, result });
            }
            other => return Err(format!("an OSS does not take {} messages", variant(&other))),
        }
    }
}

/// Why a registration with the MDS failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The MDS could not be reached, or did not answer (not started yet,
    /// restarting): worth trying again.
    #[error("{0}")]
    Unreachable(String),
    /// The MDS answered and refused, saying why: trying again would not
    /// help until what it names is fixed.
    #[error("refused: {0}")]
    Refused(String),
}

/// Tell the MDS at `mds` that `address` serves `osts` (what `lanefs oss`
/// does at start), with the cluster's server key `key` if the MDS is on
/// TCP. An MDS out of reach is tried again, with a growing wait, for up to
/// `timeout` (an OSS may start before its MDS, as a client may), and
/// `waiting` is told each time why and how long until the next try; a
/// refusal fails at once. The registration then lives as long as this
/// process: a task holds the connection open, answers the MDS's pings
/// (which is how the MDS knows this OSS still holds its OSTs), pings it
/// every [`PING_INTERVAL_DEFAULT`] (so that the MDS's idle timeout leaves
/// it be), and when it is lost (the MDS restarted, or stopped answering)
/// registers again, trying with a growing wait until the MDS is back (a
/// restarted MDS keeps no registrations: OSSes tell it again, as Lustre's
/// OSTs reconnect to their MGS).
pub async fn register_with_mds(
    mds: &Address,
    key: Option<&ClusterKey>,
    address: &Address,
    osts: &[u32],
    timeout: StdDuration,
    mut waiting: impl FnMut(&str, StdDuration),
) -> Result<(), RegisterError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut wait = REGISTER_RETRY_FIRST;
    let mut lost = loop {
        match register_once(mds, key, address, osts).await {
            Ok(lost) => break lost,
            Err(RegisterError::Unreachable(reason)) if tokio::time::Instant::now() + wait < deadline => {
                waiting(&reason, wait);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(REGISTER_RETRY_MAX);
            }
            Err(RegisterError::Unreachable(reason)) => {
                return Err(RegisterError::Unreachable(format!(
                    "{reason}; gave up after {timeout:?}: start the MDS first, check the address, or give a \
                     longer timeout (--timeout SECONDS)"
                )))
            }
            Err(refused) => return Err(refused),
        }
    };
    let (mds, key, address, osts) = (mds.clone(), key.cloned(), address.clone(), osts.to_vec());
    tokio::spawn(async move {
        loop {
            let reason = lost.await.unwrap_or_else(|e| e.to_string());
            warn!("the registration with the MDS at {mds} was lost ({reason}): registering again");
            let mut wait = REGISTER_RETRY_FIRST;
            lost = loop {
                match register_once(&mds, key.as_ref(), &address, &osts).await {
                    Ok(lost) => break lost,
                    Err(e) => {
                        debug!("registering with the MDS at {mds}: {e}; trying again in {wait:?}");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(REGISTER_RETRY_MAX);
                    }
                }
            };
            info!("registered again with the MDS at {mds}");
        }
    });
    Ok(())
}

/// The first wait before registering again with a lost MDS; each next
/// wait doubles, up to [`REGISTER_RETRY_MAX`].
const REGISTER_RETRY_FIRST: StdDuration = StdDuration::from_millis(100);
const REGISTER_RETRY_MAX: StdDuration = StdDuration::from_secs(5);

/// Whether a failure to connect means the MDS is not there (yet): nothing
/// listens, its socket file is not made yet, or the connection broke.
fn mds_absent(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionRefused | NotFound | ConnectionReset | ConnectionAborted | TimedOut | UnexpectedEof)
}

/// One registration: the task it returns ends, saying why, when the
/// registration's connection is lost.
async fn register_once(
    mds: &Address,
    key: Option<&ClusterKey>,
    address: &Address,
    osts: &[u32],
) -> Result<tokio::task::JoinHandle<String>, RegisterError> {
    let stream = lanefs_net::transport::connect(mds, key).await.map_err(|e| match mds_absent(&e) {
        true => RegisterError::Unreachable(format!("the MDS at {mds} is not reachable: {e}")),
        false => RegisterError::Refused(lanefs_net::auth::describe(&e, key)),
    })?;
    let (r, w) = tokio::io::split(stream);
    let mut r = BufReader::new(r);
    let outbox = Outbox::new(QueueLimits::default());
    spawn_writer(w, outbox.clone(), None);
    let role = Role::Oss { address: address.to_string(), osts: osts.to_vec() };
    let _ = outbox.push(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role });
    let answer = tokio::time::timeout(REGISTER_ANSWER_TIMEOUT, read_frame(&mut r)).await;
    let unreachable = |why: String| RegisterError::Unreachable(format!("the MDS at {mds}: {why}"));
    match answer.map_err(|_| unreachable(format!("no answer within {REGISTER_ANSWER_TIMEOUT:?}")))? {
        Ok(Some(Wire::Welcome { .. })) => {}
        Ok(Some(Wire::Refused { reason })) => return Err(RegisterError::Refused(reason)),
        Ok(None) => return Err(unreachable("closed the connection before answering".into())),
        Err(CodecError::Io(e)) if mds_absent(&e) => return Err(unreachable(e.to_string())),
        Err(CodecError::Io(e)) => return Err(RegisterError::Refused(lanefs_net::auth::describe(&e, key))),
        other => return Err(RegisterError::Refused(format!("unexpected answer {other:?}"))),
    }
    let pinged = outbox.clone();
    tokio::spawn(async move {
        let mut ping = tokio::time::interval(PING_INTERVAL_DEFAULT);
        ping.tick().await; // the first tick is at once
        loop {
            tokio::select! {
                _ = ping.tick() => {
                    if pinged.push(Wire::Ping).is_err() {
                        return;
                    }
                }
                _ = pinged.closed() => return,
            }
        }
    });
    Ok(tokio::spawn(async move {
        let reason = tokio::select! {
            // The writer gave up on a peer that stopped reading.
            reason = outbox.closed() => reason,
            read = async { loop {
                match read_frame(&mut r).await {
                    // The MDS asks whether this OSS still holds its OSTs.
                    Ok(Some(Wire::Ping)) => {
                        let _ = outbox.push(Wire::Pong);
                    }
                    Ok(Some(_)) => continue,
                    Ok(None) => break "the MDS closed the connection".to_string(),
                    Err(e) => break e.to_string(),
                }
            } } => read,
        };
        outbox.close("the MDS closed the registration");
        reason
    }))
}

/// How long a registration waits for the MDS's answer to its `Hello`.
const REGISTER_ANSWER_TIMEOUT: StdDuration = StdDuration::from_secs(10);

/// 128 random bits from the system, for an OST's lock proofs.
fn random_lock_key() -> std::io::Result<LockKey> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| std::io::Error::other("no randomness from the system for the OST's lock key"))?;
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    Ok(LockKey([word(0), word(8)]))
}

#[cfg(test)]
mod tests {
    use crate::cluster::{LocalCluster, LocalClusterConfig};
    use lanefs_client::Client;
    use lanefs_core::msg::ToOst;
    use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
    use std::time::Duration;

    /// Every read at this offset panics its OST's service thread: a
    /// stand-in for a bug in the OST, so that what follows one is tested.
    const PANIC_OFFSET: u64 = 0x7a11_0000;

    pub(super) fn panic_hook(message: &ToOst) {
        if let ToOst::Read { offset: PANIC_OFFSET, .. } = message {
            panic!("failure injected on a read at {PANIC_OFFSET:#x}");
        }
    }

    /// Create (or open) `path` with one stripe, on OST `ost`.
    fn file(client: &Client, path: &str, ost: u32) -> lanefs_client::File {
        let create = MdsRequest::Create {
            path: path.into(),
            stripe: StripeSpec { count: Some(1), size: None, start_ost: Some(i64::from(ost)), ..StripeSpec::default() },
            mode: CreateMode::OpenOrCreate,
            access: Access::ReadWrite,
            permissions: 0o644,
        };
        let MdsReply::File(info) = client.mds(create).unwrap() else { panic!("create answered something else") };
        assert_eq!(info.layout.objects()[0].ost.0, ost);
        client.open_layout(path, info.layout).unwrap()
    }

    /// A panic in an OST's service thread fails that OST, not its callers:
    /// the request that met it, every later one and whatever waited on the
    /// OST get an error telling the operator to restart the OSS, and the
    /// OSS's other OST serves on.
    #[test]
    fn a_failed_ost_answers_every_request_with_an_error() {
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let cluster = LocalCluster::start(LocalClusterConfig { osts: 2, ..Default::default() }).unwrap();
            let client = Client::connect(&cluster.mds_address(), cluster.client_options()).unwrap();
            let before = file(&client, "/before", 0);
            client.pwrite(&before, 0, b"before").unwrap();
            client.fsync(&before).unwrap();
            let error = client.pread(&before, PANIC_OFFSET, 10).unwrap_err().to_string();
            assert!(error.contains("restart its OSS"), "{error}");
            // Every later request to that OST fails, from any client.
            let other = Client::connect(&cluster.mds_address(), cluster.client_options()).unwrap();
            let error = other.pread(&file(&other, "/before", 0), 0, 6).unwrap_err().to_string();
            assert!(error.contains("restart its OSS"), "{error}");
            let error = client.pwrite(&before, 0, b"after").unwrap_err().to_string();
            assert!(error.contains("restart its OSS"), "{error}");
            // The other OST of the OSS serves on.
            let fine = file(&other, "/fine", 1);
            other.pwrite(&fine, 0, b"fine").unwrap();
            other.fsync(&fine).unwrap();
            assert_eq!(client.pread(&file(&client, "/fine", 1), 0, 4).unwrap(), b"fine");
            let _ = done.send(());
        });
        finished.recv_timeout(Duration::from_secs(60)).expect("every call answered within a minute");
    }

    /// A done sync is answered before the next input, whatever it is: a
    /// commit that ends while requests wait in the OST's queue does not
    /// wait for them (its clients would keep their replay copies, and a
    /// cancel its lock, for as long).
    #[test]
    fn a_done_sync_is_answered_ahead_of_the_requests_queued_before_its_wake_up() {
        use super::{serve_input, CommitThread, OstInput};
        use crate::exports::Exports;
        use crate::filestore::FileStore;
        use lanefs_core::msg::{Payload, ToClient};
        use lanefs_core::ost::{Ost, OstConfig, RecoveryConfig};
        use lanefs_core::{ClientId, ObjectId, OstIndex, Transno, Xid};
        use std::sync::{mpsc, Arc, Mutex};

        let dir = tempfile::tempdir().unwrap();
        let mut store = FileStore::open(dir.path()).unwrap();
        store.precreate(ObjectId(2)).unwrap();
        let syncer = store.syncer();
        let config = OstConfig { recovery: Some(RecoveryConfig::default()), ..OstConfig::default() };
        let mut ost = Ost::new(OstIndex(0), config, store);
        let (tx, rx) = mpsc::channel();
        let tx = Arc::new(tx);
        let exports = Arc::new(Mutex::new(Exports::open(dir.path()).unwrap()));
        let commits = CommitThread::start(0, syncer, exports, Transno(0), Arc::downgrade(&tx)).unwrap();
        let clock = std::time::Instant::now();
        let now = || lanefs_core::Instant(clock.elapsed().as_nanos() as u64);
        let mut bulk = 0;
        let mut serve = |ost: &mut Ost<FileStore>, message: ToOst| {
            let input = OstInput::Message { client: ClientId(1), message, in_flight: None };
            serve_input(ost, Some(input), now, &mut bulk, &commits);
            std::iter::from_fn(|| ost.poll_transmit()).map(|(_, m)| m).collect::<Vec<_>>()
        };
        let write = |xid, offset| ToOst::Write {
            xid: Xid(xid),
            object: ObjectId(1),
            offset,
            data: Payload::Bytes(vec![7; 4096]),
        };
        serve(&mut ost, ToOst::Connect { resume: None });
        serve(&mut ost, write(1, 0));
        serve(&mut ost, ToOst::Sync { xid: Xid(2), object: ObjectId(1) });
        // The commit thread has done the sync; its wake-up is queued
        // behind a write that came in meanwhile.
        rx.recv_timeout(Duration::from_secs(30)).expect("the commit thread answers");
        let replies = serve(&mut ost, write(3, 4096));
        let answered = |m: &ToClient| matches!(m, ToClient::SyncReply { xid: Xid(2), result: Ok(()) });
        assert!(replies.iter().any(answered), "the sync answered while the write was served: {replies:?}");
        assert!(replies.iter().any(|m| matches!(m, ToClient::Committed { transno: Transno(1) })), "{replies:?}");
        // The wake-up then finds nothing left.
        serve_input(&mut ost, Some(OstInput::Synced), now, &mut bulk, &commits);
        assert!(!std::iter::from_fn(|| ost.poll_transmit()).any(|(_, m)| answered(&m)));
        ost.check_invariants();
        commits.stop();
    }
}
