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

use crate::codec::{read_frame, CodecError};
use crate::filestore::FileStore;
use crate::proto::{OstStats, Role, Wire, MAGIC, PROTOCOL_VERSION};
use crate::shm::{FdInbox, MappedArena};
use crate::transport::{spawn_accept, Accepted, Address, Listener};
use crate::writer::spawn_writer;
use lanefs_core::msg::{Payload, ToClient, ToOst};
use lanefs_core::ost::{Ost, OstConfig};
use lanefs_core::{ClientId, Instant, ObjectId, OstIndex};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration as StdDuration;
use tokio::io::BufReader;
use tokio::sync::{mpsc::UnboundedSender, oneshot};
use tracing::{debug, error, info, warn};

#[derive(Clone, Debug)]
pub struct OssConfig {
    /// Each OST keeps its objects in `data_dir/OSTxxxx/`.
    pub data_dir: PathBuf,
    pub osts: Vec<u32>,
    pub ost: OstConfig,
}

enum OstInput {
    Message { client: ClientId, message: ToOst },
    Destroy { object: ObjectId },
    Stats(oneshot::Sender<OstStats>),
}

/// How long a stopping server lets its connections close by themselves
/// (telling their peers why) before it aborts them.
pub(crate) const SHUTDOWN_GRACE: StdDuration = StdDuration::from_secs(1);

type Peers = Arc<Mutex<HashMap<u32, UnboundedSender<Wire>>>>;

struct Shared {
    osts: HashMap<u32, mpsc::Sender<OstInput>>,
    /// Outgoing channel of every connected client, by its identity.
    peers: Peers,
    client_next: AtomicU32,
    /// Set to true when the OSS stops: every connection closes.
    stop: tokio::sync::watch::Sender<bool>,
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

/// Start serving `config.osts` on `listen` (port 0 picks a free port).
pub async fn start(listen: &Address, config: OssConfig) -> std::io::Result<OssHandle> {
    let listener = Listener::bind(listen).await?;
    let address = listener.local_address()?;
    let clock = std::time::Instant::now();
    let peers: Peers = Arc::new(Mutex::new(HashMap::new()));
    let mut osts = HashMap::new();
    let mut ost_threads = Vec::new();
    for &index in &config.osts {
        let dir = config.data_dir.join(format!("OST{index:04x}"));
        let store = FileStore::open(&dir)?;
        let (tx, rx) = mpsc::channel();
        let ost = Ost::new(OstIndex(index), config.ost.clone(), store);
        let peers = peers.clone();
        ost_threads.push(
            std::thread::Builder::new().name(format!("ost{index}")).spawn(move || ost_thread(ost, rx, peers, clock))?,
        );
        osts.insert(index, tx);
    }
    let (stop, _) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared { osts, peers, client_next: AtomicU32::new(1), stop });
    let s = shared.clone();
    let accept = spawn_accept(listener, shared.stop.subscribe(), SHUTDOWN_GRACE, move |stream| {
        serve_connection(stream, s.clone())
    });
    info!(%address, osts = ?config.osts, "OSS serving");
    Ok(OssHandle { address, accept, shared, ost_threads })
}

fn ost_thread(mut ost: Ost<FileStore>, rx: mpsc::Receiver<OstInput>, peers: Peers, clock: std::time::Instant) {
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
        let input = match rx.recv_timeout(wait) {
            Ok(input) => Some(input),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        if failed {
            refuse_input(index, input, &peers);
            continue;
        }
        let kind = input_kind(&input);
        let refusal = match &input {
            Some(OstInput::Message { client, message }) => message.failed_reply().map(|reply| (*client, reply)),
            _ => None,
        };
        let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            serve_input(&mut ost, input, now, &mut bulk_shared_bytes)
        }));
        let peers = peers.lock().expect("peers lock");
        // What the OST answered before any failure still goes out.
        while let Some((client, message)) = ost.poll_transmit() {
            match peers.get(&client.0) {
                Some(tx) => {
                    let _ = tx.send(Wire::ToClient { ost: index, message });
                }
                None => debug!(ost = index, client = client.0, "reply to a closed connection dropped"),
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
                if let Some(tx) = peers.get(&client.0) {
                    let _ = tx.send(Wire::ToClient { ost: index, message: reply });
                }
            }
            // Whatever waits on the OST (a lock, a sync, a glimpse) fails.
            for tx in peers.values() {
                let _ = tx.send(Wire::ToClient { ost: index, message: ToClient::Failed });
            }
        }
    }
}

