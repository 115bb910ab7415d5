//! The lanefs client library: a file system client over real sockets.
//! It depends on the wire (lanefs-proto), the transport (lanefs-net) and
//! the protocol core, never on server code: a mount or an IOR rank links
//! no OSS, no MDS and no SQLite.
//!
//! [`Client::connect`] reaches the MDS, learns where the OSTs are and starts
//! a driver thread ([`driver`]) that owns lanefs-core's client state machine
//! (lock cache, page cache, writeback, sessions with the OSTs). The methods
//! of [`Client`] are blocking calls that hand an operation to the driver
//! and wait for its completion, so any thread (an IOR rank, a test) can use
//! the file system like a POSIX library. Each [`Client`] is one client
//! node: its own locks, its own cache, its own connections.
//!
//! Failure handling: OSSes are connected to when first needed, so commands
//! that need only the MDS work while an OSS is down. A lost OSS connection
//! fails nothing at first: the client keeps its locks, its cache and what
//! the OSTs have not committed, tries the OSS again (with a growing wait),
//! and on the new connection sends again what was unanswered, or replays
//! its locks and uncommitted writes to an OSS that restarted (see
//! `lanefs_core::client::session`). Only an OSS out of reach for longer
//! than [`ClientOptions::reconnect_timeout`] (Lustre's `obd_timeout`) fails
//! the operations that need it, with an error naming it; what was lost is
//! reported at the next fsync or close of the files it belonged to. A
//! connection that stops answering (a server stopped, or a link that
//! silently dropped everything) counts as lost after
//! [`ClientOptions::rpc_timeout`] without a word: the driver pings every
//! connection it has sent nothing on for [`ClientOptions::ping_interval`]
//! (Lustre pings every `obd_timeout / 4`, 25 s), so a live server always
//! has something to answer. Nothing waits forever on a dead peer.
//!
//! What a server may send: anything. The core client checks each message
//! from an OSS (see `lanefs_core::client`); the driver ignores (with a log
//! line) a message for an OST that the sending OSS does not serve, a
//! statistics answer from an OSS not asked or already answered, and an MDS
//! reply for no call in flight.
//!
//! The data path: [`Client::pwrite`] copies the caller's bytes once, on the
//! caller's thread, into page frames; the core caches those frames as they
//! are, and its write RPCs carry them. When an OSS is reached over a Unix
//! socket, the frames come from a shared-memory arena the OSS maps (see
//! [`lanefs_net::shm`]), so a write RPC names its frames and the OST writes the
//! object from them: one copy from the caller's buffer to the page cache,
//! one from the page cache to the object file, as with RDMA on a real
//! network. Otherwise the frames are written to the socket as they are.
//! After a lost OSS connection the arena is retired (a server may still be
//! reading frames of writes sent again) and a new one is made. Each
//! connection's outgoing queue is an [`lanefs_net::outbox::Outbox`] bounded by
//! what the core can have in flight: only a server that stops reading
//! fills it, and then the connection is dropped as lost.
//!
//! Every namespace call carries the caller's [`Credentials`]
//! ([`ClientOptions::credentials`], by default the calling process's
//! effective uid and gid and its supplementary groups), which the MDS
//! checks permissions for; callers apply their umask to the modes they
//! ask for ([`process_umask`]). Objects are the MDS's to create and
//! destroy: a client never does either.
//!
//! Servers on TCP take only clients with a key of their cluster
//! ([`ClientOptions::key`], see [`lanefs_net::auth`]); on Unix sockets the
//! client needs none, and trusts only a server running as its own user or
//! root.

pub mod control;
mod driver;
mod links;
mod mds_record;
pub mod migrate;
pub mod space;

pub use lanefs_net::process::{process_credentials, process_umask};

use driver::Driver;
use lanefs_core::client::ladvise::{Advice, LockaheadResult};
use lanefs_core::client::timeline::TimelineBin;
use lanefs_core::client::{
    Client as CoreClient, ClientConfig, ClientCounters, ClientError, FileHandle, OpId, OpOutput,
};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::GroupId;
use lanefs_core::msg::IoError;
use lanefs_core::msg::Payload;
use lanefs_core::pages::{PagePool, PageSpan};
use lanefs_core::{Instant, PAGE_SIZE};
use lanefs_net::auth::{describe, tls_failure, ClusterKey, TlsFailure};
use lanefs_net::limits::PING_INTERVAL_DEFAULT;
use lanefs_net::transport::Address;
use lanefs_proto::flock::FlockAnswer;
use lanefs_proto::wire::{ClusterInfo, FlockCall, MdsAnswer, MdsCall, MdsRefusal, OstStats};
use lanefs_proto::{Credentials, DirEntry, DirPage, MdsError, MdsReply, MdsRequest};
use std::future::Future;
use std::time::Duration as StdDuration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::oneshot;

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// `refused`: nothing listened at the address (`ECONNREFUSED`), as
    /// while a server restarts.
    #[error("cannot reach {address}: {reason}")]
    Connect { address: String, reason: String, refused: bool },
    #[error("{peer} refused the connection: {reason}")]
    Refused { peer: String, reason: String },
    /// The MDS's connection ended, for this reason.
    #[error("MDS: {0}")]
    Mds(String),
    /// The MDS did not serve the call.
    #[error("MDS: {0}")]
    MdsRefused(MdsRefusal),
    /// The MDS refused a namespace request (no such file, permission
    /// denied, ...): [`MdsError::errno`] names it as POSIX does.
    #[error("MDS: {0}")]
    Namespace(MdsError),
    /// The MDS connection was lost with the request in flight: it may or
    /// may not have been done (sent again only if doing it twice is
    /// harmless, see [`MdsRequest::is_idempotent`]).
    #[error("the MDS connection was lost with the request in flight ({reason}): it may or may not have been done")]
    MdsLost { reason: String },
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the client driver has stopped")]
    Closed,
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A caller's argument the library refuses before sending anything
    /// (`EINVAL`); says which and why.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// An object of the file is gone from its OST (its file there was
    /// removed, or never made): that stripe's bytes are lost, not zeros.
    #[error(
        "{path}: object {object} of stripe {stripe} is missing on OST{ost:04x} (its OST no longer has it): \
         the data of that stripe is lost; restore the file from a copy, or remove it"
    )]
    MissingObject { path: String, stripe: u32, ost: u32, object: u64 },
}

