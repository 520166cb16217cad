// The scenarios of upstream's tree test catalogue (dynamo-kv-router), rewritten
// as our own tests. Included into each strategy × fast-path module; `G`,
// `FAST`, `fixture` and `lane_hits` come from the including module.

#[test]
fn decode_tail_extends_in_place() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    f.apply(0, store(1, &[1, 2, 3], &[4]));
    f.apply(0, store(1, &[1, 2, 3, 4], &[5]));
    f.apply(0, store(1, &[1, 2, 3, 4, 5], &[6]));
    assert_eq!(f.edge_lengths(), vec![6]);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6, 7]), 6);
    let dump = f.tree.dump_events();
    assert_eq!(dump, vec![store(1, &[], &[1, 2, 3, 4, 5, 6])]);
    assert_eq!(lane_hits(&f, 0), if FAST { 3 } else { 0 });
    assert_eq!(
        f.lanes[0].counters().general_stores.get(),
        if FAST { 1 } else { 4 }
    );
}

#[test]
fn divergent_tail_extensions_split_the_compressed_leaf() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 3, 4]));
    f.apply(0, store(1, &[1, 2, 3, 4], &[5, 6]));
    f.apply(1, store(2, &[1, 2, 3, 4], &[7, 8]));
    assert_eq!(f.edge_lengths(), vec![2, 2, 4]);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6]), 6);
    assert_eq!(f.score(2, &[1, 2, 3, 4, 5, 6]), 4);
    assert_eq!(f.score(2, &[1, 2, 3, 4, 7, 8]), 6);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 7, 8]), 4);
    assert_eq!(f.lanes[0].entry_count(rank(1)), 6);
    assert_eq!(f.lanes[1].entry_count(rank(2)), 6);
}

#[test]
fn identical_tail_extensions_stay_compressed() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 3, 4]));
    f.apply(0, store(1, &[1, 2, 3, 4], &[5, 6]));
    f.apply(1, store(2, &[1, 2, 3, 4], &[5, 6]));
    assert_eq!(f.edge_lengths(), vec![6]);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6]), 6);
    assert_eq!(f.score(2, &[1, 2, 3, 4, 5, 6]), 6);
}

#[test]
fn suffix_reuse_with_divergent_split_preserves_every_rank() {
    let mut f = fixture(2);
    f.apply(0, store(0, &[], &[1, 2, 3, 4, 5, 6]));
    f.apply(0, store(1, &[], &[1, 2, 3]));
    f.apply(1, store(2, &[], &[1, 2, 3]));
    f.apply(0, store(1, &[1, 2, 3], &[4, 5, 6]));
    f.apply(1, store(2, &[1, 2, 3], &[7, 8]));
    assert_eq!(f.edge_lengths(), vec![2, 3, 3]);
    for (worker, query, expected) in [
        (0, &[1, 2, 3, 4, 5, 6][..], 6),
        (1, &[1, 2, 3, 4, 5, 6], 6),
        (2, &[1, 2, 3, 4, 5, 6], 3),
        (2, &[1, 2, 3, 7, 8], 5),
        (0, &[1, 2, 3, 7, 8], 3),
        (1, &[1, 2, 3, 7, 8], 3),
    ] {
        assert_eq!(
            f.score(worker, query),
            expected,
            "worker {worker} query {query:?}"
        );
    }
}

#[test]
fn stale_tail_parent_repairs_to_the_suffix() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2]));
    f.apply(1, store(2, &[1, 2], &[10]));
    let repairs_before = f.lanes[0].counters().repairs.get();
    f.apply(0, store(1, &[1, 2, 3, 4], &[5, 6]));
    assert!(
        f.lanes[0].counters().repairs.get() > repairs_before,
        "the stale entry was repaired"
    );
    assert_eq!(f.edge_lengths(), vec![1, 2, 4]);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6]), 6);
    assert_eq!(f.score(2, &[1, 2, 10]), 3);
    f.apply(0, store(1, &[1, 2, 3, 4, 5, 6], &[7]));
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6, 7]), 7);
}

