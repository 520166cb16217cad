//! Gate-level loom models: one gate `G`, built from a [`ShapeInit`], a
//! writer thread and a reader (the main thread), small enough for loom to
//! explore every weak-memory outcome of the reader's loads.
//!
//! The reader runs `gate.read(...)` and captures everything a view exposes
//! ([`Captured`]: the length, every pair below it, the full slots, the
//! cutoffs, the internal flag). The capture must equal exactly the state
//! before the write or the state after it (computed on a [`PlainShape`] with
//! the same coverage rule), never a mix:
//!
//! - **split**: 4-block edge, slots 0 and 1 full; the writer runs
//!   `exclusive_commit` with `split_at(2)` (the tree's split);
//! - **demote**: the same node; slot 0 appends one block on the fast path,
//!   demoting slot 1 to a cutoff at 4 (the buffer is exactly full, so the
//!   epoch gate moves to a fresh buffer and the seqlock gate grows its own);
//! - **demote_in_place**: the node first grows (slot 0 appends a fifth
//!   block, then slot 1 is promoted to full), so the demoting append writes
//!   into spare capacity: the epoch gate publishes a snapshot that shares the
//!   buffer, then the buffer's length;
//! - **pure_append**: slot 0 alone full on a grown 5-block edge appends two
//!   blocks: the reader sees the old length with the old pairs or the new
//!   length with the new pairs, never a default (zero) pair below the length
//!   it saw;
//! - **two_appenders**: slots 0 and 1 full on a 4-block edge each append a
//!   different block under the tail from their own thread (no reader):
//!   exactly one wins, the other misses, and the final state is the
//!   winner's.
//!
//! The writer pins the gate's reclaimer around its operation, as the tree
//! does for a store. Every execution runs between
//! [`grace::begin_execution`] and [`grace::end_execution`], so gates over
//! [`GraceReclaim`](super::grace::GraceReclaim) check their retirements.

use super::{grace, summarize, Explorer, NamedModel};
use crate::check;
use crate::property::Property;
use crtc_strategies::bits::SlotBits;
use crtc_strategies::shape::{append_demoting, split_at};
use crtc_strategies::sync::thread;
use crtc_strategies::sync::Arc;
use crtc_strategies::{
    AppendMiss, BlockPair, Commit, ExternalSequenceBlockHash, PlainShape, Reclaim, ShapeGate,
    ShapeInit, ShapeRead, Slot,
};

const S0: Slot = Slot(0);
const S1: Slot = Slot(1);

/// The pair of block `i`: local `i`, external `100 + i` (never zero).
pub fn pair(i: u64) -> BlockPair {
    BlockPair::new(i, 100 + i)
}

fn pairs(range: std::ops::RangeInclusive<u64>) -> Vec<BlockPair> {
    range.map(pair).collect()
}

/// Everything a reader's view exposes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Captured {
    /// The edge length.
    pub len: usize,
    /// Every pair below the length.
    pub pairs: Vec<BlockPair>,
    /// The full slots.
    pub full: Vec<Slot>,
    /// The cutoffs.
    pub cutoffs: Vec<(Slot, u32)>,
    /// The internal flag.
    pub internal: bool,
}

/// Captures `view` (side-effect free: optimistic gates may run it on views
/// that fail validation).
pub fn capture(view: &impl ShapeRead) -> Captured {
    let mut pairs = Vec::new();
    view.copy_pairs(0..view.len(), &mut pairs);
    let mut cutoffs = Vec::new();
    view.for_each_cutoff(|slot, k| cutoffs.push((slot, k)));
    Captured {
        len: view.len(),
        pairs,
        full: view.full_slots(),
        cutoffs,
        internal: view.is_internal(),
    }
}

