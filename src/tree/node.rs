//! A tree node: its gate (which owns the shape) and its children (which the
//! tree owns). Dropping a node frees its subtree iteratively, so a long
//! detached chain never recurses.
//!
//! Two words support stale-leaf reclamation (see `sweep`):
//!
//! * `unlinked` is set by the sweeper inside the node's exclusive section,
//!   right before it removes the node from its parent. Every writer section
//!   that adds coverage or a child to a node checks it first, inside its own
//!   section; the sections exclude each other, so either the writer's change
//!   lands first (and the sweeper sees a holder or a child and skips the
//!   node) or the writer sees the flag and re-plans from the parent. The one
//!   writer that does not check is the decode fast path: its eligibility
//!   needs the storing rank full on the node, and a detached node has no
//!   full rank (the sweeper unlinks only holder-less nodes, and every other
//!   section that adds coverage checks the flag). A writer holding a
//!   transient reference to a node therefore never writes into a detached
//!   node, without the sweeper having to count references.
//! * `lane_holds` counts the lanes whose lookups name the node. A lane
//!   changes it only for the first and last entry naming the node (not per
//!   event). The sweeper leaves held nodes alone (policy, not safety: the
//!   flag above is what makes unlinking sound).

use crate::tree::children::Children;
use crtc_strategies::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crtc_strategies::sync::Arc;
use crtc_strategies::{ShapeGate, ShapeInit};

/// One node of the tree.
pub struct Node<G: ShapeGate> {
    /// The node's shape, behind its strategy.
    pub gate: G,
    /// The node's children, keyed by the first local hash of their edges.
    pub children: Children<G>,
    unlinked: AtomicBool,
    lane_holds: AtomicUsize,
}

impl<G: ShapeGate> Node<G> {
    /// A node with shape `init` and no children.
    pub fn new(init: ShapeInit) -> Self {
        Self::with_children(init, Children::default())
    }

    /// A node with shape `init` owning `children` (a split's suffix).
    pub fn with_children(init: ShapeInit, children: Children<G>) -> Self {
        Self {
            gate: G::new(init),
            children,
            unlinked: AtomicBool::new(false),
            lane_holds: AtomicUsize::new(0),
        }
    }

    /// The root: an empty edge that is internal from the start (it never
    /// extends and only its children matter).
    pub fn root() -> Self {
        Self::new(ShapeInit {
            internal: true,
            ..ShapeInit::default()
        })
    }

    /// Address identity (nodes are compared by address, never by content).
    #[inline]
    pub fn addr(&self) -> usize {
        self as *const Self as usize
    }

    /// Whether the sweeper unlinked the node. Writers call it inside a
    /// section of this node.
    #[inline]
    pub fn is_unlinked(&self) -> bool {
        // Acquire: pairs with the Release in `mark_unlinked`; the sections
        // already order the two, this keeps the flag sound on its own.
        self.unlinked.load(Ordering::Acquire)
    }

    /// Marks the node unlinked. Only the sweeper, inside the node's
    /// exclusive section, right before it unlinks the node.
    pub fn mark_unlinked(&self) {
        // Release: pairs with the Acquire in `is_unlinked`.
        self.unlinked.store(true, Ordering::Release);
    }

    /// Number of lanes whose lookups name the node.
    #[inline]
    pub fn lane_holds(&self) -> usize {
        // Relaxed: a reclamation policy input only (see the module notes).
        self.lane_holds.load(Ordering::Relaxed)
    }

    /// A lane's first entry now names the node (`+1`) or its last entry
    /// left (`-1`).
    pub fn add_lane_hold(&self, delta: isize) {
        // Relaxed: policy input only; the lane's own `Arc` keeps the node alive.
        if delta >= 0 {
            self.lane_holds.fetch_add(delta as usize, Ordering::Relaxed);
        } else {
            // Relaxed: as above.
            self.lane_holds
                .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }
}

impl<G: ShapeGate> Drop for Node<G> {
    fn drop(&mut self) {
        let mut stack = self.children.take_all();
        while let Some(child) = stack.pop() {
            if let Ok(mut node) = Arc::try_unwrap(child) {
                stack.append(&mut node.children.take_all());
            }
        }
    }
}
