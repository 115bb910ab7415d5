//! Page frames: the memory a client's cached bytes live in.
//!
//! What it is: [`PageBuf`], one 4 KiB frame shared by reference count and
//! copied on write; [`PageSpan`], contiguous bytes laid over a run of frames
//! (what a write hands the client and what a write RPC carries); and
//! [`PagePool`], where new frames come from: the heap, or an [`Arena`] of
//! frames in memory that the driver chose (the network client uses shared
//! memory that a local OSS maps, so that a write RPC names its pages instead
//! of copying them through a socket, as LNet moves bulk data by RDMA from
//! the client's pages).
//!
//! Why frames and not byte vectors: a 1 MiB write becomes cached pages, then
//! a write RPC, then the OST's object without any of those steps copying it.
//! The caller's bytes are copied once, into frames; the page cache adopts
//! whole frames; a write RPC holds clones of them (which pins them, as a
//! page under writeback is pinned in Lustre, until the reply); a later write
//! to a pinned page copies that page first ([`PageBuf::make_mut`]).
//!
//! [`RemoteSpan`] is the other side: bytes in memory this process maps but
//! does not own (an OSS's view of a local client's frames). Their owner may
//! change them at any time, so they are never borrowed as Rust slices, only
//! read through raw pointers (copied, or handed to `pwritev`).
//!
//! Invariants: a frame is [`PAGE_BYTES`] bytes of memory valid for as long
//! as a [`PageBuf`] refers to it; it is written only through a unique
//! [`PageBuf`] (so never while a write RPC holds it); an arena frame goes
//! back to its arena's free list when its last [`PageBuf`] is dropped,
//! unless the arena is retired (then it is never handed out again).

use crate::units::PAGE_SIZE;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes per frame.
pub const PAGE_BYTES: usize = PAGE_SIZE as usize;

/// One 4 KiB frame of bytes, reference counted, copied on write.
#[derive(Clone)]
pub struct PageBuf(Arc<Frame>);

struct Frame {
    ptr: NonNull<u8>,
    home: Home,
}

enum Home {
    /// A `Box<[u8; PAGE_BYTES]>` turned into `ptr`, freed on drop.
    Heap,
    /// Frame `index` of `arena`, given back on drop.
    Arena { arena: Arc<Arena>, index: u32 },
}

// SAFETY: a frame's memory is owned by the frame (heap) or reserved for it
// in its arena until the frame is dropped; it is read through shared
// `PageBuf`s and written only through a unique one (`make_mut`), which is
// the same discipline as `Arc<[u8; N]>`.
unsafe impl Send for Frame {}
unsafe impl Sync for Frame {}

impl Drop for Frame {
    fn drop(&mut self) {
        match &self.home {
            // SAFETY: `ptr` came from `Box::into_raw` of a `Box<[u8; PAGE_BYTES]>`
            // in `PageBuf::heap` and is freed only here, once.
            Home::Heap => drop(unsafe { Box::from_raw(self.ptr.as_ptr() as *mut [u8; PAGE_BYTES]) }),
            Home::Arena { arena, index } => arena.give_back(*index),
        }
    }
}

impl PageBuf {
    /// A zeroed frame on the heap.
    pub fn heap() -> PageBuf {
        let frame: Box<[u8; PAGE_BYTES]> = Box::new([0; PAGE_BYTES]);
        let ptr = NonNull::new(Box::into_raw(frame) as *mut u8).expect("Box is non-null");
        PageBuf(Arc::new(Frame { ptr, home: Home::Heap }))
    }

    pub fn bytes(&self) -> &[u8; PAGE_BYTES] {
        // SAFETY: the frame is valid while `self` lives (module invariant),
        // and nobody writes it while it is shared: writes need a unique
        // `PageBuf` (`make_mut`).
        unsafe { &*(self.0.ptr.as_ptr() as *const [u8; PAGE_BYTES]) }
    }

