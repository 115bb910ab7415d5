//! IOR's default text format: the results table and the summary table.
//!
//! What: the fixed-width pieces of ior-output.c — `PPDouble` (`%-10.Nf` with N = 6
//! below 1, 2 below 3600, else 0; a negative value prints as `   -      `), the
//! per-iteration row, the `remove` row, the `Summary of all tests` row, IOR's
//! `HumanReadable` sizes and the `FS` line. Header texts are copied from real IOR 4.1
//! output (`ior-samples/`) so that scripts which cut columns by position keep working.
//!
//! Not here: the `%-20s: %s` key/value lines, which `output::Printer` prints for both
//! text and JSON, as IOR's `PrintKeyVal` does.

use crate::backend::FsInfo;
use crate::params::IorParams;
use crate::timing::{OpSummary, PhaseResult, MB, MIB};

/// The per-iteration table header (IOR 4.1).
pub const TABLE_HEADER: &str = "access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter\n\
------    ---------  ----       ----------  ---------- ---------  --------   --------   --------   --------   ----\n";

/// The `Summary of all tests` header (IOR 4.1).
pub const SUMMARY_HEADER: &str = "Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)     StdDev    Mean(s) Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord reordoff reordrand seed segcnt   blksiz    xsize aggs(MiB)   API RefNum\n";

const KIB: f64 = 1024.0;

/// IOR's `PPDouble(1, number, append)`.
pub fn pp_double(number: f64, append: &str) -> String {
    if number < 0.0 {
        return format!("   -      {append}");
    }
    let precision = if number < 1.0 {
        6
    } else if number < 3600.0 {
        2
    } else {
        0
    };
    format!("{number:<10.precision$}{append}")
}

/// One row of the results table.
pub fn result_row(access: &str, r: &PhaseResult, p: &IorParams, rep: u32) -> String {
    let mut row = format!("{access:<10}");
    row += &pp_double(r.bw_mib_per_s(), " ");
    row += &pp_double(r.iops, " ");
    row += &pp_double(r.latency_s, "  ");
    row += &pp_double(p.block_size_bytes as f64 / KIB, " ");
    row += &pp_double(p.transfer_size_bytes as f64 / KIB, " ");
    row += &pp_double(r.open_s, " ");
    row += &pp_double(r.xfer_s, " ");
    row += &pp_double(r.close_s, " ");
    row += &pp_double(r.total_s, " ");
    row + &format!("{rep:<4}\n")
}

/// The `remove` row (printed with `-v`).
pub fn remove_row(total_s: f64, rep: u32) -> String {
    let dash = format!("-{:10}", "");
    format!("remove    {dash}{dash}-{:11}{}{}{:<4}\n", "", dash.repeat(5), pp_double(total_s, " "), rep)
}

/// `Max Write:`/`Max Read:` line (printed with `-v`), from bytes per second.
pub fn max_line(access: &str, bw_bytes_per_s: f64) -> String {
    let label = format!("Max {access}:");
    format!("{label:<11}{:.2} MiB/sec ({:.2} MB/sec)\n", bw_bytes_per_s / MIB, bw_bytes_per_s / MB)
}

/// One row of `Summary of all tests`.
pub fn summary_row(operation: &str, s: &OpSummary, p: &IorParams, api: &str) -> String {
    let mut row = format!("{operation:<9} ");
    for value in [s.bw_mib.max, s.bw_mib.min, s.bw_mib.mean, s.bw_mib.sd, s.ops.max, s.ops.min, s.ops.mean, s.ops.sd] {
        row += &format!("{value:10.2} ");
    }
    row += &format!("{:10.5} ", s.mean_time_s);
    match s.stonewall {
        Some((time_s, bw_mib)) => row += &format!("{time_s:10.2} {bw_mib:13.2} "),
        None => row += &format!("{:>10} {:>13} ", "NA", "NA"),
    }
    // IOR casts the aggregate size to float before dividing.
    let agg_mib = f64::from(s.agg_bytes_rep0 as f32) / MIB;
    row += &format!(
        "{:5} {:6} {:3} {:4} {:3} {:5} {:8} {:9} {:4} {:6} {:8} {:8} {:9.1} {:>3} {:6}\n",
        p.test_id,
        p.num_tasks,
        p.tasks_on_node0(),
        p.repetitions,
        u8::from(p.file_per_proc),
        u8::from(p.reorder_tasks),
        p.task_per_node_offset,
        p.reorder_tasks_random,
        p.reorder_tasks_random_seed,
        p.segment_count,
        p.block_size_bytes,
        p.transfer_size_bytes,
        agg_mib,
        api,
        p.reference_number,
    );
    row
}

