//! Authentication between nodes: who may connect as what, and where that
//! is checked.
//!
//! | peer | how the server knows it | may claim in `Hello` |
//! | --- | --- | --- |
//! | a holder of the cluster's server key | TCP: its TLS certificate names `server.lanefs` | any role (`Client`, `Oss`, and roles servers take toward each other) |
//! | a holder of a client key | TCP: its TLS certificate names `client.lanefs` | `Client` only |
//! | the server's own user, or root | Unix socket: the kernel's `SO_PEERCRED` | any role |
//! | anyone else | | nothing: refused before `Hello` |
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
//!    server and by the client alike.
//! 2. In the handshake (`handshake` in [`crate::oss`], which the MDS uses
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
//! is owner-only in an owner-only directory, the server admits only its
//! own uid and root, and the client trusts only a server running as itself
//! or root: the two ends are then the same user (or root, who could read
//! the data directory anyway), which is all a key could prove. Bulk data
//! there goes through shared memory ([`crate::shm`]); encrypting what the
//! kernel already keeps between the two would only cost time.
//!
//! The cost, measured on one 2-core host (`lanefs up --tcp`, 4 ranks,
//! file per process, 1 MiB transfers): a GiB written over TCP takes about
//! 0.7 CPU seconds more across clients and servers (1.4 to 2.1), a GiB read
//! about 0.5 more (1.3 to 1.8): encryption, decryption and rustls's copies
//! of each byte. Unix sockets pay nothing.
//!
//! What this is not: it authenticates nodes, not users. Lustre authenticates
//! nodes with Kerberos or shared-secret keys (`lgss_sk`) and maps or squashes
//! their users' uids (nodemap); lanefs uses certificates of a cluster CA
//! over TLS instead, and its namespace has no owners or permissions to map
//! uids onto.

use crate::codec::encode;
use crate::keys::{read_bundle, KeyError, KeyRole, CLIENT_NAME, SERVER_NAME};
use crate::proto::{Role, Wire};
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// TLS: a certificate of this cluster, of this role.
    Key(KeyRole),
    /// Unix socket: the kernel's word that the peer runs as `uid` (the
    /// server's own user or root, or it would have been refused).
    LocalUser { uid: u32 },
}

/// Which roles a peer may claim in its `Hello`. Only a client may be
/// anyone's; every other role (an OSS registering its OSTs, a server
/// connecting to another) needs a server key or the server's own user.
pub fn claim_allowed(peer: Peer, role: &Role) -> Result<(), String> {
    match (peer, role) {
        (_, Role::Client) => Ok(()),
        (Peer::Key(KeyRole::Server) | Peer::LocalUser { .. }, _) => Ok(()),
        (Peer::Key(KeyRole::Client), role) => Err(format!(
            "a client key may connect only as a client, not as {role:?}: servers need the cluster's server key \
             (server.pem)"
        )),
    }
}

/// Whether a Unix-socket peer running as `peer_uid` may be trusted by a
/// process running as `own_euid`: the same user, or root.
pub fn local_peer_allowed(peer_uid: u32, own_euid: u32) -> bool {
    peer_uid == own_euid || peer_uid == 0
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
            KeyRole::Client => None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_servers_and_the_owner_may_claim_more_than_a_client() {
        let oss = Role::Oss { address: "127.0.0.1:1".into(), osts: vec![0] };
        for peer in [Peer::Key(KeyRole::Server), Peer::Key(KeyRole::Client), Peer::LocalUser { uid: 0 }] {
            assert_eq!(claim_allowed(peer, &Role::Client), Ok(()), "{peer:?}");
        }
        assert_eq!(claim_allowed(Peer::Key(KeyRole::Server), &oss), Ok(()));
        assert_eq!(claim_allowed(Peer::LocalUser { uid: 1000 }, &oss), Ok(()));
        let e = claim_allowed(Peer::Key(KeyRole::Client), &oss).unwrap_err();
        assert!(e.contains("client key may connect only as a client") && e.contains("server.pem"), "{e}");
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
        crate::keys::issue_key(&files.ca, KeyRole::Client, Some("alice"), &more).unwrap();
        assert_eq!(ClusterKey::load(&more).unwrap().role(), KeyRole::Client);
        let e = crate::keys::issue_key(&files.ca, KeyRole::Client, None, &more).unwrap_err().to_string();
        assert!(e.contains("alice.pem"), "never over an existing file: {e}");
    }
}
