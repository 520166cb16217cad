// Stale-leaf reclamation: tallies, triggers, the sweep.
// Included into each strategy module of `verification/tests/lifecycle.rs`.

fn fold(f: &mut Fixture<G>) {
    for lane in &mut f.lanes {
        f.tree.fold_tally(lane, true);
    }
}

#[test]
fn estimates_follow_stores_evictions_and_sweeps() {
    let mut f = fixture(1, SweepPolicy::disabled());
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(0, store(1, &[], &[9, 10, 11, 12]));
    assert_eq!(
        f.tree.reclaim_estimates(),
        (0, 0),
        "small deltas stay on the lane"
    );
    fold(&mut f);
    assert_eq!(f.tree.reclaim_estimates(), (8, 0));
    f.apply(0, remove(1, &[9], &[10, 11, 12]));
    f.apply(0, remove(1, &[], &[9]));
    fold(&mut f);
    assert_eq!(f.tree.reclaim_estimates(), (8, 4));
    assert_eq!(f.tree.node_count(), 2);
    let stats = f.tree.sweep_stale().expect("no sweep in flight");
    assert_eq!((stats.nodes, stats.linked, stats.dead), (2, 8, 4));
    assert_eq!((stats.unlinked, stats.reclaimed, stats.held), (1, 4, 0));
    assert_eq!(f.tree.reclaim_estimates(), (4, 0), "the recount overwrites");
    assert_eq!(f.tree.node_count(), 1);
    assert_eq!(f.score(1, &[1, 2, 3, 4]), 4);
}

#[test]
fn default_floor_does_not_sweep_small_trees() {
    let indexer = crtc::Indexer::<G>::new(crtc::IndexerConfig {
        lanes: 2,
        tree: TreeConfig::default(),
    });
    for worker in 0..8 {
        indexer
            .apply_event_acked(store(worker, &[], &[worker, 1, 2]))
            .unwrap();
        indexer
            .apply_event_acked(remove(worker, &[], &[worker, 1, 2]))
            .unwrap();
    }
    indexer.flush();
    assert_eq!(indexer.tree().sweep_trigger().finished(), 0);
    assert_eq!(
        indexer.tree().node_count(),
        8,
        "dead leaves stay until a sweep"
    );
    assert_eq!(indexer.tree().reclaim_estimates(), (24, 24));
    assert_eq!(indexer.sweep_stale().map(|s| s.unlinked), Some(8));
    assert_eq!(indexer.tree().node_count(), 0);
}

#[test]
fn volume_trigger_returns_node_count_to_baseline() {
    let indexer = crtc::Indexer::<G>::new(crtc::IndexerConfig {
        lanes: 2,
        tree: config(true, SweepPolicy::eager()),
    });
    indexer
        .apply_event_acked(store(0, &[], &[1, 2, 3]))
        .unwrap();
    let baseline = indexer.tree().node_count();
    for round in 0..48 {
        let worker = 1 + round % 6;
        indexer
            .apply_event_acked(store(worker, &[], &[1, 2, 3, 100 + round]))
            .unwrap();
        indexer
            .apply_event_acked(remove(worker, &[1, 2, 3], &[100 + round]))
            .unwrap();
        indexer.flush();
    }
    indexer
        .apply_event_acked(store(0, &[1, 2, 3], &[4]))
        .unwrap();
    indexer.flush();
    assert!(
        indexer.tree().sweep_trigger().finished() > 0,
        "volume sweeps ran"
    );
    // An idle lane checks the rules again after the flush's ack and may
    // start one more sweep; the property is that the flag is never left
    // set, so wait (bounded) for any such sweep to end.
    for _ in 0..10_000 {
        if !indexer.tree().sweep_trigger().in_flight() {
            break;
        }
        crtc_strategies::sync::spin_loop();
        thread::sleep(Duration::from_millis(1));
    }
    assert!(
        !indexer.tree().sweep_trigger().in_flight(),
        "the flag was released"
    );
    // `sweep_stale` flushes first, and an idle lane may claim one more
    // sweep after that ack too; then ours returns `None` while the lane's
    // may still be unlinking. Retry (bounded) until a sweep of ours runs.
    let mut ours = indexer.sweep_stale();
    for _ in 0..10_000 {
        if ours.is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(1));
        ours = indexer.sweep_stale();
    }
    assert!(ours.is_some(), "a sweep of the caller's own ran");
    assert_eq!(indexer.tree().node_count(), baseline + 1);
    assert_eq!(indexer.find_matches(&q(&[1, 2, 3, 4])).score(rank(0)), 4);
}

