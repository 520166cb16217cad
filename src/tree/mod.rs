//! The compressed concurrent radix tree, generic over its node strategy.
//!
//! Protocol overview (the details open each submodule):
//!
//! * Every non-root node owns a compressed edge; children are keyed by the
//!   first local hash of their edge. Coverage per node is a full bitset of
//!   rank slots plus cutoffs. The shape lives behind the node's [`ShapeGate`].
//! * Writers are lanes: each rank's events run on one lane, in order, while
//!   lanes change shared nodes concurrently. Every write is *plan then
//!   commit*: a plan carries the version it was made under and its commit
//!   validates it, re-planning when the shape changed.
//! * Readers pin the reclaimer once per walk, take no reference counts, and
//!   see one consistent view per node.
//! * Ranks own dense slots; removing a rank unmaps, sweeps and releases its
//!   slot so a reader never credits a recycled slot to its old owner
//!   (`remove`, `slots`). Holder-less leaves are unlinked by a sweep
//!   (`sweep`) scheduled by volume and by a timer (`scheduler`). Anchors are fixed
//!   one-block nodes outside the root's subtree (`anchor`).
//!
//! See `store`, `remove`, `matches`, `dump`, `scheduler`, `sweep` and
//! `anchor` for each operation. The crate root exports the API; the
//! workspace's checkers, benches and tests reach the rest through
//! `crate::harness`.

mod anchor;
mod children;
mod counters;
mod directory;
mod dump;
mod key_filter;
mod lane;
mod maintenance;
mod matches;
mod node;
mod rank_slots;
mod ranks;
mod remove;
mod repair;
mod scheduler;
mod slots;
mod stats;
mod store;
mod sweep;

pub use counters::{Counter, LaneCounters, Refusal};
pub use lane::{Lane, Tally};
pub use ranks::{RankRemoval, RankTarget};
pub use scheduler::{SweepClaim, SweepPolicy, SweepReason, SweepTrigger, FOLD_THRESHOLD};
pub use slots::{CachedSlot, SlotRegistry, SlotTable};
pub use store::StoreOutcome;
pub use sweep::SweepStats;

use crate::types::{
    KvCacheEventData, KvError, LocalBlockHash, RouterEvent, WorkerId, WorkerWithDpRank,
};
use crtc_strategies::sync::Arc;
pub(crate) use crtc_strategies::Guard;
use crtc_strategies::{Reclaim, RwLockGate, ShapeGate, ShapeRead, Slot};
use node::Node;
use std::time::Instant;

/// Tree settings.
#[derive(Clone, Debug)]
pub struct TreeConfig {
    /// Try the decode tail-append fast path before the general path.
    pub fast_path: bool,
    /// Most rank slots the tree issues (at most 65,536; see `slots` for why).
    pub slot_capacity: usize,
    /// When stale-leaf sweeps are scheduled.
    pub sweep: SweepPolicy,
}

impl Default for TreeConfig {
    fn default() -> Self {
        Self {
            fast_path: true,
            slot_capacity: crtc_strategies::MAX_SLOTS,
            sweep: SweepPolicy::default(),
        }
    }
}

/// What applying one event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventOutcome {
    /// A store was applied.
    Stored(StoreOutcome),
    /// A removal was applied (unknown blocks are skipped, not errors).
    Removed,
    /// A clear was applied.
    Cleared,
}

/// One node as seen by `Tree::topology` (diagnostics and tests, through
/// `crate::harness`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Index of the parent in the returned list (`None` under the root).
    pub parent: Option<usize>,
    /// The key the parent's child map holds the node under.
    pub key: LocalBlockHash,
    /// Blocks above the node's edge.
    pub depth: usize,
    /// The edge.
    pub edge: Vec<crate::types::BlockPair>,
    /// Ranks covering the whole edge.
    pub full: Vec<WorkerWithDpRank>,
    /// Ranks covering a prefix, with their cutoffs.
    pub cutoffs: Vec<(WorkerWithDpRank, u32)>,
    /// Whether the node is internal (sticky).
    pub internal: bool,
    /// Number of children.
    pub children: usize,
}

