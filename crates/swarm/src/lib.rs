//! lanefs-swarm: a seeded fault swarm over the deterministic harness, to
//! find the next bug before a user does (TigerBeetle's VOPR, FoundationDB's
//! simulation, on lanefs-core's clients and OSTs and lanefs-mds's MDS).
//!
//! Key design decision: a run is a pure function of its seed. The seed
//! draws the options ([`options::SwarmOptions`]: cluster, limits, files,
//! fault mix), the clients' programs ([`workload`]) and the fault schedule
//! ([`faults`]) from separate streams, and the harness draws its latencies
//! from it too; nothing else varies. A failure is therefore replayed, and
//! debugged, from its seed alone: `lanefs swarm --seed N`.
//!
//! A run ([`run`]):
//! 1. prints `SEED=... options...` (the caller does, from the options);
//! 2. the safety phase: every client runs its program (independent and
//!    collective-style writes, reads, fsyncs, closes and reopens,
//!    truncates, lockahead, GROUP locks, and through the MDS opens of the
//!    data files and creates, unlinks, stats and listings of names of its
//!    own) while faults strike: dropped connections, slow networks, client
//!    crashes, OST crashes (what was not committed is lost) and restarts,
//!    partitions and heals, failing writes (`EIO`, `ENOSPC`), failing
//!    commits, MDS crashes and restarts (what SQLite had not committed is
//!    lost) and dropped client-MDS connections;
//! 3. the liveness phase: everything is healed, every surviving client
//!    finishes what it started, fsyncs and closes its files, a fresh
//!    client opens and reads every file back, and the MDS destroys the
//!    objects of every removed file, all within a bounded number of steps
//!    and of virtual seconds;
//! 4. the oracle ([`oracle`]) judges the whole history per byte, and the
//!    namespace oracle ([`mds::Namespace`]) every answer of the MDS.
//!
//! An adversary: in half the seeds a hostile node ([`adversary`]) joins
//! the clients, with forged replays, others' handles, and floods within
//! its share; the others' results must be as if it were not there.
//!
//! What it checks. After every step: every node's invariants (the
//! harness's `check_invariants`, among them the lock server's "no two
//! incompatible granted locks") and the swarm's own checkers
//! ([`checkers`]), kept apart from the protocol code; after every change
//! of the MDS (a request served, destroys recorded, a restart), the MDS's
//! own `Mds::check_invariants` over its database. At the end: every
//! completed read returned, per byte, the last write completed before it
//! began or one concurrent with it, unless the newer writes were lost and
//! the loss reported; no fsynced byte was lost; every lost byte was
//! reported to its writer (a failed fsync or close of the file, a
//! `DataLost` event for one of its OSTs) or its writer crashed; every loss
//! report and failed operation follows a fault that touched that client
//! and an OST of the file (a quiet seed has none); and the healed cluster
//! finished its work and went idle with nothing left waiting. Of the
//! namespace: every acknowledged create and unlink holds, across MDS
//! restarts; a file's layout never changes and is the striping asked for;
//! no object id is handed out twice; no object of a live file is
//! destroyed; every object no file holds any more is destroyed in the end.
//!
//! Exit codes, as the VOPR's ([`Outcome::exit_code`]): 0 passed, 127 a
//! crash (a panic, including a broken node invariant or checker, caught per
//! seed), 128 liveness (the healed cluster did not finish within the
//! bound), 129 correctness (safety: the oracle found a wrong byte, an
//! unreported or invented loss, an unexplained error).
//!
//! The MDS is lanefs-mds's own, in SQLite, as a node of the swarm's world
//! ([`mds`]): its messages travel in the harness's virtual time. Not
//! modelled: the MDS's precreation on the OSTs (the harness's OSTs make an
//! object at its first write), and rename, directories and permissions
//! (every client is root in `/`). A client never crashes while it holds or takes a GROUP
//! lock: GROUP locks are not called back, so nothing would ever take a
//! dead holder's lock away (lanefs, like the harness, has no ping evictor;
//! see the design notes in ARCHITECTURE.md).
//!
//! Planted bugs: with the `planted-bugs` feature (test builds only),
//! [`sweep::SweepConfig::planted`] plants one of lanefs-core's deliberate
//! bugs ([`lanefs_core::planted::Bug`], some of them in lanefs-mds) in
//! every seed, to measure how many seeds the swarm needs to catch it
//! (bench/RESULTS.md); [`sweep::SweepConfig::only`] draws only some fault
//! classes, to show which class a finding needs.

pub mod adversary;
pub mod checkers;
pub mod faults;
pub mod history;
pub mod mds;
pub mod options;
pub mod oracle;
pub mod run;
pub mod sweep;
pub mod workload;

pub use sweep::{
    options_of, replay_seed, run_seed, run_seed_only, sweep, SeedResult, Seeds, Summary, SweepConfig, SweepError,
};

/// How a seed ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// A panic: a broken invariant, a checker, an assertion (message).
    Crash(String),
    /// The healed cluster did not finish (what was left).
    Liveness(String),
    /// The oracle's finding.
    Correctness(String),
}

impl Outcome {
    /// 0, or the VOPR's codes: 127 crash, 128 liveness, 129 correctness.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Passed => 0,
            Outcome::Crash(_) => 127,
            Outcome::Liveness(_) => 128,
            Outcome::Correctness(_) => 129,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Crash(_) => "crash",
            Outcome::Liveness(_) => "liveness",
            Outcome::Correctness(_) => "correctness",
        }
    }

    /// The finding's text (empty for a pass).
    pub fn message(&self) -> &str {
        match self {
            Outcome::Passed => "",
            Outcome::Crash(m) | Outcome::Liveness(m) | Outcome::Correctness(m) => m,
        }
    }
}