#[test]
fn one_sweep_in_flight_and_the_flag_is_released() {
    let mut f = fixture(1, SweepPolicy::eager());
    f.apply(0, store(1, &[], &[1]));
    f.apply(0, remove(1, &[], &[1]));
    fold(&mut f);
    let claim = f
        .tree
        .sweep_due()
        .expect("due: one dead block, floor 1, no gap");
    assert!(f.tree.sweep_due().is_none(), "one in flight");
    assert!(
        f.tree.sweep_stale().is_none(),
        "a direct sweep waits its turn"
    );
    let stats = f.tree.run_sweep(claim);
    assert_eq!(stats.unlinked, 1);
    assert!(!f.tree.sweep_trigger().in_flight());
    assert!(f.tree.sweep_due().is_none(), "nothing dead any more");
    let claim = f.tree.sweep_stale().map(|_| ());
    assert!(claim.is_some());
    f.apply(0, store(1, &[], &[2]));
    f.apply(0, remove(1, &[], &[2]));
    fold(&mut f);
    // Due again once 10 × the last sweep's duration passed; a sweep the
    // scheduler preempted lasted longer, so poll (bounded) instead of
    // sleeping a fixed time.
    let mut due = None;
    for _ in 0..10_000 {
        due = f.tree.sweep_due();
        if due.is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(1));
    }
    let claim = due.expect("due again once 10 × the last duration passed");
    f.tree.cancel_sweep(claim);
    assert!(
        !f.tree.sweep_trigger().in_flight(),
        "a cancelled claim frees the flag"
    );
}

#[test]
fn held_dead_leaf_is_skipped_and_reported() {
    let mut f = fixture(1, SweepPolicy::disabled());
    f.apply(0, store(1, &[], &[1, 2]));
    // Removed out of band: the lane keeps entries naming the swept node.
    f.tree.remove_worker_dp_rank(&mut [], rank(1));
    let stats = f.tree.sweep_stale().unwrap();
    assert_eq!((stats.held, stats.unlinked), (1, 0));
    assert_eq!(f.tree.node_count(), 1);
    f.lanes.clear();
    let stats = f.tree.sweep_stale().unwrap();
    assert_eq!((stats.held, stats.unlinked), (0, 1));
    assert_eq!(f.tree.node_count(), 0);
}

#[test]
fn sweep_keeps_live_structure_and_later_stores_create_children() {
    let mut f = fixture(2, SweepPolicy::disabled());
    f.apply(0, store(1, &[], &[1, 2, 3, 4]));
    f.apply(1, store(2, &[], &[1, 2, 5]));
    f.apply(1, remove(2, &[1, 2], &[5]));
    let stats = f.tree.sweep_stale().unwrap();
    assert_eq!(stats.unlinked, 1);
    assert_eq!(f.edge_lengths(), vec![2, 2]);
    f.apply(1, store(2, &[1, 2], &[5]));
    assert_eq!(
        f.edge_lengths(),
        vec![1, 2, 2],
        "the split prefix never extends again"
    );
    f.apply(0, store(1, &[1, 2, 3, 4], &[6]));
    assert_eq!(
        f.edge_lengths(),
        vec![1, 2, 3],
        "the live leaf still extends"
    );
    assert_eq!(f.score(2, &[1, 2, 5]), 3);
    assert_eq!(f.score(1, &[1, 2, 3, 4, 6]), 5);
}

/// Longest the writers race the sweeper before the test gives up on its
/// 200 sweeps (a liveness bound, far above the time they take).
const RACE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

#[test]
fn store_racing_back_to_back_sweeps_is_never_lost() {
    use crtc_strategies::sync::atomic::AtomicU64;
    let tree = Arc::new(Tree::<G>::new(config(true, SweepPolicy::disabled())));
    let (stop, sweeps) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let sweeper = {
        let (tree, stop, sweeps) = (Arc::clone(&tree), Arc::clone(&stop), Arc::clone(&sweeps));
        thread::spawn(move || {
            // Acquire: pairs with the Release below.
            while !stop.load(Ordering::Acquire) {
                if tree.sweep_stale().is_some() {
                    // Relaxed: a progress count the writers poll.
                    sweeps.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (tree, sweeps) = (Arc::clone(&tree), Arc::clone(&sweeps));
            thread::spawn(move || {
                let mut lane: Lane<G> = tree.new_lane();
                // Relaxed: progress only; run until the sweeper raced us a
                // while. Bounded by time, not rounds: beside the other test
                // threads the sweeper may get little of the two cores (a
                // 200,000-round bound ended before its 200 sweeps).
                let raced = || sweeps.load(Ordering::Relaxed) >= 200;
                let start = std::time::Instant::now();
                for round in 0.. {
                    if round >= 300 && raced() || start.elapsed() > RACE_LIMIT {
                        break;
                    }
                    store_check_evict(&tree, &mut lane, w, round);
                }
                lane
            })
        })
        .collect();
    let lanes: Vec<Lane<G>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    // Release: the sweeper stops after its current sweep.
    stop.store(true, Ordering::Release);
    sweeper.join().unwrap();
    // Relaxed: read after the join.
    assert!(sweeps.load(Ordering::Relaxed) >= 200);
    drop(lanes);
    tree.sweep_stale().unwrap();
    assert_eq!(tree.node_count(), 0, "everything was dead");
}

/// One round of the race above: a store whose score must be exact right
/// after it applied, then its eviction (leaf first).
fn store_check_evict(tree: &Tree<G>, lane: &mut Lane<G>, w: u64, round: u64) {
    let tail = 10 + round % 3;
    tree.apply_event(lane, &store(w, &[], &[1, 2, tail]))
        .unwrap();
    let score = tree.find_matches(&q(&[1, 2, tail]), false).score(rank(w));
    assert_eq!(score, 3, "writer {w} round {round}: a store was lost");
    tree.apply_event(lane, &remove(w, &[1, 2], &[tail]))
        .unwrap();
    tree.apply_event(lane, &remove(w, &[], &[1, 2])).unwrap();
}
