//! loom models of the RwLock gate's decode append on the real tree (DESIGN
//! §10, sync-anchors §7.6). Built only with `--cfg crtc_loom`, where every
//! lock, atomic, `Arc` and thread of the tree comes from loom through the
//! facade, so loom explores the real code's interleavings.
//!
//! Each model is a tiny tree (one leaf of 4 blocks shared by ranks A and B,
//! set up sequentially), then two modelled threads (each with its own lane,
//! the tree in an `Arc`) while the main thread waits:
//!
//! - **L1** A fast-appends `[5]` under `[1,2,3,4]` while a reader scores
//!   `[1,2,3,4,5]`: the read equals the before scores (A=4, B=4) or the after
//!   scores (A=5, B=4) for every rank at once — never more (C1), never a mix.
//! - **L2** A fast-appends `[5]`, then stores `[7]` under `[1,2]`, while B
//!   stores `[9]` under `[1,2]` (a divergent store that splits the leaf at 2).
//!   After B's split, A's lane entry for block 2 names the internal prefix
//!   `[1,2]`, whose tail is 2: only the internal check keeps the fast path off.
//! - **L3** A fast-appends `[5]` while B evicts `[3,4]` of the shared leaf.
//! - **L4a** A appends `[5]` and B appends `[6]`, both under 4: exactly one
//!   fast path wins, the other store splits.
//! - **L4b** A appends `[5]` under 4 while B stores `[4,8]` under `[1,2,3]`:
//!   B's general path plans "reuse 4 and extend the leaf" with a version that
//!   A's append must invalidate.
//!
//! In L2–L4 the main thread reads every query of the model while the writers
//! run; each read must stay within its bounds (`ReadBounds`): at most the
//! blocks the rank ever stored (C1), at least the blocks it held throughout.
//!
//! L2–L4 compare the final state (scores of a fixed query set, the sorted dump
//! with event ids zeroed, the node count) with the set of serial outcomes:
//! the same events applied in every serial order (each thread's own order
//! kept) on fresh trees with the fast path off. The serial outcomes are
//! computed in the same test, by a one-execution loom model before the
//! exploration (a tree needs loom to run; computing them inside every
//! explored execution would double its cost without exploring anything).
//!
//! The preemption bound is `CRTC_LOOM_PREEMPTIONS`, else
//! `LOOM_MAX_PREEMPTIONS`, else 2. Run single-threaded (`--test-threads=1`):
//! the checkers' reclaimer and mutant switch are process-global.
//!
//! Negative controls (`loom_mutants_are_caught`): every RwLock mutant is run
//! against the models that must catch it, each in a child process of this
//! test binary (see `crtc_verification::models`), and must make one fail.
//! `CRTC_LOOM_MUTANT_MATRIX=1` runs every mutant against every model instead
//! (slow: a surviving pair explores its whole model).

#![cfg(crtc_loom)]

use crtc::types::WorkerWithDpRank;
use crtc_strategies::mutants::Mutant;
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::RwLockGate;
use crtc_verification::models::{
    child_request, child_run, is_fast, model_config, observe, query, rank, remove, spawn_child,
    store, Observation, Scenario,
};
use std::cell::{Cell, RefCell};
use std::ops::RangeInclusive;
use std::time::Instant;

type G = RwLockGate;

const A: u64 = 1;
const B: u64 = 2;
const LEAF: [u64; 4] = [1, 2, 3, 4];

/// The test that doubles as the negative controls' child.
const MUTANT_TEST: &str = "loom_mutants_are_caught";

thread_local! {
    /// Executions the current model explored (loom runs every modelled
    /// thread on this OS thread).
    static EXECUTIONS: Cell<u64> = const { Cell::new(0) };
    /// Hands the preliminary model's result out of its closure.
    static PRELIMINARY: RefCell<Option<Preliminary>> = const { RefCell::new(None) };
}

/// What the preliminary (single-threaded) run computes for a model.
#[derive(Clone, Debug)]
struct Preliminary {
    /// Final states of every serial order, fast path off.
    serial: Vec<Observation>,
    /// L1: the reader's query scored right after the setup.
    before: Vec<(WorkerWithDpRank, u32)>,
}

fn preemption_bound() -> usize {
    ["CRTC_LOOM_PREEMPTIONS", "LOOM_MAX_PREEMPTIONS"]
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .map(|v| v.trim().parse().expect("a preemption bound"))
        .unwrap_or(2)
}

/// A loom builder (reading loom's own `LOOM_*` variables) whose branch
/// limit fits the real tree: one store is a few hundred loom operations, and
/// loom counts every one of them, even while only one thread runs.
fn builder() -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    if std::env::var("LOOM_MAX_BRANCHES").is_err() {
        builder.max_branches = MAX_BRANCHES;
    }
    builder
}

/// Default branch limit per execution (see [`builder`]).
const MAX_BRANCHES: usize = 100_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    L1,
    L2,
    L3,
    L4a,
    L4b,
}

