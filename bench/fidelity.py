#!/usr/bin/env python3
"""How well the simulator predicts this machine: every cell of a matrix of
IOR runs, for real and in `lanefs sim ior`, side by side.

The cells run in ROUNDS rounds. Each round begins with `lanefs
calibrate --data DIR --osts OSTS --ranks 8`, which measures this machine
(DIR on the disk under BENCH_DIR; `--quick` with QUICK=1) and writes a
preset; every cell is simulated on that preset (deterministic: one run
on it is all there is), then run once for real, the page cache dropped
before each run (as root; otherwise only synced, and the output says
so). A cell's prediction is the median of its rounds' simulated runs,
set against the median of its real ones: each round's real runs are
predicted from the machine as it was minutes before them, not as it was
an hour or a round before, and the spread of a cell's predictions over
the rounds is the calibration's own noise, which the output shows beside
the real runs'. PRESET=path takes one preset written before for every
round instead (then each cell is simulated once).

Every run writes and fsyncs (IOR -w -e) SIZE_MIB in all, IOR segmented,
in blocks of 4 MiB (less when a rank's share is smaller), the same in
both worlds; every file, shared or not, is striped over all OSTS
OSTs in 1 MiB stripes. Each rank of `-a LANEFS` and of `mpirun` is a
client of its own, as the preset's nodes of one rank each on one host
are (`[compute] hosts = "one"`); the mount is one client for its ranks,
so its cells say `--tasks-per-node` -N in both worlds.
OSTS is 2 by default so that 1, 2 and 4 aggregators per OST are three
different counts for 8 ranks.

  LANEFS   `lanefs ior -a LANEFS` on an embedded cluster of OSTS OSTs whose
           directory is a new one under BENCH_DIR (TMPDIR, which the
           embedded cluster is made in): file per process (-F) and one
           shared file with --lanefs.lock-mode default, noexpand and
           lockahead; -t 64k, 1m, 4m; -N 4 and 8.
  MPIIO    collective MPI-IO (-c) under `mpirun -np 8` on an embedded
           cluster (rank 0 starts it, again under BENCH_DIR): Cray's
           cray_cb_write_lock_mode 0, 1 and 2 with 1, 2 and 4 aggregators
           per OST (cray_cb_nodes_multiplier; with the default OSTS=2 that
           is 2, 4 and 8 of the 8 ranks), 1 MiB transfers; the hints in
           MPICH_MPIIO_HINTS, the same for both worlds. cb_nodes is set to
           the same count, so that mode 0 with one aggregator per OST, where
           ROMIO's rule (cb_nodes, default one per node) applies instead of
           Cray's, has as many aggregators as the other modes.
  mount    `lanefs up --osts OSTS` under BENCH_DIR, mounted (`lanefs
           mount`), `lanefs setstripe -c OSTS -S 1m /`, and `lanefs ior -a
           POSIX` on the mount: file per process and one shared file, -N 8,
           1 MiB transfers. Needs root and /dev/fuse.

The simulated line is the real line with `lanefs sim ior --cluster
PRESET.toml` in front (`-a LANEFS` and `-a MPIIO` cells, `--lanefs.osts`
included: the simulator checks it against the preset's OST count), but
for the mount's cells: their striping comes from `lanefs setstripe` on the
real mount and from `--lanefs.stripe-count` and `--lanefs.stripe-size` in
the simulator, whose `-a POSIX` goes through the preset's `[mount]`, and
the real run's `-o` names a path on the mount.

Lock enqueues and blocking callbacks are the OSTs' counts in both worlds:
the `"lanefs"` object of IOR's JSON (lock_enqueues, blocking_callbacks)
for LANEFS and MPIIO cells and for every simulated run; for the mount,
whose IOR is -a POSIX and reports none, the difference of the OSTs'
`ldlm.namespaces.filter-*.stats` (ldlm_enqueue, ldlm_bl_callback,
through `lanefs lctl get_param`) across the run.

In a virtual machine that hands the memory its guest frees back to its
host (free page reporting: /sys/module/page_reporting), the pages the
dropped cache freed are returned within milliseconds, and the next
writes into the page cache fault each one back in at a tenth of the
usual rate, at no fixed place: as root, the script keeps freed pages
unreported for their first minute (min_free_ms = 60000) while it runs,
writes 2 GiB of new memory and frees it after each drop (8 GiB before
calibrating: pages the host took back before are backed again, and stay
so for that minute), and sets
the host's value back at the end, so that the calibration and the real
runs meet the memory a machine of its own would have; HOST_REPORTING=1
leaves it as it is.

Prints every command as it runs (stderr) and one of each kind with the
table (stdout), the first round's calibration and the measured values that
moved by more than 10% over the rounds' calibrations, then a Markdown
table: per cell the real write bandwidth's median and range, the
prediction's median and range (over the rounds' calibrations), their
ratio, the lock counts real (median) and simulated, and the CPU time of the real run (its whole
processes, start and end included, as their rusage says; not for the
mount, whose daemons are not its children) beside the CPU time the
simulator charged the host's cores (`sim.cpu_busy_s`), and the real run's
context switches (its processes' rusage, voluntary and not: every call's
two, its start and end's, each thread's waits) beside the wake-ups the
simulator charged for messages (`sim.handoffs`, with `handoff_us`; a
call's two are in its `client_cpu_per_call_us`) and for ranks waking from
their sleeps in MPI waits (`sim.mpi_wakeups`), and how busy the simulated
run kept the host's cores (`sim.cpu_busy_s` over `sim.simulated_s` times
the preset's `cores`: near 1, the prediction is bound by the CPU the model
charges); then the share of cells predicted within 25% and
50% (also among the cells whose simulated cores were busy more than half
the run, and among the others), how many cells' own rounds differ by more than 25% and 50% (the
machine's noise during the run: such a cell cannot show whether its
prediction is within 25%) and how many cells' predictions differ by more
than 10% over the rounds' calibrations (and, round by round, whether the
predictions moved as the real runs did), of lock counts within 10%, and, for every two cells of a row (the
same kind, -t and -N; for MPIIO every mode and aggregator count) whose
measured ranges do not overlap, whether the simulator orders them the
same way. A failed cell is shown as failed with its error; the script
goes on and exits 1 at the end.

  bench/fidelity.py       LANEFS (default ./target/release/lanefs), ROUNDS (3; QUICK=1: 1),
                          QUICK=1 (one round, `calibrate --quick`, a smaller matrix: -t 1m,
                          -N 4, LANEFS fpp/default/lockahead, MPIIO modes 0 and 2 with 1
                          aggregator per OST, the mount's two cells; SIZE_MIB 32),
                          PRESET (a calibrated preset to reuse), BENCH_DIR (the disk, default
                          /var/tmp; tmpfs is refused), OSTS (default 2, or the preset's),
                          SIZE_MIB (per run, default 256), CELLS (comma-separated parts of
                          cell names: only those), FIDELITY_JSON (every cell, as JSON),
                          CELL_TIMEOUT (seconds per run, default 600), HOST_REPORTING=1 (leave
                          the VM's free page reporting as it is), SIM_SET ("section.key=value
                          ...": each a --set of every simulated run), RESIMULATE (a file
                          FIDELITY_JSON wrote: no real runs, its cells simulated again on
                          its presets, with SIM_SET, against its real figures)
"""
import contextlib, json, os, resource, shlex, shutil, signal, statistics, subprocess, sys, tempfile, time, tomllib

