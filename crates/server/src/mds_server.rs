//! The MDS daemon: lanefs-mds's namespace behind the wire protocol, the
//! registry of which OSS serves which OST, and the object lifecycle on the
//! OSSes (see [`crate::mds_objects`]).
//!
//! Namespace requests are handled one at a time on the `Mds` (SQLite is
//! fast for this and a single writer keeps it simple), each for the
//! credentials its call carries; OSS registrations are kept in memory, and
//! an OSS registers again when it restarts. Only a peer with the cluster's
//! server key (or, on a Unix socket, the MDS's own user) may register an
//! OSS: see [`lanefs_net::auth`]. A node's requests are served as the
//! credentials they carry (uid 0 of a client key squashed, as
//! [`MdsOptions::key_root_squash`] says); a local user's only as itself
//! ([`lanefs_net::auth::served_credentials`]), by path only (not naming an
//! inode by fid), and a local user may not record open files nor take
//! file locks, which are a mount's to do. As Lustre's MGS, the MDS keeps
//! one live OSS per OST index (`register`): an index whose holder's
//! connection lives and answers a ping within
//! [`REGISTRATION_PROBE_TIMEOUT`] is refused to a second OSS; a holder
//! whose connection ended, or that does not answer, loses it to the next
//! OSS that asks. An OSS's address is parsed as a client parses it before
//! it is stored, so that no registration can hand clients an address they
//! cannot use. The registry holds at most one entry per OST index (indices
//! past the file system's count are refused). A create that finds an OST's
//! pool of precreated objects empty waits for it to be refilled, then runs
//! again; creates and removals wake the workers that refill pools and
//! destroy removed files' objects.
//!
//! File locks (`fcntl`, `flock`) are granted here from a
//! [`FlockTable`], as Lustre's MDT grants flock locks: a request that must
//! wait is answered later, when the lock is granted (to whichever
//! connection asked) or cancelled, so it holds no connection up; a
//! connection that ends drops its locks and waiters, as an eviction does.
//!
//! Bounds as the OSS's (see [`lanefs_net::limits`]): connections capped from the
//! descriptor limit, handshake and idle timeouts (a `Ping` is answered
//! `Pong`), a bounded outgoing queue per connection whose reader stops
//! while it is over its soft limit. Requests in flight are bounded by
//! construction: a connection's next request is read only once the last
//! one is answered, but for waiting lock requests, which the lock table
//! bounds ([`lanefs_proto::flock::WAITERS_MAX`], and per uid and per
//! client). The database's directory
//! is fenced by whoever opens the database (`lanefs mds`, `LocalCluster`),
//! before it is opened; the fence comes in [`MdsOptions`] and is held as
//! long as the MDS serves.
//!
//! Files clients keep open ([`lanefs_mds::opens`]): a mount says which it
//! opens and closes, and the destroyer passes over the queued objects of a
//! removed file while it is open anywhere.
//!
//! After a restart (a database an earlier MDS served) the MDS keeps a
//! recovery grace ([`MdsOptions::recovery_grace`]): only replayed locks
//! are granted (other lock requests wait for its end) and nothing is
//! destroyed, while clients reconnect and tell it again of the locks they
//! hold and the files they keep open. A replayed lock is taken only with
//! the seal the MDS gave with its grant ([`crate::flock_seal`]); one
//! without is refused, and said at `warn`, so that no client can replay a
//! lock it was never granted and take it from its holder. The grace ends
//! early once every client that held something before the restart has
//! replayed (`MdsCall::ReplayDone`), and is skipped when none did: the
//! MDS keeps their list in its data directory ([`crate::mds_clients`]).
//!
//! What a peer may send: any frame; a malformed one, or one an MDS does not
//! take, closes the connection with the reason. `Mds::handle` checks every
//! field of a namespace request and answers a bad one with an error. Should
//! it panic anyway, the caller is answered with an error and the MDS serves
//! on: the request's transaction was rolled back, and the `Mds` holds no
//! other state.

use crate::flock_seal::Sealer;
use crate::mds_clients::{KnownClients, Replayed};
use crate::mds_objects::{Holder, Lifecycle, MdsCell, OBJECTS_WAIT};
use crate::oss::{read_within, server_stats, CloseOnDrop, SHUTDOWN_GRACE};
use crate::refusal_backoff::RefusalBackoff;
use lanefs_mds::Mds;
use lanefs_net::auth::{served_credentials, ClusterKey, KeyRootSquash, Peer};
use lanefs_net::fence::Fence;
use lanefs_net::limits::{
    refusal_reason, DescriptorBudget, ServerLimits, ServerStats, UserConnections, HANDSHAKES_PER_SOURCE_MAX,
};
use lanefs_net::outbox::Outbox;
use lanefs_net::transport::{spawn_accept, AcceptPolicy, AcceptStats, Accepted, Address, Listener};
use lanefs_net::writer::spawn_writer;
use lanefs_proto::flock::{FlockAnswer, FlockOwner, FlockRequest};
use lanefs_proto::flock::{FlockTable, SetOutcome, Ticket};
use lanefs_proto::wire::FlockCall;
use lanefs_proto::wire::USER_NOT_A_NODE;
use lanefs_proto::wire::{variant, ClusterInfo, MdsAnswer, MdsCall, MdsRefusal, Role, Wire, PROTOCOL_VERSION};
use lanefs_proto::{Credentials, MdsError, MdsReply, MdsRequest};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::BufReader;
use tracing::{error, info, warn};

