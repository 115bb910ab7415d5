//! The MPI exchange between two ranks of this node, as `mpirun` runs
//! them: the one-way latency of a small message, the bandwidth of 4 MiB
//! messages, and the time per message of a stream of small non-blocking
//! sends (the CPU's work on each: LogP's overhead), and the time of an
//! `MPI_Test` that finds nothing, as is and where Open MPI yields the core
//! in it. A small C program ([`PROBE_SOURCE`]) is compiled with `mpicc`
//! into a private temporary directory and run with `mpirun -np 2`; it
//! prints its numbers; a second run times the tests alone under `--mca
//! mpi_yield_when_idle 1`. Open
//! MPI's eager limit over shared memory (above it a message waits for its
//! receiver: a rendezvous) is read from `ompi_info`, where it is there.
//!
//! Optional: without `mpicc` and `mpirun` on `PATH`, or when either fails,
//! the step is skipped, saying why.

use crate::child::Child;
use crate::step::{find_on_path, Step};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The program run under `mpirun`.
pub const PROBE_SOURCE: &str = include_str!("mpi_probe.c");
/// What the program's line of results starts with.
const RESULT_PREFIX: &str = "lanefs-mpi-probe ";
const COMPILE_WAIT: Duration = Duration::from_secs(60);
const RUN_WAIT: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, PartialEq)]
pub struct Mpi {
    pub latency_us: f64,
    pub bandwidth_gib_s: f64,
    pub message_cpu_us: f64,
    /// Rank 0's time per `MPI_Test` of a receive still to come.
    pub test_us: f64,
    /// The same where each test that finds nothing yields the core (Open
    /// MPI's `mpi_yield_when_idle`, on by default where a node runs more
    /// ranks than it has cores: `opal_progress` then calls `sched_yield`),
    /// or why it was not measured.
    pub test_yield_us: Result<f64, String>,
    /// Open MPI's eager limit between ranks of one node, in bytes
    /// (`btl_vader_eager_limit`, as `ompi_info` reports it), where known.
    pub eager_limit: Option<u64>,
    /// The counts run: round trips, 4 MiB messages, small messages.
    pub samples: Samples,
    /// `mpirun --version`'s first line.
    pub version: String,
}

/// How many of each the probe times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Samples {
    pub round_trips: u64,
    pub large_messages: u64,
    pub small_messages: u64,
}

/// Measures MPI between two ranks, or says why it cannot.
pub fn measure(samples: Samples) -> Step<Mpi> {
    let (Some(mpicc), Some(mpirun)) = (find_on_path("mpicc"), find_on_path("mpirun")) else {
        return Step::Skipped(
            "no mpicc and mpirun on PATH (install Open MPI's development package, e.g. libopenmpi-dev and \
             openmpi-bin)"
                .into(),
        );
    };
    match probe(&mpicc, &mpirun, samples) {
        Ok(m) => Step::Measured(m),
        Err(reason) => Step::Skipped(reason),
    }
}

fn probe(mpicc: &Path, mpirun: &Path, samples: Samples) -> Result<Mpi, String> {
    let dir = tempfile::Builder::new()
        .prefix("lanefs-calibrate-mpi-")
        .tempdir()
        .map_err(|e| format!("a private temporary directory for the MPI probe: {e}"))?;
    let _listed = crate::cleanup::list(crate::cleanup::Undo::Remove(dir.path().to_path_buf()));
    let source = dir.path().join("mpi_probe.c");
    let program = dir.path().join("mpi_probe");
    write_new(&source, PROBE_SOURCE)?;
    let mut compile = Command::new(mpicc);
    compile.arg("-O2").arg("-o").arg(&program).arg(&source);
    let mut compiler = Child::spawn(compile, "mpicc", dir.path().join("mpicc.log"))?;
    let status = compiler.wait_until(Instant::now() + COMPILE_WAIT)?;
    if !status.success() {
        return Err(format!("mpicc could not compile the probe ({status}){}", compiler.said()));
    }
    let rounds = [samples.round_trips, samples.large_messages, samples.small_messages].map(|n| n.to_string());
    let line = run_probe(mpirun, &program, &[], &rounds, &dir.path().join("mpirun.log"))?;
    let [latency_us, bandwidth_gib_s, message_cpu_us, test_us] = parse(&line)?;
    let yielding = ["--mca", "mpi_yield_when_idle", "1"];
    let tests = ["test".to_string(), samples.small_messages.to_string()];
    let test_yield_us = run_probe(mpirun, &program, &yielding, &tests, &dir.path().join("mpirun-yield.log"))
        .and_then(|line| value(&line, "test_us"));
    let eager_limit = find_on_path("ompi_info").and_then(|info| eager_limit(&info));
    Ok(Mpi {
        latency_us,
        bandwidth_gib_s,
        message_cpu_us,
        test_us,
        test_yield_us,
        eager_limit,
        samples,
        version: version(mpirun),
    })
}

