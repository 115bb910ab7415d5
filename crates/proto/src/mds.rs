//! The MDS's requests, replies and the values inside them.
//!
//! Everything here is plain owned data with serde derives and no references,
//! so a network driver can put [`MdsRequest`] and [`MdsReply`] on the wire
//! unchanged (the codec, [`crate::codec`], is bincode, so no type here relies on
//! self-describing formats: no untagged or internally tagged enums, no
//! skipped fields).
//!
//! Each request has exactly one success reply, listed on its variant; any
//! request may instead get [`MdsReply::Error`].

use crate::pools::{PoolChange, PoolInfo, PoolName};
use crate::MdsError;
use lanefs_core::layout::Layout;
use serde::{Deserialize, Serialize};

/// The default stripe count for new files when no directory sets one (Lustre's default).
pub const DEFAULT_STRIPE_COUNT: u32 = 1;

/// The default stripe size for new files when no directory sets one (Lustre's default, 1 MiB).
pub const DEFAULT_STRIPE_SIZE: u64 = 1 << 20;

/// The most OSTs one file system may have; bounds the per-OST counter table.
pub const OST_COUNT_MAX: u32 = 65536;

/// The most supplementary groups a request may carry (Linux's `NGROUPS_MAX`).
pub const GROUPS_MAX: usize = 65536;

/// The most entries one `Readdir` page holds.
pub const READDIR_ENTRIES_MAX: usize = 4096;

/// The most bytes of entries one `Readdir` page holds, each entry counted as
/// its name plus [`DIR_ENTRY_OVERHEAD_BYTES`]: a page is at most about 1 MiB
/// on the wire, far below the network's frame limit (16 MiB of header).
pub const READDIR_BYTES_MAX: usize = 1 << 20;

/// What one entry costs in a page besides its name: its encoded fid, kind,
/// owner, group and permissions, rounded up.
pub const DIR_ENTRY_OVERHEAD_BYTES: usize = 64;

/// The permission bits of a mode: `mode & 07777` (setuid, setgid, sticky,
/// then rwx for owner, group and others).
pub const PERMISSION_BITS: u32 = 0o7777;

/// The longest symbolic link target, in bytes (Linux's `PATH_MAX` less its
/// terminating zero).
pub const SYMLINK_TARGET_MAX: usize = 4095;

/// The most hard links a file may have (ext4's limit).
pub const LINKS_MAX: u64 = 65_000;

/// How the MDS is set up. Only `ost_count` is recorded in the database; the
/// stripe defaults apply to files created under this configuration (a
/// persistent file-system-wide default is a `SetStripe` on `/`), and
/// `root_owner` only to a database created under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdsConfig {
    /// OSTs `0..ost_count` hold objects. May grow between runs, never shrink.
    pub ost_count: u32,
    /// Stripe count of new files when no ancestor directory sets one.
    pub default_stripe_count: u32,
    /// Stripe size of new files when no ancestor directory sets one.
    pub default_stripe_size: u64,
    /// Who owns the root directory of a new file system (mode 0755): the
    /// daemons give the user who runs them.
    pub root_owner: Owner,
    /// Lustre's `root_squash`: requests from uid 0 are served as this user
    /// and group, without root's bypass of permission checks. Off by
    /// default, as in Lustre.
    pub root_squash: Option<Owner>,
}

impl MdsConfig {
    /// `ost_count` OSTs with Lustre's defaults: 1 stripe of 1 MiB, no root
    /// squash; the root directory of a new database owned by root.
    pub fn new(ost_count: u32) -> MdsConfig {
        MdsConfig {
            ost_count,
            default_stripe_count: DEFAULT_STRIPE_COUNT,
            default_stripe_size: DEFAULT_STRIPE_SIZE,
            root_owner: Owner::ROOT,
            root_squash: None,
        }
    }
}

/// A user and group id pair: an inode's owner, or a squash target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Owner {
    pub const ROOT: Owner = Owner { uid: 0, gid: 0 };
}

