#!/usr/bin/env python3
"""Files through a FUSE mount against the client library, side by side.

For each place the data can live (tmpfs, and the disk under the system's
temporary directory), starts `lanefs up --osts 4` there, mounts it, and
alternates, run by run, `lanefs ior -a POSIX` on the mount against `lanefs
ior -a LANEFS` on an embedded cluster on the same file system and `lanefs
ior -a POSIX` on plain local files there: file per process (-F) and one
shared file, 8 ranks, 16 MiB each in 1 MiB transfers, written with fsync
and read back. Prints the medians and the ratio mount / library per case.

Then one shared file through 4 mounts (4 clients, as 4 nodes), written by
c/shared_write (2 processes per mount, each writing its own 1 MiB blocks
of every round, closed with fsync), with default locking and with
lockahead taken through the mount's ioctl (-l), alternated run by run.
Prints its medians, and lockahead / default.

Before every run the disk is synced and the page cache dropped (`sync`,
/proc/sys/vm/drop_caches), so that one run's dirty pages are not the next
one's work. Needs root (to mount) and /dev/fuse; builds c/ with `make`.

With several builds (`bench/mount.py OLD NEW`), each gets its own file
system, mounted, and each round runs every build's cases in turn (the
order reversed every other round), so that the machine's noise falls on
all alike; medians are printed per build, with each build's ratio to the
first's.

  bench/mount.py [LANEFS...]     ROUNDS (default 3), BENCH_DIR (one place),
                                 SIZE_MIB (each IOR rank's, default 16),
                                 SHARED_MIB (each c/shared_write process's, default 64)
"""
import contextlib, json, os, statistics, subprocess, sys, tempfile, time

from lanefs_up import mounted, settle

ROUNDS = int(os.environ.get("ROUNDS", "3"))
SIZE_MIB = int(os.environ.get("SIZE_MIB", "16"))
IOR = ["-w", "-r", "-e", "-b", f"{SIZE_MIB}m", "-t", "1m", "-N", "8", "-O", "summaryFormat=JSON"]


def bandwidth(args, env=None):
    settle()
    run = subprocess.run(args, capture_output=True, text=True, env=env)
    if run.returncode != 0:
        sys.exit(f"bench/mount.py: {' '.join(args)} failed ({run.returncode}):\n{run.stderr}")
    out = run.stdout
    return {s["operation"]: s["bwMeanMIB"] for s in json.loads(out)["summary"]}


def one_round(lanefs, place, mountpoint, env, results, label):
    """One round of every case of one build, into `results[(case, op, who)]`."""
    for shared in (False, True):
        case = "shared file" if shared else "file per process"
        layout = ["-c", "4", "-S", "1m"] if shared else ["-c", "1"]
        subprocess.run([lanefs, "setstripe", *layout, "/"], check=True, env=env)
        flags = [] if shared else ["-F"]
        runs = [("mount", [lanefs, "ior", "-a", "POSIX", *flags, *IOR, "-o", f"{mountpoint}/ior"], env)]
        with tempfile.TemporaryDirectory(dir=place) as d:
            stripes = ["--lanefs.osts=4", f"--lanefs.stripe-count={4 if shared else 1}", "--lanefs.stripe-size=1m"]
            runs.append(("library", [lanefs, "ior", "-a", "LANEFS", *flags, *IOR, *stripes],
                         dict(os.environ, TMPDIR=d)))
            runs.append(("local", [lanefs, "ior", "-a", "POSIX", *flags, *IOR, "-o", f"{d}/ior"], None))
            done = len(results.get((case, "write", "mount"), []))
            for who, args, run_env in (runs if done % 2 == 0 else runs[::-1]):
                bw = bandwidth(args, run_env)
                for op in ("write", "read"):
                    results.setdefault((case, op, who), []).append(bw[op])
                print(f"{label}: {case:16} {who:7} write {bw['write']:7.0f} read {bw['read']:7.0f} MiB/s",
                      file=sys.stderr)


