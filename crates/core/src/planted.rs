//! Bugs planted on purpose, to prove that the fault swarm (`lanefs-swarm`)
//! catches the kind of mistake it claims to catch.
//!
//! Each [`Bug`] breaks one rule of the protocol in one place (or two
//! that go together; the MDS's in lanefs-mds, which asks the same switch), behind
//! [`active`]. Without the `planted-bugs` cargo feature (the default, and
//! every build that ships) `active` is a constant `false` and the compiler
//! removes every planted branch; the feature refuses to build without debug
//! assertions, so a release build can never carry it. With the feature, a
//! test selects one bug for the current thread ([`plant`]); the swarm runs
//! each seed on one thread, so parallel jobs keep their own choice.
//!
//! The core reads no environment and no global configuration: the choice
//! is a thread-local value set by the caller, and nothing else.

/// A planted bug: which rule is broken, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bug {
    /// The lock server grants a request that conflicts with exactly one
    /// granted lock (`LockServer::handle_enqueue`).
    ConflictingGrant,
    /// The client cancels a lock whose writes are sent but not yet
    /// acknowledged (`Client::pump_cancels`).
    CancelBeforeAck,
    /// The client replays its locks but not its uncommitted writes to a
    /// restarted OST (`Client::replay_to`).
    ForgetReplay,
    /// The OST answers a client's sync without committing anything
    /// (`Ost::ask_sync`).
    SyncWithoutCommit,
    /// The client acknowledges a commit-failure notice and reports nothing
    /// (`Client::on_commit_failed`).
    DropCommitFailure,
    /// After a dropped connection the client sends its unanswered write
    /// RPCs again, except the first (`Client::resend`).
    LostResend,
    /// The client takes a failed write RPC for a success (`Client::on_write_reply`).
    IgnoreWriteError,
    /// The lock server never evicts a holder that misses its callback
    /// deadline (`LockServer::handle_timeout`).
    NoCallbackTimeout,
    /// An evicted client drops its cache and replay copies without telling
    /// the files that lost bytes (`Client::on_evicted`).
    SilentEviction,
    /// An OST whose recovery is over still takes a late client's replay of
    /// its locks and writes (`Ost::connect`, `Ost::serve`): a client cut off
    /// or slowed past the recovery window writes old bytes over new ones.
    LateReplay,
    /// The MDS removes an unlinked file without queueing its objects for
    /// destruction (`lanefs_mds::ops::Mds::unlink`): they stay on the OSTs
    /// for ever.
    ForgetDestroy,
    /// The MDS loses its queue of objects to destroy when it restarts
    /// (lanefs-mds's `schema::prepare`), as an unlink log kept in memory would.
    LoseDestroyQueue,
    /// Every MDS request is called idempotent (`MdsRequest::is_idempotent`),
    /// so a client takes the answer to a retried unlink or exclusive create
    /// at face value: `ENOENT` for its own unlink, `EEXIST` for its own create.
    RetryUnsafe,
    /// A recovering OST takes a replayed lock or change on the client's
    /// word, without checking its proof (`LockServer::replay`,
    /// `Ost::while_recovering`): a hostile node takes others' locks and
    /// transaction numbers.
    UnprovedReplay,
    /// The client's RPC book forgets to uncount a write RPC when its reply
    /// takes it out (`RpcBook::take`): the writes counted in flight drift
    /// from those listed. Caught by the RPC book's own invariants.
    MiscountedRpc,
    /// Writeback forgets an object whose first dirty bytes a write puts in
    /// the page cache (`Writeback::write`): nothing would ever write them
    /// back. Caught by writeback's own invariants.
    ForgetDirty,
    /// The lock cache keeps a lock's entry after its cancel was sent
    /// (`LockCache::cancelled`): a lock the OST has forgotten still serves
    /// this client. Caught by the lock cache's own invariants.
    KeepCancelledLock,
}

impl Bug {
    pub const ALL: [Bug; 17] = [
        Bug::ConflictingGrant,
        Bug::CancelBeforeAck,
        Bug::ForgetReplay,
        Bug::SyncWithoutCommit,
        Bug::DropCommitFailure,
        Bug::LostResend,
        Bug::IgnoreWriteError,
        Bug::NoCallbackTimeout,
        Bug::SilentEviction,
        Bug::LateReplay,
        Bug::ForgetDestroy,
        Bug::LoseDestroyQueue,
        Bug::RetryUnsafe,
        Bug::UnprovedReplay,
        Bug::MiscountedRpc,
        Bug::ForgetDirty,
        Bug::KeepCancelledLock,
    ];

    /// The name the swarm's switch takes (`LANEFS_PLANTED_BUG=...`).
    pub fn name(self) -> &'static str {
        match self {
            Bug::ConflictingGrant => "conflicting-grant",
            Bug::CancelBeforeAck => "cancel-before-ack",
            Bug::ForgetReplay => "forget-replay",
            Bug::SyncWithoutCommit => "sync-without-commit",
            Bug::DropCommitFailure => "drop-commit-failure",
            Bug::LostResend => "lost-resend",
            Bug::IgnoreWriteError => "ignore-write-error",
            Bug::NoCallbackTimeout => "no-callback-timeout",
            Bug::SilentEviction => "silent-eviction",
            Bug::LateReplay => "late-replay",
            Bug::ForgetDestroy => "forget-destroy",
            Bug::LoseDestroyQueue => "lose-destroy-queue",
            Bug::RetryUnsafe => "retry-unsafe",
            Bug::UnprovedReplay => "unproved-replay",
            Bug::MiscountedRpc => "miscounted-rpc",
            Bug::ForgetDirty => "forget-dirty",
            Bug::KeepCancelledLock => "keep-cancelled-lock",
        }
    }

    pub fn from_name(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|b| b.name() == name)
    }
}

#[cfg(all(feature = "planted-bugs", not(debug_assertions)))]
compile_error!("the planted-bugs feature is for test builds only: build it with debug assertions");

#[cfg(feature = "planted-bugs")]
thread_local! {
    static PLANTED: std::cell::Cell<Option<Bug>> = const { std::cell::Cell::new(None) };
}

/// Plant `bug` (or none) for the current thread.
#[cfg(feature = "planted-bugs")]
pub fn plant(bug: Option<Bug>) {
    PLANTED.with(|p| p.set(bug));
}

/// Whether `bug` is planted on the current thread.
#[cfg(feature = "planted-bugs")]
#[inline]
pub fn active(bug: Bug) -> bool {
    PLANTED.with(|p| p.get()) == Some(bug)
}

/// Whether `bug` is planted: never, without the `planted-bugs` feature.
#[cfg(not(feature = "planted-bugs"))]
#[inline(always)]
pub const fn active(_bug: Bug) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for bug in Bug::ALL {
            assert_eq!(Bug::from_name(bug.name()), Some(bug));
        }
        assert_eq!(Bug::from_name("none"), None);
    }
}
