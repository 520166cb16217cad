//! A tree node: its gate (which owns the shape) and its children (which the
//! tree owns). Dropping a node frees its subtree iteratively, so a long
//! detached chain never recurses.

use crate::tree::children::Children;
use crtc_strategies::sync::Arc;
use crtc_strategies::{ShapeGate, ShapeInit};

/// One node of the tree.
pub struct Node<G: ShapeGate> {
    /// The node's shape, behind its strategy.
    pub gate: G,
    /// The node's children, keyed by the first local hash of their edges.
    pub children: Children<G>,
}

impl<G: ShapeGate> Node<G> {
    /// A node with shape `init` and no children.
    pub fn new(init: ShapeInit) -> Self {
        Self {
            gate: G::new(init),
            children: Children::default(),
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
