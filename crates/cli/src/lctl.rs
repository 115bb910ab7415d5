//! `lanefs lctl`: Lustre's lctl for a lanefs cluster. This file parses the
//! verbs and prints what the holders of the parameters answer; the
//! parameter trees, matching and statistics files are lanefs-net's
//! (`params`, `control`).
//!
//! Holders: every live client on this host (mounts, IOR ranks), found by
//! their control sockets in `control::run_dir()`, for `osc.*`, `llite.*`
//! and their `ldlm.namespaces.*`; and, when the MDS is given (--mds or
//! LANEFS_MDS), the OSTs, asked through it as `lanefs df` asks them, for
//! `obdfilter.*` (also `ofd.*` to set_param) and their server namespaces.

use crate::fs::{FsCommand, Target};
use crate::out::{self, outln};
use anyhow::Result;
use clap::{Args, Subcommand};
use lanefs_client::control::{self, ControlError, Reply, Request};
use lanefs_net::params::{self, Node, Selection};
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Parameters (INSTANCE: a client's ffff... id; N: an OST index in hex):
  osc.lanefs-OSTNNNN-osc-INSTANCE.{max_dirty_mb,max_rpcs_in_flight,max_pages_per_rpc,
      cur_dirty_bytes,rpc_stats,stats,import}
  mdc.lanefs-MDT0000-mdc-INSTANCE.stats
  llite.lanefs-INSTANCE.{max_cached_mb,stats}
  version, health_check (this node's)
  ldlm.namespaces.lanefs-OSTNNNN-osc-INSTANCE.{lock_count,lock_unused_count,lru_size,
      lru_max_age,pool.granted,stats}
  obdfilter.lanefs-OSTNNNN.{stats,brw_stats,sync_lock_cancel,num_exports,rpcs_in_flight,
      kbytestotal,kbytesfree,...}
  ldlm.namespaces.filter-lanefs-OSTNNNN_UUID.{lock_count,pool.granted,stats}

Clients are the mounts and IOR ranks of this host that listen in
$LANEFS_RUN_DIR (default /run/lanefs/clients for root, else
$XDG_RUNTIME_DIR/lanefs/clients); OSTs are asked through the MDS (--mds or
LANEFS_MDS).

set_param -P keeps a client setting at the MDS (its data directory's
client_params, as Lustre's MGS keeps it) for every client started later,
and an OST's in the OST's directory for its next start (set_param -P -d
NAME forgets one); both need the server key on TCP (the servers' own
user or root on Unix sockets).

Where lanefs departs from Lustre: one lctl sees every client of its host
and every OST of the file system (Lustre's sees its own node's devices); a
client keeps one dirty limit, RPC limit and lock LRU for all its OSTs, so
setting one OSC's or namespace's value sets them all for that client;
writing to a stats file clears all of that client's statistics;
lru_size=0 (dynamic LRU) is refused; parameters lanefs does not have
(grants, checksums, client readahead, statahead, pings) are refused with
the reason; `import` shows the session's state, server address and RPCs
in flight (no connect flags, NIDs or time estimates); `dl -t` shows the
address a client device connects to where Lustre shows a NID; stats files count requests
([reqs]) where Lustre times them ([usecs]), and leave out what lanefs
does not measure (RPC latencies, pool rates, disk-side brw_stats).";

/// Lustre's lctl: parameters of live clients and OSTs, and devices.
#[derive(Args, Debug)]
#[command(after_long_help = AFTER_HELP)]
pub struct LctlArgs {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Subcommand, Debug)]
enum Verb {
    /// Print parameters' values: `name=value`, or `name=` and the lines of
    /// a multi-line file (statistics).
    #[command(name = "get_param")]
    GetParam {
        /// Values only.
        #[arg(short = 'n')]
        no_name: bool,
        /// Names only.
        #[arg(short = 'N')]
        only_name: bool,
        /// Everything under matching directories too.
        #[arg(short = 'R')]
        recursive: bool,
        /// Parameter names or patterns (`*`, `?`, `[...]`, `{a,b}`).
        #[arg(required = true, value_name = "PARAM")]
        params: Vec<String>,
    },
    /// Set parameters (`name=value`); writing to a stats file clears it.
    #[command(name = "set_param")]
    SetParam {
        /// Keep the setting: a client parameter at the MDS, for every
        /// client that starts later (as Lustre's MGS keeps it), an OST's in
        /// the OST's directory, for its next start; and set it now.
        #[arg(short = 'P')]
        permanent: bool,
        /// With -P: forget the kept settings of the PARAMs named (given
        /// as they were set; no value), leaving the values now.
        #[arg(short = 'd', requires = "permanent")]
        delete: bool,
        /// Print nothing for what was set.
        #[arg(short = 'n')]
        no_name: bool,
        #[arg(required = true, value_name = "PARAM=VALUE")]
        settings: Vec<String>,
    },
    /// List parameter names (and directories) that match.
    #[command(name = "list_param")]
    ListParam {
        /// Everything under matching directories too.
        #[arg(short = 'R')]
        recursive: bool,
        /// Mark directories with a trailing `/`.
        #[arg(short = 'F')]
        classify: bool,
        #[arg(required = true, value_name = "PARAM")]
        patterns: Vec<String>,
    },
    /// List devices, as `lctl dl`: index, status, type, name, uuid, references.
    Dl {
        /// Add where each client device connects (its server's address).
        #[arg(short = 't')]
        targets: bool,
    },
    /// lctl's pool commands, lanefs's own (`lanefs pool_new` ...).
    #[command(flatten)]
    Pool(crate::pool::PoolCommand),
}

/// An error already printed in lctl's own words: the command only fails.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("lctl failed")
    }
}

