#!/usr/bin/env bash
# A profile-guided build of lanefs for large simulations: target/pgo/release/lanefs.
#
# 1. Build lanefs instrumented (-Cprofile-generate).
# 2. Run it on a training set of simulations. The set leaves out the exact
#    command whose speed `bench/sim.py` reports (scenario (a) at -s 16): it
#    runs the same kind of job at other sizes, aggregator counts and lock
#    modes, independent I/O, file per process and another cluster.
# 3. Merge the profiles with the llvm-profdata of the compiler's own LLVM
#    (rustup's llvm-tools component) and build again with -Cprofile-use.
#
# The profile is of the simulator only: the real file system's paths (the
# daemons, the FUSE mount) are cold in it and laid out for size, so use the
# plain `cargo build --release` binary for those.
#
# Exits 2 with a message when llvm-profdata cannot be had (no rustup); the
# caller then measures the plain build alone.
#
# PGO_TRAIN_WITH=LANEFS runs step 2's training set with that binary, each
# command at its smallest size (-s 1, -b 1m), and builds nothing: a check
# that the set's commands still run.
set -euo pipefail
train_with=${PGO_TRAIN_WITH:+$(realpath "$PGO_TRAIN_WITH")}
cd "$(dirname "$0")/.."

train() {
  local args=() prev=
  for a in "$@"; do
    if [ -n "$train_with" ]; then
      case $prev in -s) a=1 ;; -b) a=1m ;; esac
    fi
    args+=("$a")
    prev=$a
  done
  "$gen" sim ior "${args[@]}" -O summaryFormat=JSON >/dev/null
}
training_set() {
  local coll=(-a MPIIO -c -w -e -b 1m -t 1m -N 768 --tasks-per-node 4)
  for mult in 1 2 4 8; do
    for mode in 0 1 2; do
      train --cluster cray-xc40-24ost "${coll[@]}" -s 4 \
        --hints "striping_factor=24:cray_cb_nodes_multiplier=$mult:cray_cb_write_lock_mode=$mode"
    done
  done
  train --cluster cray-xc40-24ost "${coll[@]}" -s 8 --set compute.round_jitter_us=1000 \
    --hints striping_factor=24:cray_cb_nodes_multiplier=4:cray_cb_write_lock_mode=0
  train --cluster cray-xc40-24ost -a POSIX -F -w -r -e -b 4m -t 1m -N 768 --tasks-per-node 4
  for mode in default noexpand lockahead group; do
    train --cluster cray-xc40-24ost -a POSIX -w -r -e -b 4m -t 1m -N 192 --tasks-per-node 4 \
      --lanefs.lock-mode=$mode --lanefs.stripe-count=-1
  done
  train --cluster laptop -a MPIIO -c -w -r -e -b 4m -t 256k -N 8 --tasks-per-node 4 \
    --hints cray_cb_write_lock_mode=2
}

if [ -n "$train_with" ]; then
  gen=$train_with
  training_set
  echo "pgo: the training set ran with $gen; nothing built" >&2
  exit 0
fi

# No stale binary is left to be timed if this build fails.
rm -f target/pgo/release/lanefs

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  if command -v rustup >/dev/null 2>&1; then
    rustup component add llvm-tools >/dev/null 2>&1 || true
  fi
  if [ ! -x "$profdata" ]; then
    echo "pgo: llvm-profdata not found at $profdata; install it with 'rustup component add llvm-tools'" >&2
    exit 2
  fi
fi

data=target/pgo-data
rm -rf "$data"
mkdir -p "$data"
# --target keeps the flags off build scripts and procedural macros.
RUSTFLAGS="-Cprofile-generate=$PWD/$data" cargo build --release --locked --bin lanefs \
  --target "$host" --target-dir target/pgo-gen
gen="target/pgo-gen/$host/release/lanefs"
training_set

"$profdata" merge -o "$data/lanefs.profdata" "$data"/*.profraw
RUSTFLAGS="-Cprofile-use=$PWD/$data/lanefs.profdata" cargo build --release --locked --bin lanefs \
  --target "$host" --target-dir target/pgo-use
mkdir -p target/pgo/release
cp "target/pgo-use/$host/release/lanefs" target/pgo/release/lanefs
echo "pgo: built target/pgo/release/lanefs" >&2
