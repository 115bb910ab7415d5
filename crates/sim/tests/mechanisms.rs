//! The cost mechanisms of the model, one by one: with a mechanism on, the
//! quantity it models moves the way its source says; set to what it would
//! be without it, the run is the same as without the key.

use lanefs_sim::backend::SimOptions;
use serde_json::Value;

mod common;
use common::{counter, json_run, opts_with, without_wall_time};

fn with_hints(mut o: SimOptions, spec: &str) -> SimOptions {
    o.hints = spec
        .split(':')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            (k.to_string(), v.to_string())
        })
        .collect();
    o
}

fn simulated_s(j: &Value) -> f64 {
    j["sim"]["simulated_s"].as_f64().expect("simulated seconds")
}

/// 8 ranks on one node, a file each, copying at 0.1 GiB/s: the copies
/// dominate.
const EIGHT_COPYING: &str = "-a POSIX -w -F -b 4m -t 1m -N 8 --tasks-per-node 8";
const SLOW_COPY: (&str, &str) = ("compute.copy_bandwidth_gib_s", "0.1");

#[test]
fn ranks_beyond_the_cores_take_turns_copying() {
    let alone = json_run(EIGHT_COPYING, opts_with("laptop", &[SLOW_COPY]));
    let two_cores = json_run(EIGHT_COPYING, opts_with("laptop", &[SLOW_COPY, ("compute.cores", "2")]));
    // 8 copies of 4 MiB on 2 cores take 4 times as long as on 8.
    let ratio = simulated_s(&two_cores) / simulated_s(&alone);
    assert!((3.0..4.5).contains(&ratio), "2 cores for 8 copying ranks: {ratio:.2} times as long");
    assert_eq!(counter(&two_cores, "ost_bytes_written"), 32 << 20);
}

#[test]
fn a_process_copies_slower_while_every_core_copies() {
    let cores = ("compute.cores", "8");
    let same = json_run(EIGHT_COPYING, opts_with("laptop", &[SLOW_COPY, cores]));
    let shared = json_run(
        EIGHT_COPYING,
        opts_with("laptop", &[SLOW_COPY, cores, ("compute.copy_bandwidth_every_core_gib_s", "0.05")]),
    );
    let ratio = simulated_s(&shared) / simulated_s(&same);
    assert!((1.6..2.2).contains(&ratio), "half the rate with every core copying: {ratio:.2} times as long");
    // One rank copying alone keeps the full rate.
    let one = "-a POSIX -w -b 4m -t 1m -N 1 --tasks-per-node 1";
    let alone = json_run(one, opts_with("laptop", &[SLOW_COPY, cores]));
    let alone_shared =
        json_run(one, opts_with("laptop", &[SLOW_COPY, cores, ("compute.copy_bandwidth_every_core_gib_s", "0.05")]));
    assert_eq!(simulated_s(&alone), simulated_s(&alone_shared));
}

#[test]
fn cores_enough_for_every_rank_change_nothing() {
    let lines = [EIGHT_COPYING, "-a MPIIO -c -w -r -b 1m -t 1m -s 4 -N 8 --tasks-per-node 2"];
    for line in lines {
        let hints = "striping_factor=4:cray_cb_nodes_multiplier=2:cray_cb_write_lock_mode=0";
        let without = json_run(line, with_hints(opts_with("laptop", &[]), hints));
        let mut ample = json_run(line, with_hints(opts_with("laptop", &[("compute.cores", "1024")]), hints));
        // The CPU time charged, reported where cores are modelled.
        let busy = ample["sim"].as_object_mut().unwrap().remove("cpu_busy_s").expect("the CPU time charged");
        assert!(busy.as_f64().unwrap() > 0.0);
        ample["sim"].as_object_mut().unwrap().remove("cpu_s").expect("the CPU time by use");
        assert_eq!(without_wall_time(without), without_wall_time(ample), "{line}");
    }
}

#[test]
fn client_cpu_per_page_and_checksums_slow_one_stream() {
    // One rank, synced 1 MiB writes: each RPC's 256 pages cost 40 us each
    // (10 ms an RPC), or its checksum at 0.1 GiB/s 10 ms.
    let line = "-a POSIX -w -b 8m -t 1m -N 1 -Y";
    let free = json_run(line, opts_with("laptop", &[]));
    for key in [("compute.client_cpu_per_page_us", "40"), ("compute.checksum_bandwidth_gib_s", "0.1")] {
        let costly = json_run(line, opts_with("laptop", &[key]));
        let added = simulated_s(&costly) - simulated_s(&free);
        // 8 writes of 1 MiB, about 10 ms each, one at a time.
        assert!(added > 0.075, "{}: {added} s added", key.0);
        assert_eq!(counter(&costly, "write_rpcs"), counter(&free, "write_rpcs"), "{}", key.0);
    }
}

/// Two nodes of 4 ranks writing the same 4 objects at once, segment by
/// segment, with default locking: each node's client gets callbacks for
/// several objects at once.
const FIGHTING: &str =
    "-a POSIX -w -b 64k -t 64k -s 32 -N 8 --tasks-per-node 4 --lanefs.stripe-count=4 --lanefs.stripe-size=64k";

fn fighting(settings: &[(&str, &str)]) -> SimOptions {
    let mut all = vec![("storage.ost_access_latency_us", "5000")];
    all.extend_from_slice(settings);
    let mut o = opts_with("laptop", &all);
    o.stripe_count = Some(4);
    o.stripe_size = Some(64 << 10);
    o
}

#[test]
fn one_callback_thread_makes_callbacks_queue() {
    let free = json_run(FIGHTING, fighting(&[]));
    let one = json_run(FIGHTING, fighting(&[("compute.callback_threads", "1")]));
    assert!(counter(&free, "blocking_callbacks") > 8, "{}", free["lanefs"]);
    assert_eq!(counter(&free, "callbacks_queued"), 0, "no bound, no queue");
    assert!(counter(&one, "callbacks_queued") > 0, "{}", one["lanefs"]);
    assert_eq!(counter(&one, "ost_bytes_written"), counter(&free, "ost_bytes_written"));
    // As many threads as callbacks could ever be held: as unbounded.
    let many = json_run(FIGHTING, fighting(&[("compute.callback_threads", "65536")]));
    assert_eq!(without_wall_time(many), without_wall_time(free));
}

#[test]
fn server_cpu_per_callback_slows_a_contended_file() {
    // 4 ranks on 4 nodes, each writing its own 1 MiB of one shared object
    // with a fsync after each 64 KiB: expanded locks are called back all
    // along. More server CPU per callback, later handovers.
    let line = "-a POSIX -w -b 1m -t 64k -s 4 -N 4 --tasks-per-node 1 -Y";
    let times: Vec<f64> = ["0", "2000", "5000"]
        .iter()
        .map(|us| simulated_s(&json_run(line, opts_with("laptop", &[("storage.callback_cpu_us", us)]))))
        .collect();
    assert!(times[0] < times[1] && times[1] < times[2], "0, 2 and 5 ms per callback: {times:?} s");
}

