//! [`MdsError`]: every way an MDS request can fail, as plain data.
//!
//! The errors cross the wire inside [`crate::MdsReply::Error`], so they are
//! serde values holding strings and numbers only (the MDS flattens a
//! database error to its message). Each message names the offending path or value
//! and says what to do about it: the user at the other end of the network
//! sees it verbatim.
//!
//! What the MDS expects (bad paths, missing files, bad stripe settings, a
//! database of the wrong version) is an error here; a broken invariant of
//! the MDS itself is a panic (see `lanefs_mds::Mds::check_invariants`).

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a request, or opening the MDS, failed.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
pub enum MdsError {
    /// `path` does not exist; `missing` is its shortest prefix that does not
    /// exist (`path` itself when only the last name is missing).
    #[error("no such file or directory: {path}{}", missing_hint(.path, .missing))]
    NotFound { path: String, missing: String },

    #[error("file exists: {path} (choose another name, or remove it first)")]
    Exists { path: String },

    /// `file` (a prefix of `path`, or `path` itself) is a file where a
    /// directory is needed.
    #[error("not a directory: {path}{}", not_a_directory_hint(.path, .file))]
    NotADirectory { path: String, file: String },

    #[error(
        "is a directory: {path} (open, unlink and setstripe-on-a-file take files; use readdir, rmdir or mkdir for directories)"
    )]
    IsADirectory { path: String },

    /// A named pipe, socket or device (`kind`, as `stat` names it) where
    /// a file with data is needed: its data is the opening node's kernel's.
    #[error(
        "{path} is a {kind}, which holds no data in lanefs: open it through a mount, where the node's kernel serves it"
    )]
    NotAFile { path: String, kind: String },

    #[error("directory not empty: {path} holds {entry_count} entries (remove them first)")]
    NotEmpty { path: String, entry_count: u64 },

    #[error("invalid path {path:?}: {reason}")]
    InvalidPath { path: String, reason: String },

    #[error("invalid stripe settings: {reason}")]
    InvalidStripe { reason: String },

    #[error(
        "layout already set: {path} got its objects when it was created and a file's striping never changes; \
         create a new file with the striping you want and copy the data into it"
    )]
    LayoutAlreadySet { path: String },

    #[error("cannot move directory {from} into itself ({to} is inside it): choose a destination outside {from}")]
    RenameIntoItself { from: String, to: String },

    /// `action` is what was refused ("remove", "rename", "replace").
    #[error("cannot {action} the root directory /")]
    RootDirectory { action: String },

    /// `EACCES`: a permission bit the request needs is not granted to the
    /// caller on `on` (the path asked about, or a directory on the way).
    #[error(
        "permission denied (EACCES): {path}: uid {uid} lacks {needed} permission on {on}; \
         its owner or root can grant it (chmod), or run as a user who has it"
    )]
    PermissionDenied { path: String, on: String, needed: String, uid: u32 },

    /// `EPERM`: the request is reserved to an inode's owner or to root.
    #[error("operation not permitted (EPERM): {path}: {reason}")]
    NotPermitted { path: String, reason: String },

    /// `ELOOP`: `path` is a symbolic link where a file or directory is
    /// needed (the MDS does not follow links; a mount's kernel does).
    #[error("{path} is a symbolic link (ELOOP): give the path it points to")]
    SymbolicLink { path: String },

    /// `EMLINK`: `path` has as many hard links as a file may.
    #[error("{path} has {links} links, the most a file may have (EMLINK)")]
    TooManyLinks { path: String, links: u64 },

    /// An OST pool request, or a pool a file or directory names, that
    /// cannot be served; `reason` names the pool and the fix.
    #[error("OST pool: {reason}")]
    InvalidPool { reason: String },

    /// `ENODATA`: the inode has no extended attribute `name` (or none the
    /// caller may see).
    #[error("no extended attribute {name} on {path} (ENODATA): list them with getfattr -d -m - {path}")]
    NoXattr { path: String, name: String },

    /// `EEXIST`: `setxattr` with `XATTR_CREATE` of an attribute that exists.
    #[error("extended attribute {name} already exists on {path} (EEXIST): set it without XATTR_CREATE to replace it")]
    XattrExists { path: String, name: String },

    /// `EOPNOTSUPP`: a namespace lanefs keeps no attributes in.
    #[error("extended attribute {name} is not supported (EOPNOTSUPP): {reason}")]
    XattrNotSupported { name: String, reason: String },

    /// `EINVAL`: a malformed attribute name.
    #[error("invalid extended attribute name {name:?}: {reason}")]
    InvalidXattr { name: String, reason: String },

    /// `ERANGE`: a name longer than `max` bytes.
    #[error("extended attribute name of {bytes} bytes is over the limit of {max} (ERANGE): use a shorter name")]
    XattrNameTooLong { name: String, bytes: usize, max: usize },

    /// `E2BIG`: a value larger than `max` bytes.
    #[error(
        "value of extended attribute {name} is {bytes} bytes, over the limit of {max} (E2BIG): \
         keep large data in a file"
    )]
    XattrTooBig { name: String, bytes: usize, max: usize },

    /// `ENOSPC`: the change would take the inode past its attribute bounds.
    #[error(
        "no room for extended attributes on {path} (ENOSPC): it would hold {count} attributes of {bytes} bytes, \
         over the limits of {count_max} and {bytes_max}: remove some with setfattr -x"
    )]
    XattrsFull { path: String, count: usize, bytes: usize, count_max: usize, bytes_max: usize },

    #[error("invalid credentials: {reason}")]
    InvalidCredentials { reason: String },

    /// No object could be allocated on `ost`: its pool of objects the OST
    /// created in advance is empty. `reason` says why it was not refilled.
    #[error("no object available on OST{ost:04x}: {reason}")]
    NoObjects { ost: u32, reason: String },

    /// `ENOSPC`: the MDS's database cannot grow.
    #[error(
        "no space left on the MDS (ENOSPC): its database {path} cannot grow; \
         removing files and directories still works (the MDS keeps a reserve for it): \
         free space on the MDS's disk, then try again"
    )]
    NoSpace { path: String },

    #[error("invalid MDS configuration: {reason}")]
    InvalidConfig { reason: String },

    #[error(
        "the metadata database records {recorded_ost_count} OSTs but the configuration says {configured_ost_count}: \
         OSTs can be added but never removed (files have objects on them); configure {recorded_ost_count} or more OSTs"
    )]
    OstCountDecreased { recorded_ost_count: u32, configured_ost_count: u32 },

    #[error(
        "metadata database {path} has schema version {found_version}, but this lanefs-mds uses version {expected_version}: \
         open it with the lanefs release that wrote it, or give a new database path"
    )]
    SchemaVersion { path: String, found_version: i64, expected_version: i64 },

    #[error("{path} is not a lanefs metadata database ({reason}): give the path of an MDS database, or a new file")]
    NotAnMdsDatabase { path: String, reason: String },

    #[error("metadata database {path} is in use by another MDS: stop it first (one MDS owns a database at a time)")]
    DatabaseBusy { path: String },

    #[error(
        "the migration of {path} is no longer under way (EAGAIN): another lanefs migrate of it started since, \
         or it was removed or renamed; run lanefs migrate again"
    )]
    MigrationGone { path: String },

    #[error("metadata database error: {0}")]
    Database(String),
}

