//! A live client's control endpoint: how `lanefs lctl` reads and sets the
//! parameters of a client in another process (a mount, an IOR rank).
//!
//! Lustre keeps a client's parameters in the kernel, where lctl reads
//! them from /proc and /sys; a lanefs client lives in a process, so each
//! client asked for one ([`crate::ClientOptions::control_dir`])
//! listens on a Unix socket `<dir>/lanefs-<instance>.sock` (mode 0600:
//! its owner and root only), and lctl lists the directory to find them.
//! The client's driver answers on its own thread, between two inputs, so
//! an answer sees the core in a consistent state and a change is applied
//! as one more input (see `lanefs_core::client::Client::set_tunable`).
//!
//! Protocol: one request and one reply per connection, each a big-endian
//! `u32` length and that many bytes of JSON. Bounds: a request is at most
//! [`REQUEST_BYTES_MAX`], a reply at most [`REPLY_BYTES_MAX`] (a larger
//! answer is replaced by an error asking for a narrower pattern); each
//! side gives the other [`TIMEOUT`] to speak. A socket nobody listens on
//! (its client died without removing it) is stale: lctl skips and removes
//! it. Whatever a peer sends is decoded with checks, never trusted to be
//! well-formed.

use lanefs_net::params::client::SetOutcome;
use lanefs_net::params::{Node, Selection};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// The largest request a client takes.
pub const REQUEST_BYTES_MAX: usize = 64 << 10;
/// The largest reply a client sends, and lctl takes.
pub const REPLY_BYTES_MAX: usize = 8 << 20;
/// How long either side waits for the other.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Connections a client serves at once; more wait in the listen queue.
pub const CONNECTIONS_MAX: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// The parameters a selection finds.
    Get(Selection),
    /// Set the writable parameters `pattern` matches to `value`.
    Set { pattern: String, value: String },
    /// Who the client is, for `lctl dl`.
    Devices,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    Nodes(Vec<Node>),
    Set(Vec<SetOutcome>),
    /// A client's devices; `mds` and `osts` (`(index, OSS address)`)
    /// are where they connect (`lctl dl -t`).
    Devices {
        instance: String,
        uuid: String,
        ost_count: u32,
        mds: String,
        osts: Vec<(u32, String)>,
    },
    Error(String),
}

/// Where clients' sockets are: `$LANEFS_RUN_DIR` if set; else
/// `/run/lanefs/clients` for root (as Lustre's tools keep their state under
/// /run); else `$XDG_RUNTIME_DIR/lanefs/clients`; else
/// `/tmp/lanefs-<uid>/clients`.
pub fn run_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LANEFS_RUN_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/run/lanefs/clients");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("lanefs/clients"),
        None => PathBuf::from(format!("/tmp/lanefs-{uid}/clients")),
    }
}

/// A request and where its reply goes, as the driver receives them.
pub(crate) type Incoming = (Request, oneshot::Sender<Reply>);

/// A listening endpoint; the socket file goes with it.
pub(crate) struct Listener {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listen at `<dir>/<name>.sock` (in the current tokio runtime), handing
/// each request to `to`.
pub(crate) fn listen(dir: &Path, name: &str, to: mpsc::UnboundedSender<Incoming>) -> std::io::Result<Listener> {
    use std::os::unix::fs::PermissionsExt;
    lanefs_net::runtime_files::private_dir(dir)?;
    let path = dir.join(format!("{name}.sock"));
    let _ = std::fs::remove_file(&path); // a dead client's, of the same name
    let listener = tokio::net::UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    let task = tokio::spawn(async move {
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else { return };
            let Ok((stream, _)) = listener.accept().await else { continue };
            let to = to.clone();
            tokio::spawn(async move {
                if let Err(e) = tokio::time::timeout(TIMEOUT * 2, serve(stream, to)).await.unwrap_or_else(|_| {
                    Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "control connection timed out"))
                }) {
                    tracing::debug!("control connection: {e}");
                }
                drop(permit);
            });
        }
    });
    Ok(Listener { path, task })
}

async fn serve(mut stream: tokio::net::UnixStream, to: mpsc::UnboundedSender<Incoming>) -> std::io::Result<()> {
    let request = tokio::time::timeout(TIMEOUT, read_frame_async(&mut stream, REQUEST_BYTES_MAX))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request in time"))??;
    let reply = match serde_json::from_slice::<Request>(&request) {
        Ok(request) => {
            let (tx, rx) = oneshot::channel();
            if to.send((request, tx)).is_err() {
                return Ok(()); // the client is stopping
            }
            rx.await.unwrap_or_else(|_| Reply::Error("the client stopped".into()))
        }
        Err(e) => Reply::Error(format!("malformed request: {e}")),
    };
    let mut bytes = serde_json::to_vec(&reply).map_err(std::io::Error::other)?;
    if bytes.len() > REPLY_BYTES_MAX {
        let error = Reply::Error(format!(
            "the answer is {} bytes, past the {REPLY_BYTES_MAX}-byte limit: give a narrower pattern",
            bytes.len()
        ));
        bytes = serde_json::to_vec(&error).map_err(std::io::Error::other)?;
    }
    stream.write_all(&(bytes.len() as u32).to_be_bytes()).await?;
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

async fn read_frame_async(stream: &mut tokio::net::UnixStream, max: usize) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a {len}-byte frame (at most {max})"),
        ));
    }
    let mut buf = vec![0; len];
    stream.read_exact(&mut buf).await?;
    Ok(buf)
}

