//! A client's parameters: its OSCs (one per OST of the file system), its
//! ldlm namespaces (one per OSC) and its mount (`llite`), named as Lustre
//! names a client's devices: `osc.lanefs-OST0000-osc-<instance>`,
//! `ldlm.namespaces.lanefs-OST0000-osc-<instance>`, `llite.lanefs-<instance>`,
//! where the instance (`ffff` and 12 hex digits of the client's uuid)
//! stands for the superblock address Lustre uses.
//!
//! Where lanefs departs from Lustre: a client has one dirty limit, one
//! RPC limit and one lock LRU for all its OSTs (the core's
//! `ClientConfig`), so setting an OSC's or a namespace's value sets every
//! OSC's or namespace's of that client; `lru_size=0` (Lustre's dynamic
//! LRU) is refused; writing anything to a statistics file clears all of
//! the client's statistics, not that file's only.

use super::format::{rpc_stats, stats_file, Counter, RpcStats};
use super::{could_reach, matches, Selection, Tree};
use lanefs_core::client::osc_stats::OscStats;
use lanefs_core::client::{Client as CoreClient, Tunable};
use lanefs_core::{Instant, OstIndex, PAGE_SIZE};
use serde::{Deserialize, Serialize};
use std::time::SystemTime;

/// The file system's name in device names.
pub const FSNAME: &str = "lanefs";
/// `OSC_MAX_DIRTY_MB_MAX`.
pub const DIRTY_MB_MAX: u64 = 2048;
/// `OSC_MAX_RIF_MAX`.
pub const RPCS_IN_FLIGHT_MAX: u64 = 256;
/// Largest `max_cached_mb` taken (1 TiB).
pub const CACHED_MB_MAX: u64 = 1 << 20;
/// Largest `lru_size` taken.
pub const LRU_SIZE_MAX: u64 = 1 << 20;
/// Longest `lru_max_age` taken, in ms (a day).
pub const LRU_MAX_AGE_MS_MAX: u64 = 86_400_000;

/// The instance part of a client's device names.
pub fn instance(uuid: u64) -> String {
    format!("ffff{:012x}", uuid & 0xffff_ffff_ffff)
}

pub fn osc_name(ost: u32, instance: &str) -> String {
    format!("{FSNAME}-OST{ost:04x}-osc-{instance}")
}

pub fn llite_name(instance: &str) -> String {
    format!("{FSNAME}-{instance}")
}

/// What a client shows besides its core: who it is and since when.
pub struct ClientView<'a> {
    pub core: &'a CoreClient,
    pub instance: &'a str,
    pub ost_count: u32,
    /// When the statistics were last cleared (or the client started).
    pub stats_start: SystemTime,
    pub now: SystemTime,
    /// Its requests to the MDS.
    pub mdc: &'a super::mdc::MdcStats,
    /// Where each OST is served (`(index, OSS address)`), as the MDS said.
    pub ost_addresses: &'a [(u32, String)],
}

/// The client's parameters `selection` could find (the directories no
/// pattern reaches are left out, see [`could_reach`]).
pub fn tree(v: &ClientView, selection: &Selection) -> Tree {
    let mut tree = Tree::default();
    let empty = OscStats::default();
    for ost in 0..v.ost_count {
        let index = OstIndex(ost);
        let osc = osc_name(ost, v.instance);
        let s = v.core.stats().osc.get(&index).unwrap_or(&empty);
        let dir = format!("osc.{osc}");
        if could_reach(selection, &dir) {
            osc_files(&mut tree, v, index, &dir, s);
            tree.insert(format!("{dir}.import"), import_file(v, index, &osc));
        }
        let namespace = format!("ldlm.namespaces.{osc}");
        if could_reach(selection, &namespace) {
            namespace_files(&mut tree, v, index, &namespace, s);
        }
    }
    let llite = format!("llite.{}", llite_name(v.instance));
    if could_reach(selection, &llite) {
        llite_files(&mut tree, v, &llite);
    }
    let mdc = format!("mdc.{}", mdc_name(v.instance));
    if could_reach(selection, &mdc) {
        tree.insert(format!("{mdc}.stats"), stats_file(v.now, Some(v.stats_start), &v.mdc.counters()));
    }
    tree
}

