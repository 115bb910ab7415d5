//! The lock server alone: malformed and evicted clients' requests, and
//! the callback deadline that I/O prolongs.
// Tests pick the one kind of message they look for.
#![allow(clippy::wildcard_enum_match_arm)]

use super::*;
use crate::ldlm::EnqueueFlags;

const MIB: u64 = 1 << 20;

fn pw(start: u64, end: u64) -> LockRequest {
    LockRequest::new(LockMode::ProtectedWrite, Extent::new(start, end))
}

fn drain(s: &mut LockServer) -> (Vec<(ClientId, ToClient)>, Vec<LockEvent>) {
    let mut out = Vec::new();
    while let Some(m) = s.poll_transmit() {
        out.push(m);
    }
    let mut events = Vec::new();
    while let Some(e) = s.poll_event() {
        events.push(e);
    }
    (out, events)
}

#[test]
fn malformed_requests_are_refused_not_fatal() {
    let mut s = LockServer::new(LockServerConfig::default());
    s.record_events();
    let bad = [
        pw(100, 5000),
        pw(0, 4094),
        LockRequest::new(LockMode::Group(crate::ldlm::GroupId(1)), Extent::new(0, MIB - 1)),
        LockRequest::new(LockMode::Group(crate::ldlm::GroupId(0)), Extent::WHOLE),
    ];
    for (i, request) in bad.into_iter().enumerate() {
        s.handle_enqueue(Instant(0), ClientId(1), Xid(i as u64), ObjectId(0), request);
    }
    // An inverted extent can only come from a peer's bytes.
    let inverted = LockRequest { extent: Extent { start: 8192, end: 0 }, ..pw(0, 4095) };
    s.handle_enqueue(Instant(0), ClientId(1), Xid(9), ObjectId(0), inverted);
    let (out, events) = drain(&mut s);
    assert_eq!(out.len(), 5);
    assert!(out.iter().all(|(_, m)| matches!(m, ToClient::Enqueue { reply: EnqueueReply::Invalid, .. })));
    assert_eq!(events.len(), 5);
    assert_eq!(s.lock_count(), 0);
    assert_eq!(s.counters_total().refusals, 5);
    assert!(s.resources.is_empty(), "a refused request leaves no resource behind");
    s.check_invariants();
}

#[test]
fn an_evicted_clients_enqueue_is_a_refusal_event() {
    let mut s =
        LockServer::new(LockServerConfig { callback_timeout: Duration::from_secs(1), ..LockServerConfig::default() });
    s.record_events();
    s.handle_enqueue(Instant(0), ClientId(1), Xid(1), ObjectId(0), pw(0, MIB - 1));
    s.handle_enqueue(Instant(0), ClientId(2), Xid(2), ObjectId(0), pw(MIB, 2 * MIB - 1));
    s.handle_timeout(Instant(2_000_000_000));
    drain(&mut s);
    assert!(s.is_evicted(ClientId(1)));
    s.handle_enqueue(Instant(3), ClientId(1), Xid(3), ObjectId(0), pw(4 * MIB, 5 * MIB - 1));
    let (out, events) = drain(&mut s);
    assert_eq!(out, vec![(ClientId(1), ToClient::Enqueue { xid: Xid(3), reply: EnqueueReply::Evicted })]);
    assert_eq!(
        events,
        vec![LockEvent::Refused {
            client: ClientId(1),
            object: ObjectId(0),
            extent: Extent::new(4 * MIB, 5 * MIB - 1)
        }]
    );
    s.handle_connect(ClientId(1));
    let flags = EnqueueFlags { no_expand: true, speculative: false };
    s.handle_enqueue(Instant(4), ClientId(1), Xid(4), ObjectId(0), LockRequest { flags, ..pw(8 * MIB, 9 * MIB - 1) });
    let (out, _) = drain(&mut s);
    // Accepted again: it waits behind c2's expanded lock, which is called back.
    assert!(matches!(out[0].1, ToClient::Enqueue { reply: EnqueueReply::Waiting { .. }, .. }), "{out:?}");
    assert_eq!(out[1], (ClientId(2), ToClient::Blocking { lock: LockHandle(2) }));
}

