//! The `mds` target: an in-memory MDS of [`OSTS`] OSTs, each with
//! [`PRECREATED`] objects precreated, fed any sequence of namespace
//! requests, each made by any caller.
//!
//! Input: `(Credentials, MdsRequest)` pairs. After every request the MDS's
//! invariants hold, and `Statfs` from a caller with no more groups than a
//! process can have is answered with the statistics, never an error.
//! The pools are small, so that creates run them dry.

use crate::decode_all;
use lanefs_core::{ObjectId, OstIndex};
use lanefs_mds::Mds;
use lanefs_proto::{Credentials, MdsConfig, MdsReply, MdsRequest, GROUPS_MAX};

/// OSTs of the target's MDS.
pub const OSTS: u32 = 4;

/// Objects each OST has precreated before the first request.
pub const PRECREATED: u64 = 64;

/// The target's MDS, its pools filled.
pub fn new_mds() -> Mds {
    let mut mds = Mds::open_in_memory(MdsConfig::new(OSTS)).expect("an in-memory MDS");
    for ost in 0..OSTS {
        mds.record_precreated(OstIndex(ost), ObjectId(PRECREATED)).expect("precreated objects recorded");
    }
    mds
}

/// An MDS fed the requests of `data`.
pub fn run(data: &[u8]) {
    let requests = decode_all::<(Credentials, MdsRequest)>(data);
    if requests.is_empty() {
        return;
    }
    let mut mds = new_mds();
    for (credentials, request) in requests {
        let statfs = matches!(request, MdsRequest::Statfs) && credentials.groups.len() <= GROUPS_MAX;
        let reply = mds.handle(&credentials, request);
        assert!(!statfs || matches!(reply, MdsReply::Statfs(_)), "statfs answered {reply:?}");
        mds.check_invariants();
    }
}
