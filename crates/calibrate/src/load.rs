//! The loads the servers' and the client's costs are measured under, each
//! driven through the lanefs client library from this process, each a
//! phase that [`measured`] brackets with both CPU clocks and the servers'
//! own counts of what they did (their OST statistics, as `lanefs lctl
//! get_param` reads them).
//!
//! Every phase's files have one stripe, so that a write is one object's
//! and goes to one OST, in one RPC at most.

use crate::cluster::Cluster;
use crate::cpu;
use lanefs_client::{Client, ClientOptions, File};
use lanefs_core::client::ladvise::{Advice, AheadMode, ADVICES_PER_CALL_MAX};
use lanefs_proto::{Access, CreateMode, MdsReply, MdsRequest, StripeSpec};
use std::time::{Duration, Instant};

pub const PAGE_BYTES: u64 = 4096;
/// The client's largest RPC (lanefs's default `max_pages_per_rpc`).
pub const LARGE_WRITE_BYTES: u64 = 1 << 20;
/// Dirty or unacknowledged bytes written between two fsyncs: well under
/// the client's dirty limit (32 MiB per OST) and unstable limit (128 MiB),
/// so that no write waits for the OST's next commit.
const BYTES_BETWEEN_SYNCS: u64 = 16 << 20;
/// Lock-ahead locks taken on one file: the lock server's list of granted
/// locks on a resource stays this short, as under a few ranks' lock-ahead.
pub const LOCKS_PER_FILE: u64 = 16;
/// How long the idle servers are watched, for what they spend doing
/// nothing (timers, pings), taken off each phase.
const IDLE_WINDOW: Duration = Duration::from_millis(200);

/// What the servers counted in a phase (summed over the OSTs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    /// Write and read RPCs: the I/O RPCs.
    pub io_rpcs: u64,
    /// Every other request the OSTs served: enqueues, cancels, syncs,
    /// getattrs, glimpses, punches (what the simulator charges
    /// `lock_cpu_us` for).
    pub requests: u64,
    pub enqueues: u64,
    pub callbacks: u64,
    pub bytes_written: u64,
}

impl Counts {
    fn of(stats: &[lanefs_proto::wire::OstStats]) -> Counts {
        let mut c = Counts::default();
        for s in stats {
            c.io_rpcs += s.data.write_rpcs + s.data.read_rpcs;
            c.requests +=
                s.locks.enqueues + s.locks.cancels + s.data.syncs + s.data.getattrs + s.data.glimpses + s.data.punches;
            c.enqueues += s.locks.enqueues;
            c.callbacks += s.locks.callbacks;
            c.bytes_written += s.data.bytes_written;
        }
        c
    }

    fn since(self, before: Counts) -> Counts {
        Counts {
            io_rpcs: self.io_rpcs - before.io_rpcs,
            requests: self.requests - before.requests,
            enqueues: self.enqueues - before.enqueues,
            callbacks: self.callbacks - before.callbacks,
            bytes_written: self.bytes_written - before.bytes_written,
        }
    }

    fn add(self, o: Counts) -> Counts {
        Counts {
            io_rpcs: self.io_rpcs + o.io_rpcs,
            requests: self.requests + o.requests,
            enqueues: self.enqueues + o.enqueues,
            callbacks: self.callbacks + o.callbacks,
            bytes_written: self.bytes_written + o.bytes_written,
        }
    }

    /// Every message a client sent the OSTs in the phase.
    pub fn messages(&self) -> u64 {
        self.io_rpcs + self.requests
    }
}

/// One phase, measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    /// Calls made (writes, lock-ahead locks asked for).
    pub ops: u64,
    pub counts: Counts,
    /// The servers' CPU time, less what they spend idle in as long.
    pub server_cpu: Duration,
    /// This process's CPU time: the client library's, on the calling
    /// thread and on its driver threads.
    pub client_cpu: Duration,
    pub wall: Duration,
}

/// Phases summed (the rounds of one, for the preset's comments).
impl std::ops::AddAssign for Sample {
    fn add_assign(&mut self, o: Sample) {
        self.ops += o.ops;
        self.counts = self.counts.add(o.counts);
        self.server_cpu += o.server_cpu;
        self.client_cpu += o.client_cpu;
        self.wall += o.wall;
    }
}

