//! The serial cross-check behind `crtc compare --check-upstream`: one stream
//! applied in order, on the caller's thread, to a *peer* index (upstream's
//! CRTC) and to each of ours, with every lookup of the stream scored by all
//! of them at its position in the stream and by the [`Reference`] model.
//!
//! Per lookup, the model's exact answer (every rank's held prefix) is
//! computed once. A score list equal to it needs no further work; any other
//! list is classified rank by rank with [`Reference::check`]. Then:
//!
//! - Every (lookup, rank) pair on which the peer and ours disagree is a
//!   [`Difference`], and the model says who deviates ([`Deviator`]): a side
//!   deviates when its score breaks the read contract for the stream — any
//!   inexact score on a strict stream, an overcount or an unexplained
//!   undercount on a non-strict one (hole undercounts are allowed there).
//! - Independently of the peer, every inexact score of ours is counted; on a
//!   strict stream ours must match the model exactly, so any such score is a
//!   failure ([`CrossCheck::ours_failures`]).
//!
//! A difference where the peer deviates is a finding about the peer, to be
//! recorded, not imitated.

use crtc::types::{LocalBlockHash, OverlapScores, RouterEvent, WorkerId, WorkerWithDpRank};
use crtc_verification::reference::{Classification, Reference};
use crtc_verification::workload::{check::check_strict, Workload, WorkloadOp};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// An index applied serially on the caller's thread.
pub trait SerialIndex {
    /// The row label ("rwlock fast", "upstream-1.6.1").
    fn label(&self) -> String;
    /// Applies one event (a rejected event is simply not applied).
    fn apply(&mut self, event: &RouterEvent);
    /// Removes every rank of `worker`.
    fn remove_worker(&mut self, worker: WorkerId);
    /// Scores `query` after every earlier operation took effect.
    fn find_matches(&mut self, query: &[LocalBlockHash]) -> OverlapScores;
}

/// Which side of a [`Difference`] breaks the read contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Deviator {
    /// The peer (upstream) deviates; ours is within the contract.
    Peer,
    /// Ours deviates; the peer is within the contract.
    Ours,
    /// Both deviate.
    Both,
    /// Both are within the contract (possible on non-strict streams only).
    Neither,
}

impl Deviator {
    fn describe(self, peer: &str) -> String {
        match self {
            Deviator::Peer => format!("{peer} deviates"),
            Deviator::Ours => "ours deviates".to_owned(),
            Deviator::Both => "both deviate".to_owned(),
            Deviator::Neither => "both within the contract".to_owned(),
        }
    }
}

/// One (lookup, rank) pair on which the peer and ours disagree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// Index of the lookup among the stream's lookups (0-based).
    pub query: usize,
    /// Writes (events and worker removals) applied before it.
    pub position: usize,
    /// Blocks in the lookup.
    pub query_len: usize,
    /// Its first local hashes.
    pub query_head: Vec<u64>,
    /// The rank, as `worker.dp_rank`.
    pub rank: String,
    /// The peer's score.
    pub peer: u32,
    /// Our scores: one `("all", score)` entry when every configuration of
    /// ours agrees, else one entry per configuration.
    pub ours: Vec<(String, u32)>,
    /// The model's held prefix.
    pub held: usize,
    /// The model's reachable prefix.
    pub reachable: usize,
    /// The model's class of the peer's score.
    pub peer_class: String,
    /// The model's class of our score (the worst one when ours disagree).
    pub ours_class: String,
    /// Who deviates.
    pub deviates: Deviator,
}

/// What the cross-check found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CrossCheck {
    /// The peer's label.
    pub peer: String,
    /// Our configurations, in order.
    pub ours: Vec<String>,
    /// Whether the stream is strict (leaf-first evictions, no holes).
    pub strict: bool,
    /// Lookups scored (duplicates included: each at its own position).
    pub queries: u64,
    /// Writes applied.
    pub writes: u64,
    /// Lookups with at least one difference.
    pub differing_queries: u64,
    /// (lookup, rank) pairs on which the peer and ours disagree.
    pub differences: u64,
    /// Differences by who deviates.
    pub by_deviator: BTreeMap<String, u64>,
    /// (lookup, rank) pairs the peer scored inexactly, by the model's class
    /// (whether or not ours agreed).
    pub peer_inexact: BTreeMap<String, u64>,
    /// (configuration, lookup, rank) triples ours scored inexactly, by class.
    pub ours_inexact: BTreeMap<String, u64>,
    /// Those of ours that break the contract for this stream (must be 0).
    pub ours_failures: u64,
    /// The first differences, in stream order.
    pub listed: Vec<Difference>,
}