#[test]
fn stale_cursor_does_not_descend_into_a_same_local_child_at_another_depth() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 5, 6, 7]));
    f.apply(1, store(2, &[], &[1, 5, 6, 8]));
    f.apply(1, store(2, &[], &[1, 7]));
    assert_eq!(f.score(1, &[1, 5, 6, 7]), 4);
    assert_eq!(f.score(2, &[1, 5, 6, 8]), 4);
    assert_eq!(f.score(2, &[1, 7]), 2);
    assert_eq!(f.score(1, &[1, 7]), 1);
    assert_eq!(f.edge_lengths(), vec![1, 1, 1, 1, 2]);
}

#[test]
fn multiple_hashes_removed_from_one_edge() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4, 5, 6]));
    f.apply(0, store(2, &[], &[1, 2, 3, 4, 5, 6]));
    f.apply(0, remove(1, &[1, 2], &[3, 4, 5]));
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6]), 2);
    assert_eq!(f.score(2, &[1, 2, 3, 4, 5, 6]), 6);
    f.apply(0, store(1, &[1, 2], &[3, 4, 5, 6]));
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6]), 6);
}

#[test]
fn batched_removal_cuts_at_the_minimum_position_not_event_order() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4, 5, 6]));
    let all = hashes(&[], &[1, 2, 3, 4, 5, 6]);
    f.apply(
        0,
        crtc::types::RouterEvent::removed(rank(1), vec![all[4], all[2], all[5], all[3]]),
    );
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6]), 2);
    assert_eq!(f.lanes[0].entry_count(rank(1)), 2);
}

#[test]
fn batched_removal_processes_hashes_moved_by_a_split() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 9]));
    f.apply(0, remove(1, &[1], &[2, 3, 4]));
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 1);
    assert_eq!(f.lanes[0].entry_count(rank(1)), 1);
    f.apply(0, store(1, &[1], &[2, 3]));
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 3);
    assert_eq!(f.lanes[0].entry_count(rank(1)), 3);
}

#[test]
fn removal_repaired_after_a_split_releases_every_hold() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 9]));
    f.apply(0, remove(1, &[1, 2], &[3, 4]));
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 2);
    assert_eq!(f.lanes[0].entry_count(rank(1)), 2);
    f.apply(0, remove(1, &[], &[1, 2]));
    assert_eq!(f.lanes[0].entry_count(rank(1)), 0);
    assert_eq!(f.lanes[0].held_nodes(), 0, "an entry's hold outlived it");
}

#[test]
fn grouped_removal_leaves_hashes_named_on_another_node() {
    for reversed in [false, true] {
        let mut f = fixture(1);
        f.apply(0, store(1, &[], &[1, 30]));
        f.apply(0, store(1, &[1], &[2, 20, 21]));
        f.apply(0, remove(1, &[], &[1]));
        f.apply(0, store(1, &[], &[1]));
        f.apply(0, store(1, &[1], &[2, 20]));
        let mut gone = hashes(&[1], &[2, 20, 21])[1..].to_vec();
        if reversed {
            gone.reverse();
        }
        f.apply(0, crtc::types::RouterEvent::removed(rank(1), gone));
        assert_eq!(f.score(1, &[1, 2, 20]), 2, "reversed = {reversed}");
        assert_eq!(f.score(1, &[1, 2, 20, 21]), 2, "reversed = {reversed}");
    }
}

#[test]
fn removal_whose_repair_fails_still_scrubs_the_entry() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 5]));
    f.apply(1, remove(2, &[], &[1, 2, 5]));
    f.apply(0, remove(1, &[], &[1, 2]));
    f.apply(0, remove(1, &[1, 2], &[3, 4]));
    assert_eq!(f.lanes[0].entry_count(rank(1)), 0);
    assert_eq!(f.lanes[1].entry_count(rank(2)), 0);
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 0);
}

