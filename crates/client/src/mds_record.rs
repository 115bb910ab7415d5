//! What a client tells its MDS again when the MDS restarts or the
//! connection to it is lost: the file locks it holds and the files it
//! keeps open, as Lustre's clients replay their flock locks and reopen
//! their files in the MDT's recovery. The MDS forgets both with the
//! connection (it keeps them in memory); during its recovery grace it
//! grants replayed locks only (see `mds_server`).
//!
//! The record follows the calls that pass through the driver: a lock is
//! recorded when the MDS grants it, an unlock and a close when they are
//! sent (the MDS does them whatever happens), an open when the MDS has
//! recorded it. A replayed lock the MDS refuses (another client took it
//! while this one was away) is lost: it is dropped from the record and
//! said in the log, as Lustre reports a lock it could not replay.
//!
//! Each granted lock comes with the MDS's seal of it (see
//! `lanefs_server::flock_seal`), which its replay carries: the record keeps, per
//! file, owner and kind, the seals of the locks it holds (a lock cut by an
//! unlock keeps its seal, which covers every piece), and replays each lock
//! with the newest seal that covers it. A replay without one is refused
//! by the MDS, and the lock is lost (said in the log).
//!
//! Bounds: as the MDS's (`lanefs_proto::flock::LOCKS_PER_CLIENT_MAX` locks,
//! `lanefs_mds::opens::OPENS_MAX` files), since the record only holds what
//! the MDS granted; seals only of locks held (those no held lock needs go
//! when a seal is added for the same file, owner and kind, or when the
//! owner's locks on the file go).

use lanefs_proto::flock::FlockSeal;
use lanefs_proto::flock::{FlockAnswer, FlockKind, FlockOwner, FlockRequest};
use lanefs_proto::flock::{FlockTable, SetOutcome};
use lanefs_proto::wire::{FlockCall, MdsAnswer, MdsCall};
use lanefs_proto::Fid;
use std::collections::HashMap;
use tracing::warn;

/// A call in flight whose answer changes the record.
#[derive(Debug)]
enum Tracked {
    Set(FlockRequest),
    Replay(FlockRequest),
    Opened(Fid),
    /// A `NamespaceOpen`: the file it opens is known from its answer.
    OpenedBy,
}

#[derive(Debug, Default)]
pub(super) struct MdsRecord {
    /// This client's granted locks (every owner's `client` is 0 here).
    locks: FlockTable,
    /// The MDS's seals of the locks held, by file, lock owner and kind.
    seals: HashMap<(Fid, u64, FlockKind), Vec<FlockSeal>>,
    /// Files kept open, with how many opens of each.
    opens: HashMap<Fid, u32>,
    in_flight: HashMap<u64, Tracked>,
}

impl MdsRecord {
    /// Nothing to tell a new MDS connection.
    pub fn is_empty(&self) -> bool {
        self.locks.counts().0 == 0 && self.opens.is_empty()
    }

    /// `call` is being sent as request `id`.
    pub fn sent(&mut self, id: u64, call: &MdsCall) {
        match call {
            MdsCall::Flock(FlockCall::Set { request, replay, .. }) => {
                let request = FlockRequest { owner: FlockOwner { client: 0, ..request.owner }, ..*request };
                let tracked = if *replay { Tracked::Replay(request) } else { Tracked::Set(request) };
                self.in_flight.insert(id, tracked);
            }
            MdsCall::Flock(FlockCall::UnlockOwner { file, owner }) => {
                self.locks.unlock_owner(*file, FlockOwner { client: 0, owner: *owner });
                self.seals.retain(|&(f, o, _), _| (f, o) != (*file, *owner));
            }
            MdsCall::Opened { fid } => {
                self.in_flight.insert(id, Tracked::Opened(*fid));
            }
            MdsCall::NamespaceOpen { .. } => {
                self.in_flight.insert(id, Tracked::OpenedBy);
            }
            MdsCall::Closed { fid } => {
                if let Some(count) = self.opens.get_mut(fid) {
                    *count -= 1;
                    if *count == 0 {
                        self.opens.remove(fid);
                    }
                }
            }
            _ => {}
        }
    }

    /// The MDS answered request `id`.
    pub fn answered(&mut self, id: u64, answer: &MdsAnswer) {
        match (self.in_flight.remove(&id), answer) {
            (Some(Tracked::Set(request)), MdsAnswer::Flock(FlockAnswer::Granted)) => self.apply(request),
            (Some(Tracked::Set(request)), MdsAnswer::FlockGranted(seal)) => {
                self.apply(request);
                self.keep_seal(&request, *seal);
            }
            (Some(Tracked::Replay(_)), MdsAnswer::Flock(FlockAnswer::Granted)) => {}
            (Some(Tracked::Replay(request)), MdsAnswer::FlockGranted(seal)) => self.keep_seal(&request, *seal),
            (Some(Tracked::Replay(request)), refused) => {
                warn!(
                    file = request.file.0,
                    start = request.start,
                    end = request.end,
                    ?refused,
                    "a file lock held before the MDS connection was lost could not be taken again: it is lost"
                );
                self.apply(FlockRequest { kind: None, ..request });
            }
            (Some(Tracked::Opened(fid)), MdsAnswer::Opened) => self.opened(fid),
            (
                Some(Tracked::OpenedBy),
                MdsAnswer::NamespaceOpened { reply: lanefs_proto::MdsReply::File(info), recorded: true },
            ) => self.opened(info.fid),
            _ => {}
        }
    }

