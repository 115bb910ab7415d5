//! `mpirun -np N lanefs ior ...`: every MPI process is one IOR rank with
//! its own backend handle (with `-a LANEFS` and `-a MPIIO`, its own lanefs
//! client), as IOR runs under MPI: barriers, the clock (`MPI_Wtime`) and
//! the gathering of results go through the job's communicator, and rank 0
//! prints. `-N` defaults to the job's size and `--tasks-per-node` to the
//! ranks `mpirun` placed on each node. Collective MPI-IO (`-a MPIIO -c`)
//! exchanges its data over MPI.
//!
//! The file system: `--cluster ADDR` (or `--mds`, `LANEFS_MDS`) names one,
//! reachable from every host; without it rank 0 starts an embedded cluster
//! and tells the others where, which works while every rank is on its host.
//!
//! A rank that fails ends the job (`MPI_Abort`) with its error on stderr,
//! as IOR's do; one that dies makes `mpirun` end the others.

use anyhow::Result;

/// Whether this process was started by `mpirun` (Open MPI's or a PMI
/// launcher's environment).
pub fn under_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|name| std::env::var_os(name).is_some())
}

/// Starts the file system a job runs on when no `--cluster` names one
/// (rank 0 only): given the number of OSTs, it returns the MDS's address
/// and what keeps the file system serving until dropped. The binary
/// passes its embedded cluster (lanefs-server's `LocalCluster`), so that
/// the backends, which run inside users' jobs, link no server code.
pub type StartEmbedded = fn(osts: u32) -> Result<(String, Box<dyn std::any::Any>)>;

#[cfg(not(feature = "mpi"))]
pub fn run(
    _args: Vec<String>,
    _cluster: Option<String>,
    _key: Option<std::path::PathBuf>,
    _timeseries: Option<(std::path::PathBuf, f64)>,
    _embedded: StartEmbedded,
) -> Result<()> {
    anyhow::bail!(
        "this lanefs was built without MPI, so it cannot run as a rank of mpirun: build it with `make build` \
         (as root it installs Open MPI's headers and libclang) or `cargo build --release --features mpi`, \
         or run `lanefs ior` without mpirun (ranks as threads)"
    )
}

#[cfg(feature = "mpi")]
pub fn run(
    args: Vec<String>,
    cluster: Option<String>,
    key: Option<std::path::PathBuf>,
    timeseries: Option<(std::path::PathBuf, f64)>,
    embedded: StartEmbedded,
) -> Result<()> {
    use anyhow::{anyhow, bail};
    use lanefs_mpiio::comm::MpiComm;
    use lanefs_mpiio::Communicator;

    let (_universe, comm) = MpiComm::init().map_err(|e| anyhow!("starting MPI: {e}"))?;
    let interval_s = timeseries.as_ref().map_or(0.0, |(_, interval)| *interval);
    let summary = rank_run(&comm, args, cluster, key, interval_s, embedded).and_then(|summary| {
        // Every rank has the whole series; rank 0 writes it.
        if let (Some((path, _)), Some(series), 0) = (&timeseries, &summary.timeseries, comm.rank()) {
            series.write_file(path).map_err(|e| anyhow!(e))?;
        }
        Ok(summary)
    });
    match summary {
        Ok(summary) if summary.passed() => Ok(()),
        // Every rank has the same summary, so all finish MPI together.
        Ok(summary) => bail!("IOR found incorrect data ({} errors)", summary.data_errors),
        Err(e) => {
            // One rank alone cannot return: the others may be waiting for
            // it in a collective, and MPI_Finalize waits for them.
            comm.abort(&format!("{e:#}"));
            Err(e)
        }
    }
}

/// The test's parameters in a job of `size` ranks: `-N` is the job's size
/// unless given, and no more than it.
#[cfg(feature = "mpi")]
fn job_params(args: &[String], size: u32) -> Result<lanefs_ior::IorParams> {
    use anyhow::{anyhow, bail};
    let mut params = lanefs_ior::parse_args(args).map_err(|e| anyhow!("{e}"))?;
    let gives_n = args.iter().any(|a| a == "-N" || a.starts_with("--numTasks") || (a.starts_with("-N") && a.len() > 2));
    if !gives_n {
        params.num_tasks = size;
    }
    if params.num_tasks > size {
        bail!("-N {}: the job has {size} ranks; start mpirun with -np {} or more", params.num_tasks, params.num_tasks);
    }
    Ok(params)
}

