//! The servers' CPU time per I/O RPC, per lock request and per blocking
//! callback, and the client's per call, per message and per page: lanefs's
//! own costs, each taken from the real daemons and the real client library
//! under a load that makes mostly one kind of work ([`crate::load`]), and
//! turned into costs per unit by [`crate::costs`].
//!
//! CPU time, not wall time ([`crate::cpu`]): the servers run in a process
//! of their own ([`crate::cluster`]), the client in this one, and nothing
//! else runs in either while a phase is measured.

use crate::cluster::Cluster;
use crate::costs::{self, ClientCosts, Phases, ServerCosts};
use crate::load;
use crate::Options;
use lanefs_client::{Client, File};

#[derive(Clone, Debug)]
pub struct Servers {
    pub costs: ServerCosts,
    pub client: ClientCosts,
    pub phases: Phases,
    /// The servers' CPU time per second while idle, taken off each phase.
    pub idle_rate: f64,
}

/// Where each write phase writes in its file: apart, so that no phase
/// finds another's pages cached.
const PAGE_RPCS_BASE: u64 = 1 << 30;
const LARGE_RPCS_BASE: u64 = 1 << 32;

/// Runs the phases on `cluster`; `copy_gib_s`: one core's copy rate, for
/// the client's cost per page.
pub fn measure(cluster: &Cluster, options: &Options, copy_gib_s: f64) -> Result<Servers, String> {
    let idle_rate = load::idle_rate(cluster)?;
    let client = load::connect(cluster, 0)?;
    let file = load::create(&client, "/writes")?;
    // The file's lock, taken before anything is measured.
    load::cached_writes(&client, &file, 1)?;
    let run = |work: &dyn Fn() -> Result<u64, String>| load::measured(cluster, &client, idle_rate, work);
    let cached = run(&|| load::cached_writes(&client, &file, options.cached_writes()))?;
    let page_rpcs = run(&|| load::page_rpcs(&client, &file, PAGE_RPCS_BASE, options.page_rpcs()))?;
    let large_rpcs = run(&|| load::large_rpcs(&client, &file, LARGE_RPCS_BASE, options.large_rpc_bytes()))?;
    let callbacks = callbacks(cluster, &client, idle_rate, options.callback_writes())?;
    let locks = locks(cluster, &client, idle_rate, options.lock_requests())?;
    client.close(file).map_err(|e| format!("closing /writes: {e}"))?;
    let phases = Phases { cached, page_rpcs, large_rpcs, callbacks, locks };
    Ok(Servers {
        costs: costs::server_costs(&phases)?,
        client: costs::client_costs(&phases, copy_gib_s)?,
        phases,
        idle_rate,
    })
}

/// A second client takes turns with `client` writing one page.
fn callbacks(cluster: &Cluster, client: &Client, idle_rate: f64, writes: u64) -> Result<load::Sample, String> {
    let other = load::connect(cluster, 0)?;
    let mine = load::create(client, "/callbacks")?;
    let theirs = open(&other, "/callbacks")?;
    let pair = [(client, &mine), (&other, &theirs)];
    // Each holds the lock once before anything is measured.
    load::ping_pong_writes(pair, 2)?;
    let sample = load::measured(cluster, client, idle_rate, || load::ping_pong_writes(pair, writes))?;
    other.close(theirs).map_err(|e| format!("closing /callbacks: {e}"))?;
    client.close(mine).map_err(|e| format!("closing /callbacks: {e}"))?;
    Ok(sample)
}

/// Lock-ahead locks from a client of their own, which keeps them all.
fn locks(cluster: &Cluster, client: &Client, idle_rate: f64, requests: u64) -> Result<load::Sample, String> {
    let asking = load::connect(cluster, requests as usize + 1)?;
    let files = load::files_for_locks(&asking, requests)?;
    load::measured(cluster, client, idle_rate, || load::lock_requests(&asking, &files))
}

fn open(client: &Client, path: &str) -> Result<File, String> {
    let request = lanefs_proto::MdsRequest::Open { path: path.to_string(), access: lanefs_proto::Access::Write };
    match client.mds(request) {
        Ok(lanefs_proto::MdsReply::File(info)) => {
            client.open_file(path, info).map_err(|e| format!("opening {path}: {e}"))
        }
        Ok(other) => Err(format!("opening {path}: the MDS answered {other:?}")),
        Err(e) => Err(format!("opening {path}: {e}")),
    }
}
