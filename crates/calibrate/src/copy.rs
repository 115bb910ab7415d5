//! A core's copy rate: one thread copying 1 MiB blocks into a buffer larger
//! than the caches (as a write's bytes go into page frames), alone and
//! then one thread per core together (at most [`THREADS_MAX`]), so that the
//! node's memory bandwidth shows as the shared resource it is. Both copy
//! into buffers of one size, after one unmeasured pass that warms the
//! core and the allocator, so that the two rates differ only in the
//! threads copying at once.

use crate::gib_s;
use std::time::Instant;

const BLOCK_BYTES: usize = 1 << 20;
/// The destination of each thread: larger than the caches, with the memory
/// all threads take bounded.
const RING_BYTES: usize = 64 << 20;
/// Threads copying at once, at most (64 x 64 MiB of memory).
const THREADS_MAX: usize = 64;

#[derive(Clone, Debug)]
pub struct Copy {
    /// One thread alone.
    pub one_gib_s: f64,
    /// Each thread's rate when every core copies at once (their median).
    pub each_of_all_gib_s: f64,
    /// The threads of the second measurement: the cores available (at
    /// most [`THREADS_MAX`]).
    pub cores: usize,
}

pub fn measure(bytes: u64) -> Copy {
    copy_rate(RING_BYTES as u64, RING_BYTES);
    let one_gib_s = copy_rate(bytes, RING_BYTES);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(THREADS_MAX);
    let mut rates: Vec<f64> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..cores).map(|_| scope.spawn(|| copy_rate(bytes, RING_BYTES))).collect();
        threads.into_iter().map(|t| t.join().expect("a copying thread")).collect()
    });
    rates.sort_by(f64::total_cmp);
    Copy { one_gib_s, each_of_all_gib_s: rates[rates.len() / 2], cores }
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
