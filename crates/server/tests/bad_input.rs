//! Malformed and hostile input on the wire: every bad peer gets a reason
//! and a closed connection, and the servers keep serving everyone else.

use lanefs_client::{Client, ClientOptions};
use lanefs_net::auth::ClusterKey;
use lanefs_net::transport::{connect, Address};
use lanefs_proto::codec::{encode, read_frame, FRAME_BYTES_MAX};
use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A TCP cluster whose client keys' root is root's: these tests write in
/// the root directory of whoever runs them (root, often), as a node would.
fn tcp_cluster() -> LocalCluster {
    let key_root_squash = lanefs_net::auth::KeyRootSquash::Off;
    LocalCluster::start(LocalClusterConfig { osts: 1, unix_sockets: false, key_root_squash, ..Default::default() })
        .unwrap()
}

/// Send raw bytes (over TLS with the cluster's client key), then read
/// until the server closes; return what it said. With `hang_up`, close
/// right after sending instead and return nothing.
fn send(c: &LocalCluster, address: &str, bytes: &[u8], hang_up: bool) -> String {
    send_with(c.client_key(), address, bytes, hang_up)
}

fn send_with(key: Option<&ClusterKey>, address: &str, bytes: &[u8], hang_up: bool) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut s = connect(&Address::parse(address).unwrap(), key).await.unwrap();
        s.write_all(bytes).await.unwrap();
        s.flush().await.unwrap();
        let mut answer = Vec::new();
        if hang_up {
            return String::new();
        }
        let read = async {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = s.read(&mut buf).await {
                answer.extend_from_slice(&buf[..n]);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("the server closes the connection instead of hanging");
        String::from_utf8_lossy(&answer).into_owned()
    })
}

fn exchange(c: &LocalCluster, address: &str, bytes: &[u8]) -> String {
    send(c, address, bytes, false)
}

/// [`exchange`] as a server (with the cluster's server key).
fn exchange_as_server(c: &LocalCluster, address: &str, bytes: &[u8]) -> String {
    let key = ClusterKey::load(&c.key_files().expect("a TCP cluster").server).unwrap();
    send_with(Some(&key), address, bytes, false)
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
    let cl = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let path = format!("/ok-{}", std::process::id());
    let stripe = StripeSpec::default();
    let create = MdsRequest::Create {
        path: path.clone(),
        stripe,
        mode: CreateMode::OpenOrCreate,
        access: Access::ReadWrite,
        permissions: 0o644,
    };
    let MdsReply::File(info) = cl.mds(create).unwrap() else { panic!("create answered something else") };
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
            let answer = exchange(&c, address, bytes);
            assert!(answer.contains(reason), "{name} at {address}: answer {answer:?} lacks {reason:?}");
        }
    }
    // After a good handshake: a message for an OST this OSS does not serve,
    // and a header that does not decode.
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend(frame(Wire::ToOst { ost: 0, message: lanefs_core::msg::ToOst::Connect { resume: None } }));
    assert!(exchange(&c, &oss, &bytes).contains("names itself (Session) before its first request"));
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend(frame(Wire::Session { uuid: 7 }));
    bytes.extend(frame(Wire::ToOst { ost: 9, message: lanefs_core::msg::ToOst::Connect { resume: None } }));
    assert!(exchange(&c, &oss, &bytes).contains("does not serve OST index 9"));
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend_from_slice(&12u32.to_le_bytes());
    bytes.extend_from_slice(&8u32.to_le_bytes());
    bytes.extend_from_slice(&[0xff; 8]);
    assert!(exchange(&c, &oss, &bytes).contains("undecodable frame header"));
    // A truncated frame followed by a hang-up must not wedge the server.
    let mut bytes = hello(PROTOCOL_VERSION);
    bytes.extend_from_slice(&1000u32.to_le_bytes());
    bytes.extend_from_slice(&[1, 2, 3]);
    send(&c, &oss, &bytes, true);
    still_serving(&c);
}

