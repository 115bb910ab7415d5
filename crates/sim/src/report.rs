//! What a simulated run reports beyond IOR's rows: MPI-IO statistics and
//! timers (kept per rank while the job runs, printed in Cray MPICH's format by
//! `lanefs_mpiio::report`), and the bandwidth time series.

use crate::world::Series;
use lanefs_core::units::Instant;
use std::io::Write;

/// MPI-IO phase timers of one rank (seconds), as `MPICH_MPIIO_TIMERS` splits them.
#[derive(Clone, Copy, Debug, Default)]
pub struct RankTimers {
    /// When the rank entered the current collective call.
    pub arrived: Instant,
    /// Waiting in a collective call for the other ranks to arrive.
    pub wait_for_coll_s: f64,
    /// Collective communication of offsets (the allgather).
    pub collective_s: f64,
    /// An aggregator waiting for its round's pieces to arrive.
    pub exchange_s: f64,
    /// Sending pieces to aggregators (or, reading, receiving them).
    pub data_send_s: f64,
    /// Asking for lockahead locks.
    pub lock_mode_s: f64,
    /// This rank asked for lockahead locks.
    pub lock_mode_used: bool,
    /// In the file system: writes or reads through the client, copies included.
    pub file_write_s: f64,
    /// Bytes this rank wrote to (or read from) the file system as an aggregator.
    pub bytes: u64,
}

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
