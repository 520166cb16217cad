//! Decode tail-append: the fast path against the general planning path.
//!
//! Group `tail_append`, ids `<gate>/<path>/batch=<b>/edge=<e>`, for example
//! `tail_append/rwlock/fast/batch=1/edge=16`. The gate is
//! [`ShapeGate::NAME`] (`rwlock`, `seqlock`, `epoch-crossbeam`,
//! `epoch-seize`). Each gate is one line in
//! `benches()`, behind its feature, so `--features all-strategies` puts every
//! gate in one report. One iteration is one `Stored`
//! event of `b` blocks (so the time per iteration is ns/event and the
//! throughput is blocks/s). `fast` and `general` run the same binary; only
//! `TreeConfig::fast_path` differs.
//!
//! What one event looks like. Rank A stores `b` blocks whose parent is the
//! current tail of a leaf that A covers fully. Rank B (another worker, on its
//! own lane) shares the leaf's first `e` blocks. The tree holds nothing else
//! but other such leaves.
//!
//! Steady state, not first append. Right after a leaf is built both ranks are
//! full on it, so A's first append demotes B to a cutoff; for `e = 16` it
//! also pushes the edge past the edge index threshold (16), which builds the
//! position table. Both happen once in a leaf's life, so each build makes one
//! such warm-up append per leaf *outside* the timed region, and every timed
//! event is a later decode step: B already holds a cutoff, the index exists,
//! and the append demotes nobody. This is the realistic decode case (a
//! request extending its own leaf below a prompt prefix other ranks hold).
//!
//! Rebuilds. Each build makes fresh leaves of `e` blocks and times at most
//! `max(1, e / b)` appends per leaf, so the edge before a timed append is in
//! `[e + b, 2e + b)`: `edge` is the leaf length at build, and edges never grow
//! unbounded. A build has enough leaves for at least [`EVENTS_PER_BUILD`]
//! timed events (appended leaf by leaf, like one request after another), so
//! the timer's own cost stays well under 1 ns per event. The timed appends
//! include the amortized growth of the edge vector, its position table and
//! the lane's lookup map (each grows about once per leaf while timed), as a
//! long decode pays them. Building, the warm-up, the events' construction and
//! the teardown are all untimed (`iter_custom`). After each timed run the lane
//! counters must show that every event took the path the id names and none
//! failed; the bench panics otherwise.
//!
//! `cargo bench --bench tail_append -- --test` runs every id once (one build
//! each) after the same checks, in about a second.
//!
//! Paired mode: `cargo bench --bench tail_append -- --paired [ROUNDS]` skips
//! criterion and measures the ratio general / fast at batch 1 for every gate
//! and edge, paired at a fine grain. Criterion times the two ids seconds
//! apart, and on a shared VM whose speed changes in phases lasting seconds
//! that ratio moves with the phase (an example: `papers/choices.md`). Here
//! each round times [`PAIRED_BUILDS`] fixtures of each path,
//! each built (untimed) right before it runs, fast and general fixture `i`
//! back to back in an order that flips with `i`, so both paths of a round run
//! within a millisecond or so of each other; the round's ratio is the general
//! path's time per event over the fast path's. One line per gate and edge
//! gives the median ratio over the rounds, its quartiles and range, and each
//! path's median ns/event. Every timed event is checked as in criterion mode.

mod common;

use common::{bench_over_builds, call_bench, every_gate};
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::types::{BlockPair, RouterEvent, WorkerWithDpRank};
use crtc::{EventOutcome, Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Blocks per event.
const BATCHES: [usize; 3] = [1, 4, 16];
/// Leaf length at build.
const EDGES: [usize; 2] = [16, 256];
/// Least number of timed events per build.
const EVENTS_PER_BUILD: usize = 64;
/// Fixtures of each path per round (paired mode).
const PAIRED_BUILDS: usize = 16;
/// Rounds per gate and edge when `--paired` names no count.
const PAIRED_ROUNDS: usize = 200;

/// The appending rank (full on every leaf).
const APPENDER: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
/// The rank sharing each leaf (a cutoff once the leaf is warm).
const SHARER: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);

/// One benchmark's parameters.
#[derive(Clone, Copy, Debug)]
struct Case {
    fast_path: bool,
    batch: usize,
    edge: usize,
}

