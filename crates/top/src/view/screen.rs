//! A frame on a full screen, with ratatui: a title line, the OSTs' table,
//! the clients' table, a status line (what went wrong while sampling, or
//! where a replay is) and the keys. A slow OST's row is drawn in yellow,
//! one that did not answer in red. Drawing holds no state: the event loop
//! ([`crate::run`]) owns it and hands a [`Screen`] to [`draw`].

use super::cells::{self, Align, Column};
use crate::rates::Frame;
use ratatui::layout::{Alignment, Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};

/// What one screen shows.
pub struct Screen<'a> {
    /// Where the samples come from (the MDS's address, or the recording).
    pub source: &'a str,
    /// The frame to show; `None` until the first sample is in.
    pub frame: Option<&'a Frame>,
    /// The status line: notes from sampling, or a replay's position.
    pub status: &'a str,
    /// The keys this screen takes.
    pub keys: &'a str,
}

pub fn draw(f: &mut ratatui::Frame, screen: &Screen) {
    let ost_rows = screen.frame.map_or(0, |fr| fr.osts.len()) as u16;
    let [title, osts, clients, status, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Max(ost_rows.saturating_add(3)),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(title_line(screen)).style(Modifier::BOLD), title);
    let Some(frame) = screen.frame else {
        f.render_widget(Paragraph::new("waiting for the first sample..."), osts);
        return;
    };
    let ost_rows = frame.osts.iter().map(|row| {
        let style = match (row.now, row.slow) {
            (None, _) => Style::new().fg(Color::Red),
            (Some(_), true) => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
            (Some(_), false) => Style::new(),
        };
        Row::new(aligned(&cells::OST_COLUMNS, cells::ost_cells(row))).style(style)
    });
    f.render_widget(table(&cells::OST_COLUMNS, ost_rows, " OSTs "), osts);
    let client_rows =
        frame.clients.iter().map(|row| Row::new(aligned(&cells::CLIENT_COLUMNS, cells::client_cells(row))));
    f.render_widget(table(&cells::CLIENT_COLUMNS, client_rows, " Clients of this host "), clients);
    f.render_widget(Paragraph::new(screen.status).style(Style::new().fg(Color::Yellow)), status);
    f.render_widget(Paragraph::new(screen.keys).style(Modifier::DIM), keys);
}

fn title_line(screen: &Screen) -> String {
    let Some(frame) = screen.frame else { return format!("lanefs top  {}", screen.source) };
    let interval =
        frame.interval_s.map_or_else(|| "first sample: no rates yet".into(), |s| format!("interval {s:.2} s"));
    format!("lanefs top  {}  {}  {interval}", screen.source, super::utc(frame.unix_ms))
}

fn aligned<const N: usize>(columns: &[Column; N], texts: [String; N]) -> Vec<Cell<'static>> {
    columns
        .iter()
        .zip(texts)
        .map(|(column, text)| {
            let alignment = match column.align {
                Align::Left => Alignment::Left,
                Align::Right => Alignment::Right,
            };
            Cell::from(Line::from(text).alignment(alignment))
        })
        .collect()
}

fn table<'a, const N: usize>(
    columns: &[Column; N],
    rows: impl IntoIterator<Item = Row<'a>>,
    title: &'a str,
) -> Table<'a> {
    let header = aligned(columns, columns.map(|c| c.header.to_string()));
    Table::new(rows, columns.map(|c| Constraint::Length(c.width)))
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)))
        .block(Block::bordered().title(title))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::{OstNow, OstRow};
    use ratatui::backend::TestBackend;

    #[test]
    fn a_frame_fills_the_screen_with_both_tables() {
        let now = OstNow { locks_granted: 4, rpcs_in_flight: 1, space_used_percent: Some(10.0), exports: 2 };
        let frame = Frame {
            unix_ms: 0,
            interval_s: Some(1.0),
            osts: vec![OstRow { ost: 0, now: Some(now), write_mib_s: Some(42.0), slow: true, ..Default::default() }],
            clients: Vec::new(),
        };
        let mut terminal = ratatui::Terminal::new(TestBackend::new(110, 12)).unwrap();
        let screen = Screen { source: "unix:/x/mds.sock", frame: Some(&frame), status: "a note", keys: "q quit" };
        terminal.draw(|f| draw(f, &screen)).unwrap();
        let text: String = terminal.backend().buffer().content().iter().map(|c| c.symbol()).collect();
        for expected in [
            "lanefs top  unix:/x/mds.sock  1970-01-01T00:00:00Z",
            "OSTs",
            "lanefs-OST0000",
            "42.0",
            "SLOW",
            "Clients of this host",
            "a note",
            "q quit",
        ] {
            assert!(text.contains(expected), "{expected:?} not on the screen:\n{text}");
        }
    }
}
