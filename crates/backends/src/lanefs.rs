//! IOR's LANEFS backend: each rank is its own lanefs client, on the
//! cluster whose MDS the backend is given.
//!
//! Module options (`--lanefs.NAME=VALUE`):
//! * `lock-mode=default|noexpand|lockahead|group`: default is Lustre's
//!   expanding locks; noexpand sets lock-no-expand advice on every open;
//!   lockahead sets lock-no-expand and asks asynchronous lockahead for each
//!   transfer the rank will write, before writing; group takes a group lock
//!   (gid 1) on the file across the write phase;
//! * `stripe-count=N` (-1 = all OSTs), `stripe-size=SIZE` for new files;
//! * `osts=N` for the embedded cluster (default 4);
//! * `max-dirty-mb=N`, `max-cached-mb=N`, `max-rpcs-in-flight=N`: each
//!   rank's client tunables, named after Lustre's `osc.*.max_dirty_mb`,
//!   `llite.*.max_cached_mb` and `osc.*.max_rpcs_in_flight`. Unset, the
//!   ranks of a node share one node's allowance, as they share its Lustre
//!   client: each of the `--tasks-per-node` ranks (all `-N` of them unless
//!   given, since they run on this host) gets its share of 32 MiB dirty per
//!   OST (at least one RPC) and 64 MiB of clean cache;
//! * `max-unstable-mb=N`: acknowledged but uncommitted MiB per OST a rank
//!   keeps to replay after an OSS restart (Lustre's unstable pages); past
//!   half of it the rank asks the OST to commit, at it its writes wait.
//!   Unset, its share of 128 MiB per OST per node (at least one RPC);
//! * `timeout=SECONDS`: how long an RPC may go unanswered, or a server be
//!   out of reach, before the operation that needs it fails (Lustre's
//!   `obd_timeout`, 100 s by default); clients ping every quarter of it;
//! * `ranks=threads|processes`: how `-N` ranks run. Either way each rank is
//!   its own client; with `processes` each client lives in a process of its
//!   own (see `crate::ranks`), as under `mpirun`.

use crate::ranks::ProcessRank;
use lanefs_core::client::ladvise::{Advice, AheadMode, IoLockMode, ADVICES_PER_CALL_MAX};
use lanefs_ior::{Backend, BackendReport, FsInfo, IorError, IorParams, ModuleOption, RankIo};
use lanefs_mds::{Access, CreateMode, FileKind, MdsReply, MdsRequest, StripeSpec};
use lanefs_net::auth::ClusterKey;
use lanefs_net::client::{process_umask, Client, ClientOptions, File, NetError};
use lanefs_net::proto::OstStats;
use std::path::PathBuf;
use std::sync::Mutex;

const NAME: &str = "LANEFS";

/// How the LANEFS backend lays out and locks its files, and runs its ranks.
const LAYOUT_OPTIONS: &[ModuleOption] = &[
    ModuleOption { name: "lock-mode", takes_value: true, help: "default | noexpand | lockahead | group" },
    ModuleOption { name: "stripe-count", takes_value: true, help: "stripes of new files (-1 = all OSTs)" },
    ModuleOption { name: "stripe-size", takes_value: true, help: "stripe size of new files (k/m/g)" },
    ModuleOption { name: "ranks", takes_value: true, help: "threads | processes: how -N ranks run (default threads)" },
];

/// Each rank's client and the embedded cluster: taken by every backend that
/// runs on lanefs (`-a LANEFS`, and `-a MPIIO` as `--lanefs.*`).
pub const CLIENT_OPTIONS: &[ModuleOption] = &[
    ModuleOption { name: "osts", takes_value: true, help: "OSTs of the embedded cluster (default 4)" },
    ModuleOption {
        name: "max-dirty-mb",
        takes_value: true,
        help: "dirty MiB per OST before a rank's writes wait (default: 32 per node, shared by its ranks)",
    },
    ModuleOption {
        name: "max-cached-mb",
        takes_value: true,
        help: "clean cached MiB per rank (default: 64 per node, shared by its ranks)",
    },
    ModuleOption {
        name: "max-unstable-mb",
        takes_value: true,
        help: "uncommitted MiB per OST a rank keeps to replay (default: 128 per node, shared by its ranks)",
    },
    ModuleOption { name: "max-rpcs-in-flight", takes_value: true, help: "write RPCs in flight per OST (default 8)" },
    ModuleOption {
        name: "timeout",
        takes_value: true,
        help:
            "seconds an RPC may go unanswered or a server be out of reach before the operation fails (obd_timeout, 100)",
    },
];

