//! One reader, one writer: `find_matches` latency under a decode storm.
//!
//! Group `mixed_1r1w`, ids `<gate>/reader/<writer>`: `no_writer` (the reader
//! alone) and `decode_storm` (one writer thread appending as fast as it can
//! on the leaf the reader's queries run through). One iteration is one
//! `find_matches`, timed on its own (`iter_custom`); each read's latency also
//! goes into a histogram, and after each id the bench prints the reader's
//! p50/p99/p99.9, mean and max (the timer's own cost, a few tens of ns, is in
//! every read; on a loaded machine the mean, which is criterion's time, sits
//! above p99 because preempted reads land in the top 1%), and after
//! the pair the p99 ratio (target ≤ 1.25 for the optimistic gates), the
//! writer's rate, the seqlock gate's optimistic restarts and pessimistic
//! fallbacks per read, the epoch gates' reads re-run under the writer mutex
//! per read, and the epoch reclaimers' retired-but-not-freed bytes (largest
//! level seen while the storm ran). The counters are process-wide; only this
//! reader and writer run, and the writer's own plans are a few per session.
//!
//! The tree (default configuration, fast path on): a shared system prompt of
//! [`PREFIX`] blocks held in full by the sharer ranks and the writer rank W,
//! made internal by two sharer continuations. Each writer *session* stores a
//! prompt of [`PROMPT`] new blocks under the system prompt (a new leaf: a
//! general store under an internal node), publishes the session number, then
//! makes [`DECODE`] one-block decode stores on that leaf's tail (fast path),
//! then evicts the previous session's blocks, tail first, and, as an indexer
//! lane does, runs a stale-leaf sweep when the tree's volume rule says one is
//! due. So the hot leaf is rebuilt every session, edges never grow past
//! `PROMPT + DECODE`, and the evicted sessions' holder-less leaves are
//! unlinked in batches (each sweep also changes the system-prompt node's
//! child map while the reader walks it).
//!
//! The reader's query for session `s` is the system prompt plus session `s`'s
//! prompt: it walks the system-prompt node and then the hot leaf (scores:
//! sharers `PREFIX`, W `PREFIX + PROMPT`), reading the leaf's coverage and
//! edge while the writer appends to it. Before timing each read, the reader
//! loads the current session (untimed) and builds its query. Without the
//! writer, the writer lane first runs one whole session on the bench thread
//! and the reader queries that session.
//!
//! A filter must keep both ids of a gate (`-- epoch` keeps the epoch
//! gates' pairs); a gate whose `no_writer` id is filtered out is skipped.
//!
//! Threads come from `crtc_strategies::sync::thread`; the stop flag and the
//! session number are facade atomics. The machine has two cores: the reader
//! and the writer each want one, so other load on the machine shows up here
//! first.

mod common;

use common::{call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::types::{BlockPair, LocalBlockHash, RouterEvent, WorkerWithDpRank};
use crtc::{Lane, Tree, TreeConfig};
use crtc_strategies::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::{ReadPath, ShapeGate};
use crtc_verification::chain::chained;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Blocks of the shared system prompt.
const PREFIX: usize = 32;
/// Prompt blocks of one writer session (the hot leaf at its creation).
const PROMPT: usize = 16;
/// One-block decode stores per writer session.
const DECODE: usize = 256;
/// Ranks that share the system prompt (besides W).
const SHARERS: u64 = 4;
/// Reads between two samples of the retired-bytes level.
const SAMPLE_EVERY: u64 = 64;

/// The writer rank.
const W: WorkerWithDpRank = WorkerWithDpRank::new(1, 0);

/// Local hashes of the system prompt.
fn prefix_locals() -> Vec<u64> {
    (0..PREFIX as u64).map(|i| (1 << 40) + i).collect()
}

/// Local hashes of session `s` (prompt, then decode blocks). Namespaces:
/// system prompt `1 << 40`, sessions `(s + 2) << 40`, the sharers'
/// continuations `1 << 60`; they never meet.
fn session_locals(s: u64) -> Vec<u64> {
    (0..(PROMPT + DECODE) as u64)
        .map(|i| ((s + 2) << 40) + i)
        .collect()
}

/// Log-linear latency histogram: exact below 128 ns, then 64 buckets per
/// power of two (about 1.5% resolution).
struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum_ns: u128,
    max_ns: u64,
}

impl Histogram {
    const LINEAR: u64 = 128;
    const SUB: u64 = 64;

