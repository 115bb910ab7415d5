//! What a simulated run reports beyond IOR's rows: the bandwidth time
//! series. (MPI-IO statistics and timers are lanefs-mpiio's, gathered by
//! the ranks' two-phase code at close.)

use crate::world::Series;
use std::io::Write;

/// Write the time series as CSV: one row per interval, aggregate and per-OST
/// bandwidth in MiB/s (IOR's MiB), written and read.
pub fn write_series(out: &mut dyn Write, s: &Series) -> std::io::Result<()> {
    let osts = s.written.len();
    let bins = s.written.iter().chain(s.read.iter()).map(Vec::len).max().unwrap_or(0);
    let interval_s = s.interval.as_secs_f64();
    let mib_s = |b: u64| b as f64 / (1u64 << 20) as f64 / interval_s;
    let mut header = vec!["time_s".to_string(), "write_mib_s".into(), "read_mib_s".into()];
    header.extend((0..osts).map(|o| format!("ost{o:04}_write_mib_s")));
    header.extend((0..osts).map(|o| format!("ost{o:04}_read_mib_s")));
    writeln!(out, "{}", header.join(","))?;
    let at = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
    for i in 0..bins {
        let w: u64 = s.written.iter().map(|v| at(v, i)).sum();
        let r: u64 = s.read.iter().map(|v| at(v, i)).sum();
        let mut row =
            vec![format!("{:.6}", (i + 1) as f64 * interval_s), format!("{:.3}", mib_s(w)), format!("{:.3}", mib_s(r))];
        row.extend(s.written.iter().map(|v| format!("{:.3}", mib_s(at(v, i)))));
        row.extend(s.read.iter().map(|v| format!("{:.3}", mib_s(at(v, i)))));
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}
