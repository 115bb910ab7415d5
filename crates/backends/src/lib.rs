//! lanefs-backends: IOR's backends on lanefs, for the `lanefs ior` front
//! end (lanefs-ior), as IOR's `aiori` modules are for IOR.
//!
//! - [`lanefs`]: `-a LANEFS`, each rank its own lanefs client, with the
//!   lock modes, striping and client tunables as `--lanefs.*` module
//!   options, and the run's lock and RPC figures in the report.
//! - [`mpiio`]: `-a MPIIO`, IOR's MPI-IO on lanefs: independent transfers,
//!   and with `-c` two-phase collective I/O through `lanefs_mpiio`, with
//!   the hints of IOR and `MPICH_MPIIO_HINTS` and Cray's report blocks.
//! - [`rank`]: one rank on a lanefs client of its own, as both backends
//!   run it.
//! - [`ranks`]: ranks as processes of their own (`--lanefs.ranks=processes`),
//!   driven over a pipe by the front end.
//! - [`job`]: IOR as the processes of an `mpirun` job (the `mpi` feature
//!   links Open MPI): each process one rank, with the job's communicator.
//!
//! The CLI parses the command line and prints; the work is here.

pub mod job;
pub mod lanefs;
pub mod mpiio;
pub mod rank;
pub mod ranks;
