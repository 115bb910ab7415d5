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
//! Every value is checked before use against one schema (`SCHEMA` below): an
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

use lanefs_core::suggest::edit_distance;
use lanefs_core::units::{Duration, OstIndex, PAGE_SIZE};
use serde::{Deserialize, Serialize};
use std::path::Path;
use toml::{Table, Value};

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
}

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
    /// Time from an I/O reaching the OST's disks to its completion, beyond
    /// the time its bytes take at the OST's bandwidth, in microseconds: the
    /// drives' positioning (seek, rotation). I/Os in flight overlap it, so a
    /// deep queue still streams at full bandwidth while one I/O at a time
    /// pays it every time. Absent means zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ost_access_latency_us: Option<f64>,
    /// Full RAID stripe (data disks x chunk), in KiB.
    pub raid_stripe_kib: u64,
    /// GiB/s of the read half of a read-modify-write (see above).
    pub rmw_read_bandwidth_gib_s: f64,
    /// RPCs one OSS serves at once (`oss_max_threads`).
    pub oss_service_threads: u32,
    /// Lock server CPU time per lock request, in microseconds.
    pub lock_cpu_us: f64,
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
}

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
    pub fn ost_access_latency(&self) -> Duration {
        duration(self.ost_access_latency_us.unwrap_or(0.0), NS_PER_US)
    }
    pub fn raid_stripe_bytes(&self) -> u64 {
        self.raid_stripe_kib * KIB
    }
    pub fn lock_cpu(&self) -> Duration {
        duration(self.lock_cpu_us, NS_PER_US)
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

// ---------------------------------------------------------------------------
// Schema: the one list of sections and keys, with their rules.
// ---------------------------------------------------------------------------

/// What a key's value must be.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A non-empty string.
    Text,
    /// A whole number in `min..=max` and a multiple of `step`.
    Count { min: u64, max: u64, step: u64 },
    /// A finite number greater than zero and at most `max`.
    Positive { max: f64 },
    /// A finite number from zero to `max`.
    NonNegative { max: f64 },
}

#[derive(Debug)]
struct Key {
    name: &'static str,
    kind: Kind,
    /// Unit of the value, as a reader would say it.
    unit: &'static str,
    required: bool,
    /// A plausible value, shown in fixes.
    example: &'static str,
    about: &'static str,
}

#[derive(Debug)]
struct Section {
    name: &'static str,
    required: bool,
    keys: &'static [Key],
}

/// Bounds that keep derived values in range (`u32` ids, `u64` bytes and
/// nanoseconds) while admitting any machine of today with room to spare.
const NODES_MAX: u64 = 1 << 20;
const RANKS_PER_NODE_MAX: u64 = 1 << 10;
/// Lustre's protocol maximum bulk RPC, 64 MiB.
const RPC_SIZE_KIB_MAX: u64 = 64 << 10;
/// `OSC_MAX_RIF_MAX`.
const RPCS_IN_FLIGHT_MAX: u64 = 256;
const SIZE_MIB_MAX: u64 = 1 << 30;
const LOCKS_MAX: u64 = 1 << 24;
const OSS_COUNT_MAX: u64 = 1 << 16;
const OSTS_PER_OSS_MAX: u64 = 1 << 10;
const RAID_STRIPE_KIB_MAX: u64 = 1 << 20;
const THREADS_MAX: u64 = 1 << 16;
/// One PiB/s per device: far above any hardware, far below overflow.
const BANDWIDTH_GIB_S_MAX: f64 = 1e6;
/// 1,000 seconds.
const LATENCY_US_MAX: f64 = 1e9;
/// About 11.6 days.
const TIMEOUT_S_MAX: f64 = 1e6;

const PAGE_KIB: u64 = PAGE_SIZE / KIB;

const fn key(name: &'static str, kind: Kind, unit: &'static str, example: &'static str, about: &'static str) -> Key {
    Key { name, kind, unit, required: true, example, about }
}

const fn optional(key: Key) -> Key {
    Key { required: false, ..key }
}

const fn count(min: u64, max: u64) -> Kind {
    Kind::Count { min, max, step: 1 }
}

const BANDWIDTH: Kind = Kind::Positive { max: BANDWIDTH_GIB_S_MAX };
const LATENCY: Kind = Kind::NonNegative { max: LATENCY_US_MAX };

