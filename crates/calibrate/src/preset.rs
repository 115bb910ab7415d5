//! The measurements as a cluster preset: the TOML `lanefs sim ior
//! --cluster FILE` reads, one node that is both client and servers, each
//! value with the comment that says where it came from. A step skipped
//! (the mount, MPI) leaves its section out with a comment saying why.

use crate::costs::Cost;
use crate::step::Step;
use crate::{Measurements, Options};
use std::fmt::Write;

/// The preset's text.
pub fn render(m: &Measurements, options: &Options) -> String {
    [
        header(m, options),
        compute(m, options),
        compute_costs(m),
        client(),
        storage(m, options),
        sync_costs(m),
        storage_costs(m),
        metadata(m),
        host_cache(m),
        mpi(m),
        mount(m),
    ]
    .concat()
}

/// When the preset was measured, as its comments say it.
pub fn when(m: &Measurements) -> String {
    chrono::DateTime::from_timestamp(m.taken_unix_s as i64, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| "an unknown time".to_string())
}

/// A cost's value, and the comment line on its rounds: their spread,
/// and that it was clamped, if it was.
fn cost(c: Cost, rounds: usize) -> (String, String) {
    let (low, high) = c.spread_us;
    let clamped = match c.clamped {
        true => " It came out below zero (noise larger than the cost): written as 0.",
        false => "",
    };
    let note = format!("Median of {rounds} rounds, which ranged from {low:.2} to {high:.2} us.{clamped}");
    (format!("{:.3}", c.us), format!("\n{}", as_comment(&note).trim_end()))
}

/// When and where it was measured, and what the file is.
fn header(m: &Measurements, options: &Options) -> String {
    let when = when(m);
    let host = hostname();
    let osts = options.osts.max(1);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# This machine ({host}), measured by `lanefs calibrate` on {when}: one host\n\
         # that runs the clients and the servers, as a local lanefs cluster does, so\n\
         # that `lanefs sim ior --cluster THIS_FILE -a LANEFS -N {ranks}` simulates what\n\
         # `lanefs ior -a LANEFS -N {ranks}` runs here. \"measured\" values say how; the others\n\
         # are lanefs's own settings, as their comments say.{build}{memory}\n\
         #\n\
         # Bandwidths are in GiB/s (2^30 bytes per second).\n\
         \n\
         [cluster]\n\
         name = \"calibrated\"\n\
         description = \"{host} as measured by lanefs calibrate on {when}: {ranks} clients on one host, one OSS with {osts} OSTs on {dir}\"\n",
        ranks = options.ranks,
        dir = options.data_dir.display(),
        build = match m.debug_build {
            true => "\n#\n# Measured with a debug build of lanefs: its CPU costs (the servers' and\n\
                     # the client's) are several times a release build's. Calibrate with\n\
                     # `cargo build --release` for this machine's real costs.",
            false => "",
        },
        memory = match crate::disk::new_memory_slow(m.disk.cache_write_gib_s, m.copy.one_gib_s) {
            true => format!(
                "\n#\n# Caution: the writes into the page cache ran at {:.3} GiB/s, under an\n\
                 # eighth of a core's copy ({:.3}): new memory was slow to come by while\n\
                 # this was measured, and host_cache_write_gib_s below says so, not what a\n\
                 # write costs ({}).",
                m.disk.cache_write_gib_s,
                m.copy.one_gib_s,
                crate::disk::NEW_MEMORY_SLOW_FIX
            ),
            false => String::new(),
        },
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
         # One node a rank: each rank of `lanefs ior -a LANEFS` and of mpirun is a\n\
         # client of its own (the mount is one client for its ranks: give it\n\
         # --tasks-per-node), and every node runs on this host (hosts below).\n\
         nodes = {ranks}\n\
         ranks_per_node = 1\n\
         # measured: one thread copying 1 MiB blocks into a 64 MiB buffer,\n\
         # {copy_mib} MiB in all: the median of {rounds} rounds, which ranged from\n\
         # {one_low:.2} to {one_high:.2} GiB/s.\n\
         copy_bandwidth_gib_s = {one:.3}\n\
         # measured: the same, one thread per core ({cores}) copying at once into\n\
         # 64 MiB buffers of their own: the median thread's rate, the median of\n\
         # {rounds} rounds (taken in turn with the above), which ranged from\n\
         # {each_low:.2} to {each_high:.2} GiB/s.\n\
         copy_bandwidth_every_core_gib_s = {each:.3}\n\
         # measured: 1 MiB writes streamed over a Unix socket pair between two\n\
         # threads ({sock_mib} MiB), the sockets a local cluster's clients and servers use\n\
         # (for reads' bulk: writes' stays in shared memory, [storage] write_bulk).\n\
         injection_bandwidth_gib_s = {unix_bw:.3}\n\
         # measured: half the median round trip of a 64-byte message over a Unix\n\
         # socket pair ({trips} round trips; 10th to 90th percentile {p10:.1} to\n\
         # {p90:.1} us: a thread woken from sleep answers far later than one\n\
         # running; TCP on loopback: {tcp_us:.1} us).\n\
         network_latency_us = {one_way_us:.1}",
        ranks = options.ranks,
        copy_mib = options.copy_bytes() >> 20,
        cores = m.copy.cores,
        each = m.copy.each_of_all_gib_s,
        one = m.copy.one_gib_s,
        rounds = crate::copy::ROUNDS,
        one_low = m.copy.one_spread_gib_s.0,
        one_high = m.copy.one_spread_gib_s.1,
        each_low = m.copy.each_of_all_spread_gib_s.0,
        each_high = m.copy.each_of_all_spread_gib_s.1,
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
         cached_mib_max = 64\n\
         # lanefs's client keeps what its OSTs acknowledged until they commit it, to\n\
         # replay it after an OST restart, and counts it against its cache\n\
         # (crates/core/src/client/replay.rs).\n\
         unstable_pages = \"kept-until-commit\"\n"
    );
    t
}

