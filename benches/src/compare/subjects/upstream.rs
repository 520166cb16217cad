//! NVIDIA Dynamo's published `dynamo-kv-router` 1.6.1 as rows of `crtc
//! compare`, all through one driver, and as the peer of `--check-upstream`
//! (feature `upstream`; default builds do not compile it).
//!
//! The driver ([`DynamoBackend`]) runs any of the crate's indexers through
//! its public API only: events converted field by field to the crate's
//! `protocols` types and handed over as a router's event loop does, lookups
//! timed on the caller's thread, the async `flush` and `remove_worker`
//! driven by a current-thread tokio runtime, and `KvIndexerMetrics` (the
//! crate's `metrics` feature), whose events-applied counters give the
//! harness its live applied count (keep-up backlogs) and rejected events.
//! What differs between indexers is behind [`DynamoIndex`]; the indexers
//! themselves are built in `subjects::dynamo`.
//!
//! The row `upstream-1.6.1` is `ThreadPoolIndexer<ConcurrentRadixTreeCompressed>`
//! with the lane count every row gets (`--lanes`; by default at most two,
//! fitted to the cores; the `mixed_1r1w` bench uses one). That is not how
//! the router runs it by default: 1.6.1's
//! `KvRouterConfig::router_event_threads` (`scheduling/config.rs`) defaults
//! to 4 and the router uses this pool only when it is above 1; at 1 it
//! builds the single-threaded `KvIndexer`. `--upstream-rows all` adds those
//! configurations as rows of their own, at 1 event thread and at 4
//! (`subjects::dynamo`).
//!
//! Version 1.6.1 predates the one-lock decode append, so its CRTC is the
//! "before" of that change. What the crate does not expose is reported as
//! unknown: its own memory estimate (`footprint_bytes_per_membership` is
//! `null`; its heap use is counted like every row's, see
//! `measurement::heap`) and fast-path hits (it has no separate fast path).
//! Its threads are unnamed, so their CPU time is read from the threads the
//! constructor started.
//!
//! Building it needs rustc 1.88 or newer (the crate is edition 2024 and uses
//! let chains), tokio and prometheus (both pure Rust).

use crate::compare::checks::crosscheck::SerialIndex;
use crate::compare::measurement::measure::{nanos, ThreadCpu};
use crate::compare::subjects::backend::{Backend, BackendStats};
use crtc::types::{
    KvCacheEventData, LocalBlockHash, OverlapScores, RouterEvent, WorkerId, WorkerWithDpRank,
};
use crtc::Refusal;
use crtc_strategies::sync::atomic::{AtomicU64, Ordering};
use crtc_strategies::sync::Arc;
use dynamo_kv_router::indexer::{
    KvIndexerInterface, KvIndexerMetrics, SyncIndexer, ThreadPoolIndexer, METRIC_EVENT_CLEARED,
    METRIC_EVENT_REMOVED, METRIC_EVENT_STORED, METRIC_STATUS_ALLOCATION_FAILED,
    METRIC_STATUS_BLOCK_NOT_FOUND, METRIC_STATUS_CAPACITY_EXHAUSTED,
    METRIC_STATUS_INDEXER_INVARIANT_VIOLATION, METRIC_STATUS_INVALID_BLOCK, METRIC_STATUS_OK,
    METRIC_STATUS_OWNERSHIP_DEGREE_OVERFLOW, METRIC_STATUS_PARENT_NOT_FOUND,
    METRIC_STATUS_UNSUPPORTED_RESIDENCY_DOMAIN,
};
use dynamo_kv_router::protocols as up;
use dynamo_kv_router::ConcurrentRadixTreeCompressed;
use std::time::Instant;
use tokio::runtime::Runtime;

/// The row's strategy name.
pub const NAME: &str = super::UPSTREAM_NAME;

/// Tokens per block handed to the crate (it only logs a warning for 1).
pub const BLOCK_TOKENS: u32 = crtc_verification::workload::BLOCK_TOKENS as u32;

/// Every error status the crate's events-applied counter can carry.
const ERROR_STATUSES: [&str; 8] = [
    METRIC_STATUS_PARENT_NOT_FOUND,
    METRIC_STATUS_BLOCK_NOT_FOUND,
    METRIC_STATUS_INVALID_BLOCK,
    METRIC_STATUS_CAPACITY_EXHAUSTED,
    METRIC_STATUS_ALLOCATION_FAILED,
    METRIC_STATUS_OWNERSHIP_DEGREE_OVERFLOW,
    METRIC_STATUS_INDEXER_INVARIANT_VIOLATION,
    METRIC_STATUS_UNSUPPORTED_RESIDENCY_DOMAIN,
];

/// Event kinds of the counter.
const KINDS: [&str; 3] = [
    METRIC_EVENT_STORED,
    METRIC_EVENT_REMOVED,
    METRIC_EVENT_CLEARED,
];

