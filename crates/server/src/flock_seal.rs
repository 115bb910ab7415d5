//! Proof that the MDS granted a file lock, so that a client can replay
//! only the locks it was really granted.
//!
//! The MDS keeps its file locks in memory (`lanefs_proto::flock`): after a
//! restart, or when a connection is lost, clients ask again for the locks
//! they hold (`FlockCall::Set { replay: true }`), and during the recovery
//! grace only such replays are granted. Were a replay taken on the
//! client's word, a client could replay a lock it never held and take it
//! from its real holder. So every grant comes with a [`FlockSeal`]: an
//! HMAC-SHA256, under a secret only the MDS knows, of the lock as granted
//! (file, lock owner, uid, kind, range) and of a grant number that grows
//! with every grant. A replay is taken only with a seal that checks out
//! and only for a range inside the sealed one (an owner's lock shrinks
//! when part of it is unlocked, and each piece keeps its seal); any other
//! replay is refused, and the MDS says so in its log at `warn`. A seal
//! stays genuine after its lock is let go; so during the grace, of two
//! replays that conflict, the one from the newer grant wins and the older
//! gives way (`mds_server::displace_older`): the MDS never held both. Lustre
//! keeps each client's state in its `last_rcvd` file instead; lanefs
//! keeps the proof with the client, and nothing per lock on the MDS's disk.
//!
//! The secret is 32 random bytes in the data directory's `flock_secret`
//! (0600, written to a new file without following links, then renamed into
//! place). Each start of the MDS makes a new one and keeps the one before
//! for the recovery grace: a seal from before the restart is good for
//! one replay, whose grant gets a seal of the new secret, and seals older
//! than that are worth nothing. An MDS without a data directory keeps its
//! secret in memory only (a restart of it forgets every lock anyway).
//!
//! Bounds: none to keep; a seal is 48 bytes on each grant and replay.

use lanefs_proto::flock::FlockSeal;
use lanefs_proto::flock::{Flock, FlockKind, FlockRequest};
use lanefs_proto::Fid;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The secret's file in the MDS's data directory.
pub const SECRET_FILE: &str = "flock_secret";
const SECRET_BYTES: usize = 32;

/// The MDS's secrets: this start's, and the one before (for replays
/// during the recovery grace).
pub struct Sealer {
    current: hmac::Key,
    previous: Option<hmac::Key>,
    grants: AtomicU64,
}

/// Why a replay was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum SealRefusal {
    Missing,
    Forged,
    Wider,
}

impl std::fmt::Display for SealRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SealRefusal::Missing => "the replay carries no seal of the MDS's grant",
            SealRefusal::Forged => "its seal is not one this MDS made (or is older than its last restart)",
            SealRefusal::Wider => "it asks for more than the sealed grant",
        })
    }
}

impl Sealer {
    /// A sealer with a secret of its own, kept nowhere (an MDS without a
    /// data directory).
    pub fn in_memory() -> std::io::Result<Sealer> {
        Ok(Sealer { current: key(&random_secret()?), previous: None, grants: AtomicU64::new(1) })
    }

    /// The sealer of an MDS whose data directory is `dir`: the secret
    /// kept there by the last start (if any) checks replays; a new one,
    /// written in its place, seals from now on.
    pub fn open(dir: &Path) -> std::io::Result<Sealer> {
        let path = dir.join(SECRET_FILE);
        let previous = match read_secret(&path) {
            Ok(secret) => Some(key(&secret)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!(
                        "{}: {e}; remove it (the locks clients held before this restart will then not be \
                         replayed) and start the MDS again",
                        path.display()
                    ),
                ))
            }
        };
        let secret = random_secret()?;
        write_secret(dir, &secret)?;
        // Grant numbers grow across restarts: start from the clock.
        let now_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let grants = u64::try_from(now_ns.as_nanos()).unwrap_or(u64::MAX / 2);
        Ok(Sealer { current: key(&secret), previous, grants: AtomicU64::new(grants) })
    }

    /// The seal of `lock` on `file`, as granted now.
    pub fn seal(&self, file: Fid, lock: &Flock) -> FlockSeal {
        let grant = self.grants.fetch_add(1, Ordering::Relaxed);
        let message = message(file, lock.owner.owner, lock.uid, lock.kind, lock.start, lock.end, grant);
        let tag = hmac::sign(&self.current, &message);
        let mut mac = [0u8; 32];
        mac.copy_from_slice(tag.as_ref());
        FlockSeal { start: lock.start, end: lock.end, grant, mac }
    }

    /// Whether `request` (a replay) is inside a lock this MDS, or the one
    /// before its restart (with `earlier`), granted and sealed with `seal`.
    pub fn check(&self, request: &FlockRequest, seal: Option<&FlockSeal>, earlier: bool) -> Result<(), SealRefusal> {
        let Some(seal) = seal else { return Err(SealRefusal::Missing) };
        let Some(kind) = request.kind else { return Err(SealRefusal::Wider) };
        let message = message(request.file, request.owner.owner, request.uid, kind, seal.start, seal.end, seal.grant);
        let keys = std::iter::once(&self.current).chain(self.previous.as_ref().filter(|_| earlier));
        if !keys.into_iter().any(|k| hmac::verify(k, &message, &seal.mac).is_ok()) {
            return Err(SealRefusal::Forged);
        }
        if request.start < seal.start || request.end > seal.end {
            return Err(SealRefusal::Wider);
        }
        Ok(())
    }
}

