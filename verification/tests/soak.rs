//! Real-thread soak, for every strategy.
//!
//! Two writer lanes own disjoint ranks whose sequences share system prompts
//! and decode tails, so they race on the same nodes; two readers check C1 on
//! every read (a score never exceeds the leading query blocks the rank ever
//! stored, and the last matched hash is the query's block at `score − 1`);
//! a sweeper thread sweeps stale leaves continuously and the writers also run
//! the sweeps the volume trigger schedules. Lifecycle churn: a lane removes
//! one of its ranks (racing the other lane) and either restores it or
//! replaces it with a fresh id, so slots recycle; ranks clear; and at some
//! checkpoints a worker whose two dp ranks live on different lanes is removed
//! by both lanes at once (one wins the unmap, the other waits for its
//! release). Every `CRTC_SOAK_CHECK_MS` the writers park at a step boundary
//! and every live sequence (and its prefixes) must score exactly what the
//! reference model holds (C2), while the sweeper keeps running.
//!
//! Duration: `CRTC_SOAK_SECS` (default 20 s per strategy, as in CI; the ignored
//! long run defaults to 300 s), split evenly between the fixed seed `0x50a6`
//! and a fresh seed printed with the line that replays it
//! (`CRTC_SOAK_SEED=0x…` runs that seed instead of a fresh one). Counters are printed per strategy (run with
//! `--nocapture` to see them); overcounts, hash mismatches, parity
//! mismatches and rejected valid stores must all be 0.

