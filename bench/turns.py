#!/usr/bin/env python3
"""Times lanefs builds in turns on scenario (a) of bench/sim.py.

    python3 bench/turns.py [--runs N] [--mode 0|2] LANEFS_BINARY...

Each round runs scenario (a)'s command (`lanefs sim ior`, 192 nodes x 4
ranks, 8 aggregators per OST, lock mode MODE) once with every binary, so
that all of them see the same machine; after RUNS rounds it prints, per
binary, the median and the best of the run's own `sim.events_per_s`. The
builds must agree on the run (bandwidth and events): otherwise they are not
timing the same work, and it stops.
"""
import argparse, statistics, sys

from sim import COLL, hints, run


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15, help="rounds (default 15)")
    p.add_argument("--mode", choices=["0", "2"], default="0",
                   help="cray_cb_write_lock_mode: 0 default locking (the default), 2 lockahead")
    p.add_argument("binaries", nargs="+", metavar="LANEFS_BINARY")
    a = p.parse_args()
    if a.runs < 1:
        p.error("--runs must be at least 1")
    args = COLL + ["--hints", hints(8, int(a.mode))]
    speeds = {b: [] for b in a.binaries}
    first = None
    for _ in range(a.runs):
        for b in a.binaries:
            r = run(args, b)
            if first is None:
                first = r
            elif (r["bw"], r["events"]) != (first["bw"], first["events"]):
                sys.exit(f"{b} gives {r['bw']} MiB/s in {r['events']} events, "
                         f"{a.binaries[0]} {first['bw']} in {first['events']}: not the same run")
            speeds[b].append(r["events_per_s"])
    print(f"scenario (a), lock mode {a.mode}, {first['events']} events, {a.runs} runs of each in turns:")
    for b, v in speeds.items():
        print(f"  {b:<40} {statistics.median(v) / 1e6:.2f} M events/s median, {max(v) / 1e6:.2f} M best")
    print(f"command: {first['cmd']}")


if __name__ == "__main__":
    main()
