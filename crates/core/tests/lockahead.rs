//! Lustre's lockahead tests (`lustre/tests/lockahead_test.c`, `ldlm.md` §4),
//! replayed through the deterministic harness with real clients and OSTs.
//!
//! Every file here has one 1 MiB stripe on OST 0, so object offsets equal
//! file offsets and lock extents can be written down as the test asks for
//! them. Each test asserts exact counts (enqueues, grants, callbacks,
//! refusals) and exact extents, so a policy or matching change shows up as
//! a failing number rather than a hang.

use lanefs_core::client::ladvise::{
    Advice, AheadMode, LadviseError, LockaheadResult, LF_ASYNC, LF_UNSET, LU_LADVISE_LOCKAHEAD,
};
use lanefs_core::client::locks::ClientLockState;
use lanefs_core::client::{ClientError, FileHandle, LadviseOutcome, OpOutput};
use lanefs_core::harness::{Harness, HarnessConfig};
use lanefs_core::ldlm::LockMode;
use lanefs_core::store::ObjectStore;
use lanefs_core::{ClientId, Extent, OstIndex, EOF};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const A: ClientId = ClientId(0);
const B: ClientId = ClientId(1);
const OST0: OstIndex = OstIndex(0);
const PW: LockMode = LockMode::ProtectedWrite;

/// Two clients with the same one-stripe file open: `(harness, A's, B's)`.
fn one_stripe_file() -> (Harness, FileHandle, FileHandle) {
    let mut h = Harness::new(HarnessConfig { clients: 2, osts: 1, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    let fb = h.open(B, layout);
    (h, fa, fb)
}

/// Asynchronous write lockahead of `[start, start + len)`.
fn ahead_write(start: u64, len: u64) -> Advice {
    Advice::lockahead(AheadMode::Write, start, start + len - 1, true)
}

/// `(mode, extent)` of the locks OST 0 has granted to `c`, by extent.
fn granted(h: &Harness, c: ClientId) -> Vec<(LockMode, Extent)> {
    let mut v: Vec<_> = h
        .ost(OST0)
        .locks()
        .granted_locks()
        .filter(|l| l.1 == c)
        .map(|(_, _, _, mode, extent)| (mode, extent))
        .collect();
    v.sort_by_key(|(_, e)| *e);
    v
}

/// `(mode, extent)` of every lock in `c`'s cache, by extent; all must be granted.
fn cached(h: &Harness, c: ClientId) -> Vec<(LockMode, Extent)> {
    let mut v: Vec<_> = h
        .client(c)
        .lock_cache()
        .iter()
        .map(|(_, l)| {
            assert_eq!(l.state, ClientLockState::Granted, "{c}: lock {l:?} not granted");
            (l.mode, l.extent)
        })
        .collect();
    v.sort_by_key(|(_, e)| *e);
    v
}

fn results(outcome: LadviseOutcome) -> Vec<LockaheadResult> {
    match outcome {
        LadviseOutcome::Results(r) => r,
        other => panic!("expected asynchronous results, got {other:?}"),
    }
}

fn pw(start: u64, end: u64) -> (LockMode, Extent) {
    (PW, Extent::new(start, end))
}

/// lockahead_test.c test 11: the same asynchronous request twice answers
/// SENT, then SAME once the lock is granted, and the second call sends nothing.
#[test]
fn test11_repeated_async_request_is_sent_then_same() {
    let (mut h, fa, _) = one_stripe_file();
    let advice = ahead_write(0, MIB);
    assert_eq!(results(h.ladvise(A, fa, &[advice]).unwrap()), vec![LockaheadResult::Sent]);
    assert_eq!(h.lock_counters().enqueues, 0, "nothing delivered before driving");
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 1);
    assert_eq!(h.lock_counters().grants, 1);
    assert_eq!(granted(&h, A), vec![pw(0, MIB - 1)]);

    assert_eq!(results(h.ladvise(A, fa, &[advice]).unwrap()), vec![LockaheadResult::Same]);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 1, "SAME must not send an enqueue");
    let counters = h.client(A).counters();
    assert_eq!((counters.enqueues, counters.lockahead_enqueues), (1, 1));
    assert_eq!(cached(&h, A), vec![pw(0, MIB - 1)]);
}

