//! A whole lanefs file system in one process: an MDS and one OSS with N
//! OSTs, on local sockets, with its data in a directory (a temporary one by
//! default). `lanefs up`, the embedded cluster of `lanefs ior` and the
//! integration tests use it; the daemons are the same ones `lanefs mds` and
//! `lanefs oss` run on separate hosts.
//!
//! On TCP it authenticates as a cluster across hosts does: it makes the
//! cluster's keys in `DATA/keys/` unless they are there, serves with the
//! server key, and gives clients the client key ([`LocalCluster::client_options`];
//! [`LocalCluster::admin_options`] the admin key, whose root is not squashed).
//! On Unix sockets no key is needed (see [`lanefs_net::auth`]). The data
//! directory is made [`DATA_DIR_MODE`] when the cluster creates it (others
//! may pass through it to the sockets, and list or read nothing), and
//! everything the servers write in it is owner-only.
//!
//! The data directory is fenced first ([`lanefs_net::fence`]): a second cluster
//! on it stops before it touches a socket or a file there, and the first
//! keeps serving. The two servers share the process's descriptors: the OSS
//! sizes its connections and object files from three quarters of them, the
//! MDS from the rest.

use crate::faults::StoreFaults;
use crate::filestore::MemoryStores;
use crate::mds_server::{self, MdsHandle, MdsOptions};
use crate::oss::{self, OssConfig, OssHandle};
use lanefs_client::ClientOptions;
use lanefs_core::ost::{OstConfig, RecoveryConfig, SyncLockCancel};
use lanefs_mds::Mds;
use lanefs_net::auth::ensure_cluster_keys;
use lanefs_net::auth::{ClusterKey, KeyRootSquash};
use lanefs_net::fence::Fence;
use lanefs_net::keys::KeyFiles;
use lanefs_net::limits::ServerLimits;
use lanefs_net::transport::Address;
use lanefs_proto::{MdsConfig, Owner};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The mode of a data directory the cluster makes: its owner's, and others
/// may only pass through to the sockets in it (whose peers act as
/// themselves, see [`lanefs_net::auth`]); every file and directory in it is
/// owner-only, so passing through reaches nothing else.
pub const DATA_DIR_MODE: u32 = 0o711;

/// How long starting a cluster waits for the OSTs' first precreated objects.
pub const FIRST_OBJECTS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct LocalClusterConfig {
    pub osts: u32,
    /// Where the MDS database and the OST objects live; `None`: a temporary
    /// directory removed when the cluster is dropped.
    pub data_dir: Option<PathBuf>,
    /// Unix sockets in the data directory (fastest on one machine) rather than TCP on loopback.
    pub unix_sockets: bool,
    pub ost: OstConfig,
    pub default_stripe_count: u32,
    pub default_stripe_size: u64,
    /// See [`OssConfig::export_timeout`].
    pub export_timeout: std::time::Duration,
    /// Lustre's `root_squash`: uid 0 served as this user and group (off by default).
    pub root_squash: Option<Owner>,
    /// What a client key's root is served as (TCP; see [`lanefs_net::auth`]).
    pub key_root_squash: KeyRootSquash,
    /// Connections, timeouts and queues of both servers; `descriptors`, if
    /// set, is the whole process's, shared as the module says.
    pub limits: ServerLimits,
    /// Store calls the OSS fails on purpose (see [`crate::faults`]): kept
    /// across OSS restarts, so a test can set and clear them at any time.
    pub faults: StoreFaults,
    /// See [`OssConfig::memory_stores`]: a test that stands for a disk on
    /// a temporary directory that may be a tmpfs says
    /// [`MemoryStores::AsDisk`].
    pub memory_stores: MemoryStores,
    /// See [`MdsOptions::recovery_grace`]; the daemons' by default.
    pub mds_recovery_grace: std::time::Duration,
}

