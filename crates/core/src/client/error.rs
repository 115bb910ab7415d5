//! What can go wrong for a client's operation, as a program sees it: the
//! typed errors an operation ends with, and why written bytes were lost.
//!
//! Owns no state; every part of the client names its failures with these.

use super::ladvise::LadviseError;
use crate::errno::Errno;
use crate::msg::{Cut, IoError, PayloadKind};
use crate::units::OstIndex;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    #[error("no such open file handle")]
    BadFile,
    #[error("I/O failed on {ost}: {error}")]
    Io { ost: OstIndex, error: IoError },
    #[error("offset {offset} + length {len} is beyond the largest file offset")]
    TooLarge { offset: u64, len: u64 },
    #[error("file has no group lock {0}; take it with group_lock first")]
    NoGroupLock(u64),
    #[error("a group lock is already held on this file")]
    GroupLockHeld,
    #[error(transparent)]
    Ladvise(#[from] LadviseError),
    #[error("{ost} is unreachable: {reason}")]
    Unreachable { ost: OstIndex, reason: String },
    #[error("data written through this file was lost before it was durable on {ost}: {cause}; write it again")]
    WriteLost { ost: OstIndex, cause: LossCause },
    #[error("protocol error: {0}")]
    Protocol(&'static str),
    #[error("invalid client configuration: {0}")]
    Config(String),
    #[error(
        "waited {waited_s} s for a {mode} lock on {ost}, held off by another client's lock (a GROUP lock \
         holds until its holder releases it); try again later, or raise the client's timeout"
    )]
    LockWaitTimeout { ost: OstIndex, mode: &'static str, waited_s: u64 },
    #[error("this client holds {held} payloads and cannot take {offered} ones; use one client per kind")]
    MixedPayloads { held: PayloadKind, offered: PayloadKind },
    #[error("fallocate of {0:?}: a hole or a reservation of at least one byte (a truncate sets a size)")]
    InvalidCut(Cut),
}

impl ClientError {
    /// The error number a program sees for it (what a POSIX layer returns).
    pub fn errno(&self) -> Errno {
        match self {
            ClientError::BadFile => Errno::EBADF,
            ClientError::Io { error, .. } => error.errno(),
            ClientError::TooLarge { .. } => Errno::EFBIG,
            ClientError::NoGroupLock(_) | ClientError::GroupLockHeld | ClientError::Ladvise(_) => Errno::EINVAL,
            ClientError::Unreachable { .. } => Errno::EIO,
            ClientError::WriteLost { cause, .. } => cause.errno(),
            ClientError::Protocol(_) => Errno::EIO,
            ClientError::Config(_) | ClientError::MixedPayloads { .. } | ClientError::InvalidCut(_) => Errno::EINVAL,
            ClientError::LockWaitTimeout { .. } => Errno::ETIMEDOUT,
        }
    }
}

/// Why bytes a program wrote were lost before they were durable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LossCause {
    #[error("the OST evicted this client")]
    Evicted,
    #[error("{0}")]
    Unreachable(String),
    #[error("the OST failed a write: {0}")]
    WriteFailed(IoError),
    #[error("the OST could not make it durable: {0}")]
    SyncFailed(IoError),
}

impl LossCause {
    /// `ENOSPC` for a full OST (as Linux reports a failed writeback), `EIO`
    /// otherwise.
    pub fn errno(&self) -> Errno {
        match self {
            LossCause::WriteFailed(error) | LossCause::SyncFailed(error) => match error.errno() {
                Errno::ENOSPC | Errno::EDQUOT => Errno::ENOSPC,
                _ => Errno::EIO,
            },
            LossCause::Evicted | LossCause::Unreachable(_) => Errno::EIO,
        }
    }
}
