//! Two-phase collective I/O on real MPI and a real file system: a rank's
//! [`Communicator`] and its handle on the file ([`FileAccess`]) run the
//! shared two-phase code of [`crate::two_phase`] with blocking calls.
//! [`CollectiveFile`] is `MPI_File_open`'s handle: independent and
//! collective reads and writes at explicit offsets, sync, close.

use crate::comm::{CommError, Communicator};
use crate::hints::MpiioHints;
pub use crate::two_phase::{CloseReport, CollectiveError, Striping, AGGREGATORS_GROUP_ID, CLEARING_GROUP_ID};
use crate::two_phase::{ExchangeId, Part, RankIo, StripeBytes, TwoPhase};
use lanefs_core::client::ladvise::Advice;
use std::future::Future;
use std::ops::Range;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One rank's handle on the file, as two-phase I/O uses it.
pub trait FileAccess {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), String>;
    /// Fill `buf` from `offset`; bytes past the end of the file read as zeros.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String>;
    /// Asynchronous lock requests (`llapi_ladvise`); per-extent results are
    /// not waited for.
    fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String>;
    /// Ask the OSTs not to expand this handle's locks.
    fn no_expand(&mut self) -> Result<(), String>;
    fn group_lock(&mut self, gid: u64) -> Result<(), String>;
    fn group_unlock(&mut self, gid: u64) -> Result<(), String>;
    fn sync(&mut self) -> Result<(), String>;
}

/// The blocking world as a [`RankIo`]: every operation is done when its
/// future is first polled.
struct Blocking<C, F> {
    comm: C,
    file: F,
    /// One range per rank, empty between exchanges: `MPI_Alltoallv`'s
    /// counts and displacements, kept from exchange to exchange.
    to: Vec<Range<usize>>,
    from: Vec<Range<usize>>,
}

/// Lays `parts` out as one range per rank in `dense`.
fn spread(dense: &mut [Range<usize>], parts: &[Part]) {
    for (rank, range) in parts {
        let slot = &mut dense[*rank as usize];
        assert!(slot.start == slot.end, "rank {rank} has one part in an exchange");
        *slot = range.clone();
    }
}

/// Empties what [`spread`] set.
fn unspread(dense: &mut [Range<usize>], parts: &[Part]) {
    for (rank, _) in parts {
        dense[*rank as usize] = 0..0;
    }
}

impl<C: Communicator, F: FileAccess> RankIo for Blocking<C, F> {
    type Buffer = StripeBytes;
    fn rank(&self) -> u32 {
        self.comm.rank()
    }
    fn size(&self) -> u32 {
        self.comm.size()
    }
    fn ranks_per_node(&self) -> u32 {
        self.comm.ranks_per_node()
    }
    fn wtime(&self) -> f64 {
        self.comm.wtime()
    }
    fn abort(&self, reason: &str) {
        self.comm.abort(reason)
    }
    async fn barrier(&mut self) -> Result<(), CommError> {
        self.comm.barrier()
    }
    async fn allgather_same(&mut self, mine: &[u8]) -> Result<Rc<Vec<Vec<u8>>>, CommError> {
        self.comm.allgather_same(mine).map(Rc::new)
    }
    async fn alltoallv(
        &mut self,
        _exchange: ExchangeId,
        send: &[u8],
        to: &[Part],
        recv: &mut [u8],
        from: &[Part],
    ) -> Result<(), CommError> {
        let ranks = self.comm.size() as usize;
        self.to.resize(ranks, 0..0);
        self.from.resize(ranks, 0..0);
        spread(&mut self.to, to);
        spread(&mut self.from, from);
        let done = self.comm.alltoallv(send, &self.to, recv, &self.from);
        unspread(&mut self.to, to);
        unspread(&mut self.from, from);
        done
    }
    async fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        self.file.write_at(offset, data)
    }
    async fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        self.file.read_at(offset, buf)
    }
    async fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String> {
        self.file.lock_ahead(advices)
    }
    async fn no_expand(&mut self) -> Result<(), String> {
        self.file.no_expand()
    }
    async fn group_lock(&mut self, gid: u64) -> Result<(), String> {
        self.file.group_lock(gid)
    }
    async fn group_unlock(&mut self, gid: u64) -> Result<(), String> {
        self.file.group_unlock(gid)
    }
    async fn sync(&mut self) -> Result<(), String> {
        self.file.sync()
    }
}

