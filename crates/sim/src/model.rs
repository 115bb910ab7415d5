//! The numbers the simulated machine runs on, in the units the event loop
//! uses (bytes per second, nanoseconds), derived from a cluster description.

use crate::config::{
    ClusterConfig, CommitSyncs, FileWrites, Hosts, OstDisks, OstWrites, RunsOn, UnstablePages, WriteBulk,
};
use lanefs_core::client::cores::Cores;
use lanefs_core::client::{ClientConfig, CopyContention};
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ost::{OstConfig, RecoveryConfig};
use lanefs_core::units::Duration;

#[derive(Clone, Debug)]
pub struct Model {
    pub nodes: u32,
    pub ranks_per_node: u32,
    /// One process copying into the page cache, bytes/s.
    pub copy_bw: f64,
    /// A node's NIC toward the file system, bytes/s.
    pub node_bw: f64,
    /// One-way latency of a file-system message.
    pub latency: Duration,
    /// Node-to-node MPI bandwidth (bytes/s) and latency.
    pub mpi_bw: f64,
    pub mpi_latency: Duration,
    pub oss_count: u32,
    pub osts_per_oss: u32,
    pub ost_write_bw: f64,
    pub ost_read_bw: f64,
    /// An OSS's OSTs are on one disk (`ost_disks = "shared"`), which takes
    /// their I/O one after another.
    pub ost_disks_shared: bool,
    /// An OSS's NIC, bytes/s.
    pub oss_bw: f64,
    /// OSS-side cost of one I/O RPC.
    pub rpc_overhead: Duration,
    /// OSS-side cost per page an I/O RPC carries beyond its first.
    pub rpc_per_page: Duration,
    /// Disk positioning time of one I/O, overlapped by other I/Os.
    pub access_latency: Duration,
    /// Time of one commit of an OST's journal (zero: syncs are free, and
    /// the world keeps no journal).
    pub journal_commit: Duration,
    /// An OST's commit syncs each object it covers in turn, each taking
    /// `journal_commit` besides its bytes' writeback, then writes its
    /// commit point (`commit_point`); `false`: one journal commit.
    pub commit_each_object: bool,
    pub commit_point: Duration,
    /// CPU time of one `fdatasync` on the OSS's host, beyond its bytes.
    pub sync_cpu: Duration,
    /// Bytes the OSS's host writes back per CPU second (`None`: free).
    pub writeback_cpu_bw: Option<f64>,
    /// The metadata server's time per create and per open, one request at
    /// a time.
    pub mds_create: Duration,
    pub mds_open: Duration,
    /// Client CPU time per message a node sends.
    pub client_cpu_per_rpc: Duration,
    /// Client CPU time per read or write call of a rank, beyond its copy.
    pub client_cpu_per_call: Duration,
    /// CPU time to wake a sleeping thread for a message, on the waker's
    /// busy core, on an idle one and on another busy one (zero:
    /// hand-offs are not modelled).
    pub handoff: Duration,
    pub handoff_idle_core: Duration,
    pub handoff_other_busy_core: Duration,
    /// Ranks waiting for an MPI collective sleep between tests and pay a
    /// wake-up after each sleep (their node runs more ranks than cores,
    /// and wake-ups cost something: see [`crate::mpi_waits`]).
    pub mpi_sleep_waits: bool,
    /// A waiting rank's tests yield the core and are charged to its node's
    /// cores, each [`Model::mpi_test`] (its node runs more ranks than cores,
    /// and `[mpi] test_yield_us` is given).
    pub mpi_tests_yield: bool,
    /// Cores per host (`None`: not modelled).
    pub cores: Option<u32>,
    /// Every node runs on one host.
    pub one_host: bool,
    /// Client CPU time per page of an I/O RPC.
    pub client_cpu_per_page: Duration,
    /// Client CPU time per lock it asks for, beyond its messages.
    pub client_cpu_per_lock: Duration,
    /// A core checksumming bulk, bytes/s (`None`: no checksums).
    pub checksum_bw: Option<f64>,
    /// A client's blocking-callback threads (`None`: no bound).
    pub callback_threads: Option<u32>,
    /// Lock-server CPU time per blocking callback sent.
    pub callback_cpu: Duration,
    /// The servers run on compute node 0 and share its cores.
    pub servers_on_node: bool,
    /// A write's bulk is read from the client's shared memory: no network
    /// time.
    pub write_bulk_shared: bool,
    /// OSTs write into the host's page cache; syncs wait for the disk.
    pub host_cache: bool,
    /// With `host_cache`: one core writing into the page cache, bytes/s
    /// (`None`: at `copy_bw`).
    pub host_cache_write_bw: Option<f64>,
    /// With `host_cache`: dirty bytes an OSS's host keeps until syncs
    /// write them back (`None`: the disk takes writes as they come).
    pub host_cache_background: Option<u64>,
    /// With `host_cache_background`: bytes an OST takes before it commits
    /// on its own (`None`: never, or the OSTs commit themselves: with
    /// `client.recovery`, the clients keep their unstable pages and the
    /// OSTs number their changes and commit them).
    pub host_cache_commit: Option<u64>,
    /// Client CPU time per page frame written for the first time.
    pub page_first_touch: Duration,
    /// Server CPU time per page of a client's memory read for the first time.
    pub page_first_map: Duration,
    /// A rank's CPU time per MPI message sent or received.
    pub mpi_message_cpu: Duration,
    /// A rank's time per `MPI_Test` (its spin before it first sleeps in a
    /// wait is [`crate::mpi_waits::SPIN_TESTS`] of them).
    pub mpi_test: Duration,
    /// MPI's eager limit: a larger message waits for its receiver to test
    /// (`None`: every message moves at once; see [`crate::mpi_waits`]).
    pub mpi_rendezvous_bytes: Option<u64>,
    /// Time of one request through the mount (`None`: no mount).
    pub mount_request: Option<Duration>,
    /// Largest request through the mount, bytes.
    pub mount_request_max: u64,
    /// A node's writes to one file through its mount go one at a time
    /// (the kernel's inode lock; see `job::inode_locks`).
    pub mount_serial_writes: bool,
    /// Bound of the random delay of an aggregator's start of a round.
    pub round_jitter: Duration,
    /// Full RAID stripe of an OST, bytes.
    pub raid_stripe_bytes: u64,
    /// Rate at which a partly written RAID stripe is read back for parity.
    pub rmw_read_bw: f64,
    pub oss_threads: u32,
    /// Lock-server CPU time per lock request.
    pub lock_cpu: Duration,
    pub client: ClientConfig,
    pub ost: OstConfig,
}

