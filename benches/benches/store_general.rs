//! General-path stores: the planning path for stores the fast path cannot take.
//!
//! Group `store_general`, ids `<gate>/<kind>/batch=<b>`, for example
//! `store_general/rwlock/split_mid_edge/batch=1`. One iteration is one
//! `Stored` event of `b` blocks by rank A (time per iteration = ns/event,
//! throughput = blocks/s). The tree runs with the default configuration (fast
//! path on): none of these events is fast-path eligible, so each pays the
//! fast path's miss as it would in production; after every timed run the lane
//! counters must show `n` general stores, no fast-path hit and no error.
//! Compare with `tail_append/<gate>/fast/batch=<b>` for the fast/general gap.
//!
//! Kinds:
//! * `fanout_child`: A holds internal prompt nodes of [`PROMPT`] blocks (each
//!   a root child that already has two children); each event stores `b` new
//!   blocks under a prompt's last block, which inserts one more child under
//!   an internal node. A prompt takes at most [`FANOUT_EVENTS`] timed events,
//!   so its fan-out stays in `[2, 2 + FANOUT_EVENTS)`.
//! * `split_mid_edge`: A holds leaves of [`LEAF`] blocks; each event stores
//!   `b` blocks under block `LEAF / 2 - 1` of a leaf with a new first block,
//!   which splits the leaf in the middle of its edge (one event per leaf).
//! * `suffix_reuse`: A holds leaves of [`LEAF`] blocks and rank B holds the
//!   first [`REUSE_HELD`] blocks of each (a cutoff). Each event is B
//!   re-storing the next `b` blocks of the existing edge under its own last
//!   block: the blocks are already there, so the store only raises B's
//!   cutoff and adds B's lookups (a second worker recomputing a shared
//!   prompt). B never becomes full on a leaf while timed.
//!
//! Building, events and teardown are untimed (`iter_custom`); every build
//! has at least [`EVENTS_PER_BUILD`] timed events. `-- --test` runs each id
//! once after an untimed check that each kind does what it says (topology).

mod common;

