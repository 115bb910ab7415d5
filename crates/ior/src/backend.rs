//! The backend interface: IOR's `aiori` shape, kept small.
//!
//! What: a [`Backend`] is one I/O API (`POSIX`, `LANEFS`): it checks its module options,
//! hands each rank its own [`RankIo`] (its own file handle or client connection), deletes
//! files, reports file-system capacity for the `FS` line, and may add its own figures to
//! the report ([`BackendReport`]s, one top-level JSON object each). Each backend lives
//! in one file and the caller registers them in one table, the `&[&dyn Backend]` given
//! to [`crate::main_with`]; `-a NAME` picks one by name, case-insensitively. Module
//! options are namespaced by the backend's name in lower case: `--posix.odirect`,
//! `--lanefs.lock-mode=lockahead`.
//!
//! A backend that models I/O instead of doing it offers a [`PhaseModel`]
//! ([`Backend::phase_model`]), which runs whole phases for all ranks at once; see
//! `model` for what then changes.
//!
//! Why per-rank objects: ranks run as threads, each with its own `RankIo`, so a
//! backend's client state is never shared between ranks, as with MPI processes.
//!
//! Not here: offsets, timing, data checking — the run does those identically for every
//! backend, so backends only move bytes.

use crate::error::IorError;
use crate::model::PhaseModel;
use crate::params::IorParams;

/// File-system capacity, as `statfs` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsInfo {
    /// Total size in bytes.
    pub total_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Total inodes.
    pub total_inodes: u64,
    /// Free inodes.
    pub free_inodes: u64,
}

/// A module option a backend declares (`--posix.odirect`, `--lanefs.stripe-count=N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleOption {
    /// Name after the `<api>.` prefix.
    pub name: &'static str,
    /// `true` for `--api.name=value`, `false` for a flag.
    pub takes_value: bool,
    /// One line for `-h`.
    pub help: &'static str,
}

/// Options a backend takes under another module's prefix than its own: an
/// API backend running on a file system takes that file system's options
/// (`-a MPIIO` on lanefs takes `--lanefs.max-dirty-mb=...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Module {
    /// The prefix, lower case (`lanefs`).
    pub name: &'static str,
    pub options: &'static [ModuleOption],
}

/// A backend's own figures, added to the report after the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendReport {
    /// Top-level JSON key (`"lanefs"`), placed after `"summary"` and before `"Finished"`.
    pub key: String,
    /// The JSON object under that key.
    pub json: serde_json::Map<String, serde_json::Value>,
    /// Lines for the default text format, printed after the results table.
    pub text_lines: Vec<String>,
}

impl BackendReport {
    /// A report whose text lines are the JSON fields as IOR-style `%-20s: %s` lines,
    /// nested keys joined with dots (`locks.granted`).
    pub fn from_json(key: &str, json: serde_json::Map<String, serde_json::Value>) -> Self {
        let mut text_lines = Vec::new();
        flatten(key, &json, &mut text_lines);
        BackendReport { key: key.to_string(), json, text_lines }
    }

    /// A report for the JSON summary alone: what it holds is printed
    /// elsewhere in the default format (as the MPI-IO blocks are, on
    /// stderr).
    pub fn json_only(key: &str, json: serde_json::Map<String, serde_json::Value>) -> Self {
        BackendReport { key: key.to_string(), json, text_lines: Vec::new() }
    }
}

fn flatten(prefix: &str, map: &serde_json::Map<String, serde_json::Value>, lines: &mut Vec<String>) {
    for (name, value) in map {
        let key = format!("{prefix}.{name}");
        match value {
            serde_json::Value::Object(inner) => flatten(&key, inner, lines),
            serde_json::Value::String(text) => lines.push(format!("{key:<20}: {text}")),
            other => lines.push(format!("{key:<20}: {other}")),
        }
    }
}

/// One I/O API.
pub trait Backend: Sync {
    /// The name `-a` selects and the report prints (`"POSIX"`); its lower case is the
    /// module-option prefix.
    fn name(&self) -> &'static str;

