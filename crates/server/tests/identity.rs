//! Who a peer is: on a Unix socket, the kernel names the peer, and a local
//! user who is neither root nor the servers' own user acts only as itself
//! and is no node (no object I/O); on TCP, a client key's root is squashed
//! and an admin key's is not.
//!
//! The local-user tests need root, to connect as another uid: they connect
//! from a thread whose credentials alone are changed (the raw `setresuid`
//! and `setresgid` system calls change the calling thread's only), and skip
//! with a message when not run as root.

use lanefs_client::{Client, ClientOptions};
use lanefs_proto::codec::{read_frame, write_frame};
use lanefs_proto::wire::{MdsAnswer, MdsCall, Role, Wire, MAGIC, PROTOCOL_VERSION};
use lanefs_proto::{Credentials, MdsError, MdsReply, MdsRequest};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::time::Duration;
use tokio::net::UnixStream;

/// The uid and gid the tests act as: no user of the system needs to exist
/// for the kernel to name a process by them.
const USER: u32 = 4242;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("skipped: connecting as another user needs root");
    }
    root
}

fn unix_cluster() -> LocalCluster {
    LocalCluster::start(LocalClusterConfig { osts: 2, ..Default::default() }).unwrap()
}

/// A Unix-socket connection to `address` made by uid and gid `USER`, with
/// no supplementary groups: connected on a thread of its own whose
/// credentials alone are changed, then handed back.
fn connect_as_user(address: &str) -> std::os::unix::net::UnixStream {
    let path = address.strip_prefix("unix:").expect("a Unix socket address").to_string();
    std::thread::spawn(move || {
        // SAFETY: the raw system calls change this thread's credentials
        // only (glibc's wrappers would change every thread's); the thread
        // ends right after connecting.
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()), 0);
            assert_eq!(libc::syscall(libc::SYS_setresgid, USER, USER, USER), 0);
            assert_eq!(libc::syscall(libc::SYS_setresuid, USER, USER, USER), 0);
        }
        std::os::unix::net::UnixStream::connect(path).expect("any local user may connect")
    })
    .join()
    .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Connected as `USER` and past the handshake, as a client.
async fn client_as_user(address: &str) -> UnixStream {
    let stream = connect_as_user(address);
    stream.set_nonblocking(true).unwrap();
    let mut s = UnixStream::from_std(stream).unwrap();
    let hello = Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client };
    write_frame(&mut s, hello).await.unwrap();
    match next(&mut s).await {
        Some(Wire::Welcome { .. }) => s,
        other => panic!("a local user is welcome as a client, not answered {other:?}"),
    }
}

async fn next(s: &mut UnixStream) -> Option<Wire> {
    tokio::time::timeout(Duration::from_secs(10), read_frame(s)).await.expect("an answer in time").unwrap()
}

/// A namespace request as `credentials` on `s`: its reply.
async fn namespace(s: &mut UnixStream, credentials: Credentials, request: MdsRequest) -> MdsReply {
    let id = 7;
    write_frame(s, Wire::Mds { id, call: MdsCall::Namespace { credentials, request } }).await.unwrap();
    match next(s).await {
        Some(Wire::MdsReply { id: 7, answer: MdsAnswer::Namespace(reply) }) => reply,
        other => panic!("a namespace reply, not {other:?}"),
    }
}

fn eperm(reply: MdsReply) -> String {
    match reply {
        MdsReply::Error(e @ MdsError::NotPermitted { .. }) => e.to_string(),
        other => panic!("refused with EPERM, not answered {other:?}"),
    }
}

/// A user's directory, made by root: `/u` owned by `USER`.
fn home_of_user(c: &LocalCluster) {
    let cl = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    cl.mds(MdsRequest::Mkdir { path: "/u".into(), permissions: 0o755 }).unwrap();
    cl.mds(MdsRequest::SetAttr { path: "/u".into(), permissions: None, uid: Some(USER), gid: Some(USER) }).unwrap();
}

