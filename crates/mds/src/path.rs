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

use crate::MdsError;
use std::fmt;

/// The longest name, in bytes (POSIX `NAME_MAX`).
pub const NAME_BYTES_MAX: usize = 255;

/// The longest path a request may carry, in bytes (POSIX `PATH_MAX`).
pub const PATH_BYTES_MAX: usize = 4096;

/// A normalised absolute path: the names from the root down. The root is the
/// empty list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MdsPath {
    names: Vec<String>,
}

impl MdsPath {
    pub fn root() -> MdsPath {
        MdsPath { names: Vec::new() }
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
        for name in path.split('/').filter(|name| !name.is_empty() && *name != ".") {
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
        Ok(MdsPath { names })
    }

    pub fn is_root(&self) -> bool {
        self.names.is_empty()
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
        MdsPath { names: self.names[..name_count].to_vec() }
    }

    /// The parent directory's path, `None` for the root.
    pub fn parent(&self) -> Option<MdsPath> {
        (!self.is_root()).then(|| self.prefix(self.names.len() - 1))
    }

    /// Whether `ancestor` is this path or a directory above it.
    pub fn starts_with(&self, ancestor: &MdsPath) -> bool {
        self.names.starts_with(&ancestor.names)
    }
}

impl fmt::Display for MdsPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
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
