//! loom models of the RwLock gate (papers/protocols.md). Built
//! only with `--cfg crtc_loom`, where every lock, atomic, `Arc` and thread of
//! the tree comes from loom through the facade, so loom explores the real
//! code's interleavings. The models live in `crtc_verification::models`,
//! generic over the gate; this file instantiates them for `RwLockGate`:
//!
//! - L1–L5 on the real tree (`models::tree`): a fast append against a
//!   reader, a divergent split (L2t: of a node whose local hashes repeat),
//!   a removal, a racing append, a planned extension; reads during the writes stay within their bounds and the
//!   final state is a serial outcome;
//! - the gate-level models (`models::gate`): a reader against a split, a
//!   demoting append and a pure append (the read is the state before or
//!   after, never a mix), and two racing appenders (exactly one wins);
//! - the sweep models (`models::unlink`): the stale-leaf sweep unlinking a
//!   leaf while a reader walks into it (U1; U3 from a sharded child set)
//!   and while a store revives it and appends at its tail (U2).
//!
//! Every model runs over `RwLockGate<GraceReclaim>`: the grace-period
//! reclaimer frees as soon as every pin older than the retire ended, and
//! this binary installs the quarantining allocator, so a child map or node
//! freed while a pinned thread holds it fails the model (`models::grace`).
//!
//! The preemption bound is `CRTC_LOOM_PREEMPTIONS`, else
//! `LOOM_MAX_PREEMPTIONS`, else 2. Tests run in parallel under the default
//! harness: the grace reclaimer's and the checker reclaimer's state is per
//! test thread, and the one test that reads the process-wide retry counters
//! runs alone in a child process (`models::alone`).
//!
//! Negative controls (`loom_mutants_are_caught`): the RwLock mutants
//! (`Mutant::RWLOCK` and `Mutant::RWLOCK_LOOM`: a fast path that never hits,
//! caught by `fast-hits`, and an append that trusts the caller's lookup,
//! caught by `one-append-wins`), and the tree's `SweepFreesBeforeGrace`
//! (caught by U1), `ShardedSweepFreesBeforeGrace` (caught by U3),
//! `ChildrenSortedAfterPublish` (caught by L2r on `race-free`) and
//! `RootFilterNotCounted` (caught by L2 on `read-bounds`), each run against the models `models::suites::loom_catch`
//! names, each in a child process of this test binary, and each must make
//! one fail its property. `CRTC_MUTANT_MATRIX=1` runs every
//! mutant against every model instead (slow: a surviving pair explores its
//! whole model).

#![cfg(crtc_loom)]

use crtc_strategies::RwLockGate;
use crtc_verification::models::gate;
use crtc_verification::models::grace::{GraceReclaim, QuarantineAlloc};
use crtc_verification::models::tree::{self, Budget, Reads};
use crtc_verification::models::Suite;

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// Every model's gate: the grace-period reclaimer frees as soon as every
/// pin older than the retire ended, and the quarantining allocator makes a
/// free while a pinned thread holds the block fail the model
/// (`models::grace`).
type G = RwLockGate<GraceReclaim>;

fn suite() -> Suite {
    tree::gate_suite::<G, _>("rwlock", &Loom, |_| Budget::full(Reads::All))
}

crtc_verification::loom_gate_tests! {
    suite: suite,
    gate: G,
    explorer: Loom,
    // A locking reader never retries: no counters to check.
    retries: [],
}

#[test]
fn loom_dpor_needs_the_writer_first_layout() {
    // loom's DPOR misses "read after the store" when the reader runs first
    // and the writer loads before it stores; the models put writers first.
    let (reader_first, writer_first) = gate::dpor_sanity(&Loom);
    println!(
        "loom DPOR: reader-first layout saw {reader_first:?}, writer-first saw {writer_first:?}"
    );
    assert_eq!(
        writer_first,
        vec![0, 1],
        "the writer-first layout sees both values"
    );
}
