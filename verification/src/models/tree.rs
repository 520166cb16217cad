//! loom models of the decode append on the real tree (the protocols in
//! papers/protocols.md), generic over the gate. Two ranks, A (lane 0) and B
//! (lane 1), both full on the leaf `[1,2,3,4]` after the setup:
//!
//! - **L1** A appends `[5]` under 4 on the fast path while a reader thread
//!   scores `[1,2,3,4,5]`: the reader sees the scores before or after the
//!   append (A 4 or 5, B 4), nothing else.
//! - **L2r** B stores `[9]` under `[1,2]` (a split at 2, a new parent and two
//!   children) while a reader scores `[1,2,9]`: before (A 2, B 2) or after
//!   (B 3), nothing else. The reader half of L2, on its own.
//! - **L3r** B evicts `[3,4]` while a reader scores `[1,2,3,4]`: before (B 4)
//!   or after (B 2). The reader half of L3, on its own.
//! - **L2t** (its own setup: A and B full on the node `[1,2,1,2]`, whose
//!   local hashes repeat, and A's `[5]`, `[6]` and `[7]` under it: three
//!   children, a sharded set under the checkers' `COMPACT_MAX` of 2) B
//!   stores `[9]` under `[1,2]` (a split at 2: the prefix `[1,2]` with the
//!   children `[1,2]`, which takes the sharded set, and `[9]`) while a
//!   reader scores `[1,2,1,2,1,2]`: A 4 and B 4 before and after, and
//!   nothing else. The split changes no score of that query; what it rules out is a
//!   torn view: the old edge with the new child map walks on into the
//!   suffix `[1,2]` (A and B 6, blocks nobody holds), the new edge with the
//!   child map from before (or the one emptied by the hand-off) stops at 2.
//!   With distinct local hashes both views score like the before or after
//!   state, which is why L2r cannot see them.
//! - **L2** A appends `[5]`, then stores `[7]` under `[1,2]`; B stores `[9]`
//!   under `[1,2]`. Both divergent stores split the leaf at 2.
//! - **L3** A appends `[5]` under 4 while B evicts `[3,4]` of the shared leaf.
//! - **L4a** A appends `[5]` and B appends `[6]`, both under 4: exactly one
//!   fast path wins, the other store splits.
//! - **L4b** A appends `[5]` under 4 while B stores `[4,8]` under `[1,2,3]`:
//!   B's general path plans "reuse 4 and extend the leaf" with a version that
//!   A's append must invalidate.
//! - **L5** (its own setup: A full on the leaf, B holding `[1,2]` of it) A
//!   appends `[5]` under 4 (the exact-size edge grows) and `[6]` under 5, a
//!   pure append into the spare capacity (it demotes no one, so the epoch
//!   gate publishes only the buffer's length), then scores
//!   `[1,2,3,4,5,6]` on its own thread, while B raises its coverage to 3 by
//!   storing `[3]` under `[1,2]` (a shared commit that replaces the epoch
//!   gate's snapshot without a plan bump or an exclusive section). A's read
//!   must credit A's own block (read-your-writes): a reader holding the
//!   snapshot from before B's raise must not trust that snapshot's shorter
//!   length (a race the epoch gate once had; `papers/protocols.md` §4, §5).
//!
//! In L2–L4 a reader thread reads queries while the writers run ([`Reads`]
//! says which); each read must stay within its bounds (`ReadBounds`): at
//! most the blocks the rank ever stored (C1), at least the blocks it held
//! throughout.
//!
//! Every execution runs between [`grace::begin_execution`] and
//! [`grace::end_execution`]: over a gate whose reclaimer is
//! [`GraceReclaim`](super::grace::GraceReclaim) (the test binaries use it for
//! every gate), a child map, node or payload array freed while a pinned
//! thread may hold it fails the model (`no-free-while-held`).
//!
//! L2–L4 compare the final state (scores of a fixed query set, the sorted
//! dump with event ids zeroed, the node count) with the set of serial
//! outcomes: the same events applied in every serial order (each thread's
//! own order kept) on fresh trees with the fast path off. The serial
//! outcomes are computed once, in a one-execution model before the
//! exploration (a tree needs the checker's runtime to run; computing them
//! inside every explored execution would double its cost without exploring
//! anything).

