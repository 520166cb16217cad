//! Reclamation: when memory that readers may still see is replaced, it is
//! retired, and freed only once every reader that could have loaded it left.
//!
//! Protocol. A reader pins ([`Reclaim::pin`]) before it loads any published
//! pointer and keeps the guard for the whole walk. A writer replaces a pointer
//! (Release), then hands the old value to [`Reclaim::defer`]; the backend runs
//! the deferred drop after every guard that existed at that time is gone.
//! [`AtomicBox`] packages the pattern for one published value. Nothing
//! reachable is retired: the writer unlinks first, then retires.
//!
//! Backends: [`EpochReclaim`] (crossbeam-epoch's global collector),
//! `SeizeReclaim` (feature `seize`: a global seize collector, Hyaline
//! reference-counted batches) and, in model-checker builds only,
//! `CheckerReclaim`, whose deferred work runs once no thread is pinned (the
//! checkers' tasks share one OS thread, so crossbeam's and seize's
//! per-thread state would be shared between them).
//!
//! Readers load retirable pointers through [`Reclaim::protect`]: Acquire for
//! crossbeam (its pin has a full fence), SeqCst for seize, whose `enter` pairs
//! only a light barrier with SeqCst pointer loads.

use crate::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use crate::sync::{Arc, Backoff};
use std::marker::PhantomData;

/// A safe-memory-reclamation backend. Methods are associated functions: the
/// backends keep global (per-process) state.
pub trait Reclaim: Send + Sync + 'static {
    /// Proof that the current thread is pinned.
    type Guard;
    /// The backend's name in reports.
    const NAME: &'static str;
    /// Pins the current thread until the guard drops.
    fn pin() -> Self::Guard;
    /// Runs `f` once no thread pinned before this call is still pinned.
    fn defer(guard: &Self::Guard, f: impl FnOnce() + Send + 'static);
    /// Pushes deferred work toward execution.
    fn flush(guard: &Self::Guard);

    /// Loads a published pointer that writers may replace and retire, with
    /// the ordering this backend's protection needs (at least Acquire, so the
    /// pointee's initialization is visible). The caller is pinned.
    #[inline]
    fn protect<T>(ptr: &AtomicPtr<T>) -> *mut T {
        // Acquire: pairs with the Release publication of the pointee.
        ptr.load(Ordering::Acquire)
    }

    /// Runs what deferred work can run now. The caller must not be pinned.
    fn collect() {
        for _ in 0..4 {
            Self::flush(&Self::pin());
        }
    }

    /// Blocks until every thread pinned before the call has unpinned. The
    /// caller must not be pinned.
    fn wait_for_pinned_threads() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        Self::defer(&Self::pin(), move || {
            // Release: pairs with the Acquire load below.
            flag.store(true, Ordering::Release)
        });
        let mut backoff = Backoff::new();
        // Acquire: whatever ran before the deferred function is visible after.
        while !done.load(Ordering::Acquire) {
            Self::flush(&Self::pin());
            backoff.snooze();
        }
    }
}

/// crossbeam-epoch's global collector.
#[derive(Debug, Default, Clone, Copy)]
pub struct EpochReclaim;

impl Reclaim for EpochReclaim {
    type Guard = crossbeam_epoch::Guard;
    const NAME: &'static str = "crossbeam-epoch";

    #[inline]
    fn pin() -> Self::Guard {
        crossbeam_epoch::pin()
    }

    fn defer(guard: &Self::Guard, f: impl FnOnce() + Send + 'static) {
        guard.defer(f);
    }

    fn flush(guard: &Self::Guard) {
        guard.flush();
    }
}

/// The global seize collector, created on first use. Global like
/// crossbeam's, so the backend's functions need no handle.
#[cfg(feature = "seize")]
fn seize_collector() -> &'static seize::Collector {
    static COLLECTOR: crate::sync::OnceLock<seize::Collector> = crate::sync::OnceLock::new();
    COLLECTOR.get_or_init(seize::Collector::new)
}

/// Runs a boxed deferred function; seize's reclaimer signature.
///
/// # Safety
/// `ptr` came from `Box::into_raw` of an `F` and is passed here exactly once.
#[cfg(feature = "seize")]
unsafe fn run_deferred<F: FnOnce()>(ptr: *mut F, _collector: &seize::Collector) {
    // SAFETY: guaranteed by the caller (seize runs each retired entry once).
    let f = unsafe { Box::from_raw(ptr) };
    f();
}

/// A global seize collector (Hyaline: retired batches are reference-counted
/// by the threads active when the batch is retired; the last one to leave
/// frees it, so a stalled idle thread blocks nothing).
#[cfg(feature = "seize")]
#[derive(Debug, Default, Clone, Copy)]
pub struct SeizeReclaim;

