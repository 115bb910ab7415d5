#!/bin/sh
# How many seeds the fault swarm needs to catch each of the planted bugs
# (lanefs_core::planted::Bug, in lanefs-core and lanefs-mds): runs `lanefs
# swarm` over a range of seeds once per bug and prints a Markdown table
# (first failing seed, failing seeds, how they failed); then, per fault
# class, the same with only that class drawn (`--only`) over the first
# CLASS_SEEDS seeds, to show which class each finding needs.
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
bugs="conflicting-grant cancel-before-ack forget-replay sync-without-commit drop-commit-failure lost-resend ignore-write-error no-callback-timeout silent-eviction late-replay forget-destroy lose-destroy-queue retry-unsafe"
classes="drop delay client_crash ost_crash partition write_failure commit_failure mds_crash mds_drop"

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
echo "Only one fault class drawn (seeds $class_seeds): failing seeds of each bug, or - if none failed."
echo
printf '| planted bug |'
for class in $classes; do printf ' %s |' "$class"; done
echo
printf '| --- |'
for class in $classes; do printf ' --- |'; done
echo
for bug in $bugs; do
    printf '| %s |' "$bug"
    for class in $classes; do
        out=$(LANEFS_PLANTED_BUG=$bug "$lanefs" swarm --seeds "$class_seeds" --jobs "$jobs" --only "$class" || true)
        summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ seeds in ')
        passed=$(printf '%s\n' "$summary" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
        run=$(printf '%s\n' "$summary" | sed -E 's/^([0-9]+) seeds.*/\1/')
        failed=$((run - passed))
        if [ "$failed" -eq 0 ]; then printf ' - |'; else printf ' %s |' "$failed"; fi
    done
    echo
done
