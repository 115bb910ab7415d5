//! `lanefs ior`: IOR's front end (lanefs-ior) with the backends on lanefs
//! (`lanefs_backends`): the options that say where the file system is
//! (`--cluster ADDR`, or `--mds`, `LANEFS_MDS`; on TCP with its key,
//! `--key FILE` or `LANEFS_KEY`), taken out of IOR's arguments; an embedded
//! cluster started for the run when none is given; ranks as threads, or
//! under `mpirun` as the processes of the job.

use crate::args::take;
use anyhow::{bail, Result};
use lanefs_backends::job;
use lanefs_backends::lanefs::{embedded_osts, LanefsBackend};
use lanefs_backends::mpiio::MpiioBackend;
use lanefs_ior::PosixBackend;
use lanefs_net::auth::ClusterKey;
use lanefs_net::cluster::{LocalCluster, LocalClusterConfig};
use std::io::Write;
use std::path::PathBuf;

/// Where `lanefs ior` runs: an existing cluster, or one started for the run.
pub enum Where {
    Cluster(String),
    Embedded(Box<LocalCluster>),
}

impl Where {
    pub fn mds(&self) -> String {
        match self {
            Where::Cluster(a) => a.clone(),
            Where::Embedded(c) => c.mds_address(),
        }
    }
}

/// IOR's options (`lanefs ior -h`): every backend's, since help needs no cluster.
pub fn usage() -> String {
    let lanefs = LanefsBackend::offline();
    let mpiio = MpiioBackend::new(&lanefs);
    lanefs_ior::usage(&[&PosixBackend, &lanefs, &mpiio])
}

fn uses_lanefs(args: &[String]) -> bool {
    ["LANEFS", "MPIIO"].iter().any(|name| {
        args.windows(2).any(|w| w[0] == "-a" && w[1].eq_ignore_ascii_case(name))
            || args.iter().any(|a| {
                a.eq_ignore_ascii_case(&format!("-a{name}")) || a.eq_ignore_ascii_case(&format!("--api={name}"))
            })
    })
}

/// `lanefs ior ARGS`: exit code as IOR's (1 when data checks failed).
pub fn main(mut args: Vec<String>, mds: Option<String>, key: Option<PathBuf>) -> Result<()> {
    let cluster = take(&mut args, "--cluster", "127.0.0.1:9400")?.or(mds);
    let key = take(&mut args, "--key", "/tmp/lanefs/keys/client.pem")?.map(PathBuf::from).or(key);
    let posix = PosixBackend;
    let mut out = std::io::stdout();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(out.write_all(usage().as_bytes())?);
    }
    if job::under_mpirun() {
        return job::run(args, cluster, key);
    }
    let code = if uses_lanefs(&args) {
        let mut credentials = None;
        let place = match cluster {
            Some(a) => {
                if let Some(path) = key {
                    let loaded = ClusterKey::load(&path)?;
                    credentials = Some((path, loaded));
                }
                Where::Cluster(a)
            }
            None => {
                let osts = embedded_osts(&args).map_err(anyhow::Error::msg)?;
                let config = LocalClusterConfig { osts, ..Default::default() };
                Where::Embedded(Box::new(LocalCluster::start(config)?))
            }
        };
        let lanefs = LanefsBackend::new(place.mds(), credentials, args.clone())?;
        let mpiio = MpiioBackend::new(&lanefs);
        lanefs_ior::main_with(&args, &[&posix, &lanefs, &mpiio], &mut out)?
    } else {
        lanefs_ior::main_with(&args, &[&posix], &mut out)?
    };
    if code != 0 {
        bail!("IOR found incorrect data (exit code {code})");
    }
    Ok(())
}
