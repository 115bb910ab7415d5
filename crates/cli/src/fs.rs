//! Commands against a running file system, in the spirit of Lustre's `lfs`:
//! setstripe, getstripe, find (see [`crate::find`]), ls, stat, mkdir, rm,
//! chmod, chown, ladvise, df, osts, mdts and OST pools (see [`crate::pool`];
//! `lanefs lctl` is in `lctl.rs`). Each runs as the user who runs it (the
//! process's uid, gid and groups go with every namespace call), and new
//! files and directories get the process's umask.

use crate::out::{self, outln};
use crate::pool::PoolCommand;
use crate::setstripe_args::StripeArgs;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use lanefs_client::{process_umask, Client, ClientOptions};
use lanefs_core::client::ladvise::{Advice, AheadMode, CacheAdvice, LU_LADVISE_LOCKAHEAD};
use lanefs_core::layout::Layout;
use lanefs_net::auth::ClusterKey;
use lanefs_proto::mode_string;
use lanefs_proto::{
    Access, Attr, ComponentSpec, CreateMode, DirEntry, FileKind, MdsReply, MdsRequest, PoolName, StripeDefault,
    StripeSpec,
};
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
        Client::connect(mds, self.options()?).with_context(|| format!("connecting to the MDS at {mds}"))
    }

    /// A client of the MDS at `mds` that does not wait for an MDS that
    /// refuses connections (for tools that watch: a cluster that is down
    /// is an error now).
    pub fn connect_once(&self, mds: &str) -> Result<Client> {
        Client::connect_once(mds, self.options()?).with_context(|| format!("connecting to the MDS at {mds}"))
    }

    fn options(&self) -> Result<ClientOptions> {
        // These commands write no file data: no page arena to share.
        let mut options =
            ClientOptions { shared_memory: false, key: load_key(self.key.as_deref())?, ..Default::default() };
        if let Some(seconds) = self.timeout {
            options = options.with_timeout(std::time::Duration::from_secs(seconds));
        }
        Ok(options)
    }
}

