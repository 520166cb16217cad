//! loom model of rank-slot reuse on the real `SlotRegistry`
//! (`crtc_verification::models::slots`): a lane's cached slot never writes
//! after the removal's sweep of that slot. Gate-independent (the registry is
//! the tree's). One word stands for the tree's coverage here; the real
//! removal paths on the tree (`remove_worker`, `Cleared`, slot reuse) are
//! `loom_ranks`.
//!
//! Negative controls (`slots_negative_controls_fail`), each in a child
//! process of this binary: the mutants of `Mutant::SLOTS`, `SlotCacheIgnoresUnmaps` (a cached
//! slot used without checking the unmap count) and `SlotStampAfterLookup`
//! (the cache's stamp read after the mapping lookup) must each make the
//! model fail `slot-owned`.

#![cfg(crtc_loom)]

use crtc_verification::models::slots;
use crtc_verification::models::Suite;

crtc_verification::loom_explorer!(Loom);

/// The test that doubles as the negative controls' child.
const CONTROL_TEST: &str = "slots_negative_controls_fail";

fn suite() -> Suite {
    Suite {
        checker: "loom",
        gate: "slots",
        models: vec![slots::named(Loom)],
    }
}

#[test]
fn slot_reuse() {
    suite().report(slots::NAME);
}

#[test]
fn slots_negative_controls_fail() {
    suite().loom_controls(CONTROL_TEST);
}
