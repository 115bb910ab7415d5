//! A run's time series over time, as a column of panels, each over the
//! run's time in seconds:
//!
//! - [`Panel::Bandwidth`]: the bandwidth the OSTs took (writes) and gave
//!   (reads), all OSTs together, in MiB/s;
//! - [`Panel::Osts`]: the same per OST, a line each (an OST slower than
//!   its peers stands out);
//! - [`Panel::Ranks`]: each rank's bandwidth as its calls returned, a line
//!   each up to [`RANK_LINES_MAX`] ranks, else the slowest, median and
//!   fastest rank of each bin (stragglers stand out);
//! - [`Panel::Locks`]: lock traffic, all clients together, per second:
//!   enqueues, grants, blocking callbacks, cancels and lockahead requests
//!   (default locking's ping-pong against lockahead's flat line);
//! - [`Panel::Clients`]: each client's enqueues and blocking callbacks per
//!   second (the clients that ping-pong a lock stand out).
//!
//! Data are drawn as steps, one per bin.

use crate::{Colors, Figure, MIB, WIDTH};
use lanefs_ior::timeseries::TimeSeries;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Ranks (and clients) drawn a line each; more are drawn as their
/// slowest, median and fastest.
pub const RANK_LINES_MAX: u32 = 32;
/// Height of each panel, in pixels.
const PANEL_HEIGHT: u32 = 360;
/// The share of a panel's width its legend takes, right of the data.
const LEGEND_SHARE: f64 = 0.3;

/// One run to draw, and its name in the legends.
pub struct Run {
    pub label: String,
    pub series: TimeSeries,
}

/// A panel of the picture (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Panel {
    Bandwidth,
    Osts,
    Ranks,
    Locks,
    Clients,
}

impl Panel {
    pub const ALL: [Panel; 5] = [Panel::Bandwidth, Panel::Osts, Panel::Ranks, Panel::Locks, Panel::Clients];

    /// The panel `name` names (`bandwidth`, `osts`, `ranks`, `locks`,
    /// `clients`).
    pub fn parse(name: &str) -> Result<Panel, String> {
        match name {
            "bandwidth" => Ok(Panel::Bandwidth),
            "osts" => Ok(Panel::Osts),
            "ranks" => Ok(Panel::Ranks),
            "locks" => Ok(Panel::Locks),
            "clients" => Ok(Panel::Clients),
            other => Err(format!("{other:?} is not a panel: give bandwidth, osts, ranks, locks or clients")),
        }
    }
}

/// Panels of runs' time series, one above the other.
pub struct SeriesFigure<'a> {
    pub runs: &'a [Run],
    pub panels: &'a [Panel],
}

impl SeriesFigure<'_> {
    /// The figure, or why there is nothing to draw.
    pub fn new<'a>(runs: &'a [Run], panels: &'a [Panel]) -> Result<SeriesFigure<'a>, String> {
        if runs.is_empty() || panels.is_empty() {
            return Err("nothing to draw: give a time series and at least one panel".into());
        }
        Ok(SeriesFigure { runs, panels })
    }
}

impl Figure for SeriesFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (WIDTH, PANEL_HEIGHT * self.panels.len() as u32)
    }

    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        let runs = self.runs;
        let end_s = runs.iter().map(|r| r.series.bins() as f64 * r.series.interval_s).fold(0.0, f64::max);
        let end_s = if end_s > 0.0 { end_s } else { 1.0 };
        for (area, panel) in root.split_evenly((self.panels.len(), 1)).iter().zip(self.panels) {
            let (title, unit, lines) = lines(*panel, runs);
            draw_panel(area, title, unit, end_s, &lines)?;
        }
        Ok(())
    }
}

/// One line of a panel: its legend and its points.
struct Line {
    label: Option<String>,
    color: RGBColor,
    points: Vec<(f64, f64)>,
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    end_s: f64,
    lines: &[Line],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let top = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.08 } else { 1.0 };
    // The legend sits to the right of the data, in room of its own.
    let labelled = lines.iter().any(|l| l.label.is_some());
    let end_s = if labelled { end_s / (1.0 - LEGEND_SHARE) } else { end_s };
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..end_s, 0f64..top)
        .map_err(e)?;
    let whole = top >= 20.0;
    chart
        .configure_mesh()
        .x_desc("time since the run's start (s)")
        .y_desc(unit)
        .y_label_formatter(&|v| if whole { format!("{v:.0}") } else { format!("{v:.2}") })
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(e)?;
    for line in lines {
        let style = line.color.stroke_width(2);
        let drawn = chart.draw_series(LineSeries::new(line.points.iter().copied(), style)).map_err(e)?;
        if let Some(label) = &line.label {
            let color = line.color;
            drawn.label(label).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3)));
        }
    }
    if labelled {
        crate::draw_legend(&mut chart)?;
    }
    Ok(())
}

