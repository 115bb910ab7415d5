//! `lanefs demo`: one shared file written by 4 clients in IOR's segmented
//! layout, on a real embedded cluster (an MDS and an OSS on local sockets,
//! objects in files), in four ways: file per process, and a shared file
//! with default locking, with lock-no-expand and with lockahead. Every run
//! is then read back by fresh clients through the servers and every byte
//! checked. `--harness` runs the same comparison on the deterministic
//! harness instead (counts only, exactly reproducible).

use crate::out::outln;
use anyhow::{bail, Context, Result};
use lanefs_backends::lanefs::LanefsBackend;
use lanefs_core::harness::demo::{self, DemoConfig, DemoRun};
use lanefs_ior::{Backend, IorSummary};
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
use serde::Serialize;
use std::io;

const MIB: u64 = 1 << 20;

/// One way of writing, measured on the real cluster.
#[derive(Clone, Debug, Serialize)]
pub struct RealRun {
    pub name: &'static str,
    pub lock_enqueues: u64,
    pub blocking_callbacks: u64,
    pub lock_cancels: u64,
    pub write_rpcs: u64,
    pub bytes_written: u64,
    pub bytes_verified: u64,
    pub lockahead_refused: u64,
    pub write_bw_mib_s: f64,
    pub read_bw_mib_s: f64,
}

const RUNS: [(&str, bool, &str); 4] = [
    ("fpp", true, "default"),
    ("ssf-default", false, "default"),
    ("ssf-noexpand", false, "noexpand"),
    ("ssf-lockahead", false, "lockahead"),
];

pub fn run(json: bool, seed: u64, harness: bool) -> Result<()> {
    if harness {
        return run_harness(json, seed);
    }
    let cluster = LocalCluster::start(LocalClusterConfig { osts: 2, ..Default::default() })
        .context("starting an embedded cluster")?;
    let mds = cluster.mds_address();
    let mut runs = Vec::new();
    let mut rows = Vec::new();
    for (name, fpp, mode) in RUNS {
        let (run, text) = one(&mds, name, fpp, mode, seed)?;
        rows.push((name, text));
        runs.push(run);
    }
    if json {
        #[derive(Serialize)]
        struct Report<'a> {
            runs: &'a [RealRun],
        }
        outln!("{}", serde_json::to_string(&Report { runs: &runs })?)?;
    } else {
        print_real(&runs, &rows)?;
    }
    for r in &runs {
        if r.bytes_verified != r.bytes_written {
            bail!("{}: only {} of {} bytes read back correctly", r.name, r.bytes_verified, r.bytes_written);
        }
    }
    Ok(())
}

fn args(name: &str, fpp: bool, mode: &str, phase: &[&str], seed: u64) -> Vec<String> {
    let mut a: Vec<String> =
        ["-a", "LANEFS", "-b", "4m", "-t", "1m", "-s", "4", "-N", "4", "-k"].iter().map(|s| s.to_string()).collect();
    a.extend(phase.iter().map(|s| s.to_string()));
    a.extend(["-G".into(), (seed % 1_000_000 + 1).to_string(), "-o".into(), format!("/demo-{name}")]);
    a.extend([
        format!("--lanefs.lock-mode={mode}"),
        "--lanefs.stripe-count=2".into(),
        "--lanefs.stripe-size=1m".into(),
    ]);
    if fpp {
        a.push("-F".into());
    }
    a
}

/// Run IOR once on the cluster; its text output and summary, and the backend's counters.
fn ior(mds: &str, args: &[String]) -> Result<(IorSummary, String, serde_json::Map<String, serde_json::Value>)> {
    let params = lanefs_ior::parse_args(args)?;
    let backend = LanefsBackend::new(mds.to_string(), None, args.to_vec())?; // a Unix-socket cluster: no key
    let mut out = Vec::new();
    let summary = lanefs_ior::run(&params, &backend, &mut out)?;
    let report = backend.report().map(|r| r.json).unwrap_or_default();
    Ok((summary, String::from_utf8_lossy(&out).into_owned(), report))
}

