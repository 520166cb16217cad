//! A workload prepared for replay: the write operations in order (cloned
//! per run before the clock starts), and the lookups with their positions in
//! the write order (for open-loop deadlines).

use crate::compare::subjects::backend::Backend;
use crtc::types::{LocalBlockHash, RouterEvent, WorkerId};
use crtc_strategies::sync::{thread, Arc};
use crtc_verification::workload::{Workload, WorkloadOp};

/// One write operation of the replay.
#[derive(Clone, Debug)]
pub enum IssueOp {
    /// A KV event, enqueued on its rank's lane.
    Event(RouterEvent),
    /// An out-of-band worker removal (synchronous).
    RemoveWorker(WorkerId),
}

/// The replay form of a workload.
pub struct Plan {
    /// Writes, in stream order.
    pub ops: Vec<IssueOp>,
    /// Every lookup, in stream order (duplicates kept).
    pub queries: Arc<Vec<Vec<LocalBlockHash>>>,
    /// For each lookup, how many writes precede it in the stream.
    pub query_positions: Vec<usize>,
    /// KV events.
    pub events: u64,
    /// Blocks named by KV events (stored plus removed).
    pub blocks: u64,
}

impl Plan {
    /// Splits `workload` into writes and lookups.
    pub fn new(workload: &Workload) -> Self {
        let (mut ops, mut queries, mut query_positions) = (Vec::new(), Vec::new(), Vec::new());
        let (mut events, mut blocks) = (0, 0);
        for op in &workload.ops {
            match op {
                WorkloadOp::Event(event) => {
                    events += 1;
                    blocks += event.block_count() as u64;
                    ops.push(IssueOp::Event(event.clone()));
                }
                WorkloadOp::RemoveWorker(worker) => ops.push(IssueOp::RemoveWorker(*worker)),
                WorkloadOp::Query(query) => {
                    query_positions.push(ops.len());
                    queries.push(query.clone());
                }
            }
        }
        Self {
            ops,
            queries: Arc::new(queries),
            query_positions,
            events,
            blocks,
        }
    }
}

/// Applies one write on `backend`.
pub fn issue(backend: &dyn Backend, op: IssueOp) {
    match op {
        IssueOp::Event(event) => backend.apply(event),
        IssueOp::RemoveWorker(worker) => backend.remove_worker(worker),
    }
}

/// Times one lookup, in nanoseconds ([`Backend::timed_lookup`]).
pub fn timed_lookup(backend: &dyn Backend, query: &[LocalBlockHash]) -> u64 {
    backend.timed_lookup(query)
}

/// Spawns a named helper thread; the error names the thread.
pub fn spawn<T: Send + 'static>(
    name: String,
    body: impl FnOnce() -> T + Send + 'static,
) -> Result<thread::JoinHandle<T>, String> {
    thread::Builder::new()
        .name(name.clone())
        .spawn(body)
        .map_err(|e| format!("cannot start thread {name}: {e}"))
}

/// Joins helper threads, concatenating what they returned.
pub fn join_all(handles: Vec<thread::JoinHandle<Vec<u64>>>) -> Result<Vec<u64>, String> {
    let mut all = Vec::new();
    for handle in handles {
        all.extend(
            handle
                .join()
                .map_err(|_| "a measurement thread panicked".to_owned())?,
        );
    }
    Ok(all)
}
