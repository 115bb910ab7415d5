//! What `lanefs top` shows of a sample: one [`Frame`], its rates the
//! differences of the counters between the sample and the one before it,
//! over the wall-clock time between them.
//!
//! A rate is `None` (shown `-`) where it cannot be known: in the first
//! sample; for an OST or client absent from the sample before; when a
//! counter went down (its holder restarted or its statistics were
//! cleared); when the clock did not move forward between the samples.
//! Values of the moment (locks granted, RPCs in flight, space, exports,
//! locks held) need no sample before.

use crate::sample::{ClientSample, OstSample, Sample};
use crate::slow::{self, Activity};

pub const MIB: f64 = 1048576.0;

/// One sample as shown.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// The sample's wall-clock time, in ms since the Unix epoch.
    pub unix_ms: u64,
    /// Seconds since the sample before; `None` for the first.
    pub interval_s: Option<f64>,
    /// One row per OST of the file system, in index order.
    pub osts: Vec<OstRow>,
    /// One row per client, in instance order.
    pub clients: Vec<ClientRow>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct OstRow {
    pub ost: u32,
    /// The OST's values of the moment; `None`: it did not answer.
    pub now: Option<OstNow>,
    pub write_mib_s: Option<f64>,
    pub read_mib_s: Option<f64>,
    /// Read and write RPCs per second.
    pub iops: Option<f64>,
    pub lock_grants_s: Option<f64>,
    pub lock_cancels_s: Option<f64>,
    /// Much slower than its busy peers in this interval (see [`crate::slow`]).
    pub slow: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OstNow {
    pub locks_granted: u64,
    pub rpcs_in_flight: u64,
    pub space_used_percent: Option<f64>,
    pub exports: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientRow {
    pub instance: String,
    pub write_mib_s: Option<f64>,
    pub read_mib_s: Option<f64>,
    pub locks_held: u64,
    pub enqueues_s: Option<f64>,
    pub blocking_callbacks_s: Option<f64>,
}

/// `sample` as shown, its rates from `before` (the sample just before it).
pub fn frame(before: Option<&Sample>, sample: &Sample) -> Frame {
    let interval_s = before.and_then(|b| {
        let ms = sample.unix_ms.checked_sub(b.unix_ms).filter(|&ms| ms > 0)?;
        Some(ms as f64 / 1000.0)
    });
    let pairs = |ost: u32| (interval_s.zip(before.and_then(|b| b.ost(ost))), sample.ost(ost));
    let mut indices: Vec<u32> = (0..sample.ost_count).chain(sample.osts.iter().map(|o| o.ost)).collect();
    indices.sort_unstable();
    indices.dedup();
    let mut activity = Vec::with_capacity(indices.len());
    let mut osts: Vec<OstRow> = indices
        .iter()
        .map(|&ost| {
            let (before, now) = pairs(ost);
            let (row, active) = ost_row(ost, before, now);
            activity.push(active);
            row
        })
        .collect();
    for (row, slow) in osts.iter_mut().zip(slow::slow(&activity)) {
        row.slow = slow;
    }
    let clients = sample
        .clients
        .iter()
        .map(|c| client_row(interval_s.zip(before.and_then(|b| b.client(&c.instance))), c))
        .collect();
    Frame { unix_ms: sample.unix_ms, interval_s, osts, clients }
}

/// Every frame of a run of samples, each from the one before.
pub fn frames(samples: &[Sample]) -> Vec<Frame> {
    let befores = std::iter::once(None).chain(samples.iter().map(Some));
    befores.zip(samples).map(|(before, sample)| frame(before, sample)).collect()
}

/// Counter `now` less counter `before`, per second: `None` if it went down.
fn rate(before: u64, now: u64, seconds: f64) -> Option<f64> {
    now.checked_sub(before).map(|d| d as f64 / seconds)
}

/// An OST's row, and what the slow rule sees of it (nothing when its
/// rates are unknown: an OST not compared is not busy).
fn ost_row(ost: u32, before: Option<(f64, &OstSample)>, now: Option<&OstSample>) -> (OstRow, Activity) {
    let Some(n) = now else { return (OstRow { ost, ..Default::default() }, Activity::default()) };
    let values = OstNow {
        locks_granted: n.locks_granted,
        rpcs_in_flight: n.rpcs_in_flight,
        space_used_percent: n.space_used_percent(),
        exports: n.exports,
    };
    let mut row = OstRow { ost, now: Some(values), ..Default::default() };
    let Some((s, b)) = before else { return (row, Activity::default()) };
    row.write_mib_s = rate(b.bytes_written, n.bytes_written, s).map(|r| r / MIB);
    row.read_mib_s = rate(b.bytes_read, n.bytes_read, s).map(|r| r / MIB);
    row.iops = rate(b.write_rpcs, n.write_rpcs, s).zip(rate(b.read_rpcs, n.read_rpcs, s)).map(|(w, r)| w + r);
    row.lock_grants_s = rate(b.lock_grants, n.lock_grants, s);
    row.lock_cancels_s = rate(b.lock_cancels, n.lock_cancels, s);
    let moved = n.bytes_written.checked_sub(b.bytes_written).zip(n.bytes_read.checked_sub(b.bytes_read));
    let activity = match moved {
        Some((written, read)) => Activity {
            bandwidth_bytes_s: (written + read) as f64 / s,
            bytes_moved: written + read,
            rpcs_in_flight: n.rpcs_in_flight,
        },
        None => Activity::default(),
    };
    (row, activity)
}

fn client_row(before: Option<(f64, &ClientSample)>, c: &ClientSample) -> ClientRow {
    let mut row = ClientRow { instance: c.instance.clone(), locks_held: c.locks_held, ..Default::default() };
    if let Some((s, b)) = before {
        row.write_mib_s = rate(b.bytes_written, c.bytes_written, s).map(|r| r / MIB);
        row.read_mib_s = rate(b.bytes_read, c.bytes_read, s).map(|r| r / MIB);
        row.enqueues_s = rate(b.enqueues, c.enqueues, s);
        row.blocking_callbacks_s = rate(b.blocking_callbacks, c.blocking_callbacks, s);
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Space;

    fn ost(ost: u32, mib_written: u64, rpcs: u64) -> OstSample {
        OstSample {
            ost,
            bytes_written: mib_written << 20,
            write_rpcs: rpcs,
            lock_grants: rpcs,
            space: Some(Space { total_bytes: 100, free_bytes: 40 }),
            ..Default::default()
        }
    }

    fn sample(unix_ms: u64, osts: Vec<OstSample>) -> Sample {
        Sample { unix_ms, ost_count: 3, osts, clients: Vec::new() }
    }

    #[test]
    fn rates_are_differences_over_the_time_between_samples() {
        let first = sample(10_000, vec![ost(0, 100, 100), ost(1, 100, 100)]);
        let second = sample(12_000, vec![ost(0, 300, 300), ost(1, 140, 140)]);
        let f = frame(Some(&first), &second);
        assert_eq!(f.interval_s, Some(2.0));
        assert_eq!(f.osts.len(), 3, "a row for the OST that did not answer too");
        let (a, b, c) = (&f.osts[0], &f.osts[1], &f.osts[2]);
        assert_eq!(
            (a.write_mib_s, a.read_mib_s, a.iops, a.lock_grants_s),
            (Some(100.0), Some(0.0), Some(100.0), Some(100.0))
        );
        assert_eq!((b.write_mib_s, b.iops), (Some(20.0), Some(20.0)));
        assert_eq!(a.now.unwrap().space_used_percent, Some(60.0));
        assert_eq!((c.now, c.write_mib_s, c.slow), (None, None, false));
        assert!(!a.slow && b.slow, "20 MiB/s against 100: below half the median of 60");
    }

    #[test]
    fn the_first_sample_and_counters_that_went_down_have_no_rates() {
        let first = sample(10_000, vec![ost(0, 100, 100)]);
        let f = frame(None, &first);
        assert_eq!((f.interval_s, f.osts[0].write_mib_s, f.osts[0].iops), (None, None, None));
        assert!(f.osts[0].now.is_some(), "values of the moment are shown at once");
        let restarted = sample(11_000, vec![ost(0, 5, 5)]);
        assert_eq!(frame(Some(&first), &restarted).osts[0].write_mib_s, None);
        let same_time = sample(10_000, vec![ost(0, 200, 200)]);
        assert_eq!(frame(Some(&first), &same_time).osts[0].write_mib_s, None);
    }

    #[test]
    fn client_rates_follow_the_client_by_name() {
        let client = |instance: &str, bytes_written, enqueues| ClientSample {
            instance: instance.into(),
            bytes_written,
            enqueues,
            locks_held: 3,
            ..Default::default()
        };
        let mut first = sample(0, Vec::new());
        first.clients = vec![client("ffff000000000001", 0, 10)];
        let mut second = sample(500, Vec::new());
        second.clients = vec![client("ffff000000000001", 1 << 20, 20), client("ffff000000000002", 1 << 20, 1)];
        let f = frame(Some(&first), &second);
        assert_eq!(
            (f.clients[0].write_mib_s, f.clients[0].enqueues_s, f.clients[0].locks_held),
            (Some(2.0), Some(20.0), 3)
        );
        assert_eq!(f.clients[1].write_mib_s, None, "a client new in this sample has no rates yet");
    }
}
