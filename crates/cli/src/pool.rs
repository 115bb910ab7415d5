//! `lanefs pool_new`, `pool_add`, `pool_remove`, `pool_destroy` and
//! `pool_list`: Lustre's `lctl pool_*` commands (`jt_pool_cmd` in
//! `lustre/utils/obd.c`), against the MDS, which keeps the pools.
//!
//! Pools are named as lctl names them, `lanefs.NAME` (or `NAME` alone);
//! OSTs as lctl takes them (`extract_ost_list`, `get_array_idx`,
//! `check_and_complete_ostname`): `lanefs-OST0001`, `lanefs-OST0001_UUID`,
//! `OST0001`, and ranges `OST[0-3]`, `lanefs-OST[0-6/2]`, `OST[0,3]` with
//! hexadecimal indices as Lustre's; lanefs also takes a bare index (`1`,
//! decimal, as `setstripe -i` takes it). Success is told on standard error
//! as lctl tells it (`Pool lanefs.fast created`, `OST lanefs-OST0001_UUID
//! added to pool lanefs.fast`); `pool_list` prints as
//! `llapi_poollist` does (`lustre/utils/liblustreapi.c`), pools in name
//! order and members in index order where Lustre prints them in the order
//! its configuration log made them.

use anyhow::{bail, Result};
use clap::Subcommand;
use lanefs_client::Client;
use lanefs_proto::pools::{ost_uuid, FSNAME};
use lanefs_proto::{MdsReply, MdsRequest, PoolChange, PoolInfo, PoolName};

/// The pool commands, as `lanefs` and `lanefs lctl` both take them.
#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Make an empty OST pool (`lctl pool_new lanefs.NAME`; root only).
    #[command(name = "pool_new")]
    New {
        /// NAME or lanefs.NAME: up to 15 of A-Z a-z 0-9 _ -.
        pool: String,
    },
    /// Add OSTs to a pool (`lctl pool_add`; root only): lanefs-OST0001, OST0001, 1, OST[0-3], OST[0-6/2].
    #[command(name = "pool_add")]
    Add {
        pool: String,
        #[arg(required = true)]
        osts: Vec<String>,
    },
    /// Remove OSTs from a pool (`lctl pool_remove`; root only); files keep their objects.
    #[command(name = "pool_remove")]
    Remove {
        pool: String,
        #[arg(required = true)]
        osts: Vec<String>,
    },
    /// Destroy an empty pool (`lctl pool_destroy`; root only).
    #[command(name = "pool_destroy")]
    Destroy { pool: String },
    /// List the pools (`lanefs`, a path, or nothing), or one pool's OSTs (`lanefs.NAME`), as `lctl pool_list`.
    #[command(name = "pool_list")]
    List { pool: Option<String> },
}

/// Run a pool command against the MDS `cl` talks to.
pub fn run(cl: &Client, command: PoolCommand) -> Result<()> {
    match command {
        PoolCommand::New { pool } => change(cl, &pool, PoolChange::New),
        PoolCommand::Destroy { pool } => change(cl, &pool, PoolChange::Destroy),
        PoolCommand::Add { pool, osts } => change(cl, &pool, PoolChange::Add(parse_osts(&osts)?)),
        PoolCommand::Remove { pool, osts } => change(cl, &pool, PoolChange::Remove(parse_osts(&osts)?)),
        PoolCommand::List { pool } => list(cl, pool.as_deref()),
    }
}

/// A pool change: `pool_new`, `pool_destroy`, `pool_add`, `pool_remove`.
fn change(cl: &Client, pool: &str, change: PoolChange) -> Result<()> {
    let name = PoolName::parse(pool)?;
    let full = name.full();
    let told: Vec<String> = match &change {
        PoolChange::New => vec![format!("Pool {full} created")],
        PoolChange::Destroy => vec![format!("Pool {full} destroyed")],
        PoolChange::Add(osts) => {
            osts.iter().map(|&ost| format!("OST {} added to pool {full}", ost_uuid(ost))).collect()
        }
        PoolChange::Remove(osts) => {
            osts.iter().map(|&ost| format!("OST {} removed from pool {full}", ost_uuid(ost))).collect()
        }
    };
    cl.mds(MdsRequest::ChangePool { pool: name, change })?;
    for line in told {
        eprintln!("{line}");
    }
    Ok(())
}

/// `pool_list [lanefs | lanefs.POOL | PATH]`.
fn list(cl: &Client, name: Option<&str>) -> Result<()> {
    let pool = match name {
        None => None,
        Some(name) if name == FSNAME || name.starts_with('/') => None,
        Some(name) => Some(PoolName::parse(name)?),
    };
    match cl.mds(MdsRequest::ListPools { pool })? {
        MdsReply::Pools(pools) => crate::out::stdout_write(&format_pool_list(pool.is_some(), &pools))?,
        other => bail!("unexpected MDS answer {other:?}"),
    }
    Ok(())
}

/// `llapi_poollist`'s text: `Pools from lanefs:` and a `lanefs.NAME` line
/// per pool, or for one pool `Pool: lanefs.NAME` and a line per OST UUID.
fn format_pool_list(one: bool, pools: &[PoolInfo]) -> String {
    match pools {
        [pool] if one => {
            let mut out = format!("Pool: {}\n", pool.name.full());
            for &ost in &pool.osts {
                out += &format!("{}\n", ost_uuid(ost));
            }
            out
        }
        _ => {
            let mut out = format!("Pools from {FSNAME}:\n");
            for pool in pools {
                out += &format!("{}\n", pool.name.full());
            }
            out
        }
    }
}

