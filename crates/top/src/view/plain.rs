//! A frame as plain text, for a pipe or a log: a line with the sample's
//! time (UTC) and the interval, the OSTs' header and rows, the clients'
//! header and rows, and an empty line. Columns are fixed-width and
//! separated by at least one space (a value wider than its column pushes
//! the rest right, never into it), so `awk` splits them on white space;
//! an unknown value is `-`, and the flag column is empty, `SLOW` or `DOWN`.

use super::cells::{self, Align, Column};
use crate::rates::Frame;
use std::fmt::Write;

/// The text of one frame, ending with an empty line.
pub fn text(frame: &Frame) -> String {
    let mut out = String::new();
    let interval = match frame.interval_s {
        Some(s) => format!("interval {s:.2} s"),
        None => "interval - (first sample: no rates yet)".into(),
    };
    let _ = writeln!(out, "lanefs top {}  {interval}", super::utc(frame.unix_ms));
    line(&mut out, &cells::OST_COLUMNS, cells::OST_COLUMNS.map(|c| c.header.to_string()));
    for row in &frame.osts {
        line(&mut out, &cells::OST_COLUMNS, cells::ost_cells(row));
    }
    line(&mut out, &cells::CLIENT_COLUMNS, cells::CLIENT_COLUMNS.map(|c| c.header.to_string()));
    for row in &frame.clients {
        line(&mut out, &cells::CLIENT_COLUMNS, cells::client_cells(row));
    }
    out.push('\n');
    out
}

fn line<const N: usize>(out: &mut String, columns: &[Column; N], texts: [String; N]) {
    let start = out.len();
    for (i, (column, text)) in columns.iter().zip(&texts).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let width = usize::from(column.width);
        let _ = match column.align {
            Align::Left => write!(out, "{text:<width$}"),
            Align::Right => write!(out, "{text:>width$}"),
        };
    }
    out.truncate(start + out[start..].trim_end().len());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::{ClientRow, OstNow, OstRow};

    #[test]
    fn rows_are_fixed_width_columns_under_their_headers() {
        let now = OstNow { locks_granted: 12, rpcs_in_flight: 3, space_used_percent: Some(45.0), exports: 2 };
        let frame = Frame {
            unix_ms: 1_798_761_599_000,
            interval_s: Some(2.0),
            osts: vec![
                OstRow { ost: 0, now: Some(now), write_mib_s: Some(123.45), iops: Some(124.0), ..Default::default() },
                OstRow { ost: 1, now: Some(now), write_mib_s: Some(1.0), slow: true, ..Default::default() },
                OstRow { ost: 2, ..Default::default() },
            ],
            clients: vec![ClientRow { instance: "ffff000000000001".into(), locks_held: 5, ..Default::default() }],
        };
        let text = text(&frame);
        let expected = "\
lanefs top 2026-12-31T23:59:59Z  interval 2.00 s
OST             WR-MiB/s  RD-MiB/s     IOPS   LOCKS    LGR/s    LCR/s   RIF   %SPC   EXP FLAG
lanefs-OST0000     123.5         -    124.0      12        -        -     3   45.0     2
lanefs-OST0001       1.0         -        -      12        -        -     3   45.0     2 SLOW
lanefs-OST0002         -         -        -       -        -        -     -      -     - DOWN
CLIENT            WR-MiB/s  RD-MiB/s   LOCKS    ENQ/s   BLCB/s
ffff000000000001         -         -       5        -        -

";
        assert_eq!(text, expected);
    }
}
