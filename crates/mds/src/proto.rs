//! The MDS's requests, replies and the values inside them.
//!
//! Everything here is plain owned data with serde derives and no references,
//! so a network driver can put [`MdsRequest`] and [`MdsReply`] on the wire
//! unchanged (lanefs-net uses bincode, so no type here relies on
//! self-describing formats: no untagged or internally tagged enums, no
//! skipped fields).
//!
//! Each request has exactly one success reply, listed on its variant; any
//! request may instead get [`MdsReply::Error`].

use crate::MdsError;
use lanefs_core::layout::Layout;
use serde::{Deserialize, Serialize};

/// The default stripe count for new files when no directory sets one (Lustre's default).
pub const DEFAULT_STRIPE_COUNT: u32 = 1;

/// The default stripe size for new files when no directory sets one (Lustre's default, 1 MiB).
pub const DEFAULT_STRIPE_SIZE: u64 = 1 << 20;

/// The most OSTs one file system may have; bounds the per-OST counter table.
pub const OST_COUNT_MAX: u32 = 65536;

/// How the MDS is set up. Only `ost_count` is recorded in the database; the
/// stripe defaults apply to files created under this configuration (a
/// persistent file-system-wide default is a `SetStripe` on `/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdsConfig {
    /// OSTs `0..ost_count` hold objects. May grow between runs, never shrink.
    pub ost_count: u32,
    /// Stripe count of new files when no ancestor directory sets one.
    pub default_stripe_count: u32,
    /// Stripe size of new files when no ancestor directory sets one.
    pub default_stripe_size: u64,
}

impl MdsConfig {
    /// `ost_count` OSTs with Lustre's defaults: 1 stripe of 1 MiB.
    pub fn new(ost_count: u32) -> MdsConfig {
        MdsConfig { ost_count, default_stripe_count: DEFAULT_STRIPE_COUNT, default_stripe_size: DEFAULT_STRIPE_SIZE }
    }
}

/// A file identifier: names one inode for its whole life and is never
/// reused, also across restarts. The root directory is [`Fid::ROOT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Fid(pub u64);

impl Fid {
    pub const ROOT: Fid = Fid(1);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileKind {
    File,
    Dir,
}

/// What `Create` does when the name already exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CreateMode {
    /// `O_CREAT | O_EXCL`: fail with [`MdsError::Exists`].
    Exclusive,
    /// `O_CREAT`: open the existing file (its layout unchanged, the request's
    /// stripe settings checked but not applied, as Lustre ignores them).
    OpenOrCreate,
}

/// Striping wanted for a new file, or a directory's default for new files
/// below it (`lfs setstripe -c COUNT -S SIZE -i START_OST`). A field left
/// `None` is inherited. The Lustre spellings of "inherit" are accepted too:
/// `count: Some(0)` and `size: Some(0)` mean `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StripeSpec {
    /// Number of stripes (objects on distinct OSTs); -1 means all OSTs
    /// (up to `STRIPE_COUNT_MAX`). More than the OST count is refused.
    pub count: Option<i64>,
    /// Bytes per stripe unit: a positive multiple of 64 KiB below 4 GiB.
    pub size: Option<u64>,
    /// OST of stripe 0; -1 means the MDS chooses (round robin).
    pub start_ost: Option<i64>,
}

/// An open file: what a client needs to do I/O (the size comes from the
/// OSTs, by glimpse).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    pub fid: Fid,
    pub layout: Layout,
}

/// The attributes the MDS keeps. No size, owner or permissions: sizes live
/// on the OSTs, and lanefs has no access control.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub fid: Fid,
    pub kind: FileKind,
    /// `Some` for files, `None` for directories.
    pub layout: Option<Layout>,
    /// Wall-clock time of the last namespace change: creation, and for a
    /// directory an entry added, removed or renamed. A file's data mtime is
    /// on the OSTs.
    pub mtime_ns: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub fid: Fid,
    pub kind: FileKind,
}

/// A fully resolved default: what a new file gets for every field it does
/// not set itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeDefault {
    /// -1 means all OSTs, as stored (resolved to a number at create time).
    pub count: i64,
    pub size: u64,
    /// -1 means the MDS chooses.
    pub start_ost: i64,
}

/// Where each field of a [`StripeDefault`] came from: the path of the
/// nearest directory (the one asked about, or an ancestor) that sets it, or
/// `None` for the file-system default of [`MdsConfig`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeOrigin {
    pub count: Option<String>,
    pub size: Option<String>,
    pub start_ost: Option<String>,
}

/// The answer to `GetStripe`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeInfo {
    /// The file's layout; `None` for a directory.
    pub layout: Option<Layout>,
    /// What a new file created in the directory (for a file: in its parent
    /// directory) would get for the fields it leaves unset.
    pub default: StripeDefault,
    pub inherited_from: StripeOrigin,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statfs {
    pub ost_count: u32,
    pub file_count: u64,
    /// Includes the root directory.
    pub dir_count: u64,
}

/// One request to the MDS. Success replies are listed per variant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdsRequest {
    /// Creates a directory. -> [`MdsReply::Attr`] of the new directory.
    Mkdir { path: String },
    /// Creates a file and allocates its objects (the fields of `stripe` that
    /// are set, the rest inherited), or opens it per `mode`. -> [`MdsReply::File`].
    Create { path: String, stripe: StripeSpec, mode: CreateMode },
    /// Opens an existing file. -> [`MdsReply::File`].
    Open { path: String },
    /// -> [`MdsReply::Attr`].
    Stat { path: String },
    /// Lists a directory, sorted by name, in one reply (no paging: the
    /// reply grows with the directory). -> [`MdsReply::Entries`].
    Readdir { path: String },
    /// Removes a file. -> [`MdsReply::Unlinked`] with the layout whose
    /// objects the caller must now destroy on the OSTs.
    Unlink { path: String },
    /// Removes an empty directory. -> [`MdsReply::Ok`].
    Rmdir { path: String },
    /// POSIX `rename(2)`: replaces a file target, or an empty directory
    /// target when `from` is a directory. -> [`MdsReply::Renamed`].
    Rename { from: String, to: String },
    /// Sets a directory's default striping for new files below it (all
    /// fields `None` clears it). Refused on files: their layout is fixed at
    /// create. -> [`MdsReply::Ok`].
    SetStripe { path: String, stripe: StripeSpec },
    /// -> [`MdsReply::Stripe`].
    GetStripe { path: String },
    /// -> [`MdsReply::Statfs`].
    Statfs,
}

/// The MDS's answer to one [`MdsRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdsReply {
    Ok,
    File(FileInfo),
    Attr(Attr),
    Entries(Vec<DirEntry>),
    /// The unlinked file's layout: destroy these objects on the OSTs.
    Unlinked(Layout),
    /// The layout of a file that the rename replaced (destroy its objects on
    /// the OSTs), if it replaced one.
    Renamed {
        replaced: Option<Layout>,
    },
    Stripe(StripeInfo),
    Statfs(Statfs),
    Error(MdsError),
}