    /// The frame's bytes for writing: copied into a new frame from `pool`
    /// first if anyone else holds this one (a write RPC in flight, another
    /// page, a caller's span).
    pub fn make_mut(&mut self, pool: &PagePool) -> &mut [u8; PAGE_BYTES] {
        if Arc::get_mut(&mut self.0).is_none() {
            let mut copy = pool.alloc_one();
            copy.unique_mut().copy_from_slice(self.bytes());
            *self = copy;
        }
        self.unique_mut()
    }

    /// Whether no other `PageBuf` refers to this frame.
    #[cfg(test)]
    fn is_unique(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }

    fn unique_mut(&mut self) -> &mut [u8; PAGE_BYTES] {
        let frame = Arc::get_mut(&mut self.0).expect("a frame is written only through its only PageBuf");
        // SAFETY: unique access to a valid frame (module invariant).
        unsafe { &mut *(frame.ptr.as_ptr() as *mut [u8; PAGE_BYTES]) }
    }

    /// Whether both refer to the same frame.
    pub fn same_frame(&self, other: &PageBuf) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// `(arena id, frame index)` for a frame of an arena, `None` on the heap.
    pub fn arena_frame(&self) -> Option<(u64, u32)> {
        match &self.0.home {
            Home::Heap => None,
            Home::Arena { arena, index } => Some((arena.id, *index)),
        }
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.0.ptr.as_ptr()
    }
}

impl fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arena_frame() {
            Some((arena, index)) => write!(f, "PageBuf(arena {arena} frame {index})"),
            None => f.write_str("PageBuf(heap)"),
        }
    }
}

/// Memory an [`Arena`] hands out; dropped (unmapped) with the arena's last frame.
pub trait ArenaMemory: Send + Sync {
    /// Start of the memory: `frames * PAGE_BYTES` bytes, page aligned.
    fn base(&self) -> *mut u8;
    fn frames(&self) -> u32;
}

/// A fixed set of frames in memory the driver provides (shared memory a
/// local OSS maps, in the network client). Frames are handed out lowest
/// free first: the frames in use stay packed at the start of the memory
/// (only as much of it is ever touched as the client uses at once), and a
/// batch freed together (the pages of one write RPC) is handed out again as
/// contiguous frames, which a server writes with one piece of `pwritev`
/// instead of one per page.
pub struct Arena {
    id: u64,
    base: NonNull<u8>,
    frames: u32,
    state: Mutex<ArenaState>,
    _memory: Box<dyn ArenaMemory>,
}

struct ArenaState {
    /// A bit per frame, set when the frame is free.
    free: Vec<u64>,
    /// No free frame lies below this one.
    lowest_free: u32,
    in_use: u32,
    /// No frame is handed out any more, and none freed is reused.
    retired: bool,
}

// SAFETY: the memory is owned by `_memory` for the arena's life; which
// frame belongs to whom is guarded by `state`; frames are accessed only
// through `PageBuf` (see `Frame`).
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

static ARENA_NEXT: AtomicU64 = AtomicU64::new(1);

impl Arena {
    /// An arena over `memory`, with an id unique in this process (mixed
    /// with the process id, so that two processes' arenas differ too).
    pub fn new(memory: Box<dyn ArenaMemory>) -> Arc<Arena> {
        let base = NonNull::new(memory.base()).expect("arena memory at address 0");
        assert_eq!(base.as_ptr() as usize % PAGE_BYTES, 0, "arena memory must be page aligned");
        let id = (u64::from(std::process::id()) << 32) | ARENA_NEXT.fetch_add(1, Ordering::Relaxed);
        let frames = memory.frames();
        let mut free = vec![u64::MAX; (frames as usize).div_ceil(64)];
        if !frames.is_multiple_of(64) {
            *free.last_mut().expect("a word") = (1u64 << (frames % 64)) - 1;
        }
        let state = ArenaState { free, lowest_free: 0, in_use: 0, retired: false };
        Arc::new(Arena { id, base, frames, state: Mutex::new(state), _memory: memory })
    }

