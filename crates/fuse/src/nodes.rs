//! Which path each inode number the kernel holds names.
//!
//! lanefs's MDS names inodes by [`Fid`], never reused, and the root is
//! `Fid(1)`, FUSE's root inode number; so a mount's inode numbers are the
//! MDS's fids. The kernel names an entry by its directory's inode and its
//! name, and the mount asks the MDS by the same: the directory's fid and
//! the name ([`child_path`]), never by a path of names another mount can
//! change. What this table keeps is the path each inode was last seen at
//! (by that form), to label it in logs and to know which inode a name
//! held here is. Lookups and creates fill the table, a rename moves a
//! node, an unlink or rmdir takes it out, and `forget` drops what the
//! kernel no longer holds.
//!
//! Invariant ([`Nodes::check_invariants`]): the two maps are each other's
//! inverse, and the root is always there.

use lanefs_proto::Fid;
use std::collections::HashMap;

#[derive(Debug)]
pub struct Nodes {
    by_ino: HashMap<u64, Node>,
    by_path: HashMap<String, u64>,
}

#[derive(Debug)]
struct Node {
    path: String,
    /// Lookups the kernel has not yet forgotten.
    lookups: u64,
}

impl Default for Nodes {
    fn default() -> Self {
        let mut nodes = Nodes { by_ino: HashMap::new(), by_path: HashMap::new() };
        nodes.by_ino.insert(Fid::ROOT.0, Node { path: "/".into(), lookups: 1 });
        nodes.by_path.insert("/".into(), Fid::ROOT.0);
        nodes
    }
}

impl Nodes {
    /// The path of inode `ino`, if the kernel may still hold it.
    pub fn path(&self, ino: u64) -> Option<String> {
        self.by_ino.get(&ino).map(|n| n.path.clone())
    }

    /// The inode at `path`, if the kernel may hold it.
    pub fn ino(&self, path: &str) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// The kernel learned inode `ino` at `path` (one more lookup to forget).
    pub fn learn(&mut self, ino: u64, path: &str) {
        if let Some(old) = self.by_path.get(path).copied().filter(|&old| old != ino) {
            // Another inode was here: it was replaced (by a rename in
            // another mount, say). It keeps its number, without a path.
            self.by_ino.remove(&old);
        }
        let node = self.by_ino.entry(ino).or_insert_with(|| Node { path: path.to_string(), lookups: 0 });
        if node.path != path {
            self.by_path.remove(&node.path);
            node.path = path.to_string();
        }
        node.lookups += 1;
        self.by_path.insert(path.to_string(), ino);
    }

    /// The kernel forgot `count` lookups of `ino`.
    pub fn forget(&mut self, ino: u64, count: u64) {
        if ino == Fid::ROOT.0 {
            return;
        }
        if let Some(node) = self.by_ino.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(count);
            if node.lookups == 0 {
                let node = self.by_ino.remove(&ino).expect("just seen");
                if self.by_path.get(&node.path) == Some(&ino) {
                    self.by_path.remove(&node.path);
                }
            }
        }
    }

    /// `path` was removed: the inode there has no path any more.
    pub fn removed(&mut self, path: &str) {
        if let Some(ino) = self.by_path.remove(path) {
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.path = String::new();
            }
        }
    }

    /// `from` was renamed to `to`: it and everything below it move.
    pub fn renamed(&mut self, from: &str, to: &str) {
        self.removed(to);
        let below = format!("{}/", from.trim_end_matches('/'));
        let moving: Vec<(String, u64)> = self
            .by_path
            .iter()
            .filter(|(p, _)| p.as_str() == from || p.starts_with(&below))
            .map(|(p, &ino)| (p.clone(), ino))
            .collect();
        for (old, ino) in moving {
            let new = format!("{to}{}", &old[from.len()..]);
            self.by_path.remove(&old);
            self.by_path.insert(new.clone(), ino);
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.path = new;
            }
        }
    }

    pub fn check_invariants(&self) {
        assert_eq!(self.by_path.get("/"), Some(&Fid::ROOT.0), "the root is always known");
        for (path, ino) in &self.by_path {
            assert_eq!(self.by_ino.get(ino).map(|n| n.path.as_str()), Some(path.as_str()), "{path}: maps disagree");
        }
        for (ino, node) in &self.by_ino {
            if !node.path.is_empty() {
                assert_eq!(self.by_path.get(&node.path), Some(ino), "inode {ino}: maps disagree");
            }
        }
    }
}

/// The MDS path of `name` in the directory whose fid is `parent`:
/// anchored at the directory (`/.lustre/fid/[0x2a]/name`, see
/// `lanefs_proto::path`), so that the MDS looks the name up, and changes it,
/// in the directory the kernel holds, whatever another mount has done to
/// that directory's names meanwhile; under the root, `/name`.
pub fn child_path(parent: u64, name: &str) -> String {
    if parent == Fid::ROOT.0 {
        format!("/{name}")
    } else {
        format!("{}[{parent:#x}]/{name}", lanefs_proto::path::FID_DIR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_move_whole_subtrees_and_forget_drops_nodes() {
        let mut n = Nodes::default();
        n.learn(5, "/a");
        n.learn(6, "/a/b");
        n.learn(7, "/a/b/c");
        n.learn(8, "/ab");
        n.renamed("/a", "/z");
        assert_eq!(n.path(6).as_deref(), Some("/z/b"));
        assert_eq!(n.path(7).as_deref(), Some("/z/b/c"));
        assert_eq!(n.path(8).as_deref(), Some("/ab"), "a sibling sharing a prefix stays");
        n.check_invariants();
        n.learn(9, "/x");
        n.renamed("/ab", "/x"); // over an existing entry
        assert_eq!(n.path(8).as_deref(), Some("/x"));
        assert_eq!(n.path(9).as_deref(), Some(""), "the replaced inode has no path");
        n.check_invariants();
        n.forget(7, 1);
        assert_eq!(n.path(7), None);
        n.removed("/z/b");
        assert_eq!(n.path(6).as_deref(), Some(""));
        n.forget(1, 100);
        assert_eq!(n.path(1).as_deref(), Some("/"), "the root is never forgotten");
        n.check_invariants();
    }
}
