//! Micro-benchmarks of the protocol core: lock server decisions, the
//! expansion policy, and a whole harness run of the demo workload.
//! Run with `make bench` (or `cargo bench -p lanefs-core --bench core`).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use lanefs_core::harness::demo::{run, DemoConfig};
use lanefs_core::ldlm::policy::{expand, PolicyLock, PolicyRequest};
use lanefs_core::ldlm::server::{LockServer, LockServerConfig};
use lanefs_core::ldlm::{EnqueueFlags, LockMode, LockRequest};
use lanefs_core::{ClientId, Extent, Instant, ObjectId, Xid};
use std::hint::black_box;

const MIB: u64 = 1 << 20;

/// 1,000 lockahead requests for adjacent 1 MiB extents from 8 clients on one
/// object (every one granted), the pattern of a collective write's aggregators.
fn lockahead_grants(c: &mut Criterion) {
    c.bench_function("lock_server/1000_lockahead_grants", |b| {
        b.iter_batched(
            || LockServer::new(LockServerConfig::default()),
            |mut s| {
                for i in 0..1000u64 {
                    let request = LockRequest {
                        mode: LockMode::ProtectedWrite,
                        extent: Extent::new(i * MIB, (i + 1) * MIB - 1),
                        flags: EnqueueFlags { no_expand: true, speculative: true },
                    };
                    s.handle_enqueue(Instant(i), ClientId((i % 8) as u32), Xid(i), ObjectId(1), request);
                    while s.poll_transmit().is_some() {}
                }
                black_box(s.lock_count())
            },
            BatchSize::SmallInput,
        )
    });
}

/// Two writers ping-ponging an expanded lock: enqueue, callback, cancel, grant.
fn ping_pong(c: &mut Criterion) {
    c.bench_function("lock_server/100_conflict_cycles", |b| {
        b.iter(|| {
            let mut s = LockServer::new(LockServerConfig::default());
            let mut held = None;
            for i in 0..100u64 {
                let client = ClientId((i % 2) as u32);
                let request = LockRequest::new(LockMode::ProtectedWrite, Extent::new(i * MIB, (i + 1) * MIB - 1));
                s.handle_enqueue(Instant(i), client, Xid(i), ObjectId(1), request);
                if let Some((holder, handle)) = held.take() {
                    s.handle_cancel(Instant(i), holder, handle);
                }
                let granted: Vec<_> = s.granted_locks().collect();
                held = granted.last().map(|g| (g.1, g.0));
                while s.poll_transmit().is_some() {}
            }
            black_box(s.counters_total())
        })
    });
}

fn policy(c: &mut Criterion) {
    let granted: Vec<PolicyLock> = (0..100u64)
        .map(|i| {
            let e = Extent::new(i * 2 * MIB, i * 2 * MIB + MIB - 1);
            PolicyLock { client: ClientId(1 + i as u32), mode: LockMode::ProtectedWrite, extent: e, req_extent: e }
        })
        .collect();
    let req = PolicyRequest {
        client: ClientId(0),
        mode: LockMode::ProtectedWrite,
        extent: Extent::new(101 * MIB, 102 * MIB - 1),
        no_expand: false,
    };
    c.bench_function("policy/expand_among_100_granted", |b| b.iter(|| expand(black_box(&req), &granted, &[])));
}

fn demo(c: &mut Criterion) {
    let mut group = c.benchmark_group("harness");
    group.sample_size(10);
    group.bench_function("demo_three_runs_64MiB_each", |b| b.iter(|| black_box(run(DemoConfig::default()).unwrap())));
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(std::time::Duration::from_millis(500)).measurement_time(std::time::Duration::from_secs(2));
    targets = lockahead_grants, ping_pong, policy, demo
}
criterion_main!(benches);
