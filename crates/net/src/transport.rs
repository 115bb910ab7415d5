//! Addresses and byte streams: TCP (`HOST:PORT`) or Unix sockets
//! (`unix:/path/to/socket`), behind one boxed stream type; and the accept
//! loop of a server. This is the one place where streams are made, so it
//! is where they are authenticated (see [`crate::auth`]): TCP streams are
//! TLS with the cluster key, both ways; Unix sockets are files any local
//! user may connect to, whose peers the kernel names (each acts as itself
//! unless it is root or the servers' own user).
//!
//! A Unix socket's file is put in place only where nothing is
//! ([`Listener::bind`]), and a server that holds the fence of the data it
//! serves first removes a socket there that nobody answers on
//! ([`Listener::bind_fenced`]): a second server never cuts the first off
//! by replacing its socket. The accept loop ([`spawn_accept`]) runs each
//! connection's handshake (authentication and `Hello`) in a bounded pool
//! apart from the connections it serves ([`crate::hello`]), serves at
//! most its cap of connections through their handshake, tells the ones
//! past it why ([`AcceptPolicy`]), and backs off when `accept` fails (out
//! of file descriptors, mostly) instead of retrying at once; see
//! [`crate::limits`].

pub use crate::address::Address;
use crate::auth::{self, ClusterKey, Peer};
use crate::fence::Fence;
use crate::hello::{hello, Admission, HandshakeId, Handshakes, Source};
use crate::limits::{
    ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_MIN, HANDSHAKE_DISPLACE_AGE, LISTEN_BACKLOG, REFUSALS_MAX, REFUSAL_LINGER,
};
use crate::shm::{FdInbox, FdStream};
use crate::unix_stream::QuietUnixStream;
use lanefs_proto::wire::Role;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tracing::{debug, warn};

pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for T {}

pub type BoxStream = Box<dyn Stream>;

/// Connect to `address`: with TLS and `key` on TCP (without a key, in
/// plaintext, which a lanefs server refuses, saying why); on a Unix socket,
/// only to a server running as this user or root.
pub async fn connect(address: &Address, key: Option<&ClusterKey>) -> std::io::Result<BoxStream> {
    Ok(connect_raw(address, key).await?.into_box())
}

/// A connected stream of its own type (a Unix socket can carry file
/// descriptors, see [`crate::shm`]).
pub enum Connected {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Unix(QuietUnixStream),
}

impl Connected {
    pub fn into_box(self) -> BoxStream {
        match self {
            Connected::Tcp(s) => Box::new(s),
            Connected::Tls(s) => s,
            Connected::Unix(s) => Box::new(s),
        }
    }
}

pub async fn connect_raw(address: &Address, key: Option<&ClusterKey>) -> std::io::Result<Connected> {
    Ok(match address {
        Address::Tcp(a) => {
            let s = TcpStream::connect(a).await?;
            s.set_nodelay(true)?;
            match key {
                Some(key) => Connected::Tls(Box::new(auth::connect_tls(s, key).await?)),
                None => Connected::Tcp(s),
            }
        }
        Address::Unix(p) => {
            let s = UnixStream::connect(p).await?;
            let (uid, own) = (s.peer_cred()?.uid(), auth::euid());
            if !auth::local_peer_allowed(uid, own) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("the server runs as uid {uid}, neither as you (uid {own}) nor as root: not trusting it"),
                ));
            }
            Connected::Unix(QuietUnixStream::new(s)?)
        }
    })
}

/// An accepted connection through its handshake: authenticated, its
/// `Hello` read and its role checked against its key. On a Unix socket,
/// reads also collect the file descriptors the peer attaches, into `fds`.
pub struct Accepted {
    pub stream: BoxStream,
    pub fds: Option<FdInbox>,
    /// Who the peer is, by its key or its uid: what it may claim to be.
    pub peer: Peer,
    /// What its `Hello` claims, and its key allows.
    pub role: Role,
}

/// An authenticated connection whose `Hello` is still to be read.
struct Authenticated {
    stream: BoxStream,
    fds: Option<FdInbox>,
    peer: Peer,
}

pub enum Listener {
    Tcp(TcpListener, tokio_rustls::TlsAcceptor),
    Unix(UnixListener, std::path::PathBuf),
}

/// A connection accepted, not yet authenticated.
pub enum Incoming {
    Tcp(TcpStream, std::net::SocketAddr, tokio_rustls::TlsAcceptor),
    Unix(UnixStream),
}

