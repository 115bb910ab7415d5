//! Taking a live [`Sample`]: the OSTs through the MDS (every OSS is
//! asked, as `lanefs df` and `lctl get_param obdfilter.*` ask them), and
//! this host's clients through their control sockets (as `lctl` finds
//! them, in `lanefs_client::control::run_dir()`).
//!
//! Nothing here fails a sample: an OSS out of reach leaves its OSTs out,
//! a stale client socket is skipped (and removed, as lctl removes it), and
//! a client that fails or does not answer is reported once in the
//! sample's notes and left out while its socket stays (a wedged client
//! costs one timeout, not one per interval).

use crate::client_params;
use crate::sample::{ClientSample, OstSample, Sample, CLIENTS_MAX, OST_INDEX_LIMIT};
use lanefs_client::control::{self, ControlError, Reply, Request};
use lanefs_net::params::Selection;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// A sample and what went wrong while taking it, for the user to read.
#[derive(Clone, Debug, Default)]
pub struct Taken {
    pub sample: Sample,
    pub notes: Vec<String>,
}

/// Takes samples of one cluster and this host's clients.
pub struct Sampler {
    mds: lanefs_client::Client,
    run_dir: PathBuf,
    /// Client sockets that failed: not asked again while they exist.
    failed: Vec<PathBuf>,
}

impl Sampler {
    /// `mds`: a client connected to the file system's MDS; `run_dir`:
    /// where this host's clients listen.
    pub fn new(mds: lanefs_client::Client, run_dir: PathBuf) -> Sampler {
        Sampler { mds, run_dir, failed: Vec::new() }
    }

    pub fn take(&mut self) -> Taken {
        let mut notes = Vec::new();
        let ost_count = self.mds.cluster().ost_count.min(OST_INDEX_LIMIT);
        let mut osts: Vec<OstSample> = match self.mds.ost_stats() {
            Ok(stats) => stats.iter().filter(|s| s.ost < OST_INDEX_LIMIT).map(OstSample::from_stats).collect(),
            Err(e) => {
                notes.push(format!("the OSTs did not answer through the MDS: {e}"));
                Vec::new()
            }
        };
        osts.sort_by_key(|o| o.ost);
        osts.dedup_by_key(|o| o.ost);
        let unix_ms = unix_ms_now();
        let clients = self.clients(&mut notes);
        let sample = Sample { unix_ms, ost_count, osts, clients };
        sample.check_invariants();
        Taken { sample, notes }
    }

    /// Every live client's row; a failing one noted once and left out.
    fn clients(&mut self, notes: &mut Vec<String>) -> Vec<ClientSample> {
        let mut sockets = control::client_sockets(&self.run_dir);
        self.failed.retain(|path| sockets.contains(path));
        if sockets.len() > CLIENTS_MAX {
            notes.push(format!("{} client sockets: only the first {CLIENTS_MAX} are asked", sockets.len()));
            sockets.truncate(CLIENTS_MAX);
        }
        let selection = Selection {
            patterns: client_params::PATTERNS.iter().map(|p| p.to_string()).collect(),
            recursive: false,
            values: true,
        };
        let request = Request::Get(selection);
        let mut by_instance: BTreeMap<String, ClientSample> = BTreeMap::new();
        let asked: Vec<PathBuf> = sockets.into_iter().filter(|p| !self.failed.contains(p)).collect();
        for path in asked {
            let failure = match control::ask(&path, &request) {
                Ok(Reply::Nodes(nodes)) => match client_params::clients(&nodes) {
                    Ok(found) => {
                        for client in found {
                            by_instance.entry(client.instance.clone()).or_insert(client);
                        }
                        continue;
                    }
                    Err(e) => format!("{}: {e}", path.display()),
                },
                Ok(Reply::Error(e)) => format!("{}: {e}", path.display()),
                Ok(_) => format!("{}: an answer of the wrong kind", path.display()),
                Err(ControlError::Stale(_)) => continue,
                Err(e) => e.to_string(),
            };
            notes.push(format!("client left out: {failure}"));
            self.failed.push(path);
        }
        by_instance.into_values().collect()
    }
}

pub fn unix_ms_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
