//! The lanefs client library: a file system client over real sockets.
//!
//! [`Client::connect`] reaches the MDS, learns where the OSTs are, connects
//! to every OSS and starts a driver thread that owns lanefs-core's client
//! state machine (lock cache, page cache, writeback). The methods of
//! [`Client`] are blocking calls that hand an operation to the driver and
//! wait for its completion, so any thread (an IOR rank, a test) can use the
//! file system like a POSIX library. Each [`Client`] is one client node:
//! its own locks, its own cache, its own connections.
//!
//! Failure handling: a lost OSS connection fails the operations that need
//! it with a clear error and drops that OST's locks and cached pages (the
//! dirty bytes are reported lost, as after an eviction, and the next fsync
//! or close of a file whose bytes were lost fails); the next operation that
//! needs the OST reconnects. An OSS that cannot be reached when the client
//! connects is tried again the same way, so namespace calls work while an
//! OSS is down. Nothing waits forever on a dead peer.
//!
//! The data path: [`Client::pwrite`] copies the caller's bytes once, on the
//! caller's thread, into page frames; the core caches those frames as they
//! are, and its write RPCs carry them. When an OSS is reached over a Unix
//! socket, the frames come from a shared-memory arena the OSS maps (see
//! [`crate::shm`]), so a write RPC names its frames and the OST writes the
//! object from them: one copy from the caller's buffer to the page cache,
//! one from the page cache to the object file, as with RDMA on a real
//! network. Otherwise the frames are written to the socket as they are.
//! After a lost OSS connection the arena is retired (a server may still be
//! reading frames of writes given up on) and a new one is made.
//!
//! Every namespace call carries the caller's [`Credentials`]
//! ([`ClientOptions::credentials`], by default the calling process's
//! effective uid and gid and its supplementary groups), which the MDS
//! checks permissions for; callers apply their umask to the modes they
//! ask for ([`process_umask`]). Objects are the MDS's to create and
//! destroy: a client never does either.
//!
//! Servers on TCP take only clients with a key of their cluster
//! ([`ClientOptions::key`], see [`crate::auth`]); on Unix sockets the
//! client needs none, and trusts only a server running as its own user or
//! root.

use crate::auth::{describe, tls_failure, ClusterKey, TlsFailure};
use crate::codec::encode;
use crate::codec::read_frame;
use crate::proto::{ClusterInfo, MdsAnswer, MdsCall, OstStats, Role, Wire, MAGIC, PROTOCOL_VERSION};
use crate::shm::{create_arena, send_frame_with_fd};
use crate::transport::{connect_raw, Address, Connected};
use crate::writer::spawn_writer;
use lanefs_core::client::ladvise::{Advice, LockaheadResult};
use lanefs_core::client::{
    Client as CoreClient, ClientConfig, ClientCounters, ClientError, ClientEvent, FileHandle, LadviseOutcome, OpId,
    OpOutput,
};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::GroupId;
use lanefs_core::msg::IoError;
use lanefs_core::msg::Payload;
use lanefs_core::pages::{PagePool, PageSpan};
use lanefs_core::{ClientId, Instant, OstIndex, PAGE_SIZE};
use lanefs_mds::{Credentials, DirEntry, DirPage, MdsReply, MdsRequest};
use std::collections::{BTreeSet, HashMap};
use std::fs::File as FsFile;
use std::os::fd::AsFd;
use std::time::Duration as StdDuration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::oneshot;
use tracing::{debug, warn};

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("cannot reach {address}: {reason}")]
    Connect { address: String, reason: String },
    #[error("{peer} refused the connection: {reason}")]
    Refused { peer: String, reason: String },
    #[error("MDS: {0}")]
    Mds(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("the client driver has stopped")]
    Closed,
    #[error("protocol error: {0}")]
    Protocol(String),
    /// An object of the file is gone from its OST (its file there was
    /// removed, or never made): that stripe's bytes are lost, not zeros.
    #[error(
        "{path}: object {object} of stripe {stripe} is missing on OST{ost:04x} (its OST no longer has it): \
         the data of that stripe is lost; restore the file from a copy, or remove it"
    )]
    MissingObject { path: String, stripe: u32, ost: u32, object: u64 },
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
    /// client held there is given up (Lustre's `obd_timeout`, 100 s).
    pub reconnect_timeout: StdDuration,
    /// Offer OSSes on Unix sockets the page arena in shared memory (write
    /// RPCs then name their pages instead of sending them).
    pub shared_memory: bool,
    /// Who makes this client's namespace calls.
    pub credentials: Credentials,
    /// The cluster key for TCP servers (a client key, or a server key for
    /// tools on server hosts); unused on Unix sockets.
    pub key: Option<ClusterKey>,
}

