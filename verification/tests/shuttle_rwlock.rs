//! shuttle tests of the RwLock tree (DESIGN §10, sync-anchors §7.6): whole-tree
//! scenarios too big for loom, explored by shuttle's random and PCT
//! schedulers. Built only with `--cfg crtc_shuttle`, where the tree's locks,
//! atomics and threads come from shuttle through the facade.
//!
//! Every scenario has two writer threads (each with its own lane, each owning
//! two ranks) and one reader thread; ranks share prefixes across the writers.
//! The streams are strict (evictions leaf-first, no holes), fixed up front:
//!
//! - **mixed**: a shared system prompt (setup), then per rank a continuation
//!   (two ranks on different writers share it), decode storms on the shared
//!   leaf (racing appends of the same blocks) and on private leaves,
//!   divergent stores that split the system prompt, leaf-first evictions,
//!   decoding again from the new tail, and new prompts from the root racing
//!   across the writers (one identical pair, one diverging inside).
//! - **hot leaf**: all four ranks decode the same chain one block at a time
//!   on one leaf, then two of them evict their tails and branch off.
//! - **private subtrees**: each writer's ranks live under their own root
//!   child (prompts, decode storms, divergent stores, evictions); the writers
//!   share only the root, so the final state does not depend on the
//!   interleaving (conflict-free).
//!
//! Checks: every read during the run stays within `ReadBounds` (C1: at most
//! the blocks the rank ever stored; at least the setup blocks it never
//! evicts); after the join, no event was rejected (C4) and every query's
//! scores equal the reference model's held prefix for every rank (C2, strict
//! streams); for the conflict-free scenario, the final state (scores, sorted
//! dump, node count) with the fast path on, and with it off, equals the
//! serial fast-path-off outcome.
//!
//! Knobs: `CRTC_SHUTTLE_ITERS` schedules per (scheduler, seed) (default
//! 3000), `CRTC_SHUTTLE_SEEDS` (default `1 2 3`), PCT depth 3. Run with
//! `--test-threads=1` (the checker state is process-global). Shuttle models
//! every atomic as SeqCst (its warning is silenced here): ordering bugs are
//! loom's job.
//!
//! Negative controls: loom already catches every RwLock mutant
//! (`loom_rwlock.rs`); `shuttle_mutants` runs each mutant against every
//! scenario here too, each in a child process of this test binary with
//! `CRTC_SHUTTLE_MUTANT_ITERS` schedules per (scheduler, seed) (default 300),
//! prints which scenario catches which and fails if a mutant survives all
//! of them. `CRTC_SHUTTLE_MUTANTS=0` skips it.

#![cfg(crtc_shuttle)]

use crtc::reference::Reference;
use crtc::types::RouterEvent;
use crtc_strategies::mutants::Mutant;
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::RwLockGate;
use crtc_verification::models::{
    child_request, child_run, model_config, observe, query, rank, sequence, spawn_child, store,
    Observation, QueryScores, ReadBounds, Scenario,
};
use shuttle::scheduler::{PctScheduler, RandomScheduler, Scheduler};
use shuttle::{Config, Runner};
use std::cell::RefCell;
use std::time::Instant;

type G = RwLockGate;

/// PCT's bug depth.
const PCT_DEPTH: usize = 3;
/// Default schedules per (scheduler, seed).
const DEFAULT_ITERS: usize = 3000;
/// Default schedules per (scheduler, seed) in a negative-control child.
const DEFAULT_MUTANT_ITERS: usize = 300;
/// Rounds the reader makes over its queries.
const READER_ROUNDS: usize = 2;
/// The test that doubles as the negative controls' child.
const MUTANT_TEST: &str = "shuttle_mutants";

fn iterations() -> usize {
    env_number("CRTC_SHUTTLE_ITERS", DEFAULT_ITERS)
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: a number"))
        })
        .unwrap_or(default)
}

fn seeds() -> Vec<u64> {
    let spec = std::env::var("CRTC_SHUTTLE_SEEDS").unwrap_or_else(|_| "1 2 3".to_string());
    spec.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("CRTC_SHUTTLE_SEEDS: numbers"))
        .collect()
}

