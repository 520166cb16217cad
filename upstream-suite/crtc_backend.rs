//! crtc's `Tree<G>` as a `SyncIndexer` backend of dynamo-kv-router 1.6.1,
//! for every crtc gate.
//!
//! This module is ours, and it is compiled in two places from this one
//! file:
//!
//! - in `crtc-bench` (feature `upstream`, as
//!   `compare::subjects::crtc_backend`), against the registry crate's public
//!   API: `SyncIndexer`, `WorkerTask` and the protocol types are public, so
//!   `crtc compare` runs every gate inside upstream's `ThreadPoolIndexer`;
//! - in the test-time copy of dynamo-kv-router 1.6.1 that
//!   `.ci/upstream-suite.sh` builds (as `crate::indexer::crtc_backend`), where
//!   `upstream-suite/patch.py` sets the cfg `crtc_upstream_copy`. Only there
//!   can it name the crate-private parts upstream's suite needs: the
//!   approximate-LRU lane (`ApproximateLruLane`, the task's fields) and the
//!   `KvIndexerDelegate` bookkeeping (`HashLifecycle`). Outside the copy an
//!   `ApproximateLru` task is dropped with a warning (its requester sees the
//!   request dropped) and no delegate can be attached.
//!
//! Shape. `ThreadPoolIndexer` starts N threads and calls
//! [`SyncIndexer::worker`] on each; each call builds one [`Lane`] (its
//! directory and counters) and applies the thread's tasks to the shared
//! tree. Reads (`find_matches`, anchors, dumps) run on the caller's thread
//! straight on the tree. The pool routes each rank to one sticky thread, so
//! only that thread's lane ever holds entries of the rank; each lane keeps
//! the set of ranks it applied events for.
//!
//! Worker removal. The pool removes a worker in two steps: a
//! `RemoveWorker { sweep_tree: false }` on every thread (it waits for every
//! thread's answer), then a `RemoveWorker { sweep_tree: true }` on thread 0.
//! Each thread removes the worker's ranks it owns, one rank at a time,
//! through crtc's three steps: `Tree::begin_removal` (unmap: the
//! linearization point), `Tree::drop_removed` on its own lane, then
//! `Tree::finish_removal` (sweep and release). crtc asks every lane to drop
//! a removal; here only the owning lane can hold the rank (its events reach
//! no other), so dropping there is complete. The second step finds nothing
//! left. A rank removal goes to the rank's sticky thread only and is handled
//! the same way.
//!
//! Why not one shared removal (the first thread to see the task begins
//! `RankTarget::Worker`, each thread drops, the second step finishes): the
//! first thread's unmap can come before events another thread still has
//! queued for its rank of the worker; that thread then applies them to the
//! rank come back on a fresh slot, where they survive the removal. 1.6.1
//! applies them and then erases them, and its test
//! `whole_worker_remove_barriers_every_rank_lane_before_returning` checks
//! that nothing of them is left; with the shared removal it failed on every
//! gate (tried at this module's first version on main's removal API). Removing on the owning thread, in
//! its queue's order, keeps that order. The price is one unmap, sweep and
//! release per rank rather than per worker, and a worker's ranks vanish from
//! reads one at a time.
//!
//! Sweeps. `try_schedule_cleanup` (called by the pool on every enqueue) wins
//! the tree's one in-flight sweep when one is due by volume, and the thread
//! that receives `CleanupStaleChildren` runs it; a thread about to block on
//! an empty queue folds its tally and runs a sweep due by volume or timer
//! (`Tree::lane_idle`).

#[cfg(not(crtc_upstream_copy))]
use crtc_strategies::sync::Arc;
#[cfg(crtc_upstream_copy)]
use std::sync::Arc;

use flume::TryRecvError;
#[cfg(crtc_upstream_copy)]
use rustc_hash::FxHashMap;
use rustc_hash::FxHashSet;

