//! Commands against a running file system, in the spirit of Lustre's `lfs`
//! setstripe, getstripe, ls, stat, mkdir, rm, chmod, chown, ladvise and df
//! (`lanefs lctl` is in `lctl.rs`). Each runs as the user who runs it (the
//! process's uid, gid and groups go with every namespace call), and new
//! files and directories get the process's umask.

use crate::out::{self, outln};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::layout::Layout;
use lanefs_mds::perm::mode_string;
use lanefs_mds::{Access, Attr, CreateMode, DirEntry, FileKind, MdsReply, MdsRequest, StripeSpec};
use lanefs_net::auth::ClusterKey;
use lanefs_net::client::{process_umask, Client, ClientOptions};
use std::path::{Path, PathBuf};

/// Where the file system is, and the key to it.
#[derive(Args, Clone, Debug)]
pub struct Target {
    /// MDS address (HOST:PORT or unix:/PATH), as `lanefs up` prints it.
    #[arg(long, env = "LANEFS_MDS", global = true)]
    pub mds: Option<String>,
    /// The cluster key file, needed on TCP: a client key for commands, the
    /// server key for `lanefs mds` and `lanefs oss` (`lanefs up --tcp`
    /// prints it; `lanefs key` makes them).
    #[arg(long, env = "LANEFS_KEY", global = true, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Seconds an RPC may go unanswered, or a server be out of reach,
    /// before a command fails (Lustre's obd_timeout; 100 by default).
    #[arg(long, env = "LANEFS_TIMEOUT", global = true, value_name = "SECONDS",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: Option<u64>,
}

/// Load the key file at `path`, if one is given.
pub fn load_key(path: Option<&Path>) -> Result<Option<ClusterKey>> {
    path.map(|p| ClusterKey::load(p).map_err(anyhow::Error::from)).transpose()
}

impl Target {
    pub fn connect(&self) -> Result<Client> {
        let Some(mds) = &self.mds else {
            bail!("no file system given: pass --mds ADDR or set LANEFS_MDS (lanefs up prints the address)");
        };
        // These commands write no file data: no page arena to share.
        let mut options =
            ClientOptions { shared_memory: false, key: load_key(self.key.as_deref())?, ..Default::default() };
        if let Some(seconds) = self.timeout {
            options = options.with_timeout(std::time::Duration::from_secs(seconds));
        }
        Client::connect(mds, options).with_context(|| format!("connecting to the MDS at {mds}"))
    }
}

