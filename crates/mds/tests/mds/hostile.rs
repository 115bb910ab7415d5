//! Any sequence of requests, however malformed: the MDS answers each (an
//! error for a bad one), never panics, and keeps every invariant.

use crate::mds;
use lanefs_proto::{
    Access, ComponentSpec, CreateMode, Credentials, Fid, FileKind, MdsReply, MdsRequest, Node, PoolChange, PoolName,
    StripeSpec, XattrHow, GROUPS_MAX,
};
use proptest::prelude::*;

fn path() -> impl Strategy<Value = String> {
    let name = prop_oneof![
        8 => prop::sample::select(vec!["a", "b", "f"]).prop_map(str::to_string),
        1 => prop::sample::select(vec![".", "..", "", "x\0y", "é"]).prop_map(str::to_string),
        1 => (250..260usize).prop_map(|n| "n".repeat(n)),
    ];
    prop_oneof![
        8 => (any::<bool>(), prop::collection::vec(name.clone(), 0..4))
            .prop_map(|(absolute, names)| format!("{}{}", if absolute { "/" } else { "" }, names.join("/"))),
        // Anchored at a directory's fid (or at none, or a file), and the
        // reserved name malformed.
        2 => (prop_oneof![1..8u64, Just(0), any::<u64>()], prop::collection::vec(name, 0..3))
            .prop_map(|(fid, names)| format!("/.lustre/fid/[{fid:#x}]/{}", names.join("/"))),
        1 => prop::sample::select(vec!["/.lustre", "/.lustre/fid", "/.lustre/fid/[0x]/a", "/.lustre/fid/0x2/a"])
            .prop_map(str::to_string),
        1 => any::<String>(),
        1 => (4090..4100usize).prop_map(|n| format!("/{}", "p/".repeat(n / 2))),
    ]
}

/// A plain spec, or now and then a composite one of plain specs, with
/// ends good and bad.
fn stripe() -> impl Strategy<Value = StripeSpec> {
    let end = prop_oneof![Just(u64::MAX), Just(0u64), Just(1 << 20), Just(64 << 20), Just(1 << 63), any::<u64>()];
    let component = (end, plain_stripe()).prop_map(|(end, stripe)| ComponentSpec { end, stripe });
    let composite = prop::collection::vec(component, 0..4)
        .prop_map(|parts| StripeSpec { components: Some(parts), ..StripeSpec::default() });
    prop_oneof![4 => plain_stripe(), 1 => composite]
}

fn plain_stripe() -> impl Strategy<Value = StripeSpec> {
    let count = prop::option::of(prop_oneof![-3..6i64, Just(i64::MIN), Just(i64::MAX), Just(2000), Just(2001)]);
    let size = prop::option::of(prop_oneof![
        Just(0u64),
        Just(65536),
        Just(1 << 20),
        Just(100_000),
        Just(1 << 32),
        Just(u64::MAX),
        any::<u64>()
    ]);
    let start_ost = prop::option::of(prop_oneof![-3..6i64, Just(i64::MIN), Just(i64::MAX)]);
    let osts = prop::option::of(prop::collection::vec(prop_oneof![0..6u32, Just(u32::MAX)], 0..5));
    (count, size, start_ost, prop::option::of(pool()), any::<bool>(), osts).prop_map(
        |(count, size, start_ost, pool, overstripe, osts)| StripeSpec {
            count,
            size,
            start_ost,
            pool,
            overstripe,
            osts,
            components: None,
        },
    )
}

/// Two pool names, so that requests meet the pools others made.
fn pool() -> impl Strategy<Value = PoolName> {
    prop_oneof![Just("a"), Just("b")].prop_map(|name| PoolName::parse(name).unwrap())
}

fn pool_change() -> impl Strategy<Value = PoolChange> {
    let osts = || prop::collection::vec(prop_oneof![0..6u32, Just(u32::MAX)], 0..4);
    prop_oneof![
        Just(PoolChange::New),
        Just(PoolChange::Destroy),
        osts().prop_map(PoolChange::Add),
        osts().prop_map(PoolChange::Remove),
    ]
}

fn permissions() -> impl Strategy<Value = u32> {
    prop_oneof![4 => Just(0o755), 2 => Just(0o600), 1 => Just(0), 1 => any::<u32>()]
}

fn access() -> impl Strategy<Value = Access> {
    prop_oneof![Just(Access::Read), Just(Access::Write), Just(Access::ReadWrite)]
}

fn credentials() -> impl Strategy<Value = Credentials> {
    prop_oneof![
        4 => Just(Credentials::ROOT),
        3 => Just(Credentials { uid: 1000, gid: 1000, groups: vec![10] }),
        1 => (any::<u32>(), any::<u32>(), prop::collection::vec(any::<u32>(), 0..4))
            .prop_map(|(uid, gid, groups)| Credentials { uid, gid, groups }),
        1 => Just(Credentials { uid: 7, gid: 7, groups: vec![1; GROUPS_MAX + 1] }),
    ]
}

