//! The books of the page cache's runs: one page's state (which bytes are
//! known, dirty, under writeback), a run of pages in one state with its
//! frames, and the geometry of byte ranges over pages (segments, clipping,
//! merged extents). [`super`] keeps runs of these per object and the
//! indexes and totals over them.

use crate::extent::Extent;
use crate::msg::PayloadKind;
use crate::pages::{PageBuf, PAGE_BYTES};
use crate::units::PAGE_SIZE;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::fmt;

pub(super) const PAGE_END: u16 = PAGE_SIZE as u16;
const _: () = assert!(PAGE_SIZE.is_power_of_two() && PAGE_SIZE <= u16::MAX as u64);

/// Half-open byte ranges within one page: sorted, disjoint, non-adjacent.
///
/// A short list rather than a 4096-bit bitmap: clean pages (the common case)
/// allocate nothing, a typical write leaves one or two ranges, and "first
/// dirty run from here" is a lookup rather than a bit scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Ranges(pub(super) SmallVec<[(u16, u16); 2]>);

impl Ranges {
    /// Adds the non-empty range `[start, end)`.
    pub(super) fn insert(&mut self, start: u16, end: u16) {
        let (mut s, mut e) = (start, end);
        // Ranges never touch one another, so one pass absorbs every range
        // touching the new one, even as it grows.
        self.0.retain(|&mut (a, b)| {
            let touches = a <= e && s <= b;
            if touches {
                (s, e) = (s.min(a), e.max(b));
            }
            !touches
        });
        let at = self.0.partition_point(|&(a, _)| a < s);
        self.0.insert(at, (s, e));
    }

    /// Removes the non-empty range `[start, end)`.
    pub(super) fn remove(&mut self, start: u16, end: u16) {
        let cut = |&(a, b): &(u16, u16)| [(a, b.min(start)), (a.max(end), b)];
        self.0 = self.0.iter().flat_map(cut).filter(|&(a, b)| a < b).collect();
    }

    /// The first range meeting `[start, end)`, clipped to it.
    pub(super) fn first_within(&self, (start, end): (u16, u16)) -> Option<(u16, u16)> {
        let &(a, b) = self.0.iter().find(|&&(_, b)| b > start)?;
        Some((a.max(start), b.min(end))).filter(|(a, b)| a < b)
    }

    pub(super) fn check(&self) {
        let inside = self.0.iter().all(|&(a, b)| a < b && b <= PAGE_END);
        let apart = self.0.windows(2).all(|w| w[0].1 < w[1].0);
        assert!(inside && apart, "{self:?}");
    }
}

/// The union of two range lists, merged, in order. It allocates nothing:
/// the page cache asks for it several times per page and write.
pub(super) fn union<'a>(a: &'a Ranges, b: &'a Ranges) -> impl Iterator<Item = (u16, u16)> + 'a {
    let (mut a, mut b) = (a.0.iter().copied().peekable(), b.0.iter().copied().peekable());
    let mut lowest = move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) if y.0 < x.0 => b.next(),
        (Some(_), _) => a.next(),
        (None, _) => b.next(),
    };
    let mut pending = None;
    std::iter::from_fn(move || {
        let (start, mut end) = pending.take().or_else(&mut lowest)?;
        loop {
            match lowest() {
                Some((a, b)) if a <= end => end = end.max(b),
                next => {
                    pending = next;
                    return Some((start, end));
                }
            }
        }
    })
}

/// The state of a page: which of its bytes are known, dirty and under
/// writeback. Every page of a run is in one state; the bytes live in the
/// run's frames.
#[derive(Clone, PartialEq)]
pub(super) struct Page {
    /// Every byte is known: fetched from the server or written locally.
    pub(super) uptodate: bool,
    pub(super) dirty: Ranges,
    pub(super) writeback: Ranges,
    /// One past the highest byte ever written locally into this page (0 if none).
    pub(super) written_end: u16,
}

impl Page {
    pub(super) fn new() -> Self {
        Page { uptodate: false, dirty: Ranges::default(), writeback: Ranges::default(), written_end: 0 }
    }

