//! The SQLite schema, its version check, and every row the MDS reads or writes.
//!
//! Schema version 8 (`PRAGMA user_version = 8`). Version 7 had no
//! migrations (`lanefs migrate`); a version 7 database gains their table,
//! empty. Version 6 had no
//! overstriping: a file's objects were on distinct OSTs, and a directory
//! default could not overstripe; nor composite layouts. Its `objects` and
//! `inodes` tables are rebuilt, and the `components` table made, when an
//! MDS opens it, as for every older version.
//! Version 5 had no named
//! pipes, sockets or devices; its `inodes` table is rebuilt with the new
//! kinds and the device number when an MDS opens it. Version 4 had no
//! extended attributes either; a version 4 database gains their table,
//! empty. Version 3 had no OST pools either; a version 3 database gains the
//! pool tables and columns (no pool defined, no file or directory in one).
//! Version 2 had no symbolic links, hard links, access or change times
//! either; a version 2 database is rebuilt as version 8 when an MDS opens
//! it (its times start as the modification time). Version 1 had no owners, permissions,
//! precreated objects or destroy queue, and is refused with
//! [`MdsError::SchemaVersion`]:
//!
//! ```sql
#![doc = include_str!("schema.sql")]
//! ```
//!
//! Integers are SQLite's signed 64 bits; every stored value (fids, object
//! ids, nanosecond times until the year 2262, stripe sizes below 4 GiB)
//! fits, and rusqlite refuses the write of any that would not.
//!
//! Every function here runs on the connection it is given, which for writes
//! is the caller's transaction: a request commits all its rows or none.

use crate::Db;
use crate::{Attr, ComponentSpec, DirEntry, DirPage, Fid, FileKind, MdsConfig, MdsError, Owner, PoolName, StripeSpec};
use lanefs_core::layout::Layout;
use lanefs_core::units::{ObjectId, ObjectKey, OstIndex};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// The schema this crate reads and writes, stored as `PRAGMA user_version`.
pub const SCHEMA_VERSION: i64 = 8;

/// The permissions of a new file system's root directory.
pub const ROOT_PERMISSIONS: u32 = 0o755;

const SCHEMA_SQL: &str = include_str!("schema.sql");

const KIND_FILE: i64 = 1;
const KIND_DIR: i64 = 2;
const KIND_SYMLINK: i64 = 3;
const KIND_FIFO: i64 = 4;
const KIND_SOCKET: i64 = 5;
const KIND_CHAR_DEVICE: i64 = 6;
const KIND_BLOCK_DEVICE: i64 = 7;

/// The persisted counters in the `meta` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counter {
    /// The next fid to hand out; never decreases.
    NextFid,
    /// Round-robin position for files whose starting OST the MDS chooses.
    RoundRobin,
    /// The OST count recorded in the database; never decreases.
    OstCount,
}

impl Counter {
    fn key(self) -> &'static str {
        match self {
            Counter::NextFid => "next_fid",
            Counter::RoundRobin => "round_robin",
            Counter::OstCount => "ost_count",
        }
    }
}

/// An inode as the permission checks need it: a name's target, or the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Inode {
    pub fid: Fid,
    pub kind: FileKind,
    pub uid: u32,
    pub gid: u32,
    /// `mode & 07777`.
    pub permissions: u32,
}

/// The columns [`inode_of_row`] reads, from `inodes` as `i`.
const INODE_COLUMNS: &str = "i.fid, i.kind, i.uid, i.gid, i.permissions";

