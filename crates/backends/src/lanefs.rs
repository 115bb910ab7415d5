//! IOR's LANEFS backend: each rank is its own lanefs client, on the
//! cluster whose MDS the backend is given.
//!
//! Module options (`--lanefs.NAME=VALUE`):
//! * `lock-mode=default|noexpand|lockahead|group`: default is Lustre's
//!   expanding locks; noexpand sets lock-no-expand advice on every open;
//!   lockahead sets lock-no-expand and asks asynchronous lockahead for each
//!   transfer the rank will write, a window of them ahead of its writes
//!   (at most a quarter of its client's lock LRU, so that they are still
//!   cached when their writes come: `AheadSchedule`); group takes a group lock
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

use crate::rank::{
    absolute, backend_error, client_options, lock_mode, option_error, stripe, LanefsRank, Totals, CLIENT_OPTIONS, NAME,
};
use crate::ranks::ProcessRank;
use lanefs_client::{process_umask, Client, ClientOptions, NetError};
use lanefs_ior::{Backend, BackendReport, FsInfo, IorError, IorParams, ModuleOption, RankIo};
use lanefs_net::auth::ClusterKey;
use lanefs_proto::wire::OstStats;
use lanefs_proto::{FileKind, MdsReply, MdsRequest};
use std::path::PathBuf;
use std::sync::Mutex;

/// How the LANEFS backend lays out and locks its files, and runs its ranks.
const LAYOUT_OPTIONS: &[ModuleOption] = &[
    ModuleOption { name: "lock-mode", takes_value: true, help: "default | noexpand | lockahead | group" },
    ModuleOption { name: "stripe-count", takes_value: true, help: "stripes of new files (-1 = all OSTs)" },
    ModuleOption { name: "stripe-size", takes_value: true, help: "stripe size of new files (k/m/g)" },
    ModuleOption { name: "ranks", takes_value: true, help: "threads | processes: how -N ranks run (default threads)" },
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

    /// Add what rank `rank`'s `client` counted (lockahead requests, and
    /// its time series) to the run's report.
    pub(crate) fn count_client(&self, rank: u32, client: &Client) {
        if let (Ok(c), Ok(mut t)) = (client.counters(), self.totals.lock()) {
            t.lockahead_sent += c.lockahead_enqueues;
            t.lockahead_refused += c.lockahead_refused;
        }
        Totals::end_client(&self.totals, rank, client);
    }

    /// Start `client`'s time series, when the run records one (`ranks`:
    /// the run's).
    pub(crate) fn start_client(&self, client: &Client, ranks: u32) -> Result<(), IorError> {
        Totals::start_client(&self.totals, client, ranks)
    }

    /// A rank's own client, with the run's tunables; it listens for
    /// `lanefs lctl` (see `lanefs_client::control`), so that a running
    /// benchmark's clients can be read and tuned as Lustre's are.
    pub(crate) fn rank_client(&self, p: &IorParams) -> Result<Client, IorError> {
        let control_dir = Some(lanefs_client::control::run_dir());
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
        if ranks(p)? == Ranks::Processes && p.timeseries_interval_s > 0.0 {
            return Err(option_error(
                "ranks",
                "--timeseries counts each rank's client in its own thread; drop --lanefs.ranks=processes (or run the ranks under mpirun)".into(),
            ));
        }
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
            Err(NetError::Namespace(lanefs_proto::MdsError::NotFound { .. })) => Ok(()),
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

    fn start_timeline(&self, origin: std::time::Instant, interval_s: f64) -> Result<(), IorError> {
        self.totals.lock().expect("totals lock").timeline = Some((origin, interval_s));
        Ok(())
    }

    fn timeline(&self) -> Option<lanefs_ior::timeseries::TimeSeries> {
        self.totals.lock().ok()?.series(self.before.len() as u32)
    }

    fn rank_counters(&self) -> Vec<u64> {
        self.totals.lock().map(|t| vec![t.lockahead_sent, t.lockahead_refused]).unwrap_or_default()
    }

    fn set_job_counters(&self, totals: &[u64]) {
        if let (Ok(mut t), &[sent, refused]) = (self.totals.lock(), totals) {
            t.lockahead_sent = sent;
            t.lockahead_refused = refused;
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
