//! The summary table `lanefs calibrate` prints: each measurement, its
//! value, and the preset key it becomes (or why a step was skipped).

use crate::costs::Cost;
use crate::step::Step;
use crate::{Measurements, Options};

const GIB_PER_GB: f64 = 0.931_323;

type Row = [String; 3];

/// Every row, in the order measured.
pub fn rows(m: &Measurements, options: &Options) -> Vec<Row> {
    [hardware(m, options), costs(m), mount(m), mpi(m), cautions(m)].concat()
}

fn us(d: std::time::Duration) -> String {
    format!("{:.1} us", d.as_secs_f64() * 1e6)
}

fn gib(v: f64) -> String {
    format!("{v:.3} GiB/s ({:.0} MB/s)", v / GIB_PER_GB * 1000.0)
}

/// A median rate and its parts' range.
fn spread_gib(v: f64, (low, high): (f64, f64)) -> String {
    format!("{v:.3} GiB/s ({low:.2} to {high:.2})")
}

fn row(what: impl Into<String>, value: impl Into<String>, key: impl Into<String>) -> Row {
    [what.into(), value.into(), key.into()]
}

fn hardware(m: &Measurements, options: &Options) -> Vec<Row> {
    let spread = |s: &crate::sockets::Socket| {
        let (p10, p90) = s.one_way_spread;
        format!("{} ({:.1} to {:.1})", us(s.one_way), p10.as_secs_f64() * 1e6, p90.as_secs_f64() * 1e6)
    };
    vec![
        row("disk write (1 MiB writes, fdatasync)", gib(m.disk.write_gib_s), "(shown)"),
        row(
            "  of it, the fdatasyncs' writeback",
            spread_gib(m.disk.writeback_gib_s, m.disk.writeback_spread_gib_s),
            "ost_write_bandwidth_gib_s (the OSTs' one disk)",
        ),
        row(
            "  of it, the writes into the page cache (CPU)",
            spread_gib(m.disk.cache_write_gib_s, m.disk.cache_write_spread_gib_s),
            "host_cache_write_gib_s",
        ),
        match m.disk.writeback_cpu {
            Some((rate, spread)) => {
                row("  of it, the writeback per CPU second", spread_gib(rate, spread), "writeback_cpu_gib_s")
            }
            None => row("  of it, the writeback per CPU second", "no CPU time seen", "(left out)"),
        },
        row(
            "dirty bytes kept before writeback",
            format!("{} MiB", m.disk.background.bytes >> 20),
            "host_cache_background_mib",
        ),
        row("disk read (cache dropped)", gib(m.disk.read_gib_s), "ost_read_bandwidth_gib_s (the OSTs' one disk)"),
        row("4 KiB write + fdatasync (median)", us(m.disk.sync), "journal_commit_us"),
        row(format!("the same, {} threads at once", m.disk.syncs_threads), us(m.disk.sync_together), "(shown)"),
        row("512 B written in place + fdatasync (median)", us(m.disk.point), "commit_point_us"),
        row("  its CPU time (median)", us(m.disk.point_cpu), "sync_cpu_us"),
        row("copy, one core", spread_gib(m.copy.one_gib_s, m.copy.one_spread_gib_s), "copy_bandwidth_gib_s"),
        row(
            format!("copy, each of {} cores at once", m.copy.cores),
            spread_gib(m.copy.each_of_all_gib_s, m.copy.each_of_all_spread_gib_s),
            "copy_bandwidth_every_core_gib_s",
        ),
        row(
            "shared memory, first write of a page",
            frame(m.frames.first_touch_us, m.frames.first_touch_spread_us),
            "page_first_touch_us",
        ),
        row(
            "shared memory, first read through a mapping",
            frame(m.frames.first_map_us, m.frames.first_map_spread_us),
            "page_first_map_us",
        ),
        row("cores online", m.cores_online.to_string(), "cores"),
        row("Unix socket one way (10th to 90th pct)", spread(&m.unix), "network_latency_us"),
        row("Unix socket bandwidth", gib(m.unix.gib_s), "injection/oss_network_bandwidth_gib_s"),
        row("TCP loopback one way (10th to 90th pct)", spread(&m.tcp), "(shown)"),
        row("TCP loopback bandwidth", gib(m.tcp.gib_s), "(shown)"),
        row("hand-off to a thread, one core", handoff(m.handoffs.busy_core), "handoff_us"),
        row("hand-off to a thread, waking an idle core", handoff(m.handoffs.idle_core), "handoff_idle_core_us"),
        row(
            "hand-off to a thread, another busy core",
            handoff(m.handoffs.other_busy_core),
            "handoff_other_busy_core_us",
        ),
        row("OSTs sharing the disk", options.osts.to_string(), "osts_per_oss"),
    ]
}

/// A hand-off's cost, and the switches per round trip it was taken from.
fn handoff(h: Option<crate::sockets::Handoff>) -> String {
    match h {
        Some(h) => format!("{:.2} us ({:.2} switches a round trip)", h.switch_us, h.switches_per_round_trip),
        None => "not told apart (left out)".into(),
    }
}

