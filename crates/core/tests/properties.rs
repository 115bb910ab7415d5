//! Property tests: random multi-client workloads on the deterministic
//! harness, checked against a per-byte linearizability oracle.
//!
//! Properties (every seed, every step):
//! * no two overlapping conflicting locks are ever granted (server invariant);
//! * dirty bytes are always under a write lock; lockahead locks are never
//!   expanded (invariants checked after every step);
//! * every read returns, for each byte, the value of a write that was not
//!   yet overwritten when the read began, or of one concurrent with it;
//!   bytes written before the read began are never missed;
//! * after the run, the OSTs hold the latest writes: no dirty byte was lost
//!   across callbacks (with evictions, only the evicted client's bytes may be
//!   missing, and it reported the loss);
//! * every enqueue ended granted or refused; nothing is left waiting;
//! * the same seed gives the same message trace.

use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::client::{ClientConfig, ClientError, FileHandle, OpId, OpOutput};
use lanefs_core::harness::workload::pattern_byte;
use lanefs_core::harness::{Harness, HarnessConfig};
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ost::{OstConfig, SyncLockCancel};
use lanefs_core::store::ObjectStore;
use lanefs_core::{ClientId, Duration};
use proptest::prelude::*;
use std::collections::BTreeSet;

const STRIPE_BYTES: u64 = 64 * 1024;

#[derive(Clone, Debug)]
enum Act {
    Write { offset: u64, len: u64 },
    Read { offset: u64, len: u64 },
    Fsync,
    Lockahead { offset: u64, len: u64 },
    NoExpand(bool),
}

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    clients: u32,
    osts: u32,
    stripe_count: u32,
    latency_max_us: u64,
    file_bytes: u64,
    rpc_pages: u64,
    dirty_rpcs: u64,
    cache_pages: u64,
    callback_timeout_us: Option<u64>,
    programs: Vec<Vec<Act>>,
}

fn act(file_bytes: u64) -> impl Strategy<Value = Act> {
    let range = (0..file_bytes, 1..40_000u64).prop_map(move |(o, l)| (o, l.min(file_bytes - o)));
    prop_oneof![
        6 => range.clone().prop_map(|(offset, len)| Act::Write { offset, len }),
        3 => range.clone().prop_map(|(offset, len)| Act::Read { offset, len }),
        1 => Just(Act::Fsync),
        1 => range.prop_map(|(offset, len)| Act::Lockahead { offset, len }),
        1 => any::<bool>().prop_map(Act::NoExpand),
    ]
}

fn case(evictions: bool) -> impl Strategy<Value = Case> {
    (any::<u64>(), 2..=4u32, 1..=3u32, 1..=3u32, 1..200u64, 1..=6u64, 1..=4u64, 1..=8u64, 1..=128u64).prop_flat_map(
        move |(seed, clients, osts, stripes, latency_max_us, file_units, rpc_pages, dirty_rpcs, cache_pages)| {
            let file_bytes = file_units * STRIPE_BYTES;
            let programs = prop::collection::vec(prop::collection::vec(act(file_bytes), 1..25), clients as usize);
            let timeout = if evictions { (20..600u64).prop_map(Some).boxed() } else { Just(None).boxed() };
            (programs, timeout).prop_map(move |(programs, callback_timeout_us)| Case {
                seed,
                clients,
                osts,
                stripe_count: stripes.min(osts),
                latency_max_us,
                file_bytes,
                rpc_pages,
                dirty_rpcs,
                cache_pages,
                callback_timeout_us,
                programs,
            })
        },
    )
}

/// What happened, in logical time (a counter bumped at every issue and
/// every completion the driver observes).
#[derive(Debug, Clone)]
struct Record {
    client: u32,
    act: Act,
    id: u64,
    start: u64,
    end: u64,
    output: Option<OpOutput>,
}

struct Outcome {
    records: Vec<Record>,
    trace_hash: u64,
    final_bytes: Vec<u8>,
    lost_by: BTreeSet<u32>,
    /// Clients told by an fsync that data written through their file was lost.
    told: BTreeSet<u32>,
}

