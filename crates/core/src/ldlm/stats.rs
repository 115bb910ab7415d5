//! Lock counters, kept per resource (OST object) and summed per namespace.
//!
//! These are what `lctl get_param ldlm.namespaces.*` shows on Lustre and what
//! the benchmarks print: they are incremented at the single place in the
//! server where each decision is taken.

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockCounters {
    /// Enqueue requests received (lockahead ones included).
    pub enqueues: u64,
    /// Lockahead (speculative) enqueue requests received.
    pub lockahead: u64,
    /// Locks granted (at once or after waiting).
    pub grants: u64,
    /// Requests refused (speculative conflicts, evicted clients).
    pub refusals: u64,
    /// Blocking callbacks sent.
    pub callbacks: u64,
    /// Locks cancelled by their holders.
    pub cancels: u64,
    /// Clients evicted while holding or waiting for a lock here.
    pub evictions: u64,
    /// Conflicting locks met by enqueues (granted or waiting), the input of
    /// Lustre's contention detection.
    pub conflicts: u64,
}

impl LockCounters {
    /// An enqueue request received, lockahead or not.
    pub fn note_enqueue(&mut self, lockahead: bool) {
        self.enqueues += 1;
        self.lockahead += u64::from(lockahead);
    }
}

impl AddAssign for LockCounters {
    fn add_assign(&mut self, o: Self) {
        self.enqueues += o.enqueues;
        self.lockahead += o.lockahead;
        self.grants += o.grants;
        self.refusals += o.refusals;
        self.callbacks += o.callbacks;
        self.cancels += o.cancels;
        self.evictions += o.evictions;
        self.conflicts += o.conflicts;
    }
}
