//! The OST service's unit tests.

use super::*;
use crate::ldlm::{LockMode, LockRequest};
use crate::msg::{Cut, EnqueueReply};
use crate::store::MemStore;

const OBJECT: ObjectId = ObjectId(7);
const MIB: u64 = 1 << 20;

fn new_ost(policy: SyncLockCancel) -> Ost<MemStore> {
    let config = OstConfig { sync_lock_cancel: policy, ..OstConfig::default() };
    Ost::new(OstIndex(0), config, MemStore::default())
}

fn enqueue(ost: &mut Ost<MemStore>, now: Instant, client: u32, mode: LockMode, extent: Extent) {
    let request = LockRequest::new(mode, extent);
    ost.handle_message(now, ClientId(client), ToOst::Enqueue { xid: Xid(1), object: OBJECT, request });
}

fn drain(ost: &mut Ost<MemStore>) -> Vec<(ClientId, ToClient)> {
    std::iter::from_fn(|| ost.poll_transmit()).collect()
}

/// The handle of the lock just granted to `client` at once.
fn granted(messages: &[(ClientId, ToClient)], client: u32) -> LockHandle {
    messages
        .iter()
        .find_map(|(to, m)| match m {
            ToClient::Enqueue { reply: EnqueueReply::Granted { lock, .. }, .. } if *to == ClientId(client) => {
                Some(*lock)
            }
            _ => None,
        })
        .expect("granted at once")
}

fn completed(messages: &[(ClientId, ToClient)], client: u32) -> bool {
    messages.iter().any(|(to, m)| *to == ClientId(client) && matches!(m, ToClient::Completion { .. }))
}

/// Client 1 holds a PW lock on the first MiB, written to; client 2 asks
/// for an overlapping PW lock and waits; client 1 is called back.
fn contended(policy: SyncLockCancel) -> (Ost<MemStore>, LockHandle) {
    let mut ost = new_ost(policy);
    let t = Instant::ZERO;
    enqueue(&mut ost, t, 1, LockMode::ProtectedWrite, Extent::from_offset_len(0, MIB));
    let held = granted(&drain(&mut ost), 1);
    let data = Payload::Bytes(vec![1; 4096]);
    ost.handle_message(t, ClientId(1), ToOst::Write { xid: Xid(2), object: OBJECT, offset: 0, data });
    enqueue(&mut ost, t, 2, LockMode::ProtectedWrite, Extent::from_offset_len(0, MIB));
    let messages = drain(&mut ost);
    assert!(messages.iter().any(|(to, m)| *to == ClientId(1) && matches!(m, ToClient::Blocking { .. })));
    assert!(!completed(&messages, 2));
    (ost, held)
}

#[test]
fn a_cancel_that_must_sync_keeps_the_lock_until_the_sync_is_answered() {
    let (mut ost, held) = contended(SyncLockCancel::Always);
    let t = Instant::ZERO + Duration::from_ms(1);
    ost.handle_message(t, ClientId(1), ToOst::Cancel { lock: held });
    let request = ost.poll_sync().expect("the cancel asks for a sync");
    assert_eq!(request.object, Some(OBJECT));
    assert!(request.extent.contains(&Extent::from_offset_len(0, MIB)), "{:?}", request.extent);
    assert_eq!(ost.poll_sync(), None);
    assert!(!completed(&drain(&mut ost), 2), "the waiter is granted before the data is durable");
    assert_eq!(ost.locks().granted_lock(ClientId(1), held).map(|g| g.1), Some(LockMode::ProtectedWrite));
    ost.check_invariants();
    // A repeated cancel does not ask again.
    ost.handle_message(t, ClientId(1), ToOst::Cancel { lock: held });
    assert_eq!(ost.poll_sync(), None);
    ost.handle_synced(t + Duration::from_ms(8), request.token, &[]);
    assert!(completed(&drain(&mut ost), 2));
    assert_eq!(ost.locks().granted_lock(ClientId(1), held), None);
    assert_eq!(ost.syncs_pending(), 0);
    assert_eq!(ost.counters().cancel_syncs, 1);
    ost.check_invariants();
}

