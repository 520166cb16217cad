//! shuttle scenarios on the real tree (papers/protocols.md §5),
//! generic over the gate: whole-tree scenarios too big for loom, explored by
//! shuttle's random and PCT schedulers, and the decode storm with reader
//! retry statistics.
//!
//! Every scenario has two writer threads (each with its own lane, each owning
//! two ranks) and one reader thread; ranks share prefixes across the writers.
//! A writer's stream is a list of [`Step`]s: events, a worker's removal
//! (`Tree::remove_worker` with the writer's own lane, where the worker's one
//! rank lives) and stale-leaf sweeps (`Tree::sweep_stale`, as a lane thread
//! runs one). The streams are strict (evictions leaf-first, no holes), fixed
//! up front:
//!
//! - **mixed**: a shared system prompt (setup), then per rank a continuation
//!   (two ranks on different writers share it), decode storms on the shared
//!   leaf (racing appends of the same blocks) and on private leaves,
//!   divergent stores that split the system prompt, leaf-first evictions,
//!   decoding again from the new tail, a `Cleared` of one rank and the
//!   removal of another's worker (each followed by a sweep, which unlinks
//!   the leaves they left without holders, while the reader may walk into
//!   them), a new worker that takes the released slot, and new prompts from
//!   the root racing across the writers (one identical pair, one diverging
//!   inside).
//! - **hot leaf**: all four ranks decode the same chain one block at a time
//!   on one leaf, then two of them evict their tails and branch off; one
//!   rank is cleared and decodes again, another's worker is removed and a
//!   new worker takes its slot.
//! - **private subtrees**: each writer's ranks live under their own root
//!   child (prompts, decode storms, divergent stores, evictions, a clear or
//!   a worker's removal with a new worker, sweeps); the writers share only
//!   the root, so the final state does not depend on the interleaving
//!   (conflict-free).
//! - **shared lane**: the lane directory (papers/protocols.md §2.1): a rank
//!   of writer 1 covers a prompt before both ranks of writer 0 store it
//!   (writer 0's lane must still write its entries), one rank of writer 0
//!   continues it, and the other stores under that continuation, which it
//!   does not hold (an event the reference model refuses, though its lane's
//!   entry names the node), then reads the continuation back itself; the
//!   other lane shares the continuation and splits the prompt.
//!
//! Every schedule runs over the grace-period reclaimer and its quarantining
//! allocator ([`grace`]; the test binaries instantiate the gates with
//! `GraceReclaim`): retired memory is freed as soon as every thread pinned
//! at its retirement has unpinned, while the threads run, and a block freed
//! while a pinned thread holds it fails the schedule (`no-free-while-held`).
//! Each scenario reports how many blocks the reclaimer freed before the
//! join, summed over its schedules, and fails if it freed none.
//!
//! Checks: every read during the run (the reader's, and a writer's own read
//! between its events) stays within `ReadBounds` (at most the blocks the
//! rank ever stored; at least the setup blocks it never evicts or clears)
//! and, for a rank one writer's steps alone name, within `WriterCeilings`
//! (C1: at most what the rank held at some instant of the read, from the
//! writers' progress read before and after it); after the join, no event was rejected (C4), every event the
//! reference model refuses was refused, and every
//! query's scores equal the reference model's held prefix for every rank
//! (C2, strict streams), the tree holds exactly the (rank, block, parent)
//! entries the reference model holds after every event (`membership`: every
//! serial order of strict events holds the same blocks, though node
//! boundaries, the node count and the dump's grouping into events may
//! differ between orders, so the racy scenarios compare membership, not the
//! dump), and the tree's shape passes the structural walk
//! ([`structure`](crate::structure):
//! edges chained from their parents, children keyed by their first local
//! hash, coverage within edges and full on the parent, every coverage
//! record owned). A worker has one rank, so its removal acts on the
//! reference model and on the read bounds as that rank's `Cleared`. For the
//! conflict-free scenario, the final state after one more sweep (scores,
//! sorted dump, node count) with the fast path on, and with it off, equals
//! the serial fast-path-off outcome. Not checked for the racy scenarios:
//! that the node count is one a serial order reaches (the serial orders of
//! two 20-event writers are too many to enumerate; loom's L2–L4 check it on
//! small models).
//!
//! The **decode storms** live in [`storm`](super::storm) and are
//! re-exported here.

