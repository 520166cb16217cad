//! `crtc compare`: one workload replayed through every compiled gate with
//! the decode fast path on and off, plus a global-lock baseline, in write
//! capacity and/or keep-up mode, each run checked against the reference
//! model (DESIGN §11, reference/upstream-benches.md §3.5–§3.7, §9.4).
//!
//! Flow of [`run`]: load or generate the stream once ([`load_workload`]);
//! split it into writes and lookups ([`plan::Plan`]); replay it serially
//! through the reference model once ([`oracle::Oracle`]); with
//! `--check-upstream`, run the serial cross-check (`check_upstream`); then
//! for every row of [`configurations`] build a fresh backend, measure it
//! ([`capacity::run`], [`keepup::run`], with the seqlock retry counters read
//! around the run), and after a capacity run time the same lookups on the
//! drained final tree with no writer ([`capacity::read_only`]) and score
//! every distinct lookup against the model. The result is a [`Report`]: a
//! table for stdout, a JSON document, charts ([`plots`]).
//!
//! Adding a gate is one line in [`gates`]. With feature `upstream`, NVIDIA
//! Dynamo's published CRTC is one more row ([`upstream`]) and the peer of
//! the serial cross-check ([`crosscheck`], `--check-upstream`). [`plots`]
//! draws the SVG charts of `--plots`; [`paper`] writes `papers/results/`.

pub mod backend;
pub mod baseline;
pub mod capacity;
pub mod crosscheck;
pub mod keepup;
pub mod measure;
pub mod oracle;
pub mod paper;
pub mod plan;
pub mod plots;
pub mod report;
#[cfg(feature = "upstream")]
pub mod upstream;
pub mod validate;

pub use report::{Report, Row, REPORT_KEYS, ROW_KEYS};

use backend::{Backend, BackendStats, IndexerBackend};
use baseline::GlobalLockIndexer;
use crosscheck::{CrossCheck, SerialIndex};
use crtc::tree::{Lane, Refusal, Tree, TreeConfig};
use crtc::types::{LocalBlockHash, OverlapScores, RouterEvent, WorkerId};
use crtc_strategies::sync::Arc;
use crtc_strategies::ShapeGate;
use crtc_verification::workload::presets::{self, agentx_placement};
use crtc_verification::workload::{jsonl, mooncake, EngineConfig, RandomPlacement, Workload};
use indicatif::{ProgressBar, ProgressStyle};
use oracle::{Oracle, Verdicts};
use plan::Plan;
use report::{Settings, WorkloadInfo};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Scale of the built-in preset when none is given: the default run (three
/// capacity rows on 2 cores) then takes well under a minute in release.
pub const DEFAULT_SCALE: f64 = 1.0;
/// Default keep-up offered rate, events per second.
pub const DEFAULT_RATE: f64 = 20_000.0;
/// Default keep-up window.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5);
/// Most simulated workers (one rank slot each).
pub const MAX_WORKERS: usize = crtc_strategies::MAX_SLOTS;
/// Default seed.
pub const DEFAULT_SEED: u64 = 1;
/// Most differences `--check-upstream` lists by default.
pub const DEFAULT_CHECK_LIMIT: usize = 200;

/// Cargo features this binary was built with, in a fixed order.
pub fn features() -> Vec<String> {
    [
        ("rwlock", cfg!(feature = "rwlock")),
        ("seqlock", cfg!(feature = "seqlock")),
        ("epoch", cfg!(feature = "epoch")),
        ("seize", cfg!(feature = "seize")),
        ("upstream", cfg!(feature = "upstream")),
    ]
    .into_iter()
    .filter(|(_, on)| *on)
    .map(|(name, _)| name.to_owned())
    .collect()
}

/// Where the stream comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A built-in preset ("chat" or "agentx").
    Preset(String),
    /// A Mooncake JSONL request trace run through the engine model.
    Trace(PathBuf),
    /// A recorded event stream (JSON lines, see [`crtc_verification::workload::jsonl`]).
    Events(PathBuf),
}

