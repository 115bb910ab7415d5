//! OST pools, as Lustre's: named sets of OSTs that files can be confined to.
//!
//! A pool is a name ([`PoolName`]: 1 to [`POOL_NAME_MAX`] of `[A-Za-z0-9_-]`,
//! Lustre's `LOV_MAXPOOLNAME` and its characters) and a set of OST indices.
//! `lanefs pool_new`, `pool_add`, `pool_remove`, `pool_destroy` and
//! `pool_list` are Lustre's `lctl pool_*` commands; the definitions live in
//! the MDS's database (tables `ost_pools` and `ost_pool_members`, see
//! [`crate::schema`]) rather than in the MGS's configuration log.
//!
//! A directory's default striping may name a pool (`lanefs setstripe -p`),
//! inherited field by field as the other fields are (see [`crate::alloc`]);
//! a new file in a pool gets its objects only on the pool's OSTs, and keeps
//! the pool's name for its life (`StripeInfo::pool`). Changing a pool moves
//! no existing file.
//!
//! Rules, as Lustre's where it has them:
//! - only root (uid 0, not squashed) changes pools: Lustre's pool commands
//!   are the MGS administrator's; anyone may list them;
//! - a pool is destroyed only when empty (Lustre: "pool not empty, please
//!   remove all members"); an OST is added once and removed only if it is
//!   a member; `ignore`, `inherit` and `none` are reserved names;
//! - at most [`POOLS_MAX`] pools (Lustre has no fixed bound), each of at
//!   most the file system's OSTs.
//!
//! Where lanefs departs from Lustre: a file created in a pool that is
//! empty or no longer defined is refused, naming the fix, where Lustre
//! falls back to all OSTs; a stripe count above the pool's size is refused
//! (as lanefs refuses one above the OST count) where Lustre caps it.

use crate::WriteKind;
use crate::{Credentials, Mds, MdsError};
use lanefs_core::units::OstIndex;
use rusqlite::{params, Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

/// The longest pool name (Lustre's `LOV_MAXPOOLNAME`).
pub const POOL_NAME_MAX: usize = 15;

/// The most pools one file system may have: bounds the pool tables and a
/// `pool_list` reply.
pub const POOLS_MAX: usize = 1024;

/// The file system's name in Lustre's spellings: pools are `lanefs.NAME`,
/// OSTs `lanefs-OST0000_UUID`.
pub const FSNAME: &str = "lanefs";

/// Names Lustre keeps for itself (`lov_pool_is_reserved`): `ignore` asks
/// for no pool, `inherit` and `none` for the inherited one.
pub const RESERVED_POOL_NAMES: [&str; 3] = ["ignore", "inherit", "none"];

/// A valid pool name, without the file system's (`fast`, not
/// `lanefs.fast`). Kept inline so that the stripe values that carry one
/// stay `Copy`; on the wire it is a string, checked when it is read.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PoolName {
    len: u8,
    bytes: [u8; POOL_NAME_MAX],
}

impl PoolName {
    /// `name` or `lanefs.name`, checked as Lustre's `lctl pool_new` checks it.
    pub fn parse(text: &str) -> Result<PoolName, MdsError> {
        let bad = |reason: String| MdsError::InvalidPool { reason };
        let name = match text.split_once('.') {
            Some((fsname, name)) if fsname == FSNAME => name,
            Some((fsname, _)) => {
                return Err(bad(format!(
                "pool {text:?} names the file system {fsname:?}: this one is {FSNAME:?} (give {FSNAME}.POOL or POOL)"
            )))
            }
            None => text,
        };
        if name.is_empty() || name.len() > POOL_NAME_MAX {
            return Err(bad(format!("pool name {name:?} is not 1 to {POOL_NAME_MAX} characters long")));
        }
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(bad(format!(
                "pool name {name:?}: can contain only alphanumeric characters, underscores, and dashes"
            )));
        }
        if RESERVED_POOL_NAMES.contains(&name) {
            return Err(bad(format!("pool name cannot be {name:?}: it is reserved (ignore, inherit, none)")));
        }
        let mut bytes = [0; POOL_NAME_MAX];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(PoolName { len: name.len() as u8, bytes })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).expect("checked ASCII")
    }

    /// `lanefs.NAME`, as Lustre prints a pool.
    pub fn full(&self) -> String {
        format!("{FSNAME}.{}", self.as_str())
    }
}

impl std::fmt::Display for PoolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for PoolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl TryFrom<String> for PoolName {
    type Error = MdsError;
    fn try_from(text: String) -> Result<PoolName, MdsError> {
        PoolName::parse(&text)
    }
}

impl From<PoolName> for String {
    fn from(name: PoolName) -> String {
        name.as_str().to_string()
    }
}

