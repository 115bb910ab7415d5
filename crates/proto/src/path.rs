//! Namespace paths: parsing, normalisation and the limits on names.
//!
//! Requests carry paths as strings; [`MdsPath::parse`] turns one into a list
//! of names or says precisely what is wrong with it. The MDS has no current
//! directory and no symbolic links, so every path is absolute and one path
//! names at most one inode.
//!
//! Normalisation: repeated slashes and a trailing slash are dropped, and `.`
//! names are skipped, so `//a/./b/` is `/a/b`. Refused: the empty path,
//! relative paths, `..` (it would need the walk back up that symbolic links
//! make ambiguous, and clients resolve it before asking), names containing a
//! NUL byte, names over [`NAME_BYTES_MAX`] bytes and paths over
//! [`PATH_BYTES_MAX`] bytes (which also bounds the depth of any walk to 2048
//! names).
//!
//! A path may start at a directory named by fid instead of at the root, as
//! Lustre's `.lustre/fid` directory lets one: `/.lustre/fid/[0x2a]/name`
//! is `name` in the directory whose fid is `0x2a`, wherever that directory
//! is now. A mount sends such paths, so that a name it looks up or
//! changes is in the directory the kernel holds, never in whatever
//! directory another mount has since put at its old path. The MDS
//! resolves the anchor to the directory's current path inside the
//! request's transaction (`lanefs_mds::ops`); the walk above the anchor needs
//! no search permission (the client already reached the directory), so
//! only nodes may send anchored paths, as with every request by fid. The
//! name `.lustre` in `/` is reserved for them, as on Lustre.

use crate::MdsError;
use std::fmt;

/// The longest name, in bytes (POSIX `NAME_MAX`).
pub const NAME_BYTES_MAX: usize = 255;

/// The longest path a request may carry, in bytes (POSIX `PATH_MAX`).
pub const PATH_BYTES_MAX: usize = 4096;

/// Where anchored paths start: Lustre's directory of inodes by fid.
pub const FID_DIR: &str = "/.lustre/fid/";

/// A normalised absolute path: the names from the root (or from an anchor
/// directory named by fid) down. The root is the empty list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MdsPath {
    /// The fid of the directory the names start at, if not the root.
    anchor: Option<u64>,
    names: Vec<String>,
    /// The first `reached` names lead to a directory the client reached
    /// by fid: the walk checks no search permission on the way there.
    reached: usize,
}

impl MdsPath {
    pub fn root() -> MdsPath {
        MdsPath { anchor: None, names: Vec::new(), reached: 0 }
    }

    /// Parses and normalises `path`, or says what is wrong with it.
    pub fn parse(path: &str) -> Result<MdsPath, MdsError> {
        if path.is_empty() {
            return Err(MdsError::invalid_path(path, "the path is empty: give an absolute path such as /dir/file"));
        }
        if !path.starts_with('/') {
            let reason = format!("the path is relative, but MDS paths are absolute: start it with /, as in /{path}");
            return Err(MdsError::invalid_path(path, reason));
        }
        if path.len() > PATH_BYTES_MAX {
            let reason = format!("the path is {} bytes long, over the limit of {PATH_BYTES_MAX}", path.len());
            return Err(MdsError::invalid_path(path, reason));
        }
        if path.contains('\0') {
            return Err(MdsError::invalid_path(path, "the path contains a NUL byte, which no name may hold"));
        }
        let mut names = Vec::new();
        let mut anchor = None;
        let mut parts = path.split('/').filter(|name| !name.is_empty() && *name != ".").peekable();
        if parts.peek() == Some(&".lustre") {
            parts.next();
            let reserved = || {
                let reason = format!(
                    "the name .lustre in / is reserved: {FID_DIR}[FID]/NAME names NAME in the directory of fid FID \
                     (as on Lustre); choose another name"
                );
                MdsError::invalid_path(path, reason)
            };
            if parts.next() != Some("fid") {
                return Err(reserved());
            }
            let fid = parts.next().and_then(|fid| fid.strip_prefix("[0x")?.strip_suffix(']'));
            match fid.and_then(|hex| u64::from_str_radix(hex, 16).ok()) {
                Some(fid) if fid > 0 => anchor = Some(fid),
                _ => return Err(reserved()),
            }
        }
        for name in parts {
            if name == ".." {
                let reason = "'..' is not supported (the MDS has no current directory): give the path without it";
                return Err(MdsError::invalid_path(path, reason));
            }
            if name.len() > NAME_BYTES_MAX {
                let reason = format!(
                    "the name starting {:?} is {} bytes long, over the limit of {NAME_BYTES_MAX}: shorten it",
                    name.chars().take(16).collect::<String>(),
                    name.len()
                );
                return Err(MdsError::invalid_path(path, reason));
            }
            names.push(name.to_string());
        }
        Ok(MdsPath { anchor, names, reached: 0 })
    }

    /// The fid of the directory the path starts at, if not the root.
    pub fn anchor(&self) -> Option<u64> {
        self.anchor
    }

    /// This path's names below `above`, the names from the root to its
    /// anchor as they are now: the absolute path, whose walk checks no
    /// search permission before the anchor.
    pub fn from_root(&self, above: Vec<String>) -> MdsPath {
        assert!(self.anchor.is_some(), "{self} is absolute already");
        let reached = above.len();
        let mut names = above;
        names.extend(self.names.iter().cloned());
        MdsPath { anchor: None, names, reached }
    }

