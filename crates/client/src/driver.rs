//! The client's driver: one thread that owns the core client and the
//! connections, and turns commands from [`crate::Client`]'s callers and
//! frames from the servers into inputs of the core, and the core's outputs
//! into frames and answers.
//!
//! It plays the part the sans-IO core leaves to a driver (see
//! `lanefs_core::client::session`): it tells the core when a connection to
//! an OSS is lost and when a new one is up, tries a lost OSS again with a
//! growing wait, and gives an OSS up (the core then fails what needs it)
//! only after the reconnect timeout. It pings idle connections and takes a
//! connection that answers nothing for the RPC timeout for lost.

use crate::control;
use crate::links::{
    client_queue_limits, client_uuid, new_arena, offer, open_session, Conn, Dial, Ending, Link, Live, NetIn, Peer,
    Session, RECONNECT_BACKOFF_FIRST, RECONNECT_BACKOFF_MAX,
};
use crate::mds_record::MdsRecord;
use crate::{ClientOptions, Cmd, LadviseReply, NetError, Reply, StatsReply};
use lanefs_core::client::ladvise::LockaheadResult;
use lanefs_core::client::{Client as CoreClient, ClientError, ClientEvent, LadviseOutcome, OpId, OpOutput};
use lanefs_core::msg::ToClient;
use lanefs_core::pages::PagePool;
use lanefs_core::{ClientId, Instant, OstIndex};
use lanefs_net::limits::QueueLimits;
use lanefs_net::params;
use lanefs_net::transport::Address;
use lanefs_proto::wire::{ClusterInfo, MdsAnswer, MdsCall, OstStats, Wire};
use std::collections::{BTreeSet, HashMap};
use std::fs::File as FsFile;
use std::time::Duration as StdDuration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tracing::{debug, warn};

pub(super) struct Driver {
    options: ClientOptions,
    pub(super) info: ClusterInfo,
    core: CoreClient,
    /// This client's identity for its whole life (see [`lanefs_server::exports`]).
    uuid: u64,
    /// The core's page pool, shared with the `Client` handle.
    pub(super) pool: PagePool,
    /// The memfd of the pool's current arena, to hand to OSSes.
    arena_file: Option<FsFile>,
    clock: std::time::Instant,
    mds_address: Address,
    mds: Option<Live>,
    oss: Vec<Conn>,
    oss_of_ost: HashMap<u32, usize>,
    link_next: u64,
    queue_limits: QueueLimits,
    net_tx: UnboundedSender<NetIn>,
    net_rx: UnboundedReceiver<NetIn>,
    pending: HashMap<OpId, Reply<Result<OpOutput, ClientError>>>,
    /// Synchronous lockahead waiting for its op: results to give back then.
    ladvise: HashMap<OpId, (Vec<LockaheadResult>, LadviseReply)>,
    mds_calls: HashMap<u64, Reply<Result<MdsAnswer, NetError>>>,
    /// The file locks this client holds and the files it keeps open at
    /// the MDS, told again to a new MDS connection.
    record: MdsRecord,
    /// OSTs whose recovery keeps this client's requests: until when they
    /// may, and why (see `ost_recovering`).
    recovering: HashMap<u32, (tokio::time::Instant, String)>,
    /// Whether this client has held something at the MDS (the record was
    /// not empty): a restarted MDS waits for it to say it has replayed.
    mds_held: bool,
    /// When to connect to the MDS again, to replay the record, and since
    /// when it has been out of reach (given up after the reconnect timeout).
    mds_retry: Option<(tokio::time::Instant, StdDuration, tokio::time::Instant)>,
    /// Stats request id -> (OSSes still to answer, answers so far, caller).
    stats_calls: HashMap<u64, (BTreeSet<usize>, Vec<OstStats>, StatsReply)>,
    /// Parameter settings sent to OSS `.0`, waiting for its answer.
    param_calls: HashMap<u64, (usize, Reply<Result<(), NetError>>)>,
    call_next: u64,
    /// `lanefs lctl`'s endpoint, if asked for (see [`crate::control`]), and
    /// its requests; the sender is kept so that without an endpoint the
    /// receiver waits instead of ending.
    _control: Option<control::Listener>,
    _control_tx: UnboundedSender<control::Incoming>,
    control_rx: UnboundedReceiver<control::Incoming>,
    /// This client's part of its device names (see `params::client`).
    instance: String,
    /// When the statistics started (the client's start, or their last clear).
    stats_start: std::time::SystemTime,
    /// Requests to the MDS, by Lustre's RPC names (`mdc.*.stats`).
    mdc: params::mdc::MdcStats,
}