/// Who asks: the effective uid and gid and the supplementary groups of the
/// calling process, as its client node reports them. Every namespace
/// request carries them. This crate believes them, as Lustre's MDS
/// believes what its client nodes report; who may report what is the MDS
/// daemon's to decide before a request reaches it (`lanefs_net::auth`: a
/// node reports any uid, a client key's root is squashed, a local user
/// that is no node only ever reports itself). `root_squash`
/// ([`MdsConfig::root_squash`]) takes root's privileges from every client
/// alike; Lustre's `nosquash_nids` (clients exempt from the squash) has no
/// counterpart (an admin key is exempt from the client keys' own squash).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (`getgroups`), at most [`GROUPS_MAX`].
    pub groups: Vec<u32>,
}

impl Credentials {
    /// uid 0, gid 0: root, whom permission checks do not stop (unless squashed).
    pub const ROOT: Credentials = Credentials { uid: 0, gid: 0, groups: Vec::new() };

    /// A user with no supplementary groups.
    pub fn user(uid: u32, gid: u32) -> Credentials {
        Credentials { uid, gid, groups: Vec::new() }
    }

    /// The same user with these supplementary groups.
    pub fn with_groups(self, groups: Vec<u32>) -> Credentials {
        Credentials { groups, ..self }
    }
}

/// What an open wants to do with the file (`O_RDONLY`, `O_WRONLY`,
/// `O_RDWR`): the permission it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

/// A file identifier: names one inode for its whole life and is never
/// reused, also across restarts. The root directory is [`Fid::ROOT`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Fid(pub u64);

impl Fid {
    pub const ROOT: Fid = Fid(1);
}

/// What an inode is. Files have objects on the OSTs; every other kind
/// lives at the MDS alone. A named pipe, a socket or a device is an inode
/// with a name and a mode, as on Lustre's MDT: the kernel of the node that
/// opens it serves its data (a pipe joins processes of one mount, a device
/// is that node's own), never lanefs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// `S_IFIFO`: a named pipe (`mkfifo`).
    Fifo,
    /// `S_IFSOCK`: a Unix socket's name (`bind`).
    Socket,
    /// `S_IFCHR`: a character device, its number in [`Attr::rdev`].
    CharDevice,
    /// `S_IFBLK`: a block device, its number in [`Attr::rdev`].
    BlockDevice,
}

impl FileKind {
    /// A named pipe, socket or device: what `mknod(2)` makes.
    pub fn is_special(self) -> bool {
        matches!(self, FileKind::Fifo | FileKind::Socket | FileKind::CharDevice | FileKind::BlockDevice)
    }

    /// A device, which has a device number and only root may make.
    pub fn is_device(self) -> bool {
        matches!(self, FileKind::CharDevice | FileKind::BlockDevice)
    }

