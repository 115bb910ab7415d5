//! Lustre's statistics files, column for column.
//!
//! * a stats file (`*.stats`): `lprocfs_stats_header` (width 35, no colon)
//!   then one `lprocfs_stats_seq_show` line per counter with samples:
//!   `"%-35s %lld samples [%s]"`, then `" %lld %lld %lld"` (min, max, sum)
//!   for a counter of values (lustre/obdclass/lprocfs_status.c);
//! * `osc.*.rpc_stats`: `osc_rpc_stats_seq_show` (lustre/osc/lproc_osc.c);
//! * `obdfilter.*.brw_stats`: `brw_stats_seq_show` and `display_brw_stats`
//!   (lustre/obdclass/lprocfs_status_server.c).
//!
//! Only measured numbers are printed: a counter lanefs does not keep is
//! left out, never shown as zero (see each caller for what is omitted).

use lanefs_core::client::osc_stats::{Histogram, Samples, HISTOGRAM_BUCKETS};
use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A wall-clock time as Lustre's `secs.nsecs`.
fn secs_nsecs(d: Duration) -> String {
    format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// `lprocfs_stats_header`: `snapshot_time`, and with a known start
/// `start_time` and `elapsed_time` (Lustre prints those two only with
/// `obd_enable_stats_header`; lanefs prints them whenever it knows when
/// counting started). `colon`: the field names end in `:` (rpc_stats,
/// brw_stats).
pub fn stats_header(out: &mut String, now: SystemTime, start: Option<SystemTime>, width: usize, colon: bool) {
    let c = if colon { ":" } else { "" };
    let now_d = since_epoch(now);
    let _ = writeln!(out, "{:<width$} {} secs.nsecs", format!("snapshot_time{c}"), secs_nsecs(now_d));
    if let Some(start) = start {
        let start_d = since_epoch(start);
        let _ = writeln!(out, "{:<width$} {} secs.nsecs", format!("start_time{c}"), secs_nsecs(start_d));
        let elapsed = now_d.saturating_sub(start_d);
        let _ = writeln!(out, "{:<width$} {} secs.nsecs", format!("elapsed_time{c}"), secs_nsecs(elapsed));
    }
}

/// One line of a stats file.
#[derive(Clone, Copy, Debug)]
pub enum Counter<'a> {
    /// Events counted, in `units` (`reqs`, `locks`).
    Events { name: &'a str, units: &'a str, count: u64 },
    /// Values sampled (`bytes`): count, min, max and sum.
    Values { name: &'a str, units: &'a str, samples: Samples },
}

/// A stats file: the header, then every counter with samples (Lustre
/// leaves out counters at zero).
pub fn stats_file(now: SystemTime, start: Option<SystemTime>, counters: &[Counter]) -> String {
    let mut out = String::new();
    stats_header(&mut out, now, start, 35, false);
    for counter in counters {
        match *counter {
            Counter::Events { count: 0, .. } => {}
            Counter::Events { name, units, count } => {
                let _ = writeln!(out, "{name:<35} {count} samples [{units}]");
            }
            Counter::Values { samples, .. } if samples.count == 0 => {}
            Counter::Values { name, units, samples: s } => {
                let _ = writeln!(out, "{name:<35} {} samples [{units}] {} {} {}", s.count, s.min, s.max, s.sum);
            }
        }
    }
    out.pop(); // lctl drops the last newline
    out
}

/// Lustre's `pct`: a percentage, 0 of nothing.
fn pct(a: u64, b: u64) -> u64 {
    a.saturating_mul(100).checked_div(b).unwrap_or(0)
}

/// One read/write histogram of `rpc_stats`, from bucket `first`, labelled
/// by `label(bucket)`; it stops once both sides are all counted.
fn rpc_histogram(
    out: &mut String,
    title: &str,
    read: &Histogram,
    write: &Histogram,
    first: usize,
    label: fn(usize) -> u64,
) {
    let _ = write!(out, "\n\t\t\tread\t\t\twrite\n{title:<22}rpcs   % cum % |       rpcs   % cum %\n");
    let (read_tot, write_tot) = (read.sum(), write.sum());
    let (mut read_cum, mut write_cum) = (0, 0);
    for i in first..HISTOGRAM_BUCKETS {
        let (r, w) = (read.buckets()[i], write.buckets()[i]);
        read_cum += r;
        write_cum += w;
        let _ = writeln!(
            out,
            "{}:\t\t{r:>10} {:>3} {:>3}   | {w:>10} {:>3} {:>3}",
            label(i),
            pct(r, read_tot),
            pct(read_cum, read_tot),
            pct(w, write_tot),
            pct(write_cum, write_tot)
        );
        if read_cum == read_tot && write_cum == write_tot {
            break;
        }
    }
}

