//! The columns of `lanefs top`, as ltop names its own where it has them,
//! units in the headers: each column's header, width and alignment, and
//! the text of each cell. A value that cannot be known is `-`.

use crate::rates::{ClientRow, OstRow};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub header: &'static str,
    /// Characters, the header's included.
    pub width: u16,
    pub align: Align,
}

const fn right(header: &'static str, width: u16) -> Column {
    Column { header, width, align: Align::Right }
}

pub const OST_COLUMNS: [Column; 11] = [
    Column { header: "OST", width: 14, align: Align::Left },
    right("WR-MiB/s", 9),
    right("RD-MiB/s", 9),
    right("IOPS", 8),
    right("LOCKS", 7),
    right("LGR/s", 8),
    right("LCR/s", 8),
    right("RIF", 5),
    right("%SPC", 6),
    right("EXP", 5),
    Column { header: "FLAG", width: 4, align: Align::Left },
];

pub const CLIENT_COLUMNS: [Column; 6] = [
    Column { header: "CLIENT", width: 16, align: Align::Left },
    right("WR-MiB/s", 9),
    right("RD-MiB/s", 9),
    right("LOCKS", 7),
    right("ENQ/s", 8),
    right("BLCB/s", 8),
];

/// What the flag column says of an OST that is slow (see [`crate::slow`]).
pub const SLOW: &str = "SLOW";
/// ... and of one that did not answer this sample.
pub const DOWN: &str = "DOWN";

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.1}"))
}

pub fn ost_cells(row: &OstRow) -> [String; 11] {
    let now = row.now;
    let count = |f: fn(&crate::rates::OstNow) -> u64| now.as_ref().map_or_else(|| "-".into(), |n| f(n).to_string());
    let flag = match (now, row.slow) {
        (None, _) => DOWN,
        (Some(_), true) => SLOW,
        (Some(_), false) => "",
    };
    [
        lanefs_net::params::server::obdfilter_name(row.ost),
        rate(row.write_mib_s),
        rate(row.read_mib_s),
        rate(row.iops),
        count(|n| n.locks_granted),
        rate(row.lock_grants_s),
        rate(row.lock_cancels_s),
        count(|n| n.rpcs_in_flight),
        rate(now.and_then(|n| n.space_used_percent)),
        count(|n| n.exports),
        flag.into(),
    ]
}

pub fn client_cells(row: &ClientRow) -> [String; 6] {
    [
        row.instance.clone(),
        rate(row.write_mib_s),
        rate(row.read_mib_s),
        row.locks_held.to_string(),
        rate(row.enqueues_s),
        rate(row.blocking_callbacks_s),
    ]
}
