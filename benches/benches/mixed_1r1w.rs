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
//! writer's rate, and the gate's own reader counters
//! (`ShapeGate::read_counters`): retries and fallbacks to the writers' lock
//! per read (the seqlock gate's optimistic restarts and pessimistic
//! fallbacks, the epoch gates' reads re-run under the node mutex), and
//! retired-but-not-freed bytes where the gate counts them (largest level
//! seen while the storm ran). The counters are process-wide and count
//! lookups only (the gates count the writer's plans apart).
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
//! Two ways of driving the writer, and which ids use which:
//! - direct (ids `<gate>/reader/...`): the writer thread applies its events
//!   to our tree itself; two busy threads, the reader and the writer.
//! - fed (ids `<gate>-fed/reader/...` and, with feature `upstream`,
//!   `upstream-1.6.1/reader/...`): the index runs behind one lane thread, as
//!   `crtc compare` runs it, and a feeder thread enqueues the writer's events
//!   (module `fed`); three busy threads on two cores. Upstream 1.6.1 accepts
//!   writes only through its lane thread, so only the fed ids compare our
//!   gates with upstream under the same driver; each line reports its
//!   writer's rate, which is not matched between the ids.
//!
//! A filter must keep both ids of a gate (`-- epoch` keeps the epoch
//! gates' pairs); a gate whose `no_writer` id is filtered out is skipped.
//! `python3 papers/bench-export.py` runs this group with repeats and writes
//! its table to papers/results/benches.md.
//!
//! Threads come from `crtc_strategies::sync::thread`; the stop flag and the
//! session number are facade atomics. The machine has two cores: the reader
//! and the writer each want one, so other load on the machine shows up here
//! first.

mod common;

use common::{call_bench, every_gate};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crtc::harness::TreeHooks;
use crtc::types::{
    BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank,
};
use crtc::{Lane, Tree, TreeConfig};
use crtc_strategies::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crtc_strategies::sync::{thread, Arc};
use crtc_strategies::{ReadCounters, ShapeGate};
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

/// The writer's state: its lane and the session it is on.
struct Writer<G: ShapeGate> {
    lane: Lane<G>,
    prefix_tail: Option<ExternalSequenceBlockHash>,
    session: u64,
    appends: u64,
    sweeps: u64,
}

/// Session `s`'s events under the system prompt ending at `prefix_tail`:
/// the prompt, the one-block decode stores, and the eviction of session
/// `s - 1` (tail first; none for session 0).
struct SessionEvents {
    prompt: RouterEvent,
    decodes: Vec<RouterEvent>,
    evict_previous: Option<RouterEvent>,
}

impl SessionEvents {
    fn new(prefix_tail: Option<ExternalSequenceBlockHash>, s: u64) -> Self {
        let chain: Vec<BlockPair> = chained(prefix_tail, &session_locals(s));
        let prompt = RouterEvent::stored(W, prefix_tail, chain[..PROMPT].to_vec());
        let decodes = (PROMPT..PROMPT + DECODE)
            .map(|i| RouterEvent::stored(W, Some(chain[i - 1].external), vec![chain[i]]))
            .collect();
        let evict_previous = (s > 0).then(|| {
            let old = chained(prefix_tail, &session_locals(s - 1));
            RouterEvent::removed(W, old.iter().rev().map(|b| b.external).collect())
        });
        Self {
            prompt,
            decodes,
            evict_previous,
        }
    }
}

/// Whether a stop was requested.
fn stopped(stop: Option<&AtomicBool>) -> bool {
    // Relaxed: a stop request needs no ordering.
    stop.is_some_and(|f| f.load(Ordering::Relaxed))
}

impl<G: ShapeGate> Writer<G> {
    /// Runs session `self.session`: prompt, publish, decode (until `stop`),
    /// then evicts the previous session and, like an indexer lane, runs a
    /// stale-leaf sweep if the tree's volume rule says one is due.
    fn session(&mut self, tree: &Tree<G>, current: &AtomicU64, stop: Option<&AtomicBool>) {
        let s = self.session;
        let events = SessionEvents::new(self.prefix_tail, s);
        tree.apply_event(&mut self.lane, &events.prompt)
            .expect("the session prompt applies");
        // Release: the reader that sees `s` finds its prompt stored.
        current.store(s, Ordering::Release);
        for decode in &events.decodes {
            if stopped(stop) {
                break;
            }
            tree.apply_event(&mut self.lane, decode)
                .expect("a decode store applies");
            self.appends += 1;
        }
        if let Some(evict) = &events.evict_previous {
            tree.apply_event(&mut self.lane, evict)
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
        session_query(&self.prefix, s, query);
    }
}

/// The query for session `s` (the system prompt `prefix`, then the
/// session's prompt) into `query`, without allocating.
fn session_query(prefix: &[LocalBlockHash], s: u64, query: &mut Vec<LocalBlockHash>) {
    query.clear();
    query.extend_from_slice(prefix);
    query.extend((0..PROMPT as u64).map(|i| LocalBlockHash(((s + 2) << 40) + i)));
}

/// What one reader id measured.
struct Reads {
    hist: Histogram,
    counters: ReadCounters,
    max_retired: Option<i64>,
}

impl Reads {
    fn p(&self, q: f64) -> u64 {
        self.hist.quantile(q)
    }

