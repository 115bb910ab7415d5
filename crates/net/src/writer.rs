//! The writing half of a connection: a task that drains a channel of
//! messages into the socket, batching whatever is queued into one write.
//! A `Refused` message is the last: it is flushed and the socket shut.

use crate::codec::encode_head;
use crate::proto::Wire;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::debug;

/// Bytes batched before a write even if more messages are queued.
const BATCH_BYTES_MAX: usize = 256 << 10;

pub fn spawn_writer<W: AsyncWrite + Unpin + Send + 'static>(
    mut w: W,
    mut rx: UnboundedReceiver<Wire>,
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
                match encode_head(m, &mut buf) {
                    Ok(bulk) if !bulk.is_empty() => {
                        if w.write_all(&buf).await.is_err() || w.write_all(&bulk).await.is_err() {
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