/// Every option of the LANEFS module.
static OPTIONS: std::sync::LazyLock<Vec<ModuleOption>> =
    std::sync::LazyLock::new(|| [LAYOUT_OPTIONS, CLIENT_OPTIONS].concat());

/// The `lanefs` IOR backend.
pub struct LanefsBackend {
    mds: String,
    /// The key file and its credentials, for a cluster on TCP.
    key: Option<(PathBuf, ClusterKey)>,
    /// The IOR options of the run, for rank processes.
    ior_args: Vec<String>,
    totals: Mutex<Totals>,
    before: Vec<OstStats>,
    /// The run's `timeout` option, once its parameters are checked.
    timeout: Mutex<Option<std::time::Duration>>,
}

/// Lockahead figures that only the clients know, summed over the ranks.
#[derive(Default)]
pub(crate) struct Totals {
    pub lockahead_sent: u64,
    pub lockahead_refused: u64,
}

pub(crate) fn backend_error(e: impl std::fmt::Display) -> IorError {
    IorError::Backend { backend: NAME, message: e.to_string() }
}

/// How `-N` ranks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ranks {
    Threads,
    Processes,
}

fn ranks(p: &IorParams) -> Result<Ranks, IorError> {
    match p.module_value("lanefs.ranks") {
        None | Some("threads") => Ok(Ranks::Threads),
        Some("processes") => Ok(Ranks::Processes),
        Some(other) => {
            Err(option_error("ranks", format!("{other:?} is not a way to run ranks; give threads or processes")))
        }
    }
}

/// Each rank's client settings, from the `max-*` module options; what they
/// leave unset is the rank's share of one node's allowance (Lustre's
/// defaults), among the ranks of its node (`tasksPerNode`): every rank here
/// is a client of its own, so that ranks contend for locks as the nodes of
/// a cluster do, but the ranks of one node share that node's memory, as
/// they share its one Lustre client.
pub(crate) fn client_options(p: &IorParams) -> Result<ClientOptions, IorError> {
    let mut options = ClientOptions::default();
    let ranks = u64::from(p.tasks_on_node0().max(1));
    let page = lanefs_core::PAGE_SIZE;
    let core = &mut options.core;
    core.dirty_bytes_max = (core.dirty_bytes_max / ranks / page * page).max(core.rpc_bytes_max);
    core.cached_bytes_max = core.cached_bytes_max / ranks / page * page;
    // What the OSTs acknowledged and have not yet committed is kept in the
    // same memory (Lustre's unstable pages count against the node's cache).
    core.unstable_bytes_max = (core.unstable_bytes_max / ranks / page * page).max(core.rpc_bytes_max);
    let number = |name: &str| -> Result<Option<u64>, IorError> {
        match p.module_value(&format!("lanefs.{name}")) {
            None => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| option_error(name, format!("{v:?} is not a whole number; e.g. --lanefs.{name}=16"))),
        }
    };
    if let Some(mb) = number("max-dirty-mb")? {
        if mb.saturating_mul(1 << 20) < core.rpc_bytes_max {
            return Err(option_error("max-dirty-mb", format!("{mb} is below one 1 MiB write RPC; give 1 or more")));
        }
        core.dirty_bytes_max = mb.saturating_mul(1 << 20);
    }
    if let Some(mb) = number("max-cached-mb")? {
        core.cached_bytes_max = mb.saturating_mul(1 << 20);
    }
    if let Some(mb) = number("max-unstable-mb")? {
        if mb.saturating_mul(1 << 20) < core.rpc_bytes_max {
            return Err(option_error("max-unstable-mb", format!("{mb} is below one 1 MiB write RPC; give 1 or more")));
        }
        core.unstable_bytes_max = mb.saturating_mul(1 << 20);
    }
    if let Some(n) = number("max-rpcs-in-flight")? {
        if !(1..=256).contains(&n) {
            return Err(option_error("max-rpcs-in-flight", format!("{n} is outside 1..=256 (Lustre's limits)")));
        }
        core.rpcs_in_flight_max = n as usize;
    }
    if let Some(seconds) = number("timeout")? {
        if !(1..=86_400).contains(&seconds) {
            return Err(option_error(
                "timeout",
                format!("{seconds} is outside 1..=86400 seconds; Lustre's default is 100"),
            ));
        }
        options = options.with_timeout(std::time::Duration::from_secs(seconds));
    }
    Ok(options)
}

