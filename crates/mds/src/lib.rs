//! lanefs-mds: the metadata server. It keeps the namespace (directories,
//! files, names) and each file's layout (which objects on which OSTs hold
//! its stripes), in one SQLite database.
//!
//! Key design decision: the MDS is a synchronous, transport-free object. A
//! network driver owns one [`Mds`] on one thread and calls
//! [`Mds::handle`] with each [`MdsRequest`], sending back the
//! [`MdsReply`]; both are plain serde values it can put on the wire
//! unchanged. Every request is one SQLite transaction, so it happens
//! entirely or not at all, and requests are serialised by construction:
//! there is no namespace locking because there is no concurrency (`Mds` is
//! `Send` but not `Sync`). Tests of interleavings are therefore moot; a
//! sequence of requests is the whole story.
//!
//! Every request carries the caller's [`Credentials`] (uid, gid,
//! supplementary groups), and the MDS checks POSIX permissions for them as
//! Lustre's MDS does (see [`perm`] and [`ops`]): owner, group and mode bits
//! on every inode, root's bypass, the sticky bit, setgid directories, and
//! optionally Lustre's `root_squash`. The credentials are what the client
//! node reports, trusted as Lustre trusts its client nodes.
//!
//! The MDS owns the life of the objects on the OSTs, as Lustre's does
//! (see [`objects`]): files get objects the OSTs created in advance, and
//! the objects of removed files are queued for destruction in the same
//! transaction; the network MDS carries both out with the OSSes. A full
//! disk still lets users remove files (see [`reserve`]).
//!
//! What it is not:
//! - not a data path: file bytes go between clients and OSTs;
//! - no file sizes: a file's size is the OSTs' business, learnt by a glimpse
//!   of its objects, as in Lustre (the MDS's [`Attr`] has no size);
//! - no extent locks: those live on the OSTs (lanefs-core's ldlm), and the
//!   namespace needs none (see above); the MDS grants file locks (`fcntl`,
//!   `flock`) from an in-memory `lanefs_proto::flock::FlockTable`, as Lustre's MDT
//!   grants flock locks;
//! - no POSIX ACLs (extended attributes of the `user.`, `trusted.` and
//!   `security.` namespaces are kept, see [`xattr`]; hard and symbolic
//!   links are kept; the MDS does not follow symbolic links inside the
//!   paths it is given: a mount's kernel resolves them).
//!
//! Invariants (checked by [`Mds::check_invariants`]):
//! - the directories are a tree rooted at `/` ([`Fid::ROOT`]), which
//!   always exists; every other directory has exactly one name, a file or
//!   a symbolic link at least one (its hard links); every inode has an
//!   owner, a group and permissions within `07777`;
//! - every file has exactly stripe-count objects, on distinct OSTs, fixed at
//!   create ([`Mds::set_stripe`] on a file is refused);
//! - object ids are unique per OST and never reused, fids never reused,
//!   across restarts too (persisted counters that only grow); every object
//!   of a file was precreated by its OST, and every queued destroy names an
//!   object no file holds;
//! - the OST count only grows;
//! - OST pools are at most [`pools::POOLS_MAX`], with valid names, of
//!   OSTs that exist.
//!
//! Striping follows `lfs setstripe` (see [`alloc`] for the rules and the
//! places lanefs differs from Lustre on purpose), OST pools Lustre's
//! (see [`pools`]); paths are absolute and
//! normalised (see [`path`]); listings come in bounded pages
//! ([`READDIR_ENTRIES_MAX`], [`READDIR_BYTES_MAX`]); the schema is in
//! [`schema`].
//!
//! Why SQLite: the metadata must survive restarts exactly (a reused object
//! id would hand one file's data to another), and every request changes
//! several rows that must change together. SQLite gives durable, atomic
//! transactions in one file that an operator can copy, inspect with the
//! `sqlite3` shell, and back up, with no server to run. The database is in
//! WAL mode (a commit is one sequential append) with `synchronous = FULL`
//! (a reply is sent only after its transaction is on disk), and in exclusive
//! locking mode, so that a second MDS opening the same file fails at once
//! instead of sharing it.

