//! MPI-IO hints: the typed values a collective writer acts on, parsed from
//! `MPI_Info` key/value strings, from Cray MPICH's `MPICH_MPIIO_HINTS`
//! environment syntax and from a command-line `--hints` string, and printed
//! as Cray's `MPICH_MPIIO_HINTS_DISPLAY=1` block.
//!
//! [`MpiioHints`] holds resolved values with the defaults of ROMIO and Cray
//! MPT. Values are checked when they are set, so a bad hint fails at open
//! with a message naming the hint, the value and what is accepted, instead
//! of surfacing as a strange aggregator count later.
//!
//! Decisions where MPI implementations differ or nothing is documented:
//! - **Unknown keys are ignored with a warning**, as MPICH ignores hints it
//!   does not know (an `MPI_Info` may carry hints for another layer), but
//!   never silently: a misspelt `cb_node=8` would otherwise cost a whole
//!   benchmark run unnoticed, so [`known_hints`] names it and the closest
//!   known hint, and callers print that once. A bad value of a known hint
//!   is an error naming the hint. Standard MPI and ROMIO hints that lanefs
//!   does not model ([`IGNORED_HINTS`], e.g. `cb_config_list`,
//!   `romio_ds_write`) are accepted without a word, so portable job
//!   scripts run quietly. [`MpiioHints::set`] itself, the primitive,
//!   refuses an unknown key.
//! - **Lock mode precedence** ([`MpiioHints::write_lock_mode`]): a non-default
//!   `cray_cb_write_lock_mode` (1 or 2) wins over the ROMIO lockahead hints,
//!   because it is the vendor's own switch and names the mode outright;
//!   `cray_cb_write_lock_mode=0` is the default and does not turn ROMIO's
//!   `romio_lustre_cb_lock_ahead_write=1` off. The extent count and flags of
//!   a lockahead mode always come from the ROMIO hints.
//! - **Pattern rules** ([`hints_for_file`]): a pattern is matched against the
//!   file name as given at open and against its last path component, so
//!   `wrfout*` matches `./run/wrfout_d01` and `*/mpsout.d01.*` still needs
//!   the directory. `*` matches any run of characters, `/` included; every
//!   other character matches itself. Every matching rule applies, in the
//!   order written, so a later rule overrides an earlier one key by key.

use lanefs_core::client::ladvise::ADVICES_PER_CALL_MAX;
use lanefs_core::layout::{STRIPE_COUNT_MAX, STRIPE_SIZE_UNIT};
use lanefs_core::suggest::edit_distance;
use serde::{Deserialize, Serialize};
use std::fmt::{self, Write as _};
use thiserror::Error;

/// ROMIO's default `cb_buffer_size` (16 MiB).
pub const CB_BUFFER_SIZE_DEFAULT: u64 = 16 * 1024 * 1024;
/// ROMIO's default `romio_lustre_cb_lock_ahead_num_extents`.
pub const LOCK_AHEAD_NUM_EXTENTS_DEFAULT: u32 = 500;
/// The most lockahead extents one request may carry: one `llapi_ladvise`
/// call takes fewer than 1024 advices, and ROMIO refuses 1024 or more.
pub const LOCK_AHEAD_NUM_EXTENTS_MAX: u32 = ADVICES_PER_CALL_MAX as u32 - 1;

/// The hints lanefs models, as `MPI_Info` keys.
pub const HINT_NAMES: &[&str] = &[
    "striping_factor",
    "striping_unit",
    "cb_nodes",
    "cb_buffer_size",
    "romio_cb_write",
    "romio_cb_read",
    "cray_cb_nodes_multiplier",
    "cray_cb_write_lock_mode",
    "romio_lustre_cb_lock_ahead_write",
    "romio_lustre_cb_lock_ahead_read",
    "romio_lustre_cb_lock_ahead_num_extents",
    "romio_lustre_cb_lock_ahead_flags",
    "romio_lustre_co_ratio",
    "romio_no_indep_rw",
    "direct_io",
];