#[test]
fn servers_on_the_compute_node_take_its_cores() {
    // One core: the OSS's 2 ms of CPU per RPC and the rank's copies take
    // turns on it.
    let line = "-a POSIX -w -F -b 8m -t 1m -N 2 --tasks-per-node 2";
    let base = [SLOW_COPY, ("compute.cores", "1"), ("storage.rpc_service_overhead_us", "2000")];
    let own = json_run(line, opts_with("laptop", &base));
    let mut shared = base.to_vec();
    shared.push(("storage.runs_on", "\"compute-node\""));
    let shared = json_run(line, opts_with("laptop", &shared));
    assert!(simulated_s(&shared) > simulated_s(&own) * 1.05, "{} vs {}", simulated_s(&shared), simulated_s(&own));
}

#[test]
fn mpi_messages_cost_their_ends_cpu() {
    let line = "-a MPIIO -c -w -b 1m -t 256k -s 4 -N 8 --tasks-per-node 2";
    let hints = "striping_factor=4:cray_cb_nodes_multiplier=1:cray_cb_write_lock_mode=2";
    let free = json_run(line, with_hints(opts_with("laptop", &[]), hints));
    let costly = json_run(line, with_hints(opts_with("laptop", &[("mpi.message_cpu_us", "1000")]), hints));
    assert!(simulated_s(&costly) > simulated_s(&free) + 0.004, "{} vs {}", simulated_s(&costly), simulated_s(&free));
    assert_eq!(counter(&costly, "ost_bytes_written"), counter(&free, "ost_bytes_written"));
}

#[test]
fn only_posix_calls_go_through_the_mount() {
    let line = |api: &str| format!("-a {api} -w -b 4m -t 1m -N 1 -Y");
    let mount = [("mount.request_us", "1000"), ("mount.request_max_kib", "128")];
    let direct = json_run(&line("POSIX"), opts_with("laptop", &[]));
    let mounted = json_run(&line("POSIX"), opts_with("laptop", &mount));
    let library = json_run(&line("LANEFS"), opts_with("laptop", &mount));
    // 4 transfers of 8 requests of 1 ms each.
    let added = simulated_s(&mounted) - simulated_s(&direct);
    assert!((0.032..0.040).contains(&added), "the mount added {added} s");
    assert_eq!(simulated_s(&library), simulated_s(&direct), "-a LANEFS calls the client directly");
}

#[test]
fn nodes_on_one_host_share_its_cores() {
    // 8 nodes of one rank each, a file each, 2 cores a host: on a host each
    // they copy at once; on one host 4 times as long, as 8 ranks of a node.
    let line = "-a POSIX -w -F -b 4m -t 1m -N 8 --tasks-per-node 1";
    let base = [SLOW_COPY, ("compute.nodes", "8"), ("compute.cores", "2")];
    let apart = json_run(line, opts_with("laptop", &base));
    let mut together = base.to_vec();
    together.push(("compute.hosts", "\"one\""));
    let together = json_run(line, opts_with("laptop", &together));
    let ratio = simulated_s(&together) / simulated_s(&apart);
    assert!((3.0..4.5).contains(&ratio), "8 single-rank nodes on one 2-core host: {ratio:.2} times as long");
    let node = json_run(EIGHT_COPYING, opts_with("laptop", &[SLOW_COPY, ("compute.cores", "2")]));
    let close = simulated_s(&together) / simulated_s(&node);
    assert!((0.8..1.25).contains(&close), "as 8 ranks of one node: {close:.2}");
}

#[test]
fn osts_writing_into_the_host_cache_reply_early_and_sync_late() {
    // One rank, 64 MiB to one OST served by one thread, its network and
    // its disk at 0.1 GiB/s each, fsynced at the end: the disk's 0.625 s
    // are paid either way, but through the host's page cache the thread
    // answers each RPC once its bytes are in memory, so the next RPC's bulk
    // overlaps the disk instead of waiting for it (1.25 s).
    let line = "-a POSIX -w -e -b 64m -t 1m -N 1 --tasks-per-node 1";
    let disk = [
        ("storage.ost_write_bandwidth_gib_s", "0.1"),
        ("compute.injection_bandwidth_gib_s", "0.1"),
        ("storage.oss_service_threads", "1"),
    ];
    let through = json_run(line, opts_with("laptop", &disk));
    let cached = json_run(line, opts_with("laptop", &host_cache(&disk)));
    let drain = 64.0 / 1024.0 / 0.1;
    assert!(simulated_s(&through) > 2.0 * drain * 0.95, "bulk, then disk: {} s", simulated_s(&through));
    assert!(simulated_s(&cached) >= drain, "the fsync waits for the disk: {} s", simulated_s(&cached));
    assert!(simulated_s(&cached) < drain * 1.15, "bulk beside the disk: {} s", simulated_s(&cached));
    // Without the fsync (and with cancels that do not sync) the run ends,
    // over a fast network, with the bytes still in the cache.
    let mut unsynced = host_cache(&disk);
    unsynced[1] = ("compute.injection_bandwidth_gib_s", "10");
    unsynced.push(("storage.sync_lock_cancel", "\"never\""));
    let no_fsync = json_run("-a POSIX -w -b 64m -t 1m -N 1 --tasks-per-node 1", opts_with("laptop", &unsynced));
    assert!(simulated_s(&no_fsync) < drain, "{} s", simulated_s(&no_fsync));
}

#[test]
fn osts_on_one_disk_take_turns_and_one_alone_has_all_of_it() {
    // Four ranks, a file each of one stripe, so on an OST each (the laptop's
    // one OSS has four), 16 MiB each fsynced, the disks at 0.1 GiB/s: the
    // disks' time dominates.
    let disk = [("storage.ost_write_bandwidth_gib_s", "0.1"), ("storage.oss_service_threads", "4")];
    let shared = [disk[0], disk[1], ("storage.ost_disks", "\"shared\"")];
    let four = "-a POSIX -w -e -F -b 16m -t 1m -N 4 --tasks-per-node 4";
    let own_disks = json_run(four, opts_with("laptop", &disk));
    let one_disk = json_run(four, opts_with("laptop", &shared));
    // One disk takes the four OSTs' 64 MiB one after another: 0.625 s.
    let ratio = simulated_s(&one_disk) / simulated_s(&own_disks);
    assert!((3.0..4.5).contains(&ratio), "four OSTs on one disk: {ratio:.2} times as long as on four");
    assert!(simulated_s(&one_disk) >= 64.0 / 1024.0 / 0.1, "{} s", simulated_s(&one_disk));
    // One OST writing alone has the whole disk, as on a disk of its own.
    let one = "-a POSIX -w -e -b 16m -t 1m -N 1 --tasks-per-node 1";
    let alone = json_run(one, opts_with("laptop", &disk));
    let alone_on_one_disk = json_run(one, opts_with("laptop", &shared));
    assert_eq!(simulated_s(&alone), simulated_s(&alone_on_one_disk));
    // `own` is what a preset without the key gets.
    let own = json_run(four, opts_with("laptop", &[disk[0], disk[1], ("storage.ost_disks", "\"own\"")]));
    assert_eq!(without_wall_time(own), without_wall_time(own_disks));
}

