// Slot lifecycle: clears, removals, races for the unmap, recycling.
// Included into each strategy module of `verification/tests/lifecycle.rs`.

#[test]
fn clear_keeps_the_slot_and_restores_cleanly() {
    let mut f = fixture(1, SweepPolicy::default());
    f.apply(0, store(1, &[], &[1, 2, 3]));
    let slot = f.tree.slot_of(rank(1));
    f.apply(0, RouterEvent::cleared(rank(1)));
    assert_eq!(f.tree.slot_of(rank(1)), slot);
    assert_eq!(f.score(1, &[1, 2, 3]), 0);
    f.apply(0, store(1, &[], &[1, 2]));
    assert_eq!(f.score(1, &[1, 2, 3]), 2);
    assert_eq!(f.tree.slots_issued(), 1);
}

#[test]
fn stale_clear_leaves_a_recycled_slot_alone() {
    let mut f = fixture(2, SweepPolicy::default());
    f.apply(0, store(1, &[], &[1, 2, 3]));
    let old = f.tree.slot_of(rank(1));
    // The rank is removed out of band: its lane still knows it.
    f.tree.remove_worker_dp_rank(&mut [], rank(1));
    f.apply(1, store(2, &[], &[1, 2, 3]));
    assert_eq!(f.tree.slot_of(rank(2)), old, "the freed slot is recycled");
    f.apply(0, RouterEvent::cleared(rank(1)));
    f.apply(0, remove(1, &[1, 2], &[3]));
    assert!(f.try_apply(0, store(1, &[1, 2, 3], &[4])).is_err());
    assert_eq!(f.score(2, &[1, 2, 3]), 3, "late events of the old owner");
    assert_eq!(f.score(1, &[1, 2, 3]), 0);
}

#[test]
fn rank_removal_and_restore_takes_a_new_slot_without_old_coverage() {
    let mut f = fixture(2, SweepPolicy::default());
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2]));
    let old = f.tree.slot_of(rank(1));
    f.remove_rank(rank(1));
    assert_eq!(f.tree.slot_of(rank(1)), None);
    f.apply(1, store(3, &[], &[7]));
    assert_eq!(
        f.tree.slot_of(rank(3)),
        old,
        "another rank takes the old slot"
    );
    f.apply(0, store(1, &[], &[1]));
    assert_ne!(f.tree.slot_of(rank(1)), old);
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 1);
    assert_eq!(f.score(3, &[1, 2, 3, 4]), 0);
    assert_eq!(f.score(2, &[1, 2, 3, 4]), 2);
}

#[test]
fn whole_worker_removal_spans_lanes() {
    let mut f = fixture(2, SweepPolicy::default());
    f.apply(0, store_by(dp(1, 0), &[], &[1, 2]));
    f.apply(1, store_by(dp(1, 1), &[], &[1, 2, 3]));
    f.apply(1, store_by(dp(2, 0), &[], &[1, 2, 3]));
    f.remove_worker(1);
    assert_eq!(f.lanes[0].entry_count(dp(1, 0)), 0);
    assert_eq!(f.lanes[1].entry_count(dp(1, 1)), 0);
    assert_eq!(f.score_of(dp(1, 0), &[1, 2, 3]), 0);
    assert_eq!(f.score_of(dp(1, 1), &[1, 2, 3]), 0);
    assert_eq!(f.score_of(dp(2, 0), &[1, 2, 3]), 3);
    f.remove_worker(1);
    f.remove_worker(77);
    f.remove_rank(dp(9, 9));
}

#[test]
fn removal_that_loses_the_unmap_race_waits_for_the_winning_sweep() {
    let tree = Arc::new(Tree::<G>::new(config(true, SweepPolicy::default())));
    let mut lane = tree.new_lane();
    tree.apply_event(&mut lane, &store(1, &[], &[1, 2, 3]))
        .unwrap();
    let (release, pinner) = park_pinned::<G>();
    let winner_tree = Arc::clone(&tree);
    let (winner, winner_done) =
        spawn_flagged(move || winner_tree.remove_worker_dp_rank(&mut [], rank(1)));
    wait_unmapped(&tree, rank(1));
    let loser_tree = Arc::clone(&tree);
    let (loser, loser_done) = spawn_flagged(move || {
        loser_tree.remove_worker_dp_rank(&mut [&mut lane], rank(1));
        lane
    });
    thread::sleep(Duration::from_millis(100));
    assert!(tree.is_release_pending(rank(1)));
    assert!(
        !finished(&winner_done),
        "the winner waits for the pinned thread"
    );
    assert!(
        !finished(&loser_done),
        "the loser waits for the winner's release"
    );
    let _ = release.send(());
    pinner.join().unwrap();
    winner.join().unwrap();
    let lane = loser.join().unwrap();
    assert!(!tree.is_release_pending(rank(1)));
    assert_eq!(lane.entry_count(rank(1)), 0);
    assert_eq!(tree.find_matches(&q(&[1, 2, 3]), false).score(rank(1)), 0);
}

