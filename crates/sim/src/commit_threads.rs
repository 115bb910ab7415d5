//! lanefs's OST commit threads, for an OST that syncs each object
//! (`[storage] commit_syncs = "each-object"`).
//!
//! lanefs's OSS hands each sync its OST asks for (a commit, or the one
//! object a cancel or a sync RPC names) to the OST's commit thread
//! (`CommitThread` in `crates/server/src/oss.rs`), which takes them one
//! after the other in the order asked: it `fdatasync`s every object the
//! request covers, in turn, then, for a commit, writes the OST's commit
//! point (one block in place, and its `fdatasync`), and only then answers
//! the OST. Each `fdatasync` blocks the thread until the disk is done, and
//! its end wakes it again: on a host whose cores are busy, a wake-up waits
//! for a core, so a commit of many objects takes as many waits.
//!
//! This part keeps the order: each OST's requests and where its thread is
//! in the first of them, as [`Step`]s; the world times each step (the
//! disk's time, then the thread's wake-up on the host's cores).
//!
//! Invariants ([`CommitThreads::check_invariants`]): a thread is running
//! exactly when it has a request; the running request's next object is
//! within its objects.

use lanefs_core::ost::SyncRequest;
use lanefs_core::units::ObjectId;
use std::collections::VecDeque;

/// What an OST's commit thread does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// `fdatasync` this object.
    Sync(ObjectId),
    /// Write the OST's commit point and `fdatasync` it.
    Point,
    /// The request is done: answer the OST.
    Answer(Box<SyncRequest>),
}

#[derive(Debug)]
struct Job {
    request: SyncRequest,
    /// The objects the request covers (a commit's, else the one asked).
    objects: Vec<ObjectId>,
    /// Steps taken so far: objects synced, then the commit point.
    taken: usize,
}

impl Job {
    fn new(request: SyncRequest) -> Job {
        let objects = match request.commit.is_empty() {
            true => request.object.into_iter().collect(),
            false => request.commit.clone(),
        };
        Job { request, objects, taken: 0 }
    }

    /// A commit writes its commit point after its objects.
    fn has_point(&self) -> bool {
        !self.request.commit.is_empty()
    }
}

#[derive(Debug, Default)]
pub struct CommitThreads {
    /// Per OST, the requests in the order asked; the first is running.
    queues: Vec<VecDeque<Job>>,
    /// `fdatasync`s (objects and commit points) begun, all told.
    pub syncs: u64,
}

impl CommitThreads {
    pub fn new(osts: usize) -> CommitThreads {
        CommitThreads { queues: (0..osts).map(|_| VecDeque::new()).collect(), syncs: 0 }
    }

    /// OST `ost` asks for a sync: whether its thread was idle (then the
    /// world takes its first [`CommitThreads::step`] now).
    pub fn submit(&mut self, ost: usize, request: SyncRequest) -> bool {
        let queue = &mut self.queues[ost];
        queue.push_back(Job::new(request));
        queue.len() == 1
    }

    /// OST `ost`'s thread is done with its last step (or starts): its next
    /// one. After an [`Step::Answer`] the thread goes on with the next
    /// request, if any; `None`: it has nothing left and sleeps.
    pub fn step(&mut self, ost: usize) -> Option<Step> {
        let job = self.queues[ost].front_mut()?;
        let taken = job.taken;
        job.taken += 1;
        if let Some(&object) = job.objects.get(taken) {
            self.syncs += 1;
            return Some(Step::Sync(object));
        }
        if taken == job.objects.len() && job.has_point() {
            self.syncs += 1;
            return Some(Step::Point);
        }
        let job = self.queues[ost].pop_front().expect("the running request");
        Some(Step::Answer(Box::new(job.request)))
    }

    pub fn check_invariants(&self) {
        for (ost, queue) in self.queues.iter().enumerate() {
            if let Some(job) = queue.front() {
                let steps = job.objects.len() + usize::from(job.has_point());
                assert!(job.taken <= steps, "OST {ost}'s commit thread took {} of {steps} steps", job.taken);
            }
            for job in queue.iter().skip(1) {
                assert_eq!(job.taken, 0, "OST {ost}: a request behind the running one has begun");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_core::ost::SyncToken;
    use lanefs_core::units::Transno;
    use lanefs_core::Extent;

    fn request(token: u64, object: Option<u64>, commit: &[u64]) -> SyncRequest {
        SyncRequest {
            token: SyncToken(token),
            object: object.map(ObjectId),
            extent: Extent::WHOLE,
            commit: commit.iter().copied().map(ObjectId).collect(),
            commit_to: Transno(if commit.is_empty() { 0 } else { token }),
        }
    }

    fn answered(step: Option<Step>) -> u64 {
        match step {
            Some(Step::Answer(request)) => request.token.0,
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn a_commit_syncs_each_object_then_its_point_and_requests_wait_their_turn() {
        let mut threads = CommitThreads::new(2);
        assert!(threads.submit(0, request(1, Some(7), &[7, 8])), "an idle thread starts");
        assert!(!threads.submit(0, request(2, Some(9), &[])), "the second waits");
        assert!(threads.submit(1, request(3, Some(5), &[])), "another OST's thread is its own");
        threads.check_invariants();
        assert_eq!(threads.step(0), Some(Step::Sync(ObjectId(7))));
        assert_eq!(threads.step(0), Some(Step::Sync(ObjectId(8))), "the commit's objects, not the one asked twice");
        assert_eq!(threads.step(0), Some(Step::Point));
        assert_eq!(answered(threads.step(0)), 1);
        assert_eq!(threads.step(0), Some(Step::Sync(ObjectId(9))), "a cancel's sync: its object, no commit point");
        assert_eq!(answered(threads.step(0)), 2);
        assert_eq!(threads.step(0), None, "nothing left");
        assert_eq!(threads.syncs, 4);
        threads.check_invariants();
    }

    #[test]
    fn a_request_for_nothing_is_answered_at_once() {
        let mut threads = CommitThreads::new(1);
        assert!(threads.submit(0, request(4, None, &[])));
        assert_eq!(answered(threads.step(0)), 4);
        assert_eq!(threads.syncs, 0);
    }
}
