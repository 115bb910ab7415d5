//! Lustre's parameter tree (`lctl get_param`, `set_param`, `list_param`):
//! names, patterns and the statistics files, in Lustre's own shapes.
//!
//! A parameter is a file named by dotted components
//! (`osc.lanefs-OST0000-osc-ffff8a0012345678.max_dirty_mb`); every proper
//! prefix of a file's name is a directory. Whoever holds a parameter
//! makes its tree ([`client`] for a client's `osc`, `llite` and client
//! `ldlm` parameters, [`server`] for the OSTs' `obdfilter` and server
//! `ldlm` namespaces) and answers a [`Selection`] with [`Tree::select`]:
//! the holder matches, the command only prints. Patterns are matched as
//! lctl matches them: `.` separates components as `/` separates a path's,
//! and each component is a shell glob (`*`, `?`, `[...]`, `[!...]`), after
//! brace expansion (`{a,b}`), as lctl's `glob(3)` with `GLOB_BRACE` does.
//!
//! Bounds: a pattern has at most [`PATTERN_BYTES_MAX`] bytes and expands to
//! at most [`BRACE_EXPANSIONS_MAX`] patterns; a selection holds at most
//! [`PATTERNS_MAX`] patterns.

pub mod client;
pub mod format;
pub mod mdc;
pub mod server;

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The longest pattern taken.
pub const PATTERN_BYTES_MAX: usize = 4096;
/// Patterns one brace expansion may make.
pub const BRACE_EXPANSIONS_MAX: usize = 256;
/// Patterns in one request.
pub const PATTERNS_MAX: usize = 256;

/// One parameter or directory found by a pattern.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    /// The file's contents (a trailing newline removed, as lctl removes
    /// it); `None` for a directory.
    pub value: Option<String>,
}

/// What to look for: each pattern's matches, in pattern order; with
/// `recursive`, a matched directory brings everything under it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selection {
    pub patterns: Vec<String>,
    pub recursive: bool,
    /// Send files' contents (`get_param`), or only names (`list_param`).
    pub values: bool,
}

impl Selection {
    pub fn validate(&self) -> Result<(), String> {
        if self.patterns.len() > PATTERNS_MAX {
            return Err(format!("{} patterns: at most {PATTERNS_MAX} at once", self.patterns.len()));
        }
        for p in &self.patterns {
            if p.len() > PATTERN_BYTES_MAX {
                return Err(format!("a pattern of {} bytes: at most {PATTERN_BYTES_MAX}", p.len()));
            }
        }
        Ok(())
    }
}

/// A holder's parameters: file name to contents.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    files: BTreeMap<String, String>,
}

impl Tree {
    pub fn insert(&mut self, name: String, value: String) {
        debug_assert!(!name.is_empty() && !name.starts_with('.') && !name.ends_with('.'), "bad name {name:?}");
        self.files.insert(name, value);
    }

    pub fn files(&self) -> &BTreeMap<String, String> {
        &self.files
    }

    /// Every directory: the proper prefixes of the files' names.
    fn dirs(&self) -> BTreeSet<&str> {
        let mut dirs = BTreeSet::new();
        for name in self.files.keys() {
            for (i, _) in name.match_indices('.') {
                dirs.insert(&name[..i]);
            }
        }
        dirs
    }

    /// The nodes `selection` finds, pattern after pattern, each pattern's
    /// in name order (a node found by two patterns is given twice, as
    /// lctl prints it twice).
    pub fn select(&self, selection: &Selection) -> Vec<Node> {
        let dirs = self.dirs();
        let mut out = Vec::new();
        for pattern in &selection.patterns {
            let mut found: BTreeMap<&str, Option<&String>> = BTreeMap::new();
            let dir_hits: Vec<&str> = dirs.iter().copied().filter(|d| matches(pattern, d)).collect();
            for (name, value) in &self.files {
                if matches(pattern, name) {
                    found.insert(name, Some(value));
                }
            }
            for dir in &dir_hits {
                found.insert(dir, None);
                if selection.recursive {
                    let prefix = format!("{dir}.");
                    for (name, value) in self.files.range(prefix.clone()..) {
                        if !name.starts_with(&prefix) {
                            break;
                        }
                        found.insert(name, Some(value));
                    }
                    let from = (std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded);
                    for d in dirs.range::<str, _>(from) {
                        if !d.starts_with(&prefix) {
                            break;
                        }
                        found.insert(d, None);
                    }
                }
            }
            out.extend(found.into_iter().map(|(name, value)| Node {
                name: name.to_string(),
                value: value.filter(|_| selection.values).cloned().or_else(|| {
                    // A file's contents withheld still says it is a file.
                    (value.is_some() && !selection.values).then(String::new)
                }),
            }));
        }
        out
    }
}

