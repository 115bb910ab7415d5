//! Cluster keys: the files that let a node join a lanefs cluster over TCP.
//!
//! A cluster has a certificate authority (CA) of its own, made once
//! (`lanefs key new DIR`, or by `lanefs up --tcp` in `DATA/keys/`), and key
//! files it signed. A key file is one PEM bundle: the holder's certificate,
//! the cluster CA's certificate, then the holder's private key.
//!
//! | file | role | its certificate | who holds it |
//! | --- | --- | --- | --- |
//! | `server.pem` | [`KeyRole::Server`] | names `server.lanefs`; TLS server and client use | MDS and OSS hosts (admin tools there may use it as a client) |
//! | `client.pem` | [`KeyRole::Client`] | names `client.lanefs`; TLS client use only | users of the file system (their root is squashed by default) |
//! | `admin.pem` | [`KeyRole::Admin`] | names `admin.lanefs`; TLS client use only | administrators' nodes: a client key whose root stays root |
//! | `ca.pem` | none | the CA's certificate and private key | the administrator: only `lanefs key issue` reads it |
//!
//! The role is the name in the certificate (its subjectAltName), so the
//! TLS layer checks it on both sides: a client accepts only a server
//! certificate of its cluster, and a server learns whether its peer holds
//! a server key or a client key (see [`crate::auth`] for what each may do).
//!
//! Every file is created owner-only (0600, in a 0700 directory written
//! whole under a temporary name and renamed into place), and a key file
//! that group or others may read is refused when loaded, as ssh refuses
//! an open private key: a key is a password.
//!
//! The CA's name carries the cluster's id (the first 8 bytes of its key's
//! identifier, in hex): two clusters' CAs never share a name, so a key of
//! another cluster fails as an unknown CA, and the CA is rebuilt from its
//! private key alone to sign more keys, with no certificate parser.
//!
//! Keys do not expire and cannot be revoked one by one: to shut a holder
//! out, make a new cluster CA and hand out new keys. Lustre's shared-secret
//! keys (`lgss_sk`) carry an expiry; lanefs departs from that for now.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The name a server certificate holds (clients check for it, whatever
/// address they dialled: a lanefs server is any holder of a server key of
/// the cluster, not a host name).
pub const SERVER_NAME: &str = "server.lanefs";
/// The name a client certificate holds.
pub const CLIENT_NAME: &str = "client.lanefs";
/// The name an admin certificate holds.
pub const ADMIN_NAME: &str = "admin.lanefs";
/// Largest key file read (a bundle is about 2 KiB).
pub const KEY_FILE_BYTES_MAX: u64 = 64 << 10;

/// What a key lets its holder be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRole {
    /// MDS and OSS: serves, and may connect as any role.
    Server,
    /// A user's node or tool: connects as a client only, and its
    /// requests as root are squashed unless the MDS is told otherwise.
    Client,
    /// A client key whose requests as root are root's (Lustre: a node in
    /// a nodemap with `admin=1`): an administrator's node or tool.
    Admin,
}

impl KeyRole {
    /// "a server", "a client", "an admin": the role as a sentence names it.
    pub fn with_article(self) -> &'static str {
        match self {
            KeyRole::Server => "a server",
            KeyRole::Client => "a client",
            KeyRole::Admin => "an admin",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KeyRole::Server => "server",
            KeyRole::Client => "client",
            KeyRole::Admin => "admin",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {}: {reason}; pass the cluster key with --key FILE or LANEFS_KEY (lanefs up --tcp writes them to DATA/keys/, lanefs key new DIR makes a cluster's keys)", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("key file {} may be read by others (mode {mode:03o}): a key is a password; run: chmod 600 {}", path.display(), path.display())]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("key file {}: {reason}; give a key file made by lanefs up --tcp or lanefs key (PEM: certificate, CA certificate, private key)", path.display())]
    Malformed { path: PathBuf, reason: String },
    #[error("key file {} is {} key; {needed}", path.display(), found.with_article())]
    WrongRole { path: PathBuf, found: KeyRole, needed: String },
    #[error("{}: {reason}", path.display())]
    Write { path: PathBuf, reason: String },
}

/// The key files of one cluster, as [`create_cluster_keys`] lays them out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyFiles {
    pub ca: PathBuf,
    pub server: PathBuf,
    pub client: PathBuf,
    pub admin: PathBuf,
}

impl KeyFiles {
    pub fn in_dir(dir: &Path) -> KeyFiles {
        KeyFiles {
            ca: dir.join("ca.pem"),
            server: dir.join("server.pem"),
            client: dir.join("client.pem"),
            admin: dir.join("admin.pem"),
        }
    }
}

/// A key file's contents, checked for shape (not yet for trust).
pub(crate) struct KeyBundle {
    pub leaf: CertificateDer<'static>,
    pub ca: CertificateDer<'static>,
    pub key: PrivateKeyDer<'static>,
}

/// Read a file that holds a private key: owner-only, bounded, PEM.
fn read_secret(path: &Path) -> Result<Vec<u8>, KeyError> {
    let unreadable = |e: std::io::Error| KeyError::Unreadable { path: path.to_path_buf(), reason: e.to_string() };
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(KeyError::Unreadable { path: path.to_path_buf(), reason: "not a regular file".into() });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyError::TooOpen { path: path.to_path_buf(), mode });
    }
    if meta.len() > KEY_FILE_BYTES_MAX {
        return Err(KeyError::Malformed {
            path: path.to_path_buf(),
            reason: format!("{} bytes is too long for a key file (at most {KEY_FILE_BYTES_MAX})", meta.len()),
        });
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, KEY_FILE_BYTES_MAX), &mut bytes).map_err(unreadable)?;
    Ok(bytes)
}

