//! The MDS daemon: lanefs-mds's namespace behind the wire protocol, the
//! registry of which OSS serves which OST, and the object lifecycle on the
//! OSSes (see [`crate::mds_objects`]).
//!
//! Namespace requests are handled one at a time on the `Mds` (SQLite is
//! fast for this and a single writer keeps it simple), each for the
//! credentials its call carries; OSS registrations are kept in memory, and
//! an OSS registers again when it restarts. Only a peer with the cluster's
//! server key (or, on a Unix socket, the MDS's own user) may register an
//! OSS: see [`crate::auth`]. A create that finds an OST's pool of
//! precreated objects empty waits for it to be refilled, then runs again;
//! creates and removals wake the workers that refill pools and destroy
//! removed files' objects.

use crate::auth::ClusterKey;
use crate::codec::read_frame;
use crate::mds_objects::{Lifecycle, MdsCell, OBJECTS_WAIT};
use crate::oss::{handshake, variant, SHUTDOWN_GRACE};
use crate::proto::{ClusterInfo, MdsAnswer, MdsCall, Role, Wire, PROTOCOL_VERSION};
use crate::transport::{spawn_accept, Accepted, Address, Listener};
use crate::writer::spawn_writer;
use lanefs_mds::{Credentials, Mds, MdsError, MdsReply, MdsRequest};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::BufReader;

struct Shared {
    /// `None` once the MDS has stopped (its database is closed then).
    mds: MdsCell,
    stop: tokio::sync::watch::Sender<bool>,
    ost_count: u32,
    /// Which OSS serves which OST, and the work on their objects.
    objects: Arc<Lifecycle>,
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

    /// Record that `address` serves `osts` (what an OSS's Hello does); the
    /// MDS connects to it to precreate objects and destroy removed ones.
    pub fn register_oss(&self, address: &str, osts: &[u32]) {
        self.shared.objects.register(address, osts);
    }

    /// Waits (at most `timeout`) until every registered OST has precreated
    /// objects or its OSS is known to be down.
    pub async fn wait_for_objects(&self, timeout: Duration) {
        self.shared.objects.wait_ready(timeout).await;
    }

    /// Stop serving and close the database (a restart can open it again).
    /// When this returns nobody can connect, no request is served and no
    /// OSS is called.
    pub async fn shutdown(self) {
        let _ = self.shared.stop.send(true);
        let _ = self.accept.await;
        self.shared.objects.join().await;
        self.shared.mds.lock().expect("mds lock").take();
    }
}

/// Serve `mds` on `listen`; on TCP, with the cluster's server key `key`
/// (also what the MDS shows the OSSes it calls).
pub async fn start(listen: &Address, key: Option<&ClusterKey>, mds: Mds, ost_count: u32) -> std::io::Result<MdsHandle> {
    let listener = Listener::bind(listen, key).await?;
    let address = listener.local_address()?;
    let (stop, _) = tokio::sync::watch::channel(false);
    let mds: MdsCell = Arc::new(Mutex::new(Some(mds)));
    let objects = Lifecycle::new(mds.clone(), tokio::runtime::Handle::current(), stop.subscribe(), key.cloned());
    let shared = Arc::new(Shared { mds, stop, ost_count, objects });
    let s = shared.clone();
    let accept = spawn_accept(listener, shared.stop.subscribe(), SHUTDOWN_GRACE, move |stream| {
        serve_connection(stream, s.clone())
    });
    tracing::info!(%address, "MDS serving");
    Ok(MdsHandle { address, accept, shared })
}

async fn serve_connection(accepted: Accepted, shared: Arc<Shared>) {
    let (r, w) = tokio::io::split(accepted.stream);
    let mut r = BufReader::new(r);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_writer(w, rx, None);
    match handshake(&mut r, accepted.peer).await {
        Ok(Role::Client) => {}
        Ok(Role::Oss { address, osts }) => {
            if let Some(ost) = osts.iter().find(|&&ost| ost >= shared.ost_count) {
                let reason = format!(
                    "OST index {ost} is out of range: this file system has {} OSTs (0 to {})",
                    shared.ost_count,
                    shared.ost_count - 1
                );
                let _ = tx.send(Wire::Refused { reason });
                return;
            }
            shared.objects.register(&address, &osts)
        }
        Ok(Role::Mds) => {
            let _ =
                tx.send(Wire::Refused { reason: "an MDS takes client and OSS connections, not another MDS".into() });
            return;
        }
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
            Wire::Mds { id, call: MdsCall::Namespace { credentials, request } } => {
                (id, namespace(&shared, credentials, request).await)
            }
            Wire::Mds { id, call: MdsCall::ClusterInfo } => {
                let osts = shared.objects.addresses();
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

/// One namespace request. A create that finds a pool empty runs again once
/// the pool is refilled, or fails saying why it was not.
async fn namespace(shared: &Shared, credentials: Credentials, request: MdsRequest) -> MdsAnswer {
    let deadline = tokio::time::Instant::now() + OBJECTS_WAIT;
    let touches_objects =
        matches!(request, MdsRequest::Create { .. } | MdsRequest::Unlink { .. } | MdsRequest::Rename { .. });
    loop {
        let mds = shared.mds.clone();
        let (credentials, request) = (credentials.clone(), request.clone());
        let reply = tokio::task::spawn_blocking(move || {
            mds.lock().expect("mds lock").as_mut().map(|mds| mds.handle(&credentials, request))
        })
        .await;
        let reply = match reply {
            Ok(Some(reply)) => reply,
            Ok(None) => return MdsAnswer::Error("the MDS is shutting down".into()),
            Err(e) => return MdsAnswer::Error(format!("MDS request failed: {e}")),
        };
        if touches_objects {
            shared.objects.wake();
        }
        let MdsReply::Error(MdsError::NoObjects { ost, .. }) = reply else {
            return MdsAnswer::Namespace(reply);
        };
        if let Err(reason) = shared.objects.wait_for_objects(ost, deadline).await {
            return MdsAnswer::Namespace(MdsReply::Error(MdsError::NoObjects { ost, reason }));
        }
    }
}