impl NetError {
    /// The error number a POSIX call fails with for this error: the MDS's
    /// and the core client's own where they name one, `EIO` for a server
    /// out of reach, a lost request or a lost object.
    pub fn errno(&self) -> lanefs_core::Errno {
        match self {
            NetError::Namespace(e) => e.errno(),
            NetError::Client(e) => e.errno(),
            NetError::Connect { .. }
            | NetError::Refused { .. }
            | NetError::Mds(_)
            | NetError::MdsRefused(_)
            | NetError::MdsLost { .. }
            | NetError::Closed
            | NetError::Protocol(_)
            | NetError::MissingObject { .. } => lanefs_core::Errno::EIO,
            NetError::Invalid(_) => lanefs_core::Errno::EINVAL,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// The core client's settings; `core.recovery` is on for a network
    /// client (sessions, resends and replay: see `lanefs_core::client::session`).
    pub core: ClientConfig,
    /// How long one connection attempt (and its handshake) may take.
    pub connect_timeout: StdDuration,
    /// How long an OSS may stay out of reach (connection lost and not
    /// made again) before the operations that need it fail and what this
    /// client held there is given up (Lustre's `obd_timeout`, 100 s); and
    /// how long a namespace call keeps trying an MDS out of reach.
    pub reconnect_timeout: StdDuration,
    /// A connection that answers nothing for this long after something was
    /// sent on it counts as lost (Lustre's `obd_timeout` for an RPC, 100 s;
    /// an OSS's for half its OSTs' callback timeout if that is shorter:
    /// `links::Silence`);
    /// and a lock request that waits this long at its OST behind another
    /// client's lock (a GROUP lock, which takes no callback) is withdrawn,
    /// failing what needed it with `ETIMEDOUT` (unless `core.lock_wait_max`
    /// says otherwise).
    pub rpc_timeout: StdDuration,
    /// Ping a server connection nothing was sent on for this long (or for
    /// half of how long it may stay silent, if that is less), so that the
    /// server's idle timeout (150 s by default) never closes it and a dead
    /// server is noticed; Lustre's `obd_timeout / 4`, 25 s.
    pub ping_interval: StdDuration,
    /// Offer OSSes on Unix sockets the page arena in shared memory (write
    /// RPCs then name their pages instead of sending them).
    pub shared_memory: bool,
    /// Who makes this client's namespace calls.
    pub credentials: Credentials,
    /// The cluster key for TCP servers (a client key, or a server key for
    /// tools on server hosts); unused on Unix sockets.
    pub key: Option<ClusterKey>,
    /// Listen for `lanefs lctl` in this directory (see [`crate::control`];
    /// [`crate::control::run_dir`] is where lctl looks): mounts and
    /// benchmark ranks do, one-shot commands do not.
    pub control_dir: Option<std::path::PathBuf>,
}

/// Lustre's default `obd_timeout`.
pub const RECONNECT_TIMEOUT_DEFAULT: StdDuration = StdDuration::from_secs(100);
/// Lustre's default `obd_timeout`.
pub const RPC_TIMEOUT_DEFAULT: StdDuration = StdDuration::from_secs(100);

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            core: ClientConfig { recovery: true, ..ClientConfig::default() },
            connect_timeout: StdDuration::from_secs(5),
            reconnect_timeout: RECONNECT_TIMEOUT_DEFAULT,
            rpc_timeout: RPC_TIMEOUT_DEFAULT,
            ping_interval: PING_INTERVAL_DEFAULT,
            shared_memory: true,
            credentials: process_credentials(),
            key: None,
            control_dir: None,
        }
    }
}

impl ClientOptions {
    /// One timeout for everything, as Lustre's `obd_timeout` is: an RPC
    /// unanswered for `timeout`, or a server out of reach that long, fails
    /// the operation; idle connections ping every quarter of it.
    pub fn with_timeout(self, timeout: StdDuration) -> ClientOptions {
        ClientOptions { rpc_timeout: timeout, reconnect_timeout: timeout, ping_interval: timeout / 4, ..self }
    }

