//! Pictures of IOR's JSON summaries (`-O summaryFormat=JSON`), a bar per
//! run and operation:
//!
//! - [`SummaryFigure`]: each operation's mean bandwidth over the
//!   repetitions, its range from the slowest to the fastest repetition
//!   drawn over the bar;
//! - [`TimersFigure`]: Cray MPI-IO's write phases (`MPICH_MPIIO_TIMERS=1`,
//!   kept in the summary under `mpiio_timers`) as stacked bars, a bar per
//!   collective write: each phase's average over the aggregators, in
//!   seconds, so that the bar's height is the aggregators' average time
//!   and its segments where it went.

use crate::{Colors, Figure, WIDTH};
use lanefs_mpiio::report::{timers_from_json, WriteTimers};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::Value;

const HEIGHT: u32 = 480;
/// Room above the tallest bar for the legend, as a share of its height.
const HEADROOM: f64 = 0.45;

/// One operation's bandwidth over a test's repetitions, in MiB/s
/// (IOR's `summary` entries).
#[derive(Clone, Debug, PartialEq)]
pub struct OperationBandwidth {
    pub operation: String,
    pub api: String,
    pub max_mib: f64,
    pub min_mib: f64,
    pub mean_mib: f64,
    pub sd_mib: f64,
}

/// An IOR JSON summary, read for its pictures and its report.
#[derive(Clone, Debug)]
pub struct Summary {
    /// The run's name in the legends.
    pub label: String,
    /// The whole summary, as IOR printed it.
    pub json: Value,
    pub operations: Vec<OperationBandwidth>,
    /// The collective writes' phase timers, in order (none without
    /// `MPICH_MPIIO_TIMERS=1`).
    pub timers: Vec<WriteTimers>,
}

impl Summary {
    /// The summary in `text`, IOR's JSON; an error names what is missing.
    pub fn parse(label: &str, text: &str) -> Result<Summary, String> {
        let json: Value = serde_json::from_str(text).map_err(|e| format!("not an IOR JSON summary: {e}"))?;
        let entries = json
            .get("summary")
            .and_then(Value::as_array)
            .ok_or("no \"summary\" array: is this IOR's output with -O summaryFormat=JSON?")?;
        let mut operations = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
            let number = |key: &str| {
                entry.get(key).and_then(Value::as_f64).ok_or_else(|| format!("summary entry {i} has no number {key:?}"))
            };
            operations.push(OperationBandwidth {
                operation: text("operation"),
                api: text("API"),
                max_mib: number("bwMaxMIB")?,
                min_mib: number("bwMinMIB")?,
                mean_mib: number("bwMeanMIB")?,
                sd_mib: number("bwStdMIB")?,
            });
        }
        let timers = timers_from_json(&json)?;
        Ok(Summary { label: label.to_string(), json, operations, timers })
    }
}

/// One bar: its label under the axis and its segments, bottom up, each
/// with its legend and colour.
struct Bar {
    label: String,
    segments: Vec<(String, RGBColor, f64)>,
    /// The range drawn over the bar, if any.
    range: Option<(f64, f64)>,
}

/// Each run's operations' mean bandwidth, with the range of repetitions.
pub struct SummaryFigure<'a> {
    pub runs: &'a [Summary],
}

impl Figure for SummaryFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT)
    }

    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let mut colors = Colors::default();
        let mut bars = Vec::new();
        for run in self.runs {
            let color = colors.next();
            for op in &run.operations {
                bars.push(Bar {
                    label: bar_label(self.runs.len() > 1, &run.label, &op.operation),
                    segments: vec![(run.label.clone(), color, op.mean_mib)],
                    range: Some((op.min_mib, op.max_mib)),
                });
            }
        }
        draw_bars(root, "Bandwidth by operation (mean of repetitions, range min to max)", "MiB/s", &bars)
    }
}

/// Each run's collective writes, their phase timers stacked.
pub struct TimersFigure<'a> {
    pub runs: &'a [Summary],
}

