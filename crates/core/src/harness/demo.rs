//! The demonstration behind `lanefs demo`: four clients write one shared
//! file in IOR's segmented layout with default locking and with lockahead,
//! and one file each, then other clients read every byte back and verify it.
//!
//! It shows the problem lanefs is built around: with Lustre's expanding
//! locks, writers of one file revoke each other's locks (false sharing);
//! with lockahead they do not, and the lock traffic matches file per process.

use super::workload::{run_programs, Segmented, WorkloadError, WriterAdvice};
use super::{Harness, HarnessConfig};
use crate::layout::Layout;

const MIB: u64 = 1 << 20;

/// The demo's parameters (IOR: `-b 4m -t 1m -s 4`, 4 tasks, 2 stripes of 1 MiB).
#[derive(Clone, Copy, Debug)]
pub struct DemoConfig {
    pub tasks: u32,
    pub osts: u32,
    pub block_bytes: u64,
    pub transfer_bytes: u64,
    pub segments: u64,
    pub stripe_count: u32,
    pub stripe_size: u64,
    pub seed: u64,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            tasks: 4,
            osts: 2,
            block_bytes: 4 * MIB,
            transfer_bytes: MIB,
            segments: 4,
            stripe_count: 2,
            stripe_size: MIB,
            seed: 1,
        }
    }
}

/// One way of writing the data, and what it cost.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DemoRun {
    pub name: &'static str,
    /// Lock requests sent during the write phase, lockahead ones included.
    pub lock_enqueues: u64,
    pub blocking_callbacks: u64,
    pub lock_cancels: u64,
    pub write_rpcs: u64,
    /// Bytes the tasks wrote.
    pub bytes_written: u64,
    /// Bytes read back by another task and found correct.
    pub bytes_verified: u64,
    /// Lockahead requests the servers refused.
    pub lockahead_refused: u64,
}

pub fn run(config: DemoConfig) -> Result<Vec<DemoRun>, WorkloadError> {
    let ways = [
        ("ssf-default", false, WriterAdvice::None),
        ("ssf-lockahead", false, WriterAdvice::Lockahead),
        ("fpp", true, WriterAdvice::None),
    ];
    ways.into_iter().map(|(name, fpp, advice)| run_one(&config, name, fpp, advice)).collect()
}

fn run_one(config: &DemoConfig, name: &'static str, fpp: bool, advice: WriterAdvice) -> Result<DemoRun, WorkloadError> {
    let harness_config = HarnessConfig {
        clients: config.tasks,
        osts: config.osts,
        seed: config.seed,
        check_invariants: false,
        ..HarnessConfig::default()
    };
    let mut h = Harness::new(harness_config).expect("default client configuration is valid");
    let pattern = Segmented {
        tasks: config.tasks,
        block_bytes: config.block_bytes,
        transfer_bytes: config.transfer_bytes,
        segments: config.segments,
        file_per_process: fpp,
    };
    let file_count = if fpp { config.tasks } else { 1 };
    let files: Vec<Layout> = (0..file_count)
        .map(|_| h.create_layout(config.stripe_size, config.stripe_count, None).expect("demo layout is valid"))
        .collect();
    let writers = (0..config.tasks).map(|r| pattern.write_program(r, advice)).collect();
    let written = run_programs(&mut h, &files, writers)?;
    let locks = h.lock_counters();
    let osts = h.ost_counters();
    let client_refusals: u64 =
        (0..config.tasks).map(|c| h.client(crate::ClientId(c)).counters().lockahead_refused).sum();
    // Task r reads back what task r - 1 wrote (IOR's -C shift of one).
    let readers = (0..config.tasks).map(|r| pattern.verify_program((r + config.tasks - 1) % config.tasks)).collect();
    let verified = run_programs(&mut h, &files, readers)?;
    Ok(DemoRun {
        name,
        lock_enqueues: locks.enqueues,
        blocking_callbacks: locks.callbacks,
        lock_cancels: locks.cancels,
        write_rpcs: osts.write_rpcs,
        bytes_written: written.bytes_written,
        bytes_verified: verified.bytes_verified,
        lockahead_refused: client_refusals,
    })
}