#[cfg(feature = "seize")]
impl SeizeReclaim {
    /// Runs `until` after pushing this thread's batch toward reclamation; a
    /// batch retires only once it holds at least one entry per active thread,
    /// so every round pads it with a no-op entry (no allocation: the closure
    /// is zero-sized). Gives up after `rounds` rounds. Caller not pinned.
    fn drain(rounds: Option<usize>, until: &dyn Fn() -> bool) {
        let mut round = 0;
        let mut backoff = Backoff::new();
        while !until() && rounds.is_none_or(|max| round < max) {
            let guard = Self::pin();
            Self::defer(&guard, || {});
            seize::Guard::flush(&guard);
            drop(guard);
            round += 1;
            backoff.snooze();
        }
    }
}

#[cfg(feature = "seize")]
impl Reclaim for SeizeReclaim {
    type Guard = seize::LocalGuard<'static>;
    const NAME: &'static str = "seize";

    #[inline]
    fn pin() -> Self::Guard {
        seize_collector().enter()
    }

    fn defer(guard: &Self::Guard, f: impl FnOnce() + Send + 'static) {
        let boxed = Box::into_raw(Box::new(f));
        // SAFETY: `boxed` is a fresh box run exactly once by `run_deferred`;
        // what `f` frees was unlinked by the caller before this call (the
        // trait's protocol), and `defer_retire` keeps it until `guard` drops.
        unsafe { seize::Guard::defer_retire(guard, boxed, run_deferred) };
    }

    fn flush(guard: &Self::Guard) {
        seize::Guard::flush(guard);
    }

    #[inline]
    fn protect<T>(ptr: &AtomicPtr<T>) -> *mut T {
        // SeqCst: seize's protected load; it joins the total order with the
        // light barrier of `enter` and the heavy barrier of batch retirement.
        ptr.load(Ordering::SeqCst)
    }

    fn collect() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        Self::defer(&Self::pin(), move || {
            // Release: pairs with the Acquire load below.
            flag.store(true, Ordering::Release)
        });
        // Acquire: the batch's other entries ran before the flag was set.
        Self::drain(Some(64), &|| done.load(Ordering::Acquire));
    }

    fn wait_for_pinned_threads() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        Self::defer(&Self::pin(), move || {
            // Release: pairs with the Acquire load below.
            flag.store(true, Ordering::Release)
        });
        // Acquire: whatever ran before the deferred function is visible after.
        Self::drain(None, &|| done.load(Ordering::Acquire));
    }
}

/// The reclaimer of the production build.
#[cfg(not(any(crtc_loom, crtc_shuttle)))]
pub type DefaultReclaim = EpochReclaim;

/// The reclaimer of model-checker builds.
#[cfg(any(crtc_loom, crtc_shuttle))]
pub type DefaultReclaim = CheckerReclaim;

/// A test-only reclaimer for the model checkers, whose modelled threads share
/// one OS thread (crossbeam-epoch's per-thread state would be shared too).
/// Deferred functions run once no thread at all is pinned: stronger than an
/// epoch, so it never frees early, and the model frees everything by its end.
#[cfg(any(crtc_loom, crtc_shuttle))]
#[derive(Debug, Default, Clone, Copy)]
pub struct CheckerReclaim;

/// Proof of a [`CheckerReclaim`] pin.
#[cfg(any(crtc_loom, crtc_shuttle))]
#[derive(Debug)]
pub struct CheckerGuard(());

#[cfg(any(crtc_loom, crtc_shuttle))]
impl Drop for CheckerGuard {
    fn drop(&mut self) {
        crate::sync::checker_state::pin_exit();
    }
}

#[cfg(any(crtc_loom, crtc_shuttle))]
impl Reclaim for CheckerReclaim {
    type Guard = CheckerGuard;
    const NAME: &'static str = "checker";

    fn pin() -> Self::Guard {
        crate::sync::checker_state::pin_enter();
        CheckerGuard(())
    }

    fn defer(_guard: &Self::Guard, f: impl FnOnce() + Send + 'static) {
        crate::sync::checker_state::defer(f);
    }

    fn flush(_guard: &Self::Guard) {}

    fn collect() {
        crate::sync::checker_state::run_if_unpinned();
    }

    fn wait_for_pinned_threads() {
        let mut backoff = Backoff::new();
        while crate::sync::checker_state::pinned() > 0 {
            backoff.snooze();
        }
        Self::collect();
    }
}

/// A raw pointer that may cross threads because its pointee is `Send` and
/// has exactly one owner (the deferred drop).
struct Retired<T>(*mut T);

// SAFETY: the pointer is the unique owner of a `Box<T>` with `T: Send`; the
// deferred function is the only code that uses it.
unsafe impl<T: Send> Send for Retired<T> {}

