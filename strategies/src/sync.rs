//! The sync facade: the one module in the workspace that names `std::sync`,
//! `parking_lot`, `loom` or `shuttle` (`clippy.toml` enforces it; this
//! module alone allows the lint).
//!
//! Protocol: every lock, atomic, thread and channel the tree and the gates use
//! is imported from here, so a model checker can replace all of them at once.
//! The production arm (std atomics and threads, parking_lot locks) and the
//! checker arm (`crtc_checker`: loom under `--cfg crtc_loom`, shuttle under
//! `--cfg crtc_shuttle`, their locks, threads and channels made by one
//! macro) export the same names, none in one arm only; the checkers are
//! target-cfg dependencies, so a normal build never compiles them. The lock wrappers expose only `read`, `write`,
//! `try_read`, `try_write` and `lock`, the subset every backend can provide
//! without poisoning. Every retry or spin loop calls [`spin_loop`] (a pause)
//! or, when it waits on another thread, [`Backoff::snooze`] (pauses, then OS
//! yields); both are a yield under a checker so that loom and shuttle can
//! schedule the writer the loop is waiting for.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

pub use arm::*;

/// The production arm: std atomics and threads, parking_lot locks.
#[cfg(not(crtc_checker))]
mod arm {
    pub use std::sync::Arc;
    /// One-time process-wide initialization (a global reclaimer's collector).
    pub use std::sync::OnceLock;

    /// Atomics and fences (std in production).
    pub mod atomic {
        pub use std::sync::atomic::{
            fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8,
            AtomicUsize, Ordering,
        };
    }

    /// Threads (std in production), and their thread-locals.
    pub mod thread {
        pub use std::thread::{current, sleep, spawn, yield_now, Builder, JoinHandle};
        pub use std::thread_local;
    }

    /// Multi-producer single-consumer channels used by the indexer's lanes.
    pub mod mpsc {
        pub use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
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
#[cfg(crtc_checker)]
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

        /// Threads of the checker, and thread-locals per modelled thread
        /// (their destructors run when the modelled thread ends).
        pub mod thread {
            pub use std::thread::sleep;
            pub use $krate::thread::{current, spawn, yield_now, Builder, JoinHandle};
            pub use $krate::thread_local;
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
            fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8,
            AtomicUsize, Ordering,
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
            fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8,
            AtomicUsize, Ordering,
        };
    }

    checker_locks!(shuttle);
}

/// std atomics (and std's `Arc` to share them) that no checker models, in
/// every arm: for state that synchronizes nothing under test (statistics
/// counters, a model's progress counters) or that models the harness rather
/// than the code (the checkers' mutant switch). The checker does not explore
/// their interleavings.
pub mod unmodelled {
    pub use std::sync::atomic::{AtomicI64, AtomicU8, AtomicUsize, Ordering};
    pub use std::sync::Arc;
}

/// A cell of plain (non-atomic) data shared between threads by a
/// publication protocol: written only before it is published (or by the one
/// writer that owns it, at positions no reader may read) and read only after
/// an Acquire load that synchronizes with the publishing Release. Every user
/// states that protocol at its `with`/`with_mut` calls.
///
/// In production and under shuttle (whose atomics are sequentially
/// consistent) it is `core::cell::UnsafeCell`, zero-cost. Under loom it is
/// loom's tracked cell: every access is checked against the happens-before
/// order loom explores, so a read of plain data whose write is not ordered
/// before it (a Relaxed publication, a write after the publication) fails
/// the model with loom's "Causality violation" (the `race-free` property).
/// Accesses are closures, as loom's are: a reference taken out of `with` is
/// checked when it is taken, not at each later use.
#[cfg(not(crtc_loom))]
#[repr(transparent)]
pub struct PlainCell<T>(core::cell::UnsafeCell<T>);

/// See the production definition.
#[cfg(crtc_loom)]
pub struct PlainCell<T>(loom::cell::UnsafeCell<T>);

// SAFETY: the cell owns its value; sending it sends the value.
unsafe impl<T: Send> Send for PlainCell<T> {}
// SAFETY: shared access goes through `with`/`with_mut`, whose callers uphold
// the publication protocol above (no write concurrent with another access),
// so sharing the cell shares the value as `&T` does (`T: Sync`) and moves it
// between threads only as `T: Send` allows.
unsafe impl<T: Send + Sync> Sync for PlainCell<T> {}

impl<T> std::fmt::Debug for PlainCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The value is not read: a debug print is no point of the protocol.
        f.write_str("PlainCell { .. }")
    }
}

impl<T> PlainCell<T> {
    /// A cell holding `value` (under loom, a write by the creating thread).
    #[inline]
    pub fn new(value: T) -> Self {
        #[cfg(not(crtc_loom))]
        return Self(core::cell::UnsafeCell::new(value));
        #[cfg(crtc_loom)]
        return Self(loom::cell::UnsafeCell::new(value));
    }

