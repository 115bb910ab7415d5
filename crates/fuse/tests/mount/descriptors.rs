//! What one user can do to another through a second mount: move names,
//! link files in their place, squat names, hold listings. An open
//! descriptor keeps acting on its own file, a name another user can
//! guess is never one lanefs needs, and one user's listings leave room
//! for others'.
//!
//! The other user is uid and gid [`NOBODY`] (no account needed: the
//! commands run with `setuid`), through mount 1; root works through
//! mount 0.

use super::{mounted, Mounted};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NOBODY: u32 = 65534;

/// Runs `script` with `sh -c` as uid and gid [`NOBODY`], `$A` and `$B`
/// the two mounts; its status and what it said.
fn sh_as_nobody(m: &Mounted, script: &str) -> (bool, String) {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("A", m.dirs[0].path())
        .env("B", m.dirs[1].path())
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

/// The layout's `lmm_oi` (the file's fid) in `lustre.lov`, read through
/// the descriptor.
fn lov_fid(file: &fs::File) -> u64 {
    let mut value = [0u8; 4096];
    let name = c"lustre.lov";
    // SAFETY: a NUL-terminated name and a buffer of the length given.
    let n = unsafe { libc::fgetxattr(file.as_raw_fd(), name.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
    assert!(n >= 32, "fgetxattr lustre.lov: {}", std::io::Error::last_os_error());
    u64::from_ne_bytes(value[8..16].try_into().unwrap())
}

/// `fsetxattr(2)` of `name` on `file`.
fn fsetxattr(file: &fs::File, name: &std::ffi::CStr, value: &[u8]) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated name and a value of the length given.
    let rc = unsafe { libc::fsetxattr(file.as_raw_fd(), name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `getxattr(2)` of `name` on `path`.
fn getxattr(path: &std::path::Path, name: &std::ffi::CStr) -> std::io::Result<Vec<u8>> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let mut value = vec![0u8; 65_536];
    // SAFETY: NUL-terminated names and a buffer of the length given.
    let n = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    value.truncate(n as usize);
    Ok(value)
}

/// Root has its file open in a directory anyone may write; through the
/// other mount, another user moves its name away, tries to link root's
/// secret in its place (refused: protected hard links) and puts a file of
/// its own there. Every call on root's descriptor still acts on root's
/// file: `fstat`, `fchmod`, `fchown`, `futimens`, `ftruncate`,
/// `fgetxattr` and `fsetxattr`.
#[test]
fn calls_on_a_descriptor_act_on_its_file_whatever_another_mount_does_to_its_name() {
    let Some(m) = mounted(2) else { return };
    fs::create_dir(m.at(0, "shared")).unwrap();
    fs::set_permissions(m.at(0, "shared"), fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(m.at(0, "secret"), b"root's secret").unwrap();
    fs::set_permissions(m.at(0, "secret"), fs::Permissions::from_mode(0o600)).unwrap();
    let mut mine = OpenOptions::new().create_new(true).read(true).write(true).open(m.at(0, "shared/mine")).unwrap();
    mine.write_all(b"mine").unwrap();
    mine.set_permissions(fs::Permissions::from_mode(0o644)).unwrap();
    let ino = mine.metadata().unwrap().ino();

    let (_, said) = sh_as_nobody(
        &m,
        r#"mv $B/shared/mine $B/shared/moved && echo moved
           ln $B/secret $B/shared/mine 2>&1 || echo "link refused"
           printf theirs > $B/shared/mine && chmod 666 $B/shared/mine && echo replaced"#,
    );
    assert!(said.contains("moved\n"), "{said}");
    assert!(
        said.contains("link refused\n") && said.contains("Operation not permitted"),
        "protected hard links: {said}"
    );
    assert!(said.contains("replaced\n"), "{said}");
    let theirs = fs::metadata(m.at(0, "shared/mine")).unwrap();
    assert_eq!(theirs.uid(), NOBODY);
    assert_ne!(theirs.ino(), ino);

    let held = mine.metadata().unwrap();
    assert_eq!((held.ino(), held.uid(), held.len()), (ino, 0, 4), "fstat: the descriptor's file");
    assert_eq!(lov_fid(&mine), ino, "fgetxattr: the descriptor's file's layout");
    fsetxattr(&mine, c"user.owner", b"root").unwrap();
    fsetxattr(&mine, c"trusted.tag", b"root's").unwrap();
    mine.set_permissions(fs::Permissions::from_mode(0o640)).unwrap();
    std::os::unix::fs::fchown(&mine, Some(4242), Some(4242)).unwrap();
    let at = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    mine.set_times(fs::FileTimes::new().set_accessed(at).set_modified(at)).unwrap();
    mine.set_len(2).unwrap();

    let moved = fs::metadata(m.at(0, "shared/moved")).unwrap();
    assert_eq!(moved.ino(), ino);
    assert_eq!(
        (moved.mode() & 0o7777, moved.uid(), moved.gid(), moved.mtime(), moved.atime(), moved.len()),
        (0o640, 4242, 4242, 1_000_000_000, 1_000_000_000, 2),
        "fchmod, fchown, futimens and ftruncate changed the descriptor's file"
    );
    assert_eq!(getxattr(&m.at(0, "shared/moved"), c"user.owner").unwrap(), b"root", "fsetxattr: its file");
    assert_eq!(getxattr(&m.at(0, "shared/moved"), c"trusted.tag").unwrap(), b"root's");
    for name in [c"user.owner", c"trusted.tag"] {
        let error = getxattr(&m.at(0, "shared/mine"), name).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENODATA), "the file at the old name has no {name:?}");
    }
    let theirs = fs::metadata(m.at(1, "shared/mine")).unwrap();
    assert_eq!(
        (theirs.mode() & 0o7777, theirs.uid(), theirs.len()),
        (0o666, NOBODY, 6),
        "the file now at the old name is untouched"
    );
    assert!(theirs.modified().unwrap() > SystemTime::now() - Duration::from_secs(600));
    let (read, said) = sh_as_nobody(&m, "cat $B/shared/mine; cat $B/shared/moved; cat $B/secret");
    assert!(!read && !said.contains("root's secret"), "nobody still reads nothing of root's: {said}");
}

/// A process works in a directory (its current directory) while another
/// user, through the other mount, moves that directory away and puts one
/// of its own at the old name, with a symbolic link to a file outside the
/// mount and a file of its own where the process will look and write. The
/// process still finds its own file and writes into its own directory:
/// the mount names a directory's entries by the directory's fid, not by
/// the path it last saw it at.
#[test]
fn names_looked_up_in_a_directory_are_in_that_directory_whatever_another_mount_moves() {
    let Some(m) = mounted(2) else { return };
    fs::create_dir(m.at(0, "shared")).unwrap();
    fs::set_permissions(m.at(0, "shared"), fs::Permissions::from_mode(0o777)).unwrap();
    fs::create_dir(m.at(0, "shared/work")).unwrap();
    fs::write(m.at(0, "shared/work/cfg"), b"root's cfg").unwrap();
    let mut worker = std::process::Command::new("sh")
        .arg("-c")
        .arg("read go; cat cfg; printf secret > out; echo; ls")
        .current_dir(m.at(0, "shared/work"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    let (done, said) = sh_as_nobody(
        &m,
        r#"mv $B/shared/work $B/shared/old && mkdir $B/shared/work && ln -s /etc/hostname $B/shared/work/cfg &&
           : > $B/shared/work/out && chmod 666 $B/shared/work/out && echo planted"#,
    );
    assert!(done && said.contains("planted"), "{said}");
    worker.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = worker.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.starts_with("root's cfg\n"), "its own file, not the planted link: {stdout}{stderr}");
    assert_eq!(fs::read(m.at(0, "shared/old/out")).unwrap(), b"secret", "written in its own directory");
    assert_eq!(fs::read(m.at(1, "shared/work/out")).unwrap(), b"", "nothing in the other user's file");
    let (_, listed) = sh_as_nobody(&m, "ls $B/shared/work");
    assert_eq!(listed.split_whitespace().collect::<Vec<_>>(), ["cfg", "out"], "{listed}");
}

/// The name a file removed while open keeps cannot be guessed: a
/// directory another user made at the name such files once had does not
/// make root's `rm` fail, and the open file still answers `fstat`.
#[test]
fn a_removed_open_file_hides_under_a_name_no_one_can_squat() {
    let Some(m) = mounted(2) else { return };
    fs::create_dir(m.at(0, "tmp")).unwrap();
    fs::set_permissions(m.at(0, "tmp"), fs::Permissions::from_mode(0o777)).unwrap();
    let mut file = OpenOptions::new().create_new(true).read(true).write(true).open(m.at(0, "tmp/f")).unwrap();
    file.write_all(b"data").unwrap();
    let ino = file.metadata().unwrap().ino();
    let squat = format!("$B/tmp/.lanefs-unlinked-{ino:x}");
    let (made, said) = sh_as_nobody(&m, &format!("mkdir {squat} && mkdir {squat}-0000000000000000"));
    assert!(made, "{said}");
    fs::remove_file(m.at(0, "tmp/f")).expect("root's rm is not stopped by a squatted name");
    assert_eq!(file.metadata().unwrap().len(), 4, "fstat of the removed open file");
    let names: Vec<String> =
        fs::read_dir(m.at(0, "tmp")).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    let squatted = format!(".lanefs-unlinked-{ino:x}-0000000000000000");
    let hidden: Vec<&String> =
        names.iter().filter(|n| n.starts_with(&format!(".lanefs-unlinked-{ino:x}-")) && **n != squatted).collect();
    assert_eq!(hidden.len(), 1, "one hidden name, with random bits: {names:?}");
    drop(file);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while fs::metadata(m.at(0, &format!("tmp/{}", hidden[0]))).is_ok() {
        assert!(std::time::Instant::now() < deadline, "the hidden name goes with the last close");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A listing longer than the MDS's page (4,096 entries) reads whole, and
/// again after `rewinddir`; one user holding listings open hits its own
/// share (`EMFILE`) while root still lists.
#[test]
fn listings_page_through_big_directories_and_each_user_has_a_share() {
    let Some(m) = mounted(2) else { return };
    let entries = 5000;
    let client = lanefs_client::Client::connect(&m.cluster.mds_address(), Default::default()).unwrap();
    client.mds(lanefs_proto::MdsRequest::Mkdir { path: "/big".into(), permissions: 0o755 }).unwrap();
    for i in 0..entries {
        let request = lanefs_proto::MdsRequest::Symlink { path: format!("/big/{i:05}"), target: "x".into() };
        client.mds(request).unwrap();
    }
    let dir = std::ffi::CString::new(m.at(0, "big").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; the stream is used only until closedir.
    unsafe {
        let stream = libc::opendir(dir.as_ptr());
        assert!(!stream.is_null(), "opendir: {}", std::io::Error::last_os_error());
        let mut counts = Vec::new();
        for _ in 0..2 {
            let mut names = std::collections::BTreeSet::new();
            loop {
                let entry = libc::readdir(stream);
                if entry.is_null() {
                    break;
                }
                let name = std::ffi::CStr::from_ptr((*entry).d_name.as_ptr()).to_string_lossy().into_owned();
                assert!(names.insert(name.clone()), "{name} listed twice");
            }
            counts.push(names.len());
            assert!(names.contains("04999") && names.contains("00000") && names.contains(".."));
            libc::rewinddir(stream);
        }
        libc::closedir(stream);
        assert_eq!(counts, [entries + 2, entries + 2], "every entry, and . and .., twice");
    }

    fs::create_dir(m.at(0, "small")).unwrap();
    fs::write(m.at(0, "small/f"), b"").unwrap();
    // Descriptors for nobody's opens: raised here, inherited by the child.
    let limit = libc::rlimit { rlim_cur: 16_384, rlim_max: 16_384 };
    // SAFETY: a valid rlimit; root may raise its own limits.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let share = lanefs_fuse::listings::LISTINGS_PER_UID_MAX;
    let script = format!(
        r#"import errno, os, sys
fds = []
try:
    while len(fds) < {share} + 100:
        fds.append(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY))
    print("opened", len(fds))
except OSError as e:
    print("opened", len(fds), errno.errorcode[e.errno])
sys.stdout.flush()
sys.stdin.read()
"#
    );
    let mut nobody = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(m.at(1, "small"))
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(nobody.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), format!("opened {share} EMFILE"), "nobody's listings stop at its share");
    let listed = fs::read_dir(m.at(1, "small")).expect("root still lists while nobody holds its share").count();
    assert_eq!(listed, 1);
    drop(nobody.stdin.take());
    nobody.wait().unwrap();
}