/// The OSS and its OSTs on the disk measured.
fn storage(m: &Measurements, options: &Options) -> String {
    let osts = options.osts.max(1);
    let sync_us = m.disk.sync.as_secs_f64() * 1e6;
    let together_us = m.disk.sync_together.as_secs_f64() * 1e6;
    let point_us = m.disk.point.as_secs_f64() * 1e6;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[storage]\n\
         # One OSS serving the OSTs, all on the disk measured.\n\
         oss_count = 1\n\
         osts_per_oss = {osts}\n\
         # measured: {disk_mib} MiB written in 1 MiB writes and fdatasync'ed, then read\n\
         # back with the file's pages dropped from the page cache, in {dir}:\n\
         # the fdatasyncs alone wrote the page cache back at {writeback:.3} GiB/s (all\n\
         # the bytes over the fdatasyncs' time together: a run's bytes meet the disk's\n\
         # slow stretches as these did; {parts} parts, each written and synced, from\n\
         # {wb_low:.3} to {wb_high:.3}; the writes and syncs together: {write:.3} GiB/s), and the\n\
         # read ran at {read:.3} GiB/s. The OSTs write into the page cache\n\
         # (ost_writes below), so the disk's write bandwidth is the writeback's.\n\
         ost_write_bandwidth_gib_s = {writeback:.4}\n\
         # measured: the disk's read bandwidth, as above.\n\
         ost_read_bandwidth_gib_s = {read:.4}\n\
         # The OSTs' directories are all on the disk measured, which takes their\n\
         # write-backs, syncs and reads one after another at the rates above (one\n\
         # OST alone has all of it).\n\
         ost_disks = \"shared\"\n\
         # measured: the Unix socket's bandwidth, as for the clients (reads' bulk).\n\
         oss_network_bandwidth_gib_s = {unix_bw:.3}\n\
         # lanefs's OST default (lanefs up --sync-lock-cancel), Lustre's too.\n\
         sync_lock_cancel = \"always\"\n\
         # measured: the median time of a 4 KiB write and its fdatasync ({syncs}\n\
         # of them, one thread), what an OST's commit waits for of each object it\n\
         # syncs on this disk; the disk takes the OSTs' syncs one after another\n\
         # (ost_disks above). {osts} threads syncing at once, each to a file of its\n\
         # own, as the OSTs' commit threads do, waited {together_us:.0} us each.\n\
         journal_commit_us = {sync_us:.0}\n\
         # lanefs's OST commit thread fdatasyncs each object a commit covers in\n\
         # turn, then writes its commit point (crates/server/src/oss.rs).\n\
         commit_syncs = \"each-object\"\n\
         # measured: the median time of a commit point ({syncs} of them): 512 bytes\n\
         # written in place in a file whose blocks exist, and its fdatasync.\n\
         commit_point_us = {point_us:.0}\n\
         # The page: only writes that are not page-aligned pay a read-modify-write.\n\
         raid_stripe_kib = 4\n\
         # measured: the disk's read bandwidth, as above.\n\
         rmw_read_bandwidth_gib_s = {read:.4}\n\
         # lanefs's OSS serves each OST on a thread of its own\n\
         # (crates/server/src/oss.rs).\n\
         oss_service_threads = {osts}\n\
         # lanefs's default (lanefs up --callback-timeout), Lustre's ldlm_enqueue_min.\n\
         callback_timeout_s = 100",
        disk_mib = m.disk.bytes >> 20,
        dir = options.data_dir.display(),
        write = m.disk.write_gib_s,
        writeback = m.disk.writeback_gib_s,
        parts = crate::disk::PARTS,
        wb_low = m.disk.writeback_spread_gib_s.0,
        wb_high = m.disk.writeback_spread_gib_s.1,
        read = m.disk.read_gib_s,
        unix_bw = m.unix.gib_s,
        syncs = m.disk.syncs,
    );
    t
}