#[cfg(not(crtc_upstream_copy))]
use dynamo_kv_router::indexer::{
    AnchorCapableSyncIndexer, AnchorRef, AnchorTask, EventKind, EventWarningKind, KvIndexerMetrics,
    KvRouterError, PreBoundEventCounters, SyncIndexer, WorkerLookupStats, WorkerTask,
};
#[cfg(not(crtc_upstream_copy))]
use dynamo_kv_router::protocols::{
    ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheEventError,
    KvCacheRemoveData, KvCacheStoreData, KvCacheStoredBlockData, LocalBlockHash, OverlapScores,
    RouterEvent, WorkerWithDpRank,
};

#[cfg(crtc_upstream_copy)]
use super::{
    AnchorCapableSyncIndexer, AnchorRef, AnchorTask, ApproximateLruApplyOutput, ApproximateLruLane,
    ApproximateLruTask, EventKind, EventWarningKind, HashLifecycle, KvIndexerDelegate,
    KvIndexerMetrics, KvRouterError, PreBoundEventCounters, SyncIndexer, WorkerLookupStats,
    WorkerTask,
};
#[cfg(crtc_upstream_copy)]
use crate::protocols::{
    ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheEventError,
    KvCacheRemoveData, KvCacheStoreData, KvCacheStoredBlockData, LocalBlockHash, OverlapScores,
    RouterEvent, WorkerWithDpRank,
};
use crtc::types as ct;
use crtc::{EventOutcome, Lane, RankTarget, ShapeGate, Tree, TreeConfig};

/// crtc's tree behind upstream's `SyncIndexer` interface.
pub struct CrtcBackend<G: ShapeGate> {
    tree: Tree<G>,
    /// First-owner / last-owner notifications of a `KvIndexerDelegate`
    /// (disabled unless built with one).
    #[cfg(crtc_upstream_copy)]
    lifecycle: HashLifecycle,
}

impl<G: ShapeGate> Default for CrtcBackend<G> {
    fn default() -> Self {
        Self::new()
    }
}

impl<G: ShapeGate> CrtcBackend<G> {
    /// A backend over a new tree with crtc's default settings.
    pub fn new() -> Self {
        Self::with_config(TreeConfig::default())
    }

    /// A backend over a new tree with `config`.
    pub fn with_config(config: TreeConfig) -> Self {
        Self {
            tree: Tree::new(config),
            #[cfg(crtc_upstream_copy)]
            lifecycle: HashLifecycle::default(),
        }
    }

    /// A backend that tells `delegate` when a block gains its first owning
    /// rank and loses its last one.
    #[cfg(crtc_upstream_copy)]
    pub fn new_with_delegate(delegate: Arc<dyn KvIndexerDelegate>) -> Self {
        Self {
            lifecycle: HashLifecycle::new(delegate),
            ..Self::new()
        }
    }

    /// The shared tree.
    pub fn tree(&self) -> &Tree<G> {
        &self.tree
    }
}

/// One pool thread's state.
struct LaneState<G: ShapeGate> {
    lane: Lane<G>,
    ranks: FxHashSet<WorkerWithDpRank>,
    counters: Option<PreBoundEventCounters>,
    #[cfg(crtc_upstream_copy)]
    lru: ApproximateLruLane,
    /// With a delegate: the blocks each rank of the lane was last seen
    /// holding, so a removal can tell which ones it took.
    #[cfg(crtc_upstream_copy)]
    owned: FxHashMap<WorkerWithDpRank, FxHashSet<ExternalSequenceBlockHash>>,
}

// ----------------------------------------------------------------------------
// Conversions between upstream's protocol types and crtc's
// ----------------------------------------------------------------------------

fn rank_to_crtc(rank: WorkerWithDpRank) -> ct::WorkerWithDpRank {
    ct::WorkerWithDpRank::new(rank.worker_id, rank.dp_rank)
}

fn rank_from_crtc(rank: ct::WorkerWithDpRank) -> WorkerWithDpRank {
    WorkerWithDpRank::new(rank.worker_id, rank.dp_rank)
}

fn external(hash: ExternalSequenceBlockHash) -> ct::ExternalSequenceBlockHash {
    ct::ExternalSequenceBlockHash(hash.0)
}

fn local(hash: LocalBlockHash) -> ct::LocalBlockHash {
    ct::LocalBlockHash(hash.0)
}