/// Every section and key a cluster description may hold.
const SCHEMA: &[Section] = &[
    Section {
        name: "cluster",
        required: true,
        keys: &[
            key("name", Kind::Text, "", "\"my-cluster\"", "a short name for the machine"),
            optional(key("description", Kind::Text, "", "\"...\"", "the machine and the sources of its numbers")),
        ],
    },
    Section {
        name: "compute",
        required: true,
        keys: &[
            key("nodes", count(1, NODES_MAX), "nodes", "192", "compute nodes, one file system client each"),
            key("ranks_per_node", count(1, RANKS_PER_NODE_MAX), "ranks", "4", "default MPI ranks per node"),
            key("copy_bandwidth_gib_s", BANDWIDTH, "GiB/s", "1.2", "one process copying into the page cache"),
            key("injection_bandwidth_gib_s", BANDWIDTH, "GiB/s", "5.1", "one node's network interface"),
            key("network_latency_us", LATENCY, "microseconds", "10", "one-way message latency, with LNet"),
            optional(key("client_cpu_per_rpc_us", LATENCY, "microseconds", "5", "client CPU time per RPC")),
        ],
    },
    Section {
        name: "client",
        required: true,
        keys: &[
            key(
                "rpc_size_kib",
                Kind::Count { min: PAGE_KIB, max: RPC_SIZE_KIB_MAX, step: PAGE_KIB },
                "KiB",
                "1024",
                "largest bulk RPC",
            ),
            key("rpcs_in_flight", count(1, RPCS_IN_FLIGHT_MAX), "RPCs", "8", "RPCs in flight per OST"),
            key("max_dirty_mib_per_ost", count(1, SIZE_MIB_MAX), "MiB", "32", "dirty cache per OST"),
            key("lock_lru_size", count(1, LOCKS_MAX), "locks", "6400", "unused locks kept per client"),
            key("cached_mib_max", count(1, SIZE_MIB_MAX), "MiB", "65536", "client page cache budget"),
        ],
    },
    Section {
        name: "storage",
        required: true,
        keys: &[
            key("oss_count", count(1, OSS_COUNT_MAX), "servers", "24", "object storage servers"),
            key("osts_per_oss", count(1, OSTS_PER_OSS_MAX), "OSTs", "1", "OSTs per OSS"),
            key("ost_write_bandwidth_gib_s", BANDWIDTH, "GiB/s", "3.26", "one OST writing"),
            key("ost_read_bandwidth_gib_s", BANDWIDTH, "GiB/s", "3.26", "one OST reading"),
            key("oss_network_bandwidth_gib_s", BANDWIDTH, "GiB/s", "6.3", "one OSS's network interface"),
            key("rpc_service_overhead_us", LATENCY, "microseconds", "85", "OSS CPU time per I/O RPC"),
            optional(key(
                "ost_access_latency_us",
                LATENCY,
                "microseconds",
                "4170",
                "disk positioning time per I/O, overlapped by I/Os in flight",
            )),
            key(
                "raid_stripe_kib",
                Kind::Count { min: PAGE_KIB, max: RAID_STRIPE_KIB_MAX, step: PAGE_KIB },
                "KiB",
                "1024",
                "full RAID stripe; partial-stripe writes read it first",
            ),
            key("rmw_read_bandwidth_gib_s", BANDWIDTH, "GiB/s", "3.26", "read half of a read-modify-write"),
            key("oss_service_threads", count(1, THREADS_MAX), "threads", "512", "RPCs one OSS serves at once"),
            key("lock_cpu_us", LATENCY, "microseconds", "85", "lock server CPU time per lock request"),
            key(
                "callback_timeout_s",
                Kind::NonNegative { max: TIMEOUT_S_MAX },
                "seconds",
                "100",
                "time to answer a blocking callback before eviction",
            ),
        ],
    },
    Section {
        name: "mpi",
        required: false,
        keys: &[
            optional(key("latency_us", LATENCY, "microseconds", "1.5", "one-way MPI latency; default [compute]'s")),
            optional(key(
                "bandwidth_gib_s",
                BANDWIDTH,
                "GiB/s",
                "9.3",
                "one node's MPI bandwidth; default [compute]'s",
            )),
        ],
    },
];

