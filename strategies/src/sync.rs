//! The sync facade: the one module in the workspace that names `std::sync` or
//! `parking_lot`.
//!
//! Protocol: every lock, atomic, thread and channel the tree and the gates use
//! is imported from here, so a model checker can replace all of them at once.
//! Three arms export the same names: production (std atomics and threads,
//! parking_lot locks), loom (`--cfg crtc_loom`) and shuttle
//! (`--cfg crtc_shuttle`); the checkers are target-cfg dependencies, so a
//! normal build never compiles them. The lock wrappers expose only `read`, `write`,
//! `try_read`, `try_write` and `lock`, the subset every backend can provide
//! without poisoning. Every retry or spin loop calls [`spin_loop`] (a pause)
//! or, when it waits on another thread, [`Backoff::snooze`] (pauses, then OS
//! yields); both are a yield under a checker so that loom and shuttle can
//! schedule the writer the loop is waiting for.

#![allow(clippy::disallowed_types)]

pub use arm::*;

/// The production arm: std atomics and threads, parking_lot locks.
#[cfg(not(any(crtc_loom, crtc_shuttle)))]
mod arm {
    pub use std::sync::Arc;
    /// One-time process-wide initialization (a global reclaimer's collector).
    pub use std::sync::OnceLock;

    /// Atomics and fences (std in production).
    pub mod atomic {
        pub use std::sync::atomic::{
            fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
            Ordering,
        };
    }

    /// Threads (std in production).
    pub mod thread {
        pub use std::thread::{current, sleep, spawn, yield_now, Builder, JoinHandle};
    }

    /// Multi-producer single-consumer channels used by the indexer's lanes.
    pub mod mpsc {
        pub use std::sync::mpsc::{channel, Receiver, RecvError, SendError, Sender, TryRecvError};
    }

    /// Hint for a retry or spin loop: a CPU pause in production, a yield under a
    /// model checker.
    #[inline]
    pub fn spin_loop() {
        std::hint::spin_loop();
    }

    /// A reader-writer lock with the non-poisoning API every backend shares.
    #[derive(Debug, Default)]
    pub struct RwLock<T>(parking_lot::RwLock<T>);

    /// Shared guard of [`RwLock`].
    pub type RwLockReadGuard<'a, T> = parking_lot::RwLockReadGuard<'a, T>;
    /// Exclusive guard of [`RwLock`].
    pub type RwLockWriteGuard<'a, T> = parking_lot::RwLockWriteGuard<'a, T>;

    impl<T> RwLock<T> {
        /// A new unlocked lock around `value`.
        pub fn new(value: T) -> Self {
            Self(parking_lot::RwLock::new(value))
        }
        /// Blocks until the lock is held shared.
        #[inline]
        pub fn read(&self) -> RwLockReadGuard<'_, T> {
            self.0.read()
        }
        /// Blocks until the lock is held exclusively.
        #[inline]
        pub fn write(&self) -> RwLockWriteGuard<'_, T> {
            self.0.write()
        }
        /// Shared access if no writer holds or waits for the lock.
        #[inline]
        pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
            self.0.try_read()
        }
        /// Exclusive access if nobody holds the lock.
        #[inline]
        pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
            self.0.try_write()
        }
        /// Direct access through a unique borrow (no locking needed).
        #[inline]
        pub fn get_mut(&mut self) -> &mut T {
            self.0.get_mut()
        }
        /// Consumes the lock and returns the value.
        pub fn into_inner(self) -> T {
            self.0.into_inner()
        }
    }

    /// A mutual-exclusion lock with the non-poisoning API every backend shares.
    #[derive(Debug, Default)]
    pub struct Mutex<T>(parking_lot::Mutex<T>);

    /// Guard of [`Mutex`].
    pub type MutexGuard<'a, T> = parking_lot::MutexGuard<'a, T>;

    impl<T> Mutex<T> {
        /// A new unlocked mutex around `value`.
        pub fn new(value: T) -> Self {
            Self(parking_lot::Mutex::new(value))
        }
        /// Blocks until the mutex is held.
        #[inline]
        pub fn lock(&self) -> MutexGuard<'_, T> {
            self.0.lock()
        }
        /// The mutex if it is free.
        #[inline]
        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            self.0.try_lock()
        }
        /// Direct access through a unique borrow.
        #[inline]
        pub fn get_mut(&mut self) -> &mut T {
            self.0.get_mut()
        }
    }
}

