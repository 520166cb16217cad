//! Rank removal and `Cleared`.
//!
//! Protocol. Removing ranks is three steps, and the order is the point (the
//! `Indexer` first flushes its lanes, so the ranks' events enqueued before
//! the removal have run and are removed with them):
//!
//! 1. [`Tree::begin_removal`] unmaps the target ranks' slots (under the
//!    registry mutex). This is the removal's linearization point: an event
//!    of a target rank that resolves its slot after it finds no mapping and
//!    is issued a fresh slot, so the rank comes back as a new one, holding
//!    nothing; an event that resolved the old slot before it (through the
//!    mapping, or a lane's cached slot stamped before the unmap count moved)
//!    is before the removal and is pinned while it writes.
//! 2. [`Tree::drop_removed`], on every lane, on the thread that owns it,
//!    after step 1: the lane unregisters every rank whose cached slot is
//!    one of the removed slots, and every target rank whose cached slot (or
//!    lack of one) is not the slot it maps to now, then drops the directory
//!    entries of blocks no rank left on the lane covers. A lane applies a rank's events in order, so every event
//!    of the lane that used an old slot ran before this step, and no event
//!    after it can obtain one (step 1): once every lane has run it, no
//!    lane's registrations, slot mask or cached slots name a removed slot.
//!    A target rank that came back as a new one (a fresh slot) stays
//!    registered; the lane's entries are still scrubbed, because its mask
//!    lost the old slot.
//! 3. [`Tree::finish_removal`] waits for every thread pinned before (events
//!    that resolved an old slot finish writing), sweeps the slots out of
//!    every node reachable from the root and the anchors, then releases
//!    them (vacate, wait for pinned readers, free). A caller whose unmap
//!    found nothing (a concurrent removal won it) waits for that removal's
//!    release instead.
//!
//! So an event racing a removal applies wholly before it (its bits are
//! swept, its entries dropped) or wholly after it (on a fresh slot), and a
//! released slot is never in any lane's state when it is issued again. The
//! order before issue 44 (lanes dropped first, unmap second) let a late
//! event re-register the rank with its old slot between the two; the mutant
//! `RemovalDropsBeforeUnmap` keeps that order for the checkers.
//!
//! Where else a lane's cached state could outlive a slot's release: a slot
//! is released only here, so registrations, the slot mask and cached slots
//! can name a released slot only if a lane kept one past step 2, which the
//! argument above rules out. `Cleared` releases nothing (its rank keeps its
//! slot; the lane re-registers the rank without one). Directory entries name
//! nodes, never slots: step 2 drops those no rank left on the lane covers,
//! and the stale-leaf sweep never unlinks a node a lane holds (`sweep`).
//!
//! The sweep seeds with the root's children and every anchor, snapshots a
//! node's children before clearing them, so it still visits nodes it just
//! detached; a split racing the sweep either happened before the node's
//! section (the snapshot holds the suffix) or starts after the slot's bits
//! are gone, so it cannot copy them forward. No visited set: the tree is
//! acyclic, and a split suffix may reuse a freed node's address.
//!
//! `Cleared` unregisters the rank from the lane, drops the entries of the
//! blocks no other rank of the lane covers, and keeps its slot. It then
//! sweeps every slot the rank owns (its mapped slot, and an old one a
//! removal has unmapped but not yet released), each while the slot's owner
//! cell, read under the current pin, still names the rank: a pin that saw
//! the owner holds back the slot's release, so a clear never touches a slot
//! recycled meanwhile, and a slot released meanwhile was swept by its
//! removal. An acknowledged clear therefore leaves no bit of the rank behind
//! without waiting for a removal in flight (it runs on a lane thread, which
//! the removal's step 2 needs).

use super::node::Node;
use super::slots::{CachedSlot, SlotTable};
use super::{Lane, Tree};
use crate::types::{WorkerId, WorkerWithDpRank};
use crtc_strategies::shape::drop_slot;
use crtc_strategies::sync::Arc;
use crtc_strategies::{mutant, Commit, Reclaim, ShapeGate, ShapeRead, Slot};

/// Nodes a sweep visits before it re-pins.
const SWEEP_REPIN: usize = 64;

/// Which ranks a removal targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankTarget {
    /// Every dp rank of a worker.
    Worker(WorkerId),
    /// One rank.
    Rank(WorkerWithDpRank),
}

impl RankTarget {
    /// Whether `rank` is a target.
    pub fn matches(self, rank: WorkerWithDpRank) -> bool {
        match self {
            RankTarget::Worker(worker) => rank.worker_id == worker,
            RankTarget::Rank(target) => rank == target,
        }
    }
}

/// A rank removal between its unmap ([`Tree::begin_removal`]) and its
/// release ([`Tree::finish_removal`]); every lane of the tree must run
/// [`Tree::drop_removed`] with it in between.
#[derive(Debug)]
pub struct RankRemoval {
    target: RankTarget,
    slots: Vec<Slot>,
}

impl RankRemoval {
    /// The ranks removed.
    pub fn target(&self) -> RankTarget {
        self.target
    }

    /// Number of slots this removal unmapped (0 when a concurrent removal
    /// of the same ranks unmapped them first).
    pub fn unmapped(&self) -> usize {
        self.slots.len()
    }