    /// The file type bits of a mode (`S_IFMT`), as `stat(2)` gives them.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileKind::File => 0o100000,
            FileKind::Dir => 0o040000,
            FileKind::Symlink => 0o120000,
            FileKind::Fifo => 0o010000,
            FileKind::Socket => 0o140000,
            FileKind::CharDevice => 0o020000,
            FileKind::BlockDevice => 0o060000,
        }
    }

    /// The kind whose type bits `mode` has, if any.
    pub fn of_mode(mode: u32) -> Option<FileKind> {
        [
            FileKind::File,
            FileKind::Dir,
            FileKind::Symlink,
            FileKind::Fifo,
            FileKind::Socket,
            FileKind::CharDevice,
            FileKind::BlockDevice,
        ]
        .into_iter()
        .find(|kind| kind.mode_bits() == mode & 0o170000)
    }

    /// As `stat -c %F` names it.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::File => "regular file",
            FileKind::Dir => "directory",
            FileKind::Symlink => "symbolic link",
            FileKind::Fifo => "fifo",
            FileKind::Socket => "socket",
            FileKind::CharDevice => "character special file",
            FileKind::BlockDevice => "block special file",
        }
    }
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
/// below it (`lfs setstripe -c COUNT -S SIZE -i START_OST -p POOL`). A
/// field left `None` is inherited. The Lustre spellings of "inherit" are
/// accepted too: `count: Some(0)` and `size: Some(0)` mean `None` (and a
/// client turns `-p ''`, `-p none` and `-p inherit` into `pool: None`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StripeSpec {
    /// Number of stripes (objects on distinct OSTs); -1 means all OSTs
    /// (up to `STRIPE_COUNT_MAX`). More than the OST count is refused,
    /// unless `overstripe`.
    pub count: Option<i64>,
    /// Lustre's overstriping (`lfs setstripe -C`): `count` may exceed the
    /// OSTs, which then hold several stripes each, round robin; a count of
    /// -N (-1 to -32) means N stripes on each OST. It goes with `count`:
    /// set without a count it is refused.
    #[serde(default)]
    pub overstripe: bool,
    /// The OSTs of a new file's stripes, in stripe order (`lfs setstripe
    /// -o`): the stripe count is their number (a count given too must
    /// agree), an OST listed twice overstripes, a starting OST given must
    /// be one of them (striping starts there, in the list's order), and
    /// each must be in the file's pool if it has one. A file's alone: a
    /// directory default with an OST list is refused.
    #[serde(default)]
    pub osts: Option<Vec<u32>>,
    /// Bytes per stripe unit: a positive multiple of 64 KiB below 4 GiB.
    pub size: Option<u64>,
    /// OST of stripe 0; -1 means the MDS chooses (round robin).
    pub start_ost: Option<i64>,
    /// The OST pool the file's objects come from (see [`crate::pools`]):
    /// it must be defined; a file's also non-empty.
    #[serde(default)]
    pub pool: Option<PoolName>,
    /// A composite layout (Lustre's PFL, `lfs setstripe -E END ... -E -1
    /// ...`): its components in file order, each with its own striping
    /// for the bytes up to its end; the other fields of this spec are then
    /// unused. A component's unset stripe size and pool are the previous
    /// component's, its other unset fields inherited as a plain file's. A
    /// directory default may be composite (its components without OST
    /// lists): the files below it that ask for no striping of their own
    /// get it, until a nearer directory has a default.
    #[serde(default)]
    pub components: Option<Vec<ComponentSpec>>,
}

/// One component of a composite layout asked for: the file bytes below
/// `end` (`u64::MAX`: to the end of the file, which the last must be) not
/// in an earlier component, striped as `stripe` says (its `components`
/// unset).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ComponentSpec {
    pub end: u64,
    pub stripe: StripeSpec,
}

/// An open file: what a client needs to do I/O (the size comes from the
/// OSTs, by glimpse).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    pub fid: Fid,
    pub layout: Layout,
}

/// The attributes the MDS keeps. No size: sizes live on the OSTs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub fid: Fid,
    pub kind: FileKind,
    /// `Some` for files, `None` for directories and symbolic links.
    pub layout: Option<Layout>,
    /// Wall-clock times, nanoseconds since the epoch. Modification:
    /// creation, for a directory an entry added, removed or renamed, and
    /// whatever [`MdsRequest::SetMtime`] set (a mount sets it when a file
    /// written through it is closed).
    pub mtime_ns: u64,
    /// Access: creation, and whatever [`MdsRequest::SetAtime`] set (reads
    /// do not move it, as with `noatime`).
    pub atime_ns: u64,
    /// Change of the inode: any change of its times, owner, permissions or
    /// links.
    pub ctime_ns: u64,
    /// Names of the inode: a file's or a symbolic link's hard links; for a
    /// directory 2 plus its subdirectories, as POSIX file systems count.
    pub nlink: u64,
    /// A symbolic link's target, as given.
    pub target: Option<String>,
    /// A device's number (`st_rdev`, as `makedev` encodes it); 0 for
    /// every other kind.
    pub rdev: u64,
    pub uid: u32,
    pub gid: u32,
    /// `mode & 07777` (the kind is [`Attr::kind`]); [`crate::mode_string`]
    /// shows it as `ls -l` does.
    pub permissions: u32,
}

/// One name in a directory, with what `ls -l` shows of its inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub fid: Fid,
    pub kind: FileKind,
    pub uid: u32,
    pub gid: u32,
    pub permissions: u32,
}

/// One page of a directory listing: entries in name (byte) order after the
/// request's cursor, at most [`READDIR_ENTRIES_MAX`] of them and
/// [`READDIR_BYTES_MAX`] bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirPage {
    pub entries: Vec<DirEntry>,
    /// Whether entries follow the last one here: ask again with its name as
    /// the cursor.
    pub more: bool,
}

