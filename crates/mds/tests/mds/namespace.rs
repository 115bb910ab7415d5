//! Directories and files: each operation, and each way it can fail.

use crate::*;
use lanefs_proto::{Fid, FileKind, MdsError, Statfs};

#[test]
fn root_exists_from_the_start() {
    let mds = mds(4);
    let root = mds.stat(&ROOT, "/").unwrap();
    assert_eq!((root.fid, root.kind, root.layout), (Fid::ROOT, FileKind::Dir, None));
    assert!(root.mtime_ns > 0);
    assert!(mds.readdir(&ROOT, "/", None).unwrap().entries.is_empty());
    assert_eq!(mds.statfs().unwrap(), Statfs { ost_count: 4, file_count: 0, dir_count: 1, space: None });
    mds.check_invariants();
}

#[test]
fn mkdir_then_stat_and_readdir() {
    let mut mds = mds(2);
    let made = mds.mkdir(&ROOT, "/a", 0o755).unwrap();
    assert_eq!((made.kind, made.layout.clone()), (FileKind::Dir, None));
    assert_eq!(mds.stat(&ROOT, "/a").unwrap(), made);
    mkdir(&mut mds, "/a/b");
    let file = create(&mut mds, "/a/f");
    mkdir(&mut mds, "/a/C");
    let entries = mds.readdir(&ROOT, "/a", None).unwrap().entries;
    let listed: Vec<_> = entries.iter().map(|e| (e.name.as_str(), e.kind)).collect();
    assert_eq!(listed, [("C", FileKind::Dir), ("b", FileKind::Dir), ("f", FileKind::File)]);
    assert_eq!(entries[2].fid, file.fid);
    assert_eq!(entries[0].fid, mds.stat(&ROOT, "/a/C").unwrap().fid);
    let fids: std::collections::BTreeSet<_> = [Fid::ROOT, made.fid, entries[0].fid, entries[1].fid, file.fid].into();
    assert_eq!(fids.len(), 5, "fids are distinct");
    mds.check_invariants();
}

#[test]
fn mkdir_errors() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/a");
    create(&mut mds, "/f");
    assert_eq!(mds.mkdir(&ROOT, "/a", 0o755).unwrap_err(), MdsError::Exists { path: "/a".into() });
    assert_eq!(mds.mkdir(&ROOT, "/f", 0o755).unwrap_err(), MdsError::Exists { path: "/f".into() });
    assert_eq!(mds.mkdir(&ROOT, "/", 0o755).unwrap_err(), MdsError::Exists { path: "/".into() });
    let missing = mds.mkdir(&ROOT, "/x/y/z", 0o755).unwrap_err();
    assert_eq!(missing, not_found("/x/y/z", "/x"));
    assert_eq!(
        missing.to_string(),
        "no such file or directory: /x/y/z (directory /x does not exist: create it with mkdir first)"
    );
    assert_eq!(
        mds.mkdir(&ROOT, "/f/d", 0o755).unwrap_err(),
        MdsError::NotADirectory { path: "/f/d".into(), file: "/f".into() }
    );
    assert!(matches!(mds.mkdir(&ROOT, "a", 0o755).unwrap_err(), MdsError::InvalidPath { .. }));
    assert_eq!(mds.statfs().unwrap().dir_count, 2, "failed mkdirs leave nothing behind");
    mds.check_invariants();
}

#[test]
fn paths_are_normalised_and_checked() {
    let mut mds = mds(2);
    mkdir(&mut mds, "//a///");
    mkdir(&mut mds, "/./a/./b/");
    create(&mut mds, "/a//b/./f");
    assert_eq!(names(&mds, "/a/b"), ["f"]);
    assert_eq!(mds.stat(&ROOT, "/a/b/f/").unwrap(), mds.stat(&ROOT, "/a/b/f").unwrap());
    let invalid = |path: &str| match mds.stat(&ROOT, path).unwrap_err() {
        MdsError::InvalidPath { path: reported, reason } => {
            assert_eq!(reported, path);
            reason
        }
        other => panic!("{path:?}: expected InvalidPath, got {other:?}"),
    };
    assert!(invalid("").contains("empty"));
    assert!(invalid("a/b").contains("relative"));
    assert!(invalid("/a/../b").contains("'..' is not supported"));
    assert!(invalid("/a/\0").contains("NUL"));
    assert!(invalid(&format!("/{}", "n".repeat(256))).contains("256 bytes long"));
    let error = mds.mkdir(&ROOT, "/a/../c", 0o755).unwrap_err();
    assert!(error.to_string().starts_with("invalid path \"/a/../c\": '..' is not supported"), "{error}");
}

#[test]
fn create_modes() {
    let mut mds = mds(4);
    mkdir(&mut mds, "/d");
    let made = create_with(&mut mds, "/f", spec(Some(2), None, None));
    assert_eq!(made.layout.stripe_count(), 2);
    let exclusive = try_create(&mut mds, "/f", &StripeSpec::default(), CreateMode::Exclusive).unwrap_err();
    assert_eq!(exclusive, MdsError::Exists { path: "/f".into() });
    // O_CREAT without O_EXCL opens the file as it is: no new objects, the stripe request ignored.
    let reopened = try_create(&mut mds, "/f", &spec(Some(4), None, None), CreateMode::OpenOrCreate).unwrap();
    assert_eq!(reopened, made);
    let fresh = try_create(&mut mds, "/g", &StripeSpec::default(), CreateMode::OpenOrCreate).unwrap();
    assert_ne!(fresh.fid, made.fid);
    assert_eq!(try_create(&mut mds, "/d", &StripeSpec::default(), CreateMode::OpenOrCreate).unwrap_err(), is_dir("/d"));
    assert_eq!(
        try_create(&mut mds, "/d", &StripeSpec::default(), CreateMode::Exclusive).unwrap_err(),
        MdsError::Exists { path: "/d".into() }
    );
    assert_eq!(try_create(&mut mds, "/", &StripeSpec::default(), CreateMode::OpenOrCreate).unwrap_err(), is_dir("/"));
    assert_eq!(
        try_create(&mut mds, "/no/f", &StripeSpec::default(), CreateMode::OpenOrCreate).unwrap_err(),
        not_found("/no/f", "/no")
    );
    assert_eq!(mds.statfs().unwrap().file_count, 2);
    mds.check_invariants();
}

