//! `lanefs calibrate --quick`: the preset it writes loads, names how each
//! measured value was measured, and the simulator runs it.

use std::process::Command;

/// The keys `lanefs calibrate` always measures (the others are lanefs's
/// own settings).
const MEASURED: [&str; 25] = [
    "copy_bandwidth_gib_s",
    "copy_bandwidth_every_core_gib_s",
    "cores",
    "client_cpu_per_rpc_us",
    "client_cpu_per_page_us",
    "client_cpu_per_lock_us",
    "client_cpu_per_call_us",
    "rpc_service_overhead_us",
    "rpc_service_per_page_us",
    "lock_cpu_us",
    "callback_cpu_us",
    "injection_bandwidth_gib_s",
    "network_latency_us",
    "ost_write_bandwidth_gib_s",
    "ost_read_bandwidth_gib_s",
    "oss_network_bandwidth_gib_s",
    "journal_commit_us",
    "commit_point_us",
    "sync_cpu_us",
    "mds_create_us",
    "mds_open_us",
    "rmw_read_bandwidth_gib_s",
    "host_cache_write_gib_s",
    "page_first_touch_us",
    "page_first_map_us",
];

/// The optional sections' measured keys: each section is there, or a
/// comment says why it is left out.
const OPTIONAL: [(&str, &[&str]); 2] = [
    ("mount", &["request_us"]),
    ("mpi", &["latency_us", "bandwidth_gib_s", "message_cpu_us", "test_us", "test_yield_us"]),
];

/// The value of `key` in `lines`, checked to be a number, with its
/// comment block checked to say it was measured.
fn measured_value(lines: &[&str], key: &str, zero_allowed: bool) -> f64 {
    let at = lines.iter().position(|l| l.starts_with(&format!("{key} = "))).unwrap_or_else(|| panic!("no {key}"));
    let value: f64 = lines[at].split(" = ").nth(1).unwrap().parse().unwrap();
    assert!(value.is_finite() && (value > 0.0 || zero_allowed && value == 0.0), "{key} = {value}");
    // Its comment block says it was measured, and how.
    let comment = lines[..at].iter().rev().take_while(|l| l.starts_with('#')).collect::<Vec<_>>();
    assert!(comment.iter().any(|l| l.starts_with("# measured:")), "{key} has no provenance: {comment:?}");
    if value == 0.0 {
        // The reason may wrap across comment lines.
        let text = comment.iter().rev().map(|l| l.trim_start_matches('#').trim()).collect::<Vec<_>>().join(" ");
        assert!(text.contains("below zero"), "{key} = 0 says nothing of why: {comment:?}");
    }
    value
}

/// Checks an optional section: its keys measured, or a comment saying
/// why it is left out. Whether it is there.
fn optional_section(text: &str, lines: &[&str], section: &str, keys: &[&str]) -> bool {
    if lines.contains(&format!("[{section}]").as_str()) {
        for key in keys {
            // A CPU cost may come out as zero, saying so.
            measured_value(lines, key, *key == "request_us");
        }
        return true;
    }
    let why = format!("# [{section}] is left out: not measured, ");
    assert!(text.contains(&why), "neither [{section}] nor why it is left out:\n{text}");
    false
}

#[test]
fn a_quick_calibration_writes_a_preset_the_simulator_runs() {
    let dir = tempfile::tempdir().unwrap();
    let preset = dir.path().join("here.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["calibrate", "--quick", "--osts", "2", "--ranks", "4", "--data"])
        .arg(dir.path())
        .arg("--out")
        .arg(&preset)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let steps = [
        "[1/9] disk",
        "[2/9] memory",
        "[3/9] frames",
        "[4/9] sockets",
        "[5/9] sockets",
        "[6/9] servers",
        "[7/9] metadata",
        "[8/9] mount",
    ];
    // The summary names every measurement's key, or why a step was skipped.
    let summary = [
        "journal_commit_us",
        "commit_point_us",
        "sync_cpu_us",
        "mds_create_us",
        "callback_cpu_us",
        "client_cpu_per_page_us",
        "client_cpu_per_lock_us",
        "[mount] ",
        "[mpi] ",
    ];
    for step in steps.into_iter().chain(["[9/9] mpi"]).chain(summary) {
        assert!(stderr.contains(step), "no {step:?} in the progress and summary: {stderr}");
    }
    let text = std::fs::read_to_string(&preset).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for key in MEASURED {
        // A CPU cost may come out as zero, saying so.
        measured_value(&lines, key, key.ends_with("_us"));
    }
    // A hand-off's cost is measured, or a comment says why it is left out.
    for key in ["handoff_us", "handoff_idle_core_us", "handoff_other_busy_core_us"] {
        if !text.contains(&format!("# {key} is left out: ")) {
            measured_value(&lines, key, false);
        }
    }
    // Read from the kernel's settings, not measured, and saying so.
    let at =
        lines.iter().position(|l| l.starts_with("host_cache_background_mib = ")).expect("the background threshold");
    assert!(lines[at - 2].starts_with("# read: "), "{}", lines[at - 2]);
    let present: Vec<bool> =
        OPTIONAL.iter().map(|(section, keys)| optional_section(&text, &lines, section, keys)).collect();
    let config = lanefs_sim::config::ClusterConfig::load(preset.to_str().unwrap()).expect("the preset loads");
    assert_eq!((config.compute.nodes, config.compute.ranks_per_node), (4, 1), "a node a rank");
    assert_eq!(config.storage.osts_per_oss, 2);
    assert_eq!(
        config.storage.ost_disks,
        Some(lanefs_sim::config::OstDisks::Shared),
        "the OSTs' directories share a disk"
    );
    assert_eq!(config.storage.runs_on, Some(lanefs_sim::config::RunsOn::ComputeNode));
    assert!(config.compute.cores.is_some_and(|n| n >= 1));
    assert_eq!(config.compute.hosts, Some(lanefs_sim::config::Hosts::One));
    assert!(config.storage.host_cache_background_mib.is_some());
    assert_eq!(config.mount.request_us.is_some(), present[0]);
    assert_eq!(config.mpi.message_cpu_us.is_some(), present[1]);
    if present[0] {
        assert_eq!(config.mount.request_max_kib, Some(1024), "lanefs's mount asks for 1 MiB requests");
    }
    // The eager limit is read from ompi_info, saying so, or a comment says why not.
    if present[1] && !text.contains("# rendezvous_bytes is left out: ") {
        let at = lines.iter().position(|l| l.starts_with("rendezvous_bytes = ")).expect("the eager limit");
        assert!(lines[at - 2].starts_with("# read: "), "{}", lines[at - 2]);
        assert!(config.mpi.rendezvous_bytes.is_some_and(|b| b > 0));
    }
    // No file is left in the data directory but the preset.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("here.toml")]);
    let run = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["sim", "ior", "--cluster"])
        .arg(&preset)
        .args(["-a", "POSIX", "-w", "-r", "-b", "4m", "-t", "1m", "-N", "4", "--lanefs.stripe-count=2"])
        .args(["-O", "summaryFormat=JSON"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let write = json["summary"].as_array().unwrap().iter().find(|s| s["operation"] == "write").unwrap();
    assert!(write["bwMeanMIB"].as_f64().unwrap() > 0.0);
}
