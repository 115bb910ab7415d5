//! Hostile peers: arbitrary messages against an OST and against a client.
//!
//! Properties (every case, after every input):
//! * an OST fed any sequence of `ToOst` messages from a few clients
//!   (replays included, with or without recovery, across restarts and
//!   failed commits) never panics, keeps its invariants, and answers every
//!   request that expects an answer exactly once (once its syncs are done
//!   and deadlines passed; a restart loses what it had not answered);
//! * a client with operations in flight, exchanging messages with real
//!   OSTs, fed any `ToClient` messages besides (for any OST, with made-up
//!   xids, handles and extents, session and commit messages included),
//!   its connections broken and made again, never panics and keeps its
//!   invariants.
//!
//! The values lean towards the edges a peer could abuse: offsets and
//! lengths near 2^64, the largest object and the largest RPC, inverted
//! and unaligned extents, xids and handles that may or may not be live.
//! `fuzz/` runs the same targets coverage-guided, for longer.

use lanefs_core::client::ladvise::{Advice, AheadMode};
use lanefs_core::client::{Client, ClientConfig, FileHandle};
use lanefs_core::errno::Errno;
use lanefs_core::extent::Extent;
use lanefs_core::layout::Layout;
use lanefs_core::ldlm::proof::{ChangeProof, LockKey, LockProof};
use lanefs_core::ldlm::server::{LockServerConfig, HANDLE_EPOCH_SHIFT};
use lanefs_core::ldlm::{EnqueueFlags, GroupId, LockMode, LockRequest};
use lanefs_core::msg::{CacheAdvice, Cut, EnqueueReply, IoError, ObjectAttr, Payload, ToClient, ToOst};
use lanefs_core::ost::{Ost, OstConfig, OstRecord, RecoveryConfig, SyncLockCancel, RPC_BYTES_MAX};
use lanefs_core::store::{JournalStore, MemStore, ObjectStore, OBJECT_BYTES_MAX};
use lanefs_core::{ClientId, Duration, Epoch, Instant, LockHandle, ObjectId, ObjectKey, OstIndex, Transno, Xid};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..200_000u64,
        1 => (u64::MAX - 70_000)..=u64::MAX,
        1 => (OBJECT_BYTES_MAX - 70_000)..(OBJECT_BYTES_MAX + 70_000),
        1 => any::<u64>(),
    ]
}

/// Truncates, holes and reservations, in and out of bounds.
fn cut() -> impl Strategy<Value = Cut> {
    prop_oneof![
        2 => offset().prop_map(Cut::Size),
        1 => (offset(), len()).prop_map(|(offset, len)| Cut::Hole { offset, len }),
        1 => (offset(), len(), any::<bool>()).prop_map(|(offset, len, keep_size)| Cut::Reserve { offset, len, keep_size }),
    ]
}

fn len() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0..70_000u64,
        1 => (RPC_BYTES_MAX - 1)..=(RPC_BYTES_MAX + 1),
        1 => any::<u64>(),
    ]
}

fn extent() -> impl Strategy<Value = Extent> {
    prop_oneof![
        3 => (0..48u64, 1..16u64).prop_map(|(page, pages)| Extent { start: page * 4096, end: (page + pages) * 4096 - 1 }),
        1 => (0..48u64).prop_map(|page| Extent { start: page * 4096, end: u64::MAX }),
        1 => (offset(), offset()).prop_map(|(start, end)| Extent { start, end }),
    ]
}

fn mode() -> impl Strategy<Value = LockMode> {
    prop_oneof![
        Just(LockMode::ProtectedRead),
        Just(LockMode::ProtectedWrite),
        (0..2u64).prop_map(|gid| LockMode::Group(GroupId(gid))),
    ]
}

fn request() -> impl Strategy<Value = LockRequest> {
    (mode(), extent(), any::<bool>(), any::<bool>()).prop_map(|(mode, extent, no_expand, speculative)| {
        let extent = if mode.is_group() && speculative { Extent::WHOLE } else { extent };
        LockRequest { mode, extent, flags: EnqueueFlags { no_expand, speculative } }
    })
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..5000).prop_map(Payload::Bytes),
        1 => len().prop_map(Payload::Phantom),
    ]
}