/// The node's cores and the client library's CPU costs.
fn compute_costs(m: &Measurements) -> String {
    let s = &m.servers;
    let (cached, small, large) = (&s.phases.cached, &s.phases.page_rpcs, &s.phases.large_rpcs);
    let (per_rpc, rpc_note) = cost(s.client.message, s.rounds);
    let (per_page, page_note) = cost(s.client.page, s.rounds);
    let (per_lock, lock_note) = cost(s.client.lock, s.rounds);
    let retakes = &s.phases.retakes;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# measured: the cores online (sysconf _SC_NPROCESSORS_ONLN); the servers'\n\
         # CPU work shares them with the clients' ([storage] runs_on).\n\
         cores = {cores}\n\
         # Every node simulated runs on this one host and shares its cores, as the\n\
         # clients of a local cluster, one per rank, do here.\n\
         hosts = \"one\"\n\
         # measured: the client library's CPU time (this process's CPU clock, all\n\
         # its threads) for {small_ops} 4 KiB writes a page apart, fsync'ed every 16 MiB\n\
         # ({small_messages} messages to the OST, {small_rpcs} of them write RPCs), and for {cached_ops}\n\
         # writes each to a page of its own that stays cached ({cached_messages} messages): the\n\
         # two solved for a call's cost ({call:.2} us) and a message's.{rpc_note}\n\
         client_cpu_per_rpc_us = {per_rpc}\n\
         # measured: the same for {large_mib} MiB in 1 MiB writes ({large_rpcs} write RPCs, {pages:.0}\n\
         # pages each on average), less their calls and messages at the costs above\n\
         # and the copy of their bytes at copy_bandwidth_gib_s, per page beyond each\n\
         # RPC's first (which a message's cost has).{page_note}\n\
         client_cpu_per_page_us = {per_page}\n\
         # measured: the same for {retake_ops} writes of a page that each took a lock the\n\
         # client had given back ({retake_enqueues} enqueues, {retake_messages} messages, {retake_rpcs} of them write RPCs),\n\
         # less their calls and messages at the costs above, per enqueue: a lock\n\
         # asked for, matched and given back, beyond its messages.{lock_note}\n\
         client_cpu_per_lock_us = {per_lock}\n\
         # measured: the same solution's call cost, less the copy of its 4 KiB at\n\
         # copy_bandwidth_gib_s (which the simulator charges apart): a rank's call\n\
         # handed to the client's thread and its answer handed back.{call_note}\n\
         client_cpu_per_call_us = {per_call:.3}\n\
         {handoffs}\
         # measured: the CPU time of a first write into a page of new shared memory\n\
         # (a memfd, as a client's page arena), less a second write into it: the\n\
         # fault that gives it memory, {touch_pages} pages a round. Median of {frame_rounds} rounds,\n\
         # which ranged from {touch_low:.2} to {touch_high:.2} us.\n\
         page_first_touch_us = {first_touch:.3}\n",
        cores = m.cores_online,
        small_ops = small.ops,
        small_messages = small.counts.messages(),
        small_rpcs = small.counts.io_rpcs,
        cached_ops = cached.ops,
        cached_messages = cached.counts.messages(),
        call = s.client.call.us,
        large_mib = (large.ops * crate::load::LARGE_WRITE_BYTES) >> 20,
        large_rpcs = large.counts.io_rpcs,
        pages = large.counts.bytes_written as f64 / crate::load::PAGE_BYTES as f64 / large.counts.io_rpcs.max(1) as f64,
        retake_ops = retakes.ops,
        retake_enqueues = retakes.counts.enqueues,
        retake_messages = retakes.counts.messages(),
        retake_rpcs = retakes.counts.io_rpcs,
        touch_pages = m.frames.pages,
        frame_rounds = crate::frames::ROUNDS,
        touch_low = m.frames.first_touch_spread_us.0,
        touch_high = m.frames.first_touch_spread_us.1,
        first_touch = m.frames.first_touch_us,
        per_call = per_call_us(m),
        call_note = match per_call_us(m) > 0.0 {
            true => "",
            false => "\n# It came out below zero (noise larger than the cost): written as 0.",
        },
        handoffs = handoffs(m),
    );
    t
}