/// Standard MPI and ROMIO/Cray hints that lanefs accepts and ignores: they
/// tune machinery lanefs does not have (data sieving, node lists, ...).
pub const IGNORED_HINTS: &[&str] = &[
    "access_style",
    "aggregator_placement_stride",
    "abort_on_rw_error",
    "cb_align",
    "cb_block_size",
    "cb_config_list",
    "chunked",
    "chunked_item",
    "chunked_size",
    "collective_buffering",
    "file_perm",
    "filename",
    "ind_rd_buffer_size",
    "ind_wr_buffer_size",
    "io_node_list",
    "nb_proc",
    "num_io_nodes",
    "romio_cb_alltoall",
    "romio_cb_ds_threshold",
    "romio_cb_fr_alignment",
    "romio_cb_fr_types",
    "romio_cb_pfr",
    "romio_ds_read",
    "romio_ds_write",
    "romio_filesystem_type",
    "romio_lustre_start_iodevice",
    "romio_read_aggmethod",
    "romio_synchronized_flush",
    "romio_visibility_immediate",
    "romio_write_aggmethod",
];

/// Why a hint or a hint specification was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum HintError {
    #[error("unknown MPI-IO hint `{key}`{}; known hints: {}", did_you_mean(.suggestion), HINT_NAMES.join(", "))]
    UnknownKey { key: String, suggestion: Option<&'static str> },
    #[error("bad value `{value}` for MPI-IO hint `{key}`: expected {accepted}")]
    BadValue { key: String, value: String, accepted: String },
    #[error("bad hint specification `{part}`: {reason}")]
    Syntax { part: String, reason: &'static str },
}

fn did_you_mean(suggestion: &Option<&str>) -> String {
    suggestion.map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default()
}

/// `romio_cb_write` / `romio_cb_read`: whether collective buffering is used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CbMode {
    Enable,
    Disable,
    /// ROMIO decides per call (collective buffering for interleaved access).
    #[default]
    Automatic,
}

impl CbMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CbMode::Enable => "enable",
            CbMode::Disable => "disable",
            CbMode::Automatic => "automatic",
        }
    }
}

/// `cray_cb_write_lock_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CrayLockMode {
    /// 0: the file system's default (expanding) extent locks.
    #[default]
    Default,
    /// 1: one shared (group) lock for the whole file (meaning unverified).
    Group,
    /// 2: lockahead: non-overlapping, non-expanded locks taken ahead.
    Lockahead,
}

impl CrayLockMode {
    pub fn code(self) -> u32 {
        match self {
            CrayLockMode::Default => 0,
            CrayLockMode::Group => 1,
            CrayLockMode::Lockahead => 2,
        }
    }
}

/// How aggregators lock the stripes they write, resolved from all hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CbLockMode {
    /// Ordinary (expanding) locks taken by each write.
    Default,
    /// One group lock shared by all aggregators.
    Group,
    /// Lockahead requests of `num_extents` stripes, with these ladvise flags
    /// (`LF_ASYNC` is always added).
    Lockahead { num_extents: u32, flags: u32 },
}

/// Every hint lanefs acts on, resolved to typed values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpiioHints {
    /// Stripe count for a file being created; `None`: the directory's default.
    pub striping_factor: Option<u32>,
    /// Stripe size in bytes for a file being created; `None`: the default.
    pub striping_unit: Option<u64>,
    /// Aggregator count asked for; `None`: one per node.
    pub cb_nodes: Option<u32>,
    pub cb_buffer_size: u64,
    pub romio_cb_write: CbMode,
    pub romio_cb_read: CbMode,
    /// Aggregators per OST under Cray's rule (see `plan::aggregator_count`).
    pub cray_cb_nodes_multiplier: u32,
    pub cray_cb_write_lock_mode: CrayLockMode,
    pub romio_lustre_cb_lock_ahead_write: bool,
    pub romio_lustre_cb_lock_ahead_read: bool,
    /// Stripes per lockahead request, `1..=LOCK_AHEAD_NUM_EXTENTS_MAX`.
    pub romio_lustre_cb_lock_ahead_num_extents: u32,
    /// Per-advice ladvise flags, 0 or 1 (`LF_ASYNC`).
    pub romio_lustre_cb_lock_ahead_flags: u32,
    /// Most aggregators per OST under ROMIO's rule (writes only).
    pub romio_lustre_co_ratio: u32,
    pub romio_no_indep_rw: bool,
    pub direct_io: bool,
}

