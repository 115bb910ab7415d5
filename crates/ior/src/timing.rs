//! IOR's timing reduction and summary statistics, as pure functions of fixed numbers.
//!
//! What: each rank records six timestamps per phase (open start/stop, transfer
//! start/stop, close start/stop) on one clock shared by all ranks. [`reduce_phase`] does
//! what IOR's `ReduceIterResults` does with MPI: MIN of the starts, MAX of the stops;
//! `total = maxCloseStop - minOpenStart`, `access = maxXferStop - minXferStart`,
//! `bw = aggBytes/total`, `IOPS = (aggBytes/transferSize)/access`, and the latency of
//! rank 0 alone (IOR reduces a minimum but prints rank 0's own value, a quirk kept here).
//! [`summarize`] gives the `Summary of all tests` figures: max/min/mean and the
//! population standard deviation over repetitions of `bw` and of
//! `OPs = aggBytes/transferSize/total` (total time, not access time), the mean total
//! time, and repetition 0's aggregate size.
//!
//! Not here: clocks and I/O (see `run`), formatting (see `output`).

/// MiB, IOR's `MEBIBYTE`.
pub const MIB: f64 = 1_048_576.0;
/// MB, IOR's `MEGABYTE`.
pub const MB: f64 = 1_000_000.0;

/// One rank's timestamps for one phase, in seconds on the run's shared clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RankTimes {
    /// Before `create`/`open`.
    pub open_start_s: f64,
    /// After `create`/`open`.
    pub open_stop_s: f64,
    /// Before the first transfer.
    pub xfer_start_s: f64,
    /// After the last transfer (and the `-e` fsync).
    pub xfer_stop_s: f64,
    /// Before `close`.
    pub close_start_s: f64,
    /// After `close`.
    pub close_stop_s: f64,
}

/// What one rank did in one phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RankPhase {
    /// Its timestamps.
    pub times: RankTimes,
    /// Bytes it moved.
    pub bytes: u64,
    /// Transfers it issued (IOR's `pairs_accessed`).
    pub transfers: u64,
}

/// What a stonewalled phase with wear-out (`-D` with `-O stoneWallingWearOut=1`)
/// measured when the deadline stopped its ranks, before they went on to
/// even out their transfer counts: IOR's `stonewall_*` fields of a point.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stonewalled {
    /// Fewest transfers a rank had made.
    pub pairs_min: u64,
    /// Most transfers a rank had made: every rank makes this many in the end.
    pub pairs_max: u64,
    /// Fewest bytes a rank had moved.
    pub bytes_min: u64,
    /// Bytes all ranks had moved.
    pub bytes_total: u64,
    /// Seconds from the first transfer to the stonewall, on rank 0.
    pub time_s: f64,
    /// Ranks.
    pub ranks: u32,
}

impl Stonewalled {
    /// Bytes the average rank had moved (IOR divides as integers).
    pub fn bytes_mean(&self) -> u64 {
        self.bytes_total / u64::from(self.ranks.max(1))
    }

    /// IOR's line, printed when the ranks stop.
    pub fn line(&self) -> String {
        const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
        format!(
            "stonewalling pairs accessed min: {} max: {} -- min data: {:.1} GiB mean data: {:.1} GiB time: {:.1}s\n",
            self.pairs_min,
            self.pairs_max,
            self.bytes_min as f64 / GIB,
            self.bytes_mean() as f64 / GIB,
            self.time_s
        )
    }
}

/// One phase (write or read) of one repetition, reduced over ranks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseResult {
    /// Bytes moved by all ranks (IOR's `aggFileSizeForBW`).
    pub agg_bytes: u64,
    /// `agg_bytes / total_s`.
    pub bw_bytes_per_s: f64,
    /// Transfers per second over the access time.
    pub iops: f64,
    /// Rank 0's transfer time divided by its transfer count.
    pub latency_s: f64,
    /// `maxOpenStop - minOpenStart`.
    pub open_s: f64,
    /// `maxXferStop - minXferStart`, IOR's access time.
    pub xfer_s: f64,
    /// `maxCloseStop - minCloseStart`.
    pub close_s: f64,
    /// `maxCloseStop - minOpenStart`.
    pub total_s: f64,
    /// Where the stonewall stopped the ranks, with wear-out.
    pub stonewall: Option<Stonewalled>,
}

