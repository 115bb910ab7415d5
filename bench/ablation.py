#!/usr/bin/env python3
"""What each cost mechanism of the simulator changes on the seed scenario.

The seed scenario is the CUG 2017 lockahead talk's IOR run on the
simulated 24-OST Cray: collective MPI-IO writes, 192 nodes x 4 ranks,
1 MiB transfers, 24 stripes, 8 aggregators per OST, default locking
(cray_cb_write_lock_mode=0) against lockahead (=2). The preset
(presets/cray-xc40-24ost.toml) turns none of the mechanisms on; each row
here turns one on with `--set`, then all of them together, and shows both
modes' bandwidth, the lockahead gain, and the gain's change from the
preset's.

Each value is from a source or measured on this machine, never chosen to
move a result; where only this machine gives a figure (a Haswell node of
2017 is not at hand), the row says so and its value is a stand-in:

  cores           32: an XC40 node's two 16-core Haswell sockets (Xeon
                  E5-2698 v3), as on Shaheen II, the XC40 of the KAUST
                  training the seed talks include.
  callback        128 blocking-callback threads a client, Lustre's
  threads         LDLM_NTHRS_MAX on a node of more than one CPU
                  (lustre/ldlm/ldlm_lockd.c, ldlm_setup).
  server CPU per  the preset's lock_cpu_us: a callback is one more request
  callback        through the lock service (an assumption: no source gives
                  its cost).
  checksums       Lustre clients checksum bulk RPCs by default (checksums=1,
                  adler32 where the CPU has no faster algorithm): this
                  machine's adler32 rate (Python's zlib, 256 MiB), a
                  stand-in.
  client CPU per  lanefs's own client on this machine, as `lanefs calibrate
  RPC, per page   --quick` measures it (CALIBRATED=path to take a preset
                  written before), a stand-in for Lustre's ptlrpcd and osc.
  MPI per message the same calibration's MPI time per message (Open MPI on
                  this machine), a stand-in for Cray MPICH on Aries.
  client CPU per  the same calibration's CPU time of a read or write call
  call            of lanefs's client library (handed to its thread and
                  back), a stand-in for a Lustre client's system call path.
  hand-offs       the same calibration's CPU time of waking a sleeping
                  thread for a message, on a busy core and on an idle one
                  (this machine is a virtual machine: waking an idle core
                  costs tens of times what it does on bare metal), a
                  stand-in for ptlrpcd's wake-ups; with the servers on
                  their own nodes only the client's are charged.
  unstable pages  a client keeps what its OST acknowledged until the OST
  kept            commits it, against its cache budget (Lustre's unstable
                  pages, lanefs's network client), and the OSTs number
                  and commit their changes.
  OSS CPU per     the same calibration's servers' CPU time per page of a
  page            1 MiB write RPC, lanefs's OSS here, a stand-in for a
                  Lustre OSS's.
  a node's locks  16 processes of a node writing one file at full speed at
                  once (the lock on its attributes), 32 copying into its
                  page cache (the page cache's lock, 32 to 64): the KNL
                  client talk of the seeds. The seed scenario runs 4 ranks
                  a node, so a second table runs 1 to 64 ranks on one
                  KNL-like node (copying at 300 MB/s, the talk's KNL core,
                  model-params), -a POSIX, one shared file and a file
                  each, without and with the two locks.

The OSTs' syncs' CPU (sync_cpu_us, writeback_cpu_gib_s) is charged only
on cores the servers share (a calibrated preset of one host), never on the
seed scenario's Cray, whose servers run on nodes of their own: it has no
row.

  SEGMENTS        IOR's -s (default 64; 8 with QUICK=1)
  LANEFS          the binary (default ./target/release/lanefs)

Prints the commands and a Markdown table.
"""
import json, os, subprocess, sys, tempfile, time, tomllib, zlib

LANEFS = os.environ.get("LANEFS", "./target/release/lanefs")
SEGMENTS = os.environ.get("SEGMENTS") or ("8" if os.environ.get("QUICK") == "1" else "64")
PRESET = "cray-xc40-24ost"
LINE = ["-a", "MPIIO", "-c", "-w", "-N", "768", "--tasks-per-node", "4", "-b", "1m", "-t", "1m", "-s", SEGMENTS]


NODE_LOCKS = ["compute.file_lock_writers=16", "compute.page_cache_lock_writers=32"]
# 300 MB/s (model-params: one KNL core) x 0.931323.
KNL = ["compute.copy_bandwidth_gib_s=0.279", "compute.nodes=1"]


def hints(mode):
    return f"striping_factor=24:cray_cb_nodes_multiplier=8:cray_cb_write_lock_mode={mode}"


def run(sets, mode):
    cmd = [LANEFS, "sim", "ior", "--cluster", PRESET, *LINE, "--hints", hints(mode), "-O", "summaryFormat=JSON"]
    for s in sets:
        cmd += ["--set", s]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit status {done.returncode}: {done.stderr.strip()[-500:]}")
    j = json.loads(done.stdout)
    return {"bw": j["summary"][0]["bwMeanMIB"], "callbacks": j["lanefs"]["blocking_callbacks"],
            "queued": j["lanefs"].get("callbacks_queued", 0), "cmd": cmd}


def adler32_gib_s():
    """This machine's adler32 rate, one core."""
    data = bytes(range(256)) * (1 << 20)
    began = time.perf_counter()
    zlib.adler32(data)
    return len(data) / (time.perf_counter() - began) / (1 << 30)