#[test]
fn split_preserves_high_fanout_children_under_the_suffix() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    for child in 10..15 {
        f.apply(0, store(1, &[1, 2, 3], &[child]));
    }
    f.apply(0, store(2, &[], &[1, 7]));
    let topology = f.tree.topology();
    let suffix = topology
        .iter()
        .find(|n| n.depth == 1 && n.edge.len() == 2)
        .expect("suffix [2,3]");
    assert_eq!(suffix.children, 5);
    for child in 10..15 {
        assert_eq!(f.score(1, &[1, 2, 3, child]), 4);
    }
    assert_eq!(f.score(2, &[1, 7]), 2);
}

#[test]
fn extension_demotes_other_full_ranks_to_the_old_tail() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    f.apply(0, store(2, &[], &[1, 2, 3]));
    f.apply(0, store(1, &[1, 2, 3], &[4]));
    let node = &f.tree.topology()[0];
    assert_eq!(node.full, vec![rank(1)]);
    assert_eq!(node.cutoffs, vec![(rank(2), 3)]);
    assert_eq!(f.score(2, &[1, 2, 3, 4]), 3);
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 4);
}

#[test]
fn demoted_rank_can_split_later_and_dumps_exactly() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    f.apply(1, store(2, &[], &[1, 2, 3]));
    f.apply(0, store(1, &[1, 2, 3], &[4]));
    f.apply(1, store(2, &[1, 2, 3], &[5]));
    assert_eq!(f.edge_lengths(), vec![1, 1, 3]);
    let mut dump = f.tree.dump_events();
    dump.iter_mut().for_each(|e| e.event.event_id = 0);
    for expected in [
        store(1, &[], &[1, 2, 3]),
        store(2, &[], &[1, 2, 3]),
        store(1, &[1, 2, 3], &[4]),
        store(2, &[1, 2, 3], &[5]),
    ] {
        assert!(dump.contains(&expected), "dump {dump:?} lacks {expected:?}");
    }
    assert_eq!(dump.len(), 4);
}

#[test]
fn equal_sized_coverage_after_head_first_eviction_scores_exactly() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(2, &[], &[1, 2, 3, 4]));
    f.apply(0, store(3, &[], &[1, 2, 9]));
    f.apply(0, remove(1, &[], &[1, 2]));
    let scores = f.tree.find_matches(&q(&[1, 2, 3, 4]), false);
    assert_eq!(scores.score(rank(1)), 0);
    assert_eq!(scores.score(rank(2)), 4);
    assert_eq!(scores.score(rank(3)), 2);
}

#[test]
fn internal_split_reparents_existing_children_to_the_suffix() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(1, &[1, 2, 3, 4], &[5]));
    f.apply(0, store(1, &[1, 2, 3, 4], &[6]));
    f.apply(0, store(2, &[], &[1, 2, 7]));
    assert_eq!(f.edge_lengths(), vec![1, 1, 1, 2, 2]);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5]), 5);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 6]), 5);
    assert_eq!(f.score(2, &[1, 2, 7]), 3);
}

#[test]
fn reuses_a_suffix_and_extends_to_nine() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4, 5, 6]));
    f.apply(0, store(2, &[], &[1, 2, 3]));
    f.apply(0, store(2, &[1, 2, 3], &[4, 5, 6, 7, 8, 9]));
    assert_eq!(f.edge_lengths(), vec![9]);
    assert_eq!(f.score(2, &[1, 2, 3, 4, 5, 6, 7, 8, 9]), 9);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6, 7, 8, 9]), 6);
    let mut dump = f.tree.dump_events();
    dump.iter_mut().for_each(|e| e.event.event_id = 0);
    assert!(dump.contains(&store(2, &[], &[1, 2, 3, 4, 5, 6, 7, 8, 9])));
    assert!(dump.contains(&store(1, &[], &[1, 2, 3, 4, 5, 6])));
}