use super::{
    check_accepted_and_serial, grace, is_fast, model_config, observe, query, rank, remove,
    run_once, store, summarize_capped, Explorer, NamedModel, Observation, Scenario,
};
use crate::property::Property;
use crate::{check, violated};
use crtc::types::{OverlapScores, RouterEvent, WorkerWithDpRank};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;
use std::cell::Cell;
use std::ops::RangeInclusive;

const A: u64 = 1;
const B: u64 = 2;
const LEAF: [u64; 4] = [1, 2, 3, 4];
/// L2t's leaf: its local hashes repeat, so a torn view scores differently.
const TORN_LEAF: [u64; 4] = [1, 2, 1, 2];
/// The query the L2t reader scores: the leaf, and its suffix once more.
const TORN_QUERY: [u64; 6] = [1, 2, 1, 2, 1, 2];
/// A's children under L2t's node: one more than a compact set holds under
/// the checkers, so the split moves a sharded set.
const TORN_CHILDREN: [u64; 3] = [5, 6, 7];
/// The query the L1 reader scores.
const L1_QUERY: [u64; 5] = [1, 2, 3, 4, 5];
/// A model's name, the events of each thread and the queries of its final
/// state (see [`Scenario`]).
type Parts = (&'static str, Vec<Vec<RouterEvent>>, Vec<Vec<u64>>);
/// The query A scores after its own appends in L5.
const L5_QUERY: [u64; 6] = [1, 2, 3, 4, 5, 6];

/// How much of a model to explore: the reads of L2–L4 and an optional cap
/// on loom's executions (the depth-first prefix of the exploration; the
/// summary says when the cap was reached).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The concurrent reads of L2–L4.
    pub reads: Reads,
    /// Most executions to explore (`None`: all of them).
    pub cap: Option<u64>,
}

impl Budget {
    /// Every execution, with `reads`.
    pub fn full(reads: Reads) -> Self {
        Self { reads, cap: None }
    }

    /// `self`, overridden by `CRTC_LOOM_READS` and `CRTC_LOOM_CAP` (a number;
    /// 0 removes the cap).
    pub fn from_env(self) -> Self {
        let cap = match std::env::var("CRTC_LOOM_CAP") {
            Ok(v) => match v.trim().parse().expect("CRTC_LOOM_CAP: a number") {
                0 => None,
                n => Some(n),
            },
            Err(_) => self.cap,
        };
        Self {
            reads: Reads::from_env(self.reads),
            cap,
        }
    }
}

/// Which queries the reader thread reads while the writers of L2–L4 run.
///
/// Every read of an optimistic gate races the writers' payload stores, and
/// loom explores every store each of its loads may return, so the number of
/// concurrent reads drives the cost of the model. `All` reads every query of
/// the model; `First` only the first one (the longest, which walks every node
/// the writers touch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// Every query of the model.
    All,
    /// The model's first query.
    First,
    /// No concurrent reads (the writers alone).
    None,
}

impl Reads {
    /// `CRTC_LOOM_READS` (`all`, `first` or `none`), else `default`.
    pub fn from_env(default: Reads) -> Reads {
        match std::env::var("CRTC_LOOM_READS").as_deref() {
            Ok("all") => Reads::All,
            Ok("first") => Reads::First,
            Ok("none") => Reads::None,
            Ok(other) => panic!("CRTC_LOOM_READS: `all`, `first` or `none`, not {other:?}"),
            Err(_) => default,
        }
    }
}

/// The tree models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// Fast append vs reader.
    L1,
    /// Reader vs a divergent store splitting the leaf (B's store of L2).
    L2r,
    /// Reader vs a removal on the leaf (B's removal of L3).
    L3r,
    /// Reader vs a split of a leaf whose local hashes repeat.
    L2t,
    /// Fast append vs divergent stores splitting the leaf.
    L2,
    /// Fast append vs removal on the leaf.
    L3,
    /// Two ranks racing appends on a shared leaf.
    L4a,
    /// Fast append vs a planned leaf extension.
    L4b,
    /// A pure append, then the appender's own read, vs a coverage raise.
    L5,
}

/// What the preliminary (single-threaded) run computes for a model.
#[derive(Clone, Debug)]
pub struct Preliminary {
    /// Final states of every serial order, fast path off.
    pub serial: Vec<Observation>,
    /// The reader models: the reader's query (the first) scored right
    /// after the setup.
    pub before: Vec<(WorkerWithDpRank, u32)>,
}

