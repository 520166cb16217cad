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
//! Rank removal and `Cleared` are `ranks`.

use super::node::Node;
use super::repair::Direction;
use super::{Guard, Lane, Tree};
use crate::types::{ExternalSequenceBlockHash, KvError, WorkerWithDpRank};
use crtc_strategies::shape::cut_at;
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
}
