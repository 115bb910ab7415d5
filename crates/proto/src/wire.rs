//! The messages lanefs nodes exchange over the network, wrapped in one enum.
//!
//! A connection starts with `Hello` (magic number, protocol version, role);
//! the server answers `Welcome` or `Refused` (with the reason) and closes.
//! On TCP all of it travels inside TLS, and the role claimed must be one
//! the peer's key allows (see `lanefs_net::auth`).
//! After that, OST traffic carries lanefs-core's own `ToOst` / `ToClient`
//! messages unchanged, tagged with the OST index (one OSS serves several
//! OSTs over one connection), and MDS traffic carries request/reply pairs
//! matched by id.
//!
//! Bulk data (a write's or a read reply's [`Payload`]) travels as raw bytes
//! after the header (a page span is written frame by frame, never gathered
//! first), or, between a client and an OSS on one host that share the
//! client's page arena (see `lanefs_net::shm`), as a bulk descriptor in a
//! `WriteShared` message. A phantom payload is the simulator's, and taking
//! the bulk of a message holding one is an error.
//!
//! The MDS owns the life of OST objects: it connects to each OSS with
//! `Role::Mds` and asks it to create objects in advance (`Precreate`) and to
//! destroy those of removed files (`Destroy`); an OSS takes those two only
//! on such a connection (a client sending one is `Refused`). Which roles a
//! peer may claim depends on its key (see `lanefs_net::auth`).
//!
//! A client sends `Ping` on every connection it has sent nothing on for
//! its ping interval, and the server answers `Pong` from the connection
//! itself (whatever its OSTs are doing, recovery included): a server closes
//! a connection silent for longer than its idle timeout (see
//! `lanefs_net::limits`), as Lustre's ping evictor does.
//!
//! Shared memory is set up right after the handshake, on a Unix socket
//! only: the client sends `AttachArena` with the arena's memfd attached
//! (`SCM_RIGHTS`) and waits for `ArenaAttached` or `ArenaRefused` before
//! sending anything else.

use lanefs_core::ldlm::stats::LockCounters;
use lanefs_core::msg::{Payload, ToClient, ToOst};
use lanefs_core::ost::OstCounters;
use lanefs_core::pages::PageSpan;
use lanefs_core::{ObjectId, Xid};
use serde::{Deserialize, Serialize};

