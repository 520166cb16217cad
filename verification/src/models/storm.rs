//! The decode storms of the shuttle suites (papers/protocols.md §5): one
//! writer lane decodes a chain on one hot leaf, either one rank alone (pure
//! appends) or two ranks in lock step (every append of the first rank
//! demotes the second, a structural change for the seqlock gate), while two
//! reader threads score the whole chain over and over. Every read must stay
//! within its bounds: at most what each rank held at some instant of the
//! read (C1, from the writer's progress read before and after it;
//! [`HeldCeilings`]) and at least the prompt blocks no event evicts
//! ([`ReadBounds`]); some read of the storm must overlap a write; and the
//! final scores must equal the reference's; the gate's retry counters (process-wide, read before and
//! after each read and each schedule) give the retry distribution, for the
//! paths the gate has (a counter a gate lacks is absent, not a constant, so
//! no check reads a figure that cannot move). Every
//! schedule runs between the grace reclaimer's execution bounds
//! ([`grace`]), as the scenarios do.

use super::scenarios::{expected_scores, interleave, setup_events, RankStream};
use super::{
    grace, model_config, observe, query, Explorer, HeldCeilings, QueryScores, ReadBounds, Scenario,
};
use crate::check;
use crate::property::Property;
use crtc::types::{LocalBlockHash, RouterEvent};
use crtc::{Lane, Tree};
use crtc_strategies::sync::unmodelled::{AtomicUsize, Ordering::SeqCst};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::ShapeGate;
use std::cell::RefCell;

/// A gate's process-wide retry counters, one per retry path it has: `None`
/// where the gate has no such path (the RwLock gate's readers lock, so it
/// has neither; the epoch gate's readers never restart, they re-read under
/// the node's mutex).
#[derive(Clone, Copy, Debug)]
pub struct RetryCounters {
    /// Optimistic restarts.
    pub restarts: Option<fn() -> u64>,
    /// Pessimistic fallbacks (reads re-run under a lock).
    pub fallbacks: Option<fn() -> u64>,
}

/// One reading of a gate's [`RetryCounters`]: (restarts, fallbacks).
type Reading = (Option<u64>, Option<u64>);

impl RetryCounters {
    /// A gate without retry paths.
    pub const NONE: Self = Self {
        restarts: None,
        fallbacks: None,
    };

    /// Reads the counters the gate has.
    fn read(self) -> Reading {
        (
            self.restarts.map(|get| get()),
            self.fallbacks.map(|get| get()),
        )
    }
}

/// The counts between two readings, per counter the gate has.
fn since(before: Reading, after: Reading) -> Reading {
    let delta = |b: Option<u64>, a: Option<u64>| Some(a? - b?);
    (delta(before.0, after.0), delta(before.1, after.1))
}

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

/// Retry statistics accumulated over a storm's schedules; the restart and
/// fallback figures are `None` for a gate without that path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetryStats {
    /// Schedules run.
    pub schedules: u64,
    /// Reads completed.
    pub reads: u64,
    /// Optimistic restarts (exact: counted per schedule).
    pub restarts: Option<u64>,
    /// Pessimistic fallbacks (exact: counted per schedule).
    pub fallbacks: Option<u64>,
    /// Reads during which the writer completed at least one event.
    pub reads_racing: u64,
    /// Most restarts within one read's window (an upper bound on one read's
    /// own restarts: the window may include the other reader's).
    pub max_per_read: u64,
    /// Reads whose window saw at least one restart (an upper bound).
    pub reads_restarted: u64,
    /// Most fallbacks in one schedule.
    pub max_fallbacks_per_schedule: u64,
}

impl RetryStats {
    /// Empty statistics for a gate with `counters`.
    fn new(counters: RetryCounters) -> Self {
        Self {
            restarts: counters.restarts.map(|_| 0),
            fallbacks: counters.fallbacks.map(|_| 0),
            ..Self::default()
        }
    }
}

impl std::fmt::Display for RetryStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reads in {} schedules ({} overlapping a write): ",
            self.reads, self.schedules, self.reads_racing
        )?;
        match self.restarts {
            Some(restarts) => write!(
                f,
                "restarts/read mean {:.3}, max {} (window bound), {} reads restarted, \
                 {restarts} restarts, ",
                restarts as f64 / self.reads.max(1) as f64,
                self.max_per_read,
                self.reads_restarted,
            )?,
            None => write!(f, "no restart path, ")?,
        }
        match self.fallbacks {
            Some(fallbacks) => write!(
                f,
                "{fallbacks} pessimistic fallbacks (max {} per schedule)",
                self.max_fallbacks_per_schedule
            ),
            None => write!(f, "no fallback path"),
        }
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
    /// statistics. Every read must stay within its bounds, some read must
    /// overlap a write, and the final scores must equal the reference's.
    pub fn explore<G: ShapeGate>(
        self,
        explorer: &dyn Explorer,
        counters: RetryCounters,
    ) -> RetryStats {
        let scenario = self.scenario();
        let bounds = scenario.read_bounds();
        let ceilings = HeldCeilings::new(
            scenario.setup.iter().map(|(_, e)| e),
            scenario.threads[0].iter().map(Some),
        );
        let expected = expected_scores(&scenario);
        STORM_STATS.with(|s| *s.borrow_mut() = RetryStats::new(counters));
        let reads = self.reads;
        explorer.explore(Box::new(move || {
            storm_schedule::<G>(&scenario, (&bounds, &ceilings), &expected, reads, counters)
        }));
        let stats = STORM_STATS.with(|s| s.borrow().clone());
        // A storm whose reads never overlapped a write checked nothing
        // concurrent; its schedulers must make some race.
        assert!(
            stats.schedules == 0 || stats.reads_racing > 0,
            "{}: no read overlapped a write in {} schedules",
            self.name(),
            stats.schedules
        );
        stats
    }
}