/// How an MDS serves, beyond its database.
#[derive(Clone, Debug, Default)]
pub struct MdsOptions {
    pub limits: ServerLimits,
    /// The fence of the database's directory, held while the MDS serves; a
    /// stale Unix socket is removed only with one.
    pub fence: Option<Fence>,
    /// After a restart (a database an earlier MDS served), how long only
    /// replayed file locks are granted and no object is destroyed, so that
    /// clients tell the MDS again of the locks they hold and the files they
    /// keep open ([`RECOVERY_GRACE_DEFAULT`] for the daemons; zero: none).
    pub recovery_grace: Duration,
    /// What requests as uid 0 of a client key are served as (squashed to
    /// 65534:65534 by default; an admin key's never are).
    pub key_root_squash: KeyRootSquash,
}

/// The recovery grace of `lanefs mds` and `lanefs up`: clients that hold
/// locks or open files reconnect at once when their MDS connection is lost
/// (tried again every 100 ms to 5 s), so a few of their attempts fit. Lustre's
/// MDT waits for every client it knew, up to its recovery window (minutes);
/// lanefs's MDS keeps no list of its clients, and waits this long instead.
pub const RECOVERY_GRACE_DEFAULT: Duration = Duration::from_secs(15);

/// Reads a running MDS's counts for its metrics (see [`crate::metrics`])
/// without keeping it alive.
#[derive(Clone)]
pub struct MdsScraper {
    shared: std::sync::Weak<Shared>,
}

impl MdsScraper {
    /// The requests served by `md_stats` name, and the connections; `None`
    /// once the MDS has stopped.
    pub fn scrape(&self) -> Option<(Vec<(&'static str, u64)>, ServerStats)> {
        let shared = self.shared.upgrade()?;
        let ops = shared.md_stats.lock().expect("md_stats lock").iter().map(|(k, v)| (*k, *v)).collect();
        Some((ops, server_stats(&shared.accept, &shared.peers)))
    }
}

/// The refusal of a request naming an inode by fid from a peer that is not
/// a node.
fn by_fid_refused() -> MdsError {
    MdsError::NotPermitted {
        path: "(an inode named by fid)".into(),
        reason: format!(
            "naming an inode by fid skips the search permission of the directories above it, so only nodes (a \
             mount, root) may: name it by path instead; {USER_NOT_A_NODE}"
        ),
    }
}

/// One more `op` served.
fn count_op(shared: &Shared, op: &'static str) {
    *shared.md_stats.lock().expect("md_stats lock").entry(op).or_default() += 1;
}

struct Shared {
    /// `None` once the MDS has stopped (its database is closed then).
    mds: MdsCell,
    stop: tokio::sync::watch::Sender<bool>,
    ost_count: u32,
    /// Which OSS serves which OST, and the work on their objects.
    objects: Arc<Lifecycle>,
    limits: ServerLimits,
    accept: Arc<AcceptStats>,
    /// What a client key's root is served as.
    key_root_squash: KeyRootSquash,
    /// Connections of each local user (bounded per uid).
    users: Arc<UserConnections>,
    /// Outgoing queue of every connection, by a number of its own.
    peers: Mutex<HashMap<u32, Arc<Outbox>>>,
    peer_next: AtomicU32,
    /// File locks, by connection number and the kernel's lock owner; a
    /// waiter's ticket is its connection and the id of its request.
    flocks: Mutex<FlockTable>,
    /// The request id each waiting lock request is answered on, and what
    /// it asked (its grant is sealed when it comes).
    flock_ids: Mutex<HashMap<Ticket, (u64, FlockRequest)>>,
    /// Seals each granted lock, and checks the seal of each replay.
    sealer: Sealer,
    /// Until then (after a restart) only replayed locks are granted; other
    /// lock requests wait in `deferred` (at most `WAITERS_MAX`, and the
    /// lock table's shares of waiters per client and per uid).
    grace_until: Option<tokio::time::Instant>,
    /// The grace ended (at `grace_until`, or early: every client it waited
    /// for has replayed).
    grace_ended: std::sync::atomic::AtomicBool,
    /// The clients a restart's grace waits for.
    known: Mutex<KnownClients>,
    /// Each connection's client (`Wire::Session`), and whether the
    /// connection holds something (a lock, an open file) it has counted
    /// with `known`.
    sessions: Mutex<HashMap<u32, (u64, bool)>>,
    /// How long refusals of lock requests are held back, per uid.
    backoff: Mutex<RefusalBackoff>,
    deferred: Mutex<Vec<(u32, u64, FlockCall)>>,
    /// Namespace requests and closes served, by their `md_stats` name (a
    /// fixed set: [`MdsRequest::md_stat`]'s and `close`).
    md_stats: Mutex<std::collections::BTreeMap<&'static str, u64>>,
    /// The grant number of each lock replayed during the grace, by file and
    /// owner (at most one per granted lock; emptied when the grace ends).
    replayed: Mutex<HashMap<(lanefs_proto::Fid, FlockOwner), u64>>,
    /// Where the clients' kept settings are (`set_param -P`): the data
    /// directory's `client_params`; none without a data directory.
    kept_params: Option<std::path::PathBuf>,
    /// The connections that registered OSTs, by connection number (at
    /// most one per OST index holds a registration).
    oss_links: Mutex<HashMap<u32, OssRegistration>>,
    /// Registrations are decided one at a time: a second OSS for an index
    /// waits for the first one's probe to end.
    registering: tokio::sync::Mutex<()>,
    _fence: Option<Fence>,
}

/// The MDS connection of an OSS that registered.
#[derive(Clone)]
struct OssRegistration {
    outbox: Arc<Outbox>,
    /// Bumped at every frame the OSS sends: its answer to a probe.
    heard: tokio::sync::watch::Sender<u64>,
}

/// How long an OSS that holds a registration has to answer a `Ping`
/// when a second OSS asks for one of its OST indices; one that does not
/// is taken for gone, and its registration passes to the second. An OSS
/// answers from its registration task, whatever its OSTs are doing.
pub const REGISTRATION_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

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

