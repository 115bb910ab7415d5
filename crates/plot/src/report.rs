//! A run's report as one self-contained HTML page, to attach to a ticket:
//! its command line and times, IOR's tables (each repetition's results and
//! the summary), the lanefs counters (and the simulator's, for a simulated
//! run), the MPI-IO write timers, and the pictures inline as SVG: the
//! bandwidth bars, the timers stacked, and the time series when one is
//! given. The page loads nothing else: no scripts, styles or fonts from
//! anywhere.

use crate::bars::{Summary, SummaryFigure, TimersFigure};
use crate::series::{Panel, Run, SeriesFigure};
use serde_json::Value;
use std::fmt::Write as _;

/// IOR's top-level keys shown in the page's head, in order.
const HEAD_KEYS: [&str; 5] = ["Command line", "Version", "Machine", "Began", "Finished"];
/// Backend reports shown as counter tables, with their headings.
const COUNTERS: [(&str, &str); 2] = [("lanefs", "lanefs counters"), ("sim", "Simulator")];

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1250px;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}\
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}th{background:#f2f2f2}\
td.k,th.k{text-align:left}code{background:#f6f6f6;padding:.1em .3em}\
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}";

/// The page for `summary`, with `series` drawn if given.
pub fn html(summary: &Summary, series: Option<&Run>) -> Result<String, String> {
    let json = &summary.json;
    let mut page = String::new();
    let command = json.get("Command line").and_then(Value::as_str).unwrap_or("IOR");
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>lanefs run: {}</title><style>{STYLE}</style></head><body>\n",
        escape(command)
    );
    let _ = writeln!(page, "<h1>lanefs run: <code>{}</code></h1>", escape(command));
    let head: Vec<Vec<String>> =
        HEAD_KEYS.iter().filter_map(|k| json.get(*k).map(|v| vec![k.to_string(), scalar(v)])).collect();
    page.push_str(&table(&[], &head));
    results(&mut page, json);
    page.push_str("<h2>Summary</h2>\n");
    page.push_str(&objects_table(json.get("summary").and_then(Value::as_array).map_or(&[], Vec::as_slice)));
    figure(
        &mut page,
        &crate::svg(&SummaryFigure { runs: std::slice::from_ref(summary) })?,
        "Bandwidth of each operation",
    );
    for (key, heading) in COUNTERS {
        if let Some(Value::Object(map)) = json.get(key) {
            let _ = writeln!(page, "<h2>{}</h2>", escape(heading));
            let mut rows = Vec::new();
            flatten("", map, &mut rows);
            page.push_str(&table(&["counter".into(), "value".into()], &rows));
        }
    }
    timers(&mut page, summary)?;
    if let Some(run) = series {
        page.push_str("<h2>Over time</h2>\n");
        let panels: Vec<Panel> = Panel::ALL.into_iter().filter(|p| has_data(*p, run)).collect();
        if !panels.is_empty() {
            let svg = crate::svg(&SeriesFigure::new(std::slice::from_ref(run), &panels)?)?;
            let caption = format!("Time series {} (bins of {} s)", run.label, run.series.interval_s);
            figure(&mut page, &svg, &caption);
        }
    }
    page.push_str("</body></html>\n");
    Ok(page)
}

/// Each test's results, a row per repetition and operation.
fn results(page: &mut String, json: &Value) {
    let Some(tests) = json.get("tests").and_then(Value::as_array) else { return };
    for test in tests {
        let id = test.get("TestID").map(scalar).unwrap_or_default();
        let _ = writeln!(page, "<h2>Test {}</h2>", escape(&id));
        let rows: Vec<Value> = match test.get("Results") {
            Some(Value::Array(reps)) => {
                reps.iter().flat_map(|r| r.as_array().cloned().unwrap_or_else(|| vec![r.clone()])).collect()
            }
            _ => Vec::new(),
        };
        page.push_str(&objects_table(&rows));
    }
}

