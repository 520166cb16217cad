//! Shared pieces of the model-checker suites (`tests/loom_*.rs` and
//! `tests/shuttle_*.rs`, built with `--cfg crtc_loom` or `--cfg crtc_shuttle`):
//! event builders over chained hashes, a tree's observable final state,
//! scenarios with their serial outcomes, the mutant switch as a guard, a
//! child-process runner for negative controls, and the models themselves,
//! generic over the gate (`G: ShapeGate`) so every gate's test binary is a
//! thin list of instantiations:
//!
//! - [`tree`] (loom): L1–L4 on the real tree (decode append against a
//!   reader, a split, a removal, a racing append, a planned extension);
//! - [`gate`] (loom): gate-level torn-read models (a reader against a split,
//!   a demoting append, a pure append) and two racing appenders;
//! - [`grace`]: a precise grace-period reclaimer for the checkers, with a
//!   quarantining allocator that turns a premature free into a model failure;
//! - [`sweep`] (loom): the one-in-flight sweep scheduling of `SweepTrigger`;
//! - [`scenarios`] (shuttle): whole-tree scenarios checked against the
//!   reference model, and the decode storm with reader retry statistics.
//! - [`controls`]: negative controls, each run in a child process and
//!   caught only when the property the suite names for it fails.
//!
//! The library has no checker dependency: the test binary hands in its
//! checker's entry point ([`Explorer`], built by [`loom_explorer!`] or
//! [`shuttle_explorer!`]), and everything else uses the facade's primitives.
//! Every tree or gate these helpers build must therefore be created and
//! dropped inside a model run.
//!
//! Why the suites may run in parallel (the default test harness): the
//! checker reclaimer's state is per OS thread, and loom and shuttle run a
//! model's threads on the test's OS thread; a test that reads process-wide
//! statistics runs alone in a child process ([`alone`]).

pub mod controls;
#[cfg(crtc_loom)]
pub mod gate;
pub mod grace;
#[cfg(crtc_shuttle)]
pub mod scenarios;
pub mod suites;
#[cfg(crtc_loom)]
pub mod sweep;
#[cfg(crtc_loom)]
pub mod tree;

use crate::chain::{chain_hash, chained, tail_hash};
pub use crate::property::Property;
pub use controls::{child_request, Catch, Control, MutantGuard};
use crtc::tree::SweepPolicy;
use crtc::types::{
    ExternalSequenceBlockHash, KvCacheEventData, LocalBlockHash, OverlapScores, RouterEvent,
    WorkerWithDpRank,
};
use crtc::{EventOutcome, Lane, Tree, TreeConfig};
pub use crtc_strategies::mutants::Mutant;
use crtc_strategies::ShapeGate;
use rustc_hash::FxHashSet;
use std::process::Command;
use std::time::Instant;

/// Rank `worker`.0.
pub fn rank(worker: u64) -> WorkerWithDpRank {
    WorkerWithDpRank::new(worker, 0)
}

/// `worker` stores `locals` after the sequence `prefix` (parent = the
/// prefix's tail, the root when `prefix` is empty).
pub fn store(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let parent = tail_hash(prefix);
    RouterEvent::stored(rank(worker), parent, chained(parent, locals))
}

/// `worker` evicts the blocks `locals` that follow the sequence `prefix`, in
/// the order given.
pub fn remove(worker: u64, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    let hashes = chained(tail_hash(prefix), locals)
        .into_iter()
        .map(|b| b.external)
        .collect();
    RouterEvent::removed(rank(worker), hashes)
}

/// A query from raw local hashes.
pub fn query(locals: &[u64]) -> Vec<LocalBlockHash> {
    locals.iter().map(|&l| LocalBlockHash(l)).collect()
}

/// The external hashes of the sequence `locals` from the root.
pub fn sequence(locals: &[u64]) -> Vec<ExternalSequenceBlockHash> {
    let mut parent = None;
    locals
        .iter()
        .map(|&l| {
            let hash = chain_hash(parent, LocalBlockHash(l));
            parent = Some(hash);
            hash
        })
        .collect()
}

