//! Authentication between nodes: who may connect as what, and where that
//! is checked.
//!
//! | peer | how the server knows it | may claim in `Hello` | acts as, toward the MDS |
//! | --- | --- | --- | --- |
//! | a holder of the cluster's server key | TCP: its TLS certificate names `server.lanefs` | any role (`Client`, `Oss`, and roles servers take toward each other) | any uid |
//! | a holder of an admin key | TCP: its TLS certificate names `admin.lanefs` | `Client` only | any uid |
//! | a holder of a client key | TCP: its TLS certificate names `client.lanefs` | `Client` only | any uid, uid 0 squashed ([`KeyRootSquash`], on by default) |
//! | the servers' own user, or root | Unix socket: the kernel's `SO_PEERCRED` | any role | any uid |
//! | any other local user | Unix socket: the kernel's `SO_PEERCRED` (groups from `/proc/PID/status`) | `Client` only | itself only ([`served_credentials`]) |
//! | anyone else | | nothing: refused before `Hello` (TCP without a key of the cluster) | |
//!
//! Nodes and users. Every peer but a local user of another uid is a
//! *node* ([`Peer::is_node`]): a mount, an OSS, an MDS, a tool holding a
//! key. A node acts for its users, as a Lustre client node does: the MDS
//! serves each namespace request as the credentials it carries. A local
//! user is the process itself: the MDS serves it as the uid, gid and
//! groups the kernel gives for it, and refuses (`EPERM`) a request that
//! claims anyone else. A user is not a node either toward the OSS: it may
//! read the OSTs' statistics (what `lanefs df` needs) but not read or
//! write objects, take locks or give cache advice on them (a mount does
//! that for it), and toward the MDS it may not record open files or take
//! file locks (a mount's messages). Lustre has no such peer: every
//! process reaches Lustre through its node's client, and only nodes talk
//! to servers; lanefs lets a local user's commands (`lanefs mkdir`,
//! `setstripe`, `getstripe`, `df`, `ls`) reach the servers directly, as
//! itself.
//!
//! Root over TCP. What uids a key may act as is the cluster's policy,
//! Lustre's nodemap reduced to two kinds of client keys: a client key's
//! requests as uid 0 are served as the squash user and group (65534:65534
//! unless the MDS is told otherwise, `--key-root-squash`), an admin key's
//! are root's (Lustre: a node in a nodemap with `admin=1`). Lustre's
//! nodemap maps by the client's network address (NID ranges) and can map
//! every uid, not only root; lanefs maps by key, only root, and has no
//! `trusted` property: any key may claim any other uid, as a Lustre node
//! of a `trusted` nodemap can. The MDS's own `--root-squash` (Lustre's
//! `root_squash`) squashes every peer's root, nodes included.
//!
//! The checks, in order:
//!
//! 1. Before a server reads a byte (`Incoming::authenticate` in
//!    [`crate::transport`]): on TCP, the TLS 1.3 handshake (rustls, ring
//!    provider), in which the server demands a certificate that chains to
//!    the cluster CA ([`crate::keys`]) and the client demands that the
//!    server's is a *server* certificate of its cluster, whatever address
//!    it dialled, so a client-key holder cannot pose as an MDS or OSS; on a
//!    Unix socket, the peer's uid ([`local_peer_allowed`]), checked by the
//!    server and by the client alike (a server admits any local uid, see
//!    [`local_peer`]; a client trusts only a server of its own uid or root).
//! 2. In the handshake (`handshake` in [`crate::transport`], which the MDS uses
//!    too): the role the peer claims against what its credentials allow,
//!    [`claim_allowed`], the one place that decides it. A client key that
//!    claims to be an OSS (and would make the MDS send every client to an
//!    address of its choosing) is refused there.
//!
//! A connection that fails gets one clear refusal: a plaintext lanefs
//! `Hello` on a TCP server (a client given no key, or an older release) is
//! answered with a plaintext `Refused` that says to give `--key` or
//! `LANEFS_KEY`; a failed TLS handshake ends with the TLS alert, which the
//! client turns into words ([`tls_failure`]): a key of another cluster, a
//! peer whose certificate is not a server's, a server that speaks no TLS.
//!
//! Why no TLS on Unix sockets: a Unix socket's peer is a process on this
//! host, and the kernel tells each end the other's uid (`SO_PEERCRED`, set
//! at `connect` and `listen`, not forgeable by the peer). The socket file
//! may be reached by any local user, and the kernel names each one to the
//! server: the server's own user and root are nodes, anyone else acts as
//! itself only; and the client trusts only a server running as itself or
//! root (who could read the data directory anyway), which is all a key
//! could prove. Bulk data
//! there goes through shared memory ([`crate::shm`]); encrypting what the
//! kernel already keeps between the two would only cost time.
//!
//! The cost, measured on one 2-core host (`lanefs up --tcp`, 4 ranks,
//! file per process, 1 MiB transfers): a GiB written over TCP takes about
//! 0.7 CPU seconds more across clients and servers (1.4 to 2.1), a GiB read
//! about 0.5 more (1.3 to 1.8): encryption, decryption and rustls's copies
//! of each byte. Unix sockets pay nothing.
//!
//! What this is not: over TCP it authenticates nodes, not users. Lustre
//! authenticates nodes with Kerberos or shared-secret keys (`lgss_sk`);
//! lanefs uses certificates of a cluster CA over TLS instead. Only on a
//! Unix socket does the server know the user itself.

