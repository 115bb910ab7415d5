//! A client's page cache of OST objects.
//!
//! What it is: the cached pages (`PAGE_SIZE` bytes each) of every object a
//! client has read or written, with per-byte knowledge of which bytes are
//! *dirty* (written locally, not yet sent) and which are *under writeback*
//! (sent in a write RPC that has not completed), plus exact running totals of
//! *cached-dirty* bytes (dirty or under writeback, a byte counted once) per
//! OST and overall, for the client's dirty-cache limits.
//!
//! What it is not: it knows nothing of locks, RPCs or time. The client state
//! machine decides when a page may be cached (a covering lock is held), when
//! to write back (flush policy, lock cancellation) and when to drop pages
//! (cancellation, eviction); this module only keeps the books and enforces
//! the rules below. It is a pure data structure: no I/O, no clock.
//!
//! Invariants, asserted by [`PageCache::check_invariants`]:
//! - every page holds `PAGE_SIZE` bytes, or none if it is a phantom page; its
//!   dirty and writeback ranges are sorted, non-empty, disjoint,
//!   non-adjacent and inside the page;
//! - no object is kept with zero pages;
//! - the per-OST and overall cached-dirty totals equal a recount of the
//!   cached pages, so no count refers to a page that has been dropped;
//! - [`PageCache::data_pages`] and [`PageCache::cached_pages`] equal a
//!   recount;
//! - pages are kept as *runs* that never overlap: a run is one page of
//!   bytes, or any number of consecutive phantom pages in one state (so a
//!   megabyte written by the simulator is one entry, not 256); the dirty and
//!   writeback indexes list exactly the runs with such bytes.
//!
//! Every operation splits the runs at its bounds, applies itself once per
//! run (all pages of a run see the same part of the range, except the
//! range's first and last page, which get runs of their own), and merges
//! neighbouring phantom runs left in one state. The results are exactly
//! those of one entry per page: a property test replays random operations
//! against such a reference cache and compares every answer.
//!
//! Phantom pages (for the simulator, see [`crate::msg::Payload`]): a page
//! written with [`PageCache::write_phantom`] or filled with
//! [`PageCache::fill_phantom`] keeps exactly the books of a byte page (dirty,
//! writeback, uptodate, written end) but no 4 KiB buffer; reads of it answer
//! [`Payload::Phantom`] and writeback runs over it carry a phantom of the run's
//! length, cut at the same offsets as bytes would be. The client never mixes
//! the two kinds; if a caller does, phantom wins and no byte is made up: a
//! phantom write or fill turns a byte page into a phantom page (its bytes are
//! dropped), bytes written into a phantom page are counted but not kept, and
//! a read or a run touching any phantom page is a phantom.
//!
//! A byte is *known* (a read may return it) when its page is uptodate (every
//! byte fetched from the server or written locally) or the byte is dirty or
//! under writeback. Once written back, a byte of a page that is not uptodate
//! belongs to the server again and a read fetches the page.
//!
//! Why per-byte dirty ranges: a write of part of a page needs no
//! read-modify-write RPC to fetch the rest first. Only the written bytes are
//! sent; a later read fetches the page and merges it, local bytes winning
//! ([`PageCache::fill`]).
//!
//! Why a page with bytes under writeback is skipped by
//! [`PageCache::next_writeback`] until its RPC completes: then at most one
//! write RPC per page is in flight, so two writes of the same bytes are never
//! in flight at once and cannot be reordered on the way to the OST (an older
//! version can never land after a newer one). Rewriting bytes under writeback
//! just marks them dirty again; they go out in a later run.
//!
//! Files: this one keeps the runs of every object with their indexes and
//! totals; `pagecache_runs.rs` has one page's books, a run, and the
//! geometry of byte ranges over pages; `pagecache_writeback.rs` cuts write
//! RPCs out of the dirty runs.

use crate::extent::Extent;
use crate::msg::{Payload, PayloadKind};
use crate::pages::{PageBuf, PagePool, PageSpan, PAGE_BYTES};
use crate::units::{ObjectKey, OstIndex, PAGE_SIZE};
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet};

