//! The mount answers as a local file system does: each table below runs
//! its steps in a directory of this machine's own file system and then in
//! a lanefs mount, and every step must get the same answer in both (the
//! same value, or the same error number).

use super::mounted;
use std::ffi::CString;
use std::io::Result;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// One step: its name, and what it does in a directory.
type Step = (&'static str, fn(&Path) -> Result<String>);

fn c(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("no NUL in a test path")
}

/// `Ok(what)` when a libc call returned 0 or more, else its errno.
fn rc(ret: libc::c_int, what: &str) -> Result<String> {
    if ret < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(what.to_string())
}

fn mkfifo(path: &Path, mode: u32) -> Result<String> {
    // SAFETY: a valid C string.
    rc(unsafe { libc::mkfifo(c(path).as_ptr(), mode) }, "made")
}

fn mknod(path: &Path, mode: u32, dev: u64) -> Result<String> {
    // SAFETY: a valid C string.
    rc(unsafe { libc::mknod(c(path).as_ptr(), mode, dev) }, "made")
}

/// A file type's name and `ls`'s letter.
fn kind_of(kind: std::fs::FileType) -> (&'static str, char) {
    if kind.is_fifo() {
        ("fifo", 'p')
    } else if kind.is_socket() {
        ("socket", 's')
    } else if kind.is_char_device() {
        ("char", 'c')
    } else if kind.is_block_device() {
        ("block", 'b')
    } else if kind.is_symlink() {
        ("symlink", 'l')
    } else if kind.is_dir() {
        ("dir", 'd')
    } else {
        ("file", 'f')
    }
}

/// What `stat -c '%F %a %h %u:%g %t:%T %s'` would say.
fn stat(path: &Path) -> Result<String> {
    let meta = std::fs::symlink_metadata(path)?;
    let kind = meta.file_type();
    let (name, _) = kind_of(kind);
    let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let size = if kind.is_dir() { 0 } else { meta.len() };
    Ok(format!(
        "{name} {:o} {} {}:{} {major}:{minor} {size}",
        meta.mode() & 0o7777,
        meta.nlink(),
        meta.uid(),
        meta.gid()
    ))
}

/// The names of a directory with their types, sorted.
fn listing(dir: &Path) -> Result<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let (_, letter) = kind_of(entry.file_type()?);
        names.push(format!("{letter}:{}", entry.file_name().to_string_lossy()));
    }
    names.sort();
    Ok(names.join(" "))
}

fn setxattr(path: &Path, name: &str, value: &[u8], flags: i32) -> Result<String> {
    let name = CString::new(name).expect("no NUL");
    // SAFETY: valid C strings and a buffer of the length given.
    let ret = unsafe { libc::lsetxattr(c(path).as_ptr(), name.as_ptr(), value.as_ptr().cast(), value.len(), flags) };
    rc(ret, "set")
}