fn to_ost() -> impl Strategy<Value = ToOst> {
    let xid = (0..16u64).prop_map(Xid);
    let object = (0..3u64).prop_map(ObjectId);
    let transno = (0..12u64).prop_map(Transno);
    let epoch = prop::option::of((0..3u64).prop_map(Epoch));
    prop_oneof![
        1 => epoch.prop_map(|resume| ToOst::Connect { resume }),
        1 => ((0..24u64).prop_map(LockHandle), object.clone(), request(), extent())
            .prop_map(|(lock, object, request, extent)| ToOst::ReplayLock { lock, object, request: Box::new(request), extent, proof: LockProof(lock.0) }),
        1 => (transno.clone(), object.clone(), offset(), payload())
            .prop_map(|(transno, object, offset, data)| ToOst::ReplayWrite { transno, object, offset, data, proof: ChangeProof(transno.0) }),
        1 => (transno, object.clone(), cut()).prop_map(|(transno, object, cut)| ToOst::ReplayPunch { transno, object, cut, proof: ChangeProof(transno.0) }),
        1 => Just(ToOst::ReplayDone),
        1 => (0..4u64).prop_map(|seq| ToOst::FailuresSeen { seq }),
        1 => Just(ToOst::Disconnect),
        4 => (xid.clone(), object.clone(), request()).prop_map(|(xid, object, request)| ToOst::Enqueue { xid, object, request }),
        2 => (0..24u64).prop_map(|h| ToOst::Cancel { lock: LockHandle(h) }),
        3 => (xid.clone(), object.clone(), offset(), payload())
            .prop_map(|(xid, object, offset, data)| ToOst::Write { xid, object, offset, data }),
        3 => (xid.clone(), object.clone(), offset(), len())
            .prop_map(|(xid, object, offset, len)| ToOst::Read { xid, object, offset, len }),
        1 => (xid.clone(), object.clone(), cut()).prop_map(|(xid, object, cut)| ToOst::Punch { xid, object, cut }),
        2 => (xid.clone(), object.clone()).prop_map(|(xid, object)| ToOst::Getattr { xid, object }),
        1 => (xid.clone(), object.clone()).prop_map(|(xid, object)| ToOst::Sync { xid, object }),
        1 => (xid.clone(), object, any::<bool>(), offset(), offset()).prop_map(|(xid, object, willread, start, end)| {
            let advice = if willread { CacheAdvice::WillRead } else { CacheAdvice::DontNeed };
            ToOst::Advise { xid, object, advice, start, end }
        }),
        2 => (xid, any::<u64>()).prop_map(|(xid, size)| ToOst::GlimpseReply { xid, size }),
    ]
}

#[derive(Clone, Debug)]
enum OstStep {
    Message(u32, ToOst),
    Advance(u64),
    Synced,
    /// The next commit fails (`fdatasync` says `EIO`) for every object.
    SyncFailed,
    /// The OST stops and starts again from its last record.
    Restart,
}

fn ost_step() -> impl Strategy<Value = OstStep> {
    prop_oneof![
        8 => (0..3u32, to_ost()).prop_map(|(client, message)| OstStep::Message(client, message)),
        1 => (0..200u64).prop_map(OstStep::Advance),
        1 => Just(OstStep::Synced),
        1 => Just(OstStep::SyncFailed),
        1 => Just(OstStep::Restart),
    ]
}

/// Requests awaiting an answer: `(client, xid)` -> how many.
type Awaited = BTreeMap<(ClientId, Xid), usize>;

fn collect_replies(ost: &mut Ost<MemStore>, awaited: &mut Awaited) {
    while let Some((client, message)) = ost.poll_transmit() {
        let Some(xid) = message.reply_xid() else { continue };
        let waiting = awaited.get_mut(&(client, xid));
        let waiting =
            waiting.unwrap_or_else(|| panic!("{client} answered for xid {xid:?} it did not ask: {message:?}"));
        *waiting -= 1;
        if *waiting == 0 {
            awaited.remove(&(client, xid));
        }
    }
}

fn ost_config(sync_lock_cancel: SyncLockCancel, recovery: bool) -> OstConfig {
    let config = OstConfig {
        locks: LockServerConfig { callback_timeout: Duration::from_ms(50), resend: false },
        glimpse_timeout: Duration::from_ms(20),
        sync_lock_cancel,
        recovery: None,
    };
    match recovery {
        true => config.with_recovery(RecoveryConfig {
            window: Duration::from_secs(2),
            commit_interval: Duration::from_ms(100),
            ..RecoveryConfig::default()
        }),
        false => config,
    }
}

fn new_ost(sync_lock_cancel: SyncLockCancel) -> Ost<MemStore> {
    Ost::new(OstIndex(0), ost_config(sync_lock_cancel, false), MemStore::new())
}

/// Answer the OST's next sync request, failing every object of it with
/// `failure`.
fn answer_sync(ost: &mut Ost<MemStore>, now: Instant, failure: Option<IoError>) -> bool {
    let Some(request) = ost.poll_sync() else { return false };
    let failures: Vec<(ObjectId, IoError)> = match failure {
        Some(error) => request.object.into_iter().chain(request.commit.iter().copied()).map(|o| (o, error)).collect(),
        None => Vec::new(),
    };
    ost.handle_synced(now, request.token, &failures);
    true
}

