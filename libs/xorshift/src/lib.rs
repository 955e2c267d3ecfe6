//! xorshift64*: the one pseudo-random generator of Musubi's fuzzers, benches and tests.
//! Small, fast, and repeatable from its seed, so a failure found with seed S is found again
//! with seed S. Not for anything that needs unpredictability.
#![no_std]

/// The generator; its state is the seed to start with (0 stays 0: give a non-zero seed).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True once in `one_in` times, on average.
    pub fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn repeatable_and_bounded() {
        let (mut a, mut b) = (Rng(42), Rng(42));
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            assert!(a.below(7) < 7);
            b.below(7);
        }
        assert_eq!(Rng(1).below(0), 0);
        assert_ne!(Rng(1).next_u64(), Rng(2).next_u64());
    }
}