/// The client's CPU time per call, less the copy of its page (at least
/// zero).
pub fn per_call_us(m: &Measurements) -> f64 {
    let copy_us = crate::load::PAGE_BYTES as f64 / (m.copy.one_gib_s * (1u64 << 30) as f64) * 1e6;
    (m.servers.client.call.us - copy_us).max(0.0)
}

/// The hand-off keys, each with how it was measured, or why it is left out.
fn handoffs(m: &Measurements) -> String {
    let rows = [
        ("handoff_us", m.handoffs.busy_core, "both threads pinned to one core"),
        ("handoff_idle_core_us", m.handoffs.idle_core, "each thread pinned to a core of its own"),
        (
            "handoff_other_busy_core_us",
            m.handoffs.other_busy_core,
            "each thread pinned to a core of its own\n# beside a thread spinning there at SCHED_IDLE (no core sleeps; the spinners'\n# time not counted)",
        ),
    ];
    let mut t = String::new();
    for (key, h, how) in rows {
        let _ = match h {
            Some(h) => writeln!(
                t,
                "# measured: the CPU time of a thread woken for a message, {how}:\n\
                 # 64-byte round trips over a Unix socket pair ({per_rt:.2} context switches each)\n\
                 # against the same messages streamed ({streamed:.3} a message), both threads'\n\
                 # CPU time and switches (getrusage RUSAGE_THREAD) solved for a switch's cost\n\
                 # ({message:.2} us a message besides).\n\
                 {key} = {us:.3}",
                per_rt = h.switches_per_round_trip,
                streamed = h.switches_per_streamed,
                message = h.message_us,
                us = h.switch_us,
            ),
            None => writeln!(
                t,
                "# {key} is left out: {how}, the round trips and the stream could not be\n\
                 # told apart (or this host has one core)."
            ),
        };
    }
    t
}

/// The CPU the OSTs' `fdatasync`s take on the host: each sync's own, and
/// the writeback's per byte.
fn sync_costs(m: &Measurements) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# measured: the median CPU time of one commit point above (this thread's\n\
         # clock: the write, the fdatasync's own work and the journal commit it\n\
         # starts), taken on the host's cores for each fdatasync of an OST's commit.\n\
         sync_cpu_us = {:.1}",
        m.disk.point_cpu.as_secs_f64() * 1e6
    );
    let _ = match m.disk.writeback_cpu {
        Some((rate, (low, high))) => writeln!(
            t,
            "# measured: the bytes the fdatasyncs above wrote back per second of their\n\
             # thread's CPU time (the kernel's work to place the page cache's blocks and\n\
             # submit them; {parts} parts together, each from {low:.2} to {high:.2} GiB/s), taken on\n\
             # the host's cores for what an OST sends from the page cache to the disk.\n\
             writeback_cpu_gib_s = {rate:.3}",
            parts = crate::disk::PARTS,
        ),
        None => writeln!(
            t,
            "# not measured: the fdatasyncs above took no CPU time their thread's clock\n\
             # could see, so writeback_cpu_gib_s is left out (writeback takes no CPU)."
        ),
    };
    t
}