/// The configuration of the models' trees: few slots (the models use a
/// handful of ranks) and no scheduled stale-leaf sweeps (a sweep scheduled by
/// the clock would make executions nondeterministic; the models check the
/// store paths).
pub fn model_config(fast_path: bool) -> TreeConfig {
    TreeConfig {
        fast_path,
        slot_capacity: 8,
        sweep: SweepPolicy::disabled(),
    }
}

/// Applies `event` on `lane` and panics with the event if the tree rejects it.
pub fn apply_ok<G: ShapeGate>(
    tree: &Tree<G>,
    lane: &mut Lane<G>,
    event: &RouterEvent,
) -> EventOutcome {
    match tree.apply_event(lane, event) {
        Ok(outcome) => outcome,
        Err(e) => crate::violated!(Property::Accepted, "event {event:?} was rejected: {e}"),
    }
}

/// Whether an outcome is a store the fast path applied.
pub fn is_fast(outcome: &EventOutcome) -> bool {
    matches!(outcome, EventOutcome::Stored(s) if s.fast_path)
}

/// The scores of one query: the query's raw locals and the scores sorted by
/// rank.
pub type QueryScores = (Vec<u64>, Vec<(WorkerWithDpRank, u32)>);

/// Everything the serial-equivalence checks compare about a quiescent tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Per query (raw locals), the scores sorted by rank.
    pub scores: Vec<QueryScores>,
    /// `dump_events` with event ids zeroed, as sorted debug strings.
    pub dump: Vec<String>,
    /// `node_count`.
    pub nodes: usize,
}

/// Observes `tree`: scores of every query, the sorted dump and the node count.
pub fn observe<G: ShapeGate>(tree: &Tree<G>, queries: &[Vec<u64>]) -> Observation {
    let scores = queries
        .iter()
        .map(|q| (q.clone(), tree.find_matches(&query(q), false).sorted()))
        .collect();
    let mut dump: Vec<String> = tree
        .dump_events()
        .into_iter()
        .map(|mut e| {
            e.event.event_id = 0;
            format!("{e:?}")
        })
        .collect();
    dump.sort_unstable();
    Observation {
        scores,
        dump,
        nodes: tree.node_count(),
    }
}

/// Every interleaving of threads with `lens[i]` events each that keeps each
/// thread's own order, as sequences of thread indices.
pub fn interleavings(lens: &[usize]) -> Vec<Vec<usize>> {
    fn extend(left: &mut [usize], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left.iter().all(|&n| n == 0) {
            out.push(prefix.clone());
            return;
        }
        for thread in 0..left.len() {
            if left[thread] > 0 {
                left[thread] -= 1;
                prefix.push(thread);
                extend(left, prefix, out);
                prefix.pop();
                left[thread] += 1;
            }
        }
    }
    let mut out = Vec::new();
    extend(&mut lens.to_vec(), &mut Vec::new(), &mut out);
    out
}

/// A concurrent scenario: sequential setup events (each on a lane), then one
/// event list per thread (thread `i` owns lane `i`), and the queries its final
/// state is observed with.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Short name for reports.
    pub name: &'static str,
    /// `(lane, event)` applied in order before the threads start.
    pub setup: Vec<(usize, RouterEvent)>,
    /// The events of each thread, in order.
    pub threads: Vec<Vec<RouterEvent>>,
    /// Queries (raw locals) of the final-state observation.
    pub queries: Vec<Vec<u64>>,
}

impl Scenario {
    /// Bounds for reads that run while the threads' events apply.
    pub fn read_bounds(&self) -> ReadBounds {
        ReadBounds::new(
            self.setup.iter().map(|(_, e)| e),
            self.threads.iter().flatten(),
        )
    }

    /// A tree with `config` and one lane per thread, after the setup.
    pub fn prepare<G: ShapeGate>(&self, config: TreeConfig) -> (Tree<G>, Vec<Lane<G>>) {
        let tree = Tree::new(config);
        let mut lanes: Vec<Lane<G>> = self.threads.iter().map(|_| tree.new_lane()).collect();
        for (lane, event) in &self.setup {
            apply_ok(&tree, &mut lanes[*lane], event);
        }
        (tree, lanes)
    }

