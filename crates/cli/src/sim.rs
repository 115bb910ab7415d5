//! `lanefs sim`: IOR on a simulated cluster.
//!
//! `lanefs sim ior --cluster PRESET_OR_FILE [IOR options] [sim options]`
//! runs IOR's `-a POSIX` or `-a MPIIO` through the same front end as
//! `lanefs ior`, on lanefs-sim's model of the named machine. The simulator's
//! own options are taken out of the argument list wherever they appear; the
//! rest are IOR's.
//!
//! `lanefs sim presets` lists the shipped cluster descriptions.

use crate::args::{take, take_flag, take_one, take_timeseries};
use crate::out::outln;
use anyhow::{anyhow, bail, Context, Result};
use lanefs_backends::mpiio::env_flag;
use lanefs_core::client::ladvise::IoLockMode as LockMode;
use lanefs_ior::Api;
use lanefs_mpiio::hints as mhints;
use lanefs_sim::backend::{SimBackend, SimOptions};
use lanefs_sim::config::{presets, ClusterConfig};
use std::io::Write;

pub const USAGE: &str = "\
usage: lanefs sim ior --cluster PRESET_OR_FILE [IOR options] [simulator options]
       lanefs sim presets [NAME]     (the list; or one's description, to copy and change)

IOR options: as `lanefs ior` (-a POSIX or -a MPIIO, -b -t -s -F -w -r -e -c -i -N -C
  --tasks-per-node N, -O summaryFormat=JSON, ...). Data checks (-W, -R) are not
  available: the simulator moves lengths, not bytes.

simulator options:
  --cluster NAME|FILE.toml      cluster description (`lanefs sim presets` lists the names)
  --set SECTION.KEY=VALUE       change one value of the description (repeatable),
                                e.g. --set storage.lock_cpu_us=200
  --seed N                      seed of the run's random choices (default 1)
  --hints SPEC                  MPI-IO hints: key=value[:key=value...], or the
                                MPICH_MPIIO_HINTS syntax pattern:key=value[,...]
  --lanefs.lock-mode=MODE       independent I/O: default | noexpand | lockahead | group
  --lanefs.stripe-count=N       stripes of the test file (-1: every OST; default 1)
  --lanefs.stripe-size=SIZE     stripe size (default 1m)
  --lanefs.pfl=END:COUNT[:SIZE],...
                                a composite (PFL) test file, as lfs setstripe -E END
                                -c COUNT -S SIZE ... makes one; the last END is -1
  --timeseries FILE.jsonl       write the run's time series: bytes per rank and per
                                OST, and lock traffic per client, in each interval
                                (JSON Lines, docs/timeseries.md; `lanefs plot` draws it)
  --timeseries-interval SECONDS interval of the time series (default 0.1)
  --quiet                       no progress bar
  --check                       check every client's and OST's invariants after each
                                event (always on in debug builds; slower)

environment:
  LANEFS_MPIIO_HINTS (or MPICH_MPIIO_HINTS)  hints by file pattern
  LANEFS_MPIIO_STATS=1, LANEFS_MPIIO_TIMERS=1, LANEFS_MPIIO_HINTS_DISPLAY=1,
  LANEFS_MPIIO_AGGREGATOR_PLACEMENT_DISPLAY=1
      (or their MPICH_ names): print Cray MPICH-style blocks on stderr
";

pub fn main(mut args: Vec<String>) -> Result<()> {
    let Some(what) = (!args.is_empty()).then(|| args.remove(0)) else {
        bail!("say what to simulate: lanefs sim ior --cluster NAME [IOR options]\n\n{USAGE}");
    };
    match what.as_str() {
        "ior" => ior(args),
        // The list; or one, whole, to copy and change (`--cluster FILE`).
        "presets" => match args.as_slice() {
            [] => {
                for (name, text) in presets() {
                    let c = ClusterConfig::from_toml_str(text, name).map_err(|e| anyhow!("{e}"))?;
                    outln!("{name:<18} {}", c.cluster.description)?;
                }
                Ok(())
            }
            [name] => match presets().iter().find(|(n, _)| n == name) {
                Some((_, text)) => Ok(write!(std::io::stdout(), "{text}")?),
                None => bail!("no preset {name:?}: the shipped ones are {}", preset_names()),
            },
            _ => bail!("lanefs sim presets [NAME]: one name at most"),
        },
        "-h" | "--help" | "help" => Ok(write!(std::io::stdout(), "{USAGE}")?),
        other => bail!("unknown simulation {other:?}: use `lanefs sim ior` or `lanefs sim presets`"),
    }
}

fn parse_size(text: &str, option: &str) -> Result<u64> {
    lanefs_ior::parse_size(text).map_err(|message| anyhow!("{option}={text}: {message}"))
}

fn ior(mut args: Vec<String>) -> Result<()> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(write!(std::io::stdout(), "{USAGE}")?);
    }
    // The report's `Command line` is the whole invocation, so that it can be
    // run again as printed.
    let invocation =
        std::iter::once("lanefs sim ior").chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" ");
    let cluster = take(&mut args, "--cluster", "laptop")?
        .ok_or_else(|| anyhow!("--cluster is required: a preset name ({}) or a .toml file", preset_names()))?;
    let mut overrides = Vec::new();
    while let Some(set) = take_one(&mut args, "--set", "storage.lock_cpu_us=200")? {
        let (key, value) = set
            .split_once('=')
            .ok_or_else(|| anyhow!("--set {set}: write SECTION.KEY=VALUE, e.g. --set storage.lock_cpu_us=200"))?;
        overrides.push((key.trim().to_string(), value.trim().to_string()));
    }
    let cluster = ClusterConfig::load_with(&cluster, &overrides).map_err(|e| anyhow!("{e}"))?;
    let seed = match take(&mut args, "--seed", "1")? {
        Some(s) => s.parse().map_err(|_| anyhow!("--seed {s}: give a non-negative integer"))?,
        None => 1,
    };
    let cli_hints = take(&mut args, "--hints", "cb_nodes=8")?;
    let timeseries = take_timeseries(&mut args)?;
    let quiet = take_flag(&mut args, "--quiet");
    let check = take_flag(&mut args, "--check");

    let mut params = lanefs_ior::parse_args(&args).map_err(|e| anyhow!("{e}"))?;
    params.command_line = invocation;
    params.timeseries_interval_s = timeseries.as_ref().map_or(0.0, |(_, interval)| *interval);
    let ModuleOptions { lock_mode, stripe_count, stripe_size, pfl } = module_options(&params, &cluster)?;
    // Ranks sit on the cluster's nodes as its description says unless
    // --tasks-per-node says otherwise, and IOR's report says so too.
    params.tasks_per_node.get_or_insert(cluster.compute.ranks_per_node);
    let mut hints = lanefs_backends::mpiio::hint_pairs(&params).map_err(|e| anyhow!("{e}"))?;
    if let Some(spec) = &cli_hints {
        if Api::parse(&params.api) != Some(Api::Mpiio) {
            bail!("--hints are MPI-IO hints: they need -a MPIIO (this run is -a {})", params.api);
        }
        let rules = mhints::parse_cli_hints(spec).map_err(|e| anyhow!("--hints: {e}"))?;
        hints.extend(mhints::hints_for_file(&rules, &params.test_file));
    }
    let (hints, warnings) = mhints::known_hints(hints);
    for warning in warnings {
        eprintln!("lanefs: warning: {warning}");
    }
    let json = params.summary_format != lanefs_ior::SummaryFormat::Default;
    let opts = SimOptions {
        cluster,
        seed,
        lock_mode,
        stripe_count,
        stripe_size,
        pfl,
        hints,
        timeseries: timeseries.as_ref().map(|(path, _)| path.clone()),
        stats: env_flag("MPIIO_STATS"),
        timers: env_flag("MPIIO_TIMERS"),
        hints_display: env_flag("MPIIO_HINTS_DISPLAY"),
        aggregator_placement_display: env_flag("MPIIO_AGGREGATOR_PLACEMENT_DISPLAY"),
        progress: !quiet && !json,
        check,
    };
    let posix = SimBackend::new(Api::Posix, opts.clone());
    let library = SimBackend::new(Api::Lanefs, opts.clone());
    let mpiio = SimBackend::new(Api::Mpiio, opts);
    let mut out = std::io::stdout();
    let backend = lanefs_ior::select_backend(&params.api, &[&posix, &library, &mpiio]).map_err(|e| anyhow!("{e}"))?;
    let summary = lanefs_ior::run(&params, backend, &mut out).context("simulated IOR run failed")?;
    if let (Some((path, _)), Some(series)) = (&timeseries, &summary.timeseries) {
        series.write_file(path).map_err(anyhow::Error::msg)?;
    }
    Ok(())
}

