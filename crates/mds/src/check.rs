//! [`Mds::check_invariants`]: the stored metadata, checked against every
//! rule the MDS promises, separately from the code that maintains them.
//!
//! It reads the whole database (cost linear in inodes plus objects), so it
//! is for tests, debugging and a repair tool, not for every request. A
//! broken invariant is a bug in the MDS or a database edited by hand: it
//! panics, naming the rule.

use crate::alloc;
use crate::schema::{self, Counter, SCHEMA_VERSION};
use crate::xattr;
use crate::{Fid, Mds};
use rusqlite::Connection;
use std::collections::BTreeMap;

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.prepare_cached(sql)
        .and_then(|mut select| select.query_row([], |row| row.get(0)))
        .unwrap_or_else(|error| panic!("invariant query {sql:?}: {error}"))
}

fn column(conn: &Connection, sql: &str) -> Vec<(i64, i64)> {
    let mut select = conn.prepare_cached(sql).unwrap_or_else(|error| panic!("invariant query {sql:?}: {error}"));
    let rows = select.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).expect("invariant query");
    rows.collect::<Result<_, _>>().expect("invariant rows")
}

impl Mds {
    /// Panics unless the database holds a well-formed namespace:
    /// - the schema version is this crate's, and the recorded OST count is
    ///   the one in use, with one object counter per OST;
    /// - the root is a directory with no entry; every other directory has
    ///   exactly one entry, every file and symbolic link at least one (its
    ///   hard links), all in directories, and every inode is reachable from
    ///   the root (the directories form a tree), but for the volatile files
    ///   of migrations, which have no name and pair with a named file each;
    /// - every file has a valid layout: stripe-count objects, numbered from
    ///   stripe 0, on distinct OSTs that exist; directories have no objects;
    /// - every object id is below its OST's counter (so never handed out
    ///   again) and at or below the OST's precreated watermark (the OST
    ///   created it), and every fid is below the fid counter;
    /// - every queued destroy names an object that was handed out and that
    ///   no file holds any more;
    /// - every inode's permissions are within `07777` and its owner and
    ///   group are 32-bit ids; the root is a directory;
    /// - every directory default is valid for the current OST count;
    /// - OST pools: at most `POOLS_MAX`, valid names, members that are
    ///   OSTs of the file system; a pool name only on files (`pool`) and
    ///   directories (`default_pool`), and valid;
    /// - every extended attribute belongs to an inode, is in a namespace
    ///   lanefs keeps, and each inode's are within the per-inode bounds.
    pub fn check_invariants(&self) {
        let conn = &self.conn;
        let ost_count = self.config.ost_count;
        let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0)).expect("user_version");
        assert_eq!(version, SCHEMA_VERSION, "schema version");
        assert_eq!(schema::read_counter(conn, Counter::OstCount).expect("ost_count"), u64::from(ost_count));

        let next_object_of: BTreeMap<i64, i64> =
            column(conn, "SELECT ost, next_object FROM ost_counters").into_iter().collect();
        let osts: Vec<i64> = next_object_of.keys().copied().collect();
        assert_eq!(osts, (0..i64::from(ost_count)).collect::<Vec<_>>(), "one object counter per OST");
        let precreated_of: BTreeMap<i64, i64> =
            column(conn, "SELECT ost, precreated FROM ost_counters").into_iter().collect();
        for (ost, next_object) in &next_object_of {
            let precreated = precreated_of[ost];
            assert!(
                next_object - 1 <= precreated,
                "OST {ost}: object {} handed out beyond LAST_ID {precreated}",
                next_object - 1
            );
        }

        let bad_owners = count(
            conn,
            "SELECT count(*) FROM inodes WHERE permissions NOT BETWEEN 0 AND 4095 \
             OR uid NOT BETWEEN 0 AND 4294967295 OR gid NOT BETWEEN 0 AND 4294967295 \
             OR typeof(uid) != 'integer' OR typeof(gid) != 'integer' OR typeof(permissions) != 'integer'",
        );
        assert_eq!(bad_owners, 0, "every inode has 32-bit owner and group ids and permissions within 07777");
        for (ost, object) in column(conn, "SELECT ost, object FROM destroy_queue") {
            let next_object = next_object_of.get(&ost).unwrap_or_else(|| panic!("destroy queued on unknown OST {ost}"));
            assert!(object < *next_object, "queued destroy of object {object} on OST {ost}, never handed out");
        }
        let held =
            count(conn, "SELECT count(*) FROM destroy_queue q JOIN objects o ON o.ost = q.ost AND o.object = q.object");
        assert_eq!(held, 0, "no queued destroy names an object a file still holds");

        let root_kind = count(conn, "SELECT kind FROM inodes WHERE fid = 1");
        assert_eq!(root_kind, 2, "the root is a directory");
        assert_eq!(count(conn, "SELECT count(*) FROM dentries WHERE fid = 1"), 0, "the root has no entry");
        let inode_count = count(conn, "SELECT count(*) FROM inodes");
        let dirs_misnamed = count(
            conn,
            "SELECT count(*) FROM inodes i WHERE i.kind = 2 AND i.fid != 1 \
             AND (SELECT count(*) FROM dentries d WHERE d.fid = i.fid) != 1",
        );
        assert_eq!(dirs_misnamed, 0, "every directory but the root has exactly one entry");
        let unnamed = count(
            conn,
            "SELECT count(*) FROM inodes i WHERE i.kind != 2 AND NOT EXISTS (SELECT 1 FROM dentries d WHERE d.fid = i.fid) \
             AND NOT EXISTS (SELECT 1 FROM migrations m WHERE m.volatile = i.fid)",
        );
        assert_eq!(unnamed, 0, "every inode but a directory and a migration's volatile file has at least one entry");
        let volatile_count = count(conn, "SELECT count(*) FROM migrations");
        let bad_migrations = count(
            conn,
            "SELECT count(*) FROM migrations m JOIN inodes f ON f.fid = m.fid JOIN inodes v ON v.fid = m.volatile \
             WHERE f.kind != 1 OR v.kind != 1 OR NOT EXISTS (SELECT 1 FROM dentries d WHERE d.fid = m.fid) \
             OR EXISTS (SELECT 1 FROM dentries d WHERE d.fid = m.volatile) \
             OR EXISTS (SELECT 1 FROM migrations o WHERE o.fid = m.volatile)",
        );
        assert_eq!(bad_migrations, 0, "every migration pairs a named file with a file without a name");
        let misparented =
            count(conn, "SELECT count(*) FROM dentries d JOIN inodes p ON p.fid = d.parent WHERE p.kind != 2");
        assert_eq!(misparented, 0, "entries are only in directories");
        let reachable = count(
            conn,
            "WITH RECURSIVE reach(fid) AS (SELECT 1 UNION SELECT d.fid FROM dentries d JOIN reach r ON d.parent = r.fid) \
             SELECT count(*) FROM reach",
        );
        assert_eq!(
            reachable + volatile_count,
            inode_count,
            "every inode but the volatile ones is reachable from the root"
        );

        let next_fid = schema::read_counter(conn, Counter::NextFid).expect("next_fid");
        let fid_max = count(conn, "SELECT max(fid) FROM inodes");
        assert!(fid_max < next_fid as i64, "fid {fid_max} at or above the fid counter {next_fid}");

        let other_objects =
            count(conn, "SELECT count(*) FROM objects o JOIN inodes i ON i.fid = o.fid WHERE i.kind != 1");
        assert_eq!(other_objects, 0, "only files have objects");
        let stray_rdev = count(conn, "SELECT count(*) FROM inodes WHERE rdev != 0 AND kind NOT IN (6, 7)");
        assert_eq!(stray_rdev, 0, "only devices have device numbers");
        let mut object_total = 0;
        for (fid, _) in column(conn, "SELECT fid, kind FROM inodes WHERE kind = 1") {
            let layout = schema::layout(conn, Fid(fid as u64)).unwrap_or_else(|error| panic!("file {fid}: {error}"));
            for key in layout.objects() {
                assert!(key.ost.0 < ost_count, "file {fid} has an object on {}, of {ost_count} OSTs", key.ost);
                let next_object = next_object_of[&i64::from(key.ost.0)];
                assert!((key.object.0 as i64) < next_object, "file {fid}: {key:?} not below counter {next_object}");
                let precreated = precreated_of[&i64::from(key.ost.0)];
                assert!((key.object.0 as i64) <= precreated, "file {fid}: {key:?} above LAST_ID {precreated}");
            }
            object_total += i64::from(layout.object_count());
        }
        assert_eq!(count(conn, "SELECT count(*) FROM objects"), object_total, "every object row is in a layout");

        let pool_count = count(conn, "SELECT count(*) FROM ost_pools");
        assert!(pool_count as usize <= lanefs_proto::pools::POOLS_MAX, "{pool_count} pools");
        let mut names = conn.prepare_cached("SELECT name FROM ost_pools").expect("pool names");
        for name in names.query_map([], |row| row.get::<_, String>(0)).expect("pool names") {
            let name = name.expect("pool name");
            assert!(crate::PoolName::parse(&name).is_ok(), "invalid pool name {name:?}");
        }
        let stray_members = count(
            conn,
            &format!(
                "SELECT count(*) FROM ost_pool_members m WHERE m.ost NOT BETWEEN 0 AND {} \
                 OR NOT EXISTS (SELECT 1 FROM ost_pools p WHERE p.name = m.pool)",
                i64::from(ost_count) - 1
            ),
        );
        assert_eq!(stray_members, 0, "pool members are OSTs of the file system, in defined pools");
        let misplaced = count(
            conn,
            "SELECT count(*) FROM inodes WHERE (pool IS NOT NULL AND kind != 1) \
             OR (default_pool IS NOT NULL AND kind != 2)",
        );
        assert_eq!(misplaced, 0, "files have pools, directories default pools");
        let mut stored = conn
            .prepare_cached("SELECT pool FROM inodes WHERE pool IS NOT NULL UNION SELECT default_pool FROM inodes WHERE default_pool IS NOT NULL")
            .expect("stored pools");
        for name in stored.query_map([], |row| row.get::<_, String>(0)).expect("stored pools") {
            let name = name.expect("stored pool");
            assert!(crate::PoolName::parse(&name).is_ok(), "invalid stored pool name {name:?}");
        }

        let orphan_xattrs =
            count(conn, "SELECT count(*) FROM xattrs x WHERE NOT EXISTS (SELECT 1 FROM inodes i WHERE i.fid = x.fid)");
        assert_eq!(orphan_xattrs, 0, "every extended attribute belongs to an inode");
        for (fid, held) in column(conn, "SELECT fid, count(*) FROM xattrs GROUP BY fid") {
            assert!(held as usize <= xattr::XATTRS_PER_INODE_MAX, "inode {fid} holds {held} extended attributes");
        }
        for (fid, bytes) in column(conn, "SELECT fid, sum(length(name) + length(value)) FROM xattrs GROUP BY fid") {
            assert!(bytes as usize <= xattr::XATTR_INODE_BYTES_MAX, "inode {fid} holds {bytes} bytes of attributes");
        }
        let unkept = count(
            conn,
            "SELECT count(*) FROM xattrs WHERE name NOT GLOB 'user.?*' AND name NOT GLOB 'trusted.?*' \
             AND name NOT GLOB 'security.?*'",
        );
        assert_eq!(unkept, 0, "extended attributes are in the namespaces lanefs keeps");

        for (fid, _) in column(conn, "SELECT fid, kind FROM inodes WHERE kind = 2") {
            let own = schema::dir_default(conn, Fid(fid as u64)).expect("directory default");
            let checked = alloc::normalize(&own, ost_count).unwrap_or_else(|error| panic!("dir {fid}: {error}"));
            assert_eq!(checked, own, "directory {fid} stores a normalised default");
        }
    }
}
