//! Write capacity: apply the whole stream as fast as one issuer can enqueue
//! it, drain included, while reader threads loop `find_matches` over the
//! stream's lookups.
//!
//! Protocol. The writes are cloned before the clock starts. Every thread
//! waits for a common start instant a few milliseconds ahead; the issuer
//! then enqueues every write (worker removals run synchronously, as they do
//! in a router) and calls `flush`; the elapsed time ends when the flush
//! returns. Readers wait until the issuer has enqueued the last write, then
//! loop over the lookup list from staggered positions, time each call, and
//! stop once the drain is over; together they keep at most
//! [`SAMPLE_BUDGET_BYTES`] of timings (the latest ones, a ring per reader),
//! however many readers or lookups there are.
//!
//! Why readers wait for the issuer: while it enqueues, the issuer is a busy
//! thread besides the lanes, and with the readers the run would have one
//! busy thread more than `compare` allows (lanes plus readers at most the
//! cores), so preemption would enter the read timings. (The lock-free
//! gates' run p99 of tens of microseconds seen before this rule was glibc
//! malloc's arena locks, not that overlap: see the feature `mimalloc` in
//! Cargo.toml.) The reads therefore cover the drain: the lanes applying the backlog the issuer
//! left, which is most of a run when the lanes are the bottleneck (each
//! row's `read samples` says how many lookups ran). As in upstream's
//! overloaded replay, lookups run against a tree that is still growing, so
//! read cost is understated compared with keep-up mode.

use crate::compare::measurement::measure::sleep_until;
use crate::compare::measurement::plan::{issue, join_all, spawn, timed_lookup, Plan};
use crate::compare::subjects::backend::{Backend, BackendStats};
use crtc::types::LocalBlockHash;
use crtc_strategies::sync::atomic::{AtomicBool, Ordering};
use crtc_strategies::sync::Arc;
use indicatif::ProgressBar;
use std::time::{Duration, Instant};

/// Memory all readers of one run may fill with timings: 32 MiB, 4 Mi
/// timings shared among the readers.
pub const SAMPLE_BUDGET_BYTES: usize = 32 << 20;

/// Timings one of `readers` readers keeps (at least one).
pub fn samples_per_reader(readers: usize) -> usize {
    (SAMPLE_BUDGET_BYTES / std::mem::size_of::<u64>() / readers.max(1)).max(1)
}

/// Lead time before the common start instant.
const START_DELAY: Duration = Duration::from_millis(10);

/// What one capacity run measured.
pub struct CapacityRun {
    /// Start to drained.
    pub elapsed: Duration,
    /// Every kept read timing (ns), unsorted.
    pub reads: Vec<u64>,
    /// Lookups the readers completed during the run (kept or not).
    pub lookups: u64,
    /// The backend's counters after the drain.
    pub stats: BackendStats,
}

fn read_loop(
    backend: Arc<dyn Backend>,
    queries: Arc<Vec<Vec<LocalBlockHash>>>,
    first: usize,
    flags: RunFlags,
    keep: usize,
) -> (Vec<u64>, u64) {
    let mut samples = Vec::new();
    if queries.is_empty() {
        return (samples, 0);
    }
    let RunFlags { enqueued, stop } = flags;
    // Reads start once the issuer is idle (module docs). Acquire: pairs
    // with the issuer's Release stores of either flag.
    while !enqueued.load(Ordering::Acquire) && !stop.load(Ordering::Acquire) {
        crtc_strategies::sync::thread::sleep(Duration::from_micros(50));
    }
    let (mut next, mut taken) = (first % queries.len(), 0usize);
    // Acquire: pairs with the issuer's Release once the drain is over.
    while !stop.load(Ordering::Acquire) {
        let ns = timed_lookup(&*backend, &queries[next]);
        if samples.len() < keep {
            samples.push(ns);
        } else {
            samples[taken % keep] = ns;
        }
        taken += 1;
        next = (next + 1) % queries.len();
    }
    (samples, taken as u64)
}

/// The issuer's two signals to the readers.
#[derive(Clone, Default)]
struct RunFlags {
    /// The last write is enqueued: reads may start.
    enqueued: Arc<AtomicBool>,
    /// The drain is over (or the run failed): reads stop.
    stop: Arc<AtomicBool>,
}

type ReaderHandle = crtc_strategies::sync::thread::JoinHandle<(Vec<u64>, u64)>;

