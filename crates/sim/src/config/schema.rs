//! The schema of a cluster description: the one list of sections and keys,
//! with their rules, and the checks that hold a parsed description to it.

use super::*;

/// What a key's value must be.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A non-empty string.
    Text,
    /// One of these words.
    Choice(&'static [&'static str]),
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
const CORES_MAX: u64 = 1 << 16;
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
            optional(key(
                "client_cpu_per_call_us",
                LATENCY,
                "microseconds",
                "4",
                "client CPU time per read or write call, beyond its copy",
            )),
            optional(key(
                "handoff_us",
                LATENCY,
                "microseconds",
                "1.5",
                "CPU time to wake a sleeping thread for a message, on a core that is busy",
            )),
            optional(key(
                "handoff_idle_core_us",
                LATENCY,
                "microseconds",
                "30",
                "the same on an idle core (which it wakes first); default handoff_us",
            )),
            optional(key(
                "handoff_other_busy_core_us",
                LATENCY,
                "microseconds",
                "20",
                "the same on another core while every core is busy (a woken thread lands on the waker's core one time \
                 in `cores`, on another the rest); default handoff_us",
            )),
            optional(key(
                "client_cpu_per_page_us",
                LATENCY,
                "microseconds",
                "0.5",
                "client CPU time per page an I/O RPC carries",
            )),
            optional(key(
                "client_cpu_per_lock_us",
                LATENCY,
                "microseconds",
                "5",
                "client CPU time per lock it asks for and gives back, beyond its messages",
            )),
            optional(key(
                "checksum_bandwidth_gib_s",
                BANDWIDTH,
                "GiB/s",
                "2.5",
                "one core checksumming bulk RPCs; absent: no checksums",
            )),
            optional(key(
                "callback_threads",
                count(1, THREADS_MAX),
                "threads",
                "2",
                "a client's blocking-callback threads (ldlm_bl); absent: no bound",
            )),
            optional(key(
                "cores",
                count(1, CORES_MAX),
                "cores",
                "32",
                "a node's cores, shared by its ranks' copies and its CPU work; absent: no sharing",
            )),
            optional(key(
                "hosts",
                Kind::Choice(&HOSTS),
                "",
                "\"one\"",
                "per-node (default): each node a host of its own; one: every node on one host, sharing its cores",
            )),
            optional(key(
                "copy_bandwidth_every_core_gib_s",
                BANDWIDTH,
                "GiB/s",
                "0.9",
                "one process's copy rate while every core copies; default copy_bandwidth_gib_s",
            )),
            optional(key(
                "round_jitter_us",
                LATENCY,
                "microseconds",
                "1000",
                "random delay of each aggregator's start of each two-phase round",
            )),
            optional(key(
                "page_first_touch_us",
                LATENCY,
                "microseconds",
                "2",
                "client CPU time per page frame written for the first time (its fault), beyond the copy",
            )),
            optional(key(
                "file_lock_writers",
                count(1, RANKS_PER_NODE_MAX),
                "processes",
                "16",
                "a node's processes writing one file that copy at full speed at once (the file's attribute lock); absent: no bound",
            )),
            optional(key(
                "page_cache_lock_writers",
                count(1, RANKS_PER_NODE_MAX),
                "processes",
                "32",
                "a node's processes copying into its page cache at full speed at once (the page cache's lock); absent: no bound",
            )),
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
            optional(key(
                "unstable_pages",
                Kind::Choice(&UNSTABLE_PAGES),
                "",
                "\"kept-until-commit\"",
                "acknowledged writes kept until their OST commits them (Lustre's unstable pages); default dropped",
            )),
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
                "rpc_service_per_page_us",
                LATENCY,
                "microseconds",
                "0.2",
                "OSS CPU time per page an I/O RPC carries beyond its first",
            )),
            optional(key(
                "ost_access_latency_us",
                LATENCY,
                "microseconds",
                "4170",
                "disk positioning time per I/O, overlapped by I/Os in flight",
            )),
            optional(key(
                "sync_lock_cancel",
                Kind::Choice(&SyncLockCancel::NAMES),
                "",
                "\"always\"",
                "which write-lock cancels wait for a journal commit (Lustre's ofd sync_lock_cancel); default always",
            )),
            optional(key(
                "journal_commit_us",
                LATENCY,
                "microseconds",
                "8320",
                "time of one commit of an OST's journal, one at a time per OST",
            )),
            optional(key(
                "ost_disks",
                Kind::Choice(&OST_DISKS),
                "",
                "\"shared\"",
                "own (default): each OST on disks of its own; shared: an OSS's OSTs on one disk, which takes their I/O in turn",
            )),
            optional(key(
                "commit_syncs",
                Kind::Choice(&COMMIT_SYNCS),
                "",
                "\"each-object\"",
                "journal (default): a commit is one journal commit; each-object: lanefs's OSS syncs each object in turn",
            )),
            optional(key(
                "commit_point_us",
                LATENCY,
                "microseconds",
                "180",
                "each-object: writing an OST's commit point at the end of a commit; default 0",
            )),
            optional(key(
                "sync_cpu_us",
                LATENCY,
                "microseconds",
                "20",
                "CPU time of one of an OST's fdatasyncs on a host whose cores the servers share; default 0",
            )),
            optional(key(
                "writeback_cpu_gib_s",
                BANDWIDTH,
                "GiB/s",
                "20",
                "bytes an OST's host writes back to its disk per CPU second, on cores the servers share; default none",
            )),
            optional(key(
                "mds_create_us",
                LATENCY,
                "microseconds",
                "1000",
                "the metadata server's time per create, one at a time; default 0",
            )),
            optional(key(
                "mds_open_us",
                LATENCY,
                "microseconds",
                "100",
                "the metadata server's time per open of a file that exists, one at a time; default 0",
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
            optional(key(
                "callback_cpu_us",
                LATENCY,
                "microseconds",
                "20",
                "lock server CPU time per blocking callback sent",
            )),
            optional(key(
                "ost_writes",
                Kind::Choice(&OST_WRITES),
                "",
                "\"host-cache\"",
                "through (default): a write is on disk before its reply; host-cache: in the host's page cache, the disk paid by syncs",
            )),
            optional(key(
                "runs_on",
                Kind::Choice(&RUNS_ON),
                "",
                "\"compute-node\"",
                "where the servers run: own-nodes (default) or compute-node, sharing node 0's cores",
            )),
            optional(key(
                "write_bulk",
                Kind::Choice(&WRITE_BULK),
                "",
                "\"shared-memory\"",
                "network (default), or shared-memory: the OSS reads a write's pages from its client's memory (one host)",
            )),
            optional(key(
                "host_cache_write_gib_s",
                BANDWIDTH,
                "GiB/s",
                "4",
                "one core writing into the host's page cache (host-cache); default copy_bandwidth_gib_s",
            )),
            optional(key(
                "host_cache_background_mib",
                count(0, SIZE_MIB_MAX),
                "MiB",
                "2400",
                "dirty MiB a host keeps before writing back on its own (host-cache); absent: at once",
            )),
            optional(key(
                "host_cache_commit_mib",
                count(1, SIZE_MIB_MAX),
                "MiB",
                "4",
                "MiB an OST takes before it commits on its own (host-cache); absent: only syncs write back",
            )),
            optional(key(
                "page_first_map_us",
                LATENCY,
                "microseconds",
                "0.7",
                "server CPU time per page of a client's shared memory read for the first time",
            )),
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
            optional(key(
                "message_cpu_us",
                LATENCY,
                "microseconds",
                "0.5",
                "CPU time of a rank per MPI message sent or received",
            )),
            optional(key(
                "test_us",
                LATENCY,
                "microseconds",
                "0.2",
                "a rank's time per MPI_Test: it tests a collective 64 times before it sleeps; default 0",
            )),
            optional(key(
                "test_yield_us",
                LATENCY,
                "microseconds",
                "0.7",
                "a rank's time per MPI_Test that yields the core (Open MPI's mpi_yield_when_idle); where ranks outnumber cores it replaces test_us and the tests are charged to the cores; default: not modelled",
            )),
            optional(key(
                "rendezvous_bytes",
                count(0, 1 << 30),
                "bytes",
                "4096",
                "a message above this many bytes moves only once its receiver tests (the eager limit); default: every message at once",
            )),
            optional(key(
                "wait",
                Kind::Choice(&MPI_WAIT),
                "",
                "\"auto\"",
                "how a rank waits in a collective (LANEFS_MPI_WAIT): auto (default), busy or sleep",
            )),
        ],
    },
    Section {
        name: "mount",
        required: false,
        keys: &[
            optional(key(
                "request_us",
                LATENCY,
                "microseconds",
                "10",
                "time of one request through the mount, beyond the client's own work",
            )),
            optional(key(
                "request_max_kib",
                Kind::Count { min: PAGE_KIB, max: RPC_SIZE_KIB_MAX, step: PAGE_KIB },
                "KiB",
                "128",
                "largest write or read one request through the mount carries",
            )),
            optional(key(
                "file_writes",
                Kind::Choice(&FILE_WRITES),
                "",
                "\"one-at-a-time\"",
                "how a node's writes to one file go through its mount: one-at-a-time (default, the file's inode lock) or parallel",
            )),
        ],
    },
];

