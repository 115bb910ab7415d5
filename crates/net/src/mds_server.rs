//! The MDS daemon: lanefs-mds's namespace behind the wire protocol, plus
//! the registry of which OSS serves which OST.
//!
//! Namespace requests are handled one at a time on the `Mds` (SQLite is
//! fast for this and a single writer keeps it simple); OSS registrations
//! are kept in memory, and an OSS registers again when it restarts.
//!
//! What a peer may send: any frame; a malformed one, or one an MDS does not
//! take, closes the connection with the reason. `Mds::handle` checks every
//! field of a namespace request and answers a bad one with an error. Should
//! it panic anyway, the caller is answered with an error and the MDS serves
//! on: the request's transaction was rolled back, and the `Mds` holds no
//! other state.

use crate::codec::read_frame;
use crate::oss::{handshake, variant, SHUTDOWN_GRACE};
use crate::proto::{ClusterInfo, MdsAnswer, MdsCall, Role, Wire, PROTOCOL_VERSION};
use crate::transport::{spawn_accept, Accepted, Address, Listener};
use crate::writer::spawn_writer;
use lanefs_mds::Mds;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::io::BufReader;
use tracing::{error, info};

struct Shared {
    /// `None` once the MDS has stopped (its database is closed then).
    mds: Mutex<Option<Mds>>,
    stop: tokio::sync::watch::Sender<bool>,
    ost_count: u32,
    /// OST index -> address of the OSS serving it.
    osts: Mutex<BTreeMap<u32, String>>,
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

    /// Record that `address` serves `osts` (what an OSS's Hello does).
    pub fn register_oss(&self, address: &str, osts: &[u32]) {
        register(&self.shared, address, osts);
    }

    /// Stop serving and close the database (a restart can open it again).
    /// When this returns nobody can connect and no request is served.
    pub async fn shutdown(self) {
        let _ = self.shared.stop.send(true);
        let _ = self.accept.await;
        self.shared.mds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
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
    let listener = Listener::bind(listen).await?;
    let address = listener.local_address()?;
    let (stop, _) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared { mds: Mutex::new(Some(mds)), stop, ost_count, osts: Mutex::new(BTreeMap::new()) });
    let s = shared.clone();
    let accept = spawn_accept(listener, shared.stop.subscribe(), SHUTDOWN_GRACE, move |stream| {
        serve_connection(stream, s.clone())
    });
    info!(%address, "MDS serving");
    Ok(MdsHandle { address, accept, shared })
}

async fn serve_connection(accepted: Accepted, shared: Arc<Shared>) {
    let (r, w) = tokio::io::split(accepted.stream);
    let mut r = BufReader::new(r);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_writer(w, rx, None);
    match handshake(&mut r).await {
        Ok(Role::Client) => {}
        Ok(Role::Oss { address, osts }) => register(&shared, &address, &osts),
        Err(reason) => {
            let _ = tx.send(Wire::Refused { reason });
            return;
        }
    }
    let _ = tx.send(Wire::Welcome { version: PROTOCOL_VERSION, client: 0 });
    let mut stop = shared.stop.subscribe();
    loop {
        let read = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => {
                let _ = tx.send(Wire::Refused { reason: "the MDS is shutting down".into() });
                return;
            }
            read = read_frame(&mut r) => read,
        };
        let frame = match read {
            Ok(Some(frame)) => frame,
            Ok(None) => return,
            Err(e) => {
                let _ = tx.send(Wire::Refused { reason: e.to_string() });
                return;
            }
        };
        let (id, answer) = match frame {
            Wire::Mds { id, call: MdsCall::Namespace(request) } => {
                let shared = shared.clone();
                let reply = tokio::task::spawn_blocking(move || {
                    let mut mds = shared.mds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    mds.as_mut().map(|mds| mds.handle(request))
                })
                .await;
                match reply {
                    Ok(Some(reply)) => (id, MdsAnswer::Namespace(reply)),
                    Ok(None) => (id, MdsAnswer::Error("the MDS is shutting down".into())),
                    Err(e) => {
                        error!("an MDS request failed: {e}");
                        (id, MdsAnswer::Error(format!("the MDS failed on this request ({e}); nothing was changed")))
                    }
                }
            }
            Wire::Mds { id, call: MdsCall::ClusterInfo } => {
                let osts = shared.osts.lock().expect("registry lock").iter().map(|(o, a)| (*o, a.clone())).collect();
                (id, MdsAnswer::ClusterInfo(ClusterInfo { ost_count: shared.ost_count, osts }))
            }
            other => {
                let _ = tx.send(Wire::Refused { reason: format!("an MDS does not take {} messages", variant(&other)) });
                return;
            }
        };
        let _ = tx.send(Wire::MdsReply { id, answer });
    }
}
