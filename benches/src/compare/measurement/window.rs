//! The windowed replay of upstream's `mooncake_bench`: every operation of a
//! [`Timeline`](crtc_verification::workload::expand::Timeline) is due at its
//! position × the benchmark window, so the offered rate is the corpus ÷ the
//! window, and the run ends at the last completion, drain included.
//!
//! Protocol. The issuer (the calling thread) sleeps until each write's
//! deadline (absolute, so a late wake-up issues a batch and never shifts the
//! schedule) and enqueues it; after the last write it calls `flush`, and the
//! events are done when that returns. Each of the `readers` threads owns
//! every `readers`-th lookup, waits for its deadline (or runs at once when it
//! is late) and times `find_matches` alone (service time, upstream's
//! `query_service`). `stress` extra threads (upstream's
//! `--find-matches-concurrency`) loop `find_matches` over the lookups until
//! the events are done; their lookups are counted apart, not in the corpus.
//!
//! Figures (upstream's gen-3 definitions): operations = lookups + events;
//! block operations = blocks named by lookups + stored + removed blocks;
//! offered = total ÷ window; achieved = total ÷ elapsed, where elapsed runs
//! from the start instant to the later of the drain and the last lookup;
//! the row **kept up** when the last write was issued within 1.01 × window
//! and elapsed ≤ 1.10 × window.

use crate::compare::measurement::measure::sleep_until;
use crate::compare::measurement::plan::{issue, spawn, timed_lookup, Plan};
use crate::compare::subjects::backend::{Backend, BackendStats};
use crtc::types::LocalBlockHash;
use crtc_strategies::sync::atomic::{AtomicBool, Ordering};
use crtc_strategies::sync::thread::JoinHandle;
use crtc_strategies::sync::Arc;
use crtc_verification::workload::{Workload, WorkloadOp};
use std::time::{Duration, Instant};

/// Lead time before the common start instant.
const START_DELAY: Duration = Duration::from_millis(20);

/// Issue span allowed for a row that kept up, as a multiple of the window.
pub const ISSUE_SLACK: f64 = 1.01;
/// Elapsed time allowed for a row that kept up, as a multiple of the window.
pub const KEEPUP_SLACK: f64 = 1.10;

/// The plan's deadlines as fractions of the window.
#[derive(Clone, Debug, Default)]
pub struct Deadlines {
    /// One per write of the plan, in order.
    pub writes: Vec<f64>,
    /// One per lookup of the plan, in order.
    pub lookups: Vec<f64>,
    /// Blocks named by the lookups.
    pub lookup_blocks: u64,
}

impl Deadlines {
    /// Splits `positions` (one per operation of `workload`) the way
    /// [`Plan::new`] splits the operations.
    pub fn new(workload: &Workload, positions: &[f64]) -> Self {
        let mut deadlines = Self::default();
        for (op, &at) in workload.ops.iter().zip(positions) {
            match op {
                WorkloadOp::Query(locals) => {
                    deadlines.lookups.push(at);
                    deadlines.lookup_blocks += locals.len() as u64;
                }
                _ => deadlines.writes.push(at),
            }
        }
        deadlines
    }
}

/// What one windowed run measured.
pub struct WindowRun {
    /// Start to the later of the drain and the last lookup.
    pub elapsed: Duration,
    /// Start to the last write issued.
    pub issue_span: Duration,
    /// Lookup service times (ns), unsorted.
    pub reads: Vec<u64>,
    /// Lookups the stress threads completed.
    pub stress_lookups: u64,
    /// The backend's counters after the drain.
    pub stats: BackendStats,
}

/// The threads and timing of one run.
pub struct WindowSetup {
    /// The benchmark window.
    pub window: Duration,
    /// Scheduled reader threads.
    pub readers: usize,
    /// Extra find_matches threads (`--find-matches-concurrency`).
    pub stress: usize,
}

fn due(start: Instant, window: Duration, at: f64) -> Instant {
    start + window.mul_f64(at.clamp(0.0, 1.0))
}

type ReaderHandle = JoinHandle<(Vec<u64>, Instant)>;

fn start_readers(
    backend: &Arc<dyn Backend>,
    plan: &Plan,
    deadlines: &Deadlines,
    setup: &WindowSetup,
    start: Instant,
) -> Result<Vec<ReaderHandle>, String> {
    let readers = setup.readers.max(1);
    let mut shares: Vec<Vec<(Instant, usize)>> = vec![Vec::new(); readers];
    for (index, &at) in deadlines.lookups.iter().enumerate() {
        shares[index % readers].push((due(start, setup.window, at), index));
    }
    shares
        .into_iter()
        .enumerate()
        .map(|(k, share)| {
            let (backend, queries) = (Arc::clone(backend), Arc::clone(&plan.queries));
            spawn(format!("crtc-reader-{k}"), move || {
                let times = share
                    .into_iter()
                    .map(|(at, index)| {
                        sleep_until(at);
                        timed_lookup(&*backend, &queries[index])
                    })
                    .collect();
                (times, Instant::now())
            })
        })
        .collect()
}

