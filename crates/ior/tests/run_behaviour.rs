//! The run: repetitions and their summary, fsync placement, file handling, and errors.

mod common;

use std::sync::atomic::Ordering;

use common::{args, run_line, MemBackend};
use lanefs_ior::{main_with, parse_args, run, stats, Backend, PosixBackend};

#[test]
fn repetitions_print_one_row_each_and_summarize_them() {
    let (summary, text) = run_line("-a MEM -w -r -b 64k -t 16k -N 2 -i 3", &MemBackend::default());
    assert_eq!(summary.iterations.len(), 3);
    let iters: Vec<&str> = text
        .lines()
        .take_while(|l| *l != "Summary of all tests:")
        .filter(|l| l.starts_with("write ") || l.starts_with("read "))
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(iters, ["0", "0", "1", "1", "2", "2"]);

    // The summary is the statistics of the per-iteration bandwidths.
    let bws: Vec<f64> = summary.iterations.iter().map(|it| it.write.unwrap().bw_mib_per_s()).collect();
    let expected = stats(&bws);
    let write = summary.write.unwrap();
    assert_eq!(write.bw_mib, expected);
    let mean_time = summary.iterations.iter().map(|it| it.write.unwrap().total_s).sum::<f64>() / 3.0;
    assert!((write.mean_time_s - mean_time).abs() < 1e-12);
    assert_eq!(write.agg_bytes_rep0, 2 * 64 * 1024);
    for it in &summary.iterations {
        let w = it.write.unwrap();
        assert_eq!(w.agg_bytes, 131072);
        assert!(w.total_s >= w.xfer_s && w.total_s >= w.open_s && w.total_s >= w.close_s);
        assert!(it.remove_s.is_some());
    }
}

#[test]
fn fsync_is_once_per_write_phase_or_per_write() {
    let backend = MemBackend::default();
    run_line("-a MEM -w -e -b 64k -t 16k -N 2 -i 2", &backend);
    assert_eq!(backend.fsyncs.load(Ordering::SeqCst), 4, "-e: one per rank and repetition");
    let backend = MemBackend::default();
    run_line("-a MEM -w -Y -b 64k -t 16k -s 2 -N 2", &backend);
    assert_eq!(backend.fsyncs.load(Ordering::SeqCst), 16, "-Y: one per transfer");
    let backend = MemBackend::default();
    run_line("-a MEM -w -r -b 64k -t 16k -N 2", &backend);
    assert_eq!(backend.fsyncs.load(Ordering::SeqCst), 0);
}

#[test]
fn barriers_and_reordering_leave_results_intact() {
    let (summary, _) = run_line("-a MEM -w -r -W -R -g -C -Q 3 -b 64k -t 16k -s 2 -N 4", &MemBackend::default());
    assert!(summary.passed());
}

#[test]
fn existing_file_is_kept_with_dash_e() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, vec![7u8; 200_000]).unwrap();
    run_line(&format!("-w -k -E -b 64k -t 16k -N 2 -o {}", file.display()), &PosixBackend);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 200_000, "-E neither removes nor truncates");
    run_line(&format!("-w -k -b 64k -t 16k -N 2 -o {}", file.display()), &PosixBackend);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 131_072, "without -E the old file is removed first");
    run_line(&format!("-r -b 64k -t 16k -N 2 -o {}", file.display()), &PosixBackend);
    assert!(!file.exists(), "without -k the file is removed after the repetition");
}

#[test]
fn an_io_error_names_the_rank_the_backend_and_the_file() {
    let p = parse_args(&args("-w -b 64k -t 16k -N 3 -o /nonexistent-dir/f")).unwrap();
    let error = run(&p, &PosixBackend, &mut Vec::new()).unwrap_err().to_string();
    assert!(error.starts_with("rank 0: POSIX: create /nonexistent-dir/f: "), "{error}");
    let p = parse_args(&args("-r -b 64k -t 16k -N 2")).unwrap();
    let error = run(&p, &MemBackend::default(), &mut Vec::new()).unwrap_err().to_string();
    assert_eq!(error, "rank 0: MEM: open testFile: no such file");
}

