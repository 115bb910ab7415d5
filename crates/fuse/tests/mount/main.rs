//! lanefs mounted through FUSE, used by the standard library's file calls
//! as any program would: two mounts of one cluster are two nodes, and what
//! one writes the other reads.
//!
//! Mounting needs root and /dev/fuse; without them each test says so and
//! does nothing.

mod conformance;
mod descriptors;
mod mappings;
mod mpiio_striping;
#[path = "../../../../tests/support/mpirun_session.rs"]
mod mpirun_session;
mod xattrs;

use lanefs_client::{Client, ClientOptions};
use lanefs_fuse::MountConfig;
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

struct Mounted {
    cluster: LocalCluster,
    _sessions: Vec<fuser::BackgroundSession>,
    dirs: Vec<tempfile::TempDir>,
}

impl Mounted {
    fn at(&self, i: usize, path: &str) -> PathBuf {
        self.dirs[i].path().join(path.trim_start_matches('/'))
    }
}

/// A cluster of two OSTs and `mounts` mounts of it, or `None` (said) where
/// this machine cannot mount.
fn mounted(mounts: usize) -> Option<Mounted> {
    mounted_with(mounts, ClientOptions::default())
}

fn mounted_with(mounts: usize, options: ClientOptions) -> Option<Mounted> {
    let config = MountConfig { threads: 2, ..MountConfig::default() };
    mounted_as(&vec![config; mounts], options)
}

/// A cluster of two OSTs with one mount per config given, or `None`.
fn mounted_as(configs: &[MountConfig], options: ClientOptions) -> Option<Mounted> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/fuse").exists() {
        eprintln!("skipped: mounting needs root and /dev/fuse");
        return None;
    }
    let cluster = LocalCluster::start(LocalClusterConfig { osts: 2, ..Default::default() }).expect("cluster");
    let mut sessions = Vec::new();
    let mut dirs = Vec::new();
    for config in configs {
        let dir = tempfile::tempdir().unwrap();
        let client = Client::connect(&cluster.mds_address(), options.clone()).unwrap();
        sessions.push(lanefs_fuse::spawn(client, dir.path(), config).expect("mounts"));
        dirs.push(dir);
    }
    Some(Mounted { cluster, _sessions: sessions, dirs })
}

/// Debian's Python, which has h5py and mpi4py (`make test` installs them).
const PYTHON: &str = "/usr/bin/python3";

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ salt).collect()
}

#[test]
fn a_write_in_one_mount_is_read_in_another() {
    let Some(m) = mounted(2) else { return };
    let data = pattern(3 << 20, 7);
    fs::write(m.at(0, "shared"), &data).unwrap();
    assert_eq!(fs::read(m.at(1, "shared")).unwrap(), data, "the other mount reads every byte");
    assert_eq!(fs::metadata(m.at(1, "shared")).unwrap().len(), data.len() as u64);
    // Both mounts keep the file open and write into each other's bytes.
    let a = OpenOptions::new().read(true).write(true).open(m.at(0, "shared")).unwrap();
    let b = OpenOptions::new().read(true).write(true).open(m.at(1, "shared")).unwrap();
    a.write_all_at(b"from a", 1000).unwrap();
    let mut got = [0u8; 6];
    b.read_exact_at(&mut got, 1000).unwrap();
    assert_eq!(&got, b"from a", "a returned write() is seen by a later read() elsewhere");
    b.write_all_at(b"from b", 1000).unwrap();
    a.read_exact_at(&mut got, 1000).unwrap();
    assert_eq!(&got, b"from b");
    // Growing the file in one mount shows in the other's size at once.
    b.write_all_at(b"end", (5 << 20) - 3).unwrap();
    assert_eq!(a.metadata().unwrap().len(), 5 << 20);
    let mut tail = Vec::new();
    (&a).seek(SeekFrom::Start((5 << 20) - 3)).unwrap();
    (&a).read_to_end(&mut tail).unwrap();
    assert_eq!(tail, b"end", "a read stops at the end of the file");
}