fn policy() -> impl Strategy<Value = SyncLockCancel> {
    prop_oneof![Just(SyncLockCancel::Never), Just(SyncLockCancel::Blocking), Just(SyncLockCancel::Always)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn an_ost_answers_any_messages_once_and_keeps_its_invariants(
        policy in policy(),
        recovery in any::<bool>(),
        steps in prop::collection::vec(ost_step(), 1..40),
    ) {
        let config = ost_config(policy, recovery);
        let mut ost = Ost::new(OstIndex(0), config.clone(), MemStore::new());
        let mut record = OstRecord::default();
        let mut now = Instant::ZERO;
        let mut awaited = Awaited::new();
        for step in steps {
            match step {
                OstStep::Message(client, message) => {
                    if let Some(xid) = message.reply_xid() {
                        *awaited.entry((ClientId(client), xid)).or_default() += 1;
                    }
                    ost.handle_message(now, ClientId(client), message);
                }
                OstStep::Advance(ms) => {
                    now = now + Duration::from_ms(ms);
                    ost.handle_timeout(now);
                }
                OstStep::Synced => {
                    answer_sync(&mut ost, now, None);
                }
                OstStep::SyncFailed => {
                    answer_sync(&mut ost, now, Some(IoError::Disk(Errno::EIO)));
                }
                OstStep::Restart => {
                    // What it had not answered is lost with it.
                    let store = std::mem::take(ost.store_mut());
                    ost = Ost::restart(OstIndex(0), config.clone(), store, record.clone(), now);
                    awaited.clear();
                }
            }
            if let Some(written) = ost.poll_record() {
                record = written;
            }
            ost.check_invariants();
            collect_replies(&mut ost, &mut awaited);
        }
        for _ in 0..100 {
            while answer_sync(&mut ost, now, None) {}
            now = now + Duration::from_secs(1);
            ost.handle_timeout(now);
            ost.check_invariants();
            collect_replies(&mut ost, &mut awaited);
            if ost.syncs_pending() == 0 && ost.poll_timeout().is_none() {
                break;
            }
        }
        prop_assert!(awaited.is_empty(), "never answered: {:?}", awaited);
    }
}

// ----- a client fed hostile server messages --------------------------------

fn io_error() -> impl Strategy<Value = IoError> {
    prop_oneof![
        Just(IoError::Evicted),
        Just(IoError::NoSpace),
        Just(IoError::Invalid),
        Just(IoError::Failed),
        Just(IoError::PayloadKind),
    ]
}

fn unit_result() -> impl Strategy<Value = Result<(), IoError>> {
    prop_oneof![3 => Just(Ok(())), 1 => io_error().prop_map(Err)]
}

fn to_client() -> impl Strategy<Value = ToClient> {
    let xid = (0..40u64).prop_map(Xid);
    let lock = (0..20u64).prop_map(LockHandle);
    let transno = (0..12u64).prop_map(Transno);
    let reply = prop_oneof![
        3 => (lock.clone(), extent()).prop_map(|(lock, extent)| EnqueueReply::Granted { lock, extent, proof: LockProof(7) }),
        1 => lock.clone().prop_map(|lock| EnqueueReply::Waiting { lock }),
        1 => Just(EnqueueReply::Refused),
        1 => Just(EnqueueReply::Evicted),
        1 => Just(EnqueueReply::Invalid),
        1 => Just(EnqueueReply::Failed),
        1 => Just(EnqueueReply::TooMany),
    ];
    let data = prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..20_000).prop_map(|b| Ok(Payload::Bytes(b))),
        1 => len().prop_map(|l| Ok(Payload::Phantom(l))),
        1 => io_error().prop_map(Err),
    ];
    prop_oneof![
        4 => (xid.clone(), reply).prop_map(|(xid, reply)| ToClient::Enqueue { xid, reply }),
        2 => (lock.clone(), extent(), any::<bool>())
            .prop_map(|(lock, extent, callback_pending)| ToClient::Completion { lock, extent, callback_pending, proof: LockProof(7) }),
        2 => lock.clone().prop_map(|lock| ToClient::Blocking { lock }),
        2 => (xid.clone(), unit_result(), transno.clone())
            .prop_map(|(xid, result, transno)| ToClient::WriteReply { xid, result, transno, proof: ChangeProof(transno.0) }),
        2 => (xid.clone(), data).prop_map(|(xid, result)| ToClient::ReadReply { xid, result }),
        1 => (xid.clone(), unit_result(), transno.clone())
            .prop_map(|(xid, result, transno)| ToClient::PunchReply { xid, result, transno, proof: ChangeProof(transno.0) }),
        1 => (xid.clone(), prop_oneof![(any::<u64>(), any::<u64>()).prop_map(|(size, allocated)| Ok(ObjectAttr { size, allocated })), io_error().prop_map(Err)])
            .prop_map(|(xid, result)| ToClient::GetattrReply { xid, result }),
        1 => (xid.clone(), unit_result()).prop_map(|(xid, result)| ToClient::SyncReply { xid, result }),
        1 => (xid.clone(), unit_result()).prop_map(|(xid, result)| ToClient::AdviseReply { xid, result }),
        1 => (xid, (0..3u64).prop_map(ObjectId), lock.clone()).prop_map(|(xid, object, lock)| ToClient::Glimpse { xid, object, lock }),
        1 => Just(ToClient::Evicted),
        1 => Just(ToClient::Failed),
        1 => ((0..3u64).prop_map(Epoch), any::<bool>())
            .prop_map(|(epoch, recovering)| ToClient::Connected { epoch, recovering }),
        1 => transno.prop_map(|transno| ToClient::Committed { transno }),
        1 => ((0..3u64).prop_map(ObjectId), io_error(), 0..4u64)
            .prop_map(|(object, error, seq)| ToClient::CommitFailed { object, error, seq }),
        1 => lock.prop_map(|lock| ToClient::LockLost { lock }),
        1 => Just(ToClient::Disconnected),
        1 => (0..u64::MAX, any::<u32>())
            .prop_map(|(ns, clients_left)| ToClient::Recovering { remaining: Duration(ns), clients_left }),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Write(u64, usize),
    Read(u64, u64),
    Fsync,
    Stat,
    Truncate(u64),
    GroupLock(u64),
    GroupUnlock(u64),
    Lockahead(u64, u64),
    /// Willread (or dontneed), waited for (or in the background).
    CacheAdvice(bool, u64, u64, bool),
}

