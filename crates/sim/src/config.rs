//! The simulated machine: a cluster description read from TOML.
//!
//! A [`ClusterConfig`] says how many compute nodes and OSTs there are, how
//! fast each copies, sends and stores bytes, how long messages and server
//! work take, and which Lustre client tunables are in force. It comes from a
//! TOML file or from one of the built-in [`presets`] (the files in the
//! repository's top-level `presets/` directory, embedded at build time).
//!
//! Units go in key names, never in values: `ost_write_bandwidth_gib_s = 3.26`,
//! not `ost_write_bandwidth = "3.5GB/s"`. Bandwidths are in GiB/s (2^30 bytes
//! per second), sizes in KiB or MiB, times in microseconds or seconds.
//!
//! Every value is checked before use against one schema (`config/schema.rs`): an
//! unknown section or key, a missing value, a string or a unit where a
//! number belongs, a bandwidth that is not positive, a count out of range:
//! each is a [`ConfigError`] that names the key, the problem and the fix.
//! Bad input never panics. After the check, serde fills the structs (with
//! `deny_unknown_fields` as a second guard), and the getters convert to the
//! integer units the simulator computes in: bytes, [`Bandwidth`]s and
//! [`Duration`]s in nanoseconds.
//!
//! This module describes hardware and tunables only; how they turn into
//! event times is the world model's business.

use lanefs_core::ost::SyncLockCancel;
use lanefs_core::suggest::edit_distance;
use lanefs_core::units::{Duration, OstIndex, PAGE_SIZE};
use serde::{Deserialize, Serialize};
use std::path::Path;
use toml::{Table, Value};

mod schema;
use schema::{check_table, did_you_mean};

/// Built-in cluster descriptions: (name, TOML text).
const PRESETS: &[(&str, &str)] = &[
    ("cray-xc40-24ost", include_str!("../../../presets/cray-xc40-24ost.toml")),
    ("frontier", include_str!("../../../presets/frontier.toml")),
    ("laptop", include_str!("../../../presets/laptop.toml")),
];

/// The built-in presets as (name, TOML text), for [`ClusterConfig::load`].
pub fn presets() -> &'static [(&'static str, &'static str)] {
    PRESETS
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;

/// A whole simulated cluster: one TOML file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub cluster: ClusterSection,
    pub compute: ComputeSection,
    pub client: ClientSection,
    pub storage: StorageSection,
    /// Optional; every value defaults to the compute network's.
    #[serde(default)]
    pub mpi: MpiSection,
    /// Optional: the mount, where I/O goes through it.
    #[serde(default, skip_serializing_if = "MountSection::is_absent")]
    pub mount: MountSection,
}

/// `[cluster]`: what this machine is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    pub name: String,
    /// Optional free text: the machine and where its numbers come from.
    #[serde(default)]
    pub description: String,
}

/// `[compute]`: the client nodes and the network they sit on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComputeSection {
    /// Number of compute nodes; each is one file system client.
    pub nodes: u32,
    /// Default number of tasks (MPI ranks) per node.
    pub ranks_per_node: u32,
    /// GiB/s one process copies into the client page cache: the ceiling of a
    /// single buffered writer.
    pub copy_bandwidth_gib_s: f64,
    /// GiB/s one node's network interface moves toward the servers or peers.
    pub injection_bandwidth_gib_s: f64,
    /// One-way latency of a message node to node or node to server, in
    /// microseconds, including LNet (routers, if any).
    pub network_latency_us: f64,
    /// Client CPU time per RPC sent, in microseconds; absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_per_rpc_us: Option<f64>,
    /// Client CPU time per read or write call of a rank (handing the call
    /// to the client's thread and its answer back), beyond the copy of its
    /// bytes, in microseconds; absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_per_call_us: Option<f64>,
    /// CPU time to hand a message to a thread that sleeps waiting for one
    /// (a context switch: the client's thread for a server's message, an
    /// OSS's network and service threads for a client's), when every core
    /// of the host is busy, in microseconds. A thread that is already
    /// running takes the next message for nothing. Absent means zero:
    /// messages cost only their per-message CPU time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_us: Option<f64>,
    /// The same when a core of the host is idle, so the hand-off wakes it
    /// first (in a virtual machine, a cross-core wake-up costs far more
    /// than one on a running core); default `handoff_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_idle_core_us: Option<f64>,
    /// The same for a thread that wakes on another core of the host while
    /// every core is busy (the wake-up crosses cores to one running
    /// something); default `handoff_us`. With every core busy, a woken
    /// thread is taken to land on any of the host's cores alike: on the
    /// waker's (`handoff_us`) one time in `cores`, on another (this) the
    /// rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_other_busy_core_us: Option<f64>,
    /// Client CPU time per page an I/O RPC carries (building and
    /// completing its pages), in microseconds; absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_per_page_us: Option<f64>,
    /// Client CPU time per lock it asks for (the request's grant matched
    /// and the lock kept, the lock given back later), beyond the messages
    /// that carry them, in microseconds; absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_per_lock_us: Option<f64>,
    /// GiB/s one core checksums a bulk RPC's bytes (the client before
    /// sending a write, after receiving a read); absent: no checksums.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_bandwidth_gib_s: Option<f64>,
    /// Threads a client has for blocking callbacks (Lustre's `ldlm_bl`):
    /// each holds one callback from its arrival until the lock's cancel
    /// leaves, so further callbacks wait. Absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_threads: Option<u32>,
    /// A node's cores: its ranks' copies and its client's CPU work take
    /// turns on them (and, with `[storage] runs_on = "compute-node"`, the
    /// servers' work too). Absent: no sharing, every copy and every piece
    /// of CPU work runs at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    /// Where the nodes run: each on a host of its own (`per-node`, the
    /// default), or all on `one` host whose `cores` they share, as the
    /// clients of a local cluster (one per rank) do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Hosts>,
    /// GiB/s one process copies while every core of the node copies (the
    /// node's memory bandwidth shared); default `copy_bandwidth_gib_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_bandwidth_every_core_gib_s: Option<f64>,
    /// Each aggregator starts each two-phase round's I/O after a random
    /// delay, uniform below this many microseconds: OS noise and uneven
    /// exchange completion, which the network model leaves out. Absent
    /// means zero; a sensitivity knob (no source gives a figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_jitter_us: Option<f64>,
    /// Client CPU time for each page frame a client writes into for the
    /// first time, beyond the copy, in microseconds: the fault that gives
    /// a new page of shared memory its memory (zeroed) before the copy
    /// lands in it. A client takes frames lowest first and frees them only
    /// when its cache drops pages, so the first frames of its arena are new
    /// (see [`lanefs_core::client::ClientConfig::arena_frames`]). Absent
    /// means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_first_touch_us: Option<f64>,
    /// How many of a node's processes writing one file copy into it at
    /// full speed at once: the client's lock on the file's attributes,
    /// which the KNL client talk found to stop one file's writes from
    /// going faster at about 16 processes. Absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_lock_writers: Option<u32>,
    /// How many of a node's processes copy into its page cache at full
    /// speed at once: the page cache's lock, which the same talk found to
    /// stop a node's copies from going faster at 32 to 64 processes.
    /// Absent: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_cache_lock_writers: Option<u32>,
}

