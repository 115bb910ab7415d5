//! `lanefs ior -a MPIIO`: IOR's MPIIO backend on lanefs. Each of the `-N`
//! ranks is a thread with its own lanefs client, as with `-a LANEFS`; the
//! ranks of a shared file form one communicator (`lanefs_mpiio`'s
//! `ThreadComm`), so `-c` runs two-phase collective I/O through
//! `lanefs_mpiio::CollectiveFile` (stripe-aligned aggregators, Cray's lock
//! modes), and independent transfers are `MPI_File_write_at`s. With `-F`
//! every rank opens its own file alone (IOR's `MPI_COMM_SELF`).
//!
//! Hints, in increasing precedence: `IOR_HINT__MPI__*` and
//! `--mpiio.hintsFileName`, then `LANEFS_MPIIO_HINTS` or `MPICH_MPIIO_HINTS`
//! (matched to the file name). `striping_factor` and `striping_unit` stripe
//! a new file. `LANEFS_MPIIO_STATS=1`, `..._TIMERS=1` and
//! `..._HINTS_DISPLAY=1` (or their `MPICH_` names) print Cray's blocks on
//! stderr at each close, with every timer measured on the run.
//!
//! Under `mpirun` (`job`), each process is one rank and the job's
//! communicator (`MpiComm`, Open MPI) carries the collective exchange.

use crate::lanefs::LanefsBackend;
use crate::rank::{absolute, backend_error, client_options, CLIENT_OPTIONS};
use lanefs_client::{process_umask, Client, File};
use lanefs_core::client::ladvise::Advice;
use lanefs_ior::{Backend, BackendReport, FsInfo, IorError, IorParams, Module, RankIo};
use lanefs_mpiio::hints as mhints;
use lanefs_mpiio::{CollectiveFile, Communicator, FileAccess, MpiioHints, Striping, ThreadComm};
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const NAME: &str = lanefs_ior::Api::Mpiio.name();

/// `LANEFS_<name>` or `MPICH_<name>` set to anything but `0`.
pub fn env_flag(name: &str) -> bool {
    let on = |v: String| v != "0" && !v.is_empty();
    std::env::var(format!("LANEFS_{name}")).map(on).unwrap_or(false)
        || std::env::var(format!("MPICH_{name}")).map(on).unwrap_or(false)
}

/// The hint pairs of `p`'s test file, in precedence order (later wins):
/// IOR's (`IOR_HINT__MPI__*`, `--mpiio.hintsFileName`), then
/// `LANEFS_MPIIO_HINTS` or, when that is unset, `MPICH_MPIIO_HINTS`.
pub fn hint_pairs(p: &IorParams) -> Result<Vec<(String, String)>, IorError> {
    let mut pairs = lanefs_ior::mpi_hints(p, std::env::vars())?;
    let env_spec = std::env::var("LANEFS_MPIIO_HINTS")
        .ok()
        .map(|v| ("LANEFS_MPIIO_HINTS", v))
        .or_else(|| std::env::var("MPICH_MPIIO_HINTS").ok().map(|v| ("MPICH_MPIIO_HINTS", v)));
    if let Some((name, spec)) = env_spec {
        let rules = mhints::parse_hint_env(&spec).map_err(|e| mpiio_error(format!("{name}: {e}")))?;
        pairs.extend(mhints::hints_for_file(&rules, &p.test_file));
    }
    Ok(pairs)
}

/// The hints of `p`'s test file ([`hint_pairs`]), and a warning for each
/// unknown hint ignored.
pub fn hints(p: &IorParams) -> Result<(MpiioHints, Vec<String>), IorError> {
    let (known, warnings) = mhints::known_hints(hint_pairs(p)?);
    Ok((MpiioHints::from_pairs(&known).map_err(mpiio_error)?, warnings))
}

pub struct MpiioBackend<'l> {
    lanefs: &'l LanefsBackend,
    /// One communicator per rank of the shared file, taken by `rank`.
    comms: Mutex<Vec<Option<ThreadComm>>>,
    /// Under `mpirun`: the job's communicator, this process's rank's.
    world: Option<&'l (dyn Communicator + Sync)>,
    /// Cray's environment block was printed (once, before the first
    /// file's hints).
    environment_shown: AtomicBool,
    /// Rank 0's write timers of each collective write phase, with
    /// `MPICH_MPIIO_TIMERS=1`, for IOR's JSON summary.
    timers: Mutex<Vec<lanefs_mpiio::WriteTimers>>,
}

impl<'l> MpiioBackend<'l> {
    /// Ranks as threads of this process.
    pub fn new(lanefs: &'l LanefsBackend) -> Self {
        MpiioBackend {
            lanefs,
            comms: Mutex::new(Vec::new()),
            world: None,
            environment_shown: AtomicBool::new(false),
            timers: Mutex::default(),
        }
    }