    /// An arena of `frames` frames on the heap (for tests of arena code).
    pub fn on_heap(frames: u32) -> Arc<Arena> {
        Arena::new(Box::new(HeapMemory::new(frames)))
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    pub fn base(&self) -> *const u8 {
        self.base.as_ptr()
    }

    pub fn frames_in_use(&self) -> u32 {
        self.state.lock().expect("arena lock").in_use
    }

    pub fn is_retired(&self) -> bool {
        self.state.lock().expect("arena lock").retired
    }

    /// Stop handing out frames and never reuse a freed one: after a lost
    /// connection, a server may still read frames of writes this client
    /// has given up on, so they must keep their bytes.
    pub fn retire(&self) {
        let mut s = self.state.lock().expect("arena lock");
        s.retired = true;
        s.free.fill(0);
    }

    /// Up to `n` frames (fewer if the arena runs out), appended to `out`.
    fn alloc(self: &Arc<Self>, n: usize, out: &mut Vec<PageBuf>) {
        let mut s = self.state.lock().expect("arena lock");
        if s.retired {
            return;
        }
        let mut word = (s.lowest_free / 64) as usize;
        for _ in 0..n {
            while word < s.free.len() && s.free[word] == 0 {
                word += 1;
            }
            let Some(bits) = s.free.get_mut(word) else {
                s.lowest_free = self.frames;
                return;
            };
            let bit = bits.trailing_zeros();
            *bits &= !(1 << bit);
            let index = word as u32 * 64 + bit;
            s.lowest_free = index + 1;
            s.in_use += 1;
            // SAFETY: `index < frames`, so the frame lies inside the memory.
            let ptr = unsafe { NonNull::new_unchecked(self.base.as_ptr().add(index as usize * PAGE_BYTES)) };
            out.push(PageBuf(Arc::new(Frame { ptr, home: Home::Arena { arena: self.clone(), index } })));
        }
    }

    fn give_back(&self, index: u32) {
        let mut s = self.state.lock().expect("arena lock");
        s.in_use -= 1;
        if !s.retired {
            s.free[(index / 64) as usize] |= 1 << (index % 64);
            s.lowest_free = s.lowest_free.min(index);
        }
    }
}

impl fmt::Debug for Arena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Arena {{ id: {}, frames: {}, in use: {} }}", self.id, self.frames, self.frames_in_use())
    }
}

/// Page-aligned heap memory for [`Arena::on_heap`].
struct HeapMemory {
    ptr: NonNull<u8>,
    frames: u32,
}

impl HeapMemory {
    fn layout(frames: u32) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(frames.max(1) as usize * PAGE_BYTES, PAGE_BYTES).expect("arena layout")
    }

    fn new(frames: u32) -> Self {
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(Self::layout(frames)) };
        HeapMemory { ptr: NonNull::new(ptr).expect("arena allocation failed"), frames }
    }
}

// SAFETY: plain owned memory.
unsafe impl Send for HeapMemory {}
unsafe impl Sync for HeapMemory {}

impl ArenaMemory for HeapMemory {
    fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn frames(&self) -> u32 {
        self.frames
    }
}

impl Drop for HeapMemory {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.frames)) }
    }
}

/// Where new frames come from: the current arena while it has frames, the
/// heap otherwise. Clones share the arena, so the threads that fill frames
/// with a caller's bytes and the client that caches them draw on one pool,
/// and [`PagePool::replace_arena`] is seen by all of them.
#[derive(Clone, Default)]
pub struct PagePool {
    arena: Arc<Mutex<Option<Arc<Arena>>>>,
}

impl PagePool {
    /// Frames from the heap only.
    pub fn heap() -> PagePool {
        PagePool::default()
    }