#[test]
fn io_under_a_called_back_lock_moves_its_deadline() {
    // One called-back lock, then more than the few the server walks
    // directly: I/O of the holder moves the deadline, I/O of another
    // client does not.
    let second = |secs: u64| Instant(secs * 1_000_000_000);
    for objects in [1, 20] {
        let mut s = LockServer::new(LockServerConfig {
            callback_timeout: Duration::from_secs(10),
            ..LockServerConfig::default()
        });
        for k in 0..objects {
            let object = ObjectId(k);
            s.handle_enqueue(second(0), ClientId(1), Xid(2 * k), object, pw(0, MIB - 1));
            s.handle_enqueue(second(0), ClientId(2), Xid(2 * k + 1), object, pw(2 * MIB, 3 * MIB - 1));
        }
        drain(&mut s);
        assert_eq!(s.poll_timeout(), Some(second(10)), "{objects} callbacks sent at 0 s");
        for k in 0..objects {
            s.prolong(second(5), ClientId(2), ObjectId(k), Extent::new(0, MIB - 1));
        }
        assert_eq!(s.poll_timeout(), Some(second(10)), "another client's I/O moves nothing");
        for k in 0..objects {
            s.prolong(second(5), ClientId(1), ObjectId(k), Extent::new(0, MIB - 1));
        }
        assert_eq!(s.poll_timeout(), Some(second(15)), "{objects} holders' I/O at 5 s");
        s.check_invariants();
    }
}

#[test]
fn a_cancel_grants_the_waiters_nothing_blocks_any_more() {
    let mut s = LockServer::new(LockServerConfig::default());
    let exact = |mode, start, end| LockRequest {
        flags: EnqueueFlags { no_expand: true, speculative: false },
        ..LockRequest::new(mode, Extent::new(start, end))
    };
    let (group, write) = (LockMode::Group(crate::ldlm::GroupId(5)), LockMode::ProtectedWrite);
    let enqueue = |s: &mut LockServer, client: u32, request| {
        s.handle_enqueue(Instant(0), ClientId(client), Xid(u64::from(client)), ObjectId(0), request);
    };
    enqueue(&mut s, 1, exact(write, 0, 4095)); // granted
    enqueue(&mut s, 2, LockRequest::new(group, Extent::WHOLE)); // behind 1
    enqueue(&mut s, 3, exact(write, MIB, 2 * MIB - 1)); // behind 2's GROUP lock
    enqueue(&mut s, 4, LockRequest::new(group, Extent::WHOLE)); // behind 1 and 3
    assert_eq!(s.waiting_count(), 3);
    let handle = |out: &[(ClientId, ToClient)], client| match out.iter().find(|(c, _)| *c == ClientId(client)) {
        Some((_, ToClient::Enqueue { reply: EnqueueReply::Granted { lock, .. }, .. })) => *lock,
        other => panic!("client {client}: {other:?}"),
    };
    let (out, _) = drain(&mut s);
    s.handle_cancel(Instant(1), ClientId(1), handle(&out, 1));
    // 2 goes first; 4, of its gid, joined it in the queue ahead of 3, whom
    // 2 blocks.
    let (out, _) = drain(&mut s);
    let completed: Vec<ClientId> =
        out.iter().filter(|(_, m)| matches!(m, ToClient::Completion { .. })).map(|(c, _)| *c).collect();
    assert_eq!(completed, [ClientId(2), ClientId(4)]);
    assert_eq!(s.waiting_count(), 1);
    s.check_invariants();
}

