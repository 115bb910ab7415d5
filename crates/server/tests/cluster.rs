//! Integration tests on a real local cluster: an MDS and an OSS on local
//! sockets, objects in files, clients with their own connections.

use lanefs_client::{Client, ClientOptions, File, NetError};
use lanefs_core::client::ladvise::{Advice, AheadMode, LockaheadResult};
use lanefs_core::ldlm::server::LockServerConfig;
use lanefs_core::ost::{OstConfig, SyncLockCancel};
use lanefs_core::Duration;
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use lanefs_server::filestore::MemoryStores;
use std::time::Instant as WallClock;

const MIB: u64 = 1 << 20;

fn cluster(osts: u32) -> LocalCluster {
    LocalCluster::start(LocalClusterConfig { osts, ..Default::default() }).expect("cluster starts")
}

fn client(c: &LocalCluster) -> Client {
    Client::connect(&c.mds_address(), c.client_options()).expect("client connects")
}

fn create(cl: &Client, path: &str, count: i64, size: u64) -> File {
    create_striped(cl, path, StripeSpec { count: Some(count), size: Some(size), ..StripeSpec::default() })
}

fn create_striped(cl: &Client, path: &str, stripe: StripeSpec) -> File {
    let request = MdsRequest::Create {
        path: path.into(),
        stripe,
        mode: CreateMode::Exclusive,
        access: Access::ReadWrite,
        permissions: 0o644,
    };
    match cl.mds(request).unwrap() {
        MdsReply::File(info) => cl.open_layout(path, info.layout).unwrap(),
        other => panic!("create answered {other:?}"),
    }
}

