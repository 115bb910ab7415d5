//! The namespace operations: one method per request, each one transaction.
//!
//! Every method parses its paths first, then walks the namespace from the
//! root inside the transaction it writes in, so a request sees and leaves a
//! consistent tree. Errors roll the transaction back: a failed request
//! changes nothing, counters included.
//!
//! Permissions (POSIX's, see [`crate::perm`]), checked for the caller of
//! each request:
//! - every walk needs search (`x`) on each directory it looks a name up in;
//! - `Readdir` needs read on the directory; `Open` (and `Create` of an
//!   existing file) read and/or write on the file, as its access asks;
//! - `Mkdir`, `Create` of a new file, `Unlink` and `Rmdir` need write and
//!   search on the parent; `Rename` on both parents, and write on a
//!   directory it moves to another parent (to change its `..`);
//! - in a sticky parent, removing or renaming an entry (or replacing a
//!   rename's target) is for the entry's owner, the directory's owner or
//!   root;
//! - `SetStripe` and `DeleteStripe` on a directory are for its owner or
//!   root (Lustre's rule); pool changes for root alone (see
//!   [`crate::pools`]);
//!   `SetAttr` follows `chmod`/`chown`: the owner or root changes the
//!   permissions, only root the owner, the owner or root the group (the
//!   owner only to a group it is in).
//!
//! `Stat`, `GetStripe`, `ListXattrs` and `Statfs` need only the walk;
//! `ListPools` nothing; extended attributes follow Linux's rules per
//! namespace (see [`crate::xattr`]).

use crate::alloc::{self, PoolMembers};
use crate::migrate;
use crate::path::MdsPath;
use crate::perm::{self, Caller, Need};
use crate::pools;
use crate::schema::{self, Counter, Inode};
use crate::xattr;
use crate::{
    fid_name, Access, Attr, CreateMode, Credentials, DirPage, Fid, FileInfo, FileKind, Mds, MdsConfig, MdsError,
    MdtSpace, Owner, PoolName, Statfs, StripeDefault, StripeInfo, StripeSpec, WriteKind, XattrHow, PERMISSION_BITS,
};
use lanefs_core::layout::Layout;
use rusqlite::Connection;

/// Which time of an inode [`Mds::set_time`] sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Time {
    Modified,
    Accessed,
}

/// How a request names the inode it acts on: by path, walked from the
/// root with search permission on each directory on the way, or by fid:
/// the inode a client already holds (an open file, an inode its kernel
/// looked up), whatever names it has now, as Lustre's clients address the
/// MDT by FID. A fid walks nothing, so it needs no search permission; the
/// inode's own permissions are checked as for a path.
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    Path(&'a str),
    Fid(Fid),
}

/// The inode `target` names, and how errors name it (its path, or its fid
/// as Lustre prints one: `[0x2a]`).
fn resolve_target(conn: &Connection, caller: &Caller, target: Target<'_>) -> Result<(String, Inode), MdsError> {
    match target {
        Target::Path(path) => {
            let path = absolute(conn, &MdsPath::parse(path)?)?;
            let (_, inode) = resolve(conn, caller, &path)?;
            Ok((path.to_string(), inode))
        }
        Target::Fid(fid) => {
            let name = fid_name(fid);
            match schema::inode_if_any(conn, fid)? {
                Some(inode) => Ok((name, inode)),
                None => Err(MdsError::NotFound { path: name.clone(), missing: name }),
            }
        }
    }
}

/// `path` from the root as the namespace is now: an anchored path
/// (`/.lustre/fid/[0x2a]/name`, see [`crate::path`]) becomes its anchor's
/// current path followed by its names, the walk checking no search
/// permission above the anchor. Inside a request's transaction, so the
/// request acts in the directory the fid names.
pub(crate) fn absolute(conn: &Connection, path: &MdsPath) -> Result<MdsPath, MdsError> {
    let Some(anchor) = path.anchor() else { return Ok(path.clone()) };
    let missing = || MdsError::NotFound { path: path.to_string(), missing: fid_name(Fid(anchor)) };
    schema::inode_if_any(conn, Fid(anchor))?.ok_or_else(missing)?;
    let mut above = Vec::new();
    let mut fid = Fid(anchor);
    while fid != Fid::ROOT {
        let Some((parent, name)) = schema::entry_of(conn, fid)? else { return Err(missing()) };
        above.push(name);
        fid = parent;
        if above.len() > crate::path::PATH_BYTES_MAX {
            return Err(MdsError::Database(format!(
                "{} has no way up to /: the database was edited by hand",
                fid_name(Fid(anchor))
            )));
        }
    }
    above.reverse();
    Ok(path.from_root(above))
}

/// The directories from the root down to a path's parent: `dirs[i]` is the
/// directory named by the path's first `i` names, so `dirs[0]` is the root
/// and the last is the parent. The caller may search each of them.
struct Ancestors {
    dirs: Vec<Inode>,
}

impl Ancestors {
    fn parent(&self) -> Inode {
        *self.dirs.last().expect("every path below the root has a parent")
    }

    fn fids(&self) -> Vec<Fid> {
        self.dirs.iter().map(|dir| dir.fid).collect()
    }
}

/// Walks to `path`'s parent, which must exist, be a directory, and (as
/// every directory on the way) be searchable by `caller`.
fn ancestors(conn: &Connection, caller: &Caller, path: &MdsPath) -> Result<Ancestors, MdsError> {
    assert!(!path.is_root(), "the root has no ancestors");
    let names = path.names();
    let mut dirs = Vec::with_capacity(names.len());
    dirs.push(schema::inode(conn, Fid::ROOT)?);
    for (depth, name) in names[..names.len() - 1].iter().enumerate() {
        let prefix = || path.prefix(depth + 1).to_string();
        if depth >= path.reached() {
            perm::check(caller, &dirs[depth], Need::Search, path, &path.prefix(depth))?;
        }
        match schema::lookup(conn, dirs[depth].fid, name)? {
            None => return Err(MdsError::NotFound { path: path.to_string(), missing: prefix() }),
            Some(Inode { kind: FileKind::Symlink, .. }) => return Err(MdsError::SymbolicLink { path: prefix() }),
            Some(dir) if dir.kind == FileKind::Dir => dirs.push(dir),
            Some(_) => return Err(MdsError::NotADirectory { path: path.to_string(), file: prefix() }),
        }
    }
    let parent = dirs.last().expect("the root at least");
    if names.len() > path.reached() {
        perm::check(caller, parent, Need::Search, path, &path.parent().expect("not the root"))?;
    }
    Ok(Ancestors { dirs })
}

