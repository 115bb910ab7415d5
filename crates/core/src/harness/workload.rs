//! Workloads on the harness: one sequential program per client, run side by
//! side, and the IOR-style segmented pattern built from them.
//!
//! A [`Program`] is what one rank does, in order; [`run_programs`] starts
//! every client's next action as soon as its previous one completes, so
//! clients overlap exactly as independent processes would. Data written is a
//! pattern derived from (writer, file offset), so a reader can verify every
//! byte without keeping a copy.

use super::{Harness, HarnessError};
use crate::client::ladvise::{Advice, AheadMode};
use crate::client::{ClientError, FileHandle, OpId, OpOutput};
use crate::layout::Layout;
use crate::units::ClientId;

/// One step of a client's program. Files are named by their index in the
/// `files` slice given to [`run_programs`].
#[derive(Clone, Debug)]
pub enum Action {
    Open {
        file: usize,
    },
    /// Write the pattern of `writer` over `[offset, offset + len)`.
    Write {
        file: usize,
        offset: u64,
        len: u64,
        writer: u32,
    },
    /// Read `[offset, offset + len)` and check it holds `writer`'s pattern.
    ReadVerify {
        file: usize,
        offset: u64,
        len: u64,
        writer: u32,
    },
    Fsync {
        file: usize,
    },
    Close {
        file: usize,
    },
    /// Asynchronous write lockahead of `[start, end]` ranges (inclusive).
    Lockahead {
        file: usize,
        ranges: Vec<(u64, u64)>,
    },
    LockNoExpand {
        file: usize,
    },
}

pub type Program = Vec<Action>;

/// The byte `writer` puts at file offset `offset`.
pub fn pattern_byte(writer: u32, offset: u64) -> u8 {
    let x = offset.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (writer as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (x >> 56) as u8
}

pub fn pattern(writer: u32, offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(|o| pattern_byte(writer, o)).collect()
}

/// What a run of programs did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramReport {
    pub bytes_written: u64,
    pub bytes_verified: u64,
    /// `(client, file offset)` of the first wrong byte of each failed check.
    pub mismatches: Vec<(ClientId, u64)>,
    pub errors: Vec<(ClientId, ClientError)>,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error("{client}: lockahead advice refused: {error}")]
    Advice { client: ClientId, error: ClientError },
}

struct Runner {
    client: ClientId,
    program: Program,
    next: usize,
    waiting: Option<(OpId, Action)>,
    handles: Vec<Option<FileHandle>>,
}

/// Run every client's program to completion.
pub fn run_programs(h: &mut Harness, files: &[Layout], programs: Vec<Program>) -> Result<ProgramReport, WorkloadError> {
    assert!(programs.len() <= h.client_count() as usize, "more programs than clients");
    let mut report = ProgramReport::default();
    let mut runners: Vec<Runner> = programs
        .into_iter()
        .enumerate()
        .map(|(i, program)| Runner {
            client: ClientId(i as u32),
            program,
            next: 0,
            waiting: None,
            handles: vec![None; files.len()],
        })
        .collect();
    loop {
        for r in runners.iter_mut() {
            issue(h, files, r, &mut report)?;
        }
        if runners.iter().all(|r| r.waiting.is_none() && r.next == r.program.len()) {
            return Ok(report);
        }
        if !h.step() {
            return Err(HarnessError::Stalled { now: h.now(), ops_pending: h.ops_pending() }.into());
        }
    }
}

/// Collect the runner's finished operations and start its next actions,
/// until one is in progress or the program is done.
fn issue(h: &mut Harness, files: &[Layout], r: &mut Runner, report: &mut ProgramReport) -> Result<(), WorkloadError> {
    loop {
        if let Some((op, action)) = r.waiting.take() {
            match h.result(r.client, op).cloned() {
                None => {
                    r.waiting = Some((op, action));
                    return Ok(());
                }
                Some(Err(e)) => report.errors.push((r.client, e)),
                Some(Ok(out)) => account(r.client, &action, out, report),
            }
        }
        if r.next == r.program.len() {
            return Ok(());
        }
        start_next(h, files, r)?;
    }
}