/// Handle one input (a message, a timeout when `None`), then do the syncs
/// it asked for.
fn serve_input(
    ost: &mut Ost<FileStore>,
    input: Option<OstInput>,
    now: impl Fn() -> Instant,
    bulk_shared_bytes: &mut u64,
) {
    let index = ost.index().0;
    match input {
        Some(OstInput::Message { client, message }) => {
            #[cfg(test)]
            tests::panic_hook(&message);
            if let ToOst::Write { data: Payload::Remote(span), .. } = &message {
                *bulk_shared_bytes += span.len();
            }
            ost.handle_message(now(), client, message)
        }
        Some(OstInput::Destroy { object }) => {
            if let Err(e) = ost.store_mut().destroy(object) {
                warn!(ost = index, "destroying object {}: {e}", object.0);
            }
        }
        Some(OstInput::Stats(reply)) => {
            let locks = ost.locks();
            let _ = reply.send(OstStats {
                ost: index,
                locks_granted: locks.granted_locks().count() as u64,
                locks_waiting: locks.waiting_count() as u64,
                locks: locks.counters_total(),
                data: ost.counters(),
                space: ost.store().space(),
                bulk_shared_bytes: *bulk_shared_bytes,
            });
        }
        None => ost.handle_timeout(now()),
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
}

/// An OST out of service answers each request with [`IoError::Failed`]
/// (statistics requests go unanswered, and their callers skip it).
///
/// [`IoError::Failed`]: lanefs_core::msg::IoError::Failed
fn refuse_input(index: u32, input: Option<OstInput>, peers: &Peers) {
    let Some(OstInput::Message { client, message }) = input else { return };
    debug!(ost = index, client = client.0, kind = message.kind(), "refused: the OST is out of service");
    let Some(reply) = message.failed_reply() else { return };
    if let Some(tx) = peers.lock().expect("peers lock").get(&client.0) {
        let _ = tx.send(Wire::ToClient { ost: index, message: reply });
    }
}

fn input_kind(input: &Option<OstInput>) -> &'static str {
    match input {
        Some(OstInput::Message { message, .. }) => message.kind(),
        Some(OstInput::Destroy { .. }) => "Destroy",
        Some(OstInput::Stats(_)) => "Stats",
        None => "timeout",
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    match panic.downcast_ref::<&str>() {
        Some(message) => message,
        None => panic.downcast_ref::<String>().map_or("a panic without a message", String::as_str),
    }
}

async fn serve_connection(accepted: Accepted, shared: Arc<Shared>) {
    let (r, w) = tokio::io::split(accepted.stream);
    let mut r = BufReader::with_capacity(1 << 18, r);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_writer(w, rx, None);
    match handshake(&mut r).await {
        Ok(Role::Client) => {}
        Ok(role) => {
            let _ = tx.send(Wire::Refused { reason: format!("an OSS takes client connections, not {role:?}") });
            return;
        }
        Err(reason) => {
            let _ = tx.send(Wire::Refused { reason });
            return;
        }
    }
    let client = shared.client_next.fetch_add(1, Ordering::Relaxed);
    shared.peers.lock().expect("peers lock").insert(client, tx.clone());
    let _ = tx.send(Wire::Welcome { version: PROTOCOL_VERSION, client });
    debug!(client, "client connected");
    let mut stop = shared.stop.subscribe();
    let served = tokio::select! {
        biased;
        _ = stop.wait_for(|stopped| *stopped) => Err("the OSS is shutting down".to_string()),
        served = serve_messages(&mut r, client, &shared, &tx, accepted.fds) => served,
    };
    if let Err(reason) = served {
        warn!(client, "closing connection: {reason}");
        let _ = tx.send(Wire::Refused { reason });
    }
    shared.peers.lock().expect("peers lock").remove(&client);
    debug!(client, "client disconnected");
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

async fn serve_messages<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    client: u32,
    shared: &Shared,
    tx: &UnboundedSender<Wire>,
    fds: Option<FdInbox>,
) -> Result<(), String> {
    let mut arena: Option<Arc<MappedArena>> = None;
    loop {
        let frame = match read_frame(r).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(()),
            Err(CodecError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        match frame {
            Wire::ToOst { ost, message } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let _ = sender.send(OstInput::Message { client: ClientId(client), message });
            }
            Wire::WriteShared { ost, xid, object, offset, bulk } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let mapped = arena.as_ref().ok_or("a shared-memory write before any arena was attached")?;
                let data = mapped.resolve(&bulk, u64::from(crate::codec::BULK_BYTES_MAX))?;
                let message = ToOst::Write { xid, object, offset, data: Payload::Remote(Box::new(data)) };
                let _ = sender.send(OstInput::Message { client: ClientId(client), message });
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
                        let _ = tx.send(Wire::ArenaAttached { arena: id });
                    }
                    Err(reason) => {
                        warn!(client, "page arena refused: {reason}");
                        let _ = tx.send(Wire::ArenaRefused { arena: id, reason });
                    }
                }
            }
            Wire::Destroy { ost, object } => {
                let sender = shared.osts.get(&ost).ok_or_else(|| format!("this OSS does not serve OST index {ost}"))?;
                let _ = sender.send(OstInput::Destroy { object: ObjectId(object) });
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
                let _ = tx.send(Wire::StatsReply { id, osts });
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
    }
}