/// Spawns `readers` reader threads from staggered positions; when one cannot
/// start, those already started are stopped and the error returned.
fn start_readers(
    backend: &Arc<dyn Backend>,
    plan: &Plan,
    readers: usize,
    flags: &RunFlags,
) -> Result<Vec<ReaderHandle>, String> {
    let keep = samples_per_reader(readers);
    let handles = (0..readers)
        .map(|k| {
            let (backend, queries, flags) = (
                Arc::clone(backend),
                Arc::clone(&plan.queries),
                flags.clone(),
            );
            let first = k * plan.queries.len() / readers.max(1);
            spawn(format!("crtc-reader-{k}"), move || {
                read_loop(backend, queries, first, flags, keep)
            })
        })
        .collect::<Result<Vec<_>, String>>();
    if handles.is_err() {
        // Release: lets readers already started see the stop.
        flags.stop.store(true, Ordering::Release);
    }
    handles
}

/// Runs the capacity mode of `plan` on `backend` with `readers` reader
/// threads.
pub fn run(
    backend: Arc<dyn Backend>,
    plan: &Plan,
    readers: usize,
    progress: &ProgressBar,
) -> Result<CapacityRun, String> {
    let ops = plan.ops.clone();
    let flags = RunFlags::default();
    let start = Instant::now() + START_DELAY;
    let handles = start_readers(&backend, plan, readers, &flags)?;
    progress.set_length(ops.len() as u64);
    sleep_until(start);
    let begin = Instant::now();
    for (i, op) in ops.into_iter().enumerate() {
        issue(&*backend, op);
        if i % 4096 == 0 {
            progress.set_position(i as u64);
        }
    }
    // Release: the readers' Acquire load starts their loops.
    flags.enqueued.store(true, Ordering::Release);
    backend.flush();
    let elapsed = begin.elapsed();
    // Release: the readers' Acquire load ends their loops.
    flags.stop.store(true, Ordering::Release);
    let (mut reads, mut lookups) = (Vec::new(), 0);
    for handle in handles {
        let (samples, taken) = handle
            .join()
            .map_err(|_| "a reader thread panicked".to_owned())?;
        reads.extend(samples);
        lookups += taken;
    }
    progress.set_position(progress.length().unwrap_or(0));
    let stats = backend.stats();
    Ok(CapacityRun {
        elapsed,
        reads,
        lookups,
        stats,
    })
}

/// Fewest lookups of a read-only pass (at least one pass over the lookups).
pub const READ_ONLY_MIN: u64 = 20_000;
/// Most lookups of a read-only pass.
pub const READ_ONLY_MAX: u64 = 2_000_000;
/// Longest a read-only pass runs, whatever its count: a stream of very long
/// lookups ends the pass by time, with fewer timings.
pub const READ_ONLY_TIME: Duration = Duration::from_secs(2);

/// The read-only reference for a capacity run: `readers` threads loop
/// `find_matches` over the same lookups, from the same staggered positions,
/// on the drained final tree with no writer running. Together they take
/// `lookups` timings, clamped to at least one pass and [`READ_ONLY_MIN`]
/// and at most [`READ_ONLY_MAX`], and each stops early at
/// [`READ_ONLY_TIME`]. Returns the timings (ns), unsorted, and the pass's
/// wall time from the common start to the last reader's end; no timings
/// when there are no readers or no lookups.
pub fn read_only(
    backend: &Arc<dyn Backend>,
    plan: &Plan,
    readers: usize,
    lookups: u64,
) -> Result<ReadOnly, String> {
    let queries = &plan.queries;
    if readers == 0 || queries.is_empty() {
        return Ok(ReadOnly::default());
    }
    let total = lookups
        .max(queries.len() as u64)
        .clamp(READ_ONLY_MIN, READ_ONLY_MAX);
    let each = total.div_ceil(readers as u64) as usize;
    let start = Instant::now() + START_DELAY;
    let deadline = start + READ_ONLY_TIME;
    let handles = (0..readers)
        .map(|k| {
            let (backend, queries) = (Arc::clone(backend), Arc::clone(queries));
            let first = k * queries.len() / readers;
            spawn(format!("crtc-reader-{k}"), move || {
                sleep_until(start);
                (0..each)
                    .map_while(|i| {
                        (Instant::now() < deadline)
                            .then(|| timed_lookup(&*backend, &queries[(first + i) % queries.len()]))
                    })
                    .collect::<Vec<u64>>()
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let reads = join_all(handles)?;
    Ok(ReadOnly {
        reads,
        elapsed: Instant::now().saturating_duration_since(start),
    })
}

/// What a read-only pass measured.
#[derive(Debug, Default)]
pub struct ReadOnly {
    /// Every timing (ns), unsorted.
    pub reads: Vec<u64>,
    /// Common start to the last reader's end.
    pub elapsed: Duration,
}

impl ReadOnly {
    /// Lookups per second over the pass, all readers together (`None`
    /// without timings).
    pub fn lookups_per_s(&self) -> Option<f64> {
        let s = self.elapsed.as_secs_f64();
        (!self.reads.is_empty() && s > 0.0).then(|| self.reads.len() as f64 / s)
    }
}
