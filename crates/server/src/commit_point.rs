//! An OST's commit point on disk: the highest transaction number whose
//! changes are durable, written at every commit (the part of Lustre's
//! `last_rcvd` that every transaction updates).
//!
//! Why a file of its own: the rest of the OST's record (its life, its
//! clients, unacknowledged failure notices: `last_rcvd.json`) changes
//! rarely and is replaced atomically (a new file, `fsync`, `rename`, `fsync`
//! of the directory: two journal commits). The commit point changes at
//! every commit, which on a shared file under `sync_lock_cancel` means at
//! every lock handover; replacing a file each time tripled the syncs a
//! handover costs. Here it is written in place instead, into a file whose
//! blocks were allocated when it was made, so that its `fdatasync` writes
//! one block and changes no metadata.
//!
//! Layout: two slots of [`SLOT_BYTES`]; each write goes to the slot the
//! last one did not use, with a sequence number and a CRC-32, so a write
//! torn by a crash leaves the other slot whole. Reading takes the valid
//! slot with the higher sequence number. The commit point a reader uses is
//! the higher of this file's and `last_rcvd.json`'s: both only grow.

use lanefs_core::Transno;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// The file, beside `last_rcvd.json`.
pub const COMMIT_POINT_FILE: &str = "last_committed";
/// One slot: a disk sector's worth, written whole.
pub const SLOT_BYTES: u64 = 512;
const MAGIC: u32 = 0x4c43_5054; // "LCPT"
/// magic, sequence number, commit point, CRC-32 of the 20 bytes before it.
const RECORD_BYTES: usize = 4 + 8 + 8 + 4;

/// The commit point file, open for writing (the commit thread's).
#[derive(Debug)]
pub struct CommitPoint {
    file: File,
    seq: u64,
    last: Transno,
}

impl CommitPoint {
    /// Open the commit point file in `dir`, making it (allocated, and
    /// synced with its directory) if there is none.
    pub fn open(dir: &Path) -> std::io::Result<CommitPoint> {
        let path = dir.join(COMMIT_POINT_FILE);
        let file = match std::fs::OpenOptions::new().read(true).write(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let file =
                    std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
                // Real blocks, not a hole: an overwrite then allocates nothing.
                file.write_all_at(&[0; 2 * SLOT_BYTES as usize], 0)?;
                file.sync_all()?;
                File::open(dir)?.sync_all()?;
                file
            }
            Err(e) => return Err(e),
        };
        let (seq, last) = read_slots(&file)?.unwrap_or((0, Transno(0)));
        Ok(CommitPoint { file, seq, last })
    }

    /// Record `transno` as committed, durably; a lower one than recorded
    /// already changes nothing.
    pub fn save(&mut self, transno: Transno) -> std::io::Result<()> {
        if transno <= self.last {
            return Ok(());
        }
        let seq = self.seq + 1;
        let slot = seq % 2;
        self.file.write_all_at(&encode(seq, transno), slot * SLOT_BYTES)?;
        self.file.sync_data()?;
        self.seq = seq;
        self.last = transno;
        Ok(())
    }

    pub fn last_committed(&self) -> Transno {
        self.last
    }
}

/// The commit point recorded in `dir`, if any slot of its file is whole.
pub fn read(dir: &Path) -> std::io::Result<Option<Transno>> {
    match File::open(dir.join(COMMIT_POINT_FILE)) {
        Ok(file) => Ok(read_slots(&file)?.map(|(_, transno)| transno)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_slots(file: &File) -> std::io::Result<Option<(u64, Transno)>> {
    let mut best = None;
    for slot in 0..2 {
        let mut bytes = [0; RECORD_BYTES];
        match file.read_exact_at(&mut bytes, slot * SLOT_BYTES) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => continue, // cut short: not whole
            Err(e) => return Err(e),
        }
        if let Some((seq, transno)) = decode(&bytes) {
            if best.is_none_or(|(s, _)| seq > s) {
                best = Some((seq, transno));
            }
        }
    }
    Ok(best)
}

fn encode(seq: u64, transno: Transno) -> [u8; RECORD_BYTES] {
    let mut out = [0; RECORD_BYTES];
    out[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    out[4..12].copy_from_slice(&seq.to_le_bytes());
    out[12..20].copy_from_slice(&transno.0.to_le_bytes());
    let crc = crc32fast::hash(&out[..20]);
    out[20..24].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8; RECORD_BYTES]) -> Option<(u64, Transno)> {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let magic = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
    (magic == MAGIC && crc == crc32fast::hash(&bytes[..20])).then(|| (word(4), Transno(word(12))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commit_point_survives_reopening_and_only_grows() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let mut point = CommitPoint::open(dir.path()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), None, "a new file holds no commit point");
        for t in [3, 9, 9, 4, 12] {
            point.save(Transno(t)).unwrap();
        }
        assert_eq!(point.last_committed(), Transno(12));
        drop(point);
        assert_eq!(read(dir.path()).unwrap(), Some(Transno(12)));
        let mut point = CommitPoint::open(dir.path()).unwrap();
        assert_eq!(point.last_committed(), Transno(12));
        point.save(Transno(13)).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(Transno(13)));
    }

    /// A write torn by a crash spoils one slot; the other still holds the
    /// commit point before it.
    #[test]
    fn a_torn_slot_leaves_the_last_whole_commit_point() {
        let dir = tempfile::tempdir().unwrap();
        let mut point = CommitPoint::open(dir.path()).unwrap();
        point.save(Transno(5)).unwrap(); // sequence 1: the second slot
        point.save(Transno(7)).unwrap(); // sequence 2: the first
        let file = std::fs::OpenOptions::new().write(true).open(dir.path().join(COMMIT_POINT_FILE)).unwrap();
        file.write_all_at(&[0xff; 6], 10).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(Transno(5)));
        file.write_all_at(&[0xff; 6], SLOT_BYTES + 10).unwrap();
        assert_eq!(read(dir.path()).unwrap(), None, "no whole slot: nothing recorded here");
    }
}