fn key(secret: &[u8]) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, secret)
}

fn message(file: Fid, owner: u64, uid: u32, kind: FlockKind, start: u64, end: u64, grant: u64) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(b"lanefs flock grant 1");
    m.extend_from_slice(&file.0.to_le_bytes());
    m.extend_from_slice(&owner.to_le_bytes());
    m.extend_from_slice(&uid.to_le_bytes());
    m.push(match kind {
        FlockKind::Read => 1,
        FlockKind::Write => 2,
    });
    for n in [start, end, grant] {
        m.extend_from_slice(&n.to_le_bytes());
    }
    m
}

fn random_secret() -> std::io::Result<[u8; SECRET_BYTES]> {
    let mut secret = [0u8; SECRET_BYTES];
    SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| std::io::Error::other("the system's random number source failed"))?;
    Ok(secret)
}

/// The secret at `path`: a regular file (not a link) of exactly
/// [`SECRET_BYTES`].
fn read_secret(path: &Path) -> std::io::Result<[u8; SECRET_BYTES]> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a regular file"));
    }
    let mut bytes = Vec::with_capacity(SECRET_BYTES + 1);
    file.take(SECRET_BYTES as u64 + 1).read_to_end(&mut bytes)?;
    bytes.try_into().map_err(|bytes: Vec<u8>| {
        let reason = format!("{} bytes where the secret has {SECRET_BYTES}", bytes.len());
        std::io::Error::new(std::io::ErrorKind::InvalidData, reason)
    })
}

/// Write `secret` to `dir`'s [`SECRET_FILE`]: to a new file (0600, made
/// by this call, no link followed), synced, then renamed into place.
fn write_secret(dir: &Path, secret: &[u8]) -> std::io::Result<()> {
    lanefs_net::runtime_files::replace_private_file(&dir.join(SECRET_FILE), secret, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_proto::flock::FlockOwner;

    fn lock(start: u64, end: u64) -> Flock {
        Flock { owner: FlockOwner { client: 3, owner: 9 }, pid: 1, uid: 1000, kind: FlockKind::Write, start, end }
    }

    fn replay(start: u64, end: u64) -> FlockRequest {
        let l = lock(start, end);
        FlockRequest { file: Fid(5), owner: l.owner, pid: 1, uid: 1000, kind: Some(l.kind), start, end }
    }

    #[test]
    fn a_seal_proves_its_grant_and_the_pieces_of_it_after_one_restart_only() {
        let dir = tempfile::tempdir().unwrap();
        let first = Sealer::open(dir.path()).unwrap();
        let seal = first.seal(Fid(5), &lock(0, 99));
        assert_eq!(first.check(&replay(0, 99), Some(&seal), false), Ok(()));
        assert_eq!(first.check(&replay(10, 19), Some(&seal), false), Ok(()), "a piece of it");
        assert_eq!(first.check(&replay(0, 100), Some(&seal), false), Err(SealRefusal::Wider));
        assert_eq!(first.check(&replay(0, 99), None, false), Err(SealRefusal::Missing));
        let other_file = FlockRequest { file: Fid(6), ..replay(0, 99) };
        assert_eq!(first.check(&other_file, Some(&seal), false), Err(SealRefusal::Forged));
        let other_uid = FlockRequest { uid: 0, ..replay(0, 99) };
        assert_eq!(first.check(&other_uid, Some(&seal), false), Err(SealRefusal::Forged));
        let widened = FlockSeal { end: u64::MAX, ..seal };
        assert_eq!(first.check(&replay(0, 200), Some(&widened), false), Err(SealRefusal::Forged));

        let mode = std::fs::metadata(dir.path().join(SECRET_FILE)).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);
        let second = Sealer::open(dir.path()).unwrap();
        assert_eq!(second.check(&replay(0, 99), Some(&seal), true), Ok(()), "during the grace after a restart");
        assert_eq!(second.check(&replay(0, 99), Some(&seal), false), Err(SealRefusal::Forged), "not outside it");
        assert!(second.seal(Fid(5), &lock(0, 99)).grant > seal.grant, "grant numbers grow across restarts");
        let third = Sealer::open(dir.path()).unwrap();
        assert_eq!(third.check(&replay(0, 99), Some(&seal), true), Err(SealRefusal::Forged), "two restarts on");
    }

    #[test]
    fn a_secret_that_is_a_link_or_of_the_wrong_size_is_refused_naming_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join(SECRET_FILE)).unwrap();
        let refused = Sealer::open(dir.path()).err().expect("a link is refused");
        assert!(refused.to_string().contains("remove it"), "{refused}");
        std::fs::remove_file(dir.path().join(SECRET_FILE)).unwrap();
        std::fs::write(dir.path().join(SECRET_FILE), b"short").unwrap();
        let refused = Sealer::open(dir.path()).err().expect("a short secret is refused");
        assert!(refused.to_string().contains("5 bytes"), "{refused}");
    }
}
