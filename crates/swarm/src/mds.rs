//! The MDS as a node of the swarm's world, and the namespace oracle.
//!
//! The node is lanefs-mds's own [`Mds`] (SQLite, in a file of a per-seed
//! temporary directory, on `/dev/shm` where there is one so that a
//! `synchronous = FULL` commit costs no disk flush) behind a network of the
//! swarm's making: requests from clients, answers to them, and the MDS's
//! destroys of removed files' objects on the OSTs with their
//! acknowledgements travel as messages in the harness's virtual time, FIFO
//! per link (one connection each), at the latency the run draws, slowed by
//! the same `delay` faults as the OSTs' links. The driver interleaves their
//! delivery with the harness's steps ([`lanefs_core::harness::Harness::next_event_at`]).
//!
//! Faults: an MDS crash drops the `Mds` (every request it handled is
//! committed, as its SQLite transaction was; the one a crash interrupts is
//! the one whose message had not arrived yet, and answers still on the
//! wire are lost with their connections) and a restart opens the file
//! again; a dropped client-MDS connection loses what was on it. Clients
//! send a request again when no answer comes within their retry time
//! (doubling each time, as lanefs-client backs off), with the same
//! id. Creates with `O_EXCL` and unlinks are not idempotent
//! (`MdsRequest::is_idempotent`) and lanefs's MDS keeps no reply log
//! (Lustre reconstructs such answers from `last_rcvd`; lanefs does not): a
//! client takes `Exists` for its own create, and `NotFound` for its own
//! unlink, as success when the answer is to a second or later attempt of a
//! request that is not idempotent. That is sound here because a client's
//! scratch names are its own: nobody else creates or removes them.
//!
//! The harness's OSTs make an object at its first write, so the OSTs'
//! precreation is the MDS's record alone ([`PRECREATED_PER_OST`] each at
//! start); a destroy removes the object from the OST's store at once and
//! durably ([`lanefs_core::harness::Harness::destroy_objects`]), as the
//! network OSS removes its file. The MDS sends one batch per OST at a time
//! and sends it again if no acknowledgement comes.
//!
//! The namespace oracle ([`Namespace`]) keeps, per name, what the
//! acknowledged answers say (present with a layout, absent, or unknown
//! after an answer that never came) and checks every answer against it:
//! acknowledged creates and unlinks hold across MDS restarts, a file's
//! layout never changes, no object id is handed out twice, no object of a
//! live file is destroyed; at the end, after the healed MDS has drained its
//! destroy queue, every object handed out that no file holds any more is
//! destroyed.

use lanefs_core::harness::Harness;
use lanefs_core::layout::Layout;
use lanefs_core::units::{Duration, Instant, ObjectId, ObjectKey, OstIndex};
use lanefs_mds::objects::DESTROY_BATCH_MAX;
use lanefs_mds::Mds;
use lanefs_proto::{Access, CreateMode, Credentials, MdsConfig, MdsError, MdsReply, MdsRequest, StripeSpec};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Objects each OST is recorded to have created in advance, at start.
pub const PRECREATED_PER_OST: u64 = 1 << 20;
/// A client's first wait for an answer before it sends the request again;
/// each further attempt waits twice as long, up to [`RETRY_AFTER_MAX`].
pub const RETRY_AFTER: Duration = Duration::from_ms(5);
pub const RETRY_AFTER_MAX: Duration = Duration::from_ms(320);
/// How long the MDS waits for an OST to acknowledge a destroy before it
/// sends the batch again.
pub const DESTROY_RETRY_AFTER: Duration = Duration::from_ms(20);
/// Requests waiting for an answer, at most (one per client at a time).
pub const REQUESTS_PENDING_MAX: usize = 64;

/// A scratch name of client `c`: only that client creates or removes it.
pub fn scratch_path(client: u32, slot: usize) -> String {
    format!("/c{client}-s{slot}")
}

/// The path of data file `file` (the run's shared and private files).
pub fn data_path(file: usize) -> String {
    format!("/d{file}")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    Client(u32),
    Mds,
    Ost(u32),
}