/// The query the L1 reader scores.
const L1_QUERY: [u64; 5] = [1, 2, 3, 4, 5];

impl Model {
    const ALL: [Model; 5] = [Model::L1, Model::L2, Model::L3, Model::L4a, Model::L4b];

    fn name(self) -> &'static str {
        match self {
            Model::L1 => "L1",
            Model::L2 => "L2",
            Model::L3 => "L3",
            Model::L4a => "L4a",
            Model::L4b => "L4b",
        }
    }

    fn by_name(name: &str) -> Option<Model> {
        Model::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Both ranks full on the leaf `[1,2,3,4]`: A on lane 0, B on lane 1.
    fn setup() -> Vec<(usize, crtc::types::RouterEvent)> {
        vec![(0, store(A, &[], &LEAF)), (1, store(B, &[], &LEAF))]
    }

    fn scenario(self) -> Scenario {
        let (name, threads, queries): (_, Vec<Vec<_>>, Vec<Vec<u64>>) = match self {
            Model::L1 => (
                "fast append vs reader",
                vec![vec![store(A, &LEAF, &[5])], vec![]],
                vec![L1_QUERY.to_vec(), LEAF.to_vec()],
            ),
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
        };
        Scenario {
            name,
            setup: Self::setup(),
            threads,
            queries,
        }
    }

    /// How many of the threads' stores the fast path may apply.
    fn fast_hits(self) -> RangeInclusive<usize> {
        match self {
            // A's append always finds A full on the tail.
            Model::L1 | Model::L3 => 1..=1,
            // A's `[5]` misses after B's split (stale entry); `[7]` never hits.
            Model::L2 => 0..=1,
            // Exactly one of the two appends wins.
            Model::L4a => 1..=1,
            // A hits unless B extended first; B's parent is never the tail.
            Model::L4b => 0..=1,
        }
    }

    /// Computes the serial outcomes (and L1's before-scores) in a
    /// one-execution loom model.
    fn preliminary(self) -> Preliminary {
        let scenario = self.scenario();
        builder().check(move || {
            let serial = scenario.serial_outcomes::<G>();
            let (tree, lanes) = scenario.prepare::<G>(model_config(false));
            let before = tree.find_matches(&query(&L1_QUERY), false).sorted();
            drop(lanes);
            drop(tree);
            PRELIMINARY.with(|p| *p.borrow_mut() = Some(Preliminary { serial, before }));
        });
        PRELIMINARY
            .with(|p| p.borrow_mut().take())
            .expect("the preliminary model ran")
    }

    /// Explores the model; panics when a check fails. Returns a summary.
    fn check(self) -> String {
        let preliminary = self.preliminary();
        if self == Model::L1 {
            let a = rank(A);
            let b = rank(B);
            assert_eq!(preliminary.before, vec![(a, 4), (b, 4)], "L1 before");
            let after = &preliminary.serial[0].scores[0].1;
            assert_eq!(after, &vec![(a, 5), (b, 4)], "L1 after");
        }
        let scenario = self.scenario();
        let mut builder = builder();
        let bound = preemption_bound();
        builder.preemption_bound = Some(bound);
        EXECUTIONS.with(|c| c.set(0));
        let start = Instant::now();
        builder.check(move || run(self, &scenario, &preliminary));
        format!(
            "{} executions in {:.1} s (preemption bound {bound})",
            EXECUTIONS.with(Cell::get),
            start.elapsed().as_secs_f64()
        )
    }
}