fn op() -> impl Strategy<Value = Op> {
    let at = 0..300_000u64;
    prop_oneof![
        3 => (at.clone(), 1..40_000usize).prop_map(|(o, l)| Op::Write(o, l)),
        2 => (at.clone(), 1..40_000u64).prop_map(|(o, l)| Op::Read(o, l)),
        1 => Just(Op::Fsync),
        1 => Just(Op::Stat),
        1 => at.clone().prop_map(Op::Truncate),
        1 => (0..2u64).prop_map(Op::GroupLock),
        1 => (0..2u64).prop_map(Op::GroupUnlock),
        1 => (at.clone(), 1..40_000u64).prop_map(|(o, l)| Op::Lockahead(o, l)),
        1 => (any::<bool>(), at, 1..400_000u64, any::<bool>()).prop_map(|(w, o, l, b)| Op::CacheAdvice(w, o, l, b)),
    ]
}

#[derive(Clone, Debug)]
enum ClientStep {
    /// The real OSTs take what the client sent and answer it.
    Exchange,
    /// A message from OST `ost` (0 and 1 exist, 2 does not).
    Inject(u32, ToClient),
    Start(Op),
    Advance(u64),
    Unreachable(u32),
    /// The connection to OST `ost` breaks and is made again.
    Reconnect(u32),
}

fn client_step() -> impl Strategy<Value = ClientStep> {
    prop_oneof![
        4 => Just(ClientStep::Exchange),
        4 => (0..3u32, to_client()).prop_map(|(ost, message)| ClientStep::Inject(ost, message)),
        2 => op().prop_map(ClientStep::Start),
        1 => (0..2_000_000u64).prop_map(ClientStep::Advance),
        1 => (0..3u32).prop_map(ClientStep::Unreachable),
        1 => (0..3u32).prop_map(ClientStep::Reconnect),
    ]
}

fn start(client: &mut Client, now: Instant, fh: FileHandle, op: Op) {
    let _ = match op {
        Op::Write(offset, len) => client.write(now, fh, offset, vec![5; len]),
        Op::Read(offset, len) => client.read(now, fh, offset, len),
        Op::Fsync => client.fsync(now, fh),
        Op::Stat => client.stat(now, fh),
        Op::Truncate(size) => client.truncate(now, fh, size),
        Op::GroupLock(gid) => client.group_lock(now, fh, GroupId(gid)),
        Op::GroupUnlock(gid) => client.group_unlock(now, fh, GroupId(gid)),
        Op::Lockahead(offset, len) => {
            let _ = client.ladvise(now, fh, &[Advice::lockahead(AheadMode::Write, offset, offset + len, true)]);
            return;
        }
        Op::CacheAdvice(willread, offset, len, background) => {
            let advice = if willread { CacheAdvice::WillRead } else { CacheAdvice::DontNeed };
            let _ = client.ladvise(now, fh, &[Advice::cache(advice, offset, offset + len - 1, background)]);
            return;
        }
    };
}

/// The client's messages to the real OSTs, and their answers back, until
/// nothing moves (messages to an OST that does not exist are lost).
fn exchange(client: &mut Client, osts: &mut [Ost<MemStore>], now: Instant) {
    for _ in 0..1000 {
        let mut moved = false;
        while let Some((ost, message)) = client.poll_transmit() {
            moved = true;
            if let Some(ost) = osts.get_mut(ost.0 as usize) {
                ost.handle_message(now, ClientId(1), message);
            }
        }
        while client.poll_event().is_some() {}
        for (index, ost) in osts.iter_mut().enumerate() {
            while answer_sync(ost, now, None) {}
            while let Some((_, message)) = ost.poll_transmit() {
                moved = true;
                client.handle_message(now, OstIndex(index as u32), message);
                client.check_invariants();
            }
        }
        if !moved {
            return;
        }
    }
}