#[derive(Debug)]
enum Event {
    ToMds { client: u32, xid: u64, attempt: u32, request: MdsRequest },
    ToClient { client: u32, xid: u64, attempt: u32, reply: MdsReply },
    Retry { client: u32, xid: u64 },
    Destroy { ost: u32, objects: Vec<ObjectId> },
    Destroyed { ost: u32, objects: Vec<ObjectId> },
    DestroyTimeout { ost: u32, batch: u64 },
}

impl Event {
    /// A line of the trace.
    fn summary(&self) -> String {
        match self {
            Event::ToMds { client, xid, attempt, request } => {
                format!("c{client} -> mds xid {xid} attempt {attempt} {request:?}")
            }
            Event::ToClient { client, xid, attempt, reply } => {
                let reply = match reply {
                    MdsReply::File(info) => format!("File {:?} {:?}", info.fid, info.layout.objects()),
                    MdsReply::Attr(attr) => format!("Attr {:?}", attr.fid),
                    MdsReply::Entries(page) => format!("Entries ({} names)", page.entries.len()),
                    other => format!("{other:?}"),
                };
                format!("mds -> c{client} xid {xid} attempt {attempt} {reply}")
            }
            Event::Retry { client, xid } => format!("c{client} retry timer xid {xid}"),
            Event::Destroy { ost, objects } => format!("mds -> ost{ost} destroy {objects:?}"),
            Event::Destroyed { ost, objects } => format!("ost{ost} -> mds destroyed {objects:?}"),
            Event::DestroyTimeout { ost, batch } => format!("mds destroy timer ost{ost} batch {batch}"),
        }
    }

    fn link(&self) -> Option<(End, End)> {
        match *self {
            Event::ToMds { client, .. } => Some((End::Client(client), End::Mds)),
            Event::ToClient { client, .. } => Some((End::Mds, End::Client(client))),
            Event::Destroy { ost, .. } => Some((End::Mds, End::Ost(ost))),
            Event::Destroyed { ost, .. } => Some((End::Ost(ost), End::Mds)),
            Event::Retry { .. } | Event::DestroyTimeout { .. } => None,
        }
    }
}

struct Request {
    request: MdsRequest,
    attempts: u32,
    retry_after: Duration,
}

/// An answer a client took: the reply, and whether it answers a second or
/// later attempt (the request may have been done by an earlier one).
#[derive(Clone, Debug)]
pub struct Answer {
    pub reply: MdsReply,
    pub retried: bool,
}

impl Answer {
    /// Whether an `EEXIST` or `ENOENT` may be the work of an earlier
    /// attempt of `request`: it answers a retry of a request that is not
    /// idempotent.
    pub fn may_be_own_work(&self, request: &MdsRequest) -> bool {
        self.retried && !request.is_idempotent()
    }
}

/// The MDS node and its links.
pub struct MdsWorld {
    dir: tempfile::TempDir,
    config: MdsConfig,
    mds: Option<Mds>,
    osts: u32,
    queue: BTreeMap<(Instant, u64), Event>,
    sequence: u64,
    link_last: BTreeMap<(End, End), Instant>,
    latency: (Duration, Duration),
    rng: ChaCha8Rng,
    xid_next: u64,
    pending: BTreeMap<(u32, u64), Request>,
    answers: BTreeMap<(u32, u64), Answer>,
    /// Per OST, the destroy batch in flight (its number).
    destroying: BTreeMap<u32, u64>,
    batch_next: u64,
    /// Events delivered: they count as steps of the run.
    pub events: u64,
    pub ns: Namespace,
}

