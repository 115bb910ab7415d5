#!/usr/bin/env bash
# Runs every fuzz target for FUZZ_SECONDS seconds each (default 180), one
# after the other, then lists the crashes and hangs found; exits 1 if there
# are any.
# Used by `make fuzz`; FUZZ_TARGETS picks targets (default: all four).
set -euo pipefail
cd "$(dirname "$0")"
seconds=${FUZZ_SECONDS:-180}
targets=${FUZZ_TARGETS:-"codec ost client mds"}

command -v cargo-afl >/dev/null 2>&1 || cargo install cargo-afl --locked
if [ "$(id -u)" = 0 ] && ! command -v afl-fuzz >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # Debian's AFL++ brings afl-tmin and friends; cargo-afl has its own afl-fuzz.
  apt-get install -y -qq afl++ >/dev/null 2>&1 || echo "afl++ not installed from apt; cargo-afl's own AFL++ is used"
fi
# Builds AFL++ for this toolchain once (an error says it is built already).
cargo afl config --build >/dev/null 2>&1 || true
cargo afl build --release --locked --bins

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1
mkdir -p out
status=0
for target in $targets; do
  out=out/$target
  echo "fuzzing $target for $seconds s (findings in fuzz/$out)"
  # Resume a previous run's queue when there is one.
  input=corpus/$target
  [ -d "$out/default/queue" ] && input=-
  cargo afl fuzz -i "$input" -o "$out" -V "$seconds" -- "target/release/$target" >"$out.log" 2>&1 || {
    echo "afl-fuzz failed on $target; see fuzz/$out.log"; tail -20 "$out.log"; status=1; }
  stats=$out/default/fuzzer_stats
  [ -f "$stats" ] && grep -E '^(execs_done|execs_per_sec|corpus_count|edges_found|total_edges|saved_crashes|saved_hangs) ' "$stats" | tr -s ' ' | sed 's/^/  /'
  for kind in crashes hangs; do
    found=$(find "$out/default/$kind" -type f -name 'id:*' 2>/dev/null | wc -l)
    if [ "$found" -gt 0 ]; then
      echo "  $found $kind in fuzz/$out/default/$kind: reproduce with"
      echo "  (cd fuzz && cargo afl run --release --bin replay -- $target $out/default/$kind/id*)"
      status=1
    fi
  done
done
exit $status
