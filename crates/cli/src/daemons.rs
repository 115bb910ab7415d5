//! `lanefs up`, `lanefs mds` and `lanefs oss`: running the servers, and
//! `lanefs key`: making the keys a cluster on TCP needs.
//!
//! Each server fences its data before touching it (`lanefs_net::fence`): a
//! second server on a directory in use refuses at once, naming the one
//! running.

use anyhow::{bail, Context, Result};
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ost::{OstConfig, RecoveryConfig, SyncLockCancel};
use lanefs_core::Duration;
use lanefs_mds::Mds;
use lanefs_net::auth::issue_key;
use lanefs_net::auth::{ClusterKey, KeyRootSquash};
use lanefs_net::fence::Fence;
use lanefs_net::keys::{create_cluster_keys, KeyRole};
use lanefs_net::limits::{ServerLimits, IDLE_TIMEOUT_DEFAULT};
use lanefs_net::transport::Address;
use lanefs_proto::{MdsConfig, Owner};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use lanefs_server::mds_server::MdsOptions;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

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

/// The servers' OST settings: `--callback-timeout`, `--sync-lock-cancel`,
/// `--emulate-commit-ms`, `--recovery-window` and `--export-timeout`.
#[derive(clap::Args, Clone, Debug)]
pub struct OstOptions {
    /// Seconds a lock holder has to cancel after a callback before it is evicted.
    #[arg(long = "callback-timeout", default_value_t = 100.0, value_name = "SECONDS")]
    pub callback_timeout_s: f64,
    /// Which write-lock cancels first make the object durable (fdatasync):
    /// never, blocking (called-back locks) or always (Lustre's default).
    #[arg(long, default_value = "always", value_name = "POLICY")]
    pub sync_lock_cancel: String,
    /// Make each OST commit (its fdatasyncs and commit point) take at
    /// least this many milliseconds, as on a slower disk (7200 rpm
    /// drives: about 8.3): for benchmarks that stand for deployed disks.
    #[arg(long, default_value_t = 0.0, value_name = "MS")]
    pub emulate_commit_ms: f64,
    /// Seconds a restarted OST waits for its clients to replay before it
    /// goes on without them (Lustre's recovery_time_soft).
    #[arg(long = "recovery-window", default_value_t = 300.0, value_name = "SECONDS")]
    pub recovery_window_s: f64,
    /// Seconds a client may be gone (no connection, no word) before the
    /// OSS evicts it (Lustre's ping evictor: 150).
    #[arg(long = "export-timeout", default_value_t = 150.0, value_name = "SECONDS")]
    pub export_timeout_s: f64,
    /// Serve Prometheus metrics of the OSTs on this HTTP address
    /// (HOST:PORT, e.g. 127.0.0.1:9169) at /metrics.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<String>,
}

/// A positive number of seconds, or an error naming the option.
fn seconds(option: &str, value: f64, hint: &str) -> Result<std::time::Duration> {
    if !(value > 0.0 && value.is_finite() && value < 1e9) {
        anyhow::bail!("{option} {value}: give a positive number of seconds ({hint})");
    }
    Ok(std::time::Duration::from_secs_f64(value))
}

fn ost_config(options: &OstOptions) -> Result<OstConfig> {
    let callback_timeout = seconds("--callback-timeout", options.callback_timeout_s, "Lustre's floor is 100")?;
    let Some(sync_lock_cancel) = SyncLockCancel::from_name(&options.sync_lock_cancel) else {
        anyhow::bail!(
            "--sync-lock-cancel {}: give one of {} (Lustre's ofd sync_lock_cancel; Lustre's default is always)",
            options.sync_lock_cancel,
            SyncLockCancel::NAMES.join(", ")
        );
    };
    let window = seconds("--recovery-window", options.recovery_window_s, "Lustre's recovery_time_soft is 300")?;
    let recovery = RecoveryConfig { window: Duration::from_ns(window.as_nanos() as u64), ..RecoveryConfig::default() };
    let locks = LockServerConfig {
        callback_timeout: Duration::from_ns(callback_timeout.as_nanos() as u64),
        ..LockServerConfig::default()
    };
    Ok(OstConfig { locks, sync_lock_cancel, ..OstConfig::default() }.with_recovery(recovery))
}

