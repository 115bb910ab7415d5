//! Chaos on a real cluster: an MDS and an OSS as processes of their own,
//! killed and restarted, stopped and continued, while `lanefs ior -w -r -W
//! -R -e` runs with several ranks.
//!
//! What must hold, for every run: it ends within a bound (no hang); it
//! either completes with its data checked (`-W`, `-R`) or fails with an
//! error that names the problem (never a panic); a run that completed,
//! whose writes were fsync'ed (`-e`), reads back intact after the last
//! restart of the servers. And what recovery promises: an OSS killed and
//! restarted, or stopped for less than the timeout, costs a run nothing;
//! an OSS stopped for longer than the timeout fails it, within the timeout
//! and a margin, saying what was out of reach; an MDS killed and restarted
//! or stopped for a moment costs nothing either (namespace calls wait for
//! it, and the OSS registers with it again). A run that starts while an
//! OST recovers (waiting for the clients of runs killed earlier) waits up
//! to its timeout, then fails saying so.

mod common;

use common::Cluster;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The clients' timeout (`--lanefs.timeout`, Lustre's `obd_timeout`).
const TIMEOUT_S: u64 = 6;
/// An OSS's recovery window: a restarted OSS waits at most this long for
/// the clients it knew.
const RECOVERY_WINDOW_S: u64 = 15;
/// The most one run may take, whatever happens to the servers: the run's
/// own length, a recovery window and the timeout, with room to spare.
const RUN_BOUND: Duration = Duration::from_secs(90);

/// How a run ended.
#[derive(Debug)]
struct Outcome {
    success: bool,
    stderr: String,
}

/// `lanefs ior` on `cluster` with `args` after the common ones, while
/// `chaos` (given the cluster) runs beside it; the run is killed, and the
/// test fails, if it takes longer than [`RUN_BOUND`].
fn ior(cluster: &mut Cluster, args: &[&str], chaos: impl FnOnce(&mut Cluster)) -> Outcome {
    ior_within(cluster, TIMEOUT_S, args, chaos)
}

/// [`ior`] with a timeout of `timeout_s`.
fn ior_within(cluster: &mut Cluster, timeout_s: u64, args: &[&str], chaos: impl FnOnce(&mut Cluster)) -> Outcome {
    let timeout = format!("--lanefs.timeout={timeout_s}");
    let common = ["-a", "LANEFS", "-b", "8m", "-t", "1m", "-s", "2", "-N", "4", "-G", "77", "--lanefs.stripe-count=2"];
    let all: Vec<&str> = common.iter().copied().chain([timeout.as_str()]).chain(args.iter().copied()).collect();
    let started = Instant::now();
    let (status, stderr) = run_ior(cluster, &all, "error", chaos);
    let outcome = Outcome { success: status.success(), stderr };
    let ended = if outcome.success { "completed" } else { "failed" };
    eprintln!("lanefs ior {args:?}: {ended} in {:.1?}", started.elapsed());
    assert!(status.code().is_some(), "lanefs ior died of a signal: {outcome:?}");
    assert!(!outcome.stderr.contains("panicked"), "lanefs ior panicked: {}", outcome.stderr);
    if !outcome.success {
        assert!(outcome.stderr.contains("ERROR") || outcome.stderr.contains("error"), "no error named: {outcome:?}");
    }
    outcome
}

/// `lanefs ior ARGS` on `cluster`, logging at `log` on stderr, while
/// `chaos` (given the cluster) runs beside it: its exit status and
/// stderr. The run is killed, and the test fails, if it takes longer
/// than [`RUN_BOUND`].
fn run_ior(
    cluster: &mut Cluster,
    args: &[&str],
    log: &str,
    chaos: impl FnOnce(&mut Cluster),
) -> (std::process::ExitStatus, String) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .arg("ior")
        .args(args)
        .env("LANEFS_MDS", cluster.mds_address())
        .env("RUST_LOG", log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let collected = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    chaos(cluster);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lanefs ior {args:?} still running after {RUN_BOUND:?}: {}", collected.join().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, collected.join().unwrap())
}

/// Write, check and read back `path`, keeping it (`-k`) for [`verify`].
/// Eight repetitions: a run lasts a few seconds, so that what the chaos
/// does lands in the middle of its writes, reads and checks.
fn write_and_check(cluster: &mut Cluster, path: &str, chaos: impl FnOnce(&mut Cluster)) -> Outcome {
    ior(cluster, &["-w", "-r", "-W", "-R", "-e", "-C", "-k", "-i", "8", "-o", path], chaos)
}

