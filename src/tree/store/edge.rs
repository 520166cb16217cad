//! Placing blocks after a known hash on one node's edge, shared by the
//! parent walk and the child walk.
//!
//! Protocol. The plan reads the edge under the gate and picks one of: the
//! hash ends the edge (the blocks go to a child), the blocks already follow
//! it on the edge (raise the rank's coverage up to them), the edge is a leaf
//! whose rest is a prefix of the blocks (extend the leaf in place), or the
//! edge diverges after the hash (split right after it). The commit runs under
//! the version the plan was made under (shared section for coverage,
//! exclusive for an extension or a split) and first checks that the sweeper
//! has not unlinked the node. A split moves the edge's rest and every child
//! to a new suffix node; the splitting lane then redirects its own lookups
//! for blocks now on the suffix.

use super::super::node::Node;
use super::super::{Guard, Lane, Tree};
use super::Cx;
use crate::types::{BlockPair, ExternalSequenceBlockHash};
use crtc_strategies::shape::{append_demoting, cover_prefix, promote_full, split_at};
use crtc_strategies::sync::Arc;
use crtc_strategies::{
    mutant, Commit, LocalBlockHash, ShapeGate, ShapeRead, Slot, SlotBits, Stale, Version,
};

/// A plan against the edge that holds a hash.
enum EdgePlan {
    Missing,
    TailInsert,
    ReuseExisting { cutoff: usize },
    ExtendLeaf { start: usize },
    Split { at: usize },
}

/// What committing blocks after a hash on an edge did.
pub(super) enum EdgeCommit<G: ShapeGate> {
    /// The plan went stale (or the hash left the edge): re-plan.
    Stale,
    /// The sweeper unlinked the node.
    Detached,
    /// The blocks are on the edge now; `changed` if coverage rose. The
    /// first `known` of them were within the lane's coverage before the
    /// commit, so their directory entries exist already (invariant D,
    /// `papers/protocols.md` §2.1).
    Reused { changed: bool, known: usize },
    /// The hash ends the edge (after the split into `split`, if one was
    /// needed): the blocks go below the node.
    InsertFrom { split: Option<Arc<Node<G>>> },
}

fn plan_after(
    shape: &impl ShapeRead,
    hash: ExternalSequenceBlockHash,
    blocks: &[BlockPair],
) -> EdgePlan {
    let Some(pos) = shape.position(hash) else {
        return EdgePlan::Missing;
    };
    let after = pos + 1;
    let rest = shape.len().saturating_sub(after);
    if rest == 0 {
        EdgePlan::TailInsert
    } else if blocks.len() <= rest && shape.pairs_match(after, blocks) {
        EdgePlan::ReuseExisting {
            cutoff: after + blocks.len(),
        }
    } else if !shape.is_internal()
        && blocks.len() > rest
        && shape.pairs_match(after, &blocks[..rest])
    {
        EdgePlan::ExtendLeaf { start: rest }
    } else {
        EdgePlan::Split { at: after }
    }
}

/// How many of `blocks`, which sit at `from` on the edge, lie within the
/// longest prefix a slot of `lane_slots` covers.
pub(super) fn known_blocks(
    shape: &impl ShapeRead,
    lane_slots: &SlotBits,
    from: usize,
    blocks: &[BlockPair],
) -> usize {
    let covered = if mutant!(StoreSkipPastLaneCoverage) {
        covered_by_every_slot(shape)
    } else {
        shape.covered_len_by_any(lane_slots)
    };
    covered.saturating_sub(from).min(blocks.len())
}

/// The longest prefix any slot on the node covers, whatever its lane: the
/// store skip of `Mutant::StoreSkipPastLaneCoverage`.
fn covered_by_every_slot(shape: &impl ShapeRead) -> usize {
    if shape.has_full() {
        return shape.len();
    }
    let mut longest = 0;
    shape.for_each_cutoff(|_, k| longest = longest.max(k as usize));
    longest.min(shape.len())
}

impl<G: ShapeGate> Tree<G> {
    /// Plans against the edge of `node` holding `hash` and commits the plan
    /// for `blocks`, which follow `hash`.
    pub(super) fn commit_after(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        node: &Arc<Node<G>>,
        hash: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> EdgeCommit<G> {
        let (plan, version) = node.gate.plan_in(cx.guard, |s| plan_after(s, hash, blocks));
        let committed = match plan {
            EdgePlan::Missing => Err(Stale),
            EdgePlan::TailInsert => node.gate.shared(Some(version), || {
                if node.is_unlinked() {
                    return EdgeCommit::Detached;
                }
                EdgeCommit::InsertFrom { split: None }
            }),
            EdgePlan::ReuseExisting { cutoff } => node.gate.shared_commit(Some(version), |w| {
                if node.is_unlinked() {
                    return EdgeCommit::Detached;
                }
                let known = known_blocks(w, lane.slot_mask(), cutoff - blocks.len(), blocks);
                let changed = cover_prefix(w, cx.slot, cutoff);
                EdgeCommit::Reused { changed, known }
            }),
            EdgePlan::ExtendLeaf { start } => {
                self.extend_leaf(lane, cx, node, blocks, start, version)
            }
            EdgePlan::Split { at } => self
                .split_node(lane, node, at, version, None, cx.guard)
                .map(|split| match split {
                    Some(suffix) => EdgeCommit::InsertFrom {
                        split: Some(suffix),
                    },
                    None => EdgeCommit::Detached,
                }),
        };
        committed.unwrap_or(EdgeCommit::Stale)
    }

    /// Extends the leaf `node` with `blocks[start..]` (the plan found the
    /// first `start` blocks ending its edge).
    fn extend_leaf(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        node: &Node<G>,
        blocks: &[BlockPair],
        start: usize,
        version: Version,
    ) -> Result<EdgeCommit<G>, Stale> {
        let tail = &blocks[start..];
        let committed = node.gate.exclusive_commit(Some(version), |w| {
            if node.is_unlinked() {
                return Commit::unchanged(EdgeCommit::Detached);
            }
            if w.is_internal() {
                return Commit::unchanged(EdgeCommit::Stale);
            }
            let from = w.len() - (blocks.len() - tail.len());
            let known = known_blocks(w, lane.slot_mask(), from, blocks);
            append_demoting(w, cx.slot, tail);
            Commit::changed(EdgeCommit::Reused {
                changed: true,
                known,
            })
        })?;
        if let EdgeCommit::Reused { .. } = committed {
            lane.note(tail.len() as i64, 0);
        }
        Ok(committed)
    }

    /// Splits `node` at `at` under its exclusive section: the node keeps the
    /// prefix; a new suffix node takes the rest of the edge and every child.
    /// With `tail`, the store's diverging tail becomes the prefix's second
    /// child and the storing slot is promoted to full on the prefix. `None`
    /// if the sweeper unlinked the node.
    pub(super) fn split_node(
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
            // SAFETY: `moved` goes into `suffix`, which `publish` below links
            // under `node` in this same section; nothing in between unwinds
            // (allocation failure aborts).
            let moved = unsafe { node.children.take_for_split() };
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
    pub(super) fn redirect_split(
        &self,
        lane: &mut Lane<G>,
        prefix: &Node<G>,
        suffix: &Arc<Node<G>>,
        guard: &Guard<G>,
    ) {
        if lane.id_of(prefix).is_none() {
            return;
        }
        self.redirect_entries(lane, prefix, suffix, |covered| 0..covered, guard);
    }
}
