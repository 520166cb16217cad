//! Bounded memory (C8), for every strategy: after a churn of stores,
//! decode appends, evictions, clears and worker removals (with slot
//! recycling) and a stale-leaf sweep, the tree's node count and footprint
//! return to within 10% of a fresh tree built by replaying only the events
//! of the sequences still live, in their original order. Both trees must
//! also answer every live query exactly. Run directly on two lanes and
//! through the indexer with volume-scheduled sweeps; the ratios are printed.
//!
//! Reclamation changes shape, never semantics: the differential harness's
//! random streams (holes, clears, worker removals) run against a tree that
//! sweeps after every operation and must still satisfy C1–C4.

use crtc::harness::TreeHooks;
use crtc::types::{BlockPair, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::{Indexer, IndexerConfig, Lane, SweepPolicy, Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use crtc_verification::reference::Reference;
use crtc_verification::Rng;

/// System prompts; each has three live sequences (fanout stays compact).
const PROMPTS: u64 = 8;
const LIVE_PER_PROMPT: u64 = 3;
/// Live ranks are workers 1..=LIVE_RANKS; transient workers start at 100.
const LIVE_RANKS: u64 = 6;

fn rank(worker: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, 0)
}

/// One operation of the churn.
#[derive(Clone, Debug)]
enum Op {
    Event(RouterEvent),
    RemoveWorker(u64),
}

/// A sequence some rank holds.
#[derive(Clone, Debug)]
struct Seq {
    owner: u64,
    prompt: u64,
    blocks: Vec<BlockPair>,
    live: bool,
}

/// The churn, the events that built the live data, and the live queries.
struct Churn {
    ops: Vec<Op>,
    live_events: Vec<RouterEvent>,
    queries: Vec<Vec<LocalBlockHash>>,
}

struct Gen {
    rng: Rng,
    ops: Vec<Op>,
    live_events: Vec<RouterEvent>,
    seqs: Vec<Seq>,
    next_local: u64,
    next_worker: u64,
}

fn prompt_locals(prompt: u64) -> Vec<u64> {
    (0..4).map(|k| 1_000 + prompt * 10 + k).collect()
}

impl Gen {
    fn fresh_locals(&mut self, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                self.next_local += 1;
                self.next_local
            })
            .collect()
    }

    fn emit(&mut self, event: RouterEvent, live: bool) {
        if live {
            self.live_events.push(event.clone());
        }
        self.ops.push(Op::Event(event));
    }

    /// A new sequence under `prompt` stored from the root by `owner`.
    fn store_new(&mut self, owner: u64, prompt: u64, live: bool) -> usize {
        let mut locals = prompt_locals(prompt);
        let user = 3 + self.rng.below(6);
        locals.extend(self.fresh_locals(user));
        let blocks = chained(None, &locals);
        self.emit(RouterEvent::stored(rank(owner), None, blocks.clone()), live);
        self.seqs.push(Seq {
            owner,
            prompt,
            blocks,
            live,
        });
        self.seqs.len() - 1
    }

    fn decode(&mut self, index: usize) {
        let local = self.fresh_locals(1);
        let seq = &self.seqs[index];
        let parent = seq.blocks.last().map(|b| b.external);
        let block = chained(parent, &local);
        let (owner, live) = (seq.owner, seq.live);
        self.emit(
            RouterEvent::stored(rank(owner), parent, block.clone()),
            live,
        );
        self.seqs[index].blocks.extend(block);
    }

    /// Evicts a transient sequence: its own blocks, and the prompt too when
    /// no other sequence of the owner sits under that prompt.
    fn evict(&mut self, index: usize) {
        let seq = self.seqs.swap_remove(index);
        let keeps_prompt = self
            .seqs
            .iter()
            .any(|s| s.owner == seq.owner && s.prompt == seq.prompt);
        let from = if keeps_prompt { 4 } else { 0 };
        let gone = seq.blocks[from..]
            .iter()
            .rev()
            .map(|b| b.external)
            .collect();
        self.emit(RouterEvent::removed(rank(seq.owner), gone), false);
    }

    fn transient_owner(&mut self) -> u64 {
        if self.rng.percent(30) {
            1 + self.rng.below(LIVE_RANKS as usize) as u64
        } else {
            100 + self.rng.below(4) as u64 + self.next_worker
        }
    }

    fn churn_step(&mut self) {
        let transient: Vec<usize> = (0..self.seqs.len())
            .filter(|&i| !self.seqs[i].live)
            .collect();
        let live: Vec<usize> = (0..self.seqs.len())
            .filter(|&i| self.seqs[i].live)
            .collect();
        match self.rng.below(100) {
            0..=29 => {
                let owner = self.transient_owner();
                let prompt = self.rng.below(PROMPTS as usize) as u64;
                self.store_new(owner, prompt, false);
            }
            30..=54 => {
                let index = *self.rng.pick(&live).unwrap_or(&0);
                self.decode(index);
            }
            55..=69 if !transient.is_empty() => {
                let index = *self.rng.pick(&transient).unwrap_or(&0);
                self.decode(index);
            }
            70..=89 if !transient.is_empty() => {
                let index = *self.rng.pick(&transient).unwrap_or(&0);
                self.evict(index);
            }
            90..=94 => self.drop_transient_worker(true),
            95..=99 => self.drop_transient_worker(false),
            _ => {}
        }
    }

    /// Removes (or clears) one transient worker; removed ids are replaced so
    /// slots recycle.
    fn drop_transient_worker(&mut self, remove: bool) {
        let worker = 100 + self.rng.below(4) as u64 + self.next_worker;
        self.seqs.retain(|s| s.owner != worker);
        if remove {
            self.ops.push(Op::RemoveWorker(worker));
            self.next_worker += 4;
        } else {
            self.ops.push(Op::Event(RouterEvent::cleared(rank(worker))));
        }
    }
}

