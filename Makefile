# lanefs: the two commands are `make demo` and `make test`.
# Both install what they need (Rust via rustup if cargo is missing; crates via cargo).

CARGO ?= cargo
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: tidy demo test test-tools mpi-deps bench bench-smoke build install uninstall pgo deps fmt clippy clean load fuzz swarm planted

deps:
	@command -v cargo >/dev/null 2>&1 || { \
	  echo "cargo not found: installing Rust with rustup"; \
	  command -v curl >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && apt-get install -y -qq curl ca-certificates; }; \
	  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt,clippy; }
	@rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy 2>/dev/null || true

# lanefs runs as the ranks of mpirun when built with the mpi feature, which
# links Open MPI: as root, make installs Open MPI, its headers and libclang
# (for the mpi crate's bindings) from Debian; where they are missing and
# cannot be installed, lanefs is built without it.
mpi-deps:
	@if [ "$$(id -u)" = 0 ] && { ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1 || \
	    ! ls /usr/lib/llvm-*/lib/libclang*.so >/dev/null 2>&1; }; then \
	  echo "installing Open MPI, its headers and libclang (lanefs's MPI build)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev libclang-dev; fi

# Evaluated when a recipe runs, after mpi-deps.
MPI_FEATURE = $(shell command -v mpicc >/dev/null 2>&1 && echo --features mpi)
# The same, for the workspace's tests.
TEST_FEATURES = $(shell command -v mpicc >/dev/null 2>&1 && echo --features lanefs/mpi,lanefs-mpiio/mpi)

build: deps mpi-deps
	$(CARGO) build --release --locked --bin lanefs $(MPI_FEATURE)

