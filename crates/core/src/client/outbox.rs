//! The client's outbox: what the client has to say, queued until its
//! driver asks.
//!
//! What it owns: the messages for the OSTs (`transmits`, drained by
//! `Client::poll_transmit`) and the events for the application
//! (`events`, drained by `Client::poll_event`), each in the order made.
//! Every other part hands its outputs here rather than keeping queues of
//! its own, so that the order of outputs is the order of the client's
//! decisions.
//!
//! Invariants ([`Outbox::check_invariants`]):
//! * an operation's end is reported once: no two `OpDone` events queued
//!   name the same operation (the operations table hands each id out once
//!   and takes it out when it ends, `ops.rs` reports it then);
//! * neither queue holds more than a driver lets pile up between two
//!   drains: [`OUTBOX_MESSAGES_MAX`] each.

use super::error::ClientError;
use super::op_table::OpId;
use crate::msg::ToOst;
use crate::units::{Duration, OstIndex};
use std::collections::{BTreeSet, VecDeque};

/// Messages (or events) queued at most between two drains. The drivers
/// drain both queues after every input, and no input makes more than a
/// few per operation, lock or RPC it touches: a queue this long is a
/// driver that forgot to drain.
pub const OUTBOX_MESSAGES_MAX: usize = 1 << 24;

/// What a finished operation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpOutput {
    Written(u64),
    Read(Vec<u8>),
    /// A read of this many bytes by a client of phantom payloads.
    ReadPhantom(u64),
    Synced,
    Closed,
    /// A file's size, and the bytes of space its objects hold.
    Size {
        size: u64,
        allocated: u64,
    },
    Truncated,
    /// A hole punched or space reserved (`fallocate`).
    Allocated,
    GroupLocked,
    GroupUnlocked,
    LockaheadDone,
    /// Synchronous cache advice answered by every OST it went to.
    Advised,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    OpDone {
        op: OpId,
        result: Result<OpOutput, ClientError>,
    },
    /// Dirty data lost: the OST evicted this client, the connection to it
    /// was lost, or it refused a write RPC. The files concerned also fail
    /// their next fsync or close with [`ClientError::WriteLost`].
    DataLost {
        ost: OstIndex,
        bytes: u64,
    },
    /// `ost` restarted and keeps this client's requests until the clients
    /// it knew have replayed: at most `remaining` more, `clients_left` of
    /// them still to come (see [`crate::msg::ToClient::Recovering`]).
    OstRecovering {
        ost: OstIndex,
        remaining: Duration,
        clients_left: u32,
    },
}

#[derive(Debug, Default)]
pub(super) struct Outbox {
    transmits: VecDeque<(OstIndex, ToOst)>,
    events: VecDeque<ClientEvent>,
}

impl Outbox {
    /// `message` for `to`, to go out in the order queued.
    pub(super) fn transmit(&mut self, to: OstIndex, message: ToOst) {
        debug_assert!(self.transmits.len() < OUTBOX_MESSAGES_MAX, "outbox: transmits not drained");
        self.transmits.push_back((to, message));
    }

    /// `event` for the application, in the order queued.
    pub(super) fn event(&mut self, event: ClientEvent) {
        debug_assert!(self.events.len() < OUTBOX_MESSAGES_MAX, "outbox: events not drained");
        self.events.push_back(event);
    }

    pub(super) fn pop_transmit(&mut self) -> Option<(OstIndex, ToOst)> {
        self.transmits.pop_front()
    }

    pub(super) fn pop_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// Events queued now: a mark to [`Outbox::truncate_events`] back to.
    pub(super) fn events_len(&self) -> usize {
        self.events.len()
    }

    /// Forgets the events queued after `mark` (a planted bug's silence).
    pub(super) fn truncate_events(&mut self, mark: usize) {
        self.events.truncate(mark);
    }

    /// Panics if an operation's end is queued twice, or a queue is past its
    /// bound.
    pub fn check_invariants(&self) {
        assert!(self.transmits.len() <= OUTBOX_MESSAGES_MAX, "outbox: transmits past their bound");
        assert!(self.events.len() <= OUTBOX_MESSAGES_MAX, "outbox: events past their bound");
        let mut done: BTreeSet<OpId> = BTreeSet::new();
        for event in &self.events {
            if let ClientEvent::OpDone { op, .. } = event {
                assert!(done.insert(*op), "outbox: the end of {op:?} reported twice");
            }
        }
    }
}
