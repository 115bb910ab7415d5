//! One IOR test, from the header to `Finished`.
//!
//! What: [`run`] checks the parameters with the backend, prints the header and options,
//! creates one [`crate::RankIo`] per rank, then for each repetition (`-i`) runs the
//! phases IOR runs — write, write check (`-W`), read (`-r`/`-R`), remove (unless `-k`,
//! or `-K` after a data error) — printing each phase's row as soon as it is reduced, and
//! ends with the summary, the backend's own reports and `Finished`. It returns the
//! figures as an [`IorSummary`] so callers and tests need not parse the text.
//!
//! Two executors run the phases: rank threads doing real I/O on the run's clock, or the
//! backend's [`PhaseModel`], which answers for all ranks of a phase at once in modelled
//! time (no threads, no `RankIo`, no `-d` sleep, no data checks; see `model`). Either
//! way the per-rank timers go through the same reduction and printers.
//!
//! Data-check errors do not stop the run (IOR counts them and goes on); they are
//! reported as IOR does and make [`IorSummary::passed`] false. Any other failure stops
//! every rank and is returned as the error of the first failing rank.
//!
//! Not here: the per-rank work (`phase`), the arithmetic (`timing`, `offsets`), the
//! formats (`output`).

use std::io::Write;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::backend::{check_module_prefixes, check_report_keys, Backend, RankIo};
use crate::error::IorError;
use crate::model::{self, PhaseModel};
use crate::offsets::{self, directory_of, NodeMapping};
use crate::output::{ctime_now, Printer, TestSummary};
use crate::params::{IorParams, NUM_TASKS_MAX, NUM_TASK_THREADS_MAX};
use crate::phase::{self, CheckOutcome, Clock, Phase, RanksRead, Team};
use crate::timeseries::{RankBins, TimeSeries};
use crate::timing::{reduce_phase, summarize, OpSummary, PhaseResult, RankPhase, Stonewalled};
use lanefs_mpiio::comm::{decode_u64s, encode_u64s, Communicator};

/// What one repetition measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IterationResult {
    /// The write phase (`-w`).
    pub write: Option<PhaseResult>,
    /// The read phase (`-r` or `-R`).
    pub read: Option<PhaseResult>,
    /// Seconds the removal took (when files were removed).
    pub remove_s: Option<f64>,
    /// Mismatching 8-byte words found by `-W`.
    pub write_check_errors: u64,
    /// Mismatching 8-byte words found by `-R`.
    pub read_check_errors: u64,
}

/// The outcome of a test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IorSummary {
    /// Backend name.
    pub api: &'static str,
    /// One entry per repetition (of every test, with a script).
    pub iterations: Vec<IterationResult>,
    /// `Summary of all tests` line for writes (with `-w`), of the last test.
    pub write: Option<OpSummary>,
    /// `Summary of all tests` line for reads (with `-r`), of the last test.
    pub read: Option<OpSummary>,
    /// Mismatching 8-byte words over all checks and repetitions.
    pub data_errors: u64,
    /// The run's time series, when `timeseries_interval_s` asked for one
    /// (a job's whole, on every rank).
    pub timeseries: Option<TimeSeries>,
}

impl IorSummary {
    /// No data check failed.
    pub fn passed(&self) -> bool {
        self.data_errors == 0
    }
}

/// Run the test `params` on `backend`, printing the report to `out` (and to
/// `-O summaryFile=` when given).
pub fn run(params: &IorParams, backend: &dyn Backend, out: &mut dyn Write) -> Result<IorSummary, IorError> {
    run_team(params, backend, out, None)
}

/// Run the test as rank `comm.rank()` of a job whose ranks are `comm`'s
/// (every process of an `mpirun`), as IOR does under MPI: this process
/// runs its own rank with its own handle, barriers and the gathering of
/// every rank's timers go through `comm`, and only rank 0 prints. `-N`
/// must be the communicator's size; `--tasks-per-node` is the
/// communicator's unless given. A rank that fails ends the job
/// ([`Communicator::abort`]).
pub fn run_as_rank(
    params: &IorParams,
    backend: &dyn Backend,
    out: &mut dyn Write,
    comm: &(dyn Communicator + Sync),
) -> Result<IorSummary, IorError> {
    if params.num_tasks != comm.size() {
        return Err(IorError::option(
            format!("-N {}", params.num_tasks),
            format!("the job has {} ranks: leave -N out under mpirun, or give -N {}", comm.size(), comm.size()),
        ));
    }
    let mut sink = std::io::sink();
    let out: &mut dyn Write = if comm.rank() == 0 { out } else { &mut sink };
    run_team(params, backend, out, Some(comm))
}

