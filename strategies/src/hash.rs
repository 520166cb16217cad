//! Domain primitives shared by the tree and every gate: block hashes, block
//! pairs and rank slots. Plain `Copy` data, no synchronization.

use serde::{Deserialize, Serialize};

/// Hash of one block's tokens. Drives traversal: child keys and edge matching.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct LocalBlockHash(pub u64);

/// The engine's chained hash of a block and its whole prefix. Drives identity:
/// parents, removals and lookup entries.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ExternalSequenceBlockHash(pub u64);

/// One block of an edge or a store: its local and its external hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockPair {
    /// Hash of the block's tokens.
    pub local: LocalBlockHash,
    /// Chained hash of the block and its prefix.
    pub external: ExternalSequenceBlockHash,
}

impl BlockPair {
    /// A pair from raw hash values.
    pub const fn new(local: u64, external: u64) -> Self {
        Self {
            local: LocalBlockHash(local),
            external: ExternalSequenceBlockHash(external),
        }
    }
}

/// A dense per-tree index standing for one rank in coverage bitsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u16);

impl Slot {
    /// The slot as an index into bitsets and tables.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// The largest number of slots one tree can issue.
pub const MAX_SLOTS: usize = 1 << 16;
