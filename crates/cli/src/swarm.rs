//! `lanefs swarm`: the fault swarm over a range of seeds, one seed, or a
//! time budget (parsing and printing only; lanefs-swarm does the work).
//!
//! Prints each failing seed's options, its finding and the command that
//! replays it, then a summary; exits 0 if every seed passed, else with the
//! code of the lowest failing seed: 127 crash, 128 liveness, 129
//! correctness (as TigerBeetle's VOPR).

use crate::out::{outln, unless_reader_gone};
use anyhow::{anyhow, bail, Context, Result};
use lanefs_core::planted::Bug;
use lanefs_swarm::faults::FaultClass;
use lanefs_swarm::{SeedResult, Seeds, Summary, SweepConfig};
use std::io;
use std::process::ExitCode;
use std::time::Duration;

/// Seeds a sweep runs when given neither seeds nor a time budget.
const SEEDS_DEFAULT: u64 = 1000;
/// The variable that plants one of the core's bugs (builds with the
/// `planted-bugs` feature only).
const PLANTED_VAR: &str = "LANEFS_PLANTED_BUG";

#[derive(clap::Args)]
pub struct SwarmArgs {
    /// Run this one seed: print its options first, then its finding.
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// A range of seeds, A-B (both included).
    #[arg(long, value_name = "A-B")]
    seeds: Option<String>,
    /// Stop starting seeds after this many seconds (without --seeds: fresh
    /// seeds from a random start until then).
    #[arg(long)]
    seconds: Option<f64>,
    /// Threads, each running one seed at a time (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Draw only these fault classes, comma-separated (each then strikes in
    /// every seed): drop, delay, client_crash, ost_crash, partition,
    /// write_failure, commit_failure. Give it again to replay such a seed.
    #[arg(long, value_name = "CLASSES")]
    only: Option<String>,
    /// With --seed: print every message the run delivered.
    #[arg(long, requires = "seed")]
    trace: bool,
}

/// The swarm's exit code is its verdict, so it stands even when nobody
/// reads the report any more: a closed stdout ends the printing, not the
/// run (`out::unless_reader_gone`).
pub fn main(args: SwarmArgs) -> Result<ExitCode> {
    let planted = planted_bug()?;
    let only = args.only.as_deref().map(parse_classes).transpose()?;
    if let Some(seed) = args.seed {
        let (printed, code) = one_seed(seed, planted, only.as_deref(), args.trace);
        unless_reader_gone(printed)?;
        return Ok(code);
    }
    let budget = match args.seconds {
        Some(s) if !(s.is_finite() && s > 0.0) => bail!("--seconds {s} is not a positive number of seconds"),
        Some(s) => Some(Duration::from_secs_f64(s)),
        None => None,
    };
    let seeds = match (&args.seeds, budget) {
        (Some(range), _) => parse_range(range)?,
        (None, Some(_)) => Seeds::From { first: fresh_seed() },
        (None, None) => Seeds::Range { first: 0, end: SEEDS_DEFAULT },
    };
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let config = SweepConfig { seeds, jobs, budget, planted, only: only.clone() };
    let mut printed = print_start(seeds, jobs, planted, args.only.as_deref());
    let replay = args.only.as_ref().map_or(String::new(), |c| format!(" --only {c}"));
    let summary = lanefs_swarm::sweep(&config, |r| {
        if printed.is_ok() {
            printed = print_failure(r, &replay);
        }
    })
    .map_err(|e| anyhow!("{e}"))?;
    unless_reader_gone(printed.and_then(|()| print_summary(&summary, &replay)))?;
    Ok(ExitCode::from(summary.exit_code() as u8))
}

fn print_start(seeds: Seeds, jobs: usize, planted: Option<Bug>, only: Option<&str>) -> io::Result<()> {
    match seeds {
        Seeds::Range { first, end } => outln!("lanefs swarm: seeds {first}-{} on {jobs} threads", end - 1)?,
        Seeds::From { first } => outln!("lanefs swarm: seeds from {first} on {jobs} threads")?,
    }
    if let Some(bug) = planted {
        outln!("planted bug: {}", bug.name())?;
    }
    if let Some(classes) = only {
        outln!("only faults: {classes}")?;
    }
    Ok(())
}