impl MdsWorld {
    pub fn new(seed: u64, osts: u32, latency: (Duration, Duration)) -> MdsWorld {
        let base = ["/dev/shm", "/tmp"].into_iter().map(PathBuf::from).find(|p| p.is_dir()).unwrap_or_default();
        let dir = tempfile::Builder::new()
            .prefix("lanefs-swarm-mds-")
            .tempdir_in(&base)
            .or_else(|_| tempfile::tempdir())
            .expect("a temporary directory for the MDS database");
        let config = MdsConfig::new(osts);
        let mut world = MdsWorld {
            dir,
            config,
            mds: None,
            osts,
            queue: BTreeMap::new(),
            sequence: 0,
            link_last: BTreeMap::new(),
            latency,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6d64_735f_6e65_7421),
            xid_next: 1,
            pending: BTreeMap::new(),
            answers: BTreeMap::new(),
            destroying: BTreeMap::new(),
            batch_next: 1,
            events: 0,
            ns: Namespace::default(),
        };
        world.restart(Instant::ZERO);
        let mds = world.mds.as_mut().expect("opened");
        for ost in 0..osts {
            mds.record_precreated(OstIndex(ost), ObjectId(PRECREATED_PER_OST)).expect("precreated objects recorded");
        }
        world
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("mds.db")
    }

    pub fn is_up(&self) -> bool {
        self.mds.is_some()
    }

    /// The MDS's machine stops: its database stays as SQLite left it; what
    /// was on its connections is lost.
    pub fn crash(&mut self) {
        self.mds = None;
        self.queue.retain(|_, e| !matches!(e.link(), Some((End::Mds, _) | (_, End::Mds))));
        self.destroying.clear();
    }

    /// Open the database again (or for the first time), and go on with
    /// the destroys it has queued.
    pub fn restart(&mut self, now: Instant) {
        if self.mds.is_some() {
            return;
        }
        let mds = Mds::open(&self.path(), self.config).expect("the MDS database opens again after a crash");
        mds.check_invariants();
        self.mds = Some(mds);
        self.pump_destroys(now);
    }

    /// Client `client`'s connection to the MDS drops: what was on it is lost.
    pub fn drop_link(&mut self, client: u32) {
        let c = End::Client(client);
        self.queue.retain(|_, e| !matches!(e.link(), Some((a, b)) if a == c || b == c));
    }

    pub fn set_latency(&mut self, latency: (Duration, Duration)) {
        self.latency = latency;
    }

    /// Send `request` for `client`; the answer comes through [`MdsWorld::answer`].
    pub fn send(&mut self, now: Instant, client: u32, request: MdsRequest) -> u64 {
        assert!(self.pending.len() < REQUESTS_PENDING_MAX, "MDS requests pending past their bound");
        let xid = self.xid_next;
        self.xid_next += 1;
        self.pending.insert((client, xid), Request { request, attempts: 0, retry_after: RETRY_AFTER });
        self.attempt(now, client, xid);
        xid
    }

    fn attempt(&mut self, now: Instant, client: u32, xid: u64) {
        let Some(r) = self.pending.get_mut(&(client, xid)) else { return };
        r.attempts += 1;
        let (attempt, request, wait) = (r.attempts, r.request.clone(), r.retry_after);
        r.retry_after = Duration((r.retry_after.0 * 2).min(RETRY_AFTER_MAX.0));
        self.enqueue(now, Event::ToMds { client, xid, attempt, request });
        self.enqueue_at(now + wait, Event::Retry { client, xid });
    }

    /// The answer client `client` took for request `xid`, if it came.
    pub fn answer(&mut self, client: u32, xid: u64) -> Option<Answer> {
        self.answers.remove(&(client, xid))
    }

    /// Client `client` crashed: it waits for nothing any more.
    pub fn forget_client(&mut self, client: u32) {
        self.pending.retain(|(c, _), _| *c != client);
        self.answers.retain(|(c, _), _| *c != client);
    }

    pub fn requests_pending(&self) -> usize {
        self.pending.len()
    }

    pub fn next_event_at(&self) -> Option<Instant> {
        self.queue.keys().next().map(|(t, _)| *t)
    }

    fn enqueue(&mut self, now: Instant, event: Event) {
        let link = event.link().expect("a message");
        let (lo, hi) = (self.latency.0 .0, self.latency.1 .0);
        let latency = if lo == hi { lo } else { self.rng.gen_range(lo..=hi) };
        let last = self.link_last.entry(link).or_insert(Instant::ZERO);
        *last = (*last).max(now + Duration(latency));
        let at = *last;
        self.enqueue_at(at, event);
    }

    fn enqueue_at(&mut self, at: Instant, event: Event) {
        self.sequence += 1;
        self.queue.insert((at, self.sequence), event);
    }

    /// Deliver the next event (the clock is at its time already).
    pub fn step(&mut self, now: Instant, h: &mut Harness) {
        let Some((_, event)) = self.queue.pop_first() else { return };
        self.events += 1;
        h.note(format!("{now} {}", event.summary()));
        match event {
            Event::ToMds { client, xid, attempt, request } => {
                let Some(mds) = self.mds.as_mut() else { return }; // refused: the client retries
                let reply = mds.handle(&Credentials::ROOT, request);
                mds.check_invariants();
                self.enqueue(now, Event::ToClient { client, xid, attempt, reply });
                self.pump_destroys(now);
            }
            Event::ToClient { client, xid, attempt, reply } => {
                if self.pending.remove(&(client, xid)).is_some() {
                    self.answers.insert((client, xid), Answer { reply, retried: attempt > 1 });
                }
            }
            Event::Retry { client, xid } => self.attempt(now, client, xid),
            Event::Destroy { ost, objects } => {
                for &object in &objects {
                    self.ns.destroying(ObjectKey { ost: OstIndex(ost), object });
                }
                if h.destroy_objects(OstIndex(ost), &objects) {
                    for &object in &objects {
                        self.ns.destroyed.insert(ObjectKey { ost: OstIndex(ost), object });
                    }
                    self.enqueue(now, Event::Destroyed { ost, objects });
                }
            }
            Event::Destroyed { ost, objects } => {
                let Some(mds) = self.mds.as_mut() else { return };
                mds.record_destroyed(OstIndex(ost), &objects).expect("the MDS records destroyed objects");
                mds.check_invariants();
                self.destroying.remove(&ost);
                self.pump_destroys(now);
            }
            Event::DestroyTimeout { ost, batch } => {
                if self.destroying.get(&ost) == Some(&batch) {
                    self.destroying.remove(&ost);
                    self.pump_destroys(now);
                }
            }
        }
    }

    /// Send each OST with no batch in flight its queued destroys.
    fn pump_destroys(&mut self, now: Instant) {
        let Some(mds) = self.mds.as_ref() else { return };
        let mut batches = Vec::new();
        for ost in (0..self.osts).filter(|o| !self.destroying.contains_key(o)) {
            let objects = mds.queued_destroys(OstIndex(ost), DESTROY_BATCH_MAX).expect("the MDS lists its destroys");
            if !objects.is_empty() {
                batches.push((ost, objects));
            }
        }
        for (ost, objects) in batches {
            let batch = self.batch_next;
            self.batch_next += 1;
            self.destroying.insert(ost, batch);
            self.enqueue(now, Event::Destroy { ost, objects });
            self.enqueue_at(now + DESTROY_RETRY_AFTER, Event::DestroyTimeout { ost, batch });
        }
    }

    /// After every other check of a run that went idle: destroys still
    /// queued at the MDS (a liveness failure if any).
    pub fn destroys_left(&self) -> usize {
        let Some(mds) = self.mds.as_ref() else { return 0 };
        (0..self.osts).map(|o| mds.queued_destroys(OstIndex(o), DESTROY_BATCH_MAX).map_or(0, |q| q.len())).sum()
    }

    /// Destroys queued or in flight.
    pub fn destroys_busy(&self) -> bool {
        !self.destroying.is_empty() || self.destroys_left() > 0
    }

    /// The MDS's own answer, outside the run's network: for the final check.
    pub fn observe(&mut self, request: MdsRequest) -> MdsReply {
        self.restart(Instant::ZERO);
        self.mds.as_mut().expect("up").handle(&Credentials::ROOT, request)
    }
}

