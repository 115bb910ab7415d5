//! Prometheus metrics of an OSS (and of a whole local cluster), served over
//! HTTP (`--metrics ADDR` on `lanefs up` and `lanefs oss`) in Prometheus's
//! text format, read from the OSTs at each scrape.
//!
//! Names and labels are those of HPE's `lustre_exporter` where it has one
//! (`component="ost"`, `target="lanefs-OST0000"`):
//! `lustre_write_bytes_total`, `lustre_read_bytes_total`,
//! `lustre_write_samples_total`, `lustre_read_samples_total`,
//! `lustre_lock_count_total` (locks granted now, as Lustre's `lock_count`),
//! `lustre_locks_grant_total`, `lustre_lock_cancel_total`,
//! `lustre_lock_grant_rate` and `lustre_lock_cancel_rate` (per second since
//! the previous scrape, as Lustre's pool rates), `lustre_lock_contended_total`,
//! `lustre_pages_per_bulk_rw_total{operation,size}` (brw_stats' pages per
//! bulk RPC), `lustre_capacity_kilobytes`, `lustre_free_kilobytes`,
//! `lustre_inodes_maximum`, `lustre_inodes_free`, `lustre_exports_total`
//! (connections now); and lanefs's own: `lanefs_blocking_callbacks_total`,
//! `lanefs_lockahead_requests_total`, `lanefs_lock_refusals_total`,
//! `lanefs_evictions_total`, `lanefs_locks_waiting`, `lanefs_write_rpcs_total`,
//! `lanefs_read_rpcs_total`, `lanefs_syncs_total`.
//!
//! Where lanefs departs from the exporter: `lustre_lock_count_total` is a
//! count of the locks granted now (a gauge in all but name, as Lustre's
//! `lock_count` file is), kept under the exporter's name so that its
//! dashboards work; `lustre_exports_total` counts the connections served
//! now.
//!
//! Bounded: at most [`CONNECTIONS_MAX`] connections at once (one more is
//! closed at once), each for at most [`CONNECTION_LIFETIME`]; one scrape at
//! a time reads the OSTs (others wait for it); the server answers
//! `/metrics` only (anything else is 404).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use lanefs_proto::wire::OstStats;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::Mutex;

