//! RAID-0 striped file layouts, plain or composite, as Lustre's LOV
//! (`lov_stripe_offset`, `lov_stripe_size`, `lov_stripe_intersects`) and
//! its composite layouts (PFL: `lov_comp_md_v1`).
//!
//! A composite layout is a list of components, each RAID-0 over its own
//! objects for one range of the file ([`Component`]): the first from 0,
//! each from the previous one's end, the last to `EOF`. The arithmetic
//! below is a component's, applied to the component holding the offset.
//!
//! A file's bytes are dealt out round-robin, `stripe_size` bytes (one *stripe
//! unit*) at a time, over `stripe_count` objects, each on a different OST.
//! With `S` the stripe size and `C` the stripe count, file offset `f` lies in
//! stripe unit `u = f / S`, on stripe `u % C`, at object offset
//! `(u / C) * S + f % S`. This module does that arithmetic in both directions,
//! splits file ranges into per-object pieces, and converts between file and
//! object sizes.
//!
//! It is *not* an allocation policy: the MDS decides which OSTs and objects a
//! file gets (free space, pools, QoS). A [`Layout`] only records that choice
//! and checks it is well formed. [`Layout::round_robin`] is a convenience for
//! tests and the harness, not a policy.
//!
//! Invariants, checked by every constructor (deserialization included):
//! - `stripe_size` is a positive multiple of [`STRIPE_SIZE_UNIT`] (64 KiB), so
//!   stripe boundaries are page aligned: a client page never straddles two
//!   objects, and rounding an object extent out to pages (as lock requests
//!   are) never reaches into another stripe unit.
//! - `1 <= stripe_count <= STRIPE_COUNT_MAX`: a file has data somewhere, and
//!   the layout fits Lustre's on-disk layout EA.
//! - No two stripes share an object. Two may share an OST: Lustre's
//!   *overstriping* (`lfs setstripe -C`), which puts several objects of a
//!   file on one OST so that more clients, each on its own stripe's locks,
//!   can write to it at once. A layout is overstriped when an OST repeats
//!   ([`Layout::is_overstriped`]).
//! - `stripe_size * stripe_count` (one stripe row) fits in a `u64`: otherwise
//!   the last stripes would start past the largest file offset and their
//!   objects could never hold a byte.
//! - A component's stripe offset is its first object's OST.
//! - Components cover the file in order, each ending past its start at a
//!   multiple of its stripe size (so at a page boundary), the last at
//!   `EOF`; at most [`COMPONENT_COUNT_MAX`] of them.
//!
//! File offsets range over all of `u64`; a byte range `(offset, len)` must
//! end at or below `u64::MAX`, so the largest file size is `u64::MAX`. All
//! arithmetic is either checked or bounded by the file offset it came from.

use crate::extent::{Extent, EOF};
use crate::units::{ObjectId, ObjectKey, OstIndex};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::sync::Arc;
use thiserror::Error;

/// Stripe sizes must be positive multiples of this (Lustre's `LOV_MIN_STRIPE_SIZE`).
pub const STRIPE_SIZE_UNIT: u64 = 65536;

/// The most stripes one file may have (Lustre's `LOV_MAX_STRIPE_COUNT`).
pub const STRIPE_COUNT_MAX: u32 = 2000;

/// Why a layout was rejected; each message names the bad value and the fix.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error("stripe size is 0: use a positive multiple of 65536 (64 KiB), e.g. -S 1M")]
    ZeroStripeSize,
    #[error("stripe size {stripe_size} is not a multiple of 65536 (64 KiB): use -S 64k, 1M, 4M, ...")]
    StripeSizeNotMultiple { stripe_size: u64 },
    #[error("stripe count is 0: a file needs at least one stripe, use -c 1 or more")]
    ZeroStripeCount,
    #[error(
        "stripe count {stripe_count} exceeds the maximum of {STRIPE_COUNT_MAX}: use -c {STRIPE_COUNT_MAX} or fewer"
    )]
    TooManyStripes { stripe_count: u64 },
    #[error("there are no OSTs to stripe over: add at least one OST first")]
    NoOsts,
    #[error(
        "stripe count {stripe_count} exceeds the {ost_count} OSTs available: use -c {ost_count} or fewer, or add OSTs"
    )]
    StripeCountExceedsOsts { stripe_count: u32, ost_count: u32 },
    #[error("starting OST index {} is out of range for {ost_count} OSTs: use -i 0 to -i {}", .start_ost.0, .ost_count - 1)]
    StartOstOutOfRange { start_ost: OstIndex, ost_count: u32 },
    #[error(
        "stripes {first_stripe} and {second_stripe} are both object {} on {}: the layout is corrupt, recreate it",
        .key.object.0, .key.ost
    )]
    DuplicateObject { key: ObjectKey, first_stripe: u32, second_stripe: u32 },
    #[error("stripe size {stripe_size} times stripe count {stripe_count} overflows 64 bits: use a smaller -S or -c")]
    StripeWidthOverflow { stripe_size: u64, stripe_count: u32 },
    #[error(
        "layout says stripe offset {stripe_offset} but stripe 0 is on {first_ost}: the layout is corrupt, recreate it"
    )]
    StripeOffsetMismatch { stripe_offset: OstIndex, first_ost: OstIndex },
    #[error(
        "component {} starts at {start} and ends at {}: each component must end past its start, at a \
         multiple of its stripe size ({stripe_size}), and the last at EOF (-E -1 or -E eof)",
        .component + 1,
        if *.end == u64::MAX { "EOF".to_string() } else { .end.to_string() }
    )]
    ComponentEnd {
        /// Which, counted from 0 (the message counts from 1, as lfs does).
        component: u32,
        start: u64,
        end: u64,
        stripe_size: u64,
    },
    #[error("a layout has at most {COMPONENT_COUNT_MAX} components, not {count}: give fewer -E")]
    TooManyComponents { count: usize },
}

