//! Standard output, and how a command ends when nobody reads it any more.
//!
//! Rust starts programs with SIGPIPE ignored, so writing to a pipe whose
//! reader has gone (`lanefs sim ior ... | head -1`) fails with `EPIPE`
//! instead of killing the process; `println!` would panic on that error.
//! The commands write their reports with [`outln!`] (or `write!` into a
//! writer) and pass the error up like any other, and `main` ends quietly
//! with status 0 when [`reader_gone`] says that is what happened, as Unix
//! tools do.
//!
//! SIGPIPE stays ignored rather than set back to its default, which would
//! have the kernel kill lanefs in the middle of a write: death by a signal
//! (status 141, a failure under `set -o pipefail`) and no destructors run,
//! so an embedded cluster's temporary directory or a half-written time
//! series would be left behind. The servers and `lanefs ior`, whose ranks
//! talk over pipes, need it ignored anyway: a rank that dies is an error
//! to report, not a reason to die.

use std::io::{self, ErrorKind};
use std::os::fd::AsRawFd;

/// `println!` that returns the write's `io::Result` instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use outln;

/// `text` to standard output, as [`outln!`] does (an error, not a panic,
/// when nobody reads it).
pub fn stdout_write(text: &str) -> io::Result<()> {
    use std::io::Write as _;
    std::io::stdout().lock().write_all(text.as_bytes())
}

/// Whether `error` comes of standard output's reader having gone: a broken
/// pipe in its causes, and stdout's reader gone indeed. A broken pipe
/// elsewhere (a rank's pipe, a server's socket) stays an error.
pub fn reader_gone(error: &anyhow::Error) -> bool {
    let broken_pipe =
        error.chain().any(|cause| cause.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == ErrorKind::BrokenPipe));
    broken_pipe && stdout_reader_gone()
}

/// `result`, with a write that failed because stdout's reader has gone
/// taken as done: for commands whose exit code says more than their output.
pub fn unless_reader_gone(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(e) if e.kind() == ErrorKind::BrokenPipe && stdout_reader_gone() => Ok(()),
        other => other,
    }
}

/// The kernel reports the write end of a pipe (or a socket) whose other
/// end is closed as an error condition to `poll`.
fn stdout_reader_gone() -> bool {
    let mut fd = libc::pollfd { fd: io::stdout().as_raw_fd(), events: 0, revents: 0 };
    // SAFETY: one valid pollfd, no waiting.
    let ready = unsafe { libc::poll(&mut fd, 1, 0) };
    ready == 1 && fd.revents & (libc::POLLERR | libc::POLLHUP) != 0
}
