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
//! the reader after the section in `seq`'s place.

#![cfg(all(crtc_loom, feature = "epoch"))]

use crtc_strategies::{EpochGate, RwLockGate};
use crtc_verification::models::grace::{self, bag, GraceReclaim, QuarantineAlloc};
use crtc_verification::models::ranks::RankModel;
use crtc_verification::models::tree::{self, Budget, Reads};
use crtc_verification::models::Suite;

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// The test that doubles as the negative controls' child.
const CONTROL_TEST: &str = "bag_negative_controls_fail";

/// The epoch-gate models this binary runs.
const EPOCH_MODELS: [&str; 3] = ["L2t", "U1", "U3"];

fn suite() -> Suite {
    bag::set_default_size(bag::CROSSBEAM_BAG);
    assert!(
        bag::size() > 1,
        "loom_bag runs the grace reclaimer's bag mode: CRTC_GRACE_BAG must be unset or above 1"
    );
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

/// Runs `model` and says which bag size it ran with.
fn report(model: &str) {
    suite().report(model);
    println!("loom bag {model}: grace reclaimer bags of {}", bag::size());
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

#[test]
fn bag_negative_controls_fail() {
    suite().loom_controls(CONTROL_TEST);
}
