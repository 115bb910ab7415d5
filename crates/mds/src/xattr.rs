//! Extended attributes: which names there are, who may read and write
//! them, the bounds, and their rows.
//!
//! The namespaces and their rules are Linux's (`xattr_permission` in
//! `fs/xattr.c`, `cap_inode_setxattr` in `security/commoncap.c`):
//! - `user.`: on files and directories only (on a symbolic link a read
//!   finds nothing, a write is `EPERM`); reading needs read permission on
//!   the inode, writing and removing need write permission; in a sticky
//!   directory only its owner or root may write its `user.` attributes;
//! - `trusted.`: root's alone; to anyone else they are invisible (a read
//!   finds nothing, a listing leaves them out) and a write is `EPERM`;
//! - `security.`: anyone reads them, only root writes them (lanefs has no
//!   security module to ask);
//! - `system.` (POSIX ACLs) and every other prefix: `EOPNOTSUPP`.
//!   Departure from Lustre: Lustre keeps POSIX ACLs; lanefs does not.
//!   The mount serves Lustre's `lustre.lov` itself, from the layout.
//!
//! Bounds, so that one inode's attributes stay one bounded reply: a name
//! is at most [`XATTR_NAME_MAX`] bytes and a value [`XATTR_VALUE_MAX`]
//! (Linux's `XATTR_NAME_MAX` and `XATTR_SIZE_MAX`); an inode holds at most
//! [`XATTRS_PER_INODE_MAX`] attributes and [`XATTR_INODE_BYTES_MAX`] bytes
//! of names and values (past them `ENOSPC`, as ext4 answers when an
//! inode's attribute space is full). Every name listed fits Linux's
//! `XATTR_LIST_MAX` (64 KiB).
//!
//! An attribute belongs to its inode: its rows go with the inode's
//! ([`crate::schema`] removes them with it), and each change sets the
//! inode's change time, as `setxattr(2)` does.

use crate::perm::{self, Caller, Need};
use crate::schema::Inode;
use crate::Db;
use crate::S_ISVTX;
use crate::{FileKind, MdsError, XattrHow};
use rusqlite::{params, Connection, OptionalExtension};

/// The longest attribute name, in bytes (Linux's `XATTR_NAME_MAX`).
pub const XATTR_NAME_MAX: usize = 255;

/// The largest attribute value, in bytes (Linux's `XATTR_SIZE_MAX`).
pub const XATTR_VALUE_MAX: usize = 65_536;

/// The most attributes one inode holds: with names of at most
/// [`XATTR_NAME_MAX`] bytes, every listing fits Linux's `XATTR_LIST_MAX`.
pub const XATTRS_PER_INODE_MAX: usize = 256;

/// The most bytes of names and values one inode holds: room for one
/// largest value and many small ones.
pub const XATTR_INODE_BYTES_MAX: usize = 2 * XATTR_VALUE_MAX;

/// The namespaces lanefs keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Namespace {
    User,
    Trusted,
    Security,
}

/// What a request does to an attribute, for the permission rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    Read,
    Write,
}

/// The namespace of `name`, or why lanefs keeps no such attribute.
fn namespace(name: &str) -> Result<Namespace, MdsError> {
    if name.len() > XATTR_NAME_MAX {
        return Err(MdsError::XattrNameTooLong { name: name.to_string(), bytes: name.len(), max: XATTR_NAME_MAX });
    }
    let (namespace, rest) = if let Some(rest) = name.strip_prefix("user.") {
        (Namespace::User, rest)
    } else if let Some(rest) = name.strip_prefix("trusted.") {
        (Namespace::Trusted, rest)
    } else if let Some(rest) = name.strip_prefix("security.") {
        (Namespace::Security, rest)
    } else if name.starts_with("system.") {
        let reason = "lanefs keeps no POSIX ACLs (Lustre does): set permissions with chmod and chown".to_string();
        return Err(MdsError::XattrNotSupported { name: name.to_string(), reason });
    } else {
        let reason =
            "lanefs keeps the user., trusted. and security. namespaces: prefix the name with one of them".to_string();
        return Err(MdsError::XattrNotSupported { name: name.to_string(), reason });
    };
    if rest.is_empty() || name.contains('\0') {
        let reason = "a name is its namespace's prefix followed by at least one byte other than NUL".to_string();
        return Err(MdsError::InvalidXattr { name: name.to_string(), reason });
    }
    Ok(namespace)
}

