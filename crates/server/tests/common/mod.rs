//! A cluster in a child process of the test binary, for tests that lower
//! its descriptor limit or measure its CPU time and memory without
//! disturbing the tests running beside them in this process.
//!
//! The test file that uses it defines an ignored test named
//! [`CHILD_TEST`] that calls [`child_main`]; [`ServerChild::start`] runs
//! the binary again with that test alone and a description of the cluster
//! in the environment. The child prints `READY <mds> <oss>`, answers
//! `stats` on its standard input with one `STATS ...` line, and exits when
//! its standard input closes.

#![allow(dead_code)] // each test file uses its own part

use lanefs_client::{Client, File};
use lanefs_net::limits::{ServerLimits, ServerStats};
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

/// The name of the ignored test that runs the child's side.
pub const CHILD_TEST: &str = "server_child";
const ENV: &str = "LANEFS_TEST_SERVER";

/// What the child runs.
#[derive(Clone, Debug, Default)]
pub struct ChildSpec {
    pub osts: u32,
    pub tcp: bool,
    /// `RLIMIT_NOFILE` (soft, hard) set before the cluster starts.
    pub nofile: Option<(u64, u64)>,
    pub handshake_ms: Option<u64>,
    pub idle_ms: Option<u64>,
    pub stall_ms: Option<u64>,
    pub connections_max: Option<usize>,
    /// The cluster's data directory (a temporary one if `None`); its path
    /// must hold no `,` or `=`.
    pub data_dir: Option<std::path::PathBuf>,
}

impl ChildSpec {
    fn encode(&self) -> String {
        let mut parts = vec![format!("osts={}", self.osts), format!("tcp={}", self.tcp)];
        if let Some((soft, hard)) = self.nofile {
            parts.push(format!("soft={soft}"));
            parts.push(format!("hard={hard}"));
        }
        let optional = [
            ("handshake_ms", self.handshake_ms),
            ("idle_ms", self.idle_ms),
            ("stall_ms", self.stall_ms),
            ("connections_max", self.connections_max.map(|n| n as u64)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                parts.push(format!("{key}={value}"));
            }
        }
        if let Some(dir) = &self.data_dir {
            parts.push(format!("data={}", dir.display()));
        }
        parts.join(",")
    }

    fn decode(text: &str) -> ChildSpec {
        let mut spec = ChildSpec::default();
        let (mut soft, mut hard) = (None, None);
        for part in text.split(',') {
            let (key, value) = part.split_once('=').expect("key=value");
            let number = || value.parse::<u64>().expect("a number");
            match key {
                "osts" => spec.osts = number() as u32,
                "tcp" => spec.tcp = value == "true",
                "soft" => soft = Some(number()),
                "hard" => hard = Some(number()),
                "handshake_ms" => spec.handshake_ms = Some(number()),
                "idle_ms" => spec.idle_ms = Some(number()),
                "stall_ms" => spec.stall_ms = Some(number()),
                "connections_max" => spec.connections_max = Some(number() as usize),
                "data" => spec.data_dir = Some(value.into()),
                other => panic!("unknown key {other}"),
            }
        }
        spec.nofile = soft.zip(hard);
        spec
    }
}

pub fn set_nofile(soft: u64, hard: u64) {
    let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: setrlimit reads only `limit`.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0, "{}", std::io::Error::last_os_error());
}

pub fn nofile_soft() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only into `limit`.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    limit.rlim_cur
}