fn host_cache<'a>(settings: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut all = settings.to_vec();
    all.push(("storage.ost_writes", "\"host-cache\""));
    all
}

/// One rank's 64 MiB to one OST served by one thread, its network and its
/// disk at 0.1 GiB/s each, fsynced at the end, the OST writing into its
/// host's page cache.
const ONE_STREAM: &str = "-a POSIX -w -e -b 64m -t 1m -N 1 --tasks-per-node 1";
const SLOW_DISK: [(&str, &str); 4] = [
    ("storage.ost_write_bandwidth_gib_s", "0.1"),
    ("compute.injection_bandwidth_gib_s", "0.1"),
    ("storage.oss_service_threads", "1"),
    ("storage.ost_writes", "\"host-cache\""),
];
/// The disk's time for the 64 MiB, and the network's.
const DRAIN_S: f64 = 64.0 / 1024.0 / 0.1;

fn slow_disk_with(settings: &[(&str, &str)]) -> SimOptions {
    laptop_with(&SLOW_DISK, settings)
}

/// The laptop preset with `base`, then `settings`.
fn laptop_with(base: &[(&str, &str)], settings: &[(&str, &str)]) -> SimOptions {
    let all: Vec<_> = base.iter().chain(settings).copied().collect();
    opts_with("laptop", &all)
}

#[test]
fn below_the_background_threshold_writes_wait_in_the_host_cache_for_their_sync() {
    // Written back as they come, the disk drains beside the network;
    // kept until the fsync, the disk starts only then.
    let at_once = json_run(ONE_STREAM, slow_disk_with(&[]));
    let kept = json_run(ONE_STREAM, slow_disk_with(&[("storage.host_cache_background_mib", "1024")]));
    assert!(simulated_s(&at_once) < DRAIN_S * 1.15, "beside the network: {} s", simulated_s(&at_once));
    assert!(simulated_s(&kept) > DRAIN_S * 1.9, "network, then disk: {} s", simulated_s(&kept));
    // An OST that commits every 4 MiB on its own writes back as the
    // writes come, as with no threshold, but for the last commit's 4 MiB
    // and the network's last megabytes (0.08 s at 0.1 GiB/s).
    let committing = json_run(
        ONE_STREAM,
        slow_disk_with(&[("storage.host_cache_background_mib", "1024"), ("storage.host_cache_commit_mib", "4")]),
    );
    assert!(simulated_s(&committing) < DRAIN_S + 0.125, "commits beside the network: {} s", simulated_s(&committing));
    // A threshold the writes pass at once is the same as none.
    let none = json_run(ONE_STREAM, slow_disk_with(&[("storage.host_cache_background_mib", "0")]));
    assert_eq!(without_wall_time(none), without_wall_time(at_once));
    // The host cache's keys mean nothing to OSTs that write through.
    let error = lanefs_sim::ClusterConfig::load_with(
        "laptop",
        &[("storage.host_cache_background_mib".to_string(), "1024".to_string())],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("ost_writes = \"host-cache\""), "{error}");
}

#[test]
fn a_slower_page_cache_write_holds_the_service_thread() {
    let fast = [("compute.injection_bandwidth_gib_s", "100"), ("storage.ost_write_bandwidth_gib_s", "100")];
    let copy_rate = json_run(ONE_STREAM, slow_disk_with(&fast));
    let slow =
        json_run(ONE_STREAM, slow_disk_with(&[&fast[..], &[("storage.host_cache_write_gib_s", "0.1")]].concat()));
    assert!(simulated_s(&slow) > DRAIN_S, "64 MiB into the cache at 0.1 GiB/s: {} s", simulated_s(&slow));
    assert!(simulated_s(&copy_rate) < DRAIN_S / 2.0, "{} s", simulated_s(&copy_rate));
    // At the copy rate, the same as without the key.
    let laptop = lanefs_sim::ClusterConfig::load("laptop").unwrap();
    let rate = laptop.compute.copy_bandwidth_gib_s.to_string();
    let same =
        json_run(ONE_STREAM, slow_disk_with(&[fast[0], fast[1], ("storage.host_cache_write_gib_s", rate.as_str())]));
    assert_eq!(without_wall_time(same), without_wall_time(copy_rate));
}

#[test]
fn new_frames_cost_their_first_write_and_their_first_map() {
    let fast = [("compute.injection_bandwidth_gib_s", "100"), ("storage.ost_write_bandwidth_gib_s", "100")];
    let free = json_run(ONE_STREAM, slow_disk_with(&fast));
    // 16,384 pages at 50 us: 0.82 s, if every frame is new.
    let cost = |key: &str, small_cache: bool| {
        let mut settings = vec![fast[0], fast[1], (key, "50")];
        if small_cache {
            settings.extend([("client.cached_mib_max", "2"), ("client.max_dirty_mib_per_ost", "2")]);
        }
        simulated_s(&json_run(ONE_STREAM, slow_disk_with(&settings))) - simulated_s(&free)
    };
    for key in ["compute.page_first_touch_us", "storage.page_first_map_us"] {
        let added = cost(key, false);
        assert!((0.75..1.0).contains(&added), "{key}: {added} s for 64 MiB of new frames");
        // A client whose cache holds a few MiB reuses its frames.
        let reused = cost(key, true);
        assert!(reused < added / 4.0, "{key}: {reused} s with a small cache against {added} s");
        let zero = json_run(ONE_STREAM, slow_disk_with(&[fast[0], fast[1], (key, "0")]));
        assert_eq!(without_wall_time(zero), without_wall_time(free.clone()), "{key} = 0");
    }
}

/// 4 ranks of one host sharing its 2 cores with the servers, 64 KiB writes
/// each under a lock of its own extent (noexpand): a lock request and its
/// grant for every write, which a rank waits for.
const SYNCHRONOUS_LOCKS: &str = "-a LANEFS -w -b 1m -t 64k -s 4 -N 4 --lanefs.lock-mode=noexpand";
const ONE_HOST: [(&str, &str); 4] = [
    ("compute.nodes", "4"),
    ("compute.cores", "2"),
    ("compute.hosts", "\"one\""),
    ("storage.runs_on", "\"compute-node\""),
];

fn one_host_with(settings: &[(&str, &str)]) -> SimOptions {
    laptop_with(&ONE_HOST, settings)
}