/// An asynchronous request repeated before its grant arrives is still
/// "sent" (it is on its way), but is not sent a second time.
#[test]
fn async_request_repeated_before_grant_sends_one_enqueue() {
    let (mut h, fa, _) = one_stripe_file();
    let advice = ahead_write(4 * MIB, MIB);
    let outcome = h.ladvise(A, fa, &[advice, advice]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Sent, LockaheadResult::Sent]);
    assert_eq!(results(h.ladvise(A, fa, &[advice]).unwrap()), vec![LockaheadResult::Sent]);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 1);
    assert_eq!(h.client(A).counters().enqueues, 1);
    assert_eq!(granted(&h, A), vec![pw(4 * MIB, 5 * MIB - 1)]);
}

/// lockahead_test.c test 13: 100 adjacent 1 MiB write locks in one call all
/// coexist, each exactly as requested (no expansion).
#[test]
fn test13_hundred_adjacent_locks_are_granted_unexpanded() {
    let (mut h, fa, _) = one_stripe_file();
    let advices: Vec<Advice> = (0..100).map(|i| ahead_write(i * MIB, MIB)).collect();
    assert_eq!(results(h.ladvise(A, fa, &advices).unwrap()), vec![LockaheadResult::Sent; 100]);
    h.drive().unwrap();

    let expected: Vec<_> = (0..100).map(|i| pw(i * MIB, (i + 1) * MIB - 1)).collect();
    assert_eq!(granted(&h, A), expected);
    assert_eq!(cached(&h, A), expected, "the client adopts exactly the granted extents");
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.grants, lc.refusals, lc.callbacks, lc.cancels), (100, 100, 0, 0, 0));
    assert_eq!(h.client(A).counters().lockahead_enqueues, 100);

    // What the locks are for: a write inside one of them needs no RPC.
    let op = h.write(A, fa, 37 * MIB, vec![7; MIB as usize]);
    assert_eq!(h.wait_ok(A, op), OpOutput::Written(MIB));
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 100);
    assert_eq!(h.client(A).counters().lock_matches, 1);
    assert_eq!(h.lock_counters().callbacks, 0);
}

/// lockahead_test.c test 15: 100 locks at 10 MiB strides, then another
/// client's 1 MiB write at 0 revokes only the lock at 0 and is granted a lock
/// that grows up to, and not into, A's next lock.
#[test]
fn test15_write_revokes_only_the_lock_it_overlaps() {
    let (mut h, fa, fb) = one_stripe_file();
    let stride = 10 * MIB;
    let advices: Vec<Advice> = (0..100).map(|i| ahead_write(i * stride, MIB)).collect();
    assert_eq!(results(h.ladvise(A, fa, &advices).unwrap()), vec![LockaheadResult::Sent; 100]);
    h.drive().unwrap();
    assert_eq!(granted(&h, A).len(), 100);

    let op = h.write(B, fb, 0, vec![2; MIB as usize]);
    assert_eq!(h.wait_ok(B, op), OpOutput::Written(MIB));
    h.drive().unwrap();

    let lc = h.lock_counters();
    assert_eq!(lc.callbacks, 1, "exactly one blocking callback: {lc:?}");
    assert_eq!(lc.cancels, 1);
    assert_eq!(h.client(A).counters().blocking_callbacks, 1);
    // Upward growth stops below A's lock at 10 MiB (granted step), then the
    // 32 MiB cap (99 conflicting locks) and 1 MiB alignment change nothing.
    assert_eq!(granted(&h, B), vec![pw(0, stride - 1)]);
    let rest: Vec<_> = (1..100).map(|i| pw(i * stride, i * stride + MIB - 1)).collect();
    assert_eq!(granted(&h, A), rest, "A's other 99 locks are untouched");
    assert_eq!(cached(&h, A), rest);
}