#[test]
fn long_indexed_edges_reuse_and_extend_without_split() {
    let head: Vec<u64> = (1..=35).collect();
    let mid: Vec<u64> = (36..=45).collect();
    let tail: Vec<u64> = (46..=85).collect();
    let mut f = fixture(1);
    let all: Vec<u64> = head.iter().chain(&mid).copied().collect();
    f.apply(0, store(1, &[], &all));
    f.apply(0, store(2, &[], &head));
    let mut rest = mid.clone();
    rest.extend(&tail);
    f.apply(0, store(2, &head, &rest));
    assert_eq!(f.edge_lengths(), vec![85]);
    let everything: Vec<u64> = (1..=85).collect();
    assert_eq!(f.score(2, &everything), 85);
    assert_eq!(f.score(1, &everything), 45);
    f.apply(0, remove(2, &all, &tail[..1]));
    assert_eq!(f.score(2, &everything), 45);
}

#[test]
fn restore_after_a_mid_chain_removal_updates_the_score() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    assert_eq!(f.score(1, &[1, 2, 3]), 3);
    f.apply(0, remove(1, &[1], &[2]));
    assert_eq!(f.score(1, &[1, 2, 3]), 1);
    assert_eq!(f.lanes[0].entry_count(rank(1)), 1);
    f.apply(0, store(1, &[1], &[2, 3]));
    assert_eq!(f.score(1, &[1, 2, 3]), 3);
    assert_eq!(f.lanes[0].entry_count(rank(1)), 3);
}

#[test]
fn a_node_without_full_ranks_drops_unreachable_descendants() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2]));
    f.apply(0, store(1, &[1, 2], &[3]));
    f.apply(0, store(1, &[1, 2], &[4]));
    f.apply(0, remove(1, &[1], &[2]));
    let mut dump = f.tree.dump_events();
    dump.iter_mut().for_each(|e| e.event.event_id = 0);
    assert_eq!(dump, vec![store(1, &[], &[1])]);
}

#[test]
fn store_under_an_uncovered_parent_fails_and_drops_the_entry() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    f.apply(0, store(2, &[], &[1, 2, 3]));
    f.apply(0, remove(1, &[1], &[2, 3]));
    let err = f.try_apply(0, store(1, &[1, 2, 3], &[4])).unwrap_err();
    assert!(
        matches!(err, crtc::types::KvError::ParentBlockNotFound { .. }),
        "{err}"
    );
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 1);
    assert_eq!(f.score(2, &[1, 2, 3]), 3);
}

#[test]
fn store_under_an_unknown_parent_is_rejected_without_change() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2]));
    let before = f.tree.topology();
    let err = f.try_apply(0, store(1, &[7, 8], &[9])).unwrap_err();
    assert!(matches!(
        err,
        crtc::types::KvError::ParentBlockNotFound { .. }
    ));
    assert_eq!(f.tree.topology(), before);
    assert!(matches!(
        f.try_apply(0, crtc::types::RouterEvent::stored(rank(1), None, vec![])),
        Err(crtc::types::KvError::EmptyStore { .. })
    ));
    assert!(matches!(
        f.try_apply(0, remove(9, &[], &[1])),
        Err(crtc::types::KvError::BlockNotFound { .. })
    ));
    f.apply(0, remove(1, &[1, 2], &[77]));
    assert_eq!(f.score(1, &[1, 2]), 2);
}

#[test]
fn dump_skips_ranks_that_do_not_cover_the_parent() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(2, &[], &[1, 2, 3, 4]));
    f.apply(0, store(3, &[], &[1, 2, 9]));
    f.apply(0, remove(2, &[1], &[2]));
    let dump = f.tree.dump_events();
    assert!(
        dump.iter()
            .all(|e| e.rank() != rank(2) || e.block_count() == 1),
        "{dump:?}"
    );
    assert!(!dump.iter().any(|e| e.rank() == rank(2)
        && matches!(
            &e.event.data,
            crtc::types::KvCacheEventData::Stored {
                parent_hash: Some(_),
                ..
            }
        )));
}

