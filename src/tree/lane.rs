//! Lane-local state: the directory `external -> node` shared by the ranks
//! routed to one lane (its counters are in `counters`).
//!
//! Protocol (`papers/protocols.md` §2.1). The directory holds at most one
//! entry per block some rank of the lane covers, naming the node that holds
//! it (or one it was split from); whether a rank holds the block is read
//! from the node's coverage, never from the entry. Entries leave only when
//! no rank of the lane covers their block any more (the tree computes that
//! under the node's section and passes the hashes). Entries may go stale
//! after another lane splits a node (they then name the prefix while the
//! block moved to the suffix); they are repaired
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
use crate::tree::directory::Directory;
use crate::tree::node::Node;
use crate::tree::rank_slots::RankSlots;
use crate::tree::slots::CachedSlot;
use crate::types::{ExternalSequenceBlockHash, WorkerWithDpRank};
use crtc_strategies::sync::Arc;
use crtc_strategies::{ShapeGate, Slot, SlotBits};
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
    ranks: RankSlots,
    /// The cached slots of `ranks`, as a set: the lane's coverage on a node
    /// is the longest prefix one of them covers.
    mask: SlotBits,
    /// How many registered ranks cache each slot (by slot index): a slot
    /// leaves `mask` when its last user does (a stale cached slot may
    /// equal another rank's).
    mask_users: Vec<u32>,
    directory: Directory,
    holds: Vec<Option<Hold<G>>>,
    free: Vec<u32>,
    by_addr: FxHashMap<usize, NodeId>,
    counters: Arc<LaneCounters>,
    tally: Tally,
}

impl<G: ShapeGate> Default for Lane<G> {
    fn default() -> Self {
        Self {
            ranks: RankSlots::default(),
            mask: SlotBits::new(),
            mask_users: Vec::new(),
            directory: Directory::default(),
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
        let old = self.ranks.get_or_insert(rank).replace(slot);
        if let Some(old) = old {
            self.unmask(old.slot());
        }
        self.mask_in(slot.slot());
    }

    /// Counts a user of `slot` in the mask.
    fn mask_in(&mut self, slot: Slot) {
        let index = slot.index();
        if self.mask_users.len() <= index {
            self.mask_users.resize(index + 1, 0);
        }
        self.mask_users[index] += 1;
        if self.mask_users[index] == 1 {
            self.mask.insert(slot);
        }
    }

    /// Drops a user of `slot` from the mask.
    fn unmask(&mut self, slot: Slot) {
        let Some(users) = self.mask_users.get_mut(slot.index()) else {
            return;
        };
        *users = users.saturating_sub(1);
        if *users == 0 {
            self.mask.remove(slot);
        }
    }

    /// The slots of the lane's ranks as the lane last found them.
    #[inline]
    pub(crate) fn slot_mask(&self) -> &SlotBits {
        &self.mask
    }

    /// The slot of `rank` as this lane last found it.
    #[inline]
    pub(crate) fn cached_slot(&self, rank: WorkerWithDpRank) -> Option<CachedSlot> {
        self.ranks.get(rank)?
    }

    /// Whether `rank` was registered on this lane.
    pub(crate) fn has_rank(&self, rank: WorkerWithDpRank) -> bool {
        self.ranks.get(rank).is_some()
    }

    /// The ranks registered on this lane, each with the slot the lane last
    /// found for it.
    pub(crate) fn registrations(&self) -> Vec<(WorkerWithDpRank, Option<CachedSlot>)> {
        self.ranks.iter().collect()
    }

    /// The ranks registered on this lane.
    pub(crate) fn ranks(&self) -> impl Iterator<Item = WorkerWithDpRank> + '_ {
        self.ranks.ranks()
    }

