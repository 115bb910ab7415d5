//! What the views show, kept apart from how samples arrive and how the
//! screen is drawn (no I/O, no clock here):
//!
//! - [`Live`]: the last sample and its frame, and the notes of the
//!   samples so far (the last [`NOTES_MAX`], each with its sample's
//!   time); fed one sample at a time.
//! - [`Replay`]: a recording's frames and which one is shown, playing at
//!   the recorded pace or paused and stepped by the user.

use crate::collect::Taken;
use crate::rates::{self, Frame};
use crate::sample::Sample;
use std::collections::VecDeque;
use std::time::Duration;

/// Notes kept for the status line.
pub const NOTES_MAX: usize = 8;

#[derive(Default)]
pub struct Live {
    before: Option<Sample>,
    frame: Option<Frame>,
    notes: VecDeque<String>,
    samples_taken: u64,
}

impl Live {
    /// Take in the next sample; returns its frame.
    pub fn handle_sample(&mut self, taken: Taken) -> &Frame {
        let frame = rates::frame(self.before.as_ref(), &taken.sample);
        let time = crate::view::utc(taken.sample.unix_ms);
        for note in taken.notes {
            if self.notes.len() == NOTES_MAX {
                self.notes.pop_front();
            }
            self.notes.push_back(format!("{time}  {note}"));
        }
        self.before = Some(taken.sample);
        self.samples_taken += 1;
        self.frame = Some(frame);
        self.check_invariants();
        self.frame.as_ref().expect("just set")
    }

    pub fn frame(&self) -> Option<&Frame> {
        self.frame.as_ref()
    }

    pub fn samples_taken(&self) -> u64 {
        self.samples_taken
    }

    /// The newest note (with its sample's time), if any sample had one.
    pub fn last_note(&self) -> Option<&str> {
        self.notes.back().map(String::as_str)
    }

    pub fn check_invariants(&self) {
        assert!(self.notes.len() <= NOTES_MAX);
        assert_eq!(self.before.is_some(), self.samples_taken > 0);
        assert_eq!(self.frame.is_some(), self.samples_taken > 0);
        if let (Some(before), Some(frame)) = (&self.before, &self.frame) {
            assert_eq!(before.unix_ms, frame.unix_ms, "the frame shown is the last sample's");
        }
    }
}

/// A recording being shown.
pub struct Replay {
    frames: Vec<Frame>,
    shown: usize,
    paused: bool,
}

/// The longest wait between two frames of a replay at the recorded pace
/// (a recording may hold a long gap, e.g. a laptop asleep).
pub const REPLAY_WAIT_MAX: Duration = Duration::from_secs(10);

impl Replay {
    /// The frames of `samples` (at least one), the first shown, playing.
    pub fn new(samples: &[Sample]) -> Replay {
        assert!(!samples.is_empty(), "a recording has samples");
        let replay = Replay { frames: rates::frames(samples), shown: 0, paused: false };
        replay.check_invariants();
        replay
    }

    pub fn frame(&self) -> &Frame {
        &self.frames[self.shown]
    }

    /// `(shown, count)`: the frame shown (from 1) of how many.
    pub fn position(&self) -> (usize, usize) {
        (self.shown + 1, self.frames.len())
    }

    pub fn is_paused(&self) -> bool {
        self.paused
    }

    pub fn at_end(&self) -> bool {
        self.shown + 1 == self.frames.len()
    }

    /// How long the frame shown stays before the next, at the recorded
    /// pace; `None` when paused or at the end.
    pub fn wait(&self) -> Option<Duration> {
        if self.paused || self.at_end() {
            return None;
        }
        let ms = self.frames[self.shown + 1].unix_ms.saturating_sub(self.frames[self.shown].unix_ms);
        Some(Duration::from_millis(ms).min(REPLAY_WAIT_MAX))
    }

    /// On to the next frame (no change at the end).
    pub fn advance(&mut self) {
        self.shown = (self.shown + 1).min(self.frames.len() - 1);
        self.check_invariants();
    }

    /// Pause (or play on), and step by hand.
    pub fn toggle_pause(&mut self) {
        self.paused = !self.paused;
    }

    pub fn step(&mut self, forward: bool) {
        self.paused = true;
        self.shown = if forward { (self.shown + 1).min(self.frames.len() - 1) } else { self.shown.saturating_sub(1) };
        self.check_invariants();
    }

    pub fn check_invariants(&self) {
        assert!(!self.frames.is_empty());
        assert!(self.shown < self.frames.len());
        assert!(self.frames.windows(2).all(|w| w[0].unix_ms <= w[1].unix_ms), "a recording's frames in time order");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(unix_ms: u64) -> Sample {
        Sample { unix_ms, ..Default::default() }
    }

    #[test]
    fn live_keeps_the_last_frame_and_the_newest_notes() {
        let mut live = Live::default();
        for i in 0..(NOTES_MAX as u64 + 3) {
            let frame = live.handle_sample(Taken { sample: sample(1000 * i), notes: vec![format!("note {i}")] });
            assert_eq!(frame.interval_s.is_some(), i > 0);
        }
        assert_eq!(live.last_note(), Some("1970-01-01T00:00:10Z  note 10"));
        assert_eq!(live.samples_taken(), NOTES_MAX as u64 + 3);
    }

    #[test]
    fn a_replay_plays_at_the_recorded_pace_and_steps_by_hand() {
        let mut replay = Replay::new(&[sample(0), sample(1500), sample(60_000)]);
        assert_eq!(replay.wait(), Some(Duration::from_millis(1500)));
        replay.advance();
        assert_eq!(replay.wait(), Some(REPLAY_WAIT_MAX), "a long gap is shortened");
        replay.step(false);
        assert!(replay.is_paused() && replay.wait().is_none());
        assert_eq!(replay.position(), (1, 3));
        replay.step(false);
        assert_eq!(replay.position(), (1, 3));
        replay.step(true);
        replay.step(true);
        replay.step(true);
        assert!(replay.at_end());
        replay.toggle_pause();
        assert_eq!(replay.wait(), None, "nothing after the end");
    }
}