impl Driver {
    pub(super) async fn start(mds_address: Address, options: ClientOptions) -> Result<Driver, NetError> {
        let (net_tx, mut net_rx) = unbounded_channel();
        let key = options.key.as_ref();
        // Until the MDS says how many OSTs there are, the queue is sized for one.
        let limits = client_queue_limits(&options.core, 1);
        let dial = Dial { address: &mds_address, key, timeout: options.connect_timeout, limits: &limits };
        let uuid = client_uuid();
        let session = open_session(dial, Peer::Mds, net_tx.clone(), None, Some(uuid)).await?;
        let mut mds = Live::new(0, session, options.rpc_timeout, options.ping_interval);
        mds.send(Wire::Mds { id: 0, call: MdsCall::ClusterInfo });
        let info = match net_rx.recv().await {
            Some(NetIn::Frame(_, Wire::MdsReply { answer: MdsAnswer::ClusterInfo(info), .. })) => info,
            Some(NetIn::Frame(_, other)) => {
                return Err(NetError::Protocol(format!("unexpected MDS message {other:?}")))
            }
            Some(NetIn::Closed(_, ending)) => return Err(NetError::Mds(ending.to_string())),
            _ => return Err(NetError::Closed),
        };
        let mut oss: Vec<Conn> = Vec::new();
        let mut oss_of_ost = HashMap::new();
        for (ost, address) in &info.osts {
            let address = Address::parse(address).map_err(NetError::Protocol)?;
            let index = match oss.iter().position(|c| c.address == address) {
                Some(i) => i,
                None => {
                    oss.push(Conn::new(address));
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
            arena_file = new_arena(&pool, options.core.arena_frames(info.osts.len()));
        }
        // OSSes are connected to when first needed: commands that need only
        // the MDS (ls, mkdir, getstripe, rm) work while an OSS is down.
        // A lock request waits at its OST at most the RPC timeout (a GROUP
        // lock another client holds would otherwise hold a write for ever).
        let rpc_timeout =
            lanefs_core::Duration::from_ns(u64::try_from(options.rpc_timeout.as_nanos()).unwrap_or(u64::MAX));
        let config = lanefs_core::client::ClientConfig {
            lock_wait_max: options.core.lock_wait_max.or(Some(rpc_timeout)),
            ..options.core.clone()
        };
        let mut core = CoreClient::new(ClientId(0), config)?.with_page_pool(pool.clone());
        let queue_limits = client_queue_limits(&options.core, info.ost_count);
        let instance = params::client::instance(uuid);
        if options.control_dir.is_some() {
            // A client that lctl can see takes the settings kept for every
            // client (`set_param -P`), as a Lustre client takes the MGS's.
            mds.send(Wire::Mds { id: 0, call: MdsCall::KeptParams });
            match net_rx.recv().await {
                Some(NetIn::Frame(_, Wire::MdsReply { answer: MdsAnswer::Params(kept), .. })) => {
                    params::client::apply_kept(&mut core, Instant::ZERO, (&instance, info.ost_count), &kept)
                }
                Some(NetIn::Frame(_, Wire::MdsReply { answer: MdsAnswer::Error(e), .. })) => {
                    warn!("the settings kept for clients are not taken: {e}")
                }
                Some(NetIn::Frame(_, other)) => {
                    return Err(NetError::Protocol(format!("unexpected MDS message {other:?}")))
                }
                Some(NetIn::Closed(_, ending)) => return Err(NetError::Mds(ending.to_string())),
                _ => return Err(NetError::Closed),
            }
        }
        let (control_tx, control_rx) = unbounded_channel();
        let control = options.control_dir.as_ref().and_then(|dir| {
            let name = params::client::llite_name(&instance);
            control::listen(dir, &name, control_tx.clone())
                .map_err(|e| warn!("no lctl endpoint in {}: {e}", dir.display()))
                .ok()
        });
        Ok(Driver {
            options,
            info,
            core,
            uuid,
            pool,
            arena_file,
            clock: std::time::Instant::now(),
            mds_address,
            mds: Some(mds),
            oss,
            oss_of_ost,
            link_next: 1,
            queue_limits,
            net_tx,
            net_rx,
            pending: HashMap::new(),
            ladvise: HashMap::new(),
            mds_calls: HashMap::new(),
            record: MdsRecord::default(),
            mds_held: false,
            recovering: HashMap::new(),
            mds_retry: None,
            stats_calls: HashMap::new(),
            param_calls: HashMap::new(),
            call_next: 1,
            _control: control,
            _control_tx: control_tx,
            control_rx,
            instance,
            stats_start: std::time::SystemTime::now(),
            mdc: params::mdc::MdcStats::default(),
        })
    }

    fn now(&self) -> Instant {
        Instant(self.clock.elapsed().as_nanos() as u64)
    }

    pub(super) async fn run(mut self, mut cmds: UnboundedReceiver<Cmd>) {
        loop {
            let core = self.core.poll_timeout().map(|t| {
                let wait = StdDuration::from_nanos(t.0.saturating_sub(self.now().0));
                tokio::time::Instant::now() + wait
            });
            let mds_retry = self.mds_retry.map(|(at, _, _)| at);
            let recovering = self.recovering.values().map(|(until, _)| *until).min();
            let deadline = [core, self.retry_due(), mds_retry, self.ping_due(), self.silence_due(), recovering]
                .into_iter()
                .flatten()
                .min();
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
                Some((request, reply)) = self.control_rx.recv() => {
                    let _ = reply.send(self.control(request));
                }
                _ = sleep => {
                    let now = self.now();
                    self.core.handle_timeout(now);
                    self.retry_links();
                    self.retry_mds().await;
                    self.ping_idle();
                    self.drop_silent();
                    self.recovery_waited();
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
        while !self.core.disconnected_all() {
            match tokio::time::timeout_at(deadline, self.net_rx.recv()).await {
                Ok(Some(input)) => self.network(input),
                _ => {
                    warn!("unmount: an OSS did not answer the disconnect in time");
                    break;
                }
            }
        }
        let links: Vec<Link> = self.oss.iter_mut().map(|c| std::mem::replace(&mut c.link, Link::Down)).collect();
        for link in links {
            if let Link::Up(live) = link {
                live.outbox.finish(None);
                let _ = tokio::time::timeout_at(deadline, live.writer).await;
            }
        }
        if let Some(mds) = self.mds.take() {
            mds.outbox.finish(None);
        }
    }

    /// A new connection's liveness state, with this client's timeouts.
    fn live(&self, link: u64, session: Session) -> Live {
        Live::new(link, session, self.options.rpc_timeout, self.options.ping_interval)
    }

    /// When the next ping is due: the earliest of the connections' (see
    /// [`Live::ping_due`]).
    fn ping_due(&self) -> Option<tokio::time::Instant> {
        let oss = self.oss.iter().filter_map(|c| match &c.link {
            Link::Up(live) => Some(live.ping_due()),
            _ => None,
        });
        oss.chain(self.mds.as_ref().map(Live::ping_due)).min()
    }

    /// Ping every connection nothing was sent on for its ping interval.
    fn ping_idle(&mut self) {
        let now = tokio::time::Instant::now();
        let lives = self.oss.iter_mut().filter_map(Conn::live).chain(self.mds.as_mut());
        for live in lives {
            if now >= live.ping_due() {
                live.send(Wire::Ping);
            }
        }
    }

    /// When a connection that has said nothing since it was sent something
    /// counts as lost.
    fn silence_due(&self) -> Option<tokio::time::Instant> {
        let oss = self.oss.iter().filter_map(|c| match &c.link {
            Link::Up(live) => live.silent_deadline(),
            _ => None,
        });
        oss.chain(self.mds.as_ref().and_then(Live::silent_deadline)).min()
    }

    /// Drop the connections silent past their limit (a stopped server, a
    /// link that drops everything; see [`crate::links::Silence`]): as lost
    /// connections, tried again.
    fn drop_silent(&mut self) {
        let now = tokio::time::Instant::now();
        for i in 0..self.oss.len() {
            let silent = match &self.oss[i].link {
                Link::Up(live) => {
                    live.silent_deadline().is_some_and(|t| t <= now).then(|| (live.link, live.silence.reason()))
                }
                _ => None,
            };
            if let Some((link, reason)) = silent {
                self.link_lost(i, link, &Ending::Other(reason));
            }
        }
        if let Some(live) = self.mds.as_ref().filter(|live| live.silent_deadline().is_some_and(|t| t <= now)) {
            let reason = live.silence.reason();
            self.mds_lost(&reason);
        }
    }

    async fn command(&mut self, cmd: Cmd) {
        let now = self.now();
        match cmd {
            Cmd::Mds(call, reply) => {
                if self.mds.is_none() {
                    let (address, timeout) = (&self.mds_address, self.options.connect_timeout);
                    let key = self.options.key.as_ref();
                    let limits = &self.queue_limits;
                    let dial = Dial { address, key, timeout, limits };
                    match open_session(dial, Peer::Mds, self.net_tx.clone(), None, Some(self.uuid)).await {
                        Ok(session) => self.mds_connected(self.live(0, session)),
                        Err(e) => {
                            let _ = reply.send(Err(e));
                            return;
                        }
                    }
                }
                let id = self.call_id();
                self.mds_calls.insert(id, reply);
                self.record.sent(id, &call);
                self.mdc.count(&call);
                self.mds.as_mut().expect("connected").send(Wire::Mds { id, call });
            }
            Cmd::Open(layout, reply) => {
                let _ = reply.send(self.core.open(layout));
            }
            Cmd::Relayout(fh, layout, reply) => {
                let _ = reply.send(self.core.relayout(fh, layout));
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
                    match self.oss[i].live() {
                        Some(live) => live.send(Wire::StatsRequest { id }),
                        None => self.want(i),
                    }
                }
                self.stats_calls.insert(id, (all, Vec::new(), reply));
            }
            Cmd::SetOstParam(param, reply) => {
                let Some(&i) = self.oss_of_ost.get(&param.ost) else {
                    let _ = reply.send(Err(NetError::Protocol(format!("no OSS serves OST{:04x}", param.ost))));
                    return;
                };
                let id = self.call_id();
                let crate::OstParam { ost, name, value, permanent } = param;
                match self.oss[i].live() {
                    Some(live) => live.send(Wire::SetParam { id, ost, name, value, permanent }),
                    None => {
                        self.want(i);
                        let reason = format!("OST{ost:04x}'s OSS is not connected yet; try again");
                        let _ = reply.send(Err(NetError::Protocol(reason)));
                        return;
                    }
                }
                self.param_calls.insert(id, (i, reply));
            }
            Cmd::Counters(reply) => _ = reply.send(self.core.counters()),
            Cmd::StartTimeline(origin, interval, reply) => self.start_timeline(origin, interval, reply),
            Cmd::TakeTimeline(reply) => _ = reply.send(self.core.take_timeline(self.now())),
            Cmd::UnstableBytes(reply) => _ = reply.send(self.core.unstable_bytes()),
        }
    }

    /// Start the core's timeline at `origin`, in bins of `interval`, and
    /// say so to `reply`.
    fn start_timeline(&mut self, origin: std::time::Instant, interval: StdDuration, reply: Reply<()>) {
        // The core's time is nanoseconds since `clock`: an origin before
        // it is negative.
        let origin_ns = match origin.checked_duration_since(self.clock) {
            Some(after) => after.as_nanos() as i128,
            None => -(self.clock.duration_since(origin).as_nanos() as i128),
        };
        let interval = lanefs_core::units::Duration(u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX));
        self.core.start_timeline(origin_ns, interval);
        let _ = reply.send(());
    }

    /// A request from `lanefs lctl` (see [`crate::control`]).
    fn control(&mut self, request: control::Request) -> control::Reply {
        let ost_count = self.info.ost_count;
        match request {
            control::Request::Get(selection) => {
                if let Err(e) = selection.validate() {
                    return control::Reply::Error(e);
                }
                let view = params::client::ClientView {
                    core: &self.core,
                    instance: &self.instance,
                    ost_count,
                    stats_start: self.stats_start,
                    now: std::time::SystemTime::now(),
                    mdc: &self.mdc,
                    ost_addresses: &self.info.osts,
                };
                control::Reply::Nodes(params::client::tree(&view, &selection).select(&selection))
            }
            control::Request::Set { pattern, value } => {
                let now = self.now();
                let who = (self.instance.as_str(), ost_count);
                let (outcomes, cleared) = params::client::set(&mut self.core, now, who, &pattern, &value);
                if cleared {
                    self.stats_start = std::time::SystemTime::now();
                    self.mdc = params::mdc::MdcStats::default();
                }
                if cfg!(debug_assertions) {
                    self.core.check_invariants();
                }
                control::Reply::Set(outcomes)
            }
            control::Request::Devices => control::Reply::Devices {
                instance: self.instance.clone(),
                uuid: format!("{:016x}", self.uuid),
                ost_count,
                mds: self.mds_address.to_string(),
                osts: self.info.osts.clone(),
            },
        }
    }

    fn call_id(&mut self) -> u64 {
        self.call_next += 1;
        self.call_next
    }

    fn network(&mut self, input: NetIn) {
        let now = self.now();
        match input {
            NetIn::Frame(Peer::Oss(i, link), frame) => {
                let Some(live) = self.oss[i].live().filter(|live| live.link == link) else {
                    return; // an older connection's last words
                };
                live.last_heard = tokio::time::Instant::now();
                match frame {
                    Wire::ToClient { ost, message } if self.oss[i].osts.contains(&ost) => {
                        if !matches!(message, ToClient::Recovering { .. }) {
                            // Anything else: its recovery no longer holds
                            // this client's requests.
                            self.recovering.remove(&ost);
                        }
                        self.core.handle_message(now, OstIndex(ost), message)
                    }
                    Wire::ToClient { ost, .. } => {
                        debug!(oss = %self.oss[i].address, ost, "message for an OST this OSS does not serve ignored")
                    }
                    Wire::StatsReply { id, osts } => {
                        let Some((left, acc, _)) = self.stats_calls.get_mut(&id).filter(|(left, ..)| left.contains(&i))
                        else {
                            debug!(oss = %self.oss[i].address, id, "statistics answer not asked for ignored");
                            return;
                        };
                        acc.extend(osts);
                        left.remove(&i);
                        self.finish_stats();
                    }
                    Wire::SetParamReply { id, result } => match self.param_calls.remove(&id) {
                        Some((from, reply)) if from == i => {
                            let _ = reply.send(result.map_err(NetError::Protocol));
                        }
                        Some(other) => {
                            self.param_calls.insert(id, other);
                            debug!(id, "parameter answer from another OSS ignored");
                        }
                        None => debug!(id, "parameter answer not asked for ignored"),
                    },
                    Wire::Pong => {}
                    other => debug!("unexpected {} message from an OSS ignored", lanefs_proto::wire::variant(&other)),
                }
            }
            NetIn::Frame(Peer::Mds, frame) => {
                if let Some(live) = self.mds.as_mut() {
                    live.last_heard = tokio::time::Instant::now();
                }
                match frame {
                    Wire::MdsReply { id, answer } => {
                        self.record.answered(id, &answer);
                        self.mds_held |= !self.record.is_empty();
                        if cfg!(debug_assertions) {
                            self.record.check_invariants();
                        }
                        if let Some(reply) = self.mds_calls.remove(&id) {
                            let _ = reply.send(Ok(answer));
                        }
                    }
                    Wire::Pong => {}
                    other => debug!("unexpected {} message from the MDS ignored", lanefs_proto::wire::variant(&other)),
                }
            }
            NetIn::Closed(Peer::Mds, ending) => self.mds_lost(&ending.to_string()),
            NetIn::Closed(Peer::Oss(i, link), ending) => self.link_lost(i, link, &ending),
            NetIn::Opened { oss, link, result } => self.opened(oss, link, result),
        }
    }

    /// The MDS connection is gone: its calls fail; the next call connects
    /// again.
    fn mds_lost(&mut self, reason: &str) {
        let Some(live) = self.mds.take() else { return };
        live.outbox.close(reason);
        warn!("MDS connection lost: {reason}");
        for (_, reply) in self.mds_calls.drain() {
            let _ = reply.send(Err(NetError::MdsLost { reason: reason.to_string() }));
        }
        self.record.lost();
        if !self.record.is_empty() || self.mds_held {
            // Held locks and open files are told to the MDS again as soon
            // as it answers, within its recovery grace (which waits for
            // every client that held something, even if it holds nothing
            // now, to say it is done).
            let now = tokio::time::Instant::now();
            self.mds_retry = Some((now + RECONNECT_BACKOFF_FIRST, RECONNECT_BACKOFF_FIRST, now));
        }
    }

    /// A new MDS connection: it is told the record first.
    fn mds_connected(&mut self, mut live: Live) {
        self.mds_retry = None;
        let replay = self.record.replay();
        if !replay.is_empty() {
            debug!(calls = replay.len(), "telling the MDS again of the locks held and the files open here");
        }
        for call in replay {
            let id = self.call_id();
            self.record.replayed(id, &call);
            live.send(Wire::Mds { id, call });
        }
        if self.mds_held {
            // After the replays, on the same connection: the MDS has them
            // all when it reads this. Its answer is not waited for.
            let id = self.call_id();
            live.send(Wire::Mds { id, call: MdsCall::ReplayDone });
        }
        self.mds = Some(live);
    }

    /// Connect to the MDS again if it is time, to replay the record; give
    /// the record up once the MDS has been out of reach for the reconnect
    /// timeout (the MDS has forgotten it by then, as an evicted client's).
    async fn retry_mds(&mut self) {
        let Some((at, wait, since)) = self.mds_retry else { return };
        let now = tokio::time::Instant::now();
        if self.mds.is_some() {
            self.mds_retry = None;
            return;
        }
        if now < at {
            return;
        }
        let (address, timeout) = (&self.mds_address, self.options.connect_timeout);
        let dial = Dial { address, key: self.options.key.as_ref(), timeout, limits: &self.queue_limits };
        match open_session(dial, Peer::Mds, self.net_tx.clone(), None, Some(self.uuid)).await {
            Ok(session) => self.mds_connected(self.live(0, session)),
            Err(e) if now.duration_since(since) >= self.options.reconnect_timeout => {
                warn!(%e, "the MDS stayed out of reach: the file locks held here are lost");
                self.record.clear();
                self.mds_held = false;
                self.mds_retry = None;
            }
            Err(e) => {
                debug!(%e, "the MDS is still out of reach");
                let next = (wait * 2).min(RECONNECT_BACKOFF_MAX);
                self.mds_retry = Some((tokio::time::Instant::now() + wait, next, since));
            }
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
    fn link_lost(&mut self, i: usize, link: u64, ending: &Ending) {
        let reason = &ending.to_string();
        // An older connection's last words (its reader ending after the
        // driver dropped it, while a new one is being made) change nothing.
        if !matches!(&self.oss[i].link, Link::Up(live) if live.link == link) {
            return;
        }
        let Link::Up(live) = std::mem::replace(&mut self.oss[i].link, Link::Down) else {
            unreachable!("checked above");
        };
        // A recovery's hold on this client's requests ends with the link:
        // they are sent again on the next one.
        for ost in &self.oss[i].osts {
            self.recovering.remove(ost);
        }
        live.outbox.close(reason);
        warn!(oss = %self.oss[i].address, "OSS connection lost: {reason}");
        let lost: Vec<u64> = self.param_calls.iter().filter(|(_, (from, _))| *from == i).map(|(&id, _)| id).collect();
        for id in lost {
            if let Some((_, reply)) = self.param_calls.remove(&id) {
                let reason = format!("the OSS connection was lost ({reason}); the setting may or may not be made");
                let _ = reply.send(Err(NetError::Protocol(reason)));
            }
        }
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
        // A local user's connection is refused object I/O for good: what
        // needs this OSS fails now, saying why, rather than after
        // `reconnect_timeout` of attempts refused the same way.
        if matches!(ending, Ending::NotANode) {
            for ost in self.oss[i].osts.clone() {
                self.core.handle_unreachable(now, OstIndex(ost), reason);
            }
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
        let (key, limits) = (self.options.key.clone(), self.queue_limits.clone());
        tokio::spawn(async move {
            let peer = Peer::Oss(i, link);
            let dial = Dial { address: &address, key: key.as_ref(), timeout, limits: &limits };
            let result = open_session(dial, peer, net_tx.clone(), offer, Some(uuid)).await;
            let _ = net_tx.send(NetIn::Opened { oss: i, link, result });
        });
    }

    fn opened(&mut self, i: usize, link: u64, result: Result<Session, NetError>) {
        if !matches!(self.oss[i].link, Link::Opening(l) if l == link) {
            if let Ok(session) = result {
                session.outbox.close("superseded");
            }
            return;
        }
        let now = self.now();
        match result {
            Ok(session) => {
                debug!(oss = %self.oss[i].address, "connected");
                let live = self.live(link, session);
                let conn = &mut self.oss[i];
                conn.link = Link::Up(live);
                conn.outage_since = None;
                conn.backoff = RECONNECT_BACKOFF_FIRST;
                for ost in conn.osts.clone() {
                    self.core.handle_reconnected(now, OstIndex(ost));
                }
                let asked: Vec<u64> =
                    self.stats_calls.iter().filter(|(_, (left, _, _))| left.contains(&i)).map(|(id, _)| *id).collect();
                let live = self.oss[i].live().expect("just connected");
                for id in asked {
                    live.send(Wire::StatsRequest { id });
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

    /// `ost` keeps this client's requests for its recovery: say why once,
    /// and give them up if it outlasts the RPC timeout (`--timeout`), as
    /// for an OST out of reach.
    fn ost_recovering(&mut self, ost: OstIndex, remaining: StdDuration, clients_left: u32) {
        let timeout = self.options.rpc_timeout;
        let why = format!(
            "recovering after its OSS restarted: it serves no new request until the {clients_left} client(s) it \
             knew have replayed their state, or for at most {:.0} s more (lanefs oss --recovery-window)",
            remaining.as_secs_f64()
        );
        warn!(
            "{ost} is {why}; this client waits up to its timeout ({:.0} s, --timeout SECONDS)",
            timeout.as_secs_f64()
        );
        let until = tokio::time::Instant::now() + timeout;
        self.recovering.insert(ost.0, (until, why));
    }

    /// Requests kept past the RPC timeout by an OST's recovery fail.
    fn recovery_waited(&mut self) {
        let now = tokio::time::Instant::now();
        let over: Vec<u32> = self.recovering.iter().filter(|(_, (until, _))| *until <= now).map(|(o, _)| *o).collect();
        for ost in over {
            let (_, why) = self.recovering.remove(&ost).expect("listed");
            let reason = format!("{why}; waited {:.0} s (--timeout)", self.options.rpc_timeout.as_secs_f64());
            let at = self.now();
            self.core.handle_unreachable(at, OstIndex(ost), &reason);
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
                match self.oss[i].live() {
                    Some(live) => live.send(Wire::ToOst { ost: ost.0, message }),
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
                    ClientEvent::OstRecovering { ost, remaining, clients_left } => {
                        self.ost_recovering(ost, StdDuration::from_nanos(remaining.0), clients_left)
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }
}