/// One read of a storm reader: how far the writer had got before and after
/// it (events completed), the restarts in its window, and its verdict.
struct Read {
    progress: (usize, usize),
    restarts: Option<u64>,
    verdict: Result<(), String>,
}

/// A storm reader: `reads` reads of `q`, each checked against `bounds` (its
/// floor) and `ceilings` at the writer's progress around it.
fn storm_reader<G: ShapeGate>(
    tree: &Tree<G>,
    q: &[LocalBlockHash],
    (bounds, ceilings): (&ReadBounds, &HeldCeilings),
    progress: &AtomicUsize,
    (reads, counters): (usize, RetryCounters),
) -> Vec<Read> {
    (0..reads)
        .map(|_| {
            let before = counters.read();
            let from = progress.load(SeqCst);
            let scores = tree.find_matches(q, false);
            let to = progress.load(SeqCst);
            let restarts = since(before, counters.read()).0;
            let verdict = bounds
                .check(q, &scores)
                .and_then(|()| ceilings.check(q, &scores, (from, to), |_| true));
            Read {
                progress: (from, to),
                restarts,
                verdict,
            }
        })
        .collect()
}

fn storm_schedule<G: ShapeGate>(
    scenario: &Scenario,
    (bounds, ceilings): (&ReadBounds, &HeldCeilings),
    expected: &[QueryScores],
    reads: usize,
    counters: RetryCounters,
) {
    grace::begin_execution();
    let (tree, mut lanes) = scenario.prepare::<G>(model_config(true));
    let tree = Arc::new(tree);
    // The writer's progress (events completed), bumped after each event. A
    // std atomic, not the facade's: shuttle runs one task at a time on this
    // thread, so its value is exact wherever a task reads it, and it adds no
    // scheduling point and no synchronization the gate under test lacks.
    let progress = Arc::new(AtomicUsize::new(0));
    let start = counters.read();
    let writer = spawn_writer(&tree, lanes.remove(0), &scenario.threads[0], &progress);
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (tree, progress) = (Arc::clone(&tree), Arc::clone(&progress));
            let q = query(&scenario.queries[0]);
            let (bounds, ceilings) = (bounds.clone(), ceilings.clone());
            thread::spawn(move || {
                storm_reader(
                    &*tree,
                    &q,
                    (&bounds, &ceilings),
                    &progress,
                    (reads, counters),
                )
            })
        })
        .collect();
    let (rejected, lane) = writer.join().expect("the writer panicked");
    let results: Vec<Vec<Read>> = readers
        .into_iter()
        .map(|h| h.join().expect("a reader panicked"))
        .collect();
    let (restarts, fallbacks) = since(start, counters.read());
    let observed = observe(&*tree, &scenario.queries);
    drop(lane);
    drop(lanes);
    drop(tree);
    grace::end_execution();
    check_storm(&rejected, &results, &observed.scores, expected);
    record(&results, restarts, fallbacks);
}

/// Spawns the storm's writer: applies `events` on `lane`, bumping `progress`
/// after each; returns the refusals and the lane.
fn spawn_writer<G: ShapeGate>(
    tree: &Arc<Tree<G>>,
    mut lane: Lane<G>,
    events: &[RouterEvent],
    progress: &Arc<AtomicUsize>,
) -> thread::JoinHandle<(Vec<String>, Lane<G>)> {
    let (tree, progress) = (Arc::clone(tree), Arc::clone(progress));
    let events = events.to_vec();
    thread::spawn(move || {
        let mut rejected = Vec::new();
        for event in &events {
            let refused = tree.apply_event(&mut lane, event).err();
            rejected.extend(refused.map(|e| e.to_string()));
            progress.fetch_add(1, SeqCst);
        }
        (rejected, lane)
    })
}

/// A schedule's checks: no event refused, every read within its bounds, the
/// final scores the reference's.
fn check_storm(
    rejected: &[String],
    results: &[Vec<Read>],
    observed: &[QueryScores],
    expected: &[QueryScores],
) {
    check!(
        Property::Accepted,
        rejected.is_empty(),
        "decode storm: rejected events {rejected:?}"
    );
    let violations: Vec<&String> = results
        .iter()
        .flatten()
        .filter_map(|read| read.verdict.as_ref().err())
        .collect();
    check!(
        Property::ReadBounds,
        violations.is_empty(),
        "decode storm: reads broke their bounds: {violations:?}"
    );
    check!(
        Property::SerialOutcome,
        observed == expected,
        "decode storm: final scores differ from the reference (C2): {observed:?} != {expected:?}"
    );
}

/// Adds one schedule's reads and retry counts to [`STORM_STATS`].
fn record(results: &[Vec<Read>], restarts: Option<u64>, fallbacks: Option<u64>) {
    STORM_STATS.with(|s| {
        let mut s = s.borrow_mut();
        s.schedules += 1;
        if let (Some(total), Some(restarts)) = (s.restarts.as_mut(), restarts) {
            *total += restarts;
        }
        if let (Some(total), Some(fallbacks)) = (s.fallbacks.as_mut(), fallbacks) {
            *total += fallbacks;
            s.max_fallbacks_per_schedule = s.max_fallbacks_per_schedule.max(fallbacks);
        }
        for read in results.iter().flatten() {
            s.reads += 1;
            s.reads_racing += u64::from(read.progress.1 > read.progress.0);
            if let Some(restarts) = read.restarts {
                s.max_per_read = s.max_per_read.max(restarts);
                s.reads_restarted += u64::from(restarts > 0);
            }
        }
    });
}
