//! `handle`, as the network driver calls it: each request gets the reply its
//! variant documents, errors arrive as data, and every value survives the
//! driver's codec (bincode) unchanged.

use crate::*;
use lanefs_core::units::OstIndex;
use lanefs_proto::{DirPage, FileKind, MdsReply, MdsRequest, PoolChange, PoolInfo, PoolName, Statfs};
use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let bytes = bincode::serialize(value).unwrap();
    assert_eq!(&bincode::deserialize::<T>(&bytes).unwrap(), value);
}

/// Sends `request` through the codec, handles it, sends the reply back.
fn call(mds: &mut Mds, request: MdsRequest) -> MdsReply {
    round_trip(&request);
    let reply = mds.handle(&ROOT, request);
    round_trip(&reply);
    reply
}

fn path(path: &str) -> String {
    path.to_string()
}

#[test]
fn every_request_gets_its_reply_through_the_codec() {
    let mut mds = mds(4);
    let mkdir = MdsRequest::Mkdir { path: path("/d"), permissions: 0o40750 };
    let MdsReply::Attr(dir) = call(&mut mds, mkdir) else { panic!("mkdir") };
    assert_eq!((dir.kind, dir.permissions, dir.uid, dir.gid), (FileKind::Dir, 0o750, 0, 0));
    let stripe = spec(Some(2), Some(2 * MIB), None);
    assert_eq!(call(&mut mds, MdsRequest::SetStripe { path: path("/d"), stripe }), MdsReply::Ok);
    let create = MdsRequest::Create {
        path: path("/d/f"),
        stripe: StripeSpec::default(),
        mode: CreateMode::Exclusive,
        access: Access::Write,
        permissions: 0o600,
    };
    let MdsReply::File(file) = call(&mut mds, create) else { panic!("create") };
    assert_eq!((file.layout.stripe_count(), file.layout.stripe_size()), (2, 2 * MIB));
    let open = MdsRequest::Open { path: path("/d/f"), access: Access::ReadWrite };
    assert_eq!(call(&mut mds, open), MdsReply::File(file.clone()));
    let MdsReply::Attr(attr) = call(&mut mds, MdsRequest::Stat { path: path("/d/f") }) else { panic!("stat") };
    assert_eq!(attr.layout.as_ref(), Some(&file.layout));
    assert_eq!(attr.permissions, 0o600);
    let readdir = MdsRequest::Readdir { path: path("/d"), cursor: None };
    let MdsReply::Entries(DirPage { entries, more: false }) = call(&mut mds, readdir) else { panic!("readdir") };
    assert_eq!(entries.len(), 1);
    let chmod = MdsRequest::SetAttr { path: path("/d/f"), permissions: Some(0o640), uid: Some(7), gid: None };
    let MdsReply::Attr(changed) = call(&mut mds, chmod) else { panic!("setattr") };
    assert_eq!((changed.permissions, changed.uid, changed.gid), (0o640, 7, 0));
    let MdsReply::Stripe(info) = call(&mut mds, MdsRequest::GetStripe { path: path("/d/f") }) else { panic!() };
    assert_eq!(info.layout.as_ref(), Some(&file.layout));
    assert_eq!(info.inherited_from.size.as_deref(), Some("/d"));
    let statfs = Statfs { ost_count: 4, file_count: 1, dir_count: 2, space: None };
    assert_eq!(call(&mut mds, MdsRequest::Statfs), MdsReply::Statfs(statfs));
    create_with(&mut mds, "/d/g", spec(Some(3), None, None));
    let rename = MdsRequest::Rename { from: path("/d/f"), to: path("/d/g") };
    assert_eq!(call(&mut mds, rename), MdsReply::Ok);
    let queued = |mds: &Mds| (0..4).map(|ost| mds.queued_destroys(OstIndex(ost), 10).unwrap().len()).sum::<usize>();
    assert_eq!(queued(&mds), 3, "the replaced file's objects");
    assert_eq!(call(&mut mds, MdsRequest::Unlink { path: path("/d/g") }), MdsReply::Ok);
    assert_eq!(queued(&mds), 5, "and the unlinked file's");
    assert_eq!(call(&mut mds, MdsRequest::Rmdir { path: path("/d") }), MdsReply::Ok);
    mds.check_invariants();
}

