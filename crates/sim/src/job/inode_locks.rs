//! Writes through one mount to one file, one at a time.
//!
//! lanefs's mount opens files with `FOPEN_DIRECT_IO` alone, and Linux's
//! FUSE then holds a file's inode lock for the whole of each `write(2)` to
//! it (`fuse_dio_wr_exclusive_lock` in fs/fuse/file.c: exclusive unless the
//! file was opened with `FOPEN_PARALLEL_DIRECT_WRITES`), so the ranks of a
//! node writing one shared file through its mount take turns, each write
//! from its requests through the mount to the client's answer. Ranks on
//! other nodes have mounts, and inodes, of their own.
//!
//! This type keeps, per node, the rank whose write holds the shared
//! file's inode and the ranks waiting for it in the order they came.
//! Invariants ([`InodeLocks::check_invariants`]): ranks wait only behind
//! a holder, and no rank holds and waits, or waits twice.

use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub(super) struct InodeLocks {
    /// Per node: the rank whose write holds the inode.
    held: Vec<Option<u32>>,
    /// Per node: the ranks waiting for it, first come first.
    waiting: Vec<VecDeque<u32>>,
}

impl InodeLocks {
    pub(super) fn new(nodes: u32) -> InodeLocks {
        InodeLocks { held: vec![None; nodes as usize], waiting: vec![VecDeque::new(); nodes as usize] }
    }

    /// `rank`, on `node`, begins a write: whether it holds the inode now
    /// (else it waits its turn).
    pub(super) fn take(&mut self, node: u32, rank: u32) -> bool {
        let n = node as usize;
        if self.held[n].is_none() {
            self.held[n] = Some(rank);
            return true;
        }
        self.waiting[n].push_back(rank);
        false
    }

    /// `rank`'s write on `node` returned: the rank whose turn it now is.
    pub(super) fn give(&mut self, node: u32, rank: u32) -> Option<u32> {
        let n = node as usize;
        debug_assert_eq!(self.held[n], Some(rank), "rank {rank} lets go of an inode it does not hold");
        self.held[n] = self.waiting[n].pop_front();
        self.held[n]
    }

    pub(super) fn check_invariants(&self) {
        for (node, (held, waiting)) in self.held.iter().zip(&self.waiting).enumerate() {
            assert!(held.is_some() || waiting.is_empty(), "node {node}: ranks wait for a free inode");
            let mut seen: Vec<u32> = waiting.iter().copied().chain(*held).collect();
            seen.sort_unstable();
            let count = seen.len();
            seen.dedup();
            assert_eq!(seen.len(), count, "node {node}: a rank holds and waits, or waits twice");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_of_a_node_take_turns_in_the_order_they_came() {
        let mut locks = InodeLocks::new(2);
        assert!(locks.take(0, 3));
        assert!(!locks.take(0, 1));
        assert!(!locks.take(0, 2));
        assert!(locks.take(1, 5), "another node's mount has an inode of its own");
        locks.check_invariants();
        assert_eq!(locks.give(0, 3), Some(1));
        assert_eq!(locks.give(0, 1), Some(2));
        assert_eq!(locks.give(0, 2), None);
        assert!(locks.take(0, 3), "free again");
        locks.check_invariants();
    }
}