/// OST indices from lctl's spellings of OST lists (see the module docs).
pub fn parse_osts(words: &[String]) -> Result<Vec<u32>> {
    let mut osts = Vec::new();
    for word in words {
        if let Ok(index) = word.parse::<u32>() {
            osts.push(index);
            continue;
        }
        let (head, indices, tail) = match (word.find('['), word.find(']')) {
            (Some(open), Some(close)) if open < close => {
                (&word[..open], range_indices(word, &word[open + 1..close])?, &word[close + 1..])
            }
            _ => (word.as_str(), Vec::new(), ""),
        };
        if indices.is_empty() {
            osts.push(ost_index(word, word)?);
        } else {
            for index in indices {
                osts.push(ost_index(word, &format!("{head}{index:04x}{tail}"))?);
            }
        }
    }
    Ok(osts)
}

/// `0-3`, `0-6/2`, `0,3`, `1`: the indices of a range, in hexadecimal as
/// `get_array_idx` reads them.
fn range_indices(word: &str, range: &str) -> Result<Vec<u32>> {
    let bad = || anyhow::anyhow!("{word}: wrong format for OST list: use e.g. OST[0-3], OST[0-6/2] or OST[0,3]");
    let hex = |text: &str| u32::from_str_radix(text, 16).map_err(|_| bad());
    let mut indices = Vec::new();
    for part in range.split(',') {
        let (span, step) = match part.split_once('/') {
            Some((span, step)) => (span, step.parse::<u32>().map_err(|_| bad())?),
            None => (part, 1),
        };
        let (low, high) = match span.split_once('-') {
            Some((low, high)) => (hex(low)?, hex(high)?),
            None => (hex(span)?, hex(span)?),
        };
        if high < low || step == 0 || high - low > lanefs_proto::OST_COUNT_MAX {
            return Err(bad());
        }
        indices.extend((low..=high).step_by(step as usize));
    }
    Ok(indices)
}

/// The index in `name` (`lanefs-OST000a`, `lanefs-OST000a_UUID` or
/// `OST000a`), as `check_and_complete_ostname` reads it.
fn ost_index(word: &str, name: &str) -> Result<u32> {
    let prefixed = format!("{FSNAME}-");
    let rest = match name.strip_prefix(&prefixed) {
        Some(rest) => rest,
        None if name.contains('-') => bail!("{word} does not start with fsname {FSNAME}"),
        None => name,
    };
    let Some(digits) = rest.strip_prefix("OST") else {
        bail!("{word} does not start by {FSNAME}-OST nor OST (or give the OST's index, e.g. 1)")
    };
    let digits = digits.strip_suffix("_UUID").unwrap_or(digits);
    match u32::from_str_radix(digits, 16) {
        Ok(index) if digits.len() >= 4 && digits.len() <= 8 => Ok(index),
        _ => bail!("ost's index in {word} is not an hexa number of 4 digits (e.g. OST000a for index 10)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|word| word.to_string()).collect()
    }

    #[test]
    fn osts_are_read_as_lctl_reads_them() {
        let osts = |list: &[&str]| parse_osts(&words(list)).unwrap();
        assert_eq!(osts(&["lanefs-OST0001", "OST000a", "lanefs-OST0002_UUID", "3"]), [1, 10, 2, 3]);
        assert_eq!(osts(&["lanefs-OST[0-3]"]), [0, 1, 2, 3]);
        assert_eq!(osts(&["OST[0-6/2]"]), [0, 2, 4, 6]);
        assert_eq!(osts(&["OST[0,a]_UUID"]), [0, 10]);
        let fails = |list: &[&str]| parse_osts(&words(list)).unwrap_err().to_string();
        assert!(fails(&["other-OST0001"]).contains("does not start with fsname lanefs"));
        assert!(fails(&["MDT0000"]).contains("does not start by lanefs-OST nor OST"));
        assert!(fails(&["OST1"]).contains("not an hexa number"));
        assert!(fails(&["OST[3-1]"]).contains("wrong format for OST list"));
        assert!(fails(&["OST[0-2/0]"]).contains("wrong format"));
    }

    /// `llapi_get_poollist` prints "Pools from %s:\n" then "%s.%s\n" per
    /// pool; `llapi_get_poolmembers` "Pool: %s.%s\n" then the pool's OST
    /// UUIDs, a line each (lustre/utils/liblustreapi.c).
    #[test]
    fn pool_list_prints_as_lctl_pool_list() {
        let fast = PoolInfo { name: PoolName::parse("fast").unwrap(), osts: vec![0, 2] };
        let slow = PoolInfo { name: PoolName::parse("slow").unwrap(), osts: vec![] };
        assert_eq!(format_pool_list(false, &[fast.clone(), slow]), "Pools from lanefs:\nlanefs.fast\nlanefs.slow\n");
        assert_eq!(format_pool_list(false, &[]), "Pools from lanefs:\n");
        assert_eq!(format_pool_list(true, &[fast]), "Pool: lanefs.fast\nlanefs-OST0000_UUID\nlanefs-OST0002_UUID\n");
    }
}