impl Model {
    /// Every model.
    pub const ALL: [Model; 9] = [
        Model::L1,
        Model::L2r,
        Model::L3r,
        Model::L2t,
        Model::L2,
        Model::L3,
        Model::L4a,
        Model::L4b,
        Model::L5,
    ];

    /// Whether the model is a single reader against one writer, whose read
    /// must equal the scores before or after the write.
    pub fn is_reader_model(self) -> bool {
        matches!(self, Model::L1 | Model::L2r | Model::L3r | Model::L2t)
    }

    /// Whether the write changes the reader's scores (every reader model
    /// but L2t, whose write changes no score of its query: there the check
    /// is that no torn view shows).
    fn write_changes_read(self) -> bool {
        self.is_reader_model() && self != Model::L2t
    }

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Model::L1 => "L1",
            Model::L2r => "L2r",
            Model::L3r => "L3r",
            Model::L2t => "L2t",
            Model::L2 => "L2",
            Model::L3 => "L3",
            Model::L4a => "L4a",
            Model::L4b => "L4b",
            Model::L5 => "L5",
        }
    }

    /// Both ranks full on the leaf `[1,2,3,4]`: A on lane 0, B on lane 1
    /// (L5: B holds `[1,2]` of it; L2t: the node is `[1,2,1,2]`, with A's
    /// three children under it).
    fn setup(self) -> Vec<(usize, RouterEvent)> {
        let leaf: &[u64] = if self == Model::L2t {
            &TORN_LEAF
        } else {
            &LEAF
        };
        let b_holds: &[u64] = if self == Model::L5 { &[1, 2] } else { leaf };
        let mut setup = vec![(0, store(A, &[], leaf)), (1, store(B, &[], b_holds))];
        if self == Model::L2t {
            setup.extend(TORN_CHILDREN.map(|c| (0, store(A, &TORN_LEAF, &[c]))));
        }
        setup
    }

    /// The model's scenario.
    pub fn scenario(self) -> Scenario {
        let (name, threads, queries) = self.reader_parts().unwrap_or_else(|| self.writer_parts());
        Scenario {
            name,
            setup: self.setup(),
            threads,
            queries,
        }
    }

    /// A reader model's name, threads (the writer is the second) and
    /// queries (the reader's first); `None` for the other models.
    fn reader_parts(self) -> Option<Parts> {
        Some(match self {
            Model::L1 => (
                "fast append vs reader",
                vec![vec![store(A, &LEAF, &[5])], vec![]],
                vec![L1_QUERY.to_vec(), LEAF.to_vec()],
            ),
            Model::L2r => (
                "reader vs divergent store splitting the leaf",
                vec![vec![], vec![store(B, &[1, 2], &[9])]],
                vec![vec![1, 2, 9], LEAF.to_vec(), vec![1, 2]],
            ),
            Model::L3r => (
                "reader vs removal on the leaf",
                vec![vec![], vec![remove(B, &[1, 2], &[3, 4])]],
                vec![LEAF.to_vec(), vec![1, 2]],
            ),
            Model::L2t => (
                "reader vs a split of a leaf whose local hashes repeat",
                vec![vec![], vec![store(B, &[1, 2], &[9])]],
                vec![
                    TORN_QUERY.to_vec(),
                    TORN_LEAF.to_vec(),
                    vec![1, 2, 9],
                    vec![1, 2, 1, 2, 6],
                ],
            ),
            _ => return None,
        })
    }

    /// The name, threads and queries of a model with writers on both
    /// threads (every model but the reader models).
    fn writer_parts(self) -> Parts {
        match self {
            Model::L2 => (
                "fast append vs divergent store splitting the leaf",
                vec![
                    vec![store(A, &LEAF, &[5]), store(A, &[1, 2], &[7])],
                    vec![store(B, &[1, 2], &[9])],
                ],
                vec![
                    vec![1, 2, 3, 4, 5],
                    LEAF.to_vec(),
                    vec![1, 2, 7],
                    vec![1, 2, 9],
                    vec![1, 2],
                ],
            ),
            Model::L3 => (
                "fast append vs removal on the leaf",
                vec![
                    vec![store(A, &LEAF, &[5])],
                    vec![remove(B, &[1, 2], &[3, 4])],
                ],
                vec![vec![1, 2, 3, 4, 5], LEAF.to_vec(), vec![1, 2]],
            ),
            Model::L4a => (
                "two ranks racing appends on a shared leaf",
                vec![vec![store(A, &LEAF, &[5])], vec![store(B, &LEAF, &[6])]],
                vec![vec![1, 2, 3, 4, 5], vec![1, 2, 3, 4, 6], LEAF.to_vec()],
            ),
            Model::L4b => (
                "fast append vs a planned leaf extension",
                vec![
                    vec![store(A, &LEAF, &[5])],
                    vec![store(B, &[1, 2, 3], &[4, 8])],
                ],
                vec![vec![1, 2, 3, 4, 5], vec![1, 2, 3, 4, 8], LEAF.to_vec()],
            ),
            Model::L5 => (
                "pure append and the appender's own read vs a coverage raise",
                vec![
                    vec![store(A, &LEAF, &[5]), store(A, &L1_QUERY, &[6])],
                    vec![store(B, &[1, 2], &[3])],
                ],
                vec![L5_QUERY.to_vec(), LEAF.to_vec()],
            ),
            _ => unreachable!("{} is a reader model", self.name()),
        }
    }

    /// How many of the threads' stores the fast path may apply in one
    /// execution. A model whose range reaches above 0 claims fast-path
    /// coverage, and [`Model::check`] also requires a hit in at least one
    /// execution of its exploration (`fast-hits`).
    pub fn fast_hits(self) -> RangeInclusive<usize> {
        match self {
            // A's append always finds A full on the tail.
            Model::L1 | Model::L3 => 1..=1,
            // No store at a tail.
            Model::L2r | Model::L3r | Model::L2t => 0..=0,
            // A's `[5]` misses after B's split (stale entry); `[7]` never hits.
            Model::L2 => 0..=1,
            // Exactly one of the two appends wins.
            Model::L4a => 1..=1,
            // A hits unless B extended first; B's parent is never the tail.
            Model::L4b => 0..=1,
            // A is full on the tail twice; B is not full.
            Model::L5 => 2..=2,
        }
    }

    /// The preemption bound the model needs above the configured one: L5's
    /// catching interleaving (A's read loads the snapshot, B's whole store
    /// runs, A re-loads the pointer) is first reached at bound 3 (its mutant
    /// survives bound 2 and is caught at 3).
    pub fn preemption_bound(self) -> Option<usize> {
        (self == Model::L5).then(|| super::preemption_bound().max(3))
    }

    /// Serial outcomes: L4b has two (A first splits twice, B first extends
    /// then splits once), the others one.
    pub fn expected_serial_outcomes(self) -> usize {
        if self == Model::L4b {
            2
        } else {
            1
        }
    }

    /// Computes the serial outcomes (and the reader models' before-scores)
    /// in a one-execution run.
    pub fn preliminary<G: ShapeGate>(self, explorer: &dyn Explorer) -> Preliminary {
        let scenario = self.scenario();
        run_once(explorer, move || {
            grace::begin_execution();
            let serial = scenario.serial_outcomes::<G>();
            let (tree, lanes) = scenario.prepare::<G>(model_config(false));
            let before = tree
                .find_matches(&query(&scenario.queries[0]), false)
                .sorted();
            drop(lanes);
            drop(tree);
            grace::end_execution();
            Preliminary { serial, before }
        })
    }

    /// Explores the model for gate `G`; panics when a check fails. Returns a
    /// summary.
    pub fn check<G: ShapeGate>(self, explorer: &dyn Explorer, budget: Budget) -> String {
        let preliminary = self.preliminary::<G>(explorer);
        if self == Model::L1 {
            let (a, b) = (rank(A), rank(B));
            assert_eq!(preliminary.before, vec![(a, 4), (b, 4)], "L1 before");
            let after = &preliminary.serial[0].scores[0].1;
            assert_eq!(after, &vec![(a, 5), (b, 4)], "L1 after");
        }
        if self.write_changes_read() {
            assert_ne!(
                preliminary.before,
                preliminary.serial[0].scores[0].1,
                "{}: the write must change the reader's scores",
                self.name()
            );
        }
        if self == Model::L2t {
            let (a, b) = (rank(A), rank(B));
            assert_eq!(preliminary.before, vec![(a, 4), (b, 4)], "L2t before");
            let after = &preliminary.serial[0].scores[0].1;
            assert_eq!(after, &preliminary.before, "L2t after");
        }
        let scenario = self.scenario();
        let reads = budget.reads;
        grace::take_freed();
        FAST_EXECUTIONS.with(|n| n.set(0));
        let bound = self.preemption_bound();
        let summary = summarize_capped(explorer, budget.cap, || {
            explorer.explore_bounded(
                Box::new(move || run::<G>(self, &scenario, &preliminary, reads)),
                budget.cap,
                bound,
            )
        });
        let fast = FAST_EXECUTIONS.with(Cell::get);
        check!(
            Property::FastHits,
            fast > 0 || *self.fast_hits().end() == 0,
            "{}: no execution of the exploration took the fast path (expected {:?} hits)",
            self.name(),
            self.fast_hits()
        );
        let raised = bound.map_or(String::new(), |b| format!("; this model at bound {b}"));
        format!(
            "{summary}{raised}; {fast} executions with a fast-path hit; {} blocks freed by the reclaimer",
            grace::take_freed()
        )
    }

    /// The model as a [`NamedModel`] for gate `G`.
    pub fn named<G: ShapeGate>(
        self,
        explorer: impl Explorer + 'static,
        budget: Budget,
    ) -> NamedModel {
        NamedModel {
            name: self.name(),
            what: self.scenario().name,
            run: Box::new(move || self.check::<G>(&explorer, budget)),
        }
    }
}