fn inode_of_row(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<(u64, i64, u32, u32, u32)> {
    Ok((row.get(first)?, row.get(first + 1)?, row.get(first + 2)?, row.get(first + 3)?, row.get(first + 4)?))
}

fn inode_of((fid, kind, uid, gid, permissions): (u64, i64, u32, u32, u32)) -> Result<Inode, MdsError> {
    Ok(Inode { fid: Fid(fid), kind: kind_of(kind)?, uid, gid, permissions })
}

fn kind_of(code: i64) -> Result<FileKind, MdsError> {
    match code {
        KIND_FILE => Ok(FileKind::File),
        KIND_DIR => Ok(FileKind::Dir),
        KIND_SYMLINK => Ok(FileKind::Symlink),
        KIND_FIFO => Ok(FileKind::Fifo),
        KIND_SOCKET => Ok(FileKind::Socket),
        KIND_CHAR_DEVICE => Ok(FileKind::CharDevice),
        KIND_BLOCK_DEVICE => Ok(FileKind::BlockDevice),
        _ => Err(MdsError::Database(format!("corrupt inode kind {code}: the database was edited by hand"))),
    }
}

fn code_of(kind: FileKind) -> i64 {
    match kind {
        FileKind::File => KIND_FILE,
        FileKind::Dir => KIND_DIR,
        FileKind::Symlink => KIND_SYMLINK,
        FileKind::Fifo => KIND_FIFO,
        FileKind::Socket => KIND_SOCKET,
        FileKind::CharDevice => KIND_CHAR_DEVICE,
        FileKind::BlockDevice => KIND_BLOCK_DEVICE,
    }
}

/// Checks the schema version (creating the schema in an empty database) and
/// records or grows the OST count, in one transaction. Returns the OST
/// count, and whether the database was created now.
pub(crate) fn prepare(
    conn: &mut Connection,
    path_label: &str,
    config: &MdsConfig,
    now_ns: u64,
) -> Result<(u32, bool), MdsError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).db()?;
    let found_version: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0)).db()?;
    match found_version {
        0 => {
            let table_count: i64 = tx.query_row("SELECT count(*) FROM sqlite_master", [], |row| row.get(0)).db()?;
            if table_count > 0 {
                let reason = format!("it has {table_count} schema objects but no lanefs schema version");
                return Err(MdsError::NotAnMdsDatabase { path: path_label.to_string(), reason });
            }
            create(&tx, now_ns, config.root_owner)?;
            tracing::info!(path = path_label, version = SCHEMA_VERSION, "created MDS database");
        }
        SCHEMA_VERSION if lanefs_core::planted::active(lanefs_core::planted::Bug::LoseDestroyQueue) => {
            tx.execute("DELETE FROM destroy_queue", []).db()?;
        }
        SCHEMA_VERSION => {}
        7 => {
            add_migrations_table(&tx)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION).db()?;
            tracing::info!(
                path = path_label,
                version = SCHEMA_VERSION,
                "added migrations to an MDS database of schema version 7"
            );
        }
        5 | 6 => {
            rebuild_inodes(&tx)?;
            rebuild_objects(&tx)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION).db()?;
            let added = if found_version == 5 { "named pipes, sockets, devices, " } else { "" };
            tracing::info!(
                path = path_label,
                version = SCHEMA_VERSION,
                "added {added}overstriping and composite layouts to an MDS database of schema version {found_version}"
            );
        }
        4 => {
            add_xattr_table(&tx)?;
            rebuild_inodes(&tx)?;
            rebuild_objects(&tx)?;
            tx.pragma_update(None, "user_version", SCHEMA_VERSION).db()?;
            tracing::info!(
                path = path_label,
                version = SCHEMA_VERSION,
                "added extended attributes to an MDS database of schema version 4"
            );
        }
        3 => {
            migrate_from_3(&tx)?;
            tracing::info!(
                path = path_label,
                version = SCHEMA_VERSION,
                "added OST pools to an MDS database of schema version 3"
            );
        }
        2 => {
            migrate_from_2(&tx)?;
            tracing::info!(path = path_label, version = SCHEMA_VERSION, "rebuilt MDS database of schema version 2");
        }
        _ => {
            return Err(MdsError::SchemaVersion {
                path: path_label.to_string(),
                found_version,
                expected_version: SCHEMA_VERSION,
            })
        }
    }
    let ost_count = grow_ost_count(&tx, config.ost_count)?;
    tx.commit().db()?;
    Ok((ost_count, found_version == 0))
}

/// The `CREATE TABLE` statement of `table` in [`SCHEMA_SQL`], creating
/// `as_name` instead.
fn table_sql(table: &str, as_name: &str) -> String {
    let start = SCHEMA_SQL.find(&format!("CREATE TABLE {table} (")).expect("the schema creates the table");
    let end = start + SCHEMA_SQL[start..].find(';').expect("a statement ends") + 1;
    SCHEMA_SQL[start..end].replacen(&format!("CREATE TABLE {table} ("), &format!("CREATE TABLE {as_name} ("), 1)
}

/// Version 3 to 6: `inodes` gains the pool columns (NULL: no pool), the
/// pool and attribute tables are made, empty, and `inodes` is rebuilt
/// for the kinds of version 6.
fn migrate_from_3(tx: &Connection) -> Result<(), MdsError> {
    for column in ["pool", "default_pool"] {
        let definition = column_sql("inodes", column);
        tx.execute_batch(&format!("ALTER TABLE inodes ADD COLUMN {definition}")).db()?;
    }
    add_pool_tables(tx)?;
    add_xattr_table(tx)?;
    rebuild_inodes(tx)?;
    rebuild_objects(tx)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION).db()?;
    Ok(())
}

/// Version 5's `inodes` (and a version 3 or 4 table brought to its
/// columns) rebuilt as version 7's: SQLite cannot widen a CHECK in place,
/// so the rows are copied into a new table (every device number 0), with
/// foreign keys off, which [`Mds::start`](crate::Mds) arranges; they are
/// checked before the transaction commits.
fn rebuild_inodes(tx: &Connection) -> Result<(), MdsError> {
    const COLUMNS: &str = "fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions, stripe_size, target, \
                           default_count, default_size, default_start, pool, default_pool";
    tx.execute_batch(&table_sql("inodes", "inodes_v6")).db()?;
    tx.execute_batch(&format!(
        "INSERT INTO inodes_v6 ({COLUMNS}) SELECT {COLUMNS} FROM inodes; \
         DROP TABLE inodes; \
         ALTER TABLE inodes_v6 RENAME TO inodes;"
    ))
    .db()?;
    check_foreign_keys(tx)
}