/// Checks a parsed description against [`SCHEMA`]; the first problem found,
/// in schema order, is the error.
fn check_table(table: &Table, origin: &str) -> Result<(), ConfigError> {
    let section_names: Vec<&str> = SCHEMA.iter().map(|section| section.name).collect();
    for (name, value) in table {
        let Some(section) = SCHEMA.iter().find(|section| section.name == name) else {
            let hint = match SCHEMA.iter().find(|section| section.keys.iter().any(|key| key.name == name)) {
                Some(owner) => format!(" (`{name}` is a key: put it under [{}])", owner.name),
                None => did_you_mean(name, &section_names),
            };
            return Err(ConfigError::UnknownSection {
                origin: origin.into(),
                section: name.clone(),
                hint,
                valid: section_names.join(", "),
            });
        };
        let Value::Table(keys) = value else {
            return Err(ConfigError::NotASection { origin: origin.into(), section: section.name });
        };
        check_section(section, keys, origin)?;
    }
    for section in SCHEMA.iter().filter(|section| section.required) {
        if !table.contains_key(section.name) {
            return Err(ConfigError::MissingSection {
                origin: origin.into(),
                section: section.name,
                keys: key_names(section, true).join(", "),
            });
        }
    }
    Ok(())
}

fn key_names(section: &Section, required_only: bool) -> Vec<&'static str> {
    section.keys.iter().filter(|key| key.required || !required_only).map(|key| key.name).collect()
}

fn check_section(section: &Section, table: &Table, origin: &str) -> Result<(), ConfigError> {
    let valid = key_names(section, false);
    for name in table.keys() {
        if section.keys.iter().any(|key| key.name == name) {
            continue;
        }
        let owner = SCHEMA.iter().find(|other| other.keys.iter().any(|key| key.name == name));
        let hint = match owner {
            Some(owner) => format!(" (it belongs in [{}])", owner.name),
            None => did_you_mean(name, &valid),
        };
        return Err(ConfigError::UnknownKey {
            origin: origin.into(),
            section: section.name,
            key: name.clone(),
            hint,
            valid: valid.join(", "),
        });
    }
    for key in section.keys {
        match table.get(key.name) {
            Some(value) => check_value(key, value).map_err(|(problem, fix)| {
                ConfigError::InvalidValue(Box::new(InvalidValue {
                    origin: origin.into(),
                    section: section.name,
                    key: key.name,
                    value: value.to_string(),
                    problem,
                    fix,
                }))
            })?,
            None if key.required => {
                return Err(ConfigError::MissingKey {
                    origin: origin.into(),
                    section: section.name,
                    key: key.name,
                    example: key.example,
                    about: key.about,
                })
            }
            None => {}
        }
    }
    Ok(())
}

/// `Err((problem, fix))` when `value` does not suit `key`.
fn check_value(key: &Key, value: &Value) -> Result<(), (String, String)> {
    let name = key.name;
    let example = format!("`{name} = {}`", key.example);
    if let Kind::Text = key.kind {
        return match value {
            Value::String(text) if !text.trim().is_empty() => Ok(()),
            Value::String(_) => Err(("the text is empty".into(), format!("write something, like {example}"))),
            other => {
                Err((format!("expected quoted text, found {}", type_name(other)), format!("quote it, like {example}")))
            }
        };
    }
    let number = match value {
        Value::Integer(integer) => *integer as f64,
        Value::Float(float) => *float,
        Value::String(text) => return Err(string_for_number(key, text)),
        other => {
            return Err((
                format!("expected a number of {}, found {}", key.unit, type_name(other)),
                format!("write a bare number, like {example}"),
            ))
        }
    };
    if !number.is_finite() {
        return Err((
            "the value must be a finite number".into(),
            format!("write a number of {}, like {example}", key.unit),
        ));
    }
    match key.kind {
        Kind::Text => unreachable!("text was checked above"),
        Kind::Count { min, max, step } => {
            let Value::Integer(integer) = *value else {
                return Err(("expected a whole number".into(), format!("drop the fraction, like {example}")));
            };
            if integer < 0 || (integer as u64) < min || integer as u64 > max {
                return Err((
                    format!("must be between {min} and {max} {}", key.unit),
                    format!("give a value in that range, like {example}"),
                ));
            }
            if !(integer as u64).is_multiple_of(step) {
                return Err((
                    format!("must be a multiple of {step} {} (the {PAGE_SIZE}-byte page)", key.unit),
                    format!("round it to a multiple of {step}, like {example}"),
                ));
            }
        }
        Kind::Positive { max } => {
            if number <= 0.0 {
                return Err((
                    format!(
                        "must be greater than zero (a rate in {} that moves no data stalls the simulation)",
                        key.unit
                    ),
                    format!("give the rate in {}, like {example}", key.unit),
                ));
            }
            if number > max {
                return Err((
                    format!("is above the limit of {max} {}", key.unit),
                    format!("check the unit: {}", key.unit),
                ));
            }
        }
        Kind::NonNegative { max } => {
            if number < 0.0 {
                return Err((
                    "a time cannot be negative".into(),
                    format!("give it in {}, 0 for none, like {example}", key.unit),
                ));
            }
            if number > max {
                return Err((
                    format!("is above the limit of {max} {}", key.unit),
                    format!("check the unit: {}", key.unit),
                ));
            }
        }
    }
    Ok(())
}

