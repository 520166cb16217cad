//! shuttle tests of the epoch tree (papers/protocols.md §5):
//! whole-tree scenarios too big for loom, explored by shuttle's random and
//! PCT schedulers, instantiated from `crtc_verification::models::scenarios`
//! for `EpochGate<GraceReclaim>`: the epoch gate over the grace-period
//! reclaimer, which frees retired snapshots while the threads run, with the
//! quarantining allocator (`models::grace`). Built only with
//! `--cfg crtc_shuttle`, where the tree's locks, atomics and threads come
//! from shuttle through the facade. Shuttle models every atomic as SeqCst:
//! ordering bugs are loom's job (`loom_epoch.rs`).
//!
//! There is no seize suite, and this is why: the seize gate is
//! `EpochGate<SeizeReclaim>`, the same gate code as this suite's with another
//! reclaimer, and seize's collector keeps per-OS-thread state that shuttle's
//! modelled threads (one OS thread) would share, so under shuttle it would
//! run over a checker reclaimer, i.e. be this suite again. The seize
//! reclaimer itself is checked by miri (`gate_contract`, `epoch_memory`, the
//! tree suite) and by the real-thread stress and soak tests.
//!
//! - **mixed**, **hot leaf**, **private subtrees** (fast path on and off):
//!   two writer lanes and a reader; reads stay within their bounds, no event
//!   is rejected, the final scores and membership equal the reference
//!   model's, the final shape passes the structural walk, and the
//!   conflict-free scenario's final state equals the serial outcome (the
//!   streams hold clears, a worker's removal and sweeps);
//! - **decode storm**: one writer lane decodes a chain on one hot leaf for
//!   two ranks in lock step while two readers score the chain; every read
//!   stays within its bounds (at most what each rank held at some instant of
//!   the read), some read overlaps a write, and the gate's read fallbacks (`READ_FALLBACKS`:
//!   reads that re-ran under the node's mutex) stay under 1% of the reads; a
//!   decode storm has no exclusive section on the hot leaf, so only a
//!   snapshot replaced right after in-place appends sends a read there.
//!
//! Knobs: `CRTC_SHUTTLE_ITERS` schedules per (scheduler, seed) (default
//! 500), `CRTC_SHUTTLE_STORM_ITERS` for the storm (default 1000),
//! `CRTC_SHUTTLE_SEEDS` (default `1 2 3`), PCT depth 3. Tests run in parallel: the grace reclaimer's state is
//! per test thread, and the storms, which read the process-wide retry
//! counters, each run alone in a child process (`models::alone`).
//!
//! `shuttle_mutants` runs the suite's lists in the mutant catalogue
//! (`models::suites::SHUTTLE_SUITES`, "epoch"): the gate's writer-exclusion
//! mutant, its retire before unlink and the tree's sweep that frees before
//! the grace period, against the scenarios in child processes
//! (`CRTC_SHUTTLE_MUTANT_ITERS`, default 300); each must fail `no-free-while-held`. The other epoch
//! mutants are loom's (see the comment at the suite).

#![cfg(all(crtc_shuttle, feature = "epoch"))]

use crtc_strategies::epoch::READ_FALLBACKS;
use crtc_strategies::EpochGate;
use crtc_verification::models::grace::{GraceReclaim, QuarantineAlloc};
use crtc_verification::models::scenarios::{RetryCounters, RetryStats};

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::shuttle_explorer!(Shuttle);

/// The gate of every run, over the grace-period reclaimer.
type G = EpochGate<GraceReclaim>;

/// Most reads a storm may send to the mutex, in percent. A decode storm has
/// no exclusive section on the hot leaf; a read re-runs under the mutex only
/// when the snapshot it loaded was replaced (buffer growth, a demotion) after
/// in-place appends past its length, between two of its loads. Shuttle
/// switches threads at every atomic access, which makes that far likelier
/// than on real threads.
const MAX_FALLBACK_PERCENT: u64 = 1;

/// Mutex re-reads stay under [`MAX_FALLBACK_PERCENT`] of the reads.
fn bounded_fallbacks(stats: &RetryStats, _lock_step: bool) {
    let fallbacks = stats
        .fallbacks
        .expect("the epoch gate counts its mutex re-reads");
    assert!(
        fallbacks * 100 <= MAX_FALLBACK_PERCENT * stats.reads,
        "a decode storm sent more than {MAX_FALLBACK_PERCENT}% of reads to the mutex: {stats}"
    );
}

// Negative controls (listed in `models::suites::SHUTTLE_SUITES`), each
// caught as no-free-while-held: writer exclusion,
// which shows under sequential consistency (two writers that both start from
// one snapshot both retire it, which the checker state reports at the second
// retire); a snapshot retired before the pointer to it is overwritten (a
// reader pinned in between holds it when the grace reclaimer frees it); and
// the tree's sweep freeing the child map it replaces at once. The
// publication-order mutants (`EpochRelaxedPublish`, `EpochLenBeforePairs`)
// are invisible to shuttle, which runs every atomic as SeqCst; loom catches
// them (`loom_epoch.rs`).
crtc_verification::shuttle_gate_tests! {
    gate: G,
    name: "epoch",
    explorer: Shuttle,
    // Its readers never restart: a stale snapshot sends them to the mutex.
    retries: RetryCounters {
        restarts: None,
        fallbacks: Some(|| READ_FALLBACKS.get()),
    },
    check_storm: bounded_fallbacks,
}
