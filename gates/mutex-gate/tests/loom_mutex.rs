//! loom models of the mutex gate, built only with `--cfg crtc_loom`, where
//! the gate's mutex comes from loom through the sync facade. The models are
//! the verification crate's, instantiated through its exported
//! `loom_gate_tests!` as for the gates of `crtc-strategies`
//! (`verification/tests/loom_rwlock.rs`): L1–L5 on the real tree, the
//! gate-level torn-read and two-appender models, and the sweep models U1–U3,
//! every one over `MutexGate<GraceReclaim>` with the quarantining
//! allocator, so a block freed while a pinned thread holds it fails the model.
//!
//! Negative controls (`loom_mutants_are_caught`): the generic decode-append
//! mutants this gate honours (an append to an internal node, an append that
//! does not invalidate older plans, checks made before the section) and the
//! tree's `SweepFreesBeforeGrace`, `ShardedSweepFreesBeforeGrace` and
//! `RootFilterNotCounted`, each in a child process, must each fail
//! the property `models::suites::loom_catch` names. The tree's
//! `ChildrenSortedAfterPublish` is not among them: every section of this
//! gate, a reader's included, holds the node's mutex, so a child set
//! rewritten inside the writer's section is never read concurrently (loom
//! found no race in L2r or L2). Knobs as in `.ci/loom.sh`
//! (`CRTC_LOOM_PREEMPTIONS`, default 2).

#![cfg(crtc_loom)]

use crtc_mutex_gate::MutexGate;
use crtc_strategies::mutants::Mutant;
use crtc_verification::models::grace::{GraceReclaim, QuarantineAlloc};
use crtc_verification::models::tree::{self, Budget, Reads};
use crtc_verification::models::Suite;

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// Every model's gate, over the grace-period reclaimer.
type G = MutexGate<GraceReclaim>;

fn suite() -> Suite {
    tree::gate_suite::<G, _>("mutex", &Loom, |_| Budget::full(Reads::All))
}

crtc_verification::loom_gate_tests! {
    suite: suite,
    gate: G,
    explorer: Loom,
    // A locking reader never retries: no counters to check.
    retries: [],
    mutants: [
        Mutant::SkipInternalCheck,
        Mutant::NoInvalidation,
        Mutant::TailCheckOutsideSection,
        Mutant::SweepFreesBeforeGrace,
        Mutant::ShardedSweepFreesBeforeGrace,
        Mutant::RootFilterNotCounted,
    ],
}