impl PhaseResult {
    /// Bandwidth in MiB/s.
    pub fn bw_mib_per_s(&self) -> f64 {
        self.bw_bytes_per_s / MIB
    }
}

/// IOR's `ReduceIterResults` over the ranks of one phase (`ranks[0]` is rank 0).
pub fn reduce_phase(ranks: &[RankPhase], transfer_size_bytes: u64) -> PhaseResult {
    assert!(!ranks.is_empty(), "a phase has at least one rank");
    let min = |f: fn(&RankTimes) -> f64| ranks.iter().map(|r| f(&r.times)).fold(f64::INFINITY, f64::min);
    let max = |f: fn(&RankTimes) -> f64| ranks.iter().map(|r| f(&r.times)).fold(f64::NEG_INFINITY, f64::max);
    let open_start = min(|t| t.open_start_s);
    let xfer_start = min(|t| t.xfer_start_s);
    let close_start = min(|t| t.close_start_s);
    let open_stop = max(|t| t.open_stop_s);
    let xfer_stop = max(|t| t.xfer_stop_s);
    let close_stop = max(|t| t.close_stop_s);
    let agg_bytes: u64 = ranks.iter().map(|r| r.bytes).sum();
    let total_s = close_stop - open_start;
    let xfer_s = xfer_stop - xfer_start;
    let rank0 = &ranks[0];
    PhaseResult {
        agg_bytes,
        bw_bytes_per_s: agg_bytes as f64 / total_s,
        iops: (agg_bytes / transfer_size_bytes) as f64 / xfer_s,
        latency_s: (rank0.times.xfer_stop_s - rank0.times.xfer_start_s) / rank0.transfers as f64,
        open_s: open_stop - open_start,
        xfer_s,
        close_s: close_stop - close_start,
        total_s,
        stonewall: None,
    }
}

/// Max, min, mean and population standard deviation of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Largest value.
    pub max: f64,
    /// Smallest value.
    pub min: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Population standard deviation (divided by the count, as IOR).
    pub sd: f64,
}

/// Statistics of `values` (at least one).
pub fn stats(values: &[f64]) -> Stats {
    assert!(!values.is_empty(), "statistics of an empty series");
    let count = values.len() as f64;
    let mean = values.iter().sum::<f64>() / count;
    let var = values.iter().map(|v| (mean - v).powi(2)).sum::<f64>() / count;
    Stats {
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        mean,
        sd: var.sqrt(),
    }
}

/// One line of `Summary of all tests` (one operation over all repetitions).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpSummary {
    /// Bandwidth in MiB/s.
    pub bw_mib: Stats,
    /// Operations (transfers) per second over the total time.
    pub ops: Stats,
    /// Mean total time in seconds.
    pub mean_time_s: f64,
    /// Repetition 0's aggregate bytes.
    pub agg_bytes_rep0: u64,
    /// With wear-out: the mean seconds to the stonewall and the average
    /// rank's bandwidth up to it in MiB/s (IOR's `Stonewall(s)` and
    /// `Stonewall(MiB)` columns, `NA` without).
    pub stonewall: Option<(f64, f64)>,
}