fn open(cl: &Client, path: &str) -> File {
    match cl.mds(MdsRequest::Open { path: path.into(), access: Access::ReadWrite }).unwrap() {
        MdsReply::File(info) => cl.open_layout(path, info.layout).unwrap(),
        other => panic!("open answered {other:?}"),
    }
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn a_read_right_after_another_clients_write_sees_it() {
    let c = cluster(2);
    let (a, b) = (client(&c), client(&c));
    let fa = create(&a, "/shared", 2, MIB);
    let fb = open(&b, "/shared");
    for (i, (off, len)) in [(0u64, 4096usize), (100, 10_000), (MIB - 7, 3 * MIB as usize)].into_iter().enumerate() {
        let data = bytes(i as u8, len);
        a.pwrite(&fa, off, &data).unwrap();
        assert_eq!(b.pread(&fb, off, len as u64).unwrap(), data, "case {i}");
    }
    assert_eq!(b.size(&fb).unwrap(), MIB - 7 + 3 * MIB);
    let stats = a.ost_stats().unwrap();
    let callbacks: u64 = stats.iter().map(|s| s.locks.callbacks).sum();
    assert!(callbacks > 0, "readers revoke the writer's locks: {stats:?}");
}

#[test]
fn conflicting_writers_are_serialised_by_callbacks() {
    let c = cluster(1);
    let (a, b) = (client(&c), client(&c));
    let fa = create(&a, "/f", 1, MIB);
    let fb = open(&b, "/f");
    for round in 0..10u8 {
        let (w, f) = if round % 2 == 0 { (&a, &fa) } else { (&b, &fb) };
        w.pwrite(f, 0, &bytes(round, 8192)).unwrap();
    }
    assert_eq!(a.pread(&fa, 0, 8192).unwrap(), bytes(9, 8192));
    let s = &a.ost_stats().unwrap()[0];
    assert!(s.locks.callbacks >= 9, "{s:?}");
    assert_eq!(s.locks.evictions, 0);
    // Lustre's default, sync_lock_cancel = always: every written lock that
    // changed hands was synced to disk first.
    assert!(s.data.cancel_syncs >= 9, "{s:?}");
}

#[test]
fn the_never_policy_hands_written_locks_over_without_a_sync() {
    let ost = OstConfig { sync_lock_cancel: SyncLockCancel::Never, ..OstConfig::default() };
    let c = LocalCluster::start(LocalClusterConfig { osts: 1, ost, ..Default::default() }).unwrap();
    let (a, b) = (client(&c), client(&c));
    let fa = create(&a, "/f", 1, MIB);
    let fb = open(&b, "/f");
    a.pwrite(&fa, 0, &bytes(1, 8192)).unwrap();
    b.pwrite(&fb, 0, &bytes(2, 8192)).unwrap();
    assert_eq!(a.pread(&fa, 0, 8192).unwrap(), bytes(2, 8192));
    let s = &a.ost_stats().unwrap()[0];
    assert!(s.locks.callbacks >= 2, "{s:?}");
    assert_eq!(s.data.cancel_syncs, 0, "{s:?}");
}

#[test]
fn lockahead_is_refused_on_conflict_and_the_write_still_succeeds() {
    let c = cluster(1);
    let (a, b) = (client(&c), client(&c));
    let fa = create(&a, "/la", 1, MIB);
    let fb = open(&b, "/la");
    a.pwrite(&fa, 0, &bytes(1, 4096)).unwrap(); // A's lock grows to [0, EOF]
    let results = b.ladvise(&fb, &[Advice::lockahead(AheadMode::Write, MIB, 2 * MIB - 1, true)]).unwrap();
    assert_eq!(results, vec![LockaheadResult::Sent]);
    b.fsync(&fb).unwrap(); // a round trip, by which the refusal has arrived
    let deadline = WallClock::now() + std::time::Duration::from_secs(5);
    while b.counters().unwrap().lockahead_refused == 0 {
        assert!(WallClock::now() < deadline, "refusal never arrived");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    b.pwrite(&fb, MIB, &bytes(2, 4096)).unwrap();
    assert_eq!(a.pread(&fa, MIB, 4096).unwrap(), bytes(2, 4096));
    let s = &a.ost_stats().unwrap()[0];
    assert_eq!(s.locks.refusals, 1, "{s:?}");
}

#[test]
fn lockahead_locks_let_two_writers_share_an_object_without_callbacks() {
    let c = cluster(1);
    let (a, b) = (client(&c), client(&c));
    let fa = create(&a, "/ahead", 1, MIB);
    let fb = open(&b, "/ahead");
    for (cl, f, first) in [(&a, &fa, 0u64), (&b, &fb, 1)] {
        cl.ladvise(f, &[Advice::lock_no_expand(true)]).unwrap();
        let advices: Vec<Advice> = (0..8)
            .map(|i| (2 * i + first) * MIB)
            .map(|s| Advice::lockahead(AheadMode::Write, s, s + MIB - 1, true))
            .collect();
        cl.ladvise(f, &advices).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    for i in 0..8u64 {
        a.pwrite(&fa, 2 * i * MIB, &bytes(1, MIB as usize)).unwrap();
        b.pwrite(&fb, (2 * i + 1) * MIB, &bytes(2, MIB as usize)).unwrap();
    }
    a.fsync(&fa).unwrap();
    b.fsync(&fb).unwrap();
    let s = &a.ost_stats().unwrap()[0];
    assert_eq!(s.locks.callbacks, 0, "{s:?}");
    // Each fsync asked the OST to make the object's writes durable.
    assert_eq!(s.data.syncs, 2, "{s:?}");
    assert_eq!(a.pread(&fa, MIB, MIB).unwrap(), bytes(2, MIB as usize));
}

#[test]
fn the_namespace_survives_an_mds_restart() {
    let mut c = cluster(2);
    let a = client(&c);
    a.mds(MdsRequest::Mkdir { path: "/d".into(), permissions: 0o755 }).unwrap();
    let f = create(&a, "/d/file", 2, 2 * MIB);
    a.pwrite(&f, 0, &bytes(5, 100)).unwrap();
    a.close(f).unwrap();
    drop(a);
    c.stop_mds();
    c.start_mds().unwrap();
    let b = client(&c);
    let f = open(&b, "/d/file");
    assert_eq!(f.layout.stripe_size(), 2 * MIB);
    assert_eq!(f.layout.stripe_count(), 2);
    assert_eq!(b.pread(&f, 0, 100).unwrap(), bytes(5, 100));
    let entries = b.readdir("/d").unwrap();
    assert_eq!(entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["file"]);
}

/// A client that connects while the MDS restarts waits for it, as its
/// namespace calls do, instead of failing at once.
#[test]
fn a_client_connecting_while_the_mds_restarts_waits_for_it() {
    let mut c = cluster(1);
    let address = c.mds_address();
    c.stop_mds();
    let restart = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(700));
        c.start_mds().unwrap();
        c
    });
    let a = Client::connect(&address, ClientOptions::default()).expect("connects once the MDS is back");
    assert!(a.readdir("/").is_ok());
    let _c = restart.join().unwrap();
}

