//! Cutting write RPCs out of the page cache: the next run of contiguous
//! dirty bytes to send (never one with a page already in flight), and
//! what its reply does to the books.

use super::runs::*;
use super::{PageCache, WritebackRun};
use crate::extent::Extent;
use crate::msg::Payload;
use crate::pages::PageSpan;
use crate::units::{ObjectKey, PAGE_SIZE};

impl PageCache {
    /// Cuts the lowest run of contiguous dirty bytes inside `range` whose
    /// pages have no writeback in flight, at most `bytes_max` long, marks it
    /// under writeback and snapshots its data (nothing to copy if any of its
    /// pages is a phantom page: the run is then a phantom).
    pub fn next_writeback(&mut self, key: ObjectKey, range: Extent, bytes_max: u64) -> Option<WritebackRun> {
        assert!(bytes_max >= PAGE_SIZE && page_aligned(bytes_max));
        let (offset, len, phantom) = self.find_run(key, &range, bytes_max)?;
        let (first, last) = (offset / PAGE_SIZE, (offset + len - 1) / PAGE_SIZE);
        debug_assert_eq!(phantom, runs_in_rev(&self.objects[&key], first, last).any(|(_, run)| run.data.is_none()));
        let mut frames = if phantom { None } else { Some(Vec::with_capacity((last - first + 1) as usize)) };
        self.update_bytes(key, offset, len, None, |run, _, _, start, end| {
            if let (Some(out), Some(src)) = (&mut frames, &run.data) {
                out.extend_from_slice(src);
            }
            run.page.dirty.remove(start, end);
            run.page.writeback.insert(start, end);
        });
        let head = (offset % PAGE_SIZE) as u16;
        let data =
            frames.map_or(Payload::Phantom(len), |frames| Payload::Pages(Box::new(PageSpan::new(frames, head, len))));
        debug_assert_eq!(data.len(), len, "writeback run snapshot");
        Some(WritebackRun { key, offset, data })
    }

    /// `(offset, len, phantom)` of the run `next_writeback` should cut:
    /// walking the pages of `range` from the first eligible dirty one, the
    /// run starts at the first dirty piece and grows over whole dirty pages,
    /// skipping no page and none with writeback in flight, up to
    /// `bytes_max`; `phantom` if any of its pages is a phantom page.
    fn find_run(&self, key: ObjectKey, range: &Extent, bytes_max: u64) -> Option<(u64, u64, bool)> {
        let runs = self.objects.get(&key)?;
        let (range_first, range_last) = (range.start / PAGE_SIZE, range.end / PAGE_SIZE);
        let index = self.dirty_runs.get(&key)?;
        let eligible = |s: u64| runs.get(&s).is_some_and(|r| r.page.writeback.0.is_empty());
        let containing = run_at(runs, range_first).map(|(s, _)| s);
        let first_start = containing
            .filter(|&s| s < range_first && index.contains(&s) && eligible(s))
            .or_else(|| index.range(range_first..=range_last).copied().find(|&s| eligible(s)))?;
        let first = first_start.max(range_first);
        // The run found so far, `[start, end)`.
        let mut run: Option<(u64, u64)> = None;
        // The first page the walk put in the run from a phantom page run:
        // the run is a phantom if that page survives the cut to `bytes_max`.
        let mut phantom_from: Option<u64> = None;
        // The run at `first_start` holds `first`, so the walk starts there.
        'runs: for (&start, r) in runs.range(first_start..=range_last) {
            let page = &r.page;
            let idle = page.writeback.0.is_empty();
            let hi = (r.end(start) - 1).min(range_last);
            // The pages strictly inside `range` all see the same piece.
            let inner = if idle { page.dirty.first_within((0, PAGE_END)) } else { None };
            let mut i = start.max(first);
            while i <= hi {
                let base = i * PAGE_SIZE;
                let interior = i > range_first && i < range_last;
                let piece = if !idle {
                    None
                } else if interior {
                    inner
                } else {
                    page.dirty.first_within(clip(range, i))
                };
                run = match (run, piece) {
                    (None, None) if interior => {
                        i = hi.min(range_last - 1) + 1; // nothing to start from in here
                        continue;
                    }
                    (None, None) => {
                        i += 1;
                        continue;
                    }
                    (None, Some((a, b))) => Some((base + u64::from(a), base + u64::from(b))),
                    (Some((s, e)), Some((0, b))) if e == base => Some((s, base + u64::from(b))),
                    (Some(_), _) => break 'runs,
                };
                if r.data.is_none() {
                    phantom_from = phantom_from.or(Some(i));
                }
                match run {
                    Some((s, e)) if e == base + PAGE_SIZE && e - s < bytes_max => {}
                    _ => break 'runs,
                }
                i += 1;
                // Whole dirty interior pages extend the run a page each.
                if inner == Some((0, PAGE_END)) && i <= hi && i < range_last {
                    let (s, e) = run.expect("just set");
                    let interior_pages = hi.min(range_last - 1) - i + 1;
                    let wanted = (bytes_max - (e - s)).div_ceil(PAGE_SIZE);
                    let take = interior_pages.min(wanted);
                    run = Some((s, e + take * PAGE_SIZE));
                    i += take;
                    if take == wanted {
                        break 'runs;
                    }
                }
            }
        }
        let (start, mut end) = run?;
        if end - start > bytes_max {
            end = (start + bytes_max) / PAGE_SIZE * PAGE_SIZE; // a page boundary past start
        }
        let phantom = phantom_from.is_some_and(|page| page * PAGE_SIZE < end);
        Some((start, end - start, phantom))
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
        let (before, after) = self.update_bytes(key, offset, len, None, |run, _, _, start, end| {
            run.page.writeback.remove(start, end);
            run.page.uptodate &= !failed;
        });
        before - after
    }
}