    /// This process as one rank of the job of `world`.
    #[cfg(feature = "mpi")]
    pub fn for_job(lanefs: &'l LanefsBackend, world: &'l (dyn Communicator + Sync)) -> Self {
        MpiioBackend {
            lanefs,
            comms: Mutex::new(Vec::new()),
            world: Some(world),
            environment_shown: AtomicBool::new(false),
            timers: Mutex::default(),
        }
    }
}

impl Backend for MpiioBackend<'_> {
    fn name(&self) -> &'static str {
        NAME
    }

    fn version(&self) -> String {
        env!("CARGO_PKG_VERSION").to_string()
    }

    fn other_modules(&self) -> &'static [Module] {
        &[Module { name: "lanefs", options: CLIENT_OPTIONS }]
    }

    fn check_params(&self, p: &IorParams) -> Result<(), IorError> {
        lanefs_ior::check_modules(NAME, &[], self.other_modules(), p)?;
        client_options(p)?;
        let (_, warnings) = hints(p)?;
        if self.world.is_none_or(|world| world.rank() == 0) {
            for warning in warnings {
                eprintln!("lanefs: warning: {warning}");
            }
        }
        Ok(())
    }

    fn rank<'a>(&'a self, rank: u32, p: &IorParams) -> Result<Box<dyn RankIo + 'a>, IorError> {
        let comm = match self.world {
            Some(world) => Comm::World(world),
            None => {
                let mut comms = self.comms.lock().expect("communicators");
                if comms.is_empty() {
                    let per_node = p.tasks_per_node.unwrap_or(p.num_tasks).max(1);
                    *comms = ThreadComm::world(p.num_tasks, per_node).into_iter().map(Some).collect();
                }
                let comm = comms[rank as usize].take();
                Comm::Shared(comm.ok_or_else(|| backend_error(format!("rank {rank} asked for twice")))?)
            }
        };
        let client = Arc::new(self.lanefs.rank_client(p)?);
        self.lanefs.start_client(&client, p.num_tasks)?;
        let lanefs = self.lanefs;
        Ok(Box::new(MpiioRank {
            rank,
            client,
            comm: Some(comm),
            open: None,
            hints: hints(p)?.0,
            lanefs,
            environment_shown: &self.environment_shown,
            timers: &self.timers,
        }))
    }

    fn delete(&self, path: &str) -> Result<(), IorError> {
        self.lanefs.delete(path)
    }

    fn mkdir(&self, path: &str) -> Result<(), IorError> {
        self.lanefs.mkdir(path)
    }

    fn fs_info(&self, path: &str) -> Result<FsInfo, IorError> {
        self.lanefs.fs_info(path)
    }

    fn start_timeline(&self, origin: std::time::Instant, interval_s: f64) -> Result<(), IorError> {
        self.lanefs.start_timeline(origin, interval_s)
    }

    fn timeline(&self) -> Option<lanefs_ior::timeseries::TimeSeries> {
        self.lanefs.timeline()
    }

    fn rank_counters(&self) -> Vec<u64> {
        self.lanefs.rank_counters()
    }

    fn set_job_counters(&self, totals: &[u64]) {
        self.lanefs.set_job_counters(totals)
    }

    fn report(&self) -> Option<BackendReport> {
        self.lanefs.report()
    }

    fn reports(&self) -> Vec<BackendReport> {
        let mut reports: Vec<BackendReport> = self.report().into_iter().collect();
        let timers = self.timers.lock().expect("timers");
        if !timers.is_empty() {
            let json = lanefs_mpiio::report::timers_json(&timers);
            reports.push(BackendReport::json_only(lanefs_mpiio::report::TIMERS_JSON_KEY, json));
        }
        reports
    }
}

/// A rank's handle on a lanefs file, as the collective layer uses it.
struct LanefsFile {
    client: Arc<Client>,
    file: File,
}

impl FileAccess for LanefsFile {
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), String> {
        self.client.pwrite(&self.file, offset, data).map_err(|e| e.to_string())
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let data = self.client.pread(&self.file, offset, buf.len() as u64).map_err(|e| e.to_string())?;
        buf.copy_from_slice(&data);
        Ok(())
    }

    fn lock_ahead(&mut self, advices: &[Advice]) -> Result<(), String> {
        self.client.ladvise(&self.file, advices).map(drop).map_err(|e| e.to_string())
    }

    fn no_expand(&mut self) -> Result<(), String> {
        self.client.ladvise(&self.file, &[Advice::lock_no_expand(true)]).map(drop).map_err(|e| e.to_string())
    }

    fn group_lock(&mut self, gid: u64) -> Result<(), String> {
        self.client.group_lock(&self.file, gid).map_err(|e| e.to_string())
    }

    fn group_unlock(&mut self, gid: u64) -> Result<(), String> {
        self.client.group_unlock(&self.file, gid).map_err(|e| e.to_string())
    }

    fn sync(&mut self) -> Result<(), String> {
        self.client.fsync(&self.file).map_err(|e| e.to_string())
    }
}

