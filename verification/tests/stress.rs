//! Real-thread stress: writer lanes with disjoint ranks sharing prefixes race
//! stores, decode appends and leaf-first removals on shared leaves while a
//! reader checks C1 on every read (no score above what the rank ever stored);
//! after the writers join, every score must equal the reference model's held
//! prefix exactly (C2). Runs for every strategy, fast path on and off.
//! `CRTC_STRESS_ROUNDS` fixed seeds (default 3) run first, then one fresh
//! seed, printed with the line that replays it (`CRTC_STRESS_SEED=0x…` runs
//! that seed instead of a fresh one).

use crtc::types::{BlockPair, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::{Tree, TreeConfig};
use crtc_strategies::sync::atomic::{AtomicBool, Ordering};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use crtc_verification::reference::Reference;
use crtc_verification::Rng;
use rustc_hash::{FxHashMap, FxHashSet};

const LANES: u64 = 2;
const RANKS_PER_LANE: u64 = 3;

/// One rank's strict event stream: sessions under shared system prompts,
/// decode appends (some shared by every rank), leaf-first removals.
fn rank_stream(rank: WorkerWithDpRank, seed: u64, steps: usize) -> Vec<RouterEvent> {
    let mut rng = Rng::new(seed);
    let mut below = |n: u64| rng.below(n as usize) as u64;
    let mut events = Vec::new();
    let mut held: Vec<Vec<BlockPair>> = Vec::new();
    for _ in 0..steps {
        match below(10) {
            0..=2 => {
                let system = 100 + below(3);
                let mut locals = vec![system, system + 10];
                locals.extend((0..1 + below(3)).map(|_| 1000 + below(6)));
                let blocks = chained(None, &locals);
                events.push(RouterEvent::stored(rank, None, blocks.clone()));
                held.push(blocks);
            }
            3..=7 if !held.is_empty() => {
                let chain = below(held.len() as u64) as usize;
                let parent = held[chain].last().map(|b| b.external);
                let local = if below(2) == 0 {
                    7000 + below(2)
                } else {
                    9000 + rank.worker_id * 100 + below(50)
                };
                let block = chained(parent, &[local]);
                events.push(RouterEvent::stored(rank, parent, block.clone()));
                held[chain].extend(block);
            }
            _ if !held.is_empty() => {
                let chain = below(held.len() as u64) as usize;
                let shared = |b: &BlockPair| {
                    held.iter()
                        .flatten()
                        .filter(|o| o.external == b.external)
                        .count()
                        > 1
                };
                let unshared = held[chain].iter().rev().take_while(|b| !shared(b)).count();
                let cut = (1 + below(held[chain].len() as u64) as usize).min(unshared);
                if cut == 0 {
                    continue;
                }
                let keep = held[chain].len() - cut;
                let gone: Vec<_> = held[chain][keep..]
                    .iter()
                    .rev()
                    .map(|b| b.external)
                    .collect();
                events.push(RouterEvent::removed(rank, gone));
                held[chain].truncate(keep);
                if keep == 0 {
                    held.swap_remove(chain);
                }
            }
            _ => {}
        }
    }
    events
}

/// Max score per (rank, query) a read may ever return: the leading query
/// blocks the rank ever stored.
fn ever_stored(
    streams: &[(WorkerWithDpRank, Vec<RouterEvent>)],
) -> FxHashMap<WorkerWithDpRank, FxHashSet<u64>> {
    let mut ever: FxHashMap<_, FxHashSet<u64>> = FxHashMap::default();
    for (rank, events) in streams {
        for event in events {
            if let crtc::types::KvCacheEventData::Stored { blocks, .. } = &event.event.data {
                ever.entry(*rank)
                    .or_default()
                    .extend(blocks.iter().map(|b| b.external.0));
            }
        }
    }
    ever
}

fn queries(streams: &[(WorkerWithDpRank, Vec<RouterEvent>)]) -> Vec<Vec<LocalBlockHash>> {
    let mut paths: FxHashMap<u64, (Option<u64>, u64)> = FxHashMap::default();
    for event in streams.iter().flat_map(|(_, e)| e) {
        if let crtc::types::KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } = &event.event.data
        {
            let mut parent = parent_hash.map(|p| p.0);
            for block in blocks {
                paths.insert(block.external.0, (parent, block.local.0));
                parent = Some(block.external.0);
            }
        }
    }
    let mut queries: Vec<Vec<LocalBlockHash>> = paths
        .keys()
        .map(|&tail| {
            let mut locals = Vec::new();
            let mut at = Some(tail);
            while let Some(h) = at {
                let (parent, local) = paths[&h];
                locals.push(LocalBlockHash(local));
                at = parent;
            }
            locals.reverse();
            locals
        })
        .collect();
    queries.sort();
    queries
}