#[derive(Subcommand, Debug)]
pub enum FsCommand {
    /// Set a directory's default striping, or create an empty file with a layout (`lfs setstripe`).
    Setstripe {
        /// Stripe count: number of OSTs (-1 = all, 0 = inherit).
        #[arg(short = 'c', long = "stripe-count", allow_hyphen_values = true)]
        count: Option<i64>,
        /// Stripe size, a multiple of 64 KiB, with k/m/g suffixes (0 = inherit).
        #[arg(short = 'S', long = "stripe-size", value_parser = parse_size)]
        size: Option<u64>,
        /// Index of the first OST (-1 = any).
        #[arg(short = 'i', long = "stripe-index", allow_hyphen_values = true)]
        index: Option<i64>,
        path: String,
    },
    /// Show files' layouts or directories' defaults (`lfs getstripe`); with
    /// field options, only those fields (one field alone: just its value,
    /// as scripts read it).
    Getstripe {
        /// The stripe count.
        #[arg(short = 'c', long = "stripe-count")]
        count: bool,
        /// The stripe size.
        #[arg(short = 'S', long = "stripe-size")]
        size: bool,
        /// The index of the first OST.
        #[arg(short = 'i', long = "stripe-index")]
        index: bool,
        /// The layout's generation (lanefs never changes a layout: 0).
        #[arg(short = 'g', long = "layout-gen")]
        generation: bool,
        /// Files or directories, all of one file system.
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// List a directory (of any size: the MDS answers in pages).
    Ls {
        /// Long listing: mode, owner, group, size and layout.
        #[arg(short = 'l')]
        long: bool,
        #[arg(default_value = "/")]
        path: String,
    },
    /// Show a file's attributes, with its size from the OSTs.
    Stat { path: String },
    /// Make a directory.
    Mkdir {
        /// Permissions in octal (default 0777, less the umask).
        #[arg(short = 'm', long = "mode", value_parser = parse_mode)]
        mode: Option<u32>,
        path: String,
    },
    /// Remove a file (the MDS destroys its objects) or an empty directory.
    Rm { path: String },
    /// Change permissions (octal, e.g. 0755 or 1777).
    Chmod {
        #[arg(value_parser = parse_mode)]
        mode: u32,
        path: String,
    },
    /// Change owner and group, by number: UID, UID:GID or :GID.
    Chown { owner: String, path: String },
    /// Give lock advice on a file (`lfs ladvise`): lockahead or locknoexpand.
    Ladvise {
        /// `lockahead` or `locknoexpand`.
        #[arg(short = 'a', long = "advice")]
        advice: String,
        /// Lockahead mode: READ or WRITE.
        #[arg(short = 'm', long = "mode", default_value = "WRITE")]
        mode: String,
        /// First byte (k/m/g suffixes).
        #[arg(short = 's', long = "start", value_parser = parse_size, default_value = "0")]
        start: u64,
        /// Last byte, inclusive (k/m/g suffixes).
        #[arg(short = 'e', long = "end", value_parser = parse_size, default_value = "0")]
        end: u64,
        /// Clear locknoexpand instead of setting it.
        #[arg(short = 'u', long = "unset")]
        unset: bool,
        file: String,
    },
    /// Space (or inodes) per OST and in all, as `lfs df` prints it.
    #[command(disable_help_flag = true)]
    Df {
        /// Print help (`-h` is --human-readable, as in lfs df).
        #[arg(long = "help", action = clap::ArgAction::Help)]
        help: Option<bool>,
        /// Sizes in K, M, G, T (base 2) rather than 1K-blocks.
        #[arg(short = 'h', long = "human-readable")]
        human: bool,
        /// Inodes (objects) rather than space.
        #[arg(short = 'i', long = "inodes")]
        inodes: bool,
        /// A path under a lanefs mount, for that mount's file system (and
        /// its mount point in the last column).
        path: Option<String>,
    },
}

/// Octal permissions: `755`, `0644`, `1777`.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(mode) if mode <= lanefs_mds::PERMISSION_BITS => Ok(mode),
        _ => Err(format!("{s:?} is not a mode: give octal permissions from 0 to 7777, e.g. 0755")),
    }
}

/// `UID`, `UID:GID` or `:GID`, numeric.
fn parse_owner(s: &str) -> Result<(Option<u32>, Option<u32>)> {
    let number = |part: &str| -> Result<Option<u32>> {
        if part.is_empty() {
            return Ok(None);
        }
        part.parse().map(Some).with_context(|| format!("{part:?} is not a numeric user or group id"))
    };
    let (uid, gid) = match s.split_once(':') {
        Some((uid, gid)) => (number(uid)?, number(gid)?),
        None => (number(s)?, None),
    };
    if uid.is_none() && gid.is_none() {
        bail!("{s:?}: give UID, UID:GID or :GID");
    }
    Ok((uid, gid))
}

/// `4m`, `64k`, `1g`, `1048576`: IOR's sizes, as every command reads them.
pub fn parse_size(s: &str) -> Result<u64, String> {
    lanefs_ior::parse_size(s)
}