/// `[client]`: Lustre client tunables, per client node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSection {
    /// Largest bulk RPC, in KiB (`max_pages_per_rpc` x page size).
    pub rpc_size_kib: u64,
    /// Write RPCs in flight per OST (`max_rpcs_in_flight`).
    pub rpcs_in_flight: u32,
    /// Dirty cache per OST before writers wait, in MiB (`max_dirty_mb`).
    pub max_dirty_mib_per_ost: u64,
    /// Unused locks the client keeps (`lru_size`, a fixed count here).
    pub lock_lru_size: u32,
    /// Client page cache budget, in MiB (`max_cached_mb`).
    pub cached_mib_max: u64,
    /// What a client does with a write its OST acknowledged but has not
    /// yet committed. `kept-until-commit`: it keeps the pages (their
    /// frames stay in use) until the OST says it committed them, and counts
    /// them against `cached_mib_max`, as Lustre's client does with its
    /// unstable pages and lanefs's network client does for replay; the
    /// OSTs then number their changes and commit them when a sync asks, 5 s
    /// after the first change (jbd2's commit interval) and, with
    /// `[storage] host_cache_commit_mib`, every time that much was written
    /// (lanefs's OST: 4 MiB). Absent (`dropped`): the
    /// pages are let go once acknowledged, and a commit is only what a sync
    /// waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unstable_pages: Option<UnstablePages>,
}

/// What a client keeps of acknowledged writes: `[client] unstable_pages`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnstablePages {
    /// Let go once the OST acknowledged them.
    #[default]
    Dropped,
    /// Kept until the OST committed them, against the cache budget.
    KeptUntilCommit,
}

/// The words of [`UnstablePages`], as the schema lists them.
pub(crate) const UNSTABLE_PAGES: [&str; 2] = ["dropped", "kept-until-commit"];

