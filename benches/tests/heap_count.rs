//! The counting allocator behind compare's `bytes/membership`
//! (`measurement::heap`): installed here as this test binary's global
//! allocator, it must count an index's heap in full — growing with what the
//! index holds, lane lookups included, netting to nothing for an index
//! that holds nothing, and counting the dead nodes an unswept tree keeps.

use crtc::types::{RouterEvent, WorkerWithDpRank};
use crtc_bench::compare::measurement::heap::{self, CountingAlloc};
use crtc_bench::compare::measurement::plan::Plan;
use crtc_bench::compare::subjects::backend::{Backend, IndexerBackend};
use crtc_bench::compare::Setup;
use crtc_strategies::sync::Arc;
use crtc_strategies::RwLockGate;
use crtc_verification::chain::chained;
use crtc_verification::workload::{Workload, WorkloadOp};

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

/// `ranks` ranks each storing one private chain of `blocks` blocks, then,
/// with `cleared`, clearing it again.
fn plan_with(ranks: u64, blocks: u64, cleared: bool) -> Plan {
    let ops: Vec<WorkloadOp> = (0..ranks)
        .flat_map(|r| {
            let rank = WorkerWithDpRank::new(r, 0);
            let locals: Vec<u64> = (0..blocks).map(|b| 1_000 * (r + 1) + b).collect();
            let store = RouterEvent::stored(rank, None, chained(None, &locals));
            let clear = cleared.then(|| WorkloadOp::Event(RouterEvent::cleared(rank)));
            std::iter::once(WorkloadOp::Event(store)).chain(clear)
        })
        .collect();
    let mut workload = Workload::new("heap");
    workload.ops = ops;
    Plan::new(&workload)
}

fn plan(ranks: u64, blocks: u64) -> Plan {
    plan_with(ranks, blocks, false)
}

fn rwlock_with(sweeping: bool) -> Arc<dyn Backend> {
    Arc::new(IndexerBackend::<RwLockGate>::with_setup(Setup {
        lanes: 2,
        fast_path: true,
        sweeping,
    }))
}

fn rwlock() -> Arc<dyn Backend> {
    rwlock_with(true)
}

/// One test: the count is process-wide, so a second test running in
/// parallel would be counted too.
#[test]
fn the_count_grows_with_what_the_index_holds_and_nets_to_nothing_when_empty() {
    assert!(heap::installed());
    let empty = heap::index_bytes(rwlock, &plan(0, 0), true).expect("installed");
    assert!(empty < 4096, "{empty}");
    let small = heap::index_bytes(rwlock, &plan(4, 64), true).expect("installed");
    let large = heap::index_bytes(rwlock, &plan(4, 1024), true).expect("installed");
    // Every block is at least an edge pair (16 bytes) and a lookup entry.
    assert!(small >= 4 * 64 * 16, "{small}");
    assert!(large >= 8 * small, "{small} -> {large}");
    assert!(
        large <= 4 * 1024 * 1024,
        "{large}: far above any per-block cost"
    );
    an_unswept_tree_counts_its_dead_nodes();
}

/// Cleared chains leave holder-less nodes: the unswept count keeps them,
/// the swept one does not. (Both keep the lanes' lookup tables at the size
/// they grew to: 21,112 swept and 25,312 unswept bytes when written.)
fn an_unswept_tree_counts_its_dead_nodes() {
    let cleared = plan_with(4, 256, true);
    let swept = heap::index_bytes(rwlock, &cleared, true).expect("installed");
    let unswept = heap::index_bytes(|| rwlock_with(false), &cleared, false).expect("installed");
    assert!(swept < unswept, "swept {swept}, unswept {unswept}");
}
