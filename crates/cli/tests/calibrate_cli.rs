//! `lanefs calibrate --quick`: the preset it writes loads, names how each
//! measured value was measured, and the simulator runs it.

use std::process::Command;

/// The keys `lanefs calibrate` measures (the others keep assumptions).
const MEASURED: [&str; 8] = [
    "copy_bandwidth_gib_s",
    "injection_bandwidth_gib_s",
    "network_latency_us",
    "ost_write_bandwidth_gib_s",
    "ost_read_bandwidth_gib_s",
    "oss_network_bandwidth_gib_s",
    "journal_commit_us",
    "rmw_read_bandwidth_gib_s",
];

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
    for step in ["[1/4] disk", "[2/4] memory", "[3/4] sockets", "[4/4] sockets", "journal_commit_us"] {
        assert!(stderr.contains(step), "no {step:?} in the progress and summary: {stderr}");
    }
    let text = std::fs::read_to_string(&preset).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for key in MEASURED {
        let at = lines.iter().position(|l| l.starts_with(&format!("{key} = "))).unwrap_or_else(|| panic!("no {key}"));
        let value: f64 = lines[at].split(" = ").nth(1).unwrap().parse().unwrap();
        assert!(value > 0.0 && value.is_finite(), "{key} = {value}");
        // Its comment block says it was measured, and how.
        let comment = lines[..at].iter().rev().take_while(|l| l.starts_with('#')).collect::<Vec<_>>();
        assert!(comment.iter().any(|l| l.starts_with("# measured:")), "{key} has no provenance: {comment:?}");
    }
    let config = lanefs_sim::config::ClusterConfig::load(preset.to_str().unwrap()).expect("the preset loads");
    assert_eq!((config.compute.nodes, config.compute.ranks_per_node), (1, 4));
    assert_eq!(config.storage.osts_per_oss, 2);
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
