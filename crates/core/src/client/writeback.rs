//! The client's writeback: the page cache, which of its objects hold bytes
//! to write, and which hold writes the OSTs acknowledged but no fsync has
//! made durable yet.
//!
//! What it owns: the [`PageCache`] (pages, their dirty and in-flight
//! bytes); the dirty objects, each with the bytes written to it since it
//! was last found clean and where its next whole-object writeback looks
//! first; the uncommitted objects, what an fsync asks their OSTs to sync
//! (`OST_SYNC`); and the scratch list the writeback pump fills each time
//! (kept, so that the pump allocates nothing per call).
//!
//! Every write into the cache goes through [`Writeback::write`], which marks
//! its object dirty; an object stops being dirty only when the writeback
//! pump finds nothing of it to send and no write of it in flight
//! ([`Writeback::forget_if_clean`]), or when its OST is lost
//! ([`Writeback::discard_ost`]). So the pump looks at the dirty objects and
//! never scans the cache.
//!
//! Invariants ([`Writeback::check_invariants`]):
//! * the page cache's own (runs, indexes, byte counts);
//! * every object with a dirty byte in the page cache is one writeback
//!   knows is dirty: no dirty page is forgotten, so none stays unwritten.
//!
//! Which bytes may be dirtied (under which locks) and when a flush is
//! urgent are the client's to decide (`flush.rs`); this part keeps the
//! books those decisions read.

use super::pagecache::{PageCache, WritebackRun};
use crate::extent::{Extent, EOF};
use crate::pages::{PagePool, PageSpan};
use crate::units::{ObjectKey, OstIndex};
use rustc_hash::FxHashSet;
use std::collections::BTreeMap;

/// An object with bytes written since it was last found clean.
#[derive(Clone, Copy, Debug, Default)]
struct DirtyObject {
    written_bytes: u64,
    /// Where the next whole-object writeback looks first.
    cursor: u64,
}