/// This process's rank of the job: its file system, backend and run.
#[cfg(feature = "mpi")]
fn rank_run(
    comm: &lanefs_mpiio::comm::MpiComm,
    args: Vec<String>,
    cluster: Option<String>,
    key: Option<std::path::PathBuf>,
    timeseries_interval_s: f64,
    start_embedded: StartEmbedded,
) -> Result<lanefs_ior::IorSummary> {
    use crate::lanefs::{embedded_osts, LanefsBackend};
    use crate::mpiio::MpiioBackend;
    use anyhow::{anyhow, bail};
    use lanefs_ior::{Api, PosixBackend};
    use lanefs_mpiio::comm::MpiComm;
    use lanefs_mpiio::Communicator;
    use lanefs_net::auth::ClusterKey;

    let mut params = job_params(&args, comm.size())?;
    params.timeseries_interval_s = timeseries_interval_s;
    // IOR's testComm: -N fewer than the job's ranks runs on the first N,
    // and the others wait for them.
    let team =
        if params.num_tasks < comm.size() { comm.first(params.num_tasks).map_err(|e| anyhow!("{e}"))? } else { None };
    let comm_world = comm;
    let comm: &MpiComm = match &team {
        Some(team) => team,
        None if params.num_tasks < comm_world.size() => {
            // Not in the test: wait for it, as IOR's idle ranks do (rank 0
            // of the job is always in it, and holds any embedded cluster).
            comm_world.barrier().map_err(|e| anyhow!("{e}"))?;
            return Ok(lanefs_ior::IorSummary::default());
        }
        None => comm_world,
    };
    params.tasks_per_node.get_or_insert(comm.ranks_per_node());
    let api = Api::parse(&params.api)
        .ok_or_else(|| anyhow!("-a {}: under mpirun lanefs ior runs -a {}", params.api, Api::names()))?;
    let mut stdout = std::io::stdout();
    let summary = if !api.needs_cluster() {
        lanefs_ior::run_as_rank(&params, &PosixBackend, &mut stdout, comm)
    } else {
        // The file system: the one named, or rank 0's embedded one.
        let mut embedded = None;
        let mds = match cluster {
            Some(address) => address,
            None => {
                if comm.ranks_per_node() < comm.size() {
                    bail!("the ranks run on several hosts: give --cluster ADDR of a file system they all reach");
                }
                let address = if comm.rank() == 0 {
                    let (address, started) = start_embedded(embedded_osts(&args).map_err(anyhow::Error::msg)?)?;
                    embedded = Some(started);
                    address
                } else {
                    String::new()
                };
                let all = comm.allgather(address.as_bytes()).map_err(|e| anyhow!("{e}"))?;
                String::from_utf8(all[0].clone())
                    .map_err(|_| anyhow!("rank 0 sent a cluster address that is not text"))?
            }
        };
        let credentials = key.map(|path| ClusterKey::load(&path).map(|loaded| (path, loaded))).transpose()?;
        let lanefs = LanefsBackend::new(mds, credentials, args.clone())?;
        let mpiio = MpiioBackend::for_job(&lanefs, comm);
        let backend: &dyn lanefs_ior::Backend = match api {
            Api::Lanefs => &lanefs,
            Api::Mpiio => &mpiio,
            Api::Posix => bail!("-a POSIX runs without a cluster"),
        };
        let summary = lanefs_ior::run_as_rank(&params, backend, &mut stdout, comm);
        // Rank 0's embedded cluster serves until every rank is done.
        comm.barrier().map_err(|e| anyhow!("{e}"))?;
        drop(embedded);
        summary
    };
    if params.num_tasks < comm_world.size() {
        comm_world.barrier().map_err(|e| anyhow!("{e}"))?;
    }
    summary.map_err(|e| anyhow!("{e}"))
}