/// What `osc.*.rpc_stats` shows of one OSC.
#[derive(Clone, Copy, Debug)]
pub struct RpcStats<'a> {
    pub read_in_flight_now: u64,
    pub write_in_flight_now: u64,
    pub pending_write_pages: u64,
    pub stats: &'a lanefs_core::client::osc_stats::OscStats,
}

/// `osc_rpc_stats_seq_show`: the header, the RPCs in flight now, then the
/// pages-per-RPC, RPCs-in-flight and offset histograms. Left out: "DIO
/// RPCs in flight" and "pending read pages" (lanefs has no direct I/O and
/// no read queue) and the "RPC latency" histogram (not measured).
pub fn rpc_stats(now: SystemTime, start: SystemTime, r: &RpcStats) -> String {
    let mut out = String::new();
    stats_header(&mut out, now, Some(start), 25, true);
    let _ = writeln!(out, "read RPCs in flight:  {}", r.read_in_flight_now);
    let _ = writeln!(out, "write RPCs in flight: {}", r.write_in_flight_now);
    let _ = writeln!(out, "pending write pages:  {}", r.pending_write_pages);
    let s = r.stats;
    rpc_histogram(&mut out, "pages per rpc", &s.read_pages, &s.write_pages, 0, |i| 1 << i);
    rpc_histogram(&mut out, "rpcs in flight", &s.read_in_flight, &s.write_in_flight, 1, |i| i as u64);
    rpc_histogram(&mut out, "offset", &s.read_offset, &s.write_offset, 0, |i| if i == 0 { 0 } else { 1 << (i - 1) });
    out.pop();
    out
}

