#!/usr/bin/env python3
"""What recording a time series costs a real run: `lanefs ior` with and
without `--timeseries`, side by side.

Each round runs both, in turns (the order reversed every other round), on
an embedded cluster whose OSTs are in a new directory under BENCH_DIR (by
default this machine's disk, /var/tmp), with the page cache dropped before
each run when run as root:

  lanefs ior -a LANEFS -w -e -b 1m -t 1m -s SEGMENTS -N 8 --lanefs.osts=4
    --lanefs.stripe-count=4 --lanefs.stripe-size=1m --lanefs.lock-mode=MODE
    [--timeseries FILE --timeseries-interval 0.1]

It prints each round's bandwidths and their ratio (recorded over plain),
and the median and range of the ratios, per lock mode.

  python3 bench/timeseries.py [LANEFS]      (default target/release/lanefs)

ROUNDS (default 7), SEGMENTS (default 128), MODES (default
"default lockahead"), BENCH_DIR.
"""
import json, os, statistics, subprocess, sys, tempfile

ROUNDS = int(os.environ.get("ROUNDS", "7"))
SEGMENTS = os.environ.get("SEGMENTS", "128")
MODES = os.environ.get("MODES", "default lockahead").split()
BENCH_DIR = os.environ.get("BENCH_DIR", "/var/tmp")


def drop_caches():
    subprocess.run(["sync"], check=True)
    if os.geteuid() == 0:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def write_bw(lanefs, mode, recorded):
    with tempfile.TemporaryDirectory(prefix="lanefs-timeseries-", dir=BENCH_DIR) as d:
        args = [lanefs, "ior", "-a", "LANEFS", "-w", "-e", "-b", "1m", "-t", "1m", "-s", SEGMENTS, "-N", "8",
                "--lanefs.osts=4", "--lanefs.stripe-count=4", "--lanefs.stripe-size=1m",
                f"--lanefs.lock-mode={mode}", "-O", "summaryFormat=JSON"]
        series = os.path.join(d, "bw.jsonl")
        if recorded:
            args += ["--timeseries", series, "--timeseries-interval", "0.1"]
        drop_caches()
        out = subprocess.run(args, check=True, capture_output=True, text=True, env=dict(os.environ, TMPDIR=d)).stdout
        bw = next(s["bwMeanMIB"] for s in json.loads(out)["summary"] if s["operation"] == "write")
        if recorded:
            with open(series) as f:
                head = json.loads(f.readline())
                written = sum(sum(json.loads(line)["rank_write_bytes"]) for line in f)
            want = 8 * int(SEGMENTS) << 20
            if written != want or head["source"] != "real":
                sys.exit(f"the series holds {written} bytes written where IOR wrote {want}")
        return bw


def main():
    lanefs = sys.argv[1] if len(sys.argv) > 1 else "target/release/lanefs"
    print(f"# {lanefs}, {ROUNDS} rounds, -s {SEGMENTS}, OSTs under {BENCH_DIR}, caches dropped: {os.geteuid() == 0}")
    for mode in MODES:
        ratios = []
        for r in range(ROUNDS):
            order = [False, True] if r % 2 == 0 else [True, False]
            bw = {recorded: write_bw(lanefs, mode, recorded) for recorded in order}
            ratios.append(bw[True] / bw[False])
            print(f"{mode:10} round {r + 1}: plain {bw[False]:7.1f} MiB/s  recorded {bw[True]:7.1f} MiB/s  "
                  f"ratio {ratios[-1]:.3f}")
        print(f"{mode:10} recorded/plain: median {statistics.median(ratios):.3f}, "
              f"range {min(ratios):.3f} to {max(ratios):.3f} over {len(ratios)} rounds")


if __name__ == "__main__":
    main()