use crtc::harness::TreeHooks;
use crtc::types::{BlockPair, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::SweepPolicy;
use crtc::{Lane, Tree, TreeConfig};
use crtc_strategies::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crtc_strategies::sync::{spin_loop, thread, Arc, Mutex};
use crtc_strategies::ShapeGate;
use crtc_verification::chain::chained;
use crtc_verification::reference::Reference;
use crtc_verification::Rng;
use rustc_hash::{FxHashMap, FxHashSet};
use std::time::{Duration, Instant};

/// The worker whose dp ranks live on both lanes (rank `dp` on lane `dp`).
const SPLIT_WORKER: u64 = 7;
/// Ranks per lane besides the split worker's.
const OWN_RANKS: usize = 3;
/// Live sequences per rank at most.
const MAX_CHAINS: usize = 6;
/// Longest sequence.
const MAX_LEN: usize = 40;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The lane that owns `rank` (ids encode it), or `None` for a stranger.
fn owner(rank: WorkerWithDpRank) -> Option<usize> {
    match rank.worker_id {
        SPLIT_WORKER => Some(rank.dp_rank as usize).filter(|&l| l < 2),
        w if (1..=2).contains(&(w / 1_000_000)) => Some((w / 1_000_000 - 1) as usize),
        _ => None,
    }
}

/// Counters shared by every thread.
#[derive(Default)]
struct Counters {
    events: AtomicU64,
    reads: AtomicU64,
    overcounts: AtomicU64,
    hash_mismatches: AtomicU64,
    parity_mismatches: AtomicU64,
    apply_errors: AtomicU64,
    checkpoints: AtomicU64,
    rank_removals: AtomicU64,
    split_removals: AtomicU64,
    clears: AtomicU64,
    sweeps: AtomicU64,
    unlinked: AtomicU64,
}

fn bump(counter: &AtomicU64, n: u64) {
    // Relaxed: statistics only.
    counter.fetch_add(n, Ordering::Relaxed);
}

fn read(counter: &AtomicU64) -> u64 {
    // Relaxed: statistics only.
    counter.load(Ordering::Relaxed)
}

/// One rank's live sequences.
struct RankGen {
    rank: WorkerWithDpRank,
    chains: Vec<Vec<BlockPair>>,
}

/// What a lane's writer knows, shared with the checkpoint.
struct LaneModel {
    reference: Reference,
    ranks: Vec<RankGen>,
}

/// State shared by the writers, readers, sweeper and checkpoints.
struct Shared<G: ShapeGate> {
    tree: Arc<Tree<G>>,
    models: [Mutex<LaneModel>; 2],
    ever: Mutex<FxHashMap<WorkerWithDpRank, FxHashSet<u64>>>,
    recent: Mutex<Vec<Vec<u64>>>,
    stop: AtomicBool,
    /// Odd while a checkpoint wants the writers parked.
    pause: AtomicU64,
    parked: [AtomicU64; 2],
    /// Set at a checkpoint: each lane removes the split worker on resume.
    remove_split: [AtomicBool; 2],
    /// Split-worker removals scheduled, and lane calls that returned: the
    /// worker's ranks stay idle until both lanes' calls returned (a later
    /// unmap of the whole worker must not catch a restored rank).
    split_scheduled: AtomicU64,
    split_done: AtomicU64,
    counters: Counters,
    first_failure: Mutex<Option<String>>,
}

impl<G: ShapeGate> Shared<G> {
    fn fail(&self, counter: &AtomicU64, message: impl FnOnce() -> String) {
        bump(counter, 1);
        let mut first = self.first_failure.lock();
        if first.is_none() {
            *first = Some(message());
        }
    }
}

fn new_shared<G: ShapeGate>() -> Arc<Shared<G>> {
    let tree = Tree::new(TreeConfig {
        sweep: SweepPolicy {
            dead_floor: 64,
            min_gap: Duration::from_millis(5),
            timer: Some(Duration::from_millis(200)),
            ..SweepPolicy::eager()
        },
        ..TreeConfig::default()
    });
    let model = |lane: usize| {
        let mut ranks: Vec<RankGen> = (0..OWN_RANKS as u64)
            .map(|i| RankGen {
                rank: WorkerWithDpRank::new((lane as u64 + 1) * 1_000_000 + i, 0),
                chains: Vec::new(),
            })
            .collect();
        ranks.push(RankGen {
            rank: WorkerWithDpRank::new(SPLIT_WORKER, lane as u32),
            chains: Vec::new(),
        });
        Mutex::new(LaneModel {
            reference: Reference::new(),
            ranks,
        })
    };
    Arc::new(Shared {
        tree: Arc::new(tree),
        models: [model(0), model(1)],
        ever: Mutex::new(FxHashMap::default()),
        recent: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        pause: AtomicU64::new(0),
        parked: [AtomicU64::new(0), AtomicU64::new(0)],
        remove_split: [AtomicBool::new(false), AtomicBool::new(false)],
        split_scheduled: AtomicU64::new(0),
        split_done: AtomicU64::new(0),
        counters: Counters::default(),
        first_failure: Mutex::new(None),
    })
}

/// One writer lane: its tree lane, its rng and the next fresh worker id.
struct Writer<G: ShapeGate> {
    id: usize,
    lane: Lane<G>,
    rng: Rng,
    next_worker: u64,
    shared: Arc<Shared<G>>,
}

impl<G: ShapeGate> Writer<G> {
    /// Applies `event` for `gen`'s rank and records the outcome.
    fn apply(&mut self, model: &mut LaneModel, event: RouterEvent) -> bool {
        if let crtc::types::KvCacheEventData::Stored { blocks, .. } = &event.event.data {
            let mut ever = self.shared.ever.lock();
            let set = ever.entry(event.rank()).or_default();
            set.extend(blocks.iter().map(|b| b.external.0));
        }
        let result = self.shared.tree.apply_event(&mut self.lane, &event);
        let verdict = model.reference.apply_outcome(&event, result.is_ok());
        bump(&self.shared.counters.events, 1);
        if let (Err(e), crtc_verification::reference::Verdict::Apply) = (&result, verdict) {
            let c = &self.shared.counters.apply_errors;
            self.shared
                .fail(c, || format!("valid event rejected: {e}: {event:?}"));
        }
        result.is_ok()
    }

    fn remember(&self, chain: &[BlockPair]) {
        let mut recent = self.shared.recent.lock();
        if recent.len() >= 512 {
            let at = chain.len() % 512;
            recent.swap_remove(at);
        }
        recent.push(chain.iter().map(|b| b.local.0).collect());
    }

    fn new_chain(&mut self, model: &mut LaneModel, index: usize) {
        let system = 100 + self.rng.below(3) as u64;
        let mut locals = vec![system, system + 10];
        locals.extend((0..1 + self.rng.below(3)).map(|_| 1000 + self.rng.below(6) as u64));
        let blocks = chained(None, &locals);
        let rank = model.ranks[index].rank;
        if self.apply(model, RouterEvent::stored(rank, None, blocks.clone())) {
            self.remember(&blocks);
            model.ranks[index].chains.push(blocks);
        }
    }

    fn extend(&mut self, model: &mut LaneModel, index: usize) {
        let gen = &model.ranks[index];
        let chain = self.rng.below(gen.chains.len());
        if gen.chains[chain].len() >= MAX_LEN {
            return;
        }
        let parent = gen.chains[chain].last().map(|b| b.external);
        let local = if self.rng.percent(50) {
            7000 + self.rng.below(2) as u64
        } else {
            50_000 + (gen.rank.worker_id % 1000) * 1000 + self.rng.below(50) as u64
        };
        let block = chained(parent, &[local]);
        let rank = gen.rank;
        if self.apply(model, RouterEvent::stored(rank, parent, block.clone())) {
            let chain_blocks = &mut model.ranks[index].chains[chain];
            chain_blocks.extend(block);
            let snapshot = chain_blocks.clone();
            self.remember(&snapshot);
        }
    }

    /// Evicts a tail run of one sequence that no other sequence of the rank
    /// shares (leaf first, so the stream stays strict).
    fn evict(&mut self, model: &mut LaneModel, index: usize) {
        let gen = &model.ranks[index];
        let chain = self.rng.below(gen.chains.len());
        let shared = |b: &BlockPair| {
            gen.chains
                .iter()
                .flatten()
                .filter(|o| o.external == b.external)
                .count()
                > 1
        };
        let unshared = gen.chains[chain]
            .iter()
            .rev()
            .take_while(|b| !shared(b))
            .count();
        let cut = (1 + self.rng.below(gen.chains[chain].len())).min(unshared);
        if cut == 0 {
            return;
        }
        let keep = gen.chains[chain].len() - cut;
        let mut gone: Vec<_> = gen.chains[chain][keep..]
            .iter()
            .map(|b| b.external)
            .collect();
        self.rng.shuffle(&mut gone);
        let rank = gen.rank;
        if self.apply(model, RouterEvent::removed(rank, gone)) {
            let chains = &mut model.ranks[index].chains;
            chains[chain].truncate(keep);
            if keep == 0 {
                chains.swap_remove(chain);
            }
        }
    }

    /// Removes one of the lane's own ranks (racing the other lane's
    /// traffic), then restores it or replaces it with a fresh id.
    fn remove_rank(&mut self, model: &mut LaneModel, index: usize) {
        let rank = model.ranks[index].rank;
        self.shared
            .tree
            .remove_worker_dp_rank(&mut [&mut self.lane], rank);
        model.reference.remove_worker_dp_rank(rank);
        model.ranks[index].chains.clear();
        if self.rng.percent(50) {
            self.next_worker += 1;
            let worker = (self.id as u64 + 1) * 1_000_000 + self.next_worker;
            model.ranks[index].rank = WorkerWithDpRank::new(worker, 0);
        }
        bump(&self.shared.counters.rank_removals, 1);
    }

    fn step(&mut self) {
        let shared = Arc::clone(&self.shared);
        let mut model = shared.models[self.id].lock();
        // Acquire (both): pairs with the Releases that count the removals.
        let idle_split = shared.split_done.load(Ordering::Acquire)
            < 2 * shared.split_scheduled.load(Ordering::Acquire);
        let index = self.rng.below(model.ranks.len() - idle_split as usize);
        let chains = model.ranks[index].chains.len();
        let roll = self.rng.below(100);
        match roll {
            _ if chains == 0 => self.new_chain(&mut model, index),
            0..=24 if chains < MAX_CHAINS => self.new_chain(&mut model, index),
            0..=59 => self.extend(&mut model, index),
            60..=96 => self.evict(&mut model, index),
            97..=98 => {
                let rank = model.ranks[index].rank;
                if self.apply(&mut model, RouterEvent::cleared(rank)) {
                    model.ranks[index].chains.clear();
                    bump(&shared.counters.clears, 1);
                }
            }
            _ if index < OWN_RANKS && self.rng.percent(25) => self.remove_rank(&mut model, index),
            _ => self.evict(&mut model, index),
        }
    }

    /// Runs the sweep the volume trigger may have scheduled.
    fn maybe_sweep(&mut self) {
        let tree = &self.shared.tree;
        tree.fold_tally(&mut self.lane, true);
        if let Some(claim) = tree.sweep_due() {
            let stats = tree.run_sweep(claim);
            bump(&self.shared.counters.sweeps, 1);
            bump(&self.shared.counters.unlinked, stats.unlinked);
        }
    }

    /// Parks while a checkpoint runs; on resume, removes the split worker if
    /// the checkpoint asked for it (before any other step).
    fn park_if_requested(&mut self) {
        // Acquire: pairs with the checkpoint's Release; its model edits are
        // visible after the writer resumes.
        let generation = self.shared.pause.load(Ordering::Acquire);
        if generation % 2 == 0 {
            return;
        }
        // Release: the checkpoint reads it with Acquire.
        self.shared.parked[self.id].store(generation, Ordering::Release);
        // Acquire: as above.
        while self.shared.pause.load(Ordering::Acquire) == generation {
            spin_loop();
            thread::sleep(Duration::from_micros(200));
        }
        // Acquire: set by the checkpoint before it resumed the writers.
        if self.shared.remove_split[self.id].swap(false, Ordering::Acquire) {
            let tree = Arc::clone(&self.shared.tree);
            tree.remove_worker(&mut [&mut self.lane], SPLIT_WORKER);
            bump(&self.shared.counters.split_removals, 1);
            // Release: the other lane's Acquire sees the removal finished.
            self.shared.split_done.fetch_add(1, Ordering::Release);
        }
    }

    fn run(mut self) -> Lane<G> {
        let mut steps = 0u64;
        // Acquire: pairs with the Release that stops the soak.
        while !self.shared.stop.load(Ordering::Acquire) {
            self.park_if_requested();
            self.step();
            steps += 1;
            if steps % 32 == 0 {
                self.maybe_sweep();
            }
        }
        self.lane
    }
}

/// A reader: C1 and last-hash checks on every read.
fn reader<G: ShapeGate>(shared: Arc<Shared<G>>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut queries: Vec<Vec<u64>> = Vec::new();
    let mut reads = 0u64;
    // Acquire: pairs with the Release that stops the soak.
    while !shared.stop.load(Ordering::Acquire) {
        if reads % 64 == 0 || queries.is_empty() {
            queries = shared.recent.lock().clone();
            if queries.is_empty() {
                spin_loop();
                thread::yield_now();
                continue;
            }
        }
        let mut locals = rng.pick(&queries).cloned().unwrap_or_default();
        locals.truncate(1 + rng.below(locals.len().max(1)));
        if rng.percent(20) {
            locals.push(7000 + rng.below(2) as u64);
        }
        check_read(&shared, &locals, reads % 2 == 0);
        reads += 1;
    }
    bump(&shared.counters.reads, reads);
}

fn check_read<G: ShapeGate>(shared: &Shared<G>, locals: &[u64], detailed: bool) {
    let query: Vec<LocalBlockHash> = locals.iter().map(|&l| LocalBlockHash(l)).collect();
    let details = if detailed {
        shared.tree.find_match_details(&query, false)
    } else {
        crtc::types::MatchDetails {
            scores: shared.tree.find_matches(&query, false),
            ..Default::default()
        }
    };
    let externals = chained(None, locals);
    let ever = shared.ever.lock();
    for (rank, score) in details.scores.sorted() {
        let bound = externals
            .iter()
            .take_while(|b| ever.get(&rank).is_some_and(|s| s.contains(&b.external.0)))
            .count();
        if score as usize > bound {
            let c = &shared.counters.overcounts;
            shared.fail(c, || {
                format!("C1: {rank} scored {score} > ever-stored {bound} on {locals:?}")
            });
        }
        let expected = externals
            .get((score as usize).wrapping_sub(1))
            .map(|b| b.external);
        if detailed && details.last_matched.get(&rank).copied() != expected {
            let c = &shared.counters.hash_mismatches;
            shared.fail(c, || {
                format!("last hash of {rank} on {locals:?} (score {score})")
            });
        }
    }
}

/// Every live sequence of both lanes, and every prefix of each.
fn live_queries(models: &[&LaneModel]) -> Vec<Vec<u64>> {
    let mut queries: FxHashSet<Vec<u64>> = FxHashSet::default();
    for gen in models.iter().flat_map(|m| &m.ranks) {
        for chain in &gen.chains {
            let locals: Vec<u64> = chain.iter().map(|b| b.local.0).collect();
            for len in 1..=locals.len() {
                queries.insert(locals[..len].to_vec());
            }
            let mut stray = locals.clone();
            stray.push(7000);
            queries.insert(stray);
        }
    }
    let mut queries: Vec<_> = queries.into_iter().collect();
    queries.sort();
    queries
}

/// Exact scores (C2) for every live sequence while the writers are parked.
fn check_parity<G: ShapeGate>(shared: &Shared<G>) -> usize {
    let models = [shared.models[0].lock(), shared.models[1].lock()];
    let views = [&*models[0], &*models[1]];
    let queries = live_queries(&views);
    for locals in &queries {
        let query: Vec<LocalBlockHash> = locals.iter().map(|&l| LocalBlockHash(l)).collect();
        let scores = shared.tree.find_matches(&query, false);
        for (lane, model) in views.iter().enumerate() {
            let wrong = model
                .reference
                .check(&query, &scores)
                .into_iter()
                .filter(|d| owner(d.rank).is_none_or(|o| o == lane));
            for d in wrong {
                let c = &shared.counters.parity_mismatches;
                shared.fail(c, || format!("C2 at a checkpoint: {locals:?}: {d}"));
            }
        }
    }
    queries.len()
}

/// Parks the writers, checks parity, maybe schedules the split worker's
/// removal, and resumes them.
fn checkpoint<G: ShapeGate>(shared: &Shared<G>, schedule_split: bool) {
    // AcqRel: Release publishes the request; Acquire orders what follows.
    let generation = shared.pause.fetch_add(1, Ordering::AcqRel) + 1;
    // Acquire: pairs with the writers' Release when they park.
    while shared
        .parked
        .iter()
        .any(|p| p.load(Ordering::Acquire) != generation)
    {
        thread::sleep(Duration::from_micros(200));
    }
    check_parity(shared);
    bump(&shared.counters.checkpoints, 1);
    if schedule_split {
        // Release: read by the writers before they touch the split worker.
        shared.split_scheduled.fetch_add(1, Ordering::Release);
        for (lane, model) in shared.models.iter().enumerate() {
            let mut model = model.lock();
            let rank = WorkerWithDpRank::new(SPLIT_WORKER, lane as u32);
            model.reference.remove_worker_dp_rank(rank);
            if let Some(gen) = model.ranks.iter_mut().find(|g| g.rank == rank) {
                gen.chains.clear();
            }
            // Release: read by the writer on resume.
            shared.remove_split[lane].store(true, Ordering::Release);
        }
    }
    // Release: resumes the writers with the edits above visible.
    shared.pause.fetch_add(1, Ordering::Release);
}

/// The sweeper thread.
fn sweeper<G: ShapeGate>(shared: Arc<Shared<G>>) {
    // Acquire: pairs with the Release that stops the soak.
    while !shared.stop.load(Ordering::Acquire) {
        if let Some(stats) = shared.tree.sweep_stale() {
            bump(&shared.counters.sweeps, 1);
            bump(&shared.counters.unlinked, stats.unlinked);
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// The fixed seed of every soak.
const FIXED_SEED: u64 = 0x50a6;

/// Half of `secs` on [`FIXED_SEED`], half on a fresh (or replayed) seed.
fn soak_both<G: ShapeGate>(secs: u64, label: &str) {
    let half = (secs / 2).max(1);
    soak::<G>(half, FIXED_SEED);
    let fresh = crtc_verification::seeds::fresh_or_replayed("CRTC_SOAK_SEED", label);
    soak::<G>(half, fresh);
}

fn soak<G: ShapeGate>(secs: u64, seed: u64) {
    let shared = new_shared::<G>();
    let check_every = Duration::from_millis(env_u64("CRTC_SOAK_CHECK_MS", 500));
    let writers: Vec<_> = (0..2)
        .map(|id| {
            let writer = Writer {
                id,
                lane: shared.tree.new_lane(),
                rng: Rng::new(seed.wrapping_add(id as u64)),
                next_worker: 100,
                shared: Arc::clone(&shared),
            };
            thread::spawn(move || writer.run())
        })
        .collect();
    let readers: Vec<_> = (0..2u64)
        .map(|i| {
            let shared = Arc::clone(&shared);
            let reader_seed = seed.rotate_left(17).wrapping_add(i);
            thread::spawn(move || reader(shared, reader_seed))
        })
        .collect();
    let sweep = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || sweeper(shared))
    };
    let start = Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < Duration::from_secs(secs) {
        thread::sleep(check_every);
        rounds += 1;
        checkpoint(&shared, rounds % 3 == 0);
    }
    // Release: every thread stops after its current step.
    shared.stop.store(true, Ordering::Release);
    let lanes: Vec<Lane<G>> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    readers.into_iter().for_each(|r| r.join().unwrap());
    sweep.join().unwrap();
    finish(&shared, lanes);
}

/// The final checks after every thread joined, and the report.
fn finish<G: ShapeGate>(shared: &Shared<G>, lanes: Vec<Lane<G>>) {
    let queries = check_parity(shared);
    drop(lanes);
    if let Some(stats) = shared.tree.sweep_stale() {
        bump(&shared.counters.unlinked, stats.unlinked);
    }
    check_parity(shared);
    let c = &shared.counters;
    println!(
        "SOAK {}/{}: events {} reads {} overcounts {} hash_mismatches {} parity_mismatches {} \
         apply_errors {} checkpoints {} final_queries {queries} rank_removals {} \
         split_worker_removals {} clears {} sweeps {} unlinked {} slots_issued {} nodes {}",
        G::NAME,
        <G::Reclaim as crtc_strategies::Reclaim>::NAME,
        read(&c.events),
        read(&c.reads),
        read(&c.overcounts),
        read(&c.hash_mismatches),
        read(&c.parity_mismatches),
        read(&c.apply_errors),
        read(&c.checkpoints),
        read(&c.rank_removals),
        read(&c.split_removals),
        read(&c.clears),
        read(&c.sweeps),
        read(&c.unlinked),
        shared.tree.slots_issued(),
        shared.tree.node_count(),
    );
    let failure = shared.first_failure.lock().clone();
    for counter in [
        &c.overcounts,
        &c.hash_mismatches,
        &c.parity_mismatches,
        &c.apply_errors,
    ] {
        assert_eq!(read(counter), 0, "first failure: {failure:?}");
    }
    assert!(read(&c.events) > 0 && read(&c.reads) > 0 && read(&c.checkpoints) > 0);
    assert!(read(&c.sweeps) > 0, "sweeps ran");
}

macro_rules! soak {
    ($name:ident, $gate:ty, $label:literal) => {
        mod $name {
            #[test]
            fn soak_short() {
                let secs = super::env_u64("CRTC_SOAK_SECS", 20);
                super::soak_both::<$gate>(secs, concat!("soak ", $label));
            }

            #[test]
            #[ignore = "long soak: CRTC_SOAK_SECS (default 300)"]
            fn soak_long() {
                let secs = super::env_u64("CRTC_SOAK_SECS", 300);
                super::soak_both::<$gate>(secs, concat!("soak ", $label, " long"));
            }
        }
    };
}

crtc_strategies::for_each_gate!(soak);
