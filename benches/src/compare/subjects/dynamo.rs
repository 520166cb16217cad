//! The indexers a dynamo user picks, as rows of `crtc compare
//! --upstream-rows all` (feature `upstream`), each run by the one driver of
//! `subjects::upstream` ([`DynamoBackend`]) through dynamo-kv-router 1.6.1's
//! public API.
//!
//! The rows, at 1 event thread and at 4 (1.6.1's default
//! `router_event_threads`; on a 2-core machine 4 threads oversubscribe the
//! cores, and the report labels those rows so):
//!
//! - `upstream-kvindexer`: `KvIndexer`, the single-threaded `RadixTree` on
//!   its own thread, which the router builds when `router_event_threads` is
//!   1 (1 thread only). Lookups go through its channel, as the router's do.
//! - `upstream-pool-crtc`: `ThreadPoolIndexer<ConcurrentRadixTreeCompressed>`,
//!   what the router builds above 1 thread.
//! - `upstream-pool-positional`: `ThreadPoolIndexer<PositionalIndexer>`
//!   (jump size 32, strided search, as upstream's own tests build it). It
//!   matches a lookup by recomputing upstream's sequence hashes from its
//!   local hashes, so it is fed the stream with every external hash
//!   relabelled to upstream's scheme ([`upstream_hashed`]). Upstream
//!   documents its search as exact only while each rank's blocks are a
//!   contiguous prefix, so it is reported as approximate: its differences
//!   from the reference model are listed in its row, not failures.
//! - `upstream-branch-sharded`: `BranchShardedIndexer` over one-thread
//!   `ThreadPoolIndexer<ConcurrentRadixTreeCompressed>` shards, one shard per
//!   event thread, routing prefix depth [`PREFIX_DEPTH`]; lookups through
//!   its async scatter. Also reported as approximate.
//! - `<gate>-upstream-pool`: every crtc gate as a `SyncIndexer` backend
//!   (`subjects::crtc_backend`, the module upstream's suite runs) inside the
//!   same `ThreadPoolIndexer`, one crtc lane per pool thread;
//! - and, beside them, crtc's own `Indexer` per gate at the same thread
//!   counts (built by the registry).
//!
//! Pool rows look up through the backend's `SyncIndexer::find_matches`, the
//! call the pool's own `find_matches` makes inline; the others through
//! `KvIndexerInterface::find_matches`.
//!
//! Sweeping. Heap is measured swept and unswept (`measurement::heap`).
//! Swept is each index's public cleanup path after the drain: upstream's
//! CRTC through `SyncIndexer::run_cleanup_task` (what its five-minute
//! cleanup task runs), on every shard of the branch-sharded indexer; crtc's
//! tree through `Tree::sweep_stale`. `RadixTree` prunes on removal and the
//! positional index keeps hash maps, so both have nothing to sweep.
//! Unswept is crtc with its sweep policy off; upstream's cleanup cannot be
//! switched off, but its first run is due five minutes after the index is
//! built, later than any run here ends. The branch-sharded row's two
//! figures come out equal: its shards hold every block past the router's
//! prefix below anchor nodes, and 1.6.1's cleanup walks from the tree's
//! root only, so it reaches none of them (read in 1.6.1's
//! `concurrent_radix_tree_compressed`: `sweep_stale_children` starts at
//! `root`, anchors live in `anchor_nodes`).

use crate::compare::measurement::plan::{IssueOp, Plan};
use crate::compare::registry::{Configuration, ReadPath, Setup};
use crate::compare::subjects::backend::{sweep_until_done, Backend};
use crate::compare::subjects::crtc_backend::CrtcBackend;
use crate::compare::subjects::upstream::{DynamoBackend, DynamoIndex, BLOCK_TOKENS};
use crtc::types::{KvCacheEventData, RouterEvent, WorkerId};
use crtc::{SweepPolicy, TreeConfig};
use crtc_strategies::sync::Arc;
use crtc_strategies::ShapeGate;
use dynamo_kv_router::indexer::positional::{PositionalIndexer, SearchMode};
use dynamo_kv_router::indexer::{
    BranchShardedIndexer, KvIndexer, KvIndexerInterface, KvIndexerMetrics, SyncIndexer,
    ThreadPoolIndexer,
};
use dynamo_kv_router::protocols::{self as up, compute_next_seq_hash};
use dynamo_kv_router::ConcurrentRadixTreeCompressed;
use rustc_hash::FxHashMap;
use tokio::runtime::Runtime;
use tokio_util::sync::CancellationToken;