/// `brw_stats_seq_show` with the one histogram lanefs measures, "pages per
/// bulk r/w"; the disk-side ones (discontiguous pages and blocks,
/// fragmented I/Os, disk I/Os in flight, I/O time, disk I/O size, block
/// maps) are left out: lanefs's OSTs write through the page cache of a
/// local file system and see none of it.
pub fn brw_stats(now: SystemTime, start: Option<SystemTime>, read: &Histogram, write: &Histogram) -> String {
    let mut out = String::new();
    stats_header(&mut out, now, start, 25, true);
    let _ = write!(out, "\n{:>26} read      |     write\n", " ");
    let _ = writeln!(out, "{:<22} {:<5} % cum % |  {:<11} % cum %", "pages per bulk r/w", "rpcs", "rpcs");
    let (read_tot, write_tot) = (read.sum(), write.sum());
    let (mut read_cum, mut write_cum) = (0, 0);
    for i in 0..HISTOGRAM_BUCKETS {
        if read_tot == 0 && write_tot == 0 {
            break;
        }
        let (r, w) = (read.buckets()[i], write.buckets()[i]);
        read_cum += r;
        write_cum += w;
        if read_cum == 0 && write_cum == 0 {
            continue;
        }
        let label = match i {
            0..=9 => format!("{}", 1u64 << i),
            10..=19 => format!("{}K", 1u64 << (i - 10)),
            _ => format!("{}M", 1u64 << (i - 20)),
        };
        let _ = writeln!(
            out,
            "{label}:\t\t{r:>10} {:>3} {:>3}   | {w:>4} {:>3} {:>3}",
            pct(r, read_tot),
            pct(read_cum, read_tot),
            pct(w, write_tot),
            pct(write_cum, write_tot)
        );
        if read_cum == read_tot && write_cum == write_tot {
            break;
        }
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_core::client::osc_stats::OscStats;

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    /// The shape of `lprocfs_stats_seq_show` (lustre/obdclass/
    /// lprocfs_status.c): "%-35s %lld samples [%s]" and " %lld %lld %lld",
    /// after `lprocfs_stats_header`'s "%-*s %llu.%09lu secs.nsecs" lines.
    #[test]
    fn stats_files_are_lprocfs_stats() {
        let mut bytes = Samples::default();
        bytes.sample(4096);
        bytes.sample(1 << 20);
        let counters = [
            Counter::Values { name: "write_bytes", units: "bytes", samples: bytes },
            Counter::Events { name: "ost_punch", units: "reqs", count: 0 },
            Counter::Events { name: "ldlm_cancel", units: "reqs", count: 3 },
        ];
        assert_eq!(
            stats_file(at(1_700_000_000, 123_456_789), Some(at(1_699_999_000, 0)), &counters),
            "snapshot_time                       1700000000.123456789 secs.nsecs\n\
             start_time                          1699999000.000000000 secs.nsecs\n\
             elapsed_time                        1000.123456789 secs.nsecs\n\
             write_bytes                         2 samples [bytes] 4096 1048576 1052672\n\
             ldlm_cancel                         3 samples [reqs]"
        );
    }

    /// `osc_rpc_stats_seq_show` (lustre/osc/lproc_osc.c): the header with
    /// colons at width 25, the in-flight lines, then per histogram
    /// "\n\t\t\tread\t\t\twrite\n", the title line and
    /// "%d:\t\t%10lu %3u %3u   | %10lu %3u %3u\n" rows until both sides
    /// are counted.
    #[test]
    fn rpc_stats_are_osc_rpc_stats() {
        let mut s = OscStats::default();
        for (pages, flight) in [(256, 1), (256, 2), (64, 1)] {
            s.write_pages.tally_log2(pages);
            s.write_in_flight.tally(flight);
            s.write_offset.tally_log2(1);
        }
        let r = RpcStats { read_in_flight_now: 0, write_in_flight_now: 1, pending_write_pages: 0, stats: &s };
        let text = rpc_stats(at(10, 5), at(4, 0), &r);
        let expected = "snapshot_time:            10.000000005 secs.nsecs\n\
             start_time:               4.000000000 secs.nsecs\n\
             elapsed_time:             6.000000005 secs.nsecs\n\
             read RPCs in flight:  0\n\
             write RPCs in flight: 1\n\
             pending write pages:  0\n\
             \n\t\t\tread\t\t\twrite\n\
             pages per rpc         rpcs   % cum % |       rpcs   % cum %\n\
             1:\t\t         0   0   0   |          0   0   0\n";
        assert!(text.starts_with(expected), "{text}");
        assert!(text.contains("64:\t\t         0   0   0   |          1  33  33\n"), "{text}");
        assert!(text.contains("256:\t\t         0   0   0   |          2  66 100\n\n"), "{text}");
        assert!(text.contains(
            "rpcs in flight        rpcs   % cum % |       rpcs   % cum %\n\
             1:\t\t         0   0   0   |          2  66  66\n\
             2:\t\t         0   0   0   |          1  33 100\n"
        ));
        assert!(
            text.ends_with(
                "offset                rpcs   % cum % |       rpcs   % cum %\n\
             0:\t\t         0   0   0   |          3 100 100"
            ),
            "{text}"
        );
    }

    /// `display_brw_stats` (lustre/obdclass/lprocfs_status_server.c):
    /// "\n%26s read      |     write\n", "%-22s %-5s %% cum %% |  %-11s %% cum %%\n",
    /// rows with scaled labels (1..512, 1K.., 1M..) from the first counted.
    #[test]
    fn brw_stats_are_lustres() {
        let (mut read, mut write) = (Histogram::default(), Histogram::default());
        write.tally_log2(256);
        write.tally_log2(1024);
        read.tally_log2(256);
        let text = brw_stats(at(10, 0), None, &read, &write);
        assert_eq!(
            text,
            "snapshot_time:            10.000000000 secs.nsecs\n\
             \n                           read      |     write\n\
             pages per bulk r/w     rpcs  % cum % |  rpcs        % cum %\n\
             256:\t\t         1 100 100   |    1  50  50\n\
             512:\t\t         0   0 100   |    0   0  50\n\
             1K:\t\t         0   0 100   |    1  50 100"
        );
    }
}
