//! Tests of the page cache: unit cases and a model-based property test, in
//! which a twin cache written with phantom payloads must keep the same books.
use super::*;
use crate::units::ObjectId;
use proptest::prelude::*;
use std::fmt;

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
    c.next_writeback(key, range, bytes_max).map(|run| (run.offset, run.data.len()))
}

/// The cached bytes of `[offset, offset + len)`; panics on a phantom.
fn read_bytes(c: &PageCache, key: ObjectKey, offset: u64, len: u64) -> Option<Vec<u8>> {
    c.read(key, offset, len).map(|data| data.into_bytes().expect("bytes, not a phantom"))
}

#[test]
fn partial_page_writes_then_read() {
    let mut c = PageCache::new();
    assert_eq!(c.write(KEY, 100, &bytes(100, 1)), 100);
    assert_eq!(read_bytes(&c, KEY, 100, 100), Some(bytes(100, 1)));
    let middle = read_bytes(&c, KEY, 150, 10);
    assert_eq!(middle.as_deref(), Some(&bytes(100, 1)[50..60]));
    assert_eq!(c.read(KEY, 99, 2), None);
    assert_eq!(c.write(KEY, 0, &bytes(150, 2)), 100); // 50 were already dirty
    assert_eq!(c.write(KEY, 200, &bytes(P - 200, 3)), P - 200);
    assert_eq!(c.read(KEY, 0, P).map(|d| d.len()), Some(P)); // wholly written
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
    let page = read_bytes(&c, KEY, P, P).expect("filled");
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
    assert_eq!((run.offset, run.data), (100, Payload::Bytes(bytes(2 * P - 100, 4))));
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
    assert_eq!((run.offset, run.data), (50, Payload::Bytes(vec![2; 100])));
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
    assert_eq!(c.discard(a, Extent::new(0, 0), &[]), 0); // flushed first
    assert_eq!(c.discard(a, ALL, &[Extent::new(P, 2 * P - 1)]), P); // page 2 was dirty
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
    c.discard(KEY, ALL, &[]);
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
    assert_eq!(read_bytes(&c, KEY, P + 90, 20), Some(tail));
    assert_eq!(c.writeback_done(KEY, P, P), 100);
    c.fill(KEY, 4 * P, &[5; P as usize]);
    assert_eq!(c.object_cached_end(KEY), P + 100); // fills are not local writes
    c.truncate(KEY, 0);
    assert_eq!((c.dirty_bytes(), c.cached_pages()), (0, 0));
    assert_eq!(c.object_cached_end(KEY), 0);
    c.check_invariants();
}

#[test]
fn phantom_pages_keep_the_books_without_data() {
    let mut c = PageCache::new();
    assert_eq!(c.write_phantom(KEY, 100, 3 * P), 3 * P);
    assert_eq!((c.cached_pages(), c.data_pages(), c.dirty_bytes()), (4, 0, 3 * P));
    assert_eq!(c.read(KEY, 100, 3 * P), Some(Payload::Phantom(3 * P)));
    assert_eq!(c.read(KEY, 99, 2), None); // byte 99 was never written
    let run = c.next_writeback(KEY, ALL, 2 * P).expect("dirty");
    assert_eq!((run.offset, run.data), (100, Payload::Phantom(2 * P - 100)));
    assert_eq!(c.next_writeback(KEY, ALL, 2 * P).map(|r| (r.offset, r.data)), Some((2 * P, Payload::Phantom(P + 100))));
    assert_eq!(c.writeback_done(KEY, 100, 2 * P - 100), 2 * P - 100);
    assert_eq!(c.missing_pages(KEY, 0, P, P), vec![Extent::new(0, P - 1)]);
    c.fill_phantom(KEY, 0, 2 * P);
    assert_eq!(c.read(KEY, 0, 10), Some(Payload::Phantom(10)));
    c.truncate(KEY, P + 1);
    assert_eq!((c.cached_pages(), c.data_pages(), c.object_cached_end(KEY)), (2, 0, P + 1));
    c.check_invariants();
}