fn request() -> impl Strategy<Value = MdsRequest> {
    let mode = prop_oneof![Just(CreateMode::Exclusive), Just(CreateMode::OpenOrCreate)];
    let id = prop::option::of(prop_oneof![Just(0u32), Just(1000), any::<u32>()]);
    prop_oneof![
        (path(), permissions()).prop_map(|(path, permissions)| MdsRequest::Mkdir { path, permissions }),
        (path(), stripe(), mode, access(), permissions()).prop_map(|(path, stripe, mode, access, permissions)| {
            MdsRequest::Create { path, stripe, mode, access, permissions }
        }),
        (path(), access()).prop_map(|(path, access)| MdsRequest::Open { path, access }),
        path().prop_map(|path| MdsRequest::Stat { path }),
        (path(), prop::option::of(path())).prop_map(|(path, cursor)| MdsRequest::Readdir { path, cursor }),
        (path(), prop::option::of(permissions()), id.clone(), id.clone())
            .prop_map(|(path, permissions, uid, gid)| MdsRequest::SetAttr { path, permissions, uid, gid }),
        (path(), prop::option::of(any::<u64>())).prop_map(|(path, at)| MdsRequest::SetMtime { path, at }),
        path().prop_map(|path| MdsRequest::Unlink { path }),
        path().prop_map(|path| MdsRequest::Rmdir { path }),
        (path(), path()).prop_map(|(from, to)| MdsRequest::Rename { from, to }),
        (path(), stripe()).prop_map(|(path, stripe)| MdsRequest::SetStripe { path, stripe }),
        path().prop_map(|path| MdsRequest::GetStripe { path }),
        Just(MdsRequest::Statfs),
        path().prop_map(|path| MdsRequest::DeleteStripe { path }),
        (pool(), pool_change()).prop_map(|(pool, change)| MdsRequest::ChangePool { pool, change }),
        prop::option::of(pool()).prop_map(|pool| MdsRequest::ListPools { pool }),
        fid().prop_map(|fid| MdsRequest::StatFid { fid }),
        (fid(), prop::option::of(path())).prop_map(|(fid, cursor)| MdsRequest::ReaddirFid { fid, cursor }),
        (fid(), access()).prop_map(|(fid, access)| MdsRequest::OpenFid { fid, access }),
        (fid(), prop::option::of(permissions()), id.clone(), id.clone())
            .prop_map(|(fid, permissions, uid, gid)| MdsRequest::SetAttrFid { fid, permissions, uid, gid }),
        (fid(), prop::option::of(any::<u64>())).prop_map(|(fid, at)| MdsRequest::SetMtimeFid { fid, at }),
        (fid(), prop::option::of(any::<u64>())).prop_map(|(fid, at)| MdsRequest::SetAtimeFid { fid, at }),
        (fid(), path()).prop_map(|(fid, to)| MdsRequest::LinkFid { fid, to }),
        (path(), path()).prop_map(|(from, to)| MdsRequest::Link { from, to }),
        (node(), xattr_name()).prop_map(|(node, name)| MdsRequest::GetXattr { node, name }),
        node().prop_map(|node| MdsRequest::ListXattrs { node }),
        (node(), xattr_name(), xattr_value(), xattr_how()).prop_map(|(node, name, value, how)| MdsRequest::SetXattr {
            node,
            name,
            value,
            how
        }),
        (node(), xattr_name()).prop_map(|(node, name)| MdsRequest::RemoveXattr { node, name }),
        (path(), kind(), permissions(), any::<u64>()).prop_map(|(path, kind, permissions, rdev)| MdsRequest::Mknod {
            path,
            kind,
            permissions,
            rdev
        }),
    ]
}

/// Every kind, those mknod makes and those it refuses.
fn kind() -> impl Strategy<Value = FileKind> {
    prop::sample::select(vec![
        FileKind::Fifo,
        FileKind::Socket,
        FileKind::CharDevice,
        FileKind::BlockDevice,
        FileKind::File,
        FileKind::Dir,
        FileKind::Symlink,
    ])
}

fn node() -> impl Strategy<Value = Node> {
    prop_oneof![path().prop_map(Node::Path), fid().prop_map(Node::Fid)]
}

/// Names in every namespace, malformed ones and ones over the bound.
fn xattr_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["user.a", "user.b", "trusted.t", "security.s", "system.posix_acl_access"])
            .prop_map(String::from),
        1 => Just("user.".to_string()),
        1 => Just(format!("user.{}", "n".repeat(300))),
        1 => "[a-z.\\x00]{0,12}",
    ]
}

/// Values up to past the bound of one.
fn xattr_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..16),
        1 => (60_000..66_000usize).prop_map(|len| vec![7u8; len]),
    ]
}

fn xattr_how() -> impl Strategy<Value = XattrHow> {
    prop_oneof![Just(XattrHow::Either), Just(XattrHow::Create), Just(XattrHow::Replace)]
}

/// Fids of the first inodes a run makes, and ones no inode has.
fn fid() -> impl Strategy<Value = Fid> {
    prop_oneof![4 => (1..12u64).prop_map(Fid), 1 => Just(Fid(0)), 1 => any::<u64>().prop_map(Fid)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_requests_are_answered_and_keep_the_invariants(
        ost_count in 1..6u32,
        requests in prop::collection::vec((credentials(), request()), 1..30),
    ) {
        let mut mds = mds(ost_count);
        for (credentials, request) in requests {
            let stat = matches!(request, MdsRequest::Statfs) && credentials.groups.len() <= GROUPS_MAX;
            let reply = mds.handle(&credentials, request);
            prop_assert!(!stat || matches!(reply, MdsReply::Statfs(_)), "{:?}", reply);
            mds.check_invariants();
        }
    }
}
