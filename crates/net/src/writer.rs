//! The writing half of a connection: a task that drains a channel of
//! messages into the socket, batching whatever is queued into one write.
//! A `Refused` message is the last: it is flushed and the socket shut.
//!
//! Bulk data is written from where it lies: a page span frame by frame in
//! one vectored write, never gathered into a buffer first. On a connection
//! whose OSS has mapped the client's page arena, a write RPC whose frames
//! are all in it goes as a bulk descriptor instead ([`Wire::share_bulk`]).

use crate::codec::encode_head;
use crate::proto::{Bulk, Wire};
use std::io::IoSlice;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::debug;

/// Bytes batched before a write even if more messages are queued.
const BATCH_BYTES_MAX: usize = 256 << 10;
/// Slices handed to one vectored write (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Drain `rx` into `w`. `shared_arena` is the client's page arena that the
/// peer has mapped, if any.
pub fn spawn_writer<W: AsyncWrite + Unpin + Send + 'static>(
    mut w: W,
    mut rx: UnboundedReceiver<Wire>,
    shared_arena: Option<u64>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = Vec::with_capacity(64 << 10);
        while let Some(first) = rx.recv().await {
            let mut next = Some(first);
            let mut last = false;
            // Batch small messages; a bulk payload is written from its own
            // buffer right after the heads queued before it.
            while let Some(m) = next.take() {
                last = matches!(m, Wire::Refused { .. });
                let m = match shared_arena {
                    Some(arena) => m.share_bulk(arena),
                    None => m,
                };
                match encode_head(m, &mut buf) {
                    Ok(bulk) if !bulk.is_empty() => {
                        if write_with_bulk(&mut w, &buf, &bulk).await.is_err() {
                            return;
                        }
                        buf.clear();
                    }
                    Ok(_) => {}
                    Err(e) => debug!("dropping unencodable message: {e}"),
                }
                if !last && buf.len() < BATCH_BYTES_MAX {
                    next = rx.try_recv().ok();
                }
            }
            if (!buf.is_empty() && w.write_all(&buf).await.is_err()) || w.flush().await.is_err() {
                return;
            }
            buf.clear();
            if last {
                let _ = w.shutdown().await;
                return;
            }
        }
        let _ = w.shutdown().await;
    })
}

/// `head` then the bulk's bytes, in as few vectored writes as they take.
async fn write_with_bulk<W: AsyncWrite + Unpin>(w: &mut W, head: &[u8], bulk: &Bulk) -> std::io::Result<()> {
    let pieces = bulk.slices();
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(pieces.len() + 1);
    slices.push(IoSlice::new(head));
    slices.extend(pieces.into_iter().map(IoSlice::new));
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = rest.len().min(IOV_MAX);
        let written = w.write_vectored(&rest[..n]).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, written);
    }
    Ok(())
}
