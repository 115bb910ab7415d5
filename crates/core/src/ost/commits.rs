//! What an OST has changed and what of it is on disk: transaction numbers,
//! commits, and who must be told of them.
//!
//! Every change an OST makes for a client (a write, a punch) gets the next
//! transaction number ([`Transno`]), returned in the reply. The change is
//! acknowledged but not yet durable: the object's bytes may sit in the
//! OSS's page cache, and a crash (of the machine, or of the simulated OSS
//! in the fault swarm) loses them. A *commit* makes every change up to a
//! transaction number durable at once, as a journal commit does on
//! Lustre's ldiskfs (fsync there commits the running jbd2 transaction,
//! which holds every object's changes, not only the synced one's): the
//! OST asks its driver to sync every object changed since the last commit
//! began, and the driver records the commit point durably before it
//! answers. Then the OST tells each client that holds changes up to that
//! point ([`crate::msg::ToClient::Committed`]), and the client lets go of
//! what it kept to replay them (Lustre's `last_committed`).
//!
//! Commits happen when something needs one (a client's fsync or soft
//! sync, a lock cancel under `sync_lock_cancel`), once
//! [`COMMIT_BYTES_DEFAULT`] were written since the last one began, and at
//! the latest [`COMMIT_INTERVAL_DEFAULT`] after the first change since the
//! last one (jbd2's periodic commit), so that clients that never fsync
//! still let go of their copies. One commit runs at a time; whatever asks
//! for one meanwhile shares the next (group commit, see `Ost::ask_sync`).
//!
//! A commit that fails for an object (`fdatasync` failed: `EIO`, or
//! `ENOSPC` on a thinly provisioned disk) leaves that object's changes in
//! doubt: every client that changed it since the last commit is told
//! ([`crate::msg::ToClient::CommitFailed`]), and reports the loss to the
//! program at the next fsync or close. So is every client that changed it
//! while the commit ran: the failed `fdatasync` may have covered those
//! changes too (Linux marks the pages clean and reports the error once, so
//! the next commit would succeed without them). The commit point still advances
//! past it: a failing disk must not make clients keep their copies
//! forever, and the loss has been reported.
//!
//! Invariant ([`Commits::check_invariants`]): `last_committed <=
//! last_transno`; a commit in flight covers transaction numbers above the
//! last committed one and at most the last given; commits in flight are in
//! transaction order; every client owed a commit notice got a transaction
//! number above the last committed one.

use crate::msg::IoError;
use crate::units::{ClientId, Duration, Instant, ObjectId, Transno};
use std::collections::{BTreeMap, BTreeSet};

/// jbd2's default commit interval (`JBD2_DEFAULT_MAX_COMMIT_AGE`, 5 s):
/// changes are durable at the latest this long after the first of them.
pub const COMMIT_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);

/// A commit begins once this many bytes were written since the last one
/// began. Lustre's OSTs write bulk data to disk as it arrives and their
/// journal commits only metadata; an OSS that writes through its page cache
/// instead starts each commit soon, as the kernel's background writeback
/// starts early, so that a commit never has much to flush and clients let
/// go of their copies kept for replay soon. 4 MiB: Lustre's largest bulk
/// RPC (`brw_size`); 1 to 16 MiB measured in `bench/RESULTS.md`.
pub const COMMIT_BYTES_DEFAULT: u64 = 4 << 20;

/// A commit asked of the driver: every change up to `transno`, of
/// `objects`, with who made them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub transno: Transno,
    pub objects: BTreeMap<ObjectId, BTreeSet<ClientId>>,
}

/// The commit bookkeeping of one OST (see the module docs).
#[derive(Debug)]
pub struct Commits {
    interval: Duration,
    last_transno: Transno,
    last_committed: Transno,
    /// Objects changed since the last commit began, with who changed them.
    changed: BTreeMap<ObjectId, BTreeSet<ClientId>>,
    /// When the first of those changes was made.
    first_change: Option<Instant>,
    /// Bytes those changes wrote.
    changed_bytes: u64,
    /// The highest transaction number each client got that it has not been
    /// told is committed.
    owed: BTreeMap<ClientId, Transno>,
    /// Commits the driver is doing, oldest first.
    in_flight: Vec<Transno>,
}

