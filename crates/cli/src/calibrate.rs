//! `lanefs calibrate`: runs lanefs-calibrate's measurements with a progress
//! line per step, prints the summary table on standard error, and writes
//! the preset. Interrupted (^C, SIGTERM), it stops the servers and the
//! mount it started and removes their files before it exits.

use anyhow::{anyhow, Context, Result};
use lanefs_calibrate::{cleanup, measure, preset, summary, Options, STEPS};
use std::io::Write;
use std::path::PathBuf;

pub fn main(data: Option<PathBuf>, out: Option<PathBuf>, quick: bool, osts: u32, ranks: u32) -> Result<()> {
    undo_on_interrupt()?;
    let (scratch, _listed);
    let data_dir = match data {
        Some(dir) => dir,
        None => {
            scratch = tempfile::Builder::new().prefix("lanefs-calibrate-").tempdir()?;
            _listed = cleanup::list(cleanup::Undo::Remove(scratch.path().to_path_buf()));
            scratch.path().to_path_buf()
        }
    };
    // The servers and the mount measured are this binary's.
    let lanefs_exe = std::env::current_exe().context("finding the lanefs binary, which runs the servers measured")?;
    let options = Options { data_dir, quick, osts, ranks, lanefs_exe };
    let mut step = 0;
    let measured = measure(&options, &mut |line| {
        step += 1;
        eprintln!("[{step}/{STEPS}] {line}");
    })
    .map_err(|e| anyhow!(e))?;
    let rows = summary::rows(&measured, &options);
    let width = rows.iter().map(|r| r[0].len()).max().unwrap_or(0);
    let value_width = rows.iter().map(|r| r[1].len()).max().unwrap_or(0);
    eprintln!("measured in {:.1} s:", measured.elapsed.as_secs_f64());
    for [what, value, key] in &rows {
        eprintln!("  {what:<width$}  {value:>value_width$}  -> {key}");
    }
    let text = preset::render(&measured, &options);
    match out {
        Some(path) => {
            std::fs::write(&path, &text).with_context(|| format!("writing the preset to {}", path.display()))?;
            eprintln!("preset written to {}: lanefs sim ior --cluster {} ...", path.display(), path.display());
        }
        None => std::io::stdout().write_all(text.as_bytes())?,
    }
    Ok(())
}

/// On ^C or SIGTERM: what calibration started is undone, and the process
/// exits as one killed by SIGINT would (130).
fn undo_on_interrupt() -> Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    // Made here, so that the signals are caught from now on.
    let (interrupt, terminate) = runtime.block_on(async {
        Ok::<_, std::io::Error>((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?))
    })?;
    std::thread::Builder::new().name("calibrate-signals".into()).spawn(move || {
        let (mut interrupt, mut terminate) = (interrupt, terminate);
        runtime.block_on(async {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        });
        eprintln!("lanefs calibrate: interrupted; stopping the servers and the mount it started");
        cleanup::interrupted(130);
    })?;
    Ok(())
}