/// The servers' CPU time per second of doing nothing, once they have
/// settled.
pub fn idle_rate(cluster: &Cluster) -> Result<f64, String> {
    settle(cluster)?;
    let before = cluster.cpu()?;
    std::thread::sleep(IDLE_WINDOW);
    Ok((cluster.cpu()? - before).as_secs_f64() / IDLE_WINDOW.as_secs_f64())
}

/// Windows in which the servers' CPU time is watched for work left over
/// from before a phase (objects precreated for files just made, a commit),
/// until one shows them at most [`SETTLED_CPU_SHARE`] busy, or
/// [`SETTLE_MAX`] has passed (then the phase runs anyway: what is left is
/// noise its rounds' median takes out).
const SETTLE_WINDOW: Duration = Duration::from_millis(20);
const SETTLED_CPU_SHARE: f64 = 0.02;
const SETTLE_MAX: Duration = Duration::from_secs(2);

/// Waits until the servers do nothing left over from before.
pub fn settle(cluster: &Cluster) -> Result<(), String> {
    let began = Instant::now();
    while began.elapsed() < SETTLE_MAX {
        let before = cluster.cpu()?;
        std::thread::sleep(SETTLE_WINDOW);
        let share = (cluster.cpu()? - before).as_secs_f64() / SETTLE_WINDOW.as_secs_f64();
        if share <= SETTLED_CPU_SHARE {
            break;
        }
    }
    Ok(())
}

/// Runs `work` (which returns the calls it made), once the servers have
/// settled, between two readings of the servers' counts and both CPU
/// clocks.
pub fn measured(
    cluster: &Cluster,
    stats: &Client,
    idle_rate: f64,
    work: impl FnOnce() -> Result<u64, String>,
) -> Result<Sample, String> {
    let counts = || stats.ost_stats().map(|s| Counts::of(&s)).map_err(|e| format!("the OSTs' statistics: {e}"));
    settle(cluster)?;
    let counts_before = counts()?;
    let (server_before, client_before, began) = (cluster.cpu()?, cpu::own(), Instant::now());
    let ops = work()?;
    let wall = began.elapsed();
    let (client_cpu, server_cpu) = (cpu::own() - client_before, cluster.cpu()? - server_before);
    let idle = Duration::from_secs_f64(idle_rate * wall.as_secs_f64());
    let counts = counts()?.since(counts_before);
    Ok(Sample { ops, counts, server_cpu: server_cpu.saturating_sub(idle), client_cpu, wall })
}

/// A client of the cluster; `locks_max`: unused locks it keeps, so that
/// a phase's locks are not cancelled by its LRU while it runs.
pub fn connect(cluster: &Cluster, locks_max: usize) -> Result<Client, String> {
    connect_keeping(cluster, ClientOptions::default().core.lru_locks_max.max(locks_max))
}

/// A client of the cluster that keeps `locks_max` unused locks, exactly.
pub fn connect_keeping(cluster: &Cluster, locks_max: usize) -> Result<Client, String> {
    let mut options = ClientOptions::default();
    options.core.lru_locks_max = locks_max;
    Client::connect(cluster.mds(), options).map_err(|e| format!("connecting to the servers at {}: {e}", cluster.mds()))
}

/// A new file of one stripe, open.
pub fn create(client: &Client, path: &str) -> Result<File, String> {
    let request = MdsRequest::Create {
        path: path.to_string(),
        stripe: StripeSpec { count: Some(1), ..StripeSpec::default() },
        mode: CreateMode::Exclusive,
        access: Access::Write,
        permissions: 0o600,
    };
    match client.mds(request) {
        Ok(MdsReply::File(info)) => client.open_file(path, info).map_err(|e| format!("opening {path}: {e}")),
        Ok(other) => Err(format!("creating {path}: the MDS answered {other:?}")),
        Err(e) => Err(format!("creating {path}: {e}")),
    }
}