/// Walks to `path` itself, which must exist.
fn resolve(conn: &Connection, caller: &Caller, path: &MdsPath) -> Result<(Ancestors, Inode), MdsError> {
    let Some(name) = path.name() else {
        return Ok((Ancestors { dirs: Vec::new() }, schema::inode(conn, Fid::ROOT)?));
    };
    let ancestors = ancestors(conn, caller, path)?;
    match schema::lookup(conn, ancestors.parent().fid, name)? {
        Some(inode) => Ok((ancestors, inode)),
        None => Err(MdsError::NotFound { path: path.to_string(), missing: path.to_string() }),
    }
}

/// Walks to `path`'s parent for a new entry `name`: the name must be free
/// and the caller may add it.
fn free_name(conn: &Connection, caller: &Caller, path: &MdsPath, name: &str) -> Result<Ancestors, MdsError> {
    let ancestors = ancestors(conn, caller, path)?;
    if schema::lookup(conn, ancestors.parent().fid, name)?.is_some() {
        return Err(MdsError::Exists { path: path.to_string() });
    }
    check_parent_writable(caller, &ancestors, path)?;
    Ok(ancestors)
}

/// A new inode `new`, named `name` in `parent`, whose time moves to now.
fn add_inode(
    tx: &Connection,
    parent: Fid,
    name: &str,
    new: schema::NewInode<'_>,
    owner: (Owner, u32),
) -> Result<Fid, MdsError> {
    let fid = Fid(schema::take_counter(tx, Counter::NextFid)?);
    let now_ns = now_ns();
    schema::insert_inode(tx, fid, new, now_ns, owner)?;
    schema::link(tx, parent, name, fid)?;
    schema::touch(tx, parent, now_ns)?;
    Ok(fid)
}

/// Write and search on `path`'s parent, to add or remove a name in it.
fn check_parent_writable(caller: &Caller, ancestors: &Ancestors, path: &MdsPath) -> Result<(), MdsError> {
    let parent_path = path.parent().expect("a name has a parent");
    perm::check(caller, &ancestors.parent(), Need::WriteSearch, path, &parent_path)
}

/// The sticky rule for removing `victim` (at `path`) from its parent.
fn check_removable(caller: &Caller, ancestors: &Ancestors, victim: &Inode, path: &MdsPath) -> Result<(), MdsError> {
    let parent_path = path.parent().expect("a name has a parent");
    perm::check_sticky(caller, &ancestors.parent(), &parent_path, victim, path)
}

