//! The simulator's pending-event set: a monotone priority queue on virtual time.
//!
//! [`EventQueue`] hands events back in time order, and events due at the same
//! [`Instant`] in the order they were pushed, so a run is a pure function of
//! its inputs and seed. It is not a general priority queue: time never runs
//! backwards, so an event may not be scheduled before the time of the last
//! event popped (see [`EventQueue::push`]).
//!
//! # Why a radix heap
//!
//! A binary heap costs `O(log n)` cache-missing comparisons per operation and
//! falls from about 13 million to under 1 million events per second between
//! four thousand and one million pending events. A simulated cluster of
//! thousands of nodes keeps about that many timers and messages in flight.
//! The radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) uses the monotone
//! property instead of comparisons: with `now` the time of the last pop, an
//! event at time `t > now` lives in bucket `b`, the highest bit in which `t`
//! and `now` differ. Push is an append. Pop takes the front of the events due
//! at exactly `now`; when there are none it moves `now` to the smallest time
//! of the lowest non-empty bucket and redistributes that bucket into lower
//! ones. An event only ever moves to a lower bucket, so it moves at most 64
//! times, and in practice a handful of times: the work is sequential appends,
//! which the cache likes.
//!
//! # Why the buckets hold slot numbers
//!
//! An event stays where it was pushed, in a slot of one table, until it is
//! popped; the buckets and `ready` move only `(time, slot)` pairs. A
//! simulator's event is around a hundred bytes, and moving it at every
//! redistribution was a cache-missing store per move (the largest single
//! cost of the event loop). Freed slots are reused last freed first, so the
//! table stays as large as the most events ever pending at once, and its
//! hot end stays in the cache.
//!
//! # Why ties come out in push order
//!
//! The bucket of an event is a function of its time and `now` alone, and
//! moving `now` to the minimum of bucket `b` leaves every event above `b` where
//! it was (the new `now` agrees with the old one on the bits above `b`). So
//! events with the same time always share a bucket. Every bucket keeps its
//! events in push order: a push appends the newest event, and redistribution
//! walks the bucket front to back into buckets that were empty (they are all
//! below the lowest non-empty one). Events due at `now` pop from the front.
//! Hence no sequence number is needed; the property tests check this against
//! a binary heap keyed on `(time, sequence number)`.
//!
//! # Invariants
//!
//! - Every pending event is due at or after `now`.
//! - `ready` holds exactly the pending events due at `now`, in push order.
//! - An event at `t > now` sits in bucket `63 - (t ^ now).leading_zeros()`,
//!   `bucket_min_ns` holds each bucket's smallest time, and bit `b` of
//!   `occupied` is set exactly when bucket `b` is non-empty.
//! - Each pending event's slot is named once, by `ready` or by one bucket;
//!   every other slot is empty and on the free list, once.

use lanefs_core::units::Instant;
use std::collections::VecDeque;

/// One bucket per bit of a `u64` nanosecond time.
const BUCKET_COUNT: usize = 64;

/// Pending events ordered by time, ties in push order.
///
/// Memory is that of the events (in as many slots as were ever pending at
/// once) plus twelve bytes each in a bucket; bucket and slot storage is
/// kept and reused between pops rather than freed.
#[derive(Clone, Debug)]
pub struct EventQueue<E> {
    /// Time of the last popped event (zero before the first pop).
    now_ns: u64,
    /// Slots of the events due at exactly `now_ns`, in push order.
    ready: VecDeque<Slot>,
    /// `buckets[b]` holds `(time_ns, slot)` for events whose time first
    /// differs from `now_ns` at bit `b`.
    buckets: [Vec<(u64, Slot)>; BUCKET_COUNT],
    /// Smallest time in each bucket, `u64::MAX` for an empty one.
    bucket_min_ns: [u64; BUCKET_COUNT],
    /// Bit `b` is set when `buckets[b]` is non-empty.
    occupied: u64,
    /// Every pending event, in the slot it was pushed into.
    slots: Vec<Option<E>>,
    /// The empty slots, the last freed on top.
    free: Vec<Slot>,
    len: usize,
}