/// A server's Unix socket may be connected to by every local user: a user
/// who is not root nor the servers' own acts as itself only.
pub const SOCKET_MODE: u32 = 0o666;

/// Bind a Unix socket at `path`: bound in a fresh 0700 directory beside
/// `path`, made [`SOCKET_MODE`] there, then linked into place, so nobody
/// reaches it before its mode is set. Who may reach it then is up to the
/// directories above `path`; whoever does is named by the kernel, and is a
/// node or acts as itself alone ([`auth::local_peer`]). The link fails if anything is at `path` already: a
/// socket is never put over another server's. With `replace_stale` (the
/// caller holds the fence of the data and found a socket nobody answers
/// on there), the new socket is renamed over the old one instead, so the
/// address never goes missing while a server restarts: a client finds
/// either the old socket, which refuses it, or the new one.
fn bind_socket(path: &Path, replace_stale: bool) -> std::io::Result<UnixListener> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let staging = tempfile::Builder::new().prefix(".b").tempdir_in(parent)?;
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o700))?;
    let staged = staging.path().join("s");
    let listener = UnixListener::bind(&staged)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(SOCKET_MODE))?;
    if replace_stale {
        std::fs::rename(&staged, path)?;
        return Ok(listener);
    }
    std::fs::hard_link(&staged, path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!(
                "{} exists: another server may be using it (a server replaces a socket left by one that \
                 is gone only once it holds the fence of its data)",
                path.display()
            ),
        ),
        _ => e,
    })?;
    Ok(listener)
}

impl Listener {
    /// Listen on `address`. TCP needs the cluster's server key (`key`),
    /// since every TCP connection is TLS; a Unix socket needs none. A file
    /// already at a Unix socket's path is an error: it may be another
    /// server's socket.
    pub async fn bind(address: &Address, key: Option<&ClusterKey>) -> std::io::Result<Listener> {
        Ok(match address {
            Address::Tcp(a) => {
                let no_key = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
                let key = key.ok_or_else(|| {
                    no_key(format!(
                        "listening on TCP ({a}) needs the cluster's server key: give --key FILE or LANEFS_KEY \
                         (lanefs key new DIR makes a cluster's keys; lanefs up --tcp makes them in DATA/keys/)"
                    ))
                })?;
                key.require_server("a server listening on TCP").map_err(|e| no_key(e.to_string()))?;
                let acceptor = key.acceptor().expect("a server key has an acceptor").clone();
                Listener::Tcp(bind_tcp(a).await?, acceptor)
            }
            Address::Unix(p) => Listener::Unix(bind_socket(p, false)?, p.clone()),
        })
    }

    /// Bind `address` for a server that holds `fence` over the data it
    /// serves: a Unix socket left at the path by a server that is gone
    /// (nobody answers on it) is replaced, atomically. A socket somebody
    /// answers on, or a file that is not a socket, is left alone and refused.
    pub async fn bind_fenced(address: &Address, key: Option<&ClusterKey>, fence: &Fence) -> std::io::Result<Listener> {
        match address {
            Address::Unix(p) => {
                let stale = stale_socket(p, fence).await?;
                Ok(Listener::Unix(bind_socket(p, stale)?, p.clone()))
            }
            Address::Tcp(_) => Listener::bind(address, key).await,
        }
    }

    /// Descriptors one accepted connection may hold: its socket, and on a
    /// Unix socket the descriptors a peer can send ahead of the message
    /// that takes them (`shm::FDS_PENDING_MAX`).
    pub fn descriptors_per_connection(&self) -> usize {
        match self {
            Listener::Tcp(..) => 1,
            Listener::Unix(..) => 1 + crate::shm::FDS_PENDING_MAX,
        }
    }

    /// The address peers should use (with the real port after binding port 0).
    pub fn local_address(&self) -> std::io::Result<Address> {
        Ok(match self {
            Listener::Tcp(l, _) => Address::Tcp(l.local_addr()?.to_string()),
            Listener::Unix(_, p) => Address::Unix(p.clone()),
        })
    }

    /// The next connection, as soon as the kernel has it: authenticating
    /// it ([`Incoming::authenticate`]) is left to its own task, so that a
    /// slow peer never holds up the others.
    pub async fn accept(&self) -> std::io::Result<Incoming> {
        Ok(match self {
            Listener::Tcp(l, acceptor) => {
                let (s, from) = l.accept().await?;
                s.set_nodelay(true)?;
                Incoming::Tcp(s, from, acceptor.clone())
            }
            Listener::Unix(l, _) => Incoming::Unix(l.accept().await?.0),
        })
    }
}

