//! Lane-local state: the reverse lookup `(rank, external) -> node` of the
//! ranks routed to one lane (its counters are in `counters`).
//!
//! Protocol. Entries may go stale after another lane splits a node (they then
//! name the prefix while the block moved to the suffix); they are repaired
//! lazily, only when a locked operation reports the hash missing. The lane
//! holds exactly one `Arc` per distinct node its entries name, with a
//! lane-local count of entries, so adding or moving entries touches a node's
//! shared reference count only for the first and last entry naming it; the
//! fast path reuses the hold's id and touches no shared count at all.
//! Redirects and scrubs change only entries that still name the node being
//! replaced or emptied, never entries that name another node.
//!
//! A hold's first and last entry also move the node's lane-hold count (the
//! sweeper leaves held nodes alone), and the lane keeps a reclamation tally
//! (blocks linked into the tree, blocks left on holder-less nodes) that the
//! tree folds into its shared estimates only when it grew large or when
//! forced, never per event.

use crate::tree::counters::LaneCounters;
use crate::tree::node::Node;
use crate::tree::rank_table::RankTables;
use crate::tree::slots::CachedSlot;
use crate::types::{ExternalSequenceBlockHash, WorkerWithDpRank};
use crtc_strategies::sync::Arc;
use crtc_strategies::ShapeGate;
use rustc_hash::FxHashMap;

/// A dense, lane-local name for a held node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NodeId(pub(super) u32);

struct Hold<G: ShapeGate> {
    node: Arc<Node<G>>,
    entries: usize,
}

/// Lane-local reclamation deltas, folded into the tree's estimates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Blocks linked into the tree.
    pub linked: i64,
    /// Blocks left on holder-less nodes (negative when revived).
    pub dead: i64,
}

/// One lane's reverse lookups and node holds.
pub struct Lane<G: ShapeGate> {
    ranks: RankTables,
    holds: Vec<Option<Hold<G>>>,
    free: Vec<u32>,
    by_addr: FxHashMap<usize, NodeId>,
    counters: Arc<LaneCounters>,
    tally: Tally,
}

impl<G: ShapeGate> Default for Lane<G> {
    fn default() -> Self {
        Self {
            ranks: RankTables::default(),
            holds: Vec::new(),
            free: Vec::new(),
            by_addr: FxHashMap::default(),
            counters: Arc::new(LaneCounters::default()),
            tally: Tally::default(),
        }
    }
}

impl<G: ShapeGate> Drop for Lane<G> {
    fn drop(&mut self) {
        for hold in self.holds.iter().flatten() {
            hold.node.add_lane_hold(-1);
        }
    }
}

impl<G: ShapeGate> Lane<G> {
    /// The lane's counters (shared so an indexer can read them).
    pub fn counters(&self) -> &Arc<LaneCounters> {
        &self.counters
    }

    /// Registers `rank` on this lane (removals are no longer unknown).
    pub(crate) fn add_rank(&mut self, rank: WorkerWithDpRank) {
        self.ranks.get_or_insert(rank);
    }

    /// Registers `rank` with the slot the caller just acquired for it.
    pub(crate) fn remember_slot(&mut self, rank: WorkerWithDpRank, slot: CachedSlot) {
        self.ranks.get_or_insert(rank).slot = Some(slot);
    }

    /// The slot of `rank` as this lane last found it.
    #[inline]
    pub(crate) fn cached_slot(&self, rank: WorkerWithDpRank) -> Option<CachedSlot> {
        self.ranks.get(rank)?.slot
    }

    /// Whether `rank` was registered on this lane.
    pub(crate) fn has_rank(&self, rank: WorkerWithDpRank) -> bool {
        self.ranks.get(rank).is_some()
    }

