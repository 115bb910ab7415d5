//! What the hosts' cores were charged for: the simulator's CPU time split
//! by the work it models, so that a run's CPU can be set beside a real
//! run's threads (`sim.cpu_s` in the report).
//!
//! Every charge the world makes on a host's cores names its use; the
//! copies a client makes inside the protocol core (a write's bytes into its
//! cache) are charged there, and are what the cores ran beyond the charges
//! named here ([`CpuLedger::breakdown`]).
//!
//! Invariant ([`CpuLedger::check_invariants`]): the charges named are at
//! most what the cores ran.

use lanefs_core::units::Duration;

/// The work a charge on a host's cores is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuUse {
    /// A rank's calls into its client: each call's cost, the faults of
    /// page frames a write touches first, a read's copy out of the cache.
    Calls,
    /// A client's messages to its servers: per message, per page of bulk,
    /// checksums.
    Messages,
    /// Threads woken for a message (hand-offs).
    WakeUps,
    /// The OSS's I/O RPCs: per RPC and page, the copy into the host's page
    /// cache, the first map of a client's page.
    Io,
    /// The lock servers' work: lock requests and blocking callbacks.
    Locks,
    /// The OSTs' `fdatasync`s on their host: each sync's own work, and the
    /// writeback of the bytes it (or the OST's own commit) sends to the disk.
    Syncs,
    /// MPI messages: per message, and copies within a node; the tests of
    /// a waiting rank that yield the core.
    Mpi,
    /// Requests through a mount.
    Mount,
}

impl CpuUse {
    pub const ALL: [CpuUse; 8] = [
        CpuUse::Calls,
        CpuUse::Messages,
        CpuUse::WakeUps,
        CpuUse::Io,
        CpuUse::Locks,
        CpuUse::Syncs,
        CpuUse::Mpi,
        CpuUse::Mount,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            CpuUse::Calls => "calls",
            CpuUse::Messages => "messages",
            CpuUse::WakeUps => "wake_ups",
            CpuUse::Io => "oss_io",
            CpuUse::Locks => "locks",
            CpuUse::Syncs => "syncs",
            CpuUse::Mpi => "mpi",
            CpuUse::Mount => "mount",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct CpuLedger {
    charged: [Duration; CpuUse::ALL.len()],
}

impl CpuLedger {
    pub fn add(&mut self, use_: CpuUse, work: Duration) {
        let slot = &mut self.charged[use_ as usize];
        *slot = Duration(slot.as_ns().saturating_add(work.as_ns()));
    }

    pub fn charged(&self, use_: CpuUse) -> Duration {
        self.charged[use_ as usize]
    }

    fn named(&self) -> u64 {
        self.charged.iter().fold(0u64, |sum, d| sum.saturating_add(d.as_ns()))
    }

    /// Each use's share of `total`, the CPU time the cores ran, with the
    /// rest as the clients' copies into their caches.
    pub fn breakdown(&self, total: Duration) -> Vec<(&'static str, Duration)> {
        let mut out: Vec<_> = CpuUse::ALL.iter().map(|&u| (u.name(), self.charged(u))).collect();
        out.push(("copies", Duration(total.as_ns().saturating_sub(self.named()))));
        out
    }

    /// Panics unless the charges named are at most `total`, what the cores
    /// ran.
    pub fn check_invariants(&self, total: Duration) {
        assert!(self.named() <= total.as_ns(), "{} ns charged by use, {} ns run", self.named(), total.as_ns());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_of_what_ran_is_copies() {
        let mut ledger = CpuLedger::default();
        ledger.add(CpuUse::Io, Duration(30));
        ledger.add(CpuUse::Io, Duration(10));
        ledger.add(CpuUse::WakeUps, Duration(5));
        ledger.check_invariants(Duration(100));
        let breakdown = ledger.breakdown(Duration(100));
        assert!(breakdown.contains(&("oss_io", Duration(40))));
        assert!(breakdown.contains(&("wake_ups", Duration(5))));
        assert!(breakdown.contains(&("calls", Duration::ZERO)));
        assert_eq!(breakdown.last(), Some(&("copies", Duration(55))));
    }

    #[test]
    #[should_panic(expected = "charged by use")]
    fn more_charged_than_ran_is_caught() {
        let mut ledger = CpuLedger::default();
        ledger.add(CpuUse::Locks, Duration(10));
        ledger.check_invariants(Duration(9));
    }
}