impl Model {
    pub fn ost_count(&self) -> u32 {
        self.oss_count * self.osts_per_oss
    }

    /// Time of the requests through the mount that move a transfer of
    /// `bytes` (zero without a mount).
    pub fn mount_time(&self, bytes: u64) -> Duration {
        match self.mount_request {
            Some(request) => {
                Duration(request.as_ns().saturating_mul(bytes.div_ceil(self.mount_request_max.max(1)).max(1)))
            }
            None => Duration::ZERO,
        }
    }

    /// The OSS's CPU time for the pages of an I/O RPC of `len` bytes
    /// beyond its first, besides moving them: a service thread's work
    /// (`rpc_overhead` is the RPC's own).
    pub fn rpc_pages_cpu(&self, len: u64) -> Duration {
        let extra_pages = len.div_ceil(lanefs_core::units::PAGE_SIZE).saturating_sub(1);
        Duration(self.rpc_per_page.as_ns().saturating_mul(extra_pages))
    }

    /// The OSS serving `ost` (OSTs are numbered OSS by OSS).
    pub fn oss_of(&self, ost: u32) -> u32 {
        ost / self.osts_per_oss
    }

    /// The disk `ost`'s data is on: its own, or its OSS's one disk.
    pub fn disk_of(&self, ost: u32) -> usize {
        (if self.ost_disks_shared { self.oss_of(ost) } else { ost }) as usize
    }

    /// How many disks the OSTs' data is on.
    pub fn disks(&self) -> usize {
        (if self.ost_disks_shared { self.oss_count } else { self.oss_count * self.osts_per_oss }) as usize
    }

    /// The cores of each node's host, a pool per host (none without cores).
    pub fn host_cores(&self) -> Vec<Option<Cores>> {
        let Some(count) = self.cores else { return vec![None; self.nodes as usize] };
        if self.one_host {
            let shared = Cores::new(count);
            return (0..self.nodes).map(|_| Some(shared.clone())).collect();
        }
        (0..self.nodes).map(|_| Some(Cores::new(count))).collect()
    }

    /// A process's copy rate when `ranks` processes of a host copy: with
    /// the host's cores modelled, from the rate of one alone to the rate of
    /// each while every core copies (the memory bandwidth they share),
    /// linearly in the cores busy; without, the rate of one.
    pub fn copy_rate(c: &ClusterConfig, ranks: u32) -> f64 {
        let one = c.compute.copy_bandwidth().bytes_per_s();
        let Some(cores) = c.compute.cores else { return one };
        let every = c.compute.copy_bandwidth_every_core().bytes_per_s();
        let busy = ranks.clamp(1, cores);
        if cores <= 1 {
            return one;
        }
        one + (every - one) * f64::from(busy - 1) / f64::from(cores - 1)
    }