use super::{
    apply_op, grace, membership, model_config, observe, query, rank, reference_membership,
    run_once, sequence, store, Catch, Explorer, Membership, Mutant, NamedModel, Observation,
    QueryScores, ReadBounds, Scenario, Suite, WriterCeilings,
};
use crate::property::Property;
use crate::reference::Reference;
use crate::structure::structural_faults;
use crate::{check, violated, Op};
use crtc::types::RouterEvent;
use crtc::{Lane, Tree};
use crtc_strategies::sync::unmodelled::{self, AtomicUsize, Ordering::SeqCst};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;
use std::cell::Cell;
use std::time::Instant;

pub use super::storm::{RetryCounters, RetryStats, Storm};

/// Rounds the reader makes over its queries.
const READER_ROUNDS: usize = 2;

/// One step of a writer thread.
#[derive(Clone, Debug)]
pub enum Step {
    /// An event, or a removal of a worker whose ranks live on this lane.
    Op(Op),
    /// A stale-leaf sweep on this thread (skipped when one is in flight).
    Sweep,
    /// An event the reference model refuses (a store under a parent only
    /// another rank of the lane holds): the tree must refuse it too.
    Refused(RouterEvent),
    /// A read by the writer between its events, checked against the read
    /// bounds as the reader's reads are.
    Read(Vec<u64>),
}

/// What a writer's steps produced.
#[derive(Default)]
struct WriterRun {
    /// The tree's refusals of events the reference model applies (C4).
    rejected: Vec<String>,
    /// Events the reference model refuses that the tree applied.
    wrongly_accepted: Vec<String>,
    /// The writer's own reads outside their bounds.
    violations: Vec<String>,
}

impl WriterRun {
    /// Whether every step went as the reference model says.
    fn is_clean(&self) -> bool {
        self.rejected.is_empty() && self.wrongly_accepted.is_empty() && self.violations.is_empty()
    }
}

/// What a read during the run is checked against: the loose bounds, the
/// writers' ceilings, and the writers' progress in this schedule.
#[derive(Clone)]
struct ReadChecks {
    bounds: unmodelled::Arc<ReadBounds>,
    ceilings: unmodelled::Arc<WriterCeilings>,
    /// Steps each writer has completed, bumped after each step. Std
    /// atomics, not the facade's: shuttle runs one task at a time on this
    /// thread, so a counter's value is exact wherever a task reads it, and
    /// they add no scheduling point and no synchronization the gate under
    /// test lacks.
    progress: unmodelled::Arc<Vec<AtomicUsize>>,
}

impl ReadChecks {
    /// The checks of `checks` with each of its writers at step 0.
    fn new(checks: &Checks) -> Self {
        Self::with(&checks.bounds, &checks.ceilings, checks.steps.len())
    }

    /// `bounds` and `ceilings` with `writers` writers at step 0.
    fn with(
        bounds: &unmodelled::Arc<ReadBounds>,
        ceilings: &unmodelled::Arc<WriterCeilings>,
        writers: usize,
    ) -> Self {
        Self {
            bounds: unmodelled::Arc::clone(bounds),
            ceilings: unmodelled::Arc::clone(ceilings),
            progress: unmodelled::Arc::new((0..writers).map(|_| AtomicUsize::new(0)).collect()),
        }
    }

    /// Reads `locals` on `tree`; the violation, if the read broke its bounds.
    fn read<G: ShapeGate>(&self, tree: &Tree<G>, locals: &[u64]) -> Option<String> {
        let progress = || -> Vec<usize> { self.progress.iter().map(|p| p.load(SeqCst)).collect() };
        let q = query(locals);
        let from = progress();
        let scores = tree.find_matches(&q, false);
        let to = progress();
        self.bounds
            .check(&q, &scores)
            .and_then(|()| self.ceilings.check(&q, &scores, &from, &to))
            .err()
    }
}