/// "LNFS".
pub const MAGIC: u32 = 0x4c4e_4653;
/// Bumped on every incompatible change of [`Wire`] or of the core messages.
/// 2: bulk data became a `Payload` (an enum tag in the header).
/// 3: shared-memory bulk (`AttachArena`, `WriteShared`).
/// 4: `ToOst::Sync` and `ToClient::SyncReply` (fsync commits the OSTs).
/// 5: recovery (`Session`; sessions, replay, commits and their notices in
///    the core messages; error numbers in `IoError`); credentials on every
///    namespace call, paged `Readdir`, owners and permissions in the MDS's
///    answers, `Role::Mds` with `Precreate` and acknowledged `Destroy` from
///    the MDS to the OSSes; on TCP the frames travel inside mutual TLS with
///    the cluster's keys, and the roles a `Hello` may claim depend on the
///    peer's key (`lanefs_net::auth`); `Ping` and `Pong` (servers close
///    connections silent too long); an OST out of service
///    (`IoError::Failed`, `EnqueueReply::Failed`, `ToClient::Failed`).
/// 6: file locks (`MdsCall::Flock`), opens and closes told to the MDS
///    (`Opened`, `Closed`), symbolic and hard links and three times per
///    inode in the namespace calls and answers.
/// 7: OST pools (`ChangePool`, `ListPools`, `Pools`, a pool in the stripe
///    settings and in `GetStripe`'s answer), `DeleteStripe`, the MDT's
///    space in `Statfs`.
/// 7 (also): RPC sizes and page histograms in the OST counters, and the OST's
///    `sync_lock_cancel`, in `OstStats`; `SetParam` to an OSS, and
///    `KeepParam` and `KeptParams` to the MDS (`lanefs lctl`).
/// 8: cache advice (`ToOst::Advise`, `ToClient::AdviseReply`: `lanefs
///    ladvise -a willread|dontneed`).
/// 9: a file-lock request and a granted lock name the uid they count
///    against (`FlockRequest::uid`, `Flock::uid`); a granted lock comes
///    with its seal (`MdsAnswer::FlockGranted`), which a replay carries;
///    namespace requests that name an inode by fid (`MdsRequest::StatFid`,
///    `OpenFid`, `ReaddirFid`, `SetAttrFid`, `SetMtimeFid`, `SetAtimeFid`,
///    `LinkFid`); the handshake pool, registrations answered `Pong` to a
///    probe.
/// 10: a client names itself to the MDS too (`Session`), and says when it
///    has replayed (`MdsCall::ReplayDone`); an OST's lock grants carry a
///    proof that a replay gives back (`LockProof`); an OST tells a client
///    whose requests wait for its recovery (`ToClient::Recovering`).
/// 11: an OST's answers to writes and punches carry a proof that their
///    replay gives back (`ChangeProof`); an OST refuses a client's lock
///    request past its share (`EnqueueReply::TooMany`, `IoError::TooManyLocks`).
/// 12: extended attributes (`MdsRequest::GetXattr`, `ListXattrs`,
///    `SetXattr`, `RemoveXattr`, by path or by fid); paths anchored at a
///    directory's fid (`/.lustre/fid/[FID]/NAME`), from nodes only; an
///    open recorded in the same step as the request that opens the file
///    (`MdsCall::NamespaceOpen`).
/// 13: named pipes, sockets and devices (`MdsRequest::Mknod`, the new
///    `FileKind`s, `Attr::rdev`); a punch carries a `Cut` (a size, a hole
///    or a reservation: `fallocate`), a getattr answers an `ObjectAttr`
///    (size and space held).
/// 14: overstriping and OST lists (`StripeSpec::overstripe` and `osts`,
///    `StripeDefault::overstripe`).
/// 15: restriping files (`MdsRequest::MigrateStart`, `MigrateCommit`,
///    `MigrateAbort`, `LayoutFid`, `MdsReply::Migration`,
///    `MdsError::MigrationGone`); an enqueue on an object that is gone is
///    refused (`EnqueueReply::NoSuchObject`).
/// 17: a server says how long its OSTs wait for a lock callback's answer
///    (`Welcome::callback_timeout_ms`).
pub const PROTOCOL_VERSION: u16 = 17;

/// Who is connecting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// A client node (file system user) or an admin tool.
    Client,
    /// An OSS announcing its OSTs to the MDS.
    Oss { address: String, osts: Vec<u32> },
    /// The MDS, at an OSS: the only peer that may create and destroy objects.
    Mds,
}

/// Lock and data statistics of one OST (`lctl get_param ldlm.namespaces.*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstStats {
    pub ost: u32,
    pub locks_granted: u64,
    pub locks_waiting: u64,
    pub locks: LockCounters,
    pub data: OstCounters,
    /// Capacity of the file system holding the OST's objects (`statvfs`),
    /// `None` if it could not be read.
    pub space: Option<OstSpace>,
    /// Bytes of write RPCs taken from clients' shared memory rather than
    /// from the socket.
    pub bulk_shared_bytes: u64,
    /// The OST's `sync_lock_cancel` now.
    pub sync_lock_cancel: lanefs_core::ost::SyncLockCancel,
    /// Requests received for the OST and not yet handled, over all its
    /// connections, now.
    pub rpcs_in_flight: u64,
    /// Clients connected to the OST's server now (Lustre's exports).
    pub exports: u64,
}

/// `statvfs` of an OST's backing file system; `fsid` tells OSTs that share
/// one apart, so that capacity is not counted twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstSpace {
    pub fsid: u64,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub total_inodes: u64,
    pub free_inodes: u64,
}

/// Where the OSTs are, as the MDS tells clients.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterInfo {
    pub ost_count: u32,
    /// `(ost index, OSS address)`; an OST whose OSS has not registered is absent.
    pub osts: Vec<(u32, String)>,
}

