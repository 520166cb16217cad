//! Single-thread `find_matches` on a tree built from the chat preset.
//!
//! Group `find_matches`, ids `<gate>/<query>`, for example
//! `find_matches/seqlock/hit`. One iteration is one `find_matches(query,
//! false)` (time per iteration = ns/query; throughput = queries/s). No other
//! thread touches the tree: this is the read path's own cost per gate.
//!
//! The tree: the `chat` preset (seed [`SEED`], scale [`SCALE`]) applied on one
//! lane (worker removals included, stale-leaf sweeps run when the volume
//! rule says so, as the indexer schedules them), built once per gate,
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

mod common;

use common::{call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::types::LocalBlockHash;
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
/// stale-leaf sweeps when due, as the indexer schedules them.
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
    for kind in Kind::ALL {
        let queries: Vec<Vec<LocalBlockHash>> = paths
            .iter()
            .enumerate()
            .map(|(i, path)| {
                let (query, best) = kind.query(path, i as u64);
                let scores = tree.find_matches(&query, false);
                let got = scores.scores.values().copied().max().unwrap_or(0);
                assert_eq!(
                    got,
                    best,
                    "{label}/{}: best score of query {i}",
                    kind.name()
                );
                query
            })
            .collect();
        let id = BenchmarkId::new(label, kind.name());
        let mut next = 0;
        group.bench_function(id, |b| {
            b.iter(|| {
                let query = &queries[next];
                next = if next + 1 == queries.len() {
                    0
                } else {
                    next + 1
                };
                tree.find_matches(black_box(query), false)
            })
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    let workload = preset("chat", SEED, SCALE).expect("chat is a preset");
    every_gate!(bench_gate(c, &workload));
}

criterion_group!(find_matches, benches);
criterion_main!(find_matches);