    /// What serves this MDS's metrics.
    pub fn scraper(&self) -> MdsScraper {
        MdsScraper { shared: Arc::downgrade(&self.shared) }
    }

    /// Record that `address` serves `osts` (what an OSS's Hello does); the
    /// MDS connects to it to precreate objects and destroy removed ones.
    pub fn register_oss(&self, address: &str, osts: &[u32]) {
        self.shared.objects.register(address, osts, Holder::Local);
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
        self.shared.mds.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    }
}

/// Serve `mds` on `listen`; on TCP, with the cluster's server key `key`
/// (also what the MDS shows the OSSes it calls).
pub async fn start(listen: &Address, key: Option<&ClusterKey>, mds: Mds, ost_count: u32) -> std::io::Result<MdsHandle> {
    start_with(listen, key, mds, ost_count, MdsOptions::default()).await
}

/// [`start`] with `options`' limits and fence.
pub async fn start_with(
    listen: &Address,
    key: Option<&ClusterKey>,
    mds: Mds,
    ost_count: u32,
    options: MdsOptions,
) -> std::io::Result<MdsHandle> {
    let MdsOptions { limits, fence, recovery_grace, key_root_squash } = options;
    let known = KnownClients::open(fence.as_ref().map(|f| f.dir()))?;
    let restarted = !mds.created() && !recovery_grace.is_zero();
    if restarted && !known.waits() {
        info!("restarted: no client held a lock or an open file here, so there is no recovery grace");
    }
    let grace_until = (restarted && known.waits()).then(|| tokio::time::Instant::now() + recovery_grace);
    let waiting = known.waiting();
    limits.validate().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let sealer = fence.as_ref().map_or_else(Sealer::in_memory, |fence| Sealer::open(fence.dir()))?;
    let descriptors = limits.descriptors_or_raise();
    let listener = match &fence {
        Some(fence) => Listener::bind_fenced(listen, key, fence).await?,
        None => Listener::bind(listen, key).await?,
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
        handshakes_max: budget.handshakes_max,
        handshakes_per_source_max: HANDSHAKES_PER_SOURCE_MAX,
        handshake_timeout: limits.handshake_timeout,
        stats: accept_stats.clone(),
    };
    let (stop, _) = tokio::sync::watch::channel(false);
    let mds: MdsCell = Arc::new(Mutex::new(Some(mds)));
    let objects = Lifecycle::new(mds.clone(), tokio::runtime::Handle::current(), stop.subscribe(), key.cloned());
    let shared = Arc::new(Shared {
        mds,
        stop,
        ost_count,
        objects,
        limits,
        accept: accept_stats,
        key_root_squash,
        users: Arc::default(),
        peers: Mutex::new(HashMap::new()),
        peer_next: AtomicU32::new(1),
        flocks: Mutex::new(FlockTable::new()),
        flock_ids: Mutex::new(HashMap::new()),
        sealer,
        grace_until,
        grace_ended: std::sync::atomic::AtomicBool::new(false),
        known: Mutex::new(known),
        sessions: Mutex::new(HashMap::new()),
        backoff: Mutex::new(RefusalBackoff::default()),
        deferred: Mutex::new(Vec::new()),
        md_stats: Mutex::new(std::collections::BTreeMap::new()),
        replayed: Mutex::new(HashMap::new()),
        kept_params: fence.as_ref().map(|f| f.dir().join("client_params")),
        oss_links: Mutex::new(HashMap::new()),
        registering: tokio::sync::Mutex::new(()),
        _fence: fence,
    });
    if let Some(until) = grace_until {
        info!(
            grace = ?recovery_grace,
            clients = waiting,
            "restarted: only replayed locks are granted, and nothing destroyed, until the clients that held locks or \
             open files here have replayed them, or the grace is over"
        );
        shared.objects.hold_destroys_until(until);
        let s = shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            end_grace(&s);
        });
    }
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
    let _counted = match shared.users.admit(&accepted.peer) {
        Ok(counted) => counted,
        Err(reason) => return outbox.finish(Some(Wire::Refused { reason })),
    };
    let peer = shared.peer_next.fetch_add(1, Ordering::Relaxed);
    let heard = match accepted.role {
        Role::Client => None,
        Role::Oss { address, osts } => match register(&shared, peer, &outbox, &address, &osts).await {
            Ok(heard) => Some(heard),
            Err(reason) => {
                info!(%address, ?osts, "OSS registration refused: {reason}");
                outbox.finish(Some(Wire::Refused { reason }));
                return;
            }
        },
        Role::Mds => {
            let reason = "an MDS takes client and OSS connections, not another MDS".to_string();
            outbox.finish(Some(Wire::Refused { reason }));
            return;
        }
    };
    shared.peers.lock().expect("peers lock").insert(peer, outbox.clone());
    // The MDS calls back no lock a client caches data under.
    let _ = outbox.push(Wire::Welcome { version: PROTOCOL_VERSION, client: 0, callback_timeout_ms: 0 });
    let ended = serve_requests(&mut r, &shared, &outbox, (peer, &accepted.peer), heard.as_ref()).await;
    if heard.is_some() {
        shared.oss_links.lock().expect("oss links lock").remove(&peer);
        shared.objects.expire(peer);
    }
    shared.peers.lock().expect("peers lock").remove(&peer);
    let session = shared.sessions.lock().expect("sessions lock").remove(&peer);
    // A client whose connection held something has nothing left here once
    // it is gone; but a stopping MDS keeps its clients for the next life.
    if let (Some((uuid, true)), false) = (session, *shared.stop.borrow()) {
        let mut known = shared.known.lock().expect("known clients lock");
        known.let_go(uuid);
        if cfg!(debug_assertions) {
            known.check_invariants();
        }
    }
    let granted = {
        let mut table = shared.flocks.lock().expect("flocks lock");
        let granted = table.release_client(u64::from(peer));
        shared.flock_ids.lock().expect("flock ids").retain(|ticket, _| ticket.0 != u64::from(peer));
        seal_answers(&shared, &table, granted)
    };
    shared.deferred.lock().expect("deferred lock").retain(|(p, _, _)| *p != peer);
    if shared.objects.opens.lock().expect("opens lock").client_gone(u64::from(peer)) > 0 {
        shared.objects.wake();
    }
    answer_waiters(&shared, granted);
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
    (peer, who): (u32, &Peer),
    heard: Option<&tokio::sync::watch::Sender<u64>>,
) -> Result<(), String> {
    let mut stop = shared.stop.subscribe();
    loop {
        let read = async {
            outbox.below_soft().await;
            read_within(r, shared.limits.idle_timeout).await
        };
        let read = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => return Err(MdsRefusal::ShuttingDown.to_string()),
            reason = outbox.closed() => return Err(reason),
            read = read => read,
        };
        let Some(frame) = read? else { return Ok(()) };
        if let Some(heard) = heard {
            heard.send_modify(|n| *n = n.wrapping_add(1));
        }
        let (id, answer) = match frame {
            Wire::Mds { id, call: MdsCall::Namespace { request, .. } } if request.by_fid() && !who.is_node() => {
                (id, MdsAnswer::Namespace(MdsReply::Error(by_fid_refused())))
            }
            Wire::Mds { id, call: MdsCall::Namespace { credentials, request } } => {
                count_op(shared, request.md_stat());
                match served_credentials(who, credentials, shared.key_root_squash) {
                    Ok(credentials) => (id, namespace(shared, credentials, request).await),
                    Err(refused) => (id, MdsAnswer::Namespace(MdsReply::Error(refused))),
                }
            }
            Wire::Mds {
                id,
                call:
                    MdsCall::Opened { .. }
                    | MdsCall::Closed { .. }
                    | MdsCall::Flock(_)
                    | MdsCall::ReplayDone
                    | MdsCall::NamespaceOpen { .. },
            } if !who.is_node() => (id, MdsAnswer::Error(MdsRefusal::NotANode)),
            Wire::Mds { id, call: MdsCall::NamespaceOpen { credentials, request } } => {
                count_op(shared, request.md_stat());
                match served_credentials(who, credentials, shared.key_root_squash) {
                    Ok(credentials) => {
                        let answer = namespace_kept(shared, credentials, request, Some(u64::from(peer))).await;
                        if matches!(answer, MdsAnswer::NamespaceOpened { recorded: true, .. }) {
                            holds(shared, peer);
                        }
                        (id, answer)
                    }
                    Err(refused) => {
                        (id, MdsAnswer::NamespaceOpened { reply: MdsReply::Error(refused), recorded: false })
                    }
                }
            }
            Wire::Mds { id, call: MdsCall::ClusterInfo } => {
                let osts = shared.objects.addresses();
                (id, MdsAnswer::ClusterInfo(ClusterInfo { ost_count: shared.ost_count, osts }))
            }
            Wire::Mds { id, call: MdsCall::Opened { fid } } => {
                // Only a file is recorded (or a removed one whose objects
                // wait to be destroyed, told again after a restart): an
                // open of an id no file has would hold a table entry, and a
                // removed file's objects, for nothing.
                let recorded = match may_be_open(shared, fid).await {
                    Ok(true) => {
                        let opened = shared.objects.opens.lock().expect("opens lock").opened(fid, u64::from(peer));
                        if opened.is_ok() {
                            holds(shared, peer);
                        }
                        opened
                    }
                    Ok(false) => Err("no such file, or not a file".to_string()),
                    Err(e) => Err(e),
                };
                let refused = |reason| MdsRefusal::NotRecordedOpen { file: lanefs_proto::fid_name(fid), reason };
                (id, recorded.map_or_else(|reason| MdsAnswer::Error(refused(reason)), |()| MdsAnswer::Opened))
            }
            Wire::Mds { id, call: MdsCall::Closed { fid } } => {
                count_op(shared, "close");
                if shared.objects.opens.lock().expect("opens lock").closed(fid, u64::from(peer)) {
                    shared.objects.wake();
                }
                (id, MdsAnswer::Opened)
            }
            Wire::Mds { id, call: MdsCall::KeepParam { pattern, value } } => {
                (id, keep_param(shared, who.is_administrator(), &pattern, value.as_deref()))
            }
            Wire::Mds { id, call: MdsCall::KeptParams } => {
                let kept = shared.kept_params.as_deref().map(crate::kept_params::load).unwrap_or(Ok(Vec::new()));
                (id, kept.map_or_else(|e| MdsAnswer::Error(MdsRefusal::Setting(e.to_string())), MdsAnswer::Params))
            }
            Wire::Mds { id, call: MdsCall::ReplayDone } => {
                replay_done(shared, peer);
                (id, MdsAnswer::Opened)
            }
            Wire::Session { uuid } if who.is_node() => {
                let mut sessions = shared.sessions.lock().expect("sessions lock");
                match sessions.get(&peer) {
                    Some(&(named, _)) if named != uuid => {
                        return Err("a connection names its client once (Session)".into());
                    }
                    Some(_) => {}
                    None => {
                        sessions.insert(peer, (uuid, false));
                    }
                }
                continue;
            }
            // A user's client holds nothing here to recover.
            Wire::Session { .. } => continue,
            Wire::Mds { id, call: MdsCall::Flock(call) } => {
                let uid = match &call {
                    FlockCall::Set { request, .. } => Some(request.uid),
                    _ => None,
                };
                let reply = flock(shared, peer, id, call);
                let wait = uid.and_then(|uid| held_back(shared, uid, reply.as_ref()).map(|wait| (uid, wait)));
                match (reply, wait) {
                    (Some(refused), Some((uid, wait))) => {
                        let shared = shared.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(wait).await;
                            answer(&shared, peer, id, refused);
                            shared.backoff.lock().expect("backoff lock").answered(uid);
                        });
                        continue;
                    }
                    (Some(answer), None) => (id, answer),
                    (None, _) => continue,
                }
            }
            Wire::Ping => {
                let _ = outbox.push(Wire::Pong);
                continue;
            }
            // An OSS's answer to a probe (see `register`).
            Wire::Pong if heard.is_some() => continue,
            other => return Err(format!("an MDS does not take {} messages", variant(&other))),
        };
        let _ = outbox.push(Wire::MdsReply { id, answer });
    }
}