    /// The final state of every serial order of the threads' events (each
    /// thread's order kept) on fresh trees with the fast path off,
    /// deduplicated.
    pub fn serial_outcomes<G: ShapeGate>(&self) -> Vec<Observation> {
        let lens: Vec<usize> = self.threads.iter().map(Vec::len).collect();
        let mut outcomes: Vec<Observation> = Vec::new();
        for order in interleavings(&lens) {
            let (tree, mut lanes) = self.prepare::<G>(model_config(false));
            let mut next = vec![0; self.threads.len()];
            for thread in order {
                apply_ok(
                    &tree,
                    &mut lanes[thread],
                    &self.threads[thread][next[thread]],
                );
                next[thread] += 1;
            }
            let observed = observe(&tree, &self.queries);
            drop(lanes);
            drop(tree);
            if !outcomes.contains(&observed) {
                outcomes.push(observed);
            }
        }
        outcomes
    }
}

/// Environment variable through which a test hands itself to a child
/// process that runs it alone (see [`alone`]).
pub const ALONE_ENV: &str = "CRTC_ALONE_CHILD";

/// Runs `f` with the process to itself, for a test that reads process-wide
/// statistics (the gates' retry counters), which other tests' models bump
/// when the harness runs tests in parallel. In the child started for `test`
/// it runs `f`; otherwise it re-runs this test binary's test `test` alone in
/// a child process, prints the child's output, and panics if the child
/// failed.
pub fn alone(test: &str, f: impl FnOnce()) {
    if std::env::var(ALONE_ENV).is_ok_and(|t| t == test) {
        f();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE_ENV, test)
        .output()
        .expect("start the child test process");
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success(),
        "{test}, run alone in a child process, failed ({})",
        output.status
    );
}

/// A checker's entry point, supplied by the test binary (the library does
/// not depend on loom or shuttle): [`loom_explorer!`] or [`shuttle_explorer!`].
pub trait Explorer {
    /// Explores `f`: every execution loom's bounds allow, or the configured
    /// shuttle schedules. A failing check panics out of this call.
    /// Returns the number of executions or schedules.
    fn explore(&self, f: Box<dyn Fn() + Send + Sync>) -> u64;
    /// [`Explorer::explore`], stopping after `cap` executions if given (loom
    /// explores depth-first, so a capped run covers the prefix of the
    /// search). Checkers without a cap ignore it.
    fn explore_capped(&self, f: Box<dyn Fn() + Send + Sync>, cap: Option<u64>) -> u64 {
        let _ = cap;
        self.explore(f)
    }
    /// Runs `f` once inside the checker's runtime (single-threaded setup
    /// that needs the facade's primitives, e.g. serial outcomes).
    fn once(&self, f: Box<dyn Fn() + Send + Sync>);
    /// A short description of the bounds, for reports.
    fn bounds(&self) -> String;
}

/// Defines `struct $name` implementing [`Explorer`] over loom: the
/// preemption bound is `CRTC_LOOM_PREEMPTIONS`, else `LOOM_MAX_PREEMPTIONS`,
/// else 2; the branch limit is `LOOM_MAX_BRANCHES`, else 100 000 (one store
/// on the real tree is a few hundred loom operations, all counted); loom's
/// other `LOOM_*` variables apply. Use it in a test binary that has loom as
/// a dependency.
#[macro_export]
macro_rules! loom_explorer {
    ($name:ident) => {
        /// loom as the models' checker.
        #[derive(Clone, Copy, Debug, Default)]
        struct $name;

        impl $name {
            fn builder() -> ::loom::model::Builder {
                let mut builder = ::loom::model::Builder::new();
                if ::std::env::var("LOOM_MAX_BRANCHES").is_err() {
                    builder.max_branches = 100_000;
                }
                builder
            }
        }

        impl $crate::models::Explorer for $name {
            fn explore(&self, f: Box<dyn Fn() + Send + Sync>) -> u64 {
                $crate::models::Explorer::explore_capped(self, f, None)
            }
            fn explore_capped(&self, f: Box<dyn Fn() + Send + Sync>, cap: Option<u64>) -> u64 {
                let mut builder = Self::builder();
                builder.preemption_bound = Some($crate::models::preemption_bound());
                builder.max_permutations = cap.map(|c| c as usize);
                $crate::models::count_executions(move |f| builder.check(f), f)
            }
            fn once(&self, f: Box<dyn Fn() + Send + Sync>) {
                Self::builder().check(f);
            }
            fn bounds(&self) -> String {
                format!("preemption bound {}", $crate::models::preemption_bound())
            }
        }
    };
}

