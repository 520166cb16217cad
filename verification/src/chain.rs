//! Deterministic chained block hashes for tests and workloads:
//! `external = hash(parent external, local)`, so a sequence's external hashes
//! are a pure function of its local hashes, as an engine's would be.

use crtc::types::{
    BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank,
};

/// The external hash of a block with local hash `local` after `parent`.
pub fn chain_hash(
    parent: Option<ExternalSequenceBlockHash>,
    local: LocalBlockHash,
) -> ExternalSequenceBlockHash {
    let seed = parent.map_or(0x9e37_79b9_7f4a_7c15, |p| p.0);
    ExternalSequenceBlockHash(mix(seed ^ mix(local.0.wrapping_add(0x632b_e59b_d9b4_e019))))
}

/// A splitmix64 finalizer.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Blocks for `locals` chained after `parent`.
pub fn chained(parent: Option<ExternalSequenceBlockHash>, locals: &[u64]) -> Vec<BlockPair> {
    let mut prev = parent;
    locals
        .iter()
        .map(|&l| {
            let external = chain_hash(prev, LocalBlockHash(l));
            prev = Some(external);
            BlockPair {
                local: LocalBlockHash(l),
                external,
            }
        })
        .collect()
}

/// The external hashes of the sequence `locals` from the root.
pub fn sequence_hashes(locals: &[u64]) -> Vec<ExternalSequenceBlockHash> {
    chained(None, locals)
        .into_iter()
        .map(|b| b.external)
        .collect()
}

/// The external hash of the last block of `locals` from the root.
pub fn tail_hash(locals: &[u64]) -> Option<ExternalSequenceBlockHash> {
    sequence_hashes(locals).last().copied()
}

/// Local hashes from raw values.
pub fn locals(values: &[u64]) -> Vec<LocalBlockHash> {
    values.iter().map(|&v| LocalBlockHash(v)).collect()
}

/// `rank` stores `locals` after the sequence `prefix` (parent: its tail).
pub fn stored_after(rank: WorkerWithDpRank, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let parent = tail_hash(prefix);
    RouterEvent::stored(rank, parent, chained(parent, locals))
}

/// `rank` removes the blocks `locals` that follow the sequence `prefix`.
pub fn removed_after(rank: WorkerWithDpRank, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let hashes = chained(tail_hash(prefix), locals)
        .into_iter()
        .map(|b| b.external);
    RouterEvent::removed(rank, hashes.collect())
}

/// `rank` removes the blocks at `positions` of the sequence `seq`.
pub fn removed_at(rank: WorkerWithDpRank, seq: &[u64], positions: &[usize]) -> RouterEvent {
    let hashes = sequence_hashes(seq);
    RouterEvent::removed(rank, positions.iter().map(|&i| hashes[i]).collect())
}
