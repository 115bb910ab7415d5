//! Tests of the page cache: unit cases and a model-based property test.
use super::*;
use crate::units::ObjectId;
use proptest::prelude::*;

const P: u64 = PAGE_SIZE;
const KEY: ObjectKey = key(1);
const ALL: Extent = Extent::WHOLE;

const fn key(ost: u32) -> ObjectKey {
    ObjectKey { ost: OstIndex(ost), object: ObjectId(7) }
}

fn bytes(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i % 251) as u8)).collect()
}

/// `(offset, len)` of the next run, if any.
fn next(c: &mut PageCache, key: ObjectKey, range: Extent, bytes_max: u64) -> Option<(u64, u64)> {
    c.next_writeback(key, range, bytes_max).map(|run| (run.offset, run.data.len() as u64))
}

#[test]
fn partial_page_writes_then_read() {
    let mut c = PageCache::new();
    assert_eq!(c.write(KEY, 100, &bytes(100, 1)), 100);
    assert_eq!(c.read(KEY, 100, 100), Some(bytes(100, 1)));
    let middle = c.read(KEY, 150, 10);
    assert_eq!(middle.as_deref(), Some(&bytes(100, 1)[50..60]));
    assert_eq!(c.read(KEY, 99, 2), None);
    assert_eq!(c.write(KEY, 0, &bytes(150, 2)), 100); // 50 were already dirty
    assert_eq!(c.write(KEY, 200, &bytes(P - 200, 3)), P - 200);
    assert_eq!(c.read(KEY, 0, P).map(|d| d.len()), Some(P as usize)); // wholly written
    assert_eq!((c.dirty_bytes(), c.object_cached_end(KEY)), (P, P));
    c.check_invariants();
}

#[test]
fn missing_pages_and_fill_merge_local_bytes_win() {
    let mut c = PageCache::new();
    let spans = [(0, 2 * P - 1), (2 * P, 4 * P - 1), (4 * P, 5 * P - 1)];
    let spans: Vec<Extent> = spans.iter().map(|&(s, e)| Extent::new(s, e)).collect();
    assert_eq!(c.missing_pages(KEY, 10, 5 * P - 20, 2 * P), spans);
    c.write(KEY, P + 10, &[9; 10]);
    assert_eq!(c.missing_pages(KEY, P + 10, 10, P), vec![]); // every byte is local
    assert_eq!(c.read(KEY, P, 100), None);
    let page1 = vec![Extent::new(P, 2 * P - 1)];
    assert_eq!(c.missing_pages(KEY, P, 100, P), page1);
    c.fill(KEY, 0, &vec![0xAA; 3 * P as usize]);
    let page = c.read(KEY, P, P).expect("filled");
    assert!(page[..10].iter().chain(&page[20..]).all(|&b| b == 0xAA));
    assert_eq!(&page[10..20], &[9; 10]);
    assert_eq!(c.missing_pages(KEY, 0, 3 * P, P), vec![]);
    assert_eq!((c.cached_pages(), c.dirty_bytes()), (3, 10));
    assert_eq!(c.object_cached_end(KEY), P + 20);
    c.check_invariants();
}

#[test]
fn writeback_runs_are_contiguous_and_cut_at_page_boundaries() {
    let mut c = PageCache::new();
    c.write(KEY, 100, &bytes(3 * P - 50, 4));
    c.write(KEY, 5 * P, &bytes(10, 5));
    c.write(KEY, 8 * P - 10, &[1; 10]);
    c.write(KEY, 8 * P + 10, &[2; 10]); // a gap at the start of page 8
    c.write(KEY, 10 * P - 10, &[3; 10]);
    c.write(KEY, 11 * P, &[4; 10]); // page 10 is absent
    let run = c.next_writeback(KEY, ALL, 2 * P).expect("dirty");
    assert_eq!((run.offset, run.data), (100, bytes(2 * P - 100, 4)));
    assert_eq!(next(&mut c, KEY, ALL, 2 * P), Some((2 * P, P + 50)));
    assert_eq!(next(&mut c, KEY, ALL, 2 * P), Some((5 * P, 10))); // not contiguous
    assert_eq!(next(&mut c, KEY, ALL, 2 * P), Some((8 * P - 10, 10)));
    assert_eq!(next(&mut c, KEY, ALL, 2 * P), Some((8 * P + 10, 10)));
    assert_eq!(next(&mut c, KEY, ALL, 2 * P), Some((10 * P - 10, 10)));
    assert_eq!(next(&mut c, KEY, ALL, 2 * P), Some((11 * P, 10)));
    assert_eq!(next(&mut c, KEY, ALL, 2 * P), None);
    assert_eq!(c.dirty_bytes(), 3 * P - 50 + 50);
    assert!(!c.has_dirty(KEY, ALL) && c.has_writeback(KEY, Extent::new(0, 100)));
    assert_eq!(c.writeback_done(KEY, 100, 2 * P - 100), 2 * P - 100);
    c.check_invariants();
}

