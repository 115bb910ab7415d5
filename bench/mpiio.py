#!/usr/bin/env python3
"""Collective MPI-IO under mpirun: lanefs's own MPI-IO layer in each of
Cray's lock modes, beside independent writes to one shared file, file per
process, and Open MPI's own MPI-IO (OMPIO and ROMIO) writing the same
pattern through a lanefs mount.

Starts `lanefs up --osts 4` on the disk under the system's temporary
directory (BENCH_DIR to choose), mounts it, and alternates, round by round
(every lanefs case is `mpirun -np 8 lanefs ior -a MPIIO -w ...`):

  collective lockahead   -c, cray_cb_write_lock_mode=2
  collective default     -c, cray_cb_write_lock_mode=0 (expanding locks)
  collective group lock  -c, cray_cb_write_lock_mode=1
  independent shared     no -c: every rank writes its own blocks of the
                         shared file, with expanding locks
  file per process       -F, each rank's file on one OST
  ompio (mount)          mpirun -np 8 --mca io ompio c/mpiio_write, each
                         transfer an MPI_File_write_at_all through the mount
  romio (mount)          the same with --mca io romio321

The collective cases ask for two aggregators per OST
(cray_cb_nodes_multiplier=2, 8 aggregators for 4 OSTs), the layout under
which aggregators contend for an OST's lock and lockahead is meant to help.
The shared file is striped over the 4 OSTs in 1 MiB stripes; 8 ranks each
write 64 segments of a 1 MiB block (IOR's -b 1m -t 1m -s 64: every
collective call covers 8 consecutive stripes, one per aggregator; 512
MiB), synced and closed inside the timed write; every run then reads its
data back and checks it. The disk is synced and the page cache dropped
before each run. Prints each case's median write bandwidth and the ratios
the targets are set on, and with TIMERS=1 the MPICH_MPIIO_TIMERS block of
each collective case's last run.

Needs root (to mount and drop caches), mpirun, and a lanefs built with MPI
(`make build`); builds c/mpiio_write with mpicc.

COMMIT_MS=8.3 makes every OST commit take at least that long (`lanefs up
--emulate-commit-ms`), as on the 7200 rpm drives of the published systems,
whose journal commit a lock handover waits for; by default commits take
what this machine's disk takes.

  bench/mpiio.py [LANEFS]        ROUNDS (default 3), RANKS (default 8), BENCH_DIR, TIMERS,
                                 CASES (names or parts of names, comma-separated), COMMIT_MS,
                                 SEGMENTS (each rank's 1 MiB blocks, default 64)
"""
import json, os, statistics, subprocess, sys, tempfile

from lanefs_up import mounted, settle

ROUNDS = int(os.environ.get("ROUNDS", "3"))
COMMIT_MS = os.environ.get("COMMIT_MS", "0")
TIMERS = os.environ.get("TIMERS") == "1"
RANKS = os.environ.get("RANKS", "8")
BLOCK_MIB, TRANSFER_KIB, SEGMENTS = 1, 1024, int(os.environ.get("SEGMENTS", "64"))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", RANKS]


def run(args, env):
    settle()
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"bench/mpiio.py: {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout, done.stderr


def lanefs_case(lanefs, mds, name, flags, hints):
    """One `lanefs ior -a MPIIO` run; returns its write bandwidth and, with
    the timers asked for, the MPICH_MPIIO_TIMERS block it printed."""
    env = dict(os.environ, LANEFS_MDS=mds, MPICH_MPIIO_HINTS=f"*:{hints}")
    if TIMERS:
        env["MPICH_MPIIO_TIMERS"] = "1"
    ior = [lanefs, "ior", "-a", "MPIIO", *flags, "-w", "-r", "-R", "-e", "-b", f"{BLOCK_MIB}m", "-t",
           f"{TRANSFER_KIB}k", "-s", str(SEGMENTS), "-o", f"/{name}", "-O", "summaryFormat=JSON"]
    out, err = run(MPIRUN + ior, env)
    summary = json.loads(out)["summary"]
    timers = "\n".join(line for line in err.splitlines() if line.startswith("|"))
    return next(s["bwMeanMIB"] for s in summary if s["operation"] == "write"), timers


def mpi_case(component, path, env):
    out, _ = run(MPIRUN + ["--mca", "io", component, "c/mpiio_write", path, str(BLOCK_MIB), str(TRANSFER_KIB),
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
    results, timers = {}, {}
    shared = "striping_factor=4:striping_unit=1048576"
    collective = f"{shared}:cray_cb_nodes_multiplier=2:cray_cb_write_lock_mode="
    lanefs_cases = [
        ("collective lockahead", ["-c"], collective + "2"),
        ("collective default", ["-c"], collective + "0"),
        ("collective group lock", ["-c"], collective + "1"),
        ("independent shared", [], shared),
        ("file per process", ["-F"], "striping_factor=1:striping_unit=1048576"),
    ]
    up_args = ["--emulate-commit-ms", COMMIT_MS]
    if float(COMMIT_MS) > 0:
        print(f"every OST commit takes at least {COMMIT_MS} ms (lanefs up --emulate-commit-ms)")
    with mounted(lanefs, place, "lanefs-mpiio-bench-", up_args=up_args) as (mds, mountpoint, env):
        subprocess.run([lanefs, "setstripe", "-c", "4", "-S", "1m", "/"], check=True, env=env)

        def lanefs_run(name, flags, hints):
            def case(r):
                bw, printed = lanefs_case(lanefs, mds, f"{name.replace(' ', '-')}{r}", flags, hints)
                timers[name] = printed
                return bw
            return name, case

        cases = [lanefs_run(*case) for case in lanefs_cases] + [
            ("ompio (mount)", lambda r: mpi_case("ompio", f"{mountpoint}/ompio{r}", env)),
            ("romio (mount)", lambda r: mpi_case("romio321", f"{mountpoint}/romio{r}", env)),
        ]
        if os.environ.get("CASES"):
            wanted = os.environ["CASES"].split(",")
            cases = [(name, case) for name, case in cases if any(w in name for w in wanted)]
        for r in range(ROUNDS):
            for name, case in (cases if r % 2 == 0 else cases[::-1]):
                bw = case(r)
                results.setdefault(name, []).append(bw)
                print(f"round {r + 1}: {name:22} write {bw:7.0f} MiB/s", file=sys.stderr)
    mib = BLOCK_MIB * SEGMENTS * int(RANKS)
    print(f"MPI-IO writes, {RANKS} ranks under mpirun, {mib} MiB over 4 OSTs (1 MiB stripes) on "
          f"{place}, {ROUNDS} rounds, median MiB/s")
    medians = {name: statistics.median(bws) for name, bws in results.items()}
    for name, bws in results.items():
        print(f"  {name:22} {medians[name]:8.1f}   ({' '.join(f'{b:.0f}' for b in bws)})")
    lockahead = medians.get("collective lockahead")
    for other, target in [("file per process", 0.8), ("collective default", 1.5), ("collective group lock", None),
                          ("independent shared", None), ("ompio (mount)", None)]:
        if lockahead is None or other not in medians:
            continue
        goal = f"   (target at least {target}x)" if target else ""
        print(f"  collective lockahead / {other + ':':22} {lockahead / medians[other]:.2f}x{goal}")
    for name, block in timers.items():
        if block:
            print(f"\n{name}, last run:\n{block}")

if __name__ == "__main__":
    main()