/// The MPI-IO write timers: a table per write and the stacked bars.
fn timers(page: &mut String, summary: &Summary) -> Result<(), String> {
    if summary.timers.is_empty() {
        return Ok(());
    }
    page.push_str("<h2>MPI-IO write phases (MPICH_MPIIO_TIMERS)</h2>\n");
    for write in &summary.timers {
        let _ = writeln!(
            page,
            "<p>{} writers, {} bytes, to <code>{}</code></p>",
            write.writers,
            write.bytes,
            escape(&write.file)
        );
        let header: Vec<String> =
            ["phase", "min (s)", "max (s)", "ave (s)", "%"].iter().map(|s| s.to_string()).collect();
        let rows: Vec<Vec<String>> = write
            .phases
            .iter()
            .map(|p| {
                vec![
                    p.phase.clone(),
                    format!("{:.6}", p.min_s),
                    format!("{:.6}", p.max_s),
                    format!("{:.6}", p.ave_s),
                    p.percent.to_string(),
                ]
            })
            .collect();
        page.push_str(&table(&header, &rows));
        let bw = |v: Option<f64>| v.map_or_else(|| "NA".to_string(), |v| format!("{v:.3}"));
        let rows = vec![
            vec!["data send BW (MiB/s)".to_string(), bw(write.data_send_bw_mib)],
            vec!["raw write BW (MiB/s)".to_string(), bw(write.raw_write_bw_mib)],
            vec!["net write BW (MiB/s)".to_string(), bw(write.net_write_bw_mib)],
        ];
        page.push_str(&table(&[], &rows));
    }
    let svg = crate::svg(&TimersFigure { runs: std::slice::from_ref(summary) })?;
    figure(page, &svg, "Write phases, average over the aggregators");
    Ok(())
}

fn has_data(panel: Panel, run: &Run) -> bool {
    let groups: &[&str] = match panel {
        Panel::Bandwidth | Panel::Osts => &["ost_write_bytes", "ost_read_bytes"],
        Panel::Ranks => &["rank_write_bytes", "rank_read_bytes"],
        Panel::Locks | Panel::Clients => &["client_enqueues", "client_blocking_callbacks"],
    };
    groups.iter().any(|g| run.series.get(g).is_some_and(|g| g.total() > 0))
}

fn figure(page: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(page, "<figure>{svg}<figcaption>{}</figcaption></figure>", escape(caption));
}

/// A table of JSON objects, a column per key of the first.
fn objects_table(rows: &[Value]) -> String {
    let Some(Value::Object(first)) = rows.first() else { return String::new() };
    let header: Vec<String> = first.keys().cloned().collect();
    let body: Vec<Vec<String>> =
        rows.iter().map(|row| header.iter().map(|k| row.get(k).map(scalar).unwrap_or_default()).collect()).collect();
    table(&header, &body)
}

/// Nested keys joined with dots (`locks.granted`), a row each.
fn flatten(prefix: &str, map: &serde_json::Map<String, Value>, rows: &mut Vec<Vec<String>>) {
    for (name, value) in map {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        match value {
            Value::Object(inner) => flatten(&key, inner, rows),
            other => rows.push(vec![key, scalar(other)]),
        }
    }
}

/// A table; the first column left-aligned (names), the others right.
fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table>");
    if !header.is_empty() {
        out.push_str("<tr>");
        for (i, h) in header.iter().enumerate() {
            let class = if i == 0 { " class=\"k\"" } else { "" };
            let _ = write!(out, "<th{class}>{}</th>", escape(h));
        }
        out.push_str("</tr>");
    }
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = if i == 0 { " class=\"k\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>\n");
    out
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Text as HTML text or attribute value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_its_tables_and_pictures_and_escapes_what_it_shows() {
        let text = r#"{"Version": "4.1.0+lanefs", "Command line": "lanefs ior -o /a<b>&c",
            "tests": [{"TestID": 0, "Results": [[{"access": "write", "bwMiB": 100.5}]]}],
            "summary": [{"operation": "write", "API": "POSIX", "bwMaxMIB": 1.0, "bwMinMIB": 1.0, "bwMeanMIB": 1.0, "bwStdMIB": 0.0}],
            "lanefs": {"lock_enqueues": 12, "locks": {"granted": 3}}}"#;
        let summary = Summary::parse("run", text).unwrap();
        let page = html(&summary, None).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("/a&lt;b&gt;&amp;c") && !page.contains("/a<b>"), "the command line escaped");
        assert!(page.contains("<td class=\"k\">write</td><td>100.5</td>"), "the results table");
        assert!(page.contains("locks.granted"), "nested counters flattened");
        assert!(page.contains("<svg"), "the bandwidth picture inline");
        assert!(!page.contains("src=") && !page.contains("<link") && !page.contains("<script"), "nothing loaded");
    }
}
