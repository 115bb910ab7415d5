//! Fair shares under load: what the others see while one source floods
//! the servers' handshake pool with connections that never speak, and one
//! user takes its whole share of file locks and waiters and goes on asking
//! for more as fast as the MDS answers (which holds each further refusal
//! back longer: `lanefs_server::refusal_backoff`).
//!
//! A keyed client (from 127.0.0.1, as uid 1000) measures, in rounds, the
//! bandwidth of a verified write and read of [`ROUND_BYTES`], the latency
//! of a metadata round trip (`stat`) and of a file lock taken and given
//! back, first with nothing else running and then during both floods, in
//! one run; the medians are printed side by side. The floods come from
//! 127.0.0.2 to 127.0.0.9 (eight sources of 64 handshakes each: twice the
//! pool), each connection renewed before its handshake times out, and
//! from uid 4242 on a client of its own.
//!
//! Ignored by default (about a minute): `make load` runs it, and it fails
//! if the others lose more than a fifth of their bandwidth or take more
//! than a fifth longer, or see any error.

mod common;

use lanefs_client::{Client, ClientOptions};
use lanefs_net::auth::KeyRootSquash;
use lanefs_net::limits::{HANDSHAKES_PER_SOURCE_MAX, HANDSHAKE_TIMEOUT_DEFAULT};
use lanefs_proto::flock::{FlockAnswer, FlockKind, FlockOwner, FlockRequest};
use lanefs_proto::flock::{LOCKS_PER_UID_MAX, WAITERS_PER_UID_MAX};
use lanefs_proto::{Credentials, Fid, MdsRequest};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const ROUND_BYTES: usize = 16 << 20;
/// Metadata and lock round trips timed per round.
const TRIPS: usize = 50;
/// The most the others may lose: a fifth of their bandwidth, a fifth more
/// time per round trip.
const LOSS_MAX: f64 = 0.2;

struct Round {
    mib_s: f64,
    stat: Duration,
    lock: Duration,
}

fn median<T: PartialOrd + Copy>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    values[values.len() / 2]
}

/// One round of the others' work, as uid 1000.
fn round(client: &Client, n: usize) -> Round {
    let started = Instant::now();
    common::verified_write_read(client, &format!("/others/{n}"), n as u64, ROUND_BYTES);
    let mib_s = ROUND_BYTES as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64();
    let stat = median(
        (0..TRIPS)
            .map(|_| {
                let t = Instant::now();
                client.mds(MdsRequest::Stat { path: format!("/others/{n}") }).expect("stat");
                t.elapsed()
            })
            .collect(),
    );
    let never = || false;
    let lock = median(
        (0..TRIPS)
            .map(|i| {
                let request = FlockRequest {
                    file: Fid(1 << 40),
                    owner: FlockOwner { client: 0, owner: i as u64 },
                    pid: 1,
                    uid: 1000,
                    kind: Some(FlockKind::Write),
                    start: 0,
                    end: u64::MAX,
                };
                let t = Instant::now();
                assert_eq!(client.flock(request, false, &never).expect("lock"), FlockAnswer::Granted);
                client.flock_unlock_owner(Fid(1 << 40), i as u64).expect("unlock");
                t.elapsed()
            })
            .collect(),
    );
    Round { mib_s, stat, lock }
}