fn run_team(
    params: &IorParams,
    backend: &dyn Backend,
    out: &mut dyn Write,
    comm: Option<&(dyn Communicator + Sync)>,
) -> Result<IorSummary, IorError> {
    let dry_run = crate::dry_run::DryRun(backend);
    let api = backend.name();
    // The command line's test, then a script's others (`-f`).
    let tests: Vec<&IorParams> = std::iter::once(params).chain(&params.next_tests).collect();
    for p in &tests {
        if !p.api.eq_ignore_ascii_case(&params.api) {
            return Err(IorError::option(
                format!("api={} (test {} of {})", p.api, p.test_id, params.script_file.as_deref().unwrap_or("-f")),
                format!("every test of a script runs on the command line's API ({}); run a script per API", params.api),
            ));
        }
        if let Some(comm) = comm {
            if p.num_tasks != comm.size() {
                return Err(IorError::option(
                    format!("numTasks={} (test {})", p.num_tasks, p.test_id),
                    format!("the job has {} ranks: every test runs on all of them", comm.size()),
                ));
            }
        }
        if p.dry_run && backend.phase_model().is_some() {
            return Err(IorError::option(
                "--dryRun",
                format!("{api} models its I/O rather than doing it: there is no I/O to leave out; drop --dryRun"),
            ));
        }
        check_module_prefixes(p, backend.name(), backend.other_modules())?;
        backend.check_params(p)?;
        match backend.phase_model() {
            Some(_) => model::check_params(api, p)?,
            None => check_task_threads(api, p)?,
        }
    }
    if comm.is_none_or(|comm| comm.rank() == 0) {
        // As IOR's option parser: the file starts with its header line.
        for path in tests.iter().filter_map(|p| p.save_rank_details_csv.as_deref()) {
            std::fs::write(path, RANK_DETAILS_HEADER).map_err(|e| rank_details_error(path, e))?;
        }
    }
    let rank_bins = start_timeseries(params, &tests, backend, comm)?;
    let mut printer = Printer::new(params, out)?;
    printer.header(params)?;
    let mut summaries = Vec::with_capacity(tests.len());
    let mut iterations = Vec::new();
    for p in tests {
        // --dryRun: this test's file operations are skipped.
        let backend: &dyn Backend = if p.dry_run { &dry_run } else { backend };
        let fs = shows_free_space(&p.test_file).then(|| backend.fs_info(directory_of(&p.test_file)));
        printer.test_start(p, api, fs)?;
        printer.setup(p, api, &backend.version())?;
        let mut executor = Executor::new(backend, p, comm, rank_bins.as_ref())?;
        // -z without a seed: one from the clock, rank 0's, for the whole test.
        let seeded = if p.random_offset > 0 && p.random_seed == -1 {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_secs());
            let seed = executor.agree((now & 0x7fff_ffff) as u32)?;
            Some(IorParams { random_seed: i64::from(seed), ..p.clone() })
        } else {
            None
        };
        let summary_params = p;
        let p = seeded.as_ref().unwrap_or(p);
        let mut its = Vec::with_capacity(p.repetitions as usize);
        let mut modelled_s = 0.0;
        for rep in 0..p.repetitions {
            if rep == 0 {
                printer.table_header()?;
            }
            if rep > 0 && executor.time_is_up(p, modelled_s)? {
                // -T: no further repetition once the time is up.
                break;
            }
            its.push(iteration(p, &mut executor, &mut printer, rep, &mut modelled_s)?);
        }
        let writes: Vec<PhaseResult> = its.iter().filter_map(|it| it.write).collect();
        let reads: Vec<PhaseResult> = its.iter().filter_map(|it| it.read).collect();
        printer.short_summary(p, &writes, &reads)?;
        if p.stonewalling_wear_out {
            store_status(p, &its, &executor, &mut printer)?;
        }
        // Ranks hand their counters to the backend when dropped, before it reports.
        drop(executor);
        printer.test_end()?;
        let write = (p.write_file && !writes.is_empty()).then(|| summarize(&writes, p.transfer_size_bytes));
        let read = (p.read_file && !reads.is_empty()).then(|| summarize(&reads, p.transfer_size_bytes));
        summaries.push(TestSummary { params: summary_params, write, read });
        iterations.extend(its);
    }
    let timeseries = gather_at_end(params, backend, rank_bins.as_ref(), comm)?;
    let reports = backend.reports();
    check_report_keys(api, &reports)?;
    printer.long_summary(api, &summaries, &reports)?;
    printer.finished()?;
    let data_errors = iterations.iter().map(|it| it.write_check_errors + it.read_check_errors).sum();
    let last = summaries.pop().expect("at least one test");
    Ok(IorSummary { api, iterations, write: last.write, read: last.read, data_errors, timeseries })
}