/// A node [`Tree::topology`] has yet to list: its parent's index, its depth,
/// the key its parent holds it under, and the node.
type Unlisted<G> = (Option<usize>, usize, LocalBlockHash, Arc<Node<G>>);

/// The tree. `G` is the node synchronization strategy.
pub struct Tree<G: ShapeGate = RwLockGate> {
    root: Arc<Node<G>>,
    /// The root's child keys, counted (`key_filter`).
    pub(crate) root_keys: key_filter::KeyFilter,
    anchors: anchor::Anchors<G>,
    slots: SlotRegistry<G::Reclaim>,
    trigger: SweepTrigger,
    created: Instant,
    config: TreeConfig,
}

impl<G: ShapeGate> Drop for Tree<G> {
    fn drop(&mut self) {
        G::Reclaim::collect();
    }
}

impl<G: ShapeGate> Default for Tree<G> {
    fn default() -> Self {
        Self::new(TreeConfig::default())
    }
}

impl<G: ShapeGate> Tree<G> {
    /// An empty tree.
    pub fn new(config: TreeConfig) -> Self {
        Self {
            root: Arc::new(Node::root()),
            root_keys: key_filter::KeyFilter::default(),
            anchors: anchor::Anchors::default(),
            slots: SlotRegistry::new(config.slot_capacity),
            trigger: SweepTrigger::new(config.sweep.clone()),
            created: Instant::now(),
            config,
        }
    }

    /// The settings the tree was built with.
    pub fn config(&self) -> &TreeConfig {
        &self.config
    }

    /// A fresh lane (lookups and counters) for applying events to this tree
    /// (a lane belongs to the tree that made it).
    pub fn new_lane(&self) -> Lane<G> {
        Lane::default()
    }

    /// The slot `rank` writes with, through the lane's cached copy (see
    /// `slots`); registers the rank on the lane once it has one.
    fn join_rank(
        &self,
        lane: &mut Lane<G>,
        rank: WorkerWithDpRank,
        guard: &Guard<G>,
    ) -> Result<Slot, KvError> {
        let cached = lane.cached_slot(rank);
        let current = self.slots.acquire(rank, guard, cached)?;
        if cached != Some(current) {
            lane.remember_slot(rank, current);
        }
        Ok(current.slot())
    }

    /// Applies one event on `lane`. One rank's events must always use the
    /// same lane, in order. The lane's reclamation tally is folded into the
    /// tree when it grew large.
    pub fn apply_event(
        &self,
        lane: &mut Lane<G>,
        event: &RouterEvent,
    ) -> Result<EventOutcome, KvError> {
        let rank = event.rank();
        let result = match &event.event.data {
            KvCacheEventData::Stored {
                parent_hash,
                blocks,
            } => self
                .apply_stored(lane, rank, *parent_hash, blocks)
                .map(|outcome| {
                    let counters = lane.counters();
                    counters.stores.add(1);
                    counters.duplicate_stores.add(outcome.duplicate as u64);
                    EventOutcome::Stored(outcome)
                }),
            KvCacheEventData::Removed { block_hashes } => {
                self.apply_removed(lane, rank, block_hashes).map(|()| {
                    lane.counters().removals.add(1);
                    EventOutcome::Removed
                })
            }
            KvCacheEventData::Cleared => {
                self.apply_cleared(lane, rank);
                lane.counters().clears.add(1);
                Ok(EventOutcome::Cleared)
            }
        };
        if let Err(error) = &result {
            lane.counters().refuse(error);
        }
        self.fold_tally(lane, false);
        result
    }

    /// Removes every rank of `worker_id` (see `ranks`: unmap, each of
    /// `lanes` drops the ranks, then sweep and release). Returns once no
    /// slot of the worker is pending, also when a concurrent removal won
    /// the unmap. Pass every lane the worker's ranks may be routed to. The
    /// caller must not be pinned.
    pub fn remove_worker(&self, lanes: &mut [&mut Lane<G>], worker_id: WorkerId) {
        self.remove_ranks(lanes, RankTarget::Worker(worker_id));
    }