/// Problem and fix for a string where a number belongs: usually a unit
/// written into the value (`"10GB"`), sometimes a quoted number (`"10"`).
fn string_for_number(key: &Key, text: &str) -> (String, String) {
    let trimmed = text.trim();
    let number_len = trimmed
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == '_'))
        .map_or(trimmed.len(), |(index, _)| index);
    let (number, suffix) = trimmed.split_at(number_len);
    let name = key.name;
    let unit = key.unit;
    if number.parse::<f64>().is_err() {
        return (
            format!("expected a number of {unit}, found the text \"{text}\""),
            format!("write a bare number, like `{name} = {}`", key.example),
        );
    }
    if suffix.trim().is_empty() {
        return ("a quoted number is text, not a number".into(), format!("remove the quotes: `{name} = {number}`"));
    }
    (
        format!("\"{}\" is a unit, and units go in the key name, not the value", suffix.trim()),
        format!("write a bare number of {unit}, converting if needed, like `{name} = {}`", key.example),
    )
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "text",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "a list",
        Value::Table(_) => "a table",
    }
}

/// `" (did you mean `x`?)"` for the closest name within a few edits, else "".
fn did_you_mean(given: &str, names: &[&str]) -> String {
    let closest = names
        .iter()
        .map(|name| (edit_distance(given, name), *name))
        .filter(|&(distance, name)| distance <= 3.max(name.len() / 4))
        .min();
    closest.map_or_else(String::new, |(_, name)| format!(" (did you mean `{name}`?)"))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A description with every key of the schema at its example value.
    fn every_key() -> Table {
        let mut text = String::new();
        for section in SCHEMA {
            text += &format!("[{}]\n", section.name);
            for key in section.keys {
                text += &format!("{} = {}\n", key.name, key.example);
            }
        }
        text.parse().expect("examples are valid TOML")
    }

    #[test]
    fn schema_and_structs_name_the_same_keys() {
        let table = every_key();
        check_table(&table, "test").expect("every example passes its own rule");
        // deny_unknown_fields: every schema key is a field.
        let config: ClusterConfig = table.clone().try_into().expect("every schema key is a field");
        // Serialization emits every field that is set, and all are set.
        let round_trip = Table::try_from(&config).expect("serializable");
        let names = |table: &Table| -> Vec<(String, Vec<String>)> {
            let keys = |value: &Value| value.as_table().expect("a section").keys().cloned().collect();
            table.iter().map(|(section, value)| (section.clone(), keys(value))).collect()
        };
        assert_eq!(names(&round_trip), names(&table), "every field is a schema key");
        check_table(&round_trip, "round trip").expect("a checked configuration stays valid");
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("nodes", "nodes"), 0);
        assert_eq!(edit_distance("node", "nodes"), 1);
        assert_eq!(edit_distance("ost_write_bandwidth_gb_s", "ost_write_bandwidth_gib_s"), 1);
        assert_eq!(did_you_mean("laptp", &["laptop", "frontier"]), " (did you mean `laptop`?)");
        assert_eq!(did_you_mean("zzzzzzzz", &["laptop", "frontier"]), "");
    }
}
