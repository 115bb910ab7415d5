//! What a client counts per OST and per mount, for Lustre's statistics
//! files (`osc.*.rpc_stats`, `osc.*.stats`, `ldlm.namespaces.*.stats`,
//! `llite.*.stats`).
//!
//! Every number here is counted at the one place where its event happens
//! (an RPC formed and sent, an operation started, a lock cancelled), never
//! derived. Histograms have a fixed number of buckets (Lustre's
//! `OBD_HIST_MAX`); a value past the last bucket is counted in it. The
//! per-OST table has one entry per OST the client has talked to, so it is
//! bounded by the file system's OST count.
//!
//! Time: the core has no clock, so "since" is the core's own `Instant` of
//! the last reset; drivers turn it into wall-clock time.

use crate::units::Instant;
use serde::{Deserialize, Serialize};

/// Buckets of a histogram (Lustre's `OBD_HIST_MAX`).
pub const HISTOGRAM_BUCKETS: usize = 32;

/// A histogram of `HISTOGRAM_BUCKETS` fixed buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    buckets: [u64; HISTOGRAM_BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: [0; HISTOGRAM_BUCKETS] }
    }
}

impl Histogram {
    /// Count one sample in bucket `index` (the last bucket takes the rest),
    /// as Lustre's `lprocfs_oh_tally`.
    pub fn tally(&mut self, index: usize) {
        let index = index.min(HISTOGRAM_BUCKETS - 1);
        self.buckets[index] = self.buckets[index].saturating_add(1);
    }

    /// Count `value` in the bucket of the smallest power of two at least
    /// as large, as Lustre's `lprocfs_oh_tally_log2`: 1 in bucket 0, 2 in
    /// 1, 3 and 4 in 2, 5 to 8 in 3.
    pub fn tally_log2(&mut self, value: u64) {
        let index = if value <= 1 { 0 } else { (64 - (value - 1).leading_zeros()) as usize };
        self.tally(index);
    }

    pub fn buckets(&self) -> &[u64; HISTOGRAM_BUCKETS] {
        &self.buckets
    }

    pub fn sum(&self) -> u64 {
        self.buckets.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }

    /// Add `other`'s counts to these.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a = a.saturating_add(*b);
        }
    }
}

/// Samples of a value: how many, the smallest, the largest and their sum
/// (Lustre's `LPROCFS_CNTR_AVGMINMAX` counter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Samples {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub sum: u64,
}

impl Samples {
    pub fn sample(&mut self, value: u64) {
        self.min = if self.count == 0 { value } else { self.min.min(value) };
        self.max = self.max.max(value);
        self.count = self.count.saturating_add(1);
        self.sum = self.sum.saturating_add(value);
    }

    /// Take `other`'s samples in too.
    pub fn merge(&mut self, other: &Samples) {
        if other.count == 0 {
            return;
        }
        self.min = if self.count == 0 { other.min } else { self.min.min(other.min) };
        self.max = self.max.max(other.max);
        self.count = self.count.saturating_add(other.count);
        self.sum = self.sum.saturating_add(other.sum);
    }

    pub fn check_invariants(&self) {
        if self.count > 0 {
            assert!(self.min <= self.max, "samples: min {} above max {}", self.min, self.max);
            assert!(self.sum >= self.max, "samples: sum {} below max {}", self.sum, self.max);
        } else {
            assert_eq!((self.min, self.max, self.sum), (0, 0, 0), "samples counted without a sample");
        }
    }
}

/// What this client did with one OST (Lustre's OSC and its ldlm namespace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OscStats {
    /// Pages per RPC (log2 buckets), counted when the RPC is sent.
    pub read_pages: Histogram,
    pub write_pages: Histogram,
    /// RPCs of the kind in flight to the OST, this one included, when an
    /// RPC is sent (bucket `n` for `n` in flight).
    pub read_in_flight: Histogram,
    pub write_in_flight: Histogram,
    /// Page offset of the RPC's first page in its object (log2 buckets of
    /// offset + 1, as Lustre's offset histogram).
    pub read_offset: Histogram,
    pub write_offset: Histogram,
    /// Bytes per read and write RPC.
    pub read_bytes: Samples,
    pub write_bytes: Samples,
    pub punches: u64,
    pub syncs: u64,
    pub getattrs: u64,
    pub enqueues: u64,
    pub cancels: u64,
    pub blocking_callbacks: u64,
}

