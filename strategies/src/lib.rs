//! Node synchronization strategies for `crtc`.
//!
//! The tree in `crtc` is generic over [`ShapeGate`]: the gate decides how a
//! node's shape (edge, coverage, sticky internal flag, version) is stored,
//! how readers get a consistent view of it, how writers plan and commit, how
//! replaced memory is reclaimed, and how the decode tail-append runs. The
//! coverage rules themselves are written once, in [`shape`].
//!
//! Every synchronization primitive of the workspace comes from [`sync`];
//! the private `stats` module holds the process-wide counters, which
//! synchronize nothing (each gate reports its readers' through
//! [`ShapeGate::read_counters`]). Only what `crtc` and its harness use is
//! public; the edge index (`edge_index`) is the gates' own.

#![warn(missing_docs, missing_debug_implementations)]

/// `true` when the named mutant is active (model-checker builds only; a
/// constant `false` otherwise, so production code carries no mutant).
/// Exported for the tree's own mutation points (`crtc`'s `tree::slots`,
/// `tree::scheduler`, `tree::children`): the one spelling of a mutant point.
#[doc(hidden)]
#[macro_export]
macro_rules! mutant {
    ($name:ident) => {{
        #[cfg(crtc_checker)]
        let active = $crate::mutants::Mutant::$name.is_active();
        #[cfg(not(crtc_checker))]
        let active = false;
        active
    }};
}

pub mod bits;
#[cfg(crtc_checker)]
pub mod checker_state;
// The atomic index serves only the lock-free gates (features `seqlock`,
// `epoch`); a build without them uses the plain index alone.
#[cfg_attr(not(any(feature = "seqlock", feature = "epoch")), allow(dead_code))]
mod edge_index;
#[cfg(feature = "epoch")]
pub mod epoch;
pub mod gate;
mod gates;
pub mod hash;
#[cfg(crtc_checker)]
pub mod mutants;
pub mod reclaim;
pub mod rwlock;
#[cfg(feature = "seqlock")]
pub mod seqlock;
pub mod shape;
// The statistics serve the lock-free gates (gauges: the epoch gates only).
#[cfg(any(feature = "seqlock", feature = "epoch"))]
#[cfg_attr(not(feature = "epoch"), allow(dead_code))]
mod stats;
pub mod sync;

pub use bits::SlotBits;
#[cfg(feature = "seize")]
pub use epoch::SeizeEpochGate;
#[cfg(feature = "epoch")]
pub use epoch::{CrossbeamEpochGate, DefaultEpochGate, EpochGate};
pub use gate::{
    append_eligibility, AppendMiss, Commit, Guard, ReadCounters, ReadPath, ShapeGate, Stale,
    Version,
};
pub use hash::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash, Slot, MAX_SLOTS};
pub use reclaim::{AtomicBox, DefaultReclaim, EpochGuard, EpochReclaim, Reclaim};
#[cfg(feature = "seize")]
pub use reclaim::{SeizeGuard, SeizeReclaim};
pub use rwlock::RwLockGate;
#[cfg(feature = "seqlock")]
pub use seqlock::SeqlockGate;
pub use shape::{PlainShape, ShapeInit, ShapeRead, ShapeWrite};
