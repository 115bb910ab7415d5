//! Recovery scenarios on the deterministic harness (`ost/recovery.rs`,
//! `client/session.rs`): an OST that crashes loses what it had not
//! committed and takes it back from its clients' replay; a lost connection
//! loses nothing; a client that does not come back is evicted when the
//! recovery window closes; failed commits and failed writes reach the
//! program that wrote, named as such, once.

use lanefs_core::client::{ClientConfig, ClientError, FileHandle, LossCause, OpOutput};
use lanefs_core::harness::{Harness, HarnessConfig};
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::msg::IoError;
use lanefs_core::ost::{OstConfig, RecoveryConfig, SyncLockCancel};
use lanefs_core::store::ObjectStore;
use lanefs_core::{ClientId, Duration, Errno, OstIndex, Transno};

const KIB: u64 = 1 << 10;
const A: ClientId = ClientId(0);
const B: ClientId = ClientId(1);
const C: ClientId = ClientId(2);
const OST0: OstIndex = OstIndex(0);
const WINDOW: Duration = Duration::from_secs(10);

fn pattern(len: u64, salt: u8) -> Vec<u8> {
    (0..len).map(|i| ((i % 251) as u8).wrapping_mul(7).wrapping_add(salt) | 1).collect()
}

fn harness(clients: u32, seed: u64) -> Harness {
    harness_with_commits(clients, seed, Duration::ZERO)
}

/// A harness whose OSTs take `commit_latency` to commit.
fn harness_with_commits(clients: u32, seed: u64, commit_latency: Duration) -> Harness {
    let recovery =
        RecoveryConfig { window: WINDOW, commit_interval: Duration::from_secs(3600), ..RecoveryConfig::default() };
    let ost = OstConfig {
        locks: LockServerConfig { callback_timeout: Duration::from_secs(2), ..LockServerConfig::default() },
        sync_lock_cancel: SyncLockCancel::Never,
        ..OstConfig::default()
    };
    let client = ClientConfig { rpc_bytes_max: 16 * KIB, dirty_bytes_max: 64 * KIB, ..ClientConfig::default() };
    let config = HarnessConfig {
        clients,
        osts: 2,
        seed,
        recovery: Some(recovery),
        ost,
        client,
        commit_latency,
        ..Default::default()
    };
    Harness::new(config).unwrap()
}

fn write(h: &mut Harness, c: ClientId, fh: FileHandle, offset: u64, data: Vec<u8>) {
    let len = data.len() as u64;
    let op = h.write(c, fh, offset, data);
    assert_eq!(h.wait_ok(c, op), OpOutput::Written(len));
}

fn read(h: &mut Harness, c: ClientId, fh: FileHandle, offset: u64, len: u64) -> Vec<u8> {
    let op = h.read(c, fh, offset, len);
    match h.wait_ok(c, op) {
        OpOutput::Read(data) => data,
        other => panic!("{c}: read answered {other:?}"),
    }
}

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

fn one_stripe(h: &mut Harness) -> Layout {
    h.create_layout(64 * KIB, 1, Some(0)).unwrap()
}

#[test]
fn an_acknowledged_write_lost_in_a_crash_is_replayed() {
    for seed in 0..4 {
        let mut h = harness(2, seed);
        let layout = one_stripe(&mut h);
        let fa = h.open(A, layout.clone());
        let data = pattern(40 * KIB, 3);
        write(&mut h, A, fa, 1000, data.clone());
        let op = h.close(A, fa); // written back and acknowledged, not committed
        h.wait_ok(A, op);
        assert!(h.ost(OST0).store().uncommitted_bytes() >= data.len() as u64);
        h.crash_ost(OST0);
        assert_eq!(stored(&mut h, &layout, 1000, data.len() as u64), vec![0; data.len()], "the crash lost it");
        h.restart_ost(OST0);
        assert!(h.ost(OST0).is_recovering());
        let fb = h.open(B, layout.clone());
        assert_eq!(read(&mut h, B, fb, 1000, data.len() as u64), data, "seed {seed}: replayed");
        assert!(!h.ost(OST0).is_recovering(), "every known client replayed: recovery ended early");
        assert!(h.now().0 < WINDOW.0, "seed {seed}: recovery did not wait for the window");
        assert!(h.lost().is_empty(), "nothing lost: {:?}", h.lost());
    }
}

