//! The Lustre-style commands against a running `lanefs up`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Up {
    child: Child,
    mds: String,
    /// The client key `lanefs up --tcp` made (its `export LANEFS_KEY=`).
    key: String,
    dir: tempfile::TempDir,
    /// Kept open: the server's stdout stays readable for as long as it runs.
    _stdout: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn up() -> Up {
    up_in(tempfile::tempdir().unwrap())
}

/// `lanefs up` with its data in `dir`.
fn up_in(dir: tempfile::TempDir) -> Up {
    up_with_osts(dir, 2)
}

/// `lanefs up` of `osts` OSTs with its data in `dir`.
fn up_with_osts(dir: tempfile::TempDir, osts: u32) -> Up {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["up", "--osts", &osts.to_string(), "--tcp", "--data"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut mds, mut key) = (None, None);
    loop {
        let line = lines.next().expect("lanefs up prints its address and key").unwrap();
        if let Some(a) = line.strip_prefix("export LANEFS_MDS=") {
            mds = Some(a.to_string());
        }
        if let Some(k) = line.strip_prefix("export LANEFS_KEY=") {
            key = Some(k.to_string());
        }
        if line.starts_with("(interrupt") {
            break;
        }
    }
    let mds = mds.expect("lanefs up prints export LANEFS_MDS=");
    Up { child, mds, key: key.expect("lanefs up --tcp prints export LANEFS_KEY="), dir, _stdout: lines }
}

