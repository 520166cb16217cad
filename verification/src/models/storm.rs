//! The decode storms of the shuttle suites (papers/protocols.md §5): one
//! writer lane decodes a chain on one hot leaf, either one rank alone (pure
//! appends) or two ranks in lock step (every append of the first rank
//! demotes the second, a structural change for the seqlock gate), while two
//! reader threads score the whole chain over and over. Every read must stay
//! within its bounds and complete, and the final scores must equal the
//! reference's; the gate's retry counters (process-wide, read before and
//! after each read and each schedule) give the retry distribution. Every
//! schedule runs between the grace reclaimer's execution bounds
//! ([`grace`]), as the scenarios do.

use super::scenarios::{expected_scores, interleave, setup_events, RankStream};
use super::{grace, model_config, observe, query, Explorer, QueryScores, ReadBounds, Scenario};
use crate::check;
use crate::property::Property;
use crtc::types::RouterEvent;
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;
use std::cell::RefCell;

/// Reads a gate's process-wide retry counters: `(optimistic restarts,
/// pessimistic fallbacks)`. Gates without optimistic readers report zeros.
pub type RetryCounters = fn() -> (u64, u64);

/// The decode storm on one hot leaf, after a three-block prompt that rank 1
/// stores whole: two readers score the whole chain `reads` times each while
/// one writer lane decodes `blocks` blocks.
///
/// - pure (`lock_step: false`): rank 2 holds only the first two prompt
///   blocks (a cutoff), and rank 1 alone decodes: every append is pure (it
///   demotes nobody), so an optimistic reader never has a reason to retry;
/// - lock step (`lock_step: true`): rank 2 holds the whole prompt too, and
///   both ranks decode the same chain, rank 1 first: every append of rank 1
///   demotes rank 2 (a structural write for the seqlock gate), and rank 2's
///   store only raises its coverage back to full.
#[derive(Clone, Copy, Debug)]
pub struct Storm {
    /// Blocks decoded (per rank in lock step).
    pub blocks: u64,
    /// Reads per reader.
    pub reads: usize,
    /// Both ranks decode in lock step (every append demotes).
    pub lock_step: bool,
}

/// Retry statistics accumulated over a storm's schedules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Schedules run.
    pub schedules: u64,
    /// Reads completed.
    pub reads: u64,
    /// Optimistic restarts (exact: counted per schedule).
    pub restarts: u64,
    /// Pessimistic fallbacks (exact: counted per schedule).
    pub fallbacks: u64,
    /// Most restarts within one read's window (an upper bound on one read's
    /// own restarts: the window may include the other reader's).
    pub max_per_read: u64,
    /// Reads whose window saw at least one restart (an upper bound).
    pub reads_restarted: u64,
    /// Most fallbacks in one schedule.
    pub max_fallbacks_per_schedule: u64,
}

impl RetryStats {
    /// Restarts per read.
    pub fn mean(&self) -> f64 {
        self.restarts as f64 / self.reads.max(1) as f64
    }
}

impl std::fmt::Display for RetryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reads in {} schedules: restarts/read mean {:.3}, max {} (window bound), \
             {} reads restarted, {} restarts, {} pessimistic fallbacks (max {} per schedule)",
            self.reads,
            self.schedules,
            self.mean(),
            self.max_per_read,
            self.reads_restarted,
            self.restarts,
            self.fallbacks,
            self.max_fallbacks_per_schedule
        )
    }
}

thread_local! {
    /// The storm's statistics (the checkers run every task on this thread).
    static STORM_STATS: RefCell<RetryStats> = RefCell::new(RetryStats::default());
}

impl Storm {
    /// The two ranks' streams: the prompt in the setup (lane 0), then the
    /// chain, rank 1 then rank 2 per block, on one writer lane.
    fn scenario(self) -> Scenario {
        let prompt = [1, 2, 3];
        let chain: Vec<u64> = (4..4 + self.blocks).collect();
        let mut a = RankStream::new(1);
        let mut b = RankStream::new(2);
        let mut setup: Vec<(usize, RouterEvent)> = Vec::new();
        setup.extend(setup_events(a.extend(&prompt).take()).map(|e| (0, e)));
        let held = if self.lock_step {
            &prompt[..]
        } else {
            &prompt[..2]
        };
        setup.extend(setup_events(b.extend(held).take()).map(|e| (0, e)));
        a.decode(&chain);
        let events = if self.lock_step {
            b.decode(&chain);
            interleave(a.take(), b.take())
        } else {
            a.take()
        };
        let events = setup_events(events).collect();
        let mut full = prompt.to_vec();
        full.extend(&chain);
        Scenario {
            name: if self.lock_step {
                "decode storm (lock step)"
            } else {
                "decode storm (pure)"
            },
            setup,
            threads: vec![events],
            queries: vec![full],
        }
    }