#[test]
fn what_an_fsync_made_durable_survives_a_crash_with_no_client_to_replay() {
    let mut h = harness(2, 1);
    let layout = one_stripe(&mut h);
    let fa = h.open(A, layout.clone());
    let data = pattern(30 * KIB, 9);
    write(&mut h, A, fa, 0, data.clone());
    let op = h.fsync(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced);
    assert!(h.record(OST0).last_committed > Transno(0), "the commit point is on disk");
    h.crash(A); // the only writer dies: nobody will replay
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    let fb = h.open(B, layout.clone());
    let started = h.now();
    assert_eq!(read(&mut h, B, fb, 0, data.len() as u64), data);
    // A was known to the OST: B's read waited for the window to close.
    assert!(h.now().saturating_since(started) >= WINDOW, "B was served before the window closed");
    assert!(!h.record(OST0).clients.contains(&A), "the absent client is forgotten");
}

#[test]
fn replayed_locks_keep_their_dirty_data_and_conflicts_call_them_back() {
    let mut h = harness(2, 2);
    let layout = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    let first = pattern(8 * KIB, 1);
    write(&mut h, A, fa, 0, first.clone()); // dirty in A's cache, under a PW lock
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    // B's write conflicts with A's replayed lock: A is called back, flushes,
    // and B's bytes land after A's.
    let second = pattern(4 * KIB, 2);
    write(&mut h, B, fb, 4 * KIB, second.clone());
    let mut expected = first.clone();
    expected[4 * KIB as usize..].copy_from_slice(&second);
    assert_eq!(read(&mut h, A, fa, 0, 8 * KIB), expected);
    assert!(h.lost().is_empty(), "{:?}", h.lost());
    assert!(h.lock_counters().callbacks > 0);
}

#[test]
fn a_dropped_connection_loses_nothing_and_makes_no_second_lock() {
    for seed in 0..8 {
        let mut h = harness(2, seed);
        let layout = h.create_layout(64 * KIB, 2, Some(0)).unwrap();
        let fa = h.open(A, layout.clone());
        let data = pattern(200 * KIB, seed as u8);
        let op = h.write(A, fa, 0, data.clone());
        // Drop A's connections a few times while its writes and enqueues fly.
        for i in 0..4 {
            for _ in 0..(3 + seed * 2) {
                h.step();
            }
            h.drop_connection(A, OstIndex(i % 2));
        }
        assert_eq!(h.wait_ok(A, op), OpOutput::Written(data.len() as u64));
        let op = h.fsync(A, fa);
        assert_eq!(h.wait_ok(A, op), OpOutput::Synced, "seed {seed}");
        let fb = h.open(B, layout.clone());
        assert_eq!(read(&mut h, B, fb, 0, data.len() as u64), data, "seed {seed}");
        assert!(h.lost().is_empty(), "seed {seed}: {:?}", h.lost());
        assert_eq!(h.lock_counters().evictions, 0, "seed {seed}");
    }
}

#[test]
fn a_failed_commit_reaches_every_writer_once_with_its_error_number() {
    let mut h = harness(2, 3);
    let layout = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, B, fb, 32 * KIB, pattern(4 * KIB, 5));
    let op = h.close(B, fb); // acknowledged, not committed
    h.wait_ok(B, op);
    let fb = h.open(B, layout.clone());
    write(&mut h, A, fa, 0, pattern(4 * KIB, 6));
    h.fail_commits(OST0, Some(Errno::EIO));
    let op = h.fsync(A, fa);
    let err = h.wait(A, op).unwrap().unwrap_err();
    assert_eq!(err, ClientError::Io { ost: OST0, error: IoError::Disk(Errno::EIO) }, "A's fsync names EIO");
    assert_eq!(err.errno(), Errno::EIO);
    h.fail_commits(OST0, None);
    // B's acknowledged write was in the failed commit too: B is told at its
    // next fsync, once.
    let op = h.fsync(B, fb);
    match h.wait(B, op).unwrap() {
        Err(ClientError::WriteLost { ost, cause }) => {
            assert_eq!((ost, &cause), (OST0, &LossCause::SyncFailed(IoError::Disk(Errno::EIO))));
        }
        other => panic!("B's fsync must report the failed commit: {other:?}"),
    }
    let op = h.fsync(B, fb);
    assert_eq!(h.wait_ok(B, op), OpOutput::Synced, "reported once");
    let op = h.fsync(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced, "A learnt it from its own fsync, once");
}

