//! Shell completions (`lanefs completions SHELL`) and man pages
//! (`lanefs man DIR`), made from the clap definitions that parse the
//! command line, so that they list what the command takes.
//!
//! Two commands parse their arguments by hand: `lanefs ior` (IOR's
//! options) and `lanefs sim` (`ior` or `presets`, then the simulator's and
//! IOR's options). Both show here as well: `sim`'s `ior` and `presets` as
//! subcommands, and the options of both in their man pages as the commands'
//! own `-h` prints them.

use anyhow::{Context, Result};
use clap::{Arg, Command};
use clap_complete::Shell;
use clap_mangen::roff::{roman, Roff};
use clap_mangen::Man;
use std::io::{self, Write};
use std::path::Path;

/// The definitions completions and man pages show: `cli`'s, with `lanefs
/// sim`'s subcommands, which its own parser reads.
fn documented(cli: Command) -> Command {
    let trailing =
        |help: &'static str| Arg::new("args").help(help).num_args(0..).trailing_var_arg(true).allow_hyphen_values(true);
    cli.mut_subcommand("sim", |sim| {
        sim.args_conflicts_with_subcommands(true)
            .subcommand(
                Command::new("ior")
                    .about("Run IOR on a modelled cluster: lanefs sim ior --cluster PRESET_OR_FILE [IOR options]")
                    .disable_help_flag(true)
                    .arg(trailing("IOR's options and the simulator's, in any order")),
            )
            .subcommand(Command::new("presets").about("List the shipped cluster descriptions, or print one (NAME)"))
    })
}

/// What completion offers besides [`documented`]: IOR's options after
/// `lanefs ior` and `lanefs sim ior` (from IOR's own `-h`), and the
/// shipped cluster names after `--cluster` and `lanefs sim presets`.
fn completable(cli: Command) -> Command {
    let presets: Vec<&'static str> = lanefs_sim::config::presets().iter().map(|(name, _)| *name).collect();
    let ior_options = ior_option_args();
    let cluster = Arg::new("cluster")
        .long("cluster")
        .help("A shipped cluster (lanefs sim presets) or a TOML file")
        .value_parser(clap::builder::PossibleValuesParser::new(presets.clone()));
    documented(cli).mut_subcommand("ior", |ior| ior.args(ior_options.clone())).mut_subcommand("sim", |sim| {
        sim.mut_subcommand("ior", |ior| ior.arg(cluster).args(ior_options.clone())).mut_subcommand("presets", |p| {
            p.arg(Arg::new("name").value_parser(clap::builder::PossibleValuesParser::new(presets.clone())))
        })
    })
}

/// IOR's options as `lanefs ior -h` lists them (`-a, --api=S`,
/// `--dryRun`, `-O key=val`, `--lanefs.lock-mode=V`), for completion only.
fn ior_option_args() -> Vec<Arg> {
    // clap keeps names as `&'static str`: the text lives as long as the
    // one command that prints completions.
    let usage: &'static str = Box::leak(crate::ior::usage().into_boxed_str());
    let mut args: Vec<Arg> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for line in usage.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        let second = words.next().unwrap_or_default();
        let short_of =
            |word: &'static str| (word.len() == 2 && word.starts_with('-') && word != "--").then(|| &word[1..]);
        let (short, long) = match (first.strip_prefix("--"), first.strip_suffix(',').and_then(short_of)) {
            (Some(long), _) => (None, Some(long)),
            (None, Some(short)) => (Some(short), second.strip_prefix("--")),
            (None, None) => match short_of(first) {
                Some(short) => (Some(short), None),
                None => continue,
            },
        };
        let takes_value =
            long.is_some_and(|l| l.contains('=')) || (long.is_none() && short.is_some() && !second.is_empty());
        let long = long.map(|l| l.split('=').next().unwrap_or(l));
        let Some(id) = long.or(short) else { continue };
        let Some(short_char) = short.map(|s| s.chars().next().expect("one letter")).or(Some('\0')) else { continue };
        if !seen.insert(id) || (short.is_some() && !short_char.is_ascii_alphanumeric()) {
            continue;
        }
        let mut arg = Arg::new(id).num_args(usize::from(takes_value));
        if let Some(long) = long {
            arg = arg.long(long);
        }
        if short.is_some() {
            arg = arg.short(short_char);
        }
        if !takes_value {
            arg = arg.action(clap::ArgAction::SetTrue);
        }
        args.push(arg);
    }
    args
}

