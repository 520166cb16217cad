// ----------------------------------------------------------------------------
// Test glue (appended to crtc_backend.rs by upstream-suite/patch.py): what the
// factories of upstream's src/indexer/tests.rs call for the crtc variants.
// ----------------------------------------------------------------------------

/// Builds the pools of the crtc variants of upstream's indexer suite.
#[cfg(test)]
pub(crate) mod suite {
    use std::sync::Arc;

    use async_trait::async_trait;

    use super::{CrtcBackend, gates};
    use crate::indexer::pruning::PruneConfig;
    use crate::indexer::{
        KvIndexerDelegate, KvIndexerInterface, KvIndexerMetrics, SyncIndexer, ThreadPoolIndexer,
    };
    use crate::protocols::{LocalBlockHash, OverlapScores, RouterEvent, WorkerWithDpRank};
    use crtc::ShapeGate;

    /// Whether `variant` names a crtc gate.
    pub(crate) fn is_crtc(variant: &str) -> bool {
        variant.starts_with("crtc_")
    }

    /// Calls `$make::<gate>(..)` for the gate `variant` names.
    macro_rules! by_gate {
        ($variant:expr, $make:ident ( $($arg:expr),* )) => {
            match $variant {
                "crtc_rwlock" => $make::<gates::Rwlock>($($arg),*),
                "crtc_seqlock" => $make::<gates::Seqlock>($($arg),*),
                "crtc_epoch" => $make::<gates::Epoch>($($arg),*),
                "crtc_seize" => $make::<gates::Seize>($($arg),*),
                other => panic!("unknown crtc variant {other}"),
            }
        };
    }

    type Boxed = Box<dyn KvIndexerInterface + Sync>;

    fn with_metrics<G: ShapeGate>(
        threads: usize,
        block_size: u32,
        metrics: Arc<KvIndexerMetrics>,
    ) -> Boxed {
        let backend = CrtcBackend::<G>::new();
        Box::new(ThreadPoolIndexer::new_with_metrics(
            backend,
            threads,
            block_size,
            Some(metrics),
        ))
    }

    fn with_pruning<G: ShapeGate>(threads: usize, block_size: u32, prune: PruneConfig) -> Boxed {
        let backend = CrtcBackend::<G>::new();
        Box::new(ThreadPoolIndexer::new_with_pruning(
            backend, threads, block_size, prune,
        ))
    }

    fn sized<G: ShapeGate>(threads: usize, block_size: u32) -> Box<dyn SizedPool> {
        Box::new(ThreadPoolIndexer::new(
            CrtcBackend::<G>::new(),
            threads,
            block_size,
        ))
    }

    /// The pool of `variant` with metrics.
    pub(crate) fn pool_with_metrics(
        variant: &str,
        threads: usize,
        block_size: u32,
        metrics: Arc<KvIndexerMetrics>,
    ) -> Boxed {
        by_gate!(variant, with_metrics(threads, block_size, metrics))
    }

    /// The pool of `variant` with TTL pruning.
    pub(crate) fn pool_with_pruning(
        variant: &str,
        threads: usize,
        block_size: u32,
        prune: PruneConfig,
    ) -> Boxed {
        by_gate!(variant, with_pruning(threads, block_size, prune))
    }

    fn with_delegate<G: ShapeGate>(
        threads: usize,
        block_size: u32,
        delegate: Arc<dyn KvIndexerDelegate>,
    ) -> Boxed {
        let backend = CrtcBackend::<G>::new_with_delegate(delegate);
        Box::new(ThreadPoolIndexer::new(backend, threads, block_size))
    }

    /// The pool of `variant` reporting block owners to `delegate`.
    pub(crate) fn pool_with_delegate(
        variant: &str,
        threads: usize,
        block_size: u32,
        delegate: Arc<dyn KvIndexerDelegate>,
    ) -> Boxed {
        by_gate!(variant, with_delegate(threads, block_size, delegate))
    }

    /// The pool of `variant` as the tree-size tests drive it.
    pub(crate) fn sized_pool(variant: &str, threads: usize, block_size: u32) -> Box<dyn SizedPool> {
        by_gate!(variant, sized(threads, block_size))
    }

    /// What upstream's `TreeSizeTestIndexer` asks of a pool, gate-erased.
    #[async_trait]
    pub(crate) trait SizedPool: Send + Sync {
        async fn apply(&self, event: RouterEvent);
        async fn flush(&self);
        async fn block_count_for(&self, worker: WorkerWithDpRank) -> Option<usize>;
        async fn worker_count(&self) -> usize;
        fn scores(&self, query: &[LocalBlockHash]) -> OverlapScores;
        async fn dump(&self) -> Vec<RouterEvent>;
    }

    #[async_trait]
    impl<G: ShapeGate> SizedPool for ThreadPoolIndexer<CrtcBackend<G>> {
        async fn apply(&self, event: RouterEvent) {
            KvIndexerInterface::apply_event(self, event).await;
        }

        async fn flush(&self) {
            ThreadPoolIndexer::flush(self).await;
        }

        async fn block_count_for(&self, worker: WorkerWithDpRank) -> Option<usize> {
            let stats = self.worker_lookup_stats().await;
            Some(stats.block_count_for_worker(worker).unwrap_or(0))
        }

        async fn worker_count(&self) -> usize {
            let sizes = KvIndexerInterface::shard_sizes(self).await;
            sizes.iter().map(|snapshot| snapshot.worker_count).sum()
        }

        fn scores(&self, query: &[LocalBlockHash]) -> OverlapScores {
            self.backend().find_matches(query, false)
        }

        async fn dump(&self) -> Vec<RouterEvent> {
            KvIndexerInterface::dump_events(self).await.unwrap()
        }
    }
}
