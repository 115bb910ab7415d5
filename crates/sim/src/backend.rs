//! The simulator as an IOR backend: `-a POSIX` and `-a MPIIO` in modelled time.
//!
//! `lanefs sim ior` hands IOR's options to the same front end as `lanefs ior`;
//! this backend answers each phase with the simulated timestamps of every
//! rank ([`PhaseModel`]), keeps one machine (and so the client caches and
//! cached locks) across phases and repetitions, and adds two report objects:
//! `"lanefs"` (lock and RPC counters, bytes per OST) and `"sim"` (events,
//! wall time, seed).
//!
//! Striping: MPI-IO's `striping_factor`/`striping_unit` hints, else
//! `--lanefs.stripe-count`/`--lanefs.stripe-size` of the command, else
//! Lustre's defaults (1 stripe of 1 MiB); a count of -1 means every OST.
//! Lock mode: collective MPI-IO writes take it from the hints
//! (`cray_cb_write_lock_mode`, `romio_lustre_cb_lock_ahead_write`); independent
//! I/O from `--lanefs.lock-mode`.
//!
//! Hints, in increasing precedence: IOR's `IOR_HINT__MPI__*` (the
//! application's `MPI_Info`), then `LANEFS_MPIIO_HINTS` or, when that is unset,
//! `MPICH_MPIIO_HINTS` (like Cray MPICH, the environment overrides the
//! application), then `--hints` (the command line has the last word).

use crate::config::{ClusterConfig, MpiWait};
use crate::job::{Collective, Job, PhaseSpec, RankResult, SimComponent, SimError, WorkEv};
use crate::model::Model;
use crate::world::{RankSeries, World};
use lanefs_core::client::ladvise::IoLockMode as LockMode;
use lanefs_core::client::timeline::SERIES_GROUPS;
use lanefs_core::layout::Layout;
use lanefs_core::units::Duration;
use lanefs_core::units::{ObjectId, ObjectKey, OstIndex};
use lanefs_ior::timeseries::TimeSeries;
use lanefs_ior::{Api, Backend, BackendReport, IorError, IorParams, PhaseModel, RankPhase, RankTimes};
use lanefs_mpiio::hints::MpiioHints;
use lanefs_mpiio::report::{MpiioStats, MpiioTimers};
use lanefs_mpiio::{plan as mplan, report as mreport};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;
use std::sync::Mutex;

/// The simulated file system's module options (`--lanefs.*`), which both
/// simulated APIs take; `lanefs sim` reads their values into [`SimOptions`].
pub const LANEFS_OPTIONS: &[lanefs_ior::ModuleOption] = &[
    lanefs_ior::ModuleOption {
        name: "lock-mode",
        takes_value: true,
        help: "independent I/O: default | noexpand | lockahead | group",
    },
    lanefs_ior::ModuleOption {
        name: "stripe-count",
        takes_value: true,
        help: "stripes of the test file (-1: every OST; default 1)",
    },
    lanefs_ior::ModuleOption { name: "stripe-size", takes_value: true, help: "stripe size (default 1m)" },
    lanefs_ior::ModuleOption {
        name: "osts",
        takes_value: true,
        help: "the cluster's OSTs, as `lanefs ior -a LANEFS` takes it: must match the cluster description",
    },
    lanefs_ior::ModuleOption {
        name: "pfl",
        takes_value: true,
        help: "a composite (PFL) test file: END:COUNT[:SIZE],... ending at -1, e.g. 64m:1,-1:4",
    },
];