/// The gate-level models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateModel {
    /// A reader vs a split at 2.
    Split,
    /// A reader vs a demoting append that needs a new buffer.
    Demote,
    /// A reader vs a demoting append into spare capacity.
    DemoteInPlace,
    /// A reader vs a pure (non-demoting) in-place append.
    PureAppend,
    /// A reader vs a pure append that needs a new buffer: the seqlock gate
    /// replaces the edge buffer while readers run (a monotone write), so the
    /// old buffer's retirement races the reader's load of it.
    PureGrow,
    /// Two appenders on one node.
    TwoAppenders,
}

/// The single-threaded part of a model: the node before the concurrent
/// write, as an init plus setup steps.
#[derive(Clone, Debug)]
struct Start {
    init: ShapeInit,
    /// Slot 0 appends block 5 first (grows the buffer).
    grow: bool,
    /// Slot 1 is promoted to full after the growth.
    promote_s1: bool,
}

impl GateModel {
    /// Every model.
    pub const ALL: [GateModel; 6] = [
        GateModel::Split,
        GateModel::Demote,
        GateModel::DemoteInPlace,
        GateModel::PureAppend,
        GateModel::PureGrow,
        GateModel::TwoAppenders,
    ];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            GateModel::Split => "split",
            GateModel::Demote => "demote",
            GateModel::DemoteInPlace => "demote_in_place",
            GateModel::PureAppend => "pure_append",
            GateModel::PureGrow => "pure_grow",
            GateModel::TwoAppenders => "two_appenders",
        }
    }

    /// What it checks.
    pub fn what(self) -> &'static str {
        match self {
            GateModel::Split => "torn read vs split at 2",
            GateModel::Demote => "torn read vs demoting append, new buffer",
            GateModel::DemoteInPlace => "torn read vs demoting append, in place",
            GateModel::PureAppend => "reader vs pure append, in place",
            GateModel::PureGrow => "reader vs pure append, new buffer",
            GateModel::TwoAppenders => "two appenders on one node",
        }
    }

    fn start(self) -> Start {
        let mut full = SlotBits::new();
        full.insert(S0);
        let (grow, promote_s1) = match self {
            GateModel::Split | GateModel::Demote | GateModel::TwoAppenders => {
                full.insert(S1);
                (false, false)
            }
            GateModel::DemoteInPlace => (true, true),
            GateModel::PureAppend => (true, false),
            GateModel::PureGrow => (false, false),
        };
        Start {
            init: ShapeInit {
                edge: pairs(1..=4),
                full,
                ..ShapeInit::default()
            },
            grow,
            promote_s1,
        }
    }

    /// The node before the concurrent write, as plain data.
    fn plain_before(self) -> PlainShape {
        let start = self.start();
        let mut shape = PlainShape::new(start.init);
        if start.grow {
            append_demoting(&mut shape, S0, &[pair(5)]);
        }
        if start.promote_s1 {
            crtc_strategies::shape::promote_full(&mut shape, S1);
        }
        shape
    }

    /// The states a reader may capture: before, and after each possible
    /// write (two for `two_appenders`, whose winner is either slot).
    fn expected(self) -> (Captured, Vec<Captured>) {
        let before = self.plain_before();
        let afters = match self {
            GateModel::Split => {
                let mut after = before.clone();
                split_at(&mut after, 2);
                vec![after]
            }
            GateModel::Demote | GateModel::DemoteInPlace | GateModel::PureGrow => {
                let mut after = before.clone();
                let next = after.len() as u64 + 1;
                append_demoting(&mut after, S0, &[pair(next)]);
                vec![after]
            }
            GateModel::PureAppend => {
                let mut after = before.clone();
                append_demoting(&mut after, S0, &[pair(6), pair(7)]);
                vec![after]
            }
            GateModel::TwoAppenders => [(S0, 5), (S1, 6)]
                .into_iter()
                .map(|(slot, block)| {
                    let mut after = before.clone();
                    append_demoting(&mut after, slot, &[pair(block)]);
                    after
                })
                .collect(),
        };
        (capture(&before), afters.iter().map(capture).collect())
    }

    /// Builds the gate and runs the setup (inside an execution).
    fn build<G: ShapeGate>(self) -> G {
        let start = self.start();
        let gate = G::new(start.init);
        if start.grow {
            let tail = ExternalSequenceBlockHash(pair(4).external.0);
            gate.try_append_at_tail(S0, tail, &[pair(5)])
                .expect("setup: slot 0 appends block 5");
        }
        if start.promote_s1 {
            gate.shared_commit(None, |w| crtc_strategies::shape::promote_full(w, S1))
                .expect("setup: slot 1 promoted");
        }
        gate
    }

    /// Explores the model for gate `G`; panics when a check fails. Returns a
    /// summary.
    pub fn check<G: ShapeGate>(self, explorer: &dyn Explorer) -> String {
        let (before, afters) = self.expected();
        assert!(
            afters.iter().all(|a| *a != before),
            "{}: the write must change the captured state",
            self.name()
        );
        summarize(explorer, || {
            explorer.explore(Box::new(move || {
                grace::begin_execution();
                run::<G>(self, &before, &afters);
                grace::end_execution();
            }))
        })
    }

    /// The model as a [`NamedModel`] for gate `G`.
    pub fn named<G: ShapeGate>(self, explorer: impl Explorer + 'static) -> NamedModel {
        NamedModel {
            name: self.name(),
            what: self.what(),
            run: Box::new(move || self.check::<G>(&explorer)),
        }
    }
}