# Install the release build under PREFIX (DESTDIR in front, for staging):
# bin/lanefs, its man pages (lanefs.1 and one per command) and its bash, zsh
# and fish completions, all made by the binary from its own definitions.
PREFIX ?= /usr/local
# Installs no packages: lanefs is built with Open MPI where it is there
# already (`make build` installs it, as root). `make uninstall` removes
# what this put there.
install: deps
	$(CARGO) build --release --locked --bin lanefs $(MPI_FEATURE)
	@set -e; stage=$$(mktemp -d); trap 'rm -rf "$$stage"' EXIT; \
	  ./target/release/lanefs man "$$stage/man1"; \
	  for shell in bash zsh fish; do ./target/release/lanefs completions $$shell > "$$stage/lanefs.$$shell"; done; \
	  install -d "$(DESTDIR)$(PREFIX)/bin" "$(DESTDIR)$(PREFIX)/share/man/man1" \
	    "$(DESTDIR)$(PREFIX)/share/bash-completion/completions" "$(DESTDIR)$(PREFIX)/share/zsh/site-functions" \
	    "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d"; \
	  install -m 755 target/release/lanefs "$(DESTDIR)$(PREFIX)/bin/lanefs"; \
	  install -m 644 "$$stage"/man1/*.1 "$(DESTDIR)$(PREFIX)/share/man/man1/"; \
	  install -m 644 "$$stage/lanefs.bash" "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/lanefs"; \
	  install -m 644 "$$stage/lanefs.zsh" "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_lanefs"; \
	  install -m 644 "$$stage/lanefs.fish" "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/lanefs.fish"; \
	  install -d "$(DESTDIR)$(PREFIX)/include"; \
	  install -m 644 include/lanefs_user.h "$(DESTDIR)$(PREFIX)/include/lanefs_user.h"; \
	  if command -v mpicc >/dev/null 2>&1; then \
	    mpicc -shared -fPIC -O2 -Wall -Iinclude c/lanefs_mpiio_striping.c -o "$$stage/liblanefs-mpiio-striping.so"; \
	    install -d "$(DESTDIR)$(PREFIX)/lib/lanefs"; \
	    install -m 755 "$$stage/liblanefs-mpiio-striping.so" "$(DESTDIR)$(PREFIX)/lib/lanefs/"; fi; \
	  echo "installed lanefs, its man pages, completions and header under $(DESTDIR)$(PREFIX)"

uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/lanefs" "$(DESTDIR)$(PREFIX)/share/man/man1/lanefs.1" \
	  "$(DESTDIR)$(PREFIX)/share/man/man1/"lanefs-*.1 \
	  "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/lanefs" \
	  "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_lanefs" \
	  "$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/lanefs.fish" \
	  "$(DESTDIR)$(PREFIX)/include/lanefs_user.h" "$(DESTDIR)$(PREFIX)/lib/lanefs/liblanefs-mpiio-striping.so"
	-rmdir "$(DESTDIR)$(PREFIX)/lib/lanefs" 2>/dev/null
	@echo "removed lanefs, its man pages and completions from $(DESTDIR)$(PREFIX)"

# The demo's last part: collective MPI-IO under mpirun, one shared file
# written by 4 MPI processes through 4 aggregators, with default locking
# and with lockahead (Cray's cray_cb_write_lock_mode 0 and 2).
DEMO_MPIIO_HINTS = *:striping_factor=2:cray_cb_nodes_multiplier=2:cray_cb_write_lock_mode=
demo: build
	./target/release/lanefs demo
	@if [ -n "$(MPI_FEATURE)" ] && command -v mpirun >/dev/null 2>&1; then \
	  for mode in 0 2; do \
	    echo; echo "== MPICH_MPIIO_HINTS='$(DEMO_MPIIO_HINTS)$$mode' MPICH_MPIIO_TIMERS=1 \\"; \
	    echo "   mpirun -np 4 lanefs ior -a MPIIO -c -w -r -W -R -e -b 1m -t 1m -s 64"; \
	    MPICH_MPIIO_HINTS="$(DEMO_MPIIO_HINTS)$$mode" MPICH_MPIIO_TIMERS=1 \
	      mpirun --allow-run-as-root --oversubscribe -np 4 ./target/release/lanefs ior -a MPIIO -c \
	      -w -r -W -R -e -b 1m -t 1m -s 64 || exit 1; \
	  done; \
	else echo "(collective MPI-IO under mpirun skipped: lanefs was built without Open MPI)"; fi

# Programs the mount's tests run through a real mount (as root, where they
# can mount): fio and h5py, from Debian; and Open MPI with what the mpi
# crate needs to build (its headers, and libclang for its bindings), for
# the collective layer's tests under mpirun. valgrind: bench/trust.py's
# INSTRUCTIONS=1, which bench/smoke.sh runs. prometheus: the metrics test
# scrapes a running cluster with it.
test-tools: mpi-deps
	@if [ "$$(id -u)" = 0 ] && { ! command -v fio >/dev/null 2>&1 || ! command -v valgrind >/dev/null 2>&1 || \
	    ! command -v prometheus >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1 || \
	    ! /usr/bin/python3 -c 'import h5py, mpi4py' 2>/dev/null; }; then \
	  echo "installing fio, python3-h5py, python3-h5py-mpi, valgrind, prometheus and chromium for the mount's tests, the metrics and report tests and bench/smoke.sh"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio python3-h5py python3-h5py-mpi valgrind prometheus chromium; fi

# The workspace's shape (tools/tidy.py): no import circles, no client crate
# on server code or SQLite, no function past 70 lines past its list.
tidy: deps
	python3 tools/tidy.py

# Where Open MPI's headers are (test-tools installs them as root), the
# tests are built once, with MPI, and the tests under mpirun run among the
# others; clippy checks the build without MPI too. The fuzz targets are
# checked to build and to make the seed corpus kept in fuzz/corpus
# (fuzz/check.sh, plain cargo, no AFL). Then the client's parts each
# catch their own planted bug, in the swarm and in the simulator's check
# mode (a build with the planted-bugs feature, test builds only). Last,
# each cargo bench benchmark once and every bench script once at its
# smallest settings, on the debug build the tests made (bench/smoke.sh).
test: deps test-tools tidy
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	fuzz/check.sh
	@if [ -n "$(MPI_FEATURE)" ]; then \
	  $(CARGO) clippy --locked -p lanefs -p lanefs-mpiio --features lanefs/mpi,lanefs-mpiio/mpi --all-targets -- -D warnings && \
	  $(CARGO) test --locked --workspace --features lanefs/mpi,lanefs-mpiio/mpi; \
	else \
	  echo "skipped: the tests under mpirun need Open MPI's headers and libclang (apt-get install libopenmpi-dev libclang-dev)"; \
	  $(CARGO) test --locked --workspace; \
	fi
	$(CARGO) test --locked -p lanefs-sim -p lanefs-swarm --features lanefs-sim/planted-bugs,lanefs-swarm/planted-bugs \
	  --test planted_parts
	$(CARGO) test --locked --workspace $(TEST_FEATURES) --bench '*'
	bench/smoke.sh target/debug/lanefs

# The servers under a longer load than make test's: as many connections as
# the descriptor limit allows (up to 30,000) and ten times the requests;
# then the others' bandwidth and latency before and during a flood of
# handshakes that never finish and one user's flood of file locks. Built
# as users run it (release): a debug build checks each table's invariants
# at every change, which is what a load test would then measure.
load: deps
	$(CARGO) test --release --locked -p lanefs-server --test load -- --ignored --nocapture the_long_load
	$(CARGO) test --release --locked -p lanefs-server --test fair_load -- --ignored --nocapture

# Coverage-guided fuzzing (cargo afl) of the codec, the OST, the client and
# the MDS: FUZZ_SECONDS per target (default 180); fails if a crash is found.
fuzz: deps
	fuzz/run.sh

# A profile-guided build for large simulations (target/pgo/release/lanefs).
pgo: deps
	bench/pgo.sh

# Each `cargo bench` benchmark once (criterion's test mode) and every bench
# script once at its smallest settings (bench/smoke.sh, with the debug
# build), so that none of them breaks unseen; `make test` ends with the
# same two steps, on the build its tests made.
bench-smoke: deps mpi-deps
	$(CARGO) build --locked -p lanefs --bin lanefs $(MPI_FEATURE)
	$(CARGO) test --locked --workspace $(TEST_FEATURES) --bench '*'
	bench/smoke.sh target/debug/lanefs

bench: build
	bench/pgo.sh || [ $$? -eq 2 ]
	$(CARGO) bench --locked -p lanefs-core --bench core
	./target/release/lanefs demo --json
	python3 bench/fs.py
	python3 bench/trust.py
	command -v valgrind >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
	INSTRUCTIONS=1 ROUNDS=3 BENCH_DIR=/dev/shm python3 bench/trust.py
	python3 bench/mount.py
	python3 bench/mpiio.py
	$(CARGO) bench --locked -p lanefs-sim --bench queue
	python3 bench/sim.py
	python3 bench/ablation.py
	python3 bench/fidelity.py
	python3 bench/timeseries.py

# The fault swarm over fresh seeds for SWARM_SECONDS (default 10 minutes);
# exits 127, 128 or 129 on the first kind of failure (lanefs swarm --help).
SWARM_SECONDS ?= 600
swarm: build
	./target/release/lanefs swarm --seconds $(SWARM_SECONDS)

# How many seeds the swarm needs to catch each planted bug (bench/RESULTS.md).
PLANTED_SEEDS ?= 0-199
PLANTED_CLASS_SEEDS ?= 0-99
planted: deps
	$(CARGO) build --locked --profile planted -p lanefs --features planted-bugs --bin lanefs
	bench/planted.sh target/planted/lanefs $(PLANTED_SEEDS) 2 $(PLANTED_CLASS_SEEDS)

clean:
	$(CARGO) clean
