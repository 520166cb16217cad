//! The boundary every compared row runs behind: an index with lane threads
//! that accepts events asynchronously, answers lookups inline, drains on
//! `flush`, and reports its counters afterwards.
//!
//! [`IndexerBackend`] wraps the crate's [`Indexer`] for one gate; the
//! global-lock baseline implements the same trait in
//! [`crate::compare::subjects::baseline::GlobalLockIndexer`].

use crate::compare::measurement::measure::{nanos, CpuClock, ThreadCpu};
use crate::compare::registry::Setup;
use crtc::types::{LocalBlockHash, OverlapScores, RouterEvent, WorkerId};
use crtc::{Indexer, IndexerConfig};
use crtc::{LaneCounters, Refusal, SweepPolicy, TreeConfig};
use crtc_strategies::sync::Arc;
use crtc_strategies::{AppendMiss, ShapeGate};
use std::time::Instant;

/// What a backend did, read after a drain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// Events applied or rejected by the lanes.
    pub applied: u64,
    /// Stores applied.
    pub stores: u64,
    /// Events rejected with an error.
    pub errors: u64,
    /// Rejected events per reason, indexed by [`Refusal::index`] (a backend
    /// that cannot tell reasons counts them all as [`Refusal::Other`]).
    pub refusals: [u64; Refusal::ALL.len()],
    /// Stores the decode fast path applied (`None`: no fast path).
    pub fast_path_hits: Option<u64>,
    /// Stores the fast path tried and left to the general path, indexed by
    /// [`AppendMiss::index`] (zeros without a fast path).
    pub fast_path_misses: [u64; AppendMiss::ALL.len()],
    /// CPU nanoseconds of the lane threads (see [`BackendStats::cpu_clock`]).
    pub cpu_ns: u64,
    /// Where `cpu_ns` was read.
    pub cpu_clock: CpuClock,
    /// Approximate bytes held by the index's nodes (`None`: not observable).
    pub footprint: Option<usize>,
    /// (node, rank) coverage records (`None`: not observable).
    pub memberships: Option<usize>,
}

/// An index under test: lanes apply events, callers read inline.
pub trait Backend: Send + Sync {
    /// Enqueues `event` on its rank's lane. One thread issues all events.
    fn apply(&self, event: RouterEvent);
    /// Removes every rank of `worker` once its earlier events are applied.
    fn remove_worker(&self, worker: WorkerId);
    /// Waits until every event enqueued before the call is applied.
    fn flush(&self);
    /// Unlinks the index's dead nodes through its own cleanup path (call
    /// after a flush). Indexes that prune on removal keep this default,
    /// which does nothing.
    fn sweep(&self) {}
    /// Scores every rank against `query` on the caller's thread.
    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores;
    /// Times one lookup on the caller's thread, in nanoseconds: the index's
    /// own lookup producing its native result, and nothing else (a backend
    /// whose lookup takes another query type converts it before the clock
    /// starts). Every backend's query is in cache when its clock starts: a
    /// converting backend's copy was just written, and this one reads the
    /// query once first ([`warm`]).
    fn timed_lookup(&self, query: &[LocalBlockHash]) -> u64 {
        warm(query);
        let start = Instant::now();
        let scores = self.find_matches(query);
        let ns = nanos(start.elapsed());
        std::hint::black_box(scores);
        ns
    }
    /// Events applied or rejected so far (for backlogs).
    fn applied(&self) -> u64;
    /// Counters, lane CPU time and memory (call after a flush, outside any
    /// timed region: a backend may tidy up first, e.g. sweep stale nodes).
    fn stats(&self) -> BackendStats;
}

/// Reads every hash of `query` once, outside any clock, so the lookup
/// timed next finds it in cache, as a backend that converts the query
/// before its clock does (upstream's). Without it, a stream whose lookups
/// outgrow the cache charged our lookups the query's cache misses and
/// upstream's not (the chat preset: 140,000 of 248,000 simulated
/// last-level misses in our `find_matches`, 55,000 with the query warm).
pub fn warm(query: &[LocalBlockHash]) {
    std::hint::black_box(query.iter().fold(0u64, |acc, hash| acc ^ hash.0));
}

