//! Reclamation: when memory that readers may still see is replaced, it is
//! retired, and freed only once every reader that could have loaded it left.
//!
//! Protocol. A reader pins ([`Reclaim::pin`]) before it loads any published
//! pointer and keeps the guard for the whole walk. A writer replaces a pointer
//! (Release), then hands the old value to [`Reclaim::defer`]; the backend runs
//! the deferred drop after every guard that existed at that time is gone.
//! [`AtomicBox`] packages the pattern for one published value and is tied to
//! one reclaimer by its type, so the guard a reader loads under is a guard
//! of the reclaimer that retires. Nothing reachable is retired: the writer
//! unlinks first, then retires.
//!
//! Backends: [`EpochReclaim`] (crossbeam-epoch's global collector),
//! `SeizeReclaim` (feature `seize`: a global seize collector, Hyaline
//! reference-counted batches) and, in model-checker builds only,
//! `CheckerReclaim`, whose deferred work runs once no thread is pinned (the
//! checkers' tasks share one OS thread, so crossbeam's and seize's
//! per-thread state would be shared between them). Each backend's guard is
//! a type only its `pin` can make, so no guard of another collector can
//! stand in for a pin of this one.
//!
//! Readers load retirable pointers through [`Reclaim::protect`]: Acquire for
//! crossbeam (its pin has a full fence), SeqCst for seize, whose `enter` pairs
//! only a light barrier with SeqCst pointer loads.

use crate::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use crate::sync::{Arc, Backoff};
use std::marker::PhantomData;

/// A safe-memory-reclamation backend. Methods are associated functions: the
/// backends keep global (per-process) state.
///
/// # Safety
///
/// Code that frees memory readers may hold ([`AtomicBox`], the gates) relies
/// on every implementation to guarantee:
///
/// 1. A `Guard` is proof of a pin of this backend: the only way to get one
///    is [`Reclaim::pin`], and the pin lasts until the guard drops.
/// 2. [`Reclaim::defer`] runs its function at most once, and never before
///    every guard that existed (on any thread) when `defer` was called has
///    dropped.
/// 3. A guard made after `defer` was called protects nothing the deferring
///    thread unlinked before the call: loads through [`Reclaim::protect`]
///    under it observe those unlinking stores (the pin and the defer are
///    ordered by the backend's own fences).
/// 4. [`Reclaim::wait_for_pinned_threads`] returns only after every guard
///    that existed when it was called has dropped.
pub unsafe trait Reclaim: Send + Sync + 'static {
    /// Proof that the current thread is pinned.
    type Guard;
    /// The backend's name in reports.
    const NAME: &'static str;
    /// The name of the epoch gate built over this backend
    /// ([`ShapeGate::NAME`](crate::ShapeGate::NAME) of `EpochGate<Self>`):
    /// the two epoch gates share their code, so the reclaimer tells them
    /// apart in reports and bench ids.
    const EPOCH_GATE_NAME: &'static str = "epoch";
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

    /// Notes that the pinned caller follows `ptr`, an object it reached
    /// without [`Reclaim::protect`] (a child node behind an `Arc` held by a
    /// child set it loaded), which must stay allocated until the caller
    /// unpins. Real backends have nothing to do; the checkers' grace
    /// reclaimer watches the object, so a free of it outside the reclaimer
    /// while the caller is pinned fails the model.
    #[inline]
    fn borrowed<T>(_ptr: *const T) {}

    /// Runs what deferred work can run now. A pinned caller only delays it.
    fn collect() {
        for _ in 0..4 {
            Self::flush(&Self::pin());
        }
    }

    /// Blocks until every thread pinned before the call has unpinned. A
    /// pinned caller would wait for itself, so callers are never pinned.
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

/// A pin of crossbeam-epoch's global collector (only
/// [`EpochReclaim::pin`] makes one: a guard of another collector protects
/// nothing this one frees).
#[derive(Debug)]
pub struct EpochGuard(crossbeam_epoch::Guard);

// SAFETY: (1) `EpochGuard`'s field is private and only `pin` builds it, from
// the global collector's pin; (2) and (3) are crossbeam-epoch's guarantees
// for `Guard::defer` on a pinned guard (the epoch advances only when every
// pinned participant has seen it; pin issues a SeqCst fence); (4) the
// trait's default waits for a function deferred after the call to run.
unsafe impl Reclaim for EpochReclaim {
    type Guard = EpochGuard;
    const NAME: &'static str = "crossbeam-epoch";
    const EPOCH_GATE_NAME: &'static str = "epoch-crossbeam";

    #[inline]
    fn pin() -> Self::Guard {
        EpochGuard(crossbeam_epoch::pin())
    }

    fn defer(guard: &Self::Guard, f: impl FnOnce() + Send + 'static) {
        guard.0.defer(f);
    }