/// The loom preemption bound: `CRTC_LOOM_PREEMPTIONS`, else
/// `LOOM_MAX_PREEMPTIONS`, else 2.
pub fn preemption_bound() -> usize {
    ["CRTC_LOOM_PREEMPTIONS", "LOOM_MAX_PREEMPTIONS"]
        .iter()
        .find_map(|name| std::env::var(name).ok())
        .map(|v| v.trim().parse().expect("a preemption bound"))
        .unwrap_or(2)
}

thread_local! {
    /// Executions of the model being explored (the checkers run every
    /// modelled thread on the test's OS thread).
    static EXECUTIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs `check` (a checker's exploration of a closure) on `f`, counting the
/// executions it runs.
pub fn count_executions(
    check: impl FnOnce(Box<dyn Fn() + Send + Sync>),
    f: Box<dyn Fn() + Send + Sync>,
) -> u64 {
    EXECUTIONS.with(|c| c.set(0));
    check(Box::new(move || {
        EXECUTIONS.with(|c| c.set(c.get() + 1));
        f();
    }));
    EXECUTIONS.with(std::cell::Cell::get)
}

/// Runs `f` once under `explorer` and returns its result (handed out of the
/// checker's closure through a thread-local: the checkers run on the
/// caller's OS thread).
pub fn run_once<T: 'static>(
    explorer: &dyn Explorer,
    f: impl Fn() -> T + Send + Sync + 'static,
) -> T {
    thread_local! {
        static OUT: std::cell::RefCell<Option<Box<dyn std::any::Any>>> =
            const { std::cell::RefCell::new(None) };
    }
    explorer.once(Box::new(move || {
        let value = f();
        OUT.with(|o| *o.borrow_mut() = Some(Box::new(value)));
    }));
    OUT.with(|o| o.borrow_mut().take())
        .and_then(|v| v.downcast::<T>().ok())
        .map(|v| *v)
        .expect("the one-execution run ran")
}

/// [`summarize`], noting when the exploration stopped at `cap`.
pub fn summarize_capped(
    explorer: &dyn Explorer,
    cap: Option<u64>,
    explore: impl FnOnce() -> u64,
) -> String {
    let start = Instant::now();
    let executions = explore();
    let capped = match cap {
        Some(cap) if executions + 1 >= cap => format!(", capped at {cap} executions"),
        _ => String::new(),
    };
    format!(
        "{executions} executions in {:.1} s ({}{capped})",
        start.elapsed().as_secs_f64(),
        explorer.bounds()
    )
}

/// One named model of a test binary.
pub struct NamedModel {
    /// Short name (the negative controls' children find it by this).
    pub name: &'static str,
    /// What it checks, for reports.
    pub what: &'static str,
    /// Explores it; panics when a check fails; returns a summary
    /// (`"<n> executions in <t> s (<bounds>)"`).
    pub run: Box<dyn Fn() -> String>,
}

impl std::fmt::Debug for NamedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedModel")
            .field("name", &self.name)
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

/// Times `explore` and formats the usual summary.
pub fn summarize(explorer: &dyn Explorer, explore: impl FnOnce() -> u64) -> String {
    let start = Instant::now();
    let executions = explore();
    format!(
        "{executions} executions in {:.1} s ({})",
        start.elapsed().as_secs_f64(),
        explorer.bounds()
    )
}

/// The models of one test binary, for one gate.
#[derive(Debug)]
pub struct Suite {
    /// `"loom"` or `"shuttle"`.
    pub checker: &'static str,
    /// The gate's name in reports.
    pub gate: &'static str,
    /// The models.
    pub models: Vec<NamedModel>,
}

impl Suite {
    /// The model named `name`.
    pub fn model(&self, name: &str) -> &NamedModel {
        self.models
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no model {name} in the {} suite", self.gate))
    }

    /// Runs the model named `name` and prints
    /// `"<checker> model <gate> <name> (<what>): <summary>"`.
    pub fn report(&self, name: &str) {
        let model = self.model(name);
        let summary = (model.run)();
        println!(
            "{} model {} {} ({}): {summary}",
            self.checker, self.gate, model.name, model.what
        );
    }
}

/// Schedules of a shuttle exploration: random and PCT schedulers, each
/// seeded with every seed, `iters` schedules per (scheduler, seed).
#[derive(Clone, Debug)]
pub struct ShuttlePlan {
    /// Schedules per (scheduler, seed).
    pub iters: usize,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// PCT's bug depth.
    pub pct_depth: usize,
}

impl ShuttlePlan {
    /// `CRTC_SHUTTLE_ITERS` (default `default_iters`) schedules per
    /// scheduler and seed, seeds `CRTC_SHUTTLE_SEEDS` (default `1 2 3`),
    /// PCT depth 3.
    pub fn from_env(default_iters: usize) -> Self {
        Self::with_iters(env_number("CRTC_SHUTTLE_ITERS", default_iters))
    }

    /// `iters` schedules per scheduler and seed, seeds from the environment.
    pub fn with_iters(iters: usize) -> Self {
        let spec = std::env::var("CRTC_SHUTTLE_SEEDS").unwrap_or_else(|_| "1 2 3".to_string());
        let seeds = spec
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("CRTC_SHUTTLE_SEEDS: numbers"))
            .collect();
        Self {
            iters,
            seeds,
            pct_depth: 3,
        }
    }

    /// A description for reports.
    pub fn describe(&self) -> String {
        format!(
            "random + pct depth {}, seeds {:?}, {} each",
            self.pct_depth, self.seeds, self.iters
        )
    }
}