/// The servers' CPU costs, and where they run.
fn storage_costs(m: &Measurements) -> String {
    let s = &m.servers;
    let p = &s.phases;
    let (rpc, rpc_note) = cost(s.costs.rpc, s.rounds);
    let (lock, lock_note) = cost(s.costs.lock, s.rounds);
    let (callback, callback_note) = cost(s.costs.callback, s.rounds);
    let (page, page_note) = cost(s.costs.page, s.rounds);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# measured: the servers' CPU time (their process's CPU clock, less the\n\
         # {idle:.0} us per second they take idle) for {page_rpcs} write RPCs of 4 KiB (and\n\
         # {page_requests} other requests), and for {retakes} writes of one page that each took\n\
         # a lock the client had given back ({retake_requests} requests: enqueues and cancels,\n\
         # and {retake_rpcs} RPCs): the two solved for an RPC's cost and a request's.{rpc_note}\n\
         rpc_service_overhead_us = {rpc}\n\
         # measured: the lock server's CPU time per request (an enqueue, a cancel, a\n\
         # sync), as above. Shown, not used: a lock-ahead request costs {ahead:.1} us\n\
         # ({aheads} requests, 16 to a new file a call, the servers idle between calls,\n\
         # less their RPCs), and a lock request with nothing else to do {alone:.1} us\n\
         # ({alone_low:.1} to {alone_high:.1}; {alone_calls} lock-ahead locks, asked for one at a time\n\
         # by 4 threads of a client that keeps one unused lock, {alone_requests}\n\
         # requests with the cancels of the locks it gave back, nothing written).\n\
         # Requests that come one at a time find the servers' threads asleep, and a\n\
         # process's CPU clock holds its threads' wake-ups, which the simulator\n\
         # charges apart (the handoff_* keys); amid writes, as above,\n\
         # the threads are more often awake.{lock_note}\n\
         lock_cpu_us = {lock}\n\
         # measured: the servers' CPU time for the same writes by two clients in\n\
         # turn ({writes}, on 4 files at once), whose locks each call back the other's:\n\
         # {callbacks} blocking callbacks, less the phase's {requests} requests and {rpcs} RPCs at\n\
         # the costs above, per callback (the OSTs synced no cancel: that wait is\n\
         # journal_commit_us's).{callback_note}\n\
         callback_cpu_us = {callback}\n\
         # measured: the servers' CPU time for {large_rpcs} write RPCs of 1 MiB, fsync'ed\n\
         # every 16 MiB, less their requests and RPCs at the costs above and the copy\n\
         # of their bytes into the page cache at host_cache_write_gib_s, per page\n\
         # beyond each RPC's first: the bulk's pages and the commits' writeback.{page_note}\n\
         rpc_service_per_page_us = {page}\n\
         # The servers measured ran on this node, sharing its cores with the clients.\n\
         runs_on = \"compute-node\"\n\
         # A client on the OSS's host hands it its page arena in shared memory, and a\n\
         # write RPC names its pages instead of sending them (crates/server/src/oss.rs):\n\
         # the OSS copies them into the file from where they are.\n\
         write_bulk = \"shared-memory\"\n\
         # lanefs's OSTs are files: a write lands in this host's page cache and is\n\
         # answered, and the disk's bandwidth (above) is paid when a commit or an\n\
         # fsync flushes it (crates/server/src/filestore.rs).\n\
         ost_writes = \"host-cache\"",
        idle = s.idle_rate * 1e6,
        page_rpcs = p.page_rpcs.counts.io_rpcs,
        page_requests = p.page_rpcs.counts.requests,
        retakes = p.retakes.ops,
        retake_requests = p.retakes.counts.requests,
        retake_rpcs = p.retakes.counts.io_rpcs,
        ahead = s.costs.lockahead.us,
        alone = s.costs.lock_alone.us,
        alone_low = s.costs.lock_alone.spread_us.0,
        alone_high = s.costs.lock_alone.spread_us.1,
        alone_calls = p.lock_retakes.ops,
        alone_requests = p.lock_retakes.counts.requests,
        aheads = p.locks.counts.requests,
        writes = p.callbacks.ops,
        callbacks = p.callbacks.counts.callbacks,
        requests = p.callbacks.counts.requests,
        rpcs = p.callbacks.counts.io_rpcs,
        large_rpcs = p.large_rpcs.counts.io_rpcs,
    );
    t
}