use crate::keys::{
    self, create_cluster_keys, read_bundle, KeyError, KeyFiles, KeyRole, ADMIN_NAME, CLIENT_NAME, SERVER_NAME,
};
use lanefs_proto::codec::encode;
use lanefs_proto::wire::{Role, Wire};
use lanefs_proto::{Credentials, MdsError, Owner, GROUPS_MAX};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{AlertDescription, CertificateError, RootCertStore};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tracing::warn;

/// How long a client waits for a server's side of the TLS handshake (a
/// server gives its peers its handshake timeout, see [`crate::hello`]).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a refused peer has to take its refusal and hang up.
pub const REFUSAL_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes a refused peer may still send while it reads its refusal.
pub const REFUSAL_DRAIN_BYTES_MAX: usize = 1 << 20;

/// What a plaintext peer of a TCP server is told.
pub const KEY_REQUIRED: &str = "this lanefs server takes only TLS connections with the cluster's key: give the \
    client key with --key FILE or set LANEFS_KEY=FILE (lanefs up --tcp prints it; it is DATA/keys/client.pem)";

/// What a server knows of its peer before the peer says anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// TLS: a certificate of this cluster, of this role.
    Key(KeyRole),
    /// Unix socket: the kernel's word that the peer runs as `uid`, the
    /// server's own user or root: a node.
    LocalNode { uid: u32 },
    /// Unix socket: any other user, as the kernel gives it (its uid and
    /// gid at `connect`, its groups then): acts as itself only.
    LocalUser(Credentials),
}

impl Peer {
    /// Whether the peer is a node (acts for others, does object I/O); only
    /// a local user of another uid is not.
    pub fn is_node(&self) -> bool {
        !matches!(self, Peer::LocalUser(_))
    }

    /// Whether the peer may set the servers' parameters (an OST's, or
    /// those kept at the MDS for every client): the server key, or the
    /// servers' own user or root on a Unix socket.
    pub fn is_administrator(&self) -> bool {
        matches!(self, Peer::Key(KeyRole::Server) | Peer::LocalNode { .. })
    }
}

/// Which roles a peer may claim in its `Hello`. Only a client may be
/// anyone's; every other role (an OSS registering its OSTs, a server
/// connecting to another) needs a server key or the server's own user.
pub fn claim_allowed(peer: &Peer, role: &Role) -> Result<(), String> {
    match (peer, role) {
        (_, Role::Client) => Ok(()),
        (Peer::Key(KeyRole::Server) | Peer::LocalNode { .. }, _) => Ok(()),
        (Peer::Key(key @ (KeyRole::Client | KeyRole::Admin)), role) => Err(format!(
            "{} key may connect only as a client, not as {role:?}: servers need the cluster's server key \
             (server.pem)",
            key.with_article()
        )),
        (Peer::LocalUser(user), role) => Err(format!(
            "uid {} may connect only as a client, not as {role:?}: servers run as the servers' own user or root",
            user.uid
        )),
    }
}

