//! The plain-text run: where the samples come from ([`Source`]), how
//! often and how many ([`Settings`]), and the loop that writes every
//! frame to a writer ([`plain`]). The full-screen run is
//! [`crate::terminal`]'s.
//!
//! Live, a sample is taken every interval, on a fixed schedule (the k-th
//! at start + k × interval, so that slow sampling does not drift the
//! times; one that falls behind is taken at once and the schedule goes
//! on from it), recorded if asked, and its frame written and flushed. A
//! replay writes every frame of the recording at once, without waiting.

use crate::collect::Sampler;
use crate::error::TopError;
use crate::record::Recorder;
use crate::sample::Sample;
use crate::state::Live;
use crate::view;
use std::io::Write;
use std::time::{Duration, Instant};

/// The shortest interval taken, in seconds.
pub const INTERVAL_S_MIN: f64 = 0.1;
/// The longest interval taken, in seconds (an hour).
pub const INTERVAL_S_MAX: f64 = 3600.0;

/// Where samples come from.
pub enum Source {
    /// A running cluster, sampled every interval.
    Live(Sampler),
    /// A recording's samples (at least one), shown again.
    Replay(Vec<Sample>),
}

pub struct Settings {
    /// Between two live samples.
    pub interval: Duration,
    /// Stop after this many samples (`-n`); `None`: until stopped.
    pub iterations: Option<u64>,
    /// Every live sample is appended here too.
    pub recorder: Option<Recorder>,
    /// What the screen's title names as the source: the MDS's address,
    /// or the recording's path.
    pub source_name: String,
}

/// `-d SECONDS` as an interval, or why it is refused.
pub fn interval(seconds: f64) -> Result<Duration, String> {
    if !seconds.is_finite() || !(INTERVAL_S_MIN..=INTERVAL_S_MAX).contains(&seconds) {
        return Err(format!(
            "{seconds} seconds: give an interval from {INTERVAL_S_MIN} to {INTERVAL_S_MAX} seconds (e.g. -d 2)"
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Write every frame to `out` as plain text ([`view::plain`]), flushed
/// frame by frame; sampling's notes go to `notes`, one line each.
pub fn run_plain(
    source: Source,
    mut settings: Settings,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<(), TopError> {
    let limit = settings.iterations.unwrap_or(u64::MAX);
    let mut sampler = match source {
        Source::Replay(samples) => {
            let count = usize::try_from(limit).unwrap_or(usize::MAX);
            for frame in crate::rates::frames(&samples).iter().take(count) {
                out.write_all(view::plain::text(frame).as_bytes()).map_err(TopError::Output)?;
            }
            return out.flush().map_err(TopError::Output);
        }
        Source::Live(sampler) => sampler,
    };
    let mut live = Live::default();
    let mut schedule = Schedule::new(settings.interval, Instant::now());
    while live.samples_taken() < limit {
        std::thread::sleep(schedule.until_next(Instant::now()));
        let taken = sampler.take();
        for note in &taken.notes {
            writeln!(notes, "lanefs top: {note}").map_err(TopError::Output)?;
        }
        if let Some(recorder) = &mut settings.recorder {
            recorder.append(&taken.sample)?;
        }
        let frame = live.handle_sample(taken);
        out.write_all(view::plain::text(frame).as_bytes()).map_err(TopError::Output)?;
        out.flush().map_err(TopError::Output)?;
    }
    Ok(())
}

/// When live samples are due: the first at once, then one every interval
/// from the last one's due time, never before now.
pub struct Schedule {
    interval: Duration,
    next: Instant,
}

impl Schedule {
    pub fn new(interval: Duration, now: Instant) -> Schedule {
        Schedule { interval, next: now }
    }

    /// How long until the next sample is due; moves the schedule on.
    pub fn until_next(&mut self, now: Instant) -> Duration {
        let due = self.next.max(now);
        self.next = due + self.interval;
        due - now
    }

    /// Whether a sample is due at `now` (without moving the schedule).
    pub fn is_due(&self, now: Instant) -> bool {
        now >= self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_out_of_bounds_are_refused_with_the_bounds() {
        assert_eq!(interval(2.0), Ok(Duration::from_secs(2)));
        assert_eq!(interval(0.1), Ok(Duration::from_millis(100)));
        for bad in [0.0, -1.0, 0.05, 3601.0, f64::NAN, f64::INFINITY] {
            let e = interval(bad).unwrap_err();
            assert!(e.contains("from 0.1 to 3600 seconds"), "{e}");
        }
    }

    #[test]
    fn the_schedule_keeps_its_times_and_catches_up_without_bursts() {
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let mut schedule = Schedule::new(second, start);
        assert_eq!(schedule.until_next(start), Duration::ZERO);
        // Sampling took 300 ms: the next is due 700 ms later.
        assert_eq!(schedule.until_next(start + Duration::from_millis(300)), Duration::from_millis(700));
        // Far behind: at once, and the one after a whole interval later.
        assert_eq!(schedule.until_next(start + 5 * second), Duration::ZERO);
        assert!(!schedule.is_due(start + 5 * second + Duration::from_millis(999)));
        assert!(schedule.is_due(start + 6 * second));
    }

    #[test]
    fn a_replay_is_written_at_once_up_to_the_limit() {
        let samples: Vec<Sample> = (0..5).map(|i| Sample { unix_ms: i * 60_000, ..Default::default() }).collect();
        let settings =
            Settings { interval: Duration::from_secs(2), iterations: Some(3), recorder: None, source_name: "r".into() };
        let (mut out, mut notes) = (Vec::new(), Vec::new());
        let started = Instant::now();
        run_plain(Source::Replay(samples), settings, &mut out, &mut notes).unwrap();
        assert!(started.elapsed() < Duration::from_secs(1), "no waiting in a replay");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("lanefs top 1970-01-01T").count(), 3, "{text}");
        assert!(text.contains("interval 60.00 s"), "{text}");
    }
}