    fn flush(guard: &Self::Guard) {
        guard.0.flush();
    }
}

/// Retired objects a thread gathers before seize hands them over as one
/// batch (seize's default is 32). Every batch costs a pass over the active
/// threads and the last thread to leave frees the whole batch, so small
/// batches cost CPU on the lane and bursts of frees on readers: with
/// `crtc compare`, 128 cut the epoch-seize rows' lane CPU and their readers'
/// p99 against the default, and a smaller batch raised the lane CPU (the
/// runs: `papers/choices.md`). The cost is up to 128 retired objects per
/// thread held a little longer.
#[cfg(feature = "seize")]
const SEIZE_BATCH: usize = 128;

/// The global seize collector, created on first use. Global like
/// crossbeam's, so the backend's functions need no handle.
#[cfg(feature = "seize")]
fn seize_collector() -> &'static seize::Collector {
    static COLLECTOR: crate::sync::OnceLock<seize::Collector> = crate::sync::OnceLock::new();
    COLLECTOR.get_or_init(|| seize::Collector::new().batch_size(SEIZE_BATCH))
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

/// A pin of the global seize collector (only [`SeizeReclaim::pin`] makes
/// one).
#[cfg(feature = "seize")]
pub struct SeizeGuard(seize::LocalGuard<'static>);

#[cfg(feature = "seize")]
impl std::fmt::Debug for SeizeGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeizeGuard { .. }")
    }
}

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
            Self::flush(&guard);
            drop(guard);
            round += 1;
            backoff.snooze();
        }
    }
}

// SAFETY: (1) `SeizeGuard`'s field is private and only `pin` builds it, by
// entering the global collector; (2) and (3) are seize's guarantees for
// `defer_retire` (a batch is freed once every thread active at its
// retirement has left; `enter`'s light barrier pairs with the SeqCst loads
// of `protect` below); (4) `wait_for_pinned_threads` drains until an entry
// retired after the call has run.
#[cfg(feature = "seize")]
unsafe impl Reclaim for SeizeReclaim {
    type Guard = SeizeGuard;
    const NAME: &'static str = "seize";
    const EPOCH_GATE_NAME: &'static str = "epoch-seize";

    #[inline]
    fn pin() -> Self::Guard {
        SeizeGuard(seize_collector().enter())
    }

    fn defer(guard: &Self::Guard, f: impl FnOnce() + Send + 'static) {
        let boxed = Box::into_raw(Box::new(f));
        // SAFETY: `boxed` is a fresh box run exactly once by `run_deferred`;
        // what `f` frees was unlinked by the caller before this call (the
        // trait's protocol), and `defer_retire` keeps it until `guard` drops.
        unsafe { seize::Guard::defer_retire(&guard.0, boxed, run_deferred) };
    }