#[test]
fn waking_sleeping_threads_costs_cpu_and_an_idle_core_more() {
    let free = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[]));
    let cpu = |j: &Value| j["sim"]["cpu_busy_s"].as_f64().expect("the CPU time charged");
    let busy = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[("compute.handoff_us", "200")]));
    let handoffs = busy["sim"]["handoffs"].as_u64().expect("the hand-offs counted");
    // Each of the 256 writes' lock request wakes the OSS's network and
    // service threads and its grant the network thread and the client's: up
    // to 4 a write, fewer where a thread still at work takes the message.
    assert_eq!(counter(&busy, "lock_enqueues"), 256, "a lock of its own for each write");
    assert!((64..=4 * 256).contains(&handoffs), "{handoffs} hand-offs for 256 synchronous lock requests");
    // Their CPU time, and the other work that moved with it (a write RPC
    // more or less as the cache's flushes fall otherwise).
    let charged = cpu(&busy) - cpu(&free);
    let handed = handoffs as f64 * 200e-6;
    assert!((handed * 0.9..handed * 1.5).contains(&charged), "{charged} s charged for {handoffs} hand-offs");
    assert!(simulated_s(&busy) > simulated_s(&free), "{} vs {}", simulated_s(&busy), simulated_s(&free));
    // A wake-up that finds a core idle costs that core's waking too.
    let idle = json_run(
        SYNCHRONOUS_LOCKS,
        one_host_with(&[("compute.handoff_us", "200"), ("compute.handoff_idle_core_us", "2000")]),
    );
    assert!(simulated_s(&idle) > simulated_s(&busy), "{} vs {}", simulated_s(&idle), simulated_s(&busy));
    // (Some wake-ups find both cores busy with the ranks' and the
    // servers' work; at least some find one idle.)
    assert!(cpu(&idle) > cpu(&busy) + 5.0 * 1.8e-3, "{} vs {}", cpu(&idle), cpu(&busy));
    // Free hand-offs are no hand-offs.
    let mut zero = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[("compute.handoff_us", "0")]));
    assert!(zero["sim"].as_object_mut().unwrap().remove("handoffs").is_none(), "none counted when they cost nothing");
    assert_eq!(without_wall_time(zero), without_wall_time(free));
}

#[test]
fn a_wake_up_on_a_busy_host_lands_on_another_core_all_but_one_time_in_cores() {
    let cpu = |j: &Value| j["sim"]["cpu_busy_s"].as_f64().expect("the CPU time charged");
    let same = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[("compute.handoff_us", "200")]));
    let crossing = [("compute.handoff_us", "200"), ("compute.handoff_other_busy_core_us", "2000")];
    let other = json_run(SYNCHRONOUS_LOCKS, one_host_with(&crossing));
    // With both cores busy a wake-up costs (200 + 2000) / 2 us, 900 more
    // than on the waker's core; some of the wake-ups find both busy.
    let handoffs = other["sim"]["handoffs"].as_u64().expect("the hand-offs counted") as f64;
    let more = cpu(&other) - cpu(&same);
    assert!((10.0 * 900e-6..handoffs * 900e-6 * 1.5).contains(&more), "{more} s more for {handoffs} hand-offs");
    assert!(simulated_s(&other) > simulated_s(&same), "{} vs {}", simulated_s(&other), simulated_s(&same));
    // Another core that costs what the waker's does changes nothing.
    let even = json_run(
        SYNCHRONOUS_LOCKS,
        one_host_with(&[("compute.handoff_us", "200"), ("compute.handoff_other_busy_core_us", "200")]),
    );
    assert_eq!(without_wall_time(even), without_wall_time(same));
    // On a host of one core every wake-up is on the waker's.
    let one_core = |settings: &[(&str, &str)]| {
        let mut host = ONE_HOST;
        host[1] = ("compute.cores", "1");
        json_run(SYNCHRONOUS_LOCKS, laptop_with(&host, settings))
    };
    assert_eq!(
        without_wall_time(one_core(&crossing)),
        without_wall_time(one_core(&[("compute.handoff_us", "200")])),
        "one core has no other"
    );
}

#[test]
fn each_call_costs_its_rank_cpu() {
    let free = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[]));
    let costly = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[("compute.client_cpu_per_call_us", "500")]));
    // 64 calls of 0.5 ms on 2 cores: at least 16 ms more.
    let added = simulated_s(&costly) - simulated_s(&free);
    assert!(added > 0.016, "{added} s for 64 calls of 0.5 ms on 2 cores");
    let zero = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[("compute.client_cpu_per_call_us", "0")]));
    assert_eq!(without_wall_time(zero), without_wall_time(free));
}

#[test]
fn each_lock_costs_its_client_cpu() {
    let cpu = |j: &Value| j["sim"]["cpu_busy_s"].as_f64().expect("the CPU time charged");
    let free = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[]));
    let costly = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[("compute.client_cpu_per_lock_us", "500")]));
    let enqueues = counter(&costly, "lock_enqueues");
    assert_eq!(enqueues, counter(&free, "lock_enqueues"), "the same locks asked for");
    assert!(enqueues >= 256, "{enqueues} enqueues for 256 writes under locks of their own");
    // Each lock's 0.5 ms on the host's cores, the ranks waiting for them.
    let charged = cpu(&costly) - cpu(&free);
    let owed = enqueues as f64 * 500e-6;
    assert!((owed * 0.9..owed * 1.2).contains(&charged), "{charged} s charged for {enqueues} locks");
    // Each rank waits for its own 64 locks one after another (the other
    // ranks' locks fill cores that were idle: the whole adds less than
    // owed / 2).
    let added = simulated_s(&costly) - simulated_s(&free);
    assert!(added > 64.0 * 500e-6 * 0.9, "{added} s added by {enqueues} locks of 0.5 ms, 64 a rank");
    let zero = json_run(SYNCHRONOUS_LOCKS, one_host_with(&[("compute.client_cpu_per_lock_us", "0")]));
    assert_eq!(without_wall_time(zero), without_wall_time(free));
}

#[test]
fn an_rpcs_pages_cost_the_service() {
    // One stream of 1 MiB RPCs: 255 pages beyond each RPC's first, at 4 us
    // each on the one service thread, over 64 RPCs: 65 ms.
    let fast = [("compute.injection_bandwidth_gib_s", "100"), ("storage.ost_write_bandwidth_gib_s", "100")];
    let free = json_run(ONE_STREAM, slow_disk_with(&fast));
    let costly = json_run(ONE_STREAM, slow_disk_with(&[fast[0], fast[1], ("storage.rpc_service_per_page_us", "4")]));
    let added = simulated_s(&costly) - simulated_s(&free);
    assert!((0.05..0.08).contains(&added), "{added} s for 64 RPCs of 255 extra pages at 4 us");
    let zero = json_run(ONE_STREAM, slow_disk_with(&[fast[0], fast[1], ("storage.rpc_service_per_page_us", "0")]));
    assert_eq!(without_wall_time(zero), without_wall_time(free));
}