/// A clear of a rank whose removal is under way (unmapped, not yet swept:
/// the remover waits for a pinned thread) does not wait for the release: it
/// sweeps the pending slot itself, so once acknowledged nothing of the rank
/// is left, while the removal is still pending (`tree::ranks`).
#[test]
fn clear_of_a_rank_mid_removal_sweeps_the_pending_slot() {
    let tree = Arc::new(Tree::<G>::new(config(true, SweepPolicy::default())));
    let mut lane = tree.new_lane();
    tree.apply_event(&mut lane, &store(1, &[], &[1, 2, 3]))
        .unwrap();
    let (release, pinner) = park_pinned::<G>();
    let winner_tree = Arc::clone(&tree);
    let (winner, winner_done) =
        spawn_flagged(move || winner_tree.remove_worker_dp_rank(&mut [], rank(1)));
    wait_unmapped(&tree, rank(1));
    tree.apply_event(&mut lane, &RouterEvent::cleared(rank(1)))
        .unwrap();
    assert!(tree.is_release_pending(rank(1)), "the removal is under way");
    assert!(!finished(&winner_done));
    assert_eq!(
        tree.find_matches(&q(&[1, 2, 3]), false).score(rank(1)),
        0,
        "an acknowledged clear leaves nothing behind"
    );
    assert!(lane.has_rank(rank(1)), "a clear keeps the rank registered");
    let _ = release.send(());
    pinner.join().unwrap();
    winner.join().unwrap();
    assert!(!tree.is_release_pending(rank(1)));
    assert_eq!(tree.find_matches(&q(&[1, 2, 3]), false).score(rank(1)), 0);
}

/// A clear of a rank that came back on a new slot while its old slot is
/// still pending sweeps both without waiting for the old slot's release,
/// and keeps the new slot.
#[test]
fn clear_after_a_new_slot_sweeps_the_old_pending_slot_too() {
    let tree = Arc::new(Tree::<G>::new(config(true, SweepPolicy::default())));
    let mut lane = tree.new_lane();
    tree.apply_event(&mut lane, &store(1, &[], &[1, 2, 3]))
        .unwrap();
    let old = tree.slot_of(rank(1));
    let (release, pinner) = park_pinned::<G>();
    let winner_tree = Arc::clone(&tree);
    let (winner, winner_done) =
        spawn_flagged(move || winner_tree.remove_worker_dp_rank(&mut [], rank(1)));
    wait_unmapped(&tree, rank(1));
    tree.apply_event(&mut lane, &store(1, &[], &[9])).unwrap();
    let new = tree.slot_of(rank(1));
    assert_ne!(new, old, "a store after the unmap takes a new slot");
    tree.apply_event(&mut lane, &RouterEvent::cleared(rank(1)))
        .unwrap();
    assert!(!finished(&winner_done), "the old slot is still pending");
    assert_eq!(
        tree.find_matches(&q(&[9]), false).score(rank(1)),
        0,
        "new slot swept"
    );
    assert_eq!(
        tree.find_matches(&q(&[1, 2, 3]), false).score(rank(1)),
        0,
        "old slot swept"
    );
    let _ = release.send(());
    pinner.join().unwrap();
    winner.join().unwrap();
    assert_eq!(tree.slot_of(rank(1)), new, "the clear kept the new slot");
}

#[test]
fn reader_holding_the_old_table_never_sees_the_slot_reused() {
    let tree = Arc::new(Tree::<G>::new(config(true, SweepPolicy::default())));
    let mut lane = tree.new_lane();
    tree.apply_event(&mut lane, &store(1, &[], &[1, 2, 3]))
        .unwrap();
    let old = tree.slot_of(rank(1));
    let (release, pinner) = park_pinned::<G>();
    let remover_tree = Arc::clone(&tree);
    let (remover, removed) =
        spawn_flagged(move || remover_tree.remove_worker_dp_rank(&mut [], rank(1)));
    wait_unmapped(&tree, rank(1));
    tree.apply_event(&mut lane, &store(2, &[], &[1, 2, 3]))
        .unwrap();
    assert_ne!(
        tree.slot_of(rank(2)),
        old,
        "not reused while a reader is pinned"
    );
    assert!(!finished(&removed));
    let _ = release.send(());
    pinner.join().unwrap();
    remover.join().unwrap();
    tree.apply_event(&mut lane, &store(3, &[], &[4])).unwrap();
    assert_eq!(tree.slot_of(rank(3)), old, "reused once the pin ended");
    let scores = tree.find_matches(&q(&[1, 2, 3]), false);
    assert_eq!(scores.score(rank(2)), 3);
    assert_eq!(scores.score(rank(3)), 0);
}