    /// The ranks registered on this lane.
    pub(crate) fn ranks(&self) -> impl Iterator<Item = WorkerWithDpRank> + '_ {
        self.ranks.ranks()
    }

    /// Number of entries of `rank`.
    pub(crate) fn entry_count(&self, rank: WorkerWithDpRank) -> usize {
        self.ranks.get(rank).map_or(0, |m| m.len())
    }

    /// The reclamation deltas not yet folded into the tree.
    pub(crate) fn tally(&self) -> Tally {
        self.tally
    }

    /// Adds to the reclamation deltas.
    pub(super) fn note(&mut self, linked: i64, dead: i64) {
        self.tally.linked += linked;
        self.tally.dead += dead;
    }

    /// Takes the deltas out (to fold them).
    pub(super) fn take_tally(&mut self) -> Tally {
        std::mem::take(&mut self.tally)
    }

    /// Number of distinct nodes held.
    pub(crate) fn held_nodes(&self) -> usize {
        self.by_addr.len()
    }

    /// The id of the entry `(rank, hash)`.
    #[inline]
    pub(crate) fn entry(
        &self,
        rank: WorkerWithDpRank,
        hash: ExternalSequenceBlockHash,
    ) -> Option<NodeId> {
        self.ranks.get(rank)?.get(hash)
    }

    /// The held node behind `id`, borrowed (no reference count change).
    #[inline]
    pub(crate) fn node(&self, id: NodeId) -> &Arc<Node<G>> {
        match &self.holds[id.0 as usize] {
            Some(hold) => &hold.node,
            None => unreachable!("entries name only held nodes"),
        }
    }

    /// The id of `node` if an entry names it.
    pub(crate) fn id_of(&self, node: &Node<G>) -> Option<NodeId> {
        self.by_addr.get(&node.addr()).copied()
    }

    fn hold(&mut self, node: &Arc<Node<G>>) -> NodeId {
        if let Some(&id) = self.by_addr.get(&node.addr()) {
            return id;
        }
        node.add_lane_hold(1);
        let hold = Some(Hold {
            node: Arc::clone(node),
            entries: 0,
        });
        let id = match self.free.pop() {
            Some(index) => {
                self.holds[index as usize] = hold;
                NodeId(index)
            }
            None => {
                self.holds.push(hold);
                NodeId(self.holds.len() as u32 - 1)
            }
        };
        self.by_addr.insert(node.addr(), id);
        id
    }

    fn count(&mut self, id: NodeId, delta: isize) {
        let slot = &mut self.holds[id.0 as usize];
        let Some(hold) = slot else { return };
        hold.entries = hold.entries.saturating_add_signed(delta);
        if hold.entries == 0 {
            hold.node.add_lane_hold(-1);
            self.by_addr.remove(&hold.node.addr());
            *slot = None;
            self.free.push(id.0);
        }
    }

    /// Points the entries of `hashes` at the held node `id`; returns how many
    /// were new or changed.
    fn upsert_held(
        &mut self,
        rank: WorkerWithDpRank,
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        id: NodeId,
    ) -> usize {
        let table = self.ranks.get_or_insert(rank);
        let (changed, replaced) = table.point(hashes, id);
        self.recount(id, changed, replaced)
    }

    /// The decode fast path's side of the lane, with one probe of the rank
    /// map where a lookup and an upsert would take two: offers the node the
    /// entry `(rank, parent)` names to `append`, and if it accepts, points
    /// the entries of `hashes` at that node. `None` without such an entry.
    pub(crate) fn append_below_entry<T, E>(
        &mut self,
        rank: WorkerWithDpRank,
        parent: ExternalSequenceBlockHash,
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        append: impl FnOnce(&Node<G>) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        let table = self.ranks.get_mut(rank)?;
        let id = table.get(parent)?;
        let Some(hold) = &self.holds[id.0 as usize] else {
            unreachable!("entries name only held nodes")
        };
        let appended = append(&hold.node);
        if appended.is_ok() {
            let (changed, replaced) = table.point(hashes, id);
            self.recount(id, changed, replaced);
        }
        Some(appended)
    }

    /// Moves the entry counts after [`RankTable::point`](crate::tree::rank_table::RankTable::point); returns `changed`.
    fn recount(&mut self, id: NodeId, changed: usize, replaced: Vec<NodeId>) -> usize {
        self.count(id, changed as isize);
        for old in replaced {
            self.count(old, -1);
        }
        changed
    }

    /// Points the entries of `hashes` at `node`; returns how many changed.
    pub(crate) fn upsert(
        &mut self,
        rank: WorkerWithDpRank,
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        node: &Arc<Node<G>>,
    ) -> usize {
        let id = self.hold(node);
        let changed = self.upsert_held(rank, hashes, id);
        if changed == 0 {
            self.count(id, 0);
        }
        changed
    }

    /// Removes the entry `(rank, hash)`.
    pub(crate) fn remove(
        &mut self,
        rank: WorkerWithDpRank,
        hash: ExternalSequenceBlockHash,
    ) -> bool {
        let Some(map) = self.ranks.get_mut(rank) else {
            return false;
        };
        let Some(id) = map.remove(hash) else {
            return false;
        };
        self.count(id, -1);
        true
    }

    /// Removes the entries of `hashes` that name one of `nodes`, probing
    /// each hash once.
    pub(crate) fn remove_naming(
        &mut self,
        rank: WorkerWithDpRank,
        hashes: &[ExternalSequenceBlockHash],
        nodes: [&Node<G>; 2],
    ) {
        let ids = nodes.map(|n| self.id_of(n));
        let Some(map) = self.ranks.get_mut(rank) else {
            return;
        };
        let mut removed = [0isize; 2];
        for &hash in hashes {
            if let Some(id) = map.remove_if(hash, |id| ids.contains(&Some(id))) {
                removed[usize::from(ids[0] != Some(id))] += 1;
            }
        }
        map.shrink_if_sparse();
        for (id, n) in ids.into_iter().zip(removed) {
            if let (Some(id), true) = (id, n > 0) {
                self.count(id, -n);
            }
        }
    }

    /// Moves the entry `(rank, hash)` from `from` to `to` if it names `from`.
    pub(crate) fn redirect(
        &mut self,
        rank: WorkerWithDpRank,
        hash: ExternalSequenceBlockHash,
        from: &Node<G>,
        to: &Arc<Node<G>>,
    ) -> bool {
        let Some(from_id) = self.id_of(from) else {
            return false;
        };
        if self.entry(rank, hash) != Some(from_id) {
            return false;
        }
        let to_id = self.hold(to);
        self.upsert_held(rank, [hash], to_id) > 0
    }

    /// Drops every entry of `rank` and unregisters it.
    pub(crate) fn drop_rank(&mut self, rank: WorkerWithDpRank) {
        let Some(map) = self.ranks.remove(rank) else {
            return;
        };
        for id in map.into_ids() {
            self.count(id, -1);
        }
    }

    /// Takes out, before a removal run's section, the entries of the run
    /// at the head of `hashes`: `hashes[0]`'s, and those of the following
    /// hashes while they name one of `nodes`, one probe per hash. The lane's
    /// holds are not touched: [`Self::settle_run`] releases what the section
    /// consumed and puts the rest back.
    pub(crate) fn take_run(
        &mut self,
        rank: WorkerWithDpRank,
        hashes: &[ExternalSequenceBlockHash],
        nodes: [&Node<G>; 2],
    ) -> TakenRun {
        let ids = nodes.map(|n| self.id_of(n));
        let mut taken = TakenRun {
            ids,
            first: None,
            rest: Vec::with_capacity(hashes.len() - 1),
        };
        let Some(table) = self.ranks.get_mut(rank) else {
            return taken;
        };
        let names = |id| ids.contains(&Some(id));
        taken.first = table.remove_if(hashes[0], names);
        for &hash in &hashes[1..] {
            match table.remove_if(hash, names) {
                Some(id) => taken.rest.push(id),
                None => break,
            }
        }
        taken
    }

    /// Settles the entries [`Self::take_run`] took for `run`, of which the
    /// section consumed the first `consumed` hashes (0 if it found none):
    /// those entries stay out and release their holds; the others go back.
    pub(crate) fn settle_run(
        &mut self,
        rank: WorkerWithDpRank,
        run: &[ExternalSequenceBlockHash],
        taken: TakenRun,
        consumed: usize,
    ) {
        let Some(table) = self.ranks.get_mut(rank) else {
            return;
        };
        let (ids, first, rest) = (taken.ids, taken.first, taken.rest);
        // The consumed hashes after the first stay out; the others go back.
        let gone = consumed.saturating_sub(1).min(rest.len());
        for (&hash, &id) in run[1 + gone..].iter().zip(&rest[gone..]) {
            table.restore(hash, id);
        }
        let mut released = [0isize; 2];
        let mut release = |id| released[usize::from(ids[0] != Some(id))] += 1;
        rest[..gone].iter().for_each(|&id| release(id));
        match (first, consumed) {
            (Some(id), 0) => table.restore(run[0], id),
            (Some(id), _) => release(id),
            (None, _) => {}
        }
        for (id, n) in ids.into_iter().zip(released) {
            if let (Some(id), true) = (id, n > 0) {
                self.count(id, -n);
            }
        }
    }
}

/// The entries a removal run took before its section ([`Lane::take_run`]):
/// the nodes they named, in the order of the run's hashes.
pub(crate) struct TakenRun {
    ids: [Option<NodeId>; 2],
    first: Option<NodeId>,
    rest: Vec<NodeId>,
}

impl TakenRun {
    /// The run's length: its first hash and the hashes after it taken.
    pub(crate) fn len(&self) -> usize {
        1 + self.rest.len()
    }
}
