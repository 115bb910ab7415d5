//! Inclusive byte extents, as Lustre's `ldlm_extent` (`[start, end]`).
//!
//! An extent always has `start <= end`; [`EOF`] stands for "to the end of the
//! object", so `[0, EOF]` is the whole object. Inclusive ends are kept (rather
//! than half-open ranges) so that lock extents print and compare exactly as
//! Lustre's do.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest object offset; an extent ending here reaches end of file.
pub const EOF: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Extent {
    pub start: u64,
    pub end: u64,
}

impl Extent {
    /// `[start, end]`; panics if `start > end` (callers validate user input first).
    pub fn new(start: u64, end: u64) -> Self {
        assert!(start <= end, "extent start {start} > end {end}");
        Extent { start, end }
    }

    /// `[offset, offset + len - 1]`; `len` must be non-zero.
    pub fn from_offset_len(offset: u64, len: u64) -> Self {
        assert!(len > 0, "empty extent at {offset}");
        Extent::new(offset, offset + (len - 1))
    }

    pub const WHOLE: Extent = Extent { start: 0, end: EOF };

    pub fn overlaps(&self, other: &Extent) -> bool {
        self.start <= other.end && other.start <= self.end
    }

    pub fn contains(&self, other: &Extent) -> bool {
        self.start <= other.start && other.end <= self.end
    }

    pub fn contains_offset(&self, offset: u64) -> bool {
        self.start <= offset && offset <= self.end
    }

    pub fn intersection(&self, other: &Extent) -> Option<Extent> {
        let start = self.start.max(other.start);
        let end = self.end.min(other.end);
        (start <= end).then_some(Extent { start, end })
    }

    /// Number of bytes covered, saturating for `[0, EOF]`.
    pub fn len(&self) -> u64 {
        (self.end - self.start).saturating_add(1)
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The smallest page-aligned extent containing this one (Lustre's client
    /// rounds every lock request this way before enqueueing it).
    pub fn page_aligned(&self, page_size: u64) -> Extent {
        debug_assert!(page_size.is_power_of_two());
        let start = self.start & !(page_size - 1);
        let end = self.end | (page_size - 1);
        Extent { start, end }
    }
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.end == EOF {
            write!(f, "[{}, EOF]", self.start)
        } else {
            write!(f, "[{}, {}]", self.start, self.end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_and_containment_are_inclusive() {
        let a = Extent::new(0, 9);
        assert!(a.overlaps(&Extent::new(9, 20)));
        assert!(!a.overlaps(&Extent::new(10, 20)));
        assert!(a.contains(&Extent::new(0, 9)));
        assert!(!a.contains(&Extent::new(0, 10)));
        assert_eq!(Extent::WHOLE.len(), u64::MAX);
        assert_eq!(a.intersection(&Extent::new(5, 30)), Some(Extent::new(5, 9)));
        assert_eq!(a.intersection(&Extent::new(10, 30)), None);
    }

    #[test]
    fn page_alignment_rounds_outward() {
        let e = Extent::new(4097, 8190).page_aligned(4096);
        assert_eq!(e, Extent::new(4096, 8191));
        assert_eq!(Extent::new(0, EOF).page_aligned(4096), Extent::WHOLE);
    }
}