/// Why a client could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Nobody listens: the client is gone (its socket was removed).
    #[error("{0}: no client listens there (stale socket removed)")]
    Stale(PathBuf),
    #[error("{path}: the client did not answer within {TIMEOUT:?} (is it stopped or wedged?)")]
    TimedOut { path: PathBuf },
    #[error("{path}: {reason}")]
    Failed { path: PathBuf, reason: String },
}

/// The sockets of the clients in `dir`, in name order (none if it does not
/// exist).
pub fn client_sockets(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    paths.sort();
    paths
}

/// Ask the client at `path` (blocking). A stale socket is removed.
pub fn ask(path: &Path, request: &Request) -> Result<Reply, ControlError> {
    use std::os::unix::net::UnixStream;
    let failed = |reason: String| ControlError::Failed { path: path.to_path_buf(), reason };
    let mut stream = match UnixStream::connect(path) {
        Ok(stream) => stream,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound) => {
            let _ = std::fs::remove_file(path);
            return Err(ControlError::Stale(path.to_path_buf()));
        }
        Err(e) => return Err(failed(e.to_string())),
    };
    let timed_out = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            ControlError::TimedOut { path: path.to_path_buf() }
        }
        _ => failed(e.to_string()),
    };
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| failed(e.to_string()))?;
    stream.set_write_timeout(Some(TIMEOUT)).map_err(|e| failed(e.to_string()))?;
    let bytes = serde_json::to_vec(request).map_err(|e| failed(e.to_string()))?;
    if bytes.len() > REQUEST_BYTES_MAX {
        return Err(failed(format!("the request is {} bytes, past the {REQUEST_BYTES_MAX}-byte limit", bytes.len())));
    }
    stream.write_all(&(bytes.len() as u32).to_be_bytes()).map_err(timed_out)?;
    stream.write_all(&bytes).map_err(timed_out)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(timed_out)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > REPLY_BYTES_MAX {
        return Err(failed(format!("a {len}-byte answer, past the {REPLY_BYTES_MAX}-byte limit")));
    }
    let mut buf = vec![0; len];
    stream.read_exact(&mut buf).map_err(timed_out)?;
    serde_json::from_slice(&buf).map_err(|e| failed(format!("a malformed answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_socket_is_removed_and_a_silent_one_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join("lanefs-ffff000000000001.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        assert!(matches!(ask(&stale, &Request::Devices), Err(ControlError::Stale(_))));
        assert!(!stale.exists(), "stale socket removed");
        // A listener that never answers: lctl gives up after TIMEOUT.
        let silent = dir.path().join("lanefs-ffff000000000002.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&silent).unwrap();
        let started = std::time::Instant::now();
        let error = ask(&silent, &Request::Devices).unwrap_err();
        assert!(matches!(error, ControlError::TimedOut { .. }), "{error}");
        assert!(started.elapsed() >= TIMEOUT && error.to_string().contains("did not answer"));
        assert_eq!(client_sockets(dir.path()), vec![silent]);
    }

    #[test]
    fn an_endpoint_answers_and_bounds_what_it_reads() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel::<Incoming>();
        let listener = rt.block_on(async { listen(dir.path(), "lanefs-ffff000000000003", tx) }).unwrap();
        rt.spawn(async move {
            while let Some((_, reply)) = rx.recv().await {
                let _ = reply.send(Reply::Devices {
                    instance: "i".into(),
                    uuid: "u".into(),
                    ost_count: 2,
                    mds: "m".into(),
                    osts: Vec::new(),
                });
            }
        });
        let path = dir.path().join("lanefs-ffff000000000003.sock");
        assert_eq!(
            ask(&path, &Request::Devices).unwrap(),
            Reply::Devices { instance: "i".into(), uuid: "u".into(), ost_count: 2, mds: "m".into(), osts: Vec::new() }
        );
        // A frame past the bound, then garbage: no answer, no panic.
        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        s.write_all(&u32::MAX.to_be_bytes()).unwrap();
        let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
        s.write_all(&3u32.to_be_bytes()).unwrap();
        s.write_all(b"{{{").unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut body = vec![0; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).unwrap();
        assert!(String::from_utf8_lossy(&body).contains("malformed request"));
        drop(listener);
        assert!(!path.exists(), "the socket goes with the endpoint");
        drop(rt);
    }
}
