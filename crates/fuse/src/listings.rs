//! Open directory listings (`opendir` to `releasedir`), in bounded memory.
//!
//! The MDS lists a directory a page at a time (at most 4,096 entries and
//! 1 MiB a page, in name order, each page asked for after the last name of
//! the one before), so a listing keeps one page and where it stands, never
//! the whole directory: a 72,000-entry directory costs a listing what a
//! 4,096-entry one does. The kernel reads a listing at the offsets this
//! mount gave its entries (`.` is 1, `..` 2, the n-th entry n + 3); a read
//! past the kept page asks for the next one, a read before it (`rewinddir`,
//! `seekdir` back) lists again from the start.
//!
//! Bounds, so that one user cannot take what others need:
//! - [`LISTINGS_MAX`] listings open in the mount, and at most
//!   [`LISTINGS_PER_UID_MAX`] of them for one uid (the uid that opened it);
//!   past either, `opendir` fails with `EMFILE` for that user alone
//!   (`ENFILE` when the mount's whole table is full);
//! - [`PAGE_BYTES_KEPT_MAX`] bytes of pages kept over all listings: a page
//!   that would go past it is used for the read that fetched it and then
//!   dropped, and asked for again (by the same cursor) at the next read.
//!
//! Invariant ([`Listings::check_invariants`]): the per-uid counts are the
//! listings each uid has open, all within their bounds, and the kept bytes
//! are the sum of the kept pages' costs, within theirs.

use lanefs_proto::{DirEntry, Fid, DIR_ENTRY_OVERHEAD_BYTES};
use std::collections::HashMap;
use std::sync::Arc;

/// Listings open in one mount, at most.
pub const LISTINGS_MAX: usize = 8192;
/// Listings one uid has open in one mount, at most: a quarter of the
/// table, so that three users filling theirs leave room for a fourth
/// (`find` and `ls -R` keep one listing per level of depth open).
pub const LISTINGS_PER_UID_MAX: usize = LISTINGS_MAX / 4;
/// Bytes of listing pages kept over all listings, at most (each entry
/// counted as its name plus the MDS's per-entry overhead).
pub const PAGE_BYTES_KEPT_MAX: usize = 64 << 20;

/// Why a listing could not be opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// The uid has [`LISTINGS_PER_UID_MAX`] open.
    Uid,
    /// The mount has [`LISTINGS_MAX`] open.
    Mount,
}

/// One page of a listing: where it starts and what follows it.
#[derive(Clone, Debug)]
pub struct Page {
    /// The index (among all entries, from 0) of its first entry.
    pub first: u64,
    /// The cursor it was asked for with: the last name of the page before.
    pub after: Option<String>,
    /// Its entries, if kept (see [`PAGE_BYTES_KEPT_MAX`]).
    pub entries: Option<Arc<Vec<DirEntry>>>,
    pub len: u64,
    /// Its last name: the cursor of the next page.
    pub last: Option<String>,
    /// Whether the MDS said more entries follow it.
    pub more: bool,
}

impl Page {
    /// The page before any: asking past it asks for the first page.
    fn start() -> Page {
        Page { first: 0, after: None, entries: None, len: 0, last: None, more: true }
    }
}

#[derive(Debug)]
struct Listing {
    uid: u32,
    dir: Fid,
    page: Page,
}

/// The open listings of one mount (see the module docs).
#[derive(Debug, Default)]
pub struct Listings {
    open: HashMap<u64, Listing>,
    per_uid: HashMap<u32, usize>,
    kept_bytes: usize,
}

/// What a page's entries cost to keep.
fn cost(entries: &[DirEntry]) -> usize {
    entries.iter().map(|e| e.name.len() + DIR_ENTRY_OVERHEAD_BYTES).sum()
}

impl Listings {
    /// Open listing `fh` of directory `dir` for `uid`, if the bounds allow.
    pub fn open(&mut self, fh: u64, uid: u32, dir: Fid) -> Result<(), Full> {
        assert!(!self.open.contains_key(&fh), "listing handle {fh} opened twice");
        if self.open.len() >= LISTINGS_MAX {
            return Err(Full::Mount);
        }
        let count = self.per_uid.entry(uid).or_default();
        if *count >= LISTINGS_PER_UID_MAX {
            return Err(Full::Uid);
        }
        *count += 1;
        self.open.insert(fh, Listing { uid, dir, page: Page::start() });
        Ok(())
    }

    /// The directory and the current page of listing `fh`.
    pub fn page(&self, fh: u64) -> Option<(Fid, Page)> {
        self.open.get(&fh).map(|l| (l.dir, l.page.clone()))
    }