#[test]
fn pool_requests_get_their_replies_through_the_codec() {
    let mut mds = mds(4);
    let fast = PoolName::parse("lanefs.fast").unwrap();
    let new = MdsRequest::ChangePool { pool: fast, change: PoolChange::New };
    assert_eq!(call(&mut mds, new), MdsReply::Ok);
    let add = MdsRequest::ChangePool { pool: fast, change: PoolChange::Add(vec![2, 0]) };
    assert_eq!(call(&mut mds, add), MdsReply::Ok);
    let listed = call(&mut mds, MdsRequest::ListPools { pool: Some(fast) });
    assert_eq!(listed, MdsReply::Pools(vec![PoolInfo { name: fast, osts: vec![0, 2] }]));
    call(&mut mds, MdsRequest::Mkdir { path: path("/d"), permissions: 0o755 });
    let stripe = StripeSpec { pool: Some(fast), ..StripeSpec::default() };
    assert_eq!(call(&mut mds, MdsRequest::SetStripe { path: path("/d"), stripe }), MdsReply::Ok);
    create(&mut mds, "/d/f");
    let MdsReply::Stripe(info) = call(&mut mds, MdsRequest::GetStripe { path: path("/d/f") }) else { panic!() };
    assert_eq!(
        (info.pool, info.default.pool, info.inherited_from.pool.as_deref()),
        (Some(fast), Some(fast), Some("/d"))
    );
    assert_eq!(call(&mut mds, MdsRequest::DeleteStripe { path: path("/d") }), MdsReply::Ok);
    let MdsReply::Error(error) = call(&mut mds, MdsRequest::ChangePool { pool: fast, change: PoolChange::Destroy })
    else {
        panic!("a pool with members is not destroyed")
    };
    assert!(error.to_string().contains("not empty"), "{error}");
}

#[test]
fn errors_come_back_as_data_and_change_nothing() {
    let mut mds = mds(2);
    let cases = [
        (MdsRequest::Stat { path: path("/x") }, mds.stat(&ROOT, "/x").unwrap_err()),
        (MdsRequest::Mkdir { path: path("/"), permissions: 0o755 }, mds.mkdir(&ROOT, "/", 0o755).unwrap_err()),
        (MdsRequest::Rmdir { path: path("/") }, mds.rmdir(&ROOT, "/").unwrap_err()),
        (
            MdsRequest::Open { path: path("rel"), access: Access::Read },
            mds.open_file(&ROOT, "rel", Access::Read).unwrap_err(),
        ),
        (
            MdsRequest::Create {
                path: path("/f"),
                stripe: spec(Some(3), None, None),
                mode: CreateMode::Exclusive,
                access: Access::ReadWrite,
                permissions: 0o644,
            },
            try_create(&mut mds, "/f", &spec(Some(3), None, None), CreateMode::Exclusive).unwrap_err(),
        ),
        (MdsRequest::Rename { from: path("/a"), to: path("/b") }, mds.rename(&ROOT, "/a", "/b").unwrap_err()),
    ];
    for (request, error) in cases {
        assert_eq!(call(&mut mds, request), MdsReply::Error(error));
    }
    assert_eq!(mds.statfs().unwrap(), Statfs { ost_count: 2, file_count: 0, dir_count: 1, space: None });
    mds.check_invariants();
}

#[test]
fn every_error_variant_crosses_the_wire() {
    use lanefs_proto::MdsError::*;
    let s = || "/p".to_string();
    let errors = [
        NotFound { path: s(), missing: s() },
        Exists { path: s() },
        NotADirectory { path: s(), file: s() },
        IsADirectory { path: s() },
        NotEmpty { path: s(), entry_count: 3 },
        InvalidPath { path: s(), reason: s() },
        InvalidStripe { reason: s() },
        LayoutAlreadySet { path: s() },
        RenameIntoItself { from: s(), to: s() },
        RootDirectory { action: s() },
        InvalidConfig { reason: s() },
        OstCountDecreased { recorded_ost_count: 4, configured_ost_count: 2 },
        SchemaVersion { path: s(), found_version: 1, expected_version: 2 },
        PermissionDenied { path: s(), on: s(), needed: s(), uid: 5 },
        NotPermitted { path: s(), reason: s() },
        InvalidCredentials { reason: s() },
        NoObjects { ost: 3, reason: s() },
        NoSpace { path: s() },
        NotAnMdsDatabase { path: s(), reason: s() },
        DatabaseBusy { path: s() },
        Database(s()),
    ];
    for error in errors {
        assert!(!error.to_string().is_empty());
        round_trip(&MdsReply::Error(error));
    }
}
