//! The object lifecycle as the MDS records it: each OST's pool of objects
//! created in advance, and the queue of objects to destroy.
//!
//! Lustre's MDS owns the life of every OST object: the OSTs create objects
//! in batches before any file needs them (precreation: the OST records the
//! last id it created, `LAST_ID`, and the MDS hands those ids to new files
//! without asking the OST), and a file's removal writes its objects to the
//! unlink log in the same transaction, from which they are destroyed on the
//! OSTs later, the log records going only when the OST has acknowledged.
//! lanefs does the same, with both books in the database:
//! - `ost_counters.precreated` is the OST's `LAST_ID` as the MDS last
//!   learnt it ([`Mds::record_precreated`]); ids from `next_object` up to
//!   it are the pool that [`crate::alloc`] takes from;
//! - `destroy_queue` holds the objects of removed files
//!   ([`Mds::queued_destroys`]) until [`Mds::record_destroyed`].
//!
//! This crate does no I/O with the OSTs: the network MDS (lanefs-server's
//! `mds_server`) asks them to precreate when a pool runs low and to destroy
//! what is queued, and records their answers here. Objects of an OST whose
//! OSS is down stay queued until it is back.

use crate::schema;
use crate::WriteKind;
use crate::{Fid, Mds, MdsError};
use lanefs_core::units::{ObjectId, OstIndex};

/// The most objects one call to [`Mds::queued_destroys`] returns.
pub const DESTROY_BATCH_MAX: usize = 1024;

/// One OST's pool: ids `next_object..=precreated` exist on the OST and
/// belong to no file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool {
    pub ost: OstIndex,
    /// The next id a file gets on this OST.
    pub next_object: ObjectId,
    /// The OST's `LAST_ID` as last reported: every id up to it was created.
    pub precreated: ObjectId,
}

impl Pool {
    /// How many objects are left to hand out.
    pub fn available(&self) -> u64 {
        (self.precreated.0 + 1).saturating_sub(self.next_object.0)
    }
}

impl Mds {
    fn check_ost(&self, ost: OstIndex) -> Result<(), MdsError> {
        if ost.0 >= self.config.ost_count {
            let reason = format!("OST index {} is out of range for {} OSTs", ost.0, self.config.ost_count);
            return Err(MdsError::InvalidConfig { reason });
        }
        Ok(())
    }

    /// `ost`'s pool of precreated objects.
    pub fn pool(&self, ost: OstIndex) -> Result<Pool, MdsError> {
        self.check_ost(ost)?;
        let (next_object, precreated) = schema::pool(&self.conn, ost)?;
        Ok(Pool { ost, next_object: ObjectId(next_object), precreated: ObjectId(precreated) })
    }

    /// Records that `ost` has created every object up to `last_id` (its
    /// `LAST_ID`, as it answered a precreate). A lower `last_id` than
    /// recorded changes nothing: the watermark never goes down.
    pub fn record_precreated(&mut self, ost: OstIndex, last_id: ObjectId) -> Result<Pool, MdsError> {
        self.check_ost(ost)?;
        self.write(WriteKind::Grows, |tx, _| schema::raise_precreated(tx, ost, last_id))?;
        self.pool(ost)
    }

    /// Up to `count_max` (at most [`DESTROY_BATCH_MAX`]) objects of `ost`
    /// waiting to be destroyed, lowest id first.
    pub fn queued_destroys(&self, ost: OstIndex, count_max: usize) -> Result<Vec<ObjectId>, MdsError> {
        self.queued_destroys_except(ost, count_max, &|_| false)
    }

    /// [`Mds::queued_destroys`] passing over the objects of the removed
    /// files `open` names (a client keeps them open: see [`crate::opens`]).
    pub fn queued_destroys_except(
        &self,
        ost: OstIndex,
        count_max: usize,
        open: &dyn Fn(Fid) -> bool,
    ) -> Result<Vec<ObjectId>, MdsError> {
        self.check_ost(ost)?;
        schema::queued_destroys(&self.conn, ost, count_max.min(DESTROY_BATCH_MAX), open)
    }

    /// Whether a client may keep `fid` open: it is a file, or a removed
    /// file whose objects still wait to be destroyed (after an MDS restart
    /// its clients tell it again of such files they keep open).
    pub fn may_be_open(&self, fid: Fid) -> Result<bool, MdsError> {
        if let Some(inode) = schema::inode_if_any(&self.conn, fid)? {
            return Ok(inode.kind == crate::FileKind::File);
        }
        schema::awaits_destruction(&self.conn, fid)
    }

    /// Whether objects queued under `fid` (a removed file's, or the old
    /// objects of a migrated one, queued under its volatile file's fid)
    /// still wait to be destroyed.
    pub fn destroys_pending(&self, fid: Fid) -> Result<bool, MdsError> {
        schema::awaits_destruction(&self.conn, fid)
    }

    /// Forgets objects the OST has acknowledged destroying. Objects not
    /// queued (a repeated acknowledgement) are passed over.
    pub fn record_destroyed(&mut self, ost: OstIndex, objects: &[ObjectId]) -> Result<(), MdsError> {
        self.check_ost(ost)?;
        let forgotten = self.write(WriteKind::Removes, |tx, _| schema::dequeue_destroys(tx, ost, objects))?;
        tracing::debug!(ost = ost.0, forgotten, "objects destroyed");
        Ok(())
    }
}