/// The most components one composite layout may have.
pub const COMPONENT_COUNT_MAX: usize = 64;

/// One component of a layout: RAID-0 striping of the file bytes in
/// `[start, end)` over its own objects.
///
/// An object of a component holds the bytes the component's striping
/// gives it, at the object offsets that striping would give them if it
/// began at file offset 0 (as Lustre's `lov_stripe_offset` maps them): so
/// a component's objects are sparse below its start, and the offsets of a
/// file byte do not depend on where its component begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Component {
    /// The first file byte of the component.
    pub start: u64,
    /// The file offset just past its last byte; `u64::MAX` is `EOF`.
    pub end: u64,
    pub stripe_size: u64,
    /// Its stripes' objects are the layout's objects `first..first + count`.
    pub first: u32,
    pub count: u32,
}

impl Component {
    fn count_u64(&self) -> u64 {
        u64::from(self.count)
    }

    /// `(stripe within the component, object offset)` of a file offset.
    fn file_to_object(&self, file_offset: u64) -> (u32, u64) {
        let (size, count) = (self.stripe_size, self.count_u64());
        let unit = file_offset / size;
        ((unit % count) as u32, (unit / count) * size + file_offset % size)
    }

    /// The inverse of `file_to_object`, saturating at `u64::MAX`.
    fn object_to_file(&self, stripe: u32, object_offset: u64) -> u64 {
        let (size, count) = (self.stripe_size, self.count_u64());
        (object_offset / size)
            .checked_mul(count)
            .and_then(|unit| unit.checked_add(u64::from(stripe)))
            .and_then(|unit| unit.checked_mul(size))
            .and_then(|unit_start| unit_start.checked_add(object_offset % size))
            .unwrap_or(u64::MAX)
    }

    /// The object offset of `stripe`'s first byte at or after file offset
    /// `file_size`, in this component's striping from file offset 0.
    fn object_size_at(&self, stripe: u32, file_size: u64) -> u64 {
        let Some(last) = file_size.checked_sub(1) else {
            return 0;
        };
        let (last_stripe, last_object_offset) = self.file_to_object(last);
        let row_start = last_object_offset - last_object_offset % self.stripe_size;
        match stripe.cmp(&last_stripe) {
            // Stripes before the last byte's have a full unit in its row; no
            // overflow, as that unit ends below `last` in object space too.
            Ordering::Less => row_start + self.stripe_size,
            Ordering::Equal => last_object_offset + 1,
            Ordering::Greater => row_start,
        }
    }

    /// Whether the component is the one that runs to the end of file space.
    pub fn is_last(&self) -> bool {
        self.end == u64::MAX
    }
}

/// A validated layout: one RAID-0 component over the whole file (a plain
/// layout, `lfs setstripe -c -S`), or several over consecutive ranges of
/// it (a composite layout, Lustre's PFL, `lfs setstripe -E`), each with
/// its own objects; which object holds each stripe, and how wide a stripe
/// unit is.
///
/// A *stripe* here is one of the layout's objects, numbered across all
/// components in order (a component's stripes follow the previous one's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "LayoutFields", into = "LayoutFields")]
pub struct Layout {
    /// In file order; the first starts at 0, each where the previous ends,
    /// the last at `EOF`.
    components: Arc<[Component]>,
    /// One object per stripe, in stripe order; shared, since every client
    /// that opens a file holds its layout (thousands in the simulator).
    objects: Arc<[ObjectKey]>,
    /// `(object, stripe)` of every stripe, by object: which stripe an
    /// object is, without a walk. Derived from `objects`.
    by_key: Arc<[(ObjectKey, u32)]>,
}

/// The wire form of one component of a [`Layout`].
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ComponentFields {
    start: u64,
    end: u64,
    stripe_size: u64,
    stripe_offset: OstIndex,
    objects: Vec<ObjectKey>,
}

/// The wire form of [`Layout`], validated into one by `TryFrom`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct LayoutFields {
    components: Vec<ComponentFields>,
}

impl TryFrom<LayoutFields> for Layout {
    type Error = LayoutError;

    fn try_from(fields: LayoutFields) -> Result<Self, Self::Error> {
        let offsets: Vec<OstIndex> = fields.components.iter().map(|c| c.stripe_offset).collect();
        let parts = fields.components.into_iter().map(|c| (c.end, c.stripe_size, c.objects)).collect();
        let layout = Layout::composite(parts)?;
        for (component, stripe_offset) in layout.components.iter().zip(offsets) {
            let first_ost = layout.objects[component.first as usize].ost;
            if first_ost != stripe_offset {
                return Err(LayoutError::StripeOffsetMismatch { stripe_offset, first_ost });
            }
        }
        Ok(layout)
    }
}

impl From<Layout> for LayoutFields {
    fn from(layout: Layout) -> LayoutFields {
        let components = layout
            .components
            .iter()
            .map(|c| {
                let objects = layout.objects[c.first as usize..(c.first + c.count) as usize].to_vec();
                ComponentFields {
                    start: c.start,
                    end: c.end,
                    stripe_size: c.stripe_size,
                    stripe_offset: objects[0].ost,
                    objects,
                }
            })
            .collect();
        LayoutFields { components }
    }
}