/// The communicator of an open file: the ranks' (threads of this process,
/// or the job's under `mpirun`), or a rank's own (`-F`).
enum Comm<'w> {
    Shared(ThreadComm),
    World(&'w (dyn Communicator + Sync)),
    Alone(ThreadComm),
}

impl Comm<'_> {
    fn get(&self) -> &dyn Communicator {
        match self {
            Comm::Shared(c) | Comm::Alone(c) => c,
            Comm::World(c) => *c,
        }
    }
}

impl Communicator for Comm<'_> {
    fn rank(&self) -> u32 {
        self.get().rank()
    }
    fn size(&self) -> u32 {
        self.get().size()
    }
    fn ranks_per_node(&self) -> u32 {
        self.get().ranks_per_node()
    }
    fn barrier(&self) -> Result<(), lanefs_mpiio::CommError> {
        self.get().barrier()
    }
    fn allgather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, lanefs_mpiio::CommError> {
        self.get().allgather(mine)
    }
    fn allgather_same(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>, lanefs_mpiio::CommError> {
        self.get().allgather_same(mine)
    }
    fn alltoallv(
        &self,
        send: &[u8],
        to: &[std::ops::Range<usize>],
        recv: &mut [u8],
        from: &[std::ops::Range<usize>],
    ) -> Result<(), lanefs_mpiio::CommError> {
        self.get().alltoallv(send, to, recv, from)
    }
    fn wtime(&self) -> f64 {
        self.get().wtime()
    }
    fn abort(&self, reason: &str) {
        self.get().abort(reason)
    }
}

struct Open<'w> {
    file: CollectiveFile<Comm<'w>, LanefsFile>,
    collective: bool,
    /// The file's name as the program gave it.
    name: String,
    writing: bool,
}

struct MpiioRank<'w> {
    rank: u32,
    client: Arc<Client>,
    /// The ranks' communicator while no file is open.
    comm: Option<Comm<'w>>,
    open: Option<Open<'w>>,
    hints: MpiioHints,
    /// Told of the client's counters when the rank ends.
    lanefs: &'w LanefsBackend,
    /// The backend's: Cray's environment block was printed.
    environment_shown: &'w AtomicBool,
    timers: &'w Mutex<Vec<lanefs_mpiio::WriteTimers>>,
}

impl Drop for MpiioRank<'_> {
    fn drop(&mut self) {
        self.lanefs.count_client(self.rank, &self.client);
    }
}

/// IOR's `ShowHints` block: a title, then `\tkey = value` lines in braces.
fn show_hints(title: &str, hints: &[(String, String)]) -> String {
    let mut text = format!("\n{title} {{\n");
    for (key, value) in hints {
        text += &format!("\t{key} = {value}\n");
    }
    text + "}\n"
}

fn mpiio_error(e: impl std::fmt::Display) -> IorError {
    IorError::Backend { backend: NAME, message: e.to_string() }
}

