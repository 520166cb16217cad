//! The engine model: simulated inference workers with LRU block caches that
//! turn requests into the KV events a router would receive.
//!
//! Each worker is one rank (`dp_rank` 0; worker ids `0..workers`). Serving a
//! request at worker `w`:
//! 1. a [`WorkloadOp::Query`] of the prompt (the router's lookup);
//! 2. the resident prefix of the prompt on `w` is touched in the LRU;
//! 3. room for the new prompt blocks and all output blocks is reserved at
//!    admission, evicting least-recently-used *leaves* (blocks with no
//!    resident child on `w`, never the request's own prefix tail), reported as
//!    one `Removed` event;
//! 4. the prompt blocks not yet resident are stored as one chained `Stored`
//!    event under the last resident prefix block (or the root);
//! 5. each output block (random tokens, so unique) is a one-block `Stored`
//!    event on the request's current tail: a decode store.
//!
//! External hashes are [`chain_hash`] over the full local path, so
//! equal prefixes on different workers carry equal external hashes. Because
//! eviction is leaf-first and a store's parent is always resident, the stream
//! is strict: no rank ever holds a block whose prefix it lacks.

use super::{Workload, WorkloadOp};
use crate::chain::{chain_hash, mix};
use crate::Rng;
use crtc::types::{
    BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank,
};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Shape of the simulated fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Number of workers (0 is treated as 1).
    pub workers: usize,
    /// Blocks each worker's cache holds before it evicts.
    pub capacity_blocks: usize,
    /// Seed for placement and for the random output tokens.
    pub seed: u64,
}

impl Default for EngineConfig {
    /// 8 workers of 4,096 blocks (512k tokens each at 128 tokens per block):
    /// small enough that the presets evict regularly.
    fn default() -> Self {
        Self {
            workers: 8,
            capacity_blocks: 4096,
            seed: 0,
        }
    }
}

/// Chooses the worker that serves a request.
pub trait Placement {
    /// The worker (in `0..workers`; larger values are reduced modulo
    /// `workers`) that serves a request with this prompt.
    fn place(&mut self, prompt: &[LocalBlockHash], workers: usize) -> usize;

    /// Sees every operation the engine emits, in order, right after the
    /// request that produced it (a KV-aware placement feeds its index here).
    fn observe(&mut self, _op: &WorkloadOp) {}
}

/// Uniformly random placement from a seeded generator (what upstream's
/// mooncake bench does: no KV awareness).
#[derive(Clone, Debug)]
pub struct RandomPlacement {
    rng: Rng,
}

impl RandomPlacement {
    /// Placement drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Rng::new(mix(seed ^ 0x706c_6163_656d_656e)),
        }
    }
}

impl Placement for RandomPlacement {
    fn place(&mut self, _prompt: &[LocalBlockHash], workers: usize) -> usize {
        self.rng.below(workers)
    }
}

/// Prefix-hash placement: the worker is a hash of the prompt's first `depth`
/// blocks (all of them when shorter). When `depth` reaches past the shared
/// system prompt into the session's own first block, every turn of a session
/// lands on one worker (sticky sessions).
#[derive(Clone, Debug)]
pub struct PrefixHashPlacement {
    depth: usize,
    salt: u64,
}

impl PrefixHashPlacement {
    /// Hash the first `depth` blocks, salted by `seed`.
    pub fn new(depth: usize, seed: u64) -> Self {
        Self {
            depth,
            salt: mix(seed ^ 0x7072_6566_6978),
        }
    }
}

impl Placement for PrefixHashPlacement {
    fn place(&mut self, prompt: &[LocalBlockHash], workers: usize) -> usize {
        let hash = prompt
            .iter()
            .take(self.depth)
            .fold(self.salt, |h, l| mix(h ^ l.0));
        (hash % workers.max(1) as u64) as usize
    }
}

/// What serving one request did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// The worker that served it.
    pub worker: usize,
    /// Prompt blocks that were already resident on that worker.
    pub resident: usize,
    /// The output blocks' local hashes, in order (to build the next turn).
    pub output: Vec<LocalBlockHash>,
}

