//! Memory counted in full: a counting global allocator and the untimed
//! replay that reads it.
//!
//! The allocator underneath is mimalloc with the default feature `mimalloc`
//! and the system allocator without it ([`ALLOCATOR`] names it in reports).
//!
//! Protocol. The `crtc` binary installs [`CountingAlloc`] as its global
//! allocator. It forwards every call to the allocator underneath and, only while
//! counting is switched on, adds each allocation's size to one live-bytes
//! total and subtracts each deallocation's. Counting is off during every
//! timed phase (the switch is one Relaxed load per call, so the timed rows
//! pay no shared write), and on only in [`index_bytes`]: build the row's
//! index empty and drain it, read the total, replay every write of the stream, drain,
//! for the swept count run the index's own cleanup path
//! (`Backend::sweep`: crtc's forced stale-leaf sweep, which also collects
//! what the reclaimer can free; upstream's public cleanup task), read the
//! total again (each write is cloned inside the count, so what the lane
//! frees of it nets to zero). The difference is every heap byte the index holds for the
//! stream, whatever structure holds it — nodes, edges, coverage, cutoffs,
//! edge indexes, lane lookup entries, slot tables, child maps — and, for the
//! epoch gates, memory retired and not yet freed when the drain ends. The
//! same replay measures upstream's indexes through their public API, so
//! their rows have numbers too; what an index allocates per index, not per
//! event (its runtime, its channels), is in the empty build and not counted.
//!
//! Swept and unswept. Each row is counted both ways and the two are
//! reported apart, so a ratio pairs like with like: swept (the cleanup path
//! above after the drain) and unswept (no cleanup call, and the index built
//! with its own sweep scheduling off where it can be: crtc's
//! `SweepPolicy::disabled`; upstream's five-minute cleanup task never comes
//! due within a run). An index that prunes on removal (the global-lock
//! baseline, upstream's `RadixTree` and positional index) is counted once,
//! its two figures the same.
//!
//! Queues. The replay drains the index every [`DRAIN_EVERY`] writes: a lane
//! queue keeps the largest buffer it ever grew to, so a replay that let the
//! backlog grow with the stream would count a buffer sized by how far the
//! lanes fell behind in that run (seen: the same upstream configuration
//! counted at 271 and 479 bytes per membership in one run on chat), not by
//! what the index holds. Draining every 1,024 writes still left a spread
//! (upstream's pool 69.5–76.0, `KvIndexer` 24.2–61.5 over five repeats on
//! chat); every 64, the five repeats agree within 0.5.
//!
//! What the count misses: memory freed during the replay and allocated
//! again by another thread between the two reads is counted at its final
//! size only (the difference of two totals, not a peak); thread stacks and
//! mappings made outside the allocator are not heap.
//!
//! Outside the binary (library tests, benches) nothing installs the
//! allocator, and [`index_bytes`] returns `None`.

use crate::compare::measurement::plan::{issue, Plan};
use crate::compare::subjects::backend::Backend;
use crtc_strategies::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use crtc_strategies::sync::Arc;
use std::alloc::{GlobalAlloc, Layout};

// The allocator every call is forwarded to.
#[cfg(feature = "mimalloc")]
use mimalloc::MiMalloc as Inner;
#[cfg(not(feature = "mimalloc"))]
use std::alloc::System as Inner;

/// The name of the allocator the binary runs on, for reports.
pub const ALLOCATOR: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "system malloc"
};

/// Live heap bytes allocated while counting was on, minus those freed
/// while it was on.
static LIVE: AtomicI64 = AtomicI64::new(0);
/// Whether allocations are counted.
static COUNTING: AtomicBool = AtomicBool::new(false);

/// The allocator underneath, with live bytes counted while switched on.
pub struct CountingAlloc;

impl CountingAlloc {
    fn note(delta: i64) {
        // Relaxed: a plain flag; a call that misses a flip is counted on
        // the side it saw, and the reads happen on a quiescent index.
        if COUNTING.load(Ordering::Relaxed) {
            // Relaxed: only the total matters; `index_bytes` reads it after
            // joining on the drain, which orders every earlier update.
            LIVE.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call forwards to `Inner` with the same arguments and
// returns its result unchanged; the counting touches only two atomics and
// never allocates, so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        let ptr = unsafe { Inner.alloc(layout) };
        if !ptr.is_null() {
            Self::note(layout.size() as i64);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed` is passed on.
        let ptr = unsafe { Inner.alloc_zeroed(layout) };
        if !ptr.is_null() {
            Self::note(layout.size() as i64);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is `Inner`'s.
        unsafe { Inner.dealloc(ptr, layout) };
        Self::note(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc` is passed on unchanged.
        let new = unsafe { Inner.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            Self::note(new_size as i64 - layout.size() as i64);
        }
        new
    }
}

/// Counts the live bytes `f` leaves allocated (counting on only inside).
fn counted<T>(f: impl FnOnce() -> T) -> (T, i64) {
    // SeqCst on the switch and the reads: the measuring thread's own
    // program order is what matters, and these run a handful of times.
    COUNTING.store(true, Ordering::SeqCst);
    let before = LIVE.load(Ordering::SeqCst);
    let value = f();
    let after = LIVE.load(Ordering::SeqCst);
    COUNTING.store(false, Ordering::SeqCst);
    (value, after - before)
}

/// Whether the counting allocator is installed (it is in the `crtc` binary).
pub fn installed() -> bool {
    let (_, bytes) = counted(|| std::hint::black_box(Box::new([0u8; 64])));
    bytes != 0
}

/// Writes between two drains of the counted replay (module docs).
pub const DRAIN_EVERY: usize = 64;

/// Heap bytes the index of `build` holds after every write of `plan`,
/// above what the same index holds empty, with its cleanup path run after
/// the drain when `swept` (see the module docs); `None` outside the `crtc`
/// binary.
pub fn index_bytes(
    build: impl FnOnce() -> Arc<dyn Backend>,
    plan: &Plan,
    swept: bool,
) -> Option<u64> {
    if !installed() {
        return None;
    }
    let backend = build();
    // Warm up what an index makes on first use, not per event (channel
    // blocks, a sweep's scratch), so the count starts from a used index.
    backend.flush();
    std::hint::black_box(backend.stats());
    let (_, filled) = counted(|| {
        // Each write is cloned inside the count, so the event the lane
        // consumes and frees was counted when it was made: net zero.
        for (i, op) in plan.ops.iter().enumerate() {
            issue(&*backend, op.clone());
            if (i + 1) % DRAIN_EVERY == 0 {
                backend.flush();
            }
        }
        backend.flush();
        if swept {
            backend.sweep();
        }
    });
    drop(backend);
    Some(filled.max(0) as u64)
}
