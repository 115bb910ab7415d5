//! What a run did, in the order the driver saw it: the record the oracle
//! judges after the run.
//!
//! Time here is a logical clock ([`Tick`]) that moves at every operation
//! started, every completion observed, every fault and every loss report.
//! The driver looks for completions after every harness step and starts
//! operations only between steps, so "A completed before B began"
//! (`a.end < b.start`) is exactly the real order; a completion is at worst
//! observed late, which makes an operation look longer, never shorter.

use crate::faults::{Fault, FaultClass};
use crate::workload::WriteId;
use lanefs_core::client::ClientError;
use std::collections::BTreeMap;

/// A point of the run's logical clock.
pub type Tick = u64;

/// How a write (or a truncate) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteState {
    InFlight,
    Done,
    /// Completed with an error: some of its bytes may have been cached.
    Failed,
    /// Its client crashed with it in progress.
    Abandoned,
}

#[derive(Clone, Debug)]
pub struct WriteRecord {
    pub id: WriteId,
    pub client: u32,
    pub file: usize,
    pub offset: u64,
    pub len: u64,
    /// A truncate: zeros over the range.
    pub zero: bool,
    pub start: Tick,
    /// When it was seen to end (`Tick::MAX` while in flight).
    pub end: Tick,
    pub state: WriteState,
}

impl WriteRecord {
    pub fn covers(&self, lo: u64, hi: u64) -> bool {
        self.offset <= lo && hi <= self.offset + self.len
    }

    pub fn overlaps(&self, offset: u64, len: u64) -> bool {
        self.offset < offset + len && offset < self.offset + self.len
    }

    pub fn value(&self, offset: u64) -> u8 {
        if self.zero {
            0
        } else {
            crate::workload::value_byte(self.id, offset)
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReadRecord {
    pub client: u32,
    pub file: usize,
    pub offset: u64,
    pub start: Tick,
    pub end: Tick,
    pub data: Vec<u8>,
    /// A read of the final state, by a client that did nothing else.
    pub fresh: bool,
}

#[derive(Clone, Copy, Debug)]
pub struct FsyncRecord {
    pub client: u32,
    pub file: usize,
    pub start: Tick,
    pub end: Tick,
    pub ok: bool,
}

/// What a loss report names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A failed fsync or close of the file.
    File(usize),
    /// A `DataLost` event of the client for the OST.
    Ost(u32),
}

#[derive(Clone, Debug)]
pub struct Report {
    pub client: u32,
    pub at: Tick,
    pub scope: Scope,
    pub what: String,
}

#[derive(Clone, Copy, Debug)]
pub struct FaultRecord {
    pub at: Tick,
    pub fault: Fault,
}

/// An operation that failed.
#[derive(Clone, Debug)]
pub struct OpError {
    pub client: u32,
    pub file: usize,
    pub at: Tick,
    pub action: &'static str,
    pub error: ClientError,
}

#[derive(Debug, Default)]
pub struct History {
    tick: Tick,
    /// The harness's virtual time, as the driver last set it.
    pub clock: lanefs_core::units::Instant,
    /// The virtual time of every tick (index: tick - 1), so that a finding
    /// can be found in the harness's trace.
    times: Vec<lanefs_core::units::Instant>,
    pub writes: Vec<WriteRecord>,
    pub reads: Vec<ReadRecord>,
    pub fsyncs: Vec<FsyncRecord>,
    pub reports: Vec<Report>,
    pub faults: Vec<FaultRecord>,
    pub errors: Vec<OpError>,
    /// Clients that crashed, and when.
    pub crashed: BTreeMap<u32, Tick>,
}

impl History {
    /// The clock, moved on by one.
    pub fn tick(&mut self) -> Tick {
        self.tick += 1;
        self.times.push(self.clock);
        self.tick
    }

    /// The virtual time of tick `t`.
    pub fn time_of(&self, t: Tick) -> Option<lanefs_core::units::Instant> {
        self.times.get((t as usize).checked_sub(1)?).copied()
    }

    pub fn now(&self) -> Tick {
        self.tick
    }

    /// A write started: its index in `writes`.
    pub fn write_started(&mut self, id: WriteId, client: u32, file: usize, offset: u64, len: u64, zero: bool) -> usize {
        let start = self.tick();
        self.writes.push(WriteRecord {
            id,
            client,
            file,
            offset,
            len,
            zero,
            start,
            end: Tick::MAX,
            state: WriteState::InFlight,
        });
        self.writes.len() - 1
    }

    pub fn write_ended(&mut self, index: usize, ok: bool) {
        let end = self.tick();
        let w = &mut self.writes[index];
        debug_assert_eq!(w.state, WriteState::InFlight);
        w.end = end;
        w.state = if ok { WriteState::Done } else { WriteState::Failed };
    }

    pub fn fault(&mut self, fault: Fault) {
        let at = self.tick();
        self.faults.push(FaultRecord { at, fault });
        if let Fault::ClientCrash { client } = fault {
            self.crashed.insert(client, at);
            for w in self.writes.iter_mut().filter(|w| w.client == client && w.state == WriteState::InFlight) {
                w.state = WriteState::Abandoned;
                w.end = at;
            }
        }
    }

    pub fn report(&mut self, client: u32, scope: Scope, what: String) {
        let at = self.tick();
        self.reports.push(Report { client, at, scope, what });
    }

    pub fn error(&mut self, client: u32, file: usize, action: &'static str, error: ClientError) {
        let at = self.now();
        self.errors.push(OpError { client, file, at, action, error });
    }

    /// Faults injected, by class.
    pub fn fault_counts(&self) -> crate::faults::FaultCounts {
        let mut counts = crate::faults::FaultCounts::default();
        for f in &self.faults {
            counts.add(f.fault.class());
        }
        counts
    }

    pub fn faults_of(&self, class: FaultClass) -> usize {
        self.faults.iter().filter(|f| f.fault.class() == class).count()
    }
}
