//! The report, in IOR 4.1's three formats.
//!
//! What: [`Printer`] prints the report piece by piece as the run progresses (header,
//! test start, options, one row per phase, summary, `Finished`), in the order and with
//! the key names of IOR's ior-output.c. Like IOR's `PrintKeyVal` family, one call prints
//! a key/value as a `%-20s: %s` line in the default format and as a JSON member in JSON,
//! which keeps the two formats in step; the fixed-width tables live in `text`, the JSON
//! state machine in `json`, the CSV rows in `csv`.
//!
//! Streams, as IOR: results go to `-O summaryFile=` when given, else to the run's
//! output; the `IOR-...: MPI Coordinated Test` line, `-v` progress lines and warnings
//! always go to the run's output. Two deliberate differences: the statfs warnings are
//! printed in the default format only (in JSON they would make stdout unparsable), and
//! the CSV format prints only the CSV table.
//!
//! Not here: figures — the printer formats what `timing` computed.

pub mod csv;
pub mod json;
pub mod text;

use std::fs::File;
use std::io::{self, BufWriter, Write};

use crate::backend::{BackendReport, FsInfo};
use crate::error::IorError;
use crate::params::{IorParams, SummaryFormat};
use crate::timing::{OpSummary, PhaseResult, MB, MIB};
use json::JsonWriter;
use text::FsFigures;

/// The version printed as `IOR-<version>` and `"Version"`: IOR 4.1's format, lanefs's code.
pub const IOR_VERSION: &str = "4.1.0+lanefs";

/// One test's lines of `Summary of all tests`.
pub struct TestSummary<'p> {
    pub params: &'p IorParams,
    pub write: Option<OpSummary>,
    pub read: Option<OpSummary>,
}

/// The report being printed.
pub struct Printer<'o> {
    format: SummaryFormat,
    verbose: u32,
    out: &'o mut dyn Write,
    file: Option<BufWriter<File>>,
    json: JsonWriter,
}

impl<'o> Printer<'o> {
    /// A printer for `p`'s format; opens `-O summaryFile=` and says so, as IOR does.
    pub fn new(p: &IorParams, out: &'o mut dyn Write) -> Result<Self, IorError> {
        let file = match &p.summary_file {
            Some(path) => {
                let file = File::create(path).map_err(|source| IorError::Io {
                    backend: "IOR",
                    op: "create summary file".to_string(),
                    path: path.clone(),
                    source,
                })?;
                writeln!(out, "Writing output to {path}")?;
                Some(BufWriter::new(file))
            }
            None => None,
        };
        Ok(Printer { format: p.summary_format, verbose: p.verbose, out, file, json: JsonWriter::default() })
    }

    /// Where results go.
    fn res(&mut self) -> &mut dyn Write {
        match &mut self.file {
            Some(file) => file,
            None => &mut *self.out,
        }
    }

    /// Run `f` with the JSON state and the results stream.
    fn with_json(&mut self, f: impl FnOnce(&mut JsonWriter, &mut dyn Write) -> io::Result<()>) -> io::Result<()> {
        let Printer { json, file, out, .. } = self;
        let w: &mut dyn Write = match file {
            Some(file) => file,
            None => &mut **out,
        };
        f(json, w)
    }

    fn kv_str(&mut self, key: &str, value: &str) -> io::Result<()> {
        match self.format {
            SummaryFormat::Default => writeln!(self.res(), "{key:<20}: {value}"),
            SummaryFormat::Json => self.with_json(|j, w| j.key_str(w, key, value)),
            SummaryFormat::Csv => Ok(()),
        }
    }

    fn kv_int(&mut self, key: &str, value: i64) -> io::Result<()> {
        match self.format {
            SummaryFormat::Default => writeln!(self.res(), "{key:<20}: {value}"),
            SummaryFormat::Json => self.with_json(|j, w| j.key_int(w, key, value)),
            SummaryFormat::Csv => Ok(()),
        }
    }

