//! An OST's journal, as far as a sync on lock cancel waits for it.
//!
//! A Lustre OST on ldiskfs writes a client's data to disk before it answers
//! the write RPC, but the metadata the write changed (blocks allocated, the
//! object's size) sits in the running transaction of the file system's
//! journal (jbd2) until that transaction commits. With `sync_lock_cancel`
//! on, a cancel of a write lock first syncs the lock's object
//! (`tgt_blocking_ast` -> `tgt_sync`), which commits the journal only if
//! the object changed since the last commit (`dt_version_get(obj) >
//! obd_last_committed`) and otherwise returns at once.
//!
//! The model, one per OST:
//! * a write the OST completes changes its object in the running
//!   transaction;
//! * a transaction commits when a sync needs it, or [`COMMIT_INTERVAL`]
//!   after its first change (jbd2's periodic commit), whichever is first;
//! * commits run one at a time, each taking the cluster description's
//!   `journal_commit_us`; the transaction that starts with a commit takes
//!   the changes that follow;
//! * a sync is answered when the transaction holding its object's last
//!   change has committed.
//!
//! Left out: a commit waiting for writes still in progress to close their
//! handles, and the commit's few blocks taking disk bandwidth from data.
//!
//! Same shape as the core's state machines: `handle_*` inputs with `now`,
//! [`Journal::poll_synced`] and [`Journal::poll_timeout`] outputs.

use lanefs_core::ost::SyncToken;
use lanefs_core::units::{Duration, Instant, ObjectId};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// jbd2's default commit interval (`JBD2_DEFAULT_MAX_COMMIT_AGE`, 5 s, in
/// the kernel's `include/linux/jbd2.h`): a transaction with changes commits
/// at the latest this long after its first change.
pub const COMMIT_INTERVAL: Duration = Duration::from_secs(5);

/// Transaction ids: 0 is "committed before the run", the first running
/// transaction is 1.
type Tid = u64;

#[derive(Debug)]
pub struct Journal {
    commit_time: Duration,
    running: Tid,
    /// When the running transaction took its first change, if it has one.
    running_since: Option<Instant>,
    /// The transaction committing and when its commit ends.
    committing: Option<(Tid, Instant)>,
    committed: Tid,
    /// The running transaction must commit as soon as the journal is free.
    commit_wanted: bool,
    /// The transaction of each object's last change.
    changed_in: FxHashMap<ObjectId, Tid>,
    /// Syncs waiting, with the transaction each needs committed.
    waiting: Vec<(Tid, SyncToken)>,
    synced: VecDeque<SyncToken>,
    /// Commits started so far.
    pub commits: u64,
}

impl Journal {
    pub fn new(commit_time: Duration) -> Journal {
        Journal {
            commit_time,
            running: 1,
            running_since: None,
            committing: None,
            committed: 0,
            commit_wanted: false,
            changed_in: FxHashMap::default(),
            waiting: Vec::new(),
            synced: VecDeque::new(),
            commits: 0,
        }
    }

    /// The OST completed a write to `object`.
    pub fn handle_write(&mut self, now: Instant, object: ObjectId) {
        self.changed_in.insert(object, self.running);
        self.running_since.get_or_insert(now);
    }

    /// A sync waits for every one of `objects` to be durable: a cancel's
    /// or an fsync's object, or every object a commit covers (none: it is
    /// answered at once).
    pub fn handle_sync(&mut self, now: Instant, objects: &[ObjectId], token: SyncToken) {
        let tid = objects.iter().filter_map(|object| self.changed_in.get(object).copied()).max().unwrap_or(0);
        if tid <= self.committed {
            self.synced.push_back(token);
            return;
        }
        self.waiting.push((tid, token));
        if tid == self.running {
            match self.committing {
                None => self.start_commit(now),
                Some(_) => self.commit_wanted = true,
            }
        }
    }

