//! Removals, clears and rank removal.
//!
//! Protocol. A removal never splits: it lowers the rank's cutoff on a node to
//! the smallest removed position. Hashes are applied in runs: a run is the
//! longest stretch of the event's hashes whose lane entries name the same node
//! (or the stale origin a repair started from), and each run is applied in one
//! exclusive section of that node. The lane takes the run's entries out as it
//! finds the run, before the section (one probe per hash: finding the run and
//! scrubbing its entries are the same probe). The section locates the run's
//! hashes on the edge, stopping at the first it does not find, cuts the rank
//! at the minimum position (cutoff written before the bit clears), and, if no
//! rank is left full on the node, clears its children (nothing below can be
//! credited any more). The entries of the hashes it located stay out (those
//! blocks are now uncovered, or were beyond the rank's coverage); the others
//! go back. The lane then scrubs the entries of the other newly uncovered
//! blocks, but only entries that still name that node or the origin: an entry
//! naming another node belongs to that node's own run.
//! A run whose node no longer holds its first hash puts its entries back and
//! is repaired toward the head; if repair finds nothing, the hash's entry is
//! scrubbed (the event says the rank evicted it) and the removal moves on.
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
//! `Cleared` drops the rank's lookups and keeps its slot. Under a pin it
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
use crtc_strategies::{Commit, Reclaim, ShapeGate, ShapeRead, Slot};
use std::ops::Range;

/// What one run removal did.
struct RunRemoval {
    /// Hashes of the run located on the edge.
    consumed: usize,
    /// The other newly uncovered blocks (not in the run): their entries go
    /// if they name the node or the origin.
    stale: Vec<ExternalSequenceBlockHash>,
    /// Blocks the run left on a holder-less node (the edge, or 0).
    dead: usize,
}

/// Calls `f` with each position of `range` not among `taken` (each at or
/// after `range.start`), ascending. A run's positions usually step by one
/// in either direction from `range.start`; then the rest of `range` follows
/// them. Otherwise `range` becomes a bitmap with `taken` marked, read back
/// by its clear bits.
fn for_each_outside(range: Range<usize>, taken: &[usize], mut f: impl FnMut(usize)) {
    let steps = |d: isize| taken.windows(2).all(|w| w[1] as isize - w[0] as isize == d);
    let from_start = [taken.first(), taken.last()].contains(&Some(&range.start));
    if from_start && (steps(1) || steps(-1)) {
        return ((range.start + taken.len()).min(range.end)..range.end).for_each(f);
    }
    let (start, len) = (range.start, range.len());
    let mut words = vec![0u64; len.div_ceil(64)];
    for offset in taken.iter().filter_map(|&p| p.checked_sub(start)) {
        if offset < len {
            words[offset / 64] |= 1 << (offset % 64);
        }
    }
    for (index, word) in words.into_iter().enumerate() {
        let tail = len - index * 64;
        let mut clear = !word & if tail >= 64 { !0 } else { (1 << tail) - 1 };
        while clear != 0 {
            f(start + index * 64 + clear.trailing_zeros() as usize);
            clear &= clear - 1;
        }
    }
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
            let taken = lane.take_run(rank, hashes, [&node, &origin]);
            let run = &hashes[..taken.len()];
            let removal = Self::remove_run(&node, slot, run, guard);
            lane.settle_run(rank, run, taken, removal.as_ref().map_or(0, |r| r.consumed));
            if let Some(removal) = removal {
                lane.remove_naming(rank, &removal.stale, [&node, &origin]);
                lane.note(0, removal.dead as i64);
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

    /// Applies one run on `node` under its exclusive section, up to the
    /// first hash the edge does not hold; `None` if that is the first.
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
            let had_holders = w.has_holders();
            let uncovered = cut_at(w, slot, min);
            let mut stale = Vec::with_capacity(uncovered.len().saturating_sub(positions.len()));
            for_each_outside(uncovered, &positions, |p| stale.push(w.pair(p).external));
            let cleared = !w.has_full() && node.children.clear(guard);
            let dead = had_holders && !w.has_holders() && !w.is_anchor();
            let removal = RunRemoval {
                consumed: positions.len(),
                stale,
                dead: if dead { w.len() } else { 0 },
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