impl Default for MpiioHints {
    fn default() -> Self {
        MpiioHints {
            striping_factor: None,
            striping_unit: None,
            cb_nodes: None,
            cb_buffer_size: CB_BUFFER_SIZE_DEFAULT,
            romio_cb_write: CbMode::Automatic,
            romio_cb_read: CbMode::Automatic,
            cray_cb_nodes_multiplier: 1,
            cray_cb_write_lock_mode: CrayLockMode::Default,
            romio_lustre_cb_lock_ahead_write: false,
            romio_lustre_cb_lock_ahead_read: false,
            romio_lustre_cb_lock_ahead_num_extents: LOCK_AHEAD_NUM_EXTENTS_DEFAULT,
            romio_lustre_cb_lock_ahead_flags: 0,
            romio_lustre_co_ratio: 1,
            romio_no_indep_rw: false,
            direct_io: false,
        }
    }
}

/// Accepted-value descriptions, shared by the parser and its errors.
const ACCEPT_POSITIVE: &str = "a positive integer";
const ACCEPT_CB_MODE: &str = "enable, disable or automatic";
const ACCEPT_BOOL: &str = "true or false";
const ACCEPT_SWITCH: &str = "0 (off) or 1 (on)";

impl MpiioHints {
    /// Defaults with `pairs` applied in order (later pairs override earlier).
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> Result<MpiioHints, HintError> {
        let mut hints = MpiioHints::default();
        hints.apply(pairs)?;
        Ok(hints)
    }

    /// Sets every pair in order; stops at the first bad one.
    pub fn apply<K: AsRef<str>, V: AsRef<str>>(&mut self, pairs: &[(K, V)]) -> Result<(), HintError> {
        pairs.iter().try_for_each(|(key, value)| self.set(key.as_ref(), value.as_ref()))
    }