/// `objects` rebuilt as version 7's, without version 6's one object per
/// file on each OST (SQLite cannot drop a UNIQUE in place), with foreign
/// keys off, which [`Mds::start`](crate::Mds) arranges; and the tables of
/// composite layouts' components, of directories' composite defaults and
/// of migrations made, empty (every file and default plain, none
/// migrating).
fn rebuild_objects(tx: &Connection) -> Result<(), MdsError> {
    tx.execute_batch(&table_sql("components", "components")).db()?;
    tx.execute_batch(&table_sql("default_components", "default_components")).db()?;
    add_migrations_table(tx)?;
    tx.execute_batch(&table_sql("objects", "objects_v7")).db()?;
    tx.execute_batch(
        "INSERT INTO objects_v7 (fid, stripe, ost, object) SELECT fid, stripe, ost, object FROM objects; \
         DROP TABLE objects; \
         ALTER TABLE objects_v7 RENAME TO objects;",
    )
    .db()?;
    check_foreign_keys(tx)
}

/// Every row that names another names one that exists.
fn check_foreign_keys(tx: &Connection) -> Result<(), MdsError> {
    let broken: i64 = tx.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |row| row.get(0)).db()?;
    if broken > 0 {
        return Err(MdsError::Database(format!(
            "rebuilding the schema left {broken} rows naming missing ones: the database was edited by hand"
        )));
    }
    Ok(())
}

/// The definition of `column` in `table`'s `CREATE TABLE` in [`SCHEMA_SQL`].
fn column_sql(table: &str, column: &str) -> String {
    let sql = table_sql(table, table);
    let line = sql.lines().map(str::trim).find(|line| line.starts_with(&format!("{column} "))).expect("the column");
    line.trim_end_matches(',').to_string()
}

fn add_migrations_table(tx: &Connection) -> Result<(), MdsError> {
    tx.execute_batch(&table_sql("migrations", "migrations")).db()?;
    Ok(())
}

fn add_xattr_table(tx: &Connection) -> Result<(), MdsError> {
    tx.execute_batch(&table_sql("xattrs", "xattrs")).db()?;
    Ok(())
}

fn add_pool_tables(tx: &Connection) -> Result<(), MdsError> {
    tx.execute_batch(&table_sql("ost_pools", "ost_pools")).db()?;
    tx.execute_batch(&table_sql("ost_pool_members", "ost_pool_members")).db()?;
    Ok(())
}

/// Version 2 to 6: `inodes` gains symbolic links, two times and the pool
/// columns, `dentries` gives up one name per inode, `destroy_queue` gains
/// the removed file, and the pool and attribute tables are made. Both tables are rebuilt (SQLite cannot
/// change a CHECK or drop a UNIQUE in place), with foreign keys off, which
/// [`Mds::start`](crate::Mds) arranges; they are checked before the
/// transaction commits.
fn migrate_from_2(tx: &Connection) -> Result<(), MdsError> {
    tx.execute_batch(&table_sql("inodes", "inodes_v3")).db()?;
    tx.execute_batch(
        "INSERT INTO inodes_v3 (fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions, stripe_size, \
                                target, default_count, default_size, default_start) \
         SELECT fid, kind, mtime_ns, mtime_ns, mtime_ns, uid, gid, permissions, stripe_size, \
                NULL, default_count, default_size, default_start FROM inodes; \
         DROP TABLE inodes; \
         ALTER TABLE inodes_v3 RENAME TO inodes;",
    )
    .db()?;
    tx.execute_batch(&table_sql("dentries", "dentries_v3")).db()?;
    tx.execute_batch(
        "INSERT INTO dentries_v3 (parent, name, fid) SELECT parent, name, fid FROM dentries; \
         DROP TABLE dentries; \
         ALTER TABLE dentries_v3 RENAME TO dentries; \
         CREATE INDEX dentries_by_fid ON dentries (fid); \
         ALTER TABLE destroy_queue ADD COLUMN fid INTEGER;",
    )
    .db()?;
    add_pool_tables(tx)?;
    add_xattr_table(tx)?;
    rebuild_objects(tx)?;
    check_foreign_keys(tx)?;
    tx.pragma_update(None, "user_version", SCHEMA_VERSION).db()?;
    Ok(())
}

fn create(conn: &Connection, now_ns: u64, root_owner: Owner) -> Result<(), MdsError> {
    conn.execute_batch(SCHEMA_SQL).db()?;
    let root = Fid::ROOT;
    conn.execute(
        "INSERT INTO inodes (fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions) \
         VALUES (?1, ?2, ?3, ?3, ?3, ?4, ?5, ?6)",
        params![root.0, KIND_DIR, now_ns, root_owner.uid, root_owner.gid, ROOT_PERMISSIONS],
    )
    .db()?;
    let mut insert = conn.prepare("INSERT INTO meta (key, value) VALUES (?1, ?2)").db()?;
    for (counter, value) in [(Counter::NextFid, root.0 + 1), (Counter::RoundRobin, 0), (Counter::OstCount, 0)] {
        insert.execute(params![counter.key(), value]).db()?;
    }
    conn.pragma_update(None, "user_version", SCHEMA_VERSION).db()?;
    Ok(())
}

/// Records `configured` OSTs (adding counters for new ones), or refuses to
/// shrink below the recorded count.
fn grow_ost_count(conn: &Connection, configured: u32) -> Result<u32, MdsError> {
    let recorded = u32::try_from(read_counter(conn, Counter::OstCount)?)
        .map_err(|_| MdsError::Database("corrupt OST count: the database was edited by hand".into()))?;
    if configured < recorded {
        return Err(MdsError::OstCountDecreased { recorded_ost_count: recorded, configured_ost_count: configured });
    }
    if configured > recorded {
        let mut insert =
            conn.prepare("INSERT INTO ost_counters (ost, next_object, precreated) VALUES (?1, 1, 0)").db()?;
        for ost in recorded..configured {
            insert.execute([ost]).db()?;
        }
        conn.execute("UPDATE meta SET value = ?1 WHERE key = ?2", params![configured, Counter::OstCount.key()]).db()?;
        if recorded > 0 {
            tracing::info!(recorded, configured, "added OSTs");
        }
    }
    Ok(configured)
}

