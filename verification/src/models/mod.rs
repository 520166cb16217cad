//! Shared pieces of the model-checker suites (`tests/loom_rwlock.rs` and
//! `tests/shuttle_rwlock.rs`, built with `--cfg crtc_loom` or
//! `--cfg crtc_shuttle`): event builders over chained hashes, a tree's
//! observable final state, scenarios with their serial outcomes, the mutant
//! switch as a guard, and a child-process runner for negative controls.
//!
//! Every tree these helpers build uses the facade's primitives, so they must
//! run inside a model (`loom::model`, a shuttle runner): the models create and
//! drop their trees inside the model closure.
//!
//! Why negative controls run in a child process: when a model panics, the
//! checker abandons the other modelled threads mid-flight (their stacks are
//! never unwound), so the process-global checker state (pin counter, deferred
//! frees) may keep entries of a dead execution. A child process confines that
//! to one run.

use crtc::tree::ReclaimConfig;
use crtc::types::chain::{chain_hash, chained, tail_hash};
use crtc::types::{
    ExternalSequenceBlockHash, KvCacheEventData, LocalBlockHash, OverlapScores, RouterEvent,
    WorkerWithDpRank,
};
use crtc::{EventOutcome, Lane, Tree, TreeConfig};
use crtc_strategies::mutants::Mutant;
use crtc_strategies::ShapeGate;
use rustc_hash::FxHashSet;
use std::process::Command;

/// Rank `worker`.0.
pub fn rank(worker: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, 0)
}

/// `worker` stores `locals` after the sequence `prefix` (parent = the
/// prefix's tail, the root when `prefix` is empty).
pub fn store(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let parent = tail_hash(prefix);
    RouterEvent::stored(rank(worker), parent, chained(parent, locals))
}

/// `worker` evicts the blocks `locals` that follow the sequence `prefix`, in
/// the order given.
pub fn remove(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let hashes = chained(tail_hash(prefix), locals)
        .into_iter()
        .map(|b| b.external)
        .collect();
    RouterEvent::removed(rank(worker), hashes)
}

/// A query from raw local hashes.
pub fn query(locals: &[u64]) -> Vec<LocalBlockHash> {
    locals.iter().map(|&l| LocalBlockHash(l)).collect()
}

/// The external hashes of the sequence `locals` from the root.
pub fn sequence(locals: &[u64]) -> Vec<ExternalSequenceBlockHash> {
    let mut parent = None;
    locals
        .iter()
        .map(|&l| {
            let hash = chain_hash(parent, LocalBlockHash(l));
            parent = Some(hash);
            hash
        })
        .collect()
}

/// The configuration of the models' trees: few slots (the models use a
/// handful of ranks) and no scheduled stale-leaf sweeps (a sweep scheduled by
/// the clock would make executions nondeterministic; the models check the
/// store paths).
pub fn model_config(fast_path: bool) -> TreeConfig {
    TreeConfig {
        fast_path,
        slot_capacity: 8,
        reclaim: ReclaimConfig::disabled(),
    }
}

/// Applies `event` on `lane` and panics with the event if the tree rejects it.
pub fn apply_ok<G: ShapeGate>(
    tree: &Tree<G>,
    lane: &mut Lane<G>,
    event: &RouterEvent,
) -> EventOutcome {
    match tree.apply_event(lane, event) {
        Ok(outcome) => outcome,
        Err(e) => panic!("event {event:?} was rejected: {e}"),
    }
}

/// Whether an outcome is a store the fast path applied.
pub fn is_fast(outcome: &EventOutcome) -> bool {
    matches!(outcome, EventOutcome::Stored(s) if s.fast_path)
}

/// The scores of one query: the query's raw locals and the scores sorted by
/// rank.
pub type QueryScores = (Vec<u64>, Vec<(WorkerWithDpRank, u32)>);

/// Everything the serial-equivalence checks compare about a quiescent tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Per query (raw locals), the scores sorted by rank.
    pub scores: Vec<QueryScores>,
    /// `dump_events` with event ids zeroed, as sorted debug strings.
    pub dump: Vec<String>,
    /// `node_count`.
    pub nodes: usize,
}

/// Observes `tree`: scores of every query, the sorted dump and the node count.
pub fn observe<G: ShapeGate>(tree: &Tree<G>, queries: &[Vec<u64>]) -> Observation {
    let scores = queries
        .iter()
        .map(|q| (q.clone(), tree.find_matches(&query(q), false).sorted()))
        .collect();
    let mut dump: Vec<String> = tree
        .dump_events()
        .into_iter()
        .map(|mut e| {
            e.event.event_id = 0;
            format!("{e:?}")
        })
        .collect();
    dump.sort_unstable();
    Observation {
        scores,
        dump,
        nodes: tree.node_count(),
    }
}