    /// Ends the commit that is due and starts the next one that is wanted.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some((tid, end)) = self.committing {
            if end > now {
                return;
            }
            self.committing = None;
            self.committed = tid;
            let committed = self.committed;
            let synced = &mut self.synced;
            self.waiting.retain(|&(need, token)| {
                let done = need <= committed;
                if done {
                    synced.push_back(token);
                }
                !done
            });
        }
        let interval_over = self.running_since.is_some_and(|since| since + COMMIT_INTERVAL <= now);
        if self.commit_wanted || interval_over {
            self.start_commit(now);
        }
    }

    /// The next sync answered, for [`lanefs_core::ost::Ost::handle_synced`].
    #[must_use]
    pub fn poll_synced(&mut self) -> Option<SyncToken> {
        self.synced.pop_front()
    }

    /// When [`Journal::handle_timeout`] has something to do.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.committing {
            Some((_, end)) => Some(end),
            None => self.running_since.map(|since| since + COMMIT_INTERVAL),
        }
    }

    pub fn check_invariants(&self) {
        assert!(self.committed < self.running, "transaction {} committed while running", self.running);
        if let Some((tid, _)) = self.committing {
            assert_eq!(tid + 1, self.running, "the transaction after the committing one runs");
            assert_eq!(tid, self.committed + 1, "commits end in order");
        }
        for &(need, _) in &self.waiting {
            assert!(need > self.committed && need <= self.running, "a sync waits for transaction {need}");
        }
        assert!(!self.commit_wanted || self.committing.is_some(), "a wanted commit waits for a running one");
    }

    fn start_commit(&mut self, now: Instant) {
        debug_assert!(self.committing.is_none(), "one commit at a time");
        self.committing = Some((self.running, now + self.commit_time));
        self.running += 1;
        self.running_since = None;
        self.commit_wanted = false;
        self.commits += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: Duration = Duration::from_ms(8);
    const A: ObjectId = ObjectId(1);
    const B: ObjectId = ObjectId(2);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_ms(ms)
    }

    fn synced(journal: &mut Journal) -> Vec<u64> {
        std::iter::from_fn(|| journal.poll_synced()).map(|t| t.0).collect()
    }

    #[test]
    fn an_object_never_written_or_already_committed_syncs_at_once() {
        let mut journal = Journal::new(COMMIT);
        journal.handle_sync(at(0), &[A], SyncToken(1));
        assert_eq!(synced(&mut journal), [1]);
        assert_eq!(journal.poll_timeout(), None);
        journal.handle_write(at(1), A);
        journal.handle_sync(at(1), &[A], SyncToken(2));
        assert_eq!(synced(&mut journal), Vec::<u64>::new());
        assert_eq!(journal.poll_timeout(), Some(at(9)));
        journal.handle_timeout(at(9));
        assert_eq!(synced(&mut journal), [2]);
        journal.handle_sync(at(10), &[A], SyncToken(3));
        assert_eq!(synced(&mut journal), [3], "nothing changed since the commit");
        assert_eq!(journal.commits, 1);
        journal.check_invariants();
    }

    #[test]
    fn commits_run_one_at_a_time_and_a_change_during_one_needs_the_next() {
        let mut journal = Journal::new(COMMIT);
        journal.handle_write(at(0), A);
        journal.handle_sync(at(0), &[A], SyncToken(1));
        // B changes while A's transaction commits: it is in the next one.
        journal.handle_write(at(2), B);
        journal.handle_sync(at(2), &[B], SyncToken(2));
        // A second sync of A joins the commit running; a commit of both
        // waits for the later of their transactions.
        journal.handle_sync(at(3), &[A], SyncToken(3));
        journal.handle_sync(at(3), &[A, B], SyncToken(4));
        journal.check_invariants();
        journal.handle_timeout(at(8));
        assert_eq!(synced(&mut journal), [1, 3]);
        assert_eq!(journal.poll_timeout(), Some(at(16)), "B's commit starts when A's ends");
        journal.handle_timeout(at(16));
        assert_eq!(synced(&mut journal), [2, 4]);
        assert_eq!(journal.commits, 2);
        journal.check_invariants();
    }

    #[test]
    fn a_transaction_commits_by_itself_after_the_interval() {
        let mut journal = Journal::new(COMMIT);
        journal.handle_write(at(100), A);
        assert_eq!(journal.poll_timeout(), Some(at(100) + COMMIT_INTERVAL));
        journal.handle_timeout(at(100) + COMMIT_INTERVAL);
        assert_eq!(journal.commits, 1);
        journal.handle_timeout(at(108) + COMMIT_INTERVAL);
        assert_eq!(journal.poll_timeout(), None);
        journal.handle_sync(at(200) + COMMIT_INTERVAL, &[A], SyncToken(1));
        assert_eq!(synced(&mut journal), [1], "the periodic commit made A durable");
        journal.check_invariants();
    }
}