impl std::error::Error for Reported {}

pub fn run(args: LctlArgs, target: &Target) -> Result<()> {
    // lctl's pool commands are lanefs's own, which talk to the MDS.
    if let Verb::Pool(command) = args.verb {
        return crate::fs::run(FsCommand::Pool(command), target);
    }
    let holders = Holders::find(target);
    let ok = match args.verb {
        Verb::GetParam { no_name, only_name, recursive, params } => {
            get_param(&holders, &params, recursive, Show { name: !no_name, value: !only_name })?
        }
        Verb::ListParam { recursive, classify, patterns } => list_param(&holders, &patterns, recursive, classify)?,
        Verb::SetParam { permanent, delete, no_name, settings } => {
            let mode = if delete {
                Mode::Forget
            } else if permanent {
                Mode::Keep
            } else {
                Mode::Now
            };
            set_param(&holders, &settings, !no_name, mode)?
        }
        Verb::Dl { targets } => dl(&holders, targets)?,
        Verb::Pool(_) => unreachable!("pool commands are run above"),
    };
    if ok {
        Ok(())
    } else {
        Err(Reported.into())
    }
}

/// Who holds parameters: the live clients' sockets, and the OSTs' trees.
struct Holders {
    clients: Vec<PathBuf>,
    servers: Option<lanefs_client::Client>,
    ost_stats: Vec<lanefs_proto::wire::OstStats>,
    /// Clients found stale or failing during this command: not asked again.
    gone: std::cell::RefCell<Vec<PathBuf>>,
}

impl Holders {
    fn find(target: &Target) -> Holders {
        let clients = control::client_sockets(&control::run_dir());
        let (servers, ost_stats) = match &target.mds {
            // Without the servers, the clients' parameters are still there.
            Some(mds) => match target.connect_once(mds) {
                Ok(client) => {
                    let stats = client.ost_stats().unwrap_or_else(|e| {
                        eprintln!("warning: the OSTs' parameters are left out: {e}");
                        Vec::new()
                    });
                    (Some(client), stats)
                }
                Err(e) => {
                    eprintln!("warning: the servers' parameters are left out: {e:#}");
                    (None, Vec::new())
                }
            },
            None => (None, Vec::new()),
        };
        Holders { clients, servers, ost_stats, gone: Default::default() }
    }