/// Start the runner's next action; synchronous ones complete at once.
fn start_next(h: &mut Harness, files: &[Layout], r: &mut Runner) -> Result<(), WorkloadError> {
    let action = r.program[r.next].clone();
    r.next += 1;
    let c = r.client;
    let fh = |r: &Runner, file: usize| r.handles[file].expect("program uses a file before opening it");
    let op = match action {
        Action::Open { file } => {
            r.handles[file] = Some(h.open(c, files[file].clone()));
            return Ok(());
        }
        Action::LockNoExpand { file } => {
            h.ladvise(c, fh(r, file), &[Advice::lock_no_expand(true)])
                .map_err(|error| WorkloadError::Advice { client: c, error })?;
            return Ok(());
        }
        Action::Lockahead { file, ref ranges } => {
            for batch in ranges.chunks(crate::client::ladvise::ADVICES_PER_CALL_MAX - 1) {
                let advices: Vec<Advice> =
                    batch.iter().map(|&(s, e)| Advice::lockahead(AheadMode::Write, s, e, true)).collect();
                h.ladvise(c, fh(r, file), &advices).map_err(|error| WorkloadError::Advice { client: c, error })?;
            }
            return Ok(());
        }
        Action::Write { file, offset, len, writer } => h.write(c, fh(r, file), offset, pattern(writer, offset, len)),
        Action::ReadVerify { file, offset, len, .. } => h.read(c, fh(r, file), offset, len),
        Action::Fsync { file } => h.fsync(c, fh(r, file)),
        Action::Close { file } => {
            let op = h.close(c, fh(r, file));
            r.handles[file] = None;
            op
        }
    };
    r.waiting = Some((op, action));
    Ok(())
}

fn account(c: ClientId, action: &Action, out: OpOutput, report: &mut ProgramReport) {
    match (action, out) {
        (Action::Write { len, .. }, OpOutput::Written(n)) => {
            debug_assert_eq!(*len, n);
            report.bytes_written += n;
        }
        (Action::ReadVerify { offset, writer, .. }, OpOutput::Read(data)) => {
            match data.iter().enumerate().find(|(i, b)| **b != pattern_byte(*writer, offset + *i as u64)) {
                None => report.bytes_verified += data.len() as u64,
                Some((i, _)) => report.mismatches.push((c, offset + i as u64)),
            }
        }
        _ => {}
    }
}

/// IOR's access pattern (`ior.md`): `-b block -t transfer -s segments`, with
/// `-F` for a file per process. Offsets as IOR's `WriteOrRead`.
#[derive(Clone, Copy, Debug)]
pub struct Segmented {
    pub tasks: u32,
    pub block_bytes: u64,
    pub transfer_bytes: u64,
    pub segments: u64,
    pub file_per_process: bool,
}

impl Segmented {
    /// File offsets `rank` writes, in IOR's order (segment outer, transfer inner).
    pub fn offsets(&self, rank: u32) -> Vec<u64> {
        let per_block = self.block_bytes / self.transfer_bytes;
        let mut v = Vec::new();
        for i in 0..self.segments {
            for j in 0..per_block {
                v.push(if self.file_per_process {
                    j * self.transfer_bytes + i * self.block_bytes
                } else {
                    j * self.transfer_bytes + i * self.tasks as u64 * self.block_bytes + rank as u64 * self.block_bytes
                });
            }
        }
        v
    }

    /// Bytes written by all tasks together (IOR's aggregate file size).
    pub fn aggregate_bytes(&self) -> u64 {
        self.block_bytes * self.segments * self.tasks as u64
    }

    fn file_of(&self, rank: u32) -> usize {
        if self.file_per_process {
            rank as usize
        } else {
            0
        }
    }

    /// Write phase: open, (advice), every transfer, fsync, close.
    pub fn write_program(&self, rank: u32, advice: WriterAdvice) -> Program {
        let file = self.file_of(rank);
        let mut p = vec![Action::Open { file }];
        match advice {
            WriterAdvice::None => {}
            WriterAdvice::NoExpand => p.push(Action::LockNoExpand { file }),
            WriterAdvice::Lockahead => {
                p.push(Action::LockNoExpand { file });
                let ranges = self.offsets(rank).iter().map(|&o| (o, o + self.transfer_bytes - 1)).collect();
                p.push(Action::Lockahead { file, ranges });
            }
        }
        for o in self.offsets(rank) {
            p.push(Action::Write { file, offset: o, len: self.transfer_bytes, writer: rank });
        }
        p.push(Action::Fsync { file });
        p.push(Action::Close { file });
        p
    }

    /// Read phase: read back and check what `writer` wrote. Run it on another
    /// client than the writer (as IOR's `-C` does) so that no cache can hide
    /// a stale byte.
    pub fn verify_program(&self, writer: u32) -> Program {
        let file = self.file_of(writer);
        let mut p = vec![Action::Open { file }];
        for o in self.offsets(writer) {
            p.push(Action::ReadVerify { file, offset: o, len: self.transfer_bytes, writer });
        }
        p.push(Action::Close { file });
        p
    }
}

/// Lock advice a writer gives before its transfers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriterAdvice {
    None,
    /// `ladvise -a locknoexpand`.
    NoExpand,
    /// Lock-no-expand, then asynchronous lockahead of every transfer.
    Lockahead,
}
