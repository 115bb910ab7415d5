//! Which threads sleep when a message comes for them: a message handed to
//! a thread that waits for one wakes it (a context switch, whose CPU time
//! the world charges on the host's cores), and a thread already running
//! takes the next one with the work it is doing.
//!
//! The threads are those a local lanefs cluster runs: per client, the
//! thread that owns its connections (lanefs-client's driver), which takes
//! the servers' messages; per OSS, the network thread that reads its
//! clients' messages and writes its answers (tokio's one worker); per OST, the
//! service thread that runs it, and its commit thread (with
//! `commit_syncs = "each-object"`), which each `fdatasync`'s end wakes. A
//! rank's own thread is woken by its calls'
//! answers, which `client_cpu_per_call_us` counts (it is measured from
//! calls that wait for them). A thread is taken for awake until the end of
//! the last work the world gave it (a wake-up, a lock request's service, an
//! I/O RPC's, the messages a client sends), and asleep after.
//!
//! Invariants ([`Handoffs::check_invariants`]): there is one thread of
//! each kind per client, OSS and OST; the hand-offs paid are at most the
//! messages handed.

use lanefs_core::units::Instant;

/// A thread messages are handed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Thread {
    /// Client `node`'s connections.
    Client(u32),
    /// The network thread of OSS `oss`.
    Net(u32),
    /// The service thread of OST `ost`.
    Service(u32),
    /// The commit thread of OST `ost`.
    Commit(u32),
}

impl Thread {
    /// The kinds of thread, as the report names them.
    pub const KINDS: [&'static str; 4] = ["client", "oss_network", "ost_service", "ost_commit"];

    fn kind(self) -> usize {
        match self {
            Thread::Client(_) => 0,
            Thread::Net(_) => 1,
            Thread::Service(_) => 2,
            Thread::Commit(_) => 3,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Handoffs {
    clients: Vec<Instant>,
    nets: Vec<Instant>,
    services: Vec<Instant>,
    commits: Vec<Instant>,
    /// Messages handed to a thread, and of them those that woke it (by
    /// kind of thread, in [`Thread::KINDS`] order).
    handed: u64,
    woke: [u64; 4],
}

impl Handoffs {
    pub fn new(clients: usize, oss: usize, osts: usize) -> Handoffs {
        Handoffs {
            clients: vec![Instant::ZERO; clients],
            nets: vec![Instant::ZERO; oss],
            services: vec![Instant::ZERO; osts],
            commits: vec![Instant::ZERO; osts],
            handed: 0,
            woke: [0; 4],
        }
    }

    fn awake_until(&mut self, thread: Thread) -> &mut Instant {
        match thread {
            Thread::Client(n) => &mut self.clients[n as usize],
            Thread::Net(s) => &mut self.nets[s as usize],
            Thread::Service(o) => &mut self.services[o as usize],
            Thread::Commit(o) => &mut self.commits[o as usize],
        }
    }

    /// A message is handed to `thread` at `at`: whether it wakes it (the
    /// thread ran nothing after `at`'s past work ended).
    pub fn hand(&mut self, thread: Thread, at: Instant) -> bool {
        self.handed += 1;
        let asleep = at >= *self.awake_until(thread);
        self.woke[thread.kind()] += u64::from(asleep);
        asleep
    }

    /// `thread` runs until `until` at least.
    pub fn busy(&mut self, thread: Thread, until: Instant) {
        let awake = self.awake_until(thread);
        *awake = (*awake).max(until);
    }

    /// Hand-offs that woke a thread.
    pub fn woke(&self) -> u64 {
        self.woke.iter().sum()
    }

    /// Hand-offs that woke a thread, by kind of thread: each kind's name
    /// with its count.
    pub fn woke_by_kind(&self) -> [(&'static str, u64); 4] {
        std::array::from_fn(|kind| (Thread::KINDS[kind], self.woke[kind]))
    }

    pub fn check_invariants(&self) {
        assert!(self.woke() <= self.handed, "handoffs: {} woke of {} handed", self.woke(), self.handed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_core::units::Duration;

    #[test]
    fn a_running_thread_takes_the_next_message_without_waking() {
        let mut h = Handoffs::new(1, 1, 2);
        let t = |us: u64| Instant::ZERO + Duration::from_us(us);
        assert!(h.hand(Thread::Service(0), t(10)), "asleep at first");
        h.busy(Thread::Service(0), t(50));
        assert!(!h.hand(Thread::Service(0), t(20)), "still serving the first");
        assert!(h.hand(Thread::Service(1), t(20)), "another OST's thread");
        assert!(h.hand(Thread::Service(0), t(50)), "done, asleep again");
        h.busy(Thread::Service(0), t(30));
        assert!(h.hand(Thread::Service(0), t(50)), "an earlier end does not keep it awake longer");
        assert_eq!(h.woke(), 4);
        assert_eq!(h.woke_by_kind(), [("client", 0), ("oss_network", 0), ("ost_service", 4), ("ost_commit", 0)]);
        h.check_invariants();
    }
}
