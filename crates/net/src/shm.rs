//! Bulk data through shared memory between a client and an OSS on one host.
//!
//! A client's page frames live in a sealed memfd ([`create_arena`]). When
//! it connects to an OSS over a Unix socket, it passes the memfd's file
//! descriptor (`SCM_RIGHTS`, [`send_frame_with_fd`]) with an `AttachArena`
//! message; the OSS maps it read-only ([`MappedArena::attach`]). From then
//! on a write RPC whose pages are all in that arena travels as a bulk
//! descriptor ([`SharedBulk`]: which frames, where the bytes start, how
//! many) instead of its bytes, and the OST writes the object straight from
//! the client's frames with one `pwritev`. This is the one-host analogue of
//! LNet's RDMA bulk transfer: the server pulls the pages of the client's
//! bulk descriptor, and the client keeps them pinned until the reply (the
//! core's write RPC holds its frames; see `lanefs_core::pages`).
//!
//! Trust: a client can only name frames of memory it handed over itself,
//! and the OSS checks every descriptor against the arena's size before it
//! touches a byte. The memfd must be sealed against shrinking, or a client
//! could truncate it under the OSS's mapping and crash it with `SIGBUS`.
//! The OSS never forms Rust references to the client's memory (the client
//! may rewrite it at any time): it reads it only through raw pointers
//! ([`lanefs_core::pages::RemoteSpan`]).