fn one(mds: &str, name: &'static str, fpp: bool, mode: &str, seed: u64) -> Result<(RealRun, String)> {
    let (written, wtext, counters) = ior(mds, &args(name, fpp, mode, &["-w", "-e"], seed))?;
    let (read, rtext, _) = ior(mds, &args(name, fpp, mode, &["-r", "-R"], seed))?;
    let count = |k: &str| counters.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    let w = written.write.as_ref().context("the write phase ran")?;
    let r = read.read.as_ref().context("the read phase ran")?;
    let verified = if read.data_errors == 0 { r.agg_bytes_rep0 } else { 0 };
    let row = |text: &str, op: &str| text.lines().find(|l| l.starts_with(op)).unwrap_or("").to_string();
    let run = RealRun {
        name,
        lock_enqueues: count("lock_enqueues"),
        blocking_callbacks: count("blocking_callbacks"),
        lock_cancels: count("lock_cancels"),
        write_rpcs: count("write_rpcs"),
        bytes_written: w.agg_bytes_rep0,
        bytes_verified: verified,
        lockahead_refused: count("lockahead_refused"),
        write_bw_mib_s: w.bw_mib.mean,
        read_bw_mib_s: r.bw_mib.mean,
    };
    Ok((run, format!("{}\n{}", row(&wtext, "write "), row(&rtext, "read "))))
}

fn print_real(runs: &[RealRun], rows: &[(&str, String)]) -> io::Result<()> {
    outln!(
        "lanefs demo: 4 clients, IOR segmented (-b 4m -t 1m -s 4), 2 stripes of 1 MiB, embedded cluster with 2 OSTs"
    )?;
    outln!("(an MDS and an OSS on local sockets, objects in files; read back by fresh clients and checked)\n")?;
    outln!("{:<14}access    bw(MiB/s)  IOPS       Latency(s)  block(KiB) xfer(KiB)  open(s)    wr/rd(s)   close(s)   total(s)   iter", "run")?;
    for (name, text) in rows {
        for line in text.lines() {
            outln!("{name:<14}{line}")?;
        }
    }
    outln!()?;
    outln!(
        "{:<14} {:>9} {:>10} {:>8} {:>11} {:>11} {:>14} {:>15}",
        "run",
        "enqueues",
        "callbacks",
        "cancels",
        "write RPCs",
        "write MiB/s",
        "bytes written",
        "bytes verified"
    )?;
    for r in runs {
        outln!(
            "{:<14} {:>9} {:>10} {:>8} {:>11} {:>11.1} {:>14} {:>15}",
            r.name,
            r.lock_enqueues,
            r.blocking_callbacks,
            r.lock_cancels,
            r.write_rpcs,
            r.write_bw_mib_s,
            r.bytes_written,
            r.bytes_verified
        )?;
    }
    outln!()?;
    outln!("fpp:           one file per client; no object has two writers")?;
    outln!("ssf-default:   Lustre's expanding locks; writers of one file revoke each other's locks (false sharing)")?;
    outln!("ssf-noexpand:  lock-no-expand advice: each write locks exactly its bytes")?;
    outln!("ssf-lockahead: lock-no-expand plus asynchronous lockahead of every transfer before writing")?;
    outln!("lock counts cover the write phase (locks given back when the clients finish included)")
}

fn run_harness(json: bool, seed: u64) -> Result<()> {
    let config = DemoConfig { seed, ..DemoConfig::default() };
    let runs = demo::run(config)?;
    if json {
        #[derive(Serialize)]
        struct Report<'a> {
            runs: &'a [DemoRun],
        }
        outln!("{}", serde_json::to_string(&Report { runs: &runs })?)?;
    } else {
        print_harness(&config, &runs)?;
    }
    for r in &runs {
        if r.bytes_verified != r.bytes_written {
            bail!("{}: only {} of {} bytes read back correctly", r.name, r.bytes_verified, r.bytes_written);
        }
    }
    Ok(())
}

fn print_harness(c: &DemoConfig, runs: &[DemoRun]) -> io::Result<()> {
    outln!(
        "lanefs demo --harness: {} clients, IOR segmented (-b {}m -t {}m -s {}), {} stripes of {} MiB over {} OSTs, seed {}",
        c.tasks,
        c.block_bytes / MIB,
        c.transfer_bytes / MIB,
        c.segments,
        c.stripe_count,
        c.stripe_size / MIB,
        c.osts,
        c.seed
    )?;
    outln!("deterministic harness (virtual time, in-memory OSTs); lock counts are for the write phase\n")?;
    outln!(
        "{:<15} {:>9} {:>10} {:>8} {:>11} {:>14} {:>15}",
        "run",
        "enqueues",
        "callbacks",
        "cancels",
        "write RPCs",
        "bytes written",
        "bytes verified"
    )?;
    for r in runs {
        outln!(
            "{:<15} {:>9} {:>10} {:>8} {:>11} {:>14} {:>15}",
            r.name,
            r.lock_enqueues,
            r.blocking_callbacks,
            r.lock_cancels,
            r.write_rpcs,
            r.bytes_written,
            r.bytes_verified
        )?;
    }
    Ok(())
}
