//! Restriping a file in place (`lanefs migrate`): the MDS's side. A
//! migration starts with a volatile file holding the new layout and ends
//! with the swap (the old objects queued for destruction) or abandoned
//! (the new ones queued); the file keeps its name, fid, owner and times.

use crate::*;
use lanefs_mds::Time;
use lanefs_proto::{ComponentSpec, FileKind, PoolChange, PoolName};

fn queued(mds: &Mds, ost: u32) -> Vec<u64> {
    mds.queued_destroys(OstIndex(ost), 100).unwrap().into_iter().map(|object| object.0).collect()
}

fn all_queued(mds: &Mds) -> Vec<(u32, u64)> {
    (0..mds.config().ost_count).flat_map(|ost| queued(mds, ost).into_iter().map(move |object| (ost, object))).collect()
}

fn sorted(mut objects: Vec<(u32, u64)>) -> Vec<(u32, u64)> {
    objects.sort();
    objects
}

#[test]
fn a_commit_swaps_in_the_new_layout_and_queues_the_old_objects() {
    let mut mds = mds(4);
    let file = create_with(&mut mds, "/f", spec(Some(1), Some(MIB), None));
    mds.set_time(&ROOT, "/f", Some(1_000_000_000), Time::Modified).unwrap();
    let before = mds.stat(&ROOT, "/f").unwrap();
    let (now, volatile) = mds.migrate_start(&ROOT, "/f", Some(&spec(Some(3), Some(2 * MIB), None))).unwrap();
    assert_eq!(now, file, "the file as it is");
    assert_ne!(volatile.fid, file.fid);
    assert_eq!((volatile.layout.stripe_count(), volatile.layout.stripe_size()), (3, 2 * MIB));
    mds.check_invariants();
    // Until the commit the file is as it was, and nothing is queued.
    assert_eq!(mds.open_file(&ROOT, "/f", Access::Read).unwrap(), file);
    assert!(all_queued(&mds).is_empty());
    assert_eq!(mds.statfs().unwrap().file_count, 2, "the volatile file is an inode, as Lustre's is");
    let migrated = mds.migrate_commit(&ROOT, "/f", file.fid, volatile.fid).unwrap();
    assert_eq!(migrated, lanefs_proto::FileInfo { fid: file.fid, layout: volatile.layout.clone() });
    assert_eq!(mds.layout_of(file.fid).unwrap(), migrated);
    assert_eq!(sorted(all_queued(&mds)), sorted(objects(&file.layout)), "the old objects go");
    // Queued under the volatile file's fid, which no client holds open.
    assert!(mds.destroys_pending(volatile.fid).unwrap());
    assert!(!mds.destroys_pending(file.fid).unwrap());
    let after = mds.stat(&ROOT, "/f").unwrap();
    assert_eq!((after.fid, after.mtime_ns, after.atime_ns), (before.fid, before.mtime_ns, before.atime_ns));
    assert!(after.ctime_ns >= before.ctime_ns);
    assert_eq!(mds.statfs().unwrap().file_count, 1);
    mds.check_invariants();
    // The swap happened once: a second commit finds no migration.
    let again = mds.migrate_commit(&ROOT, "/f", file.fid, volatile.fid).unwrap_err();
    assert!(matches!(again, MdsError::MigrationGone { .. }), "{again:?}");
    assert_eq!(again.errno(), lanefs_core::Errno::EAGAIN);
}

#[test]
fn without_a_striping_a_file_keeps_its_own_on_other_objects() {
    let mut mds = mds(4);
    let fast = PoolName::parse("fast").unwrap();
    mds.change_pool(&ROOT, &fast, &PoolChange::New).unwrap();
    mds.change_pool(&ROOT, &fast, &PoolChange::Add(vec![1, 2, 3])).unwrap();
    let stripe = StripeSpec { pool: Some(fast), ..spec(Some(2), Some(4 * MIB), None) };
    let file = create_with(&mut mds, "/f", stripe);
    let (_, volatile) = mds.migrate_start(&ROOT, "/f", None).unwrap();
    let new = mds.migrate_commit(&ROOT, "/f", file.fid, volatile.fid).unwrap().layout;
    assert_eq!((new.stripe_count(), new.stripe_size()), (2, 4 * MIB));
    assert!(osts(&new).iter().all(|ost| (1..=3).contains(ost)), "in the file's pool: {:?}", osts(&new));
    assert!(objects(&new).iter().all(|object| !objects(&file.layout).contains(object)));
    assert_eq!(mds.get_stripe(&ROOT, "/f").unwrap().pool, Some(fast));
    // A composite file keeps its components.
    let parts = vec![
        ComponentSpec { end: 8 * MIB, stripe: spec(Some(1), None, None) },
        ComponentSpec { end: u64::MAX, stripe: spec(Some(3), None, None) },
    ];
    let pfl = create_with(&mut mds, "/pfl", StripeSpec { components: Some(parts), ..StripeSpec::default() });
    let (_, volatile) = mds.migrate_start(&ROOT, "/pfl", None).unwrap();
    let new = mds.migrate_commit(&ROOT, "/pfl", pfl.fid, volatile.fid).unwrap().layout;
    assert!(new.is_composite());
    let shape = |layout: &lanefs_core::layout::Layout| -> Vec<(u64, u32)> {
        layout.components().iter().map(|c| (c.end, c.count)).collect()
    };
    assert_eq!(shape(&new), shape(&pfl.layout));
    mds.check_invariants();
}

