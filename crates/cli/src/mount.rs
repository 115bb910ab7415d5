//! `lanefs mount` and `lanefs umount`: parse, start or stop a mount, print.
//! The file system itself is lanefs-fuse's.

use crate::fs::{load_key, Target};
use anyhow::{bail, Context, Result};
use clap::Args;
use lanefs_net::client::{Client, ClientOptions};
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
    if is_mounted(&mountpoint)? {
        bail!("{} is already a mount point: unmount it first (lanefs umount)", mountpoint.display());
    }
    if !args.foreground {
        return start_in_background(&args, &mountpoint, target);
    }
    let mut options = ClientOptions { key: load_key(target.key.as_deref())?, ..Default::default() };
    if let Some(seconds) = target.timeout {
        options = options.with_timeout(Duration::from_secs(seconds));
    }
    let client = Client::connect(&mds, options).with_context(|| format!("connecting to the MDS at {mds}"))?;
    let config =
        lanefs_fuse::MountConfig { threads: args.threads.into(), source: format!("lanefs:{mds}"), allow_other: true };
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
    let log = std::env::temp_dir().join(format!("lanefs-mount-{}.log", std::process::id()));
    let log_file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = Command::new(std::env::current_exe().context("finding the lanefs binary")?);
    command.arg("mount").arg("--foreground").arg("--threads").arg(args.threads.to_string()).arg(mountpoint);
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
        if is_mounted(mountpoint)? {
            println!("lanefs mounted at {} (server pid {}, log {})", mountpoint.display(), child.id(), log.display());
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

/// If `path` (a path of this host, which need not exist yet) is under a
/// lanefs mount: the mount's MDS address and the path within lanefs.
pub fn lanefs_path(path: &Path) -> Result<Option<(String, String)>> {
    if !path.is_absolute() {
        return Ok(None);
    }
    // The deepest existing directory decides which mount it is under.
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name() else { return Ok(None) };
        rest.push(name.to_os_string());
        existing.pop();
    }
    let Ok(mut host) = existing.canonicalize() else { return Ok(None) };
    for name in rest.into_iter().rev() {
        host.push(name);
    }
    let mut best: Option<(PathBuf, String)> = None;
    for (point, mds) in lanefs_mounts()? {
        if host.starts_with(&point) && best.as_ref().is_none_or(|(p, _)| point.as_os_str().len() > p.as_os_str().len())
        {
            best = Some((point, mds));
        }
    }
    Ok(best.map(|(point, mds)| {
        let inner = host.strip_prefix(&point).expect("under the mount point");
        (mds, format!("/{}", inner.to_string_lossy()))
    }))
}

/// Every lanefs mount of this host: its mount point and its MDS address,
/// from /proc/self/mountinfo.
fn lanefs_mounts() -> Result<Vec<(PathBuf, String)>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let mut mounts = Vec::new();
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else { continue };
        let (Some(fstype), Some(source), Some(point)) = (fields.get(dash + 1), fields.get(dash + 2), fields.get(4))
        else {
            continue;
        };
        // A mount by root shows the type `fuse`, one by fusermount3 `fuse.lanefs`.
        let fuse = *fstype == "fuse" || *fstype == "fuse.lanefs";
        if let (Some(mds), true) = (unescape(source).strip_prefix("lanefs:").map(str::to_string), fuse) {
            mounts.push((PathBuf::from(unescape(point)), mds));
        }
    }
    Ok(mounts)
}

/// Whether `path` is a mount point, from /proc/self/mountinfo.
pub fn is_mounted(path: &Path) -> Result<bool> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let wanted = path.to_string_lossy();
    // The fifth field is the mount point, with spaces and the like escaped
    // as octal (\040).
    Ok(info.lines().filter_map(|l| l.split(' ').nth(4)).any(|m| unescape(m) == wanted))
}

fn unescape(field: &str) -> String {
    let mut out = String::new();
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let code: String = chars.by_ref().take(3).collect();
            match u8::from_str_radix(&code, 8) {
                Ok(byte) => out.push(byte as char),
                Err(_) => {
                    out.push('\\');
                    out.push_str(&code);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn umount(args: UmountArgs) -> Result<()> {
    let mountpoint = args
        .mountpoint
        .canonicalize()
        .with_context(|| format!("{}: no such mount point", args.mountpoint.display()))?;
    if !is_mounted(&mountpoint)? {
        bail!("{} is not mounted", mountpoint.display());
    }
    if !lanefs_mounts()?.iter().any(|(point, _)| *point == mountpoint) {
        bail!("{} is not a lanefs mount: unmount it with umount", mountpoint.display());
    }
    let target =
        std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes()).context("a mount point with a NUL byte")?;
    let flags = if args.lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: a NUL-terminated path and valid flags; the result is checked.
    if unsafe { libc::umount2(target.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EBUSY) => bail!(
            "{} is busy: files or directories in it are open (see `fuser -m {}`); close them, or unmount with --lazy",
            mountpoint.display(),
            mountpoint.display()
        ),
        Some(libc::EPERM) => {
            // Not root: FUSE's helper unmounts what this user mounted.
            let mut helper = Command::new("fusermount3");
            helper.arg("-u");
            if args.lazy {
                helper.arg("-z");
            }
            let status = helper.arg(&mountpoint).status().context("running fusermount3 -u")?;
            if !status.success() {
                bail!("fusermount3 -u {} failed ({status})", mountpoint.display());
            }
            Ok(())
        }
        _ => Err(error).with_context(|| format!("unmounting {}", mountpoint.display())),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(super::unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(super::unescape("/plain"), "/plain");
    }
}
