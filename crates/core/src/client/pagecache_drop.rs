//! Dropping pages from the page cache: clean pages over its budget, the
//! pages of a lock given back (those no other lock covers), every page of
//! an OST that evicted the client, and the tail cut by a truncate.

use super::runs::*;
use super::PageCache;
use crate::extent::Extent;
use crate::units::{ObjectKey, OstIndex, PAGE_SIZE};
use smallvec::SmallVec;

impl PageCache {
    /// Drops the clean pages (nothing dirty, nothing under writeback) meeting
    /// `range`: what a client does to stay within its cache budget. Returns
    /// how many pages went.
    pub fn drop_clean(&mut self, key: ObjectKey, range: Extent) -> usize {
        let (first, last) = (range.start / PAGE_SIZE, range.end / PAGE_SIZE);
        let Some(runs) = self.objects.get(&key) else { return 0 };
        let clean: Vec<u64> =
            runs_in(runs, first, last).filter(|(_, r)| r.page.cached_dirty() == 0).map(|(s, _)| s).collect();
        let mut dropped = 0;
        for start in clean {
            dropped += self.cut_out(key, start, first, last, &[]);
        }
        self.forget_if_empty(key);
        dropped as usize
    }

    /// Drops the pages meeting `range` except those whose first byte lies in
    /// one of `kept` (the extents of other locks that still cover them);
    /// returns the cached-dirty bytes thrown away. Panics if such a page has
    /// writeback in flight: on eviction, call `writeback_failed` first.
    pub fn discard(&mut self, key: ObjectKey, range: Extent, kept: &[Extent]) -> u64 {
        let (first, last) = (range.start / PAGE_SIZE, range.end / PAGE_SIZE);
        let Some(runs) = self.objects.get(&key) else { return 0 };
        let doomed: Vec<(u64, u64)> = runs_in(runs, first, last).map(|(s, r)| (s, r.page.cached_dirty())).collect();
        let mut kept_pages: SmallVec<[(u64, u64); 4]> =
            kept.iter().map(|e| (e.start.div_ceil(PAGE_SIZE), e.end / PAGE_SIZE)).filter(|(a, b)| a <= b).collect();
        kept_pages.sort_unstable();
        let mut lost = 0;
        for (start, per_page) in doomed {
            lost += self.cut_out(key, start, first, last, &kept_pages) * per_page;
        }
        self.forget_if_empty(key);
        lost
    }

    /// Drops every page of `ost` (eviction); returns the cached-dirty bytes
    /// lost, writeback in flight included (it is forgotten).
    pub fn discard_ost(&mut self, ost: OstIndex) -> u64 {
        let lost = self.dirty_bytes_ost(ost);
        let gone = self.objects.iter().filter(|(key, _)| key.ost == ost).flat_map(|(_, runs)| runs.values());
        let (pages, data_pages) = gone.fold((0, 0), |(p, d), run| (p + run.pages, d + run.data_pages()));
        self.pages -= pages;
        self.data_pages -= data_pages;
        self.objects.retain(|key, _| key.ost != ost);
        self.dirty_runs.retain(|key, _| key.ost != ost);
        self.writeback_runs.retain(|key, _| key.ost != ost);
        self.adjust(ost, lost, 0);
        lost
    }

    /// Forgets every byte at or beyond `size`. Writeback in flight there is
    /// forgotten too (callers should wait for it, as Lustre's truncate does).
    pub fn truncate(&mut self, key: ObjectKey, size: u64) {
        let cut = size.div_ceil(PAGE_SIZE);
        self.split_at(key, cut);
        let tail = match self.objects.get_mut(&key) {
            Some(runs) => runs.split_off(&cut),
            None => Runs::new(),
        };
        let lost = tail.values().map(Run::cached_dirty).sum();
        self.pages -= tail.values().map(|run| run.pages).sum::<u64>();
        self.data_pages -= tail.values().map(Run::data_pages).sum::<usize>();
        for index in [&mut self.dirty_runs, &mut self.writeback_runs] {
            if let Some(set) = index.get_mut(&key) {
                set.split_off(&cut);
                if set.is_empty() {
                    index.remove(&key);
                }
            }
        }
        self.adjust(key.ost, lost, 0);
        let at = (size % PAGE_SIZE) as u16;
        if at != 0 {
            let index = size / PAGE_SIZE;
            self.update_pages(key, index, index, None, |run, pool, _| {
                run.page.truncate(at);
                for frame in run.data.iter_mut().flatten() {
                    frame.make_mut(pool)[usize::from(at)..].fill(0);
                }
            });
        }
        self.forget_if_empty(key);
    }

    /// Removes the pages of the run at `start` that lie in `[first, last]`
    /// and in none of the page ranges `kept` (sorted by start), putting back
    /// the rest as the longest pieces it makes; returns how many pages went.
    /// Panics if one of them has writeback in flight.
    fn cut_out(&mut self, key: ObjectKey, start: u64, first: u64, last: u64, kept: &[(u64, u64)]) -> u64 {
        let run = self.take(key, start).expect("listed");
        let end = run.end(start);
        let (lo, hi) = (start.max(first), (end - 1).min(last));
        // `i`: the first page of `[lo, hi]` not decided yet; `kept_from`:
        // the first page of the piece that stays, not put back yet.
        let (mut dropped, mut kept_from, mut i) = (0, start, lo);
        for &(keep_first, keep_last) in kept.iter().chain([(u64::MAX, u64::MAX)].iter()) {
            if i > hi {
                break;
            }
            if keep_last < i {
                continue;
            }
            let drop_end = keep_first.min(hi + 1); // the pages before it go
            if drop_end > i {
                assert!(run.page.writeback.0.is_empty(), "discarding page {i} of {key:?} under writeback");
                if kept_from < i {
                    self.put(key, kept_from, run.piece(kept_from - start, i - kept_from));
                }
                dropped += drop_end - i;
                kept_from = drop_end;
            }
            i = keep_last.saturating_add(1).max(i);
        }
        if kept_from < end {
            self.put(key, kept_from, run.piece(kept_from - start, end - kept_from));
        }
        dropped
    }
}