impl Default for LocalClusterConfig {
    fn default() -> Self {
        LocalClusterConfig {
            osts: 4,
            data_dir: None,
            unix_sockets: true,
            // Lustre's OSTs sync on every write-lock cancel (their journal
            // commits asynchronously, so `ofd_slc_set` makes it `always`).
            // Recovery on, as on every real OSS.
            ost: OstConfig { sync_lock_cancel: SyncLockCancel::Always, ..OstConfig::default() }
                .with_recovery(RecoveryConfig::default()),
            default_stripe_count: 1,
            default_stripe_size: 1 << 20,
            export_timeout: oss::EXPORT_TIMEOUT_DEFAULT,
            root_squash: None,
            key_root_squash: KeyRootSquash::default(),
            limits: ServerLimits::default(),
            faults: StoreFaults::default(),
            memory_stores: MemoryStores::default(),
            mds_recovery_grace: crate::mds_server::RECOVERY_GRACE_DEFAULT,
        }
    }
}

pub struct LocalCluster {
    config: LocalClusterConfig,
    runtime: tokio::runtime::Runtime,
    dir: PathBuf,
    mds: Option<MdsHandle>,
    oss: Option<OssHandle>,
    /// TCP only: the key files, the servers' key and the clients'.
    keys: Option<ClusterKeys>,
    /// The data directory's fence, held while the cluster lives.
    fence: Fence,
    /// Descriptors of the OSS and of the MDS.
    descriptors: (u64, u64),
    /// Dropped last: the temporary directory goes once nothing uses it.
    _temp: Option<tempfile::TempDir>,
}

struct ClusterKeys {
    files: KeyFiles,
    server: ClusterKey,
    client: ClusterKey,
    admin: ClusterKey,
}

fn key_error(e: lanefs_net::keys::KeyError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// The prefix of a cluster's directory in the temporary directory.
const TEMP_PREFIX: &str = "lanefs-";
/// The file that marks such a directory as a cluster's own, fenced.
const TEMP_MARK: &str = "lanefs-temporary";

/// Removes the temporary directories of clusters whose process is gone
/// without removing them (a process killed, as `mpirun` kills the ranks
/// of an aborted job): this user's own directories, marked as a
/// cluster's, whose fence no process holds. One another process still
/// holds is left alone, as is anything else in `tmp`.
fn sweep_abandoned(tmp: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX)
            && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == uid)
            && std::fs::symlink_metadata(path.join(TEMP_MARK)).is_ok_and(|m| m.is_file());
        if !ours {
            continue;
        }
        // Held: its cluster runs. Free: its process is gone.
        if let Ok(fence) = Fence::acquire(&path, "sweep") {
            match std::fs::remove_dir_all(&path) {
                Ok(()) => tracing::info!(dir = %path.display(), "removed a cluster directory its process left"),
                Err(e) => tracing::warn!(dir = %path.display(), %e, "removing a cluster directory its process left"),
            }
            drop(fence);
        }
    }
}