/// Whether `selection` may find anything at or under directory `dir`: a
/// pattern whose leading components match `dir`'s (or all of them, a
/// shorter pattern's). Holders skip making the files of a directory no
/// pattern reaches (a client of many OSTs makes one OSC's `rpc_stats`
/// for `osc.*OST0001*.rpc_stats`, not every OSC's).
pub fn could_reach(selection: &Selection, dir: &str) -> bool {
    selection
        .patterns
        .iter()
        .flat_map(|p| expand_braces(p))
        .any(|p| p.split('.').zip(dir.split('.')).all(|(p, d)| glob(p.as_bytes(), d.as_bytes())))
}

/// Whether `name` matches `pattern` as lctl matches a parameter path:
/// braces expanded first, then component by component.
pub fn matches(pattern: &str, name: &str) -> bool {
    expand_braces(pattern).iter().any(|p| {
        let (mut ps, mut ns) = (p.split('.'), name.split('.'));
        loop {
            match (ps.next(), ns.next()) {
                (None, None) => return true,
                (Some(p), Some(n)) if glob(p.as_bytes(), n.as_bytes()) => {}
                _ => return false,
            }
        }
    })
}

/// `{a,b}c` as `ac`, `bc`; nested braces too; an unbalanced brace is taken
/// literally. At most [`BRACE_EXPANSIONS_MAX`] patterns.
pub fn expand_braces(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    expand_into(pattern, &mut out);
    out
}

fn expand_into(pattern: &str, out: &mut Vec<String>) {
    if out.len() >= BRACE_EXPANSIONS_MAX {
        return;
    }
    let bytes = pattern.as_bytes();
    let Some(open) = bytes.iter().position(|&b| b == b'{') else {
        out.push(pattern.to_string());
        return;
    };
    // The matching close brace, and the commas at depth one.
    let (mut depth, mut commas, mut close) = (0usize, Vec::new(), None);
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            b',' if depth == 1 => commas.push(i),
            _ => {}
        }
    }
    let Some(close) = close else {
        out.push(pattern.to_string());
        return;
    };
    let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
    let mut start = open + 1;
    for end in commas.into_iter().chain([close]) {
        expand_into(&format!("{head}{}{tail}", &pattern[start..end]), out);
        start = end + 1;
    }
}

/// `fnmatch` of one component: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`, `\x`.
fn glob(p: &[u8], n: &[u8]) -> bool {
    // Iterative with one backtrack point: linear in practice, never
    // exponential on a hostile pattern.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        let step = match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ni));
                pi += 1;
                continue;
            }
            Some(b'?') => Some(pi + 1),
            Some(b'[') => class(p, pi, n[ni]),
            Some(b'\\') if pi + 1 < p.len() => (p[pi + 1] == n[ni]).then_some(pi + 2),
            Some(&c) => (c == n[ni]).then_some(pi + 1),
            None => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ni += 1;
            }
            (None, Some((sp, sn))) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// A bracket expression at `p[at]` against `c`: the index after it if `c`
/// matches, `None` if not. An unclosed `[` is a literal.
fn class(p: &[u8], at: usize, c: u8) -> Option<usize> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < p.len() && (p[i] != b']' || first) {
        first = false;
        if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
            hit |= (p[i]..=p[i + 2]).contains(&c);
            i += 3;
        } else {
            hit |= p[i] == c;
            i += 1;
        }
    }
    if i >= p.len() {
        return (c == b'[').then_some(at + 1);
    }
    (hit != negate).then_some(i + 1)
}