/// Whether a Unix-socket peer running as `peer_uid` may be trusted by a
/// process running as `own_euid`: the same user, or root. A client trusts
/// such a server only; a server takes any peer, as [`local_peer`] says.
pub fn local_peer_allowed(peer_uid: u32, own_euid: u32) -> bool {
    peer_uid == own_euid || peer_uid == 0
}

/// What a server running as `own_euid` takes a Unix-socket peer for, from
/// the kernel's word on it (`SO_PEERCRED`: uid, gid and pid at `connect`):
/// a node if it is the same user or root, else that user, with the
/// supplementary groups [`peer_groups`] finds.
pub fn local_peer(uid: u32, gid: u32, pid: Option<i32>, own_euid: u32) -> Peer {
    if local_peer_allowed(uid, own_euid) {
        return Peer::LocalNode { uid };
    }
    let groups = pid.map(|pid| peer_groups(pid, uid, gid)).unwrap_or_default();
    Peer::LocalUser(Credentials { uid, gid, groups })
}

/// The supplementary groups of process `pid` (its `/proc/PID/status`),
/// if it still runs as effective `uid`; none otherwise (a process gone, or
/// its pid taken by another: fewer groups only ever grant less). At most
/// [`GROUPS_MAX`], without `gid`.
pub fn peer_groups(pid: i32, uid: u32, gid: u32) -> Vec<u32> {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return Vec::new() };
    parse_status_groups(&status, uid, gid)
}

/// The `Groups:` of a `/proc/PID/status` text whose effective uid (the
/// second of `Uid:`) is `uid`; none otherwise.
fn parse_status_groups(status: &str, uid: u32, gid: u32) -> Vec<u32> {
    let field = |name: &str| status.lines().find_map(|line| line.strip_prefix(name)).map(str::split_whitespace);
    let effective = field("Uid:").and_then(|mut ids| ids.nth(1)).and_then(|id| id.parse::<u32>().ok());
    if effective != Some(uid) {
        return Vec::new();
    }
    let mut groups: Vec<u32> = field("Groups:")
        .map(|ids| ids.filter_map(|id| id.parse().ok()).filter(|&group| group != gid).collect())
        .unwrap_or_default();
    groups.truncate(GROUPS_MAX);
    groups
}

/// uid and gid 65534 (`nobody` and `nogroup` on most systems): Lustre's
/// default squash ids, and lanefs's for a client key's root.
pub const SQUASH_OWNER_DEFAULT: Owner = Owner { uid: 65534, gid: 65534 };

/// What the MDS makes of uid 0 in a request a client key sends (an admin
/// key's and a server key's are always served as root).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRootSquash {
    /// Served as this user and group, with no supplementary groups.
    Squash(Owner),
    /// Served as root: every client key is then an admin key.
    Off,
}

impl Default for KeyRootSquash {
    fn default() -> Self {
        KeyRootSquash::Squash(SQUASH_OWNER_DEFAULT)
    }
}