/// Checks a parsed description against [`SCHEMA`]; the first problem found,
/// in schema order, is the error.
pub(super) fn check_table(table: &Table, origin: &str) -> Result<(), ConfigError> {
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
    check_host_cache_keys(table, origin)?;
    check_commit_point(table, origin)?;
    check_shared_memory(table, origin)
}

/// A write's bulk in shared memory needs every client on the servers'
/// host.
fn check_shared_memory(table: &Table, origin: &str) -> Result<(), ConfigError> {
    let section = |name: &str| match table.get(name) {
        Some(Value::Table(section)) => Some(section),
        _ => None,
    };
    let Some(storage) = section("storage") else { return Ok(()) };
    let Some(value) = storage.get("write_bulk") else { return Ok(()) };
    if value.as_str() != Some("shared-memory") {
        return Ok(());
    }
    let on_node = storage.get("runs_on").and_then(Value::as_str) == Some("compute-node");
    let one_host = section("compute").and_then(|c| c.get("hosts")).and_then(Value::as_str) == Some("one");
    if on_node && one_host {
        return Ok(());
    }
    Err(storage_error(
        origin,
        "write_bulk",
        value,
        "shared memory needs the clients on the servers' host, and this description puts them apart",
        "add `runs_on = \"compute-node\"` to [storage] and `hosts = \"one\"` to [compute], or remove the key",
    ))
}

