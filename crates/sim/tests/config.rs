//! Cluster descriptions: every preset loads, and every kind of bad input is
//! refused with a message that names the key, the problem and the fix.

use lanefs_core::ost::SyncLockCancel;
use lanefs_core::units::{Duration, OstIndex};
use lanefs_sim::config::presets;
use lanefs_sim::{Bandwidth, ClusterConfig, ConfigError};
use proptest::prelude::*;

fn laptop_text() -> &'static str {
    presets().iter().find(|(name, _)| *name == "laptop").expect("the laptop preset exists").1
}

/// The laptop preset with one line replaced (or removed, when `with` is empty).
fn laptop_with(line: &str, with: &str) -> String {
    let text = laptop_text();
    assert!(text.lines().any(|candidate| candidate == line), "the laptop preset has the line `{line}`");
    text.lines().map(|candidate| if candidate == line { with } else { candidate }).collect::<Vec<_>>().join("\n")
}

fn error_of(text: &str) -> ConfigError {
    ClusterConfig::from_toml_str(text, "test.toml").expect_err("the description is refused")
}

fn assert_mentions(error: &ConfigError, parts: &[&str]) {
    let message = error.to_string();
    for part in parts {
        assert!(message.contains(part), "`{part}` missing from the message: {message}");
    }
}

#[test]
fn every_preset_loads_and_validates() {
    assert_eq!(presets().len(), 3);
    for (name, text) in presets() {
        let config = ClusterConfig::load(name).unwrap_or_else(|error| panic!("preset {name}: {error}"));
        assert_eq!(&config.cluster.name, name, "a preset's name is its file name");
        assert_eq!(config, ClusterConfig::from_toml_str(text, name).unwrap());
        config.validate().unwrap();
        assert!(config.ost_count() > 0 && config.rank_count() > 0);
        assert!(config.compute.copy_bandwidth().bytes_per_s() > 0.0);
        assert!(config.storage.lock_cpu() > Duration::ZERO);
        let round_trip = ClusterConfig::from_toml_str(&config.to_toml(), "round trip").unwrap();
        assert_eq!(round_trip, config, "to_toml keeps every value");
    }
}

#[test]
fn the_xc40_preset_is_the_cug_2017_setup() {
    let config = ClusterConfig::load("cray-xc40-24ost").unwrap();
    assert_eq!((config.compute.nodes, config.compute.ranks_per_node), (192, 4));
    assert_eq!(config.ost_count(), 24);
    assert_eq!(config.client.rpc_size_bytes(), 1 << 20);
    assert_eq!(config.client.rpcs_in_flight, 8);
    assert_eq!(config.client.max_dirty_bytes_per_ost(), 32 << 20);
    assert_eq!(config.storage.callback_timeout(), Duration::from_secs(100));
    assert_eq!(config.storage.lock_cpu(), Duration::from_us(85));
    assert_eq!(config.compute.network_latency(), Duration::from_us(10));
    assert_eq!(config.compute.client_cpu_per_rpc(), Duration::ZERO, "absent means zero");
    assert_eq!(config.compute.client_cpu_per_lock(), Duration::ZERO, "absent means zero");
    assert_eq!(config.storage.ost_access_latency(), Duration::from_us(4_160), "7,200 RPM rotational latency");
    let laptop = ClusterConfig::load("laptop").unwrap();
    assert_eq!(laptop.storage.ost_access_latency(), Duration::ZERO, "absent means zero");
    assert_eq!(config.storage.sync_lock_cancel(), SyncLockCancel::Always, "ofd_slc_set with an async journal");
    assert_eq!(config.storage.journal_commit(), Duration::from_us(8_320), "two dependent writes, 4,160 us each");
    assert_eq!(laptop.storage.journal_commit(), Duration::ZERO, "absent means zero");
    assert_eq!(config.mpi_latency(), Duration::from_ns(1_500));
    assert_eq!(config.storage.oss_of(OstIndex(23)), 23);
}

#[test]
fn derived_values_follow_the_units_in_the_key_names() {
    let config = ClusterConfig::load("laptop").unwrap();
    assert_eq!(config.ost_count(), 4);
    assert_eq!(config.storage.oss_of(OstIndex(3)), 0);
    assert_eq!(config.client.cached_bytes_max(), 64 << 20);
    assert_eq!(config.storage.raid_stripe_bytes(), 4096);
    let write = config.storage.ost_write_bandwidth();
    assert!((write.bytes_per_s() - 0.466 * (1u64 << 30) as f64).abs() < 1.0);
    assert!((write.ns_per_byte() * write.bytes_per_s() - 1e9).abs() < 1e-3);
    assert_eq!(config.storage.rmw_read_bandwidth(), config.storage.ost_read_bandwidth());
    assert_eq!(config.mpi_latency_us(), 20.0);
    assert_eq!(config.mpi_bandwidth_gib_s(), 4.66);
    // No [mpi] section: MPI uses the compute network.
    assert_eq!(config.mpi_latency(), config.compute.network_latency());
    assert_eq!(config.mpi_bandwidth(), config.compute.injection_bandwidth());
}