/// `[storage]`: object storage servers (OSS), their targets (OST) and the
/// lock service on them.
///
/// Read-modify-write penalty: a write that covers a RAID stripe
/// (`raid_stripe_kib`) only in part, being smaller than it or unaligned to
/// it, makes the OST read that whole stripe first, at
/// `rmw_read_bandwidth_gib_s`, before writing at `ost_write_bandwidth_gib_s`.
/// [`StorageSection::rmw_read_bytes`] gives the bytes to read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageSection {
    /// Number of object storage servers.
    pub oss_count: u32,
    /// OSTs served by each OSS.
    pub osts_per_oss: u32,
    /// GiB/s one OST writes (full RAID stripes, streaming).
    pub ost_write_bandwidth_gib_s: f64,
    /// GiB/s one OST reads (streaming).
    pub ost_read_bandwidth_gib_s: f64,
    /// GiB/s one OSS's network interface moves, shared by its OSTs.
    pub oss_network_bandwidth_gib_s: f64,
    /// OSS CPU time per I/O RPC, in microseconds, besides moving the data.
    pub rpc_service_overhead_us: f64,
    /// OSS CPU time per page an I/O RPC carries beyond its first, besides
    /// moving the data, in microseconds (its bulk's pages, the writeback of
    /// what it wrote). Absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_service_per_page_us: Option<f64>,
    /// Time from an I/O reaching the OST's disks to its completion, beyond
    /// the time its bytes take at the OST's bandwidth, in microseconds: the
    /// drives' positioning (seek, rotation). I/Os in flight overlap it, so a
    /// deep queue still streams at full bandwidth while one I/O at a time
    /// pays it every time. Absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ost_access_latency_us: Option<f64>,
    /// Which lock cancels wait until what was written under the lock is
    /// committed to the OST's journal (Lustre's `ofd.*.sync_lock_cancel`:
    /// `never`, `blocking` or `always`). Absent means `always`, Lustre's
    /// default for an OST whose journal commits asynchronously.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_lock_cancel: Option<SyncLockCancel>,
    /// Time of one commit of an OST's journal, in microseconds (commits run
    /// one at a time per OST). Absent means zero: commits take no time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_commit_us: Option<f64>,
    /// What a commit syncs: `journal` (the default), one commit of the
    /// OST's journal for every object it covers, as Lustre's ldiskfs
    /// commits its jbd2 transaction; or `each-object`, as lanefs's OSS does
    /// (`crates/server/src/oss.rs`): its OST's commit thread `fdatasync`s
    /// each object a commit covers in turn, each taking `journal_commit_us`
    /// besides its bytes still in the host's page cache, and then writes
    /// its commit point (`commit_point_us`), one job after the other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_syncs: Option<CommitSyncs>,
    /// Where an OSS's OSTs keep their data: `own` (the default), each on
    /// disks of its own, as a Lustre OST is its own RAID volume; or
    /// `shared`, all of them on one disk, as a local cluster's OST
    /// directories are: that disk serves their writes, write-backs, syncs,
    /// commits and reads one after another, at the OST bandwidths above
    /// (one OST alone has the whole disk; busy together, they share it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ost_disks: Option<OstDisks>,
    /// With `commit_syncs = "each-object"`: time of the write of an OST's
    /// commit point at the end of each commit (one block written in place
    /// and its `fdatasync`), in microseconds. Absent means zero; unused
    /// with `commit_syncs = "journal"`, and refused without `commit_syncs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_point_us: Option<f64>,
    /// CPU time of one `fdatasync` on the OSS's host beyond the bytes it
    /// writes back (the call, the journal commit it starts), in
    /// microseconds, for every sync an OST makes (with `commit_syncs =
    /// "each-object"`, each object's and its commit point's), on the host's
    /// cores where the servers share them (`runs_on = "compute-node"`).
    /// Absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_cpu_us: Option<f64>,
    /// GiB of the host's page cache written back per CPU second (the
    /// kernel's work, in the thread that syncs, to place the blocks and
    /// submit them to the disk), for every byte an OST's syncs and commits
    /// send from the host's page cache to the disk, charged as
    /// `sync_cpu_us` is. Absent: writeback takes no CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writeback_cpu_gib_s: Option<f64>,
    /// The metadata server's time per create, in microseconds, one request
    /// at a time (lanefs's MDS: one thread, a SQLite transaction committed
    /// to disk per create). Absent means zero: an open is a round trip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mds_create_us: Option<f64>,
    /// The same per open of a file that exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mds_open_us: Option<f64>,
    /// Full RAID stripe (data disks x chunk), in KiB.
    pub raid_stripe_kib: u64,
    /// GiB/s of the read half of a read-modify-write (see above).
    pub rmw_read_bandwidth_gib_s: f64,
    /// RPCs one OSS serves at once (`oss_max_threads`).
    pub oss_service_threads: u32,
    /// Lock server CPU time per lock request, in microseconds.
    pub lock_cpu_us: f64,
    /// Lock server CPU time per blocking callback it sends, in
    /// microseconds, on the same service threads; absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_cpu_us: Option<f64>,
    /// How an OST writes: `through` to the disk before it replies (the
    /// default, as Lustre's osd-ldiskfs submits a bulk write's pages to the
    /// disk and waits), or into the `host-cache`, the server host's page
    /// cache, as lanefs's OSTs (files) do: the reply after a copy, the
    /// disk's bandwidth paid in the background, and a sync (a commit, an
    /// fsync, a cancel that syncs) waits until what was written before it
    /// is on disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ost_writes: Option<OstWrites>,
    /// Where the servers run: on nodes of their own (`own-nodes`, the
    /// default), or on compute node 0 (`compute-node`), whose cores their
    /// CPU work then shares with the clients', as on one machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_on: Option<RunsOn>,
    /// How a write RPC's bulk reaches its OSS: over the network (`network`,
    /// the default), or from the client's memory where it is
    /// (`shared-memory`: lanefs's clients on the OSS's host, over Unix
    /// sockets, hand their page arena to the OSS, and a write RPC names its
    /// pages; `crates/server/src/oss.rs`). Shared, the bulk takes no
    /// network time: the OSS copies the pages into the file
    /// (`host_cache_write_gib_s`), mapping each the first time it reads it
    /// (`page_first_map_us`). Needs `runs_on = "compute-node"` and
    /// `[compute] hosts = "one"`. Reads come back over the network either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bulk: Option<WriteBulk>,
    /// With `ost_writes = "host-cache"`: GiB/s one core writes into the
    /// host's page cache (a buffered write into a new file, pages allocated
    /// as it goes). Absent: `[compute] copy_bandwidth_gib_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cache_write_gib_s: Option<f64>,
    /// With `ost_writes = "host-cache"`: MiB an OSS's host keeps dirty in
    /// its page cache before it writes back on its own (Linux's
    /// `vm.dirty_background_bytes`, or `dirty_background_ratio` of the
    /// memory available). Below it, what an OST wrote waits in the cache
    /// until a sync of its object (an fsync, a commit, a cancel that
    /// syncs) writes it back, and that sync waits for the disk; beyond it,
    /// the disk takes writes as they come. Absent: the disk always takes
    /// them as they come.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cache_background_mib: Option<u64>,
    /// With `host_cache_background_mib`: MiB an OST takes before it
    /// commits on its own, writing back every object it changed since the
    /// last commit (lanefs's OST: 4, `COMMIT_BYTES_DEFAULT`). Absent: only
    /// syncs write back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cache_commit_mib: Option<u64>,
    /// Server CPU time for each page of a client's shared memory the OSS
    /// reads for the first time, in microseconds: the fault that maps the
    /// page into the server (the bulk of a local client, which lanefs's
    /// OSS reads from the client's memory; see `page_first_touch_us`).
    /// Absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_first_map_us: Option<f64>,
    /// Time a lock holder has to answer a blocking callback before it is
    /// evicted, in seconds (`ldlm_enqueue_min` is the floor).
    pub callback_timeout_s: f64,
}

