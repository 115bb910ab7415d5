//! Owners, groups and permission bits: what each request needs, for whom.

use crate::*;
use lanefs_mds::Time;
use lanefs_proto::{FileKind, MdsError, Owner};

const ALICE: u32 = 1000;
const BOB: u32 = 1001;
const STAFF: u32 = 50;

fn alice() -> Credentials {
    Credentials::user(ALICE, ALICE)
}

fn bob() -> Credentials {
    Credentials::user(BOB, BOB)
}

/// A file system whose `/home` (0777) holds `/home/alice` (alice's, 0755).
fn shared() -> Mds {
    let mut mds = mds(2);
    mds.mkdir(&ROOT, "/home", 0o777).unwrap();
    mds.mkdir(&alice(), "/home/alice", 0o755).unwrap();
    mds
}

fn create_as(mds: &mut Mds, who: &Credentials, path: &str, permissions: u32) -> Result<FileInfo, MdsError> {
    mds.create(who, path, &StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite, permissions)
}

fn denied(path: &str, on: &str, needed: &str, uid: u32) -> MdsError {
    MdsError::PermissionDenied { path: path.into(), on: on.into(), needed: needed.into(), uid }
}

fn not_permitted(error: MdsError) -> String {
    match error {
        MdsError::NotPermitted { reason, .. } => reason,
        other => panic!("expected NotPermitted, got {other:?}"),
    }
}

#[test]
fn the_root_of_a_new_file_system_belongs_to_its_creator_with_mode_0755() {
    let config = MdsConfig { root_owner: Owner { uid: 4242, gid: 77 }, ..MdsConfig::new(1) };
    let mds = Mds::open_in_memory(config).unwrap();
    let root = mds.stat(&ROOT, "/").unwrap();
    assert_eq!((root.uid, root.gid, root.permissions), (4242, 77, 0o755));
    assert_eq!(lanefs_proto::mode_string(root.kind, root.permissions), "drwxr-xr-x");
    mds.check_invariants();
}

#[test]
fn new_inodes_take_the_callers_ids_and_the_requested_permissions() {
    let mut mds = shared();
    let dir = mds.stat(&ROOT, "/home/alice").unwrap();
    assert_eq!((dir.uid, dir.gid, dir.permissions), (ALICE, ALICE, 0o755));
    create_as(&mut mds, &alice(), "/home/alice/f", 0o100640).unwrap();
    let file = mds.stat(&alice(), "/home/alice/f").unwrap();
    assert_eq!((file.kind, file.uid, file.gid, file.permissions), (FileKind::File, ALICE, ALICE, 0o640));
    let listed = &mds.readdir(&alice(), "/home/alice", None).unwrap().entries[0];
    assert_eq!((listed.uid, listed.gid, listed.permissions), (ALICE, ALICE, 0o640));
    mds.check_invariants();
}

#[test]
fn a_setgid_directory_gives_its_group_to_new_entries() {
    let mut mds = mds(1);
    mds.mkdir(&ROOT, "/project", 0o777).unwrap();
    mds.set_attr(&ROOT, "/project", Some(0o2777), (None, Some(STAFF))).unwrap();
    let member = alice().with_groups(vec![STAFF]);
    mds.mkdir(&member, "/project/sub", 0o755).unwrap();
    let sub = mds.stat(&ROOT, "/project/sub").unwrap();
    assert_eq!((sub.uid, sub.gid, sub.permissions), (ALICE, STAFF, 0o2755), "the group and setgid pass on");
    create_as(&mut mds, &bob(), "/project/b", 0o2644).unwrap();
    let file = mds.stat(&ROOT, "/project/b").unwrap();
    assert_eq!((file.uid, file.gid, file.permissions), (BOB, STAFF, 0o644), "bob is not in staff: no setgid file");
}