pub fn mdc_name(instance: &str) -> String {
    format!("{FSNAME}-MDT0000-mdc-{instance}")
}

/// `osc.*.import` as Lustre's `ptlrpc_import_show` writes it (YAML), with
/// what lanefs knows: the session's state in Lustre's names, the OSS's
/// address, the RPCs in flight; connect flags, NIDs and time estimates,
/// which lanefs does not have, are left out.
fn import_file(v: &ClientView, index: OstIndex, osc: &str) -> String {
    use lanefs_core::client::imports::ImportState;
    let import = v.core.import(index);
    let state = match import.state {
        ImportState::New => "NEW",
        ImportState::Connecting { resume: false } => "CONNECTING",
        ImportState::Connecting { resume: true } => "REPLAY",
        ImportState::Connected => "FULL",
        ImportState::Disconnected => "DISCONN",
        ImportState::Leaving => "CLOSED",
    };
    let address = v.ost_addresses.iter().find(|(ost, _)| *ost == index.0).map_or("none", |(_, a)| a.as_str());
    let (reads, writes) = v.core.rpcs_in_flight(index);
    let epoch = import.epoch.map_or(0, |e| e.0);
    format!(
        "import:\n    name: {osc}\n    target: {FSNAME}-OST{:04x}_UUID\n    state: {state}\n    \
         connection:\n       current_connection: {address}\n       generation: {epoch}\n    \
         rpcs:\n       inflight: {}",
        index.0,
        reads + writes
    )
}

/// An OSC's files, under `dir`.
fn osc_files(tree: &mut Tree, v: &ClientView, index: OstIndex, dir: &str, s: &OscStats) {
    let (core, config) = (v.core, v.core.config());
    let o = |file: &str| format!("{dir}.{file}");
    tree.insert(o("max_dirty_mb"), (config.dirty_bytes_max >> 20).to_string());
    tree.insert(o("max_rpcs_in_flight"), config.rpcs_in_flight_max.to_string());
    tree.insert(o("max_pages_per_rpc"), (config.rpc_bytes_max / PAGE_SIZE).to_string());
    let dirty = core.cache().dirty_bytes_ost(index);
    tree.insert(o("cur_dirty_bytes"), dirty.to_string());
    let (reads, writes) = core.rpcs_in_flight(index);
    let r = RpcStats {
        read_in_flight_now: reads as u64,
        write_in_flight_now: writes as u64,
        pending_write_pages: dirty.div_ceil(PAGE_SIZE),
        stats: s,
    };
    tree.insert(o("rpc_stats"), rpc_stats(v.now, v.stats_start, &r));
    // Lustre's osc stats time each RPC ([usecs]); lanefs counts them
    // ([reqs]) and keeps the sizes of reads and writes.
    let counters = [
        Counter::Values { name: "read_bytes", units: "bytes", samples: s.read_bytes },
        Counter::Values { name: "write_bytes", units: "bytes", samples: s.write_bytes },
        Counter::Events { name: "ost_read", units: "reqs", count: s.read_bytes.count },
        Counter::Events { name: "ost_write", units: "reqs", count: s.write_bytes.count },
        Counter::Events { name: "ost_punch", units: "reqs", count: s.punches },
        Counter::Events { name: "ost_sync", units: "reqs", count: s.syncs },
        Counter::Events { name: "ost_getattr", units: "reqs", count: s.getattrs },
        Counter::Events { name: "ldlm_enqueue", units: "reqs", count: s.enqueues },
        Counter::Events { name: "ldlm_cancel", units: "reqs", count: s.cancels },
    ];
    tree.insert(o("stats"), stats_file(v.now, Some(v.stats_start), &counters));
}

