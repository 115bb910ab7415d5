//! The namespace operations: one method per request, each one transaction.
//!
//! Every method parses its paths first, then walks the namespace from the
//! root inside the transaction it writes in, so a request sees and leaves a
//! consistent tree. Errors roll the transaction back: a failed request
//! changes nothing, counters included.

use crate::alloc;
use crate::path::MdsPath;
use crate::schema::{self, Counter, Entry};
use crate::{Attr, CreateMode, DirEntry, Fid, FileInfo, FileKind, Mds, MdsError, Statfs, StripeInfo, StripeSpec};
use lanefs_core::layout::Layout;
use rusqlite::{Connection, TransactionBehavior};

/// The directories from the root down to a path's parent: `dirs[i]` is the
/// directory named by the path's first `i` names, so `dirs[0]` is the root
/// and the last is the parent.
struct Ancestors {
    dirs: Vec<Fid>,
}

impl Ancestors {
    fn parent(&self) -> Fid {
        *self.dirs.last().expect("every path below the root has a parent")
    }
}

/// Walks to `path`'s parent, which must exist and be a directory.
fn ancestors(conn: &Connection, path: &MdsPath) -> Result<Ancestors, MdsError> {
    assert!(!path.is_root(), "the root has no ancestors");
    let names = path.names();
    let mut dirs = Vec::with_capacity(names.len());
    dirs.push(Fid::ROOT);
    for (depth, name) in names[..names.len() - 1].iter().enumerate() {
        let prefix = || path.prefix(depth + 1).to_string();
        match schema::lookup(conn, dirs[depth], name)? {
            None => return Err(MdsError::NotFound { path: path.to_string(), missing: prefix() }),
            Some(Entry { kind: FileKind::File, .. }) => {
                return Err(MdsError::NotADirectory { path: path.to_string(), file: prefix() })
            }
            Some(Entry { fid, kind: FileKind::Dir }) => dirs.push(fid),
        }
    }
    Ok(Ancestors { dirs })
}

/// Walks to `path` itself, which must exist.
fn resolve(conn: &Connection, path: &MdsPath) -> Result<(Ancestors, Entry), MdsError> {
    let Some(name) = path.name() else {
        return Ok((Ancestors { dirs: Vec::new() }, Entry { fid: Fid::ROOT, kind: FileKind::Dir }));
    };
    let ancestors = ancestors(conn, path)?;
    match schema::lookup(conn, ancestors.parent(), name)? {
        Some(entry) => Ok((ancestors, entry)),
        None => Err(MdsError::NotFound { path: path.to_string(), missing: path.to_string() }),
    }
}

/// Wall-clock nanoseconds since the Unix epoch, for mtimes only (no
/// decision depends on it).
pub(crate) fn now_ns() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_nanos()).unwrap_or(u64::MAX)
}

fn is_a_directory(path: &MdsPath) -> MdsError {
    MdsError::IsADirectory { path: path.to_string() }
}

fn not_a_directory(path: &MdsPath) -> MdsError {
    MdsError::NotADirectory { path: path.to_string(), file: path.to_string() }
}

impl Mds {
    /// Runs `body` in one write transaction, committed only if it succeeds.
    fn write<T>(&mut self, body: impl FnOnce(&Connection, u32) -> Result<T, MdsError>) -> Result<T, MdsError> {
        let ost_count = self.config.ost_count;
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = body(&tx, ost_count)?;
        tx.commit()?;
        Ok(value)
    }

