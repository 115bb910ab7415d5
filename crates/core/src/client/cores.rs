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
//! A pool is a handle: clones share it, so the clients of nodes that run
//! on one host (a local cluster's, one per rank) take turns on its cores.
//!
//! Invariants: the pool always holds exactly `count` cores; the busy time
//! handed out is the sum of the work run.

use crate::units::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, MutexGuard};

/// A pool of cores; clones are the same pool.
#[derive(Clone, Debug)]
pub struct Cores {
    pool: Arc<Mutex<Pool>>,
}

#[derive(Debug)]
struct Pool {
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
        let pool = Pool { free: (0..count).map(|_| Reverse(Instant::ZERO)).collect(), count, busy_ns: 0 };
        Cores { pool: Arc::new(Mutex::new(pool)) }
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        // A panic while holding the pool leaves it whole (each change is
        // one pop and one push), so a poisoned lock is still usable.
        self.pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `work` on the earliest free core, from `ready` at the earliest;
    /// returns when it ends.
    pub fn run(&self, ready: Instant, work: Duration) -> Instant {
        let mut pool = self.pool();
        let Reverse(free) = pool.free.pop().expect("a pool of cores is never empty");
        let end = ready.max(free) + work;
        pool.free.push(Reverse(end));
        pool.busy_ns = pool.busy_ns.saturating_add(work.as_ns());
        end
    }

    pub fn count(&self) -> u32 {
        self.pool().count
    }

    /// Whether a core has nothing to run at `at` (then work that starts
    /// there wakes it).
    pub fn idle_at(&self, at: Instant) -> bool {
        self.pool().free.peek().is_some_and(|&Reverse(free)| free <= at)
    }

    /// CPU time run on these cores so far.
    pub fn busy(&self) -> Duration {
        Duration(self.pool().busy_ns)
    }

    pub fn check_invariants(&self) {
        let pool = self.pool();
        assert_eq!(pool.free.len(), pool.count as usize, "cores: {} in the pool of {}", pool.free.len(), pool.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_beyond_the_cores_waits_for_one() {
        let cores = Cores::new(2);
        let ms = Duration::from_ms(1);
        assert_eq!(cores.run(Instant::ZERO, ms), Instant::ZERO + ms);
        assert_eq!(cores.run(Instant::ZERO, ms), Instant::ZERO + ms, "the second core");
        assert_eq!(cores.run(Instant::ZERO, ms), Instant::ZERO + ms + ms, "the third waits");
        assert_eq!(cores.busy(), Duration::from_ms(3));
        cores.check_invariants();
    }

    #[test]
    fn clones_share_the_pool() {
        let (a, b) = (Cores::new(1), Cores::new(1));
        let shared = a.clone();
        let ms = Duration::from_ms(1);
        a.run(Instant::ZERO, ms);
        assert_eq!(shared.run(Instant::ZERO, ms), Instant::ZERO + ms + ms, "a clone waits for the same core");
        assert_eq!(b.run(Instant::ZERO, ms), Instant::ZERO + ms, "another pool does not");
    }

    #[test]
    fn a_core_is_idle_once_its_work_ends() {
        let cores = Cores::new(1);
        let ms = Duration::from_ms(1);
        assert!(cores.idle_at(Instant::ZERO));
        cores.run(Instant::ZERO, ms);
        assert!(!cores.idle_at(Instant::ZERO) && cores.idle_at(Instant::ZERO + ms));
    }

    #[test]
    fn work_ready_later_starts_later() {
        let cores = Cores::new(1);
        let t = Instant::ZERO + Duration::from_ms(5);
        assert_eq!(cores.run(t, Duration::from_ms(1)), t + Duration::from_ms(1));
    }
}
