//! Many seeds: one at a time per thread, each caught if it panics, results
//! handed to the caller as they come, and a summary at the end.
//!
//! A panic in a seed (a broken node invariant, a swarm checker, a bug that
//! trips an assertion) ends that seed only: it is caught, its message kept
//! (the default hook's printing is held back while a seed runs, so a sweep
//! over a planted bug does not print ten thousand backtraces), and the seed
//! is reported as a crash.

use crate::adversary::AdversaryCounts;
use crate::faults::{FaultClass, FaultCounts};
use crate::options::SwarmOptions;
use crate::run::Driver;
use crate::Outcome;
use lanefs_core::planted::Bug;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Once};
use std::time::{Duration, Instant};

/// Threads one sweep may use, at most.
pub const JOBS_MAX: usize = 256;

/// Which seeds to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seeds {
    /// `first..end`, every one (unless the time budget runs out first).
    Range { first: u64, end: u64 },
    /// From `first` on, until the time budget runs out.
    From { first: u64 },
}

#[derive(Clone, Debug)]
pub struct SweepConfig {
    pub seeds: Seeds,
    /// Threads, each running one seed at a time.
    pub jobs: usize,
    /// Start no seed after this much wall time.
    pub budget: Option<Duration>,
    /// A bug planted in the core for every seed (needs the `planted-bugs`
    /// feature).
    pub planted: Option<Bug>,
    /// Draw only these fault classes ([`SwarmOptions::with_only`]); `None`:
    /// every class, as the seed draws them.
    pub only: Option<Vec<FaultClass>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SweepError {
    #[error("jobs must be between 1 and {JOBS_MAX}, not {0}")]
    Jobs(usize),
    #[error("seed range {first}..{end} is empty; give A-B with A <= B")]
    EmptyRange { first: u64, end: u64 },
    #[error("seeds from {0} on need a time budget to end; give one")]
    Unbounded(u64),
    #[error("this build has no planted bugs: build lanefs-swarm with --features planted-bugs (test builds only)")]
    PlantedBugsOff,
}

/// One seed's result.
#[derive(Clone, Debug)]
pub struct SeedResult {
    pub seed: u64,
    pub options: SwarmOptions,
    pub outcome: Outcome,
    pub faults: FaultCounts,
    pub steps: u64,
    pub trace_hash: u64,
    pub elapsed: Duration,
    /// What the adversary did, if the seed had one.
    pub adversary: Option<AdversaryCounts>,
}

/// A sweep's totals.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub seeds_run: u64,
    pub passed: u64,
    pub crashes: u64,
    pub liveness: u64,
    pub correctness: u64,
    /// Failing seeds, in seed order, with their exit codes.
    pub failures: Vec<(u64, i32)>,
    pub faults: FaultCounts,
    pub steps: u64,
    pub elapsed: Duration,
    /// Seeds with an adversary, and what it did in them together.
    pub adversary_seeds: u64,
    pub adversary: AdversaryCounts,
}

impl Summary {
    pub fn seeds_per_second(&self) -> f64 {
        self.seeds_run as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The exit code: 0 if every seed passed, else that of the lowest
    /// failing seed (the first to replay).
    pub fn exit_code(&self) -> i32 {
        self.failures.first().map_or(0, |&(_, code)| code)
    }

    fn add(&mut self, r: &SeedResult) {
        self.seeds_run += 1;
        match r.outcome {
            Outcome::Passed => self.passed += 1,
            Outcome::Crash(_) => self.crashes += 1,
            Outcome::Liveness(_) => self.liveness += 1,
            Outcome::Correctness(_) => self.correctness += 1,
        }
        if r.outcome.exit_code() != 0 {
            let at = self.failures.partition_point(|&(s, _)| s < r.seed);
            self.failures.insert(at, (r.seed, r.outcome.exit_code()));
        }
        self.faults += r.faults;
        self.steps += r.steps;
        if let Some(a) = r.adversary {
            self.adversary_seeds += 1;
            self.adversary += a;
        }
    }
}

thread_local! {
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static CAPTURED: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// While a seed runs on this thread, a panic's message is kept for its
/// report instead of printed.
fn install_panic_capture() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CAPTURING.with(Cell::get) {
                CAPTURED.with(|c| *c.borrow_mut() = Some(info.to_string()));
            } else {
                previous(info);
            }
        }));
    });
}

