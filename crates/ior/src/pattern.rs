//! The data written and checked: IOR's time-stamp signature.
//!
//! What: every transfer buffer is a run of little-endian 8-byte words, as IOR's
//! `FillBuffer`: even words hold `pretendRank << 32 | signature` (the signature is `-G`,
//! or the clock's seconds at the start of each repetition), odd words hold the word's
//! byte position in the transfer. So that a transfer written at the wrong offset is also
//! caught, the first odd word of every 4 KiB page holds the word's absolute file offset
//! instead (IOR 4 likewise re-stamps one word per 4 KiB per transfer). The buffer is filled
//! once per phase and only re-stamped per transfer, which keeps the timed loop cheap.
//!
//! Why this shape: `-W` and `-R` compare every word, counting mismatching 8-byte words
//! the way IOR counts errors, and a mismatch names the rank, the file and the offset.
//!
//! Not here: IOR's incompressible and offset-only packet types (`-l`), which are refused.

/// Bytes per word of the pattern.
pub const WORD_BYTES: usize = 8;
/// Words between two offset stamps (one per 4 KiB page).
pub const STAMP_STRIDE_WORDS: usize = 4096 / WORD_BYTES;

/// Fill `buf` with the pattern of `pretend_rank` and `signature`, stamps not yet applied.
pub fn fill(buf: &mut [u8], pretend_rank: u32, signature: u32) {
    assert_eq!(buf.len() % WORD_BYTES, 0, "transfer size is validated to be a multiple of 8");
    let rank_word = (u64::from(pretend_rank) << 32) | u64::from(signature);
    for (index, word) in buf.chunks_exact_mut(WORD_BYTES).enumerate() {
        let value = if index % 2 == 0 { rank_word } else { (index * WORD_BYTES) as u64 };
        word.copy_from_slice(&value.to_le_bytes());
    }
}

/// Stamp the absolute offsets of a transfer at `file_offset` into a filled buffer.
pub fn stamp(buf: &mut [u8], file_offset: u64) {
    let words = buf.len() / WORD_BYTES;
    for index in (1..words).step_by(STAMP_STRIDE_WORDS) {
        let value = file_offset + (index * WORD_BYTES) as u64;
        buf[index * WORD_BYTES..(index + 1) * WORD_BYTES].copy_from_slice(&value.to_le_bytes());
    }
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
        fill(&mut buf, 3, 0xabcd);
        stamp(&mut buf, 1 << 20);
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
        fill(&mut want, 1, 7);
        let mut got = want.clone();
        assert_eq!(compare(&want, &got), None);
        got[9] ^= 1;
        got[40] ^= 0x80;
        assert_eq!(compare(&want, &got), Some(Mismatch { words: 2, first: 1, last: 5 }));
    }

    #[test]
    fn other_rank_or_offset_differs() {
        let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
        fill(&mut a, 0, 9);
        fill(&mut b, 1, 9);
        assert!(compare(&a, &b).is_some());
        fill(&mut b, 0, 9);
        stamp(&mut a, 0);
        stamp(&mut b, 4096);
        assert_eq!(compare(&a, &b).map(|m| m.words), Some(1));
    }
}