/// The concurrent write of `model`, run by a writer thread (pinned like a
/// tree store). Returns a description of its result for the checks.
fn write<G: ShapeGate>(
    model: GateModel,
    gate: &G,
    tail: ExternalSequenceBlockHash,
    slot: Slot,
    block: u64,
) -> Result<usize, String> {
    let _pin = G::Reclaim::pin();
    match model {
        GateModel::Split => {
            let suffix = gate
                .exclusive_commit(None, |w| Commit::changed(split_at(w, 2)))
                .map_err(|_| "the split was stale".to_string())?;
            if suffix.edge != pairs(3..=4) {
                return Err(format!("the split returned suffix {:?}", suffix.edge));
            }
            Ok(2)
        }
        _ => {
            let blocks: Vec<BlockPair> = if model == GateModel::PureAppend {
                vec![pair(6), pair(7)]
            } else {
                vec![pair(block)]
            };
            gate.try_append_at_tail(slot, tail, &blocks)
                .map_err(|miss| format!("miss {miss:?}"))
        }
    }
}

fn run<G: ShapeGate>(model: GateModel, before: &Captured, afters: &[Captured]) {
    let gate = Arc::new(model.build::<G>());
    assert_eq!(
        gate.read(|v| capture(v)),
        *before,
        "{}: the setup built another state",
        model.name()
    );
    let next = before.len as u64 + 1;
    let tail = before.pairs.last().expect("a non-empty edge").external;
    if model == GateModel::TwoAppenders {
        let spawn = |slot: Slot, block: u64| {
            let gate = Arc::clone(&gate);
            thread::spawn(move || write::<G>(model, &gate, tail, slot, block))
        };
        let (a, b) = (spawn(S0, 5), spawn(S1, 6));
        let results = [
            a.join().expect("appender 0 panicked"),
            b.join().expect("appender 1 panicked"),
        ];
        let after = gate.read(|v| capture(v));
        drop(gate);
        let wins: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
        check!(
            Property::OneAppendWins,
            wins.len() == 1,
            "two_appenders: exactly one append must win, results {results:?}"
        );
        let won = wins[0];
        for (i, result) in results.iter().enumerate() {
            if i != won {
                let miss = result.as_ref().err().map(String::as_str);
                let expected = [
                    format!("miss {:?}", AppendMiss::NotTail),
                    format!("miss {:?}", AppendMiss::Uncovered),
                ];
                check!(
                    Property::OneAppendWins,
                    miss.is_some_and(|m| expected.iter().any(|e| e == m)),
                    "two_appenders: the loser must miss (not tail / uncovered), got {result:?}"
                );
            }
        }
        check!(
            Property::SerialOutcome,
            after == afters[won],
            "two_appenders: the final state is not the winner's: {after:?}"
        );
        return;
    }
    // The reader is a spawned thread and the writer runs on the main thread
    // right away, so loom's first execution writes before it reads: loom's
    // DPOR keeps only the last access per location, so a writer that loads
    // a location before storing it hides an earlier concurrent load of it,
    // and the interleavings are found from the reader's loads instead
    // (see `dpor_sanity`).
    let reader = {
        let gate = Arc::clone(&gate);
        thread::spawn(move || gate.read(|v| capture(v)))
    };
    let written = write::<G>(model, &gate, tail, S0, next);
    let seen = reader.join().expect("the reader panicked");
    let after = gate.read(|v| capture(v));
    drop(gate);
    assert_eq!(
        written,
        Ok(if model == GateModel::Split {
            2
        } else {
            before.len
        }),
        "{}: the write failed",
        model.name()
    );
    check!(
        Property::SerialOutcome,
        after == afters[0],
        "{}: the final state {after:?} is not {:?}",
        model.name(),
        afters[0]
    );
    let zero = BlockPair::new(0, 0);
    check!(
        Property::AtomicRead,
        !seen.pairs.contains(&zero),
        "{}: the reader saw a default pair below the length it read: {seen:?}",
        model.name()
    );
    check!(
        Property::AtomicRead,
        seen == *before || seen == afters[0],
        "{}: torn read\n  seen:   {seen:?}\n  before: {before:?}\n  after:  {:?}",
        model.name(),
        afters[0]
    );
}

