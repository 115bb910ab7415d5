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

use crate::Db;
use crate::WriteKind;
use crate::{Credentials, Mds, MdsError};
use lanefs_core::units::OstIndex;
use lanefs_proto::pools::{ost_uuid, PoolChange, PoolInfo, PoolName, FSNAME, POOLS_MAX};
use rusqlite::{params, Connection, OptionalExtension};

/// The members of `pool`, in index order; `None` if no such pool.
pub(crate) fn members(conn: &Connection, pool: &PoolName) -> Result<Option<Vec<OstIndex>>, MdsError> {
    if !exists(conn, pool)? {
        return Ok(None);
    }
    let sql = "SELECT ost FROM ost_pool_members WHERE pool = ?1 ORDER BY ost";
    let mut select = conn.prepare_cached(sql).db()?;
    let osts = select.query_map([pool.as_str()], |row| Ok(OstIndex(row.get(0)?))).db()?;
    Ok(Some(osts.collect::<Result<_, _>>().db()?))
}

fn exists(conn: &Connection, pool: &PoolName) -> Result<bool, MdsError> {
    let sql = "SELECT 1 FROM ost_pools WHERE name = ?1";
    Ok(conn.prepare_cached(sql).db()?.query_row([pool.as_str()], |_| Ok(())).optional().db()?.is_some())
}

/// Returns `pool`'s round-robin position and advances it by one.
pub(crate) fn take_round_robin(conn: &Connection, pool: &PoolName) -> Result<u64, MdsError> {
    let sql = "UPDATE ost_pools SET round_robin = round_robin + 1 WHERE name = ?1 RETURNING round_robin - 1";
    conn.prepare_cached(sql).db()?.query_row([pool.as_str()], |row| row.get(0)).db()
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

/// `pool_add`: `osts` join `pool`, whose members are `members`; each must
/// be one of the file system's `ost_count` OSTs and not a member yet.
fn add_members(
    tx: &Connection,
    pool: &PoolName,
    osts: &[u32],
    members: &[OstIndex],
    ost_count: u32,
) -> Result<(), MdsError> {
    let full = pool.full();
    let mut insert = tx.prepare_cached("INSERT INTO ost_pool_members (pool, ost) VALUES (?1, ?2)").db()?;
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
            return Err(MdsError::InvalidPool { reason: format!("{} is already in pool {full}", ost_uuid(ost)) });
        }
        insert.execute(params![pool.as_str(), ost]).db()?;
        added.push(ost);
    }
    Ok(())
}

/// `pool_remove`: `osts`, each a member of `pool` (`members`), leave it.
fn remove_members(tx: &Connection, pool: &PoolName, osts: &[u32], members: &[OstIndex]) -> Result<(), MdsError> {
    let mut delete = tx.prepare_cached("DELETE FROM ost_pool_members WHERE pool = ?1 AND ost = ?2").db()?;
    for &ost in osts {
        if !members.contains(&OstIndex(ost)) || delete.execute(params![pool.as_str(), ost]).db()? == 0 {
            return Err(MdsError::InvalidPool {
                reason: format!("{} not found in pool {}", ost_uuid(ost), pool.full()),
            });
        }
    }
    Ok(())
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
                    let count: i64 = tx.query_row("SELECT count(*) FROM ost_pools", [], |row| row.get(0)).db()?;
                    if count as usize >= POOLS_MAX {
                        return Err(MdsError::InvalidPool {
                            reason: format!(
                                "the file system has {count} pools, the most it may have: destroy one first"
                            ),
                        });
                    }
                    tx.execute("INSERT INTO ost_pools (name, round_robin) VALUES (?1, 0)", [pool.as_str()]).db()?;
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
                    tx.execute("DELETE FROM ost_pools WHERE name = ?1", [pool.as_str()]).db()?;
                    Ok(())
                }
                (PoolChange::Add(osts), Some(members)) => add_members(tx, pool, osts, &members, ost_count),
                (PoolChange::Remove(osts), Some(members)) => remove_members(tx, pool, osts, &members),
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
                let mut select = self.conn.prepare_cached("SELECT name FROM ost_pools ORDER BY name").db()?;
                let names = select.query_map([], |row| row.get::<_, String>(0)).db()?;
                let names: Vec<String> = names.collect::<Result<_, _>>().db()?;
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
