//! The full-screen run: ratatui on crossterm, one event loop per source.
//!
//! The terminal is put back (raw mode off, the main screen back) however
//! the run ends: by `q`, `Esc` or Ctrl-C (raw mode delivers it as a key),
//! by an error (a guard restores it as it is dropped), or by a panic
//! (ratatui's hook restores it before the message is printed).
//!
//! Live, samples are taken on a thread of their own, so the keys answer
//! at once even while an OSS is slow to; the loop records each sample as
//! it arrives and draws its frame. With `-n N` the run ends after the
//! N-th frame is drawn, as top's does.
//!
//! A replay plays at the recorded pace (a gap longer than
//! [`REPLAY_WAIT_MAX`](crate::state::REPLAY_WAIT_MAX) is shortened to
//! it); space pauses and plays on, the arrow keys (or `p`/`n`) step one
//! sample back or on and pause. It stays on its last frame until `q`.

use crate::collect::{Sampler, Taken};
use crate::error::TopError;
use crate::run::{Schedule, Settings, Source};
use crate::sample::Sample;
use crate::state::{Live, Replay};
use crate::view::screen::{self, Screen};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::DefaultTerminal;
use std::sync::mpsc::{self, TryRecvError};
use std::time::{Duration, Instant};

/// How long the loop waits for a key before it looks for a new sample.
const POLL: Duration = Duration::from_millis(50);
/// How long a paused replay waits for a key before it looks again.
const IDLE: Duration = Duration::from_secs(1);

/// Show `source` on the full screen until the user quits (or `-n`).
pub fn run_terminal(source: Source, settings: Settings) -> Result<(), TopError> {
    let _restore = Restore;
    let mut terminal = ratatui::try_init().map_err(TopError::Terminal)?;
    match source {
        Source::Live(sampler) => live(&mut terminal, sampler, settings),
        Source::Replay(samples) => replay(&mut terminal, samples, &settings),
    }
}

/// Puts the terminal back as it is dropped.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = ratatui::try_restore();
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    Quit,
    Pause,
    Step {
        forward: bool,
    },
    /// A resize or a key of no use: draw again.
    Redraw,
}

/// The next input within `timeout`, if any.
fn input(timeout: Duration) -> Result<Option<Input>, TopError> {
    if !event::poll(timeout).map_err(TopError::Terminal)? {
        return Ok(None);
    }
    let Event::Key(key) = event::read().map_err(TopError::Terminal)? else { return Ok(Some(Input::Redraw)) };
    if key.kind != KeyEventKind::Press {
        return Ok(Some(Input::Redraw));
    }
    Ok(Some(match key.code {
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Input::Quit,
        KeyCode::Char('q') | KeyCode::Esc => Input::Quit,
        KeyCode::Char(' ') => Input::Pause,
        KeyCode::Right | KeyCode::Char('n') => Input::Step { forward: true },
        KeyCode::Left | KeyCode::Char('p') => Input::Step { forward: false },
        _ => Input::Redraw,
    }))
}

fn live(terminal: &mut DefaultTerminal, sampler: Sampler, mut settings: Settings) -> Result<(), TopError> {
    let limit = settings.iterations.unwrap_or(u64::MAX);
    let (sender, samples) = mpsc::sync_channel::<Taken>(1);
    let interval = settings.interval;
    std::thread::Builder::new()
        .name("lanefs-top-sampler".into())
        .spawn(move || sample_every(sampler, interval, limit, sender))
        .map_err(TopError::Terminal)?;
    let mut state = Live::default();
    let mut dirty = true;
    loop {
        if dirty {
            let status = state.last_note().unwrap_or_default();
            let screen = Screen { source: &settings.source_name, frame: state.frame(), status, keys: "q quit" };
            terminal.draw(|f| screen::draw(f, &screen)).map_err(TopError::Terminal)?;
            dirty = false;
        }
        if state.samples_taken() >= limit {
            return Ok(());
        }
        match input(POLL)? {
            Some(Input::Quit) => return Ok(()),
            Some(_) => dirty = true,
            None => {}
        }
        match samples.try_recv() {
            Ok(taken) => {
                if let Some(recorder) = &mut settings.recorder {
                    recorder.append(&taken.sample)?;
                }
                state.handle_sample(taken);
                dirty = true;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => return Ok(()),
        }
    }
}

/// The sampling thread: a sample every interval until `limit`, or until
/// the loop has gone.
fn sample_every(mut sampler: Sampler, interval: Duration, limit: u64, sender: mpsc::SyncSender<Taken>) {
    let mut schedule = Schedule::new(interval, Instant::now());
    for _ in 0..limit {
        std::thread::sleep(schedule.until_next(Instant::now()));
        if sender.send(sampler.take()).is_err() {
            return;
        }
    }
}

fn replay(terminal: &mut DefaultTerminal, samples: Vec<Sample>, settings: &Settings) -> Result<(), TopError> {
    let count =
        settings.iterations.map_or(samples.len(), |n| samples.len().min(usize::try_from(n).unwrap_or(usize::MAX)));
    let mut replay = Replay::new(&samples[..count.max(1)]);
    let mut next_at = replay.wait().map(|wait| Instant::now() + wait);
    loop {
        let (shown, of) = replay.position();
        let state = match (replay.is_paused(), replay.at_end()) {
            (_, true) => " (end of the recording)",
            (true, false) => " (paused)",
            (false, false) => "",
        };
        let status = format!("sample {shown} of {of}{state}");
        let keys = "q quit  space pause/play  \u{2190}/\u{2192} or p/n one sample back/on";
        let screen = Screen { source: &settings.source_name, frame: Some(replay.frame()), status: &status, keys };
        terminal.draw(|f| screen::draw(f, &screen)).map_err(TopError::Terminal)?;
        let now = Instant::now();
        let timeout = next_at.map_or(IDLE, |at| at.saturating_duration_since(now));
        match input(timeout)? {
            Some(Input::Quit) => return Ok(()),
            Some(Input::Pause) => replay.toggle_pause(),
            Some(Input::Step { forward }) => replay.step(forward),
            Some(Input::Redraw) => continue,
            None if next_at.is_some_and(|at| Instant::now() >= at) => replay.advance(),
            None => continue,
        }
        next_at = replay.wait().map(|wait| Instant::now() + wait);
    }
}
