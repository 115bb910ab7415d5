//! What the simulator's test files share.

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
