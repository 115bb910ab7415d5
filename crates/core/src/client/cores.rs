//! A node's cores in modelled time: the part of a simulated client that
//! says when a piece of CPU work on the node ends.
//!
//! Only a driver that keeps simulated time uses it (the simulator, with
//! [`super::ClientConfig::cores`]): a write's copy into the page cache takes
//! a core for its duration, and the driver charges the node's other CPU work
//! (preparing RPCs, checksums, MPI messages and, where the servers share the
//! node, their service) to the same cores through [`super::Client::run_on_cores`].
//! Work takes the earliest free core and keeps it until done (no preemption):
//! more work than cores waits, so a node's ranks, its client and its servers
//! slow each other down as they do on one machine.
//!
//! Invariants: the pool always holds exactly `count` cores; the busy time
//! handed out is the sum of the work run.

use crate::units::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone, Debug)]
pub struct Cores {
    /// When each core is next free, earliest on top.
    free: BinaryHeap<Reverse<Instant>>,
    count: u32,
    /// CPU time run on the cores so far, in nanoseconds.
    busy_ns: u64,
}

impl Cores {
    /// `count` cores, all free (at least one).
    pub fn new(count: u32) -> Cores {
        let count = count.max(1);
        Cores { free: (0..count).map(|_| Reverse(Instant::ZERO)).collect(), count, busy_ns: 0 }
    }

    /// Runs `work` on the earliest free core, from `ready` at the earliest;
    /// returns when it ends.
    pub fn run(&mut self, ready: Instant, work: Duration) -> Instant {
        let Reverse(free) = self.free.pop().expect("a pool of cores is never empty");
        let end = ready.max(free) + work;
        self.free.push(Reverse(end));
        self.busy_ns = self.busy_ns.saturating_add(work.as_ns());
        end
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// CPU time run on these cores so far.
    pub fn busy(&self) -> Duration {
        Duration(self.busy_ns)
    }

    pub fn check_invariants(&self) {
        assert_eq!(self.free.len(), self.count as usize, "cores: {} in the pool of {}", self.free.len(), self.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_beyond_the_cores_waits_for_one() {
        let mut cores = Cores::new(2);
        let ms = Duration::from_ms(1);
        assert_eq!(cores.run(Instant::ZERO, ms), Instant::ZERO + ms);
        assert_eq!(cores.run(Instant::ZERO, ms), Instant::ZERO + ms, "the second core");
        assert_eq!(cores.run(Instant::ZERO, ms), Instant::ZERO + ms + ms, "the third waits");
        assert_eq!(cores.busy(), Duration::from_ms(3));
        cores.check_invariants();
    }

    #[test]
    fn work_ready_later_starts_later() {
        let mut cores = Cores::new(1);
        let t = Instant::ZERO + Duration::from_ms(5);
        assert_eq!(cores.run(t, Duration::from_ms(1)), t + Duration::from_ms(1));
    }
}