#[test]
fn a_local_user_claiming_another_uid_is_refused_and_acts_as_itself() {
    if !root() {
        return;
    }
    let c = unix_cluster();
    home_of_user(&c);
    runtime().block_on(async {
        let mut s = client_as_user(&c.mds_address()).await;
        for claimed in [Credentials::ROOT, Credentials::user(USER + 1, USER)] {
            let mkdir = MdsRequest::Mkdir { path: "/u/not-mine".into(), permissions: 0o755 };
            let e = eperm(namespace(&mut s, claimed.clone(), mkdir).await);
            assert!(e.contains(&format!("a request as uid {}", claimed.uid)), "{e}");
            assert!(e.contains(&format!("runs as uid {USER} gid {USER}")) && e.contains("acts only as itself"), "{e}");
        }
        let e = eperm(namespace(&mut s, Credentials::user(USER, 0), MdsRequest::Statfs).await);
        assert!(e.contains("a request as gid 0"), "{e}");
        // As itself: served, with its own permissions.
        let me = Credentials::user(USER, USER);
        let mkdir = MdsRequest::Mkdir { path: "/u/mine".into(), permissions: 0o755 };
        let reply = namespace(&mut s, me.clone(), mkdir).await;
        assert!(!matches!(reply, MdsReply::Error(_)), "its own directory: {reply:?}");
        let at_root = MdsRequest::Mkdir { path: "/theirs".into(), permissions: 0o755 };
        let reply = namespace(&mut s, me.clone(), at_root).await;
        assert!(matches!(reply, MdsReply::Error(MdsError::PermissionDenied { uid: USER, .. })), "{reply:?}");
        let MdsReply::Attr(attr) = namespace(&mut s, me.clone(), MdsRequest::Stat { path: "/u/mine".into() }).await
        else {
            panic!("its directory's attributes")
        };
        assert_eq!((attr.uid, attr.gid), (USER, USER));
        let node = lanefs_proto::Node::Path("/u/mine".into());
        let set = MdsRequest::SetXattr {
            node: node.clone(),
            name: "user.a".into(),
            value: b"mine".to_vec(),
            how: lanefs_proto::XattrHow::Either,
        };
        assert_eq!(namespace(&mut s, me.clone(), set).await, MdsReply::Ok, "its own attribute, by path");
        let trusted = MdsRequest::SetXattr {
            node,
            name: "trusted.a".into(),
            value: b"root's?".to_vec(),
            how: lanefs_proto::XattrHow::Either,
        };
        let e = eperm(namespace(&mut s, me.clone(), trusted).await);
        assert!(e.contains("trusted. attributes are root's"), "{e}");
        // Naming an inode by fid skips the walk's search permissions: for
        // nodes only, even of the user's own inode.
        for request in [
            MdsRequest::StatFid { fid: attr.fid },
            MdsRequest::ReaddirFid { fid: lanefs_proto::Fid::ROOT, cursor: None },
            MdsRequest::LinkFid { fid: attr.fid, to: "/u/again".into() },
            MdsRequest::GetXattr { node: lanefs_proto::Node::Fid(attr.fid), name: "user.a".into() },
        ] {
            let e = eperm(namespace(&mut s, me.clone(), request).await);
            assert!(e.contains("by fid") && e.contains("by path instead"), "{e}");
        }
    });
}

/// A local user is no node: the MDS takes no open files or file locks
/// from it, the OSS its statistics only.
#[test]
fn a_local_user_reads_statistics_but_no_objects() {
    if !root() {
        return;
    }
    let c = unix_cluster();
    runtime().block_on(async {
        let mut s = client_as_user(&c.mds_address()).await;
        write_frame(&mut s, Wire::Mds { id: 1, call: MdsCall::Opened { fid: lanefs_proto::Fid(1) } }).await.unwrap();
        match next(&mut s).await {
            Some(Wire::MdsReply { id: 1, answer: MdsAnswer::Error(e) }) => {
                assert_eq!(e, lanefs_proto::wire::MdsRefusal::NotANode);
                let e = e.to_string();
                assert!(e.contains("a mount's") && e.contains("not a node's"), "{e}")
            }
            other => panic!("an open file refused, not {other:?}"),
        }
        let mut s = client_as_user(&c.oss_address().unwrap()).await;
        write_frame(&mut s, Wire::Session { uuid: 99 }).await.unwrap();
        write_frame(&mut s, Wire::StatsRequest { id: 3 }).await.unwrap();
        match next(&mut s).await {
            Some(Wire::StatsReply { id: 3, osts }) => assert_eq!(osts.len(), 2),
            other => panic!("statistics, not {other:?}"),
        }
        let connect = lanefs_core::msg::ToOst::Connect { resume: None };
        write_frame(&mut s, Wire::ToOst { ost: 0, message: connect }).await.unwrap();
        match next(&mut s).await {
            Some(Wire::NotANode) => {
                let reason = lanefs_proto::wire::USER_NOT_A_NODE;
                assert!(reason.contains("not a node's") && reason.contains("lanefs mount"), "{reason}")
            }
            other => panic!("object I/O refused, not {other:?}"),
        }
        assert_eq!(next(&mut s).await, None, "the connection closes after the refusal");
    });
    // A node (this root process) still does it all.
    let cl = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let create = MdsRequest::Create {
        path: "/f".into(),
        stripe: lanefs_proto::StripeSpec::default(),
        mode: lanefs_proto::CreateMode::OpenOrCreate,
        access: lanefs_proto::Access::ReadWrite,
        permissions: 0o644,
    };
    let MdsReply::File(info) = cl.mds(create).unwrap() else { panic!("a file") };
    let f = cl.open_layout("/f", info.layout).unwrap();
    cl.pwrite(&f, 0, b"node").unwrap();
    assert_eq!(cl.pread(&f, 0, 4).unwrap(), b"node");
}

