//! Node synchronization strategies for `crtc`.
//!
//! The tree in `crtc` is generic over [`ShapeGate`]: the gate decides how a
//! node's shape (edge, coverage, sticky internal flag, version) is stored,
//! how readers get a consistent view of it, how writers plan and commit, how
//! replaced memory is reclaimed, and how the decode tail-append runs. The
//! coverage rules themselves are written once, in [`shape`].
//!
//! Every synchronization primitive of the workspace comes from [`sync`].

#![warn(missing_docs, missing_debug_implementations)]

pub mod bits;
pub mod edge_index;
pub mod gate;
pub mod hash;
#[cfg(any(crtc_loom, crtc_shuttle))]
pub mod mutants;
pub mod reclaim;
pub mod rwlock;
#[cfg(feature = "seqlock")]
pub mod seqlock;
pub mod shape;
pub mod sync;

pub use bits::SlotBits;
pub use gate::{append_eligibility, AppendMiss, Commit, ShapeGate, Stale, Version};
pub use hash::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash, Slot, MAX_SLOTS};
pub use reclaim::{AtomicBox, DefaultReclaim, EpochReclaim, Reclaim};
pub use rwlock::RwLockGate;
#[cfg(feature = "seqlock")]
pub use seqlock::SeqlockGate;
pub use shape::{PlainShape, ShapeInit, ShapeRead, ShapeWrite};
