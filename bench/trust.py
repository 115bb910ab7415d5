#!/usr/bin/env python3
"""What trust costs: lanefs now against lanefs before authentication,
bounded resources, message checks, commits and replay, side by side.

Three builds run the same IOR job on an embedded cluster (8 ranks, each its
own client, 4 OSTs, one shared file of 1 MiB transfers, written with fsync
and read back) in every lock mode: "before" (the last commit before the
trust work), "now" (./target/release/lanefs), and "bare": this code built
with the `measure-no-replay-copies` feature, whose clients keep no copies
of acknowledged writes for replay after an OSS crash (everything else, the
OSTs' commits included, as now). The runs rotate among the builds, so that
machine noise hits all alike, and the medians and ratios are printed per
lock mode and direction:

  bare / before   what authentication, the message checks, the bounds on
                  queues and requests and the OSTs' commits cost; the
                  target: >= 0.95 everywhere
  now / bare      what the clients' replay copies cost (Lustre's clients
                  keep their unstable pages the same way)
  now / before    all of it

and, per lock mode, the median CPU time of a whole job (the embedded
servers and the ranks, user and system, from getrusage): the work the
checks cost, which this machine's noise moves far less than bandwidth.

With INSTRUCTIONS=1 every job runs under valgrind's callgrind instead,
which counts the instructions it executes in user space (the servers'
and the ranks'): a count this machine's noise barely moves (one binary
against itself: single runs within 4%, medians of 5 within 1%), where
its bandwidth moves by 10 to 20%. The
jobs are then a quarter of the size (-s 8: callgrind runs them about 20
times slower), and the medians, spreads and ratios of the counts are
printed instead of bandwidth. Kernel work (system calls, copies in the
kernel) is not counted: the CPU time of the normal runs covers it.

  bench/trust.py [LANEFS_NOW LANEFS_BEFORE [LANEFS_BARE]]

Without arguments it builds "before" itself, from BASE_COMMIT in a
temporary git worktree (target/trust-base; a few minutes the first time),
and "bare" into target/trust-bare. BENCH_DIR puts the clusters' data on a
given file system: by default both on tmpfs (/dev/shm: no disk noise, the
checks' CPU cost as large as it can be relative to the I/O) and on the
disk under the system's temporary directory (what users deploy: every
fsync and lock handover pays its fdatasync there). ROUNDS sets the
repetitions (default 4), SEGMENTS each rank's 4 MiB segments (IOR's -s;
default 32, and 8 with INSTRUCTIONS=1), MODES the lock modes run
(comma-separated; default all four).
"""
import json, os, resource, statistics, subprocess, sys, tempfile

# The last commit before the trust work: no keys, no limits on queues and
# requests, no extent checks at the OST, no commits or replay copies.
BASE_COMMIT = "4fcabe5"
ROUNDS = int(os.environ.get("ROUNDS", "4"))
INSTRUCTIONS = os.environ.get("INSTRUCTIONS") == "1"
SEGMENTS = os.environ.get("SEGMENTS", "8" if INSTRUCTIONS else "32")
GEOMETRY = ["-w", "-r", "-e", "-b", "4m", "-t", "1m", "-s", SEGMENTS, "-N", "8", "-O", "summaryFormat=JSON"]
STRIPES = ["-a", "LANEFS", "--lanefs.osts=4", "--lanefs.stripe-count=4", "--lanefs.stripe-size=1m"]
MODES = os.environ.get("MODES", "default,noexpand,lockahead,group").split(",")
BUILDS = ["before", "bare", "now"]
TARGET = 0.95
# What "before" is, for the headings: BASE_COMMIT, or the binary given.
before_label = BASE_COMMIT


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


def build_bare(root):
    target = os.path.join(root, "target", "trust-bare")
    print(f"building lanefs with measure-no-replay-copies (the 'bare' binary) in {target}", file=sys.stderr)
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    subprocess.run(["cargo", "build", "--release", "--locked", "-p", "lanefs", "--bin", "lanefs",
                    "--features", "measure-no-replay-copies"], cwd=root, check=True, env=env)
    return os.path.join(target, "release", "lanefs")


def cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(binary, mode, data_dir):
    with tempfile.TemporaryDirectory(prefix="lanefs-trust-", dir=data_dir) as d:
        args = [binary, "ior"] + GEOMETRY + STRIPES + [f"--lanefs.lock-mode={mode}"]
        if INSTRUCTIONS:
            args = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] + args
        env = dict(os.environ, TMPDIR=d)  # the embedded cluster's data directory
        before = cpu_seconds()
        done = subprocess.run(args, check=True, capture_output=True, text=True, env=env)
        cpu = cpu_seconds() - before
    summary = json.loads(done.stdout)["summary"]
    result = {s["operation"]: s["bwMeanMIB"] for s in summary}
    if INSTRUCTIONS:
        # callgrind's summary: "==pid== Collected : N".
        counts = [line.split(":")[-1] for line in done.stderr.splitlines() if "Collected :" in line]
        result["instructions"] = int(counts[-1])
    # The CPU time of the whole job (the embedded servers and the ranks,
    # user and system): what the checks cost in work, which the machine's
    # noise moves far less than it moves a 2-core machine's bandwidth.
    result["cpu"] = cpu
    return result