fn access_need(access: Access) -> Need {
    match access {
        Access::Read => Need::Read,
        Access::Write => Need::Write,
        Access::ReadWrite => Need::ReadWrite,
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

/// A named pipe, socket or device where a file with data is needed.
fn not_a_file(path: &str, kind: FileKind) -> MdsError {
    MdsError::NotAFile { path: path.to_string(), kind: kind.name().to_string() }
}

fn not_a_directory(path: &MdsPath) -> MdsError {
    MdsError::NotADirectory { path: path.to_string(), file: path.to_string() }
}

impl Mds {
    pub(crate) fn caller(&self, credentials: &Credentials) -> Result<Caller, MdsError> {
        Caller::new(credentials, self.config.root_squash)
    }

    /// Creates directory `path` in an existing directory.
    pub fn mkdir(&mut self, credentials: &Credentials, path: &str, permissions: u32) -> Result<Attr, MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(MdsError::Exists { path: path.to_string() }) };
        self.write(WriteKind::Grows, |tx, _| {
            let path = absolute(tx, &path)?;
            let parent = free_name(tx, &caller, &path, name)?.parent();
            let owner = perm::new_owner(&caller, &parent, FileKind::Dir, permissions);
            let fid = add_inode(tx, parent.fid, name, schema::NewInode::Dir, owner)?;
            schema::attr(tx, schema::inode(tx, fid)?)
        })
    }

    /// Creates file `path` with its objects allocated (striping from the set
    /// fields of `stripe`, the rest inherited), or opens it as `mode` says
    /// for `access`.
    pub fn create(
        &mut self,
        credentials: &Credentials,
        path: &str,
        stripe: &StripeSpec,
        mode: CreateMode,
        access: Access,
        permissions: u32,
    ) -> Result<FileInfo, MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let stripe = alloc::normalize(stripe, self.config.ost_count)?;
        let Some(name) = path.name() else {
            return Err(match mode {
                CreateMode::Exclusive => MdsError::Exists { path: path.to_string() },
                CreateMode::OpenOrCreate => is_a_directory(&path),
            });
        };
        let config = self.config;
        self.write(WriteKind::Grows, |tx, ost_count| {
            let path = absolute(tx, &path)?;
            let ancestors = ancestors(tx, &caller, &path)?;
            let parent = ancestors.parent();
            match (schema::lookup(tx, parent.fid, name)?, mode) {
                (None, _) => {}
                (Some(_), CreateMode::Exclusive) => return Err(MdsError::Exists { path: path.to_string() }),
                (Some(Inode { kind: FileKind::Dir, .. }), _) => return Err(is_a_directory(&path)),
                (Some(Inode { kind: FileKind::Symlink, .. }), _) => {
                    return Err(MdsError::SymbolicLink { path: path.to_string() })
                }
                (Some(special), _) if special.kind.is_special() => {
                    return Err(not_a_file(&path.to_string(), special.kind))
                }
                (Some(file), _) => {
                    perm::check(&caller, &file, access_need(access), &path, &path)?;
                    return Ok(FileInfo { fid: file.fid, layout: schema::layout(tx, file.fid)? });
                }
            }
            check_parent_writable(&caller, &ancestors, &path)?;
            let parent_path = path.parent().expect("a file has a parent");
            let dirs = dir_defaults(tx, &parent_path, &ancestors.fids())?;
            let (layout, pools) = new_layout(tx, &stripe, &dirs, &config, ost_count)?;
            let owner = perm::new_owner(&caller, &parent, FileKind::File, permissions);
            let fid = add_inode(tx, parent.fid, name, schema::NewInode::File(&layout, &pools), owner)?;
            tracing::debug!(%path, fid = fid.0, ?layout, "created file");
            Ok(FileInfo { fid, layout })
        })
    }

    /// Opens existing file `path` for I/O of kind `access`.
    pub fn open_file(&self, credentials: &Credentials, path: &str, access: Access) -> Result<FileInfo, MdsError> {
        self.open_target(credentials, Target::Path(path), access)
    }

    /// Opens the file `target` names for I/O of kind `access`.
    pub fn open_target(
        &self,
        credentials: &Credentials,
        target: Target<'_>,
        access: Access,
    ) -> Result<FileInfo, MdsError> {
        let caller = self.caller(credentials)?;
        let (name, inode) = resolve_target(&self.conn, &caller, target)?;
        match inode {
            Inode { kind: FileKind::Dir, .. } => Err(MdsError::IsADirectory { path: name }),
            Inode { kind: FileKind::Symlink, .. } => Err(MdsError::SymbolicLink { path: name }),
            special if special.kind.is_special() => Err(not_a_file(&name, special.kind)),
            file => {
                perm::check(&caller, &file, access_need(access), &name, &name)?;
                Ok(FileInfo { fid: file.fid, layout: schema::layout(&self.conn, file.fid)? })
            }
        }
    }

    pub fn stat(&self, credentials: &Credentials, path: &str) -> Result<Attr, MdsError> {
        self.stat_target(credentials, Target::Path(path))
    }

    /// The attributes of the inode `target` names.
    pub fn stat_target(&self, credentials: &Credentials, target: Target<'_>) -> Result<Attr, MdsError> {
        let caller = self.caller(credentials)?;
        let (_, inode) = resolve_target(&self.conn, &caller, target)?;
        schema::attr(&self.conn, inode)
    }

    /// One page of directory `path`'s entries, sorted by name, after
    /// `cursor` (the last name of the previous page).
    pub fn readdir(&self, credentials: &Credentials, path: &str, cursor: Option<&str>) -> Result<DirPage, MdsError> {
        self.readdir_target(credentials, Target::Path(path), cursor)
    }

    /// [`Mds::readdir`] of the directory `target` names.
    pub fn readdir_target(
        &self,
        credentials: &Credentials,
        target: Target<'_>,
        cursor: Option<&str>,
    ) -> Result<DirPage, MdsError> {
        let caller = self.caller(credentials)?;
        match resolve_target(&self.conn, &caller, target)? {
            (name, inode) if inode.kind != FileKind::Dir => {
                Err(MdsError::NotADirectory { path: name.clone(), file: name })
            }
            (name, dir) => {
                perm::check(&caller, &dir, Need::Read, &name, &name)?;
                let (entries_max, bytes_max) = self.readdir_page;
                schema::entries_page(&self.conn, dir.fid, cursor, entries_max, bytes_max)
            }
        }
    }

    /// Removes the name `path` of a file or symbolic link. With its last
    /// name a file goes, and its objects are queued for destruction on
    /// their OSTs (in the same transaction): its layout is returned then.
    pub fn unlink(&mut self, credentials: &Credentials, path: &str) -> Result<Option<Layout>, MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(is_a_directory(&path)) };
        self.write(WriteKind::Removes, |tx, _| {
            let path = absolute(tx, &path)?;
            let (ancestors, file) = resolve(tx, &caller, &path)?;
            if file.kind == FileKind::Dir {
                return Err(is_a_directory(&path));
            }
            check_parent_writable(&caller, &ancestors, &path)?;
            check_removable(&caller, &ancestors, &file, &path)?;
            schema::unlink(tx, ancestors.parent().fid, name)?;
            let now_ns = now_ns();
            let layout = remove_if_unnamed(tx, file, now_ns)?;
            if let Some(layout) = &layout {
                if lanefs_core::planted::active(lanefs_core::planted::Bug::ForgetDestroy) {
                    for object in layout.objects() {
                        schema::dequeue_destroys(tx, object.ost, &[object.object])?;
                    }
                }
            }
            schema::touch(tx, ancestors.parent().fid, now_ns)?;
            tracing::debug!(%path, fid = file.fid.0, removed = layout.is_some(), "unlinked");
            Ok(layout)
        })
    }

    /// `symlink(2)`: a symbolic link at `path` to `target`, owned by the
    /// caller, mode 0777.
    pub fn symlink(&mut self, credentials: &Credentials, path: &str, target: &str) -> Result<Attr, MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(MdsError::Exists { path: path.to_string() }) };
        if target.len() > crate::SYMLINK_TARGET_MAX {
            let reason = format!(
                "a symbolic link's target of {} bytes is over the limit of {} bytes",
                target.len(),
                crate::SYMLINK_TARGET_MAX
            );
            return Err(MdsError::invalid_path(&path.to_string(), reason));
        }
        if target.is_empty() || target.contains('\0') {
            let reason = "a symbolic link's target is at least one byte, with no NUL byte";
            return Err(MdsError::invalid_path(&path.to_string(), reason));
        }
        self.write(WriteKind::Grows, |tx, _| {
            let path = absolute(tx, &path)?;
            let parent = free_name(tx, &caller, &path, name)?.parent();
            let (owner, _) = perm::new_owner(&caller, &parent, FileKind::Symlink, 0o777);
            let fid = add_inode(tx, parent.fid, name, schema::NewInode::Symlink(target), (owner, 0o777))?;
            schema::attr(tx, schema::inode(tx, fid)?)
        })
    }

    /// `mknod(2)`: a named pipe, socket or device at `path`, owned by the
    /// caller. Only root makes devices (Linux's `CAP_MKNOD`); anyone who
    /// may add a name to the directory makes a pipe or a socket.
    pub fn mknod(
        &mut self,
        credentials: &Credentials,
        path: &str,
        kind: FileKind,
        permissions: u32,
        rdev: u64,
    ) -> Result<Attr, MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(MdsError::Exists { path: path.to_string() }) };
        if !kind.is_special() {
            let reason = format!(
                "mknod makes named pipes, sockets and devices, not a {}: use create, mkdir or symlink",
                kind.name()
            );
            return Err(MdsError::invalid_path(&path.to_string(), reason));
        }
        if kind.is_device() && !caller.is_root() {
            return Err(MdsError::NotPermitted {
                path: path.to_string(),
                reason: format!("only root may make a device (CAP_MKNOD), not uid {}", caller.uid),
            });
        }
        self.write(WriteKind::Grows, |tx, _| {
            let path = absolute(tx, &path)?;
            let parent = free_name(tx, &caller, &path, name)?.parent();
            let owner = perm::new_owner(&caller, &parent, kind, permissions);
            let fid = add_inode(tx, parent.fid, name, schema::NewInode::Special(kind, rdev), owner)?;
            tracing::debug!(%path, fid = fid.0, ?kind, rdev, "made a special file");
            schema::attr(tx, schema::inode(tx, fid)?)
        })
    }

    /// `link(2)`: the name `to` for the file or symbolic link at `from`
    /// (a directory gets no second name: `EPERM`).
    pub fn link(&mut self, credentials: &Credentials, from: &str, to: &str) -> Result<Attr, MdsError> {
        self.link_target(credentials, Target::Path(from), to)
    }

    /// [`Mds::link`] of the inode `from` names.
    pub fn link_target(&mut self, credentials: &Credentials, from: Target<'_>, to: &str) -> Result<Attr, MdsError> {
        let caller = self.caller(credentials)?;
        if let Target::Path(from) = from {
            MdsPath::parse(from)?;
        }
        let to = MdsPath::parse(to)?;
        let Some(to_name) = to.name() else { return Err(MdsError::Exists { path: to.to_string() }) };
        self.write(WriteKind::Grows, |tx, _| {
            let (from, source) = resolve_target(tx, &caller, from)?;
            if source.kind == FileKind::Dir {
                return Err(MdsError::NotPermitted {
                    path: from,
                    reason: "a directory has one name: it cannot be hard-linked".into(),
                });
            }
            check_hardlink_source(&caller, &source, &from)?;
            let to = absolute(tx, &to)?;
            let parent = free_name(tx, &caller, &to, to_name)?.parent();
            let links = schema::name_count(tx, source.fid)?;
            if links >= crate::LINKS_MAX {
                return Err(MdsError::TooManyLinks { path: from, links });
            }
            let now_ns = now_ns();
            schema::link(tx, parent.fid, to_name, source.fid)?;
            schema::changed(tx, source.fid, now_ns)?;
            schema::touch(tx, parent.fid, now_ns)?;
            schema::attr(tx, schema::inode(tx, source.fid)?)
        })
    }

    /// Removes empty directory `path`.
    pub fn rmdir(&mut self, credentials: &Credentials, path: &str) -> Result<(), MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let Some(name) = path.name() else { return Err(MdsError::RootDirectory { action: "remove".into() }) };
        self.write(WriteKind::Removes, |tx, _| {
            let path = absolute(tx, &path)?;
            let (ancestors, dir) = resolve(tx, &caller, &path)?;
            if dir.kind != FileKind::Dir {
                return Err(not_a_directory(&path));
            }
            check_parent_writable(&caller, &ancestors, &path)?;
            check_removable(&caller, &ancestors, &dir, &path)?;
            let entry_count = schema::entry_count(tx, dir.fid)?;
            if entry_count > 0 {
                return Err(MdsError::NotEmpty { path: path.to_string(), entry_count });
            }
            schema::unlink(tx, ancestors.parent().fid, name)?;
            schema::delete_inode(tx, dir)?;
            schema::touch(tx, ancestors.parent().fid, now_ns())
        })
    }

    /// POSIX `rename(2)`: moves `from` to `to`, replacing a file at `to`
    /// (when `from` is a file) or an empty directory (when it is a
    /// directory). A replaced file's objects are queued for destruction;
    /// its layout is returned.
    pub fn rename(&mut self, credentials: &Credentials, from: &str, to: &str) -> Result<Option<Layout>, MdsError> {
        let caller = self.caller(credentials)?;
        let from = MdsPath::parse(from)?;
        let to = MdsPath::parse(to)?;
        let Some(from_name) = from.name() else { return Err(MdsError::RootDirectory { action: "rename".into() }) };
        let Some(to_name) = to.name() else { return Err(MdsError::RootDirectory { action: "replace".into() }) };
        self.write(WriteKind::Removes, |tx, _| {
            let (from, to) = (absolute(tx, &from)?, absolute(tx, &to)?);
            let (from_ancestors, source) = resolve(tx, &caller, &from)?;
            let to_ancestors = ancestors(tx, &caller, &to)?;
            let (from_parent, to_parent) = (from_ancestors.parent(), to_ancestors.parent());
            if from.names() == to.names() {
                return Ok(None);
            }
            if source.kind == FileKind::Dir && to.starts_with(&from) {
                return Err(MdsError::RenameIntoItself { from: from.to_string(), to: to.to_string() });
            }
            check_parent_writable(&caller, &from_ancestors, &from)?;
            check_removable(&caller, &from_ancestors, &source, &from)?;
            check_parent_writable(&caller, &to_ancestors, &to)?;
            if source.kind == FileKind::Dir && from_parent.fid != to_parent.fid {
                perm::check(&caller, &source, Need::Write, &from, &from)?;
            }
            let replaced = match schema::lookup(tx, to_parent.fid, to_name)? {
                None => None,
                // Two names of one inode: POSIX has rename do nothing.
                Some(target) if target.fid == source.fid => return Ok(None),
                Some(target) => {
                    check_removable(&caller, &to_ancestors, &target, &to)?;
                    replace(tx, source.kind, &to, to_parent.fid, target)?
                }
            };
            assert!(schema::lookup(tx, to_parent.fid, to_name)?.is_none(), "rename target {to} still exists");
            schema::move_entry(tx, (from_parent.fid, from_name), (to_parent.fid, to_name))?;
            let now_ns = now_ns();
            schema::touch(tx, from_parent.fid, now_ns)?;
            schema::touch(tx, to_parent.fid, now_ns)?;
            tracing::debug!(%from, %to, "renamed");
            Ok(replaced)
        })
    }

    /// `chmod` and `chown`: sets the fields given of `path`'s permissions,
    /// owner and group, as POSIX allows the caller.
    pub fn set_attr(
        &mut self,
        credentials: &Credentials,
        path: &str,
        permissions: Option<u32>,
        owner: (Option<u32>, Option<u32>),
    ) -> Result<Attr, MdsError> {
        self.set_attr_target(credentials, Target::Path(path), permissions, owner)
    }

    /// [`Mds::set_attr`] of the inode `target` names.
    pub fn set_attr_target(
        &mut self,
        credentials: &Credentials,
        target: Target<'_>,
        permissions: Option<u32>,
        owner: (Option<u32>, Option<u32>),
    ) -> Result<Attr, MdsError> {
        let caller = self.caller(credentials)?;
        if let Target::Path(path) = target {
            MdsPath::parse(path)?;
        }
        self.write(WriteKind::Grows, |tx, _| {
            let (name, inode) = resolve_target(tx, &caller, target)?;
            let (new_owner, new_permissions) = changed_owner(&caller, &inode, &name, permissions, owner)?;
            schema::set_owner(tx, inode.fid, new_owner, new_permissions, now_ns())?;
            schema::attr(tx, schema::inode(tx, inode.fid)?)
        })
    }

    /// Sets `path`'s modification or access time to now (`at: None`: its
    /// owner, root, or a caller who may write it) or to `at` (its owner or
    /// root), as `utimensat` does; its change time becomes now.
    pub fn set_time(
        &mut self,
        credentials: &Credentials,
        path: &str,
        at: Option<u64>,
        which: Time,
    ) -> Result<Attr, MdsError> {
        self.set_time_target(credentials, Target::Path(path), at, which)
    }

    /// [`Mds::set_time`] of the inode `target` names.
    pub fn set_time_target(
        &mut self,
        credentials: &Credentials,
        target: Target<'_>,
        at: Option<u64>,
        which: Time,
    ) -> Result<Attr, MdsError> {
        let caller = self.caller(credentials)?;
        if let Target::Path(path) = target {
            MdsPath::parse(path)?;
        }
        self.write(WriteKind::Grows, |tx, _| {
            let (name, inode) = resolve_target(tx, &caller, target)?;
            let owns = caller.is_root() || caller.uid == inode.uid;
            match at {
                Some(_) if !owns => {
                    return Err(MdsError::NotPermitted {
                        path: name,
                        reason: format!(
                            "only its owner (uid {}) or root may set its time to a given one, not uid {}",
                            inode.uid, caller.uid
                        ),
                    })
                }
                None if !owns => perm::check(&caller, &inode, perm::Need::Write, &name, &name)?,
                _ => {}
            }
            let now_ns = now_ns();
            match which {
                Time::Modified => schema::touch_at(tx, inode.fid, at.unwrap_or(now_ns), now_ns)?,
                Time::Accessed => schema::set_atime(tx, inode.fid, at.unwrap_or(now_ns), now_ns)?,
            }
            schema::attr(tx, schema::inode(tx, inode.fid)?)
        })
    }

    /// The value of the extended attribute `name` of the inode `target`
    /// names (see [`crate::xattr`] for who may read what).
    pub fn get_xattr(&self, credentials: &Credentials, target: Target<'_>, name: &str) -> Result<Vec<u8>, MdsError> {
        let caller = self.caller(credentials)?;
        let (path, inode) = resolve_target(&self.conn, &caller, target)?;
        xattr::check(&caller, &inode, &path, name, xattr::Use::Read)?;
        xattr::get(&self.conn, inode.fid, &path, name)
    }

    /// The names of `target`'s extended attributes the caller may see,
    /// sorted. Listing needs no permission on the inode, as in Linux.
    pub fn list_xattrs(&self, credentials: &Credentials, target: Target<'_>) -> Result<Vec<String>, MdsError> {
        let caller = self.caller(credentials)?;
        let (_, inode) = resolve_target(&self.conn, &caller, target)?;
        xattr::list(&self.conn, &caller, inode.fid)
    }

    /// Sets `target`'s extended attribute `name` to `value`, as `how`
    /// allows; the inode's change time becomes now.
    pub fn set_xattr(
        &mut self,
        credentials: &Credentials,
        target: Target<'_>,
        name: &str,
        value: &[u8],
        how: XattrHow,
    ) -> Result<(), MdsError> {
        let caller = self.caller(credentials)?;
        self.write(WriteKind::Grows, |tx, _| {
            let (path, inode) = resolve_target(tx, &caller, target)?;
            xattr::check(&caller, &inode, &path, name, xattr::Use::Write)?;
            xattr::set(tx, inode.fid, &path, name, value, how)?;
            schema::set_ctime(tx, inode.fid, now_ns())
        })
    }

    /// Removes `target`'s extended attribute `name`; the inode's change
    /// time becomes now.
    pub fn remove_xattr(&mut self, credentials: &Credentials, target: Target<'_>, name: &str) -> Result<(), MdsError> {
        let caller = self.caller(credentials)?;
        self.write(WriteKind::Removes, |tx, _| {
            let (path, inode) = resolve_target(tx, &caller, target)?;
            xattr::check(&caller, &inode, &path, name, xattr::Use::Write)?;
            xattr::remove(tx, inode.fid, &path, name)?;
            schema::set_ctime(tx, inode.fid, now_ns())
        })
    }

    /// Sets directory `path`'s default striping for new files below it
    /// (replacing its previous default; all fields unset clears it). Only
    /// the directory's owner or root may. A pool it names must be defined;
    /// if it has OSTs, the count and starting OST set here must fit it.
    pub fn set_stripe(&mut self, credentials: &Credentials, path: &str, stripe: &StripeSpec) -> Result<(), MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let stripe = alloc::normalize(stripe, self.config.ost_count)?;
        let component_osts = stripe.components.iter().flatten().any(|part| part.stripe.osts.is_some());
        if stripe.osts.is_some() || component_osts {
            return Err(MdsError::invalid_stripe(
                "an OST list (-o) is kept for files only in lanefs, not as a directory's default: give it when \
                 creating each file (lanefs setstripe -o LIST FILE), or put those OSTs in a pool and set the pool \
                 here (-p)",
            ));
        }
        self.write(WriteKind::Grows, |tx, ost_count| {
            if let Some(name) = stripe.pool {
                check_pool_default(tx, &stripe, name, ost_count)?;
            }
            for part in stripe.components.iter().flatten() {
                if let Some(name) = part.stripe.pool {
                    check_pool_default(tx, &part.stripe, name, ost_count)?;
                }
            }
            set_dir_default(tx, &caller, &path, &stripe)
        })
    }

    /// The current layout of the file `fid` ([`crate::MdsRequest::LayoutFid`]).
    pub fn layout_of(&self, fid: Fid) -> Result<FileInfo, MdsError> {
        let name = fid_name(fid);
        match schema::inode_if_any(&self.conn, fid)? {
            Some(inode) if inode.kind == FileKind::File => {
                Ok(FileInfo { fid, layout: schema::layout(&self.conn, fid)? })
            }
            Some(inode) => Err(not_a_file(&name, inode.kind)),
            None => Err(MdsError::NotFound { path: name.clone(), missing: name }),
        }
    }

    /// Starts restriping the file at `path` (see
    /// [`crate::MdsRequest::MigrateStart`]): the file with its layout now,
    /// and the volatile file with the new layout, owned as the file is.
    pub fn migrate_start(
        &mut self,
        credentials: &Credentials,
        path: &str,
        stripe: Option<&StripeSpec>,
    ) -> Result<(FileInfo, FileInfo), MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        let stripe = stripe.map(|stripe| alloc::normalize(stripe, self.config.ost_count)).transpose()?;
        let config = self.config;
        self.write(WriteKind::Grows, |tx, ost_count| {
            let path = absolute(tx, &path)?;
            let (ancestors, file) = resolve(tx, &caller, &path)?;
            match file.kind {
                FileKind::File => {}
                FileKind::Dir => return Err(is_a_directory(&path)),
                FileKind::Symlink => return Err(MdsError::SymbolicLink { path: path.to_string() }),
                kind => return Err(not_a_file(&path.to_string(), kind)),
            }
            perm::check(&caller, &file, Need::Write, &path, &path)?;
            let old = schema::layout(tx, file.fid)?;
            let stripe = match &stripe {
                Some(stripe) => stripe.clone(),
                None => {
                    let pool = schema::file_pool(tx, file.fid)?;
                    migrate::own_striping(&old, pool, &schema::component_pools(tx, file.fid)?)
                }
            };
            let parent_path = path.parent().expect("a file has a parent");
            let dirs = dir_defaults(tx, &parent_path, &ancestors.fids())?;
            let (layout, pools) = new_layout(tx, &stripe, &dirs, &config, ost_count)?;
            let volatile = Fid(schema::take_counter(tx, Counter::NextFid)?);
            let owner = (Owner { uid: file.uid, gid: file.gid }, file.permissions);
            schema::insert_inode(tx, volatile, schema::NewInode::File(&layout, &pools), now_ns(), owner)?;
            migrate::start(tx, file.fid, volatile)?;
            tracing::debug!(%path, fid = file.fid.0, volatile = volatile.0, ?layout, "migration started");
            Ok((FileInfo { fid: file.fid, layout: old }, FileInfo { fid: volatile, layout }))
        })
    }

    /// Ends the migration of `fid` (at `path`) into `volatile`: the file
    /// takes the new layout, its old objects are queued for destruction.
    /// Returns the file with its new layout.
    pub fn migrate_commit(
        &mut self,
        credentials: &Credentials,
        path: &str,
        fid: Fid,
        volatile: Fid,
    ) -> Result<FileInfo, MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        self.write(WriteKind::Removes, |tx, _| {
            migrating(tx, &caller, &path, fid, volatile)?;
            let old = migrate::swap(tx, fid, volatile, now_ns())?;
            let layout = schema::layout(tx, fid)?;
            tracing::debug!(%path, fid = fid.0, ?old, ?layout, "migrated");
            Ok(FileInfo { fid, layout })
        })
    }

    /// Abandons the migration of `fid` (at `path`) into `volatile`.
    pub fn migrate_abort(
        &mut self,
        credentials: &Credentials,
        path: &str,
        fid: Fid,
        volatile: Fid,
    ) -> Result<(), MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        self.write(WriteKind::Removes, |tx, _| {
            migrating(tx, &caller, &path, fid, volatile)?;
            migrate::abandon(tx, fid).map(|_| ())
        })
    }

    /// `lfs setstripe -d`: removes directory `path`'s own default striping
    /// (its pool too), so that new files below it inherit every field from
    /// the directories above. Only the directory's owner or root may.
    pub fn delete_stripe(&mut self, credentials: &Credentials, path: &str) -> Result<(), MdsError> {
        let caller = self.caller(credentials)?;
        let path = MdsPath::parse(path)?;
        self.write(WriteKind::Grows, |tx, _| set_dir_default(tx, &caller, &path, &StripeSpec::default()))
    }

    /// A file's layout, and the default striping that applies in a directory
    /// (for a file: in its parent) with where each field comes from.
    pub fn get_stripe(&self, credentials: &Credentials, path: &str) -> Result<StripeInfo, MdsError> {
        let caller = self.caller(credentials)?;
        let path = absolute(&self.conn, &MdsPath::parse(path)?)?;
        let (ancestors, inode) = resolve(&self.conn, &caller, &path)?;
        let mut dirs = ancestors.fids();
        let (layout, pool, component_pools, dir_path) = match inode.kind {
            FileKind::File => {
                let layout = schema::layout(&self.conn, inode.fid)?;
                let pool = schema::file_pool(&self.conn, inode.fid)?;
                let component_pools = schema::component_pools(&self.conn, inode.fid)?;
                (Some(layout), pool, component_pools, path.parent().expect("files have parents"))
            }
            FileKind::Dir => {
                dirs.push(inode.fid);
                (None, None, Vec::new(), path)
            }
            FileKind::Symlink => return Err(MdsError::SymbolicLink { path: path.to_string() }),
            kind => return Err(not_a_file(&path.to_string(), kind)),
        };
        let defaults = dir_defaults(&self.conn, &dir_path, &dirs)?;
        let (default, inherited_from) = alloc::inherit(&defaults, &self.config);
        let default_components = alloc::inherited_components(&defaults);
        Ok(StripeInfo { layout, default, inherited_from, pool, component_pools, default_components })
    }

    /// The counts of files and directories, and the space of the file
    /// system the database lives on.
    pub fn statfs(&self) -> Result<Statfs, MdsError> {
        Ok(Statfs {
            ost_count: self.config.ost_count,
            file_count: schema::inode_total(&self.conn)? - schema::inode_count(&self.conn, FileKind::Dir)?,
            dir_count: schema::inode_count(&self.conn, FileKind::Dir)?,
            space: self.database.as_deref().and_then(space_of),
        })
    }
}

