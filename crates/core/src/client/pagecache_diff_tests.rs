//! The run-length page cache against the reference cache of one entry per
//! page: random sequences of every operation, bytes and phantoms mixed, long
//! page-aligned runs favoured (they are what the runs merge and split), and
//! after each step every return value and every observer must agree. Bytes
//! are written both copied in and as frames the cache takes over (from a
//! small arena that runs out, then the heap), and every write RPC's
//! snapshot must still hold the bytes it was cut with when it completes,
//! however the pages were rewritten meanwhile (frames are copied on write).
use super::pagecache::{PageCache, WritebackRun};
use super::reference_cache::ReferenceCache;
use crate::extent::Extent;
use crate::pages::{Arena, PagePool, PageSpan};
use crate::units::{ObjectId, ObjectKey, OstIndex, PAGE_SIZE};
use proptest::prelude::*;

const P: u64 = PAGE_SIZE;
const KEYS: [ObjectKey; 3] = [key(0, 1), key(0, 2), key(1, 1)];
const OSTS: [OstIndex; 2] = [OstIndex(0), OstIndex(1)];

const fn key(ost: u32, object: u64) -> ObjectKey {
    ObjectKey { ost: OstIndex(ost), object: ObjectId(object) }
}

#[derive(Clone, Debug)]
enum Op {
    Write { key: usize, offset: u64, len: u64, seed: u8 },
    WriteSpan { key: usize, offset: u64, len: u64, seed: u8 },
    WritePhantom { key: usize, offset: u64, len: u64 },
    Fill { key: usize, page: u64, pages: u64, seed: u8 },
    FillPhantom { key: usize, page: u64, pages: u64 },
    Writeback { key: usize, offset: u64, len: u64, pages_max: u64 },
    Complete { pick: usize, failed: bool },
    DropClean { key: usize, offset: u64, len: u64 },
    Discard { key: usize, offset: u64, len: u64, keep: u64 },
    DiscardOst { ost: usize },
    Truncate { key: usize, size: u64 },
}

/// An offset: half of them on a page boundary.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![(0..64u64).prop_map(|p| p * P), 0..64 * P]
}

/// A length: half of them whole pages, long runs likely.
fn len() -> impl Strategy<Value = u64> {
    prop_oneof![(1..20u64).prop_map(|p| p * P), 0..20 * P]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        4 => (k.clone(), offset(), len(), any::<u8>()).prop_map(|(key, offset, len, seed)| Op::Write { key, offset, len, seed }),
        4 => (k.clone(), offset(), len(), any::<u8>()).prop_map(|(key, offset, len, seed)| Op::WriteSpan { key, offset, len, seed }),
        4 => (k.clone(), offset(), len()).prop_map(|(key, offset, len)| Op::WritePhantom { key, offset, len }),
        2 => (k.clone(), 0..64u64, 0..16u64, any::<u8>()).prop_map(|(key, page, pages, seed)| Op::Fill { key, page, pages, seed }),
        2 => (k.clone(), 0..64u64, 0..16u64).prop_map(|(key, page, pages)| Op::FillPhantom { key, page, pages }),
        4 => (k.clone(), offset(), 1..80 * P, 1..8u64)
            .prop_map(|(key, offset, len, pages_max)| Op::Writeback { key, offset, len, pages_max }),
        4 => (any::<usize>(), prop::bool::weighted(0.2)).prop_map(|(pick, failed)| Op::Complete { pick, failed }),
        1 => (k.clone(), offset(), 1..40 * P).prop_map(|(key, offset, len)| Op::DropClean { key, offset, len }),
        1 => (k.clone(), offset(), 1..40 * P, 0..4u64).prop_map(|(key, offset, len, keep)| Op::Discard { key, offset, len, keep }),
        1 => (0..OSTS.len()).prop_map(|ost| Op::DiscardOst { ost }),
        1 => (k, 0..80 * P).prop_map(|(key, size)| Op::Truncate { key, size }),
    ]
}

fn bytes(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i % 253) as u8)).collect()
}

/// The two caches and the write RPCs they have in flight (each cache's
/// snapshot of it).
struct Twins {
    runs: PageCache,
    pages: ReferenceCache,
    inflight: Vec<(WritebackRun, WritebackRun)>,
}

impl Default for Twins {
    fn default() -> Self {
        let pool = PagePool::with_arena(Arena::on_heap(48));
        Twins { runs: PageCache::with_pool(pool), pages: ReferenceCache::default(), inflight: Vec::new() }
    }
}

