//! Phantom payloads: data with a length and no bytes, for the simulator.
//!
//! The main test runs one scenario twice through a tiny hand-driven cluster
//! (one FIFO of messages, no harness): once writing bytes into OSTs backed by
//! a `MemStore`, once writing phantoms into OSTs backed by a `SizeStore`. The
//! two runs must exchange the same messages (kinds, offsets, lengths, lock
//! extents, in the same order), finish with the same results, counters and
//! object sizes, and the phantom run must never allocate a page buffer.

use lanefs_core::client::{
    Client, ClientConfig, ClientCounters, ClientError, ClientEvent, FileHandle, LossCause, OpId, OpOutput,
};
use lanefs_core::layout::Layout;
use lanefs_core::msg::{IoError, Payload, PayloadKind, ToClient, ToOst};
use lanefs_core::ost::{Ost, OstConfig, OstCounters};
use lanefs_core::store::{MemStore, ObjectStore, SizeStore};
use lanefs_core::{ClientId, Duration, Instant, ObjectId, OstIndex};
use std::collections::{BTreeMap, VecDeque};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;
/// Deliveries before a test gives up on an operation: a liveness bound.
const STEPS_MAX: usize = 1_000_000;

enum Message {
    ToOst { from: ClientId, to: OstIndex, message: ToOst },
    ToClient { from: OstIndex, to: ClientId, message: ToClient },
}

/// Clients and OSTs moving messages through one FIFO, 1 µs apart: what the
/// simulator's engine does, minus its timing model.
struct Mini<S: ObjectStore> {
    now: Instant,
    clients: Vec<Client>,
    osts: Vec<Ost<S>>,
    queue: VecDeque<Message>,
    /// Every delivered message, bulk data reduced to its length.
    log: Vec<String>,
    results: BTreeMap<(ClientId, OpId), Result<OpOutput, ClientError>>,
    lost_bytes: u64,
    /// The most pages, and page buffers, any client held after any delivery.
    cached_pages_max: usize,
    data_pages_max: usize,
    /// The payload kind every write and read reply must carry, if checked.
    kind: Option<PayloadKind>,
}

impl<S: ObjectStore> Mini<S> {
    fn new(clients: u32, config: ClientConfig, stores: Vec<S>, kind: Option<PayloadKind>) -> Self {
        let clients = (0..clients).map(|c| Client::new(ClientId(c), config.clone()).unwrap()).collect();
        let osts = (0u32..).zip(stores).map(|(i, s)| Ost::new(OstIndex(i), OstConfig::default(), s)).collect();
        let (queue, log, results) = (VecDeque::new(), Vec::new(), BTreeMap::new());
        Mini {
            now: Instant::ZERO,
            clients,
            osts,
            queue,
            log,
            results,
            lost_bytes: 0,
            cached_pages_max: 0,
            data_pages_max: 0,
            kind,
        }
    }

    fn client(&self, c: u32) -> &Client {
        &self.clients[c as usize]
    }

    /// Start something on client `c` at the current time.
    fn on<T>(&mut self, c: u32, f: impl FnOnce(&mut Client, Instant) -> T) -> T {
        let out = f(&mut self.clients[c as usize], self.now);
        self.collect();
        out
    }

    fn collect(&mut self) {
        for client in &mut self.clients {
            while let Some((to, message)) = client.poll_transmit() {
                self.queue.push_back(Message::ToOst { from: client.id(), to, message });
            }
            while let Some(event) = client.poll_event() {
                match event {
                    ClientEvent::OpDone { op, result } => {
                        self.results.insert((client.id(), op), result);
                    }
                    ClientEvent::DataLost { bytes, .. } => self.lost_bytes += bytes,
                    ClientEvent::OstRecovering { .. } => {}
                }
            }
            client.check_invariants();
            self.cached_pages_max = self.cached_pages_max.max(client.cache().cached_pages());
            self.data_pages_max = self.data_pages_max.max(client.cache().data_pages());
        }
        for ost in &mut self.osts {
            // The stores are in memory: a sync is done as soon as asked.
            while let Some(request) = ost.poll_sync() {
                ost.handle_synced(self.now, request.token, &[]);
            }
            while let Some((to, message)) = ost.poll_transmit() {
                self.queue.push_back(Message::ToClient { from: ost.index(), to, message });
            }
            ost.check_invariants();
        }
    }