    fn kv_f64(&mut self, key: &str, value: f64) -> io::Result<()> {
        match self.format {
            SummaryFormat::Default => writeln!(self.res(), "{key:<20}: {value:.4}"),
            SummaryFormat::Json => self.with_json(|j, w| j.key_f64(w, key, value)),
            SummaryFormat::Csv => Ok(()),
        }
    }

    fn named_section(&mut self, key: &str) -> io::Result<()> {
        match self.format {
            SummaryFormat::Default => write!(self.res(), "\n{key}: \n"),
            SummaryFormat::Json => self.with_json(|j, w| j.named_section(w, key)),
            SummaryFormat::Csv => Ok(()),
        }
    }

    fn json_only(&mut self, f: impl FnOnce(&mut JsonWriter, &mut dyn Write) -> io::Result<()>) -> io::Result<()> {
        if self.format == SummaryFormat::Json {
            return self.with_json(f);
        }
        Ok(())
    }

    /// A progress or warning line on the run's output (IOR's `out_logfile`).
    pub fn log(&mut self, line: &str) -> io::Result<()> {
        self.out.write_all(line.as_bytes())?;
        self.out.flush()
    }

    /// `IOR-...`, `Began`, `Command line`, `Machine` (IOR's `PrintHeader`).
    pub fn header(&mut self, p: &IorParams) -> io::Result<()> {
        match self.format {
            SummaryFormat::Default => writeln!(self.out, "IOR-{IOR_VERSION}: MPI Coordinated Test of Parallel I/O")?,
            SummaryFormat::Json => {
                self.with_json(|j, w| j.start_section(w))?;
                self.kv_str("Version", IOR_VERSION)?;
            }
            SummaryFormat::Csv => {}
        }
        self.kv_str("Began", &ctime_now())?;
        self.kv_str("Command line", &p.command_line)?;
        self.kv_str("Machine", &machine(self.verbose))?;
        self.json_only(|j, w| j.array_named_start(w, "tests"))
    }

    /// `TestID`, `StartTime`, `Path`/`FS` and, in JSON (or with `-vvv`), `Parameters`.
    pub fn test_start(&mut self, p: &IorParams, api: &str, fs: Option<Result<FsInfo, IorError>>) -> io::Result<()> {
        self.json_only(|j, w| j.start_section(w))?;
        self.kv_int("TestID", i64::from(p.test_id))?;
        self.kv_str("StartTime", &ctime_now())?;
        match fs {
            None => {}
            Some(Ok(info)) => self.fs_lines(&p.test_file, &info)?,
            Some(Err(IorError::NotImplemented { .. })) if self.format == SummaryFormat::Default => {
                self.log("WARNING: Backend doesn't implement statfs.\n")?
            }
            Some(Err(_)) if self.format == SummaryFormat::Default => {
                self.log("WARNING: Backend returned error during statfs.\n")?
            }
            Some(Err(_)) => {}
        }
        if self.verbose >= 3 || self.format == SummaryFormat::Json {
            self.parameters(p, api)?;
        }
        Ok(())
    }

    fn fs_lines(&mut self, path: &str, info: &FsInfo) -> io::Result<()> {
        let fs = FsFigures::new(info);
        match self.format {
            SummaryFormat::Default => {
                let line = fs.text_line();
                let w = self.res();
                writeln!(w, "{:<20}: {path}", "Path")?;
                w.write_all(line.as_bytes())
            }
            SummaryFormat::Json => {
                let text = format!(
                    "    , \"Path\": {},\"Capacity\": \"{:.1} {}\", \"Used Capacity\": \"{:2.1}%\",\"Inodes\": \"{:.1} Mi\", \"Used Inodes\" : \"{:2.1}%\"\n",
                    json::quote(path),
                    fs.size,
                    fs.unit,
                    fs.used_pct,
                    fs.inodes_mi,
                    fs.inodes_used_pct
                );
                self.with_json(|j, w| j.raw(w, &text))
            }
            SummaryFormat::Csv => Ok(()),
        }
    }

