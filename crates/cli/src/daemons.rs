//! `lanefs up`, `lanefs mds` and `lanefs oss`: running the servers.
//!
//! Each fences its data before touching it (`lanefs_net::fence`): a second
//! server on a directory in use refuses at once, naming the one running.

use anyhow::{Context, Result};
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ost::{OstConfig, SyncLockCancel};
use lanefs_core::Duration;
use lanefs_mds::{Mds, MdsConfig};
use lanefs_net::cluster::{LocalCluster, LocalClusterConfig};
use lanefs_net::fence::Fence;
use lanefs_net::limits::{ServerLimits, IDLE_TIMEOUT_DEFAULT};
use lanefs_net::mds_server::MdsOptions;
use lanefs_net::transport::Address;
use std::path::PathBuf;

/// The servers' connection limits: `--idle-timeout`, `--connections-max`.
#[derive(clap::Args, Clone, Debug)]
pub struct LimitArgs {
    /// Seconds a connection may send nothing before the server closes it
    /// (clients ping every 25 s; Lustre's ping evictor allows 150).
    #[arg(long, value_name = "SECONDS", default_value_t = IDLE_TIMEOUT_DEFAULT.as_secs_f64())]
    pub idle_timeout: f64,
    /// Connections served at once; past it a connection is refused with
    /// the reason. Default: sized from the descriptor limit, which the
    /// server raises to the hard limit (ulimit -Hn) at start.
    #[arg(long, value_name = "N")]
    pub connections_max: Option<usize>,
}

fn server_limits(args: &LimitArgs) -> Result<ServerLimits> {
    let idle_timeout_s = args.idle_timeout;
    if !(idle_timeout_s > 0.0 && idle_timeout_s.is_finite() && idle_timeout_s < 1e9) {
        anyhow::bail!("--idle-timeout {idle_timeout_s}: give a positive number of seconds (the default is 150)");
    }
    let limits = ServerLimits {
        idle_timeout: std::time::Duration::from_secs_f64(idle_timeout_s),
        connections_max: args.connections_max,
        ..ServerLimits::default()
    };
    limits.validate().map_err(anyhow::Error::msg)?;
    Ok(limits)
}

/// The servers' OST settings: `--callback-timeout` and `--sync-lock-cancel`.
#[derive(Clone, Debug)]
pub struct OstOptions {
    pub callback_timeout_s: f64,
    pub sync_lock_cancel: String,
}

fn ost_config(options: &OstOptions) -> Result<OstConfig> {
    let callback_timeout_s = options.callback_timeout_s;
    if !(callback_timeout_s > 0.0 && callback_timeout_s.is_finite()) {
        anyhow::bail!(
            "--callback-timeout {callback_timeout_s}: give a positive number of seconds (Lustre's floor is 100)"
        );
    }
    let Some(sync_lock_cancel) = SyncLockCancel::from_name(&options.sync_lock_cancel) else {
        anyhow::bail!(
            "--sync-lock-cancel {}: give one of {} (Lustre's ofd sync_lock_cancel; Lustre's default is always)",
            options.sync_lock_cancel,
            SyncLockCancel::NAMES.join(", ")
        );
    };
    let callback_timeout = Duration::from_ns((callback_timeout_s * 1e9) as u64);
    Ok(OstConfig { locks: LockServerConfig { callback_timeout }, sync_lock_cancel, ..OstConfig::default() })
}

/// A daemon's status line: to stdout if anyone still reads it. A closed
/// stdout (`lanefs up | head -2`) must not stop the servers.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, $($arg)*);
        let _ = out.flush();
    }};
}

fn wait_for_interrupt(runtime: &tokio::runtime::Runtime) {
    runtime.block_on(async {
        let _ = tokio::signal::ctrl_c().await;
    });
}

/// A whole file system (MDS and one OSS with `osts` OSTs) in this process.
pub fn up(osts: u32, data: PathBuf, tcp: bool, options: &OstOptions, limits: &LimitArgs) -> Result<()> {
    let config = LocalClusterConfig {
        osts,
        data_dir: Some(data.clone()),
        unix_sockets: !tcp,
        ost: ost_config(options)?,
        limits: server_limits(limits)?,
        ..Default::default()
    };
    let cluster = LocalCluster::start(config).with_context(|| format!("starting a cluster in {}", data.display()))?;
    say!("lanefs: MDS at {} with {osts} OSTs; data in {}", cluster.mds_address(), data.display());
    say!("export LANEFS_MDS={}", cluster.mds_address());
    say!("(interrupt to stop)");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    wait_for_interrupt(&rt);
    drop(cluster);
    Ok(())
}

/// The MDS alone, for a cluster across hosts. Its data directory is
/// fenced before the database is opened.
pub fn mds(data: PathBuf, osts: u32, listen: &str, limits: &LimitArgs) -> Result<()> {
    let listen = Address::parse(listen).map_err(anyhow::Error::msg)?;
    let limits = server_limits(limits)?;
    std::fs::create_dir_all(&data)?;
    let fence = Fence::acquire(&data, "MDS")?;
    let mds = Mds::open(&data.join("mds.db"), MdsConfig::new(osts)).map_err(|e| anyhow::anyhow!("{e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let options = MdsOptions { limits, fence: Some(fence) };
    let handle = rt.block_on(lanefs_net::mds_server::start_with(&listen, mds, osts, options))?;
    say!(
        "lanefs: MDS at {} for {osts} OSTs; start OSSes with: lanefs oss --mds {} ...",
        handle.address(),
        handle.address()
    );
    wait_for_interrupt(&rt);
    Ok(())
}

/// One OSS serving `osts`, registered with the MDS at `mds`. Its OST
/// directories are fenced before anything in them is touched.
pub fn oss(
    mds: &str,
    data: PathBuf,
    osts: Vec<u32>,
    listen: &str,
    options: &OstOptions,
    limits: &LimitArgs,
) -> Result<()> {
    let listen = Address::parse(listen).map_err(anyhow::Error::msg)?;
    let mds = Address::parse(mds).map_err(anyhow::Error::msg)?;
    let config = lanefs_net::oss::OssConfig {
        data_dir: data,
        osts: osts.clone(),
        ost: ost_config(options)?,
        limits: server_limits(limits)?,
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let handle = rt.block_on(lanefs_net::oss::start(&listen, config))?;
    rt.block_on(lanefs_net::oss::register_with_mds(&mds, handle.address(), &osts))
        .map_err(|reason| anyhow::anyhow!("registering with the MDS at {mds}: {reason}"))?;
    say!("lanefs: OSS at {} serving OSTs {osts:?}, registered with {mds}", handle.address());
    wait_for_interrupt(&rt);
    Ok(())
}