    pub fn with_arena(arena: Arc<Arena>) -> PagePool {
        PagePool { arena: Arc::new(Mutex::new(Some(arena))) }
    }

    pub fn arena(&self) -> Option<Arc<Arena>> {
        self.arena.lock().expect("pool lock").clone()
    }

    /// Retire the current arena (see [`Arena::retire`]) and draw on `next`
    /// (or the heap) from now on.
    pub fn replace_arena(&self, next: Option<Arc<Arena>>) {
        let mut current = self.arena.lock().expect("pool lock");
        if let Some(old) = current.take() {
            old.retire();
        }
        *current = next;
    }

    /// `n` frames, as many as it has from the arena, the rest on the heap.
    /// Arena frames hold stale bytes; heap frames are zeroed.
    pub fn alloc(&self, n: usize) -> Vec<PageBuf> {
        let mut out = Vec::with_capacity(n);
        if let Some(arena) = self.arena() {
            arena.alloc(n, &mut out);
        }
        while out.len() < n {
            out.push(PageBuf::heap());
        }
        out
    }

    pub fn alloc_one(&self) -> PageBuf {
        self.alloc(1).pop().expect("one frame")
    }
}

impl fmt::Debug for PagePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arena() {
            Some(arena) => write!(f, "PagePool({arena:?})"),
            None => f.write_str("PagePool(heap)"),
        }
    }
}

/// `len` contiguous bytes laid over frames: they start at byte `head` of
/// the first frame and run on through the following ones. The bytes of the
/// first frame before `head` and of the last one past the end belong to no
/// one and are never read.
///
/// The frame list is shared: cloning a span, or cutting a sub-span out of
/// it, copies no frame handle (a write RPC and the record that pins its
/// frames until the reply hold one list between them).
#[derive(Clone)]
pub struct PageSpan {
    list: Arc<[PageBuf]>,
    /// This span's frames are `list[first..first + count]`.
    first: usize,
    count: usize,
    head: u16,
    len: u64,
}

impl PageSpan {
    /// Frames needed for `len` bytes starting at byte `head` of the first.
    pub fn frames_for(head: u16, len: u64) -> usize {
        (u64::from(head) + len).div_ceil(PAGE_SIZE) as usize
    }

    pub fn new(frames: Vec<PageBuf>, head: u16, len: u64) -> PageSpan {
        assert!(usize::from(head) < PAGE_BYTES, "span head {head} outside a page");
        assert_eq!(frames.len(), Self::frames_for(head, len), "frames for {len} bytes at {head}");
        let count = frames.len();
        PageSpan { list: frames.into(), first: 0, count, head, len }
    }

    /// `bytes` copied into frames from `pool`, starting at byte `head` of
    /// the first: the one copy of a write's bytes on their way to an OST.
    pub fn copy_from(pool: &PagePool, head: u16, bytes: &[u8]) -> PageSpan {
        let mut frames = pool.alloc(Self::frames_for(head, bytes.len() as u64));
        let mut at = 0;
        for (i, frame) in frames.iter_mut().enumerate() {
            let start = if i == 0 { usize::from(head) } else { 0 };
            let n = (PAGE_BYTES - start).min(bytes.len() - at);
            frame.make_mut(pool)[start..start + n].copy_from_slice(&bytes[at..at + n]);
            at += n;
        }
        PageSpan::new(frames, head, bytes.len() as u64)
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn head(&self) -> u16 {
        self.head
    }

    pub fn frames(&self) -> &[PageBuf] {
        &self.list[self.first..self.first + self.count]
    }

    /// The bytes, frame by frame.
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut left = self.len as usize;
        self.frames().iter().enumerate().map(move |(i, frame)| {
            let start = if i == 0 { usize::from(self.head) } else { 0 };
            let n = (PAGE_BYTES - start).min(left);
            left -= n;
            &frame.bytes()[start..start + n]
        })
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len as usize);
        self.slices().for_each(|s| out.extend_from_slice(s));
        out
    }

    /// Bytes `[offset, offset + len)` of this span, sharing its frames.
    pub fn sub(&self, offset: u64, len: u64) -> PageSpan {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len), "sub-span out of range");
        let start = u64::from(self.head) + offset;
        let head = (start % PAGE_SIZE) as u16;
        let first = self.first + (start / PAGE_SIZE) as usize;
        PageSpan { list: self.list.clone(), first, count: Self::frames_for(head, len), head, len }
    }

    /// Whether the bytes equal `other`.
    pub fn content_eq(&self, other: &[u8]) -> bool {
        if other.len() as u64 != self.len {
            return false;
        }
        let mut at = 0;
        self.slices().all(|s| {
            at += s.len();
            s == &other[at - s.len()..at]
        })
    }
}