QUICK = os.environ.get("QUICK") == "1"
ROUNDS = int(os.environ.get("ROUNDS", "1" if QUICK else "3"))
SIZE_MIB = int(os.environ.get("SIZE_MIB", "32" if QUICK else "256"))
CELL_TIMEOUT = float(os.environ.get("CELL_TIMEOUT", "600"))
MPI_RANKS = 8
MOUNT_RANKS = 8
MIB = 1 << 20
DROP = os.geteuid() == 0


class Failed(Exception):
    """A run that failed, with what it printed last."""


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def shown(argv, env_extra=None):
    """A command as a shell would take it, with the environment it needs."""
    prefix = [f"{k}={shlex.quote(v)}" for k, v in (env_extra or {}).items()]
    return " ".join(prefix + [shlex.quote(a) for a in argv])


def tail(text, lines=6):
    return "\n".join(text.strip().splitlines()[-lines:])


def run(argv, env_extra=None, timeout=CELL_TIMEOUT):
    """Runs a command in a session of its own (so that mpirun's children
    go with it on a timeout); returns its standard output, or raises
    Failed with the tail of its standard error."""
    env = dict(os.environ, **(env_extra or {}))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise Failed(f"timed out after {timeout:g} s: {tail(err)}")
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise
    if p.returncode != 0:
        raise Failed(f"exit status {p.returncode}: {tail(err) or tail(out)}")
    return out


def drop_caches(warm_bytes=2 << 30):
    subprocess.run(["sync"], check=True)
    if DROP:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        if REPORTING_DELAYED:
            back_freed_memory(warm_bytes)


# Set while freed pages stay with the guest for a minute (freed_memory_kept).
REPORTING_DELAYED = False
# Written and freed before the calibration, which takes several GiB of new
# memory (its 1 GiB of disk writes, copies, frames, the servers' phases).
CALIBRATION_WARM_BYTES = 8 << 30


