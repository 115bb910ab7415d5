//! `mpirun -np N lanefs ior`: every MPI process is one rank with its own
//! lanefs client (Open MPI from Debian). Collective MPI-IO in every Cray
//! lock mode, independent LANEFS and POSIX, data verified by other ranks
//! (`-W -R -C`); rank 0 alone prints; a rank killed mid-run makes the job
//! fail, never hang.
//!
//! Built with `--features mpi` (`make test` does so where Open MPI's
//! headers are installed).
#![cfg(feature = "mpi")]

#[path = "../../../tests/support/mpirun_session.rs"]
mod mpirun_session;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Every test's jobs start embedded clusters, and each sweeps the
/// directories of aborted jobs: the test of that sweep runs alone (it
/// takes this for writing, the others for reading).
static CLUSTERS: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    CLUSTERS.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn mpirun(ranks: u32, env: &[(&str, &str)], args: &[&str]) -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe", "-np", &ranks.to_string()])
        .env("OMPI_MCA_orte_tmpdir_base", mpirun_session::base())
        .arg(env!("CARGO_BIN_EXE_lanefs"))
        .arg("ior")
        .args(args)
        .env_remove("LANEFS_MPIIO_HINTS")
        .env_remove("LANEFS_MDS");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn run(ranks: u32, env: &[(&str, &str)], args: &[&str]) -> (Output, String, String) {
    let out = mpirun(ranks, env, args).output().expect("mpirun (install openmpi-bin)");
    let (o, e) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    (out, o, e)
}

const VERIFIED: [&str; 12] = ["-w", "-r", "-W", "-R", "-C", "-e", "-b", "1m", "-t", "256k", "-s", "2"];

#[test]
fn collective_mpiio_under_mpirun_in_every_lock_mode() {
    let _clusters = shared();
    for (mode, aggregators) in [("0", 1), ("1", 4), ("2", 4)] {
        let hints = format!("*:striping_factor=4:striping_unit=262144:cray_cb_write_lock_mode={mode}");
        let env = [("MPICH_MPIIO_HINTS", hints.as_str()), ("MPICH_MPIIO_STATS", "1"), ("MPICH_MPIIO_TIMERS", "1")];
        let mut args = vec!["-a", "MPIIO", "-c"];
        args.extend(VERIFIED);
        let (out, stdout, stderr) = run(4, &env, &args);
        assert!(out.status.success(), "mode {mode}: {stdout}\n{stderr}");
        assert_eq!(stdout.matches("IOR-4.1.0+lanefs: MPI Coordinated Test").count(), 1, "rank 0 alone prints");
        assert!(stdout.contains("tasks               : 4") && stdout.contains("type                : collective"));
        assert!(stdout.contains("\nwrite ") && stdout.contains("\nread "), "{stdout}");
        // 4 ranks, 2 segments of 4 transfers: 32 collective calls.
        assert!(stderr.contains("|   collective writes       = 32"), "mode {mode}: {stderr}");
        assert!(stderr.contains(&format!("|   aggregators             = {aggregators}\n")), "mode {mode}: {stderr}");
        assert_eq!(stderr.contains("|   lock mode         ="), mode == "2", "mode {mode}: {stderr}");
        if mode == "2" {
            assert!(stdout.contains("lanefs.blocking_callbacks: 0"), "lockahead needs no callbacks: {stdout}");
            // Each process counts its own client's lockahead requests; the
            // report sums them over the job, as a run of threads does.
            let threads = Command::new(env!("CARGO_BIN_EXE_lanefs"))
                .arg("ior")
                .args(&args)
                .args(["-N", "4"])
                .env("MPICH_MPIIO_HINTS", &hints)
                .env_remove("LANEFS_MDS")
                .output()
                .unwrap();
            let threads = String::from_utf8_lossy(&threads.stdout);
            let sent = |out: &str| out.lines().find(|l| l.starts_with("lanefs.lockahead_sent")).map(str::to_owned);
            assert!(sent(&threads).is_some_and(|l| !l.ends_with(": 0")), "{threads}");
            assert_eq!(sent(&stdout), sent(&threads), "{stdout}\n{threads}");
        }
    }
}

