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
