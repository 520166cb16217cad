//! loom model of the stale-leaf sweep scheduling on the
//! real [`SweepTrigger`] with a fixed clock.
//!
//! Two schedulers (a spawned lane thread and the main thread) each fold a
//! tally that makes a sweep due by volume, then try to claim it; a winner
//! "sweeps" (a shared counter of sweeps in flight goes up and down around
//! it) and finishes with an exact recount (no dead blocks left).
//!
//! Checks:
//!
//! - **at most one sweep in flight**: a sweeper that enters while another
//!   is inside fails the model;
//! - **the flag is never left set while a sweep is due**: after the join,
//!   nothing is in flight, and if the estimates say a sweep is due (volume
//!   rule and duty-cycle gap) a fresh claim wins it;
//! - at least one sweep ran (a due sweep is never lost: a scheduler whose
//!   claim fails lost it to a sweep that runs).
//!
//! Negative controls (code mutants in `crtc::tree::sweep`, checker builds
//! only), each of which the model must fail on:
//!
//! - `RacySweepClaim` turns the trigger's own compare-and-swap into a load
//!   and a later store: two sweeps run at once (`one-sweep`);
//! - `SweepFinishKeepsFlag`: `SweepTrigger::finish` records the recount but
//!   never frees the flag: it is left set after every scheduler returned
//!   (`sweep-not-lost`).

use super::{summarize, Explorer, NamedModel};
use crate::check;
use crate::property::Property;
use crtc::harness::SweepTrigger;
use crtc::SweepPolicy;
use crtc_strategies::sync::atomic::{AtomicUsize, Ordering};
use crtc_strategies::sync::{thread, Arc};

/// The fixed clock (microseconds).
const NOW: u64 = 1_000;
/// Blocks each scheduler folds as linked, and as dead.
const LINKED: i64 = 4;
const DEAD: i64 = 2;

/// The model's name.
pub const NAME: &str = "sweep_claim";

/// Explores the model; panics when a check fails. Returns a summary.
pub fn check(explorer: &dyn Explorer) -> String {
    summarize(explorer, || explorer.explore(Box::new(run)))
}

/// The model as a [`NamedModel`].
pub fn named(explorer: impl Explorer + 'static) -> NamedModel {
    NamedModel {
        name: NAME,
        what: "one sweep in flight, flag never stuck, 2 schedulers",
        run: Box::new(move || check(&explorer)),
    }
}

/// What one scheduler's attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// Claimed and swept.
    Swept,
    /// Found the flag held by a sweep that was still running.
    Waited,
    /// Found no sweep due.
    NotDue,
}

struct Shared {
    trigger: SweepTrigger,
    /// Sweeps between their claim and their finish.
    running: AtomicUsize,
    /// Sweeps finished.
    swept: AtomicUsize,
}

/// The sweep a winner runs: at most one may be inside.
fn sweep(shared: &Shared) {
    // Relaxed (both counters): the model's own bookkeeping; the flag's
    // Acquire/Release orders the sweeps themselves.
    let inside = shared.running.fetch_add(1, Ordering::Relaxed) + 1;
    check!(Property::OneSweep, inside == 1, "two sweeps in flight");
    let (linked, _) = shared.trigger.estimates();
    thread::yield_now();
    shared.running.fetch_sub(1, Ordering::Relaxed);
    shared.swept.fetch_add(1, Ordering::Relaxed);
    // The exact recount: every dead block was reclaimed.
    // A zero duration keeps the duty-cycle gap at `min_gap` (zero).
    shared.trigger.finish(NOW, 0, linked, 0);
}

/// One scheduler: fold a tally, then try to claim the sweep.
fn schedule(shared: &Shared) -> Attempt {
    shared.trigger.add(LINKED, DEAD);
    let won = shared.trigger.try_claim(|| NOW).is_some();
    if won {
        sweep(shared);
        return Attempt::Swept;
    }
    if shared.trigger.volume_ready() {
        Attempt::Waited
    } else {
        Attempt::NotDue
    }
}

fn run() {
    let shared = Arc::new(Shared {
        trigger: SweepTrigger::new(SweepPolicy::eager()),
        running: AtomicUsize::new(0),
        swept: AtomicUsize::new(0),
    });
    let other = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || schedule(&shared))
    };
    let mine = schedule(&shared);
    let attempts = [other.join().expect("a scheduler panicked"), mine];
    let trigger = &shared.trigger;
    check!(
        Property::SweepNotLost,
        !trigger.in_flight(),
        "the in-flight flag is left set after every scheduler returned ({attempts:?})"
    );
    // Relaxed: every thread joined.
    let swept = shared.swept.load(Ordering::Relaxed);
    check!(
        Property::SweepNotLost,
        swept >= 1,
        "a due sweep was lost ({attempts:?})"
    );
    if trigger.volume_ready() && trigger.gap_elapsed(NOW) {
        check!(
            Property::SweepNotLost,
            trigger.try_claim(|| NOW).is_some(),
            "a sweep is due but cannot be claimed ({attempts:?})"
        );
        trigger.cancel();
    }
}
