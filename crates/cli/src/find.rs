//! `lanefs find`, as `lfs find`: walk directories through the MDS and
//! print the paths that match every test given (`--name`, `--type`,
//! `--size`, `--mtime`, `--atime`, `--ctime`, `--user`, `--group`,
//! `--stripe-count`, `--stripe-size`, `--ost`, `--pool`), each negated by
//! a `!` before it, below `--maxdepth` levels. As lfs (getopt_long_only),
//! a long option takes one dash or two.
//!
//! Numbers take find(1)'s signs, as lfs's do: `+N` more than N, `-N` less
//! than N, `N` exactly N; a size with a unit (`k`, `M`, `G`, `T`, base 2)
//! is rounded up to whole units before it is compared, as find(1) rounds
//! it. Layout tests (`--stripe-count`, `--stripe-size`, `--ost`, `--pool`) match
//! files; lanefs departs from lfs, which also matches directories by the
//! default layout set on them.

use crate::out;
use anyhow::{bail, Context, Result};
use lanefs_client::Client;
use lanefs_proto::{FileKind, MdsReply, MdsRequest};

/// A number test: `+N`, `-N` or `N`, in units of `unit` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NumberTest {
    sign: std::cmp::Ordering,
    value: u64,
    unit: u64,
}

/// find(1)'s `+N`, `-N` or `N` and what follows the digits: the sign
/// as the comparison it asks for, the number, the unit.
fn signed(text: &str) -> Option<(std::cmp::Ordering, u64, &str)> {
    let (sign, rest) = match text.as_bytes().first() {
        Some(b'+') => (std::cmp::Ordering::Greater, &text[1..]),
        Some(b'-') => (std::cmp::Ordering::Less, &text[1..]),
        _ => (std::cmp::Ordering::Equal, text),
    };
    let digits_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    let (digits, suffix) = rest.split_at(digits_end);
    Some((sign, digits.parse().ok()?, suffix))
}

impl NumberTest {
    /// `+N`, `-N` or `N`, with a unit letter when `sizes` (`k`, `M`, `G`,
    /// `T`, `P`, base 2; `c` or none: bytes).
    pub fn parse(text: &str, sizes: bool) -> Result<NumberTest, String> {
        let (sign, value, suffix) =
            signed(text).ok_or_else(|| format!("{text:?} is not a number: give N, +N or -N"))?;
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

/// One test of `lanefs find`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Test {
    /// The entry's name matches a shell pattern (`--name`).
    Name(String),
    Kind(FileKind),
    /// A file's size from the OSTs.
    Size(NumberTest),
    /// A file's layout (files only: lanefs departs from lfs, which also
    /// matches directories by their default layout).
    StripeCount(NumberTest),
    StripeSize(NumberTest),
    /// Files with an object on any of these OSTs.
    Osts(Vec<u32>),
    /// Files in this OST pool.
    Pool(lanefs_proto::PoolName),
    /// A time's age, as find(1)'s `-mtime`, `-atime` and `-ctime` count it.
    Time(TimeField, AgeTest),
    User(u32),
    Group(u32),
}

/// Which of an inode's times a test reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeField {
    Modified,
    Accessed,
    Changed,
}

/// An age test: `+N`, `-N` or `N` whole units (days unless a unit
/// follows: `s`, `m`, `h`, `d`, `w`, `y`), the age rounded down, as
/// find(1) and lfs count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgeTest {
    sign: std::cmp::Ordering,
    value: u64,
    unit_s: u64,
}

impl AgeTest {
    pub fn parse(text: &str) -> Result<AgeTest, String> {
        let (sign, value, suffix) =
            signed(text).ok_or_else(|| format!("{text:?} is not an age: give N, +N or -N (days)"))?;
        let unit_s = match suffix {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            "" | "d" => 86_400,
            "w" => 7 * 86_400,
            "y" => 365 * 86_400,
            other => return Err(format!("{text:?}: unknown unit {other:?}; use s, m, h, d, w or y")),
        };
        Ok(AgeTest { sign, value, unit_s })
    }

    /// Whether a time `at_ns` passes, `now_ns` being now.
    pub fn matches(&self, at_ns: u64, now_ns: u64) -> bool {
        let age_s = now_ns.saturating_sub(at_ns) / 1_000_000_000;
        (age_s / self.unit_s).cmp(&self.value) == self.sign
    }
}