#[test]
fn concurrent_clears_and_removals_never_touch_a_recycled_slot() {
    let tree = Arc::new(Tree::<G>::new(config(true, SweepPolicy::default())));
    for round in 0..40u64 {
        let mut victim_lane = tree.new_lane();
        let mut keeper_lane = tree.new_lane();
        let victim = rank(100 + round);
        tree.apply_event(&mut victim_lane, &store_by(victim, &[], &[1, 2, 3]))
            .unwrap();
        let clear_tree = Arc::clone(&tree);
        let clearer = thread::spawn(move || {
            for _ in 0..20 {
                clear_tree
                    .apply_event(&mut victim_lane, &RouterEvent::cleared(victim))
                    .unwrap();
            }
        });
        tree.remove_worker_dp_rank(&mut [], victim);
        let keeper = rank(1000 + round);
        tree.apply_event(&mut keeper_lane, &store_by(keeper, &[], &[1, 2, 3]))
            .unwrap();
        clearer.join().unwrap();
        let scores = tree.find_matches(&q(&[1, 2, 3]), false);
        assert_eq!(
            scores.score(keeper),
            3,
            "round {round}: the recycled slot kept its coverage"
        );
        assert_eq!(scores.score(victim), 0);
        tree.remove_worker_dp_rank(&mut [&mut keeper_lane], keeper);
    }
    assert!(
        tree.slots_issued() <= 3,
        "slots were recycled: {}",
        tree.slots_issued()
    );
}

#[test]
fn past_the_limit_a_store_is_refused_naming_it_and_freed_slots_go_lowest_first() {
    let limited = TreeConfig {
        slot_capacity: 4,
        ..config(true, SweepPolicy::default())
    };
    let mut f = Fixture::<G>::with_config(limited, 1);
    for worker in 1..=4 {
        f.apply(0, store(worker, &[], &[worker]));
    }
    let refused = f.try_apply(0, store(5, &[], &[5])).unwrap_err();
    assert!(matches!(
        refused,
        crtc::types::KvError::CapacityExhausted { capacity: 4, .. }
    ));
    assert!(refused.to_string().contains("slot limit of 4"), "{refused}");
    assert_eq!(f.score(5, &[5]), 0);
    f.remove_rank(rank(4));
    f.remove_rank(rank(2));
    f.apply(0, store(5, &[], &[5]));
    f.apply(0, store(6, &[], &[6]));
    assert_eq!(f.tree.slot_of(rank(5)), Some(1), "the lowest freed slot first");
    assert_eq!(f.tree.slot_of(rank(6)), Some(3));
    assert_eq!(f.tree.slots_issued(), 4);
    assert_eq!(f.score(5, &[5]), 1);
    assert_eq!(f.score(2, &[2]), 0);
}

#[test]
fn thousands_of_ranks_come_and_go_on_recycled_slots() {
    let mut f = fixture(1, SweepPolicy::default());
    for worker in 0..20u64 {
        if worker >= 5 {
            f.remove_worker(worker - 5);
        }
        for dp_rank in 0..200u32 {
            let local = u64::from(dp_rank % 16) + 1;
            f.apply(0, store_by(dp(worker, dp_rank), &[], &[local]));
        }
    }
    assert_eq!(f.tree.slots_issued(), 5 * 200, "slots were recycled");
    assert_eq!(f.score_of(dp(19, 199), &[8]), 1);
    assert_eq!(f.score_of(dp(14, 0), &[1]), 0, "removed worker");
}

#[test]
fn a_lane_never_writes_with_a_slot_its_rank_lost_out_of_band() {
    let mut f = fixture(2, SweepPolicy::default());
    f.apply(0, store(1, &[], &[1, 2, 3]));
    let old = f.tree.slot_of(rank(1));
    // Lane 0 is not told: it keeps rank 1's entries and its cached slot.
    f.tree.remove_worker_dp_rank(&mut [], rank(1));
    f.apply(1, store(2, &[], &[1, 2, 3]));
    assert_eq!(f.tree.slot_of(rank(2)), old, "the freed slot is recycled");
    // Rank 1's late decode step names a parent lane 0 still maps; written
    // with the cached (recycled) slot it would credit rank 2 with block 4.
    let late = f.try_apply(0, store(1, &[1, 2, 3], &[4]));
    assert!(late.is_err(), "rank 1 no longer holds its parent: {late:?}");
    assert_ne!(f.tree.slot_of(rank(1)), old);
    assert_eq!(f.score(2, &[1, 2, 3, 4]), 3);
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 0);
}