/// Lustre's default `obd_timeout`.
pub const RECONNECT_TIMEOUT_DEFAULT: StdDuration = StdDuration::from_secs(100);

/// The first wait before trying an OSS again, doubled after each failure up
/// to [`RECONNECT_BACKOFF_MAX`].
const RECONNECT_BACKOFF_FIRST: StdDuration = StdDuration::from_millis(100);
const RECONNECT_BACKOFF_MAX: StdDuration = StdDuration::from_secs(5);

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            core: ClientConfig { recovery: true, ..ClientConfig::default() },
            connect_timeout: StdDuration::from_secs(5),
            reconnect_timeout: RECONNECT_TIMEOUT_DEFAULT,
            shared_memory: true,
            credentials: process_credentials(),
            key: None,
        }
    }
}

/// A failed connection to `address` as a [`NetError`]: a server's refusal
/// of this end's key is `Refused`, anything else `Connect`; both say why.
fn connect_failed(address: &Address, e: &std::io::Error, key: Option<&ClusterKey>) -> NetError {
    match key.and_then(|key| tls_failure(e, key.path())) {
        Some(TlsFailure::ByPeer(reason)) => NetError::Refused { peer: address.to_string(), reason },
        _ => NetError::Connect { address: address.to_string(), reason: describe(e, key) },
    }
}

/// The calling process's effective uid and gid and its supplementary
/// groups (at most `lanefs_mds::GROUPS_MAX`).
pub fn process_credentials() -> Credentials {
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // SAFETY: with a size of 0, getgroups only returns the count; then it
    // writes at most `count` ids into a buffer of that many.
    let groups = unsafe {
        let count = libc::getgroups(0, std::ptr::null_mut());
        let mut groups = vec![0 as libc::gid_t; count.max(0) as usize];
        let written = libc::getgroups(count.max(0), groups.as_mut_ptr());
        groups.truncate(written.max(0) as usize);
        groups
    };
    let mut groups: Vec<u32> = groups.into_iter().filter(|&group| group != gid).collect();
    groups.truncate(lanefs_mds::GROUPS_MAX);
    Credentials { uid, gid, groups }
}

/// The calling process's umask, to apply to the modes of new files and
/// directories (`mode & !umask`).
pub fn process_umask() -> u32 {
    // Linux shows it in /proc/self/status; reading it changes nothing.
    let shown = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        let line = status.lines().find(|line| line.starts_with("Umask:"))?;
        u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).ok()
    });
    shown.unwrap_or_else(|| {
        // SAFETY: umask cannot fail; it is set back at once (a file another
        // thread creates in between would get the wrong mode, hence the
        // /proc reading first).
        unsafe {
            let umask = libc::umask(0o022);
            libc::umask(umask);
            umask as u32
        }
    })
}

/// Frames in a client's page arena: room for its clean cache and every
/// OST's dirty allowance twice over (frames pinned by write RPCs in flight
/// are copied when rewritten, and callers fill frames before the cache
/// takes them), within bounds. Past it, frames come from the heap.
fn arena_frames(core: &ClientConfig, osts: usize) -> u32 {
    let bytes = (core.cached_bytes_max + core.dirty_bytes_max * osts.max(1) as u64).saturating_mul(2);
    (bytes.clamp(64 << 20, 4 << 30) / PAGE_SIZE) as u32
}

/// An open file.
#[derive(Clone, Debug)]
pub struct File {
    pub path: String,
    pub layout: Layout,
    handle: FileHandle,
}

type Reply<T> = oneshot::Sender<T>;
type LadviseReply = Reply<Result<Vec<LockaheadResult>, ClientError>>;
type StatsReply = Reply<Result<Vec<OstStats>, NetError>>;
type OpStart = Box<dyn FnOnce(&mut CoreClient, Instant) -> OpId + Send>;

enum Cmd {
    Mds(MdsCall, Reply<Result<MdsAnswer, NetError>>),
    Open(Layout, Reply<FileHandle>),
    Op(OpStart, Reply<Result<OpOutput, ClientError>>),
    Ladvise(FileHandle, Vec<Advice>, Reply<Result<Vec<LockaheadResult>, ClientError>>),
    Stats(Reply<Result<Vec<OstStats>, NetError>>),
    Counters(Reply<ClientCounters>),
}