/// The part of a file byte range that lies in one stripe unit of one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectChunk {
    pub stripe: u32,
    pub key: ObjectKey,
    pub object_offset: u64,
    pub file_offset: u64,
    pub len: u64,
}

fn check_stripe_size(stripe_size: u64) -> Result<(), LayoutError> {
    match stripe_size {
        0 => Err(LayoutError::ZeroStripeSize),
        s if s % STRIPE_SIZE_UNIT != 0 => Err(LayoutError::StripeSizeNotMultiple { stripe_size }),
        _ => Ok(()),
    }
}

fn check_stripe_count(stripe_count: u64) -> Result<(), LayoutError> {
    match stripe_count {
        0 => Err(LayoutError::ZeroStripeCount),
        c if c > u64::from(STRIPE_COUNT_MAX) => Err(LayoutError::TooManyStripes { stripe_count }),
        _ => Ok(()),
    }
}

/// `(object, stripe)` of every stripe, sorted by object, or the first two
/// stripes that name one object.
fn by_key(objects: &[ObjectKey]) -> Result<Vec<(ObjectKey, u32)>, LayoutError> {
    let mut by_key: Vec<(ObjectKey, u32)> = objects.iter().zip(0..).map(|(&key, stripe)| (key, stripe)).collect();
    by_key.sort_unstable();
    if let Some(pair) = by_key.windows(2).find(|pair| pair[0].0 == pair[1].0) {
        let (key, first_stripe, second_stripe) = (pair[0].0, pair[0].1, pair[1].1);
        return Err(LayoutError::DuplicateObject { key, first_stripe, second_stripe });
    }
    Ok(by_key)
}

/// The exclusive end of `[file_offset, file_offset + len)`; panics past `u64::MAX`.
fn range_end(file_offset: u64, len: u64) -> u64 {
    let Some(end) = file_offset.checked_add(len) else {
        panic!("file range at {file_offset} of {len} bytes ends past u64::MAX");
    };
    end
}

impl Layout {
    /// A plain layout over `objects` (stripe `i` on `objects[i]`), validated.
    pub fn new(stripe_size: u64, objects: Vec<ObjectKey>) -> Result<Layout, LayoutError> {
        Layout::composite(vec![(u64::MAX, stripe_size, objects)])
    }

    /// A composite layout: `(end, stripe size, objects)` of each component
    /// in file order, the first starting at 0 and each where the previous
    /// ends; the last must end at `u64::MAX` (`EOF`), each other at a
    /// multiple of its stripe size, past its start.
    pub fn composite(parts: Vec<(u64, u64, Vec<ObjectKey>)>) -> Result<Layout, LayoutError> {
        if parts.is_empty() {
            return Err(LayoutError::ZeroStripeCount);
        }
        if parts.len() > COMPONENT_COUNT_MAX {
            return Err(LayoutError::TooManyComponents { count: parts.len() });
        }
        let mut components = Vec::with_capacity(parts.len());
        let mut objects = Vec::new();
        let mut start = 0u64;
        let last = parts.len() - 1;
        for (index, (end, stripe_size, keys)) in parts.into_iter().enumerate() {
            check_stripe_size(stripe_size)?;
            check_stripe_count(keys.len() as u64)?;
            let count = keys.len() as u32;
            if stripe_size.checked_mul(u64::from(count)).is_none() {
                return Err(LayoutError::StripeWidthOverflow { stripe_size, stripe_count: count });
            }
            let bad_end = if index == last { end != u64::MAX } else { end <= start || end == u64::MAX };
            if bad_end || (end != u64::MAX && end % stripe_size != 0) {
                return Err(LayoutError::ComponentEnd { component: index as u32, start, end, stripe_size });
            }
            let first = objects.len() as u32;
            components.push(Component { start, end, stripe_size, first, count });
            objects.extend(keys);
            start = end;
        }
        let by_key = by_key(&objects)?;
        Ok(Layout { components: components.into(), objects: objects.into(), by_key: by_key.into() })
    }

    /// Stripe `i` on OST `(start_ost + i) % ost_count`, its object named by
    /// `object_id_of` (called once per stripe, in stripe order, after validation).
    pub fn round_robin(
        stripe_size: u64,
        stripe_count: u32,
        start_ost: OstIndex,
        ost_count: u32,
        mut object_id_of: impl FnMut(OstIndex) -> ObjectId,
    ) -> Result<Layout, LayoutError> {
        check_stripe_size(stripe_size)?;
        check_stripe_count(u64::from(stripe_count))?;
        if ost_count == 0 {
            return Err(LayoutError::NoOsts);
        }
        if stripe_count > ost_count {
            return Err(LayoutError::StripeCountExceedsOsts { stripe_count, ost_count });
        }
        if start_ost.0 >= ost_count {
            return Err(LayoutError::StartOstOutOfRange { start_ost, ost_count });
        }
        let objects = (0..u64::from(stripe_count))
            .map(|i| {
                let ost = OstIndex(((u64::from(start_ost.0) + i) % u64::from(ost_count)) as u32);
                ObjectKey { ost, object: object_id_of(ost) }
            })
            .collect();
        Layout::new(stripe_size, objects)
    }

    /// The components, in file order (one for a plain layout).
    pub fn components(&self) -> &[Component] {
        &self.components
    }

    /// Whether the layout has more than one component (Lustre's PFL).
    pub fn is_composite(&self) -> bool {
        self.components.len() > 1
    }