#[test]
fn a_waiter_is_not_overtaken_by_one_behind_it() {
    let mut s = LockServer::new(LockServerConfig::default());
    let exact =
        |start, end| LockRequest { flags: EnqueueFlags { no_expand: true, speculative: false }, ..pw(start, end) };
    let enqueue = |s: &mut LockServer, client: u32, request| {
        s.handle_enqueue(Instant(0), ClientId(client), Xid(u64::from(client)), ObjectId(0), request);
        let (out, _) = drain(s);
        match out.iter().find(|(c, m)| *c == ClientId(client) && matches!(m, ToClient::Enqueue { .. })) {
            Some((_, ToClient::Enqueue { reply: EnqueueReply::Granted { lock, .. }, .. })) => Some(*lock),
            Some((_, ToClient::Enqueue { reply: EnqueueReply::Waiting { .. }, .. })) => None,
            other => panic!("client {client}: {other:?}"),
        }
    };
    let completed = |s: &mut LockServer| -> Vec<ClientId> {
        let (out, _) = drain(s);
        out.iter().filter(|(_, m)| matches!(m, ToClient::Completion { .. })).map(|(c, _)| *c).collect()
    };
    let first = enqueue(&mut s, 1, exact(0, 4095)).expect("nothing conflicts");
    let second = enqueue(&mut s, 2, exact(MIB, MIB + 4095)).expect("nothing conflicts");
    assert_eq!(enqueue(&mut s, 3, exact(0, 4095)), None, "1 blocks it");
    assert_eq!(enqueue(&mut s, 4, exact(MIB, MIB + 4095)), None, "2 blocks it");
    // Nothing granted blocks 4 any more, but 3, ahead of it, is still
    // blocked: the rescan stops there.
    s.handle_cancel(Instant(1), ClientId(2), second);
    assert_eq!(completed(&mut s), []);
    assert_eq!(s.waiting_count(), 2);
    s.handle_cancel(Instant(2), ClientId(1), first);
    assert_eq!(completed(&mut s), [ClientId(3), ClientId(4)]);
    assert_eq!(s.waiting_count(), 0);
    s.check_invariants();
}

/// One client fills only its own share of the lock table: past
/// [`LOCKS_PER_CLIENT_MAX`] its requests are refused (`TooMany`, or
/// `Refused` for lockahead) while another client's are granted, and once
/// it gives a lock back it may take one again.
#[test]
fn a_client_past_its_share_of_locks_is_refused_and_the_others_are_not() {
    let mut s = LockServer::new(LockServerConfig::default());
    let read = |page: u64| {
        let mut r = LockRequest::new(LockMode::ProtectedRead, Extent::new(page * 4096, page * 4096 + 4095));
        r.flags.no_expand = true;
        r
    };
    for i in 0..LOCKS_PER_CLIENT_MAX as u64 {
        s.handle_enqueue(Instant(0), ClientId(1), Xid(i), ObjectId(i % 64), read(i));
    }
    let granted: Vec<LockHandle> = std::iter::from_fn(|| s.poll_transmit())
        .filter_map(|(_, m)| match m {
            ToClient::Enqueue { reply: EnqueueReply::Granted { lock, .. }, .. } => Some(lock),
            _ => None,
        })
        .collect();
    assert_eq!(granted.len(), LOCKS_PER_CLIENT_MAX);
    s.check_invariants();
    let ahead = LockRequest { flags: EnqueueFlags { speculative: true, no_expand: false }, ..read(0) };
    s.handle_enqueue(Instant(0), ClientId(1), Xid(1 << 40), ObjectId(99), read(0));
    s.handle_enqueue(Instant(0), ClientId(1), Xid((1 << 40) + 1), ObjectId(99), ahead);
    s.handle_enqueue(Instant(0), ClientId(2), Xid(1), ObjectId(99), read(0));
    let (out, _) = drain(&mut s);
    let replies: Vec<(ClientId, EnqueueReply)> = out
        .into_iter()
        .filter_map(|(c, m)| match m {
            ToClient::Enqueue { reply, .. } => Some((c, reply)),
            _ => None,
        })
        .collect();
    assert_eq!(replies[0], (ClientId(1), EnqueueReply::TooMany));
    assert_eq!(replies[1], (ClientId(1), EnqueueReply::Refused));
    assert!(matches!(replies[2], (ClientId(2), EnqueueReply::Granted { .. })), "{:?}", replies[2]);
    assert_eq!(s.lock_count(), LOCKS_PER_CLIENT_MAX + 1);
    s.handle_cancel(Instant(0), ClientId(1), granted[0]);
    s.handle_enqueue(Instant(0), ClientId(1), Xid((1 << 40) + 2), ObjectId(99), read(1));
    let (out, _) = drain(&mut s);
    assert!(out.iter().any(|(_, m)| matches!(m, ToClient::Enqueue { reply: EnqueueReply::Granted { .. }, .. })));
    s.check_invariants();
}

