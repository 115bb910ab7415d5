//! `lanefs calibrate`: runs lanefs-calibrate's measurements with a progress
//! line per step, prints the summary table on standard error, and writes
//! the preset.

use anyhow::{anyhow, Context, Result};
use lanefs_calibrate::{measure, preset, summary, Options, STEPS};
use std::io::Write;
use std::path::PathBuf;

pub fn main(data: Option<PathBuf>, out: Option<PathBuf>, quick: bool, osts: u32, ranks: u32) -> Result<()> {
    let scratch;
    let data_dir = match data {
        Some(dir) => dir,
        None => {
            scratch = tempfile::Builder::new().prefix("lanefs-calibrate-").tempdir()?;
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
