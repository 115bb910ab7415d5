//! Contention among a node's processes for its client's locks, in
//! modelled time: the part of a simulated client that says when a write's
//! copy into the page cache may begin.
//!
//! On one node, processes writing through one Lustre client contend for
//! the client's own locks (the KNL client talk of the seeds): every write
//! to a file takes a lock on the file's attributes (its size and times),
//! which stops one file's writes from going faster from about 16 processes
//! on, and every page copied in takes the page cache's lock, which stops
//! the node's copies as a whole from going faster at 32 to 64. With queued
//! locks (which the talk found to hold up where plain spinlocks collapse)
//! a lock held for a `1/k` share of each copy lets `k` processes through
//! at full speed and queues the rest, so the node's rate levels off at `k`
//! copies and does not fall beyond. This models each lock as that many
//! copies at once: a copy takes a slot of its file and one of the node,
//! the earliest free of each, and keeps them until it ends; more copies
//! than slots wait, first come first. Only a driver that keeps simulated
//! time uses it (with [`super::ClientConfig::copy_bytes_per_s`]).
//!
//! Invariants ([`CopySlots::check_invariants`]): each pool holds exactly
//! its count of slots, and files have pools only under a bound of their
//! own. A pool whose slots are all free is the same as a new one, so each
//! copy drops those: the table is bounded by the copies in flight.

use crate::units::{Instant, ObjectKey};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// How many of a node's processes copy at full speed at once, into one
/// file and into the page cache as a whole (`None`: no bound).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CopyContention {
    /// Processes writing one file through the client (the lock on its
    /// attributes).
    pub file_writers: Option<u32>,
    /// Processes copying into the client's page cache (its lock).
    pub node_writers: Option<u32>,
}

impl CopyContention {
    pub fn is_off(&self) -> bool {
        self.file_writers.is_none() && self.node_writers.is_none()
    }
}

/// A pool of slots, each free from some time on.
#[derive(Clone, Debug)]
struct Slots {
    free: BinaryHeap<Reverse<Instant>>,
    count: u32,
}

impl Slots {
    fn new(count: u32) -> Slots {
        let count = count.max(1);
        Slots { free: (0..count).map(|_| Reverse(Instant::ZERO)).collect(), count }
    }

    fn earliest(&self) -> Instant {
        self.free.peek().map_or(Instant::ZERO, |&Reverse(at)| at)
    }

    fn latest(&self) -> Instant {
        self.free.iter().map(|&Reverse(at)| at).max().unwrap_or(Instant::ZERO)
    }

    /// Takes the earliest free slot and keeps it until `until`.
    fn hold(&mut self, until: Instant) {
        let Reverse(free) = self.free.pop().expect("a pool of slots is never empty");
        debug_assert!(free <= until, "a slot kept until {until:?} is busy until {free:?}");
        self.free.push(Reverse(until));
    }

    fn check_invariants(&self, what: &str) {
        assert_eq!(
            self.free.len(),
            self.count as usize,
            "{what}: {} slots in a pool of {}",
            self.free.len(),
            self.count
        );
    }
}

/// The slots of a client's files and of its page cache.
#[derive(Clone, Debug, Default)]
pub(super) struct CopySlots {
    bounds: CopyContention,
    node: Option<Slots>,
    /// By the file's first object (which names the file).
    files: BTreeMap<ObjectKey, Slots>,
}

impl CopySlots {
    pub(super) fn new(bounds: CopyContention) -> CopySlots {
        CopySlots { bounds, node: bounds.node_writers.map(Slots::new), files: BTreeMap::new() }
    }

    /// A copy into `file`, ready at `ready`: runs `copy` from when a slot
    /// of the file and one of the node are free (it returns when the copy
    /// ends) and keeps both until then. Returns the copy's end.
    pub(super) fn run(&mut self, file: ObjectKey, ready: Instant, copy: impl FnOnce(Instant) -> Instant) -> Instant {
        if self.bounds.is_off() {
            return copy(ready);
        }
        // Pools idle from here on are as good as new.
        self.files.retain(|_, slots| slots.latest() > ready);
        let file_slots =
            self.bounds.file_writers.map(|count| self.files.entry(file).or_insert_with(|| Slots::new(count)));
        let mut start = ready;
        if let Some(slots) = &file_slots {
            start = start.max(slots.earliest());
        }
        if let Some(slots) = &self.node {
            start = start.max(slots.earliest());
        }
        let end = copy(start).max(start);
        if let Some(slots) = file_slots {
            slots.hold(end);
        }
        if let Some(slots) = &mut self.node {
            slots.hold(end);
        }
        end
    }

    pub(super) fn check_invariants(&self) {
        if let Some(node) = &self.node {
            node.check_invariants("the page cache's copy slots");
        }
        assert!(self.bounds.file_writers.is_some() || self.files.is_empty(), "copy slots: files' pools with no bound");
        for (file, slots) in &self.files {
            slots.check_invariants(&format!("the copy slots of the file of {file:?}"));
            assert_eq!(Some(slots.count), self.bounds.file_writers.map(|n| n.max(1)), "copy slots of {file:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Duration, ObjectId, OstIndex};

    fn file(n: u64) -> ObjectKey {
        ObjectKey { ost: OstIndex(0), object: ObjectId(n) }
    }

    fn copies(slots: &mut CopySlots, f: ObjectKey, n: usize) -> Vec<Instant> {
        let ms = Duration::from_ms(1);
        (0..n).map(|_| slots.run(f, Instant::ZERO, |start| start + ms)).collect()
    }

    #[test]
    fn without_bounds_every_copy_runs_at_once() {
        let mut slots = CopySlots::new(CopyContention::default());
        let ends = copies(&mut slots, file(1), 64);
        assert!(ends.iter().all(|&end| end == Instant::ZERO + Duration::from_ms(1)));
        slots.check_invariants();
    }

    #[test]
    fn writers_of_one_file_beyond_its_bound_wait_and_other_files_do_not() {
        let bounds = CopyContention { file_writers: Some(2), node_writers: None };
        let mut slots = CopySlots::new(bounds);
        let ms = Duration::from_ms(1);
        let ends = copies(&mut slots, file(1), 5);
        let at = |n: u64| Instant::ZERO + Duration(ms.as_ns() * n);
        assert_eq!(ends, vec![at(1), at(1), at(2), at(2), at(3)]);
        assert_eq!(copies(&mut slots, file(2), 2), vec![at(1), at(1)], "another file has slots of its own");
        slots.check_invariants();
    }

    #[test]
    fn the_node_bound_holds_across_files() {
        let bounds = CopyContention { file_writers: Some(16), node_writers: Some(3) };
        let mut slots = CopySlots::new(bounds);
        let ms = Duration::from_ms(1);
        let ends: Vec<Instant> = (0..6).map(|n| slots.run(file(n), Instant::ZERO, |start| start + ms)).collect();
        let late = ends.iter().filter(|&&end| end > Instant::ZERO + ms).count();
        assert_eq!(late, 3, "three copies at once, the next three after them: {ends:?}");
        slots.check_invariants();
    }

    #[test]
    fn idle_pools_are_dropped() {
        let bounds = CopyContention { file_writers: Some(1), node_writers: None };
        let mut slots = CopySlots::new(bounds);
        for n in 0..100 {
            let at = Instant::ZERO + Duration::from_ms(10 * n);
            slots.run(file(n), at, |start| start + Duration::from_ms(1));
        }
        assert_eq!(slots.files.len(), 1, "only the file still copying keeps its pool");
        slots.check_invariants();
    }
}