fn is_dir(path: &str) -> MdsError {
    MdsError::IsADirectory { path: path.into() }
}

#[test]
fn open_and_stat() {
    let mut mds = mds(3);
    mkdir(&mut mds, "/d");
    let made = create(&mut mds, "/d/f");
    assert_eq!(mds.open_file(&ROOT, "/d/f", Access::Read).unwrap(), made);
    let attr = mds.stat(&ROOT, "/d/f").unwrap();
    assert_eq!((attr.fid, attr.kind, attr.layout), (made.fid, FileKind::File, Some(made.layout)));
    assert_eq!(mds.open_file(&ROOT, "/d", Access::Read).unwrap_err(), is_dir("/d"));
    assert_eq!(mds.open_file(&ROOT, "/", Access::Read).unwrap_err(), is_dir("/"));
    assert_eq!(mds.open_file(&ROOT, "/d/g", Access::Read).unwrap_err(), not_found("/d/g", "/d/g"));
    assert_eq!(mds.stat(&ROOT, "/d/g").unwrap_err().to_string(), "no such file or directory: /d/g");
    assert_eq!(
        mds.stat(&ROOT, "/d/f/x").unwrap_err(),
        MdsError::NotADirectory { path: "/d/f/x".into(), file: "/d/f".into() }
    );
    assert_eq!(mds.stat(&ROOT, "/e/f").unwrap_err(), not_found("/e/f", "/e"));
}

#[test]
fn directory_mtime_moves_with_its_entries() {
    let mut mds = mds(1);
    let before = mds.mkdir(&ROOT, "/d", 0o755).unwrap().mtime_ns;
    create(&mut mds, "/d/f");
    let after_create = mds.stat(&ROOT, "/d").unwrap().mtime_ns;
    assert!(after_create >= before);
    mds.unlink(&ROOT, "/d/f").unwrap();
    assert!(mds.stat(&ROOT, "/d").unwrap().mtime_ns >= after_create);
}

#[test]
fn readdir_errors() {
    let mut mds = mds(1);
    create(&mut mds, "/f");
    let error = mds.readdir(&ROOT, "/f", None).unwrap_err();
    assert_eq!(error, MdsError::NotADirectory { path: "/f".into(), file: "/f".into() });
    assert!(error.to_string().contains("remove files with unlink"));
    assert_eq!(mds.readdir(&ROOT, "/nope", None).unwrap_err(), not_found("/nope", "/nope"));
}

#[test]
fn unlink_returns_the_objects_to_destroy() {
    let mut mds = mds(4);
    mkdir(&mut mds, "/d");
    let made = create_with(&mut mds, "/d/f", spec(Some(3), None, None));
    assert_eq!(mds.unlink(&ROOT, "/d/f").unwrap(), Some(made.layout));
    assert!(names(&mds, "/d").is_empty());
    assert_eq!(mds.stat(&ROOT, "/d/f").unwrap_err(), not_found("/d/f", "/d/f"));
    assert_eq!(mds.unlink(&ROOT, "/d/f").unwrap_err(), not_found("/d/f", "/d/f"));
    assert_eq!(mds.unlink(&ROOT, "/d").unwrap_err(), is_dir("/d"));
    assert_eq!(mds.unlink(&ROOT, "/").unwrap_err(), is_dir("/"));
    assert_eq!(mds.unlink(&ROOT, "/x/f").unwrap_err(), not_found("/x/f", "/x"));
    assert_eq!(mds.statfs().unwrap(), Statfs { ost_count: 4, file_count: 0, dir_count: 2, space: None });
    mds.check_invariants();
}

#[test]
fn rmdir_removes_only_empty_directories() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/d");
    mkdir(&mut mds, "/d/e");
    create(&mut mds, "/d/f");
    let error = mds.rmdir(&ROOT, "/d").unwrap_err();
    assert_eq!(error, MdsError::NotEmpty { path: "/d".into(), entry_count: 2 });
    assert_eq!(error.to_string(), "directory not empty: /d holds 2 entries (remove them first)");
    assert_eq!(
        mds.rmdir(&ROOT, "/d/f").unwrap_err(),
        MdsError::NotADirectory { path: "/d/f".into(), file: "/d/f".into() }
    );
    assert_eq!(mds.rmdir(&ROOT, "/").unwrap_err(), MdsError::RootDirectory { action: "remove".into() });
    assert_eq!(mds.rmdir(&ROOT, "/d/x").unwrap_err(), not_found("/d/x", "/d/x"));
    mds.rmdir(&ROOT, "/d/e").unwrap();
    mds.unlink(&ROOT, "/d/f").unwrap();
    mds.rmdir(&ROOT, "/d").unwrap();
    assert!(names(&mds, "/").is_empty());
    assert_eq!(mds.statfs().unwrap(), Statfs { ost_count: 2, file_count: 0, dir_count: 1, space: None });
    mds.check_invariants();
}

#[test]
fn fids_are_never_reused() {
    let mut mds = mds(1);
    let first = create(&mut mds, "/f").fid;
    mds.unlink(&ROOT, "/f").unwrap();
    let second = create(&mut mds, "/f").fid;
    assert!(second > first, "{second:?} after {first:?}");
}