/// With `timeseries_interval_s`, starts the run's time series: the bins of
/// this process's ranks (none for a backend that models phases, which
/// counts them itself) and the backend's, from one instant on (for a job,
/// every process's just after a barrier).
fn start_timeseries(
    params: &IorParams,
    tests: &[&IorParams],
    backend: &dyn Backend,
    comm: Option<&(dyn Communicator + Sync)>,
) -> Result<Option<RankBins>, IorError> {
    let interval_s = params.timeseries_interval_s;
    if interval_s <= 0.0 {
        return Ok(None);
    }
    if let Some(comm) = comm {
        comm.barrier().map_err(|e| IorError::backend("MPI", e.to_string()))?;
    }
    let ranks = match comm {
        Some(comm) => comm.rank()..comm.rank() + 1,
        None => 0..tests.iter().map(|p| p.num_tasks).max().unwrap_or(0),
    };
    let bins = RankBins::new(interval_s, ranks);
    backend.start_timeline(bins.origin(), interval_s)?;
    Ok(backend.phase_model().is_none().then_some(bins))
}

/// What the run gathers once its last test's ranks are gone: a job's sums
/// of its ranks' counters, and the run's time series, the ranks' bins and
/// the backend's part (a job's parts gathered from every process).
fn gather_at_end(
    params: &IorParams,
    backend: &dyn Backend,
    rank_bins: Option<&RankBins>,
    comm: Option<&(dyn Communicator + Sync)>,
) -> Result<Option<TimeSeries>, IorError> {
    if let Some(comm) = comm {
        sum_job_counters(backend, comm)?;
    }
    if params.timeseries_interval_s <= 0.0 {
        return Ok(None);
    }
    let source = if backend.phase_model().is_some() { "simulated" } else { "real" };
    let ranks = std::iter::once(params).chain(&params.next_tests).map(|p| p.num_tasks).max().unwrap_or(0);
    let mut series = TimeSeries::new(source, params.timeseries_interval_s);
    if let Some(bins) = rank_bins {
        series.merge(&bins.series(source, ranks));
    }
    if let Some(part) = backend.timeline() {
        series.merge(&part);
    }
    let Some(comm) = comm else { return Ok(Some(series)) };
    let comm_error = |e: lanefs_mpiio::CommError| IorError::Backend { backend: backend.name(), message: e.to_string() };
    let parts = comm.allgather(&crate::timeseries::encode(&series)).map_err(comm_error)?;
    let mut whole = TimeSeries::new(source, params.timeseries_interval_s);
    for (rank, part) in parts.iter().enumerate() {
        let part = crate::timeseries::decode(part).map_err(|e| {
            IorError::backend(backend.name(), format!("rank {rank} sent a time series this rank cannot read: {e}"))
        })?;
        whole.merge(&part);
    }
    Ok(Some(whole))
}

