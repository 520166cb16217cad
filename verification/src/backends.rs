//! Backends for testing the harness itself.

use crate::chain;
use crate::reference::Reference;
use crate::Backend;
use crtc::types::{
    KvCacheEventData, KvError, LocalBlockHash, MatchDetails, OverlapScores, RouterEvent, WorkerId,
    WorkerWithDpRank,
};

/// A backend that is the reference model: every rank scores its held prefix,
/// so it is exact on every stream. It rejects empty stores, stores under a
/// parent the rank does not hold, and removals for a rank it does not know,
/// like the tree.
#[derive(Clone, Debug, Default)]
pub struct ReferenceBackend {
    model: Reference,
}

impl ReferenceBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// The model it answers from.
    pub fn model(&self) -> &Reference {
        &self.model
    }
}

impl Backend for ReferenceBackend {
    fn apply(&mut self, event: &RouterEvent) -> Result<(), KvError> {
        let rank = event.rank();
        match &event.event.data {
            KvCacheEventData::Stored { blocks, .. } if blocks.is_empty() => {
                return Err(KvError::EmptyStore { rank });
            }
            KvCacheEventData::Stored {
                parent_hash: Some(parent),
                ..
            } if !self.model.holds(rank, *parent) => {
                return Err(KvError::ParentBlockNotFound {
                    rank,
                    parent: *parent,
                });
            }
            KvCacheEventData::Removed { .. } if !self.model.knows(rank) => {
                return Err(KvError::BlockNotFound { rank });
            }
            _ => {}
        }
        self.model.apply(event);
        Ok(())
    }

    fn remove_worker(&mut self, worker: WorkerId) {
        self.model.remove_worker(worker);
    }

    fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank) {
        self.model.remove_worker_dp_rank(rank);
    }

    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        let mut scores = OverlapScores::default();
        for rank in self.model.ranks() {
            let held = self.model.held_prefix(rank, query);
            if held > 0 {
                scores.scores.insert(rank, held as u32);
            }
        }
        scores
    }

    fn find_match_details(&self, query: &[LocalBlockHash]) -> MatchDetails {
        let scores = self.find_matches(query);
        let raw: Vec<u64> = query.iter().map(|l| l.0).collect();
        let hashes = chain::sequence_hashes(&raw);
        let last_matched = scores
            .scores
            .iter()
            .map(|(&rank, &score)| (rank, hashes[score as usize - 1]))
            .collect();
        MatchDetails {
            scores,
            last_matched,
        }
    }
}

/// Wraps a backend and acknowledges every `Removed` event without applying
/// it — a deliberately broken backend the harness must catch.
#[derive(Clone, Debug, Default)]
pub struct DropRemovalsBackend<B> {
    /// The wrapped backend.
    pub inner: B,
}

impl<B: Backend> DropRemovalsBackend<B> {
    /// Wraps `inner`.
    pub fn new(inner: B) -> Self {
        Self { inner }
    }
}

impl<B: Backend> Backend for DropRemovalsBackend<B> {
    fn apply(&mut self, event: &RouterEvent) -> Result<(), KvError> {
        match event.event.data {
            KvCacheEventData::Removed { .. } => Ok(()),
            _ => self.inner.apply(event),
        }
    }

    fn remove_worker(&mut self, worker: WorkerId) {
        self.inner.remove_worker(worker);
    }

    fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank) {
        self.inner.remove_worker_dp_rank(rank);
    }

    fn sync(&mut self) {
        self.inner.sync();
    }

    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        self.inner.find_matches(query)
    }

    fn find_match_details(&self, query: &[LocalBlockHash]) -> MatchDetails {
        self.inner.find_match_details(query)
    }
}