    /// Settings that make sense, or the error naming the one that does not.
    fn validate(&self) -> Result<(), NetError> {
        if !self.core.recovery {
            let reason = "a network client needs core.recovery on: its OST sessions (connect, resend after a \
                          lost connection, replay after an OSS restart) are part of recovery; off is for the \
                          simulator, whose messages are never lost";
            return Err(NetError::Client(ClientError::Config(reason.into())));
        }
        let zero = |name: &str, d: StdDuration| {
            d.is_zero().then(|| NetError::Client(ClientError::Config(format!("{name} must be positive"))))
        };
        if let Some(e) = zero("the ping interval (Lustre's is 25 s)", self.ping_interval)
            .or_else(|| zero("the RPC timeout (Lustre's obd_timeout is 100 s)", self.rpc_timeout))
            .or_else(|| zero("the connect timeout", self.connect_timeout))
        {
            return Err(e);
        }
        if self.ping_interval >= self.rpc_timeout {
            let reason = format!(
                "the ping interval ({:?}) must be shorter than the RPC timeout ({:?}), or an idle connection \
                 would count as lost",
                self.ping_interval, self.rpc_timeout
            );
            return Err(NetError::Client(ClientError::Config(reason)));
        }
        Ok(())
    }
}

/// A failed connection to `address` as a [`NetError`]: a server's refusal
/// of this end's key is `Refused`, anything else `Connect`; both say why.
fn connect_failed(address: &Address, e: &std::io::Error, key: Option<&ClusterKey>) -> NetError {
    match key.and_then(|key| tls_failure(e, key.path())) {
        Some(TlsFailure::ByPeer(reason)) => NetError::Refused { peer: address.to_string(), reason },
        _ => NetError::Connect {
            address: address.to_string(),
            reason: describe(e, key),
            refused: e.kind() == std::io::ErrorKind::ConnectionRefused,
        },
    }
}

/// An open file.
#[derive(Clone, Debug)]
pub struct File {
    pub path: String,
    /// The layout it was opened with (an I/O that finds the file
    /// restriped since goes to its new layout, see [`Client::open_file`]).
    pub layout: Layout,
    /// The file's fid, when opened by it ([`Client::open_file`]).
    pub fid: Option<lanefs_proto::Fid>,
    handle: FileHandle,
}

pub(crate) type Reply<T> = oneshot::Sender<T>;
pub(crate) type LadviseReply = Reply<Result<Vec<LockaheadResult>, ClientError>>;
pub(crate) type StatsReply = Reply<Result<Vec<OstStats>, NetError>>;
pub(crate) type OpStart = Box<dyn FnOnce(&mut CoreClient, Instant) -> OpId + Send>;

/// A client's timeline bins by index, and whether events came after the
/// last bin kept ([`Client::take_timeline`]).
pub type TimelineBins = (Vec<(u64, TimelineBin)>, bool);

pub(crate) enum Cmd {
    Mds(MdsCall, Reply<Result<MdsAnswer, NetError>>),
    Open(Layout, Reply<FileHandle>),
    /// Give an open file another layout (its file was restriped); whether
    /// it changed.
    Relayout(FileHandle, Layout, Reply<bool>),
    Op(OpStart, Reply<Result<OpOutput, ClientError>>),
    Ladvise(FileHandle, Vec<Advice>, Reply<Result<Vec<LockaheadResult>, ClientError>>),
    Stats(Reply<Result<Vec<OstStats>, NetError>>),
    Counters(Reply<ClientCounters>),
    /// Start the core's timeline: bins of the duration from the instant on.
    StartTimeline(std::time::Instant, StdDuration, Reply<()>),
    TakeTimeline(Reply<Option<TimelineBins>>),
    SetOstParam(OstParam, Reply<Result<(), NetError>>),
    UnstableBytes(Reply<u64>),
}

/// One OST parameter to set (see [`Client::set_ost_param`]).
#[derive(Clone, Debug)]
pub(crate) struct OstParam {
    pub ost: u32,
    pub name: String,
    pub value: Option<String>,
    pub permanent: bool,
}

/// How many times one I/O is made again on the new layout of a file
/// restriped while it ran (`lanefs migrate`), before its error is returned.
pub const RELAYOUTS_MAX: usize = 8;

/// One client node of a lanefs file system.
pub struct Client {
    cmds: UnboundedSender<Cmd>,
    thread: Option<std::thread::JoinHandle<()>>,
    info: ClusterInfo,
    /// Where `pwrite` puts the caller's bytes: the core's own pool.
    pool: PagePool,
    credentials: Credentials,
    /// How long namespace calls keep trying an MDS out of reach.
    mds_wait: StdDuration,
    /// The next ticket of a file-lock request that may wait.
    flock_tickets: std::sync::atomic::AtomicU64,
}

/// The longest pause between two looks at whether a waiting file-lock
/// request's caller is interrupted ([`Client::flock`]): a signal ends a
/// wait within this. The looks start 1 ms apart and double up to it, so
/// that many parked waiters cost little CPU (each look reads `/proc` in a
/// mount); the MDS's answer wakes the waiter at once, whenever it comes.
pub const FLOCK_SIGNAL_POLL_MAX: StdDuration = StdDuration::from_millis(200);
const FLOCK_SIGNAL_POLL_FIRST: StdDuration = StdDuration::from_millis(1);

/// Wakes a thread parked on a reply ([`Client::flock`]).
struct Unpark(std::thread::Thread);