def measure_instructions(binaries, data_dir, where):
    """Instructions per job under callgrind, each build's runs rotating."""
    results = {(who, mode): [] for who in BUILDS for mode in MODES}
    for r in range(ROUNDS):
        for mode in MODES:
            order = BUILDS[r % len(BUILDS):] + BUILDS[:r % len(BUILDS)]
            for who in order:
                count = run(binaries[who], mode, data_dir)["instructions"]
                results[(who, mode)].append(count)
                print(f"{where} round {r + 1}: {mode:<10} {who:<6} {count / 1e6:9.1f} M instructions", file=sys.stderr)
    print(f"{where}: lanefs ior {' '.join(GEOMETRY + STRIPES)} under callgrind, {ROUNDS} rounds,"
          f" millions of instructions per job (before: {before_label}): median [min, max]")
    worst = None
    for mode in MODES:
        m = {who: statistics.median(results[(who, mode)]) for who in BUILDS}
        spread = {who: f"{m[who] / 1e6:7.1f} [{min(results[(who, mode)]) / 1e6:.1f}, {max(results[(who, mode)]) / 1e6:.1f}]"
                  for who in BUILDS}
        ratio = m["before"] / m["now"]
        worst = ratio if worst is None else min(worst, ratio)
        print(f"  {mode:<10} before {spread['before']}  bare {spread['bare']}  now {spread['now']}"
              f"  now/before {m['now'] / m['before']:5.3f}x  bare/before {m['bare'] / m['before']:5.3f}x")
    return worst


def measure(binaries, data_dir, where):
    if INSTRUCTIONS:
        return measure_instructions(binaries, data_dir, where)
    results = {(who, mode, op): [] for who in BUILDS for mode in MODES for op in ("write", "read", "cpu")}
    for r in range(ROUNDS):
        for mode in MODES:
            order = BUILDS[r % len(BUILDS):] + BUILDS[:r % len(BUILDS)]
            for who in order:
                bw = run(binaries[who], mode, data_dir)
                for op in ("write", "read", "cpu"):
                    results[(who, mode, op)].append(bw[op])
                print(f"{where} round {r + 1}: {mode:<10} {who:<6} write {bw['write']:8.1f}  read {bw['read']:8.1f} MiB/s"
                      f"  cpu {bw['cpu']:6.2f} s", file=sys.stderr)
    print(f"{where}: lanefs ior {' '.join(GEOMETRY + STRIPES)}, {ROUNDS} rounds, median MiB/s (before: {before_label})")
    worst = None
    for mode in MODES:
        for op in ("write", "read"):
            m = {who: statistics.median(results[(who, mode, op)]) for who in BUILDS}
            ratio = m["bare"] / m["before"]
            worst = ratio if worst is None else min(worst, ratio)
            verdict = "meets" if ratio >= TARGET else "BELOW"
            runs = "; ".join(f"{who}: " + " ".join(f"{x:.0f}" for x in results[(who, mode, op)]) for who in BUILDS)
            print(f"  {mode:<10} {op:<5} before {m['before']:7.1f}  bare {m['bare']:7.1f}  now {m['now']:7.1f}"
                  f"  bare/before {ratio:5.3f}x (target >= {TARGET}: {verdict})"
                  f"  now/bare {m['now'] / m['bare']:5.3f}x  now/before {m['now'] / m['before']:5.3f}x   ({runs})")
    print(f"{where}: CPU seconds of a whole job (servers and ranks, user and system), median")
    for mode in MODES:
        c = {who: statistics.median(results[(who, mode, "cpu")]) for who in BUILDS}
        runs = "; ".join(f"{who}: " + " ".join(f"{x:.2f}" for x in results[(who, mode, "cpu")]) for who in BUILDS)
        print(f"  {mode:<10} cpu   before {c['before']:6.2f}  bare {c['bare']:6.2f}  now {c['now']:6.2f}"
              f"  now/before {c['now'] / c['before']:5.3f}x  now/bare {c['now'] / c['bare']:5.3f}x   ({runs})")
    return worst


def main():
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
    global before_label
    if len(sys.argv) in (3, 4):
        now, before = sys.argv[1], sys.argv[2]
        before_label = before
    else:
        now, before = os.path.join(root, "target", "release", "lanefs"), build_base(root)
    bare = sys.argv[3] if len(sys.argv) == 4 else build_bare(root)
    binaries = {"before": before, "bare": bare, "now": now}
    places = [(os.environ["BENCH_DIR"], os.environ["BENCH_DIR"])] if "BENCH_DIR" in os.environ else [
        ("/dev/shm", "tmpfs (/dev/shm)"), (tempfile.gettempdir(), f"disk ({tempfile.gettempdir()})")]
    worst = min(measure(binaries, d, where) for d, where in places if os.path.isdir(d))
    if INSTRUCTIONS:
        print(f"  most instructions of now against before: {1 / worst:.3f}x")
    else:
        print(f"  worst bare / before: {worst:.3f}x")


if __name__ == "__main__":
    main()