#[test]
fn a_jobs_time_series_gathers_every_rank() {
    let _clusters = shared();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.jsonl");
    let hints = "*:striping_factor=2:striping_unit=1048576:cray_cb_write_lock_mode=2";
    let args = ["-a", "MPIIO", "-c", "-w", "-e", "-b", "1m", "-t", "1m", "-s", "2", "--lanefs.osts=2"];
    let mut args = args.to_vec();
    args.extend(["--timeseries", path.to_str().unwrap(), "--timeseries-interval", "0.01"]);
    let (out, stdout, stderr) = run(4, &[("MPICH_MPIIO_HINTS", hints)], &args);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let series = lanefs_ior::timeseries::TimeSeries::read_file(&path).unwrap();
    let bins = series.bins();
    let ranks = series.get("rank_write_bytes").unwrap();
    for rank in 0..4 {
        assert_eq!(ranks.member(rank, bins).iter().sum::<u64>(), 2 << 20, "rank {rank}'s calls, from its own process");
    }
    assert_eq!(series.get("ost_write_bytes").unwrap().total(), 8 << 20, "the aggregators' writes reached the OSTs");
    assert!(series.get("client_lockahead_requests").unwrap().total() > 0, "mode 2 asks for locks ahead");
}

#[test]
fn independent_backends_under_mpirun() {
    let _clusters = shared();
    let dir = tempfile::tempdir().unwrap();
    let posix_file = dir.path().join("posix").to_string_lossy().into_owned();
    for args in [vec!["-a", "LANEFS"], vec!["-a", "MPIIO"], vec!["-a", "POSIX", "-o", posix_file.as_str()]] {
        let mut args = args.clone();
        args.extend(VERIFIED);
        let (out, stdout, stderr) = run(3, &[], &args);
        assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
        assert!(stdout.contains("tasks               : 3"), "{stdout}");
    }
    let (out, _, stderr) = run(2, &[], &["-a", "LANEFS", "-w", "-N", "3"]);
    assert!(!out.status.success());
    assert!(stderr.contains("-N 3: the job has 2 ranks"), "{stderr}");
    // Fewer tasks than ranks: IOR's testComm, the first N run the test.
    let mut args = vec!["-a", "LANEFS", "-N", "2"];
    args.extend(VERIFIED);
    let (out, stdout, stderr) = run(4, &[], &args);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("tasks               : 2"), "{stdout}");
}

/// A job aborted by one of its ranks leaves no cluster directory behind:
/// the next embedded cluster removes the ones whose process is gone.
#[test]
fn an_aborted_jobs_cluster_directory_is_swept_by_the_next() {
    let _alone = CLUSTERS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    let marked = || -> Vec<std::path::PathBuf> {
        let mut found: Vec<_> = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("lanefs-temporary").exists())
            .collect();
        found.sort();
        found
    };
    let before = marked();
    // A rank fails at once (a missing directory) and the job aborts.
    let (out, _, _) = run(2, &[], &["-a", "LANEFS", "-w", "-o", "/no/such/dir/f"]);
    assert!(!out.status.success());
    // Its directory, and no other test's: one no process fences any more.
    let left: Vec<_> = marked()
        .into_iter()
        .filter(|p| !before.contains(p) && lanefs_net::fence::Fence::acquire(p, "test").is_ok())
        .collect();
    assert!(!left.is_empty(), "the aborted job left its directory");
    let (out, stdout, stderr) = run(2, &[], &["-a", "LANEFS", "-w", "-b", "64k", "-t", "64k"]);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for dir in left {
        assert!(!dir.exists(), "{} outlived its aborted job", dir.display());
    }
}