#[path = "pagecache_drop.rs"]
mod drop;
#[path = "pagecache_runs.rs"]
mod runs;
#[path = "pagecache_writeback.rs"]
mod writeback;
use runs::*;

/// Contiguous bytes handed to one write RPC, snapshotted when the run was
/// cut: the frames of its pages, shared with the cache (a later write to
/// one of them copies that page first), or a phantom of the run's length if
/// its pages are phantom pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WritebackRun {
    pub key: ObjectKey,
    pub offset: u64,
    pub data: Payload,
}

#[derive(Clone, Debug, Default)]
pub struct PageCache {
    /// Hashed by object (looked up at every step); walks in object order
    /// sort first.
    objects: FxHashMap<ObjectKey, Runs>,
    /// First pages of the runs with dirty bytes, per object, so that finding
    /// the next writeback run never walks clean or in-flight pages.
    dirty_runs: FxHashMap<ObjectKey, BTreeSet<u64>>,
    /// First pages of the runs with bytes under writeback, per object, so
    /// that "is anything of this object still in flight" (fsync, close,
    /// cancel) never walks the clean pages.
    writeback_runs: FxHashMap<ObjectKey, BTreeSet<u64>>,
    /// Emptied index sets, kept with their nodes for the next object to be
    /// listed: an object's runs are listed and unlisted at every write and
    /// writeback, and most often it has one.
    spare_sets: Vec<BTreeSet<u64>>,
    /// Cached-dirty bytes per OST; OSTs at zero have no entry.
    dirty_bytes_ost: BTreeMap<OstIndex, u64>,
    dirty_bytes: u64,
    /// Cached pages, and those of them holding a 4 KiB buffer (not phantom).
    pages: u64,
    data_pages: usize,
    /// Where new frames come from (pages created by partial writes and
    /// reads, copies of pinned frames).
    pool: PagePool,
}

/// What [`PageCache::update_pages`] creates where pages are absent: pages
/// of this kind, byte pages taking their frame from the function where it
/// has one.
type Create<'a> = (PayloadKind, Option<&'a dyn Fn(u64) -> Option<PageBuf>>);

/// Where the bytes of a write come from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// The bytes at the write's offset.
    Slice(&'a [u8]),
    /// Frames holding the bytes, the first byte at the write offset's
    /// position in its page: whole pages are taken over, not copied.
    Span(&'a PageSpan),
    Phantom,
}

impl Source<'_> {
    fn kind(&self) -> PayloadKind {
        match self {
            Source::Phantom => PayloadKind::Phantom,
            Source::Slice(_) | Source::Span(_) => PayloadKind::Bytes,
        }
    }
}

