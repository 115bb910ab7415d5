//! lanefs-top: `lanefs top`, a running cluster seen live, in the manner of
//! LMT's `ltop` for Lustre: a row per OST (bandwidth, IOPS, locks, RPCs
//! in flight, space, exports) and a row per client of this host, every
//! few seconds, on a full screen or as plain text.
//!
//! Key decision: a sample is raw counters ([`sample`]), and everything
//! shown is computed from two samples ([`rates`]), so the live view, its
//! recording and a replay of it show the same numbers; the recording
//! holds samples, never rates ([`record`]).
//!
//! - [`collect`]: a live sample: the OSTs through the MDS, this host's
//!   clients through their control sockets ([`client_params`] reads their
//!   statistics files back);
//! - [`rates`]: a sample as shown ([`rates::Frame`]), and [`slow`], the
//!   rule that flags an OST much slower than its busy peers;
//! - [`state`]: what the views show (the live state, a replay's cursor),
//!   no I/O; [`view`]: the columns, plain text and ratatui tables;
//! - [`run`]: the plain-text loop; [`terminal`]: the full-screen loop.
//!
//! What it is not: a collector for a whole site. ltop reads what LMT's
//! cerebro daemons gather on every server; lanefs top asks the MDS for
//! the OSTs and sees only the clients of the host it runs on. It links no
//! server code (lanefs-server, lanefs-mds): it runs where clients run.

pub mod client_params;
pub mod collect;
pub mod error;
pub mod rates;
pub mod record;
pub mod run;
pub mod sample;
pub mod slow;
pub mod state;
pub mod terminal;
pub mod view;

pub use collect::Sampler;
pub use error::TopError;
pub use record::{RecordError, Recorder};
pub use run::{interval, run_plain, Settings, Source};
pub use terminal::run_terminal;