/// A fault's cost, and the spread of its rounds.
fn frame(us: f64, (low, high): (f64, f64)) -> String {
    format!("{us:.2} us ({low:.2} to {high:.2})")
}

/// A cost, and the spread of its rounds.
fn cost(c: Cost) -> String {
    let (low, high) = c.spread_us;
    match c.clamped {
        true => format!("0 (below zero; {low:.1} to {high:.1})"),
        false => format!("{:.2} us ({low:.1} to {high:.1})", c.us),
    }
}

fn costs(m: &Measurements) -> Vec<Row> {
    let s = &m.servers;
    vec![
        row("servers' CPU per I/O RPC (rounds' spread)", cost(s.costs.rpc), "rpc_service_overhead_us"),
        row("servers' CPU per lock request", cost(s.costs.lock), "lock_cpu_us"),
        row("servers' CPU per blocking callback", cost(s.costs.callback), "callback_cpu_us"),
        row("servers' CPU per lock-ahead request, new files", cost(s.costs.lockahead), "(shown)"),
        row("servers' CPU per lock request, one at a time", cost(s.costs.lock_alone), "(shown)"),
        row(
            "metadata server, a create as a client sees it",
            us(m.metadata.create),
            "mds_create_us (less a round trip)",
        ),
        row("metadata server, an open as a client sees it", us(m.metadata.open), "mds_open_us (less a round trip)"),
        row("servers' CPU per page of a write RPC", cost(s.costs.page), "rpc_service_per_page_us"),
        row(
            "client's CPU per cached 4 KiB write",
            cost(s.client.call),
            format!("client_cpu_per_call_us (less the copy: {:.2} us)", crate::preset::per_call_us(m)),
        ),
        row("client's CPU per message", cost(s.client.message), "client_cpu_per_rpc_us"),
        row("client's CPU per page of an RPC", cost(s.client.page), "client_cpu_per_page_us"),
        row("client's CPU per lock, beyond its messages", cost(s.client.lock), "client_cpu_per_lock_us"),
    ]
}

fn mount(m: &Measurements) -> Vec<Row> {
    match &m.mount {
        Step::Measured(mount) => vec![
            row(
                format!(
                    "mount, 4 KiB write ({:.1} us) less direct ({:.1} us)",
                    mount.through_mount_us, mount.direct_us
                ),
                match mount.clamped {
                    true => "0 (below zero)".into(),
                    false => format!("{:.2} us", mount.request_us),
                },
                "[mount] request_us",
            ),
            row("mount's largest request", format!("{} KiB", mount.request_max_kib), "[mount] request_max_kib"),
        ],
        Step::Skipped(reason) => vec![row("mount", "skipped", format!("[mount] left out: {}", first_line(reason)))],
    }
}

fn mpi(m: &Measurements) -> Vec<Row> {
    match &m.mpi {
        Step::Measured(mpi) => {
            let mut rows = vec![
                row("MPI one way (8 bytes, 2 ranks)", format!("{:.2} us", mpi.latency_us), "[mpi] latency_us"),
                row("MPI bandwidth (4 MiB messages)", gib(mpi.bandwidth_gib_s), "[mpi] bandwidth_gib_s"),
                row(
                    "MPI time per message in a stream",
                    format!("{:.3} us", mpi.message_cpu_us),
                    "[mpi] message_cpu_us",
                ),
                row("MPI_Test of a receive still to come", format!("{:.3} us", mpi.test_us), "[mpi] test_us"),
                match &mpi.test_yield_us {
                    Ok(us) => row(
                        "the same, yielding the core (mpi_yield_when_idle)",
                        format!("{us:.3} us"),
                        "[mpi] test_yield_us",
                    ),
                    Err(why) => row(
                        "MPI_Test yielding the core",
                        "skipped",
                        format!("[mpi] test_yield_us left out: {}", first_line(why)),
                    ),
                },
            ];
            if let Some(bytes) = mpi.eager_limit {
                rows.push(row("MPI eager limit (ompi_info)", format!("{bytes} B"), "[mpi] rendezvous_bytes"));
            }
            rows
        }
        Step::Skipped(reason) => vec![row("MPI", "skipped", format!("[mpi] left out: {}", first_line(reason)))],
    }
}

/// What the figures above cannot be trusted for, and why.
fn cautions(m: &Measurements) -> Vec<Row> {
    let mut rows = Vec::new();
    if m.debug_build {
        rows.push(row("lanefs measured", "a debug build", "(its CPU costs are several times a release build's)"));
    }
    if crate::disk::new_memory_slow(m.disk.cache_write_gib_s, m.copy.one_gib_s) {
        rows.push(row(
            "caution: new memory was slow",
            format!("page cache {:.3} GiB/s, copy {:.3}", m.disk.cache_write_gib_s, m.copy.one_gib_s),
            format!("(host_cache_write_gib_s is not a write's cost: {})", crate::disk::NEW_MEMORY_SLOW_FIX),
        ));
    }
    rows
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}
