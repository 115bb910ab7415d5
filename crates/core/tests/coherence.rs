//! Scenario tests of the cache and lock coherence rules (`client/mod.rs`,
//! `ldlm.md` §1 and §3): a read returns the latest completed write wherever
//! it was made, dirty data reaches the OST before its lock is given back,
//! sizes include other clients' cached writes, group locks share without
//! callbacks, a dead or slow holder is evicted, and the LRU and dirty limits
//! hold. Every scenario runs in the deterministic harness and checks exact
//! bytes (in clients and in the OSTs' stores) and exact counters.

use lanefs_core::client::{ClientConfig, ClientError, FileHandle, LossCause, OpId, OpOutput};
use lanefs_core::harness::{Harness, HarnessConfig, HarnessError};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ldlm::LockMode;
use lanefs_core::ost::OstConfig;
use lanefs_core::store::ObjectStore;
use lanefs_core::{ClientId, Duration, Instant, OstIndex};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const A: ClientId = ClientId(0);
const B: ClientId = ClientId(1);
const C: ClientId = ClientId(2);

/// Bytes that differ from their neighbours and between writers.
fn pattern(len: u64, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_mul(7).wrapping_add(salt) | 1).collect()
}

fn read(h: &mut Harness, c: ClientId, fh: FileHandle, offset: u64, len: u64) -> Vec<u8> {
    let op = h.read(c, fh, offset, len);
    match h.wait_ok(c, op) {
        OpOutput::Read(data) => data,
        other => panic!("{c}: read answered {other:?}"),
    }
}

fn write(h: &mut Harness, c: ClientId, fh: FileHandle, offset: u64, data: Vec<u8>) {
    let len = data.len() as u64;
    let op = h.write(c, fh, offset, data);
    assert_eq!(h.wait_ok(c, op), OpOutput::Written(len));
}

fn stat(h: &mut Harness, c: ClientId, fh: FileHandle) -> u64 {
    let op = h.stat(c, fh);
    match h.wait_ok(c, op) {
        OpOutput::Size { size, .. } => size,
        other => panic!("{c}: stat answered {other:?}"),
    }
}

