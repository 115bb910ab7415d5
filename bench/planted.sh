#!/bin/sh
# How many seeds the fault swarm needs to catch each of the planted bugs
# (lanefs_core::planted::Bug, in lanefs-core and lanefs-mds): runs `lanefs
# swarm` over a range of seeds once per bug and prints a Markdown table
# (first failing seed, failing seeds, how they failed); then, for each
# fault class, a bug that needs it, with only that class drawn (`--only`)
# over CLASS_SEEDS, to show that every class the swarm draws finds something.
#
#   bench/planted.sh LANEFS_BINARY SEEDS [JOBS] [CLASS_SEEDS]
#
# LANEFS_BINARY must be built with the planted-bugs feature (`make planted`
# builds target/planted/lanefs).
set -eu
lanefs=$1
seeds=$2
jobs=${3:-2}
class_seeds=${4:-0-299}
bugs="conflicting-grant cancel-before-ack forget-replay sync-without-commit drop-commit-failure lost-resend ignore-write-error no-callback-timeout silent-eviction late-replay forget-destroy lose-destroy-queue retry-unsafe unproved-replay miscounted-rpc forget-dirty keep-cancelled-lock"
# Each fault class, and a planted bug whose finding needs it.
pairs="drop:lost-resend delay:silent-eviction client_crash:no-callback-timeout ost_crash:forget-replay partition:silent-eviction write_failure:ignore-write-error commit_failure,ost_crash:drop-commit-failure mds_crash:lose-destroy-queue mds_drop:retry-unsafe"

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

echo
echo "Each fault class with a planted bug that needs it: only that class drawn (seeds $class_seeds)."
echo
echo "| fault class | planted bug | first failing seed | failing seeds |"
echo "| --- | --- | --- | --- |"
for pair in $pairs; do
    class=${pair%%:*}
    bug=${pair#*:}
    out=$(LANEFS_PLANTED_BUG=$bug "$lanefs" swarm --seeds "$class_seeds" --jobs "$jobs" --only "$class" || true)
    summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ seeds in ')
    passed=$(printf '%s\n' "$summary" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    run=$(printf '%s\n' "$summary" | sed -E 's/^([0-9]+) seeds.*/\1/')
    first=$(printf '%s\n' "$out" | grep -E '^first failing seed' | sed -E 's/^first failing seed: ([0-9]+).*/\1/')
    echo "| $class | $bug | ${first:-none} | $((run - passed)) of $run |"
done