pub(crate) fn read_counter(conn: &Connection, counter: Counter) -> Result<u64, MdsError> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [counter.key()], |row| row.get(0)).db()
}

/// Returns the counter's value and advances it by one.
pub(crate) fn take_counter(conn: &Connection, counter: Counter) -> Result<u64, MdsError> {
    let sql = "UPDATE meta SET value = value + 1 WHERE key = ?1 RETURNING value - 1";
    conn.query_row(sql, [counter.key()], |row| row.get(0)).db()
}

/// A fresh object id from `ost`'s pool of precreated objects: never handed
/// out before. `None` if the pool is empty.
pub(crate) fn take_object_id(conn: &Connection, ost: OstIndex) -> Result<Option<ObjectId>, MdsError> {
    let sql = "UPDATE ost_counters SET next_object = next_object + 1 WHERE ost = ?1 AND next_object <= precreated \
               RETURNING next_object - 1";
    Ok(conn.prepare_cached(sql).db()?.query_row([ost.0], |row| row.get(0)).optional().db()?.map(ObjectId))
}

/// `(next_object, precreated)` of `ost`.
pub(crate) fn pool(conn: &Connection, ost: OstIndex) -> Result<(u64, u64), MdsError> {
    let sql = "SELECT next_object, precreated FROM ost_counters WHERE ost = ?1";
    conn.prepare_cached(sql).db()?.query_row([ost.0], |row| Ok((row.get(0)?, row.get(1)?))).db()
}

/// Raises `ost`'s precreated watermark to `last_id` (never lowers it).
pub(crate) fn raise_precreated(conn: &Connection, ost: OstIndex, last_id: ObjectId) -> Result<(), MdsError> {
    let sql = "UPDATE ost_counters SET precreated = max(precreated, ?2) WHERE ost = ?1";
    conn.prepare_cached(sql).db()?.execute(params![ost.0, last_id.0]).db()?;
    Ok(())
}

/// Up to `count_max` objects of `ost` waiting to be destroyed, lowest
/// first, passing over those of the removed files `open` names.
pub(crate) fn queued_destroys(
    conn: &Connection,
    ost: OstIndex,
    count_max: usize,
    open: &dyn Fn(Fid) -> bool,
) -> Result<Vec<ObjectId>, MdsError> {
    let sql = "SELECT object, fid FROM destroy_queue WHERE ost = ?1 ORDER BY object";
    let mut select = conn.prepare_cached(sql).db()?;
    let mut rows = select.query(params![ost.0]).db()?;
    let mut objects = Vec::new();
    while objects.len() < count_max {
        let Some(row) = rows.next().db()? else { break };
        let fid: Option<u64> = row.get(1).db()?;
        if !fid.is_some_and(|fid| open(Fid(fid))) {
            objects.push(ObjectId(row.get(0).db()?));
        }
    }
    Ok(objects)
}

/// Forgets destroyed objects; returns how many were queued.
pub(crate) fn dequeue_destroys(conn: &Connection, ost: OstIndex, objects: &[ObjectId]) -> Result<usize, MdsError> {
    let mut delete = conn.prepare_cached("DELETE FROM destroy_queue WHERE ost = ?1 AND object = ?2").db()?;
    let mut deleted = 0;
    for object in objects {
        deleted += delete.execute(params![ost.0, object.0]).db()?;
    }
    Ok(deleted)
}

/// The inode `fid`, which must exist.
pub(crate) fn inode(conn: &Connection, fid: Fid) -> Result<Inode, MdsError> {
    let sql = format!("SELECT {INODE_COLUMNS} FROM inodes i WHERE i.fid = ?1");
    inode_of(conn.prepare_cached(&sql).db()?.query_row([fid.0], |row| inode_of_row(row, 0)).db()?)
}

/// The inode `fid`, if it exists (a fid a client names may be long gone).
pub(crate) fn inode_if_any(conn: &Connection, fid: Fid) -> Result<Option<Inode>, MdsError> {
    // Fids are SQLite integers: none is above i64::MAX.
    if i64::try_from(fid.0).is_err() {
        return Ok(None);
    }
    let sql = format!("SELECT {INODE_COLUMNS} FROM inodes i WHERE i.fid = ?1");
    let found = conn.prepare_cached(&sql).db()?.query_row([fid.0], |row| inode_of_row(row, 0)).optional().db()?;
    found.map(inode_of).transpose()
}

/// Whether objects of the removed file `fid` wait in the destroy queue.
pub(crate) fn awaits_destruction(conn: &Connection, fid: Fid) -> Result<bool, MdsError> {
    let Ok(fid) = i64::try_from(fid.0) else { return Ok(false) };
    let sql = "SELECT 1 FROM destroy_queue WHERE fid = ?1 LIMIT 1";
    Ok(conn.prepare_cached(sql).db()?.query_row([fid], |_| Ok(())).optional().db()?.is_some())
}

