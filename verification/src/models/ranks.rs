//! loom models of rank removal on the real tree, generic over the gate: the
//! real `Tree::remove_worker` and `Cleared` paths (unmap, wait for pinned
//! threads, the sweep of the slot out of every node, the release and its
//! grace period, or a clear's sweep of a slot whose owner cell still names
//! the rank) racing a
//! split by another lane and a reader. Run over a gate whose reclaimer is
//! [`GraceReclaim`](super::grace::GraceReclaim) with the quarantining
//! allocator, as the other tree models.
//!
//! Setup (both models): A (lane 0) and B (lane 1) store `[1,2]`, both full
//! on the one leaf (slots 0 and 1). Then, concurrently:
//!
//! - lane 1: B stores `[9]` under `[1]`, which splits the leaf at 1 (the
//!   node `[1]` with the children `[2]` and `[9]`, A's coverage copied to
//!   both halves of the split);
//! - the reader scores `[1,2]` once;
//! - lane 0, **R1**: `remove_worker(A)`, then worker C stores `[7]` from the
//!   root: its first store takes the lowest released slot, A's (slot reuse
//!   by a new rank);
//! - lane 0, **R2**: A is `Cleared` (it keeps its slot) and stores `[5]` from
//!   the root again.
//!
//! Checks: the read stays within its bounds (`read-bounds`: A at most 2, B
//! exactly 2, C nothing, since C never stored a block of `[1,2]`); no event
//! is rejected and the final state is one of the serial outcomes (every
//! order of lane 0's two steps and B's store, fast path off); the final tree
//! passes the structural walk ([`structure`](crate::structure)); in R1 C
//! holds A's old slot.
//!
//! Negative control: `SlotRecycledBeforeGrace` (the release makes A's slot
//! reusable without waiting for the threads pinned before it) is caught by
//! R1 as `read-bounds`: a reader that pinned after the removal's first wait
//! and read A's bit before the sweep resolves the slot to C, which took it
//! meanwhile.

use super::{
    apply_op, check_accepted_and_serial, grace, interleavings, model_config, observe, query, rank,
    store, summarize, Explorer, NamedModel, Observation, ReadBounds,
};
use crate::property::Property;
use crate::structure::structural_faults;
use crate::{check, violated, Op};
use crtc::harness::TreeHooks;
use crtc::types::{OverlapScores, RouterEvent};
use crtc::{Lane, Tree};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;

const A: u64 = 1;
const B: u64 = 2;
const C: u64 = 3;
/// The leaf A and B share, and the reader's query.
const LEAF: [u64; 2] = [1, 2];

/// The rank-removal models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankModel {
    /// `remove_worker(A)` and a new worker on A's slot.
    R1,
    /// `Cleared` of A and A storing again.
    R2,
}

/// What one execution produced, gathered (and the tree dropped) before any
/// check runs.
struct Execution {
    rejected: Vec<String>,
    read: OverlapScores,
    observed: Observation,
    faults: Vec<String>,
    /// R1: the slots of A before its removal and of C at the end.
    slots: (Option<u16>, Option<u16>),
}

impl RankModel {
    /// Every rank-removal model.
    pub const ALL: [RankModel; 2] = [RankModel::R1, RankModel::R2];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            RankModel::R1 => "R1",
            RankModel::R2 => "R2",
        }
    }

    /// What the model checks, for reports.
    pub fn what(self) -> &'static str {
        match self {
            RankModel::R1 => "remove_worker and slot reuse vs a split and a reader",
            RankModel::R2 => "Cleared and a new store vs a split and a reader",
        }
    }

    /// Lane 0's steps.
    fn lane0(self) -> Vec<Op> {
        match self {
            RankModel::R1 => vec![Op::RemoveWorker(A), Op::Event(store(C, &[], &[7]))],
            RankModel::R2 => vec![
                Op::Event(RouterEvent::cleared(rank(A))),
                Op::Event(store(A, &[], &[5])),
            ],
        }
    }

    /// B's split.
    fn lane1() -> RouterEvent {
        store(B, &[1], &[9])
    }

    /// The queries of the final-state observation.
    fn queries() -> Vec<Vec<u64>> {
        vec![LEAF.to_vec(), vec![1, 9], vec![7], vec![5]]
    }

    /// Bounds of the concurrent read: a removal reads as A's `Cleared`.
    fn bounds(self) -> ReadBounds {
        let setup = [store(A, &[], &LEAF), store(B, &[], &LEAF)];
        let concurrent: Vec<RouterEvent> = self
            .lane0()
            .into_iter()
            .map(|op| match op {
                Op::Event(event) => event,
                _ => RouterEvent::cleared(rank(A)),
            })
            .chain([Self::lane1()])
            .collect();
        ReadBounds::new(&setup, &concurrent)
    }

    /// The model as a [`NamedModel`] for gate `G`.
    pub fn named<G: ShapeGate>(self, explorer: impl Explorer + 'static) -> NamedModel {
        NamedModel {
            name: self.name(),
            what: self.what(),
            run: Box::new(move || self.check::<G>(&explorer)),
        }
    }

    /// Explores the model for gate `G`; panics when a check fails.
    pub fn check<G: ShapeGate>(self, explorer: &dyn Explorer) -> String {
        let serial = super::run_once(explorer, move || {
            grace::one_execution(|| self.serial_outcomes::<G>())
        });
        grace::take_freed();
        let bounds = self.bounds();
        let summary = summarize(explorer, || {
            explorer.explore(Box::new(move || {
                let execution = execute::<G>(self);
                check_execution(self, &bounds, &serial, &execution);
            }))
        });
        let freed = grace::take_freed();
        assert!(
            freed > 0,
            "{}: the reclaimer freed nothing (no premature free could show)",
            self.name()
        );
        format!("{summary}; {freed} blocks freed by the reclaimer")
    }

    /// The final states of every order of lane 0's steps and B's store, on
    /// fresh trees with the fast path off.
    fn serial_outcomes<G: ShapeGate>(self) -> Vec<Observation> {
        let lane0 = self.lane0();
        let mut outcomes = Vec::new();
        for order in interleavings(&[lane0.len(), 1]) {
            let (tree, mut lanes) = prepare::<G>(false);
            let mut next = 0;
            for thread in order {
                let rejected = if thread == 0 {
                    next += 1;
                    apply_op(&tree, &mut lanes[0], &lane0[next - 1])
                } else {
                    apply_op(&tree, &mut lanes[1], &Op::Event(Self::lane1()))
                };
                assert!(rejected.is_none(), "a serial step applies: {rejected:?}");
            }
            let observed = observe(&tree, &Self::queries());
            drop((lanes, tree));
            if !outcomes.contains(&observed) {
                outcomes.push(observed);
            }
        }
        outcomes
    }
}