/// The credentials the MDS serves a namespace request of `peer` as, which
/// claimed `claimed`: a node's as claimed (a client key's root squashed by
/// `squash`); a local user's only if they are its own (its uid, its gid or
/// one of its groups, groups among its own), else `EPERM` saying why.
pub fn served_credentials(peer: &Peer, claimed: Credentials, squash: KeyRootSquash) -> Result<Credentials, MdsError> {
    match (peer, squash) {
        (Peer::Key(KeyRole::Client), KeyRootSquash::Squash(owner)) if claimed.uid == 0 => {
            Ok(Credentials::user(owner.uid, owner.gid))
        }
        (Peer::LocalUser(own), _) => {
            let member = |group: u32| group == own.gid || own.groups.contains(&group);
            let refused = |what: String| MdsError::NotPermitted {
                path: format!("a request as {what}"),
                reason: format!(
                    "this connection's process runs as uid {} gid {} (the kernel's word, SO_PEERCRED): a user who \
                     is neither root nor the servers' own user acts only as itself; run the command as that user, \
                     or through a lanefs mount",
                    own.uid, own.gid
                ),
            };
            if claimed.uid != own.uid {
                return Err(refused(format!("uid {}", claimed.uid)));
            }
            if !member(claimed.gid) {
                return Err(refused(format!("gid {}", claimed.gid)));
            }
            if let Some(group) = claimed.groups.iter().find(|&&group| !member(group)) {
                return Err(refused(format!("supplementary group {group}")));
            }
            Ok(claimed)
        }
        _ => Ok(claimed),
    }
}

pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// A loaded key: the TLS settings made from it once, for every connection.
#[derive(Clone)]
pub struct ClusterKey(Arc<Loaded>);

struct Loaded {
    path: PathBuf,
    role: KeyRole,
    connector: TlsConnector,
    /// Server keys only.
    acceptor: Option<TlsAcceptor>,
}

impl std::fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterKey").field("path", &self.0.path).field("role", &self.0.role).finish()
    }
}

fn server_name() -> ServerName<'static> {
    ServerName::try_from(SERVER_NAME).expect("SERVER_NAME is a valid DNS name")
}

/// The role a certificate's name gives its holder.
fn role_of(cert: &CertificateDer<'_>) -> Option<KeyRole> {
    let parsed = ParsedCertificate::try_from(cert).ok()?;
    let names = |name: &'static str| {
        let name = ServerName::try_from(name).expect("role names are valid DNS names");
        rustls::client::verify_server_name(&parsed, &name).is_ok()
    };
    if names(SERVER_NAME) {
        Some(KeyRole::Server)
    } else if names(ADMIN_NAME) {
        Some(KeyRole::Admin)
    } else if names(CLIENT_NAME) {
        Some(KeyRole::Client)
    } else {
        None
    }
}

/// rustls's ring provider, AES-128-GCM first: about 1.4 times the speed of
/// AES-256-GCM (rustls's first choice) per byte with AES-NI, and every byte
/// a TCP client moves is encrypted once and decrypted once.
fn provider() -> rustls::crypto::CryptoProvider {
    use rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256,
    };
    rustls::crypto::CryptoProvider {
        cipher_suites: vec![TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256],
        ..rustls::crypto::ring::default_provider()
    }
}

