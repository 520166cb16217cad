//! Sweep scheduling for callers that run their own event threads instead of
//! an [`Indexer`](crate::Indexer): the three steps a thread pool drives
//! (schedule on enqueue, run on an event thread, cancel when the task could
//! not be sent) and the check an event thread makes before it blocks.
//!
//! Protocol. The tree has one in-flight sweep flag ([`SweepPolicy`] says
//! when a sweep is due). [`Tree::try_schedule_sweep`] wins the flag when a
//! sweep is due by volume; whoever won it must either run the sweep
//! ([`Tree::run_scheduled_sweep`], on an event thread, not pinned) or give
//! the flag back ([`Tree::cancel_scheduled_sweep`]). The volume rule reads
//! the shared estimates, which lanes update only when their tally grew large
//! or when forced: an event thread calls [`Tree::lane_idle`] before it
//! blocks on an empty queue, which folds its tally and runs a sweep due by
//! volume or by the timer.
//!
//! [`SweepPolicy`]: crate::SweepPolicy

use super::scheduler::{SweepClaim, SweepReason};
use super::{Lane, SweepStats, Tree};
use crtc_strategies::ShapeGate;

impl<G: ShapeGate> Tree<G> {
    /// Wins the tree's one in-flight sweep if a sweep is due by volume.
    /// Cheap enough for every enqueue: two atomic loads, and no clock
    /// unless the volume rule holds. On `true` the caller owns the flag and
    /// must run the sweep ([`Tree::run_scheduled_sweep`]) or give it back
    /// ([`Tree::cancel_scheduled_sweep`]).
    pub fn try_schedule_sweep(&self) -> bool {
        match self.sweep_due_by_volume() {
            Some(SweepClaim { .. }) => true,
            None => false,
        }
    }

    /// Gives back the flag [`Tree::try_schedule_sweep`] won, without
    /// sweeping (e.g. the sweep task could not be sent).
    pub fn cancel_scheduled_sweep(&self) {
        self.cancel_sweep(SweepClaim {
            reason: SweepReason::Volume,
        });
    }

    /// Runs the sweep [`Tree::try_schedule_sweep`] scheduled (on an event
    /// thread), then frees the flag. Call it only with the flag won; the
    /// caller must not be pinned.
    pub fn run_scheduled_sweep(&self) -> SweepStats {
        self.run_sweep(SweepClaim {
            reason: SweepReason::Volume,
        })
    }

    /// What an event thread does before it blocks on an empty queue: folds
    /// `lane`'s tally into the shared estimates and, if a sweep is due (by
    /// volume or by the timer) and none is in flight, runs it here. The
    /// caller must not be pinned.
    pub fn lane_idle(&self, lane: &mut Lane<G>) -> Option<SweepStats> {
        self.fold_tally(lane, true);
        self.sweep_due().map(|claim| self.run_sweep(claim))
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use crate::types::{
        BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank,
    };
    use crate::{SweepPolicy, Tree, TreeConfig};
    use crtc_strategies::RwLockGate;

    #[test]
    fn a_scheduled_sweep_unlinks_dead_leaves_and_frees_the_flag() {
        let config = TreeConfig {
            sweep: SweepPolicy::eager(),
            ..TreeConfig::default()
        };
        let tree = Tree::<RwLockGate>::new(config);
        let mut lane = tree.new_lane();
        let rank = WorkerWithDpRank::new(1, 0);
        let pair = |h| BlockPair {
            local: LocalBlockHash(h),
            external: ExternalSequenceBlockHash(h),
        };
        let head = Some(ExternalSequenceBlockHash(1));
        let events = [
            RouterEvent::stored(rank, None, (1..=1100).map(pair).collect()),
            RouterEvent::stored(rank, head, vec![pair(5000)]),
            // Leaves 1,099 blocks dead: enough for the lane to fold its
            // tally into the estimates without being idle.
            RouterEvent::removed(rank, vec![ExternalSequenceBlockHash(2)]),
        ];
        for event in &events {
            tree.apply_event(&mut lane, event).unwrap();
        }
        assert!(tree.try_schedule_sweep(), "due by volume");
        assert!(!tree.try_schedule_sweep(), "one in flight");
        let stats = tree.run_scheduled_sweep();
        assert_eq!((stats.unlinked, stats.reclaimed), (1, 1099));
        assert_eq!(tree.node_edge_lengths(), vec![1, 1]);
        assert!(!tree.try_schedule_sweep(), "nothing dead any more");
        assert!(tree.lane_idle(&mut lane).is_none());
        assert!(tree.sweep_stale().is_some(), "the flag was freed");
    }
}