    /// The component that runs to the end of the file: a plain layout's
    /// only one, where a composite layout puts a large file's bytes.
    fn last_component(&self) -> &Component {
        self.components.last().expect("a layout has a component")
    }

    /// The stripe size of the last component (the only one of a plain
    /// layout; of a composite one, the striping its large files' bytes
    /// take, which MPI-IO aligns to, as ROMIO's Lustre driver does).
    pub fn stripe_size(&self) -> u64 {
        self.last_component().stripe_size
    }

    /// The stripe count of the last component (see [`Self::stripe_size`]).
    pub fn stripe_count(&self) -> u32 {
        self.last_component().count
    }

    /// How many objects the layout has, in all components.
    pub fn object_count(&self) -> u32 {
        self.objects.len() as u32
    }

    /// The OST of the first component's first stripe (`lfs setstripe -i`).
    pub fn stripe_offset(&self) -> OstIndex {
        self.objects[0].ost
    }

    pub fn objects(&self) -> &[ObjectKey] {
        &self.objects
    }

    /// The objects of component `index`.
    pub fn component_objects(&self, index: usize) -> &[ObjectKey] {
        let c = &self.components[index];
        &self.objects[c.first as usize..(c.first + c.count) as usize]
    }

    /// The objects, shared (a reference count, not a copy).
    pub fn objects_shared(&self) -> Arc<[ObjectKey]> {
        Arc::clone(&self.objects)
    }

    /// The object holding `stripe`; panics if `stripe >= object_count()`.
    pub fn object(&self, stripe: u32) -> ObjectKey {
        self.check_stripe(stripe);
        self.objects[stripe as usize]
    }

    /// The stripe `key` holds, if it is one of this layout's objects.
    pub fn stripe_of(&self, key: ObjectKey) -> Option<u32> {
        let at = self.by_key.binary_search_by_key(&key, |&(key, _)| key).ok()?;
        Some(self.by_key[at].1)
    }

    /// Whether two stripes of a component share an OST (Lustre's
    /// overstriping, `lmm_pattern: raid0,overstriped`).
    pub fn is_overstriped(&self) -> bool {
        (0..self.components.len()).any(|index| self.component_is_overstriped(index))
    }

    /// Whether two stripes of component `index` share an OST.
    pub fn component_is_overstriped(&self, index: usize) -> bool {
        let mut osts: Vec<OstIndex> = self.component_objects(index).iter().map(|key| key.ost).collect();
        osts.sort_unstable();
        osts.windows(2).any(|pair| pair[0] == pair[1])
    }

    fn check_stripe(&self, stripe: u32) {
        let count = self.object_count();
        assert!(stripe < count, "stripe {stripe} out of range for a {count}-stripe layout");
    }

    /// The component holding file offset `file_offset`.
    fn component_at(&self, file_offset: u64) -> &Component {
        let at = self.components.partition_point(|c| c.end <= file_offset);
        &self.components[at.min(self.components.len() - 1)]
    }

    /// The component of `stripe` (which must be in range).
    fn component_of(&self, stripe: u32) -> &Component {
        let at = self.components.partition_point(|c| c.first + c.count <= stripe);
        &self.components[at]
    }

    /// `(stripe index, object offset)` of a file offset.
    pub fn file_to_object(&self, file_offset: u64) -> (u32, u64) {
        let c = self.component_at(file_offset);
        let (stripe, object_offset) = c.file_to_object(file_offset);
        (c.first + stripe, object_offset)
    }

    /// The file offset of byte `object_offset` of `stripe`'s object: the
    /// inverse of [`Self::file_to_object`]. Object offsets past the last one
    /// any file offset maps to saturate to `u64::MAX`, so object `EOF` maps to
    /// file `EOF` and the map stays monotonic. Panics if `stripe` is out of range.
    pub fn object_to_file(&self, stripe: u32, object_offset: u64) -> u64 {
        self.check_stripe(stripe);
        let c = self.component_of(stripe);
        c.object_to_file(stripe - c.first, object_offset)
    }

    /// The file size implied by `stripe`'s object being `object_size` bytes
    /// (saturating at `u64::MAX`; never past its component's end).
    pub fn object_size_to_file_size(&self, stripe: u32, object_size: u64) -> u64 {
        self.check_stripe(stripe);
        let c = self.component_of(stripe);
        match object_size.checked_sub(1) {
            None => 0,
            Some(last) => c.object_to_file(stripe - c.first, last).saturating_add(1).min(c.end),
        }
    }

    /// The file size implied by all object sizes (one per stripe, in stripe order).
    pub fn file_size(&self, object_sizes: &[u64]) -> u64 {
        let count = self.objects.len();
        assert_eq!(object_sizes.len(), count, "need one object size per stripe ({count})");
        (0u32..).zip(object_sizes).map(|(stripe, &size)| self.object_size_to_file_size(stripe, size)).max().unwrap_or(0)
    }

    /// The size `stripe`'s object has in a file of `file_size` bytes: the
    /// object offset of its first byte at or after `file_size` in its
    /// component's striping (used by truncate): 0 for a component that
    /// starts at or after `file_size`, and at most what the component's
    /// end gives.
    pub fn file_size_to_object_size(&self, stripe: u32, file_size: u64) -> u64 {
        self.check_stripe(stripe);
        let c = self.component_of(stripe);
        if file_size <= c.start {
            return 0;
        }
        c.object_size_at(stripe - c.first, file_size.min(c.end))
    }

