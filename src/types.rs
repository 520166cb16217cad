//! Wire types: ranks, events, scores and errors, all serde-(de)serializable
//! so a stream can be recorded, replayed and shared as JSON lines.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::fmt;

pub use crtc_strategies::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash};

/// A worker (engine instance) id.
pub type WorkerId = u64;
/// A data-parallel rank inside a worker.
pub type DpRank = u32;

/// A rank: the unit of coverage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct WorkerWithDpRank {
    /// The worker.
    pub worker_id: WorkerId,
    /// The rank inside the worker (0 without data parallelism).
    pub dp_rank: DpRank,
}

impl WorkerWithDpRank {
    /// The rank `dp_rank` of `worker_id`.
    pub const fn new(worker_id: WorkerId, dp_rank: DpRank) -> Self {
        Self { worker_id, dp_rank }
    }
}

impl fmt::Display for WorkerWithDpRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.worker_id, self.dp_rank)
    }
}

/// What a KV event says happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvCacheEventData {
    /// Blocks were stored under `parent_hash` (the root when `None`), in order.
    Stored {
        /// The block the first stored block follows.
        parent_hash: Option<ExternalSequenceBlockHash>,
        /// The stored blocks, each chained to the previous one.
        blocks: Vec<BlockPair>,
    },
    /// Blocks were evicted (any order, possibly with holes).
    Removed {
        /// The evicted blocks.
        block_hashes: Vec<ExternalSequenceBlockHash>,
    },
    /// The rank dropped everything it held.
    Cleared,
}

/// One event of one rank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCacheEvent {
    /// The engine's event id (informational).
    pub event_id: u64,
    /// The rank inside the worker.
    pub dp_rank: DpRank,
    /// What happened.
    pub data: KvCacheEventData,
}

/// An event as the router receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouterEvent {
    /// The emitting worker.
    pub worker_id: WorkerId,
    /// The event.
    pub event: KvCacheEvent,
}

impl RouterEvent {
    /// The emitting rank.
    pub fn rank(&self) -> WorkerWithDpRank {
        WorkerWithDpRank::new(self.worker_id, self.event.dp_rank)
    }

    fn with(rank: WorkerWithDpRank, data: KvCacheEventData) -> Self {
        Self {
            worker_id: rank.worker_id,
            event: KvCacheEvent {
                event_id: 0,
                dp_rank: rank.dp_rank,
                data,
            },
        }
    }

    /// A store of `blocks` under `parent_hash` by `rank`.
    pub fn stored(
        rank: WorkerWithDpRank,
        parent_hash: Option<ExternalSequenceBlockHash>,
        blocks: Vec<BlockPair>,
    ) -> Self {
        Self::with(
            rank,
            KvCacheEventData::Stored {
                parent_hash,
                blocks,
            },
        )
    }

    /// A removal of `block_hashes` by `rank`.
    pub fn removed(rank: WorkerWithDpRank, block_hashes: Vec<ExternalSequenceBlockHash>) -> Self {
        Self::with(rank, KvCacheEventData::Removed { block_hashes })
    }

    /// A clear of everything `rank` holds.
    pub fn cleared(rank: WorkerWithDpRank) -> Self {
        Self::with(rank, KvCacheEventData::Cleared)
    }

    /// Number of blocks the event names.
    pub fn block_count(&self) -> usize {
        match &self.event.data {
            KvCacheEventData::Stored { blocks, .. } => blocks.len(),
            KvCacheEventData::Removed { block_hashes } => block_hashes.len(),
            KvCacheEventData::Cleared => 0,
        }
    }
}

/// Per-rank overlap: how many leading query blocks each rank holds. Ranks
/// with score 0 are absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlapScores {
    /// Score per rank.
    #[serde(with = "rank_map")]
    pub scores: FxHashMap<WorkerWithDpRank, u32>,
}

impl OverlapScores {
    /// The score of `rank` (0 when absent).
    pub fn score(&self, rank: WorkerWithDpRank) -> u32 {
        self.scores.get(&rank).copied().unwrap_or(0)
    }

