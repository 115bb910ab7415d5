//! A client's lock traffic and OST bytes in time bins, for a run's time
//! series (`lanefs ior --timeseries`, real and simulated alike).
//!
//! The client counts each event into the bin now filling; the bin closes
//! at the first input the client takes at or after its end
//! ([`Timeline::advance`], called on entry to every input that carries
//! the time). Every event a client counts happens inside an input, at
//! that input's time, so an event lands in the bin of its own time
//! exactly, whichever world drives the client. Bins in which nothing
//! happened are left out of [`Timeline::take`].
//!
//! What is counted, per bin: lock enqueues sent (lockahead requests
//! among them, also counted apart), grants received (a reply that grants,
//! or a completion), blocking callbacks received, cancels sent, and the
//! bytes of each write an OST acknowledged and of each read it answered,
//! by OST, when the reply arrives.
//!
//! Bounded: at most [`TIMELINE_BINS_MAX`] bins; events after the last are
//! not binned, and [`Timeline::truncated`] says so.
//!
//! Invariants ([`Timeline::check_invariants`]): closed bins are in order
//! of their index, each before the one filling; the bin filling ends one
//! interval after it begins; no bin names an OST twice.

use serde::{Deserialize, Serialize};

use crate::units::{Duration, Instant, OstIndex};

/// The most bins one timeline keeps: at the default 0.1 s, more than a
/// day of a run.
pub const TIMELINE_BINS_MAX: u64 = 1 << 20;

/// What one client counted in one bin.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineBin {
    pub enqueues: u64,
    pub lockahead_requests: u64,
    pub grants: u64,
    pub blocking_callbacks: u64,
    pub cancels: u64,
    /// Bytes of writes acknowledged, by OST (each OST once).
    pub ost_write_bytes: Vec<(OstIndex, u64)>,
    /// Bytes of reads answered, by OST (each OST once).
    pub ost_read_bytes: Vec<(OstIndex, u64)>,
}

/// One count of a bin as a time series holds it: the group's name, its
/// unit (`bytes` or `events`), what its members are (`client` or `ost`),
/// the member's index and the count.
pub type SeriesCount = (&'static str, &'static str, &'static str, u32, u64);

/// Every group a client's bins make: its name, unit and what its members
/// are ([`TimelineBin::series_counts`] names them so).
pub const SERIES_GROUPS: [(&str, &str, &str); 7] = [
    ("client_enqueues", "events", "client"),
    ("client_lockahead_requests", "events", "client"),
    ("client_grants", "events", "client"),
    ("client_blocking_callbacks", "events", "client"),
    ("client_cancels", "events", "client"),
    ("ost_write_bytes", "bytes", "ost"),
    ("ost_read_bytes", "bytes", "ost"),
];

impl TimelineBin {
    /// This bin's counts as the groups of a run's time series name them,
    /// `client` being the client's index in the run: `client_enqueues`,
    /// `client_lockahead_requests`, `client_grants`,
    /// `client_blocking_callbacks`, `client_cancels` (events, per client),
    /// `ost_write_bytes`, `ost_read_bytes` (bytes, per OST).
    pub fn series_counts(&self, client: u32) -> impl Iterator<Item = SeriesCount> + '_ {
        let [enqueues, lockahead, grants, callbacks, cancels, written, read] = SERIES_GROUPS;
        let events = [
            (enqueues, self.enqueues),
            (lockahead, self.lockahead_requests),
            (grants, self.grants),
            (callbacks, self.blocking_callbacks),
            (cancels, self.cancels),
        ];
        let events = events.into_iter().map(move |((name, unit, per), c)| (name, unit, per, client, c));
        events.chain(by_ost(written, &self.ost_write_bytes)).chain(by_ost(read, &self.ost_read_bytes))
    }

    fn is_empty(&self) -> bool {
        *self == TimelineBin::default()
    }

    fn add_bytes(by_ost: &mut Vec<(OstIndex, u64)>, ost: OstIndex, bytes: u64) {
        match by_ost.iter_mut().find(|(o, _)| *o == ost) {
            Some((_, total)) => *total = total.saturating_add(bytes),
            None => by_ost.push((ost, bytes)),
        }
    }
}