/// Our event as the crate's.
pub fn convert_event(event: &RouterEvent) -> up::RouterEvent {
    let data = match &event.event.data {
        KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } => up::KvCacheEventData::Stored(up::KvCacheStoreData {
            parent_hash: parent_hash.map(|p| up::ExternalSequenceBlockHash(p.0)),
            start_position: None,
            blocks: blocks
                .iter()
                .map(|b| up::KvCacheStoredBlockData {
                    block_hash: up::ExternalSequenceBlockHash(b.external.0),
                    tokens_hash: up::LocalBlockHash(b.local.0),
                    mm_extra_info: None,
                })
                .collect(),
        }),
        KvCacheEventData::Removed { block_hashes } => {
            up::KvCacheEventData::Removed(up::KvCacheRemoveData {
                block_hashes: block_hashes
                    .iter()
                    .map(|h| up::ExternalSequenceBlockHash(h.0))
                    .collect(),
            })
        }
        KvCacheEventData::Cleared => up::KvCacheEventData::Cleared,
    };
    up::RouterEvent::new(
        event.worker_id,
        up::KvCacheEvent {
            event_id: event.event.event_id,
            data,
            dp_rank: event.event.dp_rank,
        },
    )
}

/// Our lookup as the crate's.
pub fn convert_query(query: &[LocalBlockHash]) -> Vec<up::LocalBlockHash> {
    query.iter().map(|l| up::LocalBlockHash(l.0)).collect()
}

/// The crate's scores as ours (zero scores dropped, as ours never list them).
pub fn convert_scores(scores: &up::OverlapScores) -> OverlapScores {
    let mut out = OverlapScores::default();
    for (rank, &score) in &scores.scores {
        if score > 0 {
            out.scores
                .insert(WorkerWithDpRank::new(rank.worker_id, rank.dp_rank), score);
        }
    }
    out
}

/// A current-thread runtime: it starts no thread, and only drives the
/// crate's futures (channel sends, oneshot replies) on the calling thread.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("cannot build a tokio current-thread runtime: {e}"))
}

/// One of the crate's indexers as the driver runs it. The defaults go
/// through the router-facing `KvIndexerInterface`; an indexer overrides what
/// it offers a more direct public path for.
pub trait DynamoIndex: Send + Sync {
    /// The router-facing interface.
    fn interface(&self) -> &(dyn KvIndexerInterface + Send + Sync);

    /// Hands one event over as the router's event loop does.
    fn enqueue(&self, runtime: &Runtime, event: up::RouterEvent) {
        runtime.block_on(self.interface().apply_event(event));
    }

    /// One lookup as the router makes it (a failed lookup scores nothing,
    /// which the reference model then reports as undercounts).
    fn lookup(&self, runtime: &Runtime, query: Vec<up::LocalBlockHash>) -> up::OverlapScores {
        runtime
            .block_on(self.interface().find_matches(query))
            .unwrap_or_else(|_| up::OverlapScores::new())
    }

    /// Removes every rank of `worker`, applied once it returns.
    fn remove_worker(&self, runtime: &Runtime, worker: WorkerId) {
        runtime.block_on(self.interface().remove_worker(worker));
    }

    /// Unlinks dead nodes through the indexer's public cleanup path; nothing
    /// for an index that prunes on removal.
    fn sweep(&self) {}
}

/// Any [`DynamoIndex`] behind the harness's [`Backend`].
pub struct DynamoBackend {
    // Dropped first: an indexer stops its threads on drop.
    index: Box<dyn DynamoIndex>,
    metrics: Arc<KvIndexerMetrics>,
    runtime: Runtime,
    cpu: ThreadCpu,
    threads: Vec<u64>,
    issued: AtomicU64,
}

impl DynamoBackend {
    /// Runs the index `build` makes with the metrics it is given; the
    /// threads it starts are the ones whose CPU time is read.
    pub fn start(build: impl FnOnce(Arc<KvIndexerMetrics>) -> Box<dyn DynamoIndex>) -> Self {
        let runtime = runtime();
        let metrics = Arc::new(KvIndexerMetrics::new_unregistered());
        let cpu = ThreadCpu::start();
        let index = build(Arc::clone(&metrics));
        let threads = cpu.spawned();
        Self {
            index,
            metrics,
            runtime,
            cpu,
            threads,
            issued: AtomicU64::new(0),
        }
    }

    fn count(&self, kinds: &[&str], statuses: &[&str]) -> u64 {
        let counter = &self.metrics.kv_cache_events_applied;
        kinds
            .iter()
            .flat_map(|kind| {
                statuses
                    .iter()
                    .map(move |status| counter.with_label_values(&[*kind, *status]).get())
            })
            .sum()
    }
}

impl Backend for DynamoBackend {
    fn apply(&self, event: RouterEvent) {
        // Relaxed: one issuer thread; read after a flush.
        self.issued.fetch_add(1, Ordering::Relaxed);
        self.index.enqueue(&self.runtime, convert_event(&event));
    }