    fn server_tree(&self) -> params::Tree {
        params::server::tree(&self.ost_stats, std::time::SystemTime::now())
    }

    /// Ask every live client; a stale one is skipped, a failing one
    /// reported and left out for the rest of the command (a wedged client
    /// costs one timeout, not one per pattern).
    fn ask_clients(&self, request: &Request) -> Vec<Reply> {
        let mut replies = Vec::new();
        let mut gone = self.gone.borrow_mut();
        for path in &self.clients {
            if gone.contains(path) {
                continue;
            }
            match control::ask(path, request) {
                Ok(Reply::Error(e)) => eprintln!("error: {}: {e}", path.display()),
                Ok(reply) => replies.push(reply),
                Err(ControlError::Stale(_)) => {
                    gone.push(path.clone());
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    gone.push(path.clone());
                }
            }
        }
        replies
    }

    /// The nodes `pattern` finds, among every holder's, in name order.
    fn select(&self, pattern: &str, recursive: bool, values: bool) -> Result<Vec<Node>> {
        let selection = Selection { patterns: vec![pattern.to_string()], recursive, values };
        selection.validate().map_err(anyhow::Error::msg)?;
        let mut nodes = Vec::new();
        for reply in self.ask_clients(&Request::Get(selection.clone())) {
            if let Reply::Nodes(found) = reply {
                nodes.extend(found);
            }
        }
        nodes.extend(self.server_tree().select(&selection));
        nodes.extend(self.node_tree(pattern).select(&selection));
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes.dedup_by(|a, b| a.name == b.name); // a directory both sides have
        Ok(nodes)
    }

    /// The node's own files, which lctl answers: `version`, and
    /// `health_check` when the pattern reaches it (it asks every holder).
    fn node_tree(&self, pattern: &str) -> params::Tree {
        let mut tree = params::Tree::default();
        tree.insert("version".into(), format!("lanefs {}", env!("CARGO_PKG_VERSION")));
        if params::matches(pattern, "health_check") {
            tree.insert("health_check".into(), self.health());
        }
        tree
    }

    /// Lustre's `health_check`: `healthy`, or the devices that are not and
    /// `NOT HEALTHY`: a client's OSC whose session is down, an OST that
    /// does not answer through the MDS.
    fn health(&self) -> String {
        let mut sick = Vec::new();
        let selection = Selection { patterns: vec!["osc.*.import".into()], recursive: false, values: true };
        for reply in self.ask_clients(&Request::Get(selection)) {
            let Reply::Nodes(nodes) = reply else { continue };
            for node in nodes {
                let state = node.value.as_deref().unwrap_or_default();
                if state.contains("state: DISCONN") || state.contains("state: CLOSED") {
                    sick.push(node.name.trim_end_matches(".import").trim_start_matches("osc.").to_string());
                }
            }
        }
        if let Some(client) = &self.servers {
            let count = client.cluster().ost_count;
            for ost in 0..count {
                let answered = self.ost_stats.iter().any(|s| s.ost == ost && s.space.is_some());
                if !answered {
                    sick.push(params::server::obdfilter_name(ost));
                }
            }
        }
        if sick.is_empty() {
            return "healthy".into();
        }
        let mut text: String = sick.iter().map(|name| format!("device {name} reported unhealthy\n")).collect();
        text += "NOT HEALTHY";
        text
    }

    /// The names a hint may offer.
    fn all_names(&self) -> Vec<String> {
        let nodes = self.select("*", true, false).unwrap_or_default();
        nodes.into_iter().filter(|n| n.value.is_some()).map(|n| n.name).collect()
    }