pub mod alloc;
mod check;
mod migrate;
pub mod objects;
pub mod opens;
pub mod ops;
pub mod perm;
pub mod pools;
pub mod reserve;
pub mod schema;
pub mod xattr;

pub use objects::Pool;
pub use ops::{Target, Time};

// The MDS speaks the wire's types throughout: requests, replies, the
// values in them and its errors are lanefs-proto's.
pub(crate) use lanefs_proto::path;
pub(crate) use lanefs_proto::*;

use rusqlite::{Connection, ErrorCode, TransactionBehavior};
use std::path::Path;

/// The metadata server: one database, one owner. See the crate docs.
pub struct Mds {
    conn: Connection,
    /// The configuration in use; `ost_count` is the recorded one.
    config: MdsConfig,
    /// What the database is called in messages: its path, or `:memory:`.
    label: String,
    /// The database file; `None` in memory.
    database: Option<std::path::PathBuf>,
    /// Room kept on the database's disk for removals; none in memory.
    reserve: Option<reserve::Reserve>,
    /// `(entries, bytes)` at most in one `Readdir` page.
    readdir_page: (usize, usize),
    /// The database was made when this `Mds` opened it (no earlier MDS
    /// served it, so no client can hold state to recover).
    created: bool,
}

impl std::fmt::Debug for Mds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mds").field("path", &self.conn.path()).field("config", &self.config).finish()
    }
}

