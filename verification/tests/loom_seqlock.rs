//! loom models of the seqlock gate (papers/protocols.md),
//! instantiated from `crtc_verification::models` (see `loom_rwlock.rs` for
//! the list). loom models Relaxed and Acquire loads with per-location store
//! histories, so these models explore the weak-memory outcomes of the
//! optimistic reader's payload loads: the gate-level torn-read models are
//! where a missing fence or an unbumped version shows.
//!
//! Budget (see `budget`): every optimistic read races the writers' payload
//! stores and loom explores every value each of its loads may return, so
//! reads dominate the cost. The reader models (L1, L2r, L3r: one reader
//! against a fast append, a split, a removal) and the gate-level models run
//! whole; L2, L3, L4a and L5 run with a reader thread scoring their first
//! query and are capped at the prefix of their search (`CRTC_LOOM_CAP=0`
//! lifts the caps, `CRTC_LOOM_READS=all` reads every query); L4b runs its
//! writers alone, whole (see `budget`).
//!
//! Every model runs over `SeqlockGate<GraceReclaim>` with the quarantining
//! allocator (`models::grace`), so an out-of-line array freed while a
//! pinned reader holds it fails the model; the sweep models U1–U3 run
//! the stale-leaf sweep against a reader (U3: from a sharded child set) and
//! a store (`models::unlink`).
//!
//! Negative controls: the nine seqlock mutants (no Acquire fence in the
//! reader, no Release fence after the writer locks, `len` before the pairs
//! or published Relaxed, a demoting append or a split without a version
//! bump — the split caught by the tree model L2t —, a fast append without a
//! plan bump, an array retired before it is unpublished, writers without
//! the lock's compare-and-swap) and the tree's (a sweep that frees a compact
//! set or drops a sharded set's entry before the grace period, a child set
//! written after its publication), each in a child
//! process, each caught by the property
//! `models::suites::loom_catch` names. The pure-append
//! model also checks that a pure append never makes a reader restart.

#![cfg(all(crtc_loom, feature = "seqlock"))]

use crtc_strategies::seqlock::{OPTIMISTIC_RESTARTS, PESSIMISTIC_FALLBACKS};
use crtc_strategies::SeqlockGate;
use crtc_verification::models::grace::{GraceReclaim, QuarantineAlloc};
use crtc_verification::models::tree::{self, Budget, Model, Reads};
use crtc_verification::models::Suite;

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// Every model's gate: the grace-period reclaimer frees as soon as every
/// pin older than the retire ended, and the quarantining allocator makes a
/// free while a pinned thread holds the block fail the model
/// (`models::grace`).
type G = SeqlockGate<GraceReclaim>;

/// What CI explores per tree model. The reader models (L1, L2r, L3r) are
/// explored whole. L2–L5 run with the concurrent reader's first query (the
/// longest, which walks every node the writers touch) and are capped: one
/// optimistic read multiplies their executions by more than a hundred (L3
/// with one read passes 180 000 executions; L2, whose writers plan
/// optimistically against each other's splits, is about 630 000 executions
/// without a reader), and loom explores depth-first, so a capped run covers
/// the prefix of the search (`CRTC_LOOM_CAP=0` lifts the caps).
///
/// L4b is the exception: it runs its writers alone, explored whole, because
/// the interleaving that catches `SeqlockAppendWithoutPlanBump` (B plans
/// before A's append and commits after it) lies outside the capped prefix
/// with a reader (60 000 executions with the reader, 115 s, do not reach it;
/// the writers alone, about 60 s, do). `CRTC_LOOM_READS=first` adds the
/// reader to it.
fn budget(model: Model) -> Budget {
    match model {
        Model::L1 | Model::L2r | Model::L3r | Model::L2t => Budget::full(Reads::First),
        Model::L4b => Budget::full(Reads::None),
        _ => Budget {
            reads: Reads::First,
            cap: Some(READER_CAP),
        },
    }
}

/// Executions of each of L2–L5 in CI: about 1 000–2 400 executions a
/// second each with the reader on a shared 2-core machine.
const READER_CAP: u64 = 60_000;

fn suite() -> Suite {
    tree::gate_suite::<G, _>("seqlock", &Loom, budget)
}

crtc_verification::loom_gate_tests! {
    suite: suite,
    gate: G,
    explorer: Loom,
    retries: [
        "restarts" => || OPTIMISTIC_RESTARTS.get(),
        "fallbacks" => || PESSIMISTIC_FALLBACKS.get(),
    ],
}
