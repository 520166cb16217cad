//! Position of an external hash in a node's edge.
//!
//! Edges only grow at the tail and are cut only by splits, so positions never
//! move. Short edges (at most [`INDEX_THRESHOLD`] blocks) keep no table: a
//! lookup scans from the tail, so the last copy of a repeated hash wins. Longer
//! edges keep a hash map from external hash to its last position for a
//! prefix `[0, indexed)`; the unindexed tail (fewer than [`TAIL_BATCH`]
//! positions) is scanned first, newest to oldest, so a decode append costs no
//! hashing until a batch is full. A split rebuilds the (prefix) table, which is
//! cheap next to the split itself and keeps repeated hashes exact.

use crate::hash::{BlockPair, ExternalSequenceBlockHash};
use rustc_hash::FxHashMap;

/// Edges longer than this keep a position table.
pub const INDEX_THRESHOLD: usize = 16;

/// Appended positions are indexed in batches of this many.
pub const TAIL_BATCH: usize = 32;

/// The position table of one edge (empty for short edges).
#[derive(Clone, Debug, Default)]
pub struct EdgeIndex {
    table: Option<FxHashMap<ExternalSequenceBlockHash, u32>>,
    indexed: usize,
}

impl EdgeIndex {
    /// The index of `edge`.
    pub fn build(edge: &[BlockPair]) -> Self {
        let mut index = Self::default();
        index.rebuild(edge);
        index
    }

    fn rebuild(&mut self, edge: &[BlockPair]) {
        self.table = (edge.len() > INDEX_THRESHOLD).then(|| {
            let mut table = FxHashMap::with_capacity_and_hasher(2 * edge.len(), Default::default());
            for (pos, pair) in edge.iter().enumerate() {
                table.insert(pair.external, pos as u32);
            }
            table
        });
        self.indexed = if self.table.is_some() { edge.len() } else { 0 };
    }

    /// Records that `edge` grew at the tail (indexing a full batch at once).
    pub fn appended(&mut self, edge: &[BlockPair], _old_len: usize) {
        match &mut self.table {
            Some(table) if edge.len() - self.indexed >= TAIL_BATCH => {
                for (pos, pair) in edge.iter().enumerate().skip(self.indexed) {
                    table.insert(pair.external, pos as u32);
                }
                self.indexed = edge.len();
            }
            Some(_) => {}
            None if edge.len() > INDEX_THRESHOLD => self.rebuild(edge),
            None => {}
        }
    }

    /// Records that `edge` was truncated (its suffix split off).
    pub fn truncated(&mut self, edge: &[BlockPair]) {
        if self.table.is_some() {
            self.rebuild(edge);
        }
    }

    /// Last position of `hash` in `edge`.
    pub fn position(&self, edge: &[BlockPair], hash: ExternalSequenceBlockHash) -> Option<usize> {
        let Some(table) = &self.table else {
            return edge.iter().rposition(|pair| pair.external == hash);
        };
        let tail = self.indexed.min(edge.len());
        let recent = edge[tail..].iter().rposition(|pair| pair.external == hash);
        recent
            .map(|pos| tail + pos)
            .or_else(|| table.get(&hash).map(|&pos| pos as usize))
    }

    /// Position of `hash`, checking `near + 1` and `near - 1` first (removal
    /// runs visit neighbouring positions). Returns the last copy of a repeat
    /// unless a neighbour holds the hash.
    pub fn position_near(
        &self,
        edge: &[BlockPair],
        hash: ExternalSequenceBlockHash,
        near: usize,
    ) -> Option<usize> {
        for candidate in [near.checked_add(1), near.checked_sub(1)]
            .into_iter()
            .flatten()
        {
            if edge
                .get(candidate)
                .is_some_and(|pair| pair.external == hash)
            {
                return Some(candidate);
            }
        }
        self.position(edge, hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(hashes: &[u64]) -> Vec<BlockPair> {
        hashes.iter().map(|&h| BlockPair::new(h, h)).collect()
    }

    #[test]
    fn positions_match_a_map_model_across_threshold_appends_and_splits() {
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % 40
        };
        for _ in 0..200 {
            let len = 1 + (next() as usize);
            let mut pairs = edge(&(0..len).map(|_| next()).collect::<Vec<_>>());
            let mut index = EdgeIndex::build(&pairs);
            let extra = next() as usize % 20;
            let old = pairs.len();
            pairs.extend(edge(&(0..extra).map(|_| next()).collect::<Vec<_>>()));
            index.appended(&pairs, old);
            let cut = 1 + next() as usize % pairs.len();
            pairs.truncate(cut);
            index.truncated(&pairs);
            for h in 0..40 {
                let expected = pairs.iter().rposition(|p| p.external.0 == h);
                assert_eq!(
                    index.position(&pairs, ExternalSequenceBlockHash(h)),
                    expected
                );
            }
        }
    }

    #[test]
    fn position_near_prefers_the_neighbour_copy_of_a_repeat() {
        let pairs = edge(&[1, 2, 3, 2, 5]);
        let index = EdgeIndex::build(&pairs);
        assert_eq!(
            index.position(&pairs, ExternalSequenceBlockHash(2)),
            Some(3)
        );
        assert_eq!(
            index.position_near(&pairs, ExternalSequenceBlockHash(2), 0),
            Some(1)
        );
    }
}