/// B is told of A's failed commit of their shared object: its fsync fails.
fn a_failed_commit_is_reported_to_the_other_writer(h: &mut Harness, layout: &Layout, round: u8) {
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(h, B, fb, 32 * KIB, pattern(4 * KIB, round));
    let op = h.close(B, fb); // acknowledged, not committed
    h.wait_ok(B, op);
    let fb = h.open(B, layout.clone());
    write(h, A, fa, 0, pattern(4 * KIB, round + 1));
    h.fail_commits(OST0, Some(Errno::EIO));
    let op = h.fsync(A, fa);
    assert!(h.wait(A, op).unwrap().is_err(), "round {round}: A's fsync names the failed commit");
    h.fail_commits(OST0, None);
    let op = h.fsync(B, fb);
    match h.wait(B, op).unwrap() {
        Err(ClientError::WriteLost { cause: LossCause::SyncFailed(_), .. }) => {}
        other => panic!("round {round}: B's fsync must report the failed commit: {other:?}"),
    }
}

/// An OST's new life numbers its commit-failure notices from 1 again: a
/// client that took notices from the last life must take the new ones too
/// (and not acknowledge them unseen with the last life's count).
#[test]
fn a_failed_commit_is_reported_after_the_ost_restarted() {
    let mut h = harness(2, 7);
    let layout = one_stripe(&mut h);
    a_failed_commit_is_reported_to_the_other_writer(&mut h, &layout, 1);
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    a_failed_commit_is_reported_to_the_other_writer(&mut h, &layout, 3);
}

/// A commit notice lost with a connection: the writer's copies of what was
/// committed fill its allowance, and its next write waits for a commit that
/// has nothing left to do. The answer to its commit request says where the
/// commit point is, and the write goes on.
#[test]
fn a_commit_notice_lost_with_a_connection_does_not_stall_the_writer() {
    let recovery =
        RecoveryConfig { window: WINDOW, commit_interval: Duration::from_secs(3600), ..RecoveryConfig::default() };
    let client = ClientConfig {
        rpc_bytes_max: 16 * KIB,
        dirty_bytes_max: 16 * KIB,
        unstable_bytes_max: 16 * KIB,
        ..ClientConfig::default()
    };
    let config = HarnessConfig { clients: 1, osts: 1, seed: 8, recovery: Some(recovery), client, ..Default::default() };
    let mut h = Harness::new(config).unwrap();
    let layout = h.create_layout(64 * KIB, 1, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    write(&mut h, A, fa, 0, pattern(16 * KIB, 1));
    let op = h.close(A, fa); // written back: A asks for a commit of its copies
    h.wait_ok(A, op);
    while h.ost(OST0).last_committed() == Transno(0) {
        assert!(h.step(), "the commit A asked for never came");
    }
    h.drop_connection(A, OST0); // the commit notice is lost
    let fa = h.open(A, layout);
    let op = h.write(A, fa, 16 * KIB, pattern(4 * KIB, 2));
    h.drive_bounded(10_000).expect("the write waits for room that a lost notice keeps taken");
    assert_eq!(h.result(A, op), Some(&Ok(OpOutput::Written(4 * KIB))));
}

/// B's enqueue reply is lost with its link; meanwhile the lock is granted.
/// When B comes back, the OST sends the lock's completion again before it
/// answers B's resent enqueue: B must not take the completion of its own
/// lock for a stranger's and cancel it, or the OST forgets the lock that
/// its answer then hands B, and B writes under a lock nobody can call back.
#[test]
fn a_completion_that_overtakes_the_answer_to_a_resent_enqueue_is_kept() {
    let mut h = harness(2, 9);
    let layout = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, A, fa, 0, pattern(4 * KIB, 1));
    let theirs = pattern(4 * KIB, 2);
    let op = h.write(B, fb, 0, theirs.clone());
    while h.ost(OST0).locks().waiting_count() == 0 {
        assert!(h.step(), "B's enqueue never reached the OST");
    }
    h.partition(B, OST0); // the answer Waiting is lost
    while h.step() {} // A gives its lock back; B's is granted, the completion lost
    assert_eq!(h.ost(OST0).locks().waiting_count(), 0, "B's lock is granted");
    h.heal(B, OST0);
    assert_eq!(h.wait_ok(B, op), OpOutput::Written(4 * KIB));
    assert!(read(&mut h, A, fa, 0, 4 * KIB) == theirs, "A reads B's bytes: B's lock was called back");
    assert!(h.lost().is_empty(), "{:?}", h.lost());
}

