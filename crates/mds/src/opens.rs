//! Files held open by clients, as the MDS knows them, so that a file
//! removed while open elsewhere (unlinked, or renamed over) keeps its
//! objects until its last close, as Lustre's MDT keeps an open-unlinked
//! file as an orphan. Transport-free, like [`crate::Mds`]: the network MDS
//! records a client's opens and closes ([`OpenFiles::opened`],
//! [`OpenFiles::closed`]) and destroys no queued object of a file
//! [`OpenFiles::is_open`] names (the destroy queue keeps each object's
//! file: [`crate::Mds::queued_destroys_except`]).
//!
//! Only clients that keep files open say so (a mount does, for each open
//! file); a file opened by the library alone is not protected. Opens live
//! in the MDS's memory: a restarted MDS waits out its recovery grace
//! before it destroys anything, and its clients tell it again of the files
//! they keep open meanwhile (Lustre keeps orphans on disk and its clients
//! reopen them in recovery).
//!
//! Bound: [`OPENS_MAX`] open files over all clients; past it an open is
//! not recorded, and the caller is told.
//!
//! Invariant ([`OpenFiles::check_invariants`]): every recorded count is
//! positive, and the table within its bound.

use crate::Fid;
use std::collections::HashMap;

/// Distinct files recorded open, over all clients, at most.
pub const OPENS_MAX: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct OpenFiles {
    /// For each open file, how many opens each client has of it.
    opens: HashMap<Fid, HashMap<u64, u32>>,
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
    /// Returns whether that was the file's last open anywhere.
    pub fn closed(&mut self, fid: Fid, client: u64) -> bool {
        let Some(clients) = self.opens.get_mut(&fid) else { return false };
        if let Some(count) = clients.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                clients.remove(&client);
            }
        }
        self.forget_if_closed(fid)
    }

    /// `client` is gone: its opens end. Returns how many files that closed
    /// for the last time.
    pub fn client_gone(&mut self, client: u64) -> usize {
        let fids: Vec<Fid> = self.opens.iter().filter(|(_, c)| c.contains_key(&client)).map(|(f, _)| *f).collect();
        let mut closed = 0;
        for fid in fids {
            self.opens.get_mut(&fid).expect("listed").remove(&client);
            closed += usize::from(self.forget_if_closed(fid));
        }
        closed
    }

    pub fn is_open(&self, fid: Fid) -> bool {
        self.opens.contains_key(&fid)
    }

    /// Files open.
    pub fn count(&self) -> usize {
        self.opens.len()
    }

    fn forget_if_closed(&mut self, fid: Fid) -> bool {
        if self.opens.get(&fid).is_some_and(|c| c.is_empty()) {
            self.opens.remove(&fid);
            return true;
        }
        false
    }

    pub fn check_invariants(&self) {
        for (fid, clients) in &self.opens {
            assert!(!clients.is_empty(), "{fid:?}: an entry with no opens is kept");
            assert!(clients.values().all(|&n| n > 0), "{fid:?}: a zero count is kept");
        }
        assert!(self.opens.len() <= OPENS_MAX, "bound");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_stays_open_until_its_last_close_on_every_client() {
        let mut o = OpenFiles::new();
        let f = Fid(9);
        o.opened(f, 1).unwrap();
        o.opened(f, 1).unwrap();
        o.opened(f, 2).unwrap();
        assert!(!o.closed(f, 1));
        assert!(!o.closed(f, 1));
        assert!(o.is_open(f));
        o.check_invariants();
        assert_eq!(o.client_gone(2), 1, "the last open went with its client");
        assert!(!o.is_open(f));
        assert!(!o.closed(f, 3), "a close never opened is passed over");
        o.check_invariants();
        assert_eq!(o.count(), 0);
    }
}
