//! Stores: the decode fast path, then the general planning path.
//!
//! Protocol. A store first resolves its slot and registers its rank on the
//! lane. If the fast path is on and the lane's entry for the parent names a
//! node, the strategy's `try_append_at_tail` gets one chance: in one critical
//! section it checks (leaf, not anchor, parent is the tail, rank full) and
//! appends; the new entries reuse the lane's hold on that node.
//!
//! Otherwise the general path runs. Parent resolution checks that the rank
//! covers the parent (never attach coverage below a hole), repairing a stale
//! entry when the node no longer holds the parent, and never re-reading the
//! entry after a repair. It then plans against the parent's edge: tail insert,
//! reuse an existing suffix, reuse the suffix and extend a leaf, or split
//! right after the parent. The child walk then places the remaining blocks:
//! descend into a matching child (promoting the rank on it), cover a prefix of
//! it, split it for a diverging tail, extend the parent leaf in place, or
//! insert a new child (shared section under an internal parent, exclusive
//! section for a leaf's first child, which makes it internal). Every commit
//! validates the version its plan was made under; a stale plan is re-made.
//!
//! Every section that adds coverage or a child to a node first checks, inside
//! the section, that the sweeper has not unlinked the node (see `sweep`). A
//! child found detached is re-planned from its parent; a detached parent
//! means the rank no longer covers it, so the store fails with
//! `ParentBlockNotFound`. A parent the lane does not name but that is an
//! anchor is joined (the rank is promoted on it). Linked blocks, and dead
//! nodes a store revives, go to the lane's reclamation tally.

use super::node::Node;
use super::repair::Direction;
use super::{Guard, Lane, Tree};
use crate::types::{BlockPair, ExternalSequenceBlockHash, KvError, WorkerWithDpRank};
use crtc_strategies::shape::{append_demoting, cover_prefix, promote_full, split_at};
use crtc_strategies::sync::{spin_loop, Arc};
use crtc_strategies::{
    append_eligibility, Commit, LocalBlockHash, Reclaim, ShapeGate, ShapeInit, ShapeRead,
    ShapeWrite, Slot, Stale, Version,
};

/// What a store did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOutcome {
    /// The decode fast path applied it.
    pub fast_path: bool,
    /// Nothing changed (coverage and lookups were already in place).
    pub duplicate: bool,
}

/// Per-store context.
struct Cx<'g, G: ShapeGate> {
    rank: WorkerWithDpRank,
    slot: Slot,
    guard: &'g Guard<G>,
}

/// Where the child walk starts, or the store's end when the parent's own
/// edge absorbed it.
enum Start<G: ShapeGate> {
    From {
        node: Arc<Node<G>>,
        last: Option<ExternalSequenceBlockHash>,
    },
    Reused {
        changed: bool,
    },
}

/// A plan against the edge that holds the parent.
enum ParentPlan {
    Missing,
    TailInsert,
    ReuseExisting { cutoff: usize },
    ExtendLeaf { start: usize },
    Split { at: usize },
}

enum ParentCommit<G: ShapeGate> {
    Stale,
    Detached,
    Reused { changed: bool },
    InsertFrom { split: Option<Arc<Node<G>>> },
}

enum ChildPlan<G: ShapeGate> {
    StaleParent,
    Interior,
    Descend(Arc<Node<G>>),
    Missing,
}

/// One step of the child walk.
enum Step<G: ShapeGate> {
    Retry,
    Detached,
    Resolved(Arc<Node<G>>),
    Descend {
        child: Arc<Node<G>>,
        consumed: usize,
        changed: bool,
    },
    Done {
        changed: bool,
    },
}

fn externals(blocks: &[BlockPair]) -> impl Iterator<Item = ExternalSequenceBlockHash> + '_ {
    blocks.iter().map(|b| b.external)
}