/// Runs writer `me`'s `steps` on `lane`, its reads checked by `reads`.
fn run_steps<G: ShapeGate>(
    tree: &Tree<G>,
    lane: &mut Lane<G>,
    (me, steps): (usize, &[Step]),
    reads: &ReadChecks,
) -> WriterRun {
    let mut run = WriterRun::default();
    for step in steps {
        match step {
            Step::Op(op) => run.rejected.extend(apply_op(tree, lane, op)),
            Step::Sweep => {
                tree.sweep_stale();
            }
            Step::Refused(event) => {
                if tree.apply_event(lane, event).is_ok() {
                    run.wrongly_accepted.push(format!("{event:?}"));
                }
            }
            Step::Read(locals) => run.violations.extend(reads.read(tree, locals)),
        }
        reads.progress[me].fetch_add(1, SeqCst);
    }
    run
}

/// A step as the reference model and the read bounds see it: an event, a
/// worker's removal as its one rank's `Cleared`, nothing for a sweep, a
/// refused event (the reference model leaves its state as it was) or a
/// read.
fn as_event(step: &Step) -> Option<RouterEvent> {
    match step {
        Step::Op(Op::Event(event)) => Some(event.clone()),
        Step::Op(Op::RemoveWorker(worker)) => Some(RouterEvent::cleared(rank(*worker))),
        Step::Op(Op::RemoveWorkerDpRank(r)) => Some(RouterEvent::cleared(*r)),
        Step::Sweep | Step::Refused(_) | Step::Read(_) => None,
    }
}

/// The writers' ceilings of `case`: each writer's steps as the reference
/// model sees them ([`as_event`]), after the setup. Fails if no rank is one
/// writer's alone (the ceilings would check nothing).
fn writer_ceilings(case: &Case) -> WriterCeilings {
    let setup: Vec<RouterEvent> = case.scenario.setup.iter().map(|(_, e)| e.clone()).collect();
    let writers: Vec<Vec<Option<RouterEvent>>> = case
        .steps
        .iter()
        .map(|steps| steps.iter().map(as_event).collect())
        .collect();
    let ceilings = WriterCeilings::new(&setup, &writers);
    assert!(
        ceilings.owned() > 0,
        "{}: no rank is one writer's alone, so no read is held to C1 at its writer's progress",
        case.scenario.name
    );
    ceilings
}

/// The events of setup steps (which are events only).
pub(super) fn setup_events(steps: Vec<Step>) -> impl Iterator<Item = RouterEvent> {
    steps.into_iter().map(|step| match step {
        Step::Op(Op::Event(event)) => event,
        other => panic!("a setup holds events only, not {other:?}"),
    })
}

/// One rank's stream, built step by step; remembers every sequence it
/// stored so the queries can cover them.
pub struct RankStream {
    worker: u64,
    seq: Vec<u64>,
    steps: Vec<Step>,
    sequences: Vec<Vec<u64>>,
}

impl RankStream {
    /// A rank with no events yet.
    pub fn new(worker: u64) -> Self {
        Self {
            worker,
            seq: Vec::new(),
            steps: Vec::new(),
            sequences: Vec::new(),
        }
    }

    fn push(&mut self, event: RouterEvent) -> &mut Self {
        self.steps.push(Step::Op(Op::Event(event)));
        self
    }

    /// Stores `locals` under the current sequence (from the root when empty).
    pub fn extend(&mut self, locals: &[u64]) -> &mut Self {
        self.push(store(self.worker, &self.seq, locals));
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
        let event = store(self.worker, prefix, locals);
        let mut branch = prefix.to_vec();
        branch.extend_from_slice(locals);
        self.sequences.push(branch);
        self.push(event)
    }

    /// Evicts the last `n` blocks of the current sequence, leaf first.
    pub fn evict_tail(&mut self, n: usize) -> &mut Self {
        let hashes = sequence(&self.seq);
        let cut = self.seq.len() - n;
        let evicted = hashes[cut..].iter().rev().copied().collect();
        self.seq.truncate(cut);
        self.push(RouterEvent::removed(rank(self.worker), evicted))
    }

