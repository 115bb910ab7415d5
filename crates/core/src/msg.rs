//! Messages between clients and OSTs, as plain values.
//!
//! The protocol logic produces and consumes these enums; a wire codec (in
//! lanefs-net) or the simulator's network moves them. Bulk data is a
//! `Vec<u8>` here so that a codec can send it as raw bytes after the header.
//!
//! Ordering: every driver must deliver the messages of one (sender, receiver)
//! pair in the order they were sent, as one TCP connection does. The lock
//! protocol relies on it (an enqueue reply is always seen before a callback
//! for the same lock; a client's write RPCs reach the OST before its cancel).

use crate::extent::Extent;
use crate::ldlm::LockRequest;
use crate::units::{LockHandle, ObjectId, Xid};
use serde::{Deserialize, Serialize};

/// From a client to an OST.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToOst {
    /// (Re)connect; after an eviction the OST refuses everything else until it.
    Connect,
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
        data: Vec<u8>,
    },
    Read {
        xid: Xid,
        object: ObjectId,
        offset: u64,
        len: u64,
    },
    /// Truncate the object to `size` bytes.
    Punch {
        xid: Xid,
        object: ObjectId,
        size: u64,
    },
    /// Object size, including data still dirty in other clients' caches.
    Getattr {
        xid: Xid,
        object: ObjectId,
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
    },
    /// Queued behind conflicting locks; a [`ToClient::Completion`] follows.
    Waiting {
        lock: LockHandle,
    },
    /// Speculative request that met a conflict (`-EAGAIN`).
    Refused,
    /// The client is evicted and must reconnect.
    Evicted,
    /// The request was malformed (an inverted extent, or edges not on page
    /// boundaries); a correct client never sends one.
    Invalid,
}

/// Why an I/O RPC failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum IoError {
    #[error("client was evicted by the OST; reconnect and redo the I/O")]
    Evicted,
    #[error("no such object on this OST")]
    NoSuchObject,
    #[error("object offset overflows the maximum object size")]
    TooLarge,
    #[error("the OST's object store failed")]
    Store,
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
    },
    /// BL AST: give the lock back (flush what it covers, then cancel).
    Blocking {
        lock: LockHandle,
    },
    WriteReply {
        xid: Xid,
        result: Result<(), IoError>,
    },
    ReadReply {
        xid: Xid,
        result: Result<Vec<u8>, IoError>,
    },
    PunchReply {
        xid: Xid,
        result: Result<(), IoError>,
    },
    GetattrReply {
        xid: Xid,
        result: Result<u64, IoError>,
    },
    /// Glimpse AST: report the object size this client's cache implies.
    Glimpse {
        xid: Xid,
        object: ObjectId,
        lock: LockHandle,
    },
    /// The client's locks here were dropped after a missed callback.
    Evicted,
}
