//! The global-lock baseline: what a user would write first. One [`Mutex`]
//! around a plain, *uncompressed* radix tree, behind the real indexer's lane
//! threads and routing (`crtc::harness::LaneThreads`).
//!
//! Structure. One node per block, keyed under its parent by local hash; per
//! node the ranks holding that block (with a count of the rank's external
//! hashes that name the node, normally 1). A reverse map per rank,
//! `external -> node`, finds a block for a store's parent and for a removal.
//!
//! - A store resolves its parent through the rank's reverse map (the root when
//!   `None`; an unknown parent is [`KvError::ParentBlockNotFound`]) and walks
//!   or creates one child per block, adding the rank to each.
//! - A removal drops the rank from each named block's node; unknown blocks are
//!   skipped, a rank never seen is [`KvError::BlockNotFound`].
//! - `Cleared` drops the rank from every node it holds; worker removal does
//!   the same for every rank of the worker and forgets them.
//! - A node left with no holder and no child is unlinked, then its parent is
//!   checked the same way, so memory follows the live memberships.
//! - `find_matches` walks the query from the root, intersecting the active
//!   rank set with every node's holders; a rank dropped at depth `d` scores
//!   `d`. Because a node is a whole path, a rank scores exactly its held
//!   prefix (never more, and no undercount even past holes).

use crate::compare::measurement::measure::ThreadCpu;
use crate::compare::subjects::backend::{Backend, BackendStats};
use crtc::harness::LaneThreads;
use crtc::types::{
    ExternalSequenceBlockHash, KvCacheEventData, KvError, LocalBlockHash, OverlapScores,
    RouterEvent, WorkerId, WorkerWithDpRank,
};
use crtc::Refusal;
use crtc_strategies::sync::atomic::{AtomicU64, Ordering};
use crtc_strategies::sync::mpsc::{Receiver, Sender};
use crtc_strategies::sync::{Arc, Mutex};
use rustc_hash::FxHashMap;

const ROOT: u32 = 0;

#[derive(Default)]
struct Node {
    parent: u32,
    local: LocalBlockHash,
    /// Ranks holding the block, sorted, each with its number of names.
    holders: Vec<(WorkerWithDpRank, u32)>,
    children: FxHashMap<LocalBlockHash, u32>,
}

/// An uncompressed radix tree with per-node holder sets (single-threaded;
/// [`GlobalLockIndexer`] puts it behind one lock).
pub struct BaselineTree {
    nodes: Vec<Node>,
    free: Vec<u32>,
    lookup: FxHashMap<WorkerWithDpRank, FxHashMap<ExternalSequenceBlockHash, u32>>,
}

impl Default for BaselineTree {
    fn default() -> Self {
        Self {
            nodes: vec![Node::default()],
            free: Vec::new(),
            lookup: FxHashMap::default(),
        }
    }
}

