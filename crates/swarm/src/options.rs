//! A run's options, every one drawn from its seed.
//!
//! [`SwarmOptions::from_seed`] is the only source of a run's shape: the
//! cluster (clients, OSTs, latencies, timeouts, the recovery window and
//! commit interval, the clients' RPC, dirty, unstable and cache limits, the
//! sync-on-cancel policy), the files (stripe counts and sizes, lengths), the
//! workload's length and the fault mix. The same seed always draws the same
//! options, and their [`std::fmt::Display`] is the first line a run prints
//! (`SEED=... options...`), so a failure is described and replayed from the
//! seed alone.
//!
//! Adversary: half the seeds, drawn from a stream of their own (so the
//! other draws are those of before it), add a hostile node
//! ([`crate::adversary`]) to the clients.
//!
//! Fault mix: about one seed in five is quiet (no faults at all; any loss,
//! error or eviction there is a bug); the others enable each fault class
//! with even odds, at a rate drawn per class, so that some seeds see one
//! kind of fault now and then and others a storm of all of them.

use crate::faults::{FaultClass, FaultMix};
use lanefs_core::layout::STRIPE_SIZE_UNIT;
use lanefs_core::ost::SyncLockCancel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt;

/// Page size of lanefs clients, the unit of the clients' limits.
const PAGE_BYTES: u64 = lanefs_core::units::PAGE_SIZE;

/// Bounds of the drawn options (inclusive), named so the docs and the
/// drawing agree.
pub const CLIENTS_MIN: u32 = 2;
pub const CLIENTS_MAX: u32 = 6;
pub const OSTS_MIN: u32 = 1;
pub const OSTS_MAX: u32 = 4;
/// Shared files per run (every client may touch them).
pub const SHARED_FILES_MAX: usize = 3;
/// Actions in one client's program.
pub const ACTIONS_MIN: usize = 8;
pub const ACTIONS_MAX: usize = 40;
/// Bytes of the largest file: keeps the per-byte oracle cheap.
pub const FILE_BYTES_MAX: u64 = 4 * 2 * STRIPE_SIZE_UNIT;

/// How a file is laid out and who uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    pub stripe_bytes: u64,
    pub stripe_count: u32,
    pub start_ost: u32,
    /// The file's extent for the workload: offsets stay below it.
    pub bytes: u64,
    /// `None` for a shared file; `Some(c)` for client `c`'s own file.
    pub owner: Option<u32>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SwarmOptions {
    pub seed: u64,
    pub clients: u32,
    pub osts: u32,
    pub files: Vec<FileSpec>,
    pub latency_min_us: u64,
    pub latency_max_us: u64,
    pub callback_timeout_us: u64,
    pub recovery_window_ms: u64,
    pub commit_interval_ms: u64,
    /// How long a commit takes on an OST's disk (0: at once).
    pub commit_latency_us: u64,
    /// Pages written since the last commit began that begin the next.
    pub commit_pages: u64,
    pub rpc_pages: u64,
    pub rpcs_in_flight_max: usize,
    pub dirty_rpcs: u64,
    pub unstable_rpcs: u64,
    pub cache_pages: u64,
    pub lru_locks_max: usize,
    pub sync_lock_cancel: SyncLockCancel,
    /// Actions in each client's program.
    pub actions_per_client: usize,
    pub faults: FaultMix,
    /// A hostile node among the clients ([`crate::adversary`]).
    pub adversary: bool,
}