    /// IOR's `Parameters` block (`ShowTestStart`), same keys and order as IOR 4.1.
    fn parameters(&mut self, p: &IorParams, api: &str) -> io::Result<()> {
        let flag = |on: bool| i64::from(on);
        self.named_section("Parameters")?;
        self.kv_int("testID", i64::from(p.test_id))?;
        self.kv_int("refnum", p.reference_number)?;
        self.kv_str("api", api)?;
        self.kv_str("platform", &platform())?;
        self.kv_str("testFileName", &p.test_file)?;
        self.kv_int("deadlineForStonewall", i64::from(p.deadline_for_stonewalling_s))?;
        self.kv_int("stoneWallingWearOut", flag(p.stonewalling_wear_out))?;
        self.kv_int("maxTimeDuration", i64::from(p.max_time_duration_min))?;
        self.kv_int("outlierThreshold", 0)?;
        self.kv_str("options", "(null)")?;
        let ints: [(&str, i64); 13] = [
            ("dryRun", i64::from(p.dry_run)),
            ("nodes", i64::from(p.nodes())),
            ("memoryPerTask", 0),
            ("memoryPerNode", 0),
            ("tasksPerNode", i64::from(p.tasks_on_node0())),
            ("repetitions", i64::from(p.repetitions)),
            ("multiFile", 0),
            ("interTestDelay", i64::from(p.inter_test_delay_s)),
            ("fsync", flag(p.fsync)),
            ("fsyncperwrite", flag(p.fsync_per_write)),
            ("useExistingTestFile", flag(p.use_existing_test_file)),
            ("uniqueDir", flag(p.unique_dir)),
            ("singleXferAttempt", 0),
        ];
        let more: [(&str, i64); 14] = [
            ("readFile", flag(p.read_file)),
            ("writeFile", flag(p.write_file)),
            ("filePerProc", flag(p.file_per_proc)),
            ("reorderTasks", flag(p.reorder_tasks)),
            ("reorderTasksRandom", i64::from(p.reorder_tasks_random)),
            ("reorderTasksRandomSeed", p.reorder_tasks_random_seed),
            ("randomOffset", i64::from(p.random_offset)),
            ("checkWrite", flag(p.check_write)),
            ("checkRead", flag(p.check_read)),
            ("dataPacketType", p.data_packet_type.number()),
            ("keepFile", flag(p.keep_file)),
            ("keepFileWithError", flag(p.keep_file_with_error)),
            ("warningAsErrors", 0),
            ("verbose", i64::from(p.verbose)),
        ];
        for (key, value) in ints.iter().chain(more.iter()) {
            self.kv_int(key, *value)?;
        }
        self.kv_str("data packet type", p.data_packet_type.letter())?;
        self.kv_int("setTimeStampSignature/incompressibleSeed", p.time_stamp_signature)?;
        self.kv_int("collective", flag(p.collective))?;
        self.kv_int("segmentCount", p.segment_count as i64)?;
        self.kv_int("transferSize", p.transfer_size_bytes as i64)?;
        self.kv_int("blockSize", p.block_size_bytes as i64)?;
        self.json_only(|j, w| j.end_section(w))
    }

