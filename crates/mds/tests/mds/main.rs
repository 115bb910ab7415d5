//! Scenario tests of the MDS through its public API, as the network driver
//! uses it. One test binary (to link once); one module per concern.
//!
//! There are no concurrency tests: the MDS is single-threaded by design (one
//! owner calls it per request, each request one transaction), so every run
//! is a sequence of requests, and these tests are those sequences.

mod hostile;
mod namespace;
mod persistence;
mod rename;
mod striping;
mod wire;

use lanefs_core::layout::Layout;
use lanefs_mds::{CreateMode, FileInfo, Mds, MdsConfig, MdsError, StripeSpec};

pub const MIB: u64 = 1 << 20;

/// An in-memory MDS over `ost_count` OSTs with Lustre's defaults.
pub fn mds(ost_count: u32) -> Mds {
    Mds::open_in_memory(MdsConfig::new(ost_count)).expect("in-memory MDS")
}

pub fn spec(count: Option<i64>, size: Option<u64>, start_ost: Option<i64>) -> StripeSpec {
    StripeSpec { count, size, start_ost }
}

/// Creates `path` exclusively with inherited striping.
pub fn create(mds: &mut Mds, path: &str) -> FileInfo {
    mds.create(path, &StripeSpec::default(), CreateMode::Exclusive).unwrap_or_else(|e| panic!("create {path}: {e}"))
}

pub fn create_with(mds: &mut Mds, path: &str, stripe: StripeSpec) -> FileInfo {
    mds.create(path, &stripe, CreateMode::Exclusive).unwrap_or_else(|e| panic!("create {path}: {e}"))
}

pub fn mkdir(mds: &mut Mds, path: &str) {
    mds.mkdir(path).unwrap_or_else(|e| panic!("mkdir {path}: {e}"));
}

/// The OST of each stripe.
pub fn osts(layout: &Layout) -> Vec<u32> {
    layout.objects().iter().map(|key| key.ost.0).collect()
}

/// `(ost, object id)` of each stripe.
pub fn objects(layout: &Layout) -> Vec<(u32, u64)> {
    layout.objects().iter().map(|key| (key.ost.0, key.object.0)).collect()
}

/// The names in directory `path`.
pub fn names(mds: &Mds, path: &str) -> Vec<String> {
    mds.readdir(path).unwrap_or_else(|e| panic!("readdir {path}: {e}")).into_iter().map(|entry| entry.name).collect()
}

pub fn not_found(path: &str, missing: &str) -> MdsError {
    MdsError::NotFound { path: path.into(), missing: missing.into() }
}

pub fn invalid_stripe_reason(error: MdsError) -> String {
    match error {
        MdsError::InvalidStripe { reason } => reason,
        other => panic!("expected InvalidStripe, got {other:?}"),
    }
}
