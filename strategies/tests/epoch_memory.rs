//! Memory of the epoch gate: a counting global allocator and the gate's live
//! gauges show that every snapshot and edge buffer is freed once the gates
//! are dropped and the reclaimer has run — after single-threaded churn
//! (growth, splits, demotions, cuts) and after churn with concurrent readers
//! and gates dropped through the reclaimer — for each reclaimer. The gauges
//! end at exactly zero (a double free would drive them negative, a leak
//! would leave them positive), and the retired-bytes backlog that a held pin
//! builds up drains to zero.
//!
//! One test function: the counters are process-wide, so nothing else in this
//! binary may allocate gates concurrently.

#![cfg(all(feature = "epoch", not(crtc_checker)))]

use crtc_strategies::epoch::{self, LIVE_BUFFERS, LIVE_SNAPSHOTS};
use crtc_strategies::shape::{cover_prefix, cut_at, promote_full, split_at};
use crtc_strategies::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::{
    BlockPair, Commit, EpochGate, ExternalSequenceBlockHash, Reclaim, ShapeGate, ShapeInit,
    ShapeRead, Slot,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::time::{Duration, Instant};

/// Net bytes allocated by the whole process.
static NET_BYTES: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: forwards every call to `System` unchanged and only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a statistic.
        NET_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Relaxed: a statistic.
        NET_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Relaxed: a statistic.
        NET_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn net_bytes() -> i64 {
    // Relaxed: a statistic.
    NET_BYTES.load(Ordering::Relaxed)
}

fn block(h: u64) -> BlockPair {
    BlockPair::new(h % 13, h)
}

/// Steps of one churn, gates of the single-threaded run and writer rounds
/// of the concurrent one: miri interprets every step, so it runs a few
/// (still every kind of step, a split included, and every gate dropped).
const STEPS: u64 = if cfg!(miri) { 24 } else { 200 };
const GATES: u64 = if cfg!(miri) { 10 } else { 64 };
const ROUNDS: u64 = if cfg!(miri) { 1 } else { 20 };

/// Grows, demotes, promotes, cuts and splits one gate through its API.
fn churn<G: ShapeGate>(g: &G, seed: u64) {
    for i in 0..STEPS {
        let h = seed * 1_000_000 + i;
        let slot = Slot((i % 3) as u16);
        match i % 10 {
            0..=5 => {
                let tail = g.read(|s| s.tail().map_or(0, |t| t.external.0));
                let _ = g.try_append_at_tail(
                    Slot(0),
                    ExternalSequenceBlockHash(tail),
                    &[block(h), block(h + 1)],
                );
            }
            6 => {
                let _ = g.shared_commit(None, |w| promote_full(w, slot));
            }
            7 => {
                let _ = g.shared_commit(None, |w| cover_prefix(w, slot, 3));
            }
            8 => {
                let _ = g.exclusive_commit(None, |w| Commit::unchanged(cut_at(w, slot, 2)));
            }
            _ if i > STEPS * 3 / 4 => {
                let _ = g.exclusive_commit(None, |w| {
                    let len = w.len();
                    if len > 2 {
                        drop(split_at(w, len / 2));
                    }
                    Commit::changed(())
                });
            }
            _ => {}
        }
    }
}

/// Whether `pairs` is an edge the concurrent churn can build: the leaf's
/// blocks `1..=n`, then appends of `[h, h + 1]` whose `h` (seeds from 1, so
/// at least 1 000 000) grows by one a step (so one append may repeat the
/// last block of the one before), cut back by splits. So the edge is not
/// empty, its externals never decrease from at least 1, and every local is
/// its external's `% 13`. A view of a freed, torn or half-written buffer (a
/// zero pair below the length, an old block after a new one) breaks it.
fn well_formed(pairs: &[BlockPair]) -> bool {
    pairs.first().is_some_and(|p| p.external.0 >= 1)
        && pairs.windows(2).all(|w| w[0].external.0 <= w[1].external.0)
        && pairs.iter().all(|p| p.local.0 == p.external.0 % 13)
}

fn leaf<G: ShapeGate>(n: u64) -> G {
    G::new(ShapeInit::leaf((1..=n).map(block).collect(), Slot(0)))
}

/// Runs the reclaimer until every gauge is back to zero (or fails).
fn drained<R: Reclaim>(what: &str) {
    R::wait_for_pinned_threads();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        R::collect();
        let (snaps, bufs, retired) = (
            LIVE_SNAPSHOTS.get(),
            LIVE_BUFFERS.get(),
            epoch::retired_bytes(),
        );
        assert!(
            snaps >= 0 && bufs >= 0 && retired >= 0,
            "{what}: freed twice"
        );
        if (snaps, bufs, retired) == (0, 0, 0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {snaps} snapshots, {bufs} buffers, {retired} retired bytes never freed"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Single-threaded churn, with a pin held across part of it so a backlog
/// builds; everything is freed after the drop, and the process's net
/// allocation returns to where it started.
fn single_threaded<R: Reclaim>() {
    let before = net_bytes();
    let gates: Vec<EpochGate<R>> = (0..GATES).map(|n| leaf(1 + n % 20)).collect();
    {
        let _pin = R::pin();
        gates
            .iter()
            .take(8)
            .enumerate()
            .for_each(|(i, g)| churn(g, i as u64));
        assert!(epoch::retired_bytes() > 0, "a held pin keeps a backlog");
    }
    gates
        .iter()
        .enumerate()
        .skip(8)
        .for_each(|(i, g)| churn(g, i as u64));
    assert!(LIVE_SNAPSHOTS.get() >= GATES as i64 && LIVE_BUFFERS.get() >= GATES as i64);
    drop(gates);
    drained::<R>(R::NAME);
    let leaked = net_bytes() - before;
    // The reclaimer keeps small per-thread bookkeeping (a bag or a batch).
    assert!(
        leaked.abs() < 8 << 10,
        "{}: {leaked} bytes not returned",
        R::NAME
    );
}

/// Writers churn shared gates while readers walk them; half of the gates are
/// dropped through the reclaimer (as the tree drops unlinked nodes).
fn concurrent<R: Reclaim>() {
    let gates: Arc<Vec<Arc<EpochGate<R>>>> =
        Arc::new((0..GATES.min(16)).map(|n| Arc::new(leaf(1 + n))).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (gates, stop) = (Arc::clone(&gates), Arc::clone(&stop));
            thread::spawn(move || {
                // Relaxed: a stop flag only.
                while !stop.load(Ordering::Relaxed) {
                    let _pin = R::pin();
                    for g in gates.iter() {
                        let pairs = g.read(|s| {
                            let mut pairs = Vec::new();
                            s.copy_pairs(0..s.len(), &mut pairs);
                            pairs
                        });
                        assert!(
                            well_formed(&pairs),
                            "a read saw a malformed edge: {pairs:?}"
                        );
                    }
                }
                R::collect();
            })
        })
        .collect();
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let gates = Arc::clone(&gates);
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    gates
                        .iter()
                        .skip(w as usize)
                        .step_by(2)
                        .for_each(|g| churn(&**g, 1 + round * 100 + w));
                }
                R::collect();
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().expect("writer"));
    // Relaxed: a stop flag only.
    stop.store(true, Ordering::Relaxed);
    readers.into_iter().for_each(|r| r.join().expect("reader"));
    let gates = Arc::try_unwrap(gates).expect("threads joined");
    let guard = R::pin();
    for g in gates.into_iter().skip(8) {
        R::defer(&guard, move || drop(g));
    }
    drop(guard);
    drained::<R>(R::NAME);
}

#[test]
fn every_snapshot_and_buffer_is_freed() {
    // Warm up each reclaimer's per-thread state so it is not counted.
    churn(&leaf::<EpochGate<crtc_strategies::EpochReclaim>>(4), 0);
    drained::<crtc_strategies::EpochReclaim>("warm-up");
    single_threaded::<crtc_strategies::EpochReclaim>();
    concurrent::<crtc_strategies::EpochReclaim>();
    #[cfg(feature = "seize")]
    {
        churn(&leaf::<EpochGate<crtc_strategies::SeizeReclaim>>(4), 0);
        drained::<crtc_strategies::SeizeReclaim>("warm-up");
        single_threaded::<crtc_strategies::SeizeReclaim>();
        concurrent::<crtc_strategies::SeizeReclaim>();
    }
}
