//! Messages between clients and OSTs, as plain values.
//!
//! The protocol logic produces and consumes these enums; a wire codec (in
//! lanefs-proto's codec) or the simulator's network moves them. Bulk data is a
//! [`Payload`]: real bytes (a `Vec<u8>`, which a codec sends raw after the
//! header) or, in the simulator only, a *phantom* that has a length and no
//! bytes.
//!
//! Ordering: every driver must deliver the messages of one (sender, receiver)
//! pair in the order they were sent, as one TCP connection does. The lock
//! protocol relies on it (an enqueue reply is always seen before a callback
//! for the same lock; a client's write RPCs reach the OST before its cancel).
//!
//! What a peer may send: any value of these types. Each receiver checks
//! every field at its boundary and answers a malformed request with an
//! error ([`IoError::Invalid`], [`EnqueueReply::Invalid`]) or ignores a
//! stray message with a debug log, never a panic: the OST's rules are in
//! [`crate::ost`] and [`crate::ldlm::server`], the client's in
//! [`crate::client`]. An OST that fails anyway answers every request with
//! [`IoError::Failed`] ([`ToOst::failed_reply`]) and tells its clients
//! once with [`ToClient::Failed`].
// A match over lock modes or message kinds names every one, so that a new
// one is placed by hand wherever it matters.
#![deny(clippy::wildcard_enum_match_arm, clippy::match_wildcard_for_single_variants)]

pub use crate::cut::Cut;
use crate::errno::Errno;
use crate::extent::Extent;
use crate::ldlm::proof::{ChangeProof, LockProof};
use crate::ldlm::LockRequest;
use crate::pages::{PageSpan, RemoteSpan};
use crate::units::{Duration, Epoch, LockHandle, ObjectId, Transno, Xid};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The bulk data of a write or a read reply.
///
/// `Bytes` and `Pages` are real bytes: in a vector, or laid over page frames
/// ([`PageSpan`]: what a client's write RPC carries, its pages shared with
/// the page cache rather than copied). `Remote` is real bytes too, in memory
/// the receiving process maps but does not own (an OSS's view of a local
/// client's frames, see [`RemoteSpan`]). The three compare equal when their
/// bytes are equal, and all serialize as `Bytes`.
///
/// `Phantom(len)` stands for `len` bytes that nobody stores or copies: the
/// simulator runs the real client (locks, page cache bookkeeping, writeback
/// RPCs) and the real OST service over terabytes "written" without holding
/// them. The rule: phantom payloads are for the simulator only. A wire codec
/// never carries one (lanefs-proto's codec refuses to encode it), and one client or
/// one object store handles one kind only (see
/// [`crate::client::Client::write_payload`] and [`crate::store::ObjectStore`]).
#[derive(Clone, Debug)]
pub enum Payload {
    Bytes(Vec<u8>),
    /// `len` bytes with no content.
    Phantom(u64),
    /// Boxed, as is `Remote`: messages stay small (the simulator moves
    /// millions of them, almost none of these).
    Pages(Box<PageSpan>),
    Remote(Box<RemoteSpan>),
}

impl Payload {
    pub fn len(&self) -> u64 {
        match self {
            Payload::Bytes(bytes) => bytes.len() as u64,
            Payload::Phantom(len) => *len,
            Payload::Pages(span) => span.len(),
            Payload::Remote(span) => span.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_phantom(&self) -> bool {
        matches!(self, Payload::Phantom(_))
    }

    pub fn kind(&self) -> PayloadKind {
        match self {
            Payload::Phantom(_) => PayloadKind::Phantom,
            Payload::Bytes(_) | Payload::Pages(_) | Payload::Remote(_) => PayloadKind::Bytes,
        }
    }

    /// The bytes of a `Bytes` payload; `None` for the others.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Payload::Bytes(bytes) => Some(bytes),
            Payload::Phantom(_) | Payload::Pages(_) | Payload::Remote(_) => None,
        }
    }

    /// The bytes (copied out of frames or remote memory), or `None` for a
    /// phantom.
    pub fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            Payload::Bytes(bytes) => Some(bytes),
            Payload::Phantom(_) => None,
            Payload::Pages(span) => Some(span.to_vec()),
            Payload::Remote(span) => Some(span.to_vec()),
        }
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Payload::Phantom(a), Payload::Phantom(b)) => a == b,
            (Payload::Phantom(_), _) | (_, Payload::Phantom(_)) => false,
            (Payload::Bytes(a), Payload::Bytes(b)) => a == b,
            (Payload::Pages(span), Payload::Bytes(bytes)) | (Payload::Bytes(bytes), Payload::Pages(span)) => {
                span.content_eq(bytes)
            }
            (a, b) => a.len() == b.len() && a.clone().into_bytes() == b.clone().into_bytes(),
        }
    }
}

