//! File locks between clients of one cluster, granted by the MDS.

use lanefs_mds::flock::{FlockAnswer, FlockKind, FlockOwner, FlockRequest};
use lanefs_mds::Fid;
use lanefs_net::client::Client;
use lanefs_net::cluster::{LocalCluster, LocalClusterConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FILE: Fid = Fid(42);

fn cluster() -> LocalCluster {
    LocalCluster::start(LocalClusterConfig { osts: 1, ..LocalClusterConfig::default() }).unwrap()
}

fn client(c: &LocalCluster) -> Client {
    Client::connect(&c.mds_address(), c.client_options()).unwrap()
}

fn lock(owner: u64, kind: Option<FlockKind>, start: u64, end: u64) -> FlockRequest {
    FlockRequest { file: FILE, owner: FlockOwner { client: 0, owner }, pid: owner as u32, kind, start, end }
}

const NEVER: &dyn Fn() -> bool = &|| false;

/// A write lock held by one client makes another's `F_SETLK` fail naming
/// it, and its `F_SETLKW` wait until the holder unlocks.
#[test]
fn a_lock_held_by_one_client_holds_against_another() {
    let c = cluster();
    let (a, b) = (client(&c), Arc::new(client(&c)));
    assert_eq!(a.flock(lock(1, Some(FlockKind::Write), 0, 99), false, NEVER).unwrap(), FlockAnswer::Granted);
    match b.flock(lock(1, Some(FlockKind::Read), 50, 50), false, NEVER).unwrap() {
        FlockAnswer::Conflict(held) => assert_eq!((held.pid, held.start, held.end), (1, 0, 99)),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(b.flock_get(lock(1, Some(FlockKind::Read), 0, 0)).unwrap(), FlockAnswer::Conflict(_)));
    assert_eq!(b.flock_get(lock(1, Some(FlockKind::Read), 100, 200)).unwrap(), FlockAnswer::Free);
    let waiter = {
        let b = b.clone();
        std::thread::spawn(move || b.flock(lock(1, Some(FlockKind::Write), 0, 0), true, NEVER).unwrap())
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "waits while the lock is held");
    a.flock_unlock_owner(FILE, 1).unwrap();
    assert_eq!(waiter.join().unwrap(), FlockAnswer::Granted);
}

/// Two clients each waiting for the other's lock: the second to ask is
/// told `EDEADLK` instead of waiting for ever.
#[test]
fn a_deadlock_between_clients_is_reported() {
    let c = cluster();
    let (a, b) = (Arc::new(client(&c)), client(&c));
    a.flock(lock(7, Some(FlockKind::Write), 0, 0), false, NEVER).unwrap();
    b.flock(lock(7, Some(FlockKind::Write), 1, 1), false, NEVER).unwrap();
    let waiter = {
        let a = a.clone();
        std::thread::spawn(move || a.flock(lock(7, Some(FlockKind::Write), 1, 1), true, NEVER).unwrap())
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.flock(lock(7, Some(FlockKind::Write), 0, 0), true, NEVER).unwrap(), FlockAnswer::Deadlock);
    b.flock(lock(7, None, 0, u64::MAX), false, NEVER).unwrap();
    assert_eq!(waiter.join().unwrap(), FlockAnswer::Granted);
}

/// A client that goes away (its connection closes: it ended or was cut
/// off) loses its locks, and a waiter gets them.
#[test]
fn a_client_that_goes_loses_its_locks() {
    let c = cluster();
    let (a, b) = (client(&c), Arc::new(client(&c)));
    a.flock(lock(3, Some(FlockKind::Write), 0, u64::MAX), false, NEVER).unwrap();
    let waiter = {
        let b = b.clone();
        std::thread::spawn(move || b.flock(lock(3, Some(FlockKind::Read), 10, 20), true, NEVER).unwrap())
    };
    std::thread::sleep(Duration::from_millis(300));
    drop(a);
    assert_eq!(waiter.join().unwrap(), FlockAnswer::Granted);
}

/// A waiter whose process is interrupted is withdrawn and answered so; the
/// lock is not granted to it later.
#[test]
fn an_interrupted_waiter_is_withdrawn() {
    let c = cluster();
    let (a, b) = (client(&c), Arc::new(client(&c)));
    a.flock(lock(5, Some(FlockKind::Write), 0, 0), false, NEVER).unwrap();
    let signal = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (b, signal) = (b.clone(), signal.clone());
        std::thread::spawn(move || {
            b.flock(lock(5, Some(FlockKind::Write), 0, 0), true, &|| signal.load(Ordering::Relaxed)).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    signal.store(true, Ordering::Relaxed);
    assert_eq!(waiter.join().unwrap(), FlockAnswer::Interrupted);
    a.flock_unlock_owner(FILE, 5).unwrap();
    // Nothing of b's is held: a third owner takes the byte at once.
    assert_eq!(a.flock(lock(6, Some(FlockKind::Write), 0, 0), false, NEVER).unwrap(), FlockAnswer::Granted);
}

/// A restarted MDS is told again, by clients that reconnect within its
/// recovery grace, of the locks they hold and the files they keep open: a
/// lock held before the restart still holds against another client after
/// it (whose request waits for the grace to end), and a file removed while
/// open keeps its objects.
#[test]
fn a_restarted_mds_is_told_again_of_held_locks_and_open_files() {
    use lanefs_mds::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
    let grace = Duration::from_secs(3);
    let config = LocalClusterConfig { osts: 1, mds_recovery_grace: grace, ..LocalClusterConfig::default() };
    let mut c = LocalCluster::start(config).unwrap();
    let (a, b) = (client(&c), client(&c));
    let create = MdsRequest::Create {
        path: "/kept".into(),
        stripe: StripeSpec::default(),
        mode: CreateMode::Exclusive,
        access: Access::ReadWrite,
        permissions: 0o644,
    };
    let MdsReply::File(info) = a.mds(create).unwrap() else { panic!("create answered something else") };
    let file = a.open_layout("/kept", info.layout.clone()).unwrap();
    let data = vec![7u8; 4096];
    a.pwrite(&file, 0, &data).unwrap();
    a.fsync(&file).unwrap();
    a.mds_opened(info.fid).unwrap();
    b.mds(MdsRequest::Unlink { path: "/kept".into() }).unwrap();
    assert_eq!(a.flock(lock(1, Some(FlockKind::Write), 0, 99), false, NEVER).unwrap(), FlockAnswer::Granted);

    c.stop_mds();
    c.start_mds().unwrap();
    let restarted = std::time::Instant::now();
    match b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap() {
        FlockAnswer::Conflict(held) => assert_eq!((held.pid, held.start, held.end), (1, 0, 99), "a's lock, replayed"),
        other => panic!("the lock held before the restart should hold after it: {other:?}"),
    }
    assert!(restarted.elapsed() >= grace / 2, "a new request waits for the grace: {:?}", restarted.elapsed());
    // Past the grace the MDS destroys what is queued, but for the removed
    // file that a keeps open: another client still reads it from the OST.
    std::thread::sleep(Duration::from_millis(1500));
    let d = client(&c);
    let reader = d.open_layout("/kept", info.layout.clone()).unwrap();
    assert_eq!(d.pread(&reader, 0, 4096).unwrap(), data);
    a.flock_unlock_owner(FILE, 1).unwrap();
    assert_eq!(b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap(), FlockAnswer::Granted);
    a.mds_closed(info.fid).unwrap();
}
