//! `lanefs mount` and `lanefs umount`: parse, start or stop a mount, print.
//! The file system itself is lanefs-fuse's.

use crate::fs::{load_key, Target};
use crate::out::outln;
use anyhow::{bail, Context, Result};
use clap::Args;
use lanefs_client::{Client, ClientOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Stay attached and serve the mount until it is unmounted (for
    /// debugging and service managers); without it `lanefs mount` returns
    /// once the mount is ready.
    #[arg(long)]
    foreground: bool,
    /// Threads serving the kernel's requests.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// Let programs map files shared (MAP_SHARED; refused with ENODEV by
    /// default). Such a mapping is coherent within this mount alone: use
    /// it only where no other mount maps or writes the files mapped here
    /// (SQLite's WAL mode on two mounts loses rows with it).
    #[arg(long)]
    shared_mmap: bool,
    /// Where to mount: an existing, empty directory.
    mountpoint: PathBuf,
}

#[derive(Args, Debug)]
pub struct UmountArgs {
    /// Detach now even while files are open; the mount goes away when the
    /// last of them is closed (umount -l).
    #[arg(long, short = 'l')]
    lazy: bool,
    mountpoint: PathBuf,
}

/// How long `lanefs mount` waits for its server to mount.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

pub fn mount(args: MountArgs, target: &Target) -> Result<()> {
    let Some(mds) = target.mds.clone() else {
        bail!("no file system given: pass --mds ADDR or set LANEFS_MDS (lanefs up prints the address)");
    };
    let mountpoint = args
        .mountpoint
        .canonicalize()
        .with_context(|| format!("mount point {}: it must be an existing directory", args.mountpoint.display()))?;
    if !mountpoint.is_dir() {
        bail!("mount point {}: not a directory", mountpoint.display());
    }
    if lanefs_fuse::mounts::is_mounted(&mountpoint)? {
        bail!("{} is already a mount point: unmount it first (lanefs umount)", mountpoint.display());
    }
    if !args.foreground {
        return start_in_background(&args, &mountpoint, target);
    }
    // A mount listens for `lanefs lctl`, as a Lustre mount's parameters
    // are there for lctl.
    let control_dir = Some(lanefs_client::control::run_dir());
    let mut options = ClientOptions { key: load_key(target.key.as_deref())?, control_dir, ..Default::default() };
    if let Some(seconds) = target.timeout {
        options = options.with_timeout(Duration::from_secs(seconds));
    }
    // No MDS to be had is an error now, not a wait.
    let client = Client::connect_once(&mds, options).with_context(|| format!("connecting to the MDS at {mds}"))?;
    let config = lanefs_fuse::MountConfig {
        threads: args.threads.into(),
        source: format!("lanefs:{mds}"),
        allow_other: true,
        shared_mmap: args.shared_mmap,
    };
    lanefs_fuse::mount(client, &mountpoint, &config).with_context(|| mount_failed(&mountpoint))
}

fn mount_failed(mountpoint: &Path) -> String {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let hint = if unsafe { libc::geteuid() } != 0 {
        " (mounting needs root, or fusermount3 from the fuse3 package)"
    } else if !Path::new("/dev/fuse").exists() {
        " (/dev/fuse is missing: load the fuse module, modprobe fuse)"
    } else {
        ""
    };
    format!("mounting lanefs at {}{hint}", mountpoint.display())
}

/// Run `lanefs mount --foreground` as a detached server, and return once
/// its mount is there (or say why it is not).
fn start_in_background(args: &MountArgs, mountpoint: &Path, target: &Target) -> Result<()> {
    // The server's log, in a directory private to this user (never a
    // name in a shared directory such as /tmp, where another user could
    // plant a link): warnings and errors, each line with its time.
    let log_dir = lanefs_net::runtime_files::log_dir();
    lanefs_net::runtime_files::private_dir(&log_dir)
        .with_context(|| format!("making the mount's log directory {}", log_dir.display()))?;
    let log = log_dir.join(format!("mount-{}.log", std::process::id()));
    let log_file = lanefs_net::runtime_files::append_private_file(&log).context("opening the mount's log")?;
    let mut command = Command::new(std::env::current_exe().context("finding the lanefs binary")?);
    command.arg("mount").arg("--foreground").arg("--threads").arg(args.threads.to_string());
    if args.shared_mmap {
        command.arg("--shared-mmap");
    }
    command.arg(mountpoint);
    if let Some(mds) = &target.mds {
        command.arg("--mds").arg(mds);
    }
    if let Some(key) = &target.key {
        command.arg("--key").arg(key);
    }
    if let Some(timeout) = target.timeout {
        command.arg("--timeout").arg(timeout.to_string());
    }
    use std::os::unix::process::CommandExt;
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log_file).process_group(0);
    let mut child = command.spawn().context("starting the mount's server")?;
    let started = Instant::now();
    loop {
        if lanefs_fuse::mounts::is_mounted(mountpoint)? {
            outln!("lanefs mounted at {} (server pid {}, log {})", mountpoint.display(), child.id(), log.display())?;
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("the mount's server exited ({status}) before mounting:\n{}", said.trim_end());
        }
        if started.elapsed() > READY_TIMEOUT {
            let _ = child.kill();
            bail!("{} was not mounted within {READY_TIMEOUT:?}; see {}", mountpoint.display(), log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn umount(args: UmountArgs) -> Result<()> {
    let mountpoint = args
        .mountpoint
        .canonicalize()
        .with_context(|| format!("{}: no such mount point", args.mountpoint.display()))?;
    Ok(lanefs_fuse::mounts::unmount(&mountpoint, args.lazy)?)
}