impl Eq for Payload {}

/// How a [`Payload`] serializes: real bytes of any representation as `Bytes`.
#[derive(Serialize, Deserialize)]
#[serde(rename = "Payload")]
enum PayloadSerde {
    Bytes(Vec<u8>),
    Phantom(u64),
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Payload::Bytes(bytes) => serializer.serialize_newtype_variant("Payload", 0, "Bytes", bytes),
            Payload::Phantom(len) => serializer.serialize_newtype_variant("Payload", 1, "Phantom", len),
            other @ (Payload::Pages(_) | Payload::Remote(_)) => {
                let bytes = other.clone().into_bytes().expect("real bytes");
                serializer.serialize_newtype_variant("Payload", 0, "Bytes", &bytes)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match PayloadSerde::deserialize(deserializer)? {
            PayloadSerde::Bytes(bytes) => Payload::Bytes(bytes),
            PayloadSerde::Phantom(len) => Payload::Phantom(len),
        })
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Bytes(Vec::new())
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Payload::Bytes(bytes)
    }
}

/// Which kind of [`Payload`] a client, an object store or a message holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PayloadKind {
    Bytes,
    Phantom,
}

impl fmt::Display for PayloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PayloadKind::Bytes => "bytes",
            PayloadKind::Phantom => "phantom",
        })
    }
}

/// An object's attributes as its OST knows them: its size (with what
/// clients' caches hold, by glimpse) and the bytes of space it holds on
/// the OST's disk (what `st_blocks` counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectAttr {
    pub size: u64,
    pub allocated: u64,
}

/// What an OSS is advised to do with its cache of part of an object
/// (Lustre's `LU_LADVISE_WILLREAD` and `LU_LADVISE_DONTNEED`): read it in
/// ahead of reads to come, or let it go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheAdvice {
    WillRead,
    DontNeed,
}

impl CacheAdvice {
    /// The name `lfs ladvise -a` takes.
    pub fn name(self) -> &'static str {
        match self {
            CacheAdvice::WillRead => "willread",
            CacheAdvice::DontNeed => "dontneed",
        }
    }
}

/// From a client to an OST.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToOst {
    /// Start a session with the OST. `resume: None` is a client with no
    /// state there (new, or one that has just discarded it after an
    /// eviction: the OST refuses an evicted client everything else until
    /// this). `Some(epoch)` is a client that reconnects still holding locks
    /// and writes from that life of the OST: the OST answers
    /// [`ToClient::Connected`] (and, in the same life, sends again what the
    /// lost connection may have dropped), or [`ToClient::Evicted`] if it
    /// cannot take the client's state back.
    Connect {
        resume: Option<Epoch>,
    },
    /// During an OST's recovery: a lock this client held before the OST
    /// restarted, granted again as it was (same handle, same extent).
    ReplayLock {
        lock: LockHandle,
        object: ObjectId,
        /// Boxed: replays are rare, and this request would make every
        /// message (the simulator moves millions) a quarter larger.
        request: Box<LockRequest>,
        extent: Extent,
        /// The proof the grant came with (see [`crate::ldlm::proof`]).
        proof: LockProof,
    },
    /// During an OST's recovery: a write the OST acknowledged as `transno`
    /// but had not committed when it stopped.
    ReplayWrite {
        transno: Transno,
        object: ObjectId,
        offset: u64,
        data: Payload,
        /// The proof the acknowledgement carried (see [`crate::ldlm::proof`]).
        proof: ChangeProof,
    },
    /// During an OST's recovery: a punch it acknowledged and had not committed.
    ReplayPunch {
        transno: Transno,
        object: ObjectId,
        cut: Cut,
        proof: ChangeProof,
    },
    /// This client has replayed everything it holds.
    ReplayDone,
    /// The client received the [`ToClient::CommitFailed`] notices up to
    /// `seq`: the OST need not send them again after a reconnect.
    FailuresSeen {
        seq: u64,
    },
    /// A clean unmount: the client has given back its locks and will not
    /// come back with state (the OST stops counting it among the clients
    /// a recovery waits for, records that, and answers
    /// [`ToClient::Disconnected`]).
    Disconnect,
    Enqueue {
        xid: Xid,
        object: ObjectId,
        request: LockRequest,
    },
    Cancel {
        lock: LockHandle,
    },
    Write {
        xid: Xid,
        object: ObjectId,
        offset: u64,
        data: Payload,
    },
    Read {
        xid: Xid,
        object: ObjectId,
        offset: u64,
        len: u64,
    },
    /// Truncate the object, punch a hole in it or reserve space (`cut`).
    Punch {
        xid: Xid,
        object: ObjectId,
        cut: Cut,
    },
    /// Object size, including data still dirty in other clients' caches,
    /// and the space it holds.
    Getattr {
        xid: Xid,
        object: ObjectId,
    },
    /// Make every write the OST has acknowledged to the object durable
    /// (Lustre's `OST_SYNC`, which `fsync` sends).
    Sync {
        xid: Xid,
        object: ObjectId,
    },
    /// Cache advice on the object's bytes `[start, end)` (Lustre's
    /// `OST_LADVISE`, whose range is exclusive too): a hint to the OSS,
    /// which changes no byte and is answered once the store has taken it.
    Advise {
        xid: Xid,
        object: ObjectId,
        advice: CacheAdvice,
        start: u64,
        end: u64,
    },
    /// Answer to [`ToClient::Glimpse`]: the size this client knows of.
    GlimpseReply {
        xid: Xid,
        size: u64,
    },
}