/// Sums every rank's [`Backend::rank_counters`] over the job and hands the
/// sums to the backend, so that rank 0 reports the job's counts.
fn sum_job_counters(backend: &dyn Backend, comm: &(dyn Communicator + Sync)) -> Result<(), IorError> {
    let mine = backend.rank_counters();
    if mine.is_empty() {
        return Ok(());
    }
    let comm_error = |e: lanefs_mpiio::CommError| IorError::Backend { backend: backend.name(), message: e.to_string() };
    let all = comm.allgather_same(&encode_u64s(&mine)).map_err(comm_error)?;
    let mut totals = vec![0u64; mine.len()];
    for (rank, theirs) in all.iter().enumerate() {
        for (total, count) in totals.iter_mut().zip(decode_u64s(rank as u32, theirs).map_err(comm_error)?) {
            *total = total.saturating_add(count);
        }
    }
    backend.set_job_counters(&totals);
    Ok(())
}

/// `-N` beyond what threads can do, for backends without a model.
fn check_task_threads(api: &str, p: &IorParams) -> Result<(), IorError> {
    if p.num_tasks <= NUM_TASK_THREADS_MAX {
        return Ok(());
    }
    Err(IorError::option(
        format!("-N {}", p.num_tasks),
        format!(
            "must be between 1 and {NUM_TASK_THREADS_MAX} with -a {api}: each task is a thread with its own buffers and client (backends that model I/O run up to {NUM_TASKS_MAX} tasks)"
        ),
    ))
}

/// Who runs the phases of a test.
enum Executor<'b> {
    /// Every rank a thread with its own handle, doing real I/O; timestamps are seconds
    /// on `clock`. A job's rank (`team` is `Team::World`) has one handle, its own.
    Threads {
        backend: &'b dyn Backend,
        clock: Clock<'b>,
        team: Team<'b>,
        ranks: Vec<Box<dyn RankIo + 'b>>,
        series: Option<&'b RankBins>,
    },
    /// The backend's model of whole phases, in modelled seconds.
    Model { api: &'static str, model: &'b dyn PhaseModel },
}

impl<'b> Executor<'b> {
    /// The model of `backend`, one [`RankIo`] per rank, or this job rank's.
    fn new(
        backend: &'b dyn Backend,
        p: &IorParams,
        comm: Option<&'b (dyn Communicator + Sync)>,
        series: Option<&'b RankBins>,
    ) -> Result<Self, IorError> {
        if let Some(model) = backend.phase_model() {
            if comm.is_some() {
                return Err(IorError::backend(backend.name(), "a backend that models I/O runs without mpirun"));
            }
            return Ok(Executor::Model { api: backend.name(), model });
        }
        let Some(comm) = comm else {
            let ranks = (0..p.num_tasks).map(|rank| backend.rank(rank, p)).collect::<Result<Vec<_>, _>>()?;
            let clock = Clock::Local(Instant::now());
            return Ok(Executor::Threads { backend, clock, team: Team::Threads, ranks, series });
        };
        let ranks = vec![backend.rank(comm.rank(), p)?];
        comm.barrier().map_err(|e| IorError::backend("MPI", e.to_string()))?;
        let clock = Clock::World { comm, base_s: comm.wtime() };
        Ok(Executor::Threads { backend, clock, team: Team::World(comm), ranks, series })
    }

    /// This repetition's data signature: rank 0's, for a job.
    fn signature(&self, p: &IorParams) -> Result<u32, IorError> {
        self.agree(signature(p))
    }

    /// `mine`, or rank 0's for a job, so that every rank uses one value.
    fn agree(&self, mine: u32) -> Result<u32, IorError> {
        match self {
            Executor::Threads { team: Team::World(comm), .. } => {
                let all = comm.allgather(&mine.to_le_bytes()).map_err(|e| IorError::backend("MPI", e.to_string()))?;
                let first = all.first().and_then(|b| <[u8; 4]>::try_from(b.as_slice()).ok());
                first.map(u32::from_le_bytes).ok_or_else(|| IorError::backend("MPI", "rank 0 sent no signature"))
            }
            _ => Ok(mine),
        }
    }