#[test]
fn the_policy_names_the_cancels_that_sync() {
    use LockMode::{ProtectedRead as PR, ProtectedWrite as PW};
    use SyncLockCancel::{Always, Blocking, Never};
    // (policy, lock mode, called back first, whether its cancel syncs)
    let cases = [
        (Never, PW, true, false),
        (Blocking, PW, true, true),
        (Blocking, PW, false, false),
        (Always, PW, false, true),
        (Always, PR, true, false),
    ];
    for (policy, mode, called_back, syncs) in cases {
        let mut ost = new_ost(policy);
        enqueue(&mut ost, Instant::ZERO, 1, mode, Extent::from_offset_len(0, MIB));
        let lock = granted(&drain(&mut ost), 1);
        if called_back {
            enqueue(&mut ost, Instant::ZERO, 2, PW, Extent::from_offset_len(0, MIB));
            drain(&mut ost);
        }
        ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Cancel { lock });
        let case = format!("{policy:?}, {mode}, called back: {called_back}");
        assert_eq!(ost.poll_sync().is_some(), syncs, "{case}");
        let held = ost.locks().granted_lock(ClientId(1), lock).is_some();
        assert_eq!(held, syncs, "{case}: the lock stays granted exactly while its sync runs");
        ost.check_invariants();
    }
}

#[test]
fn an_eviction_during_the_sync_leaves_nothing_behind() {
    let (mut ost, held) = contended(SyncLockCancel::Always);
    ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Cancel { lock: held });
    let request = ost.poll_sync().expect("sync asked for");
    ost.locks_mut().evict(Instant::ZERO, ClientId(1));
    ost.handle_synced(Instant::ZERO, request.token, &[]);
    ost.handle_synced(Instant::ZERO, request.token, &[]);
    let messages = drain(&mut ost);
    assert!(completed(&messages, 2));
    assert_eq!(ost.syncs_pending(), 0);
    ost.check_invariants();
}

#[test]
fn a_sync_rpc_is_answered_when_the_driver_has_synced() {
    let mut ost = new_ost(SyncLockCancel::Never);
    let data = Payload::Bytes(vec![1; 4096]);
    ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Write { xid: Xid(1), object: OBJECT, offset: 0, data });
    drain(&mut ost);
    ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Sync { xid: Xid(2), object: OBJECT });
    let request = ost.poll_sync().expect("a sync RPC asks the driver");
    assert_eq!((request.object, request.extent), (Some(OBJECT), Extent::WHOLE));
    assert!(drain(&mut ost).is_empty(), "no answer before the driver has synced");
    ost.handle_synced(Instant::ZERO, request.token, &[]);
    let replies = drain(&mut ost);
    assert_eq!(replies, [(ClientId(1), ToClient::SyncReply { xid: Xid(2), result: Ok(()) })]);
    assert_eq!(ost.counters().syncs, 1);
    // An evicted client is refused, as for any other I/O.
    ost.locks_mut().evict(Instant::ZERO, ClientId(1));
    drain(&mut ost);
    ost.handle_message(Instant::ZERO, ClientId(1), ToOst::Sync { xid: Xid(3), object: OBJECT });
    assert_eq!(ost.poll_sync(), None);
    let refused = (ClientId(1), ToClient::SyncReply { xid: Xid(3), result: Err(IoError::Evicted) });
    assert!(drain(&mut ost).contains(&refused));
    ost.check_invariants();
}

/// I/O whose end passes 2^64 or the largest object, or that moves more
/// than one RPC may, is answered with an error. Before, a write or read
/// ending past 2^64 panicked the OST (the extent of its lock prolong
/// overflowed) and a read of 1 TiB was allocated.
#[test]
fn malformed_io_is_answered_with_an_error() {
    use crate::store::OBJECT_BYTES_MAX;
    let (mut ost, _) = contended(SyncLockCancel::Never);
    let bytes = |len: usize| Payload::Bytes(vec![1; len]);
    let write = |offset, data| ToOst::Write { xid: Xid(9), object: OBJECT, offset, data };
    let read = |offset, len| ToOst::Read { xid: Xid(9), object: OBJECT, offset, len };
    let punch = |cut| ToOst::Punch { xid: Xid(9), object: OBJECT, cut };
    let cases = [
        (write(u64::MAX - 10, bytes(4096)), IoError::Invalid),
        (write(u64::MAX, bytes(0)), IoError::TooLarge),
        (write(0, Payload::Phantom(RPC_BYTES_MAX + 1)), IoError::Invalid),
        (write(OBJECT_BYTES_MAX - 1, bytes(2)), IoError::TooLarge),
        (read(u64::MAX - 10, 4096), IoError::Invalid),
        (read(0, 1 << 40), IoError::Invalid),
        (read(OBJECT_BYTES_MAX, 1), IoError::TooLarge),
        (punch(Cut::Size(u64::MAX)), IoError::TooLarge),
        (punch(Cut::Hole { offset: u64::MAX, len: 2 }), IoError::Invalid),
        (punch(Cut::Hole { offset: 0, len: 0 }), IoError::Invalid),
        (punch(Cut::Reserve { offset: OBJECT_BYTES_MAX, len: 1, keep_size: false }), IoError::TooLarge),
        (punch(Cut::Reserve { offset: 0, len: 0, keep_size: true }), IoError::Invalid),
    ];
    for (message, error) in cases {
        let case = format!("{message:?}");
        ost.handle_message(Instant::ZERO, ClientId(1), message);
        let replies = drain(&mut ost);
        let result = match &replies[..] {
            [(ClientId(1), ToClient::WriteReply { result, .. } | ToClient::PunchReply { result, .. })] => {
                result.map(|()| 0)
            }
            [(ClientId(1), ToClient::ReadReply { result, .. })] => result.as_ref().map(|_| 0).map_err(|e| *e),
            other => panic!("{case}: answered {other:?}"),
        };
        assert_eq!(result, Err(error), "{case}");
        ost.check_invariants();
    }
    assert_eq!((ost.counters().bytes_written, ost.counters().bytes_read), (4096, 0));
}