/// An fsync after a truncate makes the punch durable, as it makes writes
/// durable: a crash of the OST after it cannot bring the cut bytes back,
/// even with the truncating client gone.
#[test]
fn an_fsynced_truncate_survives_a_crash_with_no_client_to_replay() {
    let mut h = harness(2, 10);
    let layout = one_stripe(&mut h);
    let fa = h.open(A, layout.clone());
    write(&mut h, A, fa, 0, pattern(8 * KIB, 1));
    let op = h.fsync(A, fa);
    h.wait_ok(A, op);
    let op = h.truncate(A, fa, 1000);
    assert_eq!(h.wait_ok(A, op), OpOutput::Truncated);
    let op = h.fsync(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced);
    h.crash(A);
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    let fb = h.open(B, layout.clone());
    let mut expected = pattern(8 * KIB, 1);
    expected[1000..].fill(0);
    assert!(read(&mut h, B, fb, 0, 8 * KIB) == expected, "the cut bytes came back");
}

/// A commit fails after the writer closed its file: the next open of the
/// file reports the loss at its first fsync, as Lustre reports a writeback
/// error kept in the inode.
#[test]
fn a_loss_after_the_close_is_reported_through_the_next_open() {
    let mut h = harness(2, 11);
    let layout = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, B, fb, 32 * KIB, pattern(4 * KIB, 1));
    let op = h.close(B, fb); // acknowledged, not committed
    h.wait_ok(B, op);
    write(&mut h, A, fa, 0, pattern(4 * KIB, 2));
    h.fail_commits(OST0, Some(Errno::EIO));
    let op = h.fsync(A, fa);
    assert!(h.wait(A, op).unwrap().is_err());
    h.fail_commits(OST0, None);
    let fb = h.open(B, layout.clone());
    let op = h.fsync(B, fb);
    match h.wait(B, op).unwrap() {
        Err(ClientError::WriteLost { cause: LossCause::SyncFailed(_), .. }) => {}
        other => panic!("B's first fsync after reopening must report the failed commit: {other:?}"),
    }
    let op = h.fsync(B, fb);
    assert_eq!(h.wait_ok(B, op), OpOutput::Synced, "reported once");
}

/// A truncate whose punch fails has already dropped the dirty bytes past
/// the new size from the cache: they are neither cut on the OST nor
/// written, and the next fsync says so.
#[test]
fn the_writes_a_failed_truncate_dropped_are_reported_lost() {
    let mut h = harness(1, 12);
    let layout = one_stripe(&mut h);
    let fa = h.open(A, layout.clone());
    write(&mut h, A, fa, 8 * KIB, pattern(4 * KIB, 1)); // dirty in A's cache
    h.fail_writes(OST0, Some(Errno::ENOSPC));
    let op = h.truncate(A, fa, 4 * KIB);
    assert!(h.wait(A, op).unwrap().is_err(), "the punch failed");
    h.fail_writes(OST0, None);
    let op = h.fsync(A, fa);
    match h.wait(A, op).unwrap() {
        Err(ClientError::WriteLost { cause: LossCause::WriteFailed(IoError::NoSpace), .. }) => {}
        other => panic!("the fsync must report the bytes the failed truncate dropped: {other:?}"),
    }
    assert_eq!(h.lost(), &[(A, OST0, 4 * KIB)]);
}