    /// The `Options` block (IOR's `ShowSetup`), then the start of `Results`.
    pub fn setup(&mut self, p: &IorParams, api: &str, api_version: &str) -> io::Result<()> {
        self.named_section("Options")?;
        self.kv_str("api", api)?;
        self.kv_str("apiVersion", api_version)?;
        self.kv_str("test filename", &p.test_file)?;
        self.kv_str("access", if p.file_per_proc { "file-per-process" } else { "single-shared-file" })?;
        self.kv_str("type", if p.collective { "collective" } else { "independent" })?;
        self.kv_int("segments", p.segment_count as i64)?;
        self.kv_str("ordering in a file", if p.random_offset > 0 { "random" } else { "sequential" })?;
        // As IOR's ShowSetup: -Z -Z prints no ordering line at all.
        if !p.reorder_tasks && p.reorder_tasks_random == 0 {
            self.kv_str("ordering inter file", "no tasks offsets")?;
        }
        if p.reorder_tasks {
            self.kv_str("ordering inter file", "constant task offset")?;
            self.kv_int("task offset", i64::from(p.task_per_node_offset))?;
        }
        if p.reorder_tasks_random == 1 {
            self.kv_str("ordering inter file", "random task offset")?;
            self.kv_int("task offset", i64::from(p.task_per_node_offset))?;
            self.kv_int("reorder random seed", p.reorder_tasks_random_seed)?;
        }
        self.kv_int("nodes", i64::from(p.nodes()))?;
        self.kv_int("tasks", i64::from(p.num_tasks))?;
        self.kv_int("clients per node", i64::from(p.tasks_on_node0()))?;
        self.kv_str("memoryBuffer", "CPU")?;
        self.kv_str("dataAccess", "CPU")?;
        self.kv_str("GPUDirect", "0")?;
        self.kv_int("repetitions", i64::from(p.repetitions))?;
        self.kv_str("xfersize", &text::human_readable(p.transfer_size_bytes))?;
        self.kv_str("blocksize", &text::human_readable(p.block_size_bytes))?;
        self.kv_str("aggregate filesize", &text::human_readable(p.expected_agg_file_size_bytes()))?;
        if p.dry_run {
            self.kv_int("dryRun", 1)?;
        }
        if p.verbose > 0 {
            self.kv_int("verbose", i64::from(p.verbose))?;
        }
        if p.deadline_for_stonewalling_s > 0 {
            self.kv_int("stonewallingTime", i64::from(p.deadline_for_stonewalling_s))?;
            self.kv_int("stoneWallingWearOut", i64::from(p.stonewalling_wear_out))?;
        }
        self.json_only(|j, w| j.end_section(w))?;
        match self.format {
            SummaryFormat::Default => write!(self.res(), "\nResults: \n"),
            SummaryFormat::Json => self.with_json(|j, w| j.named_array(w, "Results")),
            SummaryFormat::Csv => Ok(()),
        }
    }

    /// The table header, before the first repetition.
    pub fn table_header(&mut self) -> io::Result<()> {
        match self.format {
            SummaryFormat::Default => write!(self.res(), "\n{}", text::TABLE_HEADER),
            SummaryFormat::Csv => self.res().write_all(csv::HEADER.as_bytes()),
            SummaryFormat::Json => Ok(()),
        }
    }

    /// One phase's row (`access` is `write` or `read`).
    pub fn row(&mut self, access: &str, r: &PhaseResult, p: &IorParams, rep: u32) -> io::Result<()> {
        match self.format {
            SummaryFormat::Default => self.res().write_all(text::result_row(access, r, p, rep).as_bytes())?,
            SummaryFormat::Csv => self.res().write_all(csv::row(access, r, p, rep).as_bytes())?,
            SummaryFormat::Json => {
                self.with_json(|j, w| j.start_section(w))?;
                self.kv_str("access", access)?;
                self.kv_f64("bwMiB", r.bw_mib_per_s())?;
                self.kv_f64("blockKiB", p.block_size_bytes as f64 / 1024.0)?;
                self.kv_f64("xferKiB", p.transfer_size_bytes as f64 / 1024.0)?;
                self.kv_f64("iops", r.iops)?;
                self.kv_f64("latency", r.latency_s)?;
                self.kv_f64("openTime", r.open_s)?;
                self.kv_f64("wrRdTime", r.xfer_s)?;
                self.kv_f64("closeTime", r.close_s)?;
                self.kv_f64("totalTime", r.total_s)?;
                self.with_json(|j, w| j.end_section(w))?;
            }
        }
        self.res().flush()
    }

    /// The `remove` row, printed with `-v` (IOR's `PrintRemoveTiming`).
    pub fn remove_row(&mut self, total_s: f64, rep: u32) -> io::Result<()> {
        if self.verbose == 0 {
            return Ok(());
        }
        match self.format {
            SummaryFormat::Default => self.res().write_all(text::remove_row(total_s, rep).as_bytes()),
            SummaryFormat::Json => {
                self.with_json(|j, w| j.start_section(w))?;
                self.kv_str("access", "remove")?;
                self.kv_f64("totalTime", total_s)?;
                self.with_json(|j, w| j.end_section(w))
            }
            SummaryFormat::Csv => Ok(()),
        }
    }