impl LanefsBackend {
    pub fn new(mds: String, key: Option<(PathBuf, ClusterKey)>, ior_args: Vec<String>) -> Result<Self, NetError> {
        let mut options =
            ClientOptions { shared_memory: false, key: key.as_ref().map(|k| k.1.clone()), ..Default::default() };
        // The counters before the run are read under the run's own
        // timeout: an OSS out of reach fails the run after
        // `--lanefs.timeout`, not after Lustre's default 100 s.
        let given = timeout_arg(&ior_args);
        if let Some(timeout) = given {
            options = options.with_timeout(timeout);
        }
        let before = Client::connect(&mds, options)?.ost_stats()?;
        let timeout = Mutex::new(given);
        Ok(LanefsBackend { mds, key, ior_args, totals: Mutex::new(Totals::default()), before, timeout })
    }

    fn credentials(&self) -> Option<ClusterKey> {
        self.key.as_ref().map(|k| k.1.clone())
    }

    /// A backend that only names itself and its options (for `-h`); it is
    /// connected to nothing, so it must not run a test.
    pub fn offline() -> Self {
        LanefsBackend {
            mds: String::new(),
            key: None,
            ior_args: Vec::new(),
            totals: Mutex::new(Totals::default()),
            before: Vec::new(),
            timeout: Mutex::new(None),
        }
    }

    /// Add what `client` counted (lockahead requests) to the run's report.
    pub(crate) fn count_client(&self, client: &Client) {
        if let (Ok(c), Ok(mut t)) = (client.counters(), self.totals.lock()) {
            t.lockahead_sent += c.lockahead_enqueues;
            t.lockahead_refused += c.lockahead_refused;
        }
    }

    /// A rank's own client, with the run's tunables; it listens for
    /// `lanefs lctl` (see `lanefs_net::control`), so that a running
    /// benchmark's clients can be read and tuned as Lustre's are.
    pub(crate) fn rank_client(&self, p: &IorParams) -> Result<Client, IorError> {
        let control_dir = Some(lanefs_net::control::run_dir());
        let options = ClientOptions { key: self.credentials(), control_dir, ..client_options(p)? };
        Client::connect(&self.mds, options).map_err(backend_error)
    }

    /// A client for namespace calls and statistics: it writes no data, so
    /// it needs no page arena.
    fn admin(&self) -> Result<Client, IorError> {
        let mut options = ClientOptions { shared_memory: false, key: self.credentials(), ..Default::default() };
        if let Some(timeout) = *self.timeout.lock().expect("timeout lock") {
            options = options.with_timeout(timeout);
        }
        Client::connect(&self.mds, options).map_err(backend_error)
    }
}

/// `--lanefs.timeout=SECONDS` (or `--lanefs.timeout SECONDS`) among IOR's
/// arguments, if given well formed (a bad one is refused, named, when
/// IOR's options are parsed).
fn timeout_arg(args: &[String]) -> Option<std::time::Duration> {
    let value = args.iter().enumerate().find_map(|(i, arg)| match arg.strip_prefix("--lanefs.timeout") {
        Some(rest) if rest.starts_with('=') => Some(rest[1..].to_string()),
        Some("") => args.get(i + 1).cloned(),
        _ => None,
    })?;
    let seconds: u64 = value.parse().ok().filter(|s| (1..=86_400).contains(s))?;
    Some(std::time::Duration::from_secs(seconds))
}

/// IOR's default `-o testFile` is relative: lanefs paths start at its root.
pub fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

fn option_error(option: &str, message: String) -> IorError {
    IorError::Option { option: format!("--lanefs.{option}"), message }
}

fn lock_mode(p: &IorParams) -> Result<IoLockMode, IorError> {
    p.module_value("lanefs.lock-mode")
        .map_or(Ok(IoLockMode::Default), |v| IoLockMode::parse(v).map_err(|m| option_error("lock-mode", m)))
}

