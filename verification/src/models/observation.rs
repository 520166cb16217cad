//! What the models observe and hold a tree to: a quiescent tree's final
//! state ([`Observation`]), scenarios with the set of their serial outcomes
//! ([`Scenario`]), and the bounds on a score read while events apply
//! concurrently ([`ReadBounds`], and [`HeldCeilings`] where one writer's
//! progress is known).

use super::events::{apply_ok, model_config, query};
use crate::chain::chain_hash;
use crate::property::Property;
use crate::reference::Reference;
use crtc::types::{
    ExternalSequenceBlockHash, KvCacheEventData, LocalBlockHash, OverlapScores, RouterEvent,
    WorkerWithDpRank,
};
use crtc::{Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;
use rustc_hash::FxHashSet;

/// The scores of one query: the query's raw locals and the scores sorted by
/// rank.
pub type QueryScores = (Vec<u64>, Vec<(WorkerWithDpRank, u32)>);

/// Everything the serial-equivalence checks compare about a quiescent tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Per query (raw locals), the scores sorted by rank.
    pub scores: Vec<QueryScores>,
    /// `dump_events` with event ids zeroed, as sorted debug strings.
    pub dump: Vec<String>,
    /// `node_count`.
    pub nodes: usize,
}

/// Observes `tree`: scores of every query, the sorted dump and the node count.
pub fn observe<G: ShapeGate>(tree: &Tree<G>, queries: &[Vec<u64>]) -> Observation {
    let scores = queries
        .iter()
        .map(|q| (q.clone(), tree.find_matches(&query(q), false).sorted()))
        .collect();
    let mut dump: Vec<String> = tree
        .dump_events()
        .into_iter()
        .map(|mut e| {
            e.event.event_id = 0;
            format!("{e:?}")
        })
        .collect();
    dump.sort_unstable();
    Observation {
        scores,
        dump,
        nodes: tree.node_count(),
    }
}

/// The checks every tree model ends with: no event was refused, and the
/// final state is one of the serial outcomes. `label` names the model in
/// the messages.
pub fn check_accepted_and_serial(
    label: &str,
    rejected: &[String],
    observed: &Observation,
    serial: &[Observation],
) {
    crate::check!(
        Property::Accepted,
        rejected.is_empty(),
        "{label}: rejected events {rejected:?}"
    );
    crate::check!(
        Property::SerialOutcome,
        serial.contains(observed),
        "{label}: the final state is no serial outcome\n  observed: {observed:#?}\n  serial outcomes: {serial:#?}"
    );
}

/// A held block: its rank, the block and the block it follows.
pub type Membership = (
    WorkerWithDpRank,
    ExternalSequenceBlockHash,
    Option<ExternalSequenceBlockHash>,
);

/// What `tree` holds, shape aside: every (rank, block, parent) its dump
/// names, sorted. Two trees built by different serial orders of the same
/// strict events may differ in node boundaries (so in node count and in how
/// the dump groups blocks into events) but hold the same blocks.
pub fn membership<G: ShapeGate>(tree: &Tree<G>) -> Vec<Membership> {
    let mut held = Vec::new();
    for event in tree.dump_events() {
        if let KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } = &event.event.data
        {
            let mut parent = *parent_hash;
            for block in blocks {
                held.push((event.rank(), block.external, parent));
                parent = Some(block.external);
            }
        }
    }
    held.sort_unstable();
    held
}

/// What the reference model holds after `events`, as [`membership`] lists
/// it.
pub fn reference_membership<'a>(
    events: impl IntoIterator<Item = &'a RouterEvent>,
) -> Vec<Membership> {
    let mut model = crate::reference::Reference::new();
    for event in events {
        model.apply(event);
    }
    let mut held: Vec<Membership> = model
        .ranks()
        .flat_map(|rank| {
            model
                .held_entries(rank)
                .into_iter()
                .map(move |(block, parent)| (rank, block, parent))
        })
        .collect();
    held.sort_unstable();
    held
}

/// Every interleaving of threads with `lens[i]` events each that keeps each
/// thread's own order, as sequences of thread indices.
pub fn interleavings(lens: &[usize]) -> Vec<Vec<usize>> {
    fn extend(left: &mut [usize], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left.iter().all(|&n| n == 0) {
            out.push(prefix.clone());
            return;
        }
        for thread in 0..left.len() {
            if left[thread] > 0 {
                left[thread] -= 1;
                prefix.push(thread);
                extend(left, prefix, out);
                prefix.pop();
                left[thread] += 1;
            }
        }
    }
    let mut out = Vec::new();
    extend(&mut lens.to_vec(), &mut Vec::new(), &mut out);
    out
}