fn harness(c: &Case) -> Harness {
    let mut config = HarnessConfig {
        clients: c.clients + 1, // the last client only reads the final state
        osts: c.osts,
        seed: c.seed,
        latency_min: Duration::from_us(1),
        latency_max: Duration::from_us(c.latency_max_us),
        client: ClientConfig {
            rpc_bytes_max: c.rpc_pages * 4096,
            dirty_bytes_max: c.dirty_rpcs * c.rpc_pages * 4096,
            cached_bytes_max: c.cache_pages * 4096,
            ..ClientConfig::default()
        },
        check_invariants: true,
        ..HarnessConfig::default()
    };
    if let Some(us) = c.callback_timeout_us {
        config.ost = OstConfig {
            locks: LockServerConfig { callback_timeout: Duration::from_us(us), ..LockServerConfig::default() },
            ..OstConfig::default()
        };
    }
    // Every policy of sync on lock cancel: the harness answers syncs at
    // once, so each must keep every property.
    config.ost.sync_lock_cancel =
        [SyncLockCancel::Never, SyncLockCancel::Blocking, SyncLockCancel::Always][(c.seed % 3) as usize];
    Harness::new(config).expect("valid config")
}

fn run(c: &Case) -> Outcome {
    let mut h = harness(c);
    let layout = h.create_layout(STRIPE_BYTES, c.stripe_count, Some(0)).unwrap();
    let fhs: Vec<FileHandle> = (0..c.clients).map(|i| h.open(ClientId(i), layout.clone())).collect();
    let mut clock = 0u64;
    let mut records: Vec<Record> = Vec::new();
    let mut next = vec![0usize; c.clients as usize];
    let mut waiting: Vec<Option<(OpId, usize)>> = vec![None; c.clients as usize];
    let mut told = BTreeSet::new();
    loop {
        for i in 0..c.clients as usize {
            loop {
                if let Some((op, rec)) = waiting[i] {
                    let Some(result) = h.result(ClientId(i as u32), op).cloned() else { break };
                    if let Err(ClientError::WriteLost { .. }) = result {
                        told.insert(i as u32);
                    }
                    clock += 1;
                    records[rec].end = clock;
                    records[rec].output = result.ok();
                    waiting[i] = None;
                }
                let Some(a) = c.programs[i].get(next[i]).cloned() else { break };
                next[i] += 1;
                clock += 1;
                let (cl, fh, id) = (ClientId(i as u32), fhs[i], records.len() as u64 + 1);
                let op = match a {
                    Act::Write { offset, len } => Some(h.write(
                        cl,
                        fh,
                        offset,
                        (offset..offset + len).map(|o| pattern_byte(id as u32, o)).collect(),
                    )),
                    Act::Read { offset, len } => Some(h.read(cl, fh, offset, len)),
                    Act::Fsync => Some(h.fsync(cl, fh)),
                    Act::Lockahead { offset, len } if len > 1 => {
                        let adv = Advice::lockahead(AheadMode::Write, offset, offset + len - 1, true);
                        h.ladvise(cl, fh, &[adv]).unwrap();
                        None
                    }
                    Act::NoExpand(set) => {
                        h.ladvise(cl, fh, &[Advice::lock_no_expand(set)]).unwrap();
                        None
                    }
                    Act::Lockahead { .. } => None,
                };
                records.push(Record { client: i as u32, act: a, id, start: clock, end: clock, output: None });
                if let Some(op) = op {
                    waiting[i] = Some((op, records.len() - 1));
                }
            }
        }
        if waiting.iter().all(Option::is_none) && (0..c.clients as usize).all(|i| next[i] == c.programs[i].len()) {
            break;
        }
        assert!(h.step(), "SEED={}: stalled with operations pending", c.seed);
    }
    // Everyone flushes; then the spare client reads the whole file.
    for i in 0..c.clients {
        let op = h.fsync(ClientId(i), fhs[i as usize]);
        if let Err(ClientError::WriteLost { .. }) = h.wait(ClientId(i), op).unwrap() {
            told.insert(i);
        }
    }
    h.drive().unwrap_or_else(|e| panic!("SEED={}: {e}", c.seed));
    for o in 0..c.osts {
        let ost = h.ost(lanefs_core::OstIndex(o));
        assert_eq!(ost.locks().waiting_count(), 0, "SEED={}: locks left waiting", c.seed);
        let k = ost.locks().counters_total();
        if c.callback_timeout_us.is_none() {
            assert_eq!(k.enqueues, k.grants + k.refusals, "SEED={}: enqueue neither granted nor refused", c.seed);
            assert_eq!(k.evictions, 0);
        }
    }
    let mut final_bytes = vec![0u8; c.file_bytes as usize];
    for (stripe, key) in layout.objects().iter().enumerate() {
        let size = layout.file_size_to_object_size(stripe as u32, c.file_bytes);
        let data = h.ost_mut(key.ost).store_mut().read(key.object, 0, size).unwrap();
        for (i, b) in data.iter().enumerate() {
            let f = layout.object_to_file(stripe as u32, i as u64);
            if f < c.file_bytes {
                final_bytes[f as usize] = *b;
            }
        }
    }
    let lost_by = h.lost().iter().map(|(c, _, _)| c.0).collect();
    Outcome { records, trace_hash: h.trace_hash(), final_bytes, lost_by, told }
}

