//! OST pools: definitions, files confined to their pool's OSTs, pools
//! inherited as the other stripe fields, the errors that name the fix,
//! persistence, and who may change them.

use crate::*;
use lanefs_proto::{MdsReply, MdsRequest, PoolChange, PoolInfo, PoolName, StripeDefault};

fn pool(name: &str) -> PoolName {
    PoolName::parse(name).unwrap()
}

fn change(mds: &mut Mds, name: &str, change: PoolChange) -> Result<(), MdsError> {
    mds.change_pool(&ROOT, &pool(name), &change)
}

fn pool_reason(error: MdsError) -> String {
    match error {
        MdsError::InvalidPool { reason } => reason,
        other => panic!("expected InvalidPool, got {other:?}"),
    }
}

fn in_pool(name: &str) -> StripeSpec {
    StripeSpec { pool: Some(pool(name)), ..StripeSpec::default() }
}

fn create_err(mds: &mut Mds, path: &str, stripe: StripeSpec) -> MdsError {
    mds.create(&ROOT, path, &stripe, CreateMode::Exclusive, Access::ReadWrite, 0o644).unwrap_err()
}

/// A pool `fast` of OSTs 1 and 3 on a file system of 4.
fn fast_pool() -> Mds {
    let mut mds = mds(4);
    change(&mut mds, "fast", PoolChange::New).unwrap();
    change(&mut mds, "lanefs.fast", PoolChange::Add(vec![3, 1])).unwrap();
    mds
}

#[test]
fn files_in_a_pool_get_objects_only_on_its_osts_in_turn() {
    let mut mds = fast_pool();
    mkdir(&mut mds, "/d");
    mds.set_stripe(&ROOT, "/d", &in_pool("fast")).unwrap();
    let starts: Vec<Vec<u32>> = (0..4).map(|i| osts(&create(&mut mds, &format!("/d/f{i}")).layout)).collect();
    assert_eq!(starts, [[1], [3], [1], [3]], "round robin among the pool's members");
    let wide = create_with(&mut mds, "/d/wide", spec(Some(-1), None, None)).layout;
    assert_eq!(osts(&wide), [1, 3], "-c -1 is all the pool's OSTs");
    let started = create_with(&mut mds, "/d/started", spec(Some(2), None, Some(3))).layout;
    assert_eq!(osts(&started), [3, 1], "a start in the pool is honoured, the rest follow in the pool");
    // Outside the pool's directory, files use every OST; a file may ask for a pool itself.
    assert_eq!(osts(&create_with(&mut mds, "/all", spec(Some(-1), None, None)).layout), [0, 1, 2, 3]);
    assert_eq!(osts(&create_with(&mut mds, "/own", in_pool("fast")).layout), [3], "the pool's own turn");
    let info = mds.get_stripe(&ROOT, "/d/f0").unwrap();
    assert_eq!(info.pool, Some(pool("fast")), "a file keeps its pool");
    assert_eq!(mds.get_stripe(&ROOT, "/all").unwrap().pool, None);
    let dir = mds.get_stripe(&ROOT, "/d").unwrap();
    assert_eq!((dir.pool, dir.default.pool), (None, Some(pool("fast"))));
    assert_eq!(dir.inherited_from.pool.as_deref(), Some("/d"));
    mds.check_invariants();
}

#[test]
fn the_pool_is_inherited_field_by_field() {
    let mut mds = fast_pool();
    mkdir(&mut mds, "/a");
    mkdir(&mut mds, "/a/b");
    mds.set_stripe(&ROOT, "/a", &in_pool("fast")).unwrap();
    mds.set_stripe(&ROOT, "/a/b", &spec(Some(2), None, None)).unwrap();
    let info = mds.get_stripe(&ROOT, "/a/b").unwrap();
    assert_eq!(
        info.default,
        StripeDefault { count: 2, overstripe: false, size: MIB, start_ost: -1, pool: Some(pool("fast")) }
    );
    assert_eq!((info.inherited_from.count.as_deref(), info.inherited_from.pool.as_deref()), (Some("/a/b"), Some("/a")));
    assert_eq!(osts(&create(&mut mds, "/a/b/f").layout), [1, 3]);
    // setstripe -d: /a/b inherits everything from /a again.
    mds.delete_stripe(&ROOT, "/a/b").unwrap();
    let info = mds.get_stripe(&ROOT, "/a/b").unwrap();
    assert_eq!(
        info.default,
        StripeDefault { count: 1, overstripe: false, size: MIB, start_ost: -1, pool: Some(pool("fast")) }
    );
    assert_eq!(info.inherited_from.count, None);
    mds.delete_stripe(&ROOT, "/a").unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/a/b").unwrap().default.pool, None);
    assert_eq!(mds.get_stripe(&ROOT, "/a").unwrap().inherited_from, Default::default());
    mds.check_invariants();
}

