//! crtc: a compressed concurrent radix tree for KV-cache-aware routing,
//! generic over its node synchronization strategy.
//!
//! # Architecture
//!
//! ```text
//!  events (per rank, in order)          queries (any thread)
//!        |                                     |
//!   Indexer<G>: lane threads,                  |
//!   sticky per-rank routing                    |
//!        |                                     |
//!   Lane<G> (one per writer thread):           |
//!   rank -> block -> node lookups,             |
//!   reclamation tallies                        |
//!        v                                     v
//!   Tree<G>: compressed edges, children keyed by first local hash,
//!   per-node coverage (full ranks + cutoffs) behind the node's gate G
//!        |
//!   G: ShapeGate (crate crtc-strategies): RwLock, seqlock or epoch/RCU;
//!   plan under a version, commit when the version still holds
//! ```
//!
//! A store takes the decode fast path (one critical section at the leaf's
//! tail) or the general planning path (`tree::store`: a parent walk, then a
//! child walk); removals, clears and rank removal unmap coverage and leave
//! holder-less leaves to a scheduled sweep ([`SweepPolicy`]); a query
//! walks from the root crediting each rank's covered prefix. Each module
//! opens with its protocol; `papers/protocols.md` puts them together.
//!
//! # Example
//!
//! Build a tree over the RwLock gate (any [`ShapeGate`] works the same way),
//! apply a rank's stores, and score a query:
//!
//! ```
//! use crtc::types::{
//!     BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank,
//! };
//! use crtc::{RwLockGate, Tree, TreeConfig};
//!
//! let tree = Tree::<RwLockGate>::new(TreeConfig::default());
//! let mut lane = tree.new_lane();
//! let rank = WorkerWithDpRank::new(7, 0);
//! let block = |local, external| BlockPair {
//!     local: LocalBlockHash(local),
//!     external: ExternalSequenceBlockHash(external),
//! };
//! // Blocks 1, 2 from the root, then block 3 after block 2 (a decode step).
//! let prompt = RouterEvent::stored(rank, None, vec![block(1, 101), block(2, 102)]);
//! tree.apply_event(&mut lane, &prompt).unwrap();
//! let decode = RouterEvent::stored(
//!     rank,
//!     Some(ExternalSequenceBlockHash(102)),
//!     vec![block(3, 103)],
//! );
//! tree.apply_event(&mut lane, &decode).unwrap();
//!
//! // The rank holds the first three blocks of this query, not the fourth.
//! let query = [1, 2, 3, 4].map(LocalBlockHash);
//! let scores = tree.find_matches(&query, false);
//! assert_eq!(scores.score(rank), 3);
//! ```
//!
//! # The read contract
//!
//! Every strategy satisfies, against the reference model (crate
//! `crtc-verification`, `verification/src/reference.rs`):
//!
//! - **C1 never overcount**: a score is at most the rank's held prefix (for a
//!   concurrent read, the largest held prefix at some instant of the read).
//! - **C2 exact when strict**: without holes, after quiescence, scores equal
//!   the held prefix, fast path on or off.
//! - **C3 bounded undercount with holes**: reachable prefix ≤ score ≤ held.
//! - **C4 valid stores apply**: a store under a reachable parent is accepted.
//! - **C5 the fast path is invisible**: on any sequential stream, fast path on
//!   and off give identical scores, dumps and node counts.
//! - **C6** reads never panic and never block longer than one critical section;
//!   **C7** bad input is an error value ([`types::KvError`]); **C8** memory is
//!   bounded by live memberships after removals and a sweep.
//!
//! The tests that hold each strategy to the contract are in
//! `verification/tests/` (differential, stress, soak, memory) and the model
//! checks in `verification/src/models/`.
//!
//! # Events racing a removal
//!
//! A router's events arrive asynchronously, so a worker's last events can
//! reach the [`Indexer`] while [`Indexer::remove_worker`],
//! [`Indexer::remove_worker_dp_rank`] or a `Cleared` of the rank runs. Each
//! such event applies wholly before the removal (it is then removed with the
//! rank: its coverage swept, its lane's lookups dropped) or wholly after it:
//! the rank comes back as a new one holding nothing, so a late store under
//! a block the rank held is refused with `ParentBlockNotFound`, and a late
//! store from the root is kept. Never half: no lane keeps a lookup or a slot
//! of the removed rank, and a released slot is never in any lane's state when
//! it is issued to a new rank. The removal's linearization point is the unmap
//! of the rank's slots (`Tree::begin_removal`; protocol in `tree::ranks`);
//! the indexer first flushes its lanes, so a rank's events enqueued before
//! the call are always before it (removed with the rank).
//! Shown by the unit tests `indexer::tests` (a lane held between the
//! removal's steps) and the shuttle model `indexer` (lane threads, late
//! events, removals, clears and slot reuse against the reference model),
//! which catches the old order (mutant `RemovalDropsBeforeUnmap`) and a
//! removal that does not flush first (`RemovalWithoutFlush`).
//!
//! Upstream 1.6.1 (read, not run) removes in two broadcasts: every lane
//! erases its per-worker lookup, then lane 0 erases the worker's coverage
//! from the tree, and its code notes that events admitted before the
//! barrier "may be removed". A late event applied on another lane between
//! its lane's erase and lane 0's tree sweep re-creates that lane's lookup
//! for blocks whose coverage the sweep then erases: half applied. crtc's
//! order does not leave that state.
//!
//! # What is exported
//!
//! The crate root is the API: [`Tree`] with its [`Lane`]s and
//! [`TreeConfig`] (with the [`SweepPolicy`]), the outcomes ([`EventOutcome`],
//! [`StoreOutcome`], [`SweepStats`]) and lane counters ([`LaneCounters`]),
//! the [`Indexer`], the event and score [`types`], and the gate contract
//! ([`ShapeGate`], [`Reclaim`], [`Guard`]) with the gates this build
//! compiles. The hidden `harness` module holds the hooks the workspace's
//! checkers, benches and tests need beyond that; it is not API.
#![warn(missing_docs)]

#[doc(hidden)]
pub mod harness;
mod indexer;
mod lanes;
mod tree;
pub mod types;
#[cfg(feature = "epoch")]
pub use crtc_strategies::CrossbeamEpochGate;
#[cfg(feature = "seize")]
pub use crtc_strategies::SeizeEpochGate;
#[cfg(feature = "seqlock")]
pub use crtc_strategies::SeqlockGate;
pub use crtc_strategies::{Guard, Reclaim, RwLockGate, ShapeGate};
pub use indexer::{Indexer, IndexerConfig};
pub use tree::{
    Counter, EventOutcome, Lane, LaneCounters, RankRemoval, RankTarget, Refusal, StoreOutcome,
    SweepPolicy, SweepStats, Tree, TreeConfig,
};
