//! Malformed and hostile input on the wire: every bad peer gets a reason
//! and a closed connection, and the servers keep serving everyone else.

use lanefs_mds::{CreateMode, MdsReply, MdsRequest, StripeSpec};
use lanefs_net::client::{Client, ClientOptions};
use lanefs_net::cluster::{LocalCluster, LocalClusterConfig};
use lanefs_net::codec::{encode, FRAME_BYTES_MAX};
use lanefs_net::proto::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use std::io::{Read, Write};
use std::time::Duration;

fn tcp_cluster() -> LocalCluster {
    LocalCluster::start(LocalClusterConfig { osts: 1, unix_sockets: false, ..Default::default() }).unwrap()
}

/// Send raw bytes, then read until the server closes; return what it said.
fn exchange(address: &str, bytes: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(address).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(bytes).unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("the server closes the connection instead of hanging");
    String::from_utf8_lossy(&answer).into_owned()
}

fn frame(m: Wire) -> Vec<u8> {
    let mut buf = Vec::new();
    encode(m, &mut buf).unwrap();
    buf
}

fn hello(version: u16) -> Vec<u8> {
    frame(Wire::Hello { magic: MAGIC, version, role: Role::Client })
}

fn still_serving(c: &LocalCluster) {
    let cl = Client::connect(&c.mds_address(), ClientOptions::default()).unwrap();
    let path = format!("/ok-{}", std::process::id());
    let stripe = StripeSpec::default();
    let MdsReply::File(info) =
        cl.mds(MdsRequest::Create { path: path.clone(), stripe, mode: CreateMode::OpenOrCreate }).unwrap()
    else {
        panic!("create answered something else")
    };
    let f = cl.open_layout(&path, info.layout).unwrap();
    cl.pwrite(&f, 0, b"still here").unwrap();
    assert_eq!(cl.pread(&f, 0, 10).unwrap(), b"still here");
}

#[test]
fn every_kind_of_bad_frame_is_refused_with_a_reason() {
    let c = tcp_cluster();
    let oss = c.oss_address().unwrap();
    let mds = c.mds_address();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("garbage", vec![0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 1, 2, 3], "frame"),
        ("oversized frame", (FRAME_BYTES_MAX + 1).to_le_bytes().to_vec(), "exceeds the maximum"),
        ("wrong version", hello(PROTOCOL_VERSION + 1), "protocol version"),
        ("no hello first", frame(Wire::StatsRequest { id: 1 }), "expected Hello"),
        ("bad magic", frame(Wire::Hello { magic: 7, version: PROTOCOL_VERSION, role: Role::Client }), "magic"),
    ];
    for (name, bytes, reason) in &cases {
        for address in [&oss, &mds] {
            let answer = exchange(address, bytes);
            assert!(answer.contains(reason), "{name} at {address}: answer {answer:?} lacks {reason:?}");
        }
    }
    // After a good handshake: a message for an OST this OSS does not serve,
    // and a header that does not decode.
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend(frame(Wire::ToOst { ost: 9, message: lanefs_core::msg::ToOst::Connect }));
    assert!(exchange(&oss, &bytes).contains("does not serve OST index 9"));
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend_from_slice(&12u32.to_le_bytes());
    bytes.extend_from_slice(&8u32.to_le_bytes());
    bytes.extend_from_slice(&[0xff; 8]);
    assert!(exchange(&oss, &bytes).contains("undecodable frame header"));
    // A truncated frame followed by a hang-up must not wedge the server.
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend_from_slice(&1000u32.to_le_bytes());
    bytes.extend_from_slice(&[1, 2, 3]);
    {
        let mut s = std::net::TcpStream::connect(&oss).unwrap();
        s.write_all(&bytes).unwrap();
    }
    still_serving(&c);
}