impl<T> Retired<T> {
    fn free(self) {
        // SAFETY: the pointer came from `Box::into_raw` and was unlinked before
        // it was retired, so this is its only owner.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

/// A heap value published through one atomic pointer. Readers load it under
/// a guard; writers replace it and retire the old value.
pub struct AtomicBox<T> {
    ptr: AtomicPtr<T>,
    owns: PhantomData<Box<T>>,
}

impl<T: std::fmt::Debug> std::fmt::Debug for AtomicBox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: the pointer is always a live box while `self` exists, and a
        // shared borrow of `self` keeps it from being dropped.
        f.debug_tuple("AtomicBox")
            .field(unsafe { &*self.ptr.load(Ordering::Acquire) })
            .finish()
    }
}

// SAFETY: the box is shared between threads like an `Arc<T>`: readers get `&T`
// (needs `T: Sync`), and retired values are dropped elsewhere (needs `T: Send`).
unsafe impl<T: Send + Sync> Send for AtomicBox<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for AtomicBox<T> {}

impl<T: Send + Sync + 'static> AtomicBox<T> {
    /// Publishes `value`.
    pub fn new(value: T) -> Self {
        Self {
            ptr: AtomicPtr::new(Box::into_raw(Box::new(value))),
            owns: PhantomData,
        }
    }

    /// The current value, valid while the guard lives.
    #[inline]
    pub fn load<'g, R: Reclaim>(&'g self, _guard: &'g R::Guard) -> &'g T {
        // At least Acquire (see `Reclaim::protect`): pairs with the Release
        // publication, so the value's initialization is visible.
        let ptr = R::protect(&self.ptr);
        // SAFETY: the pointer is a live box; a replaced box is retired through
        // `R` after the guard's pin, so it outlives `'g`.
        unsafe { &*ptr }
    }

    /// Replaces the value if it is still `current` (pointer equality). On
    /// success the old value is retired; on failure `new` is returned.
    pub fn compare_exchange<R: Reclaim>(
        &self,
        current: &T,
        new: Box<T>,
        guard: &R::Guard,
    ) -> Result<(), Box<T>> {
        let new = Box::into_raw(new);
        // AcqRel: Release publishes `new`'s initialization; Acquire orders the
        // retire after every reader-visible load of the old value.
        match self.ptr.compare_exchange(
            current as *const T as *mut T,
            new,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(old) => {
                let old = Retired(old);
                R::defer(guard, move || old.free());
                Ok(())
            }
            // SAFETY: `new` came from `Box::into_raw` above and was not published.
            Err(_) => Err(unsafe { Box::from_raw(new) }),
        }
    }

    /// Replaces the value and retires the old one.
    pub fn store<R: Reclaim>(&self, new: T, guard: &R::Guard) {
        let old = Retired(self.swap_raw(new));
        R::defer(guard, move || old.free());
    }

    /// Replaces the value and returns the old one *without* retiring it: the
    /// caller moves it to a new owner that keeps it published (a split hands
    /// the child map to the suffix), so readers that loaded it keep a live value.
    pub fn replace_and_transfer(&self, new: T) -> AtomicBox<T> {
        AtomicBox {
            ptr: AtomicPtr::new(self.swap_raw(new)),
            owns: PhantomData,
        }
    }

    fn swap_raw(&self, new: T) -> *mut T {
        // AcqRel: Release publishes `new`; Acquire orders our later use of the
        // old pointer after its publication.
        self.ptr
            .swap(Box::into_raw(Box::new(new)), Ordering::AcqRel)
    }

    /// Unique access (no reader can exist).
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` proves no other reference to the box exists.
        unsafe { &mut *self.ptr.load(Ordering::Relaxed) }
    }
}

impl<T> Drop for AtomicBox<T> {
    fn drop(&mut self) {
        // SAFETY: dropping the owner means nothing can reach the value any
        // more: retired values are dropped through the reclaimer, and a box is
        // dropped only when its owner is unreachable.
        drop(unsafe { Box::from_raw(self.ptr.load(Ordering::Relaxed)) });
    }
}

#[cfg(all(test, not(any(crtc_loom, crtc_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn replaced_values_are_freed_after_the_pin_ends() {
        let value = Arc::new(());
        let boxed = AtomicBox::new(Arc::clone(&value));
        {
            let guard = EpochReclaim::pin();
            let seen = boxed.load::<EpochReclaim>(&guard);
            boxed.store::<EpochReclaim>(Arc::new(()), &guard);
            assert_eq!(Arc::strong_count(seen), 2, "still alive under the pin");
        }
        EpochReclaim::wait_for_pinned_threads();
        for _ in 0..1000 {
            if Arc::strong_count(&value) == 1 {
                break;
            }
            EpochReclaim::flush(&EpochReclaim::pin());
        }
        assert_eq!(Arc::strong_count(&value), 1);
    }
}
