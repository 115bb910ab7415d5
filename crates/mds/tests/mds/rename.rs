//! Rename, with POSIX `rename(2)` semantics.

use crate::*;
use lanefs_proto::{FileKind, MdsError};

#[test]
fn rename_a_file_within_and_across_directories() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/a");
    mkdir(&mut mds, "/b");
    let made = create(&mut mds, "/a/f");
    assert_eq!(mds.rename(&ROOT, "/a/f", "/a/g").unwrap(), None);
    assert_eq!(names(&mds, "/a"), ["g"]);
    assert_eq!(mds.rename(&ROOT, "/a/g", "/b/h").unwrap(), None);
    assert!(names(&mds, "/a").is_empty());
    assert_eq!(mds.open_file(&ROOT, "/b/h", Access::Read).unwrap(), made, "same fid, same layout");
    mds.check_invariants();
}

#[test]
fn rename_onto_a_file_replaces_it_and_returns_its_objects() {
    let mut mds = mds(4);
    let source = create(&mut mds, "/src");
    let target = create_with(&mut mds, "/dst", spec(Some(2), None, None));
    assert_eq!(mds.rename(&ROOT, "/src", "/dst").unwrap(), Some(target.layout));
    assert_eq!(mds.open_file(&ROOT, "/dst", Access::Read).unwrap(), source);
    assert_eq!(names(&mds, "/"), ["dst"]);
    assert_eq!(mds.statfs().unwrap().file_count, 1);
    mds.check_invariants();
}

#[test]
fn rename_a_directory_moves_its_subtree() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/a");
    mkdir(&mut mds, "/a/b");
    let deep = create(&mut mds, "/a/b/f");
    mkdir(&mut mds, "/z");
    mds.rename(&ROOT, "/a", "/z/moved").unwrap();
    assert_eq!(mds.open_file(&ROOT, "/z/moved/b/f", Access::Read).unwrap(), deep);
    assert_eq!(names(&mds, "/"), ["z"]);
    mds.check_invariants();
}

#[test]
fn rename_a_directory_onto_an_empty_directory_replaces_it() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/a");
    create(&mut mds, "/a/f");
    mkdir(&mut mds, "/empty");
    let moved = mds.stat(&ROOT, "/a").unwrap().fid;
    assert_eq!(mds.rename(&ROOT, "/a", "/empty").unwrap(), None);
    assert_eq!(mds.stat(&ROOT, "/empty").unwrap().fid, moved);
    assert_eq!(names(&mds, "/empty"), ["f"]);
    assert_eq!(mds.statfs().unwrap().dir_count, 2);
    mds.check_invariants();
}

#[test]
fn rename_refusals() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/a");
    mkdir(&mut mds, "/a/b");
    mkdir(&mut mds, "/full");
    create(&mut mds, "/full/x");
    create(&mut mds, "/f");
    let refuse = |mds: &mut Mds, from: &str, to: &str| mds.rename(&ROOT, from, to).unwrap_err();
    assert_eq!(refuse(&mut mds, "/f", "/a"), MdsError::IsADirectory { path: "/a".into() });
    assert_eq!(refuse(&mut mds, "/a", "/f"), MdsError::NotADirectory { path: "/f".into(), file: "/f".into() });
    assert_eq!(refuse(&mut mds, "/a", "/full"), MdsError::NotEmpty { path: "/full".into(), entry_count: 1 });
    let into_itself = refuse(&mut mds, "/a", "/a/b/c");
    assert_eq!(into_itself, MdsError::RenameIntoItself { from: "/a".into(), to: "/a/b/c".into() });
    assert!(into_itself.to_string().starts_with("cannot move directory /a into itself"));
    assert_eq!(refuse(&mut mds, "/a/b", "/a"), MdsError::NotEmpty { path: "/a".into(), entry_count: 1 });
    assert_eq!(refuse(&mut mds, "/nope", "/x"), not_found("/nope", "/nope"));
    assert_eq!(refuse(&mut mds, "/f", "/nodir/x"), not_found("/nodir/x", "/nodir"));
    assert_eq!(refuse(&mut mds, "/f", "/f/x"), MdsError::NotADirectory { path: "/f/x".into(), file: "/f".into() });
    assert_eq!(refuse(&mut mds, "/", "/r"), MdsError::RootDirectory { action: "rename".into() });
    assert_eq!(refuse(&mut mds, "/a", "/"), MdsError::RootDirectory { action: "replace".into() });
    // Nothing moved.
    assert_eq!(names(&mds, "/"), ["a", "f", "full"]);
    assert_eq!(names(&mds, "/a"), ["b"]);
    mds.check_invariants();
}

#[test]
fn rename_onto_itself_is_a_no_op() {
    let mut mds = mds(2);
    let made = create(&mut mds, "/f");
    mkdir(&mut mds, "/d");
    assert_eq!(mds.rename(&ROOT, "/f", "//f/").unwrap(), None);
    assert_eq!(mds.rename(&ROOT, "/d", "/d").unwrap(), None);
    assert_eq!(mds.open_file(&ROOT, "/f", Access::Read).unwrap(), made);
    assert_eq!(mds.stat(&ROOT, "/d").unwrap().kind, FileKind::Dir);
    mds.check_invariants();
}
