"""What the bench scripts share: a `lanefs up` file system mounted for a
measurement and removed after it, and the page cache dropped between runs.
"""
import contextlib, os, subprocess, sys, tempfile


def settle():
    """Sync and drop the page cache, so that one run's dirty pages are not
    the next one's work (needs root)."""
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


@contextlib.contextmanager
def mounted(lanefs, place, prefix, osts=4, up_args=()):
    """`lanefs up --osts OSTS` (and `up_args`) with its data in a new
    directory under `place`, mounted; yields (MDS address, mount point,
    environment with LANEFS_MDS). Unmounts, stops the servers and removes
    the data after."""
    data = tempfile.mkdtemp(prefix=prefix, dir=place)
    mountpoint = tempfile.mkdtemp(prefix="lanefs-mnt-")
    up = subprocess.Popen([lanefs, "up", "--osts", str(osts), "--data", os.path.join(data, "fs"), *up_args],
                          stdout=subprocess.PIPE, text=True)
    mds = None
    for line in up.stdout:
        if line.startswith("export LANEFS_MDS="):
            mds = line.strip().split("=", 1)[1]
        if line.startswith("(interrupt"):
            break
    env = dict(os.environ, LANEFS_MDS=mds or "")
    try:
        if mds is None:
            sys.exit(f"{sys.argv[0]}: lanefs up printed no MDS address (exit status {up.poll()})")
        subprocess.run([lanefs, "mount", mountpoint], check=True, env=env, capture_output=True)
        yield mds, mountpoint, env
    finally:
        subprocess.run([lanefs, "umount", mountpoint], env=env, capture_output=True)
        up.terminate()
        up.wait()
        subprocess.run(["rm", "-rf", data])
        os.rmdir(mountpoint)
