//! The end-of-run checks: the per-byte oracle and the loss reports.
//!
//! Kept apart from the protocol and from the driver: it sees only the
//! [`History`] and the OSTs of each file. What it requires:
//!
//! * Reads. Every completed read returns, for each byte, the value of a
//!   write that was not yet surely overwritten when the read began, or of a
//!   write concurrent with the read, or zero if no sure write had ended
//!   before it. A write *surely overwrites* an older one when it began
//!   after that one ended, ended before the read began, and is *sure*: it
//!   completed and was not lost. The fresh clients' final reads are
//!   checked the same way, after everything else.
//! * Losses. A completed write may be lost only if it is *lossy*: its
//!   writer crashed, or was told of a loss on that file after the write
//!   began (a failed fsync or close of the file, or a `DataLost` event for
//!   one of its OSTs: a loss after the program closed the file has no
//!   other way to be reported, as on Lustre). And never once fsynced: a
//!   write followed by a successful fsync of its file by its writer, with
//!   no loss reported to that writer in between, is sure, crash or not.
//!   A lost sure write shows as a final read that does not hold it.
//! * Only real losses. Every loss report and every failed operation needs
//!   a fault that touched the client and an OST of the file (or the OST
//!   named) before it: a quiet run has none at all.
//!
//! Failed writes (and those a crash interrupted) may have left some of
//! their bytes: they are possible values from when they began, and surely
//! overwrite nothing. Truncates are writes of zeros past the new end.
//!
//! Cost: each read is cut into segments at the edges of the writes that
//! overlap it, so the candidates are found once per segment, and each byte
//! costs a hash per candidate (usually one or two).

use crate::faults::Fault;
use crate::history::{History, ReadRecord, Scope, Tick, WriteRecord, WriteState};
use lanefs_core::client::ClientError;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What the oracle knows of each write, beyond its record.
#[derive(Clone, Copy, Debug, Default)]
struct Judged {
    /// Completed, and not possibly lost: it surely overwrites what it covers.
    sure: bool,
    synced: bool,
}

/// Checks a finished run (see the module docs).
pub struct Oracle<'a> {
    history: &'a History,
    /// The OSTs of each file.
    osts_of_file: &'a [Vec<u32>],
    judged: Vec<Judged>,
    /// Write indices by file.
    by_file: Vec<Vec<usize>>,
}