/// The store faults an OSS starts with: none, unless its commits are made
/// slow on purpose (`--emulate-commit-ms`).
fn store_faults(options: &OstOptions) -> Result<lanefs_server::faults::StoreFaults> {
    let ms = options.emulate_commit_ms;
    if !(0.0..=10_000.0).contains(&ms) {
        anyhow::bail!(
            "--emulate-commit-ms {ms}: give milliseconds from 0 (the disk's own) to 10000 (7200 rpm drives: 8.3)"
        );
    }
    let faults = lanefs_server::faults::StoreFaults::default();
    faults.slow_commits(std::time::Duration::from_secs_f64(ms / 1000.0));
    Ok(faults)
}

fn export_timeout(options: &OstOptions) -> Result<std::time::Duration> {
    seconds("--export-timeout", options.export_timeout_s, "Lustre evicts a silent client after 150")
}

/// `--root-squash UID:GID` (Lustre's `root_squash`): `None` when not given.
pub fn parse_root_squash(value: Option<&str>) -> Result<Option<Owner>> {
    let Some(value) = value else { return Ok(None) };
    let parsed =
        value.split_once(':').and_then(|(uid, gid)| Some(Owner { uid: uid.parse().ok()?, gid: gid.parse().ok()? }));
    match parsed {
        Some(owner) => Ok(Some(owner)),
        None => anyhow::bail!("--root-squash {value}: give UID:GID, numeric, e.g. 65534:65534 (Lustre's root_squash)"),
    }
}

/// `--key-root-squash UID:GID|off`: what a client key's root is served
/// as; by default `--root-squash`'s user, else 65534:65534.
pub fn parse_key_root_squash(value: Option<&str>, root_squash: Option<Owner>) -> Result<KeyRootSquash> {
    match value {
        None => Ok(root_squash.map_or_else(KeyRootSquash::default, KeyRootSquash::Squash)),
        Some("off") => Ok(KeyRootSquash::Off),
        Some(value) => {
            let parsed = value
                .split_once(':')
                .and_then(|(uid, gid)| Some(Owner { uid: uid.parse().ok()?, gid: gid.parse().ok()? }));
            match parsed {
                Some(owner) => Ok(KeyRootSquash::Squash(owner)),
                None => anyhow::bail!(
                    "--key-root-squash {value}: give UID:GID, numeric, e.g. 65534:65534, or off (to serve a client \
                     key's root as root; an admin key, lanefs key issue --admin, lifts it for one key instead)"
                ),
            }
        }
    }
}

/// The squash options of `lanefs up` and `lanefs mds`, as given.
#[derive(Clone, Copy, Debug, Default)]
pub struct Squash<'a> {
    /// `--root-squash`: every peer's root.
    pub root: Option<&'a str>,
    /// `--key-root-squash`: a client key's root.
    pub key_root: Option<&'a str>,
}

impl Squash<'_> {
    fn parse(self) -> Result<(Option<Owner>, KeyRootSquash)> {
        let root = parse_root_squash(self.root)?;
        Ok((root, parse_key_root_squash(self.key_root, root)?))
    }
}