#[test]
fn a_read_modify_write_reads_each_partly_written_stripe() {
    let storage = ClusterConfig::load("cray-xc40-24ost").unwrap().storage;
    let stripe = storage.raid_stripe_bytes();
    assert_eq!(stripe, 1 << 20);
    assert_eq!(storage.rmw_read_bytes(0, 0), 0);
    assert_eq!(storage.rmw_read_bytes(0, stripe), 0);
    assert_eq!(storage.rmw_read_bytes(3 * stripe, 4 * stripe), 0);
    assert_eq!(storage.rmw_read_bytes(0, 4096), stripe);
    assert_eq!(storage.rmw_read_bytes(stripe - 4096, 4096), stripe);
    assert_eq!(storage.rmw_read_bytes(stripe - 4096, 8192), 2 * stripe);
    assert_eq!(storage.rmw_read_bytes(4096, 3 * stripe), 2 * stripe);
    assert_eq!(storage.rmw_read_bytes(4096, 2 * stripe - 4096), stripe);
}

#[test]
fn transfer_time_rounds_up_to_a_nanosecond() {
    let one_gib_s = Bandwidth::from_gib_s(1.0);
    assert_eq!(one_gib_s.bytes_per_s(), (1u64 << 30) as f64);
    assert_eq!(one_gib_s.transfer_time(0), Duration::ZERO);
    assert_eq!(one_gib_s.transfer_time(1), Duration::from_ns(1));
    assert_eq!(one_gib_s.transfer_time(1 << 30), Duration::from_secs(1));
}

#[test]
fn a_path_loads_a_file() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../presets/frontier.toml");
    let config = ClusterConfig::load(path).unwrap();
    assert_eq!(config, ClusterConfig::load("frontier").unwrap());
    assert_eq!(config.ost_count(), 450);
}

#[test]
fn an_unknown_preset_lists_the_presets() {
    let error = ClusterConfig::load("laptpo").unwrap_err();
    assert!(matches!(error, ConfigError::UnknownPreset { .. }));
    assert_mentions(&error, &["unknown preset `laptpo`", "did you mean `laptop`", "cray-xc40-24ost, frontier, laptop"]);
}

#[test]
fn a_missing_file_is_named() {
    let error = ClusterConfig::load("no/such/cluster.toml").unwrap_err();
    assert!(matches!(error, ConfigError::Read { .. }));
    assert_mentions(&error, &["cannot read cluster description `no/such/cluster.toml`", "readable .toml file"]);
}

#[test]
fn invalid_toml_is_a_syntax_error() {
    let error = error_of("[compute\nnodes = 4");
    assert!(matches!(error, ConfigError::Syntax { .. }));
    assert_mentions(&error, &["test.toml: not valid TOML", "line 1"]);
}

#[test]
fn an_unknown_key_lists_the_valid_ones() {
    let error = error_of(&laptop_with("nodes = 4", "nodez = 4"));
    assert!(matches!(&error, ConfigError::UnknownKey { key, .. } if key == "nodez"));
    assert_mentions(
        &error,
        &["unknown key `nodez` in [compute]", "did you mean `nodes`", "nodes, ranks_per_node, copy_bandwidth_gib_s"],
    );
}

#[test]
fn a_key_in_the_wrong_section_says_where_it_belongs() {
    let text = laptop_text().replace("[client]\n", "[client]\nlock_cpu_us = 5\n");
    assert_mentions(&error_of(&text), &["unknown key `lock_cpu_us` in [client]", "it belongs in [storage]"]);
}

#[test]
fn an_unknown_section_lists_the_sections() {
    let text = format!("{}\n[burst_buffer]\nnodes = 4\n", laptop_text());
    let error = error_of(&text);
    assert!(matches!(error, ConfigError::UnknownSection { .. }));
    assert_mentions(&error, &["unknown section [burst_buffer]", "cluster, compute, client, storage, mpi"]);
}

#[test]
fn a_top_level_key_is_told_its_section() {
    let text = format!("nodes = 4\n{}", laptop_text());
    assert_mentions(&error_of(&text), &["unknown section [nodes]", "put it under [compute]"]);
}

#[test]
fn a_section_written_as_a_value_is_refused() {
    let text = format!("mpi = 5\n{}", laptop_text());
    let error = error_of(&text);
    assert!(matches!(error, ConfigError::NotASection { .. }));
    assert_mentions(&error, &["`mpi` is a section, not a value", "write `[mpi]`"]);
}

