//! A client's connections: opening a session with a server (handshake,
//! page arena, identity), the reader task that hands the driver what the
//! server says, and the state of each OSS's connection.

use crate::NetError;
use crate::{connect_failed, ClientConfig};
use lanefs_core::pages::PagePool;
use lanefs_net::auth::ClusterKey;
use lanefs_net::limits::{QueueLimits, WRITE_STALL_TIMEOUT_DEFAULT};
use lanefs_net::outbox::Outbox;
use lanefs_net::shm::{create_arena, send_frame_with_fd};
use lanefs_net::transport::{connect_raw, Address, Connected};
use lanefs_net::writer::spawn_writer;
use lanefs_proto::codec::{encode, read_frame};
use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use std::fs::File as FsFile;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration as StdDuration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc::UnboundedSender;
use tracing::warn;

/// What a connection's reader task (or a connection attempt) tells the
/// driver.
pub(super) enum NetIn {
    Frame(Peer, Wire),
    /// The connection has ended, and why.
    Closed(Peer, Ending),
    /// A connection attempt to OSS `oss` (number `link`) ended.
    Opened {
        oss: usize,
        link: u64,
        result: Result<Session, NetError>,
    },
}

/// Why a connection ended.
#[derive(Debug)]
pub(super) enum Ending {
    /// The server said it serves this connection no node's requests: it is
    /// a local user's (`Wire::NotANode`), and will be whenever it connects.
    NotANode,
    /// Anything else, in words: a refusal, a lost or closed connection.
    Other(String),
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::NotANode => write!(f, "refused: {}", lanefs_proto::wire::USER_NOT_A_NODE),
            Ending::Other(reason) => f.write_str(reason),
        }
    }
}

/// A connection: the MDS, or OSS `.0`'s connection number `.1` (an old
/// connection's last words must not close its successor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Peer {
    Mds,
    Oss(usize, u64),
}

/// A session: the connection's outgoing queue, its writer task, and how
/// long the server's OSTs wait for a callback's answer before they evict
/// (from its `Welcome`; none from a server that calls no lock back).
pub(super) struct Session {
    pub outbox: Arc<Outbox>,
    pub writer: tokio::task::JoinHandle<()>,
    pub callback_timeout: Option<StdDuration>,
}

/// How long a connection may stay silent while something sent on it
/// waits, and how long it may go unpinged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Silence {
    pub max: StdDuration,
    pub ping: StdDuration,
    /// The callback timeout `max` was cut to half of, if it was.
    pub callback_timeout: Option<StdDuration>,
}

impl Silence {
    /// The client's RPC timeout and ping interval, cut to half of a
    /// server's callback timeout when that is shorter, and to a ping at
    /// least every half of it. A server evicts a holder a callback
    /// timeout after a callback it sent; one this client never got (the
    /// link dropped it) was sent after the last frame it heard. So the
    /// client takes the link for lost, and stops answering reads from
    /// what it caches under that server's locks (`Client::may_trust_cache`
    /// in lanefs-core), before any eviction it has not heard of can have
    /// happened; the other half leaves room for frames in flight and for
    /// the timers' slack. A ping goes out well within it, so that an idle
    /// link's silence is seen in time too.
    pub fn of(rpc_timeout: StdDuration, ping_interval: StdDuration, callback_timeout: Option<StdDuration>) -> Silence {
        let cut = callback_timeout.filter(|t| *t / 2 < rpc_timeout);
        let max = cut.map_or(rpc_timeout, |t| t / 2);
        Silence { max, ping: ping_interval.min(max / 2), callback_timeout: cut }
    }

    /// Why a connection silent for `max` counts as lost, for the log.
    pub fn reason(&self) -> String {
        match self.callback_timeout {
            Some(t) => format!("no answer for {:?} (half the OSTs' callback timeout, {t:?})", self.max),
            None => format!("no answer for {:?} (RPC timeout)", self.max),
        }
    }
}

/// One open connection, with what the liveness check needs: a connection
/// that has been sent something since it last said anything, and has said
/// nothing for its [`Silence::max`], is taken for lost.
pub(super) struct Live {
    pub link: u64,
    pub outbox: Arc<Outbox>,
    pub writer: tokio::task::JoinHandle<()>,
    pub last_sent: tokio::time::Instant,
    pub last_heard: tokio::time::Instant,
    pub silence: Silence,
}

impl Live {
    pub fn new(link: u64, session: Session, rpc_timeout: StdDuration, ping_interval: StdDuration) -> Live {
        let now = tokio::time::Instant::now();
        let silence = Silence::of(rpc_timeout, ping_interval, session.callback_timeout);
        Live { link, outbox: session.outbox, writer: session.writer, last_sent: now, last_heard: now, silence }
    }

