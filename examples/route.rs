//! A router's use of crtc: feed the indexer the KV events the engines
//! publish, ask which rank caches the longest prefix of a request, route it
//! there. The gate is chosen by feature: RwLock by default, seqlock with
//! `--features seqlock`, epoch with `--features epoch` (or `all-strategies`);
//! the scores are the same whichever runs.
//! `cargo run -p crtc --example route [--features all-strategies]`

use crtc::types::WorkerWithDpRank as Rank;
use crtc::types::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent};
use crtc::{Indexer, IndexerConfig, ShapeGate};
use std::error::Error;

#[cfg(not(any(feature = "seqlock", feature = "epoch")))]
type Gate = crtc::RwLockGate;
#[cfg(all(feature = "seqlock", not(feature = "epoch")))]
type Gate = crtc::SeqlockGate;
#[cfg(feature = "epoch")]
type Gate = crtc::CrossbeamEpochGate;

/// Blocks of a request: `local` hashes a block's tokens, `external` is the
/// engine's hash of the block and its whole prefix (made-up numbers here).
fn blocks(pairs: &[(u64, u64)]) -> Vec<BlockPair> {
    let pair = |&(local, external)| BlockPair {
        local: LocalBlockHash(local),
        external: ExternalSequenceBlockHash(external),
    };
    pairs.iter().map(pair).collect()
}

/// Waits until the lanes applied everything sent, scores `query`, prints
/// where a router would send it and checks the scores of `ranks`.
fn route(indexer: &Indexer<Gate>, query: &[LocalBlockHash], ranks: [(Rank, u32); 2]) {
    indexer.flush();
    let scores = indexer.find_matches(query);
    let sorted = scores.sorted();
    let shown: Vec<_> = sorted.iter().map(|(r, s)| format!("{r}: {s}")).collect();
    let best = sorted.iter().max_by_key(|&&(_, score)| score);
    let best = best.map_or("nobody".to_string(), |(rank, _)| format!("rank {rank}"));
    println!("  scores [{}] -> route to {best}", shown.join(", "));
    for (rank, expected) in ranks {
        assert_eq!(scores.score(rank), expected, "rank {rank}");
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    println!("route: an Indexer over the {} gate", Gate::NAME);
    let indexer = Indexer::<Gate>::new(IndexerConfig::default());
    let (a, b) = (Rank::new(1, 0), Rank::new(2, 0));
    let query = [1, 2, 3, 4].map(LocalBlockHash);

    println!("stored: rank {a} prefills blocks 1-3 and decodes 4; rank {b} holds 1-2 and 5");
    let prompt = blocks(&[(1, 11), (2, 12), (3, 13)]);
    indexer.apply_event(RouterEvent::stored(a, None, prompt))?;
    let tail = Some(ExternalSequenceBlockHash(13));
    indexer.apply_event(RouterEvent::stored(a, tail, blocks(&[(4, 14)])))?;
    let other = blocks(&[(1, 11), (2, 12), (5, 25)]);
    indexer.apply_event(RouterEvent::stored(b, None, other))?;
    route(&indexer, &query, [(a, 4), (b, 2)]);

    println!("removed: rank {a} evicts its decoded block 4");
    indexer.apply_event(RouterEvent::removed(a, vec![ExternalSequenceBlockHash(14)]))?;
    route(&indexer, &query, [(a, 3), (b, 2)]);

    println!("cleared: rank {a} drops its whole cache");
    indexer.apply_event(RouterEvent::cleared(a))?;
    route(&indexer, &query, [(a, 0), (b, 2)]);

    println!("route: stored, removed and cleared events gave the expected scores");
    Ok(())
}
