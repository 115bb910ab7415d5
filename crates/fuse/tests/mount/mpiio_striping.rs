//! MPI-IO striping hints for an unmodified MPI program on a mount: with
//! `c/liblanefs-mpiio-striping.so` preloaded, `MPI_File_open` with
//! `striping_factor` and `striping_unit` makes a file with that layout;
//! hints that cannot be applied are said on stderr.

use super::mounted;
use lanefs_client::{Client, ClientOptions};
use std::path::Path;
use std::process::Command;

/// The program: opens FILE with the hints given as KEY=VALUE arguments,
/// writes 4 bytes per rank, closes.
const PROGRAM: &str = r#"
#include <mpi.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Info info;
    MPI_Info_create(&info);
    for (int i = 2; i < argc; i++) {
        char key[64];
        const char *eq = strchr(argv[i], '=');
        memcpy(key, argv[i], (size_t)(eq - argv[i]));
        key[eq - argv[i]] = '\0';
        MPI_Info_set(info, key, eq + 1);
    }
    MPI_File f;
    if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &f) != MPI_SUCCESS)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_File_write_at(f, rank * 4, "data", 4, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&f);
    MPI_Info_free(&info);
    MPI_Finalize();
    return 0;
}
"#;

fn build(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let (shim, program) = (dir.join("liblanefs-mpiio-striping.so"), dir.join("open_striped"));
    let built = Command::new("mpicc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror"])
        .arg(format!("-I{root}/include"))
        .arg(format!("{root}/c/lanefs_mpiio_striping.c"))
        .arg("-o")
        .arg(&shim)
        .status();
    assert!(built.is_ok_and(|s| s.success()), "mpicc builds the library (make test installs Open MPI)");
    std::fs::write(dir.join("open_striped.c"), PROGRAM).unwrap();
    let built = Command::new("mpicc").arg(dir.join("open_striped.c")).arg("-o").arg(&program).status();
    assert!(built.is_ok_and(|s| s.success()));
    (shim, program)
}

fn run(program: &Path, shim: Option<&Path>, file: &Path, hints: &[&str]) -> String {
    run_with(&[], program, shim, file, hints)
}

/// `run`, with mpirun's `extra` options first.
fn run_with(extra: &[&str], program: &Path, shim: Option<&Path>, file: &Path, hints: &[&str]) -> String {
    let mut mpirun = Command::new("mpirun");
    mpirun.args(["--allow-run-as-root", "--oversubscribe", "-np", "2"]).args(extra);
    mpirun.env("OMPI_MCA_orte_tmpdir_base", crate::mpirun_session::base());
    if let Some(shim) = shim {
        mpirun.arg("-x").arg(format!("LD_PRELOAD={}", shim.display()));
    }
    let out = mpirun.arg(program).arg(file).args(hints).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{} {hints:?}: {said}", file.display());
    said
}

/// `(stripe count, stripe size)` of lanefs path `path`.
fn layout(client: &Client, path: &str) -> (u32, u64) {
    let lanefs_proto::MdsReply::Stripe(info) =
        client.mds(lanefs_proto::MdsRequest::GetStripe { path: path.into() }).unwrap()
    else {
        panic!("getstripe answers a stripe")
    };
    let layout = info.layout.expect("a file");
    (layout.stripe_count(), layout.stripe_size())
}

#[test]
fn an_unmodified_mpi_program_gets_the_striping_its_hints_ask_for() {
    let Some(m) = mounted(1) else { return };
    let tools = tempfile::tempdir().unwrap();
    let (shim, program) = build(tools.path());
    let client = Client::connect(&m.cluster.mds_address(), ClientOptions::default()).unwrap();

    let hints = ["striping_factor=2", "striping_unit=131072"];
    run(&program, Some(&shim), &m.at(0, "striped"), &hints);
    assert_eq!(layout(&client, "/striped"), (2, 131072), "the hints' layout");
    assert_eq!(std::fs::read(m.at(0, "striped")).unwrap(), b"datadata", "both ranks wrote");
    // Through ROMIO too, whose prefix names the file system, not a directory.
    let prefixed = format!("ufs:{}", m.at(0, "prefixed").display());
    run_with(&["--mca", "io", "romio321"], &program, Some(&shim), Path::new(&prefixed), &hints);
    assert_eq!(layout(&client, "/prefixed"), (2, 131072));
    // An existing file keeps its layout, as on Lustre.
    run(&program, Some(&shim), &m.at(0, "striped"), &["striping_factor=1"]);
    assert_eq!(layout(&client, "/striped"), (2, 131072));
    // Without the library the MPI library's own driver ignores them.
    run(&program, None, &m.at(0, "plain"), &hints);
    assert_eq!(layout(&client, "/plain").0, 1, "the default: one stripe");
    // Hints the file system cannot take are said, and the file is made.
    let said = run(&program, Some(&shim), &m.at(0, "too_wide"), &["striping_factor=5"]);
    assert!(said.contains("lanefs: MPI-IO striping hints for") && said.contains("not applied"), "{said}");
    assert_eq!(layout(&client, "/too_wide").0, 1);
}