/// lockahead_test.c tests 16 and 17: with lock-no-expand set, a write's lock
/// covers exactly its pages; once unset, a write's lock expands again.
#[test]
fn test16_17_lock_no_expand_then_unset() {
    let (mut h, fa, _) = one_stripe_file();
    let outcome = h.ladvise(A, fa, &[Advice::lock_no_expand(true)]).unwrap();
    assert_eq!(outcome, LadviseOutcome::Results(vec![]));
    assert_eq!(h.steps(), 0, "lock-no-expand is local advice");

    // [1 MiB + 100, 1 MiB + 8099] rounds out to the pages [1 MiB, 1 MiB + 8191].
    let op = h.write(A, fa, MIB + 100, vec![1; 8000]);
    h.wait_ok(A, op);
    assert_eq!(granted(&h, A), vec![pw(MIB, MIB + 8191)]);
    assert_eq!(cached(&h, A), vec![pw(MIB, MIB + 8191)]);

    let outcome = h.ladvise(A, fa, &[Advice::lock_no_expand(false)]).unwrap();
    assert_eq!(outcome, LadviseOutcome::Results(vec![]));
    let op = h.write(A, fa, 8 * MIB, vec![1; 4096]);
    h.wait_ok(A, op);
    // The PW lock below stops downward growth only; upward it reaches EOF.
    assert_eq!(granted(&h, A), vec![pw(MIB, MIB + 8191), pw(8 * MIB, EOF)]);
    assert_eq!(h.lock_counters().enqueues, 2);
    assert_eq!(h.lock_counters().callbacks, 0);
}

/// lockahead_test.c test 19: an expanded lock from a plain write covers the
/// range, so asynchronous lockahead answers DIFFERENT without an RPC.
#[test]
fn test19_async_lockahead_under_expanded_lock_is_different() {
    let (mut h, fa, _) = one_stripe_file();
    let op = h.write(A, fa, 0, vec![1; 4096]);
    h.wait_ok(A, op);
    assert_eq!(granted(&h, A), vec![pw(0, EOF)], "an uncontended first write gets the whole object");
    let enqueues = h.lock_counters().enqueues;
    assert_eq!(enqueues, 1);

    let outcome = h.ladvise(A, fa, &[ahead_write(MIB, MIB)]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Different]);
    // A sub-page range is rounded out to pages before matching.
    let outcome = h.ladvise(A, fa, &[ahead_write(100, 10)]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Different]);
    let read = Advice::lockahead(AheadMode::Read, 3 * MIB, 4 * MIB - 1, true);
    assert_eq!(results(h.ladvise(A, fa, &[read]).unwrap()), vec![LockaheadResult::Different], "PW serves PR");
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, enqueues);
    assert_eq!(h.client(A).counters().enqueues, 1);
    assert_eq!(h.client(A).counters().lockahead_enqueues, 0);
}

/// Advice reaching EOF (`lla_end = ~0`) is valid input (`ll_ladvise_sanity`
/// only checks `start < end`): against a cached `[0, EOF]` lock it answers
/// SAME for `[0, EOF]` and DIFFERENT for `[1 MiB, EOF]`, and a synchronous
/// request to EOF completes.
#[test]
fn lockahead_to_eof_is_valid_advice() {
    let (mut h, fa, _) = one_stripe_file();
    let op = h.write(A, fa, 0, vec![1; 4096]);
    h.wait_ok(A, op);
    assert_eq!(granted(&h, A), vec![pw(0, EOF)]);
    let whole = Advice::lockahead(AheadMode::Write, 0, EOF, true);
    assert_eq!(results(h.ladvise(A, fa, &[whole]).unwrap()), vec![LockaheadResult::Same]);
    let tail = Advice::lockahead(AheadMode::Write, MIB, EOF, true);
    assert_eq!(results(h.ladvise(A, fa, &[tail]).unwrap()), vec![LockaheadResult::Different]);
    let sync = Advice::lockahead(AheadMode::Write, MIB, EOF, false);
    let LadviseOutcome::Pending { op, .. } = h.ladvise(A, fa, &[sync]).unwrap() else { panic!("synchronous") };
    assert_eq!(h.wait_ok(A, op), OpOutput::LockaheadDone);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 1);
}

