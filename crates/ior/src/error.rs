//! The one error type of lanefs-ior.
//!
//! What: every failure the benchmark expects — a bad or unsupported option, a backend
//! that cannot open/read/write, an output file that cannot be written. Each message
//! names the option or operation and, where there is one, the fix.
//!
//! Not here: data-check mismatches (`-W`/`-R`). IOR counts those and keeps running, so
//! they are a count in [`crate::IorSummary`], not an error.

use std::io;

/// What went wrong, with enough context to act on.
#[derive(Debug, thiserror::Error)]
pub enum IorError {
    /// A command-line option or `-O` directive that is malformed, out of range,
    /// unknown, or an IOR feature lanefs-ior does not implement.
    #[error("invalid option {option}: {message}")]
    Option {
        /// The option as the user wrote it (`-b 1000`, `-O stoneWallingTime=10`).
        option: String,
        /// Why it is refused and how to fix it.
        message: String,
    },
    /// `-a NAME` names no registered backend.
    #[error("invalid option -a {api}: no such backend; available: {available}")]
    UnknownApi {
        /// The requested API.
        api: String,
        /// The registered names, comma separated.
        available: String,
    },
    /// An operating-system call failed.
    #[error("{backend}: {op} {path}: {source}")]
    Io {
        /// Backend name (`POSIX`).
        backend: &'static str,
        /// The operation (`open`, `pwrite at offset 4096`, ...).
        op: String,
        /// The file it was applied to.
        path: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A backend failure that is not an OS error (a refused lock, a lost server, a model
    /// that cannot run the test...). Build it with [`IorError::backend`].
    #[error("{backend}: {message}")]
    Backend {
        /// Backend name.
        backend: &'static str,
        /// What failed.
        message: String,
    },
    /// Rank `rank` failed; the run stopped every rank.
    #[error("rank {rank}: {source}")]
    Rank {
        /// The first failing rank.
        rank: u32,
        /// What failed there.
        source: Box<IorError>,
    },
    /// A backend does not provide an optional operation (statfs, mkdir).
    #[error("{backend} does not implement {operation}")]
    NotImplemented {
        /// Backend name.
        backend: &'static str,
        /// The missing operation.
        operation: &'static str,
    },
    /// Writing the report (stdout or `-O summaryFile=`) failed.
    #[error("cannot write output: {0}")]
    Output(#[from] io::Error),
}

impl IorError {
    /// Shorthand for [`IorError::Option`].
    pub fn option(option: impl Into<String>, message: impl Into<String>) -> Self {
        IorError::Option { option: option.into(), message: message.into() }
    }

    /// Shorthand for [`IorError::Backend`]: `backend` is the backend's
    /// [`crate::Backend::name`].
    pub fn backend(backend: &'static str, message: impl Into<String>) -> Self {
        IorError::Backend { backend, message: message.into() }
    }
}