/// One explored execution of `model`.
fn run(model: Model, scenario: &Scenario, preliminary: &Preliminary) {
    EXECUTIONS.with(|c| c.set(c.get() + 1));
    let (tree, lanes) = scenario.prepare::<G>(model_config(true));
    let tree = Arc::new(tree);
    let mut writers = Vec::new();
    let mut reader = None;
    for (lane, events) in lanes.into_iter().zip(scenario.threads.iter().cloned()) {
        let tree = Arc::clone(&tree);
        if events.is_empty() && model == Model::L1 {
            drop(lane);
            reader = Some(thread::spawn(move || {
                tree.find_matches(&query(&L1_QUERY), false).sorted()
            }));
            continue;
        }
        let mut lane = lane;
        writers.push(thread::spawn(move || {
            let outcomes: Vec<_> = events
                .iter()
                .map(|event| tree.apply_event(&mut lane, event))
                .collect();
            (outcomes, lane)
        }));
    }
    // L2–L4: the main thread reads every query while the writers run.
    let reads: Vec<_> = if model == Model::L1 {
        Vec::new()
    } else {
        scenario
            .queries
            .iter()
            .map(|q| (q.clone(), tree.find_matches(&query(q), false)))
            .collect()
    };
    let results: Vec<_> = writers
        .into_iter()
        .map(|h| h.join().expect("a writer thread panicked"))
        .collect();
    let read = reader.map(|h| h.join().expect("the reader thread panicked"));
    let mut hits = 0;
    let mut rejected = Vec::new();
    for (outcomes, _) in &results {
        for outcome in outcomes {
            match outcome {
                Ok(outcome) => hits += usize::from(is_fast(outcome)),
                Err(e) => rejected.push(e.to_string()),
            }
        }
    }
    let observed = observe(&tree, &scenario.queries);
    // Everything of this execution is dropped before the checks run, so a
    // failing check leaves no deferred frees behind.
    drop(results);
    drop(tree);
    assert!(
        rejected.is_empty(),
        "{}: rejected events {rejected:?}",
        model.name()
    );
    let bounds = scenario.read_bounds();
    for (q, scores) in &reads {
        if let Err(e) = bounds.check(&query(q), scores) {
            panic!(
                "{}: a read during the writes broke its bounds: {e}",
                model.name()
            );
        }
    }
    if let Some(read) = read {
        let after = &preliminary.serial[0].scores[0].1;
        assert!(
            read == preliminary.before || &read == after,
            "L1: the reader saw {read:?}, neither the before scores {:?} nor the after scores {after:?}",
            preliminary.before
        );
    }
    assert!(
        preliminary.serial.contains(&observed),
        "{} ({}): the final state is no serial outcome\n  observed: {observed:#?}\n  serial outcomes: {:#?}",
        model.name(),
        scenario.name,
        preliminary.serial
    );
    assert!(
        model.fast_hits().contains(&hits),
        "{}: {hits} fast-path hits, expected {:?}",
        model.name(),
        model.fast_hits()
    );
}

fn report(model: Model) {
    let summary = model.check();
    println!(
        "loom model {} ({}): {summary}",
        model.name(),
        model.scenario().name
    );
}

#[test]
fn l1_fast_append_vs_reader() {
    report(Model::L1);
}

#[test]
fn l2_fast_append_vs_divergent_split() {
    report(Model::L2);
}

#[test]
fn l3_fast_append_vs_removal() {
    report(Model::L3);
}

#[test]
fn l4a_racing_appends_on_a_shared_leaf() {
    report(Model::L4a);
}

#[test]
fn l4b_fast_append_vs_planned_extension() {
    report(Model::L4b);
}

/// Which models must catch each mutant (the first that fails suffices).
fn catchers(mutant: Mutant) -> Vec<Model> {
    if std::env::var("CRTC_LOOM_MUTANT_MATRIX").is_ok_and(|v| v == "1") {
        return Model::ALL.to_vec();
    }
    match mutant {
        Mutant::SkipInternalCheck => vec![Model::L2],
        Mutant::ClearBitBeforeCutoff => vec![Model::L1],
        Mutant::NoInvalidation => vec![Model::L4b],
        Mutant::TailCheckOutsideSection => vec![Model::L4a, Model::L4b],
        _ => vec![],
    }
}

#[test]
fn loom_mutants_are_caught() {
    if let Some((mutant, model)) = child_request() {
        let model = Model::by_name(&model).expect("a known model");
        child_run(mutant, model.name(), || model.check());
        return;
    }
    let matrix = std::env::var("CRTC_LOOM_MUTANT_MATRIX").is_ok_and(|v| v == "1");
    let mut survivors = Vec::new();
    for mutant in Mutant::RWLOCK {
        let mut caught_by = Vec::new();
        for model in catchers(mutant) {
            let start = Instant::now();
            let verdict = spawn_child(MUTANT_TEST, mutant, model.name());
            let secs = start.elapsed().as_secs_f64();
            if verdict.caught {
                let why = verdict.panic.unwrap_or_default();
                println!(
                    "mutant {mutant:?}: caught by {} in {secs:.1} s ({why})",
                    model.name()
                );
                caught_by.push(model);
                if !matrix {
                    break;
                }
            } else {
                println!(
                    "mutant {mutant:?}: survived {} in {secs:.1} s ({})",
                    model.name(),
                    verdict.detail
                );
            }
        }
        if caught_by.is_empty() {
            survivors.push(mutant);
        }
    }
    println!(
        "loom mutants: {} of {} caught",
        Mutant::RWLOCK.len() - survivors.len(),
        Mutant::RWLOCK.len()
    );
    assert!(
        survivors.is_empty(),
        "mutants no loom model caught: {survivors:?}"
    );
}

#[test]
fn serial_outcomes_are_as_designed() {
    // L2 and L3 and L4a have one serial outcome; L4b has two (A first splits
    // twice, B first extends then splits once).
    let counts: Vec<(Model, usize)> = Model::ALL
        .into_iter()
        .map(|m| (m, m.preliminary().serial.len()))
        .collect();
    for (model, count) in &counts {
        let expected = if *model == Model::L4b { 2 } else { 1 };
        assert_eq!(*count, expected, "{}: serial outcomes", model.name());
    }
}