fn malformed(path: &Path, reason: impl Into<String>) -> KeyError {
    KeyError::Malformed { path: path.to_path_buf(), reason: reason.into() }
}

/// The certificates and the private key of a PEM file.
fn parse_pem(path: &Path, bytes: &[u8]) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), KeyError> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(bytes).collect();
    let certs = certs.map_err(|e| malformed(path, format!("bad PEM: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(bytes).map_err(|e| malformed(path, format!("no private key ({e})")))?;
    Ok((certs, key))
}

/// Read a key file (not a CA file): its certificate, the CA's, its key.
pub(crate) fn read_bundle(path: &Path) -> Result<KeyBundle, KeyError> {
    let bytes = read_secret(path)?;
    let (mut certs, key) = parse_pem(path, &bytes)?;
    if certs.len() != 2 {
        let hint = if certs.len() == 1 { " (a CA file? give server.pem or client.pem)" } else { "" };
        return Err(malformed(path, format!("{} certificate(s) where a key file has 2{hint}", certs.len())));
    }
    let ca = certs.pop().expect("two certificates");
    let leaf = certs.pop().expect("two certificates");
    Ok(KeyBundle { leaf, ca, key })
}

/// The cluster's id: the start of the CA key's identifier, in hex.
fn cluster_id(ca_key: &KeyPair) -> String {
    let identifier = CertificateParams::default().key_identifier(ca_key);
    identifier.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The CA's certificate parameters, a function of its key alone.
fn ca_params(ca_key: &KeyPair) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::OrganizationName, "lanefs");
    params.distinguished_name.push(DnType::CommonName, format!("lanefs cluster {}", cluster_id(ca_key)));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params
}

fn rcgen_error(path: &Path, e: rcgen::Error) -> KeyError {
    KeyError::Write { path: path.to_path_buf(), reason: format!("making a certificate: {e}") }
}

/// A new key of `role`, signed by the CA: the PEM bundle's text.
fn issue_pem(
    ca_key: &KeyPair,
    ca_pem: &str,
    role: KeyRole,
    holder: Option<&str>,
    path: &Path,
) -> Result<String, KeyError> {
    let name = match role {
        KeyRole::Server => SERVER_NAME,
        KeyRole::Client => CLIENT_NAME,
        KeyRole::Admin => ADMIN_NAME,
    };
    let mut params = CertificateParams::new(vec![name.to_string()]).map_err(|e| rcgen_error(path, e))?;
    params.distinguished_name.push(DnType::OrganizationName, "lanefs");
    params.distinguished_name.push(DnType::CommonName, holder.unwrap_or(name));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = match role {
        KeyRole::Server => vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth],
        KeyRole::Client | KeyRole::Admin => vec![ExtendedKeyUsagePurpose::ClientAuth],
    };
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(|e| rcgen_error(path, e))?;
    let issuer = Issuer::new(ca_params(ca_key), ca_key);
    let cert = params.signed_by(&key, &issuer).map_err(|e| rcgen_error(path, e))?;
    Ok(format!("{}{}{}", cert.pem(), ca_pem, key.serialize_pem()))
}

/// The text of the first PEM certificate block, markers included.
fn certificate_block(bytes: &[u8]) -> Option<String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let text = std::str::from_utf8(bytes).ok()?;
    let start = text.find(BEGIN)?;
    let end = start + text[start..].find(END)? + END.len();
    Some(format!("{}\n", &text[start..end]))
}

/// Write `text` to a new owner-only file (never over an existing one).
fn write_secret(path: &Path, text: &str) -> Result<(), KeyError> {
    let failed = |e: std::io::Error| KeyError::Write { path: path.to_path_buf(), reason: e.to_string() };
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)
}

