//! The metadata server as the ranks' opens meet it: one request at a time
//! (lanefs's MDS runs its requests on one thread, each create a SQLite
//! transaction committed to disk: `crates/mds`), a create taking
//! `mds_create_us` and an open of a file that exists `mds_open_us`. Absent,
//! both are free and an open is a round trip, as before.
//!
//! The first open of a file in a run creates it (IOR's writes create their
//! files; a later phase opens what an earlier one made).
//!
//! Invariants ([`Mds::check_invariants`]): the server is free no earlier
//! than it was; it created no file twice.

use lanefs_core::units::{Duration, Instant};
use rustc_hash::FxHashSet;

#[derive(Debug, Default)]
pub struct Mds {
    create: Duration,
    open: Duration,
    /// When the server is done with the requests it has taken.
    free: Instant,
    /// Files created so far.
    created: FxHashSet<u64>,
    pub creates: u64,
    pub opens: u64,
}

impl Mds {
    pub fn new(create: Duration, open: Duration) -> Mds {
        Mds { create, open, ..Mds::default() }
    }

    /// An open of file `file` reaches the server at `at`: when the server
    /// is done with it.
    pub fn open(&mut self, at: Instant, file: u64) -> Instant {
        let service = match self.created.insert(file) {
            true => {
                self.creates += 1;
                self.create
            }
            false => {
                self.opens += 1;
                self.open
            }
        };
        if service == Duration::ZERO {
            return at;
        }
        let done = at.max(self.free) + service;
        self.free = done;
        done
    }

    pub fn check_invariants(&self) {
        assert_eq!(
            self.created.len() as u64,
            self.creates,
            "the MDS created {} files in {} creates",
            self.created.len(),
            self.creates
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_and_opens_take_their_turns_and_a_free_server_answers_at_once() {
        let t = |us: u64| Instant::ZERO + Duration::from_us(us);
        let mut mds = Mds::new(Duration::from_us(1000), Duration::from_us(100));
        assert_eq!(mds.open(t(0), 1), t(1000), "the first open creates");
        assert_eq!(mds.open(t(0), 2), t(2000), "another create waits for the first");
        assert_eq!(mds.open(t(500), 1), t(2100), "then the open of a file made");
        assert_eq!(mds.open(t(5000), 1), t(5100), "a server with nothing to do starts at once");
        assert_eq!((mds.creates, mds.opens), (2, 2));
        mds.check_invariants();
        let mut free = Mds::default();
        assert_eq!(free.open(t(7), 3), t(7), "no costs: no wait");
    }
}