/// A pool named by a directory default must be defined; the count and
/// start the same default sets must fit it if it has members (an empty
/// pool is checked when a file is created in it).
fn check_pool_default(
    tx: &Connection,
    stripe: &StripeSpec,
    name: crate::PoolName,
    ost_count: u32,
) -> Result<(), MdsError> {
    let full = name.full();
    let Some(osts) = pools::members(tx, &name)? else {
        return Err(MdsError::InvalidPool {
            reason: format!(
                "pool {full} is not defined: define it with lanefs pool_new {full} and lanefs pool_add {full} OST..."
            ),
        });
    };
    if osts.is_empty() {
        return Ok(());
    }
    let own_fields_only = StripeDefault {
        count: 1,
        overstripe: false,
        size: crate::DEFAULT_STRIPE_SIZE,
        start_ost: -1,
        pool: Some(name),
    };
    alloc::plan(stripe, &own_fields_only, ost_count, Some(&PoolMembers { name, osts })).map(|_| ())
}

/// Replaces directory `path`'s own default with `stripe`, as its owner or root.
fn set_dir_default(tx: &Connection, caller: &Caller, path: &MdsPath, stripe: &StripeSpec) -> Result<(), MdsError> {
    let path = &absolute(tx, path)?;
    match resolve(tx, caller, path)?.1 {
        Inode { kind: FileKind::File, .. } => Err(MdsError::LayoutAlreadySet { path: path.to_string() }),
        Inode { kind: FileKind::Symlink, .. } => Err(MdsError::SymbolicLink { path: path.to_string() }),
        special if special.kind.is_special() => Err(not_a_file(&path.to_string(), special.kind)),
        dir if !caller.is_root() && caller.uid != dir.uid => Err(MdsError::NotPermitted {
            path: path.to_string(),
            reason: format!(
                "only the owner of the directory (uid {}) or root may set its default striping, not uid {}",
                dir.uid, caller.uid
            ),
        }),
        dir => schema::set_dir_default(tx, dir.fid, stripe),
    }
}

