//! Ranks that wait for an MPI collective by sleeping between tests.
//!
//! lanefs's MPI communicator, on a node that runs more ranks than it has
//! cores, waits for a collective by testing it 64 times and then sleeping
//! between tests, 20 us at first and twice as long each time up to 1 ms
//! (`LANEFS_MPI_WAIT=auto`, `Wait::Sleep` in crates/mpiio/src/comm.rs), so
//! that the waiting ranks leave the cores to the ranks and servers at
//! work. Each sleep ends in a wake-up, which costs the node's cores what
//! waking a thread costs (`handoff_idle_core_us` when a core has nothing
//! to run, else `handoff_us` and `handoff_other_busy_core_us` as
//! [`crate::world::World`] weighs them: the cost measured for a thread woken by a
//! message, taken for one woken by its timer; an assumption, not measured
//! apart). A sleeping rank sees its collective done only when it next
//! tests it, at the end of its sleep; and a sleep lasts its length and
//! the thread's timer slack besides ([`TIMER_SLACK`]). Before its first
//! sleep a rank tests [`SPIN_TESTS`] times, each `[mpi] test_us` (as
//! `lanefs calibrate` measures an `MPI_Test`), and sees an answer that
//! comes meanwhile at once. Where the node's ranks outnumber its cores,
//! Open MPI yields the core in each test that finds nothing to do
//! (`mpi_yield_when_idle`, its default there: `opal_progress` calls
//! `sched_yield`); with `[mpi] test_yield_us` a test then lasts that long,
//! and the tests are charged to the node's cores: the spin's, up to its
//! answer or its first sleep ([`MpiWaits::take_spin`]), and the one after
//! each sleep. Without it the tests take no core time from others.
//! `[mpi] wait` decides as `LANEFS_MPI_WAIT` does: `auto` (the
//! default), `busy` (never sleep) or `sleep` (always).
//!
//! A message above the MPI library's eager limit moves only once its
//! receiver tests (Open MPI's rendezvous: the sender's first fragment
//! waits to be matched, and ob1 over vader then has the receiver copy the
//! rest with one `process_vm_readv` inside that test; the sender sees it
//! done at its own next test). [`MpiWaits::next_test`] says when a waiting
//! rank next tests: at once while it spins, else at the end of its
//! current sleep; a rank that copies in that test is awake until the copy
//! ends ([`MpiWaits::copying`]) and sees an answer that comes meanwhile at
//! once.
//!
//! This type keeps, per rank, the number of its latest wait, whether it
//! is still in it, when it began, when its current sleep ends, whether
//! its answer came while it slept, and whether its spin was taken for
//! charging, so that a wake-up due after its wait ended is dropped, one
//! after its answer ends the wait, and a spin is charged once. Invariants
//! ([`MpiWaits::check_invariants`]): only a rank in its wait has an answer
//! waiting for it; a rank's sleeps end after they begin, and its spin
//! after its wait begins.

use lanefs_core::units::{Duration, Instant};

/// The tests of a collective before a rank first sleeps in it (`Wait::finish`
/// in crates/mpiio/src/comm.rs).
pub const SPIN_TESTS: u64 = 64;
/// The first sleep.
pub const FIRST_PAUSE: Duration = Duration::from_us(20);
/// The longest sleep.
pub const LONGEST_PAUSE: Duration = Duration::from_us(1000);
/// How much later than asked a sleeping thread's timer may fire: Linux's
/// default timer slack for a thread of the normal scheduling class, 50 us
/// (`timerslack_ns`; prctl(2), `PR_SET_TIMERSLACK`). A sleep of `pause`
/// is taken to last `pause` and the slack.
pub const TIMER_SLACK: Duration = Duration::from_us(50);

/// How long a rank tests before its first sleep, at `test` a test.
pub fn spin(test: Duration) -> Duration {
    Duration(test.as_ns().saturating_mul(SPIN_TESTS))
}

/// One rank's latest wait.
#[derive(Clone, Copy, Debug, Default)]
struct Wait {
    /// Its number: the waits the rank has begun, this one included (0:
    /// none yet).
    number: u32,
    /// Whether the rank is still in it.
    waiting: bool,
    /// Its collective is done, and the rank sleeps on till its next test.
    answered: bool,
    /// Its spin has been taken for charging ([`MpiWaits::take_spin`]).
    spin_taken: bool,
    /// When it began.
    began: Instant,
    /// When its first sleep began (the wait's start and its spin).
    sleeps_from: Instant,
    /// When its current (or first) sleep ends: its next test.
    wakes_at: Instant,
    /// It is awake in a test until then, copying what a rendezvous brought.
    testing_until: Instant,
}

