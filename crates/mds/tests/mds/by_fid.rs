//! Requests that name an inode by fid act on that inode whatever its
//! names are now, with the inode's own permission checks; and hard links
//! are protected as Linux's `fs.protected_hardlinks` protects them.

use crate::*;
use lanefs_core::Errno;
use lanefs_mds::{Target, Time};
use lanefs_proto::{Fid, FileKind, MdsReply, MdsRequest};

fn user(uid: u32) -> Credentials {
    Credentials::user(uid, uid)
}

fn attr(reply: MdsReply) -> lanefs_proto::Attr {
    match reply {
        MdsReply::Attr(attr) => attr,
        other => panic!("expected attributes, got {other:?}"),
    }
}

fn errno(reply: MdsReply) -> Errno {
    match reply {
        MdsReply::Error(e) => e.errno(),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// An open file's name is moved away and another file put in its place:
/// a change by fid changes the first file, never the one now at its name.
#[test]
fn a_fid_names_its_inode_after_its_name_is_taken_by_another() {
    let mut mds = mds(1);
    mkdir(&mut mds, "/shared");
    mds.set_attr(&ROOT, "/shared", Some(0o777), (None, None)).unwrap();
    let mine = create(&mut mds, "/shared/mine");
    let intruder = user(1000);
    mds.rename(&intruder, "/shared/mine", "/shared/moved").unwrap();
    let theirs = mds
        .create(&intruder, "/shared/mine", &StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite, 0o666)
        .unwrap();
    assert_ne!(theirs.fid, mine.fid);

    let stat = attr(mds.handle(&ROOT, MdsRequest::StatFid { fid: mine.fid }));
    assert_eq!((stat.fid, stat.uid), (mine.fid, 0), "the inode the fid names, not the one at its old name");
    let chown = MdsRequest::SetAttrFid { fid: mine.fid, permissions: Some(0o600), uid: Some(1000), gid: None };
    let changed = attr(mds.handle(&ROOT, chown));
    assert_eq!((changed.fid, changed.uid, changed.permissions), (mine.fid, 1000, 0o600));
    let at = 1_000_000_000;
    let timed = attr(mds.handle(&ROOT, MdsRequest::SetMtimeFid { fid: mine.fid, at: Some(at) }));
    assert_eq!((timed.fid, timed.mtime_ns), (mine.fid, at));
    assert_eq!(attr(mds.handle(&ROOT, MdsRequest::SetAtimeFid { fid: mine.fid, at: Some(at) })).atime_ns, at);

    let now_at_the_name = mds.stat(&ROOT, "/shared/mine").unwrap();
    assert_eq!((now_at_the_name.fid, now_at_the_name.uid, now_at_the_name.permissions), (theirs.fid, 1000, 0o666));
    assert_ne!(now_at_the_name.mtime_ns, at, "the file now at the name keeps its times");
    let moved = mds.stat(&ROOT, "/shared/moved").unwrap();
    assert_eq!((moved.fid, moved.uid, moved.permissions), (mine.fid, 1000, 0o600));
    mds.check_invariants();
}

#[test]
fn a_fid_is_checked_as_its_inode_is_and_needs_no_search_permission() {
    let mut mds = mds(1);
    mkdir(&mut mds, "/private");
    mds.set_attr(&ROOT, "/private", Some(0o700), (None, None)).unwrap();
    let file = create(&mut mds, "/private/f");
    mds.set_attr(&ROOT, "/private/f", Some(0o644), (None, None)).unwrap();
    let other = user(1000);
    // By path, the walk stops at /private; by fid, the inode is reached
    // (a mount only names inodes its kernel reached) and its own bits rule.
    assert_eq!(mds.stat(&other, "/private/f").unwrap_err().errno(), Errno::EACCES);
    assert_eq!(attr(mds.handle(&other, MdsRequest::StatFid { fid: file.fid })).fid, file.fid);
    let chmod = MdsRequest::SetAttrFid { fid: file.fid, permissions: Some(0o666), uid: None, gid: None };
    assert_eq!(errno(mds.handle(&other, chmod)), Errno::EPERM, "only its owner or root may chmod it");
    let chown = MdsRequest::SetAttrFid { fid: file.fid, permissions: None, uid: Some(1000), gid: None };
    assert_eq!(errno(mds.handle(&other, chown)), Errno::EPERM, "only root gives a file away");
    assert_eq!(errno(mds.handle(&other, MdsRequest::SetMtimeFid { fid: file.fid, at: None })), Errno::EACCES);
    assert_eq!(errno(mds.handle(&other, MdsRequest::OpenFid { fid: file.fid, access: Access::Write })), Errno::EACCES);
    match mds.handle(&other, MdsRequest::OpenFid { fid: file.fid, access: Access::Read }) {
        MdsReply::File(info) => assert_eq!(info, file),
        other => panic!("expected the file, got {other:?}"),
    }
    let listing = MdsRequest::ReaddirFid { fid: mds.stat(&ROOT, "/private").unwrap().fid, cursor: None };
    assert_eq!(errno(mds.handle(&other, listing)), Errno::EACCES, "reading a directory needs its read bit");
    let dir = mds.stat(&ROOT, "/private").unwrap().fid;
    match mds.handle(&ROOT, MdsRequest::ReaddirFid { fid: dir, cursor: None }) {
        MdsReply::Entries(page) => assert_eq!(page.entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["f"]),
        other => panic!("expected entries, got {other:?}"),
    }
    assert_eq!(errno(mds.handle(&ROOT, MdsRequest::ReaddirFid { fid: file.fid, cursor: None })), Errno::ENOTDIR);
    assert_eq!(errno(mds.handle(&ROOT, MdsRequest::OpenFid { fid: dir, access: Access::Read })), Errno::EISDIR);
    mds.check_invariants();
}

#[test]
fn a_removed_or_never_made_fid_is_enoent_naming_the_fid() {
    let mut mds = mds(1);
    let file = create(&mut mds, "/f");
    mds.unlink(&ROOT, "/f").unwrap();
    for fid in [file.fid, Fid(u64::MAX), Fid(0)] {
        let error = mds.stat_target(&ROOT, Target::Fid(fid)).unwrap_err();
        assert_eq!(error.errno(), Errno::ENOENT);
        assert!(error.to_string().contains(&lanefs_proto::fid_name(fid)), "{error}");
        assert_eq!(
            mds.set_time_target(&ROOT, Target::Fid(fid), None, Time::Modified).unwrap_err().errno(),
            Errno::ENOENT
        );
        assert_eq!(errno(mds.handle(&ROOT, MdsRequest::LinkFid { fid, to: "/g".into() })), Errno::ENOENT);
    }
    assert_eq!(mds.stat(&ROOT, "/g").unwrap_err().errno(), Errno::ENOENT, "no link was made");
    mds.check_invariants();
}

#[test]
fn a_link_by_fid_links_the_inode_not_its_old_name() {
    let mut mds = mds(1);
    let first = create(&mut mds, "/a");
    mds.rename(&ROOT, "/a", "/b").unwrap();
    create(&mut mds, "/a");
    let linked = attr(mds.handle(&ROOT, MdsRequest::LinkFid { fid: first.fid, to: "/c".into() }));
    assert_eq!((linked.fid, linked.nlink), (first.fid, 2));
    assert_eq!(mds.stat(&ROOT, "/c").unwrap().fid, first.fid);
    mds.check_invariants();
}

/// Linux's `protected_hardlinks`: a user may link a file it owns, or a
/// plain file it may read and write; nothing else of another's.
#[test]
fn hard_links_to_another_users_files_need_read_and_write() {
    let mut mds = mds(1);
    mkdir(&mut mds, "/tmp");
    mds.set_attr(&ROOT, "/tmp", Some(0o777), (None, None)).unwrap();
    let secret = create(&mut mds, "/secret");
    mds.set_attr(&ROOT, "/secret", Some(0o600), (None, None)).unwrap();
    let intruder = user(1000);
    let error = mds.link(&intruder, "/secret", "/tmp/mine").unwrap_err();
    assert_eq!(error.errno(), Errno::EPERM);
    assert!(error.to_string().contains("protected"), "{error}");
    assert_eq!(
        errno(mds.handle(&intruder, MdsRequest::LinkFid { fid: secret.fid, to: "/tmp/mine".into() })),
        Errno::EPERM
    );
    for (mode, allowed) in [(0o644, false), (0o666, true), (0o4666, false), (0o2676, false), (0o2666, true)] {
        mds.set_attr(&ROOT, "/secret", Some(mode), (None, None)).unwrap();
        let linked = mds.link(&intruder, "/secret", "/tmp/mine");
        assert_eq!(linked.is_ok(), allowed, "mode {mode:o}: {linked:?}");
        if allowed {
            mds.unlink(&intruder, "/tmp/mine").unwrap();
        }
    }
    mds.symlink(&ROOT, "/link", "secret").unwrap();
    assert_eq!(mds.link(&intruder, "/link", "/tmp/l").unwrap_err().errno(), Errno::EPERM, "another's symbolic link");
    let own = mds
        .create(&intruder, "/tmp/own", &StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite, 0o400)
        .unwrap();
    assert_eq!(mds.link(&intruder, "/tmp/own", "/tmp/own2").unwrap().fid, own.fid, "its owner links what it likes");
    mds.link(&ROOT, "/secret", "/tmp/roots").expect("root links anything");
    assert_eq!(mds.stat(&ROOT, "/tmp/roots").unwrap().kind, FileKind::File);
    mds.check_invariants();
}

/// A path anchored at a directory's fid (`/.lustre/fid/[FID]/name`)
/// names `name` in that directory wherever it is now: a directory moved
/// away and replaced by another user's, with a symbolic link planted at
/// the name, leaves a lookup, a create, an unlink and a rename through the
/// anchor in the first directory.
#[test]
fn a_path_anchored_at_a_fid_stays_in_its_directory_when_names_move() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/shared");
    mds.set_attr(&ROOT, "/shared", Some(0o777), (None, None)).unwrap();
    mkdir(&mut mds, "/shared/work");
    mds.set_stripe(&ROOT, "/shared", &spec(Some(2), None, None)).unwrap();
    let work = mds.stat(&ROOT, "/shared/work").unwrap().fid;
    create(&mut mds, "/shared/work/cfg");
    let at = |name: &str| format!("/.lustre/fid/[{:#x}]/{name}", work.0);

    // Another user moves the directory away (its own parent is 0777) and
    // puts its own in its place, with a link where root's file was.
    let intruder = user(1000);
    mds.rename(&ROOT, "/shared/work", "/shared/old").unwrap();
    mds.mkdir(&intruder, "/shared/work", 0o755).unwrap();
    mds.symlink(&intruder, "/shared/work/cfg", "/etc/shadow").unwrap();

    let cfg = attr(mds.handle(&ROOT, MdsRequest::Stat { path: at("cfg") }));
    assert_eq!((cfg.kind, cfg.uid), (FileKind::File, 0), "root's file, not the planted link");
    let new = mds.create(&ROOT, &at("new"), &StripeSpec::default(), CreateMode::Exclusive, Access::Write, 0o600);
    assert_eq!(new.unwrap().layout.stripe_count(), 2, "in root's directory, inheriting from above the anchor");
    assert!(mds.stat(&ROOT, "/shared/old/new").is_ok() && mds.stat(&ROOT, "/shared/work/new").is_err());
    mds.rename(&ROOT, &at("new"), &at("renamed")).unwrap();
    mds.unlink(&ROOT, &at("renamed")).unwrap();
    assert!(mds.stat(&ROOT, "/shared/work/cfg").unwrap().target.is_some(), "the intruder's link is untouched");
    mds.mkdir(&ROOT, &at("sub"), 0o755).unwrap();
    assert_eq!(
        mds.rename(&ROOT, "/shared/old", &format!("{}/inside", at("sub"))).unwrap_err(),
        MdsError::RenameIntoItself { from: "/shared/old".into(), to: "/shared/old/sub/inside".into() }
    );

    // The walk above the anchor needs no search permission; the anchor's
    // own permissions still count.
    mds.set_attr(&ROOT, "/shared", Some(0o700), (None, None)).unwrap();
    assert_eq!(errno(mds.handle(&intruder, MdsRequest::Stat { path: "/shared/old/cfg".into() })), Errno::EACCES);
    assert_eq!(attr(mds.handle(&intruder, MdsRequest::Stat { path: at("cfg") })).fid, cfg.fid);
    mds.set_attr(&ROOT, "/shared/old", Some(0o700), (None, None)).unwrap();
    assert_eq!(errno(mds.handle(&intruder, MdsRequest::Stat { path: at("cfg") })), Errno::EACCES);
    let anchor_itself = MdsRequest::Stat { path: format!("/.lustre/fid/[{:#x}]", work.0) };
    assert_eq!(attr(mds.handle(&intruder, anchor_itself)).fid, work);

    // Only nodes send them; a fid that names nothing is ENOENT; the name
    // .lustre in / is reserved.
    assert!(MdsRequest::Stat { path: at("cfg") }.by_fid());
    assert!(MdsRequest::Rename { from: "/a".into(), to: at("b") }.by_fid());
    assert!(!MdsRequest::Stat { path: "/shared/.lustre/fid/[0x2]/x".into() }.by_fid());
    assert_eq!(errno(mds.handle(&ROOT, MdsRequest::Stat { path: "/.lustre/fid/[0x999]/x".into() })), Errno::ENOENT);
    assert_eq!(
        errno(mds.handle(&ROOT, MdsRequest::Mkdir { path: "/.lustre".into(), permissions: 0o755 })),
        Errno::EINVAL
    );
    mds.check_invariants();
}
