//! Commands against a running file system, in the spirit of Lustre's `lfs`
//! and `lctl`: setstripe, getstripe, ls, stat, mkdir, rm, ladvise and lock
//! statistics.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::layout::Layout;
use lanefs_mds::{CreateMode, FileKind, MdsReply, MdsRequest, StripeSpec};
use lanefs_net::auth::Credentials;
use lanefs_net::client::{Client, ClientOptions};
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
}

/// Load the key file at `path`, if one is given.
pub fn load_key(path: Option<&Path>) -> Result<Option<Credentials>> {
    path.map(|p| Credentials::load(p).map_err(anyhow::Error::from)).transpose()
}

impl Target {
    pub fn connect(&self) -> Result<Client> {
        let Some(mds) = &self.mds else {
            bail!("no file system given: pass --mds ADDR or set LANEFS_MDS (lanefs up prints the address)");
        };
        // These commands write no file data: no page arena to share.
        let options = ClientOptions { shared_memory: false, key: load_key(self.key.as_deref())?, ..Default::default() };
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
    /// Show a file's layout or a directory's default (`lfs getstripe`).
    Getstripe {
        path: String,
    },
    /// List a directory.
    Ls {
        /// Long listing: kind, size and layout.
        #[arg(short = 'l')]
        long: bool,
        #[arg(default_value = "/")]
        path: String,
    },
    /// Show a file's attributes, with its size from the OSTs.
    Stat {
        path: String,
    },
    Mkdir {
        path: String,
    },
    /// Remove a file (and destroy its objects) or an empty directory.
    Rm {
        path: String,
    },
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
    /// Lock statistics per OST namespace (`lctl get_param ldlm.namespaces.*`).
    Lctl {
        /// `get_param`.
        verb: String,
        /// Parameter pattern, e.g. `ldlm.namespaces.*.lock_count` (default: all).
        #[arg(default_value = "ldlm.namespaces.*")]
        pattern: String,
    },
}

/// `4m`, `64k`, `1g`, `1048576`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        Some('t') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size; use a number with an optional k, m, g or t suffix"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

pub fn run(command: FsCommand, target: &Target) -> Result<()> {
    let cl = target.connect()?;
    match command {
        FsCommand::Setstripe { count, size, index, path } => setstripe(&cl, count, size, index, &path),
        FsCommand::Getstripe { path } => getstripe(&cl, &path),
        FsCommand::Ls { long, path } => ls(&cl, long, &path),
        FsCommand::Stat { path } => stat(&cl, &path),
        FsCommand::Mkdir { path } => cl.mds(MdsRequest::Mkdir { path }).map(|_| ()).map_err(Into::into),
        FsCommand::Rm { path } => rm(&cl, &path),
        FsCommand::Ladvise { advice, mode, start, end, unset, file } => {
            ladvise(&cl, &advice, &mode, start, end, unset, &file)
        }
        FsCommand::Lctl { verb, pattern } => lctl(&cl, &verb, &pattern),
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
            cl.mds(MdsRequest::Create { path: path.into(), stripe, mode: CreateMode::Exclusive })?;
        }
    }
    Ok(())
}

fn print_layout(path: &str, layout: &Layout) {
    println!("{path}");
    println!("lmm_stripe_count:  {}", layout.stripe_count());
    println!("lmm_stripe_size:   {}", layout.stripe_size());
    println!("lmm_pattern:       raid0");
    println!("lmm_stripe_offset: {}", layout.stripe_offset().0);
    println!("\tobdidx\t\t objid\t\t objid\t\t group");
    for key in layout.objects() {
        println!("\t{:6}\t{:14}\t{:#14x}\t{:14}", key.ost.0, key.object.0, key.object.0, 0);
    }
}

fn getstripe(cl: &Client, path: &str) -> Result<()> {
    match cl.mds(MdsRequest::GetStripe { path: path.into() })? {
        MdsReply::Stripe(info) => match info.layout {
            Some(layout) => print_layout(path, &layout),
            None => {
                println!("{path}");
                println!(
                    "stripe_count:  {} stripe_size:   {} pattern:       raid0 stripe_offset: {}",
                    info.default.count, info.default.size, info.default.start_ost
                );
            }
        },
        other => bail!("unexpected MDS answer {other:?}"),
    }
    Ok(())
}