/// Bare connections from `127.0.0.{2..=9}` to each address, each renewed
/// before its handshake would time out, until `stop`.
fn handshake_flood(addresses: Vec<std::net::SocketAddr>, stop: Arc<AtomicBool>, made: Arc<AtomicU64>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let renew = HANDSHAKE_TIMEOUT_DEFAULT.mul_f64(0.8);
        while !stop.load(Ordering::Relaxed) {
            let mut held = Vec::new();
            for source in 2..=9u8 {
                for address in &addresses {
                    for _ in 0..HANDSHAKES_PER_SOURCE_MAX {
                        let socket = tokio::net::TcpSocket::new_v4().unwrap();
                        socket.bind(std::net::SocketAddr::from(([127, 0, 0, source], 0))).unwrap();
                        if let Ok(Ok(stream)) =
                            tokio::time::timeout(Duration::from_millis(50), socket.connect(*address)).await
                        {
                            held.push(stream);
                            made.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            let until = Instant::now() + renew;
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            drop(held);
        }
    });
}

/// uid 4242 takes its share of locks and of waiters, then asks for more
/// in a loop until `stop`; returns how many requests it made.
fn lock_flood(client: Arc<Client>, stop: Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<u64>> {
    let never = || false;
    let on = |file: u64, owner: u64, kind: FlockKind| FlockRequest {
        file: Fid((1 << 41) + file),
        owner: FlockOwner { client: 0, owner },
        pid: 2,
        uid: 4242,
        kind: Some(kind),
        start: 0,
        end: u64::MAX,
    };
    let mut file = 0;
    while client.flock(on(file, 1, FlockKind::Write), false, &never).unwrap() == FlockAnswer::Granted {
        file += 1;
        assert!(file as usize <= LOCKS_PER_UID_MAX, "one uid's locks are bounded");
    }
    let mut threads: Vec<_> = (0..WAITERS_PER_UID_MAX as u64)
        .map(|owner| {
            let client = client.clone();
            std::thread::spawn(move || {
                // Waits behind owner 1's lock on file 0 until the end.
                let _ = client.flock(on(0, 100 + owner, FlockKind::Read), true, &|| false);
                0
            })
        })
        .collect();
    threads.push(std::thread::spawn(move || {
        let mut asked = 0;
        while !stop.load(Ordering::Relaxed) {
            let answer = client.flock(on(file + asked, 2, FlockKind::Write), false, &|| false).unwrap();
            assert!(matches!(answer, FlockAnswer::NoLocks(_)), "past its share: {answer:?}");
            asked += 1;
        }
        asked
    }));
    threads
}

#[test]
#[ignore = "a load run of about a minute: make load"]
fn others_keep_their_bandwidth_and_latency_under_a_handshake_flood_and_one_users_lock_flood() {
    let config =
        LocalClusterConfig { osts: 2, unix_sockets: false, key_root_squash: KeyRootSquash::Off, ..Default::default() };
    let cluster = LocalCluster::start(config).unwrap();
    let admin = Client::connect(&cluster.mds_address(), cluster.client_options()).unwrap();
    admin.mds(MdsRequest::Mkdir { path: "/others".into(), permissions: 0o777 }).unwrap();
    let as_user = |uid: u32| ClientOptions { credentials: Credentials::user(uid, uid), ..cluster.client_options() };
    let others = Client::connect(&cluster.mds_address(), as_user(1000)).unwrap();
    let before: Vec<Round> = (0..ROUNDS).map(|n| round(&others, n)).collect();

    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicU64::new(0));
    let addresses = [cluster.mds_address(), cluster.oss_address().unwrap()].map(|a| a.parse().unwrap()).to_vec();
    let flood = {
        let (stop, made) = (stop.clone(), made.clone());
        std::thread::spawn(move || handshake_flood(addresses, stop, made))
    };
    let flooder = Arc::new(Client::connect(&cluster.mds_address(), as_user(4242)).unwrap());
    let lockers = lock_flood(flooder.clone(), stop.clone());
    std::thread::sleep(Duration::from_secs(1));
    let during: Vec<Round> = (0..ROUNDS).map(|n| round(&others, ROUNDS + n)).collect();
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    // Owner 1 lets go: the parked waiters are answered and end.
    flooder.flock_unlock_owner(Fid(1 << 41), 1).unwrap();
    let asked: u64 = lockers.into_iter().map(|t| t.join().unwrap()).sum();

    let bw = |rounds: &[Round]| median(rounds.iter().map(|r| r.mib_s).collect());
    let stat = |rounds: &[Round]| median(rounds.iter().map(|r| r.stat).collect());
    let lock = |rounds: &[Round]| median(rounds.iter().map(|r| r.lock).collect());
    println!(
        "handshake flood: {} bare connections made; lock flood: {asked} requests past the share",
        made.load(Ordering::Relaxed)
    );
    println!("{:<24} {:>12} {:>12} {:>8}", "the others' (median)", "before", "during", "ratio");
    let (b, d) = (bw(&before), bw(&during));
    println!("{:<24} {b:>12.1} {d:>12.1} {:>8.2}", "write+read MiB/s", d / b);
    for (name, b, d) in
        [("stat latency us", stat(&before), stat(&during)), ("lock latency us", lock(&before), lock(&during))]
    {
        println!(
            "{name:<24} {:>12.0} {:>12.0} {:>8.2}",
            b.as_secs_f64() * 1e6,
            d.as_secs_f64() * 1e6,
            d.as_secs_f64() / b.as_secs_f64()
        );
    }
    assert!(d >= b * (1.0 - LOSS_MAX), "bandwidth fell from {b:.1} to {d:.1} MiB/s");
    assert!(stat(&during).as_secs_f64() <= stat(&before).as_secs_f64() * (1.0 + LOSS_MAX), "stat latency");
    assert!(lock(&during).as_secs_f64() <= lock(&before).as_secs_f64() * (1.0 + LOSS_MAX), "lock latency");
}