    /// lctl's error for a pattern nothing matches, with a hint.
    fn no_such(&self, verb: &str, pattern: &str) {
        // lctl shows the pattern as the path it globbed ('.' as '/').
        eprintln!("error: {verb}: param_path '{}': No such file or directory", pattern.replace('.', "/"));
        let last = pattern.rsplit('.').next().unwrap_or(pattern);
        if let Some((_, reason)) = LACKED.iter().find(|(names, _)| names.contains(&last)) {
            eprintln!("hint: lanefs has no {last}: {reason}");
            return;
        }
        let names = self.all_names();
        match params::closest(pattern, names.iter()) {
            Some(name) => eprintln!("hint: a parameter that exists: {name}"),
            None if self.servers.is_none() && self.clients.len() == self.gone.borrow().len() => eprintln!(
                "hint: no client listens in {} and no MDS is given (--mds or LANEFS_MDS) for the OSTs",
                control::run_dir().display()
            ),
            None => {}
        }
    }
}

/// Lustre parameters lanefs does not have, and why.
const LACKED: &[(&[&str], &str)] = &[
    (
        &["cur_grant_bytes", "cur_lost_grant_bytes", "grant_shrink", "grant_shrink_interval"],
        "it grants no space to clients: an OST out of space fails the write itself, and the \
         error reaches the program at fsync or close",
    ),
    (
        &["checksums", "checksum_type", "checksum_dump"],
        "it checksums nothing itself: TLS on TCP, or the kernel on Unix sockets, keeps the bytes whole",
    ),
    (
        &["max_read_ahead_mb", "max_read_ahead_per_file_mb", "max_read_ahead_whole_mb", "read_ahead_stats"],
        "a client reads ahead nothing on its own (a read fetches what it asks for); \
         lanefs ladvise -a willread asks the OSTs to read ahead",
    ),
    (&["statahead_max", "statahead_agl", "statahead_stats"], "a client does no statahead"),
    (
        &["ping", "pinger_recov", "timeouts"],
        "a client's connections are kept alive by the transport, with the timeout of --timeout",
    ),
];

#[derive(Clone, Copy)]
struct Show {
    name: bool,
    value: bool,
}

/// lctl's `print_param_internal`: `name=value`, `name=` then the lines of
/// a multi-line value, the value alone with -n, the name alone with -N.
fn format_param(name: &str, value: &str, show: Show) -> String {
    match (show.name, show.value) {
        (true, true) if value.contains('\n') => format!("{name}=\n{value}\n"),
        (true, true) => format!("{name}={value}\n"),
        (false, true) => format!("{value}\n"),
        (true, false) => format!("{name}\n"),
        (false, false) => String::new(),
    }
}

fn get_param(holders: &Holders, patterns: &[String], recursive: bool, show: Show) -> Result<bool> {
    let mut ok = true;
    for pattern in patterns {
        let nodes = holders.select(pattern, recursive, show.value)?;
        if nodes.is_empty() {
            holders.no_such("get_param", pattern);
            ok = false;
            continue;
        }
        let mut text = String::new();
        for node in &nodes {
            match &node.value {
                Some(value) => text += &format_param(&node.name, value, show),
                // -N lists the directories a pattern matches too, as lctl's.
                None if !show.value && show.name => text += &format!("{}\n", node.name),
                None => {}
            }
        }
        out::stdout_write(&text)?;
    }
    Ok(ok)
}

fn list_param(holders: &Holders, patterns: &[String], recursive: bool, classify: bool) -> Result<bool> {
    let mut ok = true;
    for pattern in patterns {
        let nodes = holders.select(pattern, recursive, false)?;
        if nodes.is_empty() {
            holders.no_such("list_param", pattern);
            ok = false;
        }
        for node in nodes {
            let mark = if classify && node.value.is_none() { "/" } else { "" };
            outln!("{}{mark}", node.name)?;
        }
    }
    Ok(ok)
}

/// What `set_param` does with a setting.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Now,
    /// `-P`.
    Keep,
    /// `-P -d`.
    Forget,
}