/// A node that locks ever new objects, one after another, leaves no
/// resource behind once it gives each lock back, is evicted or goes: the
/// table is bounded by the locks held, and the counters are kept.
#[test]
fn a_resource_goes_with_its_last_lock_and_its_counters_stay() {
    let mut s = LockServer::new(LockServerConfig::default());
    let objects = 10_000u64;
    for o in 0..objects {
        s.handle_enqueue(Instant(0), ClientId(1), Xid(o), ObjectId(o), pw(0, MIB - 1));
        let Some((_, ToClient::Enqueue { reply: EnqueueReply::Granted { lock, .. }, .. })) = s.poll_transmit() else {
            panic!("granted")
        };
        s.handle_cancel(Instant(0), ClientId(1), lock);
        assert!(s.resources.len() <= 1);
    }
    assert!(s.resources.is_empty(), "{} resources left", s.resources.len());
    let total = s.counters_total();
    assert_eq!((total.enqueues, total.grants, total.cancels), (objects, objects, objects));

    // An eviction and a departure leave none either; a lockahead request
    // refused beside another's lock adds none.
    s.handle_enqueue(Instant(0), ClientId(1), Xid(1), ObjectId(1), pw(0, MIB - 1));
    let mut ahead = pw(0, 4095);
    ahead.flags = EnqueueFlags { speculative: true, ..EnqueueFlags::default() };
    s.handle_enqueue(Instant(0), ClientId(2), Xid(2), ObjectId(1), ahead);
    s.handle_enqueue(Instant(0), ClientId(2), Xid(3), ObjectId(2), pw(0, MIB - 1));
    s.handle_enqueue(Instant(0), ClientId(3), Xid(4), ObjectId(3), pw(0, MIB - 1));
    assert_eq!(s.resources.len(), 3);
    s.evict(Instant(0), ClientId(1));
    s.forget_client(Instant(0), ClientId(2));
    s.handle_timeout(Instant(0));
    assert_eq!(s.resources.keys().copied().collect::<Vec<_>>(), [ObjectId(3)]);
    s.check_invariants();
    assert_eq!(s.counters_total().evictions, 1);
}

/// A destroyed object's waiting locks fail (their clients are told) rather
/// than be granted once the lock ahead goes; the holder keeps its lock
/// until it cancels, and nothing is granted then.
#[test]
fn the_locks_waiting_on_a_destroyed_object_fail() {
    let mut s = LockServer::new(LockServerConfig::default());
    let group = LockRequest::new(LockMode::Group(crate::ldlm::GroupId(5)), Extent::WHOLE);
    s.handle_enqueue(Instant(0), ClientId(1), Xid(1), ObjectId(7), group);
    s.handle_enqueue(Instant(1), ClientId(2), Xid(2), ObjectId(7), pw(0, MIB - 1));
    s.handle_enqueue(Instant(1), ClientId(3), Xid(3), ObjectId(8), pw(0, MIB - 1));
    drain(&mut s);
    assert_eq!(s.waiting_count(), 1);
    assert_eq!(s.object_gone(ObjectId(7)), 1);
    let (out, _) = drain(&mut s);
    let failed = ToClient::WaitFailed { lock: LockHandle(2), error: IoError::NoSuchObject };
    assert_eq!(out, vec![(ClientId(2), failed)]);
    s.check_invariants();
    s.handle_cancel(Instant(2), ClientId(1), LockHandle(1));
    let (out, _) = drain(&mut s);
    assert!(out.is_empty(), "nothing left to grant: {out:?}");
    assert_eq!(s.lock_count(), 1, "the other object's lock stays");
    assert_eq!(s.object_gone(ObjectId(99)), 0, "an object with no locks");
    s.check_invariants();
}