/// What `lanefs find` looks for: every test must pass (a negated one
/// must fail).
#[derive(Clone, Debug, Default)]
pub struct FindTests {
    /// Each test, and whether `!` negated it.
    pub tests: Vec<(Test, bool)>,
    pub max_depth: Option<u32>,
    /// End each path with NUL rather than a newline.
    pub print0: bool,
}

/// The help of `lanefs find`'s expression.
pub const EXPRESSION_HELP: &str = "\
Paths come first, then the expression, as lfs find takes it: every test
must pass; `!` before a test negates it. Long options take one dash or two
(-name or --name).
  --name, -n PATTERN       names matching a shell pattern (*, ?, [...])
  --type, -t f|d|l|p|s|c|b file, directory, symbolic link, named pipe,
                           socket, character or block device
  --size, -s [+-]N[kMGTP]  size (find's rounding: up to whole units)
  --mtime, -M [+-]N[smhdwy] modified N days (or units) ago
  --atime, -A [+-]N        accessed N days ago
  --ctime, -C [+-]N        changed N days ago
  --user, -u, --uid, -U NAME|UID    owned by that user
  --group, -G, --gid, -g NAME|GID   in that group
  --stripe-count, -c [+-]N files with that many stripes
  --stripe-size, -S [+-]N[kMG]      files with that stripe size
  --ost, -O OST[,OST...]   files with an object on one of them
  --pool POOL              files in that OST pool
  --maxdepth, -D N         descend at most N levels below each path
  --print0, -0             end each path with a NUL (for xargs -0)";

/// The tests `lanefs find` knows, by every name lfs gives them, and
/// whether they take a value.
const OPTIONS: &[(&[&str], &str)] = &[
    (&["--name", "-n"], "name"),
    (&["--type", "-t"], "type"),
    (&["--size", "-s"], "size"),
    (&["--mtime", "-M"], "mtime"),
    (&["--atime", "-A"], "atime"),
    (&["--ctime", "-C"], "ctime"),
    (&["--user", "-u", "--uid", "-U"], "user"),
    (&["--group", "-G", "--gid", "-g"], "group"),
    (&["--stripe-count", "--stripe_count", "-c"], "stripe-count"),
    (&["--stripe-size", "--stripe_size", "-S"], "stripe-size"),
    (&["--ost", "--obd", "-O"], "ost"),
    (&["--pool"], "pool"),
    (&["--maxdepth", "-D"], "maxdepth"),
    (&["--print0", "-0"], "print0"),
];

/// `lanefs find`'s arguments, as `lfs find` reads them (getopt_long_only:
/// `-name` is `--name`): the paths, then the expression.
pub fn parse(args: &[String]) -> Result<(Vec<String>, FindTests), String> {
    let mut paths = Vec::new();
    let mut tests = FindTests::default();
    let mut negate = false;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "!" || arg == "--not" {
            if negate {
                return Err("`!` twice in a row: give it once, before the test it negates".into());
            }
            negate = true;
            continue;
        }
        if !arg.starts_with('-') || arg == "-" {
            if !tests.tests.is_empty() || negate {
                return Err(format!(
                    "{arg:?} after the expression: give the paths first (lanefs find PATH... [EXPRESSION])"
                ));
            }
            paths.push(arg.clone());
            continue;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.to_string())),
            _ => (arg.clone(), None),
        };
        // getopt_long_only: a single dash before a long name.
        let long = if !flag.starts_with("--") && flag.len() > 2 { format!("-{flag}") } else { flag.clone() };
        let Some((_, option)) = OPTIONS.iter().find(|(names, _)| names.contains(&long.as_str())) else {
            return Err(format!("unknown test {arg:?}; lanefs find knows:\n{EXPRESSION_HELP}"));
        };
        if *option == "print0" {
            if negate {
                return Err("`!` negates a test, not --print0".into());
            }
            tests.print0 = true;
            continue;
        }
        let value = match inline {
            Some(value) => value,
            None => {
                let Some(value) = args.get(i) else { return Err(format!("{arg} needs a value")) };
                i += 1;
                value.clone()
            }
        };
        let bad = |e: String| format!("{arg} {value}: {e}");
        let test = match *option {
            "maxdepth" => {
                if negate {
                    return Err("`!` negates a test, not --maxdepth".into());
                }
                tests.max_depth = Some(value.parse().map_err(|_| bad("give a number of levels".into()))?);
                continue;
            }
            "name" => Test::Name(value.clone()),
            "type" => Test::Kind(parse_kind(&value).map_err(bad)?),
            "size" => Test::Size(NumberTest::parse(&value, true).map_err(bad)?),
            "stripe-count" => Test::StripeCount(NumberTest::parse(&value, false).map_err(bad)?),
            "stripe-size" => Test::StripeSize(NumberTest::parse(&value, true).map_err(bad)?),
            "ost" => Test::Osts(parse_osts(&value).map_err(bad)?),
            "pool" => Test::Pool(lanefs_proto::PoolName::parse(&value).map_err(|e| bad(e.to_string()))?),
            "mtime" => Test::Time(TimeField::Modified, AgeTest::parse(&value).map_err(bad)?),
            "atime" => Test::Time(TimeField::Accessed, AgeTest::parse(&value).map_err(bad)?),
            "ctime" => Test::Time(TimeField::Changed, AgeTest::parse(&value).map_err(bad)?),
            "user" => Test::User(user_id(&value).map_err(bad)?),
            "group" => Test::Group(group_id(&value).map_err(bad)?),
            other => unreachable!("option {other} is listed"),
        };
        tests.tests.push((test, negate));
        negate = false;
    }
    if negate {
        return Err("`!` at the end: put it before the test it negates".into());
    }
    if paths.is_empty() {
        return Err("no path: give where to start (lanefs find PATH... [EXPRESSION])".into());
    }
    Ok((paths, tests))
}

