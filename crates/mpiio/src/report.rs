//! Cray MPICH's MPI-IO reports, printed by rank 0 at close: the access
//! pattern block of `MPICH_MPIIO_STATS=1` and the phase block of
//! `MPICH_MPIIO_TIMERS=1`, in the formats of `mpiio.md`.
//!
//! Users compare these blocks across runs and machines, so the stats block
//! is reproduced character for character. The timers block keeps Cray's
//! phase names, columns and bandwidths but prints phase times in seconds
//! instead of scaled clock ticks (`time scale: seconds` in the header), as
//! virtual time has no clock ticks.
//!
//! Decisions where Cray's meaning is unverified:
//! - "aggregators active" buckets: exactly 1, at most half (`ceil(n / 2)`,
//!   which gives the `<= 32` of 64 aggregators and the `<= 1` of one in real
//!   output), more than half but not all, all. A call with one active
//!   aggregator counts as "1" even when it is the only one; a call with none
//!   counts as "at most half".
//! - Every calling rank counts one collective operation, and the call's
//!   aggregators-active bucket grows by the same amount, so the buckets add
//!   up to "collective writes" as in real output.
//! - The percentage column is each phase's average over the sum of all
//!   phases' averages, truncated (this reproduces the `mpiio.md` sample).
//! - "ave system write size" is bytes moved by system writes over their
//!   count ([`MpiioStats::system_bytes`]), not the requested total: the
//!   `mpiio.md` sample's average is below its total over its count.
//! - Bandwidths: data send = bytes / average data-send time, net = bytes /
//!   elapsed, and raw write = bytes / *average* file-write time. The last is
//!   what the real sample's numbers give (82192.9 MiB / 61.69 s = 1332.35,
//!   printed 1332.366; over the largest time, 71.02 s, it would be 1157).

use super::plan::CollectivePlan;
use lanefs_core::units::Duration;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const BOX_LINE: &str = "+--------------------------------------------------------+";

/// Collective calls counted by how many aggregators they kept busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AggregatorsActive {
    pub one: u64,
    pub at_most_half: u64,
    pub more_than_half: u64,
    pub all: u64,
}

impl AggregatorsActive {
    /// The "at most half" bound for `aggregators` (see the module docs).
    pub fn half(aggregators: u32) -> u32 {
        aggregators.div_ceil(2)
    }

    /// Counts `calls` calls in which `active` of `aggregators` had data.
    pub fn record(&mut self, active: u32, aggregators: u32, calls: u64) {
        assert!(active <= aggregators, "{active} of {aggregators} aggregators active");
        let bucket = if active == 1 {
            &mut self.one
        } else if active == aggregators {
            &mut self.all
        } else if active <= Self::half(aggregators) {
            &mut self.at_most_half
        } else {
            &mut self.more_than_half
        };
        *bucket += calls;
    }
}

/// The counters of one file and direction (`MPICH_MPIIO_STATS=1`). Field
/// names are direction-neutral; the report line each one feeds is given
/// for writes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpiioStats {
    /// "independent writes": independent calls.
    pub independent_ops: u64,
    /// "collective writes": collective calls, one per calling rank.
    pub collective_ops: u64,
    /// "independent writers": ranks that made independent calls.
    pub independent_ranks: u64,
    pub aggregators: u32,
    pub stripe_count: u32,
    pub stripe_size: u64,
    /// "system writes": writes issued to the file system.
    pub system_ops: u64,
    /// Bytes moved by system writes: the "ave system write size" is
    /// `system_bytes / system_ops`. It differs from `total_bytes` when
    /// aggregators write whole ranges over holes (read-modify-write) or
    /// requests overlap.
    pub system_bytes: u64,
    /// "stripe sized writes": system writes of exactly one aligned stripe.
    pub stripe_sized_ops: u64,
    /// Writes only.
    pub aggregators_active: AggregatorsActive,
    pub total_bytes: u64,
    /// Writes only: stripe writes with holes, read before being written.
    pub rmw_count: u64,
    pub rmw_bytes: u64,
    pub gaps: u64,
    pub gap_bytes: u64,
}

impl MpiioStats {
    pub fn new(aggregators: u32, stripe_count: u32, stripe_size: u64) -> Self {
        MpiioStats { aggregators, stripe_count, stripe_size, ..MpiioStats::default() }
    }

    /// One independent call by one rank of `len` bytes at `offset`: one
    /// system operation. (`independent_ranks` is the caller's to count.)
    pub fn record_independent(&mut self, offset: u64, len: u64) {
        self.independent_ops += 1;
        self.system_ops += 1;
        self.system_bytes += len;
        self.total_bytes += len;
        if self.is_stripe_sized(offset, offset + len) {
            self.stripe_sized_ops += 1;
        }
    }