/// Read `path` back as a run wrote it, checking every byte. A new client
/// waits for an OST's recovery only as long as its timeout (runs killed
/// earlier are clients the OST waits for, to the window's end): this one
/// is given the recovery window besides.
fn verify(cluster: &mut Cluster, path: &str) {
    let outcome = ior_within(cluster, RECOVERY_WINDOW_S + TIMEOUT_S, &["-r", "-R", "-k", "-o", path], |_| {});
    assert!(outcome.success, "{path}: what a completed run fsync'ed reads back wrong: {}", outcome.stderr);
}

fn after(delay_ms: u64) {
    std::thread::sleep(Duration::from_millis(delay_ms));
}

#[test]
fn runs_survive_servers_killed_and_stopped_or_fail_clearly_within_the_bound() {
    let mut cluster = Cluster::start(&["--recovery-window", &RECOVERY_WINDOW_S.to_string()]);
    let mut completed = Vec::new();

    // An OSS killed in the middle of a run and started again: its clients
    // reconnect within the recovery window and replay; nothing is lost.
    let outcome = write_and_check(&mut cluster, "/oss-killed", |c| {
        after(300);
        c.oss.kill();
        after(1000);
        c.oss.restart();
    });
    assert!(outcome.success, "a run across an OSS restart failed: {}", outcome.stderr);
    completed.push(String::from("/oss-killed"));

    // An OSS stopped for less than the timeout: nothing fails.
    let outcome = write_and_check(&mut cluster, "/oss-paused", |c| {
        after(300);
        c.oss.signal(libc::SIGSTOP);
        after(TIMEOUT_S * 1000 / 3);
        c.oss.signal(libc::SIGCONT);
    });
    assert!(outcome.success, "a run across a short OSS stop failed: {}", outcome.stderr);
    completed.push(String::from("/oss-paused"));

    // The MDS killed and started again, then stopped for a moment: the
    // namespace calls wait for it, the OSS registers with it again.
    let outcome = write_and_check(&mut cluster, "/mds-killed", |c| {
        after(200);
        c.mds.kill();
        after(1000);
        c.mds.restart();
    });
    assert!(outcome.success, "a run across an MDS restart failed: {}", outcome.stderr);
    completed.push(String::from("/mds-killed"));
    let outcome = write_and_check(&mut cluster, "/mds-paused", |c| {
        c.mds.signal(libc::SIGSTOP);
        after(1500);
        c.mds.signal(libc::SIGCONT);
    });
    assert!(outcome.success, "a run across a short MDS stop failed: {}", outcome.stderr);
    completed.push(String::from("/mds-paused"));

    // An OSS stopped for longer than the timeout: the run fails, naming
    // what it could not reach, within the timeout and a margin (the RPC
    // timeout to notice, the reconnect timeout to give up).
    let stopped = Instant::now();
    let outcome = write_and_check(&mut cluster, "/oss-stopped", |c| {
        after(300);
        c.oss.signal(libc::SIGSTOP);
    });
    let waited = stopped.elapsed();
    cluster.oss.signal(libc::SIGCONT);
    assert!(!outcome.success, "a run went through an OSS stopped for good");
    assert!(outcome.stderr.contains("OST"), "the error names no OST: {}", outcome.stderr);
    let bound = Duration::from_secs(3 * TIMEOUT_S + 10);
    assert!(waited < bound, "the run failed after {waited:?}, more than {bound:?}: {}", outcome.stderr);

    // The cluster serves again once the OSS is continued.
    let outcome = write_and_check(&mut cluster, "/after", |_| {});
    assert!(outcome.success, "the continued OSS does not serve: {}", outcome.stderr);
    completed.push(String::from("/after"));

    // A seeded mix: whatever happens, every run ends within the bound,
    // completed or with a clear error (checked by `ior`).
    let mut seed: u64 = 0x5eed_c4a0;
    let mut next = |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for round in 0..4 {
        let path = format!("/mix-{round}");
        let (what, delay_ms, pause_ms) = (next(4), next(800), 300 + next(2000));
        let outcome = write_and_check(&mut cluster, &path, |c| {
            after(delay_ms);
            match what {
                0 => {
                    c.oss.kill();
                    after(pause_ms);
                    c.oss.restart();
                }
                1 => {
                    c.oss.signal(libc::SIGSTOP);
                    after(pause_ms);
                    c.oss.signal(libc::SIGCONT);
                }
                2 => {
                    c.mds.kill();
                    after(pause_ms);
                    c.mds.restart();
                }
                _ => {
                    c.mds.signal(libc::SIGSTOP);
                    after(pause_ms);
                    c.mds.signal(libc::SIGCONT);
                }
            }
        });
        eprintln!("round {round}: event {what} at {delay_ms} ms for {pause_ms} ms: {outcome:?}");
        if outcome.success {
            completed.push(path);
        }
    }

    // Both servers restarted once more: what completed runs fsync'ed is
    // all there.
    cluster.oss.kill();
    cluster.mds.kill();
    cluster.mds.restart();
    cluster.oss.restart();
    for path in &completed {
        verify(&mut cluster, path);
    }
    assert!(Path::new(&cluster.dir.path().join("oss")).exists());
}