use crate::mds_server::MdsScraper;
use crate::oss::OssScraper;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Target {
    component: String,
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Bulk {
    component: String,
    target: String,
    operation: String,
    size: String,
}

/// What the rates are taken against: each OST's grants and cancels at the
/// previous scrape.
#[derive(Default)]
struct Previous {
    at: Option<Instant>,
    locks: HashMap<u32, (u64, u64)>,
}

/// The metrics of the OSSes `scrapers` name, and of an MDS.
pub struct Exporter {
    scrapers: Vec<OssScraper>,
    mds: Option<MdsScraper>,
    previous: Mutex<Previous>,
}

/// What an MDS served: requests by `md_stats` name, and its connections.
type MdsCounts = (Vec<(&'static str, u64)>, u64);

impl Exporter {
    pub fn new(scrapers: Vec<OssScraper>, mds: Option<MdsScraper>) -> Exporter {
        Exporter { scrapers, mds, previous: Mutex::new(Previous::default()) }
    }

    /// Every metric now, in Prometheus's text format.
    pub async fn render(&self) -> String {
        let mut previous = self.previous.lock().await;
        let mut osts = Vec::new();
        let mut connections = 0u64;
        for scraper in &self.scrapers {
            if let Some((stats, server)) = scraper.scrape().await {
                osts.extend(stats);
                connections += server.connections as u64;
            }
        }
        let mds = self.mds.as_ref().and_then(MdsScraper::scrape).map(|(ops, s)| (ops, s.connections as u64));
        let now = Instant::now();
        let elapsed = previous.at.map(|at| now.duration_since(at).as_secs_f64()).filter(|s| *s > 0.0);
        let text = encode(&osts, connections, mds.as_ref(), |ost, grants, cancels| {
            let (g0, c0) = previous.locks.get(&ost).copied().unwrap_or((grants, cancels));
            match elapsed {
                Some(s) => (grants.saturating_sub(g0) as f64 / s, cancels.saturating_sub(c0) as f64 / s),
                None => (0.0, 0.0),
            }
        });
        previous.at = Some(now);
        previous.locks = osts.iter().map(|o| (o.ost, (o.locks.grants, o.locks.cancels))).collect();
        text
    }
}

/// An OST's counter: its name, its help and how it is read.
type OstCounter = (&'static str, &'static str, fn(&OstStats) -> u64);
/// An OST's gauge, where it has a value.
type OstGauge = (&'static str, &'static str, fn(&OstStats) -> Option<i64>);

const COUNTERS: &[OstCounter] = &[
    ("lustre_write_bytes", "Bytes written to the OST", |o| o.data.bytes_written),
    ("lustre_read_bytes", "Bytes read from the OST", |o| o.data.bytes_read),
    ("lustre_write_samples", "Write RPCs served", |o| o.data.write_bytes.count),
    ("lustre_read_samples", "Read RPCs served", |o| o.data.read_bytes.count),
    ("lustre_lock_count", "Locks granted now (Lustre's lock_count)", |o| o.locks_granted),
    ("lustre_locks_grant", "Locks granted", |o| o.locks.grants),
    ("lustre_lock_cancel", "Locks cancelled by their holders", |o| o.locks.cancels),
    ("lustre_lock_contended", "Conflicting locks met by enqueues", |o| o.locks.conflicts),
    ("lanefs_blocking_callbacks", "Blocking callbacks sent", |o| o.locks.callbacks),
    ("lanefs_lockahead_requests", "Lockahead (speculative) lock requests received", |o| o.locks.lockahead),
    ("lanefs_lock_refusals", "Lock requests refused (lockahead conflicts, evicted clients)", |o| o.locks.refusals),
    ("lanefs_evictions", "Clients evicted while holding or waiting for a lock", |o| o.locks.evictions),
    ("lanefs_write_rpcs", "Write RPCs served", |o| o.data.write_rpcs),
    ("lanefs_read_rpcs", "Read RPCs served", |o| o.data.read_rpcs),
    ("lanefs_syncs", "Sync RPCs served", |o| o.data.syncs),
];

const GAUGES: &[OstGauge] = &[
    ("lustre_capacity_kilobytes", "Capacity of the OST's file system in KiB", |o| o.space.map(|s| kib(s.total_bytes))),
    ("lustre_free_kilobytes", "Free space of the OST's file system in KiB", |o| o.space.map(|s| kib(s.free_bytes))),
    ("lustre_inodes_maximum", "Inodes of the OST's file system", |o| o.space.map(|s| whole(s.total_inodes))),
    ("lustre_inodes_free", "Free inodes of the OST's file system", |o| o.space.map(|s| whole(s.free_inodes))),
    ("lanefs_locks_waiting", "Lock requests waiting now", |o| Some(whole(o.locks_waiting))),
    ("lanefs_rpcs_in_flight", "Requests received for the OST and not yet handled, now", |o| {
        Some(whole(o.rpcs_in_flight))
    }),
];

fn target(o: &OstStats) -> Target {
    Target { component: "ost".into(), target: format!("lanefs-OST{:04x}", o.ost) }
}

/// The text of one scrape; `rates` gives an OST's grant and cancel rates
/// from its totals.
fn encode(
    osts: &[OstStats],
    connections: u64,
    mds: Option<&MdsCounts>,
    mut rates: impl FnMut(u32, u64, u64) -> (f64, f64),
) -> String {
    let mut registry = Registry::default();
    for &(name, help, count) in COUNTERS {
        let family = Family::<Target, Counter>::default();
        registry.register(name, help, family.clone());
        for o in osts {
            family.get_or_create(&target(o)).inc_by(count(o));
        }
    }
    for &(name, help, value) in GAUGES {
        let family = Family::<Target, Gauge>::default();
        registry.register(name, help, family.clone());
        for o in osts {
            if let Some(v) = value(o) {
                family.get_or_create(&target(o)).set(v);
            }
        }
    }
    let grant_rate = Family::<Target, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    let cancel_rate = Family::<Target, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    registry.register(
        "lustre_lock_grant_rate",
        "Locks granted per second since the previous scrape",
        grant_rate.clone(),
    );
    registry.register(
        "lustre_lock_cancel_rate",
        "Locks cancelled per second since the previous scrape",
        cancel_rate.clone(),
    );
    let exports = Family::<Target, Counter>::default();
    registry.register("lustre_exports", "Connections the server serves now", exports.clone());
    let pages = Family::<Bulk, Counter>::default();
    registry.register("lustre_pages_per_bulk_rw", "Bulk RPCs by pages per RPC (brw_stats)", pages.clone());
    for o in osts {
        let t = target(o);
        let (g, c) = rates(o.ost, o.locks.grants, o.locks.cancels);
        grant_rate.get_or_create(&t).set(g);
        cancel_rate.get_or_create(&t).set(c);
        exports.get_or_create(&t).inc_by(connections);
        for (operation, histogram) in [("write", &o.data.write_pages), ("read", &o.data.read_pages)] {
            for (i, &n) in histogram.buckets().iter().enumerate().filter(|(_, &n)| n > 0) {
                let (component, target, operation) = (t.component.clone(), t.target.clone(), operation.to_string());
                pages.get_or_create(&Bulk { component, target, operation, size: (1u64 << i).to_string() }).inc_by(n);
            }
        }
    }
    if let Some((ops, connections)) = mds {
        register_mds(&mut registry, ops, *connections, &exports);
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("writing to a string");
    text
}

fn whole(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The MDS's requests as HPE's exporter names them for an MDT
/// (`lustre_open_total{component="mdt",target="lanefs-MDT0000"}`, ...), and
/// its connections (`lustre_exports_total`).
fn register_mds(
    registry: &mut Registry,
    ops: &[(&'static str, u64)],
    connections: u64,
    exports: &Family<Target, Counter>,
) {
    let t = Target { component: "mdt".into(), target: "lanefs-MDT0000".into() };
    exports.get_or_create(&t).inc_by(connections);
    for &(op, count) in ops {
        let family = Family::<Target, Counter>::default();
        registry.register(format!("lustre_{op}"), format!("{op} requests served (md_stats)"), family.clone());
        family.get_or_create(&t).inc_by(count);
    }
}

fn kib(bytes: u64) -> i64 {
    i64::try_from(bytes / 1024).unwrap_or(i64::MAX)
}

/// Connections the metrics server serves at once.
pub const CONNECTIONS_MAX: usize = 64;
/// How long one connection is served, keep-alive or not (Prometheus
/// scrapes every 15 s by default, each with a connection it keeps).
pub const CONNECTION_LIFETIME: std::time::Duration = std::time::Duration::from_secs(60);

/// The metrics server: answers `GET /metrics`.
pub struct MetricsServer {
    address: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// Serve `exporter` on `listen` (`HOST:PORT`; port 0 picks one), on
    /// the current tokio runtime.
    pub async fn start(listen: &str, exporter: Exporter) -> std::io::Result<MetricsServer> {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("--metrics {listen}: cannot listen there ({e}); give HOST:PORT, e.g. 127.0.0.1:9169"),
            )
        })?;
        let address = listener.local_addr()?;
        let exporter = Arc::new(exporter);
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let exporter = exporter.clone();
                async move {
                    let text = exporter.render().await;
                    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
                }
            }),
        );
        let task = tokio::spawn(serve(listener, app));
        Ok(MetricsServer { address, task })
    }

    pub fn address(&self) -> std::net::SocketAddr {
        self.address
    }
}

/// Accept connections and serve each with `app`, within the bounds.
async fn serve(listener: tokio::net::TcpListener, app: axum::Router) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, most likely: wait rather than spin.
                tracing::warn!("the metrics server could not accept a connection: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else { continue };
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| tower::ServiceExt::oneshot(app.clone(), request));
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
            drop(slot);
        });
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exporters_names_and_labels() {
        let mut o = OstStats {
            ost: 1,
            locks_granted: 3,
            locks_waiting: 0,
            locks: Default::default(),
            data: Default::default(),
            space: None,
            bulk_shared_bytes: 0,
            sync_lock_cancel: Default::default(),
            rpcs_in_flight: 5,
            exports: 2,
        };
        o.data.bytes_written = 4 << 20;
        o.locks.lockahead = 7;
        o.data.write_pages.tally_log2(256);
        let mds = (vec![("open", 4), ("close", 3)], 2);
        let text = encode(&[o], 2, Some(&mds), |_, _, _| (1.5, 0.0));
        for line in [
            "lustre_write_bytes_total{component=\"ost\",target=\"lanefs-OST0001\"} 4194304",
            "lustre_lock_count_total{component=\"ost\",target=\"lanefs-OST0001\"} 3",
            "lustre_lock_grant_rate{component=\"ost\",target=\"lanefs-OST0001\"} 1.5",
            "lanefs_lockahead_requests_total{component=\"ost\",target=\"lanefs-OST0001\"} 7",
            "lustre_exports_total{component=\"ost\",target=\"lanefs-OST0001\"} 2",
            "lanefs_rpcs_in_flight{component=\"ost\",target=\"lanefs-OST0001\"} 5",
            "lustre_pages_per_bulk_rw_total{component=\"ost\",target=\"lanefs-OST0001\",operation=\"write\",size=\"256\"} 1",
            "lustre_open_total{component=\"mdt\",target=\"lanefs-MDT0000\"} 4",
            "lustre_exports_total{component=\"mdt\",target=\"lanefs-MDT0000\"} 2",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
        assert!(text.contains("# TYPE lustre_write_bytes counter"), "{text}");
    }

    #[tokio::test]
    async fn connections_past_the_bound_are_closed_and_the_others_served() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let server = MetricsServer::start("127.0.0.1:0", Exporter::new(Vec::new(), None)).await.unwrap();
        let address = server.address();
        let mut held = Vec::new();
        for _ in 0..CONNECTIONS_MAX {
            held.push(tokio::net::TcpStream::connect(address).await.unwrap());
        }
        let mut one_more = tokio::net::TcpStream::connect(address).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(std::time::Duration::from_secs(10), one_more.read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "closed at once: {read:?}");
        // A held connection is still served.
        let stream = &mut held[0];
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    }
}