fn lanefs(up: &Up, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(args)
        .env("LANEFS_MDS", &up.mds)
        .env("LANEFS_KEY", &up.key)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(up: &Up, args: &[&str]) -> String {
    let (success, out, err) = lanefs(up, args);
    assert!(success, "lanefs {args:?} failed: {err}");
    out
}

fn fails(up: &Up, args: &[&str], reason: &str) {
    let (success, _, err) = lanefs(up, args);
    assert!(!success, "lanefs {args:?} should fail");
    assert!(err.contains(reason), "lanefs {args:?}: {err:?} lacks {reason:?}");
}

#[test]
fn lfs_style_commands_work_against_a_running_file_system() {
    let up = up();
    ok(&up, &["mkdir", "/d"]);
    ok(&up, &["setstripe", "-c", "2", "-S", "2m", "/d"]);
    assert!(ok(&up, &["getstripe", "/d"]).contains("stripe_count:  2 stripe_size:   2097152"));
    ok(&up, &["setstripe", "-c", "1", "-i", "1", "/d/one"]);
    let layout = ok(&up, &["getstripe", "/d/one"]);
    // `lfs getstripe`'s own layout of a file (liblustreapi's
    // `lov_dump_user_lmm_v1v3`): the header lines, then the objects as
    // "\t%6u\t%14llu\t%#13llx\t%14llu" and an empty line.
    let object = objects_of(&up, "/d/one")[0].1;
    let expected = format!(
        "/d/one\nlmm_stripe_count:  1\nlmm_stripe_size:   2097152\nlmm_pattern:       raid0\nlmm_layout_gen:    0\n\
         lmm_stripe_offset: 1\n\tobdidx\t\t objid\t\t objid\t\t group\n\t     1\t{object:14}\t{object:#13x}\t             0\n\n"
    );
    assert_eq!(layout, expected);
    // One field alone is printed bare, as scripts read `lfs getstripe -c`,
    // without the path (lfs's depth 0) but with lov_dump_user_lmm_v1v3's
    // closing empty line; several paths, one after the other.
    assert_eq!(ok(&up, &["getstripe", "-c", "/d/one", "/d"]), "1\n\n2\n\n");
    assert_eq!(ok(&up, &["getstripe", "--stripe-size", "/d/one"]), "2097152\n\n");
    // lfs df: the MDT's line, a line per OST, then the summary (lfs.c's
    // showdf format); the summary's space is the OSTs'.
    let df = ok(&up, &["df"]);
    let lines: Vec<&str> = df.lines().collect();
    assert_eq!(lines[0], "UUID                   1K-blocks        Used   Available Use% Mounted on", "{df}");
    assert!(lines[1].starts_with("lanefs-MDT0000_UUID ") && lines[1].ends_with(" lanefs[MDT:0]"), "{df}");
    assert!(lines[2].starts_with("lanefs-OST0000_UUID ") && lines[2].ends_with(" lanefs[OST:0]"), "{df}");
    assert!(df.contains("\nfilesystem_summary: ") && df.ends_with(" lanefs\n\n"), "{df}");
    let ost_total = |line: &str| line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
    // Both OSTs of `lanefs up` share one disk, counted once.
    assert_eq!(ost_total(lines[5]), ost_total(lines[2]), "{df}");
    let inodes = ok(&up, &["df", "-i"]);
    assert!(inodes.starts_with("UUID                      Inodes       IUsed       IFree IUse% Mounted on\n"));
    assert!(inodes.lines().nth(1).unwrap().ends_with(" lanefs[MDT:0]"), "{inodes}");
    assert_eq!(ok(&up, &["getstripe", "-c", "-i", "/d/one"]), "lmm_stripe_count:  1\nlmm_stripe_offset: 1\n\n");
    // A directory: its default, then each entry's layout (-d: the default
    // alone, without the path; -r: everything below; -q: files' objects).
    ok(&up, &["mkdir", "/d/sub"]);
    ok(&up, &["setstripe", "-c", "1", "/d/sub/deep"]);
    let listing = ok(&up, &["getstripe", "/d"]);
    assert!(
        listing.starts_with("/d\nstripe_count:  2 stripe_size:   2097152 pattern:       raid0 stripe_offset: -1\n\n")
    );
    assert!(listing.contains("\n/d/one\nlmm_stripe_count:  1\n") && listing.contains("\n/d/sub\nstripe_count:  2"));
    assert!(!listing.contains("/d/sub/deep"), "one level without -r: {listing}");
    assert!(ok(&up, &["getstripe", "-r", "/d"]).contains("\n/d/sub/deep\nlmm_stripe_count:  1\n"));
    assert_eq!(
        ok(&up, &["getstripe", "-d", "/d"]),
        "stripe_count:  2 stripe_size:   2097152 pattern:       raid0 stripe_offset: -1\n\n"
    );
    let quiet = ok(&up, &["getstripe", "-q", "/d"]);
    // (A directory prints only lov_dump_user_lmm_v1v3's empty line.)
    assert!(quiet.starts_with("\n/d/one\n\tobdidx\t\t objid") && !quiet.contains("stripe_count"), "{quiet}");
    let yaml = ok(&up, &["getstripe", "-y", "/d/one"]);
    assert!(
        yaml.starts_with("lmm_stripe_count:  1\n") && yaml.contains("lmm_objects:\n      - l_ost_idx: 1\n"),
        "{yaml}"
    );
    ok(&up, &["rm", "/d/sub/deep"]);
    ok(&up, &["rm", "/d/sub"]);
    let ior =
        ok(&up, &["ior", "-a", "LANEFS", "-w", "-r", "-W", "-b", "1m", "-t", "256k", "-N", "2", "-k", "-o", "/d/ior"]);
    assert!(ior.contains("lanefs.lock_enqueues"), "{ior}");
    assert!(ior.contains("\nFS                  : ") && !ior.contains("statfs"), "capacity from the OSTs: {ior}");
    let layout = ok(&up, &["getstripe", "/d/ior"]);
    assert!(
        layout.contains("lmm_stripe_count:  2") && layout.contains("lmm_stripe_size:   2097152"),
        "inherited: {layout}"
    );
    let listing = ok(&up, &["ls", "-l", "/d"]);
    assert!(listing.contains("2097152") && listing.contains("ior") && listing.contains("one"), "{listing}");
    assert!(ok(&up, &["stat", "/d/ior"]).contains("Size: 2097152"));
    // As lfs: the end is exclusive, and a successful advice prints nothing.
    let advice =
        ok(&up, &["ladvise", "-a", "lockahead", "-m", "WRITE", "-s", "0", "-e", "1m", "-b", "/d/one", "/d/ior"]);
    assert_eq!(advice, "");
    // Cache advice goes to the OSTs that hold the range, and prints nothing either.
    assert_eq!(ok(&up, &["ladvise", "-a", "willread", "-s", "0", "-e", "1m", "/d/ior"]), "");
    assert_eq!(ok(&up, &["ladvise", "-a", "dontneed", "-b", "/d/ior", "/d/one"]), "");
    assert_eq!(ok(&up, &["ladvise", "-a", "willread", "-s", "1m", "-l", "2m", "/d/ior"]), "");
    // lfs find: /d/one has 1 stripe on OST 1 and no data, /d/ior 2 stripes and 2 MiB.
    assert_eq!(ok(&up, &["find", "/d", "--type", "f"]), "/d/ior\n/d/one\n");
    assert_eq!(ok(&up, &["find", "/", "-t", "d"]), "/\n/d\n");
    assert_eq!(ok(&up, &["find", "/d", "--stripe-count", "+1"]), "/d/ior\n");
    assert_eq!(ok(&up, &["find", "/d", "--size", "+1M"]), "/d/ior\n");
    assert_eq!(ok(&up, &["find", "/d", "--size", "-1k", "--type", "f"]), "/d/one\n");
    assert_eq!(ok(&up, &["find", "/d", "--name", "o*"]), "/d/one\n");
    assert_eq!(ok(&up, &["find", "/d", "--stripe-size", "2M", "--ost", "lanefs-OST0000_UUID"]), "/d/ior\n");
    assert_eq!(ok(&up, &["find", "/", "--maxdepth", "0"]), "/\n");
    assert_eq!(ok(&up, &["find", "/d", "-n", "ior", "--print0"]), "/d/ior\0");
    fails(&up, &["find", "/d", "--size", "+1x"], "unknown unit");
    // lfs find's own forms: one dash, `!`, times and owners.
    assert_eq!(ok(&up, &["find", "/d", "-type", "f", "!", "-name", "o*"]), "/d/ior\n");
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid().to_string(), libc::getgid().to_string()) };
    assert_eq!(ok(&up, &["find", "/d", "-mtime", "-1", "-type", "f", "-user", &uid]), "/d/ior\n/d/one\n");
    assert_eq!(ok(&up, &["find", "/d", "-mtime", "+0", "-type", "f"]), "", "nothing is a day old");
    assert_eq!(ok(&up, &["find", "/d", &format!("--group={gid}"), "!", "--type", "d"]), "/d/ior\n/d/one\n");
    fails(&up, &["find", "/d", "-type", "f", "/other"], "give the paths first");
    // A composite layout (PFL), shown as lfs shows one.
    ok(&up, &["setstripe", "-E", "64M", "-c", "1", "-S", "1m", "-E", "-1", "-c", "2", "/pfl"]);
    let pfl = ok(&up, &["getstripe", "/pfl"]);
    assert!(pfl.starts_with("/pfl\n  lcm_layout_gen:    0\n  lcm_mirror_count:  1\n  lcm_entry_count:   2\n"), "{pfl}");
    assert!(
        pfl.contains("    lcme_extent.e_start: 67108864\n    lcme_extent.e_end:   EOF\n      lmm_stripe_count:  2\n")
    );
    fails(&up, &["setstripe", "-E", "64M", "-c", "1", "/pfl2"], "the last component must reach the end of the file");
    // ... and as a directory's default, which a new file below takes.
    ok(&up, &["mkdir", "/pfldir"]);
    ok(&up, &["setstripe", "-E", "1m", "-c", "1", "-E", "-1", "-c", "2", "/pfldir"]);
    let template = ok(&up, &["getstripe", "-d", "/pfldir"]);
    assert!(
        template.contains("    lcme_id:             N/A\n") && template.contains("stripe_count:  2       "),
        "{template}"
    );
    ok(&up, &["setstripe", "-c", "1", "/pfldir/sub"]);
    ok(&up, &["setstripe", "/pfldir/file"]);
    let file = ok(&up, &["getstripe", "/pfldir/file"]);
    assert!(file.contains("  lcm_entry_count:   2\n"), "a new file takes the composite default: {file}");
    let below = ok(&up, &["getstripe", "/pfldir/sub"]);
    assert!(below.starts_with("/pfldir/sub\nlmm_stripe_count:  1\n"), "its own striping wins: {below}");
    // Lustre's layouts lanefs lacks are refused by name, not misread.
    fails(&up, &["setstripe", "-L", "mdt", "/dom"], "setstripe -L: data on the MDT");
    fails(&up, &["setstripe", "-c", "1", "-c", "2", "/twice"], "give one of -c and -C, and -S, -i and -p, once each");
    fails(&up, &["setstripe", "-c", "1", "-C", "2", "/both"], "give one of -c and -C");
    // Overstriping: four stripes on the two OSTs; an OST list, in its order.
    ok(&up, &["setstripe", "-C", "4", "/over"]);
    let over = ok(&up, &["getstripe", "/over"]);
    assert!(
        over.contains("lmm_stripe_count:  4\n") && over.contains("lmm_pattern:       raid0,overstriped\n"),
        "{over}"
    );
    let mut on: Vec<u32> = objects_of(&up, "/over").iter().map(|(ost, _)| *ost).collect();
    on.sort_unstable();
    assert_eq!(on, [0, 0, 1, 1]);
    ok(&up, &["setstripe", "-o", "1,0", "/list"]);
    assert_eq!(objects_of(&up, "/list").iter().map(|(ost, _)| *ost).collect::<Vec<_>>(), [1, 0]);
    fails(&up, &["setstripe", "-o", "0,x", "/bad"], "\"x\" is not an OST index");
    fails(&up, &["setstripe", "-o", "0", "/d"], "an OST list (-o) is kept for files only");
    fails(&up, &["find", "/d", "--type", "x"], "give f (file), d (directory)");
    assert_eq!(ok(&up, &["find", "/d", "--type", "p"]), "", "no named pipes here");
    // lfs osts and mdts.
    assert_eq!(ok(&up, &["osts"]), "OBDS:\n0: lanefs-OST0000_UUID ACTIVE\n1: lanefs-OST0001_UUID ACTIVE\n");
    assert_eq!(ok(&up, &["mdts"]), "MDTS:\n0: lanefs-MDT0000_UUID ACTIVE\n");
    // The OSTs' lock namespaces' stats files, in Lustre's shape.
    let params = ok(&up, &["lctl", "get_param", "ldlm.namespaces.filter-*.stats"]);
    // /d/one lives on OST 1, whose file has lines after its snapshot time;
    // a file of one line is printed on the name's line, as lctl prints it.
    assert!(params.contains("ldlm.namespaces.filter-lanefs-OST0001_UUID.stats=\nsnapshot_time "), "{params}");
    assert!(params.contains("\nldlm_enqueue                        "), "{params}");
    ok(&up, &["rm", "/d/one"]);
    assert!(!ok(&up, &["ls", "/d"]).contains("one"));

    fails(&up, &["setstripe", "-S", "100000", "/d/bad"], "65536");
    fails(&up, &["setstripe", "-c", "3", "/d/bad"], "3");
    fails(&up, &["getstripe", "/missing"], "/missing");
    fails(
        &up,
        &["ladvise", "-a", "lockahead", "-m", "WRITE", "-s", "10", "-e", "5", "/d/ior"],
        "range [10, 5] is invalid",
    );
    fails(&up, &["ladvise", "-a", "lockahead", "-s", "0", "-e", "1m", "/d/ior"], "mode is required with lockahead");
    fails(&up, &["ladvise", "-a", "locknoexpand", "/d/ior"], "per file descriptor advice");
    fails(&up, &["ladvise", "-a", "readahead", "/d/ior"], "invalid advice type \"readahead\"; valid types: willread");
    fails(&up, &["ladvise", "-a", "willread", "-s", "1m", "-e", "1m", "/d/ior"], "range [1048576, 1048576] is invalid");
    fails(&up, &["ladvise", "-a", "dontneed", "-s", "0", "-e", "4k", "-l", "8k", "/d/ior"], "conflicting arguments");
    fails(&up, &["ladvise", "-a", "willread", "-m", "READ", "/d/ior"], "mode is only valid with lockahead");
    let (success, _, err) = lanefs(&up, &["ladvise", "-a", "willread", "/d/ior", "/d/nope"]);
    assert!(!success && err.contains("cannot give advice 'willread' to file '/d/nope'"), "{err}");
    assert!(err.contains("1 of 2 files were not advised"), "{err}");
    // One file that cannot be advised fails the command, naming it; the others are advised.
    let (success, _, err) = lanefs(&up, &["ladvise", "-a", "lockahead", "-m", "READ", "-l", "4k", "/d/nope", "/d/ior"]);
    assert!(!success && err.contains("cannot give advice 'lockahead' to file '/d/nope'"), "{err}");
    assert!(err.contains("1 of 2 files were not advised"), "{err}");
    fails(&up, &["ior", "-a", "LANEFS", "-w", "-b", "1m", "-t", "3m", "-o", "/d/x"], "-t");
    fails(&up, &["ior", "-a", "LANEFS", "-w", "--lanefs.lock-mode=fast", "-o", "/d/x"], "lock mode");
}

