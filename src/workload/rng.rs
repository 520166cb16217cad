//! A tiny seeded PRNG (SplitMix64) so every generated workload is a pure
//! function of its seed, on every platform, without a dependency.

use crate::types::chain::mix;

/// SplitMix64: a 64-bit counter run through a finalizer. Not cryptographic;
/// fast, seedable, and good enough to shuffle placements and pick lengths.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The generator for `seed` (every seed, including 0, is fine).
    pub const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    /// A value in `0..n` (0 when `n` is 0), by multiply-shift: the bias is
    /// below 2^-32 for the small ranges used here.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A value in `lo..=hi` (`lo` when `hi < lo`).
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// A generator derived from this one for an independent stream.
    pub fn fork(&mut self) -> Self {
        Self::new(self.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_ranges_hold() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let x = a.between(3, 9);
            assert!((3..=9).contains(&x));
            assert_eq!(x, b.between(3, 9));
        }
        assert_eq!(a.below(0), 0);
        assert_eq!(a.between(5, 2), 5);
    }
}