/// Register the OSS of connection `peer` (whose replies go to `outbox`)
/// as serving `osts` at `address`, as Lustre's MGS registers targets: its
/// address must be one a client can use, and each index one this file
/// system has and no other live OSS holds. An index held by another
/// connection is probed (a `Ping` it must answer within
/// [`REGISTRATION_PROBE_TIMEOUT`]): if it answers, this registration is
/// refused; if not, that connection is closed and its registration
/// passes to this one. `Ok`: what to bump at every frame of this
/// connection, for probes of it.
async fn register(
    shared: &Shared,
    peer: u32,
    outbox: &Arc<Outbox>,
    address: &str,
    osts: &[u32],
) -> Result<tokio::sync::watch::Sender<u64>, String> {
    if let Some(ost) = osts.iter().find(|&&ost| ost >= shared.ost_count) {
        return Err(format!(
            "OST index {ost} is out of range: this file system has {} OSTs (0 to {})",
            shared.ost_count,
            shared.ost_count.saturating_sub(1)
        ));
    }
    if osts.is_empty() {
        return Err("an OSS registers at least one OST index".into());
    }
    Address::parse(address).map_err(|e| format!("the OSS's address is not one a client could use: {e}"))?;
    let _turn = shared.registering.lock().await;
    for (ost, holder_address, holder) in shared.objects.held(osts, peer) {
        let Holder::Connection(holder) = holder else {
            return Err(format!("OST index {ost} is served at {holder_address}, registered by the MDS itself"));
        };
        if answers(shared, holder).await {
            return Err(format!(
                "OST index {ost} is served by the OSS at {holder_address}, which is connected and answers: one OSS \
                 serves an index at a time; stop that OSS first, or give this one other indices (--ost)"
            ));
        }
        warn!(ost, %holder_address, %address, "the OSS holding the index did not answer: its registration passes on");
        let gone = shared.oss_links.lock().expect("oss links lock").remove(&holder);
        if let Some(gone) = gone {
            let reason =
                format!("did not answer within {REGISTRATION_PROBE_TIMEOUT:?}: another OSS registered OST {ost}");
            gone.outbox.finish(Some(Wire::Refused { reason }));
        }
        shared.objects.expire(holder);
    }
    let heard = tokio::sync::watch::channel(0).0;
    let registration = OssRegistration { outbox: outbox.clone(), heard: heard.clone() };
    shared.oss_links.lock().expect("oss links lock").insert(peer, registration);
    shared.objects.register(address, osts, Holder::Connection(peer));
    Ok(heard)
}