    /// The `apiVersion` line (IOR prints an empty one for POSIX).
    fn version(&self) -> String {
        String::new()
    }

    /// The module options this backend understands.
    fn options(&self) -> &'static [ModuleOption] {
        &[]
    }

    /// Option modules it takes besides its own (see [`Module`]).
    fn other_modules(&self) -> &'static [Module] {
        &[]
    }

    /// Refuse parameters this backend cannot honour. The default checks the module
    /// options against [`Backend::options`] and [`Backend::other_modules`]; backends
    /// that override it should call [`check_modules`] too.
    fn check_params(&self, p: &IorParams) -> Result<(), IorError> {
        check_modules(self.name(), self.options(), self.other_modules(), p)
    }

    /// The I/O handle of `rank`, created once per run: its own client or connection.
    /// Never called when [`Backend::phase_model`] gives a model (which may return an
    /// error here).
    fn rank<'a>(&'a self, rank: u32, p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError>;

    /// Remove `path`; succeed if it does not exist.
    fn delete(&self, path: &str) -> Result<(), IorError>;

    /// The size of the file at `path`, for IOR's check of the bytes a phase
    /// moved; `None` where the backend cannot tell it cheaply.
    fn file_size(&self, _path: &str) -> Option<u64> {
        None
    }

    /// Create directory `path` (for `-u`); succeed if it exists.
    fn mkdir(&self, path: &str) -> Result<(), IorError> {
        let _ = path;
        Err(IorError::NotImplemented { backend: self.name(), operation: "mkdir (needed by -u)" })
    }

    /// Capacity of the file system holding directory `path`, for the `FS` line.
    /// [`IorError::NotImplemented`] prints IOR's "Backend doesn't implement statfs"
    /// warning, any other error its "Backend returned error during statfs".
    fn fs_info(&self, path: &str) -> Result<FsInfo, IorError> {
        let _ = path;
        Err(IorError::NotImplemented { backend: self.name(), operation: "statfs" })
    }

    /// Figures of the whole run, asked once after the last repetition. A backend with
    /// several objects overrides [`Backend::reports`] instead.
    fn report(&self) -> Option<BackendReport> {
        None
    }

    /// Counters this process's ranks kept for the report that only a sum
    /// over the job makes whole (counted by each rank's own client, not by
    /// the servers). Under a job of processes ([`crate::run_as_rank`]) every
    /// rank's are summed, position by position, and handed back to each
    /// through [`Backend::set_job_counters`] before the report. Default:
    /// none.
    fn rank_counters(&self) -> Vec<u64> {
        Vec::new()
    }

    /// Start counting this process's part of the run's time series (per
    /// OST and per client; the front end counts the ranks' bytes itself)
    /// in bins of `interval_s` from `origin` on: called before the first
    /// test's ranks are made. Default: nothing to count.
    fn start_timeline(&self, origin: std::time::Instant, interval_s: f64) -> Result<(), IorError> {
        let _ = (origin, interval_s);
        Ok(())
    }

    /// This process's part of the series, asked once after the last
    /// test's ranks are dropped (a backend with a [`Backend::phase_model`]
    /// gives the whole series, the ranks' groups included). Default: none.
    fn timeline(&self) -> Option<crate::timeseries::TimeSeries> {
        None
    }

    /// The job's sums of [`Backend::rank_counters`], to report in place of
    /// this process's own.
    fn set_job_counters(&self, totals: &[u64]) {
        let _ = totals;
    }

    /// Every report object of the run, in print order: JSON members after `"summary"`,
    /// text blocks after the results table. Keys must differ from each other and from
    /// IOR's top-level keys. Asked once after the last repetition; the default is
    /// [`Backend::report`].
    fn reports(&self) -> Vec<BackendReport> {
        self.report().into_iter().collect()
    }

    /// The whole-phase model of a backend that models I/O rather than moving bytes;
    /// `None` (the default) runs each rank as a thread with its own [`RankIo`].
    fn phase_model(&self) -> Option<&dyn PhaseModel> {
        None
    }
}