#[test]
fn writeback_is_clipped_and_skips_pages_under_writeback() {
    let mut c = PageCache::new();
    c.write(KEY, 0, &bytes(2 * P, 6));
    let range = Extent::new(10, P + 9);
    assert_eq!(next(&mut c, KEY, range, 4 * P), Some((10, P)));
    assert_eq!(next(&mut c, KEY, ALL, 4 * P), None); // both pages in flight
    let dirty = vec![Extent::new(0, 9), Extent::new(P + 10, 2 * P - 1)];
    assert_eq!(c.dirty_ranges(KEY), dirty);
    assert_eq!(c.keys_with_dirty(), vec![KEY]);
    assert_eq!(c.writeback_done(KEY, 10, P), P);
    assert_eq!(next(&mut c, KEY, ALL, 4 * P), Some((0, 10))); // page 0's dirty bytes end
    assert_eq!(next(&mut c, KEY, ALL, 4 * P), Some((P + 10, P - 10)));
    assert!(c.keys_with_dirty().is_empty());
    c.check_invariants();
}

#[test]
fn rewrite_during_writeback_redirties() {
    let mut c = PageCache::new();
    c.write(KEY, 0, &[1; 100]);
    assert_eq!(next(&mut c, KEY, ALL, P), Some((0, 100)));
    assert_eq!(c.write(KEY, 50, &[2; 100]), 50); // only bytes 100..150 are new
    assert_eq!(c.dirty_bytes(), 150);
    assert!(c.has_dirty(KEY, Extent::new(50, 50)));
    assert_eq!(next(&mut c, KEY, ALL, P), None); // the page is in flight
    assert_eq!(c.writeback_done(KEY, 0, 100), 50);
    let run = c.next_writeback(KEY, ALL, P).expect("re-dirtied");
    assert_eq!((run.offset, run.data), (50, vec![2; 100]));
    assert_eq!(c.writeback_done(KEY, 50, 100), 100);
    assert_eq!((c.dirty_bytes(), c.read(KEY, 0, 10)), (0, None)); // never uptodate
    c.check_invariants();
}

#[test]
fn discard_and_eviction_accounting() {
    let mut c = PageCache::new();
    let (a, b) = (key(1), key(2));
    c.write(a, 0, &bytes(3 * P, 1));
    c.write(b, 0, &bytes(2 * P, 2));
    assert_eq!(next(&mut c, a, ALL, P), Some((0, P)));
    assert_eq!(c.writeback_done(a, 0, P), P);
    assert_eq!(c.discard(a, Extent::new(0, 0), |_| false), 0); // flushed first
    assert_eq!(c.discard(a, ALL, |index| index == 1), P); // page 2 was dirty
    assert_eq!((c.cached_pages(), c.dirty_bytes_ost(OstIndex(1))), (3, P));
    assert_eq!(next(&mut c, a, ALL, P), Some((P, P)));
    assert_eq!(c.writeback_failed(a, P, P), P); // evicted: lost
    assert_eq!(c.read(a, P, 1), None); // the server never got it
    assert_eq!(next(&mut c, b, ALL, P), Some((0, P)));
    assert_eq!(c.discard_ost(OstIndex(2)), 2 * P); // writeback in flight counts
    assert_eq!(c.writeback_done(b, 0, P), 0); // forgotten
    assert_eq!((c.dirty_bytes(), c.cached_pages()), (0, 1));
    c.check_invariants();
}

#[test]
#[should_panic(expected = "under writeback")]
fn discard_refuses_pages_in_flight() {
    let mut c = PageCache::new();
    c.write(KEY, 0, &[1; 10]);
    c.next_writeback(KEY, ALL, P);
    c.discard(KEY, ALL, |_| false);
}