/// What the applications asked of this client (Lustre's `llite` stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LliteStats {
    /// Bytes per read and write call.
    pub read_bytes: Samples,
    pub write_bytes: Samples,
    pub opens: u64,
    pub closes: u64,
    pub fsyncs: u64,
    pub getattrs: u64,
    pub truncates: u64,
    /// `fallocate` calls (Lustre's `fallocate` counter).
    pub fallocates: u64,
    pub lockaheads: u64,
}

impl LliteStats {
    pub fn check_invariants(&self) {
        self.read_bytes.check_invariants();
        self.write_bytes.check_invariants();
    }
}

/// A client's statistics, as [`crate::client::Client::stats`] shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClientStats {
    /// Per OST the client has sent something to, by index.
    pub osc: std::collections::BTreeMap<crate::units::OstIndex, OscStats>,
    pub llite: LliteStats,
    /// When the statistics were last reset (the core's time).
    pub since: Instant,
}

impl ClientStats {
    pub fn check_invariants(&self) {
        self.llite.check_invariants();
        for osc in self.osc.values() {
            osc.read_bytes.check_invariants();
            osc.write_bytes.check_invariants();
            assert_eq!(osc.write_pages.sum(), osc.write_in_flight.sum(), "write RPCs counted in one histogram only");
            assert_eq!(osc.read_pages.sum(), osc.read_in_flight.sum(), "read RPCs counted in one histogram only");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets_are_lustres() {
        let mut h = Histogram::default();
        for v in [0, 1, 2, 3, 4, 5, 8, 9, 256, u64::MAX] {
            h.tally_log2(v);
        }
        let b = h.buckets();
        assert_eq!((b[0], b[1], b[2], b[3], b[4], b[8]), (2, 1, 2, 2, 1, 1));
        assert_eq!(b[HISTOGRAM_BUCKETS - 1], 1, "past the last bucket: counted in it");
        assert_eq!(h.sum(), 10);
    }

    #[test]
    fn tunables_are_validated_before_they_apply() {
        use crate::client::{Client, ClientConfig, Tunable, RPCS_IN_FLIGHT_MAX_DEFAULT};
        let mut c = Client::new(crate::units::ClientId(1), ClientConfig::default()).unwrap();
        assert!(c.set_tunable(Instant(0), Tunable::RpcsInFlightMax(0)).is_err());
        assert!(c.set_tunable(Instant(0), Tunable::DirtyBytesMax(4096)).is_err(), "below one RPC");
        assert!(c.set_tunable(Instant(0), Tunable::RpcBytesMax(4097)).is_err(), "not whole pages");
        assert_eq!(c.config().rpcs_in_flight_max, RPCS_IN_FLIGHT_MAX_DEFAULT, "a refused value changes nothing");
        c.set_tunable(Instant(0), Tunable::RpcsInFlightMax(2)).unwrap();
        c.set_tunable(Instant(0), Tunable::LruLocksMax(1)).unwrap();
        c.set_tunable(Instant(0), Tunable::CachedBytesMax(0)).unwrap();
        assert_eq!((c.config().rpcs_in_flight_max, c.config().lru_locks_max), (2, 1));
        c.check_invariants();
    }

    #[test]
    fn samples_keep_min_max_sum() {
        let mut s = Samples::default();
        s.check_invariants();
        for v in [4096, 1 << 20, 8192] {
            s.sample(v);
        }
        assert_eq!(s, Samples { count: 3, min: 4096, max: 1 << 20, sum: (1 << 20) + 12288 });
        s.check_invariants();
    }
}