/// A fully resolved default: what a new file gets for every field it does
/// not set itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeDefault {
    /// -1 means all OSTs, as stored (resolved to a number at create time).
    pub count: i64,
    /// The count overstripes (see [`StripeSpec::overstripe`]).
    #[serde(default)]
    pub overstripe: bool,
    pub size: u64,
    /// -1 means the MDS chooses.
    pub start_ost: i64,
    /// The OST pool new files are created in; `None`: all OSTs.
    #[serde(default)]
    pub pool: Option<PoolName>,
}

/// Where each field of a [`StripeDefault`] came from: the path of the
/// nearest directory (the one asked about, or an ancestor) that sets it, or
/// `None` for the file-system default of [`MdsConfig`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeOrigin {
    pub count: Option<String>,
    pub size: Option<String>,
    pub start_ost: Option<String>,
    #[serde(default)]
    pub pool: Option<String>,
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
    /// The OST pool a file was created in (Lustre's `lmm_pool`), kept as
    /// named then, whether or not the pool still exists; `None` for a file
    /// in no pool and for a directory (its default pool is `default.pool`).
    #[serde(default)]
    pub pool: Option<PoolName>,
    /// Each component's pool, for a composite layout (`lmm_pool` of each;
    /// `pool` is the first's); empty for a plain one.
    #[serde(default)]
    pub component_pools: Vec<Option<PoolName>>,
    /// The composite default a new file in the directory (for a file: in
    /// its parent) would get, if the nearest directory with a default has
    /// a composite one; its unset fields are `default`'s.
    #[serde(default)]
    pub default_components: Option<Vec<ComponentSpec>>,
}

/// The MDS's counts, and the space of the file system its database lives
/// on (its MDT, in Lustre's words).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statfs {
    pub ost_count: u32,
    /// Inodes that are not directories: files, symbolic links, named
    /// pipes, sockets and devices.
    pub file_count: u64,
    /// Includes the root directory.
    pub dir_count: u64,
    /// `statvfs` of the database's file system; `None` for a database in
    /// memory, or if `statvfs` failed.
    #[serde(default)]
    pub space: Option<MdtSpace>,
}

/// `statvfs` of the file system the MDS's database lives on, as an OST
/// reports its own. lanefs's inodes are rows of the database, with no
/// table of fixed size to count against, so the inode figures are the
/// backing file system's (its `f_files` and `f_ffree`), which bound how
/// many files the database can hold no more truly than its free space does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdtSpace {
    /// Tells file systems apart (`f_fsid`).
    pub fsid: u64,
    pub total_bytes: u64,
    /// Free for root (`f_bfree`), as the OSTs report theirs.
    pub free_bytes: u64,
    pub total_inodes: u64,
    pub free_inodes: u64,
}

