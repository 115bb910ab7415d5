//! Recordings: the raw samples of a run, as JSON Lines, to show again
//! later (`--record FILE`, `--replay FILE`).
//!
//! Format: the first line is the header [`Header`]
//! (`{"format":"lanefs-top","version":1}`); each line after it is one
//! [`Sample`] (counters, not rates, with its wall-clock time `unix_ms`),
//! in the order taken. A replay recomputes the rates from the samples, so
//! it shows what the live view showed.
//!
//! A recording is made by [`Recorder::create`] as a new file, mode 0600
//! (counters of a cluster are its owner's business), and never through a
//! link: it is opened with `O_CREAT | O_EXCL` (`create_new`), which fails
//! on any existing name, a symbolic link included, instead of following
//! it or appending to another run. Each sample is written with one
//! `write` call, so a run stopped at any moment leaves whole lines.
//!
//! Reading ([`read`]) checks every line and stops at the first bad one
//! with its line number and the problem: not JSON or not a sample, a
//! sample that breaks its invariants ([`Sample::validate`]), a time
//! before the line above's. Bounds: a line is at most [`LINE_BYTES_MAX`]
//! bytes, a recording at most [`SAMPLES_MAX`] samples.

use crate::sample::Sample;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The longest line read.
pub const LINE_BYTES_MAX: u64 = 64 << 20;
/// The most samples one recording may hold (at the default 2 s, 55 hours).
pub const SAMPLES_MAX: usize = 100_000;
/// What the header's `format` says.
pub const FORMAT: &str = "lanefs-top";
/// The version of the format this program writes and reads.
pub const VERSION: u32 = 1;

/// A recording's first line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub format: String,
    pub version: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{}: the file exists; --record makes a new file (choose another name, or remove it)", .0.display())]
    Exists(PathBuf),
    #[error("cannot read the recording {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the recording {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: line {line}: {problem}", path.display())]
    Line { path: PathBuf, line: usize, problem: String },
    #[error("{}: no samples in it (a recording made with --record has a header line, then one sample per line)", .0.display())]
    Empty(PathBuf),
}

/// Appends samples to a new recording.
pub struct Recorder {
    path: PathBuf,
    file: File,
}

impl Recorder {
    /// Make `path` a new recording (see the module docs), its header written.
    pub fn create(path: &Path) -> Result<Recorder, RecordError> {
        let file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                RecordError::Exists(path.to_path_buf())
            } else {
                RecordError::Write { path: path.to_path_buf(), source: e }
            }
        })?;
        let mut recorder = Recorder { path: path.to_path_buf(), file };
        recorder.write_line(&Header { format: FORMAT.into(), version: VERSION })?;
        Ok(recorder)
    }

    pub fn append(&mut self, sample: &Sample) -> Result<(), RecordError> {
        self.write_line(sample)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_line<T: Serialize>(&mut self, value: &T) -> Result<(), RecordError> {
        let mut line = serde_json::to_vec(value).expect("samples serialize");
        line.push(b'\n');
        self.file.write_all(&line).map_err(|source| RecordError::Write { path: self.path.clone(), source })
    }
}

/// Every sample of the recording at `path` (see the module docs).
pub fn read(path: &Path) -> Result<Vec<Sample>, RecordError> {
    let io = |source| RecordError::Read { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io)?;
    let bad = |line: usize, problem: String| RecordError::Line { path: path.to_path_buf(), line, problem };
    let mut reader = BufReader::new(file);
    let mut samples: Vec<Sample> = Vec::new();
    let mut text = String::new();
    for number in 1.. {
        text.clear();
        let read = reader.by_ref().take(LINE_BYTES_MAX + 1).read_line(&mut text).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => bad(number, "not UTF-8 text".into()),
            _ => io(e),
        })?;
        if read == 0 {
            break;
        }
        if read as u64 > LINE_BYTES_MAX {
            return Err(bad(number, format!("longer than {LINE_BYTES_MAX} bytes")));
        }
        if number == 1 {
            header(&text).map_err(|problem| bad(1, problem))?;
            continue;
        }
        if samples.len() == SAMPLES_MAX {
            return Err(bad(number, format!("more than {SAMPLES_MAX} samples: replay a part (head -n)")));
        }
        let sample = sample(&text, samples.last()).map_err(|problem| bad(number, problem))?;
        samples.push(sample);
    }
    if samples.is_empty() {
        return Err(RecordError::Empty(path.to_path_buf()));
    }
    Ok(samples)
}

