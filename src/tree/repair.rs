//! Lazy lookup repair.
//!
//! Protocol. A lane entry may name a node that no longer holds the block
//! (another lane split it and the block moved to a suffix). Repair runs only
//! when a locked operation reported the block missing: it searches the stale
//! node's descendants breadth first for the block, then moves this lane's
//! entries that still name the stale node onto the node found — toward the
//! tail (stores: from the block to each rank's covered end) or toward the head
//! (removals: from the head up to the block). Entries that name other nodes
//! are left alone. Callers continue with the node returned and never re-read
//! the entry, which may legitimately still name the stale node.

use super::node::Node;
use super::{Guard, Lane, Tree};
use crate::types::ExternalSequenceBlockHash;
use crtc_strategies::sync::Arc;
use crtc_strategies::{ShapeGate, ShapeRead};
use std::collections::VecDeque;
use std::ops::Range;

/// Which entries a successful repair moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Direction {
    /// From the block to each rank's covered end (stores).
    TowardTail,
    /// From the head up to the block (removals).
    TowardHead,
}

impl<G: ShapeGate> Tree<G> {
    /// Finds the descendant of `stale` holding `hash` and redirects this
    /// lane's entries onto it.
    pub(super) fn repair(
        &self,
        lane: &mut Lane<G>,
        stale: &Arc<Node<G>>,
        hash: ExternalSequenceBlockHash,
        direction: Direction,
        guard: &Guard<G>,
    ) -> Option<Arc<Node<G>>> {
        lane.counters().repairs.add(1);
        let mut queue: VecDeque<_> = stale
            .children
            .snapshot(guard)
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        while let Some(node) = queue.pop_front() {
            if let Some(pos) = node.gate.read_in(guard, |s| s.position(hash)) {
                let range = |covered: usize| match direction {
                    Direction::TowardTail => pos..covered.max(pos),
                    Direction::TowardHead => 0..pos.min(covered),
                };
                self.redirect_entries(lane, stale, &node, range, guard);
                return Some(node);
            }
            queue.extend(node.children.snapshot(guard).into_iter().map(|(_, c)| c));
        }
        None
    }

    /// Moves this lane's entries that still name `from` onto `to`: the
    /// entries of the blocks at the positions of `to`'s edge in
    /// `range(covered)`, where `covered` is the lane's coverage there (the
    /// longest prefix a slot of the lane covers; repairs, and the splitting
    /// lane's own redirect after a split).
    pub(super) fn redirect_entries(
        &self,
        lane: &mut Lane<G>,
        from: &Node<G>,
        to: &Arc<Node<G>>,
        range: impl Fn(usize) -> Range<usize>,
        guard: &Guard<G>,
    ) {
        let mut moves = Vec::new();
        to.gate.read_in(guard, |s| {
            moves.clear();
            let positions = range(s.covered_len_by_any(lane.slot_mask()));
            moves.extend(positions.map(|p| s.pair(p).external));
        });
        for hash in moves {
            lane.redirect(hash, from, to);
        }
    }
}
