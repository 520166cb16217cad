//! Replay of a mini agentx stream on a fresh tree, one lane.
//!
//! Group `replay`, ids `<gate>/<path>/agentx`, with `path` `fast` or
//! `general` (`TreeConfig::fast_path`). One iteration applies every KV event
//! and worker removal of the `agentx` preset (seed [`SEED`], scale [`SCALE`],
//! a few thousand events, about 85–90% of them one-block decode stores) to a
//! fresh tree on one lane; lookups are skipped. After each event the loop
//! does what the indexer does on every enqueue: a stale-leaf sweep when the
//! tree's volume rule says one is due (timed). Time per iteration is the
//! whole stream, throughput is in events. Creating the tree and dropping it
//! afterwards are untimed (`iter_custom`). The first replay of each id is
//! checked, untimed: no event fails, and with the fast path on the decode
//! stores take it.

mod common;

use common::{call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::{Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::workload::{preset, Workload, WorkloadOp};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Preset seed.
const SEED: u64 = 3;
/// Preset scale.
const SCALE: f64 = 0.02;

/// Applies the stream; returns the time it took and the number of sweeps.
fn apply_stream<G: ShapeGate>(
    tree: &Tree<G>,
    lane: &mut Lane<G>,
    workload: &Workload,
) -> (Duration, u64) {
    let mut sweeps = 0;
    let start = Instant::now();
    for op in &workload.ops {
        match op {
            WorkloadOp::Event(event) => {
                let _ = black_box(tree.apply_event(lane, black_box(event)));
                // What the indexer does on every enqueue.
                if let Some(claim) = tree.sweep_due_by_volume() {
                    tree.fold_tally(lane, true);
                    tree.run_sweep(claim);
                    sweeps += 1;
                }
            }
            WorkloadOp::RemoveWorker(worker) => tree.remove_worker(&mut [&mut *lane], *worker),
            WorkloadOp::Query(_) => {}
        }
    }
    (start.elapsed(), sweeps)
}

fn bench_gate<G: ShapeGate>(c: &mut Criterion, workload: &Workload) {
    let label = G::NAME;
    let events = workload.events() as u64;
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(events));
    // One iteration is a whole stream (milliseconds): ten samples suffice.
    group.sample_size(10);
    for fast_path in [true, false] {
        let config = TreeConfig {
            fast_path,
            ..TreeConfig::default()
        };
        {
            let tree = Tree::<G>::new(config.clone());
            let mut lane = tree.new_lane();
            let (_, sweeps) = apply_stream(&tree, &mut lane, workload);
            let counters = lane.counters();
            assert_eq!(counters.errors.get(), 0, "{label}: an event failed");
            let hits = counters.fast_path_hits.get();
            if fast_path {
                assert!(hits > 0, "{label}: the decode stores take the fast path");
            } else {
                assert_eq!(hits, 0, "{label}: fast path off");
            }
            println!(
                "replay/{label}/{}: agentx seed {SEED} scale {SCALE}: {events} events \
                 ({} blocks), decode share {:.1}%, fast-path hits {hits}, stale-leaf sweeps {sweeps}; \
                 final tree {} nodes, {} memberships",
                if fast_path { "fast" } else { "general" },
                workload.blocks(),
                100.0 * workload.decode_share(),
                tree.node_count(),
                tree.membership_count(),
            );
        }
        let path = if fast_path { "fast" } else { "general" };
        let id = BenchmarkId::new(format!("{label}/{path}"), "agentx");
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let tree = Tree::<G>::new(config.clone());
                    let mut lane = tree.new_lane();
                    timed += apply_stream(&tree, &mut lane, workload).0;
                    drop(lane);
                    drop(tree);
                }
                timed
            })
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    let workload = preset("agentx", SEED, SCALE).expect("agentx is a preset");
    every_gate!(bench_gate(c, &workload));
}

criterion_group!(replay, benches);
criterion_main!(replay);
