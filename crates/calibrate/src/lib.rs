//! lanefs-calibrate: this machine, measured, as a cluster preset the
//! simulator reads.
//!
//! Key design decision: calibration measures the inputs of the model (what
//! the hardware and the host's kernel cost in isolation: a disk's write and
//! read bandwidth and its `fdatasync` latency, a core's copy rate alone and
//! with all cores copying, a socket's round trip and bandwidth), never the
//! bandwidths the simulator's predictions are judged on. The preset it
//! writes describes one node that is both client and servers, as a local
//! lanefs cluster is (`lanefs up`, or the embedded cluster of `lanefs ior
//! -a LANEFS`), so that `lanefs sim ior --cluster PRESET.toml -N 8`
//! simulates the 8 ranks a real `-N 8` runs here. Every value in it comes
//! with a comment saying what measured it, how, and when; values this
//! crate does not measure yet keep the `laptop` preset's assumption and
//! say so.
//!
//! Each step is a function of its own ([`disk`], [`copy`], [`sockets`]),
//! run in turn by [`measure`], which reports progress one line per step.

pub mod copy;
pub mod disk;
pub mod preset;
pub mod sockets;

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
}

impl Options {
    /// Bytes written (and read back) to measure the disk.
    pub fn disk_bytes(&self) -> u64 {
        if self.quick {
            64 << 20
        } else {
            1 << 30
        }
    }

    /// `fdatasync`s timed for the disk's commit latency.
    pub fn syncs(&self) -> usize {
        if self.quick {
            20
        } else {
            200
        }
    }

    /// Bytes each copying thread copies.
    pub fn copy_bytes(&self) -> u64 {
        if self.quick {
            1 << 30
        } else {
            8 << 30
        }
    }

    /// Round trips timed on each socket.
    pub fn round_trips(&self) -> usize {
        if self.quick {
            2_000
        } else {
            20_000
        }
    }

    /// Bytes streamed through each socket.
    pub fn socket_bytes(&self) -> u64 {
        if self.quick {
            256 << 20
        } else {
            2 << 30
        }
    }
}

/// Everything measured, in the units the preset takes.
#[derive(Clone, Debug)]
pub struct Measurements {
    pub disk: disk::Disk,
    pub copy: copy::Copy,
    pub unix: sockets::Socket,
    pub tcp: sockets::Socket,
    /// When the measurements were taken (seconds since the Unix epoch).
    pub taken_unix_s: u64,
    /// How long measuring took.
    pub elapsed: Duration,
}

/// Measures the machine as `options` say, calling `progress` with one line
/// as each step begins.
pub fn measure(options: &Options, progress: &mut dyn FnMut(&str)) -> Result<Measurements, String> {
    let began = std::time::Instant::now();
    let taken_unix_s =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    progress(&format!(
        "disk: writing and reading back {} MiB in {}",
        options.disk_bytes() >> 20,
        options.data_dir.display()
    ));
    let disk = disk::measure(&options.data_dir, options.disk_bytes(), options.syncs())?;
    progress(&format!("memory: copying {} MiB on one core, then on every core", options.copy_bytes() >> 20));
    let copy = copy::measure(options.copy_bytes());
    progress(&format!(
        "sockets: {} round trips and {} MiB over a Unix socket",
        options.round_trips(),
        options.socket_bytes() >> 20
    ));
    let unix = sockets::measure_unix(options.round_trips(), options.socket_bytes())?;
    progress(&format!(
        "sockets: {} round trips and {} MiB over TCP on loopback",
        options.round_trips(),
        options.socket_bytes() >> 20
    ));
    let tcp = sockets::measure_tcp(options.round_trips(), options.socket_bytes())?;
    Ok(Measurements { disk, copy, unix, tcp, taken_unix_s, elapsed: began.elapsed() })
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