    /// Deliver the next message; false if none is in flight.
    fn step(&mut self) -> bool {
        let Some(message) = self.queue.pop_front() else { return false };
        self.now = self.now + Duration::from_us(1);
        match message {
            Message::ToOst { from, to, message } => {
                if let (ToOst::Write { data, .. }, Some(kind)) = (&message, self.kind) {
                    assert_eq!(data.kind(), kind, "a write of the wrong kind");
                }
                self.log.push(format!("client{}->ost{} {}", from.0, to.0, to_ost_line(&message)));
                self.osts[to.0 as usize].handle_message(self.now, from, message);
            }
            Message::ToClient { from, to, message } => {
                if let (ToClient::ReadReply { result: Ok(data), .. }, Some(kind)) = (&message, self.kind) {
                    assert_eq!(data.kind(), kind, "a read reply of the wrong kind");
                }
                self.log.push(format!("ost{}->client{} {}", from.0, to.0, to_client_line(&message)));
                self.clients[to.0 as usize].handle_message(self.now, from, message);
            }
        }
        self.collect();
        true
    }

    fn wait(&mut self, c: u32, op: OpId) -> Result<OpOutput, ClientError> {
        for _ in 0..STEPS_MAX {
            if let Some(result) = self.results.remove(&(ClientId(c), op)) {
                return result;
            }
            assert!(self.step(), "stalled: client {c} op {op:?} pending with nothing in flight");
        }
        panic!("client {c} op {op:?} not done after {STEPS_MAX} deliveries");
    }

    fn ok(&mut self, c: u32, op: OpId) -> OpOutput {
        self.wait(c, op).unwrap_or_else(|e| panic!("client {c} op {op:?}: {e}"))
    }

    fn drain(&mut self) {
        let mut steps = 0;
        while self.step() {
            steps += 1;
            assert!(steps < STEPS_MAX, "still busy after {STEPS_MAX} deliveries");
        }
    }

    fn object_size(&mut self, ost: OstIndex, object: ObjectId) -> u64 {
        self.osts[ost.0 as usize].store_mut().size(object).unwrap()
    }

    fn ost_counters(&self) -> Vec<OstCounters> {
        self.osts.iter().map(Ost::counters).collect()
    }
}

fn to_ost_line(m: &ToOst) -> String {
    match m {
        ToOst::Write { xid, object, offset, data } => {
            format!("Write {{ xid: {}, object: {}, offset: {offset}, len: {} }}", xid.0, object.0, data.len())
        }
        other => format!("{other:?}"),
    }
}

fn to_client_line(m: &ToClient) -> String {
    match m {
        ToClient::ReadReply { xid, result: Ok(data) } => format!("ReadReply {{ xid: {}, len: {} }}", xid.0, data.len()),
        other => format!("{other:?}"),
    }
}

/// The bytes writer `seed` puts at file offset `offset..offset + len`.
fn pattern(offset: u64, len: u64, seed: u8) -> Vec<u8> {
    (offset..offset + len).map(|o| (o % 251) as u8 ^ seed).collect()
}

fn payload(kind: PayloadKind, offset: u64, len: u64, seed: u8) -> Payload {
    match kind {
        PayloadKind::Bytes => Payload::Bytes(pattern(offset, len, seed)),
        PayloadKind::Phantom => Payload::Phantom(len),
    }
}

/// Two objects, 1 MiB stripes: object 1 on OST 0, object 2 on OST 1.
fn layout() -> Layout {
    let mut next = 0;
    Layout::round_robin(MIB, 2, OstIndex(0), 2, |_| {
        next += 1;
        ObjectId(next)
    })
    .unwrap()
}

/// Small limits, so that the dirty limit and the cache budget come into play.
fn config() -> ClientConfig {
    ClientConfig { dirty_bytes_max: 2 * MIB, cached_bytes_max: 4 * MIB, ..ClientConfig::default() }
}

/// What one run of the scenario produced, comparable across payload kinds.
#[derive(Debug, PartialEq)]
struct Outcome {
    log: Vec<String>,
    /// Read results as lengths; every other result as it was.
    outputs: Vec<OpOutput>,
    sizes_before_truncate: Vec<u64>,
    sizes_after_truncate: Vec<u64>,
    client_counters: Vec<ClientCounters>,
    ost_counters: Vec<OstCounters>,
    cached_pages_max: usize,
}

const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;

fn write<S: ObjectStore>(m: &mut Mini<S>, file: &mut [u8], c: u32, fh: FileHandle, offset: u64, len: u64, seed: u8) {
    let kind = m.kind.expect("a scenario checks its payload kind");
    let op = m.on(c, |cl, now| cl.write_payload(now, fh, offset, payload(kind, offset, len, seed)));
    assert_eq!(m.ok(c, op), OpOutput::Written(len));
    file[offset as usize..(offset + len) as usize].copy_from_slice(&pattern(offset, len, seed));
}