#[test]
fn clear_removes_only_its_rank_across_split_suffixes_and_keeps_the_slot() {
    let mut f = fixture(2);
    f.apply(0, store_by(dp(1, 0), &[], &[1, 2, 3, 4]));
    f.apply(1, store_by(dp(1, 1), &[], &[1, 2, 3, 4]));
    f.apply(0, store(2, &[], &[1, 2, 5]));
    let issued = f.tree.slots_issued();
    f.apply(0, crtc::types::RouterEvent::cleared(dp(1, 0)));
    assert_eq!(f.score_of(dp(1, 0), &[1, 2, 3, 4]), 0);
    assert_eq!(f.score_of(dp(1, 1), &[1, 2, 3, 4]), 4);
    assert_eq!(f.score(2, &[1, 2, 5]), 3);
    f.apply(0, store_by(dp(1, 0), &[], &[1, 2]));
    assert_eq!(f.score_of(dp(1, 0), &[1, 2, 3, 4]), 2);
    assert_eq!(f.tree.slots_issued(), issued, "clear keeps the slot");
}

#[test]
fn clear_before_a_split_prevents_copying_removed_coverage() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(2, &[], &[1, 2, 3, 4]));
    f.apply(0, crtc::types::RouterEvent::cleared(rank(1)));
    f.apply(0, store(3, &[], &[1, 2, 9]));
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 0);
    assert_eq!(f.score(1, &[1, 2, 9]), 0);
    assert_eq!(f.score(2, &[1, 2, 3, 4]), 4);
    assert_eq!(f.score(3, &[1, 2, 9]), 3);
}

#[test]
fn worker_removal_respects_dp_rank_and_worker_targets() {
    let mut f = fixture(2);
    f.apply(0, store_by(dp(1, 0), &[], &[1, 2]));
    f.apply(1, store_by(dp(1, 1), &[], &[1, 2]));
    f.apply(0, store_by(dp(2, 0), &[], &[1, 2]));
    f.remove_rank(dp(1, 1));
    assert_eq!(f.score_of(dp(1, 0), &[1, 2]), 2);
    assert_eq!(f.score_of(dp(1, 1), &[1, 2]), 0);
    f.remove_worker(1);
    assert_eq!(f.score_of(dp(1, 0), &[1, 2]), 0);
    assert_eq!(f.score_of(dp(2, 0), &[1, 2]), 2);
}

#[test]
fn removed_worker_slot_is_recycled_without_its_coverage() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    f.remove_worker(1);
    f.apply(0, store(2, &[], &[1, 2]));
    assert_eq!(f.tree.slots_issued(), 1, "the freed slot is reused");
    let scores = f.tree.find_matches(&q(&[1, 2, 3]), false);
    assert_eq!(scores.score(rank(2)), 2);
    assert_eq!(scores.score(rank(1)), 0);
}

#[test]
fn rank_removal_and_restore_takes_a_new_mapping_without_old_coverage() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3]));
    f.apply(0, store(2, &[], &[1, 2, 3]));
    f.remove_rank(rank(1));
    f.apply(0, store(1, &[], &[1]));
    assert_eq!(f.score(1, &[1, 2, 3]), 1);
    assert_eq!(f.score(2, &[1, 2, 3]), 3);
    assert!(f.try_apply(0, store(1, &[1, 2], &[3])).is_err());
}