/// lockahead_test.c test 20: a synchronous request on a sub-range of a cached
/// lock matches it: no enqueue, and its operation completes.
#[test]
fn test20_sync_lockahead_matches_existing_lock() {
    let (mut h, fa, _) = one_stripe_file();
    let op = h.write(A, fa, 0, vec![1; 4096]);
    h.wait_ok(A, op);
    let matches = h.client(A).counters().lock_matches;

    let sync = Advice::lockahead(AheadMode::Write, MIB, 2 * MIB - 1, false);
    let LadviseOutcome::Pending { results, op } = h.ladvise(A, fa, &[sync]).unwrap() else {
        panic!("a synchronous lockahead returns an operation");
    };
    assert_eq!(results, vec![]);
    assert_eq!(h.wait_ok(A, op), OpOutput::LockaheadDone);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 1);
    assert_eq!(h.client(A).counters().lock_matches, matches + 1);
    assert_eq!(granted(&h, A), vec![pw(0, EOF)]);
}

/// `ll_ladvise_sanity`: every malformed call is refused whole, before
/// anything is sent or any advice takes effect.
#[test]
fn invalid_advice_is_refused_and_nothing_is_sent() {
    let (mut h, fa, _) = one_stripe_file();
    let valid = ahead_write(0, MIB);
    let refuse = |h: &mut Harness, advices: &[Advice]| -> LadviseError {
        let steps = h.steps();
        let error = match h.ladvise(A, fa, advices) {
            Err(ClientError::Ladvise(e)) => e,
            other => panic!("{advices:?}: expected a ladvise error, got {other:?}"),
        };
        h.drive().unwrap();
        assert_eq!(h.steps(), steps, "{advices:?}: a refused call sent a message");
        error
    };

    // ROMIO's fallback LF_NONBLOCK (0x3), and LF_UNSET, on lockahead.
    for flags in [LF_ASYNC | LF_UNSET, LF_UNSET, 0x4] {
        let e = refuse(&mut h, &[Advice { flags, ..valid }]);
        assert!(matches!(e, LadviseError::Flags { advice: "lockahead", flags: f, .. } if f == flags), "{e:?}");
    }
    let e = refuse(&mut h, &[Advice { flags: LF_ASYNC, ..Advice::lock_no_expand(true) }]);
    assert!(matches!(e, LadviseError::Flags { advice: "locknoexpand", flags: LF_ASYNC, .. }), "{e:?}");
    assert_eq!(
        refuse(&mut h, &[Advice { start: MIB, end: MIB, ..valid }]),
        LadviseError::Range { start: MIB, end: MIB }
    );
    assert_eq!(refuse(&mut h, &[Advice { start: MIB, end: 0, ..valid }]), LadviseError::Range { start: MIB, end: 0 });
    for mode in [0, 3] {
        assert_eq!(refuse(&mut h, &[Advice { mode, ..valid }]), LadviseError::Mode(mode));
    }
    // LU_LADVISE_INVALID, and 5 (Lustre's `ahead`, which lanefs does not give).
    for advice in [0, 5] {
        assert_eq!(refuse(&mut h, &[Advice { advice, ..valid }]), LadviseError::Advice(advice));
    }
    assert_eq!(refuse(&mut h, &[]), LadviseError::Count(0));
    assert_eq!(refuse(&mut h, &vec![valid; 1024]), LadviseError::Count(1024));
    // One bad advice spoils the call: the good ones before it are not sent...
    assert_eq!(refuse(&mut h, &[valid, Advice { mode: 0, ..valid }]), LadviseError::Mode(0));
    // ...and lock-no-expand before it is not set (checked by the write below).
    let bad = Advice { advice: LU_LADVISE_LOCKAHEAD, mode: 9, ..valid };
    assert_eq!(refuse(&mut h, &[Advice::lock_no_expand(true), bad]), LadviseError::Mode(9));
    let steps = h.steps();
    assert_eq!(h.ladvise(A, FileHandle(999), &[valid]), Err(ClientError::BadFile));
    h.drive().unwrap();
    assert_eq!(h.steps(), steps);
    assert_eq!(h.lock_counters().enqueues, 0);
    assert_eq!(h.client(A).counters().enqueues, 0);

    let op = h.write(A, fa, 0, vec![1; 4096]);
    h.wait_ok(A, op);
    assert_eq!(granted(&h, A), vec![pw(0, EOF)], "lock-no-expand of a refused call took effect");

    // The largest legal call: 1023 advices (all the same range: one enqueue).
    let (mut h, fb, _) = one_stripe_file();
    let outcome = h.ladvise(A, fb, &vec![ahead_write(0, 64 * KIB); 1023]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Sent; 1023]);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 1);
    assert_eq!(granted(&h, A), vec![pw(0, 64 * KIB - 1)]);
}