    /// How many names lead to a directory reached by fid (no search
    /// permission checked on the way).
    pub fn reached(&self) -> usize {
        self.reached
    }

    pub fn is_root(&self) -> bool {
        self.anchor.is_none() && self.names.is_empty()
    }

    /// The names from the root down.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The last name, `None` for the root.
    pub fn name(&self) -> Option<&str> {
        self.names.last().map(String::as_str)
    }

    /// The path of the first `name_count` names (`prefix(0)` is the root).
    pub fn prefix(&self, name_count: usize) -> MdsPath {
        assert!(name_count <= self.names.len(), "prefix of {name_count} names of {self}");
        MdsPath { anchor: self.anchor, names: self.names[..name_count].to_vec(), reached: self.reached.min(name_count) }
    }

    /// The parent directory's path, `None` for the root.
    pub fn parent(&self) -> Option<MdsPath> {
        (!self.names.is_empty()).then(|| self.prefix(self.names.len() - 1))
    }

    /// Whether `ancestor` is this path or a directory above it.
    pub fn starts_with(&self, ancestor: &MdsPath) -> bool {
        self.anchor == ancestor.anchor && self.names.starts_with(&ancestor.names)
    }
}

impl fmt::Display for MdsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(anchor) = self.anchor {
            write!(f, "{FID_DIR}[{anchor:#x}]")?;
        } else if self.is_root() {
            return f.write_str("/");
        }
        for name in &self.names {
            write!(f, "/{name}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(path: &str) -> String {
        MdsPath::parse(path).unwrap().to_string()
    }

    fn reason(path: &str) -> String {
        match MdsPath::parse(path).unwrap_err() {
            MdsError::InvalidPath { path: reported, reason } => {
                assert_eq!(reported, path);
                reason
            }
            other => panic!("expected InvalidPath, got {other:?}"),
        }
    }

    #[test]
    fn normalises_slashes_and_dots() {
        assert_eq!(normal("/"), "/");
        assert_eq!(normal("//"), "/");
        assert_eq!(normal("/."), "/");
        assert_eq!(normal("/a"), "/a");
        assert_eq!(normal("//a///b/"), "/a/b");
        assert_eq!(normal("/./a/./b/."), "/a/b");
        assert_eq!(normal("/a/.hidden/..x"), "/a/.hidden/..x");
        assert_eq!(MdsPath::parse("/a//b").unwrap().names(), ["a", "b"]);
    }

    #[test]
    fn refuses_bad_paths_with_reasons() {
        assert!(reason("").starts_with("the path is empty"));
        assert_eq!(reason("a/b"), "the path is relative, but MDS paths are absolute: start it with /, as in /a/b");
        assert!(reason("/a/../b").starts_with("'..' is not supported"));
        assert!(reason("/a/b\0c").contains("NUL"));
        let long_name = format!("/d/{}", "x".repeat(NAME_BYTES_MAX + 1));
        assert!(reason(&long_name).contains("is 256 bytes long, over the limit of 255"));
        let long_path = "/abcdefg".repeat(PATH_BYTES_MAX / 8 + 1);
        assert!(reason(&long_path).contains("over the limit of 4096"));
    }

    #[test]
    fn limits_are_inclusive() {
        let longest_name = format!("/{}", "n".repeat(NAME_BYTES_MAX));
        assert_eq!(MdsPath::parse(&longest_name).unwrap().names()[0].len(), NAME_BYTES_MAX);
        let longest_path = "/".repeat(PATH_BYTES_MAX);
        assert!(MdsPath::parse(&longest_path).unwrap().is_root());
    }

    #[test]
    fn a_path_may_start_at_a_directory_named_by_fid() {
        let path = MdsPath::parse("/.lustre/fid/[0x2a]/a/b").unwrap();
        assert_eq!((path.anchor(), path.names()), (Some(0x2a), &["a".to_string(), "b".to_string()][..]));
        assert_eq!(path.to_string(), "/.lustre/fid/[0x2a]/a/b");
        assert_eq!(path.parent().unwrap().to_string(), "/.lustre/fid/[0x2a]/a");
        assert_eq!(normal("//.lustre/./fid/[0x2a]/"), "/.lustre/fid/[0x2a]");
        let absolute = path.from_root(vec!["d".into()]);
        assert_eq!((absolute.to_string(), absolute.reached()), ("/d/a/b".to_string(), 1));
        assert_eq!(absolute.prefix(0).reached(), 0);
        for reserved in ["/.lustre", "/.lustre/x", "/.lustre/fid", "/.lustre/fid/42/a", "/.lustre/fid/[0x0]/a"] {
            assert!(reason(reserved).contains("reserved"), "{reserved}");
        }
        assert_eq!(normal("/d/.lustre/fid"), "/d/.lustre/fid", "reserved in / only");
    }

    #[test]
    fn prefixes_and_parents() {
        let path = MdsPath::parse("/a/b/c").unwrap();
        assert_eq!(path.prefix(0), MdsPath::root());
        assert_eq!(path.prefix(2).to_string(), "/a/b");
        assert_eq!(path.parent().unwrap().to_string(), "/a/b");
        assert_eq!(path.name(), Some("c"));
        assert_eq!(MdsPath::root().parent(), None);
        assert_eq!(MdsPath::root().name(), None);
        assert!(path.starts_with(&path.prefix(1)));
        assert!(path.starts_with(&path));
        assert!(!path.prefix(1).starts_with(&path));
        assert!(!MdsPath::parse("/ab").unwrap().starts_with(&MdsPath::parse("/a").unwrap()));
    }
}