/// `script` without the words that offer a `hidden` command (a rank's
/// process, a refusal by name), which clap_complete's generators list all
/// the same: bash's word lists, zsh's, fish's, elvish's and PowerShell's
/// candidate lines.
fn without_hidden(script: &str, hidden: &[String]) -> String {
    let mut out = String::with_capacity(script.len());
    for line in script.lines() {
        let offers = hidden.iter().any(|h| {
            line.contains(&format!("'{h}:"))
                || line.contains(&format!("-a \"{h}\""))
                || line.contains(&format!("cand {h} "))
                || line.contains(&format!("::new('{h}',"))
        });
        if offers {
            continue;
        }
        let mut line = line.to_string();
        if line.trim_start().starts_with("opts=\"") {
            for h in hidden {
                line = line.replace(&format!(" {h} "), " ");
            }
        }
        out += &line;
        out.push('\n');
    }
    out
}

/// Print the completion script for `shell` to stdout.
pub fn completions(cli: Command, shell: Shell) -> Result<()> {
    // Made in memory first: the generators panic on a failed write, and a
    // closed stdout is no reason to.
    let hidden: Vec<String> =
        cli.get_subcommands().filter(|s| s.is_hide_set()).map(|s| s.get_name().to_string()).collect();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut completable(cli), "lanefs", &mut script);
    io::stdout().write_all(without_hidden(&String::from_utf8_lossy(&script), &hidden).as_bytes())?;
    Ok(())
}

/// Write `lanefs.1` and a page for each command (`lanefs-sim-ior.1`, ...)
/// into `dir`, made if missing; with `-`, print `lanefs.1` to stdout.
/// Hidden commands (a rank's process) get no page.
pub fn man(cli: Command, dir: &Path) -> Result<()> {
    let mut cli = documented(cli).disable_help_subcommand(true);
    cli.build();
    if dir == Path::new("-") {
        let mut page = Vec::new();
        render(&cli, &[], &mut page)?;
        io::stdout().write_all(&page)?;
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make the directory {}", dir.display()))?;
    write_pages(&cli, &mut Vec::new(), dir)
}

fn write_pages(cmd: &Command, path: &mut Vec<String>, dir: &Path) -> Result<()> {
    let mut page = Vec::new();
    render(cmd, path, &mut page)?;
    let file = dir.join(Man::new(cmd.clone()).get_filename());
    std::fs::write(&file, page).with_context(|| format!("cannot write {}", file.display()))?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        path.push(sub.get_name().to_string());
        write_pages(sub, path, dir)?;
        path.pop();
    }
    Ok(())
}

/// The options a hand-parsed command takes, as its `-h` prints them: a
/// section of the page for `path` (the command's names under `lanefs`).
fn hand_parsed(path: &[String]) -> Option<(&'static str, String)> {
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    match path.as_slice() {
        ["ior"] => Some(("IOR OPTIONS", crate::ior::usage())),
        ["sim", "ior"] => Some(("SIMULATOR OPTIONS", crate::sim::USAGE.to_string())),
        _ => None,
    }
}

/// One page: clap_mangen's sections, with a hand-parsed command's options
/// after the options clap knows of, kept as printed (no filling).
fn render(cmd: &Command, path: &[String], w: &mut dyn Write) -> io::Result<()> {
    let man = Man::new(cmd.clone()).source(format!("lanefs {}", env!("CARGO_PKG_VERSION"))).manual("lanefs");
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if let Some((title, text)) = hand_parsed(path) {
        let mut roff = Roff::new();
        roff.control("SH", [title]).control("nf", []);
        for line in text.lines() {
            roff.text([roman(line)]);
        }
        roff.control("fi", []);
        roff.to_writer(w)?;
    }
    if cmd.get_subcommands().any(|s| !s.is_hide_set()) {
        man.render_subcommands_section(w)?;
    }
    if cmd.get_after_long_help().or_else(|| cmd.get_after_help()).is_some() {
        man.render_extra_section(w)?;
    }
    if cmd.get_version().or_else(|| cmd.get_long_version()).is_some() {
        man.render_version_section(w)?;
    }
    Ok(())
}