#[test]
fn the_namespace_and_its_errors_are_posix() {
    let Some(m) = mounted(2) else { return };
    fs::create_dir(m.at(0, "d")).unwrap();
    assert_eq!(fs::create_dir(m.at(1, "d")).unwrap_err().kind(), ErrorKind::AlreadyExists);
    fs::write(m.at(0, "d/f"), b"x").unwrap();
    let new = OpenOptions::new().write(true).create_new(true).open(m.at(1, "d/f"));
    assert_eq!(new.unwrap_err().kind(), ErrorKind::AlreadyExists, "O_CREAT|O_EXCL on an existing file");
    assert_eq!(fs::remove_dir(m.at(1, "d")).unwrap_err().raw_os_error(), Some(libc::ENOTEMPTY));
    assert_eq!(fs::read(m.at(1, "d/none")).unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(fs::read(m.at(1, "d/f/g")).unwrap_err().raw_os_error(), Some(libc::ENOTDIR));
    let long = "n".repeat(256);
    assert_eq!(fs::write(m.at(0, &long), b"").unwrap_err().raw_os_error(), Some(libc::ENAMETOOLONG));
    assert_eq!(OpenOptions::new().write(true).open(m.at(0, "d")).unwrap_err().raw_os_error(), Some(libc::EISDIR));

    // rename, also over an existing file, seen from the other mount
    fs::write(m.at(0, "d/g"), b"gg").unwrap();
    fs::rename(m.at(1, "d/f"), m.at(1, "d/g")).unwrap();
    assert_eq!(fs::read(m.at(0, "d/g")).unwrap(), b"x");
    let names = |i, dir| {
        let mut v: Vec<String> =
            fs::read_dir(m.at(i, dir)).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    assert_eq!(names(0, "d"), ["g"]);
    fs::rename(m.at(0, "d"), m.at(0, "e")).unwrap();
    assert_eq!(fs::read(m.at(1, "e/g")).unwrap(), b"x", "a renamed directory's files follow it");

    // many entries list in full (the MDS answers in pages)
    for i in 0..300 {
        fs::write(m.at(0, &format!("e/{i:04}")), b"").unwrap();
    }
    assert_eq!(names(1, "e").len(), 301);

    // chmod reaches the MDS, which checks each caller's own uid and gid
    fs::set_permissions(m.at(0, "e/g"), fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(fs::metadata(m.at(1, "e/g")).unwrap().permissions().mode() & 0o777, 0o600);
    let cat_as_nobody = |path: PathBuf| {
        use std::os::unix::process::CommandExt;
        let out = std::process::Command::new("cat").arg(path).uid(65534).gid(65534).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, said) = cat_as_nobody(m.at(1, "e/g"));
    assert!(!ok && said.contains("Permission denied"), "another user is refused: {said}");
    let test_as_nobody = |flag: &str| {
        use std::os::unix::process::CommandExt;
        let path = m.at(1, "e/g");
        std::process::Command::new("test").arg(flag).arg(path).uid(65534).gid(65534).status().unwrap().success()
    };
    assert!(!test_as_nobody("-r") && !test_as_nobody("-w"), "access(2) says so too");
    fs::set_permissions(m.at(0, "e/g"), fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(cat_as_nobody(m.at(1, "e/g")), (true, String::new()));
    assert!(test_as_nobody("-r") && !test_as_nobody("-w"));
    let truncate_as_nobody = || {
        use std::os::unix::process::CommandExt;
        let out =
            std::process::Command::new("truncate").args(["-s", "0"]).arg(m.at(1, "e/g")).uid(65534).gid(65534).output();
        out.unwrap().status.success()
    };
    assert!(!truncate_as_nobody(), "truncate(2) needs write permission");
    fs::create_dir(m.at(0, "private")).unwrap();
    fs::write(m.at(0, "private/secret"), b"s").unwrap();
    fs::set_permissions(m.at(0, "private"), fs::Permissions::from_mode(0o711)).unwrap();
    let ls_as_nobody = {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("ls").arg(m.at(1, "private")).uid(65534).gid(65534).output().unwrap()
    };
    assert!(!ls_as_nobody.status.success(), "listing a directory needs read permission on it");
    assert_eq!(fs::read(m.at(0, "e/g")).unwrap(), b"x");

    fs::remove_file(m.at(1, "e/g")).unwrap();
    assert_eq!(fs::metadata(m.at(0, "e/g")).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn truncate_append_and_fsync() {
    let Some(m) = mounted(2) else { return };
    let mut f = OpenOptions::new().create(true).write(true).truncate(true).open(m.at(0, "log")).unwrap();
    f.write_all(&pattern(100_000, 1)).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let mut g = OpenOptions::new().append(true).open(m.at(1, "log")).unwrap();
    g.write_all(b"appended").unwrap();
    drop(g);
    let all = fs::read(m.at(0, "log")).unwrap();
    assert_eq!(all.len(), 100_008);
    assert_eq!(&all[100_000..], b"appended", "O_APPEND writes at the end the OSTs know");
    OpenOptions::new().write(true).open(m.at(1, "log")).unwrap().set_len(10).unwrap();
    assert_eq!(fs::read(m.at(0, "log")).unwrap(), pattern(10, 1));
    OpenOptions::new().write(true).truncate(true).open(m.at(0, "log")).unwrap();
    assert_eq!(fs::metadata(m.at(1, "log")).unwrap().len(), 0, "O_TRUNC");
}

#[test]
fn a_file_removed_while_open_stays_readable_until_its_last_close() {
    let Some(m) = mounted(1) else { return };
    fs::create_dir(m.at(0, "d")).unwrap();
    let mut f = OpenOptions::new().create_new(true).read(true).write(true).open(m.at(0, "d/scratch")).unwrap();
    f.write_all(b"scratch data").unwrap();
    fs::remove_file(m.at(0, "d/scratch")).unwrap();
    assert_eq!(fs::metadata(m.at(0, "d/scratch")).unwrap_err().kind(), ErrorKind::NotFound);
    let mut back = String::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut back).unwrap();
    assert_eq!(back, "scratch data", "still readable through the open descriptor");
    assert_eq!(f.metadata().unwrap().len(), 12);
    drop(f);
    // The kernel releases the file just after close(2) returns.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while fs::read_dir(m.at(0, "d")).unwrap().next().is_some() {
        assert!(std::time::Instant::now() < deadline, "the removed file is gone after its last close");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs `script` with `sh -e`, `$A` and `$B` set to the two mounts, in a
/// scratch directory of its own (fio leaves its verify state there).
fn sh(m: &Mounted, script: &str) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .current_dir(scratch.path())
        .arg("-ec")
        .arg(script)
        .env("A", m.dirs[0].path())
        .env("B", m.dirs[1].path())
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script}\n{said}");
    said
}

#[test]
fn ordinary_tools_round_trip_between_mounts() {
    let Some(m) = mounted(2) else { return };
    let tree = env!("CARGO_MANIFEST_DIR");
    sh(
        &m,
        &format!(
            "dd if=/dev/urandom of=$A/random bs=1M count=8 status=none
             cp $B/random $A/copy
             cmp $A/random $B/copy
             test \"$(sha256sum < $A/random)\" = \"$(sha256sum < $B/copy)\"
             tar -C {tree} -cf $A/src.tar src tests
             mkdir $B/x && tar -C $B/x -xf $B/src.tar
             diff -r {tree}/src $A/x/src && diff -r {tree}/tests $A/x/tests"
        ),
    );
}

/// fio (Debian's) writes one shared file from both mounts at once, two jobs
/// each at their own offsets, and each mount's jobs' data is verified from
/// the other mount.
#[test]
fn fio_writes_one_shared_file_from_both_mounts_and_the_other_verifies_it() {
    let Some(m) = mounted(2) else { return };
    if std::process::Command::new("fio").arg("--version").output().is_err() {
        panic!("fio is missing: make test installs it (apt-get install fio)");
    }
    let job = |dir: &str, offset: &str| {
        format!(
            "fio --name=shared --filename={dir}/shared --ioengine=psync --bs=1M --size=8M --numjobs=2 \
             --offset={offset} --offset_increment=8M --verify=crc32c --group_reporting"
        )
    };
    let script = format!(
        "{wa} --rw=write --do_verify=0 > /dev/null &
         {wb} --rw=write --do_verify=0 > /dev/null
         wait $!
         {va} --rw=write --verify_only --verify_fatal=1 > /dev/null
         {vb} --rw=write --verify_only --verify_fatal=1 > /dev/null",
        wa = job("$A", "0"),
        wb = job("$B", "16M"),
        va = job("$B", "0"),
        vb = job("$A", "16M"),
    );
    sh(&m, &script);
    assert_eq!(fs::metadata(m.at(0, "shared")).unwrap().len(), 32 << 20);
}

/// Writes at random offsets and sizes alternate between two mounts, and
/// reads from either, also straddling the end of the file, return what a
/// per-byte oracle says the file holds.
#[test]
fn random_writes_and_reads_across_mounts_match_a_per_byte_oracle() {
    use rand::{Rng, SeedableRng};
    let Some(m) = mounted(2) else { return };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    let files: Vec<fs::File> = (0..2)
        .map(|i| OpenOptions::new().create(true).truncate(false).read(true).write(true).open(m.at(i, "f")).unwrap())
        .collect();
    let mut oracle: Vec<u8> = Vec::new();
    for step in 0..300 {
        let who = rng.gen_range(0..2);
        let offset = rng.gen_range(0..3u64 << 20);
        let len = rng.gen_range(1..200_000usize);
        if rng.gen_bool(0.5) {
            let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            files[who].write_all_at(&data, offset).unwrap();
            let end = offset as usize + len;
            if oracle.len() < end {
                oracle.resize(end, 0);
            }
            oracle[offset as usize..end].copy_from_slice(&data);
        } else {
            let mut buf = vec![0u8; len];
            let mut got = 0;
            while got < len {
                match files[who].read_at(&mut buf[got..], offset + got as u64).unwrap() {
                    0 => break,
                    n => got += n,
                }
            }
            let want = oracle.get(offset as usize..(offset as usize + len).min(oracle.len())).unwrap_or(&[]);
            assert_eq!(
                got,
                want.len(),
                "step {step}: mount {who} read {got} bytes at {offset}, the file has {}",
                oracle.len()
            );
            assert!(buf[..got] == *want, "step {step}: mount {who} read other bytes at {offset}+{len}");
        }
        if step % 50 == 0 {
            assert_eq!(
                files[1 - who].metadata().unwrap().len(),
                oracle.len() as u64,
                "step {step}: the size either mount sees"
            );
        }
    }
}

/// An OSS that stops answering gives `EIO` within the timeout, never a
/// hang; when it is back, the mount works again.
#[test]
fn an_oss_out_of_reach_gives_eio_and_the_mount_recovers() {
    let options = ClientOptions::default().with_timeout(std::time::Duration::from_secs(2));
    let Some(mut m) = mounted_with(1, options) else { return };
    fs::write(m.at(0, "f"), pattern(1 << 20, 3)).unwrap();
    m.cluster.stop_oss();
    let started = std::time::Instant::now();
    let err = fs::read(m.at(0, "f")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "an error, not a hang");
    assert!(fs::read_dir(m.at(0, "")).unwrap().count() == 1, "the namespace needs only the MDS");
    m.cluster.start_oss().unwrap();
    assert_eq!(fs::read(m.at(0, "f")).unwrap(), pattern(1 << 20, 3), "the mount works again");
}

/// h5py (Debian's `python3-h5py`): a dataset written through one mount is
/// read back through the other.
#[test]
fn an_hdf5_dataset_written_in_one_mount_is_read_in_the_other() {
    let Some(m) = mounted(2) else { return };
    let python = PYTHON;
    let has_h5py = std::process::Command::new(python).args(["-c", "import h5py"]).status().is_ok_and(|s| s.success());
    assert!(has_h5py, "h5py is missing: make test installs it (apt-get install python3-h5py)");
    let script = r#"
import sys, h5py, numpy as np
a, b = sys.argv[1], sys.argv[2]
data = np.arange(1 << 20, dtype=np.float64).reshape(1024, 1024) * 0.5
with h5py.File(a + "/d.h5", "w") as f:
    f.create_dataset("x", data=data, chunks=(128, 1024))
    f["x"].attrs["units"] = "half"
with h5py.File(b + "/d.h5", "r") as f:
    assert f["x"].attrs["units"] == "half"
    assert (f["x"][...] == data).all()
print("ok")
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(m.dirs[0].path())
        .arg(m.dirs[1].path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Parallel HDF5 over Open MPI (Debian's `python3-h5py-mpi`, `mpirun`):
/// two ranks write one shared dataset collectively through one mount, and
/// the other mount reads every value back.
#[test]
fn parallel_hdf5_under_mpirun_writes_one_dataset_the_other_mount_reads() {
    let Some(m) = mounted(2) else { return };
    let python = PYTHON;
    let has_mpi = std::process::Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(has_mpi, "mpirun is missing: make test installs it (apt-get install openmpi-bin python3-h5py-mpi)");
    let writer = r#"
import sys
from mpi4py import MPI
import h5py, numpy as np
comm = MPI.COMM_WORLD
n = 64
with h5py.File(sys.argv[1], "w", driver="mpio", comm=comm) as f:
    d = f.create_dataset("x", (comm.size * n, 1024), dtype="f8")
    with d.collective:
        d[comm.rank * n:(comm.rank + 1) * n, :] = np.arange(n * 1024).reshape(n, 1024) + comm.rank * 1e6
"#;
    let script = m.dirs[0].path().join("write_h5.py");
    fs::write(&script, writer).unwrap();
    let out = std::process::Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-np", "2", python])
        .env("OMPI_MCA_orte_tmpdir_base", mpirun_session::base())
        .arg(&script)
        .arg(m.at(0, "p.h5"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let reader = r#"
import sys, h5py, numpy as np
n = 64
with h5py.File(sys.argv[1], "r") as f:
    x = f["x"][...]
want = np.concatenate([np.arange(n * 1024).reshape(n, 1024) + r * 1e6 for r in range(2)])
print(x.shape == want.shape and bool((x == want).all()))
"#;
    let out = std::process::Command::new(python).args(["-c", reader]).arg(m.at(1, "p.h5")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "True\n", "{}", String::from_utf8_lossy(&out.stderr));
}

/// The modification time: set by `touch -d` in one mount and seen in the
/// other, and moved to now by a write and its close.
#[test]
fn the_modification_time_follows_touch_and_writes() {
    let Some(m) = mounted(2) else { return };
    fs::write(m.at(0, "f"), b"one").unwrap();
    sh(&m, "touch -d @1000000000 $A/f");
    let mtime = |i| fs::metadata(m.at(i, "f")).unwrap().modified().unwrap();
    assert_eq!(mtime(1), std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000));
    let before = std::time::SystemTime::now() - std::time::Duration::from_secs(5);
    fs::write(m.at(1, "f"), b"two").unwrap();
    assert!(mtime(0) > before, "a write and its close set the time to now");
}

/// A file's `lustre.lov` extended attribute, read with `getxattr(2)`.
struct Lov(Vec<u8>);

impl Lov {
    fn of(path: &Path) -> Lov {
        let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        let mut buf = vec![0u8; 65536];
        // SAFETY: NUL-terminated strings and a buffer of the length given.
        let n = unsafe { libc::getxattr(path.as_ptr(), c"lustre.lov".as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        assert!(n > 0, "{}", std::io::Error::last_os_error());
        buf.truncate(n as usize);
        Lov(buf)
    }

    fn u16_at(&self, i: usize) -> u16 {
        u16::from_ne_bytes(self.0[i..i + 2].try_into().unwrap())
    }

    fn u32_at(&self, i: usize) -> u32 {
        u32::from_ne_bytes(self.0[i..i + 4].try_into().unwrap())
    }

    fn u64_at(&self, i: usize) -> u64 {
        u64::from_ne_bytes(self.0[i..i + 8].try_into().unwrap())
    }
}

/// A file's layout reads as Lustre's `lustre.lov` extended attribute: a
/// `lov_user_md_v1` naming the file's objects, or for a composite file a
/// `lov_comp_md_v1` with one per component.
#[test]
fn the_layout_reads_as_lustres_lov_extended_attribute() {
    let Some(m) = mounted(1) else { return };
    fs::write(m.at(0, "f"), b"x").unwrap();
    let lov = Lov::of(&m.at(0, "f"));
    let (u16_at, u32_at, u64_at) = (|i| lov.u16_at(i), |i| lov.u32_at(i), |i| lov.u64_at(i));
    assert_eq!(u32_at(0), 0x0BD1_0BD0, "LOV_USER_MAGIC_V1");
    let client = Client::connect(&m.cluster.mds_address(), ClientOptions::default()).unwrap();
    let lanefs_proto::MdsReply::Stripe(info) =
        client.mds(lanefs_proto::MdsRequest::GetStripe { path: "/f".into() }).unwrap()
    else {
        panic!("getstripe answers a stripe")
    };
    let layout = info.layout.expect("a file's layout");
    assert_eq!(u32_at(24) as u64, layout.stripe_size());
    assert_eq!(u16_at(28) as u32, layout.stripe_count());
    assert_eq!(lov.0.len(), 32 + 24 * layout.objects().len());
    for (i, key) in layout.objects().iter().enumerate() {
        let at = 32 + 24 * i;
        assert_eq!((u64_at(at), u32_at(at + 20)), (key.object.0, key.ost.0), "object {i}");
    }
    // A composite (PFL) file: a lov_comp_md_v1 whose entries point at each
    // component's lov_user_md_v1.
    let pfl = lanefs_proto::StripeSpec {
        components: Some(vec![
            lanefs_proto::ComponentSpec { end: 1 << 20, stripe: lanefs_proto::StripeSpec::default() },
            lanefs_proto::ComponentSpec {
                end: u64::MAX,
                stripe: lanefs_proto::StripeSpec { count: Some(2), ..Default::default() },
            },
        ]),
        ..Default::default()
    };
    let create = lanefs_proto::MdsRequest::Create {
        path: "/pfl".into(),
        stripe: pfl,
        mode: lanefs_proto::CreateMode::Exclusive,
        access: lanefs_proto::Access::ReadWrite,
        permissions: 0o644,
    };
    let lanefs_proto::MdsReply::File(info) = client.mds(create).unwrap() else { panic!("create answers a file") };
    let lov = Lov::of(&m.at(0, "pfl"));
    let (u16_at, u32_at, u64_at) = (|i| lov.u16_at(i), |i| lov.u32_at(i), |i| lov.u64_at(i));
    assert_eq!((u32_at(0), u32_at(4) as usize, u16_at(14)), (0x0BD6_0BD0, lov.0.len(), 2), "LOV_USER_MAGIC_COMP_V1");
    for (i, (component, stripes)) in info.layout.components().iter().zip([1usize, 2]).enumerate() {
        let entry = 32 + 48 * i;
        assert_eq!(
            (u32_at(entry), u64_at(entry + 8), u64_at(entry + 16)),
            (i as u32 + 1, component.start, component.end)
        );
        let (offset, size) = (u32_at(entry + 24) as usize, u32_at(entry + 28) as usize);
        assert_eq!((u32_at(offset), size), (0x0BD1_0BD0, 32 + 24 * stripes), "component {i}'s lov_user_md_v1");
        assert_eq!(u16_at(offset + 28) as usize, stripes);
    }
}

/// `include/lanefs_user.h`'s ioctl numbers, as its macros make them.
const IOC_LADVISE: libc::c_ulong = (3 << 30) | (32 << 16) | ((b'L' as libc::c_ulong) << 8) | 1;
const IOC_GROUP_LOCK: libc::c_ulong = (1 << 30) | (8 << 16) | ((b'L' as libc::c_ulong) << 8) | 2;
const IOC_GROUP_UNLOCK: libc::c_ulong = (1 << 30) | (8 << 16) | ((b'L' as libc::c_ulong) << 8) | 3;
const IOC_CREATE_STRIPED: libc::c_ulong = (1 << 30) | (280 << 16) | ((b'L' as libc::c_ulong) << 8) | 4;

fn ioctl(file: &fs::File, request: libc::c_ulong, arg: *mut u8) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: `arg` points to as many bytes as `request` names.
    match unsafe { libc::ioctl(file.as_raw_fd(), request, arg) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// A group lock taken through one mount's ioctl holds off another mount's
/// write until it is released; lockahead through the ioctl answers as
/// `llapi_ladvise` does.
#[test]
fn group_locks_and_lockahead_through_the_mounts_ioctls() {
    let Some(m) = mounted(2) else { return };
    fs::write(m.at(0, "g"), vec![0u8; 4096]).unwrap();
    let a = OpenOptions::new().read(true).write(true).open(m.at(0, "g")).unwrap();
    let mut gid = 7u64.to_ne_bytes();
    ioctl(&a, IOC_GROUP_LOCK, gid.as_mut_ptr()).unwrap();
    let path = m.at(1, "g");
    let writer = std::thread::spawn(move || {
        let b = OpenOptions::new().write(true).open(path).unwrap();
        b.write_all_at(b"from b", 0).unwrap();
        std::time::Instant::now()
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!writer.is_finished(), "the other mount's write waits for the group lock");
    let released = std::time::Instant::now();
    ioctl(&a, IOC_GROUP_UNLOCK, gid.as_mut_ptr()).unwrap();
    assert!(writer.join().unwrap() >= released, "and goes on once it is released");
    let mut got = [0u8; 6];
    a.read_exact_at(&mut got, 0).unwrap();
    assert_eq!(&got, b"from b");

    // struct lanefs_ladvise: advice, flags, mode, result, start, end.
    let mut advice = [0u8; 32];
    advice[0..4].copy_from_slice(&4u32.to_ne_bytes()); // lockahead
    advice[4..8].copy_from_slice(&1u32.to_ne_bytes()); // asynchronous
    advice[8..12].copy_from_slice(&2u32.to_ne_bytes()); // write
    advice[12..16].copy_from_slice(&u32::MAX.to_ne_bytes());
    advice[16..24].copy_from_slice(&(1u64 << 20).to_ne_bytes());
    advice[24..32].copy_from_slice(&((2u64 << 20) - 1).to_ne_bytes());
    ioctl(&a, IOC_LADVISE, advice.as_mut_ptr()).unwrap();
    assert_eq!(u32::from_ne_bytes(advice[12..16].try_into().unwrap()), 0, "LLA_RESULT_SENT");
    advice[8..12].copy_from_slice(&9u32.to_ne_bytes()); // no such mode
    let err = ioctl(&a, IOC_LADVISE, advice.as_mut_ptr()).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EINVAL), "{err}");
}

/// A group lock needs a descriptor open for writing (`EBADF` otherwise)
/// and a group id other than 0 (`EINVAL`); and a write through another
/// mount, behind a group lock, fails with `ETIMEDOUT` once that mount's
/// timeout has passed instead of hanging for as long as the lock is held.
#[test]
fn a_group_lock_needs_a_writer_and_a_gid_and_holds_a_write_off_only_until_the_timeout() {
    let timeout = std::time::Duration::from_secs(2);
    let Some(m) = mounted_with(2, ClientOptions::default().with_timeout(timeout)) else { return };
    fs::write(m.at(0, "g"), vec![0u8; 4096]).unwrap();
    let reader = fs::File::open(m.at(0, "g")).unwrap();
    let mut gid = 7u64.to_ne_bytes();
    let refused = ioctl(&reader, IOC_GROUP_LOCK, gid.as_mut_ptr()).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EBADF), "read-only: {refused}");
    let a = OpenOptions::new().read(true).write(true).open(m.at(0, "g")).unwrap();
    let mut zero = 0u64.to_ne_bytes();
    let refused = ioctl(&a, IOC_GROUP_LOCK, zero.as_mut_ptr()).unwrap_err();
    assert_eq!(refused.raw_os_error(), Some(libc::EINVAL), "gid 0: {refused}");
    ioctl(&a, IOC_GROUP_LOCK, gid.as_mut_ptr()).unwrap();
    let b = OpenOptions::new().write(true).open(m.at(1, "g")).unwrap();
    let started = std::time::Instant::now();
    let failed = b.write_all_at(b"from b", 0).unwrap_err();
    let waited = started.elapsed();
    assert_eq!(failed.raw_os_error(), Some(libc::ETIMEDOUT), "{failed}");
    assert!(waited >= timeout && waited < timeout * 5, "failed after {waited:?}");
    ioctl(&a, IOC_GROUP_UNLOCK, gid.as_mut_ptr()).unwrap();
    b.write_all_at(b"from b", 0).unwrap();
}

/// The C header's ioctl numbers and structure size are the ones the mount
/// answers to.
#[test]
fn the_c_header_names_the_ioctls_the_mount_answers() {
    let dir = tempfile::tempdir().unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");
    let program = dir.path().join("n.c");
    fs::write(
        &program,
        "#include <stdio.h>\n#include \"lanefs_user.h\"\nint main(void) { printf(\"%lu %lu %lu %zu %lu %zu\", \
         (unsigned long)LANEFS_IOC_LADVISE, (unsigned long)LANEFS_IOC_GROUP_LOCK, \
         (unsigned long)LANEFS_IOC_GROUP_UNLOCK, sizeof(struct lanefs_ladvise), \
         (unsigned long)LANEFS_IOC_CREATE_STRIPED, sizeof(struct lanefs_create)); return 0; }\n",
    )
    .unwrap();
    let binary = dir.path().join("n");
    let built = std::process::Command::new("cc").arg("-I").arg(include).arg(&program).arg("-o").arg(&binary).status();
    assert!(built.is_ok_and(|s| s.success()), "cc compiles a program with include/lanefs_user.h");
    let out = std::process::Command::new(&binary).output().unwrap();
    let expected = format!("{IOC_LADVISE} {IOC_GROUP_LOCK} {IOC_GROUP_UNLOCK} 32 {IOC_CREATE_STRIPED} 280");
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

/// The C example (`c/shared_write.c`, on liblanefsapi) writes one shared
/// file from two processes, each through its own mount: with default
/// locking their locks call each other back, with lockahead taken through
/// the mount's ioctl none do, and the file holds every block either way.
#[test]
fn the_c_lockahead_example_writes_a_shared_file_without_callbacks() {
    let Some(m) = mounted(2) else { return };
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let dir = tempfile::tempdir().unwrap();
    let example = dir.path().join("shared_write");
    let built = std::process::Command::new("cc")
        .args(["-O2", "-Wall", "-Werror"])
        .arg(format!("-I{root}/include"))
        .arg(format!("{root}/c/shared_write.c"))
        .arg(format!("{root}/c/liblanefsapi.c"))
        .arg("-o")
        .arg(&example)
        .status();
    assert!(built.is_ok_and(|s| s.success()), "the example and liblanefsapi build");
    let client = Client::connect(&m.cluster.mds_address(), ClientOptions::default()).unwrap();
    let callbacks = || client.ost_stats().unwrap().iter().map(|s| s.locks.callbacks).sum::<u64>();
    let run = |name: &str, lockahead: bool| {
        let before = callbacks();
        let mut command = std::process::Command::new(&example);
        if lockahead {
            command.arg("-l");
        }
        let status = command.args(["-b", "65536", "-r", "16"]).arg(m.at(0, name)).arg(m.at(1, name)).status().unwrap();
        assert!(status.success());
        let during = callbacks() - before; // the check below reads under locks of its own
        let data = fs::read(m.at(0, name)).unwrap();
        assert_eq!(data.len(), 2 * 16 * 65536);
        for (i, block) in data.chunks(65536).enumerate() {
            assert!(block.iter().all(|&b| b == b'a' + (i % 2) as u8), "{name}: block {i}");
        }
        during
    };
    let (default, lockahead) = (run("default", false), run("lockahead", true));
    println!("blocking callbacks while writing: default locking {default}, lockahead {lockahead}");
    assert!(default > 0, "default locking: the two clients' locks call each other back");
    assert_eq!(lockahead, 0, "lockahead: no blocking callbacks");
}

/// `fcntl` on `file` with a `struct flock` of `typ` over `start..start+len`
/// (`len` 0: to the end of the file); returns the struct back (`F_GETLK`).
fn fcntl_lock(file: &fs::File, cmd: i32, typ: i32, start: i64, len: i64) -> std::io::Result<libc::flock> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock is plain data; zeroed is a valid value.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = typ as i16;
    lock.l_whence = libc::SEEK_SET as i16;
    lock.l_start = start;
    lock.l_len = len;
    // SAFETY: the descriptor is open for the call's length and `lock` is a
    // valid struct flock that outlives it.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut lock) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lock)
}

/// A Python process with its output piped, started on `script`'s lines
/// with the given arguments.
fn python(script: &str, args: &[&Path]) -> std::process::Child {
    std::process::Command::new(PYTHON)
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn line_of(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    line.trim().to_string()
}

/// Record locks hold between mounts: a process on one mount holds a
/// range; a process on the other is refused it (`EAGAIN`), is told who
/// holds it (`F_GETLK`), waits for it (`F_SETLKW`), and gets it when the
/// holder is killed with SIGKILL. `flock` holds between mounts the same
/// way (on another file: as on Lustre, `flock` and `fcntl` locks of one
/// file conflict).
#[test]
fn fcntl_and_flock_locks_hold_between_mounts_and_die_with_their_holder() {
    let Some(m) = mounted(2) else { return };
    fs::write(m.at(0, "locked"), b"0123456789").unwrap();
    fs::write(m.at(0, "flocked"), b"").unwrap();
    let holder = r#"
import fcntl, sys, time
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX, 100, 0)
g = open(sys.argv[2], "r")
fcntl.flock(g, fcntl.LOCK_SH)
print("held", flush=True)
time.sleep(600)
"#;
    let mut a = python(holder, &[&m.at(0, "locked"), &m.at(0, "flocked")]);
    assert_eq!(line_of(&mut a), "held");
    let b = OpenOptions::new().read(true).write(true).open(m.at(1, "locked")).unwrap();
    let refused = fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 50, 10).unwrap_err();
    assert!(matches!(refused.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)), "{refused}");
    let seen = fcntl_lock(&b, libc::F_GETLK, libc::F_RDLCK, 0, 0).unwrap();
    assert_eq!((seen.l_type as i32, seen.l_start, seen.l_len), (libc::F_WRLCK, 0, 100));
    assert_eq!(seen.l_pid as u32, a.id(), "F_GETLK names the holder");
    assert_eq!(fcntl_lock(&b, libc::F_GETLK, libc::F_WRLCK, 100, 5).unwrap().l_type as i32, libc::F_UNLCK);
    fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 100, 5).expect("bytes past the holder's are free");

    // flock: shared with a shared lock, refused an exclusive one.
    use std::os::fd::AsRawFd;
    let c = fs::File::open(m.at(1, "flocked")).unwrap();
    // SAFETY: flock on an open descriptor.
    assert_eq!(unsafe { libc::flock(c.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EWOULDBLOCK));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::flock(c.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) }, 0, "readers share");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::flock(c.as_raw_fd(), libc::LOCK_UN) }, 0);

    let waiting = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        fcntl_lock(&b, libc::F_SETLKW, libc::F_WRLCK, 0, 0).expect("granted once the holder is gone");
        started.elapsed()
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!waiting.is_finished(), "F_SETLKW waits while another mount holds the range");
    a.kill().unwrap();
    a.wait().unwrap();
    let waited = waiting.join().unwrap();
    assert!(waited < std::time::Duration::from_secs(10), "granted {waited:?} after it asked");
}

/// Two processes on two mounts, each holding a byte and asking for the
/// other's: the second to ask is told `EDEADLK` instead of both hanging.
/// A wait interrupted by a signal returns `EINTR`.
#[test]
fn a_deadlock_between_mounts_is_edeadlk_and_a_signal_interrupts_a_wait() {
    let Some(m) = mounted(2) else { return };
    fs::write(m.at(0, "dl"), b"ab").unwrap();
    let first = r#"
import fcntl, sys
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX, 1, 0)
print("has 0", flush=True)
sys.stdin.readline()
fcntl.lockf(f, fcntl.LOCK_EX, 1, 1)
print("has 1", flush=True)
sys.stdin.readline()
"#;
    let mut a = python(first, &[&m.at(0, "dl")]);
    assert_eq!(line_of(&mut a), "has 0");
    let b = OpenOptions::new().read(true).write(true).open(m.at(1, "dl")).unwrap();
    fcntl_lock(&b, libc::F_SETLK, libc::F_WRLCK, 1, 1).unwrap();
    a.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let deadlock = fcntl_lock(&b, libc::F_SETLKW, libc::F_WRLCK, 0, 1).unwrap_err();
    assert_eq!(deadlock.raw_os_error(), Some(libc::EDEADLK), "{deadlock}");
    fcntl_lock(&b, libc::F_SETLK, libc::F_UNLCK, 1, 1).unwrap();
    assert_eq!(line_of(&mut a), "has 1", "the other process gets the byte once it is let go");

    // A process waiting for a lock another mount holds (its writer has not
    // closed yet) is interrupted by its alarm.
    let waiter = r#"
import fcntl, signal, sys
def alarm(*_):
    raise TimeoutError()
signal.signal(signal.SIGALRM, alarm)
f = open(sys.argv[1], "r+")
signal.alarm(1)
try:
    fcntl.lockf(f, fcntl.LOCK_EX, 1, 0)
    print("granted")
except TimeoutError:
    print("interrupted")
"#;
    let started = std::time::Instant::now();
    let mut w = python(waiter, &[&m.at(1, "dl")]);
    assert_eq!(line_of(&mut w), "interrupted");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "{:?}", started.elapsed());
    a.stdin.take();
    a.wait().unwrap();
    w.wait().unwrap();
}