/// The gate models of `models` as [`NamedModel`]s for gate `G`.
pub fn named<G: ShapeGate, E: Explorer + Clone + 'static>(
    explorer: &E,
    models: &[GateModel],
) -> Vec<NamedModel> {
    models
        .iter()
        .map(|m| m.named::<G>(explorer.clone()))
        .collect()
}

/// A check of the checker: loom's DPOR keeps only the last access per
/// location, so when a reader's load runs before a writer that loads the
/// location and then stores it, the writer's own load hides the reader's and
/// the interleaving "read after the store" is never explored. Returns the
/// values a reader saw in each layout: `(reader first, writer first)`; the
/// models use the writer-first layout, which sees both.
pub fn dpor_sanity(explorer: &dyn Explorer) -> (Vec<u64>, Vec<u64>) {
    use crtc_strategies::sync::atomic::{AtomicU64, Ordering};
    use std::cell::RefCell;
    thread_local! {
        static SEEN: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    }
    let mut layouts = Vec::new();
    for reader_first in [true, false] {
        SEEN.with(|s| s.borrow_mut().clear());
        explorer.explore(Box::new(move || {
            let cell = Arc::new(AtomicU64::new(0));
            let write = {
                let cell = Arc::clone(&cell);
                move || {
                    // Relaxed: the load only makes the writer touch the
                    // location first, like a gate's writer view.
                    cell.load(Ordering::Relaxed);
                    // Release: the value the reader may see.
                    cell.store(1, Ordering::Release);
                }
            };
            let seen = if reader_first {
                let writer = thread::spawn(write);
                // Acquire: pairs with the store above.
                let seen = cell.load(Ordering::Acquire);
                writer.join().expect("the writer panicked");
                seen
            } else {
                let reader = {
                    let cell = Arc::clone(&cell);
                    // Acquire: pairs with the store above.
                    thread::spawn(move || cell.load(Ordering::Acquire))
                };
                write();
                reader.join().expect("the reader panicked")
            };
            SEEN.with(|s| s.borrow_mut().push(seen));
        }));
        let mut seen = SEEN.with(|s| s.borrow().clone());
        seen.sort_unstable();
        seen.dedup();
        layouts.push(seen);
    }
    (layouts.remove(0), layouts.remove(0))
}