    /// Queue `wire` (a closed queue: its reader reports the loss).
    pub fn send(&mut self, wire: Wire) {
        let _ = self.outbox.push(wire);
        self.last_sent = tokio::time::Instant::now();
    }

    /// When this connection counts as lost if it stays silent.
    pub fn silent_deadline(&self) -> Option<tokio::time::Instant> {
        (self.last_sent > self.last_heard).then(|| self.last_heard + self.silence.max)
    }

    /// When it is next pinged if nothing else is sent on it.
    pub fn ping_due(&self) -> tokio::time::Instant {
        self.last_sent + self.silence.ping
    }
}

/// The state of the connection to one OSS.
pub(super) enum Link {
    Down,
    /// Attempt number `.0` in flight.
    Opening(u64),
    Up(Live),
}

pub(super) struct Conn {
    pub address: Address,
    pub link: Link,
    pub osts: Vec<u32>,
    /// Since when this OSS has been out of reach, while it is.
    pub outage_since: Option<tokio::time::Instant>,
    /// When to try again, and the wait after that.
    pub retry_at: Option<tokio::time::Instant>,
    pub backoff: StdDuration,
}

/// The first wait before trying an OSS again, doubled after each failure up
/// to [`RECONNECT_BACKOFF_MAX`].
pub(super) const RECONNECT_BACKOFF_FIRST: StdDuration = StdDuration::from_millis(100);
pub(super) const RECONNECT_BACKOFF_MAX: StdDuration = StdDuration::from_secs(5);

impl Conn {
    pub fn new(address: Address) -> Conn {
        Conn {
            address,
            link: Link::Down,
            osts: Vec::new(),
            outage_since: None,
            retry_at: None,
            backoff: RECONNECT_BACKOFF_FIRST,
        }
    }

    pub fn live(&mut self) -> Option<&mut Live> {
        match &mut self.link {
            Link::Up(live) => Some(live),
            _ => None,
        }
    }
}

/// Messages a client may queue to one server: far more than the core ever
/// has in flight (its lock requests, cancels and RPCs).
const CLIENT_QUEUE_MESSAGES_MAX: usize = 1 << 20;

/// The bounds of a client's queue to one server: twice what its RPCs in
/// flight to every OST can hold, and room for every message's fixed size.
/// Only a server that stops reading fills it; the client never waits on
/// it (its reader pauses for nothing), so the soft limits are the hard.
///
/// Sized for the largest RPC count and size `lctl set_param` may set
/// while the client runs (`max_rpcs_in_flight`, `max_pages_per_rpc`), so
/// that raising them never makes a healthy connection overflow.
pub(super) fn client_queue_limits(core: &ClientConfig, osts: u32) -> QueueLimits {
    let rpcs_max = (core.rpcs_in_flight_max as u64).max(lanefs_net::params::client::RPCS_IN_FLIGHT_MAX);
    let rpc_bytes_max = core.rpc_bytes_max.max(lanefs_core::ost::RPC_BYTES_MAX);
    let rpcs = rpcs_max.saturating_mul(rpc_bytes_max).saturating_mul(u64::from(osts.max(1)));
    let fixed = (CLIENT_QUEUE_MESSAGES_MAX * std::mem::size_of::<Wire>()) as u64;
    let bytes_max = rpcs.saturating_mul(2).saturating_add(fixed).min(usize::MAX as u64) as usize;
    QueueLimits {
        bytes_soft: bytes_max,
        bytes_max,
        messages_soft: CLIENT_QUEUE_MESSAGES_MAX,
        messages_max: CLIENT_QUEUE_MESSAGES_MAX,
        stall_timeout: WRITE_STALL_TIMEOUT_DEFAULT,
    }
}

/// The page arena a client offers its OSSes: its id, size and memfd.
pub(super) struct ArenaOffer {
    pub id: u64,
    pub frames: u32,
    pub file: FsFile,
}

/// How to reach a server: its address, the key to show it (TCP), how long
/// the handshake may take, and the bounds of the connection's queue.
pub(super) struct Dial<'a> {
    pub address: &'a Address,
    pub key: Option<&'a ClusterKey>,
    pub timeout: StdDuration,
    pub limits: &'a QueueLimits,
}

