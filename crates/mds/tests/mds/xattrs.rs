//! Extended attributes: Linux's namespaces and rules, the flags of
//! `setxattr`, the per-inode bounds, and their life with their inode.

use crate::*;
use lanefs_core::Errno;
use lanefs_mds::xattr::{XATTRS_PER_INODE_MAX, XATTR_INODE_BYTES_MAX, XATTR_VALUE_MAX};
use lanefs_mds::Target;
use lanefs_proto::{MdsReply, MdsRequest, Node, XattrHow};

fn user(uid: u32) -> Credentials {
    Credentials::user(uid, uid)
}

fn path(p: &str) -> Target<'_> {
    Target::Path(p)
}

fn errno<T: std::fmt::Debug>(result: Result<T, MdsError>) -> Errno {
    result.expect_err("an error").errno()
}

#[test]
fn values_are_set_replaced_listed_and_removed_as_setxattr_s_flags_say() {
    let mut mds = mds(1);
    let file = create(&mut mds, "/f");
    let before = mds.stat(&ROOT, "/f").unwrap().ctime_ns;
    mds.set_xattr(&ROOT, path("/f"), "user.color", b"blue", XattrHow::Either).unwrap();
    assert_eq!(mds.get_xattr(&ROOT, Target::Fid(file.fid), "user.color").unwrap(), b"blue");
    assert!(mds.stat(&ROOT, "/f").unwrap().ctime_ns >= before, "a change sets the change time");

    let create_again = mds.set_xattr(&ROOT, path("/f"), "user.color", b"red", XattrHow::Create);
    assert_eq!(errno(create_again), Errno::EEXIST);
    let replace_absent = mds.set_xattr(&ROOT, path("/f"), "user.size", b"1", XattrHow::Replace);
    assert_eq!(errno(replace_absent), Errno::ENODATA);
    mds.set_xattr(&ROOT, path("/f"), "user.color", b"red", XattrHow::Replace).unwrap();
    mds.set_xattr(&ROOT, path("/f"), "user.empty", b"", XattrHow::Create).unwrap();
    mds.set_xattr(&ROOT, path("/f"), "trusted.t", b"t", XattrHow::Either).unwrap();
    mds.set_xattr(&ROOT, path("/f"), "security.s", b"s", XattrHow::Either).unwrap();
    assert_eq!(mds.get_xattr(&ROOT, path("/f"), "user.color").unwrap(), b"red");
    assert_eq!(mds.get_xattr(&ROOT, path("/f"), "user.empty").unwrap(), b"");
    assert_eq!(
        mds.list_xattrs(&ROOT, path("/f")).unwrap(),
        ["security.s", "trusted.t", "user.color", "user.empty"],
        "sorted"
    );

    mds.remove_xattr(&ROOT, path("/f"), "user.color").unwrap();
    assert_eq!(errno(mds.get_xattr(&ROOT, path("/f"), "user.color")), Errno::ENODATA);
    assert_eq!(errno(mds.remove_xattr(&ROOT, path("/f"), "user.color")), Errno::ENODATA);

    // Through the wire's requests, by fid.
    let node = Node::Fid(file.fid);
    let set =
        MdsRequest::SetXattr { node: node.clone(), name: "user.w".into(), value: vec![1, 2], how: XattrHow::Either };
    assert_eq!(mds.handle(&ROOT, set), MdsReply::Ok);
    let get = MdsRequest::GetXattr { node: node.clone(), name: "user.w".into() };
    assert_eq!(mds.handle(&ROOT, get), MdsReply::Xattr(vec![1, 2]));
    let list = mds.handle(&ROOT, MdsRequest::ListXattrs { node });
    assert_eq!(
        list,
        MdsReply::XattrNames(vec!["security.s".into(), "trusted.t".into(), "user.empty".into(), "user.w".into()])
    );
    mds.check_invariants();
}