#[test]
fn policy_names_round_trip() {
    for name in SyncLockCancel::NAMES {
        let policy = SyncLockCancel::from_name(name).expect("a policy name");
        assert_eq!(serde_json::to_string(&policy).unwrap(), format!("\"{name}\""));
    }
    assert_eq!(SyncLockCancel::from_name("sometimes"), None);
    assert!(!SyncLockCancel::Always.applies(LockMode::ProtectedRead, true));
    assert!(SyncLockCancel::Always.applies(LockMode::Group(crate::ldlm::GroupId(3)), false));
}

/// With recovery on, syncs asked while a commit runs share the next one
/// (group commit): one commit at a time, however many ask. Before, each
/// sync began a commit of its own, and clients asking again at every
/// commit notice flooded their connections with notices.
#[test]
fn syncs_asked_while_a_commit_runs_share_the_next_commit() {
    let recovery = Some(RecoveryConfig::default());
    let mut ost = Ost::new(OstIndex(0), OstConfig { recovery, ..OstConfig::default() }, MemStore::default());
    let t = Instant::ZERO;
    let write = |ost: &mut Ost<MemStore>, client: u32, object: u64| {
        let data = Payload::Bytes(vec![client as u8; 4096]);
        let message = ToOst::Write { xid: Xid(1), object: ObjectId(object), offset: 0, data };
        ost.handle_message(t, ClientId(client), message);
    };
    let sync = |ost: &mut Ost<MemStore>, client: u32, xid: u64| {
        ost.handle_message(t, ClientId(client), ToOst::Sync { xid: Xid(xid), object: ObjectId(client.into()) });
    };
    for client in 1..=3 {
        ost.handle_message(t, ClientId(client), ToOst::Connect { resume: None });
    }
    write(&mut ost, 1, 1);
    sync(&mut ost, 1, 2);
    let first = ost.poll_sync().expect("a commit begins");
    assert_eq!((first.commit.clone(), first.commit_to), (vec![ObjectId(1)], Transno(1)));
    // Nothing changed since it began: a sync waits for the running commit.
    sync(&mut ost, 1, 3);
    // Changes made while it runs wait for the next, whoever asks.
    write(&mut ost, 2, 2);
    write(&mut ost, 3, 3);
    for (client, xid) in [(2, 4), (3, 5), (2, 6)] {
        sync(&mut ost, client, xid);
    }
    ost.handle_timeout(t + Duration::from_secs(60)); // the periodic commit too
    assert_eq!(ost.poll_sync(), None, "one commit at a time");
    assert_eq!(ost.poll_timeout(), None, "a commit waiting to begin needs no timer");
    assert_eq!(ost.syncs_pending(), 5);
    ost.check_invariants();
    drain(&mut ost);

    ost.handle_synced(t, first.token, &[]);
    let replies = drain(&mut ost);
    let answered: Vec<Xid> = replies
        .iter()
        .filter_map(|(_, m)| match m {
            ToClient::SyncReply { xid, result: Ok(()) } => Some(*xid),
            _ => None,
        })
        .collect();
    assert_eq!(answered, [Xid(2), Xid(3)]);
    let second = ost.poll_sync().expect("the next commit begins as the first ends");
    assert_eq!((second.commit.clone(), second.commit_to), (vec![ObjectId(2), ObjectId(3)], Transno(3)));
    assert_eq!(ost.poll_sync(), None);
    ost.check_invariants();

    ost.handle_synced(t, second.token, &[]);
    let replies = drain(&mut ost);
    let committed = |client| {
        replies.iter().filter(|(to, m)| *to == ClientId(client) && matches!(m, ToClient::Committed { .. })).count()
    };
    assert_eq!((committed(2), committed(3)), (1, 1), "one notice per client per commit: {replies:?}");
    assert_eq!(replies.iter().filter(|(_, m)| matches!(m, ToClient::SyncReply { .. })).count(), 3);
    assert_eq!(ost.syncs_pending(), 0);
    assert_eq!(ost.poll_sync(), None);
    ost.check_invariants();
}

