//! Removals, clears and rank removal.
//!
//! Protocol. A removal never splits: it lowers the rank's cutoff on a node to
//! the smallest removed position. Hashes are applied in runs: a run is the
//! longest stretch of the event's hashes whose lane entries name the same node
//! (or the stale origin a repair started from), and each run is applied in one
//! exclusive section of that node. The section locates the run's hashes on the
//! edge, cuts the rank at the minimum position (cutoff written before the bit
//! clears), and, if no rank is left full on the node, clears its children
//! (nothing below can be credited any more). The lane then scrubs the entries
//! of newly uncovered blocks, but only entries that still name that node or
//! the origin: an entry naming another node belongs to that node's own run.
//! A run whose node no longer holds its first hash is repaired toward the head;
//! if repair finds nothing, the hash's entry is scrubbed (the event says the
//! rank evicted it) and the removal moves on.
//!
//! `Cleared` drops the rank's entries and sweeps its slot out of every node
//! reachable from the root. Rank removal unmaps the slots (no more writes),
//! waits until every thread pinned before has unpinned (events that resolved
//! the old slot finish), sweeps them, and releases them.

use super::lane::NodeId;
use super::node::Node;
use super::repair::Direction;
use super::{Guard, Lane, Tree};
use crate::types::{ExternalSequenceBlockHash, KvError, WorkerWithDpRank};
use crtc_strategies::shape::{cut_at, drop_slot};
use crtc_strategies::sync::Arc;
use crtc_strategies::{Commit, Reclaim, ShapeGate, ShapeRead, Slot};

/// What one run removal did.
struct RunRemoval {
    /// Hashes of the run located on the edge.
    consumed: usize,
    /// Hashes whose entries go: newly uncovered blocks and located blocks
    /// beyond the rank's coverage.
    stale: Vec<ExternalSequenceBlockHash>,
}

/// Nodes a sweep visits before it re-pins.
const SWEEP_REPIN: usize = 64;

impl<G: ShapeGate> Tree<G> {
    pub(super) fn apply_removed(
        &self,
        lane: &mut Lane<G>,
        rank: WorkerWithDpRank,
        hashes: &[ExternalSequenceBlockHash],
    ) -> Result<(), KvError> {
        if !lane.has_rank(rank) {
            return Err(KvError::BlockNotFound { rank });
        }
        let guard = G::Reclaim::pin();
        let Some(slot) = self.slots.table(&guard).slot(rank) else {
            hashes.iter().for_each(|&h| {
                lane.remove(rank, h);
            });
            return Ok(());
        };
        let mut index = 0;
        while index < hashes.len() {
            index += self.remove_leading(lane, rank, slot, &hashes[index..], &guard);
        }
        Ok(())
    }

    /// Removes the run starting at `hashes[0]`; returns how many hashes it
    /// consumed (at least one).
    fn remove_leading(
        &self,
        lane: &mut Lane<G>,
        rank: WorkerWithDpRank,
        slot: Slot,
        hashes: &[ExternalSequenceBlockHash],
        guard: &Guard<G>,
    ) -> usize {
        let first = hashes[0];
        let Some(origin_id) = lane.entry(rank, first) else {
            return 1;
        };
        let origin = Arc::clone(lane.node(origin_id));
        let mut node = Arc::clone(&origin);
        loop {
            let ids: Vec<NodeId> = [Some(origin_id), lane.id_of(&node)]
                .into_iter()
                .flatten()
                .collect();
            let run = lane.run_naming(rank, hashes, &ids);
            if let Some(removal) = Self::remove_run(&node, slot, &hashes[..run], guard) {
                lane.remove_naming(rank, &removal.stale, [&node, &origin]);
                return removal.consumed;
            }
            match self.repair(lane, &node, first, Direction::TowardHead, guard) {
                Some(resolved) => node = resolved,
                None => {
                    lane.remove(rank, first);
                    return 1;
                }
            }
        }
    }

    /// Applies one run on `node` under its exclusive section; `None` if the
    /// node does not hold the run's first hash.
    fn remove_run(
        node: &Node<G>,
        slot: Slot,
        run: &[ExternalSequenceBlockHash],
        guard: &Guard<G>,
    ) -> Option<RunRemoval> {
        let removal = node.gate.exclusive_commit(None, |w| {
            let mut positions: Vec<usize> = Vec::with_capacity(run.len());
            for &hash in run {
                let found = match positions.last() {
                    Some(&near) => w.position_near(hash, near),
                    None => w.position(hash),
                };
                let Some(pos) = found else { break };
                positions.push(pos);
            }
            let Some(&min) = positions.iter().min() else {
                return Commit::unchanged(None);
            };
            let old = w.covered_len(slot);
            let mut stale: Vec<_> = run
                .iter()
                .zip(&positions)
                .filter(|(_, &p)| p >= old)
                .map(|(h, _)| *h)
                .collect();
            let uncovered = cut_at(w, slot, min);
            stale.extend(uncovered.map(|p| w.pair(p).external));
            let cleared = !w.has_full() && node.children.clear(guard);
            let removal = RunRemoval {
                consumed: positions.len(),
                stale,
            };
            Commit {
                value: Some(removal),
                shape_changed: cleared,
            }
        });
        removal.ok().flatten()
    }

    pub(super) fn apply_cleared(&self, lane: &mut Lane<G>, rank: WorkerWithDpRank) {
        let registered = lane.has_rank(rank);
        lane.drop_rank(rank);
        if registered {
            lane.add_rank(rank);
        }
        let slot = self.slots.table(&G::Reclaim::pin()).slot(rank);
        if let Some(slot) = slot {
            self.sweep_slots(&[slot]);
        }
    }

    /// Unmaps, sweeps and releases the slots of every rank matching `target`.
    pub(crate) fn release_ranks(&self, target: &dyn Fn(WorkerWithDpRank) -> bool) {
        let slots = self.slots.unmap(target);
        if slots.is_empty() {
            return;
        }
        G::Reclaim::wait_for_pinned_threads();
        self.sweep_slots(&slots);
        self.slots.release(&slots);
    }

    /// Removes `slots` from every node reachable from the root. No visited
    /// set: the tree is acyclic, and a split suffix may reuse a freed node's
    /// address. Children are snapshotted before a clear, so the sweep still
    /// visits nodes it just detached.
    pub(super) fn sweep_slots(&self, slots: &[Slot]) {
        let mut guard = G::Reclaim::pin();
        let mut queue: Vec<Arc<Node<G>>> = self
            .root
            .children
            .snapshot(&guard)
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        let mut visited = 0;
        while let Some(node) = queue.pop() {
            let children = node.gate.exclusive_commit(None, |w| {
                let removed = slots.iter().fold(false, |any, &s| drop_slot(w, s) | any);
                let children = node.children.snapshot(&guard);
                let cleared = removed && !w.has_full() && node.children.clear(&guard);
                Commit {
                    value: children,
                    shape_changed: cleared,
                }
            });
            queue.extend(children.into_iter().flatten().map(|(_, c)| c));
            visited += 1;
            if visited % SWEEP_REPIN == 0 {
                guard = G::Reclaim::pin();
            }
        }
    }
}