#[test]
fn mixed_kinds_phantom_wins() {
    let mut c = PageCache::new();
    c.write(KEY, 0, &[1; 10]);
    c.write(KEY, P, &[2; 10]);
    assert_eq!(c.data_pages(), 2);
    c.write_phantom(KEY, 5, 10); // page 0 drops its bytes
    assert_eq!((c.data_pages(), c.dirty_bytes()), (1, 25));
    assert_eq!(c.read(KEY, 0, 15), Some(Payload::Phantom(15)));
    assert_eq!(c.read(KEY, P, 10), Some(Payload::Bytes(vec![2; 10])));
    assert_eq!(c.read(KEY, 0, P + 10), None); // the rest of page 0 is unknown
    c.write(KEY, 10, &bytes(P - 10, 3)); // into a phantom page: counted, not kept
    assert_eq!((c.data_pages(), c.dirty_bytes()), (1, P + 10));
    assert_eq!(c.read(KEY, 0, P + 10), Some(Payload::Phantom(P + 10))); // touches a phantom page
    let run = c.next_writeback(KEY, ALL, 4 * P).expect("dirty");
    assert_eq!((run.offset, run.data), (0, Payload::Phantom(P + 10)));
    assert_eq!(c.writeback_done(KEY, 0, P + 10), P + 10);
    c.fill(KEY, 0, &[7; P as usize]); // bytes into a phantom page: not kept
    c.fill_phantom(KEY, P, P); // page 1 drops its bytes
    assert_eq!((c.cached_pages(), c.data_pages()), (2, 0));
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
/// (None once lost or dropped), and whether dirty / under writeback. `twin`
/// gets every call the cache under test gets, with phantom payloads, and
/// must keep exactly the same books.
struct Model {
    server: Vec<u8>,
    written: Vec<Option<u8>>,
    dirty: Vec<bool>,
    writeback: Vec<bool>,
    inflight: Vec<Run>,
    twin: PageCache,
}

/// A writeback run in flight: its offset and the bytes it carries.
struct Run {
    offset: u64,
    data: Vec<u8>,
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
            assert_eq!(m.twin.write_phantom(KEY, offset, len), new as u64);
            for (i, b) in all(offset, len).zip(bytes(len, seed)) {
                (m.written[i], m.dirty[i]) = (Some(b), true);
            }
        }
        Op::Read(offset, len) => read(c, m, offset, len),
        Op::Fill(index) => {
            c.fill(KEY, index * P, &m.server[all(index * P, P)]);
            m.twin.fill_phantom(KEY, index * P, P);
        }
        Op::Writeback(o, l, pages) => writeback(c, m, Extent::from_offset_len(o, l), pages * P),
        Op::Done(pick, failed) if !m.inflight.is_empty() => {
            let run = m.inflight.swap_remove(pick % m.inflight.len());
            done(c, m, run, failed);
        }
        Op::Done(..) => {}
        Op::Discard(offset, len) => {
            let (range, busy) = (Extent::from_offset_len(offset, len), m.busy_pages());
            let pages = (range.start / P..=range.end / P).filter(|i| !busy.contains(i));
            let dropped: Vec<usize> = pages.flat_map(|i| all(i * P, P)).collect();
            let lost = dropped.iter().filter(|&&i| m.dirty[i]).count() as u64;
            let kept: Vec<Extent> = busy.iter().map(|&i| Extent::from_offset_len(i * P, P)).collect();
            assert_eq!(c.discard(KEY, range, &kept), lost);
            assert_eq!(m.twin.discard(KEY, range, &kept), lost);
            dropped.into_iter().for_each(|i| (m.written[i], m.dirty[i]) = (None, false));
        }
        Op::Truncate(size) => {
            c.truncate(KEY, size);
            m.twin.truncate(KEY, size);
            for i in all(size, OBJ - size) {
                (m.server[i], m.written[i], m.dirty[i], m.writeback[i]) = (0, None, false, false);
            }
            for run in &mut m.inflight {
                run.data.truncate(size.saturating_sub(run.offset) as usize);
            }
        }
    }
}

fn read(c: &mut PageCache, m: &mut Model, offset: u64, len: u64) {
    let range = offset as usize..(offset + len) as usize;
    let want: Vec<u8> = range.clone().map(|i| m.written[i].unwrap_or(m.server[i])).collect();
    let got = read_bytes(c, KEY, offset, len);
    let missing = c.missing_pages(KEY, offset, len, 2 * P);
    assert_eq!(got.is_none(), !missing.is_empty());
    assert!(got.is_some() || !range.clone().all(|i| m.dirty[i] || m.writeback[i]));
    assert_eq!(m.twin.missing_pages(KEY, offset, len, 2 * P), missing);
    assert_eq!(m.twin.read(KEY, offset, len), got.as_ref().map(|_| Payload::Phantom(len)));
    if let Some(got) = got {
        return assert_eq!(got, want);
    }
    for ext in missing {
        let aligned = page_aligned(ext.start) && page_aligned(ext.len());
        assert!(aligned && ext.len() <= 2 * P, "{ext}");
        let server = &m.server[ext.start as usize..=ext.end as usize];
        c.fill(KEY, ext.start, server);
        m.twin.fill_phantom(KEY, ext.start, ext.len());
    }
    assert_eq!(read_bytes(c, KEY, offset, len), Some(want), "after fetching");
    assert_eq!(m.twin.read(KEY, offset, len), Some(Payload::Phantom(len)), "after fetching");
}

