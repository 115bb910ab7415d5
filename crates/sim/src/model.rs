//! The numbers the simulated machine runs on, in the units the event loop
//! uses (bytes per second, nanoseconds), derived from a cluster description.

use crate::config::ClusterConfig;
use lanefs_core::client::ClientConfig;
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ost::OstConfig;
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
    /// An OSS's NIC, bytes/s.
    pub oss_bw: f64,
    /// OSS-side cost of one I/O RPC.
    pub rpc_overhead: Duration,
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

    /// The OSS serving `ost` (OSTs are numbered OSS by OSS).
    pub fn oss_of(&self, ost: u32) -> u32 {
        ost / self.osts_per_oss
    }

    pub fn from_config(c: &ClusterConfig) -> Model {
        let gib = |x: f64| x * (1u64 << 30) as f64;
        let us = |x: f64| Duration((x * 1e3).round() as u64);
        let client = ClientConfig {
            rpc_bytes_max: c.client.rpc_size_kib << 10,
            rpcs_in_flight_max: c.client.rpcs_in_flight as usize,
            dirty_bytes_max: c.client.max_dirty_mib_per_ost << 20,
            lru_locks_max: c.client.lock_lru_size as usize,
            cached_bytes_max: c.client.cached_mib_max << 20,
            ..ClientConfig::default()
        };
        let ost = OstConfig {
            locks: LockServerConfig { callback_timeout: Duration((c.storage.callback_timeout_s * 1e9) as u64) },
            ..OstConfig::default()
        };
        Model {
            nodes: c.compute.nodes,
            ranks_per_node: c.compute.ranks_per_node,
            copy_bw: gib(c.compute.copy_bandwidth_gib_s),
            node_bw: gib(c.compute.injection_bandwidth_gib_s),
            latency: us(c.compute.network_latency_us),
            mpi_bw: gib(c.mpi_bandwidth_gib_s()),
            mpi_latency: us(c.mpi_latency_us()),
            oss_count: c.storage.oss_count,
            osts_per_oss: c.storage.osts_per_oss,
            ost_write_bw: gib(c.storage.ost_write_bandwidth_gib_s),
            ost_read_bw: gib(c.storage.ost_read_bandwidth_gib_s),
            oss_bw: gib(c.storage.oss_network_bandwidth_gib_s),
            rpc_overhead: us(c.storage.rpc_service_overhead_us),
            raid_stripe_bytes: c.storage.raid_stripe_kib << 10,
            rmw_read_bw: gib(c.storage.rmw_read_bandwidth_gib_s),
            oss_threads: c.storage.oss_service_threads,
            lock_cpu: us(c.storage.lock_cpu_us),
            client,
            ost,
        }
    }
}
