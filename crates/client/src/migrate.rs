//! Restriping a file in place (`lanefs migrate`): Lustre's `lfs migrate`
//! in its default, blocking mode.
//!
//! 1. The MDS starts the migration ([`MdsRequest::MigrateStart`]): a
//!    volatile file (one without a name) with the new layout.
//! 2. A group lock on the file: every other client's lock on its objects
//!    is called back (their dirty bytes flushed to the OSTs first), and
//!    their I/O waits until it is released.
//! 3. The bytes are copied, up to the file's size, [`COPY_CHUNK`] at a
//!    time; a chunk of zeros is left a hole. The copy is made durable.
//! 4. The MDS swaps the layouts ([`MdsRequest::MigrateCommit`]) and
//!    answers once the file's old objects are destroyed on their OSTs.
//! 5. The group lock is released. The waiting I/O of other clients finds
//!    the old objects gone, fetches the file's new layout and is done
//!    there ([`Client::open_file`]): the file stays readable and writable
//!    throughout, its readers and writers waiting out the copy.
//!
//! On any failure before the swap, the migration is abandoned
//! ([`MdsRequest::MigrateAbort`]): the volatile file and its objects go,
//! and the file keeps its layout and bytes. The file's modification and
//! access times stay as they were (its change time moves, as for any
//! change of its inode).
//!
//! Departures from Lustre: only the blocking mode (`lfs migrate -b`,
//! Lustre's default): no `--non-block` (a lease that a concurrent open
//! breaks), no bandwidth limit (`-W`) and no statistics (`--stats`).

use crate::{Client, File, NetError};
use lanefs_core::layout::Layout;
use lanefs_proto::{MdsReply, MdsRequest, StripeSpec};

/// Bytes copied at a time.
pub const COPY_CHUNK: u64 = 4 << 20;

/// What a migration did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Migrated {
    /// The file's layout before and after.
    pub old: Layout,
    pub new: Layout,
    /// The file's size, copied.
    pub size: u64,
}

/// Restripes the file at `path` as `stripe` says (`None`: its own striping,
/// on OSTs the MDS chooses afresh), while it stays open for others.
pub fn migrate(client: &Client, path: &str, stripe: Option<StripeSpec>) -> Result<Migrated, NetError> {
    // Before anything is started that a failure would have to undo.
    let gid = group_id()?;
    let (file, volatile) = match client.mds(MdsRequest::MigrateStart { path: path.to_string(), stripe })? {
        MdsReply::Migration { file, volatile } => (file, volatile),
        other => return Err(NetError::Protocol(format!("a migration's start answered {other:?}"))),
    };
    let (fid, volatile_fid) = (file.fid, volatile.fid);
    let old = file.layout.clone();
    let abandon = |error: NetError| {
        let request = MdsRequest::MigrateAbort { path: path.to_string(), fid, volatile: volatile_fid };
        if let Err(abort) = client.mds(request) {
            tracing::warn!(path, %abort, "a failed migration could not be abandoned: its new objects stay until the next");
        }
        error
    };
    let source = client.open_file(path, file).map_err(abandon)?;
    let target = match client.open_layout(&format!("{path} (its new layout)"), volatile.layout) {
        Ok(target) => target,
        Err(error) => {
            let _ = client.close(source);
            return Err(abandon(error));
        }
    };
    let copied = client.group_lock(&source, gid).and_then(|()| {
        let copied = copy(client, &source, &target).and_then(|size| {
            let request = MdsRequest::MigrateCommit { path: path.to_string(), fid, volatile: volatile_fid };
            match client.mds(request)? {
                MdsReply::File(info) => Ok((size, info.layout)),
                other => Err(NetError::Protocol(format!("a migration's commit answered {other:?}"))),
            }
        });
        let unlocked = client.group_unlock(&source, gid);
        let copied = copied?;
        unlocked.map(|()| copied)
    });
    // The copy's handle holds nothing dirty (it was made durable); the
    // file's handle read only. A close that fails after the swap loses
    // nothing.
    let _ = client.close(target);
    let _ = client.close(source);
    match copied {
        Ok((size, new)) => Ok(Migrated { old, new, size }),
        Err(error) => Err(abandon(error)),
    }
}

/// Copies `source`'s bytes into `target` and makes them durable; returns
/// the size.
fn copy(client: &Client, source: &File, target: &File) -> Result<u64, NetError> {
    let size = client.size(source)?;
    let mut offset = 0;
    while offset < size {
        let len = COPY_CHUNK.min(size - offset);
        let data = client.pread(source, offset, len)?;
        if data.iter().any(|&byte| byte != 0) {
            client.pwrite(target, offset, &data)?;
        }
        offset += len;
    }
    // The size, past a hole at the end.
    client.truncate(target, size)?;
    client.fsync(target)?;
    Ok(size)
}

/// A group id of the migration's own: random and never 0 (no group).
fn group_id() -> Result<u64, NetError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 8];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| NetError::Invalid("no random bytes for a group lock's id".into()))?;
    Ok(u64::from_le_bytes(bytes).max(1))
}
