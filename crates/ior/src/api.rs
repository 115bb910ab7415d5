//! The APIs `-a` selects, in one table: what each is called, whether a
//! run of it needs a lanefs cluster, and whether `lanefs sim ior` models
//! it. The backends take their names from here, and every place that
//! decides by API matches on [`Api`], so that a new one is placed by hand
//! wherever it matters.
//!
//! IOR keeps its backends in one table too (`aiori.c`'s `available_aiori`);
//! lanefs has two of IOR's (`POSIX`, `MPIIO`) and one of its own
//! (`LANEFS`, the client library called directly).

/// An API of `lanefs ior` (`-a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Api {
    /// POSIX calls on a path (a lanefs mount, or any file system).
    Posix,
    /// The lanefs client library, each rank a client of its own.
    Lanefs,
    /// MPI-IO on lanefs: independent, or two-phase collective with `-c`.
    Mpiio,
}

impl Api {
    pub const ALL: [Api; 3] = [Api::Posix, Api::Lanefs, Api::Mpiio];

    /// The name `-a` takes (in any case) and the report prints.
    pub const fn name(self) -> &'static str {
        match self {
            Api::Posix => "POSIX",
            Api::Lanefs => "LANEFS",
            Api::Mpiio => "MPIIO",
        }
    }

    /// The API `name` selects, in any case.
    pub fn parse(name: &str) -> Option<Api> {
        Api::ALL.into_iter().find(|api| api.name().eq_ignore_ascii_case(name))
    }

    /// Whether a run of it needs a lanefs cluster (one named, or an
    /// embedded one).
    pub const fn needs_cluster(self) -> bool {
        match self {
            Api::Posix => false,
            Api::Lanefs | Api::Mpiio => true,
        }
    }

    /// Whether `lanefs sim ior` simulates it: every API. `-a LANEFS` is the
    /// client library called directly; `-a POSIX` is the same, or through
    /// the mount where the cluster description has a `[mount]` section.
    pub const fn simulated(self) -> bool {
        match self {
            Api::Posix | Api::Lanefs | Api::Mpiio => true,
        }
    }

    /// Every name, for messages: "POSIX, LANEFS, MPIIO".
    pub fn names() -> String {
        Api::ALL.map(Api::name).join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_in_any_case() {
        for api in Api::ALL {
            assert_eq!(Api::parse(api.name()), Some(api));
            assert_eq!(Api::parse(&api.name().to_ascii_lowercase()), Some(api));
        }
        assert_eq!(Api::parse("HDF5"), None);
        assert_eq!(Api::names(), "POSIX, LANEFS, MPIIO");
    }
}