fn client_with_ops(now: Instant, recovery: bool) -> (Client, FileHandle) {
    let config = ClientConfig {
        recovery,
        rpc_bytes_max: 16 << 10,
        rpcs_in_flight_max: 2,
        dirty_bytes_max: 64 << 10,
        cached_bytes_max: 128 << 10,
        lru_locks_max: 8,
        ..ClientConfig::default()
    };
    let mut client = Client::new(ClientId(1), config).unwrap();
    let objects =
        vec![ObjectKey { ost: OstIndex(0), object: ObjectId(1) }, ObjectKey { ost: OstIndex(1), object: ObjectId(2) }];
    let fh = client.open(Layout::new(64 << 10, objects).unwrap());
    let _ = client.write(now, fh, 10_000, vec![7; 150_000]);
    let _ = client.read(now, fh, 60_000, 80_000);
    let _ = client.stat(now, fh);
    (client, fh)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn a_client_survives_any_server_messages(
        recovery in any::<bool>(),
        steps in prop::collection::vec(client_step(), 1..40),
    ) {
        let mut now = Instant::ZERO;
        let (mut client, fh) = client_with_ops(now, recovery);
        let mut osts = vec![
            Ost::new(OstIndex(0), ost_config(SyncLockCancel::Always, recovery), MemStore::new()),
            Ost::new(OstIndex(1), ost_config(SyncLockCancel::Never, recovery), MemStore::new()),
        ];
        for step in steps {
            match step {
                ClientStep::Exchange => exchange(&mut client, &mut osts, now),
                ClientStep::Inject(ost, message) => client.handle_message(now, OstIndex(ost), message),
                ClientStep::Start(op) => start(&mut client, now, fh, op),
                ClientStep::Advance(ms) => {
                    now = now + Duration::from_ms(ms);
                    client.handle_timeout(now);
                    for ost in &mut osts {
                        ost.handle_timeout(now);
                    }
                }
                ClientStep::Unreachable(ost) => client.handle_unreachable(now, OstIndex(ost), "gone"),
                ClientStep::Reconnect(ost) => {
                    client.handle_disconnected(now, OstIndex(ost));
                    client.handle_reconnected(now, OstIndex(ost));
                }
            }
            client.check_invariants();
            for ost in &osts {
                ost.check_invariants();
            }
        }
    }
}

// ----- regressions --------------------------------------------------------

/// A client whose one write waits for its lock on OST 0; the enqueue's xid.
fn waiting_writer() -> (Client, Xid) {
    let mut client = Client::new(ClientId(1), ClientConfig::default()).unwrap();
    let layout = Layout::new(1 << 20, vec![ObjectKey { ost: OstIndex(0), object: ObjectId(1) }]).unwrap();
    let fh = client.open(layout);
    let _ = client.write(Instant::ZERO, fh, 0, vec![1; 8192]);
    let Some((OstIndex(0), ToOst::Enqueue { xid, .. })) = client.poll_transmit() else { panic!("an enqueue first") };
    (client, xid)
}

/// A grant smaller than the request fails the write (and gives the lock
/// back) instead of panicking the client.
#[test]
fn a_grant_smaller_than_its_request_fails_the_operation() {
    let (mut client, xid) = waiting_writer();
    let extent = Extent::new(0, 4095);
    let reply = EnqueueReply::Granted { lock: LockHandle(3), extent, proof: LockProof(0) };
    client.handle_message(Instant::ZERO, OstIndex(0), ToClient::Enqueue { xid, reply });
    client.check_invariants();
    let sent: Vec<_> = std::iter::from_fn(|| client.poll_transmit()).collect();
    assert!(sent.contains(&(OstIndex(0), ToOst::Cancel { lock: LockHandle(3) })), "{sent:?}");
    let event = client.poll_event().expect("the write is done");
    assert!(format!("{event:?}").contains("smaller than its request"), "{event:?}");
}

