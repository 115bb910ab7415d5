//! The page cache as it was first written, one map entry per 4 KiB page:
//! the reference that the run-length page cache ([`super::pagecache`]) is
//! checked against, operation by operation (test builds only).
#![allow(dead_code)]

use super::pagecache::WritebackRun;
use crate::extent::Extent;
use crate::msg::{Payload, PayloadKind};
use crate::units::{ObjectKey, OstIndex, PAGE_SIZE};
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::{Range, RangeInclusive};

const PAGE_BYTES: usize = PAGE_SIZE as usize;
const PAGE_END: u16 = PAGE_SIZE as u16;
const _: () = assert!(PAGE_SIZE.is_power_of_two() && PAGE_SIZE <= u16::MAX as u64);

/// Half-open byte ranges within one page: sorted, disjoint, non-adjacent.
///
/// A short list rather than a 4096-bit bitmap: clean pages (the common case)
/// allocate nothing, a typical write leaves one or two ranges, and "first
/// dirty run from here" is a lookup rather than a bit scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Ranges(SmallVec<[(u16, u16); 2]>);

impl Ranges {
    /// Adds the non-empty range `[start, end)`.
    fn insert(&mut self, start: u16, end: u16) {
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
    fn remove(&mut self, start: u16, end: u16) {
        let cut = |&(a, b): &(u16, u16)| [(a, b.min(start)), (a.max(end), b)];
        self.0 = self.0.iter().flat_map(cut).filter(|&(a, b)| a < b).collect();
    }

    /// The first range meeting `[start, end)`, clipped to it.
    fn first_within(&self, (start, end): (u16, u16)) -> Option<(u16, u16)> {
        let &(a, b) = self.0.iter().find(|&&(_, b)| b > start)?;
        Some((a.max(start), b.min(end))).filter(|(a, b)| a < b)
    }

    fn check(&self) {
        let inside = self.0.iter().all(|&(a, b)| a < b && b <= PAGE_END);
        let apart = self.0.windows(2).all(|w| w[0].1 < w[1].0);
        assert!(inside && apart, "{self:?}");
    }
}

/// The union of two range lists, merged, in order. It allocates nothing:
/// the page cache asks for it several times per page and write.
fn union<'a>(a: &'a Ranges, b: &'a Ranges) -> impl Iterator<Item = (u16, u16)> + 'a {
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

#[derive(Clone)]
struct Page {
    /// The page's bytes; `None` for a phantom page.
    data: Option<Box<[u8; PAGE_BYTES]>>,
    /// Every byte is known: fetched from the server or written locally.
    uptodate: bool,
    dirty: Ranges,
    writeback: Ranges,
    /// One past the highest byte ever written locally into this page (0 if none).
    written_end: u16,
}

impl Page {
    fn new(kind: PayloadKind) -> Self {
        let (dirty, writeback) = (Ranges::default(), Ranges::default());
        let data = match kind {
            PayloadKind::Bytes => Some(Box::new([0; PAGE_BYTES])),
            PayloadKind::Phantom => None,
        };
        Page { data, uptodate: false, dirty, writeback, written_end: 0 }
    }

    /// Bytes written locally that the server does not have yet.
    fn local(&self) -> impl Iterator<Item = (u16, u16)> + '_ {
        union(&self.dirty, &self.writeback)
    }

    fn cached_dirty(&self) -> u64 {
        self.local().map(|(a, b)| u64::from(b - a)).sum()
    }

    fn knows(&self, start: u16, end: u16) -> bool {
        self.uptodate || self.local().any(|(a, b)| a <= start && end <= b)
    }

    /// A local write of `[start, end)`: `src` holds its bytes, `None` for a
    /// phantom write (which makes this a phantom page: phantom wins).
    fn write(&mut self, start: u16, end: u16, src: Option<&[u8]>) {
        match (src, &mut self.data) {
            (Some(src), Some(data)) => data[usize::from(start)..usize::from(end)].copy_from_slice(src),
            (None, data) => *data = None,
            (Some(_), None) => {} // bytes into a phantom page: counted, not kept
        }
        self.dirty.insert(start, end);
        self.written_end = self.written_end.max(end);
        self.uptodate |= self.knows(0, PAGE_END);
    }

    /// Takes the server's bytes except where local bytes are newer; `None`
    /// for a phantom read reply (which makes this a phantom page).
    fn fill(&mut self, server: Option<&[u8]>) {
        match (server, &mut self.data) {
            (Some(server), Some(data)) => {
                let mut pos = 0;
                for (a, b) in union(&self.dirty, &self.writeback) {
                    let a = usize::from(a);
                    data[pos..a].copy_from_slice(&server[pos..a]);
                    pos = usize::from(b);
                }
                data[pos..].copy_from_slice(&server[pos..]);
            }
            (None, data) => *data = None,
            (Some(_), None) => {}
        }
        self.uptodate = true;
    }

    /// Zeroes and forgets every byte at or after `at`.
    fn truncate(&mut self, at: u16) {
        if let Some(data) = &mut self.data {
            data[usize::from(at)..].fill(0);
        }
        self.dirty.remove(at, PAGE_END);
        self.writeback.remove(at, PAGE_END);
        self.written_end = self.written_end.min(at);
    }
}

impl fmt::Debug for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (dirty, writeback) = (&self.dirty.0, &self.writeback.0);
        let kind = if self.data.is_some() { "Page" } else { "PhantomPage" };
        write!(f, "{kind} {{ uptodate: {}, dirty: {dirty:?}, ", self.uptodate)?;
        write!(f, "writeback: {writeback:?}, written_end: {} }}", self.written_end)
    }
}