    /// The clients' and the OSTs' own settings, from the description.
    fn protocol_configs(c: &ClusterConfig) -> (ClientConfig, OstConfig) {
        let (compute, storage) = (&c.compute, &c.storage);
        let kept = c.client.unstable_pages() == UnstablePages::KeptUntilCommit;
        let client = ClientConfig {
            rpc_bytes_max: c.client.rpc_size_bytes(),
            rpcs_in_flight_max: c.client.rpcs_in_flight as usize,
            dirty_bytes_max: c.client.max_dirty_bytes_per_ost(),
            lru_locks_max: c.client.lock_lru_size as usize,
            cached_bytes_max: c.client.cached_bytes_max(),
            copy_bytes_per_s: Some(compute.copy_bandwidth().bytes_per_s()),
            copy_contention: CopyContention {
                file_writers: compute.file_lock_writers,
                node_writers: compute.page_cache_lock_writers,
            },
            recovery: kept,
            ..ClientConfig::default()
        };
        let ost = OstConfig {
            locks: LockServerConfig { callback_timeout: storage.callback_timeout(), resend: false },
            sync_lock_cancel: storage.sync_lock_cancel(),
            ..OstConfig::default()
        };
        if !kept {
            return (client, ost);
        }
        // The OSTs number changes and commit them, as lanefs's network OSS
        // does, so that clients learn when to let their pages go. They
        // commit every `host_cache_commit_mib` written (lanefs's OST), and
        // without it only when asked and 5 s after a change (jbd2's commit
        // interval, as a Lustre OST on ldiskfs).
        let commit_bytes = storage.host_cache_commit_bytes().unwrap_or(u64::MAX);
        (client, ost.with_recovery(RecoveryConfig { commit_bytes, ..RecoveryConfig::default() }))
    }

    pub fn from_config(c: &ClusterConfig) -> Model {
        let (compute, storage) = (&c.compute, &c.storage);
        let (client, ost) = Model::protocol_configs(c);
        let (handoff, handoff_idle_core, handoff_other_busy_core) = compute.handoff();
        Model {
            nodes: compute.nodes,
            ranks_per_node: compute.ranks_per_node,
            copy_bw: compute.copy_bandwidth().bytes_per_s(),
            node_bw: compute.injection_bandwidth().bytes_per_s(),
            latency: compute.network_latency(),
            mpi_bw: c.mpi_bandwidth().bytes_per_s(),
            mpi_latency: c.mpi_latency(),
            oss_count: storage.oss_count,
            osts_per_oss: storage.osts_per_oss,
            ost_write_bw: storage.ost_write_bandwidth().bytes_per_s(),
            ost_read_bw: storage.ost_read_bandwidth().bytes_per_s(),
            ost_disks_shared: storage.ost_disks() == OstDisks::Shared,
            oss_bw: storage.oss_network_bandwidth().bytes_per_s(),
            rpc_overhead: storage.rpc_service_overhead(),
            rpc_per_page: storage.rpc_service_per_page(),
            access_latency: storage.ost_access_latency(),
            journal_commit: storage.journal_commit(),
            commit_each_object: storage.commit_syncs() == CommitSyncs::EachObject,
            commit_point: storage.commit_point(),
            sync_cpu: storage.sync_cpu(),
            writeback_cpu_bw: storage.writeback_cpu_bandwidth().map(|b| b.bytes_per_s()),
            mds_create: storage.mds_create(),
            mds_open: storage.mds_open(),
            client_cpu_per_rpc: compute.client_cpu_per_rpc(),
            client_cpu_per_call: compute.client_cpu_per_call(),
            handoff,
            handoff_idle_core,
            handoff_other_busy_core,
            mpi_sleep_waits: false,
            mpi_tests_yield: false,
            cores: compute.cores,
            one_host: compute.hosts.unwrap_or_default() == Hosts::One,
            client_cpu_per_page: compute.client_cpu_per_page(),
            client_cpu_per_lock: compute.client_cpu_per_lock(),
            checksum_bw: compute.checksum_bandwidth().map(|b| b.bytes_per_s()),
            callback_threads: compute.callback_threads,
            callback_cpu: storage.callback_cpu(),
            servers_on_node: storage.runs_on() == RunsOn::ComputeNode,
            write_bulk_shared: storage.write_bulk() == WriteBulk::SharedMemory,
            host_cache: storage.ost_writes.unwrap_or_default() == OstWrites::HostCache,
            host_cache_write_bw: storage.host_cache_write_bandwidth().map(|b| b.bytes_per_s()),
            host_cache_background: storage.host_cache_background_bytes(),
            // Kept pages: the OSTs' own commits write back (`ost` above).
            host_cache_commit: storage.host_cache_commit_bytes().filter(|_| !client.recovery),
            page_first_touch: compute.page_first_touch(),
            page_first_map: storage.page_first_map(),
            mpi_message_cpu: c.mpi_message_cpu(),
            mpi_test: c.mpi_test(),
            mpi_rendezvous_bytes: c.mpi.rendezvous_bytes,
            mount_request: c.mount.request_us.map(|_| c.mount.request_time()),
            mount_request_max: c.mount.request_max_bytes(),
            mount_serial_writes: c.mount.file_writes.unwrap_or_default() == FileWrites::OneAtATime,
            round_jitter: compute.round_jitter(),
            raid_stripe_bytes: storage.raid_stripe_bytes(),
            rmw_read_bw: storage.rmw_read_bandwidth().bytes_per_s(),
            oss_threads: storage.oss_service_threads,
            lock_cpu: storage.lock_cpu(),
            client,
            ost,
        }
    }
}