/// An OSC's lock namespace's files, under `dir`.
fn namespace_files(tree: &mut Tree, v: &ClientView, index: OstIndex, dir: &str, s: &OscStats) {
    let config = v.core.config();
    let n = |file: &str| format!("{dir}.{file}");
    let (mut count, mut unused, mut granted) = (0u64, 0u64, 0u64);
    for (_, lock) in v.core.lock_cache().iter().filter(|(_, l)| l.key.ost == index) {
        count += 1;
        granted += u64::from(lock.is_granted());
        unused += u64::from(lock.is_granted() && lock.users == 0);
    }
    tree.insert(n("lock_count"), count.to_string());
    tree.insert(n("lock_unused_count"), unused.to_string());
    tree.insert(n("lru_size"), config.lru_locks_max.to_string());
    tree.insert(n("lru_max_age"), (config.lru_age_max.as_ns() / 1_000_000).to_string());
    // Of Lustre's pool files, only `granted` is known to a client without
    // lock-volume accounting (limit, rates, lock volume: omitted).
    tree.insert(n("pool.granted"), granted.to_string());
    let counters = [
        Counter::Events { name: "ldlm_enqueue", units: "reqs", count: s.enqueues },
        Counter::Events { name: "ldlm_cancel", units: "reqs", count: s.cancels },
        Counter::Events { name: "ldlm_bl_callback", units: "reqs", count: s.blocking_callbacks },
    ];
    tree.insert(n("stats"), stats_file(v.now, Some(v.stats_start), &counters));
}

/// The mount's files, under `dir`.
fn llite_files(tree: &mut Tree, v: &ClientView, dir: &str) {
    let (core, config, stats, start) = (v.core, v.core.config(), v.core.stats(), Some(v.stats_start));
    let l = |file: &str| format!("{dir}.{file}");
    let cached_mb = (core.cache().cached_pages() as u64 * PAGE_SIZE) >> 20;
    let max_mb = config.cached_bytes_max >> 20;
    // Lustre's file also shows `reclaim_count`, which lanefs does not keep.
    tree.insert(
        l("max_cached_mb"),
        format!(
            "users: {}\nmax_cached_mb: {max_mb}\nused_mb: {cached_mb}\nunused_mb: {}",
            v.ost_count,
            max_mb.saturating_sub(cached_mb)
        ),
    );
    let ll = &stats.llite;
    let counters = [
        Counter::Values { name: "read_bytes", units: "bytes", samples: ll.read_bytes },
        Counter::Values { name: "write_bytes", units: "bytes", samples: ll.write_bytes },
        Counter::Events { name: "open", units: "reqs", count: ll.opens },
        Counter::Events { name: "close", units: "reqs", count: ll.closes },
        Counter::Events { name: "fsync", units: "reqs", count: ll.fsyncs },
        Counter::Events { name: "getattr", units: "reqs", count: ll.getattrs },
        Counter::Events { name: "truncate", units: "reqs", count: ll.truncates },
        Counter::Events { name: "fallocate", units: "reqs", count: ll.fallocates },
        Counter::Events { name: "lockahead", units: "reqs", count: ll.lockaheads },
    ];
    tree.insert(l("stats"), stats_file(v.now, start, &counters));
}

/// What a `set_param` did to one parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetOutcome {
    pub name: String,
    /// `Err`: why the value was refused.
    pub result: Result<(), String>,
}

/// What writing a value to a client parameter does.
enum Write {
    Tunable(Tunable),
    /// `lru_size=clear`: cancel every unused lock.
    ClearLru,
    ClearStats,
}