/// One request to the MDS, made with the caller's [`Credentials`]. Success
/// replies are listed per variant. `permissions` are mode bits
/// (`& 07777` is kept): the caller has applied its umask already.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdsRequest {
    /// Creates a directory. -> [`MdsReply::Attr`] of the new directory.
    Mkdir { path: String, permissions: u32 },
    /// Creates a file and allocates its objects (the fields of `stripe` that
    /// are set, the rest inherited), or opens it per `mode` (an existing
    /// file is opened for `access`, which a new file always has, as
    /// `open(2)` with `O_CREAT`). -> [`MdsReply::File`].
    Create { path: String, stripe: StripeSpec, mode: CreateMode, access: Access, permissions: u32 },
    /// Opens an existing file for `access`. -> [`MdsReply::File`].
    Open { path: String, access: Access },
    /// -> [`MdsReply::Attr`].
    Stat { path: String },
    /// Lists a directory, sorted by name, one page after `cursor` (the last
    /// name of the previous page; `None` for the first). -> [`MdsReply::Entries`].
    Readdir { path: String, cursor: Option<String> },
    /// Removes a name of a file or symbolic link; with its last name, the
    /// MDS destroys a file's objects on the OSTs. -> [`MdsReply::Ok`].
    Unlink { path: String },
    /// Removes an empty directory. -> [`MdsReply::Ok`].
    Rmdir { path: String },
    /// POSIX `rename(2)`: replaces a file target (whose objects the MDS
    /// destroys), or an empty directory target when `from` is a directory.
    /// -> [`MdsReply::Ok`].
    Rename { from: String, to: String },
    /// `chmod` (`permissions`) and `chown` (`uid`, `gid`), each field
    /// `None` left as it is. -> [`MdsReply::Attr`].
    SetAttr { path: String, permissions: Option<u32>, uid: Option<u32>, gid: Option<u32> },
    /// `utimensat` of the modification time: to the MDS's clock (`at:
    /// None`, allowed to the owner, root and whoever may write the inode)
    /// or to `at` nanoseconds since the epoch (the owner and root only);
    /// the change time becomes the MDS's clock. -> [`MdsReply::Attr`].
    SetMtime { path: String, at: Option<u64> },
    /// `utimensat` of the access time, with [`MdsRequest::SetMtime`]'s
    /// rules. -> [`MdsReply::Attr`].
    SetAtime { path: String, at: Option<u64> },
    /// `symlink(2)`: a symbolic link at `path` to `target` (at most
    /// [`crate::SYMLINK_TARGET_MAX`] bytes, kept as given).
    /// -> [`MdsReply::Attr`] of the link.
    Symlink { path: String, target: String },
    /// `mknod(2)`: a named pipe, socket or device at `path` (`kind` one of
    /// those; `rdev` a device's number, 0 for the others). Only root makes
    /// devices, as only `CAP_MKNOD` may. -> [`MdsReply::Attr`] of the new inode.
    Mknod { path: String, kind: FileKind, permissions: u32, rdev: u64 },
    /// `link(2)`: a new name `to` for the file or symbolic link `from`
    /// (not a directory). -> [`MdsReply::Attr`] of the inode.
    Link { from: String, to: String },
    /// Sets a directory's default striping for new files below it (all
    /// fields `None` clears it). Refused on files: their layout is fixed at
    /// create. -> [`MdsReply::Ok`].
    SetStripe { path: String, stripe: StripeSpec },
    /// -> [`MdsReply::Stripe`].
    GetStripe { path: String },
    /// -> [`MdsReply::Statfs`].
    Statfs,
    /// `lfs setstripe -d`: removes directory `path`'s own default striping,
    /// so that it inherits every field again (its owner or root only).
    /// -> [`MdsReply::Ok`].
    DeleteStripe { path: String },
    /// `lctl pool_new`, `pool_destroy`, `pool_add`, `pool_remove` (root
    /// only, see [`crate::pools`]). -> [`MdsReply::Ok`].
    ChangePool { pool: PoolName, change: PoolChange },
    /// `lctl pool_list`: every pool, or one. -> [`MdsReply::Pools`].
    ListPools { pool: Option<PoolName> },
    /// [`MdsRequest::Stat`] of the inode `fid`, whatever its names are
    /// now: `fstat` of an open file, `stat` of an inode a mount's kernel
    /// holds. A fid walks no directory, so it needs no search permission
    /// (see `lanefs_mds::Target`). -> [`MdsReply::Attr`].
    StatFid { fid: Fid },
    /// [`MdsRequest::Readdir`] of the directory `fid`.
    /// -> [`MdsReply::Entries`].
    ReaddirFid { fid: Fid, cursor: Option<String> },
    /// [`MdsRequest::Link`] of the inode `fid`: `link(2)` of the file the
    /// kernel holds. -> [`MdsReply::Attr`] of the inode.
    LinkFid { fid: Fid, to: String },
    /// [`MdsRequest::Open`] of the file `fid`. -> [`MdsReply::File`].
    OpenFid { fid: Fid, access: Access },
    /// [`MdsRequest::SetAttr`] of the inode `fid` (`fchmod`, `fchown`).
    /// -> [`MdsReply::Attr`].
    SetAttrFid { fid: Fid, permissions: Option<u32>, uid: Option<u32>, gid: Option<u32> },
    /// [`MdsRequest::SetMtime`] of the inode `fid` (`futimens`).
    /// -> [`MdsReply::Attr`].
    SetMtimeFid { fid: Fid, at: Option<u64> },
    /// [`MdsRequest::SetAtime`] of the inode `fid`. -> [`MdsReply::Attr`].
    SetAtimeFid { fid: Fid, at: Option<u64> },
    /// `getxattr(2)`: the value of `node`'s extended attribute `name` (see
    /// `lanefs_mds::xattr` for the namespaces and who may read them).
    /// -> [`MdsReply::Xattr`].
    GetXattr { node: Node, name: String },
    /// `listxattr(2)`: the names of `node`'s extended attributes the
    /// caller may see, sorted. -> [`MdsReply::XattrNames`].
    ListXattrs { node: Node },
    /// `setxattr(2)`: sets `node`'s extended attribute `name` to `value`,
    /// as `how` (its flags) allows. -> [`MdsReply::Ok`].
    SetXattr { node: Node, name: String, value: Vec<u8>, how: XattrHow },
    /// `removexattr(2)`. -> [`MdsReply::Ok`].
    RemoveXattr { node: Node, name: String },
    /// The current layout of the file `fid`: a client whose I/O found an
    /// object gone (the file was restriped, see
    /// [`MdsRequest::MigrateStart`]) fetches it again. Needs no permission
    /// beyond naming the inode by fid. -> [`MdsReply::File`].
    LayoutFid { fid: Fid },
    /// Starts restriping the file at `path` (`lanefs migrate`, `lfs
    /// migrate`): a volatile file (one without a name) with the new
    /// layout, made of `stripe` as for a new file in the same directory,
    /// or, with `None`, of the file's own stripe count, stripe size,
    /// overstriping and pool, on OSTs chosen afresh. The caller copies the
    /// file's bytes into it, then commits. Needs write permission on the
    /// file; replaces a migration of it under way.
    /// -> [`MdsReply::Migration`].
    MigrateStart { path: String, stripe: Option<StripeSpec> },
    /// Ends the migration [`MdsRequest::MigrateStart`] began: `fid`, still
    /// at `path`, takes the layout of `volatile`, and its old objects are
    /// destroyed. -> [`MdsReply::File`] (the file, with its new layout).
    MigrateCommit { path: String, fid: Fid, volatile: Fid },
    /// Abandons that migration: the volatile file and its objects go.
    /// -> [`MdsReply::Ok`].
    MigrateAbort { path: String, fid: Fid, volatile: Fid },
}