/// How the server answered an enqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnqueueReply {
    Granted {
        lock: LockHandle,
        extent: Extent,
        /// What a replay of this lock must carry (see [`crate::ldlm::proof`]).
        proof: LockProof,
    },
    /// Queued behind conflicting locks; a [`ToClient::Completion`] follows.
    Waiting { lock: LockHandle },
    /// Speculative request that met a conflict (`-EAGAIN`).
    Refused,
    /// The client is evicted and must reconnect.
    Evicted,
    /// The request was malformed (an inverted extent, or edges not on page
    /// boundaries); a correct client never sends one.
    Invalid,
    /// The client already holds its most locks on this OST
    /// ([`crate::ldlm::server::LOCKS_PER_CLIENT_MAX`]).
    TooMany,
    /// The OST is out of service (see [`IoError::Failed`]).
    Failed,
    /// The object is gone from the OST (destroyed: its file was removed,
    /// or restriped onto other objects, see [`IoError::NoSuchObject`]).
    NoSuchObject,
}

/// Why an I/O RPC failed. Each names its cause as the OST's operating
/// system did (see [`Errno`]), so that the program whose write was lost is
/// told `ENOSPC` or `EIO`, not "failed".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum IoError {
    #[error("client was evicted by the OST; reconnect and redo the I/O")]
    Evicted,
    #[error("the object is missing from the OST (ENOENT): it was lost or destroyed on the server")]
    NoSuchObject,
    #[error("object offset overflows the maximum object size")]
    TooLarge,
    #[error("the OST is out of space (ENOSPC): delete files to free space")]
    NoSpace,
    #[error("the OSS ran out of file descriptors (EMFILE): raise its limit (ulimit -n) or lower its load")]
    TooManyFiles,
    #[error(
        "this client holds the most locks an OST gives one client (ENOLCK, LOCKS_PER_CLIENT_MAX = 65,536): \
         close files, lower lru_size or ask for fewer lockahead locks"
    )]
    TooManyLocks,
    /// Any other failure of the OST's disk or file system (`EIO` mostly).
    #[error("the OST's disk failed: {0}")]
    Disk(Errno),
    /// The request broke the protocol's rules (an offset whose end passes
    /// 2^64, a read larger than the bulk maximum, ...); a correct client
    /// never sends one.
    #[error("the OST refused a malformed request")]
    Invalid,
    /// A phantom payload met an object store or a client that holds bytes,
    /// or bytes met phantoms: a simulator set-up error, never seen on a wire.
    #[error("payload kind mismatch: phantom payloads (simulator only) and bytes cannot meet on one OST or client")]
    PayloadKind,
    /// The OST failed on an internal error and serves nothing more until
    /// its OSS restarts: every request is answered with this.
    #[error("the OST failed on an internal error and refuses every request: restart its OSS (its log names the message that failed)")]
    Failed,
    /// The OST's reply broke the protocol (a read answered with another
    /// length than asked for); a correct OST never sends one. The client
    /// fails the operation with it; it is never sent on a wire.
    #[error("the OST answered outside the protocol: its OSS is broken or not a lanefs server")]
    BadReply,
}