fn writeback(c: &mut PageCache, m: &mut Model, range: Extent, bytes_max: u64) {
    let busy = m.busy_pages();
    let ok = |i: u64| range.contains_offset(i) && i < OBJ && m.dirty[i as usize] && !busy.contains(&(i / P));
    let lowest = (range.start..=range.end.min(OBJ - 1)).find(|&i| ok(i));
    let twin = m.twin.next_writeback(KEY, range, bytes_max);
    let Some(run) = c.next_writeback(KEY, range, bytes_max) else {
        assert_eq!(twin, None);
        return assert_eq!(lowest, None);
    };
    let data = run.data.into_bytes().expect("a run of bytes");
    let (offset, end) = (run.offset, run.offset + data.len() as u64);
    let phantom = WritebackRun { key: KEY, offset, data: Payload::Phantom(end - offset) };
    assert_eq!(twin, Some(phantom), "the phantom twin cut another run");
    assert_eq!(Some(offset), lowest, "not the lowest eligible run");
    assert!(offset < end && end - offset <= bytes_max && range.contains_offset(end - 1));
    for (i, &b) in (offset..end).zip(&data) {
        assert!(ok(i) && Some(b) == m.written[i as usize], "byte {i}");
    }
    if ok(end) {
        let cut = page_aligned(end) && end - offset + P > bytes_max;
        assert!(cut, "run stopped early");
    }
    for i in offset as usize..end as usize {
        (m.dirty[i], m.writeback[i]) = (false, true);
    }
    m.inflight.push(Run { offset, data });
}

fn done(c: &mut PageCache, m: &mut Model, run: Run, failed: bool) {
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
    let (got, twin) = match failed {
        false => (c.writeback_done(KEY, offset, len), m.twin.writeback_done(KEY, offset, len)),
        true => (c.writeback_failed(KEY, offset, len), m.twin.writeback_failed(KEY, offset, len)),
    };
    assert_eq!((got, twin), (removed, removed));
}

/// The books a phantom cache must keep exactly as a cache of bytes does.
fn books(c: &PageCache) -> impl PartialEq + fmt::Debug {
    let dirty = (c.dirty_bytes(), c.dirty_bytes_ost(KEY.ost), c.dirty_ranges(KEY), c.keys_with_dirty());
    let pages = (c.cached_pages(), c.object_cached_end(KEY), c.has_dirty(KEY, ALL), c.has_writeback(KEY, ALL));
    (dirty, pages)
}

proptest! {
    #[test]
    fn cache_agrees_with_byte_model(ops in prop::collection::vec(op(), 1..64)) {
        let n = OBJ as usize;
        let server = (0..n).map(|i| (i * 7 % 253) as u8).collect();
        let (written, dirty, writeback) = (vec![None; n], vec![false; n], vec![false; n]);
        let mut m = Model { server, written, dirty, writeback, inflight: vec![], twin: PageCache::new() };
        let mut c = PageCache::new();
        for op in ops {
            step(&mut c, &mut m, op);
            c.check_invariants();
            m.twin.check_invariants();
            assert_eq!((c.dirty_bytes(), c.dirty_bytes_ost(KEY.ost)), (m.pending(), m.pending()));
            assert_eq!(c.has_dirty(KEY, ALL), m.dirty.contains(&true));
            assert_eq!(c.has_writeback(KEY, ALL), m.writeback.contains(&true));
            assert_eq!(books(&m.twin), books(&c));
            assert_eq!((c.data_pages(), m.twin.data_pages()), (c.cached_pages(), 0));
        }
    }
}

#[test]
fn gaps_are_the_absent_pages_in_order() {
    let mut c = PageCache::new();
    assert_eq!(c.gaps(KEY, 3, 9).as_slice(), [(3, 9)]);
    c.write_phantom(KEY, 2 * P, 2 * P); // pages 2 and 3
    c.write_phantom(KEY, 6 * P + 10, 10); // page 6
    assert_eq!(c.gaps(KEY, 0, 9).as_slice(), [(0, 1), (4, 5), (7, 9)]);
    assert_eq!(c.gaps(KEY, 3, 6).as_slice(), [(4, 5)]);
    assert_eq!(c.gaps(KEY, 4, 5).as_slice(), [(4, 5)]);
    assert_eq!(c.gaps(KEY, 6, 8).as_slice(), [(7, 8)]);
    assert!(c.gaps(KEY, 2, 3).is_empty());
    assert!(c.gaps(KEY, 6, 6).is_empty());
}