def back_freed_memory(warm_bytes):
    """Writes warm_bytes of new memory and frees it: pages the VM's host
    took back long ago are given memory again, and stay the guest's for the
    next minute, so that the run after finds memory as a machine of its own
    would (see the docstring)."""
    import ctypes, mmap
    # Never more than half the memory available (nor more than a quick run
    # needs), so that warming cannot push the machine into swap or the OOM
    # killer.
    warm_bytes = min(warm_bytes // (8 if QUICK else 1), available_bytes() // 2) // mmap.PAGESIZE * mmap.PAGESIZE
    if warm_bytes <= 0:
        return
    with mmap.mmap(-1, warm_bytes) as m:
        ctypes.memset(ctypes.addressof(ctypes.c_char.from_buffer(m)), 1, warm_bytes)


def available_bytes():
    """MemAvailable, from /proc/meminfo (0 if it cannot be read)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    return 0


PAGE_REPORTING_DELAY = "/sys/module/page_reporting/parameters/min_free_ms"


@contextlib.contextmanager
def freed_memory_kept():
    """Keeps the pages the guest frees from going back to a VM's host for a
    minute while the script runs (see the docstring); yields what it did."""
    if not DROP or os.environ.get("HOST_REPORTING") == "1" or not os.path.exists(PAGE_REPORTING_DELAY):
        yield None
        return
    with open(PAGE_REPORTING_DELAY) as f:
        before = f.read().strip()
    try:
        with open(PAGE_REPORTING_DELAY, "w") as f:
            f.write("60000\n")
    except OSError as e:
        yield f"free page reporting left as it is ({PAGE_REPORTING_DELAY}: {e})"
        return
    global REPORTING_DELAYED
    REPORTING_DELAYED = True
    try:
        yield (f"freed pages kept from the VM's host for their first minute ({PAGE_REPORTING_DELAY}: "
               f"{before} -> 60000 while this ran), 2 GiB written and freed after each drop")
    finally:
        REPORTING_DELAYED = False
        with open(PAGE_REPORTING_DELAY, "w") as f:
            f.write(before + "\n")


def ior_report(out):
    """Write bandwidth and the OSTs' lock counts of one IOR JSON report."""
    try:
        j = json.loads(out)
    except json.JSONDecodeError as e:
        raise Failed(f"no IOR JSON report ({e}): {tail(out)}")
    bw = next((s["bwMeanMIB"] for s in j["summary"] if s["operation"] == "write"), None)
    if bw is None:
        raise Failed("the report has no write phase")
    counters = j.get("lanefs") or {}
    sim = j.get("sim") or {}
    return {"bw": bw, "enqueues": counters.get("lock_enqueues"), "callbacks": counters.get("blocking_callbacks"),
            "cpu": sim.get("cpu_busy_s"), "switches": wake_ups(sim), "simulated_s": sim.get("simulated_s")}


def wake_ups(sim):
    """The wake-ups a simulated run charged: threads woken for messages,
    and ranks woken from their sleeps in MPI waits; None if not modelled."""
    if "handoffs" not in sim and "mpi_wakeups" not in sim:
        return None
    return sim.get("handoffs", 0) + sim.get("mpi_wakeups", 0)


def children_cpu():
    """CPU seconds (user and system) of the child processes waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def children_switches():
    """Context switches (voluntary and not) of the child processes waited for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_nvcsw + r.ru_nivcsw


# The matrix.

def size(kib):
    return f"{kib // 1024}m" if kib % 1024 == 0 else f"{kib}k"


def geometry(ranks, transfer_kib):
    """IOR's -b, -t and -s for SIZE_MIB in all over `ranks` ranks."""
    per_rank = max(1, SIZE_MIB // ranks)
    block = min(4, per_rank)
    block = max(block, -(-transfer_kib // 1024))
    return ["-b", f"{block}m", "-t", size(transfer_kib), "-s", str(max(1, per_rank // block))]


def cells(osts):
    """Every cell: its name, kind, row (the cells whose order is compared)
    and IOR arguments (the same in both worlds, apart from what
    `real_command` and `sim_command` add)."""
    out = []
    transfers, ranks = ([1024], [4]) if QUICK else ([64, 1024, 4096], [4, 8])
    layouts = ["fpp", "default", "lockahead"] if QUICK else ["fpp", "default", "noexpand", "lockahead"]
    stripes = [f"--lanefs.stripe-count={osts}", "--lanefs.stripe-size=1m"]
    for t in transfers:
        for n in ranks:
            for layout in layouts:
                which = ["-F"] if layout == "fpp" else [f"--lanefs.lock-mode={layout}"]
                name = f"LANEFS {'fpp' if layout == 'fpp' else 'shared ' + layout} -t {size(t)} -N {n}"
                out.append({"name": name, "kind": "LANEFS", "row": f"LANEFS -t {size(t)} -N {n}", "what": layout,
                            "t_kib": t, "ranks": n,
                            "ior": ["-w", "-e", *geometry(n, t), "-N", str(n), *which, *stripes,
                                    "-O", "summaryFormat=JSON"]})
    n = 4 if QUICK else MPI_RANKS
    modes, mults = ([0, 2], [1]) if QUICK else ([0, 1, 2], [1, 2, 4])
    for mult in mults:
        for mode in modes:
            aggregators = min(osts * mult, n)
            hints = (f"*:striping_factor={osts}:striping_unit=1048576:cray_cb_nodes_multiplier={mult}"
                     f":cb_nodes={aggregators}:cray_cb_write_lock_mode={mode}")
            out.append({"name": f"MPIIO mode {mode}, {mult}/OST ({aggregators} aggr) -N {n}", "kind": "MPIIO",
                        "row": f"MPIIO -t 1m -N {n}", "what": f"mode {mode} x{mult}", "t_kib": 1024, "ranks": n,
                        "mode": mode, "multiplier": mult, "aggregators": aggregators,
                        "env": {"MPICH_MPIIO_HINTS": hints},
                        "ior": ["-c", "-w", "-e", *geometry(n, 1024), "-N", str(n), "-O", "summaryFormat=JSON"]})
    n = 4 if QUICK else MOUNT_RANKS
    for layout in ("fpp", "shared"):
        out.append({"name": f"mount {layout} -t 1m -N {n}", "kind": "mount", "row": f"mount -t 1m -N {n}",
                    "what": layout, "t_kib": 1024, "ranks": n,
                    "ior": ["-w", "-e", *(["-F"] if layout == "fpp" else []), *geometry(n, 1024), "-N", str(n),
                            "--tasks-per-node", str(n), "-O", "summaryFormat=JSON"]})
    wanted = [w.strip() for w in os.environ.get("CELLS", "").split(",") if w.strip()]
    if wanted:
        out = [c for c in out if any(w in c["name"] for w in wanted)]
    return out


def real_command(cell, lanefs, osts, run_dir, mountpoint=None, index=0):
    """The real run's command and the environment it adds."""
    if cell["kind"] == "LANEFS":
        return [lanefs, "ior", "-a", "LANEFS", *cell["ior"], f"--lanefs.osts={osts}"], {"TMPDIR": run_dir}
    if cell["kind"] == "MPIIO":
        mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(cell["ranks"])]
        return ([*mpirun, lanefs, "ior", "-a", "MPIIO", *cell["ior"], f"--lanefs.osts={osts}"],
                {"TMPDIR": run_dir, **cell["env"]})
    return [lanefs, "ior", "-a", "POSIX", *cell["ior"], "-o", f"{mountpoint}/fidelity{index}"], {}


def sim_sets():
    """SIM_SET's `section.key=value` words, each as a `--set`."""
    return [arg for word in os.environ.get("SIM_SET", "").split() for arg in ("--set", word)]


def sim_command(cell, lanefs, preset, osts):
    if cell["kind"] == "mount":
        extra = [f"--lanefs.stripe-count={osts}", "--lanefs.stripe-size=1m"]
        return [lanefs, "sim", "ior", "--cluster", preset, *sim_sets(), "-a", "POSIX", *cell["ior"], *extra], {}
    return ([lanefs, "sim", "ior", "--cluster", preset, *sim_sets(), "-a", cell["kind"], *cell["ior"],
             f"--lanefs.osts={osts}"], dict(cell.get("env", {})))


# The mount.

def ost_lock_counts(lanefs, env):
    """The OSTs' ldlm_enqueue and ldlm_bl_callback, summed."""
    cmd = [lanefs, "lctl", "get_param", "ldlm.namespaces.filter-*.stats"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise Failed(f"{shown(cmd)}: exit status {done.returncode}: {tail(done.stderr)}")
    out = done.stdout
    totals = {"ldlm_enqueue": 0, "ldlm_bl_callback": 0}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in totals:
            totals[words[0]] += int(words[1])
    return totals["ldlm_enqueue"], totals["ldlm_bl_callback"]


# The commands that made the mount, for the record.
MOUNT_SETUP = []


@contextlib.contextmanager
def mounted(lanefs, place, osts):
    """`lanefs up --osts OSTS` with its data under `place`, mounted and
    striped over every OST; yields (mount point, environment with
    LANEFS_MDS). Unmounts, stops the servers and removes the data on every
    way out."""
    data = tempfile.mkdtemp(prefix="mount-", dir=place)
    mountpoint = tempfile.mkdtemp(prefix="lanefs-fidelity-mnt-")
    up = subprocess.Popen([lanefs, "up", "--osts", str(osts), "--data", os.path.join(data, "fs")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    env = dict(os.environ)
    is_mounted = False
    # The first mount's commands are the ones shown (each round makes its own).
    setup = [] if MOUNT_SETUP else MOUNT_SETUP
    setup.append(shown(up.args))
    log(f"$ {shown(up.args)}")
    try:
        for line in up.stdout:
            if line.startswith("export LANEFS_MDS="):
                env["LANEFS_MDS"] = line.strip().split("=", 1)[1]
            if line.startswith("(interrupt"):
                break
        if "LANEFS_MDS" not in env:
            up.kill()
            raise Failed(f"lanefs up printed no MDS address: {tail(up.stderr.read())}")
        for cmd in ([lanefs, "mount", mountpoint], [lanefs, "setstripe", "-c", str(osts), "-S", "1m", "/"]):
            log(f"$ LANEFS_MDS={env['LANEFS_MDS']} {shown(cmd)}")
            setup.append(shown(cmd))
            done = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise Failed(f"{shown(cmd)}: exit status {done.returncode}: {tail(done.stderr)}")
            is_mounted = is_mounted or cmd[1] == "mount"
        yield mountpoint, env
    finally:
        if is_mounted:
            subprocess.run([lanefs, "umount", mountpoint], env=env, capture_output=True)
        up.terminate()
        try:
            up.wait(timeout=30)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
        shutil.rmtree(data, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(mountpoint)


def clear_mount(mountpoint):
    for name in os.listdir(mountpoint):
        os.unlink(os.path.join(mountpoint, name))


# Running.

def calibrate(lanefs, scratch, osts, round_index=0):
    """The preset to simulate round `round_index` with, and the summary
    lines calibrate printed."""
    if os.environ.get("PRESET"):
        return os.path.abspath(os.environ["PRESET"]), [f"preset {os.environ['PRESET']} (PRESET), not measured now"]
    preset = os.path.join(scratch, f"calibrated-{round_index + 1}.toml")
    data = os.path.join(scratch, f"calibrate-{round_index + 1}")
    os.mkdir(data)
    cmd = [lanefs, "calibrate", "--data", data, "--out", preset, "--osts", str(osts), "--ranks", "8"]
    cmd += ["--quick"] if QUICK else []
    log(f"$ {shown(cmd)}")
    # The machine as every real run finds it: with the page cache dropped,
    # so that the disk's and the page cache's rates are not measured while
    # the kernel reclaims what a build or an earlier run left cached.
    drop_caches(CALIBRATION_WARM_BYTES)
    env = dict(os.environ)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"bench/fidelity.py: {shown(cmd)} failed ({p.returncode}):\n{p.stderr}")
    lines = p.stderr.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("measured in")), len(lines))
    summary = [l for l in lines[start:] if not l.startswith("preset written")]
    return preset, [f"$ {shown(cmd)}"] + summary


def preset_values(text):
    """Every number of a preset's text, by `section.key`."""
    values = {}
    for section, table in tomllib.loads(text).items():
        for key, value in (table.items() if isinstance(table, dict) else ()):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values[f"{section}.{key}"] = value
    return values


def drift(texts):
    """The values that moved by more than 10% (largest over smallest)
    over the presets' texts, with each preset's: lines to print."""
    tables = [preset_values(t) for t in texts]
    lines = []
    for key in tables[0]:
        seen = [t.get(key) for t in tables]
        if any(v is None for v in seen) or min(seen) <= 0:
            continue
        if max(seen) / min(seen) > 1.10:
            lines.append(f"{key}: " + ", ".join(f"{v:g}" for v in seen))
    return lines


def preset_cores(preset):
    """The cores of the preset's compute node (None if it does not say)."""
    with open(preset, "rb") as f:
        return tomllib.load(f).get("compute", {}).get("cores")


def preset_osts(preset):
    with open(preset, "rb") as f:
        storage = tomllib.load(f).get("storage", {})
    return storage.get("oss_count", 1) * storage.get("osts_per_oss", 1)


def fs_type(path):
    """The file system's type as the mount table names it (`stat -f` calls
    ext4 "ext2/ext3": they share a magic number)."""
    with contextlib.suppress(OSError):
        found = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", path], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip()
    return subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True).stdout.strip()


def real_run(cell, lanefs, osts, scratch, mount, index):
    """One real run of a cell: its bandwidth and lock counts."""
    run_dir = tempfile.mkdtemp(prefix="run-", dir=scratch)
    try:
        if cell["kind"] == "mount":
            if isinstance(mount, Exception):
                raise Failed(f"no mount: {mount}")
            mountpoint, env = mount
            argv, extra = real_command(cell, lanefs, osts, run_dir, mountpoint, index)
            cell.setdefault("real_command", f"LANEFS_MDS={env['LANEFS_MDS']} {shown(argv, extra)}")
            log(f"$ {shown(argv, extra)}")
            drop_caches()
            try:
                before = ost_lock_counts(lanefs, env)
                result = ior_report(run(argv, extra))
                after = ost_lock_counts(lanefs, env)
            finally:
                clear_mount(mountpoint)
            result["enqueues"], result["callbacks"] = after[0] - before[0], after[1] - before[1]
            return result
        argv, extra = real_command(cell, lanefs, osts, run_dir)
        cell.setdefault("real_command", shown(argv, {k: v for k, v in extra.items() if k != "TMPDIR"}))
        log(f"$ {shown(argv, extra)}")
        drop_caches()
        # The whole run's CPU time: every rank's client and the embedded
        # servers (under mpirun, its ranks'), their start and end included.
        cpu, switches = children_cpu(), children_switches()
        result = ior_report(run(argv, extra))
        result["cpu"], result["switches"] = children_cpu() - cpu, children_switches() - switches
        return result
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def sim_run(cell, lanefs, preset, osts):
    """The cell simulated on `preset`, added to its predictions
    (`cell["sims"]`, one a preset)."""
    argv, extra = sim_command(cell, lanefs, preset, osts)
    cell["sim_command"] = shown(argv, extra)
    log(f"$ {cell['sim_command']}")
    try:
        sim = ior_report(run(argv, extra))
    except Failed as e:
        sim = {"error": str(e)}
    else:
        cores = preset_cores(preset)
        if sim["cpu"] is not None and sim["simulated_s"] and cores:
            sim["cores_busy"] = sim["cpu"] / (sim["simulated_s"] * cores)
    cell.setdefault("sims", []).append(sim)
    cell["sim"] = median_sim(cell["sims"])


def median_sim(sims):
    """One prediction of a cell from its presets': the first error if any
    failed, else the run of the median bandwidth (the lower of the two
    middle ones for an even count) with the median of all bandwidths and
    their range."""
    failed = next((s for s in sims if s.get("error")), None)
    if failed:
        return failed
    middle = dict(sorted(sims, key=lambda s: s["bw"])[(len(sims) - 1) // 2])
    middle["bw"] = statistics.median(s["bw"] for s in sims)
    middle["bw_range"] = [min(s["bw"] for s in sims), max(s["bw"] for s in sims)]
    return middle


def skip_reason(cell, lanefs):
    if cell["kind"] == "MPIIO":
        if not shutil.which("mpirun"):
            return "mpirun is not installed"
        ldd = subprocess.run(["ldd", lanefs], capture_output=True, text=True).stdout
        if "libmpi" not in ldd:
            return f"{lanefs} was built without MPI"
    if cell["kind"] == "mount" and (os.geteuid() != 0 or not os.path.exists("/dev/fuse")):
        return "mounting needs root and /dev/fuse"
    return None


def measure(matrix, lanefs, osts, scratch):
    """Every round: calibrate, simulate every cell on that preset, run
    every cell for real. Returns each round's (preset, calibration lines)."""
    for cell in matrix:
        cell["real"] = {"bw": [], "enqueues": [], "callbacks": [], "cpu": [], "switches": []}
        cell["skipped"] = skip_reason(cell, lanefs)
        if cell["skipped"]:
            log(f"{cell['name']}: skipped: {cell['skipped']}")
    todo = [c for c in matrix if not c["skipped"]]
    calibrations = []
    index = 0
    for r in range(ROUNDS):
        preset, lines = calibrate(lanefs, scratch, osts, r)
        if preset_osts(preset) != osts:
            sys.exit(f"bench/fidelity.py: the preset {preset} has {preset_osts(preset)} OSTs, the real runs {osts}: "
                     "give OSTS to match it")
        calibrations.append((preset, lines))
        for cell in matrix:
            if cell["skipped"]:
                cell["sim_command"] = shown(*sim_command(cell, lanefs, preset, osts))
            elif r == 0 or not os.environ.get("PRESET"):
                sim_run(cell, lanefs, preset, osts)
        index = real_round(todo, r, lanefs, osts, scratch, index)
    return calibrations


def real_round(todo, r, lanefs, osts, scratch, index):
    """Round `r` of the real runs, in the matrix's order (reversed in odd
    rounds), the mount's cells on a mount made for the round; returns the
    count of real runs so far, `index` those of the rounds before."""
    with contextlib.ExitStack() as stack:
        mount = None
        if any(c["kind"] == "mount" and not c.get("error") for c in todo):
            try:
                mount = stack.enter_context(mounted(lanefs, scratch, osts))
            except Exception as e:  # every mount cell shows it
                mount = e
        for cell in (todo if r % 2 == 0 else todo[::-1]):
            if cell.get("error"):
                continue
            index += 1
            started = time.monotonic()
            try:
                result = real_run(cell, lanefs, osts, scratch, mount, index)
            except Failed as e:
                cell["error"] = str(e)
                log(f"round {r + 1}: {cell['name']}: FAILED: {e}")
                continue
            for k in ("bw", "enqueues", "callbacks"):
                cell["real"][k].append(result[k])
            for k in ("cpu", "switches"):
                if result.get(k) is not None:
                    cell["real"][k].append(result[k])
            log(f"round {r + 1}: {cell['name']}: {result['bw']:.1f} MiB/s, enqueues {result['enqueues']}, "
                f"callbacks {result['callbacks']} ({time.monotonic() - started:.1f} s)")
    return index


# The table and the summary.

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def digest(cell):
    """The cell's figures: real median and range, prediction, ratio."""
    real, sim = cell["real"], cell.get("sim") or {}
    d = {"median": median(real["bw"]), "min": min(real["bw"], default=None), "max": max(real["bw"], default=None),
         "enqueues": median(real["enqueues"]), "callbacks": median(real["callbacks"]),
         "sim_bw": sim.get("bw"), "sim_range": sim.get("bw_range"),
         "sim_enqueues": sim.get("enqueues"), "sim_callbacks": sim.get("callbacks"),
         "cpu": median(real.get("cpu", [])), "sim_cpu": sim.get("cpu"),
         "switches": median(real.get("switches", [])), "sim_switches": sim.get("switches"),
         "sim_busy": sim.get("cores_busy")}
    ok = d["median"] and d["sim_bw"] is not None and not cell.get("error")
    d["ratio"] = d["sim_bw"] / d["median"] if ok else None
    cell["figures"] = d
    return d


def count(v):
    return "n/a" if v is None else f"{v:.0f}"


def seconds(v):
    return "-" if v is None else f"{v:.2f}"


def table(matrix):
    print("| cell | real MiB/s, median (min-max) | simulated MiB/s, median (min-max) | sim / real | enqueues real / sim "
          "| callbacks real / sim | CPU s real / charged | switches real / hand-offs | simulated cores busy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for cell in matrix:
        d = digest(cell)
        sim_error = (cell.get("sim") or {}).get("error")
        if cell["skipped"]:
            real = f"skipped: {cell['skipped']}"
        elif cell.get("error"):
            real = "FAILED"
        else:
            real = f"{d['median']:.0f} ({d['min']:.0f}-{d['max']:.0f})"
        sim = "FAILED" if sim_error else ("-" if d["sim_bw"] is None else f"{d['sim_bw']:.0f}")
        if not sim_error and d["sim_range"] and round(d["sim_range"][0]) != round(d["sim_range"][1]):
            sim += f" ({d['sim_range'][0]:.0f}-{d['sim_range'][1]:.0f})"
        ratio = "-" if d["ratio"] is None else f"{d['ratio']:.2f}"
        real_ok = not cell["skipped"] and not cell.get("error")
        sim_ok = d["sim_bw"] is not None
        enq = f"{count(d['enqueues']) if real_ok else '-'} / {count(d['sim_enqueues']) if sim_ok else '-'}"
        cbs = f"{count(d['callbacks']) if real_ok else '-'} / {count(d['sim_callbacks']) if sim_ok else '-'}"
        cpu = f"{seconds(d['cpu'] if real_ok else None)} / {seconds(d['sim_cpu'])}"
        switches = f"{count(d['switches']) if real_ok and d['switches'] is not None else '-'} / " \
                   f"{count(d['sim_switches']) if d['sim_switches'] is not None else '-'}"
        busy = "-" if d["sim_busy"] is None else f"{100 * d['sim_busy']:.0f}%"
        print(f"| {cell['name']} | {real} | {sim} | {ratio} | {enq} | {cbs} | {cpu} | {switches} | {busy} |")
    failures = [c for c in matrix if c.get("error") or (c.get("sim") or {}).get("error")]
    for cell in failures:
        for world, error in (("real", cell.get("error")), ("simulated", (cell.get("sim") or {}).get("error"))):
            if error:
                print(f"\n{cell['name']}, {world} run failed: {error}")
    return failures


def within(a, b, share):
    """b within `share` of a (a the measured)."""
    if a == 0:
        return b == 0
    return abs(b - a) <= share * abs(a)


def summary(matrix):
    figures = [c["figures"] for c in matrix]
    compared = [d for d in figures if d["ratio"] is not None]
    print()
    if compared:
        w25 = sum(within(d["median"], d["sim_bw"], 0.25) for d in compared)
        w50 = sum(within(d["median"], d["sim_bw"], 0.50) for d in compared)
        print(f"- bandwidth: {w25} of {len(compared)} cells ({100 * w25 / len(compared):.0f}%) predicted within "
              f"+-25% of the measured median, {w50} ({100 * w50 / len(compared):.0f}%) within +-50%")
        for kind in ("LANEFS", "MPIIO", "mount"):
            some = [c["figures"] for c in matrix if c["kind"] == kind and c["figures"]["ratio"] is not None]
            if some:
                ratios = sorted(d["ratio"] for d in some)
                print(f"  - {kind}: {sum(within(d['median'], d['sim_bw'], 0.25) for d in some)} of {len(some)} "
                      f"within +-25%, {sum(within(d['median'], d['sim_bw'], 0.5) for d in some)} within +-50%; "
                      f"sim / real from {ratios[0]:.2f} to {ratios[-1]:.2f}, median {statistics.median(ratios):.2f}")
        busy = [d for d in compared if d["sim_busy"] is not None]
        for label, some in (("more", [d for d in busy if d["sim_busy"] > 0.5]),
                            ("less", [d for d in busy if d["sim_busy"] <= 0.5])):
            if some:
                ratios = sorted(d["ratio"] for d in some)
                print(f"  - the simulated cores busy {label} than half the run: "
                      f"{sum(within(d['median'], d['sim_bw'], 0.25) for d in some)} of {len(some)} within +-25%; "
                      f"sim / real from {ratios[0]:.2f} to {ratios[-1]:.2f}, median {statistics.median(ratios):.2f}")
    else:
        print("- bandwidth: no cell has both a measurement and a prediction")
    # The machine's own noise during the run: a cell whose rounds differ by
    # more than the band cannot show whether its prediction is within it.
    ranged = [c["figures"] for c in matrix
              if c["figures"]["ratio"] is not None and len(c["real"]["bw"]) > 1 and c["figures"]["min"] > 0]
    if ranged:
        wide = sum(d["max"] / d["min"] > 1.25 for d in ranged)
        print(f"- noise: {wide} of {len(ranged)} cells' own rounds differ by more than 25% (largest over smallest), "
              f"{sum(d['max'] / d['min'] > 1.5 for d in ranged)} by more than 50%; the simulation falls within "
              f"the measured range (min-max) in {sum(d['min'] <= d['sim_bw'] <= d['max'] for d in ranged)}")
    # The calibration's own noise: the same cell predicted from each
    # round's measurement of the machine.
    spread = [d for d in compared if d["sim_range"] and d["sim_range"][0] > 0]
    if spread and any(d["sim_range"][1] > d["sim_range"][0] for d in spread):
        widths = sorted(d["sim_range"][1] / d["sim_range"][0] for d in spread)
        print(f"- calibration: over the rounds' calibrations, {sum(w > 1.10 for w in widths)} of {len(widths)} cells' "
              f"predictions differ by more than 10% (largest over smallest), {sum(w > 1.25 for w in widths)} by more "
              f"than 25%; the widest by {100 * (widths[-1] - 1):.0f}%, the median by "
              f"{100 * (statistics.median(widths) - 1):.0f}%")
        follows = rounds_followed(matrix)
        if follows:
            print("  - round by round, each cell's prediction and its real run as shares of the cell's mean over "
                  "the rounds, averaged over the cells: "
                  + "; ".join(f"round {i + 1} {p:.2f} and {r:.2f}" for i, (p, r) in enumerate(follows)))
    cpu = sorted(d["cpu"] / d["sim_cpu"] for d in compared if d["cpu"] and d["sim_cpu"])
    if cpu:
        print(f"- CPU time: the real runs' (whole processes) over what the simulator charges the host's cores, "
              f"in {len(cpu)} cells: from {cpu[0]:.2f} to {cpu[-1]:.2f}, median {statistics.median(cpu):.2f}")
    for key, label in (("enqueues", "lock enqueues"), ("callbacks", "blocking callbacks")):
        both = [d for d in compared if d[key] is not None and d["sim_" + key] is not None]
        good = sum(within(d[key], d["sim_" + key], 0.10) for d in both)
        print(f"- {label}: {good} of {len(both)} cells predicted within 10% of the measured median")
    pairs, wrong = 0, []
    rows = {}
    for c in matrix:
        if c["figures"]["ratio"] is not None:
            rows.setdefault(c["row"], []).append(c)
    for row, members in rows.items():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                fa, fb = a["figures"], b["figures"]
                if fa["min"] > fb["max"]:
                    hi, lo = a, b
                elif fb["min"] > fa["max"]:
                    hi, lo = b, a
                else:
                    continue
                pairs += 1
                sim_hi, sim_lo = hi["figures"]["sim_bw"], lo["figures"]["sim_bw"]
                if not sim_hi > sim_lo:
                    wrong.append(f"{row}: {hi['what']} > {lo['what']} measured "
                                 f"({hi['figures']['median']:.1f} vs {lo['figures']['median']:.1f} MiB/s), simulated "
                                 f"{sim_hi:.1f} vs {sim_lo:.1f}" + (" (a tie)" if sim_hi == sim_lo else ""))
    print(f"- order: of {pairs} pairs of cells in a row whose measured ranges (min-max) do not overlap, the "
          f"simulator orders {pairs - len(wrong)} the same way" + (", not these:" if wrong else ""))
    for w in wrong:
        print(f"  - {w}")
    return {"pairs": pairs, "wrong": wrong}


def rounds_followed(matrix):
    """Per round, the mean over the cells run in every round of the
    round's prediction over the cell's mean prediction, and the same of
    its real run: whether a round's calibration saw the machine its real
    runs met. None unless some cell has a prediction and a real run in
    each of two rounds or more."""
    both = [c for c in matrix if not c.get("error") and len(c.get("sims") or []) > 1
            and len(c.get("sims")) == len(c["real"]["bw"]) and all(not s.get("error") for s in c["sims"])]
    if not both:
        return None
    shares = []
    for i in range(len(both[0]["sims"])):
        p = statistics.mean(c["sims"][i]["bw"] / statistics.mean(s["bw"] for s in c["sims"]) for c in both)
        r = statistics.mean(c["real"]["bw"][i] / statistics.mean(c["real"]["bw"]) for c in both)
        shares.append((p, r))
    return shares


def interrupted(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def resimulate(lanefs, path):
    """The matrix FIDELITY_JSON kept at `path`, simulated again (with
    SIM_SET, this binary) on the presets it kept (one a round, or the one
    of a file written before rounds had their own), against its real
    figures."""
    with open(path) as f:
        kept = json.load(f)
    osts = kept["osts"]
    texts = kept.get("presets") or [kept["preset"]]
    with tempfile.TemporaryDirectory(prefix="lanefs-resimulate-") as d:
        matrix = kept["cells"]
        for cell in matrix:
            cell.setdefault("env", {})
            cell.pop("sims", None)
        presets = []
        for i, text in enumerate(texts):
            preset = os.path.join(d, f"calibrated-{i + 1}.toml")
            presets.append(preset)
            with open(preset, "w") as f:
                f.write(text)
            for cell in matrix:
                if not cell.get("skipped"):
                    sim_run(cell, lanefs, preset, osts)
        print(f"The real figures of {path} ({kept['rounds']} round(s) of {kept['size_mib']} MiB each, {osts} OSTs "
              f"under {kept['place']}), simulated again on its {len(texts)} preset(s)"
              + (f" with SIM_SET={os.environ['SIM_SET']}" if os.environ.get("SIM_SET") else "") + ":")
        shown_command = next(c["sim_command"] for c in matrix if c.get("sim_command"))
        for i, preset in enumerate(presets):
            shown_command = shown_command.replace(preset, f"<preset {i + 1} kept in {path}>")
        print(f"    simulated: {shown_command}")
        print()
        failures = table(matrix)
        summary(matrix)
    return 1 if failures else 0


def main():
    lanefs = os.path.abspath(os.environ.get("LANEFS", "./target/release/lanefs"))
    if not os.access(lanefs, os.X_OK):
        sys.exit(f"bench/fidelity.py: {lanefs} is not there: make build (or LANEFS=path)")
    if os.environ.get("RESIMULATE"):
        return resimulate(lanefs, os.environ["RESIMULATE"])
    if ROUNDS < 1:
        sys.exit(f"bench/fidelity.py: ROUNDS={ROUNDS}: give at least 1")
    place = os.environ.get("BENCH_DIR") or ("/var/tmp" if os.path.isdir("/var/tmp") else tempfile.gettempdir())
    if fs_type(place) in ("tmpfs", "ramfs"):
        sys.exit(f"bench/fidelity.py: {place} is {fs_type(place)}: the OSTs and the calibration must be on a disk "
                 "(BENCH_DIR=DIR on one)")
    scratch = tempfile.mkdtemp(prefix="lanefs-fidelity-", dir=place)
    # SIGTERM (and SIGHUP) go through the same cleanup as an interrupt.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    try:
        with freed_memory_kept() as reporting:
            return measure_and_print(lanefs, place, scratch, reporting)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure_and_print(lanefs, place, scratch, reporting):
    osts = int(os.environ.get("OSTS") or (preset_osts(os.environ["PRESET"]) if os.environ.get("PRESET") else 2))
    matrix = cells(osts)
    began = time.monotonic()
    calibrations = measure(matrix, lanefs, osts, scratch)
    elapsed = time.monotonic() - began
    preset_texts = []
    for preset, _ in calibrations:
        with open(preset) as f:
            preset_texts.append(f.read())
    calibration = calibrations[0][1]
    caches = "page cache dropped before every real run" if DROP else \
        "page cache NOT dropped between runs (not root: only synced)"
    if reporting:
        caches += f"; {reporting}"
        if REPORTING_DELAYED:
            caches += f", {CALIBRATION_WARM_BYTES >> 30} GiB before calibrating"
    each = "one preset for every round" if os.environ.get("PRESET") else "a calibration and a simulated run each"
    print(f"Real and simulated IOR writes on this machine: {ROUNDS} round(s) of each real run ({each}); "
          f"{SIZE_MIB} MiB per run (-w -e), {osts} OSTs on {fs_type(place)} under {place}, every file striped over "
          f"all {osts} in 1 MiB stripes; {caches}; {elapsed:.0f} s of rounds, calibrations included.")
    calibrated_each_round = len(calibrations) > 1 and not os.environ.get("PRESET")
    print("Calibration" + (", the first round's:" if calibrated_each_round else ":"))
    for line in calibration:
        print(f"    {line}")
    if calibrated_each_round:
        moved = drift(preset_texts)
        print(f"  Measured values that moved by more than 10% over the {len(calibrations)} rounds' calibrations"
              + (":" if moved else ": none"))
        for line in moved:
            print(f"    {line}")
    if not os.environ.get("PRESET"):
        print("    (the presets go with the run's temporary directory: FIDELITY_JSON keeps their text; "
              "PRESET=path reuses one)")
    print("Commands (every run's is printed on stderr as it runs; TMPDIR is a new directory on the disk for each "
          "real run):")
    seen = set()
    for cell in matrix:
        if cell["kind"] in seen:
            continue
        seen.add(cell["kind"])
        if cell["kind"] == "mount" and MOUNT_SETUP:
            print(f"    mount:     {'; '.join(MOUNT_SETUP)}")
        if cell.get("real_command"):
            print(f"    real:      {cell['real_command']}")
        else:
            print(f"    real:      (not run: {cell['skipped'] or cell.get('error')})")
        print(f"    simulated: {cell['sim_command']}")
    print()
    failures = table(matrix)
    order = summary(matrix)
    if os.environ.get("FIDELITY_JSON"):
        keep = ("name", "kind", "row", "what", "t_kib", "ranks", "mode", "multiplier", "aggregators", "env", "ior",
                "real_command", "sim_command", "real", "sim", "sims", "figures", "error", "skipped")
        # "preset" and "calibration" are the first round's, as one
        # preset's files had them; "presets" and "calibrations" every round's.
        report = {"rounds": ROUNDS, "size_mib": SIZE_MIB, "osts": osts, "place": place, "caches_dropped": DROP,
                  "calibration": calibration, "preset": preset_texts[0], "order": order,
                  "calibrations": [lines for _, lines in calibrations], "presets": preset_texts,
                  "cells": [{k: c[k] for k in keep if k in c} for c in matrix]}
        with open(os.environ["FIDELITY_JSON"], "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt as e:
        sys.exit(f"bench/fidelity.py: interrupted ({e or 'SIGINT'}); mounts and temporary directories removed")