impl<'a> Oracle<'a> {
    pub fn new(history: &'a History, osts_of_file: &'a [Vec<u32>]) -> Oracle<'a> {
        let mut by_file = vec![Vec::new(); osts_of_file.len()];
        for (i, w) in history.writes.iter().enumerate() {
            by_file[w.file].push(i);
        }
        let mut oracle = Oracle { history, osts_of_file, judged: Vec::new(), by_file };
        oracle.judged = history.writes.iter().map(|w| oracle.judge(w)).collect();
        oracle
    }

    /// Every check; the first violation found.
    pub fn check(&self) -> Result<(), String> {
        self.check_errors()?;
        self.check_reports()?;
        for read in &self.history.reads {
            self.check_read(read)?;
        }
        Ok(())
    }

    /// Ticks of the loss reports to `client` that concern `file`.
    fn reports_on(&self, client: u32, file: usize) -> impl Iterator<Item = Tick> + '_ {
        let osts = &self.osts_of_file[file];
        self.history
            .reports
            .iter()
            .filter(move |r| {
                r.client == client
                    && match r.scope {
                        Scope::File(f) => f == file,
                        Scope::Ost(o) => osts.contains(&o),
                    }
            })
            .map(|r| r.at)
    }

    fn judge(&self, w: &WriteRecord) -> Judged {
        if w.state != WriteState::Done {
            return Judged::default();
        }
        let fsync = self
            .history
            .fsyncs
            .iter()
            .filter(|f| f.client == w.client && f.file == w.file && f.ok && f.start > w.end)
            .min_by_key(|f| f.start);
        let synced = fsync.is_some_and(|f| !self.reports_on(w.client, w.file).any(|t| t >= w.start && t <= f.end));
        let reported = self.reports_on(w.client, w.file).any(|t| t >= w.start);
        let crashed = self.history.crashed.contains_key(&w.client);
        Judged { sure: synced || !(reported || crashed), synced }
    }

    /// A fault touching `client` and one of `osts` before `at`.
    fn fault_touching(&self, client: u32, osts: &[u32], at: Tick) -> Option<Fault> {
        self.history
            .faults
            .iter()
            .filter(|f| f.at <= at)
            .map(|f| f.fault)
            .filter(|f| f.touches_data())
            .find(|f| f.client().is_none_or(|c| c == client) && f.ost().is_none_or(|o| osts.contains(&o)))
    }

    fn check_errors(&self) -> Result<(), String> {
        for e in &self.history.errors {
            let expected =
                matches!(e.error, ClientError::WriteLost { .. } | ClientError::Io { .. } | ClientError::NoGroupLock(_));
            if !expected {
                return Err(format!(
                    "c{} {} of file {} failed with an error no fault explains: {}",
                    e.client, e.action, e.file, e.error
                ));
            }
            if self.fault_touching(e.client, &self.osts_of_file[e.file], e.at).is_none() {
                return Err(format!(
                    "c{} {} of file {} failed (tick {}) with no fault touching it or the file's OSTs {:?} before: {}",
                    e.client, e.action, e.file, e.at, self.osts_of_file[e.file], e.error
                ));
            }
        }
        Ok(())
    }

    fn check_reports(&self) -> Result<(), String> {
        for r in &self.history.reports {
            let osts = match r.scope {
                Scope::File(f) => self.osts_of_file[f].clone(),
                Scope::Ost(o) => vec![o],
            };
            if self.fault_touching(r.client, &osts, r.at).is_none() {
                return Err(format!(
                    "c{} was told of a loss (tick {}, {}) with no fault touching it or OSTs {osts:?} before",
                    r.client, r.at, r.what
                ));
            }
        }
        Ok(())
    }

    fn check_read(&self, r: &ReadRecord) -> Result<(), String> {
        let len = r.data.len() as u64;
        let writes: Vec<usize> = self.by_file[r.file]
            .iter()
            .copied()
            .filter(|&i| {
                let w = &self.history.writes[i];
                w.overlaps(r.offset, len) && w.start < r.end
            })
            .collect();
        let mut cuts = vec![r.offset, r.offset + len];
        for &i in &writes {
            let w = &self.history.writes[i];
            cuts.push(w.offset.clamp(r.offset, r.offset + len));
            cuts.push((w.offset + w.len).clamp(r.offset, r.offset + len));
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut here: Vec<usize> = Vec::new();
        let mut candidates: Vec<usize> = Vec::new();
        for seg in cuts.windows(2) {
            let (lo, hi) = (seg[0], seg[1]);
            here.clear();
            here.extend(writes.iter().copied().filter(|&i| self.history.writes[i].covers(lo, hi)));
            // The latest start of a sure write that ended before the read
            // began: whatever ended before it is surely overwritten.
            let sure_before = |i: &usize| self.judged[*i].sure && self.history.writes[*i].end < r.start;
            let newest = here.iter().filter(|i| sure_before(i)).map(|&i| self.history.writes[i].start).max();
            candidates.clear();
            candidates.extend(here.iter().copied().filter(|&i| newest.is_none_or(|m| self.history.writes[i].end >= m)));
            let zero_ok = newest.is_none();
            for b in lo..hi {
                let v = r.data[(b - r.offset) as usize];
                let ok = (zero_ok && v == 0) || candidates.iter().any(|&i| self.history.writes[i].value(b) == v);
                if !ok {
                    return Err(self.explain(r, b, v, &candidates, zero_ok));
                }
            }
        }
        Ok(())
    }

    /// Why byte `b` of read `r` is wrong, for the failure line.
    fn explain(&self, r: &ReadRecord, b: u64, v: u8, candidates: &[usize], zero_ok: bool) -> String {
        let who = if r.fresh { "the final read" } else { "a read" };
        let at = self.history.time_of(r.start).map_or(String::new(), |t| format!(" at {t}"));
        let mut s = format!(
            "{who} by c{} of file {} [{}, +{}) (ticks {}..{}{at}) found {v:#04x} at offset {b}; expected ",
            r.client,
            r.file,
            r.offset,
            r.data.len(),
            r.start,
            r.end
        );
        let names: Vec<String> = candidates.iter().map(|&i| self.describe(i)).collect();
        let _ = write!(s, "{}{}", names.join(" or "), if zero_ok { " or zero" } else { "" });
        let source: Vec<String> = self.by_file[r.file]
            .iter()
            .copied()
            .filter(|&i| {
                let w = &self.history.writes[i];
                w.covers(b, b + 1) && w.value(b) == v
            })
            .map(|i| self.describe(i))
            .collect();
        match (source.is_empty(), v) {
            (true, 0) => s.push_str("; zero: the newer writes were lost"),
            (true, _) => s.push_str("; no write of this file put that value there"),
            (false, _) => {
                let _ = write!(s, "; the value is that of {}", source.join(" or "));
            }
        }
        let lost_sure: Vec<String> = candidates
            .iter()
            .filter(|&&i| self.judged[i].synced)
            .map(|&i| format!("w{}", self.history.writes[i].id.0))
            .collect();
        if !lost_sure.is_empty() {
            let _ = write!(s, " (fsynced: {})", lost_sure.join(", "));
        }
        s
    }

    fn describe(&self, i: usize) -> String {
        let w = &self.history.writes[i];
        let j = self.judged[i];
        let kind = if w.zero { "truncate" } else { "write" };
        let state = match (w.state, j.synced, j.sure) {
            (WriteState::Done, true, _) => "done, fsynced",
            (WriteState::Done, false, true) => "done, no loss reported",
            (WriteState::Done, false, false) => "done, maybe lost",
            (WriteState::Failed, ..) => "failed",
            (WriteState::Abandoned, ..) => "abandoned by a crash",
            (WriteState::InFlight, ..) => "in flight",
        };
        let end = if w.end == Tick::MAX { "..".to_string() } else { format!("..{}", w.end) };
        let at = self.history.time_of(w.start).map_or(String::new(), |t| format!(" at {t}"));
        format!("{kind} w{} by c{} [{}, +{}) ticks {}{end}{at} ({state})", w.id.0, w.client, w.offset, w.len, w.start)
    }
}

