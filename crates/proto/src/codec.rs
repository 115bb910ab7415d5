//! The wire format: length-prefixed frames with a bincode header and raw
//! bulk bytes.
//!
//! ```text
//! u32 frame_bytes   (little endian; bytes after this field, at most FRAME_BYTES_MAX)
//! u32 header_bytes  (at most HEADER_BYTES_MAX)
//! header            (bincode, fixed-width integers: a `Wire` value with its bulk data taken out)
//! bulk              (frame_bytes - 4 - header_bytes raw bytes: the data of a write or a read reply)
//! ```
//!
//! Bulk data is never serialized: it is moved out of the message before the
//! header is encoded and written as it is, and moved back in after decoding
//! (always as `Payload::Bytes`). A phantom payload (the simulator's) cannot
//! be encoded: [`CodecError::Phantom`].
//! Every length is checked before anything is allocated, so a malformed or
//! hostile frame costs its reader an error, never a crash or a huge buffer.

use crate::wire::{Bulk, PhantomOnWire, Wire};
use bincode::Options;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest bulk payload: Lustre's protocol maximum RPC (64 MiB).
pub const BULK_BYTES_MAX: u32 = 64 << 20;
// An OST answers reads of up to `RPC_BYTES_MAX` bytes: their replies must fit.
const _: () = assert!(BULK_BYTES_MAX as u64 >= lanefs_core::ost::RPC_BYTES_MAX);
/// Largest encoded header (namespace listings are the big ones).
pub const HEADER_BYTES_MAX: u32 = 16 << 20;
/// Largest frame.
pub const FRAME_BYTES_MAX: u32 = 4 + HEADER_BYTES_MAX + BULK_BYTES_MAX;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("frame of {0} bytes exceeds the maximum of {FRAME_BYTES_MAX}; the peer is not speaking the lanefs protocol or is broken")]
    FrameTooLarge(u32),
    #[error(
        "frame header of {header} bytes does not fit its frame of {frame} bytes (maximum header {HEADER_BYTES_MAX})"
    )]
    BadHeaderLength { header: u32, frame: u32 },
    #[error("undecodable frame header: {0}")]
    BadHeader(String),
    #[error("frame carries {bulk} bulk bytes but its message takes none")]
    UnexpectedBulk { bulk: usize },
    #[error("bulk payload of {0} bytes exceeds the maximum of {BULK_BYTES_MAX}")]
    BulkTooLarge(usize),
    #[error(transparent)]
    Phantom(#[from] PhantomOnWire),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

fn options(limit: u32) -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding().with_little_endian().with_limit(limit as u64)
}

/// Encode a message into one frame, appended to `out`.
pub fn encode(message: Wire, out: &mut Vec<u8>) -> Result<(), CodecError> {
    let bulk = encode_head(message, out)?;
    bulk.slices().into_iter().for_each(|s| out.extend_from_slice(s));
    Ok(())
}

/// Decode one frame's body (everything after `frame_bytes`).
pub fn decode(body: Vec<u8>) -> Result<Wire, CodecError> {
    let frame = body.len() as u32;
    if body.len() < 4 {
        return Err(CodecError::BadHeaderLength { header: 0, frame });
    }
    let header = u32::from_le_bytes(body[..4].try_into().expect("4 bytes"));
    if header > HEADER_BYTES_MAX || header as usize > body.len() - 4 {
        return Err(CodecError::BadHeaderLength { header, frame });
    }
    let end = 4 + header as usize;
    let mut message: Wire =
        options(header).deserialize(&body[4..end]).map_err(|e| CodecError::BadHeader(e.to_string()))?;
    let mut body = body;
    let bulk = body.split_off(end);
    if !bulk.is_empty() && !message.takes_bulk() {
        return Err(CodecError::UnexpectedBulk { bulk: bulk.len() });
    }
    message.put_bulk(bulk);
    Ok(message)
}

/// Read one message; `Ok(None)` on a clean end of stream between frames.
/// The header and the bulk bytes are read into buffers of their own, so the
/// bulk data is never copied after it leaves the socket.
pub async fn read_frame<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Option<Wire>, CodecError> {
    let mut len = [0u8; 4];
    match reader.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let frame = u32::from_le_bytes(len);
    if frame > FRAME_BYTES_MAX {
        return Err(CodecError::FrameTooLarge(frame));
    }
    if frame < 4 {
        return Err(CodecError::BadHeaderLength { header: 0, frame });
    }
    read_exact(reader, &mut len).await?;
    let header = u32::from_le_bytes(len);
    if header > HEADER_BYTES_MAX || header > frame - 4 {
        return Err(CodecError::BadHeaderLength { header, frame });
    }
    let mut head = vec![0u8; header as usize];
    read_exact(reader, &mut head).await?;
    let mut message: Wire = options(header).deserialize(&head).map_err(|e| CodecError::BadHeader(e.to_string()))?;
    let bulk_len = (frame - 4 - header) as usize;
    if bulk_len > 0 && !message.takes_bulk() {
        return Err(CodecError::UnexpectedBulk { bulk: bulk_len });
    }
    // Read straight into spare capacity: no zeroing of a buffer about to be
    // overwritten.
    let mut bulk = Vec::with_capacity(bulk_len);
    let got = reader.take(bulk_len as u64).read_to_end(&mut bulk).await?;
    if got < bulk_len {
        return Err(CodecError::Truncated);
    }
    message.put_bulk(bulk);
    Ok(Some(message))
}

