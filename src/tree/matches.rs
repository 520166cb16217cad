//! `find_matches`: per-rank overlap of a query with the tree.
//!
//! Protocol. A lookup whose first hash the root's key counts say no child
//! starts returns no scores before it pins (`key_filter` argues why that
//! misses only children linked concurrently). Otherwise the reader pins
//! once and loads the slot table once. It starts at
//! the root's child keyed by the first query hash. On the first node the
//! active set is the node's full bits, and cutoff slots score directly. On
//! every later node the active set is intersected with the node's full bits —
//! always, even when the sizes are equal — and each dropped slot scores
//! `depth + min(cutoff, matched)`; a cutoff counts only for a slot that was
//! full on every node before. The walk stops at a partial edge match, an empty
//! active set, a missing child, or (early exit) one survivor. Each node is
//! read in one `read` section of its gate, which yields the edge match, the
//! coverage change and the next child from one consistent view; the closure
//! writes only its own scratch buffers, so an optimistic gate may re-run it.
//! No reference counts are taken, and nothing is allocated per lookup but
//! the result: the walk's buffers (the credits, the hop's scratch, the
//! active set) are the calling thread's, kept between lookups (a nested or
//! re-entered walk on the same thread gets fresh ones). The last matched
//! external hash per credit is read only for `find_match_details`.
//!
//! Across hops a reader may see adjacent shapes, and may only undercount.
//! Each hop is validated on its own; the child pointer comes out of the
//! parent's validated view, and the pin keeps the child's memory alive.
//! We do not couple hops (read the child's version before validating the
//! parent, as B-tree OLC does) because this tree needs no cross-hop snapshot
//! for C1: a node is never replaced (a split keeps the prefix in place and
//! moves the suffix to a new child, so a child pointer read before the split
//! still leads to a correct continuation); a node the sweep unlinked has no
//! holders, so it credits no one; and a rank can become full on a child only
//! through a store whose parent it covered at that instant (coverage is a
//! prefix per node, and stores under uncovered parents are rejected). So a
//! rank found full on the parent at `t1` and on the child at `t2` held both
//! edges at `t1` if it was full on the child then, and otherwise at the
//! instant of the store that made it full there: the credit is at most a
//! prefix it held at some instant during the read (C1). The loom reader models (a reader against a split and
//! against a removal) and the soak check this on every gate.

use super::node::Node;
use super::Tree;
use crate::types::{ExternalSequenceBlockHash, LocalBlockHash, MatchDetails, OverlapScores};
use crtc_strategies::{Guard, Reclaim, ShapeGate, ShapeRead, Slot, SlotBits};
use std::cell::RefCell;

/// One credit: a slot, its score, and the external hash of its last block.
pub(super) type Credit = (Slot, usize, Option<ExternalSequenceBlockHash>);

/// The result of reading one node.
struct Hop<'g, G: ShapeGate> {
    matched: usize,
    last: Option<ExternalSequenceBlockHash>,
    next: Option<&'g Node<G>>,
}

/// Buffers a walk reuses across hops.
#[derive(Default)]
struct Scratch {
    words: Vec<u64>,
    dropped: Vec<(Slot, usize, Option<ExternalSequenceBlockHash>)>,
}

/// A walk's buffers: the hop's scratch, the active set and the credits.
#[derive(Default)]
pub(super) struct Walk {
    scratch: Scratch,
    active: SlotBits,
    /// The walk's result.
    pub(super) credits: Vec<Credit>,
}

thread_local! {
    static WALK: RefCell<Walk> = RefCell::new(Walk::default());
}

/// Runs `f` with this thread's walk buffers (fresh ones when they are in
/// use or gone), as the last walk left them: the caller clears the credits,
/// and `walk_from` clears the active set and each hop's scratch.
pub(super) fn with_walk<R>(f: impl FnOnce(&mut Walk) -> R) -> R {
    let mut f = Some(f);
    let reused = WALK.try_with(|cell| {
        cell.try_borrow_mut()
            .ok()
            .map(|mut walk| (f.take().expect("called once"))(&mut walk))
    });
    match (reused, f) {
        (Ok(Some(value)), _) => value,
        (_, Some(f)) => f(&mut Walk::default()),
        (_, None) => unreachable!("f ran, so it returned"),
    }
}

/// The external hash of the `credited`th block, if the walk wants it
/// (`LAST`: a constant, so a walk for scores alone carries no hashes).
#[inline]
fn last_of<const LAST: bool>(
    shape: &impl ShapeRead,
    credited: usize,
) -> Option<ExternalSequenceBlockHash> {
    (LAST && credited > 0).then(|| shape.pair(credited - 1).external)
}

fn record_first<const LAST: bool>(shape: &impl ShapeRead, matched: usize, scratch: &mut Scratch) {
    scratch
        .words
        .extend((0..shape.full_word_count()).map(|i| shape.full_word(i)));
    shape.for_each_cutoff(|slot, k| {
        let credited = (k as usize).min(matched);
        if credited > 0 {
            let last = last_of::<LAST>(shape, credited);
            scratch.dropped.push((slot, credited, last));
        }
    });
}

fn record_later<const LAST: bool>(
    shape: &impl ShapeRead,
    matched: usize,
    active: &SlotBits,
    scratch: &mut Scratch,
) {
    active.for_each_word(|index, word| {
        let kept = word & shape.full_word(index);
        scratch.words.push(kept);
        let mut gone = word & !kept;
        while gone != 0 {
            let slot = Slot((index * 64) as u16 + gone.trailing_zeros() as u16);
            let credited = shape.cutoff(slot).map_or(0, |k| (k as usize).min(matched));
            let last = last_of::<LAST>(shape, credited);
            scratch.dropped.push((slot, credited, last));
            gone &= gone - 1;
        }
    });
}

