//! lanefs-calibrate: this machine, measured, as a cluster preset the
//! simulator reads.
//!
//! Key design decision: calibration measures the inputs of the model (what
//! the hardware and the host's kernel cost in isolation: a disk's write and
//! read bandwidth and its `fdatasync` latency, a core's copy rate alone and
//! with all cores copying, a socket's round trip and bandwidth), never the
//! bandwidths the simulator's predictions are judged on; and lanefs's own
//! costs the same way, each in isolation: the servers' CPU time per I/O
//! RPC, per lock request and per blocking callback, the client library's
//! per message and per page, the mount's time per request, and MPI's
//! latency, bandwidth and time per message. The preset it
//! writes describes one node that is both client and servers, as a local
//! lanefs cluster is (`lanefs up`, or the embedded cluster of `lanefs ior
//! -a LANEFS`), so that `lanefs sim ior --cluster PRESET.toml -N 8`
//! simulates the 8 ranks a real `-N 8` runs here. Every value in it comes
//! with a comment saying what measured it, how, and when; values this
//! crate does not measure yet keep the `laptop` preset's assumption and
//! say so.
//!
//! Each step is a module of its own ([`disk`], [`copy`], [`frames`], [`sockets`],
//! [`servers`], [`mount`], [`mpi`]), run in turn by [`measure`], which
//! reports progress one line per step. The servers measured are the real
//! daemons, started as a child process ([`cluster`]), and the client the
//! real library, driven from this process ([`load`]); each step that
//! starts a process owns it through a guard that stops and reaps it on
//! every way out ([`child`]), and lists it for an interrupt to undo
//! ([`cleanup`]). The mount and MPI are optional: where they
//! cannot run, the step is skipped and the preset says why.

pub mod child;
pub mod cleanup;
pub mod cluster;
pub mod copy;
pub mod costs;
pub mod cpu;
pub mod disk;
pub mod frames;
pub mod load;
pub mod metadata;
pub mod mount;
pub mod mpi;
pub mod preset;
pub mod servers;
pub mod sockets;
pub mod step;
pub mod summary;

use std::path::PathBuf;
use std::time::Duration;

/// What to measure, and how much.
#[derive(Clone, Debug)]
pub struct Options {
    /// Where the OSTs' data would live: the disk measured.
    pub data_dir: PathBuf,
    /// Smaller samples: under 20 s in all.
    pub quick: bool,
    /// The OSTs the preset's one OSS has, sharing the disk measured.
    pub osts: u32,
    /// The ranks the preset's one node runs.
    pub ranks: u32,
    /// The lanefs binary: it runs the servers (`lanefs up`) and the mount
    /// (`lanefs mount`) measured.
    pub lanefs_exe: PathBuf,
}

/// The steps [`measure`] reports, one progress line each.
pub const STEPS: usize = 9;

impl Options {
    /// `quick` with `--quick`, else `full`.
    fn pick<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }

    /// Bytes written (and read back) to measure the disk.
    pub fn disk_bytes(&self) -> u64 {
        self.pick(64 << 20, 1 << 30)
    }

    /// `fdatasync`s timed for the disk's commit latency.
    pub fn syncs(&self) -> usize {
        self.pick(20, 200)
    }

    /// Bytes of shared memory whose first touch and first map are timed,
    /// each round.
    pub fn frame_bytes(&self) -> u64 {
        self.pick(64 << 20, 256 << 20)
    }

    /// Bytes each copying thread copies.
    pub fn copy_bytes(&self) -> u64 {
        self.pick(1 << 30, 8 << 30)
    }

    /// Round trips timed on each socket.
    pub fn round_trips(&self) -> usize {
        self.pick(2_000, 20_000)
    }

    /// Bytes streamed through each socket.
    pub fn socket_bytes(&self) -> u64 {
        self.pick(256 << 20, 2 << 30)
    }

    /// Rounds the servers' and the client's phases run in (each cost is
    /// the median of the rounds').
    pub fn cost_rounds(&self) -> usize {
        self.pick(5, 9)
    }

    /// 4 KiB writes to a cached page (the client's cost per call).
    pub fn cached_writes(&self) -> u64 {
        self.pick(5_000, 40_000)
    }

    /// 4 KiB writes that each become a write RPC.
    pub fn page_rpcs(&self) -> u64 {
        self.pick(4_096, 32_768)
    }

    /// Bytes written in 1 MiB write RPCs.
    pub fn large_rpc_bytes(&self) -> u64 {
        self.pick(128 << 20, 512 << 20)
    }

    /// Writes by two clients in turn, each calling back the other's lock.
    pub fn callback_writes(&self) -> u64 {
        self.pick(1_500, 12_000)
    }

    /// Lock-ahead lock requests.
    pub fn lock_requests(&self) -> u64 {
        self.pick(2_048, 16_384)
    }

    /// 4 KiB writes timed through the mount (and as many directly).
    pub fn mount_writes(&self) -> u64 {
        self.pick(2_000, 10_000)
    }

    /// Creates (and as many opens) timed at the metadata server.
    pub fn mds_ops(&self) -> u64 {
        self.pick(32, 200)
    }

    /// What the MPI probe times.
    pub fn mpi_samples(&self) -> mpi::Samples {
        self.pick(
            mpi::Samples { round_trips: 2_000, large_messages: 32, small_messages: 20_000 },
            mpi::Samples { round_trips: 20_000, large_messages: 256, small_messages: 200_000 },
        )
    }
}