/// Summarize one operation's repetitions (at least one).
pub fn summarize(phases: &[PhaseResult], transfer_size_bytes: u64) -> OpSummary {
    assert!(!phases.is_empty(), "a summary needs at least one repetition");
    let bw: Vec<f64> = phases.iter().map(|p| p.agg_bytes as f64 / p.total_s / MIB).collect();
    let ops: Vec<f64> = phases.iter().map(|p| p.agg_bytes as f64 / transfer_size_bytes as f64 / p.total_s).collect();
    let times: Vec<f64> = phases.iter().map(|p| p.total_s).collect();
    // IOR sums the stonewall times and mean bytes over the repetitions and
    // divides the one by the other.
    let stonewall = phases.iter().any(|p| p.stonewall.is_some()).then(|| {
        let walls = phases.iter().filter_map(|p| p.stonewall);
        let (time_s, bytes) = walls.fold((0.0, 0u64), |(t, b), s| (t + s.time_s, b + s.bytes_mean()));
        (time_s / phases.len() as f64, bytes as f64 / time_s / MIB)
    });
    OpSummary {
        bw_mib: stats(&bw),
        ops: stats(&ops),
        mean_time_s: stats(&times).mean,
        agg_bytes_rep0: phases[0].agg_bytes,
        stonewall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(t: [f64; 6], bytes: u64, transfers: u64) -> RankPhase {
        RankPhase {
            times: RankTimes {
                open_start_s: t[0],
                open_stop_s: t[1],
                xfer_start_s: t[2],
                xfer_stop_s: t[3],
                close_start_s: t[4],
                close_stop_s: t[5],
            },
            bytes,
            transfers,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn reduction_takes_min_starts_and_max_stops() {
        let mib = 1 << 20;
        let ranks = [
            rank([10.0, 10.5, 10.6, 12.6, 12.7, 13.0], 4 * mib, 4),
            rank([10.2, 10.4, 10.5, 13.5, 13.5, 14.0], 4 * mib, 4),
        ];
        let r = reduce_phase(&ranks, mib);
        assert_eq!(r.agg_bytes, 8 * mib);
        assert!(close(r.open_s, 0.5)); // 10.5 - 10.0
        assert!(close(r.xfer_s, 3.0)); // 13.5 - 10.5
        assert!(close(r.close_s, 1.3)); // 14.0 - 12.7
        assert!(close(r.total_s, 4.0)); // 14.0 - 10.0
        assert!(close(r.bw_mib_per_s(), 2.0)); // 8 MiB / 4 s
        assert!(close(r.iops, 8.0 / 3.0));
        assert!(close(r.latency_s, 0.5)); // rank 0: 2.0 s / 4 transfers
    }

    #[test]
    fn summary_uses_population_statistics() {
        let mib = 1 << 20;
        let phase = |total_s: f64| PhaseResult {
            agg_bytes: 300 * mib,
            bw_bytes_per_s: 0.0,
            iops: 0.0,
            latency_s: 0.0,
            open_s: 0.0,
            xfer_s: 0.0,
            close_s: 0.0,
            total_s,
            stonewall: None,
        };
        // 300 MiB in 3 s, 1.5 s, 1 s: 100, 200, 300 MiB/s.
        let s = summarize(&[phase(3.0), phase(1.5), phase(1.0)], 2 * mib);
        assert!(close(s.bw_mib.max, 300.0) && close(s.bw_mib.min, 100.0) && close(s.bw_mib.mean, 200.0));
        assert!(close(s.bw_mib.sd, (20000.0f64 / 3.0).sqrt())); // 81.6497
        assert!(close(s.ops.max, 150.0) && close(s.ops.min, 50.0) && close(s.ops.mean, 100.0));
        assert!(close(s.ops.sd, (5000.0f64 / 3.0).sqrt()));
        assert!(close(s.mean_time_s, 5.5 / 3.0));
        assert_eq!(s.agg_bytes_rep0, 300 * mib);
    }

    #[test]
    fn the_samples_summary_is_reproduced() {
        // ior-4.1-posix-ssf.json: three 1 GiB writes.
        let gib = 1u64 << 30;
        let totals = [1.635_787_973_763_494_4, 0.506_049_165_443_879_2, 0.525_210_865_238_226_5];
        let phases: Vec<PhaseResult> = totals
            .iter()
            .map(|&total_s| PhaseResult {
                agg_bytes: gib,
                bw_bytes_per_s: gib as f64 / total_s,
                iops: 0.0,
                latency_s: 0.0,
                open_s: 0.0,
                xfer_s: 0.0,
                close_s: 0.0,
                total_s,
                stonewall: None,
            })
            .collect();
        let s = summarize(&phases, 1 << 20);
        assert_eq!(format!("{:.4}", s.bw_mib.mean), "1533.0700");
        assert_eq!(format!("{:.4}", s.bw_mib.sd), "642.1045");
        assert_eq!(format!("{:.4}", s.mean_time_s), "0.8890");
    }

    #[test]
    fn single_repetition_has_zero_spread() {
        let s = stats(&[42.0]);
        assert_eq!((s.max, s.min, s.mean, s.sd), (42.0, 42.0, 42.0, 0.0));
    }
}