/// Whether the OSS of connection `holder` answers a `Ping` in time.
async fn answers(shared: &Shared, holder: u32) -> bool {
    let Some(link) = shared.oss_links.lock().expect("oss links lock").get(&holder).cloned() else { return false };
    let mut heard = link.heard.subscribe();
    heard.borrow_and_update();
    if link.outbox.push(Wire::Ping).is_err() {
        return false;
    }
    matches!(tokio::time::timeout(REGISTRATION_PROBE_TIMEOUT, heard.changed()).await, Ok(Ok(())))
}

/// `set_param -P` of a client parameter: checked as a client would take
/// it (it must name a client parameter, with a value it accepts), then
/// kept in the data directory.
fn keep_param(shared: &Shared, admin: bool, pattern: &str, value: Option<&str>) -> MdsAnswer {
    if !admin {
        return MdsAnswer::Error(MdsRefusal::NotAdministrator);
    }
    let Some(file) = &shared.kept_params else {
        return MdsAnswer::Error(MdsRefusal::NoDataDirectory);
    };
    let Some(value) = value else {
        return match crate::kept_params::forget(file, pattern) {
            Ok(true) => crate::kept_params::load(file)
                .map_or_else(|e| MdsAnswer::Error(MdsRefusal::Setting(e.to_string())), MdsAnswer::Params),
            Ok(false) => MdsAnswer::Error(MdsRefusal::Setting(format!(
                "{pattern}: no setting of it is kept (the MDS keeps them by the pattern they were set with)"
            ))),
            Err(e) => MdsAnswer::Error(MdsRefusal::Setting(format!("{pattern}: {e}"))),
        };
    };
    if let Err(e) = lanefs_net::params::client::check(pattern, value, shared.ost_count) {
        return MdsAnswer::Error(MdsRefusal::Setting(e));
    }
    match crate::kept_params::save(file, pattern, value).and_then(|()| crate::kept_params::load(file)) {
        Ok(kept) => MdsAnswer::Params(kept),
        Err(e) => MdsAnswer::Error(MdsRefusal::Setting(format!("{pattern}={value} not kept: {e}"))),
    }
}

