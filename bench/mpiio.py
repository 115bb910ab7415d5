#!/usr/bin/env python3
"""Collective MPI-IO under mpirun: lanefs's own MPI-IO layer against Open
MPI's (OMPIO and ROMIO) writing the same pattern through a lanefs mount.

Starts `lanefs up --osts 4` on the disk under the system's temporary
directory (BENCH_DIR to choose), mounts it, and alternates, round by round:

  lanefs default     mpirun -np 8 lanefs ior -a MPIIO -c -w -e ... with
                     cray_cb_write_lock_mode=0 (expanding locks)
  lanefs lockahead   the same with cray_cb_write_lock_mode=2
  ompio (mount)      mpirun -np 8 --mca io ompio c/mpiio_write, each
                     transfer an MPI_File_write_at_all through the mount
  romio (mount)      the same with --mca io romio321

One shared file striped over the 4 OSTs in 1 MiB stripes, 8 ranks, each
writing 64 segments of a 1 MiB block (IOR's -b 1m -t 1m -s 64: every
collective call covers 8 consecutive stripes, so all 4 aggregators write
in it; 512 MiB), synced and closed inside the timed write; every run then
reads its data back and checks it. The disk is synced and the page cache dropped before each run.
Prints each case's median write bandwidth, and lockahead / default.

Needs root (to mount and drop caches), mpirun, and a lanefs built with MPI
(`make build`); builds c/mpiio_write with mpicc.

  bench/mpiio.py [LANEFS]        ROUNDS (default 3), BENCH_DIR
"""
import json, os, statistics, subprocess, sys, tempfile

from lanefs_up import mounted, settle

ROUNDS = int(os.environ.get("ROUNDS", "3"))
RANKS = "8"
BLOCK_MIB, TRANSFER_KIB, SEGMENTS = 1, 1024, 64
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", RANKS]


def run(args, env):
    settle()
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"bench/mpiio.py: {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def lanefs_case(lanefs, mds, mode, name):
    hints = f"*:striping_factor=4:striping_unit=1048576:cray_cb_write_lock_mode={mode}"
    env = dict(os.environ, LANEFS_MDS=mds, MPICH_MPIIO_HINTS=hints)
    ior = [lanefs, "ior", "-a", "MPIIO", "-c", "-w", "-r", "-R", "-e", "-b", f"{BLOCK_MIB}m", "-t",
           f"{TRANSFER_KIB}k", "-s", str(SEGMENTS), "-o", f"/{name}", "-O", "summaryFormat=JSON"]
    out = run(MPIRUN + ior, env)
    summary = json.loads(out)["summary"]
    return next(s["bwMeanMIB"] for s in summary if s["operation"] == "write")


def mpi_case(component, path, env):
    out = run(MPIRUN + ["--mca", "io", component, "c/mpiio_write", path, str(BLOCK_MIB), str(TRANSFER_KIB),
                        str(SEGMENTS)], env)
    result = json.loads(out.strip().splitlines()[-1])
    if not result["verified"]:
        sys.exit(f"bench/mpiio.py: {component} read back wrong data")
    return result["write_mib_s"]


def main():
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True,
                          text=True).stdout.strip()
    os.chdir(root)
    lanefs = sys.argv[1] if len(sys.argv) > 1 else "target/release/lanefs"
    subprocess.run(["make", "-s", "-C", "c", "mpiio_write"], check=True)
    place = os.environ.get("BENCH_DIR", tempfile.gettempdir())
    results = {}
    with mounted(lanefs, place, "lanefs-mpiio-bench-") as (mds, mountpoint, env):
        subprocess.run([lanefs, "setstripe", "-c", "4", "-S", "1m", "/"], check=True, env=env)
        cases = [
            ("lanefs default", lambda r: lanefs_case(lanefs, mds, 0, f"default{r}")),
            ("lanefs lockahead", lambda r: lanefs_case(lanefs, mds, 2, f"lockahead{r}")),
            ("ompio (mount)", lambda r: mpi_case("ompio", f"{mountpoint}/ompio{r}", env)),
            ("romio (mount)", lambda r: mpi_case("romio321", f"{mountpoint}/romio{r}", env)),
        ]
        for r in range(ROUNDS):
            for name, case in (cases if r % 2 == 0 else cases[::-1]):
                bw = case(r)
                results.setdefault(name, []).append(bw)
                print(f"round {r + 1}: {name:17} write {bw:7.0f} MiB/s", file=sys.stderr)
    mib = BLOCK_MIB * SEGMENTS * int(RANKS)
    print(f"collective writes, {RANKS} ranks under mpirun, one file of {mib} MiB over 4 OSTs (1 MiB stripes) on "
          f"{place}, {ROUNDS} rounds, median MiB/s")
    medians = {name: statistics.median(bws) for name, bws in results.items()}
    for name, bws in results.items():
        print(f"  {name:17} {medians[name]:8.1f}   ({' '.join(f'{b:.0f}' for b in bws)})")
    print(f"  lanefs lockahead / lanefs default: {medians['lanefs lockahead'] / medians['lanefs default']:.2f}x")
    print(f"  lanefs lockahead / ompio (mount):  {medians['lanefs lockahead'] / medians['ompio (mount)']:.2f}x")


if __name__ == "__main__":
    main()
