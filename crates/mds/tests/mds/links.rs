//! Hard links, symbolic links and the three times, and the rebuild of a
//! database of the schema before them.

use crate::*;
use lanefs_mds::Time;
use lanefs_proto::{Attr, FileKind, MdsConfig, MdsRequest};

fn stat(mds: &Mds, path: &str) -> Attr {
    mds.stat(&ROOT, path).unwrap()
}

#[test]
fn a_file_with_two_names_goes_with_the_last_and_rename_between_them_does_nothing() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/d");
    let made = create(&mut mds, "/d/f");
    let linked = mds.link(&ROOT, "/d/f", "/g").unwrap();
    assert_eq!((linked.fid, linked.nlink), (made.fid, 2));
    assert_eq!(stat(&mds, "/d/f").nlink, 2);
    assert_eq!(mds.link(&ROOT, "/d/f", "/g").unwrap_err().errno(), lanefs_core::Errno::EEXIST);
    assert_eq!(mds.link(&ROOT, "/d", "/e").unwrap_err().errno(), lanefs_core::Errno::EPERM, "no links to directories");
    mds.rename(&ROOT, "/g", "/d/f").unwrap();
    assert_eq!(stat(&mds, "/g").nlink, 2, "renaming one name of an inode onto another does nothing");
    assert_eq!(mds.unlink(&ROOT, "/d/f").unwrap(), None, "a name goes; the file stays");
    assert_eq!(stat(&mds, "/g").nlink, 1);
    mds.check_invariants();
    let object = made.layout.objects()[0];
    assert_eq!(mds.unlink(&ROOT, "/g").unwrap(), Some(made.layout), "the last name takes the file");
    assert_eq!(mds.queued_destroys(object.ost, 10).unwrap(), [object.object], "and its objects");
    mds.check_invariants();
}

#[test]
fn renaming_over_one_name_of_a_linked_file_keeps_the_file() {
    let mut mds = mds(1);
    let kept = create(&mut mds, "/a");
    mds.link(&ROOT, "/a", "/b").unwrap();
    create(&mut mds, "/c");
    assert_eq!(mds.rename(&ROOT, "/c", "/a").unwrap(), None, "/a's inode still has /b");
    assert_eq!(stat(&mds, "/b").fid, kept.fid);
    assert_eq!(stat(&mds, "/b").nlink, 1);
    mds.check_invariants();
}

#[test]
fn symbolic_links_keep_their_target_and_are_not_followed() {
    let mut mds = mds(1);
    mkdir(&mut mds, "/d");
    create(&mut mds, "/d/f");
    let link = mds.symlink(&ROOT, "/l", "d/f").unwrap();
    assert_eq!(
        (link.kind, link.target.as_deref(), link.permissions, link.nlink),
        (FileKind::Symlink, Some("d/f"), 0o777, 1)
    );
    assert_eq!(stat(&mds, "/l").target.as_deref(), Some("d/f"));
    assert_eq!(mds.symlink(&ROOT, "/l", "x").unwrap_err().errno(), lanefs_core::Errno::EEXIST);
    assert_eq!(mds.open_file(&ROOT, "/l", Access::Read).unwrap_err().errno(), lanefs_core::Errno::ELOOP);
    mds.symlink(&ROOT, "/ld", "d").unwrap();
    assert_eq!(mds.stat(&ROOT, "/ld/f").unwrap_err().errno(), lanefs_core::Errno::ELOOP, "a link inside a path");
    let long = "x".repeat(4096);
    assert_eq!(mds.symlink(&ROOT, "/long", &long).unwrap_err().errno(), lanefs_core::Errno::ENAMETOOLONG);
    assert_eq!(mds.symlink(&ROOT, "/empty", "").unwrap_err().errno(), lanefs_core::Errno::EINVAL);
    let entries = mds.readdir(&ROOT, "/", None).unwrap().entries;
    let kinds: Vec<_> = entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
    assert_eq!(kinds, [("d", FileKind::Dir), ("l", FileKind::Symlink), ("ld", FileKind::Symlink)]);
    mds.link(&ROOT, "/l", "/l2").unwrap();
    assert_eq!(stat(&mds, "/l2").nlink, 2, "a symbolic link may have hard links");
    assert_eq!(mds.unlink(&ROOT, "/l").unwrap(), None);
    assert_eq!(mds.unlink(&ROOT, "/l2").unwrap(), None, "a symbolic link has no objects");
    mds.check_invariants();
    assert_eq!(stat(&mds, "/").nlink, 3, "the root: 2 and one subdirectory");
}

