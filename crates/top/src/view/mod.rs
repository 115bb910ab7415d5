//! How a [`Frame`](crate::rates::Frame) is drawn: [`cells`] makes the
//! text of every column once, [`plain`] lays it out as fixed-width text
//! for pipes and logs, [`screen`] as ratatui tables for a terminal. Both
//! show the same columns with the same headers, so what a script reads
//! is what a person sees.

pub mod cells;
pub mod plain;
pub mod screen;

/// A time in ms since the Unix epoch as ISO 8601 UTC, to the second
/// (`2026-12-01T10:38:00Z`): one reading wherever the log is read.
pub fn utc(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000;
    let (days, second_of_day) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    let (h, m, s) = (second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z")
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to the
/// proleptic Gregorian calendar's year, month and day.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_utc() {
        assert_eq!(super::utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(super::utc(1_798_761_599_999), "2026-12-31T23:59:59Z");
    }
}
