//! The `Indexer` a router calls, under shuttle: its two lane threads, a
//! remover, a sender of a removed worker's late events, a writer and a
//! reader, checked against the reference model (C1, C4).
//!
//! Model `indexer`. Lanes L0 and L1 (ranks routed round-robin by first
//! sight: R, W0 and V on L0, Y, W1 and later X on L1). Setup, acknowledged:
//! R, Y, W0 (worker 3, dp rank 0), W1 (worker 3, dp rank 1) and V store;
//! then Y's four more stores are enqueued without waiting, a backlog that
//! keeps L1 busy, and one of W0's, which precedes the removal and must go
//! with it. Four threads then run at once:
//!
//! - the remover: `remove_worker(3)`, then `remove_worker_dp_rank(W1)`
//!   (which removes W1 again if a late event brought it back);
//! - the late sender (not waiting for acknowledgements): W0 stores under its
//!   last block, W1 is cleared, W0 stores a block from the root, W0 removes
//!   one of its blocks, W1 stores under its last block;
//! - R's writer: R stores under its block on L0 (must be accepted);
//! - the reader: scores W0's chain and checks that only W0 is credited, and
//!   by at most the blocks W0 ever held (C1).
//!
//! After the joins and a flush, X, new on L1, stores P and takes a released
//! slot (the lowest, W1's or W0's old one), R stores P on L0 and then under
//! P (must be accepted: C4, property `accepted`), R removes P's second
//! block, and W0 removes its root block (accepted, or refused as a rank the
//! lane does not know). Whatever order the late events took against the
//! removals, each applied wholly before a removal or wholly after it, so
//! every worker-3 block is gone at the end and the scores of every rank on
//! every query equal the reference model's with worker 3 removed: a score
//! above it fails `read-bounds` (C1), any other difference and a structural
//! fault `serial-outcome`.
//!
//! Negative controls: `RemovalDropsBeforeUnmap` (the lanes drop the ranks
//! before the unmap): a late event between the two registers W0 again with
//! its old slot, X is issued that slot, L0's mask counts X's coverage of P
//! as L0's, R's store under P is refused (`accepted`);
//! `RemovalWithoutFlush` (the unmap before W0's queued store has run): the
//! store runs on a fresh slot and W0 keeps block 60 (`read-bounds`).
//!
//! Not covered: more than two lanes, the stale-leaf sweep (disabled, as in
//! every model), anchors, and removals racing each other (one remover).

use super::events::query;
use super::{grace, Explorer, NamedModel, Property, Suite};
use crate::chain::{chained, tail_hash};
use crate::reference::{Classification, Reference};
use crate::structure::structural_faults;
use crtc::types::{
    IndexerError, KvError, LocalBlockHash, OverlapScores, RouterEvent, WorkerWithDpRank,
};
use crtc::{Indexer, IndexerConfig, ShapeGate, SweepPolicy, TreeConfig};
use crtc_strategies::sync::{thread, Arc};
use std::cell::Cell;

const R: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
const Y: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);
const W0: WorkerWithDpRank = WorkerWithDpRank::new(3, 0);
const W1: WorkerWithDpRank = WorkerWithDpRank::new(3, 1);
const V: WorkerWithDpRank = WorkerWithDpRank::new(5, 0);
const X: WorkerWithDpRank = WorkerWithDpRank::new(4, 0);

/// The queries the final scores are compared on.
const QUERIES: [&[u64]; 7] = [
    &[60],
    &[1, 50],
    &[2, 3, 4, 6, 7],
    &[5],
    &[10, 11, 12, 13],
    &[30, 31, 32],
    &[20, 21, 22],
];

/// `rank` stores `locals` after the sequence `prefix`.
fn store(rank: WorkerWithDpRank, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let parent = tail_hash(prefix);
    RouterEvent::stored(rank, parent, chained(parent, locals))
}