/// A numeric environment variable, or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: a number"))
        })
        .unwrap_or(default)
}

/// Defines `struct $name(ShuttlePlan)` implementing [`Explorer`] over
/// shuttle's random and PCT schedulers (every atomic is SeqCst under
/// shuttle, and its warning about that is silenced). Use it in a test
/// binary that has shuttle as a dependency.
#[macro_export]
macro_rules! shuttle_explorer {
    ($name:ident) => {
        /// shuttle as the models' checker.
        #[derive(Clone, Debug)]
        struct $name($crate::models::ShuttlePlan);

        impl $name {
            fn config() -> ::shuttle::Config {
                let mut config = ::shuttle::Config::new();
                config.stack_size = 0x40000;
                config.silence_warnings = true;
                config
            }
        }

        impl $crate::models::Explorer for $name {
            fn explore(&self, f: Box<dyn Fn() + Send + Sync>) -> u64 {
                use ::shuttle::scheduler::{PctScheduler, RandomScheduler};
                let f = ::crtc_strategies::sync::Arc::new(f);
                let mut total = 0u64;
                for &seed in &self.0.seeds {
                    for pct in [false, true] {
                        let start = ::std::time::Instant::now();
                        let run = ::crtc_strategies::sync::Arc::clone(&f);
                        let body = move || run();
                        let ran = if pct {
                            let scheduler =
                                PctScheduler::new_from_seed(seed, self.0.pct_depth, self.0.iters);
                            ::shuttle::Runner::new(scheduler, Self::config()).run(body)
                        } else {
                            let scheduler = RandomScheduler::new_from_seed(seed, self.0.iters);
                            ::shuttle::Runner::new(scheduler, Self::config()).run(body)
                        };
                        println!(
                            "  shuttle {} seed {seed}: {ran} schedules in {:.1} s",
                            if pct { "pct" } else { "random" },
                            start.elapsed().as_secs_f64()
                        );
                        total += ran as u64;
                    }
                }
                total
            }
            fn once(&self, f: Box<dyn Fn() + Send + Sync>) {
                let scheduler = ::shuttle::scheduler::RandomScheduler::new_from_seed(0, 1);
                ::shuttle::Runner::new(scheduler, Self::config()).run(f);
            }
            fn bounds(&self) -> String {
                self.0.describe()
            }
        }
    };
}