/// A concurrent scenario: sequential setup events (each on a lane), then one
/// event list per thread (thread `i` owns lane `i`), and the queries its final
/// state is observed with.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Short name for reports.
    pub name: &'static str,
    /// `(lane, event)` applied in order before the threads start.
    pub setup: Vec<(usize, RouterEvent)>,
    /// The events of each thread, in order.
    pub threads: Vec<Vec<RouterEvent>>,
    /// Queries (raw locals) of the final-state observation.
    pub queries: Vec<Vec<u64>>,
}

impl Scenario {
    /// Bounds for reads that run while the threads' events apply.
    pub fn read_bounds(&self) -> ReadBounds {
        ReadBounds::new(
            self.setup.iter().map(|(_, e)| e),
            self.threads.iter().flatten(),
        )
    }

    /// A tree with `config` and one lane per thread, after the setup.
    pub fn prepare<G: ShapeGate>(&self, config: TreeConfig) -> (Tree<G>, Vec<Lane<G>>) {
        let tree = Tree::new(config);
        let mut lanes: Vec<Lane<G>> = self.threads.iter().map(|_| tree.new_lane()).collect();
        for (lane, event) in &self.setup {
            apply_ok(&tree, &mut lanes[*lane], event);
        }
        (tree, lanes)
    }

    /// The final state of every serial order of the threads' events (each
    /// thread's order kept) on fresh trees with the fast path off,
    /// deduplicated.
    pub fn serial_outcomes<G: ShapeGate>(&self) -> Vec<Observation> {
        let lens: Vec<usize> = self.threads.iter().map(Vec::len).collect();
        let mut outcomes: Vec<Observation> = Vec::new();
        for order in interleavings(&lens) {
            let (tree, mut lanes) = self.prepare::<G>(model_config(false));
            let mut next = vec![0; self.threads.len()];
            for thread in order {
                apply_ok(
                    &tree,
                    &mut lanes[thread],
                    &self.threads[thread][next[thread]],
                );
                next[thread] += 1;
            }
            let observed = observe(&tree, &self.queries);
            drop(lanes);
            drop(tree);
            if !outcomes.contains(&observed) {
                outcomes.push(observed);
            }
        }
        outcomes
    }
}

/// Bounds on a score read while events apply concurrently.
///
/// - ceiling (C1, loosened): the leading query blocks the rank has ever
///   stored (the setup plus every concurrent event), whatever the read
///   overlapped; [`HeldCeilings`] gives C1 itself for reads that know how far
///   the writer had got;
/// - floor: the leading query blocks the rank stored in the setup and no event
///   evicts. The shape's coverage rules order every demotion so that a reader
///   never sees a covered slot uncovered (cutoff written before the bit
///   clears), so such a prefix is credited at every instant. The floor is
///   stricter than the read contract (which bounds concurrent reads from
///   above only); it holds for the RwLock gate by that rule.
#[derive(Clone, Debug, Default)]
pub struct ReadBounds {
    ranks: Vec<RankBounds>,
}

#[derive(Clone, Debug)]
struct RankBounds {
    rank: WorkerWithDpRank,
    ever: FxHashSet<ExternalSequenceBlockHash>,
    stable: FxHashSet<ExternalSequenceBlockHash>,
}

impl ReadBounds {
    /// Bounds for reads during `concurrent`, after `setup` applied.
    pub fn new<'a>(
        setup: impl IntoIterator<Item = &'a RouterEvent>,
        concurrent: impl IntoIterator<Item = &'a RouterEvent> + Clone,
    ) -> Self {
        let mut bounds = Self::default();
        for event in setup {
            if let KvCacheEventData::Stored { blocks, .. } = &event.event.data {
                let entry = bounds.entry(event.rank());
                entry.ever.extend(blocks.iter().map(|b| b.external));
                entry.stable.extend(blocks.iter().map(|b| b.external));
            }
        }
        for event in concurrent {
            let entry = bounds.entry(event.rank());
            match &event.event.data {
                KvCacheEventData::Stored { blocks, .. } => {
                    entry.ever.extend(blocks.iter().map(|b| b.external));
                }
                KvCacheEventData::Removed { block_hashes } => {
                    block_hashes.iter().for_each(|h| {
                        entry.stable.remove(h);
                    });
                }
                KvCacheEventData::Cleared => entry.stable.clear(),
            }
        }
        bounds
    }

    fn entry(&mut self, rank: WorkerWithDpRank) -> &mut RankBounds {
        let index = match self.ranks.iter().position(|r| r.rank == rank) {
            Some(index) => index,
            None => {
                self.ranks.push(RankBounds {
                    rank,
                    ever: FxHashSet::default(),
                    stable: FxHashSet::default(),
                });
                self.ranks.len() - 1
            }
        };
        &mut self.ranks[index]
    }

    /// `(floor, ceiling)` of `rank`'s score for `query`.
    pub fn range(&self, rank: WorkerWithDpRank, query: &[LocalBlockHash]) -> (usize, usize) {
        self.ranks
            .iter()
            .find(|r| r.rank == rank)
            .map_or((0, 0), |r| {
                (
                    prefix_within(query, &r.stable),
                    prefix_within(query, &r.ever),
                )
            })
    }

    /// Checks one read: every rank scored or known lies within its bounds.
    pub fn check(&self, query: &[LocalBlockHash], scores: &OverlapScores) -> Result<(), String> {
        let mut ranks: Vec<WorkerWithDpRank> = scores.scores.keys().copied().collect();
        ranks.extend(self.ranks.iter().map(|r| r.rank));
        ranks.sort_unstable();
        ranks.dedup();
        for rank in ranks {
            let (floor, ceiling) = self.range(rank, query);
            let score = scores.score(rank) as usize;
            if score > ceiling {
                return Err(format!(
                    "C1: rank {rank} scored {score} > {ceiling} (blocks it ever stored) for {query:?}"
                ));
            }
            if score < floor {
                return Err(format!(
                    "floor: rank {rank} scored {score} < {floor} (blocks it held throughout) for {query:?}"
                ));
            }
        }
        Ok(())
    }
}