impl TimersFigure<'_> {
    /// Whether any run has timers to draw.
    pub fn has_timers(runs: &[Summary]) -> bool {
        runs.iter().any(|r| !r.timers.is_empty())
    }
}

impl Figure for TimersFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT)
    }

    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        // A colour per phase, the same in every bar.
        let mut phases: Vec<(String, RGBColor)> = Vec::new();
        let mut colors = Colors::default();
        let mut bars = Vec::new();
        let several = self.runs.len() > 1;
        for run in self.runs {
            for (i, write) in run.timers.iter().enumerate() {
                let mut segments = Vec::new();
                for p in &write.phases {
                    let color = match phases.iter().find(|(name, _)| *name == p.phase) {
                        Some((_, c)) => *c,
                        None => {
                            let c = colors.next();
                            phases.push((p.phase.clone(), c));
                            c
                        }
                    };
                    segments.push((p.phase.clone(), color, p.ave_s));
                }
                let which = if run.timers.len() > 1 { format!("write {}", i + 1) } else { "write".to_string() };
                bars.push(Bar { label: bar_label(several, &run.label, &which), segments, range: None });
            }
        }
        if bars.is_empty() {
            return Err("no MPI-IO timers in the summary: run with MPICH_MPIIO_TIMERS=1 and -a MPIIO -c".into());
        }
        draw_bars(root, "MPI-IO write phases, average over the aggregators", "seconds", &bars)
    }
}

/// The bandwidth bars over the timers' stacked bars (when any run has
/// timers and `timers` is asked for).
pub struct SummaryPanels<'a> {
    pub runs: &'a [Summary],
    pub bandwidth: bool,
    pub timers: bool,
}

impl Figure for SummaryPanels<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, HEIGHT * (u32::from(self.bandwidth) + u32::from(self.timers)).max(1))
    }

    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let panels = u32::from(self.bandwidth) + u32::from(self.timers);
        if panels == 0 {
            return Err("nothing to draw: give the summary or timers panel".into());
        }
        let areas = root.split_evenly((panels as usize, 1));
        if self.bandwidth {
            SummaryFigure { runs: self.runs }.render(&areas[0])?;
        }
        if self.timers {
            TimersFigure { runs: self.runs }.render(areas.last().expect("a panel"))?;
        }
        Ok(())
    }
}

fn bar_label(several: bool, run: &str, what: &str) -> String {
    if several {
        format!("{run}: {what}")
    } else {
        what.to_string()
    }
}

/// The top of the value axis: the tallest bar (or range), and room for
/// the legend above it.
fn top_of(bars: &[Bar]) -> f64 {
    let tallest = bars
        .iter()
        .map(|b| b.segments.iter().map(|s| s.2).sum::<f64>().max(b.range.map_or(0.0, |r| r.1)))
        .fold(0.0, f64::max);
    if tallest > 0.0 {
        tallest * (1.0 + HEADROOM)
    } else {
        1.0
    }
}

