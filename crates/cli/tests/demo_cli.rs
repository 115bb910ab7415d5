//! `lanefs demo`: the JSON shape users script against, and the table.

use std::process::Command;

fn lanefs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).output().expect("lanefs runs")
}

#[test]
fn harness_demo_json_has_the_documented_runs_and_fields() {
    let out = lanefs(&["demo", "--json", "--harness"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let runs = v["runs"].as_array().expect("runs[]");
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ssf-default", "ssf-lockahead", "fpp"]);
    for r in runs {
        for field in
            ["lock_enqueues", "blocking_callbacks", "lock_cancels", "write_rpcs", "bytes_written", "bytes_verified"]
        {
            assert!(r[field].is_u64(), "{field} missing in {r}");
        }
        assert_eq!(r["bytes_verified"], r["bytes_written"]);
        assert_eq!(r["bytes_written"], 64 << 20);
    }
    assert!(runs[0]["blocking_callbacks"].as_u64().unwrap() > 0);
    assert_eq!(runs[1]["blocking_callbacks"], 0);
    assert_eq!(runs[2]["blocking_callbacks"], 0);
}

/// On the real embedded cluster: the same fields plus bandwidth, and the
/// same lock-traffic claims (counts vary a little with timing, not these).
#[test]
fn cluster_demo_verifies_every_byte_and_shows_the_false_sharing() {
    let out = lanefs(&["demo", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let runs = v["runs"].as_array().expect("runs[]");
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fpp", "ssf-default", "ssf-noexpand", "ssf-lockahead"]);
    for r in runs {
        assert_eq!(r["bytes_written"], 64 << 20);
        assert_eq!(r["bytes_verified"], r["bytes_written"], "{r}");
        assert!(r["write_bw_mib_s"].as_f64().unwrap() > 0.0);
    }
    assert!(runs[1]["blocking_callbacks"].as_u64().unwrap() > 0, "{}", runs[1]);
    for i in [0, 2, 3] {
        assert_eq!(runs[i]["blocking_callbacks"], 0, "{}", runs[i]);
    }
}

#[test]
fn demo_table_names_each_run() {
    let out = lanefs(&["demo", "--harness"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in ["ssf-default", "ssf-lockahead", "fpp", "callbacks", "bytes verified"] {
        assert!(text.contains(name), "table lacks {name}:\n{text}");
    }
}

#[test]
fn unknown_option_is_a_clear_error() {
    let out = lanefs(&["demo", "--jsn"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--jsn"), "{err}");
}

/// `lanefs ior -h` lists every backend's module options, with no cluster.
#[test]
fn ior_help_lists_the_lanefs_module_options() {
    let out = lanefs(&["ior", "-h"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for option in
        ["--lanefs.lock-mode=V", "--lanefs.max-dirty-mb=V", "--lanefs.max-rpcs-in-flight=V write", "--lanefs.ranks=V"]
    {
        assert!(text.contains(option), "{option} missing from:\n{text}");
    }
}