/// `--lanefs.pfl`'s components: `END:COUNT[:SIZE]` each (END a size with
/// k/m/g, or -1 for the end of the file; SIZE default 1m), comma
/// separated, as `lfs setstripe -E END -c COUNT -S SIZE ...` gives them.
pub fn parse_pfl(spec: &str) -> Result<Vec<SimComponent>, String> {
    let mut components = Vec::new();
    for part in spec.split(',') {
        let fields: Vec<&str> = part.split(':').collect();
        let (end, count, size) = match fields[..] {
            [end, count] => (end, count, "1m"),
            [end, count, size] => (end, count, size),
            _ => return Err(format!("{part:?}: give END:COUNT or END:COUNT:SIZE, e.g. 64m:1,-1:4")),
        };
        let end = match end {
            "-1" | "eof" | "EOF" => u64::MAX,
            _ => lanefs_ior::parse_size(end).map_err(|e| format!("{part:?}: end {end}: {e}"))?,
        };
        let count = count.parse::<u32>().map_err(|_| format!("{part:?}: stripe count {count:?} is not a number"))?;
        let size = lanefs_ior::parse_size(size).map_err(|e| format!("{part:?}: stripe size {size}: {e}"))?;
        components.push(SimComponent { end, count, size });
    }
    Ok(components)
}

/// What `lanefs sim ior` adds to IOR's options.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub cluster: ClusterConfig,
    pub seed: u64,
    /// `--lanefs.lock-mode` (independent I/O).
    pub lock_mode: Option<LockMode>,
    /// `--lanefs.stripe-count` (-1: all OSTs) and `--lanefs.stripe-size`.
    pub stripe_count: Option<i64>,
    pub stripe_size: Option<u64>,
    /// `--lanefs.pfl`: a composite test file (instead of the two above).
    pub pfl: Vec<SimComponent>,
    /// MPI-IO hints in precedence order (later wins), already matched to the file.
    pub hints: Vec<(String, String)>,
    /// `--timeseries FILE`, named in the report (the run's
    /// `timeseries_interval_s` says whether a series is counted).
    pub timeseries: Option<PathBuf>,
    /// Print `MPICH_MPIIO_STATS`/`TIMERS`/`HINTS_DISPLAY`-style blocks on stderr.
    pub stats: bool,
    pub timers: bool,
    pub hints_display: bool,
    /// `MPICH_MPIIO_AGGREGATOR_PLACEMENT_DISPLAY`: where the aggregators sit.
    pub aggregator_placement_display: bool,
    /// Show a progress bar on stderr (runs longer than a second).
    pub progress: bool,
    /// `--check`: every client's and OST's invariants checked after each
    /// input, as debug builds always do ([`World::check`]).
    pub check: bool,
}

impl SimOptions {
    /// A run on `cluster` with seed 7 and every option at its default
    /// (what `lanefs sim ior` does with no option but `--cluster`).
    pub fn new(cluster: ClusterConfig) -> SimOptions {
        SimOptions {
            cluster,
            seed: 7,
            lock_mode: None,
            stripe_count: None,
            stripe_size: None,
            pfl: Vec::new(),
            hints: Vec::new(),
            timeseries: None,
            stats: false,
            timers: false,
            hints_display: false,
            aggregator_placement_display: false,
            progress: false,
            check: false,
        }
    }
}

pub struct SimBackend {
    api: Api,
    opts: SimOptions,
    state: Mutex<Option<State>>,
}

struct State {
    job: Job,
    next_file: u64,
    file_id: u64,
    /// Wall time spent simulating.
    wall_s: f64,
    /// Cray's environment block was printed (once, before the first
    /// file's hints).
    environment_shown: bool,
    /// The write timers of every collective write phase, with
    /// `MPICH_MPIIO_TIMERS=1`, for IOR's JSON summary.
    timers: Vec<mreport::WriteTimers>,
}

fn err(e: impl std::fmt::Display) -> IorError {
    IorError::backend("SIM", e.to_string())
}

impl SimBackend {
    /// The simulator's backend for `api`, one it models ([`Api::simulated`]).
    pub fn new(api: Api, opts: SimOptions) -> SimBackend {
        assert!(api.simulated(), "the simulator has no -a {}", api.name());
        SimBackend { api, opts, state: Mutex::new(None) }
    }

    fn mpiio(&self) -> bool {
        match self.api {
            Api::Mpiio => true,
            Api::Posix | Api::Lanefs => false,
        }
    }