/// One rank's stream, built step by step; remembers every sequence it
/// stored so the queries can cover them.
struct RankStream {
    worker: u64,
    seq: Vec<u64>,
    events: Vec<RouterEvent>,
    sequences: Vec<Vec<u64>>,
}

impl RankStream {
    fn new(worker: u64) -> Self {
        Self {
            worker,
            seq: Vec::new(),
            events: Vec::new(),
            sequences: Vec::new(),
        }
    }

    /// Stores `locals` under the current sequence (from the root when empty).
    fn extend(&mut self, locals: &[u64]) -> &mut Self {
        self.events.push(store(self.worker, &self.seq, locals));
        self.seq.extend_from_slice(locals);
        self.sequences.push(self.seq.clone());
        self
    }

    /// A new prompt from the root; it becomes the current sequence.
    fn prompt(&mut self, locals: &[u64]) -> &mut Self {
        self.seq.clear();
        self.extend(locals)
    }

    /// A decode storm: one store per block.
    fn decode(&mut self, locals: &[u64]) -> &mut Self {
        for &local in locals {
            self.extend(&[local]);
        }
        self
    }

    /// A divergent store: `locals` under the first `keep` blocks of the
    /// current sequence (a side branch; the current sequence stays).
    fn branch(&mut self, keep: usize, locals: &[u64]) -> &mut Self {
        let prefix = &self.seq[..keep];
        self.events.push(store(self.worker, prefix, locals));
        let mut branch = prefix.to_vec();
        branch.extend_from_slice(locals);
        self.sequences.push(branch);
        self
    }

    /// Evicts the last `n` blocks of the current sequence, leaf first.
    fn evict_tail(&mut self, n: usize) -> &mut Self {
        let hashes = sequence(&self.seq);
        let cut = self.seq.len() - n;
        let evicted = hashes[cut..].iter().rev().copied().collect();
        self.events
            .push(RouterEvent::removed(rank(self.worker), evicted));
        self.seq.truncate(cut);
        self
    }

    /// Moves the events built so far out (e.g. into the setup).
    fn take(&mut self) -> Vec<RouterEvent> {
        std::mem::take(&mut self.events)
    }
}

/// Round-robin merge of two ranks' event lists (one writer's stream).
fn interleave(a: Vec<RouterEvent>, b: Vec<RouterEvent>) -> Vec<RouterEvent> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return out,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
}

/// A shuttle scenario and everything its checks need, computed up front.
struct Case {
    scenario: Scenario,
    /// The reader's queries (raw locals).
    reader_queries: Vec<Vec<u64>>,
    /// Whether the final state is independent of the interleaving.
    conflict_free: bool,
}

impl Case {
    /// Builds a case from four rank streams: ranks 0 and 1 on writer 0,
    /// ranks 2 and 3 on writer 1. `setup` events were taken before.
    fn new(
        name: &'static str,
        setup: [Vec<RouterEvent>; 4],
        mut ranks: [RankStream; 4],
        conflict_free: bool,
    ) -> Self {
        let setup = setup
            .into_iter()
            .enumerate()
            .flat_map(|(i, events)| events.into_iter().map(move |e| (i / 2, e)))
            .collect();
        let [r0, r1, r2, r3] = &mut ranks;
        let threads = vec![
            interleave(r0.take(), r1.take()),
            interleave(r2.take(), r3.take()),
        ];
        let mut queries: Vec<Vec<u64>> = vec![Vec::new()];
        for r in &ranks {
            queries.extend(r.sequences.iter().cloned());
            queries.push(r.seq.clone());
        }
        // One query runs past everything stored.
        if let Some(mut stray) = ranks[0].sequences.last().cloned() {
            stray.push(0x57a7);
            queries.push(stray);
        }
        let mut seen = Vec::new();
        queries.retain(|q| {
            let fresh = !seen.contains(q);
            seen.push(q.clone());
            fresh
        });
        // The reader asks, per rank, its longest and its last sequence.
        let mut reader_queries: Vec<Vec<u64>> = Vec::new();
        for r in &ranks {
            let longest = r.sequences.iter().max_by_key(|s| s.len());
            for q in longest.into_iter().chain([&r.seq]) {
                if !q.is_empty() && !reader_queries.contains(q) {
                    reader_queries.push(q.clone());
                }
            }
        }
        Self {
            scenario: Scenario {
                name,
                setup,
                threads,
                queries,
            },
            reader_queries,
            conflict_free,
        }
    }

