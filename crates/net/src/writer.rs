//! The writing half of a connection: a task that drains a channel of
//! messages into the socket, batching whatever is queued into one write.
//! A `Refused` message is the last: it is flushed and the socket shut.

use crate::codec::encode;
use crate::proto::Wire;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedReceiver;
use tracing::debug;

/// Bytes batched before a write even if more messages are queued.
const BATCH_BYTES_MAX: usize = 4 << 20;

pub fn spawn_writer<W: AsyncWrite + Unpin + Send + 'static>(
    mut w: W,
    mut rx: UnboundedReceiver<Wire>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = Vec::with_capacity(1 << 20);
        while let Some(first) = rx.recv().await {
            let mut last = matches!(first, Wire::Refused { .. });
            if let Err(e) = encode(first, &mut buf) {
                debug!("dropping unencodable message: {e}");
            }
            while !last && buf.len() < BATCH_BYTES_MAX {
                match rx.try_recv() {
                    Ok(m) => {
                        last = matches!(m, Wire::Refused { .. });
                        if let Err(e) = encode(m, &mut buf) {
                            debug!("dropping unencodable message: {e}");
                        }
                    }
                    Err(_) => break,
                }
            }
            if w.write_all(&buf).await.is_err() || w.flush().await.is_err() {
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
