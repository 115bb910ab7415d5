//! `lanefs lock-script` end to end: the built binary runs each script in
//! `tests/scripts/NAME.jsonl`, and its standard output must equal
//! `NAME.expected` byte for byte.
//!
//! The expected outputs were written from `/work/shared/domain/ldlm.md`
//! (Lustre's rules), not copied from a run, so a difference is either a bug
//! in the lock server or a mistake in the fixture, to be decided from that
//! document. The scenarios mirror Lustre's `lockahead_test.c` (ldlm.md §4) at
//! the level of one OST's lock server.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("scripts")
}

/// Run `lanefs lock-script ARG`, feeding `stdin` if given.
fn lock_script(arg: &Path, stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanefs"))
        .arg("lock-script")
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lanefs runs");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    pipe.write_all(stdin.unwrap_or("").as_bytes()).expect("lanefs reads its input");
    drop(pipe);
    child.wait_with_output().expect("lanefs finishes")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("output is UTF-8")
}

/// Run fixture `name` and compare its output with `name.expected`.
fn check_fixture(name: &str) {
    let script = scripts_dir().join(format!("{name}.jsonl"));
    let expected = std::fs::read_to_string(scripts_dir().join(format!("{name}.expected"))).expect("expected exists");
    let output = lock_script(&script, None);
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{name}: lanefs failed: {stderr}");
    assert_eq!(stderr, "", "{name}: unexpected stderr");
    let actual = text(&output.stdout);
    if actual != expected {
        let (mut a, mut e) = (actual.lines(), expected.lines());
        for number in 1.. {
            let (got, want) = (a.next(), e.next());
            if got.is_none() && want.is_none() {
                break;
            }
            assert_eq!(got, want, "{name}: output line {number} differs");
        }
        panic!("{name}: outputs differ in their final newline");
    }
}

#[test]
fn s01_a_lone_write_lock_expands_to_the_whole_object() {
    check_fixture("01_lone_write_expands");
}

#[test]
fn s02_strided_writers_ping_pong_the_whole_object_lock() {
    check_fixture("02_strided_ping_pong");
}

#[test]
fn s03_adjacent_lockahead_locks_coexist_unexpanded() {
    check_fixture("03_adjacent_lockahead");
}

#[test]
fn s04_speculative_requests_are_refused_on_any_conflict() {
    check_fixture("04_speculative_refusals");
}

#[test]
fn s05_a_write_revokes_only_the_lockahead_lock_in_its_way() {
    check_fixture("05_lockahead_strided_then_write");
}

#[test]
fn s06_no_expand_grants_exactly_the_request() {
    check_fixture("06_no_expand");
}

#[test]
fn s07_a_holder_that_misses_its_callback_is_evicted() {
    check_fixture("07_callback_timeout");
}

/// ldlm.md: an evicted client is refused until it reconnects.
#[test]
fn s07b_an_evicted_client_is_refused_until_it_reconnects() {
    check_fixture("07b_evicted_client_refused");
}

#[test]
fn s07c_config_sets_the_callback_timeout() {
    check_fixture("07c_config_callback_timeout");
}

#[test]
fn s08_group_locks_share_a_gid_and_take_no_callbacks() {
    check_fixture("08_group_locks");
}

#[test]
fn s10_a_waiting_group_request_joins_its_gid_or_goes_before_the_first_non_group_waiter() {
    check_fixture("10_group_queue_order");
}

#[test]
fn s11_holders_timed_out_together_are_evicted_in_callback_order() {
    check_fixture("11_eviction_order");
}

#[test]
fn s09a_more_than_4_conflicting_waiters_stop_downward_growth() {
    check_fixture("09a_waiters_stop_downward_growth");
}

#[test]
fn s09b_more_than_32_conflicting_locks_cap_growth_at_32_mib() {
    check_fixture("09b_32mib_cap");
}

