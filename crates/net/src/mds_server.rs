//! The MDS daemon: lanefs-mds's namespace behind the wire protocol, plus
//! the registry of which OSS serves which OST.
//!
//! Namespace requests are handled one at a time on the `Mds` (SQLite is
//! fast for this and a single writer keeps it simple); OSS registrations
//! are kept in memory, and an OSS registers again when it restarts.
//!
//! Bounds as the OSS's (see [`crate::limits`]): connections capped from the
//! descriptor limit, handshake and idle timeouts (a `Ping` is answered
//! `Pong`), a bounded outgoing queue per connection whose reader stops
//! while it is over its soft limit. Requests in flight are bounded by
//! construction: a connection's next request is read only once the last
//! one is answered. The database's directory is fenced by whoever opens
//! the database (`lanefs mds`, `LocalCluster`), before it is opened; the
//! fence comes in [`MdsOptions`] and is held as long as the MDS serves.

use crate::fence::Fence;
use crate::limits::{refusal_reason, DescriptorBudget, ServerLimits, ServerStats};
use crate::oss::{handshake_within, read_within, server_stats, variant, CloseOnDrop, SHUTDOWN_GRACE};
use crate::outbox::Outbox;
use crate::proto::{ClusterInfo, MdsAnswer, MdsCall, Role, Wire, PROTOCOL_VERSION};
use crate::transport::{spawn_accept, AcceptPolicy, AcceptStats, Accepted, Address, Listener};
use crate::writer::spawn_writer;
use lanefs_mds::Mds;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::BufReader;
use tracing::info;

/// How an MDS serves, beyond its database.
#[derive(Clone, Debug, Default)]
pub struct MdsOptions {
    pub limits: ServerLimits,
    /// The fence of the database's directory, held while the MDS serves; a
    /// stale Unix socket is removed only with one.
    pub fence: Option<Fence>,
}

struct Shared {
    /// `None` once the MDS has stopped (its database is closed then).
    mds: Mutex<Option<Mds>>,
    stop: tokio::sync::watch::Sender<bool>,
    ost_count: u32,
    /// OST index -> address of the OSS serving it.
    osts: Mutex<BTreeMap<u32, String>>,
    limits: ServerLimits,
    accept: Arc<AcceptStats>,
    /// Outgoing queue of every connection, by a number of its own.
    peers: Mutex<HashMap<u32, Arc<Outbox>>>,
    peer_next: AtomicU32,
    _fence: Option<Fence>,
}

pub struct MdsHandle {
    address: Address,
    accept: tokio::task::JoinHandle<()>,
    shared: Arc<Shared>,
}

impl MdsHandle {
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// Connections served and refused, and bytes queued to peers.
    pub fn stats(&self) -> ServerStats {
        server_stats(&self.shared.accept, &self.shared.peers)
    }

    /// Record that `address` serves `osts` (what an OSS's Hello does).
    pub fn register_oss(&self, address: &str, osts: &[u32]) {
        register(&self.shared, address, osts);
    }

    /// Stop serving and close the database (a restart can open it again).
    /// When this returns nobody can connect and no request is served.
    pub async fn shutdown(self) {
        let _ = self.shared.stop.send(true);
        let _ = self.accept.await;
        self.shared.mds.lock().expect("mds lock").take();
    }
}

fn register(shared: &Shared, address: &str, osts: &[u32]) {
    let mut map = shared.osts.lock().expect("registry lock");
    for ost in osts {
        map.insert(*ost, address.to_string());
    }
    info!(address, ?osts, "OSS registered");
}

pub async fn start(listen: &Address, mds: Mds, ost_count: u32) -> std::io::Result<MdsHandle> {
    start_with(listen, mds, ost_count, MdsOptions::default()).await
}

