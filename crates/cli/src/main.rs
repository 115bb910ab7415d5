//! The `lanefs` command: argument parsing and glue only. Every behaviour it
//! shows lives in the library crates; this file turns options into calls and
//! results into text or JSON.

mod demo;
mod lockscript;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "lanefs", version, about = "A parallel file system built around one shared file, and its tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write one shared file from 4 clients three ways (default locking,
    /// lockahead, file per process) on the deterministic harness, verify
    /// every byte, and compare lock traffic.
    Demo {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Seed of the harness's latencies.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Drive one OST's lock server with lock requests, one JSON object per
    /// line, and print each of its decisions as one JSON line.
    LockScript {
        /// Script file, or `-` for standard input.
        file: PathBuf,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // Diagnostics go to stderr, filtered by RUST_LOG (e.g. RUST_LOG=lanefs_core=debug).
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lanefs: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Demo { json, seed } => demo::run(json, seed),
        Command::LockScript { file } => lockscript::run_path(&file),
    }
}