    /// Sets one hint from its `MPI_Info` strings. Surrounding whitespace is
    /// ignored; `enable`/`true`-style words are case-insensitive. A hint in
    /// [`IGNORED_HINTS`] is accepted and changes nothing; any other unknown
    /// key is an error (see the module docs for why).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), HintError> {
        let (key, value) = (key.trim(), value.trim());
        let bad =
            |accepted: &str| HintError::BadValue { key: key.into(), value: value.into(), accepted: accepted.into() };
        let int = |min: u64, max: u64, accepted: &str| match value.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(bad(accepted)),
        };
        let positive_u32 = || int(1, u64::from(u32::MAX), ACCEPT_POSITIVE).map(|n| n as u32);
        let switch = || int(0, 1, ACCEPT_SWITCH).map(|n| n == 1);
        let word = |words: &[&str]| words.iter().position(|w| value.eq_ignore_ascii_case(w));
        let boolean = || word(&["false", "true"]).map(|i| i == 1).ok_or_else(|| bad(ACCEPT_BOOL));
        let cb_mode = || {
            let modes = [CbMode::Enable, CbMode::Disable, CbMode::Automatic];
            word(&modes.map(CbMode::as_str)).map(|i| modes[i]).ok_or_else(|| bad(ACCEPT_CB_MODE))
        };
        match key {
            "striping_factor" => {
                let accepted = format!("an integer from 1 to {STRIPE_COUNT_MAX} (the stripe count)");
                self.striping_factor = Some(int(1, u64::from(STRIPE_COUNT_MAX), &accepted)? as u32);
            }
            "striping_unit" => {
                let accepted = format!("a positive multiple of {STRIPE_SIZE_UNIT} bytes, e.g. 1048576");
                let size = int(1, u64::MAX, &accepted)?;
                if size % STRIPE_SIZE_UNIT != 0 {
                    return Err(bad(&accepted));
                }
                self.striping_unit = Some(size);
            }
            "cb_nodes" => self.cb_nodes = Some(positive_u32()?),
            "cb_buffer_size" => self.cb_buffer_size = int(1, u64::MAX, "a positive number of bytes")?,
            "romio_cb_write" => self.romio_cb_write = cb_mode()?,
            "romio_cb_read" => self.romio_cb_read = cb_mode()?,
            "cray_cb_nodes_multiplier" => self.cray_cb_nodes_multiplier = positive_u32()?,
            "cray_cb_write_lock_mode" => {
                let modes = [CrayLockMode::Default, CrayLockMode::Group, CrayLockMode::Lockahead];
                let accepted = "0 (default locking), 1 (group lock) or 2 (lockahead)";
                self.cray_cb_write_lock_mode = modes[int(0, 2, accepted)? as usize];
            }
            "romio_lustre_cb_lock_ahead_write" => self.romio_lustre_cb_lock_ahead_write = switch()?,
            "romio_lustre_cb_lock_ahead_read" => self.romio_lustre_cb_lock_ahead_read = switch()?,
            "romio_lustre_cb_lock_ahead_num_extents" => {
                let max = LOCK_AHEAD_NUM_EXTENTS_MAX;
                let accepted = format!("an integer from 1 to {max} (one ladvise call takes fewer than {})", max + 1);
                self.romio_lustre_cb_lock_ahead_num_extents = int(1, u64::from(max), &accepted)? as u32;
            }
            "romio_lustre_cb_lock_ahead_flags" => {
                let accepted = "0 or 1 (LF_ASYNC; Lustre refuses other lockahead flags)";
                self.romio_lustre_cb_lock_ahead_flags = int(0, 1, accepted)? as u32;
            }
            "romio_lustre_co_ratio" => self.romio_lustre_co_ratio = positive_u32()?,
            "romio_no_indep_rw" => self.romio_no_indep_rw = boolean()?,
            "direct_io" => self.direct_io = boolean()?,
            ignored if IGNORED_HINTS.contains(&ignored) => {}
            unknown => return Err(HintError::UnknownKey { key: unknown.into(), suggestion: closest_hint(unknown) }),
        }
        Ok(())
    }

    /// The lock mode of collective writes; precedence in the module docs.
    pub fn write_lock_mode(&self) -> CbLockMode {
        match self.cray_cb_write_lock_mode {
            CrayLockMode::Group => CbLockMode::Group,
            CrayLockMode::Lockahead => self.lockahead_mode(),
            CrayLockMode::Default if self.romio_lustre_cb_lock_ahead_write => self.lockahead_mode(),
            CrayLockMode::Default => CbLockMode::Default,
        }
    }

    /// The lock mode of collective reads: only ROMIO's read hint sets it.
    pub fn read_lock_mode(&self) -> CbLockMode {
        if self.romio_lustre_cb_lock_ahead_read {
            self.lockahead_mode()
        } else {
            CbLockMode::Default
        }
    }

    /// Whether open must prepare for lockahead (ROMIO: aggregator 0 takes
    /// and drops a whole-file group lock, then every rank sets
    /// lock-no-expand), i.e. whether either direction uses lockahead.
    pub fn lockahead_at_open(&self) -> bool {
        matches!(self.write_lock_mode(), CbLockMode::Lockahead { .. })
            || matches!(self.read_lock_mode(), CbLockMode::Lockahead { .. })
    }

    fn lockahead_mode(&self) -> CbLockMode {
        CbLockMode::Lockahead {
            num_extents: self.romio_lustre_cb_lock_ahead_num_extents,
            flags: self.romio_lustre_cb_lock_ahead_flags,
        }
    }

    /// A copy with the optional hints filled in from what open decided (the
    /// file's stripe count and size and the aggregator count), as Cray's
    /// display shows them. Hints already set are kept.
    pub fn resolved(&self, stripe_count: u32, stripe_size: u64, aggregators: u32) -> MpiioHints {
        MpiioHints {
            striping_factor: Some(self.striping_factor.unwrap_or(stripe_count)),
            striping_unit: Some(self.striping_unit.unwrap_or(stripe_size)),
            cb_nodes: Some(self.cb_nodes.unwrap_or(aggregators)),
            ..self.clone()
        }
    }

    /// `(key, value)` for every hint with a value, in display order. Unset
    /// optional hints are left out.
    pub fn entries(&self) -> Vec<(&'static str, String)> {
        let entries = [
            ("cb_buffer_size", Some(self.cb_buffer_size.to_string())),
            ("romio_cb_write", Some(self.romio_cb_write.as_str().to_string())),
            ("cb_nodes", self.cb_nodes.map(|n| n.to_string())),
            ("striping_factor", self.striping_factor.map(|n| n.to_string())),
            ("striping_unit", self.striping_unit.map(|n| n.to_string())),
            ("romio_cb_read", Some(self.romio_cb_read.as_str().to_string())),
            ("romio_no_indep_rw", Some(self.romio_no_indep_rw.to_string())),
            ("direct_io", Some(self.direct_io.to_string())),
            ("cray_cb_write_lock_mode", Some(self.cray_cb_write_lock_mode.code().to_string())),
            ("cray_cb_nodes_multiplier", Some(self.cray_cb_nodes_multiplier.to_string())),
            ("romio_lustre_co_ratio", Some(self.romio_lustre_co_ratio.to_string())),
            ("romio_lustre_cb_lock_ahead_write", Some(u8::from(self.romio_lustre_cb_lock_ahead_write).to_string())),
            ("romio_lustre_cb_lock_ahead_read", Some(u8::from(self.romio_lustre_cb_lock_ahead_read).to_string())),
            ("romio_lustre_cb_lock_ahead_num_extents", Some(self.romio_lustre_cb_lock_ahead_num_extents.to_string())),
            ("romio_lustre_cb_lock_ahead_flags", Some(self.romio_lustre_cb_lock_ahead_flags.to_string())),
        ];
        entries.into_iter().filter_map(|(key, value)| value.map(|v| (key, v))).collect()
    }
}

