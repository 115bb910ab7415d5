//! The frame decoder against arbitrary bytes and mutated valid frames: an
//! error or a message, never a panic, and never an allocation larger than
//! the input allows (a length field cannot make the decoder reserve what
//! the frame does not hold). `fuzz/` runs the same, coverage-guided.

use lanefs_core::extent::Extent;
use lanefs_core::ldlm::proof::ChangeProof;
use lanefs_core::ldlm::{LockMode, LockRequest};
use lanefs_core::msg::{EnqueueReply, Payload, ToClient, ToOst};
use lanefs_core::{Epoch, LockHandle, ObjectId, Transno, Xid};
use lanefs_proto::codec::{decode, encode, read_frame, FRAME_BYTES_MAX};
use lanefs_proto::wire::{MdsCall, Role, Wire, MAGIC, PROTOCOL_VERSION};
use lanefs_proto::{Credentials, MdsRequest};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, noting the largest allocation of each thread.
struct Largest;

thread_local! {
    static LARGEST_BYTES: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST_BYTES.try_with(|l| l.set(l.get().max(layout.size())));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST_BYTES.try_with(|l| l.set(l.get().max(new_size)));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Largest = Largest;

/// What decoding may allocate at once beyond the input's own size: serde
/// reserves at most 1 MiB for a sequence before its elements arrive.
const SLACK_BYTES: usize = (1 << 20) + 4096;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().build().unwrap()
}

/// The largest allocations made while decoding `bytes` as one frame body
/// and as a stream of frames. The body's decoder allocates what the input
/// holds; the stream's reader reserves what a frame's lengths announce
/// (within the codec's maxima) before the bytes arrive, as it reads bulk
/// data straight into its buffer: memory reserved, not yet touched.
fn decode_everything(rt: &tokio::runtime::Runtime, bytes: &[u8]) -> (usize, usize) {
    let input = bytes.to_vec();
    LARGEST_BYTES.with(|l| l.set(0));
    if let Ok(message) = decode(input) {
        let mut again = Vec::new();
        encode(message.clone(), &mut again).expect("a decoded message encodes");
        assert_eq!(decode(again[4..].to_vec()).expect("and decodes"), message);
    }
    let body = LARGEST_BYTES.with(|l| l.replace(0));
    rt.block_on(async {
        let mut stream = bytes;
        while let Ok(Some(_)) = read_frame(&mut stream).await {}
    });
    (body, LARGEST_BYTES.with(|l| l.get()))
}

fn check_allocations(input_bytes: usize, (body, stream): (usize, usize)) -> Result<(), TestCaseError> {
    prop_assert!(body <= input_bytes + SLACK_BYTES, "{} bytes allocated for a body of {}", body, input_bytes);
    prop_assert!(stream <= FRAME_BYTES_MAX as usize, "{} bytes allocated for a stream of {}", stream, input_bytes);
    Ok(())
}

fn frames() -> Vec<Vec<u8>> {
    let messages = vec![
        Wire::Hello { magic: MAGIC, version: PROTOCOL_VERSION, role: Role::Oss { address: "a".into(), osts: vec![1] } },
        Wire::ToOst {
            ost: 1,
            message: ToOst::Write { xid: Xid(1), object: ObjectId(2), offset: 3, data: Payload::Bytes(vec![9; 300]) },
        },
        Wire::ToOst {
            ost: 0,
            message: ToOst::Enqueue {
                xid: Xid(2),
                object: ObjectId(2),
                request: LockRequest::new(LockMode::ProtectedWrite, Extent::new(0, 4095)),
            },
        },
        Wire::ToClient {
            ost: 0,
            message: ToClient::Enqueue {
                xid: Xid(2),
                reply: EnqueueReply::Granted { lock: LockHandle(4), extent: Extent::WHOLE, proof: Default::default() },
            },
        },
        Wire::ToClient {
            ost: 2,
            message: ToClient::ReadReply { xid: Xid(5), result: Ok(Payload::Bytes(vec![1; 64])) },
        },
        Wire::Mds {
            id: 3,
            call: MdsCall::Namespace {
                credentials: Credentials { uid: 1000, gid: 1000, groups: vec![10] },
                request: MdsRequest::Readdir { path: "/dir".into(), cursor: Some("b".into()) },
            },
        },
        Wire::Session { uuid: 0x1234_5678 },
        Wire::Ping,
        Wire::ToOst { ost: 0, message: ToOst::Connect { resume: Some(Epoch(3)) } },
        Wire::ToOst {
            ost: 1,
            message: ToOst::ReplayWrite {
                transno: Transno(9),
                object: ObjectId(2),
                offset: 4096,
                data: Payload::Bytes(vec![7; 100]),
                proof: ChangeProof(0x0123_4567_89ab_cdef),
            },
        },
        Wire::ToClient { ost: 1, message: ToClient::Committed { transno: Transno(9) } },
        Wire::ToClient { ost: 1, message: ToClient::Failed },
        Wire::StatsReply { id: 1, osts: Vec::new() },
    ];
    messages
        .into_iter()
        .map(|m| {
            let mut out = Vec::new();
            encode(m, &mut out).unwrap();
            out
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite the byte at (index modulo length).
    Set(usize, u8),
    /// Overwrite 8 bytes with a large little-endian number (a length field).
    Huge(usize, u64),
    Truncate(usize),
    Insert(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::Set(at, b)),
        2 => (any::<usize>(), prop_oneof![Just(u64::MAX), Just(u32::MAX as u64), any::<u64>()])
            .prop_map(|(at, v)| Mutation::Huge(at, v)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Mutation::Insert(at, b)),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        if bytes.is_empty() {
            break;
        }
        let n = bytes.len();
        match *m {
            Mutation::Set(at, b) => bytes[at % n] = b,
            Mutation::Huge(at, v) => {
                let at = at % n;
                let end = (at + 8).min(n);
                bytes[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
            }
            Mutation::Truncate(at) => bytes.truncate(at % n),
            Mutation::Insert(at, b) => bytes.insert(at % n, b),
        }
    }
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_decode_to_an_error_or_a_message(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let rt = runtime();
        check_allocations(bytes.len(), decode_everything(&rt, &bytes))?;
    }

    #[test]
    fn mutated_frames_decode_to_an_error_or_a_message(
        which in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let frames = frames();
        let frame = mutate(frames[which.index(frames.len())].clone(), &mutations);
        let rt = runtime();
        // With its length field, and as a body without it.
        check_allocations(frame.len(), decode_everything(&rt, &frame))?;
        let body = frame.get(4..).unwrap_or_default();
        check_allocations(body.len(), decode_everything(&rt, body))?;
    }
}

/// The measure above sees the decoder's allocations (so the bounds it
/// checks cannot hold for want of looking).
#[test]
fn the_allocation_measure_sees_a_write_payload() {
    let rt = runtime();
    let write = &frames()[1];
    let (body, stream) = decode_everything(&rt, &write[4..]);
    assert!(body >= 300, "{body}");
    assert!(stream < 300, "a body alone is no stream: {stream}");
    assert!(decode_everything(&rt, write).1 >= 300);
}