pub fn run(mut command: FsCommand, target: &Target) -> Result<()> {
    let mut target = target.clone();
    // df names the mount point the path is under (before it becomes the
    // path within lanefs).
    let mount_point = match &command {
        FsCommand::Df { path: Some(path), .. } => mount_point_of(path)?,
        _ => None,
    };
    let mut mount_mds: Option<String> = None;
    for path in command.paths_mut() {
        let Some((mds, inner)) = lanefs_fuse::mounts::lanefs_path(Path::new(path.as_str()))? else {
            if mount_mds.is_some() {
                bail!("{path} is not under the lanefs mount the other paths are under: give one file system's paths");
            }
            continue;
        };
        // A path under a lanefs mount: that mount's file system, and the
        // path within it.
        if mount_mds.as_ref().is_some_and(|other| *other != mds) {
            bail!("{path} is under another lanefs mount than the paths before it: give one file system's paths");
        }
        mount_mds = Some(mds.clone());
        target.mds = Some(mds);
        *path = inner;
    }
    if let FsCommand::Ladvise { file, .. } = &command {
        if lanefs_fuse::mounts::lanefs_path(Path::new(file.as_str()))?.is_some() {
            bail!(
                "{file} is under a lanefs mount: advice taken here would go to this command's client, not to \
                 the mount's, which writes the file; give lanefs's own path (as lanefs ls shows it) to advise \
                 this command's client, or use lanefs ior -a LANEFS --lanefs.lock-mode=lockahead"
            );
        }
    }
    let cl = target.connect()?;
    match command {
        FsCommand::Setstripe { count, size, index, path } => setstripe(&cl, count, size, index, &path),
        FsCommand::Getstripe { count, size, index, generation, paths } => {
            let fields = StripeFields { count, size, index, generation };
            paths.iter().try_for_each(|path| getstripe(&cl, path, fields))
        }
        FsCommand::Ls { long, path } => ls(&cl, long, &path),
        FsCommand::Stat { path } => stat(&cl, &path),
        FsCommand::Mkdir { mode, path } => {
            let permissions = mode.unwrap_or(0o777 & !process_umask());
            cl.mds(MdsRequest::Mkdir { path, permissions }).map(|_| ()).map_err(Into::into)
        }
        FsCommand::Rm { path } => rm(&cl, &path),
        FsCommand::Chmod { mode, path } => {
            cl.mds(MdsRequest::SetAttr { path, permissions: Some(mode), uid: None, gid: None })?;
            Ok(())
        }
        FsCommand::Chown { owner, path } => {
            let (uid, gid) = parse_owner(&owner)?;
            cl.mds(MdsRequest::SetAttr { path, permissions: None, uid, gid })?;
            Ok(())
        }
        FsCommand::Ladvise { advice, mode, start, end, unset, file } => {
            ladvise(&cl, &advice, &mode, start, end, unset, &file)
        }
        FsCommand::Df { human, inodes, .. } => {
            let mounted_on = mount_point.unwrap_or_else(|| "lanefs".to_string());
            out::stdout_write(&format_df(&cl.ost_stats()?, &mounted_on, human, inodes))?;
            Ok(())
        }
    }
}

impl FsCommand {
    /// The paths a namespace command acts on.
    fn paths_mut(&mut self) -> Vec<&mut String> {
        match self {
            FsCommand::Getstripe { paths, .. } => paths.iter_mut().collect(),
            FsCommand::Setstripe { path, .. }
            | FsCommand::Ls { path, .. }
            | FsCommand::Stat { path }
            | FsCommand::Mkdir { path, .. }
            | FsCommand::Rm { path }
            | FsCommand::Chmod { path, .. }
            | FsCommand::Chown { path, .. } => vec![path],
            FsCommand::Df { path, .. } => path.iter_mut().collect(),
            FsCommand::Ladvise { .. } => Vec::new(),
        }
    }
}

fn setstripe(cl: &Client, count: Option<i64>, size: Option<u64>, index: Option<i64>, path: &str) -> Result<()> {
    let stripe = StripeSpec { count, size, start_ost: index };
    match cl.mds(MdsRequest::Stat { path: path.into() }) {
        Ok(MdsReply::Attr(a)) if a.kind == FileKind::Dir => {
            cl.mds(MdsRequest::SetStripe { path: path.into(), stripe })?;
        }
        Ok(_) => bail!("{path} exists and is a file: a file's layout is set when it is created"),
        Err(_) => {
            // As lfs setstripe: create an empty file with that layout.
            let permissions = 0o666 & !process_umask();
            let mode = CreateMode::Exclusive;
            cl.mds(MdsRequest::Create { path: path.into(), stripe, mode, access: Access::Write, permissions })?;
        }
    }
    Ok(())
}