fn event_to_crtc(event: &RouterEvent) -> ct::RouterEvent {
    let rank = ct::WorkerWithDpRank::new(event.worker_id, event.event.dp_rank);
    let mut ours = match &event.event.data {
        KvCacheEventData::Stored(store) => ct::RouterEvent::stored(
            rank,
            store.parent_hash.map(external),
            store
                .blocks
                .iter()
                .map(|b| ct::BlockPair {
                    local: local(b.tokens_hash),
                    external: external(b.block_hash),
                })
                .collect(),
        ),
        KvCacheEventData::Removed(remove) => ct::RouterEvent::removed(
            rank,
            remove.block_hashes.iter().copied().map(external).collect(),
        ),
        KvCacheEventData::Cleared => ct::RouterEvent::cleared(rank),
    };
    ours.event.event_id = event.event.event_id;
    ours
}

fn event_from_crtc(event: &ct::RouterEvent) -> RouterEvent {
    let data = match &event.event.data {
        ct::KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } => KvCacheEventData::Stored(KvCacheStoreData {
            parent_hash: parent_hash.map(|p| ExternalSequenceBlockHash(p.0)),
            start_position: None,
            blocks: blocks
                .iter()
                .map(|b| KvCacheStoredBlockData {
                    block_hash: ExternalSequenceBlockHash(b.external.0),
                    tokens_hash: LocalBlockHash(b.local.0),
                    mm_extra_info: None,
                })
                .collect(),
        }),
        ct::KvCacheEventData::Removed { block_hashes } => {
            KvCacheEventData::Removed(KvCacheRemoveData {
                block_hashes: block_hashes
                    .iter()
                    .map(|h| ExternalSequenceBlockHash(h.0))
                    .collect(),
            })
        }
        ct::KvCacheEventData::Cleared => KvCacheEventData::Cleared,
    };
    RouterEvent::new(
        event.worker_id,
        KvCacheEvent {
            event_id: event.event.event_id,
            data,
            dp_rank: event.event.dp_rank,
        },
    )
}

fn error_from_crtc(error: &ct::KvError) -> KvCacheEventError {
    match error {
        ct::KvError::ParentBlockNotFound { .. } => KvCacheEventError::ParentBlockNotFound,
        ct::KvError::BlockNotFound { .. } => KvCacheEventError::BlockNotFound,
        ct::KvError::CapacityExhausted { .. } => KvCacheEventError::CapacityExhausted,
        _ => KvCacheEventError::InvalidBlockSequence,
    }
}

fn scores_from_crtc(scores: ct::OverlapScores) -> OverlapScores {
    let mut out = OverlapScores::new();
    for (rank, score) in scores.scores {
        out.scores.insert(rank_from_crtc(rank), score);
    }
    out
}

// ----------------------------------------------------------------------------
// The worker thread
// ----------------------------------------------------------------------------

impl<G: ShapeGate> CrtcBackend<G> {
    /// Applies one event on the thread's lane, counting it (and a store that
    /// changed nothing as a duplicate-store warning) like upstream's CRTC.
    fn apply(&self, state: &mut LaneState<G>, event: RouterEvent) -> Result<(), KvCacheEventError> {
        let kind = EventKind::of(&event.event.data);
        let ours = event_to_crtc(&event);
        state
            .ranks
            .insert(WorkerWithDpRank::new(event.worker_id, event.event.dp_rank));
        let result = self.tree.apply_event(&mut state.lane, &ours);
        #[cfg(crtc_upstream_copy)]
        if self.lifecycle.is_enabled() {
            self.track_owners(state, ours.rank(), &ours.event.data, result.is_ok());
        }
        let duplicate = matches!(result, Ok(EventOutcome::Stored(outcome)) if outcome.duplicate);
        let result = result.map(|_| ()).map_err(|e| error_from_crtc(&e));
        if let Some(counters) = &state.counters {
            if duplicate {
                counters.inc_warning(EventWarningKind::DuplicateStore);
            }
            counters.inc(kind, result);
        }
        if let Err(error) = &result {
            tracing::warn!("Failed to apply event: {error:?}");
        }
        result
    }

