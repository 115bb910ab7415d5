//! Load on a real cluster: thousands of connections and a flood of
//! requests against an OSS process while `lanefs ior -w -r -W -R -e` with
//! four ranks runs on the same cluster. Half of the flood reads its
//! replies, half never does, and a few connections ask for large reads
//! they never read. The IOR run must complete with its data checked, no
//! connection below the cap may be refused, and the OSS's peak resident
//! memory may grow by less than the bound below. (`crates/net/tests/load.rs`
//! does the same against the library's servers, with ten times the load in
//! `make load`.)

mod common;

use common::Cluster;
use lanefs_core::msg::ToOst;
use lanefs_core::{ObjectId, Xid};
use lanefs_proto::codec::{encode, read_frame};
use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

const MIB: u64 = 1 << 20;
/// Connections that each send `REQUESTS` small requests.
const CONNECTIONS: usize = 2000;
const REQUESTS: usize = 12;
/// Connections that each ask for `BIG_READS` reads of 8 MiB and never read.
const BIG_READERS: usize = 8;
const BIG_READS: usize = 16;
/// The bound on the OSS's growth: each large reader holds at most its
/// queue's soft limit (8 MiB), the bytes it may have in flight (16 MiB) and
/// one reply being written (8 MiB); each small connection tens of KiB; the
/// IOR run's four clients a few of 1 MiB RPCs in flight each. 8 x 32 MiB +
/// 2,000 x 64 KiB + 64 MiB = 445 MiB.
const GROWTH_BYTES_MAX: u64 = 448 * MIB;

fn frame(m: Wire) -> Vec<u8> {
    let mut buf = Vec::new();
    encode(m, &mut buf).unwrap();
    buf
}

fn hello(uuid: u64) -> Vec<u8> {
    let mut bytes = frame(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client });
    bytes.extend(frame(Wire::Session { uuid }));
    bytes
}

/// Connection `i`'s small requests: a ping, a getattr and a 4 KiB read of
/// an object nobody writes (an error answer), in turn.
fn small_requests(i: usize) -> Vec<u8> {
    let mut bytes = hello(1_000_000 + i as u64);
    let object = ObjectId(1_000_000 + i as u64);
    for n in 0..REQUESTS {
        let xid = Xid(n as u64 + 1);
        let m = match n % 3 {
            0 => Wire::Ping,
            1 => Wire::ToOst { ost: (i % 2) as u32, message: ToOst::Getattr { xid, object } },
            _ => Wire::ToOst { ost: (i % 2) as u32, message: ToOst::Read { xid, object, offset: 0, len: 4096 } },
        };
        bytes.extend(frame(m));
    }
    bytes
}

async fn connect(path: &std::path::Path) -> tokio::net::UnixStream {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match tokio::net::UnixStream::connect(path).await {
            Ok(s) => return s,
            // A full accept queue refuses a Unix connection at once.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => panic!("connecting to {}: {e}", path.display()),
        }
    }
}

/// The answers a connection got (its Welcome and one per request).
async fn read_answers(s: &mut tokio::net::UnixStream, expected: usize) -> usize {
    let mut got = 0;
    while got < expected {
        match tokio::time::timeout(Duration::from_secs(60), read_frame(s)).await {
            Ok(Ok(Some(Wire::Refused { reason }))) => panic!("refused: {reason}"),
            Ok(Ok(Some(_))) => got += 1,
            _ => break,
        }
    }
    got
}

#[test]
fn ior_completes_verified_through_a_flood_and_the_oss_memory_stays_bounded() {
    let limit = lanefs_net::limits::raise_descriptor_limit();
    let connections = CONNECTIONS.min((limit as usize).saturating_sub(256) / 2);
    let cluster = Cluster::start(&[]);
    let mds = cluster.mds_address();
    let ior = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(["ior", "-a", "LANEFS", "-b", "16m", "-t", "1m", "-s", "2", "-N", "4", "-G", "13"])
            .args(["--lanefs.stripe-count=2", "-k", "-o", "/ior"])
            .args(args)
            .env("LANEFS_MDS", &mds)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // A first run makes the file whose objects the large readers ask for.
    let first = ior(&["-w", "-e"]).wait_with_output().unwrap();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let baseline = cluster.oss.memory_bytes("VmHWM");

    let oss = cluster.oss_socket();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let flood = rt.spawn(async move {
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..connections + BIG_READERS {
            let path = oss.clone();
            tasks.spawn(async move {
                let mut s = connect(&path).await;
                if i >= connections {
                    // Objects precreated for the first file: ids 1 and up
                    // on each OST, 16 MiB or more written to each.
                    let mut bytes = hello(2_000_000 + i as u64);
                    for n in 0..BIG_READS {
                        let read = ToOst::Read { xid: Xid(n as u64), object: ObjectId(1), offset: 0, len: 8 * MIB };
                        bytes.extend(frame(Wire::ToOst { ost: (i % 2) as u32, message: read }));
                    }
                    s.write_all(&bytes).await.unwrap();
                    return (s, None);
                }
                s.write_all(&small_requests(i)).await.unwrap();
                let answers = match i % 2 {
                    0 => Some(read_answers(&mut s, 1 + REQUESTS).await),
                    _ => None,
                };
                (s, answers)
            });
            if i % 200 == 199 {
                tokio::task::yield_now().await;
            }
        }
        let mut held = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let (s, answers) = done.unwrap();
            if let Some(got) = answers {
                assert_eq!(got, 1 + REQUESTS, "a connection that reads gets every answer");
            }
            held.push(s);
        }
        held
    });

    // The verified run, during the flood: written, fsynced, read back and
    // checked, four times.
    let started = Instant::now();
    let run = ior(&["-w", "-r", "-W", "-R", "-e", "-C", "-i", "4"]);
    let held = rt.block_on(flood).unwrap();
    let run = run.wait_with_output().unwrap();
    let took = started.elapsed();
    let grown = cluster.oss.memory_bytes("VmHWM").saturating_sub(baseline);
    eprintln!(
        "{} connections ({} never reading, {BIG_READERS} asking {BIG_READS} reads of 8 MiB), {} requests; \
         ior -w -r -W -R -e -i 4 in {took:.1?}; OSS peak memory grew {} MiB (bound {} MiB)",
        held.len(),
        connections / 2,
        connections * REQUESTS,
        grown >> 20,
        GROWTH_BYTES_MAX >> 20
    );
    assert!(run.status.success(), "the IOR run failed under the flood: {}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(held.len(), connections + BIG_READERS, "every connection was served");
    assert!(grown < GROWTH_BYTES_MAX, "the OSS grew {} MiB", grown >> 20);
    drop(held);
}