/// One client node of a lanefs file system.
pub struct Client {
    cmds: UnboundedSender<Cmd>,
    thread: Option<std::thread::JoinHandle<()>>,
    info: ClusterInfo,
    /// Where `pwrite` puts the caller's bytes: the core's own pool.
    pool: PagePool,
    credentials: Credentials,
}

impl Client {
    /// Connect to the MDS at `mds` and to every OSS it names.
    pub fn connect(mds: &str, options: ClientOptions) -> Result<Client, NetError> {
        let mds = Address::parse(mds).map_err(|reason| NetError::Connect { address: mds.into(), reason })?;
        let credentials = options.credentials.clone();
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
            .map_err(|e| NetError::Connect { address: "driver thread".into(), reason: e.to_string() })?;
        let (info, pool) = ready_rx.recv().map_err(|_| NetError::Closed)??;
        Ok(Client { cmds, thread: Some(thread), info, pool, credentials })
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

    /// One namespace request to the MDS, made with this client's credentials.
    pub fn mds(&self, request: MdsRequest) -> Result<MdsReply, NetError> {
        let call = MdsCall::Namespace { credentials: self.credentials.clone(), request };
        match self.call(|r| Cmd::Mds(call, r))?? {
            MdsAnswer::Namespace(MdsReply::Error(e)) => Err(NetError::Mds(e.to_string())),
            MdsAnswer::Namespace(reply) => Ok(reply),
            MdsAnswer::Error(e) => Err(NetError::Mds(e)),
            other => Err(NetError::Protocol(format!("unexpected MDS answer {other:?}"))),
        }
    }

    /// The pages of directory `path`'s listing, in name order, each asked
    /// for when the previous one has been taken: a directory of any size
    /// is listed in bounded replies.
    pub fn readdir_pages(&self, path: &str) -> ReaddirPages<'_> {
        ReaddirPages { client: self, path: path.to_string(), cursor: None, done: false }
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
        Ok(File { path: path.to_string(), layout, handle })
    }

    fn op(&self, start: impl FnOnce(&mut CoreClient, Instant) -> OpId + Send + 'static) -> Result<OpOutput, NetError> {
        Ok(self.call(|r| Cmd::Op(Box::new(start), r))??)
    }

    /// An operation on `file`: a missing object is named.
    fn file_op(
        &self,
        file: &File,
        start: impl FnOnce(&mut CoreClient, Instant) -> OpId + Send + 'static,
    ) -> Result<OpOutput, NetError> {
        self.op(start).map_err(|error| missing_object(file, error))
    }

    /// Buffered write: returns once the bytes are in this client's page
    /// cache under a write lock. They are copied once, here, into frames
    /// the cache takes over.
    pub fn pwrite(&self, file: &File, offset: u64, data: &[u8]) -> Result<(), NetError> {
        let fh = file.handle;
        let span = PageSpan::copy_from(&self.pool, (offset % PAGE_SIZE) as u16, data);
        self.file_op(file, move |c, now| c.write_payload(now, fh, offset, Payload::Pages(Box::new(span)))).map(|_| ())
    }

    pub fn pread(&self, file: &File, offset: u64, len: u64) -> Result<Vec<u8>, NetError> {
        let fh = file.handle;
        match self.file_op(file, move |c, now| c.read(now, fh, offset, len))? {
            OpOutput::Read(data) => Ok(data),
            other => Err(NetError::Protocol(format!("read answered {other:?}"))),
        }
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
        let fh = file.handle;
        match self.file_op(file, move |c, now| c.stat(now, fh))? {
            OpOutput::Size(size) => Ok(size),
            other => Err(NetError::Protocol(format!("stat answered {other:?}"))),
        }
    }

    pub fn truncate(&self, file: &File, size: u64) -> Result<(), NetError> {
        let fh = file.handle;
        self.file_op(file, move |c, now| c.truncate(now, fh, size)).map(|_| ())
    }

    pub fn group_lock(&self, file: &File, gid: u64) -> Result<(), NetError> {
        let fh = file.handle;
        self.op(move |c, now| c.group_lock(now, fh, GroupId(gid))).map(|_| ())
    }

    pub fn group_unlock(&self, file: &File, gid: u64) -> Result<(), NetError> {
        let fh = file.handle;
        self.op(move |c, now| c.group_unlock(now, fh, GroupId(gid))).map(|_| ())
    }

    /// `llapi_ladvise`: lockahead results (asynchronous advice answers at
    /// once; synchronous advice returns when its locks are granted).
    pub fn ladvise(&self, file: &File, advices: &[Advice]) -> Result<Vec<LockaheadResult>, NetError> {
        Ok(self.call(|r| Cmd::Ladvise(file.handle, advices.to_vec(), r))??)
    }

