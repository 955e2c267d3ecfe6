//! Helpers shared by the integration tests: a deterministic PRNG (so the
//! randomized tests are reproducible without extra crates), shorthands for
//! building ranges in frame units, and pool conveniences.

#![allow(dead_code)] // Each test binary uses a different subset.

use frames::{FramePool, PhysRange, FRAME_SIZE};

/// Marsaglia xorshift64: tiny, deterministic, good enough for test inputs.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        // The all-zero state is a fixed point; avoid it.
        Self(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-ish value in `[lo, hi)`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo < hi);
        lo + self.next_u64() % (hi - lo)
    }

    /// `true` with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }
}

/// The frame-aligned range covering frames `[first, end)`.
pub fn frames(first: u64, end: u64) -> PhysRange {
    PhysRange::new(first * FRAME_SIZE, end * FRAME_SIZE)
}

/// Frame numbers covered by `ranges`, in order.
pub fn frame_numbers(ranges: &[PhysRange]) -> Vec<u64> {
    ranges
        .iter()
        .flat_map(|r| r.start / FRAME_SIZE..r.end / FRAME_SIZE)
        .collect()
}

/// Merges touching ranges of a sorted list.
pub fn coalesce(ranges: &[PhysRange]) -> Vec<PhysRange> {
    let mut out: Vec<PhysRange> = Vec::new();
    for &r in ranges.iter().filter(|r| !r.is_empty()) {
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// Zeroed bitmap storage of exactly the size a pool over `ranges` needs.
pub fn bitmap_for(ranges: &[PhysRange]) -> Vec<u64> {
    vec![0; FramePool::bitmap_words(ranges)]
}

/// Allocates single frames until the pool is empty.
pub fn drain(pool: &mut FramePool) -> Vec<u64> {
    std::iter::from_fn(|| pool.alloc()).collect()
}