/// A request to the MDS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MdsCall {
    /// A namespace request, made by the process `credentials` name.
    Namespace {
        credentials: crate::Credentials,
        request: crate::MdsRequest,
    },
    ClusterInfo,
    /// A namespace request that opens a file the caller keeps open
    /// (`Create`, `Open`, `OpenFid`), from a node: answered
    /// `NamespaceOpened`; when it opened a file, the MDS recorded the open
    /// in the same step, as `Opened` would, so that no removal elsewhere
    /// comes between the open and its record.
    NamespaceOpen {
        credentials: crate::Credentials,
        request: crate::MdsRequest,
    },
    /// A file lock (`fcntl`, `flock`): see `crate::flock`.
    Flock(FlockCall),
    /// The caller keeps `fid` open (answered `Opened`, or `Error` past the
    /// MDS's bound): removed meanwhile, it keeps its objects until the
    /// matching `Closed` (see `crate::opens`).
    Opened {
        fid: crate::Fid,
    },
    /// The caller closed one open of `fid` (answered `Opened`).
    Closed {
        fid: crate::Fid,
    },
    /// Keep a client parameter setting for every client that starts from
    /// now on (`lctl set_param -P`), as Lustre's MGS keeps it; from an
    /// administrator only. Answered `Params` with every kept setting.
    /// Without a value: forget the setting kept for `pattern`
    /// (`set_param -P -d`).
    KeepParam {
        pattern: String,
        value: Option<String>,
    },
    /// The kept client settings (answered `Params`): a client applies them
    /// when it starts.
    KeptParams,
    /// The caller has told a restarted MDS again of every lock it holds
    /// and file it keeps open (answered `Opened`): once every client the
    /// MDS knew has, its recovery grace ends (see `crate::mds_clients`).
    ReplayDone,
}

/// A file-lock request. Owners are the caller's: the MDS puts the
/// connection's own number in `owner.client`, whatever the peer sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum FlockCall {
    /// Lock or unlock (`F_SETLK`; `wait`: `F_SETLKW`). A waiting request
    /// is answered when it is granted, or `Interrupted` once cancelled by
    /// its `ticket`, which the caller chooses, unique among its waiters.
    ///
    /// `replay`: a lock this client held before the MDS restarted (or
    /// before its connection was lost), asked for again; during the MDS's
    /// recovery grace only replays are granted. A replay is taken only
    /// with the `seal` the MDS gave with the grant, and only for a range
    /// inside the sealed one (see `lanefs_server::flock_seal`).
    Set {
        request: crate::flock::FlockRequest,
        wait: bool,
        ticket: u64,
        replay: bool,
        seal: Option<crate::flock::FlockSeal>,
    },
    /// `F_GETLK`: the first lock in the way, or `Free`.
    Get { request: crate::flock::FlockRequest },
    /// Withdraw the waiting `Set` of `ticket` (answered `Free`).
    Cancel { ticket: u64 },
    /// Drop every lock `owner` holds on `file` (a close).
    UnlockOwner { file: crate::Fid, owner: u64 },
}

/// Why a server refuses what only a node (a mount, or root) may do on a
/// local user's connection.
pub const USER_NOT_A_NODE: &str = "this connection is a local user's, not a node's: a user who is neither root nor \
    the servers' own user may read the OSTs' statistics (lanefs df) but not read or write objects, lock them or give \
    cache advice on them; do that through a lanefs mount (lanefs mount), which is a node";

