//! File locks between clients of one cluster, granted by the MDS.

use lanefs_client::Client;
use lanefs_proto::flock::{FlockAnswer, FlockKind, FlockOwner, FlockRequest};
use lanefs_proto::Fid;
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
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
    FlockRequest { file: FILE, owner: FlockOwner { client: 0, owner }, pid: owner as u32, uid: 1000, kind, start, end }
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
/// it (whose request waits until the one client that held something has
/// replayed, well before the grace's end), and a file removed while open
/// keeps its objects.
#[test]
fn a_restarted_mds_is_told_again_of_held_locks_and_open_files() {
    use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
    let grace = Duration::from_secs(20);
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
    // Recorded open in the same step as the create, as a mount opens.
    let (reply, recorded) = a.mds_open_as(&lanefs_proto::Credentials::ROOT, create).unwrap();
    assert!(recorded, "the open is recorded with the create");
    let MdsReply::File(info) = reply else { panic!("create answered something else") };
    let file = a.open_layout("/kept", info.layout.clone()).unwrap();
    let data = vec![7u8; 4096];
    a.pwrite(&file, 0, &data).unwrap();
    a.fsync(&file).unwrap();
    b.mds(MdsRequest::Unlink { path: "/kept".into() }).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let reader = b.open_layout("/kept", info.layout.clone()).unwrap();
    assert_eq!(b.pread(&reader, 0, 4096).unwrap(), data, "removed while open: its objects are kept");
    assert_eq!(a.flock(lock(1, Some(FlockKind::Write), 0, 99), false, NEVER).unwrap(), FlockAnswer::Granted);

    c.stop_mds();
    c.start_mds().unwrap();
    let restarted = std::time::Instant::now();
    match b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap() {
        FlockAnswer::Conflict(held) => assert_eq!((held.pid, held.start, held.end), (1, 0, 99), "a's lock, replayed"),
        other => panic!("the lock held before the restart should hold after it: {other:?}"),
    }
    assert!(restarted.elapsed() < grace / 4, "the grace ends once a has replayed: {:?}", restarted.elapsed());
    // Past the grace the MDS destroys what is queued, but for the removed
    // file that a keeps open: another client still reads it from the OST.
    std::thread::sleep(Duration::from_millis(500));
    let d = client(&c);
    let reader = d.open_layout("/kept", info.layout.clone()).unwrap();
    assert_eq!(d.pread(&reader, 0, 4096).unwrap(), data);
    a.flock_unlock_owner(FILE, 1).unwrap();
    assert_eq!(b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap(), FlockAnswer::Granted);
    a.mds_closed(info.fid).unwrap();
}

/// The recovery grace waits for the clients that held something before
/// the restart, and no longer: it ends as soon as each has replayed (even
/// one that holds nothing now, having held a lock before), and there is
/// none at all once every such client has gone.
#[test]
fn the_grace_ends_once_every_client_that_held_something_has_replayed() {
    let grace = Duration::from_secs(30);
    let config = LocalClusterConfig { osts: 1, mds_recovery_grace: grace, ..LocalClusterConfig::default() };
    let mut c = LocalCluster::start(config).unwrap();
    let (a, b) = (client(&c), client(&c));
    assert_eq!(a.flock(lock(1, Some(FlockKind::Write), 0, 9), false, NEVER).unwrap(), FlockAnswer::Granted);
    a.flock_unlock_owner(FILE, 1).unwrap();

    c.stop_mds();
    c.start_mds().unwrap();
    let restarted = std::time::Instant::now();
    // b held nothing, a held a lock once: b's request waits for a's word.
    assert_eq!(b.flock(lock(2, Some(FlockKind::Write), 0, 9), false, NEVER).unwrap(), FlockAnswer::Granted);
    let waited = restarted.elapsed();
    assert!(waited < grace / 4, "the grace ends once a has said it replayed: {waited:?}");
    b.flock_unlock_owner(FILE, 2).unwrap();

    // Now b has held a lock too; once both have gone, nobody is owed.
    drop(a);
    drop(b);
    std::thread::sleep(Duration::from_millis(300));
    c.stop_mds();
    c.start_mds().unwrap();
    let restarted = std::time::Instant::now();
    let d = client(&c);
    assert_eq!(d.flock(lock(3, Some(FlockKind::Write), 0, 9), false, NEVER).unwrap(), FlockAnswer::Granted);
    let waited = restarted.elapsed();
    assert!(waited < Duration::from_secs(2), "no client held anything: no grace: {waited:?}");
}

