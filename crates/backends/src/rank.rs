//! One IOR rank on a lanefs client of its own ([`LanefsRank`]): the lock
//! mode's advice on every open, its client's settings from the
//! `--lanefs.*` module options, and the figures only clients know. The
//! LANEFS backend runs it in a thread of the front end, or in a process of
//! its own (see `crate::ranks`); the MPIIO backend gives each rank's
//! collective layer one such client.

use lanefs_client::{process_umask, Client, ClientOptions, File};
use lanefs_core::client::ladvise::{Advice, AheadMode, AheadSchedule, IoLockMode};
use lanefs_core::client::timeline::SERIES_GROUPS;
use lanefs_ior::timeseries::TimeSeries;
use lanefs_ior::{IorError, IorParams, ModuleOption, RankIo};
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use std::sync::Mutex;

/// The backend's name in IOR's `-a` and in its errors.
pub(crate) const NAME: &str = lanefs_ior::Api::Lanefs.name();

/// Each rank's client and the embedded cluster: taken by every backend that
/// runs on lanefs (`-a LANEFS`, and `-a MPIIO` as `--lanefs.*`).
pub const CLIENT_OPTIONS: &[ModuleOption] = &[
    ModuleOption { name: "osts", takes_value: true, help: "OSTs of the embedded cluster (default 4)" },
    ModuleOption {
        name: "max-dirty-mb",
        takes_value: true,
        help: "dirty MiB per OST before a rank's writes wait (default: 32 per node, shared by its ranks)",
    },
    ModuleOption {
        name: "max-cached-mb",
        takes_value: true,
        help: "clean cached MiB per rank (default: 64 per node, shared by its ranks)",
    },
    ModuleOption {
        name: "max-unstable-mb",
        takes_value: true,
        help: "uncommitted MiB per OST a rank keeps to replay (default: 128 per node, shared by its ranks)",
    },
    ModuleOption { name: "max-rpcs-in-flight", takes_value: true, help: "write RPCs in flight per OST (default 8)" },
    ModuleOption {
        name: "timeout",
        takes_value: true,
        help:
            "seconds an RPC may go unanswered or a server be out of reach before the operation fails (obd_timeout, 100)",
    },
];

/// Lockahead figures that only the clients know, summed over the ranks,
/// and the run's time series as the ranks' clients counted it.
#[derive(Default)]
pub(crate) struct Totals {
    pub lockahead_sent: u64,
    pub lockahead_refused: u64,
    /// When the run's time series began and its bins' length, once started.
    pub timeline: Option<(std::time::Instant, f64)>,
    /// The ranks' clients' bins, each added as its rank ends.
    pub series: Option<TimeSeries>,
    /// The ranks of the run (one client each), for the series' groups.
    pub clients: u32,
}

impl Totals {
    /// Start `client`'s timeline (rank `rank`'s of `ranks`) when the run
    /// records its time series.
    pub(crate) fn start_client(totals: &Mutex<Totals>, client: &Client, ranks: u32) -> Result<(), IorError> {
        let Some((origin, interval_s)) = totals.lock().map_or(None, |mut t| {
            t.clients = t.clients.max(ranks);
            t.timeline
        }) else {
            return Ok(());
        };
        client.start_timeline(origin, std::time::Duration::from_secs_f64(interval_s)).map_err(backend_error)
    }