/// A speculative request that meets a conflicting lock is refused outright:
/// no waiting, no callback (`ldlm.md` §4 "Server side"). The next real write
/// then revokes the blocker (`ladvise_lockahead.txt` §3).
#[test]
fn lockahead_refused_by_conflict_then_real_write_revokes() {
    let (mut h, fa, fb) = one_stripe_file();
    let a_bytes: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let op = h.write(A, fa, 0, a_bytes.clone());
    h.wait_ok(A, op);
    assert_eq!(granted(&h, A), vec![pw(0, EOF)]);
    assert_eq!(h.client(A).cache().dirty_bytes(), 4096);

    let outcome = h.ladvise(B, fb, &[ahead_write(MIB, MIB)]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Sent]);
    h.drive().unwrap();
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.refusals, lc.callbacks, lc.grants), (2, 1, 0, 1), "{lc:?}");
    assert_eq!(lc.conflicts, 1, "a refusal still counts toward contention");
    assert_eq!(h.client(B).counters().lockahead_refused, 1);
    assert_eq!(h.client(A).counters().blocking_callbacks, 0);
    assert!(h.client(B).lock_cache().is_empty(), "a refused lock is forgotten");
    assert_eq!(granted(&h, A), vec![pw(0, EOF)]);
    assert_eq!(h.client(A).cache().dirty_bytes(), 4096, "A was not disturbed");

    let op = h.write(B, fb, MIB, vec![2; 4096]);
    assert_eq!(h.wait_ok(B, op), OpOutput::Written(4096));
    h.drive().unwrap();
    let lc = h.lock_counters();
    assert_eq!((lc.callbacks, lc.cancels, lc.refusals), (1, 1, 1), "{lc:?}");
    assert_eq!(h.client(A).counters().blocking_callbacks, 1);
    assert!(granted(&h, A).is_empty());
    assert_eq!(granted(&h, B), vec![pw(0, EOF)], "alone on the object, B's write lock grows to the whole object");
    assert_eq!(h.client(A).cache().dirty_bytes(), 0);
    let object = h.client(A).layout(fa).unwrap().object(0).object;
    assert_eq!(h.ost_mut(OST0).store_mut().read(object, 0, 4096).unwrap(), a_bytes, "A flushed before cancelling");
}

