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
//! Bounds: [`OPENS_MAX`] open files over all clients, and
//! [`OPENS_PER_CLIENT_MAX`] for one client (a mount keeps at most 65,536
//! open files itself), so that one client cannot fill the table for all;
//! past either an open is not recorded, and the caller is told. The
//! network MDS records only files, and removed files whose objects wait to
//! be destroyed ([`crate::Mds::may_be_open`]).
//!
//! Invariant ([`OpenFiles::check_invariants`]): every recorded count is
//! positive, each client's number of files is what the table holds for
//! it, and all are within their bounds.

use crate::Fid;
use std::collections::HashMap;

/// Distinct files recorded open, over all clients, at most.
pub const OPENS_MAX: usize = 1 << 20;
/// Distinct files recorded open by one client, at most: a mount's own
/// bound on its open files.
pub const OPENS_PER_CLIENT_MAX: usize = 1 << 16;

#[derive(Debug, Default)]
pub struct OpenFiles {
    /// For each open file, how many opens each client has of it.
    opens: HashMap<Fid, HashMap<u64, u32>>,
    /// How many distinct files each client has open.
    per_client: HashMap<u64, usize>,
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
        let new_here = !self.opens.get(&fid).is_some_and(|c| c.contains_key(&client));
        if new_here && self.per_client.get(&client).copied().unwrap_or(0) >= OPENS_PER_CLIENT_MAX {
            return Err(format!(
                "this client has {OPENS_PER_CLIENT_MAX} files recorded open, the most the MDS keeps for one client"
            ));
        }
        if new_here {
            *self.per_client.entry(client).or_default() += 1;
        }
        let count = self.opens.entry(fid).or_default().entry(client).or_default();
        *count = count.saturating_add(1);
        Ok(())
    }

    /// `client` holds one file less.
    fn client_let_go(&mut self, client: u64) {
        let files = self.per_client.get_mut(&client).expect("a client with an open is counted");
        *files -= 1;
        if *files == 0 {
            self.per_client.remove(&client);
        }
    }

    /// `client` closed `fid` (a close it never opened is passed over).
    /// Returns whether that was the file's last open anywhere.
    pub fn closed(&mut self, fid: Fid, client: u64) -> bool {
        let Some(clients) = self.opens.get_mut(&fid) else { return false };
        let mut let_go = false;
        if let Some(count) = clients.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                clients.remove(&client);
                let_go = true;
            }
        }
        if let_go {
            self.client_let_go(client);
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
        self.per_client.remove(&client);
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
        let mut per_client: HashMap<u64, usize> = HashMap::new();
        for clients in self.opens.values() {
            for client in clients.keys() {
                *per_client.entry(*client).or_default() += 1;
            }
        }
        assert_eq!(per_client, self.per_client, "files open per client");
        assert!(per_client.values().all(|&n| n <= OPENS_PER_CLIENT_MAX), "a client over its bound");
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

    #[test]
    fn one_client_records_at_most_its_share() {
        let mut o = OpenFiles::new();
        for fid in 0..OPENS_PER_CLIENT_MAX as u64 {
            o.opened(Fid(fid), 1).unwrap();
        }
        o.opened(Fid(0), 1).expect("another open of a file it has open takes no more room");
        let refused = o.opened(Fid(u64::MAX), 1).unwrap_err();
        assert!(refused.contains("for one client"), "{refused}");
        o.opened(Fid(u64::MAX), 2).expect("another client still records");
        o.check_invariants();
        assert!(!o.closed(Fid(0), 1) && o.closed(Fid(0), 1));
        o.opened(Fid(u64::MAX), 1).expect("a file closed frees its room");
        o.check_invariants();
        o.client_gone(1);
        o.check_invariants();
    }
}
