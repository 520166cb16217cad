//! shuttle scenarios on the real tree (papers/protocols.md §5),
//! generic over the gate: whole-tree scenarios too big for loom, explored by
//! shuttle's random and PCT schedulers, and the decode storm with reader
//! retry statistics.
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
//! streams), and the tree holds exactly the (rank, block, parent) entries the
//! reference model holds after every event (`membership`: every serial order
//! of strict events holds the same blocks, though node boundaries, the node
//! count and the dump's grouping into events may differ between orders, so
//! the racy scenarios compare membership, not the dump); for the
//! conflict-free scenario, the final state (scores, sorted dump, node count)
//! with the fast path on, and with it off, equals the serial fast-path-off
//! outcome. Not checked for the racy scenarios: that the node count is one
//! a serial order reaches (the serial orders of two 20-event writers are too
//! many to enumerate; loom's L2–L4 check it on small models).
//!
//! The **decode storms** ([`Storm`]): one writer lane decodes a chain on one
//! hot leaf, either one rank alone (pure appends) or two ranks in lock step
//! (every append of the first rank demotes the second, a structural change
//! for the seqlock gate), while two reader threads score the whole chain
//! over and over. Every read must stay within its bounds and complete; the
//! gate's retry counters (process-wide, read before and after each read and
//! each schedule) give the retry distribution.

use super::{
    membership, model_config, observe, query, rank, reference_membership, run_once, sequence,
    store, Explorer, Membership, NamedModel, Observation, QueryScores, ReadBounds, Scenario, Suite,
};
use crate::property::Property;
use crate::reference::Reference;
use crate::{check, violated};
use crtc::types::RouterEvent;
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;
use std::cell::RefCell;
use std::time::Instant;

/// Rounds the reader makes over its queries.
const READER_ROUNDS: usize = 2;

/// One rank's stream, built step by step; remembers every sequence it
/// stored so the queries can cover them.
pub struct RankStream {
    worker: u64,
    seq: Vec<u64>,
    events: Vec<RouterEvent>,
    sequences: Vec<Vec<u64>>,
}

impl RankStream {
    /// A rank with no events yet.
    pub fn new(worker: u64) -> Self {
        Self {
            worker,
            seq: Vec::new(),
            events: Vec::new(),
            sequences: Vec::new(),
        }
    }

    /// Stores `locals` under the current sequence (from the root when empty).
    pub fn extend(&mut self, locals: &[u64]) -> &mut Self {
        self.events.push(store(self.worker, &self.seq, locals));
        self.seq.extend_from_slice(locals);
        self.sequences.push(self.seq.clone());
        self
    }

    /// A new prompt from the root; it becomes the current sequence.
    pub fn prompt(&mut self, locals: &[u64]) -> &mut Self {
        self.seq.clear();
        self.extend(locals)
    }

    /// A decode storm: one store per block.
    pub fn decode(&mut self, locals: &[u64]) -> &mut Self {
        for &local in locals {
            self.extend(&[local]);
        }
        self
    }

    /// A divergent store: `locals` under the first `keep` blocks of the
    /// current sequence (a side branch; the current sequence stays).
    pub fn branch(&mut self, keep: usize, locals: &[u64]) -> &mut Self {
        let prefix = &self.seq[..keep];
        self.events.push(store(self.worker, prefix, locals));
        let mut branch = prefix.to_vec();
        branch.extend_from_slice(locals);
        self.sequences.push(branch);
        self
    }

    /// Evicts the last `n` blocks of the current sequence, leaf first.
    pub fn evict_tail(&mut self, n: usize) -> &mut Self {
        let hashes = sequence(&self.seq);
        let cut = self.seq.len() - n;
        let evicted = hashes[cut..].iter().rev().copied().collect();
        self.events
            .push(RouterEvent::removed(rank(self.worker), evicted));
        self.seq.truncate(cut);
        self
    }