    /// The rank drops everything it holds (`Cleared`; it keeps its slot).
    pub fn clear(&mut self) -> &mut Self {
        self.seq.clear();
        self.push(RouterEvent::cleared(rank(self.worker)))
    }

    /// The rank's worker is removed (its slot is swept and released).
    pub fn remove_worker(&mut self) -> &mut Self {
        self.seq.clear();
        self.steps.push(Step::Op(Op::RemoveWorker(self.worker)));
        self
    }

    /// The stream goes on as a new worker's rank (on the same writer), which
    /// takes the lowest released slot with its first store.
    pub fn rejoin_as(&mut self, worker: u64) -> &mut Self {
        self.worker = worker;
        self.seq.clear();
        self
    }

    /// A store of `locals` under `prefix`, which this rank does not hold
    /// (another rank of its lane does): the reference model refuses it.
    pub fn refused(&mut self, prefix: &[u64], locals: &[u64]) -> &mut Self {
        self.steps
            .push(Step::Refused(store(self.worker, prefix, locals)));
        self
    }

    /// The writer reads `locals` back (checked against the read bounds).
    pub fn read(&mut self, locals: &[u64]) -> &mut Self {
        self.steps.push(Step::Read(locals.to_vec()));
        self
    }

    /// A stale-leaf sweep on this rank's writer.
    pub fn sweep(&mut self) -> &mut Self {
        self.steps.push(Step::Sweep);
        self
    }

    /// Moves the steps built so far out (e.g. into the setup).
    pub fn take(&mut self) -> Vec<Step> {
        std::mem::take(&mut self.steps)
    }
}

/// Round-robin merge of two ranks' step lists (one writer's stream).
pub(super) fn interleave(a: Vec<Step>, b: Vec<Step>) -> Vec<Step> {
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
    /// The scenario as events (see [`as_event`]): setup, queries, and the
    /// events the reference model and the read bounds see.
    pub scenario: Scenario,
    /// What each writer thread runs.
    pub steps: Vec<Vec<Step>>,
    /// The reader's queries (raw locals).
    pub reader_queries: Vec<Vec<u64>>,
    /// Whether the final state is independent of the interleaving.
    pub conflict_free: bool,
}

impl Case {
    /// Builds a case from four rank streams: ranks 0 and 1 on writer 0,
    /// ranks 2 and 3 on writer 1. `setup` steps (events only) were taken
    /// before.
    pub fn new(
        name: &'static str,
        setup: [Vec<Step>; 4],
        mut ranks: [RankStream; 4],
        conflict_free: bool,
    ) -> Self {
        let setup = setup
            .into_iter()
            .enumerate()
            .flat_map(|(i, steps)| setup_events(steps).map(move |e| (i / 2, e)))
            .collect();
        let [r0, r1, r2, r3] = &mut ranks;
        let steps = vec![
            interleave(r0.take(), r1.take()),
            interleave(r2.take(), r3.take()),
        ];
        let threads = steps
            .iter()
            .map(|s| s.iter().filter_map(as_event).collect())
            .collect();
        Self {
            scenario: Scenario {
                name,
                setup,
                threads,
                queries: final_queries(&ranks),
            },
            steps,
            reader_queries: reader_queries(&ranks),
            conflict_free,
        }
    }

    /// Expected scores after the join (see [`expected_scores`]).
    pub fn expected_scores(&self) -> Vec<QueryScores> {
        expected_scores(&self.scenario)
    }
}

/// The final-state queries: the empty query, every sequence each rank
/// stored and its last one, and one query past everything stored.
fn final_queries(ranks: &[RankStream]) -> Vec<Vec<u64>> {
    let mut queries: Vec<Vec<u64>> = vec![Vec::new()];
    for r in ranks {
        queries.extend(r.sequences.iter().cloned());
        queries.push(r.seq.clone());
    }
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
    queries
}