/// What a rank does at the end of one of its sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The sleep belongs to a wait that is over: nothing.
    Stale,
    /// It tests, finds its collective still going, and sleeps this long.
    Again(Duration),
    /// It tests and finds its collective done: its wait ends.
    Answered,
}

#[derive(Clone, Debug)]
pub struct MpiWaits {
    waits: Vec<Wait>,
    /// How long a rank tests before its first sleep.
    spin: Duration,
}

impl MpiWaits {
    pub fn new(ranks: u32, spin: Duration) -> MpiWaits {
        MpiWaits { waits: vec![Wait::default(); ranks as usize], spin }
    }

    /// `rank` begins to wait at `now`: the number of this wait, and when its
    /// first sleep ends.
    pub fn begin(&mut self, rank: u32, now: Instant) -> (u32, Instant) {
        let w = &mut self.waits[rank as usize];
        let number = w.number.wrapping_add(1);
        let sleeps_from = now + self.spin;
        let wakes_at = sleeps_from + Self::slept(FIRST_PAUSE);
        *w = Wait {
            number,
            waiting: true,
            answered: false,
            spin_taken: false,
            began: now,
            sleeps_from,
            wakes_at,
            testing_until: Instant::ZERO,
        };
        (number, wakes_at)
    }

    /// `rank`, awake in its wait at `now`, sleeps again till `until`.
    pub fn sleep_until(&mut self, rank: u32, until: Instant) {
        self.waits[rank as usize].wakes_at = until;
    }

    /// When `rank`, at `now`, next tests its collective: at once unless it
    /// sleeps in its wait, else when that sleep ends.
    pub fn next_test(&self, rank: u32, now: Instant) -> Instant {
        let w = self.waits[rank as usize];
        if w.sleeping(now) {
            w.wakes_at.max(now)
        } else {
            now
        }
    }

    /// The part of `rank`'s spin in its current wait not taken yet, up to
    /// `now`: all of it once the rank sleeps, what it spun before an
    /// answer that came meanwhile, nothing outside a wait. Each wait's
    /// spin is taken once.
    pub fn take_spin(&mut self, rank: u32, now: Instant) -> Duration {
        let w = &mut self.waits[rank as usize];
        if !w.waiting || w.spin_taken {
            return Duration::ZERO;
        }
        w.spin_taken = true;
        now.min(w.sleeps_from).saturating_since(w.began)
    }

    /// `rank` copies a rendezvous's bytes in a test, awake until `until`.
    pub fn copying(&mut self, rank: u32, until: Instant) {
        let w = &mut self.waits[rank as usize];
        w.testing_until = w.testing_until.max(until);
    }

    /// `rank`'s collective is done at `now`: whether the rank sleeps in its
    /// wait (it then sees it at its next test), else (it is still testing,
    /// or not waiting) it waits no more; and its spin not taken yet, up to
    /// `now` ([`MpiWaits::take_spin`], taken before the wait ends).
    pub fn answer(&mut self, rank: u32, now: Instant) -> (bool, Duration) {
        let spun = self.take_spin(rank, now);
        let w = &mut self.waits[rank as usize];
        w.answered = w.sleeping(now);
        if !w.answered {
            w.waiting = false;
        }
        (w.answered, spun)
    }

    /// `rank` goes on: it waits no more.
    pub fn end(&mut self, rank: u32) {
        let w = &mut self.waits[rank as usize];
        (w.waiting, w.answered) = (false, false);
    }

    /// A sleep of `pause` of `rank` in wait `wait` ended: what it does.
    pub fn wake(&self, rank: u32, wait: u32, pause: Duration) -> Wake {
        let w = self.waits[rank as usize];
        match w {
            _ if !w.waiting || w.number != wait => Wake::Stale,
            Wait { answered: true, .. } => Wake::Answered,
            _ => Wake::Again(Duration(pause.as_ns().saturating_mul(2)).min(LONGEST_PAUSE)),
        }
    }

    /// How long a sleep asked for `pause` lasts: with the timer's slack.
    pub fn slept(pause: Duration) -> Duration {
        Duration(pause.as_ns().saturating_add(TIMER_SLACK.as_ns()))
    }

    pub fn check_invariants(&self) {
        for (rank, w) in self.waits.iter().enumerate() {
            assert!(!w.answered || w.waiting, "rank {rank} has an answer for a wait it is not in");
            assert!(w.wakes_at > w.sleeps_from || w.number == 0, "rank {rank} wakes before it sleeps");
            assert!(w.sleeps_from >= w.began, "rank {rank} spins before its wait");
        }
    }
}

