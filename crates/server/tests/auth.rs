//! Authentication: on TCP only holders of the cluster's keys get in, and
//! only as what their key allows; on Unix sockets any local user gets in,
//! as itself unless it is the servers' own user or root (see identity.rs),
//! and clients trust only servers of their own user or root.

use lanefs_client::{Client, ClientOptions, NetError};
use lanefs_net::auth::{tls_failure, ClusterKey, TlsFailure};
use lanefs_net::keys::create_cluster_keys;
use lanefs_net::transport::{connect, Address};
use lanefs_proto::codec::encode;
use lanefs_proto::wire::{Role, Wire, MAGIC, PROTOCOL_VERSION};
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A TCP cluster whose client keys' root is root's: these tests are about
/// who gets in (what a client key's root is served as: identity.rs), and
/// they write in the root directory of whoever runs them.
fn tcp_cluster() -> LocalCluster {
    LocalCluster::start(LocalClusterConfig { osts: 2, unix_sockets: false, ..unsquashed() }).unwrap()
}

fn unsquashed() -> LocalClusterConfig {
    LocalClusterConfig { key_root_squash: lanefs_net::auth::KeyRootSquash::Off, ..Default::default() }
}

fn frame(m: Wire) -> Vec<u8> {
    let mut buf = Vec::new();
    encode(m, &mut buf).unwrap();
    buf
}

fn hello(role: Role) -> Vec<u8> {
    frame(Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Over TLS with `key`: send `bytes`, read until the server closes.
fn exchange_tls(address: &str, key: &ClusterKey, bytes: &[u8]) -> String {
    runtime().block_on(async {
        let mut s = connect(&Address::parse(address).unwrap(), Some(key)).await.unwrap();
        s.write_all(bytes).await.unwrap();
        s.flush().await.unwrap();
        let mut answer = Vec::new();
        let read = async {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = s.read(&mut buf).await {
                answer.extend_from_slice(&buf[..n]);
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.expect("the server answers and closes");
        String::from_utf8_lossy(&answer).into_owned()
    })
}

/// A client with `options` writes a file and reads it back.
fn works(mds: &str, options: ClientOptions) {
    let cl = Client::connect(mds, options).expect("a client with the key connects");
    let path = format!("/works-{}", std::process::id());
    let stripe = StripeSpec { count: Some(-1), ..StripeSpec::default() };
    let MdsReply::File(info) = cl
        .mds(MdsRequest::Create {
            path: path.clone(),
            stripe,
            mode: CreateMode::OpenOrCreate,
            access: Access::ReadWrite,
            permissions: 0o644,
        })
        .unwrap()
    else {
        panic!("create answered something else")
    };
    let f = cl.open_layout(&path, info.layout).unwrap();
    cl.pwrite(&f, 0, &vec![7u8; 3 << 20]).unwrap();
    cl.fsync(&f).unwrap();
    assert_eq!(cl.pread(&f, (1 << 20) - 1, 2).unwrap(), [7, 7]);
}

#[test]
fn a_tcp_cluster_refuses_a_client_without_a_key_and_says_how_to_give_one() {
    let c = tcp_cluster();
    let options = ClientOptions { connect_timeout: Duration::from_secs(5), ..Default::default() };
    let e = Client::connect(&c.mds_address(), options).err().expect("no key, no entry");
    let NetError::Refused { reason, .. } = &e else { panic!("refused by the server, not {e:?}") };
    assert!(reason.contains("--key") && reason.contains("LANEFS_KEY"), "{e}");
    works(&c.mds_address(), c.client_options());
}

/// A plaintext lanefs `Hello` (a client given no key, an older release)
/// gets one plaintext refusal that says what to do, from the MDS and the
/// OSS alike.
#[test]
fn a_plaintext_hello_to_a_tls_server_is_refused_in_plaintext() {
    let c = tcp_cluster();
    for address in [c.mds_address(), c.oss_address().unwrap()] {
        let mut s = std::net::TcpStream::connect(&address).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&hello(Role::Client)).unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).expect("the server answers and closes");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.contains("takes only TLS connections") && answer.contains("LANEFS_KEY"), "{address}: {answer}");
    }
}

#[test]
fn a_key_of_another_cluster_is_refused_on_both_sides() {
    let c = tcp_cluster();
    let dir = tempfile::tempdir().unwrap();
    let other = create_cluster_keys(&dir.path().join("other")).unwrap();
    let foreign = ClusterKey::load(&other.client).unwrap();
    // The client sees first that the server is not of its cluster.
    let options = ClientOptions { key: Some(foreign), ..Default::default() };
    let e = Client::connect(&c.mds_address(), options).err().expect("another cluster's key");
    assert!(matches!(e, NetError::Connect { .. }), "{e:?}");
    assert!(e.to_string().contains("not from the CA of the key") && e.to_string().contains("other"), "{e}");
    // A peer that trusts the server but shows another cluster's
    // certificate is refused by the server: unknown CA.
    let read = |path: &Path| std::fs::read(path).unwrap();
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let ours: Vec<CertificateDer> =
        CertificateDer::pem_slice_iter(&read(&c.key_files().unwrap().client)).map(Result::unwrap).collect();
    let theirs: Vec<CertificateDer> =
        CertificateDer::pem_slice_iter(&read(&other.client)).map(Result::unwrap).collect();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ours[1].clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![theirs[0].clone()], PrivateKeyDer::from_pem_slice(&read(&other.client)).unwrap())
        .unwrap();
    let answer = runtime().block_on(async {
        let tcp = tokio::net::TcpStream::connect(c.mds_address()).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("server.lanefs").unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
        tls.write_all(&hello(Role::Client)).await.unwrap();
        tls.flush().await.unwrap();
        let mut buf = [0u8; 256];
        tls.read(&mut buf).await.expect_err("the server ends the handshake")
    });
    let failure = tls_failure(&answer, &other.client).expect("a TLS failure");
    let TlsFailure::ByPeer(reason) = failure else { panic!("refused by the server: {failure:?}") };
    assert!(reason.contains("does not know the CA") && reason.contains("another cluster"), "{reason}");
    works(&c.mds_address(), c.client_options());
}