/// Which measurements to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Write capacity only.
    Capacity,
    /// Keep-up latency only.
    KeepUp,
    /// Both, capacity first.
    Both,
}

impl Mode {
    fn capacity(self) -> bool {
        matches!(self, Mode::Capacity | Mode::Both)
    }

    fn keepup(self) -> bool {
        matches!(self, Mode::KeepUp | Mode::Both)
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Capacity => "capacity",
            Mode::KeepUp => "keepup",
            Mode::Both => "both",
        }
    }
}

/// Everything `crtc compare` takes.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The stream.
    pub source: Source,
    /// Seed of presets, placement and output tokens.
    pub seed: u64,
    /// Preset size multiplier.
    pub scale: f64,
    /// Lane threads per row.
    pub lanes: usize,
    /// Reader threads per row.
    pub readers: usize,
    /// Simulated workers (presets and traces; engine default when `None`).
    pub workers: Option<usize>,
    /// Per-worker cache capacity in blocks (presets and traces).
    pub capacity: Option<usize>,
    /// Which measurements.
    pub mode: Mode,
    /// Keep-up offered rate, events per second.
    pub rate: f64,
    /// Keep-up window.
    pub window: Duration,
    /// Draw progress bars (on stderr).
    pub progress: bool,
    /// The command line, recorded in the report.
    pub argv: Vec<String>,
    /// Also run the serial cross-check against upstream (feature `upstream`).
    pub check_upstream: bool,
    /// Most differences the cross-check lists.
    pub check_limit: usize,
    /// Accept an event file that breaks the chaining rule; the reference
    /// model's verdicts are then not computed.
    pub unchained: bool,
}

impl Default for CompareOptions {
    /// The default run: built-in agentx preset, capacity mode, 2 lanes, 1
    /// reader.
    fn default() -> Self {
        Self {
            source: Source::Preset("agentx".to_owned()),
            seed: DEFAULT_SEED,
            scale: DEFAULT_SCALE,
            lanes: 2,
            readers: 1,
            workers: None,
            capacity: None,
            mode: Mode::Capacity,
            rate: DEFAULT_RATE,
            window: DEFAULT_WINDOW,
            progress: false,
            argv: Vec::new(),
            check_upstream: false,
            check_limit: DEFAULT_CHECK_LIMIT,
            unchained: false,
        }
    }
}

/// A failure to run: bad options, an unreadable or malformed file, a thread
/// that could not start. The message names the file and line when there is
/// one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareError(pub String);

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CompareError {}

impl From<String> for CompareError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

/// Builds a backend with `lanes` lanes and the fast path on or off.
pub type Build = fn(lanes: usize, fast_path: bool) -> Arc<dyn Backend>;

/// Builds a serially applied tree (label, fast path) for the cross-check.
pub type BuildSerial = fn(label: String, fast_path: bool) -> Box<dyn SerialIndex>;

/// Reads of the optimistic-read counters: (restarts, pessimistic fallbacks).
pub type RetryCounters = fn() -> (u64, u64);

/// How a strategy's readers synchronize with its writers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPath {
    /// Readers take a lock (shared or exclusive).
    Lock,
    /// Readers run optimistically and validate a version (seqlock).
    Optimistic,
    /// Readers follow a published snapshot (epoch/RCU).
    Snapshot,
}

impl ReadPath {
    /// "lock", "optimistic" or "snapshot".
    pub fn name(self) -> &'static str {
        match self {
            ReadPath::Lock => "lock",
            ReadPath::Optimistic => "optimistic",
            ReadPath::Snapshot => "snapshot",
        }
    }
}

/// One compiled gate.
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    /// The row's strategy name ([`ShapeGate::NAME`], with the reclaimer for
    /// the epoch gates).
    pub name: &'static str,
    /// Its indexer.
    pub build: Build,
    /// Its tree applied serially.
    pub serial: BuildSerial,
    /// How its readers synchronize.
    pub read_path: ReadPath,
    /// Its optimistic-read counters, if it has any.
    pub retries: Option<RetryCounters>,
}