#[test]
fn a_writes_bulk_in_shared_memory_takes_no_network_time() {
    // One stream over a network of 0.1 GiB/s: the bulk alone takes 0.625 s.
    let shared = |bulk: &'static str| {
        let settings = [
            ("storage.ost_write_bandwidth_gib_s", "100"),
            ("storage.ost_writes", "\"host-cache\""),
            ("compute.injection_bandwidth_gib_s", "0.1"),
            ("compute.nodes", "1"),
            ("compute.cores", "2"),
            ("compute.hosts", "\"one\""),
            ("storage.runs_on", "\"compute-node\""),
            ("storage.write_bulk", bulk),
        ];
        json_run(ONE_STREAM, opts_with("laptop", &settings))
    };
    let network = shared("\"network\"");
    let memory = shared("\"shared-memory\"");
    assert!(simulated_s(&network) > DRAIN_S, "over the network: {} s", simulated_s(&network));
    assert!(simulated_s(&memory) < DRAIN_S / 4.0, "in shared memory: {} s", simulated_s(&memory));
    assert_eq!(counter(&memory, "ost_bytes_written"), 64 << 20);
    // Without the key, over the network as before.
    let laptop = lanefs_sim::ClusterConfig::load_with(
        "laptop",
        &[("storage.write_bulk".to_string(), "\"network\"".to_string())],
    )
    .unwrap();
    assert_eq!(laptop.storage.write_bulk(), lanefs_sim::config::WriteBulk::Network);
    // Shared memory needs the clients on the servers' host.
    let error = lanefs_sim::ClusterConfig::load_with(
        "laptop",
        &[("storage.write_bulk".to_string(), "\"shared-memory\"".to_string())],
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("runs_on = \"compute-node\"") && error.contains("hosts = \"one\""), "{error}");
}

/// A client of a small cache streaming 64 MiB over a fast network to a
/// fast disk, with new frames dear and commits of 20 ms every 4 MiB.
const SMALL_CACHE: [(&str, &str); 7] = [
    ("compute.injection_bandwidth_gib_s", "100"),
    ("storage.ost_write_bandwidth_gib_s", "100"),
    ("client.cached_mib_max", "8"),
    ("client.max_dirty_mib_per_ost", "4"),
    ("compute.page_first_touch_us", "50"),
    ("storage.journal_commit_us", "20000"),
    ("storage.host_cache_commit_mib", "4"),
];

#[test]
fn unstable_pages_kept_until_commit_hold_frames_and_the_osts_commit() {
    // Its frames are reused but for those its OST has acknowledged and not
    // yet committed.
    let unstable = |pages: &'static str| {
        json_run(ONE_STREAM, laptop_with(&SLOW_DISK, &[&SMALL_CACHE[..], &[("client.unstable_pages", pages)]].concat()))
    };
    let dropped = json_run(ONE_STREAM, slow_disk_with(&SMALL_CACHE));
    let kept = unstable("\"kept-until-commit\"");
    // Commits of 20 ms, every 4 MiB written: pages wait for them, in their
    // frames, beyond the cache's 8 MiB.
    assert!(counter(&kept, "journal_commits") >= 8, "{}", counter(&kept, "journal_commits"));
    assert!(simulated_s(&kept) > simulated_s(&dropped) + 0.05, "{} vs {}", simulated_s(&kept), simulated_s(&dropped));
    assert_eq!(counter(&kept, "ost_bytes_written"), 64 << 20);
    // The same as without the key when they are dropped.
    assert_eq!(without_wall_time(unstable("\"dropped\"")), without_wall_time(dropped));
    // OSTs that commit only when asked (and 5 s after a change, as jbd2):
    // one commit, the fsync's.
    let asked = json_run(
        ONE_STREAM,
        slow_disk_with(&[
            SMALL_CACHE[0],
            SMALL_CACHE[1],
            SMALL_CACHE[5],
            ("client.unstable_pages", "\"kept-until-commit\""),
        ]),
    );
    assert!(counter(&asked, "journal_commits") <= 2, "{}", counter(&asked, "journal_commits"));
}

#[test]
fn the_cpu_charged_is_broken_down_by_use() {
    let j = json_run(
        SYNCHRONOUS_LOCKS,
        one_host_with(&[
            ("compute.handoff_us", "20"),
            ("compute.client_cpu_per_call_us", "10"),
            ("compute.client_cpu_per_rpc_us", "10"),
            ("storage.lock_cpu_us", "10"),
        ]),
    );
    let uses = j["sim"]["cpu_s"].as_object().expect("the CPU time by use");
    let total: f64 = uses.values().map(|v| v.as_f64().expect("seconds")).sum();
    let busy = j["sim"]["cpu_busy_s"].as_f64().expect("the CPU time charged");
    assert!((total - busy).abs() < 1e-3, "{total} s by use against {busy} s");
    assert!(uses["copies"].as_f64().unwrap() > 0.0, "the writes' copies into the cache: {uses:?}");
    // 256 calls; at least the write RPCs' messages; every lock request.
    let rpcs = counter(&j, "write_rpcs") as f64;
    let requests = (counter(&j, "lock_enqueues") + counter(&j, "lock_cancels")) as f64;
    for (name, least) in [("calls", 256.0 * 10e-6), ("messages", rpcs * 10e-6), ("locks", requests * 10e-6)] {
        let s = uses[name].as_f64().unwrap();
        // (The report gives seconds to 0.1 ms.)
        assert!(s >= least - 1e-4, "{name}: {s} s for at least {least} s");
    }
    let woke = j["sim"]["handoffs"].as_u64().unwrap() as f64;
    assert!((uses["wake_ups"].as_f64().unwrap() - woke * 20e-6).abs() < 1e-4, "{uses:?}");
    let by_thread = j["sim"]["handoffs_by_thread"].as_object().expect("hand-offs by thread");
    let sum: u64 = by_thread.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(sum as f64, woke);
    assert!(by_thread["ost_service"].as_u64().unwrap() > 0, "{by_thread:?}");
}

/// A collective write by eight ranks, one a node, every node on one host
/// of `cores` cores with the servers, two aggregators: the other ranks
/// wait in each round's exchange. `settings` adds to the cluster's.
fn eight_ranks_on_one_host(cores: &str, settings: &[(&str, &str)]) -> Value {
    let line = "-a MPIIO -c -w -b 1m -t 1m -s 8 -N 8 --tasks-per-node 1";
    let hints = "striping_factor=2:cray_cb_nodes_multiplier=1:cray_cb_write_lock_mode=0";
    let mut all = vec![
        ("compute.nodes", "8"),
        ("compute.ranks_per_node", "1"),
        ("compute.cores", cores),
        ("compute.hosts", "\"one\""),
        ("storage.runs_on", "\"compute-node\""),
    ];
    all.extend_from_slice(settings);
    json_run(line, with_hints(opts_with("laptop", &all), hints))
}