/// `lanefs-OST0001_UUID`, as Lustre names an OST in a pool's listing.
pub fn ost_uuid(ost: u32) -> String {
    format!("{FSNAME}-OST{ost:04x}_UUID")
}

/// One pool as `pool_list` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolInfo {
    pub name: PoolName,
    /// The member OSTs, in index order.
    pub osts: Vec<u32>,
}

/// What a pool request changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolChange {
    /// `pool_new`: a new empty pool.
    New,
    /// `pool_destroy`: an empty pool goes.
    Destroy,
    /// `pool_add`: these OSTs join (none may be a member already).
    Add(Vec<u32>),
    /// `pool_remove`: these members leave (files keep their objects).
    Remove(Vec<u32>),
}

/// The members of `pool`, in index order; `None` if no such pool.
pub(crate) fn members(conn: &Connection, pool: &PoolName) -> Result<Option<Vec<OstIndex>>, MdsError> {
    if !exists(conn, pool)? {
        return Ok(None);
    }
    let sql = "SELECT ost FROM ost_pool_members WHERE pool = ?1 ORDER BY ost";
    let mut select = conn.prepare_cached(sql)?;
    let osts = select.query_map([pool.as_str()], |row| Ok(OstIndex(row.get(0)?)))?;
    Ok(Some(osts.collect::<Result<_, _>>()?))
}

fn exists(conn: &Connection, pool: &PoolName) -> Result<bool, MdsError> {
    let sql = "SELECT 1 FROM ost_pools WHERE name = ?1";
    Ok(conn.prepare_cached(sql)?.query_row([pool.as_str()], |_| Ok(())).optional()?.is_some())
}

/// Returns `pool`'s round-robin position and advances it by one.
pub(crate) fn take_round_robin(conn: &Connection, pool: &PoolName) -> Result<u64, MdsError> {
    let sql = "UPDATE ost_pools SET round_robin = round_robin + 1 WHERE name = ?1 RETURNING round_robin - 1";
    Ok(conn.prepare_cached(sql)?.query_row([pool.as_str()], |row| row.get(0))?)
}

/// `lanefs-OST0000_UUID, lanefs-OST0002_UUID`, or `no OSTs`.
pub(crate) fn list_osts(osts: &[OstIndex]) -> String {
    if osts.is_empty() {
        return "no OSTs".to_string();
    }
    osts.iter().map(|ost| ost_uuid(ost.0)).collect::<Vec<_>>().join(", ")
}

/// The pool a file would be created in, which must be defined and have
/// members: its name and members.
pub(crate) fn usable(conn: &Connection, pool: &PoolName) -> Result<Vec<OstIndex>, MdsError> {
    let full = pool.full();
    match members(conn, pool)? {
        None => Err(MdsError::InvalidPool {
            reason: format!(
                "pool {full} is not defined: define it with lanefs pool_new {full} and lanefs pool_add {full} OST..., \
                 or choose another pool (lanefs pool_list)"
            ),
        }),
        Some(osts) if osts.is_empty() => Err(MdsError::InvalidPool {
            reason: format!("pool {full} has no OSTs: add some with lanefs pool_add {full} OST..."),
        }),
        Some(osts) => Ok(osts),
    }
}

