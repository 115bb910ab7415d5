//! The OSS daemon: serves one or more OSTs over the network.
//!
//! Each OST is lanefs-core's [`Ost`] state machine over a [`FileStore`], run
//! on an OS thread of its own (the OST's service thread): disk I/O never
//! blocks the network runtime, and messages to one OST are handled in the
//! order they arrived. Time comes from the OSS's monotonic clock.
//!
//! Every accepted connection is one client session with its own identity
//! (`ClientId`) in every OST's lock namespace. A connection that sends a
//! malformed frame, a wrong protocol version or a message an OSS does not
//! take is told why (`Refused`) and closed; nobody else notices.
//!
//! A client on the same host may hand over its page arena (`AttachArena`
//! with the memfd attached, on a Unix socket): its write RPCs then name
//! frames of it (`WriteShared`), which the connection checks against the
//! arena and passes to the OST as a [`lanefs_core::msg::Payload::Remote`],
//! written to the object straight from the client's memory. A descriptor
//! that does not fit the arena closes the connection, like any malformed
//! frame.
//!
//! Bounds (see [`crate::limits`] for the values): each OST directory is
//! fenced ([`crate::fence`]) before anything in it is touched; connections
//! are capped from the descriptor limit, which the OSS raises at start; a
//! connection must say `Hello` within the handshake timeout and then send
//! something (a request or a `Ping`) within every idle timeout; its replies
//! wait in a bounded [`Outbox`] (its reader stops while the queue is over
//! its soft limit, and the connection closes past the hard one); and its
//! requests in flight to the OST threads are bounded ([`RequestBudget`]).
//! A read larger than the bulk maximum is answered `IoError::Invalid` by
//! the connection itself: its reply could never be sent.

use crate::codec::{read_frame, CodecError, BULK_BYTES_MAX};
use crate::fence::Fence;
use crate::filestore::FileStore;
use crate::limits::{refusal_reason, DescriptorBudget, QueueLimits, ServerLimits, ServerStats, PING_INTERVAL_DEFAULT};
use crate::outbox::{InFlight, Outbox, RequestBudget};
use crate::proto::{OstStats, Role, Wire, MAGIC, PROTOCOL_VERSION};
use crate::shm::{FdInbox, MappedArena};
use crate::transport::{spawn_accept, AcceptPolicy, AcceptStats, Accepted, Address, Listener};
use crate::writer::spawn_writer;
use lanefs_core::msg::{IoError, Payload, ToClient, ToOst};
use lanefs_core::ost::{Ost, OstConfig};
use lanefs_core::{ClientId, Instant, ObjectId, OstIndex};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration as StdDuration;
use tokio::io::BufReader;
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

#[derive(Clone, Debug)]
pub struct OssConfig {
    /// Each OST keeps its objects in `data_dir/OSTxxxx/`.
    pub data_dir: PathBuf,
    pub osts: Vec<u32>,
    pub ost: OstConfig,
    /// Connections, timeouts, queues: [`ServerLimits::default`] unless set.
    pub limits: ServerLimits,
}

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
        object: ObjectId,
        in_flight: Option<InFlight>,
    },
    Stats(oneshot::Sender<OstStats>),
}

/// How long a stopping server lets its connections close by themselves
/// (telling their peers why) before it aborts them.
pub(crate) const SHUTDOWN_GRACE: StdDuration = StdDuration::from_secs(1);

type Peers = Arc<Mutex<HashMap<u32, Arc<Outbox>>>>;

struct Shared {
    osts: HashMap<u32, mpsc::Sender<OstInput>>,
    /// Outgoing queue of every connected client, by its identity.
    peers: Peers,
    client_next: AtomicU32,
    /// Set to true when the OSS stops: every connection closes.
    stop: tokio::sync::watch::Sender<bool>,
    limits: ServerLimits,
    accept: Arc<AcceptStats>,
}

/// A running OSS; dropping it does not stop it, [`OssHandle::shutdown`] does.
pub struct OssHandle {
    address: Address,
    accept: tokio::task::JoinHandle<()>,
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

