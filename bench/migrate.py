#!/usr/bin/env python3
"""Restriping a file in place against copying it, side by side.

Starts `lanefs up --osts 4` on the disk under the system's temporary
directory (or BENCH_DIR), mounts it, and writes one file of SIZE_MIB
(default 1024) MiB of non-zero bytes on one stripe. Then, round by round,
alternates (the order reversed every other round):

- migrate: `lanefs migrate -c C -S 1m FILE`, C going 4, 1, 4, 1, ...
  (the copy under a group lock, the swap of layouts at the MDS);
- copy: what a user did without it, `lanefs setstripe -c C -S 1m NEW`,
  `cp FILE NEW` through the mount, `mv NEW FILE`.

Before every run the disk is synced and the page cache dropped. Prints
each one's bandwidth (file size / wall time) as median and range, and
migrate / copy. The file's bytes are checked after the last round.

  bench/migrate.py [LANEFS]      ROUNDS (default 3), SIZE_MIB, BENCH_DIR
"""
import hashlib, os, statistics, subprocess, sys, tempfile, time

from lanefs_up import mounted, settle

ROUNDS = int(os.environ.get("ROUNDS", "3"))
SIZE_MIB = int(os.environ.get("SIZE_MIB", "1024"))


def timed(commands, env):
    """Seconds the commands take one after the other, from a settled
    page cache."""
    settle()
    started = time.monotonic()
    for args in commands:
        run = subprocess.run(args, capture_output=True, text=True, env=env)
        if run.returncode != 0:
            sys.exit(f"bench/migrate.py: {' '.join(args)} failed ({run.returncode}):\n{run.stderr}")
    return time.monotonic() - started


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def main():
    lanefs = sys.argv[1] if len(sys.argv) > 1 else "target/release/lanefs"
    place = os.environ.get("BENCH_DIR", tempfile.gettempdir())
    with mounted(lanefs, place, "lanefs-bench-migrate-") as (_, mountpoint, env):
        path = f"{mountpoint}/big"
        subprocess.run([lanefs, "setstripe", "-c", "1", "-S", "1m", "/big"], check=True, env=env)
        block = bytes((i * 7 + 1) % 251 or 1 for i in range(1 << 20))
        with open(path, "r+b") as f:
            for i in range(SIZE_MIB):
                f.write(block[i % 251:] + block[:i % 251])
        want = digest(path)
        results = {"migrate": [], "copy": []}
        for round_ in range(ROUNDS):
            count = "4" if round_ % 2 == 0 else "1"
            cases = ["migrate", "copy"] if round_ % 2 == 0 else ["copy", "migrate"]
            for case in cases:
                if case == "migrate":
                    seconds = timed([[lanefs, "migrate", "-c", count, "-S", "1m", path]], env)
                else:
                    # The copy's setstripe and rename are part of its cost.
                    new = f"{path}.new"
                    setstripe = [lanefs, "setstripe", "-c", count, "-S", "1m", "/big.new"]
                    seconds = timed([setstripe, ["cp", path, new], ["mv", new, path]], env)
                results[case].append(SIZE_MIB / seconds)
                print(f"round {round_ + 1} {case:7} -c {count}: {SIZE_MIB / seconds:7.0f} MiB/s", flush=True)
        if digest(path) != want:
            sys.exit("bench/migrate.py: the file's bytes changed")
    print(f"\n{SIZE_MIB} MiB, {ROUNDS} rounds, 4 OSTs on {place}; MiB/s (median, min-max)")
    medians = {}
    for case, bws in results.items():
        medians[case] = statistics.median(bws)
        print(f"  {case:8} {medians[case]:7.0f}  ({min(bws):.0f}-{max(bws):.0f})")
    print(f"  migrate / copy: {medians['migrate'] / medians['copy']:.2f}x")


if __name__ == "__main__":
    main()