    /// Scores sorted by rank (for stable comparisons and printing).
    pub fn sorted(&self) -> Vec<(WorkerWithDpRank, u32)> {
        let mut scores: Vec<_> = self.scores.iter().map(|(&r, &s)| (r, s)).collect();
        scores.sort_unstable();
        scores
    }
}

/// Scores plus, per rank, the external hash of the last credited block.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchDetails {
    /// The overlap scores.
    pub scores: OverlapScores,
    /// External hash of the query block at position `score - 1`, per rank.
    #[serde(with = "rank_map")]
    pub last_matched: FxHashMap<WorkerWithDpRank, ExternalSequenceBlockHash>,
}

/// Serializes a rank-keyed map as a list of `[rank, value]` pairs (JSON map
/// keys must be strings).
mod rank_map {
    use super::WorkerWithDpRank;
    use rustc_hash::FxHashMap;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<V: Serialize + Copy, S: Serializer>(
        map: &FxHashMap<WorkerWithDpRank, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut pairs: Vec<(WorkerWithDpRank, V)> = map.iter().map(|(&k, &v)| (k, v)).collect();
        pairs.sort_unstable_by_key(|(k, _)| *k);
        pairs.serialize(serializer)
    }

    pub fn deserialize<'de, V: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<FxHashMap<WorkerWithDpRank, V>, D::Error> {
        let pairs = Vec::<(WorkerWithDpRank, V)>::deserialize(deserializer)?;
        Ok(pairs.into_iter().collect())
    }
}

/// Why the tree refused an event. The tree is unchanged by a refused event.
/// Parsing files is not the library's job (the file readers have their own
/// error), and an indexer that has shut down says so with
/// [`IndexerError::Closed`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum KvError {
    /// A store names a parent the rank does not hold (or no longer covers).
    ParentBlockNotFound {
        /// The storing rank.
        rank: WorkerWithDpRank,
        /// The parent it named.
        parent: ExternalSequenceBlockHash,
    },
    /// A removal for a rank this lane has never seen.
    BlockNotFound {
        /// The removing rank.
        rank: WorkerWithDpRank,
    },
    /// No free rank slot is left; the rank stays unindexed.
    CapacityExhausted {
        /// The rank that needed a slot.
        rank: WorkerWithDpRank,
        /// The configured slot capacity.
        capacity: usize,
    },
    /// A store without blocks.
    EmptyStore {
        /// The storing rank.
        rank: WorkerWithDpRank,
    },
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::ParentBlockNotFound { rank, parent } => {
                write!(
                    f,
                    "rank {rank}: parent block {:#x} not found or not covered",
                    parent.0
                )
            }
            KvError::BlockNotFound { rank } => {
                write!(f, "rank {rank}: removal for a rank this lane never saw")
            }
            KvError::CapacityExhausted { rank, capacity } => {
                write!(
                    f,
                    "rank {rank} refused: the tree's slot limit of {capacity} ranks is reached \
                     (remove a worker to free slots)"
                )
            }
            KvError::EmptyStore { rank } => write!(f, "rank {rank}: store without blocks"),
        }
    }
}

impl std::error::Error for KvError {}

/// Why the indexer did not apply a request: it has shut down, or its tree
/// refused the event.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum IndexerError {
    /// The indexer has shut down; the request was not applied.
    Closed,
    /// The tree refused the event.
    Refused(KvError),
}

impl From<KvError> for IndexerError {
    fn from(refusal: KvError) -> Self {
        IndexerError::Refused(refusal)
    }
}

impl fmt::Display for IndexerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexerError::Closed => write!(f, "the indexer has shut down"),
            IndexerError::Refused(refusal) => refusal.fmt(f),
        }
    }
}

impl std::error::Error for IndexerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IndexerError::Closed => None,
            IndexerError::Refused(refusal) => Some(refusal),
        }
    }
}