fn plan_parent(
    shape: &impl ShapeRead,
    parent: ExternalSequenceBlockHash,
    blocks: &[BlockPair],
) -> ParentPlan {
    let Some(pos) = shape.position(parent) else {
        return ParentPlan::Missing;
    };
    let after = pos + 1;
    let rest = shape.len().saturating_sub(after);
    if rest == 0 {
        ParentPlan::TailInsert
    } else if blocks.len() <= rest && shape.pairs_match(after, blocks) {
        ParentPlan::ReuseExisting {
            cutoff: after + blocks.len(),
        }
    } else if !shape.is_internal()
        && blocks.len() > rest
        && shape.pairs_match(after, &blocks[..rest])
    {
        ParentPlan::ExtendLeaf { start: rest }
    } else {
        ParentPlan::Split { at: after }
    }
}

impl<G: ShapeGate> Tree<G> {
    pub(super) fn apply_stored(
        &self,
        lane: &mut Lane<G>,
        rank: WorkerWithDpRank,
        parent: Option<ExternalSequenceBlockHash>,
        blocks: &[BlockPair],
    ) -> Result<StoreOutcome, KvError> {
        if blocks.is_empty() {
            return Err(KvError::EmptyStore { rank });
        }
        let guard = G::Reclaim::pin();
        let slot = self.slots.acquire(rank, &guard)?;
        lane.add_rank(rank);
        if let (true, Some(parent)) = (self.config.fast_path, parent) {
            if Self::try_fast_append(lane, rank, slot, parent, blocks) {
                return Ok(StoreOutcome {
                    fast_path: true,
                    duplicate: false,
                });
            }
        }
        lane.counters().general_stores.add(1);
        let cx = Cx {
            rank,
            slot,
            guard: &guard,
        };
        let changed = match parent {
            None => self.insert_blocks_from(lane, &cx, Arc::clone(&self.root), None, blocks)?,
            Some(parent) => match self.resolve_parent(lane, &cx, parent, blocks)? {
                Start::Reused { changed } => changed,
                Start::From { node, last } => {
                    self.insert_blocks_from(lane, &cx, node, last, blocks)?
                }
            },
        };
        Ok(StoreOutcome {
            fast_path: false,
            duplicate: !changed,
        })
    }

