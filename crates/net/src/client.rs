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

use crate::codec::read_frame;
use crate::proto::{ClusterInfo, MdsAnswer, MdsCall, OstStats, Role, Wire, MAGIC, PROTOCOL_VERSION};
use crate::transport::{connect, Address};
use crate::writer::spawn_writer;
use lanefs_core::client::ladvise::{Advice, LockaheadResult};
use lanefs_core::client::{
    Client as CoreClient, ClientConfig, ClientCounters, ClientError, ClientEvent, FileHandle, LadviseOutcome, OpId,
    OpOutput,
};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::GroupId;
use lanefs_core::{ClientId, Instant, OstIndex};
use lanefs_mds::{MdsReply, MdsRequest};
use std::collections::HashMap;
use std::time::Duration as StdDuration;
use tokio::io::BufReader;
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
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions { core: ClientConfig::default(), connect_timeout: StdDuration::from_secs(5) }
    }
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
                            let _ = ready_tx.send(Ok(driver.info.clone()));
                            driver.run(rx).await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                })
            })
            .map_err(|e| NetError::Connect { address: "driver thread".into(), reason: e.to_string() })?;
        let info = ready_rx.recv().map_err(|_| NetError::Closed)??;
        Ok(Client { cmds, thread: Some(thread), info })
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

    pub fn pwrite(&self, file: &File, offset: u64, data: &[u8]) -> Result<(), NetError> {
        let (fh, data) = (file.handle, data.to_vec());
        self.op(move |c, now| c.write(now, fh, offset, data)).map(|_| ())
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
    Oss(Wire),
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
    /// Stats request id -> (OSS answers still due, answers so far, caller).
    stats_calls: HashMap<u64, (usize, Vec<OstStats>, StatsReply)>,
    call_next: u64,
}

/// Connect, send Hello, wait for Welcome; returns the writer and the reader task's output.
async fn open_session(
    address: &Address,
    timeout: StdDuration,
    peer: Peer,
    net_tx: UnboundedSender<NetIn>,
) -> Result<Session, NetError> {
    let fail = |reason: String| NetError::Connect { address: address.to_string(), reason };
    let stream = tokio::time::timeout(timeout, connect(address))
        .await
        .map_err(|_| fail(format!("no answer within {timeout:?}")))?
        .map_err(|e| fail(e.to_string()))?;
    let (r, w) = tokio::io::split(stream);
    let mut r = BufReader::with_capacity(1 << 18, r);
    let (tx, rx) = unbounded_channel();
    let writer = spawn_writer(w, rx);
    let _ = tx.send(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client });
    match tokio::time::timeout(timeout, read_frame(&mut r)).await {
        Ok(Ok(Some(Wire::Welcome { .. }))) => {}
        Ok(Ok(Some(Wire::Refused { reason }))) => return Err(NetError::Refused { peer: address.to_string(), reason }),
        Ok(Ok(other)) => return Err(fail(format!("unexpected handshake answer {other:?}"))),
        Ok(Err(e)) => return Err(fail(e.to_string())),
        Err(_) => return Err(fail(format!("no handshake answer within {timeout:?}"))),
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
                        Peer::Oss(_) => NetIn::Oss(frame),
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

impl Driver {
    async fn start(mds_address: Address, options: ClientOptions) -> Result<Driver, NetError> {
        let (net_tx, mut net_rx) = unbounded_channel();
        let (mds, _) = open_session(&mds_address, options.connect_timeout, Peer::Mds, net_tx.clone()).await?;
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
        for (i, conn) in oss.iter_mut().enumerate() {
            let (tx, writer) =
                open_session(&conn.address, options.connect_timeout, Peer::Oss(i), net_tx.clone()).await?;
            conn.tx = Some(tx);
            conn.writer = Some(writer);
        }
        let core = CoreClient::new(ClientId(0), options.core.clone())?;
        Ok(Driver {
            options,
            info,
            core,
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
                    match open_session(&self.mds_address, self.options.connect_timeout, Peer::Mds, self.net_tx.clone())
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
                let live: Vec<&UnboundedSender<Wire>> = self.oss.iter().filter_map(|c| c.tx.as_ref()).collect();
                for tx in &live {
                    let _ = tx.send(Wire::StatsRequest { id });
                }
                if live.is_empty() {
                    let _ = reply.send(Ok(Vec::new()));
                } else {
                    self.stats_calls.insert(id, (live.len(), Vec::new(), reply));
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
            NetIn::Oss(Wire::ToClient { ost, message }) => self.core.handle_message(now, OstIndex(ost), message),
            NetIn::Oss(Wire::StatsReply { id, osts }) => {
                if let Some((left, acc, _)) = self.stats_calls.get_mut(&id) {
                    acc.extend(osts);
                    *left -= 1;
                    if *left == 0 {
                        let (_, mut acc, reply) = self.stats_calls.remove(&id).expect("present");
                        acc.sort_by_key(|s| s.ost);
                        let _ = reply.send(Ok(acc));
                    }
                }
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
            NetIn::Closed(Peer::Oss(i), reason) => self.oss_lost(i, &reason),
        }
    }

    fn oss_lost(&mut self, i: usize, reason: &str) {
        if self.oss[i].tx.take().is_none() {
            return; // already handled
        }
        warn!(oss = %self.oss[i].address, "OSS connection lost: {reason}");
        let now = self.now();
        let reason = format!("connection to OSS {} lost: {reason}", self.oss[i].address);
        for ost in self.oss[i].osts.clone() {
            self.core.handle_unreachable(now, OstIndex(ost), &reason);
        }
        for (_, (left, _, _)) in self.stats_calls.iter_mut() {
            *left = left.saturating_sub(1);
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
        match open_session(&address, self.options.connect_timeout, Peer::Oss(i), self.net_tx.clone()).await {
            Ok((tx, writer)) => {
                debug!(%address, "reconnected");
                self.oss[i].tx = Some(tx);
                self.oss[i].writer = Some(writer);
            }
            Err(e) => warn!(%address, "reconnect failed: {e}"),
        }
    }
}