/// Runs the probe under `mpirun -np 2` with `options` and `args`, its
/// standard error into a new file `log`; its line of results.
fn run_probe(mpirun: &Path, program: &Path, options: &[&str], args: &[String], log: &Path) -> Result<String, String> {
    let mut run = Command::new(mpirun);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        run.arg("--allow-run-as-root");
    }
    run.arg("--oversubscribe").args(options).args(["-np", "2"]).arg(program).args(args);
    let name = format!("mpirun -np 2 {}", options.join(" "));
    let mut ranks = Child::spawn(run, name.trim_end(), log.to_path_buf())?;
    let line = ranks.line_starting(RESULT_PREFIX, Instant::now() + RUN_WAIT)?;
    let status = ranks.wait_until(Instant::now() + RUN_WAIT)?;
    if !status.success() {
        return Err(format!("{} failed ({status}){}", name.trim_end(), ranks.said()));
    }
    Ok(line)
}

/// `btl_vader_eager_limit` from `ompi_info --parsable` (`None` where it
/// fails or has no shared-memory BTL by that name).
fn eager_limit(ompi_info: &Path) -> Option<u64> {
    let out = Command::new(ompi_info).args(["--parsable", "--param", "btl", "vader", "--level", "9"]).output().ok()?;
    parse_eager_limit(&String::from_utf8_lossy(&out.stdout))
}

/// The eager limit in `ompi_info --parsable`'s lines.
pub fn parse_eager_limit(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("mca:btl:vader:param:btl_vader_eager_limit:value:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A new file, owner-only, never through a link.
fn write_new(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The probe's `latency_us=L bandwidth_gib_s=B message_cpu_us=M
/// test_us=T`, each a positive finite number.
pub fn parse(line: &str) -> Result<[f64; 4], String> {
    Ok([
        value(line, "latency_us")?,
        value(line, "bandwidth_gib_s")?,
        value(line, "message_cpu_us")?,
        value(line, "test_us")?,
    ])
}

/// The probe's `key=V` in `line`, a positive finite number.
fn value(line: &str, key: &str) -> Result<f64, String> {
    let field = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix(key).and_then(|rest| rest.strip_prefix('=')))
        .ok_or_else(|| format!("the MPI probe printed no {key}: {line:?}"))?;
    match field.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("the MPI probe printed {key}={field}, not a positive number")),
    }
}

fn version(mpirun: &Path) -> String {
    Command::new(mpirun)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or_else(|| "mpirun".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probes_line_is_read_and_a_bad_one_refused() {
        let info = "mca:btl:vader:param:btl_vader_rndv_eager_limit:value:32768\n\
                    mca:btl:vader:param:btl_vader_eager_limit:value:4096\n";
        assert_eq!(parse_eager_limit(info), Some(4096), "the eager limit, not the rendezvous's first fragment");
        assert_eq!(parse_eager_limit("mca:btl:vader:param:btl_vader_eager_limit:value:lots\n"), None);
        let line = "latency_us=0.42 bandwidth_gib_s=7.5 message_cpu_us=0.1 test_us=0.2";
        assert_eq!(parse(line), Ok([0.42, 7.5, 0.1, 0.2]));
        assert!(parse("latency_us=0.42 bandwidth_gib_s=7.5").unwrap_err().contains("no message_cpu_us"));
        let e = parse("latency_us=nan bandwidth_gib_s=7.5 message_cpu_us=0.1 test_us=0.2").unwrap_err();
        assert!(e.contains("latency_us=nan, not a positive number"), "{e}");
    }

    #[test]
    fn the_probes_output_is_the_line_this_module_reads() {
        assert!(PROBE_SOURCE.contains(RESULT_PREFIX.trim_end()));
        for key in ["latency_us=", "bandwidth_gib_s=", "message_cpu_us=", "test_us="] {
            assert!(PROBE_SOURCE.contains(key), "{key}");
        }
    }
}
