//! IOR ranks as processes (`--lanefs.ranks=processes`): each rank's lanefs
//! client (its lock cache, page cache, connections and driver thread) lives
//! in a process of its own, as under `mpirun`, while IOR's front end keeps
//! its barriers and timers in the launching process.
//!
//! How: the launcher starts `lanefs ior-rank` once per rank and drives it
//! over the child's stdin and stdout with one request and one reply at a
//! time ([`RankCall`], [`RankReply`], bincode). Data does not travel through
//! the pipe: launcher and rank share one transfer buffer, a file in
//! `/dev/shm` mapped by both, and the pipe only says which bytes to write
//! or read. The child sends nothing else on stdout; its diagnostics go to
//! stderr, which it shares with the launcher.
//!
//! A rank process that dies or answers nonsense fails that rank's
//! operation with an error that names the rank; the front end then stops
//! every rank, as for any I/O error.

use crate::rank::{backend_error, client_options, LanefsRank, Totals};
use anyhow::{bail, Context, Result};
use bincode::Options;
use lanefs_client::Client;
use lanefs_ior::{IorError, IorParams, RankIo};
use memmap2::MmapMut;
use serde::{Deserialize, Serialize};
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

/// The pipe's encoding; the limit bounds what a malformed message can make
/// the reader allocate.
fn wire() -> impl bincode::Options {
    bincode::DefaultOptions::new().with_limit(1 << 20)
}

/// What the launcher asks a rank process to do.
#[derive(Debug, Serialize, Deserialize)]
pub enum RankCall {
    Create {
        path: String,
    },
    Open {
        path: String,
    },
    /// Write the first `len` bytes of the shared buffer at `offset`.
    Write {
        offset: u64,
        len: u64,
    },
    /// Read `len` bytes at `offset` into the shared buffer.
    Read {
        offset: u64,
        len: u64,
    },
    Fsync,
    Close,
    /// Give the client back (its locks, as an unmount) and report.
    Finish,
}

#[derive(Debug, Serialize, Deserialize)]
pub enum RankReply {
    Done,
    Failed(String),
    Finished { lockahead_sent: u64, lockahead_refused: u64 },
}

/// The launcher's side of one rank process.
pub(crate) struct ProcessRank<'a> {
    totals: &'a Mutex<Totals>,
    child: Child,
    /// `None` once the rank has been told to end.
    to: Option<BufWriter<ChildStdin>>,
    from: BufReader<ChildStdout>,
    buffer: MmapMut,
    /// Keeps the shared buffer's file until the rank is dropped.
    _buffer_file: tempfile::NamedTempFile,
}

/// What a rank process is started with: the command line the launcher
/// writes (`lanefs ior-rank ...`, [`RankLaunch::args`]) and the CLI parses
/// back into this, one type on both sides of the re-exec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankLaunch {
    /// The MDS of the run's cluster.
    pub mds: String,
    /// The key file, for a cluster on TCP.
    pub key: Option<PathBuf>,
    pub rank: u32,
    /// The transfer buffer the launcher and the rank share.
    pub buffer: PathBuf,
    /// The run's IOR options, as the launcher was given them.
    pub ior_args: Vec<String>,
}

impl RankLaunch {
    /// The arguments of `lanefs` that start this rank.
    pub fn args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = vec!["ior-rank".into(), "--mds".into(), self.mds.clone().into()];
        args.extend(["--rank".into(), self.rank.to_string().into(), "--buffer".into(), self.buffer.clone().into()]);
        if let Some(key) = &self.key {
            args.extend(["--key".into(), key.clone().into()]);
        }
        args.push("--".into());
        args.extend(self.ior_args.iter().map(Into::into));
        args
    }
}

/// Where the shared buffers live: memory-backed when the system has it.
fn buffer_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

