//! What one connection may hold: its queue of outgoing messages
//! ([`Outbox`]) and its requests in flight ([`RequestBudget`]).
//!
//! An [`Outbox`] is the queue between whoever answers a peer (an OST
//! thread, a connection's reader, the client driver) and the task that
//! writes to the peer's socket (`writer`). Pushing never blocks, so an OST
//! thread never waits for a slow client. The queue counts its bytes and
//! messages (those being written included) against [`QueueLimits`]:
//!
//! - over the soft limits, the connection's reader waits
//!   ([`Outbox::below_soft`]) before it reads another request: a peer that
//!   does not read its replies is slowed, and TCP's own flow control then
//!   slows its sending;
//! - over the hard limits, a push closes the connection and frees the
//!   queue: a peer is never allowed to grow the server's memory;
//! - a writer that makes no progress for `stall_timeout` closes it too
//!   (in `writer`).
//!
//! Closing drops every queued message at once; later pushes are dropped
//! as they come. Finishing instead lets the writer send what is queued
//! (and a last message, such as `Refused` with its reason) and then shut
//! the socket.
//!
//! A [`RequestBudget`] bounds the requests a connection's reader has
//! handed on and that are not yet handled, in messages and in bytes (a
//! write's data, or the reply a read will take): the reader waits for room
//! before it hands an OST thread more.

use crate::limits::QueueLimits;
use lanefs_core::msg::{ToClient, ToOst};
use lanefs_proto::wire::Wire;
use std::collections::VecDeque;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A message in the queue, with the bytes it is counted for.
pub struct Queued {
    pub wire: Wire,
    pub cost: usize,
}

/// The message was not queued: the connection is closed (or closing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the connection is closed; the message was dropped")]
pub struct NotQueued;

enum Phase {
    Open,
    /// Sending what is queued, then the socket is shut.
    Finishing,
    /// Queue dropped; the reason the connection closed.
    Closed(String),
}

struct State {
    queue: VecDeque<Queued>,
    /// Bytes and messages queued or being written.
    bytes: usize,
    messages: usize,
    phase: Phase,
}

/// A connection's bounded queue of outgoing messages.
pub struct Outbox {
    limits: QueueLimits,
    state: Mutex<State>,
    /// Wakes the writer (its only consumer: `notify_one` keeps a permit).
    to_writer: Notify,
    /// Wakes those waiting for the queue to drain below its soft limits or
    /// to close.
    changed: Notify,
}

impl Outbox {
    pub fn new(limits: QueueLimits) -> Arc<Outbox> {
        let state = State { queue: VecDeque::new(), bytes: 0, messages: 0, phase: Phase::Open };
        Arc::new(Outbox { limits, state: Mutex::new(state), to_writer: Notify::new(), changed: Notify::new() })
    }

    pub fn limits(&self) -> &QueueLimits {
        &self.limits
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("outbox lock")
    }

    /// Queue `wire` for the peer. Past the hard limits the connection is
    /// closed (with the reason) and everything queued is dropped.
    pub fn push(&self, wire: Wire) -> Result<(), NotQueued> {
        let cost = cost_of(&wire);
        let mut state = self.state();
        if !matches!(state.phase, Phase::Open) {
            return Err(NotQueued);
        }
        if state.bytes + cost > self.limits.bytes_max || state.messages + 1 > self.limits.messages_max {
            let reason = format!(
                "the peer does not read its messages: {} bytes in {} messages queued, over the limit of {} bytes \
                 and {} messages",
                state.bytes + cost,
                state.messages + 1,
                self.limits.bytes_max,
                self.limits.messages_max
            );
            drop(state);
            tracing::warn!("closing a connection: {reason}");
            self.abort(&reason);
            return Err(NotQueued);
        }
        state.bytes += cost;
        state.messages += 1;
        state.queue.push_back(Queued { wire, cost });
        drop(state);
        self.to_writer.notify_one();
        Ok(())
    }

    /// Send what is queued, then `last` if given, then shut the socket;
    /// nothing else is queued after it. No effect once closed or finishing.
    pub fn finish(&self, last: Option<Wire>) {
        let mut state = self.state();
        if !matches!(state.phase, Phase::Open) {
            return;
        }
        if let Some(wire) = last {
            let cost = cost_of(&wire);
            state.bytes += cost;
            state.messages += 1;
            state.queue.push_back(Queued { wire, cost });
        }
        state.phase = Phase::Finishing;
        drop(state);
        self.to_writer.notify_one();
    }

    /// The connection is over: drop everything queued, and every later
    /// push. A finishing queue is left to finish (its writer is bounded by
    /// the stall timeout).
    pub fn close(&self, reason: &str) {
        self.end(reason, false);
    }

    /// As [`Outbox::close`], finishing or not (the writer is stuck, or the
    /// peer broke a limit).
    pub fn abort(&self, reason: &str) {
        self.end(reason, true);
    }