#[test]
fn every_directory_walked_needs_search_permission() {
    let mut mds = shared();
    mds.mkdir(&alice(), "/home/alice/private", 0o700).unwrap();
    create_as(&mut mds, &alice(), "/home/alice/private/f", 0o644).unwrap();
    mds.mkdir(&alice(), "/home/alice/private/d", 0o777).unwrap();
    let needs_x = |path: &str| denied(path, "/home/alice/private", "search (x)", BOB);
    assert_eq!(mds.stat(&bob(), "/home/alice/private/f").unwrap_err(), needs_x("/home/alice/private/f"));
    let deep = "/home/alice/private/d/g";
    assert_eq!(create_as(&mut mds, &bob(), deep, 0o644).unwrap_err(), needs_x(deep));
    let open = mds.open_file(&bob(), "/home/alice/private/f", Access::Read).unwrap_err();
    assert_eq!(open, needs_x("/home/alice/private/f"));
    assert_eq!(
        open.to_string(),
        "permission denied (EACCES): /home/alice/private/f: uid 1001 lacks search (x) permission on \
         /home/alice/private; its owner or root can grant it (chmod), or run as a user who has it"
    );
    // Even a name that does not exist is not revealed.
    assert_eq!(mds.stat(&bob(), "/home/alice/private/nope").unwrap_err(), needs_x("/home/alice/private/nope"));
    assert_eq!(mds.get_stripe(&bob(), "/home/alice/private/f").unwrap_err(), needs_x("/home/alice/private/f"));
    // The directory itself may be stat'ed: its parent is searchable.
    assert_eq!(mds.stat(&bob(), "/home/alice/private").unwrap().permissions, 0o700);
    assert!(mds.stat(&alice(), "/home/alice/private/f").is_ok());
    assert!(mds.stat(&ROOT, "/home/alice/private/f").is_ok(), "root searches anything");
}

#[test]
fn adding_and_removing_names_needs_write_and_search_on_the_parent() {
    let mut mds = shared();
    create_as(&mut mds, &alice(), "/home/alice/f", 0o666).unwrap();
    mds.mkdir(&alice(), "/home/alice/d", 0o777).unwrap();
    let needs_wx = |path: &str| denied(path, "/home/alice", "write and search (wx)", BOB);
    assert_eq!(create_as(&mut mds, &bob(), "/home/alice/g", 0o644).unwrap_err(), needs_wx("/home/alice/g"));
    assert_eq!(mds.mkdir(&bob(), "/home/alice/e", 0o755).unwrap_err(), needs_wx("/home/alice/e"));
    assert_eq!(mds.unlink(&bob(), "/home/alice/f").unwrap_err(), needs_wx("/home/alice/f"));
    assert_eq!(mds.rmdir(&bob(), "/home/alice/d").unwrap_err(), needs_wx("/home/alice/d"));
    // Rename needs it on both parents: out of alice's, and into it.
    create_as(&mut mds, &bob(), "/home/b", 0o644).unwrap();
    assert_eq!(mds.rename(&bob(), "/home/alice/f", "/home/f").unwrap_err(), needs_wx("/home/alice/f"));
    assert_eq!(mds.rename(&bob(), "/home/b", "/home/alice/b").unwrap_err(), needs_wx("/home/alice/b"));
    // A writable file in a directory bob cannot write stays where it is, but
    // bob may write in it, and in a directory of his own.
    assert!(mds.open_file(&bob(), "/home/alice/f", Access::Write).is_ok());
    create_as(&mut mds, &bob(), "/home/alice/d/bobs", 0o644).unwrap();
    mds.unlink(&bob(), "/home/alice/d/bobs").unwrap();
    // Moving a directory to another parent needs write on it (its `..`).
    mds.mkdir(&alice(), "/home/alice/d/sealed", 0o555).unwrap();
    mds.mkdir(&alice(), "/home/alice/d/open", 0o777).unwrap();
    let moved = mds.rename(&alice(), "/home/alice/d/sealed", "/home/alice/d/open/sealed").unwrap_err();
    assert_eq!(moved, denied("/home/alice/d/sealed", "/home/alice/d/sealed", "write (w)", ALICE));
    mds.rename(&alice(), "/home/alice/d/sealed", "/home/alice/d/still-sealed").unwrap();
    assert_eq!(names(&mds, "/home/alice"), ["d", "f"], "nothing bob tried changed the tree");
    mds.check_invariants();
}

