//! Mapped files and SQLite through mounts.
//!
//! A mount refuses shared mappings (`mmap` fails with `ENODEV`)
//! unless it allows them (`MountConfig::shared_mmap`), because FUSE tells
//! a mount neither of the mapping nor of a store to a mapped page, so no
//! lock can keep two mounts' mappings coherent. What a program is told
//! instead of losing data: SQLite in write-ahead-log mode on two mounts
//! fails with an error; with its rollback journal (which needs no shared
//! mapping) two mounts keep every row.

use super::{mounted, mounted_as, pattern, Mounted, PYTHON};
use lanefs_client::ClientOptions;
use lanefs_fuse::MountConfig;
use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `script` (Python) with `args`, to its end.
fn python_output(script: &str, args: &[&Path]) -> Output {
    Command::new(PYTHON).arg("-c").arg(script).args(args).output().unwrap()
}

fn said(out: &Output) -> String {
    format!("stdout: {}\nstderr: {}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A private mapping reads the file (and its stores stay its own); a
/// shared one, read-only or writable, is refused with `ENODEV`, before any
/// store could be lost.
#[test]
fn a_shared_mapping_is_refused_and_a_private_one_reads_the_file() {
    let Some(m) = mounted(2) else { return };
    let data = pattern(100_000, 3);
    fs::write(m.at(0, "mapped"), &data).unwrap();
    let script = r#"
import errno, mmap, sys
a, b = sys.argv[1], sys.argv[2]
f = open(b, "rb")
private = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
private[0] = 255
whole = open(a, "rb").read()
assert private[1:] == whole[1:] and whole[0] != 255, "a private mapping reads the file"
g = open(b, "r+b")
for name, fd, access in (("read-only", f, mmap.ACCESS_READ), ("writable", g, mmap.ACCESS_WRITE)):
    try:
        mmap.mmap(fd.fileno(), 0, access=access)
        print(name, "mapped")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
"#;
    let out = python_output(script, &[&m.at(0, "mapped"), &m.at(1, "mapped")]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "read-only ENODEV\nwritable ENODEV\n");
    assert_eq!(fs::read(m.at(0, "mapped")).unwrap(), data, "nothing was written");
}

/// Mounts that refuse shared mappings, then as many that allow them.
fn mounts_refusing_and_allowing_shared_mappings(refusing: usize, allowing: usize) -> Option<Mounted> {
    let refuse = MountConfig { threads: 2, ..MountConfig::default() };
    let allow = MountConfig { shared_mmap: true, ..refuse.clone() };
    let configs: Vec<MountConfig> =
        std::iter::repeat_n(refuse, refusing).chain(std::iter::repeat_n(allow, allowing)).collect();
    mounted_as(&configs, ClientOptions::default())
}

/// A mount that allows shared mappings serves a writable one, and its
/// stores, once synced, are what another mount reads (with `read` and
/// with a new private mapping).
#[test]
fn a_synced_shared_mapping_reaches_the_other_mount() {
    let Some(m) = mounts_refusing_and_allowing_shared_mappings(1, 1) else { return };
    fs::write(m.at(0, "mapped"), pattern(100_000, 3)).unwrap();
    let script = r#"
import mmap, sys
a, b = sys.argv[1], sys.argv[2]
g = open(b, "r+b")
w = mmap.mmap(g.fileno(), 0)
w[10:14] = b"abcd"
w[99_996:] = b"wxyz"
w.flush()
w.close()
g.close()
with open(a, "rb") as h:
    h.seek(10)
    print(h.read(4).decode())
    r = mmap.mmap(h.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    print(r[99_996:].decode())
"#;
    let out = python_output(script, &[&m.at(0, "mapped"), &m.at(1, "mapped")]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "abcd\nwxyz\n");
}

/// Inserts `ROWS` rows into table `t` of the database `argv[1]` as
/// `argv[2]`, one transaction each, taking the write lock first (`BEGIN
/// IMMEDIATE`, so that a busy database is waited for, as applications that
/// share a database between processes do); prints `done`, or the error's
/// class and message.
const WRITER: &str = r#"
import sqlite3, sys
try:
    db = sqlite3.connect(sys.argv[1], timeout=120, isolation_level=None)
    for n in range(ROWS):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?, ?)", (sys.argv[2], n))
        db.execute("COMMIT")
    print("done", flush=True)
except sqlite3.Error as e:
    print(type(e).__name__, e, flush=True)
"#;

const ROWS: usize = 1000;

/// Makes the database `db` in journal mode `mode`, with its table, before
/// any writer starts.
fn prepare(db: &Path, mode: &str) {
    let script = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
mode = db.execute("PRAGMA journal_mode=" + sys.argv[2]).fetchone()[0]
assert mode == sys.argv[2].lower(), f"journal mode {mode}"
db.execute("CREATE TABLE t (who TEXT, n INTEGER)")
db.commit()
"#;
    let out = Command::new(PYTHON).arg("-c").arg(script).arg(db).arg(mode).output().unwrap();
    assert!(out.status.success(), "{}", said(&out));
}

fn writer(db: &Path, who: &str) -> std::process::Child {
    Command::new(PYTHON)
        .arg("-c")
        .arg(WRITER.replace("ROWS", &ROWS.to_string()))
        .arg(db)
        .arg(who)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The integrity check, and each writer's rows: `(who, count, distinct)`.
fn check(db: &Path) -> String {
    let script = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("PRAGMA integrity_check").fetchone()[0])
print(db.execute("SELECT who, count(*), count(DISTINCT n) FROM t GROUP BY who ORDER BY who").fetchall())
"#;
    let out = python_output(script, &[db]);
    assert!(out.status.success(), "{}", said(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// SQLite with its rollback journal: two processes on two mounts insert
/// into one database at once (its locks are `fcntl` locks, which the MDS
/// grants across mounts); every row is there after, and the database is
/// intact.
#[test]
fn sqlite_on_two_mounts_keeps_every_row() {
    let Some(m) = mounted(2) else { return };
    prepare(&m.at(0, "rows.db"), "DELETE");
    let (a, b) = (writer(&m.at(0, "rows.db"), "a"), writer(&m.at(1, "rows.db"), "b"));
    for p in [a, b] {
        let out = p.wait_with_output().unwrap();
        assert!(out.status.success() && out.stdout == b"done\n", "{}", said(&out));
    }
    assert_eq!(check(&m.at(1, "rows.db")), format!("ok\n[('a', {ROWS}, {ROWS}), ('b', {ROWS}, {ROWS})]\n"));
}

/// SQLite in write-ahead-log mode on two mounts, which would need its
/// `-shm` mapping shared between them: each writer is told (SQLite's
/// "disk I/O error", from the refused mapping) instead of losing rows,
/// and the database stays intact (made and checked where shared mappings
/// are allowed, as a file in WAL mode needs).
#[test]
fn sqlite_in_wal_mode_on_two_mounts_fails_with_an_error() {
    let Some(m) = mounts_refusing_and_allowing_shared_mappings(2, 1) else { return };
    prepare(&m.at(2, "wal.db"), "WAL");
    let (a, b) = (writer(&m.at(0, "wal.db"), "a"), writer(&m.at(1, "wal.db"), "b"));
    for p in [a, b] {
        let out = p.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", said(&out));
        let line = String::from_utf8_lossy(&out.stdout);
        assert!(line.starts_with("OperationalError disk I/O error"), "{}", said(&out));
    }
    let out = python_output(
        "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])",
        &[&m.at(2, "wal.db")],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok\n", "{}", said(&out));
}

/// SQLite in write-ahead-log mode, two processes on one mount that allows
/// shared mappings (the processes share its pages, as on a local file
/// system): every row is there, and the database intact.
#[test]
fn sqlite_in_wal_mode_in_one_mount_allowing_shared_mappings_keeps_every_row() {
    let Some(m) = mounts_refusing_and_allowing_shared_mappings(0, 1) else { return };
    let db = m.at(0, "wal.db");
    prepare(&db, "WAL");
    let (a, b) = (writer(&db, "a"), writer(&db, "b"));
    for p in [a, b] {
        let out = p.wait_with_output().unwrap();
        assert!(out.status.success() && out.stdout == b"done\n", "{}", said(&out));
    }
    assert_eq!(check(&db), format!("ok\n[('a', {ROWS}, {ROWS}), ('b', {ROWS}, {ROWS})]\n"));
}
