//! What a collective call needs of MPI: who am I, how many are we, a
//! barrier, an all-gather and an all-to-all of bytes, and a clock every
//! rank shares. [`crate::collective`] runs two-phase I/O through this and
//! nothing else, so the same code runs over real MPI (`MpiComm`, with the
//! `mpi` feature: Open MPI through the `mpi` crate) and over ranks that
//! are threads of one process ([`ThreadComm`], for tests and for runs
//! without `mpirun`).
//!
//! Messages are bytes. An exchange ([`Communicator::alltoallv`]) moves
//! ranges of one buffer to ranges of another, as `MPI_Alltoallv` does:
//! both sides know every size from the plan, so no sizes travel, and the
//! bytes go from the caller's buffer into the caller's buffer with no copy
//! on the way. The request lists of the all-gather are little-endian
//! `u64`s ([`encode_u64s`]).
//!
//! Waiting: over MPI, a rank waits for a collective in MPI's own blocking
//! call, which polls without pause, unless its node runs more ranks than
//! it has cores; then it starts the non-blocking collective and tests it
//! between growing sleeps, so that waiting ranks leave the cores to those
//! at work (`LANEFS_MPI_WAIT=busy|sleep|auto`).
//!
//! Failure: a rank that fails inside a collective calls
//! [`Communicator::abort`]. Under MPI that is `MPI_Abort`, which ends the
//! job with a message; between threads the other ranks' pending and later
//! calls fail with [`CommError::Aborted`], naming the rank and why, so no
//! rank waits forever for one that left.

use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;
use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CommError {
    #[error("rank {rank} left the collective: {reason}")]
    Aborted { rank: u32, reason: String },
    #[error("a message of {got} bytes where {expected} were planned, from rank {rank}")]
    Malformed { rank: u32, got: usize, expected: usize },
    #[error(
        "{bytes} bytes in one exchange pass MPI's count limit ({} bytes); use smaller transfers (-t) or stripes",
        i32::MAX
    )]
    TooLarge { bytes: usize },
    #[error("an exchange's part for rank {rank} ({part:?}) lies outside its {len}-byte buffer")]
    OutOfBuffer { rank: u32, part: Range<usize>, len: usize },
}

/// The collective operations two-phase I/O uses (see the module docs).
pub trait Communicator {
    fn rank(&self) -> u32;
    fn size(&self) -> u32;
    /// Ranks on each node, as they were placed (the aggregator placement
    /// spreads aggregators over nodes by it). At least 1.
    fn ranks_per_node(&self) -> u32;
    fn barrier(&self) -> Result<(), CommError>;
    /// Every rank's `mine`, in rank order.
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError>;
    /// [`Communicator::allgather`] when every rank passes as many bytes
    /// (one `MPI_Allgather` instead of two: no lengths to gather first). A
    /// rank that passed another length is [`CommError::Malformed`].
    fn allgather_same(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        let all = self.allgather(mine)?;
        match all.iter().enumerate().find(|(_, theirs)| theirs.len() != mine.len()) {
            Some((rank, theirs)) => {
                Err(CommError::Malformed { rank: rank as u32, got: theirs.len(), expected: mine.len() })
            }
            None => Ok(all),
        }
    }
    /// Sends `send[to[r]]` to rank `r` and receives into `recv[from[r]]`
    /// what rank `r` sends this one (`to` and `from` have one range per
    /// rank, empty for none; receive ranges do not overlap). Every size is
    /// known to both sides beforehand: a message of another length than
    /// its receive range is [`CommError::Malformed`] (MPI reports a longer
    /// one as a truncation and ends the job).
    fn alltoallv(
        &self,
        send: &[u8],
        to: &[Range<usize>],
        recv: &mut [u8],
        from: &[Range<usize>],
    ) -> Result<(), CommError>;
    /// Seconds on a clock every rank shares (`MPI_Wtime`).
    fn wtime(&self) -> f64;
    /// This rank cannot go on: end the collective for every rank.
    fn abort(&self, reason: &str);
}