    /// Removes one rank, like [`Tree::remove_worker`].
    pub fn remove_worker_dp_rank(&self, lanes: &mut [&mut Lane<G>], rank: WorkerWithDpRank) {
        self.remove_ranks(lanes, RankTarget::Rank(rank));
    }

    /// Number of rank slots issued so far (released ones included).
    pub fn slots_issued(&self) -> usize {
        self.slots.issued()
    }

    /// The slot `rank` currently writes with (diagnostics and tests).
    pub(crate) fn slot_of(&self, rank: WorkerWithDpRank) -> Option<u16> {
        self.slots.table(&G::Reclaim::pin()).slot(rank).map(|s| s.0)
    }

    /// Whether a slot of `rank` is unmapped but not yet released.
    pub(crate) fn is_release_pending(&self, rank: WorkerWithDpRank) -> bool {
        self.slots.is_pending(|r| r == rank)
    }

    /// Number of reachable nodes: the root's subtree and every anchor with
    /// its subtree (the root excluded).
    pub fn node_count(&self) -> usize {
        let mut count = 0;
        self.visit(|_, _| count += 1);
        count
    }

    /// Approximate bytes held by the reachable nodes: each node, its shape
    /// and its child map.
    pub fn footprint(&self) -> usize {
        let mut bytes = 0;
        self.visit(|node, guard| {
            bytes += std::mem::size_of::<Node<G>>()
                + node.gate.footprint()
                + node.children.footprint(guard)
        });
        bytes
    }

    /// Number of (node, rank) coverage records: one per full bit or cutoff.
    pub fn membership_count(&self) -> usize {
        let mut count = 0;
        self.visit(|node, _| {
            node.gate.read(|s| {
                let full: usize = (0..s.full_word_count())
                    .map(|i| s.full_word(i).count_ones() as usize)
                    .sum();
                let mut cut = 0;
                s.for_each_cutoff(|_, _| cut += 1);
                count += full + cut;
            })
        });
        count
    }

    /// Every node of the root's subtree (the root excluded; anchors and
    /// their subtrees are not listed), parents before children, for
    /// diagnostics and tests.
    pub(crate) fn topology(&self) -> Vec<NodeInfo> {
        let guard = G::Reclaim::pin();
        let table = self.slots.table(&guard);
        let mut nodes = Vec::new();
        let roots = self.root.children.snapshot(&guard).into_iter();
        let mut stack: Vec<Unlisted<G>> = roots.map(|(key, c)| (None, 0, key, c)).collect();
        while let Some((parent, depth, key, node)) = stack.pop() {
            let mut info = node.gate.read(|s| {
                let mut edge = Vec::new();
                s.copy_pairs(0..s.len(), &mut edge);
                let full = s
                    .full_slots()
                    .into_iter()
                    .filter_map(|slot| table.owner(slot))
                    .collect();
                let mut cutoffs = Vec::new();
                s.for_each_cutoff(|slot, k| cutoffs.extend(table.owner(slot).map(|r| (r, k))));
                NodeInfo {
                    parent,
                    key,
                    depth,
                    edge,
                    full,
                    cutoffs,
                    internal: s.is_internal(),
                    children: 0,
                }
            });
            let children = node.children.snapshot(&guard);
            info.children = children.len();
            let below = depth + info.edge.len();
            stack.extend(
                children
                    .into_iter()
                    .map(|(key, c)| (Some(nodes.len()), below, key, c)),
            );
            nodes.push(info);
        }
        nodes
    }

    /// Visits every reachable node: the root's subtree and every anchor with
    /// its subtree (the root excluded).
    fn visit(&self, mut f: impl FnMut(&Node<G>, &Guard<G>)) {
        let guard = G::Reclaim::pin();
        let mut stack: Vec<Arc<Node<G>>> = self.anchor_nodes(&guard);
        stack.extend(
            self.root
                .children
                .snapshot(&guard)
                .into_iter()
                .map(|(_, c)| c),
        );
        while let Some(node) = stack.pop() {
            f(&node, &guard);
            stack.extend(node.children.snapshot(&guard).into_iter().map(|(_, c)| c));
        }
    }
}
