//! `dump_events`: the tree as `Stored` events (diagnostic, not a cut).
//!
//! Protocol. Starting at the root's live children (a child is live if it has
//! holders or children) and at every anchor's live children (parent = the
//! anchor id; only ranks full on the anchor may appear), each chain of nodes
//! is merged while a node has no cutoffs and exactly one live child that has
//! no cutoffs and the same non-empty full set. Each merged chain emits one
//! store per full rank and one per cutoff rank (its covered prefix), under
//! the chain's parent. Like a reader, a rank is emitted below a parent only
//! if it covered every node on the path there. One pin and one slot table serve the whole dump.

use super::node::Node;
use super::Tree;
use crate::types::{BlockPair, ExternalSequenceBlockHash, RouterEvent};
use crtc_strategies::sync::Arc;
use crtc_strategies::{Guard, Reclaim, ShapeGate, ShapeRead, Slot, SlotBits};

/// What one node contributes to a dump.
struct NodeDump {
    edge: Vec<BlockPair>,
    full: SlotBits,
    cutoffs: Vec<(Slot, u32)>,
}

/// A chain start: its parent hash, its first node, and the slots allowed to
/// appear (those full on the whole path above; `None` at the root).
type Pending<G> = (
    Option<ExternalSequenceBlockHash>,
    Arc<Node<G>>,
    Option<SlotBits>,
);

impl<G: ShapeGate> Tree<G> {
    /// The tree as `Stored` events, parents before children.
    pub fn dump_events(&self) -> Vec<RouterEvent> {
        let guard = G::Reclaim::pin();
        let table = self.slots.table(&guard);
        let mut events = Vec::new();
        let mut pending: Vec<Pending<G>> = Self::live_children(&self.root, &guard)
            .into_iter()
            .map(|c| (None, c, None))
            .collect();
        for (&id, anchor) in self.anchors.load(&guard) {
            let full = Self::dump_node(&anchor.node).full;
            let kids = Self::live_children(&anchor.node, &guard);
            pending.extend(kids.into_iter().map(|c| (Some(id), c, Some(full.clone()))));
        }
        while let Some((parent, start, allowed)) = pending.pop() {
            let (edge, last, kids) = Self::merge_chain(start, &guard);
            let permitted = |slot: Slot| allowed.as_ref().is_none_or(|a| a.contains(slot));
            let offset = edge.len() - last.edge.len();
            for slot in last.full.iter().filter(|&s| permitted(s)) {
                if let Some(owner) = table.owner(slot) {
                    events.push(RouterEvent::stored(owner, parent, edge.clone()));
                }
            }
            for &(slot, k) in last.cutoffs.iter().filter(|(s, _)| permitted(*s)) {
                if let Some(owner) = table.owner(slot) {
                    let covered = (offset + k as usize).min(edge.len());
                    events.push(RouterEvent::stored(owner, parent, edge[..covered].to_vec()));
                }
            }
            let mut below = last.full.clone();
            if let Some(allowed) = &allowed {
                below.retain_words(|i| allowed.word(i), |_| {});
            }
            let tail = edge.last().map(|b| b.external);
            pending.extend(kids.into_iter().map(|kid| (tail, kid, Some(below.clone()))));
        }
        for (id, event) in events.iter_mut().enumerate() {
            event.event.event_id = id as u64;
        }
        events
    }

    /// Follows a mergeable chain from `start`: the merged edge, the last
    /// node's dump, and that node's live children.
    fn merge_chain(
        start: Arc<Node<G>>,
        guard: &Guard<G>,
    ) -> (Vec<BlockPair>, NodeDump, Vec<Arc<Node<G>>>) {
        let mut edge = Vec::new();
        let mut node = start;
        loop {
            let dump = Self::dump_node(&node);
            let kids = Self::live_children(&node, guard);
            edge.extend_from_slice(&dump.edge);
            let mergeable =
                dump.cutoffs.is_empty() && !dump.full.is_empty() && kids.len() == 1 && {
                    let kid = Self::dump_node(&kids[0]);
                    kid.cutoffs.is_empty() && kid.full == dump.full
                };
            if !mergeable {
                return (edge, dump, kids);
            }
            node = Arc::clone(&kids[0]);
        }
    }

    fn dump_node(node: &Node<G>) -> NodeDump {
        node.gate
            .plan(|s| {
                let mut dump = NodeDump {
                    edge: Vec::new(),
                    full: SlotBits::new(),
                    cutoffs: Vec::new(),
                };
                s.copy_pairs(0..s.len(), &mut dump.edge);
                s.full_slots().into_iter().for_each(|slot| {
                    dump.full.insert(slot);
                });
                s.for_each_cutoff(|slot, k| dump.cutoffs.push((slot, k)));
                dump
            })
            .0
    }

    fn live_children(node: &Node<G>, guard: &Guard<G>) -> Vec<Arc<Node<G>>> {
        node.children
            .snapshot(guard)
            .into_iter()
            .map(|(_, child)| child)
            .filter(|child| child.gate.read(|s| s.has_holders()) || child.children.len(guard) > 0)
            .collect()
    }
}
