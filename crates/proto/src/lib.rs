//! What crosses a lanefs socket: the messages, their codec and their typed
//! errors. Both sides of every connection depend on this crate, and it
//! depends on nothing of either: no socket, no SQLite, no server state.
//!
//! The key decision: the wire is one crate of plain data, so that the
//! client library, the mount and the IOR ranks share the MDS's and the
//! OSS's message types without linking the servers (and the MDS's
//! SQLite) to get them.
//!
//! - [`wire`]: [`wire::Wire`], every frame a connection carries: the
//!   handshake, lanefs-core's OST messages tagged with their OST, the MDS's
//!   calls and answers, pings, bulk descriptors;
//! - [`codec`]: how a [`wire::Wire`] becomes bytes (bincode with a length
//!   prefix, bulk data after the header) and back, bounded;
//! - at the crate's root: the namespace's requests and replies
//!   ([`MdsRequest`], [`MdsReply`]) and the values inside them;
//!   [`MdsError`], each way a request can fail;
//! - [`flock`]: file locks as they cross the wire, and the seal of a grant;
//! - [`pools`] and [`path`]: OST pool names and MDS paths, checked wherever
//!   they are read.

pub mod codec;
pub mod flock;
mod mds;
mod mds_error;
pub mod path;
pub mod pools;
pub mod wire;

pub use mds::*;
pub use mds_error::MdsError;
pub use pools::{PoolChange, PoolInfo, PoolName};