    fn is_empty(&self) -> bool {
        self.hist.total == 0
    }

    fn per_read(&self, n: u64) -> f64 {
        n as f64 / self.hist.total.max(1) as f64
    }
}

/// Benches the reader under `id` and returns its latency histogram and
/// the deltas of `counters` (the gate's reader counters). `lookup` scores a
/// query and returns the time the index's own lookup took (anything it
/// converts stays outside the clock).
fn bench_reader(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    counters: fn() -> ReadCounters,
    current: &AtomicU64,
    prefix: &[LocalBlockHash],
    lookup: impl Fn(&[LocalBlockHash]) -> Duration,
) -> Reads {
    let mut hist = Histogram::new();
    let before = counters();
    let mut max_retired = before.retired_bytes;
    let mut query = Vec::with_capacity(PREFIX + PROMPT);
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                // Acquire: pairs with the writer's publication of the session.
                let s = current.load(Ordering::Acquire);
                session_query(prefix, s, &mut query);
                let took = lookup(black_box(&query));
                total += took;
                hist.record(took);
                if i % SAMPLE_EVERY == 0 {
                    if let (Some(max), Some(now)) = (max_retired.as_mut(), counters().retired_bytes)
                    {
                        *max = (*max).max(now);
                    }
                }
            }
            total
        })
    });
    let counters = counters().since(before);
    Reads {
        hist,
        counters,
        max_retired,
    }
}

/// Times one of our tree's lookups.
fn timed_find<G: ShapeGate>(tree: &Tree<G>, query: &[LocalBlockHash]) -> Duration {
    let start = Instant::now();
    black_box(tree.find_matches(query, false));
    start.elapsed()
}

