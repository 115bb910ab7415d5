//! `lanefs plot FILE... -o OUT.png|OUT.svg`: reads time series or IOR
//! JSON summaries and hands them to lanefs-plot, which draws;
//! `lanefs report IOR.json [--timeseries FILE] -o OUT.html`: the same
//! library's page of a run.

use anyhow::{bail, Context, Result};
use lanefs_ior::timeseries::TimeSeries;
use lanefs_plot::{Panel, Run, SeriesFigure, Summary, SummaryPanels};
use std::path::{Path, PathBuf};

/// What `lanefs plot` was given: time series, or IOR JSON summaries.
enum Inputs {
    Series(Vec<Run>),
    Summaries(Vec<Summary>),
}

pub fn main(files: &[PathBuf], out: &Path, labels: &[String], panels: &[String]) -> Result<()> {
    if labels.len() > files.len() {
        bail!("{} --label for {} files: give one per file, in order", labels.len(), files.len());
    }
    let mut inputs: Option<Inputs> = None;
    for (i, file) in files.iter().enumerate() {
        let label = match labels.get(i) {
            Some(label) => label.clone(),
            None => file.file_stem().map_or_else(|| format!("run {i}"), |s| s.to_string_lossy().into_owned()),
        };
        match (read(file, &label)?, &mut inputs) {
            (Inputs::Series(mut run), Some(Inputs::Series(runs))) => runs.append(&mut run),
            (Inputs::Summaries(mut s), Some(Inputs::Summaries(all))) => all.append(&mut s),
            (new, None) => inputs = Some(new),
            _ => bail!(
                "{}: time series and IOR summaries cannot share a picture: draw each kind on its own",
                file.display()
            ),
        }
    }
    match inputs.expect("clap requires a file") {
        Inputs::Series(runs) => {
            let names = if panels.is_empty() { SERIES_PANELS.map(String::from).to_vec() } else { panels.to_vec() };
            let panels = names
                .iter()
                .map(|p| Panel::parse(p.trim()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::anyhow!("--panels: {e} (for a time series)"))?;
            let figure = SeriesFigure::new(&runs, &panels).map_err(anyhow::Error::msg)?;
            lanefs_plot::save(&figure, out).map_err(anyhow::Error::msg)?;
        }
        Inputs::Summaries(runs) => {
            let (mut bandwidth, mut timers) =
                (panels.is_empty(), panels.is_empty() && lanefs_plot::TimersFigure::has_timers(&runs));
            for p in panels {
                match p.trim() {
                    "summary" => bandwidth = true,
                    "timers" => timers = true,
                    other => bail!("--panels: {other:?} is not a panel of an IOR summary: give summary or timers"),
                }
            }
            lanefs_plot::save(&SummaryPanels { runs: &runs, bandwidth, timers }, out).map_err(anyhow::Error::msg)?;
        }
    }
    println!("{}", out.display());
    Ok(())
}

/// A time series' panels, drawn when none are named.
const SERIES_PANELS: [&str; 5] = ["bandwidth", "osts", "ranks", "locks", "clients"];

/// `file` as a time series or an IOR JSON summary, by its content.
fn read(file: &Path, label: &str) -> Result<Inputs> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    // A summary is one JSON document with IOR's keys; a time series is
    // JSON Lines, which no single document parses.
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
        if json.get("summary").is_some() || json.get("tests").is_some() {
            let summary = Summary::parse(label, &text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            return Ok(Inputs::Summaries(vec![summary]));
        }
    }
    let series =
        TimeSeries::read_jsonl(&mut text.as_bytes()).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    Ok(Inputs::Series(vec![Run { label: label.to_string(), series }]))
}

/// `lanefs report`: the page of the run `summary` describes.
pub fn report(summary: &Path, series: Option<&Path>, out: &Path) -> Result<()> {
    if out.extension().and_then(|e| e.to_str()).is_none_or(|e| !e.eq_ignore_ascii_case("html")) {
        bail!("{}: name the report .html", out.display());
    }
    let label = summary.file_stem().map_or_else(|| "run".to_string(), |s| s.to_string_lossy().into_owned());
    let text = std::fs::read_to_string(summary).with_context(|| format!("reading {}", summary.display()))?;
    let parsed = Summary::parse(&label, &text).map_err(|e| anyhow::anyhow!("{}: {e}", summary.display()))?;
    let run = match series {
        Some(file) => {
            let label = file.file_stem().map_or_else(|| "series".to_string(), |s| s.to_string_lossy().into_owned());
            Some(Run { label, series: TimeSeries::read_file(file).map_err(anyhow::Error::msg)? })
        }
        None => None,
    };
    let page = lanefs_plot::report::html(&parsed, run.as_ref()).map_err(anyhow::Error::msg)?;
    std::fs::write(out, page).with_context(|| format!("writing {}", out.display()))?;
    println!("{}", out.display());
    Ok(())
}
