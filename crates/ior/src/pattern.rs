//! The data written and checked: lanefs's default pattern, or one of IOR's data packets.
//!
//! What: every transfer buffer is a run of little-endian 8-byte words.
//! - Without `-l` ([`PacketType::Generic`]), as IOR's `FillBuffer`: even words hold
//!   `pretendRank << 32 | signature` (the signature is `-G`, or the clock's seconds at the
//!   start of each repetition), odd words hold the word's byte position in the transfer.
//!   So that a transfer written at the wrong offset is also caught, the first odd word of
//!   every 4 KiB page holds the word's absolute file offset instead.
//! - With `-l`/`--dataPacketType`, IOR 4's packets (`utilities.c`,
//!   `generate_memory_pattern`, `update_write_memory_pattern`, `verify_memory_pattern`),
//!   byte for byte: `timestamp` (word `i` is `rank << 32 | signature + i`, the same in
//!   every transfer), `offset` (the same, with the first word of every 4 KiB replaced by
//!   `(u32) offset * k | rank << 32`, k = 1, 2, ...), `incompressible` (every word one
//!   value drawn with glibc's `rand_r` from `signature + rank`, stamped as `offset`), and
//!   `random` (each transfer a stream seeded by `signature + rank + offset`).
//!
//! The buffer is filled once per phase ([`fill`]) and only re-stamped per transfer
//! ([`stamp`]), which keeps the timed loop cheap; the checks build the expected buffer the
//! same way.
//!
//! Why this shape: `-W` and `-R` compare every word, counting mismatching 8-byte words
//! the way IOR 4.1 counts errors, and a mismatch names the rank, the file and the offset.
//! lanefs's default pattern is not IOR 4's default (`timestamp`, which carries no offset
//! and so cannot see a transfer written to the wrong place); `-l t` writes IOR's bytes.

use crate::params::PacketType;

/// Bytes per word of the pattern.
pub const WORD_BYTES: usize = 8;
/// Words between two offset stamps (one per 4 KiB page).
pub const STAMP_STRIDE_WORDS: usize = 4096 / WORD_BYTES;

/// Words between two stamps of IOR's packets (one per 4 KiB).
const PACKET_STAMP_STRIDE_WORDS: usize = 512;
/// IOR's `RANDALGO_GOLDEN_RATIO_PRIME`.
const GOLDEN_RATIO_PRIME: u64 = 0x9e37_ffff_fffc_0001;

/// Fill `buf` with the pattern of `pretend_rank` and `signature`, stamps not yet applied.
pub fn fill(buf: &mut [u8], packet: PacketType, pretend_rank: u32, signature: u32) {
    assert_eq!(buf.len() % WORD_BYTES, 0, "transfer size is validated to be a multiple of 8");
    let rank_high = u64::from(pretend_rank) << 32;
    // IOR passes the unsigned signature as an int and adds the word index as size_t.
    let seed = i64::from(signature as i32) as u64;
    let incompressible = {
        let mut state = (signature as i32).wrapping_add(pretend_rank as i32) as u32;
        let high = u64::from(rand_r(&mut state)) << 32;
        high | u64::from(rand_r(&mut state))
    };
    for (index, word) in buf.chunks_exact_mut(WORD_BYTES).enumerate() {
        let value = match packet {
            PacketType::Generic if index % 2 == 0 => rank_high | u64::from(signature),
            PacketType::Generic => (index * WORD_BYTES) as u64,
            PacketType::Timestamp | PacketType::Offset => rank_high | seed.wrapping_add(index as u64),
            PacketType::Incompressible => incompressible,
            // Written per transfer by `stamp`.
            PacketType::Random => 0,
        };
        word.copy_from_slice(&value.to_le_bytes());
    }
}

/// Stamp a filled buffer for the transfer at `file_offset`.
pub fn stamp(buf: &mut [u8], packet: PacketType, file_offset: u64, pretend_rank: u32, signature: u32) {
    let words = buf.len() / WORD_BYTES;
    let mut put = |index: usize, value: u64| {
        buf[index * WORD_BYTES..(index + 1) * WORD_BYTES].copy_from_slice(&value.to_le_bytes());
    };
    match packet {
        PacketType::Generic => {
            for index in (1..words).step_by(STAMP_STRIDE_WORDS) {
                put(index, file_offset + (index * WORD_BYTES) as u64);
            }
        }
        PacketType::Timestamp => {}
        PacketType::Offset | PacketType::Incompressible => {
            let rank_high = u64::from(pretend_rank) << 32;
            for (k, index) in (0..words).step_by(PACKET_STAMP_STRIDE_WORDS).enumerate() {
                // IOR: (uint32_t) item * k, in 32-bit arithmetic.
                let low = (file_offset as u32).wrapping_mul(k as u32 + 1);
                put(index, u64::from(low) | rank_high);
            }
        }
        PacketType::Random => {
            let base = i64::from((signature as i32).wrapping_add(pretend_rank as i32)) as u64;
            let mut seed = base.wrapping_add(file_offset) as u32;
            let mut state = u64::from(rand_r(&mut seed));
            for index in 0..words {
                state = state.wrapping_mul(GOLDEN_RATIO_PRIME) >> 3;
                put(index, state);
            }
        }
    }
}

