//! A client's counters read back from its parameters, as `lctl get_param`
//! prints them (lanefs-net's `params::client` builds them,
//! `params::format` writes the statistics files): what [`PATTERNS`] find,
//! summed over the client's OSCs into one [`ClientSample`] per instance.
//!
//! - `osc.lanefs-OSTNNNN-osc-INSTANCE.stats`: `write_bytes` and
//!   `read_bytes` lines (`NAME COUNT samples [bytes] MIN MAX SUM`), of
//!   which the sum is the bytes moved;
//! - `ldlm.namespaces.lanefs-OSTNNNN-osc-INSTANCE.lock_count`: locks held;
//! - `ldlm.namespaces.lanefs-OSTNNNN-osc-INSTANCE.stats`: `ldlm_enqueue`
//!   and `ldlm_bl_callback` lines, of which the count is the events.
//!
//! A statistics file leaves out a counter at zero, as Lustre's does, so an
//! absent line is zero. A line that does not parse is an error naming the
//! parameter: the two sides are built together, and a silent zero would
//! hide a format that drifted.

use crate::sample::{ClientSample, INSTANCE_BYTES_MAX};
use lanefs_net::params::Node;
use std::collections::BTreeMap;

/// What one client is asked for.
pub const PATTERNS: [&str; 3] = ["osc.*.stats", "ldlm.namespaces.*.lock_count", "ldlm.namespaces.*.stats"];

/// The clients found in `nodes`, by instance. Nodes of other parameters
/// (none are asked for) are ignored.
pub fn clients(nodes: &[Node]) -> Result<Vec<ClientSample>, String> {
    let mut by_instance: BTreeMap<String, ClientSample> = BTreeMap::new();
    for node in nodes {
        let Some(value) = &node.value else { continue };
        let Some((kind, device, file)) = split(&node.name) else { continue };
        let Some(instance) = instance(device) else { continue };
        let client = by_instance
            .entry(instance.to_string())
            .or_insert_with(|| ClientSample { instance: instance.to_string(), ..Default::default() });
        let problem = |e: String| format!("{}: {e}", node.name);
        match (kind, file) {
            (Kind::Osc, "stats") => {
                let stats = stats_lines(value).map_err(problem)?;
                client.bytes_written += stats.get("write_bytes").map_or(0, |l| l.sum);
                client.bytes_read += stats.get("read_bytes").map_or(0, |l| l.sum);
            }
            (Kind::Namespace, "lock_count") => {
                let count: u64 = value.trim().parse().map_err(|e| problem(format!("{value:?} is no count: {e}")))?;
                client.locks_held += count;
            }
            (Kind::Namespace, "stats") => {
                let stats = stats_lines(value).map_err(problem)?;
                client.enqueues += stats.get("ldlm_enqueue").map_or(0, |l| l.count);
                client.blocking_callbacks += stats.get("ldlm_bl_callback").map_or(0, |l| l.count);
            }
            _ => {}
        }
    }
    Ok(by_instance.into_values().collect())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Osc,
    Namespace,
}

/// `osc.DEVICE.FILE` or `ldlm.namespaces.DEVICE.FILE`.
fn split(name: &str) -> Option<(Kind, &str, &str)> {
    let (kind, rest) = if let Some(rest) = name.strip_prefix("osc.") {
        (Kind::Osc, rest)
    } else {
        (Kind::Namespace, name.strip_prefix("ldlm.namespaces.")?)
    };
    let (device, file) = rest.rsplit_once('.')?;
    Some((kind, device, file))
}

/// The instance of a client OSC device (`lanefs-OST0000-osc-INSTANCE`);
/// `None` for a server's namespace or a name of another shape.
fn instance(device: &str) -> Option<&str> {
    let (_, instance) = device.rsplit_once("-osc-")?;
    (!instance.is_empty() && instance.len() <= INSTANCE_BYTES_MAX).then_some(instance)
}

/// One counter line of a statistics file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct StatsLine {
    count: u64,
    /// The values' sum; 0 for a counter of events.
    sum: u64,
}

/// The counter lines of a statistics file by name (the header's
/// `snapshot_time`, `start_time` and `elapsed_time` are skipped).
fn stats_lines(text: &str) -> Result<BTreeMap<&str, StatsLine>, String> {
    let mut lines = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [] => {}
            [name, ..] if name.ends_with("_time") || name.ends_with("_time:") => {}
            [name, count, "samples", units, rest @ ..] if units.starts_with('[') => {
                let number = |s: &str| s.parse::<u64>().map_err(|e| format!("{line:?}: {s:?} is no count: {e}"));
                let sum = match rest {
                    [] => 0,
                    [_min, _max, sum] => number(sum)?,
                    _ => return Err(format!("{line:?}: neither events nor MIN MAX SUM after the units")),
                };
                lines.insert(*name, StatsLine { count: number(count)?, sum });
            }
            _ => return Err(format!("{line:?}: not a statistics line (NAME COUNT samples [UNITS] ...)")),
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, value: &str) -> Node {
        Node { name: name.into(), value: Some(value.into()) }
    }

    const OSC_STATS: &str = "snapshot_time                       1700000000.000000000 secs.nsecs\n\
        start_time                          1699999990.000000000 secs.nsecs\n\
        elapsed_time                        10.000000000 secs.nsecs\n\
        read_bytes                          1 samples [bytes] 4096 4096 4096\n\
        write_bytes                         3 samples [bytes] 1048576 1048576 3145728\n\
        ost_write                           3 samples [reqs]";

    #[test]
    fn a_clients_oscs_are_summed_into_one_row() {
        let nodes = [
            node("osc.lanefs-OST0000-osc-ffff000000000001.stats", OSC_STATS),
            node("osc.lanefs-OST0001-osc-ffff000000000001.stats", OSC_STATS),
            node("osc.lanefs-OST0000-osc-ffff000000000002.stats", "snapshot_time 1.0 secs.nsecs"),
            node("ldlm.namespaces.lanefs-OST0000-osc-ffff000000000001.lock_count", "2"),
            node("ldlm.namespaces.lanefs-OST0001-osc-ffff000000000001.lock_count", "5"),
            node(
                "ldlm.namespaces.lanefs-OST0000-osc-ffff000000000001.stats",
                "snapshot_time 1.0 secs.nsecs\nldlm_enqueue 7 samples [reqs]\nldlm_bl_callback 2 samples [reqs]",
            ),
            node("ldlm.namespaces.filter-lanefs-OST0000_UUID.lock_count", "99"),
        ];
        let clients = clients(&nodes).unwrap();
        assert_eq!(clients.len(), 2);
        let one = &clients[0];
        assert_eq!(one.instance, "ffff000000000001");
        assert_eq!((one.bytes_written, one.bytes_read), (2 * 3145728, 2 * 4096));
        assert_eq!((one.locks_held, one.enqueues, one.blocking_callbacks), (7, 7, 2));
        assert_eq!(clients[1], ClientSample { instance: "ffff000000000002".into(), ..Default::default() });
    }

    #[test]
    fn a_line_that_does_not_parse_names_its_parameter() {
        let nodes = [node("osc.lanefs-OST0000-osc-ffff000000000001.stats", "write_bytes lots")];
        let e = clients(&nodes).unwrap_err();
        assert!(e.starts_with("osc.lanefs-OST0000-osc-ffff000000000001.stats: "), "{e}");
        let nodes = [node("ldlm.namespaces.lanefs-OST0000-osc-ffff000000000001.lock_count", "x")];
        assert!(clients(&nodes).unwrap_err().contains("is no count"));
    }
}