/// Why the MDS did not serve a call: each message names the problem and,
/// where there is one, the fix. A client decides what to do by the
/// variant ([`MdsRefusal::is_transient`]), never by the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum MdsRefusal {
    /// The MDS is stopping and did not serve the call: it may be sent again
    /// to the MDS's next start.
    #[error("the MDS is shutting down")]
    ShuttingDown,
    /// Open files and file locks are a mount's: a local user's connection
    /// may not record them.
    #[error("open files and file locks are a mount's: {}", USER_NOT_A_NODE)]
    NotANode,
    /// An open the MDS did not record: `file` as errors name a fid.
    #[error("{file} is not recorded open: {reason}")]
    NotRecordedOpen { file: String, reason: String },
    /// Keeping a setting for every client is the administrator's.
    #[error(
        "keeping a setting for every client needs the cluster's server key (server.pem), or the MDS's own user or \
         root on a Unix socket"
    )]
    NotAdministrator,
    /// The MDS runs without a data directory.
    #[error("this MDS has no data directory to keep settings in")]
    NoDataDirectory,
    /// A setting refused or not kept; the text names it and why.
    #[error("{0}")]
    Setting(String),
    /// The file was migrated and its old objects are not destroyed yet.
    #[error(
        "the file was migrated, but its old objects are not destroyed yet ({reason}): until they are, a client that \
         opened it before may still write there; check that every OSS is up"
    )]
    MigrationPending { reason: String },
    /// The MDS's worker failed on the call (a panic): its transaction, if
    /// any, was rolled back.
    #[error("the MDS failed on this request ({0}); its transaction was rolled back")]
    Failed(String),
}

