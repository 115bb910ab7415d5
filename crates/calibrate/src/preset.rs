//! The measurements as a cluster preset: the TOML `lanefs sim ior
//! --cluster FILE` reads, one node that is both client and servers, each
//! value with the comment that says where it came from.

use crate::{Measurements, Options};
use std::fmt::Write;

const GIB_PER_GB: f64 = 0.931_323;

/// The preset's text.
pub fn render(m: &Measurements, options: &Options) -> String {
    [header(m, options), compute(m, options), client(), storage(m, options)].concat()
}

/// When and where it was measured, and what the file is.
fn header(m: &Measurements, options: &Options) -> String {
    let when = chrono::DateTime::from_timestamp(m.taken_unix_s as i64, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "an unknown time".to_string());
    let host = hostname();
    let osts = options.osts.max(1);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# This machine ({host}), measured by `lanefs calibrate` on {when}: one node\n\
         # that is both client and servers, as a local lanefs cluster is, so that\n\
         # `lanefs sim ior --cluster THIS_FILE -N {ranks}` simulates what `lanefs ior\n\
         # -a LANEFS -N {ranks}` runs here. \"measured\" values say how; the others\n\
         # are not measured by lanefs calibrate yet and keep the laptop preset's\n\
         # assumption (presets/laptop.toml), as their comments say.\n\
         #\n\
         # Bandwidths are in GiB/s (2^30 bytes per second).\n\
         \n\
         [cluster]\n\
         name = \"calibrated\"\n\
         description = \"{host} as measured by lanefs calibrate on {when}: 1 node x {ranks} ranks, one OSS with {osts} OSTs on {dir}\"\n",
        ranks = options.ranks,
        dir = options.data_dir.display(),
    );
    t
}

/// The node: its ranks, a core's copy rate and the sockets.
fn compute(m: &Measurements, options: &Options) -> String {
    let one_way_us = m.unix.one_way.as_secs_f64() * 1e6;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[compute]\n\
         # One node: the clients and the servers share this host.\n\
         nodes = 1\n\
         ranks_per_node = {ranks}\n\
         # measured: one thread copying 1 MiB blocks into a 256 MiB buffer,\n\
         # {copy_mib} MiB in all ({cores} cores copying at once: {each:.2} GiB/s each).\n\
         copy_bandwidth_gib_s = {one:.3}\n\
         # measured: 1 MiB writes streamed over a Unix socket pair between two\n\
         # threads ({sock_mib} MiB), the sockets a local cluster's clients and servers use.\n\
         injection_bandwidth_gib_s = {unix_bw:.3}\n\
         # measured: half the median round trip of a 64-byte message over a Unix\n\
         # socket pair ({trips} round trips; 10th to 90th percentile {p10:.1} to\n\
         # {p90:.1} us: a thread woken from sleep answers far later than one\n\
         # running; TCP on loopback: {tcp_us:.1} us).\n\
         network_latency_us = {one_way_us:.1}\n",
        ranks = options.ranks,
        copy_mib = options.copy_bytes() >> 20,
        cores = m.copy.cores,
        each = m.copy.each_of_all_gib_s,
        one = m.copy.one_gib_s,
        sock_mib = options.socket_bytes() >> 20,
        unix_bw = m.unix.gib_s,
        trips = options.round_trips(),
        p10 = m.unix.one_way_spread.0.as_secs_f64() * 1e6,
        p90 = m.unix.one_way_spread.1.as_secs_f64() * 1e6,
        tcp_us = m.tcp.one_way.as_secs_f64() * 1e6,
    );
    t
}

/// The client's settings: lanefs's defaults.
fn client() -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[client]\n\
         # lanefs defaults (crates/core/src/client/mod.rs), as the real client runs.\n\
         rpc_size_kib = 1024\n\
         rpcs_in_flight = 8\n\
         max_dirty_mib_per_ost = 32\n\
         lock_lru_size = 400\n\
         cached_mib_max = 64\n"
    );
    t
}