    /// `-T`: whether `p.max_time_duration_min` minutes have passed since the
    /// test started, on the run's clock (rank 0's answer for a job, so that
    /// every rank starts the same phases), or in the model's seconds.
    fn time_is_up(&self, p: &IorParams, modelled_s: f64) -> Result<bool, IorError> {
        if p.max_time_duration_min == 0 {
            return Ok(false);
        }
        let limit_s = f64::from(p.max_time_duration_min) * 60.0;
        match self {
            Executor::Model { .. } => Ok(modelled_s >= limit_s),
            Executor::Threads { clock, team: Team::Threads, .. } => Ok(clock.now_s() >= limit_s),
            Executor::Threads { clock, team: Team::World(comm), .. } => {
                let mine = [u8::from(clock.now_s() >= limit_s)];
                let all = comm.allgather_same(&mine).map_err(|e| IorError::backend("MPI", e.to_string()))?;
                Ok(all.first().is_some_and(|first| first.first() == Some(&1)))
            }
        }
    }

    fn models(&self) -> bool {
        matches!(self, Executor::Model { .. })
    }

    /// Rank 0's `mine`, for every rank of a job (or `mine` itself).
    fn agree_u64(&self, mine: u64) -> Result<u64, IorError> {
        match self {
            Executor::Threads { team: Team::World(comm), .. } => {
                let all =
                    comm.allgather_same(&mine.to_le_bytes()).map_err(|e| IorError::backend("MPI", e.to_string()))?;
                let first = all.first().and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok());
                first.map(u64::from_le_bytes).ok_or_else(|| IorError::backend("MPI", "rank 0 sent no count"))
            }
            _ => Ok(mine),
        }
    }

    /// Whether this process prints (rank 0 of a job, or every thread team).
    fn prints(&self) -> bool {
        !matches!(self, Executor::Threads { team: Team::World(comm), .. } if comm.rank() != 0)
    }

    fn write(
        &mut self,
        p: &IorParams,
        rep: u32,
        signature: u32,
    ) -> Result<(Vec<RankPhase>, Option<Stonewalled>), IorError> {
        match self {
            Executor::Threads { backend, clock, team, ranks, series } => {
                phase::write(&threads(p, *backend, (*clock, *team, *series), signature, rep, &[]), ranks)
            }
            Executor::Model { api, model } => {
                let ranks = model.write_phase(p, rep)?;
                model::check_phase(api, p, "write", &ranks)?;
                Ok((ranks, None))
            }
        }
    }

    fn check_write(
        &mut self,
        p: &IorParams,
        rep: u32,
        signature: u32,
        stop_after: &[u64],
    ) -> Result<Vec<CheckOutcome>, IorError> {
        match self {
            Executor::Threads { backend, clock, team, ranks, series } => {
                phase::check_write(&threads(p, *backend, (*clock, *team, *series), signature, rep, stop_after), ranks)
            }
            Executor::Model { .. } => unreachable!("run refuses -W with a model before it starts"),
        }
    }

    fn read(
        &mut self,
        p: &IorParams,
        rep: u32,
        signature: u32,
        stop_after: &[u64],
    ) -> Result<(RanksRead, Option<Stonewalled>), IorError> {
        match self {
            Executor::Threads { backend, clock, team, ranks, series } => {
                phase::read(&threads(p, *backend, (*clock, *team, *series), signature, rep, stop_after), ranks)
            }
            Executor::Model { api, model } => {
                assert!(!p.check_read, "run refuses -R with a model before it starts");
                let ranks = model.read_phase(p, rep)?;
                model::check_phase(api, p, "read", &ranks)?;
                Ok((ranks.into_iter().map(|r| (r, CheckOutcome::default())).collect(), None))
            }
        }
    }

    fn remove(&mut self, p: &IorParams, rep: u32, signature: u32) -> Result<f64, IorError> {
        match self {
            Executor::Threads { backend, clock, team, ranks, series } => {
                phase::remove(&threads(p, *backend, (*clock, *team, *series), signature, rep, &[]), ranks)
            }
            Executor::Model { api, model } => model::check_remove(api, model.remove(p, rep)?),
        }
    }
}

