//! The servers' CPU time per I/O RPC, per lock request and per blocking
//! callback, and the client's per call, per message and per page: lanefs's
//! own costs, each taken from the real daemons and the real client library
//! under a load that makes mostly one kind of work ([`crate::load`]), and
//! turned into costs per unit by [`crate::costs`].
//!
//! CPU time, not wall time ([`crate::cpu`]): the servers run in a process
//! of their own ([`crate::cluster`]), the client in this one, and nothing
//! else runs in either while a phase is measured.

use crate::cluster::Cluster;
use crate::costs::{self, ClientCosts, Phases, ServerCosts};
use crate::load;
use crate::Options;
use lanefs_client::{Client, File};

#[derive(Clone, Debug)]
pub struct Servers {
    /// The median of the rounds' costs.
    pub costs: ServerCosts,
    pub client: ClientCosts,
    /// The rounds' phases, summed.
    pub phases: Phases,
    pub rounds: usize,
    /// The servers' CPU time per second while idle, taken off each phase.
    pub idle_rate: f64,
}

/// Where each write phase writes in its file, each round [`ROUND_BYTES`]
/// further: apart, so that no phase finds another's pages cached.
const PAGE_RPCS_BASE: u64 = 1 << 30;
const LARGE_RPCS_BASE: u64 = 16 << 30;
const ROUND_BYTES: u64 = 1 << 30;
/// Files two clients write in turn at once (see [`load::ping_pong_writes`]).
const CALLBACK_FILES: usize = 4;
/// Written in 1 MiB RPCs before anything is measured, fsync'ed every 16
/// MiB: the client's cache then holds as many pages at once (its clean
/// cache full, and a sync's worth dirty) as any phase will, so that every
/// frame of its arena a phase writes into was written before. The first
/// write into a frame faults, which is `page_first_touch_us`, measured
/// apart: no phase's cost should hold it.
const WARM_UP_BYTES: u64 = 128 << 20;

/// The clients and the files the phases use, made before anything is
/// measured.
struct Setup {
    client: Client,
    file: File,
    /// A second client, which takes turns with the first.
    other: Client,
    pairs: Vec<[File; 2]>,
    /// A client that keeps a single unused lock, and the pairs of files
    /// each of its threads writes in turn.
    retaking: Client,
    retake_pairs: Vec<[File; 2]>,
    /// Pairs of files nothing is written to, which the same client's
    /// threads take lock-ahead locks on in turn.
    lock_pairs: Vec<[File; 2]>,
    /// A client that keeps every lock it is granted.
    asking: Client,
    /// Each round's files: for its cached writes, and for its lock-ahead
    /// locks (on `asking`).
    cached_files: Vec<Vec<File>>,
    lock_files: Vec<Vec<File>>,
}

/// Runs the phases on `cluster` in rounds; `copy_gib_s`: one core's copy
/// rate, for the client's cost per page, and `cache_write_gib_s` its rate
/// into the page cache, for the servers'.
pub fn measure(
    cluster: &Cluster,
    options: &Options,
    copy_gib_s: f64,
    cache_write_gib_s: f64,
) -> Result<Servers, String> {
    let rounds = options.cost_rounds();
    let mut setup = setup(cluster, options)?;
    let idle_rate = load::idle_rate(cluster)?;
    let mut measured = Vec::with_capacity(rounds);
    for round in 0..rounds {
        measured.push(round_of(cluster, &mut setup, options, round, idle_rate)?);
    }
    let server: Vec<ServerCosts> =
        measured.iter().map(|p| costs::server_costs(p, cache_write_gib_s)).collect::<Result<_, _>>()?;
    let client: Vec<ClientCosts> =
        measured.iter().map(|p| costs::client_costs(p, copy_gib_s)).collect::<Result<_, _>>()?;
    let mut phases = Phases::default();
    measured.into_iter().for_each(|p| phases += p);
    Ok(Servers {
        costs: costs::median_server_costs(&server),
        client: costs::median_client_costs(&client),
        phases,
        rounds,
        idle_rate,
    })
}

