//! loom models of the stale-leaf sweep on the real tree, generic over the
//! gate: the sweep's `unlink_if_stale` racing a reader and a store on the
//! leaf it unlinks. Run over a gate whose reclaimer is
//! [`GraceReclaim`](super::grace::GraceReclaim) with the quarantining
//! allocator, so a child map or node freed while a pinned thread may hold it
//! fails the model (`no-free-while-held`); the other models keep sweeps off.
//!
//! Setup (every model): A (lane 0) stores `[1,2,3]`; B (lane 1) stores
//! `[1,2]`, then `[4,5]` under `[1,2]` (a split at 2: the node `[1,2]` with
//! the children `[3]` and `[4,5]`), then evicts `[4,5]`, which leaves the
//! leaf `[4,5]` without holders: the sweep's one candidate.
//!
//! - **U1** a sweep unlinks `[4,5]` while a reader scores `[1,2,4,5]`, which
//!   walks through `[1,2]`'s child map into the leaf. The read is the scores
//!   before and after (A 2, B 2; the unlink changes no score), the sweep
//!   unlinks the leaf, and the final state is the serial outcome.
//! - **U3** U1 with A's `[6]` stored under `[1,2]` first, so `[1,2]` has
//!   three children: a sharded set under the checkers' `COMPACT_MAX` of 2
//!   (a compact one of up to four in production). The sweep unlinks the
//!   leaf from the shard (the reclaimer drops its entry) and republishes the
//!   two children left as a compact set (the sharded one retired) while the
//!   reader walks through the shard into the leaf.
//! - **U2** a sweep races B storing `[4,5]` under `[1,2]` again (the store
//!   revives the leaf, or re-plans when it finds the leaf marked unlinked),
//!   then appending `[6]` at its tail (the fast path). Both stores are
//!   accepted, the final state is one of the serial outcomes (the sweep
//!   before, between or after B's stores), and B's append is the one
//!   fast-path hit.
//!
//! Negative controls: `SweepFreesBeforeGrace` (the sweep frees the compact
//! child set it replaces at once) is caught by U1 as `no-free-while-held`
//! in CI, under every gate; U2 catches it too, on the same property
//! (`CRTC_MUTANT_MATRIX=1 .ci/loom.sh mutants` runs it there).
//! `ShardedSweepFreesBeforeGrace` (the sweep drops the entry it unlinks
//! from a sharded set at once, so the leaf is freed with its candidate
//! list) is caught by U3 on the same property.

use super::{
    check_accepted_and_serial, grace, is_fast, model_config, observe, query, remove, run_once,
    store, summarize, Explorer, NamedModel, Observation,
};
use crate::property::Property;
use crate::{check, violated};
use crtc::types::{RouterEvent, WorkerWithDpRank};
use crtc::SweepStats;
use crtc::{Lane, Tree};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;

const A: u64 = 1;
const B: u64 = 2;
/// The query that walks into the leaf the sweep unlinks.
const INTO_LEAF: [u64; 4] = [1, 2, 4, 5];

/// The sweep models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnlinkModel {
    /// A reader walking into the leaf being unlinked.
    U1,
    /// A store reviving the leaf and a fast append on it, racing the unlink.
    U2,
    /// U1 with the leaf's parent holding a sharded child set.
    U3,
}

/// What the one-execution run computes for a model.
#[derive(Clone, Debug)]
struct Expected {
    /// The reader's query scored after the setup.
    before: Vec<(WorkerWithDpRank, u32)>,
    /// The final states of every serial order of the sweep and the stores.
    serial: Vec<Observation>,
}

impl UnlinkModel {
    /// Every sweep model.
    pub const ALL: [UnlinkModel; 3] = [UnlinkModel::U1, UnlinkModel::U2, UnlinkModel::U3];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            UnlinkModel::U1 => "U1",
            UnlinkModel::U2 => "U2",
            UnlinkModel::U3 => "U3",
        }
    }

    /// What the model checks, for reports.
    pub fn what(self) -> &'static str {
        match self {
            UnlinkModel::U1 => "reader walking into a leaf being unlinked",
            UnlinkModel::U2 => "store and fast append on a leaf racing its unlink",
            UnlinkModel::U3 => "reader walking into a leaf being unlinked from a sharded set",
        }
    }

    /// B's events, run concurrently with the sweep (none in U1).
    fn stores(self) -> Vec<RouterEvent> {
        match self {
            UnlinkModel::U1 | UnlinkModel::U3 => Vec::new(),
            UnlinkModel::U2 => vec![store(B, &[1, 2], &[4, 5]), store(B, &INTO_LEAF, &[6])],
        }
    }

    /// The queries of the final-state observation.
    fn queries() -> Vec<Vec<u64>> {
        vec![
            vec![1, 2, 4, 5, 6],
            vec![1, 2, 3],
            vec![1, 2, 6],
            vec![1, 2],
        ]
    }

    /// Whether a reader walks into the leaf (U1, U3).
    fn reads(self) -> bool {
        self != UnlinkModel::U2
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
        let expected = run_once(explorer, move || {
            grace::begin_execution();
            let expected = self.expected::<G>();
            grace::end_execution();
            expected
        });
        grace::take_freed();
        let summary = summarize(explorer, || {
            explorer.explore(Box::new(move || run::<G>(self, &expected)))
        });
        let freed = grace::take_freed();
        assert!(
            freed > 0,
            "{}: the reclaimer freed nothing in any execution (is the gate's reclaimer GraceReclaim?)",
            self.name()
        );
        format!("{summary}; {freed} blocks freed by the reclaimer")
    }

    /// The reader's before-scores and the serial outcomes: the sweep at
    /// every position among B's stores, on fresh trees with the fast path
    /// off.
    fn expected<G: ShapeGate>(self) -> Expected {
        let (tree, lanes) = prepare::<G>(self, false);
        let before = tree.find_matches(&query(&INTO_LEAF), false).sorted();
        drop((lanes, tree));
        let stores = self.stores();
        let mut serial = Vec::new();
        for sweep_at in 0..=stores.len() {
            let (tree, mut lanes) = prepare::<G>(self, false);
            for (i, event) in stores.iter().enumerate() {
                if i == sweep_at {
                    tree.sweep_stale();
                }
                super::apply_ok(&tree, &mut lanes[1], event);
            }
            if sweep_at == stores.len() {
                tree.sweep_stale();
            }
            let observed = observe(&tree, &Self::queries());
            drop((lanes, tree));
            if !serial.contains(&observed) {
                serial.push(observed);
            }
        }
        Expected { before, serial }
    }
}

