//! The database file: restarts, schema versions, OST counts, exclusivity.

use crate::*;
use lanefs_mds::schema::SCHEMA_VERSION;
use lanefs_proto::{Attr, DirEntry, MdsConfig, MdsError, Statfs, StripeInfo};
use std::path::Path;

/// Everything a client can observe, path by path (depth first).
fn snapshot(mds: &Mds) -> Vec<(String, Attr, StripeInfo, Option<Vec<DirEntry>>)> {
    let mut seen = Vec::new();
    let mut pending = vec!["/".to_string()];
    while let Some(path) = pending.pop() {
        let attr = mds.stat(&ROOT, &path).unwrap();
        let stripe = mds.get_stripe(&ROOT, &path).unwrap();
        let entries =
            (attr.kind == lanefs_proto::FileKind::Dir).then(|| mds.readdir(&ROOT, &path, None).unwrap().entries);
        for entry in entries.iter().flatten() {
            pending.push(format!("{}/{}", path.trim_end_matches('/'), entry.name));
        }
        seen.push((path, attr, stripe, entries));
    }
    seen
}

/// Opens the database at `path` with every OST's pool filled.
fn open(path: &Path, ost_count: u32) -> Result<Mds, MdsError> {
    let mut mds = Mds::open(path, MdsConfig::new(ost_count))?;
    fill_pools(&mut mds);
    Ok(mds)
}

#[test]
fn a_restart_keeps_namespace_layouts_defaults_and_counters() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let (before, statfs, unlinked) = {
        let mut mds = open(&db, 4).unwrap();
        mkdir(&mut mds, "/a");
        mkdir(&mut mds, "/a/b");
        mds.set_stripe(&ROOT, "/a", &spec(Some(2), Some(4 * MIB), None)).unwrap();
        create(&mut mds, "/a/b/f");
        create_with(&mut mds, "/g", spec(Some(-1), None, Some(1)));
        create(&mut mds, "/h");
        let unlinked = mds.unlink(&ROOT, "/h").unwrap();
        mds.rename(&ROOT, "/g", "/a/g").unwrap();
        mds.check_invariants();
        (snapshot(&mds), mds.statfs().unwrap(), unlinked)
    };
    let mut mds = open(&db, 4).unwrap();
    mds.check_invariants();
    assert_eq!(snapshot(&mds), before);
    // The counts survive; the space is the disk's now (its free figures move).
    assert_eq!(Statfs { space: None, ..mds.statfs().unwrap() }, Statfs { space: None, ..statfs });
    let space = statfs.space.expect("a database on disk reports its file system's space");
    assert!(space.total_bytes >= space.free_bytes && space.total_bytes > 0, "{space:?}");
    assert!(space.total_inodes >= space.free_inodes, "{space:?}");
    // Counters survived: the rotation continues (files /a/b/f and /h used
    // starts 0 and 1), and no object id is handed out twice, not even the
    // unlinked file's.
    assert_eq!(objects(unlinked.as_ref().unwrap()), [(1, 3)]);
    let next = create(&mut mds, "/next").layout;
    assert_eq!(objects(&next), [(2, 2)]);
    let all = create_with(&mut mds, "/all", spec(Some(-1), None, Some(0))).layout;
    assert_eq!(objects(&all), [(0, 3), (1, 4), (2, 3), (3, 2)]);
    let fids: Vec<_> = before.iter().map(|(_, attr, _, _)| attr.fid).collect();
    assert!(fids.iter().all(|&fid| fid < mds.stat(&ROOT, "/next").unwrap().fid));
    mds.check_invariants();
}

#[test]
fn the_database_is_in_wal_mode_and_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    drop(open(&db, 2).unwrap());
    // Held from open, before any request (an existing database: open writes nothing).
    let mut first = open(&db, 2).unwrap();
    assert_eq!(open(&db, 2).unwrap_err(), MdsError::DatabaseBusy { path: db.display().to_string() });
    create(&mut first, "/f");
    assert!(dir.path().join("mds.db-wal").exists(), "WAL file next to the database");
    let busy = open(&db, 2).unwrap_err();
    assert_eq!(busy, MdsError::DatabaseBusy { path: db.display().to_string() });
    assert!(busy.to_string().contains("in use by another MDS"));
    drop(first);
    assert_eq!(names(&open(&db, 2).unwrap(), "/"), ["f"]);
}

#[test]
fn the_database_and_its_wal_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let mut mds = open(&db, 2).unwrap();
    create(&mut mds, "/f");
    for name in ["mds.db", "mds.db-wal"] {
        let mode = std::fs::metadata(dir.path().join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}");
    }
}

#[test]
fn adding_osts_is_allowed_and_removing_them_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    drop(open(&db, 2).unwrap());
    let error = open(&db, 1).unwrap_err();
    assert_eq!(error, MdsError::OstCountDecreased { recorded_ost_count: 2, configured_ost_count: 1 });
    assert!(error.to_string().contains("configure 2 or more OSTs"), "{error}");
    let mut grown = open(&db, 3).unwrap();
    assert_eq!(grown.statfs().unwrap().ost_count, 3);
    assert_eq!(grown.config().ost_count, 3);
    assert_eq!(osts(&create_with(&mut grown, "/all", spec(Some(-1), None, None)).layout), [0, 1, 2]);
    grown.check_invariants();
    drop(grown);
    assert_eq!(
        open(&db, 2).unwrap_err(),
        MdsError::OstCountDecreased { recorded_ost_count: 3, configured_ost_count: 2 }
    );
}

#[test]
fn another_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    drop(open(&db, 2).unwrap());
    rusqlite::Connection::open(&db).unwrap().pragma_update(None, "user_version", 99).unwrap();
    let error = open(&db, 2).unwrap_err();
    let path = db.display().to_string();
    assert_eq!(error, MdsError::SchemaVersion { path, found_version: 99, expected_version: SCHEMA_VERSION });
    assert!(error.to_string().contains("has schema version 99, but this lanefs-mds uses version 8"));
    // A database of the release before owners, permissions and precreation.
    rusqlite::Connection::open(&db).unwrap().pragma_update(None, "user_version", 1).unwrap();
    let error = open(&db, 2).unwrap_err();
    assert!(error.to_string().contains("has schema version 1, but this lanefs-mds uses version 8"), "{error}");
    assert!(error.to_string().contains("open it with the lanefs release that wrote it"), "{error}");
}

#[test]
fn other_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
    let error = open(&other, 2).unwrap_err();
    assert!(matches!(&error, MdsError::NotAnMdsDatabase { reason, .. } if reason.contains("no lanefs schema version")));
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "this is not a database, it is a shopping list. ".repeat(100)).unwrap();
    let error = open(&text, 2).unwrap_err();
    let path = text.display().to_string();
    assert_eq!(error, MdsError::NotAnMdsDatabase { path, reason: "it is not an SQLite database".into() });
    let missing_dir = dir.path().join("no/such/dir/mds.db");
    assert!(
        matches!(open(&missing_dir, 2).unwrap_err(), MdsError::Database(message) if message.contains("cannot open"))
    );
}

#[test]
fn a_bad_configuration_is_refused_before_the_database_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    assert!(matches!(open(&db, 0).unwrap_err(), MdsError::InvalidConfig { .. }));
    let config = MdsConfig { default_stripe_count: 3, ..MdsConfig::new(2) };
    let error = Mds::open(&db, config).unwrap_err();
    assert!(error.to_string().contains("stripe count 3 exceeds the 2 OSTs available"), "{error}");
    assert!(!db.exists());
}
