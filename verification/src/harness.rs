//! The differential driver: replays ops on a backend and the model in lock
//! step and checks the read contract at checkpoints.

use crate::chain;
use crate::reference::{Classification, Discrepancy, Reference, Verdict};
use crate::{queries_for, Backend, Catalog, Op, Rng};
use crtc::types::{LocalBlockHash, MatchDetails, OverlapScores};

/// What a differential run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Ops applied.
    pub ops: usize,
    /// Events applied (ops that are KV events).
    pub events: usize,
    /// Events the backend rejected (all of them legitimately).
    pub rejected: usize,
    /// Checkpoints run.
    pub checkpoints: usize,
    /// Queries asked.
    pub queries: usize,
    /// Rank scores checked (the ranks the model knows, per query).
    pub scores_checked: usize,
    /// Scores inside `reachable ≤ score < held` (allowed when not strict).
    pub hole_undercounts: usize,
}

/// Replays `ops` on `backend` and on a [`Reference`] kept in step (a store
/// the backend rejects is not applied to the model). Fails if the backend
/// rejects an event the model marks [`Verdict::Apply`] (C4). After every
/// `check_every` ops (0 = only at the end) and after the last op, calls
/// `backend.sync()` and asks every query of [`queries_for`]; fails on an
/// overcount (C1), an undercount below the reachable prefix (C3), any
/// inexact score when `strict` (C2), or details that disagree with the plain
/// scores. The error names the op index, the query, the rank, its score and
/// the model's held and reachable prefixes.
pub fn run_differential(
    backend: &mut impl Backend,
    ops: &[Op],
    strict: bool,
    check_every: usize,
) -> Result<Report, String> {
    let mut run = Run {
        strict,
        model: Reference::new(),
        catalog: Catalog::new(),
        rng: Rng::new(0xd1ff),
        report: Report::default(),
    };
    for (index, op) in ops.iter().enumerate() {
        run.apply(backend, index, op)?;
        let due = check_every > 0 && (index + 1) % check_every == 0;
        if due || index + 1 == ops.len() {
            backend.sync();
            run.checkpoint(backend, index, Some(op))?;
        }
    }
    if ops.is_empty() {
        backend.sync();
        run.checkpoint(backend, 0, None)?;
    }
    Ok(run.report)
}

struct Run {
    strict: bool,
    model: Reference,
    catalog: Catalog,
    rng: Rng,
    report: Report,
}

fn raw(query: &[LocalBlockHash]) -> Vec<u64> {
    query.iter().map(|l| l.0).collect()
}

impl Run {
    fn apply(&mut self, backend: &mut impl Backend, index: usize, op: &Op) -> Result<(), String> {
        self.report.ops += 1;
        match op {
            Op::Event(event) => {
                self.report.events += 1;
                self.catalog.record(event);
                let outcome = backend.apply(event);
                let verdict = self.model.apply_outcome(event, outcome.is_ok());
                if let Err(error) = outcome {
                    if verdict == Verdict::Apply {
                        return Err(format!(
                            "op #{index}: C4 violated: the backend rejected a valid event \
                             ({op}): {error}\nevent: {event:?}\n\
                             (replay ops[..={index}] to reproduce)"
                        ));
                    }
                    self.report.rejected += 1;
                }
            }
            Op::RemoveWorker(worker) => {
                backend.remove_worker(*worker);
                self.model.remove_worker(*worker);
            }
            Op::RemoveWorkerDpRank(rank) => {
                backend.remove_worker_dp_rank(*rank);
                self.model.remove_worker_dp_rank(*rank);
            }
        }
        Ok(())
    }

    fn checkpoint(
        &mut self,
        backend: &impl Backend,
        index: usize,
        op: Option<&Op>,
    ) -> Result<(), String> {
        let last = op.map_or_else(|| "no ops".to_string(), |op| op.to_string());
        self.report.checkpoints += 1;
        for query in queries_for(&self.model, &self.catalog, &mut self.rng) {
            self.report.queries += 1;
            let scores = backend.find_matches(&query);
            let details = backend.find_match_details(&query);
            let fail = |what: String| {
                format!(
                    "op #{index} ({last}): {what}\nquery ({} blocks): {:?}\nscores: {:?}\n\
                     (replay ops[..={index}] and ask the query to reproduce)",
                    query.len(),
                    raw(&query),
                    scores.sorted()
                )
            };
            self.check_scores(&query, &scores).map_err(&fail)?;
            check_details(&query, &scores, &details).map_err(&fail)?;
        }
        Ok(())
    }

    fn check_scores(
        &mut self,
        query: &[LocalBlockHash],
        scores: &OverlapScores,
    ) -> Result<(), String> {
        let found = self.model.check(query, scores);
        self.report.scores_checked += self.model.ranks().count();
        for d in found {
            match d.class {
                Classification::Overcount => return Err(violation("C1 overcount", &d)),
                Classification::UnexplainedUndercount => {
                    return Err(violation("C3 undercount below the reachable prefix", &d));
                }
                Classification::HoleUndercount if self.strict => {
                    return Err(violation("C2 inexact score in a strict stream", &d));
                }
                Classification::HoleUndercount => self.report.hole_undercounts += 1,
                Classification::Exact => {}
            }
        }
        Ok(())
    }
}

fn violation(what: &str, d: &Discrepancy) -> String {
    format!(
        "{what}: rank {} scored {}, held prefix {}, reachable prefix {}",
        d.rank, d.score, d.held, d.reachable
    )
}

/// Detailed scores equal plain scores, no rank is listed with score 0, and
/// each last matched hash is the query's sequence hash at `score - 1`.
fn check_details(
    query: &[LocalBlockHash],
    scores: &OverlapScores,
    details: &MatchDetails,
) -> Result<(), String> {
    if let Some((rank, _)) = scores.sorted().into_iter().find(|&(_, s)| s == 0) {
        return Err(format!("detail mismatch: rank {rank} listed with score 0"));
    }
    if details.scores != *scores {
        return Err(format!(
            "detail mismatch: detailed scores {:?} differ from plain scores",
            details.scores.sorted()
        ));
    }
    let hashes = chain::sequence_hashes(&raw(query));
    for (rank, score) in scores.sorted() {
        let expected = hashes.get(score as usize - 1).copied();
        let got = details.last_matched.get(&rank).copied();
        if got != expected || expected.is_none() {
            return Err(format!(
                "detail mismatch: rank {rank} scored {score}, \
                 last matched {got:?}, expected {expected:?}"
            ));
        }
    }
    if let Some(rank) = details
        .last_matched
        .keys()
        .find(|r| !scores.scores.contains_key(r))
    {
        return Err(format!(
            "detail mismatch: last matched hash for unscored rank {rank}"
        ));
    }
    Ok(())
}
