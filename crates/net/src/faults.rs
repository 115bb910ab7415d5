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

use lanefs_core::Errno;
use std::sync::{Arc, Mutex};

/// Which store calls fail, and how; shared by clones.
#[derive(Clone, Debug, Default)]
pub struct StoreFaults(Arc<Mutex<Faults>>);

#[derive(Clone, Copy, Debug, Default)]
struct Faults {
    sync: Option<Errno>,
    write: Option<Errno>,
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

    pub(crate) fn sync(&self) -> Option<Errno> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).sync
    }

    pub(crate) fn write(&self) -> Option<Errno> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write
    }
}