/// Totals over every request served so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests served.
    pub requests: u64,
    /// Prompt blocks over all requests.
    pub prompt_blocks: u64,
    /// Prompt blocks that were already resident where they were served.
    pub reused_blocks: u64,
    /// Blocks evicted.
    pub evicted_blocks: u64,
    /// Requests whose reservation could not be met in full because only the
    /// request's own prefix was left; the worker ran over capacity.
    pub overflows: u64,
}

/// A block resident in one worker's cache.
#[derive(Clone, Copy, Debug)]
struct Resident {
    parent: Option<ExternalSequenceBlockHash>,
    children: u32,
    stamp: u64,
}

/// One worker's cache: blocks by external hash, plus the evictable blocks
/// (no resident children) ordered by last use.
#[derive(Clone, Debug, Default)]
struct WorkerCache {
    blocks: FxHashMap<ExternalSequenceBlockHash, Resident>,
    leaves: BTreeSet<(u64, ExternalSequenceBlockHash)>,
    clock: u64,
}

impl WorkerCache {
    fn len(&self) -> usize {
        self.blocks.len()
    }

    fn contains(&self, hash: ExternalSequenceBlockHash) -> bool {
        self.blocks.contains_key(&hash)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Marks a resident block as just used.
    fn touch(&mut self, hash: ExternalSequenceBlockHash) {
        let now = self.tick();
        if let Some(block) = self.blocks.get_mut(&hash) {
            if block.children == 0 {
                self.leaves.remove(&(block.stamp, hash));
                self.leaves.insert((now, hash));
            }
            block.stamp = now;
        }
    }

    /// Makes `hash` resident under `parent` (which must be resident or None).
    fn insert(
        &mut self,
        parent: Option<ExternalSequenceBlockHash>,
        hash: ExternalSequenceBlockHash,
    ) {
        let now = self.tick();
        if let Some(p) = parent {
            if let Some(p_block) = self.blocks.get_mut(&p) {
                if p_block.children == 0 {
                    self.leaves.remove(&(p_block.stamp, p));
                }
                p_block.children += 1;
            }
        }
        let block = Resident {
            parent,
            children: 0,
            stamp: now,
        };
        self.blocks.insert(hash, block);
        self.leaves.insert((now, hash));
    }

    /// Evicts up to `count` least-recently-used leaves, never `pinned`.
    /// Parents that become leaves join the candidates at once.
    fn evict(
        &mut self,
        count: usize,
        pinned: Option<ExternalSequenceBlockHash>,
    ) -> Vec<ExternalSequenceBlockHash> {
        let mut evicted = Vec::with_capacity(count);
        while evicted.len() < count {
            let Some(&(stamp, hash)) = self.leaves.iter().find(|(_, h)| Some(*h) != pinned) else {
                break;
            };
            self.leaves.remove(&(stamp, hash));
            let parent = self.blocks.remove(&hash).and_then(|b| b.parent);
            if let Some(p) = parent {
                if let Some(p_block) = self.blocks.get_mut(&p) {
                    p_block.children -= 1;
                    if p_block.children == 0 {
                        self.leaves.insert((p_block.stamp, p));
                    }
                }
            }
            evicted.push(hash);
        }
        evicted
    }

    fn clear(&mut self) {
        self.blocks.clear();
        self.leaves.clear();
    }
}

/// The simulated fleet. Feed it requests, then take the [`Workload`].
#[derive(Clone, Debug)]
pub struct Engine<P: Placement = RandomPlacement> {
    config: EngineConfig,
    placement: P,
    caches: Vec<WorkerCache>,
    rng: Rng,
    workload: Workload,
    stats: EngineStats,
}

impl Engine<RandomPlacement> {
    /// A fleet with random placement seeded from `config.seed`.
    pub fn new(config: EngineConfig) -> Self {
        Self::with_placement(config, RandomPlacement::new(config.seed))
    }
}

impl<P: Placement> Engine<P> {
    /// A fleet that places requests with `placement`.
    pub fn with_placement(config: EngineConfig, placement: P) -> Self {
        let workers = config.workers.max(1);
        Self {
            config: EngineConfig { workers, ..config },
            placement,
            caches: vec![WorkerCache::default(); workers],
            rng: Rng::new(mix(config.seed ^ 0x6f75_7470_7574)),
            workload: Workload::default(),
            stats: EngineStats::default(),
        }
    }