/// Create `path` empty and 0600 unless it exists (SQLite would make it
/// with the umask's mode, usually readable by all).
fn create_owner_only(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl Mds {
    /// Opens the MDS database at `path`, creating it if absent. Fails if
    /// the file is another kind of database or another schema version, if
    /// `config` has fewer OSTs than the database records (more is fine: the
    /// new OSTs join), or if another MDS has it open. Makes the disk
    /// reserve beside it (`<path>-reserve`, see [`reserve`]) if there is room.
    /// A new database file is owner-only (0600), and so are its `-wal` and
    /// `-shm` files, which SQLite creates with the database file's mode.
    pub fn open(path: &Path, config: MdsConfig) -> Result<Mds, MdsError> {
        alloc::check_config(&config)?;
        let label = path.display().to_string();
        create_owner_only(path).map_err(|e| MdsError::Database(format!("cannot open {label}: {e}")))?;
        let conn = Connection::open(path).map_err(|error| open_error(&label, error))?;
        // No waiting for a lock: one MDS owns a database, so a held lock
        // means a second MDS, which should fail now rather than in 5 s.
        conn.busy_timeout(std::time::Duration::ZERO).map_err(|error| open_error(&label, error))?;
        // Exclusive before WAL: SQLite then keeps the lock for the
        // connection's life and needs no shared-memory index.
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE").map_err(|error| open_error(&label, error))?;
        let journal_mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|error| open_error(&label, error))?;
        if !journal_mode.eq_ignore_ascii_case("wal") {
            return Err(MdsError::Database(format!(
                "{label}: SQLite refused WAL mode (journal mode is {journal_mode})"
            )));
        }
        conn.pragma_update(None, "synchronous", "FULL").map_err(|error| open_error(&label, error))?;
        let mut mds = Mds::start(conn, &label, config)?;
        mds.reserve = Some(reserve::Reserve::open(path));
        mds.database = Some(path.to_path_buf());
        Ok(mds)
    }

    /// An MDS whose database lives in memory and vanishes with it: for tests.
    pub fn open_in_memory(config: MdsConfig) -> Result<Mds, MdsError> {
        alloc::check_config(&config)?;
        let conn = Connection::open_in_memory().db()?;
        Mds::start(conn, ":memory:", config)
    }

    fn start(mut conn: Connection, label: &str, mut config: MdsConfig) -> Result<Mds, MdsError> {
        // Every statement of the MDS's requests and of its invariant check
        // stays prepared (about 90; SQLite's default keeps 16).
        conn.set_prepared_statement_cache_capacity(STATEMENTS_CACHED);
        // Take the write lock now, so a database in use fails here, by name.
        conn.execute_batch("BEGIN IMMEDIATE; COMMIT").map_err(|error| open_error(label, error))?;
        // Foreign keys are enforced once the schema is this version's: an
        // older one is rebuilt without them, as SQLite's ALTER TABLE
        // procedure asks, and checked whole before it commits.
        conn.pragma_update(None, "foreign_keys", false).map_err(|error| open_error(label, error))?;
        let (ost_count, created) =
            schema::prepare(&mut conn, label, &config, ops::now_ns()).map_err(|error| named(label, error))?;
        config.ost_count = ost_count;
        conn.pragma_update(None, "foreign_keys", true).map_err(|error| open_error(label, error))?;
        let readdir_page = (READDIR_ENTRIES_MAX, READDIR_BYTES_MAX);
        let mds = Mds { conn, config, label: label.to_string(), database: None, reserve: None, readdir_page, created };
        tracing::info!(path = label, ost_count = config.ost_count, "opened MDS database");
        Ok(mds)
    }

    /// Lowers the bounds of a `Readdir` page (at least one entry each): for
    /// tests that page through directories without making thousands of
    /// entries. Servers keep [`READDIR_ENTRIES_MAX`] and [`READDIR_BYTES_MAX`].
    pub fn with_readdir_page(mut self, entries_max: usize, bytes_max: usize) -> Mds {
        assert!((1..=READDIR_ENTRIES_MAX).contains(&entries_max), "entries per page {entries_max}");
        assert!(bytes_max <= READDIR_BYTES_MAX, "bytes per page {bytes_max}");
        self.readdir_page = (entries_max, bytes_max);
        self
    }

    /// The path of the disk reserve file (see [`reserve`]), and whether it
    /// is in place; `None` for an in-memory MDS.
    pub fn reserve_state(&self) -> Option<(&Path, bool)> {
        self.reserve.as_ref().map(|reserve| (reserve.path(), reserve.is_present()))
    }

    /// Whether the disk reserve is in place (made again now if it is gone
    /// and there is room); always true in memory.
    fn reserve_kept(&mut self) -> bool {
        self.reserve.as_mut().is_none_or(reserve::Reserve::ensure)
    }

    fn release_reserve(&mut self) -> bool {
        self.reserve.as_mut().is_some_and(reserve::Reserve::release)
    }

    fn no_space(&self) -> MdsError {
        MdsError::NoSpace { path: self.label.clone() }
    }

    /// `error` with this database's path where it names the database.
    fn named(&self, error: MdsError) -> MdsError {
        named(&self.label, error)
    }

    /// Runs `body` in one write transaction, committed only if it
    /// succeeds. A transaction that finds the disk full fails with
    /// [`MdsError::NoSpace`], unless it `Removes`: then the reserve is
    /// given back to the file system and the transaction runs again.
    pub(crate) fn write<T>(
        &mut self,
        kind: WriteKind,
        body: impl Fn(&Connection, u32) -> Result<T, MdsError>,
    ) -> Result<T, MdsError> {
        if kind == WriteKind::Grows && !self.reserve_kept() {
            return Err(self.no_space());
        }
        match self.try_write(&body) {
            Err(MdsError::NoSpace { .. }) if kind == WriteKind::Removes && self.release_reserve() => {
                self.try_write(&body).map_err(|error| self.named(error))
            }
            result => result.map_err(|error| self.named(error)),
        }
    }

    fn try_write<T>(&mut self, body: &impl Fn(&Connection, u32) -> Result<T, MdsError>) -> Result<T, MdsError> {
        let ost_count = self.config.ost_count;
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).db()?;
        let value = body(&tx, ost_count)?;
        tx.commit().db()?;
        Ok(value)
    }

    /// Whether the database was made when this `Mds` opened it: an MDS
    /// that opens one an earlier MDS served restarts, and its clients may
    /// hold locks and open files to tell it of again.
    pub fn created(&self) -> bool {
        self.created
    }

    /// The configuration in use (`ost_count` as recorded in the database).
    pub fn config(&self) -> &MdsConfig {
        &self.config
    }

    /// Performs one request for the caller `credentials` name. Never panics
    /// on bad input: failures are [`MdsReply::Error`], and a failed request
    /// changes nothing.
    pub fn handle(&mut self, credentials: &Credentials, request: MdsRequest) -> MdsReply {
        let who = credentials;
        let reply = match request {
            MdsRequest::Mkdir { path, permissions } => self.mkdir(who, &path, permissions).map(MdsReply::Attr),
            MdsRequest::Create { path, stripe, mode, access, permissions } => {
                self.create(who, &path, &stripe, mode, access, permissions).map(MdsReply::File)
            }
            MdsRequest::Open { path, access } => self.open_file(who, &path, access).map(MdsReply::File),
            MdsRequest::Stat { path } => self.stat(who, &path).map(MdsReply::Attr),
            MdsRequest::Readdir { path, cursor } => self.readdir(who, &path, cursor.as_deref()).map(MdsReply::Entries),
            MdsRequest::Unlink { path } => self.unlink(who, &path).map(|_| MdsReply::Ok),
            MdsRequest::Rmdir { path } => self.rmdir(who, &path).map(|()| MdsReply::Ok),
            MdsRequest::Rename { from, to } => self.rename(who, &from, &to).map(|_| MdsReply::Ok),
            MdsRequest::SetAttr { path, permissions, uid, gid } => {
                self.set_attr(who, &path, permissions, (uid, gid)).map(MdsReply::Attr)
            }
            MdsRequest::SetMtime { path, at } => self.set_time(who, &path, at, Time::Modified).map(MdsReply::Attr),
            MdsRequest::SetAtime { path, at } => self.set_time(who, &path, at, Time::Accessed).map(MdsReply::Attr),
            MdsRequest::StatFid { fid } => self.stat_target(who, Target::Fid(fid)).map(MdsReply::Attr),
            MdsRequest::LinkFid { fid, to } => self.link_target(who, Target::Fid(fid), &to).map(MdsReply::Attr),
            MdsRequest::ReaddirFid { fid, cursor } => {
                self.readdir_target(who, Target::Fid(fid), cursor.as_deref()).map(MdsReply::Entries)
            }
            MdsRequest::OpenFid { fid, access } => self.open_target(who, Target::Fid(fid), access).map(MdsReply::File),
            MdsRequest::SetAttrFid { fid, permissions, uid, gid } => {
                self.set_attr_target(who, Target::Fid(fid), permissions, (uid, gid)).map(MdsReply::Attr)
            }
            MdsRequest::SetMtimeFid { fid, at } => {
                self.set_time_target(who, Target::Fid(fid), at, Time::Modified).map(MdsReply::Attr)
            }
            MdsRequest::SetAtimeFid { fid, at } => {
                self.set_time_target(who, Target::Fid(fid), at, Time::Accessed).map(MdsReply::Attr)
            }
            MdsRequest::Symlink { path, target } => self.symlink(who, &path, &target).map(MdsReply::Attr),
            MdsRequest::Mknod { path, kind, permissions, rdev } => {
                self.mknod(who, &path, kind, permissions, rdev).map(MdsReply::Attr)
            }
            MdsRequest::Link { from, to } => self.link(who, &from, &to).map(MdsReply::Attr),
            MdsRequest::SetStripe { path, stripe } => self.set_stripe(who, &path, &stripe).map(|()| MdsReply::Ok),
            MdsRequest::GetStripe { path } => self.get_stripe(who, &path).map(|info| MdsReply::Stripe(Box::new(info))),
            MdsRequest::Statfs => self.statfs().map(MdsReply::Statfs),
            MdsRequest::DeleteStripe { path } => self.delete_stripe(who, &path).map(|()| MdsReply::Ok),
            MdsRequest::ChangePool { pool, change } => self.change_pool(who, &pool, &change).map(|()| MdsReply::Ok),
            MdsRequest::ListPools { pool } => self.list_pools(pool.as_ref()).map(MdsReply::Pools),
            MdsRequest::GetXattr { node, name } => self.get_xattr(who, target(&node), &name).map(MdsReply::Xattr),
            MdsRequest::ListXattrs { node } => self.list_xattrs(who, target(&node)).map(MdsReply::XattrNames),
            MdsRequest::SetXattr { node, name, value, how } => {
                self.set_xattr(who, target(&node), &name, &value, how).map(|()| MdsReply::Ok)
            }
            MdsRequest::RemoveXattr { node, name } => {
                self.remove_xattr(who, target(&node), &name).map(|()| MdsReply::Ok)
            }
            MdsRequest::LayoutFid { fid } => self.layout_of(fid).map(MdsReply::File),
            MdsRequest::MigrateStart { path, stripe } => self
                .migrate_start(who, &path, stripe.as_ref())
                .map(|(file, volatile)| MdsReply::Migration { file, volatile }),
            MdsRequest::MigrateCommit { path, fid, volatile } => {
                self.migrate_commit(who, &path, fid, volatile).map(MdsReply::File)
            }
            MdsRequest::MigrateAbort { path, fid, volatile } => {
                self.migrate_abort(who, &path, fid, volatile).map(|()| MdsReply::Ok)
            }
        };
        reply.unwrap_or_else(|error| {
            tracing::debug!(%error, "request failed");
            MdsReply::Error(error)
        })
    }
}