/// Set every writable parameter of the client that `pattern` matches to
/// `value`. Returns an outcome per matched parameter (none: nothing
/// writable matched) and whether the statistics were cleared.
pub fn set(core: &mut CoreClient, now: Instant, v: (&str, u32), pattern: &str, value: &str) -> (Vec<SetOutcome>, bool) {
    let (instance, ost_count) = v;
    let mut names: Vec<String> = Vec::new();
    for ost in 0..ost_count {
        let osc = osc_name(ost, instance);
        for file in ["max_dirty_mb", "max_rpcs_in_flight", "max_pages_per_rpc", "rpc_stats", "stats"] {
            names.push(format!("osc.{osc}.{file}"));
        }
        for file in ["lru_size", "lru_max_age", "stats"] {
            names.push(format!("ldlm.namespaces.{osc}.{file}"));
        }
    }
    let llite = llite_name(instance);
    names.push(format!("llite.{llite}.max_cached_mb"));
    names.push(format!("llite.{llite}.stats"));
    names.push(format!("mdc.{}.stats", mdc_name(instance)));
    let mut outcomes = Vec::new();
    let mut cleared = false;
    for name in names.into_iter().filter(|name| matches(pattern, name)) {
        let file = name.rsplit('.').next().unwrap_or_default();
        let result = parse(file, value, core.config().rpc_bytes_max).and_then(|write| match write {
            Write::Tunable(t) => core.set_tunable(now, t).map_err(|e| e.to_string()),
            Write::ClearLru => {
                let size = core.config().lru_locks_max;
                core.set_tunable(now, Tunable::LruLocksMax(0))
                    .and_then(|()| core.set_tunable(now, Tunable::LruLocksMax(size)))
                    .map_err(|e| e.to_string())
            }
            Write::ClearStats => {
                core.reset_stats(now);
                cleared = true;
                Ok(())
            }
        });
        outcomes.push(SetOutcome { result: result.map_err(|e| format!("{name}={value}: {e}")), name });
    }
    (outcomes, cleared)
}

/// Whether a client of `ost_count` OSTs would take `pattern=value`: it
/// names one of its writable parameters, with a value each accepts (what
/// the MDS checks before it keeps a setting for clients to come).
pub fn check(pattern: &str, value: &str, ost_count: u32) -> Result<(), String> {
    let config = lanefs_core::client::ClientConfig { recovery: true, ..Default::default() };
    let mut core = CoreClient::new(lanefs_core::ClientId(0), config).map_err(|e| e.to_string())?;
    let (outcomes, _) = set(&mut core, Instant::ZERO, (&instance(0), ost_count), pattern, value);
    if outcomes.is_empty() {
        return Err(format!("{pattern}: names no client parameter a client could set"));
    }
    outcomes.into_iter().try_for_each(|o| o.result)
}

/// Apply the settings the MDS keeps (`set_param -P`) to a client that
/// starts; what it does not take is logged, not fatal.
pub fn apply_kept(core: &mut CoreClient, now: Instant, who: (&str, u32), kept: &[(String, String)]) {
    for (pattern, value) in kept {
        for outcome in set(core, now, who, pattern, value).0 {
            if let Err(e) = outcome.result {
                tracing::warn!("a kept setting is not taken: {e}");
            }
        }
    }
}

/// A whole number in `range`, or the error naming it.
fn number(value: &str, lo: u64, hi: u64, unit: &str) -> Result<u64, String> {
    match value.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("{value:?} is not a whole number of {unit} from {lo} to {hi}")),
    }
}