use crate::unix_stream::QuietUnixStream;
use lanefs_core::pages::{Arena, ArenaMemory, PageSpan, RemoteSpan, PAGE_BYTES};
use lanefs_proto::wire::SharedBulk;
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The largest arena an OSS maps for one client (4 GiB of frames, what a
/// lanefs client makes at most): a client can make the OSS fault in every
/// frame of its arena, as it could by writing that much.
pub const ARENA_FRAMES_MAX: u32 = 1 << 20;
/// File descriptors an OSS connection holds before the message that takes
/// them; any more are closed at once.
pub const FDS_PENDING_MAX: usize = 2;

/// A new arena of `frames` frames in a sealed memfd, and the memfd (to
/// pass to OSSes).
pub fn create_arena(frames: u32) -> io::Result<(Arc<Arena>, File)> {
    let bytes = frames as usize * PAGE_BYTES;
    // SAFETY: a NUL-terminated name and valid flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"lanefs-pages".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(bytes as u64)?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on a descriptor we own.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the memfd is ours, sealed against shrinking, and mapped whole.
    let mut map = unsafe { memmap2::MmapOptions::new().len(bytes).map_mut(&file)? };
    let base = map.as_mut_ptr();
    Ok((Arena::new(Box::new(ShmMemory { _map: map, base, frames })), file))
}

struct ShmMemory {
    _map: memmap2::MmapMut,
    base: *mut u8,
    frames: u32,
}

// SAFETY: the mapping is owned here; `base` points into it.
unsafe impl Send for ShmMemory {}
unsafe impl Sync for ShmMemory {}

impl ArenaMemory for ShmMemory {
    fn base(&self) -> *mut u8 {
        self.base
    }
    fn frames(&self) -> u32 {
        self.frames
    }
}

/// A client's arena as an OSS maps it: read-only, checked.
pub struct MappedArena {
    id: u64,
    frames: u32,
    map: memmap2::Mmap,
}

impl std::fmt::Debug for MappedArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MappedArena {{ id: {:#x}, frames: {} }}", self.id, self.frames)
    }
}

impl MappedArena {
    /// Map the arena `id` of `frames` frames that `fd` holds, after
    /// checking it is sealed against shrinking and large enough.
    pub fn attach(fd: OwnedFd, id: u64, frames: u32) -> Result<Arc<MappedArena>, String> {
        if frames == 0 || frames > ARENA_FRAMES_MAX {
            return Err(format!("an arena of {frames} frames is outside 1..={ARENA_FRAMES_MAX}"));
        }
        // SAFETY: fcntl on a descriptor we own.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
            return Err("the arena is not a memfd sealed against shrinking (F_SEAL_SHRINK)".into());
        }
        let file = File::from(fd);
        let bytes = frames as u64 * PAGE_BYTES as u64;
        let size = file.metadata().map_err(|e| format!("the arena cannot be examined: {e}"))?.len();
        if size < bytes {
            return Err(format!("the arena holds {size} bytes, fewer than its {frames} frames"));
        }
        // SAFETY: the file cannot shrink (sealed, checked above), so every
        // page of the mapping stays backed; it is read only through raw
        // pointers, since its owner may rewrite it at any time.
        let map = unsafe { memmap2::MmapOptions::new().len(bytes as usize).map(&file) }
            .map_err(|e| format!("the arena cannot be mapped: {e}"))?;
        Ok(Arc::new(MappedArena { id, frames, map }))
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The bytes a descriptor names, after checking that it names this
    /// arena, frames inside it, and as many of them as its length needs.
    pub fn resolve(self: &Arc<Self>, bulk: &SharedBulk, bytes_max: u64) -> Result<RemoteSpan, String> {
        if bulk.arena != self.id {
            return Err(format!("bulk descriptor names arena {:#x}, not the attached {:#x}", bulk.arena, self.id));
        }
        if usize::from(bulk.head) >= PAGE_BYTES || bulk.len > bytes_max {
            return Err(format!("bulk descriptor of {} bytes at {} is out of range", bulk.len, bulk.head));
        }
        let needed = PageSpan::frames_for(bulk.head, bulk.len) as u64;
        let mut named = 0u64;
        for &(first, count) in &bulk.runs {
            if count == 0 || u64::from(first) + u64::from(count) > u64::from(self.frames) {
                return Err(format!("bulk descriptor names frames {first}+{count} of an arena of {}", self.frames));
            }
            named += u64::from(count);
        }
        if named != needed {
            return Err(format!("bulk descriptor names {named} frames for {} bytes at {}", bulk.len, bulk.head));
        }
        let base = self.map.as_ptr();
        let mut pieces: Vec<(*const u8, usize)> = Vec::with_capacity(bulk.runs.len());
        let (mut skip, mut left) = (usize::from(bulk.head), bulk.len as usize);
        for &(first, count) in &bulk.runs {
            let n = (count as usize * PAGE_BYTES - skip).min(left);
            // SAFETY: the run lies inside the mapping (checked above).
            pieces.push((unsafe { base.add(first as usize * PAGE_BYTES + skip) }, n));
            (skip, left) = (0, left - n);
        }
        let keep: Arc<dyn Send + Sync> = self.clone();
        // SAFETY: every piece is inside the mapping, which `keep` holds.
        Ok(unsafe { RemoteSpan::new(pieces, keep) })
    }
}

/// Write `frame` to `stream` with `fd` attached to its bytes (`SCM_RIGHTS`).
pub async fn send_frame_with_fd(stream: &mut QuietUnixStream, frame: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut sent = 0;
    while sent < frame.len() {
        let attach = (sent == 0).then_some(fd.as_raw_fd());
        sent += stream.write_with(|socket| sendmsg(socket.as_raw_fd(), &frame[sent..], attach)).await?;
    }
    Ok(())
}

fn sendmsg(socket: RawFd, bytes: &[u8], fd: Option<RawFd>) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: bytes.as_ptr() as *mut libc::c_void, iov_len: bytes.len() };
    // u64s keep the control buffer aligned for `cmsghdr`.
    let mut control = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; the fields set point at live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE of one int fits in `control` (64 bytes);
        // CMSG_FIRSTHDR of a buffer that large is non-null and writable.
        unsafe {
            let space = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = space;
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg) as *mut RawFd, fd);
        }
    }
    // SAFETY: `msg` describes live buffers.
    let n = unsafe { libc::sendmsg(socket, &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// File descriptors received on a connection, waiting for the message
/// that takes them.
#[derive(Clone, Default)]
pub struct FdInbox(Arc<Mutex<VecDeque<OwnedFd>>>);

impl FdInbox {
    /// The most recently received descriptor; older ones are closed.
    pub fn take_latest(&self) -> Option<OwnedFd> {
        let mut fds = self.0.lock().expect("fd inbox lock");
        let latest = fds.pop_back();
        fds.clear();
        latest
    }

    fn put(&self, fd: OwnedFd) {
        let mut fds = self.0.lock().expect("fd inbox lock");
        if fds.len() >= FDS_PENDING_MAX {
            fds.pop_front(); // closed: a peer cannot make us hold descriptors
        }
        fds.push_back(fd);
    }
}

/// A Unix socket whose reads also collect the file descriptors that come
/// with the bytes (a plain `read` would close them), into an [`FdInbox`].
pub struct FdStream {
    inner: QuietUnixStream,
    inbox: FdInbox,
}

impl FdStream {
    pub fn new(inner: QuietUnixStream) -> (FdStream, FdInbox) {
        let inbox = FdInbox::default();
        (FdStream { inner, inbox: inbox.clone() }, inbox)
    }
}

impl AsyncRead for FdStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // SAFETY: recvmsg only writes into the unfilled part, and we
        // mark as filled only the bytes it reports.
        let unfilled = unsafe { buf.unfilled_mut() };
        let (ptr, len) = (unfilled.as_mut_ptr() as *mut u8, unfilled.len());
        let inbox = &this.inbox;
        let n = ready!(this.inner.poll_read_with(cx, |socket| recvmsg(socket.as_raw_fd(), ptr, len, inbox)))?;
        // SAFETY: the kernel wrote `n` bytes there.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

fn recvmsg(socket: RawFd, ptr: *mut u8, len: usize, inbox: &FdInbox) -> io::Result<usize> {
    let mut iov = libc::iovec { iov_base: ptr as *mut libc::c_void, iov_len: len };
    let mut control = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; the fields set point at live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` describes live buffers (the caller's `ptr`/`len` is the
    // unfilled part of a read buffer).
    let n = unsafe { libc::recvmsg(socket, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `control` with well-formed cmsghdrs up to
    // `msg_controllen`; the CMSG_* macros walk them within it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg) as *const RawFd;
                let count = ((*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    inbox.put(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(n as usize)
}

impl AsyncWrite for FdStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_core::pages::PagePool;

    #[test]
    fn descriptors_name_runs_of_frames_and_resolve_to_the_same_bytes() {
        let (arena, file) = create_arena(16).unwrap();
        let pool = PagePool::with_arena(arena.clone());
        let bytes: Vec<u8> = (0..3 * PAGE_BYTES as u32).map(|i| (i % 239) as u8).collect();
        let span = PageSpan::copy_from(&pool, 100, &bytes);
        let bulk = SharedBulk::of(&span, arena.id()).expect("all frames in the arena");
        assert_eq!(bulk.runs, vec![(0, 4)]);
        assert_eq!(SharedBulk::of(&span, arena.id() + 1), None);
        let mapped = MappedArena::attach(file.into(), arena.id(), 16).unwrap();
        let remote = mapped.resolve(&bulk, 1 << 20).unwrap();
        assert_eq!(remote.to_vec(), bytes);
        // Descriptors that do not fit are refused.
        let bad = |f: &dyn Fn(&mut SharedBulk)| {
            let mut b = bulk.clone();
            f(&mut b);
            mapped.resolve(&b, 1 << 20).unwrap_err()
        };
        assert!(bad(&|b| b.arena += 1).contains("names arena"));
        assert!(bad(&|b| b.runs = vec![(14, 4)]).contains("arena of 16"));
        assert!(bad(&|b| b.runs = vec![(0, 3)]).contains("names 3 frames"));
        assert!(bad(&|b| b.runs = vec![(0, 0), (0, 4)]).contains("frames 0+0"));
        assert!(bad(&|b| b.head = 4096).contains("out of range"));
        assert!(mapped.resolve(&bulk, 100).unwrap_err().contains("out of range"));
    }

    #[test]
    fn unsealed_or_short_memory_is_not_mapped() {
        let plain = tempfile::tempfile().unwrap();
        plain.set_len(1 << 20).unwrap();
        assert!(MappedArena::attach(plain.into(), 1, 4).unwrap_err().contains("sealed"));
        let (_, file) = create_arena(2).unwrap();
        assert!(MappedArena::attach(file.into(), 1, 4).unwrap_err().contains("fewer than"));
        let (_, file) = create_arena(2).unwrap();
        assert!(MappedArena::attach(file.into(), 1, 0).is_err());
    }

    #[tokio::test]
    async fn descriptors_cross_a_unix_socket() {
        use tokio::io::AsyncReadExt;
        let (mut a, b) = QuietUnixStream::pair().unwrap();
        let (_, file) = create_arena(1).unwrap();
        send_frame_with_fd(&mut a, b"hello", std::os::fd::AsFd::as_fd(&file)).await.unwrap();
        let (mut reader, inbox) = FdStream::new(b);
        let mut got = [0u8; 5];
        reader.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"hello");
        let fd = inbox.take_latest().expect("a descriptor came with the bytes");
        assert!(MappedArena::attach(fd, 9, 1).is_ok());
        assert!(inbox.take_latest().is_none());
    }
}