/// lockahead_test.c test 21: a synchronous request on a range larger than
/// the client's own lock revokes that lock and replaces it, unexpanded.
#[test]
fn test21_sync_lockahead_on_larger_range_replaces_lock() {
    let (mut h, fa, _) = one_stripe_file();
    h.ladvise(A, fa, &[ahead_write(0, MIB)]).unwrap();
    h.drive().unwrap();
    assert_eq!(granted(&h, A), vec![pw(0, MIB - 1)]);

    let sync = Advice::lockahead(AheadMode::Write, 0, 2 * MIB - 1, false);
    let LadviseOutcome::Pending { op, .. } = h.ladvise(A, fa, &[sync]).unwrap() else { panic!("synchronous") };
    assert_eq!(h.wait_ok(A, op), OpOutput::LockaheadDone);
    h.drive().unwrap();
    assert_eq!(granted(&h, A), vec![pw(0, 2 * MIB - 1)]);
    assert_eq!(cached(&h, A), vec![pw(0, 2 * MIB - 1)]);
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.callbacks, lc.cancels, lc.refusals), (2, 1, 1, 0), "{lc:?}");
}

/// A synchronous request is an ordinary blocking enqueue without expansion
/// (`ldlm.md` §4): it revokes another client's conflicting lock, waits, and
/// is granted exactly the requested range.
#[test]
fn sync_lockahead_revokes_conflicts_and_is_not_expanded() {
    let (mut h, fa, fb) = one_stripe_file();
    let b_bytes = vec![9; 4096];
    let op = h.write(B, fb, 0, b_bytes.clone());
    h.wait_ok(B, op);
    assert_eq!(granted(&h, B), vec![pw(0, EOF)]);

    let sync = Advice::lockahead(AheadMode::Write, MIB, 2 * MIB - 1, false);
    let LadviseOutcome::Pending { op, .. } = h.ladvise(A, fa, &[sync]).unwrap() else { panic!("synchronous") };
    assert_eq!(h.wait_ok(A, op), OpOutput::LockaheadDone);
    h.drive().unwrap();
    assert_eq!(granted(&h, A), vec![pw(MIB, 2 * MIB - 1)]);
    assert!(granted(&h, B).is_empty());
    let lc = h.lock_counters();
    assert_eq!((lc.callbacks, lc.cancels, lc.refusals), (1, 1, 0), "{lc:?}");
    assert_eq!(h.client(A).counters().lockahead_refused, 0);
    let object = h.client(A).layout(fa).unwrap().object(0).object;
    assert_eq!(h.ost_mut(OST0).store_mut().read(object, 0, 4096).unwrap(), b_bytes, "B flushed before cancelling");
}

/// A GROUP lock anywhere on the object refuses a speculative request,
/// without a callback (group locks never get one).
#[test]
fn lockahead_refused_by_group_lock() {
    let (mut h, fa, fb) = one_stripe_file();
    let op = h.group_lock(B, fb, 3);
    assert_eq!(h.wait_ok(B, op), OpOutput::GroupLocked);
    let outcome = h.ladvise(A, fa, &[ahead_write(MIB, MIB)]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Sent]);
    h.drive().unwrap();
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.grants, lc.refusals, lc.callbacks), (2, 1, 1, 0), "{lc:?}");
    assert_eq!(h.client(A).counters().lockahead_refused, 1);
    assert!(h.client(A).lock_cache().is_empty());
}

