//! Hooks for this workspace's model checkers, benchmarks and tests. **Not
//! API**: nothing here is covered by the crate's versioning, and a router
//! needs none of it (the crate root exports everything a router uses).
//!
//! What it opens up, and who uses it:
//!
//! - the rank-slot registry a lane caches from ([`SlotRegistry`],
//!   [`CachedSlot`], [`SlotTable`]): the loom slot model;
//! - sweep scheduling ([`SweepTrigger`], [`SweepClaim`], [`SweepReason`],
//!   [`FOLD_THRESHOLD`], and [`TreeHooks`]: folding a lane's tally, claiming,
//!   cancelling and running a sweep): the sweep model, soaks and benchmarks
//!   that schedule sweeps on their own threads instead of an indexer's lanes;
//! - the tree's shape and slot lookups ([`TreeHooks::topology`],
//!   [`NodeInfo`], [`TreeHooks::slot_of`], [`TreeHooks::is_release_pending`],
//!   [`TreeHooks::root_key_counted`]);
//! - a lane's lookups and reclamation tally ([`LaneHooks`], [`Tally`]);
//! - the indexer's lane threads and sticky routing ([`LaneThreads`]): the
//!   global-lock baseline of the benchmarks runs behind them.
//!
//! Import the traits (`use crtc::harness::{LaneHooks, TreeHooks};`) to call
//! the hooks as methods.

use crate::types::{LocalBlockHash, WorkerWithDpRank};
use crate::{Lane, SweepStats, Tree};
use crtc_strategies::ShapeGate;

pub use crate::lanes::LaneThreads;
pub use crate::tree::{
    CachedSlot, NodeInfo, SlotRegistry, SlotTable, SweepClaim, SweepReason, SweepTrigger, Tally,
    FOLD_THRESHOLD,
};

/// The tree's scheduling, shape and slot hooks (see the module doc).
pub trait TreeHooks<G: ShapeGate> {
    /// Folds `lane`'s tally into the shared estimates if a delta reached
    /// [`FOLD_THRESHOLD`], or whenever it is non-zero with `force`.
    fn fold_tally(&self, lane: &mut Lane<G>, force: bool);
    /// The shared reclamation estimates `(linked, dead)` in blocks.
    fn reclaim_estimates(&self) -> (u64, u64);
    /// The trigger (estimates, one-in-flight flag and duty-cycle record).
    fn sweep_trigger(&self) -> &SweepTrigger;
    /// Claims a sweep if one is due (volume or timer) and none is in flight.
    fn sweep_due(&self) -> Option<SweepClaim>;
    /// Claims a sweep if one is due by volume; reads no clock unless the
    /// volume rule holds.
    fn sweep_due_by_volume(&self) -> Option<SweepClaim>;
    /// Gives a claim back without sweeping.
    fn cancel_sweep(&self, claim: SweepClaim);
    /// Runs the sweep `claim` was granted for, then frees the flag.
    fn run_sweep(&self, claim: SweepClaim) -> SweepStats;
    /// Every node of the root's subtree (anchors excluded), parents before
    /// children.
    fn topology(&self) -> Vec<NodeInfo>;
    /// The slot `rank` currently writes with.
    fn slot_of(&self, rank: WorkerWithDpRank) -> Option<u16>;
    /// Whether a slot of `rank` is unmapped but not yet released.
    fn is_release_pending(&self, rank: WorkerWithDpRank) -> bool;
    /// Whether the root's key counts may hold `key` (false: a lookup
    /// starting with `key` returns no scores unwalked).
    fn root_key_counted(&self, key: LocalBlockHash) -> bool;
}

impl<G: ShapeGate> TreeHooks<G> for Tree<G> {
    fn fold_tally(&self, lane: &mut Lane<G>, force: bool) {
        Tree::fold_tally(self, lane, force)
    }
    fn reclaim_estimates(&self) -> (u64, u64) {
        Tree::reclaim_estimates(self)
    }
    fn sweep_trigger(&self) -> &SweepTrigger {
        Tree::sweep_trigger(self)
    }
    fn sweep_due(&self) -> Option<SweepClaim> {
        Tree::sweep_due(self)
    }
    fn sweep_due_by_volume(&self) -> Option<SweepClaim> {
        Tree::sweep_due_by_volume(self)
    }
    fn cancel_sweep(&self, claim: SweepClaim) {
        Tree::cancel_sweep(self, claim)
    }
    fn run_sweep(&self, claim: SweepClaim) -> SweepStats {
        Tree::run_sweep(self, claim)
    }
    fn topology(&self) -> Vec<NodeInfo> {
        Tree::topology(self)
    }
    fn slot_of(&self, rank: WorkerWithDpRank) -> Option<u16> {
        Tree::slot_of(self, rank)
    }
    fn is_release_pending(&self, rank: WorkerWithDpRank) -> bool {
        Tree::is_release_pending(self, rank)
    }
    fn root_key_counted(&self, key: LocalBlockHash) -> bool {
        self.root_keys.may_hold(key)
    }
}

/// A lane's lookup and tally hooks (see the module doc).
pub trait LaneHooks {
    /// Whether `rank` was registered on this lane.
    fn has_rank(&self, rank: WorkerWithDpRank) -> bool;
    /// Number of lookup entries of `rank`.
    fn entry_count(&self, rank: WorkerWithDpRank) -> usize;
    /// Number of distinct nodes the lane's entries hold.
    fn held_nodes(&self) -> usize;
    /// The reclamation deltas not yet folded into the tree.
    fn tally(&self) -> Tally;
}

impl<G: ShapeGate> LaneHooks for Lane<G> {
    fn has_rank(&self, rank: WorkerWithDpRank) -> bool {
        Lane::has_rank(self, rank)
    }
    fn entry_count(&self, rank: WorkerWithDpRank) -> usize {
        Lane::entry_count(self, rank)
    }
    fn held_nodes(&self) -> usize {
        Lane::held_nodes(self)
    }
    fn tally(&self) -> Tally {
        Lane::tally(self)
    }
}