/// The rogue OSS: a client key claiming to be an OSS for every OST, at an
/// address where nothing serves, would have sent every client there. The
/// MDS refuses it, and clients keep reaching the real OSS.
#[test]
fn a_client_key_cannot_register_an_oss_or_serve() {
    let c = tcp_cluster();
    let client_key = c.client_key().unwrap().clone();
    let rogue = Role::Oss { address: "127.0.0.1:1".into(), osts: vec![0, 1] };
    let answer = exchange_tls(&c.mds_address(), &client_key, &hello(rogue.clone()));
    assert!(answer.contains("a client key may connect only as a client"), "{answer}");
    let answer = exchange_tls(&c.oss_address().unwrap(), &client_key, &hello(rogue));
    assert!(answer.contains("a client key may connect only as a client"), "{answer}");
    let cl = Client::connect(&c.mds_address(), c.client_options()).unwrap();
    let oss = c.oss_address().unwrap();
    assert!(cl.cluster().osts.iter().all(|(_, a)| *a == oss), "{:?}", cl.cluster());
    works(&c.mds_address(), c.client_options());
    // Nor can it serve: no TCP listener takes a client key, and a server
    // that shows its certificate is not trusted by clients.
    let e = runtime()
        .block_on(lanefs_server::oss::start(
            &Address::Tcp("127.0.0.1:0".into()),
            Some(&client_key),
            lanefs_server::oss::OssConfig {
                data_dir: tempfile::tempdir().unwrap().path().into(),
                osts: vec![0],
                ost: Default::default(),
                export_timeout: lanefs_server::oss::EXPORT_TIMEOUT_DEFAULT,
                limits: Default::default(),
                faults: Default::default(),
                memory_stores: Default::default(),
            },
        ))
        .err()
        .expect("a client key cannot serve");
    assert!(e.to_string().contains("is a client key"), "{e}");
    let address = rogue_server(c.key_files().unwrap().client.as_path());
    let e = Client::connect(&address, c.client_options()).err().expect("a client-key server is not trusted");
    assert!(e.to_string().contains("not a lanefs server's"), "{e}");
}