impl std::task::Wake for Unpark {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

fn flock_answer(answer: Result<MdsAnswer, NetError>) -> Result<FlockAnswer, NetError> {
    match answer? {
        MdsAnswer::Flock(answer) => Ok(answer),
        MdsAnswer::FlockGranted(_) => Ok(FlockAnswer::Granted),
        MdsAnswer::Error(refused) => Err(NetError::MdsRefused(refused)),
        other => Err(NetError::Protocol(format!("unexpected MDS answer {other:?}"))),
    }
}

/// The first wait before a namespace call tries an unreachable MDS again;
/// each next wait doubles, up to [`MDS_RETRY_MAX`].
const MDS_RETRY_FIRST: StdDuration = StdDuration::from_millis(100);
const MDS_RETRY_MAX: StdDuration = StdDuration::from_secs(5);

impl Client {
    /// Connect to the MDS at `mds` (OSSes are connected to when first
    /// needed). An MDS that refuses connections (restarting: its address
    /// is there, nothing listens yet) is tried again, with a growing wait,
    /// for up to [`ClientOptions::reconnect_timeout`], as namespace calls
    /// wait for it ([`Client::mds`]); any other failure is returned at once.
    pub fn connect(mds: &str, options: ClientOptions) -> Result<Client, NetError> {
        let deadline = std::time::Instant::now() + options.reconnect_timeout;
        let mut wait = MDS_RETRY_FIRST;
        loop {
            match Client::connect_once(mds, options.clone()) {
                Err(NetError::Connect { refused: true, .. }) if std::time::Instant::now() + wait < deadline => {
                    tracing::info!("the MDS at {mds} refuses connections; trying again in {wait:?}");
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(MDS_RETRY_MAX);
                }
                result => return result,
            }
        }
    }

    /// [`Client::connect`] without waiting: an MDS that refuses the
    /// connection fails the call at once (a mount does this: an MDS out
    /// of reach is an error to show, not a wait).
    pub fn connect_once(mds: &str, options: ClientOptions) -> Result<Client, NetError> {
        let mds =
            Address::parse(mds).map_err(|reason| NetError::Connect { address: mds.into(), reason, refused: false })?;
        options.validate()?;
        let credentials = options.credentials.clone();
        let mds_wait = options.reconnect_timeout;
        let (cmds, rx) = unbounded_channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("lanefs-client".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
                rt.block_on(async move {
                    match Driver::start(mds, options).await {
                        Ok(driver) => {
                            let _ = ready_tx.send(Ok((driver.info.clone(), driver.pool.clone())));
                            driver.run(rx).await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                })
            })
            .map_err(|e| NetError::Connect {
                address: "driver thread".into(),
                reason: e.to_string(),
                refused: false,
            })?;
        let (info, pool) = ready_rx.recv().map_err(|_| NetError::Closed)??;
        let flock_tickets = std::sync::atomic::AtomicU64::new(1);
        Ok(Client { cmds, thread: Some(thread), info, pool, credentials, mds_wait, flock_tickets })
    }

    /// Who this client's namespace calls are made by.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    pub fn cluster(&self) -> &ClusterInfo {
        &self.info
    }

    fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(make(tx)).map_err(|_| NetError::Closed)?;
        rx.blocking_recv().map_err(|_| NetError::Closed)
    }

    /// One namespace request to the MDS, made with this client's
    /// credentials. An MDS out of reach (restarting, or stopped) is tried
    /// again, with a growing wait, for up to
    /// [`ClientOptions::reconnect_timeout`], as Lustre's clients wait for
    /// their MDS: a request that was never sent, or that the MDS did not
    /// do because it was stopping, is sent again; one lost in flight is
    /// sent again only if doing it twice is harmless
    /// ([`MdsRequest::is_idempotent`]), and otherwise fails with
    /// [`NetError::MdsLost`] (Lustre would know from the MDS's reply
    /// records whether it was done; lanefs's MDS keeps none).
    pub fn mds(&self, request: MdsRequest) -> Result<MdsReply, NetError> {
        self.mds_as(&self.credentials, request)
    }

    /// [`Client::mds`] made with `credentials` (a mount serves many users
    /// through one client, and sends each request with its caller's).
    pub fn mds_as(&self, credentials: &Credentials, request: MdsRequest) -> Result<MdsReply, NetError> {
        let call = || MdsCall::Namespace { credentials: credentials.clone(), request: request.clone() };
        match self.mds_retrying(&request, call)? {
            MdsAnswer::Namespace(MdsReply::Error(e)) => Err(NetError::Namespace(e)),
            MdsAnswer::Namespace(reply) => Ok(reply),
            MdsAnswer::Error(refused) => Err(NetError::MdsRefused(refused)),
            other => Err(NetError::Protocol(format!("unexpected MDS answer {other:?}"))),
        }
    }

    /// The MDS's answer to the namespace call `call` makes for `request`,
    /// sent again while the MDS is out of reach (within `mds_wait`) when
    /// doing `request` twice is safe.
    fn mds_retrying(&self, request: &MdsRequest, call: impl Fn() -> MdsCall) -> Result<MdsAnswer, NetError> {
        let deadline = std::time::Instant::now() + self.mds_wait;
        let mut wait = MDS_RETRY_FIRST;
        loop {
            let call = call();
            let answer = self.call(|r| Cmd::Mds(call, r))?;
            let again = match &answer {
                Err(NetError::Connect { .. }) => true,
                Err(NetError::MdsLost { .. }) => request.is_idempotent(),
                Ok(MdsAnswer::Error(refused)) => refused.is_transient(),
                _ => false,
            };
            if again && std::time::Instant::now() + wait < deadline {
                tracing::info!("the MDS is out of reach; trying again in {wait:?}");
                std::thread::sleep(wait);
                wait = (wait * 2).min(MDS_RETRY_MAX);
                continue;
            }
            return answer;
        }
    }

