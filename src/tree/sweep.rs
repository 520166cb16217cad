//! The stale-leaf sweep: one pass that unlinks holder-less leaves (when it
//! runs is `scheduler`'s business).
//!
//! Protocol.
//!
//! *The sweep* ([`Tree::sweep_stale`]). Walk from the root and every anchor,
//! counting nodes, linked blocks and dead blocks (blocks of holder-less
//! nodes), and recording every holder-less non-anchor child as a candidate
//! together with its parent; descend only into children that have children.
//! Then try the candidates in reverse discovery order, so a node's
//! descendants come before it: a holder-less internal node whose children
//! were all unlinked earlier in the pass goes too (cascade in one pass). A
//! candidate is unlinked inside its parent's exclusive section, and in a
//! nested exclusive section of the candidate itself (lock order is always
//! parent before child): it must still be attached under its key, not an
//! anchor, without holders, without children, and named by no lane lookup.
//! It is then marked `unlinked` and removed from the parent's child map,
//! which bumps the parent's version; a sharded map left with at most four
//! children is republished compact, so memory follows the live fanout.
//! Writers check the mark inside their own sections (see `node`), so a store
//! that reached the candidate through a transient reference re-plans from
//! the parent instead of writing into a detached node; readers borrow nodes
//! under their pin and a detached leaf has no holders, so they never credit
//! anything there. The sweeper then waits out the grace period of what it
//! retired and runs those frees itself (`Reclaim::wait_for_pinned_threads`;
//! callers are never pinned), so a burst of unlinked nodes is not freed
//! inside readers' pins. Finally the estimates are overwritten with the
//! sweep's exact recount.
//!
//! *Reference choice.* Upstream decides "nothing but the parent references
//! the candidate" from `Arc::strong_count`, which must subtract child-map
//! snapshots retired but not yet freed. We instead use the per-node lane-hold
//! count for lookups (the only long-lived references) and the `unlinked`
//! mark for transient ones: no reference counting subtleties, and a writer
//! racing the unlink is excluded by the gate rather than by a count.

use super::node::Node;
use super::scheduler::{FlagGuard, SweepClaim};
use super::{Guard, Tree};
use crtc_strategies::sync::Arc;
use crtc_strategies::{Commit, LocalBlockHash, Reclaim, ShapeGate, ShapeRead};

/// Parents a sweep visits before it re-pins.
const SWEEP_REPIN: usize = 64;

/// What one sweep found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Nodes visited (root and anchors excluded).
    pub nodes: u64,
    /// Blocks on the visited nodes.
    pub linked: u64,
    /// Blocks on holder-less visited nodes.
    pub dead: u64,
    /// Nodes unlinked.
    pub unlinked: u64,
    /// Blocks on the unlinked nodes.
    pub reclaimed: u64,
    /// Candidates skipped because a lane lookup names them.
    pub held: u64,
    /// Candidates skipped because they gained holders or children meanwhile.
    pub busy: u64,
    /// Wall time of the sweep in microseconds.
    pub micros: u64,
}

/// A holder-less child found by the walk.
struct Candidate<G: ShapeGate> {
    parent: Arc<Node<G>>,
    key: LocalBlockHash,
    child: Arc<Node<G>>,
    len: u64,
}

/// What trying one candidate did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unlink {
    Unlinked,
    Held,
    Busy,
    Detached,
}