impl BaselineTree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one event.
    pub fn apply_event(&mut self, event: &RouterEvent) -> Result<(), KvError> {
        let rank = event.rank();
        match &event.event.data {
            KvCacheEventData::Stored {
                parent_hash,
                blocks,
            } => {
                if blocks.is_empty() {
                    return Err(KvError::EmptyStore { rank });
                }
                let mut cursor = match parent_hash {
                    None => ROOT,
                    Some(parent) => self.resolve(rank, *parent)?,
                };
                for block in blocks {
                    cursor = self.child(cursor, block.local);
                    self.hold(rank, block.external, cursor);
                }
                Ok(())
            }
            KvCacheEventData::Removed { block_hashes } => {
                let Some(map) = self.lookup.get_mut(&rank) else {
                    return Err(KvError::BlockNotFound { rank });
                };
                let nodes: Vec<u32> = block_hashes.iter().filter_map(|h| map.remove(h)).collect();
                nodes.into_iter().for_each(|node| self.release(node, rank));
                Ok(())
            }
            KvCacheEventData::Cleared => {
                self.drop_rank(rank);
                self.lookup.insert(rank, FxHashMap::default());
                Ok(())
            }
        }
    }

    /// Drops every rank of `worker` and forgets them.
    pub fn remove_worker(&mut self, worker: WorkerId) {
        let ranks: Vec<_> = self
            .lookup
            .keys()
            .filter(|r| r.worker_id == worker)
            .copied()
            .collect();
        ranks.into_iter().for_each(|rank| self.drop_rank(rank));
    }

    fn resolve(
        &self,
        rank: WorkerWithDpRank,
        parent: ExternalSequenceBlockHash,
    ) -> Result<u32, KvError> {
        self.lookup
            .get(&rank)
            .and_then(|map| map.get(&parent))
            .copied()
            .ok_or(KvError::ParentBlockNotFound { rank, parent })
    }

    /// The child of `node` keyed by `local`, created when missing.
    fn child(&mut self, node: u32, local: LocalBlockHash) -> u32 {
        if let Some(&child) = self.nodes[node as usize].children.get(&local) {
            return child;
        }
        let fresh = Node {
            parent: node,
            local,
            ..Node::default()
        };
        let child = match self.free.pop() {
            Some(index) => {
                self.nodes[index as usize] = fresh;
                index
            }
            None => {
                self.nodes.push(fresh);
                self.nodes.len() as u32 - 1
            }
        };
        self.nodes[node as usize].children.insert(local, child);
        child
    }

    fn hold(&mut self, rank: WorkerWithDpRank, external: ExternalSequenceBlockHash, node: u32) {
        let previous = self.lookup.entry(rank).or_default().insert(external, node);
        if previous == Some(node) {
            return;
        }
        let holders = &mut self.nodes[node as usize].holders;
        match holders.binary_search_by_key(&rank, |h| h.0) {
            Ok(i) => holders[i].1 += 1,
            Err(i) => holders.insert(i, (rank, 1)),
        }
        // Released after `node` gained a holder, so pruning stops above it.
        if let Some(old) = previous {
            self.release(old, rank);
        }
    }

    /// Drops one name of `rank` from `node`, then prunes.
    fn release(&mut self, node: u32, rank: WorkerWithDpRank) {
        let holders = &mut self.nodes[node as usize].holders;
        if let Ok(i) = holders.binary_search_by_key(&rank, |h| h.0) {
            holders[i].1 -= 1;
            if holders[i].1 == 0 {
                holders.remove(i);
            }
        }
        self.prune(node);
    }

    /// Unlinks `node` and then its ancestors while they hold nothing.
    fn prune(&mut self, mut node: u32) {
        while node != ROOT {
            let n = &self.nodes[node as usize];
            if !n.holders.is_empty() || !n.children.is_empty() {
                return;
            }
            let (parent, local) = (n.parent, n.local);
            self.nodes[parent as usize].children.remove(&local);
            self.nodes[node as usize] = Node::default();
            self.free.push(node);
            node = parent;
        }
    }

    fn drop_rank(&mut self, rank: WorkerWithDpRank) {
        let Some(map) = self.lookup.remove(&rank) else {
            return;
        };
        map.into_values().for_each(|node| self.release(node, rank));
    }

    fn holds(&self, node: u32, rank: WorkerWithDpRank) -> bool {
        self.nodes[node as usize]
            .holders
            .binary_search_by_key(&rank, |h| h.0)
            .is_ok()
    }

    /// Scores every rank against `query`.
    pub fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        let mut scores = OverlapScores::default();
        let Some(&first) = query
            .first()
            .and_then(|l| self.nodes[ROOT as usize].children.get(l))
        else {
            return scores;
        };
        let mut active: Vec<WorkerWithDpRank> = self.nodes[first as usize]
            .holders
            .iter()
            .map(|h| h.0)
            .collect();
        let (mut node, mut depth) = (first, 1u32);
        for local in &query[1..] {
            let Some(&child) = self.nodes[node as usize].children.get(local) else {
                break;
            };
            active.retain(|&rank| {
                let keep = self.holds(child, rank);
                if !keep {
                    scores.scores.insert(rank, depth);
                }
                keep
            });
            if active.is_empty() {
                break;
            }
            (node, depth) = (child, depth + 1);
        }
        scores
            .scores
            .extend(active.into_iter().map(|rank| (rank, depth)));
        scores.scores.retain(|_, s| *s > 0);
        scores
    }

    /// Nodes, the root excluded.
    pub fn node_count(&self) -> usize {
        self.nodes.len() - 1 - self.free.len()
    }

    /// (node, rank) holder records.
    pub fn membership_count(&self) -> usize {
        self.nodes.iter().map(|n| n.holders.len()).sum()
    }

    /// Approximate bytes held by the live nodes (the reverse maps excluded,
    /// as the crtc footprint excludes lane lookups).
    pub fn footprint(&self) -> usize {
        let entry = std::mem::size_of::<(LocalBlockHash, u32)>() + 1;
        let holder = std::mem::size_of::<(WorkerWithDpRank, u32)>();
        let live = self.nodes.len() - self.free.len();
        live * std::mem::size_of::<Node>()
            + self
                .nodes
                .iter()
                .map(|n| n.holders.capacity() * holder + n.children.capacity() * entry)
                .sum::<usize>()
    }
}