impl fmt::Debug for PageSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PageSpan {{ len: {}, head: {}, frames: {} }}", self.len, self.head, self.count)
    }
}

/// Bytes in memory this process maps but does not own: raw pieces,
/// `(address, length)`, kept valid by `keep` (the mapping). The owner may
/// rewrite them at any time, so they are only ever read through raw
/// pointers: copied out ([`RemoteSpan::to_vec`]) or given to the kernel.
#[derive(Clone)]
pub struct RemoteSpan {
    pieces: Vec<(usize, usize)>,
    len: u64,
    /// Keeps the memory mapped (held for its drop only).
    _keep: Arc<dyn Send + Sync>,
}

impl RemoteSpan {
    /// # Safety
    /// Every piece must lie inside memory that stays mapped and readable
    /// for as long as `keep` lives.
    pub unsafe fn new(pieces: Vec<(*const u8, usize)>, keep: Arc<dyn Send + Sync>) -> RemoteSpan {
        let len = pieces.iter().map(|&(_, n)| n as u64).sum();
        let pieces = pieces.into_iter().map(|(p, n)| (p as usize, n)).collect();
        RemoteSpan { pieces, len, _keep: keep }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `(pointer, length)` of each piece, valid while `self` lives.
    pub fn pieces(&self) -> impl Iterator<Item = (*const u8, usize)> + '_ {
        self.pieces.iter().map(|&(p, n)| (p as *const u8, n))
    }

    /// A copy of the bytes as they are now.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out: Vec<u8> = Vec::with_capacity(self.len as usize);
        for (p, n) in self.pieces() {
            let at = out.len();
            // SAFETY: the piece is mapped while `self._keep` lives (`new`'s
            // contract) and `out` has room for it; copying through a raw
            // pointer never asserts that the bytes stay unchanged.
            unsafe {
                std::ptr::copy_nonoverlapping(p, out.as_mut_ptr().add(at), n);
                out.set_len(at + n);
            }
        }
        out
    }
}