#[test]
fn ranks_waiting_in_mpi_sleep_and_pay_their_wake_ups_where_ranks_outnumber_cores() {
    // `wait`: the `[mpi] wait` key, if any.
    let run = |cores: &'static str, handoff: &'static str, wait: Option<&'static str>| {
        let mut settings = vec![("compute.handoff_us", handoff)];
        settings.extend(wait.map(|w| ("mpi.wait", w)));
        eight_ranks_on_one_host(cores, &settings)
    };
    let host = |cores, handoff| run(cores, handoff, None);
    let told = |wait, cores| run(cores, "50", Some(wait));
    let sleeping = host("2", "50");
    let woke = sleeping["sim"]["mpi_wakeups"].as_u64().expect("the ranks' wake-ups");
    assert!(woke > 8, "{woke} wake-ups of ranks waiting");
    let charged = sleeping["sim"]["cpu_s"]["wake_ups"].as_f64().unwrap();
    assert!(charged >= woke as f64 * 50e-6 - 1e-4, "{charged} s for {woke} wake-ups");
    // Cores enough for every rank: they poll, as lanefs's MPI does there,
    // unless told to sleep; and told to poll, they do.
    let polling = host("8", "50");
    assert!(polling["sim"].get("mpi_wakeups").is_none(), "{}", polling["sim"]);
    let slept = told("\"sleep\"", "8");
    assert!(slept["sim"]["mpi_wakeups"].as_u64().unwrap() > 8);
    // A sleeping rank sees its collective done only at its next test, at
    // the end of its sleep: with cores to spare, it is slower than one
    // that polls.
    let polled = told("\"busy\"", "8");
    assert!(simulated_s(&slept) > simulated_s(&polled) + 1e-4, "{} vs {}", simulated_s(&slept), simulated_s(&polled));
    // Before its first sleep a rank tests 64 times: tests so slow that
    // every collective completes meanwhile leave it nothing to sleep for.
    let settings = [("compute.handoff_us", "50"), ("mpi.wait", "\"sleep\""), ("mpi.test_us", "10000")];
    let tested = eight_ranks_on_one_host("8", &settings);
    assert!(tested["sim"].get("mpi_wakeups").is_none(), "{}", tested["sim"]);
    assert_eq!(simulated_s(&tested), simulated_s(&polled), "as polling");
    let busy = told("\"busy\"", "2");
    assert!(busy["sim"].get("mpi_wakeups").is_none(), "{}", busy["sim"]);
    assert_eq!(without_wall_time(told("\"auto\"", "2")), without_wall_time(sleeping.clone()));
    // Free wake-ups: no sleeps to count, and the run as without the key.
    let free = host("2", "0");
    assert!(free["sim"].get("mpi_wakeups").is_none());
    assert!(simulated_s(&sleeping) > simulated_s(&free), "{} vs {}", simulated_s(&sleeping), simulated_s(&free));
}

#[test]
fn tests_that_yield_the_core_are_charged_where_ranks_outnumber_cores() {
    let run = |cores: &'static str, test_yield: Option<&'static str>| {
        let mut settings = vec![("compute.handoff_us", "50"), ("mpi.test_us", "0.02"), ("mpi.wait", "\"sleep\"")];
        settings.extend(test_yield.map(|us| ("mpi.test_yield_us", us)));
        eight_ranks_on_one_host(cores, &settings)
    };
    let mpi_cpu = |j: &Value| j["sim"]["cpu_s"]["mpi"].as_f64().unwrap();
    // Two cores: Open MPI yields in each test, which costs the cores a
    // test after every sleep and the spins before the first, and the run
    // is slower.
    let plain = run("2", None);
    let yielding = run("2", Some("5"));
    let woke = yielding["sim"]["mpi_wakeups"].as_u64().expect("the ranks' wake-ups");
    assert!(woke > 8, "{woke}");
    assert!(
        mpi_cpu(&yielding) >= mpi_cpu(&plain) + woke as f64 * 5e-6 - 1e-4,
        "{} s against {} s, {woke} wake-ups",
        mpi_cpu(&yielding),
        mpi_cpu(&plain)
    );
    assert!(simulated_s(&yielding) > simulated_s(&plain), "{} vs {}", simulated_s(&yielding), simulated_s(&plain));
    // Eight cores, a core a rank: Open MPI does not yield, and the key
    // changes nothing.
    assert_eq!(without_wall_time(run("8", Some("5"))), without_wall_time(run("8", None)));
}

/// 8 ranks on 4 nodes, a file of one stripe each, 8 MiB apiece into the host's page
/// cache of a slow disk, fsynced at the end; the clients keep what their
/// OSTs did not commit, and the OSTs commit every 4 MiB.
const EIGHT_FILES: &str = "-a POSIX -w -e -F -b 8m -t 1m -N 8 --tasks-per-node 2";
const COMMITTING: [(&str, &str); 3] = [
    ("client.unstable_pages", "\"kept-until-commit\""),
    ("storage.host_cache_commit_mib", "4"),
    ("storage.journal_commit_us", "2000"),
];

fn committing_with(settings: &[(&str, &str)]) -> SimOptions {
    let base: Vec<_> = SLOW_DISK.iter().chain(&COMMITTING).copied().collect();
    laptop_with(&base, settings)
}

#[test]
fn an_ost_that_syncs_each_object_pays_a_sync_for_each_and_its_commit_point() {
    let journal = json_run(EIGHT_FILES, committing_with(&[]));
    let each = json_run(EIGHT_FILES, committing_with(&[("storage.commit_syncs", "\"each-object\"")]));
    let pointed = json_run(
        EIGHT_FILES,
        committing_with(&[("storage.commit_syncs", "\"each-object\""), ("storage.commit_point_us", "5000")]),
    );
    // A journal commit covers every object; the commit thread syncs each
    // object a commit covers, then its commit point.
    let commits = counter(&journal, "journal_commits");
    assert!(commits >= 2 && counter(&journal, "commit_fdatasyncs") == 0, "{}", journal["lanefs"]);
    let syncs = counter(&each, "commit_fdatasyncs");
    assert!(syncs > 2 * commits, "{syncs} fdatasyncs against {commits} journal commits");
    assert_eq!(counter(&each, "journal_commits"), 0);
    assert_eq!(counter(&pointed, "commit_fdatasyncs"), syncs, "the same steps, each point dearer");
    assert!(simulated_s(&each) > simulated_s(&journal), "{} vs {}", simulated_s(&each), simulated_s(&journal));
    assert!(simulated_s(&pointed) > simulated_s(&each) + 0.005, "{} vs {}", simulated_s(&pointed), simulated_s(&each));
    // Said, the default is as without the key.
    let said = json_run(EIGHT_FILES, committing_with(&[("storage.commit_syncs", "\"journal\"")]));
    assert_eq!(without_wall_time(said), without_wall_time(journal));
    // On one host with its cores modelled, each fdatasync's end wakes the
    // commit thread on them.
    let mut on_host: Vec<_> = ONE_HOST.to_vec();
    on_host.extend([("compute.handoff_us", "5"), ("storage.commit_syncs", "\"each-object\"")]);
    let woken = json_run(EIGHT_FILES, committing_with(&on_host));
    assert!(woken["sim"]["handoffs_by_thread"]["ost_commit"].as_u64().expect("wake-ups") > 0, "{}", woken["sim"]);
}