impl Wait {
    /// Whether the rank sleeps in this wait at `now`: past its spin, and not
    /// awake copying in a test.
    fn sleeping(&self, now: Instant) -> bool {
        self.waiting && now >= self.sleeps_from && now > self.testing_until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_double_to_a_millisecond_and_end_at_the_test_after_the_answer() {
        let t = |us: u64| Instant::ZERO + Duration::from_us(us);
        assert_eq!(spin(Duration::from_ns(500)), Duration::from_us(32), "64 tests of 0.5 us");
        let mut waits = MpiWaits::new(2, spin(Duration::from_ns(500)));
        let (first, wakes) = waits.begin(1, t(0));
        assert_eq!(wakes, t(32 + 20 + 50), "the spin, the first pause and the timer's slack");
        assert_eq!(waits.next_test(1, t(10)), t(10), "spinning: it tests at once");
        assert_eq!(waits.next_test(1, t(40)), wakes, "asleep: at the end of its sleep");
        let mut pause = FIRST_PAUSE;
        let mut pauses = Vec::new();
        while let Wake::Again(next) = waits.wake(1, first, pause) {
            pauses.push(pause.as_ns() / 1000);
            pause = next;
            if pauses.len() == 8 {
                break;
            }
        }
        assert_eq!(pauses, [20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(MpiWaits::slept(pause).as_ns(), 1_050_000, "with the timer's slack");
        assert!(waits.answer(1, t(100)).0, "it sleeps: it sees the answer when it wakes");
        waits.check_invariants();
        assert_eq!(waits.wake(1, first, pause), Wake::Answered);
        waits.end(1);
        assert_eq!(waits.wake(1, first, pause), Wake::Stale, "a wake-up after the wait");
        let (second, _) = waits.begin(1, t(200));
        assert_eq!(waits.wake(1, first, pause), Wake::Stale, "an earlier wait's wake-up");
        assert!(matches!(waits.wake(1, second, FIRST_PAUSE), Wake::Again(_)));
        assert_eq!(waits.wake(0, 0, FIRST_PAUSE), Wake::Stale, "rank 0 never waited");
        assert!(!waits.answer(0, t(200)).0, "a rank not waiting goes on at once");
        let (third, _) = waits.begin(1, t(300));
        assert!(!waits.answer(1, t(331)).0, "still testing: it goes on at once");
        assert_eq!(waits.wake(1, third, FIRST_PAUSE), Wake::Stale, "and its wait is over");
        waits.check_invariants();
    }

    #[test]
    fn a_rank_copying_in_a_test_sees_its_answer_at_once() {
        let t = |us: u64| Instant::ZERO + Duration::from_us(us);
        let mut waits = MpiWaits::new(1, Duration::ZERO);
        let (wait, wakes) = waits.begin(0, t(0));
        waits.sleep_until(0, t(500));
        assert_eq!(waits.next_test(0, t(100)), t(500), "its next test ends its sleep");
        assert_ne!(wakes, t(500));
        waits.copying(0, t(700));
        assert!(!waits.answer(0, t(650)).0, "awake copying: it goes on at once");
        assert_eq!(waits.wake(0, wait, FIRST_PAUSE), Wake::Stale);
        let (_, _) = waits.begin(0, t(800));
        assert!(waits.answer(0, t(900)).0, "a new wait sleeps again: the copy was the last wait's");
        waits.check_invariants();
    }

    #[test]
    fn a_spin_is_taken_once_up_to_its_answer_or_its_first_sleep() {
        let t = |us: u64| Instant::ZERO + Duration::from_us(us);
        let mut waits = MpiWaits::new(2, spin(Duration::from_ns(500)));
        assert_eq!(waits.take_spin(0, t(5)), Duration::ZERO, "not waiting: no spin");
        waits.begin(0, t(0));
        assert_eq!(waits.answer(0, t(10)), (false, Duration::from_us(10)), "answered 10 us into its spin");
        assert_eq!(waits.take_spin(0, t(20)), Duration::ZERO, "its wait is over");
        waits.begin(0, t(50));
        assert_eq!(waits.take_spin(0, t(60)), Duration::from_us(10));
        assert_eq!(waits.take_spin(0, t(70)), Duration::ZERO, "taken already");
        waits.begin(0, t(100));
        assert_eq!(waits.take_spin(0, t(400)), Duration::from_us(32), "asleep: the whole spin, 64 tests");
        waits.check_invariants();
    }
}