/// A client whose OSS goes away waits for it (nothing fails while it may
/// come back); one that stays away fails the operations that need it, with
/// an error naming it, once the reconnect timeout has passed: never a hang.
#[test]
fn an_oss_that_stays_down_fails_operations_after_the_reconnect_timeout() {
    let mut c = cluster(1);
    let options = ClientOptions { reconnect_timeout: std::time::Duration::from_secs(2), ..ClientOptions::default() };
    let a = Client::connect(&c.mds_address(), options).unwrap();
    let f = create(&a, "/r", 1, MIB);
    a.pwrite(&f, 0, &bytes(1, 4096)).unwrap();
    a.fsync(&f).unwrap();
    c.stop_oss();
    let started = WallClock::now();
    let err = a.pread(&f, 1 << 30, 4096).expect_err("the OSS is down");
    let waited = started.elapsed();
    assert!(waited >= std::time::Duration::from_secs(2), "failed before the timeout: {waited:?}");
    assert!(waited < std::time::Duration::from_secs(20), "an error, not a hang: {waited:?}");
    assert!(err.to_string().contains("out of reach"), "{err}");
    // The namespace needs only the MDS.
    assert!(a.readdir("/").is_ok());
    c.start_oss().unwrap();
    assert_eq!(a.pread(&f, 0, 4096).unwrap(), bytes(1, 4096), "data on disk survives");
    // The client reconnected with a new page arena (the old one is retired:
    // the old server might still have read it), and writes use it.
    a.pwrite(&f, 8192, &bytes(2, 100_000)).unwrap();
    a.fsync(&f).unwrap();
    assert_eq!(a.ost_stats().unwrap()[0].bulk_shared_bytes, 100_000, "writes go through the new arena");
    let b = client(&c);
    assert_eq!(b.pread(&open(&b, "/r"), 8192, 100_000).unwrap(), bytes(2, 100_000));
}

/// A new client of an OST whose recovery waits for a client that will not
/// come back is told why (a warning naming the OST, the clients and the
/// window), and its operations fail after its own timeout, naming the
/// recovery: never a silent wait of the whole window.
#[test]
fn a_client_waiting_for_an_osts_recovery_fails_after_its_timeout_saying_why() {
    let mut c = cluster(1);
    let quick = ClientOptions::default().with_timeout(std::time::Duration::from_secs(1));
    let gone = Client::connect(&c.mds_address(), quick).unwrap();
    let f = create(&gone, "/r", 1, MIB);
    gone.pwrite(&f, 0, &bytes(1, 4096)).unwrap();
    gone.fsync(&f).unwrap();
    // The OSS restarts; the client it knew is gone meanwhile (it could
    // not say so), so the OST's recovery waits for it, for 300 s.
    c.stop_oss();
    drop(gone);
    c.start_oss().unwrap();
    let timeout = std::time::Duration::from_secs(3);
    let b = Client::connect(&c.mds_address(), ClientOptions::default().with_timeout(timeout)).unwrap();
    let fb = open(&b, "/r");
    let started = WallClock::now();
    let err = b.pread(&fb, 0, 4096).expect_err("the OST keeps new requests for its recovery");
    let waited = started.elapsed();
    assert!(waited >= timeout, "failed before the timeout: {waited:?}");
    assert!(waited < timeout * 4, "the client's timeout, not the recovery window: {waited:?}");
    let said = err.to_string();
    for part in ["recovering", "1 client(s)", "--recovery-window", "--timeout"] {
        assert!(said.contains(part), "{said:?} lacks {part:?}");
    }
    // The next operation tries again, and gives up as the first did.
    let started = WallClock::now();
    let again = b.pread(&fb, 0, 4096).expect_err("still recovering");
    assert!(started.elapsed() < timeout * 4, "the second wait is bounded too: {:?}", started.elapsed());
    assert!(again.to_string().contains("recovering"), "{again}");
}