/// One file-lock request of connection `peer`, sent as its request `id`:
/// its answer now, or `None` for a request that waits (answered later by
/// [`answer_waiters`]).
fn flock(shared: &Shared, peer: u32, id: u64, call: FlockCall) -> Option<MdsAnswer> {
    let client = u64::from(peer);
    let in_grace = in_grace(shared);
    if in_grace {
        let mut deferred = shared.deferred.lock().expect("deferred lock");
        match &call {
            FlockCall::Set { replay: true, .. } | FlockCall::UnlockOwner { .. } => {}
            FlockCall::Cancel { ticket } => {
                let found = deferred
                    .iter()
                    .position(|(p, _, c)| *p == peer && matches!(c, FlockCall::Set { ticket: t, .. } if t == ticket));
                if let Some(i) = found {
                    let (_, waiting_id, _) = deferred.remove(i);
                    answer(shared, peer, waiting_id, MdsAnswer::Flock(FlockAnswer::Interrupted));
                }
                return Some(MdsAnswer::Flock(FlockAnswer::Free));
            }
            _ if deferred.len() >= lanefs_proto::flock::WAITERS_MAX => {
                return Some(MdsAnswer::Flock(FlockAnswer::NoLocks(format!(
                    "{} lock requests wait for the MDS's recovery to end already",
                    lanefs_proto::flock::WAITERS_MAX
                ))));
            }
            _ if deferred_share_full(&deferred, peer, &call) => {
                return Some(MdsAnswer::Flock(FlockAnswer::NoLocks(format!(
                    "this client, or its uid, has as many lock requests waiting for the MDS's recovery to end as \
                     it may ({} per client, {} per uid)",
                    lanefs_proto::flock::WAITERS_PER_CLIENT_MAX,
                    lanefs_proto::flock::WAITERS_PER_UID_MAX
                ))));
            }
            _ => {
                deferred.push((peer, id, call));
                return None;
            }
        }
    }
    let mut table = shared.flocks.lock().expect("flocks lock");
    let (answer, granted) = match call {
        FlockCall::Set { mut request, wait, ticket, replay, seal } => {
            request.owner.client = client;
            if replay {
                if let Err(why) = shared.sealer.check(&request, seal.as_ref(), in_grace) {
                    warn!(
                        peer,
                        file = request.file.0,
                        owner = request.owner.owner,
                        start = request.start,
                        end = request.end,
                        "a replayed file lock is refused: {why}"
                    );
                    let reason = format!("the replayed lock is refused: {why}");
                    return Some(MdsAnswer::Flock(FlockAnswer::NoLocks(reason)));
                }
            }
            let grant = seal.filter(|_| replay && in_grace).map(|seal| seal.grant);
            if let Some(grant) = grant {
                displace_older(&mut table, &shared.replayed.lock().expect("replayed"), &request, grant);
            }
            let wait = wait && !replay;
            // The waiter is answered on its request's id: remember which.
            let (outcome, granted) = table.set((client, ticket), request, wait);
            if let (Some(grant), SetOutcome::Done(FlockAnswer::Granted)) = (grant, &outcome) {
                shared.replayed.lock().expect("replayed").insert((request.file, request.owner), grant);
            }
            match outcome {
                SetOutcome::Done(FlockAnswer::Granted) if request.kind.is_some() => {
                    holds(shared, peer);
                    (Some(sealed(shared, &table, &request)), granted)
                }
                SetOutcome::Done(answer) => (Some(MdsAnswer::Flock(answer)), granted),
                SetOutcome::Queued => {
                    shared.flock_ids.lock().expect("flock ids").insert((client, ticket), (id, request));
                    (None, granted)
                }
            }
        }
        FlockCall::Get { mut request } => {
            request.owner.client = client;
            (Some(MdsAnswer::Flock(table.get(&request))), Vec::new())
        }
        FlockCall::Cancel { ticket } => {
            let granted = if table.cancel((client, ticket)) {
                vec![((client, ticket), FlockAnswer::Interrupted)]
            } else {
                Vec::new()
            };
            (Some(MdsAnswer::Flock(FlockAnswer::Free)), granted)
        }
        FlockCall::UnlockOwner { file, owner } => {
            let owner = FlockOwner { client, owner };
            (Some(MdsAnswer::Flock(FlockAnswer::Granted)), table.unlock_owner(file, owner))
        }
    };
    if cfg!(debug_assertions) {
        table.check_invariants();
    }
    let granted = seal_answers(shared, &table, granted);
    drop(table);
    answer_waiters(shared, granted);
    answer
}