/// Run one seed: what printing it gave, and the seed's exit code.
fn one_seed(seed: u64, planted: Option<Bug>, only: Option<&[FaultClass]>, trace: bool) -> (io::Result<()>, ExitCode) {
    let header = outln!("{}", lanefs_swarm::options_of(seed, only));
    let (result, lines) = lanefs_swarm::replay_seed(seed, planted, only);
    let code = ExitCode::from(result.outcome.exit_code() as u8);
    let report = || -> io::Result<()> {
        if trace {
            for line in &lines {
                outln!("{line}")?;
            }
        }
        let faults = fault_list(&result.faults.by_class);
        match &result.outcome {
            lanefs_swarm::Outcome::Passed => {
                outln!("passed: {} steps, faults: {faults}, {:.3} s", result.steps, result.elapsed.as_secs_f64())
            }
            outcome => outln!("{} ({}): {}", outcome.kind(), outcome.exit_code(), outcome.message()),
        }
    };
    (header.and_then(|()| report()), code)
}

fn print_failure(r: &SeedResult, replay: &str) -> io::Result<()> {
    if r.outcome.exit_code() == 0 {
        return Ok(());
    }
    outln!("{}", r.options)?;
    outln!("  {} ({}): {}", r.outcome.kind(), r.outcome.exit_code(), r.outcome.message())?;
    outln!("  replay: lanefs swarm --seed {}{replay}", r.seed)
}

fn print_summary(s: &Summary, replay: &str) -> io::Result<()> {
    outln!(
        "{} seeds in {:.1} s ({:.1} seeds/s, {} steps): {} passed, {} crashed, {} liveness, {} correctness",
        s.seeds_run,
        s.elapsed.as_secs_f64(),
        s.seeds_per_second(),
        s.steps,
        s.passed,
        s.crashes,
        s.liveness,
        s.correctness
    )?;
    outln!("faults injected: {}", fault_list(&s.faults.by_class))?;
    if s.adversary_seeds > 0 {
        let a = &s.adversary;
        outln!(
            "adversary in {} seeds: {} messages ({} forged lock replays, {} forged change replays, \
             {} cancels of others' locks, {} floods); evicted {} times",
            s.adversary_seeds,
            a.sent,
            a.forged_lock_replays,
            a.forged_change_replays,
            a.foreign_cancels,
            a.floods,
            a.evicted
        )?;
    }
    if let Some(&(seed, code)) = s.failures.first() {
        outln!("first failing seed: {seed} (exit {code}); replay: lanefs swarm --seed {seed}{replay}")?;
    }
    Ok(())
}

fn fault_list(by_class: &[u64]) -> String {
    FaultClass::ALL.iter().map(|c| format!("{} {}", c.name(), by_class[*c as usize])).collect::<Vec<_>>().join(", ")
}

/// `drop,ost_crash`: fault classes by name.
fn parse_classes(text: &str) -> Result<Vec<FaultClass>> {
    text.split(',')
        .map(|name| {
            FaultClass::from_name(name.trim()).with_context(|| {
                let names: Vec<&str> = FaultClass::ALL.iter().map(|c| c.name()).collect();
                format!("--only {text}: {name} is no fault class; one of: {}", names.join(", "))
            })
        })
        .collect()
}

/// `A-B`, both included.
fn parse_range(text: &str) -> Result<Seeds> {
    let (a, b) = text.split_once('-').with_context(|| format!("--seeds {text}: give a range A-B"))?;
    let first: u64 = a.trim().parse().with_context(|| format!("--seeds {text}: {a} is not a seed"))?;
    let last: u64 = b.trim().parse().with_context(|| format!("--seeds {text}: {b} is not a seed"))?;
    if last < first || last == u64::MAX {
        bail!("--seeds {text}: the range is empty or too large; give A-B with A <= B < 2^64-1");
    }
    Ok(Seeds::Range { first, end: last + 1 })
}

/// A start for fresh seeds: the clock's nanoseconds, so that every
/// `make swarm` explores new ones (each seed still replays on its own).
fn fresh_seed() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (now.as_nanos() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16
}

fn planted_bug() -> Result<Option<Bug>> {
    match std::env::var(PLANTED_VAR) {
        Err(_) => Ok(None),
        Ok(name) if name.is_empty() => Ok(None),
        Ok(name) => match Bug::from_name(&name) {
            Some(bug) => Ok(Some(bug)),
            None => {
                let names: Vec<&str> = Bug::ALL.iter().map(|b| b.name()).collect();
                bail!("{PLANTED_VAR}={name} names no planted bug; one of: {}", names.join(", "))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_with_both_ends_included() {
        assert_eq!(parse_range("3-7").unwrap(), Seeds::Range { first: 3, end: 8 });
        assert_eq!(parse_range("5-5").unwrap(), Seeds::Range { first: 5, end: 6 });
        assert!(parse_range("7-3").is_err());
        assert!(parse_range("7").is_err());
        assert!(parse_range("a-3").is_err());
    }
}
