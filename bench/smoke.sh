#!/bin/sh
# Every bench script once, at its smallest settings, so that none of them
# breaks unseen (`make test` runs this last, `make bench-smoke` on its own).
# It proves that each script runs to its end and parses what the binaries
# print, not any figure: the binary is a debug build, the sizes are a few
# MiB, and where a script compares builds it is given the same one for all
# of them (trust.py's "now", "before" and "bare"; the two of sim.py's
# speed and of turns.py and ab.py).
#
#   bench/smoke.sh [LANEFS]        (default target/debug/lanefs, which
#                                   `cargo test` builds for its own tests)
#
# Prints one line per script with its time in seconds; a script that fails
# has its output printed and ends the run. What cannot run here is skipped
# with the reason printed: mount.py, migrate.py and mpiio.py need root and
# /dev/fuse (to mount); mpiio.py and netns.sh need Open MPI and a lanefs
# built with it (`make test` builds it so where Open MPI's headers are);
# netns.sh needs network namespaces; trust.py's INSTRUCTIONS=1 needs
# valgrind. fidelity.py skips its own mount cells (root and /dev/fuse) and
# MPI-IO cells (Open MPI and a lanefs built with it) where they cannot run,
# saying so in its table.
#
# pgo.sh builds lanefs twice with fat LTO (many minutes): its training
# set alone is run, with LANEFS and at its smallest sizes (PGO_TRAIN_WITH).
# planted.sh needs a build with the planted-bugs feature (`make planted`,
# a build of its own): with any other, `lanefs swarm` checks the bug and
# fault-class names it is given and then refuses to run, so the names
# planted.sh gives are checked that way, and the script itself only read by
# the shell (`sh -n`). Given a planted build, it runs planted.sh on seed 0.
#
# The `cargo bench` targets are not scripts: `make test` and `make
# bench-smoke` run each of their benchmarks once before this (criterion's
# test mode, `cargo test --bench '*'`).
set -eu
cd "$(dirname "$0")/.."

lanefs=${1:-target/debug/lanefs}
if [ ! -x "$lanefs" ]; then
    echo "bench/smoke.sh: $lanefs is not there: build it with cargo build --locked -p lanefs --bin lanefs" >&2
    exit 1