    /// Runs `f` on a pointer for reading (a tracked read under loom). The
    /// caller guarantees no write runs concurrently.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(crtc_loom))]
        return f(self.0.get());
        #[cfg(crtc_loom)]
        return self.0.with(f);
    }

    /// Runs `f` on a pointer for writing (a tracked write under loom). The
    /// caller guarantees no other access runs concurrently.
    #[inline]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(crtc_loom))]
        return f(self.0.get());
        #[cfg(crtc_loom)]
        return self.0.with_mut(f);
    }

    /// The value, through a unique borrow (no other access can exist).
    #[inline]
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` proves no other access to the cell exists.
        self.with_mut(|value| unsafe { &mut *value })
    }

    /// The value, out of the cell.
    #[inline]
    pub fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

/// A value set at most once and then shared, for state under test (the slot
/// registry's owner segments). Protocol: a reader sees either nothing or the
/// whole value; [`SetOnce::get`] is one Acquire load that pairs with the
/// publishing store, so everything written into the value before it was set
/// is visible to the reader that sees it.
///
/// In production it is std's `OnceLock`, whose `get` is that Acquire load.
/// Under a checker it is a modelled `AtomicPtr` to a boxed value, so the
/// publication is explored like every other atomic (std's `OnceLock` is
/// invisible to loom and shuttle). There, racing initializers each build a
/// value and a compare-exchange publishes one; std's blocks the others
/// instead. Callers that need a single construction serialize it (the slot
/// registry initializes under its mutex), so the two agree on their uses.
#[cfg(not(crtc_checker))]
#[derive(Debug, Default)]
pub struct SetOnce<T>(std::sync::OnceLock<T>);

#[cfg(not(crtc_checker))]
impl<T> SetOnce<T> {
    /// An unset cell.
    pub fn new() -> Self {
        Self(std::sync::OnceLock::new())
    }

    /// The value, once set.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        self.0.get()
    }

    /// The value, set by `init` first if nothing is.
    #[inline]
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(init)
    }
}

/// See the production definition.
#[cfg(crtc_checker)]
pub struct SetOnce<T> {
    value: atomic::AtomicPtr<T>,
    /// Owns a `T` (drop check), without the auto traits a raw pointer
    /// withholds; `Send` and `Sync` are stated below.
    _owns: std::marker::PhantomData<Box<T>>,
}

// SAFETY: the cell owns its boxed value; sending the cell sends the value.
#[cfg(crtc_checker)]
unsafe impl<T: Send> Send for SetOnce<T> {}
// SAFETY: shared access hands out `&T` (needs `T: Sync`), and `get_or_init`
// through `&self` may build the value on one thread and drop it on another
// (needs `T: Send`), as std's `OnceLock` requires.
#[cfg(crtc_checker)]
unsafe impl<T: Send + Sync> Sync for SetOnce<T> {}

#[cfg(crtc_checker)]
impl<T> std::fmt::Debug for SetOnce<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not a point of the protocol: the value is not read.
        f.write_str("SetOnce { .. }")
    }
}

#[cfg(crtc_checker)]
impl<T> Default for SetOnce<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(crtc_checker)]
impl<T> SetOnce<T> {
    /// An unset cell.
    pub fn new() -> Self {
        Self {
            value: atomic::AtomicPtr::new(std::ptr::null_mut()),
            _owns: std::marker::PhantomData,
        }
    }

    /// The value, once set.
    #[inline]
    pub fn get(&self) -> Option<&T> {
        // Acquire: pairs with the Release of the publishing compare-exchange,
        // so the value's contents are visible.
        let value = self.value.load(atomic::Ordering::Acquire);
        // SAFETY: a non-null pointer is a published `Box::into_raw`, freed
        // only by `drop`, which needs `&mut self`; the borrow of `self`
        // bounds the reference.
        unsafe { value.as_ref() }
    }

    /// The value, set by `init` first if nothing is.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        if let Some(value) = self.get() {
            return value;
        }
        let built = Box::into_raw(Box::new(init()));
        let null = std::ptr::null_mut();
        // Release on success publishes the built value's contents; Acquire
        // on failure sees the winner's.
        match self.value.compare_exchange(
            null,
            built,
            atomic::Ordering::Release,
            atomic::Ordering::Acquire,
        ) {
            // SAFETY: `built` is now the published value (see `get`).
            Ok(_) => unsafe { &*built },
            Err(winner) => {
                // SAFETY: `built` lost the race, so no one else saw it; it is
                // ours to free, once.
                drop(unsafe { Box::from_raw(built) });
                // SAFETY: `winner` is the published value (see `get`).
                unsafe { &*winner }
            }
        }
    }
}

#[cfg(crtc_checker)]
impl<T> Drop for SetOnce<T> {
    fn drop(&mut self) {
        // Relaxed: `&mut self` proves no other access; the value's
        // publication happened before whatever handed us the cell.
        let value = self.value.load(atomic::Ordering::Relaxed);
        if !value.is_null() {
            // SAFETY: the published `Box::into_raw`, freed here once.
            drop(unsafe { Box::from_raw(value) });
        }
    }
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
    /// Rounds of pauses (1, 2, 4, ... 2^SPIN_ROUNDS) before the first yield;
    /// none under a checker, where a pause is a yield already.
    const SPIN_ROUNDS: u32 = if cfg!(crtc_checker) { 0 } else { 6 };

    /// A fresh backoff: the first snooze is one pause.
    pub fn new() -> Self {
        Self::default()
    }

    /// Waits a little, longer each call (under a checker: one yield).
    #[inline]
    // Under a checker SPIN_ROUNDS is 0, so the bound reads `step <= 0`.
    #[allow(clippy::absurd_extreme_comparisons)]
    pub fn snooze(&mut self) {
        if self.step <= Self::SPIN_ROUNDS {
            (0..1u32 << self.step).for_each(|_| spin_loop());
            self.step += 1;
        } else {
            thread::yield_now();
        }
    }
}

#[cfg(all(crtc_loom, crtc_shuttle))]
compile_error!("`--cfg crtc_loom` and `--cfg crtc_shuttle` are mutually exclusive");

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    #[test]
    fn backoff_pauses_then_keeps_yielding() {
        let mut backoff = super::Backoff::new();
        (0..20).for_each(|_| backoff.snooze());
        assert_eq!(backoff.step, super::Backoff::SPIN_ROUNDS + 1);
    }
}