#[test]
fn module_options_are_checked_against_the_backend() {
    let table: [&dyn Backend; 2] = [&PosixBackend, &MemBackend::default()];
    let fail = |line: &str| main_with(&args(line), &table, &mut Vec::new()).unwrap_err().to_string();
    assert_eq!(
        fail("-a POSIX --lanefs.lock-mode=lockahead"),
        "invalid option --lanefs.lock-mode: this is an option of the LANEFS module, but the test runs with -a POSIX; add -a LANEFS or drop it"
    );
    assert!(fail("-a POSIX --posix.lustre.stripecount=4").contains("unknown option of the POSIX module"));
    assert!(fail("-a MEM --mem.anything").contains("it supports: none"));
    assert_eq!(fail("-a HDF5"), "invalid option -a HDF5: no such backend; available: POSIX, MEM");
    assert!(fail("-z -z").contains("give -z once"));
}

#[test]
fn odirect_works_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let line = format!("--posix.odirect -w -r -W -b 64k -t 16k -N 2 -o {}", dir.path().join("d").display());
    let p = parse_args(&args(&line)).unwrap();
    match run(&p, &PosixBackend, &mut Vec::new()) {
        Ok(summary) => assert!(summary.passed()),
        Err(error) => assert!(error.to_string().contains("O_DIRECT"), "{error}"),
    }
}

#[test]
fn thread_backends_refuse_more_tasks_than_threads() {
    let p = parse_args(&args("-w -b 64k -t 16k -N 5000")).unwrap();
    let mut out = Vec::new();
    let error = run(&p, &MemBackend::default(), &mut out).unwrap_err().to_string();
    assert_eq!(
        error,
        "invalid option -N 5000: must be between 1 and 4096 with -a MEM: each task is a thread with its own buffers and client (backends that model I/O run up to 1048576 tasks)"
    );
    assert!(out.is_empty());
}

#[test]
fn tasks_per_node_is_reported_where_ior_reports_it() {
    let (_, text) = run_line("-a MEM -w -b 64k -t 16k -N 6 --tasks-per-node 4", &MemBackend::default());
    let value = |key: &str| text.lines().find_map(|l| l.strip_prefix(&format!("{key:<20}: "))).unwrap();
    assert_eq!((value("nodes"), value("tasks"), value("clients per node")), ("2", "6", "4"));
    let row = text.lines().skip_while(|l| *l != "Summary of all tests:").nth(2).unwrap();
    let fields: Vec<&str> = row.split_whitespace().collect();
    assert_eq!((fields[0], fields[13], fields[14]), ("write", "6", "4"), "#Tasks and tPN: {row}");
}