    /// Number of directory entries, if `rank` is registered on this lane
    /// (the directory is shared by the lane's ranks).
    pub(crate) fn entry_count(&self, rank: WorkerWithDpRank) -> usize {
        self.ranks.get(rank).map_or(0, |_| self.directory.len())
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

    /// The id of the node the directory names for `hash`.
    #[inline]
    pub(crate) fn entry(&self, hash: ExternalSequenceBlockHash) -> Option<NodeId> {
        self.directory.get(hash)
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
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        id: NodeId,
    ) -> usize {
        let (changed, replaced) = self.directory.point(hashes, id);
        self.recount(id, changed, replaced)
    }

    /// The decode fast path's side of the lane: offers the node the entry
    /// for `parent` names to `append`, and if it accepts, points the entries
    /// of `hashes` at that node, reusing the hold. `None` without such an
    /// entry.
    pub(crate) fn append_below_entry<T, E>(
        &mut self,
        parent: ExternalSequenceBlockHash,
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        append: impl FnOnce(&Node<G>) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        let table = &mut self.directory;
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

    /// Moves the entry counts after [`Directory::point`](crate::tree::directory::Directory::point); returns `changed`.
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
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        node: &Arc<Node<G>>,
    ) -> usize {
        let id = self.hold(node);
        let changed = self.upsert_held(hashes, id);
        if changed == 0 {
            self.count(id, 0);
        }
        changed
    }

    /// Removes the entries of `hashes` that name one of `nodes`, probing
    /// each hash once (blocks no rank of the lane covers any more).
    pub(crate) fn remove_naming(
        &mut self,
        hashes: &[ExternalSequenceBlockHash],
        nodes: [&Node<G>; 2],
    ) {
        let ids = nodes.map(|n| self.id_of(n));
        let map = &mut self.directory;
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

    /// Moves the entry for `hash` from `from` to `to` if it names `from`.
    pub(crate) fn redirect(
        &mut self,
        hash: ExternalSequenceBlockHash,
        from: &Node<G>,
        to: &Arc<Node<G>>,
    ) -> bool {
        let Some(from_id) = self.id_of(from) else {
            return false;
        };
        if self.entry(hash) != Some(from_id) {
            return false;
        }
        let to_id = self.hold(to);
        self.upsert_held([hash], to_id) > 0
    }

    /// Unregisters `rank`. Its blocks' entries are the tree's to scrub
    /// (`Tree::drop_removed`), except when it was the lane's last rank:
    /// then the whole directory goes.
    /// Returns whether `rank` was registered.
    pub(crate) fn drop_rank(&mut self, rank: WorkerWithDpRank) -> bool {
        let Some(cached) = self.ranks.remove(rank) else {
            return false;
        };
        if let Some(cached) = cached {
            self.unmask(cached.slot());
        }
        if self.ranks.is_empty() {
            for id in std::mem::take(&mut self.directory).into_ids() {
                self.count(id, -1);
            }
        }
        true
    }

    /// The held nodes the directory names, each with the hashes of its
    /// entries (a rank leaving the lane).
    pub(crate) fn entries_by_node(&self) -> Vec<(Arc<Node<G>>, Vec<ExternalSequenceBlockHash>)> {
        let mut grouped: FxHashMap<NodeId, Vec<ExternalSequenceBlockHash>> = FxHashMap::default();
        for (hash, id) in self.directory.iter() {
            grouped.entry(id).or_default().push(hash);
        }
        grouped
            .into_iter()
            .map(|(id, hashes)| (Arc::clone(self.node(id)), hashes))
            .collect()
    }

    /// The length of the removal run at the head of `hashes`: `hashes[0]`,
    /// and the following hashes while their entries name one of `nodes`
    /// (one read probe per hash; entries stay: another rank of the lane may
    /// still cover the block).
    pub(crate) fn run_len(
        &self,
        hashes: &[ExternalSequenceBlockHash],
        nodes: [&Node<G>; 2],
    ) -> usize {
        let ids = nodes.map(|n| self.id_of(n));
        let names = |hash| {
            self.directory
                .get(hash)
                .is_some_and(|id| ids.contains(&Some(id)))
        };
        1 + hashes[1..].iter().take_while(|&&hash| names(hash)).count()
    }
}
