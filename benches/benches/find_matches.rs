//! Single-thread `find_matches` on a tree built from the chat preset.
//!
//! Group `find_matches`, ids `<gate>/<query>`, for example
//! `find_matches/seqlock/hit`. One iteration is one `find_matches(query,
//! false)` (time per iteration = ns/query; throughput = queries/s). No other
//! thread touches the tree: this is the read path's own cost per gate.
//!
//! The tree: the `chat` preset (seed [`SEED`], scale [`SCALE`]) applied on one
//! lane (worker removals included, stale-leaf sweeps run when the volume
//! rule says so, as the indexer schedules them, and once at the end), built once per gate,
//! untimed; its size
//! and build time are printed. Queries come from the final tree's shape: the
//! root-to-leaf paths of up to [`QUERIES`] leaves that some rank holds in
//! full, spread evenly over the tree, and the iterations cycle through them.
//!
//! * `hit`: a whole stored path; the best score is its length.
//! * `miss`: the same path behind an unknown first block; no score.
//! * `partial`: the path with its last quarter (at least one block) replaced
//!   by unknown blocks, so the walk ends inside an edge; the best score is
//!   the kept prefix.
//!
//! Before timing, each query set is checked against those expectations.
//!
//! With feature `upstream`, dynamo-kv-router 1.6.1's indexes are rows of the
//! same group over the same stream and queries (module `upstream_rows`), the
//! lookup of each timed alone, its query already in upstream's types:
//! `upstream-1.6.1` (its `ConcurrentRadixTreeCompressed`, built through a
//! one-thread `ThreadPoolIndexer` and read through `SyncIndexer::find_matches`,
//! as the pool reads inline), `upstream-radixtree` (the `RadixTree` that its
//! `KvIndexer` runs, applied directly; its `find_matches` takes the query by
//! value, so each iteration clones it, as the router's call does) and
//! `upstream-positional` (its `PositionalIndexer` behind the same pool, fed the
//! stream with external hashes relabelled to upstream's scheme, which its
//! lookups recompute). Every tree is swept before the lookups: ours by its
//! volume rule while it is built and once more at the end, upstream's CRTC
//! through its public cleanup (`run_cleanup_task`, what its five-minute task
//! runs); `RadixTree` prunes on removal and the positional index has nothing
//! to unlink.

mod common;

use common::{call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::types::{LocalBlockHash, OverlapScores};
use crtc::{Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::workload::{preset, Workload, WorkloadOp};
use std::hint::black_box;
use std::time::Instant;

/// Preset seed.
const SEED: u64 = 7;
/// Preset scale (about 40k events; the tree builds in well under a second).
const SCALE: f64 = 1.0;
/// Most queries per kind.
const QUERIES: usize = 256;
/// Local hashes no preset produces (presets draw from a 64-bit generator;
/// a collision with these is vanishingly unlikely, and the checks below
/// would catch it).
const UNKNOWN: u64 = 0xdead_beef_0000_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Hit,
    Miss,
    Partial,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Hit, Kind::Miss, Kind::Partial];

    fn name(self) -> &'static str {
        match self {
            Kind::Hit => "hit",
            Kind::Miss => "miss",
            Kind::Partial => "partial",
        }
    }

    /// The query for a stored `path`, and the best score it must get.
    fn query(self, path: &[LocalBlockHash], i: u64) -> (Vec<LocalBlockHash>, u32) {
        let mut query = path.to_vec();
        match self {
            Kind::Hit => (query, path.len() as u32),
            Kind::Miss => {
                query.insert(0, LocalBlockHash(UNKNOWN + (i << 16)));
                (query, 0)
            }
            Kind::Partial => {
                let cut = (path.len() / 4).max(1);
                let keep = path.len() - cut;
                for (j, block) in query[keep..].iter_mut().enumerate() {
                    *block = LocalBlockHash(UNKNOWN + (i << 16) + 1 + j as u64);
                }
                (query, keep as u32)
            }
        }
    }
}