/// The output of a future whose every wait is a blocking call: it is done
/// in one poll.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("a blocking communicator and file never leave a future waiting"),
    }
}

/// One rank's collectively opened file (see the module docs).
pub struct CollectiveFile<C: Communicator, F: FileAccess> {
    io: Blocking<C, F>,
    state: TwoPhase<StripeBytes>,
}

impl<C: Communicator, F: FileAccess> CollectiveFile<C, F> {
    /// Open `file` on every rank of `comm` (collective): decide the
    /// aggregators of both directions from `hints` and the file's
    /// striping, and prepare for lockahead if a direction uses it.
    pub fn open(comm: C, file: F, striping: Striping, hints: &MpiioHints) -> Result<Self, CollectiveError> {
        let mut io = Blocking { comm, file, to: Vec::new(), from: Vec::new() };
        let state = ready(TwoPhase::open(&mut io, striping, hints))?;
        Ok(CollectiveFile { io, state })
    }

    /// The rank of each aggregator of collective writes, by aggregator index.
    pub fn write_aggregators(&self) -> &[u32] {
        self.state.write_aggregators()
    }

    /// The rank of each aggregator of collective reads, by aggregator index.
    pub fn read_aggregators(&self) -> &[u32] {
        self.state.read_aggregators()
    }

    /// The ranks of this file.
    pub fn communicator(&self) -> &C {
        &self.io.comm
    }

    /// The hints as open resolved them (for `MPICH_MPIIO_HINTS_DISPLAY`).
    pub fn hints(&self) -> &MpiioHints {
        self.state.hints()
    }

    pub fn file_mut(&mut self) -> &mut F {
        &mut self.io.file
    }

    fn io_error(&self, operation: &'static str) -> impl Fn(String) -> CollectiveError {
        let rank = self.io.comm.rank();
        move |reason| CollectiveError::Io { rank, operation, reason }
    }

    /// `MPI_File_write_at`: this rank alone.
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), CollectiveError> {
        self.io.file.write_at(offset, data).map_err(self.io_error("write"))?;
        self.state.record_independent_write(offset, data.len() as u64);
        Ok(())
    }

    /// `MPI_File_read_at`: this rank alone.
    pub fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CollectiveError> {
        self.io.file.read_at(offset, buf).map_err(self.io_error("read"))?;
        self.state.record_independent_read(offset, buf.len() as u64);
        Ok(())
    }

    /// `MPI_File_write_at_all`: every rank calls it, each with its own
    /// (possibly empty) `data` at `offset`.
    pub fn write_at_all(&mut self, offset: u64, data: &[u8]) -> Result<(), CollectiveError> {
        ready(self.state.write_at_all(&mut self.io, offset, data))
    }

    /// `MPI_File_read_at_all`: every rank calls it, each filling its own
    /// (possibly empty) `buf` from `offset`.
    pub fn read_at_all(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), CollectiveError> {
        ready(self.state.read_at_all(&mut self.io, offset, buf))
    }

    /// `MPI_File_sync`: this rank's writes are durable, then all ranks meet.
    pub fn sync(&mut self) -> Result<(), CollectiveError> {
        ready(self.state.sync(&mut self.io))
    }

    /// `MPI_File_close` (collective): the group lock goes, and every rank's
    /// counters and timers are gathered into the job's report, on rank 0
    /// (`None` elsewhere); the handle and the communicator are given back.
    pub fn close(self) -> Result<(Option<CloseReport>, F, C), CollectiveError> {
        let CollectiveFile { mut io, state } = self;
        let report = ready(state.close(&mut io))?;
        Ok((report, io.file, io.comm))
    }
}
