//! Extended attributes through the mount, as `setfattr`, `getfattr`,
//! `cp -a` and `rsync -X` use them: set in one mount and read in the
//! other, with Linux's namespaces and rules for a second user (uid and
//! gid [`NOBODY`], no account needed), and Lustre's `lustre.lov`.

use super::mounted;
use std::ffi::CStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

const NOBODY: u32 = 65534;

fn c_path(path: &Path) -> std::ffi::CString {
    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

/// The errno of the last failed call.
fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

fn setxattr(path: &Path, name: &CStr, value: &[u8], flags: i32) -> Result<(), i32> {
    // SAFETY: NUL-terminated names and a value of the length given.
    let rc = unsafe { libc::setxattr(c_path(path).as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), flags) };
    if rc < 0 {
        return Err(last_errno());
    }
    Ok(())
}

fn getxattr(path: &Path, name: &CStr) -> Result<Vec<u8>, i32> {
    let mut value = vec![0u8; 1 << 17];
    // SAFETY: NUL-terminated names and a buffer of the length given.
    let n = unsafe { libc::getxattr(c_path(path).as_ptr(), name.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
    if n < 0 {
        return Err(last_errno());
    }
    value.truncate(n as usize);
    Ok(value)
}

fn listxattr(path: &Path) -> Vec<String> {
    let mut list = vec![0u8; 1 << 16];
    // SAFETY: a NUL-terminated path and a buffer of the length given.
    let n = unsafe { libc::listxattr(c_path(path).as_ptr(), list.as_mut_ptr().cast(), list.len()) };
    assert!(n >= 0, "listxattr: {}", std::io::Error::last_os_error());
    list.truncate(n as usize);
    list.split(|b| *b == 0).filter(|n| !n.is_empty()).map(|n| String::from_utf8(n.to_vec()).unwrap()).collect()
}

fn removexattr(path: &Path, name: &CStr) -> Result<(), i32> {
    // SAFETY: NUL-terminated names.
    let rc = unsafe { libc::removexattr(c_path(path).as_ptr(), name.as_ptr()) };
    if rc < 0 {
        return Err(last_errno());
    }
    Ok(())
}

/// Runs a Python `script` as [`NOBODY`] with `sys.argv[1:]` = `args`;
/// what it printed.
fn python_as_nobody(script: &str, args: &[&Path]) -> String {
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn attributes_set_in_one_mount_are_read_in_another_with_linux_s_flags() {
    let Some(m) = mounted(2) else { return };
    fs::write(m.at(0, "f"), b"data").unwrap();
    setxattr(&m.at(0, "f"), c"user.color", b"blue", 0).unwrap();
    assert_eq!(getxattr(&m.at(1, "f"), c"user.color").unwrap(), b"blue");
    assert_eq!(setxattr(&m.at(1, "f"), c"user.color", b"red", libc::XATTR_CREATE), Err(libc::EEXIST));
    assert_eq!(setxattr(&m.at(1, "f"), c"user.none", b"x", libc::XATTR_REPLACE), Err(libc::ENODATA));
    setxattr(&m.at(1, "f"), c"user.color", b"red", libc::XATTR_REPLACE).unwrap();
    setxattr(&m.at(0, "f"), c"trusted.t", b"t", 0).unwrap();
    assert_eq!(getxattr(&m.at(0, "f"), c"user.color").unwrap(), b"red");
    assert_eq!(listxattr(&m.at(1, "f")), ["lustre.lov", "trusted.t", "user.color"]);
    assert_eq!(getxattr(&m.at(0, "f"), c"user.none"), Err(libc::ENODATA));

    // Bounds: the kernel's own for a value, the MDS's for an inode.
    assert_eq!(setxattr(&m.at(0, "f"), c"user.big", &vec![7; 65_537], 0), Err(libc::E2BIG));
    setxattr(&m.at(0, "f"), c"user.big", &vec![7; 65_536], 0).unwrap();
    assert_eq!(getxattr(&m.at(1, "f"), c"user.big").unwrap().len(), 65_536);
    assert_eq!(setxattr(&m.at(0, "f"), c"user.big2", &vec![7; 65_536], 0), Err(libc::ENOSPC));
    // A POSIX ACL (the xattr form: version 2, then user::rw- group::r--
    // other::r--): lanefs keeps none.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 6u16), (0x04, 4), (0x20, 4)] {
        acl.extend_from_slice(&tag.to_le_bytes());
        acl.extend_from_slice(&perm.to_le_bytes());
        acl.extend_from_slice(&u32::MAX.to_le_bytes());
    }
    assert_eq!(setxattr(&m.at(0, "f"), c"system.posix_acl_access", &acl, 0), Err(libc::EOPNOTSUPP));
    assert_eq!(setxattr(&m.at(0, "f"), c"unknown.x", b"x", 0), Err(libc::EOPNOTSUPP));

    // lustre.lov: the layout, which a copy may set back (ignored, as
    // Lustre ignores it on a file that has one) but not remove.
    let lov = getxattr(&m.at(0, "f"), c"lustre.lov").unwrap();
    setxattr(&m.at(0, "f"), c"lustre.lov", &lov, 0).unwrap();
    assert_eq!(setxattr(&m.at(0, "f"), c"lustre.lov", b"not a layout", 0), Err(libc::EINVAL));
    assert_eq!(removexattr(&m.at(0, "f"), c"lustre.lov"), Err(libc::EOPNOTSUPP));
    assert_eq!(getxattr(&m.at(0, "f"), c"lustre.lov").unwrap(), lov);

    removexattr(&m.at(1, "f"), c"user.color").unwrap();
    assert_eq!(removexattr(&m.at(0, "f"), c"user.color"), Err(libc::ENODATA));
    fs::create_dir(m.at(0, "d")).unwrap();
    setxattr(&m.at(0, "d"), c"user.dir", b"yes", 0).unwrap();
    assert_eq!(listxattr(&m.at(1, "d")), ["user.dir"], "a directory has no lustre.lov");

    // The attributes go with their file: a new file at the name has none.
    fs::remove_file(m.at(0, "f")).unwrap();
    fs::write(m.at(0, "f"), b"new").unwrap();
    assert_eq!(listxattr(&m.at(1, "f")), ["lustre.lov"]);
}

#[test]
fn another_user_reads_and_writes_only_what_linux_would_let_it() {
    let Some(m) = mounted(2) else { return };
    fs::create_dir(m.at(0, "sticky")).unwrap();
    fs::set_permissions(m.at(0, "sticky"), fs::Permissions::from_mode(0o1777)).unwrap();
    setxattr(&m.at(0, "sticky"), c"user.dir", b"root's", 0).unwrap();
    fs::write(m.at(0, "sticky/root-file"), b"x").unwrap();
    fs::set_permissions(m.at(0, "sticky/root-file"), fs::Permissions::from_mode(0o644)).unwrap();
    setxattr(&m.at(0, "sticky/root-file"), c"user.a", b"a", 0).unwrap();
    setxattr(&m.at(0, "sticky/root-file"), c"trusted.t", b"t", 0).unwrap();
    setxattr(&m.at(0, "sticky/root-file"), c"security.s", b"s", 0).unwrap();

    let said = python_as_nobody(
        r#"import errno, os, sys
d, root_file = sys.argv[1], sys.argv[1] + "/root-file"
def do(what, f):
    try:
        r = f()
        print(what, "ok", r if r is not None else "")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
do("get user", lambda: os.getxattr(root_file, "user.a"))
do("set user", lambda: os.setxattr(root_file, "user.b", b"b"))
do("remove user", lambda: os.removexattr(root_file, "user.a"))
do("get trusted", lambda: os.getxattr(root_file, "trusted.t"))
do("list", lambda: sorted(os.listxattr(root_file)))
do("get security", lambda: os.getxattr(root_file, "security.s"))
do("set dir", lambda: os.setxattr(d, "user.dir", b"mine"))
mine = d + "/mine"
open(mine, "w").close()
do("set own", lambda: os.setxattr(mine, "user.mine", b"m"))
do("set own trusted", lambda: os.setxattr(mine, "trusted.x", b"x"))
do("set own security", lambda: os.setxattr(mine, "security.x", b"x"))
"#,
        &[&m.at(1, "sticky")],
    );
    let expect = [
        "get user ok b'a'",
        "set user EACCES",
        "remove user EACCES",
        "get trusted ENODATA",
        "list ok ['lustre.lov', 'security.s', 'user.a']",
        "get security ok b's'",
        "set dir EPERM",
        "set own ok ",
        "set own trusted EPERM",
        "set own security EPERM",
    ];
    assert_eq!(said.lines().collect::<Vec<_>>(), expect, "{said}");
    assert_eq!(getxattr(&m.at(0, "sticky"), c"user.dir").unwrap(), b"root's");
    assert_eq!(getxattr(&m.at(0, "sticky/mine"), c"user.mine").unwrap(), b"m");
}
