//! What OSTs that write into their host's page cache have left there, not
//! yet on disk: Linux keeps a file's dirty pages in memory until something
//! writes them back, an `fdatasync` of the file (lanefs's OST syncs an
//! object's file for an fsync, a commit or a cancel that syncs) or the
//! kernel's flusher, which starts on its own once the host's dirty bytes
//! pass `vm.dirty_background_bytes` (or `dirty_background_ratio` of the
//! memory available; `Documentation/admin-guide/sysctl/vm.rst`). So
//! below that threshold the disk takes an object's bytes only when the
//! object is synced, and the sync waits for them; beyond it, the disk
//! takes writes as they come.
//!
//! An OST may also commit on its own once it has taken some bytes since
//! its last commit (lanefs's OST, which syncs every object it changed once
//! 4 MiB were written since the last commit began: `COMMIT_BYTES_DEFAULT`
//! in `lanefs_core::ost::commits`): its objects' bytes then go to the disk
//! as the commit's `fdatasync`s ask.
//!
//! Not modelled: the flusher's age limit (`dirty_expire_centisecs`, 30 s
//! by default), which writes back what has waited that long; the runs
//! this is for (one host's, seconds long) end before it.
//!
//! Invariant ([`HostCache::check_invariants`]): each OST's waiting bytes
//! are the sum of its objects', and below its commit's; each OSS's (its
//! OSTs') at most the threshold.

use lanefs_core::units::{Duration, ObjectId};
use std::collections::BTreeMap;

/// Bytes and disk time waiting in the cache, per object.
type Waiting = BTreeMap<ObjectId, (u64, Duration)>;

/// What goes from the cache to the disk at once: its bytes (the host's
/// CPU for their writeback goes by them) and the disk's time for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    pub bytes: u64,
    pub disk: Duration,
}

impl std::ops::AddAssign for Flushed {
    fn add_assign(&mut self, other: Flushed) {
        self.bytes += other.bytes;
        self.disk = Duration(self.disk.as_ns().saturating_add(other.disk.as_ns()));
    }
}

#[derive(Clone, Debug)]
pub struct HostCache {
    /// Dirty bytes an OSS's host keeps before writing back on its own.
    background: u64,
    osts_per_oss: u32,
    /// Bytes an OST takes before it commits on its own (`None`: never).
    commit: Option<u64>,
    /// Per OST, what its objects have waiting.
    waiting: Vec<Waiting>,
    /// Per OST, the bytes its objects have waiting.
    bytes: Vec<u64>,
}

impl HostCache {
    pub fn new(oss_count: u32, osts_per_oss: u32, background: u64, commit: Option<u64>) -> HostCache {
        HostCache {
            background,
            osts_per_oss,
            commit,
            waiting: vec![Waiting::new(); (oss_count * osts_per_oss) as usize],
            bytes: vec![0; (oss_count * osts_per_oss) as usize],
        }
    }

    /// The bytes waiting on the OSTs of the OSS that serves `ost`.
    fn oss_dirty(&self, ost: u32) -> u64 {
        let first = (ost / self.osts_per_oss * self.osts_per_oss) as usize;
        self.bytes[first..first + self.osts_per_oss as usize].iter().sum()
    }

    /// OST `ost` wrote `bytes` of `object` into the cache, which take
    /// `disk` to write back: `Some` when the disk takes them now, with
    /// whatever else the OST's own commit writes back (the host is past its
    /// threshold, or the OST commits), `None` when they wait for a sync.
    pub fn write(&mut self, ost: u32, object: ObjectId, bytes: u64, disk: Duration) -> Option<Flushed> {
        if self.oss_dirty(ost).saturating_add(bytes) > self.background {
            return Some(Flushed { bytes, disk });
        }
        let o = ost as usize;
        self.bytes[o] += bytes;
        let entry = self.waiting[o].entry(object).or_insert((0, Duration::ZERO));
        entry.0 += bytes;
        entry.1 = Duration(entry.1.as_ns().saturating_add(disk.as_ns()));
        match self.commit {
            Some(commit) if self.bytes[o] >= commit => Some(self.sync(ost, None)),
            _ => None,
        }
    }

    /// A sync of `object` on OST `ost` (`None`: of all its objects): what
    /// it writes back.
    pub fn sync(&mut self, ost: u32, object: Option<ObjectId>) -> Flushed {
        let o = ost as usize;
        let (bytes, disk) = match object {
            Some(object) => self.waiting[o].remove(&object).unwrap_or((0, Duration::ZERO)),
            None => {
                std::mem::take(&mut self.waiting[o]).into_values().fold((0, Duration::ZERO), |(b, d), (bytes, time)| {
                    (b + bytes, Duration(d.as_ns().saturating_add(time.as_ns())))
                })
            }
        };
        self.bytes[o] -= bytes;
        Flushed { bytes, disk }
    }

    pub fn check_invariants(&self) {
        for (ost, objects) in self.waiting.iter().enumerate() {
            let waiting: u64 = objects.values().map(|(bytes, _)| bytes).sum();
            assert_eq!(self.bytes[ost], waiting, "OST {ost}'s waiting bytes against its objects'");
            if let Some(commit) = self.commit {
                assert!(waiting < commit, "OST {ost} has {waiting} bytes waiting, past its commit's {commit}");
            }
        }
        for first in (0..self.bytes.len() as u32).step_by(self.osts_per_oss as usize) {
            let dirty = self.oss_dirty(first);
            assert!(dirty <= self.background, "OSTs {first}.. keep {dirty} dirty bytes, past {}", self.background);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration(1_000_000);

    #[test]
    fn writes_wait_for_their_objects_sync_below_the_threshold() {
        let (a, b) = (ObjectId(1), ObjectId(2));
        let mut cache = HostCache::new(1, 2, 100, None);
        assert_eq!(cache.write(0, a, 40, MS), None);
        assert_eq!(cache.write(1, b, 40, MS), None);
        assert_eq!(cache.write(0, a, 40, MS), Some(Flushed { bytes: 40, disk: MS }), "past the OSS's threshold");
        assert_eq!(cache.write(0, a, 20, MS), None);
        cache.check_invariants();
        assert_eq!(cache.sync(0, Some(b)), Flushed::default(), "b waits on the other OST");
        assert_eq!(cache.sync(0, Some(a)), Flushed { bytes: 60, disk: Duration(2 * MS.as_ns()) });
        assert_eq!(cache.sync(0, Some(a)), Flushed::default(), "written back already");
        assert_eq!(cache.sync(1, None), Flushed { bytes: 40, disk: MS });
        cache.check_invariants();
    }

    #[test]
    fn an_ost_that_commits_on_its_own_writes_back_all_it_has_waiting() {
        let (a, b) = (ObjectId(1), ObjectId(2));
        let mut cache = HostCache::new(1, 2, 1000, Some(100));
        assert_eq!(cache.write(0, a, 60, MS), None);
        assert_eq!(cache.write(1, b, 60, MS), None, "another OST's bytes count for its own commit");
        let both = Flushed { bytes: 100, disk: Duration(2 * MS.as_ns()) };
        assert_eq!(cache.write(0, b, 40, MS), Some(both), "100 bytes: the OST commits both");
        cache.check_invariants();
        assert_eq!(cache.sync(0, None), Flushed::default());
        assert_eq!(cache.sync(1, Some(b)), Flushed { bytes: 60, disk: MS });
    }
}