impl Incoming {
    /// Where the connection comes from, for the handshake pool's bound
    /// per source.
    fn source(&self) -> Source {
        match self {
            Incoming::Tcp(_, from, _) => Source::Ip(from.ip()),
            Incoming::Unix(s) => match s.peer_cred() {
                Ok(kernel) if auth::local_peer_allowed(kernel.uid(), auth::euid()) => Source::LocalNode,
                Ok(kernel) => Source::LocalUser(kernel.uid()),
                // Unknown: refused when it authenticates; bounded meanwhile.
                Err(_) => Source::LocalUser(u32::MAX),
            },
        }
    }

    /// The whole handshake, by `deadline`: authentication, then `Hello`.
    /// A peer that fails either, or is too slow, is told why where it can
    /// be, and dropped: `None`.
    async fn handshake(
        self,
        id: HandshakeId,
        spoke: tokio::sync::mpsc::Sender<HandshakeId>,
        deadline: tokio::time::Instant,
        timeout: Duration,
    ) -> Option<Accepted> {
        // The pool keeps a peer that has sent something (see
        // `crate::hello`): tell it when the first bytes are in.
        if let Ok(Ok(())) = tokio::time::timeout_at(deadline, self.first_bytes()).await {
            let _ = spoke.try_send(id);
        }
        let Authenticated { mut stream, fds, peer } = self.authenticate(deadline).await?;
        let reason = match tokio::time::timeout_at(deadline, hello(&mut stream, &peer)).await {
            Ok(Ok(role)) => return Some(Accepted { stream, fds, peer, role }),
            Ok(Err(reason)) => reason,
            Err(_) => format!("no Hello within {timeout:?} (handshake timeout)"),
        };
        refuse(stream, reason).await;
        None
    }

    /// Until the peer has sent something (or closed), without taking it:
    /// readiness alone may come before any byte does.
    async fn first_bytes(&self) -> std::io::Result<()> {
        match self {
            Incoming::Tcp(s, ..) => s.peek(&mut [0u8; 1]).await.map(|_| ()),
            Incoming::Unix(s) => loop {
                s.readable().await?;
                let peek = || {
                    let mut byte = 0u8;
                    // SAFETY: a one-byte buffer that lives across the call.
                    let n = unsafe {
                        libc::recv(s.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
                    };
                    if n < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(())
                    }
                };
                match s.try_io(tokio::io::Interest::READABLE, peek) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    done => return done,
                }
            },
        }
    }

    /// Authenticate the peer (see [`crate::auth`]): TLS with a certificate
    /// of the cluster on TCP, by `deadline`; the kernel's word on its uid
    /// on a Unix socket. A peer that fails is told why where it can be,
    /// and dropped: `None`.
    async fn authenticate(self, deadline: tokio::time::Instant) -> Option<Authenticated> {
        match self {
            Incoming::Tcp(s, from, acceptor) => {
                let (tls, peer) = auth::accept_tls(s, from, &acceptor, deadline).await?;
                Some(Authenticated { stream: Box::new(tls), fds: None, peer })
            }
            Incoming::Unix(s) => {
                let peer = match s.peer_cred() {
                    Ok(kernel) => auth::local_peer(kernel.uid(), kernel.gid(), kernel.pid(), auth::euid()),
                    Err(e) => {
                        warn!("refused a local connection whose peer is unknown: {e}");
                        return None;
                    }
                };
                let s = match QuietUnixStream::new(s) {
                    Ok(s) => s,
                    Err(e) => {
                        warn!("refused a local connection: its socket cannot be registered: {e}");
                        return None;
                    }
                };
                let (stream, fds) = FdStream::new(s);
                Some(Authenticated { stream: Box::new(stream), fds: Some(fds), peer })
            }
        }
    }
}

/// Bind a TCP listener whose queue of connections not yet accepted holds
/// [`LISTEN_BACKLOG`] (the usual 128 drops the handshakes of a crowd
/// connecting at once, and the kernel retries them only seconds later).
async fn bind_tcp(address: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(address).await? {
        let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{address} names no address"))
    }))
}