fn header(text: &str) -> Result<(), String> {
    let header: Header = serde_json::from_str(text).map_err(|e| {
        format!("not a lanefs top recording (its first line is {{\"format\":\"{FORMAT}\",\"version\":{VERSION}}}): {e}")
    })?;
    if header.format != FORMAT {
        return Err(format!("format {:?}: not a lanefs top recording ({FORMAT:?})", header.format));
    }
    if header.version != VERSION {
        return Err(format!("version {}: this lanefs top reads version {VERSION}", header.version));
    }
    Ok(())
}

fn sample(text: &str, before: Option<&Sample>) -> Result<Sample, String> {
    let sample: Sample = serde_json::from_str(text).map_err(|e| format!("not a sample: {e}"))?;
    sample.validate()?;
    if let Some(before) = before.filter(|b| b.unix_ms > sample.unix_ms) {
        return Err(format!("time {} ms is before the line above's {} ms", sample.unix_ms, before.unix_ms));
    }
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{ClientSample, OstSample, Space};
    use std::os::unix::fs::PermissionsExt;

    fn samples() -> Vec<Sample> {
        let ost = |ost, mib: u64| OstSample {
            ost,
            bytes_written: mib << 20,
            write_rpcs: mib,
            rpcs_in_flight: 2,
            exports: 1,
            space: Some(Space { total_bytes: 10 << 30, free_bytes: 4 << 30 }),
            ..Default::default()
        };
        let client = |mib: u64| ClientSample {
            instance: "ffff000000000001".into(),
            bytes_written: mib << 20,
            ..Default::default()
        };
        (0..3u64)
            .map(|i| Sample {
                unix_ms: 1_700_000_000_000 + i * 2000,
                ost_count: 2,
                osts: vec![ost(0, 100 * i), ost(1, 90 * i)],
                clients: vec![client(190 * i)],
            })
            .collect()
    }

    #[test]
    fn a_recording_replays_as_it_was_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.jsonl");
        let mut recorder = Recorder::create(&path).unwrap();
        for sample in samples() {
            recorder.append(&sample).unwrap();
        }
        drop(recorder);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let replayed = read(&path).unwrap();
        assert_eq!(replayed, samples());
        assert_eq!(crate::rates::frames(&replayed), crate::rates::frames(&samples()));
    }

    #[test]
    fn an_existing_file_or_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "keep me").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(Recorder::create(&link), Err(RecordError::Exists(_))));
        assert!(matches!(Recorder::create(&target), Err(RecordError::Exists(_))));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    }

    /// A recording with `line` put in place of line `number`.
    fn with_line(dir: &Path, number: usize, line: &str) -> PathBuf {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("bad-{made}.jsonl"));
        let mut recorder = Recorder::create(&path).unwrap();
        for sample in samples() {
            recorder.append(&sample).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = text.lines().collect();
        lines[number - 1] = line;
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path
    }

    #[test]
    fn a_bad_line_is_named_with_its_problem() {
        let dir = tempfile::tempdir().unwrap();
        let error = |number, line: &str| read(&with_line(dir.path(), number, line)).unwrap_err().to_string();
        let e = error(3, "{\"unix_ms\": 5, \"osts\": oops");
        assert!(e.contains("line 3: not a sample"), "{e}");
        let e = error(1, "{\"unix_ms\": 5}");
        assert!(e.contains("line 1: not a lanefs top recording"), "{e}");
        let e = error(4, r#"{"unix_ms":1,"ost_count":0,"osts":[],"clients":[]}"#);
        assert!(e.contains("line 4: time 1 ms is before the line above's"), "{e}");
        let e = error(2, r#"{"unix_ms":1,"ost_count":2,"osts":[{"ost":1},{"ost":0}],"clients":[]}"#);
        assert!(e.contains("line 2: not a sample"), "missing fields: {e}");
        let e = error(1, r#"{"format":"lanefs-top","version":9}"#);
        assert!(e.contains("line 1: version 9"), "{e}");
    }

    #[test]
    fn a_sample_that_breaks_its_invariants_is_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut bad = samples()[0].clone();
        bad.osts.reverse();
        let path = with_line(dir.path(), 2, &serde_json::to_string(&bad).unwrap());
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("line 2: OST 0 after OST 1"), "{e}");
    }

    #[test]
    fn a_header_alone_is_no_recording() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.jsonl");
        drop(Recorder::create(&path).unwrap());
        assert!(matches!(read(&path), Err(RecordError::Empty(_))));
        assert!(matches!(read(&dir.path().join("absent")), Err(RecordError::Read { .. })));
    }
}
