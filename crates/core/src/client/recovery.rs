//! The client's recovery state: what it keeps so that nothing an OST
//! acknowledged, and nothing it lost, goes unaccounted across lost
//! connections, restarts and evictions.
//!
//! What it owns: the sessions with the OSTs ([`Imports`]), the
//! acknowledged changes kept until committed ([`ReplayLog`]), the lock
//! handles an OST named before this client knew them (unclaimed, with
//! whether each was called back), and the losses of objects no open file
//! could report yet (unreported, for the next open of their file).
//!
//! How sessions connect, resend and replay is `session.rs`'s; what a lost
//! OST takes with it is `lost_ost.rs`'s. This part keeps the books both
//! read.
//!
//! Invariants ([`Recovery::check_invariants`]):
//! * the imports' and the replay log's own;
//! * at most [`UNCLAIMED_LOCKS_MAX`] unclaimed handles and
//!   [`UNREPORTED_LOSSES_MAX`] unreported losses: past them a handle is
//!   given back at once, a loss is logged and not kept;
//! * without recovery (the simulator) nothing is kept for replay.

use super::error::ClientError;
use super::imports::{Import, Imports};
use super::replay::ReplayLog;
use crate::units::{LockHandle, ObjectKey, OstIndex};
use std::collections::BTreeMap;

/// Lock handles an OST named in a completion or a callback while this
/// client did not know them yet (see `Client::on_unknown_lock`), kept at
/// most; past it an unknown handle is given back at once.
pub const UNCLAIMED_LOCKS_MAX: usize = 1024;
/// Objects whose lost bytes no open file could report, kept for the next
/// open of their file (see `Client::record_write_error`), at most.
pub const UNREPORTED_LOSSES_MAX: usize = 4096;

#[derive(Debug)]
pub(super) struct Recovery {
    /// Whether the client keeps sessions and copies for replay at all
    /// (`ClientConfig::recovery`, fixed for the client's life).
    enabled: bool,
    /// Sessions with the OSTs (with recovery).
    imports: Imports,
    /// Acknowledged changes kept until committed (with recovery).
    replay: ReplayLog,
    /// Handles an OST named in a completion or a callback before the
    /// answer to one of this client's enqueues could say they were its
    /// own: whether each was called back.
    unclaimed: BTreeMap<(OstIndex, LockHandle), bool>,
    /// Losses of objects no open file had: the next open of their file
    /// reports them, as Linux reports a writeback error nobody has seen to
    /// the next fsync of the file, whichever descriptor it comes through.
    unreported: BTreeMap<ObjectKey, ClientError>,
}

impl Recovery {
    pub(super) fn new(enabled: bool) -> Self {
        Recovery {
            enabled,
            imports: Imports::default(),
            replay: ReplayLog::default(),
            unclaimed: BTreeMap::new(),
            unreported: BTreeMap::new(),
        }
    }

    pub(super) fn import(&self, ost: OstIndex) -> Import {
        self.imports.get(ost)
    }

    pub(super) fn imports(&self) -> &Imports {
        &self.imports
    }

    /// The session with `ost`, to move it along (see [`Imports`]).
    pub(super) fn import_mut(&mut self, ost: OstIndex) -> &mut Import {
        self.imports.get_mut(ost)
    }

    pub(super) fn replay(&self) -> &ReplayLog {
        &self.replay
    }

    /// The replay log, to keep, commit or drop changes (see [`ReplayLog`]).
    pub(super) fn replay_mut(&mut self) -> &mut ReplayLog {
        &mut self.replay
    }

    /// Handle `handle` of `ost`, named by an answer to one of this client's
    /// enqueues: whether it was called back while unclaimed (false if it
    /// never was).
    pub(super) fn claim(&mut self, ost: OstIndex, handle: LockHandle) -> bool {
        self.unclaimed.remove(&(ost, handle)).unwrap_or(false)
    }

    /// Whether another unknown handle may be kept unclaimed.
    pub(super) fn unclaimed_room(&self) -> bool {
        self.unclaimed.len() < UNCLAIMED_LOCKS_MAX
    }

    /// Keeps `handle` of `ost` until an enqueue's answer claims it.
    pub(super) fn keep_unclaimed(&mut self, ost: OstIndex, handle: LockHandle, called_back: bool) {
        assert!(self.enabled, "recovery: an unclaimed handle kept without recovery");
        assert!(
            self.unclaimed_room() || self.unclaimed.contains_key(&(ost, handle)),
            "recovery: unclaimed handles past their bound"
        );
        *self.unclaimed.entry((ost, handle)).or_default() |= called_back;
    }

    pub(super) fn has_unclaimed(&self, ost: OstIndex) -> bool {
        self.unclaimed.keys().any(|(o, _)| *o == ost)
    }

    /// The unclaimed handles of `ost`, taken out (to be given back).
    pub(super) fn take_unclaimed(&mut self, ost: OstIndex) -> Vec<LockHandle> {
        let handles: Vec<LockHandle> = self.unclaimed.keys().filter(|(o, _)| *o == ost).map(|(_, h)| *h).collect();
        for handle in &handles {
            self.unclaimed.remove(&(ost, *handle));
        }
        handles
    }

    /// `ost` dropped this client's locks (or is given up): its unclaimed
    /// handles go unanswered.
    pub(super) fn forget_unclaimed(&mut self, ost: OstIndex) {
        self.unclaimed.retain(|(o, _), _| *o != ost);
    }

    /// Every unclaimed handle.
    pub(super) fn unclaimed(&self) -> impl Iterator<Item = (OstIndex, LockHandle)> + '_ {
        self.unclaimed.keys().copied()
    }

    /// The loss of `key` kept for the next open of its file, taken out.
    pub(super) fn take_unreported(&mut self, key: ObjectKey) -> Option<ClientError> {
        if self.unreported.is_empty() {
            return None;
        }
        self.unreported.remove(&key)
    }

    /// Keeps the loss of `key` for the next open of its file (the first
    /// loss of it, if it has one already); false if past the bound.
    pub(super) fn keep_unreported(&mut self, key: ObjectKey, error: &ClientError) -> bool {
        if self.unreported.len() >= UNREPORTED_LOSSES_MAX && !self.unreported.contains_key(&key) {
            return false;
        }
        self.unreported.entry(key).or_insert_with(|| error.clone());
        true
    }

    /// Panics if a bound is broken, or changes are kept without recovery.
    pub fn check_invariants(&self) {
        self.replay.check_invariants();
        self.imports.check_invariants();
        assert!(self.unclaimed.len() <= UNCLAIMED_LOCKS_MAX, "recovery: unclaimed handles past their bound");
        assert!(self.unreported.len() <= UNREPORTED_LOSSES_MAX, "recovery: unreported losses past their bound");
        if !self.enabled {
            assert!(self.replay.is_empty(), "recovery: changes kept for replay without recovery");
            assert!(self.unclaimed.is_empty(), "recovery: unclaimed handles kept without recovery");
        }
    }
}