/// Everything measured, in the units the preset takes.
#[derive(Clone, Debug)]
pub struct Measurements {
    pub disk: disk::Disk,
    pub copy: copy::Copy,
    pub frames: frames::Frames,
    pub unix: sockets::Socket,
    pub tcp: sockets::Socket,
    pub handoffs: sockets::Handoffs,
    pub servers: servers::Servers,
    pub metadata: metadata::Metadata,
    pub mount: step::Step<mount::Mount>,
    pub mpi: step::Step<mpi::Mpi>,
    /// The cores online (`[compute] cores`).
    pub cores_online: u32,
    /// Whether the lanefs measured is a debug build (its CPU costs are
    /// then several times a release build's).
    pub debug_build: bool,
    /// When the measurements were taken (seconds since the Unix epoch).
    pub taken_unix_s: u64,
    /// How long measuring took.
    pub elapsed: Duration,
}

/// Measures the machine as `options` say, calling `progress` with one line
/// as each step begins ([`STEPS`] in all).
pub fn measure(options: &Options, progress: &mut dyn FnMut(&str)) -> Result<Measurements, String> {
    let began = std::time::Instant::now();
    let taken_unix_s =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let Hardware { disk, copy, frames, unix, tcp, handoffs } = hardware(options, progress)?;
    progress(&format!(
        "servers: lanefs up with {} OSTs in {}, CPU time per I/O RPC, lock request and callback, and the \
         client's per message and page",
        options.osts,
        options.data_dir.display()
    ));
    let failed = |e: String| {
        format!(
            "measuring the servers' costs: {e}\n(the servers are `{} up` with their data in --data {}: \
             check that lanefs up runs there, on a disk with a few GiB free)",
            options.lanefs_exe.display(),
            options.data_dir.display()
        )
    };
    let cluster = cluster::Cluster::start(&options.lanefs_exe, &options.data_dir, options.osts).map_err(failed)?;
    let servers = servers::measure(&cluster, options, copy.one_gib_s, disk.cache_write_gib_s).map_err(failed)?;
    progress(&format!("metadata: {} creates and as many opens, one after the other", options.mds_ops()));
    let metadata = metadata::measure(&cluster, options.mds_ops(), options.osts).map_err(failed)?;
    progress(&format!("mount: {} 4 KiB writes through a FUSE mount and as many directly", options.mount_writes()));
    let mount = mount::measure(&options.lanefs_exe, &cluster, options.mount_writes());
    drop(cluster);
    progress("mpi: a probe compiled with mpicc, ping-pong, streams and tests between 2 ranks of mpirun, then tests that yield the core");
    let mpi = mpi::measure(options.mpi_samples());
    Ok(Measurements {
        disk,
        copy,
        frames,
        unix,
        tcp,
        handoffs,
        servers,
        metadata,
        mount,
        mpi,
        cores_online: cpu::cores_online(),
        debug_build: cfg!(debug_assertions),
        taken_unix_s,
        elapsed: began.elapsed(),
    })
}

struct Hardware {
    disk: disk::Disk,
    copy: copy::Copy,
    frames: frames::Frames,
    unix: sockets::Socket,
    tcp: sockets::Socket,
    handoffs: sockets::Handoffs,
}

/// The disk, the memory and the sockets.
fn hardware(options: &Options, progress: &mut dyn FnMut(&str)) -> Result<Hardware, String> {
    progress(&format!(
        "disk: writing and reading back {} MiB in {}",
        options.disk_bytes() >> 20,
        options.data_dir.display()
    ));
    let disk = disk::measure(&options.data_dir, options.disk_bytes(), options.syncs(), options.osts)?;
    progress(&format!(
        "memory: copying {} MiB on one core, then on every core, in {} rounds",
        options.copy_bytes() >> 20,
        copy::ROUNDS
    ));
    let copy = copy::measure(options.copy_bytes());
    progress(&format!(
        "frames: writing {} MiB of new shared memory and reading it through a second mapping, twice",
        options.frame_bytes() >> 20
    ));
    let frames = frames::measure(&options.data_dir, options.frame_bytes())?;
    progress(&format!(
        "sockets: {} round trips and {} MiB over a Unix socket",
        options.round_trips(),
        options.socket_bytes() >> 20
    ));
    let unix = sockets::measure_unix(options.round_trips(), options.socket_bytes())?;
    progress(&format!(
        "sockets: {} round trips and {} MiB over TCP on loopback, then hand-offs on pinned threads",
        options.round_trips(),
        options.socket_bytes() >> 20
    ));
    let tcp = sockets::measure_tcp(options.round_trips(), options.socket_bytes())?;
    let handoffs = sockets::measure_handoffs(options.round_trips(), cpu::cores_online())?;
    Ok(Hardware { disk, copy, frames, unix, tcp, handoffs })
}

/// Bytes per second as GiB/s.
pub fn gib_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64().max(1e-9) / (1u64 << 30) as f64
}

/// The median of `samples` (which it sorts); zero for none.
pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// The median of `samples` (which it sorts); zero for none.
pub fn median_f64(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// The lowest and the highest of `samples` (infinities for none).
pub fn range_f64(samples: &[f64]) -> (f64, f64) {
    let low = samples.iter().copied().fold(f64::INFINITY, f64::min);
    (low, samples.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}