    /// The storm's name in reports.
    pub fn name(self) -> &'static str {
        self.scenario().name
    }

    /// Explores the storm for gate `G` with `counters`; returns the retry
    /// statistics. Every read must stay within its bounds and complete, and
    /// the final scores must equal the reference's.
    pub fn explore<G: ShapeGate>(
        self,
        explorer: &dyn Explorer,
        counters: RetryCounters,
    ) -> RetryStats {
        let scenario = self.scenario();
        let bounds = scenario.read_bounds();
        let expected = expected_scores(&scenario);
        STORM_STATS.with(|s| *s.borrow_mut() = RetryStats::default());
        let reads = self.reads;
        explorer.explore(Box::new(move || {
            storm_schedule::<G>(&scenario, &bounds, &expected, reads, counters)
        }));
        STORM_STATS.with(|s| s.borrow().clone())
    }
}

fn storm_schedule<G: ShapeGate>(
    scenario: &Scenario,
    bounds: &ReadBounds,
    expected: &[QueryScores],
    reads: usize,
    counters: RetryCounters,
) {
    grace::begin_execution();
    let (tree, mut lanes) = scenario.prepare::<G>(model_config(true));
    let tree = Arc::new(tree);
    let (restarts0, fallbacks0) = counters();
    let writer = {
        let tree = Arc::clone(&tree);
        let mut lane = lanes.remove(0);
        let events = scenario.threads[0].clone();
        thread::spawn(move || {
            let rejected: Vec<String> = events
                .iter()
                .filter_map(|e| tree.apply_event(&mut lane, e).err())
                .map(|e| e.to_string())
                .collect();
            (rejected, lane)
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let tree = Arc::clone(&tree);
            let q = query(&scenario.queries[0]);
            let bounds = bounds.clone();
            thread::spawn(move || {
                let mut violations = Vec::new();
                let mut windows = Vec::new();
                for _ in 0..reads {
                    let (r0, f0) = counters();
                    let scores = tree.find_matches(&q, false);
                    let (r1, f1) = counters();
                    windows.push((r1 - r0, f1 - f0));
                    violations.extend(bounds.check(&q, &scores).err());
                }
                (violations, windows)
            })
        })
        .collect();
    let (rejected, lane) = writer.join().expect("the writer panicked");
    let results: Vec<_> = readers
        .into_iter()
        .map(|h| h.join().expect("a reader panicked"))
        .collect();
    let (restarts1, fallbacks1) = counters();
    let observed = observe(&*tree, &scenario.queries);
    drop(lane);
    drop(lanes);
    drop(tree);
    grace::end_execution();
    check!(
        Property::Accepted,
        rejected.is_empty(),
        "decode storm: rejected events {rejected:?}"
    );
    let mut done = 0;
    for (violations, windows) in &results {
        check!(
            Property::ReadBounds,
            violations.is_empty(),
            "decode storm: reads broke their bounds: {violations:?}"
        );
        done += windows.len();
    }
    assert_eq!(done, 2 * reads, "decode storm: a read did not complete");
    check!(
        Property::SerialOutcome,
        observed.scores == expected,
        "decode storm: final scores differ from the reference (C2): {:?} != {expected:?}",
        observed.scores
    );
    STORM_STATS.with(|s| {
        let mut s = s.borrow_mut();
        s.schedules += 1;
        s.reads += done as u64;
        s.restarts += restarts1 - restarts0;
        s.fallbacks += fallbacks1 - fallbacks0;
        s.max_fallbacks_per_schedule = s.max_fallbacks_per_schedule.max(fallbacks1 - fallbacks0);
        for &(restarts, _) in results.iter().flat_map(|(_, w)| w) {
            s.max_per_read = s.max_per_read.max(restarts);
            s.reads_restarted += u64::from(restarts > 0);
        }
    });
}