fn preset_names() -> String {
    presets().iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// The simulated file system's module options (`--lanefs.*`: the backends
/// declare them; their values are read here).
struct ModuleOptions {
    lock_mode: Option<LockMode>,
    stripe_count: Option<i64>,
    stripe_size: Option<u64>,
    /// A composite layout.
    pfl: Vec<lanefs_sim::job::SimComponent>,
}

/// Reads [`ModuleOptions`]; `--lanefs.osts` must be the cluster's count.
fn module_options(params: &lanefs_ior::IorParams, cluster: &ClusterConfig) -> Result<ModuleOptions> {
    let lock_mode = params
        .module_value("lanefs.lock-mode")
        .map(|m| LockMode::parse(m).map_err(|e| anyhow!("--lanefs.lock-mode={m}: {e}")))
        .transpose()?;
    let stripe_count = params
        .module_value("lanefs.stripe-count")
        .map(|c| c.parse::<i64>().map_err(|_| anyhow!("--lanefs.stripe-count={c}: give a number of OSTs or -1")))
        .transpose()?;
    let stripe_size =
        params.module_value("lanefs.stripe-size").map(|s| parse_size(s, "--lanefs.stripe-size")).transpose()?;
    if let Some(osts) = params.module_value("lanefs.osts") {
        // The real -a LANEFS starts this many OSTs; a description has its
        // own, so the same command line runs in both worlds only when they
        // agree.
        let have = cluster.ost_count();
        if osts.parse::<u32>().ok() != Some(have) {
            bail!(
                "--lanefs.osts={osts}: cluster {} has {have} OSTs; drop the option, give --lanefs.osts={have}, \
                 or describe {osts} OSTs (lanefs calibrate --osts {osts})",
                cluster.cluster.name
            );
        }
    }
    let pfl = match params.module_value("lanefs.pfl") {
        Some(spec) => lanefs_sim::backend::parse_pfl(spec).map_err(|e| anyhow!("--lanefs.pfl={spec}: {e}"))?,
        None => Vec::new(),
    };
    Ok(ModuleOptions { lock_mode, stripe_count, stripe_size, pfl })
}