/// `statvfs` of the file system holding `file`; `None` if it fails.
fn space_of(file: &std::path::Path) -> Option<MdtSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(file.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data, for which all zeros is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `st` a valid
    // out-parameter; statvfs writes only into it.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let unit = st.f_frsize as u64;
    Some(MdtSpace {
        fsid: st.f_fsid as u64,
        total_bytes: st.f_blocks as u64 * unit,
        free_bytes: st.f_bfree as u64 * unit,
        total_inodes: st.f_files as u64,
        free_inodes: st.f_ffree as u64,
    })
}

/// The owner and permissions `inode` gets from a `chmod`/`chown` by
/// `caller`, or the `EPERM` POSIX answers. As Linux: a `chmod` by someone
/// outside the file's group (root aside) drops setgid, and a change of a
/// file's owner or group drops setuid, and setgid when group-executable.
fn changed_owner(
    caller: &Caller,
    inode: &Inode,
    path: &str,
    permissions: Option<u32>,
    (uid, gid): (Option<u32>, Option<u32>),
) -> Result<(Owner, u32), MdsError> {
    let refuse = |reason: String| MdsError::NotPermitted { path: path.to_string(), reason };
    let owns = caller.is_root() || caller.uid == inode.uid;
    let new_uid = uid.unwrap_or(inode.uid);
    let new_gid = gid.unwrap_or(inode.gid);
    if new_uid != inode.uid && !caller.is_root() {
        return Err(refuse(format!("only root may give it to another owner (uid {new_uid}), not uid {}", caller.uid)));
    }
    if new_gid != inode.gid && !(caller.is_root() || (owns && caller.in_group(new_gid))) {
        return Err(refuse(format!(
            "only root, or its owner (uid {}) to a group it is in, may change its group to {new_gid}; uid {} may not",
            inode.uid, caller.uid
        )));
    }
    let mut new_permissions = inode.permissions;
    if let Some(permissions) = permissions {
        if !owns {
            return Err(refuse(format!(
                "only its owner (uid {}) or root may change its permissions, not uid {}",
                inode.uid, caller.uid
            )));
        }
        new_permissions = permissions & PERMISSION_BITS;
        if !caller.is_root() && !caller.in_group(new_gid) {
            new_permissions &= !crate::S_ISGID;
        }
    }
    let owner_changed = new_uid != inode.uid || new_gid != inode.gid;
    if owner_changed && inode.kind == FileKind::File {
        new_permissions &= !crate::S_ISUID;
        if new_permissions & 0o010 != 0 {
            new_permissions &= !crate::S_ISGID;
        }
    }
    Ok((Owner { uid: new_uid, gid: new_gid }, new_permissions))
}