impl Case {
    fn path(&self) -> &'static str {
        if self.fast_path {
            "fast"
        } else {
            "general"
        }
    }

    /// Timed appends per leaf: the leaf at most doubles while timed.
    fn appends_per_leaf(&self) -> usize {
        (self.edge / self.batch).max(1)
    }

    fn leaves(&self) -> usize {
        EVENTS_PER_BUILD.div_ceil(self.appends_per_leaf())
    }

    /// Blocks of one leaf over its whole life: build, warm-up, timed appends.
    fn leaf_blocks(&self) -> usize {
        self.edge + (1 + self.appends_per_leaf()) * self.batch
    }
}

/// A built tree with warm leaves and the timed events, in order.
struct Fixture<G: ShapeGate> {
    appender: Lane<G>,
    /// Holds the sharer's lookups, as its own lane would.
    _sharer: Lane<G>,
    tree: Tree<G>,
    events: Vec<RouterEvent>,
}

/// A store by `rank` of `chain[start..start + len]`, whose parent is
/// `chain[start - 1]` (the root when `start` is 0).
fn store_at(rank: WorkerWithDpRank, chain: &[BlockPair], start: usize, len: usize) -> RouterEvent {
    let parent = start.checked_sub(1).map(|i| chain[i].external);
    RouterEvent::stored(rank, parent, chain[start..start + len].to_vec())
}

impl<G: ShapeGate> Fixture<G> {
    /// Builds `case.leaves()` leaves of `case.edge` blocks, each held fully by
    /// both ranks, then warms each with one append by the appender.
    fn build(case: Case) -> Self {
        let tree = Tree::<G>::new(TreeConfig {
            fast_path: case.fast_path,
            ..TreeConfig::default()
        });
        let mut appender = tree.new_lane();
        let mut sharer = tree.new_lane();
        let per_leaf = case.appends_per_leaf();
        let mut events = Vec::with_capacity(case.leaves() * per_leaf);
        for leaf in 0..case.leaves() {
            // Distinct first local hash per leaf: each leaf is a root child.
            let base = (leaf as u64 + 1) << 32;
            let locals: Vec<u64> = (0..case.leaf_blocks() as u64).map(|i| base + i).collect();
            let chain = chained(None, &locals);
            let built = [
                tree.apply_event(&mut appender, &store_at(APPENDER, &chain, 0, case.edge)),
                tree.apply_event(&mut sharer, &store_at(SHARER, &chain, 0, case.edge)),
                // The warm-up append: demotes the sharer, indexes the edge.
                tree.apply_event(
                    &mut appender,
                    &store_at(APPENDER, &chain, case.edge, case.batch),
                ),
            ];
            for outcome in built {
                outcome.expect("building a leaf never fails");
            }
            events.extend(
                (1..=per_leaf)
                    .map(|k| store_at(APPENDER, &chain, case.edge + k * case.batch, case.batch)),
            );
        }
        Self {
            appender,
            _sharer: sharer,
            tree,
            events,
        }
    }

    /// Applies the first `n` events and returns the time that took. Panics if
    /// an event failed or took another path than the case's.
    fn run(&mut self, case: Case, n: usize) -> Duration {
        let counters = self.appender.counters().clone();
        let (hits, general, errors) = (
            counters.fast_path_hits.get(),
            counters.general_stores.get(),
            counters.errors.get(),
        );
        let start = Instant::now();
        for event in &self.events[..n] {
            let _ = black_box(self.tree.apply_event(&mut self.appender, black_box(event)));
        }
        let elapsed = start.elapsed();
        let (hits, general) = (
            counters.fast_path_hits.get() - hits,
            counters.general_stores.get() - general,
        );
        assert_eq!(counters.errors.get(), errors, "{case:?}: an event failed");
        let expected = if case.fast_path { (n, 0) } else { (0, n) };
        assert_eq!(
            (hits as usize, general as usize),
            expected,
            "{case:?}: (fast-path hits, general stores) over {n} events"
        );
        elapsed
    }
}