/// An OSS restart loses nothing: the client keeps its locks and its cache
/// while the OSS is away, writes on into its cache, and when the OSS is
/// back it replays what the OSS had acknowledged but not committed. Here
/// the restarted OSS has even lost those bytes (the object file is cut
/// back, as a machine crash loses what was only in its page cache): the
/// replay writes them again.
#[test]
fn an_oss_restart_loses_nothing_the_client_held() {
    // Cutting object files back stands for a disk's crash, wherever the
    // temporary directory is.
    let config = LocalClusterConfig { osts: 1, memory_stores: MemoryStores::AsDisk, ..Default::default() };
    let mut c = LocalCluster::start(config).expect("cluster starts");
    let a = client(&c);
    let f = create(&a, "/r", 1, MIB);
    a.pwrite(&f, 0, &bytes(1, 300_000)).unwrap();
    a.close(f).unwrap(); // written back and acknowledged, not committed
    let f = open(&a, "/r");
    c.stop_oss();
    let object = f.layout.object(0);
    let path = c.data_dir().join("OST0000").join("objects").join(object.object.0.to_string());
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
    a.pwrite(&f, 300_000, &bytes(2, 5000)).unwrap(); // cached while the OSS is away
    c.start_oss().unwrap();
    a.fsync(&f).unwrap();
    let b = client(&c);
    let fb = open(&b, "/r");
    assert_eq!(b.pread(&fb, 0, 300_000).unwrap(), bytes(1, 300_000), "replayed after the restart");
    assert_eq!(b.pread(&fb, 300_000, 5000).unwrap(), bytes(2, 5000), "written after the restart");
    assert_eq!(a.counters().unwrap().bytes_lost, 0);
}

/// A cluster whose data is on tmpfs (`/dev/shm`), or `None` where there
/// is none.
fn cluster_in_memory(memory_stores: MemoryStores) -> Option<(LocalCluster, tempfile::TempDir)> {
    let shm = std::path::Path::new("/dev/shm");
    let dir = tempfile::tempdir_in(shm).ok().filter(|_| shm.is_dir());
    let Some(dir) = dir else {
        eprintln!("skipped: no /dev/shm to put an OST in memory");
        return None;
    };
    let data_dir = Some(dir.path().join("fs"));
    let config = LocalClusterConfig { osts: 1, data_dir, memory_stores, ..Default::default() };
    Some((LocalCluster::start(config).expect("cluster starts"), dir))
}

/// An OST in memory (tmpfs) is as durable as it can be once a write is
/// made: it commits nothing, and its clients keep no copies for replay.
/// Its bytes survive an OSS restart all the same (the store outlives the
/// process). Treated as a disk, the same writes are kept until committed.
#[test]
fn an_ost_in_memory_makes_its_clients_keep_no_replay_copies() {
    let Some((mut c, _dir)) = cluster_in_memory(MemoryStores::default()) else { return };
    let a = client(&c);
    let f = create(&a, "/m", 1, MIB);
    a.pwrite(&f, 0, &bytes(1, 2 << 20)).unwrap();
    a.close(f).unwrap(); // written back and acknowledged
    assert_eq!(a.unstable_bytes().unwrap(), 0, "nothing kept for replay over tmpfs");
    c.stop_oss();
    c.start_oss().unwrap();
    let b = client(&c);
    assert_eq!(b.pread(&open(&b, "/m"), 0, 2 << 20).unwrap(), bytes(1, 2 << 20), "the bytes outlive the OSS");
    assert_eq!(a.counters().unwrap().bytes_lost, 0);

    let Some((c, _dir)) = cluster_in_memory(MemoryStores::AsDisk) else { return };
    let a = client(&c);
    let f = create(&a, "/d", 1, MIB);
    a.pwrite(&f, 0, &bytes(1, 2 << 20)).unwrap();
    a.close(f).unwrap();
    assert!(a.unstable_bytes().unwrap() > 0, "kept until committed, as on a disk");
}