/// IOR's top-level JSON keys, which a [`BackendReport`] must not reuse.
const IOR_TOP_LEVEL_KEYS: [&str; 7] = ["Version", "Began", "Command line", "Machine", "tests", "summary", "Finished"];

/// Refuse report keys that would repeat a JSON member.
pub fn check_report_keys(backend: &'static str, reports: &[BackendReport]) -> Result<(), IorError> {
    for (index, report) in reports.iter().enumerate() {
        if IOR_TOP_LEVEL_KEYS.contains(&report.key.as_str()) || reports[..index].iter().any(|r| r.key == report.key) {
            return Err(IorError::backend(
                backend,
                format!("report key {:?} is used twice in the JSON report; give each report its own key", report.key),
            ));
        }
    }
    Ok(())
}

/// One rank's I/O handle: one file open at a time.
pub trait RankIo: Send {
    /// Open `path` for writing, creating it (IOR's `create`); do not truncate.
    fn create(&mut self, path: &str, p: &IorParams) -> Result<(), IorError>;
    /// Open the existing `path` for reading (read phase and `-W` check).
    fn open(&mut self, path: &str, p: &IorParams) -> Result<(), IorError>;
    /// Write all of `buf` at `offset`.
    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError>;
    /// Fill all of `buf` from `offset`; a short file is an error.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError>;
    /// Make written data durable (`-e`, `-Y`).
    fn fsync(&mut self) -> Result<(), IorError>;
    /// Close the open file.
    fn close(&mut self) -> Result<(), IorError>;
    /// This rank (or another) failed and the phase stops: release any other
    /// rank waiting for this one in the backend's own collective calls
    /// (ranks as threads; under `mpirun` the job is aborted instead).
    fn abandon(&mut self, reason: &str) {
        let _ = reason;
    }
}

/// The lower-case module prefix of a backend (`posix` for `POSIX`).
pub fn module_prefix(backend_name: &str) -> String {
    backend_name.to_ascii_lowercase()
}

/// Refuse module options of a module the backend does not take: `--lanefs.x`
/// in a `-a POSIX` run.
pub fn check_module_prefixes(p: &IorParams, backend_name: &str, others: &[Module]) -> Result<(), IorError> {
    let prefix = module_prefix(backend_name);
    for key in p.module_options.keys() {
        let (module, _) = key.split_once('.').unwrap_or((key, ""));
        if module != prefix && !others.iter().any(|m| m.name == module) {
            return Err(IorError::option(
                format!("--{key}"),
                format!(
                    "this is an option of the {} module, but the test runs with -a {backend_name}; add -a {} or drop it",
                    module.to_ascii_uppercase(),
                    module.to_ascii_uppercase()
                ),
            ));
        }
    }
    Ok(())
}

/// Check every `--<backend>.<name>` option against `declared`: known name, a value when
/// one is needed, `0`/`1` (or nothing) for a flag.
pub fn check_module_options(backend_name: &str, declared: &[ModuleOption], p: &IorParams) -> Result<(), IorError> {
    check_modules(backend_name, declared, &[], p)
}