use common::{bench_over_builds, call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::types::{BlockPair, RouterEvent, WorkerWithDpRank};
use crtc::{EventOutcome, Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Blocks per event.
const BATCHES: [usize; 2] = [1, 16];
/// Least number of timed events per build.
const EVENTS_PER_BUILD: usize = 64;
/// Blocks of a prompt node (`fanout_child`).
const PROMPT: usize = 32;
/// Timed child inserts per prompt node (`fanout_child`).
const FANOUT_EVENTS: usize = 16;
/// Blocks of a leaf (`split_mid_edge`, `suffix_reuse`).
const LEAF: usize = 64;
/// Blocks of each leaf B holds before its timed stores (`suffix_reuse`).
const REUSE_HELD: usize = 8;

/// The storing rank.
const A: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
/// The re-storing rank (`suffix_reuse`).
const B: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    FanoutChild,
    SplitMidEdge,
    SuffixReuse,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::FanoutChild, Kind::SplitMidEdge, Kind::SuffixReuse];

    fn name(self) -> &'static str {
        match self {
            Kind::FanoutChild => "fanout_child",
            Kind::SplitMidEdge => "split_mid_edge",
            Kind::SuffixReuse => "suffix_reuse",
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Case {
    kind: Kind,
    batch: usize,
}

impl Case {
    /// Timed events per prompt or leaf.
    fn per_node(&self) -> usize {
        match self.kind {
            Kind::FanoutChild => FANOUT_EVENTS,
            Kind::SplitMidEdge => 1,
            // B's cutoff stays below the leaf's length.
            Kind::SuffixReuse => (LEAF - REUSE_HELD - 1) / self.batch,
        }
    }

    fn nodes(&self) -> usize {
        EVENTS_PER_BUILD.div_ceil(self.per_node())
    }
}

/// A store by `rank` of `chain[start..start + len]` under `chain[start - 1]`
/// (the root when `start` is 0).
fn store_at(rank: WorkerWithDpRank, chain: &[BlockPair], start: usize, len: usize) -> RouterEvent {
    let parent = start.checked_sub(1).map(|i| chain[i].external);
    RouterEvent::stored(rank, parent, chain[start..start + len].to_vec())
}

/// `n` distinct local hashes in a namespace of their own.
fn locals(namespace: u64, n: usize) -> Vec<u64> {
    (0..n as u64).map(|i| (namespace << 32) + i).collect()
}

struct Fixture<G: ShapeGate> {
    lane: Lane<G>,
    tree: Tree<G>,
    events: Vec<RouterEvent>,
}

impl<G: ShapeGate> Fixture<G> {
    fn build(case: Case) -> Self {
        let tree = Tree::<G>::new(TreeConfig::default());
        let mut lane = tree.new_lane();
        let mut events = Vec::with_capacity(case.nodes() * case.per_node());
        let apply = |lane: &mut Lane<G>, event: &RouterEvent| {
            tree.apply_event(lane, event)
                .expect("building the fixture never fails");
        };
        for node in 0..case.nodes() as u64 {
            let ns = (node + 1) << 8;
            match case.kind {
                Kind::FanoutChild => {
                    let prompt = chained(None, &locals(ns, PROMPT));
                    apply(&mut lane, &store_at(A, &prompt, 0, PROMPT));
                    let tail = prompt.last().map(|b| b.external);
                    // Two children make the prompt node internal.
                    for child in 0..2 + case.per_node() as u64 {
                        let blocks = chained(tail, &locals(ns + 1 + child, case.batch));
                        let event = RouterEvent::stored(A, tail, blocks);
                        if child < 2 {
                            apply(&mut lane, &event);
                        } else {
                            events.push(event);
                        }
                    }
                }
                Kind::SplitMidEdge => {
                    let leaf = chained(None, &locals(ns, LEAF));
                    apply(&mut lane, &store_at(A, &leaf, 0, LEAF));
                    let parent = Some(leaf[LEAF / 2 - 1].external);
                    let blocks = chained(parent, &locals(ns + 1, case.batch));
                    events.push(RouterEvent::stored(A, parent, blocks));
                }
                Kind::SuffixReuse => {
                    let leaf = chained(None, &locals(ns, LEAF));
                    apply(&mut lane, &store_at(A, &leaf, 0, LEAF));
                    apply(&mut lane, &store_at(B, &leaf, 0, REUSE_HELD));
                    events.extend(
                        (0..case.per_node())
                            .map(|k| store_at(B, &leaf, REUSE_HELD + k * case.batch, case.batch)),
                    );
                }
            }
        }
        Self { lane, tree, events }
    }

    /// Applies the first `n` events, timed; panics unless each was a
    /// successful general store.
    fn run(&mut self, case: Case, n: usize) -> Duration {
        let counters = self.lane.counters().clone();
        let before = (
            counters.fast_path_hits.get(),
            counters.general_stores.get(),
            counters.errors.get(),
        );
        let start = Instant::now();
        for event in &self.events[..n] {
            let _ = black_box(self.tree.apply_event(&mut self.lane, black_box(event)));
        }
        let elapsed = start.elapsed();
        let after = (
            counters.fast_path_hits.get(),
            counters.general_stores.get(),
            counters.errors.get(),
        );
        assert_eq!(
            (after.0 - before.0, after.1 - before.1, after.2 - before.2),
            (0, n as u64, 0),
            "{case:?}: (fast-path hits, general stores, errors) over {n} events"
        );
        elapsed
    }
}

/// Untimed: every event applies as a non-duplicate general store and leaves
/// the topology the kind describes.
fn check_case<G: ShapeGate>(case: Case) {
    let mut fx = Fixture::<G>::build(case);
    let before = fx.tree.topology().len();
    for event in &fx.events {
        match fx.tree.apply_event(&mut fx.lane, event) {
            Ok(EventOutcome::Stored(s)) => {
                assert!(!s.fast_path && !s.duplicate, "{case:?}: {s:?}")
            }
            other => panic!("{case:?}: unexpected outcome {other:?}"),
        }
    }
    let nodes = fx.tree.topology();
    let events = fx.events.len();
    match case.kind {
        // One new child per event.
        Kind::FanoutChild => assert_eq!(nodes.len(), before + events, "{case:?}"),
        // A split adds the old suffix's node and the new child.
        Kind::SplitMidEdge => {
            assert_eq!(nodes.len(), before + 2 * events, "{case:?}");
            let prefixes = nodes
                .iter()
                .filter(|n| n.edge.len() == LEAF / 2 && n.internal);
            assert_eq!(
                prefixes.count(),
                case.nodes(),
                "{case:?}: split in the middle"
            );
        }
        // Nothing new: B's cutoff moved on every leaf.
        Kind::SuffixReuse => {
            assert_eq!(nodes.len(), before, "{case:?}");
            let held = (REUSE_HELD + case.per_node() * case.batch) as u32;
            assert!(
                nodes.iter().all(|n| n.cutoffs == vec![(B, held)]),
                "{case:?}: B's cutoff is {held} on every leaf"
            );
        }
    }
}

fn bench_gate<G: ShapeGate>(c: &mut Criterion) {
    let mut group = c.benchmark_group("store_general");
    for kind in Kind::ALL {
        for batch in BATCHES {
            let case = Case { kind, batch };
            check_case::<G>(case);
            group.throughput(Throughput::Elements(batch as u64));
            let id = BenchmarkId::new(
                format!("{}/{}", G::NAME, kind.name()),
                format!("batch={batch}"),
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
    group.finish();
}

fn benches(c: &mut Criterion) {
    every_gate!(bench_gate(c));
}

criterion_group!(store_general, benches);
criterion_main!(store_general);
