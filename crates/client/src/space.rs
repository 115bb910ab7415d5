//! A file system's space and inodes as `df` reports them, worked out once
//! for the mount's `statfs` and `lanefs df` alike, so that the two agree.
//!
//! Bytes are the OSTs': each backing file system counted once (OSTs that
//! share one, as `lanefs up` makes them, tell it apart by `fsid`). Inodes
//! are Lustre's `mntdf` summary: the MDS's, with as many free as the OSTs
//! have free objects if those are fewer. lanefs's inodes are rows of the
//! MDS's database, so "used" is how many there are and "free" the backing
//! file system's free inodes (`f_ffree`), which bound the database no more
//! truly than its free space does.

use lanefs_proto::wire::OstStats;
use lanefs_proto::Statfs;
use std::collections::BTreeSet;

/// What `df` shows of a whole lanefs file system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub total_inodes: u64,
    pub free_inodes: u64,
}

impl Summary {
    pub fn used_inodes(&self) -> u64 {
        self.total_inodes - self.free_inodes
    }
}

/// The summary of the MDS's counts `statfs` and the OSTs' `osts`.
pub fn summary(statfs: &Statfs, osts: &[OstStats]) -> Summary {
    let mut seen = BTreeSet::new();
    let (mut total_bytes, mut free_bytes, mut ost_free_inodes) = (0u64, 0u64, 0u64);
    for space in osts.iter().filter_map(|s| s.space) {
        if seen.insert(space.fsid) {
            total_bytes += space.total_bytes;
            free_bytes += space.free_bytes;
            ost_free_inodes += space.free_inodes;
        }
    }
    let used = statfs.file_count + statfs.dir_count;
    // An MDS in memory reports no space: the OSTs alone bound it.
    let mdt_free = statfs.space.map_or(u64::MAX, |mdt| mdt.free_inodes);
    let free_inodes = mdt_free.min(ost_free_inodes);
    Summary { total_bytes, free_bytes, total_inodes: used.saturating_add(free_inodes), free_inodes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_proto::wire::OstSpace;
    use lanefs_proto::MdtSpace;

    fn ost(ost: u32, fsid: u64, free_inodes: u64) -> OstStats {
        let space = OstSpace { fsid, total_bytes: 100, free_bytes: 40, total_inodes: 1000, free_inodes };
        OstStats { ost, space: Some(space), ..OstStats::default() }
    }

    #[test]
    fn shared_file_systems_count_once_and_the_fewer_free_inodes_bound() {
        let mdt = MdtSpace { fsid: 9, total_bytes: 0, free_bytes: 0, total_inodes: 500, free_inodes: 300 };
        let statfs = Statfs { ost_count: 3, file_count: 7, dir_count: 3, space: Some(mdt) };
        let osts = [ost(0, 1, 900), ost(1, 1, 900), ost(2, 2, 50)];
        let got = summary(&statfs, &osts);
        assert_eq!((got.total_bytes, got.free_bytes), (200, 80), "fsid 1 once, fsid 2 once");
        assert_eq!((got.total_inodes, got.free_inodes, got.used_inodes()), (310, 300, 10), "the MDT's 300 < 950");
        let few = [ost(0, 1, 20)];
        assert_eq!(summary(&statfs, &few).free_inodes, 20, "the OSTs' 20 < 300");
        let memory = Statfs { space: None, ..statfs };
        assert_eq!(summary(&memory, &few).total_inodes, 30);
    }
}