    /// The configuration (with `workers` at least 1).
    pub fn config(&self) -> EngineConfig {
        self.config
    }

    /// Totals so far.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Blocks resident on `worker` (0 for an unknown worker).
    pub fn resident_blocks(&self, worker: usize) -> usize {
        self.caches.get(worker).map_or(0, WorkerCache::len)
    }

    /// The operations emitted so far.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// Ends the run: the emitted stream, named `name`.
    pub fn finish(self, name: impl Into<String>) -> Workload {
        Workload {
            name: name.into(),
            ..self.workload
        }
    }

    /// Serves a request at the worker the placement picks.
    pub fn submit(&mut self, prompt: &[LocalBlockHash], output_blocks: usize) -> Served {
        let workers = self.caches.len();
        let worker = self.placement.place(prompt, workers) % workers;
        self.submit_to(worker, prompt, output_blocks)
    }

    /// Serves a request at `worker` (reduced modulo the number of workers).
    pub fn submit_to(
        &mut self,
        worker: usize,
        prompt: &[LocalBlockHash],
        output_blocks: usize,
    ) -> Served {
        let worker = worker % self.caches.len();
        let mut ops = vec![WorkloadOp::Query(prompt.to_vec())];
        let (resident, tail) = self.resident_prefix(worker, prompt);
        let fresh = prompt.len() - resident + output_blocks;
        self.admit(worker, fresh, tail, &mut ops);
        let tail = self.store_prompt(worker, tail, &prompt[resident..], &mut ops);
        let output = self.decode(worker, tail, output_blocks, &mut ops);
        self.stats.requests += 1;
        self.stats.prompt_blocks += prompt.len() as u64;
        self.stats.reused_blocks += resident as u64;
        for op in ops {
            self.emit(op);
        }
        Served {
            worker,
            resident,
            output,
        }
    }

    /// The worker drops everything: a `Cleared` event.
    pub fn clear(&mut self, worker: usize) {
        let worker = worker % self.caches.len();
        self.caches[worker].clear();
        self.emit(WorkloadOp::Event(RouterEvent::cleared(rank(worker))));
    }

    /// The worker leaves the fleet (the router is told out of band) and comes
    /// back empty.
    pub fn remove_worker(&mut self, worker: usize) {
        let worker = worker % self.caches.len();
        self.caches[worker].clear();
        self.emit(WorkloadOp::RemoveWorker(worker as u64));
    }

    fn emit(&mut self, op: WorkloadOp) {
        self.placement.observe(&op);
        self.workload.ops.push(op);
    }

    /// Touches the resident prefix of `prompt`; returns its length and tail.
    fn resident_prefix(
        &mut self,
        worker: usize,
        prompt: &[LocalBlockHash],
    ) -> (usize, Option<ExternalSequenceBlockHash>) {
        let cache = &mut self.caches[worker];
        let mut tail = None;
        for (i, &local) in prompt.iter().enumerate() {
            let hash = chain_hash(tail, local);
            if !cache.contains(hash) {
                return (i, tail);
            }
            cache.touch(hash);
            tail = Some(hash);
        }
        (prompt.len(), tail)
    }

    /// Reserves room for `fresh` blocks, evicting leaves other than `tail`.
    fn admit(
        &mut self,
        worker: usize,
        fresh: usize,
        tail: Option<ExternalSequenceBlockHash>,
        ops: &mut Vec<WorkloadOp>,
    ) {
        let cache = &mut self.caches[worker];
        let need = (cache.len() + fresh).saturating_sub(self.config.capacity_blocks);
        let evicted = cache.evict(need, tail);
        if evicted.len() < need {
            self.stats.overflows += 1;
        }
        if !evicted.is_empty() {
            self.stats.evicted_blocks += evicted.len() as u64;
            ops.push(WorkloadOp::Event(RouterEvent::removed(
                rank(worker),
                evicted,
            )));
        }
    }