/// What a finished commit asks the OST to send.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Finished {
    /// `(client, object, error)`: writes whose durability is in doubt.
    pub failed: Vec<(ClientId, ObjectId, IoError)>,
    /// Clients to tell that everything up to the commit is on disk.
    pub committed: Vec<ClientId>,
}

impl Commits {
    /// An OST whose disk holds every change up to `last_committed` (0 for a
    /// new one).
    pub fn new(interval: Duration, last_committed: Transno) -> Commits {
        Commits {
            interval,
            last_transno: last_committed,
            last_committed,
            changed: BTreeMap::new(),
            first_change: None,
            changed_bytes: 0,
            owed: BTreeMap::new(),
            in_flight: Vec::new(),
        }
    }

    pub fn last_committed(&self) -> Transno {
        self.last_committed
    }

    pub fn last_transno(&self) -> Transno {
        self.last_transno
    }

    /// `client` changed `object` (writing `bytes`): its transaction number.
    pub fn record(&mut self, now: Instant, client: ClientId, object: ObjectId, bytes: u64) -> Transno {
        self.last_transno = Transno(self.last_transno.0 + 1);
        self.changed_bytes = self.changed_bytes.saturating_add(bytes);
        self.changed.entry(object).or_default().insert(client);
        self.first_change.get_or_insert(now);
        self.owed.insert(client, self.last_transno);
        self.last_transno
    }

    /// A replayed change `transno` was applied again after a restart: later
    /// changes number after it.
    pub fn replayed(&mut self, now: Instant, client: ClientId, object: ObjectId, transno: Transno) {
        self.last_transno = self.last_transno.max(transno);
        self.changed.entry(object).or_default().insert(client);
        self.first_change.get_or_insert(now);
        let owed = self.owed.entry(client).or_default();
        *owed = (*owed).max(transno);
    }

    /// Start a commit of everything changed so far.
    pub fn begin(&mut self) -> Snapshot {
        self.first_change = None;
        self.changed_bytes = 0;
        self.in_flight.push(self.last_transno);
        Snapshot { transno: self.last_transno, objects: std::mem::take(&mut self.changed) }
    }

    /// The commit `snapshot` is done; `failures` are the objects whose
    /// sync failed. Commits end in the order they began.
    pub fn finish(&mut self, snapshot: &Snapshot, failures: &[(ObjectId, IoError)]) -> Finished {
        assert_eq!(self.in_flight.first(), Some(&snapshot.transno), "commits end in the order they began");
        self.in_flight.remove(0);
        let mut out = Finished::default();
        for &(object, error) in failures {
            // The failed sync may have taken changes made while it ran with
            // it (Linux marks the pages clean and reports the error once):
            // their writers are told too.
            let since = self.changed.get(&object).into_iter().flatten();
            let writers: BTreeSet<ClientId> =
                snapshot.objects.get(&object).into_iter().flatten().chain(since).copied().collect();
            for client in writers {
                out.failed.push((client, object, error));
            }
        }
        self.last_committed = self.last_committed.max(snapshot.transno);
        let transno = self.last_committed;
        out.committed = self.owed.keys().copied().collect();
        self.owed.retain(|_, highest| *highest > transno);
        out
    }

    /// A client is gone (evicted): it is owed nothing any more.
    pub fn forget(&mut self, client: ClientId) {
        self.owed.remove(&client);
        for writers in self.changed.values_mut() {
            writers.remove(&client);
        }
    }

    /// When the periodic commit is due, if anything waits for one.
    pub fn commit_due(&self) -> Option<Instant> {
        self.first_change.map(|t| t + self.interval)
    }