    /// Expected scores after the join: the reference model's held prefix for
    /// every known rank and query (ranks are disjoint between writers, so
    /// every interleaving gives the same per-rank model).
    fn expected_scores(&self) -> Vec<QueryScores> {
        let mut model = Reference::new();
        let events = self
            .scenario
            .setup
            .iter()
            .map(|(_, e)| e)
            .chain(self.scenario.threads.iter().flatten());
        for event in events {
            model.apply(event);
        }
        self.scenario
            .queries
            .iter()
            .map(|q| {
                let locals = query(q);
                let scores = model
                    .ranks()
                    .map(|r| (r, model.held_prefix(r, &locals) as u32))
                    .filter(|&(_, s)| s > 0)
                    .collect();
                (q.clone(), scores)
            })
            .collect()
    }
}

/// The mixed scenario: shared system prompt, shared and private decode
/// storms, divergent stores, evictions.
fn mixed() -> Case {
    let system = [1, 2, 3, 4];
    let mut r = [1, 2, 3, 4].map(RankStream::new);
    let setup = [0, 1, 2, 3].map(|i| r[i].extend(&system).take());
    // Rank 1 (writer 0) and rank 3 (writer 1) share a continuation and decode
    // the same blocks on that leaf; rank 3 then diverges.
    r[0].extend(&[5, 6]).decode(&[7, 8, 9, 10, 11]);
    r[2].extend(&[5, 6]).decode(&[7, 8, 9, 13, 14]);
    // Rank 2 (writer 0): private decode, a split of the system prompt, an
    // eviction, decoding again.
    r[1].extend(&[20, 21])
        .decode(&[22, 23, 24, 25])
        .branch(2, &[30])
        .evict_tail(2)
        .decode(&[26]);
    // Rank 4 (writer 1): private decode, a split at 3, an eviction.
    r[3].extend(&[40])
        .decode(&[41, 42, 43])
        .branch(3, &[50])
        .evict_tail(1)
        .decode(&[44]);
    r[0].evict_tail(1);
    // Prompts from the root racing across the writers: ranks 1 and 3 store
    // the same one, rank 4 one that diverges inside it.
    r[0].prompt(&[60, 61, 62]).decode(&[63]);
    r[2].prompt(&[60, 61, 62]);
    r[3].prompt(&[60, 61, 64]);
    Case::new("mixed", setup, r, false)
}

/// The hot-leaf scenario: four ranks decode one chain on one leaf.
fn hot_leaf() -> Case {
    let prompt = [1, 2, 3];
    let chain = [4, 5, 6, 7, 8, 9, 10, 11];
    let mut r = [1, 2, 3, 4].map(RankStream::new);
    let setup = [0, 1, 2, 3].map(|i| r[i].extend(&prompt).take());
    r[0].decode(&chain).evict_tail(2).decode(&[12]);
    r[1].decode(&chain[..5]);
    r[2].decode(&chain).evict_tail(3).decode(&[13]);
    r[3].decode(&chain[..6]).branch(4, &[14]);
    Case::new("hot leaf", setup, r, false)
}

/// The conflict-free scenario: each writer's ranks under their own root
/// child.
fn private_subtrees() -> Case {
    let mut r = [1, 2, 3, 4].map(RankStream::new);
    let setup = [vec![], vec![], vec![], vec![]];
    for (i, base) in [(0, 100), (2, 200)] {
        let prompt = [base, base + 1, base + 2, base + 3];
        r[i].extend(&prompt)
            .decode(&[base + 4, base + 5, base + 6, base + 7])
            .evict_tail(2)
            .decode(&[base + 8]);
        r[i + 1]
            .extend(&prompt)
            .decode(&[base + 4, base + 5])
            .branch(2, &[base + 20, base + 21])
            .decode(&[base + 10, base + 11])
            .evict_tail(1);
    }
    Case::new("private subtrees", setup, r, true)
}

thread_local! {
    /// Hands the preliminary run's result out of its closure.
    static SERIAL: RefCell<Option<Observation>> = const { RefCell::new(None) };
}