/// Which fields `lanefs getstripe` shows (none: all, with the objects).
#[derive(Clone, Copy, Debug, Default)]
struct StripeFields {
    count: bool,
    size: bool,
    index: bool,
    generation: bool,
}

fn getstripe(cl: &Client, path: &str, fields: StripeFields) -> Result<()> {
    match cl.mds(MdsRequest::GetStripe { path: path.into() })? {
        MdsReply::Stripe(info) => {
            let shown = match &info.layout {
                Some(layout) => {
                    let values = [
                        layout.stripe_count().to_string(),
                        layout.stripe_size().to_string(),
                        layout.stripe_offset().0.to_string(),
                    ];
                    let objects: Vec<(u32, u64)> = layout.objects().iter().map(|k| (k.ost.0, k.object.0)).collect();
                    format_stripe(path, false, &values, &objects, fields)
                }
                None => {
                    let d = &info.default;
                    let values = [d.count.to_string(), d.size.to_string(), d.start_ost.to_string()];
                    format_stripe(path, true, &values, &[], fields)
                }
            };
            out::stdout_write(&shown)?;
        }
        other => bail!("unexpected MDS answer {other:?}"),
    }
    Ok(())
}

/// `lfs getstripe`'s text for one path, as liblustreapi prints it
/// (`lov_dump_user_lmm_header`, `lov_dump_user_lmm_v1v3`). `values` are the
/// stripe count, size and first OST. A file's fields are `lmm_` lines, a
/// directory's default one line; a field asked for alone is printed bare,
/// without the path (`lfs getstripe -c f` prints `4`); all fields (no field
/// option) add a file's objects as "\t%6u\t%14llu\t%#13llx\t%14llu" and
/// an empty line.
fn format_stripe(path: &str, dir: bool, values: &[String; 3], objects: &[(u32, u64)], f: StripeFields) -> String {
    let all = !(f.count || f.size || f.index || f.generation);
    let asked = [f.count, f.size, f.index, f.generation].iter().filter(|&&on| on).count();
    let labelled = all || asked > 1;
    let prefix = if dir { "" } else { "lmm_" };
    let mut fields: Vec<(&str, String, bool)> = vec![
        ("stripe_count:  ", values[0].clone(), all || f.count),
        ("stripe_size:   ", values[1].clone(), all || f.size),
        ("pattern:       ", "raid0".to_string(), all),
        ("layout_gen:    ", "0".to_string(), !dir && (all || f.generation)),
        ("stripe_offset: ", values[2].clone(), all || f.index),
    ];
    fields.retain(|field| field.2);
    let mut out = String::new();
    if labelled {
        out += &format!("{path}\n");
    }
    let separator = if dir { " " } else { "\n" };
    let shown: Vec<String> = fields
        .iter()
        .map(|(label, value, _)| if labelled { format!("{prefix}{label}{value}") } else { value.clone() })
        .collect();
    if !shown.is_empty() {
        out += &shown.join(separator);
        out += "\n";
    }
    if all && !dir {
        out += "\tobdidx\t\t objid\t\t objid\t\t group\n";
        for (ost, object) in objects {
            out += &format!("\t{ost:6}\t{object:14}\t{object:#13x}\t{:14}\n", 0);
        }
        out += "\n";
    }
    out
}

