//! Shared pieces of the model-checker suites (`tests/loom_*.rs` and
//! `tests/shuttle_*.rs`, built with `--cfg crtc_loom` or `--cfg crtc_shuttle`):
//! event builders over chained hashes, a tree's observable final state,
//! scenarios with their serial outcomes, the mutant switch as a guard, a
//! child-process runner for negative controls, and the models themselves,
//! generic over the gate (`G: ShapeGate`) so every gate's test binary is a
//! thin list of instantiations:
//!
//! - [`tree`] (loom): L1–L4 on the real tree (decode append against a
//!   reader, a split, a removal, a racing append, a planned extension);
//! - [`gate`] (loom): gate-level torn-read models (a reader against a split,
//!   a demoting append, a pure append) and two racing appenders;
//! - [`grace`]: a precise grace-period reclaimer for the checkers, with a
//!   quarantining allocator that turns a premature free into a model failure;
//! - [`sweep`] (loom): the one-in-flight sweep scheduling of `SweepTrigger`;
//! - [`slots`] (loom): a lane's cached rank slot against the rank's
//!   removal and the slot's reuse, on the real `SlotRegistry`;
//! - [`ranks`] (loom): `remove_worker` and `Cleared` on the real tree
//!   racing a split and a reader, with the removed rank's slot reused;
//! - [`directory`] (loom): two ranks of one lane sharing its directory on
//!   the real tree, against another lane's store on the same node;
//! - [`anchors`] (loom): two lanes creating the same anchor on the real
//!   tree, one of them then looking it up;
//! - [`unlink`] (loom): the stale-leaf sweep on the real tree, racing a
//!   reader and a store on the leaf it unlinks;
//! - [`scenarios`] (shuttle): whole-tree scenarios checked against the
//!   reference model, with frees while the threads run;
//! - [`storm`] (shuttle): the decode storms with reader retry statistics;
//! - [`controls`]: negative controls, each run in a child process and
//!   caught only when the property the suite names for it fails.
//! - [`events`], [`observation`] and [`explorer`]: the event builders, the
//!   final-state observation with serial outcomes and read bounds, and the
//!   checkers' entry points with the suites' bookkeeping.
//!
//! The library has no checker dependency: the test binary hands in its
//! checker's entry point ([`Explorer`], built by [`loom_explorer!`] or
//! [`shuttle_explorer!`]), and everything else uses the facade's primitives.
//! Every tree or gate these helpers build must therefore be created and
//! dropped inside a model run.
//!
//! Why the suites may run in parallel (the default test harness): the
//! checker reclaimer's and the grace reclaimer's state is per OS thread, and loom and shuttle run a
//! model's threads on the test's OS thread; a test that reads process-wide
//! statistics runs alone in a child process ([`alone`]).

#[cfg(crtc_loom)]
pub mod anchors;
pub mod controls;
#[cfg(crtc_loom)]
pub mod directory;
pub mod events;
pub mod explorer;
#[cfg(crtc_loom)]
pub mod gate;
pub mod grace;
#[cfg(crtc_shuttle)]
pub mod indexer;
pub mod observation;
#[cfg(crtc_loom)]
pub mod ranks;
#[cfg(crtc_shuttle)]
pub mod scenarios;
#[cfg(crtc_loom)]
pub mod slots;
#[cfg(crtc_shuttle)]
pub mod storm;
pub mod suites;
#[cfg(crtc_loom)]
pub mod sweep;
#[cfg(crtc_loom)]
pub mod tree;
#[cfg(crtc_loom)]
pub mod unlink;

pub use crate::property::Property;
pub use controls::{child_request, Catch, Control, MutantGuard};
pub use crtc_strategies::mutants::Mutant;
pub use events::*;
pub use explorer::*;
pub use observation::*;