impl IoError {
    /// The error number a program sees for it.
    pub fn errno(self) -> Errno {
        match self {
            IoError::Evicted => Errno::EIO,
            IoError::NoSuchObject => Errno::ENOENT,
            IoError::TooLarge => Errno::EFBIG,
            IoError::NoSpace => Errno::ENOSPC,
            IoError::TooManyFiles => Errno::EMFILE,
            IoError::TooManyLocks => Errno::ENOLCK,
            IoError::Disk(errno) => errno,
            IoError::Invalid | IoError::PayloadKind => Errno::EINVAL,
            IoError::Failed | IoError::BadReply => Errno::EIO,
        }
    }

    /// How an object store's error number reads on the wire.
    pub fn from_errno(errno: Errno) -> IoError {
        match errno {
            Errno::ENOSPC | Errno::EDQUOT => IoError::NoSpace,
            Errno::EMFILE | Errno::ENFILE => IoError::TooManyFiles,
            Errno::ENOENT => IoError::NoSuchObject,
            other => IoError::Disk(other),
        }
    }
}

/// From an OST to a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToClient {
    Enqueue {
        xid: Xid,
        reply: EnqueueReply,
    },
    /// CP AST: a waiting lock is granted. With `callback_pending`, conflicting
    /// requests arrived while it waited: use it once, then cancel.
    Completion {
        lock: LockHandle,
        extent: Extent,
        callback_pending: bool,
        /// What a replay of this lock must carry (see [`crate::ldlm::proof`]).
        proof: LockProof,
    },
    /// BL AST: give the lock back (flush what it covers, then cancel).
    Blocking {
        lock: LockHandle,
    },
    /// A waiting lock will never be granted: its object is gone (destroyed
    /// while the lock waited, as a migrated file's old objects are). The
    /// operations waiting for it fail with `error`.
    WaitFailed {
        lock: LockHandle,
        error: IoError,
    },
    /// `transno` names the change for recovery (0 from an OST that keeps
    /// no commit record, as the simulator's), and `proof` is what its
    /// replay must carry (see [`crate::ldlm::proof`]).
    WriteReply {
        xid: Xid,
        result: Result<(), IoError>,
        transno: Transno,
        proof: ChangeProof,
    },
    ReadReply {
        xid: Xid,
        result: Result<Payload, IoError>,
    },
    PunchReply {
        xid: Xid,
        result: Result<(), IoError>,
        transno: Transno,
        proof: ChangeProof,
    },
    GetattrReply {
        xid: Xid,
        result: Result<ObjectAttr, IoError>,
    },
    SyncReply {
        xid: Xid,
        result: Result<(), IoError>,
    },
    AdviseReply {
        xid: Xid,
        result: Result<(), IoError>,
    },
    /// Glimpse AST: report the object size this client's cache implies.
    Glimpse {
        xid: Xid,
        object: ObjectId,
        lock: LockHandle,
    },
    /// The client's locks here were dropped after a missed callback.
    Evicted,
    /// Answer to [`ToOst::Connect`]: the OST's life, and whether it is
    /// recovering (then the client replays its locks and uncommitted
    /// changes, and ends with [`ToOst::ReplayDone`]).
    Connected {
        epoch: Epoch,
        recovering: bool,
    },
    /// Every change up to `transno` is on disk: what a client kept to
    /// replay them may go.
    Committed {
        transno: Transno,
    },
    /// Writes of this client to `object` that the OST acknowledged may not
    /// have reached its disk: a commit failed (`fdatasync` failed with
    /// `error`). The client reports the loss at the next fsync or close.
    /// Notices are numbered per client (`seq`, from 1): sent again after a
    /// reconnect until the client acknowledges them
    /// ([`ToOst::FailuresSeen`]), and taken once.
    CommitFailed {
        object: ObjectId,
        error: IoError,
        seq: u64,
    },
    /// A replayed lock could not be granted again (another holds a
    /// conflicting one): the client drops it and what it covered.
    LockLost {
        lock: LockHandle,
    },
    /// Answer to [`ToOst::Disconnect`]: the OST has recorded that this
    /// client will not come back with state.
    Disconnected,
    /// The OST restarted and is recovering: it keeps this client's
    /// requests until the clients it knew have replayed (`clients_left`
    /// of them have not), at most `remaining` more. Sent once per recovery
    /// to each client it did not know, whose requests wait.
    Recovering {
        remaining: Duration,
        clients_left: u32,
    },
    /// The OST is out of service until its OSS restarts ([`IoError::Failed`]):
    /// whatever waits on it fails, as when it is unreachable.
    Failed,
}