/// The keys of an OST that writes into its host's page cache mean nothing
/// to one that writes through: given without it, they are a mistake.
fn check_host_cache_keys(table: &Table, origin: &str) -> Result<(), ConfigError> {
    let Some(Value::Table(storage)) = table.get("storage") else { return Ok(()) };
    if storage.get("ost_writes").and_then(Value::as_str) == Some("host-cache") {
        return Ok(());
    }
    for key in ["host_cache_write_gib_s", "host_cache_background_mib", "host_cache_commit_mib"] {
        if let Some(value) = storage.get(key) {
            return Err(storage_error(
                origin,
                key,
                value,
                "it describes OSTs that write into their host's page cache, and these write through",
                "add `ost_writes = \"host-cache\"` to [storage], or remove the key",
            ));
        }
    }
    Ok(())
}

/// A commit point of its own is written only by an OST that syncs each
/// object: given where `commit_syncs` is not, the key is a mistake (said
/// `"journal"`, the mechanism is turned off and the key goes unused).
fn check_commit_point(table: &Table, origin: &str) -> Result<(), ConfigError> {
    let Some(Value::Table(storage)) = table.get("storage") else { return Ok(()) };
    let Some(value) = storage.get("commit_point_us") else { return Ok(()) };
    if storage.contains_key("commit_syncs") {
        return Ok(());
    }
    Err(storage_error(
        origin,
        "commit_point_us",
        value,
        "only an OST that syncs each object writes a commit point of its own, and this description says nothing \
         of how its OSTs commit",
        "add `commit_syncs = \"each-object\"` to [storage], or remove the key",
    ))
}

/// A `[storage]` key whose `value` cannot stand, with the fix.
fn storage_error(origin: &str, key: &'static str, value: &Value, problem: &str, fix: &str) -> ConfigError {
    ConfigError::InvalidValue(Box::new(InvalidValue {
        origin: origin.into(),
        section: "storage",
        key,
        value: value.to_string(),
        problem: problem.into(),
        fix: fix.into(),
    }))
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
    if let Kind::Choice(words) = key.kind {
        let listed = words.iter().map(|word| format!("\"{word}\"")).collect::<Vec<_>>().join(", ");
        return match value {
            Value::String(text) if words.contains(&text.as_str()) => Ok(()),
            Value::String(text) => Err((
                format!("\"{text}\" is not one of {listed}{}", did_you_mean(text, words)),
                format!("write one of them, like {example}"),
            )),
            other => Err((format!("expected one of {listed}, found {}", type_name(other)), format!("like {example}"))),
        };
    }
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
        Kind::Text | Kind::Choice(_) => unreachable!("text was checked above"),
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
pub(super) fn did_you_mean(given: &str, names: &[&str]) -> String {
    let closest = names
        .iter()
        .map(|name| (edit_distance(given, name), *name))
        .filter(|&(distance, name)| distance <= 3.max(name.len() / 4))
        .min();
    closest.map_or_else(String::new, |(_, name)| format!(" (did you mean `{name}`?)"))
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