    /// Stores the non-resident prompt suffix as one chained event.
    fn store_prompt(
        &mut self,
        worker: usize,
        mut tail: Option<ExternalSequenceBlockHash>,
        suffix: &[LocalBlockHash],
        ops: &mut Vec<WorkloadOp>,
    ) -> Option<ExternalSequenceBlockHash> {
        if suffix.is_empty() {
            return tail;
        }
        let parent = tail;
        let cache = &mut self.caches[worker];
        let mut blocks = Vec::with_capacity(suffix.len());
        for &local in suffix {
            let external = chain_hash(tail, local);
            cache.insert(tail, external);
            blocks.push(BlockPair { local, external });
            tail = Some(external);
        }
        let event = RouterEvent::stored(rank(worker), parent, blocks);
        ops.push(WorkloadOp::Event(event));
        tail
    }

    /// Generates `count` output blocks, each a one-block store on the tail.
    fn decode(
        &mut self,
        worker: usize,
        mut tail: Option<ExternalSequenceBlockHash>,
        count: usize,
        ops: &mut Vec<WorkloadOp>,
    ) -> Vec<LocalBlockHash> {
        let mut output = Vec::with_capacity(count);
        for _ in 0..count {
            let local = LocalBlockHash(self.rng.next_u64());
            let external = chain_hash(tail, local);
            output.push(local);
            let cache = &mut self.caches[worker];
            if cache.contains(external) {
                cache.touch(external);
            } else {
                cache.insert(tail, external);
                let block = vec![BlockPair { local, external }];
                ops.push(WorkloadOp::Event(RouterEvent::stored(
                    rank(worker),
                    tail,
                    block,
                )));
                self.workload.decode_stores += u64::from(tail.is_some());
            }
            tail = Some(external);
        }
        output
    }
}

/// The single rank of worker `worker`.
fn rank(worker: usize) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker as u64, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain;
    use crate::workload::check::check_strict;
    use crtc::types::KvCacheEventData;

    fn config(workers: usize, capacity_blocks: usize) -> EngineConfig {
        EngineConfig {
            workers,
            capacity_blocks,
            seed: 3,
        }
    }

    fn stored(op: &WorkloadOp) -> Option<(Option<ExternalSequenceBlockHash>, &[BlockPair])> {
        match op {
            WorkloadOp::Event(e) => match &e.event.data {
                KvCacheEventData::Stored {
                    parent_hash,
                    blocks,
                } => Some((*parent_hash, blocks)),
                _ => None,
            },
            _ => None,
        }
    }