/// Whether the socket file at `path` is one nobody answers on (`false`:
/// nothing is there). A socket somebody answers on, or a file that is not
/// a socket, is an error.
async fn stale_socket(path: &std::path::Path, fence: &Fence) -> std::io::Result<bool> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return Ok(false) };
    let busy = |why: String| std::io::Error::new(std::io::ErrorKind::AddrInUse, why);
    if !meta.file_type().is_socket() {
        return Err(busy(format!("{} exists and is not a socket: give another address", path.display())));
    }
    match UnixStream::connect(path).await {
        Ok(_) => Err(busy(format!(
            "a server answers on {}: give another address, or stop that server first",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            debug!(fenced = %fence.dir().display(), "replacing the stale socket {}", path.display());
            Ok(true)
        }
        Err(_) => Ok(false), // gone meanwhile, or not ours to judge: binding will say
    }
}

/// How an accept loop bounds its connections.
#[derive(Clone, Debug)]
pub struct AcceptPolicy {
    /// Connections served at once, counted once through their handshake;
    /// one past it is told `refusal` and closed.
    pub connections_max: usize,
    pub refusal: String,
    /// Handshakes in flight at once, and from one IP address (see
    /// [`crate::hello`]).
    pub handshakes_max: usize,
    pub handshakes_per_source_max: usize,
    /// Authentication and `Hello` together must take no longer.
    pub handshake_timeout: Duration,
    pub stats: Arc<AcceptStats>,
}

/// What an accept loop has seen, for the server's statistics.
#[derive(Debug, Default)]
pub struct AcceptStats {
    /// Connections being served.
    pub open: AtomicUsize,
    /// Connections refused for the cap.
    pub refused: AtomicU64,
    /// Connections in their handshake.
    pub handshakes: AtomicUsize,
    /// Connections closed before their handshake for their source's bound,
    /// or displaced from a full pool.
    pub handshakes_shed: AtomicU64,
}

/// Errors of one connection, after which the next `accept` may well
/// succeed; any other error backs off.
fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionAborted | ConnectionReset | Interrupted | WouldBlock)
}

/// Tell a connection past the cap why, then close it. Its peer's `Hello`
/// is read first and thrown away (closing a socket with unread bytes would
/// reset the connection and could lose the reason): the connection closes
/// when its peer does, [`REFUSAL_AFTER_HELLO`] after its bytes came, or
/// after [`REFUSAL_LINGER`], whichever is first.
async fn refuse(stream: BoxStream, reason: String) {
    let mut stream = stream;
    let deadline = tokio::time::Instant::now() + REFUSAL_LINGER;
    let told = async {
        lanefs_proto::codec::write_frame(&mut stream, lanefs_proto::wire::Wire::Refused { reason }).await.ok()?;
        stream.shutdown().await.ok()
    };
    if tokio::time::timeout_at(deadline, told).await.is_err() {
        return;
    }
    let mut deadline = deadline;
    let mut sink = [0u8; 1024];
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut sink)).await {
        if n == 0 {
            return;
        }
        deadline = deadline.min(tokio::time::Instant::now() + REFUSAL_AFTER_HELLO);
    }
}

/// How long a refused connection is kept once its peer's bytes came.
const REFUSAL_AFTER_HELLO: Duration = Duration::from_millis(10);

