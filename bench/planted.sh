#!/bin/sh
# How many seeds the fault swarm needs to catch each of lanefs-core's
# planted bugs: runs `lanefs swarm` over a range of seeds once per bug and
# prints a Markdown table (first failing seed, failing seeds, how they failed).
#
#   bench/planted.sh LANEFS_BINARY SEEDS [JOBS]
#
# LANEFS_BINARY must be built with the planted-bugs feature (`make planted`
# builds target/planted/lanefs). The names are lanefs_core::planted::Bug's.
set -eu
lanefs=$1
seeds=$2
jobs=${3:-2}
bugs="conflicting-grant cancel-before-ack forget-replay sync-without-commit drop-commit-failure lost-resend ignore-write-error no-callback-timeout silent-eviction late-replay"

echo "| planted bug | first failing seed | failing seeds | crash / liveness / correctness | seeds/s |"
echo "| --- | --- | --- | --- | --- |"
for bug in $bugs; do
    out=$(LANEFS_PLANTED_BUG=$bug "$lanefs" swarm --seeds "$seeds" --jobs "$jobs" || true)
    summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ seeds in ')
    run=$(printf '%s\n' "$summary" | sed -E 's/^([0-9]+) seeds.*/\1/')
    rate=$(printf '%s\n' "$summary" | sed -E 's/.*\(([0-9.]+) seeds\/s.*/\1/')
    crashed=$(printf '%s\n' "$summary" | sed -E 's/.* ([0-9]+) crashed.*/\1/')
    liveness=$(printf '%s\n' "$summary" | sed -E 's/.* ([0-9]+) liveness.*/\1/')
    correctness=$(printf '%s\n' "$summary" | sed -E 's/.* ([0-9]+) correctness.*/\1/')
    first=$(printf '%s\n' "$out" | grep -E '^first failing seed' | sed -E 's/^first failing seed: ([0-9]+).*/\1/')
    failed=$((crashed + liveness + correctness))
    echo "| $bug | ${first:-none} | $failed of $run | $crashed / $liveness / $correctness | $rate |"
done