    /// One collective write that `ranks_calling` ranks made, executed as
    /// `plan`: one system write per stripe write, a read-modify-write for
    /// each stripe write with holes (its whole range read).
    pub fn record_collective_write(&mut self, plan: &CollectivePlan, ranks_calling: u64) {
        self.record_collective(plan, ranks_calling);
        self.aggregators_active.record(plan.active_aggregators(), plan.aggregators(), ranks_calling);
        for write in plan.writes().iter().filter(|w| w.has_holes()) {
            self.rmw_count += 1;
            self.rmw_bytes += write.end - write.start;
        }
    }

    /// One collective read that `ranks_calling` ranks made, executed as `plan`.
    pub fn record_collective_read(&mut self, plan: &CollectivePlan, ranks_calling: u64) {
        self.record_collective(plan, ranks_calling);
    }

    fn record_collective(&mut self, plan: &CollectivePlan, ranks_calling: u64) {
        self.collective_ops += ranks_calling;
        self.system_ops += plan.writes().len() as u64;
        self.system_bytes += plan.writes().iter().map(|w| w.end - w.start).sum::<u64>();
        self.stripe_sized_ops += plan.writes().iter().filter(|w| self.is_stripe_sized(w.start, w.end)).count() as u64;
        self.total_bytes += plan.total_bytes();
    }

    fn is_stripe_sized(&self, start: u64, end: u64) -> bool {
        self.stripe_size > 0 && end - start == self.stripe_size && start.is_multiple_of(self.stripe_size)
    }
}

/// `a / b`, or `NA` when there is nothing to average.
fn average_or_na(total: u64, count: u64) -> String {
    total.checked_div(count).map_or_else(|| "NA".to_string(), |ave| ave.to_string())
}

fn stat_line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    writeln!(out, "|   {label:<24}= {value}").expect("writing to a String cannot fail");
}

/// The `MPICH_MPIIO_STATS=1` write block for `file`.
pub fn format_write_stats(file: &str, stats: &MpiioStats) -> String {
    format_stats(file, stats, true)
}

/// The `MPICH_MPIIO_STATS=1` read block: the write block's shape without the
/// aggregators-active and read-modify-write lines.
pub fn format_read_stats(file: &str, stats: &MpiioStats) -> String {
    format_stats(file, stats, false)
}

fn format_stats(file: &str, stats: &MpiioStats, write: bool) -> String {
    let (op, ops, agent) = if write { ("write", "writes", "writers") } else { ("read", "reads", "readers") };
    let mut out = format!("{BOX_LINE}\n| MPIIO {op} access patterns for {file}\n");
    stat_line(&mut out, &format!("independent {ops}"), stats.independent_ops);
    stat_line(&mut out, &format!("collective {ops}"), stats.collective_ops);
    stat_line(&mut out, &format!("independent {agent}"), stats.independent_ranks);
    stat_line(&mut out, "aggregators", stats.aggregators);
    stat_line(&mut out, "stripe count", stats.stripe_count);
    stat_line(&mut out, "stripe size", stats.stripe_size);
    stat_line(&mut out, &format!("system {ops}"), stats.system_ops);
    stat_line(&mut out, &format!("stripe sized {ops}"), stats.stripe_sized_ops);
    if write {
        let active = &stats.aggregators_active;
        let (n, half) = (stats.aggregators, AggregatorsActive::half(stats.aggregators));
        let buckets = format!(
            "{},{},{},{} (1, <= {half}, > {half}, {n})",
            active.one, active.at_most_half, active.more_than_half, active.all
        );
        stat_line(&mut out, "aggregators active", buckets);
    }
    let bytes = stats.total_bytes;
    stat_line(
        &mut out,
        &format!("total bytes for {ops}"),
        format!("{bytes} = {} MiB = {} GiB", bytes / MIB, bytes / GIB),
    );
    stat_line(&mut out, &format!("ave system {op} size"), average_or_na(stats.system_bytes, stats.system_ops));
    if write {
        stat_line(&mut out, "read-modify-write count", stats.rmw_count);
        stat_line(&mut out, "read-modify-write bytes", stats.rmw_bytes);
    }
    stat_line(&mut out, &format!("number of {op} gaps"), stats.gaps);
    stat_line(&mut out, &format!("ave {op} gap size"), average_or_na(stats.gap_bytes, stats.gaps));
    out.push_str(BOX_LINE);
    out.push('\n');
    out
}