fn missing_hint(path: &str, missing: &str) -> String {
    if path == missing {
        String::new()
    } else {
        format!(" (directory {missing} does not exist: create it with mkdir first)")
    }
}

fn not_a_directory_hint(path: &str, file: &str) -> String {
    if path == file {
        " (it is a file: remove files with unlink; mkdir, readdir and rmdir need directories)".to_string()
    } else {
        format!(" ({file} is a file, so nothing can be inside it)")
    }
}

impl MdsError {
    /// The error number a POSIX call would fail with (what a mount returns
    /// to the program).
    pub fn errno(&self) -> lanefs_core::Errno {
        use lanefs_core::Errno;
        match self {
            MdsError::NotFound { .. } => Errno::ENOENT,
            MdsError::Exists { .. } | MdsError::XattrExists { .. } => Errno::EEXIST,
            MdsError::NoXattr { .. } => Errno::ENODATA,
            MdsError::XattrNotSupported { .. } => Errno::EOPNOTSUPP,
            MdsError::XattrNameTooLong { .. } => Errno::ERANGE,
            MdsError::XattrTooBig { .. } => Errno::E2BIG,
            MdsError::XattrsFull { .. } => Errno::ENOSPC,
            MdsError::NotADirectory { .. } => Errno::ENOTDIR,
            MdsError::IsADirectory { .. } => Errno::EISDIR,
            MdsError::NotEmpty { .. } => Errno::ENOTEMPTY,
            MdsError::InvalidPath { reason, .. } if reason.contains("over the limit") => Errno::ENAMETOOLONG,
            MdsError::InvalidPath { .. }
            | MdsError::InvalidStripe { .. }
            | MdsError::InvalidPool { .. }
            | MdsError::LayoutAlreadySet { .. }
            | MdsError::RenameIntoItself { .. }
            | MdsError::NotAFile { .. }
            | MdsError::InvalidXattr { .. }
            | MdsError::InvalidCredentials { .. } => Errno::EINVAL,
            MdsError::RootDirectory { .. } => Errno::EBUSY,
            MdsError::MigrationGone { .. } => Errno::EAGAIN,
            MdsError::PermissionDenied { .. } => Errno::EACCES,
            MdsError::NotPermitted { .. } => Errno::EPERM,
            MdsError::SymbolicLink { .. } => Errno::ELOOP,
            MdsError::TooManyLinks { .. } => Errno::EMLINK,
            MdsError::NoObjects { .. } | MdsError::NoSpace { .. } => Errno::ENOSPC,
            MdsError::InvalidConfig { .. }
            | MdsError::OstCountDecreased { .. }
            | MdsError::SchemaVersion { .. }
            | MdsError::NotAnMdsDatabase { .. }
            | MdsError::DatabaseBusy { .. }
            | MdsError::Database(_) => Errno::EIO,
        }
    }

    pub fn invalid_path(path: &str, reason: impl Into<String>) -> Self {
        MdsError::InvalidPath { path: path.to_string(), reason: reason.into() }
    }

    pub fn invalid_stripe(reason: impl ToString) -> Self {
        MdsError::InvalidStripe { reason: reason.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hints change with where the problem is.
    #[test]
    fn messages_point_at_the_problem() {
        let deep = MdsError::NotFound { path: "/a/b/c".into(), missing: "/a".into() };
        assert_eq!(
            deep.to_string(),
            "no such file or directory: /a/b/c (directory /a does not exist: create it with mkdir first)"
        );
        let leaf = MdsError::NotFound { path: "/a/b".into(), missing: "/a/b".into() };
        assert_eq!(leaf.to_string(), "no such file or directory: /a/b");
        let through = MdsError::NotADirectory { path: "/f/x".into(), file: "/f".into() };
        assert_eq!(through.to_string(), "not a directory: /f/x (/f is a file, so nothing can be inside it)");
        let itself = MdsError::NotADirectory { path: "/f".into(), file: "/f".into() };
        assert!(itself.to_string().starts_with("not a directory: /f (it is a file: remove files with unlink"));
    }
}