fn build_indexer<G: ShapeGate>(lanes: usize, fast_path: bool) -> Arc<dyn Backend> {
    Arc::new(IndexerBackend::<G>::new(lanes, fast_path))
}

fn build_baseline(lanes: usize, _fast_path: bool) -> Arc<dyn Backend> {
    Arc::new(GlobalLockIndexer::new(lanes))
}

/// A [`Tree`] with one [`Lane`], applied on the caller's thread.
struct SerialTree<G: ShapeGate> {
    label: String,
    tree: Tree<G>,
    lane: Lane<G>,
}

impl<G: ShapeGate> SerialIndex for SerialTree<G> {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn apply(&mut self, event: &RouterEvent) {
        // A rejected event leaves the tree unchanged; the scores tell.
        let _ = self.tree.apply_event(&mut self.lane, event);
    }

    fn remove_worker(&mut self, worker: WorkerId) {
        self.tree.remove_worker(&mut [&mut self.lane], worker);
    }

    fn find_matches(&mut self, query: &[LocalBlockHash]) -> OverlapScores {
        self.tree.find_matches(query, false)
    }
}

fn build_serial<G: ShapeGate>(label: String, fast_path: bool) -> Box<dyn SerialIndex> {
    let tree = Tree::<G>::new(TreeConfig {
        fast_path,
        ..TreeConfig::default()
    });
    let lane = tree.new_lane();
    Box::new(SerialTree { label, tree, lane })
}

#[cfg(feature = "seqlock")]
fn seqlock_retries() -> (u64, u64) {
    use crtc_strategies::seqlock::{OPTIMISTIC_RESTARTS, PESSIMISTIC_FALLBACKS};
    (OPTIMISTIC_RESTARTS.get(), PESSIMISTIC_FALLBACKS.get())
}

macro_rules! gate {
    ($gate:ty, $name:expr, $path:expr, $retries:expr) => {
        Gate {
            name: $name,
            build: build_indexer::<$gate>,
            serial: build_serial::<$gate>,
            read_path: $path,
            retries: $retries,
        }
    };
}

/// Every compiled gate, in report order. A new gate is one line here,
/// behind its feature. The two epoch gates share [`ShapeGate::NAME`], so
/// their rows name the reclaimer.
pub fn gates() -> Vec<Gate> {
    use crtc_strategies::RwLockGate;
    vec![
        gate!(RwLockGate, RwLockGate::NAME, ReadPath::Lock, None),
        #[cfg(feature = "seqlock")]
        gate!(
            crtc_strategies::SeqlockGate,
            <crtc_strategies::SeqlockGate as ShapeGate>::NAME,
            ReadPath::Optimistic,
            Some(seqlock_retries as RetryCounters)
        ),
        #[cfg(feature = "epoch")]
        gate!(
            crtc_strategies::CrossbeamEpochGate,
            "epoch-crossbeam",
            ReadPath::Snapshot,
            None
        ),
        #[cfg(feature = "seize")]
        gate!(
            crtc_strategies::SeizeEpochGate,
            "epoch-seize",
            ReadPath::Snapshot,
            None
        ),
    ]
}

/// One row of the comparison before it is measured.
#[derive(Clone, Copy, Debug)]
pub struct Configuration {
    /// Gate name, "global-lock" or the upstream row's name.
    pub strategy: &'static str,
    /// Fast path on/off (`None`: no switch).
    pub fast_path: Option<bool>,
    /// Its backend.
    pub build: Build,
    /// How its readers synchronize.
    pub read_path: ReadPath,
    /// Its optimistic-read counters, if it has any.
    pub retries: Option<RetryCounters>,
}

impl Configuration {
    /// "rwlock fast", "rwlock general" or "global-lock".
    pub fn label(&self) -> String {
        report::label(self.strategy, self.fast_path)
    }
}