impl<G: ShapeGate> Tree<G> {
    /// Runs the sweep `claim` was granted for, then frees the flag.
    pub(crate) fn run_sweep(&self, claim: SweepClaim) -> SweepStats {
        let SweepClaim { .. } = claim;
        let mut flag = FlagGuard {
            trigger: &self.trigger,
            armed: true,
        };
        let start = self.now_us();
        let (mut stats, candidates) = self.find_candidates();
        let guard = G::Reclaim::pin();
        for candidate in candidates.iter().rev() {
            match Self::unlink_if_stale(candidate, &guard) {
                Unlink::Unlinked => {
                    if Arc::ptr_eq(&candidate.parent, &self.root) {
                        self.root_keys.sub(candidate.key);
                    }
                    stats.unlinked += 1;
                    stats.reclaimed += candidate.len;
                }
                Unlink::Held => stats.held += 1,
                Unlink::Busy => stats.busy += 1,
                Unlink::Detached => {}
            }
        }
        drop(guard);
        drop(candidates);
        // The unlinked nodes were retired in a burst; free them here rather
        // than in whichever thread's pin next collects (crossbeam-epoch makes
        // every 128th pin run up to eight bags of garbage, which put readers'
        // p99 under a churning storm at tens of microseconds). The wait ends
        // once its own marker has run, and garbage of the burst was still
        // queued then: on the chat preset's final sweep (7,515 nodes
        // unlinked) the index held 1,224,744 bytes after the wait and
        // 990,608 after one more collection (`crtc compare --workload chat
        // --scale 4`, rwlock; commit message).
        G::Reclaim::wait_for_pinned_threads();
        G::Reclaim::collect();
        let end = self.now_us();
        stats.micros = end.saturating_sub(start);
        flag.armed = false;
        self.trigger.finish(
            end,
            stats.micros,
            stats.linked.saturating_sub(stats.reclaimed),
            stats.dead.saturating_sub(stats.reclaimed),
        );
        stats
    }

    /// The walk: counts everything reachable and lists the holder-less
    /// children, parents before their descendants.
    fn find_candidates(&self) -> (SweepStats, Vec<Candidate<G>>) {
        let mut guard = G::Reclaim::pin();
        let mut stats = SweepStats::default();
        let mut candidates = Vec::new();
        let mut queue = vec![Arc::clone(&self.root)];
        queue.extend(self.anchor_nodes(&guard));
        let mut parents = 0;
        while let Some(parent) = queue.pop() {
            for (key, child) in parent.children.snapshot(&guard) {
                let (len, holders, anchor) = child
                    .gate
                    .read_in(&guard, |s| (s.len() as u64, s.has_holders(), s.is_anchor()));
                stats.nodes += 1;
                stats.linked += len;
                if child.children.len(&guard) > 0 {
                    queue.push(Arc::clone(&child));
                }
                if !holders && !anchor {
                    stats.dead += len;
                    candidates.push(Candidate {
                        parent: Arc::clone(&parent),
                        key,
                        child,
                        len,
                    });
                }
            }
            parents += 1;
            if parents % SWEEP_REPIN == 0 {
                guard = G::Reclaim::pin();
            }
        }
        (stats, candidates)
    }