/// The event-thread counts of the rows: one, and 1.6.1's default.
pub const THREADS: [usize; 2] = [1, 4];

/// The branch-sharded indexer's routing prefix depth.
pub const PREFIX_DEPTH: usize = 2;

/// The positional index's jump size.
const JUMP_SIZE: usize = 32;

/// A pool backend's cleanup through its public API.
pub trait PoolBackend: SyncIndexer {
    /// Unlinks the dead nodes the backend holds.
    fn sweep(&self);
}

impl PoolBackend for ConcurrentRadixTreeCompressed {
    fn sweep(&self) {
        self.run_cleanup_task();
    }
}

impl PoolBackend for PositionalIndexer {
    fn sweep(&self) {
        // The trait's default: nothing to unlink.
        self.run_cleanup_task();
    }
}

impl<G: ShapeGate> PoolBackend for CrtcBackend<G> {
    fn sweep(&self) {
        sweep_until_done(|| self.tree().sweep_stale().is_some());
    }
}

impl<T: PoolBackend> DynamoIndex for ThreadPoolIndexer<T> {
    fn interface(&self) -> &(dyn KvIndexerInterface + Send + Sync) {
        self
    }

    fn enqueue(&self, _runtime: &Runtime, event: up::RouterEvent) {
        // Fails only once the pool shut down, which it cannot while borrowed.
        let _ = self.enqueue_event(event);
    }

    fn lookup(&self, _runtime: &Runtime, query: Vec<up::LocalBlockHash>) -> up::OverlapScores {
        self.backend().find_matches(&query, false)
    }

    fn sweep(&self) {
        self.backend().sweep();
    }
}

/// `KvIndexer`: the router's one-thread indexer.
struct Single(KvIndexer);

impl DynamoIndex for Single {
    fn interface(&self) -> &(dyn KvIndexerInterface + Send + Sync) {
        &self.0
    }

    /// Its removals travel on their own channel, so a removal could overtake
    /// the worker's queued events: flushed first, then waited for, as the
    /// pool's removal waits.
    fn remove_worker(&self, runtime: &Runtime, worker: WorkerId) {
        runtime.block_on(async {
            self.0.flush().await;
            KvIndexerInterface::remove_worker(&self.0, worker).await;
            self.0.flush().await;
        });
    }
}

/// `BranchShardedIndexer` over CRTC pools, with the shards' trees kept for
/// their cleanup.
struct Sharded {
    index: BranchShardedIndexer<ThreadPoolIndexer<ConcurrentRadixTreeCompressed>>,
    trees: Vec<Arc<ConcurrentRadixTreeCompressed>>,
}

impl DynamoIndex for Sharded {
    fn interface(&self) -> &(dyn KvIndexerInterface + Send + Sync) {
        &self.index
    }

    fn sweep(&self) {
        self.trees.iter().for_each(|tree| tree.run_cleanup_task());
    }
}

fn pool<T: PoolBackend>(
    backend: T,
    threads: usize,
    metrics: Arc<KvIndexerMetrics>,
) -> Box<dyn DynamoIndex> {
    Box::new(ThreadPoolIndexer::new_with_metrics(
        backend,
        threads.max(1),
        BLOCK_TOKENS,
        Some(metrics),
    ))
}

