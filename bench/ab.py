#!/usr/bin/env python3
"""Write bandwidth of several lanefs builds (or option sets), side by side.

Each round runs every build once on an embedded cluster (`lanefs ior -w -e
-b 4m -t 1m -s 32 -N 8 -a LANEFS --lanefs.osts=4 --lanefs.stripe-count=4
--lanefs.stripe-size=1m --lanefs.lock-mode=MODE`), the order reversed every
other round, so that machine noise hits all alike; it prints each build's
median write bandwidth and its ratio to the first build's.

  bench/ab.py ROUNDS MODE DATA_DIR NAME=BINARY[,EXTRA_ARG...] ...

DATA_DIR is where the clusters keep their data (`/dev/shm`, or a directory
on a disk). A build's extra arguments go to `lanefs ior`, e.g.
`u4=target/release/lanefs,--lanefs.max-unstable-mb=4`. BINARY may be a
script that sets an environment and runs a binary. SEGMENTS sets each
rank's 4 MiB segments (IOR's -s; default 32).
"""
import json, os, statistics, subprocess, sys, tempfile

SEGMENTS = os.environ.get("SEGMENTS", "32")
GEOMETRY = ["-w", "-e", "-b", "4m", "-t", "1m", "-s", SEGMENTS, "-N", "8", "-O", "summaryFormat=JSON"]
STRIPES = ["-a", "LANEFS", "--lanefs.osts=4", "--lanefs.stripe-count=4", "--lanefs.stripe-size=1m"]


def write_bw(binary, extra, mode, data_dir):
    with tempfile.TemporaryDirectory(prefix="lanefs-ab-", dir=data_dir) as d:
        args = [binary, "ior"] + GEOMETRY + STRIPES + [f"--lanefs.lock-mode={mode}"] + extra
        env = dict(os.environ, TMPDIR=d)  # the embedded cluster's data directory
        out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    return next(s["bwMeanMIB"] for s in json.loads(out)["summary"] if s["operation"] == "write")


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    rounds, mode, data_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    builds = []
    for spec in sys.argv[4:]:
        name, _, rest = spec.partition("=")
        if not rest:
            sys.exit(f"{spec}: give NAME=BINARY[,EXTRA_ARG...]")
        binary, *extra = rest.split(",")
        builds.append((name, binary, extra))
    results = {name: [] for name, _, _ in builds}
    for r in range(rounds):
        for name, binary, extra in builds if r % 2 == 0 else builds[::-1]:
            results[name].append(write_bw(binary, extra, mode, data_dir))
    first = statistics.median(results[builds[0][0]])
    for name, _, _ in builds:
        median = statistics.median(results[name])
        runs = " ".join(f"{x:.0f}" for x in results[name])
        print(f"{mode:10} {name:12} median {median:8.1f} MiB/s  {median / first:.3f}x  ({runs})")


if __name__ == "__main__":
    main()
