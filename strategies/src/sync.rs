//! The sync facade: the one module in the workspace that names `std::sync` or
//! `parking_lot`.
//!
//! Protocol: every lock, atomic, thread and channel the tree and the gates use
//! is imported from here, so a model checker can replace all of them at once.
//! This arm is the production one (std atomics, parking_lot locks); the loom
//! and shuttle arms are added by the verification work behind `--cfg crtc_loom`
//! and `--cfg crtc_shuttle`. The lock wrappers expose only `read`, `write`,
//! `try_read`, `try_write` and `lock`, the subset every backend can provide
//! without poisoning. Every retry or spin loop calls [`spin_loop`], which is a
//! yield under a checker so that loom and shuttle can schedule the writer the
//! loop is waiting for.

#![allow(clippy::disallowed_types)]

pub use std::sync::Arc;

/// Atomics and fences (std in production).
pub mod atomic {
    pub use std::sync::atomic::{
        fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
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

/// A condition variable paired with [`Mutex`].
#[derive(Debug, Default)]
pub struct Condvar(parking_lot::Condvar);

impl Condvar {
    /// A new condition variable.
    pub fn new() -> Self {
        Self(parking_lot::Condvar::new())
    }
    /// Releases the guard's mutex, waits for a notification, and re-acquires it.
    pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        self.0.wait(guard);
    }
    /// Wakes every waiter.
    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}