/// Applies every event and worker removal of `workload` on one lane, with
/// stale-leaf sweeps when due, as the indexer schedules them, and one
/// final sweep.
fn build<G: ShapeGate>(workload: &Workload) -> Tree<G> {
    let tree = Tree::<G>::new(TreeConfig::default());
    let mut lane = tree.new_lane();
    for op in &workload.ops {
        match op {
            WorkloadOp::Event(event) => {
                tree.apply_event(&mut lane, event)
                    .expect("the chat preset is strict");
                if let Some(claim) = tree.sweep_due_by_volume() {
                    tree.fold_tally(&mut lane, true);
                    tree.run_sweep(claim);
                }
            }
            WorkloadOp::RemoveWorker(worker) => tree.remove_worker(&mut [&mut lane], *worker),
            WorkloadOp::Query(_) => {}
        }
    }
    // And once more at the end, as upstream's rows are swept (module docs).
    tree.fold_tally(&mut lane, true);
    tree.sweep_stale();
    tree
}

/// Root-to-leaf paths (local hashes) of up to [`QUERIES`] leaves that a rank
/// holds in full, evenly spread.
fn stored_paths<G: ShapeGate>(tree: &Tree<G>) -> Vec<Vec<LocalBlockHash>> {
    let nodes = tree.topology();
    let path = |mut i: usize| {
        let mut edges = Vec::new();
        loop {
            edges.push(&nodes[i].edge);
            match nodes[i].parent {
                Some(p) => i = p,
                None => break,
            }
        }
        edges
            .into_iter()
            .rev()
            .flatten()
            .map(|b| b.local)
            .collect::<Vec<_>>()
    };
    let leaves: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].children == 0 && !nodes[i].full.is_empty())
        .collect();
    let step = leaves.len().div_ceil(QUERIES).max(1);
    leaves.into_iter().step_by(step).map(path).collect()
}

/// The queries of one kind, each with the best score it must get.
type QuerySet<Q> = (Kind, Vec<(Q, u32)>);

/// The queries of every kind for the stored `paths`.
fn query_sets(paths: &[Vec<LocalBlockHash>]) -> Vec<QuerySet<Vec<LocalBlockHash>>> {
    Kind::ALL
        .into_iter()
        .map(|kind| {
            let queries = (paths.iter().enumerate())
                .map(|(i, path)| kind.query(path, i as u64))
                .collect();
            (kind, queries)
        })
        .collect()
}

/// Times `lookup` over `queries` (cycled) as the id `label/kind`, after
/// checking each query's best score (`best` of its result).
fn bench_lookups<Q, S>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    (label, kind): (&str, Kind),
    queries: &[(Q, u32)],
    best: impl Fn(&S) -> u32,
    mut lookup: impl FnMut(&Q) -> S,
) {
    for (i, (query, expected)) in queries.iter().enumerate() {
        let got = best(&lookup(query));
        assert_eq!(
            got,
            *expected,
            "{label}/{}: best score of query {i}",
            kind.name()
        );
    }
    let mut next = 0;
    group.bench_function(BenchmarkId::new(label, kind.name()), |b| {
        b.iter(|| {
            let query = &queries[next].0;
            next = if next + 1 == queries.len() {
                0
            } else {
                next + 1
            };
            lookup(black_box(query))
        })
    });
}

