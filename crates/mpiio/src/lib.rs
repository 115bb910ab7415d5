//! lanefs-mpiio: collective MPI-IO on a striped file, with no I/O and no
//! clock: the hints a job passes, the two-phase collective-buffering plan
//! with its lockahead schedule, and Cray MPICH's reports. It sits on
//! lanefs-core (layouts, lock advice), which knows nothing of it.
//!
//! What it is: the decisions ROMIO's Lustre driver and Cray MPT make for a
//! collective write (how many aggregators and where, which stripes each
//! aggregator owns and writes in which round, what every rank sends it,
//! which stripes it locks ahead) as pure functions and small value types,
//! plus the text of `MPICH_MPIIO_HINTS_DISPLAY`, `MPICH_MPIIO_STATS` and
//! `MPICH_MPIIO_TIMERS`. The discrete-event simulator drives it, and a real
//! MPI layer is to drive the same code, so that a simulated run and a real
//! one plan alike.
//!
//! What it is not: a transport or a timer. It moves no bytes and measures no
//! time; its callers send the planned messages, issue the planned writes
//! and lock requests through the client, and hand back the counters and
//! durations to print.
//!
//! Invariants (asserted by [`plan::CollectivePlan::check_invariants`]):
//! every requested byte lands in exactly one aggregator's stripe write; an
//! aggregator owns stripe `k` iff `k mod avail` is its index; each
//! aggregator writes at most one stripe per round; lockahead extents are
//! exactly stripes the aggregator owns.
//!
//! - [`hints`]: typed hints, `MPICH_MPIIO_HINTS` and `--hints` parsing, the display block.
//! - [`plan`]: aggregator count and placement, the two-phase plan, the lockahead window.
//! - [`report`]: the stats and timers blocks.

pub mod hints;
pub mod plan;
pub mod report;

pub use hints::{
    display_hints, hints_for_file, parse_cli_hints, parse_hint_env, CbLockMode, CbMode, CrayLockMode, HintError,
    HintRule, MpiioHints,
};
pub use plan::{
    aggregator_count, aggregator_ranks, aggregator_rule, plan_collective, read_aggregator_count, AggregatorRule,
    CollectivePlan, ExchangeMessage, LockaheadWindow, Piece, RefillPolicy, StripeWrite,
};
pub use report::{
    format_read_stats, format_write_stats, format_write_timers, AggregatorsActive, MpiioStats, MpiioTimers,
};