    /// Runs one approximate-LRU command: its synthetic events on this lane,
    /// then its TTL bookkeeping.
    #[cfg(crtc_upstream_copy)]
    fn run_lru(&self, state: &mut LaneState<G>, task: ApproximateLruTask) {
        state.lru.observe_task(&task);
        let ApproximateLruTask {
            command,
            response,
            fallback_prune_manager,
            ..
        } = task;
        let result = state.lru.apply(command).and_then(|output| {
            let ApproximateLruApplyOutput {
                events,
                reply,
                ttl_update,
            } = output;
            for event in events {
                self.apply(state, event)
                    .map_err(|_| KvRouterError::IndexerDroppedRequest)?;
            }
            if let Some(update) = ttl_update {
                let manager = fallback_prune_manager.as_ref().ok_or_else(|| {
                    KvRouterError::Unsupported("TTL fallback needs a prune manager".to_string())
                })?;
                update.apply(manager);
            }
            Ok(reply)
        });
        if let Some(response) = response {
            let _ = response.send(result);
        }
    }

    /// Removes the ranks this lane owns that `target` selects.
    fn remove_owned(&self, state: &mut LaneState<G>, target: impl Fn(WorkerWithDpRank) -> bool) {
        let owned: Vec<_> = state.ranks.iter().copied().filter(|&r| target(r)).collect();
        for rank in owned {
            state.ranks.remove(&rank);
            // Only this lane holds the rank (module docs): it alone drops it
            // between the unmap and the release.
            let removal = self
                .tree
                .begin_removal(RankTarget::Rank(rank_to_crtc(rank)));
            self.tree.drop_removed(&mut state.lane, &removal);
            self.tree.finish_removal(&removal);
            #[cfg(crtc_upstream_copy)]
            self.release_owned(state, rank, |_| true);
        }
    }

    /// With a delegate: notes what one event on `rank` changed. A store
    /// that applied adds its blocks; a removal releases the blocks the rank
    /// no longer holds (asked of the tree, so blocks a removal uncovered
    /// below the removed one go too); a clear releases them all.
    #[cfg(crtc_upstream_copy)]
    fn track_owners(
        &self,
        state: &mut LaneState<G>,
        rank: ct::WorkerWithDpRank,
        data: &ct::KvCacheEventData,
        applied: bool,
    ) {
        let rank = rank_from_crtc(rank);
        match data {
            ct::KvCacheEventData::Stored { blocks, .. } if applied => {
                let owned = state.owned.entry(rank).or_default();
                for block in blocks {
                    let hash = ExternalSequenceBlockHash(block.external.0);
                    if owned.insert(hash) {
                        self.lifecycle.insert(rank, hash);
                    }
                }
            }
            ct::KvCacheEventData::Stored { .. } => {}
            ct::KvCacheEventData::Removed { .. } => {
                let (tree, lane) = (&self.tree, &state.lane);
                let gone = |h: ExternalSequenceBlockHash| {
                    !tree.rank_holds_block(lane, rank_to_crtc(rank), external(h))
                };
                let gone: Vec<_> = state
                    .owned
                    .get(&rank)
                    .map(|owned| owned.iter().copied().filter(|&h| gone(h)).collect())
                    .unwrap_or_default();
                self.release_owned(state, rank, |h| gone.contains(&h));
            }
            ct::KvCacheEventData::Cleared => self.release_owned(state, rank, |_| true),
        }
    }

    /// Releases the blocks of `rank` that `which` selects.
    #[cfg(crtc_upstream_copy)]
    fn release_owned(
        &self,
        state: &mut LaneState<G>,
        rank: WorkerWithDpRank,
        which: impl Fn(ExternalSequenceBlockHash) -> bool,
    ) {
        let Some(owned) = state.owned.get_mut(&rank) else {
            return;
        };
        owned.retain(|&hash| {
            let release = which(hash);
            if release {
                self.lifecycle.remove(rank, hash);
            }
            !release
        });
        if owned.is_empty() {
            state.owned.remove(&rank);
        }
    }