impl ClusterKey {
    /// Load a key file: owner-only, a certificate of a lanefs role that
    /// chains to the CA certificate beside it, and its private key.
    pub fn load(path: &Path) -> Result<ClusterKey, KeyError> {
        let malformed = |reason: String| KeyError::Malformed { path: path.to_path_buf(), reason };
        let bundle = read_bundle(path)?;
        let provider = Arc::new(provider());
        let mut roots = RootCertStore::empty();
        roots.add(bundle.ca.clone()).map_err(|e| malformed(format!("its CA certificate: {e}")))?;
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| malformed(format!("its CA certificate: {e}")))?;
        let now = UnixTime::now();
        verifier
            .verify_client_cert(&bundle.leaf, &[], now)
            .map_err(|e| malformed(format!("its certificate is not one the CA beside it signed ({e})")))?;
        let role = role_of(&bundle.leaf).ok_or_else(|| malformed("its certificate names no lanefs role".into()))?;
        let client = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| malformed(format!("TLS settings: {e}")))?
            .with_root_certificates(roots.clone())
            .with_client_auth_cert(vec![bundle.leaf.clone()], bundle.key.clone_key())
            .map_err(|e| malformed(format!("its private key: {e}")))?;
        let acceptor = match role {
            KeyRole::Client | KeyRole::Admin => None,
            KeyRole::Server => {
                // A server key must pass the check its clients will make.
                let own = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                    .build()
                    .map_err(|e| malformed(format!("its CA certificate: {e}")))?;
                own.verify_server_cert(&bundle.leaf, &[], &server_name(), &[], now)
                    .map_err(|e| malformed(format!("its certificate cannot serve ({e})")))?;
                let server = rustls::ServerConfig::builder_with_provider(provider)
                    .with_protocol_versions(&[&rustls::version::TLS13])
                    .map_err(|e| malformed(format!("TLS settings: {e}")))?
                    .with_client_cert_verifier(verifier)
                    .with_single_cert(vec![bundle.leaf], bundle.key)
                    .map_err(|e| malformed(format!("its private key: {e}")))?;
                Some(TlsAcceptor::from(Arc::new(server)))
            }
        };
        let connector = TlsConnector::from(Arc::new(client));
        Ok(ClusterKey(Arc::new(Loaded { path: path.to_path_buf(), role, connector, acceptor })))
    }

    pub fn role(&self) -> KeyRole {
        self.0.role
    }

    pub fn path(&self) -> &Path {
        &self.0.path
    }

    /// `Ok` for a server key; else the error saying what `who` needs.
    pub fn require_server(&self, who: &str) -> Result<(), KeyError> {
        match self.0.role {
            KeyRole::Server => Ok(()),
            role => Err(KeyError::WrongRole {
                path: self.0.path.clone(),
                found: role,
                needed: format!(
                    "{who} needs the cluster's server key (server.pem, beside client.pem where lanefs up or lanefs key new \
                     made it)"
                ),
            }),
        }
    }

    pub(crate) fn acceptor(&self) -> Option<&TlsAcceptor> {
        self.0.acceptor.as_ref()
    }
}

/// Open TLS over a connected TCP stream as a client with `key`.
pub(crate) async fn connect_tls(
    stream: TcpStream,
    key: &ClusterKey,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let connect = key.0.connector.connect(server_name(), stream);
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, connect).await {
        Ok(connected) => connected,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no TLS handshake within {TLS_HANDSHAKE_TIMEOUT:?}"),
        )),
    }
}

/// TLS records of the handshake start with 22, then the major version 3;
/// a lanefs frame starts with its length, little-endian, whose second byte
/// is 0 for any `Hello` below 768 bytes.
const TLS_HANDSHAKE_RECORD: u8 = 22;
const TLS_MAJOR_VERSION: u8 = 3;

/// Whether the peer opened with a TLS record (peeking: nothing is read).
async fn opens_with_tls(stream: &TcpStream) -> std::io::Result<bool> {
    let mut head = [0u8; 2];
    loop {
        let n = stream.peek(&mut head).await?;
        match n {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            _ if head[0] != TLS_HANDSHAKE_RECORD => return Ok(false),
            1 => tokio::time::sleep(Duration::from_millis(1)).await,
            _ => return Ok(head[1] == TLS_MAJOR_VERSION),
        }
    }
}

/// A TCP server's side of the handshake: TLS with a certificate of the
/// cluster by `deadline`, or a plaintext refusal. `None`: the peer was
/// refused.
pub(crate) async fn accept_tls(
    stream: TcpStream,
    from: SocketAddr,
    acceptor: &TlsAcceptor,
    deadline: tokio::time::Instant,
) -> Option<(tokio_rustls::server::TlsStream<TcpStream>, Peer)> {
    match tokio::time::timeout_at(deadline, opens_with_tls(&stream)).await {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => {
            warn!(%from, "refused a connection without TLS: the peer has no cluster key");
            refuse(stream, KEY_REQUIRED.to_string()).await;
            return None;
        }
        Ok(Err(_)) | Err(_) => return None,
    }
    let tls = match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            warn!(%from, "TLS handshake failed: {e}");
            return None;
        }
        Err(_) => {
            warn!(%from, "no TLS handshake within the handshake timeout");
            return None;
        }
    };
    let role = tls.get_ref().1.peer_certificates().and_then(|chain| chain.first()).and_then(role_of);
    match role {
        Some(role) => Some((tls, Peer::Key(role))),
        None => {
            // The CA signed it, so this is a key lanefs did not make.
            warn!(%from, "refused a certificate of the cluster CA that names no lanefs role");
            None
        }
    }
}