/// Every gate with the fast path on, then off, then the global-lock
/// baseline, then (feature `upstream`) upstream's CRTC.
pub fn configurations() -> Vec<Configuration> {
    let mut all: Vec<Configuration> = gates()
        .into_iter()
        .flat_map(|gate| {
            [true, false].map(|fast| Configuration {
                strategy: gate.name,
                fast_path: Some(fast),
                build: gate.build,
                read_path: gate.read_path,
                retries: gate.retries,
            })
        })
        .collect();
    all.push(Configuration {
        strategy: "global-lock",
        fast_path: None,
        build: build_baseline,
        read_path: ReadPath::Lock,
        retries: None,
    });
    #[cfg(feature = "upstream")]
    all.push(Configuration {
        strategy: upstream::NAME,
        fast_path: None,
        build: upstream::build,
        read_path: ReadPath::Lock,
        retries: None,
    });
    all
}

/// Every compiled gate with the fast path on and off, applied serially (the
/// "ours" side of the cross-check).
pub fn serial_trees() -> Vec<Box<dyn SerialIndex>> {
    gates()
        .into_iter()
        .flat_map(|gate| {
            [true, false].map(|fast| (gate.serial)(report::label(gate.name, Some(fast)), fast))
        })
        .collect()
}

/// The serial cross-check of `workload` against upstream's CRTC.
#[cfg(feature = "upstream")]
pub fn check_upstream(workload: &Workload, limit: usize) -> CrossCheck {
    crosscheck::cross_check(
        workload,
        Box::new(upstream::SerialUpstream::new()),
        serial_trees(),
        limit,
    )
}

fn run_check(workload: &Workload, limit: usize) -> Result<CrossCheck, CompareError> {
    #[cfg(feature = "upstream")]
    return Ok(check_upstream(workload, limit));
    #[cfg(not(feature = "upstream"))]
    {
        let _ = (workload, limit);
        Err(CompareError(UPSTREAM_MISSING.to_owned()))
    }
}

/// Why `--check-upstream` fails in a build without feature `upstream`.
pub const UPSTREAM_MISSING: &str =
    "--check-upstream needs the upstream crate: rebuild with `--features upstream`";

fn file_error(path: &Path, error: crtc::types::KvError) -> CompareError {
    match error {
        crtc::types::KvError::Malformed { line: 0, reason } => CompareError(reason),
        crtc::types::KvError::Malformed { line, reason } => {
            CompareError(format!("{}: line {line}: {reason}", path.display()))
        }
        other => CompareError(format!("{}: {other}", path.display())),
    }
}

fn engine_config(options: &CompareOptions) -> EngineConfig {
    let default = EngineConfig::default();
    EngineConfig {
        workers: options.workers.unwrap_or(default.workers),
        capacity_blocks: options.capacity.unwrap_or(default.capacity_blocks),
        seed: options.seed,
    }
}

/// Generates or loads the stream `options` names.
pub fn load_workload(options: &CompareOptions) -> Result<Workload, CompareError> {
    let (seed, scale, config) = (options.seed, options.scale, engine_config(options));
    match &options.source {
        Source::Preset(name) => match name.as_str() {
            "chat" => Ok(presets::chat_with(
                seed,
                scale,
                config,
                RandomPlacement::new(seed),
            )),
            "agentx" => Ok(presets::agentx_with(
                seed,
                scale,
                config,
                agentx_placement(seed),
            )),
            other => Err(CompareError(format!(
                "unknown workload {other:?} (expected one of: {})",
                presets::PRESETS.join(", ")
            ))),
        },
        Source::Trace(path) => {
            mooncake::load_mooncake(path, config).map_err(|e| file_error(path, e))
        }
        Source::Events(path) => {
            if options.workers.is_some() || options.capacity.is_some() {
                return Err(CompareError(
                    "--workers and --capacity shape generated streams; they do not apply to --events".to_owned(),
                ));
            }
            let file = std::fs::File::open(path)
                .map_err(|e| CompareError(format!("cannot open {}: {e}", path.display())))?;
            let mut name = format!(
                "events:{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            let chaining = if options.unchained {
                name.push_str(" (--unchained: the reference model's verdicts do not apply)");
                jsonl::Chaining::Unchecked
            } else {
                jsonl::Chaining::Checked
            };
            jsonl::read_jsonl_with(std::io::BufReader::new(file), &name, chaining)
                .map_err(|e| file_error(path, e))
        }
    }
}

