//! loom models of the RwLock gate (papers/protocols.md). Built
//! only with `--cfg crtc_loom`, where every lock, atomic, `Arc` and thread of
//! the tree comes from loom through the facade, so loom explores the real
//! code's interleavings. The models live in `crtc_verification::models`,
//! generic over the gate; this file instantiates them for `RwLockGate`:
//!
//! - L1–L4 on the real tree (`models::tree`): a fast append against a
//!   reader, a divergent split, a removal, a racing append, a planned
//!   extension; reads during the writes stay within their bounds and the
//!   final state is a serial outcome;
//! - the gate-level models (`models::gate`): a reader against a split, a
//!   demoting append and a pure append (the read is the state before or
//!   after, never a mix), and two racing appenders (exactly one wins);
//! - the sweep models (`models::unlink`): the stale-leaf sweep unlinking a
//!   leaf while a reader walks into it (U1) and while a store revives it
//!   and appends at its tail (U2).
//!
//! Every model runs over `RwLockGate<GraceReclaim>`: the grace-period
//! reclaimer frees as soon as every pin older than the retire ended, and
//! this binary installs the quarantining allocator, so a child map or node
//! freed while a pinned thread holds it fails the model (`models::grace`).
//!
//! The preemption bound is `CRTC_LOOM_PREEMPTIONS`, else
//! `LOOM_MAX_PREEMPTIONS`, else 2. Tests run in parallel under the default
//! harness: the grace reclaimer's and the checker reclaimer's state is per
//! test thread, and the one test that reads the process-wide retry counters
//! runs alone in a child process (`models::alone`).
//!
//! Negative controls (`loom_mutants_are_caught`): every RwLock mutant, and
//! the tree's `SweepFreesBeforeGrace` (caught by U1) and
//! `ChildrenSortedAfterPublish` (caught by L2r on `race-free`), runs
//! against the models that must catch it, each in a child process of this
//! test binary, and must make one fail. `CRTC_MUTANT_MATRIX=1` runs every
//! mutant against every model instead (slow: a surviving pair explores its
//! whole model).

#![cfg(crtc_loom)]

use crtc_strategies::mutants::Mutant;
use crtc_strategies::RwLockGate;
use crtc_verification::models::gate::{self, GateModel};
use crtc_verification::models::grace::{self, GraceReclaim, QuarantineAlloc};
use crtc_verification::models::tree::{Budget, Model, Reads};
use crtc_verification::models::unlink::UnlinkModel;
use crtc_verification::models::{Catch, Property, Suite};

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// Every model's gate: the grace-period reclaimer frees as soon as every
/// pin older than the retire ended, and the quarantining allocator makes a
/// free while a pinned thread holds the block fail the model
/// (`models::grace`).
type G = RwLockGate<GraceReclaim>;

fn suite() -> Suite {
    assert!(
        grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    let budget = Budget::full(Reads::All).from_env();
    let mut models: Vec<_> = Model::ALL
        .iter()
        .map(|m| m.named::<G>(Loom, budget))
        .collect();
    models.extend(gate::named::<G, _>(&Loom, &GateModel::ALL));
    models.extend(UnlinkModel::ALL.iter().map(|m| m.named::<G>(Loom)));
    Suite {
        checker: "loom",
        gate: "rwlock",
        models,
    }
}

crtc_verification::loom_gate_tests! {
    suite: suite,
    gate: G,
    explorer: Loom,
    retries: || (0, 0),
    mutants: [&Mutant::RWLOCK[..], &Mutant::TREE[..]].concat(),
    catchers: |mutant| match mutant {
        Mutant::SkipInternalCheck => Catch::new(Property::ReadBounds, &["L2"]),
        Mutant::ClearBitBeforeCutoff => Catch::new(Property::AtomicRead, &["L1", "demote"]),
        Mutant::NoInvalidation => Catch::new(Property::ReadBounds, &["L4b"]),
        Mutant::TailCheckOutsideSection => Catch::new(Property::ReadBounds, &["L4a", "L4b"]),
        Mutant::SweepFreesBeforeGrace => Catch::new(Property::NoFreeWhileHeld, &["U1"]),
        Mutant::ChildrenSortedAfterPublish => Catch::new(Property::RaceFree, &["L2r", "L2"]),
        other => unreachable!("{other:?} is not a mutant of this gate"),
    },
}

#[test]
fn loom_dpor_needs_the_writer_first_layout() {
    // loom's DPOR misses "read after the store" when the reader runs first
    // and the writer loads before it stores; the models put writers first.
    let (reader_first, writer_first) = gate::dpor_sanity(&Loom);
    println!(
        "loom DPOR: reader-first layout saw {reader_first:?}, writer-first saw {writer_first:?}"
    );
    assert_eq!(
        writer_first,
        vec![0, 1],
        "the writer-first layout sees both values"
    );
}