#[test]
fn writes_to_fresh_pages_merge_with_their_neighbours() {
    let mut c = PageCache::new();
    assert_eq!(c.write_phantom(KEY, 4 * P, 4 * P), 4 * P);
    assert_eq!(c.write_phantom(KEY, 0, 4 * P), 4 * P);
    assert_eq!(c.write_phantom(KEY, 8 * P, 4 * P), 4 * P);
    assert_eq!((c.objects[&KEY].len(), c.dirty_runs[&KEY].len()), (1, 1), "one run of 12 pages");
    assert_eq!(next(&mut c, KEY, ALL, 64 * P), Some((0, 12 * P)));
    // Fresh byte pages: one run up to the cap, then more runs.
    let other = key(2);
    let pages = BYTE_RUN_PAGES_MAX + 1;
    assert_eq!(c.write(other, 0, &bytes(pages * P, 1)), pages * P);
    assert_eq!(c.objects[&other].len(), 2);
    assert_eq!(c.write(other, pages * P, &bytes(P, 2)), P);
    assert_eq!(c.objects[&other].len(), 2, "merged into the short run");
    assert_eq!(c.data_pages(), (pages + 1) as usize);
    c.check_invariants();
}

#[test]
fn updates_of_exactly_one_run_and_of_part_of_one() {
    let mut c = PageCache::new();
    c.write_phantom(KEY, 0, 8 * P);
    // Part of the run: it is split, the rest stays dirty.
    assert_eq!(next(&mut c, KEY, ALL, 4 * P), Some((0, 4 * P)));
    assert_eq!(c.objects[&KEY].len(), 2);
    assert!(c.has_dirty(KEY, Extent::new(4 * P, 8 * P - 1)) && !c.has_dirty(KEY, Extent::new(0, 4 * P - 1)));
    // Exactly the first run, then exactly the second: no split, and the
    // clean runs merge back into one.
    assert_eq!(c.writeback_done(KEY, 0, 4 * P), 4 * P);
    assert_eq!(next(&mut c, KEY, ALL, 4 * P), Some((4 * P, 4 * P)));
    assert_eq!(c.writeback_done(KEY, 4 * P, 4 * P), 4 * P);
    assert_eq!((c.objects[&KEY].len(), c.dirty_bytes(), c.cached_pages()), (1, 0, 8));
    assert!(c.dirty_runs.is_empty() && c.writeback_runs.is_empty());
    c.check_invariants();
}

#[test]
fn a_byte_dirty_and_under_writeback_counts_once() {
    let mut page = Page::new();
    page.dirty.insert(0, 100);
    assert_eq!(page.cached_dirty(), 100);
    page.writeback.insert(50, 300);
    assert_eq!(page.cached_dirty(), 300);
    page.dirty.remove(0, 100);
    assert_eq!(page.cached_dirty(), 250);
    page.dirty.insert(1000, 1010);
    assert_eq!(page.cached_dirty(), 260);
}

#[test]
fn whole_object_queries_agree_with_walking_the_runs() {
    let mut c = PageCache::new();
    // All but the last byte: the same answers, found by walking the runs.
    let almost = Extent::new(0, ALL.end - 1);
    let agree = |c: &PageCache| {
        assert_eq!(c.has_dirty(KEY, ALL), c.has_dirty(KEY, almost));
        assert_eq!(c.has_writeback(KEY, ALL), c.has_writeback(KEY, almost));
        (c.has_dirty(KEY, ALL), c.has_writeback(KEY, ALL))
    };
    assert_eq!(agree(&c), (false, false));
    c.write(KEY, 5 * P + 7, &bytes(10, 1));
    assert_eq!(agree(&c), (true, false));
    assert_eq!(next(&mut c, KEY, ALL, P), Some((5 * P + 7, 10)));
    assert_eq!(agree(&c), (false, true));
    c.write(KEY, 9 * P, &bytes(P, 2));
    assert_eq!(agree(&c), (true, true));
    c.writeback_done(KEY, 5 * P + 7, 10);
    assert_eq!(agree(&c), (true, false));
    c.check_invariants();
}