/// Bar `i`'s segment from `bottom` up by `height`.
fn segment(i: u32, bottom: f64, height: f64, color: RGBColor) -> Rectangle<(SegmentValue<u32>, f64)> {
    let corners = [(SegmentValue::Exact(i), bottom), (SegmentValue::Exact(i + 1), bottom + height)];
    let mut rect = Rectangle::new(corners, color.filled());
    rect.set_margin(0, 0, 12, 12);
    rect
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    bars: &[Bar],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let top = top_of(bars);
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    // Integer ranges are inclusive: n - 1 gives n segments, a bar each
    // (and one bar a second segment, the legend's).
    let n = bars.len() as u32;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..n.max(2) - 1).into_segmented(), 0f64..top)
        .map_err(e)?;
    let labels: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
    let whole = top >= 20.0;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len())
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i as usize).map_or_else(String::new, |l| l.to_string()),
            _ => String::new(),
        })
        .y_desc(unit)
        .y_label_formatter(&|v| if whole { format!("{v:.0}") } else { format!("{v:.2}") })
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    let mut legend: Vec<String> = Vec::new();
    for (i, bar) in bars.iter().enumerate() {
        let i = i as u32;
        let mut bottom = 0.0;
        for (name, color, height) in &bar.segments {
            let drawn = chart.draw_series(std::iter::once(segment(i, bottom, *height, *color))).map_err(e)?;
            bottom += height;
            if !legend.contains(name) {
                legend.push(name.clone());
                let color = *color;
                drawn.label(name).legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], color.filled()));
            }
        }
        if let Some((low, high)) = bar.range {
            let at = SegmentValue::CenterOf(i);
            let whisker = PathElement::new(vec![(at.clone(), low), (at, high)], BLACK.stroke_width(2));
            chart.draw_series(std::iter::once(whisker)).map_err(e)?;
        }
    }
    crate::draw_legend(&mut chart)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary as IOR prints it, with the timers of two writes.
    fn summary(label: &str, with_timers: bool) -> Summary {
        let timers = if with_timers {
            r#", "mpiio_timers": {"time_scale": "seconds", "writes": [
              {"file": "f", "writers": 2, "bytes": 1048576, "elapsed_s": 1.0,
               "phases": [{"phase": "wait for coll", "min_s": 0.1, "max_s": 0.2, "ave_s": 0.15, "percent": 15},
                          {"phase": "file write", "min_s": 0.5, "max_s": 0.9, "ave_s": 0.85, "percent": 85}],
               "data_send_bw_mib": null, "raw_write_bw_mib": 1.2, "net_write_bw_mib": 1.0}]}"#
        } else {
            ""
        };
        let text = format!(
            r#"{{"Version": "4.1.0+lanefs", "summary": [
                {{"operation": "write", "API": "MPIIO", "bwMaxMIB": 120.0, "bwMinMIB": 80.0, "bwMeanMIB": 100.0, "bwStdMIB": 20.0}},
                {{"operation": "read", "API": "MPIIO", "bwMaxMIB": 300.0, "bwMinMIB": 280.0, "bwMeanMIB": 290.0, "bwStdMIB": 10.0}}
            ]{timers}}}"#
        );
        Summary::parse(label, &text).unwrap()
    }

    #[test]
    fn a_summary_is_read_with_its_timers() {
        let s = summary("lockahead", true);
        assert_eq!(s.operations.len(), 2);
        assert_eq!(s.operations[1].operation, "read");
        assert_eq!(s.operations[0].mean_mib, 100.0);
        assert_eq!(s.timers.len(), 1);
        assert_eq!(s.timers[0].phases[1].phase, "file write");
        assert!(summary("x", false).timers.is_empty());
    }

    #[test]
    fn what_is_not_a_summary_is_refused_with_the_reason() {
        let e = Summary::parse("x", "{\"tests\": []}").unwrap_err();
        assert!(e.contains("summaryFormat=JSON"), "{e}");
        let e = Summary::parse("x", "not json").unwrap_err();
        assert!(e.contains("not an IOR JSON summary"), "{e}");
        let e = Summary::parse("x", r#"{"summary": [{"operation": "write"}]}"#).unwrap_err();
        assert!(e.contains("bwMaxMIB"), "{e}");
    }

    #[test]
    fn bars_and_stacked_timers_are_drawn() {
        let runs = [summary("default", true), summary("lockahead", true)];
        let text = crate::svg(&SummaryFigure { runs: &runs }).unwrap();
        assert!(text.contains("lockahead: write") && text.contains("MiB/s"), "bars labelled by run and operation");
        let text = crate::svg(&TimersFigure { runs: &runs }).unwrap();
        assert!(text.contains("wait for coll") && text.contains("file write"), "a legend entry per phase");
        assert!(text.contains("default: write"));
        let none = [summary("x", false)];
        assert!(!TimersFigure::has_timers(&none));
        assert!(crate::svg(&TimersFigure { runs: &none }).unwrap_err().contains("MPICH_MPIIO_TIMERS=1"));
    }
}