/// What one execution produced, gathered (and the tree dropped) before any
/// check runs, so a failing check leaves no deferred frees behind.
struct Execution {
    rejected: Vec<String>,
    hits: usize,
    /// L5: A's score for its own query right after its appends.
    own_read: Option<u32>,
    /// The reader thread's queries with their scores.
    concurrent: Vec<(Vec<u64>, OverlapScores)>,
    /// The reader models' one read, sorted.
    read: Option<Vec<(WorkerWithDpRank, u32)>>,
    observed: Observation,
}

thread_local! {
    /// Executions of the model being explored in which a store took the
    /// fast path (loom runs every modelled thread on the test's OS thread).
    static FAST_EXECUTIONS: Cell<u64> = const { Cell::new(0) };
}

/// One explored execution of `model`.
fn run<G: ShapeGate>(model: Model, scenario: &Scenario, preliminary: &Preliminary, reads: Reads) {
    let execution = execute::<G>(model, scenario, reads);
    if execution.hits > 0 {
        FAST_EXECUTIONS.with(|n| n.set(n.get() + 1));
    }
    check_execution(model, scenario, preliminary, &execution);
}

/// The queries the reader thread scores: the reader models' one query, else
/// what `reads` says.
fn reader_queries(model: Model, scenario: &Scenario, reads: Reads) -> Vec<Vec<u64>> {
    match (model, reads) {
        (m, _) if m.is_reader_model() => scenario.queries[..1].to_vec(),
        (_, Reads::All) => scenario.queries.clone(),
        (_, Reads::First) => scenario.queries[..1].to_vec(),
        (_, Reads::None) => Vec::new(),
    }
}