#[test]
fn early_exit_stops_at_one_survivor_and_details_name_the_last_block() {
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(2, &[], &[1, 2, 5]));
    f.remove_worker(1);
    f.remove_worker(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(2, &[], &[1, 2, 5]));
    let full = f.tree.find_match_details(&q(&[1, 2, 3, 4]), false);
    assert_eq!(full.scores.score(rank(1)), 4);
    assert_eq!(full.scores.score(rank(2)), 2);
    let seq = hashes(&[], &[1, 2, 3, 4]);
    assert_eq!(full.last_matched[&rank(1)], seq[3]);
    assert_eq!(full.last_matched[&rank(2)], seq[1]);
    let mut solo = fixture(1);
    solo.apply(0, store(3, &[], &[1, 2, 3, 4]));
    solo.apply(0, store(3, &[1, 2], &[6]));
    let early = solo.tree.find_matches(&q(&[1, 2, 3, 4]), true);
    assert_eq!(
        early.score(rank(3)),
        2,
        "the survivor is scored at the depth reached"
    );
    assert_eq!(
        solo.tree
            .find_matches(&q(&[1, 2, 3, 4]), false)
            .score(rank(3)),
        4
    );
    assert!(f.tree.find_matches(&q(&[]), false).scores.is_empty());
    assert!(f.tree.find_matches(&q(&[9]), false).scores.is_empty());
}

#[test]
fn exhausted_slots_fail_closed() {
    let config = crtc::TreeConfig {
        fast_path: FAST,
        slot_capacity: 2,
        ..crtc::TreeConfig::default()
    };
    let mut f = Fixture::<G>::with_config(config, 1);
    f.apply(0, store(1, &[], &[1, 2]));
    f.apply(0, store(2, &[], &[1, 2]));
    let err = f.try_apply(0, store(3, &[], &[1, 2, 3])).unwrap_err();
    assert!(matches!(
        err,
        crtc::types::KvError::CapacityExhausted { capacity: 2, .. }
    ));
    assert_eq!(f.score(3, &[1, 2, 3]), 0);
    f.remove_worker(1);
    f.apply(0, store(3, &[], &[1, 2, 3]));
    assert_eq!(f.score(3, &[1, 2, 3]), 3);
    assert_eq!(f.score(1, &[1, 2, 3]), 0);
}

// Fast-path declines (issue 3): each store below must leave the fast path
// with the given reason and still apply through the general path.

fn misses(f: &Fixture<G>, lane: usize, reason: crtc_strategies::AppendMiss) -> u64 {
    f.lanes[lane].counters().misses(reason)
}

#[test]
fn fast_path_declines_an_internal_node() {
    use crtc_strategies::AppendMiss;
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 3, 9]));
    f.apply(0, store(1, &[1, 2, 3], &[7]));
    assert_eq!(misses(&f, 0, AppendMiss::Internal), FAST as u64);
    assert_eq!(f.score(1, &[1, 2, 3, 7]), 4);
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 4);
    assert_eq!(f.edge_lengths(), vec![1, 1, 1, 3]);
}

#[test]
fn fast_path_declines_a_parent_that_is_not_the_tail() {
    use crtc_strategies::AppendMiss;
    let mut f = fixture(1);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(1, &[1, 2], &[9]));
    assert_eq!(misses(&f, 0, AppendMiss::NotTail), FAST as u64);
    assert_eq!(lane_hits(&f, 0), 0);
    assert_eq!(f.score(1, &[1, 2, 9]), 3);
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 4);
}

#[test]
fn fast_path_declines_a_stale_entry_after_another_lanes_split() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 9]));
    let general_before = f.lanes[0].counters().general_stores.get();
    f.apply(0, store(1, &[1, 2, 3, 4], &[5]));
    assert_eq!(lane_hits(&f, 0), 0, "the entry names the split prefix");
    assert_eq!(
        f.lanes[0].counters().general_stores.get(),
        general_before + 1
    );
    assert!(f.lanes[0].counters().repairs.get() >= 1);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5]), 5);
    f.apply(0, store(1, &[1, 2, 3, 4, 5], &[6]));
    assert_eq!(
        lane_hits(&f, 0),
        FAST as u64,
        "after the repair the entry names the leaf"
    );
    assert_eq!(f.score(1, &[1, 2, 3, 4, 5, 6]), 6);
}