    /// The decode fast path through the lane's entry for the parent, borrowed.
    fn try_fast_append(
        lane: &mut Lane<G>,
        rank: WorkerWithDpRank,
        slot: Slot,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> bool {
        let Some(id) = lane.entry(rank, parent) else {
            return false;
        };
        match lane.node(id).gate.try_append_at_tail(slot, parent, blocks) {
            Ok(_) => {
                lane.upsert_held(rank, externals(blocks), id);
                lane.note(blocks.len() as i64, 0);
                lane.counters().fast_path_hits.add(1);
                true
            }
            Err(miss) => {
                lane.counters().fast_path_misses[miss.index()].add(1);
                false
            }
        }
    }

    fn resolve_parent(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> Result<Start<G>, KvError> {
        let not_found = || KvError::ParentBlockNotFound {
            rank: cx.rank,
            parent,
        };
        let mut node = match lane.entry(cx.rank, parent) {
            Some(id) => Arc::clone(lane.node(id)),
            None => self
                .join_anchor_parent(lane, cx, parent)
                .ok_or_else(not_found)?,
        };
        loop {
            let (covered, _) = node
                .gate
                .plan(|s| s.position(parent).map(|pos| s.covered_len(cx.slot) > pos));
            match covered {
                None => {
                    node = self
                        .repair(lane, &node, parent, Direction::TowardTail, cx.guard)
                        .or_else(|| self.join_anchor_parent(lane, cx, parent))
                        .ok_or_else(not_found)?;
                    continue;
                }
                Some(false) => {
                    lane.remove(cx.rank, parent);
                    return Err(not_found());
                }
                Some(true) => {}
            }
            match self.commit_parent(lane, cx, &node, parent, blocks) {
                ParentCommit::Stale => Self::restart(lane),
                ParentCommit::Detached => return Err(not_found()),
                ParentCommit::Reused { changed } => {
                    let updated = lane.upsert(cx.rank, externals(blocks), &node);
                    return Ok(Start::Reused {
                        changed: changed || updated > 0,
                    });
                }
                ParentCommit::InsertFrom { split } => {
                    if let Some(suffix) = split {
                        self.redirect_split(lane, &node, &suffix, cx.guard);
                    }
                    return Ok(Start::From {
                        node,
                        last: Some(parent),
                    });
                }
            }
        }
    }

    /// The anchor `parent`, joined by the storing rank, if there is one.
    fn join_anchor_parent(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        parent: ExternalSequenceBlockHash,
    ) -> Option<Arc<Node<G>>> {
        let anchor = self.anchor_node(parent, cx.guard)?;
        Self::join_anchor(lane, cx.rank, cx.slot, parent, &anchor);
        Some(anchor)
    }

    fn restart(lane: &Lane<G>) {
        lane.counters().restarts.add(1);
        spin_loop();
    }

    /// Plans against the edge holding `parent` and commits the plan.
    fn commit_parent(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        node: &Arc<Node<G>>,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> ParentCommit<G> {
        let (plan, version) = node.gate.plan(|s| plan_parent(s, parent, blocks));
        let committed = match plan {
            ParentPlan::Missing => Err(Stale),
            ParentPlan::TailInsert => node.gate.shared(Some(version), || {
                if node.is_unlinked() {
                    return ParentCommit::Detached;
                }
                ParentCommit::InsertFrom { split: None }
            }),
            ParentPlan::ReuseExisting { cutoff } => node.gate.shared_commit(Some(version), |w| {
                if node.is_unlinked() {
                    return ParentCommit::Detached;
                }
                let changed = cover_prefix(w, cx.slot, cutoff);
                ParentCommit::Reused { changed }
            }),
            ParentPlan::ExtendLeaf { start } => {
                self.extend_leaf(lane, cx, node, &blocks[start..], version)
            }
            ParentPlan::Split { at } => self
                .split_node(lane, node, at, version, None, cx.guard)
                .map(|split| match split {
                    Some(suffix) => ParentCommit::InsertFrom {
                        split: Some(suffix),
                    },
                    None => ParentCommit::Detached,
                }),
        };
        committed.unwrap_or(ParentCommit::Stale)
    }

    /// Extends the leaf `node` with `tail` (the parent plan found the rest
    /// of the store already on its edge).
    fn extend_leaf(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        node: &Node<G>,
        tail: &[BlockPair],
        version: Version,
    ) -> Result<ParentCommit<G>, Stale> {
        let committed = node.gate.exclusive_commit(Some(version), |w| {
            if node.is_unlinked() {
                return Commit::unchanged(ParentCommit::Detached);
            }
            if w.is_internal() {
                return Commit::unchanged(ParentCommit::Stale);
            }
            append_demoting(w, cx.slot, tail);
            Commit::changed(ParentCommit::Reused { changed: true })
        })?;
        if let ParentCommit::Reused { .. } = committed {
            lane.note(tail.len() as i64, 0);
        }
        Ok(committed)
    }

    /// Splits `node` at `at` under its exclusive section: the node keeps the
    /// prefix; a new suffix node takes the rest of the edge and every child.
    /// With `tail`, the store's diverging tail becomes the prefix's second
    /// child and the storing slot is promoted to full on the prefix. `None`
    /// if the sweeper unlinked the node.
    fn split_node(
        &self,
        lane: &mut Lane<G>,
        node: &Node<G>,
        at: usize,
        version: Version,
        tail: Option<(Slot, Arc<Node<G>>)>,
        guard: &Guard<G>,
    ) -> Result<Option<Arc<Node<G>>>, Stale> {
        let split = node.gate.exclusive_commit(Some(version), |w| {
            if node.is_unlinked() {
                return Commit::unchanged(None);
            }
            let had_holders = w.has_holders();
            let mut init = split_at(w, at);
            let orphaned = had_holders && init.full.is_empty() && init.cutoffs.is_empty();
            let dead = if orphaned { init.edge.len() } else { 0 };
            let moved = node.children.take_for_split();
            init.internal = moved.len(guard) > 0;
            let key = init.edge.first().map_or(LocalBlockHash(0), |b| b.local);
            let suffix = Arc::new(Node::with_children(init, moved));
            let mut entries = vec![(key, Arc::clone(&suffix))];
            if let Some((slot, tail)) = tail {
                promote_full(w, slot);
                let tail_key = tail.gate.read(|s| s.pair(0).local);
                entries.push((tail_key, tail));
            }
            node.children.publish(entries, guard);
            Commit::changed(Some((suffix, dead)))
        })?;
        Ok(split.map(|(suffix, dead)| {
            lane.note(0, dead as i64);
            suffix
        }))
    }

    /// After this lane split `prefix`, moves this lane's entries for blocks
    /// now on `suffix` (up to each rank's coverage there) that still name
    /// `prefix`.
    fn redirect_split(
        &self,
        lane: &mut Lane<G>,
        prefix: &Node<G>,
        suffix: &Arc<Node<G>>,
        guard: &Guard<G>,
    ) {
        if lane.id_of(prefix).is_none() {
            return;
        }
        let table = self.slots.table(guard);
        let ranks: Vec<_> = lane
            .ranks()
            .filter_map(|r| table.slot(r).map(|s| (r, s)))
            .collect();
        let mut moves = Vec::new();
        suffix.gate.read(|s| {
            moves.clear();
            for &(rank, slot) in &ranks {
                moves.extend((0..s.covered_len(slot)).map(|pos| (rank, s.pair(pos).external)));
            }
        });
        for (rank, hash) in moves {
            lane.redirect(rank, hash, prefix, suffix);
        }
    }

    fn insert_blocks_from(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        mut parent: Arc<Node<G>>,
        mut last: Option<ExternalSequenceBlockHash>,
        blocks: &[BlockPair],
    ) -> Result<bool, KvError> {
        let mut remaining = blocks;
        let mut changed = false;
        while !remaining.is_empty() {
            match self.child_step(lane, cx, &parent, last, remaining)? {
                Step::Retry => Self::restart(lane),
                Step::Detached => {
                    return Err(KvError::ParentBlockNotFound {
                        rank: cx.rank,
                        parent: last.unwrap_or_default(),
                    })
                }
                Step::Resolved(node) => parent = node,
                Step::Done { changed: c } => return Ok(changed || c),
                Step::Descend {
                    child,
                    consumed,
                    changed: c,
                } => {
                    changed |= c;
                    last = Some(remaining[consumed - 1].external);
                    remaining = &remaining[consumed..];
                    parent = child;
                }
            }
        }
        Ok(changed)
    }

    fn child_step(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        parent: &Arc<Node<G>>,
        last: Option<ExternalSequenceBlockHash>,
        remaining: &[BlockPair],
    ) -> Result<Step<G>, KvError> {
        let key = remaining[0].local;
        let ((plan, internal, anchor), version) = parent.gate.plan(|s| {
            let plan = match last {
                Some(l) if s.tail().map(|t| t.external) != Some(l) => match s.position(l) {
                    Some(_) => ChildPlan::Interior,
                    None => ChildPlan::StaleParent,
                },
                _ => parent
                    .children
                    .get_arc(key, cx.guard)
                    .map_or(ChildPlan::Missing, ChildPlan::Descend),
            };
            (plan, s.is_internal(), s.is_anchor())
        });
        match plan {
            ChildPlan::StaleParent => {
                let hash = last.unwrap_or_default();
                let not_found = KvError::ParentBlockNotFound {
                    rank: cx.rank,
                    parent: hash,
                };
                let resolved = self.repair(lane, parent, hash, Direction::TowardTail, cx.guard);
                return resolved.map(Step::Resolved).ok_or(not_found);
            }
            ChildPlan::Descend(child) => {
                return Ok(self.insert_into_child(lane, cx, child, remaining))
            }
            ChildPlan::Interior | ChildPlan::Missing => {}
        }
        if let (Some(p), false) = (last, anchor) {
            if let Some(step) =
                self.place_at_parent(lane, cx, parent, p, remaining, internal, version)
            {
                return Ok(step);
            }
        }
        Ok(self.insert_child(lane, cx, parent, remaining, internal, version))
    }

    /// Tries to absorb `remaining` on the parent's own edge: reuse, split so
    /// the parent is a tail, or extend the leaf. `None` when a child is needed.
    #[allow(clippy::too_many_arguments)]
    fn place_at_parent(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        parent: &Arc<Node<G>>,
        p: ExternalSequenceBlockHash,
        remaining: &[BlockPair],
        internal: bool,
        version: Version,
    ) -> Option<Step<G>> {
        match self.commit_parent(lane, cx, parent, p, remaining) {
            ParentCommit::Stale => return Some(Step::Retry),
            ParentCommit::Detached => return Some(Step::Detached),
            ParentCommit::Reused { changed } => {
                let updated = lane.upsert(cx.rank, externals(remaining), parent);
                return Some(Step::Done {
                    changed: changed || updated > 0,
                });
            }
            ParentCommit::InsertFrom {
                split: Some(suffix),
            } => {
                self.redirect_split(lane, parent, &suffix, cx.guard);
                return Some(Step::Retry);
            }
            ParentCommit::InsertFrom { split: None } => {}
        }
        if internal {
            return None;
        }
        let extended = parent.gate.exclusive_commit(Some(version), |w| {
            if parent.is_unlinked() {
                return Commit::unchanged(Some(Step::Detached));
            }
            if append_eligibility(w, cx.slot, p, remaining).is_err() {
                return Commit::unchanged(None);
            }
            append_demoting(w, cx.slot, remaining);
            Commit::changed(Some(Step::Done { changed: true }))
        });
        match extended {
            Err(Stale) => Some(Step::Retry),
            Ok(Some(Step::Done { changed })) => {
                lane.upsert(cx.rank, externals(remaining), parent);
                lane.note(remaining.len() as i64, 0);
                Some(Step::Done { changed })
            }
            Ok(other) => other,
        }
    }

    /// Links `remaining` as a new child of `parent` unless a child took its
    /// key meanwhile (then descends into that child).
    fn insert_child(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        parent: &Arc<Node<G>>,
        remaining: &[BlockPair],
        internal: bool,
        version: Version,
    ) -> Step<G> {
        use super::children::Insert;
        let key = remaining[0].local;
        let fresh = Arc::new(Node::new(ShapeInit::leaf(remaining.to_vec(), cx.slot)));
        let insert = || {
            (!parent.is_unlinked()).then(|| parent.children.insert_if_absent(key, &fresh, cx.guard))
        };
        let inserted = if internal {
            parent.gate.shared(Some(version), insert)
        } else {
            parent
                .gate
                .exclusive_commit(Some(version), |w| match insert() {
                    Some(Insert::Inserted) => {
                        w.set_internal();
                        Commit::changed(Some(Insert::Inserted))
                    }
                    other => Commit::unchanged(other),
                })
        };
        match inserted {
            Err(Stale) => Step::Retry,
            Ok(None) => Step::Detached,
            Ok(Some(Insert::Existing(child))) => self.insert_into_child(lane, cx, child, remaining),
            Ok(Some(Insert::Inserted)) => {
                lane.upsert(cx.rank, externals(remaining), &fresh);
                lane.note(remaining.len() as i64, 0);
                Step::Done { changed: true }
            }
        }
    }

    /// Places `remaining` on `child`, whose first local hash matches. A child
    /// the sweeper unlinked meanwhile sends the walk back to its parent.
    fn insert_into_child(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        child: Arc<Node<G>>,
        remaining: &[BlockPair],
    ) -> Step<G> {
        loop {
            let ((matched, len), version) = child.gate.plan(|s| {
                (
                    s.local_match_len(0, remaining.iter().map(|b| b.local)),
                    s.len(),
                )
            });
            if matched == 0 {
                return Step::Retry;
            }
            let committed = if matched == len {
                let covered = &remaining[..len.min(remaining.len())];
                self.cover_child(lane, cx, child.clone(), covered, version)
            } else if matched == remaining.len() {
                self.cover_child_prefix(lane, cx, &child, remaining, version)
            } else {
                self.split_child_for_tail(lane, cx, &child, remaining, matched, version)
            };
            match committed {
                Ok(Some(step)) => return step,
                Ok(None) => return Step::Retry,
                Err(Stale) => Self::restart(lane),
            }
        }
    }

    /// Raises the rank's coverage on `child` to `edge[0..k]` for `k <
    /// len`; `None` if the child was unlinked. A revived dead node leaves the
    /// dead tally.
    fn cover_child_prefix(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        child: &Arc<Node<G>>,
        covered: &[BlockPair],
        version: Version,
    ) -> Result<Option<Step<G>>, Stale> {
        let k = covered.len();
        let outcome = child.gate.shared_commit(Some(version), |w| {
            if child.is_unlinked() {
                return None;
            }
            let revived = if w.has_holders() { 0 } else { w.len() };
            Some((cover_prefix(w, cx.slot, k), revived))
        })?;
        Ok(outcome.map(|(changed, revived)| {
            lane.note(0, -(revived as i64));
            let updated = lane.upsert(cx.rank, externals(covered), child);
            Step::Done {
                changed: changed || updated > 0,
            }
        }))
    }

    /// The child's whole edge matched: promote the rank on it and descend;
    /// `None` if the child was unlinked.
    fn cover_child(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        child: Arc<Node<G>>,
        covered: &[BlockPair],
        version: Version,
    ) -> Result<Option<Step<G>>, Stale> {
        let len = covered.len();
        let outcome = child.gate.shared_commit(Some(version), |w| {
            if child.is_unlinked() {
                return None;
            }
            let revived = if w.has_holders() { 0 } else { w.len() };
            Some((promote_full(w, cx.slot), revived))
        })?;
        let Some((changed, revived)) = outcome else {
            return Ok(None);
        };
        lane.note(0, -(revived as i64));
        let updated = lane.upsert(cx.rank, externals(covered), &child);
        Ok(Some(Step::Descend {
            child,
            consumed: len,
            changed: changed || updated > 0,
        }))
    }

    fn split_child_for_tail(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        child: &Arc<Node<G>>,
        remaining: &[BlockPair],
        matched: usize,
        version: Version,
    ) -> Result<Option<Step<G>>, Stale> {
        let tail = &remaining[matched..];
        let tail_node = Arc::new(Node::new(ShapeInit::leaf(tail.to_vec(), cx.slot)));
        let split = self.split_node(
            lane,
            child,
            matched,
            version,
            Some((cx.slot, Arc::clone(&tail_node))),
            cx.guard,
        )?;
        let Some(suffix) = split else {
            return Ok(None);
        };
        self.redirect_split(lane, child, &suffix, cx.guard);
        lane.upsert(cx.rank, externals(&remaining[..matched]), child);
        lane.upsert(cx.rank, externals(tail), &tail_node);
        lane.note(tail.len() as i64, 0);
        Ok(Some(Step::Done { changed: true }))
    }
}
