//! The tree under test, as harness [`Backend`]s: the direct tree with one
//! explicit lane, and the lane-threaded [`Indexer`].

use crate::Backend;
use crtc::types::{
    IndexerError, KvError, LocalBlockHash, MatchDetails, OverlapScores, RouterEvent, WorkerId,
    WorkerWithDpRank,
};
use crtc::{Indexer, IndexerConfig, Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;

/// The tree driven directly on one lane.
pub struct TreeBackend<G: ShapeGate> {
    /// The tree.
    pub tree: Tree<G>,
    lane: Lane<G>,
}

impl<G: ShapeGate> TreeBackend<G> {
    /// A fresh tree with the fast path on or off.
    pub fn new(fast_path: bool) -> Self {
        let tree = Tree::new(TreeConfig {
            fast_path,
            ..TreeConfig::default()
        });
        let lane = tree.new_lane();
        Self { tree, lane }
    }

    /// The lane (for its counters).
    pub fn lane(&self) -> &Lane<G> {
        &self.lane
    }
}

impl<G: ShapeGate> Backend for TreeBackend<G> {
    fn apply(&mut self, event: &RouterEvent) -> Result<(), KvError> {
        self.tree.apply_event(&mut self.lane, event).map(|_| ())
    }
    fn remove_worker(&mut self, worker: WorkerId) {
        self.tree.remove_worker(&mut [&mut self.lane], worker);
    }
    fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank) {
        self.tree.remove_worker_dp_rank(&mut [&mut self.lane], rank);
    }
    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        self.tree.find_matches(query, false)
    }
    fn find_match_details(&self, query: &[LocalBlockHash]) -> MatchDetails {
        self.tree.find_match_details(query, false)
    }
}

/// The indexer with `lanes` lane threads; events are acknowledged one by one.
pub struct IndexerBackend<G: ShapeGate> {
    /// The indexer.
    pub indexer: Indexer<G>,
}

impl<G: ShapeGate> IndexerBackend<G> {
    /// A fresh indexer with `lanes` lanes and the fast path on or off.
    pub fn new(lanes: usize, fast_path: bool) -> Self {
        let tree = TreeConfig {
            fast_path,
            ..TreeConfig::default()
        };
        Self {
            indexer: Indexer::new(IndexerConfig { lanes, tree }),
        }
    }
}

impl<G: ShapeGate> Backend for IndexerBackend<G> {
    fn apply(&mut self, event: &RouterEvent) -> Result<(), KvError> {
        match self.indexer.apply_event_acked(event.clone()) {
            Ok(_) => Ok(()),
            Err(IndexerError::Refused(refusal)) => Err(refusal),
            Err(closed) => panic!("the backend owns its indexer, yet it answered: {closed}"),
        }
    }
    fn remove_worker(&mut self, worker: WorkerId) {
        self.indexer.remove_worker(worker);
    }
    fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank) {
        self.indexer.remove_worker_dp_rank(rank);
    }
    fn sync(&mut self) {
        self.indexer.flush();
    }
    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        self.indexer.find_matches(query)
    }
    fn find_match_details(&self, query: &[LocalBlockHash]) -> MatchDetails {
        self.indexer.find_match_details(query)
    }
}
