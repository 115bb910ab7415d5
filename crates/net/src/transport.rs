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
//! by replacing its socket. The accept loop ([`spawn_accept`]) serves at
//! most its cap of connections, tells the ones past it why
//! ([`AcceptPolicy`]), and backs off when `accept` fails (out of file
//! descriptors, mostly) instead of retrying at once; see [`crate::limits`].

use crate::auth::{self, ClusterKey, Peer};
use crate::fence::Fence;
use crate::limits::{ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_MIN, LISTEN_BACKLOG, REFUSALS_MAX, REFUSAL_LINGER};
use crate::shm::{FdInbox, FdStream};
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Tcp(String),
    Unix(std::path::PathBuf),
}

impl Address {
    /// `unix:/path` or `host:port`.
    pub fn parse(s: &str) -> Result<Address, String> {
        if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(format!("address {s:?}: a Unix socket address needs a path, e.g. unix:/tmp/lanefs.sock"));
            }
            return Ok(Address::Unix(path.into()));
        }
        match s.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(Address::Tcp(s.to_string())),
            _ => Err(format!("address {s:?} is neither HOST:PORT (e.g. 127.0.0.1:9400) nor unix:/PATH")),
        }
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Tcp(a) => f.write_str(a),
            Address::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

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
    Unix(UnixStream),
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
            Connected::Unix(s)
        }
    })
}

/// An accepted, authenticated connection: on a Unix socket, reads also
/// collect the file descriptors the peer attaches, into `fds`.
pub struct Accepted {
    pub stream: BoxStream,
    pub fds: Option<FdInbox>,
    /// Who the peer is, by its key or its uid: what it may claim to be.
    pub peer: Peer,
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
    /// Authenticate the peer (see [`crate::auth`]): TLS with a certificate
    /// of the cluster on TCP, the kernel's word on its uid on a Unix
    /// socket. A peer that fails is told why where it can be, and dropped:
    /// `None`.
    pub async fn authenticate(self) -> Option<Accepted> {
        match self {
            Incoming::Tcp(s, from, acceptor) => {
                let (tls, peer) = auth::accept_tls(s, from, &acceptor).await?;
                Some(Accepted { stream: Box::new(tls), fds: None, peer })
            }
            Incoming::Unix(s) => {
                let peer = match s.peer_cred() {
                    Ok(kernel) => auth::local_peer(kernel.uid(), kernel.gid(), kernel.pid(), auth::euid()),
                    Err(e) => {
                        warn!("refused a local connection whose peer is unknown: {e}");
                        return None;
                    }
                };
                let (stream, fds) = FdStream::new(s);
                Some(Accepted { stream: Box::new(stream), fds: Some(fds), peer })
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
    /// Connections served at once; one past it is told `refusal` and closed.
    pub connections_max: usize,
    pub refusal: String,
    pub stats: Arc<AcceptStats>,
}

/// What an accept loop has seen, for the server's statistics.
#[derive(Debug, Default)]
pub struct AcceptStats {
    /// Connections being served.
    pub open: AtomicUsize,
    /// Connections refused for the cap.
    pub refused: AtomicU64,
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
        crate::codec::write_frame(&mut stream, crate::proto::Wire::Refused { reason }).await.ok()?;
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

/// Accept connections, each authenticated then served by `serve` on a task
/// of its own, until
/// `stop` turns true. Then the listener closes (nobody can connect to a
/// stopped server), the connections get `grace` to end by themselves (they
/// watch `stop` too, and tell their peer why they close), and whatever is
/// left is aborted. The task ends only when no connection task remains, so
/// awaiting it means the server is entirely gone.
///
/// At most `policy.connections_max` connections are served at once; one
/// past them is told `policy.refusal` and closed. When `accept` fails for
/// another reason than the one connection (`EMFILE`, `ENFILE`, `ENOBUFS`:
/// the error would come back at once), accepting pauses, from
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
        let mut connections = tokio::task::JoinSet::new();
        let mut refusals = tokio::task::JoinSet::new();
        let mut backoff: Option<Duration> = None;
        let mut paused_until: Option<tokio::time::Instant> = None;
        loop {
            policy.stats.open.store(connections.len(), Ordering::Relaxed);
            let pause = async move {
                match paused_until {
                    Some(until) => tokio::time::sleep_until(until).await,
                    None => std::future::pending().await,
                }
            };
            // Biased: stop first, then reap ended tasks (so the count is
            // right), then accept.
            tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
                Some(_) = refusals.join_next(), if !refusals.is_empty() => {}
                _ = pause => paused_until = None,
                accepted = listener.accept(), if paused_until.is_none() => match accepted {
                    Ok(incoming) if connections.len() < policy.connections_max => {
                        backoff = None;
                        let serve = serve.clone();
                        connections.spawn(async move {
                            if let Some(accepted) = incoming.authenticate().await {
                                serve(accepted).await;
                            }
                        });
                    }
                    Ok(incoming) => {
                        backoff = None;
                        let refused = policy.stats.refused.fetch_add(1, Ordering::Relaxed) + 1;
                        if refused.is_power_of_two() {
                            warn!(refused, "connection refused: {}", policy.refusal);
                        }
                        // Told inside TLS on TCP (a refusal in plaintext
                        // would read as garbage to a TLS client).
                        if refusals.len() < REFUSALS_MAX {
                            let reason = policy.refusal.clone();
                            refusals.spawn(async move {
                                if let Some(accepted) = incoming.authenticate().await {
                                    refuse(accepted.stream, reason).await;
                                }
                            });
                        }
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
        refusals.shutdown().await;
        let drained = tokio::time::timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            connections.shutdown().await;
        }
        policy.stats.open.store(0, Ordering::Relaxed);
    })
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