/// One writer's (aggregator's) time in each phase of its collective writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpiioTimers {
    /// Waiting for the other ranks to enter the collective.
    pub wait_for_coll: Duration,
    /// Collective communication overhead (size exchanges, barriers).
    pub collective: Duration,
    /// The two-phase loop's bookkeeping.
    pub exchange_write: Duration,
    /// Sending data to aggregators.
    pub data_send: Duration,
    /// Requesting lockahead locks; `None` when lockahead was not used.
    pub lock_mode: Option<Duration>,
    /// System writes.
    pub file_write: Duration,
    /// The rest of the writer's time in the measured I/O phase: between its
    /// collective calls, and (IOR's `-e`) the final fsync, which waits for
    /// the page cache's writeback.
    pub other: Duration,
    /// Bytes this writer wrote to the file system.
    pub bytes: u64,
}

impl MpiioTimers {
    /// Bytes written by all of `writers`.
    pub fn total_bytes(writers: &[MpiioTimers]) -> u64 {
        writers.iter().map(|w| w.bytes).sum()
    }
}

/// Min, max and average of one phase over the writers, in seconds.
#[derive(Clone, Copy)]
struct Spread {
    min: f64,
    max: f64,
    ave: f64,
    /// Exact total over the writers, for the percentage column.
    sum_ns: u128,
}

fn spread(writers: &[MpiioTimers], phase: impl Fn(&MpiioTimers) -> Duration) -> Spread {
    let ns: Vec<u64> = writers.iter().map(|w| phase(w).as_ns()).collect();
    let seconds = |ns: u64| ns as f64 / 1e9;
    let (min, max) = (ns.iter().copied().min().unwrap_or(0), ns.iter().copied().max().unwrap_or(0));
    let sum: u128 = ns.iter().map(|&n| u128::from(n)).sum();
    let ave = if ns.is_empty() { 0.0 } else { sum as f64 / ns.len() as f64 / 1e9 };
    Spread { min: seconds(min), max: seconds(max), ave, sum_ns: sum }
}

/// `bytes` in MiB per `seconds`, or `None` for no time.
fn bandwidth(bytes: u64, seconds: f64) -> Option<f64> {
    (seconds > 0.0).then(|| bytes as f64 / MIB as f64 / seconds)
}

/// One phase of the writers' timers, in seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTime {
    /// Cray's name of the phase (`wait for coll`, `data send`, ...).
    pub phase: String,
    pub min_s: f64,
    pub max_s: f64,
    pub ave_s: f64,
    /// The phase's share of the sum of every phase's average, in percent
    /// (truncated, as Cray's column).
    pub percent: u32,
}

/// The `MPICH_MPIIO_TIMERS=1` write block of one file as data: what the
/// block prints, and what IOR's JSON summary carries under
/// `mpiio_timers` for pictures (`lanefs plot`, `lanefs report`).
/// Bandwidths are in MiB/s: data send = bytes / average data-send time;
/// raw write = bytes / average file-write time; net write = bytes /
/// elapsed; `None` where the time is zero.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WriteTimers {
    pub file: String,
    /// Aggregators that wrote (the block's "writers only").
    pub writers: u32,
    pub bytes: u64,
    pub elapsed_s: f64,
    /// In Cray's order, `file write` always among them; `lock mode` only
    /// when a writer used lockahead.
    pub phases: Vec<PhaseTime>,
    pub data_send_bw_mib: Option<f64>,
    pub raw_write_bw_mib: Option<f64>,
    pub net_write_bw_mib: Option<f64>,
}

impl WriteTimers {
    /// The block of `file` from each writer's timers, the bytes written
    /// and the collective writes' elapsed time.
    pub fn new(file: &str, writers: &[MpiioTimers], total_bytes: u64, elapsed: Duration) -> WriteTimers {
        let locked = writers.iter().any(|w| w.lock_mode.is_some());
        let mut phases: Vec<(&str, Spread)> = vec![
            ("wait for coll", spread(writers, |w| w.wait_for_coll)),
            ("collective", spread(writers, |w| w.collective)),
            ("exchange/write", spread(writers, |w| w.exchange_write)),
            ("data send", spread(writers, |w| w.data_send)),
        ];
        if locked {
            phases.push(("lock mode", spread(writers, |w| w.lock_mode.unwrap_or_default())));
        }
        phases.push(("file write", spread(writers, |w| w.file_write)));
        phases.push(("other", spread(writers, |w| w.other)));
        let phase_total_ns: u128 = phases.iter().map(|(_, s)| s.sum_ns).sum();
        // Every phase averages over the same writers, so sums compare as averages do.
        let time = |phase: &str, s: &Spread| PhaseTime {
            phase: phase.to_string(),
            min_s: s.min,
            max_s: s.max,
            ave_s: s.ave,
            percent: (100 * s.sum_ns).checked_div(phase_total_ns).unwrap_or(0) as u32,
        };
        let average = |name: &str| phases.iter().find(|(phase, _)| *phase == name).map_or(0.0, |(_, s)| s.ave);
        WriteTimers {
            file: file.to_string(),
            writers: writers.len() as u32,
            bytes: total_bytes,
            elapsed_s: elapsed.as_secs_f64(),
            phases: phases.iter().map(|(phase, s)| time(phase, s)).collect(),
            data_send_bw_mib: bandwidth(total_bytes, average("data send")),
            raw_write_bw_mib: bandwidth(total_bytes, average("file write")),
            net_write_bw_mib: bandwidth(total_bytes, elapsed.as_secs_f64()),
        }
    }