/// What the OSTs' stores hold for file bytes `[offset, offset + len)`.
fn stored(h: &mut Harness, layout: &Layout, offset: u64, len: u64) -> Vec<u8> {
    let mut out = vec![0; len as usize];
    for chunk in layout.chunks(offset, len) {
        let bytes =
            h.ost_mut(chunk.key.ost).store_mut().read(chunk.key.object, chunk.object_offset, chunk.len).unwrap();
        let at = (chunk.file_offset - offset) as usize;
        out[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    out
}

fn harness(clients: u32, osts: u32, seed: u64) -> Harness {
    Harness::new(HarnessConfig { clients, osts, seed, ..Default::default() }).unwrap()
}

/// B reads right after A's write completed and sees A's bytes, for small,
/// unaligned and three-stripe ranges; the blocking callback made A write its
/// dirty bytes to the OSTs before it gave its locks up.
#[test]
fn read_after_write_on_another_client_sees_the_write() {
    let stripe = 64 * KIB;
    let cases = [("partial page", 10, 100), ("unaligned", 4095, 10_000), ("three stripes", 1000, 2 * stripe + 5000)];
    for (name, offset, len) in cases {
        for seed in 0..4 {
            let mut h = harness(2, 3, seed);
            let layout = h.create_layout(stripe, 3, Some(0)).unwrap();
            let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
            let data = pattern(len, seed as u8);
            write(&mut h, A, fa, offset, data.clone());
            assert_eq!(h.client(A).cache().dirty_bytes(), len, "{name}: A's write is cached, not yet written");
            assert_eq!(h.ost_counters().bytes_written, 0, "{name}");

            assert_eq!(read(&mut h, B, fb, offset, len), data, "{name} seed {seed}: B read stale bytes");
            let stripes = layout.object_extents(offset, len).len() as u64;
            assert_eq!(h.client(A).counters().blocking_callbacks, stripes, "{name}: one callback per stripe lock");
            assert_eq!(h.client(A).cache().dirty_bytes(), 0, "{name}: the callback flushed A");
            assert_eq!(h.ost_counters().bytes_written, len, "{name}");
            assert_eq!(stored(&mut h, &layout, offset, len), data, "{name} seed {seed}: store");
            h.drive().unwrap();
        }
    }
}

/// Two writers of the same bytes: the later completed write wins, for the
/// first writer's own later read too (its cached pages were dropped).
#[test]
fn conflicting_writers_last_write_wins() {
    let mut h = harness(2, 2, 7);
    let layout = h.create_layout(64 * KIB, 2, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout));
    let (a_bytes, b_bytes) = (pattern(100_000, 1), pattern(50_000, 2));
    write(&mut h, A, fa, 1000, a_bytes.clone());
    write(&mut h, B, fb, 5000, b_bytes.clone());

    let mut expected = vec![0; 110_000];
    expected[1000..101_000].copy_from_slice(&a_bytes);
    expected[5000..55_000].copy_from_slice(&b_bytes);
    assert_eq!(read(&mut h, A, fa, 0, 110_000), expected);
    assert_eq!(read(&mut h, B, fb, 0, 110_000), expected);
    // And again, A writing last.
    write(&mut h, A, fa, 20_000, a_bytes[..10_000].to_vec());
    expected[20_000..30_000].copy_from_slice(&a_bytes[..10_000]);
    assert_eq!(read(&mut h, B, fb, 0, 110_000), expected);
    h.drive().unwrap();
}

/// fsync and close both leave nothing dirty and the bytes in the store.
#[test]
fn fsync_and_close_write_everything_back() {
    let mut h = harness(1, 2, 3);
    let layout = h.create_layout(64 * KIB, 2, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    let data = pattern(200 * KIB + 5, 9);
    write(&mut h, A, fa, 300, data.clone());
    assert_eq!(h.client(A).cache().dirty_bytes(), 200 * KIB + 5);
    let op = h.fsync(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced);
    assert_eq!(h.client(A).cache().dirty_bytes(), 0);
    assert_eq!(h.ost_counters().bytes_written, 200 * KIB + 5);
    assert_eq!(stored(&mut h, &layout, 300, 200 * KIB + 5), data);

    let more = pattern(10_000, 11);
    write(&mut h, A, fa, 150 * KIB, more.clone());
    assert_eq!(h.client(A).cache().dirty_bytes(), 10_000);
    let op = h.close(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Closed);
    assert_eq!(h.client(A).cache().dirty_bytes(), 0);
    assert_eq!(stored(&mut h, &layout, 150 * KIB, 10_000), more);
    assert_eq!(h.client(A).lock_cache().len(), 2, "locks stay cached after close");
    let op = h.write(A, fa, 0, vec![1]);
    assert_eq!(h.wait(A, op), Ok(Err(ClientError::BadFile)), "a closed handle is gone");
    h.drive().unwrap();
}

/// fsync of a file striped wide, with dirty bytes in a few of its objects
/// only: it passes the clean objects, waits on each dirty one, and ends with
/// their bytes in the store; a write made while it runs is in the store
/// after the close.
#[test]
fn fsync_of_a_wide_file_waits_on_its_dirty_objects_only() {
    let stripe = 64 * KIB;
    let mut h = harness(1, 8, 4);
    let layout = h.create_layout(stripe, 8, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    let (two, six) = (pattern(stripe, 1), pattern(1000, 2));
    write(&mut h, A, fa, 2 * stripe, two.clone());
    write(&mut h, A, fa, 6 * stripe + 500, six.clone());
    assert_eq!(h.client(A).cache().dirty_bytes(), stripe + 1000);
    let op = h.fsync(A, fa);
    let late = pattern(100, 3);
    let late_op = h.write(A, fa, 0, late.clone());
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced);
    assert_eq!(h.wait_ok(A, late_op), OpOutput::Written(100));
    assert_eq!(stored(&mut h, &layout, 2 * stripe, stripe), two);
    assert_eq!(stored(&mut h, &layout, 6 * stripe + 500, 1000), six);
    let op = h.close(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Closed);
    assert_eq!(h.client(A).cache().dirty_bytes(), 0);
    assert_eq!(stored(&mut h, &layout, 0, 100), late);
    assert_eq!(h.ost_counters().bytes_written, stripe + 1000 + 100);
    h.drive().unwrap();
}

/// stat sees another client's cached, unflushed write (glimpse); truncate
/// revokes the cached data beyond the new size, and every client then sees
/// the new size and zeros past it.
#[test]
fn stat_includes_unflushed_writes_and_truncate() {
    let mut h = harness(2, 2, 5);
    let layout = h.create_layout(MIB, 2, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    let size = 5 * MIB + 123;
    let data = pattern(size, 3);
    write(&mut h, A, fa, 0, data.clone());
    assert!(h.client(A).cache().dirty_bytes() > 0);

    assert_eq!(stat(&mut h, B, fb), size);
    assert!(h.ost_counters().glimpses >= 1, "B's stat glimpsed A's lock");
    assert_eq!(stat(&mut h, A, fa), size);
    h.drive().unwrap();

    // A small write far past the end stays dirty (less than one RPC, not
    // adjacent to other dirty bytes): only a glimpse can report it.
    let dirty_before = h.client(A).cache().dirty_bytes();
    let glimpses = h.ost_counters().glimpses;
    write(&mut h, A, fa, 7 * MIB + 5, pattern(1000, 4));
    assert_eq!(h.client(A).cache().dirty_bytes(), dirty_before + 1000);
    assert_eq!(stat(&mut h, B, fb), 7 * MIB + 1005);
    assert_eq!(h.ost_counters().glimpses, glimpses + 2, "one glimpse per object");
    let tail = layout.object(1);
    let stored_size = h.ost_mut(tail.ost).store_mut().size(tail.object).unwrap();
    assert!(stored_size <= 3 * MIB, "stripe 1's store has {stored_size} bytes: the size did not need a glimpse");
    assert_eq!(h.client(A).counters().blocking_callbacks, 0, "a glimpse does not revoke");
    assert_eq!(h.client(A).cache().dirty_bytes(), dirty_before + 1000, "a glimpse does not flush");

    let cut = 3 * MIB / 2 + 7;
    let op = h.truncate(B, fb, cut);
    assert_eq!(h.wait_ok(B, op), OpOutput::Truncated);
    assert_eq!(h.client(A).cache().dirty_bytes(), 0, "truncate revoked A's locks");
    assert_eq!(stat(&mut h, A, fa), cut);
    assert_eq!(stat(&mut h, B, fb), cut);
    let mut expected = data[..cut as usize].to_vec();
    expected.resize(2 * MIB as usize, 0);
    assert_eq!(read(&mut h, A, fa, 0, 2 * MIB), expected);
    h.drive().unwrap();
}

/// Two clients share group lock 7: disjoint writes, no callbacks. A third
/// client's write waits (GROUP locks get no callbacks) until both unlock.
#[test]
fn group_lock_shared_then_third_writer_waits_for_both_unlocks() {
    let mut h = harness(3, 2, 11);
    let layout = h.create_layout(MIB, 2, Some(0)).unwrap();
    let (fa, fb, fc) = (h.open(A, layout.clone()), h.open(B, layout.clone()), h.open(C, layout));
    for (c, fh) in [(A, fa), (B, fb)] {
        let op = h.group_lock(c, fh, 7);
        assert_eq!(h.wait_ok(c, op), OpOutput::GroupLocked);
    }
    let (a_bytes, b_bytes, c_bytes) = (pattern(MIB + 1000, 1), pattern(MIB + 1000, 2), pattern(100 * KIB, 3));
    write(&mut h, A, fa, 0, a_bytes.clone());
    write(&mut h, B, fb, 2 * MIB, b_bytes.clone());
    h.drive().unwrap();
    assert_eq!(h.lock_counters().callbacks, 0);

    let c_op = h.write(C, fc, 500 * KIB, c_bytes.clone());
    assert!(matches!(h.drive(), Err(HarnessError::Stalled { ops_pending: 1, .. })));
    assert_eq!(h.result(C, c_op), None, "C wrote under the group lock");
    let op = h.group_unlock(A, fa, 7);
    assert_eq!(h.wait_ok(A, op), OpOutput::GroupUnlocked);
    assert!(matches!(h.drive(), Err(HarnessError::Stalled { ops_pending: 1, .. })));
    assert_eq!(h.result(C, c_op), None, "C wrote while B still held the group lock");
    let op = h.group_unlock(B, fb, 7);
    assert_eq!(h.wait_ok(B, op), OpOutput::GroupUnlocked);
    assert_eq!(h.wait_ok(C, c_op), OpOutput::Written(100 * KIB));
    assert_eq!(h.lock_counters().callbacks, 0, "nobody called a group lock back");

    let mut expected = vec![0; 3 * MIB as usize + 1000];
    expected[..a_bytes.len()].copy_from_slice(&a_bytes);
    expected[2 * MIB as usize..].copy_from_slice(&b_bytes);
    expected[500 * KIB as usize..600 * KIB as usize].copy_from_slice(&c_bytes);
    for (c, fh) in [(A, fa), (B, fb), (C, fc)] {
        assert_eq!(read(&mut h, c, fh, 0, 3 * MIB + 1000), expected, "{c} read");
    }
    h.drive().unwrap();
}

/// A close releases the GROUP lock taken through its handle (Lustre's
/// `ll_file_release`): nothing calls a group lock back, so one left behind
/// would block every other lock of the file for good, the closer's own
/// next write included.
#[test]
fn a_close_gives_back_the_group_lock_of_its_handle() {
    let mut h = harness(2, 2, 12);
    let layout = h.create_layout(64 * KIB, 2, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    let op = h.group_lock(A, fa, 7);
    assert_eq!(h.wait_ok(A, op), OpOutput::GroupLocked);
    let mine = pattern(100 * KIB, 1);
    write(&mut h, A, fa, 0, mine.clone());
    let op = h.close(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Closed);
    assert!(
        h.client(A).lock_cache().iter().all(|(_, l)| !l.mode.is_group()),
        "A still holds a group lock after its close"
    );
    assert_eq!(stored(&mut h, &layout, 0, 100 * KIB), mine, "the close wrote the group lock's bytes back");
    // Another client and the closer, through a new handle, both get locks.
    let theirs = pattern(10 * KIB, 2);
    write(&mut h, B, fb, 60 * KIB, theirs.clone());
    let fa = h.open(A, layout.clone());
    let mut expected = mine;
    expected[60 * KIB as usize..70 * KIB as usize].copy_from_slice(&theirs);
    assert_eq!(read(&mut h, A, fa, 0, 100 * KIB), expected);
    h.drive().unwrap();
}

fn config_with_callback_timeout(timeout: Duration) -> HarnessConfig {
    HarnessConfig {
        clients: 2,
        osts: 1,
        ost: OstConfig {
            locks: LockServerConfig { callback_timeout: timeout, ..LockServerConfig::default() },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A holder always too slow for the callback timeout: 1 µs against a fixed
/// 50 µs latency, so the order of events is fixed and the holder is evicted.
fn config_with_slow_holders() -> HarnessConfig {
    let latency = Duration::from_us(50);
    HarnessConfig { latency_min: latency, latency_max: latency, ..config_with_callback_timeout(Duration::from_us(1)) }
}

/// A holder that crashed with dirty data under its PW lock never answers the
/// callback: the OST evicts it after the callback timeout, the waiting writer
/// proceeds, and the dead client's unflushed bytes are gone.
#[test]
fn crashed_holder_is_evicted_after_callback_timeout() {
    let timeout = Duration::from_secs(5);
    let mut h = Harness::new(config_with_callback_timeout(timeout)).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, A, fa, 0, pattern(100 * KIB, 1));
    assert_eq!(h.client(A).cache().dirty_bytes(), 100 * KIB);
    h.crash(A);

    let b_bytes = pattern(50 * KIB, 2);
    write(&mut h, B, fb, 0, b_bytes.clone());
    assert!(h.now() >= Instant::ZERO + timeout, "B's write completed at {} before the timeout", h.now());
    assert!(h.now() < Instant::ZERO + timeout + Duration::from_ms(1), "B waited past the eviction: {}", h.now());
    let lc = h.lock_counters();
    assert_eq!((lc.evictions, lc.callbacks), (1, 1), "{lc:?}");
    assert!(h.ost(OstIndex(0)).locks().is_evicted(A));

    let op = h.fsync(B, fb);
    h.wait_ok(B, op);
    let mut expected = b_bytes.clone();
    expected.resize(100 * KIB as usize, 0);
    assert_eq!(stored(&mut h, &layout, 0, 100 * KIB), expected, "B's bytes, and none of the dead client's");
    assert_eq!(read(&mut h, B, fb, 0, 50 * KIB), b_bytes);
    h.drive().unwrap();
}

/// A live holder too slow for the callback timeout (1 µs against a fixed
/// 50 µs latency, so the order of events is fixed) is evicted: its flush is
/// refused, it reports the loss, reconnects, and the waiter's bytes win.
#[test]
fn slow_holder_is_evicted_and_its_late_flush_refused() {
    let mut h = Harness::new(config_with_slow_holders()).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, A, fa, 0, pattern(100 * KIB, 1));
    let b_bytes = pattern(50 * KIB, 2);
    write(&mut h, B, fb, 0, b_bytes.clone());
    h.drive().unwrap();

    let lc = h.lock_counters();
    assert_eq!((lc.evictions, lc.callbacks, lc.cancels), (1, 1, 0), "{lc:?}");
    assert_eq!(h.ost_counters().io_refused, 1, "A's flush after its eviction");
    assert_eq!(h.lost(), &[(A, OstIndex(0), 100 * KIB)]);
    let ca = h.client(A).counters();
    assert_eq!((ca.evictions, ca.bytes_lost, ca.blocking_callbacks), (1, 100 * KIB, 1));
    assert!(h.client(A).lock_cache().is_empty());
    assert_eq!(h.client(A).cache().cached_pages(), 0, "an evicted client keeps no stale pages");
    assert!(!h.ost(OstIndex(0)).locks().is_evicted(A), "A reconnected");

    let op = h.fsync(B, fb);
    h.wait_ok(B, op);
    let mut expected = b_bytes;
    expected.resize(100 * KIB as usize, 0);
    assert_eq!(stored(&mut h, &layout, 0, 100 * KIB), expected);

    // Reconnected, A works again. Its first fsync flushes the new bytes and
    // reports, once, that earlier bytes written through this file were
    // lost. B is now the slow holder: evicted with nothing dirty, it loses
    // nothing.
    let again = pattern(10 * KIB, 3);
    write(&mut h, A, fa, 0, again.clone());
    let op = h.fsync(A, fa);
    match h.wait(A, op).unwrap() {
        Err(ClientError::WriteLost { ost, cause }) => assert_eq!((ost, cause), (OstIndex(0), LossCause::Evicted)),
        other => panic!("the first fsync after the loss must report it: {other:?}"),
    }
    let op = h.fsync(A, fa);
    h.wait_ok(A, op);
    expected[..10 * KIB as usize].copy_from_slice(&again);
    assert_eq!(stored(&mut h, &layout, 0, 100 * KIB), expected);
    assert_eq!(h.lock_counters().evictions, 2);
    assert_eq!(h.lost().len(), 1, "B had nothing to lose: {:?}", h.lost());
    h.drive().unwrap();
}

/// With `lru_locks_max` 2, five unused lockahead locks shrink to the two
/// most recently granted.
#[test]
fn lru_count_limit_cancels_the_oldest_unused_locks() {
    use lanefs_core::client::ladvise::{Advice, AheadMode};
    let client = ClientConfig { lru_locks_max: 2, ..Default::default() };
    let mut h = Harness::new(HarnessConfig { clients: 1, osts: 1, client, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let fa = h.open(A, layout);
    let advices: Vec<Advice> =
        (0..5).map(|i| Advice::lockahead(AheadMode::Write, 2 * i * MIB, (2 * i + 1) * MIB - 1, true)).collect();
    h.ladvise(A, fa, &advices).unwrap();
    h.drive().unwrap();

    let mut extents: Vec<_> = h.client(A).lock_cache().iter().map(|(_, l)| (l.extent.start, l.extent.end)).collect();
    extents.sort();
    assert_eq!(extents, vec![(6 * MIB, 7 * MIB - 1), (8 * MIB, 9 * MIB - 1)]);
    let mut on_server: Vec<_> =
        h.ost(OstIndex(0)).locks().granted_locks().map(|(_, _, _, _, e)| (e.start, e.end)).collect();
    on_server.sort();
    assert_eq!(on_server, extents);
    let lc = h.lock_counters();
    assert_eq!((lc.grants, lc.cancels, lc.callbacks), (5, 3, 0), "{lc:?}");
    assert_eq!(h.client(A).counters().cancels, 3);
}

/// With `lru_age_max` 1 s, unused locks are cancelled once they have been
/// unused that long of virtual time, and not before. (The harness only fires
/// timers while some operation is pending, so a write blocked behind another
/// client's group lock on a second file keeps the clock running.)
#[test]
fn lru_age_limit_cancels_unused_locks_after_the_age() {
    use lanefs_core::client::ladvise::{Advice, AheadMode};
    let age = Duration::from_secs(1);
    let client = ClientConfig { lru_age_max: age, ..Default::default() };
    let mut h = Harness::new(HarnessConfig { clients: 3, osts: 1, client, ..Default::default() }).unwrap();
    let (first, second) = (h.create_layout(MIB, 1, Some(0)).unwrap(), h.create_layout(MIB, 1, Some(0)).unwrap());
    let fa = h.open(A, first);
    let (fb, fc) = (h.open(B, second.clone()), h.open(C, second));
    let op = h.group_lock(C, fc, 9);
    h.wait_ok(C, op);

    let advices: Vec<Advice> =
        (0..3).map(|i| Advice::lockahead(AheadMode::Write, 2 * i * MIB, (2 * i + 1) * MIB - 1, true)).collect();
    h.ladvise(A, fa, &advices).unwrap();
    h.drive().unwrap();
    let granted_at = h.now();
    assert_eq!(h.client(A).lock_cache().len(), 3);

    let blocked = h.write(B, fb, 0, vec![1; 4096]);
    let mut first_cancel_at: Option<Instant> = None;
    while h.step() {
        if first_cancel_at.is_none() && h.client(A).lock_cache().len() < 3 {
            first_cancel_at = Some(h.now());
        }
    }
    let first_cancel_at = first_cancel_at.expect("the LRU never cancelled");
    assert!(first_cancel_at >= Instant::ZERO + age, "cancelled at {first_cancel_at}, before the age");
    assert!(h.now() <= granted_at + age + Duration::from_ms(1), "last cancel at {}", h.now());
    assert!(h.client(A).lock_cache().is_empty());
    assert_eq!(h.ost(OstIndex(0)).locks().granted_locks().filter(|l| l.1 == A).count(), 0);
    assert_eq!(h.client(A).counters().cancels, 3);

    assert_eq!(h.result(B, blocked), None);
    let op = h.group_unlock(C, fc, 9);
    h.wait_ok(C, op);
    assert_eq!(h.wait_ok(B, blocked), OpOutput::Written(4096));
    h.drive().unwrap();
}

/// One 16 MiB write against a 2 MiB dirty limit: the writer waits for
/// writeback, the limit (plus at most one 1 MiB chunk) holds after every
/// event, and every byte arrives.
#[test]
fn dirty_limit_throttles_a_large_write() {
    let (dirty_bytes_max, rpc_bytes_max, len) = (2 * MIB, MIB, 16 * MIB);
    let client = ClientConfig { dirty_bytes_max, rpc_bytes_max, ..Default::default() };
    let mut h = Harness::new(HarnessConfig { clients: 1, osts: 1, client, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    let data = pattern(len, 5);
    let op: OpId = h.write(A, fa, 0, data.clone());

    let mut dirty_seen_max = 0;
    let mut check = |h: &Harness| {
        let dirty = h.client(A).cache().dirty_bytes_ost(OstIndex(0));
        assert!(dirty <= dirty_bytes_max + MIB, "{dirty} dirty bytes at {}", h.now());
        dirty_seen_max = dirty_seen_max.max(dirty);
    };
    check(&h);
    while h.result(A, op).is_none() {
        assert!(h.step(), "stalled with the write pending");
        check(&h);
    }
    assert_eq!(h.result(A, op), Some(&Ok(OpOutput::Written(len))));
    assert!(
        h.ost_counters().bytes_written >= len - dirty_bytes_max - MIB,
        "the write completed with only {} bytes written back: not throttled",
        h.ost_counters().bytes_written
    );
    while h.step() {
        check(&h);
    }
    let op = h.fsync(A, fa);
    h.wait_ok(A, op);
    assert!(dirty_seen_max >= MIB, "the limit was never approached ({dirty_seen_max})");
    assert_eq!(h.ost_counters().bytes_written, len);
    assert_eq!(h.client(A).cache().dirty_bytes(), 0);
    assert_eq!(stored(&mut h, &layout, 0, len), data);
}

/// With a copy bandwidth (the simulator's), a write copies its bytes under
/// its lock: the write completes only when the copy is over, nothing of it
/// is written back before, and a conflicting writer's callback waits for the
/// copy rather than taking the lock from under it. At 1 GB/s, 1 MiB takes
/// 1,048,576 ns.
#[test]
fn a_write_copies_under_its_lock_and_a_callback_waits_for_the_copy() {
    let client = ClientConfig { copy_bytes_per_s: Some(1e9), ..Default::default() };
    let mut h = Harness::new(HarnessConfig { clients: 2, osts: 1, client, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    let (a_data, b_data) = (pattern(MIB, 1), pattern(4 * KIB, 2));
    let a_op = h.write(A, fa, 0, a_data.clone());
    while !h.client(A).lock_cache().iter().any(|(_, l)| l.is_granted()) {
        assert!(h.step(), "stalled before A's lock was granted");
    }
    let granted_at = h.now();
    assert_eq!(h.client(A).cache().dirty_bytes(), 0, "pages are dirty before their copy");
    let b_op = h.write(B, fb, 0, b_data.clone());
    while h.result(A, a_op).is_none() {
        assert_eq!(h.ost_counters().bytes_written, 0, "A's bytes were written back during its copy");
        assert!(h.result(B, b_op).is_none(), "B wrote under a lock A was still copying under");
        assert!(h.step(), "stalled with A's write pending");
    }
    assert!(h.now() >= granted_at + Duration(1_048_576), "A's 1 MiB copy ended at {} (granted {granted_at})", h.now());
    assert_eq!(h.wait_ok(B, b_op), OpOutput::Written(4 * KIB));
    assert!(h.lock_counters().callbacks >= 1);
    let op = h.close(B, fb);
    h.wait_ok(B, op);
    let op = h.close(A, fa);
    h.wait_ok(A, op);
    let mut want = a_data;
    want[..4 * KIB as usize].copy_from_slice(&b_data);
    assert_eq!(stored(&mut h, &layout, 0, MIB), want);
}

/// An eviction by one OST leaves a copy into the page cache for another
/// OST's object running: the copy ends on time, its write completes and
/// its bytes reach that OST. (A 1 MB/s copy bandwidth makes A's 64 KiB copy
/// last 65 ms, during which B's write gets A evicted by OST 0: a callback
/// timeout of 1 µs against a fixed 50 µs latency.)
#[test]
fn an_eviction_by_one_ost_leaves_a_copy_for_another_running() {
    let client = ClientConfig { copy_bytes_per_s: Some(1e6), ..Default::default() };
    let mut h = Harness::new(HarnessConfig { osts: 2, client, ..config_with_slow_holders() }).unwrap();
    let layout = h.create_layout(MIB, 2, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, A, fa, 0, pattern(4 * KIB, 1));
    let a_bytes = pattern(64 * KIB, 2);
    let a_op = h.write(A, fa, MIB, a_bytes.clone());
    while !h.client(A).lock_cache().iter().any(|(_, l)| l.key.ost == OstIndex(1) && l.is_granted()) {
        assert!(h.step(), "stalled before A's lock on OST 1 was granted");
    }
    let copy_began = h.now();
    let b_op = h.write(B, fb, 0, pattern(4 * KIB, 3));
    while h.client(A).counters().evictions == 0 {
        assert!(h.step(), "stalled before A was evicted");
    }
    assert!(h.result(A, a_op).is_none(), "the copy was over before the eviction: the test proves nothing");
    assert_eq!(h.wait_ok(A, a_op), OpOutput::Written(64 * KIB));
    assert!(h.now() >= copy_began + Duration::from_ms(65), "A's copy ended at {} (began {copy_began})", h.now());
    h.wait_ok(B, b_op);
    let op = h.fsync(A, fa);
    let _ = h.wait(A, op).unwrap(); // reports the loss on OST 0, once
    assert_eq!(stored(&mut h, &layout, MIB, 64 * KIB), a_bytes, "A's bytes on OST 1");
    h.drive().unwrap();
}

/// Readers' PR locks and cached pages go when a writer revokes them; their
/// next read fetches the new bytes.
#[test]
fn readers_drop_cached_pages_when_a_writer_revokes() {
    let mut h = harness(3, 1, 2);
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb, fc) = (h.open(A, layout.clone()), h.open(B, layout.clone()), h.open(C, layout));
    let mut data = pattern(64 * KIB, 1);
    write(&mut h, A, fa, 0, data.clone());
    for (c, fh) in [(B, fb), (C, fc)] {
        assert_eq!(read(&mut h, c, fh, 0, 64 * KIB), data, "{c}");
        assert_eq!(h.client(c).cache().cached_pages(), 16, "{c} caches what it read");
    }
    assert_eq!(h.lock_counters().callbacks, 1, "B's read revoked A's write lock; C's read shared B's");

    let patch = pattern(100, 2);
    write(&mut h, A, fa, 100, patch.clone());
    data[100..200].copy_from_slice(&patch);
    for c in [B, C] {
        assert_eq!(h.client(c).counters().blocking_callbacks, 1, "{c}");
        assert_eq!(h.client(c).cache().cached_pages(), 0, "{c} kept pages without a lock");
        assert!(h.client(c).lock_cache().is_empty(), "{c}");
    }
    for (c, fh) in [(B, fb), (C, fc)] {
        assert_eq!(read(&mut h, c, fh, 0, 64 * KIB), data, "{c} read stale bytes");
    }
    h.drive().unwrap();
}

/// The size glimpse walks down past lockahead (no-expand) locks, one per
/// client, to the first ordinary lock, the one covering the top of the data
/// (`ldlm.md` §4 "Glimpse fix", LU-11670).
#[test]
fn stat_glimpse_walks_past_lockahead_locks() {
    use lanefs_core::client::ladvise::{Advice, AheadMode};
    let mut h = harness(3, 1, 4);
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb, fc) = (h.open(A, layout.clone()), h.open(B, layout.clone()), h.open(C, layout));
    let ahead = |start: u64| Advice::lockahead(AheadMode::Write, start, start + MIB - 1, true);
    h.ladvise(A, fa, &[ahead(0), ahead(20 * MIB)]).unwrap();
    h.drive().unwrap();
    write(&mut h, A, fa, 0, pattern(10, 1));
    // C's ordinary lock grows up to A's lock at 20 MiB: [4 MiB, 20 MiB - 1].
    write(&mut h, C, fc, 4 * MIB, pattern(100, 2));
    assert_eq!(h.lock_counters().callbacks, 0);
    assert_eq!(h.ost_counters().bytes_written, 0, "everything is still cached");

    assert_eq!(stat(&mut h, B, fb), 4 * MIB + 100, "the active writer C holds the top of the data");
    assert_eq!(h.ost_counters().glimpses, 2, "A's top lockahead lock, then C's lock, which ends the walk");
    write(&mut h, A, fa, 20 * MIB, pattern(10, 3));
    assert_eq!(stat(&mut h, B, fb), 20 * MIB + 10);
    assert_eq!(h.ost_counters().glimpses, 4);
    assert_eq!(h.lock_counters().callbacks, 0, "glimpses revoke nothing");
    h.drive().unwrap();
}

/// A client holding a read lock that then writes gives its own PR lock back
/// (its own conflicting lock is called back like anyone's) and gets PW.
#[test]
fn reader_then_writer_on_one_client_converts_its_lock() {
    let mut h = harness(2, 1, 6);
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout));
    assert_eq!(read(&mut h, A, fa, 0, 4096), vec![0; 4096]);
    let modes = |h: &Harness| h.ost(OstIndex(0)).locks().granted_locks().map(|l| (l.1, l.3)).collect::<Vec<_>>();
    assert_eq!(modes(&h), vec![(A, LockMode::ProtectedRead)]);
    let data = pattern(4096, 1);
    write(&mut h, A, fa, 0, data.clone());
    assert_eq!(modes(&h), vec![(A, LockMode::ProtectedWrite)]);
    assert_eq!(h.client(A).counters().blocking_callbacks, 1);
    assert_eq!(read(&mut h, B, fb, 0, 4096), data);
    h.drive().unwrap();
}

/// The LRU's count limit cancels a lock with dirty pages under it only after
/// writing them back.
#[test]
fn lru_cancel_of_a_dirty_lock_writes_back_first() {
    let client = ClientConfig { lru_locks_max: 1, ..Default::default() };
    let mut h = Harness::new(HarnessConfig { clients: 1, osts: 1, client, ..Default::default() }).unwrap();
    let (first, second) = (h.create_layout(MIB, 1, Some(0)).unwrap(), h.create_layout(MIB, 1, Some(0)).unwrap());
    let (f1, f2) = (h.open(A, first.clone()), h.open(A, second.clone()));
    let (one, two) = (pattern(4096, 1), pattern(4096, 2));
    write(&mut h, A, f1, 0, one.clone());
    write(&mut h, A, f2, 0, two.clone());
    h.drive().unwrap();
    assert_eq!(h.client(A).lock_cache().len(), 1);
    assert_eq!(h.client(A).counters().cancels, 1);
    assert_eq!(stored(&mut h, &first, 0, 4096), one, "the cancelled lock's data was written back");
    assert_eq!(h.client(A).cache().dirty_bytes(), 4096, "the kept lock's data may stay cached");
    assert_eq!(stored(&mut h, &second, 0, 4096), vec![0; 4096]);
}

/// A group lock request calls back ordinary locks (only GROUP holders are
/// spared callbacks) and then reads their flushed data; misuse is an error.
#[test]
fn group_lock_revokes_ordinary_locks_and_refuses_misuse() {
    let mut h = harness(2, 2, 8);
    let layout = h.create_layout(MIB, 2, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout));
    let data = pattern(MIB + 5000, 4);
    write(&mut h, B, fb, 0, data.clone());
    let op = h.group_lock(A, fa, 7);
    assert_eq!(h.wait_ok(A, op), OpOutput::GroupLocked);
    assert_eq!(h.client(B).counters().blocking_callbacks, 2, "one per stripe");
    assert_eq!(h.client(B).cache().dirty_bytes(), 0);
    assert_eq!(read(&mut h, A, fa, 0, MIB + 5000), data);

    let op = h.group_lock(A, fa, 7);
    assert_eq!(h.wait(A, op), Ok(Err(ClientError::GroupLockHeld)));
    let op = h.group_unlock(A, fa, 8);
    assert_eq!(h.wait(A, op), Ok(Err(ClientError::NoGroupLock(8))));
    let op = h.group_unlock(A, fa, 7);
    assert_eq!(h.wait_ok(A, op), OpOutput::GroupUnlocked);
    let op = h.group_unlock(A, fa, 7);
    assert_eq!(h.wait(A, op), Ok(Err(ClientError::NoGroupLock(7))));
    assert_eq!(h.lock_counters().callbacks, 2);
    h.drive().unwrap();
}

/// Writers sharing one page (false sharing below the page size): each write
/// revokes the other's lock, only dirty bytes are written back, and nobody's
/// bytes are lost to a whole-page overwrite.
#[test]
fn writers_sharing_a_page_keep_each_others_bytes() {
    let mut h = harness(2, 1, 9);
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    let mut expected = vec![0u8; 4096];
    for round in 0..20u64 {
        let (c, fh) = if round % 2 == 0 { (A, fa) } else { (B, fb) };
        let (offset, len) = (round * 150 + 7, 150);
        let bytes = pattern(len, round as u8);
        expected[offset as usize..(offset + len) as usize].copy_from_slice(&bytes);
        write(&mut h, c, fh, offset, bytes);
    }
    assert_eq!(h.lock_counters().callbacks, 19, "every write after the first revoked the other writer");
    assert_eq!(read(&mut h, A, fa, 0, 4096), expected);
    assert_eq!(read(&mut h, B, fb, 0, 4096), expected);
    assert_eq!(stored(&mut h, &layout, 0, 4096), expected);
    h.drive().unwrap();
}

/// A partial-page write leaves the rest of the page unknown to the cache: a
/// read of the whole page fetches it and keeps the local dirty bytes on top.
#[test]
fn partial_page_write_then_read_merges_with_stored_bytes() {
    let mut h = harness(2, 1, 10);
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout));
    let mut expected = pattern(8192, 1);
    write(&mut h, B, fb, 0, expected.clone());
    let patch = pattern(100, 2);
    write(&mut h, A, fa, 4000, patch.clone());
    expected[4000..4100].copy_from_slice(&patch);
    assert_eq!(h.client(A).cache().dirty_bytes(), 100);
    assert_eq!(read(&mut h, A, fa, 0, 8192), expected);
    assert_eq!(h.client(A).cache().dirty_bytes(), 100, "the read did not flush or lose A's bytes");
    assert_eq!(read(&mut h, B, fb, 0, 8192), expected);
    h.drive().unwrap();
}

/// Truncating below cached pages, then extending: the same client reads
/// zeros past the cut (no stale cached bytes), and stat follows.
#[test]
fn truncate_drops_cached_bytes_past_the_new_size() {
    let mut h = harness(2, 2, 12);
    let layout = h.create_layout(64 * KIB, 2, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout));
    let data = pattern(200 * KIB, 5);
    write(&mut h, A, fa, 0, data.clone());
    let op = h.fsync(A, fa);
    h.wait_ok(A, op);
    assert_eq!(read(&mut h, A, fa, 0, 200 * KIB), data);

    let cut = 70 * KIB + 5;
    let op = h.truncate(A, fa, cut);
    assert_eq!(h.wait_ok(A, op), OpOutput::Truncated);
    let mut expected = data[..cut as usize].to_vec();
    expected.resize(200 * KIB as usize, 0);
    assert_eq!(read(&mut h, A, fa, 0, 200 * KIB), expected, "A's own cache kept bytes past the cut");
    assert_eq!(stat(&mut h, B, fb), cut);
    assert_eq!(read(&mut h, B, fb, 0, 200 * KIB), expected);

    let op = h.truncate(B, fb, MIB);
    h.wait_ok(B, op);
    assert_eq!(stat(&mut h, A, fa), MIB);
    expected.resize(MIB as usize, 0);
    assert_eq!(read(&mut h, A, fa, 0, MIB), expected);
    h.drive().unwrap();
}

/// Truncate issued while the same client's write RPCs are still in flight:
/// the punch must land after them (same link, in order) and nothing past the
/// new size may come back.
#[test]
fn truncate_while_writeback_is_in_flight() {
    let mut h = harness(2, 1, 13);
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, A, fa, 0, pattern(4 * MIB, 6));
    assert!(h.client(A).counters().write_rpcs > 0, "full RPCs go out at once");
    let op = h.truncate(A, fa, 1000);
    assert_eq!(h.wait_ok(A, op), OpOutput::Truncated);
    h.drive().unwrap();
    assert_eq!(h.client(A).cache().dirty_bytes(), 0);
    assert_eq!(stat(&mut h, B, fb), 1000);
    let mut expected = pattern(1000, 6);
    expected.resize(2 * MIB as usize, 0);
    assert_eq!(read(&mut h, B, fb, 0, 2 * MIB), expected);
    assert_eq!(read(&mut h, A, fa, 0, 2 * MIB), expected);
    h.drive().unwrap();
}

/// A hole B punches across three stripes reads as zeros everywhere: A's
/// cached pages there go with A's locks, A's dirty bytes in the range
/// reach the OSTs before the hole does (so the hole is the last word), and
/// the bytes around it stay.
#[test]
fn a_hole_punched_by_one_client_reads_as_zeros_in_another() {
    use lanefs_core::msg::Cut;
    let stripe = 64 * KIB;
    for seed in 0..4 {
        let mut h = harness(2, 3, seed);
        let layout = h.create_layout(stripe, 3, Some(0)).unwrap();
        let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
        let len = 6 * stripe;
        let mut data = pattern(len, seed as u8);
        write(&mut h, A, fa, 0, data.clone());
        assert_eq!(read(&mut h, A, fa, 0, len), data, "A caches the file");
        let (offset, hole) = (stripe / 2 + 100, 3 * stripe);
        let op = h.fallocate(B, fb, Cut::Hole { offset, len: hole });
        assert_eq!(h.wait_ok(B, op), OpOutput::Allocated);
        data[offset as usize..(offset + hole) as usize].fill(0);
        assert_eq!(read(&mut h, A, fa, 0, len), data, "seed {seed}: A reads the hole");
        assert_eq!(read(&mut h, B, fb, 0, len), data, "seed {seed}: B too");
        assert_eq!(stored(&mut h, &layout, 0, len), data, "seed {seed}: and the OSTs hold it");
        assert_eq!(stat(&mut h, A, fa), len, "a hole keeps the size");

        // A reservation past the end grows the file unless it keeps the size.
        let op = h.fallocate(A, fa, Cut::Reserve { offset: len, len: stripe, keep_size: true });
        assert_eq!(h.wait_ok(A, op), OpOutput::Allocated);
        assert_eq!(stat(&mut h, B, fb), len);
        let op = h.fallocate(A, fa, Cut::Reserve { offset: len, len: stripe + 10, keep_size: false });
        assert_eq!(h.wait_ok(A, op), OpOutput::Allocated);
        assert_eq!(stat(&mut h, B, fb), len + stripe + 10);
        let op = h.fallocate(A, fa, Cut::Size(0));
        assert!(matches!(h.wait(A, op), Ok(Err(ClientError::InvalidCut(_)))), "a truncate is not a fallocate");
    }
}