    /// Add what rank `rank`'s client counted to the run's series (as the
    /// rank ends). A client that cannot answer leaves a warning, and the
    /// series marked as missing some of its counts.
    pub(crate) fn end_client(totals: &Mutex<Totals>, rank: u32, client: &Client) {
        let Ok(mut t) = totals.lock() else { return };
        let Some((_, interval_s)) = t.timeline else { return };
        let series = t.series.get_or_insert_with(|| TimeSeries::new("real", interval_s));
        match client.take_timeline() {
            Ok(Some((bins, truncated))) => {
                series.truncated |= truncated;
                for (bin, counts) in &bins {
                    for (name, unit, per, member, count) in counts.series_counts(rank) {
                        series.group(name, unit, per).add(member, *bin, count);
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("lanefs: warning: the time series lacks rank {rank}'s lock and OST counts: {e}");
                series.truncated = true;
            }
        }
    }

    /// The series the ranks' clients counted, with every group present
    /// (`osts` OSTs), for [`lanefs_ior::Backend::timeline`].
    pub(crate) fn series(&self, osts: u32) -> Option<TimeSeries> {
        let (_, interval_s) = self.timeline?;
        let mut series = self.series.clone().unwrap_or_else(|| TimeSeries::new("real", interval_s));
        for (name, unit, per) in SERIES_GROUPS {
            let g = series.group(name, unit, per);
            g.head.members = g.head.members.max(if per == "ost" { osts } else { self.clients });
        }
        Some(series)
    }
}

pub(crate) fn backend_error(e: impl std::fmt::Display) -> IorError {
    IorError::Backend { backend: NAME, message: e.to_string() }
}

/// Each rank's client settings, from the `max-*` module options; what they
/// leave unset is the rank's share of one node's allowance (Lustre's
/// defaults), among the ranks of its node (`tasksPerNode`): every rank here
/// is a client of its own, so that ranks contend for locks as the nodes of
/// a cluster do, but the ranks of one node share that node's memory, as
/// they share its one Lustre client.
pub(crate) fn client_options(p: &IorParams) -> Result<ClientOptions, IorError> {
    let mut options = ClientOptions::default();
    // What the OSTs acknowledged and have not yet committed is kept in the
    // same memory (Lustre's unstable pages count against the node's cache).
    options.core.share_among(u64::from(p.tasks_on_node0()));
    let core = &mut options.core;
    let number = |name: &str| -> Result<Option<u64>, IorError> {
        match p.module_value(&format!("lanefs.{name}")) {
            None => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| option_error(name, format!("{v:?} is not a whole number; e.g. --lanefs.{name}=16"))),
        }
    };
    if let Some(mb) = number("max-dirty-mb")? {
        if mb.saturating_mul(1 << 20) < core.rpc_bytes_max {
            return Err(option_error("max-dirty-mb", format!("{mb} is below one 1 MiB write RPC; give 1 or more")));
        }
        core.dirty_bytes_max = mb.saturating_mul(1 << 20);
    }
    if let Some(mb) = number("max-cached-mb")? {
        core.cached_bytes_max = mb.saturating_mul(1 << 20);
    }
    if let Some(mb) = number("max-unstable-mb")? {
        if mb.saturating_mul(1 << 20) < core.rpc_bytes_max {
            return Err(option_error("max-unstable-mb", format!("{mb} is below one 1 MiB write RPC; give 1 or more")));
        }
        core.unstable_bytes_max = mb.saturating_mul(1 << 20);
    }
    if let Some(n) = number("max-rpcs-in-flight")? {
        if !(1..=256).contains(&n) {
            return Err(option_error("max-rpcs-in-flight", format!("{n} is outside 1..=256 (Lustre's limits)")));
        }
        core.rpcs_in_flight_max = n as usize;
    }
    if let Some(seconds) = number("timeout")? {
        if !(1..=86_400).contains(&seconds) {
            return Err(option_error(
                "timeout",
                format!("{seconds} is outside 1..=86400 seconds; Lustre's default is 100"),
            ));
        }
        options = options.with_timeout(std::time::Duration::from_secs(seconds));
    }
    Ok(options)
}

/// IOR's default `-o testFile` is relative: lanefs paths start at its root.
pub fn absolute(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

pub(crate) fn option_error(option: &str, message: String) -> IorError {
    IorError::Option { option: format!("--lanefs.{option}"), message }
}

pub(crate) fn lock_mode(p: &IorParams) -> Result<IoLockMode, IorError> {
    p.module_value("lanefs.lock-mode")
        .map_or(Ok(IoLockMode::Default), |v| IoLockMode::parse(v).map_err(|m| option_error("lock-mode", m)))
}

pub(crate) fn stripe(p: &IorParams) -> Result<StripeSpec, IorError> {
    let count =
        match p.module_value("lanefs.stripe-count") {
            None => None,
            Some(v) => Some(v.parse::<i64>().map_err(|_| {
                option_error("stripe-count", format!("{v:?} is not a number; e.g. 4, or -1 for all OSTs"))
            })?),
        };
    let size = match p.module_value("lanefs.stripe-size") {
        None => None,
        Some(v) => Some(lanefs_ior::parse_size(v).map_err(|m| option_error("stripe-size", m))?),
    };
    Ok(StripeSpec { count, size, ..StripeSpec::default() })
}

/// One rank: its own client, one file open at a time.
pub(crate) struct LanefsRank<'a> {
    totals: &'a Mutex<Totals>,
    rank: u32,
    client: Option<Client>,
    file: Option<File>,
    mode: IoLockMode,
    stripe: StripeSpec,
    /// The open file is under this rank's group lock.
    grouped: bool,
    /// In lockahead mode, while writing: the rank's transfers' offsets and
    /// when to ask for their locks.
    ahead: Option<Ahead>,
}

/// A writer's lockahead: its transfers' offsets in the order it writes
/// them, the schedule of their locks, and how many it has written.
struct Ahead {
    offsets: Vec<u64>,
    transfer: u64,
    schedule: AheadSchedule,
    written: u64,
}

impl<'a> LanefsRank<'a> {
    pub(crate) fn new(totals: &'a Mutex<Totals>, rank: u32, client: Client, p: &IorParams) -> Result<Self, IorError> {
        Totals::start_client(totals, &client, p.num_tasks)?;
        Ok(LanefsRank {
            totals,
            rank,
            client: Some(client),
            file: None,
            mode: lock_mode(p)?,
            stripe: stripe(p)?,
            grouped: false,
            ahead: None,
        })
    }

