//! [`Cut`]: a change of an object's bytes that sends none, in the
//! messages, the stores, the proofs of changes and the replay.

use serde::{Deserialize, Serialize};

/// A change of an object's bytes that sends none (Lustre's `OST_PUNCH`
/// and `OST_FALLOCATE`): a truncate, a hole punched, or space reserved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Cut {
    /// The object to `size` bytes: dropped past it, or zero-extended.
    Size(u64),
    /// `[offset, offset + len)` reads as zeros and holds no space; the
    /// size stays (`fallocate` with `FALLOC_FL_PUNCH_HOLE`).
    Hole { offset: u64, len: u64 },
    /// Space for `[offset, offset + len)`, with the bytes already there
    /// kept; the object grows to end there at least, unless `keep_size`
    /// (`fallocate` mode 0, or with `FALLOC_FL_KEEP_SIZE`).
    Reserve { offset: u64, len: u64, keep_size: bool },
}

impl Cut {
    /// The offset and length the cut reaches, for bounds checks.
    pub fn span(self) -> (u64, u64) {
        match self {
            Cut::Size(size) => (size, 0),
            Cut::Hole { offset, len } | Cut::Reserve { offset, len, .. } => (offset, len),
        }
    }
}
