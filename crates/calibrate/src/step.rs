//! What an optional step gives: its measurement, or why it was skipped
//! (the preset says so where its section would be, and the summary too).

use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub enum Step<T> {
    Measured(T),
    /// Why it was not measured, and what would let it be.
    Skipped(String),
}

impl<T> Step<T> {
    pub fn measured(&self) -> Option<&T> {
        match self {
            Step::Measured(m) => Some(m),
            Step::Skipped(_) => None,
        }
    }
}

/// The first executable file named `program` in the directories of
/// `path` (as `PATH` lists them).
pub fn find_in(path: &str, program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// [`find_in`] this process's `PATH`.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    find_in(&std::env::var("PATH").unwrap_or_default(), program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_found_in_the_first_directory_that_has_it_executable() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("tool"), "").unwrap();
        std::fs::write(b.path().join("tool"), "").unwrap();
        std::fs::set_permissions(b.path().join("tool"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}::{}", a.path().display(), b.path().display());
        assert_eq!(find_in(&path, "tool"), Some(b.path().join("tool")), "the first is not executable");
        assert_eq!(find_in(&path, "other"), None);
    }
}
