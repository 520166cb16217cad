//! Keep-up latency: an open loop at a fixed offered rate for a window.
//!
//! Protocol. Write `i` (in stream order) is due at `start + i / rate`; a
//! lookup is due with the first write that follows it in the stream. Only
//! operations due inside the window are issued, and the run ends with the
//! window or with the last write when the stream ends first. The issuer sleeps until the
//! next deadline, then enqueues every write already due (absolute deadlines,
//! so a late wake-up issues a batch and never shifts the schedule). Each of
//! the `readers` threads owns every `readers`-th lookup, waits for its
//! deadline and times `find_matches` alone (service time).
//!
//! Update latency is sampled (about [`PROBES_PER_S`] per second): right after
//! enqueuing a sampled event the issuer hands its enqueue instant to a
//! prober thread, which collects every pending sample, calls `flush`, and
//! records `flush return - enqueue` for each. The flush marker queues behind
//! every collected sample on every lane, so the figure is an **upper bound**
//! of enqueue-to-applied latency: it adds the flush round trip and waits for
//! the slowest lane. Every row is measured the same way.
//!
//! Backlog at window end = events enqueued − events the lanes had applied
//! (or rejected) at that instant. The lanes then drain before the counters
//! are read.

use crate::compare::measurement::measure::{nanos, sleep_until};
use crate::compare::measurement::plan::{issue, join_all, spawn, timed_lookup, IssueOp, Plan};
use crate::compare::subjects::backend::{Backend, BackendStats};
use crtc::types::LocalBlockHash;
use crtc_strategies::sync::mpsc::{channel, Receiver, Sender};
use crtc_strategies::sync::Arc;
use indicatif::ProgressBar;
use std::time::{Duration, Instant};

/// Target number of update-latency probes per second.
pub const PROBES_PER_S: f64 = 1000.0;

/// Lead time before the common start instant.
const START_DELAY: Duration = Duration::from_millis(20);

/// What one keep-up run measured.
pub struct KeepupRun {
    /// Events enqueued inside the window.
    pub issued_events: u64,
    /// Blocks named by those events.
    pub issued_blocks: u64,
    /// Events applied by the end of the window.
    pub applied_in_window: u64,
    /// Events enqueued but not applied at the end of the window.
    pub backlog: u64,
    /// Lookup service times (ns), unsorted.
    pub reads: Vec<u64>,
    /// Sampled update latencies (ns, upper bounds), unsorted.
    pub updates: Vec<u64>,
    /// The backend's counters after the final drain.
    pub stats: BackendStats,
}

/// The offered schedule.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Offered writes per second.
    pub rate: f64,
    /// The window.
    pub window: Duration,
}

impl Schedule {
    /// When write `position` is due; a time past any representable instant
    /// (a tiny `--rate`) is the window's end.
    fn due(&self, start: Instant, position: usize) -> Instant {
        Duration::try_from_secs_f64(position as f64 / self.rate)
            .ok()
            .and_then(|offset| start.checked_add(offset))
            .unwrap_or(start + self.window)
    }

    /// Writes due strictly inside the window, out of `total`.
    pub fn writes_in_window(&self, total: usize) -> usize {
        let n = (self.window.as_secs_f64() * self.rate).ceil();
        if n.is_finite() && n >= 0.0 {
            (n as usize).min(total)
        } else {
            total
        }
    }
}

fn read_scheduled(
    backend: Arc<dyn Backend>,
    queries: Arc<Vec<Vec<LocalBlockHash>>>,
    lookups: Vec<(Instant, usize)>,
) -> Vec<u64> {
    lookups
        .into_iter()
        .map(|(due, index)| {
            sleep_until(due);
            timed_lookup(&*backend, &queries[index])
        })
        .collect()
}

fn probe(backend: Arc<dyn Backend>, samples: Receiver<Instant>) -> Vec<u64> {
    let mut latencies = Vec::new();
    while let Ok(first) = samples.recv() {
        let mut batch = vec![first];
        batch.extend(samples.try_iter());
        backend.flush();
        let done = Instant::now();
        latencies.extend(batch.into_iter().map(|enqueued| nanos(done - enqueued)));
    }
    latencies
}

