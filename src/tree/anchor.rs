//! Anchors: fixed one-block nodes that stand for a prefix the tree does not
//! hold (for example a shared system prompt indexed elsewhere).
//!
//! Protocol. The anchor map (`anchor id -> node, local hash, depth`) is an
//! immutable value published through an [`AtomicBox`]; creating an anchor
//! copies it under a mutex and publishes the copy, so readers load it under
//! their pin and borrow the node without reference counts. An anchor lives as
//! long as the tree: it is never removed from the map and never unlinked
//! (the sweeper skips anchors, though it reclaims their dead children). Its
//! node is marked `anchor` from creation, so its one-block edge never
//! changes: the fast path declines it, and the general path plans a store
//! under it as a tail insert and links the blocks as children (it never
//! extends or splits it).
//!
//! `apply_anchor` acquires the rank's slot (it may fail with
//! `CapacityExhausted`), creates the anchor if needed (the first caller's
//! local hash and depth stay), promotes the rank to full on it without a
//! version (the shape never changes) and names it in the lane, so a store
//! whose parent is the anchor id resolves to it. `find_matches_from_anchor`
//! walks from the anchor with the query `[anchor local] ++ suffix` and adds
//! `depth − 1` to every score.

use super::node::Node;
use super::{Guard, Lane, Tree};
use crate::types::{BlockPair, WorkerWithDpRank};
use crate::types::{ExternalSequenceBlockHash, KvError, LocalBlockHash, OverlapScores};
use crtc_strategies::shape::promote_full;
use crtc_strategies::sync::{Arc, Mutex};
use crtc_strategies::{mutant, AtomicBox, Reclaim, ShapeGate, ShapeInit, Slot};
use rustc_hash::FxHashMap;

/// One registered anchor.
pub(super) struct Anchor<G: ShapeGate> {
    pub(super) node: Arc<Node<G>>,
    pub(super) local: LocalBlockHash,
    pub(super) depth: u32,
}

impl<G: ShapeGate> Clone for Anchor<G> {
    fn clone(&self) -> Self {
        Self {
            node: Arc::clone(&self.node),
            local: self.local,
            depth: self.depth,
        }
    }
}

type AnchorMap<G> = FxHashMap<ExternalSequenceBlockHash, Anchor<G>>;

/// The anchors of one tree.
pub(super) struct Anchors<G: ShapeGate> {
    map: AtomicBox<AnchorMap<G>, G::Reclaim>,
    writers: Mutex<()>,
}

impl<G: ShapeGate> Default for Anchors<G> {
    fn default() -> Self {
        Self {
            map: AtomicBox::new(AnchorMap::default()),
            writers: Mutex::new(()),
        }
    }
}

impl<G: ShapeGate> Anchors<G> {
    /// The published map, valid while `guard` lives.
    pub(super) fn load<'g>(&'g self, guard: &'g Guard<G>) -> &'g AnchorMap<G> {
        self.map.load(guard)
    }

    /// The anchor `id`, created with `local` and `depth` if absent.
    fn get_or_insert(
        &self,
        id: ExternalSequenceBlockHash,
        local: LocalBlockHash,
        depth: u32,
        guard: &Guard<G>,
    ) -> Arc<Node<G>> {
        if let Some(anchor) = self.load(guard).get(&id) {
            return Arc::clone(&anchor.node);
        }
        // The lock makes the re-check and the copy one step: without it
        // (mutant `AnchorWritersUnlocked`) two creators copy the same map
        // and the later publication drops the other's anchor.
        let _writers = (!mutant!(AnchorWritersUnlocked)).then(|| self.writers.lock());
        let current = self.load(guard);
        if let Some(anchor) = current.get(&id) {
            return Arc::clone(&anchor.node);
        }
        let node = Arc::new(Node::new(ShapeInit {
            edge: vec![BlockPair {
                local,
                external: id,
            }],
            anchor: true,
            ..ShapeInit::default()
        }));
        let mut next = current.clone();
        let anchor = Anchor {
            node: Arc::clone(&node),
            local,
            depth,
        };
        next.insert(id, anchor);
        self.map.store(next, guard);
        node
    }
}

impl<G: ShapeGate> Tree<G> {
    /// Registers `rank` on the anchor `anchor_id` (a one-block node with
    /// local hash `anchor_local`, standing for a prefix of `anchor_depth`
    /// blocks), creating the anchor if needed. Later stores of the rank may
    /// name `anchor_id` as their parent. Fails closed with
    /// `CapacityExhausted` when the rank needs a slot and none is left.
    pub fn apply_anchor(
        &self,
        lane: &mut Lane<G>,
        rank: WorkerWithDpRank,
        anchor_id: ExternalSequenceBlockHash,
        anchor_local: LocalBlockHash,
        anchor_depth: u32,
    ) -> Result<(), KvError> {
        let guard = G::Reclaim::pin();
        let slot = self.join_rank(lane, rank, &guard)?;
        let node = self
            .anchors
            .get_or_insert(anchor_id, anchor_local, anchor_depth, &guard);
        Self::join_anchor(lane, slot, anchor_id, &node);
        Ok(())
    }

    /// Promotes `slot` on an anchor and names the anchor in the lane.
    pub(super) fn join_anchor(
        lane: &mut Lane<G>,
        slot: Slot,
        anchor_id: ExternalSequenceBlockHash,
        node: &Arc<Node<G>>,
    ) {
        let _ = node.gate.shared_commit(None, |w| promote_full(w, slot));
        lane.upsert([anchor_id], node);
    }

    /// The anchor `id`, as an owned reference.
    pub(super) fn anchor_node(
        &self,
        id: ExternalSequenceBlockHash,
        guard: &Guard<G>,
    ) -> Option<Arc<Node<G>>> {
        self.anchors
            .load(guard)
            .get(&id)
            .map(|a| Arc::clone(&a.node))
    }

    /// Every anchor node (for sweeps and diagnostics).
    pub(super) fn anchor_nodes(&self, guard: &Guard<G>) -> Vec<Arc<Node<G>>> {
        self.anchors
            .load(guard)
            .values()
            .map(|a| Arc::clone(&a.node))
            .collect()
    }

    /// Number of anchors.
    pub fn anchor_count(&self) -> usize {
        self.anchors.load(&G::Reclaim::pin()).len()
    }

    /// Scores every rank against `suffix` continuing the anchor `anchor_id`:
    /// the walk starts at the anchor, and each score counts the anchor's
    /// whole depth. An unknown anchor scores nothing.
    pub fn find_matches_from_anchor(
        &self,
        anchor_id: ExternalSequenceBlockHash,
        suffix: &[LocalBlockHash],
    ) -> OverlapScores {
        let guard = G::Reclaim::pin();
        let Some(anchor) = self.anchors.load(&guard).get(&anchor_id) else {
            return OverlapScores::default();
        };
        let mut query = Vec::with_capacity(suffix.len() + 1);
        query.push(anchor.local);
        query.extend_from_slice(suffix);
        super::matches::with_walk(|walk| {
            walk.credits.clear();
            Self::walk_from::<false>(&anchor.node, &query, false, &guard, walk);
            let table = self.slots.table(&guard);
            let mut scores = OverlapScores::default();
            for &(slot, score, _) in &walk.credits {
                let (Some(owner), Some(score)) = (
                    table.owner(slot),
                    (score as u32).saturating_add(anchor.depth).checked_sub(1),
                ) else {
                    continue;
                };
                if score > 0 {
                    scores.scores.insert(owner, score);
                }
            }
            scores
        })
    }
}