/// Each local user holds a bounded number of connections to a server.
#[test]
fn a_local_user_holds_a_bounded_number_of_connections() {
    if !root() {
        return;
    }
    let c = unix_cluster();
    runtime().block_on(async {
        let mut held = Vec::new();
        for _ in 0..lanefs_net::limits::LOCAL_USER_CONNECTIONS_MAX {
            held.push(client_as_user(&c.mds_address()).await);
        }
        let stream = connect_as_user(&c.mds_address());
        stream.set_nonblocking(true).unwrap();
        let mut s = UnixStream::from_std(stream).unwrap();
        let hello = Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Client };
        write_frame(&mut s, hello).await.unwrap();
        match next(&mut s).await {
            Some(Wire::Refused { reason }) => assert!(reason.contains("the most one local user may hold"), "{reason}"),
            other => panic!("refused past the bound, not {other:?}"),
        }
        // Nodes are not held back by it.
        Client::connect(&c.mds_address(), c.client_options()).unwrap();
        held.pop();
        tokio::time::sleep(Duration::from_millis(200)).await;
        client_as_user(&c.mds_address()).await;
    });
}

/// Over TCP, uid 0 of a client key is served as 65534:65534 by default;
/// an admin key's is root's.
#[test]
fn a_client_keys_root_is_squashed_and_an_admin_keys_is_not() {
    let c = LocalCluster::start(LocalClusterConfig { osts: 1, unix_sockets: false, ..Default::default() }).unwrap();
    let admin = Client::connect(&c.mds_address(), c.admin_options()).unwrap();
    let client = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let root = Credentials::ROOT;
    admin.mds_as(&root, MdsRequest::Mkdir { path: "/open".into(), permissions: 0o777 }).unwrap();
    client.mds_as(&root, MdsRequest::Mkdir { path: "/open/by-client".into(), permissions: 0o755 }).unwrap();
    admin.mds_as(&root, MdsRequest::Mkdir { path: "/open/by-admin".into(), permissions: 0o755 }).unwrap();
    let owner = |path: &str| match admin.mds_as(&root, MdsRequest::Stat { path: path.into() }).unwrap() {
        MdsReply::Attr(attr) => (attr.uid, attr.gid),
        other => panic!("attributes, not {other:?}"),
    };
    assert_eq!(owner("/open/by-client"), (65534, 65534), "a client key's root is squashed");
    assert_eq!(owner("/open/by-admin"), (0, 0), "an admin key's root is root");
    // Squashed root has no bypass: root's own directory is closed to it.
    let e = client.mds_as(&root, MdsRequest::Mkdir { path: "/open/by-admin/x".into(), permissions: 0o755 });
    assert!(e.unwrap_err().to_string().contains("uid 65534 lacks"), "squashed root has no bypass");
    // Other uids are a client key's to claim, as on a Lustre client node.
    let user = Credentials::user(1000, 1000);
    client.mds_as(&user, MdsRequest::Mkdir { path: "/open/by-user".into(), permissions: 0o755 }).unwrap();
    assert_eq!(owner("/open/by-user"), (1000, 1000));
}

/// The squash can be set elsewhere, or off.
#[test]
fn a_client_keys_root_squash_is_the_clusters_choice() {
    use lanefs_net::auth::KeyRootSquash;
    let squash = KeyRootSquash::Squash(lanefs_proto::Owner { uid: 7, gid: 8 });
    for (key_root_squash, expected) in [(squash, (7, 8)), (KeyRootSquash::Off, (0, 0))] {
        let config = LocalClusterConfig { osts: 1, unix_sockets: false, key_root_squash, ..Default::default() };
        let c = LocalCluster::start(config).unwrap();
        let admin = Client::connect(&c.mds_address(), c.admin_options()).unwrap();
        let client = Client::connect(&c.mds_address(), ClientOptions { ..c.client_options() }).unwrap();
        let root = Credentials::ROOT;
        admin.mds_as(&root, MdsRequest::Mkdir { path: "/open".into(), permissions: 0o777 }).unwrap();
        client.mds_as(&root, MdsRequest::Mkdir { path: "/open/d".into(), permissions: 0o755 }).unwrap();
        let MdsReply::Attr(attr) = admin.mds_as(&root, MdsRequest::Stat { path: "/open/d".into() }).unwrap() else {
            panic!("attributes")
        };
        assert_eq!((attr.uid, attr.gid), expected, "{key_root_squash:?}");
    }
}
