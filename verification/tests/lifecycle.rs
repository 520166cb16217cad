//! Worker lifecycle, slot recycling, anchors and stale-leaf reclamation
//! for every strategy. Races that decide the slot protocol are
//! made deterministic by parking a thread pinned in the reclaimer: a removal
//! that unmapped a slot cannot sweep it before that pin ends, so the tests can
//! look at the state "unmapped, not yet released" for as long as they like.

mod suite;

use crtc::types::{ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::{Lane, Reclaim, ShapeGate, SweepPolicy, Tree, TreeConfig};
use crtc_strategies::sync::atomic::{AtomicBool, Ordering};
use crtc_strategies::sync::mpsc::{channel, Sender};
use crtc_strategies::sync::{thread, Arc};
use std::time::Duration;
use suite::*;

/// A thread pinned in `G`'s reclaimer until the returned sender is used.
fn park_pinned<G: ShapeGate>() -> (Sender<()>, thread::JoinHandle<()>) {
    let (release, wait) = channel::<()>();
    let (pinned, ready) = channel::<()>();
    let handle = thread::spawn(move || {
        let guard = G::Reclaim::pin();
        let _ = pinned.send(());
        let _ = wait.recv();
        drop(guard);
    });
    let _ = ready.recv();
    (release, handle)
}

fn config(fast_path: bool, sweep: SweepPolicy) -> TreeConfig {
    TreeConfig {
        fast_path,
        sweep,
        ..TreeConfig::default()
    }
}

/// Waits (bounded) until `rank` has no slot mapped.
fn wait_unmapped<G: ShapeGate>(tree: &Tree<G>, rank: WorkerWithDpRank) {
    for _ in 0..10_000 {
        if tree.slot_of(rank).is_none() {
            return;
        }
        crtc_strategies::sync::spin_loop();
        thread::sleep(Duration::from_millis(1));
    }
    panic!("{rank} was never unmapped");
}

/// Runs `f` on a thread and returns its join handle and a "finished" flag.
fn spawn_flagged<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> (thread::JoinHandle<T>, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&done);
    let handle = thread::spawn(move || {
        let value = f();
        // Release: the test reads the flag with Acquire.
        flag.store(true, Ordering::Release);
        value
    });
    (handle, done)
}

fn finished(flag: &AtomicBool) -> bool {
    // Acquire: pairs with the Release in `spawn_flagged`.
    flag.load(Ordering::Acquire)
}

fn anchor_id(n: u64) -> ExternalSequenceBlockHash {
    ExternalSequenceBlockHash(0xa000 + n)
}

/// A store of `locals` by `rank` under the anchor `id`, chained from it.
fn store_under_anchor(
    rank: WorkerWithDpRank,
    id: ExternalSequenceBlockHash,
    locals: &[u64],
) -> RouterEvent {
    RouterEvent::stored(
        rank,
        Some(id),
        crtc_verification::chain::chained(Some(id), locals),
    )
}

fn remove_under_anchor(
    rank: WorkerWithDpRank,
    id: ExternalSequenceBlockHash,
    locals: &[u64],
) -> RouterEvent {
    let blocks = crtc_verification::chain::chained(Some(id), locals);
    RouterEvent::removed(rank, blocks.into_iter().map(|b| b.external).collect())
}

macro_rules! lifecycle {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            use super::*;
            type G = $gate;

            fn fixture(lanes: usize, sweep: SweepPolicy) -> Fixture<G> {
                Fixture::with_config(config(true, sweep), lanes)
            }

            include!("lifecycle/slots.rs");
            include!("lifecycle/reclaim.rs");
            include!("lifecycle/anchors.rs");
        }
    };
}

crtc_strategies::for_each_gate!(lifecycle);
