//! Events racing a rank removal through the public `Indexer`, with one lane
//! held between the removal's steps (the interleaving of issue 44, made
//! deterministic).

use super::{Indexer, IndexerConfig, Task};
use crate::tree::RankTarget;
use crate::types::{
    BlockPair, ExternalSequenceBlockHash, IndexerError, KvError, LocalBlockHash, RouterEvent,
    WorkerWithDpRank,
};
use crate::RwLockGate;
use crtc_strategies::sync::mpsc::{channel, Sender};
use crtc_strategies::sync::{thread, Arc};

/// R and W route to lane 0, Y and X to lane 1 (round-robin by first sight).
const R: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
const Y: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);
const W: WorkerWithDpRank = WorkerWithDpRank::new(3, 0);
const X: WorkerWithDpRank = WorkerWithDpRank::new(4, 0);

fn blocks(hashes: &[u64]) -> Vec<BlockPair> {
    hashes
        .iter()
        .map(|&h| BlockPair {
            local: LocalBlockHash(h),
            external: ExternalSequenceBlockHash(100 + h),
        })
        .collect()
}

fn stored(rank: WorkerWithDpRank, parent: Option<u64>, hashes: &[u64]) -> RouterEvent {
    let parent = parent.map(|h| ExternalSequenceBlockHash(100 + h));
    RouterEvent::stored(rank, parent, blocks(hashes))
}

fn query(hashes: &[u64]) -> Vec<LocalBlockHash> {
    hashes.iter().copied().map(LocalBlockHash).collect()
}

/// An indexer with R, Y, W routed and W holding blocks 10, 11, 12.
fn routed() -> Arc<Indexer<RwLockGate>> {
    let indexer = Arc::new(Indexer::<RwLockGate>::new(IndexerConfig::default()));
    for event in [
        stored(R, None, &[1]),
        stored(Y, None, &[2]),
        stored(W, None, &[10, 11, 12]),
    ] {
        indexer.apply_event_acked(event).unwrap();
    }
    indexer
}

/// Starts removing `target` on another thread with lane 1 held right after
/// the unmap, and returns once lane 0 has dropped the target's ranks; lane 1
/// runs again when the returned sender is dropped, and the removal then
/// finishes.
fn remove_with_lane_one_held(
    indexer: &Arc<Indexer<RwLockGate>>,
    target: RankTarget,
) -> (Sender<()>, thread::JoinHandle<()>) {
    let (hold, held) = channel();
    *indexer.hold_after_unmap.lock() = Some((1, held));
    let drops = Arc::clone(&indexer.counters[0]);
    let remover = Arc::clone(indexer);
    let removal = thread::spawn(move || remover.remove_ranks(target));
    while drops.removal_drops.get() == 0 {
        thread::yield_now();
    }
    (hold, removal)
}

/// The interleaving of issue 44: W's late store reaches lane 0 after lane 0
/// dropped W and before the removal released W's slot; a new rank X then
/// takes that slot on lane 1, and R stores what X holds. Before the fix the
/// late store registered W again with its old slot, R's stores under P were
/// refused (`ParentBlockNotFound`, C4) and R's removal was lost (C1).
fn late_store_then_slot_reuse(target: RankTarget) {
    let indexer = routed();
    let (hold, removal) = remove_with_lane_one_held(&indexer, target);
    let late = indexer.apply_event_acked(stored(W, Some(12), &[13]));
    drop(hold);
    removal.join().unwrap();

    indexer
        .apply_event_acked(stored(X, None, &[20, 21]))
        .unwrap();
    indexer
        .apply_event_acked(stored(R, None, &[20, 21]))
        .unwrap();
    let under_p = indexer.apply_event_acked(stored(R, Some(21), &[22]));
    assert!(under_p.is_ok(), "R's valid store is accepted: {under_p:?}");
    indexer
        .apply_event_acked(RouterEvent::removed(
            R,
            vec![ExternalSequenceBlockHash(121)],
        ))
        .unwrap();
    let scores = indexer.find_matches(&query(&[20, 21, 22]));
    assert_eq!(
        scores.score(R),
        1,
        "R removed block 21: never credited past it"
    );
    assert_eq!(scores.score(X), 2);
    assert!(
        matches!(
            late,
            Err(IndexerError::Refused(KvError::ParentBlockNotFound { .. }))
        ),
        "the late store is after the removal: W comes back holding nothing ({late:?})"
    );
    assert_eq!(indexer.find_matches(&query(&[10, 11, 12, 13])).score(W), 0);
}

#[test]
fn a_late_store_racing_remove_worker_applies_after_it() {
    late_store_then_slot_reuse(RankTarget::Worker(W.worker_id));
}

#[test]
fn a_late_store_racing_remove_worker_dp_rank_applies_after_it() {
    late_store_then_slot_reuse(RankTarget::Rank(W));
}

/// A `Cleared` of W between lane 0's drop and the release neither waits for
/// the release (it would never come: lane 1 is held and the removal waits
/// for it) nor leaves W's bits behind.
#[test]
fn a_clear_racing_the_removal_returns_and_leaves_nothing() {
    let indexer = routed();
    let (hold, removal) = remove_with_lane_one_held(&indexer, RankTarget::Worker(W.worker_id));
    indexer.apply_event_acked(RouterEvent::cleared(W)).unwrap();
    assert_eq!(indexer.find_matches(&query(&[10, 11, 12])).score(W), 0);
    drop(hold);
    removal.join().unwrap();
    assert!(!indexer.tree.is_release_pending(W));
}

/// W's root store enqueued before `remove_worker(W)` (lane 0 held, so it is
/// still queued when the call starts) is removed with W: the removal applies
/// what each lane had queued before it unmaps. Without that flush the store
/// ran after the unmap, on a fresh slot, and survived the removal.
#[test]
fn an_event_queued_before_the_removal_is_removed_with_the_rank() {
    let indexer = routed();
    let (hold, held) = channel();
    assert!(indexer.lanes.send(0, Task::Hold(held)).is_ok());
    indexer.apply_event(stored(W, None, &[60])).unwrap();
    let remover = Arc::clone(&indexer);
    let removal = thread::spawn(move || remover.remove_worker(W.worker_id));
    // Give a removal that does not flush first the time to unmap while the
    // store is still queued (the flushing one waits for lane 0 instead and
    // never unmaps here); a bound, not a verdict.
    let start = std::time::Instant::now();
    while !indexer.tree.is_release_pending(W) && start.elapsed().as_millis() < 100 {
        thread::yield_now();
    }
    drop(hold);
    removal.join().unwrap();
    assert_eq!(indexer.find_matches(&query(&[60])).score(W), 0);
    assert_eq!(indexer.find_matches(&query(&[10, 11, 12])).score(W), 0);
}