fn getxattr(path: &Path, name: &str) -> Result<String> {
    let name = CString::new(name).expect("no NUL");
    let mut value = [0u8; 256];
    // SAFETY: valid C strings and a buffer of the length given.
    let got = unsafe { libc::lgetxattr(c(path).as_ptr(), name.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
    if got < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(String::from_utf8_lossy(&value[..got as usize]).into_owned())
}

/// The `user.` attribute names (a mount also lists `lustre.lov`).
fn user_xattrs(path: &Path) -> Result<String> {
    let mut list = [0u8; 4096];
    // SAFETY: a valid C string and a buffer of the length given.
    let got = unsafe { libc::llistxattr(c(path).as_ptr(), list.as_mut_ptr().cast(), list.len()) };
    if got < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut names: Vec<String> = list[..got as usize]
        .split(|b| *b == 0)
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .filter(|n| n.starts_with("user."))
        .collect();
    names.sort();
    Ok(names.join(","))
}

/// Runs `steps` in a local directory and in a mount; every answer must be
/// the same in both.
fn conforms(steps: &[Step]) {
    let Some(m) = mounted(1) else { return };
    let local = tempfile::tempdir().unwrap();
    let lanefs = m.at(0, "t");
    std::fs::create_dir(&lanefs).unwrap();
    let answers = |base: &Path| -> Vec<String> {
        steps
            .iter()
            .map(|(name, step)| {
                let answer = match step(base) {
                    Ok(value) => value,
                    Err(e) => format!("errno {}", e.raw_os_error().map_or("none".into(), errno_name)),
                };
                format!("{name}: {answer}")
            })
            .collect()
    };
    let want = answers(local.path());
    let got = answers(&lanefs);
    let differ: Vec<String> =
        want.iter().zip(&got).filter(|(w, g)| w != g).map(|(w, g)| format!("local {w}\n  lanefs {g}")).collect();
    assert!(differ.is_empty(), "the mount answers otherwise than a local file system:\n{}", differ.join("\n"));
}

fn errno_name(n: i32) -> String {
    let names = [
        (libc::ENOENT, "ENOENT"),
        (libc::ENOTDIR, "ENOTDIR"),
        (libc::EISDIR, "EISDIR"),
        (libc::EEXIST, "EEXIST"),
        (libc::ENOTEMPTY, "ENOTEMPTY"),
        (libc::ENAMETOOLONG, "ENAMETOOLONG"),
        (libc::ELOOP, "ELOOP"),
        (libc::EXDEV, "EXDEV"),
        (libc::EINVAL, "EINVAL"),
        (libc::EPERM, "EPERM"),
        (libc::EACCES, "EACCES"),
        (libc::ENODATA, "ENODATA"),
        (libc::EOPNOTSUPP, "EOPNOTSUPP"),
        (libc::ENXIO, "ENXIO"),
        (libc::ENOSYS, "ENOSYS"),
        (libc::EIO, "EIO"),
        (libc::EBADF, "EBADF"),
    ];
    names.iter().find(|(e, _)| *e == n).map_or(format!("{n}"), |(_, name)| name.to_string())
}

#[test]
fn special_files_are_made_used_and_removed_as_on_a_local_file_system() {
    conforms(&[
        ("mkfifo", |d| mkfifo(&d.join("p"), 0o640)),
        ("stat fifo", |d| stat(&d.join("p"))),
        ("mknod char", |d| mknod(&d.join("c"), libc::S_IFCHR | 0o600, libc::makedev(1, 3))),
        ("stat char", |d| stat(&d.join("c"))),
        ("mknod block", |d| mknod(&d.join("b"), libc::S_IFBLK | 0o600, libc::makedev(7, 200))),
        ("stat block", |d| stat(&d.join("b"))),
        ("mknod regular", |d| mknod(&d.join("r"), libc::S_IFREG | 0o600, 0)),
        ("stat regular", |d| stat(&d.join("r"))),
        ("mknod existing", |d| mknod(&d.join("p"), libc::S_IFIFO | 0o600, 0)),
        ("bind a socket", |d| {
            let listener = std::os::unix::net::UnixListener::bind(d.join("s"))?;
            // A connection through the name reaches this node's listener.
            let mut out = std::os::unix::net::UnixStream::connect(d.join("s"))?;
            let (mut inside, _) = listener.accept()?;
            std::io::Write::write_all(&mut out, b"hi")?;
            let mut got = [0u8; 2];
            std::io::Read::read_exact(&mut inside, &mut got)?;
            Ok(String::from_utf8_lossy(&got).into_owned())
        }),
        ("stat socket", |d| stat(&d.join("s"))),
        ("list", listing),
        ("a pipe carries bytes", |d| {
            // Reader first, without blocking, then the writer.
            let reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(d.join("p"))?;
            let mut writer = std::fs::OpenOptions::new().write(true).open(d.join("p"))?;
            std::io::Write::write_all(&mut writer, b"through")?;
            let mut got = [0u8; 7];
            std::io::Read::read_exact(&mut &reader, &mut got)?;
            Ok(String::from_utf8_lossy(&got).into_owned())
        }),
        ("rename", |d| std::fs::rename(d.join("p"), d.join("p2")).map(|_| "renamed".into())),
        ("link", |d| std::fs::hard_link(d.join("p2"), d.join("p3")).map(|_| "linked".into())),
        ("chmod", |d| {
            std::fs::set_permissions(d.join("p2"), std::os::unix::fs::PermissionsExt::from_mode(0o604))
                .map(|_| "changed".into())
        }),
        ("chown", |d| std::os::unix::fs::lchown(d.join("c"), Some(65534), Some(65534)).map(|_| "changed".into())),
        ("stat linked fifo", |d| stat(&d.join("p3"))),
        ("stat chowned char", |d| stat(&d.join("c"))),
        ("user xattr on a fifo", |d| setxattr(&d.join("p2"), "user.a", b"1", 0)),
        ("trusted xattr on a fifo", |d| setxattr(&d.join("p2"), "trusted.a", b"1", 0)),
        ("rename a fifo over a file", |d| std::fs::rename(d.join("p3"), d.join("r")).map(|_| "renamed".into())),
        ("list again", listing),
        ("a fifo is not a directory", |d| mkfifo(&d.join("p2/x"), 0o600)),
        ("remove all", |d| {
            for name in ["p2", "r", "c", "b", "s"] {
                std::fs::remove_file(d.join(name))?;
            }
            listing(d)
        }),
    ]);
}

use std::os::unix::fs::OpenOptionsExt;

#[test]
fn errors_are_those_posix_names() {
    conforms(&[
        ("setup", |d| {
            std::fs::write(d.join("f"), b"data")?;
            std::fs::create_dir_all(d.join("dir/sub"))?;
            std::os::unix::fs::symlink("loop2", d.join("loop1"))?;
            std::os::unix::fs::symlink("loop1", d.join("loop2"))?;
            Ok("ready".into())
        }),
        ("open through a file", |d| std::fs::read(d.join("f/g")).map(|_| "read".into())),
        ("create through a file", |d| std::fs::write(d.join("f/g"), b"").map(|_| "made".into())),
        ("mkdir through a file", |d| std::fs::create_dir(d.join("f/g")).map(|_| "made".into())),
        ("stat a file with a slash", |d| stat(&d.join("f/"))),
        ("open a file with a slash", |d| std::fs::read(d.join("f/")).map(|_| "read".into())),
        ("rmdir a file", |d| std::fs::remove_dir(d.join("f")).map(|_| "gone".into())),
        ("unlink a directory", |d| std::fs::remove_file(d.join("dir")).map(|_| "gone".into())),
        ("rmdir a full directory", |d| std::fs::remove_dir(d.join("dir")).map(|_| "gone".into())),
        ("mkdir an existing name", |d| std::fs::create_dir(d.join("f")).map(|_| "made".into())),
        ("open a directory for writing", |d| {
            std::fs::OpenOptions::new().write(true).open(d.join("dir")).map(|_| "opened".into())
        }),
        ("rename a directory into itself", |d| {
            std::fs::rename(d.join("dir"), d.join("dir/sub/x")).map(|_| "moved".into())
        }),
        ("rename a file over a directory", |d| std::fs::rename(d.join("f"), d.join("dir")).map(|_| "moved".into())),
        ("rename a directory over a file", |d| std::fs::rename(d.join("dir"), d.join("f")).map(|_| "moved".into())),
        ("rename over a full directory", |d| {
            std::fs::create_dir(d.join("empty"))?;
            std::fs::rename(d.join("empty"), d.join("dir")).map(|_| "moved".into())
        }),
        ("link a directory", |d| std::fs::hard_link(d.join("dir"), d.join("dir2")).map(|_| "linked".into())),
        ("readlink a file", |d| std::fs::read_link(d.join("f")).map(|t| t.display().to_string())),
        ("a loop of links", |d| std::fs::read(d.join("loop1")).map(|_| "read".into())),
        ("a name of 255 bytes", |d| std::fs::write(d.join("n".repeat(255)), b"").map(|_| "made".into())),
        ("create a name of 256 bytes", |d| std::fs::write(d.join("n".repeat(256)), b"").map(|_| "made".into())),
        ("mkdir a name of 256 bytes", |d| std::fs::create_dir(d.join("n".repeat(256))).map(|_| "made".into())),
        ("mkfifo a name of 256 bytes", |d| mkfifo(&d.join("n".repeat(256)), 0o600)),
        ("symlink a name of 256 bytes", |d| {
            std::os::unix::fs::symlink("f", d.join("n".repeat(256))).map(|_| "made".into())
        }),
        ("rename to a name of 256 bytes", |d| {
            std::fs::rename(d.join("f"), d.join("n".repeat(256))).map(|_| "moved".into())
        }),
        ("link to a name of 256 bytes", |d| {
            std::fs::hard_link(d.join("f"), d.join("n".repeat(256))).map(|_| "linked".into())
        }),
        ("stat a name of 256 bytes", |d| stat(&d.join("n".repeat(256)))),
        ("a path of 4096 bytes", |d| {
            let deep = "d/".repeat(2048);
            stat(&d.join(deep))
        }),
        ("rename to another file system", |d| {
            let elsewhere = Path::new("/dev/shm").join(format!("lanefs-conformance-{}", std::process::id()));
            let moved = std::fs::rename(d.join("f"), &elsewhere).map(|_| "moved".into());
            let _ = std::fs::remove_file(&elsewhere);
            moved
        }),
        ("a link of 4096 bytes", |d| {
            std::os::unix::fs::symlink("t".repeat(4096), d.join("long")).map(|_| "made".into())
        }),
        ("user xattr", |d| setxattr(&d.join("f"), "user.a", b"1", 0)),
        ("create an existing xattr", |d| setxattr(&d.join("f"), "user.a", b"2", libc::XATTR_CREATE)),
        ("replace a missing xattr", |d| setxattr(&d.join("f"), "user.b", b"2", libc::XATTR_REPLACE)),
        ("get a missing xattr", |d| getxattr(&d.join("f"), "user.none")),
        ("an unknown namespace", |d| setxattr(&d.join("f"), "nonesuch.a", b"1", 0)),
        ("get xattr", |d| getxattr(&d.join("f"), "user.a")),
        ("user xattr on a symlink", |d| setxattr(&d.join("loop1"), "user.a", b"1", 0)),
        ("list xattrs", |d| user_xattrs(&d.join("f"))),
    ]);
}

/// `cp -p`, `cp -a`, `tar -x`, `touch -d` and Python's `os.utime` on an
/// open descriptor leave the times they set, in a local directory and in
/// a mount alike.
#[test]
fn times_set_through_a_descriptor_or_by_tools_stick() {
    let Some(m) = mounted(1) else { return };
    let local = tempfile::tempdir().unwrap();
    let script = r#"
cd "$1"
mkdir src src/d
printf one > src/f
printf two > src/d/g
touch -d @1000000000 src/f
touch -d @1100000000 src/d/g
touch -d @1200000000 src/d
cp -p src/f cpp
cp -a src cpa
tar -C src -cf "$2/t.tar" .
mkdir tarx
tar -C tarx -xf "$2/t.tar"
python3 - <<'PY'
import os
with open("fd", "w") as f:
    f.write("data")
    f.flush()
    os.utime(f.fileno(), ns=(1_300_000_000_000_000_000, 1_400_000_000_000_000_000))
    f.write(" and more")
with open("fd2", "w") as f:
    f.write("written before")
    f.flush()
    os.utime(f.fileno(), ns=(1_300_000_000_000_000_000, 1_400_000_000_000_000_000))
PY
touch -m -d @1500000000 src/f
# Access times: reads move a local file's (relatime), never a lanefs
# one's (noatime), so only those set outright are compared.
stat -c '%n %Y %s' cpp cpa/f cpa/d/g tarx/f tarx/d/g fd2 src/f
stat -c '%n %Y' cpa/d tarx/d
stat -c '%n %X' fd2
"#;
    let run = |dir: &Path| {
        let scratch = tempfile::tempdir().unwrap();
        let out = std::process::Command::new("bash")
            .arg("-ec")
            .arg(script)
            .arg("times")
            .arg(dir)
            .arg(scratch.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let lanefs = m.at(0, "t");
    std::fs::create_dir(&lanefs).unwrap();
    let want = run(local.path());
    assert!(want.contains("cpp 1000000000 3\n"), "{want}");
    assert!(want.contains("fd2 1400000000 14\n") && want.contains("fd2 1300000000\n"), "{want}");
    assert_eq!(run(&lanefs), want, "the mount keeps the times a local file system keeps");
    // A write after the time was set moves it to now, as locally.
    let after = std::fs::metadata(lanefs.join("fd")).unwrap().modified().unwrap();
    assert!(after > std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_400_000_000), "a later write moves it");
}

/// The mount is `nodev`: a device made in it is listed and kept, but does
/// not open (`EACCES`), so that a device made through one node's mount is
/// no way into another node's hardware.
#[test]
fn a_device_on_the_mount_does_not_open() {
    let Some(m) = mounted(1) else { return };
    mknod(&m.at(0, "null"), libc::S_IFCHR | 0o666, libc::makedev(1, 3)).unwrap();
    assert_eq!(stat(&m.at(0, "null")).unwrap(), "char 644 1 0:0 1:3 0", "(under umask 022)");
    let opened = std::fs::OpenOptions::new().write(true).open(m.at(0, "null"));
    assert_eq!(opened.unwrap_err().raw_os_error(), Some(libc::EACCES));
}

fn fallocate(path: &Path, mode: i32, offset: i64, len: i64) -> Result<String> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    // SAFETY: an open descriptor; fallocate reads no memory of ours.
    rc(unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&file), mode, offset, len) }, "done")
}