fi
lanefs=$(realpath "$lanefs")
scratch=$(mktemp -d "${TMPDIR:-/tmp}/lanefs-bench-smoke-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
trap 'exit 130' INT TERM
began=$(date +%s)

# run NAME COMMAND...: runs it with its output in a log, which is printed
# if it fails.
run() {
    name=$1
    shift
    t0=$(date +%s)
    if "$@" >"$scratch/log" 2>&1; then
        echo "bench smoke: $name: ok ($(($(date +%s) - t0)) s)"
    else
        status=$?
        cat "$scratch/log"
        echo "bench smoke: $name: FAILED (exit status $status): $*"
        exit 1
    fi
}

skip() {
    echo "bench smoke: $1: skipped: $2"
}

# No bench/__pycache__ left behind.
export PYTHONDONTWRITEBYTECODE=1

# Every script at least parses.
run "every bench script parses" sh -c '
    python3 -c "import sys; [compile(open(f).read(), f, \"exec\") for f in sys.argv[1:]]" bench/*.py || exit 1
    for f in bench/*.sh; do
        case $f in bench/pgo.sh) bash -n "$f" ;; *) sh -n "$f" ;; esac || exit 1
    done'

data="$scratch/data"
mkdir "$data"

run "fs.py (ROUNDS=1 SEGMENTS=1)" env LANEFS="$lanefs" BENCH_DIR="$data" ROUNDS=1 SEGMENTS=1 python3 bench/fs.py

run "trust.py (ROUNDS=1 SEGMENTS=1, one build as all three)" \
    env BENCH_DIR="$data" ROUNDS=1 SEGMENTS=1 python3 bench/trust.py "$lanefs" "$lanefs" "$lanefs"
if command -v valgrind >/dev/null 2>&1; then
    run "trust.py (INSTRUCTIONS=1 ROUNDS=1 SEGMENTS=1 MODES=default, one build as all three)" \
        env INSTRUCTIONS=1 BENCH_DIR="$data" ROUNDS=1 SEGMENTS=1 MODES=default \
        python3 bench/trust.py "$lanefs" "$lanefs" "$lanefs"
else
    skip "trust.py INSTRUCTIONS=1" "valgrind is not installed"
fi

run "ab.py (1 round, SEGMENTS=1, one build twice)" \
    env SEGMENTS=1 python3 bench/ab.py 1 default "$data" a="$lanefs" b="$lanefs"

run "sim.py (SEGMENTS=1 SPEED_RUNS=1, every scenario, one build as both)" \
    env LANEFS="$lanefs" LANEFS_PGO="$lanefs" SEGMENTS=1 SPEED_RUNS=1 python3 bench/sim.py
run "ablation.py (SEGMENTS=1, calibrate --quick)" \
    env LANEFS="$lanefs" BENCH_DIR="$data" SEGMENTS=1 python3 bench/ablation.py
run "turns.py (--runs 1, SEGMENTS=1, one build twice)" \
    env SEGMENTS=1 python3 bench/turns.py --runs 1 "$lanefs" "$lanefs"

run "threads.py (one 8 MiB run, simulated on the laptop preset)" \
    env BENCH_DIR="$data" python3 bench/threads.py --lanefs "$lanefs" --preset laptop -- \
    -w -e -b 4m -t 1m -N 2 --lanefs.osts=4 --lanefs.stripe-count=4
# Its own data under /var/tmp (a disk: it refuses tmpfs); its MPI-IO and
# mount cells skip themselves, saying why, where they cannot run.
run "fidelity.py (QUICK=1 SIZE_MIB=8, one cell of each kind)" \
    env LANEFS="$lanefs" QUICK=1 SIZE_MIB=8 CELLS="shared default,mode 2,mount fpp" FIDELITY_JSON="$scratch/fidelity.json" \
    python3 bench/fidelity.py
run "fidelity.py (RESIMULATE that run with SIM_SET)" \
    env LANEFS="$lanefs" RESIMULATE="$scratch/fidelity.json" SIM_SET='storage.write_bulk="network"' python3 bench/fidelity.py

run "timeseries.py (ROUNDS=1 SEGMENTS=2 MODES=default)" \
    env ROUNDS=1 SEGMENTS=2 MODES=default BENCH_DIR="$data" python3 bench/timeseries.py "$lanefs"
run "pipeline.c (-DSEGMENTS=4)" sh -c '
    cc -O2 -pthread bench/pipeline.c -DSEGMENTS=4 -o "$1/pipeline" && "$1/pipeline" 4 "$2" && "$1/pipeline" 0 "$2"
    ' sh "$scratch" "$data"

run "faults.c (4 MiB, each way)" sh -c '
    cc -O2 -pthread bench/faults.c -o "$1/faults" && "$1/faults" 4 alone && "$1/faults" 4 spin &&
        "$1/faults" 4 writer "$2"
    ' sh "$scratch" "$data"

run "pgo.sh (PGO_TRAIN_WITH: its training set only, at -s 1 and -b 1m)" env PGO_TRAIN_WITH="$lanefs" bash bench/pgo.sh

# refused BUG [CLASSES]: `lanefs swarm` accepts the names, then refuses
# to plant a bug in this build.
refused() {
    out=$(LANEFS_PLANTED_BUG=$1 "$lanefs" swarm --seeds 0-0 --jobs 1 ${2:+--only "$2"} 2>&1 || true)
    case $out in
        *"has no planted bugs"*) ;;
        *) printf '%s\n' "$out"; return 1 ;;
    esac
}
planted_names() {
    eval "$(grep -E '^(bugs|pairs)=' bench/planted.sh)"
    for bug in $bugs; do refused "$bug" || return 1; done
    for pair in $pairs; do refused "${pair#*:}" "${pair%%:*}" || return 1; done
}
if refused lost-resend >/dev/null; then
    skip "planted.sh itself (read by sh -n only)" "it needs a build with the planted-bugs feature (make planted)"
    run "planted.sh's bug and fault-class names (checked by lanefs swarm)" planted_names
else
    run "planted.sh (seeds 0-0, class seeds 0-0)" sh bench/planted.sh "$lanefs" 0-0 2 0-0
fi

if [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ]; then
    skip "mount.py, migrate.py" "mounting needs root and /dev/fuse"
else
    run "mount.py (ROUNDS=1 SIZE_MIB=1 SHARED_MIB=1)" \
        env BENCH_DIR="$data" ROUNDS=1 SIZE_MIB=1 SHARED_MIB=1 python3 bench/mount.py "$lanefs"
    run "migrate.py (ROUNDS=1 SIZE_MIB=1)" env BENCH_DIR="$data" ROUNDS=1 SIZE_MIB=1 python3 bench/migrate.py "$lanefs"
fi

# Open MPI, and a lanefs linked with it.
mpi=
if ! command -v mpirun >/dev/null 2>&1 || ! command -v mpicc >/dev/null 2>&1; then
    mpi="Open MPI (mpirun, mpicc) is not installed"
elif ! ldd "$lanefs" 2>/dev/null | grep -q libmpi; then
    mpi="$lanefs was built without MPI"
fi
if [ -n "$mpi" ]; then
    skip "mpiio.py" "$mpi"
elif [ "$(id -u)" != 0 ] || [ ! -e /dev/fuse ]; then
    skip "mpiio.py" "mounting needs root and /dev/fuse"
else
    run "mpiio.py (ROUNDS=1 RANKS=2 SEGMENTS=1 TIMERS=1, every case)" \
        env BENCH_DIR="$data" ROUNDS=1 RANKS=2 SEGMENTS=1 TIMERS=1 python3 bench/mpiio.py "$lanefs"
fi

probe=lfsprobe$$
if [ -n "$mpi" ]; then
    skip "netns.sh" "$mpi"
elif [ "$(id -u)" != 0 ]; then
    skip "netns.sh" "network namespaces need root"
elif ! command -v ip >/dev/null 2>&1 || ! command -v unshare >/dev/null 2>&1; then
    skip "netns.sh" "it needs ip (iproute2) and unshare"
elif ! ip netns add "$probe" 2>/dev/null; then
    skip "netns.sh" "no network namespaces here (ip netns add failed)"
else
    ip netns del "$probe"
    run "netns.sh (as it is: 4 ranks on 2 namespaces, 4 MiB each)" env TMPDIR="$scratch" sh bench/netns.sh "$lanefs"
fi

echo "bench smoke: done, $(($(date +%s) - began)) s in all"
