//! What a client keeps of the changes an OST acknowledged but has not yet
//! committed, to replay them if the OST restarts (Lustre's replay list
//! and "unstable" pages).
//!
//! An OST answers a write once the bytes are in its object, but they may
//! still sit in the OSS's page cache: a crash of the OSS's machine loses
//! them. So a client keeps each acknowledged change, with its transaction
//! number, until the OST says every change up to it is committed
//! ([`crate::msg::ToClient::Committed`]); if the OST restarts meanwhile,
//! the client replays them in transaction order. A write's entry holds the
//! frames its RPC carried (shared with the page cache, copied on write, so
//! the bytes are those the OST acknowledged), not a copy.
//!
//! The bytes kept per OST are bounded by the client's
//! `unstable_bytes_max`: past half of it the client asks the OST to commit
//! (Lustre's soft sync), and at it writes to that OST wait, as they wait
//! for the dirty limit.
//!
//! Invariant ([`ReplayLog::check_invariants`]): each OST's byte count is
//! the sum of its entries' lengths; entries are above the last commit the
//! OST announced.

use crate::ldlm::proof::ChangeProof;
use crate::msg::{Cut, Payload};
use crate::units::{ObjectKey, OstIndex, Transno};
use std::collections::{BTreeMap, BTreeSet};

/// A change kept for replay.
#[derive(Clone, Debug)]
pub enum Change {
    Write { key: ObjectKey, offset: u64, data: Payload, proof: ChangeProof },
    Punch { key: ObjectKey, cut: Cut, proof: ChangeProof },
}

impl Change {
    pub fn key(&self) -> ObjectKey {
        match self {
            Change::Write { key, .. } | Change::Punch { key, .. } => *key,
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Change::Write { data, .. } => data.len(),
            Change::Punch { .. } => 0,
        }
    }
}

#[derive(Debug, Default)]
struct OstLog {
    entries: BTreeMap<Transno, Change>,
    bytes: u64,
    /// The last commit the OST announced.
    committed: Transno,
    /// A commit request (soft sync) is in flight. Only its answer ends it:
    /// a commit notice may be of an earlier commit, which did not cover the
    /// changes the request was for, and asking again at every such notice
    /// would ask for a commit per notice, each bringing notices to every
    /// writer of the OST.
    commit_asked: bool,
}

/// Every OST's uncommitted changes (see the module docs).
#[derive(Debug, Default)]
pub struct ReplayLog {
    osts: BTreeMap<OstIndex, OstLog>,
}

impl ReplayLog {
    /// Keep `change`, acknowledged by `ost` as `transno`. A change the OST
    /// has already announced committed is not kept.
    ///
    /// A build with the `measure-no-replay-copies` feature keeps nothing
    /// (for measuring what the copies cost; it cannot replay).
    pub fn keep(&mut self, ost: OstIndex, transno: Transno, change: Change) {
        if cfg!(feature = "measure-no-replay-copies") {
            return;
        }
        let log = self.osts.entry(ost).or_default();
        if transno <= log.committed {
            return;
        }
        log.bytes += change.bytes();
        if let Some(old) = log.entries.insert(transno, change) {
            log.bytes -= old.bytes(); // the same number twice: a confused OST
        }
    }

    /// `ost` committed everything up to `transno`: those entries go.
    /// Returns the bytes let go.
    pub fn committed(&mut self, ost: OstIndex, transno: Transno) -> u64 {
        let Some(log) = self.osts.get_mut(&ost) else { return 0 };
        log.committed = log.committed.max(transno);
        let kept = log.entries.split_off(&Transno(transno.0.saturating_add(1)));
        let gone = std::mem::replace(&mut log.entries, kept);
        let bytes: u64 = gone.values().map(Change::bytes).sum();
        log.bytes -= bytes;
        bytes
    }

    /// The OST was restarted: it announces commits anew.
    pub fn new_life(&mut self, ost: OstIndex) {
        if let Some(log) = self.osts.get_mut(&ost) {
            log.committed = Transno(0);
            log.commit_asked = false;
        }
    }

    /// Bytes kept for `ost`.
    pub fn bytes(&self, ost: OstIndex) -> u64 {
        self.osts.get(&ost).map_or(0, |log| log.bytes)
    }

    /// Bytes kept for every OST.
    pub fn total_bytes(&self) -> u64 {
        self.osts.values().map(|log| log.bytes).sum()
    }

