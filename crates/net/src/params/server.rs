//! The OSTs' parameters, from their statistics (`OstStats`, gathered from
//! every OSS through the MDS's list of OSTs): `obdfilter.lanefs-OST0000.*`
//! (Lustre's OFD device, also reachable as `ofd.*` on Lustre) and the
//! server side of each OST's lock namespace,
//! `ldlm.namespaces.filter-lanefs-OST0000_UUID.*`.
//!
//! OSSes do not say when they started counting, so their stats files show
//! `snapshot_time` only (as Lustre does with `obd_enable_stats_header`
//! off). Omitted, as lanefs does not measure them: RPC service times, the
//! pool's limit and rates, and the disk-side brw_stats histograms.

use super::format::{brw_stats, stats_file, Counter};
use super::{matches, Tree};
use lanefs_core::ost::SyncLockCancel;
use lanefs_proto::wire::OstStats;
use std::time::SystemTime;

pub fn obdfilter_name(ost: u32) -> String {
    format!("{}-OST{ost:04x}", super::client::FSNAME)
}

pub fn namespace_name(ost: u32) -> String {
    format!("filter-{}-OST{ost:04x}_UUID", super::client::FSNAME)
}

/// Every parameter of the OSTs in `osts`.
pub fn tree(osts: &[OstStats], now: SystemTime) -> Tree {
    let mut tree = Tree::default();
    for s in osts {
        let f = |file: &str| format!("obdfilter.{}.{file}", obdfilter_name(s.ost));
        let d = &s.data;
        let counters = [
            Counter::Values { name: "read_bytes", units: "bytes", samples: d.read_bytes },
            Counter::Values { name: "write_bytes", units: "bytes", samples: d.write_bytes },
            Counter::Events { name: "punch", units: "reqs", count: d.punches },
            Counter::Events { name: "getattr", units: "reqs", count: d.getattrs },
            Counter::Events { name: "sync", units: "reqs", count: d.syncs },
        ];
        tree.insert(f("stats"), stats_file(now, None, &counters));
        tree.insert(f("brw_stats"), brw_stats(now, None, &d.read_pages, &d.write_pages));
        tree.insert(f("sync_lock_cancel"), sync_lock_cancel_name(s.sync_lock_cancel).to_string());
        // lanefs's own: bytes of write RPCs read from clients' shared memory.
        tree.insert(f("write_bytes_shm"), s.bulk_shared_bytes.to_string());
        tree.insert(f("num_exports"), s.exports.to_string());
        // lanefs's own: requests received and not yet handled, now.
        tree.insert(f("rpcs_in_flight"), s.rpcs_in_flight.to_string());
        if let Some(space) = &s.space {
            tree.insert(f("kbytestotal"), (space.total_bytes >> 10).to_string());
            tree.insert(f("kbytesfree"), (space.free_bytes >> 10).to_string());
            tree.insert(f("filestotal"), space.total_inodes.to_string());
            tree.insert(f("filesfree"), space.free_inodes.to_string());
        }
        let n = |file: &str| format!("ldlm.namespaces.{}.{file}", namespace_name(s.ost));
        tree.insert(n("lock_count"), (s.locks_granted + s.locks_waiting).to_string());
        tree.insert(n("pool.granted"), s.locks_granted.to_string());
        let l = &s.locks;
        let counters = [
            Counter::Events { name: "ldlm_enqueue", units: "reqs", count: l.enqueues },
            Counter::Events { name: "ldlm_grant", units: "locks", count: l.grants },
            Counter::Events { name: "ldlm_refused", units: "reqs", count: l.refusals },
            Counter::Events { name: "ldlm_bl_callback", units: "reqs", count: l.callbacks },
            Counter::Events { name: "ldlm_cancel", units: "reqs", count: l.cancels },
            Counter::Events { name: "ldlm_evict", units: "clients", count: l.evictions },
            Counter::Events { name: "ldlm_conflict", units: "locks", count: l.conflicts },
            Counter::Events { name: "ldlm_cancel_sync", units: "locks", count: d.cancel_syncs },
        ];
        tree.insert(n("stats"), stats_file(now, None, &counters));
    }
    tree
}

pub fn sync_lock_cancel_name(policy: SyncLockCancel) -> &'static str {
    match policy {
        SyncLockCancel::Never => "never",
        SyncLockCancel::Blocking => "blocking",
        SyncLockCancel::Always => "always",
    }
}

/// The OSTs whose `sync_lock_cancel` `pattern` names (as
/// `obdfilter.*.sync_lock_cancel` or Lustre's `ofd.*.sync_lock_cancel`),
/// with the name it matched.
pub fn sync_lock_cancel_targets(osts: &[u32], pattern: &str) -> Vec<(u32, String)> {
    osts.iter()
        .flat_map(|&ost| {
            ["obdfilter", "ofd"].map(|kind| (ost, format!("{kind}.{}.sync_lock_cancel", obdfilter_name(ost))))
        })
        .filter(|(_, name)| matches(pattern, name))
        .collect()
}

/// The policy `value` names, or the error naming the parameter `name`,
/// the value and the policies.
pub fn sync_lock_cancel_policy(name: &str, value: &str) -> Result<SyncLockCancel, String> {
    SyncLockCancel::from_name(value.trim()).ok_or_else(|| {
        format!(
            "{name}={value}: {value:?} is not a sync_lock_cancel policy; give one of {}",
            SyncLockCancel::NAMES.join(", ")
        )
    })
}
