//! lanefs-net: the transport both sides of a lanefs connection share.
//!
//! Key design decision: connections are made, authenticated, bounded and
//! fenced in one place, below both the client library (lanefs-client) and
//! the servers (lanefs-server), so that a client and a server agree on
//! every rule of a connection by construction and neither depends on the
//! other. The frames themselves are lanefs-proto's.
//!
//! - [`transport`] and [`address`]: listening, connecting and the
//!   handshake over TCP (inside TLS) or a Unix socket; [`hello`] bounds the
//!   handshakes in progress;
//! - [`auth`] and [`keys`]: who may connect as what (TLS with a cluster key
//!   on TCP, the kernel's peer credentials on Unix sockets), and the key
//!   files; [`process`]: the calling process's own identity;
//! - [`limits`], [`outbox`] and [`writer`]: what a peer can make either
//!   side spend, a connection's bounded outgoing queue and the task that
//!   writes it;
//! - [`fence`]: the mark that keeps a second server off the data one
//!   serves;
//! - [`shm`]: the page arena a client shares with an OSS on its host;
//!   [`unix_stream`]: a Unix socket that wakes its thread for bytes to
//!   read, not for room to write;
//! - [`params`]: the `lctl` parameter tree of clients and servers;
//! - [`runtime_files`]: private runtime files, made without following
//!   links.

pub mod address;
pub mod auth;
pub mod fence;
pub mod hello;
pub mod keys;
pub mod limits;
pub mod outbox;
pub mod params;
pub mod process;
pub mod runtime_files;
pub mod shm;
pub mod transport;
pub mod unix_stream;
pub mod writer;