def calibrated():
    """The client's and MPI's costs on this machine, from a preset
    `lanefs calibrate` writes (CALIBRATED, or a --quick run now)."""
    path = os.environ.get("CALIBRATED")
    with tempfile.TemporaryDirectory(prefix="lanefs-ablation-", dir=os.environ.get("BENCH_DIR", "/var/tmp")) as d:
        if not path:
            path = os.path.join(d, "here.toml")
            cmd = [LANEFS, "calibrate", "--quick", "--data", d, "--out", path]
            print("# " + " ".join(cmd), file=sys.stderr)
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"{' '.join(cmd)}: exit status {done.returncode}: {done.stderr.strip()[-500:]}")
        with open(path, "rb") as f:
            return tomllib.load(f)


def preset_value(section, key):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "presets", f"{PRESET}.toml")
    with open(here, "rb") as f:
        return tomllib.load(f)[section][key]


def stand_in(rows, name, values, section, keys, whose):
    """A row of the calibration's values of `keys` (those it has), measured
    on this machine in place of the machine's own."""
    sets = [f"{section}.{k}={values[k]}" for k in keys if k in values]
    if sets:
        rows.append((name, sets, ", ".join(s.split(".", 1)[1] for s in sets) + f": {whose} (stand-in)"))


def main():
    here = calibrated()
    compute, mpi = here.get("compute", {}), here.get("mpi", {})
    rows = [("none (the preset)", [], "")]
    rows.append(("cores", ["compute.cores=32"], "32 a node: two 16-core Haswell sockets"))
    rows.append(("callback threads", ["compute.callback_threads=128"], "128: Lustre's LDLM_NTHRS_MAX"))
    lock_cpu = preset_value("storage", "lock_cpu_us")
    rows.append(("server CPU per callback", [f"storage.callback_cpu_us={lock_cpu}"],
                 f"{lock_cpu} us: the preset's lock_cpu_us (assumption)"))
    adler = adler32_gib_s()
    rows.append(("checksums", [f"compute.checksum_bandwidth_gib_s={adler:.3f}"],
                 f"{adler:.2f} GiB/s: adler32 on this machine (stand-in)"))
    storage = here.get("storage", {})
    stand_in(rows, "client CPU per RPC and page", compute, "compute", ("client_cpu_per_rpc_us", "client_cpu_per_page_us"),
             "lanefs's client here")
    stand_in(rows, "client CPU per call", compute, "compute", ("client_cpu_per_call_us",), "lanefs's client here")
    stand_in(rows, "client CPU per lock", compute, "compute", ("client_cpu_per_lock_us",), "lanefs's client here")
    stand_in(rows, "hand-offs", compute, "compute", ("handoff_us", "handoff_idle_core_us"), "this virtual machine")
    stand_in(rows, "OSS CPU per page", storage, "storage", ("rpc_service_per_page_us",), "lanefs's OSS here")
    rows.append(("unstable pages kept", ['client.unstable_pages="kept-until-commit"'],
                 "kept until their OST commits: Lustre's client and lanefs's network client"))
    rows.append(("a node's locks", NODE_LOCKS, "16 writers of a file, 32 of the page cache: the KNL talk"))
    if "message_cpu_us" in mpi:
        rows.append(("MPI CPU per message", [f"mpi.message_cpu_us={mpi['message_cpu_us']}"],
                     f"{mpi['message_cpu_us']} us: Open MPI here (stand-in)"))
    every = [s for _, sets, _ in rows for s in sets]
    rows.append(("all of them", every, ""))
    print(f"Seed scenario: lanefs sim ior --cluster {PRESET} {' '.join(LINE)} --hints {hints('MODE')}")
    print()
    print("| mechanism | value | default MiB/s | lockahead MiB/s | gain | gain vs preset | callbacks (default) | queued |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    base = None
    for name, sets, value in rows:
        d, la = run(sets, 0), run(sets, 2)
        gain = la["bw"] / d["bw"]
        base = base or gain
        print(f"| {name} | {value} | {d['bw']:.0f} | {la['bw']:.0f} | {gain:.2f}x | {gain / base:.2f} | "
              f"{d['callbacks']} | {d['queued']} |", flush=True)
    print()
    print("`--set` of each row: " + "; ".join(f"{name}: {' '.join(sets)}" for name, sets, _ in rows if sets))
    knl_nodes()


def knl_nodes():
    """One KNL-like node: 1 to 64 ranks copying at a KNL core's rate, -a
    POSIX, with and without a node's locks: each rank's rate."""
    print()
    print(f"One KNL-like node: lanefs sim ior --cluster {PRESET} -a POSIX -w -N P --tasks-per-node P -b 16m -t 1m "
          f"--lanefs.stripe-count=24 [-F] --set {' --set '.join(KNL)}")
    print()
    print("| ranks P | shared file, MiB/s a rank | with a node's locks | file per process, MiB/s a rank | with a node's locks |")
    print("|---:|---:|---:|---:|---:|")
    for ranks in (1, 8, 16, 32, 64):
        line = ["-a", "POSIX", "-w", "-N", str(ranks), "--tasks-per-node", str(ranks), "-b", "16m", "-t", "1m",
                "--lanefs.stripe-count=24"]
        cells = []
        for extra in ([], ["-F"]):
            for sets in (KNL, KNL + NODE_LOCKS):
                cmd = [LANEFS, "sim", "ior", "--cluster", PRESET, *line, *extra, "-O", "summaryFormat=JSON"]
                for s in sets:
                    cmd += ["--set", s]
                done = subprocess.run(cmd, capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{' '.join(cmd)}: exit status {done.returncode}: {done.stderr.strip()[-500:]}")
                cells.append(json.loads(done.stdout)["summary"][0]["bwMeanMIB"] / ranks)
        print(f"| {ranks} | " + " | ".join(f"{c:.0f}" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