/// One uid that takes every lock and waiter the MDS gives one user leaves
/// another uid, on the same client and on another, free to lock and to
/// wait; the refusal names the bound.
#[test]
fn one_uid_exhausts_only_its_own_share_of_locks_and_waiters() {
    use lanefs_proto::flock::{LOCKS_PER_UID_MAX, WAITERS_PER_UID_MAX};
    let c = cluster();
    let (a, b) = (Arc::new(client(&c)), client(&c));
    let on = |file: u64, uid: u32, owner: u64| FlockRequest {
        file: Fid(1000 + file),
        uid,
        ..lock(owner, Some(FlockKind::Write), 0, 0)
    };
    let mut file = 0;
    while a.flock(on(file, 1000, 1), false, NEVER).unwrap() == FlockAnswer::Granted {
        file += 1;
        assert!(file as usize <= LOCKS_PER_UID_MAX, "the MDS bounds one uid's locks");
    }
    match a.flock(on(file, 1000, 1), false, NEVER).unwrap() {
        FlockAnswer::NoLocks(reason) => assert!(reason.contains("uid 1000"), "{reason}"),
        other => panic!("uid 1000 is past its share: {other:?}"),
    }
    assert_eq!(a.flock(on(file, 1001, 2), false, NEVER).unwrap(), FlockAnswer::Granted, "another uid, same client");
    assert_eq!(b.flock(on(file + 1, 1001, 2), false, NEVER).unwrap(), FlockAnswer::Granted, "another uid and client");

    // uid 1000 parks all the waiters it may behind b's lock.
    let held = file + 1;
    let read = move |uid: u32, owner: u64| FlockRequest {
        file: Fid(1000 + held),
        uid,
        ..lock(owner, Some(FlockKind::Read), 0, 0)
    };
    let waiters: Vec<_> = (0..WAITERS_PER_UID_MAX as u64)
        .map(|i| {
            let a = a.clone();
            std::thread::spawn(move || a.flock(read(1000, 100 + i), true, NEVER).unwrap())
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    assert!(waiters.iter().all(|w| !w.is_finished()), "they wait");
    match a.flock(read(1000, 99), true, NEVER).unwrap() {
        FlockAnswer::NoLocks(reason) => assert!(reason.contains("uid 1000") && reason.contains("waiting"), "{reason}"),
        other => panic!("uid 1000 is past its share of waiters: {other:?}"),
    }
    // uid 1001 still waits, and gets the lock once b lets go.
    let other = {
        let a = a.clone();
        std::thread::spawn(move || a.flock(read(1001, 3), true, NEVER).unwrap())
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!other.is_finished(), "uid 1001's request waits");
    b.flock_unlock_owner(Fid(1000 + file + 1), 2).unwrap();
    assert_eq!(other.join().unwrap(), FlockAnswer::Granted);
    for w in waiters {
        // Granted, or refused for uid 1000's share of locks, which it holds all of.
        let answer = w.join().unwrap();
        assert!(matches!(answer, FlockAnswer::Granted | FlockAnswer::NoLocks(_)), "{answer:?}");
    }
}

/// A peer that speaks the wire protocol to the MDS itself, as a client
/// node that lies could: its connection stays open while it lives.
struct RawMds {
    rt: tokio::runtime::Runtime,
    stream: lanefs_net::transport::BoxStream,
    next_id: u64,
}

impl RawMds {
    fn connect(c: &LocalCluster) -> RawMds {
        use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let address = lanefs_net::transport::Address::parse(&c.mds_address()).unwrap();
        let mut stream = rt.block_on(lanefs_net::transport::connect(&address, c.client_key())).unwrap();
        let hello = Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client };
        rt.block_on(lanefs_proto::codec::write_frame(&mut stream, hello)).unwrap();
        let welcome = rt.block_on(lanefs_proto::codec::read_frame(&mut stream)).unwrap();
        assert!(matches!(welcome, Some(Wire::Welcome { .. })), "{welcome:?}");
        RawMds { rt, stream, next_id: 1 }
    }

    /// Name the client, as a `Client` does on each connection.
    fn session(&mut self, uuid: u64) {
        let wire = lanefs_proto::wire::Wire::Session { uuid };
        self.rt.block_on(lanefs_proto::codec::write_frame(&mut self.stream, wire)).unwrap();
    }

    fn call(&mut self, call: lanefs_proto::wire::FlockCall) -> lanefs_proto::wire::MdsAnswer {
        use lanefs_proto::wire::{MdsCall, Wire};
        let id = self.next_id;
        self.next_id += 1;
        let wire = Wire::Mds { id, call: MdsCall::Flock(call) };
        self.rt.block_on(lanefs_proto::codec::write_frame(&mut self.stream, wire)).unwrap();
        loop {
            match self.rt.block_on(lanefs_proto::codec::read_frame(&mut self.stream)).unwrap() {
                Some(Wire::MdsReply { id: got, answer }) if got == id => return answer,
                Some(_) => continue,
                None => panic!("the MDS closed the connection"),
            }
        }
    }
}

/// After an MDS restart, a client that replays a lock it was never granted
/// (with no seal of the MDS's, or with one it made up) is refused, even
/// when it comes first; the lock's real holder replays it and keeps it,
/// and another client is still held off by it once the forger has gone.
#[test]
fn a_forged_replay_after_an_mds_restart_is_refused_and_the_holder_keeps_its_lock() {
    use lanefs_proto::flock::FlockSeal;
    use lanefs_proto::wire::{FlockCall, MdsAnswer};
    let grace = Duration::from_secs(3);
    let config = LocalClusterConfig { osts: 1, mds_recovery_grace: grace, ..LocalClusterConfig::default() };
    let mut c = LocalCluster::start(config).unwrap();
    let (a, b) = (client(&c), client(&c));
    assert_eq!(a.flock(lock(1, Some(FlockKind::Write), 0, 99), false, NEVER).unwrap(), FlockAnswer::Granted);

    c.stop_mds();
    c.start_mds().unwrap();
    let mut forger = RawMds::connect(&c);
    let stolen = FlockRequest { pid: 666, ..lock(1, Some(FlockKind::Write), 0, 99) };
    let made_up = FlockSeal { start: 0, end: u64::MAX, grant: u64::MAX, mac: [7; 32] };
    for seal in [None, Some(made_up)] {
        let call = FlockCall::Set { request: stolen, wait: false, ticket: 0, replay: true, seal };
        match forger.call(call) {
            MdsAnswer::Flock(FlockAnswer::NoLocks(reason)) => assert!(reason.contains("refused"), "{reason}"),
            other => panic!("a replay of a lock the MDS never granted is refused: {other:?}"),
        }
    }
    // Past the grace, a's lock (replayed) is what holds b off.
    match b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap() {
        FlockAnswer::Conflict(held) => assert_eq!((held.pid, held.start, held.end), (1, 0, 99), "a's lock"),
        other => panic!("the lock held before the restart should hold after it: {other:?}"),
    }
    drop(forger);
    std::thread::sleep(Duration::from_millis(200));
    assert!(matches!(
        b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap(),
        FlockAnswer::Conflict(_)
    ));
    // A genuine replay survives a second restart too (its seal was renewed).
    c.stop_mds();
    c.start_mds().unwrap();
    match b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap() {
        FlockAnswer::Conflict(held) => assert_eq!(held.pid, 1, "a's lock, replayed twice"),
        other => panic!("the lock held before two restarts should hold after them: {other:?}"),
    }
    a.flock_unlock_owner(FILE, 1).unwrap();
    assert_eq!(b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap(), FlockAnswer::Granted);
}

/// A client that held a lock, let it go, and replays it after an MDS
/// restart anyway (its seal is genuine, but older than the grant of the
/// client that took the lock next) gives way to that client's replay,
/// even when it replays first.
#[test]
fn a_stale_replay_gives_way_to_the_newer_grant_of_the_same_bytes() {
    use lanefs_proto::wire::{FlockCall, MdsAnswer};
    let grace = Duration::from_secs(3);
    let config = LocalClusterConfig { osts: 1, mds_recovery_grace: grace, ..LocalClusterConfig::default() };
    let mut c = LocalCluster::start(config).unwrap();
    let stale = FlockRequest { pid: 666, ..lock(9, Some(FlockKind::Write), 0, 99) };
    let mut old_holder = RawMds::connect(&c);
    let set = |replay, seal| FlockCall::Set { request: stale, wait: false, ticket: 0, replay, seal };
    let MdsAnswer::FlockGranted(seal) = old_holder.call(set(false, None)) else { panic!("granted with a seal") };
    old_holder.call(FlockCall::UnlockOwner { file: FILE, owner: 9 });
    let (a, b) = (client(&c), client(&c));
    assert_eq!(a.flock(lock(1, Some(FlockKind::Write), 0, 99), false, NEVER).unwrap(), FlockAnswer::Granted);
    drop(old_holder);
    // A client that holds a lock and will not come back keeps the grace
    // on to its end, so that the stale replay below comes within it.
    let mut away = RawMds::connect(&c);
    away.session(0xa7a7);
    let elsewhere = FlockRequest { file: lanefs_proto::Fid(FILE.0 + 1), ..lock(3, Some(FlockKind::Read), 0, 0) };
    assert!(matches!(
        away.call(FlockCall::Set { request: elsewhere, wait: false, ticket: 0, replay: false, seal: None }),
        MdsAnswer::FlockGranted(_)
    ));

    c.stop_mds();
    c.start_mds().unwrap();
    let mut old_holder = RawMds::connect(&c);
    let first = old_holder.call(set(true, Some(seal)));
    assert!(matches!(first, MdsAnswer::FlockGranted(_)), "a genuine seal, replayed first: {first:?}");
    match b.flock(lock(2, Some(FlockKind::Write), 50, 50), false, NEVER).unwrap() {
        FlockAnswer::Conflict(held) => assert_eq!(held.pid, 1, "a's lock, from the newer grant, holds"),
        other => panic!("the lock held before the restart should hold after it: {other:?}"),
    }
    drop(old_holder);
}