    /// Listing `fh` moved to `page`, whose entries are kept if the bound
    /// on kept pages allows (the previous page's are let go first).
    pub fn set_page(&mut self, fh: u64, mut page: Page) {
        let Some(listing) = self.open.get_mut(&fh) else { return };
        if let Some(old) = listing.page.entries.take() {
            self.kept_bytes -= cost(&old);
        }
        if let Some(entries) = page.entries.take() {
            let bytes = cost(&entries);
            if self.kept_bytes + bytes <= PAGE_BYTES_KEPT_MAX {
                self.kept_bytes += bytes;
                page.entries = Some(entries);
            }
        }
        listing.page = page;
    }

    /// Listing `fh` is closed.
    pub fn release(&mut self, fh: u64) -> bool {
        let Some(listing) = self.open.remove(&fh) else { return false };
        if let Some(entries) = &listing.page.entries {
            self.kept_bytes -= cost(entries);
        }
        let count = self.per_uid.get_mut(&listing.uid).expect("an open listing's uid is counted");
        *count -= 1;
        if *count == 0 {
            self.per_uid.remove(&listing.uid);
        }
        true
    }

    /// Listings open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Bytes of pages kept.
    pub fn kept_bytes(&self) -> usize {
        self.kept_bytes
    }

    pub fn check_invariants(&self) {
        assert!(self.open.len() <= LISTINGS_MAX, "{} listings open, over {LISTINGS_MAX}", self.open.len());
        let mut per_uid: HashMap<u32, usize> = HashMap::new();
        let mut kept = 0;
        for listing in self.open.values() {
            *per_uid.entry(listing.uid).or_default() += 1;
            if let Some(entries) = &listing.page.entries {
                assert_eq!(entries.len() as u64, listing.page.len, "a kept page's length");
                kept += cost(entries);
            }
        }
        assert_eq!(per_uid, self.per_uid, "per-uid listing counts");
        assert!(per_uid.values().all(|&n| n <= LISTINGS_PER_UID_MAX), "a uid over its listings");
        assert_eq!(kept, self.kept_bytes, "kept page bytes");
        assert!(kept <= PAGE_BYTES_KEPT_MAX, "{kept} bytes of pages kept, over {PAGE_BYTES_KEPT_MAX}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_proto::FileKind;

    fn entries(count: usize, name_bytes: usize) -> Arc<Vec<DirEntry>> {
        let entry = |i: usize| DirEntry {
            name: format!("{i:0name_bytes$}"),
            fid: Fid(i as u64 + 2),
            kind: FileKind::File,
            uid: 0,
            gid: 0,
            permissions: 0o644,
        };
        Arc::new((0..count).map(entry).collect())
    }

    #[test]
    fn one_uid_fills_only_its_share() {
        let mut listings = Listings::default();
        for fh in 0..LISTINGS_PER_UID_MAX as u64 {
            listings.open(fh, 1000, Fid::ROOT).unwrap();
        }
        assert_eq!(listings.open(u64::MAX, 1000, Fid::ROOT), Err(Full::Uid));
        listings.open(u64::MAX, 0, Fid::ROOT).expect("another uid still lists");
        listings.check_invariants();
        assert!(listings.release(0));
        listings.open(u64::MAX - 1, 1000, Fid::ROOT).expect("a released listing frees its uid's slot");
        listings.check_invariants();
    }

    #[test]
    fn the_whole_table_is_bounded_too() {
        let mut listings = Listings::default();
        for fh in 0..LISTINGS_MAX as u64 {
            listings.open(fh, (fh / LISTINGS_PER_UID_MAX as u64) as u32, Fid::ROOT).unwrap();
        }
        assert_eq!(listings.open(u64::MAX, 4242, Fid::ROOT), Err(Full::Mount));
        listings.check_invariants();
    }

    #[test]
    fn pages_are_kept_within_their_bound_and_let_go() {
        let mut listings = Listings::default();
        let page_entries = entries(4096, 192);
        let page_bytes = cost(&page_entries);
        let fits = PAGE_BYTES_KEPT_MAX / page_bytes;
        for fh in 0..=fits as u64 {
            listings.open(fh, 1000 + (fh % 4) as u32, Fid::ROOT).unwrap();
            let page =
                Page { first: 0, after: None, entries: Some(page_entries.clone()), len: 4096, last: None, more: true };
            listings.set_page(fh, page);
            listings.check_invariants();
        }
        assert_eq!(listings.kept_bytes(), fits * page_bytes, "the page past the bound is not kept");
        assert!(listings.page(fits as u64).unwrap().1.entries.is_none());
        // Moving a listing to its next page lets its first go.
        let next = Page {
            first: 4096,
            after: Some("x".into()),
            entries: Some(entries(10, 8)),
            len: 10,
            last: None,
            more: false,
        };
        listings.set_page(0, next);
        listings.check_invariants();
        for fh in 0..=fits as u64 {
            listings.release(fh);
        }
        assert_eq!(listings.kept_bytes(), 0);
        assert!(listings.is_empty());
        listings.check_invariants();
    }
}