/// Values byte `b` may hold for an observation spanning `[start, end]`.
fn acceptable(records: &[Record], b: u64, start: u64, end: u64) -> (Vec<u8>, Vec<u32>) {
    let writes: Vec<&Record> = records
        .iter()
        .filter(|r| {
            matches!(r.act, Act::Write { offset, len } if offset <= b && b < offset + len) && r.output.is_some()
        })
        .collect();
    let overwritten = |w: &Record| writes.iter().any(|w2| w.end < w2.start && w2.end < start);
    let mut values: Vec<u8> = Vec::new();
    let mut writers = Vec::new();
    for w in writes.iter().filter(|w| w.start < end && !overwritten(w)) {
        values.push(pattern_byte(w.id as u32, b));
        writers.push(w.client);
    }
    if !writes.iter().any(|w| w.end < start) {
        values.push(0);
    }
    (values, writers)
}

fn check(c: &Case, out: &Outcome) {
    assert_eq!(
        out.told, out.lost_by,
        "SEED={}: every client that lost data, and only those, is told by an fsync",
        c.seed
    );
    for r in &out.records {
        let (Act::Read { offset, .. }, Some(OpOutput::Read(data))) = (&r.act, &r.output) else { continue };
        for (i, v) in data.iter().enumerate() {
            let b = offset + i as u64;
            let (ok, writers) = acceptable(&out.records, b, r.start, r.end);
            let excused = writers.iter().any(|w| out.lost_by.contains(w));
            assert!(
                ok.contains(v) || excused,
                "SEED={}: client {} read byte {b} = {v}, expected one of {ok:?}",
                c.seed,
                r.client
            );
        }
    }
    let end = u64::MAX;
    for (b, v) in out.final_bytes.iter().enumerate() {
        let (ok, writers) = acceptable(&out.records, b as u64, end - 1, end);
        let excused = writers.iter().any(|w| out.lost_by.contains(w));
        assert!(ok.contains(v) || excused, "SEED={}: final byte {b} = {v}, expected one of {ok:?}", c.seed);
    }
}

/// Cases per property: `PROPTEST_CASES` for a longer sweep, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn reads_see_the_latest_completed_write_and_nothing_is_lost(c in case(false)) {
        let out = run(&c);
        check(&c, &out);
        prop_assert!(out.lost_by.is_empty(), "SEED={}: data lost without evictions", c.seed);
    }

    #[test]
    fn evictions_lose_only_the_evicted_clients_data(c in case(true)) {
        let out = run(&c);
        check(&c, &out);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: (cases(128) / 8).max(8), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_same_seed_gives_the_same_trace(c in case(false)) {
        let a = run(&c);
        let b = run(&c);
        prop_assert_eq!(a.trace_hash, b.trace_hash);
        prop_assert_eq!(a.final_bytes, b.final_bytes);
    }
}