    fn hints(&self) -> Result<MpiioHints, IorError> {
        let mut h = MpiioHints::default();
        if self.mpiio() {
            for (k, v) in &self.opts.hints {
                h.set(k, v).map_err(|e| IorError::option("--hints", e.to_string()))?;
            }
        }
        Ok(h)
    }

    fn nodes_for(&self, p: &IorParams) -> Result<(u32, u32), IorError> {
        let c = &self.opts.cluster;
        let rpn = p.tasks_per_node.unwrap_or(c.compute.ranks_per_node).max(1);
        let nodes = p.num_tasks.div_ceil(rpn);
        if nodes > c.compute.nodes {
            return Err(IorError::option(
                format!("-N {}", p.num_tasks),
                format!(
                    "{} ranks at {rpn} per node need {nodes} nodes, but cluster {} has {}; lower -N or raise --tasks-per-node",
                    p.num_tasks, c.cluster.name, c.compute.nodes
                ),
            ));
        }
        Ok((nodes, rpn))
    }

    fn striping(&self, h: &MpiioHints) -> Result<(u32, u64), IorError> {
        let osts = self.opts.cluster.ost_count();
        if let Some(last) = self.opts.pfl.last() {
            if self.opts.stripe_count.is_some() || self.opts.stripe_size.is_some() || h.striping_factor.is_some() {
                return Err(IorError::option(
                    "--lanefs.pfl",
                    "a composite file's components give its striping: leave out --lanefs.stripe-count, \
                     --lanefs.stripe-size and the striping_factor hint",
                ));
            }
            // The core's rules for a composite layout, on stand-in objects.
            let mut id = 0;
            let mut probe = |count: u32| -> Vec<ObjectKey> {
                (0..count)
                    .map(|_| {
                        id += 1;
                        ObjectKey { ost: OstIndex(0), object: ObjectId(id) }
                    })
                    .collect()
            };
            let parts = self.opts.pfl.iter().map(|c| (c.end, c.size, probe(c.count))).collect();
            Layout::composite(parts).map_err(|e| IorError::option("--lanefs.pfl", e.to_string()))?;
            if let Some(c) = self.opts.pfl.iter().find(|c| c.count > osts) {
                return Err(IorError::option(
                    "--lanefs.pfl",
                    format!("a component of {} stripes: the cluster has {osts} OSTs", c.count),
                ));
            }
            return Ok((last.count, last.size));
        }
        let count = match (h.striping_factor, self.opts.stripe_count) {
            (Some(f), _) => i64::from(f),
            (None, Some(c)) => c,
            (None, None) => 1,
        };
        let count = if count == -1 { i64::from(osts) } else { count };
        if count < 1 || count > i64::from(osts) {
            return Err(IorError::option(
                "stripe count",
                format!("{count} is not between 1 and the cluster's {osts} OSTs (or -1 for all of them)"),
            ));
        }
        let size = h.striping_unit.or(self.opts.stripe_size).unwrap_or(1 << 20);
        if size < 65536 || !size.is_multiple_of(65536) {
            return Err(IorError::option(
                "stripe size",
                format!("{size} is not a positive multiple of 64 KiB (Lustre's rule); use e.g. 1m or 4m"),
            ));
        }
        Ok((count as u32, size))
    }