pub(crate) fn lookup(conn: &Connection, parent: Fid, name: &str) -> Result<Option<Inode>, MdsError> {
    let sql = format!(
        "SELECT {INODE_COLUMNS} FROM dentries d JOIN inodes i ON i.fid = d.fid WHERE d.parent = ?1 AND d.name = ?2"
    );
    let found = conn
        .prepare_cached(&sql)
        .db()?
        .query_row(params![parent.0, name], |row| inode_of_row(row, 0))
        .optional()
        .db()?;
    found.map(inode_of).transpose()
}

/// What a new inode is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NewInode<'a> {
    /// A file, and the OST pool its objects came from (of each
    /// component, for a composite layout).
    File(&'a Layout, &'a [Option<PoolName>]),
    Dir,
    Symlink(&'a str),
    /// A named pipe, socket or device, and a device's number.
    Special(FileKind, u64),
}

/// Inserts an inode owned by `owner`, with all three times `now_ns`: a
/// file with its layout's objects, a directory, a symbolic link, or a
/// special file.
pub(crate) fn insert_inode(
    conn: &Connection,
    fid: Fid,
    new: NewInode<'_>,
    now_ns: u64,
    (owner, permissions): (Owner, u32),
) -> Result<(), MdsError> {
    let component_pools: &[Option<PoolName>] = match new {
        NewInode::File(_, pools) => pools,
        _ => &[],
    };
    let (kind, layout, target, pool, rdev) = match new {
        NewInode::File(layout, pools) => (KIND_FILE, Some(layout), None, pools.first().copied().flatten(), 0),
        NewInode::Dir => (KIND_DIR, None, None, None, 0),
        NewInode::Symlink(target) => (KIND_SYMLINK, None, Some(target), None, 0),
        NewInode::Special(kind, rdev) => {
            assert!(kind.is_special(), "a special inode of kind {kind:?}");
            (code_of(kind), None, None, None, if kind.is_device() { rdev } else { 0 })
        }
    };
    // Device numbers are 64 bits; SQLite keeps them as signed.
    let rdev = rdev as i64;
    let stripe_size = layout.map(Layout::stripe_size);
    let pool = pool.map(|pool| pool.as_str().to_string());
    let sql = "INSERT INTO inodes (fid, kind, mtime_ns, atime_ns, ctime_ns, uid, gid, permissions, stripe_size, \
                                   target, pool, rdev) \
               VALUES (?1, ?2, ?3, ?3, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
    conn.prepare_cached(sql)
        .db()?
        .execute(params![fid.0, kind, now_ns, owner.uid, owner.gid, permissions, stripe_size, target, pool, rdev])
        .db()?;
    let Some(layout) = layout else { return Ok(()) };
    let mut insert =
        conn.prepare_cached("INSERT INTO objects (fid, stripe, ost, object) VALUES (?1, ?2, ?3, ?4)").db()?;
    for (stripe, key) in (0u32..).zip(layout.objects()) {
        insert.execute(params![fid.0, stripe, key.ost.0, key.object.0]).db()?;
    }
    if layout.is_composite() {
        let sql = "INSERT INTO components (fid, component, end_offset, stripe_size, stripes, pool) \
                   VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
        let mut insert = conn.prepare_cached(sql).db()?;
        for (index, component) in layout.components().iter().enumerate() {
            let end = (!component.is_last()).then(|| i64::try_from(component.end)).transpose().map_err(|_| {
                MdsError::invalid_stripe(format!("component end {} is past the largest file size", component.end))
            })?;
            let pool = component_pools.get(index).copied().flatten().map(|pool| pool.as_str().to_string());
            insert.execute(params![fid.0, index, end, component.stripe_size, component.count, pool]).db()?;
        }
    }
    Ok(())
}

/// Each component's pool, for a composite file (empty for a plain one).
pub(crate) fn component_pools(conn: &Connection, fid: Fid) -> Result<Vec<Option<PoolName>>, MdsError> {
    let mut select = conn.prepare_cached("SELECT pool FROM components WHERE fid = ?1 ORDER BY component").db()?;
    let pools = select.query_map([fid.0], |row| row.get::<_, Option<String>>(0)).db()?;
    let mut out = Vec::new();
    for pool in pools {
        out.push(pool.db()?.map(|name| stored_pool(&name)).transpose()?);
    }
    Ok(out)
}

/// One name of `fid`: its parent and the name there (a directory's only
/// one; the first of a file's), or `None` for the root and unknown fids.
pub(crate) fn entry_of(conn: &Connection, fid: Fid) -> Result<Option<(Fid, String)>, MdsError> {
    let sql = "SELECT parent, name FROM dentries WHERE fid = ?1 ORDER BY parent, name LIMIT 1";
    let entry =
        conn.prepare_cached(sql).db()?.query_row([fid.0], |row| Ok((Fid(row.get(0)?), row.get(1)?))).optional().db()?;
    Ok(entry)
}

/// How many names `fid` has.
pub(crate) fn name_count(conn: &Connection, fid: Fid) -> Result<u64, MdsError> {
    conn.prepare_cached("SELECT count(*) FROM dentries WHERE fid = ?1").db()?.query_row([fid.0], |row| row.get(0)).db()
}