/// Reads, checks the result against `file` (bytes) or its length
/// (phantoms), and returns it with bytes reduced to their length.
fn read<S: ObjectStore>(m: &mut Mini<S>, file: &[u8], c: u32, fh: FileHandle, offset: u64, len: u64) -> OpOutput {
    let op = m.on(c, |cl, now| cl.read(now, fh, offset, len));
    match m.ok(c, op) {
        OpOutput::ReadPhantom(n) if m.kind == Some(PayloadKind::Phantom) => {
            assert_eq!(n, len);
            OpOutput::ReadPhantom(n)
        }
        OpOutput::Read(data) if m.kind == Some(PayloadKind::Bytes) => {
            assert!(data[..] == file[offset as usize..(offset + len) as usize], "read at {offset}");
            OpOutput::ReadPhantom(data.len() as u64)
        }
        other => panic!("a {:?} read answered {other:?}", m.kind),
    }
}

/// Writes (streaming, unaligned, conflicting), fsync, lock callbacks, reads
/// by a writer and by a fresh client, close, stat and truncate.
fn scenario<S: ObjectStore>(kind: PayloadKind, stores: Vec<S>) -> (Outcome, Mini<S>) {
    let layout = layout();
    let mut m = Mini::new(3, config(), stores, Some(kind));
    let mut outputs = Vec::new();
    let file = &mut vec![0u8; 31 * MIB as usize]; // what the bytes run must read back
    let fa = m.on(A, |cl, _| cl.open(layout.clone()));
    let fb = m.on(B, |cl, _| cl.open(layout.clone()));
    let fc = m.on(C, |cl, _| cl.open(layout.clone()));

    // Streaming 1 MiB writes, then a tail of partial pages: fsync flushes it.
    for i in 0..8 {
        write(&mut m, file, A, fa, i * MIB, MIB, 1);
    }
    let op = m.on(A, |cl, now| cl.fsync(now, fa));
    assert_eq!(m.ok(A, op), OpOutput::Synced);
    write(&mut m, file, A, fa, 8 * MIB + 100, 5000, 1);
    m.drain();
    assert_eq!(m.client(A).cache().dirty_bytes(), 5000, "the unaligned tail waits in the cache");
    let op = m.on(A, |cl, now| cl.fsync(now, fa));
    assert_eq!(m.ok(A, op), OpOutput::Synced);
    assert_eq!(m.client(A).cache().dirty_bytes(), 0, "fsync wrote everything back");
    let written: u64 = m.ost_counters().iter().map(|c| c.bytes_written).sum();
    assert_eq!(written, 8 * MIB + 5000);

    // A lock callback: B's write conflicts with A's cached PW lock, under
    // which A has dirty bytes. A writes them back, then cancels.
    write(&mut m, file, A, fa, 20 * MIB + 10, 3000, 2);
    m.drain();
    assert_eq!(m.client(A).cache().dirty_bytes(), 3000);
    write(&mut m, file, B, fb, 20 * MIB + 1000, 100, 3);
    assert_eq!(m.client(A).cache().dirty_bytes(), 0, "the callback flushed A's dirty bytes");
    let log = &m.log;
    let blocking = log.iter().rposition(|l| l.starts_with("ost0->client0 Blocking")).expect("A was called back");
    let after = |from: usize, what: &str| log[from..].iter().position(|l| l.starts_with(what)).map(|i| i + from);
    let a_write = after(blocking, "client0->ost0 Write").expect("A wrote back");
    assert!(log[a_write].ends_with("offset: 10485770, len: 3000 }"), "{}", log[a_write]); // object offset 10 MiB + 10
    let a_reply = after(a_write, "ost0->client0 WriteReply").expect("the write was answered");
    let a_cancel = after(blocking, "client0->ost0 Cancel").expect("A cancelled");
    assert!(a_reply < a_cancel, "A cancelled before its write back completed");

    // Reads: by B (its cache is filled from read replies) and by a client
    // whose first operation is a read; then again, from the cache.
    outputs.push(read(&mut m, file, B, fb, 7 * MIB + 3, 2 * MIB));
    outputs.push(read(&mut m, file, C, fc, 20 * MIB - 7, 4000));
    let rpcs = m.client(C).counters().read_rpcs;
    outputs.push(read(&mut m, file, C, fc, 20 * MIB + 1, 1500));
    assert_eq!(m.client(C).counters().read_rpcs, rpcs, "served from C's cache");
    assert!(m.client(C).cache().cached_pages() > 0);

    // Close flushes; stat sees the end of the file; truncate punches.
    write(&mut m, file, A, fa, 30 * MIB, PAGE, 4);
    m.drain();
    assert_eq!(m.client(A).cache().dirty_bytes(), PAGE);
    let op = m.on(A, |cl, now| cl.close(now, fa));
    assert_eq!(m.ok(A, op), OpOutput::Closed);
    assert_eq!(m.client(A).cache().dirty_bytes(), 0, "close wrote everything back");
    let op = m.on(B, |cl, now| cl.stat(now, fb));
    assert!(matches!(m.ok(B, op), OpOutput::Size { size, .. } if size == 30 * MIB + PAGE));
    let objects = layout.objects().to_vec();
    let sizes_before_truncate = objects.iter().map(|k| m.object_size(k.ost, k.object)).collect();
    let op = m.on(B, |cl, now| cl.truncate(now, fb, 20 * MIB + 500));
    assert_eq!(m.ok(B, op), OpOutput::Truncated);
    for c in [A, B, C] {
        m.on(c, |cl, now| cl.release_all(now));
    }
    m.drain();
    let sizes_after_truncate = objects.iter().map(|k| m.object_size(k.ost, k.object)).collect();
    assert_eq!(m.lost_bytes, 0);
    let outcome = Outcome {
        // A size store models no holes: its objects hold their sizes in
        // space, where bytes in memory hold whole chunks. Only that differs.
        log: m.log.iter().map(|line| without_space(line)).collect(),
        outputs,
        sizes_before_truncate,
        sizes_after_truncate,
        client_counters: m.clients.iter().map(Client::counters).collect(),
        ost_counters: m.ost_counters(),
        cached_pages_max: m.cached_pages_max,
    };
    (outcome, m)
}

