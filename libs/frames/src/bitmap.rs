//! Word-at-a-time operations on runs of bits in a `u64` bitmap.
//!
//! The frame allocator spends its time searching for and flipping runs of
//! bits. Doing that one bit at a time would make large pools slow, so every
//! operation here works on whole words: a run `[from, to)` is visited as a
//! sequence of (word index, mask) pairs, and a full word is tested with one
//! comparison. Bit `i` lives in word `i / 64` at position `i % 64`.

/// Bits per bitmap word.
pub(crate) const WORD_BITS: u64 = u64::BITS as u64;

/// Yields `(word index, mask)` for every word that the bit run `[from, to)`
/// touches, where `mask` selects the run's bits within that word.
struct Spans {
    from: u64,
    to: u64,
}

impl Iterator for Spans {
    type Item = (usize, u64);

    fn next(&mut self) -> Option<Self::Item> {
        if self.from >= self.to {
            return None;
        }
        let lo = self.from % WORD_BITS;
        let hi = (self.to - self.from + lo).min(WORD_BITS);
        // `hi - lo` is in 1..=64, so the shift is in 0..=63.
        let mask = (u64::MAX >> (WORD_BITS - (hi - lo))) << lo;
        let word = (self.from / WORD_BITS) as usize;
        self.from += hi - lo;
        Some((word, mask))
    }
}

fn spans(from: u64, to: u64) -> Spans {
    Spans { from, to }
}

/// Number of words needed to hold `bits` bits.
pub(crate) fn words_for(bits: u64) -> usize {
    bits.div_ceil(WORD_BITS) as usize
}

/// Sets bits `[from, to)`; returns how many were clear before.
pub(crate) fn set_run(words: &mut [u64], from: u64, to: u64) -> u64 {
    spans(from, to)
        .map(|(w, mask)| {
            let fresh = mask & !words[w];
            words[w] |= mask;
            u64::from(fresh.count_ones())
        })
        .sum()
}

/// Clears bits `[from, to)`; returns how many were set before.
pub(crate) fn clear_run(words: &mut [u64], from: u64, to: u64) -> u64 {
    spans(from, to)
        .map(|(w, mask)| {
            let fresh = mask & words[w];
            words[w] &= !mask;
            u64::from(fresh.count_ones())
        })
        .sum()
}

/// Index of the first set bit in `[from, to)`, if any.
pub(crate) fn find_set(words: &[u64], from: u64, to: u64) -> Option<u64> {
    find(from, to, |w, mask| words[w] & mask)
}

/// Index of the first clear bit in `[from, to)`, if any.
pub(crate) fn find_clear(words: &[u64], from: u64, to: u64) -> Option<u64> {
    find(from, to, |w, mask| !words[w] & mask)
}

/// First bit in `[from, to)` for which `hits(word, mask)` has a bit set.
fn find(from: u64, to: u64, hits: impl Fn(usize, u64) -> u64) -> Option<u64> {
    spans(from, to).find_map(|(w, mask)| {
        let hit = hits(w, mask);
        (hit != 0).then(|| w as u64 * WORD_BITS + u64::from(hit.trailing_zeros()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_get(words: &[u64], bit: u64) -> bool {
        words[(bit / WORD_BITS) as usize] >> (bit % WORD_BITS) & 1 == 1
    }

    #[test]
    fn spans_cover_exactly_the_run() {
        let collected: Vec<_> = spans(60, 130).collect();
        assert_eq!(collected, [(0, 0xF << 60), (1, u64::MAX), (2, 0b11)]);
        assert_eq!(spans(64, 128).collect::<Vec<_>>(), [(1, u64::MAX)]);
        assert_eq!(spans(5, 6).collect::<Vec<_>>(), [(0, 1 << 5)]);
        assert_eq!(spans(7, 7).count(), 0);
        assert_eq!(spans(9, 3).count(), 0);
    }

    #[test]
    fn set_and_clear_report_changed_bits() {
        let mut words = [0u64; 3];
        assert_eq!(set_run(&mut words, 10, 100), 90);
        assert_eq!(set_run(&mut words, 0, 192), 102);
        assert_eq!(set_run(&mut words, 50, 70), 0);
        assert_eq!(clear_run(&mut words, 63, 65), 2);
        assert_eq!(clear_run(&mut words, 60, 70), 8);
        assert_eq!(words, [u64::MAX >> 4, u64::MAX << 6, u64::MAX]);
    }

    /// Compares the word-level searches with bit-by-bit ones on random
    /// bitmaps and random windows.
    #[test]
    fn find_matches_naive_search() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2000 {
            // Sparse, dense and mixed words, so both searches hit and miss.
            let mut words = [0u64; 4];
            for w in &mut words {
                *w = match next() % 4 {
                    0 => 0,
                    1 => u64::MAX,
                    2 => next() & next() & next(),
                    _ => next(),
                };
            }
            let from = next() % 257;
            let to = next() % 257;
            let want_set = (from..to).find(|&b| naive_get(&words, b));
            let want_clear = (from..to).find(|&b| !naive_get(&words, b));
            assert_eq!(
                find_set(&words, from, to),
                want_set,
                "{words:x?} [{from}, {to})"
            );
            assert_eq!(
                find_clear(&words, from, to),
                want_clear,
                "{words:x?} [{from}, {to})"
            );
        }
    }
}
