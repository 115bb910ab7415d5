//! Runs a target on input files, outside AFL, to reproduce a crash with a
//! backtrace: `cargo afl run --release --bin replay -- ost out/ost/default/crashes/id*`.
//! With `--print` first, it prints each input as the target decodes it
//! (flags byte, then one action per line) before running it.

use lanefs_fuzz::client::ClientAction;
use lanefs_fuzz::decode_all;
use lanefs_fuzz::ost::OstAction;
use lanefs_proto::{Credentials, MdsRequest};
use std::fmt::Debug;

fn print_actions<T: Debug + serde::de::DeserializeOwned>(data: &[u8], flags: bool) {
    let body = match (flags, data.split_first()) {
        (true, Some((flags, body))) => {
            eprintln!("flags {flags:#04x}");
            body
        }
        (true, None) => return,
        (false, _) => data,
    };
    for action in decode_all::<T>(body) {
        eprintln!("  {}", shorten(format!("{action:?}")));
    }
}

/// Long payloads shortened to their first characters.
fn shorten(line: String) -> String {
    const CHARS_MAX: usize = 300;
    match line.char_indices().nth(CHARS_MAX) {
        Some((at, _)) => format!("{} ... ({} chars)", &line[..at], line.len()),
        None => line,
    }
}

/// A target's entry, and what prints an input of it.
type Target = (fn(&[u8]), fn(&[u8]));

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let print = args.next_if(|a| a == "--print").is_some();
    let target = args.next().unwrap_or_default();
    let (run, show): Target = match target.as_str() {
        "codec" => (lanefs_fuzz::codec::run, |_| {}),
        "ost" => (lanefs_fuzz::ost::run, |d| print_actions::<OstAction>(d, true)),
        "client" => (lanefs_fuzz::client::run, |d| print_actions::<ClientAction>(d, true)),
        "mds" => (lanefs_fuzz::mds::run, |d| print_actions::<(Credentials, MdsRequest)>(d, false)),
        other => {
            eprintln!("unknown target {other:?}: use [--print] codec, ost, client or mds, then input files");
            std::process::exit(2);
        }
    };
    for path in args {
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!("{path}");
        if print {
            show(&data);
        }
        run(&data);
    }
}