/// Size, and space held in KiB (`st_blocks / 2`), as `du` counts it.
fn space(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path)?;
    Ok(format!("size {} space {}K", meta.len(), meta.blocks() / 2))
}

const MIB: usize = 1 << 20;

#[test]
fn fallocate_and_sparse_files_hold_the_space_a_local_file_system_says() {
    conforms(&[
        ("a sparse file", |d| {
            std::fs::File::create(d.join("sparse"))?.set_len(10 << 30)?;
            space(&d.join("sparse"))
        }),
        ("reserve 1 MiB", |d| {
            std::fs::File::create(d.join("r"))?;
            fallocate(&d.join("r"), 0, 0, MIB as i64)?;
            space(&d.join("r"))
        }),
        ("reserve past the end, keeping the size", |d| {
            fallocate(&d.join("r"), libc::FALLOC_FL_KEEP_SIZE, MIB as i64, MIB as i64)?;
            space(&d.join("r"))
        }),
        ("reserved bytes read as zeros", |d| {
            Ok(std::fs::read(d.join("r"))?.iter().filter(|b| **b != 0).count().to_string())
        }),
        ("punch a hole", |d| {
            std::fs::write(d.join("h"), vec![7u8; 3 * MIB])?;
            fallocate(&d.join("h"), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, MIB as i64, MIB as i64)?;
            space(&d.join("h"))
        }),
        ("the hole reads as zeros and the rest as written", |d| {
            let bytes = std::fs::read(d.join("h"))?;
            let zeros = bytes.iter().filter(|b| **b == 0).count();
            let sevens = bytes.iter().filter(|b| **b == 7).count();
            Ok(format!("{zeros} zeros {sevens} sevens"))
        }),
        ("a hole of part of a page", |d| {
            fallocate(&d.join("h"), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 100, 200)?;
            let bytes = std::fs::read(d.join("h"))?;
            Ok(format!("{:?} {:?} {:?}", &bytes[99..101], &bytes[299..301], bytes.len()))
        }),
        ("a hole without KEEP_SIZE", |d| fallocate(&d.join("h"), libc::FALLOC_FL_PUNCH_HOLE, 0, 10)),
        ("a length of 0", |d| fallocate(&d.join("h"), 0, 0, 0)),
        ("a reservation, even one keeping the size, and a hole move the modification time", |d| {
            let set = |path: &Path| -> Result<()> {
                let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
                std::fs::File::options().write(true).open(path)?.set_modified(old)
            };
            let moved = |path: &Path| -> Result<bool> {
                Ok(std::fs::metadata(path)?.modified()?
                    != std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000))
            };
            set(&d.join("r"))?;
            fallocate(&d.join("r"), libc::FALLOC_FL_KEEP_SIZE, 4 * MIB as i64, MIB as i64)?;
            set(&d.join("h"))?;
            fallocate(&d.join("h"), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 0, 4096)?;
            Ok(format!("reserved: moved {}, punched: moved {}", moved(&d.join("r"))?, moved(&d.join("h"))?))
        }),
        ("a file open for reading only", |d| {
            let file = std::fs::File::open(d.join("h"))?;
            // SAFETY: an open descriptor.
            rc(unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&file), 0, 0, 10) }, "done")
        }),
    ]);
}

/// `fallocate` modes that lanefs does not have are refused by name, as on
/// Lustre; the bytes stay as they were.
#[test]
fn fallocate_modes_lanefs_lacks_are_eopnotsupp() {
    let Some(m) = mounted(1) else { return };
    std::fs::write(m.at(0, "f"), vec![7u8; 8192]).unwrap();
    for mode in [libc::FALLOC_FL_ZERO_RANGE, libc::FALLOC_FL_COLLAPSE_RANGE, libc::FALLOC_FL_INSERT_RANGE] {
        let refused = fallocate(&m.at(0, "f"), mode, 0, 4096).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::EOPNOTSUPP), "mode {mode:#x}");
    }
    assert_eq!(std::fs::read(m.at(0, "f")).unwrap(), vec![7u8; 8192]);
}