    /// Creates directory `path` in an existing directory.
    pub fn mkdir(&mut self, path: &str) -> Result<Attr, MdsError> {
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(MdsError::Exists { path: path.to_string() }) };
        self.write(|tx, _| {
            let parent = ancestors(tx, &path)?.parent();
            if schema::lookup(tx, parent, name)?.is_some() {
                return Err(MdsError::Exists { path: path.to_string() });
            }
            let fid = Fid(schema::take_counter(tx, Counter::NextFid)?);
            let now_ns = now_ns();
            schema::insert_inode(tx, fid, None, now_ns)?;
            schema::link(tx, parent, name, fid)?;
            schema::touch(tx, parent, now_ns)?;
            schema::attr(tx, Entry { fid, kind: FileKind::Dir })
        })
    }

    /// Creates file `path` with its objects allocated (striping from the set
    /// fields of `stripe`, the rest inherited), or opens it as `mode` says.
    pub fn create(&mut self, path: &str, stripe: &StripeSpec, mode: CreateMode) -> Result<FileInfo, MdsError> {
        let path = MdsPath::parse(path)?;
        let stripe = alloc::normalize(stripe, self.config.ost_count)?;
        let Some(name) = path.name() else {
            return Err(match mode {
                CreateMode::Exclusive => MdsError::Exists { path: path.to_string() },
                CreateMode::OpenOrCreate => is_a_directory(&path),
            });
        };
        let config = self.config;
        self.write(|tx, ost_count| {
            let ancestors = ancestors(tx, &path)?;
            let parent = ancestors.parent();
            match (schema::lookup(tx, parent, name)?, mode) {
                (None, _) => {}
                (Some(_), CreateMode::Exclusive) => return Err(MdsError::Exists { path: path.to_string() }),
                (Some(Entry { kind: FileKind::Dir, .. }), _) => return Err(is_a_directory(&path)),
                (Some(Entry { fid, kind: FileKind::File }), _) => {
                    return Ok(FileInfo { fid, layout: schema::layout(tx, fid)? })
                }
            }
            let parent_path = path.parent().expect("a file has a parent");
            let dirs = dir_defaults(tx, &parent_path, &ancestors.dirs)?;
            let (inherited, _) = alloc::inherit(&dirs, &config);
            let plan = alloc::plan(&stripe, &inherited, ost_count)?;
            let layout = alloc::allocate(tx, &plan, ost_count)?;
            let fid = Fid(schema::take_counter(tx, Counter::NextFid)?);
            let now_ns = now_ns();
            schema::insert_inode(tx, fid, Some(&layout), now_ns)?;
            schema::link(tx, parent, name, fid)?;
            schema::touch(tx, parent, now_ns)?;
            tracing::debug!(%path, fid = fid.0, ?layout, "created file");
            Ok(FileInfo { fid, layout })
        })
    }

    /// Opens existing file `path` for I/O.
    pub fn open_file(&self, path: &str) -> Result<FileInfo, MdsError> {
        let path = MdsPath::parse(path)?;
        match resolve(&self.conn, &path)?.1 {
            Entry { kind: FileKind::Dir, .. } => Err(is_a_directory(&path)),
            Entry { fid, kind: FileKind::File } => Ok(FileInfo { fid, layout: schema::layout(&self.conn, fid)? }),
        }
    }

    pub fn stat(&self, path: &str) -> Result<Attr, MdsError> {
        let path = MdsPath::parse(path)?;
        let (_, entry) = resolve(&self.conn, &path)?;
        schema::attr(&self.conn, entry)
    }

    /// Lists directory `path`, sorted by name.
    pub fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, MdsError> {
        let path = MdsPath::parse(path)?;
        match resolve(&self.conn, &path)?.1 {
            Entry { kind: FileKind::File, .. } => Err(not_a_directory(&path)),
            Entry { fid, kind: FileKind::Dir } => schema::entries(&self.conn, fid),
        }
    }

    /// Removes file `path`; returns its layout, whose objects the caller
    /// must destroy on the OSTs.
    pub fn unlink(&mut self, path: &str) -> Result<Layout, MdsError> {
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(is_a_directory(&path)) };
        self.write(|tx, _| {
            let (ancestors, entry) = resolve(tx, &path)?;
            if entry.kind == FileKind::Dir {
                return Err(is_a_directory(&path));
            }
            let layout = schema::layout(tx, entry.fid)?;
            schema::unlink(tx, ancestors.parent(), name)?;
            schema::delete_inode(tx, entry.fid)?;
            schema::touch(tx, ancestors.parent(), now_ns())?;
            tracing::debug!(%path, fid = entry.fid.0, "unlinked file");
            Ok(layout)
        })
    }

    /// Removes empty directory `path`.
    pub fn rmdir(&mut self, path: &str) -> Result<(), MdsError> {
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(MdsError::RootDirectory { action: "remove".into() }) };
        self.write(|tx, _| {
            let (ancestors, entry) = resolve(tx, &path)?;
            if entry.kind == FileKind::File {
                return Err(not_a_directory(&path));
            }
            let entry_count = schema::entry_count(tx, entry.fid)?;
            if entry_count > 0 {
                return Err(MdsError::NotEmpty { path: path.to_string(), entry_count });
            }
            schema::unlink(tx, ancestors.parent(), name)?;
            schema::delete_inode(tx, entry.fid)?;
            schema::touch(tx, ancestors.parent(), now_ns())
        })
    }

    /// POSIX `rename(2)`: moves `from` to `to`, replacing a file at `to`
    /// (when `from` is a file) or an empty directory (when it is a
    /// directory). Returns the replaced file's layout, whose objects the
    /// caller must destroy on the OSTs.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<Option<Layout>, MdsError> {
        let from = MdsPath::parse(from)?;
        let to = MdsPath::parse(to)?;
        let Some(from_name) = from.name() else { return Err(MdsError::RootDirectory { action: "rename".into() }) };
        let Some(to_name) = to.name() else { return Err(MdsError::RootDirectory { action: "replace".into() }) };
        self.write(|tx, _| {
            let (from_ancestors, source) = resolve(tx, &from)?;
            let to_parent = ancestors(tx, &to)?.parent();
            if from == to {
                return Ok(None);
            }
            if source.kind == FileKind::Dir && to.starts_with(&from) {
                return Err(MdsError::RenameIntoItself { from: from.to_string(), to: to.to_string() });
            }
            let replaced = match schema::lookup(tx, to_parent, to_name)? {
                None => None,
                Some(target) => replace(tx, source.kind, &to, to_parent, target)?,
            };
            assert!(schema::lookup(tx, to_parent, to_name)?.is_none(), "rename target {to} still exists");
            schema::move_entry(tx, (from_ancestors.parent(), from_name), (to_parent, to_name))?;
            let now_ns = now_ns();
            schema::touch(tx, from_ancestors.parent(), now_ns)?;
            schema::touch(tx, to_parent, now_ns)?;
            tracing::debug!(%from, %to, "renamed");
            Ok(replaced)
        })
    }

    /// Sets directory `path`'s default striping for new files below it
    /// (replacing its previous default; all fields unset clears it).
    pub fn set_stripe(&mut self, path: &str, stripe: &StripeSpec) -> Result<(), MdsError> {
        let path = MdsPath::parse(path)?;
        let stripe = alloc::normalize(stripe, self.config.ost_count)?;
        self.write(|tx, _| match resolve(tx, &path)?.1 {
            Entry { kind: FileKind::File, .. } => Err(MdsError::LayoutAlreadySet { path: path.to_string() }),
            Entry { fid, kind: FileKind::Dir } => schema::set_dir_default(tx, fid, &stripe),
        })
    }

    /// A file's layout, and the default striping that applies in a directory
    /// (for a file: in its parent) with where each field comes from.
    pub fn get_stripe(&self, path: &str) -> Result<StripeInfo, MdsError> {
        let path = MdsPath::parse(path)?;
        let (ancestors, entry) = resolve(&self.conn, &path)?;
        let mut dirs = ancestors.dirs;
        let (layout, dir_path) = match entry.kind {
            FileKind::File => {
                (Some(schema::layout(&self.conn, entry.fid)?), path.parent().expect("files have parents"))
            }
            FileKind::Dir => {
                dirs.push(entry.fid);
                (None, path)
            }
        };
        let defaults = dir_defaults(&self.conn, &dir_path, &dirs)?;
        let (default, inherited_from) = alloc::inherit(&defaults, &self.config);
        Ok(StripeInfo { layout, default, inherited_from })
    }

    pub fn statfs(&self) -> Result<Statfs, MdsError> {
        Ok(Statfs {
            ost_count: self.config.ost_count,
            file_count: schema::inode_count(&self.conn, FileKind::File)?,
            dir_count: schema::inode_count(&self.conn, FileKind::Dir)?,
        })
    }
}

