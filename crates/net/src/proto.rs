//! The messages lanefs nodes exchange over the network, wrapped in one enum.
//!
//! A connection starts with `Hello` (magic number, protocol version, role);
//! the server answers `Welcome` or `Refused` (with the reason) and closes.
//! After that, OST traffic carries lanefs-core's own `ToOst` / `ToClient`
//! messages unchanged, tagged with the OST index (one OSS serves several
//! OSTs over one connection), and MDS traffic carries request/reply pairs
//! matched by id.
//!
//! Bulk data (a write's or a read reply's [`Payload`]) travels as raw bytes
//! after the header (a page span is written frame by frame, never gathered
//! first), or, between a client and an OSS on one host that share the
//! client's page arena (see [`crate::shm`]), as a bulk descriptor in a
//! `WriteShared` message. A phantom payload is the simulator's, and taking
//! the bulk of a message holding one is an error.
//!
//! Shared memory is set up right after the handshake, on a Unix socket
//! only: the client sends `AttachArena` with the arena's memfd attached
//! (`SCM_RIGHTS`) and waits for `ArenaAttached` or `ArenaRefused` before
//! sending anything else.

use crate::shm::SharedBulk;
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
/// 5: an OST out of service (`IoError::Failed`, `EnqueueReply::Failed`,
/// `ToClient::Failed`).
pub const PROTOCOL_VERSION: u16 = 5;

/// Who is connecting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// A client node (file system user) or an admin tool.
    Client,
    /// An OSS announcing its OSTs to the MDS.
    Oss { address: String, osts: Vec<u32> },
}

/// Lock and data statistics of one OST (`lctl get_param ldlm.namespaces.*`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    Namespace(lanefs_mds::MdsRequest),
    ClusterInfo,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum MdsAnswer {
    Namespace(lanefs_mds::MdsReply),
    ClusterInfo(ClusterInfo),
    Error(String),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Wire {
    Hello {
        magic: u32,
        version: u16,
        role: Role,
    },
    /// Accepted; `client` is the identity this connection has on the server.
    Welcome {
        version: u16,
        client: u32,
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
    /// Remove an object whose file was unlinked (asynchronous, no reply).
    Destroy {
        ost: u32,
        object: u64,
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
    /// A `ToOst::Write` whose bytes are in the attached arena.
    WriteShared {
        ost: u32,
        xid: Xid,
        object: ObjectId,
        offset: u64,
        bulk: SharedBulk,
    },
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
            Wire::ToOst { message: ToOst::Write { .. }, .. }
                | Wire::ToClient { message: ToClient::ReadReply { result: Ok(_), .. }, .. }
        )
    }

    fn bulk_mut(&mut self) -> Option<&mut Payload> {
        match self {
            Wire::ToOst { message: ToOst::Write { data, .. }, .. } => Some(data),
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