#[test]
fn a_missing_section_lists_its_keys() {
    let start = laptop_text().find("[storage]").unwrap();
    let error = error_of(&laptop_text()[..start]);
    assert!(matches!(error, ConfigError::MissingSection { .. }));
    assert_mentions(&error, &["section [storage] is missing", "oss_count, osts_per_oss"]);
}

#[test]
fn a_missing_key_says_what_to_add() {
    let error = error_of(&laptop_with("ost_write_bandwidth_gib_s = 0.466", ""));
    assert!(matches!(&error, ConfigError::MissingKey { key, .. } if *key == "ost_write_bandwidth_gib_s"));
    assert_mentions(
        &error,
        &["`ost_write_bandwidth_gib_s` is missing from [storage]", "add `ost_write_bandwidth_gib_s = "],
    );
}

#[test]
fn a_unit_in_a_value_is_moved_to_the_key_name() {
    let error = error_of(&laptop_with("ost_write_bandwidth_gib_s = 0.466", "ost_write_bandwidth_gib_s = \"10GB\""));
    assert!(matches!(&error, ConfigError::InvalidValue(invalid) if invalid.key == "ost_write_bandwidth_gib_s"));
    assert_mentions(
        &error,
        &[
            "[storage] ost_write_bandwidth_gib_s = \"10GB\"",
            "\"GB\" is a unit",
            "units go in the key name",
            "bare number of GiB/s",
        ],
    );
    let error = error_of(&laptop_with("network_latency_us = 20", "network_latency_us = \"20 us\""));
    assert_mentions(&error, &["network_latency_us", "\"us\" is a unit", "bare number of microseconds"]);
}

#[test]
fn a_quoted_number_is_unquoted() {
    let error = error_of(&laptop_with("nodes = 4", "nodes = \"4\""));
    assert_mentions(&error, &["[compute] nodes = \"4\"", "a quoted number is text", "remove the quotes: `nodes = 4`"]);
}

#[test]
fn text_or_a_boolean_where_a_number_belongs_is_refused() {
    let error = error_of(&laptop_with("copy_bandwidth_gib_s = 1.21", "copy_bandwidth_gib_s = \"fast\""));
    assert_mentions(&error, &["copy_bandwidth_gib_s", "expected a number of GiB/s, found the text \"fast\""]);
    let error = error_of(&laptop_with("lock_cpu_us = 65", "lock_cpu_us = true"));
    assert_mentions(&error, &["lock_cpu_us = true", "expected a number of microseconds, found a boolean"]);
}

#[test]
fn a_bandwidth_must_be_positive() {
    for bad in ["0", "-1.5", "0.0"] {
        let error = error_of(&laptop_with(
            "oss_network_bandwidth_gib_s = 4.66",
            &format!("oss_network_bandwidth_gib_s = {bad}"),
        ));
        assert!(matches!(&error, ConfigError::InvalidValue(invalid) if invalid.key == "oss_network_bandwidth_gib_s"));
        assert_mentions(
            &error,
            &["oss_network_bandwidth_gib_s", "must be greater than zero", "give the rate in GiB/s"],
        );
    }
}

#[test]
fn a_number_must_be_finite_and_in_range() {
    let error = error_of(&laptop_with("copy_bandwidth_gib_s = 1.21", "copy_bandwidth_gib_s = nan"));
    assert_mentions(&error, &["copy_bandwidth_gib_s", "finite number"]);
    let error = error_of(&laptop_with("network_latency_us = 20", "network_latency_us = inf"));
    assert_mentions(&error, &["network_latency_us", "finite number"]);
    let error = error_of(&laptop_with("network_latency_us = 20", "network_latency_us = -3"));
    assert_mentions(&error, &["network_latency_us = -3", "a time cannot be negative"]);
    let error = error_of(&laptop_with("copy_bandwidth_gib_s = 1.21", "copy_bandwidth_gib_s = 1e12"));
    assert_mentions(&error, &["copy_bandwidth_gib_s", "above the limit", "check the unit: GiB/s"]);
}

#[test]
fn a_count_must_be_a_whole_number_in_range() {
    let error = error_of(&laptop_with("nodes = 4", "nodes = 1.5"));
    assert_mentions(&error, &["[compute] nodes = 1.5", "expected a whole number"]);
    let error = error_of(&laptop_with("nodes = 4", "nodes = 0"));
    assert_mentions(&error, &["nodes = 0", "must be between 1 and"]);
    let error = error_of(&laptop_with("nodes = 4", "nodes = -4"));
    assert_mentions(&error, &["nodes = -4", "must be between 1 and"]);
    let error = error_of(&laptop_with("rpcs_in_flight = 8", "rpcs_in_flight = 1000"));
    assert_mentions(&error, &["rpcs_in_flight = 1000", "must be between 1 and 256 RPCs"]);
    let error = error_of(&laptop_with("rpc_size_kib = 1024", "rpc_size_kib = 1022"));
    assert_mentions(&error, &["rpc_size_kib = 1022", "multiple of 4 KiB"]);
}