impl SwarmOptions {
    pub fn from_seed(seed: u64) -> SwarmOptions {
        // A stream of its own: the workload and the faults draw from others.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6f70_7469_6f6e_7321);
        let clients = rng.gen_range(CLIENTS_MIN..=CLIENTS_MAX);
        let osts = rng.gen_range(OSTS_MIN..=OSTS_MAX);
        let mut files = Vec::new();
        for _ in 0..rng.gen_range(1..=SHARED_FILES_MAX) {
            files.push(draw_file(&mut rng, osts, None));
        }
        for c in 0..clients {
            if rng.gen_bool(0.5) {
                files.push(draw_file(&mut rng, osts, Some(c)));
            }
        }
        let latency_min_us = rng.gen_range(1..=20);
        let latency_max_us = latency_min_us + [0, 10, 50, 200][rng.gen_range(0..4)];
        // Far above a round trip and a full flush, so that no quiet seed
        // sees an eviction: a callback is answered within a few round trips
        // per dirty RPC, and I/O under a called-back lock prolongs it.
        let callback_timeout_us = latency_max_us * rng.gen_range(400..=2000) + 10_000;
        let rpc_pages = [1, 2, 4, 16][rng.gen_range(0..4)];
        let rpcs_in_flight_max = rng.gen_range(1..=8);
        let dirty_rpcs = rng.gen_range(1..=8);
        let unstable_rpcs = rng.gen_range(1..=16);
        let cache_pages = [8, 64, 1024][rng.gen_range(0..3)];
        let lru_locks_max = [2, 16, 400][rng.gen_range(0..3)];
        let sync_lock_cancel =
            [SyncLockCancel::Never, SyncLockCancel::Blocking, SyncLockCancel::Always][rng.gen_range(0..3)];
        let recovery_window_ms = [50, 500, 5_000][rng.gen_range(0..3)];
        let commit_interval_ms = [1, 20, 500, 5_000][rng.gen_range(0..4)];
        let actions_per_client = rng.gen_range(ACTIONS_MIN..=ACTIONS_MAX);
        let faults = draw_faults(&mut rng);
        // Drawn last, so that the draws above are what they were before it.
        // Below the callback timeout's floor: a cancel that must sync waits
        // for at most two commits.
        let commit_latency_us = [0, 0, 20, 200, 2_000][rng.gen_range(0..5)];
        let commit_pages = [u64::MAX, 4, 32][rng.gen_range(0..3)];
        let adversary = ChaCha8Rng::seed_from_u64(seed ^ 0x686f_7374_696c_6521).gen_bool(0.5);
        SwarmOptions {
            seed,
            clients,
            osts,
            files,
            latency_min_us,
            latency_max_us,
            callback_timeout_us,
            recovery_window_ms,
            commit_interval_ms,
            commit_latency_us,
            commit_pages,
            rpc_pages,
            rpcs_in_flight_max,
            dirty_rpcs,
            unstable_rpcs,
            cache_pages,
            lru_locks_max,
            sync_lock_cancel,
            actions_per_client,
            faults,
            adversary,
        }
    }

    /// The options of `seed` with only the fault classes in `only`: the
    /// others are off, and each of these is on (at its drawn rate, or at
    /// one drawn from a stream of its own if the seed had it off or was
    /// quiet). `lanefs swarm --only` uses it to show which class a finding
    /// needs.
    pub fn with_only(mut self, only: &[FaultClass]) -> SwarmOptions {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x6f6e_6c79_6661_756c);
        for class in FaultClass::ALL {
            let rate = &mut self.faults.per_kilostep[class as usize];
            let drawn = 0.5 * (10.0f64 / 0.5).powf(rng.gen_range(0.0..1.0)) * class.weight();
            if !only.contains(&class) {
                *rate = 0.0;
            } else if *rate == 0.0 {
                *rate = drawn;
            }
        }
        self
    }

    pub fn rpc_bytes(&self) -> u64 {
        self.rpc_pages * PAGE_BYTES
    }

    pub fn commit_bytes(&self) -> u64 {
        self.commit_pages.saturating_mul(PAGE_BYTES)
    }
}

fn draw_file(rng: &mut ChaCha8Rng, osts: u32, owner: Option<u32>) -> FileSpec {
    let stripe_bytes = STRIPE_SIZE_UNIT * rng.gen_range(1..=2);
    let stripe_count = rng.gen_range(1..=osts);
    let units = rng.gen_range(1..=2);
    let bytes = (stripe_bytes * stripe_count as u64 * units).min(FILE_BYTES_MAX);
    FileSpec { stripe_bytes, stripe_count, start_ost: rng.gen_range(0..osts), bytes, owner }
}

