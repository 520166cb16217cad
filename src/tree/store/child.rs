//! The child walk of a store: from a [`Placement`] below a node to the
//! store's end.
//!
//! Protocol. Each step plans against the current node: if the last placed
//! hash no longer ends its edge, the blocks either still fit on the edge
//! (interior) or the node is stale and is repaired toward the tail. Otherwise
//! the step descends into the child keyed by the next local hash, or places
//! the blocks on the node's own edge (`edge`), or extends the node in place
//! when it is a leaf and the rank is eligible, or inserts a new child (shared
//! section under an internal node, exclusive section for a leaf's first
//! child, which makes it internal). On a child whose first local hash
//! matches, the step promotes the rank on it and descends when the whole edge
//! matched, covers a prefix of it when the blocks end inside it, or splits it
//! for a diverging tail. A child the sweeper unlinked sends the walk back to
//! its parent; a detached parent fails the store with `ParentBlockNotFound`.
//!
//! [`Placement`]: super::Placement

use super::super::children::Insert;
use super::super::node::Node;
use super::super::repair::Direction;
use super::super::{Lane, Tree};
use super::edge::{known_blocks, EdgeCommit};
use super::{externals, Cx};
use crate::types::{BlockPair, ExternalSequenceBlockHash, KvError};
use crtc_strategies::shape::{append_demoting, cover_prefix, promote_full};
use crtc_strategies::sync::Arc;
use crtc_strategies::{
    append_eligibility, Commit, ShapeGate, ShapeInit, ShapeRead, ShapeWrite, Stale, Version,
};

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

impl<G: ShapeGate> Tree<G> {
    /// The child walk: places `blocks` below `parent`, after `last`.
    pub(super) fn place_below(
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
        let ((plan, internal, anchor), version) = parent.gate.plan_in(cx.guard, |s| {
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
                self.absorb_on_edge(lane, cx, parent, p, remaining, internal, version)
            {
                return Ok(step);
            }
        }
        Ok(self.insert_child(lane, cx, parent, remaining, internal, version))
    }

    /// Tries to absorb `remaining` on the parent's own edge: reuse, split so
    /// the parent is a tail, or extend the leaf. `None` when a child is needed.
    #[allow(clippy::too_many_arguments)]
    fn absorb_on_edge(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        parent: &Arc<Node<G>>,
        p: ExternalSequenceBlockHash,
        remaining: &[BlockPair],
        internal: bool,
        version: Version,
    ) -> Option<Step<G>> {
        match self.commit_after(lane, cx, parent, p, remaining) {
            EdgeCommit::Stale => return Some(Step::Retry),
            EdgeCommit::Detached => return Some(Step::Detached),
            EdgeCommit::Reused { changed, known } => {
                let updated = lane.upsert(externals(&remaining[known..]), parent);
                return Some(Step::Done {
                    changed: changed || updated > 0,
                });
            }
            EdgeCommit::InsertFrom {
                split: Some(suffix),
            } => {
                self.redirect_split(lane, parent, &suffix, cx.guard);
                return Some(Step::Retry);
            }
            EdgeCommit::InsertFrom { split: None } => {}
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
                lane.upsert(externals(remaining), parent);
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
        let key = remaining[0].local;
        let fresh = Arc::new(Node::new(ShapeInit::leaf(remaining.to_vec(), cx.slot)));
        // A root key is counted before its child can be linked, and the
        // count taken back unless this insert linked it (`key_filter`).
        let at_root = Arc::ptr_eq(parent, &self.root);
        if at_root {
            self.root_keys.add(key);
        }
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
        if at_root && !matches!(inserted, Ok(Some(Insert::Inserted))) {
            self.root_keys.sub(key);
        }
        match inserted {
            Err(Stale) => Step::Retry,
            Ok(None) => Step::Detached,
            Ok(Some(Insert::Existing(child))) => self.insert_into_child(lane, cx, child, remaining),
            Ok(Some(Insert::Inserted)) => {
                lane.upsert(externals(remaining), &fresh);
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
            let ((matched, len), version) = child.gate.plan_in(cx.guard, |s| {
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
            let known = known_blocks(w, lane.slot_mask(), 0, covered);
            Some((cover_prefix(w, cx.slot, k), revived, known))
        })?;
        Ok(outcome.map(|(changed, revived, known)| {
            lane.note(0, -(revived as i64));
            let updated = lane.upsert(externals(&covered[known..]), child);
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
            let known = known_blocks(w, lane.slot_mask(), 0, covered);
            Some((promote_full(w, cx.slot), revived, known))
        })?;
        let Some((changed, revived, known)) = outcome else {
            return Ok(None);
        };
        lane.note(0, -(revived as i64));
        let updated = lane.upsert(externals(&covered[known..]), &child);
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
        lane.upsert(externals(&remaining[..matched]), child);
        lane.upsert(externals(tail), &tail_node);
        lane.note(tail.len() as i64, 0);
        Ok(Some(Step::Done { changed: true }))
    }
}