/// How a request that may name its inode either way names it: by path
/// (walked, see [`MdsRequest::Stat`]) or by fid (see
/// [`MdsRequest::StatFid`], with the same rule for who may send it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Node {
    Path(String),
    Fid(Fid),
}

/// How `setxattr(2)` treats an attribute that exists or not (its flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum XattrHow {
    /// No flag: creates it or replaces its value.
    Either,
    /// `XATTR_CREATE`: fails with `EEXIST` if it exists.
    Create,
    /// `XATTR_REPLACE`: fails with `ENODATA` if it does not.
    Replace,
}

/// Whether `path` starts at a directory named by fid (`/.lustre/fid/...`).
fn anchored(path: &str) -> bool {
    crate::path::MdsPath::parse(path).is_ok_and(|path| path.anchor().is_some())
}

impl MdsRequest {
    /// The operation as Lustre's `mdt.*.md_stats` counts it (`open`,
    /// `getattr`, `setattr`, `mkdir`, ...), or a name of lanefs's own where
    /// Lustre has none (`readdir`, `symlink`, `pool`, `migrate`).
    pub fn md_stat(&self) -> &'static str {
        use MdsRequest::*;
        match self {
            Mkdir { .. } => "mkdir",
            Create { .. } | Open { .. } | OpenFid { .. } => "open",
            Stat { .. } | StatFid { .. } | GetStripe { .. } | LayoutFid { .. } => "getattr",
            Readdir { .. } | ReaddirFid { .. } => "readdir",
            Unlink { .. } => "unlink",
            Rmdir { .. } => "rmdir",
            Rename { .. } => "rename",
            SetAttr { .. } | SetAttrFid { .. } | SetMtime { .. } | SetMtimeFid { .. } | SetAtime { .. } => "setattr",
            SetAtimeFid { .. } | SetStripe { .. } | DeleteStripe { .. } => "setattr",
            Symlink { .. } => "symlink",
            Mknod { .. } => "mknod",
            Link { .. } | LinkFid { .. } => "link",
            Statfs => "statfs",
            ChangePool { .. } | ListPools { .. } => "pool",
            GetXattr { .. } | ListXattrs { .. } => "getxattr",
            SetXattr { .. } | RemoveXattr { .. } => "setxattr",
            MigrateStart { .. } | MigrateCommit { .. } | MigrateAbort { .. } => "migrate",
        }
    }

    /// Whether the request names its inode by fid: an inode the caller
    /// already reached, with no walk and so no search permission checked
    /// on the way. Only nodes (a mount, acting for processes whose own
    /// walks the MDS checked) send these; the network MDS refuses them
    /// from a peer that is a user, as Linux keeps `open_by_handle_at` to
    /// `CAP_DAC_READ_SEARCH`.
    pub fn by_fid(&self) -> bool {
        match self {
            MdsRequest::StatFid { .. }
            | MdsRequest::ReaddirFid { .. }
            | MdsRequest::OpenFid { .. }
            | MdsRequest::SetAttrFid { .. }
            | MdsRequest::SetMtimeFid { .. }
            | MdsRequest::SetAtimeFid { .. }
            | MdsRequest::LinkFid { .. }
            | MdsRequest::LayoutFid { .. } => true,
            MdsRequest::GetXattr { node, .. }
            | MdsRequest::ListXattrs { node }
            | MdsRequest::SetXattr { node, .. }
            | MdsRequest::RemoveXattr { node, .. } => match node {
                Node::Fid(_) => true,
                Node::Path(path) => anchored(path),
            },
            // A path that starts at a directory named by fid (see
            // `crate::path`) walks nothing above it either.
            MdsRequest::Rename { from, to } | MdsRequest::Link { from, to } => anchored(from) || anchored(to),
            MdsRequest::Mkdir { path, .. }
            | MdsRequest::Create { path, .. }
            | MdsRequest::Open { path, .. }
            | MdsRequest::Stat { path }
            | MdsRequest::Readdir { path, .. }
            | MdsRequest::Unlink { path }
            | MdsRequest::Rmdir { path }
            | MdsRequest::SetAttr { path, .. }
            | MdsRequest::SetMtime { path, .. }
            | MdsRequest::SetAtime { path, .. }
            | MdsRequest::Symlink { path, .. }
            | MdsRequest::Mknod { path, .. }
            | MdsRequest::SetStripe { path, .. }
            | MdsRequest::GetStripe { path }
            | MdsRequest::DeleteStripe { path }
            | MdsRequest::MigrateStart { path, .. }
            | MdsRequest::MigrateCommit { path, .. }
            | MdsRequest::MigrateAbort { path, .. } => anchored(path),
            MdsRequest::Statfs | MdsRequest::ChangePool { .. } | MdsRequest::ListPools { .. } => false,
        }
    }

    /// Whether doing the request twice does what doing it once does (a
    /// client may send it again after losing the MDS connection while it
    /// was in flight, not knowing whether it was done).
    pub fn is_idempotent(&self) -> bool {
        if lanefs_core::planted::active(lanefs_core::planted::Bug::RetryUnsafe) {
            return true;
        }
        match self {
            MdsRequest::Create { mode, .. } => *mode == CreateMode::OpenOrCreate,
            // Creating an attribute that must not exist fails the second
            // time, as replacing one that must exist does after a remove.
            MdsRequest::SetXattr { how, .. } => *how == XattrHow::Either,
            MdsRequest::GetXattr { .. } | MdsRequest::ListXattrs { .. } => true,
            MdsRequest::RemoveXattr { .. } => false,
            MdsRequest::Open { .. }
            | MdsRequest::Stat { .. }
            | MdsRequest::Readdir { .. }
            | MdsRequest::SetAttr { .. }
            | MdsRequest::SetMtime { .. }
            | MdsRequest::SetAtime { .. }
            | MdsRequest::SetStripe { .. }
            | MdsRequest::GetStripe { .. }
            | MdsRequest::DeleteStripe { .. }
            | MdsRequest::ListPools { .. }
            | MdsRequest::Statfs
            | MdsRequest::StatFid { .. }
            | MdsRequest::ReaddirFid { .. }
            | MdsRequest::OpenFid { .. }
            | MdsRequest::SetAttrFid { .. }
            | MdsRequest::SetMtimeFid { .. }
            | MdsRequest::SetAtimeFid { .. }
            | MdsRequest::LayoutFid { .. } => true,
            // A second start abandons the first's copy; a second commit
            // finds no migration; an abort after a commit would say so.
            MdsRequest::MigrateStart { .. } | MdsRequest::MigrateCommit { .. } | MdsRequest::MigrateAbort { .. } => {
                false
            }
            // Adding or removing an OST twice fails the second time, as
            // making or destroying a pool does.
            MdsRequest::ChangePool { .. } => false,
            MdsRequest::Mkdir { .. }
            | MdsRequest::Symlink { .. }
            | MdsRequest::Mknod { .. }
            | MdsRequest::Link { .. }
            | MdsRequest::LinkFid { .. }
            | MdsRequest::Unlink { .. }
            | MdsRequest::Rmdir { .. }
            | MdsRequest::Rename { .. } => false,
        }
    }
}

