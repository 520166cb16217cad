//! shuttle tests of the RwLock tree (papers/protocols.md §5):
//! whole-tree scenarios too big for loom, explored by shuttle's random and
//! PCT schedulers (the RwLock gate), instantiated from
//! `crtc_verification::models::scenarios` for `RwLockGate<GraceReclaim>`: the
//! grace-period reclaimer frees retired memory while the threads run, and
//! the quarantining allocator fails a free while a pinned thread holds the
//! block (`models::grace`). Built only with
//! `--cfg crtc_shuttle`, where the tree's locks, atomics and threads come
//! from shuttle through the facade. Shuttle models every atomic as SeqCst:
//! ordering bugs are loom's job (`loom_rwlock.rs`).
//!
//! - **mixed**, **hot leaf**, **private subtrees** (fast path on and off):
//!   two writer lanes and a reader; reads stay within their bounds, no event
//!   is rejected, the final scores and membership equal the reference
//!   model's, the final shape passes the structural walk, and the
//!   conflict-free scenario's final state equals the serial outcome; the
//!   streams hold clears, a worker's removal with a new worker on its slot,
//!   and stale-leaf sweeps, and each run prints the blocks freed before the
//!   join;
//! - **decode storm**: one writer lane decodes a chain on one hot leaf for
//!   two ranks in lock step while two readers score the chain; every read
//!   stays within its bounds (at most what each rank held at some instant of
//!   the read), and some read overlaps a write. The gate has no retry path (its readers
//!   take the node's read lock), so there is no counter to read and no retry
//!   bound to check; its distribution line says so.
//!
//! Knobs: `CRTC_SHUTTLE_ITERS` schedules per (scheduler, seed) (default
//! 500), `CRTC_SHUTTLE_STORM_ITERS` for the storm (default 1000),
//! `CRTC_SHUTTLE_SEEDS` (default `1 2 3`), PCT depth 3. Tests run in parallel: the grace reclaimer's state is
//! per test thread, and the storms, which read the process-wide retry
//! counters, each run alone in a child process (`models::alone`).
//!
//! Negative controls (`shuttle_mutants`): the suite's lists in the mutant
//! catalogue (`models::suites::SHUTTLE_SUITES`, "rwlock": each RwLock
//! mutant, and the tree's sweep that frees before the grace period, caught
//! as `no-free-while-held`; each property from `shuttle_catch`) run against
//! the scenarios in child processes of this binary (`CRTC_SHUTTLE_MUTANT_ITERS`
//! schedules per scheduler and seed, default 300) until one fails; a mutant
//! that survives every scenario fails the test. loom catches each of them
//! too (`loom_rwlock.rs`). `CRTC_SHUTTLE_MUTANTS=0` skips it.

#![cfg(crtc_shuttle)]

use crtc_strategies::RwLockGate;
use crtc_verification::models::grace::{GraceReclaim, QuarantineAlloc};
use crtc_verification::models::scenarios::RetryCounters;

#[global_allocator]
static ALLOC: QuarantineAlloc = QuarantineAlloc;

crtc_verification::shuttle_explorer!(Shuttle);

/// The gate of every run, over the grace-period reclaimer.
type G = RwLockGate<GraceReclaim>;

crtc_verification::shuttle_gate_tests! {
    gate: G,
    name: "rwlock",
    explorer: Shuttle,
    retries: RetryCounters::NONE,
}