/// What the ranks of one phase share.
fn threads<'a>(
    p: &'a IorParams,
    backend: &'a dyn Backend,
    (clock, team, series): (Clock<'a>, Team<'a>, Option<&'a RankBins>),
    signature: u32,
    rep: u32,
    stop_after: &'a [u64],
) -> Phase<'a> {
    Phase { p, backend, clock, signature, rep, mapping: NodeMapping::from_params(p), team, stop_after, series }
}

/// One repetition: its write, write check and read phases, each started
/// only while `-T`'s time is not up (`modelled_s`: the modelled seconds a
/// backend that models phases has spent on the test so far).
fn iteration(
    p: &IorParams,
    executor: &mut Executor,
    printer: &mut Printer,
    rep: u32,
    modelled_s: &mut f64,
) -> Result<IterationResult, IorError> {
    let signature = executor.signature(p)?;
    let mut it = IterationResult::default();
    // A stonewalled write's transfer counts, by rank: the write check and
    // the read stop where the write did.
    let mut written = Vec::new();
    if p.write_file && !executor.time_is_up(p, *modelled_s)? {
        delay(p, printer, executor)?;
        let (ranks, stonewall) = executor.write(p, rep, signature)?;
        if let Some(wall) = &stonewall {
            printer.log(&wall.line())?;
        }
        let result = PhaseResult { stonewall, ..reduce_phase(&ranks, p.transfer_size_bytes) };
        check_file_size(p, executor, printer, result.agg_bytes)?;
        save_rank_details(p, executor, "write", &ranks, result.agg_bytes)?;
        printer.row("write", &result, p, rep)?;
        *modelled_s += result.total_s;
        it.write = Some(result);
        if p.deadline_for_stonewalling_s > 0 {
            written = ranks.iter().map(|r| r.transfers).collect();
        }
    }
    if p.check_write && !executor.time_is_up(p, *modelled_s)? {
        if p.verbose >= 1 {
            printer.log(&format!("Verifying contents of the file(s) just written.\n{}\n\n", ctime_now()))?;
        }
        let outcomes = executor.check_write(p, rep, signature, &written)?;
        it.write_check_errors = report_check(printer, "write", &outcomes, signature)?;
    }
    if (p.read_file || p.check_read) && !executor.time_is_up(p, *modelled_s)? {
        // IOR reads the status file even after a stonewalled write of the
        // same repetition, whose count it stores only when the test ends (so
        // such a read takes an older run's count, or reads everything);
        // lanefs's read stops where this repetition's write did.
        let stop_after = match &p.stonewalling_status_file {
            Some(path) if written.is_empty() => vec![read_status_file(path, executor, printer)?; p.num_tasks as usize],
            _ => written,
        };
        delay(p, printer, executor)?;
        let (ranks, stonewall) = executor.read(p, rep, signature, &stop_after)?;
        if let Some(wall) = &stonewall {
            printer.log(&wall.line())?;
        }
        let (ranks_read, outcomes): (Vec<_>, Vec<_>) = ranks.into_iter().unzip();
        it.read_check_errors = report_check(printer, "read", &outcomes, signature)?;
        let result = PhaseResult { stonewall, ..reduce_phase(&ranks_read, p.transfer_size_bytes) };
        check_file_size(p, executor, printer, result.agg_bytes)?;
        save_rank_details(p, executor, "read", &ranks_read, result.agg_bytes)?;
        printer.row("read", &result, p, rep)?;
        *modelled_s += result.total_s;
        it.read = Some(result);
    }
    let errors = it.write_check_errors + it.read_check_errors;
    let keep = p.keep_file || (errors > 0 && p.keep_file_with_error);
    if !keep {
        let elapsed_s = executor.remove(p, rep, signature)?;
        printer.remove_row(elapsed_s, rep)?;
        it.remove_s = Some(elapsed_s);
    }
    Ok(it)
}

