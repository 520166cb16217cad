//! The reference model every strategy is tested against.
//!
//! The model is written from the event semantics only, with no knowledge of
//! the tree's shape. For every rank it keeps two sets of external hashes:
//!
//! - `held`: every block the rank currently holds, with the block it was
//!   stored under (`None` for the root). A block leaves `held` only when the
//!   rank evicts it, clears, or is removed.
//! - `reachable ⊆ held`: the blocks a prefix walk from the root can still
//!   credit. It is prefix-closed: a reachable block's parent is the root or
//!   reachable. A store makes its blocks reachable iff its parent is the root
//!   or reachable; an eviction of a reachable block cuts every reachable
//!   descendant whose chain passes through it. Reachability is *not*
//!   recomputed from `held` when a missing parent comes back: blocks orphaned
//!   by a mid-chain eviction stay unreachable until they are stored again.
//!
//! For a query (local hashes, chained into external hashes with
//! [`chain::chain_hash`]) the model answers the longest prefix inside `held`
//! and the longest prefix inside `reachable`. A backend's score `g` for a rank
//! is then classified:
//!
//! - `g > held` — [`Classification::Overcount`], always a bug (C1);
//! - `g < reachable` — [`Classification::UnexplainedUndercount`] (C3);
//! - `reachable ≤ g < held` — [`Classification::HoleUndercount`], allowed
//!   when the stream evicted mid-chain blocks (C3), a bug in strict streams
//!   (C2);
//! - `g = held` — [`Classification::Exact`].
//!
//! Applying an event also yields a [`Verdict`]: whether every backend must
//! accept it (C4) or may legitimately reject it.

use crate::chain;
use crtc::types::{
    ExternalSequenceBlockHash, KvCacheEventData, LocalBlockHash, OverlapScores, RouterEvent,
    WorkerId, WorkerWithDpRank,
};
use rustc_hash::{FxHashMap, FxHashSet};
use std::fmt;

/// Whether a backend must accept an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The event is valid for the rank's reachable state: rejecting it is a
    /// bug (C4).
    Apply,
    /// The backend may reject (or skip) the event: a store under a parent the
    /// rank does not reach, an empty store, or a removal that cuts nothing
    /// reachable.
    MayReject,
}

/// How a backend's score for one rank and one query relates to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Classification {
    /// The score equals the held prefix.
    Exact,
    /// The score lies in `reachable ≤ score < held`: blocks past a hole are
    /// held but not creditable.
    HoleUndercount,
    /// The score exceeds the held prefix (or the rank holds nothing).
    Overcount,
    /// The score is below the reachable prefix.
    UnexplainedUndercount,
}

/// A rank whose score for a query is not [`Classification::Exact`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Discrepancy {
    /// The rank.
    pub rank: WorkerWithDpRank,
    /// The backend's score (0 when the rank was absent from the scores).
    pub score: u32,
    /// The model's held prefix.
    pub held: usize,
    /// The model's reachable prefix.
    pub reachable: usize,
    /// How the score relates to the two prefixes.
    pub class: Classification,
}

impl fmt::Display for Discrepancy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rank {}: {:?} (score {}, held {}, reachable {})",
            self.rank, self.class, self.score, self.held, self.reachable
        )
    }
}

/// The model state of one rank.
#[derive(Clone, Debug, Default)]
struct RankState {
    /// Held block -> the block it was stored under (`None` = root).
    held: FxHashMap<ExternalSequenceBlockHash, Option<ExternalSequenceBlockHash>>,
    /// The prefix-closed subset of `held` a walk from the root can credit.
    reachable: FxHashSet<ExternalSequenceBlockHash>,
    /// Number of held blocks stored under each block (removing a block with
    /// no held children cannot orphan anything, so no prune is needed).
    children: FxHashMap<ExternalSequenceBlockHash, u32>,
}

impl RankState {
    fn hold(
        &mut self,
        block: ExternalSequenceBlockHash,
        parent: Option<ExternalSequenceBlockHash>,
    ) {
        if self.held.insert(block, parent).is_none() {
            if let Some(parent) = parent {
                *self.children.entry(parent).or_default() += 1;
            }
        }
    }

    /// Drops `block`; returns whether it was reachable.
    fn release(&mut self, block: ExternalSequenceBlockHash) -> bool {
        let Some(parent) = self.held.remove(&block) else {
            return false;
        };
        if let Some(count) = parent.and_then(|p| self.children.get_mut(&p)) {
            *count -= 1;
        }
        self.reachable.remove(&block)
    }

