//! The default text report of a real POSIX run has IOR 4.1's layout: the same header
//! keys, blocks and column positions as the real IOR output in `data/`.

mod common;

use common::{run_line, sample_text, token_ends, token_starts};
use lanefs_ior::PosixBackend;

/// `key` of a `%-20s: value` line.
fn key_of(line: &str) -> Option<&str> {
    (line.len() >= 22 && &line[20..22] == ": ").then(|| line[..20].trim_end())
}

/// The lines before the results table, reduced to their keys (or the whole line).
fn preamble_shape(text: &str) -> Vec<String> {
    text.lines()
        .take_while(|line| !line.starts_with("access"))
        .map(|line| key_of(line).map_or(line.to_string(), |key| format!("{key}: ...")))
        .collect()
}

#[test]
fn text_report_has_iors_layout() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("testfile");
    // The sample is `-a POSIX -w -e -b 128m -t 1m -s 1 -i 3`; same options, smaller sizes.
    let line = format!("-a POSIX -w -e -b 256k -t 64k -s 1 -i 3 -N 2 -o {}", file.display());
    let (summary, text) = run_line(&line, &PosixBackend);
    assert!(summary.passed());
    let sample = sample_text();

    // Header lines and the Options block: the same keys in the same order.
    let mut ours = preamble_shape(&text);
    let mut theirs = preamble_shape(sample);
    assert!(ours[0].starts_with("IOR-4.1.0+lanefs: MPI Coordinated Test of Parallel I/O"), "{}", ours[0]);
    ours.remove(0);
    theirs.remove(0);
    assert_eq!(ours, theirs);

    let lines: Vec<&str> = text.lines().collect();
    let value = |key: &str| lines.iter().find_map(|l| l.strip_prefix(&format!("{key:<20}: "))).unwrap();
    assert_eq!(value("Command line"), format!("lanefs ior {line}"));
    assert!(value("Machine").starts_with("Linux "));
    assert_eq!(value("Path"), file.display().to_string());
    assert_eq!(value("api"), "POSIX");
    assert_eq!(value("apiVersion"), "");
    assert_eq!(value("tasks"), "2");
    assert_eq!(value("xfersize"), "65536 bytes");
    assert_eq!(value("blocksize"), "262144 bytes");
    assert_eq!(value("aggregate filesize"), "524288 bytes");
    assert_eq!(value("repetitions"), "3");
    let began = value("Began");
    assert_eq!(began.len(), 24, "ctime layout: {began}");
    let fs = value("FS");
    assert!(fs.contains(" Used FS: ") && fs.contains("   Inodes: ") && fs.ends_with('%'), "{fs}");

    // The table: identical header, and every row's columns start where IOR's do.
    let sample_lines: Vec<&str> = sample.lines().collect();
    let header_at = |ls: &[&str]| ls.iter().position(|l| l.starts_with("access    bw(MiB/s)")).unwrap();
    let (ours_at, theirs_at) = (header_at(&lines), header_at(&sample_lines));
    assert_eq!(lines[ours_at], sample_lines[theirs_at]);
    assert_eq!(lines[ours_at + 1], sample_lines[theirs_at + 1]);
    let expected_starts = vec![0, 10, 21, 32, 44, 55, 66, 77, 88, 99, 110];
    for rep in 0..3 {
        let row = lines[ours_at + 2 + rep];
        assert!(row.starts_with("write     "), "{row}");
        assert_eq!(token_starts(row), expected_starts, "{row}");
        assert_eq!(token_starts(sample_lines[theirs_at + 2 + rep]), expected_starts);
        assert_eq!(row.len(), sample_lines[theirs_at + 2 + rep].len(), "row width incl. %-4d iter: {row:?}");
        assert!(row.ends_with(&format!("{rep:<4}")));
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&fields[4..6], ["256.00", "64.00"]);
    }

    // The summary: same header, a write line with IOR's column widths.
    let summary_at = lines.iter().position(|l| *l == "Summary of all tests:").unwrap();
    assert_eq!(lines[summary_at - 1], "");
    let sample_summary_at = sample_lines.iter().position(|l| *l == "Summary of all tests:").unwrap();
    assert_eq!(lines[summary_at + 1], sample_lines[sample_summary_at + 1]);
    let row = lines[summary_at + 2];
    // %-9s, 8 x %10.2f, %10.5f, %10s %13s (NA), %5d %6d %3d %4d %3d %5d %8d %9d %4d %6lld %8lld %8lld %9.1f %3s %6d
    let widths = [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 13, 5, 6, 3, 4, 3, 5, 8, 9, 4, 6, 8, 8, 9, 5, 6];
    let mut ends = vec![5];
    let mut start = 10;
    for width in widths {
        ends.push(start + width);
        start += width + 1;
    }
    assert_eq!(token_ends(row), ends, "{row}");
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(fields[0], "write");
    assert_eq!(&fields[10..12], ["NA", "NA"]);
    assert_eq!(
        &fields[12..],
        ["0", "2", "2", "3", "0", "0", "1", "0", "0", "1", "262144", "65536", "0.5", "POSIX", "0"]
    );
    let w = summary.write.unwrap();
    assert_eq!(fields[1], format!("{:.2}", w.bw_mib.max));
    assert_eq!(fields[4], format!("{:.2}", w.bw_mib.sd));
    assert_eq!(fields[9], format!("{:.5}", w.mean_time_s));
    assert!(lines.last().unwrap().starts_with("Finished            : "));
    assert_eq!(lines[summary_at + 3], lines.last().unwrap().to_string());
    // -k was not given: the file is gone.
    assert!(!file.exists());
}

