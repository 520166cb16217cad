// Anchors: registration, stores under them, anchored lookups, sweeps.
// Included into each strategy module of `verification/tests/lifecycle.rs`.

fn anchor(f: &mut Fixture<G>, lane: usize, rank: WorkerWithDpRank, id: u64, depth: u32) {
    let local = LocalBlockHash(0xa000 + id);
    f.tree
        .apply_anchor(&mut f.lanes[lane], rank, anchor_id(id), local, depth)
        .expect("anchor");
}

#[test]
fn stores_under_an_anchor_become_its_children_and_score_from_it() {
    let mut f = fixture(1, SweepPolicy::disabled());
    anchor(&mut f, 0, rank(1), 1, 10);
    f.apply(0, store_under_anchor(rank(1), anchor_id(1), &[5, 6, 7]));
    f.apply(0, store_under_anchor(rank(1), anchor_id(1), &[8]));
    assert_eq!(f.tree.anchor_count(), 1);
    assert_eq!(
        f.tree.node_count(),
        3,
        "the anchor and two children; never extended"
    );
    let scores = f
        .tree
        .find_matches_from_anchor(anchor_id(1), &q(&[5, 6, 7]));
    assert_eq!(scores.score(rank(1)), 13, "3 blocks + depth 10");
    assert_eq!(
        f.tree
            .find_matches_from_anchor(anchor_id(1), &q(&[9]))
            .score(rank(1)),
        10
    );
    assert_eq!(
        f.tree
            .find_matches_from_anchor(anchor_id(1), &q(&[8]))
            .score(rank(1)),
        11
    );
    assert!(f
        .tree
        .find_matches_from_anchor(anchor_id(2), &q(&[5]))
        .scores
        .is_empty());
    assert!(
        f.tree.find_matches(&q(&[5, 6, 7]), false).scores.is_empty(),
        "not under the root"
    );
    let dump = f.tree.dump_events();
    assert_eq!(dump.len(), 2);
    assert!(dump.iter().all(|e| matches!(&e.event.data,
        crtc::types::KvCacheEventData::Stored { parent_hash: Some(p), .. } if *p == anchor_id(1))));
}

#[test]
fn fast_path_declines_an_anchor_and_decode_stores_extend_the_child() {
    let mut f = fixture(1, SweepPolicy::disabled());
    anchor(&mut f, 0, rank(1), 1, 4);
    f.apply(0, store_under_anchor(rank(1), anchor_id(1), &[5]));
    let misses = f.lanes[0]
        .counters()
        .misses(crtc_strategies::AppendMiss::Anchor);
    assert_eq!(
        misses, 1,
        "the first store under the anchor reached its node"
    );
    let parent = crtc_verification::chain::chained(Some(anchor_id(1)), &[5])[0].external;
    let decode = RouterEvent::stored(
        rank(1),
        Some(parent),
        crtc_verification::chain::chained(Some(parent), &[6]),
    );
    f.apply(0, decode);
    assert_eq!(f.tree.node_count(), 2, "the child grew in place");
    assert_eq!(
        f.tree
            .find_matches_from_anchor(anchor_id(1), &q(&[5, 6]))
            .score(rank(1)),
        6
    );
}

#[test]
fn several_ranks_share_an_anchor_and_the_first_depth_stays() {
    let mut f = fixture(2, SweepPolicy::disabled());
    anchor(&mut f, 0, rank(1), 1, 8);
    anchor(&mut f, 1, rank(2), 1, 99);
    f.apply(0, store_under_anchor(rank(1), anchor_id(1), &[5, 6]));
    f.apply(1, store_under_anchor(rank(2), anchor_id(1), &[5, 7]));
    let scores = f.tree.find_matches_from_anchor(anchor_id(1), &q(&[5, 6]));
    assert_eq!(scores.score(rank(1)), 10);
    assert_eq!(scores.score(rank(2)), 9);
    // A rank that never anchored joins the anchor when it stores under it.
    f.apply(0, store_under_anchor(rank(3), anchor_id(1), &[5]));
    assert_eq!(
        f.tree
            .find_matches_from_anchor(anchor_id(1), &q(&[5]))
            .score(rank(3)),
        9
    );
    assert_eq!(f.tree.anchor_count(), 1);
}