    fn with_state<T>(&self, p: &IorParams, f: impl FnOnce(&mut State) -> Result<T, IorError>) -> Result<T, IorError> {
        let mut guard = self.state.lock().map_err(|_| err("simulator state poisoned by an earlier failure"))?;
        if guard.is_none() {
            let (nodes, rpn) = self.nodes_for(p)?;
            let mut model = Model::from_config(&self.opts.cluster);
            model.nodes = nodes;
            // The processes copying on one host: its node's ranks, or every
            // rank when all nodes share one host.
            let on_host = if model.one_host { p.num_tasks } else { rpn };
            if model.one_host {
                // The clients of one host share its memory as `lanefs ior`
                // shares it among its ranks' clients: each its part of the
                // node's allowance.
                model.client.share_among(u64::from(nodes));
            }
            model.copy_bw = Model::copy_rate(&self.opts.cluster, on_host);
            // lanefs's MPI ranks sleep while they wait where a node runs
            // more ranks than cores (`LANEFS_MPI_WAIT=auto`).
            let wakes_cost = model.handoff > Duration::ZERO || model.handoff_idle_core > Duration::ZERO;
            let sleeps = match self.opts.cluster.mpi.wait.unwrap_or_default() {
                MpiWait::Auto => model.cores.is_some_and(|cores| on_host > cores),
                MpiWait::Sleep => true,
                MpiWait::Busy => false,
            };
            model.mpi_sleep_waits = wakes_cost && sleeps;
            // Open MPI yields the core in each idle test where a node runs
            // more ranks than it has cores (`mpi_yield_when_idle`).
            let oversubscribed = model.cores.is_some_and(|cores| on_host > cores);
            if let Some(test) = self.opts.cluster.mpi_test_yield().filter(|_| oversubscribed) {
                model.mpi_test = test;
                model.mpi_tests_yield = true;
            }
            model.client.copy_bytes_per_s = Some(model.copy_bw);
            if self.api != Api::Posix {
                // Only POSIX calls go through the mount.
                model.mount_request = None;
            }
            let mut world = World::new(model).map_err(err)?;
            world.check |= self.opts.check;
            if p.timeseries_interval_s > 0.0 {
                // Bins from the simulated run's start, its time zero.
                let interval = Duration((p.timeseries_interval_s * 1e9).round().max(1.0) as u64);
                for client in &mut world.clients {
                    client.start_timeline(0, interval);
                }
                let mut series = TimeSeries::new("simulated", p.timeseries_interval_s);
                for name in ["rank_write_bytes", "rank_read_bytes"] {
                    series.group(name, "bytes", "rank").head.members = p.num_tasks;
                }
                world.series = Some(RankSeries { interval, series });
            }
            let rng = ChaCha8Rng::seed_from_u64(self.opts.seed);
            let mut job = Job::new(world, p.num_tasks, rpn, rng);
            job.progress = self.opts.progress;
            *guard = Some(State {
                job,
                next_file: 1,
                file_id: 1,
                wall_s: 0.0,
                environment_shown: false,
                timers: Vec::new(),
            });
        }
        let state = guard.as_mut().expect("just made");
        let t = std::time::Instant::now();
        let out = f(state);
        state.wall_s += t.elapsed().as_secs_f64();
        out
    }