/// Generates the lock wrappers of a model checker's arm: the checker's locks
/// return `LockResult`s, which never carry poison here (a panicking test
/// ends the model), so the wrappers unwrap them into the shared API.
#[cfg(any(crtc_loom, crtc_shuttle))]
macro_rules! checker_locks {
    ($krate:ident) => {
        /// A reader-writer lock with the non-poisoning API every backend shares.
        pub struct RwLock<T>($krate::sync::RwLock<T>);
        /// Shared guard of [`RwLock`].
        pub type RwLockReadGuard<'a, T> = $krate::sync::RwLockReadGuard<'a, T>;
        /// Exclusive guard of [`RwLock`].
        pub type RwLockWriteGuard<'a, T> = $krate::sync::RwLockWriteGuard<'a, T>;

        impl<T> std::fmt::Debug for RwLock<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("RwLock { .. }")
            }
        }

        impl<T: Default> Default for RwLock<T> {
            fn default() -> Self {
                Self::new(T::default())
            }
        }

        impl<T> RwLock<T> {
            /// A new unlocked lock around `value`.
            pub fn new(value: T) -> Self {
                Self($krate::sync::RwLock::new(value))
            }
            /// Blocks until the lock is held shared.
            pub fn read(&self) -> RwLockReadGuard<'_, T> {
                self.0.read().unwrap_or_else(|e| e.into_inner())
            }
            /// Blocks until the lock is held exclusively.
            pub fn write(&self) -> RwLockWriteGuard<'_, T> {
                self.0.write().unwrap_or_else(|e| e.into_inner())
            }
            /// Shared access if no writer holds the lock.
            pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
                self.0.try_read().ok()
            }
            /// Exclusive access if nobody holds the lock.
            pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
                self.0.try_write().ok()
            }
            /// Direct access through a unique borrow.
            pub fn get_mut(&mut self) -> &mut T {
                self.0.get_mut().unwrap_or_else(|e| e.into_inner())
            }
            /// Consumes the lock and returns the value.
            pub fn into_inner(self) -> T {
                self.0.into_inner().unwrap_or_else(|e| e.into_inner())
            }
        }

        /// A mutual-exclusion lock with the non-poisoning API every backend shares.
        pub struct Mutex<T>($krate::sync::Mutex<T>);
        /// Guard of [`Mutex`].
        pub type MutexGuard<'a, T> = $krate::sync::MutexGuard<'a, T>;

        impl<T> std::fmt::Debug for Mutex<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("Mutex { .. }")
            }
        }

        impl<T: Default> Default for Mutex<T> {
            fn default() -> Self {
                Self::new(T::default())
            }
        }

        impl<T> Mutex<T> {
            /// A new unlocked mutex around `value`.
            pub fn new(value: T) -> Self {
                Self($krate::sync::Mutex::new(value))
            }
            /// Blocks until the mutex is held.
            pub fn lock(&self) -> MutexGuard<'_, T> {
                self.0.lock().unwrap_or_else(|e| e.into_inner())
            }
            /// The mutex if it is free.
            pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
                self.0.try_lock().ok()
            }
            /// Direct access through a unique borrow.
            pub fn get_mut(&mut self) -> &mut T {
                self.0.get_mut().unwrap_or_else(|e| e.into_inner())
            }
        }

        /// A yield: lets the checker schedule the thread a loop waits for.
        #[inline]
        pub fn spin_loop() {
            $krate::thread::yield_now();
        }

        /// Threads of the checker.
        pub mod thread {
            pub use std::thread::sleep;
            pub use $krate::thread::{current, spawn, yield_now, Builder, JoinHandle};
        }

        /// Channels of the checker.
        pub mod mpsc {
            pub use std::sync::mpsc::TryRecvError;
            pub use $krate::sync::mpsc::{channel, Receiver, Sender};
        }
    };
}

/// The loom arm (`--cfg crtc_loom`): every atomic, lock and thread is
/// modelled, so loom explores their interleavings and weak-memory behaviours.
#[cfg(crtc_loom)]
mod arm {
    pub use loom::sync::Arc;
    /// One-time process-wide initialization. std's, not modelled: it guards
    /// process-global harness state (a real reclaimer's collector), never
    /// state under test.
    pub use std::sync::OnceLock;

    /// Atomics and fences (loom).
    pub mod atomic {
        pub use loom::sync::atomic::{
            fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
            Ordering,
        };
    }

    checker_locks!(loom);
}

/// The shuttle arm (`--cfg crtc_shuttle`): locks and threads are scheduled by
/// shuttle; atomics are sequentially consistent under it.
#[cfg(crtc_shuttle)]
mod arm {
    pub use shuttle::sync::Arc;
    /// One-time process-wide initialization. std's, not modelled: it guards
    /// process-global harness state (a real reclaimer's collector), never
    /// state under test.
    pub use std::sync::OnceLock;

    /// Atomics and fences (shuttle).
    pub mod atomic {
        pub use shuttle::sync::atomic::{
            fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
            Ordering,
        };
    }

    checker_locks!(shuttle);
}

/// Backoff for a loop that waits on another thread (a lock word, a grace
/// period, a released slot): a few rounds of CPU pauses that double each
/// time, then a yield to the OS scheduler, so a waiter never burns its core
/// while the thread it waits for is preempted. Under a checker every snooze
/// is one [`spin_loop`], a yield the checker schedules.
#[derive(Debug, Default)]
pub struct Backoff {
    step: u32,
}

