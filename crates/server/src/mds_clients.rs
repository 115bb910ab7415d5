//! The clients an MDS's recovery waits for, as Lustre's MDT keeps them in
//! `last_rcvd`: so that the recovery grace after a restart ends as soon as
//! every client that held something has told the MDS again, instead of
//! always running its whole length.
//!
//! A client names itself on each MDS connection (`Wire::Session`, the
//! identity it keeps for its life). The first time a connection holds
//! something the MDS would forget in a restart (a granted file lock, a
//! file recorded open), its client is *known*: its identity is added to
//! the log in the data directory (`mds_clients`). It stays known until
//! its last connection ends (a client that went away has nothing left to
//! replay), and then it is taken out of the log.
//!
//! After a restart, the clients the log names are the ones the grace waits
//! for. Each, reconnecting, replays its locks and opens and then says it
//! is done (`MdsCall::ReplayDone`); when the last of them has, the grace
//! ends at once. One that does not come back is waited for until the
//! grace's end, then forgotten.
//!
//! The log is a line per change (`+` and the identity in hex, `-` and the
//! identity; `!` once when more clients were known than it keeps), made
//! without following links, 0600, and rewritten (to a new file renamed
//! into place) when it has grown past twice what it names. It is not
//! synced: the MDS process may die at any time and lose nothing (the
//! kernel keeps what was written), but after a crash of the machine
//! itself the newest entries may be missing; the grace may then end before
//! their clients replay, and their replayed locks are refused as too late
//! (each client says so in its log). Where lanefs departs from Lustre:
//! Lustre writes `last_rcvd` in the same transaction as the change.
//!
//! Bounds: at most [`KNOWN_CLIENTS_MAX`] clients are named; past it the
//! log says so (`!`), and the next restart's grace runs its whole length,
//! since it cannot know every client. Only nodes (mounts, a job's ranks)
//! hold locks or open files at the MDS, so no user can fill it.
//!
//! Invariants ([`KnownClients::check_invariants`]): every client with a
//! connection holding something is named, unless the log is full; every
//! client still waited for is named; no more than [`KNOWN_CLIENTS_MAX`]
//! are.

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use tracing::warn;

/// The log's file in the MDS's data directory.
pub const CLIENTS_FILE: &str = "mds_clients";

/// Clients the log names at most: one per client node connection held at
/// once (65,536 is the most connections an MDS serves at the usual
/// descriptor limits).
pub const KNOWN_CLIENTS_MAX: usize = 65_536;

/// The clients an MDS knows, and those its grace waits for.
#[derive(Debug)]
pub struct KnownClients {
    /// The log; `None` for an MDS without a data directory (a restart of
    /// it forgets everything, and keeps no grace).
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
    /// Lines in the log, for when to rewrite it.
    lines: usize,
    /// The clients the log names.
    named: BTreeSet<u64>,
    /// Whether more clients were known than the log names.
    full: bool,
    /// Connections holding something, per client.
    holders: HashMap<u64, usize>,
    /// During the grace: clients of the MDS's previous life that have not
    /// yet said they are done replaying.
    waiting: BTreeSet<u64>,
    /// The previous life's log was full: the grace cannot end early.
    waiting_unknown: bool,
}

/// What a client's `ReplayDone` did to the grace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replayed {
    /// Every client the grace waited for has replayed: it may end now.
    AllDone,
    /// Others are still waited for.
    Waiting(usize),
}

impl KnownClients {
    /// The clients named by the log in `dir` (none without one): those a
    /// grace beginning now waits for. The log is rewritten to name them
    /// alone, so that a second restart during the grace waits for them too.
    pub fn open(dir: Option<&Path>) -> std::io::Result<KnownClients> {
        let mut known = KnownClients {
            path: dir.map(|d| d.join(CLIENTS_FILE)),
            file: None,
            lines: 0,
            named: BTreeSet::new(),
            full: false,
            holders: HashMap::new(),
            waiting: BTreeSet::new(),
            waiting_unknown: false,
        };
        let Some(path) = known.path.clone() else { return Ok(known) };
        let (named, full) = read_log(&path)?;
        known.named = named.clone();
        known.full = full;
        known.waiting = named;
        known.waiting_unknown = full;
        known.rewrite()?;
        Ok(known)
    }

    /// Whether the grace now beginning has clients to wait for (or cannot
    /// tell, the log having been full).
    pub fn waits(&self) -> bool {
        !self.waiting.is_empty() || self.waiting_unknown
    }

