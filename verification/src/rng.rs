//! The one seeded random generator of the workloads and the differential
//! streams (SplitMix64), so every generated stream is a pure function of its
//! seed, on every platform, without a dependency.

use crate::chain::mix;

/// SplitMix64: a 64-bit counter run through a finalizer. Not cryptographic;
/// fast, seedable, and good enough to shuffle placements and pick lengths.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
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

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// A uniformly chosen item (`None` when `items` is empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }

    /// Shuffles `items` in place (Fisher–Yates).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
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
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
            let x = a.between(3, 9);
            assert!((3..=9).contains(&x));
            assert_eq!(x, b.between(3, 9));
        }
        assert_eq!(a.below(0), 0);
        assert_eq!(a.between(5, 2), 5);
        assert_eq!(a.pick::<u8>(&[]), None);
    }
}