/// Serve `mds` on `listen` with `options`' limits and fence.
pub async fn start_with(listen: &Address, mds: Mds, ost_count: u32, options: MdsOptions) -> std::io::Result<MdsHandle> {
    let MdsOptions { limits, fence } = options;
    limits.validate().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let descriptors = limits.descriptors_or_raise();
    let listener = match &fence {
        Some(fence) => Listener::bind_fenced(listen, fence).await?,
        None => Listener::bind(listen).await?,
    };
    let address = listener.local_address()?;
    if let Some(fence) = &fence {
        fence.record_address(&address);
    }
    let budget = DescriptorBudget::mds(descriptors, listener.descriptors_per_connection());
    let connections_max = budget.connections_cap(limits.connections_max, "MDS");
    let accept_stats = Arc::new(AcceptStats::default());
    let policy = AcceptPolicy {
        connections_max,
        refusal: refusal_reason("MDS", connections_max, limits.connections_max.is_some(), descriptors),
        stats: accept_stats.clone(),
    };
    let (stop, _) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        mds: Mutex::new(Some(mds)),
        stop,
        ost_count,
        osts: Mutex::new(BTreeMap::new()),
        limits,
        accept: accept_stats,
        peers: Mutex::new(HashMap::new()),
        peer_next: AtomicU32::new(1),
        _fence: fence,
    });
    let s = shared.clone();
    let accept = spawn_accept(listener, shared.stop.subscribe(), SHUTDOWN_GRACE, policy, move |stream| {
        serve_connection(stream, s.clone())
    });
    info!(%address, connections_max, descriptors, "MDS serving");
    Ok(MdsHandle { address, accept, shared })
}

async fn serve_connection(accepted: Accepted, shared: Arc<Shared>) {
    let (r, w) = tokio::io::split(accepted.stream);
    let mut r = BufReader::new(r);
    let outbox = Outbox::new(shared.limits.queue.clone());
    let _close = CloseOnDrop(outbox.clone());
    spawn_writer(w, outbox.clone(), None);
    match handshake_within(&mut r, shared.limits.handshake_timeout).await {
        Ok(Role::Client) => {}
        Ok(Role::Oss { address, osts }) => register(&shared, &address, &osts),
        Err(reason) => {
            outbox.finish(Some(Wire::Refused { reason }));
            return;
        }
    }
    let peer = shared.peer_next.fetch_add(1, Ordering::Relaxed);
    shared.peers.lock().expect("peers lock").insert(peer, outbox.clone());
    let _ = outbox.push(Wire::Welcome { version: PROTOCOL_VERSION, client: 0 });
    let ended = serve_requests(&mut r, &shared, &outbox).await;
    shared.peers.lock().expect("peers lock").remove(&peer);
    match ended {
        Ok(()) => outbox.close("the peer closed the connection"),
        Err(reason) => outbox.finish(Some(Wire::Refused { reason })),
    }
}

/// Answer requests until the peer closes (`Ok`) or must be told why not.
async fn serve_requests<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    shared: &Arc<Shared>,
    outbox: &Outbox,
) -> Result<(), String> {
    let mut stop = shared.stop.subscribe();
    loop {
        let read = async {
            outbox.below_soft().await;
            read_within(r, shared.limits.idle_timeout).await
        };
        let read = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return Err("the MDS is shutting down".into()),
            reason = outbox.closed() => return Err(reason),
            read = read => read,
        };
        let Some(frame) = read? else { return Ok(()) };
        let (id, answer) = match frame {
            Wire::Mds { id, call: MdsCall::Namespace(request) } => {
                let shared = shared.clone();
                let reply = tokio::task::spawn_blocking(move || {
                    shared.mds.lock().expect("mds lock").as_mut().map(|mds| mds.handle(request))
                })
                .await;
                match reply {
                    Ok(Some(reply)) => (id, MdsAnswer::Namespace(reply)),
                    Ok(None) => (id, MdsAnswer::Error("the MDS is shutting down".into())),
                    Err(e) => (id, MdsAnswer::Error(format!("MDS request failed: {e}"))),
                }
            }
            Wire::Mds { id, call: MdsCall::ClusterInfo } => {
                let osts = shared.osts.lock().expect("registry lock").iter().map(|(o, a)| (*o, a.clone())).collect();
                (id, MdsAnswer::ClusterInfo(ClusterInfo { ost_count: shared.ost_count, osts }))
            }
            Wire::Ping => {
                let _ = outbox.push(Wire::Pong);
                continue;
            }
            other => return Err(format!("an MDS does not take {} messages", variant(&other))),
        };
        let _ = outbox.push(Wire::MdsReply { id, answer });
    }
}