/// The part `[start, end)` of page `index` that a byte range covers; `at` is
/// where that part begins in the caller's buffer.
#[derive(Clone, Copy)]
struct Piece {
    index: u64,
    start: u16,
    end: u16,
    at: usize,
}

impl Piece {
    fn in_page(&self) -> Range<usize> {
        usize::from(self.start)..usize::from(self.end)
    }
    fn in_buf(&self) -> Range<usize> {
        self.at..self.at + usize::from(self.end - self.start)
    }
}

/// Splits `[offset, offset + len)` into per-page pieces.
fn pieces(offset: u64, len: u64) -> impl Iterator<Item = Piece> {
    let end = offset.checked_add(len).expect("byte range overflows u64");
    let pages = offset / PAGE_SIZE..end.div_ceil(PAGE_SIZE);
    pages.filter(move |_| len > 0).map(move |index| {
        let base = index * PAGE_SIZE;
        let (s, e) = (offset.max(base) - base, end.min(base + PAGE_SIZE) - base);
        let at = (base + s - offset) as usize;
        Piece { index, start: s as u16, end: e as u16, at }
    })
}

/// Whether `bytes` is a whole number of pages.
fn page_aligned(bytes: u64) -> bool {
    bytes & (PAGE_SIZE - 1) == 0
}

fn page_indices(range: &Extent) -> RangeInclusive<u64> {
    range.start / PAGE_SIZE..=range.end / PAGE_SIZE
}

/// `range` clipped to page `index`, as in-page offsets `[start, end)`.
fn clip(range: &Extent, index: u64) -> (u16, u16) {
    let base = index * PAGE_SIZE;
    let start = range.start.max(base) - base;
    let last = range.end.min(base + PAGE_SIZE - 1) - base;
    (start as u16, last as u16 + 1)
}

/// Appends `ext`, merged into the last extent when contiguous and the result
/// stays within `len_max` bytes.
fn push_merged(out: &mut Vec<Extent>, ext: Extent, len_max: u64) {
    match out.last_mut() {
        Some(last) if last.end + 1 == ext.start && last.len() + ext.len() <= len_max => last.end = ext.end,
        _ => out.push(ext),
    }
}

#[derive(Clone, Debug, Default)]
pub struct ReferenceCache {
    objects: BTreeMap<ObjectKey, BTreeMap<u64, Page>>,
    /// Indices of the pages with dirty bytes, per object, so that finding
    /// the next writeback run never walks clean or in-flight pages.
    dirty_pages: BTreeMap<ObjectKey, BTreeSet<u64>>,
    /// Indices of the pages with bytes under writeback, per object, so that
    /// "is anything of this object still in flight" (fsync, close, cancel)
    /// never walks the clean pages.
    writeback_pages: BTreeMap<ObjectKey, BTreeSet<u64>>,
    /// Cached-dirty bytes per OST; OSTs at zero have no entry.
    dirty_bytes_ost: BTreeMap<OstIndex, u64>,
    dirty_bytes: u64,
    /// Pages holding a 4 KiB buffer (not phantom pages).
    data_pages: usize,
}

