//! Ranks coming and going: slot issue, reuse and release at scale.
//!
//! Group `rank_slots`, ids `<gate>/ranks=100000`: one iteration builds a
//! fresh tree and streams one-block stores from 100,000 distinct ranks
//! ([`WORKERS`] workers of [`DP_RANKS`] dp ranks each). At most [`LIVE`]
//! workers are live: before a new worker stores, the oldest is removed
//! (`remove_worker`: unmap, sweep, release), so later workers run on
//! recycled slots; the last [`LIVE`] are removed at the end. Throughput is in
//! ranks, so the time per rank should not grow with the rank count (issuing
//! a slot once copied the whole slot table: 100,000 ranks took about a
//! minute).

mod common;

use common::{call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::types::{RouterEvent, WorkerWithDpRank};
use crtc::{Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use std::time::{Duration, Instant};

/// Workers streamed per iteration.
const WORKERS: u64 = 100;
/// Dp ranks per worker.
const DP_RANKS: u32 = 1_000;
/// Workers live at once (50,000 ranks).
const LIVE: u64 = 50;
/// Distinct blocks the ranks store (rank `d` stores block `d % BLOCKS`).
const BLOCKS: u32 = 256;

/// Streams every rank through a fresh tree; returns the elapsed time.
fn churn<G: ShapeGate>() -> Duration {
    let tree = Tree::<G>::new(TreeConfig::default());
    let mut lane = tree.new_lane();
    let blocks: Vec<_> = (0..BLOCKS)
        .map(|b| chained(None, &[u64::from(b) + 1]))
        .collect();
    let start = Instant::now();
    for worker in 0..WORKERS {
        if worker >= LIVE {
            tree.remove_worker(&mut [&mut lane], worker - LIVE);
        }
        for dp_rank in 0..DP_RANKS {
            let rank = WorkerWithDpRank::new(worker, dp_rank);
            let block = blocks[(dp_rank % BLOCKS) as usize].clone();
            tree.apply_event(&mut lane, &RouterEvent::stored(rank, None, block))
                .expect("a slot is free");
        }
    }
    for worker in WORKERS - LIVE..WORKERS {
        tree.remove_worker(&mut [&mut lane], worker);
    }
    let elapsed = start.elapsed();
    assert_eq!(tree.slots_issued(), (LIVE * u64::from(DP_RANKS)) as usize);
    elapsed
}

fn bench_gate<G: ShapeGate>(c: &mut Criterion) {
    let mut group = c.benchmark_group("rank_slots");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(WORKERS * u64::from(DP_RANKS)));
    let id = BenchmarkId::new(G::NAME, format!("ranks={}", WORKERS * u64::from(DP_RANKS)));
    group.bench_function(id, |b| {
        b.iter_custom(|iters| (0..iters).map(|_| churn::<G>()).sum())
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    every_gate!(bench_gate(c));
}

criterion_group!(rank_slots, benches);
criterion_main!(rank_slots);