/// The user and group running this process: the owner of a new file
/// system's root directory.
fn process_owner() -> Owner {
    let process = lanefs_client::process_credentials();
    Owner { uid: process.uid, gid: process.gid }
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
pub fn up(
    osts: u32,
    data: PathBuf,
    tcp: bool,
    options: &OstOptions,
    squash: Squash<'_>,
    limits: &LimitArgs,
) -> Result<()> {
    let (root_squash, key_root_squash) = squash.parse()?;
    let config = LocalClusterConfig {
        osts,
        data_dir: Some(data.clone()),
        unix_sockets: !tcp,
        ost: ost_config(options)?,
        export_timeout: export_timeout(options)?,
        root_squash,
        key_root_squash,
        limits: server_limits(limits)?,
        faults: store_faults(options)?,
        ..Default::default()
    };
    let cluster = LocalCluster::start(config).with_context(|| format!("starting a cluster in {}", data.display()))?;
    let metrics = match &options.metrics {
        Some(listen) => Some(cluster.serve_metrics(listen)?),
        None => None,
    };
    say!("lanefs: MDS at {} with {osts} OSTs; data in {}", cluster.mds_address(), data.display());
    if let Some(metrics) = &metrics {
        say!("lanefs: metrics at http://{}/metrics", metrics.address());
    }
    say!("export LANEFS_MDS={}", cluster.mds_address());
    if let Some(keys) = cluster.key_files() {
        // Whoever starts the cluster administers it: the admin key is
        // theirs (their root stays root); other users get client keys.
        let absolute = |path: &PathBuf| std::path::absolute(path).unwrap_or_else(|_| path.clone());
        say!("export LANEFS_KEY={}", absolute(&keys.admin).display());
        say!("(other users: {}, whose root is squashed)", absolute(&keys.client).display());
    }
    say!("(interrupt to stop)");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    wait_for_interrupt(&rt);
    drop(metrics);
    drop(cluster);
    Ok(())
}

/// The server key a daemon listening on `listen` (or reaching `mds`) needs:
/// loaded and checked, or the error that says where to get it.
fn server_key(who: &str, key: Option<&Path>, tcp: bool) -> Result<Option<ClusterKey>> {
    let Some(path) = key else {
        if tcp {
            bail!(
                "{who} on TCP needs the cluster's server key: give --key FILE or set LANEFS_KEY (lanefs key new DIR \
                 makes a cluster's keys: DIR/server.pem for servers, DIR/client.pem for users)"
            );
        }
        return Ok(None);
    };
    let key = ClusterKey::load(path)?;
    key.require_server(who)?;
    Ok(Some(key))
}

/// A data directory: made owner-only if it is new.
fn data_dir(data: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data)
        .with_context(|| format!("creating the data directory {}", data.display()))
}