impl ReferenceCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Copies `data` in at `offset` and marks it dirty; returns the bytes
    /// newly added to the cached-dirty total.
    pub fn write(&mut self, key: ObjectKey, offset: u64, data: &[u8]) -> u64 {
        self.write_pieces(key, offset, data.len() as u64, Some(data))
    }

    /// [`ReferenceCache::write`] of a phantom payload of `len` bytes: the same
    /// books, no data (new pages are phantom pages, with no buffer).
    pub fn write_phantom(&mut self, key: ObjectKey, offset: u64, len: u64) -> u64 {
        self.write_pieces(key, offset, len, None)
    }

    fn write_pieces(&mut self, key: ObjectKey, offset: u64, len: u64, data: Option<&[u8]>) -> u64 {
        let kind = if data.is_some() { PayloadKind::Bytes } else { PayloadKind::Phantom };
        let mut added = 0;
        for p in pieces(offset, len) {
            let src = data.map(|data| &data[p.in_buf()]);
            let (before, after) = self.update(key, p.index, Some(kind), |pg| pg.write(p.start, p.end, src));
            added += after - before;
        }
        added
    }

    /// The bytes `[offset, offset + len)` if every one of them is known; a
    /// phantom of `len` bytes if any of their pages is a phantom page.
    pub fn read(&self, key: ObjectKey, offset: u64, len: u64) -> Option<Payload> {
        let mut out = Vec::new();
        let mut phantom = false;
        for p in pieces(offset, len) {
            let page = self.objects.get(&key)?.get(&p.index)?;
            if !page.knows(p.start, p.end) {
                return None;
            }
            match (&page.data, phantom) {
                (_, true) => {}
                (Some(data), false) => {
                    if out.capacity() == 0 {
                        out.reserve_exact(len as usize);
                    }
                    out.extend_from_slice(&data[p.in_page()]);
                }
                (None, false) => (phantom, out) = (true, Vec::new()),
            }
        }
        Some(if phantom { Payload::Phantom(len) } else { Payload::Bytes(out) })
    }

    /// Page-aligned extents to fetch before `read(key, offset, len)` can
    /// succeed, merged when contiguous, each at most `span_bytes_max` long.
    pub fn missing_pages(&self, key: ObjectKey, offset: u64, len: u64, span_bytes_max: u64) -> Vec<Extent> {
        assert!(span_bytes_max >= PAGE_SIZE && page_aligned(span_bytes_max));
        let mut out = Vec::new();
        for p in pieces(offset, len) {
            let page = self.objects.get(&key).and_then(|pages| pages.get(&p.index));
            if !page.is_some_and(|page| page.knows(p.start, p.end)) {
                let ext = Extent::from_offset_len(p.index * PAGE_SIZE, PAGE_SIZE);
                push_merged(&mut out, ext, span_bytes_max);
            }
        }
        out
    }

    /// A read reply of whole pages at `offset`: dirty and writeback bytes
    /// keep their local value, all others take the server's.
    pub fn fill(&mut self, key: ObjectKey, offset: u64, data: &[u8]) {
        assert!(page_aligned(offset), "unaligned fill at {offset}");
        assert!(page_aligned(data.len() as u64), "fill of a partial page");
        for (i, chunk) in (offset / PAGE_SIZE..).zip(data.chunks(PAGE_BYTES)) {
            self.update(key, i, Some(PayloadKind::Bytes), |page| page.fill(Some(chunk)));
        }
    }

    /// [`ReferenceCache::fill`] from a phantom read reply of `len` bytes: the
    /// pages become uptodate phantom pages.
    pub fn fill_phantom(&mut self, key: ObjectKey, offset: u64, len: u64) {
        assert!(page_aligned(offset), "unaligned fill at {offset}");
        assert!(page_aligned(len), "fill of a partial page");
        for i in offset / PAGE_SIZE..(offset + len) / PAGE_SIZE {
            self.update(key, i, Some(PayloadKind::Phantom), |page| page.fill(None));
        }
    }

    /// Cuts the lowest run of contiguous dirty bytes inside `range` whose
    /// pages have no writeback in flight, at most `bytes_max` long, marks it
    /// under writeback and snapshots its data (nothing to copy if any of its
    /// pages is a phantom page: the run is then a phantom).
    pub fn next_writeback(&mut self, key: ObjectKey, range: Extent, bytes_max: u64) -> Option<WritebackRun> {
        assert!(bytes_max >= PAGE_SIZE && page_aligned(bytes_max));
        let (offset, len) = self.find_run(key, &range, bytes_max)?;
        let pages = offset / PAGE_SIZE..=(offset + len - 1) / PAGE_SIZE;
        let phantom = self.objects[&key].range(pages).any(|(_, page)| page.data.is_none());
        let mut data = if phantom { None } else { Some(Vec::with_capacity(len as usize)) };
        for p in pieces(offset, len) {
            self.update(key, p.index, None, |page| {
                if let (Some(out), Some(src)) = (&mut data, &page.data) {
                    out.extend_from_slice(&src[p.in_page()]);
                }
                page.dirty.remove(p.start, p.end);
                page.writeback.insert(p.start, p.end);
            });
        }
        let data = data.map_or(Payload::Phantom(len), Payload::Bytes);
        debug_assert_eq!(data.len(), len, "writeback run snapshot");
        Some(WritebackRun { key, offset, data })
    }

    /// `(offset, len)` of the run `next_writeback` should cut.
    fn find_run(&self, key: ObjectKey, range: &Extent, bytes_max: u64) -> Option<(u64, u64)> {
        let pages = self.objects.get(&key)?;
        let eligible = |i: &&u64| pages.get(i).is_some_and(|p| p.writeback.0.is_empty());
        let first = *self.dirty_pages.get(&key)?.range(page_indices(range)).find(eligible)?;
        let last = *page_indices(range).end();
        let mut run: Option<(u64, u64)> = None; // [start, end)
        for (&index, page) in pages.range(first..=last) {
            let base = index * PAGE_SIZE;
            // A page with writeback in flight is skipped: its dirty bytes wait.
            let piece = match page.writeback.0.is_empty() {
                true => page.dirty.first_within(clip(range, index)),
                false => None,
            };
            run = match (run, piece) {
                (None, None) => continue,
                (None, Some((a, b))) => Some((base + u64::from(a), base + u64::from(b))),
                (Some((s, e)), Some((0, b))) if e == base => Some((s, base + u64::from(b))),
                (Some(_), _) => break,
            };
            match run {
                Some((s, e)) if e == base + PAGE_SIZE && e - s < bytes_max => {}
                _ => break,
            }
        }
        let (start, mut end) = run?;
        if end - start > bytes_max {
            end = (start + bytes_max) / PAGE_SIZE * PAGE_SIZE; // a page boundary past start
        }
        Some((start, end - start))
    }

    /// The write RPC for `[offset, offset + len)` completed; returns the bytes
    /// removed from the cached-dirty total (re-dirtied bytes stay dirty).
    pub fn writeback_done(&mut self, key: ObjectKey, offset: u64, len: u64) -> u64 {
        self.end_writeback(key, offset, len, false)
    }

    /// The write RPC failed for good (eviction); returns the bytes lost. The
    /// pages stop being uptodate, since the server never got those bytes.
    pub fn writeback_failed(&mut self, key: ObjectKey, offset: u64, len: u64) -> u64 {
        self.end_writeback(key, offset, len, true)
    }

    fn end_writeback(&mut self, key: ObjectKey, offset: u64, len: u64, failed: bool) -> u64 {
        let mut removed = 0;
        for p in pieces(offset, len) {
            let (before, after) = self.update(key, p.index, None, |page| {
                page.writeback.remove(p.start, p.end);
                page.uptodate &= !failed;
            });
            removed += before - after;
        }
        removed
    }

    /// Whether any byte of `range` is dirty (not counting writeback).
    pub fn has_dirty(&self, key: ObjectKey, range: Extent) -> bool {
        let (Some(set), Some(pages)) = (self.dirty_pages.get(&key), self.objects.get(&key)) else { return false };
        set.range(page_indices(&range)).any(|i| pages[i].dirty.first_within(clip(&range, *i)).is_some())
    }

    pub fn has_writeback(&self, key: ObjectKey, range: Extent) -> bool {
        let (Some(set), Some(pages)) = (self.writeback_pages.get(&key), self.objects.get(&key)) else { return false };
        set.range(page_indices(&range)).any(|i| pages[i].writeback.first_within(clip(&range, *i)).is_some())
    }

    /// Objects with dirty bytes waiting to be written back.
    pub fn keys_with_dirty(&self) -> Vec<ObjectKey> {
        self.dirty_pages.keys().copied().collect()
    }

    /// The dirty bytes of `key` (not counting writeback), merged.
    pub fn dirty_ranges(&self, key: ObjectKey) -> Vec<Extent> {
        let mut out = Vec::new();
        for (index, page) in self.objects.get(&key).into_iter().flatten() {
            for &(a, b) in &page.dirty.0 {
                let start = index * PAGE_SIZE + u64::from(a);
                push_merged(&mut out, Extent::from_offset_len(start, u64::from(b - a)), u64::MAX);
            }
        }
        out
    }

    /// Drops the clean pages (nothing dirty, nothing under writeback) meeting
    /// `range`: what a client does to stay within its cache budget. Returns
    /// how many pages went.
    pub fn drop_clean(&mut self, key: ObjectKey, range: Extent) -> usize {
        let Some(pages) = self.objects.get_mut(&key) else { return 0 };
        let clean: Vec<u64> =
            pages.range(page_indices(&range)).filter(|(_, p)| p.cached_dirty() == 0).map(|(&i, _)| i).collect();
        for index in &clean {
            let page = pages.remove(index).expect("page listed above");
            self.data_pages -= usize::from(page.data.is_some());
        }
        self.forget_if_empty(key);
        clean.len()
    }

    /// Drops the pages meeting `range` for which `keep_page(index)` is false;
    /// returns the cached-dirty bytes thrown away. Panics if such a page has
    /// writeback in flight: on eviction, call `writeback_failed` first.
    pub fn discard(&mut self, key: ObjectKey, range: Extent, keep_page: impl Fn(u64) -> bool) -> u64 {
        let pages = self.objects.entry(key).or_default();
        let doomed: Vec<u64> = pages.range(page_indices(&range)).map(|(&i, _)| i).collect();
        let mut lost = 0;
        for index in doomed.into_iter().filter(|&i| !keep_page(i)) {
            let page = pages.remove(&index).expect("page listed above");
            assert!(page.writeback.0.is_empty(), "discarding page {index} of {key:?} under writeback");
            lost += page.cached_dirty();
            self.data_pages -= usize::from(page.data.is_some());
            if let Some(set) = self.dirty_pages.get_mut(&key) {
                set.remove(&index);
            }
        }
        if self.dirty_pages.get(&key).is_some_and(BTreeSet::is_empty) {
            self.dirty_pages.remove(&key);
        }
        self.forget_if_empty(key);
        self.adjust(key.ost, lost, 0);
        lost
    }

    /// Drops every page of `ost` (eviction); returns the cached-dirty bytes
    /// lost, writeback in flight included (it is forgotten).
    pub fn discard_ost(&mut self, ost: OstIndex) -> u64 {
        let lost = self.dirty_bytes_ost(ost);
        let gone = self.objects.iter().filter(|(key, _)| key.ost == ost).flat_map(|(_, pages)| pages.values());
        self.data_pages -= gone.filter(|page| page.data.is_some()).count();
        self.objects.retain(|key, _| key.ost != ost);
        self.dirty_pages.retain(|key, _| key.ost != ost);
        self.writeback_pages.retain(|key, _| key.ost != ost);
        self.adjust(ost, lost, 0);
        lost
    }

    /// Forgets every byte at or beyond `size`. Writeback in flight there is
    /// forgotten too (callers should wait for it, as Lustre's truncate does).
    pub fn truncate(&mut self, key: ObjectKey, size: u64) {
        let pages = self.objects.entry(key).or_default();
        let cut = size.div_ceil(PAGE_SIZE);
        let tail = pages.split_off(&cut);
        let lost = tail.values().map(Page::cached_dirty).sum();
        self.data_pages -= tail.values().filter(|page| page.data.is_some()).count();
        if let Some(set) = self.dirty_pages.get_mut(&key) {
            set.split_off(&cut);
        }
        if let Some(set) = self.writeback_pages.get_mut(&key) {
            set.split_off(&cut);
        }
        self.adjust(key.ost, lost, 0);
        let at = (size % PAGE_SIZE) as u16;
        if at != 0 {
            self.update(key, size / PAGE_SIZE, None, |page| page.truncate(at));
        }
        self.forget_if_empty(key);
    }

    /// Cached-dirty bytes (dirty or under writeback) of every object.
    pub fn dirty_bytes(&self) -> u64 {
        self.dirty_bytes
    }

    pub fn dirty_bytes_ost(&self, ost: OstIndex) -> u64 {
        self.dirty_bytes_ost.get(&ost).copied().unwrap_or(0)
    }

    pub fn cached_pages(&self) -> usize {
        self.objects.values().map(BTreeMap::len).sum()
    }

    /// Cached pages holding a 4 KiB data buffer: all of them for a client
    /// of bytes, none for a client of phantom payloads.
    pub fn data_pages(&self) -> usize {
        self.data_pages
    }

    /// One past the highest locally written byte of `key` still cached, 0 if none.
    pub fn object_cached_end(&self, key: ObjectKey) -> u64 {
        let pages = self.objects.get(&key).into_iter().flatten().rev();
        let mut written = pages.filter(|(_, page)| page.written_end > 0);
        written.next().map_or(0, |(&i, page)| i * PAGE_SIZE + u64::from(page.written_end))
    }

    /// Asserts the invariants listed in the module documentation.
    pub fn check_invariants(&self) {
        for (key, pages) in &self.objects {
            let dirty: BTreeSet<u64> = pages.iter().filter(|(_, p)| !p.dirty.0.is_empty()).map(|(i, _)| *i).collect();
            assert_eq!(self.dirty_pages.get(key).cloned().unwrap_or_default(), dirty, "dirty index of {key:?}");
        }
        assert!(self.dirty_pages.keys().all(|k| self.objects.contains_key(k)), "dirty index names a dropped object");
        for (key, pages) in &self.objects {
            let wb: BTreeSet<u64> = pages.iter().filter(|(_, p)| !p.writeback.0.is_empty()).map(|(i, _)| *i).collect();
            assert_eq!(self.writeback_pages.get(key).cloned().unwrap_or_default(), wb, "writeback index of {key:?}");
        }
        assert!(self.writeback_pages.values().all(|set| !set.is_empty()), "empty writeback index kept");
        let mut recount: BTreeMap<OstIndex, u64> = BTreeMap::new();
        for (key, pages) in &self.objects {
            assert!(!pages.is_empty(), "{key:?} kept with no pages");
            for page in pages.values() {
                page.dirty.check();
                page.writeback.check();
                *recount.entry(key.ost).or_default() += page.cached_dirty();
            }
        }
        recount.retain(|_, bytes| *bytes > 0);
        assert_eq!(recount, self.dirty_bytes_ost, "per-OST totals drifted");
        assert_eq!(recount.values().sum::<u64>(), self.dirty_bytes, "total drifted");
        let data_pages = self.objects.values().flat_map(BTreeMap::values).filter(|p| p.data.is_some()).count();
        assert_eq!(data_pages, self.data_pages, "data page count drifted");
    }

    /// Runs `f` on a page (created of kind `create` if absent and `create`
    /// is given), keeping the totals exact; returns its cached-dirty bytes
    /// before and after, `(0, 0)` if absent.
    fn update(
        &mut self,
        key: ObjectKey,
        index: u64,
        create: Option<PayloadKind>,
        f: impl FnOnce(&mut Page),
    ) -> (u64, u64) {
        let pages = self.objects.entry(key).or_default();
        let mut created = false;
        if let Some(kind) = create {
            pages.entry(index).or_insert_with(|| {
                created = true;
                Page::new(kind)
            });
        }
        let Some(page) = pages.get_mut(&index) else {
            self.forget_if_empty(key);
            return (0, 0);
        };
        let had_data = page.data.is_some() && !created;
        let before = page.cached_dirty();
        f(page);
        let after = page.cached_dirty();
        self.data_pages = self.data_pages + usize::from(page.data.is_some()) - usize::from(had_data);
        let (dirty, writeback) = (!page.dirty.0.is_empty(), !page.writeback.0.is_empty());
        self.index_page(key, index, dirty);
        if writeback {
            self.writeback_pages.entry(key).or_default().insert(index);
        } else if let Some(set) = self.writeback_pages.get_mut(&key) {
            if set.remove(&index) && set.is_empty() {
                self.writeback_pages.remove(&key);
            }
        }
        self.adjust(key.ost, before, after);
        (before, after)
    }

    fn index_page(&mut self, key: ObjectKey, index: u64, dirty: bool) {
        if dirty {
            self.dirty_pages.entry(key).or_default().insert(index);
        } else if let Some(set) = self.dirty_pages.get_mut(&key) {
            set.remove(&index);
            if set.is_empty() {
                self.dirty_pages.remove(&key);
            }
        }
    }

    fn adjust(&mut self, ost: OstIndex, before: u64, after: u64) {
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
        }
        if self.dirty_pages.get(&key).is_some_and(BTreeSet::is_empty) || !self.objects.contains_key(&key) {
            self.dirty_pages.remove(&key);
        }
        if self.writeback_pages.get(&key).is_some_and(BTreeSet::is_empty) || !self.objects.contains_key(&key) {
            self.writeback_pages.remove(&key);
        }
    }
}
