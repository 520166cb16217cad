//! Process-wide statistics counters (restarts, fallbacks, live and retired
//! bytes).
//!
//! Protocol. They are the facade's unmodelled atomics in every arm: they
//! record what happened and synchronize nothing, so the checkers need not
//! see them. Each is sharded: a thread adds to its own cache-padded shard
//! (chosen once per thread), so writers on different threads never contend
//! on a counter's cache line; a read sums the shards (Relaxed: a sum racing
//! updates is approximate). Under a checker every modelled thread runs on
//! one OS thread, so one shard takes every update and reads stay exact.

use crate::sync::unmodelled::{AtomicI64, AtomicUsize, Ordering};

/// Shards per counter.
const SHARDS: usize = 16;

/// One shard on its own cache lines (128 bytes: adjacent-line prefetch).
#[derive(Debug)]
#[repr(align(128))]
struct Shard(AtomicI64);

/// This thread's shard index, assigned round-robin on first use.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Relaxed: only spreads threads over shards.
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

/// A signed sum over shards.
#[derive(Debug)]
struct Sharded([Shard; SHARDS]);

impl Sharded {
    const fn new() -> Self {
        Self([const { Shard(AtomicI64::new(0)) }; SHARDS])
    }
    #[inline]
    fn add(&self, n: i64) {
        // Relaxed: statistics only.
        self.0[shard()].0.fetch_add(n, Ordering::Relaxed);
    }
    fn sum(&self) -> i64 {
        // Relaxed: statistics only; a sum racing updates is approximate.
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }
}

/// A statistics counter.
#[derive(Debug)]
pub struct StatCounter(Sharded);

impl StatCounter {
    /// A counter at zero.
    pub const fn new() -> Self {
        Self(Sharded::new())
    }
    /// Adds one.
    #[inline]
    pub fn bump(&self) {
        self.0.add(1);
    }
    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.sum().max(0) as u64
    }
}

impl Default for StatCounter {
    fn default() -> Self {
        Self::new()
    }
}

/// A statistics gauge: a signed level that goes up and down (bytes or
/// objects outstanding).
#[derive(Debug)]
pub struct StatGauge(Sharded);

impl StatGauge {
    /// A gauge at zero.
    pub const fn new() -> Self {
        Self(Sharded::new())
    }
    /// Raises the level by `n`.
    #[inline]
    pub fn add(&self, n: usize) {
        self.0.add(n as i64);
    }
    /// Lowers the level by `n`.
    #[inline]
    pub fn sub(&self, n: usize) {
        self.0.add(-(n as i64));
    }
    /// The current level (negative only if the books are wrong).
    pub fn get(&self) -> i64 {
        self.0.sum()
    }
}

impl Default for StatGauge {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use super::{StatCounter, StatGauge};

    #[test]
    fn sharded_stats_sum_every_thread_exactly() {
        static COUNTER: StatCounter = StatCounter::new();
        static GAUGE: StatGauge = StatGauge::new();
        // Miri interprets every add: fewer threads and updates there.
        let (threads, each) = if cfg!(miri) { (4, 50) } else { (20, 1000) };
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                crate::sync::thread::spawn(move || {
                    for _ in 0..each {
                        COUNTER.bump();
                        GAUGE.add(3);
                    }
                    GAUGE.sub(each);
                })
            })
            .collect();
        handles.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(COUNTER.get(), (threads * each) as u64);
        assert_eq!(GAUGE.get(), (threads * each * 2) as i64);
    }
}