/// Deletes an inode, its objects' rows and its extended attributes (its
/// entry must be gone already), queueing a file's objects for destruction on their OSTs.
/// Returns a file's layout.
pub(crate) fn delete_inode(conn: &Connection, inode: Inode) -> Result<Option<Layout>, MdsError> {
    let layout = match inode.kind {
        FileKind::File => Some(layout(conn, inode.fid)?),
        _ => None,
    };
    let queue = "INSERT INTO destroy_queue (ost, object, fid) SELECT ost, object, fid FROM objects WHERE fid = ?1";
    conn.prepare_cached(queue).db()?.execute([inode.fid.0]).db()?;
    conn.prepare_cached("DELETE FROM objects WHERE fid = ?1").db()?.execute([inode.fid.0]).db()?;
    conn.prepare_cached("DELETE FROM components WHERE fid = ?1").db()?.execute([inode.fid.0]).db()?;
    conn.prepare_cached("DELETE FROM default_components WHERE fid = ?1").db()?.execute([inode.fid.0]).db()?;
    conn.prepare_cached("DELETE FROM xattrs WHERE fid = ?1").db()?.execute([inode.fid.0]).db()?;
    let deleted = conn.prepare_cached("DELETE FROM inodes WHERE fid = ?1").db()?.execute([inode.fid.0]).db()?;
    assert_eq!(deleted, 1, "deleting {:?}, which has no inode row", inode.fid);
    Ok(layout)
}

/// Sets an inode's owner, group and permissions (and its change time).
pub(crate) fn set_owner(
    conn: &Connection,
    fid: Fid,
    owner: Owner,
    permissions: u32,
    now_ns: u64,
) -> Result<(), MdsError> {
    let sql = "UPDATE inodes SET uid = ?2, gid = ?3, permissions = ?4, ctime_ns = ?5 WHERE fid = ?1";
    conn.prepare_cached(sql).db()?.execute(params![fid.0, owner.uid, owner.gid, permissions, now_ns]).db()?;
    Ok(())
}

/// Sets an inode's access time (and its change time to `now_ns`).
pub(crate) fn set_atime(conn: &Connection, fid: Fid, atime_ns: u64, now_ns: u64) -> Result<(), MdsError> {
    let sql = "UPDATE inodes SET atime_ns = ?2, ctime_ns = ?3 WHERE fid = ?1";
    conn.prepare_cached(sql).db()?.execute(params![fid.0, atime_ns, now_ns]).db()?;
    Ok(())
}

/// Sets an inode's change time (its links changed).
pub(crate) fn changed(conn: &Connection, fid: Fid, now_ns: u64) -> Result<(), MdsError> {
    conn.prepare_cached("UPDATE inodes SET ctime_ns = ?2 WHERE fid = ?1").db()?.execute(params![fid.0, now_ns]).db()?;
    Ok(())
}

pub(crate) fn link(conn: &Connection, parent: Fid, name: &str, fid: Fid) -> Result<(), MdsError> {
    conn.prepare_cached("INSERT INTO dentries (parent, name, fid) VALUES (?1, ?2, ?3)")
        .db()?
        .execute(params![parent.0, name, fid.0])
        .db()?;
    Ok(())
}

pub(crate) fn unlink(conn: &Connection, parent: Fid, name: &str) -> Result<(), MdsError> {
    let deleted = conn
        .prepare_cached("DELETE FROM dentries WHERE parent = ?1 AND name = ?2")
        .db()?
        .execute(params![parent.0, name])
        .db()?;
    assert_eq!(deleted, 1, "unlinking {name:?} from {parent:?}, which has no such entry");
    Ok(())
}

/// Moves an entry (the target name must be free).
pub(crate) fn move_entry(conn: &Connection, from: (Fid, &str), to: (Fid, &str)) -> Result<(), MdsError> {
    let sql = "UPDATE dentries SET parent = ?3, name = ?4 WHERE parent = ?1 AND name = ?2";
    let moved = conn.prepare_cached(sql).db()?.execute(params![from.0 .0, from.1, to.0 .0, to.1]).db()?;
    assert_eq!(moved, 1, "moving {from:?}, which has no such entry");
    Ok(())
}

/// Sets an inode's modification time to `mtime_ns` and its change time to
/// now (`mtime_ns` too, unless a caller sets a time of its own).
pub(crate) fn touch(conn: &Connection, fid: Fid, mtime_ns: u64) -> Result<(), MdsError> {
    touch_at(conn, fid, mtime_ns, mtime_ns)
}

/// Sets an inode's change time alone (one of its extended attributes
/// changed).
pub(crate) fn set_ctime(conn: &Connection, fid: Fid, now_ns: u64) -> Result<(), MdsError> {
    conn.prepare_cached("UPDATE inodes SET ctime_ns = ?2 WHERE fid = ?1").db()?.execute(params![fid.0, now_ns]).db()?;
    Ok(())
}

pub(crate) fn touch_at(conn: &Connection, fid: Fid, mtime_ns: u64, now_ns: u64) -> Result<(), MdsError> {
    let sql = "UPDATE inodes SET mtime_ns = ?2, ctime_ns = ?3 WHERE fid = ?1";
    conn.prepare_cached(sql).db()?.execute(params![fid.0, mtime_ns, now_ns]).db()?;
    Ok(())
}