#[test]
fn write_read_check_shows_both_operations() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    let line = format!("-w -r -W -R -b 64k -t 16k -s 2 -N 3 -i 2 -o {}", file.display());
    let (summary, text) = run_line(&line, &PosixBackend);
    assert!(summary.passed(), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .take_while(|l| *l != "Summary of all tests:")
        .filter(|l| l.starts_with("write ") || l.starts_with("read "))
        .collect();
    let accesses: Vec<(&str, &str)> =
        rows.iter().map(|r| (r.split_whitespace().next().unwrap(), r.split_whitespace().last().unwrap())).collect();
    assert_eq!(accesses, [("write", "0"), ("read", "0"), ("write", "1"), ("read", "1")]);
    let summary_rows: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Summary of all tests:")
        .filter(|l| l.starts_with("write") || l.starts_with("read"))
        .collect();
    assert_eq!(summary_rows.len(), 2);
    assert!(summary_rows[1].starts_with("read     "));
    assert!(!text.contains("WARNING"), "{text}");
}

#[test]
fn verbose_adds_iors_extra_lines() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    let line = format!("-v -w -r -W -b 64k -t 16k -N 2 -o {}", file.display());
    let (_, text) = run_line(&line, &PosixBackend);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&"verbose             : 1"), "{text}");
    let verifying = lines.iter().position(|l| *l == "Verifying contents of the file(s) just written.").unwrap();
    assert!(lines[verifying - 1].starts_with("write "));
    assert_eq!(lines[verifying + 1].len(), 24);
    assert_eq!(lines[verifying + 2], "");
    assert!(lines[verifying + 3].starts_with("read "));
    let remove = lines[verifying + 4];
    assert!(
        remove.starts_with(
            "remove    -          -          -           -          -          -          -          -          "
        ),
        "{remove}"
    );
    assert!(lines[verifying + 5].starts_with("Max Write: ") && lines[verifying + 5].ends_with(" MB/sec)"));
    assert!(lines[verifying + 6].starts_with("Max Read:  "));
    assert_eq!(lines[verifying + 7], "");
    assert_eq!(lines[verifying + 8], "Summary of all tests:");
}

#[test]
#[ignore = "prints a sample report; run with --ignored --nocapture"]
fn print_sample_report() {
    let dir = tempfile::tempdir().unwrap();
    let line = std::env::var("IOR_LINE").unwrap_or_else(|_| "-a POSIX -w -r -W -b 4m -t 1m -s 2 -N 4".to_string());
    let line = format!("{line} -o {}", dir.path().join("testFile").display());
    let (_, text) = run_line(&line, &PosixBackend);
    print!("{text}");
}
