//! What the simulator's test files share.

use lanefs_core::client::ladvise::IoLockMode as LockMode;
use lanefs_ior::{parse_args, run, Api};
use lanefs_sim::backend::{SimBackend, SimOptions};
use lanefs_sim::config::ClusterConfig;
use serde_json::Value;

/// Everything but wall-clock fields.
pub fn without_wall_time(mut j: Value) -> Value {
    let top = j.as_object_mut().expect("object");
    for key in ["Began", "Finished"] {
        top.remove(key);
    }
    let sim = top.get_mut("sim").and_then(Value::as_object_mut).expect("a sim object");
    sim.remove("wall_s");
    sim.remove("events_per_s");
    for test in top.get_mut("tests").and_then(Value::as_array_mut).expect("tests") {
        let t = test.as_object_mut().expect("test object");
        t.remove("StartTime");
        t.remove("Finished");
    }
    j
}

/// A run on `cluster` with `settings` (`section.key`, value) replaced.
pub fn opts_with(cluster: &str, settings: &[(&str, &str)]) -> SimOptions {
    let settings: Vec<(String, String)> = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    SimOptions::new(ClusterConfig::load_with(cluster, &settings).expect("settings apply"))
}

/// Runs `line` and returns IOR's JSON report; the line's
/// `--lanefs.lock-mode`, as `lanefs sim ior` takes it, unless `o` has one.
pub fn json_run(line: &str, mut o: SimOptions) -> Value {
    let args: Vec<String> = format!("{line} -O summaryFormat=JSON").split_whitespace().map(str::to_string).collect();
    let p = parse_args(&args).expect("valid IOR options");
    if let (None, Some(mode)) = (o.lock_mode, p.module_value("lanefs.lock-mode")) {
        o.lock_mode = Some(LockMode::parse(mode).expect("a lock mode"));
    }
    let api = Api::parse(&p.api).expect("a known API");
    let backend = SimBackend::new(api, o);
    let mut out = Vec::new();
    run(&p, &backend, &mut out).expect("the simulated run succeeds");
    serde_json::from_slice(&out).expect("IOR JSON")
}

/// A counter of the report's `"lanefs"` object.
pub fn counter(j: &Value, key: &str) -> u64 {
    j["lanefs"][key].as_u64().unwrap_or_else(|| panic!("lanefs.{key} in {}", j["lanefs"]))
}
