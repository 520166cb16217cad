//! loom model of anchor creation on the real tree (`crtc`'s `tree::anchor`),
//! generic over the gate: two lanes create the same anchor at once, and one
//! of them looks it up while the other stores under it.
//!
//! Protocol under test: the anchor map is an immutable value behind one
//! pointer. A lane that finds the anchor absent takes the writers' lock,
//! looks again, copies the map with a new one-block node and publishes the
//! copy; lookups load the map under their pin and borrow the node.
//!
//! Concurrently, on a fresh tree:
//!
//! - lane 1 (a spawned thread): B joins the anchor X (creating it if it is
//!   absent), then stores `[8]` under X;
//! - lane 0 (the model's main thread): A joins X, then scores `[8]` from X
//!   (`find_matches_from_anchor`), racing B's creation and store.
//!
//! Checks, in this order: the final state is the serial outcome (one
//! anchor; from X, A scores the anchor's depth and B one block more; the
//! blocks the dump lists; the structural walk) (`serial-outcome`); B's store
//! was accepted (`accepted`); A's lookup credits A with the anchor it joined
//! before (`read-your-writes`) and B with at most the anchor and its block
//! (`read-bounds`).
//!
//! Negative control: `AnchorWritersUnlocked` (creation without the writers'
//! lock): when both lanes find X absent, each links a node of its own and
//! the later publication drops the other's, so the rank that joined the
//! dropped node scores nothing from X in the final state: `serial-outcome`.

use super::{grace, membership, model_config, query, rank, run_once, summarize};
use super::{Explorer, Membership, NamedModel};
use crate::chain::chained;
use crate::property::Property;
use crate::structure::structural_faults;
use crate::{check, violated};
use crtc::types::{ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::Tree;
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;

const A: u64 = 1;
const B: u64 = 2;
/// The anchor's id.
const ANCHOR: ExternalSequenceBlockHash = ExternalSequenceBlockHash(0xA0);
/// The anchor's local hash.
const ANCHOR_LOCAL: LocalBlockHash = LocalBlockHash(7);
/// The prefix the anchor stands for, in blocks.
const DEPTH: u32 = 3;
/// The block B stores under the anchor.
const BLOCK: u64 = 8;

/// The model's name.
pub const NAME: &str = "A1";

/// B's store of `[8]` under the anchor.
fn store_under_anchor() -> RouterEvent {
    RouterEvent::stored(rank(B), Some(ANCHOR), chained(Some(ANCHOR), &[BLOCK]))
}

/// The anchor's scores for `[8]`, sorted.
fn scores_from_anchor<G: ShapeGate>(tree: &Tree<G>) -> Vec<(WorkerWithDpRank, u32)> {
    tree.find_matches_from_anchor(ANCHOR, &query(&[BLOCK]))
        .sorted()
}

/// What the final state is held to.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Final {
    scores: Vec<(WorkerWithDpRank, u32)>,
    anchors: usize,
    held: Vec<Membership>,
    faults: Vec<String>,
}

fn observe<G: ShapeGate>(tree: &Tree<G>) -> Final {
    Final {
        scores: scores_from_anchor(tree),
        anchors: tree.anchor_count(),
        held: membership(tree),
        faults: structural_faults(tree),
    }
}

/// What one execution produced, gathered (and the tree dropped) before any
/// check runs.
struct Execution {
    /// A's lookup during B's creation and store.
    read: Vec<(WorkerWithDpRank, u32)>,
    rejected: Vec<String>,
    observed: Final,
}

/// The model as a [`NamedModel`] for gate `G`.
pub fn named<G: ShapeGate>(explorer: impl Explorer + 'static) -> NamedModel {
    NamedModel {
        name: NAME,
        what: "two lanes create one anchor, one looks it up, the other stores under it",
        run: Box::new(move || check::<G>(&explorer)),
    }
}