#[test]
fn fast_path_takes_chained_decode_stores_and_demotes_sharers() {
    let mut f = fixture(2);
    f.apply(0, store(1, &[], &[1, 2]));
    f.apply(1, store(2, &[], &[1, 2]));
    let mut prefix = vec![1, 2];
    for block in 3..20 {
        f.apply(0, store(1, &prefix, &[block]));
        prefix.push(block);
    }
    assert_eq!(lane_hits(&f, 0), if FAST { 17 } else { 0 });
    assert_eq!(f.edge_lengths(), vec![19]);
    assert_eq!(f.score(1, &prefix), 19);
    assert_eq!(f.score(2, &prefix), 2);
    assert_eq!(f.tree.topology()[0].cutoffs, vec![(rank(2), 2)]);
}

/// The walk as plain hash sets over the tree's topology (always intersecting),
/// the semantics the slot-bitset walk must reproduce exactly.
fn hash_set_walk(
    nodes: &[crtc::harness::NodeInfo],
    query: &[u64],
) -> std::collections::BTreeMap<crtc::types::WorkerWithDpRank, u32> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut scores = BTreeMap::new();
    let mut at = None;
    let mut active: BTreeSet<_> = BTreeSet::new();
    let mut depth = 0usize;
    while let Some(&next_local) = query.get(depth) {
        let Some(index) = nodes
            .iter()
            .position(|n| n.parent == at && n.edge[0].local.0 == next_local)
        else {
            break;
        };
        let node = &nodes[index];
        let matched = node
            .edge
            .iter()
            .zip(&query[depth..])
            .take_while(|(b, &l)| b.local.0 == l)
            .count();
        let full: BTreeSet<_> = node.full.iter().copied().collect();
        let cut = |rank| {
            node.cutoffs
                .iter()
                .find(|(r, _)| *r == rank)
                .map_or(0, |&(_, k)| (k as usize).min(matched))
        };
        let candidates: Vec<_> = if at.is_none() {
            node.cutoffs.iter().map(|&(r, _)| r).collect()
        } else {
            active.difference(&full).copied().collect()
        };
        for rank in candidates {
            if depth + cut(rank) > 0 {
                scores.insert(rank, (depth + cut(rank)) as u32);
            }
        }
        active = if at.is_none() {
            full
        } else {
            active.intersection(&full).copied().collect()
        };
        if active.is_empty() {
            return scores;
        }
        depth += matched;
        if matched < node.edge.len() {
            break;
        }
        at = Some(index);
    }
    active.into_iter().filter(|_| depth > 0).for_each(|rank| {
        scores.insert(rank, depth as u32);
    });
    scores
}

#[test]
fn slot_walk_equals_a_hash_set_walk_on_random_coverage() {
    let mut state = 0x5eed_u64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let mut f = fixture(1);
    let paths: Vec<Vec<u64>> = (0..40)
        .map(|_| (0..2 + next(10)).map(|_| 1 + next(4)).collect())
        .collect();
    for worker in 0..300 {
        let path = &paths[next(paths.len() as u64) as usize];
        let len = 1 + next(path.len() as u64) as usize;
        f.apply(0, store(worker, &[], &path[..len]));
        if next(3) == 0 {
            let cut = next(len as u64) as usize;
            f.apply(0, remove(worker, &path[..cut], &path[cut..cut + 1]));
        }
    }
    let nodes = f.tree.topology();
    for path in &paths {
        for len in 1..=path.len() {
            let expected = hash_set_walk(&nodes, &path[..len]);
            let actual: std::collections::BTreeMap<_, _> = f
                .tree
                .find_matches(&q(&path[..len]), false)
                .sorted()
                .into_iter()
                .collect();
            assert_eq!(actual, expected, "query {:?}", &path[..len]);
        }
    }
    assert!(
        f.tree.slots_issued() > 256,
        "slots beyond the inline words are exercised"
    );
}
