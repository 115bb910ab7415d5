//! Restriping a file in place (`lfs migrate`, `lanefs migrate`): the rows
//! of a migration, from its start to the swap of layouts.
//!
//! As Lustre's `lfs migrate` copies a file into a volatile file (one
//! without a name) and then swaps the two files' layouts, a migration
//! here is a volatile inode holding the new layout's objects, recorded in
//! `migrations` beside the file it is for. The migrating client copies the
//! bytes into it under a group lock on the file (see the network client's
//! `migrate`), then commits: in one transaction the file takes the
//! volatile inode's objects, components, stripe size and pool, its old
//! objects are queued for destruction under the volatile inode's fid
//! (which no client holds open, so they go at once, even while clients
//! hold the file open: their next I/O finds the objects gone and fetches
//! the new layout), and the volatile inode goes.
//!
//! A file has at most one migration: starting another abandons the first
//! (its volatile inode and objects go), and so does removing the file. A
//! migration whose client died stays until then; it holds one file's
//! worth of objects.
//!
//! Invariant (checked in [`crate::Mds::check_invariants`]): every
//! migration pairs a named file with a distinct file that has no name, and
//! the nameless files are exactly the migrations' volatile ones.

use crate::schema;
use crate::Db;
use crate::{ComponentSpec, Fid, MdsError, PoolName, StripeSpec};
use lanefs_core::layout::Layout;
use rusqlite::{params, Connection, OptionalExtension};

/// The striping a migration gives a file told no other: its own stripe
/// count, stripe size, overstriping and pool (each component's, for a
/// composite layout), on OSTs the MDS chooses afresh, as `lfs migrate
/// FILE` keeps the file's layout.
pub(crate) fn own_striping(
    layout: &Layout,
    pool: Option<PoolName>,
    component_pools: &[Option<PoolName>],
) -> StripeSpec {
    let striping = |index: usize, pool: Option<PoolName>| StripeSpec {
        count: Some(i64::from(layout.components()[index].count)),
        overstripe: layout.component_is_overstriped(index),
        size: Some(layout.components()[index].stripe_size),
        pool,
        ..StripeSpec::default()
    };
    if !layout.is_composite() {
        return striping(0, pool);
    }
    let components = (0..layout.components().len())
        .map(|index| ComponentSpec {
            end: layout.components()[index].end,
            stripe: striping(index, component_pools.get(index).copied().flatten()),
        })
        .collect();
    StripeSpec { components: Some(components), ..StripeSpec::default() }
}

/// The volatile inode of `file`'s migration, if one is under way.
pub(crate) fn volatile_of(conn: &Connection, file: Fid) -> Result<Option<Fid>, MdsError> {
    let sql = "SELECT volatile FROM migrations WHERE fid = ?1";
    Ok(conn.prepare_cached(sql).db()?.query_row([file.0], |row| row.get(0)).optional().db()?.map(Fid))
}

/// Records `volatile` (a file inode without a name, holding the new
/// layout) as `file`'s migration, abandoning any migration before it.
pub(crate) fn start(conn: &Connection, file: Fid, volatile: Fid) -> Result<(), MdsError> {
    abandon(conn, file)?;
    conn.prepare_cached("INSERT INTO migrations (fid, volatile) VALUES (?1, ?2)")
        .db()?
        .execute(params![file.0, volatile.0])
        .db()?;
    Ok(())
}

/// Ends `file`'s migration, if any, without a swap: its volatile inode
/// goes, and its objects are queued for destruction. Returns whether
/// there was one.
pub(crate) fn abandon(conn: &Connection, file: Fid) -> Result<bool, MdsError> {
    let Some(volatile) = volatile_of(conn, file)? else { return Ok(false) };
    conn.prepare_cached("DELETE FROM migrations WHERE fid = ?1").db()?.execute([file.0]).db()?;
    schema::delete_inode(conn, schema::inode(conn, volatile)?)?;
    Ok(true)
}

/// The swap: `file` takes `volatile`'s layout (its objects, components,
/// stripe size and pool) and its change time moves to `now_ns`; its old
/// objects are queued for destruction and the volatile inode goes.
/// Returns the old layout. `volatile` must be `file`'s migration.
pub(crate) fn swap(conn: &Connection, file: Fid, volatile: Fid, now_ns: u64) -> Result<Layout, MdsError> {
    assert_eq!(volatile_of(conn, file)?, Some(volatile), "swapping {file:?} with a volatile inode not its own");
    let old = schema::layout(conn, file)?;
    // Under the volatile inode's fid, which no client holds open: they
    // are destroyed whoever holds the file open.
    let queue = "INSERT INTO destroy_queue (ost, object, fid) SELECT ost, object, ?2 FROM objects WHERE fid = ?1";
    conn.prepare_cached(queue).db()?.execute(params![file.0, volatile.0]).db()?;
    for table in ["objects", "components"] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE fid = ?1")).db()?.execute([file.0]).db()?;
        conn.prepare_cached(&format!("UPDATE {table} SET fid = ?1 WHERE fid = ?2"))
            .db()?
            .execute(params![file.0, volatile.0])
            .db()?;
    }
    let sql = "UPDATE inodes SET stripe_size = (SELECT stripe_size FROM inodes WHERE fid = ?2), \
                                 pool = (SELECT pool FROM inodes WHERE fid = ?2), ctime_ns = ?3 \
               WHERE fid = ?1";
    conn.prepare_cached(sql).db()?.execute(params![file.0, volatile.0, now_ns]).db()?;
    conn.prepare_cached("DELETE FROM migrations WHERE fid = ?1").db()?.execute([file.0]).db()?;
    conn.prepare_cached("DELETE FROM xattrs WHERE fid = ?1").db()?.execute([volatile.0]).db()?;
    let deleted = conn.prepare_cached("DELETE FROM inodes WHERE fid = ?1").db()?.execute([volatile.0]).db()?;
    assert_eq!(deleted, 1, "the volatile inode {volatile:?} has a row");
    Ok(old)
}