/// Tell the MDS at `mds` that `address` serves `osts` (what `lanefs oss`
/// does at start). The registration lives as long as this process keeps
/// the connection; a task holds it open.
pub async fn register_with_mds(mds: &Address, address: &Address, osts: &[u32]) -> Result<(), String> {
    let stream = crate::transport::connect(mds).await.map_err(|e| e.to_string())?;
    let (r, w) = tokio::io::split(stream);
    let mut r = BufReader::new(r);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_writer(w, rx, None);
    let role = Role::Oss { address: address.to_string(), osts: osts.to_vec() };
    let _ = tx.send(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role });
    match read_frame(&mut r).await {
        Ok(Some(Wire::Welcome { .. })) => {}
        Ok(Some(Wire::Refused { reason })) => return Err(reason),
        other => return Err(format!("unexpected answer {other:?}")),
    }
    tokio::spawn(async move {
        let _keep = tx;
        while let Ok(Some(_)) = read_frame(&mut r).await {}
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::client::{Client, ClientOptions};
    use crate::cluster::{LocalCluster, LocalClusterConfig};
    use lanefs_core::layout::Layout;
    use lanefs_core::msg::ToOst;
    use lanefs_core::{ObjectId, ObjectKey, OstIndex};
    use std::time::Duration;

    /// Every message naming this object panics its OST's service thread:
    /// a stand-in for a bug in the OST, so that what follows one is tested.
    const PANIC_OBJECT: u64 = 0x7a11_dead_0000;

    pub(super) fn panic_hook(message: &ToOst) {
        let object = match message {
            ToOst::Enqueue { object, .. }
            | ToOst::Write { object, .. }
            | ToOst::Read { object, .. }
            | ToOst::Punch { object, .. }
            | ToOst::Getattr { object, .. }
            | ToOst::Sync { object, .. } => *object,
            ToOst::Connect | ToOst::Cancel { .. } | ToOst::GlimpseReply { .. } => return,
        };
        if object.0 == PANIC_OBJECT {
            panic!("failure injected on object {PANIC_OBJECT:#x}");
        }
    }

    fn file(client: &Client, ost: u32, object: u64) -> crate::client::File {
        let layout = Layout::new(1 << 20, vec![ObjectKey { ost: OstIndex(ost), object: ObjectId(object) }]).unwrap();
        client.open_layout("/f", layout).unwrap()
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
            let client = Client::connect(&cluster.mds_address(), ClientOptions::default()).unwrap();
            let before = file(&client, 0, 1000);
            client.pwrite(&before, 0, b"before").unwrap();
            client.fsync(&before).unwrap();
            let failing = file(&client, 0, PANIC_OBJECT);
            let error = client.pread(&failing, 0, 10).unwrap_err().to_string();
            assert!(error.contains("restart its OSS"), "{error}");
            // Every later request to that OST fails, from any client.
            let other = Client::connect(&cluster.mds_address(), ClientOptions::default()).unwrap();
            let error = other.pread(&file(&other, 0, 1000), 0, 6).unwrap_err().to_string();
            assert!(error.contains("restart its OSS"), "{error}");
            let error = client.pwrite(&before, 0, b"after").unwrap_err().to_string();
            assert!(error.contains("restart its OSS"), "{error}");
            // The other OST of the OSS serves on.
            let fine = file(&other, 1, 1000);
            other.pwrite(&fine, 0, b"fine").unwrap();
            other.fsync(&fine).unwrap();
            assert_eq!(client.pread(&file(&client, 1, 1000), 0, 4).unwrap(), b"fine");
            let _ = done.send(());
        });
        finished.recv_timeout(Duration::from_secs(60)).expect("every call answered within a minute");
    }
}