/// Runs the writers and the reader on a fresh tree, between the grace
/// reclaimer's execution bounds.
fn execute<G: ShapeGate>(model: Model, scenario: &Scenario, reads: Reads) -> Execution {
    grace::begin_execution();
    let (tree, lanes) = scenario.prepare::<G>(model_config(true));
    let tree = Arc::new(tree);
    let writers: Vec<_> = lanes
        .into_iter()
        .zip(scenario.threads.iter().cloned())
        .filter(|(_, events)| !events.is_empty())
        .map(|(mut lane, events)| {
            let tree = Arc::clone(&tree);
            thread::spawn(move || {
                let outcomes: Vec<_> = events
                    .iter()
                    .map(|event| tree.apply_event(&mut lane, event))
                    .collect();
                let own_read = (model == Model::L5 && lane_is_a(&events))
                    .then(|| tree.find_matches(&query(&L5_QUERY), false).score(rank(A)));
                (outcomes, lane, own_read)
            })
        })
        .collect();
    // The reader thread is spawned after the writers, so loom's first
    // execution runs the writers before the reads: loom's DPOR keeps only
    // the last access per location, and a writer that loads a location
    // before storing it would hide an earlier concurrent read of it (see
    // `gate::dpor_sanity`).
    let queries = reader_queries(model, scenario, reads);
    let reader = {
        let tree = Arc::clone(&tree);
        thread::spawn(move || {
            queries
                .into_iter()
                .map(|q| {
                    let scores = tree.find_matches(&query(&q), false);
                    (q, scores)
                })
                .collect::<Vec<_>>()
        })
    };
    let results: Vec<_> = writers
        .into_iter()
        .map(|h| h.join().expect("a writer thread panicked"))
        .collect();
    let mut concurrent = reader.join().expect("the reader thread panicked");
    let read = model
        .is_reader_model()
        .then(|| concurrent.remove(0).1.sorted());
    let outcomes = results.iter().flat_map(|(outcomes, _, _)| outcomes);
    let hits = outcomes.clone().flatten().filter(|o| is_fast(o)).count();
    let rejected = outcomes
        .filter_map(|o| o.as_ref().err().map(ToString::to_string))
        .collect();
    let own_read = results.iter().find_map(|(_, _, own)| *own);
    let observed = observe(&*tree, &scenario.queries);
    drop(results);
    drop(tree);
    grace::end_execution();
    Execution {
        rejected,
        hits,
        own_read,
        concurrent,
        read,
        observed,
    }
}

