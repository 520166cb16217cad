//! loom models of the epoch gate (papers/protocols.md §4),
//! instantiated from `crtc_verification::models` (see `loom_rwlock.rs` for
//! the list):
//!
//! - L1–L4 on the real tree and the gate-level models, all with
//!   `EpochGate<GraceReclaim>`: the grace-period reclaimer frees as soon as
//!   every pin older than the retire ended (the real epoch rule), and this
//!   binary installs the quarantining allocator, so a snapshot retired while
//!   still reachable fails the model instead of being read after it was
//!   freed (`models::grace`);
//! - the sweep models U1 and U2 (`models::unlink`), over the same gate.
//!
//! Negative controls: the epoch mutants (a Relaxed snapshot
//! publication, for every snapshot, a coverage-only one or a demoting
//! append's; a retire before the unlink; `len` before the pairs, or
//! published Relaxed; writers without the per-node exclusion; a fast append
//! without a plan bump; a live length followed without re-validation; a
//! replaced snapshot's length used) and the tree's (a sweep that frees
//! before the grace period, a child set written after its publication),
//! each in a child process, each caught by the property its catcher names.

#![cfg(all(crtc_loom, feature = "epoch"))]

use crtc_strategies::epoch::READ_FALLBACKS;
use crtc_strategies::mutants::Mutant;
use crtc_strategies::EpochGate;
use crtc_verification::models::gate::{self, GateModel};
use crtc_verification::models::grace::{self, GraceReclaim, QuarantineAlloc};
use crtc_verification::models::tree::{Budget, Model, Reads};
use crtc_verification::models::unlink::UnlinkModel;
use crtc_verification::models::{Catch, Property, Suite};

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// Every model's gate (grace-period reclaimer).
type G = EpochGate<GraceReclaim>;

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
    models.extend(gate::named::<G, _>(&Loom, &GateModel::ALL));
    models.extend(UnlinkModel::ALL.iter().map(|m| m.named::<G>(Loom)));
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
    mutants: [&Mutant::EPOCH[..], &Mutant::TREE[..]].concat(),
    catchers: |mutant| match mutant {
        Mutant::EpochRelaxedPublish => Catch::new(Property::RaceFree, &["demote", "split"]),
        Mutant::EpochRetireBeforeUnlink => {
            Catch::new(Property::NoFreeWhileHeld, &["demote", "demote_in_place"])
        }
        // The pairs' tracked cells see the write after the length's publication
        // before the reader's value check sees a default pair.
        Mutant::EpochLenBeforePairs => Catch::new(Property::RaceFree, &["pure_append", "demote_in_place"]),
        // The stale plan extends B over A's block: the concurrent reader
        // credits B with a block it never stored (C1) before the final
        // state is checked.
        Mutant::EpochAppendWithoutPlanBump => Catch::new(Property::ReadBounds, &["L4b"]),
        Mutant::EpochUnvalidatedLiveLength => {
            Catch::new(Property::AtomicRead, &["demote_in_place", "demote"])
        }
        Mutant::EpochUnexcludedWriters => {
            Catch::new(Property::NoFreeWhileHeld, &["two_appenders", "L4a"])
        }
        Mutant::EpochReadsReplacedSnapshotLength => {
            Catch::new(Property::ReadYourWrites, &["L5"])
        }
        Mutant::SweepFreesBeforeGrace => Catch::new(Property::NoFreeWhileHeld, &["U1"]),
        Mutant::EpochRelaxedCoverPublish => Catch::new(Property::RaceFree, &["L3r", "L5"]),
        Mutant::EpochRelaxedDemotePublish => {
            Catch::new(Property::RaceFree, &["demote_in_place", "L1"])
        }
        Mutant::EpochRelaxedLengthPublish => {
            Catch::new(Property::RaceFree, &["pure_append", "L1"])
        }
        Mutant::ChildrenSortedAfterPublish => Catch::new(Property::RaceFree, &["L2r", "L2"]),
        other => unreachable!("{other:?} is not a mutant of this gate"),
    },
}