impl Backoff {
    /// Rounds of pauses (1, 2, 4, ... 2^SPIN_ROUNDS) before the first yield.
    #[cfg(not(any(crtc_loom, crtc_shuttle)))]
    const SPIN_ROUNDS: u32 = 6;

    /// A fresh backoff: the first snooze is one pause.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits a little, longer each call.
    #[cfg(not(any(crtc_loom, crtc_shuttle)))]
    #[inline]
    pub fn snooze(&mut self) {
        if self.step <= Self::SPIN_ROUNDS {
            (0..1u32 << self.step).for_each(|_| spin_loop());
            self.step += 1;
        } else {
            thread::yield_now();
        }
    }

    /// Yields to the checker.
    #[cfg(any(crtc_loom, crtc_shuttle))]
    #[inline]
    pub fn snooze(&mut self) {
        self.step += 1;
        spin_loop();
    }
}

#[cfg(all(crtc_loom, crtc_shuttle))]
compile_error!("`--cfg crtc_loom` and `--cfg crtc_shuttle` are mutually exclusive");

/// State of the model checkers' test reclaimer (per OS thread) and mutant
/// switch (per process). Loom and shuttle run every modelled thread of one
/// model on the OS thread that explores it, one at a time, so the
/// reclaimer's pin count and deferred work are thread-locals: each test
/// thread of a parallel test run has its own, and one model never runs (or
/// counts the pins of) another model's deferred frees, which would touch
/// that execution's checker objects from the wrong execution (loom: "Arc
/// leaked", then SIGSEGV). Plain std primitives here are never contended and
/// stay invisible to the checker (they model the harness, not the code under
/// test). The mutant is process-wide: a negative control selects it in a
/// child process that runs one model.
#[cfg(any(crtc_loom, crtc_shuttle))]
pub mod checker_state {
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::{AtomicU8, Ordering};

    type Deferred = Box<dyn FnOnce() + Send>;

    thread_local! {
        static PINNED: Cell<usize> = const { Cell::new(0) };
        static DEFERRED: RefCell<Vec<Deferred>> = const { RefCell::new(Vec::new()) };
    }
    static MUTANT: AtomicU8 = AtomicU8::new(0);

    /// Records that a thread pinned.
    pub fn pin_enter() {
        PINNED.with(|p| p.set(p.get() + 1));
    }

    /// Records that a thread unpinned.
    pub fn pin_exit() {
        PINNED.with(|p| p.set(p.get() - 1));
    }

    /// Number of pinned threads.
    pub fn pinned() -> usize {
        PINNED.with(Cell::get)
    }

    /// Queues `f` until no thread is pinned.
    pub fn defer(f: impl FnOnce() + Send + 'static) {
        DEFERRED.with(|d| d.borrow_mut().push(Box::new(f)));
    }

    /// Runs every queued function if no thread is pinned.
    pub fn run_if_unpinned() {
        while pinned() == 0 {
            let batch = DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()));
            if batch.is_empty() {
                return;
            }
            batch.into_iter().for_each(|f| f());
        }
    }

    /// Selects mutant `id` (0 = none) for every gate that has one.
    pub fn set_mutant(id: u8) {
        // SeqCst: set by the test before the model runs.
        MUTANT.store(id, Ordering::SeqCst);
    }

    /// The selected mutant.
    pub fn mutant() -> u8 {
        // SeqCst: as above.
        MUTANT.load(Ordering::SeqCst)
    }
}

/// Process-wide statistics counters (restarts, fallbacks, live and retired
/// bytes). They are plain std atomics in every arm: they record what happened
/// and synchronize nothing, so the checkers need not see them. Each is
/// sharded: a thread adds to its own cache-padded shard (chosen once per
/// thread), so writers on different threads never contend on a counter's
/// cache line; a read sums the shards. Under a checker every modelled thread
/// runs on one OS thread, so one shard takes every update and reads stay
/// exact.
pub mod stats {
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

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
}

#[cfg(all(test, not(any(crtc_loom, crtc_shuttle))))]
mod tests {
    use super::stats::{StatCounter, StatGauge};

    #[test]
    fn sharded_stats_sum_every_thread_exactly() {
        static COUNTER: StatCounter = StatCounter::new();
        static GAUGE: StatGauge = StatGauge::new();
        let threads: Vec<_> = (0..20)
            .map(|_| {
                std::thread::spawn(|| {
                    for _ in 0..1000 {
                        COUNTER.bump();
                        GAUGE.add(3);
                    }
                    GAUGE.sub(1000);
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(COUNTER.get(), 20_000);
        assert_eq!(GAUGE.get(), 20 * 2000);
    }

    #[test]
    fn backoff_pauses_then_keeps_yielding() {
        let mut backoff = super::Backoff::new();
        (0..20).for_each(|_| backoff.snooze());
        assert_eq!(backoff.step, super::Backoff::SPIN_ROUNDS + 1);
    }
}