/// The known hint nearest to a mistyped key (edit distance at most 3, or
/// the same name in another case), if any.
fn closest_hint(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_lowercase();
    HINT_NAMES
        .iter()
        .map(|&name| (edit_distance(&key, name), name))
        .filter(|&(distance, _)| distance <= 3)
        .min()
        .map(|(_, name)| name)
}

/// One `pattern:key=value[:key=value...]` rule, its pairs already checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HintRule {
    pub pattern: String,
    pub hints: Vec<(String, String)>,
}

impl HintRule {
    /// Whether the rule applies to `filename` (the full name or its last
    /// path component matches the pattern).
    pub fn matches(&self, filename: &str) -> bool {
        let basename = filename.rsplit('/').next().unwrap_or(filename);
        glob_match(&self.pattern, filename) || glob_match(&self.pattern, basename)
    }
}

/// `*` matches any run of bytes (including `/`); everything else matches
/// itself. Linear backtracking on the last `*`, so no exponential cases.
fn glob_match(pattern: &str, text: &str) -> bool {
    let (pattern, text) = (pattern.as_bytes(), text.as_bytes());
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// `pairs` without the keys lanefs does not know, and a warning naming each
/// of those (with the closest known hint): MPICH ignores hints it does not
/// know, and lanefs does too, but says so (see the module docs).
pub fn known_hints(pairs: Vec<(String, String)>) -> (Vec<(String, String)>, Vec<String>) {
    let mut warnings = Vec::new();
    let known = pairs
        .into_iter()
        .filter(|(key, value)| match MpiioHints::default().set(key, value) {
            Err(HintError::UnknownKey { key, suggestion }) => {
                warnings.push(format!("ignoring unknown MPI-IO hint `{key}`{}", did_you_mean(&suggestion)));
                false
            }
            _ => true,
        })
        .collect();
    (known, warnings)
}

/// Parses `MPICH_MPIIO_HINTS`: `pattern:key=value[:key=value...]` rules
/// separated by commas. Empty `:` segments are skipped, so the trailing
/// colon of `wrfrst*:cb_nodes=40:,wrfout*:...` is accepted. Every value of
/// a known hint is checked as [`MpiioHints::set`] would, so a bad one fails
/// here, before any file is opened; unknown keys are kept, for
/// [`known_hints`] to warn of when they apply to a file.
pub fn parse_hint_env(spec: &str) -> Result<Vec<HintRule>, HintError> {
    parse_rules(spec, false)
}

/// Parses a command-line `--hints` string: the `MPICH_MPIIO_HINTS` syntax,
/// where a comma-separated rule may also be bare `key=value[:key=value...]`
/// (its first segment has an `=`), which applies to every file (pattern `*`).
/// So `cb_nodes=8:striping_factor=4` and `cb_nodes=8,wrfout*:striping_factor=24`
/// are both accepted. A pattern may therefore not contain `=`.
pub fn parse_cli_hints(spec: &str) -> Result<Vec<HintRule>, HintError> {
    parse_rules(spec, true)
}

fn parse_rules(spec: &str, bare_pairs_allowed: bool) -> Result<Vec<HintRule>, HintError> {
    let mut rules = Vec::new();
    for rule_text in spec.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let syntax = |part: &str, reason| HintError::Syntax { part: part.into(), reason };
        let (head, tail) = rule_text.split_once(':').unwrap_or((rule_text, ""));
        let (pattern, pairs_text) = if head.contains('=') {
            if !bare_pairs_allowed {
                return Err(syntax(rule_text, "missing file pattern: write `*:key=value` to apply to every file"));
            }
            ("*", rule_text)
        } else {
            (head.trim(), tail)
        };
        if pattern.is_empty() {
            return Err(syntax(rule_text, "empty file pattern before `:`: use `*` to match every file"));
        }
        let mut hints = Vec::new();
        for pair in pairs_text.split(':').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').ok_or_else(|| syntax(pair, "expected key=value"))?;
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() {
                return Err(syntax(pair, "missing hint name before `=`"));
            }
            match MpiioHints::default().set(key, value) {
                Ok(()) | Err(HintError::UnknownKey { .. }) => {}
                Err(bad) => return Err(bad),
            }
            hints.push((key.to_string(), value.to_string()));
        }
        if hints.is_empty() {
            return Err(syntax(rule_text, "no key=value hints after the file pattern"));
        }
        rules.push(HintRule { pattern: pattern.to_string(), hints });
    }
    Ok(rules)
}