/// `rank` removes `locals`, which follow the sequence `prefix`.
fn remove(rank: WorkerWithDpRank, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let hashes = chained(tail_hash(prefix), locals);
    RouterEvent::removed(rank, hashes.into_iter().map(|b| b.external).collect())
}

/// Setup, acknowledged: routes R, Y, W0, W1, V (in that order) to lanes 0,
/// 1, 0, 1, 0.
fn setup() -> Vec<RouterEvent> {
    vec![
        store(R, &[], &[1]),
        store(Y, &[], &[2]),
        store(W0, &[], &[10, 11, 12]),
        store(W1, &[], &[30, 31]),
        store(V, &[], &[5]),
    ]
}

/// Y's backlog on lane 1, and a store of W0's on lane 0 (it precedes the
/// removal, so it goes with W0), enqueued without waiting.
fn backlog() -> Vec<RouterEvent> {
    vec![
        store(W0, &[], &[60]),
        store(Y, &[2], &[3]),
        store(Y, &[2, 3], &[4]),
        store(Y, &[2, 3, 4], &[6]),
        store(Y, &[2, 3, 4, 6], &[7]),
    ]
}

/// Worker 3's late events, sent while it is being removed.
fn late() -> Vec<RouterEvent> {
    vec![
        store(W0, &[10, 11, 12], &[13]),
        RouterEvent::cleared(W1),
        store(W0, &[], &[40]),
        remove(W0, &[10], &[11]),
        store(W1, &[30, 31], &[32]),
    ]
}

/// R's store on lane 0 while worker 3 is removed.
fn r_during() -> RouterEvent {
    store(R, &[1], &[50])
}

/// After the race, acknowledged, every one valid in the reference model.
fn after() -> Vec<RouterEvent> {
    vec![
        store(X, &[], &[20, 21]),
        store(R, &[], &[20, 21]),
        store(R, &[20, 21], &[22]),
        remove(R, &[20], &[21]),
    ]
}

/// The reference model's final state: worker 3 removed, the late events
/// gone with it.
fn reference() -> Reference {
    let mut model = Reference::new();
    for event in setup().iter().chain(&backlog()) {
        model.apply(event);
    }
    model.apply(&r_during());
    model.remove_worker(3);
    model.remove_worker_dp_rank(W1);
    for event in &after() {
        model.apply(event);
    }
    model
}

/// A violated property and its message.
type Violation = (Property, String);

/// Worker 3's removal racing its late events and a reader.
fn race<G: ShapeGate>(indexer: &Arc<Indexer<G>>) -> Vec<Violation> {
    let remover = {
        let indexer = Arc::clone(indexer);
        thread::spawn(move || {
            indexer.remove_worker(3);
            indexer.remove_worker_dp_rank(W1);
        })
    };
    let sender = {
        let indexer = Arc::clone(indexer);
        thread::spawn(move || {
            for event in late() {
                let _ = indexer.apply_event(event);
            }
        })
    };
    let writer = {
        let indexer = Arc::clone(indexer);
        thread::spawn(move || indexer.apply_event_acked(r_during()))
    };
    let chain = query(&[10, 11, 12, 13]);
    let scores = indexer.find_matches(&chain);
    let mut found = Vec::new();
    for (rank, score) in credited(&scores) {
        if rank != W0 || score > 4 {
            found.push((
                Property::ReadBounds,
                format!("a read during the removal credits {rank:?} with {score} of W0's chain"),
            ));
        }
    }
    remover.join().expect("the remover panicked");
    sender.join().expect("the late sender panicked");
    if let Err(error) = writer.join().expect("R's writer panicked") {
        found.push((
            Property::Accepted,
            format!("R's store during the removal: {error}"),
        ));
    }
    found
}

fn credited(scores: &OverlapScores) -> Vec<(WorkerWithDpRank, u32)> {
    [R, Y, W0, W1, V, X]
        .into_iter()
        .map(|rank| (rank, scores.score(rank)))
        .filter(|&(_, score)| score > 0)
        .collect()
}

