#!/usr/bin/env python3
"""Files through a FUSE mount against the client library, side by side.

For each place the data can live (tmpfs, and the disk under the system's
temporary directory), starts `lanefs up --osts 4` there, mounts it, and
alternates, run by run, `lanefs ior -a POSIX` on the mount against `lanefs
ior -a LANEFS` on an embedded cluster on the same file system: file per
process (-F) and one shared file, 8 ranks, 16 MiB each in 1 MiB
transfers, written with fsync and read back. Prints the medians and the
ratio mount / library per case. Needs root (to mount) and /dev/fuse.

  bench/mount.py [LANEFS]        ROUNDS (default 3), BENCH_DIR (one place)
"""
import json, os, statistics, subprocess, sys, tempfile, time

ROUNDS = int(os.environ.get("ROUNDS", "3"))
IOR = ["-w", "-r", "-e", "-b", "16m", "-t", "1m", "-N", "8", "-O", "summaryFormat=JSON"]


def bandwidth(args, env=None):
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    return {s["operation"]: s["bwMeanMIB"] for s in json.loads(out)["summary"]}


def measure(lanefs, place, label):
    data = tempfile.mkdtemp(prefix="lanefs-mount-bench-", dir=place)
    mountpoint = tempfile.mkdtemp(prefix="lanefs-mnt-")
    up = subprocess.Popen([lanefs, "up", "--osts", "4", "--data", os.path.join(data, "fs")],
                          stdout=subprocess.PIPE, text=True)
    mds = None
    for line in up.stdout:
        if line.startswith("export LANEFS_MDS="):
            mds = line.strip().split("=", 1)[1]
        if line.startswith("(interrupt"):
            break
    env = dict(os.environ, LANEFS_MDS=mds)
    results = {}
    try:
        subprocess.run([lanefs, "mount", mountpoint], check=True, env=env, capture_output=True)
        for r in range(ROUNDS):
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
                    for who, args, run_env in (runs if r % 2 == 0 else runs[::-1]):
                        bw = bandwidth(args, run_env)
                        for op in ("write", "read"):
                            results.setdefault((case, op, who), []).append(bw[op])
                        print(f"{label} round {r + 1}: {case:16} {who:7} write {bw['write']:7.0f} read {bw['read']:7.0f} MiB/s",
                              file=sys.stderr)
    finally:
        subprocess.run([lanefs, "umount", mountpoint], env=env, capture_output=True)
        up.terminate()
        up.wait()
        subprocess.run(["rm", "-rf", data])
        os.rmdir(mountpoint)
    print(f"{label}: lanefs ior {' '.join(IOR)}, {ROUNDS} rounds, median MiB/s")
    for case in ("file per process", "shared file"):
        for op in ("write", "read"):
            m = statistics.median(results[(case, op, "mount")])
            lib = statistics.median(results[(case, op, "library")])
            print(f"  {case:16} {op:5} mount {m:7.0f}  library {lib:7.0f}  mount/library {m / lib:5.2f}x")


def main():
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("bench/mount.py: skipped (mounting needs root and /dev/fuse)")
        return
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True).stdout.strip()
    lanefs = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "target", "release", "lanefs")
    places = [(os.environ["BENCH_DIR"], os.environ["BENCH_DIR"])] if "BENCH_DIR" in os.environ else [
        ("/dev/shm", "tmpfs (/dev/shm)"), (tempfile.gettempdir(), f"disk ({tempfile.gettempdir()})")]
    for place, label in places:
        measure(lanefs, place, label)


if __name__ == "__main__":
    main()