/// Rejects options no run can use.
pub fn validate(options: &CompareOptions) -> Result<(), CompareError> {
    let bad = |message: &str| Err(CompareError(message.to_owned()));
    if !(options.scale > 0.0 && options.scale <= 1000.0) {
        return bad("--scale must be above 0 and at most 1000");
    }
    if !(1..=256).contains(&options.lanes) {
        return bad("--lanes must be between 1 and 256");
    }
    if options.readers > 256 {
        return bad("--readers must be at most 256");
    }
    if !options
        .workers
        .is_none_or(|w| (1..=MAX_WORKERS).contains(&w))
    {
        return bad("--workers must be between 1 and 65536");
    }
    if options.capacity == Some(0) {
        return bad("--capacity must be at least 1 block");
    }
    if !(options.rate.is_finite() && options.rate > 0.0) {
        return bad("--rate must be a positive number of events per second");
    }
    if options.window.is_zero() || options.window > Duration::from_secs(3600) {
        return bad("--window-s must be above 0 and at most 3600");
    }
    if options.check_upstream && !cfg!(feature = "upstream") {
        return bad(UPSTREAM_MISSING);
    }
    Ok(())
}

fn progress_bar(enabled: bool, message: String) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0).with_message(message);
    if let Ok(style) = ProgressStyle::with_template("{msg:28} [{bar:40}] {pos}/{len} {elapsed}") {
        bar.set_style(style);
    }
    bar
}

fn per_s(count: u64, elapsed: Duration) -> Option<f64> {
    let s = elapsed.as_secs_f64();
    (s > 0.0).then(|| count as f64 / s)
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

/// A row with the figures common to both modes filled from `stats`;
/// `memberships` is the model's (rank, block) count for the final state.
fn base_row(
    config: &Configuration,
    mode: &str,
    stats: &BackendStats,
    memberships: Option<u64>,
) -> Row {
    let bytes_per = |count: u64| ratio(stats.footprint? as u64, count);
    Row {
        strategy: config.strategy.to_owned(),
        fast_path: config.fast_path,
        mode: mode.to_owned(),
        events: 0,
        blocks: 0,
        events_per_s: None,
        block_ops_per_s: None,
        cpu_ns_per_event: ratio(stats.cpu_ns, stats.applied),
        fast_path_hit_rate: stats
            .fast_path_hits
            .map(|hits| ratio(hits, stats.stores).unwrap_or(0.0)),
        read_p50_ns: None,
        read_p99_ns: None,
        update_p50_ns: None,
        update_p99_ns: None,
        backlog_at_end: None,
        bytes_per_membership: memberships.and_then(bytes_per),
        overcounts: None,
        undercounts: None,
        read_only_p50_ns: None,
        read_only_p99_ns: None,
        restarts_per_read: None,
        fallbacks: None,
        read_path: config.read_path.name().to_owned(),
        lookups: 0,
        hole_undercounts: None,
        bytes_per_node_membership: stats.memberships.and_then(|m| bytes_per(m as u64)),
        rejected_events: stats.errors,
        rejected: Refusal::ALL
            .into_iter()
            .filter(|r| stats.refusals[r.index()] > 0)
            .map(|r| (r.name().to_owned(), stats.refusals[r.index()]))
            .collect(),
        elapsed_s: 0.0,
        cpu_clock: stats.cpu_clock,
        read_samples: 0,
    }
}

/// Optimistic-read counter deltas over a run: restarts per lookup and
/// fallbacks (`None` for gates without the counters).
struct Retries {
    read: Option<RetryCounters>,
    before: (u64, u64),
}

impl Retries {
    fn start(config: &Configuration) -> Self {
        Self {
            read: config.retries,
            before: config.retries.map_or((0, 0), |read| read()),
        }
    }

    fn finish(&self, lookups: u64) -> (Option<f64>, Option<u64>) {
        let Some(read) = self.read else {
            return (None, None);
        };
        let after = read();
        let restarts = after.0.saturating_sub(self.before.0);
        let fallbacks = after.1.saturating_sub(self.before.1);
        (
            Some(ratio(restarts, lookups).unwrap_or(0.0)),
            Some(fallbacks),
        )
    }
}

struct Context<'a> {
    options: &'a CompareOptions,
    plan: &'a Plan,
    oracle: Option<&'a Oracle>,
    schedule: keepup::Schedule,
    /// (rank, block) pairs held after the writes of the keep-up window.
    keepup_memberships: Option<u64>,
}