/// Checks, once per case and untimed, that a warm leaf looks as documented
/// and that every event is a non-duplicate store on the case's path.
fn check_case<G: ShapeGate>(case: Case) {
    let mut fx = Fixture::<G>::build(case);
    let nodes = fx.tree.topology();
    assert_eq!(nodes.len(), case.leaves(), "{case:?}: one node per leaf");
    for node in &nodes {
        assert_eq!(
            node.edge.len(),
            case.edge + case.batch,
            "{case:?}: warm length"
        );
        assert!(!node.internal, "{case:?}: the leaf is a leaf");
        assert_eq!(node.full, vec![APPENDER], "{case:?}: the appender is full");
        assert_eq!(
            node.cutoffs,
            vec![(SHARER, case.edge as u32)],
            "{case:?}: the sharer is demoted by the warm-up append"
        );
    }
    for event in &fx.events {
        let outcome = fx.tree.apply_event(&mut fx.appender, event);
        match outcome {
            Ok(EventOutcome::Stored(stored)) => {
                assert_eq!(stored.fast_path, case.fast_path, "{case:?}: path");
                assert!(!stored.duplicate, "{case:?}: every event appends");
            }
            other => panic!("{case:?}: unexpected outcome {other:?}"),
        }
    }
    let grown = case.leaf_blocks();
    assert!(
        fx.tree.topology().iter().all(|n| n.edge.len() == grown),
        "{case:?}: every leaf ends at {grown} blocks"
    );
}

/// Every `tail_append` case for the gate `G`.
fn bench_gate<G: ShapeGate>(c: &mut Criterion) {
    let mut group = c.benchmark_group("tail_append");
    for fast_path in [true, false] {
        for batch in BATCHES {
            for edge in EDGES {
                let case = Case {
                    fast_path,
                    batch,
                    edge,
                };
                check_case::<G>(case);
                group.throughput(Throughput::Elements(batch as u64));
                let id = BenchmarkId::new(
                    format!("{}/{}", G::NAME, case.path()),
                    format!("batch={batch}/edge={edge}"),
                );
                bench_over_builds(
                    &mut group,
                    id,
                    || Fixture::<G>::build(case),
                    |fx| fx.events.len(),
                    |fx, n| fx.run(case, n),
                );
            }
        }
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    every_gate!(bench_gate(c));
}

/// The `q`-quantile of sorted `values` (nearest rank).
fn quantile(values: &[f64], q: f64) -> f64 {
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// One round of paired mode: the fast and the general path's ns/event.
/// Each fixture is built right before it is timed, as in criterion mode.
fn paired_round<G: ShapeGate>(cases: [Case; 2], flip: bool) -> [f64; 2] {
    let (mut time, mut events) = ([Duration::ZERO; 2], [0usize; 2]);
    for i in 0..PAIRED_BUILDS {
        let order = if (i % 2 == 0) != flip { [0, 1] } else { [1, 0] };
        for path in order {
            let mut fx = Fixture::<G>::build(cases[path]);
            let n = fx.events.len();
            time[path] += fx.run(cases[path], n);
            events[path] += n;
        }
    }
    [0, 1].map(|path| time[path].as_nanos() as f64 / events[path] as f64)
}

/// Paired mode for the gate `G` (module docs): one line per edge.
fn paired_gate<G: ShapeGate>(rounds: usize) {
    for edge in EDGES {
        let cases = [true, false].map(|fast_path| Case {
            fast_path,
            batch: 1,
            edge,
        });
        let per_round: Vec<[f64; 2]> = (0..rounds)
            .map(|round| paired_round::<G>(cases, round % 2 == 1))
            .collect();
        let sorted = |f: &dyn Fn(&[f64; 2]) -> f64| {
            let mut v: Vec<f64> = per_round.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let ratios = sorted(&|r| r[1] / r[0]);
        let (fast, general) = (sorted(&|r| r[0]), sorted(&|r| r[1]));
        println!(
            "tail_append_paired/{}/batch=1/edge={edge}: general/fast median {:.3} \
             (quartiles {:.3}-{:.3}, range {:.3}-{:.3}, {rounds} rounds); \
             fast {:.1} ns/event, general {:.1} ns/event (medians)",
            G::NAME,
            quantile(&ratios, 0.5),
            quantile(&ratios, 0.25),
            quantile(&ratios, 0.75),
            ratios[0],
            ratios[rounds - 1],
            quantile(&fast, 0.5),
            quantile(&general, 0.5),
        );
    }
}

criterion_group!(tail_append, benches);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--paired") {
        let rounds = match args.get(at + 1).filter(|a| !a.starts_with("--")) {
            None => PAIRED_ROUNDS,
            Some(count) => match count.parse::<usize>() {
                Ok(rounds) if rounds > 0 => rounds,
                _ => {
                    eprintln!("--paired {count}: the round count must be a positive integer");
                    std::process::exit(2);
                }
            },
        };
        every_gate!(paired_gate(rounds));
        return;
    }
    tail_append();
    Criterion::default().configure_from_args().final_summary();
}
