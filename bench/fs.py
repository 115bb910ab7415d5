#!/usr/bin/env python3
"""Shared file vs file per process on a real embedded lanefs cluster.

8 ranks (each its own client), 4 OSTs, IOR segmented 1 MiB transfers;
every mode and the local-file ceiling are run in turn, several rounds,
interleaved so that machine noise hits them alike; medians and the ratios
that matter are printed. Run by `make bench`.
"""
import json, os, statistics, subprocess, sys, tempfile

LANEFS = os.environ.get("LANEFS", "./target/release/lanefs")
# Object files and the ceiling's files both go to tmpfs when there is one:
# 2 GiB per run on a real disk brings the kernel's writeback of earlier runs
# into later ones (seen here: the same run at 300 and 900 MiB/s). Set
# BENCH_DIR to measure on a disk instead.
BENCH_DIR = os.environ.get("BENCH_DIR", "/dev/shm" if os.path.isdir("/dev/shm") else None)
ROUNDS = int(os.environ.get("ROUNDS", "3"))
# RANKS=processes runs every lanefs rank's client in a process of its own
# (--lanefs.ranks=processes), as under mpirun; the default is threads.
RANKS = os.environ.get("RANKS", "threads")
# CLIENT adds client tunables to every lanefs run, e.g.
# CLIENT="--lanefs.max-cached-mb=8 --lanefs.max-dirty-mb=8".
CLIENT = os.environ.get("CLIENT", "").split()
# ITERS=N repeats each test N times in one process (IOR's -i): the clients,
# and their page memory, are reused, as a mounted client's would be; the
# figure is then the mean of the last N-1 iterations (the warm ones).
ITERS = int(os.environ.get("ITERS", "1"))
# SEGMENTS=N makes each rank write N segments of 4 MiB (IOR's -s; default
# 64: 2 GiB a run).
SEGMENTS = os.environ.get("SEGMENTS", "64")
GEOMETRY = ["-w", "-e", "-b", "4m", "-t", "1m", "-s", SEGMENTS, "-N", "8", "-O", "summaryFormat=JSON", "-i", str(ITERS)]
STRIPES = ["--lanefs.osts=4", "--lanefs.stripe-count=4", "--lanefs.stripe-size=1m", f"--lanefs.ranks={RANKS}"] + CLIENT

RUNS = {
    "ssf-default": ["-a", "LANEFS", "--lanefs.lock-mode=default"] + STRIPES,
    "ssf-noexpand": ["-a", "LANEFS", "--lanefs.lock-mode=noexpand"] + STRIPES,
    "ssf-lockahead": ["-a", "LANEFS", "--lanefs.lock-mode=lockahead"] + STRIPES,
    "ssf-group": ["-a", "LANEFS", "--lanefs.lock-mode=group"] + STRIPES,
    "fpp": ["-a", "LANEFS", "-F"] + STRIPES,
    "local-files": ["-a", "POSIX", "-F"],
}


def run(name, extra):
    with tempfile.TemporaryDirectory(prefix="lanefs-bench-", dir=BENCH_DIR) as d:
        args = [LANEFS, "ior"] + GEOMETRY + extra
        if name == "local-files":
            args += ["-o", os.path.join(d, "testFile")]
        env = dict(os.environ, TMPDIR=d)  # the embedded cluster's data directory
        out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    report = json.loads(out)
    if ITERS > 1:
        results = report["tests"][0]["Results"]
        flat = [r for x in results for r in (x if isinstance(x, list) else [x])]
        warm = [r["bwMiB"] for r in flat if r["access"] == "write"][1:]
        bw = statistics.mean(warm)
    else:
        bw = report["summary"][0]["bwMeanMIB"]
    locks = report.get("lanefs", {})
    return bw, locks.get("blocking_callbacks", 0)


def main():
    results = {name: [] for name in RUNS}
    callbacks = {}
    for r in range(ROUNDS):
        for name, extra in RUNS.items():
            bw, cb = run(name, extra)
            results[name].append(bw)
            callbacks[name] = cb
            print(f"round {r + 1}: {name:<14} {bw:9.1f} MiB/s  callbacks {cb}", file=sys.stderr)
    med = {name: statistics.median(v) for name, v in results.items()}
    which = "mean of the warm iterations" if ITERS > 1 else "one iteration"
    print(f"lanefs ior {' '.join(GEOMETRY)} (+ per-run options), ranks as {RANKS}, {' '.join(CLIENT) or 'default client settings'}, {ROUNDS} rounds, median write MiB/s ({which}), data in {BENCH_DIR or 'the temp dir'}")
    for name in RUNS:
        runs = " ".join(f"{x:.0f}" for x in results[name])
        print(f"  {name:<14} {med[name]:9.1f}   (runs: {runs}; blocking callbacks in the last: {callbacks[name]})")
    ratios = [
        ("ssf-lockahead / fpp", med["ssf-lockahead"] / med["fpp"], 0.9),
        ("ssf-lockahead / ssf-default", med["ssf-lockahead"] / med["ssf-default"], 2.0),
        ("fpp / local-files", med["fpp"] / med["local-files"], 0.6),
    ]
    for label, value, target in ratios:
        verdict = "meets" if value >= target else "BELOW"
        print(f"  {label:<28} {value:5.2f}x   target >= {target}x: {verdict}")


if __name__ == "__main__":
    main()
