//! loom models of the epoch gate (papers/protocols.md §4),
//! instantiated from `crtc_verification::models` (see `loom_rwlock.rs` for
//! the list):
//!
//! - L1–L4 on the real tree and the gate-level models, all with
//!   `EpochGate<GraceReclaim>`: the grace-period reclaimer frees as soon as
//!   every pin older than the retire ended (the real epoch rule), and this
//!   binary installs the quarantining allocator, so a snapshot retired while
//!   still reachable fails the model instead of being read after it was
//!   freed (`models::grace`);
//! - the sweep models U1–U3 (`models::unlink`), over the same gate.
//!
//! The reader model L2t (a split of a node whose local hashes repeat) is
//! where the exclusive sections' `seq` word shows: a reader that pairs the
//! old snapshot with the split's child map scores blocks nobody holds.
//!
//! Negative controls: the epoch mutants (a Relaxed snapshot
//! publication, for every snapshot, a coverage-only one or a demoting
//! append's; a retire before the unlink; `len` before the pairs, or
//! published Relaxed; writers without the per-node exclusion; a fast append
//! without a plan bump; a live length followed without re-validation; a
//! replaced snapshot's length used; an exclusive section closing `seq`
//! Relaxed, caught by L2t) and the tree's (a sweep that frees a compact set
//! or drops a sharded set's entry before the grace period, caught by U1 and
//! U3; a child set written after its publication),
//! each in a child process, each caught by the property
//! `models::suites::loom_catch` names.

#![cfg(all(crtc_loom, feature = "epoch"))]

use crtc_strategies::epoch::READ_FALLBACKS;
use crtc_strategies::EpochGate;
use crtc_verification::models::grace::{GraceReclaim, QuarantineAlloc};
use crtc_verification::models::tree::{self, Budget, Reads};
use crtc_verification::models::Suite;

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::loom_explorer!(Loom);

/// Every model's gate (grace-period reclaimer).
type G = EpochGate<GraceReclaim>;

fn suite() -> Suite {
    tree::gate_suite::<G, _>("epoch", &Loom, |_| Budget::full(Reads::First))
}

crtc_verification::loom_gate_tests! {
    suite: suite,
    gate: G,
    explorer: Loom,
    // The epoch reader tries once optimistically, then re-runs under the
    // node's mutex (a fallback): it has no restart counter.
    retries: ["fallbacks" => || READ_FALLBACKS.get()],
}
