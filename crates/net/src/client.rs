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
//! needs the OST reconnects. Nothing waits forever on a dead peer.
//!
//! What a server may send: anything. The core client checks each message
//! from an OSS (see `lanefs_core::client`); here, a message for an OST
//! that the sending OSS does not serve, a statistics answer from an OSS
//! not asked or already answered, and an MDS reply for no call in flight
//! are ignored (with a log line).
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
use lanefs_core::msg::Payload;
use lanefs_core::pages::{PagePool, PageSpan};
use lanefs_core::{ClientId, Instant, OstIndex, PAGE_SIZE};
use lanefs_mds::{MdsReply, MdsRequest};
use std::collections::HashMap;
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
}

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub core: ClientConfig,
    /// How long connecting (and reconnecting) to a server may take.
    pub connect_timeout: StdDuration,
    /// Offer OSSes on Unix sockets the page arena in shared memory (write
    /// RPCs then name their pages instead of sending them).
    pub shared_memory: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions { core: ClientConfig::default(), connect_timeout: StdDuration::from_secs(5), shared_memory: true }
    }
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
    Destroy(u32, u64),
}

/// One client node of a lanefs file system.
pub struct Client {
    cmds: UnboundedSender<Cmd>,
    thread: Option<std::thread::JoinHandle<()>>,
    info: ClusterInfo,
    /// Where `pwrite` puts the caller's bytes: the core's own pool.
    pool: PagePool,
}

impl Client {
    /// Connect to the MDS at `mds` and to every OSS it names.
    pub fn connect(mds: &str, options: ClientOptions) -> Result<Client, NetError> {
        let mds = Address::parse(mds).map_err(|reason| NetError::Connect { address: mds.into(), reason })?;
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
        Ok(Client { cmds, thread: Some(thread), info, pool })
    }

    pub fn cluster(&self) -> &ClusterInfo {
        &self.info
    }

    fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T, NetError> {
        let (tx, rx) = oneshot::channel();
        self.cmds.send(make(tx)).map_err(|_| NetError::Closed)?;
        rx.blocking_recv().map_err(|_| NetError::Closed)
    }

    /// One namespace request to the MDS.
    pub fn mds(&self, request: MdsRequest) -> Result<MdsReply, NetError> {
        match self.call(|r| Cmd::Mds(MdsCall::Namespace(request), r))?? {
            MdsAnswer::Namespace(MdsReply::Error(e)) => Err(NetError::Mds(e.to_string())),
            MdsAnswer::Namespace(reply) => Ok(reply),
            MdsAnswer::Error(e) => Err(NetError::Mds(e)),
            other => Err(NetError::Protocol(format!("unexpected MDS answer {other:?}"))),
        }
    }

    /// Open a file whose layout is known (from create or open on the MDS).
    pub fn open_layout(&self, path: &str, layout: Layout) -> Result<File, NetError> {
        let handle = self.call(|r| Cmd::Open(layout.clone(), r))?;
        Ok(File { path: path.to_string(), layout, handle })
    }

    fn op(&self, start: impl FnOnce(&mut CoreClient, Instant) -> OpId + Send + 'static) -> Result<OpOutput, NetError> {
        Ok(self.call(|r| Cmd::Op(Box::new(start), r))??)
    }

    /// Buffered write: returns once the bytes are in this client's page
    /// cache under a write lock. They are copied once, here, into frames
    /// the cache takes over.
    pub fn pwrite(&self, file: &File, offset: u64, data: &[u8]) -> Result<(), NetError> {
        let fh = file.handle;
        let span = PageSpan::copy_from(&self.pool, (offset % PAGE_SIZE) as u16, data);
        self.op(move |c, now| c.write_payload(now, fh, offset, Payload::Pages(Box::new(span)))).map(|_| ())
    }

    pub fn pread(&self, file: &File, offset: u64, len: u64) -> Result<Vec<u8>, NetError> {
        let fh = file.handle;
        match self.op(move |c, now| c.read(now, fh, offset, len))? {
            OpOutput::Read(data) => Ok(data),
            other => Err(NetError::Protocol(format!("read answered {other:?}"))),
        }
    }