/// The metadata server's time per create and per open, less the round
/// trip the simulator adds itself.
fn metadata(m: &Measurements) -> String {
    let d = &m.metadata;
    let round_trip = 2.0 * m.unix.one_way.as_secs_f64() * 1e6;
    let server = |took: std::time::Duration| (took.as_secs_f64() * 1e6 - round_trip).max(0.0);
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# measured: the median time of {ops} creates of files of {stripes} stripes by one\n\
         # client, one after the other ({create:.0} us each as the client saw it), less a\n\
         # Unix socket's round trip ({round_trip:.0} us, as above), which the simulator adds\n\
         # itself: lanefs's MDS serves one request at a time, each create a SQLite\n\
         # transaction committed to disk.\n\
         mds_create_us = {create_us:.0}\n\
         # measured: the same for an open of each of those files again ({open:.0} us).\n\
         mds_open_us = {open_us:.0}",
        ops = d.ops,
        stripes = d.stripes,
        create = d.create.as_secs_f64() * 1e6,
        open = d.open.as_secs_f64() * 1e6,
        create_us = server(d.create),
        open_us = server(d.open),
    );
    t
}

/// The host's page cache the OSTs write into, and the server's side of
/// the client's shared memory.
fn host_cache(m: &Measurements) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# measured: the CPU time of the {disk_mib} MiB of buffered 1 MiB writes above\n\
         # (into a new file: page-cache pages allocated as it grows), per byte: the\n\
         # median of the {parts} parts, which ranged from {cw_low:.3} to {cw_high:.3} GiB/s.\n\
         host_cache_write_gib_s = {cache_write:.3}\n\
         # read: {background_how}: the dirty bytes this host\n\
         # keeps before its kernel writes back on its own.\n\
         host_cache_background_mib = {background_mib}\n\
         # lanefs's OST commits once {commit_mib} MiB were written since its last commit\n\
         # began, syncing every object it changed (COMMIT_BYTES_DEFAULT,\n\
         # crates/core/src/ost/commits.rs): its writeback starts as the writes come.\n\
         host_cache_commit_mib = {commit_mib}\n\
         # measured: a server's CPU time for the first read of a page of a client's\n\
         # shared memory through its own mapping (pwrite from it into a new file, less\n\
         # the same from pages read before): the fault that maps it, {map_pages} pages a\n\
         # round. Median of {frame_rounds} rounds, which ranged from {map_low:.2} to {map_high:.2} us.\n\
         page_first_map_us = {first_map:.3}\n",
        disk_mib = m.disk.bytes >> 20,
        cache_write = m.disk.cache_write_gib_s,
        parts = crate::disk::PARTS,
        cw_low = m.disk.cache_write_spread_gib_s.0,
        cw_high = m.disk.cache_write_spread_gib_s.1,
        background_how = m.disk.background.how,
        background_mib = m.disk.background.bytes >> 20,
        commit_mib = lanefs_core::ost::commits::COMMIT_BYTES_DEFAULT >> 20,
        map_pages = m.frames.pages,
        frame_rounds = crate::frames::ROUNDS,
        map_low = m.frames.first_map_spread_us.0,
        map_high = m.frames.first_map_spread_us.1,
        first_map = m.frames.first_map_us,
    );
    t
}

