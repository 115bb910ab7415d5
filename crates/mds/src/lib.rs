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
//! What it is not:
//! - not a data path: file bytes go between clients and OSTs;
//! - no file sizes: a file's size is the OSTs' business, learnt by a glimpse
//!   of its objects, as in Lustre (the MDS's [`Attr`] has no size);
//! - no locks: extent locks live on the OSTs (lanefs-core's ldlm), and the
//!   namespace needs none (see above);
//! - no permissions, owners, links or symbolic links, and no object
//!   creation or destruction on the OSTs: [`Mds::create`] hands out object
//!   ids (an OST creates an object when first written), and `Unlink` and a
//!   replacing `Rename` return the layout whose objects the caller must
//!   destroy.
//!
//! Invariants (checked by [`Mds::check_invariants`]):
//! - the namespace is a tree rooted at `/` ([`Fid::ROOT`]), which always
//!   exists; every other inode has exactly one name;
//! - every file has exactly stripe-count objects, on distinct OSTs, fixed at
//!   create ([`Mds::set_stripe`] on a file is refused);
//! - object ids are unique per OST and never reused, fids never reused,
//!   across restarts too (persisted counters that only grow);
//! - the OST count only grows.
//!
//! Striping follows `lfs setstripe` (see [`alloc`] for the rules and the two
//! places lanefs differs from Lustre on purpose); paths are absolute and
//! normalised (see [`path`]); the schema is in [`schema`].
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
mod error;
mod ops;
pub mod path;
mod proto;
pub mod schema;

pub use error::MdsError;
pub use proto::*;

use rusqlite::{Connection, ErrorCode};
use std::path::Path;

/// The metadata server: one database, one owner. See the crate docs.
pub struct Mds {
    conn: Connection,
    /// The configuration in use; `ost_count` is the recorded one.
    config: MdsConfig,
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
    /// new OSTs join), or if another MDS has it open. A new database file
    /// is owner-only (0600), and so are its `-wal` and `-shm` files, which
    /// SQLite creates with the database file's mode.
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
        Mds::start(conn, &label, config)
    }

    /// An MDS whose database lives in memory and vanishes with it: for tests.
    pub fn open_in_memory(config: MdsConfig) -> Result<Mds, MdsError> {
        alloc::check_config(&config)?;
        let conn = Connection::open_in_memory()?;
        Mds::start(conn, ":memory:", config)
    }

    fn start(mut conn: Connection, label: &str, mut config: MdsConfig) -> Result<Mds, MdsError> {
        conn.pragma_update(None, "foreign_keys", true).map_err(|error| open_error(label, error))?;
        // Take the write lock now, so a database in use fails here, by name.
        conn.execute_batch("BEGIN IMMEDIATE; COMMIT").map_err(|error| open_error(label, error))?;
        config.ost_count = schema::prepare(&mut conn, label, &config, ops::now_ns())?;
        let mds = Mds { conn, config };
        tracing::info!(path = label, ost_count = config.ost_count, "opened MDS database");
        Ok(mds)
    }

    /// The configuration in use (`ost_count` as recorded in the database).
    pub fn config(&self) -> &MdsConfig {
        &self.config
    }

    /// Performs one request. Never panics on bad input: failures are
    /// [`MdsReply::Error`], and a failed request changes nothing.
    pub fn handle(&mut self, request: MdsRequest) -> MdsReply {
        let reply = match request {
            MdsRequest::Mkdir { path } => self.mkdir(&path).map(MdsReply::Attr),
            MdsRequest::Create { path, stripe, mode } => self.create(&path, &stripe, mode).map(MdsReply::File),
            MdsRequest::Open { path } => self.open_file(&path).map(MdsReply::File),
            MdsRequest::Stat { path } => self.stat(&path).map(MdsReply::Attr),
            MdsRequest::Readdir { path } => self.readdir(&path).map(MdsReply::Entries),
            MdsRequest::Unlink { path } => self.unlink(&path).map(MdsReply::Unlinked),
            MdsRequest::Rmdir { path } => self.rmdir(&path).map(|()| MdsReply::Ok),
            MdsRequest::Rename { from, to } => self.rename(&from, &to).map(|replaced| MdsReply::Renamed { replaced }),
            MdsRequest::SetStripe { path, stripe } => self.set_stripe(&path, &stripe).map(|()| MdsReply::Ok),
            MdsRequest::GetStripe { path } => self.get_stripe(&path).map(MdsReply::Stripe),
            MdsRequest::Statfs => self.statfs().map(MdsReply::Statfs),
        };
        reply.unwrap_or_else(|error| {
            tracing::debug!(%error, "request failed");
            MdsReply::Error(error)
        })
    }
}

/// The driver moves its `Mds` onto the thread that owns it.
const _: fn() = || {
    fn owned_by_one_thread<T: Send>() {}
    owned_by_one_thread::<Mds>();
};

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