impl CrossCheck {
    /// Differences where the peer deviates (alone or together with ours).
    pub fn peer_findings(&self) -> u64 {
        ["peer", "both"]
            .iter()
            .filter_map(|k| self.by_deviator.get(*k))
            .sum()
    }

    /// The printable report: a summary, then one line per listed difference.
    pub fn render(&self) -> String {
        let mut out = self.summary();
        for d in &self.listed {
            out.push_str(&self.difference_line(d));
        }
        if self.differences > self.listed.len() as u64 {
            let _ = writeln!(
                out,
                "  ... {} more differences not listed (raise --check-limit)",
                self.differences - self.listed.len() as u64
            );
        }
        out
    }

    /// The summary lines: what was scored, the differences and who deviates.
    fn summary(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "check-upstream: {} lookups at their stream positions ({} writes, {} stream) scored by {} and by {} configurations of ours ({}), each against the reference model",
            self.queries,
            self.writes,
            if self.strict { "strict" } else { "non-strict" },
            self.peer,
            self.ours.len(),
            self.ours.join(", "),
        );
        let _ = writeln!(
            out,
            "  differences {} vs ours: {} (lookup, rank) pairs in {} lookups; who deviates: {}",
            self.peer,
            self.differences,
            self.differing_queries,
            counts(&self.by_deviator)
        );
        let _ = writeln!(
            out,
            "  {} vs reference: inexact (lookup, rank) pairs: {}",
            self.peer,
            counts(&self.peer_inexact)
        );
        let _ = writeln!(
            out,
            "  ours vs reference: inexact (configuration, lookup, rank) triples: {}; contract failures: {}{}",
            counts(&self.ours_inexact),
            self.ours_failures,
            if self.strict { " (strict stream: must be exact)" } else { "" }
        );
        let _ = writeln!(
            out,
            "  findings (differences where {} deviates): {}",
            self.peer,
            self.peer_findings()
        );
        out
    }

    /// One listed difference as a line.
    fn difference_line(&self, d: &Difference) -> String {
        let ours = d
            .ours
            .iter()
            .map(|(label, score)| format!("{label} {score}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "  lookup #{} (after {} writes, {} blocks, head {:?}) rank {}: {} {} [{}], ours {} [{}]; model held {}, reachable {} -> {}\n",
            d.query,
            d.position,
            d.query_len,
            d.query_head,
            d.rank,
            self.peer,
            d.peer,
            d.peer_class,
            ours,
            d.ours_class,
            d.held,
            d.reachable,
            d.deviates.describe(&self.peer),
        )
    }
}

/// "name count, ..." of a tally, or "none".
fn counts(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "none".to_owned();
    }
    map.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn class_name(class: Classification) -> String {
    format!("{class:?}")
}

/// Whether `class` breaks the read contract on a stream that is `strict` or
/// not.
fn breaks(class: Classification, strict: bool) -> bool {
    match class {
        Classification::Exact => false,
        Classification::HoleUndercount => strict,
        Classification::Overcount | Classification::UnexplainedUndercount => true,
    }
}

/// Severity order for picking the worst of several classes.
fn severity(class: Classification) -> u8 {
    match class {
        Classification::Exact => 0,
        Classification::HoleUndercount => 1,
        Classification::UnexplainedUndercount => 2,
        Classification::Overcount => 3,
    }
}

/// How many local hashes a [`Difference`] keeps of its lookup.
const HEAD: usize = 4;

/// Runs the cross-check of `workload` on `peer` and `ours`, listing at most
/// `limit` differences.
pub fn cross_check(
    workload: &Workload,
    mut peer: Box<dyn SerialIndex>,
    mut ours: Vec<Box<dyn SerialIndex>>,
    limit: usize,
) -> CrossCheck {
    let strict = check_strict(workload).is_ok();
    let mut result = CrossCheck {
        peer: peer.label(),
        ours: ours.iter().map(|o| o.label()).collect(),
        strict,
        ..CrossCheck::default()
    };
    let mut reference = Reference::new();
    let mut lookup = 0usize;
    for op in &workload.ops {
        match op {
            WorkloadOp::Event(event) => {
                result.writes += 1;
                reference.apply(event);
                peer.apply(event);
                ours.iter_mut().for_each(|o| o.apply(event));
            }
            WorkloadOp::RemoveWorker(worker) => {
                result.writes += 1;
                reference.remove_worker(*worker);
                peer.remove_worker(*worker);
                ours.iter_mut().for_each(|o| o.remove_worker(*worker));
            }
            WorkloadOp::Query(query) => {
                let at = Lookup {
                    reference: &reference,
                    query,
                    index: lookup,
                };
                compare_one(&mut result, &at, &mut *peer, &mut ours, limit);
                lookup += 1;
            }
        }
    }
    result.queries = lookup as u64;
    result
}

