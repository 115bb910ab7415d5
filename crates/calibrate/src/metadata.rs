//! The metadata server's time per create and per open: what a rank's open
//! waits for besides the round trip. One client creates files one after
//! the other, then opens each again, timing each request to the MDS from
//! its send to its answer; the medians less a Unix socket's round trip
//! (measured apart) are the server's, as the simulator adds them to its
//! own round trip. Each file has a stripe on every OST, as the runs
//! compared with the simulator make them.

use crate::cluster::Cluster;
use crate::{load, median};
use lanefs_client::Client;
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Metadata {
    /// Median time of a create, and of an open of a file that exists, as
    /// the client sees them.
    pub create: Duration,
    pub open: Duration,
    /// Creates (and opens) timed.
    pub ops: u64,
    pub stripes: u32,
}

pub fn measure(cluster: &Cluster, ops: u64, stripes: u32) -> Result<Metadata, String> {
    let client = load::connect(cluster, 0)?;
    let paths: Vec<String> = (0..ops).map(|i| format!("/metadata-{i}")).collect();
    let stripe = StripeSpec { count: Some(i64::from(stripes.max(1))), ..StripeSpec::default() };
    let mut creates = Vec::with_capacity(paths.len());
    for path in &paths {
        let request = MdsRequest::Create {
            path: path.clone(),
            stripe: stripe.clone(),
            mode: CreateMode::Exclusive,
            access: Access::Write,
            permissions: 0o600,
        };
        creates.push(timed(&client, path, request)?);
    }
    let mut opens = Vec::with_capacity(paths.len());
    for path in &paths {
        opens.push(timed(&client, path, MdsRequest::Open { path: path.clone(), access: Access::Write })?);
    }
    Ok(Metadata { create: median(&mut creates), open: median(&mut opens), ops, stripes: stripes.max(1) })
}

/// The time `request` (a create or an open of `path`) takes to answer;
/// the file it opens is closed again.
fn timed(client: &Client, path: &str, request: MdsRequest) -> Result<Duration, String> {
    let began = Instant::now();
    let reply = client.mds(request);
    let took = began.elapsed();
    match reply {
        Ok(MdsReply::File(info)) => {
            let file = client.open_file(path, info).map_err(|e| format!("opening {path}: {e}"))?;
            client.close(file).map_err(|e| format!("closing {path}: {e}"))?;
            Ok(took)
        }
        Ok(other) => Err(format!("opening {path}: the MDS answered {other:?}")),
        Err(e) => Err(format!("opening {path}: {e}")),
    }
}