/// Connect to the OSS's Unix socket at `path`, shake hands, then send
/// `steps` (with a descriptor where given) and read until the answer holds
/// `expected`, the server closes, or 10 seconds pass.
async fn session(path: &str, steps: Vec<(Wire, Option<&std::fs::File>)>, expected: &str) -> String {
    use lanefs_net::shm::send_frame_with_fd;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = tokio::net::UnixStream::connect(path).await.unwrap();
    let mut s = lanefs_net::unix_stream::QuietUnixStream::new(s).unwrap();
    s.write_all(&hello(PROTOCOL_VERSION)).await.unwrap();
    s.write_all(&frame(Wire::Session { uuid: 7 })).await.unwrap();
    for (m, fd) in steps {
        match fd {
            Some(f) => send_frame_with_fd(&mut s, &frame(m), std::os::fd::AsFd::as_fd(f)).await.unwrap(),
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
    use lanefs_net::shm::create_arena;
    use lanefs_proto::wire::SharedBulk;
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
    // A refused connection is tried again for the reconnect timeout (an
    // MDS may be restarting), then named.
    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        reconnect_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let err = Client::connect(&address, options).err().expect("nothing listens there");
    assert!(err.to_string().contains(&address), "{err}");
    let err = Client::connect("not-an-address", ClientOptions::default()).err().unwrap();
    assert!(err.to_string().contains("HOST:PORT"), "{err}");
}

/// Objects are the MDS's to create and destroy: on a client's connection
/// an OSS refuses `Destroy` and `Precreate`, and the object stays. An MDS
/// refuses a peer claiming to be another MDS.
#[test]
fn only_the_mds_may_destroy_or_create_objects() {
    let c = tcp_cluster();
    let cl = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let create = MdsRequest::Create {
        path: "/kept".into(),
        stripe: StripeSpec::default(),
        mode: CreateMode::Exclusive,
        access: Access::Write,
        permissions: 0o644,
    };
    let MdsReply::File(info) = cl.mds(create).unwrap() else { panic!("create answered something else") };
    let f = cl.open_layout("/kept", info.layout.clone()).unwrap();
    cl.pwrite(&f, 0, b"precious").unwrap();
    cl.fsync(&f).unwrap();
    let key = info.layout.objects()[0];
    let object_file = c.data_dir().join(format!("OST{:04x}/objects/{}", key.ost.0, key.object.0));
    let oss = c.oss_address().unwrap();
    let last_id = c.data_dir().join(format!("OST{:04x}/LAST_ID", key.ost.0));
    let last_id_before = std::fs::read_to_string(&last_id).unwrap();
    let attempts = [
        Wire::Destroy { id: 1, ost: key.ost.0, objects: vec![key.object.0] },
        Wire::Precreate { id: 2, ost: key.ost.0, last_id: 1_000_000 },
    ];
    for attempt in attempts {
        let mut bytes = hello(PROTOCOL_VERSION);
        bytes.extend(frame(attempt));
        let answer = exchange(&c, &oss, &bytes);
        assert!(answer.contains("only the MDS may create or destroy objects"), "{answer:?}");
    }
    assert!(object_file.exists(), "the object was not destroyed");
    assert_eq!(std::fs::read_to_string(&last_id).unwrap(), last_id_before, "nothing was created");
    assert_eq!(cl.pread(&f, 0, 8).unwrap(), b"precious");
    let mds = frame(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Mds });
    assert!(exchange_as_server(&c, &c.mds_address(), &mds).contains("not another MDS"));
    let role = Role::Oss { address: "127.0.0.1:1".into(), osts: vec![0, 7] };
    let stray = frame(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role });
    let answer = exchange_as_server(&c, &c.mds_address(), &stray);
    assert!(answer.contains("OST index 7 is out of range: this file system has 1 OSTs"), "{answer:?}");
    still_serving(&c);
}

/// I/O at an offset near 2^64 and a read of 1 TiB are answered with an
/// error. Before, the first panicked the OST's service thread, after which
/// no client of that OST was answered again.
#[test]
fn io_past_the_end_of_offsets_is_answered_with_an_error() {
    use lanefs_core::msg::{IoError, Payload, ToClient, ToOst};
    use lanefs_core::{ObjectId, Xid};
    let c = tcp_cluster();
    let oss = Address::parse(&c.oss_address().unwrap()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut s = connect(&oss, c.client_key()).await.unwrap();
        let mut bytes = hello(PROTOCOL_VERSION);
        bytes.extend(frame(Wire::Session { uuid: 77 }));
        bytes.extend(frame(Wire::ToOst { ost: 0, message: ToOst::Connect { resume: None } }));
        s.write_all(&bytes).await.unwrap();
        let requests = [
            ToOst::Write {
                xid: Xid(1),
                object: ObjectId(5),
                offset: u64::MAX - 10,
                data: Payload::Bytes(vec![1; 100]),
            },
            ToOst::Read { xid: Xid(2), object: ObjectId(5), offset: u64::MAX - 10, len: 100 },
            ToOst::Read { xid: Xid(3), object: ObjectId(5), offset: 0, len: 1 << 40 },
        ];
        for message in requests {
            s.write_all(&frame(Wire::ToOst { ost: 0, message })).await.unwrap();
            s.flush().await.unwrap();
            // The first answer to a request (the handshake's are skipped).
            let answer = loop {
                let read = tokio::time::timeout(Duration::from_secs(10), read_frame(&mut s)).await;
                match read.expect("the OST answers within 10 s").expect("a well-formed frame") {
                    Some(Wire::ToClient { message, .. }) if message.reply_xid().is_some() => break message,
                    Some(_) => continue,
                    None => panic!("the OSS closed the connection"),
                }
            };
            let result = match answer {
                ToClient::WriteReply { result, .. } => result,
                ToClient::ReadReply { result, .. } => result.map(drop),
                other => panic!("answered {other:?}"),
            };
            assert_eq!(result, Err(IoError::Invalid));
        }
    });
    still_serving(&c);
}
