//! Every block the stream ever stored, so queries can be rebuilt from
//! external hashes: the model keeps only external hashes, a query needs the
//! local hashes of the whole path from the root.

use crtc::types::{
    BlockPair, ExternalSequenceBlockHash, KvCacheEventData, LocalBlockHash, RouterEvent,
};
use rustc_hash::FxHashMap;

/// A block's parent and local hash.
type Entry = (Option<ExternalSequenceBlockHash>, LocalBlockHash);

/// Blocks seen in `Stored` events: external hash -> (parent, local hash).
/// With chained external hashes the map is consistent across ranks.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    blocks: FxHashMap<ExternalSequenceBlockHash, Entry>,
    order: Vec<ExternalSequenceBlockHash>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Learns the blocks of a store (other events teach nothing).
    pub fn record(&mut self, event: &RouterEvent) {
        let KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } = &event.event.data
        else {
            return;
        };
        let mut parent = *parent_hash;
        for block in blocks {
            if self
                .blocks
                .insert(block.external, (parent, block.local))
                .is_none()
            {
                self.order.push(block.external);
            }
            parent = Some(block.external);
        }
    }

    /// Number of distinct blocks seen.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no block was seen yet.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Every block seen, in first-seen order (deterministic).
    pub fn blocks(&self) -> &[ExternalSequenceBlockHash] {
        &self.order
    }

    /// The parent `block` was stored under (`Some(None)` for the root,
    /// `None` for an unknown block).
    pub fn parent(
        &self,
        block: ExternalSequenceBlockHash,
    ) -> Option<Option<ExternalSequenceBlockHash>> {
        self.blocks.get(&block).map(|&(parent, _)| parent)
    }

    /// The path from the root to `block`, root first. `None` when the chain
    /// names a block the catalog never saw.
    pub fn path(&self, block: ExternalSequenceBlockHash) -> Option<Vec<BlockPair>> {
        let mut path = Vec::new();
        let mut cursor = Some(block);
        while let Some(external) = cursor {
            let &(parent, local) = self.blocks.get(&external)?;
            path.push(BlockPair { local, external });
            if path.len() > self.order.len() {
                return None;
            }
            cursor = parent;
        }
        path.reverse();
        Some(path)
    }

    /// The local hashes of the path from the root to `block`.
    pub fn locals(&self, block: ExternalSequenceBlockHash) -> Option<Vec<LocalBlockHash>> {
        self.path(block)
            .map(|path| path.into_iter().map(|pair| pair.local).collect())
    }
}