/// Linux's `protected_hardlinks` (on by default in every major
/// distribution): a caller who does not own `source` (root aside) may link
/// it only if it is a regular file, neither setuid nor executable setgid,
/// that the caller may both read and write. Otherwise a user could pin
/// another's file under a name of their own choosing, to keep it from
/// being removed or to have a later privileged operation on that name act
/// on it.
fn check_hardlink_source(caller: &Caller, source: &Inode, from: &str) -> Result<(), MdsError> {
    if caller.is_root() || caller.uid == source.uid {
        return Ok(());
    }
    let safe = source.kind == FileKind::File
        && source.permissions & crate::S_ISUID == 0
        && source.permissions & (crate::S_ISGID | 0o010) != (crate::S_ISGID | 0o010)
        && perm::allows(caller, source, Need::ReadWrite);
    if safe {
        return Ok(());
    }
    Err(MdsError::NotPermitted {
        path: from.to_string(),
        reason: format!(
            "uid {} neither owns it (uid {}) nor may read and write it, so it may not link it \
             (protected hard links, as Linux's fs.protected_hardlinks)",
            caller.uid, source.uid
        ),
    })
}

/// Removes rename target `target` at `to` so that a `source_kind` can take
/// its name, or refuses as POSIX does. Returns a removed file's layout.
fn replace(
    tx: &Connection,
    source_kind: FileKind,
    to: &MdsPath,
    to_parent: Fid,
    target: Inode,
) -> Result<Option<Layout>, MdsError> {
    let to_name = to.name().expect("the root is never a rename target");
    match (source_kind == FileKind::Dir, target.kind == FileKind::Dir) {
        (false, true) => Err(is_a_directory(to)),
        (true, false) => Err(not_a_directory(to)),
        (false, false) => {
            schema::unlink(tx, to_parent, to_name)?;
            remove_if_unnamed(tx, target, now_ns())
        }
        (true, true) => {
            let entry_count = schema::entry_count(tx, target.fid)?;
            if entry_count > 0 {
                return Err(MdsError::NotEmpty { path: to.to_string(), entry_count });
            }
            schema::unlink(tx, to_parent, to_name)?;
            schema::delete_inode(tx, target)
        }
    }
}

