//! What each client does: one program per client, drawn from the seed.
//!
//! A program is a list of [`Action`]s run in order, each started as soon as
//! the one before it completes (clients overlap as independent processes
//! do). The mix: independent writes and reads of overlapping ranges of the
//! shared files and of the client's own file, fsyncs, closes (the next
//! action opens the file again), truncates, stats, and collective-style
//! sections on a shared file: the client is one aggregator of all the
//! clients and writes whole stripe units of its own (unit `u` belongs to
//! aggregator `u % clients`), under a GROUP lock shared with the other
//! aggregators or under lockahead locks it asked for first, as ROMIO's
//! two-phase writes do on Lustre.
//!
//! Every write is numbered ([`WriteId`]); its bytes are
//! [`value_byte`]`(id, offset)`, never zero, so a byte read back names the
//! write it came from (up to a collision of 1 in 255 per byte, which the
//! oracle's candidate sets keep harmless: a wrong read differs in many
//! bytes). A truncate is numbered too: for the oracle it writes zeros from
//! the new end to the end of the file's extent.

use crate::options::{FileSpec, SwarmOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Names one write (or truncate) of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteId(pub u32);

/// The byte write `id` puts at file offset `offset`: never zero.
#[inline]
pub fn value_byte(id: WriteId, offset: u64) -> u8 {
    let x = (offset ^ ((id.0 as u64) << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let x = (x ^ (x >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    ((x >> 56) % 255) as u8 + 1
}

/// The bytes of write `id` over `[offset, offset + len)`.
pub fn write_bytes(id: WriteId, offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(|o| value_byte(id, o)).collect()
}

/// One step of a client's program; files are indices into the run's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Write {
        file: usize,
        offset: u64,
        len: u64,
        id: WriteId,
    },
    Read {
        file: usize,
        offset: u64,
        len: u64,
    },
    Fsync {
        file: usize,
    },
    Close {
        file: usize,
    },
    Truncate {
        file: usize,
        size: u64,
        id: WriteId,
    },
    Stat {
        file: usize,
    },
    /// Lock-no-expand, then asynchronous write lockahead of `[start, end]`
    /// file ranges (inclusive).
    Lockahead {
        file: usize,
        ranges: Vec<(u64, u64)>,
    },
    GroupLock {
        file: usize,
        gid: u64,
    },
    GroupUnlock {
        file: usize,
    },
    /// Through the MDS, on the client's own scratch names
    /// ([`crate::mds::scratch_path`]): `O_CREAT|O_EXCL`, unlink, stat, and a
    /// listing of `/`.
    NsCreate {
        slot: usize,
    },
    NsUnlink {
        slot: usize,
    },
    NsStat {
        slot: usize,
    },
    NsList,
}

impl Action {
    /// The data file it works on (`None`: a namespace action).
    pub fn file(&self) -> Option<usize> {
        match *self {
            Action::Write { file, .. }
            | Action::Read { file, .. }
            | Action::Fsync { file }
            | Action::Close { file }
            | Action::Truncate { file, .. }
            | Action::Stat { file }
            | Action::Lockahead { file, .. }
            | Action::GroupLock { file, .. }
            | Action::GroupUnlock { file } => Some(file),
            Action::NsCreate { .. } | Action::NsUnlink { .. } | Action::NsStat { .. } | Action::NsList => None,
        }
    }
}

/// Scratch names per client (see [`Action::NsCreate`]).
pub const SCRATCH_SLOTS: usize = 3;

/// Stripe units one aggregator writes in a collective section, at most.
const SECTION_UNITS_MAX: usize = 4;

/// Every client's program.
pub fn programs(options: &SwarmOptions) -> Vec<Vec<Action>> {
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed ^ 0x776f_726b_6c6f_6164);
    let mut next_id = 1u32;
    (0..options.clients).map(|c| program(options, c, &mut rng, &mut next_id)).collect()
}

fn program(options: &SwarmOptions, client: u32, rng: &mut ChaCha8Rng, next_id: &mut u32) -> Vec<Action> {
    let mine: Vec<usize> = options
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| f.owner.is_none() || f.owner == Some(client))
        .map(|(i, _)| i)
        .collect();
    let shared: Vec<usize> = (0..options.files.len()).filter(|&i| options.files[i].owner.is_none()).collect();
    let mut id = || {
        *next_id += 1;
        WriteId(*next_id - 1)
    };
    let mut p = Vec::new();
    while p.len() < options.actions_per_client {
        if rng.gen_bool(0.15) {
            let slot = rng.gen_range(0..SCRATCH_SLOTS);
            p.push(match rng.gen_range(0..10) {
                0..=3 => Action::NsCreate { slot },
                4..=6 => Action::NsUnlink { slot },
                7..=8 => Action::NsStat { slot },
                _ => Action::NsList,
            });
            continue;
        }
        let file = mine[rng.gen_range(0..mine.len())];
        let spec = &options.files[file];
        match rng.gen_range(0..100) {
            0..=34 => {
                let (offset, len) = range(rng, spec);
                p.push(Action::Write { file, offset, len, id: id() });
            }
            35..=56 => {
                let (offset, len) = range(rng, spec);
                p.push(Action::Read { file, offset, len });
            }
            57..=66 => p.push(Action::Fsync { file }),
            67..=72 => p.push(Action::Close { file }),
            73..=76 => p.push(Action::Truncate { file, size: rng.gen_range(0..=spec.bytes), id: id() }),
            77..=79 => p.push(Action::Stat { file }),
            _ => {
                let file = shared[rng.gen_range(0..shared.len())];
                section(rng, options, client, file, &mut id, &mut p);
            }
        }
    }
    p
}

/// An offset and a length within the file: mostly small, sometimes a few
/// pages or more than a stripe, sometimes page-aligned.
fn range(rng: &mut ChaCha8Rng, spec: &FileSpec) -> (u64, u64) {
    let len_max = match rng.gen_range(0..10) {
        0..=6 => 4096,
        7..=8 => 32 << 10,
        _ => 2 * spec.stripe_bytes,
    }
    .min(spec.bytes);
    let len = rng.gen_range(1..=len_max);
    let mut offset = rng.gen_range(0..=spec.bytes - len);
    if rng.gen_bool(0.2) {
        offset -= offset % 4096;
    }
    (offset, len)
}

/// A collective-style section: this aggregator's stripe units of `file`,
/// under a GROUP lock (ended by an unlock, now and then by a close) or
/// under lockahead.
fn section(
    rng: &mut ChaCha8Rng,
    options: &SwarmOptions,
    client: u32,
    file: usize,
    id: &mut impl FnMut() -> WriteId,
    p: &mut Vec<Action>,
) {
    let spec = &options.files[file];
    let units = spec.bytes / spec.stripe_bytes;
    let ours: Vec<u64> = (0..units).filter(|u| u % options.clients as u64 == client as u64).collect();
    if ours.is_empty() {
        return;
    }
    let first = rng.gen_range(0..ours.len());
    let count = rng.gen_range(1..=SECTION_UNITS_MAX.min(ours.len() - first));
    let picked = &ours[first..first + count];
    let group = rng.gen_bool(0.5);
    if group {
        // Mostly one group per file, so that aggregators share it; now and
        // then another, which must wait for the first to be unlocked.
        let gid = 100 + 2 * file as u64 + u64::from(rng.gen_bool(0.1));
        p.push(Action::GroupLock { file, gid });
    } else {
        let ranges = picked.iter().map(|u| (u * spec.stripe_bytes, (u + 1) * spec.stripe_bytes - 1)).collect();
        p.push(Action::Lockahead { file, ranges });
    }
    for &u in picked {
        let start = u * spec.stripe_bytes;
        if rng.gen_bool(0.5) {
            p.push(Action::Write { file, offset: start, len: spec.stripe_bytes, id: id() });
        } else {
            let half = spec.stripe_bytes / 2;
            p.push(Action::Write { file, offset: start, len: half, id: id() });
            p.push(Action::Write { file, offset: start + half, len: half, id: id() });
        }
    }
    if group {
        p.push(if rng.gen_bool(0.05) { Action::Close { file } } else { Action::GroupUnlock { file } });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_numbered_once_and_stay_in_their_file() {
        for seed in 0..200 {
            let options = SwarmOptions::from_seed(seed);
            let programs = programs(&options);
            assert_eq!(programs, super::programs(&options), "seed {seed}: drawn the same twice");
            let mut ids = std::collections::BTreeSet::new();
            for (c, p) in programs.iter().enumerate() {
                assert!(p.len() >= options.actions_per_client);
                for a in p {
                    let Some(file) = a.file() else { continue };
                    let spec = &options.files[file];
                    assert!(spec.owner.is_none() || spec.owner == Some(c as u32), "seed {seed}: another's file");
                    match *a {
                        Action::Write { offset, len, id, .. } => {
                            assert!(len > 0 && offset + len <= spec.bytes);
                            assert!(ids.insert(id), "seed {seed}: {id:?} twice");
                        }
                        Action::Read { offset, len, .. } => assert!(len > 0 && offset + len <= spec.bytes),
                        Action::Truncate { size, id, .. } => {
                            assert!(size <= spec.bytes);
                            assert!(ids.insert(id));
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    #[test]
    fn write_bytes_are_never_zero_and_differ_between_writes() {
        let a = write_bytes(WriteId(1), 0, 4096);
        let b = write_bytes(WriteId(2), 0, 4096);
        assert!(a.iter().chain(&b).all(|&v| v != 0));
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < 64, "{same} of 4096 bytes alike");
    }
}