fn tally(
    map: &mut BTreeMap<String, u64>,
    reference: &Reference,
    query: &[LocalBlockHash],
    scores: &OverlapScores,
) -> Vec<Classification> {
    let found = reference.check(query, scores);
    for d in &found {
        *map.entry(class_name(d.class)).or_default() += 1;
    }
    found.into_iter().map(|d| d.class).collect()
}

/// One lookup being cross-checked: the model at its stream position, the
/// query and its index among the lookups.
struct Lookup<'a> {
    reference: &'a Reference,
    query: &'a [LocalBlockHash],
    index: usize,
}

/// Who deviates from the model, given the peer's and ours' classes.
fn deviator(peer: Classification, ours: Classification, strict: bool) -> Deviator {
    match (breaks(peer, strict), breaks(ours, strict)) {
        (true, false) => Deviator::Peer,
        (false, true) => Deviator::Ours,
        (true, true) => Deviator::Both,
        (false, false) => Deviator::Neither,
    }
}

/// The tally key of a deviator.
fn deviator_key(deviates: Deviator) -> &'static str {
    match deviates {
        Deviator::Peer => "peer",
        Deviator::Ours => "ours",
        Deviator::Both => "both",
        Deviator::Neither => "neither",
    }
}

/// Scores the lookup on the peer and on ours, tallying every inexact score
/// against the model; whether any of ours differs from the peer.
fn score_all(
    result: &mut CrossCheck,
    at: &Lookup<'_>,
    peer: &mut dyn SerialIndex,
    ours: &mut [Box<dyn SerialIndex>],
) -> (OverlapScores, Vec<OverlapScores>, bool) {
    let (reference, query) = (at.reference, at.query);
    let exact: Vec<(WorkerWithDpRank, u32)> = reference
        .ranks()
        .map(|rank| (rank, reference.held_prefix(rank, query) as u32))
        .filter(|&(_, held)| held > 0)
        .collect();
    let peer_scores = peer.find_matches(query);
    let peer_sorted = peer_scores.sorted();
    if peer_sorted != exact {
        tally(&mut result.peer_inexact, reference, query, &peer_scores);
    }
    let our_scores: Vec<OverlapScores> = ours.iter_mut().map(|o| o.find_matches(query)).collect();
    let mut differs = false;
    for scores in &our_scores {
        let sorted = scores.sorted();
        if sorted != exact {
            let classes = tally(&mut result.ours_inexact, reference, query, scores);
            result.ours_failures += classes
                .iter()
                .filter(|&&c| breaks(c, result.strict))
                .count() as u64;
        }
        differs |= sorted != peer_sorted;
    }
    (peer_scores, our_scores, differs)
}

/// Records a rank on which the peer (`peer_score`) and ours (`scores`)
/// disagree: who deviates, and the difference itself while fewer than
/// `limit` are listed.
fn record_difference(
    result: &mut CrossCheck,
    at: &Lookup<'_>,
    rank: WorkerWithDpRank,
    peer_score: u32,
    scores: Vec<u32>,
    limit: usize,
) {
    let (reference, query) = (at.reference, at.query);
    result.differences += 1;
    let peer_class = reference.classify(rank, query, peer_score);
    let ours_class = scores
        .iter()
        .map(|&s| reference.classify(rank, query, s))
        .max_by_key(|&c| severity(c))
        .unwrap_or(Classification::Exact);
    let deviates = deviator(peer_class, ours_class, result.strict);
    *result
        .by_deviator
        .entry(deviator_key(deviates).to_owned())
        .or_default() += 1;
    if result.listed.len() >= limit {
        return;
    }
    let ours_listed = if scores.iter().all(|&s| s == scores[0]) {
        vec![("all".to_owned(), scores[0])]
    } else {
        result.ours.iter().cloned().zip(scores).collect()
    };
    result.listed.push(Difference {
        query: at.index,
        position: result.writes as usize,
        query_len: query.len(),
        query_head: query.iter().take(HEAD).map(|l| l.0).collect(),
        rank: rank.to_string(),
        peer: peer_score,
        ours: ours_listed,
        held: reference.held_prefix(rank, query),
        reachable: reference.reachable_prefix(rank, query),
        peer_class: class_name(peer_class),
        ours_class: class_name(ours_class),
        deviates,
    });
}