/// `ThreadPoolIndexer<ConcurrentRadixTreeCompressed>` with `lanes` threads
/// (the row `upstream-1.6.1`, and `upstream-pool-crtc`).
pub fn build_pool_crtc(setup: Setup) -> Arc<dyn Backend> {
    Arc::new(DynamoBackend::start(|metrics| {
        pool(ConcurrentRadixTreeCompressed::new(), setup.lanes, metrics)
    }))
}

fn build_pool_positional(setup: Setup) -> Arc<dyn Backend> {
    Arc::new(DynamoBackend::start(|metrics| {
        let backend = PositionalIndexer::new_with_mode(JUMP_SIZE, SearchMode::Strided);
        pool(backend, setup.lanes, metrics)
    }))
}

fn build_kv_indexer(_setup: Setup) -> Arc<dyn Backend> {
    Arc::new(DynamoBackend::start(|metrics| {
        let token = CancellationToken::new();
        Box::new(Single(KvIndexer::new(token, BLOCK_TOKENS, metrics)))
    }))
}

fn build_branch_sharded(setup: Setup) -> Arc<dyn Backend> {
    Arc::new(DynamoBackend::start(|metrics| {
        let shards: Vec<_> = (0..setup.lanes.max(1))
            .map(|_| {
                let tree = ConcurrentRadixTreeCompressed::new();
                ThreadPoolIndexer::new_with_metrics(
                    tree,
                    1,
                    BLOCK_TOKENS,
                    Some(Arc::clone(&metrics)),
                )
            })
            .collect();
        let trees = shards.iter().map(ThreadPoolIndexer::backend_arc).collect();
        let index = BranchShardedIndexer::new(shards, PREFIX_DEPTH, BLOCK_TOKENS);
        Box::new(Sharded { index, trees })
    }))
}

fn build_gate_pool<G: ShapeGate>(setup: Setup) -> Arc<dyn Backend> {
    let config = TreeConfig {
        fast_path: setup.fast_path,
        sweep: match setup.sweeping {
            true => SweepPolicy::default(),
            false => SweepPolicy::disabled(),
        },
        ..TreeConfig::default()
    };
    Arc::new(DynamoBackend::start(|metrics| {
        pool(CrtcBackend::<G>::with_config(config), setup.lanes, metrics)
    }))
}

/// `plan` with every external hash relabelled to upstream's sequence hash
/// of the same local-hash prefix (the rule of upstream's
/// `compute_seq_hash_for_block`: a root block's is its local hash, a
/// child's `compute_next_seq_hash(parent's, local)`), for an index that
/// recomputes those from a lookup. Both hash a block's whole prefix, so the
/// relabelling keeps every block's identity and every score the reference
/// model expects; lookups are local hashes and stay as they are. A hash
/// never stored (an unknown parent or removal) keeps its value. Made once,
/// before anything is measured.
pub fn upstream_hashed(plan: &Plan) -> Plan {
    let mut sequence: FxHashMap<u64, u64> = FxHashMap::default();
    let ops = plan
        .ops
        .iter()
        .map(|op| match op {
            IssueOp::Event(event) => IssueOp::Event(rehash(event, &mut sequence)),
            other => other.clone(),
        })
        .collect();
    Plan {
        ops,
        queries: Arc::clone(&plan.queries),
        query_positions: plan.query_positions.clone(),
        events: plan.events,
        blocks: plan.blocks,
    }
}

/// One event of [`upstream_hashed`], `sequence` mapping our external hashes
/// to upstream's (empty before a stream's first event, then carried from
/// event to event).
pub fn rehash(event: &RouterEvent, sequence: &mut FxHashMap<u64, u64>) -> RouterEvent {
    let mut event = event.clone();
    let relabel = |hash: u64, sequence: &FxHashMap<u64, u64>| *sequence.get(&hash).unwrap_or(&hash);
    match &mut event.event.data {
        KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } => {
            let mut parent = parent_hash.map(|p| relabel(p.0, sequence));
            if let (Some(hash), Some(relabelled)) = (parent_hash.as_mut(), parent) {
                hash.0 = relabelled;
            }
            for block in blocks.iter_mut() {
                let next = match parent {
                    None => block.local.0,
                    Some(p) => compute_next_seq_hash(p, up::LocalBlockHash(block.local.0)),
                };
                sequence.insert(block.external.0, next);
                block.external.0 = next;
                parent = Some(next);
            }
        }
        KvCacheEventData::Removed { block_hashes } => {
            for hash in block_hashes.iter_mut() {
                hash.0 = relabel(hash.0, sequence);
            }
        }
        KvCacheEventData::Cleared => {}
    }
    event
}