fn stripe(p: &IorParams) -> Result<StripeSpec, IorError> {
    let count =
        match p.module_value("lanefs.stripe-count") {
            None => None,
            Some(v) => Some(v.parse::<i64>().map_err(|_| {
                option_error("stripe-count", format!("{v:?} is not a number; e.g. 4, or -1 for all OSTs"))
            })?),
        };
    let size = match p.module_value("lanefs.stripe-size") {
        None => None,
        Some(v) => Some(lanefs_ior::parse_size(v).map_err(|m| option_error("stripe-size", m))?),
    };
    Ok(StripeSpec { count, size, ..StripeSpec::default() })
}

impl Backend for LanefsBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    fn options(&self) -> &'static [ModuleOption] {
        &OPTIONS
    }

    fn check_params(&self, p: &IorParams) -> Result<(), IorError> {
        lanefs_ior::check_module_options(NAME, &OPTIONS, p)?;
        lock_mode(p)?;
        stripe(p)?;
        ranks(p)?;
        *self.timeout.lock().expect("timeout lock") = Some(client_options(p)?.rpc_timeout);
        if p.collective {
            return Err(IorError::Option {
                option: "-c".into(),
                message: "collective I/O needs -a MPIIO (two-phase I/O on lanefs; -a LANEFS is POSIX-like)".into(),
            });
        }
        Ok(())
    }

    fn rank<'a>(&'a self, rank: u32, p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        if ranks(p)? == Ranks::Processes {
            let key = self.key.as_ref().map(|k| k.0.as_path());
            return Ok(Box::new(ProcessRank::spawn(rank, &self.mds, key, &self.ior_args, p, &self.totals)?));
        }
        let client = self.rank_client(p)?;
        Ok(Box::new(LanefsRank::new(&self.totals, rank, client, p)?))
    }

    fn delete(&self, path: &str) -> Result<(), IorError> {
        let admin = self.admin()?;
        // The MDS destroys the file's objects on the OSTs.
        match admin.mds(MdsRequest::Unlink { path: absolute(path) }) {
            Ok(_) => Ok(()),
            Err(NetError::Namespace(lanefs_mds::MdsError::NotFound { .. })) => Ok(()),
            Err(e) => Err(backend_error(e)),
        }
    }

    fn mkdir(&self, path: &str) -> Result<(), IorError> {
        let admin = self.admin()?;
        match admin.mds(MdsRequest::Stat { path: absolute(path) }) {
            Ok(MdsReply::Attr(a)) if a.kind == FileKind::Dir => Ok(()),
            _ => {
                let mkdir = MdsRequest::Mkdir { path: absolute(path), permissions: 0o777 & !process_umask() };
                admin.mds(mkdir).map(|_| ()).map_err(backend_error)
            }
        }
    }

    /// As `lfs df` sums its OSTs, counting each backing file system once.
    fn fs_info(&self, _path: &str) -> Result<FsInfo, IorError> {
        let stats = self.admin()?.ost_stats().map_err(backend_error)?;
        let mut seen = std::collections::BTreeSet::new();
        let mut info = FsInfo { total_bytes: 0, free_bytes: 0, total_inodes: 0, free_inodes: 0 };
        for space in stats.iter().filter_map(|s| s.space) {
            if seen.insert(space.fsid) {
                info.total_bytes += space.total_bytes;
                info.free_bytes += space.free_bytes;
                info.total_inodes += space.total_inodes;
                info.free_inodes += space.free_inodes;
            }
        }
        if seen.is_empty() {
            return Err(backend_error("no OST reported its capacity"));
        }
        Ok(info)
    }

    fn rank_counters(&self) -> Vec<u64> {
        self.totals.lock().map(|t| vec![t.lockahead_sent, t.lockahead_refused]).unwrap_or_default()
    }

    fn set_job_counters(&self, totals: &[u64]) {
        if let (Ok(mut t), &[sent, refused]) = (self.totals.lock(), totals) {
            *t = Totals { lockahead_sent: sent, lockahead_refused: refused };
        }
    }

    fn report(&self) -> Option<BackendReport> {
        let totals = self.totals.lock().ok()?;
        let after = self.admin().ok()?.ost_stats().ok()?;
        let sum = |stats: &[OstStats], f: &dyn Fn(&OstStats) -> u64| stats.iter().map(f).sum::<u64>();
        let delta = |f: &dyn Fn(&OstStats) -> u64| sum(&after, f).saturating_sub(sum(&self.before, f));
        let mut json = serde_json::Map::new();
        let mut put = |k: &str, v: u64| {
            json.insert(k.to_string(), serde_json::Value::from(v));
        };
        put("lock_enqueues", delta(&|s| s.locks.enqueues));
        put("lock_grants", delta(&|s| s.locks.grants));
        put("lockahead_sent", totals.lockahead_sent);
        put("lockahead_refused", totals.lockahead_refused);
        put("blocking_callbacks", delta(&|s| s.locks.callbacks));
        put("lock_cancels", delta(&|s| s.locks.cancels));
        put("evictions", delta(&|s| s.locks.evictions));
        put("write_rpcs", delta(&|s| s.data.write_rpcs));
        put("read_rpcs", delta(&|s| s.data.read_rpcs));
        put("ost_bytes_written", delta(&|s| s.data.bytes_written));
        put("ost_bytes_written_shm", delta(&|s| s.bulk_shared_bytes));
        put("ost_bytes_read", delta(&|s| s.data.bytes_read));
        Some(BackendReport::from_json("lanefs", json))
    }
}