/// The request a client's open of data file `file` sends (`O_CREAT`: the
/// first opener creates it with the drawn striping).
pub fn open_request(file: usize, stripe_bytes: u64, stripe_count: u32, start_ost: u32) -> MdsRequest {
    MdsRequest::Create {
        path: data_path(file),
        stripe: StripeSpec {
            count: Some(i64::from(stripe_count)),
            size: Some(stripe_bytes),
            start_ost: Some(i64::from(start_ost)),
            ..StripeSpec::default()
        },
        mode: CreateMode::OpenOrCreate,
        access: Access::ReadWrite,
        permissions: 0o644,
    }
}

/// What the acknowledged answers say of one scratch name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameState {
    Absent,
    /// Present, with its layout once an answer named it.
    Present(Option<Layout>),
    /// A request on it got no answer (its client crashed): either.
    Unknown,
}

/// The namespace oracle (see the module docs).
#[derive(Default)]
pub struct Namespace {
    pub names: BTreeMap<String, NameState>,
    /// Names with an unlink sent and not answered: their objects may go.
    pub unlinking: BTreeSet<String>,
    /// Every layout a data file's open answered, by file.
    pub data_layouts: BTreeMap<usize, Layout>,
    /// Every object any answer handed out, with the path it was given for.
    pub handed_out: BTreeMap<ObjectKey, String>,
    pub destroyed: BTreeSet<ObjectKey>,
    pub findings: Vec<String>,
}