async fn read_exact<R: AsyncRead + Unpin>(reader: &mut R, buf: &mut [u8]) -> Result<(), CodecError> {
    reader.read_exact(buf).await.map(|_| ()).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => CodecError::Truncated,
        _ => e.into(),
    })
}

/// Encode a message's frame head (lengths and header) into `out` and hand
/// back its bulk bytes, for writers that send the bulk without copying it.
pub fn encode_head(mut message: Wire, out: &mut Vec<u8>) -> Result<Bulk, CodecError> {
    let bulk = message.take_bulk()?;
    if bulk.len() > BULK_BYTES_MAX as usize {
        return Err(CodecError::BulkTooLarge(bulk.len()));
    }
    let header = options(HEADER_BYTES_MAX).serialize(&message).map_err(|e| CodecError::BadHeader(e.to_string()))?;
    let frame = 4 + header.len() + bulk.len();
    out.extend_from_slice(&(frame as u32).to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    Ok(bulk)
}

/// Write one message and flush.
pub async fn write_frame<W: AsyncWrite + Unpin>(writer: &mut W, message: Wire) -> Result<(), CodecError> {
    let mut buf = Vec::new();
    encode(message, &mut buf)?;
    writer.write_all(&buf).await?;
    writer.flush().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::PROTOCOL_VERSION;
    use lanefs_core::msg::{Payload, ToClient, ToOst};
    use lanefs_core::{ObjectId, Xid};

    fn roundtrip(m: Wire) -> Wire {
        let mut buf = Vec::new();
        encode(m, &mut buf).unwrap();
        let frame = u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
        assert_eq!(frame, buf.len() - 4);
        decode(buf[4..].to_vec()).unwrap()
    }

    #[test]
    fn bulk_travels_raw_and_comes_back() {
        let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let m = Wire::ToOst {
            ost: 3,
            message: ToOst::Write { xid: Xid(7), object: ObjectId(9), offset: 4096, data: data.clone().into() },
        };
        let mut buf = Vec::new();
        encode(m.clone(), &mut buf).unwrap();
        // The data appears verbatim at the end of the frame.
        assert_eq!(&buf[buf.len() - data.len()..], &data[..]);
        assert_eq!(roundtrip(m.clone()), m);
        let r = Wire::ToClient { ost: 1, message: ToClient::ReadReply { xid: Xid(1), result: Ok(data.into()) } };
        assert_eq!(roundtrip(r.clone()), r);
        let h = Wire::Hello { magic: crate::wire::MAGIC, version: PROTOCOL_VERSION, role: crate::wire::Role::Client };
        assert_eq!(roundtrip(h.clone()), h);
    }

    #[test]
    fn frames_travel_as_bulk_unless_all_are_in_the_shared_arena() {
        use lanefs_core::pages::{Arena, PagePool, PageSpan};
        let arena = Arena::on_heap(2); // too small: the span's last frame comes from the heap
        let pool = PagePool::with_arena(arena.clone());
        let data: Vec<u8> = (0..3 * 4096u32).map(|i| (i % 251) as u8).collect();
        let span = PageSpan::copy_from(&pool, 0, &data);
        let write = |span: PageSpan| Wire::ToOst {
            ost: 1,
            message: ToOst::Write { xid: Xid(2), object: ObjectId(3), offset: 0, data: Payload::Pages(Box::new(span)) },
        };
        // Not all in the arena: the bytes go on the wire, frame by frame.
        let mixed = write(span.clone()).share_bulk(arena.id());
        assert!(matches!(mixed, Wire::ToOst { .. }), "{mixed:?}");
        let back = roundtrip(mixed);
        assert_eq!(back, write(span.clone()));
        assert!(
            matches!(&back, Wire::ToOst { message: ToOst::Write { data: Payload::Bytes(b), .. }, .. } if *b == data)
        );
        // All in the arena: a descriptor, no bulk at all.
        let shared = write(span.sub(0, 2 * 4096)).share_bulk(arena.id());
        let Wire::WriteShared { bulk, .. } = &shared else { panic!("{shared:?}") };
        assert_eq!((bulk.arena, bulk.head, bulk.len, bulk.runs.clone()), (arena.id(), 0, 8192, vec![(0, 2)]));
        let mut buf = Vec::new();
        encode(shared.clone(), &mut buf).unwrap();
        assert!(buf.len() < 200, "a descriptor, not the 8 KiB it names: {} bytes", buf.len());
        assert_eq!(roundtrip(shared.clone()), shared);
    }

    #[test]
    fn malformed_frames_are_errors() {
        assert!(matches!(decode(vec![1, 2]), Err(CodecError::BadHeaderLength { .. })));
        let mut huge_header = (HEADER_BYTES_MAX + 1).to_le_bytes().to_vec();
        huge_header.extend_from_slice(&[0; 16]);
        assert!(matches!(decode(huge_header), Err(CodecError::BadHeaderLength { .. })));
        let mut garbage = 8u32.to_le_bytes().to_vec();
        garbage.extend_from_slice(&[0xff; 8]);
        assert!(matches!(decode(garbage), Err(CodecError::BadHeader(_))));
        // A header claiming a giant vector cannot make the decoder allocate it.
        let m = Wire::Refused { reason: "x".into() };
        let mut buf = Vec::new();
        encode(m, &mut buf).unwrap();
        let mut body = buf[4..].to_vec();
        let at = body.len() - 1 - 8; // the string length field
        body[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(decode(body), Err(CodecError::BadHeader(_))));
        // Bulk bytes after a message that takes none.
        let mut buf = Vec::new();
        encode(Wire::Refused { reason: "x".into() }, &mut buf).unwrap();
        buf.extend_from_slice(&[1, 2, 3]);
        assert!(matches!(decode(buf[4..].to_vec()), Err(CodecError::UnexpectedBulk { bulk: 3 })));
    }

    fn write(data: Payload) -> Wire {
        Wire::ToOst { ost: 2, message: ToOst::Write { xid: Xid(3), object: ObjectId(4), offset: 8192, data } }
    }

    #[test]
    fn phantom_payloads_are_refused_and_decoding_yields_bytes() {
        let mut buf = vec![9u8];
        let refused = encode(write(Payload::Phantom(1 << 20)), &mut buf);
        assert!(matches!(refused, Err(CodecError::Phantom(PhantomOnWire { len: 1_048_576 }))), "{refused:?}");
        assert_eq!(buf, vec![9], "nothing of a refused frame is written");
        let reply =
            Wire::ToClient { ost: 0, message: ToClient::ReadReply { xid: Xid(5), result: Ok(Payload::Phantom(1)) } };
        assert!(matches!(encode_head(reply, &mut buf), Err(CodecError::Phantom(_))));
        let mut m = write(Payload::Phantom(4));
        assert!(matches!(m.take_bulk(), Err(PhantomOnWire { len: 4 })));
        assert_eq!(m, write(Payload::Phantom(4)), "a refused take leaves the message as it was");
        // Empty bytes travel as an empty bulk and come back as bytes.
        assert_eq!(roundtrip(write(Payload::Bytes(vec![]))), write(Payload::Bytes(vec![])));
        // A header that claims a phantom (or stray bytes) decodes as the bulk bytes that follow it.
        for claimed in [Payload::Phantom(1 << 40), Payload::Bytes(vec![1, 2, 3])] {
            let header = options(HEADER_BYTES_MAX).serialize(&write(claimed)).unwrap();
            let mut body = (header.len() as u32).to_le_bytes().to_vec();
            body.extend_from_slice(&header);
            body.extend_from_slice(b"bulk");
            assert_eq!(decode(body).unwrap(), write(Payload::Bytes(b"bulk".to_vec())));
        }
    }

    #[tokio::test]
    async fn oversized_and_truncated_streams_are_refused() {
        let mut stream: &[u8] = &(FRAME_BYTES_MAX + 1).to_le_bytes();
        assert!(matches!(read_frame(&mut stream).await, Err(CodecError::FrameTooLarge(_))));
        let mut short = 100u32.to_le_bytes().to_vec();
        short.extend_from_slice(&10u32.to_le_bytes());
        short.extend_from_slice(&[0; 6]); // 6 of the header's 10 bytes, then the end
        let mut stream: &[u8] = &short;
        assert!(matches!(read_frame(&mut stream).await, Err(CodecError::Truncated)));
        let mut empty: &[u8] = &[];
        assert!(read_frame(&mut empty).await.unwrap().is_none());
        // A bulk payload cut short.
        let mut buf = Vec::new();
        let data = vec![7u8; 1000];
        let m = Wire::ToOst {
            ost: 0,
            message: lanefs_core::msg::ToOst::Write { xid: Xid(1), object: ObjectId(1), offset: 0, data: data.into() },
        };
        encode(m, &mut buf).unwrap();
        buf.truncate(buf.len() - 10);
        let mut stream: &[u8] = &buf;
        assert!(matches!(read_frame(&mut stream).await, Err(CodecError::Truncated)));
    }
}