    /// End of `Results`; with `-v`, the maximum bandwidths (IOR's `PrintShortSummary`).
    pub fn short_summary(&mut self, p: &IorParams, writes: &[PhaseResult], reads: &[PhaseResult]) -> io::Result<()> {
        self.json_only(|j, w| j.array_end(w))?;
        if self.verbose == 0 {
            return Ok(());
        }
        let max_bw = |phases: &[PhaseResult]| phases.iter().map(|r| r.bw_bytes_per_s).fold(0.0, f64::max);
        let (write_bw, read_bw) = (max_bw(writes), max_bw(reads));
        match self.format {
            SummaryFormat::Default => {
                if p.write_file {
                    self.res().write_all(text::max_line("Write", write_bw).as_bytes())?;
                }
                if p.read_file {
                    self.res().write_all(text::max_line("Read", read_bw).as_bytes())?;
                }
            }
            SummaryFormat::Json => {
                self.named_section("max")?;
                if p.write_file {
                    self.kv_f64("writeMiB", write_bw / MIB)?;
                    self.kv_f64("writeMB", write_bw / MB)?;
                }
                if p.read_file {
                    self.kv_f64("readMiB", read_bw / MIB)?;
                    self.kv_f64("readMB", read_bw / MB)?;
                }
                self.with_json(|j, w| j.end_section(w))?;
            }
            SummaryFormat::Csv => {}
        }
        Ok(())
    }

    /// End of the test object (JSON).
    pub fn test_end(&mut self) -> io::Result<()> {
        self.json_only(|j, w| j.end_section(w))
    }

    /// `Summary of all tests` (IOR's `PrintLongSummaryAllTests`): a line per operation
    /// the test had (`-w` and `-r`; a `-R`-only read is not summarized, as in IOR), and
    /// the backend's reports, in order: before the summary in text (right after the
    /// results table, each after a blank line), after it in JSON (top-level members
    /// before `Finished`).
    pub fn long_summary(&mut self, api: &str, tests: &[TestSummary], reports: &[BackendReport]) -> io::Result<()> {
        if self.format == SummaryFormat::Default {
            let w = self.res();
            for report in reports.iter().filter(|r| !r.text_lines.is_empty()) {
                w.write_all(b"\n")?;
                for line in &report.text_lines {
                    writeln!(w, "{line}")?;
                }
            }
        }
        match self.format {
            SummaryFormat::Default => write!(self.res(), "\nSummary of all tests:\n{}", text::SUMMARY_HEADER)?,
            SummaryFormat::Json => self.with_json(|j, w| {
                j.array_end(w)?;
                j.named_array(w, "summary")
            })?,
            SummaryFormat::Csv => return Ok(()),
        }
        for test in tests {
            let p = test.params;
            let operations = [
                ("write", test.write.as_ref().filter(|_| p.write_file)),
                ("read", test.read.as_ref().filter(|_| p.read_file)),
            ];
            for (operation, summary) in operations {
                let Some(summary) = summary else { continue };
                if self.format == SummaryFormat::Default {
                    self.res().write_all(text::summary_row(operation, summary, p, api).as_bytes())?;
                } else {
                    self.summary_json(operation, summary, p, api)?;
                }
            }
        }
        self.json_only(|j, w| j.array_end(w))?;
        for report in reports {
            self.json_only(|j, w| j.value_section(w, &report.key, &report.json))?;
        }
        Ok(())
    }