/// Make a new cluster's keys in `dir` (which must not exist): a CA, a
/// server key, a client key and an admin key, owner-only. The directory appears whole
/// or not at all.
pub fn create_cluster_keys(dir: &Path) -> Result<KeyFiles, KeyError> {
    let failed = |e: std::io::Error| KeyError::Write { path: dir.to_path_buf(), reason: e.to_string() };
    if dir.exists() {
        return Err(KeyError::Write {
            path: dir.to_path_buf(),
            reason: "exists already; new cluster keys go to a new directory".into(),
        });
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(failed)?;
    let staging = tempfile::Builder::new().prefix(".lanefs-keys-").tempdir_in(parent).map_err(failed)?;
    std::fs::set_permissions(staging.path(), std::fs::Permissions::from_mode(0o700)).map_err(failed)?;
    let files = KeyFiles::in_dir(staging.path());
    let ca_key = KeyPair::generate().map_err(|e| rcgen_error(dir, e))?;
    let ca_cert = ca_params(&ca_key).self_signed(&ca_key).map_err(|e| rcgen_error(dir, e))?;
    write_secret(&files.ca, &format!("{}{}", ca_cert.pem(), ca_key.serialize_pem()))?;
    write_secret(&files.server, &issue_pem(&ca_key, &ca_cert.pem(), KeyRole::Server, None, &files.server)?)?;
    write_secret(&files.client, &issue_pem(&ca_key, &ca_cert.pem(), KeyRole::Client, None, &files.client)?)?;
    write_secret(&files.admin, &issue_pem(&ca_key, &ca_cert.pem(), KeyRole::Admin, None, &files.admin)?)?;
    std::fs::rename(staging.path(), dir).map_err(failed)?;
    let _ = staging.keep(); // renamed away: nothing left to remove
    Ok(KeyFiles::in_dir(dir))
}

/// Sign a new key of `role` with the CA in `ca_path` and write it to `out`
/// (a new file, 0600). `holder` names its holder in the certificate. The
/// key is not checked here: [`crate::auth::issue_key`] issues a key and
/// checks that it chains to its CA.
pub(crate) fn issue_unchecked(ca_path: &Path, role: KeyRole, holder: Option<&str>, out: &Path) -> Result<(), KeyError> {
    let bytes = read_secret(ca_path)?;
    let (certs, key) = parse_pem(ca_path, &bytes)?;
    if certs.len() != 1 {
        return Err(malformed(ca_path, format!("{} certificate(s) where a CA file has 1 (give ca.pem)", certs.len())));
    }
    let ca_key = KeyPair::try_from(&key).map_err(|e| malformed(ca_path, format!("unusable private key: {e}")))?;
    let ca_pem = certificate_block(&bytes).ok_or_else(|| malformed(ca_path, "no PEM certificate block"))?;
    write_secret(out, &issue_pem(&ca_key, &ca_pem, role, holder, out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ensure_cluster_keys;

    #[test]
    fn cluster_keys_are_owner_only_and_open_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("keys");
        let files = create_cluster_keys(&keys).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&keys), 0o700);
        for f in [&files.ca, &files.server, &files.client, &files.admin] {
            assert_eq!(mode(f), 0o600, "{}", f.display());
        }
        assert!(create_cluster_keys(&keys).unwrap_err().to_string().contains("exists already"));
        assert_eq!(ensure_cluster_keys(&keys).unwrap(), files, "existing keys are kept");
        // Keys made before admin keys: the CA signs one when they are used.
        let client = std::fs::read(&files.client).unwrap();
        std::fs::remove_file(&files.admin).unwrap();
        assert_eq!(ensure_cluster_keys(&keys).unwrap(), files);
        assert_eq!(crate::auth::ClusterKey::load(&files.admin).unwrap().role(), KeyRole::Admin);
        assert_eq!(mode(&files.admin), 0o600);
        assert_eq!(std::fs::read(&files.client).unwrap(), client, "the other keys are kept");
        std::fs::set_permissions(&files.client, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read_bundle(&files.client).err().unwrap().to_string();
        assert!(e.contains("chmod 600") && e.contains("client.pem") && e.contains("644"), "{e}");
    }

    #[test]
    fn bad_key_files_name_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.pem");
        let e = read_bundle(&missing).err().unwrap().to_string();
        assert!(e.contains("nope.pem") && e.contains("--key") && e.contains("LANEFS_KEY"), "{e}");
        let junk = dir.path().join("junk.pem");
        write_secret(&junk, "hello\n").unwrap();
        let e = read_bundle(&junk).err().unwrap().to_string();
        assert!(e.contains("junk.pem") && e.contains("private key"), "{e}");
        let files = create_cluster_keys(&dir.path().join("k")).unwrap();
        let e = read_bundle(&files.ca).err().unwrap().to_string();
        assert!(e.contains("a CA file?"), "{e}");
    }
}