/// Connect, send Hello, wait for Welcome, then (on a Unix socket, with an
/// arena to offer) hand the OSS the page arena and wait for its answer,
/// and name the client (`uuid`, to an OSS). The handshake reads the stream
/// directly, never past its own frames. Returns the connection's queue and
/// writer, and starts the reader task, which tells the driver as `peer`.
pub(super) async fn open_session(
    dial: Dial<'_>,
    peer: Peer,
    net_tx: UnboundedSender<NetIn>,
    arena: Option<ArenaOffer>,
    uuid: Option<u64>,
) -> Result<Session, NetError> {
    let Dial { address, key, timeout, limits } = dial;
    let fail = |reason: String| NetError::Connect { address: address.to_string(), reason, refused: false };
    let mut last_closed = None;
    let handshake = async {
        // A server whose handshake pool is full may close a connection
        // that has not spoken yet (see `lanefs_net::hello`), and one that stops
        // closes those in their handshake: connect again, backing off,
        // within the timeout.
        let mut backoff = HANDSHAKE_RETRY_FIRST;
        let (mut stream, callback_timeout) = loop {
            match hello_welcome(address, key).await {
                Ok(welcomed) => break welcomed,
                Err(Attempt::Failed(e)) => return Err(e),
                Err(Attempt::Closed(closed)) => {
                    tracing::debug!(%address, %closed, ?backoff, "the server closed the connection in its handshake: connecting again");
                    last_closed = Some(closed);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(HANDSHAKE_RETRY_MAX);
                }
            }
        };
        let shared = match (&mut stream, arena) {
            (Connected::Unix(s), Some(offer)) => {
                let mut frame = Vec::new();
                encode(Wire::AttachArena { arena: offer.id, frames: offer.frames }, &mut frame)
                    .map_err(|e| fail(e.to_string()))?;
                send_frame_with_fd(s, &frame, offer.file.as_fd()).await.map_err(|e| fail(e.to_string()))?;
                match read_handshake_frame(&mut stream).await {
                    Ok(Some(Wire::ArenaAttached { arena })) if arena == offer.id => Some(arena),
                    Ok(Some(Wire::ArenaRefused { reason, .. })) => {
                        warn!(%address, "the OSS did not map the page arena ({reason}); bulk data goes on the socket");
                        None
                    }
                    Ok(other) => return Err(fail(format!("unexpected answer to AttachArena: {other:?}"))),
                    Err(e) => return Err(fail(e.to_string())),
                }
            }
            _ => None,
        };
        Ok((stream, shared, callback_timeout))
    };
    let done = tokio::time::timeout(timeout, handshake).await;
    let (stream, shared, callback_timeout) = done.map_err(|_| match &last_closed {
        Some(closed) => fail(format!("no handshake within {timeout:?}: the server closed each attempt ({closed})")),
        None => fail(format!("no handshake within {timeout:?}")),
    })??;
    let (r, w) = tokio::io::split(stream.into_box());
    let r = BufReader::with_capacity(1 << 18, r);
    let outbox = Outbox::new(limits.clone());
    let writer = spawn_writer(w, outbox.clone(), shared);
    if let Some(uuid) = uuid {
        let _ = outbox.push(Wire::Session { uuid });
    }
    let session = Session { outbox: outbox.clone(), writer, callback_timeout };
    spawn_reader(r, outbox, net_tx, peer);
    Ok(session)
}

/// A connection's reader task: hands each frame to the driver, and then
/// why the connection ended.
fn spawn_reader<R>(mut r: R, outbox: Arc<Outbox>, net_tx: UnboundedSender<NetIn>, peer: Peer)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let ending = loop {
            let frame = tokio::select! {
                frame = read_frame(&mut r) => frame,
                reason = outbox.closed() => break Ending::Other(reason),
            };
            match frame {
                Ok(Some(Wire::Refused { reason })) => break Ending::Other(format!("refused: {reason}")),
                Ok(Some(Wire::NotANode)) => break Ending::NotANode,
                Ok(Some(frame)) => {
                    if net_tx.send(NetIn::Frame(peer, frame)).is_err() {
                        outbox.close("the client driver has stopped");
                        return;
                    }
                }
                Ok(None) => break Ending::Other("connection closed".into()),
                Err(e) => break Ending::Other(e.to_string()),
            }
        };
        outbox.close(&ending.to_string());
        let _ = net_tx.send(NetIn::Closed(peer, ending));
    });
}

/// How one attempt at a handshake failed.
enum Attempt {
    /// The server closed the connection: try again.
    Closed(String),
    Failed(NetError),
}