fn capacity_row(cx: &Context<'_>, config: &Configuration) -> Result<(Row, Verdicts), CompareError> {
    let backend = (config.build)(cx.options.lanes, config.fast_path.unwrap_or(false));
    let bar = progress_bar(cx.options.progress, format!("{} capacity", config.label()));
    let retries = Retries::start(config);
    let mut run = capacity::run(Arc::clone(&backend), cx.plan, cx.options.readers, &bar)?;
    let (restarts_per_read, fallbacks) = retries.finish(run.lookups);
    bar.finish_and_clear();
    let mut quiet = capacity::read_only(&backend, cx.plan, cx.options.readers, run.lookups)?;
    let verdicts = cx.oracle.map(|o| o.check(&*backend)).unwrap_or_default();
    drop(backend);
    let (p50, p99) = measure::p50_p99(&mut run.reads);
    let (quiet_p50, quiet_p99) = measure::p50_p99(&mut quiet);
    let row = Row {
        events: cx.plan.events,
        blocks: cx.plan.blocks,
        events_per_s: per_s(cx.plan.events, run.elapsed),
        block_ops_per_s: per_s(cx.plan.blocks, run.elapsed),
        read_p50_ns: p50,
        read_p99_ns: p99,
        overcounts: cx.oracle.map(|_| verdicts.overcounts),
        undercounts: cx.oracle.map(|_| verdicts.undercounts),
        hole_undercounts: cx.oracle.map(|_| verdicts.hole_undercounts),
        read_only_p50_ns: quiet_p50,
        read_only_p99_ns: quiet_p99,
        restarts_per_read,
        fallbacks,
        lookups: run.lookups,
        elapsed_s: run.elapsed.as_secs_f64(),
        read_samples: run.reads.len(),
        ..base_row(
            config,
            "capacity",
            &run.stats,
            cx.oracle.map(Oracle::memberships),
        )
    };
    Ok((row, verdicts))
}

fn keepup_row(cx: &Context<'_>, config: &Configuration) -> Result<Row, CompareError> {
    let backend = (config.build)(cx.options.lanes, config.fast_path.unwrap_or(false));
    let bar = progress_bar(cx.options.progress, format!("{} keep-up", config.label()));
    let retries = Retries::start(config);
    let mut run = keepup::run(
        Arc::clone(&backend),
        cx.plan,
        cx.options.readers,
        cx.schedule,
        &bar,
    )?;
    let (restarts_per_read, fallbacks) = retries.finish(run.reads.len() as u64);
    bar.finish_and_clear();
    drop(backend);
    let lookups = run.reads.len() as u64;
    let (read_p50, read_p99) = measure::p50_p99(&mut run.reads);
    let (update_p50, update_p99) = measure::p50_p99(&mut run.updates);
    // The offered span: the window, or less when the stream ends before it.
    let writes = cx.schedule.writes_in_window(cx.plan.ops.len());
    let span = Duration::try_from_secs_f64(writes as f64 / cx.schedule.rate)
        .map_or(cx.schedule.window, |d| d.min(cx.schedule.window));
    // Blocks applied in the window, prorated from the events applied.
    let applied_blocks = ratio(run.applied_in_window, run.issued_events)
        .map_or(0, |share| (share * run.issued_blocks as f64).round() as u64);
    Ok(Row {
        events: run.issued_events,
        blocks: run.issued_blocks,
        events_per_s: per_s(run.applied_in_window, span),
        block_ops_per_s: per_s(applied_blocks, span),
        read_p50_ns: read_p50,
        read_p99_ns: read_p99,
        update_p50_ns: update_p50,
        update_p99_ns: update_p99,
        backlog_at_end: Some(run.backlog),
        restarts_per_read,
        fallbacks,
        lookups,
        elapsed_s: span.as_secs_f64(),
        read_samples: run.reads.len(),
        ..base_row(config, "keepup", &run.stats, cx.keepup_memberships)
    })
}