#[test]
fn bad_stripe_settings_and_missing_paths_are_clear_errors() {
    let c = cluster(2);
    let a = client(&c);
    let create = |path: &str, stripe| MdsRequest::Create {
        path: path.into(),
        stripe,
        mode: CreateMode::Exclusive,
        access: Access::ReadWrite,
        permissions: 0o644,
    };
    let stripe = StripeSpec { count: Some(1), size: Some(100_000), start_ost: None, ..StripeSpec::default() };
    let e = a.mds(create("/x", stripe)).unwrap_err();
    assert!(e.to_string().contains("65536") || e.to_string().contains("64 KiB"), "{e}");
    let stripe = StripeSpec { count: Some(5), size: None, start_ost: None, ..StripeSpec::default() };
    let e = a.mds(create("/y", stripe)).unwrap_err();
    assert!(e.to_string().contains('5'), "{e}");
    let e = a.mds(MdsRequest::Open { path: "/nope/file".into(), access: Access::Read }).unwrap_err();
    assert!(matches!(e, NetError::Namespace(_)) && e.to_string().contains("/nope"), "{e}");
    assert_eq!(e.errno(), lanefs_core::Errno::ENOENT);
}

/// A network client asked to run without recovery (the simulator's
/// setting) is refused at connect with a reason; it used to connect and
/// then hang.
#[test]
fn a_network_client_without_recovery_is_refused_with_a_reason() {
    let c = cluster(1);
    let mut options = ClientOptions::default();
    options.core.recovery = false;
    let started = WallClock::now();
    let e = Client::connect(&c.mds_address(), options).err().expect("refused");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "an error, not a wait");
    assert!(e.to_string().contains("core.recovery"), "{e}");
}

