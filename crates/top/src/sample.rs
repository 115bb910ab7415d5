//! One sample of a cluster: every counter `lanefs top` shows, as read at
//! one moment, before any rate is made of it. A sample is what a
//! recording holds (one JSON line each), so a replay sees exactly what
//! the live view saw.
//!
//! Counters only grow while their holder lives; a counter smaller than
//! in the sample before it means its holder restarted or its statistics
//! were cleared, and [`crate::rates`] shows no rate for it then.
//!
//! Invariants ([`Sample::validate`]): OSTs in index order, each once, each
//! below [`OST_INDEX_LIMIT`]; clients in instance order, each once, with a
//! name of at most [`INSTANCE_BYTES_MAX`] bytes; an OST's free space at
//! most its total; at most [`OSTS_MAX`] OSTs and [`CLIENTS_MAX`] clients.
//! A live sample is checked with [`Sample::check_invariants`] (a broken
//! one is a bug); a recorded one with [`Sample::validate`] (a broken one
//! is a bad file).

use lanefs_proto::wire::OstStats;
use serde::{Deserialize, Serialize};

/// OST indices are 16 bits in their names (`lanefs-OST0000`..`OSTffff`).
pub const OST_INDEX_LIMIT: u32 = 1 << 16;
/// OSTs in one sample.
pub const OSTS_MAX: usize = OST_INDEX_LIMIT as usize;
/// Clients of one host in one sample.
pub const CLIENTS_MAX: usize = 4096;
/// The longest client instance name taken (lanefs's are 16 bytes).
pub const INSTANCE_BYTES_MAX: usize = 64;

/// Every counter of one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Wall-clock time of the sample, in milliseconds since the Unix epoch.
    pub unix_ms: u64,
    /// OSTs the file system has, whether or not each answered.
    pub ost_count: u32,
    /// The OSTs that answered, in index order.
    pub osts: Vec<OstSample>,
    /// This host's live clients, in instance order.
    pub clients: Vec<ClientSample>,
}

/// One OST's counters (totals since it started) and its state now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OstSample {
    pub ost: u32,
    pub bytes_written: u64,
    pub bytes_read: u64,
    pub write_rpcs: u64,
    pub read_rpcs: u64,
    /// Locks granted now.
    pub locks_granted: u64,
    /// Lock grants since the OST started.
    pub lock_grants: u64,
    /// Lock cancels since the OST started.
    pub lock_cancels: u64,
    /// Requests received and not yet handled, now.
    pub rpcs_in_flight: u64,
    /// Clients connected to the OST's server now.
    pub exports: u64,
    /// Its backing file system's size and free bytes; `None` when unread.
    pub space: Option<Space>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Space {
    pub total_bytes: u64,
    pub free_bytes: u64,
}

/// One client's counters, summed over its OSCs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSample {
    /// Its instance (`ffff` and 12 hex digits), as in its device names.
    pub instance: String,
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// Locks in its cache now.
    pub locks_held: u64,
    /// Lock enqueues sent since its statistics started.
    pub enqueues: u64,
    /// Blocking callbacks received since its statistics started.
    pub blocking_callbacks: u64,
}

impl OstSample {
    /// The counters `lanefs top` shows of an OST's answer.
    pub fn from_stats(s: &OstStats) -> OstSample {
        OstSample {
            ost: s.ost,
            bytes_written: s.data.bytes_written,
            bytes_read: s.data.bytes_read,
            write_rpcs: s.data.write_rpcs,
            read_rpcs: s.data.read_rpcs,
            locks_granted: s.locks_granted,
            lock_grants: s.locks.grants,
            lock_cancels: s.locks.cancels,
            rpcs_in_flight: s.rpcs_in_flight,
            exports: s.exports,
            space: s.space.map(|space| Space { total_bytes: space.total_bytes, free_bytes: space.free_bytes }),
        }
    }

    /// Percent of its file system used, `None` when unknown or empty.
    pub fn space_used_percent(&self) -> Option<f64> {
        let space = self.space?;
        (space.total_bytes > 0).then(|| {
            let used = space.total_bytes - space.free_bytes.min(space.total_bytes);
            used as f64 * 100.0 / space.total_bytes as f64
        })
    }
}

impl Sample {
    /// The first broken invariant (see the module docs), if any.
    pub fn validate(&self) -> Result<(), String> {
        if self.osts.len() > OSTS_MAX {
            return Err(format!("{} OSTs: at most {OSTS_MAX}", self.osts.len()));
        }
        if self.clients.len() > CLIENTS_MAX {
            return Err(format!("{} clients: at most {CLIENTS_MAX}", self.clients.len()));
        }
        for pair in self.osts.windows(2) {
            if pair[0].ost >= pair[1].ost {
                return Err(format!(
                    "OST {} after OST {}: OSTs must be in index order, each once",
                    pair[1].ost, pair[0].ost
                ));
            }
        }
        for ost in &self.osts {
            if ost.ost >= OST_INDEX_LIMIT {
                return Err(format!("OST index {}: at most {}", ost.ost, OST_INDEX_LIMIT - 1));
            }
            if let Some(space) = ost.space.filter(|s| s.free_bytes > s.total_bytes) {
                return Err(format!("OST {}: {} bytes free of {}", ost.ost, space.free_bytes, space.total_bytes));
            }
        }
        for pair in self.clients.windows(2) {
            if pair[0].instance >= pair[1].instance {
                return Err(format!(
                    "client {:?} after {:?}: clients must be in name order, each once",
                    pair[1].instance, pair[0].instance
                ));
            }
        }
        if let Some(c) = self.clients.iter().find(|c| c.instance.is_empty() || c.instance.len() > INSTANCE_BYTES_MAX) {
            return Err(format!("client name {:?}: 1 to {INSTANCE_BYTES_MAX} bytes", c.instance));
        }
        Ok(())
    }

    /// Panics on a broken invariant: for samples this program made.
    pub fn check_invariants(&self) {
        if let Err(problem) = self.validate() {
            panic!("a sample breaks its invariants: {problem}");
        }
    }

    pub fn ost(&self, index: u32) -> Option<&OstSample> {
        self.osts.binary_search_by_key(&index, |o| o.ost).ok().map(|i| &self.osts[i])
    }

    pub fn client(&self, instance: &str) -> Option<&ClientSample> {
        self.clients.binary_search_by(|c| c.instance.as_str().cmp(instance)).ok().map(|i| &self.clients[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_what_is_wrong() {
        let ost = |ost| OstSample { ost, ..Default::default() };
        let mut sample = Sample { ost_count: 2, osts: vec![ost(0), ost(1)], ..Default::default() };
        assert_eq!(sample.validate(), Ok(()));
        sample.osts.swap(0, 1);
        assert!(sample.validate().unwrap_err().contains("index order"));
        sample.osts = vec![OstSample { space: Some(Space { total_bytes: 1, free_bytes: 2 }), ..ost(0) }];
        assert!(sample.validate().unwrap_err().contains("2 bytes free of 1"));
        sample.osts.clear();
        sample.clients = vec![ClientSample { instance: String::new(), ..Default::default() }];
        assert!(sample.validate().unwrap_err().contains("client name"));
    }

    #[test]
    fn space_used_is_a_percentage_of_the_total() {
        let ost = OstSample { space: Some(Space { total_bytes: 200, free_bytes: 50 }), ..Default::default() };
        assert_eq!(ost.space_used_percent(), Some(75.0));
        assert_eq!(OstSample::default().space_used_percent(), None);
    }
}