/// The hints that apply to `filename`: the pairs of every matching rule, in
/// rule order, each key once with the value of the last rule that sets it
/// (keys keep the position of their first appearance).
pub fn hints_for_file(rules: &[HintRule], filename: &str) -> Vec<(String, String)> {
    let mut merged: Vec<(String, String)> = Vec::new();
    for (key, value) in rules.iter().filter(|rule| rule.matches(filename)).flat_map(|rule| &rule.hints) {
        match merged.iter_mut().find(|(known, _)| known == key) {
            Some(entry) => entry.1.clone_from(value),
            None => merged.push((key.clone(), value.clone())),
        }
    }
    merged
}

/// Cray's `MPICH_MPIIO_HINTS_DISPLAY=1` block for one file: a header line,
/// then one line per hint, 10 spaces and `%-24s = value`. Pass
/// [`MpiioHints::resolved`] to show the values open decided.
/// The environment variables the MPI-IO layer reads, by their Cray MPT
/// names, with what [`display_environment`] shows when one is unset.
/// lanefs also reads each as `LANEFS_MPIIO_...`, which wins when set.
pub const ENVIRONMENT: [(&str, &str); 5] = [
    ("MPICH_MPIIO_HINTS_DISPLAY", "0"),
    ("MPICH_MPIIO_HINTS", "NULL"),
    ("MPICH_MPIIO_AGGREGATOR_PLACEMENT_DISPLAY", "0"),
    ("MPICH_MPIIO_STATS", "0"),
    ("MPICH_MPIIO_TIMERS", "0"),
];