fn set_param(holders: &Holders, settings: &[String], show: bool, mode: Mode) -> Result<bool> {
    let mut ok = true;
    for setting in settings {
        let (pattern, value) = match (setting.split_once('='), mode) {
            (Some((pattern, value)), Mode::Now | Mode::Keep) => (pattern, Some(value)),
            (None, Mode::Forget) => (setting.as_str(), None),
            (Some((pattern, _)), Mode::Forget) => (pattern, None),
            (None, _) => {
                eprintln!("error: set_param: setting '{setting}': give PARAM=VALUE");
                ok = false;
                continue;
            }
        };
        let mut outcomes = set_servers(holders, pattern, value, mode != Mode::Now)?;
        if mode != Mode::Now && outcomes.is_empty() {
            // A client parameter: kept at the MDS for the clients to come
            // (it checks the setting), then set on the live ones too.
            let Some(mds) = &holders.servers else {
                eprintln!("error: set_param: -P {setting}: give the MDS (--mds or LANEFS_MDS), which keeps it");
                ok = false;
                continue;
            };
            if let Err(e) = mds.keep_param(pattern, value) {
                eprintln!("error: set_param: -P {setting}: {e}");
                ok = false;
                continue;
            }
        }
        let Some(value) = value else {
            // Forgotten (the values now stay); the OSTs' outcomes say how.
            ok &= report(outcomes, "", false)?;
            continue;
        };
        let request = Request::Set { pattern: pattern.to_string(), value: value.to_string() };
        for reply in holders.ask_clients(&request) {
            if let Reply::Set(found) = reply {
                outcomes.extend(found);
            }
        }
        if outcomes.is_empty() && mode == Mode::Now {
            holders.no_such("set_param", pattern);
            ok = false;
        }
        // As Lustre's, -P prints nothing for what it set.
        ok &= report(outcomes, value, show && mode == Mode::Now)?;
    }
    Ok(ok)
}

/// Print what was set (`name=value`, with `show`) and what was refused;
/// whether all was set.
fn report(outcomes: Vec<params::client::SetOutcome>, value: &str, show: bool) -> Result<bool> {
    let mut ok = true;
    for outcome in outcomes {
        match outcome.result {
            Ok(()) if show => outln!("{}={value}", outcome.name)?,
            Ok(()) => {}
            Err(e) => {
                eprintln!("error: set_param: setting {e}");
                ok = false;
            }
        }
    }
    Ok(ok)
}

/// `obdfilter.*.sync_lock_cancel` (or `ofd.*`), set on the OSTs (without
/// a value: its kept setting forgotten).
fn set_servers(
    holders: &Holders,
    pattern: &str,
    value: Option<&str>,
    permanent: bool,
) -> Result<Vec<params::client::SetOutcome>> {
    let osts: Vec<u32> = holders.ost_stats.iter().map(|s| s.ost).collect();
    let targets = params::server::sync_lock_cancel_targets(&osts, pattern);
    let outcome = |name: String, result| params::client::SetOutcome { name, result };
    let Some((_, first)) = targets.first() else { return Ok(Vec::new()) };
    let policy = match value.map(|v| params::server::sync_lock_cancel_policy(first, v)).transpose() {
        Ok(policy) => policy.map(params::server::sync_lock_cancel_name),
        Err(e) => return Ok(vec![outcome(pattern.to_string(), Err(e))]),
    };
    let client = holders.servers.as_ref().expect("OSTs are known through the MDS");
    let mut outcomes = Vec::new();
    for (ost, name) in targets {
        let result = client
            .set_ost_param(ost, "sync_lock_cancel", policy, permanent)
            .map_err(|e| format!("{name}={}: {e}", value.unwrap_or("")));
        outcomes.push(outcome(name, result));
    }
    Ok(outcomes)
}