    fn phase(&self, p: &IorParams, write: bool, rep: u32) -> Result<Vec<RankPhase>, IorError> {
        let h = self.hints()?;
        let (stripe_count, stripe_size) = self.striping(&h)?;
        let collective = self.mpiio() && p.collective && !p.file_per_proc;
        let lock = self.opts.lock_mode.unwrap_or(LockMode::Default);
        if collective && self.opts.lock_mode.is_some() {
            return Err(IorError::option(
                "--lanefs.lock-mode",
                "collective MPI-IO takes its lock mode from the hints; use --hints cray_cb_write_lock_mode=2 (lockahead), 1 (group) or 0 (default)",
            ));
        }
        let mapping = lanefs_ior::NodeMapping::from_params(p);
        let rank_offset = if write { 0 } else { lanefs_ior::read_rank_offset(p, mapping) };
        let stats = self.opts.stats;
        let timers = self.opts.timers;
        let display = self.opts.hints_display || p.show_hints;
        let placement = self.opts.aggregator_placement_display;
        let file_name = p.test_file.clone();
        self.with_state(p, |st| {
            if write {
                st.file_id = st.next_file;
                st.next_file += if p.file_per_proc { u64::from(p.num_tasks) } else { 1 };
            }
            let coll = if collective {
                let nodes = st.job.world.model.nodes;
                let avail = if write {
                    mplan::aggregator_count(p.num_tasks, nodes, stripe_count, &h)
                } else {
                    mplan::read_aggregator_count(p.num_tasks, nodes, stripe_count, &h)
                };
                let aggregators = mplan::aggregator_ranks(avail, p.num_tasks, st.job.ranks_per_node);
                Some(Collective { aggregators, hints: h.clone() })
            } else {
                None
            };
            if display && rep == 0 && write && self.mpiio() {
                if self.opts.hints_display && !std::mem::replace(&mut st.environment_shown, true) {
                    eprint!("{}", lanefs_mpiio::hints::display_environment(lanefs_mpiio::hints::environment_value));
                }
                let avail = coll.as_ref().map_or(0, |c| c.aggregators.len() as u32);
                let shown = h.resolved(stripe_count, stripe_size, avail);
                eprint!("{}", lanefs_mpiio::hints::display_hints(&file_name, &shown));
            }
            if placement && rep == 0 && write {
                if let Some(c) = &coll {
                    let per_node = st.job.ranks_per_node.max(1);
                    let node = |rank: u32| format!("nid{:05}", rank / per_node);
                    eprint!("{}", mreport::format_aggregator_placement(&file_name, &c.aggregators, node));
                }
            }
            let spec = PhaseSpec {
                write,
                transfer: p.transfer_size_bytes,
                block: p.block_size_bytes,
                segments: p.segment_count,
                file_per_proc: p.file_per_proc,
                fsync: p.fsync,
                fsync_per_write: p.fsync_per_write,
                rank_offset,
                lock,
                collective: coll,
                stripe_count,
                stripe_size,
                components: self.opts.pfl.clone(),
                file_id: st.file_id,
            };
            let results = st.job.run_phase(&spec).map_err(sim_err)?;
            if self.mpiio() && (stats || timers) {
                st.timers.extend(print_mpiio(&st.job, &spec, &file_name, &results, stats, timers));
            }
            Ok(results.iter().map(rank_phase).collect())
        })
    }
}

fn sim_err(e: SimError) -> IorError {
    err(e)
}

fn rank_phase(r: &RankResult) -> RankPhase {
    let s = |i: lanefs_core::units::Instant| i.as_secs_f64();
    RankPhase {
        times: RankTimes {
            open_start_s: s(r.open_start),
            open_stop_s: s(r.open_stop),
            xfer_start_s: s(r.xfer_start),
            xfer_stop_s: s(r.xfer_stop),
            close_start_s: s(r.close_start),
            close_stop_s: s(r.close_stop),
        },
        bytes: r.bytes,
        transfers: r.transfers,
    }
}

/// The `MPICH_MPIIO_STATS` and `MPICH_MPIIO_TIMERS` blocks of a phase, on
/// stderr (stdout carries IOR's report, which scripts parse); the write
/// timers printed, if any.
fn print_mpiio(
    job: &Job,
    spec: &PhaseSpec,
    file: &str,
    results: &[RankResult],
    stats: bool,
    timers: bool,
) -> Option<mreport::WriteTimers> {
    if stats {
        let s = match &job.last_report {
            Some(report) if spec.write => report.write_stats.clone(),
            Some(report) => report.read_stats.clone(),
            None => {
                // Independent MPI-IO: every transfer is one independent call.
                let aggregators = spec.collective.as_ref().map_or(0, |c| c.aggregators.len() as u32);
                let mut s = MpiioStats::new(aggregators, spec.stripe_count, spec.stripe_size);
                for r in results {
                    let per = r.bytes.checked_div(r.transfers).unwrap_or(0);
                    for k in 0..r.transfers {
                        s.record_independent(k * per, per);
                    }
                }
                s.independent_ranks = results.iter().filter(|r| r.transfers > 0).count() as u64;
                s
            }
        };
        let block =
            if spec.write { mreport::format_write_stats(file, &s) } else { mreport::format_read_stats(file, &s) };
        eprint!("{block}");
    }
    if timers && spec.write {
        // The aggregators' timers, as the ranks' two-phase code gathered them at close.
        let report = job.last_report.as_ref().filter(|r| !r.writers.is_empty())?;
        let elapsed = Duration::from_ns((report.write_elapsed_s * 1e9) as u64);
        let bytes = MpiioTimers::total_bytes(&report.writers);
        let written = mreport::WriteTimers::new(file, &report.writers, bytes, elapsed);
        eprint!("{}", written.format());
        return Some(written);
    }
    None
}

