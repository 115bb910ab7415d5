#!/usr/bin/env bash
# What `make test` checks of the fuzz targets, with plain cargo (no AFL):
# that they still build against the current crates (`cargo check`, which
# links nothing, so needs no AFL runtime), and that the seed corpus is what
# the current messages make (`seeds --check`, which runs each seed through
# its target and writes nothing). A message changed in the crates shows up
# here, not at the next `make fuzz`.
set -euo pipefail
cd "$(dirname "$0")"
cargo check --locked --all-targets --quiet
cargo run --locked --quiet --bin seeds -- --check >/dev/null