/// `lanefs COMMAND` on `cluster`, killed (and the test failed) past
/// [`RUN_BOUND`]; returns whether it succeeded, its output and how long it took.
fn lanefs(cluster: &Cluster, args: &[&str]) -> (bool, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(args)
        .env("LANEFS_MDS", cluster.mds_address())
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > RUN_BOUND {
            let _ = child.kill();
            panic!("lanefs {args:?} still running after {RUN_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = format!("{}{}", out.join().unwrap(), err.join().unwrap());
    (status.success(), text, started.elapsed())
}

/// With the OSS stopped, commands that need only the MDS answer at once,
/// and one that needs the OSS fails within its `--timeout`, naming the
/// OST; once the OSS goes on, the same command answers.
#[test]
fn a_stopped_oss_leaves_metadata_commands_working_and_fails_data_commands_within_the_timeout() {
    let mut cluster = Cluster::start(&["--recovery-window", &RECOVERY_WINDOW_S.to_string()]);
    let outcome = ior(&mut cluster, &["-w", "-k", "-o", "/f"], |_| {});
    assert!(outcome.success, "{}", outcome.stderr);
    cluster.oss.signal(libc::SIGSTOP);
    for args in [&["ls", "/"][..], &["mkdir", "/d"], &["getstripe", "/f"], &["ls", "/d"]] {
        let (ok, text, took) = lanefs(&cluster, args);
        assert!(ok, "lanefs {args:?} with the OSS stopped: {text}");
        assert!(took < Duration::from_secs(10), "lanefs {args:?} took {took:?} with the OSS stopped");
    }
    let (ok, text, took) = lanefs(&cluster, &["--timeout", "3", "stat", "/f"]);
    cluster.oss.signal(libc::SIGCONT);
    assert!(!ok, "stat answered with its OSS stopped: {text}");
    assert!(text.contains("OST"), "the error names no OST: {text}");
    assert!(took < Duration::from_secs(3 * 3 + 10), "stat failed after {took:?} with --timeout 3");
    let (ok, text, _) = lanefs(&cluster, &["stat", "/f"]);
    assert!(ok && text.contains("67108864"), "stat after the OSS went on: {text}");
}

/// A client takes an OSS that stays silent for half its OSTs' callback
/// timeout for lost when that is shorter than its own timeout: by then no
/// eviction it could not hear of has happened, and from then on it
/// answers no read from what it caches under that OSS's locks. Here the
/// OSS stops while the run's client, connected by its first repetition,
/// waits the 4 s before its second (`-d`), so only the client's pings
/// meet the silence; the run goes on once the OSS does.
#[test]
fn a_client_gives_a_silent_oss_half_its_callback_timeout() {
    let mut cluster = Cluster::start(&["--recovery-window", &RECOVERY_WINDOW_S.to_string(), "--callback-timeout", "2"]);
    let timeout = format!("--lanefs.timeout={TIMEOUT_S}");
    let args = ["-a", "LANEFS", "-w", "-F", "-b", "1m", "-t", "1m", "-N", "2", "-i", "2", "-d", "4", &timeout];
    let (status, text) = run_ior(&mut cluster, &[&args[..], &["-o", "/silent"]].concat(), "warn", |c| {
        after(5000);
        c.oss.signal(libc::SIGSTOP);
        after(2500);
        c.oss.signal(libc::SIGCONT);
    });
    assert!(status.success(), "the run failed across a stop shorter than its timeout: {text}");
    assert!(text.contains("no answer for 1s (half the OSTs' callback timeout, 2s)"), "{text}");
}

/// `--lanefs.timeout` holds from the first thing `lanefs ior` asks of the
/// OSTs (their counters before the run), not only in the run.
#[test]
fn ior_with_an_oss_stopped_fails_within_its_lanefs_timeout() {
    let cluster = Cluster::start(&["--recovery-window", &RECOVERY_WINDOW_S.to_string()]);
    cluster.oss.signal(libc::SIGSTOP);
    let (ok, text, took) =
        lanefs(&cluster, &["ior", "-a", "LANEFS", "--lanefs.timeout=3", "-w", "-b", "1m", "-t", "1m", "-o", "/g"]);
    cluster.oss.signal(libc::SIGCONT);
    assert!(!ok, "ior ran with its OSS stopped: {text}");
    assert!(text.contains("lanefs: error:") && text.contains("3s"), "the error says what timed out: {text}");
    // A few calls in turn, each within the timeout (the default is 100 s).
    assert!(took < Duration::from_secs(30), "ior failed after {took:?} with --lanefs.timeout=3");
}
