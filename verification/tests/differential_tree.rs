//! The differential suite against the tree (C1–C4 and detail checks), for
//! every strategy × fast path on/off × driver (direct, indexer with 1 and 2
//! lanes), strict and non-strict; and C5: one sequential stream with the fast
//! path on and off gives identical scores, dumps and node counts. Cases come
//! from `CRTC_DIFF_CASES` (default 256); adding a strategy is one line.

use crtc::types::{LocalBlockHash, RouterEvent};
use crtc_strategies::ShapeGate;
use crtc_verification::seeds::persisted;
use crtc_verification::{
    cases_from_env, queries_for, random_stream, run_differential, stream_strategy, Backend,
    Catalog, IndexerBackend, Op, Rng, TreeBackend,
};
use proptest::prelude::*;

const MAX_STEPS: usize = 300;

/// Where this file's failing cases persist (committed; re-run first).
const REGRESSIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/proptest-regressions/differential_tree.txt"
);

fn config(divisor: u32) -> ProptestConfig {
    persisted((cases_from_env() / divisor).max(1), REGRESSIONS)
}

fn check(
    backend: &mut impl Backend,
    seed: u64,
    steps: usize,
    strict: bool,
    every: usize,
) -> Result<(), TestCaseError> {
    let ops = random_stream(seed, steps, strict);
    run_differential(backend, &ops, strict, every)
        .map(|_| ())
        .map_err(|e| TestCaseError::fail(format!("seed {seed} steps {steps} strict {strict}: {e}")))
}

/// Everything C5 compares: node count, dump (as a sorted multiset) and the
/// scores of every query.
fn observe<G: ShapeGate>(
    backend: &TreeBackend<G>,
    queries: &[Vec<LocalBlockHash>],
) -> (usize, Vec<String>, Vec<String>) {
    let mut dump: Vec<String> = backend
        .tree
        .dump_events()
        .into_iter()
        .map(|mut e: RouterEvent| {
            e.event.event_id = 0;
            format!("{e:?}")
        })
        .collect();
    dump.sort();
    let scores = queries
        .iter()
        .map(|q| format!("{:?}", backend.find_match_details(q).scores.sorted()))
        .collect();
    (backend.tree.node_count(), dump, scores)
}

fn fast_path_is_invisible<G: ShapeGate>(
    seed: u64,
    steps: usize,
    strict: bool,
) -> Result<(), TestCaseError> {
    let ops = random_stream(seed, steps, strict);
    let (mut fast, mut general) = (TreeBackend::<G>::new(true), TreeBackend::<G>::new(false));
    let (mut catalog, mut model, mut rng) = (
        Catalog::default(),
        crtc_verification::reference::Reference::new(),
        Rng::new(seed),
    );
    for (index, op) in ops.iter().enumerate() {
        let applied = [apply(&mut fast, op), apply(&mut general, op)];
        prop_assert_eq!(
            applied[0].is_ok(),
            applied[1].is_ok(),
            "op {} {}: acceptance differs",
            index,
            op
        );
        if let Op::Event(event) = op {
            catalog.record(event);
        }
        op.apply_to(&mut model);
        if index % 7 == 0 || index + 1 == ops.len() {
            let queries = queries_for(&model, &catalog, &mut rng);
            prop_assert_eq!(
                observe(&fast, &queries),
                observe(&general, &queries),
                "after op {} {}",
                index,
                op
            );
        }
    }
    Ok(())
}

fn apply<G: ShapeGate>(backend: &mut TreeBackend<G>, op: &Op) -> Result<(), crtc::types::KvError> {
    match op {
        Op::Event(event) => backend.apply(event),
        Op::RemoveWorker(worker) => {
            backend.remove_worker(*worker);
            Ok(())
        }
        Op::RemoveWorkerDpRank(rank) => {
            backend.remove_worker_dp_rank(*rank);
            Ok(())
        }
    }
}

macro_rules! differential {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            use super::*;
            type G = $gate;

            proptest! {
                #![proptest_config(config(1))]
                #[test]
                fn direct_tree((seed, steps) in stream_strategy(MAX_STEPS), strict in any::<bool>(), fast in any::<bool>()) {
                    check(&mut TreeBackend::<G>::new(fast), seed, steps, strict, 1)?;
                }
            }

            proptest! {
                #![proptest_config(config(4))]
                #[test]
                fn indexer_one_lane((seed, steps) in stream_strategy(MAX_STEPS), strict in any::<bool>(), fast in any::<bool>()) {
                    check(&mut IndexerBackend::<G>::new(1, fast), seed, steps, strict, 5)?;
                }

                #[test]
                fn indexer_two_lanes((seed, steps) in stream_strategy(MAX_STEPS), strict in any::<bool>(), fast in any::<bool>()) {
                    check(&mut IndexerBackend::<G>::new(2, fast), seed, steps, strict, 5)?;
                }
            }

            proptest! {
                #![proptest_config(config(1))]
                #[test]
                fn fast_path_on_and_off_agree((seed, steps) in stream_strategy(MAX_STEPS), strict in any::<bool>()) {
                    fast_path_is_invisible::<G>(seed, steps, strict)?;
                }
            }

            #[test]
            fn fast_path_is_taken_by_generated_decode_stores() {
                let mut backend = TreeBackend::<G>::new(true);
                let ops = random_stream(7, 2000, true);
                run_differential(&mut backend, &ops, true, 50).expect("strict stream");
                assert!(backend.lane().counters().fast_path_hits.get() > 0);
            }
        }
    };
}

crtc_strategies::for_each_gate!(differential);