impl<G: ShapeGate> Tree<G> {
    /// Scores every rank by how many leading blocks of `query` it holds.
    pub fn find_matches(&self, query: &[LocalBlockHash], early_exit: bool) -> OverlapScores {
        if !self.root_may_hold(query) {
            return OverlapScores::default();
        }
        let guard = G::Reclaim::pin();
        with_walk(|walk| {
            self.walk::<false>(query, early_exit, &guard, walk);
            let table = self.slots.table(&guard);
            let mut scores = OverlapScores::default();
            scores.scores.reserve(walk.credits.len());
            for &(slot, score, _) in &walk.credits {
                if let Some(owner) = table.owner(slot) {
                    scores.scores.insert(owner, score as u32);
                }
            }
            scores
        })
    }

    /// Like [`Tree::find_matches`], plus the last matched external hash per rank.
    pub fn find_match_details(&self, query: &[LocalBlockHash], early_exit: bool) -> MatchDetails {
        if !self.root_may_hold(query) {
            return MatchDetails::default();
        }
        let guard = G::Reclaim::pin();
        with_walk(|walk| {
            self.walk::<true>(query, early_exit, &guard, walk);
            let table = self.slots.table(&guard);
            let mut details = MatchDetails::default();
            for &(slot, score, last) in &walk.credits {
                let Some(owner) = table.owner(slot) else {
                    continue;
                };
                details.scores.scores.insert(owner, score as u32);
                if let Some(last) = last {
                    details.last_matched.insert(owner, last);
                }
            }
            details
        })
    }

    /// Whether a child of the root may start `query`: false (no child
    /// did, when the root's key count was read) answers the lookup with no
    /// scores, unpinned and unlocked (`key_filter`).
    #[inline]
    fn root_may_hold(&self, query: &[LocalBlockHash]) -> bool {
        query
            .first()
            .is_some_and(|&key| self.root_keys.may_hold(key))
    }

    /// The walk from the root (`LAST`: read each credit's last matched hash).
    fn walk<const LAST: bool>(
        &self,
        query: &[LocalBlockHash],
        early_exit: bool,
        guard: &Guard<G>,
        walk: &mut Walk,
    ) {
        walk.credits.clear();
        if let Some(node) = query
            .first()
            .and_then(|&key| self.root.children.get(key, guard))
        {
            Self::walk_from::<LAST>(node, query, early_exit, guard, walk);
        }
    }

    /// The walk from `node`, whose first edge block is `query[0]`'s match,
    /// into `walk.credits` (which the caller cleared).
    pub(super) fn walk_from<'g, const LAST: bool>(
        mut node: &'g Node<G>,
        query: &[LocalBlockHash],
        early_exit: bool,
        guard: &'g Guard<G>,
        walk: &mut Walk,
    ) {
        let Walk {
            scratch,
            active,
            credits,
        } = walk;
        active.clear();
        let (mut depth, mut first, mut prev_last) = (0, true, None);
        loop {
            let rest = &query[depth..];
            let hop = Self::read_hop::<LAST>(node, rest, first, active, scratch, guard);
            active.assign_words(&scratch.words);
            for &(slot, credited, last) in &scratch.dropped {
                if depth + credited > 0 {
                    credits.push((slot, depth + credited, last.or(prev_last)));
                }
            }
            prev_last = hop.last.or(prev_last);
            first = false;
            if active.is_empty() {
                return;
            }
            depth += hop.matched;
            let Some(next) = hop.next.filter(|_| !(early_exit && active.len() == 1)) else {
                break;
            };
            node = next;
        }
        if depth > 0 {
            active.for_each_slot(|slot| credits.push((slot, depth, prev_last)));
        }
    }

    fn read_hop<'g, const LAST: bool>(
        node: &'g Node<G>,
        rest: &[LocalBlockHash],
        first: bool,
        active: &SlotBits,
        scratch: &mut Scratch,
        guard: &'g Guard<G>,
    ) -> Hop<'g, G> {
        node.gate.read_in(guard, |shape| {
            scratch.words.clear();
            scratch.dropped.clear();
            let edge_len = shape.len();
            let matched = (1 + shape.match_locals(1, rest.get(1..).unwrap_or_default()))
                .min(edge_len)
                .min(rest.len());
            if first {
                record_first::<LAST>(shape, matched, scratch);
            } else {
                record_later::<LAST>(shape, matched, active, scratch);
            }
            let last = last_of::<LAST>(shape, matched);
            let descend = matched == edge_len && matched < rest.len();
            let next = descend
                .then(|| node.children.get(rest[matched], guard))
                .flatten();
            Hop {
                matched,
                last,
                next,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::with_walk;
    use crtc_strategies::Slot;

    /// A walk on a thread whose buffers are in use (a walk inside a walk)
    /// gets fresh, empty ones and leaves the outer walk's credits alone.
    #[test]
    fn a_nested_walk_gets_its_own_buffers() {
        with_walk(|outer| {
            outer.credits.push((Slot(1), 1, None));
            with_walk(|inner| {
                assert!(inner.credits.is_empty());
                inner.credits.push((Slot(2), 2, None));
            });
            assert_eq!(outer.credits, [(Slot(1), 1, None)]);
        });
    }
}