impl MdsRefusal {
    /// Whether the same call may be served if sent again later (to the
    /// MDS's next start).
    pub fn is_transient(&self) -> bool {
        match self {
            MdsRefusal::ShuttingDown => true,
            MdsRefusal::NotANode
            | MdsRefusal::NotRecordedOpen { .. }
            | MdsRefusal::NotAdministrator
            | MdsRefusal::NoDataDirectory
            | MdsRefusal::Setting(_)
            | MdsRefusal::MigrationPending { .. }
            | MdsRefusal::Failed(_) => false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MdsAnswer {
    Namespace(crate::MdsReply),
    ClusterInfo(ClusterInfo),
    /// The call was not served (a namespace request's own errors travel in
    /// its reply, [`crate::MdsReply::Error`]).
    Error(MdsRefusal),
    Flock(crate::flock::FlockAnswer),
    /// A lock request granted (`FlockAnswer::Granted`), with the seal of
    /// the owner's lock that now covers the request: what the client
    /// replays it with.
    FlockGranted(crate::flock::FlockSeal),
    /// `MdsCall::Opened` or `Closed` is recorded.
    Opened,
    /// The answer to `MdsCall::NamespaceOpen`, and whether the file it
    /// opened is recorded open (not past the MDS's bound).
    NamespaceOpened {
        reply: crate::MdsReply,
        recorded: bool,
    },
    /// The kept client settings, `(pattern, value)`, in the order kept.
    Params(Vec<(String, String)>),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Wire {
    Hello {
        magic: u32,
        version: u16,
        role: Role,
    },
    /// Accepted; `client` is the identity this connection has on the server.
    /// `callback_timeout_ms`: how long the server's OSTs wait for a blocking
    /// callback's answer before they evict the holder (0 from a server
    /// that calls no lock back: the MDS). A client that has heard nothing
    /// from the server for half of it takes the connection for lost, and
    /// so never answers a read from a cache an eviction it has not heard
    /// of has made stale.
    Welcome {
        version: u16,
        client: u32,
        callback_timeout_ms: u64,
    },
    /// Not accepted, or a fatal error on this connection; it closes next.
    Refused {
        reason: String,
    },
    ToOst {
        ost: u32,
        message: ToOst,
    },
    ToClient {
        ost: u32,
        message: ToClient,
    },
    /// MDS to OSS: destroy these objects of a removed file (at most
    /// `crate::objects::DESTROY_BATCH_MAX`). Answered by `Destroyed`.
    Destroy {
        id: u64,
        ost: u32,
        objects: Vec<u64>,
    },
    /// The objects of `Destroy` `id` are gone (or the reason they are not).
    Destroyed {
        id: u64,
        ost: u32,
        result: Result<(), String>,
    },
    /// MDS to OSS: create every object of `ost` up to `last_id` (Lustre's
    /// precreation). Answered by `Precreated`.
    Precreate {
        id: u64,
        ost: u32,
        last_id: u64,
    },
    /// The OST's `LAST_ID` after `Precreate` `id` (or why it failed).
    Precreated {
        id: u64,
        ost: u32,
        result: Result<u64, String>,
    },
    Mds {
        id: u64,
        call: MdsCall,
    },
    MdsReply {
        id: u64,
        answer: MdsAnswer,
    },
    StatsRequest {
        id: u64,
    },
    StatsReply {
        id: u64,
        osts: Vec<OstStats>,
    },
    /// Client to OSS, from an administrator (a server key, or the server's
    /// own user or root on a Unix socket): set one of `ost`'s parameters
    /// (`lctl set_param obdfilter.*.NAME=VALUE`); with `permanent`, also
    /// in the OST's directory, for its next start (`-P`). Answered by
    /// `SetParamReply`. Without a value (with `permanent`): forget the
    /// kept setting (`set_param -P -d`), leaving the current value.
    SetParam {
        id: u64,
        ost: u32,
        name: String,
        value: Option<String>,
        permanent: bool,
    },
    SetParamReply {
        id: u64,
        result: Result<(), String>,
    },
    /// Client to OSS, with the memfd of the client's page arena attached:
    /// map it, `frames` frames, named `arena` in bulk descriptors.
    AttachArena {
        arena: u64,
        frames: u32,
    },
    ArenaAttached {
        arena: u64,
    },
    /// The arena was not mapped; bulk data keeps travelling on the socket.
    ArenaRefused {
        arena: u64,
        reason: String,
    },
    /// Client to OSS, before its first request on every connection: the
    /// identity it keeps for its whole life, so that the OSS knows it again
    /// on a new connection and after a restart (see `lanefs_server::exports`).
    /// Client to MDS likewise, so that a restarted MDS knows which clients
    /// to wait for (see `lanefs_server::mds_clients`).
    Session {
        uuid: u64,
    },
    /// A `ToOst::Write` whose bytes are in the attached arena.
    WriteShared {
        ost: u32,
        xid: Xid,
        object: ObjectId,
        offset: u64,
        bulk: SharedBulk,
    },
    /// Client to server: I am here (sent on a connection idle for the
    /// client's ping interval).
    Ping,
    /// Server to client: the answer to `Ping`.
    Pong,
    /// The connection is a local user's, not a node's, and it asked for
    /// what only a node may do (object I/O, locks, cache advice: see
    /// [`USER_NOT_A_NODE`]); it closes next. A refusal for good, which a
    /// client tells apart from [`Wire::Refused`] by its kind: trying again
    /// gets the same.
    NotANode,
}

/// The bulk part of a frame.
#[derive(Debug)]
pub enum Bulk {
    Bytes(Vec<u8>),
    Pages(PageSpan),
}

impl Bulk {
    pub fn len(&self) -> usize {
        match self {
            Bulk::Bytes(bytes) => bytes.len(),
            Bulk::Pages(span) => span.len() as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, a slice per frame.
    pub fn slices(&self) -> Vec<&[u8]> {
        match self {
            Bulk::Bytes(bytes) => vec![bytes],
            Bulk::Pages(span) => span.slices().collect(),
        }
    }
}

impl Wire {
    /// Whether this kind of message carries bulk bytes after its header.
    pub fn takes_bulk(&self) -> bool {
        matches!(
            self,
            Wire::ToOst { message: ToOst::Write { .. } | ToOst::ReplayWrite { .. }, .. }
                | Wire::ToClient { message: ToClient::ReadReply { result: Ok(_), .. }, .. }
        )
    }

    fn bulk_mut(&mut self) -> Option<&mut Payload> {
        match self {
            Wire::ToOst { message: ToOst::Write { data, .. } | ToOst::ReplayWrite { data, .. }, .. } => Some(data),
            Wire::ToClient { message: ToClient::ReadReply { result: Ok(data), .. }, .. } => Some(data),
            _ => None,
        }
    }

    /// Move the bulk bytes out (the codec sends them raw), leaving an empty
    /// `Payload::Bytes`. A phantom payload cannot travel: `Err` with its
    /// length, and the message is left as it was.
    pub fn take_bulk(&mut self) -> Result<Bulk, PhantomOnWire> {
        let Some(data) = self.bulk_mut() else { return Ok(Bulk::Bytes(Vec::new())) };
        if let Payload::Phantom(len) = data {
            return Err(PhantomOnWire { len: *len });
        }
        Ok(match std::mem::take(data) {
            Payload::Bytes(bytes) => Bulk::Bytes(bytes),
            Payload::Pages(span) => Bulk::Pages(*span),
            remote => Bulk::Bytes(remote.into_bytes().expect("real bytes")),
        })
    }

    /// A write whose pages are all in arena `arena` as a `WriteShared`
    /// (its bytes named, not sent); any other message as it is.
    pub fn share_bulk(self, arena: u64) -> Wire {
        match self {
            Wire::ToOst { ost, message: ToOst::Write { xid, object, offset, data: Payload::Pages(span) } } => {
                match SharedBulk::of(&span, arena) {
                    Some(bulk) => Wire::WriteShared { ost, xid, object, offset, bulk },
                    None => {
                        Wire::ToOst { ost, message: ToOst::Write { xid, object, offset, data: Payload::Pages(span) } }
                    }
                }
            }
            other => other,
        }
    }

    /// Move decoded bulk bytes back in: whatever the header said, the
    /// payload is `Payload::Bytes` of what followed it.
    pub fn put_bulk(&mut self, bulk: Vec<u8>) {
        match self.bulk_mut() {
            Some(data) => *data = Payload::Bytes(bulk),
            None => debug_assert!(bulk.is_empty()),
        }
    }
}

/// A message held a phantom payload, which exists only inside the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a phantom payload of {len} bytes cannot be sent: phantom payloads are for the simulator only")]
pub struct PhantomOnWire {
    pub len: u64,
}

/// The name of a message's kind, for errors and logs (never its fields:
/// a message may hold megabytes of bulk).
pub fn variant(w: &Wire) -> &'static str {
    match w {
        Wire::Hello { .. } => "Hello",
        Wire::Welcome { .. } => "Welcome",
        Wire::Refused { .. } => "Refused",
        Wire::NotANode => "NotANode",
        Wire::ToOst { .. } => "ToOst",
        Wire::ToClient { .. } => "ToClient",
        Wire::Destroy { .. } => "Destroy",
        Wire::Destroyed { .. } => "Destroyed",
        Wire::Precreate { .. } => "Precreate",
        Wire::Precreated { .. } => "Precreated",
        Wire::Mds { .. } => "Mds",
        Wire::MdsReply { .. } => "MdsReply",
        Wire::StatsRequest { .. } => "StatsRequest",
        Wire::StatsReply { .. } => "StatsReply",
        Wire::SetParam { .. } => "SetParam",
        Wire::SetParamReply { .. } => "SetParamReply",
        Wire::AttachArena { .. } => "AttachArena",
        Wire::ArenaAttached { .. } => "ArenaAttached",
        Wire::ArenaRefused { .. } => "ArenaRefused",
        Wire::WriteShared { .. } => "WriteShared",
        Wire::Session { .. } => "Session",
        Wire::Ping => "Ping",
        Wire::Pong => "Pong",
    }
}

/// Where a write RPC's bytes are in the sender's arena: `len` bytes from
/// byte `head` of the first frame, through the frames of `runs` (each
/// `(first frame, count)`) in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedBulk {
    pub arena: u64,
    pub head: u16,
    pub len: u64,
    pub runs: Vec<(u32, u32)>,
}

impl SharedBulk {
    /// The descriptor of `span` if every frame of it is in arena `arena`.
    pub fn of(span: &PageSpan, arena: u64) -> Option<SharedBulk> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for frame in span.frames() {
            let (a, index) = frame.arena_frame()?;
            if a != arena {
                return None;
            }
            match runs.last_mut() {
                Some((first, count)) if *first + *count == index => *count += 1,
                _ => runs.push((index, 1)),
            }
        }
        Some(SharedBulk { arena, head: span.head(), len: span.len(), runs })
    }
}
