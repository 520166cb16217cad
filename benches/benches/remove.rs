//! Removals and clears.
//!
//! Group `remove`, ids `<gate>/<kind>`, for example `remove/rwlock/tail_first`.
//! One iteration is one event (time per iteration = ns/event; throughput =
//! blocks named per event, or nodes swept for `cleared`).
//!
//! Every fixture is a set of leaves of [`LEAF`] blocks, each a root child held
//! fully by the removing rank A and by rank B (on its own lane), so no
//! removal leaves a node without holders and no stale-leaf sweep runs: the
//! numbers are the removal itself (locating the run, lowering A's cutoff,
//! scrubbing A's lookups of newly uncovered blocks).
//!
//! Kinds (one timed event per leaf, except `cleared`):
//! * `tail_first`: A evicts the leaf's last [`RUN`] blocks, named tail first
//!   (leaf-first LRU eviction): cutoff `LEAF - RUN`, `RUN` lookups scrubbed.
//! * `head_first`: A evicts the leaf's first [`RUN`] blocks, named head first
//!   (an eviction that leaves a hole): cutoff 0, every lookup of the leaf
//!   scrubbed.
//! * `partial_cutoff`: A evicts one block in the middle of the edge (position
//!   `LEAF / 2`): cutoff `LEAF / 2`, the upper half's lookups scrubbed.
//! * `cleared`: [`CLEAR_RANKS`] ranks all hold every leaf; each event is one
//!   of them clearing (`Cleared`), which sweeps its slot out of every node.
//!   Its cost grows with the tree: the id names the node count.
//!
//! Building, events and teardown are untimed (`iter_custom`). Each timed run
//! checks the lane counters (every event a removal or clear, none failed);
//! `-- --test` also checks, untimed, the cutoffs each kind leaves.

mod common;

