//! Overstriping (`lfs setstripe -C`) and OST lists (`-o`): several
//! stripes of a file on one OST, each its own object; a file's stripes on
//! the OSTs it names, in order; what is refused and why; and a database
//! of schema version 6, which allowed one object per file on each OST.

use crate::*;
use lanefs_proto::{PoolChange, PoolName};

fn over(count: i64) -> StripeSpec {
    StripeSpec { count: Some(count), overstripe: true, ..StripeSpec::default() }
}

fn listed(osts: &[u32]) -> StripeSpec {
    StripeSpec { osts: Some(osts.to_vec()), ..StripeSpec::default() }
}

fn refused(mds: &mut Mds, path: &str, stripe: StripeSpec) -> String {
    invalid_stripe_reason(try_create(mds, path, &stripe, CreateMode::Exclusive).unwrap_err())
}

#[test]
fn an_overstripe_count_beyond_the_osts_goes_round_them() {
    let mut mds = mds(2);
    let six = create_with(&mut mds, "/six", over(6)).layout;
    assert_eq!(osts(&six), [0, 1, 0, 1, 0, 1]);
    assert!(six.is_overstriped());
    let ids: std::collections::BTreeSet<_> = objects(&six).into_iter().collect();
    assert_eq!(ids.len(), 6, "each stripe its own object: {:?}", objects(&six));
    // -C -N: N stripes on each OST; from a given start.
    let per_ost = create_with(&mut mds, "/per", StripeSpec { start_ost: Some(1), ..over(-3) }).layout;
    assert_eq!(osts(&per_ost), [1, 0, 1, 0, 1, 0]);
    // Up to the OSTs, -C is -c.
    assert_eq!(osts(&create_with(&mut mds, "/two", over(2)).layout).len(), 2);
    mds.check_invariants();
}

#[test]
fn overstripe_counts_lanefs_refuses_name_the_fix() {
    let mut mds = mds(2);
    assert_eq!(
        refused(&mut mds, "/a", over(-33)),
        "overstripe count -33 is not valid: use -C 1 to -C 2000, or -C -1 to -C -32 for that many stripes on each OST"
    );
    assert!(refused(&mut mds, "/b", over(2001)).contains("overstripe count 2001 is not valid"));
    let no_count = StripeSpec { overstripe: true, ..StripeSpec::default() };
    assert!(refused(&mut mds, "/c", no_count).starts_with("overstriping needs a stripe count"));
    assert!(refused(&mut mds, "/d", spec(Some(3), None, None)).contains("exceeds the 2 OSTs"), "-c is not -C");
}

#[test]
fn a_directory_overstripes_the_files_below_it_until_a_count_of_their_own() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/d");
    mds.set_stripe(&ROOT, "/d", &over(-2)).unwrap();
    let info = mds.get_stripe(&ROOT, "/d").unwrap();
    assert_eq!((info.default.count, info.default.overstripe), (-2, true));
    assert_eq!(osts(&create(&mut mds, "/d/f").layout).len(), 4);
    let own = create_with(&mut mds, "/d/g", spec(Some(1), None, None)).layout;
    assert!(!own.is_overstriped() && own.stripe_count() == 1, "a count of its own, without -C");
    mds.set_stripe(&ROOT, "/d", &spec(Some(2), None, None)).unwrap();
    assert!(!mds.get_stripe(&ROOT, "/d").unwrap().default.overstripe, "a new default replaces the old");
    mds.check_invariants();
}

#[test]
fn an_ost_list_places_each_stripe_in_order() {
    let mut mds = mds(4);
    assert_eq!(osts(&create_with(&mut mds, "/a", listed(&[2, 0, 3])).layout), [2, 0, 3]);
    // A starting OST in the list: striping starts there, in the list's order.
    let from_0 = StripeSpec { start_ost: Some(0), ..listed(&[2, 0, 3]) };
    assert_eq!(osts(&create_with(&mut mds, "/b", from_0).layout), [0, 3, 2]);
    // A count that agrees; an OST listed twice overstripes.
    let agreed = StripeSpec { count: Some(2), ..listed(&[1, 1]) };
    let twice = create_with(&mut mds, "/c", agreed).layout;
    assert_eq!(osts(&twice), [1, 1]);
    assert!(twice.is_overstriped());
    // More stripes than OSTs, from the list alone (no -C), as lfs allows.
    let five = StripeSpec { count: Some(5), ..listed(&[0, 1, 2, 3, 0]) };
    assert_eq!(osts(&create_with(&mut mds, "/d", five).layout), [0, 1, 2, 3, 0]);
    mds.check_invariants();
}