    fn new() -> Self {
        Self {
            counts: vec![0; (Self::LINEAR + 57 * Self::SUB) as usize],
            total: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }

    fn bucket(ns: u64) -> usize {
        if ns < Self::LINEAR {
            return ns as usize;
        }
        let exp = 63 - u64::from(ns.leading_zeros()); // >= 7
        let mantissa = (ns >> (exp - 6)) & (Self::SUB - 1);
        (Self::LINEAR + (exp - 7) * Self::SUB + mantissa) as usize
    }

    /// The smallest value of bucket `i`.
    fn floor(i: usize) -> u64 {
        let i = i as u64;
        if i < Self::LINEAR {
            return i;
        }
        let exp = (i - Self::LINEAR) / Self::SUB + 7;
        let mantissa = (i - Self::LINEAR) % Self::SUB;
        (Self::SUB + mantissa) << (exp - 6)
    }

    fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.counts[Self::bucket(ns)] += 1;
        self.total += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    fn mean(&self) -> f64 {
        self.sum_ns as f64 / self.total.max(1) as f64
    }

    /// "N reads, p50 …, p99 …, p99.9 …, mean …, max …" (ns).
    fn summary(&self) -> String {
        format!(
            "{} reads, p50 {} ns, p99 {} ns, p99.9 {} ns, mean {:.0} ns, max {} ns",
            self.total,
            self.quantile(0.50),
            self.quantile(0.99),
            self.quantile(0.999),
            self.mean(),
            self.max_ns
        )
    }

    /// The `q`-quantile in ns (bucket floor).
    fn quantile(&self, q: f64) -> u64 {
        let rank = ((self.total as f64 * q).ceil() as u64).clamp(1, self.total.max(1));
        let mut seen = 0;
        for (i, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::floor(i);
            }
        }
        0
    }
}

/// Process-wide gate counters (zero for gates not compiled in).
#[derive(Clone, Copy, Debug, Default)]
struct GateCounters {
    seqlock_restarts: u64,
    seqlock_fallbacks: u64,
    epoch_read_fallbacks: u64,
}

impl GateCounters {
    fn now() -> Self {
        #[allow(unused_mut)]
        let mut c = Self::default();
        #[cfg(feature = "seqlock")]
        {
            use crtc_strategies::seqlock::{OPTIMISTIC_RESTARTS, PESSIMISTIC_FALLBACKS};
            c.seqlock_restarts = OPTIMISTIC_RESTARTS.get();
            c.seqlock_fallbacks = PESSIMISTIC_FALLBACKS.get();
        }
        #[cfg(feature = "epoch")]
        {
            c.epoch_read_fallbacks = crtc_strategies::epoch::READ_FALLBACKS.get();
        }
        c
    }

    fn since(self, before: Self) -> Self {
        Self {
            seqlock_restarts: self.seqlock_restarts - before.seqlock_restarts,
            seqlock_fallbacks: self.seqlock_fallbacks - before.seqlock_fallbacks,
            epoch_read_fallbacks: self.epoch_read_fallbacks - before.epoch_read_fallbacks,
        }
    }
}

/// Bytes the epoch gates retired and have not freed yet (`None` without the
/// `epoch` feature).
fn retired_bytes() -> Option<i64> {
    #[cfg(feature = "epoch")]
    return Some(crtc_strategies::epoch::retired_bytes());
    #[cfg(not(feature = "epoch"))]
    None
}

/// The writer's state: its lane and the session it is on.
struct Writer<G: ShapeGate> {
    lane: Lane<G>,
    prefix_tail: Option<crtc::types::ExternalSequenceBlockHash>,
    session: u64,
    appends: u64,
    sweeps: u64,
}

