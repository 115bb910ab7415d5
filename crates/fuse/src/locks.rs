//! File locks through a mount: `fcntl` record locks (`F_SETLK`,
//! `F_SETLKW`, `F_GETLK`) and `flock`, granted by the MDS
//! (`lanefs_proto::flock`) so that they hold between mounts, as Lustre's
//! `flock` mount option makes them hold between client nodes.
//!
//! The kernel sends a mount every lock request with its lock owner (a
//! process's files table for `fcntl`, an open file description for
//! `flock`), and at each `close` a flush naming the closing owner, which
//! drops that owner's locks on the file, as POSIX says a close does; the
//! last close of a description drops its `flock`. A process that dies is
//! closed by the kernel, so its locks go too; a mount that dies loses its
//! MDS connection, and the MDS drops all of its locks.
//!
//! A request that may wait (`F_SETLKW`, `flock` without `LOCK_NB`) is
//! first asked for without waiting, on the mount's thread: granted, it
//! costs nothing more, and needs no waiter's place. Only one that finds
//! the bytes held waits, on a thread of its own, never one of the mount's,
//! and is withdrawn with `EINTR` when a signal reaches the waiting process.
//! The kernel's way of saying so (`FUSE_INTERRUPT`) does not reach a
//! `fuser` file system, so the waiter looks at the thread's pending and
//! blocked signals in `/proc` instead: soon after it starts waiting, then
//! less and less often, at least every [`SIGNAL_POLL_MAX`]
//! (`Client::flock`); the MDS's answer wakes it at once.
//!
//! Bounds: [`WAITERS_MAX`] requests wait at once per mount, and
//! [`WAITERS_PER_UID_MAX`] of one uid, so that one user's parked waiters
//! leave the others room; one more is refused with `ENOLCK`. The MDS
//! bounds locks and waiters per uid and per client again
//! (`lanefs_proto::flock`), for every mount together.
//!
//! Ranges: the kernel says "to the end of the file" with `OFFSET_MAX`
//! (`i64::MAX`), the MDS with `u64::MAX` (which a client library program
//! may send). Requests to `OFFSET_MAX` go to the MDS as `u64::MAX`, and a
//! lock `F_GETLK` reports is cut back to `OFFSET_MAX` (the kernel fails a
//! reply past it with `EIO`), which the program reads as `l_len` 0.

use fuser::{Errno, ReplyEmpty};
use lanefs_client::Client;
use lanefs_proto::flock::{FlockAnswer, FlockKind, FlockOwner, FlockRequest};
use lanefs_proto::Fid;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tracing::warn;

/// Lock requests one mount has waiting at once, at most (each is a
/// thread).
pub const WAITERS_MAX: usize = 1024;
/// Lock requests of one uid waiting at once in one mount, at most.
pub const WAITERS_PER_UID_MAX: usize = WAITERS_MAX / 8;
/// The kernel's `OFFSET_MAX`: the largest offset a lock range may name,
/// and what a range to the end of the file ends at.
const OFFSET_MAX: u64 = i64::MAX as u64;
/// How long a waiting request goes at most between two looks at its
/// thread's signals: a signal ends its wait within this.
pub use lanefs_client::FLOCK_SIGNAL_POLL_MAX as SIGNAL_POLL_MAX;
/// Owners with locks on a file that one mount remembers, at most (past
/// it, a close asks the MDS to drop locks whether or not there are any).
const OWNERS_MAX: usize = 65_536;

/// One lock request as the kernel sends it.
#[derive(Clone, Copy, Debug)]
pub struct LockCall {
    pub ino: u64,
    pub owner: u64,
    pub start: u64,
    pub end: u64,
    /// `F_RDLCK`, `F_WRLCK` or `F_UNLCK`.
    pub typ: i32,
    /// The locking process, as its node numbers it.
    pub pid: u32,
    /// The thread that asked (whose signals withdraw a wait).
    pub tid: u32,
    /// The uid it runs as (whose shares of waiters and locks it takes).
    pub uid: u32,
}