    fn has_held_children(&self, block: ExternalSequenceBlockHash) -> bool {
        self.children.get(&block).is_some_and(|&n| n > 0)
    }

    fn reaches(&self, parent: Option<ExternalSequenceBlockHash>) -> bool {
        parent.is_none_or(|p| self.reachable.contains(&p))
    }

    /// Drops every reachable block whose parent chain is no longer reachable.
    fn prune(&mut self) {
        let mut live: FxHashMap<ExternalSequenceBlockHash, bool> = FxHashMap::default();
        let blocks: Vec<_> = self.reachable.iter().copied().collect();
        let mut path = Vec::new();
        for block in blocks {
            path.clear();
            let mut cursor = Some(block);
            let verdict = loop {
                let Some(current) = cursor else { break true };
                if let Some(&known) = live.get(&current) {
                    break known;
                }
                if !self.reachable.contains(&current) {
                    break false;
                }
                path.push(current);
                cursor = self.held.get(&current).copied().flatten();
            };
            for &visited in &path {
                live.insert(visited, verdict);
            }
        }
        self.reachable
            .retain(|block| live.get(block).copied().unwrap_or(false));
    }
}

/// The reference model: per rank, the held and the reachable blocks.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    ranks: FxHashMap<WorkerWithDpRank, RankState>,
}

impl Reference {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `event` as accepted by the backend; returns whether the backend
    /// had to accept it.
    pub fn apply(&mut self, event: &RouterEvent) -> Verdict {
        self.apply_outcome(event, true)
    }

    /// Applies `event` given whether the backend `accepted` it, and returns the
    /// verdict computed before applying. A rejected store changes nothing;
    /// removals and clears always apply (a backend that skips them has
    /// nothing to skip that the model would keep).
    pub fn apply_outcome(&mut self, event: &RouterEvent, accepted: bool) -> Verdict {
        let rank = event.rank();
        match &event.event.data {
            KvCacheEventData::Stored {
                parent_hash,
                blocks,
            } => {
                let reaches = self
                    .ranks
                    .get(&rank)
                    .map_or(parent_hash.is_none(), |s| s.reaches(*parent_hash));
                let verdict = if !blocks.is_empty() && reaches {
                    Verdict::Apply
                } else {
                    Verdict::MayReject
                };
                if accepted && !blocks.is_empty() {
                    let state = self.ranks.entry(rank).or_default();
                    let mut parent = *parent_hash;
                    for block in blocks {
                        state.hold(block.external, parent);
                        if reaches {
                            state.reachable.insert(block.external);
                        }
                        parent = Some(block.external);
                    }
                }
                verdict
            }
            KvCacheEventData::Removed { block_hashes } => self.remove_blocks(rank, block_hashes),
            KvCacheEventData::Cleared => {
                self.ranks.remove(&rank);
                Verdict::Apply
            }
        }
    }

    fn remove_blocks(
        &mut self,
        rank: WorkerWithDpRank,
        hashes: &[ExternalSequenceBlockHash],
    ) -> Verdict {
        let Some(state) = self.ranks.get_mut(&rank) else {
            return Verdict::MayReject;
        };
        let mut cut = false;
        for &hash in hashes {
            cut |= state.release(hash);
        }
        if cut {
            if hashes.iter().any(|&h| state.has_held_children(h)) {
                state.prune();
            }
            Verdict::Apply
        } else {
            Verdict::MayReject
        }
    }

    /// Drops every rank of `worker_id`.
    pub fn remove_worker(&mut self, worker_id: WorkerId) {
        self.ranks.retain(|rank, _| rank.worker_id != worker_id);
    }

