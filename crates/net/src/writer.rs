//! The writing half of a connection: a task that drains its [`Outbox`]
//! into the socket, batching whatever is queued into one write. When the
//! outbox finishes (a `Refused` with its reason, or an unmount), what is
//! queued is sent and the socket shut; when it closes, the task stops at
//! once and the socket goes with it.
//!
//! Bulk data is written from where it lies: a page span frame by frame in
//! one vectored write, never gathered into a buffer first. On a connection
//! whose OSS has mapped the client's page arena, a write RPC whose frames
//! are all in it goes as a bulk descriptor instead ([`lanefs_proto::wire::Wire::share_bulk`]).
//!
//! Every write to the socket must make progress within the outbox's
//! `stall_timeout`: a peer that reads nothing for that long has its
//! connection closed and its queue freed (see [`crate::limits`]).

use crate::outbox::Outbox;
use lanefs_proto::codec::encode_head;
use lanefs_proto::wire::Bulk;
use std::io::IoSlice;
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tracing::{debug, warn};

/// Bytes batched before a write even if more messages are queued.
const BATCH_BYTES_MAX: usize = 256 << 10;
/// Slices handed to one vectored write (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Drain `outbox` into `w`. `shared_arena` is the client's page arena that
/// the peer has mapped, if any.
pub fn spawn_writer<W: AsyncWrite + Unpin + Send + 'static>(
    w: W,
    outbox: Arc<Outbox>,
    shared_arena: Option<u64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = drain(w, &outbox, shared_arena).await {
            match e.kind() {
                std::io::ErrorKind::TimedOut => warn!("closing a connection: {e}"),
                _ => debug!("connection writer stops: {e}"),
            }
            outbox.abort(&e.to_string());
        }
    })
}

async fn drain<W: AsyncWrite + Unpin>(mut w: W, outbox: &Outbox, shared_arena: Option<u64>) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(64 << 10);
    while let Some(first) = outbox.next().await {
        let (mut messages, mut bytes) = (0, 0);
        let mut next = Some(first);
        // Batch small messages; a bulk payload is written from its own
        // buffer right after the heads queued before it.
        while let Some(queued) = next.take() {
            messages += 1;
            bytes += queued.cost;
            let m = match shared_arena {
                Some(arena) => queued.wire.share_bulk(arena),
                None => queued.wire,
            };
            match encode_head(m, &mut buf) {
                Ok(bulk) if !bulk.is_empty() => {
                    write_with_bulk(&mut w, &buf, &bulk, outbox).await?;
                    buf.clear();
                }
                Ok(_) => {}
                Err(e) => debug!("dropping unencodable message: {e}"),
            }
            if buf.len() < BATCH_BYTES_MAX {
                next = outbox.try_next();
            }
        }
        write_all(&mut w, &buf, outbox).await?;
        within(outbox, w.flush()).await?;
        buf.clear();
        outbox.written(messages, bytes);
    }
    if !outbox.is_closed() {
        // Finished: everything queued is sent.
        let _ = within(outbox, w.shutdown()).await;
    }
    Ok(())
}

/// One write call that must make progress within the stall timeout, and
/// is given up at once if the connection closes meanwhile.
async fn within<T>(outbox: &Outbox, f: impl std::future::Future<Output = std::io::Result<T>>) -> std::io::Result<T> {
    let stall = outbox.limits().stall_timeout;
    tokio::select! {
        result = tokio::time::timeout(stall, f) => match result {
            Ok(result) => result,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the peer has read nothing for {stall:?} (write stall timeout)"),
            )),
        },
        reason = outbox.closed() => Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, reason)),
    }
}

async fn write_all<W: AsyncWrite + Unpin>(w: &mut W, mut bytes: &[u8], outbox: &Outbox) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = within(outbox, w.write(bytes)).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
    }
    Ok(())
}

/// `head` then the bulk's bytes, in as few vectored writes as they take.
async fn write_with_bulk<W: AsyncWrite + Unpin>(
    w: &mut W,
    head: &[u8],
    bulk: &Bulk,
    outbox: &Outbox,
) -> std::io::Result<()> {
    let pieces = bulk.slices();
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(pieces.len() + 1);
    slices.push(IoSlice::new(head));
    slices.extend(pieces.into_iter().map(IoSlice::new));
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = rest.len().min(IOV_MAX);
        let written = within(outbox, w.write_vectored(&rest[..n])).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, written);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::QueueLimits;
    use lanefs_proto::wire::Wire;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;

    fn limits(stall_ms: u64) -> QueueLimits {
        QueueLimits { stall_timeout: Duration::from_millis(stall_ms), ..QueueLimits::default() }
    }

    #[tokio::test]
    async fn a_peer_that_reads_nothing_is_cut_off_after_the_stall_timeout() {
        let (near, _far) = tokio::io::duplex(4096);
        let outbox = Outbox::new(limits(100));
        let data = vec![1u8; 1 << 20];
        let reply = lanefs_core::msg::ToClient::ReadReply { xid: lanefs_core::Xid(1), result: Ok(data.into()) };
        outbox.push(Wire::ToClient { ost: 0, message: reply }).unwrap();
        let writer = spawn_writer(near, outbox.clone(), None);
        let reason = tokio::time::timeout(Duration::from_secs(5), outbox.closed()).await.expect("closed in time");
        assert!(reason.contains("write stall timeout"), "{reason}");
        assert_eq!(outbox.queued_bytes(), 0, "the queue is freed");
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn finishing_sends_the_queue_then_the_reason_then_shuts_the_socket() {
        let (near, mut far) = tokio::io::duplex(1 << 16);
        let outbox = Outbox::new(limits(5000));
        let writer = spawn_writer(near, outbox.clone(), None);
        outbox.push(Wire::Pong).unwrap();
        outbox.finish(Some(Wire::Refused { reason: "the OSS is shutting down".into() }));
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.unwrap(); // ends: the socket was shut
        assert!(String::from_utf8_lossy(&got).contains("shutting down"));
        let mut stream: &[u8] = &got;
        assert_eq!(lanefs_proto::codec::read_frame(&mut stream).await.unwrap(), Some(Wire::Pong));
        writer.await.unwrap();
        assert_eq!(outbox.queued_bytes(), 0);
    }
}