/// IOR's `CheckFileSize`: warn when the bytes the ranks moved are not the
/// expected aggregate size, or not the size of the file(s) (as far as the
/// backend can tell it: [`Backend::file_size`]), as a stonewall makes them.
fn check_file_size(p: &IorParams, executor: &Executor, printer: &mut Printer, moved: u64) -> Result<(), IorError> {
    let Executor::Threads { backend, .. } = executor else { return Ok(()) };
    if !executor.prints() {
        return Ok(());
    }
    let stat = if p.file_per_proc {
        (0..p.num_tasks).map(|rank| backend.file_size(&offsets::test_file_name(p, rank))).sum::<Option<u64>>()
    } else {
        backend.file_size(&offsets::test_file_name(p, 0))
    };
    let expected = p.expected_agg_file_size_bytes();
    if expected == moved && stat.is_none_or(|size| size == moved) {
        return Ok(());
    }
    let mut text = format!("WARNING: Expected aggregate file size       = {expected}\n");
    if let Some(size) = stat {
        text += &format!("WARNING: Stat() of aggregate file size      = {size}\n");
    }
    text += &format!("WARNING: Using actual aggregate bytes moved = {moved}\n");
    if p.deadline_for_stonewalling_s > 0 {
        text += "WARNING: Maybe caused by deadlineForStonewalling\n";
    }
    printer.log(&text)?;
    Ok(())
}

/// The first line of `-O saveRankPerformanceDetailsCSV=`, as IOR writes it.
const RANK_DETAILS_HEADER: &str = "access,rank,runtime-with-openclose,runtime,throughput-withopenclose,throughput\n";

fn rank_details_error(path: &str, e: std::io::Error) -> IorError {
    IorError::option(format!("-O saveRankPerformanceDetailsCSV={path}"), format!("cannot write it: {e}"))
}

/// `-O saveRankPerformanceDetailsCSV=`: a line per rank with its time with
/// and without open and close, and the average rank's bytes divided by each
/// (IOR's `StoreRankInformation`, appended by rank 0).
fn save_rank_details(
    p: &IorParams,
    executor: &Executor,
    access: &str,
    ranks: &[RankPhase],
    agg_bytes: u64,
) -> Result<(), IorError> {
    let Some(path) = p.save_rank_details_csv.as_deref() else { return Ok(()) };
    if !executor.prints() {
        return Ok(());
    }
    let per_rank = agg_bytes as f64 / ranks.len() as f64;
    let mut lines = String::new();
    for (rank, r) in ranks.iter().enumerate() {
        let total_s = r.times.close_stop_s - r.times.open_start_s;
        let access_s = r.times.xfer_stop_s - r.times.xfer_start_s;
        let values = [total_s, access_s, per_rank / total_s, per_rank / access_s];
        let values: Vec<String> = values.iter().map(|&v| c_exponent(v, 10)).collect();
        lines += &format!("{access},{rank},{}\n", values.join(","));
    }
    let mut file =
        std::fs::OpenOptions::new().append(true).create(true).open(path).map_err(|e| rank_details_error(path, e))?;
    file.write_all(lines.as_bytes()).map_err(|e| rank_details_error(path, e))
}