impl Twins {
    fn apply(&mut self, op: &Op) {
        let (c, r) = (&mut self.runs, &mut self.pages);
        match *op {
            Op::Write { key, offset, len, seed } => {
                let data = bytes(len, seed);
                assert_eq!(c.write(KEYS[key], offset, &data), r.write(KEYS[key], offset, &data));
            }
            Op::WriteSpan { key, offset, len, seed } => {
                let data = bytes(len, seed);
                let span = PageSpan::copy_from(c.pool(), (offset % P) as u16, &data);
                assert_eq!(c.write_span(KEYS[key], offset, &span), r.write(KEYS[key], offset, &data));
            }
            Op::WritePhantom { key, offset, len } => {
                assert_eq!(c.write_phantom(KEYS[key], offset, len), r.write_phantom(KEYS[key], offset, len));
            }
            Op::Fill { key, page, pages, seed } => {
                let data = bytes(pages * P, seed);
                c.fill(KEYS[key], page * P, &data);
                r.fill(KEYS[key], page * P, &data);
            }
            Op::FillPhantom { key, page, pages } => {
                c.fill_phantom(KEYS[key], page * P, pages * P);
                r.fill_phantom(KEYS[key], page * P, pages * P);
            }
            Op::Writeback { key, offset, len, pages_max } => {
                let range = Extent::from_offset_len(offset, len);
                let run = c.next_writeback(KEYS[key], range, pages_max * P);
                let reference = r.next_writeback(KEYS[key], range, pages_max * P);
                assert_eq!(run, reference);
                self.inflight.extend(run.zip(reference));
            }
            Op::Complete { pick, failed } => {
                if self.inflight.is_empty() {
                    return;
                }
                let (run, reference) = self.inflight.swap_remove(pick % self.inflight.len());
                assert_eq!(run, reference, "a write RPC's bytes changed in flight");
                let (key, offset, len) = (run.key, run.offset, run.data.len());
                if failed {
                    assert_eq!(c.writeback_failed(key, offset, len), r.writeback_failed(key, offset, len));
                } else {
                    assert_eq!(c.writeback_done(key, offset, len), r.writeback_done(key, offset, len));
                }
            }
            Op::DropClean { key, offset, len } => {
                let range = Extent::from_offset_len(offset, len);
                assert_eq!(c.drop_clean(KEYS[key], range), r.drop_clean(KEYS[key], range));
            }
            Op::Discard { key, offset, len, keep } => {
                let range = Extent::from_offset_len(offset, len);
                let pages = Extent::new(range.start / P * P, (range.end / P + 1) * P - 1);
                if r.has_writeback(KEYS[key], pages) {
                    return; // discarding a page under writeback is a caller's bug
                }
                // Pages kept in a pattern of 4, given as extents of every
                // size: a page, a stretch of pages, or bytes that start
                // inside a page (which keep only the pages after it).
                let mut kept: Vec<Extent> = (range.start / P..=range.end / P)
                    .step_by(4)
                    .filter(|_| keep > 0)
                    .map(|first| Extent::new(first * P + (keep - 1) * (P / 2), (first + keep) * P - 1))
                    .collect();
                if keep == 3 {
                    kept.reverse(); // in no particular order, as locks come
                }
                let keep_page = |page: u64| kept.iter().any(|e| e.contains_offset(page * P));
                assert_eq!(c.discard(KEYS[key], range, &kept), r.discard(KEYS[key], range, keep_page));
            }
            Op::DiscardOst { ost } => {
                assert_eq!(c.discard_ost(OSTS[ost]), r.discard_ost(OSTS[ost]));
                self.inflight.retain(|(run, _)| run.key.ost != OSTS[ost]);
            }
            Op::Truncate { key, size } => {
                c.truncate(KEYS[key], size);
                r.truncate(KEYS[key], size);
                self.inflight.retain(|(run, _)| run.key != KEYS[key] || run.offset + run.data.len() <= size);
            }
        }
    }

    /// Every observer of the two caches agrees; `probe` is one more range to ask about.
    fn agree(&self, (offset, len): (u64, u64)) {
        let (c, r) = (&self.runs, &self.pages);
        c.check_invariants();
        r.check_invariants();
        assert_eq!(c.dirty_bytes(), r.dirty_bytes());
        for ost in OSTS {
            assert_eq!(c.dirty_bytes_ost(ost), r.dirty_bytes_ost(ost), "{ost:?}");
        }
        assert_eq!((c.cached_pages(), c.data_pages()), (r.cached_pages(), r.data_pages()));
        assert_eq!(c.keys_with_dirty(), r.keys_with_dirty());
        let probe = Extent::from_offset_len(offset, len.max(1));
        for key in KEYS {
            assert_eq!(c.dirty_ranges(key), r.dirty_ranges(key), "{key:?}");
            assert_eq!(c.object_cached_end(key), r.object_cached_end(key), "{key:?}");
            for range in [Extent::WHOLE, probe] {
                assert_eq!(c.has_dirty(key, range), r.has_dirty(key, range), "{key:?} {range}");
                assert_eq!(c.has_writeback(key, range), r.has_writeback(key, range), "{key:?} {range}");
            }
            assert_eq!(c.read(key, offset, len), r.read(key, offset, len), "{key:?}");
            for span in [P, 3 * P, 16 * P] {
                assert_eq!(c.missing_pages(key, offset, len, span), r.missing_pages(key, offset, len, span));
            }
        }
    }
}

proptest! {
    #[test]
    fn runs_keep_the_books_of_pages(steps in prop::collection::vec((op(), offset(), len()), 1..60)) {
        let mut twins = Twins::default();
        for (op, probe_offset, probe_len) in &steps {
            twins.apply(op);
            twins.agree((*probe_offset, *probe_len));
        }
    }
}

#[test]
fn a_megabyte_of_phantom_writes_cut_into_two_runs() {
    let mut twins = Twins::default();
    let k = KEYS[0];
    // 1 MiB in, cut into two 512 KiB writeback runs, one completed.
    twins.apply(&Op::WritePhantom { key: 0, offset: 0, len: 256 * P });
    twins.apply(&Op::Writeback { key: 0, offset: 0, len: 256 * P, pages_max: 128 });
    twins.apply(&Op::Writeback { key: 0, offset: 0, len: 256 * P, pages_max: 128 });
    twins.apply(&Op::Complete { pick: 0, failed: false });
    twins.agree((P / 2, 300 * P));
    assert_eq!(twins.runs.cached_pages(), 256);
    assert_eq!(twins.runs.dirty_bytes(), 128 * P);
    assert!(twins.runs.has_writeback(k, Extent::WHOLE));
}