    #[test]
    fn request_emits_query_prompt_store_then_decode_stores() {
        let mut engine = Engine::new(config(1, 100));
        let prompt = chain::locals(&[10, 11, 12]);
        let served = engine.submit(&prompt, 2);
        let ops = &engine.workload().ops;
        assert_eq!(ops.len(), 4);
        assert_eq!(ops[0], WorkloadOp::Query(prompt.clone()));
        let (parent, blocks) = stored(&ops[1]).unwrap();
        assert_eq!(parent, None);
        assert_eq!(blocks, chain::chained(None, &[10, 11, 12]).as_slice());
        let (parent, blocks) = stored(&ops[2]).unwrap();
        assert_eq!(parent, Some(blocks_tail(&[10, 11, 12])));
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].local, served.output[0]);
        assert_eq!(stored(&ops[3]).unwrap().0, Some(blocks[0].external));
        assert_eq!(engine.workload().decode_stores, 2);

        // The next turn extends the previous prompt and output: only the new
        // block is stored, under the previous output's tail.
        let mut next = prompt.clone();
        next.extend(&served.output);
        next.push(LocalBlockHash(13));
        let again = engine.submit(&next, 0);
        assert_eq!(again.resident, 5);
        let (parent, blocks) = stored(engine.workload().ops.last().unwrap()).unwrap();
        assert_eq!(blocks.len(), 1);
        let raw: Vec<u64> = next[..5].iter().map(|l| l.0).collect();
        assert_eq!(parent, chain::tail_hash(&raw));
        check_strict(&engine.finish("t")).unwrap();
    }

    fn blocks_tail(locals: &[u64]) -> ExternalSequenceBlockHash {
        chain::tail_hash(locals).unwrap()
    }

    #[test]
    fn eviction_is_lru_leaf_first_and_spares_the_prefix() {
        let mut engine = Engine::new(config(1, 6));
        engine.submit(&chain::locals(&[1, 2, 3]), 0);
        engine.submit(&chain::locals(&[7, 8]), 0);
        // Shares [1, 2] (touched), needs 3 fresh blocks: 5 + 3 - 6 = 2
        // evictions. LRU leaves: 3 (oldest), then 8; [1, 2] is the pinned
        // prefix even once 3 is gone.
        let served = engine.submit(&chain::locals(&[1, 2, 4, 5, 6]), 0);
        assert_eq!(served.resident, 2);
        let removed = engine
            .workload()
            .ops
            .iter()
            .find_map(|op| match op {
                WorkloadOp::Event(e) => match &e.event.data {
                    KvCacheEventData::Removed { block_hashes } => Some(block_hashes.clone()),
                    _ => None,
                },
                _ => None,
            })
            .unwrap();
        assert_eq!(removed, vec![blocks_tail(&[1, 2, 3]), blocks_tail(&[7, 8])]);
        assert_eq!(engine.resident_blocks(0), 6);
        assert_eq!(engine.stats().evicted_blocks, 2);
        check_strict(&engine.finish("t")).unwrap();
    }

    #[test]
    fn over_capacity_request_keeps_its_own_prefix() {
        let mut engine = Engine::new(config(1, 4));
        engine.submit(&chain::locals(&[1, 2, 3]), 0);
        // 3 resident + 5 fresh, but only the prefix tail [1,2,3] is left:
        // nothing may be evicted, the worker runs over capacity.
        engine.submit(&chain::locals(&[1, 2, 3, 4]), 4);
        assert_eq!(engine.stats().overflows, 1);
        assert_eq!(engine.resident_blocks(0), 8);
        engine.submit(&chain::locals(&[9]), 0);
        assert_eq!(engine.resident_blocks(0), 4);
        check_strict(&engine.finish("t")).unwrap();
    }

    #[test]
    fn random_streams_are_strict_and_deterministic() {
        let run = || {
            let mut engine = Engine::new(config(3, 40));
            let mut rng = Rng::new(11);
            for _ in 0..400 {
                let len = rng.between(1, 12);
                let prompt: Vec<_> = (0..len)
                    .map(|i| {
                        LocalBlockHash(if i < 4 {
                            rng.below(2) as u64
                        } else {
                            rng.next_u64()
                        })
                    })
                    .collect();
                engine.submit(&prompt, rng.below(5));
                if rng.below(100) == 0 {
                    engine.clear(rng.below(3));
                }
                if rng.below(150) == 0 {
                    engine.remove_worker(rng.below(3));
                }
            }
            engine.finish("random")
        };
        let (a, b) = (run(), run());
        assert_eq!(a, b);
        assert!(a.stats().removed > 10);
        check_strict(&a).unwrap();
    }

    #[test]
    fn prefix_hash_placement_is_sticky() {
        let mut p = PrefixHashPlacement::new(2, 1);
        let short = chain::locals(&[5, 6]);
        let long = chain::locals(&[5, 6, 7, 8]);
        assert_eq!(p.place(&short, 8), p.place(&long, 8));
        assert!(p.place(&short, 8) < 8);
        let spread: BTreeSet<_> = (0..64u64)
            .map(|i| p.place(&chain::locals(&[i, 0]), 8))
            .collect();
        assert!(spread.len() > 4);
    }
}