    /// The thread's per-rank block counts (the ranks it owns).
    fn lane_stats(&self, state: &LaneState<G>) -> WorkerLookupStats {
        let counts = self.tree.rank_block_counts();
        WorkerLookupStats::from_worker_block_counts(state.ranks.iter().map(|&rank| {
            let blocks = counts.get(&rank_to_crtc(rank)).copied().unwrap_or(0);
            (rank, blocks)
        }))
    }

    /// Joins `worker` on an anchor, on the thread's lane.
    fn anchor(&self, state: &mut LaneState<G>, worker: WorkerWithDpRank, anchor: AnchorTask) {
        state.ranks.insert(worker);
        let id = external(anchor.anchor_id);
        let head = local(anchor.anchor_local_hash);
        let depth = u32::try_from(anchor.anchor_depth).unwrap_or(u32::MAX);
        let rank = rank_to_crtc(worker);
        if let Err(error) = self
            .tree
            .apply_anchor(&mut state.lane, rank, id, head, depth)
        {
            tracing::warn!(?error, "Failed to apply anchor");
        }
    }

    /// Whether `worker`, a rank of this thread, holds `block`.
    fn holds(
        &self,
        state: &LaneState<G>,
        worker: WorkerWithDpRank,
        block: ExternalSequenceBlockHash,
    ) -> bool {
        state.ranks.contains(&worker)
            && self
                .tree
                .rank_holds_block(&state.lane, rank_to_crtc(worker), external(block))
    }

    /// Runs one task; `false` on `Terminate`.
    // The `bench` feature is upstream's: it exists only in the test-time copy.
    #[allow(unexpected_cfgs)]
    fn run_task(&self, state: &mut LaneState<G>, task: WorkerTask) -> bool {
        match task {
            WorkerTask::Event(event) => {
                let _ = self.apply(state, event);
            }
            WorkerTask::EventWithAck { event, resp } => {
                let _ = resp.send(self.apply(state, event).is_ok());
            }
            #[cfg(crtc_upstream_copy)]
            WorkerTask::ApproximateLru(task) => self.run_lru(state, task),
            #[cfg(not(crtc_upstream_copy))]
            WorkerTask::ApproximateLru(_) => {
                tracing::warn!("crtc backend: approximate-LRU tasks need the test-time copy");
            }
            WorkerTask::Anchor { worker, anchor } => self.anchor(state, worker, anchor),
            WorkerTask::RemoveWorker {
                worker_id, resp, ..
            } => {
                #[cfg(crtc_upstream_copy)]
                state.lru.forget_worker(worker_id);
                self.remove_owned(state, |rank| rank.worker_id == worker_id);
                let _ = resp.send(());
            }
            WorkerTask::RemoveWorkerDpRank {
                worker_id, dp_rank, ..
            } => {
                let target = WorkerWithDpRank::new(worker_id, dp_rank);
                #[cfg(crtc_upstream_copy)]
                state.lru.forget_rank(target);
                self.remove_owned(state, |rank| rank == target);
            }
            WorkerTask::CleanupStaleChildren => self.run_cleanup_task(),
            WorkerTask::DumpEvents(resp) => {
                // The tree is shared: the pool dumps it through
                // `SyncIndexer::dump_events` once every thread answered.
                let _ = resp.send(Ok(Vec::new()));
            }
            WorkerTask::Stats(resp) => {
                let _ = resp.send(self.lane_stats(state));
            }
            WorkerTask::ContainsWorkerBlock {
                worker,
                block_hash,
                resp,
            } => {
                let _ = resp.send(self.holds(state, worker, block_hash));
            }
            WorkerTask::Flush(resp) => {
                let _ = resp.send(());
            }
            WorkerTask::Terminate => return false,
            #[cfg(feature = "bench")]
            _ => tracing::warn!("crtc backend: observation tasks are not supported"),
        }
        true
    }
}

