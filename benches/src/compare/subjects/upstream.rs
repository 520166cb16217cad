//! NVIDIA Dynamo's published CRTC, `dynamo-kv-router` 1.6.1, as a row of
//! `crtc compare` and as the peer of `--check-upstream` (feature `upstream`;
//! default builds do not compile it).
//!
//! Only the crate's public API is used: `ConcurrentRadixTreeCompressed`
//! behind its `ThreadPoolIndexer` (lane threads with per-rank sticky routing,
//! lookups inline on the caller's thread), `SyncIndexer::find_matches` for lookups, the
//! async `flush` and `remove_worker` driven by a current-thread tokio runtime,
//! and `KvIndexerMetrics` (the crate's `metrics` feature) whose
//! events-applied counters give the harness its applied count (backlogs and
//! the readers' start gate) and rejected events. Our events, lookups and
//! scores are converted field by field to and from the crate's public
//! `protocols` types; nothing of its internals is named.
//!
//! The row gets the lane count every row gets (`--lanes`; by default at most
//! two, fitted to the cores; the `mixed_1r1w` bench uses one), which is not
//! how the router runs it by default: 1.6.1's
//! `KvRouterConfig::router_event_threads` (`scheduling/config.rs`) defaults
//! to 4 and documents that the router uses this pool, with that many threads,
//! only when it is above 1; at 1 the router builds the single-threaded
//! `KvIndexer` instead.
//!
//! Version 1.6.1 predates the one-lock decode append, so this row is the
//! "before" of that change. What the crate does not expose is reported as
//! unknown: its own memory estimate (`footprint_bytes_per_membership` is
//! `null`; its heap use is counted like every row's, see
//! `measurement::heap`) and fast-path hits (it has no separate fast path). Its lane threads are unnamed, so their CPU
//! time is read from the threads the constructor started.
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

/// The row's strategy name.
pub const NAME: &str = super::UPSTREAM_NAME;

/// Tokens per block handed to the crate (it only logs a warning for 1).
const BLOCK_TOKENS: u32 = crtc_verification::workload::BLOCK_TOKENS as u32;

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

fn runtime() -> tokio::runtime::Runtime {
    // A current-thread runtime starts no thread; it only drives the crate's
    // oneshot replies on the calling thread.
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("cannot build a tokio current-thread runtime: {e}"))
}

/// `ConcurrentRadixTreeCompressed` behind `ThreadPoolIndexer`.
pub struct UpstreamBackend {
    indexer: ThreadPoolIndexer<ConcurrentRadixTreeCompressed>,
    metrics: Arc<KvIndexerMetrics>,
    runtime: tokio::runtime::Runtime,
    cpu: ThreadCpu,
    lanes: Vec<u64>,
}

impl UpstreamBackend {
    /// The crate's thread-pool indexer with `lanes` event threads.
    pub fn new(lanes: usize) -> Self {
        let runtime = runtime();
        let metrics = Arc::new(KvIndexerMetrics::new_unregistered());
        let cpu = ThreadCpu::start();
        let indexer = ThreadPoolIndexer::new_with_metrics(
            ConcurrentRadixTreeCompressed::new(),
            lanes.max(1),
            BLOCK_TOKENS,
            Some(Arc::clone(&metrics)),
        );
        let lanes = cpu.spawned();
        Self {
            indexer,
            metrics,
            runtime,
            cpu,
            lanes,
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

impl Backend for UpstreamBackend {
    fn apply(&self, event: RouterEvent) {
        // Fails only once the indexer shut down, which it cannot while borrowed.
        let _ = self.indexer.enqueue_event(convert_event(&event));
    }

    fn remove_worker(&self, worker: WorkerId) {
        self.runtime
            .block_on(KvIndexerInterface::remove_worker(&self.indexer, worker));
    }

    fn flush(&self) {
        self.runtime.block_on(self.indexer.flush());
    }

    fn find_matches(&self, query: &[LocalBlockHash]) -> OverlapScores {
        let scores = self
            .indexer
            .backend()
            .find_matches(&convert_query(query), false);
        convert_scores(&scores)
    }

    fn timed_lookup(&self, query: &[LocalBlockHash]) -> u64 {
        // The conversion stays outside the clock: the crate's own lookup,
        // with its native result, is what is timed.
        let query = convert_query(query);
        let start = Instant::now();
        let scores = self.indexer.backend().find_matches(&query, false);
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
        let (cpu_ns, cpu_clock) = self.cpu.read_threads(&self.lanes);
        let errors = self.count(&KINDS, &ERROR_STATUSES);
        BackendStats {
            applied: self.applied(),
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

/// A [`UpstreamBackend`] for the comparison (one row, no fast-path switch).
pub fn build(lanes: usize, _fast_path: bool) -> Arc<dyn Backend> {
    Arc::new(UpstreamBackend::new(lanes))
}

/// The crate's indexer applied serially: one lane, flushed before a lookup
/// whenever events were enqueued since the last one, so every lookup sees
/// exactly the writes before it in the stream.
pub struct SerialUpstream {
    indexer: ThreadPoolIndexer<ConcurrentRadixTreeCompressed>,
    runtime: tokio::runtime::Runtime,
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
    use crtc::types::WorkerWithDpRank;
    use crtc_verification::chain;

    #[test]
    fn events_round_trip_through_the_crate() {
        let rank = WorkerWithDpRank::new(3, 1);
        let store = RouterEvent::stored(rank, None, chain::chained(None, &[10, 11, 12]));
        let backend = UpstreamBackend::new(2);
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