impl PhaseModel for SimBackend {
    fn write_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError> {
        self.phase(p, true, rep)
    }

    fn read_phase(&self, p: &IorParams, rep: u32) -> Result<Vec<RankPhase>, IorError> {
        self.phase(p, false, rep)
    }

    fn remove(&self, p: &IorParams, rep: u32) -> Result<f64, IorError> {
        let _ = rep;
        // One metadata round trip (unlink); the OSTs destroy objects in the background.
        self.with_state(p, |st| Ok(Duration(2 * st.job.world.model.latency.as_ns()).as_secs_f64()))
    }
}

impl Backend for SimBackend {
    fn name(&self) -> &'static str {
        self.api.name()
    }

    /// The whole series: the ranks' bytes as their calls returned, and each
    /// node's client's lock traffic and OST bytes (a client per node).
    fn timeline(&self) -> Option<TimeSeries> {
        let mut guard = self.state.lock().ok()?;
        let world = &mut guard.as_mut()?.job.world;
        let mut series = world.series.as_ref()?.series.clone();
        let (now, osts, nodes) = (world.now, world.model.ost_count(), world.clients.len() as u32);
        for (node, client) in (0u32..).zip(&mut world.clients) {
            let Some((bins, truncated)) = client.take_timeline(now) else { continue };
            series.truncated |= truncated;
            for (bin, counts) in &bins {
                for (name, unit, per, member, count) in counts.series_counts(node) {
                    series.group(name, unit, per).add(member, *bin, count);
                }
            }
        }
        for (name, unit, per) in SERIES_GROUPS {
            let g = series.group(name, unit, per);
            g.head.members = g.head.members.max(if per == "ost" { osts } else { nodes });
        }
        Some(series)
    }

    fn version(&self) -> String {
        format!("lanefs-sim {} ({})", env!("CARGO_PKG_VERSION"), self.opts.cluster.cluster.name)
    }

    fn other_modules(&self) -> &'static [lanefs_ior::Module] {
        &[lanefs_ior::Module { name: "lanefs", options: LANEFS_OPTIONS }]
    }

    fn check_params(&self, p: &IorParams) -> Result<(), IorError> {
        // `--lanefs.*` are -a LANEFS's own options, and the other APIs'
        // module options.
        let own: &[lanefs_ior::ModuleOption] = match self.api {
            Api::Lanefs => LANEFS_OPTIONS,
            Api::Posix | Api::Mpiio => &[],
        };
        lanefs_ior::check_modules(self.api.name(), own, self.other_modules(), p)?;
        lanefs_ior::model_check_params(self.api.name(), p)?;
        self.nodes_for(p)?;
        let h = self.hints()?;
        self.striping(&h)?;
        Ok(())
    }

    fn rank<'a>(&'a self, _rank: u32, _p: &IorParams) -> Result<Box<dyn lanefs_ior::RankIo + 'a>, IorError> {
        Err(err("the simulator runs whole phases; it has no per-rank handles"))
    }

    fn delete(&self, _path: &str) -> Result<(), IorError> {
        Ok(())
    }

    fn phase_model(&self) -> Option<&dyn PhaseModel> {
        Some(self)
    }

    fn reports(&self) -> Vec<BackendReport> {
        let Ok(guard) = self.state.lock() else { return Vec::new() };
        let Some(st) = guard.as_ref() else { return Vec::new() };
        let w = &st.job.world;
        let mut locks = lanefs_core::ldlm::stats::LockCounters::default();
        let mut data = lanefs_core::ost::OstCounters::default();
        for ost in &w.osts {
            locks += ost.locks().counters_total();
            data += ost.counters();
        }
        let mut ahead = (0u64, 0u64);
        for c in &w.clients {
            let k = c.counters();
            ahead.0 += k.lockahead_enqueues;
            ahead.1 += k.lockahead_refused;
        }
        let mut lanefs = serde_json::Map::new();
        let mut put = |k: &str, v: serde_json::Value| {
            lanefs.insert(k.to_string(), v);
        };
        put("lock_enqueues", locks.enqueues.into());
        put("lock_grants", locks.grants.into());
        put("lockahead_sent", ahead.0.into());
        put("lockahead_refused", ahead.1.into());
        put("blocking_callbacks", locks.callbacks.into());
        put("callbacks_queued", w.callbacks_queued().into());
        put("lock_cancels", locks.cancels.into());
        put("evictions", locks.evictions.into());
        put("write_rpcs", data.write_rpcs.into());
        put("read_rpcs", data.read_rpcs.into());
        put("ost_bytes_written", data.bytes_written.into());
        put("ost_bytes_read", data.bytes_read.into());
        put("raid_rmw_writes", w.rmw_writes.into());
        put("lock_cancel_syncs", data.cancel_syncs.into());
        put("journal_commits", w.journals.iter().map(|j| j.commits).sum::<u64>().into());
        put("commit_fdatasyncs", w.commit_fdatasyncs().into());
        put("bytes_lost", w.bytes_lost.into());
        let per_ost: Vec<serde_json::Value> = w.osts.iter().map(|o| o.counters().bytes_written.into()).collect();
        put("ost_bytes_written_per_ost", per_ost.into());
        let per_ost: Vec<serde_json::Value> = w.osts.iter().map(|o| o.counters().bytes_read.into()).collect();
        put("ost_bytes_read_per_ost", per_ost.into());
        let sim = self.sim_report(w, st.wall_s);
        let mut reports = vec![BackendReport::from_json("lanefs", lanefs), BackendReport::from_json("sim", sim)];
        if !st.timers.is_empty() {
            reports.push(BackendReport::json_only(mreport::TIMERS_JSON_KEY, mreport::timers_json(&st.timers)));
        }
        reports
    }
}