fn failed(what: &str) -> impl Fn(lanefs_client::NetError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Pages written to one file by [`cached_writes`]: the client sends an
/// object's dirty pages as soon as a full RPC's worth (1 MiB) has been
/// written to it, rewrites included, so each file takes one page fewer.
pub const CACHED_PAGES_PER_FILE: u64 = LARGE_WRITE_BYTES / PAGE_BYTES - 1;

/// `n` writes of one page, each to a page of its own, that stay in the
/// client's cache: no RPC (but the first write's lock on each file),
/// only the call and the copy. `files` has room for them (see
/// [`files_for_cached_writes`]).
pub fn cached_writes(client: &Client, files: &[File], n: u64) -> Result<u64, String> {
    let page = vec![1u8; PAGE_BYTES as usize];
    for i in 0..n {
        let file = &files[(i / CACHED_PAGES_PER_FILE) as usize];
        let offset = i % CACHED_PAGES_PER_FILE * PAGE_BYTES;
        client.pwrite(file, offset, &page).map_err(failed("a cached 4 KiB write"))?;
    }
    Ok(n)
}

/// Files for `n` cached writes, named after `name`.
pub fn files_for_cached_writes(client: &Client, name: &str, n: u64) -> Result<Vec<File>, String> {
    (0..n.div_ceil(CACHED_PAGES_PER_FILE)).map(|i| create(client, &format!("/{name}-{i}"))).collect()
}

/// Makes what `files` have cached durable (written back and committed,
/// so that no commit is left to come in a later phase), and closes them.
pub fn sync_and_close(client: &Client, files: Vec<File>) -> Result<(), String> {
    for file in files {
        let path = file.path.clone();
        client.fsync(&file).map_err(|e| format!("an fsync of {path}: {e}"))?;
        client.close(file).map_err(|e| format!("closing {path}: {e}"))?;
    }
    Ok(())
}

/// `n` writes of one page each, a page apart, so that no two merge and
/// each becomes a write RPC of its own when the fsync after every
/// [`BYTES_BETWEEN_SYNCS`] of them sends them; each batch at offsets of
/// its own, above `base`.
pub fn page_rpcs(client: &Client, file: &File, base: u64, n: u64) -> Result<u64, String> {
    let page = vec![2u8; PAGE_BYTES as usize];
    let per_sync = BYTES_BETWEEN_SYNCS / PAGE_BYTES;
    for i in 0..n {
        client.pwrite(file, base + i * 2 * PAGE_BYTES, &page).map_err(failed("a 4 KiB write"))?;
        if (i + 1) % per_sync == 0 || i + 1 == n {
            client.fsync(file).map_err(failed("an fsync of 4 KiB writes"))?;
        }
    }
    Ok(n)
}

/// `bytes` in 1 MiB writes, one after another from `base`, each a full
/// write RPC, with an fsync after every [`BYTES_BETWEEN_SYNCS`].
pub fn large_rpcs(client: &Client, file: &File, base: u64, bytes: u64) -> Result<u64, String> {
    let chunk: Vec<u8> = (0..LARGE_WRITE_BYTES).map(|i| (i * 7 + 3) as u8).collect();
    let n = bytes / LARGE_WRITE_BYTES;
    let per_sync = BYTES_BETWEEN_SYNCS / LARGE_WRITE_BYTES;
    for i in 0..n {
        client.pwrite(file, base + i * LARGE_WRITE_BYTES, &chunk).map_err(failed("a 1 MiB write"))?;
        if (i + 1) % per_sync == 0 || i + 1 == n {
            client.fsync(file).map_err(failed("an fsync of 1 MiB writes"))?;
        }
    }
    Ok(n)
}

/// Two clients writing the first page of a file in turn, `n` writes in
/// all on each of the files `pairs` holds (each client's handle of it),
/// one thread per file: each write's lock request conflicts with the
/// other client's lock, which the lock server calls back (the holder
/// writes its page and cancels) before it grants. The files are written
/// at once so that, as under a shared file's contention, the servers are
/// kept busy rather than woken for each message of one exchange.
pub fn ping_pong_writes(clients: [&Client; 2], pairs: &[[File; 2]], n: u64) -> Result<u64, String> {
    alternating_writes(pairs, n, 3, "a write that calls back the other client's lock", |turn| clients[turn])
}

/// The same writes as [`ping_pong_writes`], by one client that keeps a
/// single unused lock, each thread to two files of its own in turn: each
/// write takes its file's lock, and the client gives back the other's
/// (its page written first), as a called-back client would, but without
/// the callback. `n` writes on each pair of files.
pub fn lru_writes(client: &Client, pairs: &[[File; 2]], n: u64) -> Result<u64, String> {
    alternating_writes(pairs, n, 5, "a write that takes its file's lock back", |_| client)
}

/// `n` writes of a page filled with `fill` at offset 0 on each pair of
/// `pairs`, one thread a pair, to its two files in turn, the `i`th by
/// `writer(i % 2)`; returns the writes made.
fn alternating_writes<'a>(
    pairs: &[[File; 2]],
    n: u64,
    fill: u8,
    what: &'static str,
    writer: impl Fn(usize) -> &'a Client + Sync,
) -> Result<u64, String> {
    let page = vec![fill; PAGE_BYTES as usize];
    std::thread::scope(|scope| {
        let threads: Vec<_> = pairs
            .iter()
            .map(|files| {
                let (page, writer) = (&page, &writer);
                scope.spawn(move || -> Result<(), String> {
                    for i in 0..n {
                        let turn = (i % 2) as usize;
                        writer(turn).pwrite(&files[turn], 0, page).map_err(failed(what))?;
                    }
                    Ok(())
                })
            })
            .collect();
        threads.into_iter().try_for_each(|t| t.join().expect("a writing thread"))
    })?;
    Ok(n * pairs.len() as u64)
}