/// Counts of the judged writes, for the run's summary line.
pub fn lossy_writes(history: &History, osts_of_file: &[Vec<u32>]) -> BTreeMap<&'static str, usize> {
    let oracle = Oracle::new(history, osts_of_file);
    let mut counts = BTreeMap::new();
    for (w, j) in history.writes.iter().zip(&oracle.judged) {
        let key = match (w.state, j.sure) {
            (WriteState::Done, true) => "sure",
            (WriteState::Done, false) => "maybe_lost",
            _ => "failed",
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{write_bytes, WriteId};

    fn history_with(writes: &[(u32, u64, u64, Tick, Tick)]) -> History {
        let mut h = History::default();
        for &(id, offset, len, start, end) in writes {
            h.writes.push(WriteRecord {
                id: WriteId(id),
                client: 0,
                file: 0,
                offset,
                len,
                zero: false,
                start,
                end,
                state: WriteState::Done,
            });
        }
        h
    }

    fn read(h: &mut History, offset: u64, data: Vec<u8>, start: Tick, end: Tick) {
        h.reads.push(ReadRecord { client: 1, file: 0, offset, start, end, data, fresh: false });
    }

    #[test]
    fn a_read_sees_the_latest_write_or_a_concurrent_one() {
        let osts = vec![vec![0]];
        let mut h = history_with(&[(1, 0, 100, 1, 2), (2, 50, 100, 3, 4), (3, 0, 10, 6, 9)]);
        // After both: bytes 0..50 of w1, 50..100 of w2; w3 runs concurrently.
        let mut data = write_bytes(WriteId(1), 0, 50);
        data.extend(write_bytes(WriteId(2), 50, 50));
        read(&mut h, 0, data.clone(), 5, 7);
        let mut concurrent = data.clone();
        concurrent[..10].copy_from_slice(&write_bytes(WriteId(3), 0, 10));
        read(&mut h, 0, concurrent, 5, 7);
        assert_eq!(Oracle::new(&h, &osts).check(), Ok(()));
        // w1's bytes where w2 surely overwrote them: stale.
        read(&mut h, 50, write_bytes(WriteId(1), 50, 50), 5, 7);
        let err = Oracle::new(&h, &osts).check().unwrap_err();
        assert!(err.contains("offset 50") && err.contains("the value is that of write w1"), "{err}");
    }

    #[test]
    fn a_reported_loss_excuses_the_missing_bytes_and_an_fsync_does_not() {
        let osts = vec![vec![0]];
        let mut h = history_with(&[(1, 0, 10, 1, 2)]);
        read(&mut h, 0, vec![0; 10], 10, 11);
        assert!(Oracle::new(&h, &osts).check().is_err(), "lost without a report");
        h.reports.push(crate::history::Report { client: 0, at: 5, scope: Scope::Ost(0), what: "lost".into() });
        let err = Oracle::new(&h, &osts).check().unwrap_err();
        assert!(err.contains("no fault touching"), "a report needs a fault: {err}");
        h.faults.push(crate::history::FaultRecord { at: 4, fault: Fault::OstCrash { ost: 0 } });
        assert_eq!(Oracle::new(&h, &osts).check(), Ok(()));
        // Fsynced before the loss report: it must survive.
        h.fsyncs.push(crate::history::FsyncRecord { client: 0, file: 0, start: 3, end: 4, ok: true });
        let err = Oracle::new(&h, &osts).check().unwrap_err();
        assert!(err.contains("fsynced"), "{err}");
    }
}