    /// Moves the events built so far out (e.g. into the setup).
    pub fn take(&mut self) -> Vec<RouterEvent> {
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
pub struct Case {
    /// The scenario.
    pub scenario: Scenario,
    /// The reader's queries (raw locals).
    pub reader_queries: Vec<Vec<u64>>,
    /// Whether the final state is independent of the interleaving.
    pub conflict_free: bool,
}

impl Case {
    /// Builds a case from four rank streams: ranks 0 and 1 on writer 0,
    /// ranks 2 and 3 on writer 1. `setup` events were taken before.
    pub fn new(
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
    pub fn expected_scores(&self) -> Vec<QueryScores> {
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
pub fn mixed() -> Case {
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
pub fn hot_leaf() -> Case {
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
pub fn private_subtrees() -> Case {
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

/// The serial fast-path-off outcome of a case (writer 0's events, then
/// writer 1's), computed in a one-schedule run.
pub fn serial_outcome<G: ShapeGate>(explorer: &dyn Explorer, case: &Case) -> Observation {
    let scenario = case.scenario.clone();
    run_once(explorer, move || {
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
        observed
    })
}

/// Everything one schedule checks, shared (read-only) by every schedule.
#[derive(Clone)]
struct Checks {
    scenario: Scenario,
    reader_queries: Vec<Vec<u64>>,
    bounds: ReadBounds,
    expected: Vec<QueryScores>,
    /// What the reference model holds after every event.
    held: Vec<Membership>,
    serial: Option<Observation>,
    fast_path: bool,
}

/// One schedule: two writers and a reader on a fresh tree, then the checks.
fn schedule<G: ShapeGate>(checks: &Checks) {
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
    let observed = observe(&*tree, &scenario.queries);
    let held = membership(&*tree);
    let rejected: Vec<String> = results.iter().flat_map(|(r, _)| r.clone()).collect();
    drop(results);
    drop(tree);
    check!(
        Property::Accepted,
        rejected.is_empty(),
        "{}: rejected events (C4): {rejected:?}",
        scenario.name
    );
    check!(
        Property::ReadBounds,
        violations.is_empty(),
        "{}: reads during the run broke their bounds: {violations:?}",
        scenario.name
    );
    if held != checks.held {
        let extra: Vec<_> = held.iter().filter(|m| !checks.held.contains(m)).collect();
        let missing: Vec<_> = checks.held.iter().filter(|m| !held.contains(m)).collect();
        violated!(
            Property::SerialOutcome,
            "{}: after the join, the tree holds other blocks than every serial order does \
             (reference model): extra {extra:?}, missing {missing:?}",
            scenario.name
        );
    }
    for ((q, got), (_, want)) in observed.scores.iter().zip(&checks.expected) {
        check!(
            Property::SerialOutcome,
            got == want,
            "{}: after the join, scores of {q:?} differ from the reference (C2): {got:?} != {want:?}",
            scenario.name
        );
    }
    if let Some(serial) = &checks.serial {
        check!(
            Property::SerialOutcome,
            &observed == serial,
            "{}: the final state (fast path {}) differs from the serial fast-path-off outcome\n  observed: {observed:?}\n  serial: {serial:?}",
            scenario.name,
            checks.fast_path
        );
    }
}

/// Explores `case` with the fast path on or off; returns the number of
/// schedules.
pub fn explore<G: ShapeGate>(explorer: &dyn Explorer, case: &Case, fast_path: bool) -> u64 {
    let checks = Checks {
        scenario: case.scenario.clone(),
        reader_queries: case.reader_queries.clone(),
        bounds: case.scenario.read_bounds(),
        expected: case.expected_scores(),
        held: reference_membership(
            case.scenario
                .setup
                .iter()
                .map(|(_, e)| e)
                .chain(case.scenario.threads.iter().flatten()),
        ),
        serial: case
            .conflict_free
            .then(|| serial_outcome::<G>(explorer, case)),
        fast_path,
    };
    explorer.explore(Box::new(move || schedule::<G>(&checks)))
}

/// The cases by name.
pub const CASES: [&str; 3] = ["mixed", "hot_leaf", "private_subtrees"];

/// The case named `name`.
pub fn case_by_name(name: &str) -> Case {
    match name {
        "mixed" => mixed(),
        "hot_leaf" => hot_leaf(),
        "private_subtrees" => private_subtrees(),
        other => panic!("unknown shuttle case {other}"),
    }
}

/// Explores `case` and prints
/// `"shuttle <gate> <case> (fast path on|off): <n> schedules in <t> s (<bounds>)"`.
pub fn report<G: ShapeGate>(
    explorer: &dyn Explorer,
    gate: &str,
    case: &Case,
    fast_path: bool,
) -> u64 {
    let start = Instant::now();
    let total = explore::<G>(explorer, case, fast_path);
    println!(
        "shuttle {gate} {} (fast path {}): {total} schedules in {:.1} s ({})",
        case.scenario.name,
        if fast_path { "on" } else { "off" },
        start.elapsed().as_secs_f64(),
        explorer.bounds()
    );
    total
}

/// The cases as a [`Suite`] for gate `G` (fast path on), each explored
/// with a fresh explorer from `explorer`: the negative controls' models.
pub fn case_suite<G: ShapeGate>(
    gate: &'static str,
    explorer: impl Fn() -> Box<dyn Explorer> + Clone + 'static,
) -> Suite {
    let models = CASES
        .iter()
        .map(|&name| {
            let explorer = explorer.clone();
            NamedModel {
                name,
                what: "shuttle scenario",
                run: Box::new(move || {
                    let total = explore::<G>(&*explorer(), &case_by_name(name), true);
                    format!("{total} schedules")
                }),
            }
        })
        .collect();
    Suite {
        checker: "shuttle",
        gate,
        models,
    }
}

/// Checks that every case applies serially without rejection and that its
/// expected scores are non-trivial (the queries reach past the setup).
pub fn check_cases<G: ShapeGate>(explorer: &dyn Explorer) {
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
        let serial = serial_outcome::<G>(explorer, &case);
        assert_eq!(
            serial.scores, expected,
            "{}: the serial fast-path-off tree differs from the reference",
            case.scenario.name
        );
    }
}

/// Reads a gate's process-wide retry counters: `(optimistic restarts,
/// pessimistic fallbacks)`. Gates without optimistic readers report zeros.
pub type RetryCounters = fn() -> (u64, u64);

/// The decode storm on one hot leaf, after a three-block prompt that rank 1
/// stores whole: two readers score the whole chain `reads` times each while
/// one writer lane decodes `blocks` blocks.
///
/// - pure (`lock_step: false`): rank 2 holds only the first two prompt
///   blocks (a cutoff), and rank 1 alone decodes: every append is pure (it
///   demotes nobody), so an optimistic reader never has a reason to retry;
/// - lock step (`lock_step: true`): rank 2 holds the whole prompt too, and
///   both ranks decode the same chain, rank 1 first: every append of rank 1
///   demotes rank 2 (a structural write for the seqlock gate), and rank 2's
///   store only raises its coverage back to full.
#[derive(Clone, Copy, Debug)]
pub struct Storm {
    /// Blocks decoded (per rank in lock step).
    pub blocks: u64,
    /// Reads per reader.
    pub reads: usize,
    /// Both ranks decode in lock step (every append demotes).
    pub lock_step: bool,
}

/// Retry statistics accumulated over a storm's schedules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Schedules run.
    pub schedules: u64,
    /// Reads completed.
    pub reads: u64,
    /// Optimistic restarts (exact: counted per schedule).
    pub restarts: u64,
    /// Pessimistic fallbacks (exact: counted per schedule).
    pub fallbacks: u64,
    /// Most restarts within one read's window (an upper bound on one read's
    /// own restarts: the window may include the other reader's).
    pub max_per_read: u64,
    /// Reads whose window saw at least one restart (an upper bound).
    pub reads_restarted: u64,
    /// Most fallbacks in one schedule.
    pub max_fallbacks_per_schedule: u64,
}

impl RetryStats {
    /// Restarts per read.
    pub fn mean(&self) -> f64 {
        self.restarts as f64 / self.reads.max(1) as f64
    }
}

impl std::fmt::Display for RetryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reads in {} schedules: restarts/read mean {:.3}, max {} (window bound), \
             {} reads restarted, {} restarts, {} pessimistic fallbacks (max {} per schedule)",
            self.reads,
            self.schedules,
            self.mean(),
            self.max_per_read,
            self.reads_restarted,
            self.restarts,
            self.fallbacks,
            self.max_fallbacks_per_schedule
        )
    }
}

thread_local! {
    /// The storm's statistics (the checkers run every task on this thread).
    static STORM_STATS: RefCell<RetryStats> = RefCell::new(RetryStats::default());
}

impl Storm {
    /// The two ranks' streams: the prompt in the setup (lane 0), then the
    /// chain, rank 1 then rank 2 per block, on one writer lane.
    fn scenario(self) -> Scenario {
        let prompt = [1, 2, 3];
        let chain: Vec<u64> = (4..4 + self.blocks).collect();
        let mut a = RankStream::new(1);
        let mut b = RankStream::new(2);
        let mut setup: Vec<(usize, RouterEvent)> = Vec::new();
        setup.extend(a.extend(&prompt).take().into_iter().map(|e| (0, e)));
        let held = if self.lock_step {
            &prompt[..]
        } else {
            &prompt[..2]
        };
        setup.extend(b.extend(held).take().into_iter().map(|e| (0, e)));
        a.decode(&chain);
        let events = if self.lock_step {
            b.decode(&chain);
            interleave(a.take(), b.take())
        } else {
            a.take()
        };
        let mut full = prompt.to_vec();
        full.extend(&chain);
        Scenario {
            name: if self.lock_step {
                "decode storm (lock step)"
            } else {
                "decode storm (pure)"
            },
            setup,
            threads: vec![events],
            queries: vec![full],
        }
    }

    /// The storm's name in reports.
    pub fn name(self) -> &'static str {
        self.scenario().name
    }

    /// Explores the storm for gate `G` with `counters`; returns the retry
    /// statistics. Every read must stay within its bounds and complete, and
    /// the final scores must equal the reference's.
    pub fn explore<G: ShapeGate>(
        self,
        explorer: &dyn Explorer,
        counters: RetryCounters,
    ) -> RetryStats {
        let scenario = self.scenario();
        let bounds = scenario.read_bounds();
        let expected = Case {
            scenario: scenario.clone(),
            reader_queries: Vec::new(),
            conflict_free: false,
        }
        .expected_scores();
        STORM_STATS.with(|s| *s.borrow_mut() = RetryStats::default());
        let reads = self.reads;
        explorer.explore(Box::new(move || {
            storm_schedule::<G>(&scenario, &bounds, &expected, reads, counters)
        }));
        STORM_STATS.with(|s| s.borrow().clone())
    }
}

fn storm_schedule<G: ShapeGate>(
    scenario: &Scenario,
    bounds: &ReadBounds,
    expected: &[QueryScores],
    reads: usize,
    counters: RetryCounters,
) {
    let (tree, mut lanes) = scenario.prepare::<G>(model_config(true));
    let tree = Arc::new(tree);
    let (restarts0, fallbacks0) = counters();
    let writer = {
        let tree = Arc::clone(&tree);
        let mut lane = lanes.remove(0);
        let events = scenario.threads[0].clone();
        thread::spawn(move || {
            let rejected: Vec<String> = events
                .iter()
                .filter_map(|e| tree.apply_event(&mut lane, e).err())
                .map(|e| e.to_string())
                .collect();
            (rejected, lane)
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let tree = Arc::clone(&tree);
            let q = query(&scenario.queries[0]);
            let bounds = bounds.clone();
            thread::spawn(move || {
                let mut violations = Vec::new();
                let mut windows = Vec::new();
                for _ in 0..reads {
                    let (r0, f0) = counters();
                    let scores = tree.find_matches(&q, false);
                    let (r1, f1) = counters();
                    windows.push((r1 - r0, f1 - f0));
                    violations.extend(bounds.check(&q, &scores).err());
                }
                (violations, windows)
            })
        })
        .collect();
    let (rejected, lane) = writer.join().expect("the writer panicked");
    let results: Vec<_> = readers
        .into_iter()
        .map(|h| h.join().expect("a reader panicked"))
        .collect();
    let (restarts1, fallbacks1) = counters();
    let observed = observe(&*tree, &scenario.queries);
    drop(lane);
    drop(lanes);
    drop(tree);
    check!(
        Property::Accepted,
        rejected.is_empty(),
        "decode storm: rejected events {rejected:?}"
    );
    let mut done = 0;
    for (violations, windows) in &results {
        check!(
            Property::ReadBounds,
            violations.is_empty(),
            "decode storm: reads broke their bounds: {violations:?}"
        );
        done += windows.len();
    }
    assert_eq!(done, 2 * reads, "decode storm: a read did not complete");
    check!(
        Property::SerialOutcome,
        observed.scores == expected,
        "decode storm: final scores differ from the reference (C2): {:?} != {expected:?}",
        observed.scores
    );
    STORM_STATS.with(|s| {
        let mut s = s.borrow_mut();
        s.schedules += 1;
        s.reads += done as u64;
        s.restarts += restarts1 - restarts0;
        s.fallbacks += fallbacks1 - fallbacks0;
        s.max_fallbacks_per_schedule = s.max_fallbacks_per_schedule.max(fallbacks1 - fallbacks0);
        for &(restarts, _) in results.iter().flat_map(|(_, w)| w) {
            s.max_per_read = s.max_per_read.max(restarts);
            s.reads_restarted += u64::from(restarts > 0);
        }
    });
}
