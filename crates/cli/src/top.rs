//! `lanefs top`: a running cluster's OSTs and this host's clients, live,
//! as LMT's ltop shows Lustre's. This file parses the options and picks
//! the view; sampling, rates, recordings and drawing are lanefs-top's.

use crate::fs::Target;
use anyhow::{bail, Result};
use clap::Args;
use lanefs_top::{Recorder, Sampler, Settings, Source};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

const AFTER_HELP: &str = "\
Columns, one row per OST of the file system:
  OST       lanefs-OSTNNNN (N: the index in hex)
  WR-MiB/s  bytes written per second       RD-MiB/s  bytes read per second
  IOPS      read and write RPCs per second
  LOCKS     locks granted now              LGR/s, LCR/s  lock grants, cancels per second
  RIF       RPCs received and not yet handled, now
  %SPC      space used on the OST's file system
  EXP       clients connected to the OST's server now (exports)
  FLAG      SLOW (see below), or DOWN: the OST did not answer this sample
and one row per client of this host (summed over its OSCs):
  CLIENT    its instance, as in its device names (lctl dl)
  WR-MiB/s, RD-MiB/s  bytes its OSCs wrote and read per second
  LOCKS     locks in its cache now         ENQ/s, BLCB/s  lock enqueues, blocking callbacks per second
A rate is the difference of two samples' counters over the time between them:
the first sample has none (`-`), nor has a counter that went down (a restart,
statistics cleared).

SLOW: in an interval, an OST is busy when it moved data or has RPCs in flight.
With at least 2 busy OSTs, a busy OST whose bandwidth (written + read) is below
half the median of the busy OSTs' is flagged SLOW. Idle OSTs are never flagged
nor counted; with 2 busy OSTs, the slow one moved under a third of the other's.

In a terminal: a full-screen table, redrawn every interval; q, Esc or Ctrl-C
quits. Otherwise (a pipe, a file): each sample as plain text, a line with its
time (UTC) and interval, then the rows in fixed-width columns, flushed every
interval; notes (an OSS out of reach, a client that fails) go to stderr.

--record FILE appends every sample (counters, not rates, with its time) to FILE
as JSON Lines, after a header line; FILE must not exist (it is made 0600, and
no link at its name is followed). --replay FILE shows such a recording with the
rates computed again, no cluster needed: as text, every sample at once; in a
terminal, at the recorded pace, where space pauses and the arrow keys (or p/n)
step one sample back or on. -n N shows the first N samples of a recording.

Where lanefs departs from ltop: ltop reads what LMT's cerebro daemons gather
on every server and client of a site; lanefs top asks the MDS for the OSTs
(every OSS, as lanefs df does) and this host's control sockets for its clients
($LANEFS_RUN_DIR, as lctl finds them), so clients of other hosts are not shown.
There is no OSS grouping, no %cpu or %mem column (lanefs's servers do not
report them), no MDT row, no sorting or per-OST detail keys, and recordings are
lanefs's own JSON Lines, not LMT's MySQL database.";

/// Watch a running cluster: OSTs and this host's clients, every interval (LMT's ltop).
#[derive(Args, Debug)]
#[command(after_long_help = AFTER_HELP)]
pub struct TopArgs {
    /// Seconds between samples, from 0.1 to 3600.
    #[arg(short = 'd', long = "interval", value_name = "SECONDS", default_value = "2", value_parser = parse_interval)]
    interval: Duration,
    /// Stop after N samples (as top -n).
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    iterations: Option<u64>,
    /// Also append every sample's counters to FILE (a new file), as JSON Lines.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    record: Option<PathBuf>,
    /// Show a recording made with --record instead of a live cluster.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.trim().parse().map_err(|_| format!("{text:?} is not a number of seconds (e.g. -d 2)"))?;
    lanefs_top::interval(seconds)
}

pub fn run(args: TopArgs, target: &Target) -> Result<()> {
    let (source, source_name) = match &args.replay {
        Some(path) => (Source::Replay(lanefs_top::record::read(path)?), format!("replay of {}", path.display())),
        None => {
            let Some(mds) = &target.mds else {
                bail!(
                    "no cluster to watch: pass --mds ADDR or set LANEFS_MDS (lanefs up prints it), \
                     or show a recording with --replay FILE"
                );
            };
            let sampler = Sampler::new(target.connect_once(mds)?, lanefs_client::control::run_dir());
            (Source::Live(sampler), format!("MDS {mds}"))
        }
    };
    let recorder = args.record.as_deref().map(Recorder::create).transpose()?;
    let settings = Settings { interval: args.interval, iterations: args.iterations, recorder, source_name };
    if std::io::stdout().is_terminal() {
        lanefs_top::run_terminal(source, settings)?;
    } else {
        lanefs_top::run_plain(source, settings, &mut std::io::stdout().lock(), &mut std::io::stderr())?;
    }
    Ok(())
}