/// Explores the model for gate `G`; panics when a check fails.
pub fn check<G: ShapeGate>(explorer: &dyn Explorer) -> String {
    let expected = run_once(explorer, serial::<G>);
    let (a, b) = (rank(A), rank(B));
    assert_eq!(
        expected.scores,
        vec![(a, DEPTH), (b, DEPTH + 1)],
        "{NAME}: the serial scores from the anchor"
    );
    grace::take_freed();
    let summary = summarize(explorer, || {
        explorer.explore(Box::new(move || {
            let execution = execute::<G>();
            check_execution(&expected, &execution);
        }))
    });
    format!(
        "{summary}; {} blocks freed by the reclaimer",
        grace::take_freed()
    )
}

/// The final state of the serial order (A's join, B's join and store; every
/// order ends the same).
fn serial<G: ShapeGate>() -> Final {
    grace::begin_execution();
    let tree = Tree::<G>::new(model_config(true));
    let (mut lane_a, mut lane_b) = (tree.new_lane(), tree.new_lane());
    let joins = [(&mut lane_a, A), (&mut lane_b, B)];
    for (lane, worker) in joins {
        tree.apply_anchor(lane, rank(worker), ANCHOR, ANCHOR_LOCAL, DEPTH)
            .expect("a join in the serial run");
    }
    super::apply_ok(&tree, &mut lane_b, &store_under_anchor());
    let observed = observe(&tree);
    drop((lane_a, lane_b, tree));
    grace::end_execution();
    observed
}

/// Runs both lanes on a fresh tree, between the grace reclaimer's execution
/// bounds.
fn execute<G: ShapeGate>() -> Execution {
    grace::begin_execution();
    let tree = Arc::new(Tree::<G>::new(model_config(true)));
    let (mut lane_a, mut lane_b) = (tree.new_lane(), tree.new_lane());
    let writer = {
        let tree = Arc::clone(&tree);
        thread::spawn(move || {
            let joined = tree.apply_anchor(&mut lane_b, rank(B), ANCHOR, ANCHOR_LOCAL, DEPTH);
            let stored = joined.and_then(|()| tree.apply_event(&mut lane_b, &store_under_anchor()));
            (stored.err().map(|e| e.to_string()), lane_b)
        })
    };
    let joined = tree.apply_anchor(&mut lane_a, rank(A), ANCHOR, ANCHOR_LOCAL, DEPTH);
    let read = scores_from_anchor(&*tree);
    let (refused, lane_b) = writer.join().expect("the writer panicked");
    let rejected = (joined.err().map(|e| e.to_string()).into_iter())
        .chain(refused)
        .collect();
    let observed = observe(&*tree);
    drop((lane_a, lane_b, tree));
    grace::end_execution();
    Execution {
        read,
        rejected,
        observed,
    }
}

/// Every check of one execution, in the order of the module docs.
fn check_execution(expected: &Final, e: &Execution) {
    check!(
        Property::SerialOutcome,
        e.observed == *expected,
        "{NAME}: the final state is not the serial outcome\n  observed: {:#?}\n  serial: {expected:#?}",
        e.observed
    );
    check!(
        Property::Accepted,
        e.rejected.is_empty(),
        "{NAME}: rejected {:?}",
        e.rejected
    );
    let score = |worker| {
        e.read
            .iter()
            .find(|(r, _)| *r == rank(worker))
            .map_or(0, |&(_, s)| s)
    };
    check!(
        Property::ReadYourWrites,
        score(A) == DEPTH,
        "{NAME}: A's lookup after its own join scored {:?}, not A {DEPTH}",
        e.read
    );
    if let Some((r, s)) = e
        .read
        .iter()
        .find(|&&(r, s)| r != rank(A) && (r != rank(B) || s > DEPTH + 1))
    {
        violated!(
            Property::ReadBounds,
            "{NAME}: A's lookup credited {r:?} with {s} blocks (B holds at most {})",
            DEPTH + 1
        );
    }
}
