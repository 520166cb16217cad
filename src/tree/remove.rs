//! Removals, clears and rank removal.
//!
//! Protocol. A removal never splits: it lowers the rank's cutoff on a node to
//! the smallest removed position. Hashes are applied in runs: a run is the
//! longest stretch of the event's hashes whose directory entries name the
//! same node (or the stale origin a repair started from), and each run is
//! applied in one exclusive section of that node. The lane measures the run
//! with one read probe per hash; entries stay in the directory while another
//! rank of the lane may still cover their blocks. The section locates the
//! run's hashes on the edge, stopping at the first it does not find, cuts
//! the rank at the minimum position (cutoff written before the bit clears),
//! and, if no rank is left full on the node, clears its children (nothing
//! below can be credited any more). It reads the *lane coverage* (the
//! longest prefix a slot of the lane covers there, from the lane's slot
//! mask) before and after the cut and reports the blocks between the two,
//! which no rank of the lane holds on this node any more, and the located
//! blocks past the coverage before the cut (stale): their entries go, but
//! only entries that still name that node or the origin (an entry naming
//! another node belongs to that node's own run). Entries below the lane
//! coverage stay: invariant D of `papers/protocols.md` §2.1.
//! A run whose node no longer holds its first hash is repaired toward the
//! head; if repair finds nothing, the hash's entry is scrubbed when it still
//! names the origin (it leads nowhere) and the removal moves on.
//!
//! Why the entries decide the run rather than the edge (upstream 1.6.1 takes
//! the hashes that follow the first on its node's edge): a node detached by a
//! clear keeps its copy of a block whose live copy another node holds, so a
//! hash on an edge need not be the rank's; the catalogue test
//! `grouped_removal_leaves_hashes_named_on_another_node` is that case.
//!
//! A run that leaves a non-anchor node holder-less adds the edge to the
//! lane's dead tally (see `sweep`).
//!
//! `Cleared` unregisters the rank from the lane and drops the entries of the
//! blocks no other rank of the lane covers (`drop_lane_ranks`), and keeps its
//! slot. Under a pin it
//! reads the slot, then sweeps it out of every node reachable from the root
//! and the anchors, checking before each node, under the current pin, that
//! the rank still maps to that slot; it stops as soon as it does not (a
//! removal unmapped it and finishes the job). A pin that saw the mapping
//! holds back the slot's release, so a clear never touches a slot recycled
//! meanwhile. Unpinned again, it waits until no slot of the rank is pending
//! release, so an acknowledged clear leaves nothing behind even when another
//! caller is removing the rank (possibly an older slot of it).
//!
//! Rank removal (`release_ranks`) unmaps the slots (no more writes), waits
//! until every thread pinned before has unpinned (events that resolved the
//! old slot finish writing), sweeps the slots out of every reachable node
//! without a visited set, then releases them (vacate, wait for pinned
//! readers, free). A caller that lost the unmap to another caller waits for
//! that caller's release instead. The sweep seeds with the root's children
//! and every anchor, snapshots a node's children before clearing them, so it
//! still visits nodes it just detached; a split racing the sweep either
//! happened before the node's section (the snapshot holds the suffix) or
//! starts after the slot's bits are gone, so it cannot copy them forward.

use super::node::Node;
use super::repair::Direction;
use super::slots::SlotTable;
use super::{Guard, Lane, Tree};
use crate::types::{ExternalSequenceBlockHash, KvError, WorkerWithDpRank};
use crtc_strategies::shape::{cut_at, drop_slot};
use crtc_strategies::sync::Arc;
use crtc_strategies::{Commit, Reclaim, ShapeGate, ShapeRead, Slot, SlotBits};
use std::ops::Range;

/// What one run removal did.
struct RunRemoval {
    /// Hashes of the run located on the edge.
    consumed: usize,
    /// Blocks the cut uncovered, or the run located, that no rank of the
    /// lane covers any more: their entries go if they name the node or the
    /// origin.
    unheld: Vec<ExternalSequenceBlockHash>,
    /// Blocks the run left on a holder-less node (the edge, or 0).
    dead: usize,
}