impl<G: ShapeGate> SyncIndexer for CrtcBackend<G> {
    fn worker(
        &self,
        event_receiver: flume::Receiver<WorkerTask>,
        metrics: Option<Arc<KvIndexerMetrics>>,
    ) -> anyhow::Result<()> {
        let mut state = LaneState {
            lane: self.tree.new_lane(),
            ranks: FxHashSet::default(),
            counters: metrics.as_ref().map(|m| m.prebind()),
            #[cfg(crtc_upstream_copy)]
            lru: ApproximateLruLane::default(),
            #[cfg(crtc_upstream_copy)]
            owned: FxHashMap::default(),
        };
        loop {
            let task = match event_receiver.try_recv() {
                Ok(task) => task,
                Err(TryRecvError::Empty) => {
                    self.tree.lane_idle(&mut state.lane);
                    match event_receiver.recv() {
                        Ok(task) => task,
                        Err(_) => break,
                    }
                }
                Err(TryRecvError::Disconnected) => break,
            };
            if !self.run_task(&mut state, task) {
                break;
            }
        }
        Ok(())
    }

    fn find_matches(&self, sequence: &[LocalBlockHash], early_exit: bool) -> OverlapScores {
        let query: Vec<_> = sequence.iter().copied().map(local).collect();
        scores_from_crtc(self.tree.find_matches(&query, early_exit))
    }

    /// Anchors join a rank on the rank's lane, so they are applied by the
    /// worker thread (`WorkerTask::Anchor`), never through this method.
    fn apply_anchor(
        &self,
        _worker: WorkerWithDpRank,
        _anchor: AnchorTask,
    ) -> Result<(), KvCacheEventError> {
        Err(KvCacheEventError::InvalidBlockSequence)
    }

    fn find_matches_from_anchor(
        &self,
        anchor: AnchorRef,
        suffix: &[LocalBlockHash],
    ) -> Result<OverlapScores, KvRouterError> {
        let suffix: Vec<_> = suffix.iter().copied().map(local).collect();
        let scores = self
            .tree
            .find_matches_from_anchor(external(anchor.anchor_id), &suffix);
        Ok(scores_from_crtc(scores))
    }

    fn try_schedule_cleanup(&self) -> bool {
        self.tree.try_schedule_sweep()
    }

    fn cancel_scheduled_cleanup(&self) {
        self.tree.cancel_scheduled_sweep();
    }

    fn run_cleanup_task(&self) {
        self.tree.run_scheduled_sweep();
    }

    fn dump_events(&self) -> Option<Vec<RouterEvent>> {
        Some(
            self.tree
                .dump_events()
                .iter()
                .map(event_from_crtc)
                .collect(),
        )
    }

    fn node_count(&self) -> usize {
        self.tree.node_count()
    }

    fn node_edge_lengths(&self) -> Vec<usize> {
        self.tree.node_edge_lengths()
    }
}

impl<G: ShapeGate> AnchorCapableSyncIndexer for CrtcBackend<G> {}

// ----------------------------------------------------------------------------
// What upstream's CRTC tests ask of the backend
// ----------------------------------------------------------------------------

#[cfg(all(test, crtc_upstream_copy))]
impl<G: ShapeGate> CrtcBackend<G> {
    /// Nodes below the root, holder-less ones included (upstream's
    /// `raw_child_edge_count`).
    pub(crate) fn raw_child_edge_count(&self) -> usize {
        self.tree.node_edge_lengths().len()
    }

    /// A forced stale-leaf sweep (upstream's `run_cleanup_for_test`).
    pub(crate) fn run_cleanup_for_test(&self) {
        let _ = self.tree.sweep_stale();
    }

    /// Edge lengths below the root, sorted (upstream's `edge_lengths_for_test`).
    pub(crate) fn edge_lengths_for_test(&self) -> Vec<usize> {
        self.tree.node_edge_lengths()
    }
}

/// The gates this copy of upstream's suite runs, by variant name.
#[cfg(all(test, crtc_upstream_copy))]
pub(crate) mod gates {
    pub type Rwlock = crtc::RwLockGate;
    pub type Seqlock = crtc::SeqlockGate;
    pub type Epoch = crtc::CrossbeamEpochGate;
    pub type Seize = crtc::SeizeEpochGate;
}
