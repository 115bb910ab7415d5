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
rank's 4 MiB segments (IOR's -s; default 32). IOR_ARGS, if set, are the
run's geometry and striping instead (everything but `-a LANEFS`, the JSON
output and the lock mode), e.g. `IOR_ARGS="-w -e -b 4m -t 64k -s 16 -N 4
--lanefs.osts=2 --lanefs.stripe-count=2 --lanefs.stripe-size=1m"`.

DROP_CACHES=1 (as root) drops the page cache before every run, and in a VM
that hands freed memory back to its host keeps freed pages and writes and
frees new memory after each drop, as bench/fidelity.py does, so that each
run finds the machine as a real run of bench/fidelity.py does.

Besides each build's median it prints the range of its rounds' own ratios
to the first build's (each round's builds ran one after the other): on a
noisy machine a difference inside that range is not one.
"""
import json, os, shlex, statistics, subprocess, sys, tempfile

import fidelity

SEGMENTS = os.environ.get("SEGMENTS", "32")
GEOMETRY = ["-w", "-e", "-b", "4m", "-t", "1m", "-s", SEGMENTS, "-N", "8"]
STRIPES = ["--lanefs.osts=4", "--lanefs.stripe-count=4", "--lanefs.stripe-size=1m"]
IOR_ARGS = shlex.split(os.environ["IOR_ARGS"]) if os.environ.get("IOR_ARGS") else GEOMETRY + STRIPES
DROP_CACHES = os.environ.get("DROP_CACHES") == "1"


def write_bw(binary, extra, mode, data_dir):
    with tempfile.TemporaryDirectory(prefix="lanefs-ab-", dir=data_dir) as d:
        args = [binary, "ior", "-a", "LANEFS"] + IOR_ARGS + ["-O", "summaryFormat=JSON", f"--lanefs.lock-mode={mode}"]
        args += extra
        env = dict(os.environ, TMPDIR=d)  # the embedded cluster's data directory
        if DROP_CACHES:
            fidelity.drop_caches()
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
    if DROP_CACHES and os.geteuid() != 0:
        sys.exit("DROP_CACHES=1 needs root (it writes /proc/sys/vm/drop_caches)")
    fidelity.DROP = DROP_CACHES
    results = {name: [] for name, _, _ in builds}
    # Without DROP_CACHES it changes nothing and yields None.
    with fidelity.freed_memory_kept() as kept:
        if kept:
            print(f"({kept})", file=sys.stderr)
        for r in range(rounds):
            for name, binary, extra in builds if r % 2 == 0 else builds[::-1]:
                results[name].append(write_bw(binary, extra, mode, data_dir))
    print(f"lanefs ior -a LANEFS {shlex.join(IOR_ARGS)} --lanefs.lock-mode={mode}, {rounds} rounds")
    base = results[builds[0][0]]
    for name, _, _ in builds:
        median = statistics.median(results[name])
        runs = " ".join(f"{x:.0f}" for x in results[name])
        ratios = [x / y for x, y in zip(results[name], base)]
        print(f"{mode:10} {name:12} median {median:8.1f} MiB/s  {median / statistics.median(base):.3f}x "
              f"(rounds {min(ratios):.2f} to {max(ratios):.2f})  ({runs})")


if __name__ == "__main__":
    main()