/// The reader's scores on session 0 are the fixture's: W's prefix and
/// prompt, and every rank.
fn check_scores(label: &str, best: &crtc::types::OverlapScores) {
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

/// The pair on our tree, driven directly: the writer applies its events on
/// its own thread (two busy threads: the reader and the writer).
fn bench_gate<G: ShapeGate>(c: &mut Criterion) {
    let label = G::NAME;
    let mut group = c.benchmark_group("mixed_1r1w");
    group.throughput(Throughput::Elements(1));
    let (fx, mut writer) = Fixture::<G>::build();
    let mut query = Vec::new();
    fx.query(0, &mut query);
    check_scores(label, &fx.tree.find_matches(&query, false));
    let lookup = |q: &[LocalBlockHash]| timed_find(&fx.tree, q);
    let alone = bench_reader(
        &mut group,
        BenchmarkId::new(label, "reader/no_writer"),
        G::read_counters,
        &fx.current,
        &fx.prefix,
        lookup,
    );
    if alone.is_empty() {
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
    writer.appends = 0;
    let (tree, current) = (Arc::clone(&fx.tree), Arc::clone(&fx.current));
    let handle = spawn_storm(writer, &stop, move |w, stop| {
        w.session(&tree, &current, Some(stop));
    });
    let storm = bench_reader(
        &mut group,
        BenchmarkId::new(label, "reader/decode_storm"),
        G::read_counters,
        &fx.current,
        &fx.prefix,
        lookup,
    );
    // Relaxed: see above.
    stop.store(true, Ordering::Relaxed);
    let (writer, ran) = handle.join().expect("the writer does not panic");
    group.finish();
    report_direct::<G>(&alone, &storm, &writer, ran, &fx.tree);
}

/// Prints the direct pair's storm line and its summary (ratios, the
/// writer's rate and counters, the reader's retries and retired bytes).
fn report_direct<G: ShapeGate>(
    alone: &Reads,
    storm: &Reads,
    writer: &Writer<G>,
    ran: Duration,
    tree: &Tree<G>,
) {
    let label = G::NAME;
    let counters = writer.lane.counters();
    let errors = counters.errors.get();
    assert_eq!(errors, 0, "{label}: a writer event failed");
    println!(
        "mixed_1r1w/{label}/reader/decode_storm: {}",
        storm.hist.summary()
    );
    println!(
        "mixed_1r1w/{label}: {}; writer {} decode appends in \
         {:.2} s ({:.2} M/s, {} sessions, {} sweeps, fast-path hits {}, {} nodes left){}{}",
        storm_ratios(alone, storm),
        writer.appends,
        ran.as_secs_f64(),
        writer.appends as f64 / ran.as_secs_f64() / 1e6,
        writer.session - 1,
        writer.sweeps,
        counters.fast_path_hits.get(),
        tree.node_count(),
        per_read(storm),
        match (
            alone.max_retired,
            storm.max_retired,
            G::read_counters().retired_bytes
        ) {
            (Some(a), Some(s), Some(end)) => format!(
                "; retired-not-freed bytes: max {a} alone, max {s} during the storm, {end} after"
            ),
            _ => String::new(),
        }
    );
}

/// "; per read: retries R, fallbacks F" of the storm's reader counters.
fn per_read(storm: &Reads) -> String {
    format!(
        "; per read: retries {:.4}, fallbacks {:.5}",
        storm.per_read(storm.counters.retries),
        storm.per_read(storm.counters.fallbacks)
    )
}

/// "p99 storm/alone R (p50 R, p99.9 R)".
fn storm_ratios(alone: &Reads, storm: &Reads) -> String {
    let ratio = |q: f64| storm.p(q) as f64 / alone.p(q).max(1) as f64;
    format!(
        "p99 storm/alone {:.2} (p50 {:.2}, p99.9 {:.2})",
        ratio(0.99),
        ratio(0.50),
        ratio(0.999)
    )
}

/// Runs `session` on a new thread until `stop`, after its first session
/// signals `started`; returns the join handle.
fn spawn_storm<W: Send + 'static>(
    mut writer: W,
    stop: &Arc<AtomicBool>,
    mut session: impl FnMut(&mut W, &AtomicBool) + Send + 'static,
) -> thread::JoinHandle<(W, Duration)> {
    let started = Arc::new(AtomicBool::new(false));
    let handle = {
        let (stop, started) = (Arc::clone(stop), Arc::clone(&started));
        thread::spawn(move || {
            let begin = Instant::now();
            // Relaxed: a flag with no data behind it.
            while !stop.load(Ordering::Relaxed) {
                session(&mut writer, &stop);
                started.store(true, Ordering::Relaxed);
            }
            (writer, begin.elapsed())
        })
    };
    // Relaxed: only waits until the storm runs.
    while !started.load(Ordering::Relaxed) {
        thread::yield_now();
    }
    handle
}

fn benches(c: &mut Criterion) {
    every_gate!(bench_gate(c));
    every_gate!(bench_fed_gate(c));
    #[cfg(feature = "upstream")]
    fed::bench(
        c,
        crtc_bench::compare::subjects::upstream::NAME,
        crtc_bench::compare::subjects::dynamo::build_pool_crtc(crtc_bench::compare::Setup {
            lanes: 1,
            fast_path: false,
            sweeping: true,
        }),
        None,
    );
}

/// The pair on our tree behind the crate's `Indexer` with one lane thread,
/// driven by the same feeder as upstream's (ids `<gate>-fed/...`).
fn bench_fed_gate<G: ShapeGate>(c: &mut Criterion) {
    let backend = crtc_bench::compare::subjects::backend::IndexerBackend::<G>::new(1, true);
    fed::bench(
        c,
        &format!("{}-fed", G::NAME),
        Arc::new(backend),
        Some(G::read_counters),
    );
}

/// The pair through an index's lane thread, as `crtc compare` runs every
/// row (`Backend`): upstream 1.6.1's `ConcurrentRadixTreeCompressed` behind
/// a one-lane `ThreadPoolIndexer` (feature `upstream`; its writes only go
/// through the lane thread), and each of our gates behind a one-lane
/// `Indexer`, so both sides of a ratio run the same way. The storm's feeder
/// enqueues each session's events and waits for the lane (`flush`) after
/// the prompt (before publishing the session) and at the session's end; the
/// lane thread applies them. Busy threads: the reader and the lane, plus
/// the feeder while it enqueues (a burst of memory copies per session):
/// three on two cores, so these ids are comparable with each other and not
/// with the direct ids above. The lanes of our indexer sweep as they do in
/// `crtc compare`; upstream's crate has no stale-leaf sweep. The reader
/// times the index's own `find_matches` (`Backend::timed_lookup`; upstream's
/// converted query outside the clock).
mod fed {
    use super::*;
    use crtc_bench::compare::subjects::backend::Backend;

    /// The storm's feeder: the indexer and the session it is on.
    struct Feeder {
        index: Arc<dyn Backend>,
        prefix_tail: Option<ExternalSequenceBlockHash>,
        session: u64,
        appends: u64,
    }

    impl Feeder {
        fn session(&mut self, current: &AtomicU64, stop: Option<&AtomicBool>) {
            let events = SessionEvents::new(self.prefix_tail, self.session);
            self.index.apply(events.prompt);
            self.index.flush();
            // Release: the reader that sees the session finds its prompt.
            current.store(self.session, Ordering::Release);
            for decode in events.decodes {
                if stopped(stop) {
                    break;
                }
                self.index.apply(decode);
                self.appends += 1;
            }
            if let Some(evict) = events.evict_previous {
                self.index.apply(evict);
            }
            self.index.flush();
            self.session += 1;
        }
    }

    /// The fixture of [`Fixture::build`] in `index`, and its feeder after
    /// session 0.
    fn build(index: Arc<dyn Backend>) -> (Feeder, Arc<AtomicU64>, Vec<LocalBlockHash>) {
        let prefix_locals = prefix_locals();
        let prefix = chained(None, &prefix_locals);
        let tail = prefix.last().map(|b| b.external);
        for r in 0..SHARERS {
            let rank = WorkerWithDpRank::new(100 + r, 0);
            index.apply(RouterEvent::stored(rank, None, prefix.clone()));
            if r < 2 {
                index.apply(RouterEvent::stored(
                    rank,
                    tail,
                    chained(tail, &[(1 << 60) + r]),
                ));
            }
        }
        index.apply(RouterEvent::stored(W, None, prefix));
        let mut feeder = Feeder {
            index,
            prefix_tail: tail,
            session: 0,
            appends: 0,
        };
        let current = Arc::new(AtomicU64::new(0));
        feeder.session(&current, None);
        (
            feeder,
            current,
            crtc_verification::chain::locals(&prefix_locals),
        )
    }

    /// Benches the pair on `index` under the ids `name/reader/...`;
    /// `counters` are the gate's reader counters (none for upstream).
    pub(super) fn bench(
        c: &mut Criterion,
        name: &str,
        index: Arc<dyn Backend>,
        counters: Option<fn() -> ReadCounters>,
    ) {
        let mut group = c.benchmark_group("mixed_1r1w");
        group.throughput(Throughput::Elements(1));
        let (mut feeder, current, prefix) = build(index);
        let mut query = Vec::new();
        session_query(&prefix, 0, &mut query);
        check_scores(name, &feeder.index.find_matches(&query));
        let index = Arc::clone(&feeder.index);
        let lookup = move |q: &[LocalBlockHash]| Duration::from_nanos(index.timed_lookup(q));
        let read_counters = counters.unwrap_or(ReadCounters::default);
        let id = |mode: &str| BenchmarkId::new(name, format!("reader/{mode}"));
        let alone = bench_reader(
            &mut group,
            id("no_writer"),
            read_counters,
            &current,
            &prefix,
            &lookup,
        );
        if alone.is_empty() {
            group.finish();
            return;
        }
        println!(
            "mixed_1r1w/{name}/reader/no_writer: {}",
            alone.hist.summary()
        );
        let stop = Arc::new(AtomicBool::new(false));
        feeder.appends = 0;
        let published = Arc::clone(&current);
        let handle = spawn_storm(feeder, &stop, move |f, stop| {
            f.session(&published, Some(stop));
        });
        let storm = bench_reader(
            &mut group,
            id("decode_storm"),
            read_counters,
            &current,
            &prefix,
            &lookup,
        );
        // Relaxed: see `spawn_storm`.
        stop.store(true, Ordering::Relaxed);
        let (feeder, ran) = handle.join().expect("the feeder does not panic");
        group.finish();
        report(name, &alone, &storm, &feeder, ran, counters.is_some());
    }

    /// Prints the fed pair's storm line and its summary (ratios, the
    /// feeder's rate and, for our gates, the reader's retries).
    fn report(
        name: &str,
        alone: &Reads,
        storm: &Reads,
        feeder: &Feeder,
        ran: Duration,
        gate: bool,
    ) {
        assert_eq!(feeder.index.stats().errors, 0, "{name}: an event failed");
        println!(
            "mixed_1r1w/{name}/reader/decode_storm: {}",
            storm.hist.summary()
        );
        println!(
            "mixed_1r1w/{name}: {}; writer {} decode appends in {:.2} s ({:.2} M/s, {} sessions){}",
            storm_ratios(alone, storm),
            feeder.appends,
            ran.as_secs_f64(),
            feeder.appends as f64 / ran.as_secs_f64() / 1e6,
            feeder.session - 1,
            if gate { per_read(storm) } else { String::new() },
        );
    }
}

criterion_group!(mixed_1r1w, benches);
criterion_main!(mixed_1r1w);