/// Accept connections, each handshaken in the pool (see [`crate::hello`])
/// then served by `serve` on a task of its own, until `stop` turns true.
/// Then the listener closes (nobody can connect to a stopped server), the
/// connections get `grace` to end by themselves (they watch `stop` too,
/// and tell their peer why they close), and whatever is left is aborted.
/// The task ends only when no connection task remains, so awaiting it
/// means the server is entirely gone.
///
/// At most `policy.handshakes_max` connections are in their handshake at
/// once, `policy.handshakes_per_source_max` from one IP address, each
/// for at most `policy.handshake_timeout`; at most
/// `policy.connections_max` connections through it are served at once,
/// and one past them is told `policy.refusal` and closed. When `accept`
/// fails for another reason than the one connection (`EMFILE`, `ENFILE`,
/// `ENOBUFS`: the error would come back at once), accepting pauses, from
/// `ACCEPT_BACKOFF_MIN` doubling to `ACCEPT_BACKOFF_MAX`, with a warning;
/// the connections served meanwhile end (their idle timeouts, their
/// peers) and give their descriptors back.
pub fn spawn_accept<F, Fut>(
    listener: Listener,
    mut stop: tokio::sync::watch::Receiver<bool>,
    grace: std::time::Duration,
    policy: AcceptPolicy,
    serve: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(Accepted) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let serve = Arc::new(serve);
    tokio::spawn(async move {
        let mut pool = HandshakePool::new(&policy);
        let mut connections = tokio::task::JoinSet::new();
        let mut refusals = tokio::task::JoinSet::new();
        let mut backoff: Option<Duration> = None;
        let mut paused_until: Option<tokio::time::Instant> = None;
        loop {
            policy.stats.open.store(connections.len(), Ordering::Relaxed);
            policy.stats.handshakes.store(pool.books.len(), Ordering::Relaxed);
            let pause = async move {
                match paused_until {
                    Some(until) => tokio::time::sleep_until(until).await,
                    None => std::future::pending().await,
                }
            };
            // A full pool takes no connection until a handshake ends or
            // its oldest may be displaced: until then they wait in the
            // kernel's backlog.
            let room_at = pool.books.room_at(std::time::Instant::now());
            let full = async move {
                match room_at {
                    Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                    None => std::future::pending().await,
                }
            };
            // Biased: stop first, then reap ended tasks (so the counts are
            // right), then accept.
            tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                Some(_) = refusals.join_next(), if !refusals.is_empty() => {}
                Some(done) = pool.tasks.join_next_with_id(), if !pool.tasks.is_empty() => {
                    let Some(accepted) = pool.finished(done) else { continue };
                    if connections.len() < policy.connections_max {
                        connections.spawn(serve.as_ref()(accepted));
                        continue;
                    }
                    let refused = policy.stats.refused.fetch_add(1, Ordering::Relaxed) + 1;
                    if refused.is_power_of_two() {
                        warn!(refused, "connection refused: {}", policy.refusal);
                    }
                    // Told inside TLS on TCP (a refusal in plaintext
                    // would read as garbage to a TLS client).
                    if refusals.len() < REFUSALS_MAX {
                        refusals.spawn(refuse(accepted.stream, policy.refusal.clone()));
                    }
                }
                Some(id) = pool.spoken.recv() => pool.books.spoke(id),
                _ = pause => paused_until = None,
                _ = full => {}
                accepted = listener.accept(), if paused_until.is_none() && room_at.is_none() => match accepted {
                    Ok(incoming) => {
                        backoff = None;
                        pool.start(incoming, &policy);
                    }
                    Err(e) if is_per_connection(&e) => debug!("accepting a connection: {e}"),
                    Err(e) => {
                        let wait = backoff.map_or(ACCEPT_BACKOFF_MIN, |b| (b * 2).min(ACCEPT_BACKOFF_MAX));
                        if backoff.is_none() {
                            warn!(
                                connections = connections.len(),
                                "accepting failed ({e}): pausing accepts, up to {ACCEPT_BACKOFF_MAX:?} at a time, \
                                 until it succeeds; if out of descriptors (EMFILE), raise the limit (ulimit -Hn) or \
                                 lower --connections-max"
                            );
                        }
                        backoff = Some(wait);
                        paused_until = Some(tokio::time::Instant::now() + wait);
                    }
                },
            }
        }
        drop(listener);
        pool.tasks.shutdown().await;
        refusals.shutdown().await;
        let drained = tokio::time::timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            connections.shutdown().await;
        }
        policy.stats.open.store(0, Ordering::Relaxed);
        policy.stats.handshakes.store(0, Ordering::Relaxed);
    })
}

/// The handshakes of an accept loop: their books and their tasks.
struct HandshakePool {
    books: Handshakes,
    tasks: tokio::task::JoinSet<Option<Accepted>>,
    /// Each handshake's task, both ways: to end a displaced one, and to
    /// take one that ended (however it did) off the books.
    tasks_by_id: std::collections::HashMap<HandshakeId, tokio::task::AbortHandle>,
    ids_by_task: std::collections::HashMap<tokio::task::Id, HandshakeId>,
    /// Handshakes whose peer has sent something: each says so once.
    spoke: tokio::sync::mpsc::Sender<HandshakeId>,
    spoken: tokio::sync::mpsc::Receiver<HandshakeId>,
}

impl HandshakePool {
    fn new(policy: &AcceptPolicy) -> HandshakePool {
        let (spoke, spoken) = tokio::sync::mpsc::channel(2 * policy.handshakes_max.max(1));
        HandshakePool {
            spoke,
            spoken,
            books: Handshakes::new(
                policy.handshakes_max.max(1),
                policy.handshakes_per_source_max.max(1),
                HANDSHAKE_DISPLACE_AGE,
            ),
            tasks: tokio::task::JoinSet::new(),
            tasks_by_id: std::collections::HashMap::new(),
            ids_by_task: std::collections::HashMap::new(),
        }
    }

