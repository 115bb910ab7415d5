//! Options the CLI takes out of a command line it passes on (IOR's, for
//! `lanefs ior` and `lanefs sim ior`) before handing the rest over.

use anyhow::{bail, Result};

/// Take `NAME VALUE` or `NAME=VALUE` out of `args`: the last one given, all
/// of them removed. `example` is what a value looks like, for the error
/// when one is missing.
pub fn take(args: &mut Vec<String>, name: &str, example: &str) -> Result<Option<String>> {
    let mut found = None;
    while let Some(value) = take_one(args, name, example)? {
        found = Some(value);
    }
    Ok(found)
}

/// Take the first `NAME VALUE` or `NAME=VALUE` out of `args` (for options
/// that may be given several times).
pub fn take_one(args: &mut Vec<String>, name: &str, example: &str) -> Result<Option<String>> {
    let eq = format!("{name}=");
    for i in 0..args.len() {
        if args[i] == name {
            if i + 1 >= args.len() {
                bail!("{name} needs a value, e.g. {name} {example}");
            }
            let value = args.remove(i + 1);
            args.remove(i);
            return Ok(Some(value));
        }
        if let Some(v) = args[i].strip_prefix(&eq) {
            let value = v.to_string();
            args.remove(i);
            return Ok(Some(value));
        }
    }
    Ok(None)
}

/// Take every `NAME` flag out of `args`; whether there was one.
pub fn take_flag(args: &mut Vec<String>, name: &str) -> bool {
    let before = args.len();
    args.retain(|a| a != name);
    args.len() != before
}

/// `--timeseries FILE` and `--timeseries-interval SECONDS` (default 0.1),
/// taken out of `args`: where to write the run's time series and the
/// length of its bins, if one is asked for.
pub fn take_timeseries(args: &mut Vec<String>) -> Result<Option<(std::path::PathBuf, f64)>> {
    let path = take(args, "--timeseries", "bw.jsonl")?.map(std::path::PathBuf::from);
    let interval = match take(args, "--timeseries-interval", "0.1")? {
        Some(s) => {
            let v: f64 = s.parse().map_err(|_| anyhow::anyhow!("--timeseries-interval {s}: give seconds, e.g. 0.1"))?;
            if !(v.is_finite() && v >= 1e-6) {
                bail!("--timeseries-interval {s}: give a positive number of seconds, at least 0.000001");
            }
            if path.is_none() {
                bail!("--timeseries-interval {s} without --timeseries FILE: name the file to write, e.g. --timeseries bw.jsonl");
            }
            v
        }
        None => 0.1,
    };
    let Some(path) = path else { return Ok(None) };
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv")) {
        anyhow::bail!(
            "--timeseries {}: the time series is JSON Lines (docs/timeseries.md), not CSV; name it .jsonl",
            path.display()
        );
    }
    Ok(Some((path, interval)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn options_are_taken_in_both_spellings_and_the_rest_kept() {
        let mut args = line("-w --cluster a:1 -b 1m --cluster=b:2 --quiet");
        assert_eq!(take(&mut args, "--cluster", "HOST:PORT").unwrap().as_deref(), Some("b:2"));
        assert!(take_flag(&mut args, "--quiet"));
        assert_eq!(args, line("-w -b 1m"));
        let mut repeated = line("--set a=1 --set=b=2");
        assert_eq!(take_one(&mut repeated, "--set", "K=V").unwrap().as_deref(), Some("a=1"));
        assert_eq!(take_one(&mut repeated, "--set", "K=V").unwrap().as_deref(), Some("b=2"));
        let e = take(&mut line("-w --key"), "--key", "client.pem").unwrap_err().to_string();
        assert_eq!(e, "--key needs a value, e.g. --key client.pem");
    }
}
