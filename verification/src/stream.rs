//! The seeded stream generator of the differential harness.
//!
//! A stream draws its sequences from a prefix pool: 3 system prompts
//! (1–3 blocks) × 4 documents (0–6 blocks; the last is 16–24 blocks so edges
//! cross the 16-block position-index threshold) × 3 user turns (1–3 blocks).
//! 2–3 workers with 1–2 dp ranks each store pool sequences from their held
//! prefix (sometimes split into two chained events, sometimes duplicating
//! what they hold), extend their leaves by 1–3 decode blocks (two shared
//! variants that every rank derives identically, so ranks race to extend the
//! same leaf, plus private ones), evict, clear, and get removed (a removed
//! worker either returns under its id or is replaced by a fresh one).
//!
//! Strict streams only evict leaf-first tail runs — blocks with no held child
//! in the rank, listed leaf first — so no rank ever holds a block it cannot
//! reach. Other streams also evict head runs, single mid-chain blocks and
//! random subsets, in any order, add unheld hashes, and store under parents
//! the rank no longer holds.
//!
//! The generator keeps its own [`Reference`] (every event accepted) and draws
//! from one [`Rng`], so a stream of `n` steps is a prefix of a stream of
//! `n + 1` steps with the same seed.

use crate::chain::{chain_hash, chained, mix, sequence_hashes};
use crate::reference::Reference;
use crate::{Catalog, Op, Rng};
use crtc::types::{
    BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerId, WorkerWithDpRank,
};
use proptest::prelude::*;
use rustc_hash::FxHashMap;

/// Longest ordinary document, in blocks.
const DOC_LEN: usize = 6;

/// The ops of `steps` generator steps for `seed` (one step emits one op, or
/// two for a store split into chained events).
pub fn random_stream(seed: u64, steps: usize, strict: bool) -> Vec<Op> {
    let mut generator = Generator::new(seed, strict);
    for _ in 0..steps {
        generator.step();
    }
    generator.ops
}

/// Proptest strategy for `(seed, steps)` with `1 ..= max_steps` steps; feed
/// it to [`random_stream`]. Shrinking the step count truncates the stream.
pub fn stream_strategy(max_steps: usize) -> impl Strategy<Value = (u64, usize)> {
    (any::<u64>(), 1..=max_steps.max(1))
}

