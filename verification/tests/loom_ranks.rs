//! loom models of rank removal on the real tree
//! (`crtc_verification::models::ranks`): `remove_worker` with slot reuse by
//! a new worker (R1) and `Cleared` (R2), each racing a split by another lane
//! and a reader, over `RwLockGate<GraceReclaim>` with the quarantining
//! allocator. The removal paths (unmap, waits, the slot sweep, the release)
//! are the tree's and the slot registry's, the same under every gate; the
//! gate only serializes the sweep's section on each node, so one gate runs
//! them.
//!
//! Also the lane directory's model D1
//! (`crtc_verification::models::directory`): two ranks of one lane share
//! its entries while another lane stores on the same node; and anchor
//! creation's model A1 (`crtc_verification::models::anchors`): two lanes
//! create the same anchor, one then looks it up while the other stores
//! under it.
//!
//! Negative controls (`ranks_negative_controls_fail`), each in a child
//! process of this binary: `SlotRecycledBeforeGrace` (a released slot
//! reusable without waiting for the threads pinned before the release) must
//! make R1 fail `read-bounds`; `SharedEntrySkipsCoverage` (parent resolution
//! without the storing rank's coverage check) must make D1 fail
//! `read-bounds`, and `StoreSkipPastLaneCoverage` (the store skip counting
//! every slot's coverage, not the lane's) `accepted`;
//! `AnchorWritersUnlocked` (anchor creation without the writers' lock) must
//! make A1 fail `serial-outcome`.

#![cfg(crtc_loom)]

use crtc_strategies::RwLockGate;
use crtc_verification::models::grace::{self, GraceReclaim, QuarantineAlloc};
use crtc_verification::models::ranks::RankModel;
use crtc_verification::models::Suite;
use crtc_verification::models::{anchors, directory};

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// The models' gate, over the grace-period reclaimer.
type G = RwLockGate<GraceReclaim>;

/// The test that doubles as the negative controls' child.
const CONTROL_TEST: &str = "ranks_negative_controls_fail";

fn suite() -> Suite {
    assert!(
        grace::quarantine_installed(),
        "the quarantining allocator is not installed"
    );
    Suite {
        checker: "loom",
        gate: "ranks",
        models: RankModel::ALL
            .iter()
            .map(|m| m.named::<G>(Loom))
            .chain([directory::named::<G>(Loom), anchors::named::<G>(Loom)])
            .collect(),
    }
}

#[test]
fn r1_remove_worker_and_slot_reuse_vs_split_and_reader() {
    suite().report("R1");
}

#[test]
fn r2_cleared_vs_split_and_reader() {
    suite().report("R2");
}

#[test]
fn d1_shared_directory_vs_other_lane() {
    suite().report(directory::NAME);
}

#[test]
fn a1_anchor_creation_vs_creation_and_lookup() {
    suite().report(anchors::NAME);
}

#[test]
fn ranks_negative_controls_fail() {
    suite().loom_controls(CONTROL_TEST);
}