/// A new file's layout, of `stripe` with its unset fields inherited from
/// `dirs`' defaults (a composite default, when `stripe` sets nothing), its
/// objects taken from their OSTs' pools; and each component's pool.
fn new_layout(
    tx: &Connection,
    stripe: &StripeSpec,
    dirs: &[(String, StripeSpec)],
    config: &MdsConfig,
    ost_count: u32,
) -> Result<(Layout, Vec<Option<PoolName>>), MdsError> {
    let (inherited, _) = alloc::inherit(dirs, config);
    let template = (*stripe == StripeSpec::default()).then(|| alloc::inherited_components(dirs)).flatten();
    match stripe.components.as_ref().or(template.as_ref()) {
        Some(parts) => {
            let plans = alloc::plan_components(parts, &inherited, ost_count, |name| pools::usable(tx, name))?;
            alloc::allocate_components(tx, &plans)
        }
        None => {
            let pool = match alloc::pool_of(stripe, &inherited) {
                Some(name) => Some(PoolMembers { name, osts: pools::usable(tx, &name)? }),
                None => None,
            };
            let plan = alloc::plan(stripe, &inherited, ost_count, pool.as_ref())?;
            Ok((alloc::allocate(tx, &plan)?, vec![plan.pool]))
        }
    }
}

