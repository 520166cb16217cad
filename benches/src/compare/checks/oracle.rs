//! Correctness after a run: the stream replayed serially through the
//! [`Reference`] model, then every distinct lookup of the stream scored by
//! the backend's final tree and classified by the model.
//!
//! The model is built once per workload. For each distinct query it also
//! keeps the exact answer (every rank's held prefix), so a backend score
//! list equal to it is known exact without asking the model again; any other
//! answer goes through [`Reference::check`], which names each inexact rank.

use crate::compare::measurement::plan::IssueOp;
use crate::compare::subjects::backend::Backend;
use crtc::types::{LocalBlockHash, WorkerWithDpRank};
use crtc_verification::reference::{Classification, Reference};
use crtc_verification::workload::{check::check_strict, Workload, WorkloadOp};
use rustc_hash::FxHashSet;

/// (rank, block) pairs `reference` holds.
fn held_memberships(reference: &Reference) -> u64 {
    reference
        .ranks()
        .map(|rank| reference.held_count(rank) as u64)
        .sum()
}

/// (rank, block) pairs held after applying `ops` (a prefix of a stream).
pub fn memberships_after(ops: &[IssueOp]) -> u64 {
    let mut reference = Reference::new();
    for op in ops {
        match op {
            IssueOp::Event(event) => {
                reference.apply(event);
            }
            IssueOp::RemoveWorker(worker) => reference.remove_worker(*worker),
        }
    }
    held_memberships(&reference)
}

/// How many discrepancies a [`Verdicts`] keeps verbatim.
const EXAMPLES: usize = 5;

/// The model's view of a workload's final state.
pub struct Oracle {
    reference: Reference,
    queries: Vec<Vec<LocalBlockHash>>,
    exact: Vec<Vec<(WorkerWithDpRank, u32)>>,
    strict: bool,
    memberships: u64,
}

/// What the model said about one backend's final tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    /// Distinct queries compared.
    pub queries: usize,
    /// (query, rank) pairs scored above the held prefix (C1).
    pub overcounts: u64,
    /// (query, rank) pairs scored below the reachable prefix (C3).
    pub undercounts: u64,
    /// (query, rank) pairs scored between the reachable and the held prefix:
    /// allowed after mid-chain evictions, a bug on strict streams (C2).
    pub hole_undercounts: u64,
    /// The first few discrepancies, printable.
    pub examples: Vec<String>,
}

impl Verdicts {
    /// Whether the scores break the read contract for a stream that is
    /// `strict` or not.
    pub fn failed(&self, strict: bool) -> bool {
        self.overcounts > 0 || self.undercounts > 0 || (strict && self.hole_undercounts > 0)
    }
}

impl Oracle {
    /// Replays `workload` through the model.
    pub fn new(workload: &Workload) -> Self {
        let mut reference = Reference::new();
        let mut seen = FxHashSet::default();
        let mut queries = Vec::new();
        for op in &workload.ops {
            match op {
                WorkloadOp::Event(event) => {
                    reference.apply(event);
                }
                WorkloadOp::RemoveWorker(worker) => reference.remove_worker(*worker),
                WorkloadOp::Query(query) => {
                    if seen.insert(query.as_slice()) {
                        queries.push(query.clone());
                    }
                }
            }
        }
        let ranks: Vec<_> = reference.ranks().collect();
        let exact = queries
            .iter()
            .map(|query| {
                ranks
                    .iter()
                    .map(|&rank| (rank, reference.held_prefix(rank, query) as u32))
                    .filter(|&(_, held)| held > 0)
                    .collect()
            })
            .collect();
        Self {
            memberships: held_memberships(&reference),
            reference,
            queries,
            exact,
            strict: check_strict(workload).is_ok(),
        }
    }

    /// (rank, block) pairs the model holds at the end of the stream.
    pub fn memberships(&self) -> u64 {
        self.memberships
    }

    /// Whether the stream is strict (leaf-first evictions, no holes).
    pub fn strict(&self) -> bool {
        self.strict
    }