#[test]
fn a_sticky_directory_keeps_others_from_removing_or_renaming_entries() {
    let mut mds = mds(1);
    mds.mkdir(&ROOT, "/tmp", 0o1777).unwrap();
    create_as(&mut mds, &alice(), "/tmp/a", 0o666).unwrap();
    create_as(&mut mds, &bob(), "/tmp/b", 0o666).unwrap();
    mds.mkdir(&alice(), "/tmp/ad", 0o777).unwrap();
    let reason = not_permitted(mds.unlink(&bob(), "/tmp/a").unwrap_err());
    assert!(reason.starts_with("/tmp is sticky (mode +t): only the owner of /tmp/a (uid 1000)"), "{reason}");
    assert!(matches!(mds.rmdir(&bob(), "/tmp/ad"), Err(MdsError::NotPermitted { .. })));
    assert!(matches!(mds.rename(&bob(), "/tmp/a", "/tmp/mine"), Err(MdsError::NotPermitted { .. })));
    // Replacing someone else's entry removes it: refused too.
    assert!(matches!(mds.rename(&bob(), "/tmp/b", "/tmp/a"), Err(MdsError::NotPermitted { .. })));
    // The owner of the entry, and root, may.
    mds.rename(&alice(), "/tmp/a", "/tmp/a2").unwrap();
    mds.unlink(&bob(), "/tmp/b").unwrap();
    mds.unlink(&ROOT, "/tmp/a2").unwrap();
    mds.rmdir(&ROOT, "/tmp/ad").unwrap();
    assert!(names(&mds, "/tmp").is_empty());
    mds.check_invariants();
}

#[test]
fn listing_a_directory_needs_read_permission() {
    let mut mds = shared();
    mds.mkdir(&alice(), "/home/alice/dropbox", 0o733).unwrap();
    create_as(&mut mds, &bob(), "/home/alice/dropbox/letter", 0o644).unwrap();
    let error = mds.readdir(&bob(), "/home/alice/dropbox", None).unwrap_err();
    assert_eq!(error, denied("/home/alice/dropbox", "/home/alice/dropbox", "read (r)", BOB));
    assert_eq!(names_as(&mds, &alice(), "/home/alice/dropbox").unwrap(), ["letter"]);
    // The root's own listing checks the root's bits.
    mds.set_attr(&ROOT, "/", Some(0o711), (None, None)).unwrap();
    assert!(matches!(mds.readdir(&bob(), "/", None), Err(MdsError::PermissionDenied { .. })));
    assert!(mds.stat(&bob(), "/home").is_ok(), "search is enough to walk");
}

#[test]
fn open_checks_the_access_it_asks_for() {
    let mut mds = shared();
    create_as(&mut mds, &alice(), "/home/alice/ro", 0o644).unwrap();
    create_as(&mut mds, &alice(), "/home/alice/wo", 0o622).unwrap();
    create_as(&mut mds, &alice(), "/home/alice/mine", 0o600).unwrap();
    let open = |mds: &Mds, who: &Credentials, path: &str, access| mds.open_file(who, path, access);
    assert!(open(&mds, &bob(), "/home/alice/ro", Access::Read).is_ok());
    let write = open(&mds, &bob(), "/home/alice/ro", Access::Write).unwrap_err();
    assert_eq!(write, denied("/home/alice/ro", "/home/alice/ro", "write (w)", BOB));
    let both = open(&mds, &bob(), "/home/alice/ro", Access::ReadWrite).unwrap_err();
    assert_eq!(both, denied("/home/alice/ro", "/home/alice/ro", "read and write (rw)", BOB));
    assert!(open(&mds, &bob(), "/home/alice/wo", Access::Write).is_ok());
    assert!(open(&mds, &bob(), "/home/alice/wo", Access::Read).is_err());
    assert!(open(&mds, &bob(), "/home/alice/mine", Access::Read).is_err());
    assert!(open(&mds, &alice(), "/home/alice/mine", Access::ReadWrite).is_ok());
    // O_CREAT of an existing file opens it: the same check.
    let reopen =
        mds.create(&bob(), "/home/alice/ro", &StripeSpec::default(), CreateMode::OpenOrCreate, Access::Write, 0o666);
    assert_eq!(reopen.unwrap_err(), denied("/home/alice/ro", "/home/alice/ro", "write (w)", BOB));
    let reopen =
        mds.create(&bob(), "/home/alice/ro", &StripeSpec::default(), CreateMode::OpenOrCreate, Access::Read, 0o666);
    assert!(reopen.is_ok());
    // A new file is open for what its creator asked, whatever its bits.
    mds.mkdir(&bob(), "/home/bob", 0o755).unwrap();
    assert!(create_as(&mut mds, &bob(), "/home/bob/sealed", 0o000).is_ok());
    assert!(open(&mds, &ROOT, "/home/bob/sealed", Access::ReadWrite).is_ok(), "root opens anything");
}