/// A mount's side of file locking (see the module docs).
pub struct MountLocks {
    client: Arc<Client>,
    /// `(inode, owner)` pairs this mount has been granted locks for: a
    /// close by another owner costs no MDS call. Forgotten at the owner's
    /// close; past [`OWNERS_MAX`] pairs, `overflowed` makes every close ask.
    owners: Mutex<HashSet<(u64, u64)>>,
    overflowed: std::sync::atomic::AtomicBool,
    waiting: AtomicUsize,
    /// Waiting requests by uid (entries only for uids with some).
    waiting_by_uid: Mutex<HashMap<u32, usize>>,
}

impl MountLocks {
    pub fn new(client: Arc<Client>) -> MountLocks {
        MountLocks {
            client,
            owners: Mutex::new(HashSet::new()),
            overflowed: std::sync::atomic::AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            waiting_by_uid: Mutex::new(HashMap::new()),
        }
    }

    /// `F_GETLK`: the lock in the way, as `(start, end, type, pid)`, or
    /// the request back with the type `F_UNLCK` when nothing is.
    pub fn get(&self, call: LockCall) -> Result<(u64, u64, i32, u32), Errno> {
        let request = request(&call)?;
        match self.client.flock_get(request).map_err(|e| net_failure(&e))? {
            FlockAnswer::Conflict(held) => {
                let (start, end) = (held.start.min(OFFSET_MAX), held.end.min(OFFSET_MAX));
                Ok((start, end, typ(held.kind), held.pid))
            }
            FlockAnswer::Free => Ok((call.start, call.end, libc::F_UNLCK, 0)),
            other => Err(answer_errno(&other)),
        }
    }

    /// `F_SETLK` (`sleep` false) or `F_SETLKW`; answers `reply` now or,
    /// for a request that must wait, from a thread of its own.
    pub fn set(self: &Arc<Self>, call: LockCall, sleep: bool, reply: ReplyEmpty) {
        let request = match request(&call) {
            Ok(request) => request,
            Err(e) => return reply.error(e),
        };
        let now = self.apply(&call, request, false);
        if !sleep || request.kind.is_none() || now != Err(Errno::EAGAIN) {
            return reply_empty(now, reply);
        }
        if let Err(e) = self.take_waiter_place(call.uid) {
            return reply.error(e);
        }
        let locks = self.clone();
        let spawned = std::thread::Builder::new().name("lanefs-flock-wait".into()).spawn(move || {
            let result = locks.apply(&call, request, true);
            locks.give_waiter_place(call.uid);
            reply_empty(result, reply);
        });
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
        if let Err(e) = spawned {
            // The reply went with the closure; the kernel's request fails
            // with it dropped (EIO), which is what a thread-less mount can do.
            self.give_waiter_place(call.uid);
            warn!(%e, "no thread to wait for a lock on");
        }
    }