/// The inode `node` names, as the operations take it.
fn target(node: &Node) -> Target<'_> {
    match node {
        Node::Path(path) => Target::Path(path),
        Node::Fid(fid) => Target::Fid(*fid),
    }
}

/// The driver moves its `Mds` onto the thread that owns it.
const _: fn() = || {
    fn owned_by_one_thread<T: Send>() {}
    owned_by_one_thread::<Mds>();
};

/// Whether a write transaction may grow the database, or removes things
/// (and may then use the MDS's disk reserve, see [`crate::reserve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteKind {
    Grows,
    Removes,
}

/// `error` with the database's path where it names the database (a full
/// disk is found deep inside SQLite, which does not know the path).
/// Prepared statements an MDS keeps: every one it runs.
const STATEMENTS_CACHED: usize = 128;

fn named(label: &str, error: MdsError) -> MdsError {
    match error {
        MdsError::NoSpace { .. } => MdsError::NoSpace { path: label.to_string() },
        other => other,
    }
}

/// Names the two open failures an operator can fix: the wrong file, and a
/// database another MDS holds.
fn open_error(label: &str, error: rusqlite::Error) -> MdsError {
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => MdsError::DatabaseBusy { path: label.to_string() },
        Some(ErrorCode::NotADatabase) => {
            MdsError::NotAnMdsDatabase { path: label.to_string(), reason: "it is not an SQLite database".into() }
        }
        _ => MdsError::Database(format!("cannot open {label}: {error}")),
    }
}

/// A database error as the MDS reports it: a full disk becomes
/// [`MdsError::NoSpace`] (its path filled in by the `Mds`), everything
/// else [`MdsError::Database`] with SQLite's message.
pub(crate) fn db_error(error: rusqlite::Error) -> MdsError {
    match error.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => MdsError::NoSpace { path: "the metadata database".into() },
        _ => MdsError::Database(error.to_string()),
    }
}

/// A database call's result as the MDS's: `conn.execute(..).db()?` in a
/// function that fails with [`MdsError`] (the wire's error type knows
/// nothing of SQLite).
pub(crate) trait Db<T> {
    fn db(self) -> Result<T, MdsError>;
}

impl<T> Db<T> for rusqlite::Result<T> {
    fn db(self) -> Result<T, MdsError> {
        self.map_err(db_error)
    }
}
