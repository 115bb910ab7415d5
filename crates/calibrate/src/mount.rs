//! The mount's cost per request: the calibration cluster mounted with
//! FUSE (`lanefs mount --foreground`, a child process), and 4 KiB writes
//! to one cached page timed through the mount and through the client
//! library directly, in alternating rounds; the difference per write is
//! the kernel's round trip to the mount's daemon and the daemon's
//! dispatch, the part of a request the client's own work does not have.
//! The mount's daemon makes the same library call (`Client::pwrite`) the
//! direct writes make.
//!
//! Optional: without root (or FUSE's `fusermount3`) or `/dev/fuse`, or
//! when mounting fails, the step is skipped, saying why.

use crate::child::Child;
use crate::cluster::{Cluster, ENVIRONMENT_CLEARED};
use crate::load::{self, PAGE_BYTES};
use crate::median_f64;
use crate::step::{find_on_path, Step};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long the mount has to come up.
const MOUNT_WAIT: Duration = Duration::from_secs(20);
/// Rounds of writes through the mount and directly, alternating.
const ROUNDS: usize = 5;

#[derive(Clone, Debug)]
pub struct Mount {
    /// The mount's time per request beyond the library's, in microseconds.
    pub request_us: f64,
    /// Below zero, written as zero.
    pub clamped: bool,
    /// Median microseconds per write through the mount and directly.
    pub through_mount_us: f64,
    pub direct_us: f64,
    pub writes: u64,
    /// The largest request the mount asks the kernel for (`max_write`).
    pub request_max_kib: u64,
}

/// Measures the mount's cost per request, or says why it cannot.
pub fn measure(lanefs_exe: &Path, cluster: &Cluster, writes: u64) -> Step<Mount> {
    if let Some(reason) = unavailable() {
        return Step::Skipped(reason);
    }
    match mounted(lanefs_exe, cluster).and_then(|mount| time_writes(&mount, cluster, writes)) {
        Ok(m) => Step::Measured(m),
        Err(reason) => Step::Skipped(reason),
    }
}

/// Why this host cannot mount, if it cannot.
fn unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing (load the fuse module: modprobe fuse)".into());
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root && find_on_path("fusermount3").is_none() {
        return Some("not root, and no fusermount3 on PATH (run as root, or install fuse3)".into());
    }
    None
}

/// The mount, from the start of its daemon on. Dropped: unmounted (if it
/// got as far as mounting), then its daemon stopped and reaped (the
/// fields drop in order).
struct Mounted {
    point: PathBuf,
    /// Listed until unmounted, for an interrupt to unmount (listed after
    /// the daemon, it is undone before the daemon is stopped).
    _listed: crate::cleanup::Listed,
    daemon: Child,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        match lanefs_fuse::mounts::unmount(&self.point, true) {
            Ok(()) | Err(lanefs_fuse::mounts::UnmountError::NotMounted(_)) => {}
            Err(e) => tracing::warn!("unmounting {}: {e}", self.point.display()),
        }
    }
}

fn mounted(lanefs_exe: &Path, cluster: &Cluster) -> Result<Mounted, String> {
    let point = cluster.private_path("mnt");
    std::fs::create_dir(&point).map_err(|e| format!("{}: {e}", point.display()))?;
    let point = point.canonicalize().map_err(|e| format!("{}: {e}", point.display()))?;
    let mut command = Command::new(lanefs_exe);
    command.args(["mount", "--foreground", "--mds", cluster.mds()]).arg(&point);
    for name in ENVIRONMENT_CLEARED {
        command.env_remove(name);
    }
    let what = format!("the mount ({} mount)", lanefs_exe.display());
    let daemon = Child::spawn(command, &what, cluster.private_path("mount.log"))?;
    let _listed = crate::cleanup::list(crate::cleanup::Undo::Unmount(point.clone()));
    let mut mount = Mounted { point, _listed, daemon };
    let deadline = Instant::now() + MOUNT_WAIT;
    loop {
        if lanefs_fuse::mounts::is_mounted(&mount.point).map_err(|e| format!("reading the mount table: {e}"))? {
            return Ok(mount);
        }
        if let Some(status) = mount.daemon.exited() {
            return Err(format!("the mount's daemon exited ({status}) before mounting{}", mount.daemon.said()));
        }
        if Instant::now() > deadline {
            let (point, said) = (mount.point.display(), mount.daemon.said());
            return Err(format!("{point} was not mounted within {MOUNT_WAIT:?}{said}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Rounds of `writes / ROUNDS` writes through the mount, then as many
/// through the library, each round to files of its own, each write to a
/// page of its own that stays cached (see [`load::cached_writes`]); a
/// first round of each is not kept.
fn time_writes(mount: &Mounted, cluster: &Cluster, writes: u64) -> Result<Mount, String> {
    let client = load::connect(cluster, 0)?;
    let per_round = (writes / ROUNDS as u64).max(1);
    let (mut mount_us, mut direct_us) = (Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let through = through_mount(&mount.point, round, per_round)?;
        let direct = direct(&client, round, per_round)?;
        if round > 0 {
            mount_us.push(through.as_secs_f64() * 1e6 / per_round as f64);
            direct_us.push(direct.as_secs_f64() * 1e6 / per_round as f64);
        }
    }
    let (through_mount_us, direct_us) = (median_f64(&mut mount_us), median_f64(&mut direct_us));
    let difference = through_mount_us - direct_us;
    Ok(Mount {
        request_us: difference.max(0.0),
        clamped: difference < 0.0,
        through_mount_us,
        direct_us,
        writes: per_round * ROUNDS as u64,
        request_max_kib: u64::from(lanefs_fuse::fs::REQUEST_BYTES_MAX) / 1024,
    })
}

/// The time of `n` cached 4 KiB writes through the mount at `point`.
fn through_mount(point: &Path, round: usize, n: u64) -> Result<Duration, String> {
    let files = (0..n.div_ceil(load::CACHED_PAGES_PER_FILE))
        .map(|i| {
            let path = point.join(format!("through-mount-{round}-{i}"));
            let file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
            file.map_err(|e| format!("{}: creating a file through the mount: {e}", path.display()))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let page = vec![4u8; PAGE_BYTES as usize];
    let began = Instant::now();
    for i in 0..n {
        let file = &files[(i / load::CACHED_PAGES_PER_FILE) as usize];
        let offset = i % load::CACHED_PAGES_PER_FILE * PAGE_BYTES;
        file.write_at(&page, offset).map_err(|e| format!("{}: a write through the mount: {e}", point.display()))?;
    }
    Ok(began.elapsed())
}

/// The time of `n` cached 4 KiB writes through the library.
fn direct(client: &lanefs_client::Client, round: usize, n: u64) -> Result<Duration, String> {
    let files = load::files_for_cached_writes(client, &format!("direct-{round}"), n)?;
    let began = Instant::now();
    load::cached_writes(client, &files, n)?;
    let elapsed = began.elapsed();
    load::sync_and_close(client, files)?;
    Ok(elapsed)
}