    /// The changes kept for `ost`, in transaction order.
    pub fn entries(&self, ost: OstIndex) -> impl Iterator<Item = (Transno, &Change)> {
        self.osts.get(&ost).into_iter().flat_map(|log| log.entries.iter().map(|(t, c)| (*t, c)))
    }

    /// Whether a change of `key` is kept.
    pub fn has_key(&self, key: ObjectKey) -> bool {
        self.entries(key.ost).any(|(_, c)| c.key() == key)
    }

    /// Bytes kept for `key`.
    pub fn key_bytes(&self, key: ObjectKey) -> u64 {
        self.entries(key.ost).filter(|(_, c)| c.key() == key).map(|(_, c)| c.bytes()).sum()
    }

    /// Everything kept for `ost` is lost (the client was evicted, or gave
    /// the OST up): the objects it touched, and the bytes.
    pub fn drop_ost(&mut self, ost: OstIndex) -> (BTreeSet<ObjectKey>, u64) {
        let Some(log) = self.osts.get_mut(&ost) else { return (BTreeSet::new(), 0) };
        let keys = log.entries.values().map(Change::key).collect();
        let bytes = std::mem::take(&mut log.bytes);
        log.entries.clear();
        log.commit_asked = false;
        (keys, bytes)
    }

    /// Whether a commit should be asked of `ost`: half its allowance is
    /// used and none is asked yet. Marks it asked.
    pub fn wants_commit(&mut self, ost: OstIndex, unstable_bytes_max: u64) -> bool {
        let Some(log) = self.osts.get_mut(&ost) else { return false };
        if log.commit_asked || log.bytes < unstable_bytes_max / 2 || log.entries.is_empty() {
            return false;
        }
        log.commit_asked = true;
        true
    }

    /// The commit asked of `ost` was answered (or failed): another may be asked.
    pub fn commit_answered(&mut self, ost: OstIndex) {
        if let Some(log) = self.osts.get_mut(&ost) {
            log.commit_asked = false;
        }
    }

    /// An object `ost` holds changes of (to name in a commit request).
    pub fn any_key(&self, ost: OstIndex) -> Option<ObjectKey> {
        self.entries(ost).next().map(|(_, c)| c.key())
    }

    pub fn is_empty(&self) -> bool {
        self.osts.values().all(|log| log.entries.is_empty())
    }

    pub fn check_invariants(&self) {
        for (ost, log) in &self.osts {
            let bytes: u64 = log.entries.values().map(Change::bytes).sum();
            assert_eq!(bytes, log.bytes, "{ost}: replay bytes out of step");
            if let Some((first, _)) = log.entries.first_key_value() {
                assert!(*first > log.committed, "{ost}: a committed change still kept");
            }
            for change in log.entries.values() {
                assert_eq!(change.key().ost, *ost, "a change kept under another OST");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::ObjectId;

    fn write(object: u64, len: usize) -> Change {
        let key = ObjectKey { ost: OstIndex(0), object: ObjectId(object) };
        Change::Write { key, offset: 0, data: Payload::Bytes(vec![7; len]), proof: ChangeProof::default() }
    }

    #[test]
    fn changes_are_kept_until_committed() {
        let mut log = ReplayLog::default();
        let o = OstIndex(0);
        log.keep(o, Transno(3), write(1, 100));
        log.keep(o, Transno(5), write(2, 50));
        assert_eq!(log.bytes(o), 150);
        assert!(!log.wants_commit(o, 400));
        assert!(log.wants_commit(o, 300));
        assert!(!log.wants_commit(o, 300), "asked once");
        assert_eq!(log.committed(o, Transno(4)), 100);
        log.keep(o, Transno(6), write(4, 200));
        assert!(!log.wants_commit(o, 300), "a commit notice does not answer the request");
        log.commit_answered(o);
        assert!(log.wants_commit(o, 300));
        assert_eq!(log.committed(o, Transno(5)), 50);
        log.commit_answered(o);
        assert_eq!(log.entries(o).map(|(t, _)| t).collect::<Vec<_>>(), vec![Transno(6)]);
        log.keep(o, Transno(4), write(3, 10));
        assert_eq!(log.bytes(o), 200, "an acknowledgement of an already committed change is not kept");
        log.check_invariants();
        let (keys, bytes) = log.drop_ost(o);
        assert_eq!((keys.len(), bytes), (1, 200));
        assert!(log.is_empty());
        log.check_invariants();
    }
}