    /// Lock or unlock bytes of a file at the MDS, for the owner `request`
    /// names (its `client` is filled in by the MDS): `F_SETLK`, or with
    /// `wait` `F_SETLKW`, which returns once the lock is granted, found to
    /// deadlock, or withdrawn because `interrupted` said so (polled while
    /// it waits; the answer is then [`FlockAnswer::Interrupted`], unless
    /// the grant came first). A lost MDS connection fails the call: the
    /// MDS has dropped this client's locks with it.
    pub fn flock(
        &self,
        request: lanefs_proto::flock::FlockRequest,
        wait: bool,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<FlockAnswer, NetError> {
        let ticket = self.flock_tickets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        let call = MdsCall::Flock(FlockCall::Set { request, wait, ticket, replay: false, seal: None });
        self.cmds.send(Cmd::Mds(call, tx)).map_err(|_| NetError::Closed)?;
        // The driver's reply unparks this thread; between two looks at
        // `interrupted` it sleeps, the pause doubling up to its bound.
        let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
        let mut context = std::task::Context::from_waker(&waker);
        let mut pause = FLOCK_SIGNAL_POLL_FIRST;
        let mut look_at = std::time::Instant::now();
        let mut cancelled = false;
        loop {
            match std::pin::Pin::new(&mut rx).poll(&mut context) {
                std::task::Poll::Ready(Ok(answer)) => return flock_answer(answer),
                std::task::Poll::Ready(Err(_)) => return Err(NetError::Closed),
                std::task::Poll::Pending => {}
            }
            let now = std::time::Instant::now();
            if wait && !cancelled && now >= look_at {
                if interrupted() {
                    cancelled = true;
                    // Its own answer says nothing; the waiter's comes on `rx`.
                    self.flock_call(FlockCall::Cancel { ticket })?;
                    continue;
                }
                look_at = now + pause;
                pause = (pause * 2).min(FLOCK_SIGNAL_POLL_MAX);
            }
            let until = if wait && !cancelled { look_at } else { now + FLOCK_SIGNAL_POLL_MAX };
            std::thread::park_timeout(until.saturating_duration_since(now));
        }
    }

    /// `F_GETLK`: the first lock in the way of `request`, or `Free`.
    pub fn flock_get(&self, request: lanefs_proto::flock::FlockRequest) -> Result<FlockAnswer, NetError> {
        self.flock_call(FlockCall::Get { request })
    }

    /// Drop every lock the kernel's lock owner `owner` holds on `file`
    /// (what a close does). A lost MDS connection has dropped them all.
    pub fn flock_unlock_owner(&self, file: lanefs_proto::Fid, owner: u64) -> Result<(), NetError> {
        match self.flock_call(FlockCall::UnlockOwner { file, owner }) {
            Ok(_) | Err(NetError::MdsLost { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// [`Client::mds_as`] of a request that opens a file (`Create`, `Open`,
    /// `OpenFid`) this client keeps open: the MDS records the open in the
    /// same step (see [`Client::mds_opened`]), so that no removal elsewhere
    /// comes between. Also whether it recorded it (not, past its bound:
    /// the file still works, but a removal elsewhere would end its reads);
    /// a recorded open ends with [`Client::mds_closed`].
    pub fn mds_open_as(&self, credentials: &Credentials, request: MdsRequest) -> Result<(MdsReply, bool), NetError> {
        let call = || MdsCall::NamespaceOpen { credentials: credentials.clone(), request: request.clone() };
        match self.mds_retrying(&request, call)? {
            MdsAnswer::NamespaceOpened { reply: MdsReply::Error(e), .. } => Err(NetError::Namespace(e)),
            MdsAnswer::NamespaceOpened { reply, recorded } => Ok((reply, recorded)),
            MdsAnswer::Error(refused) => Err(NetError::MdsRefused(refused)),
            other => Err(NetError::Protocol(format!("unexpected MDS answer {other:?}"))),
        }
    }

    /// Tell the MDS this client keeps `fid` open, so that a removal of it
    /// elsewhere keeps its objects until [`Client::mds_closed`]. `Err` if
    /// the MDS could not record it (the file still works; a removal
    /// elsewhere would end its reads).
    pub fn mds_opened(&self, fid: lanefs_proto::Fid) -> Result<(), NetError> {
        match self.call(|r| Cmd::Mds(MdsCall::Opened { fid }, r))?? {
            MdsAnswer::Opened => Ok(()),
            MdsAnswer::Error(refused) => Err(NetError::MdsRefused(refused)),
            other => Err(NetError::Protocol(format!("unexpected MDS answer {other:?}"))),
        }
    }

    /// One open of `fid` that [`Client::mds_opened`] recorded is closed. A
    /// lost MDS connection has forgotten this client's opens already.
    pub fn mds_closed(&self, fid: lanefs_proto::Fid) -> Result<(), NetError> {
        match self.call(|r| Cmd::Mds(MdsCall::Closed { fid }, r))? {
            Ok(_) | Err(NetError::MdsLost { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn flock_call(&self, call: FlockCall) -> Result<FlockAnswer, NetError> {
        flock_answer(self.call(|r| Cmd::Mds(MdsCall::Flock(call), r))?)
    }

    /// The pages of directory `path`'s listing, in name order, each asked
    /// for when the previous one has been taken: a directory of any size
    /// is listed in bounded replies.
    pub fn readdir_pages(&self, path: &str) -> ReaddirPages<'_> {
        self.readdir_pages_as(&self.credentials, path)
    }

    /// [`Client::readdir_pages`] asked with `credentials`.
    pub fn readdir_pages_as(&self, credentials: &Credentials, path: &str) -> ReaddirPages<'_> {
        let credentials = credentials.clone();
        ReaddirPages { client: self, credentials, path: path.to_string(), cursor: None, done: false }
    }

    /// Every entry of directory `path`, in name order (page after page).
    pub fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, NetError> {
        let mut entries = Vec::new();
        for page in self.readdir_pages(path) {
            entries.extend(page?);
        }
        Ok(entries)
    }

    /// Open a file whose layout is known (from create or open on the MDS).
    pub fn open_layout(&self, path: &str, layout: Layout) -> Result<File, NetError> {
        let handle = self.call(|r| Cmd::Open(layout.clone(), r))?;
        Ok(File { path: path.to_string(), layout, fid: None, handle })
    }

    /// Open the file the MDS described (create or open): its I/O follows
    /// the file if it is restriped while open (`lanefs migrate`): an I/O
    /// that finds an object gone fetches the file's layout again, by fid,
    /// and is done again on the new layout, as a Lustre client refreshes
    /// its layout when its layout lock is called back.
    pub fn open_file(&self, path: &str, info: lanefs_proto::FileInfo) -> Result<File, NetError> {
        let handle = self.call(|r| Cmd::Open(info.layout.clone(), r))?;
        Ok(File { path: path.to_string(), layout: info.layout, fid: Some(info.fid), handle })
    }

    fn op(&self, start: impl FnOnce(&mut CoreClient, Instant) -> OpId + Send + 'static) -> Result<OpOutput, NetError> {
        Ok(self.call(|r| Cmd::Op(Box::new(start), r))??)
    }

    /// An operation on `file`: see [`Client::file_op_with`].
    fn file_op<F>(&self, file: &File, start: F) -> Result<OpOutput, NetError>
    where
        F: FnOnce(&mut CoreClient, Instant) -> OpId + Send + Clone + 'static,
    {
        self.file_op_with(file, || start.clone())
    }

    /// The operation `start()` makes on `file`: one that finds an object
    /// gone because the file was restriped is made again on its new
    /// layout (each time it was restriped meanwhile, up to
    /// [`RELAYOUTS_MAX`] times); a missing object is named.
    fn file_op_with<F>(&self, file: &File, start: impl Fn() -> F) -> Result<OpOutput, NetError>
    where
        F: FnOnce(&mut CoreClient, Instant) -> OpId + Send + 'static,
    {
        let mut layout = None;
        for _ in 0..RELAYOUTS_MAX {
            let named = |error, layout: &Option<Layout>| {
                missing_object(&file.path, layout.as_ref().unwrap_or(&file.layout), error)
            };
            match self.op(start()) {
                Err(error) if object_gone(&error) => match self.relayout(file)? {
                    Some(new) => layout = Some(new),
                    None => return Err(named(error, &layout)),
                },
                result => return result.map_err(|error| named(error, &layout)),
            }
        }
        self.op(start()).map_err(|error| missing_object(&file.path, layout.as_ref().unwrap_or(&file.layout), error))
    }

    /// After an I/O of `file` found an object gone: the file's layout now,
    /// if it is another than the open file had (the file was restriped),
    /// given to the open file so that its I/O goes to the new objects.
    fn relayout(&self, file: &File) -> Result<Option<Layout>, NetError> {
        let Some(fid) = file.fid else { return Ok(None) };
        // By fid, as only nodes may ask: a local user's process, which may
        // not, does no object I/O either.
        let Ok(MdsReply::File(info)) = self.mds(MdsRequest::LayoutFid { fid }) else { return Ok(None) };
        let fh = file.handle;
        let changed = self.call(|r| Cmd::Relayout(fh, info.layout.clone(), r))?;
        if changed {
            tracing::debug!(path = %file.path, fid = fid.0, "the file was restriped: its new layout fetched");
        }
        Ok(changed.then_some(info.layout))
    }

    /// Buffered write: returns once the bytes are in this client's page
    /// cache under a write lock. They are copied once, here, into frames
    /// the cache takes over (again if the write is made again on a
    /// restriped file's new layout).
    pub fn pwrite(&self, file: &File, offset: u64, data: &[u8]) -> Result<(), NetError> {
        let fh = file.handle;
        let pool = &self.pool;
        let start = || {
            let span = PageSpan::copy_from(pool, (offset % PAGE_SIZE) as u16, data);
            move |c: &mut CoreClient, now| c.write_payload(now, fh, offset, Payload::Pages(Box::new(span)))
        };
        self.file_op_with(file, start).map(|_| ())
    }

    pub fn pread(&self, file: &File, offset: u64, len: u64) -> Result<Vec<u8>, NetError> {
        let fh = file.handle;
        match self.file_op(file, move |c, now| c.read(now, fh, offset, len))? {
            OpOutput::Read(data) => Ok(data),
            other => Err(NetError::Protocol(format!("read answered {other:?}"))),
        }
    }

    /// Up to `len` bytes at `offset`, ending at the end of the file as the
    /// OSTs know it now (a mount's `read()`: never bytes past the end).
    /// The size is asked for (a glimpse) at the same time as the bytes, so
    /// the two round trips overlap instead of adding up.
    pub fn pread_to_end(&self, file: &File, offset: u64, len: u64) -> Result<Vec<u8>, NetError> {
        for _ in 0..RELAYOUTS_MAX {
            match self.pread_to_end_once(file, offset, len) {
                Err(error) if object_gone(&error) && self.relayout(file)?.is_some() => continue,
                result => return result,
            }
        }
        self.pread_to_end_once(file, offset, len)
    }

    fn pread_to_end_once(&self, file: &File, offset: u64, len: u64) -> Result<Vec<u8>, NetError> {
        let fh = file.handle;
        let (size_tx, size_rx) = oneshot::channel();
        let (read_tx, read_rx) = oneshot::channel();
        self.cmds.send(Cmd::Op(Box::new(move |c, now| c.stat(now, fh)), size_tx)).map_err(|_| NetError::Closed)?;
        let read: OpStart = Box::new(move |c, now| c.read(now, fh, offset, len));
        self.cmds.send(Cmd::Op(read, read_tx)).map_err(|_| NetError::Closed)?;
        let named = |e: ClientError| missing_object(&file.path, &file.layout, e.into());
        let size = size_rx.blocking_recv().map_err(|_| NetError::Closed)?.map_err(named);
        let data = read_rx.blocking_recv().map_err(|_| NetError::Closed)?.map_err(named);
        let (size, mut data) = match (size?, data?) {
            (OpOutput::Size { size, .. }, OpOutput::Read(data)) => (size, data),
            other => return Err(NetError::Protocol(format!("stat and read answered {other:?}"))),
        };
        data.truncate(usize::try_from(size.saturating_sub(offset)).unwrap_or(usize::MAX));
        Ok(data)
    }

    pub fn fsync(&self, file: &File) -> Result<(), NetError> {
        let fh = file.handle;
        self.file_op(file, move |c, now| c.fsync(now, fh)).map(|_| ())
    }

    /// Flush and close (locks stay cached on the client, as on Lustre).
    pub fn close(&self, file: File) -> Result<(), NetError> {
        let fh = file.handle;
        self.file_op(&file, move |c, now| c.close(now, fh)).map(|_| ())
    }

    /// The file's size, including data still dirty in other clients' caches.
    pub fn size(&self, file: &File) -> Result<u64, NetError> {
        self.size_and_space(file).map(|(size, _)| size)
    }

    /// The file's size, and the bytes of space its objects hold on the
    /// OSTs' disks (what `st_blocks` counts: holes hold none).
    pub fn size_and_space(&self, file: &File) -> Result<(u64, u64), NetError> {
        let fh = file.handle;
        match self.file_op(file, move |c, now| c.stat(now, fh))? {
            OpOutput::Size { size, allocated } => Ok((size, allocated)),
            other => Err(NetError::Protocol(format!("stat answered {other:?}"))),
        }
    }

    pub fn truncate(&self, file: &File, size: u64) -> Result<(), NetError> {
        let fh = file.handle;
        self.file_op(file, move |c, now| c.truncate(now, fh, size)).map(|_| ())
    }

    /// `fallocate(2)`: `Cut::Hole` punches a hole (reads as zeros, holds
    /// no space), `Cut::Reserve` reserves space on the OSTs (`ENOSPC` now
    /// rather than at a later write), growing the file unless `keep_size`.
    pub fn fallocate(&self, file: &File, cut: lanefs_core::msg::Cut) -> Result<(), NetError> {
        let fh = file.handle;
        self.file_op(file, move |c, now| c.fallocate(now, fh, cut)).map(|_| ())
    }

    /// Take a GROUP lock of `gid` on every object of `file`
    /// (`LL_IOC_GROUP_LOCK`): shared with the other holders of `gid`, it
    /// holds off everyone else's I/O until released. `gid` 0 is no group:
    /// refused with [`NetError::Invalid`] (`EINVAL`), as Lustre does. The
    /// library does not know how `file` was opened: a mount refuses a
    /// group lock on a file not open for writing.
    pub fn group_lock(&self, file: &File, gid: u64) -> Result<(), NetError> {
        if gid == 0 {
            return Err(NetError::Invalid(
                "a group lock's group id is not 0 (0 is no group, as on Lustre); choose another".into(),
            ));
        }
        let fh = file.handle;
        self.file_op(file, move |c, now| c.group_lock(now, fh, GroupId(gid))).map(|_| ())
    }

    pub fn group_unlock(&self, file: &File, gid: u64) -> Result<(), NetError> {
        let fh = file.handle;
        self.op(move |c, now| c.group_unlock(now, fh, GroupId(gid))).map(|_| ())
    }

    /// `llapi_ladvise`: lockahead results (asynchronous advice answers at
    /// once; synchronous advice returns when its locks are granted, and
    /// cache advice when every OST it went to has answered: an object gone
    /// from its OST is [`NetError::MissingObject`]).
    pub fn ladvise(&self, file: &File, advices: &[Advice]) -> Result<Vec<LockaheadResult>, NetError> {
        self.call(|r| Cmd::Ladvise(file.handle, advices.to_vec(), r))?
            .map_err(|e| missing_object(&file.path, &file.layout, e.into()))
    }

    /// Lock and data statistics of every OST.
    pub fn ost_stats(&self) -> Result<Vec<OstStats>, NetError> {
        self.call(Cmd::Stats)?
    }

    /// Set OST `ost`'s parameter `name` (`lctl set_param
    /// obdfilter.*.NAME=VALUE`; with `permanent`, kept for its next start).
    /// Only an administrator may (a server key, or the server's own user or
    /// root on a Unix socket); the OSS answers why not otherwise.
    /// Without a value (and with `permanent`), the kept setting is forgotten.
    pub fn set_ost_param(&self, ost: u32, name: &str, value: Option<&str>, permanent: bool) -> Result<(), NetError> {
        let param = OstParam { ost, name: name.to_string(), value: value.map(str::to_string), permanent };
        self.call(|r| Cmd::SetOstParam(param, r))?
    }

    /// Keep `pattern=value` for every client that starts from now on
    /// (`lctl set_param -P` of a client parameter), at the MDS, as Lustre
    /// keeps it at the MGS; the MDS checks it as a client would take it.
    /// Returns every kept setting. Only an administrator may.
    /// Without a value, the setting kept for `pattern` is forgotten.
    pub fn keep_param(&self, pattern: &str, value: Option<&str>) -> Result<Vec<(String, String)>, NetError> {
        let call = MdsCall::KeepParam { pattern: pattern.to_string(), value: value.map(str::to_string) };
        match self.call(|r| Cmd::Mds(call, r))?? {
            MdsAnswer::Params(kept) => Ok(kept),
            MdsAnswer::Error(refused) => Err(NetError::MdsRefused(refused)),
            other => Err(NetError::Protocol(format!("unexpected MDS answer {other:?}"))),
        }
    }

    pub fn counters(&self) -> Result<ClientCounters, NetError> {
        self.call(Cmd::Counters)
    }

    /// Count this client's lock traffic and OST bytes in bins of
    /// `interval` from `origin` on (`lanefs_core::client::timeline`), for
    /// a run's time series.
    pub fn start_timeline(&self, origin: std::time::Instant, interval: StdDuration) -> Result<(), NetError> {
        self.call(|reply| Cmd::StartTimeline(origin, interval, reply))
    }

    /// The bins counted since [`Client::start_timeline`], by index, and
    /// whether events came after the last bin kept; `None` without a
    /// timeline.
    pub fn take_timeline(&self) -> Result<Option<TimelineBins>, NetError> {
        self.call(Cmd::TakeTimeline)
    }

    /// Acknowledged bytes this client keeps until their OSTs commit them
    /// (Lustre's unstable pages; see `lanefs_core::client::replay`).
    pub fn unstable_bytes(&self) -> Result<u64, NetError> {
        self.call(Cmd::UnstableBytes)
    }
}

/// The pages of one directory listing, asked for one at a time
/// ([`Client::readdir_pages`]); ends after the last page or the first error.
pub struct ReaddirPages<'a> {
    client: &'a Client,
    credentials: Credentials,
    path: String,
    /// The last name of the previous page.
    cursor: Option<String>,
    done: bool,
}

impl Iterator for ReaddirPages<'_> {
    type Item = Result<Vec<DirEntry>, NetError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let request = MdsRequest::Readdir { path: self.path.clone(), cursor: self.cursor.take() };
        let page = match self.client.mds_as(&self.credentials, request) {
            Ok(MdsReply::Entries(page)) => Ok(page),
            Ok(other) => Err(NetError::Protocol(format!("readdir answered {other:?}"))),
            Err(error) => Err(error),
        };
        let page = match page {
            Ok(page) => page,
            Err(error) => {
                self.done = true;
                return Some(Err(error));
            }
        };
        let DirPage { entries, more } = page;
        // A page that says more follow but holds nothing would never end.
        self.done = !more || entries.is_empty();
        self.cursor = entries.last().map(|entry| entry.name.clone());
        Some(Ok(entries))
    }
}

/// A failed operation on the file at `path` with `layout` whose OST said
/// an object is missing, as [`NetError::MissingObject`] naming it; any
/// other error as it is.
fn missing_object(path: &str, layout: &Layout, error: NetError) -> NetError {
    let NetError::Client(ClientError::Io { ost, error: IoError::NoSuchObject }) = error else { return error };
    match layout.objects().iter().zip(0u32..).find(|(key, _)| key.ost == ost) {
        Some((key, stripe)) => {
            NetError::MissingObject { path: path.to_string(), stripe, ost: ost.0, object: key.object.0 }
        }
        None => error,
    }
}

/// Whether an operation failed because an object of its file is gone.
fn object_gone(error: &NetError) -> bool {
    matches!(
        error,
        NetError::MissingObject { .. } | NetError::Client(ClientError::Io { error: IoError::NoSuchObject, .. })
    )
}

impl Drop for Client {
    fn drop(&mut self) {
        let (tx, _) = unbounded_channel();
        drop(std::mem::replace(&mut self.cmds, tx));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