/// The name closest to `wanted` among `names` (the most leading
/// components in common, then the shortest), for a hint.
pub fn closest<'a>(wanted: &str, names: impl IntoIterator<Item = &'a String>) -> Option<&'a String> {
    // Components in common, then bytes in common in the first that differs.
    let common = |name: &str| {
        let mut n = (0, 0);
        for (a, b) in wanted.split('.').zip(name.split('.')) {
            if !(a == b || glob(a.as_bytes(), b.as_bytes())) {
                n.1 = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                break;
            }
            n.0 += 1;
        }
        n
    };
    names.into_iter().min_by_key(|name| (std::cmp::Reverse(common(name)), name.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_lctls_glob() {
        assert!(matches("osc.*.max_dirty_mb", "osc.lanefs-OST0000-osc-ffff.max_dirty_mb"));
        assert!(!matches("osc.*", "osc.a.max_dirty_mb"), "a star stays within its component");
        assert!(matches("osc.*OST000[0-1]*.max_*", "osc.lanefs-OST0001-osc-x.max_rpcs_in_flight"));
        assert!(!matches("osc.*OST000[!0-1]*.max_*", "osc.lanefs-OST0001-osc-x.max_rpcs_in_flight"));
        assert!(matches("ldlm.namespaces.*.lru_{size,max_age}", "ldlm.namespaces.n.lru_max_age"));
        assert!(matches("ldlm.namespaces.*.lru_{size,max_age}", "ldlm.namespaces.n.lru_size"));
        assert!(!matches("ldlm.namespaces.*.lru_{size,max_age}", "ldlm.namespaces.n.lock_count"));
        assert!(matches("a?c", "abc") && !matches("a?c", "abbc"));
        assert!(matches("a.[b", "a.[b"), "an unclosed bracket is literal");
        assert_eq!(expand_braces("{a,b{c,d}}x").len(), 3);
        assert_eq!(expand_braces("{a,b").len(), 1);
        // A hostile pattern is cheap.
        let stars = "*a".repeat(1000);
        assert!(!matches(&stars, &"a".repeat(999)));
        let braces = "{a,b}".repeat(20);
        assert_eq!(expand_braces(&braces).len(), BRACE_EXPANSIONS_MAX);
    }

    #[test]
    fn selections_find_files_and_directories() {
        let mut tree = Tree::default();
        tree.insert("osc.a.max_dirty_mb".into(), "32".into());
        tree.insert("osc.a.stats".into(), "x\ny".into());
        tree.insert("osc.b.max_dirty_mb".into(), "16".into());
        let get = |patterns: &[&str], recursive| Selection {
            patterns: patterns.iter().map(|p| p.to_string()).collect(),
            recursive,
            values: true,
        };
        let names = |nodes: Vec<Node>| nodes.into_iter().map(|n| n.name).collect::<Vec<_>>();
        assert_eq!(
            names(tree.select(&get(&["osc.*.max_dirty_mb"], false))),
            ["osc.a.max_dirty_mb", "osc.b.max_dirty_mb"]
        );
        let dirs = tree.select(&get(&["osc.*"], false));
        assert!(dirs.iter().all(|n| n.value.is_none()), "{dirs:?}");
        assert_eq!(names(tree.select(&get(&["osc.a"], true))), ["osc.a", "osc.a.max_dirty_mb", "osc.a.stats"]);
        assert!(tree.select(&get(&["llite.*"], false)).is_empty());
        assert_eq!(closest("osc.*.max_dirty", tree.files().keys()).unwrap(), "osc.a.max_dirty_mb");
        let one = get(&["osc.b.*", "ldlm"], false);
        assert!(could_reach(&one, "osc.b") && !could_reach(&one, "osc.a") && could_reach(&one, "ldlm.namespaces.a"));
        assert!(!could_reach(&one, "llite.x"));
    }
}
