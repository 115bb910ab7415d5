//! Fault injection into an OSS's object stores, as Lustre's `fail_loc`
//! (`lctl set_param fail_loc=...`) makes a server fail on purpose: to see,
//! on the real file system, what an application is told when an OST's disk
//! fails, without a failing disk.
//!
//! A [`StoreFaults`] handle is shared by the stores of an OSS
//! ([`crate::oss::OssConfig::faults`]); whoever holds a clone sets which
//! calls fail and with which error number, and clears it again. A store
//! checks it before the system call it stands for: `fdatasync`
//! ([`StoreFaults::fail_syncs`]) and `pwrite` ([`StoreFaults::fail_writes`]).
//! Nothing is set unless someone sets it: an OSS started by `lanefs oss`
//! or `lanefs up` never fails on purpose.
//!
//! It can also make commits slow on purpose ([`StoreFaults::slow_commits`],
//! `--emulate-commit-ms`): each commit of an OST (the `fdatasync`s of one
//! sync and the commit point) then takes at least that long, as on a disk
//! whose journal commits take that long. A lock handover under
//! `sync_lock_cancel` waits for one, so a benchmark on this machine's fast
//! disk can stand for the disks an OSS is deployed on (7200 rpm drives:
//! about 8.3 ms a commit).

use lanefs_core::Errno;
use std::sync::{Arc, Mutex};

/// Which store calls fail, and how; shared by clones.
#[derive(Clone, Debug, Default)]
pub struct StoreFaults(Arc<Mutex<Faults>>);

#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    sync: Option<Errno>,
    write: Option<Errno>,
    commit_floor: std::time::Duration,
}

impl StoreFaults {
    /// Every `fdatasync` fails with `errno` from now on (`None`: none does).
    pub fn fail_syncs(&self, errno: Option<Errno>) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).sync = errno;
    }

    /// Every write fails with `errno` from now on (`None`: none does).
    pub fn fail_writes(&self, errno: Option<Errno>) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write = errno;
    }

    /// Every commit takes at least `floor` from now on (zero: as the disk
    /// takes it).
    pub fn slow_commits(&self, floor: std::time::Duration) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).commit_floor = floor;
    }

    pub(crate) fn commit_floor(&self) -> std::time::Duration {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).commit_floor
    }

    pub(crate) fn sync(&self) -> Option<Errno> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).sync
    }

    pub(crate) fn write(&self) -> Option<Errno> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write
    }
}