/// A TLS server on loopback showing the certificate of the client key at
/// `key` (which `Listener` would refuse): it accepts one connection.
fn rogue_server(key: &Path) -> String {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pem = std::fs::read(key).unwrap();
    let certs: Vec<CertificateDer> = CertificateDer::pem_slice_iter(&pem).map(Result::unwrap).collect();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certs[0].clone()], PrivateKeyDer::from_pem_slice(&pem).unwrap())
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        runtime().block_on(async move {
            listener.set_nonblocking(true).unwrap();
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            let _ = tokio_rustls::TlsAcceptor::from(Arc::new(config)).accept(tcp).await;
        })
    });
    address
}

#[test]
fn a_tcp_cluster_makes_owner_only_keys_and_refuses_an_open_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fs");
    let config = LocalClusterConfig { osts: 1, unix_sockets: false, data_dir: Some(data.clone()), ..unsquashed() };
    let c = LocalCluster::start(config.clone()).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let files = c.key_files().unwrap().clone();
    assert_eq!(mode(&data), 0o711);
    assert_eq!(mode(&data.join("keys")), 0o700);
    for f in [&files.ca, &files.server, &files.client, &files.admin] {
        assert_eq!(mode(f), 0o600, "{}", f.display());
    }
    drop(c);
    // A restart keeps the keys: a client key handed out stays good.
    let c = LocalCluster::start(config).unwrap();
    let kept = ClusterKey::load(&files.client).unwrap();
    works(&c.mds_address(), ClientOptions { key: Some(kept), ..Default::default() });
    std::fs::set_permissions(&files.client, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = ClusterKey::load(&files.client).unwrap_err().to_string();
    assert!(e.contains("chmod 600") && e.contains(&files.client.display().to_string()), "{e}");
}

/// Data files are owner-only; the data directory lets others pass through
/// to the sockets only, which any local user may connect to (as itself).
#[test]
fn data_files_are_owner_only_and_sockets_open_to_local_users() {
    let c = LocalCluster::start(LocalClusterConfig { osts: 1, ..Default::default() }).unwrap();
    works(&c.mds_address(), ClientOptions::default());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = c.data_dir();
    assert_eq!(mode(dir), 0o711);
    for name in ["mds.sock", "oss.sock", "mds.db", "mds.db-wal", "OST0000", "OST0000/objects"] {
        let expected = match name {
            "mds.sock" | "oss.sock" => 0o666,
            _ if name.starts_with("OST") => 0o700,
            _ => 0o600,
        };
        assert_eq!(mode(&dir.join(name)), expected, "{name}");
    }
    let objects: Vec<_> = std::fs::read_dir(dir.join("OST0000/objects")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!objects.is_empty());
    for object in objects {
        assert_eq!(mode(&object), 0o600, "{}", object.display());
    }
    assert!(c.key_files().is_none(), "no keys on Unix sockets");
}

/// The uid `nobody` has on Debian.
const NOBODY: u32 = 65534;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn sockaddr(path: &Path) -> libc::sockaddr_un {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    assert!(bytes.len() < addr.sun_path.len());
    for (to, from) in addr.sun_path.iter_mut().zip(bytes) {
        *to = *from as libc::c_char;
    }
    addr
}