    /// Whether a lane drops its registration of `rank`, cached at `cached`,
    /// while the rank maps to `mapped()`.
    fn drops(
        &self,
        rank: WorkerWithDpRank,
        cached: Option<Slot>,
        mapped: impl FnOnce() -> Option<Slot>,
    ) -> bool {
        match cached {
            Some(slot) if self.slots.contains(&slot) => true,
            // Broken on purpose (the order before issue 44, with the lanes
            // dropping before the unmap): every target registration goes.
            Some(_) if mutant!(RemovalDropsBeforeUnmap) => self.target.matches(rank),
            // A target rank back on a fresh slot since the unmap stays; one
            // cached at a slot it no longer maps to goes (a removal that lost
            // the unmap to one not given this lane).
            cached => self.target.matches(rank) && cached != mapped(),
        }
    }
}

impl<G: ShapeGate> Tree<G> {
    /// Unmaps the slots of every rank `target` matches: from here on their
    /// events resolve fresh slots (module docs, step 1). Every lane must
    /// then run [`Tree::drop_removed`], and one caller
    /// [`Tree::finish_removal`].
    pub fn begin_removal(&self, target: RankTarget) -> RankRemoval {
        RankRemoval {
            target,
            slots: self.slots.unmap(|rank| target.matches(rank)),
        }
    }

    /// Drops `removal`'s ranks from `lane` (step 2); run on the thread that
    /// owns the lane, after [`Tree::begin_removal`].
    pub fn drop_removed(&self, lane: &mut Lane<G>, removal: &RankRemoval) {
        let registrations = lane.registrations();
        let touched = registrations
            .iter()
            .any(|&(rank, _)| removal.target.matches(rank));
        let dropped: Vec<WorkerWithDpRank> = {
            let guard = G::Reclaim::pin();
            let table = self.slots.table(&guard);
            let drops = |&(rank, cached): &(WorkerWithDpRank, Option<CachedSlot>)| {
                removal.drops(rank, cached.map(CachedSlot::slot), || table.slot(rank))
            };
            registrations
                .into_iter()
                .filter(drops)
                .map(|(rank, _)| rank)
                .collect()
        };
        if touched || !dropped.is_empty() {
            dropped.into_iter().for_each(|rank| {
                lane.drop_rank(rank);
            });
            self.scrub_lane(lane);
        }
    }

    /// Sweeps and releases `removal`'s slots once every lane dropped them
    /// (step 3), or waits for the removal that unmapped them first. The
    /// caller must not be pinned.
    pub fn finish_removal(&self, removal: &RankRemoval) {
        if !removal.slots.is_empty() {
            G::Reclaim::wait_for_pinned_threads();
            let dead = self.sweep_slots(&removal.slots, |_| true);
            self.trigger.add(0, dead as i64);
            self.slots.release(&removal.slots);
        }
        let target = removal.target;
        self.slots.wait_for_release(|rank| target.matches(rank));
    }

    /// The whole removal: [`Tree::begin_removal`], `drop_everywhere` (which
    /// must run [`Tree::drop_removed`] on every lane the ranks may be
    /// registered on, and return once each has), then
    /// [`Tree::finish_removal`]. The caller must not be pinned.
    pub(crate) fn remove_ranks_with(
        &self,
        target: RankTarget,
        mut drop_everywhere: impl FnMut(&Arc<RankRemoval>),
    ) {
        if mutant!(RemovalDropsBeforeUnmap) {
            // Broken on purpose: the lanes drop the ranks before the unmap,
            // so a late event between the two re-registers a rank with its
            // old slot, which stays in that lane's mask after the release.
            drop_everywhere(&Arc::new(RankRemoval {
                target,
                slots: Vec::new(),
            }));
            return self.finish_removal(&self.begin_removal(target));
        }
        let removal = Arc::new(self.begin_removal(target));
        drop_everywhere(&removal);
        self.finish_removal(&removal);
    }

    /// The whole removal over `lanes` (every lane the ranks may be
    /// registered on). The caller must not be pinned.
    pub(super) fn remove_ranks(&self, lanes: &mut [&mut Lane<G>], target: RankTarget) {
        self.remove_ranks_with(target, |removal| {
            for lane in lanes.iter_mut() {
                self.drop_removed(lane, removal);
            }
        });
    }

    /// Drops the directory entries of the blocks no rank left on the lane
    /// covers (positions past the lane's coverage on the node an entry
    /// names; an entry whose block left that node for a split suffix stays,
    /// since another rank may hold it there). One pass over the directory.
    fn scrub_lane(&self, lane: &mut Lane<G>) {
        if lane.ranks().next().is_none() {
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
        if lane.drop_rank(rank) {
            self.scrub_lane(lane);
            lane.add_rank(rank);
        }
        for slot in self.slots.owned_by(rank) {
            let still_owned = |table: &SlotTable| table.owner(slot) == Some(rank);
            let dead = self.sweep_slots(&[slot], still_owned);
            lane.note(0, dead as i64);
        }
    }

    /// Removes `slots` from every node reachable from the root and the
    /// anchors, while `proceed` accepts the current slot table (checked
    /// before each node, under the pin the node is swept with). Returns the
    /// blocks left on nodes it made holder-less.
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
