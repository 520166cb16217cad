//! Event builders over chained hashes for the models (rank `w`.0, stores and
//! removals under a prefix of raw locals), the models' tree configuration,
//! and applying an event that must be accepted.

use crate::chain::{chained, tail_hash};
use crate::property::Property;
use crate::Op;
use crtc::types::{ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::SweepPolicy;
use crtc::{EventOutcome, Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;

/// Rank `worker`.0.
pub fn rank(worker: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, 0)
}

/// `worker` stores `locals` after the sequence `prefix` (parent = the
/// prefix's tail, the root when `prefix` is empty).
pub fn store(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let parent = tail_hash(prefix);
    RouterEvent::stored(rank(worker), parent, chained(parent, locals))
}

/// `worker` evicts the blocks `locals` that follow the sequence `prefix`, in
/// the order given.
pub fn remove(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let hashes = chained(tail_hash(prefix), locals)
        .into_iter()
        .map(|b| b.external)
        .collect();
    RouterEvent::removed(rank(worker), hashes)
}

/// A query from raw local hashes.
pub fn query(locals: &[u64]) -> Vec<LocalBlockHash> {
    locals.iter().map(|&l| LocalBlockHash(l)).collect()
}

/// The external hashes of the sequence `locals` from the root.
pub fn sequence(locals: &[u64]) -> Vec<ExternalSequenceBlockHash> {
    chained(None, locals)
        .into_iter()
        .map(|p| p.external)
        .collect()
}

/// The configuration of the models' trees: few slots (the models use a
/// handful of ranks) and no scheduled stale-leaf sweeps (a sweep scheduled by
/// the clock would make executions nondeterministic; the models check the
/// store paths).
pub fn model_config(fast_path: bool) -> TreeConfig {
    TreeConfig {
        fast_path,
        slot_capacity: 8,
        sweep: SweepPolicy::disabled(),
    }
}

/// Applies `event` on `lane` and panics with the event if the tree rejects it.
pub fn apply_ok<G: ShapeGate>(
    tree: &Tree<G>,
    lane: &mut Lane<G>,
    event: &RouterEvent,
) -> EventOutcome {
    match tree.apply_event(lane, event) {
        Ok(outcome) => outcome,
        Err(e) => crate::violated!(Property::Accepted, "event {event:?} was rejected: {e}"),
    }
}

/// Applies `op` on `lane`, which must be the only lane a removed worker's
/// ranks use; returns the tree's refusal of an event, as text.
pub fn apply_op<G: ShapeGate>(tree: &Tree<G>, lane: &mut Lane<G>, op: &Op) -> Option<String> {
    match op {
        Op::Event(event) => tree.apply_event(lane, event).err().map(|e| e.to_string()),
        Op::RemoveWorker(worker) => {
            tree.remove_worker(&mut [lane], *worker);
            None
        }
        Op::RemoveWorkerDpRank(rank) => {
            tree.remove_worker_dp_rank(&mut [lane], *rank);
            None
        }
    }
}

/// Whether an outcome is a store the fast path applied.
pub fn is_fast(outcome: &EventOutcome) -> bool {
    matches!(outcome, EventOutcome::Stored(s) if s.fast_path)
}
