//! OST pools' names and what the pool requests carry: the values that
//! cross the wire (the MDS keeps the pools themselves, `lanefs_mds::pools`).
//!
//! A pool is a name ([`PoolName`]: 1 to [`POOL_NAME_MAX`] of `[A-Za-z0-9_-]`,
//! Lustre's `LOV_MAXPOOLNAME` and its characters) and a set of OST indices;
//! a name is checked as Lustre's `lctl pool_new` checks it, wherever it is
//! read (a command line, the wire).

use crate::MdsError;
use serde::{Deserialize, Serialize};

/// The longest pool name (Lustre's `LOV_MAXPOOLNAME`).
pub const POOL_NAME_MAX: usize = 15;

/// The most pools one file system may have: bounds the pool tables and a
/// `pool_list` reply.
pub const POOLS_MAX: usize = 1024;

/// The file system's name in Lustre's spellings: pools are `lanefs.NAME`,
/// OSTs `lanefs-OST0000_UUID`.
pub const FSNAME: &str = "lanefs";

/// Names Lustre keeps for itself (`lov_pool_is_reserved`): `ignore` asks
/// for no pool, `inherit` and `none` for the inherited one.
pub const RESERVED_POOL_NAMES: [&str; 3] = ["ignore", "inherit", "none"];

/// A valid pool name, without the file system's (`fast`, not
/// `lanefs.fast`). Kept inline so that the stripe values that carry one
/// stay `Copy`; on the wire it is a string, checked when it is read.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PoolName {
    len: u8,
    bytes: [u8; POOL_NAME_MAX],
}

impl PoolName {
    /// `name` or `lanefs.name`, checked as Lustre's `lctl pool_new` checks it.
    pub fn parse(text: &str) -> Result<PoolName, MdsError> {
        let bad = |reason: String| MdsError::InvalidPool { reason };
        let name = match text.split_once('.') {
            Some((fsname, name)) if fsname == FSNAME => name,
            Some((fsname, _)) => {
                return Err(bad(format!(
                "pool {text:?} names the file system {fsname:?}: this one is {FSNAME:?} (give {FSNAME}.POOL or POOL)"
            )))
            }
            None => text,
        };
        if name.is_empty() || name.len() > POOL_NAME_MAX {
            return Err(bad(format!("pool name {name:?} is not 1 to {POOL_NAME_MAX} characters long")));
        }
        if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(bad(format!(
                "pool name {name:?}: can contain only alphanumeric characters, underscores, and dashes"
            )));
        }
        if RESERVED_POOL_NAMES.contains(&name) {
            return Err(bad(format!("pool name cannot be {name:?}: it is reserved (ignore, inherit, none)")));
        }
        let mut bytes = [0; POOL_NAME_MAX];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(PoolName { len: name.len() as u8, bytes })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).expect("checked ASCII")
    }

    /// `lanefs.NAME`, as Lustre prints a pool.
    pub fn full(&self) -> String {
        format!("{FSNAME}.{}", self.as_str())
    }
}

impl std::fmt::Display for PoolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for PoolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl TryFrom<String> for PoolName {
    type Error = MdsError;
    fn try_from(text: String) -> Result<PoolName, MdsError> {
        PoolName::parse(&text)
    }
}

impl From<PoolName> for String {
    fn from(name: PoolName) -> String {
        name.as_str().to_string()
    }
}

/// `lanefs-OST0001_UUID`, as Lustre names an OST in a pool's listing.
pub fn ost_uuid(ost: u32) -> String {
    format!("{FSNAME}-OST{ost:04x}_UUID")
}

/// One pool as `pool_list` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolInfo {
    pub name: PoolName,
    /// The member OSTs, in index order.
    pub osts: Vec<u32>,
}

/// What a pool request changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolChange {
    /// `pool_new`: a new empty pool.
    New,
    /// `pool_destroy`: an empty pool goes.
    Destroy,
    /// `pool_add`: these OSTs join (none may be a member already).
    Add(Vec<u32>),
    /// `pool_remove`: these members leave (files keep their objects).
    Remove(Vec<u32>),
}
