//! Workloads: ordered streams of router events, worker removals and lookups
//! that a replay applies to an index.
//!
//! Sources:
//! - [`presets`]: built-in seeded generators (`chat`, `agentx`), no files.
//! - [`mooncake`]: a Mooncake JSONL request trace run through the engine model;
//!   [`expand`]: upstream's expansion of it and its per-worker replay timeline.
//! - [`jsonl`]: a recorded event stream (and the writer that records one).
//!
//! Every generated stream comes from [`engine`], a small model of inference
//! workers with LRU block caches. Its streams are *strict*: a store names a
//! parent its rank holds, a removal names blocks its rank holds, and eviction
//! is leaf-first, so no rank ever holds a block without its prefix.
//! [`check::check_strict`] verifies exactly that on any stream.

pub mod check;
pub mod engine;
mod error;
pub mod expand;
pub mod jsonl;
pub mod limits;
pub mod mooncake;
pub mod presets;

use crtc::types::{KvCacheEventData, LocalBlockHash, RouterEvent, WorkerId};
use std::fmt;

pub use engine::{Engine, EngineConfig, Placement, PrefixHashPlacement, RandomPlacement};
pub use error::ParseError;
pub use presets::preset;

/// Tokens per engine block.
pub const BLOCK_TOKENS: u64 = 128;

/// One operation of a workload, in replay order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkloadOp {
    /// A KV event to apply.
    Event(RouterEvent),
    /// An out-of-band removal of every rank of a worker.
    RemoveWorker(WorkerId),
    /// A router lookup (`find_matches`) for a request's prompt.
    Query(Vec<LocalBlockHash>),
}

/// A named operation stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    /// What produced it (preset name, trace file, event file).
    pub name: String,
    /// The operations, in replay order.
    pub ops: Vec<WorkloadOp>,
    /// How many events are decode stores: one-block `Stored` events whose
    /// parent is the tail of the storing request's previous blocks. Counted
    /// by the generator; inferred by [`jsonl::read_jsonl`].
    pub decode_stores: u64,
}

/// Counts over a workload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkloadStats {
    /// `Stored` events.
    pub stored: u64,
    /// `Removed` events.
    pub removed: u64,
    /// `Cleared` events.
    pub cleared: u64,
    /// Out-of-band worker removals.
    pub remove_workers: u64,
    /// Lookups.
    pub queries: u64,
    /// Blocks named by `Stored` events.
    pub stored_blocks: u64,
    /// Blocks named by `Removed` events.
    pub removed_blocks: u64,
    /// Blocks named by lookups.
    pub query_blocks: u64,
    /// Decode stores (see [`Workload::decode_stores`]).
    pub decode_stores: u64,
}

impl WorkloadStats {
    /// Events (`Stored`, `Removed`, `Cleared`).
    pub fn events(&self) -> u64 {
        self.stored + self.removed + self.cleared
    }

    /// Share of events that are decode stores (0 without events).
    pub fn decode_share(&self) -> f64 {
        match self.events() {
            0 => 0.0,
            n => self.decode_stores as f64 / n as f64,
        }
    }
}

impl fmt::Display for WorkloadStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} events ({} stored / {} removed / {} cleared), {} event blocks, \
             {} queries ({} blocks), {} worker removals, decode share {:.1}%",
            self.events(),
            self.stored,
            self.removed,
            self.cleared,
            self.stored_blocks + self.removed_blocks,
            self.queries,
            self.query_blocks,
            self.remove_workers,
            100.0 * self.decode_share()
        )
    }
}

impl Workload {
    /// An empty workload called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// All counts in one pass.
    pub fn stats(&self) -> WorkloadStats {
        let mut s = WorkloadStats {
            decode_stores: self.decode_stores,
            ..WorkloadStats::default()
        };
        for op in &self.ops {
            match op {
                WorkloadOp::Event(event) => match &event.event.data {
                    KvCacheEventData::Stored { blocks, .. } => {
                        s.stored += 1;
                        s.stored_blocks += blocks.len() as u64;
                    }
                    KvCacheEventData::Removed { block_hashes } => {
                        s.removed += 1;
                        s.removed_blocks += block_hashes.len() as u64;
                    }
                    KvCacheEventData::Cleared => s.cleared += 1,
                },
                WorkloadOp::RemoveWorker(_) => s.remove_workers += 1,
                WorkloadOp::Query(locals) => {
                    s.queries += 1;
                    s.query_blocks += locals.len() as u64;
                }
            }
        }
        s
    }

    /// Number of KV events.
    pub fn events(&self) -> usize {
        self.events_iter().count()
    }

    /// Number of blocks named by KV events (stored plus removed).
    pub fn blocks(&self) -> usize {
        self.events_iter().map(RouterEvent::block_count).sum()
    }

    /// Number of lookups.
    pub fn queries(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| matches!(op, WorkloadOp::Query(_)))
            .count()
    }

    /// Share of KV events that are decode stores (0 without events).
    pub fn decode_share(&self) -> f64 {
        match self.events() {
            0 => 0.0,
            n => self.decode_stores as f64 / n as f64,
        }
    }

    /// The KV events, in order.
    pub fn events_iter(&self) -> impl Iterator<Item = &RouterEvent> {
        self.ops.iter().filter_map(|op| match op {
            WorkloadOp::Event(event) => Some(event),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain;
    use crtc::types::WorkerWithDpRank;

    #[test]
    fn stats_count_each_kind() {
        let rank = WorkerWithDpRank::new(1, 0);
        let blocks = chain::chained(None, &[1, 2, 3]);
        let tail = blocks[2].external;
        let mut w = Workload::new("t");
        w.ops.push(WorkloadOp::Query(chain::locals(&[1, 2, 3])));
        w.ops
            .push(WorkloadOp::Event(RouterEvent::stored(rank, None, blocks)));
        let decode = chain::chained(Some(tail), &[4]);
        w.ops.push(WorkloadOp::Event(RouterEvent::stored(
            rank,
            Some(tail),
            decode,
        )));
        w.ops
            .push(WorkloadOp::Event(RouterEvent::removed(rank, vec![tail])));
        w.ops.push(WorkloadOp::Event(RouterEvent::cleared(rank)));
        w.ops.push(WorkloadOp::RemoveWorker(1));
        w.decode_stores = 1;
        assert_eq!((w.events(), w.blocks(), w.queries()), (4, 5, 1));
        let s = w.stats();
        assert_eq!(
            (s.stored, s.removed, s.cleared, s.remove_workers),
            (2, 1, 1, 1)
        );
        assert_eq!(
            (s.stored_blocks, s.removed_blocks, s.query_blocks),
            (4, 1, 3)
        );
        assert!((w.decode_share() - 0.25).abs() < 1e-12);
        assert!((s.decode_share() - 0.25).abs() < 1e-12);
        assert_eq!(Workload::new("e").decode_share(), 0.0);
    }
}