/// The value lanefs takes for [`ENVIRONMENT`] variable `cray_name`:
/// `LANEFS_MPIIO_...` when set, else `MPICH_MPIIO_...`.
pub fn environment_value(cray_name: &str) -> Option<String> {
    let ours = cray_name.strip_prefix("MPICH_").map(|rest| format!("LANEFS_{rest}"));
    ours.and_then(|name| std::env::var(name).ok()).or_else(|| std::env::var(cray_name).ok())
}

/// Cray MPT's block of MPI-IO environment settings, printed once before
/// the first file's hints under `MPICH_MPIIO_HINTS_DISPLAY=1`; `value`
/// gives a variable's value ([`environment_value`] for the process's).
pub fn display_environment(value: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::from("PE 0: MPICH MPIIO environment settings:\n");
    for (name, unset) in ENVIRONMENT {
        let shown = value(name).unwrap_or_else(|| unset.to_string());
        writeln!(out, "PE 0:   {name:<41} = {shown}").expect("writing to a String cannot fail");
    }
    out
}

pub fn display_hints(filename: &str, hints: &MpiioHints) -> String {
    let mut out = format!("PE 0: MPIIO hints for {filename}:\n");
    for (key, value) in hints.entries() {
        writeln!(out, "          {key:<24} = {value}").expect("writing to a String cannot fail");
    }
    out
}

impl fmt::Display for CbMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_stars_anywhere() {
        assert!(glob_match("*", ""));
        assert!(glob_match("wrfout*", "wrfout_d01_2020"));
        assert!(!glob_match("wrfout*", "wrfrst_d01"));
        assert!(glob_match("*.cube", "a.b.cube"));
        assert!(!glob_match("*.cube", "a.cube.bak"));
        assert!(glob_match("*/mpsout.d01.*", "/scratch/run/mpsout.d01.0001"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "aXbYbZ"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
    }

    #[test]
    fn the_environment_block_lines_up_as_cray_mpts() {
        let block = display_environment(|name| (name == "MPICH_MPIIO_HINTS_DISPLAY").then(|| "1".to_string()));
        let lines: Vec<&str> = block.lines().collect();
        assert_eq!(lines[0], "PE 0: MPICH MPIIO environment settings:");
        assert_eq!(lines[1], "PE 0:   MPICH_MPIIO_HINTS_DISPLAY                 = 1");
        assert_eq!(lines[2], "PE 0:   MPICH_MPIIO_HINTS                         = NULL");
        assert_eq!(lines[4], "PE 0:   MPICH_MPIIO_STATS                         = 0");
        assert_eq!(lines.len(), 1 + ENVIRONMENT.len());
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("cb_node", "cb_nodes"), 1);
        assert_eq!(edit_distance("cb_ndoes", "cb_nodes"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(closest_hint("CB_NODES"), Some("cb_nodes"));
        assert_eq!(closest_hint("striping_facter"), Some("striping_factor"));
        assert_eq!(closest_hint("completely_unrelated"), None);
    }

    #[test]
    fn every_modelled_hint_is_displayed_once_resolved() {
        let hints = MpiioHints::default().resolved(4, 1 << 20, 8);
        let keys: Vec<&str> = hints.entries().iter().map(|(key, _)| *key).collect();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort_unstable();
        let mut names = HINT_NAMES.to_vec();
        names.sort_unstable();
        assert_eq!(sorted_keys, names);
        assert!(HINT_NAMES.iter().all(|name| !IGNORED_HINTS.contains(name)));
    }
}