/// How often [`sweep_until_done`] retries a sweep that another one is
/// running.
const SWEEP_ATTEMPTS: usize = 100;

/// Calls `attempt` (one forced sweep of a crtc tree, `true` once it ran)
/// until it runs, waiting a millisecond between tries, at most
/// `SWEEP_ATTEMPTS` (100) times.
pub fn sweep_until_done(attempt: impl Fn() -> bool) {
    for _ in 0..SWEEP_ATTEMPTS {
        if attempt() {
            return;
        }
        crtc_strategies::sync::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The crate's [`Indexer`] over gate `G`.
pub struct IndexerBackend<G: ShapeGate> {
    indexer: Indexer<G>,
    counters: Vec<Arc<LaneCounters>>,
    cpu: ThreadCpu,
}

/// Name prefix of the indexer's lane threads (set in `Indexer::new`).
const LANE_THREAD_PREFIX: &str = "crtc-lane-";

impl<G: ShapeGate> IndexerBackend<G> {
    /// An indexer with `lanes` lane threads, the fast path on or off, and
    /// the tree's default sweep policy.
    pub fn new(lanes: usize, fast_path: bool) -> Self {
        Self::with_setup(Setup {
            lanes,
            fast_path,
            sweeping: true,
        })
    }

    /// An indexer with `setup.lanes` lane threads, the fast path on or off,
    /// and the tree's sweep policy the default or, without `sweeping`,
    /// disabled.
    pub fn with_setup(setup: Setup) -> Self {
        let cpu = ThreadCpu::start();
        let config = IndexerConfig {
            lanes: setup.lanes.max(1),
            tree: TreeConfig {
                fast_path: setup.fast_path,
                sweep: match setup.sweeping {
                    true => SweepPolicy::default(),
                    false => SweepPolicy::disabled(),
                },
                ..TreeConfig::default()
            },
        };
        let indexer = Indexer::<G>::new(config);
        let counters = indexer.lane_counters();
        Self {
            indexer,
            counters,
            cpu,
        }
    }

    fn sum(&self, f: impl Fn(&LaneCounters) -> u64) -> u64 {
        self.counters.iter().map(|c| f(c)).sum()
    }
}

impl<G: ShapeGate> Backend for IndexerBackend<G> {
    fn apply(&self, event: RouterEvent) {
        // Only fails once the indexer shut down, which it cannot while borrowed.
        let _ = self.indexer.apply_event(event);
    }

    fn remove_worker(&self, worker: WorkerId) {
        self.indexer.remove_worker(worker);
    }

    fn flush(&self) {
        self.indexer.flush();
    }

    fn sweep(&self) {
        sweep_until_done(|| self.indexer.sweep_stale().is_some());
    }

    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        self.indexer.find_matches(query)
    }

    fn applied(&self) -> u64 {
        self.sum(|c| c.stores.get() + c.removals.get() + c.clears.get() + c.errors.get())
    }

    fn stats(&self) -> BackendStats {
        let (cpu_ns, cpu_clock) = self.cpu.read(LANE_THREAD_PREFIX);
        // The footprint is read after one complete stale-leaf sweep (C8):
        // otherwise it depends on when the volume/timer trigger last swept,
        // and the global-lock baseline, which prunes eagerly, would not
        // compare.
        self.sweep();
        let tree = self.indexer.tree();
        BackendStats {
            applied: self.applied(),
            stores: self.sum(|c| c.stores.get()),
            errors: self.sum(|c| c.errors.get()),
            refusals: Refusal::ALL.map(|r| self.sum(|c| c.refusals[r.index()].get())),
            fast_path_hits: Some(self.sum(|c| c.fast_path_hits.get())),
            fast_path_misses: AppendMiss::ALL.map(|m| self.sum(|c| c.misses(m))),
            cpu_ns,
            cpu_clock,
            footprint: Some(tree.footprint()),
            memberships: Some(tree.membership_count()),
        }
    }
}