/// Replies from the wrong OST, or of the wrong kind, leave the RPC they
/// name waiting for its real answer: before, a write reply from another
/// OST panicked the client, and a punch reply for a write's xid lost the
/// write's books.
#[test]
fn replies_from_the_wrong_ost_or_of_the_wrong_kind_are_ignored() {
    let (mut client, xid) = waiting_writer();
    let reply = EnqueueReply::Granted { lock: LockHandle(3), extent: Extent::WHOLE, proof: LockProof(0) };
    client.handle_message(Instant::ZERO, OstIndex(1), ToClient::Enqueue { xid, reply });
    assert!(client.lock_cache().iter().all(|(_, l)| l.handle.is_none()), "a grant from another OST was taken");
    client.handle_message(Instant::ZERO, OstIndex(0), ToClient::Enqueue { xid, reply });
    let done = client.poll_event().expect("the write is in the cache");
    assert!(format!("{done:?}").contains("Written"), "{done:?}");
    // Write it back: one write RPC.
    let fh = FileHandle(1);
    let _ = client.fsync(Instant::ZERO, fh);
    let write = std::iter::from_fn(|| client.poll_transmit()).find_map(|(_, m)| match m {
        ToOst::Write { xid, .. } => Some(xid),
        _ => None,
    });
    let write = write.expect("a write RPC");
    client.handle_message(
        Instant::ZERO,
        OstIndex(1),
        ToClient::WriteReply { xid: write, result: Ok(()), transno: Transno(0), proof: ChangeProof(0) },
    );
    client.handle_message(
        Instant::ZERO,
        OstIndex(0),
        ToClient::PunchReply { xid: write, result: Ok(()), transno: Transno(0), proof: ChangeProof(0) },
    );
    client.check_invariants();
    assert_eq!(client.poll_event(), None, "the fsync finished on replies that were not its write's");
    client.handle_message(
        Instant::ZERO,
        OstIndex(0),
        ToClient::WriteReply { xid: write, result: Ok(()), transno: Transno(0), proof: ChangeProof(0) },
    );
    client.check_invariants();
    let sync = std::iter::from_fn(|| client.poll_transmit()).any(|(_, m)| matches!(m, ToOst::Sync { .. }));
    assert!(sync, "the acknowledged write is synced");
}

/// An operation that an unreachable OST fails gives back the reference it
/// held on a lock of another OST: before, the reference stayed, so that
/// lock could never be cancelled (and a callback for it ended in an
/// eviction).
#[test]
fn an_operation_failed_by_a_lost_ost_gives_back_its_lock_on_another() {
    let now = Instant::ZERO;
    let (mut client, fh) = client_with_ops(now, false);
    let mut osts = vec![new_ost(SyncLockCancel::Never), new_ost(SyncLockCancel::Never)];
    exchange(&mut client, &mut osts, now);
    // The truncate punches OST 0 first, under a lock of OST 0.
    let _ = client.truncate(now, fh, 0);
    let sent: Vec<_> = std::iter::from_fn(|| client.poll_transmit()).collect();
    assert!(sent.iter().any(|(ost, m)| *ost == OstIndex(0) && matches!(m, ToOst::Punch { .. })), "{sent:?}");
    client.handle_unreachable(now, OstIndex(1), "gone");
    client.check_invariants();
    let held = client.lock_cache().iter().filter(|(_, l)| l.users > 0).count();
    assert_eq!(held, 0, "a lock still referenced by a failed operation");
}

/// An OST with recovery that knew client 0, restarted, with client 0
/// reconnected to replay.
fn recovering_ost() -> Ost<MemStore> {
    let now = Instant::ZERO;
    let config = ost_config(SyncLockCancel::Never, true);
    let mut ost = Ost::new(OstIndex(0), config.clone(), MemStore::new());
    ost.handle_message(now, ClientId(0), ToOst::Connect { resume: None });
    let record = ost.poll_record().expect("the client is recorded");
    let store = std::mem::take(ost.store_mut());
    let mut ost = Ost::restart(OstIndex(0), config, store, record, now);
    ost.handle_message(now, ClientId(0), ToOst::Connect { resume: Some(Epoch(0)) });
    let connected = ost.poll_transmit();
    assert_eq!(connected, Some((ClientId(0), ToClient::Connected { epoch: Epoch(1), recovering: true })));
    ost
}

