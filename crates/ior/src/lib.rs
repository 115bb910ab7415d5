//! lanefs-ior: an IOR-compatible benchmark front end.
//!
//! Key decision: users paste their IOR 4.1 command lines and read the output with their
//! existing scripts, so this crate copies IOR's *interface* exactly — its options and
//! defaults, its offsets, its barrier and timer placement, and its default, JSON and
//! CSV formats down to column widths and JSON layout — and refuses, with a message naming
//! the fix, every IOR feature it does not implement rather than ignoring it. Ranks are
//! threads of one process, each with its own backend handle (or, under `mpirun`, the
//! processes of the job); `--tasks-per-node` says how IOR would have seen them placed on
//! nodes (one node by default).
//!
//! The shape is IOR's `aiori`: one [`Backend`] trait, one file per backend (this crate
//! provides [`PosixBackend`]; the lanefs client provides its own), one table of backends
//! given by the caller, and module options namespaced by backend (`--posix.odirect`,
//! `--lanefs.lock-mode=lockahead`). A backend that models I/O rather than doing it (the
//! simulator) offers a [`PhaseModel`] instead of rank handles: it answers for all ranks
//! of a phase at once in modelled time, and the same reduction and printers turn that
//! into IOR's report.
//!
//! Entry points: [`main_with`] for the `lanefs ior` command; [`parse_args`] and [`run`]
//! for programs and tests.
//!
//! Under `mpirun`, [`run_as_rank`] runs one rank per process, with barriers, the clock and
//! the reduction going through a `lanefs_mpiio::Communicator` (IOR's MPI), and rank 0
//! printing.
//!
//! Not here: the MPIIO backend (the front end carries `-c` and the MPI-IO hint options
//! for a backend that uses them, which prints `--mpiio.showHints`), IOR's HDF5, NCMPI and
//! other backends, and the features `-h` lists as refused.

mod api;
mod backend;
mod dry_run;
mod error;
mod hints;
mod model;
mod offsets;
mod options;
mod output;
mod params;
mod pattern;
mod phase;
mod posix;
mod run;
pub mod timeseries;
mod timing;

use std::io::Write;

pub use api::Api;
pub use backend::{check_module_options, check_modules, Backend, BackendReport, FsInfo, Module, ModuleOption, RankIo};
pub use error::IorError;
pub use hints::mpi_hints;
pub use model::{check_params as model_check_params, PhaseModel};
pub use offsets::{
    offsets, pretend_rank, read_rank_offset, test_file_name, transfer_offset, write_check_rank_offset, NodeMapping,
};
pub use options::{parse_args, parse_size};
pub use output::{host_name, IOR_VERSION};
pub use params::{IorParams, PacketType, SummaryFormat, NUM_TASKS_MAX, NUM_TASK_THREADS_MAX};
pub use posix::PosixBackend;
pub use run::{run, run_as_rank, IorSummary, IterationResult};
pub use timing::{reduce_phase, stats, summarize, OpSummary, PhaseResult, RankPhase, RankTimes, Stats};

/// The `lanefs ior` command: `args` are IOR's options (no program name). Prints the
/// report to `stdout` and returns the exit status: 0, or 1 when a data check (`-W`,
/// `-R`) found errors. `-a NAME` picks a backend of `backends` by name,
/// case-insensitively (default `POSIX`).
pub fn main_with(args: &[String], backends: &[&dyn Backend], stdout: &mut dyn Write) -> Result<i32, IorError> {
    if args.iter().any(|arg| arg == "-h" || arg == "--help") {
        stdout.write_all(usage(backends).as_bytes())?;
        return Ok(0);
    }
    let params = parse_args(args)?;
    let backend = select_backend(&params.api, backends)?;
    let summary = run(&params, backend, stdout)?;
    Ok(if summary.passed() { 0 } else { 1 })
}

/// The backend named `api` (case-insensitive).
pub fn select_backend<'a>(api: &str, backends: &[&'a dyn Backend]) -> Result<&'a dyn Backend, IorError> {
    backends.iter().copied().find(|b| b.name().eq_ignore_ascii_case(api)).ok_or_else(|| IorError::UnknownApi {
        api: api.to_string(),
        available: backends.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "),
    })
}