use common::{bench_over_builds, call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::types::{BlockPair, ExternalSequenceBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::{EventOutcome, Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Blocks per leaf.
const LEAF: usize = 32;
/// Blocks named per `tail_first` / `head_first` event.
const RUN: usize = 8;
/// Leaves per build (one timed removal each).
const LEAVES: usize = 64;
/// Leaves of a `cleared` build.
const CLEAR_LEAVES: usize = 64;
/// Ranks of a `cleared` build (one timed clear each).
const CLEAR_RANKS: usize = 8;

/// The removing rank.
const A: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
/// The rank that keeps every leaf held.
const B: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    TailFirst,
    HeadFirst,
    PartialCutoff,
    Cleared,
}

impl Kind {
    const ALL: [Kind; 4] = [
        Kind::TailFirst,
        Kind::HeadFirst,
        Kind::PartialCutoff,
        Kind::Cleared,
    ];

    fn name(self) -> String {
        match self {
            Kind::TailFirst => format!("tail_first/blocks={RUN}"),
            Kind::HeadFirst => format!("head_first/blocks={RUN}"),
            Kind::PartialCutoff => "partial_cutoff/blocks=1".into(),
            Kind::Cleared => format!("cleared/nodes={CLEAR_LEAVES}"),
        }
    }

    /// Throughput elements per event.
    fn elements(self) -> u64 {
        match self {
            Kind::TailFirst | Kind::HeadFirst => RUN as u64,
            Kind::PartialCutoff => 1,
            Kind::Cleared => CLEAR_LEAVES as u64,
        }
    }

    /// A's cutoff on every leaf after its event (not `cleared`).
    fn cutoff(self) -> u32 {
        match self {
            Kind::TailFirst => (LEAF - RUN) as u32,
            Kind::HeadFirst => 0,
            Kind::PartialCutoff => (LEAF / 2) as u32,
            Kind::Cleared => unreachable!(),
        }
    }
}

/// The hashes a removal names.
fn hashes(blocks: &[BlockPair]) -> Vec<ExternalSequenceBlockHash> {
    blocks.iter().map(|b| b.external).collect()
}

struct Fixture<G: ShapeGate> {
    /// The lane of the removing ranks (A, or every clearing rank).
    lane: Lane<G>,
    /// B's lane, which holds its lookups.
    _keeper: Lane<G>,
    tree: Tree<G>,
    events: Vec<RouterEvent>,
}

impl<G: ShapeGate> Fixture<G> {
    fn build(kind: Kind) -> Self {
        let tree = Tree::<G>::new(TreeConfig::default());
        let mut lane = tree.new_lane();
        let mut keeper = tree.new_lane();
        let leaves = if kind == Kind::Cleared {
            CLEAR_LEAVES
        } else {
            LEAVES
        };
        let ranks: Vec<WorkerWithDpRank> = match kind {
            Kind::Cleared => (0..CLEAR_RANKS as u64)
                .map(|w| WorkerWithDpRank::new(10 + w, 0))
                .collect(),
            _ => vec![A],
        };
        let mut events = Vec::new();
        for leaf in 0..leaves as u64 {
            let locals: Vec<u64> = (0..LEAF as u64).map(|i| ((leaf + 1) << 32) + i).collect();
            let chain = chained(None, &locals);
            for &rank in &ranks {
                let store = RouterEvent::stored(rank, None, chain.clone());
                tree.apply_event(&mut lane, &store).expect("build");
            }
            let store = RouterEvent::stored(B, None, chain.clone());
            tree.apply_event(&mut keeper, &store).expect("build");
            let named = match kind {
                Kind::TailFirst => {
                    let mut h = hashes(&chain[LEAF - RUN..]);
                    h.reverse();
                    h
                }
                Kind::HeadFirst => hashes(&chain[..RUN]),
                Kind::PartialCutoff => vec![chain[LEAF / 2].external],
                Kind::Cleared => continue,
            };
            events.push(RouterEvent::removed(A, named));
        }
        if kind == Kind::Cleared {
            events.extend(ranks.into_iter().map(RouterEvent::cleared));
        }
        Self {
            lane,
            _keeper: keeper,
            tree,
            events,
        }
    }

    fn run(&mut self, kind: Kind, n: usize) -> Duration {
        let counters = self.lane.counters().clone();
        let (removals, clears, errors) = (
            counters.removals.get(),
            counters.clears.get(),
            counters.errors.get(),
        );
        let start = Instant::now();
        for event in &self.events[..n] {
            let _ = black_box(self.tree.apply_event(&mut self.lane, black_box(event)));
        }
        let elapsed = start.elapsed();
        assert_eq!(counters.errors.get(), errors, "{kind:?}: an event failed");
        let done = counters.removals.get() - removals + counters.clears.get() - clears;
        assert_eq!(
            done, n as u64,
            "{kind:?}: removals and clears over {n} events"
        );
        elapsed
    }
}

/// Untimed: each event applies and leaves the coverage the kind describes.
fn check_kind<G: ShapeGate>(kind: Kind) {
    let mut fx = Fixture::<G>::build(kind);
    let nodes = fx.tree.topology().len();
    for event in &fx.events {
        let outcome = fx.tree.apply_event(&mut fx.lane, event);
        let expected = if kind == Kind::Cleared {
            EventOutcome::Cleared
        } else {
            EventOutcome::Removed
        };
        assert_eq!(outcome, Ok(expected), "{kind:?}");
    }
    let after = fx.tree.topology();
    assert_eq!(
        after.len(),
        nodes,
        "{kind:?}: removals never change the shape"
    );
    for node in &after {
        if kind == Kind::Cleared {
            assert_eq!(node.full, vec![B], "{kind:?}: only B is left");
            assert!(node.cutoffs.is_empty(), "{kind:?}");
        } else {
            assert_eq!(node.full, vec![B], "{kind:?}: A is demoted");
            let cut: Vec<_> = node.cutoffs.iter().filter(|&&(_, k)| k > 0).collect();
            match kind.cutoff() {
                0 => assert!(cut.is_empty(), "{kind:?}: A holds nothing"),
                k => assert_eq!(cut, vec![&(A, k)], "{kind:?}"),
            }
        }
    }
}

fn bench_gate<G: ShapeGate>(c: &mut Criterion) {
    let mut group = c.benchmark_group("remove");
    for kind in Kind::ALL {
        check_kind::<G>(kind);
        group.throughput(Throughput::Elements(kind.elements()));
        let id = BenchmarkId::new(G::NAME, kind.name());
        bench_over_builds(
            &mut group,
            id,
            || Fixture::<G>::build(kind),
            |fx| fx.events.len(),
            |fx, n| fx.run(kind, n),
        );
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    every_gate!(bench_gate(c));
}

criterion_group!(remove, benches);
criterion_main!(remove);