    /// Unlinks `candidate` if it is still attached, holder-less, childless,
    /// not an anchor and named by no lane.
    fn unlink_if_stale(candidate: &Candidate<G>, guard: &Guard<G>) -> Unlink {
        let Candidate {
            parent, key, child, ..
        } = candidate;
        let outcome = parent.gate.exclusive_commit(None, |_| {
            let attached = parent
                .children
                .get(*key, guard)
                .is_some_and(|c| std::ptr::eq(c, &**child));
            if !attached {
                return Commit::unchanged(Unlink::Detached);
            }
            let verdict = child
                .gate
                .exclusive_commit(None, |w| {
                    if w.is_anchor() || w.has_holders() || child.children.len(guard) > 0 {
                        return Commit::unchanged(Unlink::Busy);
                    }
                    if child.lane_holds() > 0 {
                        return Commit::unchanged(Unlink::Held);
                    }
                    child.mark_unlinked();
                    Commit::changed(Unlink::Unlinked)
                })
                .unwrap_or(Unlink::Busy);
            if verdict == Unlink::Unlinked {
                parent.children.remove(*key, child, guard);
                parent.children.compact(guard);
            }
            Commit {
                value: verdict,
                shape_changed: verdict == Unlink::Unlinked,
            }
        });
        outcome.unwrap_or(Unlink::Busy)
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use super::*;

    fn holderless(local: u64) -> Arc<Node<crtc_strategies::RwLockGate>> {
        Arc::new(Node::new(crtc_strategies::ShapeInit {
            edge: vec![crtc_strategies::BlockPair::new(local, local)],
            ..Default::default()
        }))
    }

    #[test]
    fn sweep_cascades_through_dead_internal_nodes() {
        // Holder-less internal nodes do not arise from sequential streams
        // (a node left without full ranks drops its children), only from
        // races; build one by hand: root -> p -> {c1, c2}, all holder-less.
        let tree = Tree::<crtc_strategies::RwLockGate>::default();
        let (p, c1, c2) = (holderless(1), holderless(2), holderless(3));
        {
            let guard = crtc_strategies::EpochReclaim::pin();
            tree.root
                .children
                .insert_if_absent(LocalBlockHash(1), &p, &guard);
            tree.root_keys.add(LocalBlockHash(1));
            p.children.insert_if_absent(LocalBlockHash(2), &c1, &guard);
            p.children.insert_if_absent(LocalBlockHash(3), &c2, &guard);
        }
        assert_eq!(tree.node_count(), 3);
        let stats = tree.sweep_stale().unwrap();
        assert_eq!((stats.nodes, stats.dead, stats.unlinked), (3, 3, 3));
        assert_eq!(tree.node_count(), 0);
        assert!(p.is_unlinked() && c1.is_unlinked() && c2.is_unlinked());
        assert_eq!(tree.reclaim_estimates(), (0, 0));
    }

    #[test]
    fn root_child_map_shrinks_once_few_children_are_left() {
        let tree = Tree::<crtc_strategies::RwLockGate>::default();
        let children: Vec<_> = (1..=512).map(holderless).collect();
        let guard = crtc_strategies::EpochReclaim::pin();
        for (local, child) in (1..).zip(&children) {
            tree.root
                .children
                .insert_if_absent(LocalBlockHash(local), child, &guard);
            tree.root_keys.add(LocalBlockHash(local));
        }
        let grown = tree.root.children.footprint(&guard);
        for (local, child) in (1..).zip(&children[..500]) {
            assert!(tree
                .root
                .children
                .remove(LocalBlockHash(local), child, &guard));
        }
        let left = tree.root.children.footprint(&guard);
        assert_eq!(tree.root.children.len(&guard), 12);
        assert!(
            left * 4 < grown,
            "{grown} bytes for 512 children, {left} for 12"
        );
    }

    #[test]
    fn sweep_frees_what_it_unlinked_before_it_returns() {
        // Small under miri (`.ci/miri.sh` runs the sweep tests).
        let leaves = if cfg!(miri) { 64 } else { 4096 };
        let tree = Tree::<crtc_strategies::RwLockGate>::default();
        let weak: Vec<_> = {
            let guard = crtc_strategies::EpochReclaim::pin();
            (1..=leaves)
                .map(|local| {
                    let child = holderless(local);
                    tree.root
                        .children
                        .insert_if_absent(LocalBlockHash(local), &child, &guard);
                    tree.root_keys.add(LocalBlockHash(local));
                    Arc::downgrade(&child)
                })
                .collect()
        };
        assert_eq!(tree.sweep_stale().unwrap().unlinked, leaves);
        let alive = weak.iter().filter(|w| w.upgrade().is_some()).count();
        assert_eq!(alive, 0, "unlinked nodes still allocated after the sweep");
    }

    #[test]
    fn sweep_leaves_busy_and_held_nodes() {
        let tree = Tree::<crtc_strategies::RwLockGate>::default();
        let (held, live) = (holderless(1), holderless(2));
        {
            let guard = crtc_strategies::EpochReclaim::pin();
            tree.root
                .children
                .insert_if_absent(LocalBlockHash(1), &held, &guard);
            tree.root_keys.add(LocalBlockHash(1));
            tree.root
                .children
                .insert_if_absent(LocalBlockHash(2), &live, &guard);
            tree.root_keys.add(LocalBlockHash(2));
        }
        held.add_lane_hold(1);
        let candidates = tree.find_candidates().1;
        let _ = live.gate.shared_commit(None, |w| {
            crtc_strategies::shape::promote_full(w, crtc_strategies::Slot(0))
        });
        let guard = crtc_strategies::EpochReclaim::pin();
        let outcomes: Vec<_> = candidates
            .iter()
            .map(|c| Tree::unlink_if_stale(c, &guard))
            .collect();
        assert_eq!(outcomes, vec![Unlink::Held, Unlink::Busy]);
        assert!(!held.is_unlinked() && !live.is_unlinked());
        held.add_lane_hold(-1);
    }
}
