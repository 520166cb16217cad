//! Stores: the decode fast path, then the general planning path.
//!
//! Protocol. A store first resolves its slot and registers its rank on the
//! lane. If the fast path is on and the lane's entry for the parent names a
//! node, the strategy's `try_append_at_tail` gets one chance: in one critical
//! section it checks (leaf, not anchor, parent is the tail, rank full) and
//! appends; the new entries reuse the lane's hold on that node.
//!
//! Otherwise the general path runs in two walks that meet at one value, a
//! [`Placement`]:
//!
//! 1. The parent walk (`parent`) finds the node holding the parent hash,
//!    checks that the rank covers the parent and places what it can on that
//!    node's own edge. Its answer is a placement: the store is done, or the
//!    rest goes below a node.
//! 2. The child walk (`child`) takes a placement and places the remaining
//!    blocks below its node, one child at a time.
//!
//! Both walks place blocks after a known hash on an edge through `edge`
//! (plan against the edge, commit under the version of the plan); neither
//! walk calls the other. A store without a parent starts the child walk at
//! the root.
//!
//! Every commit validates the version its plan was made under; a stale plan
//! is re-made. Every section that adds coverage or a child to a node first
//! checks, inside the section, that the sweeper has not unlinked the node
//! (see `sweep`). A child found detached is re-planned from its parent; a
//! detached parent means the rank no longer covers it, so the store fails
//! with `ParentBlockNotFound`. Linked blocks, and dead nodes a store revives,
//! go to the lane's reclamation tally.

mod child;
mod edge;
mod parent;

use super::node::Node;
use super::{Guard, Lane, Tree};
use crate::types::{BlockPair, ExternalSequenceBlockHash, KvError, WorkerWithDpRank};
use crtc_strategies::sync::{spin_loop, Arc};
use crtc_strategies::{Reclaim, ShapeGate, Slot};

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

/// Where a store stands after the parent walk: the one value the parent
/// walk hands to the child walk.
enum Placement<G: ShapeGate> {
    /// Every block is in place on the parent's own edge; `changed` says
    /// whether any coverage or lookup changed.
    Done { changed: bool },
    /// The blocks still to place go below `node`, after `last` (the hash
    /// that must end `node`'s edge; `None` below the root).
    Below {
        node: Arc<Node<G>>,
        last: Option<ExternalSequenceBlockHash>,
    },
}

fn externals(blocks: &[BlockPair]) -> impl Iterator<Item = ExternalSequenceBlockHash> + '_ {
    blocks.iter().map(|b| b.external)
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
        let slot = self.join_rank(lane, rank, &guard)?;
        if let (true, Some(parent)) = (self.config.fast_path, parent) {
            if Self::try_fast_append(lane, slot, parent, blocks) {
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
        let placement = match parent {
            None => Placement::Below {
                node: Arc::clone(&self.root),
                last: None,
            },
            Some(parent) => self.place_at_parent(lane, &cx, parent, blocks)?,
        };
        let changed = match placement {
            Placement::Done { changed } => changed,
            Placement::Below { node, last } => self.place_below(lane, &cx, node, last, blocks)?,
        };
        Ok(StoreOutcome {
            fast_path: false,
            duplicate: !changed,
        })
    }

    /// The decode fast path through the lane's entry for the parent, borrowed.
    fn try_fast_append(
        lane: &mut Lane<G>,
        slot: Slot,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> bool {
        let appended = lane.append_below_entry(parent, externals(blocks), |node| {
            node.gate.try_append_at_tail(slot, parent, blocks)
        });
        match appended {
            None => false,
            Some(Ok(_)) => {
                lane.note(blocks.len() as i64, 0);
                lane.counters().fast_path_hits.add(1);
                true
            }
            Some(Err(miss)) => {
                lane.counters().fast_path_misses[miss.index()].add(1);
                false
            }
        }
    }

    /// Counts a restart of a stale plan and yields before re-planning.
    fn restart(lane: &Lane<G>) {
        lane.counters().restarts.add(1);
        spin_loop();
    }
}