/// What a write step puts into the page cache.
pub(super) enum Written<'a> {
    Bytes(&'a [u8]),
    /// Frames laid out at the write's offset (see [`PageCache::write_span`]).
    Span(&'a PageSpan),
    Phantom(u64),
}

#[derive(Debug)]
pub(super) struct Writeback {
    cache: PageCache,
    /// Bytes written per object since it was last found fully written back:
    /// what the writeback pump looks at, so that it never scans the cache.
    dirty: BTreeMap<ObjectKey, DirtyObject>,
    /// Objects with writes the OSTs acknowledged that no fsync has made
    /// durable yet: what an fsync asks their OSTs to sync (`OST_SYNC`).
    uncommitted: FxHashSet<ObjectKey>,
    /// What the writeback pump must write, kept between calls (no
    /// allocation per call).
    scratch: Vec<(ObjectKey, Extent)>,
}

impl Writeback {
    pub(super) fn new(cache: PageCache) -> Self {
        Writeback { cache, dirty: BTreeMap::new(), uncommitted: FxHashSet::default(), scratch: Vec::new() }
    }

    /// Frames from `pool` from now on: only before anything is cached.
    pub(super) fn set_pool(&mut self, pool: PagePool) {
        assert_eq!(self.cache.cached_pages(), 0, "page pool changed under cached pages");
        self.cache = PageCache::with_pool(pool);
    }

    pub(super) fn cache(&self) -> &PageCache {
        &self.cache
    }

    /// A write step's bytes, at `offset` of `key`: dirty in the cache, and
    /// the object dirty here.
    pub(super) fn write(&mut self, key: ObjectKey, offset: u64, written: Written<'_>) {
        let len = match written {
            Written::Bytes(bytes) => {
                self.cache.write(key, offset, bytes);
                bytes.len() as u64
            }
            Written::Span(span) => {
                self.cache.write_span(key, offset, span);
                span.len()
            }
            Written::Phantom(len) => {
                self.cache.write_phantom(key, offset, len);
                len
            }
        };
        if crate::planted::active(crate::planted::Bug::ForgetDirty) && !self.dirty.contains_key(&key) {
            return;
        }
        self.dirty.entry(key).or_default().written_bytes += len;
        debug_assert!(self.cache.object_has_dirty(key) || len == 0, "a write left {key:?} clean");
    }

    /// Bytes read from `key`'s OST at `offset`, cached clean.
    pub(super) fn fill(&mut self, key: ObjectKey, offset: u64, data: &[u8]) {
        self.cache.fill(key, offset, data);
    }

    /// A phantom read reply of `len` bytes at `offset` of `key`, cached clean.
    pub(super) fn fill_phantom(&mut self, key: ObjectKey, offset: u64, len: u64) {
        self.cache.fill_phantom(key, offset, len);
    }

    /// Drops the clean pages of `range` of `key` (see [`PageCache::drop_clean`]).
    pub(super) fn drop_clean(&mut self, key: ObjectKey, range: Extent) -> usize {
        self.cache.drop_clean(key, range)
    }

    /// Drops the pages of `range` of `key` no extent of `kept` covers (a
    /// lock given back); nothing there is dirty or in flight then.
    pub(super) fn discard(&mut self, key: ObjectKey, range: Extent, kept: &[Extent]) -> u64 {
        debug_assert!(!self.cache.has_dirty(key, range), "discarding dirty pages of {key:?}");
        self.cache.discard(key, range, kept)
    }

    /// `key` truncated to `size` bytes (see [`PageCache::truncate`]).
    pub(super) fn truncate(&mut self, key: ObjectKey, size: u64) {
        self.cache.truncate(key, size);
    }

    /// Every page of `ost` goes, dirty ones with their objects (its OST is
    /// lost): the dirty bytes dropped.
    pub(super) fn discard_ost(&mut self, ost: OstIndex) -> u64 {
        self.dirty.retain(|k, _| k.ost != ost);
        let lost = self.cache.discard_ost(ost);
        debug_assert!(self.cache.keys_with_dirty().iter().all(|k| k.ost != ost), "dirty pages of {ost} kept");
        lost
    }

    /// The write RPC of `len` bytes at `offset` of `key` was acknowledged.
    pub(super) fn writeback_done(&mut self, key: ObjectKey, offset: u64, len: u64) -> u64 {
        self.cache.writeback_done(key, offset, len)
    }

    /// The write RPC of `len` bytes at `offset` of `key` failed: the bytes
    /// it carried are lost (returned).
    pub(super) fn writeback_failed(&mut self, key: ObjectKey, offset: u64, len: u64) -> u64 {
        self.cache.writeback_failed(key, offset, len)
    }

    /// The next run to write back in `range`, at most `bytes_max` long.
    /// Whole-object flushes resume where the last run of the object ended
    /// (then wrap around), so that a stream of writes costs the pump one
    /// short look per RPC instead of a walk over every cached page from the
    /// start of the object.
    pub(super) fn next_run(&mut self, key: ObjectKey, range: Extent, bytes_max: u64) -> Option<WritebackRun> {
        // An object with writes in flight and nothing dirty stays listed
        // until its last reply: one lookup says there is no run to cut.
        if !self.cache.object_has_dirty(key) {
            return None;
        }
        if range != Extent::WHOLE {
            return self.cache.next_writeback(key, range, bytes_max);
        }
        let cursor = self.dirty.get(&key).map_or(0, |d| d.cursor);
        let run = self.cache.next_writeback(key, Extent::new(cursor, EOF), bytes_max).or_else(|| {
            (cursor > 0).then(|| self.cache.next_writeback(key, Extent::new(0, cursor - 1), bytes_max)).flatten()
        })?;
        if let Some(d) = self.dirty.get_mut(&key) {
            d.cursor = run.offset + run.data.len();
        }
        Some(run)
    }

    /// [`Writeback::next_run`] found nothing to send for `key`: with no
    /// write of it in flight either (`writing`), every byte of it is
    /// written back.
    pub(super) fn forget_if_clean(&mut self, key: ObjectKey, writing: bool) {
        if !writing {
            debug_assert!(!self.cache.object_has_dirty(key), "forgetting dirty {key:?}");
            self.dirty.remove(&key);
        }
    }

    /// How many objects are dirty.
    pub(super) fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    pub(super) fn is_dirty(&self, key: ObjectKey) -> bool {
        self.dirty.contains_key(&key)
    }

    /// The dirty objects, in key order.
    pub(super) fn dirty_keys(&self) -> impl Iterator<Item = ObjectKey> + '_ {
        self.dirty.keys().copied()
    }

    /// Into `areas`, every dirty object that must be written now: holding a
    /// full RPC (`rpc_bytes_max`), on an OST a writer waits on (`pressed`),
    /// or on an OST over its dirty limit (`dirty_bytes_max`, perhaps just
    /// lowered), in key order.
    pub(super) fn urgent_objects(
        &self,
        areas: &mut Vec<(ObjectKey, Extent)>,
        pressed: &[OstIndex],
        rpc_bytes_max: u64,
        dirty_bytes_max: u64,
    ) {
        for (&key, dirty) in &self.dirty {
            // An OST over its dirty limit (lowered by `set_tunable`) is
            // written back even with no writer waiting on it.
            let over = self.cache.dirty_bytes_ost(key.ost) > dirty_bytes_max;
            if dirty.written_bytes >= rpc_bytes_max || pressed.contains(&key.ost) || over {
                areas.push((key, Extent::WHOLE));
            }
        }
    }

    /// The writeback pump's list, empty, to fill and give back with
    /// [`Writeback::put_scratch`].
    pub(super) fn take_scratch(&mut self) -> Vec<(ObjectKey, Extent)> {
        std::mem::take(&mut self.scratch)
    }

    pub(super) fn put_scratch(&mut self, mut areas: Vec<(ObjectKey, Extent)>) {
        areas.clear();
        self.scratch = areas;
    }

    /// `key`'s OST acknowledged a change of it not yet made durable.
    pub(super) fn note_uncommitted(&mut self, key: ObjectKey) {
        self.uncommitted.insert(key);
    }

    /// The uncommitted objects `of_file` names, taken out, sorted: an
    /// fsync asks their OSTs to sync them.
    pub(super) fn take_uncommitted(&mut self, of_file: impl Fn(ObjectKey) -> bool) -> Vec<ObjectKey> {
        let mut keys: Vec<ObjectKey> = self.uncommitted.iter().copied().filter(|&key| of_file(key)).collect();
        keys.sort_unstable();
        for key in &keys {
            self.uncommitted.remove(key);
        }
        keys
    }

    /// Panics if the page cache is inconsistent or holds a dirty page of an
    /// object writeback does not know is dirty.
    pub fn check_invariants(&self) {
        self.cache.check_invariants();
        for key in self.cache.keys_with_dirty() {
            assert!(self.dirty.contains_key(&key), "writeback: dirty pages of {key:?} not tracked for writeback");
        }
    }
}