/// Tell a peer that fails authentication why, in a plaintext `Refused`,
/// and close. What the peer sent is read and dropped until it hangs up
/// (bounded): closing a TCP socket with unread bytes resets it, and the
/// peer would lose the reason.
pub(crate) async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, reason: String) {
    let mut frame = Vec::new();
    if encode(Wire::Refused { reason }, &mut frame).is_err() {
        return;
    }
    if stream.write_all(&frame).await.is_err() || stream.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut drained = 0;
        while drained < REFUSAL_DRAIN_BYTES_MAX {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => drained += n,
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_DRAIN_TIMEOUT, drain).await;
}

/// Why a TLS connection failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TlsFailure {
    /// The server refused this end (its alert says why).
    ByPeer(String),
    /// This end refused the server.
    ByUs(String),
}

impl TlsFailure {
    pub fn reason(&self) -> &str {
        match self {
            TlsFailure::ByPeer(reason) | TlsFailure::ByUs(reason) => reason,
        }
    }
}

/// An I/O error in words: the TLS failure it holds, if any, explained.
pub fn describe(e: &std::io::Error, key: Option<&ClusterKey>) -> String {
    match key.and_then(|key| tls_failure(e, key.path())) {
        Some(failure) => failure.reason().to_string(),
        None => e.to_string(),
    }
}

/// The TLS failure inside `e`, in words that say what to do (`key`: the
/// key file this end used); `None` if `e` is no TLS error.
pub fn tls_failure(e: &std::io::Error, key: &Path) -> Option<TlsFailure> {
    let error = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    let key = key.display();
    Some(match error {
        rustls::Error::AlertReceived(AlertDescription::UnknownCA) => TlsFailure::ByPeer(format!(
            "the server does not know the CA of the key {key}: it is a key of another cluster; give this cluster's \
             key (DATA/keys/client.pem where its lanefs up runs)"
        )),
        rustls::Error::AlertReceived(
            alert @ (AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied),
        ) => TlsFailure::ByPeer(format!("the server refused the certificate of the key {key} ({alert:?})")),
        rustls::Error::AlertReceived(alert) => {
            TlsFailure::ByPeer(format!("the server ended the TLS handshake ({alert:?}) with the key {key}"))
        }
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer | CertificateError::BadSignature) => {
            TlsFailure::ByUs(format!(
            "the server's certificate is not from the CA of the key {key}: it serves another cluster, or is no lanefs \
             server; give the key of the cluster at this address"
        ))
        }
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName
            | CertificateError::NotValidForNameContext { .. }
            | CertificateError::InvalidPurpose
            | CertificateError::InvalidPurposeContext { .. },
        ) => TlsFailure::ByUs(
            "the peer's certificate is not a lanefs server's (it holds a client key, which cannot serve): not \
             trusting it"
                .to_string(),
        ),
        rustls::Error::InvalidMessage(_)
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => TlsFailure::ByUs(
            "the server does not speak TLS (a lanefs server of an older release, or no lanefs server)".to_string(),
        ),
        other => TlsFailure::ByUs(format!("TLS with the key {key}: {other}")),
    })
}

/// The keys in `dir`, made first if `dir` does not exist (what `lanefs up
/// --tcp` and the embedded TCP cluster do).
pub fn ensure_cluster_keys(dir: &Path) -> Result<KeyFiles, KeyError> {
    if !dir.exists() {
        return create_cluster_keys(dir);
    }
    let files = KeyFiles::in_dir(dir);
    for path in [&files.server, &files.client] {
        if !path.is_file() {
            return Err(KeyError::Unreadable {
                path: path.clone(),
                reason: format!("missing from {} (move the directory away to make new keys)", dir.display()),
            });
        }
    }
    // Keys made before admin keys existed: the CA signs one now.
    if !files.admin.exists() && files.ca.is_file() {
        issue_key(&files.ca, KeyRole::Admin, None, &files.admin)?;
    }
    Ok(files)
}