/// `[mpi]`: node-to-node MPI messages, where they differ from file system
/// traffic. Each absent value defaults to the `[compute]` one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MpiSection {
    /// One-way MPI message latency, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<f64>,
    /// GiB/s of one node's MPI traffic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gib_s: Option<f64>,
    /// CPU time a rank spends on each MPI message it sends or receives
    /// (LogP's overhead), in microseconds; absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_cpu_us: Option<f64>,
    /// A rank's time per `MPI_Test` of a request still pending, in
    /// microseconds: lanefs's ranks test a collective 64 times before they
    /// first sleep in it (with `wait` sleeping), and see it done at once
    /// meanwhile. Absent means zero: they sleep from the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_us: Option<f64>,
    /// The same where the MPI library yields the core in every test that
    /// finds nothing to do, as Open MPI does by default where a node runs
    /// more ranks than it has slots (`mpi_yield_when_idle`: `opal_progress`
    /// calls `sched_yield`), in microseconds. Where a node's ranks
    /// outnumber its cores it replaces `test_us`, and a waiting rank's
    /// tests (its 64 before it first sleeps, one after each sleep) are
    /// charged to the node's cores. Absent: tests there cost `test_us` and
    /// take no core time from others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_yield_us: Option<f64>,
    /// The eager limit, in bytes: a message above it moves only once its
    /// receiver tests for it (a rendezvous: Open MPI's ob1 over vader sends
    /// a first fragment that waits to be matched, and the receiver copies
    /// the rest; `btl_vader_eager_limit`, 4096 by default). It matters
    /// where ranks sleep in their waits (`wait`): a rank that polls tests
    /// at once. Absent: every message moves as soon as all are posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rendezvous_bytes: Option<u64>,
    /// How a rank waits for a collective, as lanefs's `LANEFS_MPI_WAIT`:
    /// `busy` (it polls, and its waiting is free), `sleep` (it sleeps
    /// between tests, 20 us doubling to 1 ms, and each wake-up costs its
    /// node's cores a thread's wake-up, `[compute] handoff_us`), or `auto`
    /// (the default: it sleeps where its node runs more ranks than
    /// `[compute] cores`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<MpiWait>,
}

/// How ranks wait in MPI: `[mpi] wait`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MpiWait {
    /// Sleep where a node runs more ranks than cores.
    #[default]
    Auto,
    Busy,
    Sleep,
}

/// The words of [`MpiWait`], as the schema lists them.
pub(crate) const MPI_WAIT: [&str; 3] = ["auto", "busy", "sleep"];

/// `[mount]`: the file system mounted (FUSE), where `-a POSIX` goes
/// through it. Absent: the ranks call the client directly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountSection {
    /// Time of one request through the mount beyond the client's own work
    /// (the kernel's round trip to the daemon), in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_us: Option<f64>,
    /// Largest write or read one request carries, in KiB (the mount's
    /// `max_write`); default 128.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_max_kib: Option<u64>,
    /// How the writes of a node's ranks to one file go through its mount:
    /// `one-at-a-time` (the default: lanefs's mount opens files with
    /// `FOPEN_DIRECT_IO` alone, and Linux's FUSE holds the file's inode
    /// lock for each write) or `parallel` (as with
    /// `FOPEN_PARALLEL_DIRECT_WRITES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_writes: Option<FileWrites>,
}