fn churn(seed: u64, steps: usize) -> Churn {
    let mut gen = Gen {
        rng: Rng::new(seed),
        ops: Vec::new(),
        live_events: Vec::new(),
        seqs: Vec::new(),
        next_local: 100_000,
        next_worker: 0,
    };
    for prompt in 0..PROMPTS {
        for _ in 0..LIVE_PER_PROMPT {
            if gen.rng.percent(40) {
                let owner = gen.transient_owner();
                let prompt = gen.rng.below(PROMPTS as usize) as u64;
                gen.store_new(owner, prompt, false);
            }
            let owner = 1 + gen.rng.below(LIVE_RANKS as usize) as u64;
            gen.store_new(owner, prompt, true);
        }
    }
    (0..steps).for_each(|_| gen.churn_step());
    while let Some(index) = gen
        .seqs
        .iter()
        .position(|s| !s.live && s.owner <= LIVE_RANKS)
    {
        gen.evict(index);
    }
    for worker in 100..104 + gen.next_worker {
        gen.ops.push(Op::RemoveWorker(worker));
    }
    let queries = gen
        .seqs
        .iter()
        .flat_map(|s| {
            let locals: Vec<LocalBlockHash> = s.blocks.iter().map(|b| b.local).collect();
            (1..=locals.len()).map(move |n| locals[..n].to_vec())
        })
        .collect();
    Churn {
        ops: gen.ops,
        live_events: gen.live_events,
        queries,
    }
}

fn check_exact(
    what: &str,
    model: &Reference,
    queries: &[Vec<LocalBlockHash>],
    score: impl Fn(&[LocalBlockHash]) -> crtc::types::OverlapScores,
) {
    for query in queries {
        let wrong = model.check(query, &score(query));
        assert!(wrong.is_empty(), "{what}: {query:?}: {wrong:?}");
    }
}

/// The fresh tree: only the live events, in order, on one lane.
fn fresh<G: ShapeGate>(churn: &Churn) -> Tree<G> {
    let tree = Tree::<G>::new(TreeConfig::default());
    let mut lane = tree.new_lane();
    for event in &churn.live_events {
        tree.apply_event(&mut lane, event)
            .expect("live events apply");
    }
    tree
}

fn model_of(ops: &[Op]) -> Reference {
    let mut model = Reference::new();
    for op in ops {
        match op {
            Op::Event(event) => {
                model.apply(event);
            }
            Op::RemoveWorker(worker) => model.remove_worker(*worker),
        }
    }
    model
}

/// Prints and checks the ratios of `churned` to `fresh`.
fn compare<G: ShapeGate>(what: &str, churned: &Tree<G>, fresh: &Tree<G>, before_sweep: usize) {
    let nodes = churned.node_count() as f64 / fresh.node_count() as f64;
    let bytes = churned.footprint() as f64 / fresh.footprint() as f64;
    println!(
        "C8 {}/{} {what}: nodes {} vs fresh {} (ratio {nodes:.3}; {before_sweep} before the sweep), \
         bytes {} vs {} (ratio {bytes:.3}), memberships {} vs {}",
        G::NAME,
        <G::Reclaim as crtc_strategies::Reclaim>::NAME,
        churned.node_count(),
        fresh.node_count(),
        churned.footprint(),
        fresh.footprint(),
        churned.membership_count(),
        fresh.membership_count(),
    );
    assert!(
        (0.9..=1.1).contains(&nodes),
        "{what}: node ratio {nodes:.3}"
    );
    assert!(
        (0.9..=1.1).contains(&bytes),
        "{what}: byte ratio {bytes:.3}"
    );
    assert_eq!(
        churned.membership_count(),
        fresh.membership_count(),
        "{what}"
    );
}

