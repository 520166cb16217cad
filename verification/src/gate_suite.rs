//! The differential suite of one gate, as a macro any crate instantiates:
//! [`differential_gate_tests!`](crate::differential_gate_tests) expands to
//! C1–C4 and the detail checks of [`run_differential`] on random streams for
//! the direct tree and the indexer (1 and 2 lanes), strict and non-strict,
//! fast path on and off; C5 (one sequential stream with the fast path on
//! and off gives identical scores, dumps and node counts); and a check that
//! generated decode stores take the fast path. Cases come from
//! `CRTC_DIFF_CASES` (default 256), failures persist to the caller's
//! regressions file. `verification/tests/differential_tree.rs` runs it for
//! every gate of `crtc_strategies::for_each_gate!`; a gate of another crate
//! runs it from its own tests (`gates/mutex-gate/tests/differential.rs`).

use crate::catalog::Catalog;
use crate::reference::Reference;
use crate::{queries_for, random_stream, run_differential, Backend, Op, Rng, TreeBackend};
use crtc::types::{KvError, LocalBlockHash, RouterEvent};
use crtc_strategies::ShapeGate;
use proptest::prelude::*;

/// Longest generated stream.
pub const MAX_STEPS: usize = 300;

/// Runs the stream of `(seed, steps, strict)` on `backend` against the
/// reference model, checking every `every` ops.
pub fn check(
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

/// C5 on the stream of `(seed, steps, strict)`: the fast path on and off
/// accept the same ops and agree on every observation.
pub fn fast_path_is_invisible<G: ShapeGate>(
    seed: u64,
    steps: usize,
    strict: bool,
) -> Result<(), TestCaseError> {
    let ops = random_stream(seed, steps, strict);
    let (mut fast, mut general) = (TreeBackend::<G>::new(true), TreeBackend::<G>::new(false));
    let (mut catalog, mut model, mut rng) = (Catalog::default(), Reference::new(), Rng::new(seed));
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

fn apply<G: ShapeGate>(backend: &mut TreeBackend<G>, op: &Op) -> Result<(), KvError> {
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

/// Generated decode stores take the fast path on a strict stream.
pub fn fast_path_is_taken<G: ShapeGate>() {
    let mut backend = TreeBackend::<G>::new(true);
    let ops = random_stream(7, 2000, true);
    run_differential(&mut backend, &ops, true, 50).expect("strict stream");
    assert!(backend.lane().counters().fast_path_hits.get() > 0);
}

/// The differential tests of one gate in a module `$name`; see the module
/// docs. `$gate` is the gate type, `$label` its name (unused: the arguments
/// are those of `crtc_strategies::for_each_gate!`'s callback), `$regressions`
/// the `&'static str` path of the file failing cases persist to (e.g.
/// `concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/x.txt")`,
/// passed in parentheses).
#[macro_export]
macro_rules! differential_gate_tests {
    ($name:ident, $gate:ty, $label:literal, $regressions:expr) => {
        mod $name {
            use $crate::gate_suite::{check, fast_path_is_invisible, MAX_STEPS};
            use $crate::proptest::prelude::*;
            use $crate::{stream_strategy, IndexerBackend, TreeBackend};
            type G = $gate;

            fn config(divisor: u32) -> ProptestConfig {
                let cases = ($crate::cases_from_env() / divisor).max(1);
                $crate::seeds::persisted(cases, $regressions)
            }

            $crate::proptest::proptest! {
                #![proptest_config(config(1))]
                #[test]
                fn direct_tree((seed, steps) in stream_strategy(MAX_STEPS), strict in any::<bool>(), fast in any::<bool>()) {
                    check(&mut TreeBackend::<G>::new(fast), seed, steps, strict, 1)?;
                }
            }

            $crate::proptest::proptest! {
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

            $crate::proptest::proptest! {
                #![proptest_config(config(1))]
                #[test]
                fn fast_path_on_and_off_agree((seed, steps) in stream_strategy(MAX_STEPS), strict in any::<bool>()) {
                    fast_path_is_invisible::<G>(seed, steps, strict)?;
                }
            }

            #[test]
            fn fast_path_is_taken_by_generated_decode_stores() {
                $crate::gate_suite::fast_path_is_taken::<G>();
            }
        }
    };
}
