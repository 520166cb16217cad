//! Helpers shared by the scenario suite: event builders over chained hashes
//! and a direct-tree fixture with explicit lanes.

#![allow(dead_code)]

pub use crtc::harness::{LaneHooks, TreeHooks};
use crtc::types::{ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::{EventOutcome, Lane, ShapeGate, Tree, TreeConfig};
use crtc_verification::chain::{chained, tail_hash};

pub fn rank(worker: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, 0)
}

pub fn dp(worker: u64, dp_rank: u32) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, dp_rank)
}

/// `rank` stores `locals` after `prefix` (parent = the prefix's tail).
pub fn store_by(rank: WorkerWithDpRank, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let parent = tail_hash(prefix);
    RouterEvent::stored(rank, parent, chained(parent, locals))
}

pub fn store(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    store_by(rank(worker), prefix, locals)
}

/// External hashes of `locals` after `prefix`.
pub fn hashes(prefix: &[u64], locals: &[u64]) -> Vec<ExternalSequenceBlockHash> {
    chained(tail_hash(prefix), locals)
        .into_iter()
        .map(|b| b.external)
        .collect()
}

pub fn remove_by(rank: WorkerWithDpRank, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    RouterEvent::removed(rank, hashes(prefix, locals))
}

pub fn remove(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    remove_by(rank(worker), prefix, locals)
}

pub fn q(locals: &[u64]) -> Vec<LocalBlockHash> {
    locals.iter().map(|&l| LocalBlockHash(l)).collect()
}

/// A tree with `n` explicit lanes.
pub struct Fixture<G: ShapeGate> {
    pub tree: Tree<G>,
    pub lanes: Vec<Lane<G>>,
}

impl<G: ShapeGate> Fixture<G> {
    pub fn new(fast_path: bool, lanes: usize) -> Self {
        let tree = Tree::new(TreeConfig {
            fast_path,
            ..TreeConfig::default()
        });
        let lanes = (0..lanes).map(|_| tree.new_lane()).collect();
        Self { tree, lanes }
    }

    pub fn with_config(config: TreeConfig, lanes: usize) -> Self {
        let tree = Tree::new(config);
        let lanes = (0..lanes).map(|_| tree.new_lane()).collect();
        Self { tree, lanes }
    }

    /// Applies `event` on lane `lane` and expects success.
    pub fn apply(&mut self, lane: usize, event: RouterEvent) -> EventOutcome {
        match self.tree.apply_event(&mut self.lanes[lane], &event) {
            Ok(outcome) => outcome,
            Err(e) => panic!("event {event:?} failed: {e}"),
        }
    }

    pub fn try_apply(
        &mut self,
        lane: usize,
        event: RouterEvent,
    ) -> Result<EventOutcome, crtc::types::KvError> {
        self.tree.apply_event(&mut self.lanes[lane], &event)
    }

    pub fn score(&self, worker: u64, locals: &[u64]) -> u32 {
        self.tree
            .find_matches(&q(locals), false)
            .score(rank(worker))
    }

    pub fn score_of(&self, rank: WorkerWithDpRank, locals: &[u64]) -> u32 {
        self.tree.find_matches(&q(locals), false).score(rank)
    }

    pub fn remove_worker(&mut self, worker: u64) {
        let mut lanes: Vec<&mut Lane<G>> = self.lanes.iter_mut().collect();
        self.tree.remove_worker(&mut lanes, worker);
    }

    pub fn remove_rank(&mut self, rank: WorkerWithDpRank) {
        let mut lanes: Vec<&mut Lane<G>> = self.lanes.iter_mut().collect();
        self.tree.remove_worker_dp_rank(&mut lanes, rank);
    }

    /// Edge lengths of every reachable node, sorted.
    pub fn edge_lengths(&self) -> Vec<usize> {
        let mut lengths: Vec<usize> = self
            .tree
            .topology()
            .into_iter()
            .map(|node| node.edge.len())
            .collect();
        lengths.sort_unstable();
        lengths
    }
}