/// An upstream row at `threads` event threads.
fn row(
    strategy: &'static str,
    build: fn(Setup) -> Arc<dyn Backend>,
    threads: usize,
) -> Configuration {
    Configuration {
        strategy,
        fast_path: None,
        build,
        read_path: ReadPath::Lock,
        retries: None,
        threads: Some(threads),
        exact: true,
        sweeps: true,
        upstream_hashes: false,
    }
}

/// A crtc gate inside upstream's pool, fast path on.
fn gate_row<G: ShapeGate>(strategy: &'static str, threads: usize) -> Configuration {
    Configuration {
        fast_path: Some(true),
        read_path: G::READ_PATH,
        retries: Some(G::read_counters),
        ..row(strategy, build_gate_pool::<G>, threads)
    }
}

/// One `<gate>-upstream-pool` row per gate of
/// [`for_each_bench_gate!`](crate::for_each_bench_gate).
macro_rules! push_gate_row {
    ($module:ident, $gate:ty, $label:literal, ($rows:ident, $threads:ident)) => {
        $rows.push(gate_row::<$gate>(
            concat!($label, "-upstream-pool"),
            $threads,
        ));
    };
}

/// The upstream rows of `--upstream-rows all` at `threads` event threads
/// (module docs), then every crtc gate inside upstream's pool.
pub fn configurations(threads: usize) -> Vec<Configuration> {
    let mut rows = Vec::new();
    if threads == 1 {
        rows.push(Configuration {
            sweeps: false,
            ..row("upstream-kvindexer", build_kv_indexer, 1)
        });
    }
    rows.push(row("upstream-pool-crtc", build_pool_crtc, threads));
    rows.push(Configuration {
        exact: false,
        sweeps: false,
        upstream_hashes: true,
        ..row("upstream-pool-positional", build_pool_positional, threads)
    });
    rows.push(Configuration {
        exact: false,
        ..row("upstream-branch-sharded", build_branch_sharded, threads)
    });
    crate::for_each_bench_gate!(push_gate_row, (rows, threads));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::measurement::plan::issue;
    use crtc::types::WorkerWithDpRank;
    use crtc_verification::chain;
    use crtc_verification::workload::{Workload, WorkloadOp};

    /// Every row stores, scores, sweeps and removes a worker through the
    /// driver (the positional row on the stream in upstream's hashes).
    #[test]
    fn every_row_answers_through_the_driver() {
        let rank = WorkerWithDpRank::new(3, 1);
        let query = chain::locals(&[10, 11, 12, 13]);
        let mut workload = Workload::new("driver");
        let stored = chain::chained(None, &[10, 11, 12]);
        workload.ops = vec![WorkloadOp::Event(RouterEvent::stored(rank, None, stored))];
        let ours = Plan::new(&workload);
        let theirs = upstream_hashed(&ours);
        for config in THREADS.into_iter().flat_map(configurations) {
            let plan = if config.upstream_hashes {
                &theirs
            } else {
                &ours
            };
            let backend = config.backend(1, true);
            plan.ops.iter().for_each(|op| issue(&*backend, op.clone()));
            backend.flush();
            let label = config.label();
            assert_eq!(backend.find_matches(&query).score(rank), 3, "{label}");
            assert_eq!(backend.stats().applied, 1, "{label}");
            backend.sweep();
            backend.remove_worker(3);
            assert!(backend.find_matches(&query).scores.is_empty(), "{label}");
        }
    }
}