impl Mds {
    /// `lctl pool_new`, `pool_destroy`, `pool_add` and `pool_remove`: root only.
    pub fn change_pool(
        &mut self,
        credentials: &Credentials,
        pool: &PoolName,
        change: &PoolChange,
    ) -> Result<(), MdsError> {
        let caller = self.caller(credentials)?;
        let full = pool.full();
        if !caller.is_root() {
            return Err(MdsError::NotPermitted {
                path: full,
                reason: format!(
                    "only root (uid 0) may change OST pools (Lustre: the MGS's administrator), not uid {}",
                    caller.uid
                ),
            });
        }
        if let PoolChange::Add(osts) | PoolChange::Remove(osts) = change {
            if osts.is_empty() || osts.len() > crate::OST_COUNT_MAX as usize {
                return Err(MdsError::InvalidPool { reason: format!("give 1 to {} OSTs", crate::OST_COUNT_MAX) });
            }
        }
        self.write(WriteKind::Grows, |tx, ost_count| {
            let members = members(tx, pool)?;
            let not_found = || MdsError::InvalidPool {
                reason: format!("pool {full} not found: define it with lanefs pool_new {full}"),
            };
            match (change, members) {
                (PoolChange::New, Some(_)) => {
                    Err(MdsError::InvalidPool { reason: format!("pool {full} already exists") })
                }
                (PoolChange::New, None) => {
                    let count: i64 = tx.query_row("SELECT count(*) FROM ost_pools", [], |row| row.get(0))?;
                    if count as usize >= POOLS_MAX {
                        return Err(MdsError::InvalidPool {
                            reason: format!(
                                "the file system has {count} pools, the most it may have: destroy one first"
                            ),
                        });
                    }
                    tx.execute("INSERT INTO ost_pools (name, round_robin) VALUES (?1, 0)", [pool.as_str()])?;
                    Ok(())
                }
                (_, None) => Err(not_found()),
                (PoolChange::Destroy, Some(osts)) if !osts.is_empty() => Err(MdsError::InvalidPool {
                    reason: format!(
                        "pool {full} not empty, please remove all members (lanefs pool_remove {full} {})",
                        osts.iter().map(|ost| format!("OST{:04x}", ost.0)).collect::<Vec<_>>().join(" ")
                    ),
                }),
                (PoolChange::Destroy, Some(_)) => {
                    tx.execute("DELETE FROM ost_pools WHERE name = ?1", [pool.as_str()])?;
                    Ok(())
                }
                (PoolChange::Add(osts), Some(members)) => {
                    let mut insert = tx.prepare_cached("INSERT INTO ost_pool_members (pool, ost) VALUES (?1, ?2)")?;
                    let mut added = Vec::new();
                    for &ost in osts {
                        if ost >= ost_count {
                            return Err(MdsError::InvalidPool {
                                reason: format!(
                                    "{} is not part of the '{FSNAME}' fs: it has OSTs 0 to {} ({} to {})",
                                    ost_uuid(ost),
                                    ost_count - 1,
                                    ost_uuid(0),
                                    ost_uuid(ost_count - 1)
                                ),
                            });
                        }
                        if members.contains(&OstIndex(ost)) || added.contains(&ost) {
                            return Err(MdsError::InvalidPool {
                                reason: format!("{} is already in pool {full}", ost_uuid(ost)),
                            });
                        }
                        insert.execute(params![pool.as_str(), ost])?;
                        added.push(ost);
                    }
                    Ok(())
                }
                (PoolChange::Remove(osts), Some(members)) => {
                    let mut delete = tx.prepare_cached("DELETE FROM ost_pool_members WHERE pool = ?1 AND ost = ?2")?;
                    for &ost in osts {
                        if !members.contains(&OstIndex(ost)) || delete.execute(params![pool.as_str(), ost])? == 0 {
                            return Err(MdsError::InvalidPool {
                                reason: format!("{} not found in pool {full}", ost_uuid(ost)),
                            });
                        }
                    }
                    Ok(())
                }
            }
        })?;
        tracing::info!(pool = %pool, ?change, "changed OST pool");
        Ok(())
    }

    /// `lctl pool_list`: every pool (`None`) or one, with its members.
    pub fn list_pools(&self, pool: Option<&PoolName>) -> Result<Vec<PoolInfo>, MdsError> {
        let names: Vec<PoolName> = match pool {
            Some(pool) => vec![*pool],
            None => {
                let mut select = self.conn.prepare_cached("SELECT name FROM ost_pools ORDER BY name")?;
                let names = select.query_map([], |row| row.get::<_, String>(0))?;
                let names: Vec<String> = names.collect::<Result<_, _>>()?;
                names.iter().map(|name| PoolName::parse(name)).collect::<Result<_, _>>()?
            }
        };
        let mut pools = Vec::with_capacity(names.len());
        for name in names {
            let Some(osts) = members(&self.conn, &name)? else {
                return Err(MdsError::InvalidPool {
                    reason: format!("pool {} not found (lanefs pool_list)", name.full()),
                });
            };
            pools.push(PoolInfo { name, osts: osts.into_iter().map(|ost| ost.0).collect() });
        }
        Ok(pools)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_as_lctl_checks_them() {
        assert_eq!(PoolName::parse("fast").unwrap().as_str(), "fast");
        assert_eq!(PoolName::parse("lanefs.fast").unwrap().full(), "lanefs.fast");
        assert_eq!(PoolName::parse("a-b_C9").unwrap().to_string(), "a-b_C9");
        assert!(PoolName::parse("123456789012345").is_ok());
        let reason = |text: &str| PoolName::parse(text).unwrap_err().to_string();
        assert!(reason("1234567890123456").contains("is not 1 to 15 characters long"));
        assert!(reason("").contains("is not 1 to 15"));
        assert!(reason("lanefs.").contains("is not 1 to 15"));
        assert!(reason("a b").contains("only alphanumeric characters, underscores, and dashes"));
        assert!(reason("other.fast").contains("names the file system \"other\""));
        assert!(reason("none").contains("reserved"));
        assert!(reason("lanefs.ignore").contains("reserved"));
        let wire = bincode::serialize(&PoolName::parse("fast").unwrap()).unwrap();
        assert_eq!(bincode::deserialize::<PoolName>(&wire).unwrap().as_str(), "fast");
        let bad = bincode::serialize(&"a b".to_string()).unwrap();
        assert!(bincode::deserialize::<PoolName>(&bad).is_err());
    }
}