#[test]
fn truncate_drops_tail_and_keeps_accounting_exact() {
    let mut c = PageCache::new();
    c.write(KEY, 0, &bytes(3 * P, 3));
    let page1 = Extent::new(P, 2 * P - 1);
    assert_eq!(next(&mut c, KEY, page1, P), Some((P, P)));
    c.truncate(KEY, P + 100);
    assert_eq!((c.dirty_bytes(), c.cached_pages()), (P + 100, 2));
    let tail = [&bytes(3 * P, 3)[(P + 90) as usize..][..10], &[0; 10]].concat();
    assert_eq!(c.read(KEY, P + 90, 20), Some(tail));
    assert_eq!(c.writeback_done(KEY, P, P), 100);
    c.fill(KEY, 4 * P, &[5; P as usize]);
    assert_eq!(c.object_cached_end(KEY), P + 100); // fills are not local writes
    c.truncate(KEY, 0);
    assert_eq!((c.dirty_bytes(), c.cached_pages()), (0, 0));
    assert_eq!(c.object_cached_end(KEY), 0);
    c.check_invariants();
}

const OBJ: u64 = 4 * P;

#[derive(Clone, Debug)]
enum Op {
    Write(u64, u64, u8),      // offset, len, seed
    Read(u64, u64),           // offset, len; fetches missing pages when None
    Fill(u64),                // page index
    Writeback(u64, u64, u64), // range offset, len, pages max
    Done(usize, bool),        // which run in flight, failed
    Discard(u64, u64),        // range offset, len
    Truncate(u64),
}

fn op() -> impl Strategy<Value = Op> {
    // Offsets and ends are often page aligned, to reach the edge cases.
    let offset = prop_oneof![0..OBJ, (0..OBJ / P).prop_map(|i| i * P)];
    let span = offset.prop_flat_map(|o| {
        let to_page_end = (o / P + 1..=OBJ / P).prop_map(move |end| end * P - o);
        (Just(o), prop_oneof![1..=(OBJ - o).min(6000), to_page_end])
    });
    prop_oneof![
        4 => (span.clone(), any::<u8>()).prop_map(|((o, l), seed)| Op::Write(o, l, seed)),
        3 => span.clone().prop_map(|(o, l)| Op::Read(o, l)),
        1 => (0..OBJ / P).prop_map(Op::Fill),
        3 => (span.clone(), 1..=2u64).prop_map(|((o, l), pages)| Op::Writeback(o, l, pages)),
        3 => (any::<usize>(), prop::bool::weighted(0.15)).prop_map(|(i, f)| Op::Done(i, f)),
        1 => span.prop_map(|(o, l)| Op::Discard(o, l)),
        1 => (0..=OBJ).prop_map(Op::Truncate),
    ]
}

/// Per byte of one object: the server's value, the latest local value
/// (None once lost or dropped), and whether dirty / under writeback.
struct Model {
    server: Vec<u8>,
    written: Vec<Option<u8>>,
    dirty: Vec<bool>,
    writeback: Vec<bool>,
    inflight: Vec<WritebackRun>,
}

impl Model {
    fn pending(&self) -> u64 {
        (0..OBJ as usize).filter(|&i| self.dirty[i] || self.writeback[i]).count() as u64
    }
    fn busy_pages(&self) -> Vec<u64> {
        (0..OBJ).filter(|&i| self.writeback[i as usize]).map(|i| i / P).collect()
    }
}

fn step(c: &mut PageCache, m: &mut Model, op: Op) {
    let all = |offset: u64, len: u64| offset as usize..(offset + len) as usize;
    match op {
        Op::Write(offset, len, seed) => {
            let new = all(offset, len).filter(|&i| !m.dirty[i] && !m.writeback[i]).count();
            assert_eq!(c.write(KEY, offset, &bytes(len, seed)), new as u64);
            for (i, b) in all(offset, len).zip(bytes(len, seed)) {
                (m.written[i], m.dirty[i]) = (Some(b), true);
            }
        }
        Op::Read(offset, len) => read(c, m, offset, len),
        Op::Fill(index) => c.fill(KEY, index * P, &m.server[all(index * P, P)]),
        Op::Writeback(o, l, pages) => writeback(c, m, Extent::from_offset_len(o, l), pages * P),
        Op::Done(pick, failed) if !m.inflight.is_empty() => {
            let run = m.inflight.swap_remove(pick % m.inflight.len());
            done(c, m, run, failed);
        }
        Op::Done(..) => {}
        Op::Discard(offset, len) => {
            let (range, busy) = (Extent::from_offset_len(offset, len), m.busy_pages());
            let pages = page_indices(&range).filter(|i| !busy.contains(i));
            let dropped: Vec<usize> = pages.flat_map(|i| all(i * P, P)).collect();
            let lost = dropped.iter().filter(|&&i| m.dirty[i]).count() as u64;
            assert_eq!(c.discard(KEY, range, |i| busy.contains(&i)), lost);
            dropped.into_iter().for_each(|i| (m.written[i], m.dirty[i]) = (None, false));
        }
        Op::Truncate(size) => {
            c.truncate(KEY, size);
            for i in all(size, OBJ - size) {
                (m.server[i], m.written[i], m.dirty[i], m.writeback[i]) = (0, None, false, false);
            }
            for run in &mut m.inflight {
                run.data.truncate(size.saturating_sub(run.offset) as usize);
            }
        }
    }
}

