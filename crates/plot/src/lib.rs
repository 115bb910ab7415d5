//! lanefs-plot: pictures of a run, as PNG or SVG, drawn with `plotters`
//! in a font bundled with lanefs (DejaVu Sans, so that a picture is the
//! same on every machine), and a run's report as one HTML page.
//!
//! - [`series`]: a run's time series (`--timeseries`, real or simulated;
//!   see `lanefs_ior::timeseries`) over time: bandwidth of all OSTs, per
//!   OST and per rank, lock traffic of all clients and per client;
//! - [`bars`]: from IOR's JSON summaries: the bandwidth of each run's
//!   operations, and Cray MPI-IO's write phase timers as stacked bars;
//! - [`report`]: a run's IOR JSON summary (and its time series) as a
//!   self-contained HTML page, its pictures inline as SVG.
//!
//! Several runs go on one picture (default locking against lockahead):
//! each run's lines or bars in its own colours, its label in the legends.

pub mod bars;
pub mod report;
pub mod series;

pub use bars::{Summary, SummaryFigure, SummaryPanels, TimersFigure};
pub use series::{Panel, Run, SeriesFigure, RANK_LINES_MAX};

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");
const MIB: f64 = 1048576.0;
/// Width of a picture in pixels.
const WIDTH: u32 = 1200;

/// A picture: its size and how it is drawn on any of plotters' backends.
pub trait Figure {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Draw on `root`, a blank area of [`Figure::size`].
    fn render<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>
    where
        DB::ErrorType: 'static;
}

/// Draw `figure` into `out`, a PNG or an SVG file by its name.
pub fn save(figure: &impl Figure, out: &Path) -> Result<(), String> {
    register_font();
    let size = figure.size();
    let extension = out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let drawn = match extension.as_deref() {
        Some("png") => paint(figure, BitMapBackend::new(out, size).into_drawing_area()),
        Some("svg") => paint(figure, SVGBackend::new(out, size).into_drawing_area()),
        _ => return Err(format!("{}: name the picture .png or .svg", out.display())),
    };
    drawn.map_err(|e| format!("cannot draw {}: {e}", out.display()))
}

/// `figure` as the text of an SVG document (for a page to hold inline).
pub fn svg(figure: &impl Figure) -> Result<String, String> {
    register_font();
    let mut text = String::new();
    paint(figure, SVGBackend::with_string(&mut text, figure.size()).into_drawing_area())?;
    Ok(text)
}

fn paint<DB: DrawingBackend>(figure: &impl Figure, root: DrawingArea<DB, Shift>) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    figure.render(&root)?;
    root.present().map_err(|e| e.to_string())
}

/// The legend of `chart`, in its upper right corner.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // The bundled font is well formed: only a font that is not fails.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Colours one after another, each different from the last ten.
#[derive(Default)]
pub(crate) struct Colors {
    next: usize,
}

impl Colors {
    const TABLE: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];

    pub(crate) fn next(&mut self) -> RGBColor {
        let c = Self::TABLE[self.next % Self::TABLE.len()];
        self.next += 1;
        c
    }

    /// The colour last given.
    pub(crate) fn again(&self) -> RGBColor {
        Self::TABLE[(self.next + Self::TABLE.len() - 1) % Self::TABLE.len()]
    }
}