/// The child's side: run the cluster `LANEFS_TEST_SERVER` describes until
/// standard input closes. Does nothing in a normal test run.
pub fn child_main() {
    let Ok(text) = std::env::var(ENV) else { return };
    let spec = ChildSpec::decode(&text);
    if let Some((soft, hard)) = spec.nofile {
        set_nofile(soft, hard);
    }
    let mut limits = ServerLimits { connections_max: spec.connections_max, ..ServerLimits::default() };
    if let Some(ms) = spec.handshake_ms {
        limits.handshake_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = spec.idle_ms {
        limits.idle_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = spec.stall_ms {
        limits.queue.stall_timeout = Duration::from_millis(ms);
    }
    let config = LocalClusterConfig {
        osts: spec.osts,
        unix_sockets: !spec.tcp,
        limits,
        data_dir: spec.data_dir.clone(),
        ..Default::default()
    };
    let cluster = LocalCluster::start(config).expect("the child's cluster starts");
    println!("READY {} {}", cluster.mds_address(), cluster.oss_address().expect("an OSS"));
    for line in std::io::stdin().lines() {
        match line.as_deref() {
            Ok("stats") => {
                let (oss, mds) = cluster.server_stats();
                println!(
                    "STATS {} {} {} {} {} {} {}",
                    oss.connections,
                    oss.refused,
                    oss.queued_bytes,
                    mds.connections,
                    mds.refused,
                    mds.queued_bytes,
                    nofile_soft()
                );
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
}

/// A cluster running in a child process; killed when dropped.
pub struct ServerChild {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    pub mds: String,
    pub oss: String,
}

impl ServerChild {
    pub fn start(spec: &ChildSpec) -> ServerChild {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD_TEST, "--nocapture", "--include-ignored"])
            .env(ENV, spec.encode())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mds, oss) = loop {
            let line = lines.next().expect("the child prints READY").unwrap();
            if let Some(rest) = line.strip_prefix("READY ") {
                let (mds, oss) = rest.split_once(' ').unwrap();
                break (mds.to_string(), oss.to_string());
            }
        };
        ServerChild { child, stdin, lines, mds, oss }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The OSS's and the MDS's statistics, and the child's descriptor limit.
    pub fn stats(&mut self) -> (ServerStats, ServerStats, u64) {
        writeln!(self.stdin, "stats").unwrap();
        self.stdin.flush().unwrap();
        let line = loop {
            let line = self.lines.next().expect("the child answers").unwrap();
            if let Some(rest) = line.strip_prefix("STATS ") {
                break rest.to_string();
            }
        };
        let n: Vec<u64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        let stats = |i: usize| ServerStats {
            connections: n[i] as usize,
            refused: n[i + 1],
            queued_bytes: n[i + 2],
            ..ServerStats::default()
        };
        (stats(0), stats(3), n[6])
    }

    /// User and system CPU time the child has used, in seconds.
    pub fn cpu_s(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
    }

    /// The child's resident memory now (`VmRSS`) or at its peak (`VmHWM`), in bytes.
    pub fn memory_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).expect("the field is there");
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    }

    /// Kill the child (SIGKILL) and wait for it.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Create `path` with `count` stripes of `size` bytes.
pub fn create(client: &Client, path: &str, count: i64, size: u64) -> File {
    let stripe = StripeSpec { count: Some(count), size: Some(size), start_ost: None, ..StripeSpec::default() };
    let request = MdsRequest::Create {
        path: path.into(),
        stripe,
        mode: CreateMode::Exclusive,
        access: Access::ReadWrite,
        permissions: 0o644,
    };
    match client.mds(request).unwrap() {
        MdsReply::File(info) => client.open_file(path, info).unwrap(),
        other => panic!("create answered {other:?}"),
    }
}

/// Open the existing file `path`.
pub fn open(client: &Client, path: &str) -> File {
    match client.mds(MdsRequest::Open { path: path.into(), access: Access::ReadWrite }).unwrap() {
        MdsReply::File(info) => client.open_file(path, info).unwrap(),
        other => panic!("open answered {other:?}"),
    }
}

/// Bytes that differ by seed and offset.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|i| (i.wrapping_mul(31).wrapping_add(seed * 7) % 251) as u8).collect()
}

/// Write `data` to a new file at `path`, read it back and compare.
pub fn verified_write_read(client: &Client, path: &str, seed: u64, len: usize) {
    let f = create(client, path, 1, 1 << 20);
    let data = pattern(seed, len);
    client.pwrite(&f, 0, &data).unwrap();
    client.fsync(&f).unwrap();
    assert_eq!(client.pread(&f, 0, len as u64).unwrap(), data, "{path} reads back what was written");
    client.close(f).unwrap();
}