fn bench_gate<G: ShapeGate>(c: &mut Criterion, workload: &Workload) {
    let label = G::NAME;
    let start = Instant::now();
    let tree = build::<G>(workload);
    let built = start.elapsed();
    let paths = stored_paths(&tree);
    assert!(!paths.is_empty(), "the chat tree has held leaves");
    let mean = paths.iter().map(Vec::len).sum::<usize>() as f64 / paths.len() as f64;
    println!(
        "find_matches/{label}: chat seed {SEED} scale {SCALE}: {} events applied in {:.0} ms; \
         {} nodes, {} memberships; {} queries per kind, mean stored path {mean:.1} blocks",
        workload.events(),
        built.as_secs_f64() * 1e3,
        tree.node_count(),
        tree.membership_count(),
        paths.len(),
    );
    let mut group = c.benchmark_group("find_matches");
    group.throughput(Throughput::Elements(1));
    for (kind, queries) in query_sets(&paths) {
        let best = |scores: &OverlapScores| scores.scores.values().copied().max().unwrap_or(0);
        bench_lookups(&mut group, (label, kind), &queries, best, |query| {
            tree.find_matches(query, false)
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    let workload = preset("chat", SEED, SCALE).expect("chat is a preset");
    every_gate!(bench_gate(c, &workload));
    #[cfg(feature = "upstream")]
    upstream_rows::bench(c, &workload);
}

/// dynamo-kv-router 1.6.1's indexes over the same stream and queries (see
/// the module docs).
#[cfg(feature = "upstream")]
mod upstream_rows {
    use super::*;
    use crtc_bench::compare::subjects::dynamo::rehash;
    use crtc_bench::compare::subjects::upstream::{convert_event, convert_query, runtime};
    use dynamo_kv_router::indexer::positional::{PositionalIndexer, SearchMode};
    use dynamo_kv_router::indexer::{
        KvIndexerInterface, RadixTree, SyncIndexer, ThreadPoolIndexer,
    };
    use dynamo_kv_router::protocols as up;
    use dynamo_kv_router::ConcurrentRadixTreeCompressed;
    use rustc_hash::FxHashMap;

    /// Tokens per block handed to the pool (as `crtc compare` does).
    const BLOCK_TOKENS: u32 = crtc_verification::workload::BLOCK_TOKENS as u32;
    /// The positional index's jump size (as `crtc compare` builds it).
    const JUMP_SIZE: usize = 32;

    /// `backend` behind a one-thread pool, fed `workload` (events mapped by
    /// `map`), flushed.
    fn pooled<T: SyncIndexer>(
        backend: T,
        workload: &Workload,
        mut map: impl FnMut(&crtc::types::RouterEvent) -> up::RouterEvent,
    ) -> ThreadPoolIndexer<T> {
        let pool = ThreadPoolIndexer::new(backend, 1, BLOCK_TOKENS);
        let rt = runtime();
        for op in &workload.ops {
            match op {
                WorkloadOp::Event(event) => {
                    // Fails only once the pool shut down.
                    let _ = pool.enqueue_event(map(event));
                }
                WorkloadOp::RemoveWorker(worker) => {
                    rt.block_on(KvIndexerInterface::remove_worker(&pool, *worker))
                }
                WorkloadOp::Query(_) => {}
            }
        }
        rt.block_on(pool.flush());
        // Its public cleanup (a no-op where the index has nothing to unlink).
        pool.backend().run_cleanup_task();
        pool
    }

    fn radix_tree(workload: &Workload) -> RadixTree {
        let mut tree = RadixTree::new();
        for op in &workload.ops {
            match op {
                WorkloadOp::Event(event) => {
                    // A refused event is refused by every row alike.
                    let _ = tree.apply_event(convert_event(event));
                }
                WorkloadOp::RemoveWorker(worker) => tree.remove_worker(*worker),
                WorkloadOp::Query(_) => {}
            }
        }
        tree
    }

    fn best(scores: &up::OverlapScores) -> u32 {
        scores.scores.values().copied().max().unwrap_or(0)
    }

    /// The query sets of our RwLock gate's tree, in upstream's types.
    fn queries(workload: &Workload) -> Vec<QuerySet<Vec<up::LocalBlockHash>>> {
        let ours = build::<crtc_strategies::RwLockGate>(workload);
        query_sets(&stored_paths(&ours))
            .into_iter()
            .map(|(kind, set)| {
                let set = set
                    .into_iter()
                    .map(|(q, b)| (convert_query(&q), b))
                    .collect();
                (kind, set)
            })
            .collect()
    }

    pub fn bench(c: &mut Criterion, workload: &Workload) {
        let sets = queries(workload);
        let crtc = pooled(
            ConcurrentRadixTreeCompressed::new(),
            workload,
            convert_event,
        );
        let mut sequence = FxHashMap::default();
        let positional = pooled(
            PositionalIndexer::new_with_mode(JUMP_SIZE, SearchMode::Strided),
            workload,
            |event| convert_event(&rehash(event, &mut sequence)),
        );
        let radix = radix_tree(workload);
        let mut group = c.benchmark_group("find_matches");
        group.throughput(Throughput::Elements(1));
        for (kind, set) in &sets {
            bench_lookups(&mut group, ("upstream-1.6.1", *kind), set, best, |q| {
                crtc.backend().find_matches(q, false)
            });
            bench_lookups(&mut group, ("upstream-radixtree", *kind), set, best, |q| {
                radix.find_matches(q.clone(), false)
            });
            bench_lookups(&mut group, ("upstream-positional", *kind), set, best, |q| {
                positional.backend().find_matches(q, false)
            });
        }
        group.finish();
    }
}

criterion_group!(find_matches, benches);
criterion_main!(find_matches);