/// The reader asks, per rank, its longest and its last sequence.
fn reader_queries(ranks: &[RankStream]) -> Vec<Vec<u64>> {
    let mut queries: Vec<Vec<u64>> = Vec::new();
    for r in ranks {
        let longest = r.sequences.iter().max_by_key(|s| s.len());
        for q in longest.into_iter().chain([&r.seq]) {
            if !q.is_empty() && !queries.contains(q) {
                queries.push(q.clone());
            }
        }
    }
    queries
}

/// Expected scores after the join: the reference model's held prefix for
/// every known rank and query (ranks are disjoint between writers, so
/// every interleaving gives the same per-rank model).
pub(super) fn expected_scores(scenario: &Scenario) -> Vec<QueryScores> {
    let mut model = Reference::new();
    let events = scenario
        .setup
        .iter()
        .map(|(_, e)| e)
        .chain(scenario.threads.iter().flatten());
    for event in events {
        model.apply(event);
    }
    scenario
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

/// The mixed scenario: shared system prompt, shared and private decode
/// storms, divergent stores, evictions, a clear, a worker's removal and a
/// new worker on its slot.
pub fn mixed() -> Case {
    let system = [1, 2, 3, 4];
    let mut r = [1, 2, 3, 4].map(RankStream::new);
    let setup = [0, 1, 2, 3].map(|i| r[i].extend(&system).take());
    // Rank 1 (writer 0) and rank 3 (writer 1) share a continuation and decode
    // the same blocks on that leaf; rank 3 then diverges.
    r[0].extend(&[5, 6]).decode(&[7, 8, 9, 10, 11]);
    r[2].extend(&[5, 6]).decode(&[7, 8, 9, 13, 14]);
    // Rank 2 (writer 0): private decode, a split of the system prompt, an
    // eviction, decoding again; then a clear, which leaves its private
    // leaves without holders, a sweep, and a new prompt.
    r[1].extend(&[20, 21])
        .decode(&[22, 23, 24, 25])
        .branch(2, &[30])
        .evict_tail(2)
        .decode(&[26])
        .clear()
        .sweep()
        .prompt(&system)
        .extend(&[27]);
    // Rank 4 (writer 1): private decode, a split at 3, an eviction; then its
    // worker is removed and a sweep runs; worker 5 takes the released slot.
    r[3].extend(&[40])
        .decode(&[41, 42, 43])
        .branch(3, &[50])
        .evict_tail(1)
        .decode(&[44])
        .remove_worker()
        .sweep()
        .rejoin_as(5)
        .prompt(&system)
        .decode(&[45]);
    r[0].evict_tail(1);
    // Prompts from the root racing across the writers: ranks 1 and 3 store
    // the same one, rank 5 one that diverges inside it.
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
    r[1].decode(&chain[..5])
        .clear()
        .prompt(&prompt)
        .decode(&chain[..2]);
    r[2].decode(&chain).evict_tail(3).decode(&[13]);
    r[3].decode(&chain[..6])
        .branch(4, &[14])
        .remove_worker()
        .sweep()
        .rejoin_as(6)
        .prompt(&prompt)
        .decode(&[15]);
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
    // Writer 0's second rank is cleared; writer 1's second rank's worker is
    // removed and worker 5 takes its slot. Both then store new blocks only,
    // so no leaf left without holders is revived (a sweep of either writer
    // may unlink the other's, which leaves the final state alone).
    r[1].clear().sweep().prompt(&[100, 101]).extend(&[130]);
    r[3].remove_worker()
        .sweep()
        .rejoin_as(5)
        .prompt(&[200, 201])
        .extend(&[230]);
    Case::new("private subtrees", setup, r, true)
}

/// The shared-lane scenario: two ranks of one lane share its directory
/// (papers/protocols.md §2.1) while the other lane's ranks hold the same
/// blocks and split them.
pub fn shared_lane() -> Case {
    let prompt = [1, 2, 3, 4];
    let mut r = [1, 2, 3, 4].map(RankStream::new);
    // Rank 3 (writer 1) covers the prompt before writer 0's ranks store it:
    // writer 0's lane still writes its entries (the store skip counts only
    // its own ranks' coverage), so rank 1's continuation finds its parent.
    let setup = [vec![], vec![], r[2].extend(&prompt).take(), vec![]];
    r[0].extend(&prompt)
        .extend(&[5, 6])
        .decode(&[7, 8])
        .evict_tail(1);
    // Rank 2 holds the prompt only. Its store of 6 under 5, which only
    // rank 1 holds, is refused although the lane's entry for 5 names the
    // node (the parent walk checks the storing rank's coverage), and its
    // own read of the continuation credits it with the prompt only.
    r[1].extend(&prompt)
        .refused(&[1, 2, 3, 4, 5], &[6])
        .read(&[1, 2, 3, 4, 5, 6])
        .extend(&[9]);
    // Writer 1: rank 3 stores rank 1's continuation on its own lane and
    // decodes on that leaf; rank 4 splits the prompt.
    r[2].extend(&[5, 6]).decode(&[10]);
    r[3].extend(&prompt).branch(2, &[20]);
    Case::new("shared lane", setup, r, false)
}

/// The serial fast-path-off outcome of a case (writer 0's steps, then
/// writer 1's, then a sweep), computed in a one-schedule run.
pub fn serial_outcome<G: ShapeGate>(explorer: &dyn Explorer, case: &Case) -> Observation {
    let scenario = case.scenario.clone();
    let steps = case.steps.clone();
    let bounds = unmodelled::Arc::new(scenario.read_bounds());
    let ceilings = unmodelled::Arc::new(writer_ceilings(case));
    run_once(explorer, move || {
        grace::one_execution(|| {
            let (tree, mut lanes) = scenario.prepare::<G>(model_config(false));
            let reads = ReadChecks::with(&bounds, &ceilings, steps.len());
            for (me, (lane, steps)) in lanes.iter_mut().zip(&steps).enumerate() {
                let run = run_steps(&tree, lane, (me, steps), &reads);
                assert!(
                    run.is_clean(),
                    "serial steps go as the reference model says: rejected {:?}, \
                     wrongly accepted {:?}, reads out of bounds {:?}",
                    run.rejected,
                    run.wrongly_accepted,
                    run.violations
                );
            }
            tree.sweep_stale();
            let observed = observe(&tree, &scenario.queries);
            drop((lanes, tree));
            observed
        })
    })
}

/// Everything one schedule checks, shared (read-only) by every schedule.
#[derive(Clone)]
struct Checks {
    scenario: Scenario,
    steps: Vec<Vec<Step>>,
    reader_queries: Vec<Vec<u64>>,
    bounds: unmodelled::Arc<ReadBounds>,
    ceilings: unmodelled::Arc<WriterCeilings>,
    expected: Vec<QueryScores>,
    /// What the reference model holds after every event.
    held: Vec<Membership>,
    serial: Option<Observation>,
    fast_path: bool,
}

thread_local! {
    /// Blocks the reclaimer freed before the join, summed over the
    /// schedules of the exploration in progress (the checkers run every
    /// task on this thread).
    static FREED_BEFORE_JOIN: Cell<u64> = const { Cell::new(0) };
}

/// What one schedule produced, gathered (and the tree dropped) before any
/// check runs.
struct Outcome {
    rejected: Vec<String>,
    /// Refused steps the tree applied.
    wrongly_accepted: Vec<String>,
    /// The reader's and the writers' reads outside their bounds.
    violations: Vec<String>,
    observed: Observation,
    held: Vec<Membership>,
    faults: Vec<String>,
    /// The conflict-free scenario: the final state after one more sweep.
    swept: Option<Observation>,
}

/// Runs the writers and the reader on a fresh tree, between the grace
/// reclaimer's execution bounds.
fn execute<G: ShapeGate>(checks: &Checks) -> Outcome {
    grace::begin_execution();
    let scenario = &checks.scenario;
    let (tree, lanes) = scenario.prepare::<G>(model_config(checks.fast_path));
    let tree = Arc::new(tree);
    let reads = ReadChecks::new(checks);
    let writers: Vec<_> = lanes
        .into_iter()
        .zip(checks.steps.iter().cloned())
        .enumerate()
        .map(|(me, (mut lane, steps))| {
            let (tree, reads) = (Arc::clone(&tree), reads.clone());
            thread::spawn(move || {
                let run = run_steps(&tree, &mut lane, (me, &steps), &reads);
                (run, lane)
            })
        })
        .collect();
    let reader = {
        let tree = Arc::clone(&tree);
        let queries = checks.reader_queries.clone();
        thread::spawn(move || read_rounds(&tree, &queries, &reads))
    };
    let results: Vec<_> = writers
        .into_iter()
        .map(|h| h.join().expect("a writer panicked"))
        .collect();
    let mut violations = reader.join().expect("the reader panicked");
    FREED_BEFORE_JOIN.with(|f| f.set(f.get() + grace::freed_in_execution()));
    let observed = observe(&*tree, &scenario.queries);
    let held = membership(&*tree);
    let faults = structural_faults(&*tree);
    let swept = checks.serial.is_some().then(|| {
        tree.sweep_stale();
        observe(&*tree, &scenario.queries)
    });
    let runs: Vec<WriterRun> = results.into_iter().map(|(run, _)| run).collect();
    let rejected = runs.iter().flat_map(|r| r.rejected.clone()).collect();
    let wrongly_accepted = runs
        .iter()
        .flat_map(|r| r.wrongly_accepted.clone())
        .collect();
    violations.extend(runs.into_iter().flat_map(|r| r.violations));
    drop(tree);
    grace::end_execution();
    Outcome {
        rejected,
        wrongly_accepted,
        violations,
        observed,
        held,
        faults,
        swept,
    }
}

/// The reader's rounds over `queries`; returns the reads outside their
/// bounds.
fn read_rounds<G: ShapeGate>(
    tree: &Tree<G>,
    queries: &[Vec<u64>],
    reads: &ReadChecks,
) -> Vec<String> {
    let mut violations = Vec::new();
    for _ in 0..READER_ROUNDS {
        for q in queries {
            violations.extend(reads.read(tree, q));
        }
    }
    violations
}

/// One schedule: two writers and a reader on a fresh tree, then the checks.
fn schedule<G: ShapeGate>(checks: &Checks) {
    let outcome = execute::<G>(checks);
    let name = checks.scenario.name;
    check!(
        Property::Accepted,
        outcome.rejected.is_empty(),
        "{name}: rejected events (C4): {:?}",
        outcome.rejected
    );
    check!(
        Property::ReadBounds,
        outcome.violations.is_empty(),
        "{name}: reads during the run broke their bounds: {:?}",
        outcome.violations
    );
    check!(
        Property::Accepted,
        outcome.wrongly_accepted.is_empty(),
        "{name}: the tree applied events the reference model refuses: {:?}",
        outcome.wrongly_accepted
    );
    if outcome.held != checks.held {
        let extra: Vec<_> = outcome
            .held
            .iter()
            .filter(|m| !checks.held.contains(m))
            .collect();
        let missing: Vec<_> = checks
            .held
            .iter()
            .filter(|m| !outcome.held.contains(m))
            .collect();
        violated!(
            Property::SerialOutcome,
            "{name}: after the join, the tree holds other blocks than every serial order does \
             (reference model): extra {extra:?}, missing {missing:?}"
        );
    }
    for ((q, got), (_, want)) in outcome.observed.scores.iter().zip(&checks.expected) {
        check!(
            Property::SerialOutcome,
            got == want,
            "{name}: after the join, scores of {q:?} differ from the reference (C2): {got:?} != {want:?}"
        );
    }
    check!(
        Property::SerialOutcome,
        outcome.faults.is_empty(),
        "{name}: after the join, the tree breaks its structural invariants (no serial order \
         does): {:?}",
        outcome.faults
    );
    if let (Some(serial), Some(swept)) = (&checks.serial, &outcome.swept) {
        check!(
            Property::SerialOutcome,
            swept == serial,
            "{name}: the final state (fast path {}) differs from the serial fast-path-off outcome\n  observed: {swept:?}\n  serial: {serial:?}",
            checks.fast_path
        );
    }
}

/// What exploring a case found: its schedules and the blocks the reclaimer
/// freed before the join, summed over them.
#[derive(Clone, Copy, Debug)]
pub struct Explored {
    /// Schedules run.
    pub schedules: u64,
    /// Blocks freed while the threads ran.
    pub freed_before_join: u64,
}

/// Explores `case` with the fast path on or off. Fails if the reclaimer
/// freed nothing before any join (no premature free could show then).
pub fn explore<G: ShapeGate>(explorer: &dyn Explorer, case: &Case, fast_path: bool) -> Explored {
    assert!(
        grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    let all_events = case
        .scenario
        .setup
        .iter()
        .map(|(_, e)| e)
        .chain(case.scenario.threads.iter().flatten());
    let checks = Checks {
        scenario: case.scenario.clone(),
        steps: case.steps.clone(),
        reader_queries: case.reader_queries.clone(),
        bounds: unmodelled::Arc::new(case.scenario.read_bounds()),
        ceilings: unmodelled::Arc::new(writer_ceilings(case)),
        expected: case.expected_scores(),
        held: reference_membership(all_events),
        serial: case
            .conflict_free
            .then(|| serial_outcome::<G>(explorer, case)),
        fast_path,
    };
    FREED_BEFORE_JOIN.with(|f| f.set(0));
    let schedules = explorer.explore(Box::new(move || schedule::<G>(&checks)));
    let freed_before_join = FREED_BEFORE_JOIN.with(Cell::get);
    assert!(
        freed_before_join > 0,
        "{}: the reclaimer freed nothing before the join in {schedules} schedules \
         (is the gate's reclaimer GraceReclaim?)",
        case.scenario.name
    );
    Explored {
        schedules,
        freed_before_join,
    }
}

/// The cases by name.
pub const CASES: [&str; 4] = ["mixed", "hot_leaf", "private_subtrees", "shared_lane"];

/// The case named `name`.
pub fn case_by_name(name: &str) -> Case {
    match name {
        "mixed" => mixed(),
        "hot_leaf" => hot_leaf(),
        "private_subtrees" => private_subtrees(),
        "shared_lane" => shared_lane(),
        other => panic!("unknown shuttle case {other}"),
    }
}

/// Explores `case` and prints `"shuttle <gate> <case> (fast path on|off):
/// <n> schedules in <t> s (<bounds>); <f> blocks freed before the join"`.
pub fn report<G: ShapeGate>(
    explorer: &dyn Explorer,
    gate: &str,
    case: &Case,
    fast_path: bool,
) -> Explored {
    let start = Instant::now();
    let explored = explore::<G>(explorer, case, fast_path);
    println!(
        "shuttle {gate} {} (fast path {}): {} schedules in {:.1} s ({}); {} blocks freed before the join",
        case.scenario.name,
        if fast_path { "on" } else { "off" },
        explored.schedules,
        start.elapsed().as_secs_f64(),
        explorer.bounds(),
        explored.freed_before_join
    );
    explored
}

/// What must catch `mutant` in the scenarios: the property
/// [`shuttle_catch`](super::suites::shuttle_catch) names for it, failed by
/// any case (the lane directory's mutants: the case built for them, so the
/// others are not explored in vain first).
pub fn case_catch(mutant: Mutant) -> Catch {
    let property = super::suites::shuttle_catch(mutant).unwrap_or_else(|| {
        panic!("{mutant:?} is not a shuttle negative control (suites::shuttle_catch)")
    });
    if Mutant::DIRECTORY.contains(&mutant) {
        return Catch::new(property, &["shared_lane"]);
    }
    Catch::new(property, &CASES)
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
                    let explored = explore::<G>(&*explorer(), &case_by_name(name), true);
                    format!(
                        "{} schedules, {} blocks freed before the join",
                        explored.schedules, explored.freed_before_join
                    )
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

/// Checks that every case's steps go serially as the reference model says
/// (no rejection, every refused step refused, the writers' own reads within
/// bounds) and that its expected scores are non-trivial (the queries reach
/// past the setup).
pub fn check_cases<G: ShapeGate>(explorer: &dyn Explorer) {
    for case in [mixed(), hot_leaf(), private_subtrees(), shared_lane()] {
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
