//! What each rank holds, read from the nodes' coverage: per-rank block
//! counts, whether a rank holds a block, and the edge lengths of the tree.
//! For backends that report them (a dynamo `SyncIndexer` backend answers its
//! `Stats` and `ContainsWorkerBlock` tasks with these) and for diagnostics.
//!
//! Protocol. Everything here is read-only and takes no lane lock: each node
//! is read in one consistent view of its gate, but a walk over many nodes
//! may see a concurrent writer's change on some nodes and not on others, so
//! the results are exact only when no lane applies events meanwhile (after a
//! flush). A lane's directory is shared by its ranks, so a rank's count
//! comes from the coverage (full: the edge, partial: the cutoff), never from
//! directory entries.

use super::{Guard, Lane, Tree};
use crate::types::{ExternalSequenceBlockHash, WorkerWithDpRank};
use crtc_strategies::{Reclaim, ShapeGate, ShapeRead, Slot};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

impl<G: ShapeGate> Tree<G> {
    /// Blocks each rank holds: on every reachable node, the whole edge for a
    /// rank covering it and the cutoff for a rank covering a prefix. Anchor
    /// nodes are not counted (they are registrations, not stored blocks);
    /// the subtrees below them are. Ranks holding nothing are absent.
    pub fn rank_block_counts(&self) -> FxHashMap<WorkerWithDpRank, usize> {
        let mut per_slot: Vec<usize> = Vec::new();
        let mut add = |slot: Slot, blocks: usize| {
            if per_slot.len() <= slot.index() {
                per_slot.resize(slot.index() + 1, 0);
            }
            per_slot[slot.index()] += blocks;
        };
        self.visit(|node, guard| {
            // An optimistic gate may run the closure more than once: collect
            // inside it, count after it.
            let covered = node.gate.read_in(guard, |s| {
                let mut covered = Vec::new();
                if !s.is_anchor() {
                    covered.extend(s.full_slots().into_iter().map(|slot| (slot, s.len())));
                    s.for_each_cutoff(|slot, k| covered.push((slot, (k as usize).min(s.len()))));
                }
                covered
            });
            for (slot, blocks) in covered {
                add(slot, blocks);
            }
        });
        let guard = G::Reclaim::pin();
        let table = self.slots.table(&guard);
        let mut counts = FxHashMap::default();
        for (index, &blocks) in per_slot.iter().enumerate() {
            let owner = u16::try_from(index).ok().and_then(|i| table.owner(Slot(i)));
            if let (Some(rank), true) = (owner, blocks > 0) {
                *counts.entry(rank).or_insert(0) += blocks;
            }
        }
        counts
    }

    /// Whether `rank` holds the block `hash`. Ask on the lane `rank`'s events
    /// are applied on: its directory names the node (or, after another
    /// lane's split, a node the block moved below; the node's descendants
    /// are then searched, without repairing the entry).
    pub fn rank_holds_block(
        &self,
        lane: &Lane<G>,
        rank: WorkerWithDpRank,
        hash: ExternalSequenceBlockHash,
    ) -> bool {
        let guard = G::Reclaim::pin();
        let Some(slot) = self.slots.table(&guard).slot(rank) else {
            return false;
        };
        let Some(id) = lane.entry(hash) else {
            return false;
        };
        let mut queue = VecDeque::from([lane.node(id).clone()]);
        while let Some(node) = queue.pop_front() {
            let held = node.gate.read_in(&guard, |s| {
                s.position(hash).map(|pos| pos < s.covered_len(slot))
            });
            if let Some(held) = held {
                return held;
            }
            queue.extend(children_of(&node.children, &guard));
        }
        false
    }

    /// The edge length of every node below the root, sorted ascending
    /// (anchors and their subtrees are not listed). Holder-less nodes not
    /// yet swept are included.
    pub fn node_edge_lengths(&self) -> Vec<usize> {
        let mut lengths: Vec<usize> = self.topology().iter().map(|n| n.edge.len()).collect();
        lengths.sort_unstable();
        lengths
    }
}

fn children_of<G: ShapeGate>(
    children: &super::children::Children<G>,
    guard: &Guard<G>,
) -> impl Iterator<Item = crtc_strategies::sync::Arc<super::node::Node<G>>> {
    children.snapshot(guard).into_iter().map(|(_, c)| c)
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use super::*;
    use crate::types::{BlockPair, LocalBlockHash, RouterEvent};
    use crate::TreeConfig;
    use crtc_strategies::RwLockGate;

    fn blocks(hashes: &[u64]) -> Vec<BlockPair> {
        let pair = |&h: &u64| BlockPair {
            local: LocalBlockHash(h),
            external: ExternalSequenceBlockHash(100 + h),
        };
        hashes.iter().map(pair).collect()
    }

    fn store(
        tree: &Tree<RwLockGate>,
        lane: &mut Lane<RwLockGate>,
        rank: WorkerWithDpRank,
        parent: Option<u64>,
        hashes: &[u64],
    ) {
        let parent = parent.map(|h| ExternalSequenceBlockHash(100 + h));
        let event = RouterEvent::stored(rank, parent, blocks(hashes));
        tree.apply_event(lane, &event).unwrap();
    }

    #[test]
    fn counts_follow_coverage_and_holds_survive_another_lanes_split() {
        let tree = Tree::<RwLockGate>::new(TreeConfig::default());
        let (mut lane_a, mut lane_b) = (tree.new_lane(), tree.new_lane());
        let (a, b) = (WorkerWithDpRank::new(1, 0), WorkerWithDpRank::new(2, 0));
        store(&tree, &mut lane_a, a, None, &[1, 2, 3, 4]);
        // b shares [1, 2] and diverges: lane b splits the node lane a names.
        store(&tree, &mut lane_b, b, None, &[1, 2, 9]);
        let counts = tree.rank_block_counts();
        assert_eq!((counts[&a], counts[&b]), (4, 3));
        assert_eq!(tree.node_edge_lengths(), vec![1, 2, 2]);
        let held = |lane: &Lane<RwLockGate>, rank, h: u64| {
            tree.rank_holds_block(lane, rank, ExternalSequenceBlockHash(100 + h))
        };
        assert!(held(&lane_a, a, 4), "found below the split");
        assert!(!held(&lane_a, a, 9), "no entry for b's block on a's lane");
        assert!(!held(&lane_a, b, 4), "b does not cover a's suffix");
        let removal = RouterEvent::removed(a, vec![ExternalSequenceBlockHash(103)]);
        tree.apply_event(&mut lane_a, &removal).unwrap();
        assert_eq!(tree.rank_block_counts()[&a], 2);
        assert!(!held(&lane_a, a, 3));
    }
}