/// A panel's title, its unit and its lines.
fn lines(panel: Panel, runs: &[Run]) -> (&'static str, &'static str, Vec<Line>) {
    let mut lines = Vec::new();
    let mut colors = Colors::default();
    let several = runs.len() > 1;
    let name = |run: &Run, what: &str| name(several, run, what);
    match panel {
        Panel::Bandwidth => {
            for run in runs {
                for (group, what) in [("ost_write_bytes", "write"), ("ost_read_bytes", "read")] {
                    let Some(g) = run.series.get(group) else { continue };
                    let per_bin = g.per_bin(run.series.bins());
                    if per_bin.iter().any(|&b| b > 0) {
                        lines.push(steps(&run.series, &per_bin, 1.0 / MIB, Some(name(run, what)), colors.next()));
                    }
                }
            }
            ("Bandwidth, all OSTs", "MiB/s", lines)
        }
        Panel::Osts => {
            let groups = [("ost_write_bytes", "write"), ("ost_read_bytes", "read")];
            for run in runs {
                per_member(&mut lines, &mut colors, run, &groups, Members { name: "OST", scale: 1.0 / MIB, several });
            }
            ("Bandwidth per OST", "MiB/s", lines)
        }
        Panel::Ranks => {
            let groups = [("rank_write_bytes", "write"), ("rank_read_bytes", "read")];
            for run in runs {
                per_member(&mut lines, &mut colors, run, &groups, Members { name: "rank", scale: 1.0 / MIB, several });
            }
            ("Bandwidth per rank, as its calls returned", "MiB/s", lines)
        }
        Panel::Clients => {
            let groups = [("client_enqueues", "enqueues"), ("client_blocking_callbacks", "blocking callbacks")];
            for run in runs {
                per_member(&mut lines, &mut colors, run, &groups, Members { name: "client", scale: 1.0, several });
            }
            ("Lock traffic per client", "per second", lines)
        }
        Panel::Locks => {
            for run in runs {
                let bins = run.series.bins();
                for (group, what) in [
                    ("client_enqueues", "enqueues"),
                    ("client_grants", "grants"),
                    ("client_blocking_callbacks", "blocking callbacks"),
                    ("client_cancels", "cancels"),
                    ("client_lockahead_requests", "lockahead requests"),
                ] {
                    let Some(g) = run.series.get(group) else { continue };
                    let per_bin = g.per_bin(bins);
                    if per_bin.iter().any(|&c| c > 0) {
                        lines.push(steps(&run.series, &per_bin, 1.0, Some(name(run, what)), colors.next()));
                    }
                }
            }
            ("Lock traffic, all clients", "per second", lines)
        }
    }
}

/// How the members of a group are drawn: their name (`rank`), the scale
/// of their counts (bytes to MiB), and whether several runs share the
/// picture.
#[derive(Clone, Copy)]
struct Members {
    name: &'static str,
    scale: f64,
    several: bool,
}

impl Members {
    /// The lowest, middle and highest member of a bin, in words.
    fn extremes(&self) -> [&'static str; 3] {
        if self.name == "client" {
            ["quietest", "median", "busiest"]
        } else {
            ["slowest", "median", "fastest"]
        }
    }
}

/// A line per member of each of `groups` (`(group, what it counts)`) that
/// counted anything, or, past [`RANK_LINES_MAX`] members, the slowest,
/// median and fastest member of each bin.
fn per_member(lines: &mut Vec<Line>, colors: &mut Colors, run: &Run, groups: &[(&str, &str)], how: Members) {
    let bins = run.series.bins();
    let Members { name: member, scale, several } = how;
    let [low, middle, high] = how.extremes();
    let drawn = groups.iter().filter(|(g, _)| run.series.get(g).is_some_and(|g| g.total() > 0)).count() as u32;
    for &(group, what) in groups {
        let Some(g) = run.series.get(group) else { continue };
        if g.total() == 0 {
            continue;
        }
        let members = g.head.members;
        if members > RANK_LINES_MAX {
            let all: Vec<Vec<u64>> = (0..members).map(|m| g.member(m, bins)).collect();
            for (pick, which) in [(Pick::Min, low), (Pick::Median, middle), (Pick::Max, high)] {
                let per_bin: Vec<u64> = (0..bins as usize).map(|b| pick.of(all.iter().map(|m| m[b]))).collect();
                let label = name(several, run, &format!("{what}, {which} {member}"));
                lines.push(steps(&run.series, &per_bin, scale, Some(label), colors.next()));
            }
            continue;
        }
        // A legend entry and a colour per member while they fit (one run,
        // a few members), else one per run.
        let each = members * drawn <= 8 && !several;
        for m in 0..members {
            let per_bin = g.member(m, bins);
            let label = (each || m == 0).then(|| {
                let which = if each { format!("{member} {m}") } else { format!("{member}s 0-{}", members - 1) };
                name(several, run, &format!("{what}, {which}"))
            });
            let color = if each || m == 0 { colors.next() } else { colors.again() };
            lines.push(steps(&run.series, &per_bin, scale, label, color));
        }
    }
}

