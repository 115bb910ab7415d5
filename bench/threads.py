#!/usr/bin/env python3
"""Where one real run's CPU goes, thread by thread, beside the simulator's.

Runs `lanefs ior -a LANEFS ARGS` for real (with the page cache dropped
first, as root, and in a VM that hands freed memory back to its host,
freed pages kept and new memory written and freed after the drop, as
bench/fidelity.py does) and reads every thread's CPU time, context switches and
minor page faults (a first write into a page of a client's arena is one)
from /proc while it runs (`/proc/PID/task/TID/schedstat`, or `stat`'s
clock ticks where the kernel keeps no schedstat, and `status`, every 20 ms (more often slows the run itself):
a thread's last 20 ms before it exits may be missed), summed by thread
name (`ior-rank-0` .. counted as `ior-rank`). With a preset
(`--preset PRESET`, e.g. one `lanefs calibrate` wrote) it also runs
`lanefs sim ior --cluster PRESET -a LANEFS ARGS` and prints what the
simulator charged the host's cores, by use (`sim.cpu_s`), the page frames
its clients wrote into first (`sim.frames_touched`), and the
wake-ups it charged, by thread (`sim.handoffs_by_thread`).

The real threads of a local cluster and the simulator's uses do not map
one to one: `ior-rank` makes the calls and copies a write's bytes into its
client's cache (calls, copies); `lanefs-client` is each client's thread,
which sends and takes its messages (messages, and the client's wake-ups);
`tokio-rt-worker` is the servers' network thread (one, for the OSS and
the MDS: the OSS's network wake-ups) and tokio's blocking pool (the MDS's
database); `ost0`, `ost1` .. serve the OSTs (oss_io, locks, the service
wake-ups); `ost0-commit` .. run their commits' fdatasyncs (syncs).

    python3 bench/threads.py [--preset PRESET] [--lanefs PATH] -- IOR_ARGS
    python3 bench/threads.py --preset here.toml -- -w -e -b 4m -t 64k -s 16 -N 4 \\
        --lanefs.lock-mode=noexpand --lanefs.stripe-count=2 --lanefs.stripe-size=1m --lanefs.osts=2

BENCH_DIR (default /var/tmp) is the directory the real run's cluster
lives in (its OSTs on that disk).
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fidelity  # noqa: E402  (its page cache drop and its hold on freed memory)

POLL_S = 0.02
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def thread_group(name):
    """ior-rank-3 -> ior-rank; other names as they are."""
    return re.sub(r"-\d+$", "", name) if name.startswith("ior-rank") else name


def sample(pid, last):
    """Every thread's (name, CPU seconds, voluntary, involuntary, minor faults) now."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        cpu_s = (int(fields[11]) + int(fields[12])) * TICK_S
        # minflt: faults served without I/O, as a first write into a page of
        # shared memory, or a first read of it through another mapping.
        minor = int(fields[7])
        try:
            # Nanoseconds on a CPU, where the kernel keeps them.
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu_s = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
        vol = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        invol = int(re.search(r"^nonvoluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        last[tid] = (name, cpu_s, vol, invol, minor)


def real_run(lanefs, args, scratch):
    # As bench/fidelity.py does: the page cache dropped (as root), and in a
    # VM that hands freed memory back to its host, new memory written and
    # freed after the drop, so that the run meets memory the host backs.
    fidelity.drop_caches()
    env = dict(os.environ, TMPDIR=scratch)
    cmd = [lanefs, "ior", "-a", "LANEFS", *args, "-O", "summaryFormat=JSON"]
    out = tempfile.TemporaryFile(dir=scratch)
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
    last = {}
    while proc.poll() is None:
        sample(proc.pid, last)
        time.sleep(POLL_S)
    if proc.returncode != 0:
        sys.exit(f"threads.py: {' '.join(cmd)} failed ({proc.returncode})")
    out.seek(0)
    report = json.loads(out.read())
    groups = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    for name, *counts in last.values():
        g = groups[thread_group(name)]
        g[0] += 1
        for i, n in enumerate(counts):
            g[i + 1] += n
    return cmd, report, groups


def sim_run(lanefs, preset, args):
    cmd = [lanefs, "sim", "ior", "--cluster", preset, "-a", "LANEFS", *args, "-O", "summaryFormat=JSON"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"threads.py: {' '.join(cmd)} failed:\n{done.stderr}")
    return cmd, json.loads(done.stdout)


def bandwidth(report):
    return report["summary"][0]["bwMeanMIB"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", help="a cluster description to simulate the same run on")
    parser.add_argument("--lanefs", default=os.path.join(HERE, "..", "target", "release", "lanefs"))
    parser.add_argument("ior", nargs=argparse.REMAINDER, help="-- then the IOR options")
    opts = parser.parse_args()
    args = opts.ior[1:] if opts.ior[:1] == ["--"] else opts.ior
    if not args:
        parser.error("give the IOR options after --")
    if not os.path.exists(opts.lanefs):
        sys.exit(f"threads.py: {opts.lanefs} is missing: build it first (make build)")
    base = os.environ.get("BENCH_DIR", "/var/tmp")
    with tempfile.TemporaryDirectory(prefix="lanefs-threads-", dir=base) as scratch:
        with fidelity.freed_memory_kept() as reporting:
            cmd, report, groups = real_run(opts.lanefs, args, scratch)
    if reporting:
        print(f"({reporting})")
    print(f"$ {' '.join(cmd)}")
    print(f"real: {bandwidth(report):.0f} MiB/s")
    print(f"{'threads':<18} {'count':>5} {'CPU ms':>8} {'voluntary':>10} {'involuntary':>12} {'minor faults':>13}")
    total = [0, 0.0, 0, 0, 0]
    for name, row in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        count, cpu, vol, invol, minor = row
        print(f"{name:<18} {count:>5} {cpu * 1e3:>8.0f} {vol:>10} {invol:>12} {minor:>13}")
        total = [t + n for t, n in zip(total, row)]
    print(f"{'all':<18} {total[0]:>5} {total[1] * 1e3:>8.0f} {total[2]:>10} {total[3]:>12} {total[4]:>13}")
    if not opts.preset:
        return
    cmd, sim = sim_run(opts.lanefs, opts.preset, args)
    print(f"\n$ {' '.join(cmd)}")
    print(f"simulated: {bandwidth(sim):.0f} MiB/s")
    uses = sim["sim"].get("cpu_s")
    if uses is None:
        print("(the preset models no cores: no CPU time charged)")
        return
    print(f"{'CPU charged for':<18} {'ms':>8}")
    for name, s in sorted(uses.items(), key=lambda kv: -kv[1]):
        print(f"{name:<18} {s * 1e3:>8.1f}")
    print(f"{'all':<18} {sim['sim']['cpu_busy_s'] * 1e3:>8.1f}")
    touched = sim["sim"].get("frames_touched")
    if touched is not None:
        print(f"{'first touches':<18} {touched:>8}   (page frames the clients wrote into first)")
    woken = sim["sim"].get("handoffs_by_thread")
    if woken:
        print(f"{'wake-ups of':<18} {'count':>8}")
        for name, n in woken.items():
            print(f"{name:<18} {n:>8}")


if __name__ == "__main__":
    main()
