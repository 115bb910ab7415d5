//! POSIX permissions: who may walk, list, open, create and remove what.
//!
//! Every inode has an owner, a group and `mode & 07777`. A request's
//! [`Credentials`] become a [`Caller`] (after root squash), and each check
//! is POSIX's (`inode_permission` and `may_delete` in Linux):
//! - the owner's bits apply to the owner, the group's bits to members of
//!   the inode's group (primary or supplementary), the others' to the rest;
//! - uid 0 may read and write anything and search any directory, unless
//!   the MDS squashes root (Lustre's `root_squash`: uid 0 is then served as
//!   the squash user and group, with no supplementary groups and no bypass);
//! - in a sticky directory (`+t`, as `/tmp`) only the owner of an entry, the
//!   owner of the directory or root may remove or rename the entry.
//!
//! What each request needs is listed in [`crate::ops`]; new inodes take
//! their owner and group from [`new_owner`] (the parent's group when it is
//! setgid, as POSIX and Lustre do).
//!
//! Departure from Lustre: no POSIX ACLs (Lustre's are optional), and no
//! `nosquash_nids`: root squash applies to every client node.

use crate::schema::Inode;
use crate::{Credentials, FileKind, MdsError, Owner, GROUPS_MAX};

use lanefs_proto::{S_ISGID, S_ISVTX};

/// The caller of one request, as the checks see it: credentials after root
/// squash and validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub uid: u32,
    pub gid: u32,
    groups: Vec<u32>,
}

impl Caller {
    /// The caller `credentials` make, squashed if root and `root_squash` is set.
    pub fn new(credentials: &Credentials, root_squash: Option<Owner>) -> Result<Caller, MdsError> {
        if credentials.groups.len() > GROUPS_MAX {
            let reason = format!(
                "{} supplementary groups, more than the {GROUPS_MAX} a process can have",
                credentials.groups.len()
            );
            return Err(MdsError::InvalidCredentials { reason });
        }
        match root_squash {
            Some(squash) if credentials.uid == 0 => Ok(Caller { uid: squash.uid, gid: squash.gid, groups: Vec::new() }),
            _ => Ok(Caller { uid: credentials.uid, gid: credentials.gid, groups: credentials.groups.clone() }),
        }
    }

    /// Whether permission checks pass over this caller (uid 0, not squashed).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// Whether `gid` is this caller's primary or a supplementary group.
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// A permission a request needs on one inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    Read,
    Write,
    ReadWrite,
    /// `x` on a directory: look a name up in it.
    Search,
    /// `w` and `x` on a directory: add or remove a name.
    WriteSearch,
}

impl Need {
    fn bits(self) -> u32 {
        match self {
            Need::Read => 0o4,
            Need::Write => 0o2,
            Need::ReadWrite => 0o6,
            Need::Search => 0o1,
            Need::WriteSearch => 0o3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Need::Read => "read (r)",
            Need::Write => "write (w)",
            Need::ReadWrite => "read and write (rw)",
            Need::Search => "search (x)",
            Need::WriteSearch => "write and search (wx)",
        }
    }
}

/// Whether `caller` has `need` on `inode`.
pub(crate) fn allows(caller: &Caller, inode: &Inode, need: Need) -> bool {
    if caller.is_root() {
        // Root reads, writes and searches everything; it executes only
        // files some x bit allows, but nothing here executes files.
        return true;
    }
    let class = if caller.uid == inode.uid {
        inode.permissions >> 6
    } else if caller.in_group(inode.gid) {
        inode.permissions >> 3
    } else {
        inode.permissions
    };
    class & need.bits() == need.bits()
}

/// `Ok` if `caller` has `need` on `inode`, else the `EACCES` naming `path`
/// (the request's) and `on` (the inode's path).
pub(crate) fn check(
    caller: &Caller,
    inode: &Inode,
    need: Need,
    path: &dyn std::fmt::Display,
    on: &dyn std::fmt::Display,
) -> Result<(), MdsError> {
    if allows(caller, inode, need) {
        return Ok(());
    }
    Err(MdsError::PermissionDenied {
        path: path.to_string(),
        on: on.to_string(),
        needed: need.name().to_string(),
        uid: caller.uid,
    })
}

/// The sticky-directory rule: whether `caller` may remove or rename
/// `victim` out of `dir`. `Err` is the `EPERM` naming both.
pub(crate) fn check_sticky(
    caller: &Caller,
    dir: &Inode,
    dir_path: &dyn std::fmt::Display,
    victim: &Inode,
    victim_path: &dyn std::fmt::Display,
) -> Result<(), MdsError> {
    if dir.permissions & S_ISVTX == 0 || caller.is_root() || caller.uid == victim.uid || caller.uid == dir.uid {
        return Ok(());
    }
    Err(MdsError::NotPermitted {
        path: victim_path.to_string(),
        reason: format!(
            "{dir_path} is sticky (mode +t): only the owner of {victim_path} (uid {}), the owner of {dir_path} (uid {}) \
             or root may remove or rename it, not uid {}",
            victim.uid, dir.uid, caller.uid
        ),
    })
}