/// [`check_module_options`] for a backend's own options (`declared`) and the
/// modules it takes besides (`others`).
pub fn check_modules(
    backend_name: &str,
    declared: &[ModuleOption],
    others: &[Module],
    p: &IorParams,
) -> Result<(), IorError> {
    check_module_prefixes(p, backend_name, others)?;
    let own = module_prefix(backend_name);
    for (key, value) in &p.module_options {
        let (module, name) = key.split_once('.').unwrap_or((key, ""));
        let (module_name, options) = match others.iter().find(|m| m.name == module) {
            Some(m) if module != own => (m.name.to_ascii_uppercase(), m.options),
            _ => (backend_name.to_string(), declared),
        };
        let Some(option) = options.iter().find(|o| o.name == name) else {
            let known: Vec<String> = options
                .iter()
                .map(|o| format!("--{module}.{}{}", o.name, if o.takes_value { "=..." } else { "" }))
                .collect();
            let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
            let taker = if module_name == backend_name { String::new() } else { format!(" (with -a {backend_name})") };
            return Err(IorError::option(
                format!("--{key}"),
                format!("unknown option of the {module_name} module{taker}; it supports: {known}"),
            ));
        };
        match (option.takes_value, value.as_deref()) {
            (true, None) | (true, Some("")) => {
                return Err(IorError::option(format!("--{key}"), format!("needs a value: --{key}=<value>")));
            }
            (false, Some(v)) if v != "0" && v != "1" => {
                return Err(IorError::option(
                    format!("--{key}={v}"),
                    format!("is a flag; write --{key} (or -O {key}=0/1)"),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse_args;

    const DECLARED: &[ModuleOption] = &[
        ModuleOption { name: "odirect", takes_value: false, help: "" },
        ModuleOption { name: "stripe-count", takes_value: true, help: "" },
    ];

    fn check(line: &str) -> Result<(), IorError> {
        let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        check_module_options("TEST", DECLARED, &parse_args(&args).unwrap())
    }

    #[test]
    fn module_options_are_checked() {
        assert!(check("--test.odirect --test.stripe-count=4").is_ok());
        assert!(check("-O test.odirect=0").is_ok());
        let e = check("--test.bogus").unwrap_err().to_string();
        assert!(
            e.contains(
                "--test.bogus: unknown option of the TEST module; it supports: --test.odirect, --test.stripe-count=..."
            ),
            "{e}"
        );
        assert!(check("--test.stripe-count")
            .unwrap_err()
            .to_string()
            .contains("needs a value: --test.stripe-count=<value>"));
        assert!(check("--test.odirect=yes").unwrap_err().to_string().contains("is a flag"));
        let e = check("--lanefs.lock-mode=x").unwrap_err().to_string();
        assert!(e.contains("option of the LANEFS module, but the test runs with -a TEST; add -a LANEFS"), "{e}");
    }

    /// A backend may take another module's options (an API on a file
    /// system takes the file system's), and only those it declares.
    #[test]
    fn other_modules_are_taken_as_declared() {
        const FS: &[Module] = &[Module { name: "lanefs", options: DECLARED }];
        let check = |line: &str| {
            let args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
            check_modules("MPIIO", &[], FS, &parse_args(&args).unwrap())
        };
        assert!(check("--lanefs.stripe-count=4 --lanefs.odirect").is_ok());
        let e = check("--lanefs.lock-mode=lockahead").unwrap_err().to_string();
        assert!(
            e.contains("unknown option of the LANEFS module (with -a MPIIO); it supports: --lanefs.odirect"),
            "{e}"
        );
        let e = check("--posix.odirect").unwrap_err().to_string();
        assert!(e.contains("option of the POSIX module, but the test runs with -a MPIIO"), "{e}");
        let e = check("--mpiio.bogus=1").unwrap_err().to_string();
        assert!(e.contains("unknown option of the MPIIO module; it supports: none"), "{e}");
    }

    #[test]
    fn report_keys_are_unique() {
        let report = |key: &str| BackendReport::from_json(key, serde_json::Map::new());
        assert!(check_report_keys("T", &[report("lanefs"), report("sim")]).is_ok());
        let e = check_report_keys("T", &[report("sim"), report("sim")]).unwrap_err().to_string();
        assert_eq!(e, "T: report key \"sim\" is used twice in the JSON report; give each report its own key");
        assert!(check_report_keys("T", &[report("summary")]).is_err());
    }

    #[test]
    fn report_text_lines_flatten_the_json() {
        let json = serde_json::json!({"locks": {"granted": 3, "mode": "lockahead"}, "rpcs": 12});
        let report = BackendReport::from_json("lanefs", json.as_object().unwrap().clone());
        assert_eq!(
            report.text_lines,
            vec![
                "lanefs.locks.granted: 3".to_string(),
                "lanefs.locks.mode   : lockahead".to_string(),
                "lanefs.rpcs         : 12".to_string(),
            ]
        );
    }
}