/// Run `child` in a forked process as `nobody`, its result sent back through
/// a pipe: its exit code and what it wrote. The child makes system calls
/// only (no allocation: the test process has other threads).
fn as_nobody(child: impl FnOnce(libc::c_int) -> libc::c_int) -> (i32, Vec<u8>) {
    let mut fds = [0; 2];
    // SAFETY: pipe, fork, setgid, setuid, _exit, waitpid as documented;
    // the child runs `child` (system calls only) and exits.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            libc::close(fds[0]);
            if libc::setgid(NOBODY) != 0 || libc::setuid(NOBODY) != 0 {
                libc::_exit(99);
            }
            libc::_exit(child(fds[1]));
        }
        libc::close(fds[1]);
        let mut out = Vec::new();
        let mut pipe = std::fs::File::from(std::os::fd::OwnedFd::from_raw_fd(fds[0]));
        pipe.read_to_end(&mut out).unwrap();
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
        (libc::WEXITSTATUS(status), out)
    }
}
/// As nobody: connect to the socket at `addr`; on success send `hello` and
/// copy the answer to `out` until the server says nothing for a second.
/// Exit 0 when connected, else 10 + errno.
fn connect_and_say(addr: &libc::sockaddr_un, hello: &[u8], out: libc::c_int) -> libc::c_int {
    // SAFETY: system calls on descriptors this function owns, with buffers
    // that outlive the calls.
    unsafe {
        let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::connect(s, addr as *const _ as *const libc::sockaddr, len) != 0 {
            return 10 + *libc::__errno_location();
        }
        let second = libc::timeval { tv_sec: 1, tv_usec: 0 };
        let size = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
        libc::setsockopt(s, libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&second as *const libc::timeval).cast(), size);
        libc::write(s, hello.as_ptr().cast(), hello.len());
        let mut buf = [0u8; 512];
        loop {
            let n = libc::read(s, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                return 0;
            }
            libc::write(out, buf.as_ptr().cast(), n as usize);
        }
    }
}

/// Another user reaches the servers' sockets (a data directory the
/// cluster made lets it through to them), and the MDS serves it as itself
/// only: a request it makes as root is refused, saying who it is.
#[test]
fn another_user_reaches_a_unix_socket_server_as_itself_only() {
    if !root() {
        eprintln!("skipped: needs root to become another user (the uid check itself is tested in auth.rs)");
        return;
    }
    let c = LocalCluster::start(LocalClusterConfig { osts: 1, ..Default::default() }).unwrap();
    let call = lanefs_proto::wire::MdsCall::Namespace {
        credentials: lanefs_proto::Credentials::ROOT,
        request: MdsRequest::Mkdir { path: "/mine".into(), permissions: 0o755 },
    };
    let said = [hello(Role::Client), frame(Wire::Mds { id: 1, call })].concat();
    let addr = sockaddr(&c.data_dir().join("mds.sock"));
    let (code, answer) = as_nobody(|out| connect_and_say(&addr, &said, out));
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(code, 0, "connected");
    assert!(!answer.contains("may not connect"), "{answer:?}");
    assert!(answer.contains("a request as uid 0"), "refused (EPERM): {answer:?}");
    assert!(answer.contains(&format!("runs as uid {NOBODY} gid {NOBODY}")), "{answer:?}");
    works(&c.mds_address(), ClientOptions::default());
}

/// A client does not trust a server on a Unix socket run by another user.
#[test]
fn a_client_refuses_a_unix_socket_server_of_another_user() {
    if !root() {
        eprintln!("skipped: needs root to become another user (the uid check itself is tested in auth.rs)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let path = dir.path().join("mds.sock");
    let addr = sockaddr(&path);
    let listening = path.clone();
    let server = std::thread::spawn(move || {
        as_nobody(|out| {
            // SAFETY: system calls on descriptors this closure owns.
            unsafe {
                let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
                let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
                if libc::bind(s, &addr as *const _ as *const libc::sockaddr, len) != 0 || libc::listen(s, 4) != 0 {
                    return 1;
                }
                let c = libc::accept(s, std::ptr::null_mut(), std::ptr::null_mut());
                let mut buf = [0u8; 64];
                loop {
                    let n = libc::read(c, buf.as_mut_ptr().cast(), buf.len());
                    if n <= 0 {
                        return if c < 0 { 2 } else { 0 };
                    }
                    libc::write(out, buf.as_ptr().cast(), n as usize);
                }
            }
        })
    });
    let started = std::time::Instant::now();
    while !listening.exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "the server never listened");
        std::thread::sleep(Duration::from_millis(5));
    }
    let options = ClientOptions { connect_timeout: Duration::from_secs(5), ..Default::default() };
    let e = Client::connect(&format!("unix:{}", path.display()), options).err().expect("not trusted");
    assert!(e.to_string().contains(&format!("runs as uid {NOBODY}")) && e.to_string().contains("not trusting"), "{e}");
    let (code, said) = server.join().unwrap();
    assert_eq!(code, 0, "the server accepted the connection");
    assert!(said.is_empty(), "the client sent nothing to a server it does not trust: {said:?}");
}
