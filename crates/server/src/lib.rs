//! lanefs-server: the OSS and the MDS daemon on real sockets and disks.
//!
//! Key design decision: this crate adds transport, time and storage around
//! lanefs-core's OST state machine and lanefs-mds's namespace, and nothing
//! else. An OSS runs each OST's `Ost` on a thread of its own, with objects
//! in sparse files ([`oss`], [`filestore`], [`commit_point`]); the MDS
//! daemon serves the namespace from SQLite and owns the life of OST
//! objects ([`mds_server`], [`mds_objects`], [`mds_clients`]), so the file
//! system's behaviour (locks, commits, recovery) is exactly the one the
//! harness and the simulator test. Connections, authentication, bounds and
//! fencing are lanefs-net's; the frames are lanefs-proto's.
//!
//! [`cluster`] starts a whole file system in one process (the demo's, the
//! tests', an `mpirun` job's without `--cluster`).

pub mod cluster;
pub mod commit_point;
pub mod exports;
pub mod faults;
pub mod filestore;
pub mod flock_seal;
pub mod kept_params;
pub mod mds_clients;
pub mod mds_objects;
pub mod mds_server;
pub mod metrics;
pub mod oss;
pub mod ost_params;
pub mod refusal_backoff;