/// Connect (with TLS on TCP), send `Hello` and read `Welcome`: the
/// stream, and the server's callback timeout if it calls locks back.
async fn hello_welcome(
    address: &Address,
    key: Option<&ClusterKey>,
) -> Result<(Connected, Option<StdDuration>), Attempt> {
    let fail =
        |reason: String| Attempt::Failed(NetError::Connect { address: address.to_string(), reason, refused: false });
    let io_failed = |e: std::io::Error| match closed_in_handshake(&e) {
        true => Attempt::Closed(e.to_string()),
        false => Attempt::Failed(connect_failed(address, &e, key)),
    };
    let mut stream = connect_raw(address, key).await.map_err(io_failed)?;
    let hello = Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client };
    let mut frame = Vec::new();
    encode(hello, &mut frame).map_err(|e| fail(e.to_string()))?;
    let written = match &mut stream {
        Connected::Tcp(s) => s.write_all(&frame).await,
        Connected::Tls(s) => s.write_all(&frame).await.and(s.flush().await),
        Connected::Unix(s) => s.write_all(&frame).await,
    };
    written.map_err(io_failed)?;
    match read_handshake_frame(&mut stream).await {
        Ok(Some(Wire::Welcome { callback_timeout_ms, .. })) => {
            Ok((stream, (callback_timeout_ms > 0).then(|| StdDuration::from_millis(callback_timeout_ms))))
        }
        Ok(Some(Wire::Refused { reason })) => {
            Err(Attempt::Failed(NetError::Refused { peer: address.to_string(), reason }))
        }
        Ok(None) => Err(Attempt::Closed("closed before Welcome".into())),
        Ok(Some(other)) => Err(fail(format!("unexpected handshake answer {other:?}"))),
        Err(lanefs_proto::codec::CodecError::Io(e)) => Err(io_failed(e)),
        Err(e) => Err(fail(e.to_string())),
    }
}

/// First wait before connecting again after a server closed the
/// connection in its handshake; it doubles up to [`HANDSHAKE_RETRY_MAX`].
const HANDSHAKE_RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(10);
const HANDSHAKE_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether `e` is the server closing the connection (what a full
/// handshake pool does to a peer that has not spoken yet).
fn closed_in_handshake(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(e.kind(), BrokenPipe | ConnectionAborted | ConnectionReset | UnexpectedEof)
}

async fn read_handshake_frame(stream: &mut Connected) -> Result<Option<Wire>, lanefs_proto::codec::CodecError> {
    match stream {
        Connected::Tcp(s) => read_frame(s).await,
        Connected::Tls(s) => read_frame(s).await,
        Connected::Unix(s) => read_frame(s).await,
    }
}

/// Retire the pool's arena, if any, and give it a new one of `frames`
/// frames in shared memory (or none: the heap, if that fails); returns the
/// new arena's memfd.
pub(super) fn new_arena(pool: &PagePool, frames: u32) -> Option<FsFile> {
    match create_arena(frames) {
        Ok((arena, file)) => {
            pool.replace_arena(Some(arena));
            Some(file)
        }
        Err(e) => {
            warn!("no shared-memory page arena ({e}); bulk data goes on the socket");
            pool.replace_arena(None);
            None
        }
    }
}

pub(super) fn offer(pool: &PagePool, file: &Option<FsFile>) -> Option<ArenaOffer> {
    let (arena, file) = (pool.arena()?, file.as_ref()?.try_clone().ok()?);
    Some(ArenaOffer { id: arena.id(), frames: arena.frames(), file })
}

/// A random identity for a client's whole life: the process, the time and
/// the standard library's per-process random hash keys.
pub(super) fn client_uuid() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish().max(1)
}

#[cfg(test)]
mod tests {
    use super::Silence;
    use std::time::Duration;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_link_is_given_up_before_an_eviction_it_could_not_hear_of() {
        // Lustre's defaults on both sides: half the callback timeout.
        let s = Silence::of(S(100), S(25), Some(S(100)));
        assert_eq!((s.max, s.ping), (S(50), S(25)));
        assert!(s.reason().contains("half the OSTs' callback timeout"), "{}", s.reason());
        // OSTs that evict sooner: the client notices sooner, and pings
        // within that.
        let s = Silence::of(S(100), S(25), Some(S(2)));
        assert_eq!((s.max, s.ping), (S(1), Duration::from_millis(500)));
        // A client whose own timeout is shorter keeps it.
        let s = Silence::of(S(3), S(1), Some(S(100)));
        assert_eq!((s.max, s.ping, s.callback_timeout), (S(3), S(1), None));
        assert!(s.reason().contains("RPC timeout"), "{}", s.reason());
        // A server that calls no lock back (the MDS).
        assert_eq!(Silence::of(S(100), S(25), None), Silence { max: S(100), ping: S(25), callback_timeout: None });
    }
}