/// One rank: its own client, one file open at a time.
pub(crate) struct LanefsRank<'a> {
    totals: &'a Mutex<Totals>,
    rank: u32,
    client: Option<Client>,
    file: Option<File>,
    mode: IoLockMode,
    stripe: StripeSpec,
    /// The open file is under this rank's group lock.
    grouped: bool,
}

impl<'a> LanefsRank<'a> {
    pub(crate) fn new(totals: &'a Mutex<Totals>, rank: u32, client: Client, p: &IorParams) -> Result<Self, IorError> {
        Ok(LanefsRank {
            totals,
            rank,
            client: Some(client),
            file: None,
            mode: lock_mode(p)?,
            stripe: stripe(p)?,
            grouped: false,
        })
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("client lives as long as the rank")
    }

    fn file(&self) -> Result<&File, IorError> {
        self.file.as_ref().ok_or_else(|| backend_error("no file open"))
    }

    fn advise(&mut self, p: &IorParams, writing: bool) -> Result<(), IorError> {
        let (cl, f) = (self.client(), self.file()?);
        if self.mode == IoLockMode::Default {
            return Ok(());
        }
        if self.mode == IoLockMode::Group {
            if writing {
                cl.group_lock(f, 1).map_err(backend_error)?;
                self.grouped = true;
            }
            return Ok(());
        }
        cl.ladvise(f, &[Advice::lock_no_expand(true)]).map_err(backend_error)?;
        if self.mode == IoLockMode::Lockahead && writing {
            let t = p.transfer_size_bytes;
            let offsets: Vec<u64> = lanefs_ior::offsets(p, self.rank).collect();
            for batch in offsets.chunks(ADVICES_PER_CALL_MAX - 1) {
                let advices: Vec<Advice> =
                    batch.iter().map(|&o| Advice::lockahead(AheadMode::Write, o, o + t - 1, true)).collect();
                cl.ladvise(f, &advices).map_err(backend_error)?;
            }
        }
        Ok(())
    }
}

impl RankIo for LanefsRank<'_> {
    fn create(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        let path = &absolute(path);
        let request = MdsRequest::Create {
            path: path.clone(),
            stripe: self.stripe.clone(),
            mode: CreateMode::OpenOrCreate,
            access: Access::Write,
            permissions: 0o666 & !process_umask(),
        };
        let MdsReply::File(info) = self.client().mds(request).map_err(backend_error)? else {
            return Err(backend_error("unexpected MDS answer to create"));
        };
        self.file = Some(self.client().open_file(path, info).map_err(backend_error)?);
        self.advise(p, true)
    }

    fn open(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        let path = &absolute(path);
        let open = MdsRequest::Open { path: path.clone(), access: Access::Read };
        let MdsReply::File(info) = self.client().mds(open).map_err(backend_error)? else {
            return Err(backend_error("unexpected MDS answer to open"));
        };
        self.file = Some(self.client().open_file(path, info).map_err(backend_error)?);
        self.advise(p, false)
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError> {
        self.client().pwrite(self.file()?, offset, buf).map_err(backend_error)
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError> {
        let data = self.client().pread(self.file()?, offset, buf.len() as u64).map_err(backend_error)?;
        buf.copy_from_slice(&data);
        Ok(())
    }

    fn fsync(&mut self) -> Result<(), IorError> {
        self.client().fsync(self.file()?).map_err(backend_error)
    }

    fn close(&mut self) -> Result<(), IorError> {
        let Some(f) = self.file.take() else { return Ok(()) };
        if std::mem::take(&mut self.grouped) {
            self.client().group_unlock(&f, 1).map_err(backend_error)?;
        }
        self.client().close(f).map_err(backend_error)
    }
}

impl Drop for LanefsRank<'_> {
    fn drop(&mut self) {
        if let Some(cl) = self.client.take() {
            if let (Ok(c), Ok(mut t)) = (cl.counters(), self.totals.lock()) {
                t.lockahead_sent += c.lockahead_enqueues;
                t.lockahead_refused += c.lockahead_refused;
            }
        }
    }
}