/// The `-h` text: the options lanefs-ior implements and each backend's module options.
pub fn usage(backends: &[&dyn Backend]) -> String {
    let apis: Vec<&str> = backends.iter().map(|b| b.name()).collect();
    let mut text = format!(
        "Usage: {} [options]   (IOR {} options and output)\n\n\
Flags\n\
  -c, --collective            collective I/O (for MPI-IO-like backends; POSIX ignores it, as IOR's)\n\
  -C, --reorderTasks          read back the data of the task -Q nodes further on (no shift on one node)\n\
  -e, --fsync                 fsync at the end of the write phase\n\
  -E, --useExistingTestFile   do not remove the test file before writing\n\
  -F, --filePerProc           one file per task\n\
  -g, --intraTestBarriers     barriers between open, transfer and close\n\
  -k, --keepFile              keep the test file(s)\n\
  -K, --keepFileWithError     keep the test file(s) after a data error\n\
  -r, --readFile              read phase\n\
  -R, --checkRead             verify the data read\n\
  -u, --uniqueDir             with -F, one directory per task\n\
  -v, --verbose               more output (repeat: -v -v)\n\
  -w, --writeFile             write phase\n\
  -W, --checkWrite            read back and verify after writing\n\
  -Y, --fsyncPerWrite         fsync after every write\n\
  -z, --randomOffset          shuffled (IOR's order) rather than sequential offsets within a file\n\
  -Z, --reorderTasksRandom    read back a random task's data (-Z -Z: a shuffle of the tasks)\n\
      --dryRun                run without any I/O, to see the options and the report\n\n\
Options with a value (sizes take k, m, g, t suffixes, base 2)\n\
  -a, --api=S                 API: {}\n\
  -A, --refNum=N              reference number for the summary\n\
  -b, --blockSize=N           contiguous bytes per task per segment (1m)\n\
  -d, --interTestDelay=N      seconds to wait before each phase\n\
  -D, --deadlineForStonewalling=N  stop each write and read phase after N seconds (0: never)\n\
  -f, --scriptFile=F          run the tests of an IOR script (IOR START ... RUN ... IOR STOP)\n\
  -G, --setTimeStampSignature=N  data signature (default: the clock)\n\
  -H, --mpiio.showHints       show the MPI-IO hints (printed by backends that use them)\n\
  -i, --repetitions=N         repetitions (1)\n\
  -l, --dataPacketType=S      timestamp, offset, incompressible or random: IOR's packets (default: lanefs's\n\
                              pattern, IOR's signature words and each word's file offset)\n\
  -N, --numTasks=N            tasks (ranks, run as threads up to {}, or modelled) (1)\n\
      --tasks-per-node=N      tasks on each node, ranks in blocks; nodes = ceil(-N / this) (all on one)\n\
  -o, --testFile=S            test file name (testFile)\n\
  -O key=val[,key=val]        directives: summaryFormat=default|JSON|CSV, summaryFile=F,\n\
                              stoneWallingWearOut=1, stoneWallingWearOutIterations=N,\n\
                              stoneWallingStatusFile=F, saveRankPerformanceDetailsCSV=F, any long option\n\
  -Q, --taskPerNodeOffset=N   node offset for -C (1)\n\
  -s, --segmentCount=N        segments (1)\n\
  -t, --transferSize=N        bytes per I/O call (256k)\n\
  -T, --maxTimeDuration=N     start no phase after N minutes\n\
  -U, --mpiio.hintsFileName=F file of IOR_HINT__MPI__key=value lines (with the IOR_HINT__ environment)\n\
  -X, --reorderTasksRandomSeed=N  seed for -Z (negative: changes with the repetition)\n\
      --random-offset-seed=N  seed for -z (-1: from the clock)\n\n\
Refused IOR features, each by name: -z -z, -j, -J, -m, -M, -n, -P, -q, -x, -y, -I,\n\
  -p/-V/-S (--mpiio.preallocate, useFileView, useStridedDatatype), HDF5 options,\n\
  minTimeDuration, savePerOpDataCSV, randomPrefill.\n",
        params::PROGRAM,
        output::IOR_VERSION,
        apis.join(", "),
        NUM_TASK_THREADS_MAX,
    );
    for backend in backends {
        let prefix = backend::module_prefix(backend.name());
        text += &format!("\nModule {}\n", backend.name());
        if backend.options().is_empty() && backend.other_modules().is_empty() {
            text += "  (no options)\n";
        }
        let own = std::iter::once((prefix.as_str(), backend.options()));
        let others = backend.other_modules().iter().map(|m| (m.name, m.options));
        for (module, options) in own.chain(others) {
            for option in options {
                let name = format!("--{module}.{}{}", option.name, if option.takes_value { "=V" } else { "" });
                // A name longer than the column still gets a space before its help.
                text += &format!("  {name:<27} {}\n", option.help);
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_are_selected_case_insensitively() {
        let table: [&dyn Backend; 1] = [&PosixBackend];
        assert_eq!(select_backend("posix", &table).unwrap().name(), "POSIX");
        let e = select_backend("MPIIO", &table).err().unwrap().to_string();
        assert_eq!(e, "invalid option -a MPIIO: no such backend; available: POSIX");
    }

    #[test]
    fn help_lists_module_options() {
        let mut out = Vec::new();
        let code = main_with(&["-h".to_string()], &[&PosixBackend], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(code, 0);
        assert!(text.contains("--posix.odirect"), "{text}");
        assert!(text.contains("-a, --api=S                 API: POSIX"));
    }
}
