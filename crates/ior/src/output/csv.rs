//! IOR's CSV format (`-O summaryFormat=CSV`): the per-iteration table only.
//!
//! What: one header line, then one line per phase and repetition, numbers as `%.4f`,
//! as IOR 4.1 prints them. lanefs-ior prints nothing else in this format (no header
//! block, no summary), so the file loads straight into a spreadsheet or pandas.

use crate::params::IorParams;
use crate::timing::PhaseResult;

/// The CSV header (IOR 4.1).
pub const HEADER: &str =
    "access,bw(MiB/s),IOPS,Latency,block(KiB),xfer(KiB),open(s),wr/rd(s),close(s),total(s),numTasks,iter\n";

/// One CSV row.
pub fn row(access: &str, r: &PhaseResult, p: &IorParams, rep: u32) -> String {
    format!(
        "{access},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4},{},{rep}\n",
        r.bw_mib_per_s(),
        r.iops,
        r.latency_s,
        p.block_size_bytes as f64 / 1024.0,
        p.transfer_size_bytes as f64 / 1024.0,
        r.open_s,
        r.xfer_s,
        r.close_s,
        r.total_s,
        p.num_tasks,
    )
}
