//! `lanefs up --metrics ADDR`: the OSTs' metrics in Prometheus's text
//! format, read back after an IOR run of a known size, by a plain scrape
//! and through a real Prometheus (Debian's `prometheus`, which `make test`
//! installs as root; skipped with a message where it is not installed).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lanefs up` with metrics: the process, the MDS's address and the
/// metrics' `HOST:PORT`.
fn up(dir: &Path) -> (Killed, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["up", "--osts", "2", "--metrics", "127.0.0.1:0", "--data"])
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut mds, mut metrics) = (None, None);
    while mds.is_none() || metrics.is_none() {
        let line = lines.next().expect("lanefs up prints its addresses").unwrap();
        if let Some(a) = line.strip_prefix("export LANEFS_MDS=") {
            mds = Some(a.to_string());
        }
        if let Some(a) = line.strip_prefix("lanefs: metrics at http://") {
            metrics = Some(a.trim_end_matches("/metrics").to_string());
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    (Killed(child), mds.unwrap(), metrics.unwrap())
}

/// The body of `GET path` from `address` (HTTP/1.0, so the server closes).
fn get(address: &str, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The sum of `metric` over its series in a scrape.
fn sum(text: &str, metric: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
        .sum()
}

const WRITTEN: u64 = (2 * 8) << 20;

fn write_known_bytes(mds: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .args(["ior", "--cluster", mds, "-a", "LANEFS", "-w", "-e", "-b", "8m", "-t", "1m", "-N", "2"])
        .args(["-o", "/metrics-test", "--lanefs.stripe-count=2", "--lanefs.lock-mode=lockahead", "-k"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_ior_runs_bytes_and_locks_reach_a_scrape_and_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, mds, metrics) = up(dir.path());
    write_known_bytes(&mds);
    let text = get(&metrics, "/metrics");
    assert_eq!(sum(&text, "lustre_write_bytes_total"), WRITTEN, "{text}");
    assert!(text.contains("target=\"lanefs-OST0000\"") && text.contains("target=\"lanefs-OST0001\""), "{text}");
    assert!(sum(&text, "lanefs_lockahead_requests_total") > 0, "lockahead requests counted: {text}");
    assert_eq!(sum(&text, "lustre_pages_per_bulk_rw_total"), sum(&text, "lanefs_write_rpcs_total"));
    // The MDS's side: the ranks opened the file (a create and an open).
    assert!(text.contains("lustre_open_total{component=\"mdt\",target=\"lanefs-MDT0000\"}"), "{text}");
    assert!(sum(&text, "lustre_open_total") >= 2, "{text}");
    let Some(prometheus) = which("prometheus") else {
        eprintln!("skipped the Prometheus half: prometheus is not installed (apt-get install prometheus; make test does as root)");
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: lanefs\n    static_configs:\n      - targets: ['{metrics}']\n"),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let _prometheus = Killed(
        Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let api = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let answer = loop {
        let answer = std::net::TcpStream::connect(&api)
            .ok()
            .map(|_| get(&api, "/api/v1/query?query=sum(lustre_write_bytes_total)"))
            .unwrap_or_default();
        if answer.contains(&format!("\"{WRITTEN}\"")) {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not read {WRITTEN} bytes within a minute; last answer {answer}; log in {}",
            dir.path().join("prometheus.log").display()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(answer.contains("\"status\":\"success\""), "{answer}");
    // Every query of the Grafana dashboard is one Prometheus takes.
    for expr in dashboard_queries() {
        let query = expr.replace("$__rate_interval", "1m");
        let answer = get(&api, &format!("/api/v1/query?query={}", encode(&query)));
        assert!(answer.contains("\"status\":\"success\""), "{expr}: {answer}");
    }
}

/// The PromQL of every panel of docs/grafana/lanefs-dashboard.json.
fn dashboard_queries() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/lanefs-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    panels
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect()
}

/// `s` as a URL's query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn the_dashboard_names_only_metrics_the_servers_serve() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, mds, metrics) = up(dir.path());
    write_known_bytes(&mds);
    let text = get(&metrics, "/metrics");
    let queries = dashboard_queries();
    assert!(queries.len() >= 8, "{queries:?}");
    for expr in queries {
        let names = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("lustre_") || w.starts_with("lanefs_"));
        for name in names {
            assert!(text.contains(&format!("\n{name}{{")), "{name} (in {expr}) is not served:\n{text}");
        }
    }
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}