/// During the recovery grace, a replay whose bytes an earlier replay took
/// with an older grant displaces it: the MDS never holds two conflicting
/// locks at once, so of two conflicting grants the older one's owner had
/// let go of those bytes before the newer was made, and replays a lock it
/// no longer held. Its range of the older lock goes (said at `warn`).
fn displace_older(
    table: &mut FlockTable,
    replayed: &HashMap<(lanefs_proto::Fid, FlockOwner), u64>,
    request: &FlockRequest,
    grant: u64,
) {
    while let FlockAnswer::Conflict(held) = table.get(request) {
        match replayed.get(&(request.file, held.owner)) {
            Some(&older) if older < grant => {
                warn!(
                    file = request.file.0,
                    client = held.owner.client,
                    owner = held.owner.owner,
                    "a replayed file lock from an older grant gives way to one from a newer grant"
                );
                let unlock = FlockRequest { owner: held.owner, uid: held.uid, kind: None, ..*request };
                let (outcome, _) = table.set((held.owner.client, 0), unlock, false);
                if outcome != SetOutcome::Done(FlockAnswer::Granted) {
                    return;
                }
            }
            _ => return,
        }
    }
}

/// Whether `peer`, or the uid `call` names, has its share of the requests
/// deferred to the end of the recovery grace (the lock table's shares of
/// waiters).
fn deferred_share_full(deferred: &[(u32, u64, FlockCall)], peer: u32, call: &FlockCall) -> bool {
    let uid_of = |call: &FlockCall| match call {
        FlockCall::Set { request, .. } | FlockCall::Get { request } => Some(request.uid),
        _ => None,
    };
    let of_peer = deferred.iter().filter(|(p, _, _)| *p == peer).count();
    let uid = uid_of(call);
    let of_uid = deferred.iter().filter(|(_, _, c)| uid.is_some() && uid_of(c) == uid).count();
    of_peer >= lanefs_proto::flock::WAITERS_PER_CLIENT_MAX || of_uid >= lanefs_proto::flock::WAITERS_PER_UID_MAX
}

/// The answer to `request`, just granted: the seal of its owner's lock
/// that covers it now (merged with the owner's neighbours, if any).
fn sealed(shared: &Shared, table: &FlockTable, request: &FlockRequest) -> MdsAnswer {
    match table.held(request.file, request.owner, request.start) {
        Some(lock) => MdsAnswer::FlockGranted(shared.sealer.seal(request.file, &lock)),
        None => MdsAnswer::Flock(FlockAnswer::Granted),
    }
}

/// Waiters' answers, each with the request id it goes on, and granted
/// locks sealed.
fn seal_answers(
    shared: &Shared,
    table: &FlockTable,
    answers: Vec<(Ticket, FlockAnswer)>,
) -> Vec<(Ticket, u64, MdsAnswer)> {
    let mut ids = shared.flock_ids.lock().expect("flock ids");
    answers
        .into_iter()
        .filter_map(|(ticket, answer)| {
            let (id, request) = ids.remove(&ticket)?;
            let answer = match answer {
                FlockAnswer::Granted => {
                    if let Ok(peer) = u32::try_from(ticket.0) {
                        holds(shared, peer);
                    }
                    sealed(shared, table, &request)
                }
                other => MdsAnswer::Flock(other),
            };
            Some((ticket, id, answer))
        })
        .collect()
}

/// Whether the recovery grace after a restart is on.
fn in_grace(shared: &Shared) -> bool {
    shared.grace_until.is_some_and(|until| tokio::time::Instant::now() < until)
        && !shared.grace_ended.load(Ordering::Acquire)
}

/// Connection `peer` holds something (a granted lock, a file recorded
/// open): the first time, its client is counted with those a restart's
/// grace waits for.
fn holds(shared: &Shared, peer: u32) {
    let mut sessions = shared.sessions.lock().expect("sessions lock");
    if let Some((uuid, holding)) = sessions.get_mut(&peer) {
        if !*holding {
            *holding = true;
            let mut known = shared.known.lock().expect("known clients lock");
            known.holds(*uuid);
            if cfg!(debug_assertions) {
                known.check_invariants();
            }
        }
    }
}

/// Connection `peer`'s client has replayed what it held: when it was the
/// last the grace waited for, the grace ends now.
fn replay_done(shared: &Shared, peer: u32) {
    let Some((uuid, _)) = shared.sessions.lock().expect("sessions lock").get(&peer).copied() else { return };
    let replayed = shared.known.lock().expect("known clients lock").replayed(uuid);
    if !in_grace(shared) {
        return;
    }
    match replayed {
        Replayed::AllDone => {
            info!("every client that held locks or open files here has replayed them: the recovery grace ends early");
            end_grace(shared);
        }
        Replayed::Waiting(left) => info!(client = %format!("{uuid:016x}"), left, "a client has replayed"),
    }
}

/// The recovery grace is over (at its end, or early): the lock requests
/// it held back are served, in the order they came (each answered on its
/// connection, now or when granted), and queued objects may be destroyed.
fn end_grace(shared: &Shared) {
    if shared.grace_ended.swap(true, Ordering::AcqRel) {
        return;
    }
    shared.objects.hold_destroys_until(tokio::time::Instant::now());
    let forgotten = shared.known.lock().expect("known clients lock").grace_over();
    if forgotten > 0 {
        warn!(clients = forgotten, "clients that held locks or open files did not come back within the recovery grace: what they held is forgotten");
    }
    shared.replayed.lock().expect("replayed").clear();
    let deferred = std::mem::take(&mut *shared.deferred.lock().expect("deferred lock"));
    info!(deferred = deferred.len(), "recovery grace over: serving every lock request");
    for (peer, id, call) in deferred {
        if !shared.peers.lock().expect("peers lock").contains_key(&peer) {
            continue;
        }
        if let Some(reply) = flock(shared, peer, id, call) {
            answer(shared, peer, id, reply);
        }
    }
}