impl fmt::Debug for RemoteSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemoteSpan {{ len: {}, pieces: {} }}", self.len, self.pieces.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_copy_in_and_read_back_across_frames() {
        let pool = PagePool::heap();
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let span = PageSpan::copy_from(&pool, 4000, &bytes);
        assert_eq!(span.frames().len(), 4); // 96 + 4096 + 4096 + 1712
        assert_eq!(span.to_vec(), bytes);
        assert!(span.content_eq(&bytes));
        assert!(!span.content_eq(&bytes[1..]));
        let sub = span.sub(100, 5000);
        assert_eq!((sub.head(), sub.frames().len()), (4, 2));
        assert_eq!(sub.to_vec(), &bytes[100..5100]);
        assert!(sub.frames()[0].same_frame(&span.frames()[1]), "a sub-span shares frames");
        assert_eq!(span.sub(0, 0).frames().len(), 1, "an empty span at a head still names its frame");
    }

    #[test]
    fn writes_to_a_shared_frame_copy_it_first() {
        let pool = PagePool::heap();
        let mut a = PageBuf::heap();
        a.make_mut(&pool)[0] = 1;
        let pinned = a.clone(); // a write RPC in flight
        a.make_mut(&pool)[0] = 2;
        assert_eq!((pinned.bytes()[0], a.bytes()[0]), (1, 2));
        assert!(!a.same_frame(&pinned) && a.is_unique() && pinned.is_unique());
        let before = a.as_ptr();
        a.make_mut(&pool)[1] = 3;
        assert_eq!(a.as_ptr(), before, "a unique frame is written in place");
    }

    #[test]
    fn arenas_hand_out_their_frames_then_fall_back_to_the_heap() {
        let arena = Arena::on_heap(3);
        let pool = PagePool::with_arena(arena.clone());
        let frames = pool.alloc(5);
        let in_arena: Vec<_> = frames.iter().map(PageBuf::arena_frame).collect();
        let id = arena.id();
        assert_eq!(in_arena, vec![Some((id, 0)), Some((id, 1)), Some((id, 2)), None, None]);
        assert_eq!(frames[1].as_ptr() as usize - arena.base() as usize, PAGE_BYTES);
        assert_eq!(arena.frames_in_use(), 3);
        drop(frames);
        assert_eq!(arena.frames_in_use(), 0);
        // The lowest free frame comes back first, so frames freed together
        // come back contiguous.
        let again = pool.alloc(3);
        assert_eq!(again.iter().map(PageBuf::arena_frame).collect::<Vec<_>>(), in_arena[..3].to_vec());
        drop(again);
        let (a, b) = (pool.alloc_one(), pool.alloc_one());
        drop(a);
        assert_eq!(pool.alloc_one().arena_frame(), Some((id, 0)));
        drop(b);
        let big = Arena::on_heap(200);
        let p = PagePool::with_arena(big.clone());
        let held: Vec<_> = (0..200).map(|_| p.alloc_one()).collect();
        let (odd, even): (Vec<_>, Vec<_>) = held.into_iter().enumerate().partition(|(i, _)| i % 2 == 1);
        drop(odd);
        let refill = p.alloc(100);
        assert!(refill.iter().all(|f| f.arena_frame().is_some_and(|(_, i)| i % 2 == 1)), "holes are refilled");
        assert!(p.alloc_one().arena_frame().is_none(), "then the heap");
        drop((even, refill));
        assert_eq!(big.frames_in_use(), 0);
    }

    #[test]
    fn a_retired_arena_never_reuses_a_frame() {
        let arena = Arena::on_heap(4);
        let pool = PagePool::with_arena(arena.clone());
        let held = pool.alloc(2);
        pool.replace_arena(Some(Arena::on_heap(4)));
        assert!(arena.is_retired());
        drop(held);
        assert_eq!(arena.frames_in_use(), 0);
        let next = pool.alloc(4);
        assert!(next.iter().all(|f| f.arena_frame().is_some_and(|(a, _)| a != arena.id())));
        let mut out = Vec::new();
        arena.alloc(1, &mut out);
        assert!(out.is_empty(), "a retired arena hands out nothing");
    }

    #[test]
    fn the_arena_outlives_its_pool_while_frames_remain() {
        let pool = PagePool::with_arena(Arena::on_heap(2));
        let mut frame = pool.alloc_one();
        drop(pool);
        frame.make_mut(&PagePool::heap())[7] = 9;
        assert_eq!(frame.bytes()[7], 9);
    }

    #[test]
    fn remote_spans_copy_out_their_pieces() {
        let memory: Arc<Vec<u8>> = Arc::new((0..64u8).collect());
        let base = memory.as_ptr();
        // SAFETY: both pieces lie inside `memory`, which `keep` holds.
        let span = unsafe { RemoteSpan::new(vec![(base.add(8), 4), (base.add(60), 4)], memory.clone()) };
        assert_eq!(span.len(), 8);
        assert_eq!(span.to_vec(), vec![8, 9, 10, 11, 60, 61, 62, 63]);
    }
}
