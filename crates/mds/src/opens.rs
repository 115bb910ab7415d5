//! Files held open by clients, as the MDS knows them, so that a file
//! removed while open elsewhere (unlinked, or renamed over) keeps its
//! objects until its last close, as Lustre's MDT keeps an open-unlinked
//! file as an orphan. Transport-free, like [`crate::Mds`]: the network MDS
//! records a client's opens and closes ([`OpenFiles::opened`],
//! [`OpenFiles::closed`]), holds back the objects of a removed file that
//! is open ([`OpenFiles::hold`]), and destroys no object
//! [`OpenFiles::is_held`] names, until a close or the client's departure
//! gives them back.
//!
//! Only clients that keep files open say so (a mount does, for each open
//! file); a file opened by the library alone is not protected. Opens live
//! in the MDS's memory: after an MDS restart, a removed file's objects are
//! destroyed even if a client still has it open (Lustre keeps orphans on
//! disk, and its clients reopen them in recovery).
//!
//! Bound: [`OPENS_MAX`] open files over all clients; past it an open is
//! not recorded, and the caller is told.
//!
//! Invariants ([`OpenFiles::check_invariants`]): every recorded count is
//! positive; only open files have objects held; the held objects are
//! exactly those of the held files.

use crate::Fid;
use lanefs_core::units::ObjectKey;
use std::collections::{HashMap, HashSet};

/// Distinct files recorded open, over all clients, at most.
pub const OPENS_MAX: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct OpenFiles {
    /// For each open file, how many opens each client has of it.
    opens: HashMap<Fid, HashMap<u64, u32>>,
    /// Objects of removed files still open, by file.
    held: HashMap<Fid, Vec<ObjectKey>>,
    held_objects: HashSet<ObjectKey>,
}

impl OpenFiles {
    pub fn new() -> OpenFiles {
        OpenFiles::default()
    }

    /// `client` opened `fid`. `Err` past [`OPENS_MAX`] files.
    pub fn opened(&mut self, fid: Fid, client: u64) -> Result<(), String> {
        if !self.opens.contains_key(&fid) && self.opens.len() >= OPENS_MAX {
            return Err(format!("{OPENS_MAX} files are recorded open, the most the MDS keeps"));
        }
        let count = self.opens.entry(fid).or_default().entry(client).or_default();
        *count = count.saturating_add(1);
        Ok(())
    }

    /// `client` closed `fid` (a close it never opened is passed over).
    /// Returns the objects this gives back for destruction.
    pub fn closed(&mut self, fid: Fid, client: u64) -> Vec<ObjectKey> {
        let Some(clients) = self.opens.get_mut(&fid) else { return Vec::new() };
        if let Some(count) = clients.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                clients.remove(&client);
            }
        }
        self.release_if_closed(fid)
    }

    /// `client` is gone: its opens end. Returns the objects given back.
    pub fn client_gone(&mut self, client: u64) -> Vec<ObjectKey> {
        let fids: Vec<Fid> = self.opens.iter().filter(|(_, c)| c.contains_key(&client)).map(|(f, _)| *f).collect();
        let mut released = Vec::new();
        for fid in fids {
            self.opens.get_mut(&fid).expect("listed").remove(&client);
            released.extend(self.release_if_closed(fid));
        }
        released
    }

    pub fn is_open(&self, fid: Fid) -> bool {
        self.opens.contains_key(&fid)
    }

    /// `fid` was removed while open: keep `objects` until its last close.
    pub fn hold(&mut self, fid: Fid, objects: &[ObjectKey]) {
        debug_assert!(self.is_open(fid), "only an open file's objects are held");
        self.held_objects.extend(objects.iter().copied());
        self.held.entry(fid).or_default().extend_from_slice(objects);
    }

    pub fn is_held(&self, object: ObjectKey) -> bool {
        self.held_objects.contains(&object)
    }

    /// Files open and objects held.
    pub fn counts(&self) -> (usize, usize) {
        (self.opens.len(), self.held_objects.len())
    }

    fn release_if_closed(&mut self, fid: Fid) -> Vec<ObjectKey> {
        if self.opens.get(&fid).is_some_and(|c| !c.is_empty()) {
            return Vec::new();
        }
        self.opens.remove(&fid);
        let released = self.held.remove(&fid).unwrap_or_default();
        for object in &released {
            self.held_objects.remove(object);
        }
        released
    }

    pub fn check_invariants(&self) {
        for (fid, clients) in &self.opens {
            assert!(!clients.is_empty(), "{fid:?}: an entry with no opens is kept");
            assert!(clients.values().all(|&n| n > 0), "{fid:?}: a zero count is kept");
        }
        assert!(self.held.keys().all(|fid| self.opens.contains_key(fid)), "a closed file's objects are held");
        let union: HashSet<ObjectKey> = self.held.values().flatten().copied().collect();
        assert_eq!(union, self.held_objects, "held objects");
        assert!(self.opens.len() <= OPENS_MAX, "bound");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lanefs_core::units::{ObjectId, OstIndex};

    fn object(n: u64) -> ObjectKey {
        ObjectKey { ost: OstIndex(0), object: ObjectId(n) }
    }

    #[test]
    fn a_removed_files_objects_wait_for_its_last_close_on_every_client() {
        let mut o = OpenFiles::new();
        let f = Fid(9);
        o.opened(f, 1).unwrap();
        o.opened(f, 1).unwrap();
        o.opened(f, 2).unwrap();
        o.hold(f, &[object(5), object(6)]);
        assert!(o.is_held(object(5)));
        assert!(o.closed(f, 1).is_empty());
        assert!(o.closed(f, 1).is_empty());
        o.check_invariants();
        assert_eq!(o.client_gone(2), vec![object(5), object(6)]);
        assert!(!o.is_held(object(5)) && !o.is_open(f));
        assert!(o.closed(f, 3).is_empty(), "a close never opened is passed over");
        o.check_invariants();
        assert_eq!(o.counts(), (0, 0));
    }
}