    /// Start `incoming`'s handshake, or close it (see [`crate::hello`]).
    fn start(&mut self, incoming: Incoming, policy: &AcceptPolicy) {
        let (id, displaced) = match self.books.admit(incoming.source(), std::time::Instant::now()) {
            Admission::Admitted { id, displaced } => (id, displaced),
            // Not taken from the backlog while full: only a clock gone
            // backwards gets here.
            Admission::Full => return,
            Admission::SourceFull => {
                let shed = policy.stats.handshakes_shed.fetch_add(1, Ordering::Relaxed) + 1;
                if shed.is_power_of_two() {
                    warn!(
                        shed,
                        "closed a connection before its handshake: its address has {} handshakes in flight",
                        policy.handshakes_per_source_max
                    );
                }
                return;
            }
        };
        if let Some(task) = displaced.and_then(|old| self.tasks_by_id.remove(&old)) {
            let shed = policy.stats.handshakes_shed.fetch_add(1, Ordering::Relaxed) + 1;
            if shed.is_power_of_two() {
                warn!(
                    shed,
                    "the handshake pool is full ({}): closed the oldest handshake of its busiest source, \
                     older than {HANDSHAKE_DISPLACE_AGE:?}",
                    policy.handshakes_max
                );
            }
            task.abort();
        }
        let deadline = tokio::time::Instant::now() + policy.handshake_timeout;
        let task = self.tasks.spawn(incoming.handshake(id, self.spoke.clone(), deadline, policy.handshake_timeout));
        self.ids_by_task.insert(task.id(), id);
        self.tasks_by_id.insert(id, task);
        if cfg!(debug_assertions) {
            self.books.check_invariants();
        }
    }

    /// A handshake task ended: off the books; the connection, if through.
    fn finished(
        &mut self,
        done: Result<(tokio::task::Id, Option<Accepted>), tokio::task::JoinError>,
    ) -> Option<Accepted> {
        let (task, accepted) = match done {
            Ok((task, accepted)) => (task, accepted),
            Err(e) => (e.id(), None),
        };
        if let Some(id) = self.ids_by_task.remove(&task) {
            self.tasks_by_id.remove(&id);
            self.books.finish(id);
        }
        accepted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_or_say_why_not() {
        assert_eq!(Address::parse("127.0.0.1:9400").unwrap(), Address::Tcp("127.0.0.1:9400".into()));
        assert_eq!(Address::parse("unix:/tmp/x").unwrap(), Address::Unix("/tmp/x".into()));
        assert!(Address::parse("nohost").unwrap_err().contains("HOST:PORT"));
        assert!(Address::parse("host:99999").is_err());
        assert!(Address::parse("unix:").unwrap_err().contains("path"));
    }

    #[tokio::test]
    async fn only_a_fenced_server_removes_a_socket_and_only_a_stale_one() {
        let dir = tempfile::tempdir().unwrap();
        let fence = Fence::acquire(dir.path(), "test").unwrap();
        let path = dir.path().join("s.sock");
        let address = Address::Unix(path.clone());
        let live = Listener::bind(&address, None).await.unwrap();
        // Somebody answers: neither binding removes the socket.
        let err = Listener::bind(&address, None).await.err().expect("the path is taken");
        assert!(err.to_string().contains("exists"), "{err}");
        let err = Listener::bind_fenced(&address, None, &fence).await.err().expect("a server answers there");
        assert!(err.to_string().contains("a server answers"), "{err}");
        assert!(live.accept().await.is_ok(), "the first server's socket is still its own");
        // Its server gone, the socket is stale: only a fenced bind removes it.
        let std_listener = match live {
            Listener::Unix(l, _) => l.into_std().unwrap(),
            Listener::Tcp(..) => unreachable!(),
        };
        drop(std_listener);
        assert!(path.exists());
        assert!(Listener::bind(&address, None).await.is_err());
        assert!(Listener::bind_fenced(&address, None, &fence).await.is_ok());
        // A file that is not a socket is never removed.
        let file = dir.path().join("data");
        std::fs::write(&file, b"keep").unwrap();
        let err = Listener::bind_fenced(&Address::Unix(file.clone()), None, &fence).await.err().unwrap();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert_eq!(std::fs::read(&file).unwrap(), b"keep");
    }
}
