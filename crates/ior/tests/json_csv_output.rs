//! JSON and CSV reports: IOR 4.1's keys, order and layout, compared with the real IOR
//! JSON in `data/` after masking the values.

mod common;

use common::{run_line, sample_json, MemBackend};
use lanefs_ior::PosixBackend;

/// Replace every string value with `S` and every number with `N`, keeping keys and layout.
fn mask_values(json: &str) -> String {
    let mut out = String::new();
    let mut rest = json;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix(": \"") {
            let mut escaped = false;
            let end = after
                .char_indices()
                .find(|&(_, ch)| {
                    let closes = ch == '"' && !escaped;
                    escaped = ch == '\\' && !escaped;
                    closes
                })
                .map(|(i, _)| i)
                .expect("unterminated string");
            out.push_str(": S");
            rest = &after[end + 1..];
        } else if let Some(after) =
            rest.strip_prefix(": ").filter(|a| a.starts_with(|ch: char| ch == '-' || ch.is_ascii_digit()))
        {
            let end = after.find(|ch: char| !(ch == '-' || ch == '.' || ch.is_ascii_digit())).unwrap_or(after.len());
            out.push_str(": N");
            rest = &after[end..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Keys of the outermost object, in order.
fn top_level_keys(json: &str) -> Vec<String> {
    let (mut depth, mut keys, mut in_string, mut escaped, mut current) = (0, Vec::new(), false, false, String::new());
    let mut last_string = None;
    for ch in json.chars() {
        if in_string {
            match ch {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    in_string = false;
                    last_string = Some(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(ch);
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ':' if depth == 1 => keys.extend(last_string.take()),
            ' ' | '\n' => continue,
            _ => {}
        }
        if ch != ':' {
            last_string = None;
        }
    }
    keys
}

#[test]
fn json_report_matches_the_samples_layout() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("testfile");
    // The sample is `-a POSIX -w -e -b 128m -t 1m -s 1 -i 3 -O summaryFormat=JSON`.
    let line = format!("-a POSIX -w -e -b 256k -t 64k -s 1 -i 3 -N 2 -o {} -O summaryFormat=JSON", file.display());
    let (summary, json) = run_line(&line, &PosixBackend);
    assert!(summary.passed());
    assert_eq!(mask_values(&json), mask_values(sample_json()));

    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["Version"], "4.1.0+lanefs");
    let test = &value["tests"][0];
    assert_eq!(test["Path"], file.display().to_string());
    assert_eq!(test["Parameters"]["tasksPerNode"], 2);
    assert_eq!(test["Parameters"]["blockSize"], 262144);
    assert_eq!(test["Parameters"]["fsync"], 1);
    assert_eq!(test["Options"]["xfersize"], "65536 bytes");
    let results = test["Results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["access"], "write");
    assert_eq!(results[0]["blockKiB"].as_f64(), Some(256.0));
    let summary_json = &value["summary"][0];
    assert_eq!(summary_json["operation"], "write");
    assert_eq!(summary_json["numTasks"], 2);
    let w = summary.write.unwrap();
    assert_eq!(format!("{:.4}", summary_json["bwMeanMIB"].as_f64().unwrap()), format!("{:.4}", w.bw_mib.mean));
    assert_eq!(summary_json["xsizeMiB"].as_f64(), Some(0.5));
    assert_eq!(top_level_keys(&json), ["Version", "Began", "Command line", "Machine", "tests", "summary", "Finished"]);
}

#[test]
fn backend_report_goes_after_the_summary() {
    let backend = MemBackend { with_report: true, ..MemBackend::default() };
    let (_, json) = run_line("-a MEM -w -r -b 64k -t 16k -N 2 -O summaryFormat=JSON", &backend);
    assert_eq!(
        top_level_keys(&json),
        ["Version", "Began", "Command line", "Machine", "tests", "summary", "mem", "Finished"]
    );
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(value["mem"]["bytesWritten"], 131072);
    assert!(
        json.contains("\"mem\": {\n  \"bytesWritten\": 131072, \n  \"ratio\": 0.5000\n}\n, \n\"Finished\""),
        "{json}"
    );
    // MEM has no statfs: IOR prints no Path/Capacity, and JSON stays clean.
    assert!(value["tests"][0].get("Path").is_none());

    let backend = MemBackend { with_report: true, ..MemBackend::default() };
    let (_, text) = run_line("-a MEM -w -r -b 64k -t 16k -N 2", &backend);
    assert!(text.contains("WARNING: Backend doesn't implement statfs.\n"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("mem.bytesWritten")).unwrap();
    assert!(lines[at - 2].starts_with("read "), "{text}");
    assert_eq!(lines[at - 1], "");
    assert_eq!(lines[at], "mem.bytesWritten    : 131072");
    assert_eq!(lines[at + 1], "mem.ratio           : 0.5");
    assert_eq!(lines[at + 2], "");
    assert_eq!(lines[at + 3], "Summary of all tests:");
}

#[test]
fn verbose_json_has_max_and_remove_entries() {
    let (_, json) = run_line("-a MEM -v -w -r -b 64k -t 16k -N 2 -i 2 -O summaryFormat=JSON", &MemBackend::default());
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let test = &value["tests"][0];
    let accesses: Vec<&str> =
        test["Results"].as_array().unwrap().iter().map(|r| r["access"].as_str().unwrap()).collect();
    assert_eq!(accesses, ["write", "read", "remove", "write", "read", "remove"]);
    let max = test["max"].as_object().unwrap();
    assert!(max.contains_key("writeMiB") && max.contains_key("readMB"));
    assert_eq!(test["Options"]["verbose"], 1);
    assert_eq!(value["summary"].as_array().unwrap().len(), 2);
}

#[test]
fn csv_report_is_the_table_only() {
    let (_, csv) = run_line("-a MEM -w -r -b 64k -t 16k -N 3 -i 2 -O summaryFormat=CSV", &MemBackend::default());
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "access,bw(MiB/s),IOPS,Latency,block(KiB),xfer(KiB),open(s),wr/rd(s),close(s),total(s),numTasks,iter"
    );
    assert_eq!(lines.len(), 5, "{csv}");
    let row: Vec<&str> = lines[4].split(',').collect();
    assert_eq!(row.len(), 12);
    assert_eq!((row[0], row[4], row[5], row[10], row[11]), ("read", "64.0000", "16.0000", "3", "1"));
    assert!(row[1].split_once('.').is_some_and(|(_, decimals)| decimals.len() == 4));
}

#[test]
fn summary_file_takes_the_results() {
    let dir = tempfile::tempdir().unwrap();
    let summary_file = dir.path().join("summary.json");
    let line = format!("-a MEM -w -b 64k -t 16k -O summaryFormat=JSON,summaryFile={}", summary_file.display());
    let (_, stdout) = run_line(&line, &MemBackend::default());
    assert_eq!(stdout, format!("Writing output to {}\n", summary_file.display()));
    let json = std::fs::read_to_string(&summary_file).unwrap();
    serde_json::from_str::<serde_json::Value>(&json).expect("valid JSON in the summary file");

    let text_file = dir.path().join("summary.txt");
    let line = format!("-a MEM -w -b 64k -t 16k -O summaryFile={}", text_file.display());
    let (_, stdout) = run_line(&line, &MemBackend::default());
    // As IOR: the banner goes to stdout, the report to the file.
    assert!(
        stdout.ends_with(
            "IOR-4.1.0+lanefs: MPI Coordinated Test of Parallel I/O\nWARNING: Backend doesn't implement statfs.\n"
        ),
        "{stdout}"
    );
    let text = std::fs::read_to_string(&text_file).unwrap();
    assert!(text.starts_with("Began               : "), "{text}");
    assert!(text.contains("\nSummary of all tests:\n"));
}
