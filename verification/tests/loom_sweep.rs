//! loom model of the stale-leaf sweep scheduling on the
//! real `SweepTrigger` (`crtc_verification::models::sweep`): at most one
//! sweep in flight, the in-flight flag never left set while a sweep is due,
//! and no due sweep lost. Gate-independent (the trigger is the tree's).
//!
//! Negative controls (`sweep_negative_controls_fail`), each in a child
//! process of this binary: the trigger's mutants (`Mutant::SWEEP`):
//! `RacySweepClaim` (the claim made a load and a later store) must let two
//! sweeps run at once (`one-sweep`), and `SweepFinishKeepsFlag` (a finished
//! sweep that never frees the flag) must leave the flag set
//! (`sweep-not-lost`).
//!
//! `mutant_catalogue_is_complete` is the coverage test of every loom and
//! shuttle suite's negative controls (`models::suites::check_catalogue`): it runs
//! here because the mutants exist only in checker builds.

#![cfg(crtc_loom)]

use crtc_verification::models::suites::check_catalogue;
use crtc_verification::models::sweep::{self, NAME};
use crtc_verification::models::Suite;

crtc_verification::loom_explorer!(Loom);

/// The test that doubles as the negative controls' child.
const CONTROL_TEST: &str = "sweep_negative_controls_fail";

fn suite() -> Suite {
    Suite {
        checker: "loom",
        gate: "sweep",
        models: vec![sweep::named(Loom)],
    }
}

#[test]
fn sweep_scheduling() {
    suite().report(NAME);
}

#[test]
fn sweep_negative_controls_fail() {
    suite().loom_controls(CONTROL_TEST);
}

#[test]
fn mutant_catalogue_is_complete() {
    check_catalogue();
}