/// A store that records the cache advice it is given.
#[derive(Default)]
struct AdvisedStore {
    bytes: MemStore,
    advised: Vec<(ObjectId, CacheAdvice, u64, u64)>,
}

impl ObjectStore for AdvisedStore {
    fn write(&mut self, object: ObjectId, offset: u64, data: &[u8]) -> Result<(), StoreError> {
        self.bytes.write(object, offset, data)
    }
    fn read(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<Vec<u8>, StoreError> {
        self.bytes.read(object, offset, len)
    }
    fn punch(&mut self, object: ObjectId, size: u64) -> Result<(), StoreError> {
        self.bytes.punch(object, size)
    }
    fn punch_hole(&mut self, object: ObjectId, offset: u64, len: u64) -> Result<(), StoreError> {
        self.bytes.punch_hole(object, offset, len)
    }
    fn reserve(&mut self, object: ObjectId, offset: u64, len: u64, keep_size: bool) -> Result<(), StoreError> {
        self.bytes.reserve(object, offset, len, keep_size)
    }
    fn size(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        self.bytes.size(object)
    }
    fn allocated(&mut self, object: ObjectId) -> Result<u64, StoreError> {
        self.bytes.allocated(object)
    }
    fn advise(&mut self, object: ObjectId, advice: CacheAdvice, offset: u64, len: u64) -> Result<(), StoreError> {
        self.advised.push((object, advice, offset, len));
        Ok(())
    }
}

#[test]
fn cache_advice_reaches_the_store_with_its_range_and_is_refused_when_it_must_be() {
    let mut ost = Ost::new(OstIndex(0), OstConfig::default(), AdvisedStore::default());
    let t = Instant::ZERO;
    let advise = |ost: &mut Ost<AdvisedStore>, client: u32, advice, start, end| {
        ost.handle_message(t, ClientId(client), ToOst::Advise { xid: Xid(9), object: OBJECT, advice, start, end });
        match std::iter::from_fn(|| ost.poll_transmit()).collect::<Vec<_>>().as_slice() {
            [(to, ToClient::AdviseReply { xid: Xid(9), result })] if *to == ClientId(client) => *result,
            other => panic!("one answer expected, not {other:?}"),
        }
    };
    assert_eq!(advise(&mut ost, 1, CacheAdvice::WillRead, 4096, 3 * MIB), Ok(()));
    // To the end of the object space: cut at the largest object.
    assert_eq!(advise(&mut ost, 1, CacheAdvice::DontNeed, MIB, u64::MAX), Ok(()));
    assert_eq!(
        ost.store().advised,
        vec![
            (OBJECT, CacheAdvice::WillRead, 4096, 3 * MIB - 4096),
            (OBJECT, CacheAdvice::DontNeed, MIB, OBJECT_BYTES_MAX - MIB)
        ]
    );
    // Empty and inverted ranges are malformed (Lustre's -EPROTO).
    assert_eq!(advise(&mut ost, 1, CacheAdvice::WillRead, MIB, MIB), Err(IoError::Invalid));
    assert_eq!(advise(&mut ost, 1, CacheAdvice::WillRead, MIB, 0), Err(IoError::Invalid));
    // Past the largest object there is nothing to advise on.
    assert_eq!(advise(&mut ost, 1, CacheAdvice::WillRead, OBJECT_BYTES_MAX, u64::MAX), Ok(()));
    // An evicted client is refused, as for I/O.
    ost.evict(t, ClientId(2));
    let _ = std::iter::from_fn(|| ost.poll_transmit()).count();
    assert_eq!(advise(&mut ost, 2, CacheAdvice::WillRead, 0, MIB), Err(IoError::Evicted));
    assert_eq!(ost.store().advised.len(), 2, "refused advice reached the store");
    ost.check_invariants();
}
