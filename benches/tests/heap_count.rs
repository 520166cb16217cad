//! The counting allocator behind compare's `bytes/membership`
//! (`measurement::heap`): installed here as this test binary's global
//! allocator, it must count an index's heap in full — growing with what the
//! index holds, lane lookups included, and netting to nothing for an index
//! that holds nothing.

use crtc::types::{RouterEvent, WorkerWithDpRank};
use crtc_bench::compare::measurement::heap::{self, CountingAlloc};
use crtc_bench::compare::measurement::plan::Plan;
use crtc_bench::compare::subjects::backend::{Backend, IndexerBackend};
use crtc_strategies::sync::Arc;
use crtc_strategies::RwLockGate;
use crtc_verification::chain::chained;
use crtc_verification::workload::{Workload, WorkloadOp};

#[global_allocator]
static ALLOCATOR: CountingAlloc = CountingAlloc;

/// `ranks` ranks each storing one private chain of `blocks` blocks.
fn plan(ranks: u64, blocks: u64) -> Plan {
    let ops: Vec<WorkloadOp> = (0..ranks)
        .map(|r| {
            let locals: Vec<u64> = (0..blocks).map(|b| 1_000 * (r + 1) + b).collect();
            let event =
                RouterEvent::stored(WorkerWithDpRank::new(r, 0), None, chained(None, &locals));
            WorkloadOp::Event(event)
        })
        .collect();
    let mut workload = Workload::new("heap");
    workload.ops = ops;
    Plan::new(&workload)
}

fn rwlock() -> Arc<dyn Backend> {
    Arc::new(IndexerBackend::<RwLockGate>::new(2, true))
}

/// One test: the count is process-wide, so a second test running in
/// parallel would be counted too.
#[test]
fn the_count_grows_with_what_the_index_holds_and_nets_to_nothing_when_empty() {
    assert!(heap::installed());
    let empty = heap::index_bytes(rwlock, &plan(0, 0)).expect("installed");
    assert!(empty < 4096, "{empty}");
    let small = heap::index_bytes(rwlock, &plan(4, 64)).expect("installed");
    let large = heap::index_bytes(rwlock, &plan(4, 1024)).expect("installed");
    // Every block is at least an edge pair (16 bytes) and a lookup entry.
    assert!(small >= 4 * 64 * 16, "{small}");
    assert!(large >= 8 * small, "{small} -> {large}");
    assert!(
        large <= 4 * 1024 * 1024,
        "{large}: far above any per-block cost"
    );
}