    fn client(&self) -> &Client {
        self.client.as_ref().expect("client lives as long as the rank")
    }

    fn file(&self) -> Result<&File, IorError> {
        self.file.as_ref().ok_or_else(|| backend_error("no file open"))
    }

    fn advise(&mut self, p: &IorParams, writing: bool) -> Result<(), IorError> {
        self.ahead = None;
        let (cl, f) = (self.client(), self.file()?);
        if self.mode == IoLockMode::Default {
            return Ok(());
        }
        if self.mode == IoLockMode::Group {
            if writing {
                cl.group_lock(f, 1).map_err(backend_error)?;
                self.grouped = true;
            }
            return Ok(());
        }
        cl.ladvise(f, &[Advice::lock_no_expand(true)]).map_err(backend_error)?;
        if self.mode == IoLockMode::Lockahead && writing {
            // A window of the rank's transfers at a time (see
            // `AheadSchedule`); every rank is a client of its own.
            let offsets: Vec<u64> = lanefs_ior::offsets(p, self.rank).collect();
            let transfer = p.transfer_size_bytes;
            let schedule = AheadSchedule::new(
                offsets.len() as u64,
                transfer,
                f.layout.stripe_size(),
                f.layout.stripe_count(),
                client_options(p)?.core.lru_locks_max,
                1,
            );
            self.ahead = Some(Ahead { offsets, transfer, schedule, written: 0 });
            self.lock_ahead()?;
        }
        Ok(())
    }

    /// Before the next write in lockahead mode: ask for the locks its
    /// schedule says are due (asynchronous; the write waits for its own
    /// lock if that is still on its way).
    fn lock_ahead(&self) -> Result<(), IorError> {
        let Some(ahead) = self.ahead.as_ref() else { return Ok(()) };
        let due = ahead.schedule.before(ahead.written);
        let t = ahead.transfer;
        let advices: Vec<Advice> = ahead.offsets[due.start as usize..due.end as usize]
            .iter()
            .map(|&o| Advice::lockahead(AheadMode::Write, o, o + t - 1, true))
            .collect();
        if !advices.is_empty() {
            self.client().ladvise(self.file()?, &advices).map_err(backend_error)?;
        }
        Ok(())
    }
}

impl RankIo for LanefsRank<'_> {
    fn create(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        let path = &absolute(path);
        let request = MdsRequest::Create {
            path: path.clone(),
            stripe: self.stripe.clone(),
            mode: CreateMode::OpenOrCreate,
            access: Access::Write,
            permissions: 0o666 & !process_umask(),
        };
        let MdsReply::File(info) = self.client().mds(request).map_err(backend_error)? else {
            return Err(backend_error("unexpected MDS answer to create"));
        };
        self.file = Some(self.client().open_file(path, info).map_err(backend_error)?);
        self.advise(p, true)
    }

    fn open(&mut self, path: &str, p: &IorParams) -> Result<(), IorError> {
        let path = &absolute(path);
        let open = MdsRequest::Open { path: path.clone(), access: Access::Read };
        let MdsReply::File(info) = self.client().mds(open).map_err(backend_error)? else {
            return Err(backend_error("unexpected MDS answer to open"));
        };
        self.file = Some(self.client().open_file(path, info).map_err(backend_error)?);
        self.advise(p, false)
    }

    fn write_at(&mut self, offset: u64, buf: &[u8]) -> Result<(), IorError> {
        self.lock_ahead()?;
        self.client().pwrite(self.file()?, offset, buf).map_err(backend_error)?;
        if let Some(ahead) = self.ahead.as_mut() {
            ahead.written += 1;
        }
        Ok(())
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), IorError> {
        let data = self.client().pread(self.file()?, offset, buf.len() as u64).map_err(backend_error)?;
        buf.copy_from_slice(&data);
        Ok(())
    }

    fn fsync(&mut self) -> Result<(), IorError> {
        self.client().fsync(self.file()?).map_err(backend_error)
    }

    fn close(&mut self) -> Result<(), IorError> {
        let Some(f) = self.file.take() else { return Ok(()) };
        self.ahead = None;
        if std::mem::take(&mut self.grouped) {
            self.client().group_unlock(&f, 1).map_err(backend_error)?;
        }
        self.client().close(f).map_err(backend_error)
    }
}

impl Drop for LanefsRank<'_> {
    fn drop(&mut self) {
        if let Some(cl) = self.client.take() {
            if let (Ok(c), Ok(mut t)) = (cl.counters(), self.totals.lock()) {
                t.lockahead_sent += c.lockahead_enqueues;
                t.lockahead_refused += c.lockahead_refused;
            }
            Totals::end_client(self.totals, self.rank, &cl);
        }
    }
}
