//! `lanefs plot SERIES.jsonl... -o OUT.png|OUT.svg`: reads the time series
//! and hands them to lanefs-plot, which draws.

use anyhow::{bail, Result};
use lanefs_ior::timeseries::TimeSeries;
use lanefs_plot::{Panel, Run};
use std::path::{Path, PathBuf};

pub fn main(files: &[PathBuf], out: &Path, labels: &[String], panels: &[String]) -> Result<()> {
    if labels.len() > files.len() {
        bail!("{} --label for {} time series: give one per file, in order", labels.len(), files.len());
    }
    let panels = panels
        .iter()
        .map(|p| Panel::parse(p.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("--panels: {e}"))?;
    let mut runs = Vec::with_capacity(files.len());
    for (i, file) in files.iter().enumerate() {
        let series = TimeSeries::read_file(file).map_err(anyhow::Error::msg)?;
        let label = match labels.get(i) {
            Some(label) => label.clone(),
            None => file.file_stem().map_or_else(|| format!("run {i}"), |s| s.to_string_lossy().into_owned()),
        };
        runs.push(Run { label, series });
    }
    lanefs_plot::draw(&runs, &panels, out).map_err(anyhow::Error::msg)?;
    println!("{}", out.display());
    Ok(())
}