impl<G: ShapeGate> Writer<G> {
    /// Runs session `self.session`: prompt, publish, decode (until `stop`),
    /// then evicts the previous session and, like an indexer lane, runs a
    /// stale-leaf sweep if the tree's volume rule says one is due.
    fn session(&mut self, tree: &Tree<G>, current: &AtomicU64, stop: Option<&AtomicBool>) {
        let s = self.session;
        let chain: Vec<BlockPair> = chained(self.prefix_tail, &session_locals(s));
        let prompt = RouterEvent::stored(W, self.prefix_tail, chain[..PROMPT].to_vec());
        tree.apply_event(&mut self.lane, &prompt)
            .expect("the session prompt applies");
        // Release: the reader that sees `s` finds its prompt stored.
        current.store(s, Ordering::Release);
        for i in PROMPT..PROMPT + DECODE {
            // Relaxed: a stop request needs no ordering.
            if stop.is_some_and(|f| f.load(Ordering::Relaxed)) {
                break;
            }
            let decode = RouterEvent::stored(W, Some(chain[i - 1].external), vec![chain[i]]);
            tree.apply_event(&mut self.lane, &decode)
                .expect("a decode store applies");
            self.appends += 1;
        }
        if s > 0 {
            let old = chained(self.prefix_tail, &session_locals(s - 1));
            let hashes = old.iter().rev().map(|b| b.external).collect();
            tree.apply_event(&mut self.lane, &RouterEvent::removed(W, hashes))
                .expect("evicting the previous session applies");
        }
        if let Some(claim) = tree.sweep_due_by_volume() {
            tree.fold_tally(&mut self.lane, true);
            tree.run_sweep(claim);
            self.sweeps += 1;
        }
        self.session += 1;
    }
}

/// The tree, the sharers' lane, the published session and the system prompt.
struct Fixture<G: ShapeGate> {
    tree: Arc<Tree<G>>,
    _sharers: Lane<G>,
    current: Arc<AtomicU64>,
    prefix: Vec<LocalBlockHash>,
}

impl<G: ShapeGate> Fixture<G> {
    /// The fixture and a writer that has run session 0.
    fn build() -> (Self, Writer<G>) {
        let tree = Arc::new(Tree::<G>::new(TreeConfig::default()));
        let mut sharers = tree.new_lane();
        let mut lane = tree.new_lane();
        let prefix_locals = prefix_locals();
        let prefix = chained(None, &prefix_locals);
        let tail = prefix.last().map(|b| b.external);
        for r in 0..SHARERS {
            let rank = WorkerWithDpRank::new(100 + r, 0);
            let event = RouterEvent::stored(rank, None, prefix.clone());
            tree.apply_event(&mut sharers, &event).expect("build");
            // Two sharer continuations make the system prompt internal.
            if r < 2 {
                let next = chained(tail, &[(1 << 60) + r]);
                let event = RouterEvent::stored(rank, tail, next);
                tree.apply_event(&mut sharers, &event).expect("build");
            }
        }
        let event = RouterEvent::stored(W, None, prefix);
        tree.apply_event(&mut lane, &event).expect("build");
        let mut writer = Writer {
            lane,
            prefix_tail: tail,
            session: 0,
            appends: 0,
            sweeps: 0,
        };
        let current = Arc::new(AtomicU64::new(0));
        writer.session(&tree, &current, None);
        let internal = tree.topology().iter().filter(|n| n.internal).count();
        assert_eq!(internal, 1, "the system prompt is the only internal node");
        let leaves = tree.topology().iter().filter(|n| n.children == 0).count();
        assert_eq!(leaves, 3, "two continuations and the session's leaf");
        let fx = Self {
            tree,
            _sharers: sharers,
            current,
            prefix: crtc_verification::chain::locals(&prefix_locals),
        };
        (fx, writer)
    }

    /// The query for session `s` into `query`.
    fn query(&self, s: u64, query: &mut Vec<LocalBlockHash>) {
        query.clear();
        query.extend_from_slice(&self.prefix);
        // The first `PROMPT` of `session_locals(s)`, without allocating.
        query.extend((0..PROMPT as u64).map(|i| LocalBlockHash(((s + 2) << 40) + i)));
    }
}

/// What one reader id measured.
struct Reads {
    hist: Histogram,
    counters: GateCounters,
    max_retired: Option<i64>,
}

impl Reads {
    fn p(&self, q: f64) -> u64 {
        self.hist.quantile(q)
    }

    fn per_read(&self, n: u64) -> f64 {
        n as f64 / self.hist.total.max(1) as f64
    }
}

/// Benches the reader under `id` and returns its latency histogram and
/// counter deltas.
fn bench_reader<G: ShapeGate>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    fx: &Fixture<G>,
) -> Reads {
    let mut hist = Histogram::new();
    let mut max_retired = retired_bytes();
    let before = GateCounters::now();
    let mut query = Vec::with_capacity(PREFIX + PROMPT);
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                // Acquire: pairs with the writer's publication of the session.
                let s = fx.current.load(Ordering::Acquire);
                fx.query(s, &mut query);
                let start = Instant::now();
                black_box(fx.tree.find_matches(black_box(&query), false));
                let took = start.elapsed();
                total += took;
                hist.record(took);
                if i % SAMPLE_EVERY == 0 {
                    if let (Some(max), Some(now)) = (max_retired.as_mut(), retired_bytes()) {
                        *max = (*max).max(now);
                    }
                }
            }
            total
        })
    });
    let counters = GateCounters::now().since(before);
    Reads {
        hist,
        counters,
        max_retired,
    }
}