/// A lock whose range ends at `u64::MAX` (what a client library program
/// may send for "to the end of the file") is reported by a mount's
/// `F_GETLK` as `l_len` 0, and one that starts past the kernel's largest
/// offset at that offset, never as an `EIO`.
#[test]
fn f_getlk_reports_a_lock_to_u64_max_as_one_to_the_end_of_the_file() {
    use lanefs_proto::flock::{FlockAnswer, FlockKind, FlockOwner, FlockRequest};
    use std::os::unix::fs::MetadataExt;
    let Some(m) = mounted(1) else { return };
    fs::write(m.at(0, "eof"), b"x").unwrap();
    fs::write(m.at(0, "far"), b"x").unwrap();
    let client = Client::connect(&m.cluster.mds_address(), ClientOptions::default()).unwrap();
    let take = |name: &str, start: u64| {
        let file = lanefs_proto::Fid(fs::metadata(m.at(0, name)).unwrap().ino());
        let owner = FlockOwner { client: 0, owner: 1 };
        let request = FlockRequest { file, owner, pid: 1, uid: 0, kind: Some(FlockKind::Write), start, end: u64::MAX };
        assert_eq!(client.flock(request, false, &|| false).unwrap(), FlockAnswer::Granted);
    };
    take("eof", 10);
    take("far", u64::MAX - 5);
    let eof = fs::File::open(m.at(0, "eof")).unwrap();
    let seen = fcntl_lock(&eof, libc::F_GETLK, libc::F_RDLCK, 0, 0).expect("F_GETLK answers");
    assert_eq!((seen.l_type as i32, seen.l_start, seen.l_len), (libc::F_WRLCK, 10, 0));
    let far = fs::File::open(m.at(0, "far")).unwrap();
    let seen = fcntl_lock(&far, libc::F_GETLK, libc::F_RDLCK, 0, 0).expect("F_GETLK answers");
    assert_eq!((seen.l_type as i32, seen.l_start, seen.l_len), (libc::F_WRLCK, i64::MAX, 0));
}