#[test]
fn a_bad_server_setting_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fs");
    let data = data.to_str().unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).output().unwrap();
    let out = run(&["up", "--osts", "1", "--data", data, "--sync-lock-cancel", "sometimes"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--sync-lock-cancel sometimes") && err.contains("never, blocking, always"), "{err}");
    let out = run(&["up", "--osts", "1", "--data", data, "--callback-timeout", "0"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--callback-timeout 0"));
    let out = run(&["oss", "--mds", "unix:/nonexistent", "--data", data, "--ost", "0", "--sync-lock-cancel", "x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sync-lock-cancel x"));
    let out = run(&["up", "--osts", "1", "--data", data, "--root-squash", "nobody"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--root-squash nobody: give UID:GID"));
    let out = run(&["mds", "--osts", "1", "--data", data, "--root-squash", "1:x"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--root-squash 1:x"));
    let out = run(&["up", "--osts", "1", "--data", data, "--key-root-squash", "nobody"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--key-root-squash nobody: give UID:GID") && err.contains("or off"), "{err}");
    let out = run(&["mds", "--osts", "1", "--data", data, "--key-root-squash", "0"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--key-root-squash 0: give UID:GID"));
    assert!(!dir.path().join("fs").exists(), "nothing was started");
}

#[test]
fn commands_without_a_file_system_say_how_to_name_one() {
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs")).args(["ls", "/"]).env_remove("LANEFS_MDS").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("LANEFS_MDS"));
}

/// `lanefs mds` and `lanefs oss` as separate processes, as on separate hosts.
#[test]
fn separate_mds_and_oss_daemons_serve_a_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let sock = |name: &str| format!("unix:{}", dir.path().join(name).display());
    let spawn = |args: Vec<String>| -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).stdout(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the daemon says where it listens").unwrap();
        assert!(first.starts_with("lanefs: "), "{first}");
        (child, lines)
    };
    let data = |name: &str| dir.path().join(name).display().to_string();
    let (mut mds, _mds_out) = spawn(vec![
        "mds".into(),
        "--data".into(),
        data("mds"),
        "--osts".into(),
        "2".into(),
        "--listen".into(),
        sock("mds.sock"),
    ]);
    let (mut oss, _oss_out) = spawn(vec![
        "oss".into(),
        "--mds".into(),
        sock("mds.sock"),
        "--data".into(),
        data("oss"),
        "--ost".into(),
        "0,1".into(),
        "--listen".into(),
        sock("oss.sock"),
    ]);
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["ior", "-a", "LANEFS", "-w", "-r", "-W", "-b", "1m", "-t", "256k", "-N", "2", "--lanefs.stripe-count=2"])
        .env("LANEFS_MDS", sock("mds.sock"))
        .output()
        .unwrap();
    let _ = (mds.kill(), oss.kill(), mds.wait(), oss.wait());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\nwrite ") && text.contains("\nread "), "{text}");
}

/// `--lanefs.ranks=processes`: every rank's client in a process of its
/// own; the data checks pass and the clients' own counters come back.
#[test]
fn ior_ranks_can_run_as_processes() {
    let up = up();
    let child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["ior", "-a", "LANEFS", "-w", "-r", "-W", "-R", "-C", "-e", "-b", "1m", "-t", "256k", "-s", "2"])
        .args(["-N", "3", "--lanefs.ranks=processes", "--lanefs.lock-mode=lockahead", "-O", "summaryFormat=JSON"])
        .args(["-o", "/ranks-as-processes", "--key", &up.key])
        .env("LANEFS_MDS", &up.mds)
        .env_remove("LANEFS_KEY")
        .env("RUST_LOG", "lanefs=info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("IOR's JSON");
    // 3 ranks x 2 segments x 4 transfers, each locked ahead by its own client.
    assert_eq!(report["lanefs"]["lockahead_sent"], 24, "{}", report["lanefs"]);
    assert_eq!(report["lanefs"]["lockahead_refused"], 0);
    let pids: std::collections::BTreeSet<u32> = stderr
        .lines()
        .filter(|l| l.contains("rank process serving"))
        .filter_map(|l| l.split("pid=").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect();
    assert_eq!(pids.len(), 3, "one process per rank: {stderr}");
    assert!(!pids.contains(&launcher));
    fails(&up, &["ior", "-a", "LANEFS", "-w", "--lanefs.ranks=forks"], "give threads or processes");
}

/// Lockahead with more transfers than a quarter of the client's lock LRU
/// (600 of 4 KiB, against 400 unused locks kept): the rank asks for a
/// window of them at a time, so every write finds its own lock-ahead lock
/// still cached and enqueues nothing more.
#[test]
fn ior_lockahead_asks_a_window_ahead_and_every_write_uses_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["ior", "-a", "LANEFS", "-w", "-e", "-b", "2400k", "-t", "4k", "-s", "1", "-N", "1"])
        .args(["--lanefs.osts=2", "--lanefs.lock-mode=lockahead", "-O", "summaryFormat=JSON"])
        .env("TMPDIR", dir.path())
        .env_remove("LANEFS_MDS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("IOR's JSON");
    let lanefs = &report["lanefs"];
    assert_eq!(lanefs["lockahead_sent"], 600, "{lanefs}");
    assert_eq!(lanefs["lock_enqueues"], 600, "every write uses its lock-ahead lock: {lanefs}");
    assert_eq!(lanefs["blocking_callbacks"], 0, "{lanefs}");
}

/// A rank process given a malformed request (an unknown kind, or a path
/// claiming to be exabytes long) says so and ends.
#[test]
fn a_rank_process_refuses_a_malformed_request() {
    use std::io::Write;
    let up = up();
    let buffer = tempfile::NamedTempFile::new().unwrap();
    buffer.as_file().set_len(4096).unwrap();
    let huge_path = [&[0u8, 0xfd][..], &[0xff; 8]].concat();
    for request in [vec![0xff; 16], huge_path] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(["ior-rank", "--mds", &up.mds, "--rank", "0", "--buffer"])
            .arg(buffer.path())
            .args(["--", "-a", "LANEFS", "-w"])
            .env("LANEFS_KEY", &up.key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&request).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains("bad request from the launcher"), "{request:?}: {stderr}");
    }
}

/// A rank process that dies ends the run with an error naming the rank,
/// never a hang, and leaves no rank process behind.
#[test]
fn a_dead_rank_process_fails_the_run_clearly() {
    let up = up();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["ior", "-a", "LANEFS", "-w", "-b", "256m", "-t", "1m", "-N", "3", "--lanefs.ranks=processes"])
        .args(["-o", "/dies"])
        .env("LANEFS_MDS", &up.mds)
        .env("LANEFS_KEY", &up.key)
        .env("RUST_LOG", "lanefs=info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let victim: u32 = loop {
        let line = stderr.next().expect("a rank process starts").unwrap();
        if line.contains("rank process serving") && line.contains("rank=1") {
            break line.split("pid=").nth(1).unwrap().trim().parse().unwrap();
        }
    };
    Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap();
    let rest: Vec<String> = stderr.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert!(!status.success());
    let last = rest.last().expect("an error");
    assert!(last.contains("rank 1") && last.contains("SIGKILL"), "{rest:?}");
    let ours = |cmdline: &str| cmdline.contains("ior-rank") && cmdline.contains(&up.mds);
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| ours(c))
        .collect();
    assert!(left.is_empty(), "rank processes left behind: {left:?}");
}

/// OST pools as lctl makes and lists them, files confined to their pool's
/// OSTs by a directory's default, and `setstripe -d`.
#[test]
fn pools_confine_files_to_their_osts_and_setstripe_d_removes_a_default() {
    let up = up_with_osts(tempfile::tempdir().unwrap(), 4);
    let (success, _, told) = lanefs(&up, &["pool_new", "lanefs.fast"]);
    assert!(success && told.contains("Pool lanefs.fast created"), "{told}");
    let (success, _, told) = lanefs(&up, &["pool_add", "lanefs.fast", "lanefs-OST0001", "OST0003"]);
    assert!(success && told.contains("OST lanefs-OST0003_UUID added to pool lanefs.fast"), "{told}");
    // lctl's spelling of the same commands.
    ok(&up, &["lctl", "pool_new", "slow"]);
    ok(&up, &["lctl", "pool_add", "slow", "OST[0-2/2]"]);
    // lctl pool_list's text (llapi_get_poollist, llapi_get_poolmembers).
    assert_eq!(ok(&up, &["pool_list", "lanefs"]), "Pools from lanefs:\nlanefs.fast\nlanefs.slow\n");
    assert_eq!(ok(&up, &["pool_list", "lanefs.fast"]), "Pool: lanefs.fast\nlanefs-OST0001_UUID\nlanefs-OST0003_UUID\n");
    assert_eq!(
        ok(&up, &["lctl", "pool_list", "lanefs.slow"]),
        "Pool: lanefs.slow\nlanefs-OST0000_UUID\nlanefs-OST0002_UUID\n"
    );
    ok(&up, &["mkdir", "/fast"]);
    ok(&up, &["setstripe", "-p", "fast", "/fast"]);
    for i in 0..4 {
        ok(&up, &["setstripe", "-c", "1", &format!("/fast/f{i}")]);
    }
    ok(&up, &["setstripe", "-c", "-1", "/fast/wide"]);
    let used: std::collections::BTreeSet<u32> = (0..4)
        .map(|i| format!("/fast/f{i}"))
        .chain(["/fast/wide".to_string()])
        .flat_map(|path| objects_of(&up, &path))
        .map(|(ost, _)| ost)
        .collect();
    assert_eq!(used, [1, 3].into(), "objects on the pool's OSTs only, both used");
    assert_eq!(objects_of(&up, "/fast/wide").len(), 2, "-c -1 in a pool: all its OSTs");
    // getstripe shows the pool after the first OST (lov_dump_user_lmm_header), and find finds by it.
    assert!(ok(&up, &["getstripe", "/fast/wide"]).contains("\nlmm_stripe_offset: 1\nlmm_pool:          fast\n"));
    assert!(ok(&up, &["getstripe", "-d", "/fast"]).ends_with(" pool:          fast\n\n"));
    assert_eq!(ok(&up, &["getstripe", "-p", "/fast/f0"]), "fast\n\n");
    assert_eq!(ok(&up, &["find", "/fast", "--pool", "lanefs.fast", "--name", "w*"]), "/fast/wide\n");
    // A file may name a pool itself; the pool's errors name the fix.
    ok(&up, &["setstripe", "-p", "lanefs.slow", "-c", "2", "/own"]);
    assert_eq!(objects_of(&up, "/own").iter().map(|(ost, _)| *ost).collect::<Vec<_>>(), [0, 2]);
    fails(&up, &["setstripe", "-c", "3", "/fast/three"], "stripe count 3 exceeds the 2 OSTs of pool lanefs.fast");
    fails(&up, &["setstripe", "-p", "none_such", "/fast/x"], "lanefs pool_new lanefs.none_such");
    fails(&up, &["setstripe", "-p", "ignore", "/fast/x"], "-p ignore is not supported");
    fails(&up, &["pool_destroy", "lanefs.fast"], "pool lanefs.fast not empty, please remove all members");
    fails(&up, &["pool_add", "fast", "OST0001"], "lanefs-OST0001_UUID is already in pool lanefs.fast");
    fails(&up, &["pool_add", "fast", "OST0009"], "is not part of the 'lanefs' fs");
    fails(&up, &["pool_new", "a.b"], "names the file system \"a\"");
    fails(&up, &["pool_new", "sixteen_chars_xx"], "not 1 to 15 characters long");
    // Removing an OST moves no file; new files use the members left.
    let before = objects_of(&up, "/fast/wide");
    ok(&up, &["pool_remove", "fast", "3"]);
    assert_eq!(objects_of(&up, "/fast/wide"), before);
    ok(&up, &["setstripe", "-c", "1", "/fast/after"]);
    assert_eq!(objects_of(&up, "/fast/after")[0].0, 1);
    // setstripe -d: the directory inherits again (here: no pool, 1 stripe).
    ok(&up, &["setstripe", "-c", "1", "-p", "fast", "/fast"]);
    ok(&up, &["setstripe", "-d", "/fast"]);
    assert!(ok(&up, &["getstripe", "/fast"]).contains("stripe_count:  1 "), "the file system's default again");
    ok(&up, &["setstripe", "-c", "-1", "/fast/free"]);
    assert_eq!(objects_of(&up, "/fast/free").len(), 4, "no pool any more");
    fails(&up, &["setstripe", "-d", "-c", "2", "/fast"], "cannot be used with");
    fails(&up, &["setstripe", "-d", "/fast/free"], "is not a directory");
    // A pool emptied and destroyed leaves the files that were in it alone.
    ok(&up, &["pool_remove", "fast", "lanefs-OST0001_UUID"]);
    ok(&up, &["pool_destroy", "fast"]);
    assert_eq!(ok(&up, &["pool_list"]), "Pools from lanefs:\nlanefs.slow\n");
    assert_eq!(objects_of(&up, "/fast/wide"), before);
}

/// `(ost, object id)` of each stripe, as `lanefs getstripe` prints them.
fn objects_of(up: &Up, path: &str) -> Vec<(u32, u64)> {
    let layout = ok(up, &["getstripe", path]);
    let rows = layout.lines().skip_while(|line| !line.contains("obdidx")).skip(1).take_while(|l| !l.is_empty());
    rows.map(|row| {
        let fields: Vec<&str> = row.split_whitespace().collect();
        (fields[0].parse().unwrap(), fields[1].parse().unwrap())
    })
    .collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Owners, groups and modes, as `ls -l` and `stat` show them; `rm` leaves
/// the objects to the MDS, which destroys them.
#[test]
fn ls_and_stat_show_owners_and_modes_and_rm_destroys_objects() {
    let up = up();
    // SAFETY: geteuid and getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    ok(&up, &["mkdir", "-m", "0750", "/d"]);
    ok(&up, &["setstripe", "-c", "2", "/d/f"]);
    ok(&up, &["chmod", "0640", "/d/f"]);
    let listing = ok(&up, &["ls", "-l", "/"]);
    assert!(listing.starts_with(&format!("drwxr-x--- {uid:>6} {gid:>6}")), "{listing}");
    let listing = ok(&up, &["ls", "-l", "/d"]);
    let expected = format!("-rw-r----- {uid:>6} {gid:>6} {:>14} {:>8} f", 0, "2x1M");
    assert!(listing.starts_with(&expected), "{listing}");
    let stat = ok(&up, &["stat", "/d/f"]);
    assert!(stat.contains(&format!("Access: (0640/-rw-r-----)  Uid: ({uid:>5})  Gid: ({gid:>5})")), "{stat}");
    assert!(ok(&up, &["stat", "/"]).contains("Access: (0755/drwxr-xr-x)"), "the creator's root, 0755");
    let files: Vec<_> = objects_of(&up, "/d/f")
        .into_iter()
        .map(|(ost, object)| up.dir.path().join(format!("OST{ost:04x}/objects/{object}")))
        .collect();
    assert_eq!(files.len(), 2);
    assert!(files.iter().all(|file| file.exists()), "precreated objects: {files:?}");
    ok(&up, &["rm", "/d/f"]);
    wait_until("the MDS has destroyed the objects", || files.iter().all(|file| !file.exists()));
    fails(&up, &["chmod", "9", "/d"], "octal");
    fails(&up, &["chown", "someone", "/d"], "numeric");
    // Another user, when this test may become one, with a key of its own.
    if uid == 0 {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let theirs = tempfile::tempdir().unwrap();
        std::fs::set_permissions(theirs.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let their_key = theirs.path().join("client.pem");
        let ca = std::path::Path::new(&up.key).with_file_name("ca.pem");
        ok(&up, &["key", "issue", "--ca", ca.to_str().unwrap(), "--name", "u4242", their_key.to_str().unwrap()]);
        std::os::unix::fs::chown(&their_key, Some(4242), Some(4242)).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(["mkdir", "/d/theirs"])
            .env("LANEFS_MDS", &up.mds)
            .env("LANEFS_KEY", &their_key)
            .uid(4242)
            .gid(4242)
            .output();
        // A checkout in an owner-only directory (`mktemp -d`) holds a
        // binary no other user may run.
        let out = match out {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                eprintln!("skipped the other user's part: uid 4242 cannot run {}", env!("CARGO_BIN_EXE_lanefs"));
                return;
            }
            out => out.unwrap(),
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("permission denied (EACCES): /d/theirs: uid 4242 lacks"), "{err}");
        ok(&up, &["chown", "4242:4242", "/d"]);
        let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(["mkdir", "/d/theirs"])
            .env("LANEFS_MDS", &up.mds)
            .env("LANEFS_KEY", &their_key)
            .uid(4242)
            .gid(4242)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(ok(&up, &["ls", "-l", "/d"]).contains("  4242   4242"));
    }
}

/// `lanefs ls` pages through a directory larger than one page of the MDS's
/// listing (1 MiB of 255-byte names), with the real bounds.
#[test]
fn ls_lists_a_directory_of_many_pages() {
    // Thousands of creates, each a synchronous commit: on tmpfs if there is one.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let up = up_in(dir);
    let key = lanefs_net::auth::ClusterKey::load(std::path::Path::new(&up.key)).unwrap();
    let options = lanefs_client::ClientOptions { key: Some(key), ..Default::default() };
    let client = lanefs_client::Client::connect(&up.mds, options).unwrap();
    let names: Vec<String> = (0..3400).map(|i| format!("{i:05}{}", "x".repeat(250))).collect();
    client.mds(lanefs_proto::MdsRequest::Mkdir { path: "/big".into(), permissions: 0o755 }).unwrap();
    for name in &names {
        let request = lanefs_proto::MdsRequest::Mkdir { path: format!("/big/{name}"), permissions: 0o755 };
        client.mds(request).unwrap();
    }
    assert!(client.readdir_pages("/big").count() >= 2, "more than one page");
    let listing = ok(&up, &["ls", "/big"]);
    assert_eq!(listing.lines().collect::<Vec<_>>(), names);
    let long = ok(&up, &["ls", "-l", "/big"]);
    assert_eq!(long.lines().count(), names.len());
    assert!(long.lines().last().unwrap().ends_with(&names[names.len() - 1]));
}

/// `lanefs rm` while the OSS is down: the MDS keeps the objects queued and
/// destroys them when the OSS is back.
#[test]
fn objects_of_a_file_removed_while_its_oss_is_down_go_when_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let sock = |name: &str| format!("unix:{}", dir.path().join(name).display());
    let data = |name: &str| dir.path().join(name).display().to_string();
    let spawn = |args: &[String]| -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).stdout(Stdio::piped()).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the daemon says where it listens").unwrap();
        assert!(first.starts_with("lanefs: "), "{first}");
        (child, lines)
    };
    let mds_args: Vec<String> =
        ["mds", "--osts", "1", "--data", &data("mds"), "--listen", &sock("mds.sock")].map(String::from).to_vec();
    let oss_args: Vec<String> =
        ["oss", "--mds", &sock("mds.sock"), "--data", &data("oss"), "--ost", "0", "--listen", &sock("oss.sock")]
            .map(String::from)
            .to_vec();
    let (mut mds, _mds_out) = spawn(&mds_args);
    let (mut oss, _oss_out) = spawn(&oss_args);
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_lanefs")).args(args).env("LANEFS_MDS", sock("mds.sock")).output();
        let out = out.unwrap();
        assert!(out.status.success(), "lanefs {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&["setstripe", "-c", "1", "/f"]);
    let layout = run(&["getstripe", "/f"]);
    let row = layout.lines().skip_while(|line| !line.contains("obdidx")).nth(1).unwrap().to_string();
    let object: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
    let file = dir.path().join(format!("oss/OST0000/objects/{object}"));
    assert!(file.exists());
    let _ = (oss.kill(), oss.wait());
    run(&["rm", "/f"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(file.exists(), "its OSS is down: nobody destroyed it yet");
    let (mut oss, _oss_out) = spawn(&oss_args);
    wait_until("the object is destroyed once its OSS is back", || !file.exists());
    let _ = (mds.kill(), oss.kill(), mds.wait(), oss.wait());
}

/// A file system on TCP takes only its own keys: `lanefs up --tcp` makes
/// them owner-only beside its data, a command without one (or with an open
/// one, or another cluster's) fails saying what to do, `lanefs key issue`
/// makes more, and servers take only a server key.
#[test]
fn a_tcp_file_system_takes_only_its_own_keys() {
    use std::os::unix::fs::PermissionsExt;
    let up = up();
    let key = std::path::Path::new(&up.key);
    let keys = key.parent().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(keys), mode(key), mode(&keys.join("server.pem"))), (0o700, 0o600, 0o600));
    let run = |key: Option<&std::path::Path>, args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_lanefs"));
        command.args(args).env("LANEFS_MDS", &up.mds).env_remove("LANEFS_KEY");
        if let Some(key) = key {
            command.env("LANEFS_KEY", key);
        }
        let out = command.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (success, said) = run(None, &["ls", "/"]);
    assert!(!success && said.contains("--key") && said.contains("LANEFS_KEY"), "{said}");
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open.pem");
    std::fs::copy(key, &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (success, said) = run(Some(&open), &["ls", "/"]);
    assert!(!success && said.contains(&format!("chmod 600 {}", open.display())), "{said}");
    let other = dir.path().join("other");
    let (success, said) = run(None, &["key", "new", other.to_str().unwrap()]);
    assert!(success && said.contains("client.pem"), "{said}");
    let (success, said) = run(Some(&other.join("client.pem")), &["ls", "/"]);
    assert!(!success && said.contains("not from the CA of the key"), "{said}");
    let alice = dir.path().join("alice.pem");
    let ca = keys.join("ca.pem");
    let (success, said) =
        run(None, &["key", "issue", "--ca", ca.to_str().unwrap(), "--name", "alice", alice.to_str().unwrap()]);
    assert!(success, "{said}");
    assert_eq!(mode(&alice), 0o600);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // A client key's root is squashed; an admin key's is root's.
        let (success, said) = run(Some(&alice), &["mkdir", "/alice"]);
        assert!(!success && said.contains("uid 65534 lacks write"), "{said}");
        let root = dir.path().join("root.pem");
        let (success, said) = run(
            None,
            &["key", "issue", "--ca", ca.to_str().unwrap(), "--admin", "--name", "root", root.to_str().unwrap()],
        );
        assert!(success && said.contains("an admin key"), "{said}");
        assert!(run(Some(&root), &["mkdir", "/root-made"]).0);
        assert!(run(Some(key), &["ls", "-l", "/"]).1.contains("     0      0"));
        ok(&up, &["chmod", "1777", "/"]);
    }
    let (success, said) = run(Some(&alice), &["mkdir", "/alice"]);
    assert!(success, "{said}");
    assert!(run(Some(key), &["ls", "/"]).1.contains("alice"));
    let data = dir.path().join("oss").display().to_string();
    let client = keys.join("client.pem");
    let (success, said) =
        run(Some(&client), &["oss", "--mds", &up.mds, "--data", &data, "--ost", "0", "--listen", "127.0.0.1:0"]);
    assert!(!success && said.contains("is a client key") && said.contains("server key"), "{said}");
    let data = dir.path().join("mds").display().to_string();
    let (success, said) = run(None, &["mds", "--data", &data, "--osts", "1", "--listen", "127.0.0.1:0"]);
    assert!(!success && said.contains("needs the cluster's server key") && said.contains("lanefs key new"), "{said}");
}

/// Detaches a mount left behind by a test that failed half way (and its
/// server, which then exits).
struct LazyUnmount(String);

impl Drop for LazyUnmount {
    fn drop(&mut self) {
        if std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().contains(self.0.as_str()) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// `lanefs migrate` restripes a file as `lfs migrate` does: to the
/// striping given, or its own on other objects; what lanefs lacks is
/// refused by name, and each file that fails is named.
#[test]
fn migrate_restripes_files_and_refuses_what_it_lacks_by_name() {
    let up = up();
    ok(&up, &["setstripe", "-c", "1", "/m"]);
    let before = objects_of(&up, "/m");
    assert_eq!(ok(&up, &["migrate", "-v", "-c", "2", "/m"]), "/m\n");
    assert_eq!(ok(&up, &["getstripe", "-c", "/m"]), "2\n\n");
    let after = objects_of(&up, "/m");
    assert!(after.iter().all(|object| !before.contains(object)), "{before:?} then {after:?}");
    // No striping given: the file keeps its own, on other objects.
    assert_eq!(ok(&up, &["migrate", "/m"]), "");
    assert_eq!(ok(&up, &["getstripe", "-c", "/m"]), "2\n\n");
    assert!(objects_of(&up, "/m").iter().all(|object| !after.contains(object)));
    ok(&up, &["migrate", "-E", "1m", "-c", "1", "-E", "-1", "-c", "2", "/m"]);
    assert!(ok(&up, &["getstripe", "/m"]).contains("lcm_entry_count:   2"));
    for (args, says) in [
        (&["migrate", "-n", "/m"][..], "migrate -n: lanefs migrates in blocking mode only"),
        (&["migrate", "-W", "100", "/m"][..], "migrate -W"),
        (&["migrate", "-L", "mdt", "/m"][..], "migrate -L: data on the MDT and other layouts are not in lanefs"),
        (&["migrate", "/"][..], "is a directory"),
        (&["migrate", "/m", "/none"][..], "/none: MDS: no such file or directory"),
    ] {
        let (ok, _, err) = lanefs(&up, args);
        assert!(!ok && err.contains(says), "{args:?}: {err}");
    }
    let (_, _, err) = lanefs(&up, &["migrate", "/m", "/none"]);
    assert!(err.contains("1 of 2 files were not migrated"), "{err}");
}

/// `lanefs mount` returns once the file system is mounted (over TCP, with
/// the key), unmodified programs use it, and `lanefs umount` refuses while
/// a file is open and unmounts once it is closed.
#[test]
fn mount_serves_unmodified_programs_and_umount_waits_for_open_files() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/fuse").exists() {
        eprintln!("skipped: mounting needs root and /dev/fuse");
        return;
    }
    let up = up();
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().to_str().unwrap();
    let _unmount = LazyUnmount(at.to_string());
    let (ok, out, err) = lanefs(&up, &["mount", at]);
    assert!(ok, "mount: {out}{err}");
    assert!(out.contains("lanefs mounted at"), "{out}");
    let (ok, _, err) = lanefs(&up, &["mount", at]);
    assert!(!ok && err.contains("already a mount point"), "{err}");
    let (ok, _, err) = lanefs(&up, &["umount", "/proc"]);
    assert!(!ok && err.contains("not a lanefs mount"), "umount leaves other file systems alone: {err}");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("dd if=/dev/zero of={at}/z bs=1M count=4 status=none && mkdir {at}/sub && cp {at}/z {at}/sub/z2"))
        .status()
        .unwrap();
    assert!(status.success());
    let (ok, out, _) = lanefs(&up, &["ls", "-l", "/sub"]);
    assert!(ok && out.contains("z2") && out.contains("4194304"), "the file system has what the programs wrote: {out}");
    // Lustre's commands take paths under the mount.
    let (ok, _, err) = lanefs(&up, &["mkdir", &format!("{at}/striped")]);
    assert!(ok, "{err}");
    let (ok, _, err) = lanefs(&up, &["setstripe", "-c", "2", "-S", "2m", &format!("{at}/striped")]);
    assert!(ok, "{err}");
    std::fs::write(dir.path().join("striped/f"), b"data").unwrap();
    let (ok, out, err) = lanefs(&up, &["getstripe", &format!("{at}/striped/f")]);
    assert!(ok && out.contains("lmm_stripe_count:  2") && out.contains("lmm_stripe_size:   2097152"), "{out}{err}");
    // Paths print as given, the mount's (as lfs prints them).
    let (ok, out, err) = lanefs(&up, &["getstripe", &format!("{at}/striped")]);
    assert!(ok && out.contains(&format!("\n{at}/striped/f\nlmm_stripe_count:  2")), "{out}{err}");
    let (ok, out, err) = lanefs(&up, &["find", at, "-type", "f", "!", "-name", "z*"]);
    assert!(ok && out == format!("{at}/striped/f\n"), "{out}{err}");
    // lanefs df -i sums the inodes up as df -i on the mount does.
    let (ok, out, err) = lanefs(&up, &["df", "-i", at]);
    assert!(ok, "{err}");
    let numbers = |line: &str| -> Vec<u64> { line.split_whitespace().filter_map(|n| n.parse().ok()).collect() };
    let summary = numbers(out.lines().find(|l| l.starts_with("filesystem_summary:")).expect("a summary"));
    let df = Command::new("df").args(["--output=itotal,iused,iavail", at]).output().unwrap();
    let df = format!("{}{}", String::from_utf8_lossy(&df.stdout), String::from_utf8_lossy(&df.stderr));
    let on_mount = numbers(df.lines().nth(1).unwrap_or_else(|| panic!("df: {df}")));
    // In use: the same count; free: the backing file system's, which other
    // programs on this machine change between the two calls.
    assert_eq!(summary[1], on_mount[1], "lanefs df -i:\n{out}\ndf -i:\n{df}");
    assert!(summary[2].abs_diff(on_mount[2]) < 10_000, "lanefs df -i:\n{out}\ndf -i:\n{df}");
    let (ok, out, _) = lanefs(&up, &["df", "-i", "-h", at]);
    assert!(ok && out.contains("IUse%"), "{out}");
    // Advice on a path under the mount goes to the mount's client (its ioctl), as lfs's to the node's.
    let (ok, out, err) =
        lanefs(&up, &["ladvise", "-a", "lockahead", "-m", "WRITE", "-s", "0", "-e", "1m", &format!("{at}/striped/f")]);
    assert!(ok && out.is_empty(), "{err}");
    let (ok, out, err) = lanefs(&up, &["ladvise", "-a", "willread", "-s", "0", "-e", "4m", &format!("{at}/z")]);
    assert!(ok && out.is_empty(), "{err}");
    let (ok, out, err) = lanefs(&up, &["ladvise", "-a", "dontneed", "-b", &format!("{at}/z")]);
    assert!(ok && out.is_empty(), "{err}");
    // A file restriped while a program holds it open: the program's reads
    // and writes go on, on the new layout; the times stay.
    let bytes: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("m"), &bytes).unwrap();
    let held = std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join("m")).unwrap();
    let (ok, out, err) = lanefs(&up, &["migrate", "-v", "-c", "2", "-S", "1m", &format!("{at}/m")]);
    assert!(ok && out == format!("{at}/m\n"), "{out}{err}");
    let (ok, out, err) = lanefs(&up, &["getstripe", "-c", &format!("{at}/m")]);
    assert!(ok && out.starts_with("2\n"), "{out}{err}");
    let mut read = vec![0; bytes.len()];
    std::os::unix::fs::FileExt::read_exact_at(&held, &mut read, 0).unwrap();
    assert!(read == bytes, "the open file reads its bytes after the migration");
    std::os::unix::fs::FileExt::write_all_at(&held, b"after", 1 << 20).unwrap();
    drop(held);
    let now = std::fs::read(dir.path().join("m")).unwrap();
    assert_eq!(&now[1 << 20..(1 << 20) + 5], b"after");
    assert_eq!(now.len(), bytes.len());
    let mtime = std::fs::metadata(dir.path().join("m")).unwrap().modified().unwrap();
    let (ok, _, err) = lanefs(&up, &["migrate", &format!("{at}/m")]);
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(dir.path().join("m")).unwrap(), now);
    assert_eq!(std::fs::metadata(dir.path().join("m")).unwrap().modified().unwrap(), mtime, "the time stays");
    let open = std::fs::File::open(dir.path().join("z")).unwrap();
    let (ok, _, err) = lanefs(&up, &["umount", at]);
    assert!(!ok && err.contains("busy") && err.contains("--lazy"), "{err}");
    drop(open);
    let (ok, out, err) = lanefs(&up, &["umount", at]);
    assert!(ok, "umount: {out}{err}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "unmounted: the directory is empty again");
    // A shared mapping is refused unless the mount is told to allow them.
    let map = format!("import mmap; f = open('{at}/z', 'r+b'); mmap.mmap(f.fileno(), 0)[0] = 1");
    for (flags, works) in [(&[][..], false), (&["--shared-mmap"][..], true)] {
        let (ok, out, err) = lanefs(&up, &[&["mount"][..], flags, &[at]].concat());
        assert!(ok, "mount: {out}{err}");
        let mapped = Command::new("python3").args(["-c", &map]).output().unwrap();
        let said = String::from_utf8_lossy(&mapped.stderr);
        assert_eq!(mapped.status.success(), works, "{flags:?}: {said}");
        assert!(works || said.contains("No such device"), "{said}");
        let (ok, out, err) = lanefs(&up, &["umount", at]);
        assert!(ok, "umount: {out}{err}");
    }
    // A mount made where another was just unmounted outlives the old
    // server's exit, however late that exit comes (here: held stopped
    // until the new mount serves).
    let server_pid = |out: &str| -> i32 {
        let pid = out.split("server pid ").nth(1).and_then(|rest| rest.split(',').next());
        pid.and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no server pid in: {out}"))
    };
    let (ok, out, err) = lanefs(&up, &["mount", at]);
    assert!(ok, "mount: {out}{err}");
    let old = server_pid(&out);
    // SAFETY: kill has no memory preconditions; the result is checked.
    assert_eq!(unsafe { libc::kill(old, libc::SIGSTOP) }, 0);
    let (ok, out, err) = lanefs(&up, &["umount", at]);
    assert!(ok, "umount: {out}{err}");
    let (ok, out, err) = lanefs(&up, &["mount", at]);
    assert!(ok, "mount: {out}{err}");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(old, libc::SIGCONT) }, 0);
    let gone = || {
        std::fs::read_to_string(format!("/proc/{old}/stat"))
            .map_or(true, |stat| stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
    };
    let waited = std::time::Instant::now();
    while !gone() {
        assert!(waited.elapsed() < std::time::Duration::from_secs(30), "the old mount's server {old} did not exit");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(dir.path().join("after"), b"served").unwrap();
    let (ok, out, err) = lanefs(&up, &["ls", "/"]);
    assert!(ok && out.contains("after"), "the new mount still serves: {out}{err}");
    let (ok, out, err) = lanefs(&up, &["umount", at]);
    assert!(ok, "umount: {out}{err}");
}

/// A mount whose MDS cannot be reached fails at once, saying so; a mount
/// whose server is killed leaves a dead mount point that `lanefs umount`
/// cleans up.
#[test]
fn a_mount_fails_clearly_without_an_mds_and_a_killed_one_is_cleaned_up() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/fuse").exists() {
        eprintln!("skipped: mounting needs root and /dev/fuse");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().to_str().unwrap();
    let _unmount = LazyUnmount(at.to_string());
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["mount", "--mds", "unix:/nonexistent/mds.sock", "--timeout", "2", at])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("/nonexistent/mds.sock"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "an error, not a wait");
    // An address where nothing listens (refused, as while an MDS is
    // down) fails at once too, without any --timeout.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let started = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs")).args(["mount", "--mds", &free, at]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(&free), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "an error, not a wait: {:?}", started.elapsed());

    let up = up();
    let mut server = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["mount", "--foreground", at])
        .env("LANEFS_MDS", &up.mds)
        .env("LANEFS_KEY", &up.key)
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(at) {
        assert!(std::time::Instant::now() < deadline, "mounted in time");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(dir.path().join("f"), b"x").unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    let gone = std::fs::metadata(dir.path().join("f")).unwrap_err();
    assert_eq!(gone.raw_os_error(), Some(libc::ENOTCONN), "{gone}");
    let (ok, out, err) = lanefs(&up, &["umount", at]);
    assert!(ok, "umount of a dead mount: {out}{err}");
    assert!(!std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(at));
}