    fn remove_worker(&self, worker: WorkerId) {
        self.index.remove_worker(&self.runtime, worker);
    }

    fn flush(&self) {
        self.runtime.block_on(self.index.interface().flush());
    }

    fn sweep(&self) {
        self.index.sweep();
    }

    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        convert_scores(&self.index.lookup(&self.runtime, convert_query(query)))
    }

    fn timed_lookup(&self, query: &[LocalBlockHash]) -> u64 {
        // The conversion stays outside the clock: the crate's own lookup,
        // with its native result, is what is timed.
        let query = convert_query(query);
        let start = Instant::now();
        let scores = self.index.lookup(&self.runtime, query);
        let ns = nanos(start.elapsed());
        std::hint::black_box(scores);
        ns
    }

    fn applied(&self) -> u64 {
        let mut statuses = vec![METRIC_STATUS_OK];
        statuses.extend(ERROR_STATUSES);
        self.count(&KINDS, &statuses)
    }

    fn stats(&self) -> BackendStats {
        let (cpu_ns, cpu_clock) = self.cpu.read_threads(&self.threads);
        let errors = self.count(&KINDS, &ERROR_STATUSES);
        BackendStats {
            // After a flush every issued event is applied or rejected. (The
            // crate's counters would say more for the branch-sharded
            // indexer, whose shards each count their piece of a split
            // store.)
            applied: self.issued.load(Ordering::Relaxed),
            stores: self.count(&[METRIC_EVENT_STORED], &[METRIC_STATUS_OK]),
            errors,
            // Upstream's metrics do not name the reason.
            refusals: Refusal::ALL.map(|r| if r == Refusal::Other { errors } else { 0 }),
            fast_path_hits: None,
            fast_path_misses: Default::default(),
            cpu_ns,
            cpu_clock,
            footprint: None,
            memberships: None,
        }
    }
}

/// The crate's indexer applied serially: one lane, flushed before a lookup
/// whenever events were enqueued since the last one, so every lookup sees
/// exactly the writes before it in the stream.
pub struct SerialUpstream {
    indexer: ThreadPoolIndexer<ConcurrentRadixTreeCompressed>,
    runtime: Runtime,
    dirty: bool,
}

impl SerialUpstream {
    /// A one-lane indexer.
    pub fn new() -> Self {
        Self {
            indexer: ThreadPoolIndexer::new(ConcurrentRadixTreeCompressed::new(), 1, BLOCK_TOKENS),
            runtime: runtime(),
            dirty: false,
        }
    }
}

impl Default for SerialUpstream {
    fn default() -> Self {
        Self::new()
    }
}

impl SerialIndex for SerialUpstream {
    fn label(&self) -> String {
        NAME.to_owned()
    }

    fn apply(&mut self, event: &RouterEvent) {
        let _ = self.indexer.enqueue_event(convert_event(event));
        self.dirty = true;
    }

    fn remove_worker(&mut self, worker: WorkerId) {
        // Waits for the removal on the lane, behind every earlier event.
        self.runtime
            .block_on(KvIndexerInterface::remove_worker(&self.indexer, worker));
        self.dirty = false;
    }

    fn find_matches(&mut self, query: &[LocalBlockHash]) -> OverlapScores {
        if self.dirty {
            self.runtime.block_on(self.indexer.flush());
            self.dirty = false;
        }
        convert_scores(
            &self
                .indexer
                .backend()
                .find_matches(&convert_query(query), false),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::registry::Setup;
    use crtc::types::WorkerWithDpRank;
    use crtc_verification::chain;

    #[test]
    fn events_round_trip_through_the_crate() {
        let rank = WorkerWithDpRank::new(3, 1);
        let store = RouterEvent::stored(rank, None, chain::chained(None, &[10, 11, 12]));
        let backend = crate::compare::subjects::dynamo::build_pool_crtc(Setup {
            lanes: 2,
            fast_path: false,
            sweeping: true,
        });
        backend.apply(store);
        backend.flush();
        let query = chain::locals(&[10, 11, 12, 13]);
        assert_eq!(backend.find_matches(&query).score(rank), 3);
        let stats = backend.stats();
        assert_eq!((stats.applied, stats.stores, stats.errors), (1, 1, 0));
        assert!(backend.timed_lookup(&query) > 0);
        backend.remove_worker(3);
        assert!(backend.find_matches(&query).scores.is_empty());

        let mut serial = SerialUpstream::new();
        serial.apply(&RouterEvent::stored(
            rank,
            None,
            chain::chained(None, &[10, 11]),
        ));
        assert_eq!(serial.find_matches(&query).score(rank), 2);
        serial.apply(&RouterEvent::cleared(rank));
        assert!(serial.find_matches(&query).scores.is_empty());
    }
}
