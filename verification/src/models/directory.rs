//! loom model of the lane directory on the real tree (papers/protocols.md
//! §2.1), generic over the gate: two ranks of one lane share its entries
//! while a rank of another lane stores on the same node.
//!
//! Setup, serially: C (lane 1) stores `[1,9]`; A (lane 0) stores `[1]`,
//! a prefix of C's leaf, and must write lane 0's entry for 1 although C
//! covered it first (the store skip counts only the lane's own ranks'
//! coverage); B (lane 0) stores `[1]` (no entry: A's covers it). Then,
//! concurrently:
//!
//! - lane 0 (the model's main thread), in order: A stores `[2,3]` under
//!   `[1]`; B stores `[3]` under `[1,2]`, which B does not hold (A does,
//!   and the lane's entry for 2 names the node): the reference model
//!   refuses it, so the tree must too; B reads `[1,2,3]` back; B stores
//!   `[2]` under `[1]`, whose parent B holds;
//! - lane 1: C stores `[2,3]` under `[1]` too, so whichever lane comes
//!   first splits C's leaf at 1 and the other covers the same child `[2,3]`
//!   (the same shape in every order).
//!
//! Checks, in this order: B's read stays within its bounds (`read-bounds`:
//! B at most the prefix of the blocks it ever stored, `[1,2]`); no event
//! is rejected and the refused one was refused (`accepted`); the final
//! membership is the reference model's (every order gives the same) and
//! the final tree passes the structural walk (`serial-outcome`).
//!
//! Negative controls: `SharedEntrySkipsCoverage` (parent resolution does
//! not check the storing rank's coverage) is caught as `read-bounds`: B's
//! refused store raises B's coverage over `[2,3]`, and B's read credits it
//! with 3 blocks. `StoreSkipPastLaneCoverage` (the store skip counts every
//! slot's coverage) is caught as `accepted`: A's setup store writes no
//! entry for 1, which C covered, so A's store under `[1]` finds no parent.
//! Both fail in every interleaving (the faults are in lane 0's own
//! sequence); lane 1's store races lane 0's on the nodes they share.

use super::{
    apply_ok, apply_op, grace, membership, model_config, query, reference_membership, store,
    summarize, Explorer, Membership, NamedModel, ReadBounds,
};
use crate::property::Property;
use crate::structure::structural_faults;
use crate::{check, violated, Op};
use crtc::types::{OverlapScores, RouterEvent};
use crtc::{Lane, Tree};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;

const A: u64 = 1;
const B: u64 = 2;
const C: u64 = 3;
/// B's read.
const READ: [u64; 3] = [1, 2, 3];

/// The model's name.
pub const NAME: &str = "D1";

/// What one execution produced, gathered (and the tree dropped) before any
/// check runs.
struct Execution {
    read: OverlapScores,
    rejected: Vec<String>,
    refused: bool,
    held: Vec<Membership>,
    faults: Vec<String>,
}

/// The setup's stores, in order, with their lanes.
fn setup() -> [(usize, RouterEvent); 3] {
    [
        (1, store(C, &[], &[1, 9])),
        (0, store(A, &[], &[1])),
        (0, store(B, &[], &[1])),
    ]
}

/// The store the reference model refuses: B under `[1,2]`.
fn refused() -> RouterEvent {
    store(B, &[1, 2], &[3])
}

/// The concurrent events the reference model applies: lane 0's first and
/// last, lane 1's.
fn concurrent() -> [RouterEvent; 3] {
    [
        store(A, &[1], &[2, 3]),
        store(B, &[1], &[2]),
        store(C, &[1], &[2, 3]),
    ]
}

/// The model as a [`NamedModel`] for gate `G`.
pub fn named<G: ShapeGate>(explorer: impl Explorer + 'static) -> NamedModel {
    NamedModel {
        name: NAME,
        what: "two ranks of a lane share its directory vs another lane's store",
        run: Box::new(move || check::<G>(&explorer)),
    }
}

/// Explores the model for gate `G`; panics when a check fails.
pub fn check<G: ShapeGate>(explorer: &dyn Explorer) -> String {
    let events: Vec<RouterEvent> = setup().into_iter().map(|(_, e)| e).collect();
    let bounds = ReadBounds::new(&events, &concurrent());
    let expected = reference_membership(events.iter().chain(&concurrent()));
    grace::take_freed();
    let summary = summarize(explorer, || {
        explorer.explore(Box::new(move || {
            let execution = execute::<G>();
            check_execution(&bounds, &expected, &execution);
        }))
    });
    format!(
        "{summary}; {} blocks freed by the reclaimer",
        grace::take_freed()
    )
}

/// A tree after the setup (module docs), with the two lanes.
fn prepare<G: ShapeGate>() -> (Tree<G>, Vec<Lane<G>>) {
    let tree = Tree::new(model_config(true));
    let mut lanes = vec![tree.new_lane(), tree.new_lane()];
    for (lane, event) in setup() {
        apply_ok(&tree, &mut lanes[lane], &event);
    }
    (tree, lanes)
}

/// Runs both lanes on a fresh tree, between the grace reclaimer's
/// execution bounds.
fn execute<G: ShapeGate>() -> Execution {
    grace::begin_execution();
    let (tree, mut lanes) = prepare::<G>();
    let tree = Arc::new(tree);
    let mut lane1 = lanes.pop().expect("C's lane");
    let mut lane0 = lanes.pop().expect("A's and B's lane");
    let [first, last, other] = concurrent();
    let writer = {
        let tree = Arc::clone(&tree);
        thread::spawn(move || (apply_op(&tree, &mut lane1, &Op::Event(other)), lane1))
    };
    let mut rejected: Vec<String> = apply_op(&tree, &mut lane0, &Op::Event(first))
        .into_iter()
        .collect();
    let refused = tree.apply_event(&mut lane0, &refused()).is_err();
    let read = tree.find_matches(&query(&READ), false);
    rejected.extend(apply_op(&tree, &mut lane0, &Op::Event(last)));
    let (other_rejected, lane1) = writer.join().expect("the writer panicked");
    rejected.extend(other_rejected);
    let held = membership(&*tree);
    let faults = structural_faults(&*tree);
    drop((lane0, lane1, tree));
    grace::end_execution();
    Execution {
        read,
        rejected,
        refused,
        held,
        faults,
    }
}

/// Every check of one execution, in the order of the module docs.
fn check_execution(bounds: &ReadBounds, expected: &[Membership], e: &Execution) {
    if let Err(err) = bounds.check(&query(&READ), &e.read) {
        violated!(
            Property::ReadBounds,
            "{NAME}: B's read after its refused store broke its bounds: {err}"
        );
    }
    check!(
        Property::Accepted,
        e.rejected.is_empty(),
        "{NAME}: rejected events {:?}",
        e.rejected
    );
    check!(
        Property::Accepted,
        e.refused,
        "{NAME}: the tree applied {:?}, which the reference model refuses (B does not hold \
         its parent)",
        refused()
    );
    check!(
        Property::SerialOutcome,
        e.held == expected,
        "{NAME}: the final tree holds other blocks than the reference model: {:?} != {expected:?}",
        e.held
    );
    check!(
        Property::SerialOutcome,
        e.faults.is_empty(),
        "{NAME}: the final tree breaks its structural invariants: {:?}",
        e.faults
    );
}