    /// How many clients the grace still waits for.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// A connection of client `uuid` holds something for the first time.
    pub fn holds(&mut self, uuid: u64) {
        *self.holders.entry(uuid).or_insert(0) += 1;
        if self.named.contains(&uuid) {
            return;
        }
        if self.named.len() >= KNOWN_CLIENTS_MAX {
            if !self.full {
                self.full = true;
                warn!(
                    "{KNOWN_CLIENTS_MAX} clients hold locks or open files: past them, a restart's recovery grace runs \
                     its whole length"
                );
                self.append("!");
            }
            return;
        }
        self.named.insert(uuid);
        self.append(&format!("+{uuid:016x}"));
    }

    /// A connection of client `uuid` that held something ended.
    pub fn let_go(&mut self, uuid: u64) {
        let Some(count) = self.holders.get_mut(&uuid) else { return };
        *count -= 1;
        if *count > 0 {
            return;
        }
        self.holders.remove(&uuid);
        if !self.waiting.contains(&uuid) && self.named.remove(&uuid) {
            self.append(&format!("-{uuid:016x}"));
        }
    }

    /// Client `uuid` has replayed what it held (its replays came first on
    /// its connection): if it holds nothing now, nothing is owed it.
    pub fn replayed(&mut self, uuid: u64) -> Replayed {
        if self.waiting.remove(&uuid) && !self.holders.contains_key(&uuid) && self.named.remove(&uuid) {
            self.append(&format!("-{uuid:016x}"));
        }
        match self.waits() {
            false => Replayed::AllDone,
            true => Replayed::Waiting(self.waiting.len()),
        }
    }

    /// The grace is over: clients that did not come back are forgotten.
    /// Returns how many.
    pub fn grace_over(&mut self) -> usize {
        let absent = std::mem::take(&mut self.waiting);
        self.waiting_unknown = false;
        let mut forgotten = 0;
        for uuid in absent {
            if !self.holders.contains_key(&uuid) && self.named.remove(&uuid) {
                self.append(&format!("-{uuid:016x}"));
                forgotten += 1;
            }
        }
        forgotten
    }

    /// Add a line to the log, and rewrite it when it has grown past twice
    /// what it names. A failure to write is said at `warn`: what it costs
    /// is a grace that runs longer (or shorter) after the next restart.
    fn append(&mut self, line: &str) {
        let Some(file) = self.file.as_mut() else { return };
        if let Err(e) = writeln!(file, "{line}") {
            warn!(path = ?self.path, "the MDS's list of clients could not be written ({e}): after a restart, its recovery grace may not know every client");
            return;
        }
        self.lines += 1;
        if self.lines > 2 * self.named.len() + 1024 {
            if let Err(e) = self.rewrite() {
                warn!(path = ?self.path, "the MDS's list of clients could not be rewritten: {e}");
            }
        }
    }

    /// Write the log anew: what it names now, to a new file renamed into
    /// place, then append from there.
    fn rewrite(&mut self) -> std::io::Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let mut text = String::new();
        if self.full {
            text.push_str("!\n");
        }
        for uuid in &self.named {
            text.push_str(&format!("+{uuid:016x}\n"));
        }
        lanefs_net::runtime_files::replace_private_file(path, text.as_bytes(), false)?;
        let appender = std::fs::OpenOptions::new().append(true).custom_flags(libc::O_NOFOLLOW).open(path)?;
        self.file = Some(appender);
        self.lines = self.named.len() + usize::from(self.full);
        Ok(())
    }

    pub fn check_invariants(&self) {
        assert!(self.named.len() <= KNOWN_CLIENTS_MAX, "{} clients named", self.named.len());
        if !self.full {
            for uuid in self.holders.keys() {
                assert!(self.named.contains(uuid), "client {uuid:x} holds something and is not named");
            }
        }
        assert!(self.holders.values().all(|&n| n > 0), "a client is counted with no connection");
        assert!(self.waiting.is_subset(&self.named), "a client waited for is not named");
    }
}