    fn summary_json(&mut self, operation: &str, s: &OpSummary, p: &IorParams, api: &str) -> io::Result<()> {
        self.with_json(|j, w| j.start_section(w))?;
        self.kv_str("operation", operation)?;
        self.kv_str("API", api)?;
        let ints: [(&str, i64); 13] = [
            ("TestID", i64::from(p.test_id)),
            ("ReferenceNumber", p.reference_number),
            ("segmentCount", p.segment_count as i64),
            ("blockSize", p.block_size_bytes as i64),
            ("transferSize", p.transfer_size_bytes as i64),
            ("numTasks", i64::from(p.num_tasks)),
            ("tasksPerNode", i64::from(p.tasks_on_node0())),
            ("repetitions", i64::from(p.repetitions)),
            ("filePerProc", i64::from(p.file_per_proc)),
            ("reorderTasks", i64::from(p.reorder_tasks)),
            ("taskPerNodeOffset", i64::from(p.task_per_node_offset)),
            ("reorderTasksRandom", i64::from(p.reorder_tasks_random)),
            ("reorderTasksRandomSeed", p.reorder_tasks_random_seed),
        ];
        for (key, value) in ints {
            self.kv_int(key, value)?;
        }
        let doubles: [(&str, f64); 9] = [
            ("bwMaxMIB", s.bw_mib.max),
            ("bwMinMIB", s.bw_mib.min),
            ("bwMeanMIB", s.bw_mib.mean),
            ("bwStdMIB", s.bw_mib.sd),
            ("OPsMax", s.ops.max),
            ("OPsMin", s.ops.min),
            ("OPsMean", s.ops.mean),
            ("OPsSD", s.ops.sd),
            ("MeanTime", s.mean_time_s),
        ];
        for (key, value) in doubles {
            self.kv_f64(key, value)?;
        }
        if let Some((time_s, bw_mib)) = s.stonewall {
            self.kv_f64("StoneWallTime", time_s)?;
            self.kv_f64("StoneWallbwMeanMIB", bw_mib)?;
        }
        self.kv_f64("xsizeMiB", s.agg_bytes_rep0 as f64 / MIB)?;
        self.with_json(|j, w| j.end_section(w))
    }

    /// `Finished` and the end of the report.
    pub fn finished(&mut self) -> io::Result<()> {
        self.kv_str("Finished", &ctime_now())?;
        self.json_only(|j, w| j.end_section(w))?;
        self.res().flush()?;
        self.out.flush()
    }
}

/// The local time as C's `ctime`, without the newline: `Sun Nov 22 01:43:27 2026`.
pub fn ctime_now() -> String {
    chrono::Local::now().format("%a %b %e %H:%M:%S %Y").to_string()
}

/// `uname(2)` fields: sysname, nodename, release, version, machine.
fn uname() -> Option<[String; 5]> {
    let mut buf = std::mem::MaybeUninit::<libc::utsname>::uninit();
    // SAFETY: buf is writable memory of the right type; uname only writes into it.
    if unsafe { libc::uname(buf.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: uname returned 0, so every field holds a NUL-terminated string.
    let buf = unsafe { buf.assume_init() };
    let field = |chars: &[libc::c_char]| {
        let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Some([field(&buf.sysname), field(&buf.nodename), field(&buf.release), field(&buf.version), field(&buf.machine)])
}

/// This host's name (`uname`'s nodename), as MPI launchers name hosts.
pub fn host_name() -> Option<String> {
    uname().map(|[_, node, ..]| node)
}

/// IOR's `Machine` value: `Linux <host>` (plus release, version and machine with `-vv`).
pub fn machine(verbose: u32) -> String {
    match uname() {
        None => "Unknown".to_string(),
        Some([sys, node, release, version, arch]) if verbose >= 2 => format!("{sys} {node} {release} {version} {arch}"),
        Some([sys, node, ..]) => format!("{sys} {node}"),
    }
}

/// IOR's `GetPlatformName`: the host name without its trailing digits, then `(sysname)`.
pub fn platform() -> String {
    let Some([sys, node, ..]) = uname() else { return "Unknown(Unknown)".to_string() };
    let trimmed = node.trim_end_matches(|c: char| c.is_ascii_digit());
    let trimmed = if trimmed.is_empty() { node.as_str() } else { trimmed };
    format!("{trimmed}({sys})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctime_has_cs_layout() {
        let now = ctime_now();
        assert_eq!(now.len(), 24, "{now}");
        assert_eq!(&now[3..4], " ");
        assert_eq!(&now[19..20], " ");
    }

    #[test]
    fn machine_and_platform() {
        assert!(machine(0).starts_with("Linux "));
        assert!(platform().ends_with("(Linux)"));
    }
}