/// A file's layout, rebuilt from its object rows and validated again.
pub(crate) fn layout(conn: &Connection, fid: Fid) -> Result<Layout, MdsError> {
    let stripe_size: u64 = conn
        .prepare_cached("SELECT stripe_size FROM inodes WHERE fid = ?1")
        .db()?
        .query_row([fid.0], |row| row.get(0))
        .db()?;
    let mut select =
        conn.prepare_cached("SELECT stripe, ost, object FROM objects WHERE fid = ?1 ORDER BY stripe").db()?;
    let rows = select
        .query_map([fid.0], |row| {
            let key = ObjectKey { ost: OstIndex(row.get(1)?), object: ObjectId(row.get(2)?) };
            Ok((row.get::<_, u32>(0)?, key))
        })
        .db()?;
    let mut objects = Vec::new();
    for (expected_stripe, row) in (0u32..).zip(rows) {
        let (stripe, key) = row.db()?;
        if stripe != expected_stripe {
            return Err(corrupt_layout(fid, format!("stripe {expected_stripe} is missing")));
        }
        objects.push(key);
    }
    let sql = "SELECT end_offset, stripe_size, stripes FROM components WHERE fid = ?1 ORDER BY component";
    let mut select = conn.prepare_cached(sql).db()?;
    let rows = select
        .query_map([fid.0], |row| {
            Ok((row.get::<_, Option<u64>>(0)?.unwrap_or(u64::MAX), row.get::<_, u64>(1)?, row.get::<_, usize>(2)?))
        })
        .db()?;
    let mut parts = Vec::new();
    let mut rest = objects.as_slice();
    for row in rows {
        let (end, size, stripes) = row.db()?;
        if stripes > rest.len() {
            return Err(corrupt_layout(fid, format!("a component has {stripes} stripes, more than are left")));
        }
        let (these, after) = rest.split_at(stripes);
        parts.push((end, size, these.to_vec()));
        rest = after;
    }
    if parts.is_empty() {
        return Layout::new(stripe_size, objects).map_err(|error| corrupt_layout(fid, error.to_string()));
    }
    if !rest.is_empty() {
        return Err(corrupt_layout(fid, format!("{} stripes belong to no component", rest.len())));
    }
    Layout::composite(parts).map_err(|error| corrupt_layout(fid, error.to_string()))
}

fn corrupt_layout(fid: Fid, reason: String) -> MdsError {
    MdsError::Database(format!("the stored layout of file {} is corrupt ({reason}): restore the database", fid.0))
}

pub(crate) fn attr(conn: &Connection, inode: Inode) -> Result<Attr, MdsError> {
    let sql = "SELECT mtime_ns, atime_ns, ctime_ns, target, rdev FROM inodes WHERE fid = ?1";
    let (mtime_ns, atime_ns, ctime_ns, target, rdev) = conn
        .prepare_cached(sql)
        .db()?
        .query_row([inode.fid.0], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get::<_, i64>(4)? as u64))
        })
        .db()?;
    let (layout, nlink) = match inode.kind {
        FileKind::File => (Some(layout(conn, inode.fid)?), name_count(conn, inode.fid)?),
        FileKind::Symlink | FileKind::Fifo | FileKind::Socket | FileKind::CharDevice | FileKind::BlockDevice => {
            (None, name_count(conn, inode.fid)?)
        }
        FileKind::Dir => {
            let sql =
                "SELECT count(*) FROM dentries d JOIN inodes i ON i.fid = d.fid WHERE d.parent = ?1 AND i.kind = ?2";
            let subdirs: u64 =
                conn.prepare_cached(sql).db()?.query_row(params![inode.fid.0, KIND_DIR], |row| row.get(0)).db()?;
            (None, 2 + subdirs)
        }
    };
    let Inode { fid, kind, uid, gid, permissions } = inode;
    Ok(Attr { fid, kind, layout, mtime_ns, atime_ns, ctime_ns, nlink, target, rdev, uid, gid, permissions })
}

/// A page of a directory's entries in name (byte) order after `cursor`:
/// as many as fit in `entries_max` and `bytes_max` (each entry counting its
/// name and [`crate::DIR_ENTRY_OVERHEAD_BYTES`]), at least one.
pub(crate) fn entries_page(
    conn: &Connection,
    dir: Fid,
    cursor: Option<&str>,
    entries_max: usize,
    bytes_max: usize,
) -> Result<DirPage, MdsError> {
    assert!(entries_max >= 1, "a page holds at least one entry");
    // One row more than fits tells whether more follow.
    let sql = format!(
        "SELECT d.name, {INODE_COLUMNS} FROM dentries d JOIN inodes i ON i.fid = d.fid \
         WHERE d.parent = ?1 AND d.name > ?2 ORDER BY d.name LIMIT ?3"
    );
    let mut select = conn.prepare_cached(&sql).db()?;
    let after = cursor.unwrap_or("");
    let rows = select
        .query_map(params![dir.0, after, entries_max as i64 + 1], |row| {
            Ok((row.get::<_, String>(0)?, inode_of_row(row, 1)?))
        })
        .db()?;
    let mut page = DirPage::default();
    let mut bytes = 0;
    for row in rows {
        let (name, inode) = row.db()?;
        bytes += name.len() + crate::DIR_ENTRY_OVERHEAD_BYTES;
        if page.entries.len() == entries_max || (bytes > bytes_max && !page.entries.is_empty()) {
            page.more = true;
            break;
        }
        let Inode { fid, kind, uid, gid, permissions } = inode_of(inode)?;
        page.entries.push(DirEntry { name, fid, kind, uid, gid, permissions });
    }
    Ok(page)
}