/// The clients a log names, and whether it was full; no file: none.
fn read_log(path: &Path) -> std::io::Result<(BTreeSet<u64>, bool)> {
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((BTreeSet::new(), false)),
        Err(e) => {
            return Err(std::io::Error::new(
                e.kind(),
                format!("{}: {e} (the MDS's list of clients; remove it if it is not a plain file)", path.display()),
            ))
        }
    };
    let (mut named, mut full) = (BTreeSet::new(), false);
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        // Exactly as written: a line cut short by a crash is no identity.
        let uuid = |hex: &str| (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok()).flatten();
        match (line.get(..1), line.get(1..).and_then(uuid)) {
            (Some("+"), Some(id)) => {
                named.insert(id);
            }
            (Some("-"), Some(id)) => {
                named.remove(&id);
            }
            _ if line == "!" => full = true,
            // A line cut short by a crash: the rest still counts.
            _ => {
                warn!(path = %path.display(), line = n + 1, "a line of the MDS's list of clients is not one it writes: skipped")
            }
        }
        if named.len() > KNOWN_CLIENTS_MAX {
            full = true;
            named.pop_last();
        }
    }
    Ok((named, full))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_waits_for_the_clients_that_held_something_and_for_them_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut known = KnownClients::open(Some(dir.path())).unwrap();
        assert!(!known.waits(), "a first start waits for nobody");
        known.holds(1);
        known.holds(2);
        known.holds(2); // a second connection of client 2
        known.holds(3);
        known.let_go(3); // client 3 went away: nothing to replay
        known.let_go(2); // client 2 still has a connection
        known.check_invariants();
        drop(known); // the MDS dies

        let mut known = KnownClients::open(Some(dir.path())).unwrap();
        assert!(known.waits());
        assert_eq!(known.waiting(), 2, "clients 1 and 2");
        known.holds(1); // client 1 replays a lock
        assert_eq!(known.replayed(1), Replayed::Waiting(1));
        known.check_invariants();
        drop(known); // dies again during the grace: client 2 still owed

        let mut known = KnownClients::open(Some(dir.path())).unwrap();
        assert_eq!(known.waiting(), 2, "client 1 has not replayed to this life yet, client 2 never did");
        known.holds(1);
        assert_eq!(known.replayed(1), Replayed::Waiting(1));
        assert_eq!(known.replayed(7), Replayed::Waiting(1), "a client it never knew changes nothing");
        // Client 2 comes back holding nothing: nothing is owed it.
        assert_eq!(known.replayed(2), Replayed::AllDone);
        assert_eq!(known.grace_over(), 0);
        known.check_invariants();
        drop(known);
        let known = KnownClients::open(Some(dir.path())).unwrap();
        assert_eq!(known.waiting(), 1, "client 1, which holds a lock in this life");
    }

    #[test]
    fn a_client_that_does_not_come_back_is_forgotten_when_the_grace_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut known = KnownClients::open(Some(dir.path())).unwrap();
        known.holds(5);
        known.holds(6);
        drop(known);
        let mut known = KnownClients::open(Some(dir.path())).unwrap();
        known.holds(6);
        assert_eq!(known.replayed(6), Replayed::Waiting(1));
        assert_eq!(known.grace_over(), 1, "client 5 never came back");
        known.check_invariants();
        drop(known);
        let known = KnownClients::open(Some(dir.path())).unwrap();
        assert_eq!(known.waiting(), 1, "client 6 only");
    }

    #[test]
    fn the_log_stays_small_refuses_links_and_skips_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mut known = KnownClients::open(Some(dir.path())).unwrap();
        for round in 0..3_000u64 {
            known.holds(round % 4);
            known.let_go(round % 4);
        }
        known.holds(9);
        let size = std::fs::metadata(dir.path().join(CLIENTS_FILE)).unwrap().len();
        assert!(size < 2048 * 18, "the log is rewritten as it grows: {size} bytes");
        drop(known);
        // A torn last line (a crash mid-write) is skipped.
        let path = dir.path().join(CLIENTS_FILE);
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"+00ab").unwrap();
        let known = KnownClients::open(Some(dir.path())).unwrap();
        assert_eq!(known.waiting(), 1, "client 9; the torn line names nobody");
        drop(known);
        // A link at the log's name is refused, naming the fix.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        let refused = KnownClients::open(Some(dir.path())).unwrap_err();
        assert!(refused.to_string().contains("remove it"), "{refused}");
    }

    #[test]
    fn without_a_data_directory_nothing_is_kept() {
        let mut known = KnownClients::open(None).unwrap();
        known.holds(1);
        assert!(!known.waits());
        known.check_invariants();
    }
}