/// glibc's `rand_r`: three steps of its linear congruential generator.
fn rand_r(seed: &mut u32) -> u32 {
    let mut next = *seed;
    let mut step = || {
        next = next.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        next / 65_536
    };
    let mut result = step() % 2048;
    result = (result << 10) ^ (step() % 1024);
    result = (result << 10) ^ (step() % 1024);
    *seed = next;
    result
}

/// Where two buffers differ, in 8-byte words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Number of differing words.
    pub words: u64,
    /// Index of the first differing word.
    pub first: usize,
    /// Index of the last differing word.
    pub last: usize,
}

/// Compare `actual` with `expected` word by word; `None` when they agree.
pub fn compare(expected: &[u8], actual: &[u8]) -> Option<Mismatch> {
    assert_eq!(expected.len(), actual.len());
    if expected == actual {
        return None;
    }
    let mut mismatch = Mismatch { words: 0, first: usize::MAX, last: 0 };
    let pairs = expected.chunks_exact(WORD_BYTES).zip(actual.chunks_exact(WORD_BYTES));
    for (index, (want, got)) in pairs.enumerate() {
        if want != got {
            mismatch.words += 1;
            mismatch.first = mismatch.first.min(index);
            mismatch.last = index;
        }
    }
    Some(mismatch)
}

/// Word `index` of `buf` (for error reports).
pub fn word(buf: &[u8], index: usize) -> u64 {
    let mut bytes = [0u8; WORD_BYTES];
    bytes.copy_from_slice(&buf[index * WORD_BYTES..(index + 1) * WORD_BYTES]);
    u64::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_carry_rank_signature_and_offsets() {
        let mut buf = vec![0u8; 8192];
        fill(&mut buf, PacketType::Generic, 3, 0xabcd);
        stamp(&mut buf, PacketType::Generic, 1 << 20, 3, 0xabcd);
        assert_eq!(word(&buf, 0), (3 << 32) | 0xabcd);
        assert_eq!(word(&buf, 2), (3 << 32) | 0xabcd);
        assert_eq!(word(&buf, 1), (1 << 20) + 8);
        assert_eq!(word(&buf, 3), 24);
        assert_eq!(word(&buf, 513), (1 << 20) + 513 * 8);
        assert_eq!(word(&buf, 515), 515 * 8);
    }

    #[test]
    fn compare_counts_words() {
        let mut want = vec![0u8; 64];
        fill(&mut want, PacketType::Generic, 1, 7);
        let mut got = want.clone();
        assert_eq!(compare(&want, &got), None);
        got[9] ^= 1;
        got[40] ^= 0x80;
        assert_eq!(compare(&want, &got), Some(Mismatch { words: 2, first: 1, last: 5 }));
    }

    #[test]
    fn other_rank_or_offset_differs() {
        let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
        fill(&mut a, PacketType::Generic, 0, 9);
        fill(&mut b, PacketType::Generic, 1, 9);
        assert!(compare(&a, &b).is_some());
        fill(&mut b, PacketType::Generic, 0, 9);
        stamp(&mut a, PacketType::Generic, 0, 0, 9);
        stamp(&mut b, PacketType::Generic, 4096, 0, 9);
        assert_eq!(compare(&a, &b).map(|m| m.words), Some(1));
    }

    #[test]
    fn rand_r_is_glibcs() {
        // glibc 2.36: unsigned s = 1; rand_r(&s) three times.
        let mut seed = 1;
        assert_eq!([rand_r(&mut seed), rand_r(&mut seed), rand_r(&mut seed)], [476707713, 1186278907, 505671508]);
    }

    #[test]
    fn ior_packets_are_iors_words() {
        let mut buf = vec![0u8; 8192];
        fill(&mut buf, PacketType::Timestamp, 2, 100);
        stamp(&mut buf, PacketType::Timestamp, 1 << 20, 2, 100);
        assert_eq!(word(&buf, 0), (2 << 32) | 100);
        assert_eq!(word(&buf, 513), (2 << 32) | 613);
        fill(&mut buf, PacketType::Offset, 2, 100);
        stamp(&mut buf, PacketType::Offset, 1 << 20, 2, 100);
        assert_eq!(word(&buf, 0), (2 << 32) | (1 << 20));
        assert_eq!(word(&buf, 1), (2 << 32) | 101);
        assert_eq!(word(&buf, 512), (2 << 32) | (2 << 20));
        // The offset wraps in 32 bits, as IOR's (uint32_t) cast makes it.
        stamp(&mut buf, PacketType::Offset, (1 << 32) + 8, 2, 100);
        assert_eq!(word(&buf, 512), (2 << 32) | 16);
        fill(&mut buf, PacketType::Incompressible, 2, 100);
        assert_eq!(word(&buf, 1), word(&buf, 700), "IOR draws one value for every word");
        // glibc: unsigned s = 102; rand_r(&s) << 32 | rand_r(&s).
        assert_eq!(word(&buf, 1), 0x5032_951d_4fbf_b7ea);
        let mut other = vec![0u8; 8192];
        stamp(&mut buf, PacketType::Random, 0, 2, 100);
        stamp(&mut other, PacketType::Random, 8192, 2, 100);
        assert_ne!(word(&buf, 0), word(&other, 0));
        assert_ne!(word(&buf, 0), word(&buf, 1));
    }
}