/// The file `fid`, still at `path`, whose migration into `volatile` is
/// under way, for a caller who may write it.
fn migrating(tx: &Connection, caller: &Caller, path: &MdsPath, fid: Fid, volatile: Fid) -> Result<Inode, MdsError> {
    let path = absolute(tx, path)?;
    let (_, file) = resolve(tx, caller, &path)?;
    if file.fid != fid || migrate::volatile_of(tx, fid)? != Some(volatile) {
        return Err(MdsError::MigrationGone { path: path.to_string() });
    }
    perm::check(caller, &file, Need::Write, &path, &path)?;
    Ok(file)
}

/// A file or symbolic link that lost a name: gone with its last (a file's
/// objects queued for destruction, its layout returned), else changed.
fn remove_if_unnamed(tx: &Connection, inode: Inode, now_ns: u64) -> Result<Option<Layout>, MdsError> {
    if schema::name_count(tx, inode.fid)? > 0 {
        schema::changed(tx, inode.fid, now_ns)?;
        return Ok(None);
    }
    // A migration under way goes with the file.
    migrate::abandon(tx, inode.fid)?;
    schema::delete_inode(tx, inode)
}

/// The own default of each directory from the root down to `dir_path`
/// (`dirs[i]` is `dir_path.prefix(i)`), named by its path.
fn dir_defaults(conn: &Connection, dir_path: &MdsPath, dirs: &[Fid]) -> Result<Vec<(String, StripeSpec)>, MdsError> {
    assert_eq!(dirs.len(), dir_path.names().len() + 1, "directories from / down to {dir_path}");
    let own = |depth: usize| Ok((dir_path.prefix(depth).to_string(), schema::dir_default(conn, dirs[depth])?));
    (0..dirs.len()).map(own).collect()
}