/// How writes to one file go through a mount: `[mount] file_writes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileWrites {
    /// One write at a time, under the file's inode lock.
    #[default]
    OneAtATime,
    Parallel,
}

/// The words of [`FileWrites`], as the schema lists them.
pub(crate) const FILE_WRITES: [&str; 2] = ["one-at-a-time", "parallel"];

/// Where a cluster's servers run: `[storage] runs_on`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunsOn {
    /// Servers of their own, as on a cluster.
    #[default]
    OwnNodes,
    /// Compute node 0, as on one machine running clients and servers.
    ComputeNode,
}

/// Where a cluster's compute nodes run: `[compute] hosts`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hosts {
    /// A host per node, as on a cluster.
    #[default]
    PerNode,
    /// One host for every node, as a local cluster's clients.
    One,
}

/// The words of [`Hosts`], as the schema lists them.
pub(crate) const HOSTS: [&str; 2] = ["per-node", "one"];

/// How an OST writes: `[storage] ost_writes`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OstWrites {
    /// To the disk before the reply.
    #[default]
    Through,
    /// Into the host's page cache; syncs wait for the disk.
    HostCache,
}

/// The words of [`OstWrites`], as the schema lists them.
pub(crate) const OST_WRITES: [&str; 2] = ["through", "host-cache"];

/// How a write's bulk reaches its OSS: `[storage] write_bulk`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteBulk {
    /// Over the node's and the OSS's network interfaces.
    #[default]
    Network,
    /// Read by the OSS from the client's shared memory.
    SharedMemory,
}

/// What an OST's commit syncs: `[storage] commit_syncs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitSyncs {
    /// One journal commit covers every object changed.
    #[default]
    Journal,
    /// Each object covered is synced on its own, then the commit point.
    EachObject,
}

/// The words of [`CommitSyncs`], as the schema lists them.
pub(crate) const COMMIT_SYNCS: [&str; 2] = ["journal", "each-object"];

/// Where an OSS's OSTs keep their data: `[storage] ost_disks`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OstDisks {
    /// Each OST on disks of its own.
    #[default]
    Own,
    /// Every OST of an OSS on one disk.
    Shared,
}

/// The words of [`OstDisks`], as the schema lists them.
pub(crate) const OST_DISKS: [&str; 2] = ["own", "shared"];

/// The words of [`WriteBulk`], as the schema lists them.
pub(crate) const WRITE_BULK: [&str; 2] = ["network", "shared-memory"];

/// The words of [`RunsOn`], as the schema lists them.
pub(crate) const RUNS_ON: [&str; 2] = ["own-nodes", "compute-node"];

/// A data rate. Always positive and finite when it comes from a checked
/// [`ClusterConfig`].
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Bandwidth {
    bytes_per_s: f64,
}

impl Bandwidth {
    pub fn from_gib_s(gib_s: f64) -> Bandwidth {
        debug_assert!(gib_s.is_finite() && gib_s > 0.0, "bandwidth {gib_s} GiB/s");
        Bandwidth { bytes_per_s: gib_s * GIB }
    }
    pub fn bytes_per_s(self) -> f64 {
        self.bytes_per_s
    }
    pub fn ns_per_byte(self) -> f64 {
        1e9 / self.bytes_per_s
    }
    /// Time to move `bytes` at this rate, rounded up to a whole nanosecond so
    /// that moving any data takes time.
    pub fn transfer_time(self, bytes: u64) -> Duration {
        // `as` saturates, so a degenerate rate gives a huge time, not a panic.
        Duration::from_ns((bytes as f64 * 1e9 / self.bytes_per_s).ceil() as u64)
    }
}

/// Converts a checked, finite, non-negative time to nanoseconds.
fn duration(value: f64, ns_per_unit: f64) -> Duration {
    debug_assert!(value.is_finite() && value >= 0.0, "time {value}");
    Duration::from_ns((value * ns_per_unit).round() as u64)
}

const NS_PER_US: f64 = 1e3;
const NS_PER_S: f64 = 1e9;

