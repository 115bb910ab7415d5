//! `lanefs find`, as `lfs find`: walk directories through the MDS and
//! print the paths that match every test given (`--name`, `--type`,
//! `--size`, `--stripe-count`, `--stripe-size`, `--ost`, `--pool`,
//! `--maxdepth`).
//!
//! Numbers take find(1)'s signs, as lfs's do: `+N` more than N, `-N` less
//! than N, `N` exactly N; a size with a unit (`k`, `M`, `G`, `T`, base 2)
//! is rounded up to whole units before it is compared, as find(1) rounds
//! it. Layout tests (`--stripe-count`, `--stripe-size`, `--ost`, `--pool`) match
//! files; lanefs departs from lfs, which also matches directories by the
//! default layout set on them.

use crate::out;
use anyhow::{bail, Context, Result};
use lanefs_mds::{FileKind, MdsReply, MdsRequest};
use lanefs_net::client::Client;

/// A number test: `+N`, `-N` or `N`, in units of `unit` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberTest {
    sign: std::cmp::Ordering,
    value: u64,
    unit: u64,
}

impl NumberTest {
    /// `+N`, `-N` or `N`, with a unit letter when `sizes` (`k`, `M`, `G`,
    /// `T`, `P`, base 2; `c` or none: bytes).
    pub fn parse(text: &str, sizes: bool) -> Result<NumberTest, String> {
        let (sign, rest) = match text.as_bytes().first() {
            Some(b'+') => (std::cmp::Ordering::Greater, &text[1..]),
            Some(b'-') => (std::cmp::Ordering::Less, &text[1..]),
            _ => (std::cmp::Ordering::Equal, text),
        };
        let digits_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let (digits, suffix) = rest.split_at(digits_end);
        let value: u64 = digits.parse().map_err(|_| format!("{text:?} is not a number: give N, +N or -N"))?;
        let unit = match (sizes, suffix.to_ascii_lowercase().as_str()) {
            (_, "") => 1,
            (true, "c") => 1,
            (true, "k") => 1 << 10,
            (true, "m") => 1 << 20,
            (true, "g") => 1 << 30,
            (true, "t") => 1 << 40,
            (true, "p") => 1 << 50,
            _ => return Err(format!("{text:?}: unknown unit {suffix:?}; use k, M, G, T or P")),
        };
        Ok(NumberTest { sign, value, unit })
    }

    pub fn matches(&self, actual: u64) -> bool {
        // find(1): the value in whole units, rounded up.
        actual.div_ceil(self.unit).cmp(&self.value) == self.sign
    }
}

/// What `lanefs find` looks for.
#[derive(Clone, Debug, Default)]
pub struct FindTests {
    pub name: Option<String>,
    pub kind: Option<FileKind>,
    pub size: Option<NumberTest>,
    pub stripe_count: Option<NumberTest>,
    pub stripe_size: Option<NumberTest>,
    /// Files with an object on any of these OSTs.
    pub osts: Vec<u32>,
    /// Files in this OST pool.
    pub pool: Option<lanefs_mds::PoolName>,
    pub max_depth: Option<u32>,
    /// End each path with NUL rather than a newline.
    pub print0: bool,
}

/// `find -type`'s letters: `f`, `d`, `l`, `p`, `s`, `c` or `b`.
pub fn parse_kind(text: &str) -> Result<FileKind, String> {
    match text {
        "f" => Ok(FileKind::File),
        "d" => Ok(FileKind::Dir),
        "l" => Ok(FileKind::Symlink),
        "p" => Ok(FileKind::Fifo),
        "s" => Ok(FileKind::Socket),
        "c" => Ok(FileKind::CharDevice),
        "b" => Ok(FileKind::BlockDevice),
        other => Err(format!(
            "type {other:?}: give f (file), d (directory), l (symbolic link), p (named pipe), s (socket), \
             c (character device) or b (block device)"
        )),
    }
}

/// OST indexes as lfs takes them: `1`, `0x1`, `lanefs-OST0001_UUID` or
/// `OST0001`, separated by commas.
pub fn parse_osts(text: &str) -> Result<Vec<u32>, String> {
    text.split(',')
        .map(|one| {
            let bare = one.trim().trim_end_matches("_UUID");
            let bare = bare.strip_prefix("lanefs-").unwrap_or(bare);
            let index = match bare.strip_prefix("OST") {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => match bare.strip_prefix("0x") {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => bare.parse().ok(),
                },
            };
            index.ok_or_else(|| format!("{one:?} is not an OST: give an index (1), OST0001 or lanefs-OST0001_UUID"))
        })
        .collect()
}

/// Shell-style matching of a name: `*`, `?` and `[...]` (with `!` or `^`
/// negating and `a-z` ranges), as fnmatch(3) without flags.
pub fn name_matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some('[') => {
                let Some(close) = p.iter().skip(2).position(|&c| c == ']').map(|i| i + 2) else {
                    return n.first() == Some(&'[') && go(&p[1..], &n[1..]);
                };
                let Some(&c) = n.first() else { return false };
                let set = &p[1..close];
                let (negated, set) = match set.first() {
                    Some('!') | Some('^') => (true, &set[1..]),
                    _ => (false, set),
                };
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= (set[i]..=set[i + 2]).contains(&c);
                        i += 3;
                    } else {
                        hit |= set[i] == c;
                        i += 1;
                    }
                }
                hit != negated && go(&p[close + 1..], &n[1..])
            }
            Some(&c) => n.first() == Some(&c) && go(&p[1..], &n[1..]),
        }
    }
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    go(&p, &n)
}