/// B's acknowledged write is in a commit that fails while B is cut off, and
/// the OST crashes before B hears of it: the notice is in the OST's record,
/// and B is told when it comes back to recover (its replay of the write is
/// skipped: the failed commit counts as committed). A notice B had already
/// taken before a crash is not reported twice.
#[test]
fn a_failed_commit_notice_outlives_a_crash_of_the_ost() {
    let mut h = harness(2, 13);
    // Two objects on one OST: A's fsync commits B's write too (a journal
    // commit holds every change), and no lock of one calls back the other.
    let layout = one_stripe(&mut h);
    let mine = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, mine), h.open(B, layout.clone()));
    write(&mut h, B, fb, 32 * KIB, pattern(4 * KIB, 1));
    let op = h.close(B, fb); // acknowledged, not committed
    h.wait_ok(B, op);
    h.partition(B, OST0);
    write(&mut h, A, fa, 0, pattern(4 * KIB, 2));
    h.fail_commits(OST0, Some(Errno::EIO));
    let op = h.fsync(A, fa);
    assert!(h.wait(A, op).unwrap().is_err(), "A's own fsync names the failure");
    h.fail_commits(OST0, None);
    assert!(!h.record(OST0).failures.is_empty(), "the notice to B is on disk");
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    h.heal(B, OST0);
    let fb = h.open(B, layout.clone());
    let op = h.fsync(B, fb);
    match h.wait(B, op).unwrap() {
        Err(ClientError::WriteLost { cause: LossCause::SyncFailed(_), .. }) => {}
        other => panic!("B must be told its write was lost in the failed commit: {other:?}"),
    }
    // B's acknowledgement of the notice may not have reached the OST:
    // another crash sends it again, and B does not take it twice.
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    let op = h.fsync(B, fb);
    assert_eq!(h.wait_ok(B, op), OpOutput::Synced, "reported once");
}

/// The commit a writer asks for because its copies pile up (a soft sync)
/// fails: the OST says so in its answer, not in a notice, and the writer
/// must take it as it takes a notice.
#[test]
fn a_failed_commit_the_writer_asked_for_is_reported() {
    let recovery =
        RecoveryConfig { window: WINDOW, commit_interval: Duration::from_secs(3600), ..RecoveryConfig::default() };
    let client = ClientConfig {
        rpc_bytes_max: 16 * KIB,
        dirty_bytes_max: 16 * KIB,
        unstable_bytes_max: 32 * KIB,
        ..ClientConfig::default()
    };
    let config =
        HarnessConfig { clients: 1, osts: 1, seed: 14, recovery: Some(recovery), client, ..Default::default() };
    let mut h = Harness::new(config).unwrap();
    let layout = h.create_layout(64 * KIB, 1, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    write(&mut h, A, fa, 0, pattern(16 * KIB, 1));
    h.fail_commits(OST0, Some(Errno::EIO));
    let op = h.close(A, fa); // written back: A asks for a commit of its copies
    h.wait_ok(A, op);
    h.drive().unwrap(); // the commit fails
    assert!(h.ost_counters().syncs > 0, "A asked for a commit");
    h.fail_commits(OST0, None);
    let fa = h.open(A, layout);
    let op = h.fsync(A, fa);
    match h.wait(A, op).unwrap() {
        Err(ClientError::WriteLost { cause: LossCause::SyncFailed(IoError::Disk(Errno::EIO)), .. }) => {}
        other => panic!("the failed commit A asked for must be reported: {other:?}"),
    }
}

/// A's GROUP lock spans two OSTs; one of them evicts A (it restarted while
/// A was cut off). The file no longer holds its group: A gives back the
/// group lock it still holds on the other OST, which nothing would ever
/// call back, and B's write there goes through.
#[test]
fn a_group_lock_losing_one_stripe_gives_back_the_others() {
    let mut h = harness(2, 15);
    let layout = h.create_layout(64 * KIB, 2, Some(0)).unwrap();
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout));
    let op = h.group_lock(A, fa, 7);
    assert_eq!(h.wait_ok(A, op), OpOutput::GroupLocked);
    h.partition(A, OST0);
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    h.advance(WINDOW); // the recovery goes on without A, evicting it
    h.heal(A, OST0);
    let op = h.write(B, fb, 64 * KIB, pattern(4 * KIB, 1)); // the stripe on OST0001
    h.drive_bounded(10_000).expect("B waits for a group lock nobody gives back");
    assert_eq!(h.result(B, op), Some(&Ok(OpOutput::Written(4 * KIB))));
    assert!(h.client(A).lock_cache().iter().all(|(_, l)| !l.mode.is_group()), "A kept a group lock");
}