#[test]
fn access_and_change_times_are_kept_apart_from_the_modification_time() {
    let mut mds = mds(1);
    create(&mut mds, "/f");
    let made = stat(&mds, "/f");
    assert_eq!((made.atime_ns, made.ctime_ns), (made.mtime_ns, made.mtime_ns));
    let a = mds.set_time(&ROOT, "/f", Some(1_000_000_000), Time::Accessed).unwrap();
    assert_eq!((a.atime_ns, a.mtime_ns), (1_000_000_000, made.mtime_ns));
    assert!(a.ctime_ns >= made.ctime_ns, "setting a time changes the inode");
    let m = mds.set_time(&ROOT, "/f", Some(2_000_000_000), Time::Modified).unwrap();
    assert_eq!((m.atime_ns, m.mtime_ns), (1_000_000_000, 2_000_000_000));
    assert!(m.ctime_ns > 2_000_000_000, "the change time is the MDS's clock, not the time given");
    let chmod =
        mds.handle(&ROOT, MdsRequest::SetAttr { path: "/f".into(), permissions: Some(0o600), uid: None, gid: None });
    let lanefs_proto::MdsReply::Attr(chmod) = chmod else { panic!("{chmod:?}") };
    assert!(chmod.ctime_ns >= m.ctime_ns && chmod.mtime_ns == 2_000_000_000);
}

/// A database of schema version 2 (no links, one time per inode) is
/// rebuilt as version 8 when opened: every inode and name kept, the new
/// times starting at the modification time.
#[test]
fn a_version_2_database_is_rebuilt_and_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(include_str!("schema_v2.sql")).unwrap();
        conn.execute_batch(
            "INSERT INTO inodes (fid, kind, mtime_ns, uid, gid, permissions) VALUES (1, 2, 5, 0, 0, 493);
             INSERT INTO inodes (fid, kind, mtime_ns, uid, gid, permissions, default_count) VALUES (2, 2, 6, 7, 8, 488, 1);
             INSERT INTO inodes (fid, kind, mtime_ns, uid, gid, permissions, stripe_size) VALUES (3, 1, 9, 7, 8, 420, 1048576);
             INSERT INTO dentries (parent, name, fid) VALUES (1, 'd', 2), (2, 'f', 3);
             INSERT INTO ost_counters (ost, next_object, precreated) VALUES (0, 2, 10);
             INSERT INTO objects (fid, stripe, ost, object) VALUES (3, 0, 0, 1);
             INSERT INTO meta (key, value) VALUES ('next_fid', 4), ('round_robin', 0), ('ost_count', 1);
             PRAGMA user_version = 2;",
        )
        .unwrap();
    }
    let mut mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
    mds.check_invariants();
    let f = stat(&mds, "/d/f");
    assert_eq!((f.fid.0, f.mtime_ns, f.atime_ns, f.ctime_ns, f.uid, f.permissions, f.nlink), (3, 9, 9, 9, 7, 0o644, 1));
    assert_eq!(stat(&mds, "/d").mtime_ns, 6);
    assert_eq!(mds.get_stripe(&ROOT, "/d").unwrap().default.count, 1, "a directory default is kept");
    mds.link(&ROOT, "/d/f", "/g").unwrap();
    mds.symlink(&ROOT, "/l", "/g").unwrap();
    mds.check_invariants();
    drop(mds);
    let mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
    assert_eq!(stat(&mds, "/g").nlink, 2, "and it opens again as version 8");
}