/// Lock requests and nothing else, by a client that keeps a single unused
/// lock (as [`lru_writes`]'s), one thread a pair of files never written:
/// each call asks for a lock-ahead write lock on the thread's files in
/// turn and waits for its grant, and the client gives back the other
/// file's lock to keep its one (a cancel with nothing under it to write
/// back or sync). An enqueue and a cancel a call, as the servers serve
/// them one after another while the other threads' wait; `n` calls on
/// each pair.
pub fn lock_retakes(client: &Client, pairs: &[[File; 2]], n: u64) -> Result<u64, String> {
    let advice = [Advice::lockahead(AheadMode::Write, 0, PAGE_BYTES - 1, false)];
    std::thread::scope(|scope| {
        let threads: Vec<_> = pairs
            .iter()
            .map(|files| {
                let advice = &advice;
                scope.spawn(move || -> Result<(), String> {
                    for i in 0..n {
                        let file = &files[(i % 2) as usize];
                        client.ladvise(file, advice).map_err(failed("a lock request with nothing written"))?;
                    }
                    Ok(())
                })
            })
            .collect();
        threads.into_iter().try_for_each(|t| t.join().expect("a lock-requesting thread"))
    })?;
    Ok(n * pairs.len() as u64)
}

/// `files.len() * LOCKS_PER_FILE` lock-ahead write locks, each on an
/// extent of its own, asked for in calls of [`LOCKS_PER_FILE`] that wait
/// for their grants: lock requests and nothing else.
pub fn lock_requests(client: &Client, files: &[File]) -> Result<u64, String> {
    const { assert!(LOCKS_PER_FILE < ADVICES_PER_CALL_MAX as u64) };
    let stride = 16 * PAGE_BYTES;
    let advices: Vec<Advice> = (0..LOCKS_PER_FILE)
        .map(|i| Advice::lockahead(AheadMode::Write, i * stride, i * stride + PAGE_BYTES - 1, false))
        .collect();
    for file in files {
        client.ladvise(file, &advices).map_err(failed("lock-ahead requests"))?;
    }
    Ok(files.len() as u64 * LOCKS_PER_FILE)
}

/// Files for `locks` lock-ahead locks: [`LOCKS_PER_FILE`] on each, new
/// ones for each `round`.
pub fn files_for_locks(client: &Client, round: usize, locks: u64) -> Result<Vec<File>, String> {
    (0..locks.div_ceil(LOCKS_PER_FILE)).map(|i| create(client, &format!("/locks-{round}-{i}"))).collect()
}
