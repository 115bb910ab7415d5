//! A client's MDC statistics (`mdc.lanefs-MDT0000-mdc-<instance>.stats`):
//! its requests to the MDS, counted by the name Lustre's MDC gives the RPC
//! that does the same work.

use super::format::Counter;
use lanefs_proto::wire::{FlockCall, MdsCall};
use lanefs_proto::MdsRequest;

/// Requests to the MDS by Lustre's RPC names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MdcStats {
    /// `stat`, `fstat`, `readlink` (`MDS_GETATTR`).
    pub getattr: u64,
    /// Directory pages (`MDS_READPAGE`).
    pub readpage: u64,
    /// Opens and creates, and file locks (Lustre's intent and flock
    /// enqueues, `LDLM_ENQUEUE`).
    pub enqueue: u64,
    /// Namespace and attribute changes (`MDS_REINT`: mkdir, unlink,
    /// rename, setattr, link, symlink, mknod, setxattr, setstripe).
    pub reint: u64,
    /// `MDS_GETXATTR` (also `getstripe`'s layout).
    pub getxattr: u64,
    pub statfs: u64,
    /// `MDS_CLOSE`.
    pub close: u64,
    /// OST pool requests, which Lustre sends its MGS.
    pub pool: u64,
}

impl MdcStats {
    /// Counts `call` once.
    pub fn count(&mut self, call: &MdsCall) {
        let slot = match call {
            MdsCall::Namespace { request, .. } | MdsCall::NamespaceOpen { request, .. } => self.of(request),
            MdsCall::Flock(FlockCall::Get { .. }) => &mut self.getattr,
            MdsCall::Flock(_) => &mut self.enqueue,
            MdsCall::Closed { .. } => &mut self.close,
            MdsCall::ClusterInfo
            | MdsCall::Opened { .. }
            | MdsCall::KeepParam { .. }
            | MdsCall::KeptParams
            | MdsCall::ReplayDone => return,
        };
        *slot += 1;
    }

    fn of(&mut self, request: &MdsRequest) -> &mut u64 {
        match request {
            MdsRequest::Stat { .. } | MdsRequest::StatFid { .. } => &mut self.getattr,
            MdsRequest::Readdir { .. } | MdsRequest::ReaddirFid { .. } => &mut self.readpage,
            // A layout fetched again is a layout lock's enqueue on Lustre.
            MdsRequest::Create { .. }
            | MdsRequest::Open { .. }
            | MdsRequest::OpenFid { .. }
            | MdsRequest::LayoutFid { .. } => &mut self.enqueue,
            MdsRequest::GetXattr { .. } | MdsRequest::ListXattrs { .. } | MdsRequest::GetStripe { .. } => {
                &mut self.getxattr
            }
            MdsRequest::Statfs => &mut self.statfs,
            MdsRequest::ChangePool { .. } | MdsRequest::ListPools { .. } => &mut self.pool,
            MdsRequest::Mkdir { .. }
            | MdsRequest::Unlink { .. }
            | MdsRequest::Rmdir { .. }
            | MdsRequest::Rename { .. }
            | MdsRequest::SetAttr { .. }
            | MdsRequest::SetMtime { .. }
            | MdsRequest::SetAtime { .. }
            | MdsRequest::Symlink { .. }
            | MdsRequest::Mknod { .. }
            | MdsRequest::Link { .. }
            | MdsRequest::SetStripe { .. }
            | MdsRequest::DeleteStripe { .. }
            | MdsRequest::LinkFid { .. }
            | MdsRequest::SetAttrFid { .. }
            | MdsRequest::SetMtimeFid { .. }
            | MdsRequest::SetAtimeFid { .. }
            | MdsRequest::SetXattr { .. }
            | MdsRequest::RemoveXattr { .. }
            | MdsRequest::MigrateStart { .. }
            | MdsRequest::MigrateCommit { .. }
            | MdsRequest::MigrateAbort { .. } => &mut self.reint,
        }
    }

    /// The stats file's counters, in Lustre's names (requests counted,
    /// where Lustre times them).
    pub fn counters(&self) -> [Counter<'static>; 8] {
        let e = |name, count| Counter::Events { name, units: "reqs", count };
        [
            e("mds_getattr", self.getattr),
            e("mds_readpage", self.readpage),
            e("ldlm_enqueue", self.enqueue),
            e("mds_reint", self.reint),
            e("mds_getxattr", self.getxattr),
            e("mds_statfs", self.statfs),
            e("mds_close", self.close),
            e("lanefs_pool", self.pool),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_proto::{Credentials, Fid};

    #[test]
    fn calls_count_under_lustres_rpc_names() {
        let mut s = MdcStats::default();
        let ns = |request| MdsCall::Namespace { credentials: Credentials::ROOT, request };
        s.count(&ns(MdsRequest::StatFid { fid: Fid(2) }));
        s.count(&ns(MdsRequest::Mkdir { path: "/d".into(), permissions: 0o755 }));
        s.count(&ns(MdsRequest::Statfs));
        s.count(&MdsCall::Closed { fid: Fid(2) });
        s.count(&MdsCall::ClusterInfo);
        assert_eq!((s.getattr, s.reint, s.statfs, s.close, s.enqueue), (1, 1, 1, 1, 0));
    }
}