/// The serial fast-path-off outcome of a case (writer 0's events, then
/// writer 1's), computed in a one-schedule shuttle run.
fn serial_outcome(case: &Case) -> Observation {
    let scenario = case.scenario.clone();
    Runner::new(RandomScheduler::new_from_seed(0, 1), config()).run(move || {
        let (tree, mut lanes) = scenario.prepare::<G>(model_config(false));
        for (lane, events) in lanes.iter_mut().zip(&scenario.threads) {
            for event in events {
                tree.apply_event(lane, event)
                    .expect("a serial event applies");
            }
        }
        let observed = observe(&tree, &scenario.queries);
        drop(lanes);
        drop(tree);
        SERIAL.with(|s| *s.borrow_mut() = Some(observed));
    });
    SERIAL
        .with(|s| s.borrow_mut().take())
        .expect("the serial run ran")
}

fn config() -> Config {
    let mut config = Config::new();
    config.stack_size = 0x40000;
    config.silence_warnings = true;
    config
}

/// Everything one schedule checks, shared (read-only) by every schedule.
#[derive(Clone)]
struct Checks {
    scenario: Scenario,
    reader_queries: Vec<Vec<u64>>,
    bounds: ReadBounds,
    expected: Vec<QueryScores>,
    serial: Option<Observation>,
    fast_path: bool,
}

/// One schedule: two writers and a reader on a fresh tree, then the checks.
fn schedule(checks: &Checks) {
    let scenario = &checks.scenario;
    let (tree, lanes) = scenario.prepare::<G>(model_config(checks.fast_path));
    let tree = Arc::new(tree);
    let writers: Vec<_> = lanes
        .into_iter()
        .zip(scenario.threads.iter().cloned())
        .map(|(mut lane, events)| {
            let tree = Arc::clone(&tree);
            thread::spawn(move || {
                let rejected: Vec<String> = events
                    .iter()
                    .filter_map(|e| tree.apply_event(&mut lane, e).err())
                    .map(|e| e.to_string())
                    .collect();
                (rejected, lane)
            })
        })
        .collect();
    let reader = {
        let tree = Arc::clone(&tree);
        let queries = checks.reader_queries.clone();
        let bounds = checks.bounds.clone();
        thread::spawn(move || {
            let mut violations = Vec::new();
            for _ in 0..READER_ROUNDS {
                for q in &queries {
                    let scores = tree.find_matches(&query(q), false);
                    violations.extend(bounds.check(&query(q), &scores).err());
                }
            }
            violations
        })
    };
    let results: Vec<_> = writers
        .into_iter()
        .map(|h| h.join().expect("a writer panicked"))
        .collect();
    let violations = reader.join().expect("the reader panicked");
    let observed = observe(&tree, &scenario.queries);
    let rejected: Vec<String> = results.iter().flat_map(|(r, _)| r.clone()).collect();
    drop(results);
    drop(tree);
    assert!(
        rejected.is_empty(),
        "{}: rejected events (C4): {rejected:?}",
        scenario.name
    );
    assert!(
        violations.is_empty(),
        "{}: reads during the run broke their bounds: {violations:?}",
        scenario.name
    );
    for ((q, got), (_, want)) in observed.scores.iter().zip(&checks.expected) {
        assert_eq!(
            got, want,
            "{}: after the join, scores of {q:?} differ from the reference (C2)",
            scenario.name
        );
    }
    if let Some(serial) = &checks.serial {
        assert_eq!(
            &observed, serial,
            "{}: the final state (fast path {}) differs from the serial fast-path-off outcome",
            scenario.name, checks.fast_path
        );
    }
}

/// Runs `case` under random and PCT schedulers for every seed; returns the
/// number of schedules.
fn explore(case: &Case, fast_path: bool, iters: usize, seeds: &[u64]) -> usize {
    let checks = Checks {
        scenario: case.scenario.clone(),
        reader_queries: case.reader_queries.clone(),
        bounds: case.scenario.read_bounds(),
        expected: case.expected_scores(),
        serial: case.conflict_free.then(|| serial_outcome(case)),
        fast_path,
    };
    let mut total = 0;
    for &seed in seeds {
        for pct in [false, true] {
            let start = Instant::now();
            let checks = checks.clone();
            let ran = if pct {
                run(PctScheduler::new_from_seed(seed, PCT_DEPTH, iters), checks)
            } else {
                run(RandomScheduler::new_from_seed(seed, iters), checks)
            };
            println!(
                "shuttle {} (fast path {}) {} seed {seed}: {ran} schedules in {:.1} s",
                case.scenario.name,
                if fast_path { "on" } else { "off" },
                if pct { "pct" } else { "random" },
                start.elapsed().as_secs_f64()
            );
            total += ran;
        }
    }
    total
}