#[derive(Subcommand, Debug)]
pub enum FsCommand {
    /// Set a directory's default striping, or create an empty file with a layout (`lfs setstripe`).
    Setstripe {
        #[command(flatten)]
        stripe: StripeArgs,
        /// Remove the directory's own default striping, so that it inherits
        /// again (`lfs setstripe -d`).
        #[arg(
            short = 'd',
            long = "delete",
            conflicts_with_all = ["count", "size", "index", "pool", "overstripe_count", "ost", "component_end"]
        )]
        delete: bool,
        /// lfs's layout options lanefs does not have, refused by name.
        #[command(flatten)]
        lacked: LackedStripe,
        path: String,
    },
    /// Restripe files in place, while they stay open (`lfs migrate`): with
    /// no striping options a file keeps its own (count, size, pool) on OSTs
    /// chosen afresh; with some, it gets them as a new file in its
    /// directory would. Others' I/O to the file waits during the copy.
    Migrate {
        #[command(flatten)]
        stripe: StripeArgs,
        /// Block others' I/O to the file during the copy (a group lock):
        /// the only mode lanefs has, as Lustre's default.
        #[arg(short = 'b', long = "block")]
        block: bool,
        /// Print each file's name once it is migrated.
        #[arg(short = 'v', long = "verbose")]
        verbose: bool,
        /// lfs migrate's options lanefs does not have, refused by name.
        #[command(flatten)]
        lacked: LackedMigrate,
        /// lfs setstripe's layout options lanefs does not have.
        #[command(flatten)]
        lacked_layout: LackedStripe,
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// Show files' layouts or directories' defaults (`lfs getstripe`); a
    /// directory's entries too (`-r`: all below it). With field options,
    /// only those fields (one field alone: just its value, as scripts read
    /// it) and no path.
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
        /// The layout's generation (lanefs keeps none: 0, also after a migrate).
        #[arg(short = 'g', long = "layout-gen")]
        generation: bool,
        /// The OST pool (printed when the layout has one).
        #[arg(short = 'p', long = "pool")]
        pool: bool,
        /// A directory itself, not its entries.
        #[arg(short = 'd', long = "directory")]
        directory: bool,
        /// Every file and directory below a directory.
        #[arg(short = 'r', long = "recursive")]
        recursive: bool,
        /// Only the objects of files (no fields, no directories).
        #[arg(short = 'q', long = "quiet")]
        quiet: bool,
        /// YAML, as `lfs getstripe -y` (no paths).
        #[arg(short = 'y', long = "yaml")]
        yaml: bool,
        /// Files or directories, all of one file system.
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Find files and directories below paths (`lfs find`): those that pass
    /// every test given, one path per line.
    #[command(after_help = crate::find::EXPRESSION_HELP)]
    Find {
        /// PATH... [EXPRESSION]: where to start, then the tests (see below).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "PATH|TEST")]
        expression: Vec<String>,
    },
    /// The OSTs and whether each answers (`lfs osts`).
    Osts {
        /// A path under a lanefs mount, for that mount's file system.
        path: Option<String>,
    },
    /// The MDT (`lfs mdts`).
    Mdts {
        /// A path under a lanefs mount, for that mount's file system.
        path: Option<String>,
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
    /// Give advice on `[start, end)` of files (`lfs ladvise`): `willread`
    /// has the OSSes read those bytes into their cache, `dontneed` drop
    /// them from it, `lockahead` takes a lock on them. On a path under a
    /// lanefs mount the advice goes to the mount's client, as Lustre's goes
    /// to the node's.
    Ladvise {
        /// `willread`, `dontneed` or `lockahead` (`locknoexpand` is a per-
        /// file-descriptor advice that does nothing from a command, as lfs
        /// says).
        #[arg(short = 'a', long = "advice")]
        advice: String,
        /// Send the advice and return at once (LF_ASYNC); without it the
        /// command waits for the lock, or for every OST's answer.
        #[arg(short = 'b', long = "background")]
        background: bool,
        /// Lockahead mode: READ or WRITE (required with lockahead, and only
        /// valid with it, as in lfs).
        #[arg(short = 'm', long = "mode")]
        mode: Option<String>,
        /// First byte (k/m/g suffixes).
        #[arg(short = 's', long = "start", value_parser = parse_size, default_value = "0")]
        start: u64,
        /// End of the range, exclusive (k/m/g suffixes); default: end of file.
        #[arg(short = 'e', long = "end", value_parser = parse_size)]
        end: Option<u64>,
        /// Length of the range (instead of -e).
        #[arg(short = 'l', long = "length", value_parser = parse_size)]
        length: Option<u64>,
        /// Clear the advice (lfs's flag for locknoexpand).
        #[arg(short = 'u', long = "unset")]
        unset: bool,
        /// One or more files.
        #[arg(required = true)]
        files: Vec<String>,
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
    /// OST pools: `pool_new`, `pool_add`, `pool_remove`, `pool_destroy`, `pool_list`.
    #[command(flatten)]
    Pool(crate::pool::PoolCommand),
}

/// Octal permissions: `755`, `0644`, `1777`.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    match u32::from_str_radix(s, 8) {
        Ok(mode) if mode <= lanefs_proto::PERMISSION_BITS => Ok(mode),
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
    // find and getstripe print paths as they were given (under a mount,
    // the mount's), as lfs does.
    let (mut find_paths, find_tests) = match &command {
        FsCommand::Find { expression } => crate::find::parse(expression).map_err(|e| anyhow::anyhow!("find: {e}"))?,
        _ => (Vec::new(), Default::default()),
    };
    let given: Vec<String> = match &command {
        FsCommand::Find { .. } => find_paths.clone(),
        FsCommand::Getstripe { paths, .. } | FsCommand::Migrate { files: paths, .. } => paths.clone(),
        _ => Vec::new(),
    };
    if let FsCommand::Ladvise { advice, background, mode, start, end, length, unset, files } = command {
        let advice = parse_advice(&advice, background, mode.as_deref(), start, end, length, unset)?;
        return ladvise(target, &advice, &files);
    }
    let mut target = target.clone();
    // df names the mount point the path is under (before it becomes the
    // path within lanefs).
    let mount_point = match &command {
        FsCommand::Df { path: Some(path), .. } => mount_point_of(path)?,
        _ => None,
    };
    let mut mount_mds: Option<String> = None;
    let mut paths = command.paths_mut();
    paths.extend(find_paths.iter_mut());
    for path in paths {
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
    let cl = target.connect()?;
    match command {
        FsCommand::Setstripe { lacked, .. } if lacked.given().is_some() => {
            let (option, reason) = lacked.given().expect("checked");
            bail!("setstripe {option}: {reason}")
        }
        FsCommand::Setstripe { delete: true, path, .. } => delete_stripe(&cl, &path),
        FsCommand::Setstripe { stripe, path, .. } => setstripe(&cl, stripe.spec("setstripe")?, &path),
        FsCommand::Migrate { lacked, .. } if lacked.given().is_some() => {
            let (option, reason) = lacked.given().expect("checked");
            bail!("migrate {option}: {reason}")
        }
        FsCommand::Migrate { lacked_layout, .. } if lacked_layout.given().is_some() => {
            let (option, reason) = lacked_layout.given().expect("checked");
            bail!("migrate {option}: {reason}")
        }
        FsCommand::Migrate { stripe, verbose, files, .. } => {
            let spec = stripe.spec("migrate")?;
            let spec = (spec != StripeSpec::default()).then_some(spec);
            migrate(&cl, spec, &files, &given, verbose)
        }
        FsCommand::Getstripe { count, size, index, generation, pool, directory, recursive, quiet, yaml, paths } => {
            let fields = StripeFields { count, size, index, generation, pool, quiet, yaml };
            // lfs's fp_max_depth: fields or -d show the path itself, -r all below it.
            let max_depth = match (recursive, directory || fields.any()) {
                (true, _) => Depth::All,
                (false, true) => Depth::Itself,
                (false, false) => Depth::Entries,
            };
            paths.iter().zip(&given).try_for_each(|(inner, shown)| getstripe(&cl, inner, shown, fields, max_depth))
        }
        FsCommand::Find { .. } => find_paths
            .iter()
            .zip(&given)
            .try_for_each(|(inner, shown)| crate::find::find(&cl, inner, shown, &find_tests)),
        FsCommand::Osts { .. } => {
            out::stdout_write(&format_osts(&cl.ost_stats()?))?;
            Ok(())
        }
        FsCommand::Mdts { .. } => {
            outln!("MDTS:\n0: lanefs-MDT0000_UUID ACTIVE")?;
            Ok(())
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
        FsCommand::Ladvise { .. } => unreachable!("advice is given before connecting"),
        FsCommand::Df { human, inodes, .. } => {
            let mounted_on = mount_point.unwrap_or_else(|| "lanefs".to_string());
            let MdsReply::Statfs(statfs) = cl.mds(MdsRequest::Statfs)? else { bail!("unexpected MDS answer") };
            out::stdout_write(&format_df(&statfs, &cl.ost_stats()?, &mounted_on, human, inodes))?;
            Ok(())
        }
        FsCommand::Pool(command) => crate::pool::run(&cl, command),
    }
}

impl FsCommand {
    /// The paths a namespace command acts on.
    fn paths_mut(&mut self) -> Vec<&mut String> {
        match self {
            FsCommand::Getstripe { paths, .. } | FsCommand::Migrate { files: paths, .. } => paths.iter_mut().collect(),
            FsCommand::Setstripe { path, .. }
            | FsCommand::Ls { path, .. }
            | FsCommand::Stat { path }
            | FsCommand::Mkdir { path, .. }
            | FsCommand::Rm { path }
            | FsCommand::Chmod { path, .. }
            | FsCommand::Chown { path, .. } => vec![path],
            FsCommand::Df { path, .. } | FsCommand::Osts { path } | FsCommand::Mdts { path } => {
                path.iter_mut().collect()
            }
            // find's paths are in its expression, read before.
            FsCommand::Find { .. } => Vec::new(),
            // pool_list PATH: the file system a path under a mount is of.
            FsCommand::Pool(PoolCommand::List { pool: Some(path) }) if path.starts_with('/') => vec![path],
            FsCommand::Ladvise { .. } | FsCommand::Pool(_) => Vec::new(),
        }
    }
}

/// `lfs setstripe`'s options for layouts lanefs does not have (yet): taken
/// so that each is refused by name, with the reason and what to use,
/// rather than misread.
#[derive(Args, Clone, Debug, Default)]
pub struct LackedStripe {
    #[arg(short = 'L', long = "layout", hide = true)]
    layout: Option<String>,
    #[arg(short = 'N', long = "mirror-count", hide = true, num_args = 0..=1)]
    mirror_count: Option<Option<String>>,
    #[arg(short = 'z', long = "extension-size", hide = true)]
    extension_size: Option<String>,
    #[arg(long = "copy", hide = true)]
    copy: Option<String>,
    #[arg(long = "foreign", hide = true, num_args = 0..=1)]
    foreign: Option<Option<String>>,
}

impl LackedStripe {
    /// The first option given, and why lanefs refuses it.
    fn given(&self) -> Option<(&'static str, String)> {
        let one_layout = "lanefs has plain (RAID0) layouts and composite ones of them (-E); give -c or -C, -S, -i, -o \
                          and -p";
        [
            (self.layout.is_some(), "-L", "data on the MDT and other layouts are not in lanefs: "),
            (self.mirror_count.is_some(), "-N", "mirrored files (FLR) are not in lanefs: "),
            (self.extension_size.is_some(), "-z", "self-extending layouts (SEL) are not in lanefs: "),
            (self.copy.is_some(), "--copy", "copying a layout is not in lanefs yet: "),
            (self.foreign.is_some(), "--foreign", "foreign layouts are not in lanefs: "),
        ]
        .into_iter()
        .find(|(given, _, _)| *given)
        .map(|(_, option, why)| (option, format!("{why}{one_layout}")))
    }
}

/// lfs migrate's options lanefs does not have (hidden: refused by name).
#[derive(Args, Debug)]
pub struct LackedMigrate {
    #[arg(short = 'n', long = "non-block", hide = true)]
    non_block: bool,
    #[arg(short = 'W', long = "bandwidth", hide = true)]
    bandwidth: Option<String>,
    #[arg(long = "stats", hide = true)]
    stats: bool,
    #[arg(long = "stats-interval", hide = true)]
    stats_interval: Option<String>,
    #[arg(short = 'A', long = "auto-stripe", visible_alias = "auto", hide = true)]
    auto_stripe: bool,
    #[arg(long = "restripe", hide = true)]
    restripe: bool,
    #[arg(short = 'm', long = "mdt-index", hide = true)]
    mdt_index: Option<String>,
}

impl LackedMigrate {
    /// The first option given, and why lanefs refuses it.
    fn given(&self) -> Option<(&'static str, String)> {
        [
            (
                self.non_block,
                "-n",
                "lanefs migrates in blocking mode only (-b, Lustre's default): others' I/O to the file waits \
                 during the copy; drop -n",
            ),
            (self.bandwidth.is_some(), "-W", "lanefs does not limit a migration's bandwidth: drop -W"),
            (self.stats || self.stats_interval.is_some(), "--stats", "lanefs prints no copy statistics: use -v"),
            (
                self.auto_stripe,
                "-A",
                "lanefs does not choose a stripe count from the file's size: give -c (or none, to keep the file's)",
            ),
            (self.restripe, "--restripe", "give the new striping (-c, -S, ...) instead: it need not repeat"),
            (
                self.mdt_index.is_some(),
                "-m",
                "lanefs has one MDT: directories are not migrated between MDTs; migrate files",
            ),
        ]
        .into_iter()
        .find(|(given, _, _)| *given)
        .map(|(_, option, why)| (option, why.to_string()))
    }
}

/// `lfs migrate FILE...`: each file restriped in turn; a failure is said
/// and the next file tried, and the command fails at the end, as lfs
/// does. `shown` are the paths as given (under a mount, the mount's).
fn migrate(cl: &Client, stripe: Option<StripeSpec>, files: &[String], shown: &[String], verbose: bool) -> Result<()> {
    let mut failed = 0;
    for (file, shown) in files.iter().zip(shown) {
        match lanefs_client::migrate::migrate(cl, file, stripe.clone()) {
            Ok(_) if verbose => outln!("{shown}")?,
            Ok(_) => {}
            Err(error) => {
                failed += 1;
                // A mount has no way to migrate for its users.
                let hint = match error.to_string().contains("not a node's") {
                    true => " (lanefs migrate runs as root or as the servers' own user)",
                    false => "",
                };
                eprintln!("lanefs migrate: {shown}: {error}{hint}");
            }
        }
    }
    match failed {
        0 => Ok(()),
        n => bail!("{n} of {} files were not migrated", files.len()),
    }
}

/// `lfs setstripe -d DIR`: the directory's own default goes, and it
/// inherits from the directories above again.
fn delete_stripe(cl: &Client, path: &str) -> Result<()> {
    match cl.mds(MdsRequest::Stat { path: path.into() })? {
        MdsReply::Attr(a) if a.kind == FileKind::Dir => {
            cl.mds(MdsRequest::DeleteStripe { path: path.into() })?;
            Ok(())
        }
        _ => bail!("{path} is not a directory: -d removes a directory's default striping"),
    }
}

fn setstripe(cl: &Client, stripe: StripeSpec, path: &str) -> Result<()> {
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

/// Which fields `lanefs getstripe` shows (none: all, with the objects), and how.
#[derive(Clone, Copy, Debug, Default)]
struct StripeFields {
    count: bool,
    size: bool,
    index: bool,
    generation: bool,
    pool: bool,
    /// `-q`: the objects only (lfs's `VERBOSE_OBJID`).
    quiet: bool,
    yaml: bool,
}

impl StripeFields {
    /// Whether a field option was given.
    fn any(&self) -> bool {
        self.count || self.size || self.index || self.generation || self.pool
    }
}

/// How far `getstripe` goes below a directory (lfs's `fp_max_depth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Depth {
    /// The path itself (0).
    Itself,
    /// A directory's entries too (1).
    Entries,
    /// Everything below it (-1).
    All,
}

/// One path, then, by `depth`, what lies below it; each entry is printed as
/// soon as the MDS answers, so a directory of any size takes bounded memory.
/// `lfs getstripe` of `path` (within lanefs), printed as `shown` (the
/// path as given: under a mount, the mount's) joined with what lies below.
fn getstripe(cl: &Client, path: &str, shown: &str, fields: StripeFields, depth: Depth) -> Result<()> {
    let dir = show_stripe(cl, path, shown, fields, depth)?;
    if dir && depth != Depth::Itself {
        getstripe_below(cl, path, shown, fields, depth)?;
    }
    Ok(())
}

fn getstripe_below(cl: &Client, dir: &str, shown: &str, fields: StripeFields, depth: Depth) -> Result<()> {
    let join =
        |dir: &str, name: &str| if dir.ends_with('/') { format!("{dir}{name}") } else { format!("{dir}/{name}") };
    for page in cl.readdir_pages(dir) {
        for entry in page? {
            // Only files and directories have layouts.
            if !matches!(entry.kind, FileKind::File | FileKind::Dir) {
                continue;
            }
            let (full, shown_full) = (join(dir, &entry.name), join(shown, &entry.name));
            let is_dir = show_stripe(cl, &full, &shown_full, fields, depth)?;
            if is_dir && depth == Depth::All {
                getstripe_below(cl, &full, &shown_full, fields, depth)?;
            }
        }
    }
    Ok(())
}

/// Print `path`'s layout or default, naming it `shown`; whether it is a
/// directory.
fn show_stripe(cl: &Client, path: &str, shown: &str, fields: StripeFields, depth: Depth) -> Result<bool> {
    let MdsReply::Stripe(info) = cl.mds(MdsRequest::GetStripe { path: path.into() })? else {
        bail!("unexpected MDS answer for {path}")
    };
    let dir = info.layout.is_none();
    // lfs prints the path when it may descend, never in YAML, and not for
    // a directory whose objects alone were asked for.
    let shown_path = (!fields.yaml && depth != Depth::Itself && !(fields.quiet && dir)).then_some(shown);
    let text = match &info.layout {
        Some(layout) if layout.is_composite() && !fields.any() && !fields.quiet && !fields.yaml => {
            format_composite(shown_path, layout, &info.component_pools)
        }
        Some(layout) => {
            let values = [
                layout.stripe_count().to_string(),
                layout.stripe_size().to_string(),
                layout.stripe_offset().0.to_string(),
            ];
            let objects: Vec<(u32, u64)> = layout.objects().iter().map(|k| (k.ost.0, k.object.0)).collect();
            let pool = info.pool.as_ref().map(|p| p.as_str());
            let pattern = pattern(layout.is_overstriped());
            format_stripe(shown_path, false, &values, pattern, pool, &objects, fields)
        }
        None if info.default_components.is_some() && !fields.any() && !fields.quiet && !fields.yaml => {
            let parts = info.default_components.as_deref().expect("checked");
            format_composite_default(shown_path, parts, &info.default)
        }
        None => {
            let d = &info.default;
            let values = [d.count.to_string(), d.size.to_string(), d.start_ost.to_string()];
            let pool = d.pool.as_ref().map(|p| p.as_str());
            format_stripe(shown_path, true, &values, pattern(d.overstripe), pool, &[], fields)
        }
    };
    out::stdout_write(&text)?;
    Ok(dir)
}

/// `lfs getstripe`'s text for a composite (PFL) file, as liblustreapi
/// prints one (`lov_dump_comp_v1_header`, `lov_dump_comp_v1_entry`, and
/// each component's `lov_dump_user_lmm_v1v3` indented, its objects as
/// `- N: { l_ost_idx: I, l_fid: [IDIF FID] }`). lanefs makes every
/// component's objects when it creates the file, so each is `init`, and
/// it keeps no layout generation: 0, also after a migrate.
pub(crate) fn format_composite(path: Option<&str>, layout: &Layout, pools: &[Option<PoolName>]) -> String {
    let mut out = String::new();
    if let Some(path) = path {
        out += &format!("{path}\n");
    }
    let components = layout.components();
    out += &format!("  lcm_layout_gen:    0\n  lcm_mirror_count:  1\n  lcm_entry_count:   {}\n", components.len());
    for (index, component) in components.iter().enumerate() {
        let end = if component.is_last() { "EOF".to_string() } else { component.end.to_string() };
        out += &format!(
            "    lcme_id:             {}\n    lcme_mirror_id:      0\n    lcme_flags:          init\n\
             \x20   lcme_extent.e_start: {}\n    lcme_extent.e_end:   {end}\n",
            index + 1,
            component.start
        );
        let objects = layout.component_objects(index);
        out += &format!(
            "      lmm_stripe_count:  {}\n      lmm_stripe_size:   {}\n      lmm_pattern:       {}\n\
             \x20     lmm_layout_gen:    0\n      lmm_stripe_offset: {}\n",
            component.count,
            component.stripe_size,
            pattern(layout.component_is_overstriped(index)),
            objects[0].ost.0
        );
        if let Some(pool) = pools.get(index).copied().flatten() {
            out += &format!("      lmm_pool:          {}\n", pool.as_str());
        }
        out += "      lmm_objects:\n";
        for (i, key) in objects.iter().enumerate() {
            let (ost, object) = (key.ost.0, key.object.0);
            let seq = 0x1_0000_0000u64 | (u64::from(ost) << 16) | ((object >> 32) & 0xffff);
            out += &format!(
                "      - {i:3}: {{ l_ost_idx: {ost:3}, l_fid: [{seq:#x}:{:#x}:0x0] }}\n",
                object & 0xffff_ffff
            );
        }
        out += "\n";
    }
    out
}

/// `lfs getstripe`'s text for a directory's composite default, as
/// liblustreapi prints a template (`lov_dump_comp_v1` with `LDF_IS_DIR`):
/// no component ids (`N/A`), flags 0, and each component's striping on one
/// indented line, unset values shown as they resolve (a stripe size or
/// pool unset is the previous component's, the rest `default`'s).
pub(crate) fn format_composite_default(path: Option<&str>, parts: &[ComponentSpec], default: &StripeDefault) -> String {
    let mut out = String::new();
    if let Some(path) = path {
        out += &format!("{path}\n");
    }
    out += &format!("  lcm_layout_gen:    0\n  lcm_mirror_count:  1\n  lcm_entry_count:   {}\n", parts.len());
    let (mut start, mut size, mut pool) = (0u64, default.size, default.pool);
    for part in parts {
        let s = &part.stripe;
        let (count, overstripe) = match s.count {
            Some(count) => (count, s.overstripe),
            None => (default.count, default.overstripe),
        };
        size = s.size.unwrap_or(size);
        pool = s.pool.or(pool);
        let end = if part.end == u64::MAX { "EOF".to_string() } else { part.end.to_string() };
        out += &format!(
            "    lcme_id:             N/A\n    lcme_mirror_id:      N/A\n    lcme_flags:          0\n\
             \x20   lcme_extent.e_start: {start}\n    lcme_extent.e_end:   {end}\n"
        );
        out += &format!(
            "      stripe_count:  {count}       stripe_size:   {size}       pattern:       {}       stripe_offset: {}",
            pattern(overstripe),
            s.start_ost.unwrap_or(default.start_ost)
        );
        if let Some(pool) = pool {
            out += &format!("       pool:          {}", pool.as_str());
        }
        out += "\n\n";
        start = part.end;
    }
    out
}

/// A layout's pattern, as `llapi_lov_pattern_string` names it. lanefs
/// calls a file overstriped when two of its stripes share an OST (Lustre
/// keeps the flag `-C` set even where they do not).
fn pattern(overstriped: bool) -> &'static str {
    if overstriped {
        "raid0,overstriped"
    } else {
        "raid0"
    }
}

/// `lfs getstripe`'s text for one path, as liblustreapi prints it
/// (`lov_dump_user_lmm_header`, `lov_dump_user_lmm_v1v3` in
/// `lustre/utils/liblustreapi.c`). `values` are the stripe count, size and
/// first OST; `path` is printed first when given. A file's fields are
/// `lmm_` lines, a directory's default one line (one field per line in
/// YAML); a field is labelled unless it alone was asked for (`lfs
/// getstripe -c f` prints `4`); all fields (no field option) or `-q` add a
/// file's objects, as "\t%6u\t%14llu\t%#13llx\t%14llu" rows or YAML's
/// `lmm_objects` (with each object's IDIF FID); text ends with an empty line.
fn format_stripe(
    path: Option<&str>,
    dir: bool,
    values: &[String; 3],
    pattern: &str,
    pool: Option<&str>,
    objects: &[(u32, u64)],
    f: StripeFields,
) -> String {
    let all = !f.any() && !f.quiet;
    let prefix = if dir { "" } else { "lmm_" };
    let mut fields: Vec<(&str, String, bool)> = vec![
        ("stripe_count:  ", values[0].clone(), all || f.count),
        ("stripe_size:   ", values[1].clone(), all || f.size),
        ("pattern:       ", pattern.to_string(), all),
        ("layout_gen:    ", "0".to_string(), !dir && (all || f.generation)),
        ("stripe_offset: ", values[2].clone(), all || f.index),
        (
            "pool:          ",
            pool.unwrap_or_default().to_string(),
            (all || f.pool) && pool.is_some_and(|p| !p.is_empty()),
        ),
    ];
    // A label goes with every field unless one field alone was asked for.
    let asked = [f.count, f.size, f.index, f.generation, f.pool].iter().filter(|&&on| on).count();
    let labelled = all || asked > 1;
    fields.retain(|field| field.2);
    let mut out = String::new();
    if let Some(path) = path {
        out += &format!("{path}\n");
    }
    let separator = if dir && !f.yaml { " " } else { "\n" };
    let shown: Vec<String> = fields
        .iter()
        .map(|(label, value, _)| if labelled { format!("{prefix}{label}{value}") } else { value.clone() })
        .collect();
    if !shown.is_empty() {
        out += &shown.join(separator);
        out += "\n";
    }
    if (all || f.quiet) && !dir {
        if f.yaml {
            out += "lmm_objects:\n";
            for (ost, object) in objects {
                // An OST object's IDIF FID (ostid_to_fid), printed DFID_NOBRACE.
                let seq = 0x1_0000_0000u64 | (u64::from(*ost) << 16) | ((object >> 32) & 0xffff);
                out +=
                    &format!("      - l_ost_idx: {ost}\n        l_fid:     {seq:#x}:{:#x}:0x0\n", object & 0xffff_ffff);
            }
        } else {
            out += "\tobdidx\t\t objid\t\t objid\t\t group\n";
            for (ost, object) in objects {
                out += &format!("\t{ost:6}\t{object:14}\t{object:#13x}\t{:14}\n", 0);
            }
        }
    }
    if !f.yaml {
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
        FileKind::CharDevice | FileKind::BlockDevice => {
            let rdev = attr(cl, &full)?.rdev;
            (format!("{}, {}", libc::major(rdev), libc::minor(rdev)), "-".to_string())
        }
        FileKind::Fifo | FileKind::Socket => ("0".to_string(), "-".to_string()),
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
    let attr = attr(cl, path)?;
    let Some(layout) = attr.layout else { bail!("{path} is a directory") };
    let f = cl.open_file(path, lanefs_proto::FileInfo { fid: attr.fid, layout: layout.clone() })?;
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
        kind if kind.is_device() => {
            let (major, minor) = (libc::major(attr.rdev), libc::minor(attr.rdev));
            outln!("  Size: 0\tType: {}\tDevice type: {major},{minor}", kind.name())?;
        }
        kind => outln!("  Size: 0\tType: {}", kind.name())?,
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
        _ => cl.mds(MdsRequest::Unlink { path: path.into() })?,
    };
    Ok(())
}

/// `lfs ladvise`'s options as it checks them (`lfs_ladvise` in
/// `lustre/utils/lfs.c`): the range is `[start, end)`, `-l` gives its
/// length, and the end defaults to the end of the file; the advice's range
/// (a lock extent for lockahead) ends one byte before `end`. As lfs, `-u`
/// with willread or dontneed changes nothing (lfs passes it in the call's
/// flags, which those advices do not look at).
fn parse_advice(
    advice: &str,
    background: bool,
    mode: Option<&str>,
    start: u64,
    end: Option<u64>,
    length: Option<u64>,
    unset: bool,
) -> Result<Advice> {
    let cache = match advice {
        "lockahead" => None,
        "willread" => Some(CacheAdvice::WillRead),
        "dontneed" => Some(CacheAdvice::DontNeed),
        "locknoexpand" => bail!(
            "locknoexpand is a per file descriptor advice, so when called from lanefs ladvise, it does nothing \
             (as lfs says); a program sets it on its own descriptor (LANEFS_IOC_LADVISE, liblanefsapi)"
        ),
        other => bail!(
            "invalid advice type {other:?}; valid types: willread, dontneed, lockahead \
             (and locknoexpand, which does nothing from a command)"
        ),
    };
    let mode = match mode.map(str::to_ascii_uppercase).as_deref() {
        Some("READ") => Some(AheadMode::Read),
        Some("WRITE") => Some(AheadMode::Write),
        Some(other) => bail!("bad mode {other:?}, valid modes are READ or WRITE"),
        None => None,
    };
    let end = match (end, length) {
        (Some(end), Some(length)) if start.checked_add(length) != Some(end) => {
            bail!("conflicting arguments of -l and -e: give one")
        }
        (Some(end), _) => end,
        (None, Some(length)) => start.checked_add(length).context("-s plus -l passes the end of any file")?,
        (None, None) => u64::MAX,
    };
    if end <= start {
        bail!("range [{start}, {end}] is invalid: -e (exclusive) must be past -s");
    }
    match (cache, mode) {
        (Some(_), Some(_)) => bail!("mode is only valid with lockahead"),
        (Some(cache), None) => Ok(Advice::cache(cache, start, end - 1, background)),
        (None, None) => bail!("mode is required with lockahead: add -m READ or -m WRITE"),
        (None, Some(_)) if unset => bail!("-u/--unset clears locknoexpand; it does not apply to lockahead"),
        (None, Some(mode)) => Ok(Advice::lockahead(mode, start, end - 1, background)),
    }
}

/// lfs's name of an advice, for its messages.
fn advice_name(advice: &Advice) -> &'static str {
    match advice.validate() {
        Ok(lanefs_core::client::ladvise::Validated::Cache { advice, .. }) => advice.name(),
        _ if advice.advice == LU_LADVISE_LOCKAHEAD => "lockahead",
        _ => "locknoexpand",
    }
}

/// Give `advice` on each of `files`: through the mount's client for a path
/// under a lanefs mount, else through this command's own client (whose
/// locks go when the command ends). Like lfs, it prints nothing on
/// success, names each file it could not advise, and fails if any failed.
fn ladvise(target: &Target, advice: &Advice, files: &[String]) -> Result<()> {
    let mut own: Option<Client> = None;
    let mut failed = 0;
    for file in files {
        let given = match lanefs_fuse::mounts::lanefs_path(Path::new(file.as_str()))? {
            Some(_) => std::fs::File::open(file)
                .and_then(|open| lanefs_fuse::ladvise_through_mount(&open, advice))
                .map(|_| ())
                .map_err(anyhow::Error::from),
            None => {
                if own.is_none() {
                    own = Some(target.connect()?);
                }
                ladvise_own(own.as_ref().expect("connected"), advice, file)
            }
        };
        if let Err(e) = given {
            eprintln!("lanefs ladvise: cannot give advice '{}' to file '{file}': {e:#}", advice_name(advice));
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {} files were not advised", files.len());
    }
    Ok(())
}

fn ladvise_own(cl: &Client, advice: &Advice, file: &str) -> Result<()> {
    // Only a write lockahead needs the file open for writing (Lustre's
    // lfs opens every file read-only, and its client takes any lock).
    let write = advice.advice == LU_LADVISE_LOCKAHEAD && advice.mode == lanefs_core::client::ladvise::MODE_WRITE_USER;
    let access = if write { Access::Write } else { Access::Read };
    let MdsReply::File(info) = cl.mds(MdsRequest::Open { path: file.into(), access })? else {
        bail!("unexpected MDS answer")
    };
    let f = cl.open_file(file, info)?;
    let advised = cl.ladvise(&f, &[*advice]);
    cl.close(f)?;
    advised?;
    Ok(())
}

/// `lfs osts` (`llapi_ostlist` in `lustre/utils/liblustreapi_param.c`):
/// `OBDS:`, then `%d: %s %s` per OST, ACTIVE when it answered.
fn format_osts(stats: &[lanefs_proto::wire::OstStats]) -> String {
    let mut out = "OBDS:\n".to_string();
    for s in stats {
        let state = if s.space.is_some() { "ACTIVE" } else { "INACTIVE" };
        out += &format!("{}: lanefs-OST{:04x}_UUID {state}\n", s.ost, s.ost);
    }
    out
}

/// The lanefs mount point `path` is under, if any.
fn mount_point_of(path: &str) -> Result<Option<String>> {
    let Ok(host) = Path::new(path).canonicalize() else { return Ok(None) };
    let mounts = lanefs_fuse::mounts::lanefs_mounts()?;
    let deepest =
        mounts.into_iter().filter(|(point, _)| host.starts_with(point)).max_by_key(|(p, _)| p.as_os_str().len());
    Ok(deepest.map(|(point, _)| point.to_string_lossy().into_owned()))
}

/// `lfs df` (`showdf` and `mntdf` in `lustre/utils/lfs.c`): a header,
/// the MDT's line (`%s[MDT:0]`), a line per OST as `%-20s %11llu %11llu
/// %11llu %3d%% %s[OST:%d]`, an empty line, `filesystem_summary:` and an
/// empty line; `-h` gives sizes as `%8.1f%c` (K, M, G, ... from bytes),
/// `-i` inodes (objects, on an OST) instead of space. As `mntdf` sums
/// them, the summary's space is the OSTs' alone, and its inodes the
/// MDT's, lowered to the OSTs' free objects when those are fewer than the
/// MDT's free inodes (used stays the MDT's used).
///
/// lanefs's MDT line is the file system its database lives on (its inodes
/// that file system's too: see `lanefs_proto::MdtSpace`); an MDS whose
/// database is in memory prints none. OSTs that share one backing file
/// system count once in the summary.
fn format_df(
    statfs: &lanefs_proto::Statfs,
    stats: &[lanefs_proto::wire::OstStats],
    mounted_on: &str,
    human: bool,
    inodes: bool,
) -> String {
    let figures = |(total_bytes, free_bytes, total_inodes, free_inodes): (u64, u64, u64, u64)| -> (u64, u64, u64) {
        if inodes {
            (total_inodes, total_inodes.saturating_sub(free_inodes), free_inodes)
        } else {
            let shift = if human { 0 } else { 10 };
            let used = total_bytes.saturating_sub(free_bytes);
            (total_bytes >> shift, used >> shift, free_bytes >> shift)
        }
    };
    // lfs cooks inode counts as it cooks bytes (`COOK` in showdf).
    let cell = |value: u64| -> String {
        if !human {
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
    // The MDT's inodes are lanefs's (rows of its database), the free ones
    // its file system's; its bytes are its file system's.
    let mdt_used = statfs.file_count + statfs.dir_count;
    if let Some(m) = &statfs.space {
        let f = figures((m.total_bytes, m.free_bytes, mdt_used + m.free_inodes, m.free_inodes));
        out += &line("lanefs-MDT0000_UUID", f, &format!("{mounted_on}[MDT:0]"));
    }
    for s in stats {
        let uuid = format!("lanefs-OST{:04x}_UUID", s.ost);
        match &s.space {
            Some(space) => {
                let f = figures((space.total_bytes, space.free_bytes, space.total_inodes, space.free_inodes));
                out += &line(&uuid, f, &format!("{mounted_on}[OST:{}]", s.ost));
            }
            None => out += &format!("{uuid:<20}: inactive device\n"),
        }
    }
    // What the mount's statfs says too (`lanefs_client::space`).
    let s = lanefs_client::space::summary(statfs, stats);
    out += "\n";
    out +=
        &line("filesystem_summary:", figures((s.total_bytes, s.free_bytes, s.total_inodes, s.free_inodes)), mounted_on);
    out += "\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_proto::MdtSpace;

    #[test]
    fn ladvise_takes_lfs_exclusive_end() {
        let advice = |end, length| parse_advice("lockahead", true, Some("write"), 0, end, length, false);
        // -e 1m covers bytes 0 to 1m - 1: with 1 MiB stripes, the first OST only.
        assert_eq!(advice(Some(1 << 20), None).unwrap().end, (1 << 20) - 1);
        assert_eq!(advice(None, Some(4096)).unwrap().end, 4095);
        assert_eq!(advice(None, None).unwrap().end, u64::MAX - 1, "to the end of the file");
        assert!(advice(Some(10), Some(20)).unwrap_err().to_string().contains("conflicting arguments of -l and -e"));
        assert!(advice(Some(0), None).unwrap_err().to_string().contains("range [0, 0] is invalid"));
        let willread = parse_advice("willread", false, None, 512 << 10, Some(2560 << 10), None, true).unwrap();
        assert_eq!(willread, Advice::cache(CacheAdvice::WillRead, 512 << 10, (2560 << 10) - 1, false));
        assert_eq!(advice_name(&willread), "willread");
        let dontneed = parse_advice("dontneed", true, None, 0, None, Some(4096), false).unwrap();
        assert_eq!(dontneed, Advice::cache(CacheAdvice::DontNeed, 0, 4095, true));
        let e = parse_advice("willread", false, Some("READ"), 0, None, None, false).unwrap_err().to_string();
        assert_eq!(e, "mode is only valid with lockahead");
        let e = parse_advice("willread", false, Some("SOME"), 0, None, None, false).unwrap_err().to_string();
        assert!(e.contains("bad mode \"SOME\""), "{e}");
        let e = parse_advice("readahead", false, None, 0, None, None, false).unwrap_err().to_string();
        assert!(e.contains("invalid advice type \"readahead\"") && e.contains("willread, dontneed, lockahead"), "{e}");
    }

    #[test]
    fn df_prints_as_lfs_df() {
        use lanefs_proto::wire::{OstSpace, OstStats};
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
            rpcs_in_flight: 0,
            exports: 0,
        };
        let stats = [ost(0, 7), ost(1, 7)];
        let mdt =
            MdtSpace { fsid: 7, total_bytes: 1 << 30, free_bytes: 768 << 20, total_inodes: 2000, free_inodes: 1500 };
        // 500 lanefs inodes.
        let with =
            |space: Option<MdtSpace>| lanefs_proto::Statfs { ost_count: 2, file_count: 300, dir_count: 200, space };
        let mdt_statfs = with(Some(mdt));
        // lfs df's own text: the MDT first (its space left out of the
        // summary, lfs.c mntdf: "If we have OSTs then don't report MDT
        // block counts"), then the OSTs.
        assert_eq!(
            format_df(&mdt_statfs, &stats, "/mnt/lanefs", false, false),
            "UUID                   1K-blocks        Used   Available Use% Mounted on\n\
             lanefs-MDT0000_UUID      1048576      262144      786432  25% /mnt/lanefs[MDT:0]\n\
             lanefs-OST0000_UUID      4194304     1048576     3145728  25% /mnt/lanefs[OST:0]\n\
             lanefs-OST0001_UUID      4194304     1048576     3145728  25% /mnt/lanefs[OST:1]\n\n\
             filesystem_summary:      4194304     1048576     3145728  25% /mnt/lanefs\n\n"
        );
        // A database in memory has no MDT line.
        assert!(!format_df(&with(None), &stats, "/m", false, false).contains("MDT"));
        let human = format_df(&mdt_statfs, &stats[..1], "/m", true, false);
        // lfs divides while the value is above 1024: 1 GiB shows as 1024.0M.
        assert!(human.contains("lanefs-OST0000_UUID         4.0G     1024.0M        3.0G  25% /m[OST:0]"), "{human}");
        assert!(human.contains("lanefs-MDT0000_UUID      1024.0M      256.0M      768.0M  25% /m[MDT:0]"), "{human}");
        // -i: the MDT's inodes in use are lanefs's, its free ones its file
        // system's; the summary's are the MDT's (mntdf sums the MDTs'
        // os_files and os_ffree) ...
        assert_eq!(
            format_df(&mdt_statfs, &stats[..1], "/m", false, true),
            "UUID                      Inodes       IUsed       IFree IUse% Mounted on\n\
             lanefs-MDT0000_UUID         2000         500        1500  25% /m[MDT:0]\n\
             lanefs-OST0000_UUID         1000         100         900  10% /m[OST:0]\n\n\
             filesystem_summary:         1400         500         900  36% /m\n\n"
        );
        // ... lowered to the OSTs' free objects only when those are fewer.
        let roomy = MdtSpace { total_inodes: 1000, free_inodes: 800, ..mdt };
        let summary = format_df(&with(Some(roomy)), &stats[..1], "/m", false, true);
        assert!(summary.contains("filesystem_summary:         1300         500         800  38% /m\n"), "{summary}");
        // -i -h: inodes cooked as bytes are (lfs's COOK).
        let cooked = format_df(&mdt_statfs, &stats[..1], "/m", true, true);
        assert!(cooked.contains("lanefs-MDT0000_UUID         2.0K         500        1.5K  25% /m[MDT:0]"), "{cooked}");
    }

    #[test]
    fn getstripe_prints_as_lfs_getstripe() {
        // liblustreapi.c: lov_dump_user_lmm_header and lov_dump_user_lmm_v1v3.
        let values = ["2".to_string(), "1048576".to_string(), "3".to_string()];
        let all = StripeFields::default();
        assert_eq!(
            format_stripe(Some("/f"), false, &values, "raid0", None, &[(3, 7), (0, 7)], all),
            "/f\nlmm_stripe_count:  2\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\nlmm_layout_gen:    0\n\
             lmm_stripe_offset: 3\n\tobdidx\t\t objid\t\t objid\t\t group\n\
             \t     3\t             7\t          0x7\t             0\n\t     0\t             7\t          0x7\t             0\n\n"
        );
        let count = StripeFields { count: true, ..all };
        assert_eq!(format_stripe(None, false, &values, "raid0", None, &[], count), "2\n\n");
        let two = StripeFields { count: true, size: true, ..all };
        assert_eq!(
            format_stripe(None, false, &values, "raid0", None, &[], two),
            "lmm_stripe_count:  2\nlmm_stripe_size:   1048576\n\n"
        );
        let dir = ["4".to_string(), "2097152".to_string(), "-1".to_string()];
        assert_eq!(
            format_stripe(Some("/d"), true, &dir, "raid0", None, &[], all),
            "/d\nstripe_count:  4 stripe_size:   2097152 pattern:       raid0 stripe_offset: -1\n\n"
        );
        assert_eq!(
            format_stripe(None, true, &dir, "raid0", None, &[], StripeFields { size: true, ..all }),
            "2097152\n\n"
        );
        assert_eq!(format_stripe(None, true, &dir, "raid0", None, &[], StripeFields { generation: true, ..all }), "\n");
        // A pool, when the layout has one, follows the first OST.
        assert!(format_stripe(Some("/f"), false, &values, "raid0", Some("fast"), &[], all)
            .contains("lmm_stripe_offset: 3\nlmm_pool:          fast\n"));
        assert_eq!(
            format_stripe(None, false, &values, "raid0", Some("fast"), &[], StripeFields { pool: true, ..all }),
            "fast\n\n"
        );
        // -q: the objects alone.
        let quiet = StripeFields { quiet: true, ..all };
        assert_eq!(
            format_stripe(Some("/f"), false, &values, "raid0", None, &[(1, 2)], quiet),
            "/f\n\tobdidx\t\t objid\t\t objid\t\t group\n\t     1\t             2\t          0x2\t             0\n\n"
        );
        // -y: YAML, objects by their IDIF FIDs, no path and no empty line.
        let yaml = StripeFields { yaml: true, ..all };
        assert_eq!(
            format_stripe(None, false, &values, "raid0", None, &[(1, 2)], yaml),
            "lmm_stripe_count:  2\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\nlmm_layout_gen:    0\n\
             lmm_stripe_offset: 3\nlmm_objects:\n      - l_ost_idx: 1\n        l_fid:     0x100010000:0x2:0x0\n"
        );
        assert_eq!(
            format_stripe(None, true, &dir, "raid0", None, &[], yaml),
            "stripe_count:  4\nstripe_size:   2097152\npattern:       raid0\nstripe_offset: -1\n"
        );
    }

    /// An overstriped file: four stripes, two on each of OSTs 1 and 0, as
    /// lfs prints one (`llapi_lov_pattern_string`: "raid0,overstriped").
    #[test]
    fn getstripe_prints_an_overstriped_file_as_lfs_getstripe() {
        let values = ["4".to_string(), "1048576".to_string(), "1".to_string()];
        let objects = [(1, 2), (0, 2), (1, 3), (0, 3)];
        assert_eq!(
            format_stripe(Some("/o"), false, &values, pattern(true), None, &objects, StripeFields::default()),
            "/o\nlmm_stripe_count:  4\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0,overstriped\n\
             lmm_layout_gen:    0\nlmm_stripe_offset: 1\n\tobdidx\t\t objid\t\t objid\t\t group\n\
             \t     1\t             2\t          0x2\t             0\n\t     0\t             2\t          0x2\t             0\n\
             \t     1\t             3\t          0x3\t             0\n\t     0\t             3\t          0x3\t             0\n\n"
        );
        let dir = ["-2".to_string(), "1048576".to_string(), "-1".to_string()];
        assert_eq!(
            format_stripe(Some("/d"), true, &dir, pattern(true), None, &[], StripeFields::default()),
            "/d\nstripe_count:  -2 stripe_size:   1048576 pattern:       raid0,overstriped stripe_offset: -1\n\n"
        );
    }

    /// A composite file as `lfs setstripe -E 64M -c 1 -E -1 -c 2` makes
    /// one, printed as liblustreapi prints it (`lov_dump_comp_v1_header`,
    /// `lov_dump_comp_v1_entry`, the components' layouts indented with
    /// their objects' IDIF FIDs).
    #[test]
    fn getstripe_prints_a_composite_file_as_lfs_getstripe() {
        use lanefs_core::units::{ObjectId, ObjectKey, OstIndex};
        let object = |ost, id| ObjectKey { ost: OstIndex(ost), object: ObjectId(id) };
        let layout = Layout::composite(vec![
            (64 << 20, 1 << 20, vec![object(0, 2)]),
            (u64::MAX, 1 << 20, vec![object(1, 3), object(0, 4)]),
        ])
        .unwrap();
        let fast = PoolName::parse("fast").unwrap();
        assert_eq!(
            format_composite(Some("/pfl"), &layout, &[None, Some(fast)]),
            "/pfl
  lcm_layout_gen:    0
  lcm_mirror_count:  1
  lcm_entry_count:   2
    lcme_id:             1
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 0
    lcme_extent.e_end:   67108864
      lmm_stripe_count:  1
      lmm_stripe_size:   1048576
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: 0
      lmm_objects:
      -   0: { l_ost_idx:   0, l_fid: [0x100000000:0x2:0x0] }

    lcme_id:             2
    lcme_mirror_id:      0
    lcme_flags:          init
    lcme_extent.e_start: 67108864
    lcme_extent.e_end:   EOF
      lmm_stripe_count:  2
      lmm_stripe_size:   1048576
      lmm_pattern:       raid0
      lmm_layout_gen:    0
      lmm_stripe_offset: 1
      lmm_pool:          fast
      lmm_objects:
      -   0: { l_ost_idx:   1, l_fid: [0x100010000:0x3:0x0] }
      -   1: { l_ost_idx:   0, l_fid: [0x100000000:0x4:0x0] }

"
        );
    }

    /// A directory's composite default as `lfs setstripe -E 64M -c 1 -E -1
    /// -c 4 -S 4M DIR` makes one, as liblustreapi prints a template.
    #[test]
    fn getstripe_prints_a_composite_default_as_lfs_getstripe() {
        let component = |end, count, size| ComponentSpec {
            end,
            stripe: StripeSpec { count: Some(count), size, ..StripeSpec::default() },
        };
        let parts = [component(64 << 20, 1, None), component(u64::MAX, 4, Some(4 << 20))];
        let default = StripeDefault { count: 1, overstripe: false, size: 1 << 20, start_ost: -1, pool: None };
        assert_eq!(
            format_composite_default(Some("/d"), &parts, &default),
            "/d
  lcm_layout_gen:    0
  lcm_mirror_count:  1
  lcm_entry_count:   2
    lcme_id:             N/A
    lcme_mirror_id:      N/A
    lcme_flags:          0
    lcme_extent.e_start: 0
    lcme_extent.e_end:   67108864
      stripe_count:  1       stripe_size:   1048576       pattern:       raid0       stripe_offset: -1

    lcme_id:             N/A
    lcme_mirror_id:      N/A
    lcme_flags:          0
    lcme_extent.e_start: 67108864
    lcme_extent.e_end:   EOF
      stripe_count:  4       stripe_size:   4194304       pattern:       raid0       stripe_offset: -1

"
        );
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