/// A line's name: what it shows, after its run's label when there are
/// several runs.
fn name(several: bool, run: &Run, what: &str) -> String {
    if several {
        format!("{}: {what}", run.label)
    } else {
        what.to_string()
    }
}

#[derive(Clone, Copy)]
enum Pick {
    Min,
    Median,
    Max,
}

impl Pick {
    fn of(self, values: impl Iterator<Item = u64>) -> u64 {
        let mut v: Vec<u64> = values.collect();
        v.sort_unstable();
        match self {
            Pick::Min => v.first().copied().unwrap_or(0),
            Pick::Median => v.get(v.len() / 2).copied().unwrap_or(0),
            Pick::Max => v.last().copied().unwrap_or(0),
        }
    }
}

/// The counts of each bin over its length, times `scale`, as steps.
fn steps(series: &TimeSeries, per_bin: &[u64], scale: f64, label: Option<String>, color: RGBColor) -> Line {
    let dt = series.interval_s;
    let mut points = Vec::with_capacity(per_bin.len() * 2);
    for (i, &c) in per_bin.iter().enumerate() {
        let rate = c as f64 / dt * scale;
        points.push((i as f64 * dt, rate));
        points.push(((i + 1) as f64 * dt, rate));
    }
    Line { label, color, points }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(ranks: u32) -> TimeSeries {
        let mut s = TimeSeries::new("simulated", 0.5);
        for bin in 0..4 {
            for rank in 0..ranks {
                s.group("rank_write_bytes", "bytes", "rank").add(rank, bin, (1 + u64::from(rank)) << 20);
            }
            s.group("ost_write_bytes", "bytes", "ost").add(bin as u32 % 2, bin, 8 << 20);
            s.group("client_enqueues", "events", "client").add(0, bin, 3);
            s.group("client_enqueues", "events", "client").add(1, bin, 1);
        }
        s
    }

    #[test]
    fn a_png_and_an_svg_are_drawn() {
        let dir = tempfile::tempdir().unwrap();
        let runs =
            [Run { label: "default".into(), series: series(4) }, Run { label: "lockahead".into(), series: series(40) }];
        for name in ["t.png", "t.svg"] {
            let path = dir.path().join(name);
            crate::save(&SeriesFigure::new(&runs, &Panel::ALL).unwrap(), &path).unwrap();
            let bytes = std::fs::read(&path).unwrap();
            assert!(bytes.len() > 1000, "{name} has a picture in it");
            if name.ends_with("png") {
                assert_eq!(&bytes[1..4], b"PNG");
            } else {
                let text = String::from_utf8(bytes).unwrap();
                assert!(text.contains("<svg") && text.contains("Bandwidth per OST"), "titles in the SVG");
                assert!(text.contains("lockahead: write, median rank"), "40 ranks drawn as min, median and max");
                assert!(text.contains("Lock traffic per client") && text.contains("default: enqueues, clients 0-1"));
            }
        }
    }

    #[test]
    fn steps_are_rates_over_each_bin() {
        let s = series(1);
        let line = steps(&s, &[1 << 20, 0], 1.0 / MIB, None, BLACK);
        assert_eq!(line.points, vec![(0.0, 2.0), (0.5, 2.0), (0.5, 0.0), (1.0, 0.0)]);
    }

    #[test]
    fn a_picture_of_another_kind_is_refused_by_name() {
        let runs = [Run { label: "x".into(), series: series(1) }];
        let figure = SeriesFigure::new(&runs, &Panel::ALL).unwrap();
        let e = crate::save(&figure, std::path::Path::new("x.jpg")).unwrap_err();
        assert!(e.contains("x.jpg") && e.contains(".png or .svg"), "{e}");
        assert!(Panel::parse("lock").unwrap_err().contains("locks"));
        assert!(SeriesFigure::new(&[], &Panel::ALL).is_err());
    }
}