/// Checks that `caller` may `what` the attribute `name` of `inode` (named
/// `path` in errors), as Linux's `xattr_permission` does.
pub(crate) fn check(caller: &Caller, inode: &Inode, path: &str, name: &str, what: Use) -> Result<(), MdsError> {
    let not_permitted = |reason: String| MdsError::NotPermitted { path: path.to_string(), reason };
    let absent = || MdsError::NoXattr { path: path.to_string(), name: name.to_string() };
    match (namespace(name)?, what) {
        (Namespace::Trusted, _) if caller.is_root() => Ok(()),
        (Namespace::Trusted, Use::Read) => Err(absent()),
        (Namespace::Trusted, Use::Write) => {
            Err(not_permitted(format!("trusted. attributes are root's; uid {} may not change {name}", caller.uid)))
        }
        (Namespace::Security, Use::Read) => Ok(()),
        (Namespace::Security, Use::Write) if caller.is_root() => Ok(()),
        (Namespace::Security, Use::Write) => {
            Err(not_permitted(format!("only root may change security. attributes, not uid {}", caller.uid)))
        }
        (Namespace::User, _) if !matches!(inode.kind, FileKind::File | FileKind::Dir) => match what {
            Use::Read => Err(absent()),
            Use::Write => Err(not_permitted(format!(
                "a {} has no user. attributes: only files and directories do (Linux's rule)",
                inode.kind.name()
            ))),
        },
        (Namespace::User, Use::Read) => perm::check(caller, inode, Need::Read, &path, &path),
        (Namespace::User, Use::Write) => {
            let sticky_dir = inode.kind == FileKind::Dir && inode.permissions & S_ISVTX != 0;
            if sticky_dir && !caller.is_root() && caller.uid != inode.uid {
                return Err(not_permitted(format!(
                    "{path} is a sticky directory: only its owner (uid {}) or root may change its user. attributes, \
                     not uid {}",
                    inode.uid, caller.uid
                )));
            }
            perm::check(caller, inode, Need::Write, &path, &path)
        }
    }
}

// Every listing fits Linux's `XATTR_LIST_MAX`, and one largest value fits
// an inode.
const _: () = assert!(XATTRS_PER_INODE_MAX * (XATTR_NAME_MAX + 1) <= 65_536);
const _: () = assert!(XATTR_INODE_BYTES_MAX >= XATTR_VALUE_MAX + XATTR_NAME_MAX);

/// Whether `caller` sees `name` in a listing: every name but `trusted.`
/// ones, which root alone sees.
fn listed(caller: &Caller, name: &str) -> bool {
    caller.is_root() || !name.starts_with("trusted.")
}

/// The value of `fid`'s attribute `name`.
pub(crate) fn get(conn: &Connection, fid: crate::Fid, path: &str, name: &str) -> Result<Vec<u8>, MdsError> {
    let value = conn
        .prepare_cached("SELECT value FROM xattrs WHERE fid = ?1 AND name = ?2")
        .db()?
        .query_row(params![fid.0, name], |row| row.get(0))
        .optional()
        .db()?;
    value.ok_or_else(|| MdsError::NoXattr { path: path.to_string(), name: name.to_string() })
}