    /// The block as Cray MPICH prints it (phase times in seconds).
    pub fn format(&self) -> String {
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        line(format!("| MPIIO write by phases, writers only, for {}", self.file));
        line("|                              min          max          ave".to_string());
        let file_write = self.phases.iter().find(|p| p.phase == "file write");
        let (min_s, max_s, ave_s) = file_write.map_or((0.0, 0.0, 0.0), |p| (p.min_s, p.max_s, p.ave_s));
        line(format!("|   file write time   ={min_s:>12.2} {max_s:>12.2} {ave_s:>12.2}   (seconds)"));
        line(format!(
            "|   {:<32}   min          max          ave     High file write percentage",
            "time scale: seconds"
        ));
        for p in &self.phases {
            let (label, min, max, ave, percent) = (&p.phase, p.min_s, p.max_s, p.ave_s, p.percent);
            line(format!("|   {label:<18}={min:>12.6} {max:>12.6} {ave:>12.6} {percent:>3}%"));
        }
        let bandwidths = [
            ("data send BW (MiB/s)", self.data_send_bw_mib),
            ("raw write BW (MiB/s)", self.raw_write_bw_mib),
            ("net write BW (MiB/s)", self.net_write_bw_mib),
        ];
        for (label, value) in bandwidths {
            let value = value.map_or_else(|| "NA".to_string(), |v| format!("{v:.3}"));
            line(format!("|   {label:<22}= {value:>12}"));
        }
        out
    }
}

/// IOR's JSON summary's key for the write timers of a run.
pub const TIMERS_JSON_KEY: &str = "mpiio_timers";

/// The object under [`TIMERS_JSON_KEY`]: `time_scale` (`seconds`) and
/// `writes`, a [`WriteTimers`] per collective write phase, in order.
pub fn timers_json(writes: &[WriteTimers]) -> serde_json::Map<String, serde_json::Value> {
    let mut json = serde_json::Map::new();
    json.insert("time_scale".into(), "seconds".into());
    let writes = writes.iter().map(|w| serde_json::to_value(w).expect("plain data")).collect();
    json.insert("writes".into(), serde_json::Value::Array(writes));
    json
}

/// The write timers in an IOR JSON summary (none without the key).
pub fn timers_from_json(summary: &serde_json::Value) -> Result<Vec<WriteTimers>, String> {
    let Some(timers) = summary.get(TIMERS_JSON_KEY) else { return Ok(Vec::new()) };
    let writes = timers.get("writes").cloned().unwrap_or_default();
    serde_json::from_value(writes).map_err(|e| format!("{TIMERS_JSON_KEY}.writes: {e}"))
}

/// The `MPICH_MPIIO_TIMERS=1` write block for `file` (see [`WriteTimers`]).
pub fn format_write_timers(file: &str, writers: &[MpiioTimers], total_bytes: u64, elapsed: Duration) -> String {
    WriteTimers::new(file, writers, total_bytes, elapsed).format()
}

/// `MPICH_MPIIO_AGGREGATOR_PLACEMENT_DISPLAY=1`: which rank, on which node,
/// is each collective-buffering aggregator of `file`. Cray MPT prints a
/// table of aggregator, rank and node id; its exact layout is unverified,
/// so lanefs prints this one, node names as the launcher gave them.
pub fn format_aggregator_placement(file: &str, aggregators: &[u32], node_of: impl Fn(u32) -> String) -> String {
    let mut out = format!("Aggregator Placement for {file}\n");
    out.push_str("   AGG      Rank  node\n");
    out.push_str("  ----    ------  --------\n");
    for (index, &rank) in aggregators.iter().enumerate() {
        let _ = writeln!(out, "{index:>6}  {rank:>8}  {}", node_of(rank));
    }
    out
}