/// A background mount's log is in a directory private to its user, named
/// when it starts, and links planted where mounts' logs once went (a
/// shared temporary directory, by process id) are never followed.
#[test]
fn a_mounts_log_is_private_and_planted_links_are_left_alone() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/fuse").exists() {
        eprintln!("skipped: mounting needs root and /dev/fuse");
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let up = up();
    let shared_tmp = tempfile::tempdir().unwrap();
    let victim = shared_tmp.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let next_pid: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .map_or(std::process::id(), |p| p.trim().parse().unwrap());
    for pid in next_pid..next_pid + 400 {
        std::os::unix::fs::symlink(&victim, shared_tmp.path().join(format!("lanefs-mount-{pid}.log"))).unwrap();
    }
    let logs = tempfile::tempdir().unwrap();
    let log_dir = logs.path().join("lanefs");
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path().to_str().unwrap();
    let _unmount = LazyUnmount(at.to_string());
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["mount", at])
        .env("LANEFS_MDS", &up.mds)
        .env("LANEFS_KEY", &up.key)
        .env("TMPDIR", shared_tmp.path())
        .env("LANEFS_LOG_DIR", &log_dir)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    let log = said.split("log ").nth(1).map(|l| l.trim().trim_end_matches(')')).unwrap_or_default().to_string();
    assert!(log.starts_with(log_dir.to_str().unwrap()) && log.ends_with(".log"), "the log is named: {said}");
    assert_eq!(std::fs::metadata(&log).unwrap().mode() & 0o777, 0o600, "{log}");
    assert_eq!(std::fs::metadata(&log_dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious", "no planted link was followed");
    let (ok, _, err) = lanefs(&up, &["umount", at]);
    assert!(ok, "{err}");
}

/// A user who is neither root nor the cluster's own user runs the commands
/// on a cluster root started on Unix sockets: as itself, in its own
/// directory, and nowhere it may not go.
#[test]
fn a_user_runs_commands_on_a_root_run_cluster_as_itself() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run the cluster and to run commands as another user");
        return;
    }
    // The cluster makes its data directory passable to others (0711); the
    // temporary directory above it must be too.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["up", "--osts", "2", "--data"])
        .arg(dir.path().join("fs"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mds = loop {
        let line = lines.next().expect("lanefs up prints its address").unwrap();
        if let Some(a) = line.strip_prefix("export LANEFS_MDS=") {
            break a.to_string();
        }
    };
    let up = Up { child, mds, key: String::new(), dir, _stdout: lines };
    let lanefs_as = |uid: u32, args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(args)
            .env("LANEFS_MDS", &up.mds)
            .env_remove("LANEFS_KEY")
            .uid(uid)
            .gid(uid)
            .output();
        let out = match out {
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return None,
            out => out.unwrap(),
        };
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        Some((out.status.success(), text(&out.stdout), text(&out.stderr)))
    };
    let ok_as = |uid: u32, args: &[&str]| match lanefs_as(uid, args) {
        Some((true, out, _)) => Some(out),
        Some((false, _, err)) => panic!("lanefs {args:?} as uid {uid} failed: {err}"),
        None => None,
    };
    ok_as(0, &["mkdir", "-m", "0755", "/u"]).expect("root runs it");
    ok_as(0, &["chown", "4242:4242", "/u"]).unwrap();
    // A checkout in an owner-only directory holds a binary no other user may run.
    let Some(_) = ok_as(4242, &["mkdir", "/u/d"]) else {
        eprintln!("skipped the other user's part: uid 4242 cannot run {}", env!("CARGO_BIN_EXE_lanefs"));
        return;
    };
    ok_as(4242, &["setstripe", "-c", "2", "/u/d/f"]);
    let layout = ok_as(4242, &["getstripe", "/u/d/f"]).unwrap();
    assert!(layout.contains("lmm_stripe_count:  2"), "{layout}");
    let listing = ok_as(4242, &["ls", "-l", "/u"]).unwrap();
    assert!(listing.contains("  4242   4242"), "its own directory: {listing}");
    let df = ok_as(4242, &["df"]).unwrap();
    assert!(df.contains("[OST:0]") && df.contains("[OST:1]") && df.contains("filesystem_summary:"), "{df}");
    // A migrate copies objects, which a user's own process may not: it
    // fails at once, saying why, and the file keeps its layout.
    let started = std::time::Instant::now();
    let (success, _, err) = lanefs_as(4242, &["migrate", "-c", "1", "/u/d/f"]).unwrap();
    assert!(!success && err.contains("not a node's") && err.contains("runs as root"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "failed after {:?}", started.elapsed());
    assert!(ok_as(4242, &["getstripe", "/u/d/f"]).unwrap().contains("lmm_stripe_count:  2"));
    // Nowhere it may not go: its uid is the kernel's, not what it says.
    let (success, _, err) = lanefs_as(4242, &["mkdir", "/not-mine"]).unwrap();
    assert!(!success && err.contains("permission denied (EACCES): /not-mine: uid 4242 lacks"), "{err}");
    let (success, _, err) = lanefs_as(4242, &["chown", "4243", "/u/d"]).unwrap();
    assert!(!success && err.contains("EPERM"), "{err}");
    // With paths under root's mount: the mount's file system, as itself.
    if !std::path::Path::new("/dev/fuse").exists() {
        eprintln!("skipped the part under a mount: no /dev/fuse");
        return;
    }
    let point = tempfile::tempdir().unwrap();
    std::fs::set_permissions(point.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let at = point.path().to_str().unwrap();
    let _unmount = LazyUnmount(at.to_string());
    ok_as(0, &["mount", at]);
    let layout = ok_as(4242, &["getstripe", &format!("{at}/u/d/f")]).unwrap();
    assert!(layout.contains("lmm_stripe_count:  2"), "{layout}");
    ok_as(4242, &["setstripe", "-c", "1", &format!("{at}/u/d/g")]);
    let df = ok_as(4242, &["df", at]).unwrap();
    assert!(df.contains(&format!("{at}[OST:1]")), "{df}");
    let (success, _, err) = lanefs_as(4242, &["mkdir", &format!("{at}/not-mine")]).unwrap();
    assert!(!success && err.contains("uid 4242 lacks"), "{err}");
    ok_as(0, &["umount", at]);
}
