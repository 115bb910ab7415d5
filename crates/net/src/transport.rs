//! Addresses and byte streams: TCP (`HOST:PORT`) or Unix sockets
//! (`unix:/path/to/socket`), behind one boxed stream type. This is the one
//! place where streams are made, so it is where they are authenticated
//! (see [`crate::auth`]): TCP streams are TLS with the cluster key, both
//! ways; Unix sockets are owner-only files whose peers the kernel names.

use crate::auth::{self, ClusterKey, Peer};
use crate::shm::{FdInbox, FdStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tracing::warn;

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

/// Bind a Unix socket at `path` that only its owner can reach: bound in a
/// fresh 0700 directory beside `path`, made 0600 there, then renamed into
/// place (over a stale socket of an earlier run), so it is never reachable
/// by others, not even between the bind and the chmod.
fn bind_owner_only(path: &Path) -> std::io::Result<UnixListener> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let staging = tempfile::Builder::new().prefix(".b").tempdir_in(parent)?;
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o700))?;
    let staged = staging.path().join("s");
    let listener = UnixListener::bind(&staged)?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&staged, path)?;
    Ok(listener)
}

impl Listener {
    /// Listen on `address`. TCP needs the cluster's server key (`key`),
    /// since every TCP connection is TLS; a Unix socket needs none.
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
                Listener::Tcp(TcpListener::bind(a).await?, acceptor)
            }
            Address::Unix(p) => Listener::Unix(bind_owner_only(p)?, p.clone()),
        })
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
                let uid = match s.peer_cred() {
                    Ok(credentials) => credentials.uid(),
                    Err(e) => {
                        warn!("refused a local connection whose peer is unknown: {e}");
                        return None;
                    }
                };
                let own = auth::euid();
                if !auth::local_peer_allowed(uid, own) {
                    warn!(uid, "refused a local connection of another user");
                    let reason = format!(
                        "uid {uid} may not connect: this lanefs server serves its owner (uid {own}) and root only"
                    );
                    auth::refuse(s, reason).await;
                    return None;
                }
                let (stream, fds) = FdStream::new(s);
                Some(Accepted { stream: Box::new(stream), fds: Some(fds), peer: Peer::LocalUser { uid } })
            }
        }
    }
}

/// Accept connections, each authenticated then served by `serve` on a task
/// of its own, until
/// `stop` turns true. Then the listener closes (nobody can connect to a
/// stopped server), the connections get `grace` to end by themselves (they
/// watch `stop` too, and tell their peer why they close), and whatever is
/// left is aborted. The task ends only when no connection task remains, so
/// awaiting it means the server is entirely gone.
pub fn spawn_accept<F, Fut>(
    listener: Listener,
    mut stop: tokio::sync::watch::Receiver<bool>,
    grace: std::time::Duration,
    serve: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(Accepted) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let serve = std::sync::Arc::new(serve);
    tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                accepted = listener.accept() => match accepted {
                    Ok(incoming) => {
                        let serve = serve.clone();
                        connections.spawn(async move {
                            if let Some(accepted) = incoming.authenticate().await {
                                serve(accepted).await;
                            }
                        });
                    }
                    Err(e) => tracing::warn!("accept failed: {e}"),
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        drop(listener);
        let drained = tokio::time::timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            connections.shutdown().await;
        }
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
}