/// `lctl dl` (obd_device_list_seq_show, lustre/obdclass/obd_sysfs.c):
/// "%3d %s %s %s %s %d": index, status, type, name, uuid, references.
/// lanefs keeps no reference counts: the last column is 1.
fn dl(holders: &Holders, targets: bool) -> Result<bool> {
    let mut devices: Vec<Device> = Vec::new();
    for reply in holders.ask_clients(&Request::Devices) {
        if let Reply::Devices { instance, uuid, ost_count, mds, osts } = reply {
            let device = |kind, name, target| Device { kind, name, uuid: uuid.clone(), target };
            devices.push(device("lov", format!("lanefs-clilov-{instance}"), None));
            devices.push(device("mdc", params::client::mdc_name(&instance), Some(mds.clone())));
            for ost in 0..ost_count {
                let oss = osts.iter().find(|(o, _)| *o == ost).map_or_else(|| "none".into(), |(_, a)| a.clone());
                devices.push(device("osc", params::client::osc_name(ost, &instance), Some(oss)));
            }
        }
    }
    for s in &holders.ost_stats {
        let name = params::server::obdfilter_name(s.ost);
        devices.push(Device { kind: "obdfilter", name: name.clone(), uuid: format!("{name}_UUID"), target: None });
    }
    out::stdout_write(&format_devices(&devices, targets))?;
    Ok(true)
}

/// One line of `lctl dl`.
struct Device {
    kind: &'static str,
    name: String,
    uuid: String,
    /// Where a client device connects (`-t` shows it; Lustre shows a NID).
    target: Option<String>,
}

fn format_devices(devices: &[Device], targets: bool) -> String {
    let line = |(i, d): (usize, &Device)| {
        let target = match (&d.target, targets) {
            (Some(target), true) => format!(" {target}"),
            _ => String::new(),
        };
        format!("{i:3} UP {} {} {} 1{target}\n", d.kind, d.name, d.uuid)
    };
    devices.iter().enumerate().map(line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lctl's `print_param_internal` (lustre/utils/lustre_param.c): a
    /// one-line value as `name=value`; a multi-line one on the lines after
    /// `name=`; `-n` the value alone; `-N` the name alone.
    #[test]
    fn params_print_as_lctl_prints_them() {
        let all = Show { name: true, value: true };
        assert_eq!(format_param("osc.a.max_dirty_mb", "32", all), "osc.a.max_dirty_mb=32\n");
        assert_eq!(format_param("osc.a.stats", "x\ny", all), "osc.a.stats=\nx\ny\n");
        assert_eq!(format_param("osc.a.max_dirty_mb", "32", Show { name: false, value: true }), "32\n");
        assert_eq!(format_param("osc.a.max_dirty_mb", "", Show { name: true, value: false }), "osc.a.max_dirty_mb\n");
    }

    /// `obd_device_list_seq_show` (lustre/obdclass/obd_sysfs.c):
    /// "%3d %s %s %s %s %d\n".
    #[test]
    fn devices_print_as_lctl_dl() {
        let devices = [
            Device {
                kind: "osc",
                name: "lanefs-OST0000-osc-ffff00000000002a".into(),
                uuid: "000000000000002a".into(),
                target: Some("unix:/run/oss.sock".into()),
            },
            Device {
                kind: "obdfilter",
                name: "lanefs-OST0000".into(),
                uuid: "lanefs-OST0000_UUID".into(),
                target: None,
            },
        ];
        assert_eq!(
            format_devices(&devices, false),
            "  0 UP osc lanefs-OST0000-osc-ffff00000000002a 000000000000002a 1\n\
             \x20 1 UP obdfilter lanefs-OST0000 lanefs-OST0000_UUID 1\n"
        );
        // -t: where a client device connects, last.
        assert!(format_devices(&devices, true)
            .starts_with("  0 UP osc lanefs-OST0000-osc-ffff00000000002a 000000000000002a 1 unix:/run/oss.sock\n"));
    }
}
