//! `lanefs lctl` against servers and a live client: what it prints, and
//! that set_param changes what a running client does, as its own RPC
//! statistics show.

mod common;

use common::Cluster;
use lanefs_client::{Client, ClientOptions, File};
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use std::path::Path;
use std::process::Command;

fn lctl(cluster: &Cluster, run_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .arg("lctl")
        .args(args)
        .env("LANEFS_MDS", cluster.mds_address())
        .env("LANEFS_RUN_DIR", run_dir)
        .env("RUST_LOG", "warn")
        .env("LANEFS_TIMEOUT", "5")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(cluster: &Cluster, run_dir: &Path, args: &[&str]) -> String {
    let (success, out, err) = lctl(cluster, run_dir, args);
    assert!(success, "lanefs lctl {args:?} failed: {err}");
    out
}

/// A file of one stripe, on OST `ost`.
fn create(client: &Client, path: &str, ost: i64) -> File {
    let stripe = StripeSpec { count: Some(1), start_ost: Some(ost), ..StripeSpec::default() };
    let request = MdsRequest::Create {
        path: path.into(),
        stripe,
        mode: CreateMode::Exclusive,
        access: Access::Write,
        permissions: 0o644,
    };
    let MdsReply::File(info) = client.mds(request).unwrap() else { panic!("create answered otherwise") };
    client.open_layout(path, info.layout).unwrap()
}

/// The write column of one histogram of `rpc_stats`: (bucket label, RPCs).
fn write_column(rpc_stats: &str, title: &str) -> Vec<(u64, u64)> {
    let mut rows = Vec::new();
    let mut lines = rpc_stats.lines().skip_while(|l| !l.starts_with(title)).skip(1);
    for line in lines.by_ref() {
        let Some((label, rest)) = line.split_once(":\t\t") else { break };
        let write: u64 = rest.split('|').nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
        rows.push((label.parse().unwrap(), write));
    }
    rows
}

#[test]
fn set_param_changes_a_running_clients_rpcs() {
    let cluster = Cluster::start(&[]);
    let run = tempfile::tempdir().unwrap();
    let options = ClientOptions { control_dir: Some(run.path().to_path_buf()), ..Default::default() };
    let client = Client::connect(&cluster.mds_address(), options).unwrap();
    let file = create(&client, "/f", 0);
    // One 4 MiB write: the client forms its four 1 MiB RPCs at once, each
    // counted with the RPCs in flight when it left.
    client.pwrite(&file, 0, &vec![7u8; 4 << 20]).unwrap();
    client.fsync(&file).unwrap();
    let stats = ok(&cluster, run.path(), &["get_param", "-n", "osc.*OST0000*.rpc_stats"]);
    let in_flight = write_column(&stats, "rpcs in flight");
    assert!(in_flight.iter().any(|&(n, rpcs)| n > 1 && rpcs > 0), "several RPCs in flight at first: {stats}");
    assert_eq!(write_column(&stats, "pages per rpc").last(), Some(&(256, 4)), "{stats}");

    // Lustre's set_param prints what it set.
    let set = ok(&cluster, run.path(), &["set_param", "osc.*.max_rpcs_in_flight=1", "osc.*OST0000*.rpc_stats=clear"]);
    assert_eq!(set.lines().filter(|l| l.ends_with(".max_rpcs_in_flight=1")).count(), 2, "{set}");
    assert!(set.contains("-OST0000-osc-ffff") && set.contains(".rpc_stats=clear"), "{set}");
    let limit = ok(&cluster, run.path(), &["get_param", "osc.*OST0000*.max_rpcs_in_flight"]);
    assert!(limit.starts_with("osc.lanefs-OST0000-osc-ffff") && limit.ends_with(".max_rpcs_in_flight=1\n"), "{limit}");

    client.pwrite(&file, 4 << 20, &vec![8u8; 4 << 20]).unwrap();
    client.fsync(&file).unwrap();
    let stats = ok(&cluster, run.path(), &["get_param", "-n", "osc.*OST0000*.rpc_stats"]);
    assert!(stats.contains("write RPCs in flight: 0\n"), "{stats}");
    // The same four RPCs, now one at a time: Lustre's rows, all in bucket 1.
    assert!(
        stats.contains(
            "rpcs in flight        rpcs   % cum % |       rpcs   % cum %\n\
                            1:\t\t         0   0   0   |          4 100 100\n"
        ),
        "{stats}"
    );
    assert_eq!(write_column(&stats, "rpcs in flight"), [(1, 4)], "{stats}");

    // A lower dirty limit than what is dirty starts writeback at once:
    // two objects of OST 1 hold 768 KiB each (less than an RPC, so the
    // client keeps them), 1.5 MiB in all, then max_dirty_mb goes to 1: one
    // object is written back, which brings the OST under its limit.
    let (a, b) = (create(&client, "/a", 1), create(&client, "/b", 1));
    client.pwrite(&a, 0, &vec![1u8; 768 << 10]).unwrap();
    client.pwrite(&b, 0, &vec![2u8; 768 << 10]).unwrap();
    let dirty = ok(&cluster, run.path(), &["get_param", "-n", "osc.*OST0001*.cur_dirty_bytes"]);
    assert_eq!(dirty, format!("{}\n", 1536 << 10));
    ok(&cluster, run.path(), &["set_param", "-n", "osc.*.max_dirty_mb=1"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let dirty = ok(&cluster, run.path(), &["get_param", "-n", "osc.*OST0001*.cur_dirty_bytes"]);
        if dirty.trim().parse::<u64>().unwrap() <= 1 << 20 {
            assert_eq!(dirty, format!("{}\n", 768 << 10), "written back to the limit, no further");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still dirty: {dirty}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stats = ok(&cluster, run.path(), &["get_param", "osc.*OST0001*.stats"]);
    assert!(stats.contains(".stats=\nsnapshot_time "), "{stats}");

    // -N names what matches, directories too; the node's own files; the
    // session with each OST; the MDC's requests; where devices connect.
    let names = ok(&cluster, run.path(), &["get_param", "-N", "osc.*"]);
    assert_eq!(names.lines().count(), 2, "one directory per OSC: {names}");
    assert!(names.lines().all(|l| l.starts_with("osc.lanefs-OST000") && !l.contains('=')), "{names}");
    let node = ok(&cluster, run.path(), &["get_param", "version", "health_check"]);
    assert_eq!(node, format!("version=lanefs {}\nhealth_check=healthy\n", env!("CARGO_PKG_VERSION")));
    let import = ok(&cluster, run.path(), &["get_param", "-n", "osc.*OST0001*.import"]);
    assert!(import.starts_with("import:\n    name: lanefs-OST0001-osc-ffff"), "{import}");
    assert!(import.contains("\n    state: FULL\n"), "{import}");
    let mdc = ok(&cluster, run.path(), &["get_param", "-n", "mdc.*.stats"]);
    assert!(mdc.contains("\nldlm_enqueue                        2 samples [reqs]"), "/a and /b since the clear: {mdc}");
    let devices = ok(&cluster, run.path(), &["dl", "-t"]);
    let mdc_line = devices.lines().find(|l| l.contains(" UP mdc ")).expect("an mdc");
    assert!(mdc_line.ends_with(&format!(" 1 {}", cluster.mds_address())), "{devices}");
    let (found, _, err) = lctl(&cluster, run.path(), &["get_param", "osc.*.cur_grant_bytes"]);
    assert!(!found && err.contains("hint: lanefs has no cur_grant_bytes: it grants no space"), "{err}");
    assert!(
        stats.contains("\nwrite_bytes                         1 samples [bytes] 786432 786432 786432\n"),
        "{stats}"
    );

    // Bad values name the parameter, the value and the range.
    let (success, _, err) = lctl(&cluster, run.path(), &["set_param", "osc.*OST0000*.max_rpcs_in_flight=0"]);
    assert!(!success && err.contains("max_rpcs_in_flight=0") && err.contains("from 1 to 256"), "{err}");
    let (success, _, err) = lctl(&cluster, run.path(), &["set_param", "ldlm.namespaces.*.lru_size=0"]);
    assert!(!success && err.contains("lru_size=0") && err.contains("dynamic LRU"), "{err}");
    // With the MDS out of reach, the client's parameters are still there.
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["lctl", "get_param", "-n", "osc.*OST0000*.max_rpcs_in_flight"])
        .env("LANEFS_MDS", format!("unix:{}", run.path().join("no-mds.sock").display()))
        .env("LANEFS_RUN_DIR", run.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && out.stdout == b"1\n", "{err}");
    assert!(err.contains("warning: the servers' parameters are left out"), "{err}");
    drop((file, a, b));
    drop(client);
    // The client is gone, and its socket with it.
    assert!(lanefs_client::control::client_sockets(run.path()).is_empty());
}

#[test]
fn get_list_dl_and_permanent_server_params() {
    let mut cluster = Cluster::start(&[]);
    let run = tempfile::tempdir().unwrap();
    // A dead client's socket: skipped and removed.
    let stale = run.path().join("lanefs-ffff00000000dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let options = ClientOptions { control_dir: Some(run.path().to_path_buf()), ..Default::default() };
    let client = Client::connect(&cluster.mds_address(), options).unwrap();
    let file = create(&client, "/g", 1);
    client.pwrite(&file, 0, &vec![3u8; 1 << 20]).unwrap();
    client.fsync(&file).unwrap();

    let dl = ok(&cluster, run.path(), &["dl"]);
    assert!(!stale.exists(), "stale socket removed");
    let lines: Vec<&str> = dl.lines().collect();
    assert!(lines[0].starts_with("  0 UP lov lanefs-clilov-ffff"), "{dl}");
    assert!(lines[2].starts_with("  2 UP osc lanefs-OST0000-osc-ffff") && lines[2].ends_with(" 1"), "{dl}");
    assert_eq!(lines[5], "  5 UP obdfilter lanefs-OST0001 lanefs-OST0001_UUID 1", "{dl}");

    let listed = ok(&cluster, run.path(), &["list_param", "-F", "osc.*", "llite.*.max_cached_mb"]);
    assert!(listed.lines().all(|l| l.starts_with("osc.lanefs-OST000") && l.ends_with('/') || l.starts_with("llite.")));
    let all = ok(&cluster, run.path(), &["list_param", "-R", "ldlm"]);
    assert!(all.contains("\nldlm.namespaces.filter-lanefs-OST0001_UUID.pool.granted\n"), "{all}");
    let names = ok(&cluster, run.path(), &["get_param", "-N", "ldlm.namespaces.*.lru_{size,max_age}"]);
    assert_eq!(names.lines().count(), 4, "two namespaces, two files each: {names}");
    let granted = ok(&cluster, run.path(), &["get_param", "-n", "ldlm.namespaces.*OST0001-osc-*.lock_count"]);
    assert_eq!(granted, "1\n", "the write lock stays cached");
    let brw = ok(&cluster, run.path(), &["get_param", "obdfilter.lanefs-OST0001.brw_stats"]);
    assert!(brw.starts_with("obdfilter.lanefs-OST0001.brw_stats=\nsnapshot_time:            "), "{brw}");
    assert!(brw.contains("pages per bulk r/w     rpcs  % cum % |  rpcs        % cum %\n256:\t\t"), "{brw}");
    let cached = ok(&cluster, run.path(), &["get_param", "llite.*.max_cached_mb"]);
    assert!(cached.contains(".max_cached_mb=\nusers: 2\nmax_cached_mb: 64\n"), "{cached}");

    let (success, out, err) = lctl(&cluster, run.path(), &["get_param", "osc.*.max_dirty", "osc.*.max_dirty_mb"]);
    assert!(!success, "a pattern that matches nothing fails the command");
    assert!(err.contains("error: get_param: param_path 'osc/*/max_dirty': No such file or directory"), "{err}");
    assert!(err.contains("hint: a parameter that exists: osc.lanefs-OST0000-osc-ffff"), "{err}");
    assert_eq!(out.lines().count(), 2, "the other pattern is printed: {out}");

    // An OST's parameter, kept across its restart with -P.
    // As Lustre's, set_param -P prints nothing.
    assert_eq!(ok(&cluster, run.path(), &["set_param", "-P", "ofd.*.sync_lock_cancel=blocking"]), "");
    // A client parameter kept at the MDS: set on the live client now, and
    // taken by a client that starts later.
    assert_eq!(ok(&cluster, run.path(), &["set_param", "-P", "osc.*.max_rpcs_in_flight=3"]), "");
    let limits = ok(&cluster, run.path(), &["get_param", "-n", "osc.*.max_rpcs_in_flight"]);
    assert_eq!(limits, "3\n3\n");
    let (success, _, err) = lctl(&cluster, run.path(), &["set_param", "-P", "osc.*.max_rpcs_in_flight=300"]);
    assert!(!success && err.contains("max_rpcs_in_flight=300") && err.contains("from 1 to 256"), "{err}");
    let (success, _, err) = lctl(&cluster, run.path(), &["set_param", "-P", "osc.*.no_such=1"]);
    assert!(!success && err.contains("names no client parameter"), "{err}");
    // -P -d forgets a kept setting; the values now stay.
    ok(&cluster, run.path(), &["set_param", "-P", "llite.*.max_cached_mb=16"]);
    assert_eq!(ok(&cluster, run.path(), &["set_param", "-P", "-d", "llite.*.max_cached_mb"]), "");
    let (success, _, err) = lctl(&cluster, run.path(), &["set_param", "-P", "-d", "llite.*.max_cached_mb"]);
    assert!(!success && err.contains("no setting of it is kept"), "{err}");
    let (success, _, err) = lctl(&cluster, run.path(), &["set_param", "obdfilter.*.sync_lock_cancel=sometimes"]);
    assert!(!success && err.contains("never, blocking, always"), "{err}");
    drop(file);
    drop(client);
    let options = ClientOptions { control_dir: Some(run.path().to_path_buf()), ..Default::default() };
    let later = Client::connect(&cluster.mds_address(), options).unwrap();
    let limits = ok(&cluster, run.path(), &["get_param", "-n", "osc.*.max_rpcs_in_flight"]);
    assert_eq!(limits, "3\n3\n", "a client started later takes the kept setting");
    let cached = ok(&cluster, run.path(), &["get_param", "llite.*.max_cached_mb"]);
    assert!(cached.contains("\nmax_cached_mb: 64\n"), "a forgotten one it does not: {cached}");
    drop(later);
    cluster.oss.kill();
    cluster.oss.restart();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, out, _) = lctl(&cluster, run.path(), &["get_param", "obdfilter.*.sync_lock_cancel"]);
        if out.lines().count() == 2 {
            assert_eq!(
                out,
                "obdfilter.lanefs-OST0000.sync_lock_cancel=blocking\nobdfilter.lanefs-OST0001.sync_lock_cancel=blocking\n"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the OSS did not come back: {out}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // A wedged client (its socket accepts, nobody answers) costs one
    // timeout for the whole command, named; the rest is printed.
    let _wedged = std::os::unix::net::UnixListener::bind(run.path().join("lanefs-ffff00000000beef.sock")).unwrap();
    let started = std::time::Instant::now();
    let (success, out, err) =
        lctl(&cluster, run.path(), &["get_param", "obdfilter.*.sync_lock_cancel", "obdfilter.*.kbytestotal"]);
    assert!(success && out.lines().count() == 4, "{out}{err}");
    assert_eq!(err.matches("did not answer within 5s").count(), 1, "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(9), "asked once: {:?}", started.elapsed());
}

/// The ranks of a running `lanefs ior -a LANEFS` are clients lctl sees and
/// sets, each its own (`-d` holds them before the write phase).
#[test]
fn a_running_benchmarks_clients_are_lctls_too() {
    let cluster = Cluster::start(&[]);
    let run = tempfile::tempdir().unwrap();
    let mut ior = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["ior", "-a", "LANEFS", "-w", "-b", "1m", "-t", "1m", "-N", "2", "-d", "3", "-o", "/ior"])
        .env("LANEFS_MDS", cluster.mds_address())
        .env("LANEFS_RUN_DIR", run.path())
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let dl = loop {
        let dl = ok(&cluster, run.path(), &["dl"]);
        if dl.lines().filter(|l| l.contains(" UP osc ")).count() == 4 {
            break dl;
        }
        assert!(std::time::Instant::now() < deadline, "the ranks' clients never showed: {dl}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let instances: std::collections::BTreeSet<&str> =
        dl.lines().filter(|l| l.contains(" UP mdc ")).map(|l| l.split_whitespace().nth(3).unwrap()).collect();
    assert_eq!(instances.len(), 2, "two ranks, two clients: {dl}");
    let set = ok(&cluster, run.path(), &["set_param", "osc.*.max_rpcs_in_flight=2"]);
    assert_eq!(set.lines().count(), 4, "{set}");
    assert!(ior.wait().unwrap().success());
    assert!(lanefs_client::control::client_sockets(run.path()).is_empty(), "the ranks' sockets go with them");
}

/// A mount is a client lctl reads: what programs do through it shows in
/// its `llite` stats, and its socket goes with the unmount.
#[test]
fn a_mount_is_a_client_lctl_reads() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/dev/fuse").exists() {
        eprintln!("skipped: mounting needs root and /dev/fuse");
        return;
    }
    let cluster = Cluster::start(&[]);
    let run = tempfile::tempdir().unwrap();
    let mount = tempfile::tempdir().unwrap();
    let at = mount.path().to_str().unwrap().to_string();
    let lanefs = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_lanefs"))
            .args(args)
            .env("LANEFS_MDS", cluster.mds_address())
            .env("LANEFS_RUN_DIR", run.path())
            .output()
            .unwrap()
    };
    let mounted = lanefs(&["mount", &at]);
    assert!(mounted.status.success(), "{}", String::from_utf8_lossy(&mounted.stderr));
    let unmount = unmount_on_drop(&at);
    std::fs::write(mount.path().join("f"), vec![5u8; 3 << 20]).unwrap();
    let stats = ok(&cluster, run.path(), &["get_param", "llite.*.stats"]);
    assert!(stats.starts_with("llite.lanefs-ffff") && stats.contains(".stats=\nsnapshot_time "), "{stats}");
    assert!(stats.contains("\nwrite_bytes                         "), "{stats}");
    assert!(stats.contains("\nopen                                1 samples [reqs]"), "{stats}");
    let umount = lanefs(&["umount", &at]);
    assert!(umount.status.success(), "{}", String::from_utf8_lossy(&umount.stderr));
    drop(unmount);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !lanefs_client::control::client_sockets(run.path()).is_empty() {
        assert!(std::time::Instant::now() < deadline, "the mount's socket outlived it");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Detaches the mount at the path if a failed test left it behind.
fn unmount_on_drop(at: &str) -> impl Drop + '_ {
    struct Lazy<'a>(&'a str);
    impl Drop for Lazy<'_> {
        fn drop(&mut self) {
            if std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().contains(self.0) {
                let _ = Command::new("umount").arg("-l").arg(self.0).status();
            }
        }
    }
    Lazy(at)
}