/// Removes rename target `target` at `to` so that a `source_kind` can take
/// its name, or refuses as POSIX does. Returns a removed file's layout.
fn replace(
    tx: &Connection,
    source_kind: FileKind,
    to: &MdsPath,
    to_parent: Fid,
    target: Entry,
) -> Result<Option<Layout>, MdsError> {
    let to_name = to.name().expect("the root is never a rename target");
    match (source_kind, target.kind) {
        (FileKind::File, FileKind::Dir) => Err(is_a_directory(to)),
        (FileKind::Dir, FileKind::File) => Err(not_a_directory(to)),
        (FileKind::File, FileKind::File) => {
            let layout = schema::layout(tx, target.fid)?;
            schema::unlink(tx, to_parent, to_name)?;
            schema::delete_inode(tx, target.fid)?;
            Ok(Some(layout))
        }
        (FileKind::Dir, FileKind::Dir) => {
            let entry_count = schema::entry_count(tx, target.fid)?;
            if entry_count > 0 {
                return Err(MdsError::NotEmpty { path: to.to_string(), entry_count });
            }
            schema::unlink(tx, to_parent, to_name)?;
            schema::delete_inode(tx, target.fid)?;
            Ok(None)
        }
    }
}

/// The own default of each directory from the root down to `dir_path`
/// (`dirs[i]` is `dir_path.prefix(i)`), named by its path.
fn dir_defaults(conn: &Connection, dir_path: &MdsPath, dirs: &[Fid]) -> Result<Vec<(String, StripeSpec)>, MdsError> {
    assert_eq!(dirs.len(), dir_path.names().len() + 1, "directories from / down to {dir_path}");
    let own = |depth: usize| Ok((dir_path.prefix(depth).to_string(), schema::dir_default(conn, dirs[depth])?));
    (0..dirs.len()).map(own).collect()
}