/// An event's place in [`EventQueue::slots`]. Four billion pending events
/// would be hundreds of gigabytes: a `u32` keeps the buckets' entries small.
type Slot = u32;

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        EventQueue {
            now_ns: 0,
            ready: VecDeque::new(),
            buckets: std::array::from_fn(|_| Vec::new()),
            bucket_min_ns: [u64::MAX; BUCKET_COUNT],
            occupied: 0,
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Schedules `event` at `at`.
    ///
    /// `at` must not be earlier than [`now`](Self::now), the time of the last
    /// popped event: scheduling into the past is a bug in the caller. Debug
    /// builds panic on it; release builds schedule the event at `now`
    /// instead, after the events already due then, so that a long run
    /// degrades by a few nanoseconds rather than by corrupting the queue.
    pub fn push(&mut self, at: Instant, event: E) {
        debug_assert!(
            at.0 >= self.now_ns,
            "event scheduled at {} ns, before the current time {} ns",
            at.0,
            self.now_ns
        );
        let time_ns = at.0.max(self.now_ns);
        let slot = match self.free.pop() {
            Some(slot) => {
                debug_assert!(self.slots[slot as usize].is_none(), "a free slot holds an event");
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                let slot = Slot::try_from(self.slots.len()).expect("fewer than 2^32 pending events");
                self.slots.push(Some(event));
                slot
            }
        };
        self.place(time_ns, slot);
        self.len += 1;
    }

    /// Removes and returns the earliest event with its time; among events at
    /// the same time, the one pushed first. `None` when the queue is empty.
    pub fn pop(&mut self) -> Option<(Instant, E)> {
        if self.ready.is_empty() {
            self.advance()?;
        }
        let slot = self.ready.pop_front()?;
        let event = self.slots[slot as usize].take().expect("a pending event's slot holds it");
        self.free.push(slot);
        self.len -= 1;
        Some((Instant(self.now_ns), event))
    }

    /// Time of the event [`pop`](Self::pop) would return, without removing it.
    pub fn peek_time(&self) -> Option<Instant> {
        if !self.ready.is_empty() {
            return Some(Instant(self.now_ns));
        }
        if self.occupied == 0 {
            return None;
        }
        Some(Instant(self.bucket_min_ns[self.occupied.trailing_zeros() as usize]))
    }

    /// Time of the last popped event, [`Instant::ZERO`] before the first pop.
    /// No event may be pushed earlier than this.
    pub fn now(&self) -> Instant {
        Instant(self.now_ns)
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no event is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Files the event of `slot`, due at `time_ns >= now_ns`, under its bucket.
    fn place(&mut self, time_ns: u64, slot: Slot) {
        debug_assert!(time_ns >= self.now_ns);
        if time_ns == self.now_ns {
            self.ready.push_back(slot);
            return;
        }
        let bucket = bucket_of(time_ns, self.now_ns);
        self.buckets[bucket].push((time_ns, slot));
        self.bucket_min_ns[bucket] = self.bucket_min_ns[bucket].min(time_ns);
        self.occupied |= 1 << bucket;
    }

    /// With nothing due at `now`, moves `now` to the earliest pending time and
    /// redistributes the lowest non-empty bucket. `None` when nothing is pending.
    fn advance(&mut self) -> Option<()> {
        debug_assert!(self.ready.is_empty());
        if self.occupied == 0 {
            debug_assert_eq!(self.len, 0);
            return None;
        }
        let bucket = self.occupied.trailing_zeros() as usize;
        let mut events = std::mem::take(&mut self.buckets[bucket]);
        debug_assert!(!events.is_empty());
        self.now_ns = self.bucket_min_ns[bucket];
        self.bucket_min_ns[bucket] = u64::MAX;
        self.occupied &= !(1 << bucket);
        for (time_ns, slot) in events.drain(..) {
            // Every event of the bucket agrees with the new `now` above bit
            // `bucket` and at it, so it lands strictly lower (or in `ready`).
            debug_assert!(time_ns == self.now_ns || bucket_of(time_ns, self.now_ns) < bucket);
            self.place(time_ns, slot);
        }
        debug_assert!(self.buckets[bucket].is_empty());
        // Keep the allocation for the next time this bucket fills.
        self.buckets[bucket] = events;
        debug_assert!(!self.ready.is_empty());
        Some(())
    }

    /// Checks every structural invariant; `O(len)`, for tests.
    #[cfg(test)]
    fn check_invariants(&self) {
        let mut counted = self.ready.len();
        for (bucket, events) in self.buckets.iter().enumerate() {
            assert_eq!(self.occupied & (1 << bucket) != 0, !events.is_empty(), "occupied bit {bucket}");
            let min_ns = events.iter().map(|&(time_ns, _)| time_ns).min().unwrap_or(u64::MAX);
            assert_eq!(self.bucket_min_ns[bucket], min_ns, "minimum of bucket {bucket}");
            for &(time_ns, _) in events {
                assert!(time_ns > self.now_ns);
                assert_eq!(bucket_of(time_ns, self.now_ns), bucket);
            }
            counted += events.len();
        }
        assert_eq!(counted, self.len);
        // Each slot named once: by a pending event, or by the free list.
        let mut named = vec![false; self.slots.len()];
        let pending = self.ready.iter().chain(self.buckets.iter().flatten().map(|(_, slot)| slot));
        for &slot in pending {
            assert!(self.slots[slot as usize].is_some(), "pending slot {slot} is empty");
            assert!(!std::mem::replace(&mut named[slot as usize], true), "slot {slot} named twice");
        }
        for &slot in &self.free {
            assert!(self.slots[slot as usize].is_none(), "free slot {slot} holds an event");
            assert!(!std::mem::replace(&mut named[slot as usize], true), "slot {slot} named twice");
        }
        assert!(named.iter().all(|&n| n), "a slot is neither pending nor free");
    }
}

/// Bucket of an event due at `time_ns > now_ns`: the highest differing bit.
fn bucket_of(time_ns: u64, now_ns: u64) -> usize {
    debug_assert!(time_ns > now_ns);
    (u64::BITS - 1 - (time_ns ^ now_ns).leading_zeros()) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn empty_queue_pops_nothing() {
        let mut queue: EventQueue<u32> = EventQueue::new();
        assert!(queue.is_empty());
        assert_eq!(queue.len(), 0);
        assert_eq!(queue.peek_time(), None);
        assert_eq!(queue.pop(), None);
        assert_eq!(queue.now(), Instant::ZERO);
        queue.push(Instant(7), 1);
        assert_eq!(queue.pop(), Some((Instant(7), 1)));
        assert_eq!(queue.pop(), None);
        assert!(queue.is_empty());
        assert_eq!(queue.now(), Instant(7), "popping from an empty queue leaves the time alone");
        queue.check_invariants();
    }

    #[test]
    fn pops_in_time_order() {
        let mut queue = EventQueue::new();
        for (time_ns, event) in [(30, 'c'), (10, 'a'), (u64::MAX, 'z'), (20, 'b'), (0, '0')] {
            queue.push(Instant(time_ns), event);
        }
        assert_eq!(queue.len(), 5);
        assert_eq!(queue.peek_time(), Some(Instant(0)));
        let popped: Vec<_> = std::iter::from_fn(|| queue.pop()).map(|(at, event)| (at.0, event)).collect();
        assert_eq!(popped, [(0, '0'), (10, 'a'), (20, 'b'), (30, 'c'), (u64::MAX, 'z')]);
    }

    #[test]
    fn ties_pop_in_push_order() {
        let mut queue = EventQueue::new();
        for event in 0..100 {
            queue.push(Instant(1_000), event);
        }
        let popped: Vec<_> = std::iter::from_fn(|| queue.pop()).map(|(_, event)| event).collect();
        assert_eq!(popped, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn ties_keep_push_order_across_time_advances() {
        // "early" and "late" are due at the same time but are filed while
        // `now` differs, so they pass through different redistributions.
        let mut queue = EventQueue::new();
        queue.push(Instant(0b1011_0000), "early");
        queue.push(Instant(0b1000_0000), "step");
        assert_eq!(queue.pop(), Some((Instant(0b1000_0000), "step")));
        queue.push(Instant(0b1010_0000), "step2");
        queue.push(Instant(0b1011_0000), "late");
        queue.check_invariants();
        assert_eq!(queue.pop(), Some((Instant(0b1010_0000), "step2")));
        queue.push(Instant(0b1011_0000), "latest");
        queue.check_invariants();
        assert_eq!(queue.pop(), Some((Instant(0b1011_0000), "early")));
        queue.push(Instant(0b1011_0000), "now");
        assert_eq!(queue.pop(), Some((Instant(0b1011_0000), "late")));
        assert_eq!(queue.pop(), Some((Instant(0b1011_0000), "latest")));
        assert_eq!(queue.pop(), Some((Instant(0b1011_0000), "now")));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn peek_time_sees_the_earliest_pending_event() {
        let mut queue = EventQueue::new();
        queue.push(Instant(500), ());
        queue.push(Instant(300), ());
        assert_eq!(queue.peek_time(), Some(Instant(300)));
        queue.pop();
        assert_eq!(queue.peek_time(), Some(Instant(500)));
        queue.push(Instant(300), ());
        assert_eq!(queue.peek_time(), Some(Instant(300)), "an event at `now` is due first");
        queue.pop();
        queue.pop();
        assert_eq!(queue.peek_time(), None);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "before the current time")]
    fn pushing_into_the_past_panics_in_debug_builds() {
        let mut queue = EventQueue::new();
        queue.push(Instant(100), ());
        queue.pop();
        queue.push(Instant(99), ());
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn pushing_into_the_past_is_clamped_to_now_in_release_builds() {
        let mut queue = EventQueue::new();
        queue.push(Instant(100), 'a');
        queue.push(Instant(100), 'b');
        assert_eq!(queue.pop(), Some((Instant(100), 'a')));
        queue.push(Instant(99), 'c');
        assert_eq!(queue.pop(), Some((Instant(100), 'b')));
        assert_eq!(queue.pop(), Some((Instant(100), 'c')));
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Push an event this many nanoseconds after the current time.
        Push(u64),
        Pop,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            // Many ties, near-ties, spread-out times and the far end of time.
            2 => (0..4u64).prop_map(Op::Push),
            2 => (0..1_000u64).prop_map(Op::Push),
            1 => (0..u64::from(u32::MAX)).prop_map(Op::Push),
            1 => any::<u64>().prop_map(Op::Push),
            4 => Just(Op::Pop),
        ]
    }

    proptest! {
        #[test]
        fn matches_a_binary_heap_on_time_then_push_order(ops in prop::collection::vec(op(), 0..400)) {
            let mut queue = EventQueue::new();
            let mut reference: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
            let mut now_ns = 0u64;
            let mut sequence = 0u64;
            for op in ops {
                match op {
                    Op::Push(delay_ns) => {
                        let time_ns = now_ns.saturating_add(delay_ns);
                        queue.push(Instant(time_ns), sequence);
                        reference.push(Reverse((time_ns, sequence)));
                        sequence += 1;
                    }
                    Op::Pop => {
                        let expected = reference.pop().map(|Reverse((time_ns, seq))| (Instant(time_ns), seq));
                        prop_assert_eq!(queue.pop(), expected);
                        if let Some((at, _)) = expected {
                            now_ns = at.0;
                        }
                    }
                }
                prop_assert_eq!(queue.len(), reference.len());
                prop_assert_eq!(queue.peek_time(), reference.peek().map(|Reverse((time_ns, _))| Instant(*time_ns)));
                queue.check_invariants();
            }
            while let Some(Reverse((time_ns, seq))) = reference.pop() {
                prop_assert_eq!(queue.pop(), Some((Instant(time_ns), seq)));
            }
            prop_assert!(queue.is_empty());
        }
    }
}
