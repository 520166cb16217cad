//! shuttle tests of the `Indexer` a router calls (issue 44): its lane
//! threads, a removal of a worker and of a dp rank, the removed worker's
//! late stores, removals and clear, a reader, and a new worker on a released
//! slot, checked against the reference model
//! (`crtc_verification::models::indexer`), for every gate this build has,
//! over the grace-period reclaimer with the quarantining allocator.
//!
//! Negative control (`shuttle_indexer_mutants`): the catalogue's "indexer"
//! list (`models::suites::SHUTTLE_SUITES`: `RemovalDropsBeforeUnmap`, the
//! lanes dropping the ranks before the unmap) must be caught by the model on
//! its property (`models::suites::shuttle_catch`), in a child process over
//! the RwLock gate; `CRTC_SHUTTLE_MUTANTS=0` skips it.
//!
//! Knobs: `CRTC_SHUTTLE_ITERS` schedules per (scheduler, seed) (default
//! 500), `CRTC_SHUTTLE_MUTANT_ITERS` for the control (default 300),
//! `CRTC_SHUTTLE_SEEDS` (default `1 2 3`).

#![cfg(crtc_shuttle)]

use crtc_strategies::{RwLockGate, ShapeGate};
use crtc_verification::models::grace::{GraceReclaim, QuarantineAlloc};
use crtc_verification::models::{env_number, indexer, suites, Explorer, ShuttlePlan};

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::shuttle_explorer!(Shuttle);

fn report<G: ShapeGate>(gate: &str) {
    let explorer = Shuttle(ShuttlePlan::from_env(500));
    let start = std::time::Instant::now();
    let (schedules, freed) = indexer::explore::<G>(&explorer);
    println!(
        "shuttle {gate} indexer: {schedules} schedules in {:.1} s ({}); {freed} blocks freed before the join",
        start.elapsed().as_secs_f64(),
        explorer.bounds()
    );
}

#[test]
fn shuttle_indexer_rwlock() {
    report::<RwLockGate<GraceReclaim>>("rwlock");
}

#[cfg(feature = "seqlock")]
#[test]
fn shuttle_indexer_seqlock() {
    report::<crtc_strategies::SeqlockGate<GraceReclaim>>("seqlock");
}

#[cfg(feature = "epoch")]
#[test]
fn shuttle_indexer_epoch() {
    report::<crtc_strategies::EpochGate<GraceReclaim>>("epoch");
}

#[test]
fn shuttle_indexer_mutants() {
    if crtc_verification::models::child_request().is_none()
        && std::env::var("CRTC_SHUTTLE_MUTANTS").is_ok_and(|v| v == "0")
    {
        println!("shuttle mutants indexer: skipped (CRTC_SHUTTLE_MUTANTS=0)");
        return;
    }
    let iters = env_number("CRTC_SHUTTLE_MUTANT_ITERS", 300);
    let suite = indexer::suite::<RwLockGate<GraceReclaim>>("indexer", move || {
        Box::new(Shuttle(ShuttlePlan::with_iters(iters))) as Box<dyn Explorer>
    });
    let catch = |m| {
        let property = suites::shuttle_catch(m).expect("an indexer mutant shuttle can see");
        crtc_verification::models::Catch::new(property, &["indexer"])
    };
    suite.mutants(
        "shuttle_indexer_mutants",
        &suites::shuttle_mutants("indexer"),
        catch,
    );
}