#[test]
fn an_osts_syncs_take_the_hosts_cpu_where_the_servers_share_its_cores() {
    let mut on_host: Vec<_> = ONE_HOST.to_vec();
    on_host.push(("storage.commit_syncs", "\"each-object\""));
    let costs = [("storage.sync_cpu_us", "500"), ("storage.writeback_cpu_gib_s", "0.5")];
    let free = json_run(EIGHT_FILES, committing_with(&on_host));
    let charged = json_run(EIGHT_FILES, committing_with(&[on_host.as_slice(), &costs].concat()));
    let syncs_s = |j: &Value| j["sim"]["cpu_s"]["syncs"].as_f64().expect("the syncs' CPU time");
    assert_eq!(syncs_s(&free), 0.0, "{}", free["sim"]);
    // At least each object's fdatasync at 500 us and the 64 MiB written
    // back at 0.5 GiB/s (the commit points' syncs come on top).
    let fdatasyncs = counter(&charged, "commit_fdatasyncs") as f64;
    assert!(fdatasyncs > 0.0, "{}", charged["lanefs"]);
    let least = 64.0 / 1024.0 / 0.5 + fdatasyncs * 500e-6;
    assert!(syncs_s(&charged) >= least - 1e-4, "{} s charged for at least {least} s", syncs_s(&charged));
    assert!(simulated_s(&charged) > simulated_s(&free), "{} vs {}", simulated_s(&charged), simulated_s(&free));
    // Servers on hosts of their own: their costs are what was measured on
    // their own, and the keys change nothing.
    let each = [("storage.commit_syncs", "\"each-object\"")];
    let apart = json_run(EIGHT_FILES, committing_with(&each));
    let apart_costed = json_run(EIGHT_FILES, committing_with(&[each.as_slice(), &costs].concat()));
    assert_eq!(without_wall_time(apart_costed), without_wall_time(apart));
}

#[test]
fn a_commit_point_needs_an_ost_that_syncs_each_object() {
    let settings = [("storage.commit_point_us".to_string(), "100".to_string())];
    let error = lanefs_sim::config::ClusterConfig::load_with("laptop", &settings).unwrap_err().to_string();
    assert!(error.contains("commit_syncs = \"each-object\""), "{error}");
    // Said off, the key stays unused, so that one `--set` turns the
    // mechanism off in a preset that has it.
    let off = [settings[0].clone(), ("storage.commit_syncs".to_string(), "\"journal\"".to_string())];
    assert!(lanefs_sim::config::ClusterConfig::load_with("laptop", &off).is_ok());
}

/// IOR's open time of phase `phase` (0: write, 1: read): the slowest rank's.
fn open_s(j: &Value, phase: usize) -> f64 {
    j["tests"][0]["Results"][phase]["openTime"].as_f64().expect("an open time")
}

#[test]
fn the_metadata_server_takes_creates_and_opens_one_at_a_time() {
    let line = "-a POSIX -w -r -F -b 1m -t 1m -N 8 --tasks-per-node 2";
    let free = json_run(line, opts_with("laptop", &[]));
    let timed =
        json_run(line, opts_with("laptop", &[("storage.mds_create_us", "1000"), ("storage.mds_open_us", "300")]));
    assert!(open_s(&free, 0) < 0.001, "a round trip: {}", open_s(&free, 0));
    // Eight creates, one after the other; then eight opens of what they made.
    assert!(open_s(&timed, 0) >= 0.008, "{}", open_s(&timed, 0));
    assert!((0.0024..0.008).contains(&open_s(&timed, 1)), "{}", open_s(&timed, 1));
}

/// Eight single-rank nodes on one host of two cores, two aggregators,
/// writing then reading; the ranks sleep while they wait (two cores for
/// eight) unless the settings say otherwise.
fn eight_on_one_host(settings: &[(&'static str, &'static str)]) -> Value {
    let line = "-a MPIIO -c -w -r -b 1m -t 1m -s 8 -N 8 --tasks-per-node 1";
    let hints = "striping_factor=2:cray_cb_nodes_multiplier=1:cray_cb_write_lock_mode=0";
    let mut all = vec![
        ("compute.nodes", "8"),
        ("compute.ranks_per_node", "1"),
        ("compute.cores", "2"),
        ("compute.hosts", "\"one\""),
        ("storage.runs_on", "\"compute-node\""),
        ("compute.handoff_us", "50"),
    ];
    all.extend_from_slice(settings);
    json_run(line, with_hints(opts_with("laptop", &all), hints))
}

#[test]
fn a_message_above_the_eager_limit_waits_for_its_sleeping_receiver() {
    let eager = eight_on_one_host(&[]);
    let rendezvous = eight_on_one_host(&[("mpi.rendezvous_bytes", "4096")]);
    // In a read the ranks that are not aggregators sleep while the
    // aggregators read: what the aggregators then send each waits for its
    // receiver's next test.
    assert!(simulated_s(&rendezvous) > simulated_s(&eager), "{} vs {}", simulated_s(&rendezvous), simulated_s(&eager));
    assert_eq!(counter(&rendezvous, "ost_bytes_written"), counter(&eager, "ost_bytes_written"));
    // No message above the limit, or ranks that poll (they test at once):
    // the run is the same as without the key.
    let above = eight_on_one_host(&[("mpi.rendezvous_bytes", "1048576")]);
    assert_eq!(without_wall_time(above), without_wall_time(eager));
    let polling = eight_on_one_host(&[("mpi.wait", "\"busy\"")]);
    let polling_rendezvous = eight_on_one_host(&[("mpi.wait", "\"busy\""), ("mpi.rendezvous_bytes", "4096")]);
    assert_eq!(without_wall_time(polling_rendezvous), without_wall_time(polling));
}