fn parse(file: &str, value: &str, rpc_bytes: u64) -> Result<Write, String> {
    let rpc_mb = rpc_bytes.div_ceil(1 << 20);
    Ok(match file {
        "max_dirty_mb" => {
            let mb = number(value, 1, DIRTY_MB_MAX, "MiB")?;
            if mb < rpc_mb {
                return Err(format!("{mb} MiB is below one RPC ({rpc_bytes} bytes); give {rpc_mb} to {DIRTY_MB_MAX}"));
            }
            Write::Tunable(Tunable::DirtyBytesMax(mb << 20))
        }
        "max_rpcs_in_flight" => {
            Write::Tunable(Tunable::RpcsInFlightMax(number(value, 1, RPCS_IN_FLIGHT_MAX, "RPCs")? as usize))
        }
        "max_pages_per_rpc" => {
            let pages_max = lanefs_core::ost::RPC_BYTES_MAX / PAGE_SIZE;
            Write::Tunable(Tunable::RpcBytesMax(number(value, 1, pages_max, "pages")? * PAGE_SIZE))
        }
        "max_cached_mb" => Write::Tunable(Tunable::CachedBytesMax(number(value, 0, CACHED_MB_MAX, "MiB")? << 20)),
        "lru_size" if value.trim().starts_with("clear") => Write::ClearLru,
        "lru_size" => {
            if value.trim() == "0" {
                return Err("0 (Lustre's dynamic LRU) is not in lanefs: give a number of locks from 1 to \
                            1048576, or clear"
                    .into());
            }
            Write::Tunable(Tunable::LruLocksMax(number(value, 1, LRU_SIZE_MAX, "locks")? as usize))
        }
        "lru_max_age" => {
            // As Lustre: milliseconds, or seconds with an `s` suffix.
            let v = value.trim();
            let (digits, scale) = match v.strip_suffix("ms") {
                Some(ms) => (ms, 1),
                None => v.strip_suffix('s').map_or((v, 1), |s| (s, 1000)),
            };
            let ms = number(digits, 1, LRU_MAX_AGE_MS_MAX / scale, if scale == 1 { "ms" } else { "s" })? * scale;
            Write::Tunable(Tunable::LruAgeMax(lanefs_core::Duration::from_ms(ms)))
        }
        "rpc_stats" | "stats" => Write::ClearStats,
        _ => return Err("not writable".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_core::client::ClientConfig;

    #[test]
    fn set_changes_the_core_and_refuses_bad_values() {
        let mut core = CoreClient::new(lanefs_core::ClientId(1), ClientConfig::default()).unwrap();
        let who = ("ffff000000000001", 2);
        let (out, _) = set(&mut core, Instant(1), who, "osc.*.max_rpcs_in_flight", "3");
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out.iter().all(|o| o.result.is_ok()));
        assert_eq!(core.config().rpcs_in_flight_max, 3);
        let (out, _) = set(&mut core, Instant(1), who, "osc.*OST0000*.max_rpcs_in_flight", "999");
        let error = out[0].result.clone().unwrap_err();
        assert!(
            error.contains("max_rpcs_in_flight=999") && error.contains("from 1 to 256"),
            "names the parameter, the value and the range: {error}"
        );
        let (out, _) = set(&mut core, Instant(1), who, "ldlm.namespaces.*OST0001*.lru_max_age", "30s");
        assert!(out[0].result.is_ok());
        assert_eq!(core.config().lru_age_max, lanefs_core::Duration::from_secs(30));
        let (out, _) = set(&mut core, Instant(1), who, "llite.*.max_cached_mb", "8");
        assert!(out[0].result.is_ok());
        let (out, cleared) = set(&mut core, Instant(1), who, "osc.*OST0000*.rpc_stats", "0");
        assert!(cleared && out.len() == 1);
        assert!(set(&mut core, Instant(1), who, "osc.*.cur_dirty_bytes", "1").0.is_empty(), "read-only");
        core.check_invariants();
        let v = ClientView {
            core: &core,
            instance: who.0,
            ost_count: 2,
            stats_start: SystemTime::now(),
            now: SystemTime::now(),
            mdc: &super::super::mdc::MdcStats { reint: 2, ..Default::default() },
            ost_addresses: &[(1, "unix:/x/oss.sock".to_string())],
        };
        let all = Selection { patterns: vec!["*".into()], recursive: true, values: true };
        let t = tree(&v, &all);
        assert_eq!(t.files()["osc.lanefs-OST0001-osc-ffff000000000001.max_rpcs_in_flight"], "3");
        assert_eq!(t.files()["ldlm.namespaces.lanefs-OST0000-osc-ffff000000000001.lru_max_age"], "30000");
        assert!(t.files()["llite.lanefs-ffff000000000001.max_cached_mb"].contains("max_cached_mb: 8\n"));
        let import = &t.files()["osc.lanefs-OST0001-osc-ffff000000000001.import"];
        assert!(import.starts_with("import:\n    name: lanefs-OST0001-osc-ffff000000000001\n"), "{import}");
        assert!(import.contains("    state: NEW\n") && import.contains("current_connection: unix:/x/oss.sock\n"));
        assert!(t.files()["mdc.lanefs-MDT0000-mdc-ffff000000000001.stats"].contains("mds_reint"));
    }
}