#[test]
fn pool_errors_name_the_pool_and_the_fix() {
    let mut mds = fast_pool();
    mkdir(&mut mds, "/d");
    let reason = invalid_stripe_reason(create_err(&mut mds, "/f", StripeSpec { count: Some(3), ..in_pool("fast") }));
    assert!(reason.contains("stripe count 3 exceeds the 2 OSTs of pool lanefs.fast"), "{reason}");
    let reason =
        invalid_stripe_reason(create_err(&mut mds, "/f", StripeSpec { start_ost: Some(0), ..in_pool("fast") }));
    assert!(
        reason.contains("starting OST index 0 is not in pool lanefs.fast (lanefs-OST0001_UUID, lanefs-OST0003_UUID)")
    );
    let undefined = pool_reason(create_err(&mut mds, "/f", in_pool("slow")));
    assert!(undefined.contains("pool lanefs.slow is not defined: define it with lanefs pool_new"), "{undefined}");
    let refused = pool_reason(mds.set_stripe(&ROOT, "/d", &in_pool("slow")).unwrap_err());
    assert!(refused.contains("lanefs pool_new lanefs.slow"), "{refused}");
    let too_wide = mds.set_stripe(&ROOT, "/d", &StripeSpec { count: Some(4), ..in_pool("fast") }).unwrap_err();
    assert!(invalid_stripe_reason(too_wide).contains("exceeds the 2 OSTs of pool lanefs.fast"));
    change(&mut mds, "empty", PoolChange::New).unwrap();
    mds.set_stripe(&ROOT, "/d", &in_pool("empty")).unwrap();
    let empty = pool_reason(create_err(&mut mds, "/d/f", StripeSpec::default()));
    assert_eq!(empty, "pool lanefs.empty has no OSTs: add some with lanefs pool_add lanefs.empty OST...");
    // A pool that goes leaves its directories refusing files, by name.
    change(&mut mds, "empty", PoolChange::Destroy).unwrap();
    assert!(pool_reason(create_err(&mut mds, "/d/f", StripeSpec::default())).contains("is not defined"));
    // Administration errors, as lctl's.
    assert_eq!(pool_reason(change(&mut mds, "fast", PoolChange::New).unwrap_err()), "pool lanefs.fast already exists");
    let member = pool_reason(change(&mut mds, "fast", PoolChange::Add(vec![1])).unwrap_err());
    assert_eq!(member, "lanefs-OST0001_UUID is already in pool lanefs.fast");
    let absent = pool_reason(change(&mut mds, "fast", PoolChange::Remove(vec![2])).unwrap_err());
    assert_eq!(absent, "lanefs-OST0002_UUID not found in pool lanefs.fast");
    let beyond = pool_reason(change(&mut mds, "fast", PoolChange::Add(vec![4])).unwrap_err());
    assert!(beyond.starts_with("lanefs-OST0004_UUID is not part of the 'lanefs' fs"), "{beyond}");
    let busy = pool_reason(change(&mut mds, "fast", PoolChange::Destroy).unwrap_err());
    assert!(busy.starts_with("pool lanefs.fast not empty, please remove all members"), "{busy}");
    let missing = pool_reason(change(&mut mds, "nope", PoolChange::Add(vec![0])).unwrap_err());
    assert!(missing.contains("pool lanefs.nope not found"), "{missing}");
    assert!(pool_reason(mds.list_pools(Some(&pool("nope"))).unwrap_err()).contains("not found"));
    // A failed change changes nothing.
    assert_eq!(mds.list_pools(None).unwrap(), [PoolInfo { name: pool("fast"), osts: vec![1, 3] }]);
    mds.check_invariants();
}

#[test]
fn removing_an_ost_from_a_pool_moves_no_file() {
    let mut mds = fast_pool();
    let before = create_with(&mut mds, "/f", StripeSpec { count: Some(2), ..in_pool("fast") }).layout;
    change(&mut mds, "fast", PoolChange::Remove(vec![3])).unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/f").unwrap().layout.unwrap(), before);
    assert_eq!(osts(&create_with(&mut mds, "/g", in_pool("fast")).layout), [1]);
    mds.check_invariants();
}