impl SimBackend {
    /// The run's own figures: events, speed, simulated time, and what the
    /// hosts' cores were charged.
    fn sim_report(&self, w: &World<WorkEv>, wall_s: f64) -> serde_json::Map<String, serde_json::Value> {
        let mut sim = serde_json::Map::new();
        sim.insert("events".into(), w.events.into());
        sim.insert("wall_s".into(), wall_s.into());
        let rate = if wall_s > 0.0 { w.events as f64 / wall_s } else { 0.0 };
        sim.insert("events_per_s".into(), rate.into());
        sim.insert("seed".into(), self.opts.seed.into());
        sim.insert("cluster".into(), self.opts.cluster.cluster.name.clone().into());
        sim.insert("simulated_s".into(), w.now.as_secs_f64().into());
        if let Some(handoffs) = w.handoffs() {
            sim.insert("handoffs".into(), handoffs.into());
        }
        if w.mpi_wakeups > 0 {
            sim.insert("mpi_wakeups".into(), w.mpi_wakeups.into());
        }
        if let Some(frames) = w.frames_touched() {
            sim.insert("frames_touched".into(), frames.into());
        }
        if let Some(kinds) = w.handoffs_by_thread() {
            let kinds: serde_json::Map<_, _> =
                kinds.into_iter().map(|(name, count)| (name.to_string(), count.into())).collect();
            sim.insert("handoffs_by_thread".into(), kinds.into());
        }
        if let Some(busy) = w.cpu_busy() {
            sim.insert("cpu_busy_s".into(), busy.as_secs_f64().into());
        }
        if let Some(uses) = w.cpu_uses() {
            let uses: serde_json::Map<_, _> =
                uses.into_iter().map(|(name, time)| (name.to_string(), time.as_secs_f64().into())).collect();
            sim.insert("cpu_s".into(), uses.into());
        }
        if let Some(path) = &self.opts.timeseries {
            sim.insert("timeseries".into(), path.display().to_string().into());
        }
        sim
    }
}
