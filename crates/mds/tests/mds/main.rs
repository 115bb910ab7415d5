//! Scenario tests of the MDS through its public API, as the network driver
//! uses it. One test binary (to link once); one module per concern.
//!
//! There are no concurrency tests: the MDS is single-threaded by design (one
//! owner calls it per request, each request one transaction), so every run
//! is a sequence of requests, and these tests are those sequences.

mod by_fid;
mod composite;
mod full_disk;
mod hostile;
mod lifecycle;
mod links;
mod migrate;
mod namespace;
mod overstriping;
mod permissions;
mod persistence;
mod pools;
mod readdir;
mod rename;
mod special;
mod striping;
mod wire;
mod xattrs;

use lanefs_core::layout::Layout;
use lanefs_core::units::{ObjectId, OstIndex};
use lanefs_mds::Mds;
pub use lanefs_proto::{Access, Credentials};
use lanefs_proto::{CreateMode, FileInfo, MdsConfig, MdsError, StripeSpec};

pub const MIB: u64 = 1 << 20;

pub const ROOT: Credentials = Credentials::ROOT;

/// Objects each OST has created in advance in these tests (as the network
/// MDS has its OSSes do).
pub const PRECREATED: u64 = 1000;

/// An in-memory MDS over `ost_count` OSTs with Lustre's defaults, every
/// OST's pool filled.
pub fn mds(ost_count: u32) -> Mds {
    let mut mds = Mds::open_in_memory(MdsConfig::new(ost_count)).expect("in-memory MDS");
    fill_pools(&mut mds);
    mds
}

/// Records every OST as having precreated objects up to [`PRECREATED`].
pub fn fill_pools(mds: &mut Mds) {
    for ost in 0..mds.config().ost_count {
        mds.record_precreated(OstIndex(ost), ObjectId(PRECREATED)).expect("record precreated");
    }
}

/// `create`, as root, for read and write, with permissions 0644.
pub fn try_create(mds: &mut Mds, path: &str, stripe: &StripeSpec, mode: CreateMode) -> Result<FileInfo, MdsError> {
    mds.create(&ROOT, path, stripe, mode, Access::ReadWrite, 0o644)
}

pub fn spec(count: Option<i64>, size: Option<u64>, start_ost: Option<i64>) -> StripeSpec {
    StripeSpec { count, size, start_ost, ..StripeSpec::default() }
}

/// Creates `path` exclusively with inherited striping.
pub fn create(mds: &mut Mds, path: &str) -> FileInfo {
    mds.create(&ROOT, path, &StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite, 0o644)
        .unwrap_or_else(|e| panic!("create {path}: {e}"))
}

pub fn create_with(mds: &mut Mds, path: &str, stripe: StripeSpec) -> FileInfo {
    mds.create(&ROOT, path, &stripe, CreateMode::Exclusive, Access::ReadWrite, 0o644)
        .unwrap_or_else(|e| panic!("create {path}: {e}"))
}

pub fn mkdir(mds: &mut Mds, path: &str) {
    mds.mkdir(&ROOT, path, 0o755).unwrap_or_else(|e| panic!("mkdir {path}: {e}"));
}

/// The OST of each stripe.
pub fn osts(layout: &Layout) -> Vec<u32> {
    layout.objects().iter().map(|key| key.ost.0).collect()
}

/// `(ost, object id)` of each stripe.
pub fn objects(layout: &Layout) -> Vec<(u32, u64)> {
    layout.objects().iter().map(|key| (key.ost.0, key.object.0)).collect()
}

/// The names in directory `path`, page after page.
pub fn names(mds: &Mds, path: &str) -> Vec<String> {
    names_as(mds, &ROOT, path).unwrap_or_else(|e| panic!("readdir {path}: {e}"))
}

/// The names in directory `path` as `who` lists them, page after page.
pub fn names_as(mds: &Mds, who: &Credentials, path: &str) -> Result<Vec<String>, MdsError> {
    let mut names: Vec<String> = Vec::new();
    loop {
        let page = mds.readdir(who, path, names.last().map(String::as_str))?;
        names.extend(page.entries.into_iter().map(|entry| entry.name));
        if !page.more {
            return Ok(names);
        }
    }
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
