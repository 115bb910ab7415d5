//! Named pipes, sockets and devices: inodes of the MDS alone, made,
//! renamed, linked, changed and removed as files are, never opened for
//! data; and the rebuild of a database of the schema before them.

use crate::*;
use lanefs_core::Errno;
use lanefs_proto::{Attr, FileKind, MdsConfig, MdsReply, MdsRequest};

fn user(uid: u32) -> Credentials {
    Credentials::user(uid, uid)
}

fn mknod(mds: &mut Mds, who: &Credentials, path: &str, kind: FileKind, rdev: u64) -> Result<Attr, MdsError> {
    mds.mknod(who, path, kind, 0o640, rdev)
}

#[test]
fn special_files_are_made_listed_linked_renamed_and_removed_like_files() {
    let mut mds = mds(2);
    mkdir(&mut mds, "/d");
    let fifo = mknod(&mut mds, &ROOT, "/d/p", FileKind::Fifo, 0).unwrap();
    assert_eq!(
        (fifo.kind, fifo.layout.clone(), fifo.rdev, fifo.nlink, fifo.permissions),
        (FileKind::Fifo, None, 0, 1, 0o640)
    );
    let socket = mknod(&mut mds, &ROOT, "/d/s", FileKind::Socket, 7).unwrap();
    assert_eq!(socket.rdev, 0, "only a device keeps a device number");
    let null = libc::makedev(1, 3);
    let chr = mknod(&mut mds, &ROOT, "/d/c", FileKind::CharDevice, null).unwrap();
    assert_eq!((chr.kind, chr.rdev), (FileKind::CharDevice, null));
    let blk = mknod(&mut mds, &ROOT, "/d/b", FileKind::BlockDevice, libc::makedev(8, 1)).unwrap();
    assert_eq!(blk.kind, FileKind::BlockDevice);
    assert_eq!(mds.stat(&ROOT, "/d/b").unwrap().rdev, libc::makedev(8, 1));
    mds.check_invariants();

    let page = mds.readdir(&ROOT, "/d", None).unwrap();
    let kinds: Vec<(String, FileKind)> = page.entries.iter().map(|e| (e.name.clone(), e.kind)).collect();
    let want =
        [("b", FileKind::BlockDevice), ("c", FileKind::CharDevice), ("p", FileKind::Fifo), ("s", FileKind::Socket)];
    assert_eq!(kinds, want.map(|(n, k)| (n.to_string(), k)));

    assert_eq!(mknod(&mut mds, &ROOT, "/d/p", FileKind::Fifo, 0).unwrap_err().errno(), Errno::EEXIST);
    assert_eq!(mknod(&mut mds, &ROOT, "/d/p/x", FileKind::Fifo, 0).unwrap_err().errno(), Errno::ENOTDIR);
    assert_eq!(mds.stat(&ROOT, "/d/c/x").unwrap_err().errno(), Errno::ENOTDIR, "nothing is inside a device");
    assert_eq!(mds.readdir(&ROOT, "/d/p", None).unwrap_err().errno(), Errno::ENOTDIR);
    let refused = mds.open_file(&ROOT, "/d/p", Access::Read).unwrap_err();
    assert_eq!(refused.errno(), Errno::EINVAL);
    assert!(refused.to_string().contains("/d/p is a fifo, which holds no data in lanefs"), "{refused}");
    let refused = try_create(&mut mds, "/d/c", &StripeSpec::default(), CreateMode::OpenOrCreate).unwrap_err();
    assert!(refused.to_string().contains("is a character special file"), "{refused}");
    assert!(mds.get_stripe(&ROOT, "/d/s").is_err(), "no layout");
    assert_eq!(mds.set_stripe(&ROOT, "/d/s", &spec(Some(1), None, None)).unwrap_err().errno(), Errno::EINVAL);

    // Like files: a second name, a rename over a file, chmod and chown.
    mds.link(&ROOT, "/d/p", "/p2").unwrap();
    assert_eq!(mds.stat(&ROOT, "/d/p").unwrap().nlink, 2);
    let file = create(&mut mds, "/f");
    let object = file.layout.objects()[0];
    assert_eq!(mds.rename(&ROOT, "/d/s", "/f").unwrap(), Some(file.layout), "the replaced file's objects go");
    assert_eq!(mds.queued_destroys(object.ost, 10).unwrap(), [object.object]);
    assert_eq!(mds.stat(&ROOT, "/f").unwrap().kind, FileKind::Socket);
    mkdir(&mut mds, "/e");
    assert_eq!(mds.rename(&ROOT, "/f", "/e").unwrap_err().errno(), Errno::EISDIR);
    let changed = mds.set_attr(&ROOT, "/d/c", Some(0o600), (Some(1000), Some(1000))).unwrap();
    assert_eq!((changed.permissions, changed.uid, changed.rdev), (0o600, 1000, null));
    mds.check_invariants();
    assert_eq!(mds.unlink(&ROOT, "/d/p").unwrap(), None, "no objects to destroy");
    assert_eq!(mds.unlink(&ROOT, "/p2").unwrap(), None);
    for name in ["/d/c", "/d/b", "/f"] {
        mds.unlink(&ROOT, name).unwrap();
    }
    assert!(names(&mds, "/d").is_empty());
    let counts = mds.statfs().unwrap();
    assert_eq!((counts.file_count, counts.dir_count), (0, 3));
    mds.check_invariants();
}