fn describe(
    options: &CompareOptions,
    workload: &Workload,
    plan: &Plan,
    oracle: Option<&Oracle>,
    load: Duration,
) -> WorkloadInfo {
    let stats = workload.stats();
    let strict = oracle.map_or_else(
        || crtc_verification::workload::check::check_strict(workload).is_ok(),
        Oracle::strict,
    );
    WorkloadInfo {
        name: workload.name.clone(),
        seed: options.seed,
        scale: matches!(options.source, Source::Preset(_)).then_some(options.scale),
        events: plan.events,
        blocks: plan.blocks,
        queries: stats.queries,
        distinct_queries: oracle.map(|o| o.query_count() as u64),
        remove_workers: stats.remove_workers,
        decode_share: workload.decode_share(),
        strict,
        load_s: load.as_secs_f64(),
    }
}

fn failure(row: &Row, verdicts: &Verdicts, strict: bool) -> String {
    let mut message = format!(
        "{}: {} overcounts, {} unexplained undercounts, {} hole undercounts ({} stream) over {} distinct queries",
        row.label(),
        verdicts.overcounts,
        verdicts.undercounts,
        verdicts.hole_undercounts,
        if strict { "strict" } else { "non-strict" },
        verdicts.queries,
    );
    verdicts
        .examples
        .iter()
        .for_each(|e| message.push_str(&format!("\n    {e}")));
    message
}

/// A failure for refusals the reference model does not make: a tree out of
/// rank slots leaves ranks unindexed, so the model's verdicts on the row
/// would blame the tree for a configured limit.
fn unmodelled_refusals(row: &Row) -> Option<String> {
    let refused = *row.rejected.get(Refusal::SlotsExhausted.name())?;
    Some(format!(
        "{}: {refused} events refused because the rank slots ran out (the tree holds at most \
         {MAX_WORKERS} ranks); the reference model has no such limit, so this row's scores \
         cannot be checked against it",
        row.label()
    ))
}

