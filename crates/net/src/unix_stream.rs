//! A Unix stream that wakes its task for bytes to read, and for room to
//! write only while a write waits for it.
//!
//! tokio registers a socket for reading and writing at once (edge
//! triggered). Linux wakes a Unix stream's writers whenever its peer
//! reads and the socket has room (`unix_write_space`, unlike TCP, which
//! wakes only a writer that found no room), so every message a server
//! read from a client's socket woke the client's thread from `epoll_wait`
//! for nothing (with a lock taken per write, three in five of the
//! wake-ups an OSS gave a client's thread), and every reply a client read
//! woke the OSS's network thread. Here the socket is registered for reading alone,
//! a write goes straight to the socket, and only a write that finds no
//! room registers a duplicate of the descriptor for writing, until the
//! writer flushes or shuts down.
//!
//! Invariant: the write registration exists only between a write that
//! found no room and the next flush or shutdown
//! ([`QuietUnixStream::check_invariants`]).

use std::io::{self, IoSlice, Write};
use std::net::Shutdown;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream as StdUnixStream;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

pub struct QuietUnixStream {
    /// The socket, registered with the runtime for reading alone.
    socket: AsyncFd<StdUnixStream>,
    /// A duplicate of its descriptor, registered for writing, while a
    /// write waits for room.
    writable: Option<AsyncFd<OwnedFd>>,
}

impl QuietUnixStream {
    /// Takes `stream` off tokio's own registration and registers it for
    /// reading alone. Call within a runtime.
    pub fn new(stream: tokio::net::UnixStream) -> io::Result<QuietUnixStream> {
        let socket = stream.into_std()?; // non-blocking, as tokio left it
        QuietUnixStream::from_std(socket)
    }

    /// A non-blocking std socket, registered for reading alone.
    pub fn from_std(socket: StdUnixStream) -> io::Result<QuietUnixStream> {
        socket.set_nonblocking(true)?;
        Ok(QuietUnixStream { socket: register(socket, Interest::READABLE)?, writable: None })
    }

    /// A connected pair (for tests and probes).
    pub fn pair() -> io::Result<(QuietUnixStream, QuietUnixStream)> {
        let (a, b) = StdUnixStream::pair()?;
        Ok((QuietUnixStream::from_std(a)?, QuietUnixStream::from_std(b)?))
    }

    pub fn check_invariants(&self) {
        invariants(&self.socket, &self.writable);
    }

    /// Whether a write is waiting for room (its registration is held).
    pub fn waits_for_room(&self) -> bool {
        self.writable.is_some()
    }