fn direct<G: ShapeGate>(seed: u64) {
    let churn = churn(seed, 1500);
    let tree = Tree::<G>::new(TreeConfig {
        sweep: SweepPolicy::disabled(),
        ..TreeConfig::default()
    });
    let mut lanes: Vec<Lane<G>> = (0..2).map(|_| tree.new_lane()).collect();
    for op in &churn.ops {
        match op {
            Op::Event(event) => {
                let lane = &mut lanes[(event.worker_id % 2) as usize];
                tree.apply_event(lane, event).expect("strict churn applies");
            }
            Op::RemoveWorker(worker) => {
                let mut all: Vec<&mut Lane<G>> = lanes.iter_mut().collect();
                tree.remove_worker(&mut all, *worker);
            }
        }
    }
    let before = tree.node_count();
    let stats = tree.sweep_stale().expect("no sweep in flight");
    assert!(stats.unlinked > 0 && stats.held == 0, "{stats:?}");
    let model = model_of(&churn.ops);
    check_exact("churned", &model, &churn.queries, |q| {
        tree.find_matches(q, false)
    });
    let fresh = fresh::<G>(&churn);
    check_exact("fresh", &model, &churn.queries, |q| {
        fresh.find_matches(q, false)
    });
    compare("direct, 2 lanes", &tree, &fresh, before);
}

fn indexed<G: ShapeGate>(seed: u64) {
    let churn = churn(seed, 1500);
    let indexer = Indexer::<G>::new(IndexerConfig {
        lanes: 2,
        tree: TreeConfig {
            sweep: SweepPolicy {
                dead_floor: 16,
                ..SweepPolicy::eager()
            },
            ..TreeConfig::default()
        },
    });
    for op in &churn.ops {
        match op {
            Op::Event(event) => indexer.apply_event(event.clone()).expect("lanes run"),
            Op::RemoveWorker(worker) => indexer.remove_worker(*worker),
        }
    }
    indexer.flush();
    let scheduled = indexer.tree().sweep_trigger().finished();
    let before = indexer.tree().node_count();
    let _ = indexer.sweep_stale();
    assert!(scheduled > 0, "the volume trigger scheduled sweeps");
    let model = model_of(&churn.ops);
    check_exact("indexer", &model, &churn.queries, |q| {
        indexer.find_matches(q)
    });
    let fresh = fresh::<G>(&churn);
    compare(
        "indexer, 2 lanes, volume sweeps",
        indexer.tree(),
        &fresh,
        before,
    );
}

/// The tree on one lane, swept after every operation.
struct SweepingTree<G: ShapeGate> {
    tree: Tree<G>,
    lane: Lane<G>,
    unlinked: u64,
}

impl<G: ShapeGate> SweepingTree<G> {
    fn sweep(&mut self) {
        self.tree.fold_tally(&mut self.lane, true);
        self.unlinked += self.tree.sweep_stale().map_or(0, |s| s.unlinked);
    }
}

impl<G: ShapeGate> crtc_verification::Backend for SweepingTree<G> {
    fn apply(&mut self, event: &RouterEvent) -> Result<(), crtc::types::KvError> {
        let result = self.tree.apply_event(&mut self.lane, event).map(|_| ());
        self.sweep();
        result
    }
    fn remove_worker(&mut self, worker: u64) {
        self.tree.remove_worker(&mut [&mut self.lane], worker);
        self.sweep();
    }
    fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank) {
        self.tree.remove_worker_dp_rank(&mut [&mut self.lane], rank);
        self.sweep();
    }
    fn find_matches(&self, query: &[LocalBlockHash]) -> crtc::types::OverlapScores {
        self.tree.find_matches(query, false)
    }
    fn find_match_details(&self, query: &[LocalBlockHash]) -> crtc::types::MatchDetails {
        self.tree.find_match_details(query, false)
    }
}

fn sweeping_differential<G: ShapeGate>(fast_path: bool) {
    let cases = (crtc_verification::cases_from_env() / 32).max(4) as u64;
    let mut unlinked = 0;
    for seed in 0..cases {
        for strict in [true, false] {
            let tree = Tree::<G>::new(TreeConfig {
                fast_path,
                sweep: SweepPolicy::disabled(),
                ..TreeConfig::default()
            });
            let lane = tree.new_lane();
            let mut backend = SweepingTree {
                tree,
                lane,
                unlinked: 0,
            };
            let ops = crtc_verification::random_stream(seed, 300, strict);
            if let Err(e) = crtc_verification::run_differential(&mut backend, &ops, strict, 2) {
                panic!("seed {seed} strict {strict} fast {fast_path}: {e}");
            }
            unlinked += backend.unlinked;
        }
    }
    println!(
        "sweeping differential {}/{}: {cases} seeds, {unlinked} nodes unlinked",
        G::NAME,
        <G::Reclaim as crtc_strategies::Reclaim>::NAME
    );
    assert!(unlinked > 0);
}

macro_rules! memory {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            #[test]
            fn sweeps_after_every_op_keep_the_differential_exact() {
                super::sweeping_differential::<$gate>(true);
                super::sweeping_differential::<$gate>(false);
            }

            #[test]
            fn churn_then_sweep_returns_to_a_fresh_tree_direct() {
                for seed in 0..3 {
                    super::direct::<$gate>(seed);
                }
            }

            #[test]
            fn churn_then_sweep_returns_to_a_fresh_tree_through_the_indexer() {
                for seed in 0..3 {
                    super::indexed::<$gate>(seed);
                }
            }
        }
    };
}

crtc_strategies::for_each_gate!(memory);