/// Run one seed on this thread, a panic caught as a crash.
pub fn run_seed(seed: u64, planted: Option<Bug>) -> SeedResult {
    run_seed_with(seed, planted, None, false).0
}

/// [`run_seed`] with only the fault classes `only` ([`SwarmOptions::with_only`]).
pub fn run_seed_only(seed: u64, planted: Option<Bug>, only: Option<&[FaultClass]>) -> SeedResult {
    run_seed_with(seed, planted, only, false).0
}

/// [`run_seed`], keeping the harness's trace of every message delivered
/// (a replay that shows what happened).
pub fn replay_seed(seed: u64, planted: Option<Bug>, only: Option<&[FaultClass]>) -> (SeedResult, Vec<String>) {
    run_seed_with(seed, planted, only, true)
}

/// The options seed `seed` runs with.
pub fn options_of(seed: u64, only: Option<&[FaultClass]>) -> SwarmOptions {
    let options = SwarmOptions::from_seed(seed);
    match only {
        Some(only) => options.with_only(only),
        None => options,
    }
}

fn run_seed_with(
    seed: u64,
    planted: Option<Bug>,
    only: Option<&[FaultClass]>,
    trace: bool,
) -> (SeedResult, Vec<String>) {
    // A seed that panics leaves its driver behind (the trace up to the
    // panic); one that passes is dropped here either way.
    install_panic_capture();
    #[cfg(feature = "planted-bugs")]
    lanefs_core::planted::plant(planted);
    #[cfg(not(feature = "planted-bugs"))]
    assert!(planted.is_none(), "a planted bug in a build without them (the sweep refuses it first)");
    let options = options_of(seed, only);
    let started = Instant::now();
    CAPTURING.with(|c| c.set(true));
    let mut driver = None;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let driver = driver.insert(Driver::new(options.clone()));
        if trace {
            driver.record_trace();
        }
        driver.run()
    }));
    let trace = driver.map(|d| d.trace().to_vec()).unwrap_or_default();
    CAPTURING.with(|c| c.set(false));
    #[cfg(feature = "planted-bugs")]
    lanefs_core::planted::plant(None);
    let elapsed = started.elapsed();
    match result {
        Ok(report) => {
            let result = SeedResult {
                seed,
                options,
                outcome: report.outcome,
                faults: report.faults,
                steps: report.steps,
                trace_hash: report.trace_hash,
                elapsed,
                adversary: report.adversary,
            };
            (result, trace)
        }
        Err(_) => {
            let message = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_else(|| "a panic".to_string());
            let result = SeedResult {
                seed,
                options,
                outcome: Outcome::Crash(message),
                faults: FaultCounts::default(),
                steps: 0,
                trace_hash: 0,
                elapsed,
                adversary: None,
            };
            (result, trace)
        }
    }
}

/// Run the seeds `config` names on its threads; `on_result` sees each
/// seed's result on the calling thread as it comes in.
pub fn sweep(config: &SweepConfig, mut on_result: impl FnMut(&SeedResult)) -> Result<Summary, SweepError> {
    if config.jobs == 0 || config.jobs > JOBS_MAX {
        return Err(SweepError::Jobs(config.jobs));
    }
    if config.planted.is_some() && !cfg!(feature = "planted-bugs") {
        return Err(SweepError::PlantedBugsOff);
    }
    let (first, end) = match config.seeds {
        Seeds::Range { first, end } if first >= end => return Err(SweepError::EmptyRange { first, end }),
        Seeds::Range { first, end } => (first, end),
        Seeds::From { first } if config.budget.is_none() => return Err(SweepError::Unbounded(first)),
        Seeds::From { first } => (first, u64::MAX),
    };
    let started = Instant::now();
    let deadline = config.budget.map(|b| started + b);
    let next = AtomicU64::new(first);
    let mut summary = Summary::default();
    let (tx, rx) = mpsc::channel::<SeedResult>();
    std::thread::scope(|scope| {
        for _ in 0..config.jobs {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return;
                }
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= end {
                    return;
                }
                if tx.send(run_seed_only(seed, config.planted, config.only.as_deref())).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        for result in rx {
            summary.add(&result);
            on_result(&result);
        }
    });
    summary.elapsed = started.elapsed();
    Ok(summary)
}