    /// Bytes written locally that the server does not have yet.
    pub(super) fn local(&self) -> impl Iterator<Item = (u16, u16)> + '_ {
        union(&self.dirty, &self.writeback)
    }

    pub(super) fn cached_dirty(&self) -> u64 {
        let bytes = |ranges: &Ranges| ranges.0.iter().map(|&(a, b)| u64::from(b - a)).sum();
        // Every total update asks this; most pages are dirty or under
        // writeback but not both, and then no union is needed.
        match (self.dirty.0.is_empty(), self.writeback.0.is_empty()) {
            (_, true) => bytes(&self.dirty),
            (true, false) => bytes(&self.writeback),
            (false, false) => self.local().map(|(a, b)| u64::from(b - a)).sum(),
        }
    }

    pub(super) fn knows(&self, start: u16, end: u16) -> bool {
        self.uptodate || self.local().any(|(a, b)| a <= start && end <= b)
    }

    /// A local write of `[start, end)` (its bytes are put in the frame by
    /// the caller).
    pub(super) fn written(&mut self, start: u16, end: u16) {
        self.dirty.insert(start, end);
        self.written_end = self.written_end.max(end);
        self.uptodate |= self.knows(0, PAGE_END);
    }

    /// Takes the server's bytes into `frame` except where local bytes are
    /// newer.
    pub(super) fn fill(&self, frame: &mut [u8; PAGE_BYTES], server: &[u8]) {
        let mut pos = 0;
        for (a, b) in self.local() {
            let a = usize::from(a);
            frame[pos..a].copy_from_slice(&server[pos..a]);
            pos = usize::from(b);
        }
        frame[pos..].copy_from_slice(&server[pos..]);
    }

    /// Forgets every byte at or after `at` (the caller zeroes them).
    pub(super) fn truncate(&mut self, at: u16) {
        self.dirty.remove(at, PAGE_END);
        self.writeback.remove(at, PAGE_END);
        self.written_end = self.written_end.min(at);
    }
}

impl fmt::Debug for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (dirty, writeback) = (&self.dirty.0, &self.writeback.0);
        write!(f, "Page {{ uptodate: {}, dirty: {dirty:?}, ", self.uptodate)?;
        write!(f, "writeback: {writeback:?}, written_end: {} }}", self.written_end)
    }
}

/// Byte pages merged into one run at most: a run is split wherever an
/// operation starts or ends inside it, which moves its frames, so they are
/// kept to a few megabytes.
pub(super) const BYTE_RUN_PAGES_MAX: u64 = 1024;

/// `pages` consecutive pages in one state: phantom pages (no bytes; a
/// megabyte written by the simulator is one entry, not 256) or pages of
/// bytes with one frame each (at most [`BYTE_RUN_PAGES_MAX`]).
#[derive(Clone, Debug)]
pub(super) struct Run {
    pub(super) pages: u64,
    pub(super) page: Page,
    /// The frame of each page, in order; `None` for phantom pages.
    pub(super) data: Option<Vec<PageBuf>>,
}

/// Which indexes of the page cache list a run: those of runs with dirty
/// bytes and of runs with bytes under writeback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Listed {
    pub(super) dirty: bool,
    pub(super) writeback: bool,
}

/// Where a run absent from the cache is listed: nowhere.
pub(super) const UNLISTED: Listed = Listed { dirty: false, writeback: false };

impl Run {
    pub(super) fn listed(&self) -> Listed {
        Listed { dirty: !self.page.dirty.0.is_empty(), writeback: !self.page.writeback.0.is_empty() }
    }

    pub(super) fn cached_dirty(&self) -> u64 {
        self.page.cached_dirty() * self.pages
    }

    pub(super) fn data_pages(&self) -> usize {
        if self.data.is_some() {
            self.pages as usize
        } else {
            0
        }
    }

    pub(super) fn end(&self, start: u64) -> u64 {
        start + self.pages
    }

    pub(super) fn kind(&self) -> PayloadKind {
        if self.data.is_some() {
            PayloadKind::Bytes
        } else {
            PayloadKind::Phantom
        }
    }

    /// Pages `[from, from + pages)` of this run (counted from its start),
    /// sharing its frames.
    pub(super) fn piece(&self, from: u64, pages: u64) -> Run {
        let data = self.data.as_ref().map(|d| d[from as usize..(from + pages) as usize].to_vec());
        Run { pages, page: self.page.clone(), data }
    }
}

/// One object's runs, keyed by the index of their first page; they never
/// overlap.
pub(super) type Runs = BTreeMap<u64, Run>;

/// The runs of `runs` meeting pages `[first, last]`, in order.
pub(super) fn runs_in(runs: &Runs, first: u64, last: u64) -> impl Iterator<Item = (u64, &Run)> {
    let before = runs.range(..first).next_back().filter(|(&s, r)| r.end(s) > first);
    before.into_iter().chain(runs.range(first..=last)).map(|(&s, r)| (s, r))
}

