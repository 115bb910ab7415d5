//! Event queue throughput in the "hold model": keep N events pending, and
//! for each event popped push one at a random time after it, so the queue
//! stays at N. Compares [`EventQueue`] with a binary heap keyed on
//! `(time, sequence number)`, the obvious alternative with the same
//! ordering. One element of throughput is one pop plus one push.
//!
//! Delays are uniform in [0, 2 ms) of nanoseconds, about the spread of
//! network and disk events in a simulated cluster; the random stream is a
//! fixed-seed SplitMix64 so every run measures the same sequence.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lanefs_core::units::Instant;
use lanefs_sim::EventQueue;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;

const PENDING_COUNTS: [usize; 2] = [4096, 1_000_000];
/// Pop-push pairs per measured iteration.
const HOLDS_PER_ITERATION: u64 = 10_000;
const DELAY_NS_MAX: u64 = 2_000_000;

/// Event payload: about the size of a small message handle.
type Payload = [u64; 2];

struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn delay_ns(&mut self) -> u64 {
        self.next() % DELAY_NS_MAX
    }
}

fn hold(c: &mut Criterion) {
    let mut group = c.benchmark_group("hold");
    group.throughput(Throughput::Elements(HOLDS_PER_ITERATION));
    for pending in PENDING_COUNTS {
        group.bench_function(BenchmarkId::new("radix_heap", pending), |b| {
            let mut random = SplitMix64(1);
            let mut queue = EventQueue::new();
            for id in 0..pending as u64 {
                queue.push(Instant(random.delay_ns()), [id, 0]);
            }
            b.iter(|| {
                for _ in 0..HOLDS_PER_ITERATION {
                    let (at, event): (Instant, Payload) = queue.pop().expect("the queue holds N events");
                    queue.push(Instant(at.0 + random.delay_ns()), black_box(event));
                }
            });
            assert_eq!(queue.len(), pending);
        });
        group.bench_function(BenchmarkId::new("binary_heap", pending), |b| {
            let mut random = SplitMix64(1);
            let mut heap: BinaryHeap<Reverse<(u64, u64, Payload)>> = BinaryHeap::new();
            let mut sequence = 0u64;
            for id in 0..pending as u64 {
                heap.push(Reverse((random.delay_ns(), sequence, [id, 0])));
                sequence += 1;
            }
            b.iter(|| {
                for _ in 0..HOLDS_PER_ITERATION {
                    let Reverse((time_ns, _, event)) = heap.pop().expect("the heap holds N events");
                    heap.push(Reverse((time_ns + random.delay_ns(), sequence, black_box(event))));
                    sequence += 1;
                }
            });
            assert_eq!(heap.len(), pending);
        });
    }
    group.finish();
}

criterion_group!(benches, hold);
criterion_main!(benches);