#[test]
fn ost_lists_lanefs_refuses_name_the_fix() {
    let mut mds = mds(4);
    let count = StripeSpec { count: Some(3), ..listed(&[0, 1]) };
    assert_eq!(
        refused(&mut mds, "/a", count),
        "stripe count 3 does not agree with the 2 OSTs listed (0,1): leave out -c, or list 3 OSTs"
    );
    assert_eq!(
        refused(&mut mds, "/b", listed(&[0, 4])),
        "OST index 4 in the OST list is out of range for 4 OSTs: use 0 to 3"
    );
    let start = StripeSpec { start_ost: Some(2), ..listed(&[0, 1]) };
    assert!(refused(&mut mds, "/c", start).starts_with("starting OST index 2 is not in the OST list (0,1)"));
    assert!(refused(&mut mds, "/d", listed(&[])).starts_with("the OST list is empty"));
    let fast = PoolName::parse("fast").unwrap();
    mds.change_pool(&ROOT, &fast, &PoolChange::New).unwrap();
    mds.change_pool(&ROOT, &fast, &PoolChange::Add(vec![1, 3])).unwrap();
    let outside = StripeSpec { pool: Some(fast), ..listed(&[1, 2]) };
    let outside = refused(&mut mds, "/e", outside);
    assert!(
        outside.starts_with("OST index 2 is not in pool lanefs.fast (lanefs-OST0001_UUID, lanefs-OST0003_UUID)"),
        "{outside}"
    );
    let inside = StripeSpec { pool: Some(fast), ..listed(&[3, 1]) };
    assert_eq!(osts(&create_with(&mut mds, "/f", inside).layout), [3, 1]);
    mkdir(&mut mds, "/dir");
    let dir = invalid_stripe_reason(mds.set_stripe(&ROOT, "/dir", &listed(&[0])).unwrap_err());
    assert!(dir.starts_with("an OST list (-o) is kept for files only in lanefs"), "{dir}");
    mds.check_invariants();
}

/// A database of schema version 6 (one object per file on each OST, no
/// overstriped defaults) has both tables rebuilt, and keeps everything.
#[test]
fn a_version_6_database_gains_overstriping() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let (file, mut default) = {
        let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
        fill_pools(&mut mds);
        mkdir(&mut mds, "/d");
        mds.set_stripe(&ROOT, "/d", &spec(Some(2), Some(2 << 20), None)).unwrap();
        (create_with(&mut mds, "/d/f", spec(Some(2), None, None)), mds.get_stripe(&ROOT, "/d").unwrap().default)
    };
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF;").unwrap();
        let v6 = include_str!("schema_v6_tables.sql")
            .replacen("CREATE TABLE inodes (", "CREATE TABLE inodes_v6 (", 1)
            .replacen("CREATE TABLE objects (", "CREATE TABLE objects_v6 (", 1);
        conn.execute_batch(&v6).unwrap();
        conn.execute_batch(
            "INSERT INTO inodes_v6 SELECT fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions, stripe_size, \
                    target, default_count, default_size, default_start, pool, default_pool, rdev FROM inodes; \
             DROP TABLE inodes; ALTER TABLE inodes_v6 RENAME TO inodes; \
             INSERT INTO objects_v6 SELECT * FROM objects; \
             DROP TABLE objects; ALTER TABLE objects_v6 RENAME TO objects; DROP TABLE components; DROP TABLE default_components; DROP TABLE migrations; PRAGMA user_version = 6;",
        )
        .unwrap();
        let refused =
            conn.execute("INSERT INTO objects (fid, stripe, ost, object) SELECT fid, 9, 0, 99 FROM objects", []);
        assert!(refused.is_err(), "version 6 has one object per file on each OST");
    }
    let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    mds.check_invariants();
    assert_eq!(mds.open_file(&ROOT, "/d/f", Access::Read).unwrap().layout, file.layout);
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().default, default);
    let mut four = osts(&create_with(&mut mds, "/d/o", over(4)).layout);
    four.sort_unstable();
    assert_eq!(four, [0, 0, 1, 1]);
    mds.set_stripe(&ROOT, "/d", &StripeSpec { size: Some(default.size), ..over(-2) }).unwrap();
    default.count = -2;
    default.overstripe = true;
    drop(mds);
    let mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().default, default, "and it opens again as version 8");
    mds.check_invariants();
}