/// `-f`: IOR's script format (`ReadConfigScript`): lines before `IOR START`
/// are skipped, directives (comma-separated, `#` comments) change the test,
/// `RUN` ends one, each test starts from the one before, `IOR STOP` ends the
/// script. Every test prints its own `TestID` and results, and `Summary of
/// all tests` has a line per test and operation, numbered in `Test#`.
#[test]
fn a_script_runs_its_tests_one_after_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("two.ior");
    let text = "a comment line IOR skips\nIOR START\n  # the first test writes\n  api=MEM\n  \
                writeFile=1, blockSize=64k # a comment\n  transferSize=16k\n  numTasks=2\nRUN\n  \
                readFile=1\n  segmentCount=2\nRUN\nIOR STOP\nignored=after stop\n";
    std::fs::write(&script, text).unwrap();
    let line = format!("-a MEM -f {}", script.display());
    let (summary, out) = run_line(&line, &MemBackend::default());
    assert_eq!(out.matches("TestID              : ").count(), 2, "{out}");
    assert!(out.contains("TestID              : 0") && out.contains("TestID              : 1"), "{out}");
    let summary_lines: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| *l != "Summary of all tests:")
        .filter(|l| l.starts_with("write ") || l.starts_with("read "))
        .map(|l| l.split_whitespace().collect())
        .collect();
    // Operation and Test# (the 13th column): test 0 writes; test 1 writes and reads.
    let ops: Vec<(&str, &str)> = summary_lines.iter().map(|l| (l[0], l[12])).collect();
    assert_eq!(ops, [("write", "0"), ("write", "1"), ("read", "1")], "{out}");
    // Test 1 kept test 0's sizes and has 2 segments: 2 tasks x 2 x 64 KiB.
    assert_eq!(summary.write.unwrap().agg_bytes_rep0, 2 * 2 * 64 * 1024);
    assert_eq!(summary.iterations.len(), 2);

    let mut params = parse_args(&args(&line)).unwrap();
    assert_eq!((params.test_id, params.next_tests.len()), (0, 1));
    assert!(!params.read_file, "a test that asks for a phase gets only that one");
    params.next_tests[0].api = "POSIX".into();
    let refused = run(&params, &MemBackend::default(), &mut Vec::new()).unwrap_err().to_string();
    assert!(refused.contains("every test of a script runs on the command line's API"), "{refused}");

    // Errors name the script's line; a file without IOR START is refused.
    std::fs::write(&script, "IOR START\n  blockSize=64x\nRUN\n").unwrap();
    let e = parse_args(&args(&line)).unwrap_err().to_string();
    assert!(e.contains(&format!("{}:2: -O blockSize=64x", script.display())), "{e}");
    std::fs::write(&script, "blockSize=64k\n").unwrap();
    assert!(parse_args(&args(&line)).unwrap_err().to_string().contains("no `IOR START` line"));
    assert!(parse_args(&args("-f /nonexistent/script")).unwrap_err().to_string().contains("cannot read the script"));
}

/// `--dryRun`: the test runs, prints its options and rows, and no file is
/// touched; a dry run with data checks has nothing to check and is refused.
#[test]
fn a_dry_run_touches_no_file() {
    let backend = MemBackend::default();
    let (summary, out) = run_line("-a MEM --dryRun -w -r -e -b 64k -t 16k -N 2 -k", &backend);
    assert!(out.contains("\ndryRun              : 1\n"), "{out}");
    assert!(summary.write.is_some() && summary.read.is_some(), "{out}");
    assert!(backend.files.lock().unwrap().is_empty());
    assert_eq!(backend.bytes_written.load(Ordering::SeqCst), 0);
    assert_eq!(backend.fsyncs.load(Ordering::SeqCst), 0);
    let refused = parse_args(&args("--dryRun -w -W")).unwrap_err().to_string();
    assert!(refused.contains("a dry run moves no data"), "{refused}");
}

/// `-z`: shuffled offsets, written and read back verified, on a shared file
/// and with one file per task; the Options block says "random".
#[test]
fn random_offsets_write_and_verify() {
    for layout in ["", "-F"] {
        let line = format!("-a MEM -z --random-offset-seed=5 -w -r -W -R -b 64k -t 4k -s 2 -N 3 {layout}");
        let (summary, out) = run_line(&line, &MemBackend::default());
        assert!(summary.passed(), "{line}: {out}");
        assert!(out.contains("ordering in a file  : random"), "{out}");
        assert_eq!(summary.write.unwrap().agg_bytes_rep0, 3 * 2 * 64 * 1024, "{line}");
    }
}

/// `-Z` and `-Z -Z`: the read phase takes each task to a random task's data,
/// and IOR's own read check (-R, by the writer's pattern) passes.
#[test]
fn random_task_reordering_reads_other_tasks_data_verified() {
    for (flags, ordering) in [("-Z", Some("random task offset")), ("-Z -Z", None)] {
        let line = format!("-a MEM {flags} -X 4 -w -r -R -b 64k -t 16k -N 4 -F -G 7");
        let (summary, out) = run_line(&line, &MemBackend::default());
        assert!(summary.passed(), "{line}: {out}");
        assert_eq!(ordering.is_some(), out.contains("ordering inter file : random task offset"), "{out}");
        let reordrand = out.lines().skip_while(|l| *l != "Summary of all tests:").nth(2).unwrap();
        let fields: Vec<&str> = reordrand.split_whitespace().collect();
        assert_eq!(fields[19], if flags == "-Z" { "1" } else { "2" }, "reordrand column: {reordrand}");
    }
}