/// Sign a new key of `role` with the CA in `ca_path` and write it to `out`
/// (a new file, 0600). `holder` names its holder in the certificate. The
/// new key must chain to the CA certificate of the file: if the file's
/// certificate and key do not belong together, it says so, and leaves no
/// key behind.
pub fn issue_key(ca_path: &Path, role: KeyRole, holder: Option<&str>, out: &Path) -> Result<(), KeyError> {
    keys::issue_unchecked(ca_path, role, holder, out)?;
    if let Err(e) = ClusterKey::load(out) {
        let _ = std::fs::remove_file(out);
        return Err(KeyError::Malformed {
            path: ca_path.to_path_buf(),
            reason: format!("its certificate and private key do not belong together ({e})"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_servers_and_the_owner_may_claim_more_than_a_client() {
        let oss = Role::Oss { address: "127.0.0.1:1".into(), osts: vec![0] };
        let user = Peer::LocalUser(Credentials::user(1000, 1000));
        let peers = [
            Peer::Key(KeyRole::Server),
            Peer::Key(KeyRole::Client),
            Peer::Key(KeyRole::Admin),
            Peer::LocalNode { uid: 0 },
            user.clone(),
        ];
        for peer in &peers {
            assert_eq!(claim_allowed(peer, &Role::Client), Ok(()), "{peer:?}");
        }
        assert_eq!(claim_allowed(&Peer::Key(KeyRole::Server), &oss), Ok(()));
        assert_eq!(claim_allowed(&Peer::LocalNode { uid: 1000 }, &oss), Ok(()));
        let e = claim_allowed(&Peer::Key(KeyRole::Client), &oss).unwrap_err();
        assert!(e.contains("client key may connect only as a client") && e.contains("server.pem"), "{e}");
        let e = claim_allowed(&Peer::Key(KeyRole::Admin), &oss).unwrap_err();
        assert!(e.contains("an admin key may connect only as a client"), "{e}");
        let e = claim_allowed(&user, &oss).unwrap_err();
        assert!(e.contains("uid 1000 may connect only as a client"), "{e}");
    }

    #[test]
    fn a_unix_peer_is_trusted_only_as_the_same_user_or_root() {
        assert!(local_peer_allowed(1000, 1000));
        assert!(local_peer_allowed(0, 1000));
        assert!(local_peer_allowed(0, 0));
        assert!(!local_peer_allowed(65534, 1000));
        assert!(!local_peer_allowed(1000, 0), "a root server does not serve other users");
    }

    #[test]
    fn a_server_takes_its_user_and_root_for_nodes_and_anyone_else_for_themselves() {
        assert_eq!(local_peer(0, 0, None, 1000), Peer::LocalNode { uid: 0 });
        assert_eq!(local_peer(1000, 100, None, 1000), Peer::LocalNode { uid: 1000 });
        assert_eq!(local_peer(1001, 100, None, 0), Peer::LocalUser(Credentials::user(1001, 100)));
        // The groups of a live process of that uid: this one's.
        let me = crate::process::process_credentials();
        let pid = std::process::id() as i32;
        assert_eq!(peer_groups(pid, me.uid, me.gid), me.groups);
        assert_eq!(peer_groups(pid, me.uid.wrapping_add(1), me.gid), Vec::<u32>::new(), "not that uid's process");
    }

    #[test]
    fn groups_come_from_the_status_of_a_process_of_that_uid_only() {
        let status = "Name:\tsh\nUid:\t1000\t1001\t1001\t1001\nGid:\t100\t100\t100\t100\nGroups:\t100 27 44 \n";
        assert_eq!(parse_status_groups(status, 1001, 100), vec![27, 44], "the effective uid is the second");
        assert_eq!(parse_status_groups(status, 1000, 100), Vec::<u32>::new(), "the pid went to another user");
        assert_eq!(parse_status_groups("Uid:\t5\t5\t5\t5\nGroups:\n", 5, 5), Vec::<u32>::new());
    }

    #[test]
    fn a_local_user_acts_only_as_itself_and_a_client_keys_root_is_squashed() {
        let me = Credentials::user(1000, 1000).with_groups(vec![27]);
        let user = Peer::LocalUser(me.clone());
        let squash = KeyRootSquash::default();
        assert_eq!(served_credentials(&user, me.clone(), squash), Ok(me.clone()));
        let fewer = Credentials::user(1000, 27);
        assert_eq!(served_credentials(&user, fewer.clone(), squash), Ok(fewer), "a group of its own as primary");
        for claimed in [
            Credentials::ROOT,
            Credentials::user(1001, 1000),
            Credentials::user(1000, 0),
            Credentials::user(1000, 1000).with_groups(vec![0]),
        ] {
            let e = served_credentials(&user, claimed.clone(), squash).unwrap_err();
            assert!(matches!(e, MdsError::NotPermitted { .. }), "{claimed:?}: {e:?}");
            let e = e.to_string();
            assert!(e.contains("EPERM") && e.contains("runs as uid 1000 gid 1000") && e.contains("itself"), "{e}");
        }
        // Nodes act for anyone; a client key's root is squashed, an admin key's not.
        let nobody = Credentials::user(65534, 65534);
        assert_eq!(served_credentials(&Peer::Key(KeyRole::Client), Credentials::ROOT, squash), Ok(nobody));
        let other = Credentials::user(1001, 1001);
        assert_eq!(served_credentials(&Peer::Key(KeyRole::Client), other.clone(), squash), Ok(other));
        let lifted = [
            (Peer::Key(KeyRole::Admin), squash),
            (Peer::Key(KeyRole::Server), squash),
            (Peer::LocalNode { uid: 0 }, squash),
            (Peer::Key(KeyRole::Client), KeyRootSquash::Off),
        ];
        for (peer, squash) in lifted {
            assert_eq!(served_credentials(&peer, Credentials::ROOT, squash), Ok(Credentials::ROOT), "{peer:?}");
        }
        let to = KeyRootSquash::Squash(Owner { uid: 7, gid: 8 });
        assert_eq!(served_credentials(&Peer::Key(KeyRole::Client), Credentials::ROOT, to), Ok(Credentials::user(7, 8)));
    }

    #[test]
    fn keys_load_with_their_role_and_servers_need_a_server_key() {
        let dir = tempfile::tempdir().unwrap();
        let files = crate::keys::create_cluster_keys(&dir.path().join("keys")).unwrap();
        let server = ClusterKey::load(&files.server).unwrap();
        let client = ClusterKey::load(&files.client).unwrap();
        assert_eq!((server.role(), client.role()), (KeyRole::Server, KeyRole::Client));
        assert!(server.acceptor().is_some() && client.acceptor().is_none());
        assert!(server.require_server("lanefs oss").is_ok());
        let e = client.require_server("lanefs oss").unwrap_err().to_string();
        assert!(
            e.contains("client.pem is a client key") && e.contains("lanefs oss needs the cluster's server key"),
            "{e}"
        );
        // More keys from the CA file.
        let more = dir.path().join("alice.pem");
        issue_key(&files.ca, KeyRole::Client, Some("alice"), &more).unwrap();
        assert_eq!(ClusterKey::load(&more).unwrap().role(), KeyRole::Client);
        assert_eq!(ClusterKey::load(&files.admin).unwrap().role(), KeyRole::Admin);
        let admin = dir.path().join("root.pem");
        issue_key(&files.ca, KeyRole::Admin, Some("root"), &admin).unwrap();
        let admin = ClusterKey::load(&admin).unwrap();
        assert_eq!(admin.role(), KeyRole::Admin);
        assert!(admin.acceptor().is_none(), "an admin key cannot serve");
        assert!(admin.require_server("lanefs mds").is_err());
        let e = issue_key(&files.ca, KeyRole::Client, None, &more).unwrap_err().to_string();
        assert!(e.contains("alice.pem"), "never over an existing file: {e}");
    }
}
