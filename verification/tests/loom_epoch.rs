//! loom models of the epoch gate (papers/protocols.md §4),
//! instantiated from `crtc_verification::models` (see `loom_rwlock.rs` for
//! the list):
//!
//! - L1–L4 on the real tree with `DefaultEpochGate`, whose reclaimer in
//!   checker builds is the facade's checker reclaimer (deferred frees run
//!   once no thread is pinned);
//! - the gate-level models with `EpochGate<GraceReclaim>`: the grace-period
//!   reclaimer frees as soon as every pin older than the retire ended (the
//!   real epoch rule), and this binary installs the quarantining allocator,
//!   so a snapshot retired while still reachable fails the model instead of
//!   being read after it was freed (`models::grace`).
//!
//! Negative controls: the four epoch mutants (a Relaxed snapshot
//! publication, a retire before the unlink, `len` before the pairs, writers
//! without the per-node exclusion), each in a child process, each caught by
//! a gate-level model.

#![cfg(all(crtc_loom, feature = "epoch"))]

use crtc_strategies::epoch::READ_FALLBACKS;
use crtc_strategies::mutants::Mutant;
use crtc_strategies::{DefaultEpochGate, EpochGate};
use crtc_verification::models::gate::{self, GateModel};
use crtc_verification::models::grace::{self, GraceReclaim, QuarantineAlloc};
use crtc_verification::models::tree::{Budget, Model, Reads};
use crtc_verification::models::{Catch, Property, Suite};

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// The tree models' gate (checker reclaimer).
type G = DefaultEpochGate;
/// The gate-level models' gate (grace-period reclaimer).
type GG = EpochGate<GraceReclaim>;

fn suite() -> Suite {
    assert!(
        grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    let budget = Budget::full(Reads::First).from_env();
    let mut models: Vec<_> = Model::ALL
        .iter()
        .map(|m| m.named::<G>(Loom, budget))
        .collect();
    models.extend(gate::named::<GG, _>(&Loom, &GateModel::ALL));
    Suite {
        checker: "loom",
        gate: "epoch",
        models,
    }
}

crtc_verification::loom_gate_tests! {
    suite: suite,
    gate: G,
    explorer: Loom,
    retries: || (0, READ_FALLBACKS.get()),
    mutants: Mutant::EPOCH,
    catchers: |mutant| match mutant {
        Mutant::EpochRelaxedPublish => Catch::new(Property::RaceFree, &["demote", "split"]),
        Mutant::EpochRetireBeforeUnlink => {
            Catch::new(Property::NoFreeWhileHeld, &["demote", "demote_in_place"])
        }
        Mutant::EpochLenBeforePairs => Catch::new(Property::AtomicRead, &["pure_append", "demote_in_place"]),
        Mutant::EpochAppendWithoutPlanBump => Catch::new(Property::SerialOutcome, &["L4b"]),
        Mutant::EpochUnvalidatedLiveLength => {
            Catch::new(Property::AtomicRead, &["demote_in_place", "demote"])
        }
        Mutant::EpochUnexcludedWriters => {
            Catch::new(Property::NoFreeWhileHeld, &["two_appenders", "L4a"])
        }
        other => unreachable!("{other:?} is not a mutant of this gate"),
    },
}