/// A group's counts by OST, as series counts.
fn by_ost<'a>(
    (name, unit, per): (&'static str, &'static str, &'static str),
    counts: &'a [(OstIndex, u64)],
) -> impl Iterator<Item = SeriesCount> + 'a {
    counts.iter().map(move |&(ost, bytes)| (name, unit, per, ost.0, bytes))
}

/// The kinds of event a timeline counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimelineEvent {
    Enqueue { lockahead: bool },
    Grant,
    BlockingCallback,
    Cancel,
    Written { ost: OstIndex, bytes: u64 },
    Read { ost: OstIndex, bytes: u64 },
}

/// One client's bins since [`Timeline::new`].
#[derive(Clone, Debug)]
pub struct Timeline {
    interval: Duration,
    /// The start of bin 0 in the core's nanoseconds: before the core's
    /// time zero when negative (a run that began before its client).
    origin_ns: i128,
    /// The index of the bin filling.
    bin: u64,
    /// When the bin filling ends.
    bin_end: Instant,
    filling: TimelineBin,
    /// Closed bins that counted something, by index.
    closed: Vec<(u64, TimelineBin)>,
    truncated: bool,
}

impl Timeline {
    /// Bins of `interval` from `origin_ns` on (the core's nanoseconds,
    /// negative for an origin before its time zero). An interval of zero
    /// is taken as one nanosecond.
    pub fn new(origin_ns: i128, interval: Duration) -> Timeline {
        let interval = Duration(interval.as_ns().max(1));
        Timeline {
            interval,
            origin_ns,
            bin: 0,
            bin_end: end_of(origin_ns, interval, 0),
            filling: TimelineBin::default(),
            closed: Vec::new(),
            truncated: false,
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Whether events came after the last bin this timeline may keep.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Close the bin filling if `now` is at or past its end, and start the
    /// bin that holds `now`.
    pub fn advance(&mut self, now: Instant) {
        if now < self.bin_end {
            return;
        }
        let filled = std::mem::take(&mut self.filling);
        if !filled.is_empty() && self.bin < TIMELINE_BINS_MAX {
            self.closed.push((self.bin, filled));
        }
        let since = (i128::from(now.0) - self.origin_ns).max(0);
        let bin = u64::try_from(since / i128::from(self.interval.as_ns())).unwrap_or(u64::MAX - 1);
        self.bin = bin;
        self.bin_end = end_of(self.origin_ns, self.interval, bin);
    }

    /// Count `event` in the bin filling.
    pub fn note(&mut self, event: TimelineEvent) {
        if self.bin >= TIMELINE_BINS_MAX {
            self.truncated = true;
            return;
        }
        let b = &mut self.filling;
        match event {
            TimelineEvent::Enqueue { lockahead } => {
                b.enqueues += 1;
                b.lockahead_requests += u64::from(lockahead);
            }
            TimelineEvent::Grant => b.grants += 1,
            TimelineEvent::BlockingCallback => b.blocking_callbacks += 1,
            TimelineEvent::Cancel => b.cancels += 1,
            TimelineEvent::Written { ost, bytes } => TimelineBin::add_bytes(&mut b.ost_write_bytes, ost, bytes),
            TimelineEvent::Read { ost, bytes } => TimelineBin::add_bytes(&mut b.ost_read_bytes, ost, bytes),
        }
    }

    /// Every bin that counted something, by index, the one filling
    /// included; the timeline goes on from an empty bin.
    pub fn take(&mut self) -> Vec<(u64, TimelineBin)> {
        let mut bins = std::mem::take(&mut self.closed);
        let filling = std::mem::take(&mut self.filling);
        if !filling.is_empty() && self.bin < TIMELINE_BINS_MAX {
            bins.push((self.bin, filling));
        }
        bins
    }

    pub fn check_invariants(&self) {
        assert!(self.interval.as_ns() > 0, "a bin lasts");
        assert_eq!(
            self.bin_end,
            end_of(self.origin_ns, self.interval, self.bin),
            "the bin filling ends one interval after it begins"
        );
        let mut last = None;
        for (i, bin) in &self.closed {
            assert!(last.is_none_or(|l| l < *i), "closed bins in order");
            assert!(*i < self.bin, "closed bins come before the one filling");
            last = Some(*i);
            check_bin(bin);
        }
        check_bin(&self.filling);
    }
}

/// When bin `bin` ends, in the core's time (at its zero if before it).
fn end_of(origin_ns: i128, interval: Duration, bin: u64) -> Instant {
    let end = origin_ns + i128::from(interval.as_ns()) * (i128::from(bin) + 1);
    Instant(u64::try_from(end.max(0)).unwrap_or(u64::MAX))
}

fn check_bin(bin: &TimelineBin) {
    assert!(bin.lockahead_requests <= bin.enqueues, "lockahead requests are enqueues");
    for by_ost in [&bin.ost_write_bytes, &bin.ost_read_bytes] {
        for (i, (ost, _)) in by_ost.iter().enumerate() {
            assert!(by_ost[..i].iter().all(|(o, _)| o != ost), "an OST once per bin");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn events_land_in_the_bin_of_their_time() {
        let mut t = Timeline::new(i128::from(5 * MS), Duration(10 * MS));
        t.advance(Instant(6 * MS));
        t.note(TimelineEvent::Enqueue { lockahead: true });
        t.note(TimelineEvent::Written { ost: OstIndex(1), bytes: 4096 });
        t.note(TimelineEvent::Written { ost: OstIndex(1), bytes: 4096 });
        // Nothing happens in bins 1 and 2; bin 3 is [35 ms, 45 ms).
        t.advance(Instant(35 * MS));
        t.note(TimelineEvent::Grant);
        t.check_invariants();
        t.advance(Instant(44 * MS));
        t.note(TimelineEvent::Cancel);
        let bins = t.take();
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[0].0, 0);
        assert_eq!((bins[0].1.enqueues, bins[0].1.lockahead_requests), (1, 1));
        assert_eq!(bins[0].1.ost_write_bytes, vec![(OstIndex(1), 8192)]);
        assert_eq!(bins[1].0, 3);
        assert_eq!((bins[1].1.grants, bins[1].1.cancels), (1, 1));
        assert!(t.take().is_empty(), "taken once");
    }

    #[test]
    fn a_bins_counts_name_the_groups_of_the_table_and_no_others() {
        let bin = TimelineBin {
            enqueues: 2,
            lockahead_requests: 1,
            grants: 2,
            blocking_callbacks: 1,
            cancels: 1,
            ost_write_bytes: vec![(OstIndex(3), 4096)],
            ost_read_bytes: vec![(OstIndex(0), 8192)],
        };
        let counts: Vec<SeriesCount> = bin.series_counts(5).collect();
        let named: Vec<(&str, &str, &str)> = counts.iter().map(|&(n, u, p, _, _)| (n, u, p)).collect();
        assert_eq!(named, SERIES_GROUPS.to_vec(), "each group once, in the table's order");
        assert_eq!(counts[0].3, 5, "client groups by the client's index");
        assert_eq!((counts[5].3, counts[5].4), (3, 4096), "OST groups by the OST's");
    }

    #[test]
    fn events_past_the_last_bin_are_not_kept_and_say_so() {
        let mut t = Timeline::new(0, Duration(1));
        t.advance(Instant(TIMELINE_BINS_MAX + 3));
        t.note(TimelineEvent::BlockingCallback);
        assert!(t.truncated());
        assert!(t.take().is_empty());
    }

    #[test]
    fn a_run_that_began_before_the_client_counts_from_its_own_start() {
        // The run began 25 ms before the client's time zero: the client's
        // 6 ms is the run's 31 ms, in bin 3 of 10 ms.
        let mut t = Timeline::new(-i128::from(25 * MS), Duration(10 * MS));
        t.check_invariants();
        t.advance(Instant(6 * MS));
        t.note(TimelineEvent::Grant);
        t.check_invariants();
        assert_eq!(t.take()[0].0, 3);
    }
}