/// `line` with every `allocated: N` of a getattr's answer made `allocated: _`.
fn without_space(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("allocated: ") {
        let (head, tail) = rest.split_at(at + "allocated: ".len());
        out.push_str(head);
        out.push('_');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

#[test]
fn phantoms_through_a_size_store_exchange_the_messages_bytes_do() {
    let (bytes, bytes_run) = scenario(PayloadKind::Bytes, vec![MemStore::new(), MemStore::new()]);
    let (phantom, phantom_run) = scenario(PayloadKind::Phantom, vec![SizeStore::new(), SizeStore::new()]);
    for (i, (b, p)) in bytes.log.iter().zip(&phantom.log).enumerate() {
        assert_eq!(b, p, "message {i} differs");
    }
    assert_eq!(bytes, phantom);

    // The scenario did what it says, so the comparison means something.
    let count = |what: &str| bytes.log.iter().filter(|l| l.contains(what)).count();
    assert!(count(" Write {") >= 10 && count("ReadReply") >= 2 && count("Blocking") >= 1, "{:#?}", bytes.log);
    assert!(count("Enqueue") >= 4 && count(" Punch {") == 2 && count("Glimpse") >= 1, "{:#?}", bytes.log);

    // Object sizes: object 1 holds the file's even stripe units, so A's
    // last page (unit 30) ends it at 15 MiB + 4 KiB; object 2 ends with
    // unit 7 (the first streaming writes).
    assert_eq!(phantom.sizes_before_truncate, vec![15 * MIB + PAGE, 4 * MIB]);
    let layout = layout();
    let truncated: Vec<u64> = (0..2).map(|s| layout.file_size_to_object_size(s, 20 * MIB + 500)).collect();
    assert_eq!(phantom.sizes_after_truncate, truncated);
    assert_eq!(truncated, vec![10 * MIB + 500, 10 * MIB]);
    let total: u64 = phantom_run.osts.iter().map(|o| o.store().bytes_total()).sum();
    assert_eq!(total, 20 * MIB + 500);

    // Same books, no buffers.
    assert_eq!(phantom_run.data_pages_max, 0, "a phantom client allocated page data");
    assert!(bytes_run.data_pages_max > 0, "the bytes run must fill its cache for the comparison to bite");
    assert!(phantom.cached_pages_max >= 1024, "the cache budget (1024 pages) came into play");
    for c in &phantom_run.clients {
        assert!(matches!(c.payload_kind(), Some(PayloadKind::Phantom)), "{} holds {:?}", c.id(), c.payload_kind());
    }
    assert_eq!(bytes_run.client(C).payload_kind(), Some(PayloadKind::Bytes));
}

#[test]
fn a_client_holds_one_kind_of_payload() {
    let mut m = Mini::new(2, config(), vec![SizeStore::new(), SizeStore::new()], None);
    let fa = m.on(A, |cl, _| cl.open(layout()));
    let op = m.on(A, |cl, now| cl.write_payload(now, fa, 0, Payload::Phantom(3 * MIB)));
    assert_eq!(m.ok(A, op), OpOutput::Written(3 * MIB));
    let enqueues = m.client(A).counters().enqueues;
    let op = m.on(A, |cl, now| cl.write(now, fa, 5 * MIB, vec![1; 10]));
    let mixed = ClientError::MixedPayloads { held: PayloadKind::Phantom, offered: PayloadKind::Bytes };
    assert_eq!(m.wait(A, op), Err(mixed));
    assert_eq!(m.client(A).counters().enqueues, enqueues, "nothing locked for a refused write");
    let op = m.on(A, |cl, now| cl.write(now, fa, 5 * MIB, vec![])); // empty: nothing to mix
    assert_eq!(m.ok(A, op), OpOutput::Written(0));
    let op = m.on(A, |cl, now| cl.read(now, fa, MIB - 1, 2));
    assert_eq!(m.ok(A, op), OpOutput::ReadPhantom(2));
    let op = m.on(A, |cl, now| cl.fsync(now, fa));
    assert_eq!(m.ok(A, op), OpOutput::Synced);

    // A client of bytes reading from a size store: the read fails, nothing is cached.
    let fb = m.on(B, |cl, _| cl.open(layout()));
    let op = m.on(B, |cl, now| cl.write(now, fb, 4 * MIB, vec![7; 100]));
    assert_eq!(m.ok(B, op), OpOutput::Written(100));
    let op = m.on(B, |cl, now| cl.read(now, fb, 0, PAGE));
    assert_eq!(m.wait(B, op), Err(ClientError::Io { ost: OstIndex(0), error: IoError::PayloadKind }));
    assert_eq!(m.client(B).payload_kind(), Some(PayloadKind::Bytes));
    assert_eq!(m.client(B).cache().read(layout().object(0), 0, PAGE), None, "nothing cached from the reply");
    assert_eq!(m.client(B).cache().data_pages(), 1, "the page B wrote");
    m.drain();
}

#[test]
fn a_byte_store_refuses_phantom_writes_as_lost_data() {
    let mut m = Mini::new(1, config(), vec![MemStore::new(), MemStore::new()], Some(PayloadKind::Phantom));
    let fa = m.on(A, |cl, _| cl.open(layout()));
    let op = m.on(A, |cl, now| cl.write_payload(now, fa, 0, Payload::Phantom(10_000)));
    assert_eq!(m.ok(A, op), OpOutput::Written(10_000));
    let op = m.on(A, |cl, now| cl.fsync(now, fa));
    match m.wait(A, op) {
        Err(ClientError::WriteLost { ost, cause }) => {
            assert_eq!((ost, cause), (OstIndex(0), LossCause::WriteFailed(IoError::PayloadKind)))
        }
        other => panic!("fsync must report the refused write: {other:?}"),
    }
    assert_eq!(m.lost_bytes, 10_000, "the refused write is reported as lost data");
    let op = m.on(A, |cl, now| cl.fsync(now, fa));
    assert_eq!(m.ok(A, op), OpOutput::Synced, "reported once");
    assert_eq!(m.object_size(OstIndex(0), ObjectId(1)), 0);
    let refused = |c: &OstCounters| c.bytes_written == 0 && c.write_rpcs == 0;
    assert!(m.ost_counters().iter().all(refused));
}

#[test]
fn a_phantom_client_streams_without_page_buffers() {
    let stores = vec![SizeStore::new(), SizeStore::new()];
    let mut m = Mini::new(1, ClientConfig::default(), stores, Some(PayloadKind::Phantom));
    let fa = m.on(A, |cl, _| cl.open(layout()));
    for i in 0..256 {
        let op = m.on(A, |cl, now| cl.write_payload(now, fa, i * MIB, Payload::Phantom(MIB)));
        assert_eq!(m.ok(A, op), OpOutput::Written(MIB));
    }
    let op = m.on(A, |cl, now| cl.close(now, fa));
    assert_eq!(m.ok(A, op), OpOutput::Closed);
    let writes = m.log.iter().filter(|l| l.contains(" Write {")).count();
    assert_eq!(writes, 256, "one full RPC per MiB");
    assert!(m.log.iter().filter(|l| l.contains(" Write {")).all(|l| l.ends_with(&format!("len: {MIB} }}"))));
    assert_eq!(m.data_pages_max, 0);
    assert_eq!(
        (m.object_size(OstIndex(0), ObjectId(1)), m.object_size(OstIndex(1), ObjectId(2))),
        (128 * MIB, 128 * MIB)
    );
}