    /// Splits `[file_offset, file_offset + len)` into pieces in file order,
    /// each within one stripe unit. Panics if the range ends past `u64::MAX`.
    pub fn chunks(&self, file_offset: u64, len: u64) -> Vec<ObjectChunk> {
        self.chunks_iter(file_offset, len).collect()
    }

    /// [`Self::chunks`] one at a time, with nothing allocated. Panics as it
    /// does, when called.
    pub fn chunks_iter(&self, file_offset: u64, len: u64) -> impl Iterator<Item = ObjectChunk> + '_ {
        let end = range_end(file_offset, len);
        let mut pos = file_offset;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let c = self.component_at(pos);
            let (local, object_offset) = c.file_to_object(pos);
            let len = (c.stripe_size - pos % c.stripe_size).min(end - pos).min(c.end - pos);
            debug_assert!(len > 0 && pos / c.stripe_size == (pos + len - 1) / c.stripe_size);
            let stripe = c.first + local;
            let key = self.objects[stripe as usize];
            let chunk = ObjectChunk { stripe, key, object_offset, file_offset: pos, len };
            pos += len;
            Some(chunk)
        })
    }

    /// For each stripe that `[file_offset, file_offset + len)` touches, the
    /// smallest object extent covering all its bytes there (what a lock on
    /// the range needs, as Lustre's `lov_lock_sub_init`), by stripe index.
    /// A range reaching the end of file space (`file_offset + len == u64::MAX`)
    /// gets extents ending at [`EOF`] in the last component, as Lustre maps
    /// a lock to file EOF. Costs O(stripe count of the components touched),
    /// whatever `len`. Panics as [`Self::chunks`] does.
    pub fn object_extents(&self, file_offset: u64, len: u64) -> Vec<(u32, Extent)> {
        let end = range_end(file_offset, len);
        let mut extents = Vec::new();
        if len == 0 {
            return extents;
        }
        for c in self.components.iter().filter(|c| c.start < end && file_offset < c.end) {
            let (from, to) = (file_offset.max(c.start), end.min(c.end));
            if to != u64::MAX && from / c.stripe_size == (to - 1) / c.stripe_size {
                // Within one stripe unit (a lockahead of one stripe): one extent.
                let (stripe, start) = c.file_to_object(from);
                extents.push((c.first + stripe, Extent::new(start, start + (to - from) - 1)));
                continue;
            }
            for stripe in 0..c.count {
                let start = c.object_size_at(stripe, from);
                let end_exclusive = c.object_size_at(stripe, to);
                debug_assert!(start <= end_exclusive);
                if end_exclusive > start {
                    let last = if to == u64::MAX { EOF } else { end_exclusive - 1 };
                    extents.push((c.first + stripe, Extent::new(start, last)));
                }
            }
        }
        extents
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;

    fn key(ost: u32) -> ObjectKey {
        ObjectKey { ost: OstIndex(ost), object: ObjectId(1000 + u64::from(ost)) }
    }

    /// 1 MiB stripes over OSTs 0..4.
    fn four_by_1m() -> Layout {
        Layout::new(MIB, (0..4).map(key).collect()).unwrap()
    }

    #[test]
    fn worked_example_maps_5m_plus_10() {
        let layout = four_by_1m();
        assert_eq!(layout.file_to_object(5 * MIB + 10), (1, MIB + 10));
        assert_eq!(layout.object_to_file(1, MIB + 10), 5 * MIB + 10);
        assert_eq!(layout.object(1), key(1));
        assert_eq!(layout.stripe_count(), 4);
        assert_eq!(layout.object_count(), 4);
        assert_eq!(layout.stripe_offset(), OstIndex(0));
    }

    #[test]
    fn stripe_of_finds_each_object_and_nothing_else() {
        // Stripes 0..3 on OSTs 5, 6, 0, 1: the OST order is not the stripe order.
        let layout = Layout::round_robin(MIB, 4, OstIndex(5), 7, |ost| ObjectId(100 + u64::from(ost.0))).unwrap();
        for stripe in 0..4 {
            assert_eq!(layout.stripe_of(layout.object(stripe)), Some(stripe));
        }
        assert_eq!(layout.stripe_of(ObjectKey { ost: OstIndex(3), object: ObjectId(103) }), None, "no stripe there");
        assert_eq!(layout.stripe_of(ObjectKey { ost: OstIndex(6), object: ObjectId(7) }), None, "another object");
        let decoded: Layout = serde_json::from_str(&serde_json::to_string(&layout).unwrap()).unwrap();
        assert_eq!(decoded, layout);
    }

    /// Overstriping: stripes 0 and 2 on OST 1, stripes 1 and 3 on OST 2,
    /// each its own object.
    #[test]
    fn an_overstriped_layout_maps_each_stripe_to_its_own_object() {
        let object = |ost, id| ObjectKey { ost: OstIndex(ost), object: ObjectId(id) };
        let objects = vec![object(1, 10), object(2, 20), object(1, 11), object(2, 21)];
        let layout = Layout::new(MIB, objects.clone()).unwrap();
        assert!(layout.is_overstriped() && !four_by_1m().is_overstriped());
        for (stripe, key) in (0..).zip(&objects) {
            assert_eq!(layout.stripe_of(*key), Some(stripe));
        }
        assert_eq!(layout.stripe_of(object(1, 12)), None);
        assert_eq!(layout.file_to_object(2 * MIB + 5), (2, 5), "stripe 2: OST 1's second object");
        let decoded: Layout = serde_json::from_str(&serde_json::to_string(&layout).unwrap()).unwrap();
        assert_eq!(decoded, layout);
    }

    /// PFL as `lfs setstripe -E 4M -c 1 -S 1M -E -1 -c 2 -S 1M`: the first
    /// 4 MiB on one object, the rest on two more, at the object offsets the
    /// second component's striping gives from file offset 0.
    #[test]
    fn a_composite_layout_maps_each_range_to_its_component() {
        let object = |ost, id| ObjectKey { ost: OstIndex(ost), object: ObjectId(id) };
        let layout = Layout::composite(vec![
            (4 * MIB, MIB, vec![object(0, 1)]),
            (u64::MAX, MIB, vec![object(1, 2), object(0, 3)]),
        ])
        .unwrap();
        assert!(layout.is_composite() && !layout.is_overstriped());
        assert_eq!((layout.stripe_count(), layout.stripe_size(), layout.object_count()), (2, MIB, 3));
        assert_eq!(layout.file_to_object(3 * MIB + 5), (0, 3 * MIB + 5));
        assert_eq!(layout.file_to_object(4 * MIB + 5), (1, 2 * MIB + 5), "unit 4 of two stripes: stripe 0, row 2");
        assert_eq!(layout.file_to_object(5 * MIB), (2, 2 * MIB));
        let chunks: Vec<(u32, u64, u64)> =
            layout.chunks(3 * MIB, 2 * MIB + 10).iter().map(|c| (c.stripe, c.object_offset, c.len)).collect();
        assert_eq!(chunks, [(0, 3 * MIB, MIB), (1, 2 * MIB, MIB), (2, 2 * MIB, 10)]);
        // A whole-file lock: the first object up to the component's end, the others to EOF.
        let extents = layout.object_extents(0, u64::MAX);
        assert_eq!(
            extents,
            [(0, Extent::new(0, 4 * MIB - 1)), (1, Extent::new(2 * MIB, EOF)), (2, Extent::new(2 * MIB, EOF))]
        );
        // Sizes: a file of 4.5 MiB; truncating to 1 MiB empties the second component's objects.
        assert_eq!(layout.file_size(&[4 * MIB, 2 * MIB + MIB / 2, 0]), 4 * MIB + MIB / 2);
        assert_eq!((0..3).map(|s| layout.file_size_to_object_size(s, MIB)).collect::<Vec<_>>(), [MIB, 0, 0]);
        let decoded: Layout = serde_json::from_str(&serde_json::to_string(&layout).unwrap()).unwrap();
        assert_eq!(decoded, layout);
        for bad in [
            vec![(4 * MIB, MIB, vec![object(0, 1)])],
            vec![(4 * MIB + 1, MIB, vec![object(0, 1)]), (u64::MAX, MIB, vec![object(1, 2)])],
            vec![(0, MIB, vec![object(0, 1)]), (u64::MAX, MIB, vec![object(1, 2)])],
            vec![(4 * MIB, MIB, vec![object(0, 1)]), (u64::MAX, MIB, vec![object(0, 1)])],
        ] {
            assert!(Layout::composite(bad).is_err());
        }
        let error =
            Layout::composite(vec![(3 * MIB, 2 * MIB, vec![object(0, 1)]), (u64::MAX, MIB, vec![object(1, 2)])]);
        assert_eq!(
            error.unwrap_err().to_string(),
            "component 1 starts at 0 and ends at 3145728: each component must end past its start, at a multiple of \
             its stripe size (2097152), and the last at EOF (-E -1 or -E eof)"
        );
    }

    #[test]
    fn worked_example_chunks_3m_at_512k() {
        let layout = four_by_1m();
        let chunks = layout.chunks(512 * KIB, 3 * MIB);
        let summary: Vec<_> = chunks.iter().map(|c| (c.stripe, c.object_offset, c.file_offset, c.len)).collect();
        let expected = vec![
            (0, 512 * KIB, 512 * KIB, 512 * KIB),
            (1, 0, MIB, MIB),
            (2, 0, 2 * MIB, MIB),
            (3, 0, 3 * MIB, 512 * KIB),
        ];
        assert_eq!(summary, expected);
        assert_eq!(chunks[3].key, key(3));
        assert!(layout.chunks(7, 0).is_empty());
        assert!(layout.object_extents(7, 0).is_empty());
    }

    #[test]
    fn object_extents_cover_each_stripe() {
        let extents = four_by_1m().object_extents(512 * KIB, 6 * MIB);
        let expected = vec![
            (0, Extent::new(512 * KIB, 2 * MIB - 1)),
            (1, Extent::new(0, 2 * MIB - 1)),
            (2, Extent::new(0, MIB + 512 * KIB - 1)),
            (3, Extent::new(0, MIB - 1)),
        ];
        assert_eq!(extents, expected);
        let to_eof = four_by_1m().object_extents(0, u64::MAX);
        assert!(to_eof.iter().all(|&(_, extent)| extent == Extent::WHOLE));
        assert_eq!(four_by_1m().object_extents(2 * MIB, 10), vec![(2, Extent::new(0, 9))]);
    }

    #[test]
    fn sizes_round_trip_for_truncate() {
        let layout = four_by_1m();
        let file_size = 5 * MIB + 10;
        let sizes: Vec<u64> = (0..4).map(|s| layout.file_size_to_object_size(s, file_size)).collect();
        assert_eq!(sizes, vec![2 * MIB, MIB + 10, MIB, MIB]);
        assert_eq!(layout.file_size(&sizes), file_size);
        assert_eq!(layout.file_size(&[0; 4]), 0);
        assert_eq!(layout.object_size_to_file_size(3, MIB), 4 * MIB);
        assert_eq!(layout.object_to_file(3, EOF), u64::MAX);
    }

    #[test]
    fn new_takes_stripe_offset_from_first_object() {
        let layout = Layout::new(4 * MIB, vec![key(7), key(2)]).unwrap();
        assert_eq!(layout.stripe_offset(), OstIndex(7));
        assert_eq!(layout.objects(), &[key(7), key(2)]);
        let wrapped = Layout::round_robin(MIB, 3, OstIndex(4), 5, |ost| ObjectId(u64::from(ost.0))).unwrap();
        let osts: Vec<u32> = wrapped.objects().iter().map(|k| k.ost.0).collect();
        assert_eq!(osts, vec![4, 0, 1]);
    }

    #[test]
    #[should_panic(expected = "ends past u64::MAX")]
    fn range_past_end_of_file_space_panics() {
        four_by_1m().chunks(u64::MAX - 5, 6);
    }

    #[test]
    #[should_panic(expected = "stripe 4 out of range for a 4-stripe layout")]
    fn stripe_out_of_range_panics() {
        four_by_1m().object_to_file(4, 0);
    }

    /// Each rejected layout: its variant and fields, then its message.
    #[test]
    fn each_validation_error() {
        let rr = |size, count, start, osts| {
            Layout::round_robin(size, count, OstIndex(start), osts, |_| ObjectId(1)).unwrap_err()
        };
        let errors = [
            rr(0, 1, 0, 1),
            rr(100_000, 1, 0, 1),
            rr(MIB, 0, 0, 1),
            rr(MIB, 2001, 0, 3000),
            rr(MIB, 1, 0, 0),
            rr(MIB, 5, 0, 4),
            rr(MIB, 2, 4, 4),
            Layout::new(MIB, vec![key(1), key(2), key(1)]).unwrap_err(),
            Layout::new(1 << 62, (0..4).map(key).collect()).unwrap_err(),
            Layout::new(MIB, vec![]).unwrap_err(),
        ];
        let debugs = [
            "ZeroStripeSize",
            "StripeSizeNotMultiple { stripe_size: 100000 }",
            "ZeroStripeCount",
            "TooManyStripes { stripe_count: 2001 }",
            "NoOsts",
            "StripeCountExceedsOsts { stripe_count: 5, ost_count: 4 }",
            "StartOstOutOfRange { start_ost: OstIndex(4), ost_count: 4 }",
            "DuplicateObject { key: ObjectKey { ost: OstIndex(1), object: ObjectId(1001) }, first_stripe: 0, second_stripe: 2 }",
            "StripeWidthOverflow { stripe_size: 4611686018427387904, stripe_count: 4 }",
            "ZeroStripeCount",
        ];
        let messages = [
            "stripe size is 0: use a positive multiple of 65536 (64 KiB), e.g. -S 1M",
            "stripe size 100000 is not a multiple of 65536 (64 KiB): use -S 64k, 1M, 4M, ...",
            "stripe count is 0: a file needs at least one stripe, use -c 1 or more",
            "stripe count 2001 exceeds the maximum of 2000: use -c 2000 or fewer",
            "there are no OSTs to stripe over: add at least one OST first",
            "stripe count 5 exceeds the 4 OSTs available: use -c 4 or fewer, or add OSTs",
            "starting OST index 4 is out of range for 4 OSTs: use -i 0 to -i 3",
            "stripes 0 and 2 are both object 1001 on OST0001: the layout is corrupt, recreate it",
            "stripe size 4611686018427387904 times stripe count 4 overflows 64 bits: use a smaller -S or -c",
            "stripe count is 0: a file needs at least one stripe, use -c 1 or more",
        ];
        assert_eq!(errors.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>(), debugs);
        assert_eq!(errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(), messages);
    }

    #[test]
    fn deserialize_validates() {
        let layout = Layout::new(MIB, vec![key(3), key(1)]).unwrap();
        let json = serde_json::to_string(&layout).unwrap();
        assert_eq!(serde_json::from_str::<Layout>(&json).unwrap(), layout);
        let moved = json.replace("\"stripe_offset\":3", "\"stripe_offset\":1");
        assert!(serde_json::from_str::<Layout>(&moved).is_err());
        let bad_size = json.replace("\"stripe_size\":1048576", "\"stripe_size\":1000");
        assert!(serde_json::from_str::<Layout>(&bad_size).unwrap_err().to_string().contains("1000"));
    }

    fn arb_layout() -> impl Strategy<Value = Layout> {
        prop_oneof![3 => arb_striped(), 1 => arb_overstriped(), 2 => arb_composite()]
    }

    /// 2 to 4 components of 1 to 6 stripes of 64 KiB to 1 MiB, each ending
    /// a few stripe units past the previous one, or far out in file space.
    fn arb_composite() -> impl Strategy<Value = Layout> {
        let component = (1u64..=16, 1usize..=6, 1u64..=8, prop_oneof![3 => Just(false), 1 => Just(true)]);
        proptest::collection::vec(component, 2..=4).prop_map(|parts| {
            let mut start = 0u64;
            let mut id = 0;
            let last = parts.len() - 1;
            let parts = parts
                .into_iter()
                .enumerate()
                .map(|(index, (units, count, rows, far))| {
                    let size = units * STRIPE_SIZE_UNIT;
                    let end = if index == last {
                        u64::MAX
                    } else {
                        let from = if far { start.max(1 << 62) } else { start };
                        (from / size + rows) * size
                    };
                    start = end;
                    let objects = (0..count)
                        .map(|stripe| {
                            id += 1;
                            ObjectKey { ost: OstIndex(stripe as u32 % 3), object: ObjectId(id) }
                        })
                        .collect();
                    (end, size, objects)
                })
                .collect();
            Layout::composite(parts).unwrap()
        })
    }

    /// Up to 64 stripes over 1 to 8 OSTs, OSTs repeating at random.
    fn arb_overstriped() -> impl Strategy<Value = Layout> {
        (1u64..=16, proptest::collection::vec(0u32..8, 1..=64)).prop_map(|(units, osts)| {
            let objects = (1..).zip(osts).map(|(id, ost)| ObjectKey { ost: OstIndex(ost), object: ObjectId(id) });
            Layout::new(units * STRIPE_SIZE_UNIT, objects.collect()).unwrap()
        })
    }

    fn arb_striped() -> impl Strategy<Value = Layout> {
        let small = (1u64..=16, 1u32..=8);
        let wide = (1u64..=1 << 30, 1u32..=STRIPE_COUNT_MAX);
        (prop_oneof![3 => small, 1 => wide], 0u32..4, any::<u32>()).prop_map(|((units, count), spare, start)| {
            let ost_count = count + spare;
            let start = OstIndex(start % ost_count);
            let object_id_of = |ost: OstIndex| ObjectId(u64::from(ost.0) * 7 + 1);
            Layout::round_robin(units * STRIPE_SIZE_UNIT, count, start, ost_count, object_id_of).unwrap()
        })
    }

    /// A range of at most 16 MiB (so at most 258 chunks), sometimes at the top of file space.
    fn arb_range() -> impl Strategy<Value = (u64, u64)> {
        let offset = prop_oneof![0u64..1 << 36, any::<u64>(), (u64::MAX - (1 << 25))..=u64::MAX];
        (offset, 0u64..=16 * MIB).prop_map(|(offset, len)| (offset, len.min(u64::MAX - offset)))
    }

    proptest! {
        #[test]
        fn file_object_round_trip(layout in arb_layout(), file_offset in any::<u64>()) {
            let (stripe, object_offset) = layout.file_to_object(file_offset);
            prop_assert!(stripe < layout.object_count());
            prop_assert_eq!(layout.object_to_file(stripe, object_offset), file_offset);
            prop_assert!(object_offset <= file_offset);
        }

        #[test]
        fn chunks_cover_range_in_order((layout, (offset, len)) in (arb_layout(), arb_range())) {
            let chunks = layout.chunks(offset, len);
            let mut pos = offset;
            for chunk in &chunks {
                prop_assert_eq!(chunk.file_offset, pos);
                prop_assert!(chunk.len > 0);
                prop_assert_eq!(layout.file_to_object(pos), (chunk.stripe, chunk.object_offset));
                prop_assert_eq!(chunk.key, layout.object(chunk.stripe));
                let last = pos + (chunk.len - 1);
                let component = *layout.component_at(pos);
                prop_assert_eq!(pos / component.stripe_size, last / component.stripe_size);
                prop_assert!(last < component.end, "a chunk stays in its component");
                pos += chunk.len;
                // Maximal: only the last piece may end inside a stripe unit
                // (or at a component's end).
                prop_assert!(pos == offset + len || pos % component.stripe_size == 0 || pos == component.end);
            }
            prop_assert_eq!(pos, offset + len);
        }

        #[test]
        fn object_extents_are_smallest_covers((layout, (offset, len)) in (arb_layout(), arb_range())) {
            let extents = layout.object_extents(offset, len);
            let chunks = layout.chunks(offset, len);
            let mut stripes: Vec<u32> = chunks.iter().map(|c| c.stripe).collect();
            stripes.sort_unstable();
            stripes.dedup();
            prop_assert_eq!(extents.iter().map(|e| e.0).collect::<Vec<_>>(), stripes);
            for &(stripe, extent) in &extents {
                let mine: Vec<Extent> = chunks.iter().filter(|c| c.stripe == stripe)
                    .map(|c| Extent::from_offset_len(c.object_offset, c.len)).collect();
                prop_assert!(mine.iter().all(|e| extent.contains(e)));
                prop_assert_eq!(extent.start, mine[0].start);
                let reaches_eof = offset + len == u64::MAX && layout.component_of(stripe).is_last();
                let expected_end = if reaches_eof { EOF } else { mine[mine.len() - 1].end };
                prop_assert_eq!(extent.end, expected_end);
            }
        }

        #[test]
        fn file_size_matches_largest_write((layout, (offset, len)) in (arb_layout(), arb_range())) {
            let mut sizes = vec![0u64; layout.object_count() as usize];
            for chunk in layout.chunks(offset, len) {
                let size = &mut sizes[chunk.stripe as usize];
                *size = (*size).max(chunk.object_offset + chunk.len);
            }
            let file_size = if len == 0 { 0 } else { offset + len };
            prop_assert_eq!(layout.file_size(&sizes), file_size);
            for (stripe, &size) in (0u32..).zip(&sizes) {
                let truncated = layout.file_size_to_object_size(stripe, file_size);
                prop_assert!(truncated >= size);
                prop_assert!(layout.object_size_to_file_size(stripe, truncated) <= file_size);
            }
        }

        #[test]
        fn truncate_sizes_imply_file_size(layout in arb_layout(), file_size in any::<u64>()) {
            let sizes: Vec<u64> = (0..layout.object_count())
                .map(|stripe| layout.file_size_to_object_size(stripe, file_size)).collect();
            prop_assert_eq!(layout.file_size(&sizes), file_size);
        }
    }
}