fn check_read(
    query: &[LocalBlockHash],
    scores: &crtc::types::OverlapScores,
    ever: &FxHashMap<WorkerWithDpRank, FxHashSet<u64>>,
) {
    let externals = chained(None, &query.iter().map(|l| l.0).collect::<Vec<_>>());
    for (rank, score) in scores.sorted() {
        let bound = externals
            .iter()
            .take_while(|b| ever.get(&rank).is_some_and(|s| s.contains(&b.external.0)))
            .count();
        assert!(
            score as usize <= bound,
            "C1: {rank} scored {score} > ever-stored prefix {bound} on {query:?}"
        );
    }
}

type Streams = Vec<(WorkerWithDpRank, Vec<RouterEvent>)>;
type Ever = FxHashMap<WorkerWithDpRank, FxHashSet<u64>>;

/// Reads every query in passes until `done`, checking C1 on each read.
fn spawn_reader<G: ShapeGate>(
    tree: Arc<Tree<G>>,
    ever: Arc<Ever>,
    queries: Arc<Vec<Vec<LocalBlockHash>>>,
    done: Arc<AtomicBool>,
) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut reads = 0u64;
        loop {
            // Acquire: pairs with the Release store after the writers joined.
            let last_pass = done.load(Ordering::Acquire);
            for query in queries.iter() {
                check_read(query, &tree.find_matches(query, false), &ever);
                reads += 1;
            }
            if last_pass {
                return reads;
            }
        }
    })
}

/// One lane thread applying its ranks' events, interleaved step by step.
fn spawn_writer<G: ShapeGate>(
    tree: Arc<Tree<G>>,
    mine: Streams,
) -> thread::JoinHandle<crtc::Lane<G>> {
    thread::spawn(move || {
        let mut lane = tree.new_lane();
        let longest = mine.iter().map(|(_, e)| e.len()).max().unwrap_or(0);
        for step in 0..longest {
            for event in mine.iter().filter_map(|(_, events)| events.get(step)) {
                tree.apply_event(&mut lane, event)
                    .expect("strict streams apply");
            }
        }
        lane
    })
}

fn run<G: ShapeGate>(fast_path: bool, seed: u64) {
    let tree = Arc::new(Tree::<G>::new(TreeConfig {
        fast_path,
        ..TreeConfig::default()
    }));
    let streams: Streams = (0..LANES * RANKS_PER_LANE)
        .map(|w| {
            let rank = WorkerWithDpRank::new(w, 0);
            (
                rank,
                rank_stream(rank, seed.wrapping_mul(1000).wrapping_add(w), 400),
            )
        })
        .collect();
    let (ever, queries) = (Arc::new(ever_stored(&streams)), Arc::new(queries(&streams)));
    let done = Arc::new(AtomicBool::new(false));
    let reader = spawn_reader(tree.clone(), ever, queries.clone(), done.clone());
    let writers: Vec<_> = (0..LANES)
        .map(|lane| {
            let mine = streams
                .iter()
                .filter(|(r, _)| r.worker_id % LANES == lane)
                .cloned()
                .collect();
            spawn_writer(tree.clone(), mine)
        })
        .collect();
    let lanes: Vec<_> = writers
        .into_iter()
        .map(|w| w.join().expect("writer"))
        .collect();
    // Release: the reader stops after its current pass.
    done.store(true, Ordering::Release);
    assert!(reader.join().expect("reader") > 0);
    let mut model = Reference::new();
    streams.iter().flat_map(|(_, e)| e).for_each(|e| {
        model.apply(e);
    });
    for query in queries.iter() {
        let wrong = model.check(query, &tree.find_matches(query, false));
        assert!(
            wrong.is_empty(),
            "C2 after join, seed {seed}: {query:?} {wrong:?}"
        );
    }
    drop(lanes);
}

/// The seeds of one test: `0..CRTC_STRESS_ROUNDS` (default 3), then one
/// fresh seed, printed, or the one `CRTC_STRESS_SEED` replays.
fn seeds(label: &str) -> Vec<u64> {
    let rounds = std::env::var("CRTC_STRESS_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let fresh = crtc_verification::seeds::fresh_or_replayed("CRTC_STRESS_SEED", label);
    (0..rounds).chain([fresh]).collect()
}

macro_rules! stress {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            #[test]
            fn racing_lanes_never_overcount_and_end_exact_fast_path_on() {
                for seed in super::seeds(concat!("stress ", $label, " fast path on")) {
                    super::run::<$gate>(true, seed);
                }
            }
            #[test]
            fn racing_lanes_never_overcount_and_end_exact_fast_path_off() {
                for seed in super::seeds(concat!("stress ", $label, " fast path off")) {
                    super::run::<$gate>(false, seed);
                }
            }
        }
    };
}

crtc_strategies::for_each_gate!(stress);