    fn opened(&mut self, fid: Fid) {
        let count = self.opens.entry(fid).or_default();
        *count = count.saturating_add(1);
    }

    /// A call of [`MdsRecord::replay`] is being sent as request `id`: what
    /// it tells the MDS is in the record already.
    pub fn replayed(&mut self, id: u64, call: &MdsCall) {
        if let MdsCall::Flock(FlockCall::Set { request, .. }) = call {
            self.in_flight.insert(id, Tracked::Replay(*request));
        }
    }

    /// The connection is gone: answers to calls in flight will not come.
    pub fn lost(&mut self) {
        self.in_flight.clear();
    }

    /// Forget everything (the MDS stayed out of reach too long).
    pub fn clear(&mut self) {
        *self = MdsRecord::default();
    }

    /// The calls that tell a new MDS connection what this client holds.
    pub fn replay(&self) -> Vec<MdsCall> {
        let locks = self.locks.granted().map(|(file, lock)| {
            let request = FlockRequest {
                file,
                owner: lock.owner,
                pid: lock.pid,
                uid: lock.uid,
                kind: Some(lock.kind),
                start: lock.start,
                end: lock.end,
            };
            let seal = self.seals.get(&(file, lock.owner.owner, lock.kind)).and_then(|seals| {
                seals.iter().filter(|s| s.start <= lock.start && lock.end <= s.end).max_by_key(|s| s.grant).copied()
            });
            MdsCall::Flock(FlockCall::Set { request, wait: false, ticket: 0, replay: true, seal })
        });
        let opens = self.opens.iter().flat_map(|(fid, n)| (0..*n).map(|_| MdsCall::Opened { fid: *fid }));
        locks.chain(opens).collect()
    }

    /// Keep `seal`, the MDS's proof of the lock that covers `request` now;
    /// forget the seals of its file, owner and kind that no held lock needs.
    fn keep_seal(&mut self, request: &FlockRequest, seal: FlockSeal) {
        let Some(kind) = request.kind else { return };
        let key = (request.file, request.owner.owner, kind);
        let owner = FlockOwner { client: 0, owner: request.owner.owner };
        let held: Vec<(u64, u64)> = self
            .locks
            .granted()
            .filter(|(file, l)| *file == request.file && l.owner == owner && l.kind == kind)
            .map(|(_, l)| (l.start, l.end))
            .collect();
        let seals = self.seals.entry(key).or_default();
        seals.push(seal);
        seals.retain(|s| held.iter().any(|&(start, end)| s.start <= start && end <= s.end));
        if seals.is_empty() {
            self.seals.remove(&key);
        }
    }

    fn apply(&mut self, request: FlockRequest) {
        let (outcome, _) = self.locks.set((0, 0), request, false);
        if outcome != SetOutcome::Done(FlockAnswer::Granted) {
            warn!(?outcome, ?request, "a lock the MDS granted conflicts with this client's own record");
        }
    }

    pub fn check_invariants(&self) {
        self.locks.check_invariants();
        assert!(self.locks.granted().all(|(_, l)| l.owner.client == 0), "owners are this client's");
        assert!(self.opens.values().all(|&n| n > 0), "no zero open counts");
        assert_eq!(self.locks.counts().1, 0, "the record has no waiters");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_proto::flock::FlockKind;

    fn set(owner: u64, kind: Option<FlockKind>, start: u64, end: u64, replay: bool) -> MdsCall {
        let request =
            FlockRequest { file: Fid(5), owner: FlockOwner { client: 9, owner }, pid: 1, uid: 1000, kind, start, end };
        MdsCall::Flock(FlockCall::Set { request, wait: true, ticket: owner, replay, seal: None })
    }

    #[test]
    fn granted_locks_and_opens_are_replayed_and_a_refused_replay_is_dropped() {
        let mut r = MdsRecord::default();
        r.sent(1, &set(1, Some(FlockKind::Write), 0, 9, false));
        r.sent(2, &set(2, Some(FlockKind::Read), 20, 29, false));
        r.sent(3, &MdsCall::Opened { fid: Fid(5) });
        r.answered(1, &MdsAnswer::Flock(FlockAnswer::Granted));
        r.answered(2, &MdsAnswer::Flock(FlockAnswer::Deadlock));
        r.answered(3, &MdsAnswer::Opened);
        r.check_invariants();
        let replay = r.replay();
        assert_eq!(replay.len(), 2, "one lock (the refused one is not held) and one open: {replay:?}");
        r.lost();
        for (id, call) in (10..).zip(&replay) {
            r.replayed(id, call);
        }
        r.answered(10, &MdsAnswer::Flock(FlockAnswer::Free));
        r.answered(11, &MdsAnswer::Opened);
        r.check_invariants();
        assert_eq!(r.replay().len(), 1, "the refused replay is lost; the open stays once");
        r.sent(12, &MdsCall::Closed { fid: Fid(5) });
        assert!(r.is_empty());
    }
}