#[test]
fn only_a_directorys_owner_or_root_sets_its_striping() {
    let mut mds = shared();
    let stripe = spec(Some(2), None, None);
    let reason = not_permitted(mds.set_stripe(&bob(), "/home/alice", &stripe).unwrap_err());
    assert_eq!(reason, "only the owner of the directory (uid 1000) or root may set its default striping, not uid 1001");
    mds.set_stripe(&alice(), "/home/alice", &stripe).unwrap();
    mds.set_stripe(&ROOT, "/home/alice", &StripeSpec::default()).unwrap();
    assert!(
        matches!(mds.set_stripe(&bob(), "/home", &stripe), Err(MdsError::NotPermitted { .. })),
        "0777 is not enough"
    );
}

#[test]
fn root_squash_serves_root_as_an_ordinary_user() {
    let squash = Owner { uid: 65534, gid: 65534 };
    let mut mds = Mds::open_in_memory(MdsConfig { root_squash: Some(squash), ..MdsConfig::new(1) }).unwrap();
    fill_pools(&mut mds);
    // The root directory is root's, 0755: squashed root may not write in it.
    let error = mds.mkdir(&ROOT, "/d", 0o755).unwrap_err();
    assert_eq!(error, denied("/d", "/", "write and search (wx)", 65534));
    let chmod = mds.set_attr(&ROOT, "/", Some(0o777), (None, None)).unwrap_err();
    assert!(not_permitted(chmod).contains("not uid 65534"));
    assert!(mds.stat(&ROOT, "/").is_ok() && mds.readdir(&ROOT, "/", None).is_ok(), "others' bits still apply");
}

#[test]
fn chmod_and_chown_follow_posix() {
    let mut mds = shared();
    create_as(&mut mds, &alice(), "/home/alice/f", 0o644).unwrap();
    let chmod = |mds: &mut Mds, who: &Credentials, permissions| {
        mds.set_attr(who, "/home/alice/f", Some(permissions), (None, None))
    };
    assert_eq!(chmod(&mut mds, &alice(), 0o4755).unwrap().permissions, 0o4755);
    assert!(not_permitted(chmod(&mut mds, &bob(), 0o777).unwrap_err()).contains("only its owner (uid 1000) or root"));
    let chown = |mds: &mut Mds, who: &Credentials, uid, gid| mds.set_attr(who, "/home/alice/f", None, (uid, gid));
    assert!(not_permitted(chown(&mut mds, &alice(), Some(BOB), None).unwrap_err()).contains("only root may give it"));
    // Alice may give it to a group she is in, not to another.
    assert!(chown(&mut mds, &alice(), None, Some(STAFF)).is_err());
    let member = alice().with_groups(vec![STAFF]);
    let given = chown(&mut mds, &member, None, Some(STAFF)).unwrap();
    assert_eq!((given.gid, given.permissions), (STAFF, 0o755), "a change of group drops setuid");
    let taken = chown(&mut mds, &ROOT, Some(BOB), Some(BOB)).unwrap();
    assert_eq!((taken.uid, taken.gid), (BOB, BOB));
    // A chmod by someone outside the file's group cannot set setgid.
    assert_eq!(chmod(&mut mds, &Credentials::user(BOB, 7), 0o2644).unwrap().permissions, 0o644);
    assert_eq!(chmod(&mut mds, &bob(), 0o2644).unwrap().permissions, 0o2644);
    mds.check_invariants();
}

#[test]
fn the_modification_time_is_set_as_utimensat_sets_it() {
    let mut mds = shared();
    create_as(&mut mds, &alice(), "/home/alice/f", 0o646).unwrap();
    let at = 1_000_000_000_000_000_000; // 2001-09-09
    assert_eq!(mds.set_time(&alice(), "/home/alice/f", Some(at), Time::Modified).unwrap().mtime_ns, at);
    // Another user who may write it may set it to now, not to a time of their choosing.
    let now = mds.set_time(&bob(), "/home/alice/f", None, Time::Modified).unwrap().mtime_ns;
    assert!(now > at, "set to the MDS's clock");
    assert!(not_permitted(mds.set_time(&bob(), "/home/alice/f", Some(at), Time::Modified).unwrap_err())
        .contains("only its owner"));
    mds.set_attr(&alice(), "/home/alice/f", Some(0o644), (None, None)).unwrap();
    assert_eq!(
        mds.set_time(&bob(), "/home/alice/f", None, Time::Modified).unwrap_err(),
        denied("/home/alice/f", "/home/alice/f", "write (w)", BOB)
    );
    assert_eq!(mds.set_time(&ROOT, "/home/alice/f", Some(at), Time::Modified).unwrap().mtime_ns, at);
    mds.check_invariants();
}