    /// Number of distinct queries.
    pub fn query_count(&self) -> usize {
        self.queries.len()
    }

    /// Scores every distinct query on `backend` (drained) and classifies it.
    pub fn check(&self, backend: &dyn Backend) -> Verdicts {
        let mut verdicts = Verdicts {
            queries: self.queries.len(),
            ..Verdicts::default()
        };
        for (query, exact) in self.queries.iter().zip(&self.exact) {
            let scores = backend.find_matches(query);
            if scores.sorted() == *exact {
                continue;
            }
            for found in self.reference.check(query, &scores) {
                match found.class {
                    Classification::Overcount => verdicts.overcounts += 1,
                    Classification::UnexplainedUndercount => verdicts.undercounts += 1,
                    Classification::HoleUndercount => verdicts.hole_undercounts += 1,
                    Classification::Exact => continue,
                }
                if verdicts.examples.len() < EXAMPLES {
                    let head: Vec<u64> = query.iter().take(4).map(|l| l.0).collect();
                    verdicts.examples.push(format!(
                        "query of {} blocks starting {head:?}: {found}",
                        query.len()
                    ));
                }
            }
        }
        verdicts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::subjects::backend::BackendStats;
    use crate::compare::subjects::baseline::BaselineTree;
    use crtc::types::{OverlapScores, RouterEvent, WorkerId};
    use crtc_strategies::sync::Mutex;

    /// The baseline tree applied inline, with every score shifted by `skew`.
    struct Skewed {
        tree: Mutex<BaselineTree>,
        skew: i64,
    }

    impl Backend for Skewed {
        fn apply(&self, event: RouterEvent) {
            let _ = self.tree.lock().apply_event(&event);
        }
        fn remove_worker(&self, worker: WorkerId) {
            self.tree.lock().remove_worker(worker);
        }
        fn flush(&self) {}
        fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
            let mut scores = self.tree.lock().find_matches(query);
            scores
                .scores
                .values_mut()
                .for_each(|s| *s = (*s as i64 + self.skew).max(0) as u32);
            scores.scores.retain(|_, s| *s > 0);
            scores
        }
        fn applied(&self) -> u64 {
            0
        }
        fn stats(&self) -> BackendStats {
            BackendStats::default()
        }
    }

    fn replay(workload: &Workload, skew: i64) -> Verdicts {
        let backend = Skewed {
            tree: Mutex::new(BaselineTree::new()),
            skew,
        };
        for op in &workload.ops {
            match op {
                WorkloadOp::Event(event) => backend.apply(event.clone()),
                WorkloadOp::RemoveWorker(worker) => backend.remove_worker(*worker),
                WorkloadOp::Query(_) => {}
            }
        }
        Oracle::new(workload).check(&backend)
    }

    #[test]
    fn exact_scores_pass_and_skewed_scores_fail() {
        let workload = crtc_verification::workload::preset("agentx", 2, 0.02).unwrap();
        let oracle = Oracle::new(&workload);
        assert!(oracle.strict() && oracle.query_count() > 0 && oracle.memberships() > 0);
        let exact = replay(&workload, 0);
        assert_eq!(
            exact,
            Verdicts {
                queries: oracle.query_count(),
                ..Verdicts::default()
            }
        );
        assert!(!exact.failed(true));
        let over = replay(&workload, 1);
        assert!(over.overcounts > 0 && over.failed(false));
        assert!(!over.examples.is_empty() && over.examples[0].contains("Overcount"));
        let under = replay(&workload, -1);
        assert!(under.undercounts > 0 && under.overcounts == 0 && under.failed(false));
    }

    #[test]
    fn memberships_follow_the_prefix() {
        let workload = crtc_verification::workload::preset("chat", 2, 0.02).unwrap();
        let ops: Vec<IssueOp> = crate::compare::measurement::plan::Plan::new(&workload).ops;
        assert_eq!(memberships_after(&ops[..0]), 0);
        assert_eq!(
            memberships_after(&ops),
            Oracle::new(&workload).memberships()
        );
    }
}