/// The blocks whose entries a run removal drops: those the lane stopped
/// covering (`dropped`, from the lane's coverage after the cut to its
/// coverage before), and the located ones past the coverage before the cut
/// (their entries, if any, are stale).
fn unheld_blocks(
    shape: &impl ShapeRead,
    dropped: Range<usize>,
    located: &[usize],
) -> Vec<ExternalSequenceBlockHash> {
    let end = dropped.end;
    let past = located.iter().filter(move |&&p| p >= end);
    let mut unheld = Vec::with_capacity(dropped.len() + past.clone().count());
    unheld.extend(dropped.map(|p| shape.pair(p).external));
    unheld.extend(past.map(|&p| shape.pair(p).external));
    unheld
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
            return Ok(());
        };
        let mut index = 0;
        while index < hashes.len() {
            index += self.remove_leading(lane, slot, &hashes[index..], &guard);
        }
        Ok(())
    }

    /// Removes the run starting at `hashes[0]`; returns how many hashes it
    /// consumed (at least one).
    fn remove_leading(
        &self,
        lane: &mut Lane<G>,
        slot: Slot,
        hashes: &[ExternalSequenceBlockHash],
        guard: &Guard<G>,
    ) -> usize {
        let first = hashes[0];
        let Some(origin_id) = lane.entry(first) else {
            return 1;
        };
        let origin = Arc::clone(lane.node(origin_id));
        let mut node = Arc::clone(&origin);
        loop {
            let run = &hashes[..lane.run_len(hashes, [&node, &origin])];
            if let Some(removal) = Self::remove_run(&node, slot, lane.slot_mask(), run, guard) {
                lane.remove_naming(&removal.unheld, [&node, &origin]);
                lane.note(0, removal.dead as i64);
                return removal.consumed;
            }
            match self.repair(lane, &node, first, Direction::TowardHead, guard) {
                Some(resolved) => node = resolved,
                None => {
                    lane.remove_naming(&[first], [&origin, &origin]);
                    return 1;
                }
            }
        }
    }

    /// Applies one run on `node` under its exclusive section, up to the
    /// first hash the edge does not hold; `None` if that is the first.
    fn remove_run(
        node: &Node<G>,
        slot: Slot,
        lane_slots: &SlotBits,
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
            let had_holders = w.has_holders();
            let lane_before = w.covered_len_by_any(lane_slots);
            cut_at(w, slot, min);
            let lane_after = w.covered_len_by_any(lane_slots);
            let unheld = unheld_blocks(w, lane_after..lane_before, &positions);
            let cleared = !w.has_full() && node.children.clear(guard);
            let dead = had_holders && !w.has_holders() && !w.is_anchor();
            let removal = RunRemoval {
                consumed: positions.len(),
                unheld,
                dead: if dead { w.len() } else { 0 },
            };
            Commit {
                value: Some(removal),
                shape_changed: cleared,
            }
        });
        removal.ok().flatten()
    }

    /// Unregisters `ranks` from `lane` and drops the directory entries of
    /// the blocks no rank left on the lane covers (positions past the lane's
    /// coverage on the node an entry names; an entry whose block left that
    /// node for a split suffix stays, since another rank may hold it there).
    /// One pass over the directory for all of `ranks` (a worker's removal
    /// drops every dp rank of it at once).
    pub(crate) fn drop_lane_ranks(&self, lane: &mut Lane<G>, ranks: &[WorkerWithDpRank]) {
        let mut dropped = false;
        for &rank in ranks {
            dropped |= lane.drop_rank(rank);
        }
        if !dropped || lane.ranks().next().is_none() {
            return;
        }
        let guard = G::Reclaim::pin();
        for (node, hashes) in lane.entries_by_node() {
            let unheld: Vec<_> = node.gate.read_in(&guard, |s| {
                let held = s.covered_len_by_any(lane.slot_mask());
                let past = |h| s.position(h).is_some_and(|p| p >= held);
                hashes.iter().copied().filter(|&h| past(h)).collect()
            });
            lane.remove_naming(&unheld, [&node, &node]);
        }
    }

    pub(super) fn apply_cleared(&self, lane: &mut Lane<G>, rank: WorkerWithDpRank) {
        let registered = lane.has_rank(rank);
        self.drop_lane_ranks(lane, &[rank]);
        if registered {
            lane.add_rank(rank);
        }
        let slot = self.slots.table(&G::Reclaim::pin()).slot(rank);
        if let Some(slot) = slot {
            let still_mapped = |table: &SlotTable| table.slot(rank) == Some(slot);
            let dead = self.sweep_slots(&[slot], still_mapped);
            lane.note(0, dead as i64);
        }
        self.slots.wait_for_release(|r| r == rank);
    }

    /// Unmaps, sweeps and releases the slots of every rank matching
    /// `target`, or waits for the caller that unmapped them first. The
    /// caller must not be pinned.
    pub(crate) fn release_ranks(&self, target: &dyn Fn(WorkerWithDpRank) -> bool) {
        let slots = self.slots.unmap(target);
        if !slots.is_empty() {
            G::Reclaim::wait_for_pinned_threads();
            let dead = self.sweep_slots(&slots, |_| true);
            self.trigger.add(0, dead as i64);
            self.slots.release(&slots);
        }
        self.slots.wait_for_release(target);
    }

    /// Removes `slots` from every node reachable from the root and the
    /// anchors, while `proceed` accepts the current slot table (checked
    /// before each node, under the pin the node is swept with). No visited
    /// set: the tree is acyclic, and a split suffix may reuse a freed node's
    /// address. Children are snapshotted before a clear, so the sweep still
    /// visits nodes it just detached. Returns the blocks left on nodes it
    /// made holder-less.
    pub(super) fn sweep_slots(
        &self,
        slots: &[Slot],
        proceed: impl Fn(&SlotTable) -> bool,
    ) -> usize {
        let mut guard = G::Reclaim::pin();
        let mut queue: Vec<Arc<Node<G>>> = self.anchor_nodes(&guard);
        let roots = self.root.children.snapshot(&guard);
        queue.extend(roots.into_iter().map(|(_, c)| c));
        let (mut visited, mut dead) = (0, 0);
        while let Some(node) = queue.pop() {
            if !proceed(self.slots.table(&guard)) {
                break;
            }
            let swept = node.gate.exclusive_commit(None, |w| {
                let had_holders = w.has_holders();
                let removed = slots.iter().fold(false, |any, &s| drop_slot(w, s) | any);
                let children = node.children.snapshot(&guard);
                let cleared = removed && !w.has_full() && node.children.clear(&guard);
                let emptied = had_holders && !w.has_holders() && !w.is_anchor();
                Commit {
                    value: (children, if emptied { w.len() } else { 0 }),
                    shape_changed: cleared,
                }
            });
            if let Ok((children, emptied)) = swept {
                queue.extend(children.into_iter().map(|(_, c)| c));
                dead += emptied;
            }
            visited += 1;
            if visited % SWEEP_REPIN == 0 {
                guard = G::Reclaim::pin();
            }
        }
        dead
    }
}