    /// Runs `io` on the socket once it is readable, until it does not
    /// find it empty (`WouldBlock`).
    pub fn poll_read_with<T>(
        &self,
        cx: &mut Context<'_>,
        mut io: impl FnMut(&StdUnixStream) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        loop {
            let mut guard = ready!(self.socket.poll_read_ready(cx))?;
            match guard.try_io(|socket| io(socket.get_ref())) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    /// Runs `io` on the socket until it does not find it full
    /// (`WouldBlock`), waiting for room in between.
    pub fn poll_write_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut io: impl FnMut(&StdUnixStream) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        let QuietUnixStream { socket, writable } = self;
        loop {
            let Some(registered) = writable.as_ref() else {
                match io(socket.get_ref()) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        // Registered now, a socket with room already is
                        // reported at once: no wake-up is lost between
                        // the write and the registration.
                        let dup = socket.get_ref().as_fd().try_clone_to_owned()?;
                        *writable = Some(register(dup, Interest::WRITABLE)?);
                        if cfg!(debug_assertions) {
                            invariants(socket, writable);
                        }
                        continue;
                    }
                    done => return Poll::Ready(done),
                }
            };
            let mut guard = ready!(registered.poll_write_ready(cx))?;
            match guard.try_io(|_| io(socket.get_ref())) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes with `io` on the socket, waiting for room while it finds
    /// none.
    pub async fn write_with<T>(&mut self, mut io: impl FnMut(&StdUnixStream) -> io::Result<T>) -> io::Result<T> {
        std::future::poll_fn(|cx| self.poll_write_with(cx, &mut io)).await
    }

    /// Lets go of the write registration: nothing waits for room.
    fn rest(&mut self) {
        self.writable = None;
    }
}

fn invariants(socket: &AsyncFd<StdUnixStream>, writable: &Option<AsyncFd<OwnedFd>>) {
    if let Some(w) = writable {
        assert_ne!(w.as_raw_fd(), socket.as_raw_fd(), "the write registration is a duplicate");
    }
}

/// `fd` registered with the runtime for `interest`.
fn register<T: AsRawFd>(fd: T, interest: Interest) -> io::Result<AsyncFd<T>> {
    // SAFETY: `fd` owns its descriptor (a socket, or its duplicate), which
    // stays open and the same until the `AsyncFd` drops it.
    unsafe { AsyncFd::register_with_interest(fd, interest) }.map_err(|e| e.into_parts().1)
}

impl AsyncRead for QuietUnixStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        // SAFETY: `recv` only writes into the unfilled part, and only the
        // bytes it reports are marked filled.
        let unfilled = unsafe { buf.unfilled_mut() };
        let (ptr, len) = (unfilled.as_mut_ptr().cast::<u8>(), unfilled.len());
        let n = ready!(self.poll_read_with(cx, |socket| recv(socket, ptr, len)))?;
        // SAFETY: the kernel wrote `n` bytes there.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

/// `recv` into `len` bytes at `ptr`, which may be uninitialised.
fn recv(socket: &StdUnixStream, ptr: *mut u8, len: usize) -> io::Result<usize> {
    // SAFETY: the caller's `ptr` is valid for `len` bytes of writes.
    let n = unsafe { libc::recv(socket.as_raw_fd(), ptr.cast(), len, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

impl AsyncWrite for QuietUnixStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_with(cx, |mut socket| socket.write(buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_with(cx, |mut socket| socket.write_vectored(bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// A Unix socket buffers nothing in user space: flushing is the
    /// writer saying it has written what it had, so the write
    /// registration goes.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().rest();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.rest();
        Poll::Ready(this.socket.get_ref().shutdown(Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_cross_both_ways_and_a_full_socket_waits_for_room() {
        let (mut a, mut b) = QuietUnixStream::pair().unwrap();
        a.write_all(b"ping").await.unwrap();
        let mut got = [0u8; 4];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"ping");
        // Far more than a socket buffer holds: the writer waits for room,
        // registered for it, and every byte arrives in order.
        let sent: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
        let expected = sent.clone();
        let writer = tokio::spawn(async move {
            a.write_all(&sent).await.unwrap();
            let waited = a.waits_for_room();
            a.check_invariants();
            a.flush().await.unwrap();
            assert!(!a.waits_for_room(), "a flush lets go of the write registration");
            a.shutdown().await.unwrap();
            waited
        });
        let mut received = Vec::new();
        b.read_to_end(&mut received).await.unwrap();
        assert!(writer.await.unwrap(), "8 MiB into a Unix socket waits for room at least once");
        assert!(received == expected, "{} bytes arrived of {}", received.len(), expected.len());
    }

    /// The voluntary context switches of the calling thread so far.
    fn switches() -> i64 {
        // SAFETY: an all-zero rusage is a valid value to write over.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid rusage to write.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
        usage.ru_nvcsw
    }

    /// How often a runtime's thread wakes over `round_trips` messages
    /// written to its stream and answered, the peer reading each a while
    /// after it was written and answering a while after that.
    fn wake_ups_over_round_trips<S: AsyncRead + AsyncWrite + Unpin>(
        stream: impl FnOnce() -> S + Send,
        peer: StdUnixStream,
        round_trips: usize,
    ) -> i64 {
        let pause = || std::thread::sleep(std::time::Duration::from_micros(200));
        std::thread::scope(|scope| {
            let answering = scope.spawn(move || {
                let mut peer = peer;
                let mut message = [0u8; 64];
                for _ in 0..round_trips {
                    pause();
                    peer.read_exact(&mut message).unwrap();
                    pause();
                    peer.write_all(&message).unwrap();
                }
            });
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let woke = rt.block_on(async move {
                let mut stream = stream();
                let before = switches();
                let mut message = [7u8; 64];
                for _ in 0..round_trips {
                    stream.write_all(&message).await.unwrap();
                    stream.flush().await.unwrap();
                    stream.read_exact(&mut message).await.unwrap();
                }
                switches() - before
            });
            answering.join().unwrap();
            woke
        })
    }

    #[test]
    fn a_peer_reading_does_not_wake_the_writers_thread() {
        const ROUND_TRIPS: i64 = 200;
        let (a, b) = StdUnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let quiet = wake_ups_over_round_trips(|| QuietUnixStream::from_std(a).unwrap(), b, ROUND_TRIPS as usize);
        let (a, b) = StdUnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let plain = wake_ups_over_round_trips(|| tokio::net::UnixStream::from_std(a).unwrap(), b, ROUND_TRIPS as usize);
        // One wake-up a round trip, for its answer; registered for writing
        // as well, a second one when the peer reads the message.
        assert!(
            quiet < ROUND_TRIPS * 5 / 4,
            "{ROUND_TRIPS} round trips woke the writer's thread {quiet} times (registered for writing as well, \
             {plain})"
        );
    }
}