    /// Lock and data statistics of every OST.
    pub fn ost_stats(&self) -> Result<Vec<OstStats>, NetError> {
        self.call(Cmd::Stats)?
    }

    pub fn counters(&self) -> Result<ClientCounters, NetError> {
        self.call(Cmd::Counters)
    }
}

/// The pages of one directory listing, asked for one at a time
/// ([`Client::readdir_pages`]); ends after the last page or the first error.
pub struct ReaddirPages<'a> {
    client: &'a Client,
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
        let page = match self.client.mds(request) {
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

/// A failed operation on `file` whose OST said an object is missing, as
/// [`NetError::MissingObject`] naming it; any other error as it is.
fn missing_object(file: &File, error: NetError) -> NetError {
    let NetError::Client(ClientError::Io { ost, error: IoError::NoSuchObject }) = error else { return error };
    match file.layout.objects().iter().zip(0u32..).find(|(key, _)| key.ost == ost) {
        Some((key, stripe)) => {
            NetError::MissingObject { path: file.path.clone(), stripe, ost: ost.0, object: key.object.0 }
        }
        None => error,
    }
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

/// Where a frame came from.
enum NetIn {
    Mds(Wire),
    Oss(Wire),
    Closed(Peer, String),
    /// A connection attempt to OSS `oss` (number `link`) ended.
    Opened {
        oss: usize,
        link: u64,
        result: Result<Session, NetError>,
    },
}

/// A connection: the MDS, or OSS `.0`'s connection number `.1` (an old
/// connection's last words must not close its successor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Mds,
    Oss(usize, u64),
}

/// The state of the connection to one OSS.
enum Link {
    Down,
    /// Attempt number `.0` in flight.
    Opening(u64),
    Up {
        link: u64,
        tx: UnboundedSender<Wire>,
        writer: tokio::task::JoinHandle<()>,
    },
}

struct Conn {
    address: Address,
    link: Link,
    osts: Vec<u32>,
    /// Since when this OSS has been out of reach, while it is.
    outage_since: Option<tokio::time::Instant>,
    /// When to try again, and the wait after that.
    retry_at: Option<tokio::time::Instant>,
    backoff: StdDuration,
}

impl Conn {
    fn tx(&self) -> Option<&UnboundedSender<Wire>> {
        match &self.link {
            Link::Up { tx, .. } => Some(tx),
            _ => None,
        }
    }
}

type Session = (UnboundedSender<Wire>, tokio::task::JoinHandle<()>);

struct Driver {
    options: ClientOptions,
    info: ClusterInfo,
    core: CoreClient,
    /// This client's identity for its whole life (see [`crate::exports`]).
    uuid: u64,
    /// The core's page pool, shared with the `Client` handle.
    pool: PagePool,
    /// The memfd of the pool's current arena, to hand to OSSes.
    arena_file: Option<FsFile>,
    clock: std::time::Instant,
    mds_address: Address,
    mds: Option<UnboundedSender<Wire>>,
    oss: Vec<Conn>,
    oss_of_ost: HashMap<u32, usize>,
    link_next: u64,
    net_tx: UnboundedSender<NetIn>,
    net_rx: UnboundedReceiver<NetIn>,
    pending: HashMap<OpId, Reply<Result<OpOutput, ClientError>>>,
    /// Synchronous lockahead waiting for its op: results to give back then.
    ladvise: HashMap<OpId, (Vec<LockaheadResult>, LadviseReply)>,
    mds_calls: HashMap<u64, Reply<Result<MdsAnswer, NetError>>>,
    /// Stats request id -> (OSSes still to answer, answers so far, caller).
    stats_calls: HashMap<u64, (BTreeSet<usize>, Vec<OstStats>, StatsReply)>,
    call_next: u64,
}

/// The page arena a client offers its OSSes: its id, size and memfd.
struct ArenaOffer {
    id: u64,
    frames: u32,
    file: FsFile,
}

/// Connect, send Hello, wait for Welcome, then (on a Unix socket, with an
/// arena to offer) hand the OSS the page arena and wait for its answer.
/// The handshake reads the stream directly, never past its own frames.
/// Returns the writer, whether the arena was attached, and starts the
/// reader task.
async fn open_session(
    address: &Address,
    key: Option<&ClusterKey>,
    timeout: StdDuration,
    peer: Peer,
    net_tx: UnboundedSender<NetIn>,
    arena: Option<ArenaOffer>,
    uuid: Option<u64>,
) -> Result<Session, NetError> {
    let fail = |reason: String| NetError::Connect { address: address.to_string(), reason };
    let handshake = async {
        let mut stream = connect_raw(address, key).await.map_err(|e| connect_failed(address, &e, key))?;
        let hello = Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client };
        let mut frame = Vec::new();
        encode(hello, &mut frame).map_err(|e| fail(e.to_string()))?;
        let written = match &mut stream {
            Connected::Tcp(s) => s.write_all(&frame).await,
            Connected::Tls(s) => s.write_all(&frame).await.and(s.flush().await),
            Connected::Unix(s) => s.write_all(&frame).await,
        };
        written.map_err(|e| connect_failed(address, &e, key))?;
        match read_handshake_frame(&mut stream).await {
            Ok(Some(Wire::Welcome { .. })) => {}
            Ok(Some(Wire::Refused { reason })) => return Err(NetError::Refused { peer: address.to_string(), reason }),
            Ok(other) => return Err(fail(format!("unexpected handshake answer {other:?}"))),
            Err(crate::codec::CodecError::Io(e)) => return Err(connect_failed(address, &e, key)),
            Err(e) => return Err(fail(e.to_string())),
        }
        let shared = match (&stream, arena) {
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
        Ok((stream, shared))
    };
    let (stream, shared) = tokio::time::timeout(timeout, handshake)
        .await
        .map_err(|_| fail(format!("no handshake within {timeout:?}")))??;
    let (r, w) = tokio::io::split(stream.into_box());
    let mut r = BufReader::with_capacity(1 << 18, r);
    let (tx, rx) = unbounded_channel();
    let writer = spawn_writer(w, rx, shared);
    if let Some(uuid) = uuid {
        let _ = tx.send(Wire::Session { uuid });
    }
    tokio::spawn(async move {
        loop {
            match read_frame(&mut r).await {
                Ok(Some(Wire::Refused { reason })) => {
                    let _ = net_tx.send(NetIn::Closed(peer, format!("refused: {reason}")));
                    return;
                }
                Ok(Some(frame)) => {
                    let input = match peer {
                        Peer::Mds => NetIn::Mds(frame),
                        Peer::Oss(..) => NetIn::Oss(frame),
                    };
                    if net_tx.send(input).is_err() {
                        return;
                    }
                }
                Ok(None) => {
                    let _ = net_tx.send(NetIn::Closed(peer, "connection closed".into()));
                    return;
                }
                Err(e) => {
                    let _ = net_tx.send(NetIn::Closed(peer, e.to_string()));
                    return;
                }
            }
        }
    });
    Ok((tx, writer))
}

async fn read_handshake_frame(stream: &mut Connected) -> Result<Option<Wire>, crate::codec::CodecError> {
    match stream {
        Connected::Tcp(s) => read_frame(s).await,
        Connected::Tls(s) => read_frame(s).await,
        Connected::Unix(s) => read_frame(s).await,
    }
}

/// Retire the pool's arena, if any, and give it a new one of `frames`
/// frames in shared memory (or none: the heap, if that fails); returns the
/// new arena's memfd.
fn new_arena(pool: &PagePool, frames: u32) -> Option<FsFile> {
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

fn offer(pool: &PagePool, file: &Option<FsFile>) -> Option<ArenaOffer> {
    let (arena, file) = (pool.arena()?, file.as_ref()?.try_clone().ok()?);
    Some(ArenaOffer { id: arena.id(), frames: arena.frames(), file })
}

/// A random identity for a client's whole life: the process, the time and
/// the standard library's per-process random hash keys.
fn client_uuid() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish().max(1)
}

impl Driver {
    async fn start(mds_address: Address, options: ClientOptions) -> Result<Driver, NetError> {
        let (net_tx, mut net_rx) = unbounded_channel();
        let key = options.key.as_ref();
        let (mds, _) =
            open_session(&mds_address, key, options.connect_timeout, Peer::Mds, net_tx.clone(), None, None).await?;
        let _ = mds.send(Wire::Mds { id: 0, call: MdsCall::ClusterInfo });
        let info = match net_rx.recv().await {
            Some(NetIn::Mds(Wire::MdsReply { answer: MdsAnswer::ClusterInfo(info), .. })) => info,
            Some(NetIn::Mds(other)) => return Err(NetError::Protocol(format!("unexpected MDS message {other:?}"))),
            Some(NetIn::Closed(_, reason)) => return Err(NetError::Mds(reason)),
            _ => return Err(NetError::Closed),
        };
        let mut oss: Vec<Conn> = Vec::new();
        let mut oss_of_ost = HashMap::new();
        for (ost, address) in &info.osts {
            let address = Address::parse(address).map_err(NetError::Protocol)?;
            let index = match oss.iter().position(|c| c.address == address) {
                Some(i) => i,
                None => {
                    oss.push(Conn {
                        address,
                        link: Link::Down,
                        osts: Vec::new(),
                        outage_since: None,
                        retry_at: None,
                        backoff: RECONNECT_BACKOFF_FIRST,
                    });
                    oss.len() - 1
                }
            };
            oss[index].osts.push(*ost);
            oss_of_ost.insert(*ost, index);
        }
        let local = oss.iter().any(|c| matches!(c.address, Address::Unix(_)));
        let pool = PagePool::heap();
        let mut arena_file = None;
        if options.shared_memory && local {
            arena_file = new_arena(&pool, arena_frames(&options.core, info.osts.len()));
        }
        // OSSes are connected to when first needed: commands that need only
        // the MDS (ls, mkdir, getstripe, rm) work while an OSS is down.
        let core = CoreClient::new(ClientId(0), options.core.clone())?.with_page_pool(pool.clone());
        Ok(Driver {
            options,
            info,
            core,
            uuid: client_uuid(),
            pool,
            arena_file,
            clock: std::time::Instant::now(),
            mds_address,
            mds: Some(mds),
            oss,
            oss_of_ost,
            link_next: 1,
            net_tx,
            net_rx,
            pending: HashMap::new(),
            ladvise: HashMap::new(),
            mds_calls: HashMap::new(),
            stats_calls: HashMap::new(),
            call_next: 1,
        })
    }

    fn now(&self) -> Instant {
        Instant(self.clock.elapsed().as_nanos() as u64)
    }

    async fn run(mut self, mut cmds: UnboundedReceiver<Cmd>) {
        loop {
            let core = self.core.poll_timeout().map(|t| {
                let wait = StdDuration::from_nanos(t.0.saturating_sub(self.now().0));
                tokio::time::Instant::now() + wait
            });
            let deadline = [core, self.retry_due()].into_iter().flatten().min();
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                cmd = cmds.recv() => match cmd {
                    Some(cmd) => self.command(cmd).await,
                    None => return self.unmount().await,
                },
                Some(input) = self.net_rx.recv() => self.network(input),
                _ = sleep => {
                    let now = self.now();
                    self.core.handle_timeout(now);
                    self.retry_links();
                }
            }
            self.pump();
        }
    }

    /// The application is done: give every lock back (flushing first) so
    /// that nobody waits for this client's callbacks to time out.
    async fn unmount(mut self) {
        let deadline = tokio::time::Instant::now() + self.options.connect_timeout;
        let now = self.now();
        self.core.release_all(now);
        self.pump();
        while !self.core.lock_cache().is_empty() {
            match tokio::time::timeout_at(deadline, self.net_rx.recv()).await {
                Ok(Some(input)) => self.network(input),
                _ => {
                    warn!("unmount: {} locks not released in time", self.core.lock_cache().len());
                    return;
                }
            }
            let now = self.now();
            self.core.release_all(now);
            self.pump();
        }
        // Tell the OSTs this client will not come back with state, then
        // close the connections: each writer sends what is queued (the
        // cancels, the disconnects), then shuts its socket.
        self.core.disconnect_all();
        self.pump();
        let links: Vec<Link> = self.oss.iter_mut().map(|c| std::mem::replace(&mut c.link, Link::Down)).collect();
        for link in links {
            if let Link::Up { tx, writer, .. } = link {
                drop(tx);
                let _ = tokio::time::timeout_at(deadline, writer).await;
            }
        }
    }

    async fn command(&mut self, cmd: Cmd) {
        let now = self.now();
        match cmd {
            Cmd::Mds(call, reply) => {
                if self.mds.is_none() {
                    match open_session(
                        &self.mds_address,
                        self.options.key.as_ref(),
                        self.options.connect_timeout,
                        Peer::Mds,
                        self.net_tx.clone(),
                        None,
                        None,
                    )
                    .await
                    {
                        Ok((tx, _)) => self.mds = Some(tx),
                        Err(e) => {
                            let _ = reply.send(Err(e));
                            return;
                        }
                    }
                }
                let id = self.call_id();
                self.mds_calls.insert(id, reply);
                let _ = self.mds.as_ref().expect("connected").send(Wire::Mds { id, call });
            }
            Cmd::Open(layout, reply) => {
                let _ = reply.send(self.core.open(layout));
            }
            Cmd::Op(start, reply) => {
                let op = start(&mut self.core, now);
                self.pending.insert(op, reply);
            }
            Cmd::Ladvise(fh, advices, reply) => match self.core.ladvise(now, fh, &advices) {
                Ok(LadviseOutcome::Results(results)) => {
                    let _ = reply.send(Ok(results));
                }
                Ok(LadviseOutcome::Pending { results, op }) => {
                    self.ladvise.insert(op, (results, reply));
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Cmd::Stats(reply) => {
                // Every OSS is asked; one not connected is connected to
                // first, and one out of reach answers nothing.
                let id = self.call_id();
                let all: BTreeSet<usize> = (0..self.oss.len()).collect();
                if all.is_empty() {
                    let _ = reply.send(Ok(Vec::new()));
                    return;
                }
                for &i in &all {
                    match self.oss[i].tx() {
                        Some(tx) => {
                            let _ = tx.send(Wire::StatsRequest { id });
                        }
                        None => self.want(i),
                    }
                }
                self.stats_calls.insert(id, (all, Vec::new(), reply));
            }
            Cmd::Counters(reply) => {
                let _ = reply.send(self.core.counters());
            }
        }
    }

    fn call_id(&mut self) -> u64 {
        self.call_next += 1;
        self.call_next
    }

    fn network(&mut self, input: NetIn) {
        let now = self.now();
        match input {
            NetIn::Oss(Wire::ToClient { ost, message }) => self.core.handle_message(now, OstIndex(ost), message),
            NetIn::Oss(Wire::StatsReply { id, osts }) => {
                let from: BTreeSet<u32> = osts.iter().map(|s| s.ost).collect();
                let oss = self.oss.iter().position(|c| c.osts.iter().any(|o| from.contains(o)));
                if let Some((left, acc, _)) = self.stats_calls.get_mut(&id) {
                    acc.extend(osts);
                    if let Some(i) = oss {
                        left.remove(&i);
                    }
                }
                self.finish_stats();
            }
            NetIn::Mds(Wire::MdsReply { id, answer }) => {
                if let Some(reply) = self.mds_calls.remove(&id) {
                    let _ = reply.send(Ok(answer));
                }
            }
            NetIn::Mds(other) | NetIn::Oss(other) => warn!("unexpected message {other:?}"),
            NetIn::Closed(Peer::Mds, reason) => {
                warn!("MDS connection lost: {reason}");
                self.mds = None;
                for (_, reply) in self.mds_calls.drain() {
                    let _ = reply.send(Err(NetError::Mds(format!("connection lost: {reason}"))));
                }
            }
            NetIn::Closed(Peer::Oss(i, link), reason) => self.link_lost(i, link, &reason),
            NetIn::Opened { oss, link, result } => self.opened(oss, link, result),
        }
    }

    /// Stats calls that every OSS has answered (or failed to) go back.
    fn finish_stats(&mut self) {
        let done: Vec<u64> =
            self.stats_calls.iter().filter(|(_, (left, _, _))| left.is_empty()).map(|(id, _)| *id).collect();
        for id in done {
            let (_, mut acc, reply) = self.stats_calls.remove(&id).expect("present");
            acc.sort_by_key(|s| s.ost);
            let _ = reply.send(Ok(acc));
        }
    }

    /// The connection `link` to OSS `i` is gone: the client waits for a new
    /// one (nothing fails yet) and tries to make it at once.
    fn link_lost(&mut self, i: usize, link: u64, reason: &str) {
        if !matches!(self.oss[i].link, Link::Up { link: up, .. } if up == link) {
            return; // an older connection's last words
        }
        warn!(oss = %self.oss[i].address, "OSS connection lost: {reason}");
        self.oss[i].link = Link::Down;
        if let Some(arena) = self.pool.arena() {
            // The OSS may still be reading frames of writes this client
            // will send again: they must never be reused. A new arena.
            let frames = arena.frames();
            self.arena_file = new_arena(&self.pool, frames);
        }
        let now = self.now();
        for ost in self.oss[i].osts.clone() {
            self.core.handle_disconnected(now, OstIndex(ost));
        }
        self.oss[i].outage_since.get_or_insert_with(tokio::time::Instant::now);
        self.oss[i].backoff = RECONNECT_BACKOFF_FIRST;
        self.open_link(i);
    }

    /// OSS `i` is needed: connect unless a connection is up or coming.
    fn want(&mut self, i: usize) {
        if matches!(self.oss[i].link, Link::Down) && self.oss[i].retry_at.is_none() {
            self.open_link(i);
        }
    }

    /// Start a connection attempt to OSS `i`, in a task of its own.
    fn open_link(&mut self, i: usize) {
        let link = self.link_next;
        self.link_next += 1;
        self.oss[i].link = Link::Opening(link);
        self.oss[i].retry_at = None;
        let address = self.oss[i].address.clone();
        let offer = offer(&self.pool, &self.arena_file);
        let (timeout, net_tx, uuid) = (self.options.connect_timeout, self.net_tx.clone(), self.uuid);
        let key = self.options.key.clone();
        tokio::spawn(async move {
            let result =
                open_session(&address, key.as_ref(), timeout, Peer::Oss(i, link), net_tx.clone(), offer, Some(uuid))
                    .await;
            let _ = net_tx.send(NetIn::Opened { oss: i, link, result });
        });
    }

    fn opened(&mut self, i: usize, link: u64, result: Result<Session, NetError>) {
        if !matches!(self.oss[i].link, Link::Opening(l) if l == link) {
            return;
        }
        let now = self.now();
        match result {
            Ok((tx, writer)) => {
                debug!(oss = %self.oss[i].address, "connected");
                let conn = &mut self.oss[i];
                conn.link = Link::Up { link, tx, writer };
                conn.outage_since = None;
                conn.backoff = RECONNECT_BACKOFF_FIRST;
                for ost in conn.osts.clone() {
                    self.core.handle_reconnected(now, OstIndex(ost));
                }
                let asked: Vec<u64> =
                    self.stats_calls.iter().filter(|(_, (left, _, _))| left.contains(&i)).map(|(id, _)| *id).collect();
                let tx = self.oss[i].tx().expect("just connected").clone();
                for id in asked {
                    let _ = tx.send(Wire::StatsRequest { id });
                }
            }
            Err(e) => {
                let conn = &mut self.oss[i];
                conn.link = Link::Down;
                let since = *conn.outage_since.get_or_insert_with(tokio::time::Instant::now);
                if since.elapsed() >= self.options.reconnect_timeout {
                    // Out of reach too long: give up what needs it.
                    warn!(oss = %conn.address, "OSS out of reach for {:?}: {e}", since.elapsed());
                    conn.outage_since = None;
                    let reason = format!("OSS {} has been out of reach for {:?}: {e}", conn.address, since.elapsed());
                    for ost in conn.osts.clone() {
                        self.core.handle_unreachable(now, OstIndex(ost), &reason);
                    }
                    for (left, _, _) in self.stats_calls.values_mut() {
                        left.remove(&i);
                    }
                    self.finish_stats();
                } else {
                    debug!(oss = %conn.address, "connecting failed ({e}); trying again in {:?}", conn.backoff);
                    conn.retry_at = Some(tokio::time::Instant::now() + conn.backoff);
                    conn.backoff = (conn.backoff * 2).min(RECONNECT_BACKOFF_MAX);
                }
            }
        }
    }

    /// When the next connection attempt is due.
    fn retry_due(&self) -> Option<tokio::time::Instant> {
        self.oss.iter().filter_map(|c| c.retry_at).min()
    }

    fn retry_links(&mut self) {
        let now = tokio::time::Instant::now();
        for i in 0..self.oss.len() {
            if self.oss[i].retry_at.is_some_and(|t| t <= now) {
                self.open_link(i);
            }
        }
    }

    /// Move the core's messages to their connections and its results to
    /// their callers. A message for an OSS not connected is dropped (the
    /// core sends its requests again once the session is up) and the OSS
    /// is connected to.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some((ost, message)) = self.core.poll_transmit() {
                moved = true;
                let Some(&i) = self.oss_of_ost.get(&ost.0) else {
                    let now = self.now();
                    self.core.handle_unreachable(
                        now,
                        ost,
                        "no OSS serves this OST (is its OSS registered with the MDS?)",
                    );
                    continue;
                };
                match self.oss[i].tx() {
                    Some(tx) => {
                        let _ = tx.send(Wire::ToOst { ost: ost.0, message });
                    }
                    None => self.want(i),
                }
            }
            while let Some(event) = self.core.poll_event() {
                moved = true;
                match event {
                    ClientEvent::OpDone { op, result } => {
                        if let Some(reply) = self.pending.remove(&op) {
                            let _ = reply.send(result);
                        } else if let Some((results, reply)) = self.ladvise.remove(&op) {
                            let _ = reply.send(result.map(|_| results));
                        }
                    }
                    ClientEvent::DataLost { ost, bytes } => warn!(%ost, bytes, "dirty data lost"),
                }
            }
            if !moved {
                return;
            }
        }
    }
}