    fn end(&self, reason: &str, finishing_too: bool) {
        let mut state = self.state();
        match state.phase {
            Phase::Open => {}
            Phase::Finishing if finishing_too => {}
            _ => return,
        }
        // What the writer holds goes too: it stops at once (see `writer`).
        let dropped = std::mem::take(&mut state.queue);
        (state.bytes, state.messages) = (0, 0);
        state.phase = Phase::Closed(reason.to_string());
        drop(state);
        drop(dropped); // the memory goes now, outside the lock
        self.to_writer.notify_one();
        self.changed.notify_waiters();
    }

    /// The writer's next message; `None` when it should stop (see
    /// [`Outbox::is_closed`] for whether to shut the socket politely).
    pub async fn next(&self) -> Option<Queued> {
        loop {
            let notified = self.to_writer.notified();
            {
                let mut state = self.state();
                match state.phase {
                    Phase::Closed(_) => return None,
                    Phase::Open | Phase::Finishing => {}
                }
                if let Some(queued) = state.queue.pop_front() {
                    return Some(queued);
                }
                if matches!(state.phase, Phase::Finishing) {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// The next message if one is queued (for batching).
    pub fn try_next(&self) -> Option<Queued> {
        let mut state = self.state();
        match state.phase {
            Phase::Closed(_) => None,
            Phase::Open | Phase::Finishing => state.queue.pop_front(),
        }
    }

    /// The writer has sent `messages` messages of `bytes` bytes.
    pub fn written(&self, messages: usize, bytes: usize) {
        let mut state = self.state();
        if matches!(state.phase, Phase::Closed(_)) {
            return; // the counts were dropped with the queue's
        }
        state.bytes -= bytes.min(state.bytes);
        state.messages -= messages.min(state.messages);
        let below = !self.over_soft(&state);
        drop(state);
        if below {
            self.changed.notify_waiters();
        }
    }

    fn over_soft(&self, state: &State) -> bool {
        state.bytes > self.limits.bytes_soft || state.messages > self.limits.messages_soft
    }

    /// Wait while the queue is over its soft limits (returns at once if it
    /// is not, or if the connection is closed).
    pub async fn below_soft(&self) {
        loop {
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable();
            {
                let state = self.state();
                if !self.over_soft(&state) || matches!(state.phase, Phase::Closed(_)) {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Wait until the connection is closed; the reason.
    pub async fn closed(&self) -> String {
        loop {
            let mut notified = pin!(self.changed.notified());
            notified.as_mut().enable();
            if let Phase::Closed(reason) = &self.state().phase {
                return reason.clone();
            }
            notified.await;
        }
    }

    pub fn is_closed(&self) -> bool {
        matches!(self.state().phase, Phase::Closed(_))
    }

    /// Bytes queued or being written.
    pub fn queued_bytes(&self) -> usize {
        self.state().bytes
    }
}

/// The bytes a queued message is counted for: its bulk data and its
/// fixed size, plus the encoded size of the messages that carry lists or
/// text (MDS replies, statistics, reasons).
pub fn cost_of(wire: &Wire) -> usize {
    const FIXED: usize = std::mem::size_of::<Wire>();
    match wire {
        Wire::ToClient { message: ToClient::ReadReply { result: Ok(data), .. }, .. } => FIXED + data.len() as usize,
        Wire::ToOst { message: ToOst::Write { data, .. }, .. } => FIXED + data.len() as usize,
        Wire::MdsReply { .. } | Wire::StatsReply { .. } | Wire::Refused { .. } | Wire::Mds { .. } => {
            FIXED + bincode::serialized_size(wire).unwrap_or(0) as usize
        }
        _ => FIXED,
    }
}

/// Bounds on a connection's requests in flight: messages handed on and
/// not yet handled, and their bytes.
pub struct RequestBudget {
    messages: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    bytes_max: u32,
}

/// Room for one request; dropping it (when the request has been handled)
/// gives the room back.
pub struct InFlight {
    _message: OwnedSemaphorePermit,
    _bytes: Option<OwnedSemaphorePermit>,
    /// A count of requests in flight this one is part of, besides its
    /// connection's budget (see [`InFlight::counted`]).
    gauge: Option<Arc<AtomicU64>>,
}

impl InFlight {
    /// Count this request in `gauge` too (requests in flight at one
    /// target, over all its connections) until it is dropped.
    pub fn counted(mut self, gauge: &Arc<AtomicU64>) -> InFlight {
        if let Some(old) = self.gauge.replace(gauge.clone()) {
            old.fetch_sub(1, Ordering::Relaxed);
        }
        gauge.fetch_add(1, Ordering::Relaxed);
        self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(gauge) = &self.gauge {
            gauge.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InFlight")
    }
}

impl RequestBudget {
    pub fn new(messages_max: usize, bytes_max: u64) -> RequestBudget {
        let bytes_max = bytes_max.clamp(1, u64::from(u32::MAX)) as u32;
        RequestBudget {
            messages: Arc::new(Semaphore::new(messages_max.max(1))),
            bytes: Arc::new(Semaphore::new(bytes_max as usize)),
            bytes_max,
        }
    }

    /// Wait for room for a request of `bytes` bytes (a larger one than the
    /// whole budget takes all of it).
    pub async fn acquire(&self, bytes: u64) -> InFlight {
        let message = self.messages.clone().acquire_owned().await.expect("the semaphore is never closed");
        let bytes = bytes.min(u64::from(self.bytes_max)) as u32;
        let bytes = match bytes {
            0 => None,
            n => Some(self.bytes.clone().acquire_many_owned(n).await.expect("the semaphore is never closed")),
        };
        InFlight { _message: message, _bytes: bytes, gauge: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> QueueLimits {
        QueueLimits {
            bytes_soft: 10_000,
            bytes_max: 50_000,
            messages_soft: 100,
            messages_max: 1000,
            stall_timeout: Duration::from_secs(1),
        }
    }

    fn read_reply(len: usize) -> Wire {
        Wire::ToClient {
            ost: 0,
            message: ToClient::ReadReply { xid: lanefs_core::Xid(1), result: Ok(vec![7u8; len].into()) },
        }
    }

    #[tokio::test]
    async fn over_the_soft_limit_the_reader_waits_until_the_writer_catches_up() {
        let outbox = Outbox::new(limits());
        outbox.push(read_reply(4000)).unwrap();
        tokio::time::timeout(Duration::from_millis(10), outbox.below_soft()).await.expect("below: no wait");
        outbox.push(read_reply(8000)).unwrap();
        assert!(outbox.queued_bytes() > 10_000);
        let mut waiting = tokio::spawn({
            let outbox = outbox.clone();
            async move { outbox.below_soft().await }
        });
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut waiting).await.is_err(), "over: waits");
        let first = outbox.next().await.unwrap();
        outbox.written(1, first.cost);
        tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("woken when below").unwrap();
    }

    #[tokio::test]
    async fn past_the_hard_limit_the_connection_closes_and_the_queue_is_freed() {
        let outbox = Outbox::new(limits());
        for _ in 0..4 {
            outbox.push(read_reply(10_000)).unwrap();
        }
        assert_eq!(outbox.push(read_reply(10_000)), Err(NotQueued));
        assert!(outbox.is_closed());
        assert_eq!(outbox.queued_bytes(), 0, "everything queued is dropped");
        assert!(outbox.closed().await.contains("does not read"));
        assert!(outbox.next().await.is_none(), "the writer stops");
        assert_eq!(outbox.push(Wire::Pong), Err(NotQueued), "later pushes are dropped");
        // Messages count as well as bytes.
        let outbox = Outbox::new(QueueLimits { bytes_max: 1 << 30, ..limits() });
        for _ in 0..1000 {
            outbox.push(Wire::Pong).unwrap();
        }
        assert_eq!(outbox.push(Wire::Pong), Err(NotQueued));
    }

    #[tokio::test]
    async fn finishing_sends_what_is_queued_then_the_last_word_and_closing_drops_it() {
        let outbox = Outbox::new(limits());
        outbox.push(Wire::Pong).unwrap();
        outbox.finish(Some(Wire::Refused { reason: "bye".into() }));
        assert_eq!(outbox.push(Wire::Pong), Err(NotQueued));
        outbox.close("the connection task ended"); // does not cut a finishing queue short
        assert!(matches!(outbox.next().await, Some(Queued { wire: Wire::Pong, .. })));
        assert!(matches!(outbox.next().await, Some(Queued { wire: Wire::Refused { .. }, .. })));
        assert!(outbox.next().await.is_none() && !outbox.is_closed());
        let outbox = Outbox::new(limits());
        outbox.push(read_reply(5000)).unwrap();
        outbox.close("peer gone");
        assert_eq!((outbox.queued_bytes(), outbox.next().await.is_none()), (0, true));
        assert_eq!(outbox.closed().await, "peer gone");
    }

    #[tokio::test]
    async fn requests_wait_for_room_in_flight() {
        let budget = RequestBudget::new(2, 1000);
        let a = budget.acquire(600).await;
        let waits = |bytes| tokio::time::timeout(Duration::from_millis(20), budget.acquire(bytes));
        assert!(waits(600).await.is_err(), "bytes bound");
        let b = budget.acquire(0).await;
        assert!(waits(0).await.is_err(), "messages bound");
        drop((a, b));
        let whole = waits(1 << 30).await.expect("a request larger than the budget takes all of it");
        assert!(waits(1).await.is_err());
        drop(whole);
    }
}