/// `[mpi]`, or the comment that says why it is left out.
fn mpi(m: &Measurements) -> String {
    let mpi = match &m.mpi {
        Step::Measured(mpi) => mpi,
        Step::Skipped(reason) => {
            let why = format!(
                "[mpi] is left out: not measured, {reason}. MPI messages use the [compute] latency and bandwidth."
            );
            return format!("{}\n", as_comment(&why));
        }
    };
    let n = mpi.samples;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[mpi]\n\
         # measured: half the round trip of an 8-byte message between the 2 ranks of\n\
         # `mpirun -np 2` on this node ({version}), {trips} round trips.\n\
         latency_us = {latency:.3}\n\
         # measured: {large} messages of 4 MiB streamed from one rank to the other, 8 in\n\
         # flight.\n\
         bandwidth_gib_s = {bandwidth:.3}\n\
         # measured: the sending rank's time per message in a stream of {small}\n\
         # non-blocking 8-byte sends, 64 in flight (LogP's overhead).\n\
         message_cpu_us = {message:.3}\n\
         # measured: a rank's time per MPI_Test of a receive still to come, {small}\n\
         # tests: lanefs's ranks test a collective 64 times before they first sleep.\n\
         test_us = {test:.3}\n\
         {test_yield}",
        version = mpi.version,
        trips = n.round_trips,
        latency = mpi.latency_us,
        large = n.large_messages,
        bandwidth = mpi.bandwidth_gib_s,
        small = n.small_messages,
        message = mpi.message_cpu_us,
        test = mpi.test_us,
        test_yield = match &mpi.test_yield_us {
            Ok(us) => format!(
                "# measured: the same under `--mca mpi_yield_when_idle 1`, which Open MPI sets\n\
                 # by default where a node runs more ranks than it has cores: each test that\n\
                 # finds nothing to do yields the core (opal_progress calls sched_yield).\n\
                 test_yield_us = {us:.3}\n"
            ),
            Err(why) => format!("{}\n", as_comment(&format!("test_yield_us is left out: not measured, {why}."))),
        },
    );
    match mpi.eager_limit {
        Some(bytes) => {
            let _ = writeln!(
                t,
                "# read: Open MPI's eager limit between ranks of a node (btl_vader_eager_limit,\n\
                 # `ompi_info`): a larger message waits for its receiver to test (a rendezvous).\n\
                 rendezvous_bytes = {bytes}"
            );
        }
        None => t.push_str("# rendezvous_bytes is left out: no Open MPI eager limit found (ompi_info).\n"),
    }
    t
}

/// `[mount]`, or the comment that says why it is left out.
fn mount(m: &Measurements) -> String {
    let mount = match &m.mount {
        Step::Measured(mount) => mount,
        Step::Skipped(reason) => {
            let why = format!(
                "[mount] is left out: not measured, {reason}. The simulator's ranks then call the client directly."
            );
            return as_comment(&why);
        }
    };
    let clamped = match mount.clamped {
        true => "\n# It came out below zero (the mount's writes were the faster): written as 0.",
        false => "",
    };
    format!(
        "[mount]\n\
         # measured: {writes} writes of 4 KiB, each to a page of its own that stays\n\
         # cached, through a FUSE mount of the servers measured (lanefs mount),\n\
         # {through:.2} us each, less as many through the client library directly,\n\
         # {direct:.2} us each (medians of rounds taken in turn): the kernel's round\n\
         # trip to the mount's daemon.{clamped}\n\
         request_us = {request:.3}\n\
         # lanefs's mount asks the kernel for writes and reads of up to this\n\
         # (max_write, crates/fuse/src/fs.rs).\n\
         request_max_kib = {max}\n",
        writes = mount.writes,
        through = mount.through_mount_us,
        direct = mount.direct_us,
        request = mount.request_us,
        max = mount.request_max_kib,
    )
}

/// Comment lines of at most [`COMMENT_WIDTH`] columns (a longer word
/// stands alone) saying `text`, each line of it on lines of its own.
pub fn as_comment(text: &str) -> String {
    let mut out = String::new();
    for paragraph in text.lines() {
        let mut line = String::from("#");
        for word in paragraph.split_whitespace() {
            if line.len() > 1 && line.len() + 1 + word.len() > COMMENT_WIDTH {
                out.push_str(&line);
                out.push('\n');
                line = String::from("#");
            }
            line.push(' ');
            line.push_str(word);
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

const COMMENT_WIDTH: usize = 78;

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "this host".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_of_several_lines_becomes_comment_lines_only() {
        let text =
            "the mount's daemon exited (exit status: 1); it said:\n  fuse: device not found, try 'modprobe fuse' first";
        let comment = as_comment(text);
        assert!(comment.lines().all(|l| l.starts_with('#') && l.len() <= COMMENT_WIDTH), "{comment}");
        assert!(comment.ends_with("first\n"), "{comment}");
        let words = |t: &str| t.split_whitespace().filter(|w| *w != "#").collect::<Vec<_>>().join(" ");
        assert_eq!(words(&comment), words(text));
        let long = "x".repeat(100);
        assert_eq!(as_comment(&long), format!("# {long}\n"), "a longer word stands alone");
    }
}