/// A speculative request overlapping a conflicting *waiter* (and no granted
/// lock) is refused too, rather than queued behind it.
#[test]
fn lockahead_refused_by_conflicting_waiter() {
    use lanefs_core::ldlm::server::LockServerConfig;
    use lanefs_core::ost::OstConfig;
    use lanefs_core::Duration;
    let c = ClientId(2);
    // A crashed holder keeps B's request waiting for the 5 s callback timeout.
    let ost = OstConfig {
        locks: LockServerConfig { callback_timeout: Duration::from_secs(5), ..LockServerConfig::default() },
        ..Default::default()
    };
    let mut h = Harness::new(HarnessConfig { clients: 3, osts: 1, ost, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 1, Some(0)).unwrap();
    let (fa, fb, fc) = (h.open(A, layout.clone()), h.open(B, layout.clone()), h.open(c, layout));
    h.ladvise(A, fa, &[ahead_write(0, 64 * KIB)]).unwrap();
    h.drive().unwrap();
    h.crash(A);

    let b_write = h.write(B, fb, 0, vec![2; 128 * KIB as usize]);
    while h.ost(OST0).locks().waiting_count() == 0 {
        assert!(h.step());
    }
    // [64 KiB, 128 KiB) misses A's granted lock but overlaps B's request.
    let outcome = h.ladvise(c, fc, &[ahead_write(64 * KIB, 64 * KIB)]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Sent]);
    while h.client(c).counters().lockahead_refused == 0 {
        assert!(h.step(), "C's lockahead was never answered");
        assert!(h.client(c).lock_cache().iter().all(|(_, l)| !l.is_granted()), "C's lockahead was granted");
    }
    assert_eq!(h.result(B, b_write), None, "B still waits");
    let lc = h.lock_counters();
    assert_eq!((lc.refusals, lc.callbacks), (1, 1), "{lc:?}");

    assert_eq!(h.wait_ok(B, b_write), OpOutput::Written(128 * KIB));
    assert_eq!(h.lock_counters().evictions, 1);
    assert!(h.client(c).lock_cache().is_empty());
}

/// Read lockahead locks of two clients on the same range are compatible:
/// both granted as asked, and reads inside them need no RPC.
#[test]
fn read_lockahead_from_two_clients_coexists() {
    let (mut h, fa, fb) = one_stripe_file();
    let read_ahead = Advice::lockahead(AheadMode::Read, 0, MIB - 1, true);
    for (c, fh) in [(A, fa), (B, fb)] {
        assert_eq!(results(h.ladvise(c, fh, &[read_ahead]).unwrap()), vec![LockaheadResult::Sent]);
    }
    h.drive().unwrap();
    let pr = (LockMode::ProtectedRead, Extent::new(0, MIB - 1));
    assert_eq!(granted(&h, A), vec![pr]);
    assert_eq!(granted(&h, B), vec![pr]);
    let op = h.read(A, fa, 100, 4000);
    assert_eq!(h.wait_ok(A, op), OpOutput::Read(vec![0; 4000]));
    h.drive().unwrap();
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.grants, lc.refusals, lc.callbacks), (2, 2, 0, 0), "{lc:?}");
    assert_eq!(h.client(A).counters().lock_matches, 1);
}

/// Why lock-no-expand exists (`ldlm.md` §4): a write whose lockahead lock
/// was refused takes only its own bytes, so later lockahead requests of
/// other ranges are granted instead of refused.
#[test]
fn lock_no_expand_write_leaves_room_for_lockahead() {
    let (mut h, fa, fb) = one_stripe_file();
    let op = h.write(B, fb, 0, vec![9; 4096]);
    h.wait_ok(B, op);
    let outcome = h.ladvise(A, fa, &[Advice::lock_no_expand(true), ahead_write(MIB, MIB)]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Sent]);
    h.drive().unwrap();
    assert_eq!(h.client(A).counters().lockahead_refused, 1);

    let op = h.write(A, fa, MIB, vec![1; MIB as usize]);
    h.wait_ok(A, op);
    h.drive().unwrap();
    assert_eq!(granted(&h, A), vec![pw(MIB, 2 * MIB - 1)]);
    assert!(granted(&h, B).is_empty());

    let outcome = h.ladvise(B, fb, &[ahead_write(0, MIB), ahead_write(2 * MIB, MIB)]).unwrap();
    assert_eq!(results(outcome), vec![LockaheadResult::Sent, LockaheadResult::Sent]);
    h.drive().unwrap();
    assert_eq!(granted(&h, B), vec![pw(0, MIB - 1), pw(2 * MIB, 3 * MIB - 1)]);
    let lc = h.lock_counters();
    assert_eq!((lc.refusals, lc.callbacks), (1, 1), "{lc:?}");
}