impl LocalCluster {
    pub fn start(config: LocalClusterConfig) -> std::io::Result<LocalCluster> {
        if config.osts == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a cluster needs at least one OST (--osts 1 or more)",
            ));
        }
        let (dir, temp) = match &config.data_dir {
            Some(d) => {
                std::fs::DirBuilder::new().recursive(true).mode(DATA_DIR_MODE).create(d)?;
                (d.clone(), None)
            }
            None => {
                sweep_abandoned(&std::env::temp_dir());
                let t = tempfile::Builder::new().prefix(TEMP_PREFIX).tempdir()?;
                std::fs::set_permissions(t.path(), std::os::unix::fs::PermissionsExt::from_mode(DATA_DIR_MODE))?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let fence = Fence::acquire(&dir, "MDS")?;
        if temp.is_some() {
            // Marked once fenced: a sweep takes only marked directories
            // whose fence no process holds.
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(dir.join(TEMP_MARK))?;
        }
        let keys = match config.unix_sockets {
            true => None,
            false => {
                let files = ensure_cluster_keys(&dir.join("keys")).map_err(key_error)?;
                let server = ClusterKey::load(&files.server).map_err(key_error)?;
                let client = ClusterKey::load(&files.client).map_err(key_error)?;
                let admin = ClusterKey::load(&files.admin).map_err(key_error)?;
                Some(ClusterKeys { files, server, client, admin })
            }
        };
        let descriptors = config.limits.descriptors_or_raise();
        // One network thread for the OSS and the MDS together: their work
        // is reading and writing messages (the OSTs' service and commit
        // threads, and the blocking pool the MDS's database runs on, do the
        // rest). With a second worker, tokio wakes it every time the first
        // finds work while it was the last one searching
        // (`transition_worker_from_searching`), so that on a quiet host every
        // message wakes two threads: one rank's lock-per-write run spent 15%
        // more CPU and went 15% slower so (bench/RESULTS.md).
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        let descriptors = (descriptors / 4 * 3, descriptors / 4);
        let mut cluster =
            LocalCluster { config, runtime, dir, mds: None, oss: None, keys, fence, descriptors, _temp: temp };
        cluster.start_oss()?;
        cluster.start_mds()?;
        Ok(cluster)
    }

    fn limits(&self, descriptors: u64) -> ServerLimits {
        ServerLimits { descriptors: Some(descriptors), ..self.config.limits.clone() }
    }

    /// Connections served and refused, and bytes queued, by the OSS and by
    /// the MDS (zeros for one that is stopped).
    pub fn server_stats(&self) -> (lanefs_net::limits::ServerStats, lanefs_net::limits::ServerStats) {
        (
            self.oss.as_ref().map(|o| o.stats()).unwrap_or_default(),
            self.mds.as_ref().map(|m| m.stats()).unwrap_or_default(),
        )
    }

    fn address(&self, name: &str) -> Address {
        if self.config.unix_sockets {
            Address::Unix(self.dir.join(format!("{name}.sock")))
        } else {
            Address::Tcp("127.0.0.1:0".into())
        }
    }

    pub fn data_dir(&self) -> &Path {
        &self.dir
    }

    /// The address clients connect to.
    /// Serve the OSS's Prometheus metrics on `listen` (HOST:PORT) until the
    /// server returned is dropped (see [`crate::metrics`]).
    pub fn serve_metrics(&self, listen: &str) -> std::io::Result<crate::metrics::MetricsServer> {
        let scrapers = self.oss.iter().map(crate::oss::OssHandle::scraper).collect();
        let exporter = crate::metrics::Exporter::new(scrapers, self.mds.as_ref().map(MdsHandle::scraper));
        self.runtime.block_on(crate::metrics::MetricsServer::start(listen, exporter))
    }

    pub fn mds_address(&self) -> String {
        self.mds.as_ref().expect("MDS running").address().to_string()
    }

    pub fn oss_address(&self) -> Option<String> {
        self.oss.as_ref().map(|o| o.address().to_string())
    }

    /// The key files of a TCP cluster (`None` on Unix sockets).
    pub fn key_files(&self) -> Option<&KeyFiles> {
        self.keys.as_ref().map(|k| &k.files)
    }

    /// The client key of a TCP cluster (`None` on Unix sockets).
    pub fn client_key(&self) -> Option<&ClusterKey> {
        self.keys.as_ref().map(|k| &k.client)
    }

    /// Default client options, with the client key a TCP cluster needs.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions { key: self.client_key().cloned(), ..ClientOptions::default() }
    }

    /// Default client options with the admin key (TCP): root stays root.
    pub fn admin_options(&self) -> ClientOptions {
        ClientOptions { key: self.keys.as_ref().map(|k| k.admin.clone()), ..ClientOptions::default() }
    }

    fn server_key(&self) -> Option<&ClusterKey> {
        self.keys.as_ref().map(|k| &k.server)
    }

    /// Starts the MDS (on the database of an earlier run, if any): a new
    /// file system's root belongs to the user running this process. When
    /// the OSS runs, this returns once its OSTs have objects for the first
    /// creates (or [`FIRST_OBJECTS_WAIT`] has passed).
    pub fn start_mds(&mut self) -> std::io::Result<()> {
        let process = lanefs_client::process_credentials();
        let config = MdsConfig {
            ost_count: self.config.osts,
            default_stripe_count: self.config.default_stripe_count,
            default_stripe_size: self.config.default_stripe_size,
            root_owner: Owner { uid: process.uid, gid: process.gid },
            root_squash: self.config.root_squash,
        };
        let mds = Mds::open(&self.dir.join("mds.db"), config).map_err(|e| std::io::Error::other(e.to_string()))?;
        let listen = self.address("mds");
        let options = MdsOptions {
            limits: self.limits(self.descriptors.1),
            fence: Some(self.fence.clone()),
            recovery_grace: self.config.mds_recovery_grace,
            key_root_squash: self.config.key_root_squash,
        };
        let key = self.server_key();
        let handle = self.runtime.block_on(mds_server::start_with(&listen, key, mds, self.config.osts, options))?;
        if let Some(oss) = &self.oss {
            let osts: Vec<u32> = (0..self.config.osts).collect();
            handle.register_oss(&oss.address().to_string(), &osts);
            self.runtime.block_on(handle.wait_for_objects(FIRST_OBJECTS_WAIT));
        }
        self.mds = Some(handle);
        Ok(())
    }

    pub fn stop_mds(&mut self) {
        if let Some(m) = self.mds.take() {
            self.runtime.block_on(m.shutdown());
        }
    }

    pub fn start_oss(&mut self) -> std::io::Result<()> {
        let listen = match (&self.oss, self.config.unix_sockets) {
            (_, true) => self.address("oss"),
            (Some(o), false) => o.address().clone(),
            (None, false) => self.address("oss"),
        };
        let config = OssConfig {
            data_dir: self.dir.clone(),
            osts: (0..self.config.osts).collect(),
            ost: self.config.ost.clone(),
            export_timeout: self.config.export_timeout,
            limits: self.limits(self.descriptors.0),
            faults: self.config.faults.clone(),
            memory_stores: self.config.memory_stores,
        };
        let handle = self.runtime.block_on(oss::start(&listen, self.server_key(), config))?;
        if let Some(mds) = &self.mds {
            let osts: Vec<u32> = (0..self.config.osts).collect();
            mds.register_oss(&handle.address().to_string(), &osts);
        }
        self.oss = Some(handle);
        Ok(())
    }

    /// Stop the OSS (its connections close; clients see errors, not hangs).
    pub fn stop_oss(&mut self) {
        if let Some(o) = self.oss.take() {
            self.runtime.block_on(o.shutdown());
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop_oss();
        self.stop_mds();
    }
}

#[cfg(test)]
mod sweep_tests {
    use super::*;

    /// A marked directory whose fence no one holds goes; one held, one
    /// unmarked, and a link to a directory stay.
    #[test]
    fn a_sweep_takes_only_abandoned_cluster_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = |name: &str, marked: bool| {
            let path = tmp.path().join(name);
            std::fs::create_dir(&path).unwrap();
            if marked {
                std::fs::write(path.join(TEMP_MARK), b"").unwrap();
            }
            path
        };
        let abandoned = dir("lanefs-abandoned", true);
        std::fs::create_dir(abandoned.join("OST0000")).unwrap();
        let live = dir("lanefs-live", true);
        let _held = Fence::acquire(&live, "MDS").unwrap();
        let unmarked = dir("lanefs-unmarked", false);
        let other = dir("someone-else", true);
        let target = dir("target", true);
        std::os::unix::fs::symlink(&target, tmp.path().join("lanefs-link")).unwrap();
        sweep_abandoned(tmp.path());
        assert!(!abandoned.exists(), "its process is gone");
        assert!(live.exists() && unmarked.exists() && other.exists() && target.exists());
        assert!(tmp.path().join("lanefs-link").exists(), "a link is not followed nor taken");
    }
}