impl<'w> MpiioRank<'w> {
    /// `MPI_File_open`: collective over the ranks of a shared file (the
    /// first creates it), alone with `-F`.
    fn open_file(&mut self, name: &str, p: &IorParams, writing: bool) -> Result<(), IorError> {
        let path = absolute(name);
        let shared = self.comm.take().ok_or_else(|| mpiio_error("a file is already open"))?;
        let comm = if p.file_per_proc {
            let alone = ThreadComm::world(1, 1).pop().expect("one rank");
            self.comm = Some(shared);
            Comm::Alone(alone)
        } else {
            shared
        };
        let stripe = StripeSpec {
            count: self.hints.striping_factor.map(i64::from),
            size: self.hints.striping_unit,
            start_ost: None,
            ..StripeSpec::default()
        };
        let request = if writing && comm.rank() == 0 {
            MdsRequest::Create {
                path: path.clone(),
                stripe,
                mode: CreateMode::OpenOrCreate,
                access: Access::Write,
                permissions: 0o666 & !process_umask(),
            }
        } else {
            MdsRequest::Open { path: path.clone(), access: if writing { Access::Write } else { Access::Read } }
        };
        let first = if comm.rank() == 0 { Some(self.client.mds(request.clone())) } else { None };
        comm.barrier().map_err(mpiio_error)?;
        let opened = match first {
            Some(reply) => reply,
            None => self.client.mds(request),
        }
        .map_err(mpiio_error)
        .and_then(|reply| match reply {
            MdsReply::File(info) => {
                let striping =
                    Striping { stripe_size: info.layout.stripe_size(), stripe_count: info.layout.stripe_count() };
                let file = self.client.open_file(&path, info).map_err(mpiio_error)?;
                Ok((striping, file))
            }
            _ => Err(mpiio_error("unexpected MDS answer to open")),
        });
        let (striping, file) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                // The others must not wait for this rank in the collective.
                comm.abort(&format!("rank {}: {e}", self.rank));
                return Err(e);
            }
        };
        let access = LanefsFile { client: self.client.clone(), file };
        let file = CollectiveFile::open(comm, access, striping, &self.hints).map_err(mpiio_error)?;
        // IOR's --mpiio.showHints (aiori-MPIIO.c): the hints given, then
        // those the open file keeps, on rank 0's standard output.
        if self.rank == 0 && p.show_hints {
            let passed = hint_pairs(p)?;
            let kept: Vec<(String, String)> =
                file.hints().entries().into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            print!("{}", show_hints("hints passed to MPI_File_open()", &passed));
            print!("{}", show_hints("hints returned from opened file", &kept));
        }
        // Reports name the file as the program opened it, as Cray's do.
        if self.rank == 0 && env_flag("MPIIO_HINTS_DISPLAY") {
            if !self.environment_shown.swap(true, Ordering::Relaxed) {
                eprint!("{}", mhints::display_environment(mhints::environment_value));
            }
            eprint!("{}", mhints::display_hints(name, file.hints()));
        }
        if env_flag("MPIIO_AGGREGATOR_PLACEMENT_DISPLAY") && writing {
            // Every rank says where it runs; rank 0 prints.
            let hosts = file
                .communicator()
                .allgather(lanefs_ior::host_name().unwrap_or_default().as_bytes())
                .map_err(mpiio_error)?;
            if file.communicator().rank() == 0 && self.rank == 0 {
                let node = |rank: u32| String::from_utf8_lossy(&hosts[rank as usize]).into_owned();
                eprint!("{}", lanefs_mpiio::format_aggregator_placement(name, file.write_aggregators(), node));
            }
        }
        self.open = Some(Open { file, collective: p.collective, name: name.to_string(), writing });
        Ok(())
    }

    fn open(&mut self) -> Result<&mut Open<'w>, IorError> {
        self.open.as_mut().ok_or_else(|| mpiio_error("no file open"))
    }
}

impl RankIo for MpiioRank<'_> {
    fn create(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        self.open_file(path, p, true)
    }

    fn open(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        self.open_file(path, p, false)
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError> {
        let open = self.open()?;
        let result =
            if open.collective { open.file.write_at_all(offset, buf) } else { open.file.write_at(offset, buf) };
        result.map_err(mpiio_error)
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError> {
        let open = self.open()?;
        let result = if open.collective { open.file.read_at_all(offset, buf) } else { open.file.read_at(offset, buf) };
        result.map_err(mpiio_error)
    }

    fn fsync(&mut self) -> Result<(), IorError> {
        self.open()?.file.sync().map_err(mpiio_error)
    }

    fn abandon(&mut self, reason: &str) {
        match (&self.open, &self.comm) {
            (Some(open), _) => open.file.communicator().abort(reason),
            (None, Some(comm)) => comm.abort(reason),
            (None, None) => {}
        }
    }

    fn close(&mut self) -> Result<(), IorError> {
        let Some(open) = self.open.take() else { return Ok(()) };
        let (report, access, comm) = open.file.close().map_err(mpiio_error)?;
        if !matches!(comm, Comm::Alone(_)) {
            self.comm = Some(comm);
        }
        self.client.close(access.file).map_err(mpiio_error)?;
        if let Some(report) = report.filter(|_| self.rank == 0) {
            let path = &open.name;
            if env_flag("MPIIO_STATS") {
                let block = if open.writing {
                    lanefs_mpiio::format_write_stats(path, &report.write_stats)
                } else {
                    lanefs_mpiio::format_read_stats(path, &report.read_stats)
                };
                eprint!("{block}");
            }
            if env_flag("MPIIO_TIMERS") && open.writing && !report.writers.is_empty() {
                let elapsed = lanefs_core::units::Duration::from_ns((report.write_elapsed_s * 1e9) as u64);
                let bytes = report.writers.iter().map(|w| w.bytes).sum();
                let written = lanefs_mpiio::WriteTimers::new(path, &report.writers, bytes, elapsed);
                eprint!("{}", written.format());
                self.timers.lock().expect("timers").push(written);
            }
        }
        Ok(())
    }
}