enum Task {
    Event(RouterEvent),
    Flush(Sender<()>),
}

struct LaneCount {
    applied: AtomicU64,
    stores: AtomicU64,
    errors: AtomicU64,
    refusals: [AtomicU64; Refusal::ALL.len()],
}

/// Lane threads in front of one [`Mutex`]-guarded [`BaselineTree`]: the
/// real indexer's lanes, so ranks are routed to lanes as there.
pub struct GlobalLockIndexer {
    lanes: LaneThreads<Task>,
    counts: Vec<Arc<LaneCount>>,
    tree: Arc<Mutex<BaselineTree>>,
    cpu: ThreadCpu,
}

/// Name prefix of the baseline's lane threads.
const LANE_THREAD_PREFIX: &str = "crtc-glock-";

fn bump(counter: &AtomicU64) {
    // Relaxed: statistics only; one writer per counter.
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

fn run_lane(tree: Arc<Mutex<BaselineTree>>, tasks: Receiver<Task>, count: Arc<LaneCount>) {
    while let Ok(task) = tasks.recv() {
        match task {
            Task::Event(event) => {
                let result = tree.lock().apply_event(&event);
                match result {
                    Ok(()) if matches!(event.event.data, KvCacheEventData::Stored { .. }) => {
                        bump(&count.stores)
                    }
                    Ok(()) => {}
                    Err(error) => {
                        bump(&count.errors);
                        bump(&count.refusals[Refusal::of(&error).index()]);
                    }
                }
                bump(&count.applied);
            }
            Task::Flush(ack) => {
                let _ = ack.send(());
            }
        }
    }
}

impl GlobalLockIndexer {
    /// Starts `lanes` lane threads over an empty tree.
    pub fn new(lanes: usize) -> Self {
        let cpu = ThreadCpu::start();
        let tree = Arc::new(Mutex::new(BaselineTree::new()));
        let mut counts = Vec::new();
        let lanes = LaneThreads::spawn(lanes, LANE_THREAD_PREFIX, |_| {
            let count = Arc::new(LaneCount {
                applied: AtomicU64::new(0),
                stores: AtomicU64::new(0),
                errors: AtomicU64::new(0),
                refusals: Refusal::ALL.map(|_| AtomicU64::new(0)),
            });
            counts.push(Arc::clone(&count));
            let shared = Arc::clone(&tree);
            move |tasks| run_lane(shared, tasks, count)
        });
        Self {
            lanes,
            counts,
            tree,
            cpu,
        }
    }

    fn sum(&self, f: impl Fn(&LaneCount) -> &AtomicU64) -> u64 {
        // Relaxed: statistics only.
        self.counts
            .iter()
            .map(|c| f(c).load(Ordering::Relaxed))
            .sum()
    }
}

impl Backend for GlobalLockIndexer {
    fn apply(&self, event: RouterEvent) {
        let _ = self
            .lanes
            .send(self.lanes.lane_of(event.rank()), Task::Event(event));
    }

    fn remove_worker(&self, worker: WorkerId) {
        self.flush();
        self.tree.lock().remove_worker(worker);
    }

    fn flush(&self) {
        self.lanes.broadcast(Task::Flush);
    }

    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        self.tree.lock().find_matches(query)
    }

    fn applied(&self) -> u64 {
        self.sum(|c| &c.applied)
    }

    fn stats(&self) -> BackendStats {
        let (cpu_ns, cpu_clock) = self.cpu.read(LANE_THREAD_PREFIX);
        let tree = self.tree.lock();
        BackendStats {
            applied: self.applied(),
            stores: self.sum(|c| &c.stores),
            errors: self.sum(|c| &c.errors),
            refusals: Refusal::ALL.map(|r| self.sum(|c| &c.refusals[r.index()])),
            fast_path_hits: None,
            fast_path_misses: Default::default(),
            cpu_ns,
            cpu_clock,
            footprint: Some(tree.footprint()),
            memberships: Some(tree.membership_count()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crtc_verification::chain::{locals, removed_at as remove, stored_after as store};
    use crtc_verification::reference::{Classification, Reference};

    const A: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
    const B: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);
    const C: WorkerWithDpRank = WorkerWithDpRank::new(2, 1);

    /// Applies `events` to the baseline and the reference, then checks that
    /// every query scores exactly the held prefix.
    fn agree(events: &[RouterEvent], queries: &[&[u64]]) -> BaselineTree {
        let (mut tree, mut model) = (BaselineTree::new(), Reference::new());
        for event in events {
            let accepted = tree.apply_event(event).is_ok();
            model.apply_outcome(event, accepted);
        }
        for query in queries {
            let query = locals(query);
            let scores = tree.find_matches(&query);
            let wrong = model.check(&query, &scores);
            assert!(
                wrong.iter().all(|d| d.class != Classification::Overcount),
                "{wrong:?}"
            );
            assert!(wrong.is_empty(), "query {query:?}: {wrong:?}");
        }
        tree
    }

    #[test]
    fn shared_prefixes_and_branches_score_the_held_prefix() {
        let events = [
            store(A, &[], &[1, 2, 3, 4]),
            store(B, &[], &[1, 2]),
            store(B, &[1, 2], &[5, 6]),
            store(C, &[], &[1, 2, 3]),
            store(A, &[1, 2, 3, 4], &[7]),
        ];
        let tree = agree(
            &events,
            &[
                &[1, 2, 3, 4, 7],
                &[1, 2, 5, 6, 9],
                &[1, 2, 3],
                &[9],
                &[],
                &[1],
            ],
        );
        let scores = tree.find_matches(&locals(&[1, 2, 3, 4, 7]));
        assert_eq!(scores.sorted(), vec![(A, 5), (B, 2), (C, 3)]);
        assert_eq!(tree.node_count(), 7);
        assert_eq!(tree.membership_count(), 5 + 4 + 3);
    }

    #[test]
    fn removals_clears_and_worker_removal_prune_nodes() {
        let events = [
            store(A, &[], &[1, 2, 3]),
            store(B, &[], &[1, 2, 3]),
            remove(A, &[1, 2, 3], &[2, 1]),
            store(C, &[], &[8, 9]),
            RouterEvent::cleared(C),
            store(C, &[], &[8]),
        ];
        let mut tree = agree(&events, &[&[1, 2, 3], &[8, 9], &[1]]);
        assert_eq!(tree.node_count(), 4);
        tree.remove_worker(2);
        assert_eq!(tree.node_count(), 1);
        assert_eq!(tree.find_matches(&locals(&[1, 2])).sorted(), vec![(A, 1)]);
        tree.apply_event(&remove(A, &[1], &[0])).unwrap();
        assert_eq!((tree.node_count(), tree.membership_count()), (0, 0));
    }

    #[test]
    fn holes_and_bad_events_match_the_model() {
        let events = [
            store(A, &[], &[1, 2, 3, 4]),
            remove(A, &[1, 2, 3, 4], &[1]),
            store(A, &[1], &[2]),
            store(B, &[7], &[8]),
            remove(B, &[1], &[0]),
            RouterEvent::stored(C, None, Vec::new()),
        ];
        agree(&events, &[&[1, 2, 3, 4], &[1, 2], &[7, 8]]);
        let mut tree = BaselineTree::new();
        assert!(matches!(
            tree.apply_event(&events[3]),
            Err(KvError::ParentBlockNotFound { .. })
        ));
        assert!(matches!(
            tree.apply_event(&events[4]),
            Err(KvError::BlockNotFound { .. })
        ));
        assert!(matches!(
            tree.apply_event(&events[5]),
            Err(KvError::EmptyStore { .. })
        ));
    }

    #[test]
    fn random_strict_streams_match_the_reference() {
        let workload = crtc_verification::workload::preset("chat", 3, 0.02).unwrap();
        let (mut tree, mut model) = (BaselineTree::new(), Reference::new());
        for op in &workload.ops {
            match op {
                crtc_verification::workload::WorkloadOp::Event(event) => {
                    let accepted = tree.apply_event(event).is_ok();
                    model.apply_outcome(event, accepted);
                }
                crtc_verification::workload::WorkloadOp::RemoveWorker(w) => {
                    tree.remove_worker(*w);
                    model.remove_worker(*w);
                }
                crtc_verification::workload::WorkloadOp::Query(query) => {
                    assert!(model.check(query, &tree.find_matches(query)).is_empty());
                }
            }
        }
    }

    #[test]
    fn the_locked_indexer_drains_and_counts() {
        let indexer = GlobalLockIndexer::new(2);
        indexer.apply(store(A, &[], &[1, 2, 3]));
        indexer.apply(store(B, &[], &[1, 2]));
        indexer.apply(store(B, &[5], &[6]));
        indexer.flush();
        assert_eq!(
            indexer.find_matches(&locals(&[1, 2, 3])).sorted(),
            vec![(A, 3), (B, 2)]
        );
        let stats = indexer.stats();
        assert_eq!((stats.applied, stats.stores, stats.errors), (3, 2, 1));
        indexer.remove_worker(1);
        assert_eq!(
            indexer.find_matches(&locals(&[1, 2, 3])).sorted(),
            vec![(B, 2)]
        );
    }
}