/// C's `%.{digits}e`: `1.5000000000e+00`, `inf`, `nan`.
fn c_exponent(value: f64, digits: usize) -> String {
    if !value.is_finite() {
        return if value.is_nan() {
            "nan".into()
        } else if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let rust = format!("{value:.digits$e}");
    let (mantissa, exponent) = rust.split_once('e').expect("Rust's exponent format has an e");
    let exponent: i32 = exponent.parse().expect("Rust's exponent is an integer");
    format!("{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs())
}

/// `-O stoneWallingStatusFile=`: the transfer count a stonewalled write
/// stored, rank 0's for a job; 0 (no limit) with IOR's warning when it
/// cannot be read.
fn read_status_file(path: &str, executor: &Executor, printer: &mut Printer) -> Result<u64, IorError> {
    let stored = if executor.prints() {
        std::fs::read_to_string(path).ok().and_then(|text| text.trim().parse::<u64>().ok())
    } else {
        None
    };
    let count = executor.agree_u64(stored.unwrap_or(u64::MAX))?;
    if count == u64::MAX {
        printer.log("WARNING: Could not read back the stonewalling status from the file!\n")?;
        return Ok(0);
    }
    Ok(count)
}

/// At the end of a test with wear-out: the transfer count of the first
/// repetition's write, stored in `-O stoneWallingStatusFile=` for a later
/// read (by rank 0), or printed as IOR prints it.
fn store_status(
    p: &IorParams,
    its: &[IterationResult],
    executor: &Executor,
    printer: &mut Printer,
) -> Result<(), IorError> {
    // IOR stores 0 when the test wrote nothing; lanefs leaves the file as it was.
    let Some(pairs) = its.first().and_then(|it| it.write).and_then(|w| w.stonewall).map(|s| s.pairs_max) else {
        return Ok(());
    };
    match &p.stonewalling_status_file {
        Some(path) if executor.prints() => std::fs::write(path, pairs.to_string()).map_err(|e| {
            IorError::option(format!("-O stoneWallingStatusFile={path}"), format!("cannot write it: {e}"))
        })?,
        Some(_) => {}
        None => printer.log(&format!("Pairs deadlineForStonewallingaccessed: {pairs}\n"))?,
    }
    Ok(())
}

/// Print each rank's first mismatch and IOR's warning; the number of bad words.
fn report_check(
    printer: &mut Printer,
    access: &str,
    outcomes: &[CheckOutcome],
    signature: u32,
) -> Result<u64, IorError> {
    let errors: u64 = outcomes.iter().map(|o| o.errors).sum();
    for report in outcomes.iter().filter_map(|o| o.report.as_deref()) {
        printer.log(report)?;
    }
    if errors > 0 {
        printer.log(&format!(
            "WARNING: incorrect data on {access} ({errors} errors found).\nUsed Time Stamp {signature} (0x{signature:x}) for Data Signature\n"
        ))?;
    }
    Ok(errors)
}

/// `-d`: IOR's rank 0 sleeps before the phase while the others wait at the barrier. A
/// model delays in modelled time if it wants to; the `-v` line is the same.
fn delay(p: &IorParams, printer: &mut Printer, executor: &Executor) -> Result<(), IorError> {
    if p.inter_test_delay_s == 0 {
        return Ok(());
    }
    if p.verbose >= 1 {
        printer.log(&format!("delaying {} seconds . . .\n", p.inter_test_delay_s))?;
    }
    if !executor.models() {
        std::thread::sleep(std::time::Duration::from_secs(u64::from(p.inter_test_delay_s)));
    }
    Ok(())
}

/// `-G`, or the clock's seconds as IOR's rank 0 takes them at each repetition.
fn signature(p: &IorParams) -> u32 {
    if p.time_stamp_signature != 0 {
        // IOR stores the int into an unsigned int: wrap the same way.
        return p.time_stamp_signature as u32;
    }
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(1, |d| d.as_secs() as u32)
}

/// IOR skips the free-space lines for names like `pvfs2:/x` (`^[a-z][a-z].*:`).
fn shows_free_space(test_file: &str) -> bool {
    let bytes = test_file.as_bytes();
    let prefixed = bytes.len() > 2
        && bytes[0].is_ascii_lowercase()
        && bytes[1].is_ascii_lowercase()
        && test_file[2..].contains(':');
    !prefixed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_space_is_skipped_for_uri_like_names() {
        assert!(shows_free_space("/scratch/ior/testfile"));
        assert!(shows_free_space("testFile"));
        assert!(!shows_free_space("pvfs2:/x"));
        assert!(!shows_free_space("lanefs://fs/x"));
    }

    #[test]
    fn exponents_print_as_c_prints_them() {
        assert_eq!(c_exponent(1.5, 10), "1.5000000000e+00");
        assert_eq!(c_exponent(0.000123, 3), "1.230e-04");
        assert_eq!(c_exponent(123456.0, 2), "1.23e+05");
        assert_eq!(c_exponent(1e200, 1), "1.0e+200");
        assert_eq!(c_exponent(f64::INFINITY, 10), "inf");
    }

    #[test]
    fn signature_wraps_like_c() {
        let p = IorParams { time_stamp_signature: -1, ..IorParams::default() };
        assert_eq!(signature(&p), u32::MAX);
        let p = IorParams { time_stamp_signature: 42, ..IorParams::default() };
        assert_eq!(signature(&p), 42);
    }
}
