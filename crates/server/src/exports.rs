//! Who an OSS's clients are, across connections and restarts (Lustre's
//! exports and the client slots of `last_rcvd`).
//!
//! A client names itself with a random identity (`uuid`) it keeps for its
//! whole life, on every connection it makes ([`lanefs_proto::wire::Wire::Session`]).
//! The OSS gives each identity one [`ClientId`], the name its OSTs' lock
//! namespaces and commit records use, and keeps the table on disk
//! (`exports.json` in the OSS's data directory, replaced atomically), so
//! that after a restart a client that comes back to replay is the client
//! the OSTs' records name. The table is written before any OST record that
//! could name a new id ([`Exports::save_if_changed`], called by the OST
//! threads before they write their records), not at every new connection:
//! a connection that never starts a session with an OST costs no write. A
//! client that connects again while its old connection lingers takes its
//! session over.
//!
//! A client that is gone for good (no connection, and no word for longer
//! than the OSS's export timeout, as Lustre's ping evictor allows) is
//! evicted from every OST and its entry dropped, so that the table and the
//! recovery lists do not grow with dead clients.
//!
//! Bound: [`EXPORTS_MAX`] identities; a new client past it is refused.

use lanefs_core::ClientId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Client identities an OSS keeps.
pub const EXPORTS_MAX: usize = 1 << 16;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Table {
    next: u32,
    clients: BTreeMap<u64, u32>,
}

/// The identity table of one OSS (see the module docs).
#[derive(Debug)]
pub struct Exports {
    path: PathBuf,
    table: Table,
    /// Changed since it was last written.
    changed: bool,
}

impl Exports {
    /// Load the table of the OSS whose data directory is `dir` (empty if
    /// there is none yet).
    pub fn open(dir: &Path) -> std::io::Result<Exports> {
        let path = dir.join("exports.json");
        let table = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::other(format!(
                    "{}: unreadable client table ({e}); move it aside to start the OSS without recovery",
                    path.display()
                ))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Table { next: 1, clients: BTreeMap::new() },
            Err(e) => return Err(e),
        };
        Ok(Exports { path, table, changed: false })
    }

    /// The id of client `uuid`, made if it is new (written with the next
    /// [`Exports::save_if_changed`]).
    pub fn id_of(&mut self, uuid: u64) -> Result<ClientId, String> {
        if let Some(&id) = self.table.clients.get(&uuid) {
            return Ok(ClientId(id));
        }
        if self.table.clients.len() >= EXPORTS_MAX {
            return Err(format!("this OSS already serves {EXPORTS_MAX} clients; retry when some have left"));
        }
        let id = self.table.next;
        self.table.next += 1;
        self.table.clients.insert(uuid, id);
        self.changed = true;
        Ok(ClientId(id))
    }

    /// Write the table if it changed since it was last written.
    pub fn save_if_changed(&mut self) -> std::io::Result<()> {
        if self.changed {
            self.save()?;
            self.changed = false;
        }
        Ok(())
    }

    /// Client `id` is gone for good (forgotten with the next write).
    pub fn remove(&mut self, id: ClientId) {
        let before = self.table.clients.len();
        self.table.clients.retain(|_, c| *c != id.0);
        self.changed |= self.table.clients.len() != before;
    }

    pub fn len(&self) -> usize {
        self.table.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.clients.is_empty()
    }

    fn save(&self) -> std::io::Result<()> {
        let bytes = serde_json::to_vec_pretty(&self.table).map_err(std::io::Error::other)?;
        lanefs_net::runtime_files::replace_private_file(&self.path, &bytes, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = Exports::open(dir.path()).unwrap();
        let a = e.id_of(0xaaaa).unwrap();
        let b = e.id_of(0xbbbb).unwrap();
        assert_ne!(a, b);
        assert_eq!(e.id_of(0xaaaa).unwrap(), a);
        e.save_if_changed().unwrap();
        drop(e);
        let mut e = Exports::open(dir.path()).unwrap();
        assert_eq!(e.id_of(0xbbbb).unwrap(), b);
        e.remove(a);
        assert_eq!(e.len(), 1);
        let c = e.id_of(0xcccc).unwrap();
        assert!(c != a && c != b, "ids are never reused");
        std::fs::write(dir.path().join("exports.json"), b"{not json").unwrap();
        let err = Exports::open(dir.path()).unwrap_err();
        assert!(err.to_string().contains("move it aside"), "{err}");
    }
}
