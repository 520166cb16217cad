//! Differential tests. For now only the harness's self-tests: the reference
//! backend must pass, a backend that drops removals must be caught.

use crtc::types::{
    KvCacheEventData, KvError, LocalBlockHash, MatchDetails, OverlapScores, RouterEvent, WorkerId,
    WorkerWithDpRank,
};
use crtc_verification::seeds::persisted;
use crtc_verification::{
    cases_from_env, random_stream, run_differential, stream_strategy, Backend, DropRemovalsBackend,
    ReferenceBackend,
};
use proptest::prelude::*;

const STEPS: usize = 1000;

#[test]
fn reference_backend_passes_strict_streams() {
    for seed in 0..20 {
        let ops = random_stream(seed, STEPS, true);
        let report = run_differential(&mut ReferenceBackend::new(), &ops, true, 1)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(
            report.rejected, 0,
            "seed {seed}: strict streams have no invalid stores"
        );
        assert_eq!(report.hole_undercounts, 0);
        assert!(report.queries > STEPS, "seed {seed}: {report:?}");
    }
}

#[test]
fn reference_backend_passes_non_strict_streams() {
    let mut rejected = 0;
    for seed in 0..20 {
        let ops = random_stream(seed, STEPS, false);
        let report = run_differential(&mut ReferenceBackend::new(), &ops, false, 1)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // The reference backend scores the held prefix: never a hole undercount.
        assert_eq!(report.hole_undercounts, 0);
        rejected += report.rejected;
    }
    assert!(rejected > 0, "non-strict streams exercise rejected stores");
}

#[test]
fn strict_checking_of_a_non_strict_stream_sees_holes_only_as_holes() {
    // Non-strict streams make held and reachable differ; the reference backend
    // still scores the held prefix, so even strict checking passes.
    for seed in 0..5 {
        let ops = random_stream(seed, STEPS, false);
        run_differential(&mut ReferenceBackend::new(), &ops, true, 3)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[test]
fn dropped_removals_are_caught() {
    let caught = (0..20).filter_map(|seed| {
        let ops = random_stream(seed, STEPS, true);
        let mut backend = DropRemovalsBackend::new(ReferenceBackend::new());
        run_differential(&mut backend, &ops, true, 1).err()
    });
    let errors: Vec<String> = caught.collect();
    assert!(
        !errors.is_empty(),
        "a backend dropping removals must be caught"
    );
    assert!(
        errors.iter().any(|e| e.contains("C1 overcount")),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].contains("op #") && errors[0].contains("query"),
        "{}",
        errors[0]
    );
}

#[test]
fn dropped_removals_are_caught_with_sparse_checkpoints() {
    let ops = random_stream(1, STEPS, true);
    let mut backend = DropRemovalsBackend::new(ReferenceBackend::new());
    assert!(run_differential(&mut backend, &ops, true, 50).is_err());
}

/// A broken backend: rejects every store under a parent, and scores one
/// block short.
struct Faulty {
    inner: ReferenceBackend,
    reject_children: bool,
}

impl Backend for Faulty {
    fn apply(&mut self, event: &RouterEvent) -> Result<(), KvError> {
        if let KvCacheEventData::Stored {
            parent_hash: Some(parent),
            ..
        } = &event.event.data
        {
            if self.reject_children {
                let rank = event.rank();
                return Err(KvError::ParentBlockNotFound {
                    rank,
                    parent: *parent,
                });
            }
        }
        self.inner.apply(event)
    }

    fn remove_worker(&mut self, worker: WorkerId) {
        self.inner.remove_worker(worker);
    }

    fn remove_worker_dp_rank(&mut self, rank: WorkerWithDpRank) {
        self.inner.remove_worker_dp_rank(rank);
    }

    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        let mut scores = self.inner.find_matches(query);
        if !self.reject_children {
            scores.scores.retain(|_, score| *score > 1);
            scores.scores.values_mut().for_each(|score| *score -= 1);
        }
        scores
    }

    fn find_match_details(&self, query: &[LocalBlockHash]) -> MatchDetails {
        MatchDetails {
            scores: self.find_matches(query),
            ..self.inner.find_match_details(query)
        }
    }
}

#[test]
fn rejected_valid_stores_and_undercounts_are_caught() {
    let ops = random_stream(3, STEPS, true);
    let mut rejecting = Faulty {
        inner: ReferenceBackend::new(),
        reject_children: true,
    };
    let error = run_differential(&mut rejecting, &ops, true, 1).unwrap_err();
    assert!(error.contains("C4 violated"), "{error}");
    let mut short = Faulty {
        inner: ReferenceBackend::new(),
        reject_children: false,
    };
    let error = run_differential(&mut short, &ops, true, 1).unwrap_err();
    assert!(error.contains("C3 undercount"), "{error}");
}

proptest! {
    #![proptest_config(persisted(cases_from_env(), concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/differential.txt"
    )))]

    #[test]
    fn reference_backend_is_exact((seed, steps) in stream_strategy(400), strict in any::<bool>()) {
        let ops = random_stream(seed, steps, strict);
        let result = run_differential(&mut ReferenceBackend::new(), &ops, true, 7);
        prop_assert!(result.is_ok(), "seed {} steps {}: {}", seed, steps, result.unwrap_err());
    }
}
