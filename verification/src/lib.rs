//! Verification of `crtc`: the reference model every strategy is held to,
//! the seeded workloads (presets, the engine model, trace and event-stream
//! loaders) with their one random generator and one hash chain, and the
//! differential harness.
//!
//! The harness replays a generated stream of [`Op`]s on a [`Backend`] and, in
//! lock step, on [`Reference`]. At
//! checkpoints it asks the backend every query of [`queries_for`] and holds
//! the answers to the read contract:
//!
//! - **C1** no score above the rank's held prefix;
//! - **C2** in strict streams (leaf-first evictions only) every score equals
//!   the held prefix;
//! - **C3** no score below the rank's reachable prefix;
//! - **C4** no event the model marks [`Verdict::Apply`] is rejected;
//! - **details**: detailed scores equal plain scores, and each rank's last
//!   matched hash is the query's sequence hash at position `score - 1`.
//!
//! Streams come from [`random_stream`], a pure function of a seed and a step
//! count (a shorter stream is a prefix of a longer one), so a failure is
//! reproduced by its seed or, seed-independently, by the op index and query
//! printed in the error. [`ReferenceBackend`] and [`DropRemovalsBackend`]
//! let the harness test itself.
//!
//! The model checkers (module `models`, built under `--cfg crtc_loom` or
//! `--cfg crtc_shuttle`) tag every failed check with a [`property::Property`]
//! id, so a negative control counts only when the property it targets fails.

#![warn(missing_docs)]

pub mod backends;
pub mod catalog;
pub mod chain;
pub mod gate_suite;
pub mod harness;
#[cfg(crtc_checker)]
pub mod models;
pub mod property;
pub mod queries;
pub mod reference;
pub mod rng;
pub mod seeds;
pub mod stream;
pub mod structure;
pub mod tree_backends;
pub mod workload;

pub use backends::{DropRemovalsBackend, ReferenceBackend};
pub use catalog::Catalog;
pub use harness::{run_differential, Report};
pub use queries::{queries_for, STRAY_LOCAL};
pub use rng::Rng;
pub use stream::{cases_from_env, random_stream, stream_strategy};
pub use tree_backends::{IndexerBackend, TreeBackend};

/// proptest, for the tests [`differential_gate_tests!`] expands to in
/// other crates.
#[doc(hidden)]
pub use proptest;

use crate::reference::{Reference, Verdict};
use crtc::types::{
    KvCacheEventData, KvError, LocalBlockHash, MatchDetails, OverlapScores, RouterEvent, WorkerId,
    WorkerWithDpRank,
};
use std::fmt;

/// An indexer under test, driven serially by the harness.
pub trait Backend {
    /// Applies one event; `Err` means the backend rejected it.
    fn apply(&mut self, event: &RouterEvent) -> Result<(), KvError>;
    /// Removes every rank of `worker`.
    fn remove_worker(&mut self, worker: WorkerId);
    /// Removes one rank.
    fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank);
    /// Waits until everything submitted so far is applied.
    fn sync(&mut self) {}
    /// Per-rank overlap scores of `query`.
    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores;
    /// Scores plus the last matched external hash per rank.
    fn find_match_details(&self, query: &[LocalBlockHash]) -> MatchDetails;
}

/// One step of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A KV event.
    Event(RouterEvent),
    /// Out-of-band removal of every rank of a worker.
    RemoveWorker(WorkerId),
    /// Out-of-band removal of one rank.
    RemoveWorkerDpRank(WorkerWithDpRank),
}

impl Op {
    /// Applies the op to `model` as accepted; returns the event's verdict
    /// (lifecycle ops always apply).
    pub fn apply_to(&self, model: &mut Reference) -> Verdict {
        match self {
            Op::Event(event) => model.apply(event),
            Op::RemoveWorker(worker) => {
                model.remove_worker(*worker);
                Verdict::Apply
            }
            Op::RemoveWorkerDpRank(rank) => {
                model.remove_worker_dp_rank(*rank);
                Verdict::Apply
            }
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Event(event) => {
                let rank = event.rank();
                match &event.event.data {
                    KvCacheEventData::Stored {
                        parent_hash,
                        blocks,
                    } => {
                        let parent = parent_hash.map(|p| format!("{:#x}", p.0));
                        let parent = parent.as_deref().unwrap_or("root");
                        let blocks: Vec<_> = blocks
                            .iter()
                            .map(|b| format!("{:#x}", b.external.0))
                            .collect();
                        write!(
                            f,
                            "rank {rank}: store under {parent} [{}]",
                            blocks.join(", ")
                        )
                    }
                    KvCacheEventData::Removed { block_hashes } => {
                        let hashes: Vec<_> =
                            block_hashes.iter().map(|h| format!("{:#x}", h.0)).collect();
                        write!(f, "rank {rank}: remove [{}]", hashes.join(", "))
                    }
                    KvCacheEventData::Cleared => write!(f, "rank {rank}: cleared"),
                }
            }
            Op::RemoveWorker(worker) => write!(f, "remove worker {worker}"),
            Op::RemoveWorkerDpRank(rank) => write!(f, "remove rank {rank}"),
        }
    }
}