/// After a restart, a lock is taken back only from the client the OST
/// granted it to, with the proof that came with the grant: another client
/// the OST knew that replays the handle (with no proof, a made-up one, or
/// the holder's own) is refused, even when it comes first, and the holder
/// gets its lock back.
#[test]
fn a_forged_lock_replay_is_refused_and_the_holder_keeps_its_lock() {
    let now = Instant::ZERO;
    let config = ost_config(SyncLockCancel::Never, true);
    let mut ost = Ost::new(OstIndex(0), config.clone(), MemStore::new());
    let record = ost.poll_record().map(|r| OstRecord { lock_key: LockKey([11, 13]), ..r });
    let store = std::mem::take(ost.store_mut());
    let mut ost = Ost::restart(OstIndex(0), config.clone(), store, record.unwrap_or_default(), now);
    for c in [ClientId(0), ClientId(1)] {
        ost.handle_message(now, c, ToOst::Connect { resume: None });
    }
    let request = LockRequest::new(LockMode::ProtectedWrite, Extent::new(0, 4095));
    ost.handle_message(now, ClientId(1), ToOst::Enqueue { xid: Xid(1), object: ObjectId(1), request });
    let (lock, extent, proof) = std::iter::from_fn(|| ost.poll_transmit())
        .find_map(|(_, m)| match m {
            ToClient::Enqueue { reply: EnqueueReply::Granted { lock, extent, proof }, .. } => {
                Some((lock, extent, proof))
            }
            _ => None,
        })
        .expect("granted");
    let record = ost.poll_record().expect("the clients are recorded");
    let store = std::mem::take(ost.store_mut());
    let mut ost = Ost::restart(OstIndex(0), config, store, record, now);
    for c in [ClientId(0), ClientId(1)] {
        ost.handle_message(now, c, ToOst::Connect { resume: Some(Epoch(ost.epoch().0 - 1)) });
    }
    while ost.poll_transmit().is_some() {}
    let replay = |proof| ToOst::ReplayLock { lock, object: ObjectId(1), request: Box::new(request), extent, proof };
    for forged in [LockProof::default(), LockProof(proof.0 ^ 1), proof] {
        ost.handle_message(now, ClientId(0), replay(forged));
        ost.check_invariants();
        assert_eq!(ost.poll_transmit(), Some((ClientId(0), ToClient::LockLost { lock })), "{forged:?} from client 0");
    }
    // Client 0, done replaying, waits for client 1 untold: what it holds
    // is only safe with the OST, so it must not give up.
    ost.handle_message(now, ClientId(0), ToOst::ReplayDone);
    ost.handle_message(now, ClientId(0), ToOst::Enqueue { xid: Xid(9), object: ObjectId(2), request });
    assert_eq!(ost.poll_transmit(), None, "a known client that replayed waits, and is not told to give up");
    ost.handle_message(now, ClientId(1), replay(proof));
    ost.check_invariants();
    assert_eq!(ost.poll_transmit(), None, "the holder's replay is taken");
    assert!(ost.locks().granted_lock(ClientId(1), lock).is_some(), "client 1 holds its lock again");
}

/// After a restart, a change is replayed only by the client the OST
/// acknowledged it to, with the proof that came with the acknowledgement:
/// another client the OST knew that replays the writer's transaction
/// number first (with no proof, a made-up one, or the writer's own), or a
/// write the OST never acknowledged, is refused; the writer's replay is
/// taken and its bytes come back. Before, the first replay of a number
/// won: the writer's own was dropped as a duplicate, and the forger's
/// bytes took the place of its acknowledged write without a word.
#[test]
fn a_forged_change_replay_is_refused_and_the_writers_replay_is_applied() {
    let now = Instant::ZERO;
    let config = ost_config(SyncLockCancel::Never, true);
    let mut ost = Ost::new(OstIndex(0), config.clone(), JournalStore::new());
    ost.set_lock_key(LockKey([17, 19]));
    for c in [ClientId(0), ClientId(1)] {
        ost.handle_message(now, c, ToOst::Connect { resume: None });
    }
    let data = Payload::Bytes(vec![1; 4096]);
    ost.handle_message(
        now,
        ClientId(1),
        ToOst::Write { xid: Xid(1), object: ObjectId(1), offset: 0, data: data.clone() },
    );
    let (transno, proof) = std::iter::from_fn(|| ost.poll_transmit())
        .find_map(|(_, m)| match m {
            ToClient::WriteReply { result: Ok(()), transno, proof, .. } => Some((transno, proof)),
            _ => None,
        })
        .expect("the write is acknowledged");
    assert!(transno > Transno(0));
    let record = ost.poll_record().expect("the clients are recorded");
    assert_eq!(record.lock_key, LockKey([17, 19]), "the key is kept in the record");
    let mut store = std::mem::take(ost.store_mut());
    store.crash(); // the write was not committed
    let mut ost = Ost::restart(OstIndex(0), config, store, record, now);
    let zeros = |bytes: Vec<u8>| bytes.iter().all(|b| *b == 0);
    assert!(zeros(ost.store_mut().read(ObjectId(1), 0, 4096).unwrap_or_default()), "lost in the crash");
    for c in [ClientId(0), ClientId(1)] {
        ost.handle_message(now, c, ToOst::Connect { resume: Some(Epoch(ost.epoch().0 - 1)) });
    }
    while ost.poll_transmit().is_some() {}
    let forged = Payload::Bytes(vec![9; 4096]);
    let replay =
        |transno, object, proof| ToOst::ReplayWrite { transno, object, offset: 0, data: forged.clone(), proof };
    for proof in [ChangeProof::default(), ChangeProof(proof.0 ^ 1), proof] {
        ost.handle_message(now, ClientId(0), replay(transno, ObjectId(1), proof));
        ost.handle_message(now, ClientId(0), replay(transno, ObjectId(2), proof));
        ost.handle_message(now, ClientId(0), replay(Transno(transno.0 + 1), ObjectId(2), proof));
        ost.check_invariants();
    }
    ost.handle_message(now, ClientId(0), ToOst::ReplayPunch { transno, object: ObjectId(1), cut: Cut::Size(0), proof });
    ost.handle_message(now, ClientId(0), ToOst::ReplayDone);
    let theirs = ToOst::ReplayWrite { transno, object: ObjectId(1), offset: 0, data, proof };
    ost.handle_message(now, ClientId(1), theirs);
    ost.handle_message(now, ClientId(1), ToOst::ReplayDone);
    ost.check_invariants();
    assert!(!ost.is_recovering());
    assert_eq!(ost.store_mut().read(ObjectId(1), 0, 4096).expect("replayed"), vec![1; 4096], "the writer's bytes");
    assert!(zeros(ost.store_mut().read(ObjectId(2), 0, 4096).unwrap_or_default()), "nothing forged");
}