/// Processes of one uid that park as many `F_SETLKW` waiters in a mount
/// as it lets them (the rest are refused `ENOLCK` at once) leave another
/// uid's `F_SETLKW` free to lock at once and to wait.
#[test]
fn one_uids_parked_waiters_do_not_stop_another_uids_f_setlkw() {
    let Some(m) = mounted(1) else { return };
    for name in ["held", "free"] {
        fs::write(m.at(0, name), b"0123456789").unwrap();
        fs::set_permissions(m.at(0, name), fs::Permissions::from_mode(0o666)).unwrap();
    }
    let holder = OpenOptions::new().read(true).write(true).open(m.at(0, "held")).unwrap();
    fcntl_lock(&holder, libc::F_SETLK, libc::F_WRLCK, 0, 0).unwrap();
    // uid 4242 asks for the held file from more threads than a mount
    // parks for everyone together (1024).
    let hog = r#"
import fcntl, os, sys, threading, time
f = open(sys.argv[1], "r+")
os.setgid(4242); os.setuid(4242)
refused = []
def wait():
    try:
        fcntl.lockf(f, fcntl.LOCK_EX, 1, 0)
    except OSError as e:
        refused.append(e.errno)
for _ in range(1100):
    threading.Thread(target=wait, daemon=True).start()
time.sleep(2)
print(len(refused), flush=True)
sys.stdin.readline()
"#;
    // Killed however the test ends: its waiting threads are this mount's.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut hog = KillOnDrop(python(hog, &[&m.at(0, "held")]));
    let refused: usize = line_of(&mut hog.0).parse().unwrap();
    println!("uid 4242: {refused} of 1100 waits refused at once");
    // What the parked waiters cost this process (the mount, the cluster;
    // and any test that runs beside this one: run it alone to measure).
    let cpu_ticks = || {
        let stat = fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<u64> =
            stat.rsplit(')').next().unwrap().split_whitespace().skip(11).take(2).map(|f| f.parse().unwrap()).collect();
        fields[0] + fields[1]
    };
    let (before, started) = (cpu_ticks(), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(3));
    // SAFETY: sysconf has no preconditions.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = (cpu_ticks() - before) as f64 / ticks_per_s / started.elapsed().as_secs_f64();
    println!("with {} waiters parked, the mount's process used {:.1}% of a CPU", 1100 - refused, cpu * 100.0);
    assert!(refused >= 1100 - lanefs_fuse::locks::WAITERS_PER_UID_MAX, "the mount parks at most its share of one uid");
    let free = OpenOptions::new().read(true).write(true).open(m.at(0, "free")).unwrap();
    fcntl_lock(&free, libc::F_SETLKW, libc::F_WRLCK, 0, 0).expect("an uncontended F_SETLKW takes no waiter's place");
    // A root process waits for the holder's byte 5, and gets it once let go.
    let root = r#"
import fcntl, sys
f = open(sys.argv[1], "r+")
fcntl.lockf(f, fcntl.LOCK_EX, 1, 5)
print("granted", flush=True)
"#;
    let mut waiting = python(root, &[&m.at(0, "held")]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(waiting.try_wait().unwrap().is_none(), "root's F_SETLKW waits for the holder");
    fcntl_lock(&holder, libc::F_SETLK, libc::F_UNLCK, 5, 1).unwrap();
    assert_eq!(line_of(&mut waiting), "granted");
    waiting.wait().unwrap();
    drop(hog);
}

/// A file another mount has open stays readable there when this mount
/// removes it or renames another file over it (the MDS keeps its objects
/// until that mount's last close), and the new file is what opens see.
#[test]
fn a_file_removed_or_replaced_from_another_mount_stays_readable_where_it_is_open() {
    let Some(m) = mounted(2) else { return };
    let old = pattern(3 << 20, 1);
    fs::write(m.at(0, "config"), &old).unwrap();
    fs::write(m.at(0, "scratch"), &old).unwrap();
    let mut reader = fs::File::open(m.at(1, "config")).unwrap();
    let mut scratch = fs::File::open(m.at(1, "scratch")).unwrap();
    // An atomic replace, as editors and deploy scripts do it.
    fs::write(m.at(0, "config.new"), b"new").unwrap();
    fs::rename(m.at(0, "config.new"), m.at(0, "config")).unwrap();
    fs::remove_file(m.at(0, "scratch")).unwrap();
    let mut got = Vec::new();
    reader.read_to_end(&mut got).unwrap();
    assert!(got == old, "the replaced file reads whole where it was open");
    let mut got = Vec::new();
    scratch.read_to_end(&mut got).unwrap();
    assert!(got == old, "the removed file reads whole where it was open");
    assert_eq!(fs::read(m.at(1, "config")).unwrap(), b"new", "a new open sees the new file");
    drop((reader, scratch));
    assert_eq!(fs::read(m.at(1, "scratch")).unwrap_err().kind(), ErrorKind::NotFound);
}

/// Symbolic and hard links, made in one mount and followed in the other,
/// and access, modification and change times kept apart.
#[test]
fn links_and_the_three_times_through_two_mounts() {
    let Some(m) = mounted(2) else { return };
    let said = sh(
        &m,
        r#"
mkdir $A/d
printf hello > $A/d/f
ln -s d/f $A/s
ln -s /nowhere $A/dangling
ln $A/d/f $A/h
echo "target $(readlink $B/s)"
echo "through $(cat $B/s)"
echo "links $(stat -c %h $B/d/f) $(stat -c %h $B/h)"
echo "kinds $(stat -c %F $B/s) $(stat -c %F $B/h)"
test ! -e $B/dangling && test -L $B/dangling && echo "dangling ok"
rm $B/d/f
echo "kept $(cat $A/h) $(stat -c %h $A/h)"
touch -a -d 2001-02-03T04:05:06Z $A/h
touch -m -d 2011-02-03T04:05:06Z $A/h
echo "times $(stat -c '%X %Y' $B/h)"
test $(stat -c %Z $B/h) -gt $(stat -c %Y $B/h) && echo "ctime is now"
ln -s h $A/s2 && mv $B/s2 $B/s3 && echo "renamed link $(cat $A/s3)"
ln $A/d $A/dirlink 2>&1 | grep -q 'not allowed\|Operation not permitted' && echo "no directory links"
rm $A/s $A/s3 $A/dangling $A/h
ls -A $B
"#,
    );
    assert!(said.contains("target d/f\n"), "{said}");
    assert!(said.contains("through hello\n"), "{said}");
    assert!(said.contains("links 2 2\n"), "{said}");
    assert!(said.contains("kinds symbolic link regular file\n"), "{said}");
    assert!(said.contains("dangling ok\n"), "{said}");
    assert!(said.contains("kept hello 1\n"), "{said}");
    assert!(said.contains("times 981173106 1296705906\n"), "{said}");
    assert!(said.contains("ctime is now\n"), "{said}");
    assert!(said.contains("renamed link hello\n"), "{said}");
    assert!(said.contains("no directory links\n"), "{said}");
    assert!(said.ends_with("d\n"), "only d is left: {said}");
}
