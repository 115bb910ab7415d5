//! lanefs-net: lanefs on real sockets and disks.
//!
//! Key design decision: this crate adds transport, time and storage around
//! lanefs-core's state machines and nothing else. An OSS runs each OST's
//! `Ost` state machine on a thread of its own, with objects in sparse files;
//! a client runs the core `Client` on a driver thread, so the file system's
//! behaviour (locks, cache, writeback) is exactly the one the harness and
//! the simulator test. The wire protocol is length-prefixed frames with a
//! versioned handshake ([`codec`], [`proto`]); who may connect as what is
//! decided in [`auth`] (TLS with a cluster key on TCP, the kernel's peer
//! credentials on Unix sockets). A server bounds everything a peer can
//! make it spend ([`limits`], [`outbox`]) and fences the data it serves
//! against a second server ([`fence`]).

pub mod address;
pub mod auth;
pub mod client;
pub mod cluster;
pub mod commit_point;
pub mod control;
pub mod exports;
pub mod faults;
pub mod fence;
pub mod filestore;
pub mod flock_seal;
pub mod hello;
pub mod kept_params;
pub mod keys;
pub mod limits;
pub mod mds_clients;
pub mod mds_objects;
pub mod mds_server;
pub mod oss;
pub mod ost_params;
pub mod outbox;
pub mod params;
pub mod refusal_backoff;
pub mod runtime_files;
pub mod shm;
pub mod space;
pub mod transport;
mod writer;