/// The acknowledged events after the race, then W0's removal of its root
/// block (which it holds only if that store applied after the removal).
fn settle<G: ShapeGate>(indexer: &Indexer<G>) -> Vec<Violation> {
    let mut found = Vec::new();
    for event in after() {
        if let Err(error) = indexer.apply_event_acked(event.clone()) {
            let message = format!("valid event {event:?} refused after the removal: {error}");
            found.push((Property::Accepted, message));
        }
    }
    let last = remove(W0, &[], &[40]);
    match indexer.apply_event_acked(last) {
        Ok(_) | Err(IndexerError::Refused(KvError::BlockNotFound { .. })) => {}
        Err(error) => found.push((Property::Accepted, format!("W0's removal failed: {error}"))),
    }
    found
}

/// Every query's scores against the reference model's.
fn compare<G: ShapeGate>(indexer: &Indexer<G>) -> Vec<Violation> {
    let model = reference();
    let mut found = Vec::new();
    for locals in QUERIES {
        let q: Vec<LocalBlockHash> = query(locals);
        for d in model.check(&q, &indexer.find_matches(&q)) {
            let property = match d.class {
                Classification::Overcount => Property::ReadBounds,
                _ => Property::SerialOutcome,
            };
            found.push((property, format!("final scores of {locals:?}: {d}")));
        }
    }
    let faults = structural_faults(indexer.tree());
    if !faults.is_empty() {
        found.push((Property::SerialOutcome, format!("structure: {faults:?}")));
    }
    found
}

/// One schedule: the run, gathered before any check (the indexer dropped
/// and the reclaimer's execution ended), then the first violation found.
fn schedule<G: ShapeGate>() {
    grace::begin_execution();
    let config = IndexerConfig {
        lanes: 2,
        tree: TreeConfig {
            fast_path: true,
            slot_capacity: 16,
            sweep: SweepPolicy::disabled(),
        },
    };
    let indexer = Arc::new(Indexer::<G>::new(config));
    let mut found = Vec::new();
    for event in setup() {
        if let Err(error) = indexer.apply_event_acked(event.clone()) {
            found.push((Property::Accepted, format!("setup {event:?}: {error}")));
        }
    }
    for event in backlog() {
        let _ = indexer.apply_event(event);
    }
    found.extend(race(&indexer));
    indexer.flush();
    found.extend(settle(&indexer));
    found.extend(compare(&indexer));
    FREED_BEFORE_END.with(|f| f.set(f.get() + grace::freed_in_execution()));
    drop(indexer);
    grace::end_execution();
    if let Some((property, message)) = found.into_iter().next() {
        crate::violated!(property, "indexer: {message}");
    }
}

thread_local! {
    static FREED_BEFORE_END: Cell<u64> = const { Cell::new(0) };
}

/// Explores the model; returns the schedules run and the blocks the
/// reclaimer freed while the indexer lived. Fails if it freed nothing.
pub fn explore<G: ShapeGate>(explorer: &dyn Explorer) -> (u64, u64) {
    assert!(
        grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    FREED_BEFORE_END.with(|f| f.set(0));
    let schedules = explorer.explore(Box::new(schedule::<G>));
    let freed = FREED_BEFORE_END.with(Cell::get);
    assert!(
        freed > 0,
        "indexer: the reclaimer freed nothing while the indexer lived in {schedules} schedules"
    );
    (schedules, freed)
}

/// The model as a suite of one, for the negative controls.
pub fn suite<G: ShapeGate>(
    gate: &'static str,
    explorer: impl Fn() -> Box<dyn Explorer> + 'static,
) -> Suite {
    Suite {
        checker: "shuttle",
        gate,
        models: vec![NamedModel {
            name: "indexer",
            what: "shuttle indexer model",
            run: Box::new(move || {
                let (schedules, freed) = explore::<G>(&*explorer());
                format!("{schedules} schedules, {freed} blocks freed while the indexer lived")
            }),
        }],
    }
}