fn compare_one(
    result: &mut CrossCheck,
    at: &Lookup<'_>,
    peer: &mut dyn SerialIndex,
    ours: &mut [Box<dyn SerialIndex>],
    limit: usize,
) {
    let (peer_scores, our_scores, differs) = score_all(result, at, peer, ours);
    if !differs {
        return;
    }
    result.differing_queries += 1;
    let mut ranks: Vec<WorkerWithDpRank> = peer_scores
        .scores
        .keys()
        .chain(our_scores.iter().flat_map(|s| s.scores.keys()))
        .copied()
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    for rank in ranks {
        let peer_score = peer_scores.score(rank);
        let scores: Vec<u32> = our_scores.iter().map(|s| s.score(rank)).collect();
        if scores.iter().any(|&s| s != peer_score) {
            record_difference(result, at, rank, peer_score, scores, limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::subjects::baseline::BaselineTree;

    /// The baseline tree, every score shifted by `skew` on every `every`-th
    /// lookup.
    struct Skewed {
        label: &'static str,
        tree: BaselineTree,
        skew: i64,
        every: usize,
        lookups: usize,
    }

    impl SerialIndex for Skewed {
        fn label(&self) -> String {
            self.label.to_owned()
        }
        fn apply(&mut self, event: &RouterEvent) {
            let _ = self.tree.apply_event(event);
        }
        fn remove_worker(&mut self, worker: WorkerId) {
            self.tree.remove_worker(worker);
        }
        fn find_matches(&mut self, query: &[LocalBlockHash]) -> OverlapScores {
            let mut scores = self.tree.find_matches(query);
            self.lookups += 1;
            if self.lookups % self.every == 0 {
                scores
                    .scores
                    .values_mut()
                    .for_each(|s| *s = (*s as i64 + self.skew).max(0) as u32);
                scores.scores.retain(|_, s| *s > 0);
            }
            scores
        }
    }

    fn index(label: &'static str, skew: i64, every: usize) -> Box<dyn SerialIndex> {
        Box::new(Skewed {
            label,
            tree: BaselineTree::new(),
            skew,
            every,
            lookups: 0,
        })
    }

    #[test]
    fn agreeing_indexes_have_no_differences() {
        let workload = crtc_verification::workload::preset("agentx", 2, 0.02).unwrap();
        let check = cross_check(
            &workload,
            index("peer", 0, 1),
            vec![index("a", 0, 1), index("b", 0, 1)],
            10,
        );
        assert!(check.strict && check.queries > 0);
        assert_eq!(check.differences, 0);
        assert_eq!(check.ours_failures, 0);
        assert!(check.peer_inexact.is_empty() && check.ours_inexact.is_empty());
        assert!(check
            .render()
            .contains("findings (differences where peer deviates): 0"));
    }

    #[test]
    fn the_model_names_who_deviates() {
        let workload = crtc_verification::workload::preset("agentx", 2, 0.02).unwrap();
        let check = cross_check(&workload, index("peer", 1, 3), vec![index("a", 0, 1)], 5);
        assert!(check.differences > 0);
        assert_eq!(check.by_deviator.get("peer"), Some(&check.differences));
        assert_eq!(check.peer_findings(), check.differences);
        assert_eq!(check.ours_failures, 0);
        assert_eq!(check.listed.len(), 5);
        assert!(check.listed.iter().all(|d| d.peer_class == "Overcount"
            && d.ours_class == "Exact"
            && d.ours[0].0 == "all"));
        let text = check.render();
        assert!(text.contains("peer deviates") && text.contains("more differences"));

        let check = cross_check(
            &workload,
            index("peer", 0, 1),
            vec![index("a", 0, 1), index("b", -1, 2)],
            usize::MAX,
        );
        assert!(check.ours_failures > 0);
        assert_eq!(check.by_deviator.get("ours"), Some(&check.differences));
        assert_eq!(check.listed.len() as u64, check.differences);
        assert!(check.listed.iter().all(|d| d.ours.len() == 2));
    }
}