/// Number of leading blocks of the query `locals` inside `blocks`.
pub fn prefix_within(
    locals: &[LocalBlockHash],
    blocks: &FxHashSet<ExternalSequenceBlockHash>,
) -> usize {
    let mut parent = None;
    for (depth, &local) in locals.iter().enumerate() {
        let hash = chain_hash(parent, local);
        if !blocks.contains(&hash) {
            return depth;
        }
        parent = Some(hash);
    }
    locals.len()
}

/// C1 for reads racing one writer whose progress they read: the reference
/// model after the setup and each of the writer's first `k` steps, for
/// every `k` (a step without an event, `None`, leaves the state as it was).
/// A read that began after the writer had completed `from` steps and ended
/// before it began step `to + 1` saw the tree between the states after
/// `from` and `to + 1` steps (step `to` may have been in flight, and a store
/// in flight shows at most its blocks, a removal in flight at most the
/// blocks before it): its score for a rank the writer's steps alone change
/// is at most the largest held prefix among those states.
#[derive(Clone, Debug)]
pub struct HeldCeilings {
    /// `states[k]`: the reference model after the setup and `k` steps.
    states: Vec<Reference>,
}

impl HeldCeilings {
    /// The reference model after `setup` and each prefix of the writer's
    /// `steps`.
    pub fn new<'a>(
        setup: impl IntoIterator<Item = &'a RouterEvent>,
        steps: impl IntoIterator<Item = Option<&'a RouterEvent>>,
    ) -> Self {
        let mut model = Reference::new();
        for event in setup {
            model.apply(event);
        }
        let mut states = vec![model.clone()];
        for event in steps {
            if let Some(event) = event {
                model.apply(event);
            }
            states.push(model.clone());
        }
        Self { states }
    }

    /// The writer's steps ([`HeldCeilings::new`]'s `steps`).
    pub fn steps(&self) -> usize {
        self.states.len() - 1
    }

    /// The largest held prefix of `query` for `rank` after `k` steps, `k` in
    /// `from..=to + 1` (clamped to the steps there are).
    pub fn ceiling(
        &self,
        rank: WorkerWithDpRank,
        query: &[LocalBlockHash],
        (from, to): (usize, usize),
    ) -> usize {
        let last = (to + 1).min(self.steps());
        self.states[from.min(last)..=last]
            .iter()
            .map(|state| state.held_prefix(rank, query))
            .max()
            .unwrap_or(0)
    }

    /// Checks one read of `query` that began after `from` steps and ended
    /// before step `to + 1`: no rank that `ranks` accepts scores above its
    /// [`ceiling`](Self::ceiling).
    pub fn check(
        &self,
        query: &[LocalBlockHash],
        scores: &OverlapScores,
        (from, to): (usize, usize),
        ranks: impl Fn(WorkerWithDpRank) -> bool,
    ) -> Result<(), String> {
        for (&rank, &score) in scores.scores.iter().filter(|(r, _)| ranks(**r)) {
            let ceiling = self.ceiling(rank, query, (from, to));
            if score as usize > ceiling {
                return Err(format!(
                    "C1: rank {rank} scored {score} > {ceiling} (the most it held while its \
                     writer went from {from} to {} steps) for {query:?}",
                    (to + 1).min(self.steps())
                ));
            }
        }
        Ok(())
    }
}