    /// Stop accepting, close every connection, stop the OST threads. When
    /// this returns the OSS is gone: nobody can connect, no message is
    /// served and no OST touches its disk any more.
    pub async fn shutdown(self) {
        let _ = self.shared.stop.send(true);
        let _ = self.accept.await;
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

pub(crate) fn server_stats(accept: &AcceptStats, peers: &Mutex<HashMap<u32, Arc<Outbox>>>) -> ServerStats {
    let queued_bytes = peers.lock().expect("peers lock").values().map(|o| o.queued_bytes() as u64).sum();
    ServerStats {
        connections: accept.open.load(Ordering::Relaxed),
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
        std::fs::create_dir_all(&dir)?;
        fences.push(Fence::acquire(&dir, "OSS")?);
    }
    Ok(fences)
}

/// Start serving `config.osts` on `listen` (port 0 picks a free port).
/// Fails, touching nothing, if another server holds one of the OSTs.
pub async fn start(listen: &Address, config: OssConfig) -> std::io::Result<OssHandle> {
    config.limits.validate().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let descriptors = config.limits.descriptors_or_raise();
    let fences = fence_osts(&config)?;
    let listener = match fences.first() {
        Some(fence) => Listener::bind_fenced(listen, fence).await?,
        None => Listener::bind(listen).await?,
    };
    let address = listener.local_address()?;
    fences.iter().for_each(|f| f.record_address(&address));
    let budget = DescriptorBudget::oss(descriptors, config.osts.len(), listener.descriptors_per_connection());
    let clock = std::time::Instant::now();
    let peers: Peers = Arc::new(Mutex::new(HashMap::new()));
    let mut osts = HashMap::new();
    let mut ost_threads = Vec::new();
    for (&index, fence) in config.osts.iter().zip(fences) {
        let store = FileStore::with_open_files_max(fence.dir(), budget.open_files_per_ost)?;
        let (tx, rx) = mpsc::channel();
        let ost = Ost::new(OstIndex(index), config.ost.clone(), store);
        let peers = peers.clone();
        // The OST's thread holds its fence: the directory is this OSS's
        // for as long as anything may touch it.
        let serve = move || {
            let _fence = fence;
            ost_thread(ost, rx, peers, clock)
        };
        ost_threads.push(std::thread::Builder::new().name(format!("ost{index}")).spawn(serve)?);
        osts.insert(index, tx);
    }
    let connections_max = budget.connections_cap(config.limits.connections_max, "OSS");
    let accept_stats = Arc::new(AcceptStats::default());
    let policy = AcceptPolicy {
        connections_max,
        refusal: refusal_reason("OSS", connections_max, config.limits.connections_max.is_some(), descriptors),
        stats: accept_stats.clone(),
    };
    let (stop, _) = tokio::sync::watch::channel(false);
    let limits = config.limits.clone();
    let shared = Arc::new(Shared { osts, peers, client_next: AtomicU32::new(1), stop, limits, accept: accept_stats });
    let s = shared.clone();
    let accept = spawn_accept(listener, shared.stop.subscribe(), SHUTDOWN_GRACE, policy, move |stream| {
        serve_connection(stream, s.clone())
    });
    info!(
        %address, osts = ?config.osts, connections_max, open_files_per_ost = budget.open_files_per_ost,
        descriptors, "OSS serving"
    );
    Ok(OssHandle { address, accept, shared, ost_threads })
}

fn ost_thread(mut ost: Ost<FileStore>, rx: mpsc::Receiver<OstInput>, peers: Peers, clock: std::time::Instant) {
    let now = || Instant(clock.elapsed().as_nanos() as u64);
    let index = ost.index().0;
    let mut bulk_shared_bytes = 0u64;
    loop {
        // The handled request's room in its connection's budget, given
        // back once its replies are queued: the reader then sees them.
        let mut handled: Option<InFlight> = None;
        let wait = match ost.poll_timeout() {
            Some(t) => StdDuration::from_nanos(t.0.saturating_sub(now().0)),
            None => StdDuration::from_secs(3600),
        };
        match rx.recv_timeout(wait) {
            Ok(OstInput::Message { client, message, in_flight }) => {
                if let ToOst::Write { data: Payload::Remote(span), .. } = &message {
                    bulk_shared_bytes += span.len();
                }
                ost.handle_message(now(), client, message);
                handled = in_flight;
            }
            Ok(OstInput::Destroy { object, in_flight }) => {
                if let Err(e) = ost.store_mut().destroy(object) {
                    warn!(ost = index, "destroying object {}: {e}", object.0);
                }
                handled = in_flight;
            }
            Ok(OstInput::Stats(reply)) => {
                let locks = ost.locks();
                let _ = reply.send(OstStats {
                    ost: index,
                    locks_granted: locks.granted_locks().count() as u64,
                    locks_waiting: locks.waiting_count() as u64,
                    locks: locks.counters_total(),
                    data: ost.counters(),
                    space: ost.store().space(),
                    bulk_shared_bytes,
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => ost.handle_timeout(now()),
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        // A cancel that must sync (the OST's sync_lock_cancel policy) waits
        // here, on the OST's thread, as Lustre's cancel thread waits in
        // tgt_sync: the object's writes reach the disk before the lock goes.
        while let Some(request) = ost.poll_sync() {
            if let Err(e) = ost.store_mut().sync(request.object) {
                warn!(ost = index, "syncing object {} on a lock cancel: {e}", request.object.0);
            }
            ost.handle_synced(now(), request.token);
        }
        // Queued, never waited for: a slow client slows nobody else.
        let peers = peers.lock().expect("peers lock");
        while let Some((client, message)) = ost.poll_transmit() {
            let queued = peers.get(&client.0).map(|outbox| outbox.push(Wire::ToClient { ost: index, message }));
            if !matches!(queued, Some(Ok(()))) {
                debug!(ost = index, client = client.0, "reply to a closed connection dropped");
            }
        }
        drop(handled);
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
    match handshake_within(&mut r, shared.limits.handshake_timeout).await {
        Ok(Role::Client) => {}
        Ok(role) => {
            outbox.finish(Some(Wire::Refused { reason: format!("an OSS takes client connections, not {role:?}") }));
            return;
        }
        Err(reason) => {
            outbox.finish(Some(Wire::Refused { reason }));
            return;
        }
    }
    let client = shared.client_next.fetch_add(1, Ordering::Relaxed);
    shared.peers.lock().expect("peers lock").insert(client, outbox.clone());
    let _ = outbox.push(Wire::Welcome { version: PROTOCOL_VERSION, client });
    debug!(client, "client connected");
    let mut stop = shared.stop.subscribe();
    let served = tokio::select! {
        biased;
        _ = stop.wait_for(|stopped| *stopped) => Err("the OSS is shutting down".to_string()),
        // The writer gave up (and said why, if it matters) or the peer is gone.
        _ = outbox.closed() => Ok(()),
        served = serve_messages(&mut r, client, &shared, &outbox, accepted.fds) => served,
    };
    shared.peers.lock().expect("peers lock").remove(&client);
    match served {
        Ok(()) => outbox.close("the connection is closed"),
        Err(reason) => {
            warn!(client, "closing connection: {reason}");
            outbox.finish(Some(Wire::Refused { reason }));
        }
    }
    debug!(client, "client disconnected");
}

/// [`handshake`] within `timeout`: a peer that sends nothing, or half a
/// `Hello`, is told why and closed.
pub(crate) async fn handshake_within<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    timeout: StdDuration,
) -> Result<Role, String> {
    match tokio::time::timeout(timeout, handshake(r)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no Hello within {timeout:?} (handshake timeout)")),
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

/// Read `Hello` and check it; the error is the reason told to the peer.
pub(crate) async fn handshake<R: tokio::io::AsyncRead + Unpin>(r: &mut R) -> Result<Role, String> {
    match read_frame(r).await {
        Ok(Some(Wire::Hello { magic, version, role })) => {
            if magic != MAGIC {
                return Err(format!("bad magic {magic:#x}: not a lanefs peer"));
            }
            if version != PROTOCOL_VERSION {
                return Err(format!(
                    "protocol version {version} is not supported; this server speaks version {PROTOCOL_VERSION}: run the same lanefs release on every node"
                ));
            }
            Ok(role)
        }
        Ok(Some(other)) => Err(format!("expected Hello first, got {}", variant(&other))),
        Ok(None) => Err("connection closed before Hello".into()),
        Err(e) => Err(format!("bad first frame: {e}")),
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
    client: u32,
    shared: &Shared,
    outbox: &Outbox,
    fds: Option<FdInbox>,
) -> Result<(), String> {
    let limits = &shared.limits;
    let budget = RequestBudget::new(limits.requests_in_flight_max, limits.request_bytes_in_flight_max);
    let mut arena: Option<Arc<MappedArena>> = None;
    loop {
        // A client that does not read its replies is not read either.
        outbox.below_soft().await;
        let Some(frame) = read_within(r, limits.idle_timeout).await? else { return Ok(()) };
        match frame {
            Wire::Ping => {
                let _ = outbox.push(Wire::Pong);
            }
            Wire::ToOst { ost, message: ToOst::Read { xid, len, .. } } if len > u64::from(BULK_BYTES_MAX) => {
                debug!(client, len, "a read larger than the bulk maximum refused");
                let reply = ToClient::ReadReply { xid, result: Err(IoError::Invalid) };
                let _ = outbox.push(Wire::ToClient { ost, message: reply });
            }
            Wire::ToOst { ost, message } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let in_flight = Some(budget.acquire(request_bytes(&message)).await);
                let _ = sender.send(OstInput::Message { client: ClientId(client), message, in_flight });
            }
            Wire::WriteShared { ost, xid, object, offset, bulk } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let mapped = arena.as_ref().ok_or("a shared-memory write before any arena was attached")?;
                let data = mapped.resolve(&bulk, u64::from(BULK_BYTES_MAX))?;
                let message = ToOst::Write { xid, object, offset, data: Payload::Remote(Box::new(data)) };
                // Its bytes stay in the client's memory: only the message counts.
                let in_flight = Some(budget.acquire(0).await);
                let _ = sender.send(OstInput::Message { client: ClientId(client), message, in_flight });
            }
            Wire::AttachArena { arena: id, frames } => {
                let fd = fds.as_ref().and_then(FdInbox::take_latest);
                let attached = match fd {
                    None => Err("no file descriptor came with it (shared memory needs a Unix socket)".to_string()),
                    Some(fd) => MappedArena::attach(fd, id, frames),
                };
                match attached {
                    Ok(mapped) => {
                        debug!(client, arena = id, frames, "page arena attached");
                        arena = Some(mapped);
                        let _ = outbox.push(Wire::ArenaAttached { arena: id });
                    }
                    Err(reason) => {
                        warn!(client, "page arena refused: {reason}");
                        let _ = outbox.push(Wire::ArenaRefused { arena: id, reason });
                    }
                }
            }
            Wire::Destroy { ost, object } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let in_flight = Some(budget.acquire(0).await);
                let _ = sender.send(OstInput::Destroy { object: ObjectId(object), in_flight });
            }
            Wire::StatsRequest { id } => {
                let mut osts = Vec::new();
                let mut indices: Vec<&u32> = shared.osts.keys().collect();
                indices.sort();
                for index in indices {
                    let (reply, answer) = oneshot::channel();
                    let _ = shared.osts[index].send(OstInput::Stats(reply));
                    if let Ok(stats) = answer.await {
                        osts.push(stats);
                    }
                }
                let _ = outbox.push(Wire::StatsReply { id, osts });
            }
            other => return Err(format!("an OSS does not take {} messages", variant(&other))),
        }
    }
}

pub(crate) fn variant(w: &Wire) -> &'static str {
    match w {
        Wire::Hello { .. } => "Hello",
        Wire::Welcome { .. } => "Welcome",
        Wire::Refused { .. } => "Refused",
        Wire::ToOst { .. } => "ToOst",
        Wire::ToClient { .. } => "ToClient",
        Wire::Destroy { .. } => "Destroy",
        Wire::Mds { .. } => "Mds",
        Wire::MdsReply { .. } => "MdsReply",
        Wire::StatsRequest { .. } => "StatsRequest",
        Wire::StatsReply { .. } => "StatsReply",
        Wire::AttachArena { .. } => "AttachArena",
        Wire::ArenaAttached { .. } => "ArenaAttached",
        Wire::ArenaRefused { .. } => "ArenaRefused",
        Wire::WriteShared { .. } => "WriteShared",
        Wire::Ping => "Ping",
        Wire::Pong => "Pong",
    }
}

/// Tell the MDS at `mds` that `address` serves `osts` (what `lanefs oss`
/// does at start). The registration lives as long as this process keeps
/// the connection; a task holds it open and pings it every
/// [`PING_INTERVAL_DEFAULT`], so that the MDS's idle timeout leaves it be.
pub async fn register_with_mds(mds: &Address, address: &Address, osts: &[u32]) -> Result<(), String> {
    let stream = crate::transport::connect(mds).await.map_err(|e| e.to_string())?;
    let (r, w) = tokio::io::split(stream);
    let mut r = BufReader::new(r);
    let outbox = Outbox::new(QueueLimits::default());
    spawn_writer(w, outbox.clone(), None);
    let role = Role::Oss { address: address.to_string(), osts: osts.to_vec() };
    let _ = outbox.push(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role });
    match read_frame(&mut r).await {
        Ok(Some(Wire::Welcome { .. })) => {}
        Ok(Some(Wire::Refused { reason })) => return Err(reason),
        other => return Err(format!("unexpected answer {other:?}")),
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
    tokio::spawn(async move {
        while let Ok(Some(_)) = read_frame(&mut r).await {}
        outbox.close("the MDS closed the registration");
    });
    Ok(())
}