/// Every fixture on disk has its expected output and a test above.
#[test]
fn every_fixture_is_checked() {
    const FIXTURES: [&str; 14] = [
        "01_lone_write_expands",
        "02_strided_ping_pong",
        "03_adjacent_lockahead",
        "04_speculative_refusals",
        "05_lockahead_strided_then_write",
        "06_no_expand",
        "07_callback_timeout",
        "07b_evicted_client_refused",
        "07c_config_callback_timeout",
        "08_group_locks",
        "09a_waiters_stop_downward_growth",
        "09b_32mib_cap",
        "10_group_queue_order",
        "11_eviction_order",
    ];
    let mut on_disk: Vec<String> = std::fs::read_dir(scripts_dir())
        .expect("scripts directory")
        .map(|entry| entry.expect("directory entry").file_name().into_string().expect("UTF-8 name"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> =
        FIXTURES.iter().flat_map(|name| [format!("{name}.expected"), format!("{name}.jsonl")]).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

#[test]
fn dash_reads_the_script_from_stdin() {
    let script = std::fs::read_to_string(scripts_dir().join("02_strided_ping_pong.jsonl")).unwrap();
    let expected = std::fs::read_to_string(scripts_dir().join("02_strided_ping_pong.expected")).unwrap();
    let output = lock_script(Path::new("-"), Some(&script));
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), expected);
}

#[test]
fn an_empty_script_prints_nothing_and_succeeds() {
    for script in ["", "\n\n", "# only a comment\n\n   \n# and another\n"] {
        let output = lock_script(Path::new("-"), Some(script));
        assert!(output.status.success(), "{script:?}: {}", text(&output.stderr));
        assert_eq!(text(&output.stdout), "", "{script:?}");
        assert_eq!(text(&output.stderr), "", "{script:?}");
    }
}

#[test]
fn a_missing_script_file_is_an_error() {
    let output = lock_script(&scripts_dir().join("no_such_script.jsonl"), None);
    assert!(!output.status.success());
    let stderr = text(&output.stderr);
    assert!(stderr.starts_with("lanefs: error: cannot open script "), "{stderr}");
    assert!(stderr.contains("no_such_script.jsonl"), "{stderr}");
}

const GOOD: &str = r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":0,"end":1048575}"#;
const GOOD_EVENT: &str =
    r#"{"event":"granted","client":"c1","lock":1,"object":0,"mode":"PW","start":0,"end":18446744073709551615}"#;

/// Each bad line stops the run with a non-zero exit and a message naming its
/// line and the problem; the events of the lines before it are printed.
#[test]
fn bad_lines_fail_with_their_line_number_and_the_problem() {
    // (the bad line, what stderr must contain after "line 2: ")
    let cases: &[(&str, &str)] = &[
        (r#"{"op":"enqueue","#, "invalid JSON at column 16: EOF while parsing a value"),
        (r#"{"op":"enqueue","client":"c1"} trailing"#, "invalid JSON at column 32: trailing characters"),
        (r#"[1,2]"#, r#"expected a JSON object such as {"op":"advance","seconds":1}, found [1,2]"#),
        (r#"{"client":"c1"}"#, r#"missing "op"; expected enqueue, cancel, advance, reconnect or config"#),
        (r#"{"op":"enqeue"}"#, r#"unknown op "enqeue"; expected enqueue, cancel, advance, reconnect or config"#),
        (r#"{"op":3}"#, r#""op" is 3, not a string"#),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":0,"end":4095,"size":1}"#,
            "enqueue: unknown field `size`, expected one of `client`, `object`",
        ),
        (r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":0}"#, "enqueue: missing field `end`"),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"RW","start":0,"end":4095}"#,
            r#"mode "RW": use PR, PW or GROUP"#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"GROUP","start":0,"end":"EOF"}"#,
            r#"GROUP mode needs "gid""#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","gid":7,"start":0,"end":4095}"#,
            r#""gid" is only for GROUP locks: drop it or use "mode":"GROUP""#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"GROUP","gid":7,"start":0,"end":4095}"#,
            r#"a GROUP lock covers the whole object: use "start":0,"end":"EOF""#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":8192,"end":4095}"#,
            r#""start" 8192 is greater than "end" 4095"#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":100,"end":4095}"#,
            r#""start" 100 is not on a 4096-byte page boundary: locks cover whole pages; use 0"#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":0,"end":5000}"#,
            r#""end" 5000 is not the last byte of a 4096-byte page: locks cover whole pages; use 8191"#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":0,"end":18446744073709551614}"#,
            r#""end" 18446744073709551614 is past the largest file offset 9223372036854775807"#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":-4096,"end":4095}"#,
            r#"enqueue: invalid type: integer `-4096`, expected "start" as a byte offset"#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":0,"end":"eof"}"#,
            r#"enqueue: invalid value: string "eof", expected "end" as an inclusive byte offset"#,
        ),
        (
            r#"{"op":"enqueue","client":"c1","object":0,"mode":"PW","start":0,"end":4095,"speculative":"yes"}"#,
            r#"expected "speculative" as true or false"#,
        ),
        (
            r#"{"op":"cancel","client":"c9","lock":1}"#,
            r#"cancel by client "c9", which has not enqueued anything (clients so far: c1)"#,
        ),
        (r#"{"op":"cancel","client":"c1","lock":7}"#, r#""c1" holds no lock 7 (granted or waiting locks of "c1": 1)"#),
        (r#"{"op":"reconnect","client":"c2"}"#, r#"reconnect by client "c2", which has not enqueued anything"#),
        (
            r#"{"op":"advance","seconds":-1}"#,
            r#"advance: invalid type: integer `-1`, expected "seconds" as a number of seconds, 0 or more"#,
        ),
        (r#"{"op":"advance","seconds":1,"until":2}"#, "advance: unknown field `until`, expected `seconds`"),
        (r#"{"op":"config","callback_timeout_s":5}"#, "config must come before any other op"),
    ];
    for (bad, message) in cases {
        let script = format!("{GOOD}\n{bad}\n{GOOD}\n");
        let output = lock_script(Path::new("-"), Some(&script));
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{bad}: succeeded");
        let prefix = "lanefs: error: line 2: ";
        assert!(stderr.starts_with(prefix) && stderr[prefix.len()..].contains(message), "{bad}: stderr {stderr:?}");
        assert_eq!(text(&output.stdout), format!("{GOOD_EVENT}\n"), "{bad}: events before the bad line");
    }
}

#[test]
fn line_numbers_count_comments_and_blank_lines() {
    let script = format!("# a comment\n\n{GOOD}\n   \n{{\"op\":\"advance\"}}\n");
    let output = lock_script(Path::new("-"), Some(&script));
    assert!(!output.status.success());
    assert_eq!(text(&output.stderr), "lanefs: error: line 5: advance: missing field `seconds`\n");
}

#[test]
fn a_cancel_must_name_the_locks_owner() {
    let script =
        format!("{GOOD}\n{}\n", r#"{"op":"enqueue","client":"c2","object":1,"mode":"PR","start":0,"end":4095}"#)
            + r#"{"op":"cancel","client":"c2","lock":1}"#;
    let output = lock_script(Path::new("-"), Some(&script));
    assert!(!output.status.success());
    assert_eq!(text(&output.stderr), "lanefs: error: line 3: lock 1 belongs to \"c1\", not \"c2\"\n");
}

#[test]
fn config_is_refused_twice_and_with_a_zero_timeout() {
    let twice = "{\"op\":\"config\",\"callback_timeout_s\":5}\n{\"op\":\"config\",\"callback_timeout_s\":6}\n";
    let output = lock_script(Path::new("-"), Some(twice));
    assert!(!output.status.success());
    assert_eq!(text(&output.stderr), "lanefs: error: line 2: config given twice: merge the two lines\n");
    let zero = "{\"op\":\"config\",\"callback_timeout_s\":0}\n";
    let output = lock_script(Path::new("-"), Some(zero));
    assert!(!output.status.success());
    assert!(text(&output.stderr).starts_with("lanefs: error: line 1: \"callback_timeout_s\" must be greater than 0"));
}
