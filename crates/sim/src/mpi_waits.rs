//! Ranks that wait for an MPI collective by sleeping between tests.
//!
//! lanefs's MPI communicator, on a node that runs more ranks than it has
//! cores, waits for a collective by testing it 64 times and then sleeping
//! between tests, 20 us at first and twice as long each time up to 1 ms
//! (`LANEFS_MPI_WAIT=auto`, `Wait::Sleep` in crates/mpiio/src/comm.rs), so
//! that the waiting ranks leave the cores to the ranks and servers at
//! work. Each sleep ends in a wake-up, which costs the node's cores what
//! waking a thread costs (`handoff_us`, or `handoff_idle_core_us` when a
//! core has nothing to run: the cost measured for a thread woken by a
//! message, taken for one woken by its timer; an assumption, not measured
//! apart). The tests themselves are left out (a fraction of a
//! microsecond each). `[mpi] wait` decides as `LANEFS_MPI_WAIT` does:
//! `auto` (the default), `busy` (never sleep) or `sleep` (always).
//!
//! This type keeps, per rank, the number of its latest wait and whether
//! it is still in it, so that a wake-up due after its wait ended is
//! dropped. It holds no state beyond that one pair a rank, so it has no
//! invariant to check.

use lanefs_core::units::Duration;

/// The first sleep.
pub const FIRST_PAUSE: Duration = Duration::from_us(20);
/// The longest sleep.
pub const LONGEST_PAUSE: Duration = Duration::from_us(1000);

/// One rank's latest wait.
#[derive(Clone, Copy, Debug, Default)]
struct Wait {
    /// Its number: the waits the rank has begun, this one included (0:
    /// none yet).
    number: u32,
    /// Whether the rank is still in it.
    waiting: bool,
}

#[derive(Clone, Debug)]
pub struct MpiWaits {
    waits: Vec<Wait>,
}

impl MpiWaits {
    pub fn new(ranks: u32) -> MpiWaits {
        MpiWaits { waits: vec![Wait::default(); ranks as usize] }
    }

    /// `rank` begins to wait: the number of this wait.
    pub fn begin(&mut self, rank: u32) -> u32 {
        let w = &mut self.waits[rank as usize];
        *w = Wait { number: w.number.wrapping_add(1), waiting: true };
        w.number
    }

    /// `rank`'s answer came: it waits no more.
    pub fn end(&mut self, rank: u32) {
        self.waits[rank as usize].waiting = false;
    }

    /// A sleep of `rank` in wait `wait` ended: whether the rank is still
    /// in that wait, and the next sleep's length after one of `pause`.
    pub fn wake(&self, rank: u32, wait: u32, pause: Duration) -> Option<Duration> {
        let w = self.waits[rank as usize];
        if !w.waiting || w.number != wait {
            return None;
        }
        Some(Duration(pause.as_ns().saturating_mul(2)).min(LONGEST_PAUSE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_double_to_a_millisecond_and_end_with_the_wait() {
        let mut waits = MpiWaits::new(2);
        let first = waits.begin(1);
        let mut pause = FIRST_PAUSE;
        let mut pauses = Vec::new();
        while let Some(next) = waits.wake(1, first, pause) {
            pauses.push(pause.as_ns() / 1000);
            pause = next;
            if pauses.len() == 8 {
                break;
            }
        }
        assert_eq!(pauses, [20, 40, 80, 160, 320, 640, 1000, 1000]);
        waits.end(1);
        assert_eq!(waits.wake(1, first, pause), None, "a wake-up after the answer");
        let second = waits.begin(1);
        assert_eq!(waits.wake(1, first, pause), None, "an earlier wait's wake-up");
        assert!(waits.wake(1, second, FIRST_PAUSE).is_some());
        assert_eq!(waits.wake(0, 0, FIRST_PAUSE), None, "rank 0 never waited");
    }
}