/// How long to hold back `answer`, the answer to a lock request of `uid`
/// (`None` for a request that waits): a refusal for a share, after others
/// in a row, waits (see [`crate::refusal_backoff`]); anything else ends
/// the row.
fn held_back(shared: &Shared, uid: u32, answer: Option<&MdsAnswer>) -> Option<std::time::Duration> {
    let mut backoff = shared.backoff.lock().expect("backoff lock");
    let wait = match answer {
        Some(MdsAnswer::Flock(FlockAnswer::NoLocks(_))) => Some(backoff.refused(uid)).filter(|w| !w.is_zero()),
        _ => {
            backoff.served(uid);
            None
        }
    };
    if cfg!(debug_assertions) {
        backoff.check_invariants();
    }
    wait
}

/// Answer request `id` of connection `peer`, if it is still there.
fn answer(shared: &Shared, peer: u32, id: u64, reply: MdsAnswer) {
    if let Some(outbox) = shared.peers.lock().expect("peers lock").get(&peer) {
        let _ = outbox.push(Wire::MdsReply { id, answer: reply });
    }
}

/// Send waiters their answers, each on the connection that asked, as the
/// reply to the request that waited.
fn answer_waiters(shared: &Shared, answers: Vec<(Ticket, u64, MdsAnswer)>) {
    if answers.is_empty() {
        return;
    }
    let peers = shared.peers.lock().expect("peers lock");
    for (ticket, id, answer) in answers {
        let Ok(peer) = u32::try_from(ticket.0) else { continue };
        if let Some(outbox) = peers.get(&peer) {
            let _ = outbox.push(Wire::MdsReply { id, answer });
        }
    }
}

/// One namespace request. A create that finds a pool empty runs again once
/// the pool is refilled, or fails saying why it was not.
/// Whether `fid` is a file a client may keep open ([`Mds::may_be_open`]).
async fn may_be_open(shared: &Shared, fid: lanefs_proto::Fid) -> Result<bool, String> {
    let mds = shared.mds.clone();
    let answer = tokio::task::spawn_blocking(move || {
        let mds = mds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        mds.as_ref().map(|mds| mds.may_be_open(fid))
    })
    .await;
    match answer {
        Ok(Some(found)) => found.map_err(|e| e.to_string()),
        Ok(None) => Err(MdsRefusal::ShuttingDown.to_string()),
        Err(e) => Err(format!("the MDS failed on this request ({e})")),
    }
}

async fn namespace(shared: &Shared, credentials: Credentials, request: MdsRequest) -> MdsAnswer {
    namespace_kept(shared, credentials, request, None).await
}

/// A namespace request; with `kept_by`, a file it opens is recorded open
/// for that peer while the MDS is still held, before any other request
/// (a removal) or the destroy queue's drain can see it.
async fn namespace_kept(
    shared: &Shared,
    credentials: Credentials,
    request: MdsRequest,
    kept_by: Option<u64>,
) -> MdsAnswer {
    let deadline = tokio::time::Instant::now() + OBJECTS_WAIT;
    let touches_objects = matches!(
        request,
        MdsRequest::Create { .. }
            | MdsRequest::Unlink { .. }
            | MdsRequest::Rename { .. }
            | MdsRequest::MigrateStart { .. }
            | MdsRequest::MigrateCommit { .. }
            | MdsRequest::MigrateAbort { .. }
    );
    // A migration's commit is answered once the file's old objects are
    // gone: the migrating client then lets the others' I/O go on, and it
    // must find them gone (and fetch the new layout), never write there.
    let migrated = match &request {
        MdsRequest::MigrateCommit { volatile, .. } => Some(*volatile),
        _ => None,
    };
    loop {
        let mds = shared.mds.clone();
        let (credentials, request) = (credentials.clone(), request.clone());
        let opens = shared.objects.opens.clone();
        let reply = tokio::task::spawn_blocking(move || {
            let mut mds = mds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let reply = mds.as_mut().map(|mds| mds.handle(&credentials, request))?;
            let recorded = match (&reply, kept_by) {
                (MdsReply::File(info), Some(peer)) => {
                    let opened = opens.lock().expect("opens lock").opened(info.fid, peer);
                    if let Err(e) = &opened {
                        warn!(fid = info.fid.0, "an open not recorded: {e}");
                    }
                    opened.is_ok()
                }
                _ => false,
            };
            Some((reply, recorded))
        })
        .await;
        let (reply, recorded) = match reply {
            Ok(Some(answer)) => answer,
            Ok(None) => return MdsAnswer::Error(MdsRefusal::ShuttingDown),
            Err(e) => {
                error!("an MDS request failed: {e}");
                return MdsAnswer::Error(MdsRefusal::Failed(e.to_string()));
            }
        };
        if touches_objects {
            shared.objects.wake();
        }
        let answer = |reply| match kept_by {
            Some(_) => MdsAnswer::NamespaceOpened { reply, recorded },
            None => MdsAnswer::Namespace(reply),
        };
        if let (Some(volatile), MdsReply::File(_)) = (migrated, &reply) {
            let deadline = tokio::time::Instant::now() + crate::mds_objects::OSS_CALL_TIMEOUT;
            if let Err(reason) = shared.objects.wait_destroyed(volatile, deadline).await {
                return MdsAnswer::Error(MdsRefusal::MigrationPending { reason });
            }
        }
        let MdsReply::Error(MdsError::NoObjects { ost, .. }) = reply else {
            return answer(reply);
        };
        if let Err(reason) = shared.objects.wait_for_objects(ost, deadline).await {
            return answer(MdsReply::Error(MdsError::NoObjects { ost, reason }));
        }
    }
}
