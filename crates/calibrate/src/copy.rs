//! A core's copy rate: one thread copying 1 MiB blocks into a buffer larger
//! than the caches (as a write's bytes go into page frames), alone and
//! then one thread per core together (at most [`THREADS_MAX`]), so that the
//! node's memory bandwidth shows as the shared resource it is. Both copy
//! into buffers of one size, after one unmeasured pass that warms the
//! core and the allocator, so that the two rates differ only in the
//! threads copying at once. Each is the median of [`ROUNDS`] rounds, each
//! a share of the bytes, one alone then all together in turn: a virtual
//! machine's memory bandwidth comes and goes with its neighbours', and a
//! burst then moves one round, not the figure.

use crate::{gib_s, median_f64, range_f64};
use std::time::Instant;

const BLOCK_BYTES: usize = 1 << 20;
/// The destination of each thread: larger than the caches, with the memory
/// all threads take bounded.
const RING_BYTES: usize = 64 << 20;
/// Threads copying at once, at most (64 x 64 MiB of memory).
const THREADS_MAX: usize = 64;
/// Rounds of each measurement.
pub const ROUNDS: usize = 5;

#[derive(Clone, Debug)]
pub struct Copy {
    /// One thread alone.
    pub one_gib_s: f64,
    /// Each thread's rate when every core copies at once (their median).
    pub each_of_all_gib_s: f64,
    /// The threads of the second measurement: the cores available (at
    /// most [`THREADS_MAX`]).
    pub cores: usize,
    /// The lowest and the highest round of each.
    pub one_spread_gib_s: (f64, f64),
    pub each_of_all_spread_gib_s: (f64, f64),
}

pub fn measure(bytes: u64) -> Copy {
    copy_rate(RING_BYTES as u64, RING_BYTES);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(THREADS_MAX);
    let round_bytes = (bytes / ROUNDS as u64).max(BLOCK_BYTES as u64);
    let (mut one, mut all) = (Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS));
    for _ in 0..ROUNDS {
        one.push(copy_rate(round_bytes, RING_BYTES));
        let mut rates: Vec<f64> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..cores).map(|_| scope.spawn(|| copy_rate(round_bytes, RING_BYTES))).collect();
            threads.into_iter().map(|t| t.join().expect("a copying thread")).collect()
        });
        all.push(median_f64(&mut rates));
    }
    let (one_spread_gib_s, each_of_all_spread_gib_s) = (range_f64(&one), range_f64(&all));
    Copy {
        one_gib_s: median_f64(&mut one),
        each_of_all_gib_s: median_f64(&mut all),
        cores,
        one_spread_gib_s,
        each_of_all_spread_gib_s,
    }
}

/// One thread's copy rate over `bytes`, into a buffer of `ring_bytes`.
fn copy_rate(bytes: u64, ring_bytes: usize) -> f64 {
    let source: Vec<u8> = (0..BLOCK_BYTES).map(|i| (i * 13 + 5) as u8).collect();
    let mut ring = vec![0u8; ring_bytes];
    // Touch every page first, so that faulting them in is not timed.
    ring.iter_mut().step_by(4096).for_each(|b| *b = 1);
    let began = Instant::now();
    let mut copied = 0u64;
    let mut at = 0;
    while copied < bytes {
        ring[at..at + BLOCK_BYTES].copy_from_slice(&source);
        at = (at + BLOCK_BYTES) % ring_bytes;
        copied += BLOCK_BYTES as u64;
    }
    std::hint::black_box(&ring);
    gib_s(copied, began.elapsed())
}