impl Namespace {
    fn find(&mut self, finding: String) {
        if self.findings.len() < 16 {
            self.findings.push(finding);
        }
    }

    fn state(&self, path: &str) -> NameState {
        self.names.get(path).cloned().unwrap_or(NameState::Absent)
    }

    /// A layout an answer named for `path`: its objects are new, or that
    /// path's already.
    fn handed(&mut self, path: &str, layout: &Layout) {
        for key in layout.objects() {
            match self.handed_out.get(key) {
                Some(owner) if owner != path => {
                    let owner = owner.clone();
                    self.find(format!("object {key:?} handed out for {path} was {owner}'s"));
                }
                Some(_) => {}
                None => {
                    if self.destroyed.contains(key) {
                        self.find(format!("object {key:?} handed out for {path} was destroyed before"));
                    }
                    self.handed_out.insert(*key, path.to_string());
                }
            }
        }
    }

    /// An answer to data file `file`'s open.
    pub fn data_opened(&mut self, file: usize, reply: &MdsReply, wanted: (u64, u32, u32)) -> Option<Layout> {
        let MdsReply::File(info) = reply else {
            self.find(format!("opening {}: {reply:?}", data_path(file)));
            return None;
        };
        let layout = info.layout.clone();
        let (stripe_bytes, stripe_count, start_ost) = wanted;
        if layout.stripe_size() != stripe_bytes
            || layout.stripe_count() != stripe_count
            || layout.stripe_offset() != OstIndex(start_ost)
        {
            self.find(format!("{} has layout {layout:?}, not the striping asked for", data_path(file)));
        }
        match self.data_layouts.get(&file) {
            Some(first) if *first != layout => {
                let first = first.clone();
                self.find(format!("{}'s layout changed from {first:?} to {layout:?}", data_path(file)));
            }
            Some(_) => {}
            None => {
                self.handed(&data_path(file), &layout);
                self.data_layouts.insert(file, layout.clone());
            }
        }
        Some(layout)
    }

    pub fn unlink_sent(&mut self, path: &str) {
        self.unlinking.insert(path.to_string());
    }

    /// The answer to a scratch request `request` on `path`.
    pub fn answered(&mut self, path: &str, request: &MdsRequest, answer: &Answer) {
        let state = self.state(path);
        let reply = &answer.reply;
        let next = match (request, reply) {
            (MdsRequest::Create { .. }, MdsReply::File(info)) => {
                if matches!(state, NameState::Present(_)) {
                    self.find(format!("create of {path} succeeded though it existed ({state:?})"));
                }
                self.handed(path, &info.layout);
                NameState::Present(Some(info.layout.clone()))
            }
            (MdsRequest::Create { .. }, MdsReply::Error(MdsError::Exists { .. })) => match state {
                NameState::Present(_) => state,
                _ if answer.may_be_own_work(request) => NameState::Present(None),
                _ => {
                    self.find(format!("create of {path} found it existing though it was {state:?}"));
                    NameState::Present(None)
                }
            },
            (MdsRequest::Unlink { .. }, MdsReply::Ok) => {
                self.unlinking.remove(path);
                if state == NameState::Absent {
                    self.find(format!("unlink of {path} succeeded though it was absent"));
                }
                NameState::Absent
            }
            (MdsRequest::Unlink { .. }, MdsReply::Error(MdsError::NotFound { .. })) => {
                self.unlinking.remove(path);
                if matches!(state, NameState::Present(_)) && !answer.may_be_own_work(request) {
                    self.find(format!("unlink of {path} found nothing though its create was acknowledged"));
                }
                NameState::Absent
            }
            (MdsRequest::Stat { .. }, MdsReply::Attr(attr)) => {
                let layout = attr.layout.clone();
                match (&state, &layout) {
                    (NameState::Absent, _) => {
                        self.find(format!("stat of {path} found it though it was absent"));
                    }
                    (NameState::Present(Some(known)), Some(l)) if known != l => {
                        self.find(format!("{path}'s layout changed from {known:?} to {l:?}"));
                    }
                    _ => {}
                }
                if let Some(l) = &layout {
                    self.handed(path, l);
                }
                NameState::Present(layout)
            }
            (MdsRequest::Stat { .. }, MdsReply::Error(MdsError::NotFound { .. })) => {
                if matches!(state, NameState::Present(_)) {
                    self.find(format!("stat of {path} found nothing though its create was acknowledged"));
                }
                NameState::Absent
            }
            (_, other) => {
                self.find(format!("{request:?} answered {other:?}"));
                state
            }
        };
        self.names.insert(path.to_string(), next);
    }