def measure(builds, place, label):
    """Every build's cases, round by round, each build on its own mounted
    file system; then each build's shared file through MOUNTS mounts."""
    results = {lanefs: {} for lanefs in builds}
    shared = {}
    with contextlib.ExitStack() as stack:
        mounts = {lanefs: stack.enter_context(mounted(lanefs, place, "lanefs-mount-bench-")) for lanefs in builds}
        for r in range(ROUNDS):
            for lanefs in (builds if r % 2 == 0 else builds[::-1]):
                _, mountpoint, env = mounts[lanefs]
                one_round(lanefs, place, mountpoint, env, results[lanefs], f"{label} round {r + 1} {lanefs}")
        for lanefs in builds:
            shared[lanefs] = shared_locking(lanefs, mounts[lanefs][2])
    print(f"{label}: lanefs ior {' '.join(IOR)}, {ROUNDS} rounds, median MiB/s (each round's in parentheses)")
    first = builds[0]
    for lanefs in builds:
        print(f"  build {lanefs}")
        for case in ("file per process", "shared file"):
            for op in ("write", "read"):
                m, lib, local = (statistics.median(results[lanefs][(case, op, who)]) for who in ("mount", "library", "local"))
                runs = " ".join(f"{v:.0f}" for v in results[lanefs][(case, op, "mount")])
                vs_first = m / statistics.median(results[first][(case, op, "mount")])
                print(f"    {case:16} {op:5} mount {m:6.0f} ({runs})  library {lib:6.0f}  local {local:6.0f}  "
                      f"mount/library {m / lib:4.2f}x  mount/first build's {vs_first:4.2f}x")
        default, ahead = (statistics.median(shared[lanefs][mode]) for mode in ("default", "lockahead"))
        print(f"    shared file through {MOUNTS} mounts (c/shared_write, {MOUNTS * PER_MOUNT} processes, "
              f"{ROUNDS_OF_BLOCKS} MiB each): default {default:6.0f}  lockahead {ahead:6.0f}  "
              f"lockahead/default {ahead / default:4.2f}x")


MOUNTS, PER_MOUNT, ROUNDS_OF_BLOCKS = 4, 2, int(os.environ.get("SHARED_MIB", "64"))


def shared_locking(lanefs, env):
    """MiB/s of c/shared_write through MOUNTS mounts, by lock mode."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["make", "-s", "-C", os.path.join(root, "c")], check=True)
    program = os.path.join(root, "c", "shared_write")
    mounts = [tempfile.mkdtemp(prefix="lanefs-mnt-") for _ in range(MOUNTS)]
    results = {}
    try:
        for m in mounts:
            subprocess.run([lanefs, "mount", m], check=True, env=env, capture_output=True)
        subprocess.run([lanefs, "setstripe", "-c", "4", "-S", "1m", "/"], check=True, env=env)
        for r in range(ROUNDS):
            for mode in (("default", "lockahead") if r % 2 == 0 else ("lockahead", "default")):
                name = f"shared-{r}-{mode}"
                paths = [f"{m}/{name}" for m in mounts for _ in range(PER_MOUNT)]
                settle()
                started = time.monotonic()
                flags = ["-l"] if mode == "lockahead" else []
                subprocess.run([program, *flags, "-b", str(1 << 20), "-r", str(ROUNDS_OF_BLOCKS), *paths], check=True)
                elapsed = time.monotonic() - started
                mib = len(paths) * ROUNDS_OF_BLOCKS / elapsed
                results.setdefault(mode, []).append(mib)
                subprocess.run([lanefs, "rm", f"/{name}"], check=True, env=env)
                print(f"  round {r + 1}: shared_write through {MOUNTS} mounts {mode:9} {mib:7.0f} MiB/s", file=sys.stderr)
    finally:
        for m in mounts:
            subprocess.run([lanefs, "umount", m], env=env, capture_output=True)
            os.rmdir(m)
    return results


def main():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("bench/mount.py: skipped (mounting needs root and /dev/fuse)")
        return
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
    builds = sys.argv[1:] or [os.path.join(root, "target", "release", "lanefs")]
    places = [(os.environ["BENCH_DIR"], os.environ["BENCH_DIR"])] if "BENCH_DIR" in os.environ else [
        ("/dev/shm", "tmpfs (/dev/shm)"), (tempfile.gettempdir(), f"disk ({tempfile.gettempdir()})")]
    for place, label in places:
        measure(builds, place, label)


if __name__ == "__main__":
    main()
