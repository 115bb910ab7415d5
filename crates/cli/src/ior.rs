//! `lanefs ior`: IOR's front end (lanefs-ior) with the backends on lanefs
//! (`lanefs_backends`): the options that say where the file system is
//! (`--cluster ADDR`, or `--mds`, `LANEFS_MDS`; on TCP with its key,
//! `--key FILE` or `LANEFS_KEY`), taken out of IOR's arguments; an embedded
//! cluster started for the run when none is given; ranks as threads, or
//! under `mpirun` as the processes of the job.

use crate::args::{take, take_timeseries};
use anyhow::{bail, Result};
use lanefs_backends::job;
use lanefs_backends::lanefs::{embedded_osts, LanefsBackend};
use lanefs_backends::mpiio::MpiioBackend;
use lanefs_ior::{Api, PosixBackend};
use lanefs_net::auth::ClusterKey;
use lanefs_server::cluster::{LocalCluster, LocalClusterConfig};
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

/// The APIs `args` name: `-a`/`--api` on the command line, and the `api=`
/// lines of a script given with `-f` (a script that cannot be read is
/// IOR's to report).
fn apis_named(args: &[String]) -> Vec<String> {
    let mut apis = Vec::new();
    let mut script = None;
    for (i, arg) in args.iter().enumerate() {
        let next = || args.get(i + 1).cloned();
        match arg.as_str() {
            "-a" | "--api" => apis.extend(next()),
            "-f" | "--scriptFile" => script = next(),
            _ => {
                if let Some(api) = arg.strip_prefix("--api=").or_else(|| arg.strip_prefix("-a")) {
                    apis.push(api.to_string());
                } else if let Some(path) = arg.strip_prefix("--scriptFile=").or_else(|| arg.strip_prefix("-f")) {
                    script = Some(path.to_string());
                }
            }
        }
    }
    if let Some(text) = script.and_then(|path| std::fs::read_to_string(path).ok()) {
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default();
            if let Some((key, value)) = line.split_once('=') {
                if key.trim().eq_ignore_ascii_case("api") {
                    apis.push(value.trim().to_string());
                }
            }
        }
    }
    apis
}

/// Whether the run needs lanefs (a cluster); an API lanefs ior does not
/// have is refused by name, with what to use instead.
fn uses_lanefs(args: &[String]) -> Result<bool> {
    let named = apis_named(args);
    if let Some(other) = named.iter().find(|api| Api::parse(api).is_none()) {
        let instead = match other.to_ascii_uppercase().as_str() {
            "HDF5" | "NCMPI" | "PNETCDF" | "ADIOS" => {
                " (run the HDF5 or PnetCDF program itself, or IOR's own ior, on a lanefs mount: \
                 `lanefs mount DIR`, then IOR's `-a HDF5 -o DIR/file`)"
            }
            "MMAP" | "AIO" | "DUMMY" | "RADOS" | "S3" | "DAOS" | "DFS" | "CEPHFS" | "GFARM" => {
                " (IOR's own ior runs it on a lanefs mount: `lanefs mount DIR`)"
            }
            _ => "",
        };
        bail!("invalid option -a {other}: lanefs ior has {}{instead}", Api::names());
    }
    Ok(named.iter().filter_map(|api| Api::parse(api)).any(Api::needs_cluster))
}

/// `lanefs ior ARGS`: exit code as IOR's (1 when data checks failed).
pub fn main(mut args: Vec<String>, mds: Option<String>, key: Option<PathBuf>) -> Result<()> {
    let cluster = take(&mut args, "--cluster", "127.0.0.1:9400")?.or(mds);
    let key = take(&mut args, "--key", "/tmp/lanefs/keys/client.pem")?.map(PathBuf::from).or(key);
    let timeseries = take_timeseries(&mut args)?;
    let posix = PosixBackend;
    let mut out = std::io::stdout();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Ok(out.write_all(usage().as_bytes())?);
    }
    if job::under_mpirun() {
        return job::run(args, cluster, key, timeseries, start_embedded);
    }
    let code = if uses_lanefs(&args)? {
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
        run(&args, &[&posix, &lanefs, &mpiio], &mut out, timeseries.as_ref())?
    } else {
        run(&args, &[&posix], &mut out, timeseries.as_ref())?
    };
    if code != 0 {
        bail!("IOR found incorrect data (exit code {code})");
    }
    Ok(())
}

/// IOR's run on the backend `args` name, with its time series written to
/// the file `timeseries` names; IOR's exit code.
fn run(
    args: &[String],
    backends: &[&dyn lanefs_ior::Backend],
    out: &mut dyn Write,
    timeseries: Option<&(PathBuf, f64)>,
) -> Result<i32> {
    let mut params = lanefs_ior::parse_args(args)?;
    params.timeseries_interval_s = timeseries.map_or(0.0, |(_, interval)| *interval);
    let backend = lanefs_ior::select_backend(&params.api, backends)?;
    let summary = lanefs_ior::run(&params, backend, out)?;
    if let (Some((path, _)), Some(series)) = (timeseries, &summary.timeseries) {
        series.write_file(path).map_err(anyhow::Error::msg)?;
    }
    Ok(if summary.passed() { 0 } else { 1 })
}

/// The file system an `mpirun` job starts on its rank 0 when no
/// `--cluster` names one: an embedded cluster of `osts` OSTs.
fn start_embedded(osts: u32) -> Result<(String, Box<dyn std::any::Any>)> {
    let started = LocalCluster::start(LocalClusterConfig { osts, ..Default::default() })?;
    Ok((started.mds_address(), Box::new(started)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_apis_of_the_command_line_and_of_a_script_are_seen() {
        assert!(uses_lanefs(&args("-a LANEFS -w")).unwrap());
        assert!(uses_lanefs(&args("-w --api=mpiio")).unwrap());
        assert!(!uses_lanefs(&args("-w -aPOSIX")).unwrap());
        let script = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(script.path(), "IOR START\n  api = LANEFS # lanefs's own\n  RUN\nIOR STOP\n").unwrap();
        let path = script.path().to_str().unwrap();
        assert!(uses_lanefs(&args(&format!("-f {path}"))).unwrap());
        assert!(uses_lanefs(&args(&format!("--scriptFile={path}"))).unwrap());
        let refused = uses_lanefs(&args("-a HDF5")).unwrap_err().to_string();
        assert!(refused.starts_with("invalid option -a HDF5: lanefs ior has POSIX, LANEFS, MPIIO (run the HDF5"));
        assert!(uses_lanefs(&args("-a NOSUCH")).unwrap_err().to_string().ends_with("has POSIX, LANEFS, MPIIO"));
    }
}
