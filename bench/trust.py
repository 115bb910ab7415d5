#!/usr/bin/env python3
"""What trust costs: lanefs now against lanefs before authentication,
bounded resources, message checks, commits and replay, side by side.

Both binaries run the same IOR job on an embedded cluster (8 ranks, each its
own client, 4 OSTs, one shared file of 1 MiB transfers, written with fsync
and read back) in every lock mode; the runs alternate (before, now, now,
before, ...) so that machine noise hits both alike, and the medians and
their ratio are printed per lock mode and direction. The target: now /
before >= 0.95 everywhere.

  bench/trust.py [LANEFS_NOW LANEFS_BEFORE]

Without arguments it builds the "before" binary itself, from BASE_COMMIT in
a temporary git worktree (target/trust-base; a few minutes the first time),
and uses ./target/release/lanefs as "now". BENCH_DIR puts the clusters'
data on a given file system: by default both on tmpfs (/dev/shm: no disk
noise, the checks' CPU cost as large as it can be relative to the I/O) and
on the disk under the system's temporary directory (what users deploy:
every fsync and lock handover pays its fdatasync there). ROUNDS sets the
repetitions (default 4).
"""
import json, os, statistics, subprocess, sys, tempfile

# The last commit before the trust work: no keys, no limits on queues and
# requests, no extent checks at the OST, no commits or replay copies.
BASE_COMMIT = "4fcabe5"
ROUNDS = int(os.environ.get("ROUNDS", "4"))
GEOMETRY = ["-w", "-r", "-e", "-b", "4m", "-t", "1m", "-s", "32", "-N", "8", "-O", "summaryFormat=JSON"]
STRIPES = ["-a", "LANEFS", "--lanefs.osts=4", "--lanefs.stripe-count=4", "--lanefs.stripe-size=1m"]
MODES = ["default", "noexpand", "lockahead", "group"]
TARGET = 0.95


def build_base(root):
    target = os.path.join(root, "target", "trust-base")
    binary = os.path.join(target, "release", "lanefs")
    if os.path.exists(binary):
        return binary
    tree = os.path.join(target, "src")
    if not os.path.isdir(tree):
        subprocess.run(["git", "-C", root, "worktree", "add", "--detach", "-f", tree, BASE_COMMIT], check=True)
    print(f"building lanefs at {BASE_COMMIT} (the 'before' binary) in {target}", file=sys.stderr)
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    subprocess.run(["cargo", "build", "--release", "--locked", "--bin", "lanefs"], cwd=tree, check=True, env=env)
    return binary


def run(binary, mode, data_dir):
    with tempfile.TemporaryDirectory(prefix="lanefs-trust-", dir=data_dir) as d:
        args = [binary, "ior"] + GEOMETRY + STRIPES + [f"--lanefs.lock-mode={mode}"]
        env = dict(os.environ, TMPDIR=d)  # the embedded cluster's data directory
        out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    summary = json.loads(out)["summary"]
    return {s["operation"]: s["bwMeanMIB"] for s in summary}


def measure(now, before, data_dir, where):
    results = {(who, mode, op): [] for who in ("now", "before") for mode in MODES for op in ("write", "read")}
    for r in range(ROUNDS):
        for mode in MODES:
            order = [("before", before), ("now", now)] if r % 2 == 0 else [("now", now), ("before", before)]
            for who, binary in order:
                bw = run(binary, mode, data_dir)
                for op in ("write", "read"):
                    results[(who, mode, op)].append(bw[op])
                print(f"{where} round {r + 1}: {mode:<10} {who:<6} write {bw['write']:8.1f}  read {bw['read']:8.1f} MiB/s", file=sys.stderr)
    print(f"{where}: lanefs ior {' '.join(GEOMETRY + STRIPES)}, {ROUNDS} rounds, median MiB/s, now / before ({BASE_COMMIT})")
    worst = None
    for mode in MODES:
        for op in ("write", "read"):
            b = statistics.median(results[("before", mode, op)])
            n = statistics.median(results[("now", mode, op)])
            ratio = n / b
            worst = ratio if worst is None else min(worst, ratio)
            runs = lambda who: " ".join(f"{x:.0f}" for x in results[(who, mode, op)])
            verdict = "meets" if ratio >= TARGET else "BELOW"
            print(f"  {mode:<10} {op:<5} before {b:8.1f}  now {n:8.1f}  {ratio:5.3f}x  target >= {TARGET}: {verdict}"
                  f"   (before: {runs('before')}; now: {runs('now')})")
    return worst


def main():
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
    if len(sys.argv) == 3:
        now, before = sys.argv[1], sys.argv[2]
    else:
        now, before = os.path.join(root, "target", "release", "lanefs"), build_base(root)
    places = [(os.environ["BENCH_DIR"], os.environ["BENCH_DIR"])] if "BENCH_DIR" in os.environ else [
        ("/dev/shm", "tmpfs (/dev/shm)"), (tempfile.gettempdir(), f"disk ({tempfile.gettempdir()})")]
    worst = min(measure(now, before, d, where) for d, where in places if os.path.isdir(d))
    print(f"  worst now / before: {worst:.3f}x")


if __name__ == "__main__":
    main()