#[test]
fn each_namespace_has_linux_s_rules() {
    let mut mds = mds(1);
    mkdir(&mut mds, "/d");
    mds.set_attr(&ROOT, "/d", Some(0o777), (None, None)).unwrap();
    create(&mut mds, "/d/root-file"); // 0644, root's
    mds.set_xattr(&ROOT, path("/d/root-file"), "user.a", b"a", XattrHow::Either).unwrap();
    mds.set_xattr(&ROOT, path("/d/root-file"), "trusted.t", b"t", XattrHow::Either).unwrap();
    mds.set_xattr(&ROOT, path("/d/root-file"), "security.s", b"s", XattrHow::Either).unwrap();
    let other = user(1000);

    // user.: read and write permission on the inode.
    assert_eq!(mds.get_xattr(&other, path("/d/root-file"), "user.a").unwrap(), b"a");
    let write = mds.set_xattr(&other, path("/d/root-file"), "user.b", b"b", XattrHow::Either);
    assert_eq!(errno(write), Errno::EACCES);
    assert_eq!(errno(mds.remove_xattr(&other, path("/d/root-file"), "user.a")), Errno::EACCES);
    mds.set_attr(&ROOT, "/d/root-file", Some(0o600), (None, None)).unwrap();
    assert_eq!(errno(mds.get_xattr(&other, path("/d/root-file"), "user.a")), Errno::EACCES);

    // trusted.: invisible to others, and theirs to change never.
    assert_eq!(errno(mds.get_xattr(&other, path("/d/root-file"), "trusted.t")), Errno::ENODATA);
    assert_eq!(mds.list_xattrs(&other, path("/d/root-file")).unwrap(), ["security.s", "user.a"]);
    let mine =
        mds.create(&other, "/d/mine", &StripeSpec::default(), CreateMode::Exclusive, Access::ReadWrite, 0o600).unwrap();
    let trusted = mds.set_xattr(&other, Target::Fid(mine.fid), "trusted.x", b"x", XattrHow::Either);
    assert_eq!(errno(trusted), Errno::EPERM);

    // security.: anyone reads, root alone writes.
    assert_eq!(mds.get_xattr(&other, path("/d/root-file"), "security.s").unwrap(), b"s");
    let security = mds.set_xattr(&other, path("/d/mine"), "security.x", b"x", XattrHow::Either);
    assert_eq!(errno(security), Errno::EPERM);
    mds.set_xattr(&other, path("/d/mine"), "user.mine", b"m", XattrHow::Either).unwrap();

    // system. (ACLs) and unknown prefixes are not kept; names are bounded.
    for name in ["system.posix_acl_access", "os2.x", "lustre.lov"] {
        let refused = mds.set_xattr(&ROOT, path("/d/mine"), name, b"x", XattrHow::Either);
        assert_eq!(errno(refused), Errno::EOPNOTSUPP, "{name}");
    }
    assert_eq!(errno(mds.set_xattr(&ROOT, path("/d/mine"), "user.", b"x", XattrHow::Either)), Errno::EINVAL);
    let long = format!("user.{}", "n".repeat(251));
    assert_eq!(errno(mds.set_xattr(&ROOT, path("/d/mine"), &long, b"x", XattrHow::Either)), Errno::ERANGE);

    // user. on a symbolic link: nothing to read, and EPERM to write.
    mds.symlink(&ROOT, "/d/link", "mine").unwrap();
    assert_eq!(errno(mds.get_xattr(&ROOT, path("/d/link"), "user.a")), Errno::ENODATA);
    assert_eq!(errno(mds.set_xattr(&ROOT, path("/d/link"), "user.a", b"a", XattrHow::Either)), Errno::EPERM);
    mds.set_xattr(&ROOT, path("/d/link"), "trusted.a", b"a", XattrHow::Either).unwrap();

    // A sticky directory's user. attributes are its owner's and root's.
    mds.set_attr(&ROOT, "/d", Some(0o1777), (None, None)).unwrap();
    assert_eq!(errno(mds.set_xattr(&other, path("/d"), "user.a", b"a", XattrHow::Either)), Errno::EPERM);
    mds.set_xattr(&ROOT, path("/d"), "user.a", b"a", XattrHow::Either).unwrap();
    assert_eq!(mds.get_xattr(&other, path("/d"), "user.a").unwrap(), b"a");
    mds.check_invariants();
}