impl ToOst {
    /// The message's kind, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            ToOst::Connect { .. } => "Connect",
            ToOst::ReplayLock { .. } => "ReplayLock",
            ToOst::ReplayWrite { .. } => "ReplayWrite",
            ToOst::ReplayPunch { .. } => "ReplayPunch",
            ToOst::ReplayDone => "ReplayDone",
            ToOst::FailuresSeen { .. } => "FailuresSeen",
            ToOst::Disconnect => "Disconnect",
            ToOst::Enqueue { .. } => "Enqueue",
            ToOst::Cancel { .. } => "Cancel",
            ToOst::Write { .. } => "Write",
            ToOst::Read { .. } => "Read",
            ToOst::Punch { .. } => "Punch",
            ToOst::Getattr { .. } => "Getattr",
            ToOst::Sync { .. } => "Sync",
            ToOst::Advise { .. } => "Advise",
            ToOst::GlimpseReply { .. } => "GlimpseReply",
        }
    }

    /// The xid of the reply this request expects, if it expects one.
    pub fn reply_xid(&self) -> Option<Xid> {
        match *self {
            ToOst::Enqueue { xid, .. }
            | ToOst::Write { xid, .. }
            | ToOst::Read { xid, .. }
            | ToOst::Punch { xid, .. }
            | ToOst::Getattr { xid, .. }
            | ToOst::Sync { xid, .. }
            | ToOst::Advise { xid, .. } => Some(xid),
            ToOst::Connect { .. }
            | ToOst::ReplayLock { .. }
            | ToOst::ReplayWrite { .. }
            | ToOst::ReplayPunch { .. }
            | ToOst::ReplayDone
            | ToOst::FailuresSeen { .. }
            | ToOst::Disconnect
            | ToOst::Cancel { .. }
            | ToOst::GlimpseReply { .. } => None,
        }
    }

    /// How an OST out of service answers this request: with
    /// [`IoError::Failed`] (or [`EnqueueReply::Failed`]), a session's
    /// `Connect` or `Disconnect` with [`ToClient::Failed`] (the client
    /// would otherwise wait for `Connected`); `None` for the messages that
    /// expect no answer.
    pub fn failed_reply(&self) -> Option<ToClient> {
        let failed = Err(IoError::Failed);
        let (transno, proof) = (Transno(0), ChangeProof::default());
        Some(match *self {
            ToOst::Enqueue { xid, .. } => ToClient::Enqueue { xid, reply: EnqueueReply::Failed },
            ToOst::Write { xid, .. } => ToClient::WriteReply { xid, result: failed, transno, proof },
            ToOst::Read { xid, .. } => ToClient::ReadReply { xid, result: Err(IoError::Failed) },
            ToOst::Punch { xid, .. } => ToClient::PunchReply { xid, result: failed, transno, proof },
            ToOst::Getattr { xid, .. } => ToClient::GetattrReply { xid, result: Err(IoError::Failed) },
            ToOst::Sync { xid, .. } => ToClient::SyncReply { xid, result: failed },
            ToOst::Advise { xid, .. } => ToClient::AdviseReply { xid, result: failed },
            ToOst::Connect { .. } | ToOst::Disconnect => ToClient::Failed,
            ToOst::ReplayLock { .. }
            | ToOst::ReplayWrite { .. }
            | ToOst::ReplayPunch { .. }
            | ToOst::ReplayDone
            | ToOst::FailuresSeen { .. }
            | ToOst::Cancel { .. }
            | ToOst::GlimpseReply { .. } => return None,
        })
    }
}

impl ToClient {
    /// The xid of the request this message answers, if it answers one.
    pub fn reply_xid(&self) -> Option<Xid> {
        match *self {
            ToClient::Enqueue { xid, .. }
            | ToClient::WriteReply { xid, .. }
            | ToClient::ReadReply { xid, .. }
            | ToClient::PunchReply { xid, .. }
            | ToClient::GetattrReply { xid, .. }
            | ToClient::SyncReply { xid, .. }
            | ToClient::AdviseReply { xid, .. } => Some(xid),
            ToClient::Completion { .. }
            | ToClient::Blocking { .. }
            | ToClient::WaitFailed { .. }
            | ToClient::Glimpse { .. }
            | ToClient::Evicted
            | ToClient::Connected { .. }
            | ToClient::Committed { .. }
            | ToClient::CommitFailed { .. }
            | ToClient::LockLost { .. }
            | ToClient::Disconnected
            | ToClient::Recovering { .. }
            | ToClient::Failed => None,
        }
    }
}