/// Every interleaving of threads with `lens[i]` events each that keeps each
/// thread's own order, as sequences of thread indices.
pub fn interleavings(lens: &[usize]) -> Vec<Vec<usize>> {
    fn extend(left: &mut [usize], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left.iter().all(|&n| n == 0) {
            out.push(prefix.clone());
            return;
        }
        for thread in 0..left.len() {
            if left[thread] > 0 {
                left[thread] -= 1;
                prefix.push(thread);
                extend(left, prefix, out);
                prefix.pop();
                left[thread] += 1;
            }
        }
    }
    let mut out = Vec::new();
    extend(&mut lens.to_vec(), &mut Vec::new(), &mut out);
    out
}

/// A concurrent scenario: sequential setup events (each on a lane), then one
/// event list per thread (thread `i` owns lane `i`), and the queries its final
/// state is observed with.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Short name for reports.
    pub name: &'static str,
    /// `(lane, event)` applied in order before the threads start.
    pub setup: Vec<(usize, RouterEvent)>,
    /// The events of each thread, in order.
    pub threads: Vec<Vec<RouterEvent>>,
    /// Queries (raw locals) of the final-state observation.
    pub queries: Vec<Vec<u64>>,
}

impl Scenario {
    /// Bounds for reads that run while the threads' events apply.
    pub fn read_bounds(&self) -> ReadBounds {
        ReadBounds::new(
            self.setup.iter().map(|(_, e)| e),
            self.threads.iter().flatten(),
        )
    }

    /// A tree with `config` and one lane per thread, after the setup.
    pub fn prepare<G: ShapeGate>(&self, config: TreeConfig) -> (Tree<G>, Vec<Lane<G>>) {
        let tree = Tree::new(config);
        let mut lanes: Vec<Lane<G>> = self.threads.iter().map(|_| tree.new_lane()).collect();
        for (lane, event) in &self.setup {
            apply_ok(&tree, &mut lanes[*lane], event);
        }
        (tree, lanes)
    }

    /// The final state of every serial order of the threads' events (each
    /// thread's order kept) on fresh trees with the fast path off,
    /// deduplicated.
    pub fn serial_outcomes<G: ShapeGate>(&self) -> Vec<Observation> {
        let lens: Vec<usize> = self.threads.iter().map(Vec::len).collect();
        let mut outcomes: Vec<Observation> = Vec::new();
        for order in interleavings(&lens) {
            let (tree, mut lanes) = self.prepare::<G>(model_config(false));
            let mut next = vec![0; self.threads.len()];
            for thread in order {
                apply_ok(
                    &tree,
                    &mut lanes[thread],
                    &self.threads[thread][next[thread]],
                );
                next[thread] += 1;
            }
            let observed = observe(&tree, &self.queries);
            drop(lanes);
            drop(tree);
            if !outcomes.contains(&observed) {
                outcomes.push(observed);
            }
        }
        outcomes
    }
}

/// Selects a mutant for its lifetime; dropping it (also while unwinding)
/// selects [`Mutant::None`] again.
#[derive(Debug)]
pub struct MutantGuard(());

impl MutantGuard {
    /// Selects `mutant`.
    pub fn select(mutant: Mutant) -> Self {
        mutant.select();
        Self(())
    }
}

impl Drop for MutantGuard {
    fn drop(&mut self) {
        Mutant::None.select();
    }
}

/// The mutant with numeric id `id` (`Mutant as u8`).
pub fn mutant_by_id(id: u8) -> Option<Mutant> {
    std::iter::once(Mutant::None)
        .chain(Mutant::RWLOCK)
        .find(|&m| m as u8 == id)
}

/// Environment variable through which a parent test hands a child process
/// its negative control: `"<mutant id> <model name>"`.
pub const CHILD_ENV: &str = "CRTC_MUTANT_CHILD";

/// The line a child prints with its verdict.
const VERDICT: &str = "crtc-mutant-verdict:";

/// What a negative-control child reported.
#[derive(Clone, Debug)]
pub struct ChildVerdict {
    /// The model failed under the mutant.
    pub caught: bool,
    /// The child's own summary (executions or schedules, time).
    pub detail: String,
    /// The first panic message the child printed, if any.
    pub panic: Option<String>,
}

/// The negative control this process was started for, if it is a child:
/// `(mutant, model name)`.
pub fn child_request() -> Option<(Mutant, String)> {
    let spec = std::env::var(CHILD_ENV).ok()?;
    let (id, model) = spec.split_once(' ')?;
    let mutant = mutant_by_id(id.parse().ok()?)?;
    Some((mutant, model.to_string()))
}

/// In a child: selects `mutant`, runs `model` (which panics when its checks
/// fail), and prints the verdict for the parent. The model's panic is caught
/// here; the process ends right after, so the checker state it leaves
/// behind is never reused.
pub fn child_run(mutant: Mutant, model: &str, run: impl FnOnce() -> String) {
    let guard = MutantGuard::select(mutant);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
    drop(guard);
    match result {
        Ok(detail) => println!("{VERDICT} survived {model}: {detail}"),
        Err(_) => println!("{VERDICT} caught {model}"),
    }
}

