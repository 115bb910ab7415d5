//! lanefs-mpiio: collective MPI-IO on a striped file: the hints a job
//! passes, the two-phase collective-buffering plan with its lockahead
//! schedule, Cray MPICH's reports, and the layer that carries a plan out
//! through a communicator against one rank's handle on the file. It sits on
//! lanefs-core (layouts, lock advice), which knows nothing of it.
//!
//! What it is: the decisions ROMIO's Lustre driver and Cray MPT make for a
//! collective write (how many aggregators and where, which stripes each
//! aggregator owns and writes in which round, what every rank sends it,
//! which stripes it locks ahead) as pure functions and small value types;
//! the text of `MPICH_MPIIO_HINTS_DISPLAY`, `MPICH_MPIIO_STATS` and
//! `MPICH_MPIIO_TIMERS`; and [`two_phase::TwoPhase`], the one
//! implementation of two-phase I/O that carries those plans out, written
//! `async` over a rank's communicator and file ([`two_phase::RankIo`]):
//! [`collective::CollectiveFile`] runs it with blocking calls over a
//! [`comm::Communicator`] (threads of one process, or real MPI with the
//! `mpi` feature), and the discrete-event simulator polls it in virtual
//! time with phantom data.
//!
//! What it is not: a transport or a file system. Its callers give it a
//! communicator and a [`collective::FileAccess`] (a lanefs client's file, a
//! local file), and print the reports it returns.
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
//! - [`comm`]: the communicator interface, over threads and over MPI.
//! - [`two_phase`]: two-phase I/O carried out, for both worlds.
//! - [`collective`]: its blocking driver, `MPI_File_*` on real MPI.

pub mod collective;
pub mod comm;
pub mod hints;
pub mod plan;
pub mod report;
pub mod two_phase;

pub use collective::{CollectiveFile, FileAccess};
pub use comm::{CommError, Communicator, ThreadComm};
pub use hints::{
    display_environment, display_hints, hints_for_file, known_hints, parse_cli_hints, parse_hint_env, CbLockMode,
    CbMode, CrayLockMode, HintError, HintRule, MpiioHints,
};
pub use plan::{
    aggregator_count, aggregator_ranks, aggregator_rule, plan_collective, read_aggregator_count, schedule_call,
    AggregatorRule, AggregatorStep, CollectiveLocks, CollectivePlan, ExchangeMessage, LockaheadWindow, Piece,
    RefillPolicy, RoundSchedule, StripeWrite,
};
pub use report::{
    format_aggregator_placement, format_read_stats, format_write_stats, format_write_timers, AggregatorsActive,
    MpiioStats, MpiioTimers, PhaseTime, WriteTimers,
};
pub use two_phase::{CloseReport, CollectiveError, Phantom, RankIo, StripeBuffer, StripeBytes, Striping, TwoPhase};
