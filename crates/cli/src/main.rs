//! The `lanefs` command: argument parsing and glue only. Every behaviour it
//! shows lives in the library crates; this file turns options into calls and
//! results into text or JSON.

mod args;
mod calibrate;
mod daemons;
mod demo;
mod find;
mod fs;
mod ior;
mod lctl;
mod lockscript;
mod mount;
mod out;
mod plot;
mod pool;
mod setstripe_args;
mod shell;
mod sim;
mod swarm;
mod top;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use lanefs_backends::ranks::RankLaunch;
use std::path::PathBuf;

/// The simulator allocates and frees small objects at every event (messages,
/// map nodes); mimalloc does that in a fraction of glibc's time. Built
/// without transparent huge pages: with them, long simulations ran at one
/// of two speeds, one 40% slower, from run to run.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "lanefs", version, about = "A parallel file system built around one shared file, and its tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    target: fs::Target,
}

#[derive(Subcommand)]
enum Command {
    /// Write one shared file from 4 clients (file per process, and shared
    /// with default locking, lock-no-expand and lockahead) on an embedded
    /// cluster, verify every byte, and compare bandwidth and lock traffic.
    Demo {
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
        /// Seed of the data pattern (and of the harness's latencies).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Run on the deterministic harness (in-memory, virtual time) instead.
        #[arg(long)]
        harness: bool,
    },
    /// Drive one OST's lock server with lock requests, one JSON object per
    /// line, and print each of its decisions as one JSON line.
    LockScript {
        /// Script file, or `-` for standard input.
        file: PathBuf,
    },
    /// Start a whole file system here (an MDS and an OSS with N OSTs) and run until interrupted.
    Up {
        /// Number of OSTs.
        #[arg(long, default_value_t = 4)]
        osts: u32,
        /// Directory for the MDS database and the OST objects.
        #[arg(long)]
        data: PathBuf,
        /// Listen on TCP (127.0.0.1, a free port) instead of Unix sockets in the data directory.
        #[arg(long)]
        tcp: bool,
        #[command(flatten)]
        ost_options: daemons::OstOptions,
        /// Serve uid 0 as this user and group, without root's privileges
        /// (Lustre's root_squash; off by default).
        #[arg(long, value_name = "UID:GID")]
        root_squash: Option<String>,
        /// What a client key's requests as uid 0 are served as, over TCP:
        /// UID:GID, or off to serve them as root (an admin key's always
        /// are). 65534:65534 by default, or --root-squash's if given.
        #[arg(long, value_name = "UID:GID|off")]
        key_root_squash: Option<String>,
        #[command(flatten)]
        limits: daemons::LimitArgs,
    },
    /// Measure this machine (the disk the OSTs would use, a core's copy
    /// rate alone and with every core copying, Unix and TCP sockets) and
    /// lanefs's own costs on it (the servers' CPU time per I/O RPC, lock
    /// request and callback, the client's per message and page, a FUSE
    /// mount's per request, MPI's latency, bandwidth and per message), and
    /// write a cluster preset describing it, for `lanefs sim ior --cluster`.
    Calibrate {
        /// A directory on the disk the OSTs would use (a temporary
        /// directory by default).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Write the preset to this file (standard output by default).
        #[arg(long, value_name = "PRESET.toml")]
        out: Option<PathBuf>,
        /// Smaller samples: under 20 s in all (about 2 minutes without).
        #[arg(long)]
        quick: bool,
        /// OSTs the preset's one OSS has, sharing the disk measured.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
        osts: u32,
        /// Ranks the preset describes, a client each on this host (the
        /// largest IOR -N to simulate).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
        ranks: u32,
    },
    /// Draw runs as a PNG or an SVG: from time series (`--timeseries
    /// FILE`, real or simulated), bandwidth over time (all OSTs, per OST,
    /// per rank) and lock traffic (all clients, per client); from IOR JSON
    /// summaries (`-O summaryFormat=JSON`), each operation's bandwidth and
    /// the MPI-IO write phase timers as stacked bars. Several files draw
    /// several runs on one picture.
    Plot {
        /// Time series (JSON Lines, docs/timeseries.md) or IOR JSON
        /// summaries, one per run, all of one kind.
        #[arg(required = true, value_name = "SERIES.jsonl|IOR.json")]
        series: Vec<PathBuf>,
        /// The picture to write: .png or .svg.
        #[arg(short, long, value_name = "OUT.png|OUT.svg")]
        out: PathBuf,
        /// Each run's name in the legends, in order (default: its file's name).
        #[arg(long, value_name = "NAME")]
        label: Vec<String>,
        /// The panels, in order: of a time series bandwidth, osts, ranks,
        /// locks, clients (default: all); of IOR summaries summary, timers
        /// (default: both, timers where the summaries have them).
        #[arg(long, value_delimiter = ',')]
        panels: Vec<String>,
    },
    /// Write a run's report as one self-contained HTML page (its command
    /// line, IOR's tables, the lanefs counters, the MPI-IO timers and the
    /// pictures inline as SVG), to attach to a ticket.
    Report {
        /// The run's IOR JSON summary (`-O summaryFormat=JSON`).
        #[arg(value_name = "IOR.json")]
        summary: PathBuf,
        /// The run's time series (`--timeseries`), drawn over time.
        #[arg(long, value_name = "SERIES.jsonl")]
        timeseries: Option<PathBuf>,
        /// The page to write (.html).
        #[arg(short, long, value_name = "OUT.html")]
        out: PathBuf,
    },
    /// Run the metadata server alone (for a cluster across hosts).
    Mds {
        #[arg(long)]
        data: PathBuf,
        /// Number of OSTs the file system has (OSSes register them).
        #[arg(long)]
        osts: u32,
        /// Address to listen on: HOST:PORT or unix:/PATH. Clients use it as
        /// given, so on a network give this host's address.
        #[arg(long, default_value = "127.0.0.1:9400")]
        listen: String,
        /// Serve uid 0 as this user and group, without root's privileges
        /// (Lustre's root_squash; off by default).
        #[arg(long, value_name = "UID:GID")]
        root_squash: Option<String>,
        /// What a client key's requests as uid 0 are served as, over TCP:
        /// UID:GID, or off to serve them as root (an admin key's always
        /// are). 65534:65534 by default, or --root-squash's if given.
        #[arg(long, value_name = "UID:GID|off")]
        key_root_squash: Option<String>,
        #[command(flatten)]
        limits: daemons::LimitArgs,
        /// Serve Prometheus metrics of the MDS on this HTTP address
        /// (HOST:PORT, e.g. 127.0.0.1:9168) at /metrics.
        #[arg(long, value_name = "HOST:PORT")]
        metrics: Option<String>,
    },
    /// Run an object storage server for some OSTs, registered with an MDS.
    Oss {
        /// The MDS's address.
        #[arg(long)]
        mds: String,
        #[arg(long)]
        data: PathBuf,
        /// OST indices served here, e.g. 0,1.
        #[arg(long, value_delimiter = ',', required = true)]
        ost: Vec<u32>,
        /// Address to listen on; clients connect to it as given, so on a
        /// network give this host's address.
        #[arg(long, default_value = "127.0.0.1:9401")]
        listen: String,
        #[command(flatten)]
        ost_options: daemons::OstOptions,
        #[command(flatten)]
        limits: daemons::LimitArgs,
    },
    /// Make the keys a cluster on TCP needs (`lanefs up --tcp` makes its own).
    #[command(subcommand)]
    Key(KeyCommand),
    /// IOR: `lanefs ior -a LANEFS [IOR options]` (also -a POSIX). Without
    /// --cluster, LANEFS runs on an embedded cluster in a temporary directory.
    #[command(disable_help_flag = true)]
    Ior {
        /// IOR's options, as IOR takes them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// One IOR rank's process (started by `lanefs ior --lanefs.ranks=processes`
    /// with the arguments of `lanefs_backends::ranks::RankLaunch::args`).
    #[command(hide = true)]
    IorRank {
        #[arg(long)]
        mds: String,
        #[arg(long)]
        rank: u32,
        /// The transfer buffer shared with the launcher.
        #[arg(long)]
        buffer: PathBuf,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        ior_args: Vec<String>,
    },
    /// Simulate: `lanefs sim ior --cluster PRESET [IOR options]` runs IOR on a
    /// modelled cluster (`lanefs sim presets` lists them; `lanefs sim ior -h`).
    #[command(disable_help_flag = true)]
    Sim {
        /// `ior` or `presets`, then their options.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The fault swarm: seeded runs of clients and OSTs under drawn faults
    /// (crashes, restarts, partitions, failing disks), checked per byte.
    /// Exits 127 on a crash, 128 on a liveness failure, 129 on a
    /// correctness failure (of the lowest failing seed).
    Swarm(swarm::SwarmArgs),
    /// Mount the file system (--mds, LANEFS_MDS) at a directory, so that
    /// unmodified programs use it; returns once it is mounted.
    Mount(mount::MountArgs),
    /// Unmount a lanefs mount (refused while files are open, unless --lazy).
    Umount(mount::UmountArgs),
    #[command(flatten)]
    Fs(Box<fs::FsCommand>),
    /// Lustre's lctl: get_param, set_param [-P], list_param of live clients
    /// (mounts, IOR ranks) and OSTs, and dl (devices).
    Lctl(lctl::LctlArgs),
    /// Watch a running cluster, as LMT's ltop: per OST bandwidth, IOPS,
    /// locks, RPCs in flight, space and exports, and this host's clients,
    /// every interval (a full screen, or plain text in a pipe).
    Top(top::TopArgs),
    /// Print the completion script for SHELL (`make install` installs bash's, zsh's and fish's).
    ///
    /// For example: `lanefs completions bash >
    /// ~/.local/share/bash-completion/completions/lanefs`, or `source <(lanefs
    /// completions zsh)`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages, lanefs.1 and a lanefs-COMMAND.1 per command, into DIR (or print lanefs.1 with `-`).
    ///
    /// `make install` installs them. `lanefs man - | man -l -` reads the
    /// first page without installing anything.
    Man {
        /// Where to write the pages (made if missing), or `-` for lanefs.1 on stdout.
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// A new cluster's keys in DIR (a new directory): ca.pem (the cluster's
    /// CA, to sign more keys), server.pem (MDS and OSS), client.pem (users;
    /// root squashed), admin.pem (administrators; root stays root).
    New { dir: PathBuf },
    /// Sign one more key with the cluster's CA and write it to OUT (a new
    /// file): a client key, with --admin an admin key, or with --server a
    /// server key.
    Issue {
        /// The cluster's CA file (ca.pem).
        #[arg(long)]
        ca: PathBuf,
        /// A server key (for MDS and OSS hosts) instead of a client key.
        #[arg(long, conflicts_with = "admin")]
        server: bool,
        /// An admin key: a client key whose requests as root are served as
        /// root (a client key's are squashed).
        #[arg(long)]
        admin: bool,
        /// Who holds it (written in its certificate).
        #[arg(long)]
        name: Option<String>,
        out: PathBuf,
    },
}

/// glibc serves allocations above its mmap threshold (128 KiB at first) with
/// fresh mappings, so every 1 MiB buffer of the data path would be zeroed
/// and faulted in by the kernel again. Keep them in the heap instead.
fn tune_allocator() {
    // SAFETY: mallopt only changes glibc allocator parameters; called once,
    // before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

fn main() -> std::process::ExitCode {
    tune_allocator();
    // SIGPIPE stays ignored, as Rust leaves it: a write to a closed stdout
    // fails with EPIPE, and `finish` ends the command quietly with status 0,
    // as Unix tools end in `lanefs ls | head -1` (out.rs says why SIGPIPE's
    // default disposition is not restored instead).
    let cli = Cli::parse();
    // Diagnostics go to stderr (a background mount's stderr is its log),
    // warnings and errors by default: a refused peer, a lost lock or a
    // back-off is said without asking. RUST_LOG chooses otherwise (e.g.
    // RUST_LOG=lanefs_core=debug, or RUST_LOG=error for quiet).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Command::Swarm(args) = cli.command {
        // The swarm's exit code says what broke (127, 128, 129).
        return finish(swarm::main(args));
    }
    finish(run(cli).map(|()| std::process::ExitCode::SUCCESS))
}

/// How every command ends: its exit code, or its error on stderr and a
/// failure; quietly and successfully when its reader has closed stdout.
fn finish(result: Result<std::process::ExitCode>) -> std::process::ExitCode {
    match result {
        Ok(code) => code,
        Err(e) if out::reader_gone(&e) => std::process::ExitCode::SUCCESS,
        // lctl has said what failed, in lctl's words.
        Err(e) if e.is::<lctl::Reported>() => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("lanefs: error: {}", describe(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The error and its causes, leaving out causes whose text the message
/// before them already includes.
fn describe(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text = format!("{text}: {c}");
        }
    }
    text
}

/// The role `lanefs key issue --server` or `--admin` asks for (a client's
/// without either).
fn key_role(server: bool, admin: bool) -> lanefs_net::keys::KeyRole {
    match (server, admin) {
        (true, _) => lanefs_net::keys::KeyRole::Server,
        (false, true) => lanefs_net::keys::KeyRole::Admin,
        (false, false) => lanefs_net::keys::KeyRole::Client,
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo { json, seed, harness } => demo::run(json, seed, harness),
        Command::LockScript { file } => lockscript::run_path(&file),
        Command::Up { osts, data, tcp, ost_options, root_squash, key_root_squash, limits } => {
            let squash = daemons::Squash { root: root_squash.as_deref(), key_root: key_root_squash.as_deref() };
            daemons::up(osts, data, tcp, &ost_options, squash, &limits)
        }
        Command::Mds { data, osts, listen, root_squash, key_root_squash, limits, metrics } => {
            let squash = daemons::Squash { root: root_squash.as_deref(), key_root: key_root_squash.as_deref() };
            daemons::mds(data, osts, &listen, cli.target.key.as_deref(), squash, &limits, metrics.as_deref())
        }
        Command::Oss { mds, data, ost, listen, ost_options: options, limits } => {
            // As long as a client waits for its MDS (--timeout, Lustre's obd_timeout).
            let mds_timeout =
                cli.target.timeout.map_or(lanefs_client::RECONNECT_TIMEOUT_DEFAULT, std::time::Duration::from_secs);
            daemons::oss(&mds, data, ost, &listen, cli.target.key.as_deref(), mds_timeout, &options, &limits)
        }
        Command::Key(KeyCommand::New { dir }) => daemons::key_new(&dir),
        Command::Key(KeyCommand::Issue { ca, server, admin, name, out }) => {
            daemons::key_issue(&ca, key_role(server, admin), name.as_deref(), &out)
        }
        Command::Ior { args } => ior::main(args, cli.target.mds, cli.target.key),
        Command::IorRank { mds, rank, buffer, ior_args } => {
            lanefs_backends::ranks::serve_rank(&RankLaunch { mds, key: cli.target.key, rank, buffer, ior_args })
        }
        Command::Sim { args } => sim::main(args),
        Command::Plot { series, out, label, panels } => plot::main(&series, &out, &label, &panels),
        Command::Report { summary, timeseries, out } => plot::report(&summary, timeseries.as_deref(), &out),
        Command::Calibrate { data, out, quick, osts, ranks } => calibrate::main(data, out, quick, osts, ranks),
        Command::Mount(args) => mount::mount(args, &cli.target),
        Command::Umount(args) => mount::umount(args),
        Command::Fs(command) => fs::run(*command, &cli.target),
        Command::Lctl(args) => lctl::run(args, &cli.target),
        Command::Top(args) => top::run(args, &cli.target),
        Command::Completions { shell } => shell::completions(Cli::command(), shell),
        Command::Man { dir } => shell::man(Cli::command(), &dir),
        Command::Swarm(_) => unreachable!("the swarm runs from main, for its exit code"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the launcher writes is what the rank process reads back.
    #[test]
    fn a_rank_launch_parses_back_into_itself() {
        for key in [None, Some(PathBuf::from("/keys/client.pem"))] {
            let launch = RankLaunch {
                mds: "unix:/tmp/x/mds.sock".into(),
                key,
                rank: 7,
                buffer: PathBuf::from("/dev/shm/lanefs-rank-abc"),
                ior_args: ["-a", "LANEFS", "-w", "--lanefs.ranks=processes", "--", "-x"].map(String::from).to_vec(),
            };
            let cli = Cli::try_parse_from(std::iter::once("lanefs".into()).chain(launch.args())).unwrap();
            let Command::IorRank { mds, rank, buffer, ior_args } = cli.command else { panic!("not ior-rank") };
            assert_eq!(RankLaunch { mds, key: cli.target.key, rank, buffer, ior_args }, launch);
        }
    }
}