fn draw_faults(rng: &mut ChaCha8Rng) -> FaultMix {
    let mut mix = FaultMix::default();
    if rng.gen_bool(0.2) {
        return mix; // quiet
    }
    let storm = rng.gen_bool(0.25);
    for class in FaultClass::ALL {
        if rng.gen_bool(0.5) {
            // Log-uniform between a fault now and then and one every few
            // dozen steps (a storm goes higher).
            let high: f64 = if storm { 40.0 } else { 10.0 };
            let exponent = rng.gen_range(0.0..1.0);
            mix.per_kilostep[class as usize] = 0.5 * (high / 0.5).powf(exponent) * class.weight();
        }
    }
    mix
}

impl fmt::Display for SwarmOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SEED={} clients={} osts={}", self.seed, self.clients, self.osts)?;
        write!(f, " files=[")?;
        for (i, file) in self.files.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let owner = file.owner.map_or("shared".to_string(), |c| format!("c{c}"));
            write!(
                f,
                "{sep}{owner}:{}KiBx{}@{}:{}KiB",
                file.stripe_bytes >> 10,
                file.stripe_count,
                file.start_ost,
                file.bytes >> 10
            )?;
        }
        write!(f, "]")?;
        write!(
            f,
            " latency_us={}-{} callback_timeout_us={} recovery_window_ms={} commit_interval_ms={} \
             commit_latency_us={} commit_pages={}",
            self.latency_min_us,
            self.latency_max_us,
            self.callback_timeout_us,
            self.recovery_window_ms,
            self.commit_interval_ms,
            self.commit_latency_us,
            self.commit_pages
        )?;
        write!(
            f,
            " rpc_pages={} rpcs_in_flight={} dirty_rpcs={} unstable_rpcs={} cache_pages={} lru_locks={}",
            self.rpc_pages,
            self.rpcs_in_flight_max,
            self.dirty_rpcs,
            self.unstable_rpcs,
            self.cache_pages,
            self.lru_locks_max
        )?;
        let slc = SyncLockCancel::NAMES[self.sync_lock_cancel as usize];
        write!(f, " sync_lock_cancel={slc} actions={}", self.actions_per_client)?;
        write!(f, " adversary={}", if self.adversary { "yes" } else { "no" })?;
        if self.faults.is_quiet() {
            write!(f, " faults=none")
        } else {
            write!(f, " faults_per_kilostep=[")?;
            let mut first = true;
            for class in FaultClass::ALL {
                let rate = self.faults.rate(class);
                if rate > 0.0 {
                    write!(f, "{}{}:{rate:.2}", if first { "" } else { " " }, class.name())?;
                    first = false;
                }
            }
            write!(f, "]")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_options_every_time_and_within_bounds() {
        let mut quiet = 0;
        for seed in 0..500 {
            let a = SwarmOptions::from_seed(seed);
            assert_eq!(a, SwarmOptions::from_seed(seed));
            assert!((CLIENTS_MIN..=CLIENTS_MAX).contains(&a.clients));
            assert!((OSTS_MIN..=OSTS_MAX).contains(&a.osts));
            for file in &a.files {
                assert!(file.stripe_count <= a.osts && file.start_ost < a.osts);
                assert!(file.bytes <= FILE_BYTES_MAX && file.bytes > 0);
                assert_eq!(file.stripe_bytes % STRIPE_SIZE_UNIT, 0);
            }
            assert!(a.to_string().starts_with(&format!("SEED={seed} ")));
            quiet += usize::from(a.faults.is_quiet());
        }
        assert!((50..200).contains(&quiet), "about one seed in five is quiet: {quiet} of 500");
        let hostile = (0..500).filter(|&seed| SwarmOptions::from_seed(seed).adversary).count();
        assert!((200..300).contains(&hostile), "about half the seeds have an adversary: {hostile} of 500");
    }

    #[test]
    fn only_leaves_the_named_classes_on_and_nothing_else() {
        for seed in 0..100 {
            let o = SwarmOptions::from_seed(seed).with_only(&[FaultClass::Drop]);
            for class in FaultClass::ALL {
                assert_eq!(o.faults.rate(class) > 0.0, class == FaultClass::Drop, "seed {seed} {class:?}");
            }
            assert_eq!(o, SwarmOptions::from_seed(seed).with_only(&[FaultClass::Drop]));
        }
    }
}