#[test]
fn only_root_makes_devices_and_users_make_pipes_where_they_may_write() {
    let mut mds = mds(1);
    mkdir(&mut mds, "/d");
    mds.set_attr(&ROOT, "/d", Some(0o777), (None, None)).unwrap();
    let alice = user(1000);
    let refused = mknod(&mut mds, &alice, "/d/null", FileKind::CharDevice, libc::makedev(1, 3)).unwrap_err();
    assert_eq!(refused.errno(), Errno::EPERM);
    assert!(refused.to_string().contains("only root may make a device (CAP_MKNOD), not uid 1000"), "{refused}");
    assert_eq!(mknod(&mut mds, &alice, "/d/sda", FileKind::BlockDevice, 0).unwrap_err().errno(), Errno::EPERM);
    let fifo = mknod(&mut mds, &alice, "/d/p", FileKind::Fifo, 0).unwrap();
    assert_eq!((fifo.uid, fifo.gid), (1000, 1000));
    assert_eq!(mknod(&mut mds, &alice, "/s", FileKind::Socket, 0).unwrap_err().errno(), Errno::EACCES);
    // mknod makes only what it names.
    for kind in [FileKind::File, FileKind::Dir, FileKind::Symlink] {
        let refused = mknod(&mut mds, &ROOT, "/x", kind, 0).unwrap_err();
        assert_eq!(refused.errno(), Errno::EINVAL, "{kind:?}");
        assert!(refused.to_string().contains("mknod makes named pipes, sockets and devices"), "{refused}");
    }
    // A pipe has no user. attributes (Linux's rule); trusted. ones it may.
    let on = lanefs_mds::Target::Path("/d/p");
    let refused = mds.set_xattr(&alice, on, "user.a", b"1", lanefs_proto::XattrHow::Either).unwrap_err();
    assert_eq!(refused.errno(), Errno::EPERM);
    mds.set_xattr(&ROOT, on, "trusted.a", b"1", lanefs_proto::XattrHow::Either).unwrap();
    mds.check_invariants();
}

#[test]
fn mknod_travels_the_wire_format() {
    let mut mds = mds(1);
    let request = MdsRequest::Mknod { path: "/p".into(), kind: FileKind::Fifo, permissions: 0o600, rdev: 0 };
    assert!(!request.is_idempotent(), "a second mknod finds the name taken");
    let MdsReply::Attr(attr) = mds.handle(&ROOT, request) else { panic!("an inode") };
    assert_eq!(attr.kind, FileKind::Fifo);
    assert!(MdsRequest::Mknod { path: "/.lustre/fid/[0x1]/p".into(), kind: FileKind::Fifo, permissions: 0, rdev: 0 }
        .by_fid());
}

/// The mode's type bits, both ways, as `stat(2)` has them.
#[test]
fn kinds_have_the_type_bits_of_a_mode() {
    let kinds = [
        (FileKind::File, libc::S_IFREG),
        (FileKind::Dir, libc::S_IFDIR),
        (FileKind::Symlink, libc::S_IFLNK),
        (FileKind::Fifo, libc::S_IFIFO),
        (FileKind::Socket, libc::S_IFSOCK),
        (FileKind::CharDevice, libc::S_IFCHR),
        (FileKind::BlockDevice, libc::S_IFBLK),
    ];
    for (kind, bits) in kinds {
        assert_eq!(kind.mode_bits(), bits, "{kind:?}");
        assert_eq!(FileKind::of_mode(bits | 0o644), Some(kind));
    }
    assert_eq!(FileKind::of_mode(0o644), None);
}

/// A database of schema version 5 has its `inodes` rebuilt for the new
/// kinds, and keeps everything.
#[test]
fn a_version_5_database_gains_special_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mds.db");
    let file = {
        let mut mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
        fill_pools(&mut mds);
        mkdir(&mut mds, "/d");
        mds.symlink(&ROOT, "/d/l", "target").unwrap();
        create(&mut mds, "/d/f")
    };
    {
        // Version 5's table: three kinds, no device numbers.
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("PRAGMA foreign_keys = OFF;").unwrap();
        let v5 = include_str!("schema_v5_inodes.sql").replacen("CREATE TABLE inodes (", "CREATE TABLE inodes_v5 (", 1);
        conn.execute_batch(&v5).unwrap();
        conn.execute_batch(
            "INSERT INTO inodes_v5 SELECT fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions, stripe_size, \
                    target, default_count, default_size, default_start, pool, default_pool FROM inodes; \
             DROP TABLE inodes; ALTER TABLE inodes_v5 RENAME TO inodes; DROP TABLE components; DROP TABLE default_components; DROP TABLE migrations; PRAGMA user_version = 5;",
        )
        .unwrap();
        let refused = conn.execute(
            "INSERT INTO inodes (fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions) VALUES (99, 4, 0, 0, 0, 0, 0, 0)",
            [],
        );
        assert!(refused.is_err(), "version 5 has no named pipes");
    }
    let mut mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
    mds.check_invariants();
    assert_eq!(mds.open_file(&ROOT, "/d/f", Access::Read).unwrap().layout, file.layout);
    assert_eq!(mds.stat(&ROOT, "/d/l").unwrap().target.as_deref(), Some("target"));
    mknod(&mut mds, &ROOT, "/d/p", FileKind::Fifo, 0).unwrap();
    mknod(&mut mds, &ROOT, "/d/c", FileKind::CharDevice, libc::makedev(1, 3)).unwrap();
    mds.check_invariants();
    drop(mds);
    let mds = Mds::open(&db, MdsConfig::new(1)).unwrap();
    assert_eq!(mds.stat(&ROOT, "/d/c").unwrap().rdev, libc::makedev(1, 3), "and it opens again as version 8");
}