/// The MDS's answer to one [`MdsRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MdsReply {
    Ok,
    File(FileInfo),
    Attr(Attr),
    Entries(DirPage),
    Stripe(Box<StripeInfo>),
    Statfs(Statfs),
    Error(MdsError),
    Pools(Vec<PoolInfo>),
    /// An extended attribute's value.
    Xattr(Vec<u8>),
    /// Extended attribute names.
    XattrNames(Vec<String>),
    /// A migration started: the file, with its layout now, and the
    /// volatile file with the new one.
    Migration {
        file: FileInfo,
        volatile: FileInfo,
    },
}

/// A fid as errors name it, in Lustre's brackets.
pub fn fid_name(fid: Fid) -> String {
    format!("[{:#x}]", fid.0)
}

pub const S_ISUID: u32 = 0o4000;
pub const S_ISGID: u32 = 0o2000;
pub const S_ISVTX: u32 = 0o1000;

/// `mode` as `ls -l` shows it: `drwxr-sr-x`, `-rw-r--r--`, with `s`/`S`
/// for setuid and setgid and `t`/`T` for the sticky bit.
pub fn mode_string(kind: FileKind, permissions: u32) -> String {
    let mut text = String::with_capacity(10);
    text.push(match kind {
        FileKind::Dir => 'd',
        FileKind::File => '-',
        FileKind::Symlink => 'l',
        FileKind::Fifo => 'p',
        FileKind::Socket => 's',
        FileKind::CharDevice => 'c',
        FileKind::BlockDevice => 'b',
    });
    let specials = [(S_ISUID, 's'), (S_ISGID, 's'), (S_ISVTX, 't')];
    for (class, (special, letter)) in specials.into_iter().enumerate() {
        let bits = permissions >> (6 - 3 * class);
        text.push(if bits & 0o4 != 0 { 'r' } else { '-' });
        text.push(if bits & 0o2 != 0 { 'w' } else { '-' });
        let execute = bits & 0o1 != 0;
        text.push(match (permissions & special != 0, execute) {
            (true, true) => letter,
            (true, false) => letter.to_ascii_uppercase(),
            (false, true) => 'x',
            (false, false) => '-',
        });
    }
    text
}

#[cfg(test)]
mod mode_tests {
    use super::*;

    #[test]
    fn modes_read_as_ls_shows_them() {
        assert_eq!(mode_string(FileKind::File, 0o644), "-rw-r--r--");
        assert_eq!(mode_string(FileKind::Dir, 0o755), "drwxr-xr-x");
        assert_eq!(mode_string(FileKind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(FileKind::Dir, 0o1770), "drwxrwx--T");
        assert_eq!(mode_string(FileKind::File, 0o4755), "-rwsr-xr-x");
        assert_eq!(mode_string(FileKind::File, 0o2644), "-rw-r-Sr--");
        assert_eq!(mode_string(FileKind::Dir, 0o2775), "drwxrwsr-x");
        assert_eq!(mode_string(FileKind::File, 0), "----------");
    }
}