/// Runs the whole comparison. Correctness failures do not stop the run; they
/// are listed in [`Report::failures`].
pub fn run(options: &CompareOptions) -> Result<Report, CompareError> {
    validate(options)?;
    let machine = measure::Machine::detect();
    let started = Instant::now();
    let workload = load_workload(options)?;
    let load = started.elapsed();
    let plan = Plan::new(&workload);
    // Unchained streams break the model's block identity: no verdicts.
    let oracle = (options.mode.capacity() && !options.unchained).then(|| Oracle::new(&workload));
    let info = describe(options, &workload, &plan, oracle.as_ref(), load);
    let upstream_check = if options.check_upstream {
        Some(run_check(&workload, options.check_limit)?)
    } else {
        None
    };
    drop(workload);
    let schedule = keepup::Schedule {
        rate: options.rate,
        window: options.window,
    };
    let keepup_memberships = options
        .mode
        .keepup()
        .then(|| oracle::memberships_after(&plan.ops[..schedule.writes_in_window(plan.ops.len())]));
    let cx = Context {
        options,
        plan: &plan,
        oracle: oracle.as_ref(),
        schedule,
        keepup_memberships,
    };
    let (mut rows, mut failures) = (Vec::new(), Vec::new());
    if let Some(check) = upstream_check.as_ref().filter(|c| c.ours_failures > 0) {
        failures.push(format!(
            "check-upstream: {} scores of ours break the read contract ({} stream): {:?}",
            check.ours_failures,
            if check.strict { "strict" } else { "non-strict" },
            check.ours_inexact
        ));
    }
    for config in configurations() {
        if options.mode.capacity() {
            let (row, verdicts) = capacity_row(&cx, &config)?;
            failures.extend(unmodelled_refusals(&row));
            if verdicts.failed(info.strict) {
                failures.push(failure(&row, &verdicts, info.strict));
            }
            rows.push(row);
        }
        if options.mode.keepup() {
            let row = keepup_row(&cx, &config)?;
            failures.extend(unmodelled_refusals(&row));
            rows.push(row);
        }
    }
    Ok(Report {
        machine,
        git_revision: measure::git_revision(),
        workload: info,
        argv: options.argv.clone(),
        rows,
        settings: Settings {
            lanes: options.lanes,
            readers: options.readers,
            mode: options.mode.name().to_owned(),
            rate: options.rate,
            window_s: options.window.as_secs_f64(),
        },
        failures,
        features: features(),
        git_dirty: measure::git_dirty(),
        upstream_check,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gate_runs_fast_and_general_then_the_baseline() {
        let configs = configurations();
        let labels: Vec<String> = configs.iter().map(Configuration::label).collect();
        let gates = gates().len();
        let upstream = usize::from(cfg!(feature = "upstream"));
        assert_eq!(labels.len(), 2 * gates + 1 + upstream);
        assert_eq!(&labels[..2], ["rwlock fast", "rwlock general"]);
        assert_eq!(labels[2 * gates], "global-lock");
        if upstream == 1 {
            assert_eq!(labels.last().map(String::as_str), Some("upstream-1.6.1"));
        }
        let mut names: Vec<&str> = configs.iter().map(|c| c.strategy).collect();
        names.dedup();
        let distinct: rustc_hash::FxHashSet<&str> = names.iter().copied().collect();
        assert_eq!(distinct.len(), names.len(), "row names repeat: {names:?}");
        let expected = 1
            + usize::from(cfg!(feature = "seqlock"))
            + usize::from(cfg!(feature = "epoch"))
            + usize::from(cfg!(feature = "seize"));
        assert_eq!(gates, expected);
        let backend = (configs[0].build)(1, true);
        backend.flush();
        assert_eq!(backend.applied(), 0);
        assert_eq!(serial_trees().len(), 2 * gates);
    }

    #[test]
    fn bad_options_are_errors() {
        let ok = CompareOptions::default();
        assert!(validate(&ok).is_ok());
        let cases = [
            CompareOptions {
                scale: f64::NAN,
                ..ok.clone()
            },
            CompareOptions {
                scale: 0.0,
                ..ok.clone()
            },
            CompareOptions {
                lanes: 0,
                ..ok.clone()
            },
            CompareOptions {
                rate: -1.0,
                ..ok.clone()
            },
            CompareOptions {
                window: Duration::ZERO,
                ..ok.clone()
            },
            CompareOptions {
                workers: Some(0),
                ..ok.clone()
            },
        ];
        for options in &cases {
            assert!(run(options).is_err(), "{options:?}");
        }
        let unknown = CompareOptions {
            source: Source::Preset("nope".to_owned()),
            ..ok.clone()
        };
        assert!(load_workload(&unknown).unwrap_err().0.contains("agentx"));
        let missing = CompareOptions {
            source: Source::Events("/no/such/file".into()),
            ..ok.clone()
        };
        assert!(load_workload(&missing)
            .unwrap_err()
            .0
            .contains("/no/such/file"));
    }

    #[test]
    fn malformed_event_files_name_the_file_and_line() {
        let path =
            std::env::temp_dir().join(format!("crtc-compare-bad-{}.jsonl", std::process::id()));
        std::fs::write(
            &path,
            "{\"t\":\"query\",\"locals\":[1]}\n{\"t\":\"stored\"}\n",
        )
        .unwrap();
        let options = CompareOptions {
            source: Source::Events(path.clone()),
            ..CompareOptions::default()
        };
        let error = load_workload(&options).unwrap_err().0;
        let _ = std::fs::remove_file(&path);
        assert!(
            error.contains(&path.display().to_string()) && error.contains("line 2"),
            "{error}"
        );
    }
}