/// Connect to the OSS's Unix socket at `path`, shake hands, then send
/// `steps` (with a descriptor where given) and read until the answer holds
/// `expected`, the server closes, or 10 seconds pass.
async fn session(path: &str, steps: Vec<(Wire, Option<&std::fs::File>)>, expected: &str) -> String {
    use lanefs_net::shm::send_frame_with_fd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(path).await.unwrap();
    s.write_all(&hello(PROTOCOL_VERSION)).await.unwrap();
    for (m, fd) in steps {
        match fd {
            Some(f) => send_frame_with_fd(&s, &frame(m), std::os::fd::AsFd::as_fd(f)).await.unwrap(),
            None => s.write_all(&frame(m)).await.unwrap(),
        }
    }
    let mut answer = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&answer).contains(expected) {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Hostile shared-memory messages on a Unix socket: an arena without a
/// descriptor or with one that is not a sealed memfd is refused (and the
/// connection goes on); a write naming frames of no arena, or outside the
/// attached one, closes the connection with the reason. The OSS never maps
/// or reads what it should not.
#[test]
fn hostile_shared_memory_is_refused() {
    use lanefs_core::{ObjectId, Xid};
    use lanefs_net::shm::{create_arena, SharedBulk};
    let c = LocalCluster::start(LocalClusterConfig { osts: 1, ..Default::default() }).unwrap();
    let oss = c.oss_address().unwrap();
    let path = oss.strip_prefix("unix:").expect("a Unix socket").to_string();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let write = |arena: u64, runs: Vec<(u32, u32)>| Wire::WriteShared {
        ost: 0,
        xid: Xid(1),
        object: ObjectId(1),
        offset: 0,
        bulk: SharedBulk { arena, head: 0, len: 4096, runs },
    };
    let (arena, memfd) = create_arena(4).unwrap();
    let unsealed = tempfile::tempfile().unwrap();
    unsealed.set_len(1 << 20).unwrap();
    rt.block_on(async {
        let check = |steps, expected: &'static str| {
            let path = path.clone();
            async move {
                let answer = session(&path, steps, expected).await;
                assert!(answer.contains(expected), "{answer:?} lacks {expected:?}");
            }
        };
        let attach = |frames| Wire::AttachArena { arena: arena.id(), frames };
        check(vec![(attach(4), None)], "no file descriptor").await;
        check(vec![(attach(4), Some(&unsealed))], "sealed").await;
        check(vec![(attach(8), Some(&memfd))], "fewer than").await;
        check(vec![(write(arena.id(), vec![(0, 1)]), None)], "before any arena was attached").await;
        check(vec![(attach(4), Some(&memfd)), (write(arena.id(), vec![(3, 2)]), None)], "frames 3+2 of an arena of 4")
            .await;
        check(vec![(attach(4), Some(&memfd)), (write(arena.id() + 1, vec![(0, 1)]), None)], "names arena").await;
    });
    still_serving(&c);
}

#[test]
fn a_client_that_cannot_reach_the_mds_gets_an_error_not_a_hang() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    drop(listener);
    let options = ClientOptions { connect_timeout: Duration::from_secs(2), ..Default::default() };
    let err = Client::connect(&address, options).err().expect("nothing listens there");
    assert!(err.to_string().contains(&address), "{err}");
    let err = Client::connect("not-an-address", ClientOptions::default()).err().unwrap();
    assert!(err.to_string().contains("HOST:PORT"), "{err}");
}

/// Read frames from `s` until one is an answer from an OST; `None` if the
/// server closes or says nothing for 10 seconds.
fn next_ost_answer(s: &mut std::net::TcpStream) -> Option<lanefs_core::msg::ToClient> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    loop {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).ok()?;
        let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
        s.read_exact(&mut body).ok()?;
        if let Wire::ToClient { message, .. } = lanefs_net::codec::decode(body).unwrap() {
            return Some(message);
        }
    }
}

/// I/O at an offset near 2^64 and a read of 1 TiB are answered with an
/// error. Before, the first panicked the OST's service thread, after which
/// no client of that OST was answered again.
#[test]
fn io_past_the_end_of_offsets_is_answered_with_an_error() {
    use lanefs_core::msg::{IoError, Payload, ToClient, ToOst};
    use lanefs_core::{ObjectId, Xid};
    let c = tcp_cluster();
    let mut s = std::net::TcpStream::connect(c.oss_address().unwrap()).unwrap();
    s.write_all(&hello(PROTOCOL_VERSION)).unwrap();
    let requests = [
        ToOst::Write { xid: Xid(1), object: ObjectId(5), offset: u64::MAX - 10, data: Payload::Bytes(vec![1; 100]) },
        ToOst::Read { xid: Xid(2), object: ObjectId(5), offset: u64::MAX - 10, len: 100 },
        ToOst::Read { xid: Xid(3), object: ObjectId(5), offset: 0, len: 1 << 40 },
    ];
    for message in requests {
        s.write_all(&frame(Wire::ToOst { ost: 0, message })).unwrap();
        let answer = next_ost_answer(&mut s).expect("the OST answers");
        let result = match answer {
            ToClient::WriteReply { result, .. } => result,
            ToClient::ReadReply { result, .. } => result.map(drop),
            other => panic!("answered {other:?}"),
        };
        assert_eq!(result, Err(IoError::Invalid));
    }
    still_serving(&c);
}