/// A tree after the setup (module docs), with lanes for A and B.
fn prepare<G: ShapeGate>(fast_path: bool) -> (Tree<G>, Vec<Lane<G>>) {
    let tree = Tree::new(model_config(fast_path));
    let mut lanes = vec![tree.new_lane(), tree.new_lane()];
    super::apply_ok(&tree, &mut lanes[0], &store(A, &[], &LEAF));
    super::apply_ok(&tree, &mut lanes[1], &store(B, &[], &LEAF));
    (tree, lanes)
}

/// Runs lane 0's steps, B's split and the read on a fresh tree, between the
/// grace reclaimer's execution bounds.
fn execute<G: ShapeGate>(model: RankModel) -> Execution {
    grace::begin_execution();
    let (tree, mut lanes) = prepare::<G>(true);
    let a_slot = tree.slot_of(rank(A));
    let tree = Arc::new(tree);
    let mut lane1 = lanes.pop().expect("B's lane");
    let mut lane0 = lanes.pop().expect("A's lane");
    let splitter = {
        let tree = Arc::clone(&tree);
        thread::spawn(move || {
            let rejected = apply_op(&tree, &mut lane1, &Op::Event(RankModel::lane1()));
            (rejected, lane1)
        })
    };
    let reader = {
        let tree = Arc::clone(&tree);
        thread::spawn(move || tree.find_matches(&query(&LEAF), false))
    };
    // Lane 0 runs on the model's main thread: the catching interleaving
    // (the removal's first wait passes, the reader reads A's bit, the sweep,
    // the release and C's first store run, the reader resolves the slot) then
    // takes two preemptions, not three.
    let mut rejected: Vec<String> = model
        .lane0()
        .iter()
        .filter_map(|op| apply_op(&tree, &mut lane0, op))
        .collect();
    let (split_rejected, lane1) = splitter.join().expect("the splitter panicked");
    let read = reader.join().expect("the reader panicked");
    rejected.extend(split_rejected);
    let observed = observe(&*tree, &RankModel::queries());
    let faults = structural_faults(&*tree);
    let c_slot = tree.slot_of(rank(C));
    drop((lane0, lane1, tree));
    grace::end_execution();
    Execution {
        rejected,
        read,
        observed,
        faults,
        slots: (a_slot, c_slot),
    }
}

/// Every check of one execution.
fn check_execution(model: RankModel, bounds: &ReadBounds, serial: &[Observation], e: &Execution) {
    if let Err(err) = bounds.check(&query(&LEAF), &e.read) {
        violated!(
            Property::ReadBounds,
            "{}: the read during the removal broke its bounds: {err}",
            model.name()
        );
    }
    check_accepted_and_serial(model.name(), &e.rejected, &e.observed, serial);
    check!(
        Property::SerialOutcome,
        e.faults.is_empty(),
        "{}: the final tree breaks its structural invariants: {:?}",
        model.name(),
        e.faults
    );
    if model == RankModel::R1 {
        assert_eq!(
            e.slots.1, e.slots.0,
            "R1: the new worker did not take the removed rank's slot"
        );
    }
}