/// Stonewalling under mpirun: the ranks compare their counts through MPI
/// (wear-out), the write stores the count, and a second job's read, with
/// collective MPI-IO (rank 0's stonewall decision each transfer), stops
/// there and checks what it reads.
#[test]
fn stonewalled_phases_under_mpirun() {
    let _clusters = shared();
    let dir = tempfile::tempdir().unwrap();
    let status = dir.path().join("stonewall").to_string_lossy().into_owned();
    let status_option = format!("stoneWallingStatusFile={status}");
    let file = dir.path().join("f").to_string_lossy().into_owned();
    let common = ["-a", "POSIX", "-o", file.as_str(), "-k", "-G", "9", "-t", "4k", "-b", "4k", "-s", "300"];
    let mut write = common.to_vec();
    write.extend(["-w", "-D", "1", "-O", "stoneWallingWearOut=1", "-O", status_option.as_str()]);
    let (out, stdout, stderr) = run(3, &[], &write);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("stonewalling pairs accessed min: "), "{stdout}");
    let pairs: u64 = std::fs::read_to_string(&status).unwrap().parse().unwrap();
    assert!(pairs > 0 && pairs <= 300);
    let mut read = common.to_vec();
    read.extend(["-r", "-R", "-O", status_option.as_str()]);
    let (out, stdout, stderr) = run(3, &[], &read);
    assert!(out.status.success() && !stdout.contains("incorrect data"), "{stdout}\n{stderr}");
    let agg_mib = 3.0 * pairs as f64 * 4096.0 / 1048576.0;
    assert!(
        stdout.contains(&format!(" {agg_mib:.1} POSIX ")),
        "the read moved the count stored ({agg_mib:.1} MiB): {stdout}"
    );
    let mut collective = vec!["-a", "MPIIO", "-c", "-o", "/coll", "-t", "4k", "-b", "4k", "-s", "64"];
    collective.extend(["-w", "-r", "-R", "-D", "30", "-O", "stoneWallingWearOut=1"]);
    let (out, stdout, stderr) = run(2, &[], &collective);
    assert!(out.status.success() && !stdout.contains("incorrect data"), "{stdout}\n{stderr}");
    assert!(stdout.contains("stonewalling pairs accessed min: 64 max: 64"), "{stdout}");
}

#[test]
fn a_rank_killed_mid_run_fails_the_job_without_a_hang() {
    let _clusters = shared();
    let mut args = vec!["-a", "MPIIO", "-c", "-w", "-r", "-b", "1m", "-t", "64k", "-s", "400", "-i", "3"];
    args.push("-e");
    let mut child = mpirun(4, &[], &args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    // Kill one rank once the ranks are up and writing.
    std::thread::sleep(Duration::from_millis(1500));
    let ranks = Command::new("pgrep").args(["-P", &child.id().to_string(), "lanefs"]).output().unwrap();
    let pids: Vec<String> = String::from_utf8_lossy(&ranks.stdout).split_whitespace().map(str::to_string).collect();
    assert!(pids.len() >= 2, "the ranks run under mpirun: {pids:?}");
    Command::new("kill").args(["-9", &pids[1]]).status().unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "the job hangs after a rank died");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "the job must fail: {stderr}");
    assert!(stderr.contains("signal 9") || stderr.contains("Killed") || stderr.contains("exited"), "{stderr}");
}

/// Several hosts on one machine (`bench/netns.sh`): the MDS and OSS in one
/// network namespace, on TCP with a cluster key; 4 ranks in two others,
/// launched there by mpirun; collective MPI-IO with lockahead, each rank
/// reading back what a rank of the other host wrote. Needs root (to make
/// namespaces); elsewhere it says so and passes.
#[test]
fn ranks_on_two_hosts_and_the_servers_on_a_third() {
    let _clusters = shared();
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 || Command::new("ip").arg("-V").output().is_err() {
        eprintln!("skipped: network namespaces as hosts need root and iproute2");
        return;
    }
    // A container may deny namespaces even to root: then say so and pass.
    let probe = format!("lfsprobe{}", std::process::id());
    let made = Command::new("ip").args(["netns", "add", &probe]).output().is_ok_and(|o| o.status.success());
    let _ = Command::new("ip").args(["netns", "del", &probe]).output();
    let uts = Command::new("unshare").args(["--uts", "true"]).output().is_ok_and(|o| o.status.success());
    if !made || !uts {
        eprintln!("skipped: this machine does not let us make network and UTS namespaces");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/netns.sh");
    let out = Command::new("sh")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_lanefs"))
        .env("OMPI_MCA_orte_tmpdir_base", mpirun_session::base())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("nodes               : 2") && stdout.contains("tasks               : 4"), "{stdout}");
    assert!(stdout.contains("\nwrite ") && stdout.contains("\nread "), "{stdout}");
    // The aggregators sit on both rank hosts (named lfs<pid>a and lfs<pid>b).
    let hosts: std::collections::BTreeSet<&str> =
        stderr.lines().filter_map(|l| l.split_whitespace().nth(2)).filter(|h| h.starts_with("lfs")).collect();
    assert_eq!(hosts.len(), 2, "aggregators on two hosts: {stderr}");
}