/// Lists `path` page by page as the MDS sends them, so a directory of any
/// size is listed in bounded memory. `-l`: mode, owner, group (numeric),
/// size from the OSTs and layout (count x size).
fn ls(cl: &Client, long: bool, path: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for page in cl.readdir_pages(path) {
        for entry in page? {
            if long {
                writeln!(out, "{}", long_line(cl, path, &entry)?)?;
            } else {
                writeln!(out, "{}", entry.name)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

fn long_line(cl: &Client, dir: &str, entry: &DirEntry) -> Result<String> {
    let DirEntry { name, kind, uid, gid, permissions, .. } = entry;
    let full = if dir.ends_with('/') { format!("{dir}{name}") } else { format!("{dir}/{name}") };
    let (size, layout) = match kind {
        FileKind::Dir => ("-".to_string(), "-".to_string()),
        FileKind::Symlink => {
            let target = attr(cl, &full)?.target.unwrap_or_default();
            return Ok(format!(
                "{} {uid:>6} {gid:>6} {:>14} {:>8} {name} -> {target}",
                mode_string(*kind, *permissions),
                target.len(),
                "-"
            ));
        }
        FileKind::File => {
            let (size, layout) = file_size(cl, &full)?;
            (size.to_string(), format!("{}x{}", layout.stripe_count(), human(layout.stripe_size())))
        }
    };
    Ok(format!("{} {uid:>6} {gid:>6} {size:>14} {layout:>8} {name}", mode_string(*kind, *permissions)))
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

fn attr(cl: &Client, path: &str) -> Result<Attr> {
    match cl.mds(MdsRequest::Stat { path: path.into() })? {
        MdsReply::Attr(attr) => Ok(attr),
        other => bail!("unexpected MDS answer {other:?}"),
    }
}

/// A file's size (a glimpse of its objects) and layout. As `stat(2)`, it
/// needs no permission on the file itself: the layout comes with its
/// attributes.
fn file_size(cl: &Client, path: &str) -> Result<(u64, Layout)> {
    let Some(layout) = attr(cl, path)?.layout else { bail!("{path} is a directory") };
    let f = cl.open_layout(path, layout.clone())?;
    let size = cl.size(&f)?;
    cl.close(f)?;
    Ok((size, layout))
}

fn stat(cl: &Client, path: &str) -> Result<()> {
    let attr = attr(cl, path)?;
    outln!("  File: {path}")?;
    match attr.kind {
        FileKind::Dir => outln!("  Type: directory")?,
        FileKind::Symlink => {
            let target = attr.target.as_deref().unwrap_or_default();
            outln!("  Size: {}\tType: symbolic link -> {target}", target.len())?;
        }
        FileKind::File => {
            let (size, layout) = file_size(cl, path)?;
            outln!("  Size: {size}\tType: regular file")?;
            outln!(
                "Layout: {} stripes of {} bytes from OST{:04x}",
                layout.stripe_count(),
                layout.stripe_size(),
                layout.stripe_offset().0
            )?;
        }
    }
    outln!(
        "Access: ({:04o}/{})  Uid: ({:>5})  Gid: ({:>5})",
        attr.permissions,
        mode_string(attr.kind, attr.permissions),
        attr.uid,
        attr.gid
    )?;
    outln!("  Links: {}", attr.nlink)?;
    outln!("   Fid: {}", attr.fid.0)?;
    Ok(())
}

/// Removes a file or an empty directory; the MDS destroys a file's objects
/// on the OSTs (also later, if an OSS is down now).
fn rm(cl: &Client, path: &str) -> Result<()> {
    match attr(cl, path)?.kind {
        FileKind::Dir => cl.mds(MdsRequest::Rmdir { path: path.into() })?,
        FileKind::File | FileKind::Symlink => cl.mds(MdsRequest::Unlink { path: path.into() })?,
    };
    Ok(())
}

fn ladvise(cl: &Client, advice: &str, mode: &str, start: u64, end: u64, unset: bool, file: &str) -> Result<()> {
    let (advice, access) = match advice {
        "lockahead" => {
            let (mode, access) = match mode.to_ascii_uppercase().as_str() {
                "READ" => (AheadMode::Read, Access::Read),
                "WRITE" => (AheadMode::Write, Access::Write),
                other => bail!("lockahead mode {other:?}: use READ or WRITE"),
            };
            (Advice::lockahead(mode, start, end, true), access)
        }
        "locknoexpand" => (Advice::lock_no_expand(!unset), Access::Read),
        other => bail!("advice {other:?} is not supported: use lockahead or locknoexpand"),
    };
    let MdsReply::File(info) = cl.mds(MdsRequest::Open { path: file.into(), access })? else {
        bail!("unexpected MDS answer")
    };
    let f = cl.open_layout(file, info.layout)?;
    let results = cl.ladvise(&f, &[advice])?;
    for r in results {
        outln!("{file}: lockahead [{start}, {end}] {} ({})", r.name(), r.code())?;
    }
    cl.fsync(&f)?;
    Ok(())
}

/// The lanefs mount point `path` is under, if any.
fn mount_point_of(path: &str) -> Result<Option<String>> {
    let Ok(host) = Path::new(path).canonicalize() else { return Ok(None) };
    let mounts = lanefs_fuse::mounts::lanefs_mounts()?;
    let deepest =
        mounts.into_iter().filter(|(point, _)| host.starts_with(point)).max_by_key(|(p, _)| p.as_os_str().len());
    Ok(deepest.map(|(point, _)| point.to_string_lossy().into_owned()))
}

/// `lfs df` (`showdf` and `mntdf` in `lustre/utils/lfs.c`): a header, a
/// line per OST as `%-20s %11llu %11llu %11llu %3d%% %s[OST:%d]`, an empty
/// line, `filesystem_summary:` and an empty line; `-h` gives sizes as
/// `%8.1f%c` (K, M, G, ... from bytes), `-i` objects instead of space.
/// lanefs's MDS reports no space of its own, so there is no MDT line, and
/// OSTs that share one backing file system count once in the summary.
fn format_df(stats: &[lanefs_net::proto::OstStats], mounted_on: &str, human: bool, inodes: bool) -> String {
    let figures = |space: &lanefs_net::proto::OstSpace| -> (u64, u64, u64) {
        if inodes {
            (space.total_inodes, space.total_inodes.saturating_sub(space.free_inodes), space.free_inodes)
        } else {
            let shift = if human { 0 } else { 10 };
            let used = space.total_bytes.saturating_sub(space.free_bytes);
            (space.total_bytes >> shift, used >> shift, space.free_bytes >> shift)
        }
    };
    let cell = |value: u64| -> String {
        if !human || inodes {
            return format!("{value:11}");
        }
        let (mut cooked, mut radix) = (value as f64, 0);
        while cooked > 1024.0 {
            cooked /= 1024.0;
            radix += 1;
        }
        if radix == 0 {
            format!("{value:11}")
        } else {
            format!("{cooked:10.1}{}", "KMGTPEZY".as_bytes()[radix - 1] as char)
        }
    };
    let line = |uuid: &str, (total, used, avail): (u64, u64, u64), place: &str| -> String {
        let ratio = if used + avail > 0 { used as f64 / (used + avail) as f64 } else { 0.0 };
        let percent = format!("{}%", (ratio * 100.0 + 0.5) as i64);
        format!("{uuid:<20} {} {} {} {percent:>4} {place}\n", cell(total), cell(used), cell(avail))
    };
    let header = if inodes {
        ["Inodes", "IUsed", "IFree", "IUse%"]
    } else {
        [if human { "bytes" } else { "1K-blocks" }, "Used", "Available", "Use%"]
    };
    let mut out =
        format!("{:<20} {:>11} {:>11} {:>11} {:>4} Mounted on\n", "UUID", header[0], header[1], header[2], header[3]);
    let (mut sum, mut seen) = ((0u64, 0u64, 0u64), std::collections::BTreeSet::new());
    for s in stats {
        let uuid = format!("lanefs-OST{:04x}_UUID", s.ost);
        match &s.space {
            Some(space) => {
                let f = figures(space);
                out += &line(&uuid, f, &format!("{mounted_on}[OST:{}]", s.ost));
                if seen.insert(space.fsid) {
                    sum = (sum.0 + f.0, sum.1 + f.1, sum.2 + f.2);
                }
            }
            None => out += &format!("{uuid:<20}: inactive device\n"),
        }
    }
    out += "\n";
    out += &line("filesystem_summary:", sum, mounted_on);
    out += "\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn df_prints_as_lfs_df() {
        use lanefs_net::proto::{OstSpace, OstStats};
        let ost = |ost: u32, fsid: u64| OstStats {
            ost,
            locks_granted: 0,
            locks_waiting: 0,
            locks: Default::default(),
            data: Default::default(),
            space: Some(OstSpace {
                fsid,
                total_bytes: 4 << 30,
                free_bytes: 3 << 30,
                total_inodes: 1000,
                free_inodes: 900,
            }),
            bulk_shared_bytes: 0,
            sync_lock_cancel: Default::default(),
        };
        let stats = [ost(0, 7), ost(1, 7)];
        assert_eq!(
            format_df(&stats, "/mnt/lanefs", false, false),
            "UUID                   1K-blocks        Used   Available Use% Mounted on\n\
             lanefs-OST0000_UUID      4194304     1048576     3145728  25% /mnt/lanefs[OST:0]\n\
             lanefs-OST0001_UUID      4194304     1048576     3145728  25% /mnt/lanefs[OST:1]\n\n\
             filesystem_summary:      4194304     1048576     3145728  25% /mnt/lanefs\n\n"
        );
        let human = format_df(&stats[..1], "/m", true, false);
        // lfs divides while the value is above 1024: 1 GiB shows as 1024.0M.
        assert!(human.contains("lanefs-OST0000_UUID         4.0G     1024.0M        3.0G  25% /m[OST:0]"), "{human}");
        let inodes = format_df(&stats[..1], "/m", false, true);
        assert!(
            inodes.starts_with("UUID                      Inodes       IUsed       IFree IUse% Mounted on\n"),
            "{inodes}"
        );
        assert!(inodes.contains("        1000         100         900  10% /m[OST:0]"), "{inodes}");
    }

    #[test]
    fn getstripe_prints_as_lfs_getstripe() {
        let values = ["2".to_string(), "1048576".to_string(), "3".to_string()];
        let all = StripeFields::default();
        assert_eq!(
            format_stripe("/f", false, &values, &[(3, 7), (0, 7)], all),
            "/f\nlmm_stripe_count:  2\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\nlmm_layout_gen:    0\n\
             lmm_stripe_offset: 3\n\tobdidx\t\t objid\t\t objid\t\t group\n\
             \t     3\t             7\t          0x7\t             0\n\t     0\t             7\t          0x7\t             0\n\n"
        );
        let count = StripeFields { count: true, ..all };
        assert_eq!(format_stripe("/f", false, &values, &[], count), "2\n");
        let two = StripeFields { count: true, size: true, ..all };
        assert_eq!(
            format_stripe("/f", false, &values, &[], two),
            "/f\nlmm_stripe_count:  2\nlmm_stripe_size:   1048576\n"
        );
        let dir = ["4".to_string(), "2097152".to_string(), "-1".to_string()];
        assert_eq!(
            format_stripe("/d", true, &dir, &[], all),
            "/d\nstripe_count:  4 stripe_size:   2097152 pattern:       raid0 stripe_offset: -1\n"
        );
        assert_eq!(format_stripe("/d", true, &dir, &[], StripeFields { size: true, ..all }), "2097152\n");
        assert_eq!(format_stripe("/d", true, &dir, &[], StripeFields { generation: true, ..all }), "");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4m").unwrap(), 4 << 20);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert!(parse_size("12x").unwrap_err().contains("unit"));
    }

    #[test]
    fn modes_and_owners() {
        assert_eq!(parse_mode("755").unwrap(), 0o755);
        assert_eq!(parse_mode("1777").unwrap(), 0o1777);
        assert!(parse_mode("8").unwrap_err().contains("octal"));
        assert!(parse_mode("17777").is_err());
        assert_eq!(parse_owner("12").unwrap(), (Some(12), None));
        assert_eq!(parse_owner("12:34").unwrap(), (Some(12), Some(34)));
        assert_eq!(parse_owner(":34").unwrap(), (None, Some(34)));
        assert!(parse_owner(":").is_err() && parse_owner("alice").is_err());
    }
}