pub(crate) fn entry_count(conn: &Connection, dir: Fid) -> Result<u64, MdsError> {
    let sql = "SELECT count(*) FROM dentries WHERE parent = ?1";
    conn.prepare_cached(sql).db()?.query_row([dir.0], |row| row.get(0)).db()
}

/// A directory's own default striping (fields it does not set are `None`).
pub(crate) fn dir_default(conn: &Connection, dir: Fid) -> Result<StripeSpec, MdsError> {
    let sql = "SELECT default_count, default_size, default_start, default_pool, default_overstripe \
               FROM inodes WHERE fid = ?1";
    let (count, size, start_ost, pool, overstripe) = conn
        .prepare_cached(sql)
        .db()?
        .query_row([dir.0], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get::<_, Option<String>>(3)?, row.get::<_, bool>(4)?))
        })
        .db()?;
    let pool = pool.map(|name| stored_pool(&name)).transpose()?;
    let sql = "SELECT end_offset, count, overstripe, stripe_size, start_ost, pool FROM default_components \
               WHERE fid = ?1 ORDER BY component";
    let mut select = conn.prepare_cached(sql).db()?;
    let rows = select
        .query_map([dir.0], |row| {
            let end = row.get::<_, Option<u64>>(0)?.unwrap_or(u64::MAX);
            let pool: Option<String> = row.get(5)?;
            Ok((end, row.get(1)?, row.get::<_, bool>(2)?, row.get(3)?, row.get(4)?, pool))
        })
        .db()?;
    let mut components = Vec::new();
    for row in rows {
        let (end, count, overstripe, size, start_ost, pool) = row.db()?;
        let pool = pool.map(|name| stored_pool(&name)).transpose()?;
        let stripe = StripeSpec { count, size, start_ost, pool, overstripe, ..StripeSpec::default() };
        components.push(ComponentSpec { end, stripe });
    }
    if !components.is_empty() {
        return Ok(StripeSpec { components: Some(components), ..StripeSpec::default() });
    }
    Ok(StripeSpec { count, size, start_ost, pool, overstripe, osts: None, components: None })
}

pub(crate) fn set_dir_default(conn: &Connection, dir: Fid, spec: &StripeSpec) -> Result<(), MdsError> {
    assert!(spec.osts.is_none(), "a directory default has no OST list");
    // A composite default's plain fields are all unset, so this clears
    // the plain default; the components replace any earlier ones.
    let sql = "UPDATE inodes SET default_count = ?2, default_size = ?3, default_start = ?4, default_pool = ?5, \
               default_overstripe = ?6 WHERE fid = ?1";
    let pool = spec.pool.map(|pool| pool.as_str().to_string());
    let overstripe = spec.overstripe && spec.count.is_some();
    conn.prepare_cached(sql)
        .db()?
        .execute(params![dir.0, spec.count, spec.size, spec.start_ost, pool, overstripe])
        .db()?;
    conn.prepare_cached("DELETE FROM default_components WHERE fid = ?1").db()?.execute([dir.0]).db()?;
    let sql = "INSERT INTO default_components (fid, component, end_offset, count, overstripe, stripe_size, \
               start_ost, pool) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
    let mut insert = conn.prepare_cached(sql).db()?;
    for (index, part) in spec.components.iter().flatten().enumerate() {
        let s = &part.stripe;
        assert!(s.osts.is_none() && s.components.is_none(), "a default's component has no OST list");
        // Ends are checked below 2^63 before they get here.
        let end = (part.end != u64::MAX).then_some(part.end as i64);
        let pool = s.pool.map(|pool| pool.as_str().to_string());
        let overstripe = s.overstripe && s.count.is_some();
        insert.execute(params![dir.0, index, end, s.count, overstripe, s.size, s.start_ost, pool]).db()?;
    }
    Ok(())
}

/// The OST pool file `fid` was created in.
pub(crate) fn file_pool(conn: &Connection, fid: Fid) -> Result<Option<PoolName>, MdsError> {
    let sql = "SELECT pool FROM inodes WHERE fid = ?1";
    let pool: Option<String> = conn.prepare_cached(sql).db()?.query_row([fid.0], |row| row.get(0)).db()?;
    pool.map(|name| stored_pool(&name)).transpose()
}

fn stored_pool(name: &str) -> Result<PoolName, MdsError> {
    PoolName::parse(name)
        .map_err(|_| MdsError::Database(format!("corrupt pool name {name:?}: the database was edited by hand")))
}

/// How many inodes of `kind` exist.
pub(crate) fn inode_count(conn: &Connection, kind: FileKind) -> Result<u64, MdsError> {
    let sql = "SELECT count(*) FROM inodes WHERE kind = ?1";
    conn.prepare_cached(sql).db()?.query_row([code_of(kind)], |row| row.get(0)).db()
}

/// How many inodes there are, of every kind.
pub(crate) fn inode_total(conn: &Connection) -> Result<u64, MdsError> {
    conn.prepare_cached("SELECT count(*) FROM inodes").db()?.query_row([], |row| row.get(0)).db()
}