#[test]
fn an_abandoned_or_replaced_migration_leaves_the_file_as_it_was() {
    let mut mds = mds(4);
    let file = create_with(&mut mds, "/f", spec(Some(1), None, None));
    let (_, first) = mds.migrate_start(&ROOT, "/f", Some(&spec(Some(2), None, None))).unwrap();
    // Another start abandons the first: its objects go.
    let (_, second) = mds.migrate_start(&ROOT, "/f", Some(&spec(Some(4), None, None))).unwrap();
    assert_eq!(sorted(all_queued(&mds)), sorted(objects(&first.layout)));
    let gone = mds.migrate_commit(&ROOT, "/f", file.fid, first.fid).unwrap_err();
    assert!(matches!(gone, MdsError::MigrationGone { .. }), "{gone:?}");
    assert!(gone.to_string().contains("run lanefs migrate again"), "{gone}");
    mds.check_invariants();
    mds.migrate_abort(&ROOT, "/f", file.fid, second.fid).unwrap();
    let mut expected = objects(&first.layout);
    expected.extend(objects(&second.layout));
    assert_eq!(sorted(all_queued(&mds)), sorted(expected));
    assert_eq!(mds.open_file(&ROOT, "/f", Access::Read).unwrap(), file, "the file is as it was");
    assert_eq!(mds.statfs().unwrap().file_count, 1);
    mds.check_invariants();
}

#[test]
fn a_file_removed_or_replaced_during_its_migration_takes_the_migration_with_it() {
    let mut mds = mds(2);
    let file = create(&mut mds, "/f");
    let (_, volatile) = mds.migrate_start(&ROOT, "/f", None).unwrap();
    mds.unlink(&ROOT, "/f").unwrap();
    let mut expected = objects(&file.layout);
    expected.extend(objects(&volatile.layout));
    assert_eq!(sorted(all_queued(&mds)), sorted(expected));
    assert_eq!(mds.statfs().unwrap().file_count, 0);
    mds.check_invariants();
    let gone = mds.migrate_commit(&ROOT, "/f", file.fid, volatile.fid).unwrap_err();
    assert!(matches!(gone, MdsError::NotFound { .. }), "{gone:?}");
    // Another file at the path is not the one migrating.
    let g = create(&mut mds, "/g");
    let (_, volatile) = mds.migrate_start(&ROOT, "/g", None).unwrap();
    create(&mut mds, "/h");
    mds.rename(&ROOT, "/h", "/g").unwrap();
    assert_eq!(mds.statfs().unwrap().file_count, 1, "/g and its migration went");
    let replaced = mds.migrate_commit(&ROOT, "/g", g.fid, volatile.fid).unwrap_err();
    assert!(matches!(replaced, MdsError::MigrationGone { .. }), "{replaced:?}");
    mds.check_invariants();
}

#[test]
fn only_a_writer_migrates_a_file_and_only_a_file() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/d");
    create(&mut mds, "/f");
    let alice = Credentials::user(1000, 1000);
    let denied = mds.migrate_start(&alice, "/f", None).unwrap_err();
    assert!(matches!(denied, MdsError::PermissionDenied { .. }), "{denied:?}");
    mds.set_attr(&ROOT, "/f", Some(0o666), (None, None)).unwrap();
    let (file, volatile) = mds.migrate_start(&alice, "/f", None).unwrap();
    let owner = |mds: &Mds| {
        let attr = mds.stat(&ROOT, "/f").unwrap();
        (attr.uid, attr.gid, attr.permissions)
    };
    assert_eq!(owner(&mds), (0, 0, 0o666));
    mds.migrate_commit(&alice, "/f", file.fid, volatile.fid).unwrap();
    assert_eq!(owner(&mds), (0, 0, 0o666), "the file keeps its owner and mode");
    let dir = mds.migrate_start(&ROOT, "/d", None).unwrap_err();
    assert!(matches!(dir, MdsError::IsADirectory { .. }), "{dir:?}");
    mds.mknod(&ROOT, "/p", FileKind::Fifo, 0o644, 0).unwrap();
    let pipe = mds.migrate_start(&ROOT, "/p", None).unwrap_err();
    assert!(matches!(pipe, MdsError::NotAFile { .. }), "{pipe:?}");
    let missing = mds.migrate_start(&ROOT, "/none", None).unwrap_err();
    assert!(matches!(missing, MdsError::NotFound { .. }), "{missing:?}");
    let bad = mds.migrate_start(&ROOT, "/f", Some(&spec(Some(3), None, None))).unwrap_err();
    assert!(matches!(bad, MdsError::InvalidStripe { .. }), "more stripes than OSTs: {bad:?}");
    mds.check_invariants();
}

/// A migration under way survives a restart of the MDS (its rows are in
/// the database), and a version 7 database gains the table.
#[test]
fn a_migration_is_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    fill_pools(&mut mds);
    let file = create(&mut mds, "/f");
    let (_, volatile) = mds.migrate_start(&ROOT, "/f", Some(&spec(Some(2), None, None))).unwrap();
    drop(mds);
    let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    mds.check_invariants();
    assert_eq!(mds.migrate_commit(&ROOT, "/f", file.fid, volatile.fid).unwrap().layout, volatile.layout);
    mds.check_invariants();
}

/// A version 7 database (no migrations) gains the table, empty, and its
/// files can be migrated.
#[test]
fn a_version_7_database_gains_migrations() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    fill_pools(&mut mds);
    let file = create(&mut mds, "/f");
    drop(mds);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("DROP TABLE migrations; PRAGMA user_version = 7;").unwrap();
    drop(conn);
    let mut mds = Mds::open(&db, MdsConfig::new(2)).unwrap();
    mds.check_invariants();
    let (now, volatile) = mds.migrate_start(&ROOT, "/f", None).unwrap();
    assert_eq!(now, file);
    mds.migrate_commit(&ROOT, "/f", file.fid, volatile.fid).unwrap();
    mds.check_invariants();
}
