//! Notices of failed commits, kept until their client has them.
//!
//! When a commit fails for an object, each client that wrote to it since
//! the last commit must learn that its acknowledged writes may be lost
//! ([`crate::msg::ToClient::CommitFailed`]), so that the program that wrote
//! them hears of it at its next fsync or close. A notice may be lost with a
//! connection, so the OST numbers each client's notices, sends the ones not
//! yet acknowledged again when the client reconnects, and forgets them when
//! the client acknowledges ([`crate::msg::ToOst::FailuresSeen`]); the
//! client takes each number once.
//!
//! Bound: [`NOTICES_PER_CLIENT_MAX`] unacknowledged notices per client. A
//! client that lets more pile up is not reading or not acknowledging; the
//! OST evicts it (which reports every unsynced write of it as lost anyway)
//! rather than keep growing.

use crate::msg::IoError;
use crate::units::{ClientId, ObjectId};
use std::collections::{BTreeMap, VecDeque};

/// Unacknowledged notices kept per client.
pub const NOTICES_PER_CLIENT_MAX: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notice {
    pub seq: u64,
    pub object: ObjectId,
    pub error: IoError,
}

#[derive(Debug, Default)]
struct Queue {
    /// The number of the last notice made.
    last: u64,
    unacked: VecDeque<Notice>,
}

/// Every client's notices not yet acknowledged (see the module docs).
#[derive(Debug, Default)]
pub struct Notices {
    queues: BTreeMap<ClientId, Queue>,
}

impl Notices {
    /// A new notice for `client`; `None` if its queue is full (evict it).
    pub fn add(&mut self, client: ClientId, object: ObjectId, error: IoError) -> Option<Notice> {
        let queue = self.queues.entry(client).or_default();
        if queue.unacked.len() >= NOTICES_PER_CLIENT_MAX {
            return None;
        }
        queue.last += 1;
        let notice = Notice { seq: queue.last, object, error };
        queue.unacked.push_back(notice);
        Some(notice)
    }

    /// `client` has every notice up to `seq`.
    pub fn ack(&mut self, client: ClientId, seq: u64) {
        if let Some(queue) = self.queues.get_mut(&client) {
            while queue.unacked.front().is_some_and(|n| n.seq <= seq) {
                queue.unacked.pop_front();
            }
        }
    }

    /// What `client` may not have received, oldest first.
    pub fn unacked(&self, client: ClientId) -> impl Iterator<Item = Notice> + '_ {
        self.queues.get(&client).into_iter().flat_map(|q| q.unacked.iter().copied())
    }

    /// `client` is gone: its notices go with it (a client that comes back
    /// after an eviction has lost everything unsynced anyway).
    pub fn forget(&mut self, client: ClientId) {
        self.queues.remove(&client);
    }

    pub fn check_invariants(&self) {
        for (client, queue) in &self.queues {
            assert!(queue.unacked.len() <= NOTICES_PER_CLIENT_MAX, "{client}: notices past their bound");
            let seqs: Vec<u64> = queue.unacked.iter().map(|n| n.seq).collect();
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{client}: notices out of order");
            assert!(seqs.last().is_none_or(|&s| s <= queue.last), "{client}: a notice numbered past the last");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_wait_for_their_acknowledgement() {
        let mut n = Notices::default();
        let c = ClientId(3);
        let first = n.add(c, ObjectId(1), IoError::NoSpace).unwrap();
        let second = n.add(c, ObjectId(2), IoError::NoSpace).unwrap();
        assert_eq!((first.seq, second.seq), (1, 2));
        n.ack(c, 1);
        assert_eq!(n.unacked(c).collect::<Vec<_>>(), vec![second]);
        n.check_invariants();
        for _ in 1..NOTICES_PER_CLIENT_MAX {
            n.add(c, ObjectId(3), IoError::NoSpace).unwrap();
        }
        assert_eq!(n.add(c, ObjectId(3), IoError::NoSpace), None, "a full queue refuses");
        n.forget(c);
        assert_eq!(n.unacked(c).count(), 0);
    }
}