#[test]
fn sweep_reclaims_dead_children_but_never_the_anchor() {
    let mut f = fixture(1, SweepPolicy::disabled());
    anchor(&mut f, 0, rank(1), 1, 3);
    f.apply(0, store_under_anchor(rank(1), anchor_id(1), &[5, 6]));
    f.apply(0, remove_under_anchor(rank(1), anchor_id(1), &[5, 6]));
    assert_eq!(f.tree.node_count(), 2);
    let stats = f.tree.sweep_stale().unwrap();
    assert_eq!(stats.unlinked, 1, "the dead child went");
    assert_eq!(f.tree.node_count(), 1);
    f.apply(0, RouterEvent::cleared(rank(1)));
    let stats = f.tree.sweep_stale().unwrap();
    assert_eq!(stats.unlinked, 0, "a holder-less anchor stays");
    assert_eq!((f.tree.node_count(), f.tree.anchor_count()), (1, 1));
    anchor(&mut f, 0, rank(1), 1, 3);
    f.apply(0, store_under_anchor(rank(1), anchor_id(1), &[5, 6, 7]));
    assert_eq!(
        f.tree
            .find_matches_from_anchor(anchor_id(1), &q(&[5, 6, 7]))
            .score(rank(1)),
        6
    );
}

#[test]
fn rank_removal_sweeps_anchors_and_their_children() {
    let mut f = fixture(1, SweepPolicy::disabled());
    anchor(&mut f, 0, rank(1), 1, 3);
    anchor(&mut f, 0, rank(2), 1, 3);
    f.apply(0, store_under_anchor(rank(1), anchor_id(1), &[5]));
    f.apply(0, store_under_anchor(rank(2), anchor_id(1), &[5]));
    f.remove_rank(rank(1));
    let scores = f.tree.find_matches_from_anchor(anchor_id(1), &q(&[5]));
    assert_eq!(scores.score(rank(1)), 0);
    assert_eq!(scores.score(rank(2)), 4);
    f.apply(0, store(7, &[], &[1]));
    let scores = f.tree.find_matches_from_anchor(anchor_id(1), &q(&[5]));
    assert_eq!(
        scores.score(rank(7)),
        0,
        "the recycled slot carries no anchor coverage"
    );
}

#[test]
fn anchoring_fails_closed_when_slots_run_out() {
    let config = TreeConfig {
        slot_capacity: 1,
        ..config(true, SweepPolicy::disabled())
    };
    let mut f = Fixture::<G>::with_config(config, 1);
    anchor(&mut f, 0, rank(1), 1, 3);
    let err = f
        .tree
        .apply_anchor(
            &mut f.lanes[0],
            rank(2),
            anchor_id(1),
            LocalBlockHash(0xa001),
            3,
        )
        .unwrap_err();
    assert!(matches!(
        err,
        crtc::types::KvError::CapacityExhausted { capacity: 1, .. }
    ));
    assert_eq!(
        f.tree
            .find_matches_from_anchor(anchor_id(1), &[])
            .score(rank(2)),
        0
    );
    assert_eq!(
        f.tree
            .find_matches_from_anchor(anchor_id(1), &[])
            .score(rank(1)),
        3
    );
}

#[test]
fn indexer_routes_anchors_to_the_rank_lane() {
    let indexer = crtc::Indexer::<G>::new(crtc::IndexerConfig {
        lanes: 2,
        tree: config(true, SweepPolicy::default()),
    });
    indexer
        .apply_anchor(rank(4), anchor_id(3), LocalBlockHash(1), 16)
        .unwrap();
    indexer
        .apply_event_acked(store_under_anchor(rank(4), anchor_id(3), &[2, 3]))
        .unwrap();
    assert_eq!(
        indexer
            .find_matches_from_anchor(anchor_id(3), &q(&[2, 3]))
            .score(rank(4)),
        18
    );
}
