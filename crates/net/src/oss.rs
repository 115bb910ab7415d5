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

use crate::auth::{claim_allowed, Credentials, Peer};
use crate::codec::{read_frame, CodecError};
use crate::filestore::FileStore;
use crate::proto::{OstStats, Role, Wire, MAGIC, PROTOCOL_VERSION};
use crate::shm::{FdInbox, MappedArena};
use crate::transport::{spawn_accept, Accepted, Address, Listener};
use crate::writer::spawn_writer;
use lanefs_core::msg::{Payload, ToOst};
use lanefs_core::ost::{Ost, OstConfig};
use lanefs_core::{ClientId, Instant, ObjectId, OstIndex};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration as StdDuration;
use tokio::io::BufReader;
use tokio::sync::{mpsc::UnboundedSender, oneshot};
use tracing::{debug, info, warn};

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

/// Start serving `config.osts` on `listen` (port 0 picks a free port); on
/// TCP, with the cluster's server key `key`.
pub async fn start(listen: &Address, key: Option<&Credentials>, config: OssConfig) -> std::io::Result<OssHandle> {
    let listener = Listener::bind(listen, key).await?;
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
    loop {
        let wait = match ost.poll_timeout() {
            Some(t) => StdDuration::from_nanos(t.0.saturating_sub(now().0)),
            None => StdDuration::from_secs(3600),
        };
        match rx.recv_timeout(wait) {
            Ok(OstInput::Message { client, message }) => {
                if let ToOst::Write { data: Payload::Remote(span), .. } = &message {
                    bulk_shared_bytes += span.len();
                }
                ost.handle_message(now(), client, message)
            }
            Ok(OstInput::Destroy { object }) => {
                if let Err(e) = ost.store_mut().destroy(object) {
                    warn!(ost = index, "destroying object {}: {e}", object.0);
                }
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
        let peers = peers.lock().expect("peers lock");
        while let Some((client, message)) = ost.poll_transmit() {
            match peers.get(&client.0) {
                Some(tx) => {
                    let _ = tx.send(Wire::ToClient { ost: index, message });
                }
                None => debug!(ost = index, client = client.0, "reply to a closed connection dropped"),
            }
        }
    }
}

async fn serve_connection(accepted: Accepted, shared: Arc<Shared>) {
    let (r, w) = tokio::io::split(accepted.stream);
    let mut r = BufReader::with_capacity(1 << 18, r);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_writer(w, rx, None);
    match handshake(&mut r, accepted.peer).await {
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

/// Read `Hello` and check it, and the role it claims against what the
/// peer's key or uid allows; the error is the reason told to the peer.
pub(crate) async fn handshake<R: tokio::io::AsyncRead + Unpin>(r: &mut R, peer: Peer) -> Result<Role, String> {
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
            claim_allowed(peer, &role)?;
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
/// does at start), with the cluster's server key `key` if the MDS is on
/// TCP. The registration lives as long as this process keeps the
/// connection; a task holds it open.
pub async fn register_with_mds(
    mds: &Address,
    key: Option<&Credentials>,
    address: &Address,
    osts: &[u32],
) -> Result<(), String> {
    let stream = crate::transport::connect(mds, key).await.map_err(|e| crate::auth::describe(&e, key))?;
    let (r, w) = tokio::io::split(stream);
    let mut r = BufReader::new(r);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_writer(w, rx, None);
    let role = Role::Oss { address: address.to_string(), osts: osts.to_vec() };
    let _ = tx.send(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role });
    match read_frame(&mut r).await {
        Ok(Some(Wire::Welcome { .. })) => {}
        Ok(Some(Wire::Refused { reason })) => return Err(reason),
        Err(CodecError::Io(e)) => return Err(crate::auth::describe(&e, key)),
        other => return Err(format!("unexpected answer {other:?}")),
    }
    tokio::spawn(async move {
        let _keep = tx;
        while let Ok(Some(_)) = read_frame(&mut r).await {}
    });
    Ok(())
}