#[test]
fn only_root_changes_pools_and_anyone_lists_them() {
    let mut mds = fast_pool();
    let user = Credentials::user(1000, 1000);
    let refused = mds.change_pool(&user, &pool("slow"), &PoolChange::New).unwrap_err();
    assert_eq!(refused.errno(), lanefs_core::Errno::EPERM);
    assert!(refused.to_string().contains("only root (uid 0) may change OST pools"), "{refused}");
    let reply = mds.handle(&user, MdsRequest::ListPools { pool: None });
    assert_eq!(reply, MdsReply::Pools(vec![PoolInfo { name: pool("fast"), osts: vec![1, 3] }]));
    let reply = mds.handle(&ROOT, MdsRequest::ChangePool { pool: pool("slow"), change: PoolChange::New });
    assert_eq!(reply, MdsReply::Ok);
    // A user's own directory may use a pool: its owner sets it, not others.
    mds.mkdir(&ROOT, "/u", 0o777).unwrap();
    mds.mkdir(&user, "/u/mine", 0o755).unwrap();
    mds.set_stripe(&user, "/u/mine", &in_pool("fast")).unwrap();
    let other = Credentials::user(1001, 1001);
    assert!(matches!(mds.delete_stripe(&other, "/u/mine").unwrap_err(), MdsError::NotPermitted { .. }));
    mds.delete_stripe(&user, "/u/mine").unwrap();
    let info = mds.create(&user, "/u/mine/f", &in_pool("fast"), CreateMode::Exclusive, Access::Write, 0o644).unwrap();
    assert_eq!(osts(&info.layout), [1]);
    mds.check_invariants();
}

#[test]
fn pools_and_files_in_them_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    {
        let mut mds = Mds::open(&db, MdsConfig::new(4)).unwrap();
        fill_pools(&mut mds);
        change(&mut mds, "fast", PoolChange::New).unwrap();
        change(&mut mds, "fast", PoolChange::Add(vec![0, 2])).unwrap();
        mkdir(&mut mds, "/d");
        mds.set_stripe(&ROOT, "/d", &in_pool("fast")).unwrap();
        assert_eq!(osts(&create(&mut mds, "/d/f").layout), [0]);
    }
    let mut mds = Mds::open(&db, MdsConfig::new(4)).unwrap();
    mds.check_invariants();
    assert_eq!(mds.list_pools(None).unwrap(), [PoolInfo { name: pool("fast"), osts: vec![0, 2] }]);
    assert_eq!(mds.get_stripe(&ROOT, "/d/f").unwrap().pool, Some(pool("fast")));
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().default.pool, Some(pool("fast")));
    assert_eq!(osts(&create(&mut mds, "/d/g").layout), [2], "the pool's rotation continues");
}

/// A database of schema version 3 (before pools) gains them when opened,
/// keeping everything else.
#[test]
fn a_version_3_database_gains_pools() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(include_str!("schema_v3.sql")).unwrap();
        conn.execute_batch(
            "INSERT INTO inodes (fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions, default_count) \
                 VALUES (1, 2, 5, 5, 5, 0, 0, 493, 2);
             INSERT INTO inodes (fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions, stripe_size) \
                 VALUES (2, 1, 9, 9, 9, 7, 8, 420, 1048576);
             INSERT INTO dentries (parent, name, fid) VALUES (1, 'f', 2);
             INSERT INTO ost_counters (ost, next_object, precreated) VALUES (0, 2, 10), (1, 1, 10);
             INSERT INTO objects (fid, stripe, ost, object) VALUES (2, 0, 0, 1);
             INSERT INTO meta (key, value) VALUES ('next_fid', 3), ('round_robin', 1), ('ost_count', 2);
             PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    mds.check_invariants();
    let f = mds.get_stripe(&ROOT, "/f").unwrap();
    assert_eq!((osts(&f.layout.unwrap()), f.pool, f.default.count), (vec![0], None, 2));
    assert!(mds.list_pools(None).unwrap().is_empty());
    change(&mut mds, "fast", PoolChange::New).unwrap();
    change(&mut mds, "fast", PoolChange::Add(vec![1])).unwrap();
    let one = StripeSpec { count: Some(1), ..in_pool("fast") };
    assert_eq!(objects(&create_with(&mut mds, "/g", one).layout), [(1, 1)]);
    mds.check_invariants();
    drop(mds);
    let mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/g").unwrap().pool, Some(pool("fast")), "and it opens again as version 8");
}