#[test]
fn a_killed_holder_is_evicted_after_the_callback_timeout() {
    if std::env::var("LANEFS_TEST_CHILD").is_ok() {
        return; // see holder_child below
    }
    let config = LocalClusterConfig {
        osts: 1,
        unix_sockets: false,
        ost: OstConfig {
            locks: LockServerConfig { callback_timeout: Duration::from_ms(1500), ..LockServerConfig::default() },
            ..OstConfig::default()
        },
        // Both processes write as whoever runs the test (root, often) in
        // its root directory: their client key's root stays root.
        key_root_squash: lanefs_net::auth::KeyRootSquash::Off,
        ..Default::default()
    };
    let c = LocalCluster::start(config).unwrap();
    let a = client(&c);
    let f = create(&a, "/killed", 1, MIB);
    drop(f);
    // A child process writes (dirty, unflushed, under a PW lock) and waits to be killed.
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "holder_child", "--nocapture", "--include-ignored"])
        .env("LANEFS_TEST_CHILD", c.mds_address())
        .env("LANEFS_TEST_KEY", &c.key_files().expect("a TCP cluster has keys").client)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("HOLDING") {
        use std::io::Read;
        let n = out.read(&mut buf).unwrap();
        assert!(n > 0, "child exited early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let f = open(&a, "/killed");
    let started = WallClock::now();
    a.pwrite(&f, 0, &bytes(9, 4096)).unwrap();
    let waited = started.elapsed();
    assert!(waited >= std::time::Duration::from_millis(1000), "waited only {waited:?}");
    assert!(waited < std::time::Duration::from_secs(15), "waited {waited:?}");
    assert_eq!(a.pread(&f, 0, 4096).unwrap(), bytes(9, 4096));
    let s = &a.ost_stats().unwrap()[0];
    assert_eq!(s.locks.evictions, 1, "{s:?}");
}

/// Run only as the child of the test above.
#[test]
#[ignore = "helper process of a_killed_holder_is_evicted_after_the_callback_timeout"]
fn holder_child() {
    let Ok(mds) = std::env::var("LANEFS_TEST_CHILD") else { return };
    let key = std::env::var("LANEFS_TEST_KEY").unwrap();
    let key = lanefs_net::auth::ClusterKey::load(std::path::Path::new(&key)).unwrap();
    let cl = Client::connect(&mds, ClientOptions { key: Some(key), ..Default::default() }).unwrap();
    let f = open(&cl, "/killed");
    cl.pwrite(&f, 0, &bytes(1, 4096)).unwrap();
    println!("HOLDING");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn writes_on_one_host_go_through_shared_memory_and_elsewhere_on_the_socket() {
    let c = cluster(2);
    let shm = client(&c);
    let socket =
        Client::connect(&c.mds_address(), ClientOptions { shared_memory: false, ..Default::default() }).unwrap();
    let shared_bytes = |cl: &Client| cl.ost_stats().unwrap().iter().map(|s| s.bulk_shared_bytes).sum::<u64>();
    // Unaligned, spanning stripes: partial first and last pages, whole
    // pages in between, pieces on both OSTs.
    let (off, len) = (MIB - 1000, 3 * MIB as usize + 12_345);
    let f = create(&shm, "/shm", 2, MIB);
    shm.pwrite(&f, off, &bytes(1, len)).unwrap();
    shm.fsync(&f).unwrap();
    assert_eq!(shared_bytes(&shm), len as u64, "every byte was taken from the client's frames");
    let g = create(&socket, "/sock", 2, MIB);
    socket.pwrite(&g, off, &bytes(2, len)).unwrap();
    socket.fsync(&g).unwrap();
    assert_eq!(shared_bytes(&shm), len as u64, "a client without an arena sends its bytes");
    // Each reads the other's file back through the servers.
    assert_eq!(socket.pread(&open(&socket, "/shm"), off, len as u64).unwrap(), bytes(1, len));
    assert_eq!(shm.pread(&open(&shm, "/sock"), off, len as u64).unwrap(), bytes(2, len));
    // Rewriting pages while their write RPCs may still be in flight: the
    // last bytes written win.
    for round in 0..20u8 {
        shm.pwrite(&f, off, &bytes(10 + round, 64 * 1024)).unwrap();
    }
    shm.fsync(&f).unwrap();
    assert_eq!(socket.pread(&open(&socket, "/shm"), off, 64 * 1024).unwrap(), bytes(29, 64 * 1024));
}

/// An overstriped file (`lfs setstripe -C`: six stripes of 64 KiB on two
/// OSTs) and one on an OST list with an OST twice: two clients write
/// alternate stripes at once; every byte reads back in either, the size is
/// the end of the last write, and a truncate into the middle cuts every
/// stripe's object as the layout says.
#[test]
fn overstriped_files_hold_each_stripe_in_its_own_object() {
    let c = cluster(2);
    let (a, b) = (client(&c), client(&c));
    let unit = 64 * 1024u64;
    let specs = [
        ("/over", StripeSpec { count: Some(6), overstripe: true, size: Some(unit), ..StripeSpec::default() }),
        ("/listed", StripeSpec { osts: Some(vec![1, 0, 1]), size: Some(unit), ..StripeSpec::default() }),
    ];
    for (path, stripe) in specs {
        let fa = create_striped(&a, path, stripe);
        assert!(fa.layout.is_overstriped(), "{path}: {:?}", fa.layout);
        let count = u64::from(fa.layout.stripe_count());
        let fb = open(&b, path);
        // Each client writes every other stripe unit, 4 rows deep.
        let data = bytes(7, (4 * count * unit) as usize);
        std::thread::scope(|s| {
            for (who, (cl, f)) in [(&a, &fa), (&b, &fb)].into_iter().enumerate() {
                let data = &data;
                s.spawn(move || {
                    for u in (who as u64..4 * count).step_by(2) {
                        let at = (u * unit) as usize;
                        cl.pwrite(f, u * unit, &data[at..at + unit as usize]).unwrap();
                    }
                });
            }
        });
        assert!(a.pread(&fa, 0, data.len() as u64).unwrap() == data, "{path}: a reads both clients' stripes");
        assert!(b.pread(&fb, 0, data.len() as u64).unwrap() == data, "{path}: so does b");
        assert_eq!(b.size(&fb).unwrap(), data.len() as u64);
        let cut = 2 * count * unit + unit / 2;
        a.truncate(&fa, cut).unwrap();
        assert_eq!(b.size(&fb).unwrap(), cut, "{path}");
        // (pread fills what lies past the end with zeros.)
        let after = b.pread(&fb, 0, data.len() as u64).unwrap();
        let (below, past) = after.split_at(cut as usize);
        assert!(below == &data[..cut as usize], "{path}: the bytes below the cut stay");
        assert!(past.iter().all(|&b| b == 0), "{path}: the objects were cut where the layout says");
    }
}

/// A composite (PFL) file: its first 256 KiB on one stripe, the rest on
/// two; two clients write across the boundary at once, each reads all of
/// it back, the size is the end of the last write, and truncating into
/// the first component empties the second's objects.
#[test]
fn a_composite_file_reads_back_across_its_components() {
    use lanefs_proto::ComponentSpec;
    let c = cluster(2);
    let (a, b) = (client(&c), client(&c));
    let unit = 64 * 1024u64;
    let first = ComponentSpec {
        end: 4 * unit,
        stripe: StripeSpec { count: Some(1), size: Some(unit), ..StripeSpec::default() },
    };
    let rest = ComponentSpec { end: u64::MAX, stripe: StripeSpec { count: Some(2), ..StripeSpec::default() } };
    let fa = create_striped(&a, "/pfl", StripeSpec { components: Some(vec![first, rest]), ..StripeSpec::default() });
    assert_eq!((fa.layout.components().len(), fa.layout.object_count()), (2, 3));
    let fb = open(&b, "/pfl");
    let data = bytes(3, (12 * unit) as usize);
    std::thread::scope(|s| {
        for (who, (cl, f)) in [(&a, &fa), (&b, &fb)].into_iter().enumerate() {
            let data = &data;
            s.spawn(move || {
                // Units 0..12, each client every other one, in pieces that
                // straddle the boundary at 4 units.
                for u in (who as u64..12).step_by(2) {
                    let at = (u * unit) as usize;
                    cl.pwrite(f, u * unit, &data[at..at + unit as usize]).unwrap();
                }
            });
        }
    });
    a.pwrite(&fa, 4 * unit - 100, &data[(4 * unit - 100) as usize..(4 * unit + 100) as usize]).unwrap();
    assert!(a.pread(&fa, 0, data.len() as u64).unwrap() == data, "a reads both components");
    assert!(b.pread(&fb, 0, data.len() as u64).unwrap() == data, "so does b");
    assert_eq!(b.size(&fb).unwrap(), data.len() as u64);
    a.truncate(&fa, 3 * unit).unwrap();
    assert_eq!(b.size(&fb).unwrap(), 3 * unit);
    let after = b.pread(&fb, 0, data.len() as u64).unwrap();
    assert!(after[..(3 * unit) as usize] == data[..(3 * unit) as usize], "the first component's bytes stay");
    assert!(after[(3 * unit) as usize..].iter().all(|&byte| byte == 0), "the rest is gone");
    b.pwrite(&fb, 10 * unit, b"again").unwrap();
    assert_eq!(a.size(&fa).unwrap(), 10 * unit + 5, "the second component grows the file again");
}