/// Every check of one execution.
fn check_execution(model: Model, scenario: &Scenario, preliminary: &Preliminary, e: &Execution) {
    if let Some(own) = e.own_read {
        check!(
            Property::ReadYourWrites,
            own == 6,
            "L5: A scored {own} for {L5_QUERY:?} right after its own append of block 6"
        );
    }
    let bounds = scenario.read_bounds();
    for (q, scores) in &e.concurrent {
        if let Err(err) = bounds.check(&query(q), scores) {
            violated!(
                Property::ReadBounds,
                "{}: a read during the writes broke its bounds: {err}",
                model.name()
            );
        }
    }
    if let Some(read) = &e.read {
        let after = &preliminary.serial[0].scores[0].1;
        check!(
            Property::AtomicRead,
            *read == preliminary.before || read == after,
            "{}: the reader saw {read:?}, neither the before scores {:?} nor the after scores {after:?}",
            model.name(),
            preliminary.before
        );
    }
    check_accepted_and_serial(
        &format!("{} ({})", model.name(), scenario.name),
        &e.rejected,
        &e.observed,
        &preliminary.serial,
    );
    check!(
        Property::FastHits,
        model.fast_hits().contains(&e.hits),
        "{}: {} fast-path hits, expected {:?}",
        model.name(),
        e.hits,
        model.fast_hits()
    );
}

/// Whether a thread's events are A's (the L5 thread that reads its own
/// append).
fn lane_is_a(events: &[RouterEvent]) -> bool {
    events.first().is_some_and(|e| e.rank() == rank(A))
}

/// Checks that every model has as many serial outcomes as designed.
pub fn check_serial_outcomes<G: ShapeGate>(explorer: &dyn Explorer) {
    for model in Model::ALL {
        let count = model.preliminary::<G>(explorer).serial.len();
        assert_eq!(
            count,
            model.expected_serial_outcomes(),
            "{}: serial outcomes",
            model.name()
        );
    }
}

/// One gate's loom suite, the same for every gate: the tree models under
/// `budget` (each read from the environment's overrides), the gate-level
/// models and the sweep models, over the grace-period reclaimer, whose
/// quarantining allocator the test binary must install.
pub fn gate_suite<G: ShapeGate, E: Explorer + Clone + 'static>(
    gate: &'static str,
    explorer: &E,
    budget: impl Fn(Model) -> Budget,
) -> super::Suite {
    assert!(
        super::grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    let mut models: Vec<_> = Model::ALL
        .iter()
        .map(|&m| m.named::<G>(explorer.clone(), budget(m).from_env()))
        .collect();
    models.extend(super::gate::named::<G, _>(
        explorer,
        &super::gate::GateModel::ALL,
    ));
    models.extend(
        super::unlink::UnlinkModel::ALL
            .iter()
            .map(|m| m.named::<G>(explorer.clone())),
    );
    super::Suite {
        checker: "loom",
        gate,
        models,
    }
}
