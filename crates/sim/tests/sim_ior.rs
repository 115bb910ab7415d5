//! IOR on the simulator, end to end through the IOR front end: determinism,
//! the lock traffic each lock mode must produce, byte accounting, and clear
//! errors for what cannot run.

use lanefs_core::client::ladvise::IoLockMode as LockMode;
use lanefs_ior::{parse_args, run, Api, IorParams};
use lanefs_sim::backend::{SimBackend, SimOptions};
use lanefs_sim::config::ClusterConfig;
use serde_json::Value;

mod common;
use common::{counter, json_run, opts_with, without_wall_time};

fn opts(cluster: &str) -> SimOptions {
    SimOptions::new(ClusterConfig::load(cluster).expect("preset loads"))
}

fn hints(spec: &str) -> Vec<(String, String)> {
    spec.split(':')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("key=value");
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn params(line: &str) -> IorParams {
    let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    parse_args(&args).expect("valid IOR options")
}

fn run_err(line: &str, o: SimOptions) -> String {
    let p = params(line);
    let api = if Api::parse(&p.api) == Some(Api::Mpiio) { Api::Mpiio } else { Api::Posix };
    let backend = SimBackend::new(api, o);
    let mut out = Vec::new();
    run(&p, &backend, &mut out).expect_err("the run must be refused").to_string()
}

fn write_bw(j: &Value) -> f64 {
    j["summary"][0]["bwMeanMIB"].as_f64().expect("a write summary")
}

const COLL: &str = "-a MPIIO -c -w -r -e -b 1m -t 1m -s 8 -N 8";

#[test]
fn same_seed_same_report() {
    let mut o = opts("laptop");
    o.hints = hints("striping_factor=2:cray_cb_nodes_multiplier=2:cray_cb_write_lock_mode=0");
    let a = json_run(COLL, o.clone());
    let b = json_run(COLL, o.clone());
    assert!(a["sim"]["events"].as_u64().unwrap() > 100, "{}", a["sim"]);
    assert_eq!(without_wall_time(a.clone()), without_wall_time(b));
    o.seed = 8;
    let c = json_run(COLL, o);
    assert_eq!(c["sim"]["seed"], 8);
}

#[test]
fn collective_lockahead_has_no_callbacks_and_default_locking_has_them() {
    // 2 stripes, 4 aggregators on 4 nodes: two aggregators of different
    // nodes share each OST object.
    let mut o = opts("laptop");
    o.hints = hints("striping_factor=2:cray_cb_nodes_multiplier=2:cray_cb_write_lock_mode=0");
    let default = json_run(COLL, o.clone());
    assert!(counter(&default, "blocking_callbacks") > 0, "{}", default["lanefs"]);
    assert_eq!(counter(&default, "lockahead_sent"), 0);

    o.hints = hints("striping_factor=2:cray_cb_nodes_multiplier=2:cray_cb_write_lock_mode=2");
    let ahead = json_run(COLL, o);
    assert_eq!(counter(&ahead, "blocking_callbacks"), 0, "{}", ahead["lanefs"]);
    assert_eq!(counter(&ahead, "lockahead_refused"), 0);
    // Exactly the 64 stripes written were locked ahead, one lock each.
    assert_eq!(counter(&ahead, "lockahead_sent"), 64);
    let mib = 1u64 << 20;
    assert_eq!(counter(&ahead, "ost_bytes_written"), 64 * mib);
    let per_ost: Vec<u64> =
        ahead["lanefs"]["ost_bytes_written_per_ost"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let mut sorted = per_ost.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, vec![0, 0, 32 * mib, 32 * mib], "2 stripes, on 2 of the 4 OSTs: {per_ost:?}");
}

#[test]
fn a_collective_write_over_holes_reads_its_stripes_first() {
    // -b 256k -t 128k on 2 ranks: each call writes [0, 128k) and
    // [256k, 384k) of a 1 MiB stripe, a hole between them, so its
    // aggregator reads the range first (read-modify-write), as the real
    // run does. With -t 256k the pieces meet and nothing is read.
    let o = opts("laptop");
    let holes = json_run("-a MPIIO -c -w -b 256k -t 128k -s 4 -N 2", o.clone());
    // 8 calls, each reading its range (what lies below the object's end).
    assert!(counter(&holes, "read_rpcs") >= 8, "{}", holes["lanefs"]);
    assert!(counter(&holes, "ost_bytes_read") > 0, "{}", holes["lanefs"]);
    let whole = json_run("-a MPIIO -c -w -b 256k -t 256k -s 4 -N 2", o);
    assert_eq!(counter(&whole, "ost_bytes_read"), 0, "{}", whole["lanefs"]);
}

#[test]
fn independent_lock_modes() {
    let line = "-a POSIX -w -e -b 4m -t 1m -s 2 -N 8";
    let run_mode = |mode: LockMode| {
        let mut o = opts("laptop");
        o.stripe_count = Some(-1);
        o.lock_mode = Some(mode);
        json_run(line, o)
    };
    let default = run_mode(LockMode::Default);
    assert!(counter(&default, "blocking_callbacks") > 0, "segmented shared file ping-pongs: {}", default["lanefs"]);
    for mode in [LockMode::NoExpand, LockMode::Lockahead, LockMode::Group] {
        let j = run_mode(mode);
        assert_eq!(counter(&j, "blocking_callbacks"), 0, "{mode:?}: {}", j["lanefs"]);
        assert_eq!(counter(&j, "ost_bytes_written"), 64 << 20, "{mode:?}");
    }
    let ahead = run_mode(LockMode::Lockahead);
    assert_eq!(counter(&ahead, "lockahead_sent"), 64, "one lock ahead per transfer");
    // File per process never conflicts.
    let mut o = opts("laptop");
    o.lock_mode = Some(LockMode::Default);
    let fpp = json_run(&format!("{line} -F"), o);
    assert_eq!(counter(&fpp, "blocking_callbacks"), 0);
}

#[test]
fn independent_lockahead_asks_a_window_ahead_so_that_every_write_finds_its_lock() {
    // 600 transfers, their lock-ahead locks asked for a window at a time
    // (a quarter of the client's LRU), whatever ROMIO's collective window
    // says. Asked for all at once, the client's LRU would cancel the
    // oldest unused ones (the first to be written) and then, lock by lock,
    // each next one as a write's own lock pushed it out: nearly every
    // write would enqueue a second lock.
    let line = "-a LANEFS -w -b 2400k -t 4k -s 1 -N 1";
    let run = |lru: &str, window: Option<&str>| {
        let mut o = opts_with("laptop", &[("client.lock_lru_size", lru)]);
        o.lock_mode = Some(LockMode::Lockahead);
        if let Some(n) = window {
            o.hints = hints(&format!("romio_lustre_cb_lock_ahead_num_extents={n}"));
        }
        json_run(line, o)
    };
    for lru in ["550", "4"] {
        let ahead = run(lru, None);
        assert_eq!(counter(&ahead, "lockahead_sent"), 600, "lru {lru}: {}", ahead["lanefs"]);
        assert_eq!(counter(&ahead, "lock_enqueues"), 600, "lru {lru}: every write uses its lock-ahead lock");
        assert_eq!(counter(&ahead, "blocking_callbacks"), 0);
        assert_eq!(counter(&ahead, "lockahead_refused"), 0);
    }
    assert_eq!(
        without_wall_time(run("550", Some("2"))),
        without_wall_time(run("550", None)),
        "the collective window is not used"
    );
}

#[test]
fn reads_come_back_from_the_osts_with_reorder() {
    let mut o = opts("laptop");
    o.stripe_count = Some(-1);
    let j = json_run("-a POSIX -w -r -e -C --tasks-per-node 2 -b 4m -t 1m -s 1 -N 8", o);
    assert_eq!(counter(&j, "ost_bytes_read"), 32 << 20, "-C makes every rank read another node's data");
    assert!(j["summary"].as_array().unwrap().len() == 2);
    assert!(write_bw(&j) > 0.0);
}

#[test]
fn collective_writes_beat_default_locking_with_many_aggregators_per_ost() {
    // 16 nodes of the 24-OST Cray model, 4 stripes, 4 aggregators per OST.
    let line = "-a MPIIO -c -w -e -b 1m -t 1m -s 8 -N 64 --tasks-per-node 4";
    let mut o = opts("cray-xc40-24ost");
    o.hints = hints("striping_factor=4:cray_cb_nodes_multiplier=4:cray_cb_write_lock_mode=0");
    let default = json_run(line, o.clone());
    o.hints = hints("striping_factor=4:cray_cb_nodes_multiplier=4:cray_cb_write_lock_mode=2");
    let ahead = json_run(line, o);
    assert!(counter(&default, "blocking_callbacks") > 0);
    assert!(
        write_bw(&ahead) > write_bw(&default),
        "lockahead {} MiB/s vs default {} MiB/s",
        write_bw(&ahead),
        write_bw(&default)
    );
}

#[test]
fn what_cannot_run_is_refused_clearly() {
    let e = run_err("-a POSIX -w -N 100", opts("laptop"));
    assert!(e.contains("need 50 nodes, but cluster laptop has 4"), "{e}");
    let e = run_err("-a POSIX -w -W -N 2", opts("laptop"));
    assert!(e.contains("moves no data bytes"), "{e}");
    let mut o = opts("laptop");
    o.hints = hints("cb_nodes=two");
    let e = run_err("-a MPIIO -c -w -N 2", o);
    assert!(e.contains("cb_nodes") && e.contains("two"), "{e}");
    let mut o = opts("laptop");
    o.stripe_count = Some(9);
    let e = run_err("-a POSIX -w -N 2", o);
    assert!(e.contains("9 is not between 1 and the cluster's 4 OSTs"), "{e}");
    let mut o = opts("laptop");
    o.lock_mode = Some(LockMode::Lockahead);
    let e = run_err("-a MPIIO -c -w -N 2", o);
    assert!(e.contains("cray_cb_write_lock_mode"), "{e}");
}

#[test]
fn fsync_after_every_write_sends_every_transfer_at_once() {
    let mut o = opts("laptop");
    o.stripe_count = Some(-1);
    let line = "-a POSIX -w -b 4m -t 256k -N 2";
    let synced = json_run(&format!("{line} -Y"), o.clone());
    assert_eq!(counter(&synced, "write_rpcs"), 32, "one RPC per 256 KiB transfer: {}", synced["lanefs"]);
    let buffered = json_run(line, o);
    assert!(counter(&buffered, "write_rpcs") < 32, "{}", buffered["lanefs"]);
    assert!(write_bw(&synced) < write_bw(&buffered));
}

#[test]
fn disk_positioning_time_is_paid_by_one_io_at_a_time_and_hidden_by_many() {
    // One rank, one stripe: 4 transfers of 1 MiB, each synced (one I/O in
    // flight), then 64 MiB written back with 8 RPCs in flight.
    let slow = [("storage.ost_access_latency_us", "20000")];
    let synced = "-a POSIX -w -b 4m -t 1m -N 1 -Y";
    let (fast, paid) = (json_run(synced, opts("laptop")), json_run(synced, opts_with("laptop", &slow)));
    // Each of the 4 writes waits 20 ms: at least 80 ms for 4 MiB.
    assert!(write_bw(&paid) < 4.0 / 0.080, "synced writes pay the latency: {} MiB/s", write_bw(&paid));
    assert!(write_bw(&paid) < write_bw(&fast) / 2.0);
    let streamed = "-a POSIX -w -e -b 64m -t 1m -N 1";
    let (fast, hidden) = (json_run(streamed, opts("laptop")), json_run(streamed, opts_with("laptop", &slow)));
    // 64 MiB at 8 in flight: the 20 ms overlap, about 8 I/Os' worth of
    // latency over the run instead of 64.
    assert!(
        write_bw(&hidden) > 0.6 * write_bw(&fast),
        "RPCs in flight hide the latency: {} vs {} MiB/s",
        write_bw(&hidden),
        write_bw(&fast)
    );
}

#[test]
fn a_write_is_written_back_only_after_its_copy_into_the_page_cache() {
    // One rank, 4 synced transfers of 1 MiB: each copies (10.5 ms at
    // 0.1 GB/s), then its writeback pays the 20 ms positioning time. Pages
    // that could leave before their copy ends would overlap the two.
    let slow = [("storage.ost_access_latency_us", "20000"), ("compute.copy_bandwidth_gib_s", "0.093132")];
    let j = json_run("-a POSIX -w -b 4m -t 1m -N 1 -Y", opts_with("laptop", &slow));
    assert!(write_bw(&j) < 4.0 / (4.0 * 0.0305), "copy and writeback add up: {} MiB/s", write_bw(&j));
}

#[test]
fn client_cpu_per_rpc_delays_every_message_a_node_sends() {
    let line = "-a POSIX -w -b 4m -t 1m -N 1 -Y";
    let free = json_run(line, opts("laptop"));
    // 4 writes and their lock enqueue: each message costs the node 10 ms.
    let costly = json_run(line, opts_with("laptop", &[("compute.client_cpu_per_rpc_us", "10000")]));
    assert!(write_bw(&costly) < 4.0 / 0.040, "{} MiB/s", write_bw(&costly));
    assert!(write_bw(&costly) < write_bw(&free));
}

#[test]
fn round_jitter_delays_each_round_by_its_latest_aggregator() {
    // 4 aggregators (one per OST) write 32 MiB in 8 rounds of one stripe
    // each. A round ends with its latest aggregator: up to 20 ms late, 16 ms
    // on average for the latest of 4, so 8 rounds add 80 to 160 ms.
    let line = "-a MPIIO -c -w -b 1m -t 1m -s 4 -N 8 --tasks-per-node 1";
    let aggs = hints("striping_factor=4:cray_cb_nodes_multiplier=1");
    let in_step = json_run(line, SimOptions { hints: aggs.clone(), ..opts("cray-xc40-24ost") });
    let jitter = [("compute.round_jitter_us", "20000")];
    let out_of_step = json_run(line, SimOptions { hints: aggs, ..opts_with("cray-xc40-24ost", &jitter) });
    let added = out_of_step["sim"]["simulated_s"].as_f64().unwrap() - in_step["sim"]["simulated_s"].as_f64().unwrap();
    assert!((0.080..0.160).contains(&added), "8 rounds of up to 20 ms added {added} s");
    assert_eq!(counter(&out_of_step, "ost_bytes_written"), 32 << 20);
}

#[test]
fn a_handed_over_lock_waits_for_the_journal_commit_of_what_its_holder_wrote() {
    // 2 stripes, 2 aggregators per OST, default locking: every round one
    // aggregator per object calls back the other's lock, whose cancel
    // syncs the object (Lustre's sync_lock_cancel = always). Each commit
    // takes 20 ms, one at a time per OST, so each handover on an object adds
    // at least that much to the run. No -e: an fsync commits too (see the
    // next test).
    let line = "-a MPIIO -c -w -b 1m -t 1m -s 8 -N 8 --tasks-per-node 2";
    let collective =
        |mode: u32| hints(&format!("striping_factor=2:cray_cb_nodes_multiplier=2:cray_cb_write_lock_mode={mode}"));
    let commit = [("storage.journal_commit_us", "20000")];
    let free = json_run(line, SimOptions { hints: collective(0), ..opts("laptop") });
    let paid = json_run(line, SimOptions { hints: collective(0), ..opts_with("laptop", &commit) });
    let callbacks = counter(&paid, "blocking_callbacks");
    assert!(callbacks >= 8, "{}", paid["lanefs"]);
    assert_eq!(callbacks, counter(&free, "blocking_callbacks"), "the same handovers, later");
    assert!(counter(&paid, "lock_cancel_syncs") >= callbacks, "{}", paid["lanefs"]);
    assert!(counter(&paid, "journal_commits") >= callbacks, "each handover wrote since the last commit");
    assert_eq!(counter(&free, "journal_commits"), 0, "no commit time, no journal");
    let added = paid["sim"]["simulated_s"].as_f64().unwrap() - free["sim"]["simulated_s"].as_f64().unwrap();
    // The handovers of the two objects run side by side (a nanosecond's
    // rounding aside).
    let floor = 0.020 * (callbacks / 2) as f64 - 1e-6;
    assert!(added >= floor, "{callbacks} handovers of 20 ms commits added {added} s (at least {floor})");

    // Cancels that do not sync, and lockahead (which cancels nothing it
    // wrote under), do not see the journal at all.
    let never = [("storage.journal_commit_us", "20000"), ("storage.sync_lock_cancel", "never")];
    let unsynced = json_run(line, SimOptions { hints: collective(0), ..opts_with("laptop", &never) });
    assert_eq!(unsynced["sim"]["simulated_s"], free["sim"]["simulated_s"]);
    assert_eq!(counter(&unsynced, "lock_cancel_syncs"), 0);
    let ahead_free = json_run(line, SimOptions { hints: collective(2), ..opts("laptop") });
    let ahead_paid = json_run(line, SimOptions { hints: collective(2), ..opts_with("laptop", &commit) });
    assert_eq!(ahead_paid["sim"]["simulated_s"], ahead_free["sim"]["simulated_s"]);
    assert_eq!(counter(&ahead_paid, "journal_commits"), 0);
}

#[test]
fn fsync_waits_for_the_journal_commit_of_what_was_written() {
    // Lockahead: no lock changes hands, so only IOR's fsync (-e) commits.
    let line = "-a POSIX -w -b 4m -t 1m -N 8";
    let commit = [("storage.journal_commit_us", "20000")];
    let run_with = |extra: &str, settings: &[(&str, &str)]| {
        let o = SimOptions {
            stripe_count: Some(-1),
            lock_mode: Some(LockMode::Lockahead),
            ..opts_with("laptop", settings)
        };
        json_run(&format!("{line}{extra}"), o)
    };
    let (free, paid) = (run_with(" -e", &[]), run_with(" -e", &commit));
    assert_eq!(counter(&paid, "lock_cancel_syncs"), 0, "{}", paid["lanefs"]);
    // Each rank's fsync commits the OSTs its writes changed since the last
    // commit: at least one commit, at most one per rank and OST.
    assert!((1..=32).contains(&counter(&paid, "journal_commits")), "{}", paid["lanefs"]);
    let added = paid["sim"]["simulated_s"].as_f64().unwrap() - free["sim"]["simulated_s"].as_f64().unwrap();
    assert!(added >= 0.020 - 1e-6, "the fsync waited for a 20 ms commit: added {added} s");
    let unsynced = run_with("", &commit);
    assert_eq!(counter(&unsynced, "journal_commits"), 0, "no fsync, no commit: {}", unsynced["lanefs"]);
}

/// A composite (PFL) test file, as `lfs setstripe -E 1m -c 1 -E -1 -c 2`
/// makes one: its first MiB on one OST, the rest on two more, at the
/// offsets the second component's striping gives (units 1, 3, 5, 7 on one
/// object, 2, 4, 6 on the other).
#[test]
fn a_composite_file_puts_each_range_on_its_components_osts() {
    let mut o = opts("laptop");
    o.pfl = lanefs_sim::backend::parse_pfl("1m:1,-1:2").unwrap();
    let j = json_run("-a POSIX -w -b 8m -t 1m -N 1", o.clone());
    let mut written: Vec<u64> = j["lanefs"]["ost_bytes_written_per_ost"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .filter(|&b| b > 0)
        .collect();
    written.sort_unstable();
    assert_eq!(written, [1 << 20, 3 << 20, 4 << 20], "{}", j["lanefs"]);
    o.stripe_count = Some(2);
    assert!(run_err("-a POSIX -w -b 8m -t 1m -N 1", o.clone()).contains("leave out --lanefs.stripe-count"));
    o.stripe_count = None;
    o.pfl = lanefs_sim::backend::parse_pfl("1m:1,2m:2").unwrap();
    assert!(run_err("-a POSIX -w -b 8m -t 1m -N 1", o).contains("the last at EOF"));
    assert!(lanefs_sim::backend::parse_pfl("1m").unwrap_err().contains("give END:COUNT"));
}

/// The lockahead talk's scenario (bench/sim.py (a): 192 nodes x 4 ranks on
/// the 24-OST Cray, 24 stripes, 8 aggregators per OST, 16 segments), with
/// every client's and OST's invariants checked after every input it
/// takes (`--check`; debug builds always check).
#[test]
fn the_seed_scenario_keeps_every_invariant_after_every_event() {
    let line = "-a MPIIO -c -w -e -b 1m -t 1m -s 16 -N 768 --tasks-per-node 4";
    for mode in [0, 2] {
        let mut o = opts("cray-xc40-24ost");
        o.check = true;
        o.hints = hints(&format!("striping_factor=24:cray_cb_nodes_multiplier=8:cray_cb_write_lock_mode={mode}"));
        let report = json_run(line, o);
        assert_eq!(counter(&report, "ost_bytes_written"), (16 * 768) << 20, "mode {mode}");
        let callbacks = counter(&report, "blocking_callbacks");
        assert_eq!(callbacks == 0, mode == 2, "mode {mode}: {callbacks} callbacks");
    }
}