impl<T: Communicator + ?Sized> Communicator for &T {
    fn rank(&self) -> u32 {
        (**self).rank()
    }
    fn size(&self) -> u32 {
        (**self).size()
    }
    fn ranks_per_node(&self) -> u32 {
        (**self).ranks_per_node()
    }
    fn barrier(&self) -> Result<(), CommError> {
        (**self).barrier()
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        (**self).allgather(mine)
    }
    fn allgather_same(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        (**self).allgather_same(mine)
    }
    fn alltoallv(
        &self,
        send: &[u8],
        to: &[Range<usize>],
        recv: &mut [u8],
        from: &[Range<usize>],
    ) -> Result<(), CommError> {
        (**self).alltoallv(send, to, recv, from)
    }
    fn wtime(&self) -> f64 {
        (**self).wtime()
    }
    fn abort(&self, reason: &str) {
        (**self).abort(reason)
    }
}

/// `values` as little-endian bytes.
pub fn encode_u64s(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The `u64`s of [`encode_u64s`]; a length that is not a multiple of 8 is
/// a malformed message from `rank`.
pub fn decode_u64s(rank: u32, bytes: &[u8]) -> Result<Vec<u64>, CommError> {
    if !bytes.len().is_multiple_of(8) {
        return Err(CommError::Malformed { rank, got: bytes.len(), expected: bytes.len() / 8 * 8 });
    }
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// Checks that `parts` has one range per rank, each inside a buffer of
/// `len` bytes.
fn check_parts(parts: &[Range<usize>], size: u32, len: usize) -> Result<(), CommError> {
    assert_eq!(parts.len(), size as usize, "one range per rank");
    match parts.iter().enumerate().find(|(_, p)| p.start > p.end || p.end > len) {
        Some((rank, part)) => Err(CommError::OutOfBuffer { rank: rank as u32, part: part.clone(), len }),
        None => Ok(()),
    }
}

/// Ranks as threads of one process, exchanging through shared memory.
pub struct ThreadComm {
    rank: u32,
    shared: Arc<Shared>,
}

struct Shared {
    size: u32,
    ranks_per_node: u32,
    clock: Instant,
    state: Mutex<ExchangeState>,
    changed: Condvar,
}

/// One exchange at a time: ranks fill their outgoing slots; once all have,
/// each takes its column; once all have taken, the next exchange may fill.
struct ExchangeState {
    /// `outgoing[from][to]`.
    outgoing: Vec<Option<Vec<Vec<u8>>>>,
    filled: u32,
    taken: u32,
    /// Counts completed exchanges, so a waiter knows its own is done.
    generation: u64,
    aborted: Option<(u32, String)>,
}

impl ThreadComm {
    /// `size` communicators, one per rank, `ranks_per_node` to a node.
    pub fn world(size: u32, ranks_per_node: u32) -> Vec<ThreadComm> {
        assert!(size >= 1, "a communicator has at least one rank");
        let shared = Arc::new(Shared {
            size,
            ranks_per_node: ranks_per_node.clamp(1, size),
            clock: Instant::now(),
            state: Mutex::new(ExchangeState {
                outgoing: vec![None; size as usize],
                filled: 0,
                taken: 0,
                generation: 0,
                aborted: None,
            }),
            changed: Condvar::new(),
        });
        (0..size).map(|rank| ThreadComm { rank, shared: shared.clone() }).collect()
    }

    fn exchange(&self, to: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, CommError> {
        let shared = &*self.shared;
        assert_eq!(to.len(), shared.size as usize, "one message per rank");
        let me = self.rank as usize;
        let mut s = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        // The previous exchange may still be being taken.
        while s.aborted.is_none() && s.filled == shared.size {
            s = shared.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        aborted(&s)?;
        s.outgoing[me] = Some(to);
        s.filled += 1;
        let generation = s.generation;
        if s.filled == shared.size {
            shared.changed.notify_all();
        }
        while s.aborted.is_none() && s.filled < shared.size && s.generation == generation {
            s = shared.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        aborted(&s)?;
        let column: Vec<Vec<u8>> = s
            .outgoing
            .iter_mut()
            .map(|from| std::mem::take(&mut from.as_mut().expect("every rank filled its slot")[me]))
            .collect();
        s.taken += 1;
        if s.taken == shared.size {
            s.outgoing.iter_mut().for_each(|slot| *slot = None);
            s.filled = 0;
            s.taken = 0;
            s.generation += 1;
            shared.changed.notify_all();
        }
        Ok(column)
    }
}

fn aborted(s: &ExchangeState) -> Result<(), CommError> {
    match &s.aborted {
        Some((rank, reason)) => Err(CommError::Aborted { rank: *rank, reason: reason.clone() }),
        None => Ok(()),
    }
}

impl Communicator for ThreadComm {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.shared.size
    }

    fn ranks_per_node(&self) -> u32 {
        self.shared.ranks_per_node
    }

    fn barrier(&self) -> Result<(), CommError> {
        self.exchange(vec![Vec::new(); self.shared.size as usize]).map(drop)
    }

    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
        self.exchange(vec![mine.to_vec(); self.shared.size as usize])
    }

    fn alltoallv(
        &self,
        send: &[u8],
        to: &[Range<usize>],
        recv: &mut [u8],
        from: &[Range<usize>],
    ) -> Result<(), CommError> {
        check_parts(to, self.shared.size, send.len())?;
        check_parts(from, self.shared.size, recv.len())?;
        let got = self.exchange(to.iter().map(|part| send[part.clone()].to_vec()).collect())?;
        for (rank, (message, part)) in got.iter().zip(from).enumerate() {
            if message.len() != part.len() {
                return Err(CommError::Malformed { rank: rank as u32, got: message.len(), expected: part.len() });
            }
            recv[part.clone()].copy_from_slice(message);
        }
        Ok(())
    }

    fn wtime(&self) -> f64 {
        self.shared.clock.elapsed().as_secs_f64()
    }

    fn abort(&self, reason: &str) {
        let mut s = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.aborted.is_none() {
            s.aborted = Some((self.rank, reason.to_string()));
        }
        self.shared.changed.notify_all();
    }
}

#[cfg(feature = "mpi")]
pub use self::mpi_comm::MpiComm;

#[cfg(feature = "mpi")]
mod mpi_comm {
    use super::{check_parts, CommError, Communicator};
    use mpi::collective::CommunicatorCollectives;
    use mpi::datatype::{Partition, PartitionMut};
    use mpi::request::{scope, Request, Scope};
    use mpi::topology::{Communicator as _, SimpleCommunicator};
    use mpi::Count;
    use std::ops::Range;
    use std::time::Duration;

    /// The ranks of an MPI communicator (`MPI_COMM_WORLD` under `mpirun`).
    pub struct MpiComm {
        world: SimpleCommunicator,
        ranks_per_node: u32,
        wait: Wait,
    }

    /// How a rank waits for a collective to finish.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Wait {
        /// In the MPI library's own blocking call, which polls the network
        /// without pause: the fastest answer where every rank has a core.
        Busy,
        /// A non-blocking collective, tested a few times and then between
        /// sleeps that double from 20 us to 1 ms: where a node has more
        /// ranks than cores, a rank that waits leaves the cores to the
        /// ranks and servers that work (Open MPI's `mpi_yield_when_idle`,
        /// its answer to oversubscription, still keeps every waiting rank
        /// runnable).
        Sleep,
    }

    impl Wait {
        /// `setting` is `LANEFS_MPI_WAIT` (`busy`, `sleep` or `auto`, the
        /// default): `auto` sleeps when this node runs more ranks than it
        /// has cores.
        fn choose(setting: Option<&str>, ranks_here: usize, cores: usize) -> Result<Wait, String> {
            match setting {
                Some("busy") => Ok(Wait::Busy),
                Some("sleep") => Ok(Wait::Sleep),
                Some("auto") | None => Ok(if ranks_here > cores { Wait::Sleep } else { Wait::Busy }),
                Some(other) => Err(format!("LANEFS_MPI_WAIT={other:?}: use busy, sleep or auto")),
            }
        }

        /// Waits for `request` as this mode does.
        fn finish<'a, D: ?Sized, S: Scope<'a>>(self, mut request: Request<'a, D, S>) {
            if self == Wait::Busy {
                request.wait();
                return;
            }
            let (mut tests, mut pause) = (0u32, Duration::from_micros(20));
            loop {
                match request.test() {
                    Ok(_) => return,
                    Err(pending) => request = pending,
                }
                tests += 1;
                if tests > 64 {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(1));
                }
            }
        }
    }

    // SAFETY: an `MpiComm` is made only by `MpiComm::init`, which refuses
    // an MPI library that does not grant `MPI_THREAD_MULTIPLE`; with it,
    // MPI calls on one communicator may come from any thread, and at once.
    unsafe impl Send for MpiComm {}
    unsafe impl Sync for MpiComm {}

    impl MpiComm {
        /// Initialise MPI with `MPI_THREAD_MULTIPLE` (a rank's lanefs
        /// client has threads of its own) and take `MPI_COMM_WORLD`. The
        /// universe finalises MPI when dropped: keep it for the whole run.
        pub fn init() -> Result<(mpi::environment::Universe, MpiComm), String> {
            use mpi::environment::Threading;
            let (universe, threading) =
                mpi::initialize_with_threading(Threading::Multiple).ok_or("MPI is initialised already")?;
            if threading != Threading::Multiple {
                return Err(format!(
                    "the MPI library grants {threading:?} threading, and lanefs needs MPI_THREAD_MULTIPLE"
                ));
            }
            let comm = MpiComm::new(universe.world())?;
            Ok((universe, comm))
        }

        /// Over `world`; the ranks per node are counted by splitting it by
        /// shared memory (`MPI_COMM_TYPE_SHARED`), and the largest node's
        /// count is taken.
        fn new(world: SimpleCommunicator) -> Result<MpiComm, String> {
            let node = world.split_shared(world.rank());
            let here = node.size();
            let mut largest = 0;
            world.all_reduce_into(&here, &mut largest, mpi::collective::SystemOperation::max());
            let setting = std::env::var("LANEFS_MPI_WAIT").ok();
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let wait = Wait::choose(setting.as_deref(), here.max(1) as usize, cores)?;
            Ok(MpiComm { world, ranks_per_node: largest.max(1) as u32, wait })
        }

        pub fn world(&self) -> &SimpleCommunicator {
            &self.world
        }

        /// The first `count` ranks, as IOR's `testComm` of a test run on
        /// fewer tasks than the job has: `Some` on those ranks, `None` on
        /// the others. Collective over this communicator.
        pub fn first(&self, count: u32) -> Result<Option<MpiComm>, String> {
            use mpi::topology::Color;
            let inside = self.rank() < count;
            let color = if inside { Color::with_value(0) } else { Color::undefined() };
            match self.world.split_by_color(color) {
                Some(sub) => MpiComm::new(sub).map(Some),
                None if !inside => Ok(None),
                None => Err(format!("MPI made no communicator of the first {count} ranks")),
            }
        }

        /// MPI's counts and displacements of messages of `lens` bytes, laid
        /// end to end; all of it must fit MPI's `int` counts.
        fn counts(lens: impl Iterator<Item = usize>) -> Result<(Vec<Count>, Vec<Count>), CommError> {
            let (mut counts, mut displs, mut at) = (Vec::new(), Vec::new(), 0usize);
            for n in lens {
                let too_large = || CommError::TooLarge { bytes: at.saturating_add(n) };
                displs.push(Count::try_from(at).map_err(|_| too_large())?);
                counts.push(Count::try_from(n).map_err(|_| too_large())?);
                at = at.checked_add(n).filter(|&end| Count::try_from(end).is_ok()).ok_or_else(too_large)?;
            }
            Ok((counts, displs))
        }

        /// MPI's counts and displacements of `parts` of one buffer.
        fn ranges(parts: &[Range<usize>]) -> Result<(Vec<Count>, Vec<Count>), CommError> {
            let too_large = |part: &Range<usize>| CommError::TooLarge { bytes: part.end };
            parts
                .iter()
                .map(|part| {
                    let start = Count::try_from(part.start).map_err(|_| too_large(part))?;
                    let len = Count::try_from(part.len()).map_err(|_| too_large(part))?;
                    // As `counts` does: every byte within MPI's int offsets.
                    Count::try_from(part.end).map_err(|_| too_large(part))?;
                    Ok((len, start))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(|pairs| pairs.into_iter().unzip())
        }
    }

    impl Communicator for MpiComm {
        fn rank(&self) -> u32 {
            self.world.rank() as u32
        }

        fn size(&self) -> u32 {
            self.world.size() as u32
        }

        fn ranks_per_node(&self) -> u32 {
            self.ranks_per_node
        }

        fn barrier(&self) -> Result<(), CommError> {
            match self.wait {
                Wait::Busy => self.world.barrier(),
                Wait::Sleep => self.wait.finish(self.world.immediate_barrier()),
            }
            Ok(())
        }

        fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
            let n = self.world.size() as usize;
            let len = mine.len() as u64;
            let mut lens = vec![0u64; n];
            scope(|s| self.wait.finish(self.world.immediate_all_gather_into(s, &len, &mut lens[..])));
            let (counts, displs) = Self::counts(lens.iter().map(|&l| l as usize))?;
            let total = lens.iter().sum::<u64>() as usize;
            let mut all = buffer(total);
            {
                let mut partition = PartitionMut::new(&mut all[..total], &counts[..], &displs[..]);
                scope(|s| self.wait.finish(self.world.immediate_all_gather_varcount_into(s, mine, &mut partition)));
            }
            Ok(split(&all, &counts))
        }

        fn allgather_same(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, CommError> {
            let n = self.world.size() as usize;
            let (counts, _) = Self::counts(std::iter::repeat_n(mine.len(), n))?;
            let mut all = buffer(mine.len() * n);
            let into = &mut all[..mine.len() * n];
            scope(|s| self.wait.finish(self.world.immediate_all_gather_into(s, mine, into)));
            Ok(split(&all, &counts))
        }

        fn alltoallv(
            &self,
            send: &[u8],
            to: &[Range<usize>],
            recv: &mut [u8],
            from: &[Range<usize>],
        ) -> Result<(), CommError> {
            let size = self.world.size() as u32;
            check_parts(to, size, send.len())?;
            check_parts(from, size, recv.len())?;
            let (send_counts, send_displs) = Self::ranges(to)?;
            let (recv_counts, recv_displs) = Self::ranges(from)?;
            // An empty buffer has no address of its own (see `buffer`).
            let (spare_send, mut spare_recv) = (buffer(0), buffer(0));
            let send = if send.is_empty() { &spare_send[..] } else { send };
            let recv = if recv.is_empty() { &mut spare_recv[..] } else { recv };
            let sending = Partition::new(send, &send_counts[..], &send_displs[..]);
            let mut receiving = PartitionMut::new(recv, &recv_counts[..], &recv_displs[..]);
            scope(|s| self.wait.finish(self.world.immediate_all_to_all_varcount_into(s, &sending, &mut receiving)));
            Ok(())
        }

        fn wtime(&self) -> f64 {
            mpi::time()
        }

        fn abort(&self, reason: &str) {
            eprintln!("lanefs: rank {} aborts the job: {reason}", self.world.rank());
            self.world.abort(1)
        }
    }

    /// `len` zeroed bytes in an allocation of its own even when empty: two
    /// empty vectors share one dangling address, and Open MPI refuses a
    /// send buffer that is also the receive buffer (`MPI_ERR_ARG`).
    fn buffer(len: usize) -> Vec<u8> {
        vec![0u8; len.max(1)]
    }

    #[cfg(test)]
    #[test]
    fn ranks_sleep_while_waiting_only_where_they_outnumber_the_cores() {
        assert_eq!(Wait::choose(None, 8, 2), Ok(Wait::Sleep));
        assert_eq!(Wait::choose(None, 2, 2), Ok(Wait::Busy));
        assert_eq!(Wait::choose(Some("auto"), 1, 64), Ok(Wait::Busy));
        assert_eq!(Wait::choose(Some("busy"), 8, 2), Ok(Wait::Busy));
        assert_eq!(Wait::choose(Some("sleep"), 1, 64), Ok(Wait::Sleep));
        let e = Wait::choose(Some("spin"), 1, 1).unwrap_err();
        assert!(e.contains("LANEFS_MPI_WAIT=\"spin\"") && e.contains("busy, sleep or auto"), "{e}");
    }

    #[cfg(test)]
    #[test]
    fn counts_lay_messages_end_to_end_within_mpis_int() {
        assert_eq!(MpiComm::counts([3usize, 0, 4].into_iter()).unwrap(), (vec![3, 0, 4], vec![0, 3, 3]));
        let over = MpiComm::counts([1usize, i32::MAX as usize].into_iter()).unwrap_err();
        assert_eq!(over, CommError::TooLarge { bytes: i32::MAX as usize + 1 });
        assert!(over.to_string().contains("use smaller transfers (-t)"), "{over}");
    }

    fn split(all: &[u8], counts: &[Count]) -> Vec<Vec<u8>> {
        let mut at = 0usize;
        counts
            .iter()
            .map(|&c| {
                let piece = all[at..at + c as usize].to_vec();
                at += c as usize;
                piece
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_threads<T: Send>(size: u32, body: impl Fn(ThreadComm) -> T + Sync) -> Vec<T> {
        let comms = ThreadComm::world(size, 1);
        std::thread::scope(|s| {
            let handles: Vec<_> = comms.into_iter().map(|c| s.spawn(|| body(c))).collect();
            handles.into_iter().map(|h| h.join().expect("rank thread")).collect()
        })
    }

    #[test]
    fn allgather_and_alltoallv_deliver_in_rank_order_many_times() {
        let results = on_threads(5, |c| {
            let me = c.rank() as u8;
            let mut seen = Vec::new();
            for round in 0..50u8 {
                let all = c.allgather(&[me, round]).unwrap();
                assert_eq!(all, (0..5).map(|r| vec![r, round]).collect::<Vec<_>>());
                // Rank r sends rank t `r` repeated `t + round % 3` times,
                // from the back of its buffer to the front.
                let lens: Vec<usize> = (0..5).map(|t| t + usize::from(round % 3)).collect();
                let mut send = Vec::new();
                let mut to = vec![0..0; 5];
                for t in (0..5).rev() {
                    to[t] = send.len()..send.len() + lens[t];
                    send.extend(std::iter::repeat_n(me, lens[t]));
                }
                let from_len = me as usize + usize::from(round % 3);
                let from: Vec<_> = (0..5).map(|r| r * from_len..(r + 1) * from_len).collect();
                let mut got = vec![u8::MAX; 5 * from_len];
                c.alltoallv(&send, &to, &mut got, &from).unwrap();
                for (r, part) in from.iter().enumerate() {
                    assert!(got[part.clone()].iter().all(|&b| b == r as u8), "{got:?}");
                }
                seen.push(round);
            }
            c.barrier().unwrap();
            seen.len()
        });
        assert_eq!(results, vec![50; 5]);
    }

    #[test]
    fn an_exchange_refuses_parts_outside_its_buffers_and_messages_of_another_size() {
        let results = on_threads(2, |c| {
            let outside = c.alltoallv(&[1, 2], &[0..1, 1..3], &mut [0; 2], &[0..1, 1..2]);
            // Both ranks expect one byte from each, but rank 1 sends two to rank 0.
            let to = if c.rank() == 1 { [0..2, 0..1] } else { [0..1, 0..1] };
            let wrong = c.alltoallv(&[7, 7], &to, &mut [0; 2], &[0..1, 1..2]);
            (outside.unwrap_err(), wrong)
        });
        for (rank, (outside, wrong)) in results.into_iter().enumerate() {
            assert_eq!(outside, CommError::OutOfBuffer { rank: 1, part: 1..3, len: 2 });
            if rank == 0 {
                assert_eq!(wrong.unwrap_err(), CommError::Malformed { rank: 1, got: 2, expected: 1 });
            } else {
                wrong.unwrap();
            }
        }
    }

    #[test]
    fn an_allgather_of_one_length_names_a_rank_that_passed_another() {
        let results = on_threads(3, |c| {
            let same = c.allgather_same(&[c.rank() as u8; 2]).unwrap();
            let mine = vec![0u8; if c.rank() == 2 { 3 } else { 2 }];
            (same, c.allgather_same(&mine))
        });
        for (rank, (same, wrong)) in results.into_iter().enumerate() {
            assert_eq!(same, vec![vec![0, 0], vec![1, 1], vec![2, 2]]);
            let expected = if rank == 2 {
                CommError::Malformed { rank: 0, got: 2, expected: 3 }
            } else {
                CommError::Malformed { rank: 2, got: 3, expected: 2 }
            };
            assert_eq!(wrong.unwrap_err(), expected);
        }
    }

    #[test]
    fn an_abort_fails_every_waiting_and_later_call() {
        let results = on_threads(3, |c| {
            if c.rank() == 1 {
                c.abort("the disk is full");
                return None;
            }
            Some(c.barrier().unwrap_err())
        });
        for e in results.into_iter().flatten() {
            assert_eq!(e, CommError::Aborted { rank: 1, reason: "the disk is full".into() });
        }
    }

    #[test]
    fn u64s_round_trip_and_bad_lengths_are_named() {
        assert_eq!(decode_u64s(0, &encode_u64s(&[1, u64::MAX, 7])).unwrap(), vec![1, u64::MAX, 7]);
        assert!(matches!(decode_u64s(3, &[1, 2, 3]), Err(CommError::Malformed { rank: 3, .. })));
    }
}