/// The run holding page `index`, if any: one descent of the tree.
pub(super) fn run_at(runs: &Runs, index: u64) -> Option<(u64, &Run)> {
    runs.range(..=index).next_back().filter(|(&s, r)| r.end(s) > index).map(|(&s, r)| (s, r))
}

/// The runs of `runs` meeting pages `[first, last]`, last first. It descends
/// the tree once where [`runs_in`] does twice, for callers that walk every
/// such run anyway: runs never overlap, so walking back from `last` the
/// runs end ever earlier, and the first one ending by `first` ends the walk.
pub(super) fn runs_in_rev(runs: &Runs, first: u64, last: u64) -> impl Iterator<Item = (u64, &Run)> {
    runs.range(..=last).rev().map(|(&s, r)| (s, r)).take_while(move |(s, r)| r.end(*s) > first)
}

/// The pages `[first, last]` a byte range covers, each page's part of it
/// being `[start, end)`: at most three segments (a partial first page, whole
/// pages, a partial last page), so a long range costs as much as a short one.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    pub(super) first: u64,
    pub(super) last: u64,
    pub(super) start: u16,
    pub(super) end: u16,
}

pub(super) fn segments(offset: u64, len: u64) -> SmallVec<[Segment; 3]> {
    let mut out = SmallVec::new();
    if len == 0 {
        return out;
    }
    let end = offset.checked_add(len).expect("byte range overflows u64");
    let (first, last) = (offset / PAGE_SIZE, (end - 1) / PAGE_SIZE);
    let head = (offset % PAGE_SIZE) as u16;
    let tail = ((end - 1) % PAGE_SIZE) as u16 + 1;
    if first == last {
        out.push(Segment { first, last, start: head, end: tail });
        return out;
    }
    let mut whole = (first + 1, last - 1);
    if head == 0 {
        whole.0 = first;
    } else {
        out.push(Segment { first, last: first, start: head, end: PAGE_END });
    }
    if tail == PAGE_END {
        whole.1 = last;
    }
    if whole.0 <= whole.1 {
        out.push(Segment { first: whole.0, last: whole.1, start: 0, end: PAGE_END });
    }
    if tail != PAGE_END {
        out.push(Segment { first: last, last, start: 0, end: tail });
    }
    out
}

/// Whether `bytes` is a whole number of pages.
pub(super) fn page_aligned(bytes: u64) -> bool {
    bytes & (PAGE_SIZE - 1) == 0
}

/// `range` clipped to page `index`, as in-page offsets `[start, end)`.
pub(super) fn clip(range: &Extent, index: u64) -> (u16, u16) {
    let base = index * PAGE_SIZE;
    let start = range.start.max(base) - base;
    let last = range.end.min(base + PAGE_SIZE - 1) - base;
    (start as u16, last as u16 + 1)
}

/// Whether some page of `[lo, hi]` (all in one state, `ranges`) has a byte
/// of `range` in `ranges`. Only the first and last page of `range` are
/// clipped, so three pages stand for all.
pub(super) fn meets(ranges: &Ranges, range: &Extent, lo: u64, hi: u64) -> bool {
    let mut probe = [Some(lo), Some(hi), (lo + 1 < hi).then_some(lo + 1)].into_iter().flatten();
    probe.any(|i| ranges.first_within(clip(range, i)).is_some())
}

/// Appends `ext`, merged into the last extent when contiguous and the result
/// stays within `len_max` bytes.
pub(super) fn push_merged(out: &mut Vec<Extent>, ext: Extent, len_max: u64) {
    match out.last_mut() {
        Some(last) if last.end + 1 == ext.start && last.len() + ext.len() <= len_max => last.end = ext.end,
        _ => out.push(ext),
    }
}

/// Appends pages `[first, last]` as [`push_merged`] would one page at a time.
pub(super) fn push_pages(out: &mut Vec<Extent>, first: u64, last: u64, len_max: u64) {
    let mut next = first;
    while next <= last {
        let room = match out.last() {
            Some(prev) if prev.end + 1 == next * PAGE_SIZE => (len_max - prev.len()) / PAGE_SIZE,
            _ => 0,
        };
        let take = if room > 0 { room } else { len_max / PAGE_SIZE }.min(last - next + 1);
        push_merged(out, Extent::from_offset_len(next * PAGE_SIZE, take * PAGE_SIZE), len_max);
        next += take;
    }
}
