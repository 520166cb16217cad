//! loom models of the seqlock gate (papers/protocols.md),
//! instantiated from `crtc_verification::models` (see `loom_rwlock.rs` for
//! the list). loom models Relaxed and Acquire loads with per-location store
//! histories, so these models explore the weak-memory outcomes of the
//! optimistic reader's payload loads: the gate-level torn-read models are
//! where a missing fence or an unbumped version shows.
//!
//! Budget (see `budget`): every optimistic read races the writers' payload
//! stores and loom explores every value each of its loads may return, so
//! reads dominate the cost. The reader models (L1, L2r, L3r: one reader
//! against a fast append, a split, a removal) and the gate-level models run
//! whole; L2–L4 run their writers alone (`CRTC_LOOM_READS=first|all` adds
//! the reader), and L2 and L5 are capped (`CRTC_LOOM_CAP=0` lifts it).
//!
//! Every model runs over `SeqlockGate<GraceReclaim>` with the quarantining
//! allocator (`models::grace`), so an out-of-line array freed while a
//! pinned reader holds it fails the model; the sweep models U1 and U2 run
//! the stale-leaf sweep against a reader and a store (`models::unlink`).
//!
//! Negative controls: the eight seqlock mutants (no Acquire fence in the
//! reader, no Release fence after the writer locks, `len` before the pairs
//! or published Relaxed, a demoting append or a split without a version
//! bump, a fast append without a plan bump, an array retired before it is
//! unpublished) and the tree's (a sweep that frees before the grace period,
//! a child set written after its publication), each in a child
//! process, each caught by the property its catcher names. The pure-append
//! model also checks that a pure append never makes a reader restart.

#![cfg(all(crtc_loom, feature = "seqlock"))]

use crtc_strategies::mutants::Mutant;
use crtc_strategies::seqlock::{OPTIMISTIC_RESTARTS, PESSIMISTIC_FALLBACKS};
use crtc_strategies::SeqlockGate;
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
type G = SeqlockGate<GraceReclaim>;

/// What CI explores per tree model. The reader models (L1, L2r, L3r) are
/// explored whole. L2–L4 run their writers without the concurrent reader
/// (one optimistic read multiplies their executions by more than a
/// hundred: L3 with one read passes 180 000 executions), and L2, whose
/// writers plan optimistically against each other's splits (about 630 000
/// executions, 7 minutes, at bound 2), and L5, explored at bound 3, are
/// capped.
fn budget(model: Model) -> Budget {
    match model {
        Model::L2 => Budget {
            reads: Reads::None,
            cap: Some(L2_CAP),
        },
        Model::L5 => Budget {
            reads: Reads::None,
            cap: Some(L5_CAP),
        },
        _ => Budget::full(Reads::None),
    }
}

/// Executions of L2 in CI (`CRTC_LOOM_CAP=0` explores all of them).
const L2_CAP: u64 = 120_000;

/// Executions of L5 in CI: it runs at preemption bound 3, where the whole
/// model is about 534 000 executions (92 s); `CRTC_LOOM_CAP=0` lifts it.
const L5_CAP: u64 = 120_000;

fn suite() -> Suite {
    assert!(
        grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    let mut models: Vec<_> = Model::ALL
        .iter()
        .map(|&m| m.named::<G>(Loom, budget(m).from_env()))
        .collect();
    models.extend(gate::named::<G, _>(&Loom, &GateModel::ALL));
    models.extend(UnlinkModel::ALL.iter().map(|m| m.named::<G>(Loom)));
    Suite {
        checker: "loom",
        gate: "seqlock",
        models,
    }
}

crtc_verification::loom_gate_tests! {
    suite: suite,
    gate: G,
    explorer: Loom,
    retries: || (OPTIMISTIC_RESTARTS.get(), PESSIMISTIC_FALLBACKS.get()),
    mutants: [&Mutant::SEQLOCK[..], &Mutant::TREE[..]].concat(),
    catchers: |mutant| match mutant {
        Mutant::NoReaderAcquireFence => Catch::new(Property::AtomicRead, &["split", "demote"]),
        Mutant::NoWriterReleaseFence => Catch::new(Property::AtomicRead, &["split", "demote"]),
        // As `EpochLenBeforePairs`: the pairs' tracked cells see it first.
        Mutant::LenBeforePairs => Catch::new(Property::RaceFree, &["pure_append", "demote_in_place"]),
        Mutant::DemotingAppendWithoutBump => {
            Catch::new(Property::AtomicRead, &["demote", "demote_in_place", "L1"])
        }
        Mutant::SplitWithoutBump => Catch::new(Property::AtomicRead, &["split", "L2"]),
        Mutant::SeqlockAppendWithoutPlanBump => Catch::new(Property::SerialOutcome, &["L4b"]),
        Mutant::SeqlockRetireBeforeUnpublish => {
            Catch::new(Property::NoFreeWhileHeld, &["pure_grow"])
        }
        Mutant::SweepFreesBeforeGrace => Catch::new(Property::NoFreeWhileHeld, &["U1"]),
        Mutant::SeqlockRelaxedLengthPublish => {
            Catch::new(Property::RaceFree, &["pure_append", "L1"])
        }
        Mutant::ChildrenSortedAfterPublish => Catch::new(Property::RaceFree, &["L2r", "L2"]),
        other => unreachable!("{other:?} is not a mutant of this gate"),
    },
}
