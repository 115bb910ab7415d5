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
//!
//! Durability: the unacknowledged notices are part of the OST's record
//! ([`super::OstRecord::failures`]), which the driver writes before it
//! sends them. A notice is the only report of a failed commit, whose
//! changes count as committed (a restarted OST skips their replays): lost
//! in a crash, it would leave the writer to replay into nothing and to
//! hear from its next fsync that all is well. A restarted OST numbers the
//! notices it takes from its record afresh and sends them to each client
//! that comes back to recover (a client that took one before the crash
//! but whose acknowledgement was lost is told twice).

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
    /// after an eviction has lost everything unsynced anyway). Whether it
    /// had any.
    pub fn forget(&mut self, client: ClientId) -> bool {
        self.queues.remove(&client).is_some_and(|q| !q.unacked.is_empty())
    }

    /// Every client's unacknowledged notices, for the OST's record.
    pub fn to_record(&self) -> std::collections::BTreeMap<ClientId, Vec<(ObjectId, IoError)>> {
        self.queues
            .iter()
            .filter(|(_, q)| !q.unacked.is_empty())
            .map(|(c, q)| (*c, q.unacked.iter().map(|n| (n.object, n.error)).collect()))
            .collect()
    }

    /// The notices of a record (a restarted OST's), numbered afresh.
    pub fn from_record(failures: &std::collections::BTreeMap<ClientId, Vec<(ObjectId, IoError)>>) -> Notices {
        let mut notices = Notices::default();
        for (&client, list) in failures {
            for &(object, error) in list.iter().take(NOTICES_PER_CLIENT_MAX) {
                notices.add(client, object, error);
            }
        }
        notices
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
        assert!(n.forget(c));
        assert_eq!(n.unacked(c).count(), 0);
    }

    #[test]
    fn a_record_gives_back_the_unacknowledged_notices_numbered_afresh() {
        let mut n = Notices::default();
        let (a, b) = (ClientId(1), ClientId(2));
        n.add(a, ObjectId(1), IoError::NoSpace).unwrap();
        n.add(a, ObjectId(2), IoError::Disk(crate::errno::Errno::EIO)).unwrap();
        n.add(b, ObjectId(3), IoError::NoSpace).unwrap();
        n.ack(a, 1);
        n.ack(b, 1);
        let record = n.to_record();
        assert_eq!(record.len(), 1, "acknowledged notices are not kept");
        let again = Notices::from_record(&record);
        let got: Vec<Notice> = again.unacked(a).collect();
        assert_eq!(got, vec![Notice { seq: 1, object: ObjectId(2), error: IoError::Disk(crate::errno::Errno::EIO) }]);
        assert_eq!(again.unacked(b).count(), 0);
    }
}