/// Proptest cases from `CRTC_DIFF_CASES` (default 256).
pub fn cases_from_env() -> u32 {
    std::env::var("CRTC_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// How a non-strict removal picks its blocks.
#[derive(Clone, Copy)]
enum RemovalKind {
    Tail,
    Head,
    Middle,
    Subset,
}

struct Generator {
    rng: Rng,
    strict: bool,
    salt: u64,
    next_local: u64,
    pool: Vec<Vec<LocalBlockHash>>,
    /// (worker id, dp rank count).
    workers: Vec<(WorkerId, u32)>,
    next_worker: WorkerId,
    model: Reference,
    catalog: Catalog,
    ops: Vec<Op>,
}

impl Generator {
    fn new(seed: u64, strict: bool) -> Self {
        let mut rng = Rng::new(seed);
        let salt = rng.next_u64();
        let worker_count = rng.between(2, 3);
        let workers: Vec<_> = (1..=worker_count as WorkerId)
            .map(|id| (id, rng.between(1, 2) as u32))
            .collect();
        let mut generator = Self {
            rng,
            strict,
            salt,
            next_local: 0,
            pool: Vec::new(),
            next_worker: worker_count as WorkerId + 1,
            workers,
            model: Reference::new(),
            catalog: Catalog::new(),
            ops: Vec::new(),
        };
        generator.build_pool();
        generator
    }

    fn fresh_local(&mut self) -> LocalBlockHash {
        self.next_local += 1;
        LocalBlockHash(mix(self.salt ^ mix(self.next_local)))
    }

    fn segments(&mut self, lengths: &[usize]) -> Vec<Vec<LocalBlockHash>> {
        lengths
            .iter()
            .map(|&len| (0..len).map(|_| self.fresh_local()).collect())
            .collect()
    }

    fn build_pool(&mut self) {
        let system_lengths: Vec<_> = (0..3).map(|_| self.rng.between(1, 3)).collect();
        let mut doc_lengths: Vec<_> = (0..3).map(|_| self.rng.between(0, DOC_LEN)).collect();
        doc_lengths.push(4 * self.rng.between(4, DOC_LEN));
        let user_lengths: Vec<_> = (0..3).map(|_| self.rng.between(1, 3)).collect();
        let systems = self.segments(&system_lengths);
        let docs = self.segments(&doc_lengths);
        let users = self.segments(&user_lengths);
        for system in &systems {
            for doc in &docs {
                for user in &users {
                    self.pool.push([system.as_slice(), doc, user].concat());
                }
            }
        }
    }

    fn ranks(&self) -> Vec<WorkerWithDpRank> {
        self.workers
            .iter()
            .flat_map(|&(worker, dp)| (0..dp).map(move |d| WorkerWithDpRank::new(worker, d)))
            .collect()
    }

    fn pick_rank(&mut self) -> WorkerWithDpRank {
        let ranks = self.ranks();
        ranks[self.rng.below(ranks.len())]
    }

    fn emit(&mut self, mut op: Op) {
        if let Op::Event(event) = &mut op {
            event.event.event_id = self.ops.len() as u64;
            self.catalog.record(event);
        }
        op.apply_to(&mut self.model);
        self.ops.push(op);
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..40 => self.store_step(),
            40..52 => self.extend_step(),
            52..94 => self.remove_step(),
            94..97 => {
                let rank = self.pick_rank();
                self.emit(Op::Event(RouterEvent::cleared(rank)));
            }
            97..99 => {
                let rank = self.pick_rank();
                self.emit(Op::RemoveWorkerDpRank(rank));
            }
            _ => self.remove_worker_step(),
        }
    }

    fn remove_worker_step(&mut self) {
        let index = self.rng.below(self.workers.len());
        let worker = self.workers[index].0;
        self.emit(Op::RemoveWorker(worker));
        if self.rng.percent(50) {
            self.workers[index].0 = self.next_worker;
            self.next_worker += 1;
        }
    }

    /// Emits `blocks` under `parent`, 30% of the time as two chained events.
    fn emit_store(
        &mut self,
        rank: WorkerWithDpRank,
        parent: Option<ExternalSequenceBlockHash>,
        blocks: Vec<BlockPair>,
    ) {
        if blocks.len() >= 2 && self.rng.percent(30) {
            let split = self.rng.between(1, blocks.len() - 1);
            let (head, tail) = blocks.split_at(split);
            let middle = head.last().map(|b| b.external);
            self.emit(Op::Event(RouterEvent::stored(rank, parent, head.to_vec())));
            self.emit(Op::Event(RouterEvent::stored(rank, middle, tail.to_vec())));
        } else {
            self.emit(Op::Event(RouterEvent::stored(rank, parent, blocks)));
        }
    }

    fn store_step(&mut self) {
        let rank = self.pick_rank();
        if !self.strict && self.rng.percent(5) && self.store_under_missing_parent(rank) {
            return;
        }
        let seq = self.pool[self.rng.below(self.pool.len())].clone();
        let raw: Vec<u64> = seq.iter().map(|l| l.0).collect();
        let hashes = sequence_hashes(&raw);
        let held = self.model.held_prefix(rank, &seq);
        let len = seq.len();
        if held == len {
            // Everything held: re-store a random range of it.
            let start = self.rng.below(len);
            let end = self.rng.between(start + 1, len);
            let parent = start.checked_sub(1).map(|i| hashes[i]);
            self.emit_store(rank, parent, chained(parent, &raw[start..end]));
            return;
        }
        let parent = held.checked_sub(1).map(|i| hashes[i]);
        let hole = !self.strict
            && hashes[held + 1..]
                .iter()
                .any(|&h| self.model.holds(rank, h));
        let end = if hole && self.rng.percent(40) {
            held + 1
        } else if self.rng.percent(70) {
            len
        } else {
            self.rng.between(held + 1, len)
        };
        self.emit_store(rank, parent, chained(parent, &raw[held..end]));
    }

    /// Stores one private block under a known block `rank` does not hold.
    fn store_under_missing_parent(&mut self, rank: WorkerWithDpRank) -> bool {
        let missing: Vec<_> = self
            .catalog
            .blocks()
            .iter()
            .copied()
            .filter(|&b| !self.model.holds(rank, b))
            .collect();
        let Some(&parent) = self.rng.pick(&missing) else {
            return false;
        };
        let local = self.fresh_local();
        let block = BlockPair {
            local,
            external: chain_hash(Some(parent), local),
        };
        self.emit(Op::Event(RouterEvent::stored(
            rank,
            Some(parent),
            vec![block],
        )));
        true
    }

    /// Extends a held leaf by 1–3 decode blocks, shared or private.
    fn extend_step(&mut self) {
        let rank = self.pick_rank();
        let leaves = self.model.held_leaves(rank);
        let Some(&leaf) = self.rng.pick(&leaves) else {
            return self.store_step();
        };
        let count = self.rng.between(1, 3);
        let variant = match self.rng.below(100) {
            0..35 => Some(1u64),
            35..70 => Some(2),
            _ => None,
        };
        let locals: Vec<u64> = (0..count as u64)
            .map(|i| match variant {
                Some(v) => mix(mix(leaf.0 ^ self.salt).wrapping_add((v << 32) | i)),
                None => self.fresh_local().0,
            })
            .collect();
        self.emit_store(rank, Some(leaf), chained(Some(leaf), &locals));
    }

    fn remove_step(&mut self) {
        let ranks: Vec<_> = self
            .ranks()
            .into_iter()
            .filter(|&r| self.model.held_count(r) > 0)
            .collect();
        let Some(&rank) = self.rng.pick(&ranks) else {
            return self.store_step();
        };
        let hashes = if self.strict {
            self.strict_removal(rank)
        } else {
            self.loose_removal(rank)
        };
        if !hashes.is_empty() {
            self.emit(Op::Event(RouterEvent::removed(rank, hashes)));
        }
    }

    /// Held children per held block of `rank`.
    fn child_counts(&self, rank: WorkerWithDpRank) -> FxHashMap<ExternalSequenceBlockHash, usize> {
        let mut counts = FxHashMap::default();
        for (_, parent) in self.model.held_entries(rank) {
            if let Some(parent) = parent {
                *counts.entry(parent).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Up to `max` held blocks from `leaf` toward the root, leaf first. With
    /// `exclusive`, stops at a block with another held child.
    fn tail_run(
        &self,
        rank: WorkerWithDpRank,
        leaf: ExternalSequenceBlockHash,
        max: usize,
        exclusive: Option<&FxHashMap<ExternalSequenceBlockHash, usize>>,
    ) -> Vec<ExternalSequenceBlockHash> {
        let mut run = vec![leaf];
        while run.len() < max {
            let Some(Some(parent)) = self.catalog.parent(run[run.len() - 1]) else {
                break;
            };
            let shared = exclusive.is_some_and(|c| c.get(&parent).copied().unwrap_or(0) > 1);
            if !self.model.holds(rank, parent) || shared {
                break;
            }
            run.push(parent);
        }
        run
    }

    /// Leaf-first tail runs: only blocks with no held child outside the run.
    fn strict_removal(&mut self, rank: WorkerWithDpRank) -> Vec<ExternalSequenceBlockHash> {
        let counts = self.child_counts(rank);
        let leaves = self.model.held_leaves(rank);
        let first = leaves[self.rng.below(leaves.len())];
        let max = self.rng.between(1, 4);
        let mut hashes = self.tail_run(rank, first, max, Some(&counts));
        if leaves.len() > 1 && self.rng.percent(15) {
            let second = leaves[self.rng.below(leaves.len())];
            if second != first {
                let max = self.rng.between(1, 3);
                hashes.extend(self.tail_run(rank, second, max, Some(&counts)));
            }
        }
        hashes
    }

    /// Any run or subset, in any order, sometimes with unheld hashes.
    fn loose_removal(&mut self, rank: WorkerWithDpRank) -> Vec<ExternalSequenceBlockHash> {
        let kind = [
            RemovalKind::Tail,
            RemovalKind::Head,
            RemovalKind::Middle,
            RemovalKind::Subset,
        ][self.rng.below(4)];
        let mut hashes = self.pick_removal(rank, kind);
        match self.rng.below(3) {
            0 => {}
            1 => hashes.reverse(),
            _ => self.rng.shuffle(&mut hashes),
        }
        let leaves = self.model.held_leaves(rank);
        if self.rng.percent(15) {
            if let Some(&leaf) = self.rng.pick(&leaves) {
                let max = self.rng.between(1, 3);
                hashes.extend(self.tail_run(rank, leaf, max, None));
            }
        }
        if self.rng.percent(10) {
            if let Some(&stray) = self.rng.pick(self.catalog.blocks()) {
                hashes.push(stray);
            }
        }
        let mut seen = rustc_hash::FxHashSet::default();
        hashes.retain(|h| seen.insert(*h));
        hashes
    }

    fn pick_removal(
        &mut self,
        rank: WorkerWithDpRank,
        kind: RemovalKind,
    ) -> Vec<ExternalSequenceBlockHash> {
        let sequences = self.model.held_sequences(rank);
        let chain = sequences[self.rng.below(sequences.len())].clone();
        match kind {
            RemovalKind::Tail => {
                let max = self.rng.between(1, 4);
                self.tail_run(rank, chain[chain.len() - 1], max, None)
            }
            RemovalKind::Head => {
                let count = self.rng.between(1, 4.min(chain.len()));
                chain[..count].to_vec()
            }
            RemovalKind::Middle if chain.len() >= 3 => {
                vec![chain[self.rng.between(1, chain.len() - 2)]]
            }
            RemovalKind::Middle => vec![chain[chain.len() - 1]],
            RemovalKind::Subset => {
                let mut held: Vec<_> = self
                    .model
                    .held_entries(rank)
                    .into_iter()
                    .map(|(b, _)| b)
                    .collect();
                self.rng.shuffle(&mut held);
                held.truncate(self.rng.between(1, 5));
                held
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_prefix_closed() {
        let long = random_stream(7, 300, false);
        assert_eq!(long, random_stream(7, 300, false));
        let short = random_stream(7, 100, false);
        assert_eq!(&long[..short.len()], short.as_slice());
    }

    #[test]
    fn strict_streams_never_orphan_a_block() {
        for seed in 0..10 {
            let mut model = Reference::new();
            for op in random_stream(seed, 600, true) {
                op.apply_to(&mut model);
                for rank in model.ranks().collect::<Vec<_>>() {
                    assert_eq!(
                        model.held_count(rank),
                        model.reachable_count(rank),
                        "seed {seed}"
                    );
                }
            }
        }
    }
}