/// Bounds on a score read while events apply concurrently.
///
/// - ceiling (C1): the leading query blocks the rank has ever stored (the
///   setup plus every concurrent event);
/// - floor: the leading query blocks the rank stored in the setup and no event
///   evicts. The shape's coverage rules order every demotion so that a reader
///   never sees a covered slot uncovered (cutoff written before the bit
///   clears), so such a prefix is credited at every instant. The floor is
///   stricter than the read contract (which bounds concurrent reads from
///   above only); it holds for the RwLock gate by that rule.
#[derive(Clone, Debug, Default)]
pub struct ReadBounds {
    ranks: Vec<RankBounds>,
}

#[derive(Clone, Debug)]
struct RankBounds {
    rank: WorkerWithDpRank,
    ever: FxHashSet<ExternalSequenceBlockHash>,
    stable: FxHashSet<ExternalSequenceBlockHash>,
}

impl ReadBounds {
    /// Bounds for reads during `concurrent`, after `setup` applied.
    pub fn new<'a>(
        setup: impl IntoIterator<Item = &'a RouterEvent>,
        concurrent: impl IntoIterator<Item = &'a RouterEvent> + Clone,
    ) -> Self {
        let mut bounds = Self::default();
        for event in setup {
            if let KvCacheEventData::Stored { blocks, .. } = &event.event.data {
                let entry = bounds.entry(event.rank());
                entry.ever.extend(blocks.iter().map(|b| b.external));
                entry.stable.extend(blocks.iter().map(|b| b.external));
            }
        }
        for event in concurrent {
            let entry = bounds.entry(event.rank());
            match &event.event.data {
                KvCacheEventData::Stored { blocks, .. } => {
                    entry.ever.extend(blocks.iter().map(|b| b.external));
                }
                KvCacheEventData::Removed { block_hashes } => {
                    block_hashes.iter().for_each(|h| {
                        entry.stable.remove(h);
                    });
                }
                KvCacheEventData::Cleared => entry.stable.clear(),
            }
        }
        bounds
    }

    fn entry(&mut self, rank: WorkerWithDpRank) -> &mut RankBounds {
        let index = match self.ranks.iter().position(|r| r.rank == rank) {
            Some(index) => index,
            None => {
                self.ranks.push(RankBounds {
                    rank,
                    ever: FxHashSet::default(),
                    stable: FxHashSet::default(),
                });
                self.ranks.len() - 1
            }
        };
        &mut self.ranks[index]
    }

    /// `(floor, ceiling)` of `rank`'s score for `query`.
    pub fn range(&self, rank: WorkerWithDpRank, query: &[LocalBlockHash]) -> (usize, usize) {
        self.ranks
            .iter()
            .find(|r| r.rank == rank)
            .map_or((0, 0), |r| {
                (
                    prefix_within(query, &r.stable),
                    prefix_within(query, &r.ever),
                )
            })
    }

    /// Checks one read: every rank scored or known lies within its bounds.
    pub fn check(&self, query: &[LocalBlockHash], scores: &OverlapScores) -> Result<(), String> {
        let mut ranks: Vec<WorkerWithDpRank> = scores.scores.keys().copied().collect();
        ranks.extend(self.ranks.iter().map(|r| r.rank));
        ranks.sort_unstable();
        ranks.dedup();
        for rank in ranks {
            let (floor, ceiling) = self.range(rank, query);
            let score = scores.score(rank) as usize;
            if score > ceiling {
                return Err(format!(
                    "C1: rank {rank} scored {score} > {ceiling} (blocks it ever stored) for {query:?}"
                ));
            }
            if score < floor {
                return Err(format!(
                    "floor: rank {rank} scored {score} < {floor} (blocks it held throughout) for {query:?}"
                ));
            }
        }
        Ok(())
    }
}

/// Number of leading blocks of the query `locals` inside `blocks`.
pub fn prefix_within(
    locals: &[LocalBlockHash],
    blocks: &FxHashSet<ExternalSequenceBlockHash>,
) -> usize {
    let mut parent = None;
    for (depth, &local) in locals.iter().enumerate() {
        let hash = chain_hash(parent, local);
        if !blocks.contains(&hash) {
            return depth;
        }
        parent = Some(hash);
    }
    locals.len()
}
