//! A file system on a disk that fills: `lanefs ior -w -e` fails naming
//! `ENOSPC` instead of reporting a bandwidth for bytes that are not there,
//! and `lanefs rm` still frees the space. Run on a small tmpfs mounted for
//! the test, which takes root; without root the test says so and passes
//! over.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size_bytes: u64) -> Option<Tmpfs> {
        // SAFETY: geteuid has no preconditions and touches no memory.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: mounting a tmpfs to fill needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_bytes},mode=0700"), "tmpfs"])
            .arg(dir.path())
            .status();
        match status {
            Ok(status) if status.success() => Some(Tmpfs(dir)),
            other => {
                eprintln!("skipped: mount -t tmpfs failed ({other:?}); the test needs CAP_SYS_ADMIN");
                None
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn ior_with_fsync_on_a_full_disk_fails_naming_enospc_and_rm_frees_it() {
    let Some(disk) = Tmpfs::mount(32 << 20) else { return };
    let data = disk.0.path().join("fs");
    let mut up = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["up", "--osts", "1", "--data"])
        .arg(&data)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(up.stdout.take().unwrap()).lines();
    let mds = loop {
        let line = lines.next().expect("lanefs up prints its address").unwrap();
        if let Some(a) = line.strip_prefix("export LANEFS_MDS=") {
            break a.to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let lanefs = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).env("LANEFS_MDS", &mds).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // 64 MiB into a 32 MiB disk.
    let (ok, out, err) =
        lanefs(&["ior", "-a", "LANEFS", "-w", "-e", "-k", "-b", "16m", "-t", "1m", "-N", "4", "-o", "/big"]);
    assert!(!ok, "IOR reported success writing 64 MiB to a 32 MiB disk: {out}");
    assert!(err.contains("ENOSPC"), "the error does not name ENOSPC: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let (ok, _, err) = lanefs(&["rm", "/big"]);
    assert!(ok, "rm on a full disk failed: {err}");
    // The objects go in the background; then the space is back.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (ok, _, err) =
            lanefs(&["ior", "-a", "LANEFS", "-w", "-e", "-b", "4m", "-t", "1m", "-N", "2", "-o", "/small"]);
        if ok {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the space of the removed file never came back: {err}");
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let _ = (up.kill(), up.wait());
}