    fn flush(guard: &Self::Guard) {
        seize::Guard::flush(&guard.0);
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
#[cfg(not(crtc_checker))]
pub type DefaultReclaim = EpochReclaim;

/// The reclaimer of model-checker builds.
#[cfg(crtc_checker)]
pub type DefaultReclaim = CheckerReclaim;

/// A test-only reclaimer for the model checkers, whose modelled threads share
/// one OS thread (crossbeam-epoch's per-thread state would be shared too).
/// Deferred functions run once no thread at all is pinned: stronger than an
/// epoch, so it never frees early, and the model frees everything by its end.
#[cfg(crtc_checker)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CheckerReclaim;

/// Proof of a [`CheckerReclaim`] pin.
#[cfg(crtc_checker)]
#[derive(Debug)]
pub struct CheckerGuard(());

#[cfg(crtc_checker)]
impl Drop for CheckerGuard {
    fn drop(&mut self) {
        crate::checker_state::pin_exit();
    }
}

// SAFETY: (1) `CheckerGuard`'s field is private and only `pin` builds it;
// (2) and (4) deferred work runs only when no modelled thread of the model
// is pinned; (3) the checkers run one modelled thread at a time on one OS
// thread, whose pin count the bookkeeping keeps.
#[cfg(crtc_checker)]
unsafe impl Reclaim for CheckerReclaim {
    type Guard = CheckerGuard;
    const NAME: &'static str = "checker";

    fn pin() -> Self::Guard {
        crate::checker_state::pin_enter();
        CheckerGuard(())
    }

    fn defer(_guard: &Self::Guard, f: impl FnOnce() + Send + 'static) {
        crate::checker_state::defer(f);
    }

    fn flush(_guard: &Self::Guard) {}

    fn collect() {
        crate::checker_state::run_if_unpinned();
    }

    fn wait_for_pinned_threads() {
        let mut backoff = Backoff::new();
        while crate::checker_state::pinned() > 0 {
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

impl<T: Send + 'static> Retired<T> {
    /// Frees `self` through `R` once the grace period of this call passed.
    ///
    /// # Safety
    /// The pointer came from `Box::into_raw`, is no longer published (no
    /// reader that pins from now on can load it), and is retired only here.
    unsafe fn retire<R: Reclaim>(self, guard: &R::Guard) {
        R::defer(guard, move || {
            let retired = self;
            // SAFETY: the caller's contract; the reclaimer runs this once,
            // after every reader that could have loaded it has unpinned.
            drop(unsafe { Box::from_raw(retired.0) });
        });
    }
}

/// A heap value published through one atomic pointer and reclaimed through
/// `R`. Readers load it under a guard of `R`; writers replace it and retire
/// the old value through `R`.
pub struct AtomicBox<T, R: Reclaim> {
    ptr: AtomicPtr<T>,
    owns: PhantomData<Box<T>>,
    reclaim: PhantomData<fn() -> R>,
}

impl<T: std::fmt::Debug + Send + Sync + 'static, R: Reclaim> std::fmt::Debug for AtomicBox<T, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let guard = R::pin();
        f.debug_tuple("AtomicBox").field(self.load(&guard)).finish()
    }
}

// SAFETY: the box is shared between threads like an `Arc<T>`: readers get `&T`
// (needs `T: Sync`), and retired values are dropped elsewhere (needs `T: Send`).
unsafe impl<T: Send + Sync, R: Reclaim> Send for AtomicBox<T, R> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync, R: Reclaim> Sync for AtomicBox<T, R> {}

impl<T: Send + Sync + 'static, R: Reclaim> AtomicBox<T, R> {
    /// Publishes `value`.
    pub fn new(value: T) -> Self {
        Self::from_raw(Box::into_raw(Box::new(value)))
    }

    fn from_raw(ptr: *mut T) -> Self {
        Self {
            ptr: AtomicPtr::new(ptr),
            owns: PhantomData,
            reclaim: PhantomData,
        }
    }

    /// The current value, valid while the guard lives.
    #[inline]
    pub fn load<'g>(&'g self, _guard: &'g R::Guard) -> &'g T {
        // At least Acquire (see `Reclaim::protect`): pairs with the Release
        // publication, so the value's initialization is visible.
        let ptr = R::protect(&self.ptr);
        // SAFETY: the pointer is a live box; a replaced box is retired through
        // `R` after it is unpublished, so it outlives `_guard` (the trait's
        // contract), and `&'g self` keeps the current one from being dropped.
        unsafe { &*ptr }
    }

    /// Replaces the value if it is still `current` (pointer equality). On
    /// success the old value is retired; on failure `new` is returned.
    pub fn compare_exchange(
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
            // SAFETY: `old` is the box this `AtomicBox` owned, just unpublished.
            Ok(old) => unsafe {
                Retired(old).retire::<R>(guard);
                Ok(())
            },
            // SAFETY: `new` came from `Box::into_raw` above and was not published.
            Err(_) => Err(unsafe { Box::from_raw(new) }),
        }
    }

    /// Replaces the value and retires the old one.
    pub fn store(&self, new: T, guard: &R::Guard) {
        let old = self.swap_raw(new);
        // SAFETY: `old` is the box this `AtomicBox` owned, just unpublished.
        unsafe { Retired(old).retire::<R>(guard) };
    }

    /// Replaces the value and returns the old one *without* retiring it, as
    /// a box that owns it: the caller moves it to a new owner that keeps it
    /// published (a split hands the child map to the suffix), so readers
    /// that loaded it keep a live value.
    ///
    /// # Safety
    /// Readers pinned now may still hold the old value: the returned box
    /// must not be dropped (nor its value taken through `get_mut`) until
    /// every guard of `R` that exists now has dropped. Keeping it reachable
    /// from the structure and retiring its owner through `R` satisfies this.
    pub unsafe fn replace_and_transfer(&self, new: T) -> AtomicBox<T, R> {
        AtomicBox::from_raw(self.swap_raw(new))
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

impl<T, R: Reclaim> Drop for AtomicBox<T, R> {
    fn drop(&mut self) {
        // SAFETY: `&mut self` proves no borrow from `load` is alive; values
        // replaced earlier went through `R`, and a box handed out by
        // `replace_and_transfer` is dropped only as its contract allows.
        drop(unsafe { Box::from_raw(self.ptr.load(Ordering::Relaxed)) });
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use super::*;

    #[test]
    fn replaced_values_are_freed_after_the_pin_ends() {
        let value = Arc::new(());
        let boxed = AtomicBox::<_, EpochReclaim>::new(Arc::clone(&value));
        {
            let guard = EpochReclaim::pin();
            let seen = boxed.load(&guard);
            boxed.store(Arc::new(()), &guard);
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
