//! Error numbers, so that a failure keeps its name from the OST's disk to
//! the program that caused it.
//!
//! An OST that fails to write, read or sync an object learns why from its
//! operating system as an `errno`; the client that asked, and through it the
//! application's `fsync`, `close` or IOR's `-e`, must be told the same thing
//! (`ENOSPC` is a full disk to free, `EIO` a broken one to replace). The core
//! does no I/O and has no `libc`, so it carries the number itself, with the
//! Linux values of the ones it names.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A Linux error number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Errno(pub i32);

impl Errno {
    pub const EPERM: Errno = Errno(1);
    pub const ENOENT: Errno = Errno(2);
    pub const EIO: Errno = Errno(5);
    pub const E2BIG: Errno = Errno(7);
    pub const EBADF: Errno = Errno(9);
    pub const EAGAIN: Errno = Errno(11);
    pub const ENOMEM: Errno = Errno(12);
    pub const EACCES: Errno = Errno(13);
    pub const EBUSY: Errno = Errno(16);
    pub const EEXIST: Errno = Errno(17);
    pub const ENOTDIR: Errno = Errno(20);
    pub const EISDIR: Errno = Errno(21);
    pub const EINVAL: Errno = Errno(22);
    pub const ENFILE: Errno = Errno(23);
    pub const EMFILE: Errno = Errno(24);
    pub const EFBIG: Errno = Errno(27);
    pub const ENOSPC: Errno = Errno(28);
    pub const EROFS: Errno = Errno(30);
    pub const EMLINK: Errno = Errno(31);
    pub const ERANGE: Errno = Errno(34);
    pub const ENAMETOOLONG: Errno = Errno(36);
    pub const ENOLCK: Errno = Errno(37);
    pub const ENOTEMPTY: Errno = Errno(39);
    pub const ELOOP: Errno = Errno(40);
    pub const ENODATA: Errno = Errno(61);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const ENOTCONN: Errno = Errno(107);
    pub const ETIMEDOUT: Errno = Errno(110);
    pub const EDQUOT: Errno = Errno(122);

    /// The symbolic name (`ENOSPC`), or `errno N` for one not named here.
    pub fn name(self) -> String {
        let name = match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::EIO => "EIO",
            Errno::E2BIG => "E2BIG",
            Errno::EBADF => "EBADF",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::ENFILE => "ENFILE",
            Errno::EMFILE => "EMFILE",
            Errno::EFBIG => "EFBIG",
            Errno::ENOSPC => "ENOSPC",
            Errno::EROFS => "EROFS",
            Errno::EMLINK => "EMLINK",
            Errno::ERANGE => "ERANGE",
            Errno::ENAMETOOLONG => "ENAMETOOLONG",
            Errno::ENOLCK => "ENOLCK",
            Errno::ENOTEMPTY => "ENOTEMPTY",
            Errno::ELOOP => "ELOOP",
            Errno::ENODATA => "ENODATA",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
            Errno::ENOTCONN => "ENOTCONN",
            Errno::ETIMEDOUT => "ETIMEDOUT",
            Errno::EDQUOT => "EDQUOT",
            Errno(n) => return format!("errno {n}"),
        };
        name.to_string()
    }

    /// What it means, in the words of `strerror` where it has one here.
    pub fn describe(self) -> &'static str {
        match self {
            Errno::EPERM => "operation not permitted",
            Errno::ENOENT => "no such file or directory",
            Errno::EIO => "input/output error",
            Errno::E2BIG => "argument list too long",
            Errno::EBADF => "bad file descriptor",
            Errno::EAGAIN => "resource temporarily unavailable",
            Errno::ENOMEM => "cannot allocate memory",
            Errno::EACCES => "permission denied",
            Errno::EBUSY => "device or resource busy",
            Errno::EEXIST => "file exists",
            Errno::ENOTDIR => "not a directory",
            Errno::EISDIR => "is a directory",
            Errno::EINVAL => "invalid argument",
            Errno::ENFILE => "too many open files in system",
            Errno::EMFILE => "too many open files",
            Errno::EFBIG => "file too large",
            Errno::ENOSPC => "no space left on device",
            Errno::EROFS => "read-only file system",
            Errno::EMLINK => "too many links",
            Errno::ERANGE => "numerical result out of range",
            Errno::ENAMETOOLONG => "file name too long",
            Errno::ENOLCK => "no locks available",
            Errno::ENOTEMPTY => "directory not empty",
            Errno::ELOOP => "too many levels of symbolic links",
            Errno::ENODATA => "no data available",
            Errno::EOPNOTSUPP => "operation not supported",
            Errno::ENOTCONN => "transport endpoint is not connected",
            Errno::ETIMEDOUT => "connection timed out",
            Errno::EDQUOT => "disk quota exceeded",
            _ => "unknown error",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_descriptions() {
        assert_eq!(Errno::ENOSPC.to_string(), "ENOSPC (no space left on device)");
        assert_eq!(Errno(4095).name(), "errno 4095");
        assert_eq!(Errno(4095).describe(), "unknown error");
    }
}