/// The MDS alone, for a cluster across hosts. A new file system's root
/// belongs to the user running it. Its data directory is fenced before
/// the database is opened.
pub fn mds(
    data: PathBuf,
    osts: u32,
    listen: &str,
    key: Option<&Path>,
    squash: Squash<'_>,
    limits: &LimitArgs,
    metrics: Option<&str>,
) -> Result<()> {
    let listen = Address::parse(listen).map_err(anyhow::Error::msg)?;
    let (root_squash, key_root_squash) = squash.parse()?;
    let limits = server_limits(limits)?;
    let key = server_key("lanefs mds", key, matches!(listen, Address::Tcp(_)))?;
    data_dir(&data)?;
    let fence = Fence::acquire(&data, "MDS")?;
    let config = MdsConfig { root_owner: process_owner(), root_squash, ..MdsConfig::new(osts) };
    let mds = Mds::open(&data.join("mds.db"), config).map_err(|e| anyhow::anyhow!("{e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let options = MdsOptions {
        limits,
        fence: Some(fence),
        recovery_grace: lanefs_server::mds_server::RECOVERY_GRACE_DEFAULT,
        key_root_squash,
    };
    let handle = rt.block_on(lanefs_server::mds_server::start_with(&listen, key.as_ref(), mds, osts, options))?;
    say!(
        "lanefs: MDS at {} for {osts} OSTs; start OSSes with: lanefs oss --mds {} ...",
        handle.address(),
        handle.address()
    );
    let _metrics = serve_metrics(&rt, metrics, Vec::new(), Some(handle.scraper()))?;
    wait_for_interrupt(&rt);
    Ok(())
}

/// A daemon's metrics on `listen`, if given, said on standard output.
fn serve_metrics(
    rt: &tokio::runtime::Runtime,
    listen: Option<&str>,
    oss: Vec<lanefs_server::oss::OssScraper>,
    mds: Option<lanefs_server::mds_server::MdsScraper>,
) -> Result<Option<lanefs_server::metrics::MetricsServer>> {
    let Some(listen) = listen else { return Ok(None) };
    let exporter = lanefs_server::metrics::Exporter::new(oss, mds);
    let server = rt.block_on(lanefs_server::metrics::MetricsServer::start(listen, exporter))?;
    say!("lanefs: metrics at http://{}/metrics", server.address());
    Ok(Some(server))
}

/// One OSS serving `osts`, registered with the MDS at `mds`: an MDS not
/// up yet is waited for, up to `mds_timeout`, saying so on stderr. Its OST
/// directories are fenced before anything in them is touched.
#[allow(clippy::too_many_arguments)] // each is one option of `lanefs oss`
pub fn oss(
    mds: &str,
    data: PathBuf,
    osts: Vec<u32>,
    listen: &str,
    key: Option<&Path>,
    mds_timeout: std::time::Duration,
    options: &OstOptions,
    limits: &LimitArgs,
) -> Result<()> {
    let listen = Address::parse(listen).map_err(anyhow::Error::msg)?;
    let mds = Address::parse(mds).map_err(anyhow::Error::msg)?;
    let config = lanefs_server::oss::OssConfig {
        data_dir: data,
        osts: osts.clone(),
        ost: ost_config(options)?,
        export_timeout: export_timeout(options)?,
        limits: server_limits(limits)?,
        faults: store_faults(options)?,
        memory_stores: Default::default(),
    };
    let tcp = matches!(listen, Address::Tcp(_)) || matches!(mds, Address::Tcp(_));
    let key = server_key("lanefs oss", key, tcp)?;
    data_dir(&config.data_dir)?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let handle = rt.block_on(lanefs_server::oss::start(&listen, key.as_ref(), config))?;
    let mut said = false;
    let waiting = |reason: &str, wait: std::time::Duration| {
        if !said {
            eprintln!(
                "lanefs: waiting for the MDS at {mds} ({reason}); trying again, for up to {}s",
                mds_timeout.as_secs()
            );
            said = true;
        } else {
            tracing::debug!("the MDS at {mds}: {reason}; trying again in {wait:?}");
        }
    };
    let registered =
        lanefs_server::oss::register_with_mds(&mds, key.as_ref(), handle.address(), &osts, mds_timeout, waiting);
    rt.block_on(registered).map_err(|e| anyhow::anyhow!("registering with the MDS at {mds}: {e}"))?;
    say!("lanefs: OSS at {} serving OSTs {osts:?}, registered with {mds}", handle.address());
    let _metrics = serve_metrics(&rt, options.metrics.as_deref(), vec![handle.scraper()], None)?;
    wait_for_interrupt(&rt);
    Ok(())
}

/// `lanefs key new DIR`: a new cluster's CA, server key and client key.
pub fn key_new(dir: &Path) -> Result<()> {
    let files = create_cluster_keys(dir)?;
    say!("lanefs: a new cluster's keys in {}:", dir.display());
    say!("  {}  the CA: keep it safe; lanefs key issue signs more keys with it", files.ca.display());
    say!("  {}  for lanefs mds and lanefs oss (--key or LANEFS_KEY)", files.server.display());
    say!("  {}  for users (--key or LANEFS_KEY); their root is squashed", files.client.display());
    say!("  {}  for administrators: a client key whose root stays root", files.admin.display());
    Ok(())
}

/// `lanefs key issue --ca CA [--server|--admin] [--name NAME] OUT`: one more key.
pub fn key_issue(ca: &Path, role: KeyRole, name: Option<&str>, out: &Path) -> Result<()> {
    issue_key(ca, role, name, out)?;
    say!("lanefs: {} key in {} (mode 600); give it with --key or LANEFS_KEY", role.with_article(), out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_keys_root_is_squashed_unless_told_otherwise() {
        let nobody = lanefs_net::auth::SQUASH_OWNER_DEFAULT;
        let squash = |root, key_root| Squash { root, key_root }.parse().unwrap();
        assert_eq!(squash(None, None), (None, KeyRootSquash::Squash(nobody)));
        let given = Owner { uid: 5, gid: 6 };
        assert_eq!(squash(Some("5:6"), None), (Some(given), KeyRootSquash::Squash(given)), "--root-squash's user");
        assert_eq!(squash(None, Some("7:8")).1, KeyRootSquash::Squash(Owner { uid: 7, gid: 8 }));
        assert_eq!(squash(Some("5:6"), Some("off")), (Some(given), KeyRootSquash::Off));
        let e = Squash { root: None, key_root: Some("7") }.parse().unwrap_err().to_string();
        assert!(e.contains("--key-root-squash 7: give UID:GID") && e.contains("--admin"), "{e}");
    }
}
