//! Our tree applied serially on the caller's thread: the "ours" side of the
//! cross-check against upstream.

use crate::compare::checks::crosscheck::SerialIndex;
use crtc::types::{LocalBlockHash, OverlapScores, RouterEvent, WorkerId};
use crtc::{Lane, Tree, TreeConfig};
use crtc_strategies::ShapeGate;

/// A [`Tree`] with one [`Lane`], applied on the caller's thread.
struct SerialTree<G: ShapeGate> {
    label: String,
    tree: Tree<G>,
    lane: Lane<G>,
}

impl<G: ShapeGate> SerialIndex for SerialTree<G> {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn apply(&mut self, event: &RouterEvent) {
        // A rejected event leaves the tree unchanged; the scores tell.
        let _ = self.tree.apply_event(&mut self.lane, event);
    }

    fn remove_worker(&mut self, worker: WorkerId) {
        self.tree.remove_worker(&mut [&mut self.lane], worker);
    }

    fn find_matches(&mut self, query: &[LocalBlockHash]) -> OverlapScores {
        self.tree.find_matches(query, false)
    }
}

/// Our tree over `G` with the fast path on or off, applied serially under
/// `label`.
pub fn build_serial<G: ShapeGate>(label: String, fast_path: bool) -> Box<dyn SerialIndex> {
    let tree = Tree::<G>::new(TreeConfig {
        fast_path,
        ..TreeConfig::default()
    });
    let lane = tree.new_lane();
    Box::new(SerialTree { label, tree, lane })
}
