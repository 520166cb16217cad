//! `Indexer`: lane threads in front of a shared tree.
//!
//! Protocol. Each lane is an OS thread that owns one [`Lane`] (its reverse
//! lookups) and applies events from its FIFO channel. Every rank is routed to
//! one lane, chosen round-robin the first time the rank is seen and kept for
//! the indexer's lifetime, so one rank's events apply in order while lanes
//! change shared nodes concurrently (the threads and the routing are
//! `lanes`). Reads (`find_matches`, `dump_events`) run
//! inline on the caller's thread. `flush` sends a marker down every lane and
//! waits for each to answer, so everything enqueued before it has been
//! applied. Rank removal first flushes every lane (the targets' events
//! enqueued before it are applied, then removed with them), then unmaps the
//! targets' slots, then has every lane drop what it cached of them (and waits for all of them), then sweeps and
//! releases the slots on the caller's thread (or waits for a concurrent
//! removal that unmapped them); the order is what keeps an event racing the
//! removal from leaving a released slot in a lane (`tree::ranks`).
//!
//! Reclamation. A lane folds its tally into the tree's estimates when it
//! grew large, and always before it blocks on an empty queue, on a flush and
//! before a sweep. Every enqueue asks the tree whether a stale-leaf sweep is
//! due by volume (two atomic loads in the common case, no clock); the caller
//! that wins the one-in-flight flag sends a sweep task to the lane it
//! enqueued on, or gives the claim back if the lane is gone. A lane about to
//! block on an empty queue also checks the timer and runs a due sweep itself.

use crate::lanes::LaneThreads;
use crate::tree::{
    EventOutcome, Lane, LaneCounters, RankRemoval, RankTarget, SweepClaim, SweepStats, Tree,
    TreeConfig,
};
use crate::types::{
    ExternalSequenceBlockHash, IndexerError, KvError, LocalBlockHash, MatchDetails, OverlapScores,
    RouterEvent, WorkerId, WorkerWithDpRank,
};
use crtc_strategies::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use crtc_strategies::sync::Arc;
use crtc_strategies::{mutant, RwLockGate, ShapeGate};

/// An anchor registration for one rank.
struct AnchorTask {
    rank: WorkerWithDpRank,
    id: ExternalSequenceBlockHash,
    local: LocalBlockHash,
    depth: u32,
    ack: Sender<Result<(), KvError>>,
}

enum Task {
    Event(RouterEvent),
    EventWithAck(RouterEvent, Sender<Result<EventOutcome, KvError>>),
    Anchor(AnchorTask),
    Flush(Sender<()>),
    DropRanks(Arc<RankRemoval>, Sender<()>),
    Sweep(SweepClaim),
    /// Blocks the lane until the sender sends or goes (tests: a lane held
    /// between a removal's steps).
    #[cfg(test)]
    Hold(Receiver<()>),
}

/// Indexer settings.
#[derive(Clone, Debug)]
pub struct IndexerConfig {
    /// Number of lane threads (at least 1).
    pub lanes: usize,
    /// Settings of the shared tree.
    pub tree: TreeConfig,
}

impl Default for IndexerConfig {
    fn default() -> Self {
        Self {
            lanes: 2,
            tree: TreeConfig::default(),
        }
    }
}

/// Lane threads applying events to one shared tree.
pub struct Indexer<G: ShapeGate = RwLockGate> {
    // First, so dropping the indexer joins the lanes before its hold on the
    // tree goes: the tree is freed on the caller's thread.
    lanes: LaneThreads<Task>,
    counters: Vec<Arc<LaneCounters>>,
    tree: Arc<Tree<G>>,
    /// Tests: a lane to hold (until the receiver's sender goes) right after
    /// the next removal's unmap, before its lanes drop the ranks.
    #[cfg(test)]
    hold_after_unmap: crtc_strategies::sync::Mutex<Option<(usize, Receiver<()>)>>,
}

fn run_lane<G: ShapeGate>(tree: Arc<Tree<G>>, mut lane: Lane<G>, tasks: Receiver<Task>) {
    loop {
        let task = match tasks.try_recv() {
            Ok(task) => task,
            Err(TryRecvError::Empty) => {
                tree.fold_tally(&mut lane, true);
                if let Some(claim) = tree.sweep_due() {
                    tree.run_sweep(claim);
                }
                match tasks.recv() {
                    Ok(task) => task,
                    Err(_) => return,
                }
            }
            Err(TryRecvError::Disconnected) => return,
        };
        run_task(&tree, &mut lane, task);
    }
}

fn run_task<G: ShapeGate>(tree: &Tree<G>, lane: &mut Lane<G>, task: Task) {
    match task {
        Task::Event(event) => {
            let _ = tree.apply_event(lane, &event);
        }
        Task::EventWithAck(event, ack) => {
            let _ = ack.send(tree.apply_event(lane, &event));
        }
        Task::Anchor(a) => {
            let _ = a
                .ack
                .send(tree.apply_anchor(lane, a.rank, a.id, a.local, a.depth));
        }
        Task::Flush(ack) => {
            tree.fold_tally(lane, true);
            let _ = ack.send(());
        }
        Task::DropRanks(removal, ack) => {
            tree.drop_removed(lane, &removal);
            lane.counters().removal_drops.add(1);
            let _ = ack.send(());
        }
        Task::Sweep(claim) => {
            tree.fold_tally(lane, true);
            tree.run_sweep(claim);
        }
        #[cfg(test)]
        Task::Hold(release) => {
            let _ = release.recv();
        }
    }
}