    /// A place for one more waiting request of `uid`, within
    /// [`WAITERS_MAX`] and [`WAITERS_PER_UID_MAX`].
    fn take_waiter_place(&self, uid: u32) -> Result<(), Errno> {
        let mut by_uid = self.waiting_by_uid.lock().expect("waiters by uid");
        let of_uid = by_uid.get(&uid).copied().unwrap_or(0);
        if of_uid >= WAITERS_PER_UID_MAX {
            warn!(uid, "uid {uid} has {of_uid} lock requests waiting in this mount, the most one user may; refusing one more with ENOLCK");
            return Err(Errno::ENOLCK);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= WAITERS_MAX {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            warn!("{WAITERS_MAX} lock requests wait in this mount already; refusing one more with ENOLCK");
            return Err(Errno::ENOLCK);
        }
        *by_uid.entry(uid).or_default() += 1;
        Ok(())
    }

    fn give_waiter_place(&self, uid: u32) {
        let mut by_uid = self.waiting_by_uid.lock().expect("waiters by uid");
        let count = by_uid.get_mut(&uid).expect("a waiter of this uid");
        *count -= 1;
        if *count == 0 {
            by_uid.remove(&uid);
        }
        self.waiting.fetch_sub(1, Ordering::AcqRel);
    }

    fn apply(&self, call: &LockCall, request: FlockRequest, wait: bool) -> Result<(), Errno> {
        let interrupted = || signal_pending(call.tid);
        let answer = self.client.flock(request, wait, &interrupted).map_err(|e| net_failure(&e))?;
        match answer {
            FlockAnswer::Granted => {
                if request.kind.is_some() {
                    self.remember(call.ino, call.owner);
                }
                Ok(())
            }
            other => Err(answer_errno(&other)),
        }
    }

    fn remember(&self, ino: u64, owner: u64) {
        let mut owners = self.owners.lock().expect("owners");
        if owners.len() >= OWNERS_MAX && !owners.contains(&(ino, owner)) {
            self.overflowed.store(true, Ordering::Relaxed);
            return;
        }
        owners.insert((ino, owner));
    }

    /// `owner` closed `ino`: its locks on it go.
    pub fn closed(&self, ino: u64, owner: u64) {
        let held = self.owners.lock().expect("owners").remove(&(ino, owner));
        if !held && !self.overflowed.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = self.client.flock_unlock_owner(Fid(ino), owner) {
            warn!(%e, ino, "dropping the locks of a closing owner at the MDS");
        }
    }

    pub fn check_invariants(&self) {
        assert!(self.waiting.load(Ordering::Acquire) <= WAITERS_MAX, "waiters over their bound");
        let by_uid = self.waiting_by_uid.lock().expect("waiters by uid");
        assert!(by_uid.values().all(|&n| n > 0 && n <= WAITERS_PER_UID_MAX), "waiters of a uid over their bound");
        assert!(self.owners.lock().expect("owners").len() <= OWNERS_MAX, "owners over their bound");
    }
}

fn request(call: &LockCall) -> Result<FlockRequest, Errno> {
    let kind = match call.typ {
        libc::F_RDLCK => Some(FlockKind::Read),
        libc::F_WRLCK => Some(FlockKind::Write),
        libc::F_UNLCK => None,
        _ => return Err(Errno::EINVAL),
    };
    if call.start > call.end {
        return Err(Errno::EINVAL);
    }
    let owner = FlockOwner { client: 0, owner: call.owner };
    let end = if call.end >= OFFSET_MAX { u64::MAX } else { call.end };
    Ok(FlockRequest { file: Fid(call.ino), owner, pid: call.pid, uid: call.uid, kind, start: call.start, end })
}

fn typ(kind: FlockKind) -> i32 {
    match kind {
        FlockKind::Read => libc::F_RDLCK,
        FlockKind::Write => libc::F_WRLCK,
    }
}

fn answer_errno(answer: &FlockAnswer) -> Errno {
    match answer {
        FlockAnswer::Conflict(_) => Errno::EAGAIN,
        FlockAnswer::Deadlock => Errno::EDEADLK,
        FlockAnswer::Interrupted => Errno::EINTR,
        FlockAnswer::NoLocks(reason) => {
            warn!("the MDS refused a lock: {reason}");
            Errno::ENOLCK
        }
        FlockAnswer::Granted | FlockAnswer::Free => Errno::EIO,
    }
}

/// A lock the MDS could not be asked for, or lost with its connection:
/// `ENOLCK`, as for a lock server out of reach on NFS.
fn net_failure(e: &lanefs_client::NetError) -> Errno {
    warn!(%e, "a file lock failed at the MDS");
    Errno::ENOLCK
}

fn reply_empty(result: Result<(), Errno>, reply: ReplyEmpty) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Whether thread `tid` has a signal to take (pending, for it or its
/// process, and not blocked), or is gone.
pub fn signal_pending(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else { return true };
    let mask = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_signal_is_not_taken_and_a_gone_thread_has_nothing_to_wait_for() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        assert!(!signal_pending(tid), "nothing is pending for this thread");
        // SAFETY: the set is initialised by sigemptyset before use; SIGUSR2
        // is blocked for this thread only, then raised at it, then taken
        // back with sigtimedwait so that it is never delivered.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGUSR2);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2);
            assert!(!signal_pending(tid), "blocked: the thread would not take it");
            let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            libc::sigtimedwait(&set, std::ptr::null_mut(), &zero);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
        assert!(signal_pending(u32::MAX - 1), "a thread that is gone has nothing left to wait for");
    }
}
