//! loom models run with the grace reclaimer in bag mode
//! (`crtc_verification::models::grace::bag`): deferred work gathers in a
//! bag per modelled thread and only a bag's push fences, as in
//! crossbeam-epoch (bags of 64 here unless `CRTC_GRACE_BAG` says otherwise).
//! The other loom binaries fence at every defer, which also orders the
//! deferring thread's own stores around each retire; these models show what
//! holds without that order.
//!
//! Models: over `EpochGate<GraceReclaim>`, the reader model L2t (a split of
//! a leaf whose local hashes repeat, whose section retires the replaced
//! snapshot) and the sweep models U1 and U3 (unlinks that retire child sets
//! while a reader walks them); over `RwLockGate<GraceReclaim>`, R1
//! (`remove_worker` with slot reuse, whose waits for pinned threads push
//! the remover's bag) racing a split and a reader.
//!
//! Negative control (`bag_negative_controls_fail`, in a child process):
//! `EpochRetireInRelaxedSection` (the section retires before it closes, and
//! closes `seq` Relaxed) must make L2t fail `atomic-read`; with a fence at
//! every defer (the other binaries) it survives, since that fence orders
//! the reader after the section in `seq`'s place, and
//! `bag_mutant_survives_a_fence_at_every_defer` shows that survival (a child
//! run with `CRTC_GRACE_BAG=1`), so the catch is the bag mode's.

#![cfg(all(crtc_loom, feature = "epoch"))]

use crtc_strategies::{EpochGate, RwLockGate};
use crtc_verification::models::controls::{spawn_child_with, ChildOutcome};
use crtc_verification::models::grace::{self, bag, GraceReclaim, QuarantineAlloc};
use crtc_verification::models::ranks::RankModel;
use crtc_verification::models::tree::{self, Budget, Reads};
use crtc_verification::models::{child_request, Mutant, Suite};
use std::time::Instant;

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// The test that doubles as the negative controls' child.
const CONTROL_TEST: &str = "bag_negative_controls_fail";

/// The epoch-gate models this binary runs.
const EPOCH_MODELS: [&str; 3] = ["L2t", "U1", "U3"];

/// The bag size of this binary's runs; a child may run with another
/// (`bag_mutant_survives_a_fence_at_every_defer`).
fn suite() -> Suite {
    bag::set_default_size(bag::CROSSBEAM_BAG);
    assert!(
        grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    let epoch = tree::gate_suite::<EpochGate<GraceReclaim>, _>("bag", &Loom, |_| {
        Budget::full(Reads::First)
    });
    let models = (epoch.models.into_iter())
        .filter(|m| EPOCH_MODELS.contains(&m.name))
        .chain([RankModel::R1.named::<RwLockGate<GraceReclaim>>(Loom)])
        .collect();
    Suite {
        checker: "loom",
        gate: "bag",
        models,
    }
}

/// Runs `model`, says which bag size it ran with, and checks that deferred
/// work freed blocks before its executions' ends (a reclaimer that frees
/// only at the end could reveal no premature free).
fn report(model: &str) {
    assert_bag_mode();
    grace::take_freed_before_end();
    suite().report(model);
    let before_end = grace::take_freed_before_end();
    println!(
        "loom bag {model}: grace reclaimer bags of {}; {before_end} blocks freed before an \
         execution's end with threads running",
        bag::size()
    );
    assert!(
        before_end > 0,
        "{model}: in bag mode nothing was freed before an execution's end"
    );
}

#[test]
fn l2t_reader_vs_split_in_bag_mode() {
    report("L2t");
}

#[test]
fn u1_reader_vs_unlink_in_bag_mode() {
    report("U1");
}

#[test]
fn u3_reader_vs_unlink_from_sharded_set_in_bag_mode() {
    report("U3");
}

#[test]
fn r1_remove_worker_and_slot_reuse_in_bag_mode() {
    report("R1");
}

/// Fails unless this process runs the bag mode.
fn assert_bag_mode() {
    bag::set_default_size(bag::CROSSBEAM_BAG);
    assert!(
        bag::size() > 1,
        "loom_bag runs the grace reclaimer's bag mode: CRTC_GRACE_BAG must be unset or above 1"
    );
}

#[test]
fn bag_negative_controls_fail() {
    if child_request().is_none() {
        assert_bag_mode();
    }
    suite().loom_controls(CONTROL_TEST);
}

/// The control's catch is the bag mode's: with a fence at every defer
/// (`CRTC_GRACE_BAG=1`, the other binaries' mode) L2t passes under it.
#[test]
fn bag_mutant_survives_a_fence_at_every_defer() {
    let mutant = Mutant::EpochRetireInRelaxedSection;
    let start = Instant::now();
    let verdict = spawn_child_with(CONTROL_TEST, mutant, "L2t", &[("CRTC_GRACE_BAG", "1")]);
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(
        verdict.outcome,
        ChildOutcome::Survived,
        "{mutant:?} under a fence at every defer: {} ({:?})",
        verdict.detail,
        verdict.panic
    );
    println!(
        "mutant {mutant:?} [bag]: survived L2t with a fence at every defer (CRTC_GRACE_BAG=1) \
         in {secs:.1} s ({})",
        verdict.detail
    );
}