/// A user by name (the password database) or number.
fn user_id(text: &str) -> Result<u32, String> {
    // SAFETY: a valid C string; getpwnam's entry is read at once, before
    // any other call that could reuse its buffer.
    id_of(text, "user name or a uid", |name| unsafe { libc::getpwnam(name).as_ref().map(|e| e.pw_uid) })
}

/// A group by name (the group database) or number.
fn group_id(text: &str) -> Result<u32, String> {
    // SAFETY: as for getpwnam above.
    id_of(text, "group name or a gid", |name| unsafe { libc::getgrnam(name).as_ref().map(|e| e.gr_gid) })
}

/// `text` as a number, or the id `lookup` finds for it as a name; `what`
/// names what to give instead.
fn id_of(text: &str, what: &str, lookup: impl Fn(*const libc::c_char) -> Option<u32>) -> Result<u32, String> {
    if let Ok(id) = text.parse() {
        return Ok(id);
    }
    let name = std::ffi::CString::new(text).map_err(|_| format!("{text:?}: give a {what}"))?;
    lookup(name.as_ptr())
        .ok_or_else(|| format!("no {} {text:?}: give a {what}", what.split(' ').next().unwrap_or(what)))
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
/// only for what the tests need, once each.
fn matches(cl: &Client, inner: &str, name: &str, kind: FileKind, tests: &FindTests) -> Result<bool> {
    let mut attr: Option<lanefs_proto::Attr> = None;
    let mut size: Option<u64> = None;
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    for (test, negated) in &tests.tests {
        let mut attr = |cl: &Client| -> Result<lanefs_proto::Attr> {
            if attr.is_none() {
                attr = Some(match cl.mds(MdsRequest::Stat { path: inner.into() })? {
                    MdsReply::Attr(attr) => attr,
                    other => bail!("unexpected MDS answer {other:?}"),
                });
            }
            Ok(attr.clone().expect("just fetched"))
        };
        let passed = match test {
            Test::Name(pattern) => name_matches(pattern, name),
            Test::Kind(wanted) => *wanted == kind,
            Test::User(uid) => attr(cl)?.uid == *uid,
            Test::Group(gid) => attr(cl)?.gid == *gid,
            Test::Time(field, age) => {
                let a = attr(cl)?;
                let at = match field {
                    TimeField::Modified => a.mtime_ns,
                    TimeField::Accessed => a.atime_ns,
                    TimeField::Changed => a.ctime_ns,
                };
                age.matches(at, now_ns)
            }
            // Layouts and sizes are files' only.
            _ if kind != FileKind::File => false,
            Test::StripeCount(t) => attr(cl)?.layout.is_some_and(|l| t.matches(u64::from(l.stripe_count()))),
            Test::StripeSize(t) => attr(cl)?.layout.is_some_and(|l| t.matches(l.stripe_size())),
            Test::Osts(osts) => attr(cl)?.layout.is_some_and(|l| l.objects().iter().any(|o| osts.contains(&o.ost.0))),
            Test::Pool(wanted) => {
                let MdsReply::Stripe(info) = cl.mds(MdsRequest::GetStripe { path: inner.into() })? else {
                    bail!("unexpected MDS answer for {inner}")
                };
                info.pool.as_ref() == Some(wanted)
            }
            Test::Size(t) => {
                if size.is_none() {
                    // The size is the OSTs' (a glimpse of the file's objects).
                    let attr = attr(cl)?;
                    let Some(layout) = attr.layout.clone() else { return Ok(*negated) };
                    let f = cl.open_file(inner, lanefs_proto::FileInfo { fid: attr.fid, layout })?;
                    let got = cl.size(&f);
                    cl.close(f)?;
                    size = Some(got?);
                }
                t.matches(size.expect("just asked"))
            }
        };
        if passed == *negated {
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

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_expression_reads_as_lfs_find_reads_it() {
        let (paths, tests) = parse(&args("/mnt/a /mnt/b -type f ! -name *.o --size +1M -mtime -2 -print0")).unwrap();
        assert_eq!(paths, ["/mnt/a", "/mnt/b"]);
        assert!(tests.print0);
        assert_eq!(tests.tests.len(), 4);
        assert_eq!(tests.tests[0], (Test::Kind(FileKind::File), false));
        assert_eq!(tests.tests[1], (Test::Name("*.o".into()), true));
        assert!(matches!(tests.tests[3], (Test::Time(TimeField::Modified, _), false)));
        let (_, tests) = parse(&args("/ --user=0 -G 0 -D 1 --not --type d")).unwrap();
        assert_eq!(tests.tests, [(Test::User(0), false), (Test::Group(0), false), (Test::Kind(FileKind::Dir), true)]);
        assert_eq!(tests.max_depth, Some(1));
        assert_eq!(parse(&args("/ -user root")).unwrap().1.tests, [(Test::User(0), false)]);
        for (line, said) in [
            ("/ -type f /b", "give the paths first"),
            ("/ !", "`!` at the end"),
            ("/ ! ! -type f", "`!` twice"),
            ("/ -frobnicate 1", "unknown test \"-frobnicate\""),
            ("/ -name", "-name needs a value"),
            ("-type f", "no path"),
            ("/ -user nosuchuserhere", "no user"),
            ("/ ! -maxdepth 1", "not --maxdepth"),
            ("/ -mtime 2x", "unknown unit"),
        ] {
            let error = parse(&args(line)).unwrap_err();
            assert!(error.contains(said), "{line}: {error}");
        }
    }

    #[test]
    fn ages_round_down_as_find_rounds_them() {
        let day = 86_400 * 1_000_000_000u64;
        let now = 100 * day;
        let t = |text: &str| AgeTest::parse(text).unwrap();
        assert!(t("0").matches(now - day / 2, now), "half a day is 0 days");
        assert!(t("1").matches(now - day - 1, now) && !t("1").matches(now - 2 * day, now));
        assert!(t("+1").matches(now - 2 * day, now) && !t("+1").matches(now - day - 5, now));
        assert!(t("-1").matches(now - day / 2, now) && !t("-1").matches(now - day, now));
        assert!(t("-2h").matches(now - 3_600 * 1_000_000_000, now));
        assert!(t("+0").matches(now - day, now) && !t("+0").matches(now, now));
    }

    #[test]
    fn osts_are_named_as_lfs_names_them() {
        assert_eq!(parse_osts("1,OST000a,lanefs-OST0002_UUID,0x3").unwrap(), vec![1, 10, 2, 3]);
        assert!(parse_osts("x").unwrap_err().contains("OST0001"));
    }
}