/// The OSS and its OSTs on the disk measured.
fn storage(m: &Measurements, options: &Options) -> String {
    let osts = options.osts.max(1);
    let per_ost_write = m.disk.write_gib_s / f64::from(osts);
    let per_ost_read = m.disk.read_gib_s / f64::from(osts);
    let sync_us = m.disk.sync.as_secs_f64() * 1e6;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[storage]\n\
         # One OSS serving the OSTs, all on the disk measured.\n\
         oss_count = 1\n\
         osts_per_oss = {osts}\n\
         # measured: {disk_mib} MiB written in 1 MiB writes and fdatasync'ed, then read\n\
         # back with the file's pages dropped from the page cache, in {dir}:\n\
         # {write:.3} GiB/s write and {read:.3} GiB/s read for the disk, shared\n\
         # equally by the {osts} OSTs (assumption: the OSTs take turns fairly).\n\
         ost_write_bandwidth_gib_s = {per_ost_write:.4}\n\
         # measured: the disk's read bandwidth, as above, per OST.\n\
         ost_read_bandwidth_gib_s = {per_ost_read:.4}\n\
         # measured: the Unix socket's bandwidth, as for the clients.\n\
         oss_network_bandwidth_gib_s = {unix_bw:.3}\n\
         # Not measured yet (laptop preset's assumption): the server CPU time per\n\
         # I/O RPC, taken equal to lock_cpu_us.\n\
         rpc_service_overhead_us = 65\n\
         # lanefs's OST default (lanefs up --sync-lock-cancel), Lustre's too.\n\
         sync_lock_cancel = \"always\"\n\
         # measured: the median time of a 4 KiB write and its fdatasync ({syncs}\n\
         # of them), what an OST's commit waits for on this disk.\n\
         journal_commit_us = {sync_us:.0}\n\
         # The page: only writes that are not page-aligned pay a read-modify-write.\n\
         raid_stripe_kib = 4\n\
         # measured: the disk's read bandwidth per OST, as above.\n\
         rmw_read_bandwidth_gib_s = {per_ost_read:.4}\n\
         # lanefs's OSS serves each OST on a thread of its own\n\
         # (crates/server/src/oss.rs).\n\
         oss_service_threads = {osts}\n\
         # Not measured yet (laptop preset's assumption): model-params' enqueue round\n\
         # trip of 105 us less two one-way latencies of 20 us.\n\
         lock_cpu_us = 65\n\
         # lanefs's default (lanefs up --callback-timeout), Lustre's ldlm_enqueue_min.\n\
         callback_timeout_s = 100\n\
         \n\
         # [mpi] is left out: MPI messages use the [compute] latency and bandwidth.",
        disk_mib = m.disk.bytes >> 20,
        dir = options.data_dir.display(),
        write = m.disk.write_gib_s,
        read = m.disk.read_gib_s,
        unix_bw = m.unix.gib_s,
        syncs = m.disk.syncs,
    );
    t
}

/// The summary table: each measurement, its value and what it becomes.
pub fn summary(m: &Measurements, options: &Options) -> Vec<[String; 3]> {
    let us = |d: std::time::Duration| format!("{:.1} us", d.as_secs_f64() * 1e6);
    let spread = |s: &crate::sockets::Socket| {
        let (p10, p90) = s.one_way_spread;
        format!("{} ({:.1} to {:.1})", us(s.one_way), p10.as_secs_f64() * 1e6, p90.as_secs_f64() * 1e6)
    };
    let gib = |v: f64| format!("{v:.3} GiB/s ({:.0} MB/s)", v / GIB_PER_GB * 1000.0);
    vec![
        [
            "disk write (1 MiB writes, fdatasync)".into(),
            gib(m.disk.write_gib_s),
            "ost_write_bandwidth_gib_s (per OST)".into(),
        ],
        ["disk read (cache dropped)".into(), gib(m.disk.read_gib_s), "ost_read_bandwidth_gib_s (per OST)".into()],
        ["4 KiB write + fdatasync (median)".into(), us(m.disk.sync), "journal_commit_us".into()],
        ["copy, one core".into(), gib(m.copy.one_gib_s), "copy_bandwidth_gib_s".into()],
        [format!("copy, each of {} cores at once", m.copy.cores), gib(m.copy.each_of_all_gib_s), "(shown)".into()],
        ["Unix socket one way (10th to 90th pct)".into(), spread(&m.unix), "network_latency_us".into()],
        ["Unix socket bandwidth".into(), gib(m.unix.gib_s), "injection/oss_network_bandwidth_gib_s".into()],
        ["TCP loopback one way (10th to 90th pct)".into(), spread(&m.tcp), "(shown)".into()],
        ["TCP loopback bandwidth".into(), gib(m.tcp.gib_s), "(shown)".into()],
        ["OSTs sharing the disk".into(), options.osts.to_string(), "osts_per_oss".into()],
    ]
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this host".to_string())
}
