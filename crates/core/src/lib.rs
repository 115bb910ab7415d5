//! lanefs-core: the protocol of a striped parallel file system, with no I/O.
//!
//! Key design decision: every component (the OST's lock server and data
//! service, the client's lock and page caches) is a state machine that never
//! reads a clock, sleeps or touches a socket or disk. Inputs arrive through
//! `handle_*(now, ...)` methods; outputs leave through `poll_transmit`,
//! `poll_event` and `poll_timeout`. The same code therefore runs inside real
//! daemons (time from tokio, bytes over TCP, objects in files), inside a
//! discrete-event simulator at supercomputer scale, and inside the
//! deterministic [`harness`] that the tests and the demo use, where a seed
//! replays a run exactly.
//!
//! What it is not: a transport, a timing model, or a POSIX layer. Those live
//! in the crates that drive it.
//!
//! Start with [`ldlm`] (the extent lock manager and Lustre's expansion
//! policy), then [`client`] (lock cache, page cache, writeback, lockahead
//! advice), [`ost`] and [`layout`].

pub mod client;
pub mod cut;
pub mod errno;
pub mod extent;
pub mod harness;
pub mod layout;
pub mod ldlm;
pub mod msg;
pub mod ost;
pub mod pages;
pub mod planted;
pub mod store;
pub mod suggest;
pub mod units;

pub use errno::Errno;
pub use extent::{Extent, EOF};
pub use units::*;