/// IOR's `HumanReadable(value, BASE_TWO)`: `1 MiB`, `1.50 GiB`, `262144 bytes`.
pub fn human_readable(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")];
    for (unit, name) in UNITS {
        if bytes >= unit {
            return if bytes.is_multiple_of(unit) {
                format!("{} {name}", bytes / unit)
            } else {
                format!("{:.2} {name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// The figures of IOR's `FS` line: size, unit, used %, inodes in Mi, inodes used %.
pub struct FsFigures {
    /// Size in `unit`.
    pub size: f64,
    /// `GiB` or `TiB`.
    pub unit: &'static str,
    /// Used capacity in percent.
    pub used_pct: f64,
    /// Total inodes in units of 2^20.
    pub inodes_mi: f64,
    /// Used inodes in percent.
    pub inodes_used_pct: f64,
}

impl FsFigures {
    /// IOR's `ShowFileSystemSize` arithmetic.
    pub fn new(fs: &FsInfo) -> Self {
        let total = fs.total_bytes as f64;
        let gib = total / f64::from(1u32 << 30);
        let (size, unit) = if gib > 1024.0 { (total / (1u64 << 40) as f64, "TiB") } else { (gib, "GiB") };
        FsFigures {
            size,
            unit,
            used_pct: (1.0 - fs.free_bytes as f64 / total) * 100.0,
            inodes_mi: fs.total_inodes as f64 / MIB,
            inodes_used_pct: (1.0 - fs.free_inodes as f64 / fs.total_inodes as f64) * 100.0,
        }
    }

    /// `FS                  : 252.0 GiB   Used FS: 6.2%   Inodes: 16.0 Mi   Used Inodes: 2.9%`.
    pub fn text_line(&self) -> String {
        format!(
            "{:<20}: {:.1} {}   Used FS: {:2.1}%   Inodes: {:.1} Mi   Used Inodes: {:2.1}%\n",
            "FS", self.size, self.unit, self.used_pct, self.inodes_mi, self.inodes_used_pct
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pp_double_precision_follows_magnitude() {
        assert_eq!(pp_double(0.004476, " "), "0.004476   ");
        assert_eq!(pp_double(1261.26, " "), "1261.26    ");
        assert_eq!(pp_double(131072.0, " "), "131072     ");
        assert_eq!(pp_double(0.0037, "  "), "0.003700    ");
        assert_eq!(pp_double(-1.0, " "), "   -       ");
        assert_eq!(pp_double(3599.999, ""), "3600.00   ");
    }

    #[test]
    fn sample_row_is_reproduced() {
        let p = IorParams { block_size_bytes: 128 << 20, transfer_size_bytes: 1 << 20, ..IorParams::default() };
        let r = PhaseResult {
            agg_bytes: 1 << 30,
            bw_bytes_per_s: 1261.26 * MIB,
            iops: 1261.41,
            latency_s: 0.004476,
            open_s: 0.007227,
            xfer_s: 0.811789,
            close_s: 0.496278,
            total_s: 0.811888,
            stonewall: None,
        };
        assert_eq!(
            result_row("write", &r, &p, 0),
            "write     1261.26    1261.41    0.004476    131072     1024.00    0.007227   0.811789   0.496278   0.811888   0   \n"
        );
    }

    #[test]
    fn remove_row_matches_ior() {
        assert_eq!(
            remove_row(0.001194, 0),
            "remove    -          -          -           -          -          -          -          -          0.001194   0   \n"
        );
    }

    #[test]
    fn max_lines_match_ior() {
        assert_eq!(max_line("Write", 284.17 * MIB), "Max Write: 284.17 MiB/sec (297.97 MB/sec)\n");
        assert_eq!(max_line("Read", 11530.096 * MIB), "Max Read:  11530.10 MiB/sec (12090.18 MB/sec)\n");
    }

    #[test]
    fn human_readable_sizes() {
        assert_eq!(human_readable(1 << 20), "1 MiB");
        assert_eq!(human_readable(128 << 20), "128 MiB");
        assert_eq!(human_readable(1 << 30), "1 GiB");
        assert_eq!(human_readable(3 << 29), "1.50 GiB");
        assert_eq!(human_readable(262144), "262144 bytes");
        assert_eq!(human_readable(2 << 40), "2 TiB");
    }

    #[test]
    fn fs_line_matches_ior() {
        let fs = FsInfo {
            total_bytes: 252 << 30,
            free_bytes: ((252u64 << 30) as f64 * 0.938) as u64,
            total_inodes: 16 << 20,
            free_inodes: ((16u64 << 20) as f64 * 0.971) as u64,
        };
        assert_eq!(
            FsFigures::new(&fs).text_line(),
            "FS                  : 252.0 GiB   Used FS: 6.2%   Inodes: 16.0 Mi   Used Inodes: 2.9%\n"
        );
        let big = FsInfo { total_bytes: 2048 << 30, ..fs };
        assert!(FsFigures::new(&big).text_line().starts_with("FS                  : 2.0 TiB"));
    }
}
