//! What the test binaries that start `mpirun` share: a session directory
//! base of its own for each mpirun. Open MPI 4 makes `ompi.HOST.UID` under
//! its base, and two mpiruns that start at once can race to make it ("A
//! call to mkdir was unable to create the desired directory ... File
//! exists", and `orte_init` fails). Included with `#[path]` (no crate of
//! its own for one function); set as `OMPI_MCA_orte_tmpdir_base`.

/// A new directory under the test's target directory.
pub fn base() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ompi-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a session directory for mpirun");
    dir
}