impl ComputeSection {
    pub fn copy_bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.copy_bandwidth_gib_s)
    }
    pub fn injection_bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.injection_bandwidth_gib_s)
    }
    pub fn network_latency(&self) -> Duration {
        duration(self.network_latency_us, NS_PER_US)
    }
    pub fn client_cpu_per_rpc(&self) -> Duration {
        duration(self.client_cpu_per_rpc_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn client_cpu_per_call(&self) -> Duration {
        duration(self.client_cpu_per_call_us.unwrap_or(0.0), NS_PER_US)
    }
    /// A wake-up's CPU time on the waker's busy core, on an idle core,
    /// and on another busy core.
    pub fn handoff(&self) -> (Duration, Duration, Duration) {
        let busy = self.handoff_us.unwrap_or(0.0);
        (
            duration(busy, NS_PER_US),
            duration(self.handoff_idle_core_us.unwrap_or(busy), NS_PER_US),
            duration(self.handoff_other_busy_core_us.unwrap_or(busy), NS_PER_US),
        )
    }
    pub fn round_jitter(&self) -> Duration {
        duration(self.round_jitter_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn client_cpu_per_page(&self) -> Duration {
        duration(self.client_cpu_per_page_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn client_cpu_per_lock(&self) -> Duration {
        duration(self.client_cpu_per_lock_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn page_first_touch(&self) -> Duration {
        duration(self.page_first_touch_us.unwrap_or(0.0), NS_PER_US)
    }
    /// Checksumming's rate, if the clients checksum.
    pub fn checksum_bandwidth(&self) -> Option<Bandwidth> {
        self.checksum_bandwidth_gib_s.map(Bandwidth::from_gib_s)
    }
    /// A process's copy rate while every core copies.
    pub fn copy_bandwidth_every_core(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.copy_bandwidth_every_core_gib_s.unwrap_or(self.copy_bandwidth_gib_s))
    }
}

impl MountSection {
    fn is_absent(&self) -> bool {
        *self == MountSection::default()
    }
    pub fn request_time(&self) -> Duration {
        duration(self.request_us.unwrap_or(0.0), NS_PER_US)
    }
    /// Bytes one request carries at most.
    pub fn request_max_bytes(&self) -> u64 {
        self.request_max_kib.unwrap_or(128) * KIB
    }
}

impl ClientSection {
    pub fn rpc_size_bytes(&self) -> u64 {
        self.rpc_size_kib * KIB
    }
    pub fn max_dirty_bytes_per_ost(&self) -> u64 {
        self.max_dirty_mib_per_ost * MIB
    }
    pub fn cached_bytes_max(&self) -> u64 {
        self.cached_mib_max * MIB
    }
    pub fn unstable_pages(&self) -> UnstablePages {
        self.unstable_pages.unwrap_or_default()
    }
}

impl StorageSection {
    /// Total OSTs, numbered `0..ost_count()`.
    pub fn ost_count(&self) -> u32 {
        self.oss_count * self.osts_per_oss
    }
    /// The OSS serving `ost`: OSTs are numbered consecutively per OSS (OSS 0
    /// has OSTs `0..osts_per_oss`), as a formatting script would number them.
    pub fn oss_of(&self, ost: OstIndex) -> u32 {
        debug_assert!(ost.0 < self.ost_count(), "{ost} of {} OSTs", self.ost_count());
        ost.0 / self.osts_per_oss
    }
    pub fn ost_write_bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.ost_write_bandwidth_gib_s)
    }
    pub fn ost_read_bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.ost_read_bandwidth_gib_s)
    }
    pub fn oss_network_bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.oss_network_bandwidth_gib_s)
    }
    pub fn rmw_read_bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.rmw_read_bandwidth_gib_s)
    }
    pub fn rpc_service_overhead(&self) -> Duration {
        duration(self.rpc_service_overhead_us, NS_PER_US)
    }
    pub fn rpc_service_per_page(&self) -> Duration {
        duration(self.rpc_service_per_page_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn ost_access_latency(&self) -> Duration {
        duration(self.ost_access_latency_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn sync_lock_cancel(&self) -> SyncLockCancel {
        self.sync_lock_cancel.unwrap_or(SyncLockCancel::Always)
    }
    pub fn journal_commit(&self) -> Duration {
        duration(self.journal_commit_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn ost_disks(&self) -> OstDisks {
        self.ost_disks.unwrap_or_default()
    }
    pub fn commit_syncs(&self) -> CommitSyncs {
        self.commit_syncs.unwrap_or_default()
    }
    pub fn mds_create(&self) -> Duration {
        duration(self.mds_create_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn mds_open(&self) -> Duration {
        duration(self.mds_open_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn commit_point(&self) -> Duration {
        duration(self.commit_point_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn sync_cpu(&self) -> Duration {
        duration(self.sync_cpu_us.unwrap_or(0.0), NS_PER_US)
    }
    /// The writeback's bytes per CPU second, if the description gives it.
    pub fn writeback_cpu_bandwidth(&self) -> Option<Bandwidth> {
        self.writeback_cpu_gib_s.map(Bandwidth::from_gib_s)
    }
    pub fn raid_stripe_bytes(&self) -> u64 {
        self.raid_stripe_kib * KIB
    }
    pub fn lock_cpu(&self) -> Duration {
        duration(self.lock_cpu_us, NS_PER_US)
    }
    pub fn callback_cpu(&self) -> Duration {
        duration(self.callback_cpu_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn runs_on(&self) -> RunsOn {
        self.runs_on.unwrap_or_default()
    }
    pub fn write_bulk(&self) -> WriteBulk {
        self.write_bulk.unwrap_or_default()
    }
    /// The host's page cache write rate, if the description gives one.
    pub fn host_cache_write_bandwidth(&self) -> Option<Bandwidth> {
        self.host_cache_write_gib_s.map(Bandwidth::from_gib_s)
    }
    /// Dirty bytes an OSS's host keeps before writing back on its own.
    pub fn host_cache_background_bytes(&self) -> Option<u64> {
        self.host_cache_background_mib.map(|mib| mib.saturating_mul(MIB))
    }
    /// Bytes an OST takes before it commits on its own.
    pub fn host_cache_commit_bytes(&self) -> Option<u64> {
        self.host_cache_commit_mib.map(|mib| mib.saturating_mul(MIB))
    }
    pub fn page_first_map(&self) -> Duration {
        duration(self.page_first_map_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn callback_timeout(&self) -> Duration {
        duration(self.callback_timeout_s, NS_PER_S)
    }

    /// Bytes an OST reads before writing `length_bytes` at `offset_bytes` of
    /// an object: every RAID stripe the write covers only in part is read
    /// whole. Zero for a write of whole, aligned stripes.
    pub fn rmw_read_bytes(&self, offset_bytes: u64, length_bytes: u64) -> u64 {
        if length_bytes == 0 {
            return 0;
        }
        partial_stripe_bytes(offset_bytes, length_bytes, self.raid_stripe_bytes())
    }
}

impl ClusterConfig {
    /// Parses and checks a cluster description. `origin` names the text in
    /// errors (a file path, or `preset laptop`).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<ClusterConfig, ConfigError> {
        let table: Table = text.parse().map_err(|error: toml::de::Error| ConfigError::Syntax {
            origin: origin.into(),
            message: error.to_string(),
        })?;
        check_table(&table, origin)?;
        table.try_into().map_err(|error: toml::de::Error| ConfigError::Syntax {
            origin: origin.into(),
            message: error.message().to_string(),
        })
    }

    /// Loads a preset by name (see [`presets`]) or a TOML file by path.
    pub fn load(preset_name_or_path: &str) -> Result<ClusterConfig, ConfigError> {
        let (text, origin) = ClusterConfig::source(preset_name_or_path)?;
        ClusterConfig::from_toml_str(&text, &origin)
    }

    /// As [`ClusterConfig::load`], with values replaced first: each override
    /// is `("section.key", "value")`, the value in TOML syntax (a bare word
    /// is taken as a string). The result is checked as a file would be, so a
    /// wrong key or value gets the same clear error.
    pub fn load_with(preset_name_or_path: &str, overrides: &[(String, String)]) -> Result<ClusterConfig, ConfigError> {
        let (text, origin) = ClusterConfig::source(preset_name_or_path)?;
        if overrides.is_empty() {
            return ClusterConfig::from_toml_str(&text, &origin);
        }
        let syntax = |message: String| ConfigError::Syntax { origin: origin.clone(), message };
        let mut table: Table = text.parse().map_err(|e: toml::de::Error| syntax(e.to_string()))?;
        for (path, value) in overrides {
            let Some((section, key)) = path.split_once('.') else {
                return Err(syntax(format!(
                    "override {path}={value}: name the key with its section, e.g. storage.lock_cpu_us=200"
                )));
            };
            let value = match format!("v = {value}").parse::<Table>() {
                Ok(mut t) => t.remove("v").expect("just parsed"),
                Err(_) => toml::Value::String(value.clone()),
            };
            let entry = table.entry(section.to_string()).or_insert_with(|| toml::Value::Table(Table::new()));
            let toml::Value::Table(section_table) = entry else {
                return Err(syntax(format!("override {path}: {section} is not a section")));
            };
            section_table.insert(key.to_string(), value);
        }
        let names: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let text = toml::to_string(&table).map_err(|e| syntax(e.to_string()))?;
        ClusterConfig::from_toml_str(&text, &format!("{origin} with {}", names.join(", ")))
    }

    /// The TOML text of a preset or file, and how to name it in errors.
    fn source(preset_name_or_path: &str) -> Result<(String, String), ConfigError> {
        if let Some((name, text)) = PRESETS.iter().find(|(name, _)| *name == preset_name_or_path) {
            return Ok((text.to_string(), format!("preset {name}")));
        }
        let path = Path::new(preset_name_or_path);
        let looks_like_path = preset_name_or_path.ends_with(".toml")
            || preset_name_or_path.contains('/')
            || preset_name_or_path.contains(std::path::MAIN_SEPARATOR)
            || path.exists();
        if !looks_like_path {
            let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
            return Err(ConfigError::UnknownPreset {
                name: preset_name_or_path.into(),
                hint: did_you_mean(preset_name_or_path, &names),
                presets: names.join(", "),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: preset_name_or_path.into(),
            presets: preset_names(),
            source,
        })?;
        Ok((text, preset_name_or_path.to_string()))
    }

    /// Checks a configuration built or changed in code, such as a preset with
    /// one value swept, against the same rules as a file.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let origin = format!("cluster {}", self.cluster.name);
        let table = Table::try_from(self)
            .map_err(|error| ConfigError::Syntax { origin: origin.clone(), message: error.to_string() })?;
        check_table(&table, &origin)
    }

    /// The configuration as TOML, to record next to a run's results.
    pub fn to_toml(&self) -> String {
        // Every field is a string, a number or an optional number, which TOML
        // always represents.
        toml::to_string(self).expect("a cluster configuration is always representable in TOML")
    }

    /// Total OSTs, numbered `0..ost_count()`.
    pub fn ost_count(&self) -> u32 {
        self.storage.ost_count()
    }
    /// Total ranks at the default `ranks_per_node`.
    pub fn rank_count(&self) -> u64 {
        u64::from(self.compute.nodes) * u64::from(self.compute.ranks_per_node)
    }
    /// One-way MPI message latency between nodes, in microseconds: `[mpi]
    /// latency_us`, else `[compute] network_latency_us`.
    pub fn mpi_latency_us(&self) -> f64 {
        self.mpi.latency_us.unwrap_or(self.compute.network_latency_us)
    }
    /// One node's MPI bandwidth in GiB/s: `[mpi] bandwidth_gib_s`, else
    /// `[compute] injection_bandwidth_gib_s`.
    pub fn mpi_bandwidth_gib_s(&self) -> f64 {
        self.mpi.bandwidth_gib_s.unwrap_or(self.compute.injection_bandwidth_gib_s)
    }
    /// [`mpi_latency_us`](Self::mpi_latency_us) as a [`Duration`].
    pub fn mpi_latency(&self) -> Duration {
        duration(self.mpi_latency_us(), NS_PER_US)
    }
    /// [`mpi_bandwidth_gib_s`](Self::mpi_bandwidth_gib_s) as a [`Bandwidth`].
    pub fn mpi_bandwidth(&self) -> Bandwidth {
        Bandwidth::from_gib_s(self.mpi_bandwidth_gib_s())
    }
    /// A rank's CPU time per MPI message (`[mpi] message_cpu_us`, else zero).
    pub fn mpi_message_cpu(&self) -> Duration {
        duration(self.mpi.message_cpu_us.unwrap_or(0.0), NS_PER_US)
    }
    /// A rank's time per `MPI_Test` (`[mpi] test_us`, else zero).
    pub fn mpi_test(&self) -> Duration {
        duration(self.mpi.test_us.unwrap_or(0.0), NS_PER_US)
    }
    /// A rank's time per `MPI_Test` that yields the core (`[mpi]
    /// test_yield_us`, else `None`).
    pub fn mpi_test_yield(&self) -> Option<Duration> {
        self.mpi.test_yield_us.map(|us| duration(us, NS_PER_US))
    }
}

/// A cluster description that cannot be used, with what to do about it.
/// Each message names the file or preset, the key, the problem and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The text is not TOML at all; the message carries the line and column.
    #[error("{origin}: not valid TOML: {message}")]
    Syntax { origin: String, message: String },
    #[error("{origin}: unknown section [{section}]{hint}; the sections are {valid}")]
    UnknownSection { origin: String, section: String, hint: String, valid: String },
    #[error("{origin}: `{section}` is a section, not a value; write `[{section}]` on a line of its own, then its `key = value` lines")]
    NotASection { origin: String, section: &'static str },
    #[error("{origin}: section [{section}] is missing; add it with its keys: {keys}")]
    MissingSection { origin: String, section: &'static str, keys: String },
    #[error("{origin}: unknown key `{key}` in [{section}]{hint}; the keys of [{section}] are {valid}")]
    UnknownKey { origin: String, section: &'static str, key: String, hint: String, valid: String },
    #[error("{origin}: key `{key}` is missing from [{section}]; add `{key} = {example}` ({about})")]
    MissingKey { origin: String, section: &'static str, key: &'static str, example: &'static str, about: &'static str },
    /// A value of the wrong type, sign, range or form (boxed: it is the
    /// largest variant, and errors should stay cheap to return).
    #[error("{0}")]
    InvalidValue(Box<InvalidValue>),
    #[error("unknown preset `{name}`{hint}; the presets are {presets}, or give the path of a .toml file")]
    UnknownPreset { name: String, hint: String, presets: String },
    #[error("cannot read cluster description `{path}`: {source}; give the path of a readable .toml file or a preset ({presets})")]
    Read {
        path: String,
        presets: String,
        #[source]
        source: std::io::Error,
    },
}

/// A value that does not suit its key: [`ConfigError::InvalidValue`].
#[derive(Debug, thiserror::Error)]
#[error("{origin}: [{section}] {key} = {value}: {problem}; {fix}")]
pub struct InvalidValue {
    pub origin: String,
    pub section: &'static str,
    pub key: &'static str,
    /// The value as written, in TOML.
    pub value: String,
    pub problem: String,
    pub fix: String,
}

fn preset_names() -> String {
    PRESETS.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// Bytes of the RAID stripes (`stripe` bytes each) that `[offset, offset +
/// len)` covers only in part: each must be read before it is rewritten.
pub fn partial_stripe_bytes(offset: u64, len: u64, stripe: u64) -> u64 {
    if stripe == 0 || len == 0 {
        return 0;
    }
    let end = offset.saturating_add(len);
    let (first, last) = (offset / stripe, (end - 1) / stripe);
    let head_partial = !offset.is_multiple_of(stripe);
    let tail_partial = !end.is_multiple_of(stripe);
    let partial = if first == last {
        u64::from(head_partial || tail_partial)
    } else {
        u64::from(head_partial) + u64::from(tail_partial)
    };
    partial * stripe
}