/// The names of `fid`'s attributes that `caller` sees, sorted.
pub(crate) fn list(conn: &Connection, caller: &Caller, fid: crate::Fid) -> Result<Vec<String>, MdsError> {
    let mut statement = conn.prepare_cached("SELECT name FROM xattrs WHERE fid = ?1 ORDER BY name").db()?;
    let names = statement.query_map([fid.0], |row| row.get::<_, String>(0)).db()?;
    let mut out = Vec::new();
    for name in names {
        let name = name.db()?;
        if listed(caller, &name) {
            out.push(name);
        }
    }
    Ok(out)
}

/// Sets `fid`'s attribute `name` to `value` as `how` allows, within the
/// inode's bounds.
pub(crate) fn set(
    conn: &Connection,
    fid: crate::Fid,
    path: &str,
    name: &str,
    value: &[u8],
    how: XattrHow,
) -> Result<(), MdsError> {
    if value.len() > XATTR_VALUE_MAX {
        return Err(MdsError::XattrTooBig { name: name.to_string(), bytes: value.len(), max: XATTR_VALUE_MAX });
    }
    let old: Option<i64> = conn
        .prepare_cached("SELECT length(name) + length(value) FROM xattrs WHERE fid = ?1 AND name = ?2")
        .db()?
        .query_row(params![fid.0, name], |row| row.get(0))
        .optional()
        .db()?;
    match (how, old) {
        (XattrHow::Create, Some(_)) => {
            return Err(MdsError::XattrExists { path: path.to_string(), name: name.to_string() })
        }
        (XattrHow::Replace, None) => return Err(MdsError::NoXattr { path: path.to_string(), name: name.to_string() }),
        _ => {}
    }
    let (count, bytes): (i64, i64) = conn
        .prepare_cached("SELECT count(*), coalesce(sum(length(name) + length(value)), 0) FROM xattrs WHERE fid = ?1")
        .db()?
        .query_row([fid.0], |row| Ok((row.get(0)?, row.get(1)?)))
        .db()?;
    let count = count as usize + usize::from(old.is_none());
    let bytes = (bytes - old.unwrap_or(0)) as usize + name.len() + value.len();
    if count > XATTRS_PER_INODE_MAX || bytes > XATTR_INODE_BYTES_MAX {
        return Err(MdsError::XattrsFull {
            path: path.to_string(),
            count,
            bytes,
            count_max: XATTRS_PER_INODE_MAX,
            bytes_max: XATTR_INODE_BYTES_MAX,
        });
    }
    conn.prepare_cached("INSERT OR REPLACE INTO xattrs (fid, name, value) VALUES (?1, ?2, ?3)")
        .db()?
        .execute(params![fid.0, name, value])
        .db()?;
    Ok(())
}

/// Removes `fid`'s attribute `name`.
pub(crate) fn remove(conn: &Connection, fid: crate::Fid, path: &str, name: &str) -> Result<(), MdsError> {
    let removed = conn
        .prepare_cached("DELETE FROM xattrs WHERE fid = ?1 AND name = ?2")
        .db()?
        .execute(params![fid.0, name])
        .db()?;
    if removed == 0 {
        return Err(MdsError::NoXattr { path: path.to_string(), name: name.to_string() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sorted_into_namespaces_with_their_errors() {
        assert_eq!(namespace("user.x").unwrap(), Namespace::User);
        assert_eq!(namespace("trusted.lustre").unwrap(), Namespace::Trusted);
        assert_eq!(namespace("security.selinux").unwrap(), Namespace::Security);
        assert_eq!(namespace("system.posix_acl_access").unwrap_err().errno(), lanefs_core::Errno::EOPNOTSUPP);
        assert_eq!(namespace("os2.x").unwrap_err().errno(), lanefs_core::Errno::EOPNOTSUPP);
        assert_eq!(namespace("user.").unwrap_err().errno(), lanefs_core::Errno::EINVAL);
        let long = format!("user.{}", "n".repeat(XATTR_NAME_MAX));
        assert_eq!(namespace(&long).unwrap_err().errno(), lanefs_core::Errno::ERANGE);
        assert!(namespace(&long[..XATTR_NAME_MAX]).is_ok());
    }
}