impl PageCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache whose new frames come from `pool`.
    pub fn with_pool(pool: PagePool) -> Self {
        PageCache { pool, ..Self::default() }
    }

    pub fn pool(&self) -> &PagePool {
        &self.pool
    }

    /// Copies `data` in at `offset` and marks it dirty; returns the bytes
    /// newly added to the cached-dirty total.
    pub fn write(&mut self, key: ObjectKey, offset: u64, data: &[u8]) -> u64 {
        self.write_from(key, offset, data.len() as u64, Source::Slice(data))
    }

    /// [`PageCache::write`] of bytes in frames, which must start at
    /// `offset`'s position in its page: the pages the write covers whole
    /// take the span's frames as they are (no copy); partial pages are
    /// copied into.
    pub fn write_span(&mut self, key: ObjectKey, offset: u64, span: &PageSpan) -> u64 {
        assert_eq!(u64::from(span.head()), offset % PAGE_SIZE, "span not laid out at the write offset");
        self.write_from(key, offset, span.len(), Source::Span(span))
    }

    /// [`PageCache::write`] of a phantom payload of `len` bytes: the same
    /// books, no data (new pages are phantom pages, with no buffer).
    pub fn write_phantom(&mut self, key: ObjectKey, offset: u64, len: u64) -> u64 {
        self.write_from(key, offset, len, Source::Phantom)
    }

    fn write_from(&mut self, key: ObjectKey, offset: u64, len: u64, src: Source<'_>) -> u64 {
        let first_page = offset / PAGE_SIZE;
        // The span's frame for page `index`, where the write covers it whole.
        let adopt = |index: u64| match src {
            Source::Span(span) => Some(span.frames()[(index - first_page) as usize].clone()),
            Source::Slice(_) | Source::Phantom => None,
        };
        let mut total = (0, 0);
        for seg in segments(offset, len) {
            let whole = seg.start == 0 && seg.end == PAGE_END;
            let source = if whole { Some(&adopt as &dyn Fn(u64) -> Option<PageBuf>) } else { None };
            let (before, after) =
                self.update_pages(key, seg.first, seg.last, Some((src.kind(), source)), |run, pool, index| {
                    run.page.written(seg.start, seg.end);
                    let Some(frames) = &mut run.data else { return };
                    let (start, end) = (usize::from(seg.start), usize::from(seg.end));
                    for (i, frame) in frames.iter_mut().enumerate() {
                        let page = index + i as u64;
                        match src {
                            Source::Phantom => {}
                            Source::Span(span) if whole => {
                                let from = &span.frames()[(page - first_page) as usize];
                                if !frame.same_frame(from) {
                                    *frame = from.clone(); // taken over, not copied
                                }
                            }
                            Source::Span(span) => {
                                let from = span.frames()[(page - first_page) as usize].bytes();
                                frame.make_mut(pool)[start..end].copy_from_slice(&from[start..end]);
                            }
                            Source::Slice(data) => {
                                let at = (page * PAGE_SIZE + seg.start as u64 - offset) as usize;
                                frame.make_mut(pool)[start..end].copy_from_slice(&data[at..at + (end - start)]);
                            }
                        }
                    }
                    if src.kind() == PayloadKind::Phantom {
                        run.data = None; // phantom wins
                    }
                });
            total = (total.0 + before, total.1 + after);
        }
        total.1 - total.0
    }

    /// The bytes `[offset, offset + len)` if every one of them is known; a
    /// phantom of `len` bytes if any of their pages is a phantom page.
    pub fn read(&self, key: ObjectKey, offset: u64, len: u64) -> Option<Payload> {
        let mut out = Vec::new();
        let mut phantom = false;
        for s in segments(offset, len) {
            let runs = self.objects.get(&key)?;
            let mut next = s.first;
            for (start, run) in runs_in(runs, s.first, s.last) {
                if start > next || !run.page.knows(s.start, s.end) {
                    return None;
                }
                let (lo, hi) = (start.max(s.first), run.end(start).min(s.last + 1));
                next = run.end(start);
                match (&run.data, phantom) {
                    (_, true) => {}
                    (Some(frames), false) => {
                        if out.capacity() == 0 {
                            out.reserve_exact(len as usize);
                        }
                        for frame in &frames[(lo - start) as usize..(hi - start) as usize] {
                            out.extend_from_slice(&frame.bytes()[usize::from(s.start)..usize::from(s.end)]);
                        }
                    }
                    (None, false) => (phantom, out) = (true, Vec::new()),
                }
            }
            if next <= s.last {
                return None;
            }
        }
        Some(if phantom { Payload::Phantom(len) } else { Payload::Bytes(out) })
    }

    /// Page-aligned extents to fetch before `read(key, offset, len)` can
    /// succeed, merged when contiguous, each at most `span_bytes_max` long.
    pub fn missing_pages(&self, key: ObjectKey, offset: u64, len: u64, span_bytes_max: u64) -> Vec<Extent> {
        assert!(span_bytes_max >= PAGE_SIZE && page_aligned(span_bytes_max));
        let mut out = Vec::new();
        let empty = Runs::new();
        let runs = self.objects.get(&key).unwrap_or(&empty);
        for s in segments(offset, len) {
            let mut next = s.first;
            for (start, run) in runs_in(runs, s.first, s.last) {
                let (lo, hi) = (start.max(s.first), run.end(start).min(s.last + 1) - 1);
                if lo > next {
                    push_pages(&mut out, next, lo - 1, span_bytes_max);
                }
                if !run.page.knows(s.start, s.end) {
                    push_pages(&mut out, lo, hi, span_bytes_max);
                }
                next = hi + 1;
            }
            if next <= s.last {
                push_pages(&mut out, next, s.last, span_bytes_max);
            }
        }
        out
    }

    /// A read reply of whole pages at `offset`: dirty and writeback bytes
    /// keep their local value, all others take the server's.
    pub fn fill(&mut self, key: ObjectKey, offset: u64, data: &[u8]) {
        assert!(page_aligned(offset), "unaligned fill at {offset}");
        assert!(page_aligned(data.len() as u64), "fill of a partial page");
        let first = offset / PAGE_SIZE;
        let pages = data.len() as u64 / PAGE_SIZE;
        if pages > 0 {
            self.update_pages(key, first, first + pages - 1, Some((PayloadKind::Bytes, None)), |run, pool, index| {
                if let Some(frames) = &mut run.data {
                    for (i, frame) in frames.iter_mut().enumerate() {
                        let at = ((index + i as u64 - first) * PAGE_SIZE) as usize;
                        run.page.fill(frame.make_mut(pool), &data[at..at + PAGE_BYTES]);
                    }
                }
                run.page.uptodate = true;
            });
        }
    }

    /// [`PageCache::fill`] from a phantom read reply of `len` bytes: the
    /// pages become uptodate phantom pages.
    pub fn fill_phantom(&mut self, key: ObjectKey, offset: u64, len: u64) {
        assert!(page_aligned(offset), "unaligned fill at {offset}");
        assert!(page_aligned(len), "fill of a partial page");
        if len > 0 {
            let first = offset / PAGE_SIZE;
            let last = first + len / PAGE_SIZE - 1;
            self.update_pages(key, first, last, Some((PayloadKind::Phantom, None)), |run, _, _| {
                run.data = None; // phantom wins
                run.page.uptodate = true;
            });
        }
    }

    /// Whether any byte of `range` is dirty (not counting writeback).
    pub fn has_dirty(&self, key: ObjectKey, range: Extent) -> bool {
        self.indexed_meets(&self.dirty_runs, key, &range, |page| &page.dirty)
    }

    pub fn has_writeback(&self, key: ObjectKey, range: Extent) -> bool {
        self.indexed_meets(&self.writeback_runs, key, &range, |page| &page.writeback)
    }

    /// Whether a run listed in `index` has a byte of `range` in `ranges`.
    fn indexed_meets(
        &self,
        index: &FxHashMap<ObjectKey, BTreeSet<u64>>,
        key: ObjectKey,
        range: &Extent,
        ranges: impl Fn(&Page) -> &Ranges,
    ) -> bool {
        if *range == Extent::WHOLE {
            // The index lists exactly the runs with such bytes, and the
            // whole object meets every one (fsync and close ask this at
            // every step while they wait).
            return index.contains_key(&key);
        }
        let (Some(set), Some(runs)) = (index.get(&key), self.objects.get(&key)) else { return false };
        let (first, last) = (range.start / PAGE_SIZE, range.end / PAGE_SIZE);
        let containing = run_at(runs, first).map(|(s, _)| s).filter(|&s| s < first);
        let starts = containing.filter(|s| set.contains(s)).into_iter().chain(set.range(first..=last).copied());
        starts.into_iter().any(|s| {
            let run = &runs[&s];
            meets(ranges(&run.page), range, s.max(first), (run.end(s) - 1).min(last))
        })
    }

    /// Whether no byte of any object is dirty or under writeback.
    pub fn is_stable(&self) -> bool {
        self.dirty_runs.is_empty() && self.writeback_runs.is_empty()
    }

    /// Whether `key` has any dirty byte (one map lookup).
    pub fn object_has_dirty(&self, key: ObjectKey) -> bool {
        self.dirty_runs.contains_key(&key)
    }

    /// Objects with dirty bytes waiting to be written back.
    pub fn keys_with_dirty(&self) -> Vec<ObjectKey> {
        let mut keys: Vec<ObjectKey> = self.dirty_runs.keys().copied().collect();
        keys.sort_unstable();
        keys
    }

    /// The dirty bytes of `key` (not counting writeback), merged.
    pub fn dirty_ranges(&self, key: ObjectKey) -> Vec<Extent> {
        let mut out = Vec::new();
        for (&start, run) in self.objects.get(&key).into_iter().flatten() {
            let dirty = &run.page.dirty.0;
            if dirty.is_empty() {
                continue; // a clean run: no page of it to walk
            }
            if dirty.as_slice() == [(0, PAGE_END)] {
                push_merged(&mut out, Extent::from_offset_len(start * PAGE_SIZE, run.pages * PAGE_SIZE), u64::MAX);
                continue;
            }
            for index in start..run.end(start) {
                for &(a, b) in dirty {
                    let at = index * PAGE_SIZE + u64::from(a);
                    push_merged(&mut out, Extent::from_offset_len(at, u64::from(b - a)), u64::MAX);
                }
            }
        }
        out
    }

    /// Objects of `ost` with bytes not yet safe on it: dirty, or under
    /// writeback.
    pub fn unstable_objects(&self, ost: OstIndex) -> BTreeSet<ObjectKey> {
        let on_ost = |key: &&ObjectKey| key.ost == ost;
        self.dirty_runs.keys().filter(on_ost).chain(self.writeback_runs.keys().filter(on_ost)).copied().collect()
    }

    /// Cached-dirty bytes (dirty or under writeback) of every object.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }

    pub fn dirty_bytes_ost(&self, ost: OstIndex) -> u64 {
        self.dirty_bytes_ost.get(&ost).copied().unwrap_or(0)
    }

    pub fn cached_pages(&self) -> usize {
        self.pages as usize
    }

    /// Cached pages holding a 4 KiB data buffer: all of them for a client
    /// of bytes, none for a client of phantom payloads.
    pub fn data_pages(&self) -> usize {
        self.data_pages
    }

    /// One past the highest locally written byte of `key` still cached, 0 if none.
    pub fn object_cached_end(&self, key: ObjectKey) -> u64 {
        let runs = self.objects.get(&key).into_iter().flatten().rev();
        let mut written = runs.filter(|(_, run)| run.page.written_end > 0);
        written.next().map_or(0, |(&s, run)| (run.end(s) - 1) * PAGE_SIZE + u64::from(run.page.written_end))
    }

    /// Asserts the invariants listed in the module documentation.
    pub fn check_invariants(&self) {
        let listed = |runs: &Runs, of: fn(&Page) -> &Ranges| -> BTreeSet<u64> {
            runs.iter().filter(|(_, r)| !of(&r.page).0.is_empty()).map(|(s, _)| *s).collect()
        };
        let (mut pages, mut data_pages) = (0, 0);
        let mut recount: BTreeMap<OstIndex, u64> = BTreeMap::new();
        for (key, runs) in &self.objects {
            assert!(!runs.is_empty(), "{key:?} kept with no pages");
            let dirty = listed(runs, |p| &p.dirty);
            assert_eq!(self.dirty_runs.get(key).cloned().unwrap_or_default(), dirty, "dirty index of {key:?}");
            let wb = listed(runs, |p| &p.writeback);
            assert_eq!(self.writeback_runs.get(key).cloned().unwrap_or_default(), wb, "writeback index of {key:?}");
            let mut end = 0;
            for (&start, run) in runs {
                assert!(start >= end && run.pages > 0, "runs of {key:?} overlap at page {start}");
                if let Some(frames) = &run.data {
                    assert_eq!(frames.len() as u64, run.pages, "frames of a run of {} pages", run.pages);
                    assert!(run.pages <= BYTE_RUN_PAGES_MAX, "a run of {} byte pages", run.pages);
                }
                run.page.dirty.check();
                run.page.writeback.check();
                *recount.entry(key.ost).or_default() += run.cached_dirty();
                (pages, data_pages, end) = (pages + run.pages, data_pages + run.data_pages(), run.end(start));
            }
        }
        for index in [&self.dirty_runs, &self.writeback_runs] {
            assert!(index.keys().all(|k| self.objects.contains_key(k)), "an index names a dropped object");
            assert!(index.values().all(|set| !set.is_empty()), "empty index kept");
        }
        recount.retain(|_, bytes| *bytes > 0);
        assert_eq!(recount, self.dirty_bytes_ost, "per-OST totals drifted");
        assert_eq!(recount.values().sum::<u64>(), self.dirty_bytes, "total drifted");
        assert_eq!((pages, data_pages), (self.pages, self.data_pages), "page counts drifted");
    }

    /// Runs `f(run, pool, index, start, end)` over the pages of `[offset,
    /// offset + len)`: `[start, end)` is each page's part of it, `index`
    /// the first page of `run`. Absent pages are created as
    /// [`PageCache::update_pages`] says. Returns the cached-dirty bytes of
    /// the pages before and after.
    fn update_bytes(
        &mut self,
        key: ObjectKey,
        offset: u64,
        len: u64,
        create: Option<Create<'_>>,
        mut f: impl FnMut(&mut Run, &PagePool, u64, u16, u16),
    ) -> (u64, u64) {
        let mut total = (0, 0);
        for s in segments(offset, len) {
            let (before, after) = self.update_pages(key, s.first, s.last, create, |run, pool, index| {
                f(run, pool, index, s.start, s.end);
            });
            total = (total.0 + before, total.1 + after);
        }
        total
    }

    /// Runs `f(run, pool, index)` once per run of pages `[first, last]`
    /// (split at those bounds first; `index` is the run's first page),
    /// keeping the indexes and totals exact, then merges runs left in one
    /// state. Absent pages are created if `create` says of which kind
    /// (byte pages take their frame from its function where it has one,
    /// from the pool otherwise). Returns the cached-dirty bytes of the
    /// pages before and after.
    fn update_pages(
        &mut self,
        key: ObjectKey,
        first: u64,
        last: u64,
        create: Option<Create<'_>>,
        mut f: impl FnMut(&mut Run, &PagePool, u64),
    ) -> (u64, u64) {
        if let Some((kind, source)) = create {
            let gaps = self.gaps(key, first, last);
            let fits = kind == PayloadKind::Phantom || last - first < BYTE_RUN_PAGES_MAX;
            if gaps.as_slice() == [(first, last)] && fits {
                // Nothing cached there (a write to fresh pages): the new run
                // is the only one `f` sees, so it is built, updated and
                // listed once, with no split and no walk.
                let mut run = self.new_run(first, last, kind, source);
                f(&mut run, &self.pool, first);
                let after = run.cached_dirty();
                self.put(key, first, run);
                self.merge(key, first, last);
                return (0, after);
            }
            self.create_missing(key, gaps, kind, source);
        }
        // Writeback cuts and completes whole runs more often than not: a run
        // that is exactly `[first, last]` needs no split and no range walk.
        let exact =
            self.objects.get(&key).and_then(|runs| runs.get(&first)).is_some_and(|run| run.end(first) == last + 1);
        if !exact {
            self.split_at(key, first);
            self.split_at(key, last + 1);
        }
        let Some(runs) = self.objects.get_mut(&key) else { return (0, 0) };
        let (mut before, mut after) = (0, 0);
        let (mut data_before, mut data_after) = (0, 0);
        let mut changed: SmallVec<[(u64, Listed, Listed); 4]> = SmallVec::new();
        let mut visit = |start: u64, run: &mut Run| {
            let was = run.listed();
            before += run.cached_dirty();
            data_before += run.data_pages();
            f(run, &self.pool, start);
            after += run.cached_dirty();
            data_after += run.data_pages();
            let now = run.listed();
            if now != was {
                changed.push((start, was, now));
            }
        };
        if exact {
            visit(first, runs.get_mut(&first).expect("just seen"));
        } else {
            for (&start, run) in runs.range_mut(first..=last) {
                visit(start, run);
            }
        }
        self.data_pages = self.data_pages + data_after - data_before;
        self.adjust(key.ost, before, after);
        for (start, was, now) in changed {
            self.relist(key, start, was, now);
        }
        self.merge(key, first, last);
        (before, after)
    }

    /// The absent pages of `[first, last]`, as `(first, last)` of each gap,
    /// in order.
    fn gaps(&self, key: ObjectKey, first: u64, last: u64) -> SmallVec<[(u64, u64); 4]> {
        let mut gaps: SmallVec<[(u64, u64); 4]> = SmallVec::new();
        // The highest page not yet walked past; `None` once a run holds `first`.
        let mut high = Some(last);
        for (start, run) in self.objects.get(&key).into_iter().flat_map(|runs| runs_in_rev(runs, first, last)) {
            let Some(top) = high else { break };
            if run.end(start) <= top {
                gaps.push((run.end(start), top));
            }
            high = start.checked_sub(1).filter(|&page| page >= first);
        }
        if let Some(top) = high {
            gaps.push((first, top));
        }
        gaps.reverse();
        gaps
    }

    /// Creates `gaps` (absent pages, see [`PageCache::gaps`]): a run per
    /// gap, of phantom pages, or of byte pages (at most
    /// [`BYTE_RUN_PAGES_MAX`] a run).
    fn create_missing(
        &mut self,
        key: ObjectKey,
        gaps: SmallVec<[(u64, u64); 4]>,
        kind: PayloadKind,
        source: Option<&dyn Fn(u64) -> Option<PageBuf>>,
    ) {
        for (lo, hi) in gaps {
            let mut at = lo;
            while at <= hi {
                let last = match kind {
                    PayloadKind::Phantom => hi,
                    PayloadKind::Bytes => hi.min(at + BYTE_RUN_PAGES_MAX - 1),
                };
                let run = self.new_run(at, last, kind, source);
                self.put(key, at, run);
                at = last + 1;
            }
        }
    }

    /// A run of new pages `[first, last]` of `kind`, byte pages taking
    /// their frames from `source` where it has one, from the pool otherwise.
    fn new_run(
        &self,
        first: u64,
        last: u64,
        kind: PayloadKind,
        source: Option<&dyn Fn(u64) -> Option<PageBuf>>,
    ) -> Run {
        let pages = last - first + 1;
        let data = match (kind, source) {
            (PayloadKind::Phantom, _) => None,
            (PayloadKind::Bytes, Some(source)) => {
                Some((first..=last).map(|i| source(i).unwrap_or_else(|| self.pool.alloc_one())).collect())
            }
            (PayloadKind::Bytes, None) => Some(self.pool.alloc(pages as usize)),
        };
        Run { pages, page: Page::new(), data }
    }

    /// Splits the run holding page `index`, if it starts before it, so that
    /// a run starts there.
    fn split_at(&mut self, key: ObjectKey, index: u64) {
        let Some(runs) = self.objects.get_mut(&key) else { return };
        let Some((&start, run)) = runs.range_mut(..index).next_back() else { return };
        if run.end(start) <= index {
            return;
        }
        let data = run.data.as_mut().map(|frames| frames.split_off((index - start) as usize));
        let tail = Run { pages: run.end(start) - index, page: run.page.clone(), data };
        run.pages = index - start;
        let listed = tail.listed();
        runs.insert(index, tail);
        self.relist(key, index, UNLISTED, listed);
    }

    /// Merges adjacent runs of one kind in one state (byte runs up to
    /// [`BYTE_RUN_PAGES_MAX`] pages) from the run before page `first` to
    /// the one after page `last`.
    fn merge(&mut self, key: ObjectKey, first: u64, last: u64) {
        let Some(runs) = self.objects.get(&key) else { return };
        // From the run before page `first` to the one after `last`, found
        // with one descent of the tree, walking back from `last + 1`.
        let mut span: SmallVec<[(u64, &Run); 8]> = SmallVec::new();
        // Whether two of them touch: runs apart never fold (the usual case
        // of a write or writeback of its own run).
        let mut touching = false;
        for (&start, run) in runs.range(..=last.saturating_add(1)).rev() {
            touching |= span.last().is_some_and(|&(later, _)| run.end(start) == later);
            span.push((start, run));
            if start < first {
                break;
            }
        }
        if !touching {
            return;
        }
        // One walk decides every merge: `(into, next)` folds run `next` into
        // the run at `into`, which has grown to `pages` by then.
        let mut folds: SmallVec<[(u64, u64); 8]> = SmallVec::new();
        let mut walk = span.into_iter().rev();
        let Some((start, run)) = walk.next() else { return };
        let (mut into, mut a, mut pages) = (start, run, run.pages);
        for (next, b) in walk {
            let fits = a.data.is_none() || pages + b.pages <= BYTE_RUN_PAGES_MAX;
            if into + pages == next && a.kind() == b.kind() && a.page == b.page && fits {
                folds.push((into, next));
                pages += b.pages;
            } else {
                (into, a, pages) = (next, b, b.pages);
            }
        }
        for (into, next) in folds {
            let b = self.take(key, next).expect("listed");
            let mut a = self.take(key, into).expect("listed");
            if let (Some(frames), Some(more)) = (&mut a.data, b.data) {
                frames.extend(more);
            }
            self.put(key, into, Run { pages: a.pages + b.pages, page: a.page, data: a.data });
        }
    }

    /// Removes the run at `start`, taking it out of the indexes and totals.
    fn take(&mut self, key: ObjectKey, start: u64) -> Option<Run> {
        let run = self.objects.get_mut(&key)?.remove(&start)?;
        self.adjust(key.ost, run.cached_dirty(), 0);
        self.pages -= run.pages;
        self.data_pages -= run.data_pages();
        self.relist(key, start, run.listed(), UNLISTED);
        Some(run)
    }

    /// Adds `run` at `start`, where no run starts, into the indexes and
    /// totals.
    fn put(&mut self, key: ObjectKey, start: u64, run: Run) {
        self.adjust(key.ost, 0, run.cached_dirty());
        self.pages += run.pages;
        self.data_pages += run.data_pages();
        self.relist(key, start, UNLISTED, run.listed());
        let replaced = self.objects.entry(key).or_default().insert(start, run);
        debug_assert!(replaced.is_none(), "put over the run at page {start} of {key:?}");
    }

    /// Moves run `start` from the indexes it was listed in (`was`) to those
    /// it belongs in now. The indexes list exactly the runs with such bytes,
    /// so only a change touches them.
    fn relist(&mut self, key: ObjectKey, start: u64, was: Listed, now: Listed) {
        if was.dirty != now.dirty {
            set_listed(&mut self.dirty_runs, &mut self.spare_sets, key, start, now.dirty);
        }
        if was.writeback != now.writeback {
            set_listed(&mut self.writeback_runs, &mut self.spare_sets, key, start, now.writeback);
        }
    }

    fn adjust(&mut self, ost: OstIndex, before: u64, after: u64) {
        if before == after {
            return;
        }
        let total = self.dirty_bytes_ost.entry(ost).or_default();
        *total = (*total + after).checked_sub(before).expect("per-OST total underflow");
        if *total == 0 {
            self.dirty_bytes_ost.remove(&ost);
        }
        self.dirty_bytes = (self.dirty_bytes + after).checked_sub(before).expect("total underflow");
    }

    fn forget_if_empty(&mut self, key: ObjectKey) {
        if self.objects.get(&key).is_some_and(BTreeMap::is_empty) {
            self.objects.remove(&key);
            self.dirty_runs.remove(&key);
            self.writeback_runs.remove(&key);
        }
    }
}

/// How many emptied index sets a cache keeps for reuse.
const SPARE_SETS_MAX: usize = 4;

/// Lists (or unlists) run `start` of `key` in `index`. An object's set
/// leaves the index when it empties (into `spares`, which new sets come
/// from), so the index holds exactly the objects with listed runs.
fn set_listed(
    index: &mut FxHashMap<ObjectKey, BTreeSet<u64>>,
    spares: &mut Vec<BTreeSet<u64>>,
    key: ObjectKey,
    start: u64,
    listed: bool,
) {
    if listed {
        index.entry(key).or_insert_with(|| spares.pop().unwrap_or_default()).insert(start);
    } else if let Some(set) = index.get_mut(&key) {
        if set.remove(&start) && set.is_empty() {
            let set = index.remove(&key).expect("just found");
            if spares.len() < SPARE_SETS_MAX {
                spares.push(set);
            }
        }
    }
}

#[cfg(test)]
#[path = "pagecache_tests.rs"]
mod tests;
