//! Addresses and byte streams: TCP (`HOST:PORT`) or Unix sockets
//! (`unix:/path/to/socket`), behind one boxed stream type.

use crate::shm::{FdInbox, FdStream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

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

pub async fn connect(address: &Address) -> std::io::Result<BoxStream> {
    Ok(connect_raw(address).await?.into_box())
}

/// A connected stream of its own type (a Unix socket can carry file
/// descriptors, see [`crate::shm`]).
pub enum Connected {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Connected {
    pub fn into_box(self) -> BoxStream {
        match self {
            Connected::Tcp(s) => Box::new(s),
            Connected::Unix(s) => Box::new(s),
        }
    }
}

pub async fn connect_raw(address: &Address) -> std::io::Result<Connected> {
    Ok(match address {
        Address::Tcp(a) => {
            let s = TcpStream::connect(a).await?;
            s.set_nodelay(true)?;
            Connected::Tcp(s)
        }
        Address::Unix(p) => Connected::Unix(UnixStream::connect(p).await?),
    })
}

/// An accepted connection: on a Unix socket, reads also collect the file
/// descriptors the peer attaches, into `fds`.
pub struct Accepted {
    pub stream: BoxStream,
    pub fds: Option<FdInbox>,
}

pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, std::path::PathBuf),
}

impl Listener {
    pub async fn bind(address: &Address) -> std::io::Result<Listener> {
        Ok(match address {
            Address::Tcp(a) => Listener::Tcp(TcpListener::bind(a).await?),
            Address::Unix(p) => {
                let _ = std::fs::remove_file(p); // a stale socket from a previous run
                Listener::Unix(UnixListener::bind(p)?, p.clone())
            }
        })
    }

    /// The address peers should use (with the real port after binding port 0).
    pub fn local_address(&self) -> std::io::Result<Address> {
        Ok(match self {
            Listener::Tcp(l) => Address::Tcp(l.local_addr()?.to_string()),
            Listener::Unix(_, p) => Address::Unix(p.clone()),
        })
    }

    pub async fn accept(&self) -> std::io::Result<Accepted> {
        Ok(match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept().await?;
                s.set_nodelay(true)?;
                Accepted { stream: Box::new(s), fds: None }
            }
            Listener::Unix(l, _) => {
                let (stream, fds) = FdStream::new(l.accept().await?.0);
                Accepted { stream: Box::new(stream), fds: Some(fds) }
            }
        })
    }
}

/// Accept connections, each served by `serve` on a task of its own, until
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
    F: Fn(Accepted) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                accepted = listener.accept() => match accepted {
                    Ok(stream) => {
                        connections.spawn(serve(stream));
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