fn bench_gate<G: ShapeGate>(c: &mut Criterion) {
    let label = G::NAME;
    let mut group = c.benchmark_group("mixed_1r1w");
    group.throughput(Throughput::Elements(1));
    let (fx, mut writer) = Fixture::<G>::build();

    // The reader alone, on session 0.
    {
        let mut query = Vec::new();
        fx.query(0, &mut query);
        let best = fx.tree.find_matches(&query, false);
        assert_eq!(
            best.score(W),
            (PREFIX + PROMPT) as u32,
            "{label}: W's score"
        );
        assert_eq!(
            best.scores.len(),
            1 + SHARERS as usize,
            "{label}: every rank scores"
        );
    }
    let alone = bench_reader(&mut group, BenchmarkId::new(label, "reader/no_writer"), &fx);
    if alone.hist.total == 0 {
        // A filter left this gate out; the storm is only read as a pair.
        group.finish();
        return;
    }
    println!(
        "mixed_1r1w/{label}/reader/no_writer: {}",
        alone.hist.summary()
    );

    // The reader under a decode storm.
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    writer.appends = 0;
    let handle = {
        let (tree, current, stop, started) = (
            Arc::clone(&fx.tree),
            Arc::clone(&fx.current),
            Arc::clone(&stop),
            Arc::clone(&started),
        );
        thread::spawn(move || {
            let begin = Instant::now();
            // Relaxed: a flag with no data behind it.
            while !stop.load(Ordering::Relaxed) {
                writer.session(&tree, &current, Some(&stop));
                started.store(true, Ordering::Relaxed);
            }
            (writer, begin.elapsed())
        })
    };
    // Relaxed: only waits until the storm runs.
    while !started.load(Ordering::Relaxed) {
        thread::yield_now();
    }
    let storm = bench_reader(
        &mut group,
        BenchmarkId::new(label, "reader/decode_storm"),
        &fx,
    );
    // Relaxed: see above.
    stop.store(true, Ordering::Relaxed);
    let (writer, ran) = handle.join().expect("the writer does not panic");
    group.finish();

    let counters = writer.lane.counters();
    let errors = counters.errors.get();
    assert_eq!(errors, 0, "{label}: a writer event failed");
    println!(
        "mixed_1r1w/{label}/reader/decode_storm: {}",
        storm.hist.summary()
    );
    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    println!(
        "mixed_1r1w/{label}: p99 storm/alone {:.2} (p50 {:.2}, p99.9 {:.2}); writer {} decode appends in \
         {:.2} s ({:.2} M/s, {} sessions, {} sweeps, fast-path hits {}, {} nodes left); per read: seqlock restarts {:.4}, \
         fallbacks {:.5}, epoch locked re-reads {:.5}{}",
        ratio(storm.p(0.99), alone.p(0.99)),
        ratio(storm.p(0.50), alone.p(0.50)),
        ratio(storm.p(0.999), alone.p(0.999)),
        writer.appends,
        ran.as_secs_f64(),
        writer.appends as f64 / ran.as_secs_f64() / 1e6,
        writer.session - 1,
        writer.sweeps,
        counters.fast_path_hits.get(),
        fx.tree.node_count(),
        storm.per_read(storm.counters.seqlock_restarts),
        storm.per_read(storm.counters.seqlock_fallbacks),
        storm.per_read(storm.counters.epoch_read_fallbacks),
        match (alone.max_retired, storm.max_retired, retired_bytes()) {
            (Some(a), Some(s), Some(end)) if G::READ_PATH == ReadPath::Snapshot => format!(
                "; retired-not-freed bytes: max {a} alone, max {s} during the storm, {end} after"
            ),
            _ => String::new(),
        }
    );
    drop(fx);
}

fn benches(c: &mut Criterion) {
    every_gate!(bench_gate(c));
}

criterion_group!(mixed_1r1w, benches);
criterion_main!(mixed_1r1w);
