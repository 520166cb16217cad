//! The parent walk of a store: from the parent hash to a [`Placement`].
//!
//! Protocol. The node holding the parent is the lane's entry for it, or an
//! anchor the rank joins (it is promoted on it). The walk checks under the
//! gate that the rank covers the parent (never attach coverage below a hole),
//! repairing a stale entry when the node no longer holds the parent and
//! never re-reading the entry after a repair; a parent the rank does not
//! cover there (the lane's directory entry is shared by its ranks) sends it
//! to the parent's anchor if there is one, else fails with
//! `ParentBlockNotFound`. It then places
//! the blocks after the parent on that node's edge (`edge`): the store ends
//! there, or the rest goes below the node (after a split right after the
//! parent when the edge diverged, whose suffix this lane's lookups are
//! redirected to).

use super::super::node::Node;
use super::super::repair::Direction;
use super::super::{Lane, Tree};
use super::edge::EdgeCommit;
use super::{externals, Cx, Placement};
use crate::types::{BlockPair, ExternalSequenceBlockHash, KvError};
use crtc_strategies::sync::Arc;
use crtc_strategies::{mutant, ShapeGate, ShapeRead};

impl<G: ShapeGate> Tree<G> {
    /// Places `blocks` after `parent` as far as the parent's own edge goes.
    pub(super) fn place_at_parent(
        &self,
        lane: &mut Lane<G>,
        cx: &Cx<'_, G>,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> Result<Placement<G>, KvError> {
        let not_found = || KvError::ParentBlockNotFound {
            rank: cx.rank,
            parent,
        };
        let mut node = match lane.entry(parent) {
            Some(id) => Arc::clone(lane.node(id)),
            None => self
                .join_anchor_parent(lane, cx, parent)
                .ok_or_else(not_found)?,
        };
        let mut joined = false;
        loop {
            let (covered, _) = node.gate.plan_in(cx.guard, |s| {
                s.position(parent)
                    .map(|pos| s.covered_len(cx.slot) > pos || mutant!(SharedEntrySkipsCoverage))
            });
            match covered {
                None => {
                    node = self
                        .repair(lane, &node, parent, Direction::TowardTail, cx.guard)
                        .or_else(|| self.join_anchor_parent(lane, cx, parent))
                        .ok_or_else(not_found)?;
                    continue;
                }
                Some(false) => {
                    // The entry is shared by the lane's ranks: another rank
                    // may hold the block where this one does not. An anchor
                    // is joined as a rank without an entry would join it.
                    if joined {
                        return Err(not_found());
                    }
                    joined = true;
                    node = self
                        .join_anchor_parent(lane, cx, parent)
                        .ok_or_else(not_found)?;
                    continue;
                }
                Some(true) => {}
            }
            match self.commit_after(lane, cx, &node, parent, blocks) {
                EdgeCommit::Stale => Self::restart(lane),
                EdgeCommit::Detached => return Err(not_found()),
                EdgeCommit::Reused { changed, known } => {
                    let updated = lane.upsert(externals(&blocks[known..]), &node);
                    return Ok(Placement::Done {
                        changed: changed || updated > 0,
                    });
                }
                EdgeCommit::InsertFrom { split } => {
                    if let Some(suffix) = split {
                        self.redirect_split(lane, &node, &suffix, cx.guard);
                    }
                    return Ok(Placement::Below {
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
        Self::join_anchor(lane, cx.slot, parent, &anchor);
        Some(anchor)
    }
}