impl<G: ShapeGate> Indexer<G> {
    /// Starts `config.lanes` lane threads over a new tree.
    pub fn new(config: IndexerConfig) -> Self {
        let tree = Arc::new(Tree::new(config.tree));
        let mut counters = Vec::new();
        let lanes = LaneThreads::spawn(config.lanes, "crtc-lane-", |_| {
            let lane = tree.new_lane();
            counters.push(Arc::clone(lane.counters()));
            let shared = Arc::clone(&tree);
            move |tasks| run_lane(shared, lane, tasks)
        });
        Self {
            lanes,
            counters,
            tree,
            #[cfg(test)]
            hold_after_unmap: crtc_strategies::sync::Mutex::new(None),
        }
    }

    /// The shared tree.
    pub fn tree(&self) -> &Arc<Tree<G>> {
        &self.tree
    }

    /// Counters of every lane.
    pub fn lane_counters(&self) -> Vec<Arc<LaneCounters>> {
        self.counters.clone()
    }

    fn lane_of(&self, rank: WorkerWithDpRank) -> usize {
        self.lanes.lane_of(rank)
    }

    /// Enqueues `task` on `lane`, then schedules a stale-leaf sweep there if
    /// one is due.
    fn enqueue(&self, lane: usize, task: Task) -> Result<(), IndexerError> {
        self.lanes
            .send(lane, task)
            .map_err(|_| IndexerError::Closed)?;
        if let Some(claim) = self.tree.sweep_due_by_volume() {
            if let Err(Task::Sweep(claim)) = self.lanes.send(lane, Task::Sweep(claim)) {
                self.tree.cancel_sweep(claim);
            }
        }
        Ok(())
    }

    /// Enqueues `event` on its rank's lane.
    pub fn apply_event(&self, event: RouterEvent) -> Result<(), IndexerError> {
        self.enqueue(self.lane_of(event.rank()), Task::Event(event))
    }

    /// Applies `event` on its rank's lane and waits for the result.
    pub fn apply_event_acked(&self, event: RouterEvent) -> Result<EventOutcome, IndexerError> {
        let (ack, result) = channel();
        self.enqueue(self.lane_of(event.rank()), Task::EventWithAck(event, ack))?;
        Ok(result.recv().map_err(|_| IndexerError::Closed)??)
    }

    /// Registers `rank` on the anchor `id` (see [`Tree::apply_anchor`]) on
    /// the rank's lane and waits for the result.
    pub fn apply_anchor(
        &self,
        rank: WorkerWithDpRank,
        id: ExternalSequenceBlockHash,
        local: LocalBlockHash,
        depth: u32,
    ) -> Result<(), IndexerError> {
        let (ack, result) = channel();
        let task = AnchorTask {
            rank,
            id,
            local,
            depth,
            ack,
        };
        self.enqueue(self.lane_of(rank), Task::Anchor(task))?;
        Ok(result.recv().map_err(|_| IndexerError::Closed)??)
    }

    /// Scores against `suffix` after the anchor `id` (caller's thread).
    pub fn find_matches_from_anchor(
        &self,
        id: ExternalSequenceBlockHash,
        suffix: &[LocalBlockHash],
    ) -> OverlapScores {
        self.tree.find_matches_from_anchor(id, suffix)
    }

    /// Flushes every lane (folding their tallies), then sweeps stale leaves
    /// on the caller's thread; `None` if a sweep is already in flight.
    pub fn sweep_stale(&self) -> Option<SweepStats> {
        self.flush();
        self.tree.sweep_stale()
    }

    /// Waits until every event enqueued before the call has been applied.
    pub fn flush(&self) {
        self.lanes.broadcast(Task::Flush);
    }

    /// Scores every rank against `query` (runs on the caller's thread).
    pub fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        self.tree.find_matches(query, false)
    }

    /// Scores plus last matched hashes.
    pub fn find_match_details(&self, query: &[LocalBlockHash]) -> MatchDetails {
        self.tree.find_match_details(query, false)
    }

    /// The tree as `Stored` events, after every lane drained what was queued.
    pub fn dump_events(&self) -> Vec<RouterEvent> {
        self.flush();
        self.tree.dump_events()
    }

    /// Removes every rank of `worker_id`.
    pub fn remove_worker(&self, worker_id: WorkerId) {
        self.remove_ranks(RankTarget::Worker(worker_id));
    }

    /// Removes one rank.
    pub fn remove_worker_dp_rank(&self, rank: WorkerWithDpRank) {
        self.remove_ranks(RankTarget::Rank(rank));
    }

    /// Removes the ranks `target` matches: every lane first applies what
    /// was enqueued before the call (a flush), then `Tree::begin_removal`,
    /// every lane drops the ranks, `Tree::finish_removal`. So the ranks'
    /// events enqueued before the call are removed with them; an event
    /// racing the call applies wholly before the removal or wholly after
    /// it, as a new rank (crate docs, "Events racing a removal").
    pub fn remove_ranks(&self, target: RankTarget) {
        if !mutant!(RemovalWithoutFlush) {
            self.flush();
        }
        self.tree.remove_ranks_with(target, |removal| {
            #[cfg(test)]
            if let Some((lane, held)) = self.hold_after_unmap.lock().take() {
                let _ = self.lanes.send(lane, Task::Hold(held));
            }
            self.lanes
                .broadcast(|ack| Task::DropRanks(Arc::clone(removal), ack));
        });
    }
}

#[cfg(test)]
mod tests;