/// The answer to A's fsync, saying its commit failed, is lost with the
/// connection; the sync A sends again finds nothing left to commit. A is
/// told all the same (the notice, which the OST keeps until A has it), and
/// once.
#[test]
fn a_failed_commit_is_reported_when_the_answer_to_the_fsync_is_lost() {
    let mut h = harness(1, 16);
    let layout = one_stripe(&mut h);
    let fa = h.open(A, layout);
    write(&mut h, A, fa, 0, pattern(4 * KIB, 1));
    h.fail_commits(OST0, Some(Errno::EIO));
    let op = h.fsync(A, fa);
    while h.ost_counters().syncs == 0 {
        assert!(h.step(), "A's sync never reached the OST");
    }
    h.fail_commits(OST0, None);
    h.drop_connection(A, OST0); // the answer is lost
    match h.wait(A, op).unwrap() {
        Err(e) => assert_eq!(e.errno(), Errno::EIO, "{e}"),
        Ok(out) => panic!("A's fsync must report the failed commit: {out:?}"),
    }
    let op = h.fsync(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced, "reported once");
}

#[test]
fn a_full_disk_fails_the_write_and_says_enospc() {
    let mut h = harness(1, 4);
    let layout = one_stripe(&mut h);
    let fa = h.open(A, layout.clone());
    h.fail_writes(OST0, Some(Errno::ENOSPC));
    write(&mut h, A, fa, 0, pattern(8 * KIB, 7)); // cached: the write itself succeeds
    let op = h.fsync(A, fa);
    let err = h.wait(A, op).unwrap().unwrap_err();
    assert_eq!(err, ClientError::WriteLost { ost: OST0, cause: LossCause::WriteFailed(IoError::NoSpace) });
    assert_eq!(err.errno(), Errno::ENOSPC);
    assert!(err.to_string().contains("ENOSPC"), "{err}");
}

#[test]
fn a_partitioned_holder_is_evicted_and_told_when_it_comes_back() {
    let mut h = harness(2, 5);
    let layout = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, A, fa, 0, pattern(8 * KIB, 1)); // dirty under A's lock
    h.partition(A, OST0);
    let theirs = pattern(8 * KIB, 2);
    write(&mut h, B, fb, 0, theirs.clone()); // A cannot be called back: evicted
    assert_eq!(h.lock_counters().evictions, 1);
    h.heal(A, OST0);
    let op = h.fsync(A, fa);
    match h.wait(A, op).unwrap() {
        Err(ClientError::WriteLost { ost, cause: LossCause::Evicted }) => assert_eq!(ost, OST0),
        other => panic!("A must be told its bytes were lost: {other:?}"),
    }
    assert_eq!(read(&mut h, A, fa, 0, 8 * KIB), theirs, "A reads B's bytes after coming back");
}

/// A holder cut off from its OST learns nothing of the callback it misses
/// nor of its eviction: its cache still holds the bytes, clean, under a
/// lock it believes it holds. A read waits for the session instead of
/// answering from them, and then reads what the writer wrote.
#[test]
fn a_partitioned_holder_reads_no_stale_bytes_from_its_cache() {
    let mut h = harness(2, 9);
    let layout = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    let mine = pattern(8 * KIB, 1);
    write(&mut h, A, fa, 0, mine.clone());
    let op = h.fsync(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced);
    assert_eq!(read(&mut h, A, fa, 0, 8 * KIB), mine, "cached, clean, under A's lock");
    h.partition(A, OST0);
    let theirs = pattern(8 * KIB, 2);
    write(&mut h, B, fb, 0, theirs.clone());
    let op = h.fsync(B, fb);
    assert_eq!(h.wait_ok(B, op), OpOutput::Synced);
    assert_eq!(h.lock_counters().evictions, 1, "A missed the callback");
    let op = h.read(A, fa, 0, 8 * KIB);
    h.advance(Duration::from_secs(5));
    assert!(h.result(A, op).is_none(), "a read cut off from its OST waits: {:?}", h.result(A, op));
    h.heal(A, OST0);
    match h.wait(A, op).unwrap() {
        Ok(OpOutput::Read(data)) => assert!(data == theirs, "A read stale bytes after its eviction"),
        other => panic!("A's read answered {other:?}"),
    }
}

#[test]
fn uncommitted_bytes_are_bounded_by_asking_for_commits() {
    let recovery =
        RecoveryConfig { window: WINDOW, commit_interval: Duration::from_secs(3600), ..RecoveryConfig::default() };
    let client = ClientConfig {
        rpc_bytes_max: 16 * KIB,
        dirty_bytes_max: 32 * KIB,
        unstable_bytes_max: 64 * KIB,
        ..ClientConfig::default()
    };
    let mut h = Harness::new(HarnessConfig {
        clients: 1,
        osts: 1,
        seed: 6,
        recovery: Some(recovery),
        client,
        ..Default::default()
    })
    .unwrap();
    let layout = h.create_layout(64 * KIB, 1, Some(0)).unwrap();
    let fa = h.open(A, layout);
    for i in 0..32u64 {
        write(&mut h, A, fa, i * 16 * KIB, pattern(16 * KIB, i as u8));
        let uncommitted = h.ost(OST0).store().uncommitted_bytes();
        assert!(uncommitted <= 64 * KIB + 32 * KIB, "write {i}: {uncommitted} bytes uncommitted");
    }
    assert!(h.ost_counters().syncs > 0, "the client asked for commits");
    let _ = C;
}