fn run(scheduler: impl Scheduler + 'static, checks: Checks) -> usize {
    Runner::new(scheduler, config()).run(move || schedule(&checks))
}

fn report(case: Case, fast_path: bool) {
    let (iters, seeds) = (iterations(), seeds());
    let total = explore(&case, fast_path, iters, &seeds);
    println!(
        "shuttle {} (fast path {}): {total} schedules (random + pct depth {PCT_DEPTH}, seeds {seeds:?}, {iters} each)",
        case.scenario.name,
        if fast_path { "on" } else { "off" },
    );
}

#[test]
fn shuttle_mixed() {
    report(mixed(), true);
}

#[test]
fn shuttle_hot_leaf() {
    report(hot_leaf(), true);
}

#[test]
fn shuttle_private_subtrees_fast_on() {
    report(private_subtrees(), true);
}

#[test]
fn shuttle_private_subtrees_fast_off() {
    report(private_subtrees(), false);
}

#[test]
fn case_streams_are_strict_and_valid() {
    // Every case applies serially without rejection and its expected scores
    // are non-trivial (the queries reach past the setup).
    for case in [mixed(), hot_leaf(), private_subtrees()] {
        let expected = case.expected_scores();
        let best = expected
            .iter()
            .flat_map(|(_, s)| s.iter().map(|&(_, v)| v))
            .max()
            .unwrap_or(0);
        assert!(
            best >= 6,
            "{}: queries too shallow ({best})",
            case.scenario.name
        );
        let serial = serial_outcome(&case);
        assert_eq!(
            serial.scores, expected,
            "{}: the serial fast-path-off tree differs from the reference",
            case.scenario.name
        );
    }
}

fn case_by_name(name: &str) -> Case {
    match name {
        "mixed" => mixed(),
        "hot_leaf" => hot_leaf(),
        "private_subtrees" => private_subtrees(),
        other => panic!("unknown shuttle case {other}"),
    }
}

const CASES: [&str; 3] = ["mixed", "hot_leaf", "private_subtrees"];

#[test]
fn shuttle_mutants() {
    if let Some((mutant, case)) = child_request() {
        child_run(mutant, &case, || {
            let iters = env_number("CRTC_SHUTTLE_MUTANT_ITERS", DEFAULT_MUTANT_ITERS);
            let total = explore(&case_by_name(&case), true, iters, &seeds());
            format!("{total} schedules")
        });
        return;
    }
    if std::env::var("CRTC_SHUTTLE_MUTANTS").is_ok_and(|v| v == "0") {
        println!("shuttle mutants: skipped (CRTC_SHUTTLE_MUTANTS=0)");
        return;
    }
    let mut survivors = Vec::new();
    for mutant in Mutant::RWLOCK {
        let mut caught = false;
        for case in CASES {
            let start = Instant::now();
            let verdict = spawn_child(MUTANT_TEST, mutant, case);
            let secs = start.elapsed().as_secs_f64();
            if verdict.caught {
                let why = verdict.panic.unwrap_or_default();
                println!("mutant {mutant:?}: caught by shuttle {case} in {secs:.1} s ({why})");
                caught = true;
            } else {
                println!(
                    "mutant {mutant:?}: survived shuttle {case} in {secs:.1} s ({})",
                    verdict.detail
                );
            }
        }
        if !caught {
            survivors.push(mutant);
        }
    }
    println!(
        "shuttle mutants: {} of {} caught",
        Mutant::RWLOCK.len() - survivors.len(),
        Mutant::RWLOCK.len()
    );
    assert!(
        survivors.is_empty(),
        "mutants no shuttle scenario caught: {survivors:?}"
    );
}