    /// Bytes written since the last commit began.
    pub fn bytes_since_begin(&self) -> u64 {
        self.changed_bytes
    }

    /// Whether changes made since the last commit began wait for one.
    pub fn has_changes(&self) -> bool {
        !self.changed.is_empty()
    }

    pub fn check_invariants(&self) {
        assert!(self.last_committed <= self.last_transno, "committed past the last change");
        assert!(self.in_flight.windows(2).all(|w| w[0] <= w[1]), "commits in flight out of order");
        for t in &self.in_flight {
            assert!(*t <= self.last_transno, "a commit of changes never made");
        }
        for (client, highest) in &self.owed {
            assert!(*highest > Transno(0), "{client} owed a commit of nothing");
            assert!(*highest <= self.last_transno, "{client} owed a change never made");
        }
        assert_eq!(self.first_change.is_some(), !self.changed.is_empty(), "periodic commit timer out of step");
        assert!(self.changed_bytes == 0 || !self.changed.is_empty(), "bytes written by no change");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ClientId = ClientId(1);
    const B: ClientId = ClientId(2);
    const O: ObjectId = ObjectId(7);
    const P: ObjectId = ObjectId(8);

    #[test]
    fn a_commit_covers_what_was_changed_before_it_began() {
        let mut c = Commits::new(COMMIT_INTERVAL_DEFAULT, Transno(0));
        assert_eq!(c.record(Instant::ZERO, A, O, 0), Transno(1));
        assert_eq!(c.commit_due(), Some(Instant::ZERO + COMMIT_INTERVAL_DEFAULT));
        let snapshot = c.begin();
        assert_eq!(c.commit_due(), None);
        // A change while the commit runs belongs to the next one.
        assert_eq!(c.record(Instant(5), B, P, 0), Transno(2));
        let done = c.finish(&snapshot, &[]);
        assert_eq!(done, Finished { failed: vec![], committed: vec![A, B] });
        assert_eq!(c.last_committed(), Transno(1));
        c.check_invariants();
        // B's change is not committed yet: B is still owed a notice.
        let snapshot = c.begin();
        assert_eq!(c.finish(&snapshot, &[]).committed, vec![B]);
        assert_eq!(c.last_committed(), Transno(2));
        c.check_invariants();
    }

    #[test]
    fn a_failed_object_names_every_writer_since_the_last_commit() {
        let mut c = Commits::new(COMMIT_INTERVAL_DEFAULT, Transno(10));
        c.record(Instant::ZERO, A, O, 0);
        c.record(Instant::ZERO, B, O, 0);
        c.record(Instant::ZERO, B, P, 0);
        let snapshot = c.begin();
        let done = c.finish(&snapshot, &[(O, IoError::NoSpace)]);
        assert_eq!(done.failed, vec![(A, O, IoError::NoSpace), (B, O, IoError::NoSpace)]);
        assert_eq!(c.last_committed(), Transno(13), "the commit point moves past a reported loss");
        c.check_invariants();
        // A change made while the failed commit ran may be lost with it.
        c.record(Instant::ZERO, A, P, 0);
        let snapshot = c.begin();
        c.record(Instant::ZERO, B, P, 0);
        let done = c.finish(&snapshot, &[(P, IoError::Disk(crate::errno::Errno(5)))]);
        assert_eq!(done.failed.iter().map(|f| f.0).collect::<Vec<_>>(), vec![A, B]);
        c.check_invariants();
    }

    #[test]
    fn replayed_changes_number_what_follows() {
        let mut c = Commits::new(COMMIT_INTERVAL_DEFAULT, Transno(4));
        c.replayed(Instant::ZERO, A, O, Transno(9));
        assert_eq!(c.record(Instant::ZERO, B, O, 0), Transno(10));
        c.forget(A);
        let snapshot = c.begin();
        assert_eq!(snapshot.objects[&O], BTreeSet::from([B]));
        c.check_invariants();
    }
}