    /// Drops one rank.
    pub fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank) {
        self.ranks.remove(&rank);
    }

    /// The ranks the model knows (stored at least once since their last clear
    /// or removal), sorted.
    pub fn ranks(&self) -> impl Iterator<Item = WorkerWithDpRank> {
        let mut ranks: Vec<_> = self.ranks.keys().copied().collect();
        ranks.sort_unstable();
        ranks.into_iter()
    }

    /// Whether the model knows `rank`.
    pub fn knows(&self, rank: WorkerWithDpRank) -> bool {
        self.ranks.contains_key(&rank)
    }

    /// Whether `rank` holds `block`.
    pub fn holds(&self, rank: WorkerWithDpRank, block: ExternalSequenceBlockHash) -> bool {
        self.ranks
            .get(&rank)
            .is_some_and(|s| s.held.contains_key(&block))
    }

    /// Whether `block` is reachable for `rank`.
    pub fn reaches(&self, rank: WorkerWithDpRank, block: ExternalSequenceBlockHash) -> bool {
        self.ranks
            .get(&rank)
            .is_some_and(|s| s.reachable.contains(&block))
    }

    /// Number of blocks `rank` holds.
    pub fn held_count(&self, rank: WorkerWithDpRank) -> usize {
        self.ranks.get(&rank).map_or(0, |s| s.held.len())
    }

    /// Number of blocks reachable for `rank`.
    pub fn reachable_count(&self, rank: WorkerWithDpRank) -> usize {
        self.ranks.get(&rank).map_or(0, |s| s.reachable.len())
    }

    /// Every held block of `rank` with its parent, sorted by block hash.
    pub fn held_entries(
        &self,
        rank: WorkerWithDpRank,
    ) -> Vec<(ExternalSequenceBlockHash, Option<ExternalSequenceBlockHash>)> {
        let mut entries: Vec<_> = self
            .ranks
            .get(&rank)
            .map(|s| s.held.iter().map(|(&b, &p)| (b, p)).collect())
            .unwrap_or_default();
        entries.sort_unstable();
        entries
    }

    /// The held blocks of `rank` no other held block of `rank` names as its
    /// parent, sorted.
    pub fn held_leaves(&self, rank: WorkerWithDpRank) -> Vec<ExternalSequenceBlockHash> {
        let Some(state) = self.ranks.get(&rank) else {
            return Vec::new();
        };
        let parents: FxHashSet<_> = state.held.values().flatten().copied().collect();
        let mut leaves: Vec<_> = state
            .held
            .keys()
            .copied()
            .filter(|b| !parents.contains(b))
            .collect();
        leaves.sort_unstable();
        leaves
    }

    /// For every held leaf of `rank`, the chain of held blocks ending at it,
    /// oldest first (the chain starts at the root or right after a block the
    /// rank no longer holds).
    pub fn held_sequences(&self, rank: WorkerWithDpRank) -> Vec<Vec<ExternalSequenceBlockHash>> {
        let Some(state) = self.ranks.get(&rank) else {
            return Vec::new();
        };
        self.held_leaves(rank)
            .into_iter()
            .map(|leaf| {
                let mut chain = vec![leaf];
                let mut cursor = state.held.get(&leaf).copied().flatten();
                while let Some(block) = cursor {
                    let Some(&parent) = state.held.get(&block) else {
                        break;
                    };
                    chain.push(block);
                    cursor = parent;
                }
                chain.reverse();
                chain
            })
            .collect()
    }

    fn prefix_in(
        query: &[LocalBlockHash],
        contains: impl Fn(ExternalSequenceBlockHash) -> bool,
    ) -> usize {
        let mut parent = None;
        for (depth, &local) in query.iter().enumerate() {
            let hash = chain::chain_hash(parent, local);
            if !contains(hash) {
                return depth;
            }
            parent = Some(hash);
        }
        query.len()
    }

    /// The longest prefix of `query` whose blocks `rank` all holds.
    pub fn held_prefix(&self, rank: WorkerWithDpRank, query: &[LocalBlockHash]) -> usize {
        self.ranks
            .get(&rank)
            .map_or(0, |s| Self::prefix_in(query, |h| s.held.contains_key(&h)))
    }

    /// The longest prefix of `query` whose blocks are all reachable for
    /// `rank`.
    pub fn reachable_prefix(&self, rank: WorkerWithDpRank, query: &[LocalBlockHash]) -> usize {
        self.ranks
            .get(&rank)
            .map_or(0, |s| Self::prefix_in(query, |h| s.reachable.contains(&h)))
    }

    /// Classifies a backend's `score` for `rank` and `query`.
    pub fn classify(
        &self,
        rank: WorkerWithDpRank,
        query: &[LocalBlockHash],
        score: u32,
    ) -> Classification {
        self.discrepancy(rank, query, score).class
    }

    fn discrepancy(
        &self,
        rank: WorkerWithDpRank,
        query: &[LocalBlockHash],
        score: u32,
    ) -> Discrepancy {
        let held = self.held_prefix(rank, query);
        let reachable = self.reachable_prefix(rank, query);
        let g = score as usize;
        let class = if g > held {
            Classification::Overcount
        } else if g < reachable {
            Classification::UnexplainedUndercount
        } else if g < held {
            Classification::HoleUndercount
        } else {
            Classification::Exact
        };
        Discrepancy {
            rank,
            score,
            held,
            reachable,
            class,
        }
    }

    /// Every rank (scored or known to the model) whose score for `query` is
    /// not exact, sorted by rank. A rank absent from `scores` scores 0.
    pub fn check(&self, query: &[LocalBlockHash], scores: &OverlapScores) -> Vec<Discrepancy> {
        let mut ranks: Vec<_> = scores
            .scores
            .keys()
            .copied()
            .chain(self.ranks.keys().copied())
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks
            .into_iter()
            .map(|rank| self.discrepancy(rank, query, scores.score(rank)))
            .filter(|d| d.class != Classification::Exact)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{locals, removed_at as remove, sequence_hashes, stored_after as store};

    const R0: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);
    const R1: WorkerWithDpRank = WorkerWithDpRank::new(1, 1);
    const R2: WorkerWithDpRank = WorkerWithDpRank::new(2, 0);

    fn prefixes(model: &Reference, rank: WorkerWithDpRank, seq: &[u64]) -> (usize, usize) {
        let query = locals(seq);
        (
            model.held_prefix(rank, &query),
            model.reachable_prefix(rank, &query),
        )
    }

    #[test]
    fn mid_chain_removal_orphans_the_rest() {
        let mut model = Reference::new();
        assert_eq!(model.apply(&store(R0, &[], &[1, 2, 3, 4])), Verdict::Apply);
        assert_eq!(
            model.apply(&remove(R0, &[1, 2, 3, 4], &[1])),
            Verdict::Apply
        );
        assert_eq!(prefixes(&model, R0, &[1, 2, 3, 4]), (1, 1));
        assert_eq!(model.held_count(R0), 3);
        assert_eq!(model.reachable_count(R0), 1);
        // Restoring the missing block relinks only that block.
        assert_eq!(model.apply(&store(R0, &[1], &[2])), Verdict::Apply);
        assert_eq!(prefixes(&model, R0, &[1, 2, 3, 4]), (4, 2));
        // Removing an orphaned block cuts nothing reachable.
        assert_eq!(
            model.apply(&remove(R0, &[1, 2, 3, 4], &[3])),
            Verdict::MayReject
        );
        assert_eq!(prefixes(&model, R0, &[1, 2, 3, 4]), (3, 2));
    }

    #[test]
    fn branches_survive_a_cut_on_a_sibling() {
        let mut model = Reference::new();
        model.apply(&store(R0, &[], &[1, 2, 3]));
        model.apply(&store(R0, &[1], &[7, 8]));
        assert_eq!(model.apply(&remove(R0, &[1, 2, 3], &[1])), Verdict::Apply);
        assert_eq!(prefixes(&model, R0, &[1, 7, 8]), (3, 3));
        assert_eq!(prefixes(&model, R0, &[1, 2, 3]), (1, 1));
        assert_eq!(model.held_leaves(R0).len(), 2);
        let sequences = model.held_sequences(R0);
        assert!(sequences.contains(&sequence_hashes(&[1, 7, 8])));
        assert!(sequences.contains(&sequence_hashes(&[1, 2, 3])[2..].to_vec()));
        // A cut at the shared head prunes both branches.
        assert_eq!(model.apply(&remove(R0, &[1], &[0])), Verdict::Apply);
        assert_eq!(model.reachable_count(R0), 0);
        assert_eq!(model.held_count(R0), 3);
    }

    #[test]
    fn classify_each_class() {
        let mut model = Reference::new();
        model.apply(&store(R0, &[], &[1, 2, 3, 4]));
        model.apply(&remove(R0, &[1, 2, 3, 4], &[2]));
        model.apply(&store(R0, &[1, 2], &[3]));
        model.apply(&remove(R0, &[1, 2, 3, 4], &[1]));
        // held = {1, 3, 4}, reachable = {1}.
        assert_eq!(prefixes(&model, R0, &[1, 2, 3, 4]), (1, 1));
        model.apply(&store(R0, &[1], &[2]));
        let query = locals(&[1, 2, 3, 4]);
        assert_eq!(model.held_prefix(R0, &query), 4);
        assert_eq!(model.reachable_prefix(R0, &query), 2);
        assert_eq!(model.classify(R0, &query, 4), Classification::Exact);
        assert_eq!(model.classify(R0, &query, 5), Classification::Overcount);
        assert_eq!(
            model.classify(R0, &query, 3),
            Classification::HoleUndercount
        );
        assert_eq!(
            model.classify(R0, &query, 2),
            Classification::HoleUndercount
        );
        assert_eq!(
            model.classify(R0, &query, 1),
            Classification::UnexplainedUndercount
        );
        assert_eq!(model.classify(R2, &query, 1), Classification::Overcount);
        assert_eq!(model.classify(R2, &query, 0), Classification::Exact);
    }

    #[test]
    fn check_lists_every_inexact_rank() {
        let mut model = Reference::new();
        model.apply(&store(R0, &[], &[1, 2]));
        model.apply(&store(R1, &[], &[1]));
        let query = locals(&[1, 2]);
        let mut scores = OverlapScores::default();
        scores.scores.insert(R0, 2);
        scores.scores.insert(R2, 1);
        let found = model.check(&query, &scores);
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].rank, found[0].class),
            (R1, Classification::UnexplainedUndercount)
        );
        assert_eq!(
            (found[1].rank, found[1].class),
            (R2, Classification::Overcount)
        );
        scores.scores.remove(&R2);
        scores.scores.insert(R1, 1);
        assert!(model.check(&query, &scores).is_empty());
    }

    #[test]
    fn store_under_an_orphaned_parent_may_be_rejected() {
        let mut model = Reference::new();
        model.apply(&store(R0, &[], &[1, 2, 3]));
        model.apply(&remove(R0, &[1, 2, 3], &[0]));
        let extend = store(R0, &[1, 2, 3], &[4]);
        assert_eq!(model.apply_outcome(&extend, false), Verdict::MayReject);
        assert!(!model.holds(R0, sequence_hashes(&[1, 2, 3, 4])[3]));
        assert_eq!(model.apply(&extend), Verdict::MayReject);
        assert!(model.holds(R0, sequence_hashes(&[1, 2, 3, 4])[3]));
        assert!(!model.reaches(R0, sequence_hashes(&[1, 2, 3, 4])[3]));
        // Unknown parents, unknown ranks and empty stores are MayReject too.
        assert_eq!(model.apply(&store(R0, &[9], &[4])), Verdict::MayReject);
        assert_eq!(model.apply(&store(R2, &[1], &[2])), Verdict::MayReject);
        assert_eq!(model.apply(&store(R1, &[], &[])), Verdict::MayReject);
        assert!(!model.knows(R1));
    }

    #[test]
    fn cleared_drops_the_rank() {
        let mut model = Reference::new();
        model.apply(&store(R0, &[], &[1, 2]));
        model.apply(&store(R1, &[], &[1, 2]));
        assert_eq!(model.apply(&RouterEvent::cleared(R0)), Verdict::Apply);
        assert!(!model.knows(R0));
        assert_eq!(prefixes(&model, R0, &[1, 2]), (0, 0));
        assert_eq!(prefixes(&model, R1, &[1, 2]), (2, 2));
        assert_eq!(model.apply(&remove(R0, &[1, 2], &[1])), Verdict::MayReject);
        assert_eq!(model.apply(&store(R0, &[1], &[2])), Verdict::MayReject);
    }

    #[test]
    fn remove_worker_drops_all_dp_ranks() {
        let mut model = Reference::new();
        for rank in [R0, R1, R2] {
            model.apply(&store(rank, &[], &[1, 2]));
        }
        model.remove_worker(1);
        assert_eq!(model.ranks().collect::<Vec<_>>(), vec![R2]);
        model.remove_worker_dp_rank(R2);
        assert_eq!(model.ranks().count(), 0);
    }

    #[test]
    fn removal_of_the_tail_keeps_the_head() {
        let mut model = Reference::new();
        model.apply(&store(R0, &[], &[1, 2, 3]));
        assert_eq!(
            model.apply(&remove(R0, &[1, 2, 3], &[2, 1])),
            Verdict::Apply
        );
        assert_eq!(prefixes(&model, R0, &[1, 2, 3]), (1, 1));
        assert_eq!(model.held_leaves(R0), sequence_hashes(&[1]));
        assert_eq!(model.apply(&remove(R1, &[1], &[0])), Verdict::MayReject);
    }
}
