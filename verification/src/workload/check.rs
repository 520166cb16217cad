//! The strictness check: replays a stream against per-rank residency and
//! reports the first operation that a strict engine could not have emitted.
//!
//! Strict means: a `Stored` event's parent is the root or a block its rank
//! holds; it stores no block the rank already holds; a `Removed` event names
//! only blocks the rank holds, each without a resident child at that point of
//! the event (leaf-first eviction, so no holes); `Cleared` and worker removal
//! empty the rank(s).

use super::{Workload, WorkloadOp};
use crtc::types::{
    BlockPair, ExternalSequenceBlockHash, KvCacheEventData, RouterEvent, WorkerWithDpRank,
};
use rustc_hash::FxHashMap;
use std::fmt;

/// The first operation that breaks strictness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrictViolation {
    /// 0-based index into the workload's operations.
    pub op: usize,
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for StrictViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op {}: {}", self.op, self.reason)
    }
}

impl std::error::Error for StrictViolation {}

/// A resident block: its parent and how many resident children it has.
type Held = FxHashMap<ExternalSequenceBlockHash, (Option<ExternalSequenceBlockHash>, u32)>;

/// Checks that `workload` is strict (see the module docs).
pub fn check_strict(workload: &Workload) -> Result<(), StrictViolation> {
    let mut ranks: FxHashMap<WorkerWithDpRank, Held> = FxHashMap::default();
    for (op, item) in workload.ops.iter().enumerate() {
        let result = match item {
            WorkloadOp::Event(event) => apply(&mut ranks, event),
            WorkloadOp::RemoveWorker(worker) => {
                ranks.retain(|rank, _| rank.worker_id != *worker);
                Ok(())
            }
            WorkloadOp::Query(_) => Ok(()),
        };
        result.map_err(|reason| StrictViolation { op, reason })?;
    }
    Ok(())
}

fn apply(ranks: &mut FxHashMap<WorkerWithDpRank, Held>, event: &RouterEvent) -> Result<(), String> {
    let rank = event.rank();
    let held = ranks.entry(rank).or_default();
    match &event.event.data {
        KvCacheEventData::Stored {
            parent_hash,
            blocks,
        } => store(held, *parent_hash, blocks),
        KvCacheEventData::Removed { block_hashes } => {
            block_hashes.iter().try_for_each(|&hash| remove(held, hash))
        }
        KvCacheEventData::Cleared => {
            held.clear();
            Ok(())
        }
    }
    .map_err(|reason| format!("rank {rank}: {reason}"))
}

fn store(
    held: &mut Held,
    parent: Option<ExternalSequenceBlockHash>,
    blocks: &[BlockPair],
) -> Result<(), String> {
    if let Some(p) = parent {
        if !held.contains_key(&p) {
            return Err(format!("store under parent {:#x} it does not hold", p.0));
        }
    }
    let mut prev = parent;
    for block in blocks {
        if held.contains_key(&block.external) {
            return Err(format!("stores {:#x} again", block.external.0));
        }
        if let Some(p) = prev {
            if let Some(entry) = held.get_mut(&p) {
                entry.1 += 1;
            }
        }
        held.insert(block.external, (prev, 0));
        prev = Some(block.external);
    }
    Ok(())
}

fn remove(held: &mut Held, hash: ExternalSequenceBlockHash) -> Result<(), String> {
    match held.get(&hash) {
        None => Err(format!("removes {:#x}, which it does not hold", hash.0)),
        Some(&(_, children)) if children > 0 => Err(format!(
            "removes {:#x} before its {children} resident children (a hole)",
            hash.0
        )),
        Some(&(parent, _)) => {
            held.remove(&hash);
            if let Some(entry) = parent.and_then(|p| held.get_mut(&p)) {
                entry.1 -= 1;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain;

    fn workload(events: Vec<RouterEvent>) -> Workload {
        Workload {
            name: "t".into(),
            ops: events.into_iter().map(WorkloadOp::Event).collect(),
            decode_stores: 0,
        }
    }

    #[test]
    fn catches_each_kind_of_violation() {
        let rank = WorkerWithDpRank::new(0, 0);
        let other = WorkerWithDpRank::new(1, 0);
        let blocks = chain::chained(None, &[1, 2]);
        let (head, tail) = (blocks[0].external, blocks[1].external);
        let base = RouterEvent::stored(rank, None, blocks.clone());
        let ok = workload(vec![
            base.clone(),
            RouterEvent::removed(rank, vec![tail, head]),
        ]);
        assert_eq!(check_strict(&ok), Ok(()));

        let cases = [
            (
                RouterEvent::stored(other, Some(tail), chain::chained(Some(tail), &[3])),
                "parent",
            ),
            (RouterEvent::stored(rank, None, blocks.clone()), "again"),
            (RouterEvent::removed(other, vec![tail]), "does not hold"),
            (RouterEvent::removed(rank, vec![head]), "hole"),
        ];
        for (bad, needle) in cases {
            let err = check_strict(&workload(vec![base.clone(), bad])).unwrap_err();
            assert_eq!(err.op, 1);
            assert!(err.reason.contains(needle), "{err}");
        }

        let mut cleared = workload(vec![base.clone(), RouterEvent::cleared(rank)]);
        cleared
            .ops
            .push(WorkloadOp::Event(RouterEvent::removed(rank, vec![tail])));
        assert_eq!(check_strict(&cleared).unwrap_err().op, 2);
        let mut gone = workload(vec![base]);
        gone.ops.push(WorkloadOp::RemoveWorker(0));
        gone.ops
            .push(WorkloadOp::Event(RouterEvent::removed(rank, vec![tail])));
        assert_eq!(check_strict(&gone).unwrap_err().op, 2);
    }
}