fn ls(cl: &Client, long: bool, path: &str) -> Result<()> {
    let MdsReply::Entries(entries) = cl.mds(MdsRequest::Readdir { path: path.into() })? else {
        bail!("unexpected MDS answer");
    };
    for e in entries {
        if !long {
            println!("{}", e.name);
            continue;
        }
        let full = if path.ends_with('/') { format!("{path}{}", e.name) } else { format!("{path}/{}", e.name) };
        match e.kind {
            FileKind::Dir => println!("d {:>14} {:>8} {}", "-", "-", e.name),
            FileKind::File => {
                let (size, layout) = file_size(cl, &full)?;
                println!(
                    "f {size:>14} {:>8} {}",
                    format!("{}x{}", layout.stripe_count(), human(layout.stripe_size())),
                    e.name
                );
            }
        }
    }
    Ok(())
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

fn file_size(cl: &Client, path: &str) -> Result<(u64, Layout)> {
    let MdsReply::File(info) = cl.mds(MdsRequest::Open { path: path.into() })? else { bail!("unexpected MDS answer") };
    let f = cl.open_layout(path, info.layout.clone())?;
    let size = cl.size(&f)?;
    cl.close(f)?;
    Ok((size, info.layout))
}

fn stat(cl: &Client, path: &str) -> Result<()> {
    let MdsReply::Attr(attr) = cl.mds(MdsRequest::Stat { path: path.into() })? else { bail!("unexpected MDS answer") };
    println!("  File: {path}");
    match attr.kind {
        FileKind::Dir => println!("  Type: directory"),
        FileKind::File => {
            let (size, layout) = file_size(cl, path)?;
            println!("  Size: {size}\tType: regular file");
            println!(
                "Layout: {} stripes of {} bytes from OST{:04x}",
                layout.stripe_count(),
                layout.stripe_size(),
                layout.stripe_offset().0
            );
        }
    }
    println!("   Fid: {}", attr.fid.0);
    Ok(())
}

fn rm(cl: &Client, path: &str) -> Result<()> {
    match cl.mds(MdsRequest::Stat { path: path.into() })? {
        MdsReply::Attr(a) if a.kind == FileKind::Dir => {
            cl.mds(MdsRequest::Rmdir { path: path.into() })?;
        }
        _ => {
            if let MdsReply::Unlinked(layout) = cl.mds(MdsRequest::Unlink { path: path.into() })? {
                cl.destroy_objects(&layout)?;
            }
        }
    }
    Ok(())
}

fn ladvise(cl: &Client, advice: &str, mode: &str, start: u64, end: u64, unset: bool, file: &str) -> Result<()> {
    let MdsReply::File(info) = cl.mds(MdsRequest::Open { path: file.into() })? else { bail!("unexpected MDS answer") };
    let f = cl.open_layout(file, info.layout)?;
    let advice = match advice {
        "lockahead" => {
            let mode = match mode.to_ascii_uppercase().as_str() {
                "READ" => AheadMode::Read,
                "WRITE" => AheadMode::Write,
                other => bail!("lockahead mode {other:?}: use READ or WRITE"),
            };
            Advice::lockahead(mode, start, end, true)
        }
        "locknoexpand" => Advice::lock_no_expand(!unset),
        other => bail!("advice {other:?} is not supported: use lockahead or locknoexpand"),
    };
    let results = cl.ladvise(&f, &[advice])?;
    for r in results {
        println!("{file}: lockahead [{start}, {end}] {} ({})", r.name(), r.code());
    }
    cl.fsync(&f)?;
    Ok(())
}

fn lctl(cl: &Client, verb: &str, pattern: &str) -> Result<()> {
    if verb != "get_param" {
        bail!("lctl {verb}: only get_param is supported");
    }
    let stats = cl.ost_stats()?;
    let mut printed = 0;
    for s in stats {
        let ns = format!("ldlm.namespaces.filter-lanefs-OST{:04x}_UUID", s.ost);
        let values = [
            ("lock_count", s.locks_granted + s.locks_waiting),
            ("lock_granted_count", s.locks_granted),
            ("lock_waiting_count", s.locks_waiting),
            ("stats.ldlm_enqueue", s.locks.enqueues),
            ("stats.ldlm_grant", s.locks.grants),
            ("stats.ldlm_refused", s.locks.refusals),
            ("stats.ldlm_bl_callback", s.locks.callbacks),
            ("stats.ldlm_cancel", s.locks.cancels),
            ("stats.ldlm_evict", s.locks.evictions),
            ("stats.ldlm_conflict", s.locks.conflicts),
            ("stats.ost_write", s.data.write_rpcs),
            ("stats.ost_read", s.data.read_rpcs),
            ("stats.ost_write_bytes", s.data.bytes_written),
            ("stats.ost_write_bytes_shm", s.bulk_shared_bytes),
            ("stats.ldlm_cancel_sync", s.data.cancel_syncs),
        ];
        for (name, value) in values {
            let full = format!("{ns}.{name}");
            if glob(pattern, &full) || glob(pattern, &ns) {
                println!("{full}={value}");
                printed += 1;
            }
        }
    }
    if printed == 0 {
        bail!("no parameter matches {pattern:?}; try ldlm.namespaces.*.lock_count");
    }
    Ok(())
}

/// Shell-style `*` matching, as lctl's parameter patterns.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, rest)) => {
            let Some(tail) = text.strip_prefix(head) else { return false };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob(rest, &tail[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_globs() {
        assert_eq!(parse_size("4m").unwrap(), 4 << 20);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert!(parse_size("12x").unwrap_err().contains("suffix"));
        assert!(glob("ldlm.namespaces.*", "ldlm.namespaces.filter-lanefs-OST0000_UUID"));
        assert!(glob("ldlm.namespaces.*.lock_count", "ldlm.namespaces.x.lock_count"));
        assert!(!glob("ldlm.namespaces.*.lock_count", "ldlm.namespaces.x.stats.ldlm_cancel"));
    }
}