fn read(c: &mut PageCache, m: &Model, offset: u64, len: u64) {
    let range = offset as usize..(offset + len) as usize;
    let want: Vec<u8> = range.clone().map(|i| m.written[i].unwrap_or(m.server[i])).collect();
    let got = c.read(KEY, offset, len);
    let missing = c.missing_pages(KEY, offset, len, 2 * P);
    assert_eq!(got.is_none(), !missing.is_empty());
    assert!(got.is_some() || !range.clone().all(|i| m.dirty[i] || m.writeback[i]));
    if let Some(got) = got {
        return assert_eq!(got, want);
    }
    for ext in missing {
        let aligned = page_aligned(ext.start) && page_aligned(ext.len());
        assert!(aligned && ext.len() <= 2 * P, "{ext}");
        let server = &m.server[ext.start as usize..=ext.end as usize];
        c.fill(KEY, ext.start, server);
    }
    assert_eq!(c.read(KEY, offset, len), Some(want), "after fetching");
}

fn writeback(c: &mut PageCache, m: &mut Model, range: Extent, bytes_max: u64) {
    let busy = m.busy_pages();
    let ok = |i: u64| range.contains_offset(i) && i < OBJ && m.dirty[i as usize] && !busy.contains(&(i / P));
    let lowest = (range.start..=range.end.min(OBJ - 1)).find(|&i| ok(i));
    let Some(run) = c.next_writeback(KEY, range, bytes_max) else {
        return assert_eq!(lowest, None);
    };
    let (offset, end) = (run.offset, run.offset + run.data.len() as u64);
    assert_eq!(Some(offset), lowest, "not the lowest eligible run");
    assert!(offset < end && end - offset <= bytes_max && range.contains_offset(end - 1));
    for (i, &b) in (offset..end).zip(&run.data) {
        assert!(ok(i) && Some(b) == m.written[i as usize], "byte {i}");
    }
    if ok(end) {
        let cut = page_aligned(end) && end - offset + P > bytes_max;
        assert!(cut, "run stopped early");
    }
    for i in offset as usize..end as usize {
        (m.dirty[i], m.writeback[i]) = (false, true);
    }
    m.inflight.push(run);
}

fn done(c: &mut PageCache, m: &mut Model, run: WritebackRun, failed: bool) {
    let mut removed = 0;
    for (i, &b) in (run.offset as usize..).zip(&run.data) {
        assert!(m.writeback[i]);
        m.writeback[i] = false;
        removed += u64::from(!m.dirty[i]);
        match failed {
            false => m.server[i] = b,
            true if !m.dirty[i] => m.written[i] = None,
            true => {}
        }
    }
    let (offset, len) = (run.offset, run.data.len() as u64);
    let got = match failed {
        false => c.writeback_done(KEY, offset, len),
        true => c.writeback_failed(KEY, offset, len),
    };
    assert_eq!(got, removed);
}

proptest! {
    #[test]
    fn cache_agrees_with_byte_model(ops in prop::collection::vec(op(), 1..64)) {
        let n = OBJ as usize;
        let server = (0..n).map(|i| (i * 7 % 253) as u8).collect();
        let (written, dirty, writeback) = (vec![None; n], vec![false; n], vec![false; n]);
        let mut m = Model { server, written, dirty, writeback, inflight: vec![] };
        let mut c = PageCache::new();
        for op in ops {
            step(&mut c, &mut m, op);
            c.check_invariants();
            assert_eq!((c.dirty_bytes(), c.dirty_bytes_ost(KEY.ost)), (m.pending(), m.pending()));
            assert_eq!(c.has_dirty(KEY, ALL), m.dirty.contains(&true));
            assert_eq!(c.has_writeback(KEY, ALL), m.writeback.contains(&true));
        }
    }
}