/// In the parent: re-runs this test binary's test `test` (exact name, one
/// thread) with `mutant` and `model` selected, and returns its verdict.
pub fn spawn_child(test: &str, mutant: Mutant, model: &str) -> ChildVerdict {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{} {model}", mutant as u8))
        .output()
        .expect("start the child test process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let panic = stderr
        .lines()
        .chain(stdout.lines())
        .skip_while(|l| !l.contains("panicked at"))
        .nth(1)
        .map(|l| l.trim().chars().take(200).collect());
    let verdict = stdout
        .lines()
        .find_map(|l| l.split_once(VERDICT).map(|(_, v)| v))
        .map(str::trim);
    match verdict {
        Some(v) if v.starts_with("caught") => ChildVerdict {
            caught: true,
            detail: v.to_string(),
            panic,
        },
        Some(v) => ChildVerdict {
            caught: false,
            detail: v.to_string(),
            panic,
        },
        None => panic!(
            "the child for mutant {mutant:?} / {model} printed no verdict (status {}):\n\
             --- stdout\n{stdout}\n--- stderr\n{stderr}",
            output.status
        ),
    }
}

/// Bounds on a score read while events apply concurrently.
///
/// - ceiling (C1): the leading query blocks the rank has ever stored (the
///   setup plus every concurrent event);
/// - floor: the leading query blocks the rank stored in the setup and no event
///   evicts. The shape's coverage rules order every demotion so that a reader
///   never sees a covered slot uncovered (cutoff written before the bit
///   clears), so such a prefix is credited at every instant. The floor is
///   stricter than the read contract (which bounds concurrent reads from
///   above only); it holds for the RwLock gate by that rule.
#[derive(Clone, Debug, Default)]
pub struct ReadBounds {
    ranks: Vec<RankBounds>,
}

#[derive(Clone, Debug)]
struct RankBounds {
    rank: WorkerWithDpRank,
    ever: FxHashSet<ExternalSequenceBlockHash>,
    stable: FxHashSet<ExternalSequenceBlockHash>,
}

impl ReadBounds {
    /// Bounds for reads during `concurrent`, after `setup` applied.
    pub fn new<'a>(
        setup: impl IntoIterator<Item = &'a RouterEvent>,
        concurrent: impl IntoIterator<Item = &'a RouterEvent> + Clone,
    ) -> Self {
        let mut bounds = Self::default();
        for event in setup {
            if let KvCacheEventData::Stored { blocks, .. } = &event.event.data {
                let entry = bounds.entry(event.rank());
                entry.ever.extend(blocks.iter().map(|b| b.external));
                entry.stable.extend(blocks.iter().map(|b| b.external));
            }
        }
        for event in concurrent {
            let entry = bounds.entry(event.rank());
            match &event.event.data {
                KvCacheEventData::Stored { blocks, .. } => {
                    entry.ever.extend(blocks.iter().map(|b| b.external));
                }
                KvCacheEventData::Removed { block_hashes } => {
                    block_hashes.iter().for_each(|h| {
                        entry.stable.remove(h);
                    });
                }
                KvCacheEventData::Cleared => entry.stable.clear(),
            }
        }
        bounds
    }

    fn entry(&mut self, rank: WorkerWithDpRank) -> &mut RankBounds {
        let index = match self.ranks.iter().position(|r| r.rank == rank) {
            Some(index) => index,
            None => {
                self.ranks.push(RankBounds {
                    rank,
                    ever: FxHashSet::default(),
                    stable: FxHashSet::default(),
                });
                self.ranks.len() - 1
            }
        };
        &mut self.ranks[index]
    }

    /// `(floor, ceiling)` of `rank`'s score for `query`.
    pub fn range(&self, rank: WorkerWithDpRank, query: &[LocalBlockHash]) -> (usize, usize) {
        self.ranks
            .iter()
            .find(|r| r.rank == rank)
            .map_or((0, 0), |r| {
                (
                    prefix_within(query, &r.stable),
                    prefix_within(query, &r.ever),
                )
            })
    }

    /// Checks one read: every rank scored or known lies within its bounds.
    pub fn check(&self, query: &[LocalBlockHash], scores: &OverlapScores) -> Result<(), String> {
        let mut ranks: Vec<WorkerWithDpRank> = scores.scores.keys().copied().collect();
        ranks.extend(self.ranks.iter().map(|r| r.rank));
        ranks.sort_unstable();
        ranks.dedup();
        for rank in ranks {
            let (floor, ceiling) = self.range(rank, query);
            let score = scores.score(rank) as usize;
            if score > ceiling {
                return Err(format!(
                    "C1: rank {rank} scored {score} > {ceiling} (blocks it ever stored) for {query:?}"
                ));
            }
            if score < floor {
                return Err(format!(
                    "floor: rank {rank} scored {score} < {floor} (blocks it held throughout) for {query:?}"
                ));
            }
        }
        Ok(())
    }
}

/// Number of leading blocks of the query `locals` inside `blocks`.
pub fn prefix_within(
    locals: &[LocalBlockHash],
    blocks: &FxHashSet<ExternalSequenceBlockHash>,
) -> usize {
    let mut parent = None;
    for (depth, &local) in locals.iter().enumerate() {
        let hash = chain_hash(parent, local);
        if !blocks.contains(&hash) {
            return depth;
        }
        parent = Some(hash);
    }
    locals.len()
}