/// The copies a client keeps for replay count against its cache budget, as
/// Lustre's `max_cached_mb` counts unstable pages: a page the cache lets go
/// stays in memory while its copy is kept, so once the copies fill the
/// budget the cache keeps no clean page of what it writes back.
#[test]
fn copies_kept_for_replay_count_against_the_cache_budget() {
    let recovery =
        RecoveryConfig { window: WINDOW, commit_interval: Duration::from_secs(3600), ..RecoveryConfig::default() };
    let client = ClientConfig {
        rpc_bytes_max: 16 * KIB,
        dirty_bytes_max: 32 * KIB,
        cached_bytes_max: 64 * KIB,
        ..ClientConfig::default()
    };
    let config = HarnessConfig { clients: 1, osts: 1, seed: 8, recovery: Some(recovery), client, ..Default::default() };
    let mut h = Harness::new(config).unwrap();
    let layout = h.create_layout(64 * KIB, 1, Some(0)).unwrap();
    let fa = h.open(A, layout.clone());
    let data = pattern(256 * KIB, 5);
    write(&mut h, A, fa, 0, data.clone());
    let op = h.close(A, fa); // written back and acknowledged, not committed
    h.wait_ok(A, op);
    assert_eq!(h.client(A).unstable_bytes(), 256 * KIB, "every acknowledged byte is kept");
    assert_eq!(h.client(A).cache().cached_pages(), 0, "the cache let go of the pages the copies hold");
    let fa = h.open(A, layout);
    let op = h.fsync(A, fa);
    assert_eq!(h.wait_ok(A, op), OpOutput::Synced);
    assert_eq!(h.client(A).unstable_bytes(), 0, "committed: the copies are gone");
    assert_eq!(read(&mut h, A, fa, 0, 64 * KIB), data[..64 * KIB as usize]);
    assert!(h.client(A).cache().cached_pages() > 0, "with no copies kept, the cache keeps what it reads");
}

/// Writers held back by their uncommitted bytes while commits are slow ask
/// for a commit once per answer, not once per commit notice: before, every
/// notice (of a commit begun for another writer) let each writer ask again,
/// each request began a commit of its own, each commit sent every writer a
/// notice, and the OSS flooded its clients with notices.
#[test]
fn commit_requests_do_not_multiply_while_commits_are_slow() {
    let recovery =
        RecoveryConfig { window: WINDOW, commit_interval: Duration::from_secs(3600), ..RecoveryConfig::default() };
    let client = ClientConfig {
        rpc_bytes_max: 16 * KIB,
        dirty_bytes_max: 32 * KIB,
        unstable_bytes_max: 32 * KIB,
        ..ClientConfig::default()
    };
    let config = HarnessConfig {
        clients: 3,
        osts: 1,
        seed: 11,
        recovery: Some(recovery),
        client,
        commit_latency: Duration::from_ms(2),
        ..Default::default()
    };
    let mut h = Harness::new(config).unwrap();
    let writes_per_client = 32u64;
    let mut ops = Vec::new();
    for c in [A, B, C] {
        let layout = h.create_layout(64 * KIB, 1, Some(0)).unwrap();
        let fh = h.open(c, layout);
        ops.push((c, h.write(c, fh, 0, pattern(writes_per_client * 16 * KIB, c.0 as u8))));
    }
    for (c, op) in ops {
        h.wait_ok(c, op);
    }
    let asked = h.ost_counters().syncs;
    assert!(asked > 0, "the writers asked for commits");
    assert!(asked <= 3 * writes_per_client, "{asked} commit requests for {} write RPCs", 3 * writes_per_client);
}