/// The clients, and every file, made before anything is measured (the
/// MDS then precreates objects to replace those they took, which the
/// phases wait out: see [`load::settle`]).
fn setup(cluster: &Cluster, options: &Options) -> Result<Setup, String> {
    let rounds = options.cost_rounds();
    let client = load::connect(cluster, 0)?;
    let file = load::create(&client, "/writes")?;
    let other = load::connect(cluster, 0)?;
    let pairs = (0..CALLBACK_FILES)
        .map(|i| {
            let path = format!("/callbacks-{i}");
            Ok([load::create(&client, &path)?, open(&other, &path)?])
        })
        .collect::<Result<Vec<_>, String>>()?;
    // Room for every round's locks, their files' rounding up included.
    let locks_max = 2 * options.lock_requests() as usize + load::LOCKS_PER_FILE as usize * rounds;
    let asking = load::connect(cluster, locks_max)?;
    let (cached, locks) = (options.cached_writes() / rounds as u64, options.lock_requests() / rounds as u64);
    let cached_files = (0..rounds)
        .map(|round| load::files_for_cached_writes(&client, &format!("cached-{round}"), cached))
        .collect::<Result<_, _>>()?;
    let lock_files = (0..rounds).map(|round| load::files_for_locks(&asking, round, locks)).collect::<Result<_, _>>()?;
    let retaking = load::connect_keeping(cluster, 1)?;
    let retake_pairs = file_pairs(&retaking, "retakes")?;
    let lock_pairs = file_pairs(&retaking, "lock-retakes")?;
    let warm_up = load::create(&client, "/warm-up")?;
    load::large_rpcs(&client, &warm_up, 0, WARM_UP_BYTES)?;
    load::sync_and_close(&client, vec![warm_up])?;
    // Each lock taken once before anything is measured.
    load::page_rpcs(&client, &file, 0, 1)?;
    load::ping_pong_writes([&client, &other], &pairs, 2)?;
    sync_pairs(&client, &other, &pairs)?;
    load::lru_writes(&retaking, &retake_pairs, 2)?;
    sync_pairs(&retaking, &retaking, &retake_pairs)?;
    load::lock_retakes(&retaking, &lock_pairs, 2)?;
    Ok(Setup { client, file, other, pairs, retaking, retake_pairs, lock_pairs, asking, cached_files, lock_files })
}

/// One round of every phase, each `1 / rounds` of its whole; what a phase
/// wrote is made durable before the next, so that no commit of it comes
/// in another's.
fn round_of(
    cluster: &Cluster,
    s: &mut Setup,
    options: &Options,
    round: usize,
    idle_rate: f64,
) -> Result<Phases, String> {
    let rounds = options.cost_rounds() as u64;
    let at = round as u64 * ROUND_BYTES;
    let (client, file, cached_files) = (&s.client, &s.file, std::mem::take(&mut s.cached_files[round]));
    let run = |work: &dyn Fn() -> Result<u64, String>| load::measured(cluster, client, idle_rate, work);
    let cached_writes = options.cached_writes() / rounds;
    let cached = run(&|| load::cached_writes(client, &cached_files, cached_writes))?;
    load::sync_and_close(client, cached_files)?;
    let page_rpcs = run(&|| load::page_rpcs(client, file, PAGE_RPCS_BASE + at, options.page_rpcs() / rounds))?;
    let large_bytes = options.large_rpc_bytes() / rounds;
    let large_rpcs = run(&|| load::large_rpcs(client, file, LARGE_RPCS_BASE + at, large_bytes))?;
    let per_file = options.callback_writes().div_ceil(rounds * CALLBACK_FILES as u64);
    let callbacks = run(&|| load::ping_pong_writes([client, &s.other], &s.pairs, per_file))?;
    sync_pairs(client, &s.other, &s.pairs)?;
    let retakes = run(&|| load::lru_writes(&s.retaking, &s.retake_pairs, per_file))?;
    sync_pairs(&s.retaking, &s.retaking, &s.retake_pairs)?;
    let lock_retakes = run(&|| load::lock_retakes(&s.retaking, &s.lock_pairs, per_file))?;
    let locks = run(&|| load::lock_requests(&s.asking, &s.lock_files[round]))?;
    Ok(Phases { cached, page_rpcs, large_rpcs, callbacks, retakes, lock_retakes, locks })
}

/// Makes the files two clients wrote in turn durable: the one holding a
/// file's lock has its last write.
fn sync_pairs(client: &Client, other: &Client, pairs: &[[File; 2]]) -> Result<(), String> {
    for [mine, theirs] in pairs {
        client.fsync(mine).map_err(|e| format!("an fsync of {}: {e}", mine.path))?;
        other.fsync(theirs).map_err(|e| format!("an fsync of {}: {e}", theirs.path))?;
    }
    Ok(())
}

/// [`CALLBACK_FILES`] pairs of new files of `client`'s, named after `name`.
fn file_pairs(client: &Client, name: &str) -> Result<Vec<[File; 2]>, String> {
    let pair =
        |i| Ok([load::create(client, &format!("/{name}-{i}-a"))?, load::create(client, &format!("/{name}-{i}-b"))?]);
    (0..CALLBACK_FILES).map(pair).collect()
}

fn open(client: &Client, path: &str) -> Result<File, String> {
    let request = lanefs_proto::MdsRequest::Open { path: path.to_string(), access: lanefs_proto::Access::Write };
    match client.mds(request) {
        Ok(lanefs_proto::MdsReply::File(info)) => {
            client.open_file(path, info).map_err(|e| format!("opening {path}: {e}"))
        }
        Ok(other) => Err(format!("opening {path}: the MDS answered {other:?}")),
        Err(e) => Err(format!("opening {path}: {e}")),
    }
}