    pub fn fsync(&self, file: &File) -> Result<(), NetError> {
        let fh = file.handle;
        self.op(move |c, now| c.fsync(now, fh)).map(|_| ())
    }

    /// Flush and close (locks stay cached on the client, as on Lustre).
    pub fn close(&self, file: File) -> Result<(), NetError> {
        let fh = file.handle;
        self.op(move |c, now| c.close(now, fh)).map(|_| ())
    }

    /// The file's size, including data still dirty in other clients' caches.
    pub fn size(&self, file: &File) -> Result<u64, NetError> {
        let fh = file.handle;
        match self.op(move |c, now| c.stat(now, fh))? {
            OpOutput::Size(size) => Ok(size),
            other => Err(NetError::Protocol(format!("stat answered {other:?}"))),
        }
    }

    pub fn truncate(&self, file: &File, size: u64) -> Result<(), NetError> {
        let fh = file.handle;
        self.op(move |c, now| c.truncate(now, fh, size)).map(|_| ())
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

    /// Destroy the objects of an unlinked file's layout on their OSTs.
    pub fn destroy_objects(&self, layout: &Layout) -> Result<(), NetError> {
        for key in layout.objects() {
            self.cmds.send(Cmd::Destroy(key.ost.0, key.object.0)).map_err(|_| NetError::Closed)?;
        }
        Ok(())
    }

    /// Lock and data statistics of every OST.
    pub fn ost_stats(&self) -> Result<Vec<OstStats>, NetError> {
        self.call(Cmd::Stats)?
    }

    pub fn counters(&self) -> Result<ClientCounters, NetError> {
        self.call(Cmd::Counters)
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
    /// From the OSS of `oss[i]`.
    Oss(usize, Wire),
    Closed(Peer, String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Peer {
    Mds,
    Oss(usize),
}

struct Conn {
    address: Address,
    tx: Option<UnboundedSender<Wire>>,
    writer: Option<tokio::task::JoinHandle<()>>,
    osts: Vec<u32>,
}

type Session = (UnboundedSender<Wire>, tokio::task::JoinHandle<()>);

struct Driver {
    options: ClientOptions,
    info: ClusterInfo,
    core: CoreClient,
    /// The core's page pool, shared with the `Client` handle.
    pool: PagePool,
    /// The memfd of the pool's current arena, to hand to OSSes.
    arena_file: Option<FsFile>,
    clock: std::time::Instant,
    mds_address: Address,
    mds: Option<UnboundedSender<Wire>>,
    oss: Vec<Conn>,
    oss_of_ost: HashMap<u32, usize>,
    net_tx: UnboundedSender<NetIn>,
    net_rx: UnboundedReceiver<NetIn>,
    pending: HashMap<OpId, Reply<Result<OpOutput, ClientError>>>,
    /// Synchronous lockahead waiting for its op: results to give back then.
    ladvise: HashMap<OpId, (Vec<LockaheadResult>, LadviseReply)>,
    mds_calls: HashMap<u64, Reply<Result<MdsAnswer, NetError>>>,
    /// Stats request id -> (the OSSes whose answers are still due,
    /// answers so far, caller).
    stats_calls: HashMap<u64, (Vec<usize>, Vec<OstStats>, StatsReply)>,
    call_next: u64,
}

/// The page arena a client offers its OSSes: its id, size and memfd.
struct ArenaOffer<'a> {
    id: u64,
    frames: u32,
    file: &'a FsFile,
}

/// Connect, send Hello, wait for Welcome, then (on a Unix socket, with an
/// arena to offer) hand the OSS the page arena and wait for its answer.
/// The handshake reads the stream directly, never past its own frames.
/// Returns the writer, whether the arena was attached, and starts the
/// reader task.
async fn open_session(
    address: &Address,
    timeout: StdDuration,
    peer: Peer,
    net_tx: UnboundedSender<NetIn>,
    arena: Option<ArenaOffer<'_>>,
) -> Result<Session, NetError> {
    let fail = |reason: String| NetError::Connect { address: address.to_string(), reason };
    let handshake = async {
        let mut stream = connect_raw(address).await.map_err(|e| fail(e.to_string()))?;
        let hello = Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client };
        let mut frame = Vec::new();
        encode(hello, &mut frame).map_err(|e| fail(e.to_string()))?;
        let written = match &mut stream {
            Connected::Tcp(s) => s.write_all(&frame).await,
            Connected::Unix(s) => s.write_all(&frame).await,
        };
        written.map_err(|e| fail(e.to_string()))?;
        match read_handshake_frame(&mut stream).await {
            Ok(Some(Wire::Welcome { .. })) => {}
            Ok(Some(Wire::Refused { reason })) => return Err(NetError::Refused { peer: address.to_string(), reason }),
            Ok(other) => return Err(fail(format!("unexpected handshake answer {other:?}"))),
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
                        Peer::Oss(i) => NetIn::Oss(i, frame),
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

fn offer<'a>(pool: &PagePool, file: &'a Option<FsFile>) -> Option<ArenaOffer<'a>> {
    let (arena, file) = (pool.arena()?, file.as_ref()?);
    Some(ArenaOffer { id: arena.id(), frames: arena.frames(), file })
}

impl Driver {
    async fn start(mds_address: Address, options: ClientOptions) -> Result<Driver, NetError> {
        let (net_tx, mut net_rx) = unbounded_channel();
        let (mds, _) = open_session(&mds_address, options.connect_timeout, Peer::Mds, net_tx.clone(), None).await?;
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
                    oss.push(Conn { address, tx: None, writer: None, osts: Vec::new() });
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
        for (i, conn) in oss.iter_mut().enumerate() {
            let offer = offer(&pool, &arena_file);
            let (tx, writer) =
                open_session(&conn.address, options.connect_timeout, Peer::Oss(i), net_tx.clone(), offer).await?;
            conn.tx = Some(tx);
            conn.writer = Some(writer);
        }
        let core = CoreClient::new(ClientId(0), options.core.clone())?.with_page_pool(pool.clone());
        Ok(Driver {
            options,
            info,
            core,
            pool,
            arena_file,
            clock: std::time::Instant::now(),
            mds_address,
            mds: Some(mds),
            oss,
            oss_of_ost,
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
            let deadline = self.core.poll_timeout().map(|t| {
                let wait = StdDuration::from_nanos(t.0.saturating_sub(self.now().0));
                tokio::time::Instant::now() + wait
            });
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
                }
            }
            self.pump().await;
        }
    }

    /// The application is done: give every lock back (flushing first) so
    /// that nobody waits for this client's callbacks to time out.
    async fn unmount(mut self) {
        let deadline = tokio::time::Instant::now() + self.options.connect_timeout;
        let now = self.now();
        self.core.release_all(now);
        self.pump().await;
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
            self.pump().await;
        }
        // Close the connections: each writer sends what is queued (the
        // cancels), then shuts its socket.
        let writers: Vec<_> = self.oss.iter_mut().filter_map(|c| c.tx.take().zip(c.writer.take())).collect();
        for (tx, writer) in writers {
            drop(tx);
            let _ = tokio::time::timeout_at(deadline, writer).await;
        }
    }

    async fn command(&mut self, cmd: Cmd) {
        let now = self.now();
        match cmd {
            Cmd::Mds(call, reply) => {
                if self.mds.is_none() {
                    match open_session(
                        &self.mds_address,
                        self.options.connect_timeout,
                        Peer::Mds,
                        self.net_tx.clone(),
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
                let id = self.call_id();
                let live: Vec<usize> = (0..self.oss.len()).filter(|&i| self.oss[i].tx.is_some()).collect();
                for &i in &live {
                    let _ = self.oss[i].tx.as_ref().expect("live").send(Wire::StatsRequest { id });
                }
                if live.is_empty() {
                    let _ = reply.send(Ok(Vec::new()));
                } else {
                    self.stats_calls.insert(id, (live, Vec::new(), reply));
                }
            }
            Cmd::Counters(reply) => {
                let _ = reply.send(self.core.counters());
            }
            Cmd::Destroy(ost, object) => {
                if let Some(tx) = self.oss_of_ost.get(&ost).and_then(|i| self.oss[*i].tx.as_ref()) {
                    let _ = tx.send(Wire::Destroy { ost, object });
                }
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
            NetIn::Oss(i, Wire::ToClient { ost, message }) if self.oss[i].osts.contains(&ost) => {
                self.core.handle_message(now, OstIndex(ost), message)
            }
            NetIn::Oss(i, Wire::StatsReply { id, osts }) => {
                let Some((due, acc, _)) = self.stats_calls.get_mut(&id).filter(|(due, ..)| due.contains(&i)) else {
                    debug!(oss = %self.oss[i].address, id, "statistics answer not asked for ignored");
                    return;
                };
                due.retain(|&d| d != i);
                acc.extend(osts);
                self.answer_stats();
            }
            NetIn::Mds(Wire::MdsReply { id, answer }) => {
                if let Some(reply) = self.mds_calls.remove(&id) {
                    let _ = reply.send(Ok(answer));
                }
            }
            NetIn::Mds(other) | NetIn::Oss(_, other) => {
                debug!("unexpected {} message ignored", crate::oss::variant(&other))
            }
            NetIn::Closed(Peer::Mds, reason) => {
                warn!("MDS connection lost: {reason}");
                self.mds = None;
                for (_, reply) in self.mds_calls.drain() {
                    let _ = reply.send(Err(NetError::Mds(format!("connection lost: {reason}"))));
                }
            }
            NetIn::Closed(Peer::Oss(i), reason) => self.oss_lost(i, &reason),
        }
    }

    fn oss_lost(&mut self, i: usize, reason: &str) {
        if self.oss[i].tx.take().is_none() {
            return; // already handled
        }
        warn!(oss = %self.oss[i].address, "OSS connection lost: {reason}");
        if let Some(arena) = self.pool.arena() {
            // The OSS may still be reading frames of the writes given up on
            // below: they must never be reused. A new arena from now on.
            let frames = arena.frames();
            self.arena_file = new_arena(&self.pool, frames);
        }
        let now = self.now();
        let reason = format!("connection to OSS {} lost: {reason}", self.oss[i].address);
        for ost in self.oss[i].osts.clone() {
            self.core.handle_unreachable(now, OstIndex(ost), &reason);
        }
        for (due, _, _) in self.stats_calls.values_mut() {
            due.retain(|&d| d != i);
        }
        self.answer_stats();
    }

    /// Answer the statistics calls that wait for no OSS any more.
    fn answer_stats(&mut self) {
        let done: Vec<u64> =
            self.stats_calls.iter().filter(|(_, (due, ..))| due.is_empty()).map(|(id, _)| *id).collect();
        for id in done {
            let (_, mut acc, reply) = self.stats_calls.remove(&id).expect("listed");
            acc.sort_by_key(|s| s.ost);
            let _ = reply.send(Ok(acc));
        }
    }

    /// Move the core's messages to their connections and its results to
    /// their callers; reconnect an OSS when there is something to send.
    async fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some((ost, message)) = self.core.poll_transmit() {
                moved = true;
                let Some(&i) = self.oss_of_ost.get(&ost.0) else {
                    let now = self.now();
                    self.core.handle_unreachable(now, ost, "no OSS serves this OST");
                    continue;
                };
                if self.oss[i].tx.is_none() {
                    self.reconnect(i).await;
                }
                match &self.oss[i].tx {
                    Some(tx) => {
                        let _ = tx.send(Wire::ToOst { ost: ost.0, message });
                    }
                    None => {
                        let now = self.now();
                        let reason = format!("OSS {} is down", self.oss[i].address);
                        self.core.handle_unreachable(now, ost, &reason);
                    }
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

    async fn reconnect(&mut self, i: usize) {
        let address = self.oss[i].address.clone();
        let offer = offer(&self.pool, &self.arena_file);
        match open_session(&address, self.options.connect_timeout, Peer::Oss(i), self.net_tx.clone(), offer).await {
            Ok((tx, writer)) => {
                debug!(%address, "reconnected");
                self.oss[i].tx = Some(tx);
                self.oss[i].writer = Some(writer);
            }
            Err(e) => warn!(%address, "reconnect failed: {e}"),
        }
    }
}
