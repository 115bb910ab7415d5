//! Which page frames each client has written into before: the first write
//! into a frame of shared memory faults, and the kernel gives the page its
//! memory, zeroed, before the copy lands in it; the first time an OSS reads
//! that frame (a local client's bulk, which lanefs's OSS reads from the
//! client's memory), it faults to map it.
//!
//! A lanefs client takes the lowest free frame of its arena, and a frame
//! is free again once its page has left the cache, so the frames in use
//! stay packed at the start of the arena: a client has touched as many
//! frames as the most pages its cache ever held (up to the arena's size;
//! see [`lanefs_core::client::ClientConfig::arena_frames`]), and a write
//! touches new frames only when it takes the cache past that. What the OSS
//! has still to map is what the client touched for the first time and has
//! not yet sent.
//!
//! Invariants ([`Frames::check_invariants`]): a client's frames touched
//! are at most its arena's, and those the OSS has still to map are at most
//! those.

/// Every client's first touches, for a world that charges them.
#[derive(Clone, Debug)]
pub struct Frames {
    /// Frames of each client's arena.
    arena: u64,
    /// Frames each client has written into (the most pages its cache
    /// held), at most `arena`.
    touched: Vec<u64>,
    /// Of those, frames whose bytes no write RPC has carried yet: the OSS
    /// maps them when it reads them.
    unmapped: Vec<u64>,
}

impl Frames {
    pub fn new(clients: usize, arena_frames: u32) -> Frames {
        Frames { arena: u64::from(arena_frames), touched: vec![0; clients], unmapped: vec![0; clients] }
    }

    /// Client `node`'s cache holds `cached_pages` pages after a write:
    /// how many frames the write touched for the first time.
    pub fn touch(&mut self, node: u32, cached_pages: u64) -> u64 {
        let n = node as usize;
        let new = cached_pages.min(self.arena).saturating_sub(self.touched[n]);
        self.touched[n] += new;
        self.unmapped[n] += new;
        new
    }

    /// A write RPC of client `node` carries `pages` pages: how many of them
    /// the OSS reads for the first time (the client's first-touched frames
    /// go out in the order it wrote them, which is near enough the order it
    /// sends them).
    pub fn map(&mut self, node: u32, pages: u64) -> u64 {
        let n = node as usize;
        let new = pages.min(self.unmapped[n]);
        self.unmapped[n] -= new;
        new
    }

    /// Frames the clients have written into for the first time, all told.
    pub fn touched(&self) -> u64 {
        self.touched.iter().sum()
    }

    pub fn check_invariants(&self) {
        for (n, (&touched, &unmapped)) in self.touched.iter().zip(&self.unmapped).enumerate() {
            assert!(touched <= self.arena, "client {n} touched {touched} frames of {}", self.arena);
            assert!(unmapped <= touched, "client {n}: {unmapped} frames to map of {touched} touched");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_frames_are_those_past_the_most_pages_cached_and_mapped_once() {
        let mut frames = Frames::new(2, 10);
        assert_eq!(frames.touch(0, 4), 4);
        assert_eq!(frames.touch(0, 3), 0, "the cache dropped a page: its frame is used again");
        assert_eq!(frames.touch(0, 12), 6, "the arena has 10 frames");
        assert_eq!(frames.touch(0, 12), 0, "every frame used before");
        assert_eq!(frames.touch(1, 3), 3, "each client has its own");
        assert_eq!(frames.map(0, 7), 7);
        assert_eq!(frames.map(0, 7), 3);
        assert_eq!(frames.map(0, 7), 0);
        frames.check_invariants();
    }
}
