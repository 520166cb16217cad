//! The stale-leaf sweep over a wide fanout.
//!
//! Group `sweep`, ids `<gate>/fanout=<n>`: one internal node (a shared
//! system prompt of [`PREFIX`] blocks that a second rank continues, so it is
//! internal) with `n` dead leaves under it, each a [`LEAF`]-block
//! continuation that rank A stored and then evicted. One iteration is one
//! `sweep_stale` that unlinks all `n` leaves; the fixture is rebuilt
//! (untimed) for every iteration. Throughput is in leaves, so the time per
//! leaf should not grow with the fanout: a sweep is linear in the nodes it
//! visits (this bench caught a sweep that copied the whole child map after
//! every unlink, quadratic in the fanout). Reclamation is disabled in the
//! tree's config, so only the timed call sweeps.

mod common;

use common::{call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::types::{RouterEvent, WorkerWithDpRank};
use crtc::SweepPolicy;
use crtc::{Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use std::time::{Duration, Instant};

/// Blocks of the shared system prompt.
const PREFIX: u64 = 16;
/// Blocks of each dead leaf.
const LEAF: u64 = 4;
/// Dead leaves per build.
const FANOUTS: [u64; 2] = [256, 4096];

/// The rank whose leaves die.
const A: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
/// The rank that keeps the system prompt held and internal.
const KEEPER: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);

/// A tree with `fanout` dead leaves under one internal node.
fn build<G: ShapeGate>(fanout: u64) -> Tree<G> {
    let tree = Tree::<G>::new(TreeConfig {
        sweep: SweepPolicy::disabled(),
        ..TreeConfig::default()
    });
    let mut lane = tree.new_lane();
    let prefix = chained(None, &(0..PREFIX).collect::<Vec<_>>());
    let tail = prefix.last().map(|b| b.external);
    for rank in [A, KEEPER] {
        tree.apply_event(&mut lane, &RouterEvent::stored(rank, None, prefix.clone()))
            .expect("the prompt applies");
    }
    let kept = chained(tail, &[1 << 40]);
    tree.apply_event(&mut lane, &RouterEvent::stored(KEEPER, tail, kept))
        .expect("the keeper's continuation applies");
    for leaf in 0..fanout {
        let locals: Vec<u64> = (0..LEAF).map(|i| ((leaf + 2) << 40) + i).collect();
        let blocks = chained(tail, &locals);
        let hashes = blocks.iter().rev().map(|b| b.external).collect();
        tree.apply_event(&mut lane, &RouterEvent::stored(A, tail, blocks))
            .expect("a leaf applies");
        tree.apply_event(&mut lane, &RouterEvent::removed(A, hashes))
            .expect("its eviction applies");
    }
    tree.fold_tally(&mut lane, true);
    tree
}

fn bench_gate<G: ShapeGate>(c: &mut Criterion) {
    let mut group = c.benchmark_group("sweep");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(2));
    for fanout in FANOUTS {
        let swept = build::<G>(fanout)
            .sweep_stale()
            .expect("no other sweep runs");
        assert_eq!(swept.unlinked, fanout, "the sweep unlinks every dead leaf");
        group.throughput(Throughput::Elements(fanout));
        let id = BenchmarkId::new(G::NAME, format!("fanout={fanout}"));
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let tree = build::<G>(fanout);
                        let start = Instant::now();
                        let stats = tree.sweep_stale();
                        let took = start.elapsed();
                        assert!(stats.is_some_and(|s| s.unlinked == fanout));
                        took
                    })
                    .sum()
            })
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    every_gate!(bench_gate(c));
}

criterion_group!(sweep, benches);
criterion_main!(sweep);