/// The OSTs of an embedded cluster: `--lanefs.osts=N` (default 4).
pub fn embedded_osts(args: &[String]) -> Result<u32, String> {
    for a in args {
        if let Some(v) = a.strip_prefix("--lanefs.osts=") {
            return v.parse().map_err(|_| format!("--lanefs.osts={v}: give a number of OSTs, e.g. 4"));
        }
    }
    Ok(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(line: &str) -> IorParams {
        let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        lanefs_ior::parse_args(&args).unwrap()
    }

    #[test]
    fn client_tunables_reach_the_client_or_are_refused_with_the_fix() {
        let o = client_options(&params(
            "-a LANEFS --lanefs.max-dirty-mb=8 --lanefs.max-cached-mb=0 --lanefs.max-rpcs-in-flight=16",
        ))
        .unwrap();
        assert_eq!((o.core.dirty_bytes_max, o.core.cached_bytes_max, o.core.rpcs_in_flight_max), (8 << 20, 0, 16));
        let d = client_options(&params("-a LANEFS")).unwrap().core;
        assert_eq!((d.dirty_bytes_max, d.cached_bytes_max, d.rpcs_in_flight_max), (32 << 20, 64 << 20, 8));
        // The ranks of a node share its allowance; one dirty RPC at least.
        let shared = |line: &str| {
            let c = client_options(&params(line)).unwrap().core;
            (c.dirty_bytes_max, c.cached_bytes_max)
        };
        assert_eq!(shared("-a LANEFS -N 8"), (4 << 20, 8 << 20));
        assert_eq!(shared("-a LANEFS -N 8 --tasks-per-node 2"), (16 << 20, 32 << 20));
        assert_eq!(shared("-a LANEFS -N 64"), (1 << 20, 1 << 20));
        assert_eq!(shared("-a LANEFS -N 8 --lanefs.max-dirty-mb=32"), (32 << 20, 8 << 20));
        // Uncommitted bytes kept to replay are shared too, or given.
        let unstable = |line: &str| client_options(&params(line)).unwrap().core.unstable_bytes_max;
        assert_eq!(unstable("-a LANEFS -N 8"), 16 << 20);
        assert_eq!(unstable("-a LANEFS -N 8 --lanefs.max-unstable-mb=64"), 64 << 20);
        assert_eq!(unstable("-a LANEFS -N 256"), 1 << 20);
        let timeout = client_options(&params("-a LANEFS --lanefs.timeout=6")).unwrap();
        assert_eq!((timeout.rpc_timeout.as_secs(), timeout.reconnect_timeout.as_secs()), (6, 6));
        for (line, says) in [
            ("--lanefs.max-dirty-mb=0", "--lanefs.max-dirty-mb: 0 is below one 1 MiB write RPC; give 1 or more"),
            ("--lanefs.max-rpcs-in-flight=300", "--lanefs.max-rpcs-in-flight: 300 is outside 1..=256"),
            ("--lanefs.max-cached-mb=lots", "--lanefs.max-cached-mb: \"lots\" is not a whole number"),
            ("--lanefs.max-unstable-mb=0", "--lanefs.max-unstable-mb: 0 is below one 1 MiB write RPC"),
            ("--lanefs.timeout=0", "--lanefs.timeout: 0 is outside 1..=86400 seconds"),
        ] {
            let e = client_options(&params(&format!("-a LANEFS {line}"))).unwrap_err().to_string();
            assert!(e.contains(says), "{line}: {e}");
        }
        assert!(ranks(&params("-a LANEFS --lanefs.ranks=processes")).is_ok_and(|r| r == Ranks::Processes));
        let e = ranks(&params("-a LANEFS --lanefs.ranks=forks")).unwrap_err().to_string();
        assert!(e.contains("give threads or processes"), "{e}");
    }
}