#[test]
fn mpi_messages_between_nodes_of_one_host_are_copies_on_its_cores() {
    // 1 GiB/s of MPI: each rank's 8 MiB but the aggregators' own pieces
    // (2 ranks' of 8) crosses the host as a copy, on its cores, written
    // and read.
    let slow = [("mpi.bandwidth_gib_s", "1")];
    let one_host = eight_on_one_host(&slow);
    let copied = one_host["sim"]["cpu_s"]["mpi"].as_f64().expect("the MPI CPU");
    let crossing = 2.0 * 6.0 * 8.0 / 1024.0;
    assert!(copied >= crossing, "{copied} s of MPI CPU for {crossing} s of copies");
    // Hosts of their own: a wire between them carries the bytes, and the
    // cores pay only each message's cost.
    let line = "-a MPIIO -c -w -r -b 1m -t 1m -s 8 -N 8 --tasks-per-node 1";
    let hints = "striping_factor=2:cray_cb_nodes_multiplier=1:cray_cb_write_lock_mode=0";
    let apart =
        [("compute.nodes", "8"), ("compute.ranks_per_node", "1"), ("compute.cores", "2"), ("mpi.bandwidth_gib_s", "1")];
    let apart = json_run(line, with_hints(opts_with("laptop", &apart), hints));
    let charged = apart["sim"]["cpu_s"]["mpi"].as_f64().expect("the MPI CPU");
    assert!(charged < crossing / 5.0, "{charged} s of MPI CPU on hosts of their own");
}

#[test]
fn a_nodes_writes_to_one_file_go_through_its_mount_one_at_a_time() {
    // Eight ranks of one node through its mount, 10 ms a request: writing
    // one file, each of the 32 writes waits for the one before it (the
    // file's inode lock); writing a file each, or told the mount writes in
    // parallel, they overlap.
    let mount = [("mount.request_us", "10000"), ("mount.request_max_kib", "1024")];
    let run = |line: &str, extra: Option<(&'static str, &'static str)>| {
        let mut settings = mount.to_vec();
        settings.extend(extra);
        json_run(line, opts_with("laptop", &settings))
    };
    let shared = "-a POSIX -w -b 4m -t 1m -N 8 --tasks-per-node 8";
    let parallel = Some(("mount.file_writes", "\"parallel\""));
    let one_at_a_time = run(shared, None);
    assert!(simulated_s(&one_at_a_time) >= 0.32, "{} s for 32 writes of 10 ms each", simulated_s(&one_at_a_time));
    let overlapping = run(shared, parallel);
    assert!(simulated_s(&overlapping) < 0.16, "{} s", simulated_s(&overlapping));
    assert_eq!(counter(&one_at_a_time, "ost_bytes_written"), counter(&overlapping, "ost_bytes_written"));
    // The file's first writer's locks cover the rest: no conflicts among
    // writes that never overlap in time.
    assert_eq!(counter(&one_at_a_time, "blocking_callbacks"), 0);
    let own = "-a POSIX -w -F -b 4m -t 1m -N 8 --tasks-per-node 8";
    assert_eq!(without_wall_time(run(own, None)), without_wall_time(run(own, parallel)), "a file each");
    // Nodes have mounts of their own: two ranks a node, each pair takes
    // turns on its own node's, 16 writes on four nodes at once.
    let apart = run("-a POSIX -w -b 4m -t 1m -N 8 --tasks-per-node 2", None);
    assert!(simulated_s(&apart) < 0.5 * simulated_s(&one_at_a_time), "{} s", simulated_s(&apart));
}

#[test]
fn a_mount_whose_requests_cost_nothing_still_takes_writes_one_at_a_time() {
    // `lanefs calibrate` writes `request_us = 0` where the mount's cost
    // came out below zero: the writes of one file still take its inode in
    // turn, and each gives it back.
    let free = [("mount.request_us", "0"), ("mount.request_max_kib", "1024")];
    let shared = "-a POSIX -w -b 4m -t 1m -N 8 --tasks-per-node 8";
    let one_at_a_time = json_run(shared, opts_with("laptop", &free));
    let parallel = json_run(shared, opts_with("laptop", &[free[0], free[1], ("mount.file_writes", "\"parallel\"")]));
    assert_eq!(counter(&one_at_a_time, "ost_bytes_written"), 32 << 20);
    assert_eq!(counter(&parallel, "ost_bytes_written"), 32 << 20);
}

/// 32 ranks on one node copying at 0.02 GiB/s (0.64 together, a third of
/// the OSTs' bandwidth), into a file each or (at 0.005 GiB/s) into one
/// file over every OST: the copies dominate.
const SLOWER_COPY: (&str, &str) = ("compute.copy_bandwidth_gib_s", "0.02");
const SLOWEST_COPY: (&str, &str) = ("compute.copy_bandwidth_gib_s", "0.005");
const THIRTY_TWO_SHARED: &str = "-a POSIX -w -b 4m -t 1m -N 32 --tasks-per-node 32 --lanefs.stripe-count=4";
const THIRTY_TWO_FPP: &str = "-a POSIX -w -F -b 4m -t 1m -N 32 --tasks-per-node 32";

#[test]
fn a_nodes_writers_of_one_file_beyond_its_lock_go_no_faster() {
    let free = json_run(THIRTY_TWO_SHARED, opts_with("laptop", &[SLOWEST_COPY]));
    let locked = json_run(THIRTY_TWO_SHARED, opts_with("laptop", &[SLOWEST_COPY, ("compute.file_lock_writers", "16")]));
    // 32 copies of 0.8 s each, 16 at once: the copies take 0.8 s more.
    let longer = simulated_s(&locked) - simulated_s(&free);
    assert!((0.7..0.9).contains(&longer), "32 writers of one file through a lock of 16: {longer:.2} s longer");
    assert_eq!(counter(&locked, "ost_bytes_written"), 128 << 20);
    // A file each: the file's lock is no one else's.
    let fpp = json_run(THIRTY_TWO_FPP, opts_with("laptop", &[SLOWER_COPY]));
    let fpp_locked = json_run(THIRTY_TWO_FPP, opts_with("laptop", &[SLOWER_COPY, ("compute.file_lock_writers", "16")]));
    assert_eq!(without_wall_time(fpp), without_wall_time(fpp_locked));
}

#[test]
fn a_nodes_copies_beyond_its_page_cache_lock_go_no_faster() {
    let free = json_run(THIRTY_TWO_FPP, opts_with("laptop", &[SLOWER_COPY]));
    let locked =
        json_run(THIRTY_TWO_FPP, opts_with("laptop", &[SLOWER_COPY, ("compute.page_cache_lock_writers", "8")]));
    // 32 copies, 8 at once: 4 times as long, each process's rate a quarter.
    let ratio = simulated_s(&locked) / simulated_s(&free);
    assert!((3.4..4.6).contains(&ratio), "32 copies through a page cache lock of 8: {ratio:.2} times as long");
    // Below the point, nothing changes.
    let eight = "-a POSIX -w -F -b 4m -t 1m -N 8 --tasks-per-node 8";
    let under = json_run(eight, opts_with("laptop", &[SLOWER_COPY]));
    let under_locked = json_run(
        eight,
        opts_with(
            "laptop",
            &[SLOWER_COPY, ("compute.page_cache_lock_writers", "8"), ("compute.file_lock_writers", "1")],
        ),
    );
    assert_eq!(without_wall_time(under), without_wall_time(under_locked));
}