impl<'a> ProcessRank<'a> {
    /// Start rank `rank` of a run of `ior_args` against the MDS at `mds`,
    /// with the key file `key` (TCP clusters).
    pub(crate) fn spawn(
        rank: u32,
        mds: &str,
        key: Option<&Path>,
        ior_args: &[String],
        p: &IorParams,
        totals: &'a Mutex<Totals>,
    ) -> Result<Self, IorError> {
        let setup = |what: &str, e: std::io::Error| backend_error(format!("rank {rank}: {what}: {e}"));
        let len = p.transfer_size_bytes.max(1);
        let file = tempfile::Builder::new()
            .prefix("lanefs-rank-")
            .tempfile_in(buffer_dir())
            .map_err(|e| setup("creating its transfer buffer", e))?;
        file.as_file().set_len(len).map_err(|e| setup("sizing its transfer buffer", e))?;
        // SAFETY: the file is private to this run; the launcher and the rank
        // process take turns on it (one request at a time over the pipe), so
        // neither reads bytes the other is changing.
        let buffer =
            unsafe { MmapMut::map_mut(file.as_file()) }.map_err(|e| setup("mapping its transfer buffer", e))?;
        let exe = std::env::current_exe().map_err(|e| setup("finding the lanefs executable", e))?;
        let launch = RankLaunch {
            mds: mds.to_string(),
            key: key.map(Path::to_path_buf),
            rank,
            buffer: file.path().to_path_buf(),
            ior_args: ior_args.to_vec(),
        };
        let mut child = Command::new(exe)
            .args(launch.args())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| setup("starting its process", e))?;
        let to = BufWriter::new(child.stdin.take().expect("piped stdin"));
        let from = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(ProcessRank { totals, child, to: Some(to), from, buffer, _buffer_file: file })
    }

    fn call(&mut self, call: &RankCall) -> Result<RankReply, IorError> {
        let to = self.to.as_mut().ok_or_else(|| backend_error("the rank process has ended"))?;
        let sent = wire().serialize_into(&mut *to, call).map_err(|e| e.to_string());
        let sent = sent.and_then(|()| to.flush().map_err(|e| e.to_string()));
        let reply = sent.and_then(|()| wire().deserialize_from(&mut self.from).map_err(|e| e.to_string()));
        reply.map_err(|e| {
            let status = match self.exit_status() {
                Some(status) => format!("process ended ({status}); its own error, if any, is above"),
                None => format!("process stopped answering ({e})"),
            };
            backend_error(format!("the rank {status}"))
        })
    }

    /// How the rank process ended, if it ended within a second (a process
    /// that closed its pipe is usually gone, or about to be).
    fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        for _ in 0..100 {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
                Err(_) => return None,
            }
        }
        None
    }

    fn simple(&mut self, call: &RankCall) -> Result<(), IorError> {
        match self.call(call)? {
            RankReply::Done => Ok(()),
            RankReply::Failed(message) => Err(backend_error(message)),
            other => Err(backend_error(format!("unexpected answer {other:?} from the rank process to {call:?}"))),
        }
    }

    fn fits(&self, len: usize) -> Result<(), IorError> {
        if len > self.buffer.len() {
            return Err(backend_error(format!(
                "a transfer of {len} bytes is larger than the rank's buffer ({} bytes, the transfer size)",
                self.buffer.len()
            )));
        }
        Ok(())
    }
}