/// A client the recovering OST did not know is told, once, that its
/// requests wait and for how long at most; the known client replaying is
/// not (it was told `Connected { recovering }`).
#[test]
fn a_client_whose_requests_wait_for_a_recovery_is_told_why_once() {
    let mut ost = recovering_ost();
    let later = Instant(500_000_000);
    ost.handle_message(later, ClientId(1), ToOst::Connect { resume: None });
    let request = LockRequest::new(LockMode::ProtectedWrite, Extent::new(0, 4095));
    ost.handle_message(later, ClientId(1), ToOst::Enqueue { xid: Xid(1), object: ObjectId(1), request });
    ost.handle_message(later, ClientId(0), ToOst::Enqueue { xid: Xid(1), object: ObjectId(2), request });
    ost.check_invariants();
    let sent: Vec<_> = std::iter::from_fn(|| ost.poll_transmit()).collect();
    let window = Duration::from_secs(2); // `ost_config`'s
    let told = ToClient::Recovering { remaining: Duration(window.0 - later.0), clients_left: 1 };
    assert_eq!(sent, vec![(ClientId(1), told.clone())], "client 1 once; client 0, replaying, not at all");
    // Client 1 gave up and connects again: it is told again.
    ost.handle_message(later, ClientId(1), ToOst::Connect { resume: None });
    assert_eq!(ost.poll_transmit(), Some((ClientId(1), told)), "told again after a new connect");
    // Once the known client is done, the kept requests are served.
    ost.handle_message(later, ClientId(0), ToOst::ReplayDone);
    assert!(!ost.is_recovering());
    let answered: Vec<_> = std::iter::from_fn(|| ost.poll_transmit()).map(|(c, _)| c).collect();
    assert!(answered.contains(&ClientId(1)) && answered.contains(&ClientId(0)), "{answered:?}");
}

/// A replayed lock naming a handle of the OST's new life is refused:
/// before, it was granted, broke the lock server's invariants, and the
/// next new lock was given the same handle.
#[test]
fn a_replayed_lock_with_a_handle_of_the_new_life_is_refused() {
    let now = Instant::ZERO;
    let mut ost = recovering_ost();
    let lock = LockHandle((1 << HANDLE_EPOCH_SHIFT) + 1);
    let request = LockRequest::new(LockMode::ProtectedWrite, Extent::new(0, 4095));
    let replay = ToOst::ReplayLock {
        lock,
        object: ObjectId(1),
        request: Box::new(request),
        extent: Extent::new(0, 4095),
        proof: LockProof(0),
    };
    ost.handle_message(now, ClientId(0), replay);
    ost.check_invariants();
    assert_eq!(ost.poll_transmit(), Some((ClientId(0), ToClient::LockLost { lock })));
    ost.handle_message(now, ClientId(0), ToOst::ReplayDone);
    ost.handle_message(now, ClientId(1), ToOst::Connect { resume: None });
    let request = LockRequest::new(LockMode::ProtectedWrite, Extent::new(8192, 12287));
    ost.handle_message(now, ClientId(1), ToOst::Enqueue { xid: Xid(1), object: ObjectId(1), request });
    ost.check_invariants();
    let granted = std::iter::from_fn(|| ost.poll_transmit()).find_map(|(_, m)| match m {
        ToClient::Enqueue { reply: EnqueueReply::Granted { lock, .. }, .. } => Some(lock),
        _ => None,
    });
    assert_eq!(granted, Some(lock), "the new life's first lock");
}

/// A change replayed with transaction number 0 (which names none) is
/// ignored: before, it was kept and broke the recovery's invariants.
#[test]
fn a_replayed_change_without_a_transaction_number_is_ignored() {
    let now = Instant::ZERO;
    let mut ost = recovering_ost();
    let data = Payload::Bytes(vec![1; 100]);
    ost.handle_message(
        now,
        ClientId(0),
        ToOst::ReplayWrite { transno: Transno(0), object: ObjectId(1), offset: 0, data, proof: ChangeProof(0) },
    );
    ost.handle_message(
        now,
        ClientId(0),
        ToOst::ReplayPunch { transno: Transno(0), object: ObjectId(2), cut: Cut::Size(10), proof: ChangeProof(0) },
    );
    ost.check_invariants();
    ost.handle_message(now, ClientId(0), ToOst::ReplayDone);
    ost.check_invariants();
    assert!(!ost.is_recovering());
}
