//! The tree at miri size: a few catalogue scenarios and one two-thread run
//! per gate, small enough for `.ci/miri.sh` to interpret every gate's
//! reclamation path (splits, retired child sets and snapshots, sweeps,
//! worker removal) under Tree Borrows in minutes. Ordinary builds run it
//! too, as a quick smoke test.
//!
//! What miri adds over the other suites: any use of freed or unowned memory
//! (a premature free, a deallocation through a borrowed pointer, a data
//! race on a non-atomic) is reported as undefined behaviour, whatever the
//! schedule happened to be. Sizes stay tiny: each event costs miri
//! milliseconds.

use crtc::types::{LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::SweepPolicy;
use crtc::{Tree, TreeConfig};
use crtc_strategies::sync::atomic::{AtomicU64, Ordering};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::{removed_after, stored_after};

fn rank(worker: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, 0)
}

fn score<G: ShapeGate>(tree: &Tree<G>, worker: u64, locals: &[u64]) -> u32 {
    let query: Vec<LocalBlockHash> = locals.iter().map(|&l| LocalBlockHash(l)).collect();
    tree.find_matches(&query, false).score(rank(worker))
}

/// A tree that sweeps as soon as one block is dead.
fn eager_tree<G: ShapeGate>() -> Tree<G> {
    Tree::new(TreeConfig {
        sweep: SweepPolicy::eager(),
        ..TreeConfig::default()
    })
}

/// Decode appends, a divergent split, a removal that cuts an edge, a clear
/// and a worker removal, then a sweep of what they left holder-less.
fn catalogue<G: ShapeGate>() {
    let tree = eager_tree::<G>();
    let mut a = tree.new_lane();
    let mut b = tree.new_lane();
    let apply = |lane: &mut crtc::Lane<G>, event: RouterEvent| {
        tree.apply_event(lane, &event)
            .unwrap_or_else(|e| panic!("{event:?}: {e}"));
    };
    apply(&mut a, stored_after(rank(1), &[], &[1, 2, 3]));
    apply(&mut a, stored_after(rank(1), &[1, 2, 3], &[4]));
    apply(&mut b, stored_after(rank(2), &[], &[1, 2, 3, 4]));
    apply(&mut a, stored_after(rank(1), &[1, 2, 3, 4], &[5, 6]));
    apply(&mut b, stored_after(rank(2), &[1, 2, 3, 4], &[7, 8]));
    assert_eq!(score(&tree, 1, &[1, 2, 3, 4, 5, 6]), 6);
    assert_eq!(score(&tree, 2, &[1, 2, 3, 4, 7, 8]), 6);
    assert_eq!(score(&tree, 2, &[1, 2, 3, 4, 5, 6]), 4);
    apply(&mut a, removed_after(rank(1), &[1, 2, 3, 4], &[5, 6]));
    apply(&mut b, RouterEvent::cleared(rank(2)));
    assert_eq!(score(&tree, 1, &[1, 2, 3, 4, 5, 6]), 4);
    assert_eq!(score(&tree, 2, &[1, 2, 3, 4, 7, 8]), 0);
    tree.sweep_stale();
    tree.remove_worker(&mut [&mut a, &mut b], 1);
    assert_eq!(score(&tree, 1, &[1, 2, 3, 4]), 0);
    tree.sweep_stale();
    apply(&mut a, stored_after(rank(3), &[], &[1, 2, 9]));
    assert_eq!(score(&tree, 3, &[1, 2, 9]), 3);
}

/// One writer stores, extends, removes and sweeps on a shared prefix while
/// another thread reads it; the final scores are the writer's last state.
/// The reader's bound: rank 1 scores 4 for `[1,2,3,10+r]` only once the
/// writer has begun round `r` (the round that stores block `10+r`), so a
/// read that credits a block not yet stored (C1) fails.
fn two_threads<G: ShapeGate + 'static>() {
    const ROUNDS: u64 = 6;
    let tree = Arc::new(eager_tree::<G>());
    let mut lane = tree.new_lane();
    let begun = Arc::new(AtomicU64::new(0));
    let writer = {
        let (tree, begun) = (Arc::clone(&tree), Arc::clone(&begun));
        thread::spawn(move || {
            for round in 0..ROUNDS {
                // Relaxed: the tree's own publication of this round's
                // stores, which come after it, carries it to the reader.
                begun.store(round + 1, Ordering::Relaxed);
                let tail = 10 + round;
                for event in [
                    stored_after(rank(1), &[], &[1, 2]),
                    stored_after(rank(1), &[1, 2], &[3, tail]),
                    stored_after(rank(2), &[], &[1, 2, 3, 100 + round]),
                    removed_after(rank(2), &[1, 2, 3], &[100 + round]),
                ] {
                    tree.apply_event(&mut lane, &event)
                        .unwrap_or_else(|e| panic!("{event:?}: {e}"));
                }
                tree.sweep_stale();
            }
        })
    };
    let reader = {
        let (tree, begun) = (Arc::clone(&tree), Arc::clone(&begun));
        thread::spawn(move || {
            for round in 0..2 * ROUNDS {
                let tail_round = round / 2;
                let seen = score(&tree, 1, &[1, 2, 3, 10 + tail_round]);
                // Relaxed: a read that saw the block happens after the
                // writer's store of `begun` for its round (sequenced before
                // the block's store, published by the tree).
                let begun = begun.load(Ordering::Relaxed);
                assert!(
                    seen < 4 || begun > tail_round,
                    "rank 1 scored {seen} for block {} before the writer began storing it",
                    10 + tail_round
                );
            }
        })
    };
    writer.join().expect("writer");
    reader.join().expect("reader");
    assert_eq!(score(&tree, 1, &[1, 2, 3, 10 + ROUNDS - 1]), 4);
    assert_eq!(score(&tree, 2, &[1, 2, 3]), 3);
}

/// The miri tests of one gate of `crtc_strategies::for_each_gate!`.
macro_rules! miri_tree {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            #[test]
            fn catalogue() {
                super::catalogue::<$gate>();
            }

            #[test]
            fn two_threads() {
                super::two_threads::<$gate>();
            }
        }
    };
}

crtc_strategies::for_each_gate!(miri_tree);