/// Walk `inner` (a path within lanefs), printing matches as `shown` (the
/// path as the user gave it) joined with what lies below.
pub fn find(cl: &Client, inner: &str, shown: &str, tests: &FindTests) -> Result<()> {
    let attr = match cl.mds(MdsRequest::Stat { path: inner.into() })? {
        MdsReply::Attr(attr) => attr,
        other => bail!("unexpected MDS answer {other:?}"),
    };
    let name = inner.rsplit('/').find(|part| !part.is_empty()).unwrap_or("/");
    visit(cl, inner, shown, name, attr.kind, 0, tests)
}

fn visit(
    cl: &Client,
    inner: &str,
    shown: &str,
    name: &str,
    kind: FileKind,
    depth: u32,
    tests: &FindTests,
) -> Result<()> {
    if matches(cl, inner, name, kind, tests)? {
        out::stdout_write(&format!("{shown}{}", if tests.print0 { '\0' } else { '\n' }))?;
    }
    if kind != FileKind::Dir || tests.max_depth.is_some_and(|max| depth >= max) {
        return Ok(());
    }
    for page in cl.readdir_pages(inner) {
        for entry in page.with_context(|| format!("listing {inner}"))? {
            let join = |dir: &str| {
                if dir.ends_with('/') {
                    format!("{dir}{}", entry.name)
                } else {
                    format!("{dir}/{}", entry.name)
                }
            };
            visit(cl, &join(inner), &join(shown), &entry.name, entry.kind, depth + 1, tests)?;
        }
    }
    Ok(())
}

/// Whether the entry passes every test; the MDS and the OSTs are asked
/// only for what the tests need.
fn matches(cl: &Client, inner: &str, name: &str, kind: FileKind, tests: &FindTests) -> Result<bool> {
    if tests.name.as_deref().is_some_and(|pattern| !name_matches(pattern, name)) {
        return Ok(false);
    }
    if tests.kind.is_some_and(|wanted| wanted != kind) {
        return Ok(false);
    }
    let layout_tests =
        tests.stripe_count.is_some() || tests.stripe_size.is_some() || !tests.osts.is_empty() || tests.pool.is_some();
    if !layout_tests && tests.size.is_none() {
        return Ok(true);
    }
    if kind != FileKind::File {
        return Ok(false);
    }
    let attr = match cl.mds(MdsRequest::Stat { path: inner.into() })? {
        MdsReply::Attr(attr) => attr,
        other => bail!("unexpected MDS answer {other:?}"),
    };
    let Some(layout) = attr.layout else { return Ok(false) };
    if tests.stripe_count.is_some_and(|t| !t.matches(u64::from(layout.stripe_count()))) {
        return Ok(false);
    }
    if tests.stripe_size.is_some_and(|t| !t.matches(layout.stripe_size())) {
        return Ok(false);
    }
    if !tests.osts.is_empty() && !layout.objects().iter().any(|o| tests.osts.contains(&o.ost.0)) {
        return Ok(false);
    }
    if let Some(wanted) = &tests.pool {
        let MdsReply::Stripe(info) = cl.mds(MdsRequest::GetStripe { path: inner.into() })? else {
            bail!("unexpected MDS answer for {inner}")
        };
        if info.pool.as_ref() != Some(wanted) {
            return Ok(false);
        }
    }
    if let Some(size_test) = tests.size {
        // The size is the OSTs' (a glimpse of the file's objects).
        let f = cl.open_layout(inner, layout)?;
        let size = cl.size(&f);
        cl.close(f)?;
        if !size_test.matches(size?) {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_as_find_compares_them() {
        let t = |text: &str| NumberTest::parse(text, true).unwrap();
        assert!(t("+1M").matches((1 << 20) + 1) && !t("+1M").matches(1 << 20));
        assert!(t("-1M").matches(0) && !t("-1M").matches(1), "1 byte rounds up to 1 MiB");
        assert!(t("1M").matches(1) && t("1M").matches(1 << 20) && !t("1M").matches((1 << 20) + 1));
        assert!(t("4096").matches(4096) && !t("4096").matches(4095));
        assert!(NumberTest::parse("2x", true).is_err() && NumberTest::parse("2k", false).is_err());
        assert!(NumberTest::parse("+", true).is_err());
    }

    #[test]
    fn names_match_as_fnmatch() {
        assert!(name_matches("*.dat", "a.dat") && !name_matches("*.dat", "a.dat1"));
        assert!(name_matches("f?[0-9]", "fx7") && !name_matches("f?[0-9]", "fxy"));
        assert!(name_matches("[!a]*", "bcd") && !name_matches("[!a]*", "abc"));
        assert!(name_matches("[", "[") && name_matches("*", ""));
    }

    #[test]
    fn osts_are_named_as_lfs_names_them() {
        assert_eq!(parse_osts("1,OST000a,lanefs-OST0002_UUID,0x3").unwrap(), vec![1, 10, 2, 3]);
        assert!(parse_osts("x").unwrap_err().contains("OST0001"));
    }
}