    /// The data files whose open was answered so far (a listing asked for
    /// now must show them).
    pub fn data_files(&self) -> Vec<usize> {
        self.data_layouts.keys().copied().collect()
    }

    /// A listing of `/`: every scratch name of `client`'s is listed if and
    /// only if present, and every data file of `known` (opened before the
    /// listing was asked for) is listed.
    pub fn listed(&mut self, client: u32, slots: usize, known: &[usize], reply: &MdsReply) {
        let MdsReply::Entries(page) = reply else {
            self.find(format!("listing /: {reply:?}"));
            return;
        };
        let names: BTreeSet<String> = page.entries.iter().map(|e| format!("/{}", e.name)).collect();
        for slot in 0..slots {
            let path = scratch_path(client, slot);
            match (self.state(&path), names.contains(&path)) {
                (NameState::Present(_), false) => self.find(format!("{path} is not listed though it was created")),
                (NameState::Absent, true) => self.find(format!("{path} is listed though it is absent")),
                (NameState::Unknown, true) => {
                    self.names.insert(path, NameState::Present(None));
                }
                (NameState::Unknown, false) => {
                    self.names.insert(path, NameState::Absent);
                }
                _ => {}
            }
        }
        let missing: Vec<String> = known.iter().map(|&f| data_path(f)).filter(|p| !names.contains(p)).collect();
        for path in missing {
            self.find(format!("{path} is not listed though its open was answered"));
        }
    }

    /// A request on `path` whose answer never came (its client crashed).
    pub fn abandoned(&mut self, path: &str) {
        self.names.insert(path.to_string(), NameState::Unknown);
    }

    /// An object is about to be destroyed: it must belong to no live file.
    fn destroying(&mut self, key: ObjectKey) {
        let Some(owner) = self.handed_out.get(&key).cloned() else { return };
        // Live: in a data file's layout, or in the layout the answers last
        // gave its scratch name, with no unlink of it under way.
        let live = match self.state(&owner) {
            _ if self.data_layouts.values().any(|l| l.objects().contains(&key)) => true,
            NameState::Present(Some(layout)) => layout.objects().contains(&key) && !self.unlinking.contains(&owner),
            _ => false,
        };
        if live {
            self.find(format!("object {key:?} of live file {owner} destroyed"));
        }
    }

