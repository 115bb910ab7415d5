//! IOR's MPI-IO hints: `IOR_HINT__MPI__<key>=<value>` from the environment and the hints
//! file.
//!
//! What: [`mpi_hints`] gathers the hints IOR's `SetHints` (utilities.c) passes to
//! `MPI_File_open`: every environment variable starting with `IOR_HINT`, then every line
//! of `--mpiio.hintsFileName` that starts with `IOR_HINT`. Each is
//! `IOR_HINT__MPI__<key>=<value>` or `IOR_HINT__GPFS__<key>=<value>`; the value ends at
//! the first blank, as IOR's `strtok` makes it. A later hint with the same key replaces
//! the earlier one in place, as `MPI_Info_set` does, so the order is the order in which
//! keys first appeared.
//!
//! Why a function of the environment rather than a parsed field: IOR reads the
//! environment when a file is opened; callers pass `std::env::vars()` (tests pass a
//! list), which keeps [`crate::parse_args`] free of hidden inputs.
//!
//! Differences from IOR, both deliberate: an `IOR_HINT` of another layer or without a
//! value is an error naming it (IOR prints a warning and drops it), and so is a hints
//! file that cannot be read (IOR warns and goes on).
//!
//! Not here: using the hints (a backend that models or implements MPI-IO) and
//! `--mpiio.showHints`, which that backend prints.

use crate::error::IorError;
use crate::params::IorParams;

/// Prefix of the hints IOR reads.
const HINT_PREFIX: &str = "IOR_HINT";
/// Layers IOR knows, with the prefix to strip.
const LAYER_PREFIXES: [&str; 2] = ["IOR_HINT__MPI__", "IOR_HINT__GPFS__"];

/// The MPI-IO hints of `p`, as `(key, value)` in `MPI_Info` order: `env` (the
/// environment, e.g. `std::env::vars()`) first, then `p.hints_file_name`.
pub fn mpi_hints(
    p: &IorParams,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Vec<(String, String)>, IorError> {
    let mut hints = Vec::new();
    for (name, value) in env.into_iter().filter(|(name, _)| name.starts_with(HINT_PREFIX)) {
        set(&mut hints, extract(&format!("{name}={value}"), &name)?);
    }
    if let Some(path) = &p.hints_file_name {
        let text = std::fs::read_to_string(path).map_err(|source| IorError::Io {
            backend: "IOR",
            op: "read hints file (--mpiio.hintsFileName)".to_string(),
            path: path.clone(),
            source,
        })?;
        for line in text.lines().filter(|line| line.starts_with(HINT_PREFIX)) {
            set(&mut hints, extract(line, &format!("{path}: {line}"))?);
        }
    }
    Ok(hints)
}

/// `MPI_Info_set`: replace in place, or append.
fn set(hints: &mut Vec<(String, String)>, (key, value): (String, String)) {
    match hints.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = value,
        None => hints.push((key, value)),
    }
}

/// IOR's `ExtractHint`: the setting up to the first blank or `=`, the value up to the
/// next blank or `=`; then the layer prefix stripped.
fn extract(hint: &str, shown: &str) -> Result<(String, String), IorError> {
    let mut tokens = hint.split([' ', '=', '\t', '\r', '\n']).filter(|token| !token.is_empty());
    let setting = tokens.next().unwrap_or_default();
    let Some(key) = LAYER_PREFIXES.iter().find_map(|prefix| setting.strip_prefix(prefix)).filter(|k| !k.is_empty())
    else {
        return Err(IorError::option(
            shown,
            "not a hint IOR can set; write IOR_HINT__MPI__<key>=<value> (or IOR_HINT__GPFS__<key>=<value>)",
        ));
    };
    let Some(value) = tokens.next() else {
        return Err(IorError::option(shown, format!("hint {key} has no value; write {setting}=<value>")));
    };
    Ok((key.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn environment_hints_become_mpi_info_pairs() {
        let p = IorParams::default();
        let hints = mpi_hints(
            &p,
            env(&[
                ("PATH", "/bin"),
                ("IOR_HINT__MPI__striping_factor", "8"),
                ("IOR_HINT__GPFS__important_hint", "true"),
                ("IOR_HINT__MPI__romio_cb_write", "enable now"),
            ]),
        )
        .unwrap();
        let expected = [("striping_factor", "8"), ("important_hint", "true"), ("romio_cb_write", "enable")];
        assert_eq!(hints, expected.map(|(k, v)| (k.to_string(), v.to_string())));
        assert!(mpi_hints(&p, env(&[("IOR_HINT__HDF5__x", "1")])).unwrap_err().to_string().contains("IOR_HINT__MPI__"));
        assert!(mpi_hints(&p, env(&[("IOR_HINT__MPI__x", "")])).unwrap_err().to_string().contains("has no value"));
    }

    #[test]
    fn the_hints_file_follows_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hints");
        std::fs::write(&path, "# striping\nIOR_HINT__MPI__striping_factor=4\nIOR_HINT__MPI__cb_nodes = 2\n").unwrap();
        let p = IorParams { hints_file_name: Some(path.display().to_string()), ..IorParams::default() };
        let hints = mpi_hints(&p, env(&[("IOR_HINT__MPI__striping_factor", "8"), ("IOR_HINT__MPI__a", "b")])).unwrap();
        let expected = [("striping_factor", "4"), ("a", "b"), ("cb_nodes", "2")];
        assert_eq!(hints, expected.map(|(k, v)| (k.to_string(), v.to_string())));
        let missing = IorParams { hints_file_name: Some("/nonexistent/hints".into()), ..IorParams::default() };
        let e = mpi_hints(&missing, Vec::new()).unwrap_err().to_string();
        assert!(e.starts_with("IOR: read hints file (--mpiio.hintsFileName) /nonexistent/hints: "), "{e}");
    }
}