/// A tree after `model`'s setup (module docs), with lanes for A and B.
fn prepare<G: ShapeGate>(model: UnlinkModel, fast_path: bool) -> (Tree<G>, Vec<Lane<G>>) {
    let tree = Tree::new(model_config(fast_path));
    let mut lanes = vec![tree.new_lane(), tree.new_lane()];
    let mut setup = vec![
        (0, store(A, &[], &[1, 2, 3])),
        (1, store(B, &[], &[1, 2])),
        (1, store(B, &[1, 2], &[4, 5])),
        (1, remove(B, &[1, 2], &[4, 5])),
    ];
    if model == UnlinkModel::U3 {
        setup.insert(3, (0, store(A, &[1, 2], &[6])));
    }
    for (lane, event) in &setup {
        super::apply_ok(&tree, &mut lanes[*lane], event);
    }
    (tree, lanes)
}

/// What one execution produced, gathered (and the tree dropped) before any
/// check runs.
struct Execution {
    /// B's store outcomes, as errors' texts (`None`: accepted), and fast hits.
    rejected: Vec<String>,
    hits: usize,
    /// The sweep's statistics (`None`: it found another sweep in flight).
    swept: Option<SweepStats>,
    /// U1: the reader's scores, sorted.
    read: Option<Vec<(WorkerWithDpRank, u32)>>,
    observed: Observation,
}

/// One explored execution of `model`.
fn run<G: ShapeGate>(model: UnlinkModel, expected: &Expected) {
    let execution = execute::<G>(model);
    check_execution(model, expected, &execution);
}

/// Runs B's stores, the sweep and the reader on a fresh tree, between the
/// grace reclaimer's execution bounds.
fn execute<G: ShapeGate>(model: UnlinkModel) -> Execution {
    grace::begin_execution();
    let (tree, mut lanes) = prepare::<G>(model, true);
    let tree = Arc::new(tree);
    let mut lane = lanes.pop().expect("B's lane");
    let stores = model.stores();
    let writer = (!stores.is_empty()).then(|| {
        let tree = Arc::clone(&tree);
        thread::spawn(move || {
            let outcomes: Vec<_> = stores
                .iter()
                .map(|event| tree.apply_event(&mut lane, event))
                .collect();
            (outcomes, lane)
        })
    });
    let sweeper = {
        let tree = Arc::clone(&tree);
        thread::spawn(move || tree.sweep_stale())
    };
    let read = model
        .reads()
        .then(|| tree.find_matches(&query(&INTO_LEAF), false).sorted());
    let outcomes = writer
        .map(|w| w.join().expect("the writer panicked").0)
        .unwrap_or_default();
    let swept = sweeper.join().expect("the sweeper panicked");
    let observed = observe(&*tree, &UnlinkModel::queries());
    drop((lanes, tree));
    grace::end_execution();
    Execution {
        rejected: outcomes
            .iter()
            .filter_map(|o| o.as_ref().err().map(ToString::to_string))
            .collect(),
        hits: outcomes.iter().flatten().filter(|o| is_fast(o)).count(),
        swept,
        read,
        observed,
    }
}

/// Every check of one execution.
fn check_execution(model: UnlinkModel, expected: &Expected, e: &Execution) {
    let Some(swept) = &e.swept else {
        violated!(
            Property::OneSweep,
            "{}: the sweep found one in flight",
            model.name()
        );
    };
    if let Some(read) = &e.read {
        check!(
            Property::AtomicRead,
            *read == expected.before,
            "{}: the reader saw {read:?}, not {:?} (the unlink changes no score)",
            model.name(),
            expected.before
        );
        check!(
            Property::SerialOutcome,
            swept.unlinked == 1,
            "{}: the sweep unlinked {} leaves, not the one candidate",
            model.name(),
            swept.unlinked
        );
    }
    check_accepted_and_serial(model.name(), &e.rejected, &e.observed, &expected.serial);
    let want = usize::from(model == UnlinkModel::U2);
    check!(
        Property::FastHits,
        e.hits == want,
        "{}: {} fast-path hits, expected {want}",
        model.name(),
        e.hits
    );
}