/// [`HeldCeilings`] for reads racing several writers: one per writer, and
/// for each rank the writer whose steps alone name it (a rank no writer or
/// several writers name keeps [`ReadBounds`]' looser ceiling only). The
/// reference model's state of a rank depends on that rank's events alone,
/// so its owner's progress bounds it whatever the other writers did.
#[derive(Clone, Debug)]
pub struct WriterCeilings {
    writers: Vec<HeldCeilings>,
    owners: Vec<(WorkerWithDpRank, usize)>,
}

impl WriterCeilings {
    /// The ceilings of `writers`' steps (each as [`HeldCeilings::new`]
    /// takes them) after `setup`.
    pub fn new(setup: &[RouterEvent], writers: &[Vec<Option<RouterEvent>>]) -> Self {
        let mut named: Vec<(WorkerWithDpRank, usize)> = writers
            .iter()
            .enumerate()
            .flat_map(|(w, steps)| steps.iter().flatten().map(move |e| (e.rank(), w)))
            .collect();
        named.sort_unstable();
        named.dedup();
        let owners = named
            .iter()
            .filter(|(rank, _)| named.iter().filter(|(r, _)| r == rank).count() == 1)
            .copied()
            .collect();
        let writers = writers
            .iter()
            .map(|steps| HeldCeilings::new(setup, steps.iter().map(Option::as_ref)))
            .collect();
        Self { writers, owners }
    }

    /// How many ranks one writer's steps alone name (checked against that
    /// writer's progress).
    pub fn owned(&self) -> usize {
        self.owners.len()
    }

    /// Checks one read of `query` that began when writer `w` had completed
    /// `from[w]` steps and ended before it began step `to[w] + 1`.
    pub fn check(
        &self,
        query: &[LocalBlockHash],
        scores: &OverlapScores,
        from: &[usize],
        to: &[usize],
    ) -> Result<(), String> {
        self.writers
            .iter()
            .enumerate()
            .try_for_each(|(w, ceilings)| {
                let owned = |rank| self.owners.contains(&(rank, w));
                ceilings.check(query, scores, (from[w], to[w]), owned)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::events::{rank, remove, store};

    /// Rank 1 holds `[1, 2]`, then stores 3 and 4 and removes 4 and 3: a read
    /// is capped by what the rank held while it ran, not by all it stored.
    #[test]
    fn ceilings_follow_the_writer() {
        let setup = [store(1, &[], &[1, 2])];
        let events = [
            store(1, &[1, 2], &[3]),
            store(1, &[1, 2, 3], &[4]),
            remove(1, &[1, 2, 3], &[4]),
            remove(1, &[1, 2], &[3]),
        ];
        let q = query(&[1, 2, 3, 4]);
        let ceilings = HeldCeilings::new(&setup, events.iter().map(Some));
        let r = rank(1);
        assert_eq!(ceilings.steps(), 4);
        // Before the first store completed, step 0 possibly in flight.
        assert_eq!(ceilings.ceiling(r, &q, (0, 0)), 3);
        assert_eq!(ceilings.ceiling(r, &q, (0, 1)), 4);
        // After both removals: back to the setup's two blocks.
        assert_eq!(ceilings.ceiling(r, &q, (4, 4)), 2);
        assert_eq!(ceilings.ceiling(r, &q, (3, 3)), 3);
        // The loose bound credits every block ever stored.
        assert_eq!(ReadBounds::new(&setup, &events).range(r, &q).1, 4);
        let mut scores = OverlapScores::default();
        scores.scores.insert(r, 3);
        assert!(ceilings.check(&q, &scores, (0, 0), |_| true).is_ok());
        assert!(ceilings.check(&q, &scores, (4, 4), |_| true).is_err());
        assert!(ceilings.check(&q, &scores, (4, 4), |_| false).is_ok());
    }

    /// A rank two writers name is left to the loose bound; a rank one
    /// writer names follows that writer's progress only.
    #[test]
    fn writer_ceilings_follow_each_ranks_owner() {
        let setup = [store(1, &[], &[1]), store(2, &[], &[1])];
        let writers = vec![
            vec![Some(store(1, &[1], &[2])), None, Some(store(2, &[1], &[2]))],
            vec![Some(store(2, &[1], &[3]))],
        ];
        let ceilings = WriterCeilings::new(&setup, &writers);
        let q = query(&[1, 2]);
        let mut scores = OverlapScores::default();
        scores.scores.insert(rank(1), 2);
        scores.scores.insert(rank(2), 2);
        // Rank 1 (writer 0's alone) is capped at 1 before writer 0's first
        // step; rank 2 (both writers') is not checked here.
        assert!(ceilings.check(&q, &scores, &[0, 1], &[0, 1]).is_ok());
        let early = WriterCeilings::new(&setup, &[vec![None, Some(store(1, &[1], &[2]))]]);
        assert!(early.check(&q, &scores, &[0], &[0]).is_err());
    }
}