#[test]
fn empty_text_is_refused() {
    let error = error_of(&laptop_with("name = \"laptop\"", "name = \"  \""));
    assert_mentions(&error, &["[cluster] name", "the text is empty"]);
    let error = error_of(&laptop_with("name = \"laptop\"", "name = 7"));
    assert_mentions(&error, &["[cluster] name = 7", "expected quoted text, found an integer"]);
}

#[test]
fn validate_checks_values_set_in_code() {
    let mut config = ClusterConfig::load("laptop").unwrap();
    config.storage.lock_cpu_us = 200.0;
    config.validate().expect("a swept value in range is fine");
    config.storage.ost_read_bandwidth_gib_s = 0.0;
    let error = config.validate().unwrap_err();
    assert_mentions(&error, &["cluster laptop", "ost_read_bandwidth_gib_s", "must be greater than zero"]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Damaged descriptions are refused or accepted, never a panic.
    #[test]
    fn damaged_text_never_panics(position in 0usize..4096, length in 0usize..16, insert in "[a-z0-9 =\"\\[\\].\n-]{0,8}") {
        let text = laptop_text();
        let mut start = position % text.len();
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (start + length).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let damaged = format!("{}{}{}", &text[..start], insert, &text[end..]);
        if let Ok(config) = ClusterConfig::from_toml_str(&damaged, "damaged") {
            config.validate().unwrap();
            let _ = (config.compute.network_latency(), config.storage.ost_write_bandwidth().transfer_time(1 << 20));
        }
    }
}

#[test]
fn overrides_change_one_value_and_are_checked_like_a_file() {
    use lanefs_sim::ClusterConfig;
    let set = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    let c = ClusterConfig::load_with("laptop", &set("storage.lock_cpu_us", "200")).unwrap();
    assert_eq!(c.storage.lock_cpu_us, 200.0);
    let base = ClusterConfig::load("laptop").unwrap();
    assert_eq!(c.storage.ost_count(), base.storage.ost_count());
    let c = ClusterConfig::load_with("laptop", &set("cluster.name", "my-laptop")).unwrap();
    assert_eq!(c.cluster.name, "my-laptop");
    let e = ClusterConfig::load_with("laptop", &set("storage.lock_cpu", "5")).unwrap_err().to_string();
    assert!(e.contains("lock_cpu") && e.contains("with storage.lock_cpu=5"), "{e}");
    let e = ClusterConfig::load_with("laptop", &set("nodes", "5")).unwrap_err().to_string();
    assert!(e.contains("name the key with its section"), "{e}");
    let e = ClusterConfig::load_with("laptop", &set("compute.nodes", "-3")).unwrap_err().to_string();
    assert!(e.contains("nodes"), "{e}");
}

#[test]
fn sync_lock_cancel_takes_lustres_words_only() {
    let line = "sync_lock_cancel = \"always\"";
    let absent = ClusterConfig::from_toml_str(&laptop_with(line, ""), "test.toml").unwrap();
    assert_eq!(absent.storage.sync_lock_cancel(), SyncLockCancel::Always, "Lustre's default when absent");
    let blocking = ClusterConfig::from_toml_str(&laptop_with(line, "sync_lock_cancel = \"blocking\""), "t").unwrap();
    assert_eq!(blocking.storage.sync_lock_cancel(), SyncLockCancel::Blocking);
    let error = error_of(&laptop_with(line, "sync_lock_cancel = \"alway\""));
    assert_mentions(
        &error,
        &["[storage] sync_lock_cancel", "\"alway\" is not one of \"never\", \"blocking\", \"always\"", "`always`"],
    );
    let error = error_of(&laptop_with(line, "sync_lock_cancel = 2"));
    assert_mentions(&error, &["sync_lock_cancel = 2", "expected one of", "found an integer"]);
    let set = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    let never = ClusterConfig::load_with("laptop", &set("storage.sync_lock_cancel", "never")).unwrap();
    assert_eq!(never.storage.sync_lock_cancel(), SyncLockCancel::Never);
    let e = ClusterConfig::load_with("laptop", &set("storage.journal_commit_us", "-1")).unwrap_err().to_string();
    assert!(e.contains("journal_commit_us") && e.contains("cannot be negative"), "{e}");
}
