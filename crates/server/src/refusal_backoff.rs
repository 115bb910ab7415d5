//! How long the MDS waits before it answers a file-lock request refused
//! for a share (`ENOLCK`: the uid, its client or the MDS has as many locks
//! or waiters as it may): a user who asks again and again past its share
//! is slowed down, so that its loop costs the servers, and the others,
//! nearly nothing.
//!
//! Each uid's first refusal is answered at once; each further one in a
//! row waits twice as long as the one before, from [`FIRST`] up to
//! [`MOST`]. A request of that uid that is granted (or waits its turn) ends
//! the row. The wait holds back only the refused answer: the connection
//! (a mount serves every user of its node) reads and answers its other
//! requests meanwhile.
//!
//! Where lanefs departs from Lustre: Lustre's MDT answers `ENOLCK` at once
//! (its NRS TBF policy limits request rates per uid, set by an
//! administrator); lanefs slows only what is refused, by itself.
//!
//! Bounds: a row per uid, at most [`UIDS_MAX`] (past them, a new uid's
//! refusals are answered at once); answers held back per uid at most
//! [`HELD_PER_UID_MAX`] (past them, at once: the requests in flight of a
//! connection are bounded anyway).
//!
//! Invariants ([`RefusalBackoff::check_invariants`]): no row is kept
//! without a refusal, none waits past [`MOST`], no more than [`UIDS_MAX`]
//! rows, none holds back more than [`HELD_PER_UID_MAX`].

use std::collections::HashMap;
use std::time::Duration;

/// The wait of a uid's second refusal in a row.
pub const FIRST: Duration = Duration::from_millis(10);
/// The longest wait.
pub const MOST: Duration = Duration::from_secs(1);
/// Uids with a row of refusals kept at once.
pub const UIDS_MAX: usize = 4096;
/// Answers of one uid held back at once.
pub const HELD_PER_UID_MAX: usize = 64;

#[derive(Debug, Default)]
struct Row {
    /// The wait of the next refusal.
    next: Duration,
    /// Answers held back now.
    held: usize,
}

/// The rows of refusals, by uid.
#[derive(Debug, Default)]
pub struct RefusalBackoff {
    rows: HashMap<u32, Row>,
}

impl RefusalBackoff {
    /// A request of `uid` is refused: how long to hold its answer back
    /// (zero: answer now). A non-zero wait is to be ended with
    /// [`RefusalBackoff::answered`].
    pub fn refused(&mut self, uid: u32) -> Duration {
        if !self.rows.contains_key(&uid) && self.rows.len() >= UIDS_MAX {
            return Duration::ZERO;
        }
        let row = self.rows.entry(uid).or_default();
        let wait = row.next;
        row.next = if wait.is_zero() { FIRST } else { (wait * 2).min(MOST) };
        if wait.is_zero() || row.held >= HELD_PER_UID_MAX {
            return Duration::ZERO;
        }
        row.held += 1;
        wait
    }

    /// A held-back answer of `uid` was sent.
    pub fn answered(&mut self, uid: u32) {
        if let Some(row) = self.rows.get_mut(&uid) {
            row.held = row.held.saturating_sub(1);
            if row.held == 0 && row.next.is_zero() {
                self.rows.remove(&uid);
            }
        }
    }

    /// A request of `uid` was granted, or waits its turn: its row ends.
    pub fn served(&mut self, uid: u32) {
        if let Some(row) = self.rows.get_mut(&uid) {
            row.next = Duration::ZERO;
            if row.held == 0 {
                self.rows.remove(&uid);
            }
        }
    }

    pub fn check_invariants(&self) {
        assert!(self.rows.len() <= UIDS_MAX, "{} rows", self.rows.len());
        for (uid, row) in &self.rows {
            assert!(!row.next.is_zero() || row.held > 0, "uid {uid}: a row with no refusal");
            assert!(row.next <= MOST, "uid {uid} waits {:?}", row.next);
            assert!(row.held <= HELD_PER_UID_MAX, "uid {uid} holds {} answers back", row.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_of_refusals_waits_longer_and_longer_until_one_is_served() {
        let mut b = RefusalBackoff::default();
        assert_eq!(b.refused(7), Duration::ZERO, "the first is answered at once");
        let waits: Vec<Duration> = (0..9).map(|_| b.refused(7)).collect();
        assert_eq!(waits[0], FIRST);
        assert_eq!(waits[1], FIRST * 2);
        assert_eq!(*waits.last().unwrap(), MOST);
        assert_eq!(b.refused(8), Duration::ZERO, "another uid has its own row");
        b.check_invariants();
        b.served(7);
        b.check_invariants();
        for _ in 0..9 {
            b.answered(7);
        }
        b.check_invariants();
        assert_eq!(b.refused(7), Duration::ZERO, "served: the row starts again");
    }

    #[test]
    fn rows_and_held_answers_are_bounded() {
        let mut b = RefusalBackoff::default();
        for uid in 0..UIDS_MAX as u32 {
            b.refused(uid);
        }
        assert_eq!(b.refused(u32::MAX), Duration::ZERO);
        assert_eq!(b.refused(u32::MAX), Duration::ZERO, "past the rows kept: at once");
        b.check_invariants();
        let mut b = RefusalBackoff::default();
        b.refused(1);
        for _ in 0..HELD_PER_UID_MAX {
            assert!(!b.refused(1).is_zero());
        }
        assert_eq!(b.refused(1), Duration::ZERO, "past the answers held back: at once");
        b.check_invariants();
    }
}