/// A file range over several stripes becomes one lock per object; the call's
/// answer is SENT if any object needed an enqueue, else DIFFERENT if any
/// cached lock differs from the request, else SAME.
#[test]
fn multi_stripe_lockahead_locks_each_object() {
    let mut h = Harness::new(HarnessConfig { clients: 1, osts: 2, ..Default::default() }).unwrap();
    let layout = h.create_layout(MIB, 2, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    let four = ahead_write(0, 4 * MIB);
    assert_eq!(results(h.ladvise(A, fa, &[four]).unwrap()), vec![LockaheadResult::Sent]);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 2);
    for stripe in 0..2 {
        let key = layout.object(stripe);
        let locks: Vec<_> = h.ost(key.ost).locks().granted_locks().map(|l| (l.2, l.3, l.4)).collect();
        assert_eq!(locks, vec![(key.object, PW, Extent::new(0, 2 * MIB - 1))], "stripe {stripe}");
    }
    assert_eq!(results(h.ladvise(A, fa, &[four]).unwrap()), vec![LockaheadResult::Same]);
    // Stripe 0 needs [0, 2 MiB) (same), stripe 1 only [0, 1 MiB) (different).
    let three = ahead_write(0, 3 * MIB);
    assert_eq!(results(h.ladvise(A, fa, &[three]).unwrap()), vec![LockaheadResult::Different]);
    // Stripe 1's second unit is covered, stripe 0's third is not.
    let past = ahead_write(3 * MIB, 2 * MIB);
    assert_eq!(results(h.ladvise(A, fa, &[past]).unwrap()), vec![LockaheadResult::Sent]);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 3);
    assert_eq!(h.lock_counters().grants, 3);
}

/// A write issued right after an asynchronous lockahead of its range waits
/// for that request rather than enqueueing its own; if the lockahead is
/// refused, the write enqueues afresh and revokes the blocker.
#[test]
fn write_right_after_lockahead_uses_the_pending_request() {
    let (mut h, fa, fb) = one_stripe_file();
    h.ladvise(A, fa, &[ahead_write(0, MIB)]).unwrap();
    let op = h.write(A, fa, 0, vec![1; 4096]);
    h.wait_ok(A, op);
    h.drive().unwrap();
    assert_eq!(h.lock_counters().enqueues, 1);
    assert_eq!(granted(&h, A), vec![pw(0, MIB - 1)], "the write used the lockahead lock");

    // B's expanded lock [MIB, EOF] blocks A's next lockahead.
    let op = h.write(B, fb, MIB, vec![2; 4096]);
    h.wait_ok(B, op);
    assert_eq!(granted(&h, B), vec![pw(MIB, EOF)]);
    h.ladvise(A, fa, &[ahead_write(2 * MIB, MIB)]).unwrap();
    let op = h.write(A, fa, 2 * MIB, vec![3; 4096]);
    assert_eq!(h.wait_ok(A, op), OpOutput::Written(4096));
    h.drive().unwrap();
    let lc = h.lock_counters();
    assert_eq!((lc.enqueues, lc.refusals, lc.callbacks), (4, 1, 1), "{lc:?}");
    assert_eq!(h.client(A).counters().lockahead_refused, 1);
    assert!(granted(&h, B).is_empty());
    // An ordinary write lock again: up from its start, stopped below by A's own lock.
    assert_eq!(granted(&h, A), vec![pw(0, MIB - 1), pw(2 * MIB, EOF)]);
}