#[test]
fn a_squashed_root_is_no_root_for_trusted_attributes() {
    let squash = lanefs_proto::Owner { uid: 99, gid: 99 };
    let mut mds = Mds::open_in_memory(MdsConfig { root_squash: Some(squash), ..MdsConfig::new(1) }).unwrap();
    fill_pools(&mut mds);
    let refused = mds.set_xattr(&ROOT, path("/"), "trusted.t", b"t", XattrHow::Either);
    assert_eq!(errno(refused), Errno::EPERM);
}

#[test]
fn an_inode_s_attributes_are_bounded_and_go_with_it() {
    let mut mds = mds(1);
    create(&mut mds, "/f");
    let too_big = vec![0u8; XATTR_VALUE_MAX + 1];
    assert_eq!(errno(mds.set_xattr(&ROOT, path("/f"), "user.big", &too_big, XattrHow::Either)), Errno::E2BIG);
    let biggest = vec![1u8; XATTR_VALUE_MAX];
    mds.set_xattr(&ROOT, path("/f"), "user.big", &biggest, XattrHow::Either).unwrap();
    let second = mds.set_xattr(&ROOT, path("/f"), "user.big2", &biggest, XattrHow::Either);
    let error = second.unwrap_err();
    assert_eq!(error.errno(), Errno::ENOSPC, "past {XATTR_INODE_BYTES_MAX} bytes: {error}");
    assert!(error.to_string().contains("setfattr -x"), "{error}");
    mds.set_xattr(&ROOT, path("/f"), "user.big", b"small again", XattrHow::Replace).unwrap();
    for i in 1..XATTRS_PER_INODE_MAX {
        mds.set_xattr(&ROOT, path("/f"), &format!("user.{i:03}"), b"v", XattrHow::Create).unwrap();
    }
    let one_more = mds.set_xattr(&ROOT, path("/f"), "user.one-more", b"v", XattrHow::Create);
    assert_eq!(errno(one_more), Errno::ENOSPC, "past {XATTRS_PER_INODE_MAX} attributes");
    mds.set_xattr(&ROOT, path("/f"), "user.001", b"replaced within the bound", XattrHow::Replace).unwrap();
    assert_eq!(mds.list_xattrs(&ROOT, path("/f")).unwrap().len(), XATTRS_PER_INODE_MAX);
    mds.check_invariants();

    // Removed with the file: a new file gets none of them.
    let fid = mds.stat(&ROOT, "/f").unwrap().fid;
    mds.unlink(&ROOT, "/f").unwrap();
    assert_eq!(errno(mds.list_xattrs(&ROOT, Target::Fid(fid))), Errno::ENOENT);
    create(&mut mds, "/f");
    assert!(mds.list_xattrs(&ROOT, path("/f")).unwrap().is_empty());
    mkdir(&mut mds, "/d");
    mds.set_xattr(&ROOT, path("/d"), "user.a", b"a", XattrHow::Either).unwrap();
    mds.rmdir(&ROOT, "/d").unwrap();
    mds.check_invariants();
}

/// A database of schema version 4 gains the attribute table, empty, and
/// keeps everything else.
#[test]
fn a_version_4_database_gains_extended_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    {
        let mut mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
        fill_pools(&mut mds);
        create(&mut mds, "/f");
    }
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "DROP TABLE xattrs; DROP TABLE components; DROP TABLE default_components; DROP TABLE migrations; PRAGMA user_version = 4;",
        )
        .unwrap();
    }
    let mut mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
    mds.check_invariants();
    assert!(mds.list_xattrs(&ROOT, path("/f")).unwrap().is_empty());
    mds.set_xattr(&ROOT, path("/f"), "user.a", b"kept", XattrHow::Either).unwrap();
    drop(mds);
    let mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
    assert_eq!(mds.get_xattr(&ROOT, path("/f"), "user.a").unwrap(), b"kept", "and it opens again as version 8");
}