/// Replayed writes that fail (the disk is full when the OST restarts) still
/// used their transaction numbers: the next write numbers after them.
/// Before, it was given the first failed one's number again, the writer
/// kept it in place of the old change, and a second crash replayed the old
/// data over the new.
#[test]
fn a_replay_that_fails_still_uses_its_transaction_number() {
    let mut h = harness(2, 5);
    let layout = one_stripe(&mut h);
    let fa = h.open(A, layout.clone());
    write(&mut h, A, fa, 0, pattern(32 * KIB, 1)); // two RPCs, two changes
    let op = h.close(A, fa);
    h.wait_ok(A, op);
    h.crash_ost(OST0);
    h.fail_writes(OST0, Some(Errno::ENOSPC));
    h.restart_ost(OST0);
    h.advance(Duration::from_ms(1)); // the replays fail
    assert!(!h.ost(OST0).is_recovering());
    h.fail_writes(OST0, None);
    let fa = h.open(A, layout.clone());
    let newer = pattern(4 * KIB, 2);
    write(&mut h, A, fa, 16 * KIB, newer.clone());
    let op = h.close(A, fa);
    let _ = h.wait(A, op).unwrap(); // reports the failed replays
    h.crash_ost(OST0);
    h.restart_ost(OST0);
    let fb = h.open(B, layout.clone());
    assert_eq!(read(&mut h, B, fb, 16 * KIB, 4 * KIB), newer, "the newer write replayed last");
}

/// A commit that fails takes with it what was written to its objects while
/// it ran (a failed `fdatasync` marks every dirty page clean): those
/// writers are told too. Before, only the writers the commit was begun for
/// were, and the next commit, finding nothing left to write, told the
/// others their data was durable.
#[test]
fn a_write_made_while_a_failing_commit_runs_is_reported_lost() {
    let mut h = harness_with_commits(2, 9, Duration::from_ms(5));
    let layout = one_stripe(&mut h);
    let (fa, fb) = (h.open(A, layout.clone()), h.open(B, layout.clone()));
    write(&mut h, A, fa, 0, pattern(4 * KIB, 3));
    let fsync_a = h.fsync(A, fa);
    while h.ost(OST0).syncs_pending() == 0 {
        assert!(h.step(), "A's fsync reaches the OST");
    }
    // B writes (and is answered) while A's commit runs.
    write(&mut h, B, fb, 32 * KIB, pattern(4 * KIB, 4));
    let op = h.close(B, fb);
    h.wait_ok(B, op);
    assert!(h.ost(OST0).syncs_pending() > 0, "the commit still runs: lengthen it");
    h.fail_commits(OST0, Some(Errno::EIO));
    assert!(h.wait(A, fsync_a).unwrap().is_err(), "A's fsync names the failed commit");
    h.fail_commits(OST0, None);
    let fb = h.open(B, layout.clone());
    let op = h.fsync(B, fb);
    match h.wait(B, op).unwrap() {
        Err(ClientError::WriteLost { ost, cause }) => {
            assert_eq!((ost, cause), (OST0, LossCause::SyncFailed(IoError::Disk(Errno::EIO))));
        }
        other => panic!("B's write went with the failed commit; its fsync must say so: {other:?}"),
    }
}

/// A hole acknowledged and lost in an OST's crash is replayed with its
/// proof, after the write it was made over.
#[test]
fn an_acknowledged_hole_lost_in_a_crash_is_replayed_after_its_write() {
    use lanefs_core::msg::Cut;
    for seed in 0..4 {
        let mut h = harness(2, seed);
        let layout = one_stripe(&mut h);
        let fa = h.open(A, layout.clone());
        let mut data = pattern(40 * KIB, 5);
        write(&mut h, A, fa, 0, data.clone());
        let op = h.fallocate(A, fa, Cut::Hole { offset: 4096, len: 8192 });
        h.wait_ok(A, op);
        data[4096..4096 + 8192].fill(0);
        assert_eq!(stored(&mut h, &layout, 0, data.len() as u64), data);
        assert!(h.ost(OST0).store().uncommitted_bytes() > 0, "neither is committed yet");
        h.crash_ost(OST0);
        assert_eq!(stored(&mut h, &layout, 0, 4096), vec![0; 4096], "the crash lost both");
        h.restart_ost(OST0);
        let fb = h.open(B, layout.clone());
        assert_eq!(read(&mut h, B, fb, 0, data.len() as u64), data, "seed {seed}: the write, then the hole");
        assert!(h.lost().is_empty(), "nothing lost: {:?}", h.lost());
    }
}