/// Spawns the readers, each with its share of the lookups due in the window.
fn start_readers(
    backend: &Arc<dyn Backend>,
    plan: &Plan,
    readers: usize,
    writes: usize,
    schedule: Schedule,
    start: Instant,
) -> Result<Vec<crtc_strategies::sync::thread::JoinHandle<Vec<u64>>>, String> {
    if readers == 0 {
        return Ok(Vec::new());
    }
    let mut shares: Vec<Vec<_>> = (0..readers).map(|_| Vec::new()).collect();
    let due_lookups = plan
        .query_positions
        .iter()
        .enumerate()
        .filter(|(_, &p)| p < writes);
    for (n, (index, &position)) in due_lookups.enumerate() {
        let due = schedule.due(start, position);
        shares[n % readers].push((due, index));
    }
    (0..readers)
        .zip(shares)
        .map(|(k, share)| {
            let (backend, queries) = (Arc::clone(backend), Arc::clone(&plan.queries));
            spawn(format!("crtc-reader-{k}"), move || {
                read_scheduled(backend, queries, share)
            })
        })
        .collect()
}

/// Issues `ops` at their deadlines from `start`, sending the enqueue
/// instant of every sampled write to the prober; (events, blocks) issued.
fn issue_due(
    backend: &dyn Backend,
    ops: Vec<IssueOp>,
    schedule: Schedule,
    start: Instant,
    samples: &Sender<Instant>,
    progress: &ProgressBar,
) -> (u64, u64) {
    let every = ((schedule.rate / PROBES_PER_S).round() as usize).max(1);
    let (mut issued_events, mut issued_blocks) = (0u64, 0u64);
    let mut ops = ops.into_iter().enumerate().peekable();
    while let Some(&(next, _)) = ops.peek() {
        sleep_until(schedule.due(start, next));
        let now = Instant::now();
        while let Some((i, op)) = ops.next_if(|(i, _)| schedule.due(start, *i) <= now) {
            if let IssueOp::Event(event) = &op {
                issued_events += 1;
                issued_blocks += event.block_count() as u64;
            }
            issue(backend, op);
            if i % every == 0 {
                let _ = samples.send(Instant::now());
            }
        }
        progress.set_position(now.saturating_duration_since(start).as_millis() as u64);
    }
    (issued_events, issued_blocks)
}

/// Runs the keep-up mode of `plan` on `backend`.
pub fn run(
    backend: Arc<dyn Backend>,
    plan: &Plan,
    readers: usize,
    schedule: Schedule,
    progress: &ProgressBar,
) -> Result<KeepupRun, String> {
    let writes = schedule.writes_in_window(plan.ops.len());
    let ops: Vec<IssueOp> = plan.ops[..writes].to_vec();
    let start = Instant::now() + START_DELAY;
    let reader_handles = start_readers(&backend, plan, readers, writes, schedule, start)?;
    let (samples, received) = channel();
    let prober = {
        let backend = Arc::clone(&backend);
        spawn("crtc-prober".to_owned(), move || probe(backend, received))?
    };
    let window_end = start + schedule.window;
    progress.set_length(schedule.window.as_millis() as u64);
    let (issued_events, issued_blocks) =
        issue_due(&*backend, ops, schedule, start, &samples, progress);
    // The run ends with the window, or with the stream when it runs out
    // first (an empty stream ends at once instead of idling the window).
    let end = if writes < plan.ops.len() {
        window_end
    } else {
        window_end.min(schedule.due(start, writes))
    };
    sleep_until(end);
    let applied_in_window = backend.applied();
    drop(samples);
    backend.flush();
    let updates = prober
        .join()
        .map_err(|_| "the prober thread panicked".to_owned())?;
    let reads = join_all(reader_handles)?;
    Ok(KeepupRun {
        issued_events,
        issued_blocks,
        applied_in_window,
        backlog: issued_events.saturating_sub(applied_in_window),
        reads,
        updates,
        stats: backend.stats(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_bounds_the_writes() {
        let schedule = Schedule {
            rate: 1000.0,
            window: Duration::from_millis(2500),
        };
        assert_eq!(schedule.writes_in_window(10_000), 2500);
        assert_eq!(schedule.writes_in_window(100), 100);
        let start = Instant::now();
        assert_eq!(schedule.due(start, 500) - start, Duration::from_millis(500));
        let slow = Schedule {
            rate: 1e-300,
            ..schedule
        };
        assert_eq!(slow.due(start, 1) - start, schedule.window);
    }
}