fn stress_loop(
    backend: Arc<dyn Backend>,
    queries: Arc<Vec<Vec<LocalBlockHash>>>,
    offset: usize,
    stop: Arc<AtomicBool>,
) -> u64 {
    let mut done = 0u64;
    // Relaxed: the flag carries no data; the join publishes the count.
    while !queries.is_empty() && !stop.load(Ordering::Relaxed) {
        let query = &queries[(offset + done as usize) % queries.len()];
        std::hint::black_box(backend.find_matches(query));
        done += 1;
    }
    done
}

fn start_stress(
    backend: &Arc<dyn Backend>,
    plan: &Plan,
    count: usize,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<JoinHandle<u64>>, String> {
    (0..count)
        .map(|k| {
            let (backend, queries, stop) = (
                Arc::clone(backend),
                Arc::clone(&plan.queries),
                Arc::clone(stop),
            );
            let offset = k * plan.queries.len() / count.max(1);
            spawn(format!("crtc-stress-{k}"), move || {
                stress_loop(backend, queries, offset, stop)
            })
        })
        .collect()
}

fn joined<T>(handle: JoinHandle<T>) -> Result<T, String> {
    handle
        .join()
        .map_err(|_| "a measurement thread panicked".to_owned())
}

/// Replays `plan` on `backend` with `deadlines` over `setup.window`.
pub fn run(
    backend: Arc<dyn Backend>,
    plan: &Plan,
    deadlines: &Deadlines,
    setup: &WindowSetup,
) -> Result<WindowRun, String> {
    let ops = plan.ops.clone();
    let start = Instant::now() + START_DELAY;
    let stop = Arc::new(AtomicBool::new(false));
    let readers = start_readers(&backend, plan, deadlines, setup, start)?;
    // Relaxed: see stress_loop; stops the stress threads already started.
    let stress = start_stress(&backend, plan, setup.stress, &stop)
        .inspect_err(|_| stop.store(true, Ordering::Relaxed))?;
    let mut issued = start;
    for (op, &at) in ops.into_iter().zip(&deadlines.writes) {
        sleep_until(due(start, setup.window, at));
        issue(&*backend, op);
        issued = Instant::now();
    }
    backend.flush();
    let drained = Instant::now();
    // Relaxed: see stress_loop.
    stop.store(true, Ordering::Relaxed);
    let (mut reads, mut last_read) = (Vec::new(), start);
    for handle in readers {
        let (times, finished) = joined(handle)?;
        reads.extend(times);
        last_read = last_read.max(finished);
    }
    let mut stress_lookups = 0;
    for handle in stress {
        stress_lookups += joined(handle)?;
    }
    Ok(WindowRun {
        elapsed: drained.max(last_read).saturating_duration_since(start),
        issue_span: issued.saturating_duration_since(start),
        reads,
        stress_lookups,
        stats: backend.stats(),
    })
}

/// Whether a run of `window` kept up (see the module docs).
pub fn kept_up(run: &WindowRun, window: Duration) -> bool {
    let w = window.as_secs_f64();
    run.issue_span.as_secs_f64() <= ISSUE_SLACK * w && run.elapsed.as_secs_f64() <= KEEPUP_SLACK * w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crtc::types::{RouterEvent, WorkerWithDpRank};
    use crtc_verification::chain;

    #[test]
    fn deadlines_follow_the_plan_split() {
        let rank = WorkerWithDpRank::new(0, 0);
        let mut w = Workload::new("t");
        w.ops.push(WorkloadOp::Query(chain::locals(&[1, 2])));
        w.ops.push(WorkloadOp::Event(RouterEvent::stored(
            rank,
            None,
            chain::chained(None, &[1]),
        )));
        w.ops.push(WorkloadOp::Query(chain::locals(&[3])));
        let d = Deadlines::new(&w, &[0.0, 0.25, 1.0]);
        assert_eq!(d.writes, [0.25]);
        assert_eq!(d.lookups, [0.0, 1.0]);
        assert_eq!(d.lookup_blocks, 3);
        let start = Instant::now();
        let window = Duration::from_millis(400);
        assert_eq!(due(start, window, 0.25) - start, Duration::from_millis(100));
        assert_eq!(due(start, window, 7.0) - start, window);
    }
}