impl RankIo for ProcessRank<'_> {
    fn create(&mut self, path: &str, _p: &IorParams) -> Result<(), IorError> {
        self.simple(&RankCall::Create { path: path.to_string() })
    }

    fn open(&mut self, path: &str, _p: &IorParams) -> Result<(), IorError> {
        self.simple(&RankCall::Open { path: path.to_string() })
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError> {
        self.fits(buf.len())?;
        self.buffer[..buf.len()].copy_from_slice(buf);
        self.simple(&RankCall::Write { offset, len: buf.len() as u64 })
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError> {
        self.fits(buf.len())?;
        self.simple(&RankCall::Read { offset, len: buf.len() as u64 })?;
        buf.copy_from_slice(&self.buffer[..buf.len()]);
        Ok(())
    }

    fn fsync(&mut self) -> Result<(), IorError> {
        self.simple(&RankCall::Fsync)
    }

    fn close(&mut self) -> Result<(), IorError> {
        self.simple(&RankCall::Close)
    }
}

impl Drop for ProcessRank<'_> {
    fn drop(&mut self) {
        if let Ok(RankReply::Finished { lockahead_sent, lockahead_refused }) = self.call(&RankCall::Finish) {
            if let Ok(mut t) = self.totals.lock() {
                t.lockahead_sent += lockahead_sent;
                t.lockahead_refused += lockahead_refused;
            }
        }
        // Closing stdin ends a rank that could not take `Finish`.
        self.to = None;
        let _ = self.child.wait();
    }
}

/// `lanefs ior-rank`: one rank's process. Serves the launcher's requests
/// on stdin/stdout until `Finish` or end of input.
pub fn serve_rank(launch: &RankLaunch) -> Result<()> {
    let RankLaunch { mds, key, rank, buffer, ior_args } = launch;
    let (rank, key) = (*rank, key.as_deref());
    let p = lanefs_ior::parse_args(ior_args).context("the IOR options given to a rank process")?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(buffer)
        .with_context(|| format!("opening the transfer buffer {}", buffer.display()))?;
    // SAFETY: see `ProcessRank::spawn`: the launcher and this process take turns.
    let mut shared = unsafe { MmapMut::map_mut(&file) }.context("mapping the transfer buffer")?;
    let mut options = client_options(&p).map_err(|e| anyhow::anyhow!("{e}"))?;
    options.key = key.map(lanefs_net::auth::ClusterKey::load).transpose()?;
    let client = Client::connect(mds, options)?;
    let totals = Mutex::new(Totals::default());
    let mut io = LanefsRank::new(&totals, rank, client, &p).map_err(|e| anyhow::anyhow!("{e}"))?;
    tracing::info!(rank, pid = std::process::id(), "rank process serving");
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut output = BufWriter::new(std::io::stdout().lock());
    loop {
        let call: RankCall = match wire().deserialize_from(&mut input) {
            Ok(call) => call,
            Err(e) => match *e {
                bincode::ErrorKind::Io(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                _ => bail!("rank {rank}: bad request from the launcher: {e}"),
            },
        };
        let result = match &call {
            RankCall::Create { path } => io.create(path, &p),
            RankCall::Open { path } => io.open(path, &p),
            RankCall::Write { offset, len } => match shared.get(..*len as usize) {
                Some(bytes) => io.write_at(*offset, bytes),
                None => Err(backend_error(format!("a write of {len} bytes is larger than the transfer buffer"))),
            },
            RankCall::Read { offset, len } => match shared.get_mut(..*len as usize) {
                Some(bytes) => io.read_at(*offset, bytes),
                None => Err(backend_error(format!("a read of {len} bytes is larger than the transfer buffer"))),
            },
            RankCall::Fsync => io.fsync(),
            RankCall::Close => io.close(),
            RankCall::Finish => {
                drop(io);
                let t = totals.lock().map_err(|_| anyhow::anyhow!("totals poisoned"))?;
                let reply =
                    RankReply::Finished { lockahead_sent: t.lockahead_sent, lockahead_refused: t.lockahead_refused };
                wire().serialize_into(&mut output, &reply)?;
                output.flush()?;
                return Ok(());
            }
        };
        let reply = match result {
            Ok(()) => RankReply::Done,
            Err(IorError::Backend { message, .. }) => RankReply::Failed(message),
            Err(e) => RankReply::Failed(e.to_string()),
        };
        wire().serialize_into(&mut output, &reply)?;
        output.flush()?;
    }
}