/// Owner, group and permissions of a new inode of `kind` made by `caller`
/// in `parent` with the requested `permissions`: the caller's uid; the
/// parent's group if the parent is setgid (a new directory then is setgid
/// too), else the caller's; a new file's setgid bit is dropped if the
/// caller is not in its group (Linux's `inode_init_owner`).
pub(crate) fn new_owner(caller: &Caller, parent: &Inode, kind: FileKind, permissions: u32) -> (Owner, u32) {
    let mut permissions = permissions & crate::PERMISSION_BITS;
    let inherits_group = parent.permissions & S_ISGID != 0;
    let gid = if inherits_group { parent.gid } else { caller.gid };
    match kind {
        FileKind::Dir if inherits_group => permissions |= S_ISGID,
        kind if (kind == FileKind::File || kind.is_special()) && !caller.is_root() && !caller.in_group(gid) => {
            permissions &= !S_ISGID
        }
        _ => {}
    }
    (Owner { uid: caller.uid, gid }, permissions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Fid;

    fn inode(uid: u32, gid: u32, permissions: u32) -> Inode {
        Inode { fid: Fid(2), kind: FileKind::Dir, uid, gid, permissions }
    }

    fn caller(uid: u32, gid: u32, groups: Vec<u32>) -> Caller {
        Caller::new(&Credentials::user(uid, gid).with_groups(groups), None).unwrap()
    }

    #[test]
    fn owner_group_and_others_each_get_their_own_bits() {
        let dir = inode(10, 20, 0o750);
        let owner = caller(10, 99, vec![]);
        let member = caller(11, 99, vec![20]);
        let primary = caller(12, 20, vec![]);
        let other = caller(13, 99, vec![]);
        assert!(allows(&owner, &dir, Need::WriteSearch));
        assert!(allows(&member, &dir, Need::Read) && allows(&primary, &dir, Need::Search));
        assert!(!allows(&member, &dir, Need::Write));
        assert!(!allows(&other, &dir, Need::Search));
        // The owner's class is used even when it grants less than the group's.
        let odd = inode(10, 20, 0o070);
        assert!(!allows(&owner, &odd, Need::Read));
        assert!(allows(&caller(10, 20, vec![]), &inode(10, 20, 0o400), Need::Read));
        assert!(!allows(&caller(10, 20, vec![]), &inode(10, 20, 0o400), Need::ReadWrite));
    }

    #[test]
    fn root_passes_unless_squashed() {
        let locked = inode(10, 20, 0o000);
        let root = Caller::new(&Credentials::ROOT, None).unwrap();
        assert!(allows(&root, &locked, Need::ReadWrite) && allows(&root, &locked, Need::WriteSearch));
        let squash = Some(Owner { uid: 65534, gid: 65534 });
        let squashed = Caller::new(&Credentials::ROOT.with_groups(vec![20]), squash).unwrap();
        assert_eq!((squashed.uid, squashed.gid, squashed.in_group(20)), (65534, 65534, false));
        assert!(!allows(&squashed, &locked, Need::Read));
        assert!(allows(&squashed, &inode(10, 20, 0o004), Need::Read), "others' bits apply");
        // Squash changes only root.
        assert_eq!(Caller::new(&Credentials::user(5, 6), squash).unwrap().uid, 5);
        let too_many = Credentials::user(5, 6).with_groups(vec![1; GROUPS_MAX + 1]);
        assert!(matches!(Caller::new(&too_many, None), Err(MdsError::InvalidCredentials { .. })));
    }

    #[test]
    fn sticky_directories_protect_other_users_entries() {
        let tmp = inode(0, 0, 0o1777);
        let theirs = inode(10, 10, 0o644);
        let check = |who: &Caller, dir: &Inode| check_sticky(who, dir, &"/tmp", &theirs, &"/tmp/f");
        assert!(check(&caller(10, 10, vec![]), &tmp).is_ok(), "the entry's owner");
        assert!(check(&caller(0, 0, vec![]), &tmp).is_ok(), "root");
        assert!(check(&caller(11, 10, vec![]), &inode(11, 0, 0o1777)).is_ok(), "the directory's owner");
        let refused = check(&caller(12, 10, vec![]), &tmp).unwrap_err();
        assert!(refused.to_string().contains("/tmp is sticky"), "{refused}");
        assert!(check(&caller(12, 10, vec![]), &inode(0, 0, 0o777)).is_ok(), "not sticky");
    }

    #[test]
    fn new_inodes_take_the_callers_ids_or_a_setgid_parents_group() {
        let alice = caller(10, 10, vec![30]);
        let plain = inode(0, 20, 0o777);
        assert_eq!(new_owner(&alice, &plain, FileKind::File, 0o100644), (Owner { uid: 10, gid: 10 }, 0o644));
        let shared = inode(0, 20, 0o2775);
        assert_eq!(new_owner(&alice, &shared, FileKind::Dir, 0o755), (Owner { uid: 10, gid: 20 }, 0o2755));
        // A file's setgid bit for a group the creator is not in is dropped.
        assert_eq!(new_owner(&alice, &shared, FileKind::File, 0o2755), (Owner { uid: 10, gid: 20 }, 0o755));
        let group30 = inode(0, 30, 0o2777);
        assert_eq!(new_owner(&alice, &group30, FileKind::File, 0o2755).1, 0o2755);
    }
}
