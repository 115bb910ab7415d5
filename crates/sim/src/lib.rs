//! lanefs-sim: a deterministic discrete-event simulator of a lanefs cluster.
//!
//! The key design decision: the simulator runs the *same* sans-IO protocol
//! code as the real daemons (lanefs-core's lock server, client cache and OST
//! service) and replaces only the world around it (wires, disks, CPUs, the
//! clock) with models driven from one event queue in virtual time. A run is a
//! pure function of its cluster description and seed, so any result can be
//! replayed, and a 192-node or 9,000-node machine fits on a laptop.
//!
//! This crate is not a performance predictor tuned to match measurements:
//! every hardware parameter comes from a stated source (see `presets/` at the
//! top of the repository), and results are read as what follows from those
//! facts.
//!
//! The foundation:
//! - [`queue`]: [`EventQueue`], the pending-event set (a radix heap: time
//!   order, ties in push order, fast at a million pending events).
//! - [`config`]: [`ClusterConfig`], the machine being simulated, read from a
//!   TOML file or a built-in preset, with every unit in its key name.

pub mod backend;
pub mod callback_threads;
pub mod commit_threads;
pub mod config;
pub mod cpu_ledger;
pub mod frames;
pub mod handoffs;
pub mod host_cache;
pub mod job;
pub mod journal;
pub mod mds;
pub mod model;
pub mod mpi_waits;
pub mod queue;
pub mod world;

pub use config::{Bandwidth, ClusterConfig, ConfigError};
pub use queue::EventQueue;