    /// The final check, against the healed MDS itself: every name as the
    /// answers left it, data files with their layouts, and every object no
    /// file holds any more destroyed.
    pub fn check_final(&mut self, world: &mut MdsWorld, clients: u32, slots: usize) {
        let mut held: BTreeSet<ObjectKey> = BTreeSet::new();
        let mut paths: Vec<String> = self.data_layouts.keys().map(|&f| data_path(f)).collect();
        paths.extend((0..clients).flat_map(|c| (0..slots).map(move |s| scratch_path(c, s))));
        for path in paths {
            let request = MdsRequest::Stat { path: path.clone() };
            let reply = world.observe(request.clone());
            if let MdsReply::Attr(attr) = &reply {
                held.extend(attr.layout.iter().flat_map(|l| l.objects().iter().copied()));
            }
            if let Some(file) = path.strip_prefix("/d") {
                let file: usize = file.parse().expect("a data path");
                match &reply {
                    MdsReply::Attr(attr) if attr.layout.as_ref() == self.data_layouts.get(&file) => {}
                    other => self.find(format!("at the end {path} answers {other:?}, not its layout")),
                }
            } else {
                self.answered(&path, &request, &Answer { reply, retried: false });
            }
        }
        let forgotten: Vec<ObjectKey> =
            self.handed_out.keys().filter(|k| !held.contains(k) && !self.destroyed.contains(k)).copied().collect();
        if let Some(key) = forgotten.first() {
            let owner = self.handed_out[key].clone();
            self.find(format!(
                "{} objects of removed files were never destroyed, first {key:?} of {owner}",
                forgotten.len()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_proto::{Fid, FileInfo};

    fn layout(object: u64) -> Layout {
        Layout::round_robin(64 << 10, 1, OstIndex(0), 1, |_| ObjectId(object)).unwrap()
    }

    fn create(path: &str) -> MdsRequest {
        let (stripe, mode, access) = (StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite);
        MdsRequest::Create { path: path.into(), stripe, mode, access, permissions: 0o644 }
    }

    fn answer(reply: MdsReply, retried: bool) -> Answer {
        Answer { reply, retried }
    }

    #[test]
    fn an_acknowledged_create_must_hold_and_a_retry_may_find_its_own_work() {
        let mut ns = Namespace::default();
        let file = MdsReply::File(FileInfo { fid: Fid(2), layout: layout(7) });
        ns.answered("/c0-s0", &create("/c0-s0"), &answer(file, false));
        assert!(ns.findings.is_empty());
        let stat = MdsRequest::Stat { path: "/c0-s0".into() };
        let gone = MdsReply::Error(MdsError::NotFound { path: "/c0-s0".into(), missing: "/c0-s0".into() });
        ns.answered("/c0-s0", &stat, &answer(gone, false));
        assert_eq!(ns.findings.len(), 1, "{:?}", ns.findings);

        let mut ns = Namespace::default();
        let exists = MdsReply::Error(MdsError::Exists { path: "/c0-s1".into() });
        ns.answered("/c0-s1", &create("/c0-s1"), &answer(exists.clone(), true));
        assert!(ns.findings.is_empty(), "a retried create's EEXIST is its own: {:?}", ns.findings);
        ns.answered("/c0-s2", &create("/c0-s2"), &answer(exists, false));
        assert_eq!(ns.findings.len(), 1, "a first attempt's EEXIST on an absent name is a finding");
    }

    #[test]
    fn a_destroy_of_a_live_files_object_is_a_finding_and_a_removed_ones_is_not() {
        let mut ns = Namespace::default();
        let key = ObjectKey { ost: OstIndex(0), object: ObjectId(7) };
        let file = MdsReply::File(FileInfo { fid: Fid(2), layout: layout(7) });
        ns.answered("/c0-s0", &create("/c0-s0"), &answer(file, false));
        ns.unlink_sent("/c0-s0");
        ns.destroying(key);
        assert!(ns.findings.is_empty(), "an unlink under way may have its objects destroyed");
        ns.answered("/c0-s0", &MdsRequest::Unlink { path: "/c0-s0".into() }, &answer(MdsReply::Ok, false));
        let again = MdsReply::File(FileInfo { fid: Fid(3), layout: layout(8) });
        ns.answered("/c0-s0", &create("/c0-s0"), &answer(again, false));
        ns.destroying(key);
        assert!(ns.findings.is_empty(), "the old life's object: {:?}", ns.findings);
        ns.destroying(ObjectKey { ost: OstIndex(0), object: ObjectId(8) });
        assert_eq!(ns.findings.len(), 1, "the live file's object");
    }

    #[test]
    fn a_restarted_mds_keeps_what_it_answered() {
        let mut world = MdsWorld::new(1, 2, (Duration::from_us(1), Duration::from_us(1)));
        let MdsReply::File(info) = world.observe(create("/c0-s0")) else { panic!("created") };
        world.crash();
        assert!(!world.is_up());
        match world.observe(MdsRequest::Stat { path: "/c0-s0".into() }) {
            MdsReply::Attr(attr) => assert_eq!(attr.layout, Some(info.layout)),
            other => panic!("{other:?}"),
        }
    }
}
