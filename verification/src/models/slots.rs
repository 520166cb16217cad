//! loom model of rank-slot reuse on the real [`SlotRegistry`], with the
//! slot a lane caches per rank ([`CachedSlot`]), under the checkers'
//! reclaimer. Gate-independent (the registry is the tree's).
//!
//! One word stands for the tree's coverage: a writer sets its slot's bit in
//! it, the removal's sweep clears the removed slots' bits. Pins are counted
//! in a loom atomic besides the checker reclaimer's own bookkeeping (which
//! loom does not observe), with crossbeam's fences. Two threads:
//!
//! - the **lane** of rank A makes two stores, each pinned: acquire A's slot
//!   through the lane's cache (empty before the first store), then set that
//!   slot's bit;
//! - the **remover** unmaps A, waits for pinned threads, sweeps A's bits,
//!   releases A's slot, then rank B takes a slot (the lowest free one: A's
//!   old slot once it was released).
//!
//! Check (**slot-owned**): after both threads, every bit left in the word
//! belongs to a slot A owns. A bit of a slot A lost is either on a slot B
//! now owns (B credited with A's blocks) or on a vacant slot the next rank
//! to take it inherits.
//!
//! Negative controls, each of which the same model must fail on:
//!
//! - `SlotCacheIgnoresUnmaps`: the lane's second store uses the slot it
//!   cached before the removal, after B took it;
//! - `SlotStampAfterLookup`: a first store that looked the slot up before
//!   the unmap and stamped it after is taken as current after the release
//!   (two preemptions: lookup | unmap, then first store | release).

use super::{summarize, Explorer, NamedModel};
use crate::check;
use crate::property::Property;
use crtc::harness::{CachedSlot, SlotRegistry};
use crtc::types::WorkerWithDpRank;
use crtc_strategies::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::{DefaultReclaim, Reclaim, Slot};

/// The model's name.
pub const NAME: &str = "slot_reuse";
/// What it checks, for reports.
pub const WHAT: &str = "a lane's cached slot against a removal and reuse, 2 threads";

const A: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
const B: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);

struct Shared {
    slots: SlotRegistry<DefaultReclaim>,
    /// Bit `s` set: slot `s` covers the tree's one block.
    coverage: AtomicU64,
    /// Threads pinned, counted where loom sees it. The checker reclaimer's
    /// pins are bookkeeping loom does not observe, so they give loom neither
    /// the dependency between a pin and the remover's wait nor the ordering
    /// edges (the pin's fence against the count's bump, the unpin against
    /// the wait); without this counter the model's exploration never ran
    /// the removal whole between the lane's two stores, and both mutants
    /// survived at bounds 2 to 5. The remover waits for every pin it sees,
    /// also ones that began after its wait did (crossbeam waits only for
    /// older ones); such a pin has already seen the bump, so that hides
    /// neither mutant.
    pins: AtomicUsize,
}

/// A pin counted in [`Shared::pins`] for as long as it lives.
struct Pin<'a>(&'a AtomicUsize);

impl<'a> Pin<'a> {
    fn enter(shared: &'a Shared) -> (Self, <DefaultReclaim as Reclaim>::Guard) {
        // Relaxed, then a SeqCst fence: crossbeam's pin (its epoch store,
        // then a full fence), which the registry's SeqCst load of the unmap
        // count follows. loom treats SeqCst accesses as AcqRel, but models
        // SeqCst fences.
        shared.pins.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        (Self(&shared.pins), DefaultReclaim::pin())
    }
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        // Release: the remover's Acquire load that sees the count fall
        // sees this pin's writes.
        self.0.fetch_sub(1, Ordering::Release);
    }
}

fn bit(slot: Slot) -> u64 {
    1 << slot.index()
}

/// One store of A: pinned, acquire through the cache, set the bit.
fn store(shared: &Shared, cache: Option<CachedSlot>) -> Option<CachedSlot> {
    let (_pin, guard) = Pin::enter(shared);
    let cached = shared
        .slots
        .acquire(A, &guard, cache)
        .expect("a slot is free");
    // Relaxed: the pin's Release end orders it before the remover's sweep
    // (the sweep runs only after it saw the pin end).
    shared
        .coverage
        .fetch_or(bit(cached.slot()), Ordering::Relaxed);
    Some(cached)
}

/// The removal of A, then B's first store.
fn remove_then_reuse(shared: &Shared) {
    let removed = shared.slots.unmap(|r| r == A);
    // A SeqCst fence, then Acquire loads: the wait's own pin (its fence)
    // before it reads the other threads' pins, as crossbeam's does.
    fence(Ordering::SeqCst);
    while shared.pins.load(Ordering::Acquire) > 0 {
        thread::yield_now();
    }
    DefaultReclaim::wait_for_pinned_threads();
    let mask = removed.iter().fold(0, |m, &s| m | bit(s));
    // Relaxed: after the wait, which saw every earlier pin end (Acquire).
    shared.coverage.fetch_and(!mask, Ordering::Relaxed);
    shared.slots.release(&removed);
    let guard = DefaultReclaim::pin();
    shared
        .slots
        .acquire(B, &guard, None)
        .expect("a slot is free");
}

fn run() {
    let shared = Arc::new(Shared {
        slots: SlotRegistry::new(4),
        coverage: AtomicU64::new(0),
        pins: AtomicUsize::new(0),
    });
    let remover = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || remove_then_reuse(&shared))
    };
    let cache = store(&shared, None);
    store(&shared, cache);
    remover.join().expect("the remover panicked");
    // Relaxed: every thread joined.
    let left = shared.coverage.load(Ordering::Relaxed);
    let guard = DefaultReclaim::pin();
    let table = shared.slots.table(&guard);
    for index in (0..64u16).filter(|&i| left & (1 << i) != 0) {
        let owner = table.owner(Slot(index));
        check!(
            Property::SlotOwned,
            owner == Some(A),
            "A's write with slot {index} outlived the sweep (owner now {owner:?})"
        );
    }
}

/// The model as a [`NamedModel`].
pub fn named(explorer: impl Explorer + 'static) -> NamedModel {
    NamedModel {
        name: NAME,
        what: WHAT,
        run: Box::new(move || summarize(&explorer, || explorer.explore(Box::new(run)))),
    }
}
