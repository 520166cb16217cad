//! loom model of the stale-leaf sweep scheduling on the
//! real `SweepTrigger` (`crtc_verification::models::sweep`): at most one
//! sweep in flight, the in-flight flag never left set while a sweep is due,
//! and no due sweep lost. Gate-independent (the trigger is the tree's).
//!
//! Negative controls (`sweep_negative_controls_fail`), each in a child
//! process of this binary: the mutant `RacySweepClaim` (the trigger's own
//! claim made a load and a later store) must let two sweeps run in the same
//! model, and a caller that drops its claim without `cancel` must leave the
//! flag set; the model must fail on both.

#![cfg(crtc_loom)]

use crtc_strategies::mutants::Mutant;
use crtc_verification::models::sweep::Claim;
use crtc_verification::models::{Catch, Control, Property, Suite};

crtc_verification::loom_explorer!(Loom);

/// The test that doubles as the negative controls' child.
const CONTROL_TEST: &str = "sweep_negative_controls_fail";

fn suite() -> Suite {
    Suite {
        checker: "loom",
        gate: "sweep",
        models: [Claim::Correct, Claim::Leaky]
            .into_iter()
            .map(|c| c.named(Loom))
            .collect(),
    }
}

#[test]
fn sweep_scheduling() {
    suite().report(Claim::Correct.name());
}

#[test]
fn sweep_negative_controls_fail() {
    suite().expect_failures(
        CONTROL_TEST,
        &[
            Control {
                mutant: Mutant::RacySweepClaim,
                label: "RacySweepClaim".to_string(),
                catch: Catch::new(Property::OneSweep, &[Claim::Correct.name()]),
            },
            Control {
                mutant: Mutant::None,
                label: "LeakedSweepClaim".to_string(),
                catch: Catch::new(Property::SweepNotLost, &[Claim::Leaky.name()]),
            },
        ],
    );
}
